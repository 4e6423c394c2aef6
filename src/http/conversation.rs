//! One HTTP session (`Mcp-Session-Id`): its own stdio server, its own [`Session`], and
//! the routing of what the session lets through to the HTTP requests waiting for it.
//!
//! Each HTTP session spawns its own server, as a stdio client would. One shared server
//! would need the gateway to rewrite every request id (two clients both send `id: 1`)
//! and every id inside progress tokens and cancellations, and to fan one `initialize`
//! out to many clients whose capabilities differ; a server process per session keeps the
//! ids the client's own, so the session layer sees exactly what a stdio proxy would.
//!
//! ```text
//! POST body ─► Session::from_client ─► server stdin (writer task), or the upstream link
//! server stdout ─► LineReader ─┐
//! upstream link (FromUpstream) ┴─► Session::from_server ─► route(line, the session's Route)
//!     an answer ─► the stream of the POST that asked (JSON, or SSE once other messages came first)
//!     a request or notification ─► the newest POST stream reading SSE, else the GET stream
//! ```
//! The read loops, the judging (large lines off the I/O thread), the hand-out of what the
//! session produced and the approval timer are `crate::driver`'s; a conversation is its
//! [`Driven`]: what is its own is routing the session's lines to HTTP streams, by the
//! [`Route`] the session gave each (never by reading the line again).
//!
//! **Reloads.** The judge (program, tool guard, rate limit) a conversation judges with is
//! that of its identity in the server's [`LiveJudges`]. When a reload swaps those, the
//! conversation adopts the new judge before it judges its next message, in either
//! direction ([`Session::adopt`]): a message being judged finishes under the policy it
//! started with, and every message after the swap is judged under the new one. A judge
//! is held (read) across the judging of a message and the naming of its audit events, so
//! an event is always named by the program that wrote it. An identity the new judges no
//! longer hold (its token is gone) ends the conversation.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use tokio::io::AsyncWriteExt;
use tokio::sync::{Notify, mpsc};

use super::identities::{Judge, LiveJudges};
use super::metrics::Metrics;
use super::sse::{Event, Stream};
use crate::audit::AuditSender;
use crate::driver::approvals::Approvals;
use crate::driver::handout::{Handout, Side};
use crate::driver::judging::{Held, Judging, OFF_LOOP_BYTES, SharedSession};
use crate::driver::{Driven, Judged, reading};
use crate::io::child::{self, ChildSpec, ServerProcess, SpawnError};
use crate::io::codec::LineReader;
use crate::io::{Chatter, LogLevel};
use crate::session::{self, Line, Outbox, Peer, Route, Session};
use crate::upstream::Upstream;
use crate::upstream::link::{FromUpstream, Link};

/// What each session's messages are relayed to.
#[derive(Debug)]
pub enum Backend {
    /// A stdio server, one process per session.
    Command(ChildSpec),
    /// A remote server over Streamable HTTP (`serve --upstream URL`), one upstream
    /// session per gateway session.
    Upstream(Arc<Upstream>),
}

/// Batches waiting for the server's stdin before a client request waits.
const TO_SERVER_QUEUE: usize = 64;
/// Between closing the server's stdin and SIGTERM, and between SIGTERM and SIGKILL.
const SERVER_GRACE: Duration = Duration::from_secs(2);
/// How long a legacy or WebSocket client may leave its messages unread before its
/// session is ended.
const STALLED_READER: Duration = Duration::from_secs(60);
/// Longest an answer waits for its audit lines (`gateway.audit_before_answer`).
const AUDIT_WAIT: Duration = Duration::from_secs(5);
/// Finished request streams kept for a late `Last-Event-ID` resumption.
const KEEP_FINISHED: usize = 32;

/// The session has ended (DELETE, or its server exited).
#[derive(Debug)]
pub struct Ended;

/// See the module docs.
pub struct Conversation {
    /// The `Mcp-Session-Id`.
    pub id: String,
    /// The audit log's `session` for this conversation's events.
    audit_session: Arc<str>,
    /// The identity that opened the session; only it may use it.
    pub identity: Option<Arc<str>>,
    /// The program and guard of that identity the session judges with now (see the
    /// module docs); replaced only by [`Self::adopt_current_policy`].
    judge: tokio::sync::RwLock<Arc<Judge>>,
    /// The generation of `live` that `judge` came from.
    generation: AtomicU64,
    /// The server's judges as reloads leave them.
    live: Arc<LiveJudges>,
    metrics: Arc<Metrics>,
    session: SharedSession,
    /// The session's frame limits (fixed by its program).
    limits: crate::frame::Limits,
    routes: Mutex<Routes>,
    /// The server's stdin (its writer task), or the upstream link.
    to_server: Side,
    /// Notices, audit events (named by [`Self::stamp`]) and held calls, with their timer.
    handout: Handout,
    chatter: Chatter,
    ended: AtomicBool,
    /// Wakes the supervisor to end the session (DELETE, shutdown).
    end: Notify,
    /// When the client last sent a request (POST or GET).
    last_used: Mutex<std::time::Instant>,
    /// The legacy HTTP+SSE transport: every message, answers included, goes on the one
    /// stream the client opened with `GET /sse`.
    legacy: bool,
    /// The gateway's own conversation for an identity's stateless (2026-07-28) requests
    /// (see `stateless.rs`): the server's requests are answered by the gateway, and
    /// notifications no request stream takes are dropped (no GET stream to keep them for).
    stateless: bool,
    /// The audit log's `transport`: `http` (Streamable HTTP, legacy SSE) or `websocket`.
    transport: &'static str,
    /// The audit log's `server` for this conversation's events (a named server of
    /// several), or `None` for the listener's name.
    server: Option<Arc<str>>,
    /// Numbers the requests the conversation itself sends (`resources/unsubscribe`).
    gateway_requests: std::sync::atomic::AtomicU64,
    /// Hold what goes to the client until its audit lines are written.
    audit_before_answer: bool,
}

