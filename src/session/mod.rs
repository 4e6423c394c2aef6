//! The session: the one place where a message's verdict is put together.
//!
//! A transport (the stdio proxy, `mcpwall check`, the benches) reads a line from one
//! side and hands it to [`Session::from_client`] or [`Session::from_server`]; the
//! session judges it with the compiled [`Program`] and appends to an [`Outbox`] the
//! bytes to write to each side, the audit events, and the notices for stderr. It does
//! no I/O and needs no runtime, so every transport gives the same answer for the same
//! input (ARCHITECTURE decision 11).
//!
//! # The message contract
//!
//! Enforced here, and only here:
//! 1. Every message in either direction is parsed once and judged before a byte of it
//!    is written. Allowed messages go out as the bytes they came in as.
//! 2. A response is delivered only to the request it answers: the same id, compared
//!    as a JSON value (`"a\u0062"` is `"ab"`, `2` is not `"2"`). A response whose id
//!    matches a pending request only the way a lax SDK reads ids (`"2"` or `2.0` for
//!    `2`, see [`ids::numeric_value`]) is not forwarded, and that request gets an error;
//!    one that matches nothing is not forwarded either. Both are audited. No request
//!    ever gets two responses.
//! 3. Anything that can't be judged (not JSON-RPC, duplicate keys, over the size limit)
//!    is never forwarded, in either direction. A request that can then no longer be
//!    answered gets an error response at once, with its id recovered where it is
//!    readable (from the first bytes of an oversize line, and from each member of a
//!    refused batch).
//! 4. A client's response to a server request (`sampling/createMessage`,
//!    `elicitation/create`, `roots/list`) is judged by the inbound rules as a message of
//!    the method it answers, its `result` or `error` standing for the arguments; a
//!    refused one reaches the server as an error.
//! 5. Refusals and errors are written by [`synth`]; what goes back to the agent never
//!    holds a denied argument or a secret (STYLE rule 14).
//! 6. With the tool guard on, no call reaches the server while a tool or prompt list it
//!    asked for is unanswered: a client line with a `tools/call` or `prompts/get` is held
//!    (in order, with every line after it) until the list's answer has been checked, then
//!    judged, so a call pipelined behind the list cannot reach a tool the list would have
//!    withheld (a rug pull). The queue is bounded; past it, requests are refused.
//!
//! # Where a change goes
//! Policy about one message: [`Program`]. Which messages answer which: [`pending`].
//! What is refused and how it is answered, audited or told on stderr: here
//! (`inbound.rs` for what the client sends, `outbound.rs` for what the server sends).
//! How bytes move: the transport.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;
use std::ops::Range;
use std::sync::Arc;

pub mod approval;
pub mod canonical;
// Invariant oracle for the fuzz target and its replay: built only for tests.
#[cfg(any(test, feature = "test-support"))]
pub mod checks;
pub mod event;
mod guard;
pub mod ids;
mod inbound;
mod outbound;
pub mod pending;
pub mod preview;
mod ratelimit;
mod reload;
pub mod roots;
pub mod synth;
#[cfg(test)]
mod tests;

pub use approval::{ApprovalRequest, How};
pub use event::{AuditEvent, Direction, Names, RuleRef, Verdict};
pub use guard::{RULE_SUSPENDED, RULE_WITHHELD};
pub use ids::IdText;
pub use outbound::FrameScan;
pub use ratelimit::{Admission, RateLimiter, SharedCount};
/// A rate limiter several sessions count against together (the HTTP gateway: all the
/// sessions of one identity).
pub type SharedRateLimit = Arc<std::sync::Mutex<RateLimiter>>;

use crate::config::policy::{LogArgs, LogLevel, RedactMarker};
use crate::frame::{Limits, Parsed};
use crate::guard::Guard;
use crate::program::{Program, Scratch};
use crate::verdict::{Redaction, RuleId};
use pending::Pending;

/// Requests in flight, in each direction, before new ones are refused (fail closed).
pub const MAX_PENDING: usize = 4096;

/// Client lines held while a list is unanswered (contract point 6), by count and bytes,
/// before new ones are refused.
const MAX_HELD_LINES: usize = 256;
const MAX_HELD_BYTES: usize = 4 * 1024 * 1024;

/// The rule a request reusing the id of one still in flight is refused under.
pub const RULE_DUPLICATE_ID: &str = "mcpwall:duplicate_id";

