//! Server-sent event streams: what each stream has sent (for `Last-Event-ID`
//! resumption, bounded), its live connection, and the response body that writes it.
//!
//! Every message goes on exactly one stream of its session (the specification forbids
//! sending one on two). A stream keeps its last [`KEEP_EVENTS`] events for resumption,
//! within three byte bounds: [`KEEP_BYTES`] per stream, [`SESSION_KEEP_BYTES`] per session
//! and [`TOTAL_KEEP_BYTES`] for the whole process; a stream makes room by letting its own
//! oldest events go, and an event that still does not fit (larger than a stream may keep,
//! or the session's or the process's share is taken by other streams) is delivered live
//! but not kept. A client that reconnects with `Last-Event-ID: <stream>-<seq>` gets the
//! events after `seq` still kept, then the stream goes on live. The live connection is
//! fed through a bounded channel: a client that stops reading loses the connection, not
//! the events it can still resume.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use tokio::sync::mpsc;

/// Events kept per stream for resumption.
pub const KEEP_EVENTS: usize = 256;
/// Bytes of events kept per stream for resumption.
pub const KEEP_BYTES: usize = 1024 * 1024;
/// Bytes of events kept for resumption by all the streams of one session.
pub const SESSION_KEEP_BYTES: usize = 4 * 1024 * 1024;
/// Bytes of events kept for resumption by every session of the process.
pub const TOTAL_KEEP_BYTES: usize = 32 * 1024 * 1024;
/// Events queued for a live connection before it is dropped (it can resume).
const LIVE_QUEUE: usize = 64;

/// What every session keeps for resumption, together.
static TOTAL_KEPT: AtomicUsize = AtomicUsize::new(0);

/// Bytes a session's streams keep for resumption; counted into the process's total too.
#[derive(Debug, Default)]
pub struct Budget {
    used: AtomicUsize,
}

impl Budget {
    /// Take `n` bytes from the session's and the process's bounds, or nothing.
    fn take(&self, n: usize) -> bool {
        let fits = |limit: usize| move |used: usize| used.checked_add(n).filter(|u| *u <= limit);
        if self
            .used
            .fetch_update(
                Ordering::AcqRel,
                Ordering::Acquire,
                fits(SESSION_KEEP_BYTES),
            )
            .is_err()
        {
            return false;
        }
        if TOTAL_KEPT
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, fits(TOTAL_KEEP_BYTES))
            .is_err()
        {
            self.used.fetch_sub(n, Ordering::AcqRel);
            return false;
        }
        true
    }

    fn give(&self, n: usize) {
        self.used.fetch_sub(n, Ordering::AcqRel);
        TOTAL_KEPT.fetch_sub(n, Ordering::AcqRel);
    }

    /// Bytes the session keeps now.
    #[cfg(test)]
    fn used(&self) -> usize {
        self.used.load(Ordering::Acquire)
    }
}

/// One message on a stream.
#[derive(Debug, Clone)]
pub struct Event {
    pub seq: u64,
    /// One JSON-RPC message, without a newline.
    pub data: Bytes,
    /// The answer to the request that opened the stream: the stream ends after it.
    pub last: bool,
}

/// One SSE stream of a session.
#[derive(Debug)]
pub struct Stream {
    id: u64,
    kept: VecDeque<Event>,
    kept_bytes: usize,
    next_seq: u64,
    live: Option<mpsc::Sender<Event>>,
    /// The last event handed to a live connection: a GET without `Last-Event-ID` gets
    /// the events after it.
    delivered: u64,
    finished: bool,
    /// The session's bound on what its streams keep.
    budget: Arc<Budget>,
}

impl Drop for Stream {
    fn drop(&mut self) {
        self.budget.give(self.kept_bytes);
    }
}

impl Stream {
    pub fn new(id: u64, budget: Arc<Budget>) -> Stream {
        Stream {
            id,
            budget,
            kept: VecDeque::new(),
            kept_bytes: 0,
            next_seq: 1,
            live: None,
            delivered: 0,
            finished: false,
        }
    }

    pub fn id(&self) -> u64 {
        self.id
    }

    /// Whether a connection is reading the stream now.
    pub fn is_live(&self) -> bool {
        self.live.as_ref().is_some_and(|tx| !tx.is_closed())
    }

    pub fn delivered(&self) -> u64 {
        self.delivered
    }

    /// A new connection reads the stream from now on; the receiver gets what is pushed.
    pub fn attach(&mut self) -> mpsc::Receiver<Event> {
        let (tx, rx) = mpsc::channel(LIVE_QUEUE);
        self.live = (!self.finished).then_some(tx);
        rx
    }