#[derive(Default)]
struct Routes {
    streams: HashMap<u64, Stream>,
    next_stream: u64,
    /// Request id (canonical JSON text) → the stream of the POST that sent it.
    answers: HashMap<String, u64>,
    /// Streams of POSTs awaiting their answer whose client reads SSE, oldest first.
    sse_posts: Vec<u64>,
    /// The stream for messages no request stream takes (read by GET).
    get: Option<u64>,
    /// What this session's streams keep for resumption, bounded (`sse.rs`).
    replay: Arc<super::sse::Budget>,
    finished: VecDeque<u64>,
    /// A stateless conversation's progress tokens (canonical JSON text) → the stream of
    /// the request that named it: each request's progress goes on its own response.
    progress: HashMap<String, u64>,
    /// A stateless conversation keeps no GET stream.
    stateless: bool,
    /// Its clients' `subscriptions/listen` streams.
    listeners: Vec<Listener>,
    /// Resources the gateway subscribed to for listen streams no longer open: to be
    /// unsubscribed on the server.
    unwanted: Vec<String>,
    /// Stateless requests in flight whose server may ask the client for input (MRTR), by
    /// the gateway's request key.
    asking: HashMap<String, InputAsk>,
    /// Calls parked on an `input_required` answer, by their `requestState`.
    parked: HashMap<String, Parked>,
    /// A stateless conversation's requests in flight, by the gateway's request key: the
    /// id the client gave, which their audit events carry (the gateway's own id is only
    /// the server's to see).
    client_ids: HashMap<String, crate::session::IdText>,
}

/// A stateless request the server may ask input for: what the client can give.
#[derive(Debug, Clone)]
pub struct InputAsk {
    /// The request's method and, for `tools/call` and `prompts/get`, its `name`: a retry
    /// must repeat them.
    pub method: String,
    pub name: Option<String>,
    /// Server requests the client declared it can answer (`sampling/createMessage`, …).
    pub methods: Vec<&'static str>,
    /// The gateway's id of the request.
    pub gateway_id: String,
}

/// A call whose client was answered `input_required`: its backend request is still
/// pending on the server, which waits for the answers to its own requests.
#[derive(Debug)]
pub struct Parked {
    /// The request's key (its gateway id's canonical text).
    pub key: String,
    pub ask: InputAsk,
    /// `inputRequests` key → the id of the server's request it stands for.
    pub inputs: Vec<(String, serde_json::Value)>,
    pub since: std::time::Instant,
}

/// Parked calls per conversation (per identity): more server requests get `-32601`.
const MAX_PARKED: usize = 16;

/// A stateless client's `subscriptions/listen` stream.
pub struct Listener {
    /// The notification methods it opted in to (and the server offers).
    pub methods: Vec<&'static str>,
    /// The `subscriptions/listen` request's id: the subscription id.
    pub id: serde_json::Value,
    /// SSE events (formatted); a client that does not read its stream loses it.
    pub tx: mpsc::Sender<Bytes>,
    /// The resources whose `notifications/resources/updated` it receives (the gateway
    /// subscribed to them on the server for it).
    pub uris: Vec<String>,
}

/// What a POST that sent a request reads its answer from.
pub struct Answer {
    pub stream: u64,
    pub rx: mpsc::Receiver<Event>,
}

/// Whose a new session is and how it is spoken to.
pub struct Opening {
    /// The `Mcp-Session-Id` (or legacy `session_id`).
    pub id: String,
    pub identity: Option<Arc<str>>,
    /// The legacy HTTP+SSE transport: one stream carries everything.
    pub legacy: bool,
    /// The gateway's conversation for stateless (2026-07-28) requests.
    pub stateless: bool,
    /// The audit log's `transport`: `http` or `websocket`.
    pub transport: &'static str,
    /// The audit log's `server`: the named server, when the listener serves several.
    pub server: Option<Arc<str>>,
    /// Where calls an `ask` rule holds wait for `mcpwall approve` (`~/.mcpwall/pending/`).
    pub home: Option<std::path::PathBuf>,
    /// The server's judges, and the generation the session's judge comes from.
    pub live: Arc<LiveJudges>,
    pub generation: u64,
    pub metrics: Arc<Metrics>,
    /// `settings.gateway.audit_before_answer`.
    pub audit_before_answer: bool,
}

