//! One MCP session with an upstream server over Streamable HTTP (2025-11-25), as a client.
//!
//! ```text
//! lines the session let through ─► Link ─► POST each (the handshake alone, first)
//!      answers: JSON body or SSE events ─┐
//!      GET stream (after the handshake) ─┴─► FromUpstream ─► the transport's Session
//! ```
//! The link keeps `Mcp-Session-Id` and `MCP-Protocol-Version`, reads SSE event by event
//! (each bounded, [`super::sse`]), resumes a request's stream that closed before its
//! answer with `Last-Event-ID`, and says which requests got no answer
//! ([`FromUpstream::Unanswered`]): the session gives those their error. When the
//! transport drops its sender, in-flight requests get a short grace, then the session is
//! ended with `DELETE`.
//!
//! An upstream that refuses the `initialize` POST with 404 or 405 may speak the legacy
//! HTTP+SSE transport (2024-11-05): as the specification's backwards-compatibility
//! section says, the link then opens `GET` on the same URL, takes the stream's first
//! `endpoint` event as where to POST (only on the URL's own origin: the headers and token
//! go there), POSTs every line there, and reads every answer from that one stream.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::header::{self, HeaderName, HeaderValue};
use hyper::{Method, Response, StatusCode};
use tokio::sync::mpsc;
use tokio::task::{JoinHandle, JoinSet};

use super::Upstream;
use super::sse::{Data, SseReader};
use crate::io::{Chatter, LogLevel};

/// Lines waiting to be sent before the transport waits.
const TO_UPSTREAM: usize = 64;
/// Messages from the upstream waiting to be judged before the link waits.
const FROM_UPSTREAM: usize = 64;
/// How long requests still in flight may take once the client side closed.
const CLOSE_GRACE: Duration = Duration::from_secs(3);
/// Attempts to resume a request's stream that closed before its answer.
const RESUMES: usize = 3;
/// Consecutive failures of the GET stream before it is given up.
const GET_FAILURES: usize = 5;
/// Consecutive attempts at the GET stream that could not reach the server at all (no
/// HTTP answer) before the upstream is reported gone: its session's streams end, on
/// every transport, instead of staying open with nothing more to come. An answer with an
/// error status is not this: the server is there, it only offers no stream.
const UNREACHABLE: usize = 3;
/// Shortest wait before a reconnection, whatever `retry:` the server asks for: a server
/// answering `retry: 0` and closing at once must not make the link reconnect in a loop.
const MIN_RETRY: Duration = Duration::from_secs(1);
/// Longest first wait, whatever `retry:` the server asks for.
const MAX_RETRY: Duration = Duration::from_secs(5);
/// Longest wait after many reconnections in a row that brought nothing.
const MAX_BACKOFF: Duration = Duration::from_secs(60);

const MCP_SESSION_ID: HeaderName = HeaderName::from_static("mcp-session-id");
const MCP_PROTOCOL_VERSION: HeaderName = HeaderName::from_static("mcp-protocol-version");
const LAST_EVENT_ID: HeaderName = HeaderName::from_static("last-event-id");
const ACCEPT_BOTH: HeaderValue = HeaderValue::from_static("application/json, text/event-stream");
const ACCEPT_SSE: HeaderValue = HeaderValue::from_static("text/event-stream");

/// How long the legacy transport's stream may take to name its endpoint.
const LEGACY_ENDPOINT_WAIT: Duration = Duration::from_secs(10);

/// What became of a POST.
enum Posted {
    /// Answered, or its requests were given their error.
    Done,
    /// The `initialize` POST was refused with this 404 or 405: maybe a legacy HTTP+SSE
    /// server (nothing was handed on yet).
    NotStreamable(StatusCode),
}

/// What the link hands the transport, in the order the server sent it.
#[derive(Debug)]
pub enum FromUpstream {
    /// One message (or batch) the server sent, to judge. Holds no `\n`.
    Message(Vec<u8>),
    /// One too large to judge: its length and first bytes.
    TooLarge { len: usize, head: Vec<u8> },
    /// A line sent upstream whose requests may have no answer coming: those still
    /// unanswered get an error (`why`).
    Unanswered { sent: Vec<u8>, why: String },
    /// The upstream ended the session; nothing more will come.
    Gone(String),
}

