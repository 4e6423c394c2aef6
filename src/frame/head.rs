//! The id of a message that is too large to parse, from its first bytes.
//!
//! An oversize answer is never forwarded, but the request it answers must still get a
//! reply (ARCHITECTURE decision 4): the id is looked for among the top-level members
//! of the object the line starts with, skipping values without parsing them. The same
//! reading serves a line that failed to parse (a duplicate key).

use std::ops::Range;

/// What the first bytes of a message say about it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Head {
    /// The raw range of the top-level `"id"` member's value, when it is a string or a
    /// number and not cut off.
    pub id: Option<Range<usize>>,
    /// A top-level `method` member was seen: the message is a request (or a
    /// notification), not an answer.
    pub method: bool,
}

/// Read the top-level members of the object `head` starts with, as far as they are
/// whole: the id and whether there is a method. A batch (`[`) has no one id.
pub fn read_head(head: &[u8]) -> Head {
    let mut seen = Head::default();
    let mut at = skip_ws(head, 0);
    if head.get(at) != Some(&b'{') {
        return seen;
    }
    at += 1;
    loop {
        at = skip_ws(head, at);
        let Some(key) = string_at(head, at) else {
            return seen;
        };
        at = skip_ws(head, key.end);
        if head.get(at) != Some(&b':') {
            return seen;
        }
        at = skip_ws(head, at + 1);
        let name = &head[key.start + 1..key.end - 1];
        if name == b"method" {
            seen.method = true;
        }
        let Some(value) = value_at(head, at) else {
            return seen;
        };
        if name == b"id" && matches!(head[value.start], b'"' | b'-' | b'0'..=b'9') {
            seen.id.get_or_insert(value.clone());
        }
        at = skip_ws(head, value.end);
        match head.get(at) {
            Some(b',') => at += 1,
            _ => return seen,
        }
    }
}

fn skip_ws(b: &[u8], mut at: usize) -> usize {
    while matches!(b.get(at), Some(b' ' | b'\t' | b'\n' | b'\r')) {
        at += 1;
    }
    at
}

/// A complete string token starting at `at`, quotes included.
fn string_at(b: &[u8], at: usize) -> Option<Range<usize>> {
    if b.get(at) != Some(&b'"') {
        return None;
    }
    // memchr to the next quote or backslash: a head may be a whole message of many
    // megabytes, read on an I/O thread (the gateway's routing) where a byte loop costs.
    let mut i = at + 1;
    loop {
        i += memchr::memchr2(b'"', b'\\', b.get(i..)?)?;
        match b[i] {
            b'"' => return Some(at..i + 1),
            _ => i += 2,
        }
    }
}

/// A complete value starting at `at`: a string, a scalar, or a container skipped by
/// counting brackets outside strings.
fn value_at(b: &[u8], at: usize) -> Option<Range<usize>> {
    match *b.get(at)? {
        b'"' => string_at(b, at),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut i = at;
            loop {
                match *b.get(i)? {
                    b'"' => {
                        i = string_at(b, i)?.end;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(at..i + 1);
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
        }
        _ => {
            let end = at
                + b[at..]
                    .iter()
                    .position(|c| matches!(c, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r'))?;
            (end > at).then_some(at..end)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(head: &str) -> Option<&str> {
        read_head(head.as_bytes()).id.map(|r| &head[r])
    }

    #[test]
    fn tells_requests_from_answers() {
        assert!(
            read_head(br#"{"jsonrpc":"2.0","id":1,"method":"sampling/createMessage","params":{"#)
                .method
        );
        assert!(!read_head(br#"{"jsonrpc":"2.0","id":1,"result":{"method":"x"}}"#).method);
    }

    #[test]
    fn finds_the_top_level_id_before_the_cut() {
        assert_eq!(
            id(r#"{"jsonrpc":"2.0","id":7,"result":{"content":"xx"#),
            Some("7")
        );
        assert_eq!(
            id(r#"{ "result": {"id": 9, "a": "}\""}, "id" : "a\"b", "x"#),
            Some(r#""a\"b""#)
        );
        assert_eq!(id(r#"{"jsonrpc":"2.0","id":2.0,"result":"#), Some("2.0"));
    }

    #[test]
    fn no_id_when_cut_off_or_absent() {
        assert_eq!(id(r#"{"jsonrpc":"2.0","result":{"text":"aaaa"#), None);
        assert_eq!(id(r#"{"jsonrpc":"2.0","id":12"#), None);
        assert_eq!(id(r#"{"jsonrpc":"2.0","id":null,"#), None);
        assert_eq!(id(r#"[{"jsonrpc":"2.0","id":1}"#), None);
        assert_eq!(id("not json"), None);
    }
}
