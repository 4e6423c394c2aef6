//! Newline framing over a byte stream, with a hard size limit.
//!
//! [`LineReader`] hands out complete lines (without the `\n`) straight from its buffer.
//! A line longer than the limit is never returned in part and never buffered whole: once
//! the buffer holds more than `max_line` bytes without a newline, the reader switches to
//! discarding until the end of that line and then reports [`Line::TooLarge`] with its
//! length. Memory stays bounded by `max_line` plus one read.

use std::io;

use std::pin::Pin;
use std::task::Poll;

use bytes::BufMut;
use tokio::io::AsyncRead;

/// How much is asked of the kernel per read.
const READ_CHUNK: usize = 64 * 1024;
/// How much of an oversize line is kept: enough for the `jsonrpc` and `id` members a
/// message normally starts with.
pub const HEAD_BYTES: usize = 4096;

pub use crate::session::Line;

/// Buffered newline-delimited reader. See the module docs.
#[derive(Debug)]
pub struct LineReader<R> {
    inner: R,
    /// `buf[start..]` is unconsumed input. Reads go into the spare capacity, so storage
    /// is never zeroed first (for a 1 MiB line that was a 1 MiB `memset`, 7% of the
    /// proxy's instructions per large result).
    buf: Vec<u8>,
    start: usize,
    /// `buf[start..scanned]` is known to hold no `\n`, so searches resume there.
    scanned: usize,
    max_line: usize,
    /// `Some(n)`: inside an oversize line, `n` bytes of it discarded so far.
    discarding: Option<usize>,
    /// The first bytes of the oversize line being discarded.
    head: Vec<u8>,
    eof: bool,
    /// Where in `buf` the last [`Line::Frame`] handed out is (for [`Self::detach_line`]).
    last_frame: std::ops::Range<usize>,
}

impl<R: AsyncRead + Unpin> LineReader<R> {
    pub fn new(inner: R, max_line: usize) -> LineReader<R> {
        LineReader {
            inner,
            buf: Vec::with_capacity(READ_CHUNK),
            start: 0,
            scanned: 0,
            max_line,
            discarding: None,
            head: Vec::new(),
            eof: false,
            last_frame: 0..0,
        }
    }