/// The transport's ends of a running link.
pub struct Link {
    /// Whole lines (each ending in `\n`) the session let through. Dropping it ends the link.
    pub to_upstream: mpsc::Sender<Vec<u8>>,
    pub from_upstream: mpsc::Receiver<FromUpstream>,
    /// Ends after the `DELETE`, once the sender is dropped.
    pub task: JoinHandle<()>,
}

struct State {
    upstream: Arc<Upstream>,
    /// The legacy HTTP+SSE transport's message endpoint, once the upstream was found to
    /// speak only that.
    legacy: Mutex<Option<hyper::Uri>>,
    session_id: Mutex<Option<HeaderValue>>,
    protocol: Mutex<Option<HeaderValue>>,
    out: mpsc::Sender<FromUpstream>,
    max_frame: usize,
    chatter: Chatter,
}

impl Link {
    /// Start a session with `upstream`; nothing is sent before the first line.
    pub fn start(upstream: Arc<Upstream>, max_frame: usize, chatter: Chatter) -> Link {
        let (to_upstream, rx) = mpsc::channel(TO_UPSTREAM);
        let (out, from_upstream) = mpsc::channel(FROM_UPSTREAM);
        let state = Arc::new(State {
            upstream,
            legacy: Mutex::new(None),
            session_id: Mutex::new(None),
            protocol: Mutex::new(None),
            out,
            max_frame,
            chatter,
        });
        let task = tokio::spawn(run(state, rx));
        Link {
            to_upstream,
            from_upstream,
            task,
        }
    }
}

async fn run(state: Arc<State>, mut rx: mpsc::Receiver<Vec<u8>>) {
    let mut posts = JoinSet::new();
    let mut listening: Option<JoinHandle<()>> = None;
    while let Some(bytes) = rx.recv().await {
        for line in bytes.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
            let line = line.to_vec();
            if crate::mcp::is_initialize(&line) && state.legacy_endpoint().is_none() {
                // Alone and awaited: every later request needs the session id it brings.
                match state.clone().post(line.clone(), true).await {
                    Posted::Done => {}
                    Posted::NotStreamable(status) if listening.is_none() => {
                        match state.clone().open_legacy().await {
                            Ok(stream) => {
                                listening = Some(stream);
                                // Now to the legacy endpoint; its answer comes on the stream.
                                state.clone().post(line, false).await;
                            }
                            Err(why) => {
                                state.chatter.log(
                                    LogLevel::Warn,
                                    format_args!(
                                        "upstream answered the initialize POST with HTTP {status}, and is no legacy HTTP+SSE server either: {why}"
                                    ),
                                );
                                let why = format!("the upstream server answered HTTP {status}");
                                state.unanswered(line, why).await;
                            }
                        }
                    }
                    Posted::NotStreamable(status) => {
                        let why = format!("the upstream server answered HTTP {status}");
                        state.unanswered(line, why).await;
                    }
                }
                if listening.is_none() && state.session_id().is_some() {
                    listening = Some(tokio::spawn(state.clone().listen()));
                }
            } else {
                posts.spawn(state.clone().post(line, false));
            }
        }
        while posts.try_join_next().is_some() {}
    }
    // The client side is gone: answers already on their way get a moment.
    let _ = tokio::time::timeout(CLOSE_GRACE, async {
        while posts.join_next().await.is_some() {}
    })
    .await;
    posts.abort_all();
    if let Some(l) = listening {
        l.abort();
    }
    if let Some(id) = state.session_id() {
        let headers = [(MCP_SESSION_ID, id)];
        let _ = tokio::time::timeout(
            CLOSE_GRACE,
            state.upstream.send(Method::DELETE, &headers, Bytes::new()),
        )
        .await;
    }
}

