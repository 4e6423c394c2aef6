//! The two pumps. Each reads lines from one side, judges every message with the
//! [`Program`] and appends what may pass to the output buffer of a [`Sink`]; a sink's
//! buffer is handed to that side's single writer task when no complete line is left in
//! the input buffer (so pipelined frames go out in one write, and a lone round trip is
//! never delayed) or when it grows large. The writer queues are bounded in batches and
//! bytes ([`super::queue`]), so a slow reader on either side slows the pump that feeds
//! it instead of growing memory.
//!
//! Allowed and passed frames are copied as their original bytes; nothing is
//! re-serialised on that path.

use std::borrow::Cow;
use std::collections::HashMap;
use std::ops::Range;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::io::AsyncRead;

use super::codec::{Line, LineReader};
use super::pending::{self, IdText, Pending};
use super::queue::{Batch, Queue, Splice, WeakQueue};
use super::ratelimit::RateLimiter;
use super::synth;
use super::{Chatter, LogLevel};
use crate::audit::{AuditAction, AuditEvent, AuditSender, Direction, RuleRef};
use crate::config::policy::{LogArgs, RedactMarker};
use crate::frame::{Frame, FrameError, Limits, Message, MessageKind, Parsed, TokenKind};
use crate::guard::{Guard, hook as guard_hook};
use crate::program::{CallInfo, Program, Scratch};
use crate::verdict::{Decision, Outcome};

/// Hand a sink's buffer to its writer once it holds this much, even mid-burst, so the
/// peer starts on the first frames of a pipelined burst while the rest are judged.
/// Holding a whole 32-call burst (about 7 KB) until it was judged left the server idle
/// meanwhile: with 2 KiB, pipelined calls ran about 1.3x as fast at the same CPU time.
/// 1 KiB ran about 1.1x as fast again (two same-run comparisons, of 5 and 7 rounds, with
/// a burst's refusals held to its end); 3 KiB and more, or no mid-burst flush of
/// answers, ran slower, 512 bytes or a flush per frame cost more CPU for less.
const FLUSH_BYTES: usize = 1024;
/// Initial capacity of a sink buffer.
const SINK_BUF: usize = 8 * 1024;

/// The redaction marker (`settings.redact_marker: plain`).
pub const REDACT_MARKER: &str = "[REDACTED BY MCPWALL]";

/// What both pumps share.
#[derive(Debug)]
pub(crate) struct Ctx {
    pub program: Arc<Program>,
    pub pending: Mutex<Pending>,
    pub audit: AuditSender,
    pub server: Arc<str>,
    pub strict: bool,
    pub limits: Limits,
    pub chatter: Chatter,
    /// The tool-definition guard (pins, poison, hiding, circuit breaker), if enabled.
    pub guard: Option<Arc<Guard>>,
}

/// The sending end of one writer task.
#[derive(Debug)]
enum SinkTx {
    Strong(Queue),
    /// The outbound pump only answers the server (blocked server requests) while the
    /// client side is still open; a weak sender lets the server's stdin close when the
    /// inbound pump finishes.
    Weak(WeakQueue),
}

/// Emptied batch buffers handed back by a writer task, so steady-state flushing does
/// not allocate; and the buffer of the last detached line written (see
/// `Outbound::take_detached`).
#[derive(Debug, Clone, Default)]
pub(crate) struct BufPool(Arc<Mutex<Pooled>>);

#[derive(Debug, Default)]
struct Pooled {
    bufs: Vec<Vec<u8>>,
    line: Option<Vec<u8>>,
}

/// Buffers kept per pool, and the largest kept (a 20 MiB frame's buffer is dropped).
const POOL_BUFS: usize = 8;
const POOL_BUF_MAX: usize = 1024 * 1024;
/// The largest detached line's buffer kept (and decoded text kept, see
/// `Parsed::shrink_past`).
const POOL_LINE_MAX: usize = 4 * 1024 * 1024;

impl BufPool {
    fn lock(&self) -> std::sync::MutexGuard<'_, Pooled> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn take(&self) -> Vec<u8> {
        self.lock()
            .bufs
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(SINK_BUF))
    }

    pub fn give(&self, mut buf: Vec<u8>) {
        if buf.capacity() > POOL_BUF_MAX {
            return;
        }
        buf.clear();
        let mut pool = self.lock();
        if pool.bufs.len() < POOL_BUFS {
            pool.bufs.push(buf);
        }
    }

    /// Keep the buffer a detached line was written from, if not too large.
    pub fn give_line(&self, buf: Vec<u8>) {
        if buf.capacity() <= POOL_LINE_MAX {
            self.lock().line = Some(buf);
        }
    }

    pub fn take_line(&self) -> Option<Vec<u8>> {
        self.lock().line.take()
    }
}

/// An output buffer in front of a writer task.
#[derive(Debug)]
pub(crate) struct Sink {
    tx: SinkTx,
    buf: Vec<u8>,
    broken: bool,
    pool: BufPool,
}

impl Sink {
    pub fn strong(tx: Queue, pool: BufPool) -> Sink {
        Sink {
            tx: SinkTx::Strong(tx),
            buf: pool.take(),
            broken: false,
            pool,
        }
    }

    pub fn weak(tx: WeakQueue, pool: BufPool) -> Sink {
        Sink {
            tx: SinkTx::Weak(tx),
            buf: pool.take(),
            broken: false,
            pool,
        }
    }

    /// Append one line (the frame plus `\n`).
    fn line(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
        self.buf.push(b'\n');
    }

    /// Hand the buffer to the writer, waiting for room in its queue; or, when nothing
    /// waits for it and the buffer is short, write it into the writer's pipe at once.
    pub async fn flush(&mut self) {
        if self.buf.is_empty() {
            return;
        }
        if self.broken {
            self.buf.clear();
            return;
        }
        let Some(tx) = self.tx.queue() else {
            self.buf.clear();
            self.broken = true;
            return;
        };
        let written = tx.write_now(&self.buf);
        if written == self.buf.len() {
            self.buf.clear();
            return;
        }
        self.buf.drain(..written);
        let batch = std::mem::replace(&mut self.buf, self.pool.take());
        let sent = tx.send(batch).await.is_ok();
        if !sent {
            // The writer is gone (that side closed); keep consuming input so the
            // other side is not blocked, but stop producing for this one.
            self.broken = true;
        }
    }

    /// Whether [`Self::flush`] would wait for room in the writer's queue (a peer that is
    /// not reading).
    fn would_wait(&self) -> bool {
        self.tx
            .queue()
            .is_some_and(|tx| tx.would_wait(self.buf.len()))
    }

    /// Wait until what was handed to the writer has been written. (Not this buffer.)
    async fn drained(&self) {
        if let Some(tx) = self.tx.queue() {
            tx.drained().await;
        }
    }

    /// Queue one line spliced from `bytes` (see [`Splice`]), after what this sink holds.
    async fn send_spliced(&mut self, bytes: Vec<u8>, splice: Splice) {
        self.flush().await;
        if self.broken {
            return;
        }
        let sent = match self.tx.queue() {
            Some(tx) => tx.send_spliced(bytes, splice).await.is_ok(),
            None => false,
        };
        if !sent {
            self.broken = true;
        }
    }
}