impl Conversation {
    /// Spawn the server for a new session and start relaying its output.
    pub fn start(
        opening: Opening,
        backend: &Backend,
        judge: Arc<Judge>,
        options: session::Options,
        audit: AuditSender,
        chatter: Chatter,
    ) -> Result<Arc<Conversation>, SpawnError> {
        let spec = match backend {
            Backend::Command(spec) => spec,
            Backend::Upstream(upstream) => {
                return Ok(Conversation::start_upstream(
                    opening,
                    upstream.clone(),
                    judge,
                    options,
                    audit,
                    chatter,
                ));
            }
        };
        let (server, stdin, stdout) = child::spawn(spec)?;
        let max_line = judge.program.settings().max_frame_bytes;
        let (tx, rx) = mpsc::channel(TO_SERVER_QUEUE);
        let conversation = Conversation::new(opening, judge, options, audit, chatter, tx);
        tokio::spawn(write_to_server(stdin, rx));
        let reader = tokio::spawn(
            conversation
                .clone()
                .read_server(LineReader::new(stdout, max_line)),
        );
        tokio::spawn(conversation.clone().supervise(server, reader));
        tokio::spawn(conversation.clone().expire_approvals());
        Ok(conversation)
    }

    /// A session relayed to a remote server: its own upstream session ([`Link`]).
    fn start_upstream(
        opening: Opening,
        upstream: Arc<Upstream>,
        judge: Arc<Judge>,
        options: session::Options,
        audit: AuditSender,
        chatter: Chatter,
    ) -> Arc<Conversation> {
        let max_line = judge.program.settings().max_frame_bytes;
        let link = Link::start(upstream, max_line, chatter);
        let conversation =
            Conversation::new(opening, judge, options, audit, chatter, link.to_upstream);
        let reader = tokio::spawn(conversation.clone().read_upstream(link.from_upstream));
        tokio::spawn(conversation.clone().supervise_upstream(link.task, reader));
        tokio::spawn(conversation.clone().expire_approvals());
        conversation
    }

    fn new(
        opening: Opening,
        judge: Arc<Judge>,
        options: session::Options,
        audit: AuditSender,
        chatter: Chatter,
        tx: mpsc::Sender<Vec<u8>>,
    ) -> Arc<Conversation> {
        let Opening {
            id,
            identity,
            legacy,
            stateless,
            transport,
            server,
            home,
            live,
            generation,
            metrics,
            audit_before_answer,
        } = opening;
        let mut session = Session::new(judge.program.clone(), options);
        if !legacy && transport == "http" {
            // A POST carries one message and reads one answer.
            session.carry_single_messages();
        }
        if let Some(rate) = &judge.rate {
            session.share_rate_limit(rate.clone());
        }
        Arc::new(Conversation {
            audit_session: crate::audit::derived_session_id(&id).into(),
            id,
            identity,
            judge: tokio::sync::RwLock::new(judge),
            generation: AtomicU64::new(generation),
            live,
            metrics,
            limits: session.limits(),
            session: Arc::new(tokio::sync::Mutex::new(session)),
            routes: Mutex::new(Routes {
                stateless,
                ..Routes::default()
            }),
            to_server: Side::new(tx),
            handout: Handout {
                chatter,
                audit,
                // A gateway's human is not at the client's desktop.
                approvals: Arc::new(Approvals::new(home, chatter, false)),
                transport: None,
            },
            chatter,
            ended: AtomicBool::new(false),
            end: Notify::new(),
            last_used: Mutex::new(std::time::Instant::now()),
            legacy,
            stateless,
            transport,
            server,
            gateway_requests: std::sync::atomic::AtomicU64::new(0),
            audit_before_answer,
        })
    }

    pub fn is_ended(&self) -> bool {
        self.ended.load(Ordering::Acquire)
    }

    /// End the session: the server's stdin closes, then it is stopped.
    pub fn end(&self) {
        // From now on nothing more reaches the server (a revoked identity's next
        // message included), even before the supervisor wakes.
        self.to_server.close();
        self.end.notify_one();
    }

    /// The client sent a request on this session.
    pub fn touch(&self) {
        *self.last_used.lock().unwrap_or_else(|e| e.into_inner()) = std::time::Instant::now();
    }

    /// No request for `limit` and no stream being read: the client is gone.
    pub fn idle_for(&self, limit: Duration) -> bool {
        let last = *self.last_used.lock().unwrap_or_else(|e| e.into_inner());
        let routes = self.lock_routes();
        last.elapsed() >= limit
            && !routes.streams.values().any(Stream::is_live)
            && routes.listeners.iter().all(|l| l.tx.is_closed())
    }

    /// Since when the session has been neither used nor read: its last request, when no
    /// stream of it is being read; `None` while one is.
    pub fn idle_since(&self) -> Option<std::time::Instant> {
        let last = *self.last_used.lock().unwrap_or_else(|e| e.into_inner());
        let routes = self.lock_routes();
        let reading = routes.streams.values().any(Stream::is_live)
            || routes.listeners.iter().any(|l| !l.tx.is_closed());
        (!reading).then_some(last)
    }

    /// Add a `subscriptions/listen` stream; `false` when the conversation has ended.
    pub fn listen(&self, listener: Listener) -> bool {
        let mut routes = self.lock_routes();
        if self.is_ended() {
            return false;
        }
        routes.listeners.retain(|l| !l.tx.is_closed());
        routes.listeners.push(listener);
        true
    }

    /// The frame limits client messages are read with.
    pub fn limits(&self) -> crate::frame::Limits {
        self.limits
    }

    /// Whether a request with this id (canonical JSON text) is still unanswered.
    pub fn is_in_flight(&self, id_key: &str) -> bool {
        self.lock_routes().answers.contains_key(id_key)
    }