    /// The kept events after `seq` (for a resuming connection).
    pub fn replay_after(&self, seq: u64) -> Vec<Event> {
        self.kept.iter().filter(|e| e.seq > seq).cloned().collect()
    }

    /// Send `data` on the stream: kept for resumption, and handed to the live
    /// connection if there is one.
    pub fn push(&mut self, data: Bytes, last: bool) {
        let event = Event {
            seq: self.next_seq,
            data,
            last,
        };
        self.next_seq += 1;
        self.keep(&event);
        let seq = event.seq;
        if let Some(tx) = &self.live {
            if tx.try_send(event).is_ok() {
                self.delivered = seq;
            } else {
                // Not reading (or gone): drop the connection; the events stay kept.
                self.live = None;
            }
        }
        if last {
            self.finished = true;
            self.live = None;
        }
    }

    /// A message for a stream nothing resumes (legacy SSE, WebSocket: the session ends
    /// with its connection): with a connection reading, the event and the sender to await
    /// room on, so that a slow reader slows its server and its own requests down instead
    /// of losing messages; without one, kept for the connection to come.
    pub fn pace(&mut self, data: Bytes) -> Option<(mpsc::Sender<Event>, Event)> {
        let tx = self.live.as_ref().filter(|tx| !tx.is_closed()).cloned();
        let Some(tx) = tx else {
            self.push(data, false);
            return None;
        };
        let event = Event {
            seq: self.next_seq,
            data,
            last: false,
        };
        self.next_seq += 1;
        self.delivered = event.seq;
        Some((tx, event))
    }

    /// Keep `event` for resumption if it fits the bounds (see the module docs), letting
    /// this stream's oldest events go to make room.
    fn keep(&mut self, event: &Event) {
        let len = event.data.len();
        if len > KEEP_BYTES {
            return;
        }
        while self.kept.len() >= KEEP_EVENTS || self.kept_bytes + len > KEEP_BYTES {
            self.drop_oldest();
        }
        while !self.budget.take(len) {
            if self.kept.is_empty() {
                return;
            }
            self.drop_oldest();
        }
        self.kept_bytes += len;
        self.kept.push_back(event.clone());
    }

    fn drop_oldest(&mut self) {
        if let Some(old) = self.kept.pop_front() {
            self.kept_bytes -= old.data.len();
            self.budget.give(old.data.len());
        }
    }

    /// End the stream (its session ended): the live connection closes.
    pub fn finish(&mut self) {
        self.finished = true;
        self.live = None;
    }
}

/// The SSE text of one event: its id names the stream and the position in it.
pub fn format_event(stream: u64, event: &Event) -> Bytes {
    let mut out = Vec::with_capacity(event.data.len() + 48);
    out.extend_from_slice(format!("id: {stream}-{}\nevent: message\ndata: ", event.seq).as_bytes());
    out.extend_from_slice(&event.data);
    out.extend_from_slice(b"\n\n");
    Bytes::from(out)
}

/// `<stream>-<seq>` of a `Last-Event-ID` header.
pub fn parse_event_id(text: &str) -> Option<(u64, u64)> {
    let (stream, seq) = text.trim().split_once('-')?;
    Some((stream.parse().ok()?, seq.parse().ok()?))
}

/// Runs its action when dropped: a legacy SSE session ends when its stream's connection
/// does.
pub struct OnDrop(Option<Box<dyn FnOnce() + Send + Sync>>);

impl OnDrop {
    pub fn new(action: impl FnOnce() + Send + Sync + 'static) -> OnDrop {
        OnDrop(Some(Box::new(action)))
    }
}

impl Drop for OnDrop {
    fn drop(&mut self) {
        if let Some(action) = self.0.take() {
            action();
        }
    }
}

impl std::fmt::Debug for OnDrop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OnDrop")
    }
}

/// A response body: one whole JSON text, or an SSE stream.
#[derive(Debug)]
pub enum Reply {
    Full(Option<Bytes>),
    /// The legacy HTTP+SSE stream: an `endpoint` event first, then `inner`; `ends` runs
    /// when the connection goes.
    Legacy {
        preamble: Option<Bytes>,
        inner: Box<Reply>,
        ends: OnDrop,
    },
    Sse {
        stream: u64,
        /// Events to write before the live ones (a replay, or the first one read).
        queued: VecDeque<Event>,
        live: Option<mpsc::Receiver<Event>>,
    },
    /// SSE events already formatted, without ids (the 2026-07-28 revision resumes
    /// nothing); the body ends when the sender does.
    Frames(mpsc::Receiver<Bytes>),
}

impl Reply {
    pub fn empty() -> Reply {
        Reply::Full(None)
    }