impl SinkTx {
    /// The writer's queue, while it has one (a weak sender's writer may be gone).
    fn queue(&self) -> Option<Cow<'_, Queue>> {
        match self {
            SinkTx::Strong(tx) => Some(Cow::Borrowed(tx)),
            SinkTx::Weak(tx) => tx.upgrade().map(Cow::Owned),
        }
    }
}

/// How a request was decided, before it is acted on.
#[derive(Debug, Clone)]
struct Decided {
    allow: bool,
    rule: Option<RuleRef>,
    /// mcpwall's own explanation, when the rule's message does not apply.
    message: Option<Cow<'static, str>>,
    /// Written to the audit log (everything but allowed protocol plumbing).
    audited: bool,
}

/// The name of a rule (for `error.data.rule`).
fn rule_name(program: &Program, rule: RuleRef) -> &str {
    match rule {
        RuleRef::Inbound(r) => &program.rule(r).name,
        RuleRef::Outbound(r) => &program.outbound_rule(r).name,
        RuleRef::Builtin(name) => name,
    }
}

/// The message a refusal carries: mcpwall's own, else the rule's, else a default.
fn refusal_message<'a>(program: &'a Program, d: &'a Decided) -> Cow<'a, str> {
    if let Some(m) = &d.message {
        return Cow::Borrowed(m);
    }
    match d.rule {
        Some(RuleRef::Inbound(r)) => {
            let info = program.rule(r);
            match &info.message {
                Some(m) => Cow::Borrowed(m),
                None => Cow::Owned(format!("denied by mcpwall rule {:?}", info.name)),
            }
        }
        Some(RuleRef::Outbound(r)) => {
            let info = program.outbound_rule(r);
            match &info.message {
                Some(m) => Cow::Borrowed(m),
                None => Cow::Owned(format!("blocked by mcpwall rule {:?}", info.name)),
            }
        }
        Some(RuleRef::Builtin(name)) => Cow::Owned(format!("denied by mcpwall ({name})")),
        None => Cow::Borrowed("denied by mcpwall"),
    }
}

/// The raw JSON text of `notifications/cancelled`'s `params.requestId`.
fn cancelled_request_id<'a>(frame: &Frame<'a>, msg: &Message) -> Option<&'a [u8]> {
    let tokens = frame.tokens();
    for k in msg.args.clone() {
        let t = &tokens[k];
        if t.kind != TokenKind::Key || t.arg != k as u32 || frame.text(t.text) != "requestId" {
            continue;
        }
        let v = tokens.get(k + 1)?;
        let (start, end) = (v.raw.0 as usize, v.raw.1 as usize);
        return match v.kind {
            // String tokens' raw range is the contents; the id text includes the quotes.
            TokenKind::String if start >= 1 && end < frame.raw.len() => {
                Some(&frame.raw[start - 1..end + 1])
            }
            TokenKind::Number => Some(&frame.raw[start..end]),
            _ => None,
        };
    }
    None
}

/// `(label, count)` pairs of a redaction list, first-seen order.
fn label_counts(redactions: &[crate::verdict::Redaction]) -> Vec<(u32, u32)> {
    let mut counts: Vec<(u32, u32)> = Vec::new();
    for r in redactions {
        match counts.iter_mut().find(|(l, _)| *l == r.label) {
            Some((_, n)) => *n += 1,
            None => counts.push((r.label, 1)),
        }
    }
    counts
}

/// The marker that replaces a secret with this label (typed markers built once).
fn marker_for<'m>(
    markers: &'m mut HashMap<u32, String>,
    kind: RedactMarker,
    program: &Program,
    label: u32,
) -> &'m str {
    match kind {
        RedactMarker::Plain => REDACT_MARKER,
        RedactMarker::Typed => markers
            .entry(label)
            .or_insert_with(|| format!("[REDACTED BY MCPWALL: {}]", program.label(label))),
    }
}

fn event(
    direction: Direction,
    action: AuditAction,
    id: Option<&[u8]>,
    pending: &mut Pending,
    method: Option<&str>,
    tool: Option<&str>,
) -> AuditEvent {
    let mut e = AuditEvent::new(direction, action);
    e.id = id.map(IdText::new);
    e.method = method.map(|m| pending.intern(m));
    e.tool = tool.map(|t| pending.intern(t));
    e
}

// ---------------------------------------------------------------------------------
// Inbound: client → server
// ---------------------------------------------------------------------------------

/// What the shared read loop needs from a pump: judge one line, and its sinks.
trait Pump {
    /// Who sends the lines, for the read-error message ("the client", "the server").
    const PEER: &'static str;
    fn ctx(&self) -> &Ctx;
    fn handle(&mut self, line: Line<'_>);
    fn sinks(&mut self) -> (&mut Sink, &mut Sink);
    fn events(&mut self) -> &mut Vec<AuditEvent>;
    /// Everything read so far has been judged and handed to the writers.
    fn caught_up(&mut self) {}
    /// After [`Self::handle`]: whether the line it judged is to be forwarded from the
    /// reader's buffer instead of having been copied.
    fn take_detached(&mut self) -> Option<Detached<'_>> {
        None
    }
    /// Before a line of at least `DETACH_BYTES` is judged.
    fn before_large_line(&mut self) -> impl std::future::Future<Output = ()> + Send {
        std::future::ready(())
    }
}

/// A line to forward from the reader's buffer.
struct Detached<'p> {
    sink: &'p mut Sink,
    /// Replacements, relative to the line (see [`Splice`]).
    edits: Vec<(Range<usize>, Vec<u8>)>,
    /// The buffer for the reader to go on in.
    fresh: Vec<u8>,
}

/// Frames at least this long that go out unchanged or redacted are written from the
/// buffer they were read into (`LineReader::detach_line`), not copied into a sink. A
/// 1 MiB result lived four times over (read, decoded, forwarded copy, and the one
/// before still being written); now twice (see `Outbound::before_large_line`).
const DETACH_BYTES: usize = 256 * 1024;

/// Judge one line; a detached one is queued from the reader's buffer at once, after
/// what its sink already holds. Returns whether there was a line.
async fn handle_line<P: Pump, R: AsyncRead + Unpin>(
    pump: &mut P,
    reader: &mut LineReader<R>,
) -> bool {
    let Some(line) = reader.next_buffered() else {
        return false;
    };
    if matches!(line, Line::Frame(raw) if raw.len() >= DETACH_BYTES) {
        pump.before_large_line().await;
    }
    pump.handle(line);
    if let Some(Detached { sink, edits, fresh }) = pump.take_detached() {
        let (bytes, line) = reader.detach_line(fresh);
        sink.send_spliced(bytes, Splice { line, edits }).await;
    }
    true
}