    /// Register a POST that sent request `id_key`, before the request is judged: its
    /// answer (and, when `reads_sse`, messages the server sends meanwhile) go there.
    pub fn expect_answer(&self, id_key: String, reads_sse: bool) -> Answer {
        self.expect_answer_with_progress(id_key, reads_sse, None)
    }

    /// [`Self::expect_answer`], and the server's progress notifications naming
    /// `progress` (a token's canonical JSON text) go on the same stream.
    pub fn expect_answer_with_progress(
        &self,
        id_key: String,
        reads_sse: bool,
        progress: Option<String>,
    ) -> Answer {
        let mut routes = self.lock_routes();
        let stream = routes.new_stream();
        let rx = routes
            .streams
            .get_mut(&stream)
            .map(Stream::attach)
            .unwrap_or_else(|| mpsc::channel(1).1);
        routes.answers.insert(id_key, stream);
        if let Some(token) = progress {
            routes.progress.insert(token, stream);
        }
        if reads_sse {
            routes.sse_posts.push(stream);
        }
        Answer { stream, rx }
    }

    /// The answer on `stream` went out as a whole `application/json` body: a client
    /// reading JSON cannot resume, so nothing of the stream is kept.
    pub fn delivered_whole(&self, stream: u64) {
        let mut routes = self.lock_routes();
        routes.streams.remove(&stream);
        routes.finished.retain(|s| *s != stream);
    }

    /// A POST whose request turned out not to be one the session answers (it was a
    /// notification after all): forget its stream.
    pub fn forget_answer(&self, id_key: &str) {
        let mut routes = self.lock_routes();
        routes.asking.remove(id_key);
        routes.client_ids.remove(id_key);
        if let Some(stream) = routes.answers.remove(id_key) {
            routes.sse_posts.retain(|s| *s != stream);
            routes.progress.retain(|_, s| *s != stream);
            routes.streams.remove(&stream);
        }
    }

    /// The audit events of the stateless request `key` (the gateway's id) carry the
    /// client's id `client_id`, until it is answered.
    pub fn audit_under(&self, key: &str, client_id: &serde_json::Value) {
        if let Ok(raw) = serde_json::to_vec(client_id) {
            let id = crate::session::IdText::new(&raw);
            self.lock_routes().client_ids.insert(key.to_string(), id);
        }
    }

    /// The stateless request `key` may be answered `input_required` when its server asks
    /// for input the client can give (see `stateless.rs`).
    pub fn expect_input(&self, key: String, ask: InputAsk) {
        self.lock_routes().asking.insert(key, ask);
    }

    /// The call parked under `state`, taken out, if it is there and `fits` it (a retry
    /// of the same request).
    pub fn unpark(&self, state: &str, fits: impl FnOnce(&InputAsk) -> bool) -> Option<Parked> {
        // A hashed lookup, as for session ids (`registry.rs`): the map's keys are hashed
        // with random keys, so how long it takes tells nothing about a stored state.
        let mut routes = self.lock_routes();
        if !fits(&routes.parked.get(state)?.ask) {
            return None;
        }
        routes.parked.remove(state)
    }

    /// Parked calls older than `limit`, taken out (to be cancelled on the server).
    pub fn expired_parked(&self, limit: Duration) -> Vec<Parked> {
        let mut routes = self.lock_routes();
        let expired: Vec<String> = routes
            .parked
            .iter()
            .filter(|(_, p)| p.since.elapsed() > limit)
            .map(|(k, _)| k.clone())
            .collect();
        let expired: Vec<Parked> = expired
            .iter()
            .filter_map(|k| routes.parked.remove(k))
            .collect();
        for parked in &expired {
            routes.client_ids.remove(&parked.key);
        }
        expired
    }

    /// Judge one message from the client and move what comes of it.
    pub async fn from_client(&self, line: Line<'_>) -> Result<(), Ended> {
        if self.is_ended() {
            return Err(Ended);
        }
        let out = self.judged(Peer::Client, line).await;
        self.deliver(out).await;
        Ok(())
    }

    /// Judge a request whose answer could not be routed by its id (a request with that
    /// id is in flight): what the session writes to the client comes back to the caller
    /// (one line, without its newline) instead of going on a stream; the rest is
    /// delivered as usual.
    pub async fn judge_unrouted(&self, line: Line<'_>) -> Result<Bytes, Ended> {
        if self.is_ended() {
            return Err(Ended);
        }
        let mut out = self.judged(Peer::Client, line).await;
        let mut to_client = std::mem::take(&mut out.to_client);
        self.deliver(out).await;
        if to_client.last() == Some(&b'\n') {
            to_client.pop();
        }
        Ok(Bytes::from(to_client))
    }

    /// A GET: attach to the session's GET stream (or, with `Last-Event-ID`, the stream
    /// it names), with the events it is owed first. `None`: no such stream.
    pub fn open_stream(
        &self,
        resume: Option<(u64, u64)>,
    ) -> Option<(u64, Vec<Event>, mpsc::Receiver<Event>)> {
        let mut routes = self.lock_routes();
        let (stream, after) = match resume {
            Some((stream, seq)) => (stream, seq),
            None => {
                let get = routes.get_stream();
                let delivered = routes.streams.get(&get).map_or(0, Stream::delivered);
                (get, delivered)
            }
        };
        let s = routes.streams.get_mut(&stream)?;
        let replay = s.replay_after(after);
        let rx = s.attach();
        Some((stream, replay, rx))
    }