impl State {
    fn legacy_endpoint(&self) -> Option<hyper::Uri> {
        self.legacy
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The legacy HTTP+SSE transport: `GET` the URL, wait for the `endpoint` event (on
    /// the URL's origin), then read every later event of the stream as a message on a
    /// task of its own, which ends the link when the stream ends.
    async fn open_legacy(self: Arc<Self>) -> Result<JoinHandle<()>, String> {
        let response = self
            .upstream
            .send(Method::GET, &[(header::ACCEPT, ACCEPT_SSE)], Bytes::new())
            .await
            .map_err(|e| e.to_string())?;
        if !response.status().is_success() || !is_sse(&response) {
            return Err(format!(
                "its GET answered HTTP {} without an SSE stream",
                response.status()
            ));
        }
        let mut body = response.into_body();
        let mut reader = SseReader::new(self.max_frame);
        let mut early = Vec::new();
        let endpoint = loop {
            let chunk = match tokio::time::timeout(LEGACY_ENDPOINT_WAIT, body.frame()).await {
                Ok(Some(Ok(frame))) => match frame.into_data() {
                    Ok(data) => data,
                    Err(_) => continue,
                },
                Ok(_) => return Err("its SSE stream ended before an `endpoint` event".into()),
                Err(_) => return Err("its SSE stream sent no `endpoint` event in time".into()),
            };
            let mut found = None;
            reader.feed(&chunk, &mut |e| {
                if found.is_none() && e.endpoint {
                    found = Some(e);
                } else if found.is_some() && !e.endpoint {
                    early.push(e);
                }
            });
            if let Some(event) = found {
                let Data::Whole(data) = event.data else {
                    return Err("its `endpoint` event is too large".into());
                };
                let text = String::from_utf8_lossy(&data).trim().to_string();
                break self.upstream.same_origin(&text).ok_or_else(|| {
                    format!(
                        "its `endpoint` event names {:?}, not a URL on its own origin (the headers and token would go there)",
                        text.chars().take(200).collect::<String>()
                    )
                })?;
            }
        };
        self.chatter.log(
            LogLevel::Info,
            format_args!("upstream speaks the legacy HTTP+SSE transport (2024-11-05); messages go to {endpoint}"),
        );
        *self.legacy.lock().unwrap_or_else(|e| e.into_inner()) = Some(endpoint);
        let state = self.clone();
        Ok(tokio::spawn(async move {
            let mut none = HashSet::new();
            for event in early {
                let item = match event.data {
                    Data::Whole(data) => state.message(data, &mut none, false),
                    Data::TooLarge { len, head } => too_large(len, head, &mut none),
                };
                state.send_out(item).await;
            }
            state.read_stream(body, &mut reader, &mut none, false).await;
            let why = "the upstream closed its HTTP+SSE stream".to_string();
            state.send_out(FromUpstream::Gone(why)).await;
        }))
    }

    /// POST one line to the legacy transport's endpoint: its answers come on the stream.
    async fn post_legacy(&self, endpoint: hyper::Uri, line: Bytes) {
        let headers = [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )];
        match self
            .upstream
            .send_to(endpoint, Method::POST, &headers, line.clone())
            .await
        {
            Ok(r) if r.status().is_success() => {}
            Ok(r) => {
                let why = self.refused(r.status());
                self.unanswered(line.to_vec(), why).await;
            }
            Err(e) => {
                self.chatter
                    .log(LogLevel::Warn, format_args!("upstream: {e}"));
                let why = "the request to the upstream server failed".to_string();
                self.unanswered(line.to_vec(), why).await;
            }
        }
    }

    fn session_id(&self) -> Option<HeaderValue> {
        self.session_id
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The session's headers and `accept`.
    fn headers(&self, accept: HeaderValue) -> Vec<(HeaderName, HeaderValue)> {
        let mut h = vec![(header::ACCEPT, accept)];
        if let Some(id) = self.session_id() {
            h.push((MCP_SESSION_ID, id));
        }
        if let Some(v) = self
            .protocol
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
        {
            h.push((MCP_PROTOCOL_VERSION, v));
        }
        h
    }

    async fn send_out(&self, item: FromUpstream) {
        // The transport stopped reading: it is shutting down.
        let _ = self.out.send(item).await;
    }

    async fn unanswered(&self, sent: Vec<u8>, why: String) {
        self.send_out(FromUpstream::Unanswered { sent, why }).await;
    }

    /// POST one line (`initialize`: whether it is that request) and hand on what comes back.
    async fn post(self: Arc<Self>, line: Vec<u8>, initialize: bool) -> Posted {
        if let Some(endpoint) = self.legacy_endpoint() {
            self.post_legacy(endpoint, Bytes::from(line)).await;
            return Posted::Done;
        }
        let mut waiting = request_ids(&line);
        // Shared with the request's body, not copied: kept for the error if it fails.
        let line = Bytes::from(line);
        let mut headers = self.headers(ACCEPT_BOTH);
        headers.push((
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        ));
        let response = match self
            .upstream
            .send(Method::POST, &headers, line.clone())
            .await
        {
            Ok(r) => r,
            Err(e) => {
                // The details (a URL the server chose, a certificate error) are for the
                // human; the agent is told only that the request failed.
                self.chatter
                    .log(LogLevel::Warn, format_args!("upstream: {e}"));
                let why = "the request to the upstream server failed".to_string();
                self.unanswered(line.to_vec(), why).await;
                return Posted::Done;
            }
        };
        let status = response.status();
        if initialize
            && self.session_id().is_none()
            && matches!(
                status,
                StatusCode::NOT_FOUND | StatusCode::METHOD_NOT_ALLOWED
            )
        {
            // Maybe a legacy HTTP+SSE server: the caller tries that.
            return Posted::NotStreamable(status);
        }
        if !status.is_success() {
            let why = self.refused(status);
            self.unanswered(line.to_vec(), why).await;
            return Posted::Done;
        }
        if initialize
            && let Some(id) = response.headers().get(MCP_SESSION_ID)
            && id.as_bytes().iter().all(|b| (0x21..=0x7e).contains(b))
        {
            *self.session_id.lock().unwrap_or_else(|e| e.into_inner()) = Some(id.clone());
        }
        match content_type(&response) {
            _ if waiting.is_empty() => {}
            Some(t) if t.eq_ignore_ascii_case("text/event-stream") => {
                let mut reader = SseReader::new(self.max_frame);
                self.read_stream(response.into_body(), &mut reader, &mut waiting, initialize)
                    .await;
                let mut resumes = 0;
                let mut backoff = Backoff::default();
                while !waiting.is_empty() && resumes < RESUMES {
                    let Some(last) = reader.last_id().map(str::to_string) else {
                        break;
                    };
                    resumes += 1;
                    tokio::time::sleep(backoff.next(&reader)).await;
                    if let Some(body) = self.resume(&last).await {
                        self.read_stream(body, &mut reader, &mut waiting, initialize)
                            .await;
                    }
                }
            }
            Some(t) if t.eq_ignore_ascii_case("application/json") => {
                self.read_json(response.into_body(), &mut waiting, initialize)
                    .await;
            }
            _ => {
                let why = "the upstream answered with neither JSON nor an SSE stream".to_string();
                self.unanswered(line.to_vec(), why).await;
                return Posted::Done;
            }
        }
        if !waiting.is_empty() {
            let why = if status == StatusCode::ACCEPTED {
                "the upstream accepted the request without answering it"
            } else {
                "the upstream closed the response before answering"
            };
            self.unanswered(line.to_vec(), why.to_string()).await;
        }
        Posted::Done
    }

    /// The error for a request the upstream refused with `status`, and a hint on stderr.
    fn refused(&self, status: StatusCode) -> String {
        let hint = match status {
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => {
                " (check $MCPWALL_UPSTREAM_TOKEN or --header-file)"
            }
            StatusCode::NOT_FOUND if self.session_id().is_some() => {
                " (the upstream session has ended; reconnect the client)"
            }
            _ => "",
        };
        self.chatter.log(
            LogLevel::Warn,
            format_args!("upstream answered HTTP {status}{hint}"),
        );
        format!("the upstream server answered HTTP {status}")
    }

    /// `GET` with `Last-Event-ID`: the rest of a stream that closed early.
    async fn resume(&self, last: &str) -> Option<Incoming> {
        let mut headers = self.headers(ACCEPT_SSE);
        headers.push((LAST_EVENT_ID, HeaderValue::from_str(last).ok()?));
        let response = self
            .upstream
            .send(Method::GET, &headers, Bytes::new())
            .await
            .ok()?;
        (response.status().is_success() && is_sse(&response)).then(|| response.into_body())
    }

    /// Read SSE events until the stream ends, handing each on; how many there were.
    async fn read_stream(
        &self,
        mut body: Incoming,
        reader: &mut SseReader,
        waiting: &mut HashSet<String>,
        initialize: bool,
    ) -> usize {
        let mut events = Vec::new();
        let mut count = 0;
        loop {
            let chunk = match body.frame().await {
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) => data,
                    Err(_) => continue, // trailers
                },
                Some(Err(e)) => {
                    self.chatter.log(
                        LogLevel::Info,
                        format_args!("upstream stream broke off: {e}"),
                    );
                    return count;
                }
                None => return count,
            };
            // `endpoint` events belong to the legacy transport's opening only.
            reader.feed(&chunk, &mut |e| {
                if !e.endpoint {
                    events.push(e);
                }
            });
            count += events.len();
            for event in events.drain(..) {
                let item = match event.data {
                    Data::Whole(data) => self.message(data, waiting, initialize),
                    Data::TooLarge { len, head } => too_large(len, head, waiting),
                };
                self.send_out(item).await;
            }
        }
    }

