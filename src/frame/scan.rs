//! The strict single-pass JSON scanner behind [`super::Parsed::parse`].
//!
//! One pass over the bytes with an explicit stack instead of recursion, so a large
//! `max_depth` cannot overflow a 2 MiB tokio worker stack. Every buffer lives in
//! [`Parsed`] and is cleared, not freed, so a warm parser does not allocate.
//!
//! Syntax errors ([`FrameError::Parse`]) are returned at once. JSON-RPC shape errors
//! ([`FrameError::Invalid`]) are remembered and returned only once the whole line has
//! proved to be JSON: a line that is not JSON must be answered with -32700 whatever
//! else is wrong with it, and the id of a bad message may come after the problem.

use std::ops::Range;

use super::string::{RawCursor, decode_unicode_escape, plain_run};
use super::{
    FrameError, Limits, Message, MessageKind, Parsed, TextRef, Token, TokenKind, parse_error,
};

/// Buffers the scanner reuses between frames.
#[derive(Debug, Default)]
pub(crate) struct Scratch {
    stack: Vec<Container>,
    /// Token indices of the keys of every open object, innermost last.
    keys: Vec<u32>,
}

/// What a value is, relative to the JSON-RPC message around it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Member {
    Other,
    Batch,
    Message,
    Jsonrpc,
    Id,
    Method,
    Params,
    Result,
    Error,
    /// `params.name`
    ToolName,
    /// `params.arguments`
    Arguments,
}

#[derive(Debug, Clone, Copy)]
struct Container {
    object: bool,
    member: Member,
    /// Where this object's keys start in `Scratch::keys`.
    keys_base: u32,
    /// First token inside this container.
    tok_start: u32,
}

#[derive(Debug, Clone)]
enum IdSeen {
    /// A string or an integer: its raw text, quotes included.
    Valid(Range<usize>),
    Null(Range<usize>),
    /// Wrong type, or given twice. A number that is not an integer (`2.0`) keeps its
    /// text: such a response cannot be delivered, but the request it was meant to answer
    /// can still be told (ids are compared by value by the session).
    Bad(Option<Range<usize>>),
}

#[derive(Debug, Clone)]
struct ParamsSeen {
    object: bool,
    tokens: Range<usize>,
}

/// What has been seen of the message being scanned.
#[derive(Debug, Default)]
struct MessageState {
    start: usize,
    tok_start: usize,
    jsonrpc_ok: bool,
    id: Option<IdSeen>,
    method: Option<TextRef>,
    params: Option<ParamsSeen>,
    result: bool,
    error: bool,
    /// The tokens of a response's `result` or `error` (its arguments, for rules).
    body: Option<ParamsSeen>,
    /// `Some(None)`: present but not a string.
    name: Option<Option<TextRef>>,
    /// `Some(None)`: present but not an object.
    arguments: Option<Option<Range<usize>>>,
    /// The first problem found inside this message.
    invalid: Option<&'static str>,
}

/// Validate `raw` as one strict JSON-RPC frame and fill `out`; returns the longest
/// valid UTF-8 prefix of `raw` (all of it, when the frame parsed). On error the contents
/// of `out` are unspecified (but its messages are cleared).
pub(crate) fn parse_into<'r>(
    out: &mut Parsed,
    raw: &'r [u8],
    limits: &Limits,
) -> Result<&'r str, FrameError> {
    out.messages.clear();
    out.tokens.clear();
    out.text.clear();
    out.resume_points.clear();
    out.batch = false;
    out.scratch.stack.clear();
    out.scratch.keys.clear();
    // Token ranges are u32: a frame past 4 GiB is refused whatever the limit says.
    if raw.len() > limits.max_frame_bytes || raw.len() > u32::MAX as usize {
        return Err(FrameError::TooLarge {
            len: raw.len(),
            limit: limits.max_frame_bytes.min(u32::MAX as usize),
        });
    }
    // One validation of the whole frame; string runs inside the valid prefix are then
    // sliced from it instead of being validated one by one.
    let valid = match std::str::from_utf8(raw) {
        Ok(all) => all,
        Err(e) => std::str::from_utf8(&raw[..e.valid_up_to()]).unwrap_or(""),
    };
    let mut scanner = Scanner {
        raw,
        valid,
        pos: 0,
        out,
        max_depth: usize::from(limits.max_depth),
        msg: MessageState::default(),
        in_message: false,
        invalid: None,
    };
    let result = scanner.run().and_then(|()| match scanner.invalid.take() {
        Some((reason, id)) => Err(FrameError::Invalid { reason, id }),
        None => Ok(()),
    });
    if result.is_err() {
        out.messages.clear();
    }
    result.map(|()| valid)
}