/// Read lines until EOF or a read error, judging each one. Writes are batched while more
/// complete lines are buffered (pipelining) and flushed as soon as the input runs dry, so a
/// lone round trip is never delayed.
async fn drive<P: Pump, R: AsyncRead + Unpin>(mut pump: P, mut reader: LineReader<R>) {
    loop {
        while handle_line(&mut pump, &mut reader).await {
            let (a, b) = pump.sinks();
            if a.buf.len() >= FLUSH_BYTES || b.buf.len() >= FLUSH_BYTES {
                flush_full(&mut pump).await;
            }
        }
        flush(&mut pump).await;
        pump.caught_up();
        match reader.fill().await {
            Ok(true) => {}
            Ok(false) => {
                while handle_line(&mut pump, &mut reader).await {}
                flush(&mut pump).await;
                return;
            }
            Err(e) => {
                pump.ctx().chatter.log(
                    LogLevel::Warn,
                    format_args!("reading from {}: {e}", P::PEER),
                );
                return;
            }
        }
    }
}

/// Audit events first, then both sinks.
async fn flush<P: Pump>(pump: &mut P) {
    send_events(pump);
    let (a, b) = pump.sinks();
    a.flush().await;
    b.flush().await;
}

/// Mid-burst: audit events first, then only the sinks holding at least `FLUSH_BYTES`.
/// The other side's few lines (the refusals of a burst the server is being fed) wait
/// for the end of the burst: flushed with the server's share, each took a write of its
/// own and woke the client for it, about 3 per 32-call burst with 10% refused. Unless
/// the full sink's peer is not reading: then both go, as at the end of a burst, so that
/// the refusals do not wait for a stalled server.
async fn flush_full<P: Pump>(pump: &mut P) {
    send_events(pump);
    let (a, b) = pump.sinks();
    let (a_full, b_full) = (a.buf.len() >= FLUSH_BYTES, b.buf.len() >= FLUSH_BYTES);
    let stalled = (a_full && a.would_wait()) || (b_full && b.would_wait());
    if a_full || stalled {
        a.flush().await;
    }
    if b_full || stalled {
        b.flush().await;
    }
}

fn send_events<P: Pump>(pump: &mut P) {
    let mut events = std::mem::take(pump.events());
    pump.ctx().audit.send(&mut events);
    *pump.events() = events;
}

impl Pump for Inbound {
    const PEER: &'static str = "the client";
    fn ctx(&self) -> &Ctx {
        &self.ctx
    }
    fn handle(&mut self, line: Line<'_>) {
        Inbound::handle(self, line);
    }
    fn sinks(&mut self) -> (&mut Sink, &mut Sink) {
        (&mut self.to_client, &mut self.to_server)
    }
    fn events(&mut self) -> &mut Vec<AuditEvent> {
        &mut self.events
    }
}

impl Pump for Outbound {
    const PEER: &'static str = "the server";
    fn ctx(&self) -> &Ctx {
        &self.ctx
    }
    fn handle(&mut self, line: Line<'_>) {
        Outbound::handle(self, line);
    }
    fn sinks(&mut self) -> (&mut Sink, &mut Sink) {
        (&mut self.to_client, &mut self.to_server)
    }
    fn events(&mut self) -> &mut Vec<AuditEvent> {
        &mut self.events
    }
    /// Two large buffers take turns, so that streaming large results holds each frame
    /// once and faults in no new memory: the reader's, and one that is in turn the
    /// decoded text of the frame being judged, the buffer the reader goes on in once
    /// that frame is detached, and (the detached frame's) the one being written. Before
    /// a large line is judged, the one before it must have been written: it was read
    /// while that one was being written, and judging it decodes its text.
    async fn before_large_line(&mut self) {
        self.to_client.drained().await;
        if let Some(buf) = self.to_client.pool.take_line() {
            self.parsed.give_text_buffer(buf);
        }
    }
    fn take_detached(&mut self) -> Option<Detached<'_>> {
        let edits = self.detached.take()?;
        Some(Detached {
            sink: &mut self.to_client,
            edits,
            // The text of the line just judged is no longer needed.
            fresh: self.parsed.take_text_buffer(),
        })
    }
    fn caught_up(&mut self) {
        if self.handled_any
            && let Some(f) = self.after_first_flush.take()
        {
            // Spawned, not called: the writer just woken goes first.
            tokio::spawn(async move { f() });
        }
    }
}

pub(crate) struct Inbound {
    ctx: Arc<Ctx>,
    parsed: Parsed,
    scratch: Scratch,
    rate: Option<RateLimiter>,
    to_server: Sink,
    to_client: Sink,
    events: Vec<AuditEvent>,
    batch: Vec<Decided>,
    /// `Some` with `log_args: full`: scratch for redacting logged arguments.
    log_args: Option<(crate::secrets::DetectorCache, Vec<crate::secrets::Finding>)>,
}

impl Inbound {
    pub fn new(ctx: Arc<Ctx>, to_server: Sink, to_client: Sink) -> Inbound {
        let scratch = ctx.program.scratch();
        let rate = ctx.program.settings().rate_limit.map(RateLimiter::new);
        let log_args = (ctx.program.settings().log_args == LogArgs::Full)
            .then(|| (ctx.program.detector().cache(), Vec::new()));
        Inbound {
            ctx,
            parsed: Parsed::new(),
            scratch,
            rate,
            to_server,
            to_client,
            events: Vec::new(),
            batch: Vec::new(),
            log_args,
        }
    }

    /// Run until the client closes its end (or reading fails).
    pub async fn run<R: AsyncRead + Unpin>(self, reader: LineReader<R>) {
        drive(self, reader).await;
    }

    fn handle(&mut self, line: Line<'_>) {
        match line {
            Line::TooLarge { len } => {
                let message = format!(
                    "frame of {len} bytes exceeds max_frame_bytes ({}); not forwarded",
                    self.ctx.limits.max_frame_bytes
                );
                self.refuse_malformed(None, -32600, message, "mcpwall:too_large");
            }
            Line::Truncated { len } => {
                let message = format!(
                    "incomplete frame of {len} bytes at end of input (no newline); not forwarded"
                );
                self.refuse_malformed(None, -32700, message, "mcpwall:truncated");
            }
            Line::Frame(raw) => {
                let mut parsed = std::mem::take(&mut self.parsed);
                match parsed.parse_frame(raw, &self.ctx.limits) {
                    Ok(frame) => self.judge(&frame),
                    Err(e) => {
                        let id = match &e {
                            FrameError::Invalid { id: Some(r), .. } => raw.get(r.clone()),
                            _ => None,
                        };
                        let rule = match e {
                            FrameError::TooLarge { .. } => "mcpwall:too_large",
                            _ => "mcpwall:malformed",
                        };
                        self.refuse_malformed(id, e.code(), e.to_string(), rule);
                    }
                }
                self.parsed = parsed;
            }
        }
    }