    /// Read a JSON body, bounded.
    async fn read_json(&self, mut body: Incoming, waiting: &mut HashSet<String>, initialize: bool) {
        let mut data = Vec::new();
        let mut len = 0usize;
        while let Some(frame) = body.frame().await {
            let Ok(frame) = frame else {
                return;
            };
            let Ok(chunk) = frame.into_data() else {
                continue;
            };
            len += chunk.len();
            if len > self.max_frame {
                data.extend_from_slice(
                    &chunk[..chunk
                        .len()
                        .min(crate::io::codec::HEAD_BYTES.saturating_sub(data.len()))],
                );
                data.truncate(crate::io::codec::HEAD_BYTES);
                // The rest is not read: the connection closes with the body.
                let item = too_large(len, data, waiting);
                return self.send_out(item).await;
            }
            data.extend_from_slice(&chunk);
        }
        let item = self.message(data, waiting, initialize);
        self.send_out(item).await;
    }

    /// One message as read: its line breaks (JSON whitespace) made spaces so it is one
    /// line for a stdio client; the request it answers no longer waits.
    fn message(
        &self,
        mut data: Vec<u8>,
        waiting: &mut HashSet<String>,
        initialize: bool,
    ) -> FromUpstream {
        one_line(&mut data);
        let trimmed = data.trim_ascii();
        if trimmed.len() != data.len() {
            data = trimmed.to_vec();
        }
        if let Some(answer) = answer_of(&data, initialize) {
            waiting.remove(&answer.key);
            if initialize
                && let Some(v) = answer.protocol
                && let Ok(v) = HeaderValue::from_str(&v)
            {
                *self.protocol.lock().unwrap_or_else(|e| e.into_inner()) = Some(v);
            }
        }
        FromUpstream::Message(data)
    }