/// The decoded text a [`TextRef`] names, given the frame's raw bytes and decoded text.
pub(crate) fn text_of<'t>(
    raw: &'t [u8],
    raw_str: Option<&'t str>,
    text: &'t str,
    t: TextRef,
) -> &'t str {
    match t {
        TextRef::Raw { start, end } => match raw_str {
            Some(all) => all.get(start as usize..end as usize),
            None => raw
                .get(start as usize..end as usize)
                .and_then(|b| std::str::from_utf8(b).ok()),
        }
        .unwrap_or(""),
        TextRef::Decoded { start, end } => text.get(start as usize..end as usize).unwrap_or(""),
    }
}

/// The bytes of a [`TextRef`], without re-checking UTF-8 (for comparisons).
fn text_bytes<'t>(raw: &'t [u8], text: &'t str, t: TextRef) -> &'t [u8] {
    match t {
        TextRef::Raw { start, end } => raw.get(start as usize..end as usize).unwrap_or(b""),
        TextRef::Decoded { start, end } => text
            .as_bytes()
            .get(start as usize..end as usize)
            .unwrap_or(b""),
    }
}

struct Scanner<'r, 'p> {
    raw: &'r [u8],
    /// The longest valid UTF-8 prefix of `raw`.
    valid: &'r str,
    pos: usize,
    out: &'p mut Parsed,
    max_depth: usize,
    msg: MessageState,
    in_message: bool,
    /// The first JSON-RPC shape problem of the frame, with the id of its message.
    invalid: Option<(&'static str, Option<Range<usize>>)>,
}

impl Scanner<'_, '_> {
    fn peek(&self) -> Option<u8> {
        self.raw.get(self.pos).copied()
    }

    /// Refuse `raw[start..end]` unless it is UTF-8.
    fn check_utf8(&self, start: usize, end: usize) -> Result<(), FrameError> {
        if end <= self.valid.len() {
            return Ok(());
        }
        utf8(self.raw, self.valid, start, end).map(|_| ())
    }

    #[inline]
    fn skip_ws(&mut self) -> Result<(), FrameError> {
        // Compact JSON, the usual case, has no whitespace at all: one compare.
        if self.raw.get(self.pos).is_some_and(|&b| b > b' ') {
            return Ok(());
        }
        while let Some(&b) = self.raw.get(self.pos) {
            match b {
                b' ' | b'\t' | b'\n' => self.pos += 1,
                // The codec removed only the `\n`; a `\r` is how one line can look like
                // two to a different parser downstream.
                b'\r' => return Err(parse_error(self.pos, "carriage return in frame")),
                _ => break,
            }
        }
        Ok(())
    }

    fn set_invalid(&mut self, reason: &'static str, id: Option<Range<usize>>) {
        if self.invalid.is_none() {
            self.invalid = Some((reason, id));
        }
    }

    /// A shape problem inside the current message (its id is attached when it closes),
    /// or of the frame itself.
    fn fail(&mut self, reason: &'static str) {
        if self.in_message {
            self.msg.invalid.get_or_insert(reason);
        } else {
            self.set_invalid(reason, None);
        }
    }

    /// Nesting depth of a token about to be pushed, counted from the message object.
    fn depth(&self) -> u16 {
        let d = self.out.scratch.stack.len() - usize::from(self.out.batch);
        // The stack never exceeds `max_depth: u16`.
        d as u16
    }