/// The rule a call is refused under while the gateway's shared state (Redis) is lost.
pub const RULE_SHARED_STATE: &str = "mcpwall:shared_state";

/// The rule a batch is refused under where batches are not part of the protocol.
pub const RULE_BATCH: &str = "mcpwall:batch";

/// The first protocol revision without JSON-RPC batches.
const NO_BATCHES_SINCE: &str = "2025-06-18";

/// The redaction marker (`settings.redact_marker: plain`).
pub const REDACT_MARKER: &str = "[REDACTED BY MCPWALL]";

/// One line as a transport read it.
#[derive(Debug, PartialEq, Eq)]
pub enum Line<'a> {
    /// A complete line, without its `\n`.
    Frame(&'a [u8]),
    /// A line longer than the limit. Only its first bytes were kept (`head`): the
    /// session looks there for the message's id, so that the request it answers can be
    /// told. `len` excludes the `\n`.
    TooLarge { len: usize, head: &'a [u8] },
    /// Input ended in the middle of a line (no final `\n`): a frame cut short, e.g. by
    /// a peer that died mid-write. Its bytes are not handed out, so they can never be
    /// forwarded in part.
    Truncated { len: usize },
}

/// Who sent a line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Peer {
    /// The MCP client (the agent's side).
    Client,
    /// The MCP server.
    Server,
}

/// How a session is set up.
#[derive(Debug, Clone)]
pub struct Options {
    /// The server's name, for `server:` matchers.
    pub server_name: Arc<str>,
    /// The tool-definition guard (pins, poison, hiding, circuit breaker), if enabled.
    pub guard: Option<Arc<Guard>>,
    /// Build audit events ([`Outbox::events`]).
    pub audit: bool,
    /// Notices at this level and more severe go to [`Outbox::notices`].
    pub log_level: LogLevel,
}

impl Options {
    /// No guard, no audit events, errors only: what the benches and tests use.
    pub fn quiet(server_name: &str) -> Options {
        Options {
            server_name: server_name.into(),
            guard: None,
            audit: false,
            log_level: LogLevel::Error,
        }
    }
}

/// A line for stderr, for the human (never for the agent).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    pub level: LogLevel,
    pub text: String,
}

/// What the session says about one message, for a transport that shows verdicts
/// (`check`) or a test. The audit log holds the same, less the spans.
#[derive(Debug, Clone)]
pub struct Judgement {
    pub from: Peer,
    /// The message's audit event (built whether or not the audit log would hold it).
    pub event: AuditEvent,
    /// What was redacted, as raw byte ranges of the line judged.
    pub redactions: Vec<Redaction>,
    /// The `log_only` rules that matched.
    pub logged: Vec<RuleRef>,
}

/// Everything one call of the session produces. The buffers are appended to, so a
/// transport can collect a burst of lines before writing.
#[derive(Debug, Default)]
pub struct Outbox {
    /// Whole lines (each ending in `\n`) for the client.
    pub to_client: Vec<u8>,
    /// Whole lines for the server.
    pub to_server: Vec<u8>,
    pub events: Vec<AuditEvent>,
    pub notices: Vec<Notice>,
    /// `Some`: a [`Judgement`] is appended for every message judged.
    pub judgements: Option<Vec<Judgement>>,
    /// Calls just held for `mcpwall approve` (the client has no elicitation UI): the
    /// transport offers them to the approver (the proxy: `~/.mcpwall/pending/`).
    pub approvals: Vec<ApprovalRequest>,
    /// Codes of offered calls no longer waiting (decided, timed out, cancelled): the
    /// transport withdraws them.
    pub withdrawn: Vec<String>,
    /// A call was held for approval: its deadline needs a timer (the proxy's
    /// [`Session::next_deadline`] changed).
    pub asked: bool,
    /// `Some` (set by [`Outbox::with_routes`]): what each line of `to_client` is, in
    /// order, one [`Route`] per line, so a transport that routes lines (the gateway)
    /// never reads them again. `None` costs the stdio proxy nothing.
    pub routes: Option<Vec<Route>>,
}

