//! Frames: one line of newline-delimited JSON-RPC, parsed strictly (ARCHITECTURE decision 1).
//!
//! Bytes in, bytes out. A [`Frame`] borrows the raw line and a reusable [`Parsed`]
//! that holds every message, and every key and scalar token with its byte range, so
//! the engine can match decoded values and redaction can splice exact byte ranges.
//! Parsing reuses the buffers in [`Parsed`]: after warm-up it does not allocate.

use std::ops::Range;

pub use head::{Head, read_head};

// Invariant oracles for the fuzz targets and property tests: built only for tests.
#[cfg(any(test, feature = "test-support"))]
pub mod checks;
mod head;
pub mod redact;
mod run_block;
pub mod scan;
pub mod string;

/// Limits applied while parsing.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Deepest nesting of arrays and objects accepted.
    pub max_depth: u16,
    /// Largest frame accepted, in bytes (without the newline).
    pub max_frame_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_depth: 64,
            max_frame_bytes: 64 * 1024 * 1024,
        }
    }
}

/// Why a frame was refused. Every variant means: do not forward it as if inspected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// Not JSON at all, or broken JSON (`-32700`). `at` is the byte offset of the problem.
    #[error("parse error at byte {at}: {reason}")]
    Parse { at: usize, reason: &'static str },
    /// Well-formed JSON that is not an acceptable JSON-RPC message (`-32600`).
    #[error("invalid request: {reason}")]
    Invalid {
        reason: &'static str,
        /// Raw JSON text range of the id, when one could be read.
        id: Option<Range<usize>>,
    },
    /// Larger than [`Limits::max_frame_bytes`].
    #[error("frame of {len} bytes exceeds the limit of {limit} bytes")]
    TooLarge { len: usize, limit: usize },
}

impl FrameError {
    /// The JSON-RPC error code to answer with: -32700 for parse errors, -32600 otherwise.
    pub fn code(&self) -> i32 {
        match self {
            FrameError::Parse { .. } => -32700,
            FrameError::Invalid { .. } | FrameError::TooLarge { .. } => -32600,
        }
    }
}

/// A [`FrameError::Parse`] at byte `at`.
pub(crate) fn parse_error(at: usize, reason: &'static str) -> FrameError {
    FrameError::Parse { at, reason }
}

/// What a message is, by the JSON-RPC 2.0 rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MessageKind {
    /// Has `method` and `id`.
    Request,
    /// Has `method`, no `id`.
    Notification,
    /// Has `result` and `id`.
    Result,
    /// Has `error` and `id`.
    Error,
}

/// A string's text: either straight from the raw bytes (no escapes) or decoded into
/// [`Parsed`]'s text buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextRef {
    Raw { start: u32, end: u32 },
    Decoded { start: u32, end: u32 },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenKind {
    /// An object key.
    Key,
    String,
    /// A number, its text as written.
    Number,
    True,
    False,
    Null,
}

/// A key or scalar in the frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Token {
    pub kind: TokenKind,
    /// Raw bytes of the token. For keys and strings: the contents between the quotes.
    pub raw: (u32, u32),
    /// Decoded text (numbers, `true`, `false`, `null` as written).
    pub text: TextRef,
    /// Nesting depth (the message object itself is depth 1).
    pub depth: u16,
    /// For tokens inside the message's arguments: index (into `Parsed::tokens`) of the
    /// top-level argument key this token belongs to; the key token points at itself.
    /// `u32::MAX` for tokens outside the arguments.
    pub arg: u32,
}

impl Token {
    pub const NO_ARG: u32 = u32::MAX;
}

/// One JSON-RPC message: the whole frame, or one element of a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// Byte range of this message in the raw frame.
    pub span: Range<usize>,
    pub kind: MessageKind,
    /// Raw JSON text of the id (`1` and `"1"` differ), when present.
    pub id: Option<Range<usize>>,
    /// Decoded method name, for requests and notifications.
    pub method: Option<TextRef>,
    /// Decoded tool name: `params.name` of a `tools/call`.
    pub tool: Option<TextRef>,
    /// Every key and scalar token inside this message, as a range of `Parsed::tokens`.
    pub tokens: Range<usize>,
    /// The tokens rules match arguments against, as a range of `Parsed::tokens`:
    /// `params.arguments` for `tools/call`, `params` for every other request or
    /// notification, the `result` or `error` value for responses.
    pub args: Range<usize>,
}