    fn run(&mut self) -> Result<(), FrameError> {
        self.skip_ws()?;
        let mut member = match self.peek() {
            None if self.raw.is_empty() => return Err(parse_error(0, "empty frame")),
            None => return Err(parse_error(self.pos, "no JSON value in frame")),
            Some(b'{') => Member::Message,
            Some(b'[') => {
                self.out.batch = true;
                Member::Batch
            }
            Some(_) => {
                self.set_invalid("a frame must be a JSON-RPC object or a batch array", None);
                Member::Other
            }
        };
        // White space is skipped where a byte that is not a token's first turns up, not
        // before every token: compact JSON, the usual frame, then pays for none.
        'value: loop {
            let start = self.pos;
            match self.peek() {
                Some(b' ' | b'\t' | b'\n' | b'\r') => {
                    self.skip_ws()?;
                    continue 'value;
                }
                Some(b'{') => {
                    self.open(true, member, start)?;
                    self.pos += 1;
                    self.skip_ws()?;
                    if self.peek() == Some(b'}') {
                        self.pos += 1;
                        self.close();
                    } else {
                        member = self.key()?;
                        continue 'value;
                    }
                }
                Some(b'[') => {
                    self.open(false, member, start)?;
                    self.pos += 1;
                    self.skip_ws()?;
                    if self.peek() == Some(b']') {
                        self.pos += 1;
                        self.close();
                    } else {
                        member = self.element_member();
                        continue 'value;
                    }
                }
                Some(b'"') => {
                    let tok = self.string(TokenKind::String)?;
                    self.scalar(member, tok, start);
                }
                Some(b'-' | b'0'..=b'9') => {
                    let tok = self.number()?;
                    self.scalar(member, tok, start);
                }
                Some(b't') => {
                    let tok = self.literal(b"true", TokenKind::True)?;
                    self.scalar(member, tok, start);
                }
                Some(b'f') => {
                    let tok = self.literal(b"false", TokenKind::False)?;
                    self.scalar(member, tok, start);
                }
                Some(b'n') => {
                    let tok = self.literal(b"null", TokenKind::Null)?;
                    self.scalar(member, tok, start);
                }
                Some(_) => return Err(parse_error(start, "expected a JSON value")),
                None => return Err(parse_error(start, "unexpected end of frame")),
            }
            // After a complete value: a separator, a closer, or the end of the frame.
            loop {
                let Some(top) = self.out.scratch.stack.last().copied() else {
                    break 'value;
                };
                match self.peek() {
                    Some(b' ' | b'\t' | b'\n' | b'\r') => self.skip_ws()?,
                    Some(b',') => {
                        self.pos += 1;
                        member = if top.object {
                            self.key()?
                        } else {
                            self.element_member()
                        };
                        continue 'value;
                    }
                    Some(b'}') if top.object => {
                        self.pos += 1;
                        self.close();
                    }
                    Some(b']') if !top.object => {
                        self.pos += 1;
                        self.close();
                    }
                    Some(_) if top.object => {
                        return Err(parse_error(self.pos, "expected ',' or '}'"));
                    }
                    Some(_) => return Err(parse_error(self.pos, "expected ',' or ']'")),
                    None => return Err(parse_error(self.pos, "unexpected end of frame")),
                }
            }
        }
        self.skip_ws()?;
        if self.pos != self.raw.len() {
            return Err(parse_error(
                self.pos,
                "trailing characters after the JSON value",
            ));
        }
        Ok(())
    }

    /// What the next element of the innermost (array) container is.
    fn element_member(&self) -> Member {
        match self.out.scratch.stack.last() {
            Some(c) if c.member == Member::Batch => Member::Message,
            _ => Member::Other,
        }
    }

    fn open(&mut self, object: bool, member: Member, start: usize) -> Result<(), FrameError> {
        if self.out.scratch.stack.len() >= self.max_depth {
            let id = match &self.msg.id {
                Some(IdSeen::Valid(r) | IdSeen::Null(r)) if self.in_message => Some(r.clone()),
                _ => None,
            };
            return Err(FrameError::Invalid {
                reason: "nesting deeper than the limit",
                id,
            });
        }
        match member {
            Member::Message if object => {
                self.msg = MessageState {
                    start,
                    tok_start: self.out.tokens.len(),
                    ..MessageState::default()
                };
                self.in_message = true;
            }
            Member::Message => self.set_invalid("a batch element must be an object", None),
            Member::Jsonrpc => self.fail("jsonrpc must be \"2.0\""),
            Member::Id => self.bad_id(),
            Member::Method => self.fail("method must be a string"),
            Member::Result => self.msg.result = true,
            Member::Error => {
                self.msg.error = true;
                if !object {
                    self.fail("error must be an object");
                }
            }
            Member::ToolName => self.msg.name = Some(None),
            Member::Params | Member::Arguments | Member::Batch | Member::Other => {}
        }
        let scratch = &mut self.out.scratch;
        scratch.stack.push(Container {
            object,
            member,
            keys_base: scratch.keys.len() as u32,
            tok_start: self.out.tokens.len() as u32,
        });
        Ok(())
    }