    /// A line that is not an acceptable message: never forwarded, answered with a
    /// JSON-RPC error (with the id when one could be read), audited.
    fn refuse_malformed(
        &mut self,
        id: Option<&[u8]>,
        code: i32,
        message: String,
        rule: &'static str,
    ) {
        self.ctx.chatter.log(
            LogLevel::Info,
            format_args!("refused a malformed client frame: {message}"),
        );
        let out = &mut self.to_client.buf;
        synth::error_response(out, id, code, &message, Some(rule));
        out.push(b'\n');
        let mut pending = self.ctx.pending.lock().unwrap_or_else(|e| e.into_inner());
        let mut e = event(
            Direction::Inbound,
            AuditAction::Deny,
            id,
            &mut pending,
            None,
            None,
        );
        e.rule = Some(RuleRef::Builtin(rule));
        e.message = Some(message.into());
        self.events.push(e);
    }

    /// The policy's verdict on one message, plus the rate limit.
    fn decide(&mut self, frame: &Frame<'_>, msg: &Message) -> Decided {
        let verdict = self
            .ctx
            .program
            .evaluate_request(frame, msg, &mut self.scratch);
        let mut d = match verdict.decision {
            Decision::AllowedBy(r) => Decided {
                allow: true,
                rule: Some(RuleRef::Inbound(r)),
                message: None,
                audited: true,
            },
            Decision::DeniedBy(r) => Decided {
                allow: false,
                rule: Some(RuleRef::Inbound(r)),
                message: None,
                audited: true,
            },
            Decision::Default { allow } => Decided {
                allow,
                rule: Some(RuleRef::Builtin("mcpwall:default_action")),
                message: (!allow).then_some(Cow::Borrowed(
                    "denied by default_action: no rule allows this call",
                )),
                audited: true,
            },
            Decision::Plumbing => Decided {
                allow: true,
                rule: None,
                message: None,
                audited: false,
            },
        };
        if d.allow
            && msg.kind == MessageKind::Request
            && frame.method(msg) == Some("tools/call")
            && let Some(rate) = &mut self.rate
        {
            let tool = frame.tool(msg).unwrap_or("");
            if !rate.admit(tool, Instant::now()) {
                d = Decided {
                    allow: false,
                    rule: Some(RuleRef::Builtin("mcpwall:rate_limit")),
                    message: Some(Cow::Owned(rate.message(tool))),
                    audited: true,
                };
            }
        }
        // Withheld tools and prompts, and a suspended session, are refused whatever
        // the policy said.
        if let Some(guard) = &self.ctx.guard
            && let Some((denial, rule)) = guard_hook::check_request(guard, frame, msg)
        {
            d = Decided {
                allow: false,
                rule: Some(RuleRef::Builtin(rule)),
                message: Some(Cow::Owned(denial.message)),
                audited: true,
            };
        }
        d
    }

    fn judge(&mut self, frame: &Frame<'_>) {
        let messages = frame.messages();
        if !frame.parsed.is_batch() {
            let Some(msg) = messages.first() else { return };
            let mut d = self.decide(frame, msg);
            let now = Instant::now();
            let mut names = None;
            if d.allow && msg.kind == MessageKind::Request {
                match self.register(frame, msg, now, d.audited) {
                    Ok(n) => names = n,
                    Err(full) => {
                        d = Decided {
                            allow: false,
                            rule: Some(RuleRef::Builtin("mcpwall:pending_full")),
                            message: Some(Cow::Owned(full.to_string())),
                            audited: true,
                        };
                    }
                }
            }
            if d.allow {
                self.note_cancel(frame, msg);
                self.to_server.line(frame.raw);
            } else {
                let client = &mut self.to_client.buf;
                let server = &mut self.to_server.buf;
                if Self::refusal(&self.ctx.program, frame, msg, &d, client, server) {
                    client.push(b'\n');
                }
            }
            self.audit(frame, msg, &d, names);
            return;
        }

        // A batch (decision 3): all allowed → forwarded unchanged; any denied → nothing
        // of it is forwarded and every request in it is answered with an error.
        let mut batch = std::mem::take(&mut self.batch);
        batch.clear();
        for msg in messages {
            let d = self.decide(frame, msg);
            batch.push(d);
        }
        let mut all_allowed = batch.iter().all(|d| d.allow);
        if all_allowed {
            let now = Instant::now();
            let mut registered = Vec::new();
            for (msg, d) in messages.iter().zip(&batch) {
                if msg.kind != MessageKind::Request {
                    continue;
                }
                match self.register(frame, msg, now, d.audited) {
                    Ok(_) => registered.push(msg),
                    Err(full) => {
                        let mut pending =
                            self.ctx.pending.lock().unwrap_or_else(|e| e.into_inner());
                        for m in &registered {
                            if let Some(id) = frame.id_raw(m) {
                                pending.remove(id);
                            }
                        }
                        drop(pending);
                        for (m, d) in messages.iter().zip(batch.iter_mut()) {
                            if m.kind == MessageKind::Request {
                                *d = Decided {
                                    allow: false,
                                    rule: Some(RuleRef::Builtin("mcpwall:pending_full")),
                                    message: Some(Cow::Owned(full.to_string())),
                                    audited: true,
                                };
                            }
                        }
                        all_allowed = false;
                        break;
                    }
                }
            }
        }
        if all_allowed {
            for msg in messages {
                self.note_cancel(frame, msg);
            }
            self.to_server.line(frame.raw);
        } else {
            // Allowed members of a refused batch are refused too, naming the reason.
            let culprit = batch
                .iter()
                .find(|d| !d.allow)
                .map(|d| (d.rule, refusal_message(&self.ctx.program, d).into_owned()));
            if let Some((rule, why)) = culprit {
                for d in batch.iter_mut().filter(|d| d.allow) {
                    *d = Decided {
                        allow: false,
                        rule,
                        message: Some(Cow::Owned(format!(
                            "batch refused because another message in it was denied: {why}"
                        ))),
                        audited: true,
                    };
                }
            }
            let mut answers = Vec::new();
            answers.push(b'[');
            let mut n = 0;
            for (msg, d) in messages.iter().zip(&batch) {
                let mark = answers.len();
                if n > 0 {
                    answers.push(b',');
                }
                if Self::refusal(
                    &self.ctx.program,
                    frame,
                    msg,
                    d,
                    &mut answers,
                    &mut self.to_server.buf,
                ) {
                    n += 1;
                } else {
                    answers.truncate(mark);
                }
            }
            if n > 0 {
                answers.push(b']');
                self.to_client.line(&answers);
            }
        }
        for (msg, d) in messages.iter().zip(&batch) {
            self.audit(frame, msg, d, None);
        }
        self.batch = batch;
    }

    /// Write what answers a refused message: an error object to `client` for a
    /// request (returns `true`), an error line to `server` for a client's response to
    /// a server request (so the server does not wait forever), nothing for a
    /// notification (dropped).
    fn refusal(
        program: &Program,
        frame: &Frame<'_>,
        msg: &Message,
        d: &Decided,
        client: &mut Vec<u8>,
        server: &mut Vec<u8>,
    ) -> bool {
        let message = refusal_message(program, d);
        let rule = d.rule.map(|r| rule_name(program, r));
        match msg.kind {
            MessageKind::Request => {
                synth::error_response(
                    client,
                    frame.id_raw(msg),
                    synth::POLICY_DENIED,
                    &message,
                    rule,
                );
                true
            }
            MessageKind::Result | MessageKind::Error => {
                if let Some(id) = frame.id_raw(msg) {
                    synth::error_response(server, Some(id), synth::POLICY_DENIED, &message, rule);
                    server.push(b'\n');
                }
                false
            }
            MessageKind::Notification => false,
        }
    }