/// What a line the session wrote for the client is: where a transport that serves
/// several streams sends it. Told by the session from what it judged, never read back
/// from the line's text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// The answer (result or error) to the client's request with this id, by its key
    /// ([`ids::route_key`]); `None` when it carries no id a request can have (a `null`
    /// id: the refusal of an unreadable or duplicate request).
    Answer(Option<String>),
    /// A request of the server's (or mcpwall's own, an approval's elicitation): its
    /// id's exact JSON text, its method, and where its `params` value lies in the line.
    Request {
        id: Box<[u8]>,
        method: Box<str>,
        params: Option<Range<usize>>,
    },
    /// A notification: its method; for `notifications/progress`, its `progressToken`'s
    /// key ([`ids::route_key`]); for `notifications/resources/updated`, its `uri`.
    Notification {
        method: Box<str>,
        progress: Option<String>,
        uri: Option<Box<str>>,
    },
    /// A batch: several messages in one line.
    Batch,
}

impl Outbox {
    /// An outbox that also collects a [`Judgement`] per message.
    pub fn recording() -> Outbox {
        Outbox {
            judgements: Some(Vec::new()),
            ..Outbox::default()
        }
    }

    /// An outbox that also says what each line for the client is ([`Outbox::routes`]).
    pub fn with_routes() -> Outbox {
        Outbox {
            routes: Some(Vec::new()),
            ..Outbox::default()
        }
    }

    /// Say what the line just ended in `to_client` is, when routes are kept (`route` is
    /// only called then).
    #[inline]
    pub(crate) fn routed(&mut self, route: impl FnOnce() -> Route) {
        if let Some(routes) = &mut self.routes {
            routes.push(route());
        }
    }

    /// Say that the line just ended in `to_client` answers the request with id `raw`.
    #[inline]
    pub(crate) fn routed_answer(&mut self, raw: Option<&[u8]>) {
        self.routed(|| Route::Answer(raw.and_then(ids::route_key)));
    }
}

/// How a server line the transport offered to keep in place ([`Session::from_server`]
/// with `in_place`) is to go to the client.
#[derive(Debug, PartialEq, Eq)]
pub enum Delivery {
    /// Whatever goes out was appended to the outbox.
    Written,
    /// The line goes to the client as read, with these byte ranges replaced, then `\n`.
    /// Nothing of it was appended to `to_client`.
    InPlace(Vec<(Range<usize>, Vec<u8>)>),
}

/// One conversation between a client and a server. See the module docs.
pub struct Session {
    program: Arc<Program>,
    server: Arc<str>,
    limits: Limits,
    guard: Option<Arc<Guard>>,
    audit: bool,
    log_level: LogLevel,
    /// `settings.rate_limit`: this session's own, or one shared ([`Self::share_rate_limit`]).
    rate: Option<SharedRateLimit>,
    /// The client's requests the server has yet to answer.
    calls: Pending,
    /// The server's requests the client has yet to answer.
    asks: Pending,
    client: ClientSide,
    server_side: ServerSide,
    /// Client lines waiting for a list's answer (contract point 6), oldest first.
    held: std::collections::VecDeque<Vec<u8>>,
    held_bytes: usize,
    /// Calls held for a human's approval (`action: ask`).
    approvals: approval::Approvals,
    /// Scratch for masking secrets in the names of audit events, made on first use.
    masking: Option<(crate::secrets::DetectorCache, Vec<crate::secrets::Finding>)>,
    /// The protocol revision: the one the client asked for in `initialize`, then the
    /// one the server answered with. Decides whether batches are refused.
    protocol: Option<Box<str>>,
    /// The transport carries one message per request (Streamable HTTP): every batch is
    /// refused.
    single_messages: bool,
    /// The client's roots, and the project they make (decision 16, `roots.rs`).
    project: roots::ClientProject,
}

/// The reusable state for judging what the client sends.
struct ClientSide {
    parsed: Parsed,
    scratch: Scratch,
    rulings: Vec<inbound::Ruling>,
    /// `Some` with `log_args: full`: scratch for redacting logged arguments.
    log_args: Option<(crate::secrets::DetectorCache, Vec<crate::secrets::Finding>)>,
}

/// The reusable state for judging what the server sends.
struct ServerSide {
    parsed: Parsed,
    scratch: Scratch,
    marker: RedactMarker,
    /// `[REDACTED BY MCPWALL: <label>]` per label, built once (typed markers).
    markers: HashMap<u32, String>,
}