    /// The next line already in the buffer, without reading. Empty lines are skipped.
    /// At end of input, a last line without a trailing `\n` is reported as
    /// [`Line::Truncated`].
    pub fn next_buffered(&mut self) -> Option<Line<'_>> {
        loop {
            if let Some(discarded) = self.discarding {
                let window = &self.buf[self.start..];
                match memchr::memchr(b'\n', window) {
                    Some(pos) => {
                        self.discarding = None;
                        self.start += pos + 1;
                        self.scanned = self.start;
                        return Some(Line::TooLarge {
                            len: discarded + pos,
                            head: &self.head,
                        });
                    }
                    None => {
                        let len = discarded + window.len();
                        self.discarding = Some(len);
                        self.clear();
                        if self.eof {
                            self.discarding = None;
                            return Some(Line::TooLarge {
                                len,
                                head: &self.head,
                            });
                        }
                        return None;
                    }
                }
            }
            let from = self.scanned.max(self.start);
            match memchr::memchr(b'\n', &self.buf[from..]) {
                Some(pos) => {
                    let nl = from + pos;
                    let line_start = self.start;
                    self.start = nl + 1;
                    self.scanned = self.start;
                    if nl - line_start > self.max_line {
                        // Only possible when a single read brought the whole line in.
                        let head_end = line_start + HEAD_BYTES.min(nl - line_start);
                        return Some(Line::TooLarge {
                            len: nl - line_start,
                            head: &self.buf[line_start..head_end],
                        });
                    }
                    // A `\r` right before the `\n` ends the line too, as every official
                    // SDK reads it (CRLF peers); a `\r` anywhere else is the parser's to
                    // refuse.
                    let end = if nl > line_start && self.buf[nl - 1] == b'\r' {
                        nl - 1
                    } else {
                        nl
                    };
                    if end == line_start {
                        continue;
                    }
                    self.last_frame = line_start..end;
                    return Some(Line::Frame(&self.buf[line_start..end]));
                }
                None => {
                    self.scanned = self.buf.len();
                    let pending = self.buf.len() - self.start;
                    if pending > self.max_line {
                        self.discarding = Some(pending);
                        self.head.clear();
                        let head_end = self.start + HEAD_BYTES.min(pending);
                        self.head.extend_from_slice(&self.buf[self.start..head_end]);
                        self.clear();
                        if self.eof {
                            self.discarding = None;
                            return Some(Line::TooLarge {
                                len: pending,
                                head: &self.head,
                            });
                        }
                        return None;
                    }
                    if self.eof && pending > 0 {
                        self.start = self.buf.len();
                        self.scanned = self.buf.len();
                        return Some(Line::Truncated { len: pending });
                    }
                    return None;
                }
            }
        }
    }

    /// Give away the buffer holding the line [`Self::next_buffered`] just returned,
    /// with where that line is in it, instead of copying the line out; the reader goes
    /// on in `fresh` (its contents are dropped), which gets what followed the line. For
    /// large frames, which can then be written out from where they were read.
    pub fn detach_line(&mut self, mut fresh: Vec<u8>) -> (Vec<u8>, std::ops::Range<usize>) {
        let rest = self.start..self.buf.len();
        fresh.clear();
        fresh.reserve(rest.len() + READ_CHUNK);
        fresh.extend_from_slice(&self.buf[rest.clone()]);
        self.scanned -= self.start.min(self.scanned);
        self.start = 0;
        let line = std::mem::replace(&mut self.last_frame, 0..0);
        (std::mem::replace(&mut self.buf, fresh), line)
    }

    /// Go back to `buf`, a buffer [`Self::detach_line`] gave away that is free again,
    /// when it is larger than the one the reader went on in: what is buffered moves into
    /// it. A reader whose large lines are handed away and back this way keeps one large
    /// buffer, as one whose lines are copied out does, and no line is copied.
    pub fn reattach(&mut self, mut buf: Vec<u8>) {
        if buf.capacity() <= self.buf.capacity() {
            return;
        }
        buf.clear();
        buf.extend_from_slice(&self.buf[self.start..]);
        self.scanned -= self.start.min(self.scanned);
        self.start = 0;
        self.buf = buf;
    }

    /// Whether a complete line (or the end of input) is already buffered, i.e. whether
    /// [`Self::next_buffered`] would return something without reading. Used to decide
    /// when to flush: batch under pipelining, never delay a lone round trip.
    pub fn has_buffered_line(&self) -> bool {
        if self.discarding.is_some() {
            return false;
        }
        let from = self.scanned.max(self.start);
        memchr::memchr(b'\n', &self.buf[from..]).is_some()
    }

    /// Bytes buffered but not yet returned.
    pub fn buffered_len(&self) -> usize {
        self.buf.len() - self.start
    }

    /// Read more input. Returns `Ok(false)` at end of input (after which
    /// [`Self::next_buffered`] still drains what is left).
    pub async fn fill(&mut self) -> io::Result<bool> {
        if self.eof {
            return Ok(false);
        }
        self.make_room();
        let n = loop {
            match std::future::poll_fn(|cx| self.poll_read_chunk(cx)).await {
                Ok(n) => break n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        };
        if n == 0 {
            self.eof = true;
            return Ok(false);
        }
        Ok(true)
    }

    /// Read at most `READ_CHUNK` bytes into the spare capacity (which `make_room`
    /// provided) and extend `buf` by what was read.
    fn poll_read_chunk(&mut self, cx: &mut std::task::Context<'_>) -> Poll<io::Result<usize>> {
        let mut spare = BufMut::limit(&mut self.buf, READ_CHUNK);
        tokio_util::io::poll_read_buf(Pin::new(&mut self.inner), cx, &mut spare)
    }

    /// Forget all buffered input.
    fn clear(&mut self) {
        self.buf.clear();
        self.start = 0;
        self.scanned = 0;
    }

    /// Ensure at least one read's worth of spare capacity after the input, moving
    /// unconsumed bytes to the front rather than growing when that suffices.
    fn make_room(&mut self) {
        if self.start == self.buf.len() {
            self.clear();
        }
        if self.buf.capacity() - self.buf.len() >= READ_CHUNK {
            return;
        }
        if self.start > 0 {
            self.buf.copy_within(self.start.., 0);
            self.scanned -= self.start.min(self.scanned);
            self.buf.truncate(self.buf.len() - self.start);
            self.start = 0;
        }
        // One read's worth more. The input stays within the line limit plus one read (a
        // longer line switches to discarding), so what reads fill never exceeds the
        // limit plus two; the capacity grows geometrically, but pages no read has
        // filled are never touched.
        self.buf.reserve(READ_CHUNK);
    }

    /// The underlying reader.
    pub fn get_mut(&mut self) -> &mut R {
        &mut self.inner
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader that yields the given chunks one per read.
    struct Chunks(std::collections::VecDeque<Vec<u8>>);

    impl AsyncRead for Chunks {
        fn poll_read(
            mut self: std::pin::Pin<&mut Self>,
            _cx: &mut std::task::Context<'_>,
            buf: &mut tokio::io::ReadBuf<'_>,
        ) -> std::task::Poll<io::Result<()>> {
            if let Some(mut chunk) = self.0.pop_front() {
                let n = chunk.len().min(buf.remaining());
                buf.put_slice(&chunk[..n]);
                if n < chunk.len() {
                    self.0.push_front(chunk.split_off(n));
                }
            }
            std::task::Poll::Ready(Ok(()))
        }
    }

    #[derive(Debug, PartialEq)]
    enum Out {
        Frame(Vec<u8>),
        TooLarge(usize),
        Truncated(usize),
    }

    fn read_all(chunks: Vec<&[u8]>, max: usize) -> Vec<Out> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            let mut r = LineReader::new(
                Chunks(chunks.into_iter().map(|c| c.to_vec()).collect()),
                max,
            );
            let mut out = Vec::new();
            loop {
                while let Some(line) = r.next_buffered() {
                    out.push(match line {
                        Line::Frame(f) => Out::Frame(f.to_vec()),
                        Line::TooLarge { len, .. } => Out::TooLarge(len),
                        Line::Truncated { len } => Out::Truncated(len),
                    });
                }
                if !r.fill().await.unwrap() {
                    while let Some(line) = r.next_buffered() {
                        out.push(match line {
                            Line::Frame(f) => Out::Frame(f.to_vec()),
                            Line::TooLarge { len, .. } => Out::TooLarge(len),
                            Line::Truncated { len } => Out::Truncated(len),
                        });
                    }
                    return out;
                }
                // Memory stays bounded by the limit plus reads.
                assert!(r.buf.len() <= max + 2 * READ_CHUNK + READ_CHUNK);
            }
        })
    }

    fn f(s: &str) -> Out {
        Out::Frame(s.as_bytes().to_vec())
    }

    #[test]
    fn splits_lines_across_reads_and_skips_empty_lines() {
        let out = read_all(vec![b"ab", b"c\nde", b"f\n\n", b"g\nh"], 100);
        assert_eq!(out, vec![f("abc"), f("def"), f("g"), Out::Truncated(1)]);
    }

    #[test]
    fn crlf_ends_a_line_and_a_lone_cr_stays_in_it() {
        let out = read_all(vec![b"{\"a\":1}\r\n\r\nx\ry\n\r\r\n"], 100);
        assert_eq!(out, vec![f("{\"a\":1}"), f("x\ry"), f("\r")]);
    }

    #[test]
    fn line_of_exactly_the_limit_passes_and_one_more_is_refused() {
        let ok = "x".repeat(10);
        let big = "y".repeat(11);
        let input = format!("{ok}\n{big}\nz\n");
        let out = read_all(vec![input.as_bytes()], 10);
        assert_eq!(out, vec![f(&ok), Out::TooLarge(11), f("z")]);
    }

    /// The session looks for the id of an oversize answer in its first bytes.
    #[test]
    fn oversize_line_keeps_its_head() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let mut line = br#"{"jsonrpc":"2.0","id":7,"result":""#.to_vec();
        line.resize(3 * READ_CHUNK, b'x');
        line.extend_from_slice(b"\"}\n");
        let chunks: Vec<Vec<u8>> = line.chunks(1000).map(<[u8]>::to_vec).collect();
        rt.block_on(async {
            let mut r = LineReader::new(Chunks(chunks.into()), 1024);
            loop {
                if let Some(Line::TooLarge { len, head }) = r.next_buffered() {
                    assert_eq!(len, line.len() - 1);
                    // What was buffered when the line outgrew the limit, at most HEAD_BYTES.
                    assert!(
                        line.starts_with(head) && head.len() > 1024,
                        "{}",
                        head.len()
                    );
                    assert!(head.len() <= HEAD_BYTES);
                    let id = crate::frame::read_head(head).id.unwrap();
                    assert_eq!(&head[id], b"7");
                    return;
                }
                assert!(r.fill().await.unwrap(), "no TooLarge line");
            }
        });
    }

    #[test]
    fn oversize_line_spread_over_many_reads_is_discarded_not_buffered() {
        let big = vec![b'q'; 5 * READ_CHUNK + 17];
        let mut chunks: Vec<&[u8]> = big.chunks(1000).collect();
        chunks.push(b"\n{\"after\":1}\n");
        let out = read_all(chunks, 1024);
        assert_eq!(out, vec![Out::TooLarge(big.len()), f("{\"after\":1}")]);
    }

    #[test]
    fn oversize_line_cut_by_eof_is_refused() {
        let big = vec![b'q'; 3000];
        let out = read_all(vec![b"a\n", &big], 1024);
        assert_eq!(out, vec![f("a"), Out::TooLarge(3000)]);
    }

    #[test]
    fn large_line_within_limit_arrives_whole() {
        let big: Vec<u8> = (0..3 * READ_CHUNK + 5)
            .map(|i| b'a' + (i % 26) as u8)
            .collect();
        let mut input = big.clone();
        input.push(b'\n');
        let chunks: Vec<&[u8]> = input.chunks(777).collect();
        let out = read_all(chunks, 4 * READ_CHUNK);
        assert_eq!(out, vec![Out::Frame(big)]);
    }

    #[test]
    fn has_buffered_line_sees_only_complete_lines() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            let mut r = LineReader::new(Chunks(vec![b"a\nb".to_vec()].into()), 100);
            r.fill().await.unwrap();
            assert!(r.has_buffered_line());
            assert_eq!(r.next_buffered(), Some(Line::Frame(b"a")));
            assert!(!r.has_buffered_line());
            assert_eq!(r.next_buffered(), None);
        });
    }

    /// A detached line comes with its buffer; what followed it, complete lines and a
    /// partial one, is read on from the fresh buffer as if nothing happened.
    #[test]
    fn a_detached_line_takes_its_buffer_and_reading_goes_on() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            let chunks = vec![b"one\ntwo\nthr".to_vec(), b"ee\nfour\n".to_vec()];
            let mut r = LineReader::new(Chunks(chunks.into()), 100);
            r.fill().await.unwrap();
            assert_eq!(r.next_buffered(), Some(Line::Frame(b"one")));
            assert_eq!(r.next_buffered(), Some(Line::Frame(b"two")));
            let (buf, line) = r.detach_line(Vec::new());
            assert_eq!(&buf[line], b"two");
            assert_eq!(r.next_buffered(), None);
            r.fill().await.unwrap();
            assert_eq!(r.next_buffered(), Some(Line::Frame(b"three")));
            // What the fresh buffer held is not read as input.
            let (buf, line) = r.detach_line(b"stale\nbytes\n".repeat(9000));
            assert_eq!(&buf[line], b"three");
            assert_eq!(r.next_buffered(), Some(Line::Frame(b"four")));
            assert_eq!(r.next_buffered(), None);
            assert!(!r.fill().await.unwrap());
        });
    }

    /// A detached buffer given back is read on in, with what the reader held meanwhile,
    /// when it is the larger; a smaller one is dropped.
    #[test]
    fn a_buffer_given_back_is_read_on_in() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            let long = "x".repeat(3 * READ_CHUNK);
            let chunks = vec![
                format!(
                    "{long}
ne"
                )
                .into_bytes(),
                b"xt
last
"
                .to_vec(),
            ];
            let mut r = LineReader::new(Chunks(chunks.into()), 4 * READ_CHUNK);
            while r.next_buffered().is_none() {
                r.fill().await.unwrap();
            }
            let (buf, line) = r.detach_line(Vec::new());
            assert_eq!(buf[line].len(), long.len());
            let (large, small) = (buf.capacity(), r.buf.capacity());
            assert!(large > small);
            r.reattach(Vec::with_capacity(8));
            assert_eq!(r.buf.capacity(), small);
            r.reattach(buf);
            assert_eq!(r.buf.capacity(), large);
            r.fill().await.unwrap();
            assert_eq!(r.next_buffered(), Some(Line::Frame(b"next")));
            assert_eq!(r.next_buffered(), Some(Line::Frame(b"last")));
            assert_eq!(r.next_buffered(), None);
        });
    }
}