    fn register(
        &mut self,
        frame: &Frame<'_>,
        msg: &Message,
        now: Instant,
        audited: bool,
    ) -> Result<Option<pending::Names>, pending::Full> {
        let Some(id) = frame.id_raw(msg) else {
            return Ok(None);
        };
        let method = frame.method(msg).unwrap_or("");
        self.ctx
            .pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, method, frame.tool(msg), now, audited)
            .map(Some)
    }

    /// A forwarded `notifications/cancelled` ends the correlation of its request.
    fn note_cancel(&mut self, frame: &Frame<'_>, msg: &Message) {
        if msg.kind == MessageKind::Notification
            && frame.method(msg) == Some("notifications/cancelled")
            && let Some(id) = cancelled_request_id(frame, msg)
        {
            self.ctx
                .pending
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(id);
        }
    }

    /// `names`: the request's names as [`Inbound::register`] interned them, if it did.
    fn audit(
        &mut self,
        frame: &Frame<'_>,
        msg: &Message,
        d: &Decided,
        names: Option<pending::Names>,
    ) {
        if !d.allow
            && let Some(guard) = &self.ctx.guard
            && let Some((event, notice)) = guard_hook::record_violation(guard, || {
                format!(
                    "{} {} denied: {}",
                    frame.method(msg).unwrap_or("(response)"),
                    frame.tool(msg).unwrap_or(""),
                    refusal_message(&self.ctx.program, d)
                )
            })
        {
            self.ctx
                .chatter
                .log(LogLevel::Warn, format_args!("{notice}"));
            self.events.push(event);
        }
        if !d.audited || !self.ctx.audit.enabled() {
            return;
        }
        if !d.allow {
            self.ctx.chatter.log(
                LogLevel::Info,
                format_args!(
                    "denied {} {}: {}",
                    frame.method(msg).unwrap_or("(response)"),
                    frame.tool(msg).unwrap_or(""),
                    refusal_message(&self.ctx.program, d)
                ),
            );
        }
        let action = if d.allow {
            AuditAction::Allow
        } else {
            AuditAction::Deny
        };
        let mut e = match names {
            Some(names) => {
                let mut e = AuditEvent::new(Direction::Inbound, action);
                e.id = frame.id_raw(msg).map(IdText::new);
                e.method = Some(names.method);
                e.tool = names.tool;
                e
            }
            None => {
                let mut pending = self.ctx.pending.lock().unwrap_or_else(|e| e.into_inner());
                event(
                    Direction::Inbound,
                    action,
                    frame.id_raw(msg),
                    &mut pending,
                    frame.method(msg),
                    frame.tool(msg),
                )
            }
        };
        e.rule = d.rule;
        e.message = d.message.as_ref().map(|m| m.as_ref().into());
        if d.allow
            && let Some((cache, findings)) = &mut self.log_args
        {
            e.args = logged_args(&self.ctx.program, frame, msg, cache, findings);
        }
        self.events.push(e);
    }
}

/// The arguments of an allowed request for `log_args: full`, as JSON text with every
/// secret the detectors find replaced. Denied requests never get here. Strings are
/// redacted one by one on the decoded value, so a secret can never straddle JSON syntax.
fn logged_args(
    program: &Program,
    frame: &Frame<'_>,
    msg: &Message,
    cache: &mut crate::secrets::DetectorCache,
    findings: &mut Vec<crate::secrets::Finding>,
) -> Option<Box<str>> {
    let value: serde_json::Value = serde_json::from_slice(&frame.raw[msg.span.clone()]).ok()?;
    let params = value.get("params")?;
    let mut args = if frame.method(msg) == Some("tools/call") {
        params.get("arguments")?.clone()
    } else {
        params.clone()
    };
    fn walk(
        v: &mut serde_json::Value,
        detector: &crate::secrets::Detector,
        cache: &mut crate::secrets::DetectorCache,
        findings: &mut Vec<crate::secrets::Finding>,
    ) {
        match v {
            serde_json::Value::String(s) => {
                findings.clear();
                detector.find(s, cache, findings);
                if !findings.is_empty() {
                    let mut out = String::with_capacity(s.len());
                    let mut at = 0;
                    for f in findings.iter() {
                        if f.range.start < at {
                            continue;
                        }
                        out.push_str(&s[at..f.range.start]);
                        out.push_str(REDACT_MARKER);
                        at = f.range.end;
                    }
                    out.push_str(&s[at..]);
                    *s = out;
                }
            }
            serde_json::Value::Array(items) => {
                for i in items {
                    walk(i, detector, cache, findings);
                }
            }
            serde_json::Value::Object(map) => {
                // Keys can carry secrets too (`_any_value` looks at them): rebuild.
                let old = std::mem::take(map);
                for (mut k, mut v) in old {
                    let mut key = serde_json::Value::String(std::mem::take(&mut k));
                    walk(&mut key, detector, cache, findings);
                    walk(&mut v, detector, cache, findings);
                    if let serde_json::Value::String(k) = key {
                        map.insert(k, v);
                    }
                }
            }
            _ => {}
        }
    }
    walk(&mut args, program.detector(), cache, findings);
    Some(args.to_string().into())
}

// ---------------------------------------------------------------------------------
// Outbound: server → client
// ---------------------------------------------------------------------------------

pub(crate) struct Outbound {
    ctx: Arc<Ctx>,
    parsed: Parsed,
    scratch: Scratch,
    to_client: Sink,
    to_server: Sink,
    events: Vec<AuditEvent>,
    /// `[REDACTED BY MCPWALL: <label>]` per label, built once (typed markers).
    markers: HashMap<u32, String>,
    marker: RedactMarker,
    /// Run once the first server output has been handed to the client's writer.
    after_first_flush: Option<Box<dyn FnOnce() + Send>>,
    /// A line has been read from the server.
    handled_any: bool,
    /// The line just judged goes to the client as read, with these edits (see
    /// `DETACH_BYTES`); nothing of it was written to `to_client`.
    detached: Option<Vec<(Range<usize>, Vec<u8>)>>,
}

impl Outbound {
    /// Run `f` on the runtime once the first server line (normally the answer to
    /// `initialize`) has been judged and handed on, after the client writer's turn. If
    /// the server never writes, `f` never runs.
    pub fn after_first_flush(&mut self, f: impl FnOnce() + Send + 'static) {
        self.after_first_flush = Some(Box::new(f));
    }