    pub fn text(body: impl Into<Bytes>) -> Reply {
        Reply::Full(Some(body.into()))
    }

    /// A whole `application/json` response with `status`.
    pub fn json(status: hyper::StatusCode, body: impl Into<Bytes>) -> hyper::Response<Reply> {
        hyper::Response::builder()
            .status(status)
            .header(hyper::header::CONTENT_TYPE, "application/json")
            .body(Reply::text(body))
            .unwrap_or_else(|_| hyper::Response::new(Reply::empty()))
    }
}

impl Body for Reply {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.get_mut() {
            Reply::Full(body) => Poll::Ready(body.take().map(|b| Ok(Frame::data(b)))),
            Reply::Legacy {
                preamble, inner, ..
            } => match preamble.take() {
                Some(first) => Poll::Ready(Some(Ok(Frame::data(first)))),
                None => Pin::new(&mut **inner).poll_frame(cx),
            },
            Reply::Frames(rx) => rx.poll_recv(cx).map(|f| f.map(|b| Ok(Frame::data(b)))),
            Reply::Sse {
                stream,
                queued,
                live,
            } => {
                if let Some(event) = queued.pop_front() {
                    if event.last {
                        *live = None;
                        queued.clear();
                    }
                    return Poll::Ready(Some(Ok(Frame::data(format_event(*stream, &event)))));
                }
                let Some(rx) = live else {
                    return Poll::Ready(None);
                };
                match rx.poll_recv(cx) {
                    Poll::Ready(Some(event)) => {
                        if event.last {
                            *live = None;
                        }
                        Poll::Ready(Some(Ok(Frame::data(format_event(*stream, &event)))))
                    }
                    Poll::Ready(None) => {
                        *live = None;
                        Poll::Ready(None)
                    }
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self, Reply::Full(None))
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Reply::Full(Some(b)) => SizeHint::with_exact(b.len() as u64),
            Reply::Full(None) => SizeHint::with_exact(0),
            Reply::Sse { .. } | Reply::Legacy { .. } | Reply::Frames(_) => SizeHint::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_keeps_a_bounded_tail_and_replays_after_an_id() {
        let mut s = Stream::new(7, Arc::default());
        for i in 0..(KEEP_EVENTS + 10) {
            s.push(Bytes::from(format!("{{\"n\":{i}}}")), false);
        }
        let replay = s.replay_after(0);
        assert_eq!(replay.len(), KEEP_EVENTS);
        assert_eq!(replay[0].seq, 11);
        let tail = s.replay_after((KEEP_EVENTS + 8) as u64);
        assert_eq!(tail.len(), 2);
        assert_eq!(
            &format_event(7, &tail[0])[..],
            format!(
                "id: 7-{}\nevent: message\ndata: {{\"n\":{}}}\n\n",
                KEEP_EVENTS + 9,
                KEEP_EVENTS + 8
            )
            .as_bytes()
        );
        assert_eq!(parse_event_id(" 7-12 "), Some((7, 12)));
        assert_eq!(parse_event_id("7"), None);
    }

    #[test]
    fn a_connection_that_stops_reading_is_dropped_but_its_events_are_kept() {
        let mut s = Stream::new(1, Arc::default());
        let _rx = s.attach();
        for _ in 0..(LIVE_QUEUE + 1) {
            s.push(Bytes::from_static(b"{}"), false);
        }
        assert!(!s.is_live());
        assert_eq!(s.replay_after(0).len(), LIVE_QUEUE + 1);
    }

    #[test]
    fn what_is_kept_stays_within_the_stream_and_session_bounds() {
        let budget = Arc::new(Budget::default());
        let big = Bytes::from(vec![b'x'; KEEP_BYTES / 2 + 1]);
        let mut one = Stream::new(1, budget.clone());
        let mut others: Vec<Stream> = (2..12).map(|i| Stream::new(i, budget.clone())).collect();
        // Too large for any stream: delivered, never kept.
        one.push(Bytes::from(vec![b'x'; KEEP_BYTES + 1]), false);
        assert!(one.replay_after(0).is_empty());
        // A stream keeps what fits its own bound, letting its oldest go.
        one.push(big.clone(), false);
        one.push(big.clone(), false);
        assert_eq!(one.replay_after(0).len(), 1);
        for s in &mut others {
            s.push(big.clone(), false);
        }
        assert!(budget.used() <= SESSION_KEEP_BYTES);
        let kept: usize = others.iter().map(|s| s.replay_after(0).len()).sum();
        assert_eq!(kept + 1, SESSION_KEEP_BYTES / big.len());
        // Streams that go give their bytes back.
        drop(others);
        drop(one);
        assert_eq!(budget.used(), 0);
    }
}