/// Reusable parse output. Create once per pump, call [`Parsed::parse`] per line.
#[derive(Debug, Default)]
pub struct Parsed {
    pub(crate) messages: Vec<Message>,
    pub(crate) tokens: Vec<Token>,
    /// Decoded text of strings that contained escapes.
    pub(crate) text: String,
    /// Places to resume decoding inside long strings with escapes, in frame order:
    /// [`redact::raw_range`] starts from the nearest one instead of the string's start.
    pub(crate) resume_points: Vec<string::RawCursor>,
    pub(crate) batch: bool,
    /// The scanner's reusable stacks.
    pub(crate) scratch: scan::Scratch,
}

/// A parsed frame: the raw line and what the parser found in it.
#[derive(Debug, Clone, Copy)]
pub struct Frame<'a> {
    pub raw: &'a [u8],
    pub parsed: &'a Parsed,
    /// `raw` as text, when it is UTF-8 (always, for a frame that parsed): string values
    /// are sliced from it instead of being validated at every use.
    raw_str: Option<&'a str>,
}

impl Parsed {
    pub fn new() -> Parsed {
        Parsed::default()
    }

    /// Parse one line (without its trailing `\n`) strictly. On success, `self` describes it.
    pub fn parse(&mut self, raw: &[u8], limits: &Limits) -> Result<(), FrameError> {
        scan::parse_into(self, raw, limits).map(drop)
    }

    /// [`Self::parse`], returning the frame. The parse has validated `raw` as UTF-8
    /// already; [`Frame::new`] would validate it again (about 1% of a pipelined call).
    pub fn parse_frame<'a>(
        &'a mut self,
        raw: &'a [u8],
        limits: &Limits,
    ) -> Result<Frame<'a>, FrameError> {
        let valid = scan::parse_into(self, raw, limits)?;
        Ok(Frame {
            raw,
            parsed: self,
            // A frame that parsed is UTF-8 throughout (bytes outside strings are ASCII).
            raw_str: (valid.len() == raw.len()).then_some(valid),
        })
    }

    /// Give back buffers that have grown past `bytes`, instead of keeping them for the
    /// next frame (a 20 MiB frame's decoded text).
    pub fn shrink_past(&mut self, bytes: usize) {
        if self.text.capacity() > bytes {
            self.text = String::new();
        }
        if self.tokens.capacity() * std::mem::size_of::<Token>() > bytes {
            self.tokens = Vec::new();
        }
    }

    /// The allocation that holds decoded text, emptied (the text of the last frame is
    /// gone with it), for other use; see [`Self::give_text_buffer`].
    pub fn take_text_buffer(&mut self) -> Vec<u8> {
        let mut buf = std::mem::take(&mut self.text).into_bytes();
        buf.clear();
        buf
    }

    /// Decode into `buf`'s allocation from the next frame on, if it is the larger.
    pub fn give_text_buffer(&mut self, mut buf: Vec<u8>) {
        if buf.capacity() > self.text.capacity() {
            buf.clear();
            // Empty, so UTF-8.
            self.text = String::from_utf8(buf).unwrap_or_default();
        }
    }

    /// The frame was a JSON array (a batch).
    pub fn is_batch(&self) -> bool {
        self.batch
    }

    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    pub fn tokens(&self) -> &[Token] {
        &self.tokens
    }
}

impl<'a> Frame<'a> {
    pub fn new(raw: &'a [u8], parsed: &'a Parsed) -> Frame<'a> {
        Frame {
            raw,
            parsed,
            raw_str: std::str::from_utf8(raw).ok(),
        }
    }

    pub fn messages(&self) -> &'a [Message] {
        &self.parsed.messages
    }

    pub fn tokens(&self) -> &'a [Token] {
        &self.parsed.tokens
    }

    /// The decoded text of a string, key, method or tool.
    pub fn text(&self, t: TextRef) -> &'a str {
        // Never panics: a `TextRef` from another frame yields "" or other text, not a crash.
        scan::text_of(self.raw, self.raw_str, &self.parsed.text, t)
    }

    pub fn method(&self, m: &Message) -> Option<&'a str> {
        m.method.map(|t| self.text(t))
    }

    pub fn tool(&self, m: &Message) -> Option<&'a str> {
        m.tool.map(|t| self.text(t))
    }

    /// Raw JSON text of the message's id.
    pub fn id_raw(&self, m: &Message) -> Option<&'a [u8]> {
        m.id.clone().map(|r| &self.raw[r])
    }
}