    pub fn new(ctx: Arc<Ctx>, to_client: Sink, to_server: Sink) -> Outbound {
        let scratch = ctx.program.scratch();
        let marker = ctx.program.settings().redact_marker;
        Outbound {
            ctx,
            parsed: Parsed::new(),
            scratch,
            to_client,
            to_server,
            events: Vec::new(),
            after_first_flush: None,
            handled_any: false,
            detached: None,
            markers: HashMap::new(),
            marker,
        }
    }

    /// Run until the server closes its stdout. Keeps reading even when the client is
    /// gone, so the server never blocks on a full pipe.
    pub async fn run<R: AsyncRead + Unpin>(self, reader: LineReader<R>) {
        drive(self, reader).await;
    }

    fn handle(&mut self, line: Line<'_>) {
        self.handled_any = true;
        match line {
            Line::TooLarge { len } => {
                let message = format!(
                    "server frame of {len} bytes exceeds max_frame_bytes ({}); dropped",
                    self.ctx.limits.max_frame_bytes
                );
                self.drop_line(None, message, "mcpwall:too_large");
            }
            Line::Truncated { len } => {
                let message = format!(
                    "server output ended inside a frame ({len} bytes, no newline); dropped"
                );
                self.drop_line(None, message, "mcpwall:truncated");
            }
            Line::Frame(raw) => {
                let mut parsed = std::mem::take(&mut self.parsed);
                match parsed.parse_frame(raw, &self.ctx.limits) {
                    Ok(frame) => self.scan(&frame),
                    Err(e) => self.not_a_message(raw, &e),
                }
                parsed.shrink_past(POOL_LINE_MAX);
                self.parsed = parsed;
            }
        }
    }

    /// A server line that is not a valid JSON-RPC message.
    fn not_a_message(&mut self, raw: &[u8], err: &FrameError) {
        let id = match err {
            FrameError::Invalid { id: Some(r), .. } => raw.get(r.clone()),
            _ => None,
        };
        if self.ctx.strict {
            self.drop_line(
                id,
                format!("server line is not a valid JSON-RPC message ({err}); dropped (--strict)"),
                "mcpwall:strict",
            );
            return;
        }
        // Text lines are forwarded only after scanning (decision 4).
        let call = CallInfo {
            method: None,
            tool: None,
            server: &self.ctx.server,
        };
        let program = &*self.ctx.program;
        let (action, rule, counts) = match program.scan_text(raw, &call, &mut self.scratch) {
            Outcome::Pass => {
                self.to_client.line(raw);
                (AuditAction::Pass, None, Vec::new())
            }
            Outcome::Redact { rule, redactions } => {
                let counts = label_counts(redactions);
                // Not JSON, so the marker is spliced in as is: no escaping context.
                let out = &mut self.to_client.buf;
                let mut at = 0;
                for r in redactions {
                    if r.raw.start < at || r.raw.end > raw.len() {
                        continue;
                    }
                    out.extend_from_slice(&raw[at..r.raw.start]);
                    out.extend_from_slice(
                        marker_for(&mut self.markers, self.marker, program, r.label).as_bytes(),
                    );
                    at = r.raw.end;
                }
                out.extend_from_slice(&raw[at..]);
                out.push(b'\n');
                (AuditAction::Redact, Some(RuleRef::Outbound(rule)), counts)
            }
            Outcome::Block { rule } => (
                AuditAction::Block,
                Some(RuleRef::Outbound(rule)),
                Vec::new(),
            ),
        };
        self.log_only_events(id, None, None);
        if action != AuditAction::Pass && self.ctx.audit.enabled() {
            let mut e = AuditEvent::new(Direction::Outbound, action);
            e.rule = rule;
            e.redactions = counts;
            e.message = Some("non-JSON line from the server".into());
            self.events.push(e);
        }
    }

    /// Audit events for the `log_only` rules that matched in the last scan.
    fn log_only_events(
        &mut self,
        id: Option<&[u8]>,
        method: Option<&Arc<str>>,
        tool: Option<&Arc<str>>,
    ) {
        if self.scratch.logged().is_empty() || !self.ctx.audit.enabled() {
            return;
        }
        for &rule in self.scratch.logged() {
            let mut e = AuditEvent::new(Direction::Outbound, AuditAction::LogOnly);
            e.id = id.map(IdText::new);
            e.method = method.cloned();
            e.tool = tool.cloned();
            e.rule = Some(RuleRef::Outbound(rule));
            self.events.push(e);
        }
    }

    /// Drop a server line, audit it, and answer the request it was meant to answer
    /// (when its id could be read and a request with that id is pending).
    fn drop_line(&mut self, id: Option<&[u8]>, message: String, rule: &'static str) {
        self.ctx
            .chatter
            .log(LogLevel::Warn, format_args!("{message}"));
        let mut pending = self.ctx.pending.lock().unwrap_or_else(|e| e.into_inner());
        let entry = id.and_then(|id| pending.remove(id));
        let mut e = event(
            Direction::Outbound,
            AuditAction::Drop,
            id,
            &mut pending,
            None,
            None,
        );
        drop(pending);
        if let (Some(id), Some(entry)) = (id, entry) {
            synth::error_response(
                &mut self.to_client.buf,
                Some(id),
                synth::POLICY_DENIED,
                &message,
                Some(rule),
            );
            self.to_client.buf.push(b'\n');
            e.method = Some(entry.method);
            e.tool = entry.tool;
            e.duration = Some(entry.started.elapsed());
        }
        e.rule = Some(RuleRef::Builtin(rule));
        e.message = Some(message.into());
        self.events.push(e);
    }

    fn scan(&mut self, frame: &Frame<'_>) {
        let messages = frame.messages();
        if !frame.parsed.is_batch() {
            let Some(msg) = messages.first() else { return };
            let mut out = std::mem::take(&mut self.to_client.buf);
            let mark = out.len();
            let detach = frame.raw.len() >= DETACH_BYTES;
            if self.scan_message(frame, msg, 0..frame.raw.len(), &mut out, detach)
                && self.detached.is_none()
            {
                out.push(b'\n');
            }
            debug_assert!(self.detached.is_none() || out.len() == mark);
            self.to_client.buf = out;
            return;
        }
        let mut answers = Vec::with_capacity(frame.raw.len() + 2);
        answers.push(b'[');
        let mut n = 0;
        for msg in messages {
            let mark = answers.len();
            if n > 0 {
                answers.push(b',');
            }
            if self.scan_message(frame, msg, msg.span.clone(), &mut answers, false) {
                n += 1;
            } else {
                answers.truncate(mark);
            }
        }
        answers.push(b']');
        if n == messages.len() && answers.len() == frame.raw.len() && answers == frame.raw {
            // Nothing changed: keep the original bytes (whitespace included).
            self.to_client.line(frame.raw);
        } else if n > 0 {
            self.to_client.line(&answers);
        }
    }

