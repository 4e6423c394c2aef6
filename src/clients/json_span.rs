//! A span-tracking JSON reader: every value, key and member knows its byte range in the
//! original text, so edits can splice bytes instead of re-serialising the whole file.
//!
//! serde_json decides whether a strict JSON file is valid (and where it is not); this
//! reader exists only to learn *where* things are. In [`Dialect::Jsonc`] it also skips
//! `//` and `/* */` comments and tolerates trailing commas, which VS Code's `mcp.json`
//! allows, and reports its own line and column for anything it cannot read.

use std::ops::Range;

/// Which flavour of JSON a client file is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// RFC 8259 JSON (Claude, Cursor, Windsurf).
    Json,
    /// JSON with comments and trailing commas (VS Code).
    Jsonc,
}

/// A JSON value and the bytes it occupies.
#[derive(Debug, Clone)]
pub struct Node {
    /// Byte range of the whole value, from its first to its last byte.
    pub span: Range<usize>,
    /// What kind of value it is.
    pub kind: Kind,
}

/// The shape of a [`Node`].
#[derive(Debug, Clone)]
pub enum Kind {
    /// An object's members, in file order.
    Object(Vec<Member>),
    /// An array's elements, in file order.
    Array(Vec<Node>),
    /// A string, decoded.
    String(String),
    /// Any other scalar (number, `true`, `false`, `null`).
    Scalar,
}

/// One `"key": value` pair of an object.
#[derive(Debug, Clone)]
pub struct Member {
    /// The decoded key.
    pub key: String,
    /// Byte range of the key including its quotes.
    pub key_span: Range<usize>,
    /// The value.
    pub value: Node,
}

/// Where and why the text could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message} at line {line} column {column}")]
pub struct SyntaxError {
    /// What was wrong.
    pub message: String,
    /// 1-based line.
    pub line: usize,
    /// 1-based column (in characters).
    pub column: usize,
}

impl SyntaxError {
    fn at(text: &str, offset: usize, message: impl Into<String>) -> Self {
        let (line, column) = line_column(text, offset);
        SyntaxError {
            message: message.into(),
            line,
            column,
        }
    }
}

/// 1-based line and column of a byte offset.
pub fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, before[line_start..].chars().count() + 1)
}

/// Nesting limit: client configs are shallow; a deeper file is not one we should edit.
const MAX_DEPTH: usize = 128;

/// Read a whole document. A leading UTF-8 byte-order mark is skipped.
pub fn parse(text: &str, dialect: Dialect) -> Result<Node, SyntaxError> {
    if dialect == Dialect::Json {
        // serde_json is the authority on strict JSON, and its line/column are what users
        // of other JSON tools expect to see.
        let body = text.strip_prefix('\u{feff}').unwrap_or(text);
        if let Err(e) = serde_json::from_str::<serde::de::IgnoredAny>(body) {
            let message = e.to_string();
            let message = match message.rfind(" at line ") {
                Some(i) => message[..i].to_string(),
                None => message,
            };
            return Err(SyntaxError {
                message,
                line: e.line(),
                column: e.column(),
            });
        }
    }
    let mut reader = Reader {
        text,
        bytes: text.as_bytes(),
        pos: if text.starts_with('\u{feff}') { 3 } else { 0 },
        dialect,
        depth: 0,
    };
    reader.skip_insignificant()?;
    let node = reader.value()?;
    reader.skip_insignificant()?;
    if reader.pos != reader.bytes.len() {
        return Err(reader.error("trailing characters after the JSON value"));
    }
    Ok(node)
}

struct Reader<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
    dialect: Dialect,
    depth: usize,
}