    fn close(&mut self) {
        let Some(c) = self.out.scratch.stack.pop() else {
            return;
        };
        if c.object {
            let base = c.keys_base as usize;
            let dup = has_duplicate(
                &mut self.out.scratch.keys[base..],
                &self.out.tokens,
                self.raw,
                &self.out.text,
            );
            self.out.scratch.keys.truncate(base);
            if dup {
                self.fail("duplicate key in an object");
            }
        }
        let tokens = c.tok_start as usize..self.out.tokens.len();
        match c.member {
            Member::Message if c.object => self.finish_message(),
            Member::Params => {
                self.msg.params = Some(ParamsSeen {
                    object: c.object,
                    tokens,
                })
            }
            Member::Arguments => self.msg.arguments = Some(c.object.then_some(tokens)),
            Member::Result | Member::Error => {
                self.msg.body = Some(ParamsSeen {
                    object: c.object,
                    tokens,
                })
            }
            // `[]`; a batch whose elements were all refused is already invalid.
            Member::Batch if self.out.messages.is_empty() => self.set_invalid("empty batch", None),
            _ => {}
        }
    }

    /// Parse `"key"` and the `:` after it; returns what the value that follows is.
    fn key(&mut self) -> Result<Member, FrameError> {
        if self.peek() != Some(b'"') {
            self.skip_ws()?;
            if self.peek() != Some(b'"') {
                return Err(parse_error(self.pos, "expected a string key"));
            }
        }
        let tok = self.string(TokenKind::Key)?;
        let idx = (self.out.tokens.len() - 1) as u32;
        self.out.scratch.keys.push(idx);
        if self.peek() != Some(b':') {
            self.skip_ws()?;
            if self.peek() != Some(b':') {
                return Err(parse_error(self.pos, "expected ':' after a key"));
            }
        }
        self.pos += 1;
        let parent = self
            .out
            .scratch
            .stack
            .last()
            .map_or(Member::Other, |c| c.member);
        if !matches!(parent, Member::Message | Member::Params) {
            return Ok(Member::Other);
        }
        let key = text_bytes(self.raw, &self.out.text, tok.text);
        // By length first: each comparison is then of a known size, done inline.
        Ok(match (parent, key.len()) {
            (Member::Message, 2) if key == b"id" => Member::Id,
            (Member::Message, 5) if key == b"error" => Member::Error,
            (Member::Message, 6) => match key {
                b"method" => Member::Method,
                b"params" => Member::Params,
                b"result" => Member::Result,
                _ => Member::Other,
            },
            (Member::Message, 7) if key == b"jsonrpc" => Member::Jsonrpc,
            (Member::Params, 4) if key == b"name" => Member::ToolName,
            (Member::Params, 9) if key == b"arguments" => Member::Arguments,
            _ => Member::Other,
        })
    }

    fn bad_id(&mut self) {
        self.msg.id = Some(IdSeen::Bad(None));
        self.fail("id must be a string, an integer or null");
    }

    /// Record what a scalar value means for the message around it.
    fn scalar(&mut self, member: Member, tok: Token, start: usize) {
        let text = || text_bytes(self.raw, &self.out.text, tok.text);
        match member {
            Member::Other | Member::Batch => {}
            Member::Message => self.set_invalid("a batch element must be an object", None),
            Member::Jsonrpc => {
                if tok.kind == TokenKind::String && text() == b"2.0" {
                    self.msg.jsonrpc_ok = true;
                } else {
                    self.fail("jsonrpc must be \"2.0\"");
                }
            }
            Member::Id => {
                let range = start..self.pos;
                let integer = tok.kind == TokenKind::Number
                    && !text().iter().any(|b| matches!(b, b'.' | b'e' | b'E'));
                if self.msg.id.is_some() {
                    // Given twice: the duplicate-key check refuses the message, and
                    // neither id can be trusted for the answer.
                    self.msg.id = Some(IdSeen::Bad(None));
                } else if tok.kind == TokenKind::String || integer {
                    self.msg.id = Some(IdSeen::Valid(range));
                } else if tok.kind == TokenKind::Null {
                    self.msg.id = Some(IdSeen::Null(range));
                } else if tok.kind == TokenKind::Number {
                    self.msg.id = Some(IdSeen::Bad(Some(range)));
                    self.fail("id must be a string, an integer or null");
                } else {
                    self.bad_id();
                }
            }
            Member::Method => {
                if tok.kind == TokenKind::String {
                    self.msg.method = Some(tok.text);
                } else {
                    self.fail("method must be a string");
                }
            }
            Member::Params => self.fail("params must be an object or an array"),
            Member::Result => self.msg.result = true,
            Member::Error => {
                self.msg.error = true;
                self.fail("error must be an object");
            }
            Member::ToolName => {
                self.msg.name = Some((tok.kind == TokenKind::String).then_some(tok.text));
            }
            Member::Arguments => self.msg.arguments = Some(None),
        }
    }