    /// Judge one server message and write what goes to the client into `out` (the
    /// bytes of `piece`, redacted, or a replacement). Returns whether anything was
    /// written. With `detach` (`piece` is the whole line), a line that goes out as it
    /// is or redacted is left where it was read: `self.detached` gets its edits instead.
    fn scan_message(
        &mut self,
        frame: &Frame<'_>,
        msg: &Message,
        piece: Range<usize>,
        out: &mut Vec<u8>,
        detach: bool,
    ) -> bool {
        let id = frame.id_raw(msg);
        let entry = match (msg.kind, id) {
            (MessageKind::Result | MessageKind::Error, Some(id)) => self
                .ctx
                .pending
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(id),
            _ => None,
        };
        let (method, tool): (Option<&str>, Option<&str>) = match &entry {
            Some(e) => (Some(&e.method), e.tool.as_deref()),
            None => (frame.method(msg), None),
        };
        let call = CallInfo {
            method,
            tool,
            server: &self.ctx.server,
        };
        let program = &*self.ctx.program;
        let outcome = program.scan_response(frame, msg, &call, &mut self.scratch);
        let mark = out.len();
        // The guard edits list results in `out`: those are copied.
        let detach =
            detach && (self.ctx.guard.is_none() || !guard_hook::inspects_answers_to(method));
        let (action, rule, redactions) = match outcome {
            Outcome::Pass if detach => {
                self.detached = Some(Vec::new());
                (AuditAction::Pass, None, Vec::new())
            }
            Outcome::Pass => {
                out.extend_from_slice(&frame.raw[piece]);
                (AuditAction::Pass, None, Vec::new())
            }
            Outcome::Redact { rule, redactions } => {
                let counts = label_counts(redactions);
                for r in redactions {
                    if self.marker == RedactMarker::Typed {
                        self.markers.entry(r.label).or_insert_with(|| {
                            format!("[REDACTED BY MCPWALL: {}]", program.label(r.label))
                        });
                    }
                }
                let mut edits: Vec<(Range<usize>, &str)> = redactions
                    .iter()
                    .filter(|r| r.raw.start >= piece.start && r.raw.end <= piece.end)
                    .map(|r| {
                        let marker = match self.marker {
                            RedactMarker::Plain => REDACT_MARKER,
                            RedactMarker::Typed => self
                                .markers
                                .get(&r.label)
                                .map(String::as_str)
                                .unwrap_or(REDACT_MARKER),
                        };
                        (r.raw.start - piece.start..r.raw.end - piece.start, marker)
                    })
                    .collect();
                if detach {
                    self.detached = Some(crate::frame::redact::splice(piece.len(), &mut edits));
                } else {
                    crate::frame::redact::apply(&frame.raw[piece], &mut edits, out);
                }
                (AuditAction::Redact, Some(RuleRef::Outbound(rule)), counts)
            }
            Outcome::Block { rule } => {
                let info = program.outbound_rule(rule);
                let message: Cow<'_, str> = match &info.message {
                    Some(m) => Cow::Borrowed(m),
                    None => Cow::Owned(format!("response blocked by rule {:?}", info.name)),
                };
                match (msg.kind, id) {
                    (MessageKind::Result, Some(id)) => synth::block_result(out, id, &message),
                    (MessageKind::Error, Some(id)) => {
                        synth::block_error(out, id, &message, &info.name)
                    }
                    (MessageKind::Request, Some(id)) => {
                        // A blocked server request never reaches the client; the server
                        // gets the refusal so it does not wait forever.
                        synth::block_error(&mut self.to_server.buf, id, &message, &info.name);
                        self.to_server.buf.push(b'\n');
                    }
                    _ => {}
                }
                (
                    AuditAction::Block,
                    Some(RuleRef::Outbound(rule)),
                    Vec::new(),
                )
            }
        };
        let wrote = match action {
            AuditAction::Block => matches!(msg.kind, MessageKind::Result | MessageKind::Error),
            _ => true,
        };
        if let Some(guard) = &self.ctx.guard
            && (action == AuditAction::Block || guard_hook::inspects_answers_to(method))
        {
            self.guard_response(guard.clone(), method, id, action, rule, out, mark);
        }
        let own_method = match &entry {
            Some(_) => None,
            None => frame.method(msg).map(|m| {
                self.ctx
                    .pending
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .intern(m)
            }),
        };
        let (m, t) = match &entry {
            Some(e) => (Some(&e.method), e.tool.as_ref()),
            None => (own_method.as_ref(), None),
        };
        self.log_only_events(id, m, t);
        let audited = entry.as_ref().is_some_and(|e| e.audited) || action != AuditAction::Pass;
        if audited && self.ctx.audit.enabled() {
            let mut e = AuditEvent::new(Direction::Outbound, action);
            e.id = id.map(IdText::new);
            match entry {
                Some(entry) => {
                    e.duration = Some(entry.started.elapsed());
                    e.method = Some(entry.method);
                    e.tool = entry.tool;
                }
                None => e.method = own_method,
            }
            e.rule = rule;
            e.redactions = redactions;
            self.events.push(e);
        }
        wrote
    }

    /// The guard's part of a server message: filter list results written at
    /// `out[mark..]` (pinning, poison, hiding) and report blocks to the breaker.
    #[allow(clippy::too_many_arguments)]
    fn guard_response(
        &mut self,
        guard: Arc<Guard>,
        method: Option<&str>,
        id: Option<&[u8]>,
        action: AuditAction,
        rule: Option<RuleRef>,
        out: &mut Vec<u8>,
        mark: usize,
    ) {
        if action == AuditAction::Block {
            let what = || match rule {
                Some(r) => format!(
                    "{} response blocked by {}",
                    method.unwrap_or("server message"),
                    rule_name(&self.ctx.program, r)
                ),
                None => "response blocked".to_string(),
            };
            if let Some((event, notice)) = guard_hook::record_violation(&guard, what) {
                self.ctx
                    .chatter
                    .log(LogLevel::Warn, format_args!("{notice}"));
                self.events.push(event);
            }
            return;
        }
        if !guard_hook::inspects_answers_to(method) || out.len() <= mark {
            return;
        }
        let inspection = guard.on_server_message(method, &out[mark..]);
        if let Some(bytes) = inspection.replacement {
            out.truncate(mark);
            out.extend_from_slice(&bytes);
        }
        let method: Option<Arc<str>> = method.map(Arc::from);
        for event in &inspection.events {
            if event.withheld() {
                self.ctx
                    .chatter
                    .log(LogLevel::Warn, format_args!("{}", event.summary()));
            }
            self.events
                .push(guard_hook::to_audit(event, id, method.as_ref()));
        }
    }
}

// ---------------------------------------------------------------------------------
// The frame path without I/O
// ---------------------------------------------------------------------------------

/// The synchronous per-line work of both pumps, with no I/O and no runtime: what the
/// in-tree benchmark measures and what the property tests compare with the engine.
/// Output accumulates in two buffers, as the pumps' sinks would send it.
pub struct FramePath {
    inbound: Inbound,
    outbound: Outbound,
    // Keep the queues open; nothing is ever sent on them.
    _to_server: tokio::sync::mpsc::Receiver<Batch>,
    _to_client: tokio::sync::mpsc::Receiver<Batch>,
}