impl Reader<'_> {
    fn error(&self, message: &str) -> SyntaxError {
        SyntaxError::at(self.text, self.pos, message)
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    /// Whitespace, and comments in JSONC.
    fn skip_insignificant(&mut self) -> Result<(), SyntaxError> {
        loop {
            match self.peek() {
                Some(b' ' | b'\t' | b'\n' | b'\r') => self.pos += 1,
                Some(b'/') if self.dialect == Dialect::Jsonc => {
                    match self.bytes.get(self.pos + 1) {
                        Some(b'/') => {
                            while !matches!(self.peek(), None | Some(b'\n')) {
                                self.pos += 1;
                            }
                        }
                        Some(b'*') => {
                            let start = self.pos;
                            let Some(end) = self.text[self.pos + 2..].find("*/") else {
                                self.pos = start;
                                return Err(self.error("unterminated block comment"));
                            };
                            self.pos += 2 + end + 2;
                        }
                        _ => return Err(self.error("expected a comment after '/'")),
                    }
                }
                _ => return Ok(()),
            }
        }
    }

    fn value(&mut self) -> Result<Node, SyntaxError> {
        let start = self.pos;
        match self.peek() {
            Some(b'{') => self.nested(|r| r.object_body(start)),
            Some(b'[') => self.nested(|r| r.array_body(start)),
            Some(b'"') => {
                let value = self.string()?;
                Ok(Node {
                    span: start..self.pos,
                    kind: Kind::String(value),
                })
            }
            Some(b'-' | b'0'..=b'9' | b't' | b'f' | b'n') => {
                while matches!(
                    self.peek(),
                    Some(b'-' | b'+' | b'.' | b'0'..=b'9' | b'a'..=b'z' | b'A'..=b'Z')
                ) {
                    self.pos += 1;
                }
                let token = &self.text[start..self.pos];
                let valid = matches!(token, "true" | "false" | "null")
                    || serde_json::from_str::<serde_json::Number>(token).is_ok();
                if !valid {
                    self.pos = start;
                    return Err(self.error("expected a value"));
                }
                Ok(Node {
                    span: start..self.pos,
                    kind: Kind::Scalar,
                })
            }
            None => Err(self.error("unexpected end of file")),
            Some(_) => Err(self.error("expected a value")),
        }
    }

    fn nested(
        &mut self,
        body: impl FnOnce(&mut Self) -> Result<Node, SyntaxError>,
    ) -> Result<Node, SyntaxError> {
        if self.depth >= MAX_DEPTH {
            return Err(self.error("nesting too deep"));
        }
        self.depth += 1;
        let node = body(self);
        self.depth -= 1;
        node
    }

    fn object_body(&mut self, start: usize) -> Result<Node, SyntaxError> {
        self.pos += 1; // '{'
        let mut members = Vec::new();
        loop {
            self.skip_insignificant()?;
            match self.peek() {
                Some(b'}') if members.is_empty() || self.dialect == Dialect::Jsonc => {
                    self.pos += 1;
                    break;
                }
                Some(b'"') => {}
                _ => return Err(self.error("expected a string key")),
            }
            let key_start = self.pos;
            let key = self.string()?;
            let key_span = key_start..self.pos;
            self.skip_insignificant()?;
            if self.peek() != Some(b':') {
                return Err(self.error("expected ':'"));
            }
            self.pos += 1;
            self.skip_insignificant()?;
            let value = self.value()?;
            members.push(Member {
                key,
                key_span,
                value,
            });
            self.skip_insignificant()?;
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    break;
                }
                _ => return Err(self.error("expected ',' or '}'")),
            }
        }
        Ok(Node {
            span: start..self.pos,
            kind: Kind::Object(members),
        })
    }

    fn array_body(&mut self, start: usize) -> Result<Node, SyntaxError> {
        self.pos += 1; // '['
        let mut elements = Vec::new();
        loop {
            self.skip_insignificant()?;
            if self.peek() == Some(b']') && (elements.is_empty() || self.dialect == Dialect::Jsonc)
            {
                self.pos += 1;
                break;
            }
            elements.push(self.value()?);
            self.skip_insignificant()?;
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    break;
                }
                _ => return Err(self.error("expected ',' or ']'")),
            }
        }
        Ok(Node {
            span: start..self.pos,
            kind: Kind::Array(elements),
        })
    }

    /// A string token starting at `"`; returns its decoded value.
    fn string(&mut self) -> Result<String, SyntaxError> {
        let start = self.pos;
        self.pos += 1;
        loop {
            match self.peek() {
                None => {
                    self.pos = start;
                    return Err(self.error("unterminated string"));
                }
                Some(b'"') => break,
                Some(b'\\') => self.pos += 2,
                Some(b) if b < 0x20 => return Err(self.error("control character in string")),
                Some(_) => self.pos += 1,
            }
        }
        self.pos += 1;
        let raw = self.text.get(start..self.pos).unwrap_or_default();
        serde_json::from_str::<String>(raw).map_err(|_| {
            let at = start;
            SyntaxError::at(self.text, at, "invalid string escape")
        })
    }
}

