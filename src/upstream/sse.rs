//! Reading an upstream server's SSE stream event by event, each event's data bounded.
//!
//! The stream arrives in chunks cut anywhere; lines end in `\n`, `\r\n` or `\r` (the SSE
//! grammar), possibly split across chunks. An event's data (its `data:` lines joined by
//! `\n`) longer than the limit is never held whole: its first bytes are kept for the id of
//! the request it answers, the rest counted and dropped, and the event comes out as
//! [`Data::TooLarge`], so the session refuses it whole instead of forwarding a part.

/// First bytes of an oversize event kept, as the stdio reader keeps of a line.
const HEAD_BYTES: usize = crate::io::codec::HEAD_BYTES;
/// Longest field name and separator kept of a line (`data: `, `id: `, `retry: `).
const FIELD_SLACK: usize = 16;
/// Longest `id:` or `event:` value kept (longer ones are ignored, as garbage).
const MAX_ID: usize = 1024;

/// One event's data.
#[derive(Debug, PartialEq, Eq)]
pub enum Data {
    /// The whole data, at most the limit.
    Whole(Vec<u8>),
    /// Over the limit: its length and first bytes.
    TooLarge { len: usize, head: Vec<u8> },
}

/// One dispatched event with data: of type `message` (what MCP sends), or `endpoint`
/// (the legacy HTTP+SSE transport's first event: where to POST).
#[derive(Debug, PartialEq, Eq)]
pub struct Event {
    pub data: Data,
    /// An `endpoint` event, not a message.
    pub endpoint: bool,
}

/// The parser's state between chunks. See the module docs.
#[derive(Debug)]
pub struct SseReader {
    max_data: usize,
    /// The current line (bounded: past `max_data + FIELD_SLACK` only counted).
    line: Vec<u8>,
    line_len: usize,
    /// The previous chunk ended in `\r`: a `\n` starting this one ends nothing.
    after_cr: bool,
    data: Vec<u8>,
    data_len: usize,
    has_data: bool,
    event_type: Option<Vec<u8>>,
    /// The last `id:` seen (kept across events, as the SSE spec's last event ID).
    last_id: Option<String>,
    /// The last `retry:` seen, in milliseconds.
    retry_ms: Option<u64>,
}

impl SseReader {
    pub fn new(max_data: usize) -> SseReader {
        SseReader {
            max_data,
            line: Vec::new(),
            line_len: 0,
            after_cr: false,
            data: Vec::new(),
            data_len: 0,
            has_data: false,
            event_type: None,
            last_id: None,
            retry_ms: None,
        }
    }

    /// The last event id the stream gave (for `Last-Event-ID`).
    pub fn last_id(&self) -> Option<&str> {
        self.last_id.as_deref()
    }

    /// The reconnection delay the server asked for.
    pub fn retry_ms(&self) -> Option<u64> {
        self.retry_ms
    }

    /// Read one chunk; every event it completes goes to `emit`.
    pub fn feed(&mut self, chunk: &[u8], emit: &mut dyn FnMut(Event)) {
        let mut rest = chunk;
        if self.after_cr {
            self.after_cr = false;
            if let Some(b'\n') = rest.first() {
                rest = &rest[1..];
            }
        }
        while !rest.is_empty() {
            match memchr::memchr2(b'\n', b'\r', rest) {
                Some(at) => {
                    self.push_line_bytes(&rest[..at]);
                    let cr = rest[at] == b'\r';
                    rest = &rest[at + 1..];
                    if cr {
                        match rest.first() {
                            Some(b'\n') => rest = &rest[1..],
                            None => self.after_cr = true,
                            Some(_) => {}
                        }
                    }
                    self.end_line(emit);
                }
                None => {
                    self.push_line_bytes(rest);
                    rest = &[];
                }
            }
        }
    }

    fn push_line_bytes(&mut self, bytes: &[u8]) {
        let keep = (self.max_data + FIELD_SLACK).saturating_sub(self.line.len());
        self.line.extend_from_slice(&bytes[..bytes.len().min(keep)]);
        self.line_len += bytes.len();
    }

    fn end_line(&mut self, emit: &mut dyn FnMut(Event)) {
        let line = std::mem::take(&mut self.line);
        let len = std::mem::replace(&mut self.line_len, 0);
        if line.is_empty() {
            self.dispatch(emit);
        } else {
            self.field(&line, len);
        }
        self.line = line;
        self.line.clear();
    }