impl Ctx {
    /// What the pumps share when nothing around them runs: no audit log, no guard, no
    /// stderr chatter below errors (the frame path and the pump tests).
    fn without_io(program: Arc<Program>, server: &str, strict: bool) -> Arc<Ctx> {
        let limits = Limits {
            max_frame_bytes: program.settings().max_frame_bytes,
            ..Limits::default()
        };
        Arc::new(Ctx {
            program,
            pending: Mutex::new(Pending::new(super::MAX_PENDING)),
            audit: crate::audit::Audit::disabled().sender(),
            server: server.into(),
            strict,
            limits,
            chatter: Chatter {
                level: LogLevel::Error,
            },
            // The frame path measures the policy alone; the guard acts on list frames.
            guard: None,
        })
    }
}

impl FramePath {
    pub fn new(program: Arc<Program>, server: &str, strict: bool) -> FramePath {
        let ctx = Ctx::without_io(program, server, strict);
        let (server_tx, to_server) = super::queue::queue(1, super::queue::QUEUE_BYTES);
        let (client_tx, to_client) = super::queue::queue(1, super::queue::QUEUE_BYTES);
        FramePath {
            outbound: Outbound::new(
                ctx.clone(),
                Sink::strong(client_tx.clone(), BufPool::default()),
                Sink::weak(server_tx.downgrade(), BufPool::default()),
            ),
            inbound: Inbound::new(
                ctx,
                Sink::strong(server_tx, BufPool::default()),
                Sink::strong(client_tx, BufPool::default()),
            ),
            _to_server: to_server,
            _to_client: to_client,
        }
    }

    /// Judge one client line (without its `\n`).
    pub fn client_line(&mut self, raw: &[u8]) {
        self.inbound.handle(Line::Frame(raw));
        self.inbound.events.clear();
    }

    /// Judge one server line (without its `\n`).
    pub fn server_line(&mut self, raw: &[u8]) {
        self.outbound.handle(Line::Frame(raw));
        self.outbound.events.clear();
        // What the writer would write from the reader's buffer, copied.
        if let Some(edits) = self.outbound.detached.take() {
            let splice = Splice {
                line: 0..raw.len(),
                edits,
            };
            for piece in splice.pieces(raw) {
                self.outbound.to_client.buf.extend_from_slice(piece);
            }
        }
    }

    /// Bytes bound for the server so far (frames plus `\n`); clears them.
    pub fn take_to_server(&mut self) -> Vec<u8> {
        let mut out = std::mem::take(&mut self.inbound.to_server.buf);
        out.append(&mut self.outbound.to_server.buf);
        out
    }

    /// Bytes bound for the client so far; clears them.
    pub fn take_to_client(&mut self) -> Vec<u8> {
        let mut out = std::mem::take(&mut self.inbound.to_client.buf);
        out.append(&mut self.outbound.to_client.buf);
        out
    }

    /// Discard buffered output without allocating (benchmarks).
    pub fn clear(&mut self) {
        self.inbound.to_server.buf.clear();
        self.inbound.to_client.buf.clear();
        self.outbound.to_server.buf.clear();
        self.outbound.to_client.buf.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{LoadOptions, load_str};
    use tokio::sync::mpsc::Receiver;

    fn ctx() -> Arc<Ctx> {
        let opts = LoadOptions {
            explicit: None,
            home: "/home/t".into(),
            project_dir: "/home/t/p".into(),
        };
        let text = "version: 1\nrules:\n  - name: no-keys\n    match:\n      arguments:\n        path:\n          regex: 'id_rsa'\n    action: deny\n";
        let policy = load_str("t.yml", text, &opts).unwrap();
        Ctx::without_io(Arc::new(Program::compile(&policy).unwrap()), "t", false)
    }

    fn call(id: usize, path: &str) -> String {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"read_file","arguments":{{"path":"{path}"}}}}}}"#
        ) + "\n"
    }

    /// Three refused calls, each followed by allowed ones longer than `FLUSH_BYTES`;
    /// and how many calls that is.
    fn burst() -> (String, usize) {
        let mut burst = String::new();
        let mut id = 0;
        for _ in 0..3 {
            id += 1;
            burst += &call(id, "/home/t/.ssh/id_rsa");
            let run_start = burst.len();
            while burst.len() - run_start <= FLUSH_BYTES {
                id += 1;
                burst += &call(id, "/home/t/p/src/main.rs");
            }
        }
        (burst, id)
    }

    /// The batches queued so far, as text.
    fn batches(rx: &mut Receiver<Batch>) -> Vec<String> {
        let mut out = Vec::new();
        while let Ok(b) = rx.try_recv() {
            out.push(String::from_utf8(b.into_bytes()).unwrap());
        }
        out
    }

    /// Run the inbound pump over `input`, read at once (one burst), with a server
    /// queue of `server_batches` batches and `server_bytes` bytes; give up after 200 ms.
    /// Returns whether it finished, and the batches for the server and the client.
    fn run_inbound(
        input: &str,
        server_batches: usize,
        server_bytes: usize,
    ) -> (bool, Vec<String>, Vec<String>) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        rt.block_on(async {
            let (server_tx, mut server_rx) =
                super::super::queue::queue(server_batches, server_bytes);
            let (client_tx, mut client_rx) = super::super::queue::queue(64, 1 << 20);
            let inbound = Inbound::new(
                ctx(),
                Sink::strong(server_tx, BufPool::default()),
                Sink::strong(client_tx, BufPool::default()),
            );
            let run = inbound.run(LineReader::new(input.as_bytes(), 1 << 20));
            let finished = tokio::time::timeout(std::time::Duration::from_millis(200), run)
                .await
                .is_ok();
            (finished, batches(&mut server_rx), batches(&mut client_rx))
        })
    }

    /// The server gets the allowed calls of a burst as they are judged, in several
    /// writes; the client gets the refusals together, once the burst is judged.
    #[test]
    fn refusals_of_a_burst_go_to_the_client_in_one_write() {
        let (burst, calls) = burst();
        let (finished, to_server, to_client) = run_inbound(&burst, 64, 1 << 20);
        assert!(finished);
        assert!(to_server.len() >= 3, "server batches: {}", to_server.len());
        assert_eq!(to_server.concat().lines().count(), calls - 3);
        assert_eq!(to_client.len(), 1, "client batches: {to_client:#?}");
        let refused: Vec<&str> = to_client[0].lines().collect();
        assert_eq!(refused.len(), 3, "{refused:#?}");
        assert!(
            refused.iter().all(|l| l.contains("no-keys")),
            "{refused:#?}"
        );
    }

    /// The server stops reading after the first mid-burst flush (its queue has room for
    /// one batch, which nobody takes): the refusals judged before the pump waits for
    /// the server reach the client.
    #[test]
    fn refusals_do_not_wait_for_a_stalled_server() {
        let (burst, _) = burst();
        let (finished, _, to_client) = run_inbound(&burst, 1, 1);
        assert!(!finished, "the pump should be waiting for the server");
        assert_eq!(to_client.concat().lines().count(), 2, "{to_client:#?}");
    }
}