    /// The message object just closed: decide its kind, its arguments, and push it.
    fn finish_message(&mut self) {
        self.in_message = false;
        let m = std::mem::take(&mut self.msg);
        let id = match &m.id {
            Some(IdSeen::Valid(r) | IdSeen::Null(r) | IdSeen::Bad(Some(r))) => Some(r.clone()),
            _ => None,
        };
        match self.classify(&m) {
            Ok(msg) => self.out.messages.push(msg),
            Err(reason) => self.set_invalid(reason, id),
        }
    }

    fn classify(&mut self, m: &MessageState) -> Result<Message, &'static str> {
        if let Some(reason) = m.invalid {
            return Err(reason);
        }
        if !m.jsonrpc_ok {
            return Err("jsonrpc must be \"2.0\"");
        }
        let end_tok = self.out.tokens.len();
        let empty = end_tok..end_tok;
        let id = match &m.id {
            Some(IdSeen::Valid(r) | IdSeen::Null(r)) => Some(r.clone()),
            _ => None,
        };
        let mut tool = None;
        let (kind, args, arg_depth) = if let Some(method) = m.method {
            if m.result || m.error {
                return Err("a request cannot carry result or error");
            }
            let name = text_of(self.raw, Some(self.valid), &self.out.text, method);
            if !is_method_name(name) {
                return Err(
                    "method must be a non-empty name without whitespace or control characters",
                );
            }
            let kind = match m.id {
                None => MessageKind::Notification,
                Some(IdSeen::Null(_)) => return Err("a request id must not be null"),
                Some(_) => MessageKind::Request,
            };
            if name == "tools/call" {
                match &m.params {
                    Some(p) if p.object => {}
                    _ => return Err("tools/call needs params as an object"),
                }
                match m.name {
                    Some(Some(t)) => tool = Some(t),
                    _ => return Err("tools/call needs params.name as a string"),
                }
                match &m.arguments {
                    None => (kind, empty, 0),
                    Some(Some(r)) => (kind, r.clone(), 3),
                    Some(None) => return Err("tools/call arguments must be an object"),
                }
            } else {
                match &m.params {
                    None => (kind, empty, 0),
                    Some(p) => (kind, p.tokens.clone(), if p.object { 2 } else { 0 }),
                }
            }
        } else {
            if m.params.is_some() {
                return Err("a response cannot carry params");
            }
            let kind = match (m.result, m.error) {
                (true, true) => return Err("a response cannot carry both result and error"),
                (true, false) => MessageKind::Result,
                (false, true) => MessageKind::Error,
                (false, false) => return Err("a message needs method, result or error"),
            };
            if m.id.is_none() {
                return Err("a response needs an id");
            }
            // A response's arguments are its body, so that inbound rules can judge what
            // a client answers a server (a secret in a sampling result).
            match &m.body {
                Some(b) => (kind, b.tokens.clone(), if b.object { 2 } else { 0 }),
                None => (kind, empty, 0),
            }
        };
        if arg_depth > 0 {
            let mut current = Token::NO_ARG;
            for (i, tok) in self.out.tokens[args.clone()].iter_mut().enumerate() {
                if tok.kind == TokenKind::Key && tok.depth == arg_depth {
                    current = (args.start + i) as u32;
                }
                tok.arg = current;
            }
        }
        Ok(Message {
            span: m.start..self.pos,
            kind,
            id,
            method: m.method,
            tool,
            tokens: m.tok_start..end_tok,
            args,
        })
    }

    fn push_token(&mut self, kind: TokenKind, raw: Range<usize>, text: TextRef) -> Token {
        let tok = Token {
            kind,
            raw: (raw.start as u32, raw.end as u32),
            text,
            depth: self.depth(),
            arg: Token::NO_ARG,
        };
        self.out.tokens.push(tok);
        tok
    }

    fn literal(&mut self, word: &'static [u8], kind: TokenKind) -> Result<Token, FrameError> {
        let start = self.pos;
        if !self.raw[start..].starts_with(word) {
            return Err(parse_error(start, "expected a JSON value"));
        }
        self.pos += word.len();
        let text = TextRef::Raw {
            start: start as u32,
            end: self.pos as u32,
        };
        Ok(self.push_token(kind, start..self.pos, text))
    }

    fn number(&mut self) -> Result<Token, FrameError> {
        let raw = self.raw;
        let start = self.pos;
        let mut i = start;
        let digit = |i: usize| raw.get(i).is_some_and(u8::is_ascii_digit);
        if raw.get(i) == Some(&b'-') {
            i += 1;
        }
        match raw.get(i) {
            Some(b'0') => {
                i += 1;
                if digit(i) {
                    return Err(parse_error(i, "leading zeros in a number"));
                }
            }
            Some(b'1'..=b'9') => {
                while digit(i) {
                    i += 1;
                }
            }
            _ => return Err(parse_error(i, "expected a digit")),
        }
        if raw.get(i) == Some(&b'.') {
            i += 1;
            if !digit(i) {
                return Err(parse_error(i, "expected a digit after '.'"));
            }
            while digit(i) {
                i += 1;
            }
        }
        if matches!(raw.get(i), Some(b'e' | b'E')) {
            i += 1;
            if matches!(raw.get(i), Some(b'+' | b'-')) {
                i += 1;
            }
            if !digit(i) {
                return Err(parse_error(i, "expected a digit in the exponent"));
            }
            while digit(i) {
                i += 1;
            }
        }
        self.pos = i;
        let text = TextRef::Raw {
            start: start as u32,
            end: i as u32,
        };
        Ok(self.push_token(TokenKind::Number, start..i, text))
    }

    /// Scan a string at `self.pos` (on its opening quote) and push its token.
    #[inline(always)]
    fn string(&mut self, kind: TokenKind) -> Result<Token, FrameError> {
        let content = self.pos + 1;
        // Fast path, inlined into both callers: no escapes, the text is the raw bytes.
        let run_end = plain_run(self.raw, content);
        if self.raw.get(run_end) == Some(&b'"') && run_end <= self.valid.len() {
            self.pos = run_end + 1;
            let text = TextRef::Raw {
                start: content as u32,
                end: run_end as u32,
            };
            return Ok(self.push_token(kind, content..run_end, text));
        }
        self.string_slow(kind, content, run_end)
    }

    /// The rest of [`Self::string`]: escapes, bad UTF-8, control characters, the end.
    #[inline(never)]
    fn string_slow(
        &mut self,
        kind: TokenKind,
        content: usize,
        run_end: usize,
    ) -> Result<Token, FrameError> {
        let raw = self.raw;
        self.check_utf8(content, run_end)?;
        let mut i = run_end;
        match raw.get(i) {
            Some(b'"') => {
                self.pos = i + 1;
                let text = TextRef::Raw {
                    start: content as u32,
                    end: i as u32,
                };
                return Ok(self.push_token(kind, content..i, text));
            }
            Some(b'\\') => {}
            Some(_) => return Err(parse_error(i, "control character in a string")),
            None => return Err(parse_error(i, "unterminated string")),
        }
        // Slow path: decode into `Parsed::text`.
        let valid = self.valid;
        let text = &mut self.out.text;
        // Decoded text is never longer than the rest of the frame. Reserving that once
        // spares a long string's growth by doubling (a 1 MiB string filled 2 MiB);
        // reserved pages that are never written cost no memory.
        text.reserve(raw.len() - content);
        let text_start = text.len();
        text.push_str(utf8(raw, valid, content, i)?);
        let resume_points = &mut self.out.resume_points;
        let mut next_resume = text_start + RESUME_EVERY;
        loop {
            match raw.get(i) {
                Some(b'"') => break,
                Some(b'\\') => {
                    if text.len() >= next_resume {
                        resume_points.push(RawCursor {
                            at: i,
                            offset: text.len() - text_start,
                        });
                        next_resume = text.len() + RESUME_EVERY;
                    }
                    i = decode_escape(raw, i, text)?
                }
                Some(_) => return Err(parse_error(i, "control character in a string")),
                None => return Err(parse_error(i, "unterminated string")),
            }
            let run_end = plain_run(raw, i);
            push_run(text, raw, valid, i, run_end)?;
            i = run_end;
        }
        let text_end = text.len();
        self.pos = i + 1;
        let text = TextRef::Decoded {
            start: text_start as u32,
            end: text_end as u32,
        };
        Ok(self.push_token(kind, content..i, text))
    }
}