    /// Hand out what one call of the session produced: notices to stderr, events to the
    /// audit log (with this session's identity), bytes to the server and to the client's
    /// streams.
    async fn deliver(&self, out: Outbox) {
        let mut queue = vec![out];
        while let Some(out) = queue.pop() {
            if let Some(answers) = self.deliver_one(out).await {
                queue.push(answers);
            }
        }
    }

    /// [`Self::deliver`] for one outbox; in a stateless conversation, what the session made
    /// of the gateway's answers to the server's requests (to be delivered in turn).
    async fn deliver_one(&self, mut out: Outbox) -> Option<Outbox> {
        let mark = self.handout.side_effects(&mut out);
        if self.audit_before_answer && !out.to_client.is_empty() {
            // The client hears nothing the log does not hold yet; a writer stuck on a dead
            // disk holds answers for a bounded time only (its loss is then on stderr).
            let written = self.handout.audit.written(mark);
            if tokio::time::timeout(AUDIT_WAIT, written).await.is_err() {
                self.chatter.log(
                    LogLevel::Warn,
                    format_args!(
                        "session {}: the audit log took over {} s to write; answering without it",
                        self.id,
                        AUDIT_WAIT.as_secs()
                    ),
                );
            }
        }
        self.to_server.send(&mut out.to_server).await;
        let mut refusals = Vec::new();
        let mut paced = Vec::new();
        if !out.to_client.is_empty() {
            let mut routes = self.lock_routes();
            // The session says what each line is; none is read again to route it.
            let mut facts = out.routes.take().unwrap_or_default().into_iter();
            for line in lines(&out.to_client) {
                let route = facts.next();
                debug_assert!(
                    route.is_some(),
                    "the session wrote a line without its route"
                );
                let route = route.unwrap_or(Route::Batch);
                if self.stateless && routes.park(line, &route) {
                    continue;
                }
                if self.stateless
                    && let Some(refusal) = super::modern::answer_server_request(&route)
                {
                    // A server request no stateless request can carry (see
                    // `stateless.rs`): the gateway answers it, and the session judges
                    // that answer as any client's.
                    refusals.push(refusal);
                    continue;
                }
                if self.legacy {
                    let stream = routes.get_stream();
                    if let Some(s) = routes.streams.get_mut(&stream) {
                        paced.extend(s.pace(Bytes::copy_from_slice(line)));
                    }
                } else {
                    routes.route(line, &route);
                }
            }
        }
        self.send_paced(paced).await;
        let unwanted = std::mem::take(&mut self.lock_routes().unwanted);
        if refusals.is_empty() && unwanted.is_empty() {
            return None;
        }
        let answers = self
            .with_session(|session, answers| {
                for refusal in &refusals {
                    session.from_client(Line::Frame(refusal), answers);
                }
                for uri in unwanted {
                    // Judged as any client's message; its answer is awaited by no one.
                    let n = self.gateway_requests.fetch_add(1, Ordering::Relaxed);
                    let unsubscribe = serde_json::json!({"jsonrpc": "2.0",
                        "id": format!("mcpwall-unsubscribe-{n}"),
                        "method": "resources/unsubscribe", "params": {"uri": uri}})
                    .to_string();
                    session.from_client(Line::Frame(unsubscribe.as_bytes()), answers);
                }
            })
            .await;
        Some(answers)
    }

    /// Hand a legacy or WebSocket connection its messages, waiting for room: while its
    /// client does not read, the server's output and the client's next requests wait
    /// here (back-pressure), and nothing is lost. A connection that takes nothing for
    /// [`STALLED_READER`] is closed, and told why on stderr.
    async fn send_paced(&self, paced: Vec<(mpsc::Sender<Event>, Event)>) {
        for (tx, event) in paced {
            match tokio::time::timeout(STALLED_READER, tx.send(event)).await {
                Ok(_) => {}
                Err(_) => {
                    self.chatter.log(
                        LogLevel::Info,
                        format_args!(
                            "session {}: its client read nothing for {} s; closing its stream",
                            self.id,
                            STALLED_READER.as_secs()
                        ),
                    );
                    self.end();
                    return;
                }
            }
        }
    }

    /// Read the server's lines, judge each, and deliver what the session lets through.
    async fn read_server(self: Arc<Self>, reader: LineReader<tokio::process::ChildStdout>) {
        reading::relay(reader, Peer::Server, &*self, &self.chatter).await;
    }

    /// Judge what the upstream sends, until the link ends or the upstream ends the
    /// session (`supervise_upstream` answers what is left).
    async fn read_upstream(self: Arc<Self>, mut rx: mpsc::Receiver<FromUpstream>) {
        reading::relay_upstream(&mut rx, &*self).await;
    }

    /// Wait for the upstream to end the session or for the session to be ended; then end
    /// the upstream session (the link DELETEs it), answer every request still pending and
    /// close the streams.
    async fn supervise_upstream(
        self: Arc<Self>,
        mut link: tokio::task::JoinHandle<()>,
        mut reader: tokio::task::JoinHandle<()>,
    ) {
        let why = tokio::select! {
            _ = &mut reader => "the upstream ended the session",
            () = self.end.notified() => "the session was ended",
        };
        self.to_server.close();
        if tokio::time::timeout(SERVER_GRACE * 4, &mut link)
            .await
            .is_err()
        {
            link.abort();
        }
        if tokio::time::timeout(SERVER_GRACE, &mut reader)
            .await
            .is_err()
        {
            reader.abort();
        }
        self.ended.store(true, Ordering::Release);
        let out = self
            .with_session(|session, out| session.server_gone(why, out))
            .await;
        self.deliver(out).await;
        self.lock_routes().finish_all();
        self.handout.approvals.wake();
    }

