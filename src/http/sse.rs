//! Server-sent event streams: what each stream has sent (for `Last-Event-ID`
//! resumption, bounded), its live connection, and the response body that writes it.
//!
//! Every message goes on exactly one stream of its session (the specification forbids
//! sending one on two). A stream keeps its last [`KEEP_EVENTS`] events (at most
//! [`KEEP_BYTES`]); a client that reconnects with `Last-Event-ID: <stream>-<seq>` gets
//! the events after `seq` still kept, then the stream goes on live. The live connection
//! is fed through a bounded channel: a client that stops reading loses the connection,
//! not the events, and can resume.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use tokio::sync::mpsc;

/// Events kept per stream for resumption.
pub const KEEP_EVENTS: usize = 256;
/// Bytes of events kept per stream for resumption.
pub const KEEP_BYTES: usize = 8 * 1024 * 1024;
/// Events queued for a live connection before it is dropped (it can resume).
const LIVE_QUEUE: usize = 64;

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
}

impl Stream {
    pub fn new(id: u64) -> Stream {
        Stream {
            id,
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
        self.kept_bytes += event.data.len();
        self.kept.push_back(event.clone());
        while self.kept.len() > KEEP_EVENTS || self.kept_bytes > KEEP_BYTES {
            match self.kept.pop_front() {
                Some(old) => self.kept_bytes -= old.data.len(),
                None => break,
            }
        }
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
        let mut s = Stream::new(7);
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
        let mut s = Stream::new(1);
        let _rx = s.attach();
        for _ in 0..(LIVE_QUEUE + 1) {
            s.push(Bytes::from_static(b"{}"), false);
        }
        assert!(!s.is_live());
        assert_eq!(s.replay_after(0).len(), LIVE_QUEUE + 1);
    }
}