/// Decoded bytes between two resume points of a string with escapes: mapping a secret
/// back to raw bytes walks at most about this far, instead of from the string's start
/// (over a 1 MiB result with 16 secrets, that walk was 15% of the proxy's instructions).
const RESUME_EVERY: usize = 4096;

/// `raw[start..end]` as text: sliced from the frame's valid prefix when it lies inside
/// it, otherwise validated here (and refused, pointing at the first bad byte).
fn utf8<'r>(
    raw: &'r [u8],
    valid: &'r str,
    start: usize,
    end: usize,
) -> Result<&'r str, FrameError> {
    if let Some(s) = valid.get(start..end) {
        return Ok(s);
    }
    std::str::from_utf8(&raw[start..end])
        .map_err(|e| parse_error(start + e.valid_up_to(), "invalid UTF-8 in a string"))
}

/// Append `raw[start..end]`, a run of plain string bytes, to `text`.
#[inline]
fn push_run(
    text: &mut String,
    raw: &[u8],
    valid: &str,
    start: usize,
    end: usize,
) -> Result<(), FrameError> {
    text.push_str(utf8(raw, valid, start, end)?);
    Ok(())
}

/// Decode the escape at `raw[i]` (a backslash) into `text`; returns the index after it.
#[inline]
fn decode_escape(raw: &[u8], i: usize, text: &mut String) -> Result<usize, FrameError> {
    let simple = match raw.get(i + 1) {
        Some(b'"') => b'"',
        Some(b'\\') => b'\\',
        Some(b'/') => b'/',
        Some(b'b') => 0x08,
        Some(b'f') => 0x0c,
        Some(b'n') => b'\n',
        Some(b'r') => b'\r',
        Some(b't') => b'\t',
        Some(b'u') => {
            let (c, next) = decode_unicode_escape(raw, i)?;
            text.push(c);
            return Ok(next);
        }
        _ => return Err(parse_error(i, "invalid escape in a string")),
    };
    text.push(char::from(simple));
    Ok(i + 2)
}