impl Session {
    pub fn new(program: Arc<Program>, options: Options) -> Session {
        let settings = program.settings();
        let limits = Limits {
            max_frame_bytes: settings.max_frame_bytes,
            ..Limits::default()
        };
        let log_args = (settings.log_args == LogArgs::Full && options.audit)
            .then(|| (program.detector().cache(), Vec::new()));
        Session {
            rate: settings
                .rate_limit
                .map(|l| Arc::new(std::sync::Mutex::new(RateLimiter::new(l)))),
            limits,
            server: options.server_name,
            guard: options.guard,
            audit: options.audit,
            log_level: options.log_level,
            calls: Pending::new(MAX_PENDING),
            asks: Pending::new(MAX_PENDING),
            client: ClientSide {
                parsed: Parsed::new(),
                scratch: program.scratch(),
                rulings: Vec::new(),
                log_args,
            },
            server_side: ServerSide {
                parsed: Parsed::new(),
                scratch: program.scratch(),
                marker: settings.redact_marker,
                markers: HashMap::new(),
            },
            held: std::collections::VecDeque::new(),
            held_bytes: 0,
            approvals: approval::Approvals::default(),
            masking: None,
            protocol: None,
            single_messages: false,
            project: roots::ClientProject::default(),
            program,
        }
    }

    /// Count calls against `rate` instead of this session's own limiter: a transport whose
    /// clients open several sessions (the HTTP gateway) limits each identity, not each
    /// session. Without `settings.rate_limit` there is nothing to share and nothing changes.
    pub fn share_rate_limit(&mut self, rate: SharedRateLimit) {
        if self.rate.is_some() {
            self.rate = Some(rate);
        }
    }

    /// Judging a line may wait on the network: the rate limit or the circuit breaker
    /// counts in the replicas' shared state (`settings.shared_state`). The transport then
    /// judges off its I/O thread.
    pub fn consults_shared_state(&self) -> bool {
        self.rate
            .as_ref()
            .is_some_and(|r| r.lock().unwrap_or_else(|e| e.into_inner()).is_shared())
            || self
                .guard
                .as_ref()
                .is_some_and(|g| g.consults_shared_state())
    }

    /// The transport carries one message per request (Streamable HTTP's POST): batches
    /// are refused whatever the protocol revision, audited as any refusal.
    pub fn carry_single_messages(&mut self) {
        self.single_messages = true;
    }

    /// Why a batch is refused in this session, if it is: the transport, or a protocol
    /// revision that has no batches.
    fn batch_refusal(&self) -> Option<String> {
        if self.single_messages {
            return Some(
                "batches are not carried on this transport (one JSON-RPC message per \
                 request); send each message on its own"
                    .to_string(),
            );
        }
        let protocol = self.protocol.as_deref()?;
        (protocol >= NO_BATCHES_SINCE).then(|| {
            format!(
                "batches are not part of MCP protocol revision {protocol}; send each \
                 message on its own"
            )
        })
    }

    /// Note the protocol revision a message names (`initialize`'s
    /// `params.protocolVersion`, or its answer's `result.protocolVersion`).
    fn note_protocol(&mut self, message: &[u8], pointer: &str) {
        let Ok(value) = serde_json::from_slice::<serde_json::Value>(message) else {
            return;
        };
        if let Some(version) = value.pointer(pointer).and_then(|v| v.as_str()) {
            self.protocol = Some(version.into());
        }
    }

    pub fn program(&self) -> &Arc<Program> {
        &self.program
    }

    /// The frame limits lines are read with (`max_frame_bytes`).
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Client requests still waiting for the server's answer.
    pub fn calls_in_flight(&self) -> usize {
        self.calls.len()
    }

    /// Whether a response from the other side with this id would answer a request
    /// `answerer` has yet to answer (compared as JSON values).
    pub fn awaits_answer(&self, answerer: Peer, id: &[u8]) -> bool {
        self.table(answerer).contains(id)
    }

    /// Record that `answerer` owes an answer with this id to a `method` request of
    /// `tool`, as if the other side had sent that request: for transcripts that hold a
    /// response without its request (`mcpwall check`). Replaces what was pending.
    pub fn expect_answer(&mut self, answerer: Peer, id: &[u8], method: &str, tool: Option<&str>) {
        let table = match answerer {
            Peer::Server => &mut self.calls,
            Peer::Client => &mut self.asks,
        };
        table.remove(id);
        let _ = table.insert(id, method, tool, std::time::Instant::now(), true);
    }

    fn table(&self, answerer: Peer) -> &Pending {
        match answerer {
            Peer::Server => &self.calls,
            Peer::Client => &self.asks,
        }
    }