    /// One `name: value` line (`len`: its whole length, of which `line` may hold a part).
    fn field(&mut self, line: &[u8], len: usize) {
        if line[0] == b':' {
            return; // a comment (keep-alive)
        }
        let (name, value_at) = match memchr::memchr(b':', line) {
            Some(c) if line.get(c + 1) == Some(&b' ') => (&line[..c], c + 2),
            Some(c) => (&line[..c], c + 1),
            None => (line, line.len()),
        };
        let value = &line[value_at.min(line.len())..];
        let value_len = len - value_at.min(len);
        match name {
            b"data" => {
                if self.has_data {
                    self.append_data(b"\n", 1);
                }
                self.has_data = true;
                self.append_data(value, value_len);
            }
            b"event" if value_len <= MAX_ID => self.event_type = Some(value.to_vec()),
            // An id holding NUL is ignored (the SSE spec).
            b"id" if value_len <= MAX_ID && !value.contains(&0) => {
                self.last_id = String::from_utf8(value.to_vec()).ok();
            }
            b"retry" => {
                if let Some(ms) = std::str::from_utf8(value)
                    .ok()
                    .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
                    .and_then(|v| v.parse().ok())
                {
                    self.retry_ms = Some(ms);
                }
            }
            _ => {}
        }
    }

    fn append_data(&mut self, bytes: &[u8], len: usize) {
        self.data_len += len;
        let keep = if self.data_len > self.max_data {
            HEAD_BYTES.saturating_sub(self.data.len())
        } else {
            bytes.len()
        };
        self.data.extend_from_slice(&bytes[..bytes.len().min(keep)]);
        if self.data_len > self.max_data {
            self.data.truncate(HEAD_BYTES);
        }
    }

    fn dispatch(&mut self, emit: &mut dyn FnMut(Event)) {
        let event_type = self.event_type.take();
        if !std::mem::replace(&mut self.has_data, false) {
            return;
        }
        let len = std::mem::replace(&mut self.data_len, 0);
        let data = std::mem::take(&mut self.data);
        // Events of another type carry nothing MCP defines; empty data (a stream's
        // priming event, which only sets the id) carries nothing to judge.
        let endpoint = event_type.as_deref() == Some(b"endpoint");
        if event_type.is_some_and(|t| t != b"message" && !endpoint) || len == 0 {
            return;
        }
        let data = if len > self.max_data {
            Data::TooLarge { len, head: data }
        } else {
            Data::Whole(data)
        };
        emit(Event { data, endpoint });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(max: usize, chunks: &[&[u8]]) -> (Vec<Event>, SseReader) {
        let mut r = SseReader::new(max);
        let mut out = Vec::new();
        for c in chunks {
            r.feed(c, &mut |e| out.push(e));
        }
        (out, r)
    }

    fn whole(s: &str) -> Event {
        Event {
            data: Data::Whole(s.as_bytes().to_vec()),
            endpoint: false,
        }
    }

    #[test]
    fn events_split_anywhere_come_out_whole() {
        let stream =
            b"id: 7\r\nevent: message\r\ndata: {\"a\":1}\r\n\r\n: ping\n\ndata: x\ndata: y\r\r";
        for cut in 0..stream.len() {
            let (out, r) = events(1024, &[&stream[..cut], &stream[cut..]]);
            assert_eq!(out, vec![whole("{\"a\":1}"), whole("x\ny")], "cut at {cut}");
            assert_eq!(r.last_id(), Some("7"));
        }
    }

    #[test]
    fn a_priming_event_sets_the_id_and_emits_nothing() {
        let (out, r) = events(1024, &[b"id: abc\ndata:\n\nretry: 250\n\n"]);
        assert!(out.is_empty());
        assert_eq!((r.last_id(), r.retry_ms()), (Some("abc"), Some(250)));
    }

    #[test]
    fn other_event_types_are_not_messages() {
        let (out, _) = events(
            1024,
            &[b"event: other\ndata: /x\n\nevent: endpoint\ndata: /m?s=1\n\ndata: m\n\n"],
        );
        let endpoint = Event {
            data: Data::Whole(b"/m?s=1".to_vec()),
            endpoint: true,
        };
        assert_eq!(out, vec![endpoint, whole("m")]);
    }

    #[test]
    fn an_oversize_event_keeps_only_its_head_and_its_length() {
        let big = format!("{{\"id\":9,\"result\":\"{}\"}}", "a".repeat(10_000));
        let stream = format!("data: {big}\n\ndata: small\n\n");
        // Fed a byte at a time: nothing holds more than the limit.
        let (out, r) = events(100, &stream.as_bytes().chunks(1).collect::<Vec<_>>());
        assert_eq!(out.len(), 2);
        match &out[0].data {
            Data::TooLarge { len, head } => {
                assert_eq!(*len, big.len());
                assert!(head.starts_with(b"{\"id\":9,"));
                assert!(head.len() <= HEAD_BYTES);
            }
            other => panic!("not refused: {other:?}"),
        }
        assert_eq!(out[1], whole("small"));
        assert!(r.line.capacity() <= 100 + FIELD_SLACK + 64);
    }

    #[test]
    fn data_lines_joined_past_the_limit_are_too_large() {
        let (out, _) = events(5, &[b"data: abc\ndata: def\n\n"]);
        assert!(matches!(out[0].data, Data::TooLarge { len: 7, .. }));
    }
}