    /// Wait for the server to exit or the session to be ended; then answer every request
    /// still pending and close the streams.
    async fn supervise(
        self: Arc<Self>,
        mut server: ServerProcess,
        reader: tokio::task::JoinHandle<()>,
    ) {
        let status = tokio::select! {
            status = server.wait() => status,
            () = self.end.notified() => {
                // Closing stdin is the stdio way to ask a server to exit.
                self.to_server.close();
                match tokio::time::timeout(SERVER_GRACE, server.wait()).await {
                    Ok(status) => status,
                    Err(_) => {
                        server.signal(crate::platform::SIGTERM);
                        match tokio::time::timeout(SERVER_GRACE, server.wait()).await {
                            Ok(status) => status,
                            Err(_) => {
                                server.signal(crate::platform::SIGKILL);
                                server.wait().await
                            }
                        }
                    }
                }
            }
        };
        // A final reply the server wrote before exiting is still delivered.
        let mut reader = reader;
        if tokio::time::timeout(SERVER_GRACE, &mut reader)
            .await
            .is_err()
        {
            reader.abort();
            server.end_leftovers(SERVER_GRACE).await;
        }
        self.ended.store(true, Ordering::Release);
        self.to_server.close();
        let why = match status {
            Ok(s) => crate::io::child::describe(s),
            Err(e) => format!("waiting for it failed: {e}"),
        };
        let out = self
            .with_session(|session, out| session.server_gone(&why, out))
            .await;
        self.deliver(out).await;
        self.lock_routes().finish_all();
        self.handout.approvals.wake();
    }

    /// Refuse calls held for approval (`action: ask`) when their time is up, and apply
    /// `mcpwall approve`'s decisions (`driver::approvals`).
    async fn expire_approvals(self: Arc<Self>) {
        self.handout.approvals.run(&*self).await;
    }

    /// Judge one line under the policy in force now (adopting a reloaded one first), and
    /// name its audit events.
    async fn judged(&self, from: Peer, line: Line<'_>) -> Outbox {
        self.adopt_current_policy().await;
        let judge = self.judge.read().await;
        let mut out = Outbox::with_routes();
        self.judging(&judge)
            .judge(from, line, &mut out, false)
            .await;
        self.stamp(&judge, &mut out);
        out
    }

    /// [`Self::judged`] for a large server line held in its own buffer.
    async fn judged_held(&self, held: Held) -> (Outbox, Held) {
        self.adopt_current_policy().await;
        let judge = self.judge.read().await;
        let mut out = Outbox::with_routes();
        let (_, held) = self.judging(&judge).judge_held(held, &mut out, false).await;
        self.stamp(&judge, &mut out);
        (out, held)
    }

    /// How this conversation's lines are judged: off the loop from [`OFF_LOOP_BYTES`],
    /// one large line at a time for its identity.
    fn judging<'a>(&'a self, judge: &'a Judge) -> Judging<'a> {
        Judging {
            session: &self.session,
            share: &judge.share,
            off_loop: OFF_LOOP_BYTES,
        }
    }

    /// Run `f` on the session (a timer, the server's exit), with its events named by the
    /// judge whose program wrote them.
    async fn with_session(&self, f: impl FnOnce(&mut Session, &mut Outbox)) -> Outbox {
        self.act(f).await.0
    }

    /// Give the session's audit events this conversation's facts and the listener's rule
    /// ids, and count their verdicts.
    fn stamp(&self, judge: &Judge, out: &mut Outbox) {
        if self.stateless && !out.events.is_empty() {
            let routes = self.lock_routes();
            for e in &mut out.events {
                let client = e.id.as_ref().and_then(|id| {
                    let key = crate::session::ids::route_key(id.as_bytes())?;
                    routes.client_ids.get(&key)
                });
                if let Some(client) = client {
                    e.id = Some(client.clone());
                }
            }
        }
        for e in &mut out.events {
            if !judge.verdicts.count(e) {
                self.metrics.count_builtin_verdict(e);
            }
            e.identity = self.identity.clone();
            e.session = Some(self.audit_session.clone());
            e.transport = Some(self.transport);
            e.server.clone_from(&self.server);
            judge.audit_event(e);
        }
    }

    /// If a reload swapped the server's judges since this session's judge was taken, take
    /// its identity's new one: the session judges its next message with it. Waits for the
    /// messages being judged to finish first (under the judge they started with).
    async fn adopt_current_policy(&self) {
        if self.generation.load(Ordering::Acquire) == self.live.generation() {
            return;
        }
        let mut judge = self.judge.write().await;
        let (generation, judges) = self.live.load();
        if self.generation.load(Ordering::Acquire) == generation {
            return;
        }
        let Some(new) = judges.get(self.identity.as_deref()) else {
            // The identity is gone from the token file: its sessions end (the token
            // watch ends them too; this is the same decision, reached first).
            self.generation.store(generation, Ordering::Release);
            drop(judge);
            self.end();
            return;
        };
        let mut out = Outbox::with_routes();
        self.session.lock().await.adopt(
            new.program.clone(),
            new.guard.clone(),
            new.rate.clone(),
            &mut out,
        );
        // What the swap did to calls held for approval, named by the old program.
        self.stamp(&judge, &mut out);
        *judge = new;
        self.generation.store(generation, Ordering::Release);
        drop(judge);
        if !out.events.is_empty() || !out.to_client.is_empty() {
            Box::pin(self.deliver(out)).await;
        }
    }