    /// The session's GET stream: what the server sends outside any request. Reconnects
    /// (with `Last-Event-ID`) until it fails [`GET_FAILURES`] times in a row, waiting
    /// longer after each reconnection that brought no event ([`Backoff`]); a server not
    /// reached at all [`UNREACHABLE`] times in a row is reported gone.
    async fn listen(self: Arc<Self>) {
        let mut reader = SseReader::new(self.max_frame);
        let mut failures = 0;
        let mut unreachable = 0;
        let mut backoff = Backoff::default();
        let mut no_answers = HashSet::new();
        loop {
            let mut headers = self.headers(ACCEPT_SSE);
            if let Some(last) = reader.last_id().and_then(|l| HeaderValue::from_str(l).ok()) {
                headers.push((LAST_EVENT_ID, last));
            }
            match self
                .upstream
                .send(Method::GET, &headers, Bytes::new())
                .await
            {
                // The server offers no stream: everything comes on the POSTs.
                Ok(r) if r.status() == StatusCode::METHOD_NOT_ALLOWED => return,
                Ok(r) if r.status() == StatusCode::NOT_FOUND => {
                    let why = "the upstream ended the session (HTTP 404)".to_string();
                    return self.send_out(FromUpstream::Gone(why)).await;
                }
                Ok(r) if r.status().is_success() && is_sse(&r) => {
                    failures = 0;
                    unreachable = 0;
                    let events = self
                        .read_stream(r.into_body(), &mut reader, &mut no_answers, false)
                        .await;
                    if events > 0 {
                        backoff = Backoff::default();
                    }
                }
                Ok(r) => {
                    failures += 1;
                    unreachable = 0;
                    self.chatter.log(
                        LogLevel::Debug,
                        format_args!("upstream GET stream: HTTP {}", r.status()),
                    );
                }
                Err(e) => {
                    failures += 1;
                    unreachable += 1;
                    self.chatter
                        .log(LogLevel::Debug, format_args!("upstream GET stream: {e}"));
                }
            }
            if unreachable >= UNREACHABLE {
                let why = format!(
                    "the upstream server could not be reached ({unreachable} attempts in a row)"
                );
                self.chatter.log(
                    LogLevel::Warn,
                    format_args!("upstream: {why}; ending the session"),
                );
                return self.send_out(FromUpstream::Gone(why)).await;
            }
            if failures >= GET_FAILURES {
                self.chatter.log(
                    LogLevel::Warn,
                    format_args!(
                        "upstream: the server's GET stream failed {failures} times; messages it sends outside a request are no longer received"
                    ),
                );
                return;
            }
            tokio::time::sleep(backoff.next(&reader)).await;
        }
    }
}