    /// The server is gone: every client request still pending gets an error saying so
    /// (`why`, e.g. "exit code 1"), oldest first.
    pub fn server_gone(&mut self, why: &str, out: &mut Outbox) {
        let message = format!("the MCP server exited ({why}) before answering this request");
        let unanswered = self.calls.drain();
        for entry in unanswered {
            self.answer_with_error(entry, &message, "mcpwall:server_exited", out);
        }
        // Calls held for approval never reached it either.
        self.drop_held(&message, out);
        // Held lines never reached the server: their requests are answered too.
        while let Some(raw) = self.held.pop_front() {
            let rule = "mcpwall:server_exited";
            self.refuse_requests_in(&raw, synth::SERVER_EXITED, rule, &message, out);
        }
        self.held_bytes = 0;
    }

    /// A line the session forwarded reached no server that will answer it (an HTTP
    /// upstream refused it, failed, or closed its stream first): each of its requests
    /// still pending gets an error saying `why`, and is audited. Requests already
    /// answered are left alone, so a transport may call this after the answers it read.
    pub fn unanswered(&mut self, sent: &[u8], why: &str, out: &mut Outbox) {
        let mut parsed = Parsed::new();
        let Ok(frame) = parsed.parse_frame(sent, &self.limits) else {
            return;
        };
        let message = format!("the MCP server did not answer this request: {why}");
        for msg in frame.messages() {
            if msg.kind != crate::frame::MessageKind::Request {
                continue;
            }
            let Some(entry) = frame.id_raw(msg).and_then(|id| self.calls.remove(id)) else {
                continue;
            };
            self.answer_with_error(entry, &message, "mcpwall:upstream_failed", out);
        }
    }

    /// A pending request that no server will answer: the client gets an error saying
    /// `message` under its own id, and the audit log records it under `rule`.
    fn answer_with_error(
        &mut self,
        entry: pending::Entry,
        message: &str,
        rule: &'static str,
        out: &mut Outbox,
    ) {
        synth::error_response(
            &mut out.to_client,
            Some(entry.id.as_bytes()),
            synth::SERVER_EXITED,
            message,
            None,
        );
        out.to_client.push(b'\n');
        out.routed_answer(Some(entry.id.as_bytes()));
        let mut e = AuditEvent::new(Direction::Outbound, Verdict::Error);
        e.duration = Some(entry.started.elapsed());
        e.id = Some(entry.id);
        e.method = Some(entry.method);
        e.tool = entry.tool;
        e.rule = Some(RuleRef::Builtin(rule));
        e.message = Some(message.into());
        self.emit(out, Peer::Server, true, e, &[], &[]);
    }

    /// Whether client lines are held until a list is answered (contract point 6): at
    /// the client's end of input the transport keeps the server's stdin open for them.
    pub fn holds_client_lines(&self) -> bool {
        !self.held.is_empty()
    }

    /// The allocation that holds the server side's decoded text, emptied, for other
    /// use (a transport that keeps large lines in place reads into it next).
    pub fn take_server_text_buffer(&mut self) -> Vec<u8> {
        self.server_side.parsed.take_text_buffer()
    }

    /// Decode server lines into `buf`'s allocation from now on, if it is the larger.
    pub fn give_server_text_buffer(&mut self, buf: Vec<u8>) {
        self.server_side.parsed.give_text_buffer(buf);
    }

    /// A line for stderr, formatted only when its level is shown.
    fn notice(&self, out: &mut Outbox, level: LogLevel, text: fmt::Arguments<'_>) {
        if level <= self.log_level {
            out.notices.push(Notice {
                level,
                text: text.to_string(),
            });
        }
    }

    /// Hand out one message's event: to the audit log when `audited` and the log is
    /// on, and as a [`Judgement`] when the outbox records them.
    fn emit(
        &mut self,
        out: &mut Outbox,
        from: Peer,
        audited: bool,
        mut event: AuditEvent,
        redactions: &[Redaction],
        logged: &[RuleRef],
    ) {
        self.mask_names(&mut event);
        if let Some(judgements) = &mut out.judgements {
            judgements.push(Judgement {
                from,
                event: event.clone(),
                redactions: redactions.to_vec(),
                logged: logged.to_vec(),
            });
        }
        if audited && self.audit {
            out.events.push(event);
        }
    }