    fn lock_routes(&self) -> MutexGuard<'_, Routes> {
        self.routes.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Judged for Conversation {
    async fn judge(&self, from: Peer, line: Line<'_>) -> Outbox {
        self.judged(from, line).await
    }

    async fn judge_held(&self, held: Held) -> (Outbox, Held) {
        self.judged_held(held).await
    }
}

impl Driven for Conversation {
    /// Events named by the judge whose program wrote them.
    async fn act<R>(&self, f: impl FnOnce(&mut Session, &mut Outbox) -> R) -> (Outbox, R) {
        let judge = self.judge.read().await;
        let mut out = Outbox::with_routes();
        let r = f(&mut *self.session.lock().await, &mut out);
        self.stamp(&judge, &mut out);
        (out, r)
    }

    async fn deliver(&self, out: Outbox) {
        Conversation::deliver(self, out).await;
    }

    fn is_ended(&self) -> bool {
        Conversation::is_ended(self)
    }
}

impl Routes {
    fn new_stream(&mut self) -> u64 {
        self.next_stream += 1;
        let id = self.next_stream;
        self.streams
            .insert(id, Stream::new(id, self.replay.clone()));
        id
    }

    fn get_stream(&mut self) -> u64 {
        match self.get {
            Some(id) => id,
            None => {
                let id = self.new_stream();
                self.get = Some(id);
                id
            }
        }
    }

    /// Put one message the session let through on the one stream it belongs to, by
    /// what the session said it is (`route`).
    fn route(&mut self, line: &[u8], route: &Route) {
        let data = Bytes::copy_from_slice(line);
        if let Route::Answer(Some(key)) = route {
            // Every request the session forwards was registered by its POST; an answer
            // no POST waits for has nowhere to go (the GET stream must not carry
            // answers), so it is not sent.
            let Some(stream) = self.answers.remove(key) else {
                return;
            };
            self.asking.remove(key);
            self.client_ids.remove(key);
            self.sse_posts.retain(|s| *s != stream);
            self.progress.retain(|_, s| *s != stream);
            if let Some(s) = self.streams.get_mut(&stream) {
                s.push(data, true);
            }
            self.finished.push_back(stream);
            while self.finished.len() > KEEP_FINISHED {
                if let Some(old) = self.finished.pop_front() {
                    self.streams.remove(&old);
                }
            }
            return;
        }
        if self.stateless
            && let Route::Notification {
                method,
                progress,
                uri,
            } = route
        {
            if let Some(stream) = progress.as_ref().and_then(|t| self.progress.get(t)) {
                if let Some(s) = self.streams.get_mut(stream) {
                    s.push(data, false);
                }
                return;
            }
            if &**method == RESOURCE_UPDATED {
                // For the listen streams that asked for this resource; when none is left,
                // the gateway's subscription on the server is ended (`deliver_one`).
                let mut wanted = false;
                self.listeners.retain(|l| {
                    if !uri
                        .as_ref()
                        .is_some_and(|u| l.uris.iter().any(|w| **w == **u))
                    {
                        return true;
                    }
                    let frame = super::modern::tagged(method, uri.as_deref(), &l.id);
                    let kept = l.tx.try_send(frame).is_ok();
                    wanted |= kept;
                    kept
                });
                if let Some(uri) = uri.as_ref().filter(|_| !wanted) {
                    self.unwanted.push(uri.to_string());
                }
                return;
            }
            if super::modern::LISTENED
                .iter()
                .any(|(_, _, m)| *m == &**method)
            {
                // A listener that is not read (its queue full) or closed is dropped: its
                // client loses the stream rather than events in the middle of it.
                self.listeners.retain(|l| {
                    !l.methods.contains(&&**method)
                        || l.tx
                            .try_send(super::modern::tagged(method, None, &l.id))
                            .is_ok()
                });
                return;
            }
        }
        // A request or notification of the server's: the newest request stream a client
        // reads as SSE, else the GET stream, which keeps it until a GET comes (a
        // stateless client has none: the message is dropped).
        let target = self
            .sse_posts
            .iter()
            .rev()
            .copied()
            .find(|s| self.streams.get(s).is_some_and(Stream::is_live));
        let target = match target {
            Some(s) => s,
            None if self.stateless => return,
            None => self.get_stream(),
        };
        if let Some(s) = self.streams.get_mut(&target) {
            s.push(data, false);
        }
    }