/// The waits between reconnections of one stream: the server's `retry:` kept between
/// [`MIN_RETRY`] and [`MAX_RETRY`], doubled after each reconnection in a row up to
/// [`MAX_BACKOFF`], plus up to half again at random so that many links dropped at once do
/// not come back at once.
#[derive(Debug, Default)]
struct Backoff {
    /// Reconnections in a row so far.
    attempts: u32,
}

impl Backoff {
    fn next(&mut self, reader: &SseReader) -> Duration {
        let asked = reader
            .retry_ms()
            .map_or(MIN_RETRY, Duration::from_millis)
            .clamp(MIN_RETRY, MAX_RETRY);
        let wait = asked
            .saturating_mul(1 << self.attempts.min(16))
            .min(MAX_BACKOFF);
        self.attempts = self.attempts.saturating_add(1);
        wait + wait.mul_f64(jitter() / 2.0)
    }
}

/// A number in `[0, 1)`, different in each call and process (not for secrets).
fn jitter() -> f64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos(),
    );
    (h.finish() >> 11) as f64 / (1u64 << 53) as f64
}

fn content_type(response: &Response<Incoming>) -> Option<&str> {
    let value = response
        .headers()
        .get(header::CONTENT_TYPE)?
        .to_str()
        .ok()?;
    Some(value.split(';').next().unwrap_or("").trim())
}

fn is_sse(response: &Response<Incoming>) -> bool {
    content_type(response).is_some_and(|t| t.eq_ignore_ascii_case("text/event-stream"))
}

fn too_large(len: usize, head: Vec<u8>, waiting: &mut HashSet<String>) -> FromUpstream {
    // The session answers that request with an error: it no longer waits here.
    let seen = crate::frame::read_head(&head);
    if let Some(key) = seen
        .id
        .and_then(|r| crate::session::ids::route_key(&head[r]))
    {
        waiting.remove(&key);
    }
    FromUpstream::TooLarge { len, head }
}

/// Line breaks outside JSON strings become spaces (the same JSON value). Inside a string
/// a raw line break is invalid JSON and is left for the session's parser to refuse.
fn one_line(data: &mut [u8]) {
    let (mut in_string, mut escaped) = (false, false);
    for b in data.iter_mut() {
        if in_string {
            match *b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
        } else {
            match *b {
                b'"' => in_string = true,
                b'\n' | b'\r' => *b = b' ',
                _ => {}
            }
        }
    }
}

#[derive(serde::Deserialize)]
struct Head<'a> {
    #[serde(borrow)]
    id: Option<&'a serde_json::value::RawValue>,
    #[serde(borrow)]
    method: Option<&'a serde_json::value::RawValue>,
}