    /// The audit log (and `check`'s report) never holds a value a detector flags: a
    /// secret in an event's id, method, tool or message is replaced by the marker, as in
    /// logged arguments.
    fn mask_names(&mut self, e: &mut AuditEvent) {
        if let Some(id) = &e.id
            && let Some(text) = crate::program::string_id(id.as_bytes())
            && let Cow::Owned(m) = self.masked(&text)
        {
            let json = serde_json::to_string(&m).unwrap_or_default();
            e.id = Some(ids::IdText::new(json.as_bytes()));
        }
        // A method the specification defines holds nothing to mask.
        if let Some(text) = e
            .method
            .as_deref()
            .filter(|m| !crate::mcp::is_spec_method(m))
            && let Cow::Owned(m) = self.masked(text)
        {
            e.method = Some(m.into());
        }
        if let Some(text) = e.tool.as_deref()
            && let Cow::Owned(m) = self.masked(text)
        {
            e.tool = Some(m.into());
        }
        if let Some(text) = e.message.as_deref()
            && let Cow::Owned(m) = self.masked(text)
        {
            e.message = Some(m.into());
        }
    }

    /// `text` with every secret a detector finds replaced by [`REDACT_MARKER`] (borrowed
    /// when there is none): for names that go to the audit log and to stderr.
    fn masked<'t>(&mut self, text: &'t str) -> Cow<'t, str> {
        let detector = self.program.detector();
        let (cache, findings) = self
            .masking
            .get_or_insert_with(|| (detector.cache(), Vec::new()));
        findings.clear();
        detector.find(text, cache, findings);
        if findings.is_empty() {
            Cow::Borrowed(text)
        } else {
            Cow::Owned(redacted(text, findings))
        }
    }

    /// Whether anything would be done with an event (so none is built for nothing).
    fn wants_events(&self, out: &Outbox) -> bool {
        self.audit || out.judgements.is_some()
    }

    /// The name of a rule (for `error.data.rule`).
    fn rule_name(&self, rule: RuleRef) -> &str {
        rule_name(&self.program, rule)
    }
}

/// `text` with every finding replaced by [`REDACT_MARKER`].
fn redacted(text: &str, findings: &[crate::secrets::Finding]) -> String {
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for f in findings {
        if f.range.start < at {
            continue;
        }
        out.push_str(&text[at..f.range.start]);
        out.push_str(REDACT_MARKER);
        at = f.range.end;
    }
    out.push_str(&text[at..]);
    out
}

/// The name of a rule (for `error.data.rule`).
fn rule_name(program: &Program, rule: RuleRef) -> &str {
    match rule {
        RuleRef::Inbound(r) => &program.rule(r).name,
        RuleRef::Outbound(r) => &program.outbound_rule(r).name,
        RuleRef::Builtin(name) => name,
    }
}

impl Names for Program {
    fn rule(&self, rule: RuleRef) -> (&str, Option<&str>) {
        match rule {
            RuleRef::Inbound(r) => {
                let info = Program::rule(self, r);
                (&info.name, info.message.as_deref())
            }
            RuleRef::Outbound(r) => {
                let info = self.outbound_rule(r);
                (&info.name, info.message.as_deref())
            }
            RuleRef::Builtin(name) => (name, None),
        }
    }

    fn label(&self, label: u32) -> &str {
        Program::label(self, label)
    }
}

/// The members of a batch the frame parser refused as not acceptable JSON-RPC (one bad
/// member is enough), as raw text, so that each member's id can still be read. `None`
/// when the line is not a JSON array.
fn batch_members(raw: &[u8]) -> Option<Vec<&[u8]>> {
    if raw.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'[') {
        return None;
    }
    let members: Vec<&serde_json::value::RawValue> = serde_json::from_slice(raw).ok()?;
    Some(members.into_iter().map(|m| m.get().as_bytes()).collect())
}

/// `(label, count)` pairs of a redaction list, first-seen order.
fn label_counts(redactions: &[Redaction]) -> Vec<(u32, u32)> {
    let mut counts: Vec<(u32, u32)> = Vec::new();
    for r in redactions {
        match counts.iter_mut().find(|(l, _)| *l == r.label) {
            Some((_, n)) => *n += 1,
            None => counts.push((r.label, 1)),
        }
    }
    counts
}

/// The `log_only` rules of the last outbound scan, as rule references.
fn logged_rules(logged: &[RuleId]) -> Vec<RuleRef> {
    logged.iter().map(|&r| RuleRef::Outbound(r)).collect()
}