    /// A server request (`sampling/createMessage`, `elicitation/create`, `roots/list`)
    /// made while exactly one stateless request that may take it is in flight: that
    /// request's client is answered `input_required` (the server's request as its one
    /// input request) and the call is parked until the client retries with the answer.
    /// `false`: not such a request, or not one request it can belong to.
    fn park(&mut self, line: &[u8], route: &Route) -> bool {
        let Route::Request { id, method, params } = route else {
            return false;
        };
        let Ok(server_id) = serde_json::from_slice::<serde_json::Value>(id) else {
            return false;
        };
        if self.parked.len() >= MAX_PARKED {
            return false;
        }
        let method = &**method;
        let mut candidates = self
            .asking
            .iter()
            .filter(|(key, ask)| ask.methods.contains(&method) && self.answers.contains_key(*key));
        let (Some((key, _)), None) = (candidates.next(), candidates.next()) else {
            return false;
        };
        let key = key.clone();
        let Ok(state) = super::tokens::new_session_id() else {
            return false;
        };
        let (Some(ask), Some(stream)) = (self.asking.remove(&key), self.answers.remove(&key))
        else {
            return false;
        };
        let mut input = serde_json::json!({"method": method});
        if let Some(params) = params
            .clone()
            .and_then(|r| serde_json::from_slice::<serde_json::Value>(line.get(r)?).ok())
        {
            input["params"] = params;
        }
        let answer = serde_json::json!({"jsonrpc": "2.0", "id": ask.gateway_id,
            "result": {"resultType": "input_required",
                       "inputRequests": {"input-1": input},
                       "requestState": state}});
        self.sse_posts.retain(|s| *s != stream);
        self.progress.retain(|_, s| *s != stream);
        if let Some(s) = self.streams.get_mut(&stream) {
            s.push(Bytes::from(answer.to_string()), true);
        }
        self.finished.push_back(stream);
        self.parked.insert(
            state,
            Parked {
                key,
                ask,
                inputs: vec![("input-1".to_string(), server_id)],
                since: std::time::Instant::now(),
            },
        );
        true
    }

    fn finish_all(&mut self) {
        for s in self.streams.values_mut() {
            s.finish();
        }
        // A subscription the server side ends is answered, then its stream closes.
        for l in self.listeners.drain(..) {
            let _ = l.tx.try_send(super::modern::listen_ended(&l.id));
        }
    }
}

/// The notification a subscribed resource's change arrives as.
const RESOURCE_UPDATED: &str = "notifications/resources/updated";

/// The lines of what the session wrote (each ends in `\n`), found with memchr: an answer
/// of many megabytes is split on the I/O thread.
fn lines(bytes: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut start = 0;
    memchr::memchr_iter(b'\n', bytes)
        .map(move |end| {
            let line = &bytes[start..end];
            start = end + 1;
            line
        })
        .filter(|line| !line.is_empty())
}

async fn write_to_server(mut stdin: tokio::process::ChildStdin, mut rx: mpsc::Receiver<Vec<u8>>) {
    while let Some(bytes) = rx.recv().await {
        if stdin.write_all(&bytes).await.is_err() || stdin.flush().await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ANSWER_TO_5: &[u8] = br#"{"jsonrpc":"2.0","id":5,"result":{}}"#;

    /// A line goes where the session said it belongs, whatever its text reads as: the
    /// gateway never reads a line again to route it.
    #[test]
    fn lines_are_routed_by_what_the_session_said_not_by_their_text() {
        let mut routes = Routes::default();
        let five = routes.new_stream();
        routes.answers.insert("5".into(), five);
        let seven = routes.new_stream();
        routes.answers.insert("7".into(), seven);

        routes.route(ANSWER_TO_5, &Route::Answer(Some("7".into())));
        assert!(
            routes.answers.contains_key("5"),
            "the text's id was not used"
        );
        assert!(!routes.answers.contains_key("7"));
        assert_eq!(routes.finished, [seven]);

        // Said to be a notification, the same text waits on the GET stream.
        let note = Route::Notification {
            method: "notifications/message".into(),
            progress: None,
            uri: None,
        };
        routes.route(ANSWER_TO_5, &note);
        assert!(routes.answers.contains_key("5"));
        let get = routes.get.expect("a GET stream");
        assert_eq!(routes.streams[&get].replay_after(0).len(), 1);
    }

    /// A stateless conversation's progress goes on the stream of the request whose token
    /// the session named, and a server request is parked by the session's facts.
    #[test]
    fn stateless_progress_and_parking_follow_the_routes() {
        let mut routes = Routes {
            stateless: true,
            ..Routes::default()
        };
        let call = routes.new_stream();
        routes.answers.insert(r#""mcpwall-1""#.into(), call);
        routes.progress.insert(r#""mcpwall-1""#.into(), call);
        let progress = Route::Notification {
            method: "notifications/progress".into(),
            progress: Some(r#""mcpwall-1""#.into()),
            uri: None,
        };
        // The text names no token at all.
        routes.route(
            br#"{"jsonrpc":"2.0","method":"notifications/message"}"#,
            &progress,
        );
        assert_eq!(routes.streams[&call].replay_after(0).len(), 1);

        routes.asking.insert(
            r#""mcpwall-1""#.into(),
            InputAsk {
                method: "tools/call".into(),
                name: Some("x".into()),
                methods: vec!["sampling/createMessage"],
                gateway_id: "mcpwall-1".into(),
            },
        );
        let line = br#"{"jsonrpc":"2.0","id":3,"method":"roots/list","params":{"a":1}}"#;
        let params = line.len() - 8..line.len() - 1;
        assert_eq!(&line[params.clone()], br#"{"a":1}"#);
        // The text says `roots/list`, which the call cannot take.
        let sampling = Route::Request {
            id: b"3"[..].into(),
            method: "sampling/createMessage".into(),
            params: Some(params),
        };
        assert!(routes.park(line, &sampling));
        let parked = routes.parked.values().next().expect("parked");
        assert_eq!(
            parked.inputs,
            [("input-1".to_string(), serde_json::json!(3))]
        );
    }
}