impl Node {
    /// The member named `key`, if this is an object that has one (the last one wins,
    /// as in every JSON reader clients use).
    pub fn member(&self, key: &str) -> Option<&Member> {
        match &self.kind {
            Kind::Object(members) => members.iter().rev().find(|m| m.key == key),
            _ => None,
        }
    }

    /// The value at `path` (a sequence of object keys).
    pub fn at<S: AsRef<str>>(&self, path: &[S]) -> Option<&Node> {
        path.iter().try_fold(self, |node, key| {
            node.member(key.as_ref()).map(|m| &m.value)
        })
    }

    /// The decoded string, if this is a string.
    pub fn as_str(&self) -> Option<&str> {
        match &self.kind {
            Kind::String(s) => Some(s),
            _ => None,
        }
    }

    /// The members, if this is an object.
    pub fn members(&self) -> Option<&[Member]> {
        match &self.kind {
            Kind::Object(m) => Some(m),
            _ => None,
        }
    }

    /// The elements, if this is an array.
    pub fn elements(&self) -> Option<&[Node]> {
        match &self.kind {
            Kind::Array(e) => Some(e),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_point_at_the_original_bytes() {
        let text = "{ \"a\" :[1, \"x\\u0041\" ],\n\"b\":{}}\n";
        let root = parse(text, Dialect::Json).unwrap();
        let a = root.member("a").unwrap();
        assert_eq!(&text[a.key_span.clone()], "\"a\"");
        assert_eq!(&text[a.value.span.clone()], "[1, \"x\\u0041\" ]");
        let els = a.value.elements().unwrap();
        assert_eq!(els[1].as_str(), Some("xA"));
        assert_eq!(&text[root.at(&["b"]).unwrap().span.clone()], "{}");
    }

    #[test]
    fn invalid_json_reports_line_and_column() {
        let err = parse("{\n  \"a\": 1,\n}\n", Dialect::Json).unwrap_err();
        assert_eq!((err.line, err.column), (3, 1));
    }

    #[test]
    fn jsonc_skips_comments_and_trailing_commas() {
        let text = "// top\n{ /* c */ \"servers\": { \"x\": [1, 2,], }, }";
        let root = parse(text, Dialect::Jsonc).unwrap();
        assert_eq!(
            &text[root.at(&["servers", "x"]).unwrap().span.clone()],
            "[1, 2,]"
        );
        let err = parse("{ \"a\": 1 /* open", Dialect::Jsonc).unwrap_err();
        assert_eq!((err.line, err.column), (1, 10));
        assert!(parse("{ \"a\": 1, }", Dialect::Json).is_err());
    }

    #[test]
    fn a_byte_order_mark_is_skipped_and_spans_still_index_the_text() {
        let text = "\u{feff}{\"a\": \"b\"}";
        for dialect in [Dialect::Json, Dialect::Jsonc] {
            let root = parse(text, dialect).unwrap();
            assert_eq!(&text[root.at(&["a"]).unwrap().span.clone()], "\"b\"");
        }
    }

    #[test]
    fn never_panics_on_truncated_input() {
        let text = "{\"a\": [\"b\\\"\", {\"c\": tru}]}";
        for end in 0..text.len() {
            let _ = parse(&text[..end], Dialect::Jsonc);
            let _ = parse(&text[..end], Dialect::Json);
        }
    }
}