/// The canonical ids of the requests in a line the client sent (one message or a batch).
fn request_ids(line: &[u8]) -> HashSet<String> {
    if line.trim_ascii_start().first() != Some(&b'[') {
        // One message (the session has parsed it whole): its head is enough.
        let head = crate::frame::read_head(line);
        return (head.method)
            .then(|| crate::session::ids::route_key(&line[head.id?]))
            .flatten()
            .into_iter()
            .collect();
    }
    let heads: Vec<Head<'_>> = serde_json::from_slice(line).unwrap_or_default();
    heads
        .into_iter()
        .filter(|h| h.method.is_some())
        .filter_map(|h| crate::session::ids::route_key(h.id?.get().as_bytes()))
        .collect()
}

struct Answered {
    key: String,
    /// `result.protocolVersion`, for the answer to `initialize`.
    protocol: Option<String>,
}

fn answer_of(data: &[u8], initialize: bool) -> Option<Answered> {
    if !initialize {
        // Every answer but the handshake's: the id is all that is needed, read without
        // parsing the result (which may be large; the session parses it when judging).
        let head = crate::frame::read_head(data);
        if head.method {
            return None;
        }
        return Some(Answered {
            key: crate::session::ids::route_key(&data[head.id?])?,
            protocol: None,
        });
    }
    #[derive(serde::Deserialize)]
    struct Answer<'a> {
        #[serde(borrow)]
        id: Option<&'a serde_json::value::RawValue>,
        #[serde(borrow)]
        method: Option<&'a serde_json::value::RawValue>,
        result: Option<Init>,
    }
    #[derive(serde::Deserialize)]
    struct Init {
        #[serde(rename = "protocolVersion")]
        protocol_version: Option<String>,
    }
    let a: Answer<'_> = serde_json::from_slice(data).ok()?;
    if a.method.is_some() {
        return None;
    }
    Some(Answered {
        key: crate::session::ids::route_key(a.id?.get().as_bytes())?,
        protocol: a.result.and_then(|r| r.protocol_version),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reconnections_wait_at_least_the_floor_and_back_off_to_a_cap() {
        let mut reader = SseReader::new(1024);
        reader.feed(b"retry: 0\n\n", &mut |_| {});
        let mut backoff = Backoff::default();
        let waits: Vec<Duration> = (0..10).map(|_| backoff.next(&reader)).collect();
        assert!(
            waits[0] >= MIN_RETRY && waits[0] < MIN_RETRY * 2,
            "{waits:?}"
        );
        assert!(waits[3] >= MIN_RETRY * 8, "{waits:?}");
        assert!(
            waits.iter().all(|w| *w <= MAX_BACKOFF.mul_f64(1.5)),
            "{waits:?}"
        );
        assert!(waits[9] >= MAX_BACKOFF, "{waits:?}");
    }

    #[test]
    fn line_breaks_become_spaces_only_outside_strings() {
        let mut data = b"{\n \"a\": \"x\\\"\ny\",\r\n\"b\":1}".to_vec();
        one_line(&mut data);
        assert_eq!(data, b"{  \"a\": \"x\\\"\ny\",  \"b\":1}".to_vec());
    }

    #[test]
    fn requests_are_found_in_messages_and_batches() {
        let ids = request_ids(br#"[{"jsonrpc":"2.0","id":1,"method":"a"},{"jsonrpc":"2.0","method":"n"},{"jsonrpc":"2.0","id":"x","result":{}}]"#);
        assert_eq!(ids, HashSet::from(["1".to_string()]));
        let one =
            request_ids(br#"{"jsonrpc":"2.0","id":"a\u0062","method":"a","params":{"id":9}}"#);
        assert_eq!(one, HashSet::from([r#""ab""#.to_string()]));
        assert!(request_ids(br#"{"jsonrpc":"2.0","method":"n","params":{"id":9}}"#).is_empty());
        assert!(request_ids(br#"{"jsonrpc":"2.0","id":3,"result":{"method":"x"}}"#).is_empty());
        let answer = answer_of(
            br#"{"jsonrpc":"2.0","id":3,"result":{"method":"x"}}"#,
            false,
        );
        assert_eq!(answer.map(|a| a.key), Some("3".to_string()));
        let a = answer_of(
            br#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25"}}"#,
            true,
        )
        .unwrap();
        assert_eq!(
            (a.key.as_str(), a.protocol.as_deref()),
            ("1", Some("2025-11-25"))
        );
    }
}