/// Whether two keys of one object decode to the same text. Small objects compare
/// pairwise; large ones sort the key indices in place (no allocation, O(n log n)
/// worst case), so a 100k-key object costs no more than sorting it.
fn has_duplicate(keys: &mut [u32], tokens: &[Token], raw: &[u8], text: &str) -> bool {
    let key = |i: u32| text_bytes(raw, text, tokens[i as usize].text);
    if keys.len() < 2 {
        return false;
    }
    if keys.len() <= 16 {
        // Equal keys have equal lengths and first bytes: when no two keys share a
        // (length, first byte) slot, none are equal, and the pairs need no comparing.
        let mut seen = 0u64;
        let mut clash = false;
        for &k in keys.iter() {
            let t = key(k);
            let slot = (t.len() * 7 + usize::from(t.first().copied().unwrap_or(0))) % 64;
            clash |= seen & (1 << slot) != 0;
            seen |= 1 << slot;
        }
        if !clash {
            return false;
        }
        (1..keys.len()).any(|a| (0..a).any(|b| key(keys[a]) == key(keys[b])))
    } else {
        keys.sort_unstable_by(|&a, &b| key(a).cmp(key(b)));
        keys.windows(2).any(|w| key(w[0]) == key(w[1]))
    }
}

/// A method name: non-empty, printable, no whitespace, no invisible format characters.
fn is_method_name(s: &str) -> bool {
    !s.is_empty()
        && s.chars().all(|c| {
            !c.is_control()
                && !c.is_whitespace()
                && !matches!(c, '\u{ad}' | '\u{200b}'..='\u{200f}' | '\u{2060}'..='\u{2064}' | '\u{feff}')
        })
}
