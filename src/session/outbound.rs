//! What the server sends: answers to the client's requests, its own requests and
//! notifications, judged by the outbound rules and the tool guard.

use std::borrow::Cow;
use std::ops::Range;
use std::sync::Arc;
use std::time::Instant;

use super::event::{AuditEvent, Direction, RuleRef, Verdict};
use super::ids::{IdText, route_key};
use super::pending::Entry;
use super::{
    Delivery, Line, Outbox, Peer, REDACT_MARKER, Route, Session, guard, label_counts, synth,
};
use crate::config::policy::{LogLevel, RedactMarker};
use crate::frame::{Frame, FrameError, Message, MessageKind, TokenKind};
use crate::frame::{Limits, Parsed};
use crate::program::{CallInfo, Program, Scratch};
use crate::verdict::{Outcome, RuleId};

/// Why a server line was not forwarded, for the audit log and the error the request it
/// meant to answer gets.
struct Undeliverable {
    rule: &'static str,
    message: String,
}

impl Session {
    /// Judge one line from the server. With `in_place`, a single message that goes to
    /// the client unchanged or redacted is not copied into the outbox: the result says
    /// how to write it from where the transport holds it (large frames).
    pub fn from_server(&mut self, line: Line<'_>, out: &mut Outbox, in_place: bool) -> Delivery {
        match line {
            Line::TooLarge { len, head } => {
                let why = Undeliverable {
                    rule: "mcpwall:too_large",
                    message: format!(
                        "server frame of {len} bytes exceeds max_frame_bytes ({}); dropped",
                        self.limits.max_frame_bytes
                    ),
                };
                self.undeliverable(head, why, out);
            }
            Line::Truncated { len } => {
                let why = Undeliverable {
                    rule: "mcpwall:truncated",
                    message: format!(
                        "server output ended inside a frame ({len} bytes, no newline); dropped"
                    ),
                };
                self.undeliverable(b"", why, out);
            }
            Line::Frame(raw) => {
                let parsed = std::mem::take(&mut self.server_side.parsed);
                return self.judge_server_line(raw, parsed, None, out, in_place, None);
            }
        }
        self.release_held(out);
        Delivery::Written
    }

    /// The content scan of a large server frame, to be run away from the session
    /// ([`FrameScan::run`], on another thread) while the session goes on with the
    /// client's lines; `None` when the frame is to be judged in line
    /// ([`Self::from_server`]): not one message whose request (if it answers one) its
    /// first bytes name. The session's server-side buffers go with the scan: until
    /// [`Self::from_server_scanned`] or [`Self::scan_lost`] it must be given no other
    /// server line.
    pub fn scan_off_loop(&mut self, raw: &[u8]) -> Option<FrameScan> {
        let head = crate::frame::read_head(&raw[..raw.len().min(HEAD_BYTES)]);
        let answers = match (head.method, head.id) {
            // A request or notification of the server's own: judged by its own names.
            (true, _) => None,
            (false, Some(id)) => {
                let entry = self.calls.get(&raw[id])?;
                Some((entry.method.clone(), entry.tool.clone()))
            }
            // A batch, or an id past the first bytes.
            (false, None) => return None,
        };
        Some(FrameScan {
            program: self.program.clone(),
            limits: self.limits,
            server: self.server.clone(),
            answers,
            parsed: std::mem::take(&mut self.server_side.parsed),
            scratch: std::mem::replace(&mut self.server_side.scratch, self.program.scratch()),
            parse: None,
            scanned: None,
        })
    }

    /// Judge the frame of a [`FrameScan`] that has run: the verdict is put together here,
    /// in the one session, as by [`Self::from_server`]; the scan's outcome stands if the
    /// frame still answers the request it was scanned for and the program it ran with is
    /// still the session's (else it is parsed and scanned again).
    pub fn from_server_scanned(
        &mut self,
        raw: &[u8],
        scan: FrameScan,
        out: &mut Outbox,
        in_place: bool,
    ) -> Delivery {
        if !Arc::ptr_eq(&scan.program, &self.program) {
            // A policy swapped in meanwhile (a reload, the client's roots) has made its
            // own scratch; the scan's verdict, rule ids and scratch are the old program's
            // and mean nothing to the new one.
            return self.judge_server_line(raw, scan.parsed, None, out, in_place, None);
        }
        self.server_side.scratch = scan.scratch;
        self.judge_server_line(raw, scan.parsed, scan.parse, out, in_place, scan.scanned)
    }

    /// A [`FrameScan`] that never came back (its thread panicked): the frame, of which
    /// only `head` is left, is not forwarded; the request it answers gets an error.
    pub fn scan_lost(&mut self, head: &[u8], out: &mut Outbox) -> Delivery {
        let why = Undeliverable {
            rule: "mcpwall:scan_failed",
            message: "scanning a server frame failed; dropped".to_string(),
        };
        self.undeliverable(head, why, out);
        self.release_held(out);
        Delivery::Written
    }

    /// Judge one server line: `parsed_ok` says whether `parsed` already holds its parse.
    fn judge_server_line(
        &mut self,
        raw: &[u8],
        mut parsed: Parsed,
        parsed_ok: Option<Result<(), FrameError>>,
        out: &mut Outbox,
        in_place: bool,
        scanned: Option<Scanned>,
    ) -> Delivery {
        let parse = match parsed_ok {
            Some(Ok(())) => Ok(Frame::new(raw, &parsed)),
            Some(Err(e)) => Err(e),
            None => parsed.parse_frame(raw, &self.limits),
        };
        let delivery = match parse {
            Ok(frame) => self.judge_server_frame(&frame, out, in_place, scanned),
            Err(e) => {
                let why = Undeliverable {
                    rule: "mcpwall:malformed",
                    message: format!("server line is not a valid JSON-RPC message ({e}); dropped"),
                };
                // A refused batch: each member's request is told, as for a line.
                let members = match e {
                    FrameError::Invalid { .. } => super::batch_members(raw),
                    _ => None,
                };
                match members {
                    Some(members) if !members.is_empty() => {
                        self.notice(out, LogLevel::Warn, format_args!("{}", why.message));
                        for m in members {
                            self.drop_message(m, &why, out);
                        }
                    }
                    _ => self.undeliverable(raw, why, out),
                }
                Delivery::Written
            }
        };
        parsed.shrink_past(SHRINK_PAST);
        self.server_side.parsed = parsed;
        self.release_held(out);
        delivery
    }

    /// A server line that can't be judged: dropped, audited, told on stderr; the
    /// request it meant to answer (its id read from `head`, its first bytes) gets an
    /// error, or, if it was a request of the server's own, the server does.
    fn undeliverable(&mut self, head: &[u8], why: Undeliverable, out: &mut Outbox) {
        self.notice(out, LogLevel::Warn, format_args!("{}", why.message));
        self.drop_message(head, &why, out);
    }

    /// The part of [`Self::undeliverable`] for one message (a line, or a member of a
    /// refused batch): the error for the request it meant to answer, and the audit event.
    fn drop_message(&mut self, head: &[u8], why: &Undeliverable, out: &mut Outbox) {
        let seen = crate::frame::read_head(head);
        let id = seen.id.map(|r| &head[r]);
        let mut e = AuditEvent::new(Direction::Outbound, Verdict::Drop);
        e.id = id.map(IdText::new);
        match id {
            Some(id) if seen.method => {
                // Under an id the client has yet to answer, the refusal would read as the
                // client's answer: it goes with a null id.
                let duplicate = self.asks.contains(id);
                synth::error_response(
                    &mut out.to_server,
                    Some(id).filter(|_| !duplicate),
                    synth::POLICY_DENIED,
                    &why.message,
                    Some(why.rule),
                );
                out.to_server.push(b'\n');
            }
            Some(id) => {
                let entry = self
                    .calls
                    .remove(id)
                    .or_else(|| self.calls.remove_by_number(id));
                if let Some(entry) = entry {
                    self.tell_client(&entry, why, out);
                    e.method = Some(entry.method);
                    e.tool = entry.tool;
                    e.duration = Some(entry.started.elapsed());
                }
            }
            None => {}
        }
        e.rule = Some(RuleRef::Builtin(why.rule));
        e.message = Some(why.message.as_str().into());
        self.emit(out, Peer::Server, true, e, &[], &[]);
    }

    /// The error a client request gets when its answer can't be delivered.
    fn tell_client(&self, entry: &Entry, why: &Undeliverable, out: &mut Outbox) {
        synth::error_response(
            &mut out.to_client,
            Some(entry.id.as_bytes()),
            synth::POLICY_DENIED,
            &why.message,
            Some(why.rule),
        );
        out.to_client.push(b'\n');
        out.routed_answer(Some(entry.id.as_bytes()));
    }

    fn judge_server_frame(
        &mut self,
        frame: &Frame<'_>,
        out: &mut Outbox,
        in_place: bool,
        scanned: Option<Scanned>,
    ) -> Delivery {
        let messages = frame.messages();
        if !frame.parsed.is_batch() {
            let Some(msg) = messages.first() else {
                return Delivery::Written;
            };
            // Errors written meanwhile go after this line, and so do their routes.
            let mark = out.routes.as_ref().map_or(0, Vec::len);
            let mut to_client = std::mem::take(&mut out.to_client);
            let mut delivery = Delivery::Written;
            let wrote = self.judge_server_message(
                frame,
                msg,
                0..frame.raw.len(),
                &mut to_client,
                out,
                in_place.then_some(&mut delivery),
                scanned,
            );
            if wrote && delivery == Delivery::Written {
                to_client.push(b'\n');
                if let Some(routes) = &mut out.routes {
                    let written = &to_client[..to_client.len() - 1];
                    routes.insert(mark, server_route(frame, msg, written));
                }
            }
            // Errors written meanwhile (to requests whose answers were undeliverable)
            // go after this line.
            to_client.append(&mut out.to_client);
            out.to_client = to_client;
            return delivery;
        }
        let mut answers = Vec::with_capacity(frame.raw.len() + 2);
        answers.push(b'[');
        let mut n = 0;
        for msg in messages {
            let mark = answers.len();
            if n > 0 {
                answers.push(b',');
            }
            if self.judge_server_message(
                frame,
                msg,
                msg.span.clone(),
                &mut answers,
                out,
                None,
                None,
            ) {
                n += 1;
            } else {
                answers.truncate(mark);
            }
        }
        answers.push(b']');
        if n == messages.len() && answers.len() == frame.raw.len() && answers == frame.raw {
            // Nothing changed: keep the original bytes (whitespace included).
            out.to_client.extend_from_slice(frame.raw);
            out.to_client.push(b'\n');
            out.routed(|| Route::Batch);
        } else if n > 0 {
            out.to_client.extend_from_slice(&answers);
            out.to_client.push(b'\n');
            out.routed(|| Route::Batch);
        }
        Delivery::Written
    }

    /// The client request a server response answers, taken from the table; `None`
    /// when it answers none exactly (dropped, audited; a request it matches only by
    /// number gets an error).
    fn answered_call(
        &mut self,
        frame: &Frame<'_>,
        msg: &Message,
        out: &mut Outbox,
    ) -> Option<Entry> {
        let id = frame.id_raw(msg).unwrap_or(b"null");
        if let Some(entry) = self.calls.remove(id) {
            return Some(entry);
        }
        let matched = self.calls.remove_by_number(id);
        let why = match &matched {
            Some(entry) => Undeliverable {
                rule: "mcpwall:mismatched_id",
                message: format!(
                    "the server answered request {} with id {}; not forwarded",
                    String::from_utf8_lossy(entry.id.as_bytes()),
                    String::from_utf8_lossy(id),
                ),
            },
            None => Undeliverable {
                rule: "mcpwall:unknown_id",
                message: format!(
                    "server response with id {} answers no pending request; dropped",
                    String::from_utf8_lossy(id)
                ),
            },
        };
        self.notice(out, LogLevel::Warn, format_args!("{}", why.message));
        let mut e = AuditEvent::new(Direction::Outbound, Verdict::Drop);
        e.id = Some(IdText::new(id));
        if let Some(entry) = matched {
            self.tell_client(&entry, &why, out);
            e.method = Some(entry.method);
            e.tool = entry.tool;
            e.duration = Some(entry.started.elapsed());
        }
        e.rule = Some(RuleRef::Builtin(why.rule));
        e.message = Some(why.message.into());
        self.emit(out, Peer::Server, true, e, &[], &[]);
        None
    }

    /// Judge one server message and write what goes to the client into `dest` (the
    /// bytes of `piece`, redacted, or a replacement). Returns whether anything was
    /// written. With `in_place` (`piece` is the whole line), a line that goes out as it
    /// is or redacted is not written: `in_place` gets its edits instead.
    #[allow(clippy::too_many_arguments)]
    fn judge_server_message(
        &mut self,
        frame: &Frame<'_>,
        msg: &Message,
        piece: Range<usize>,
        dest: &mut Vec<u8>,
        out: &mut Outbox,
        in_place: Option<&mut Delivery>,
        scanned: Option<Scanned>,
    ) -> bool {
        let id = frame.id_raw(msg);
        if msg.kind == MessageKind::Request
            && let Some(id) = id
            && super::roots::is_own_id(id)
        {
            // mcpwall's own questions to the client use these ids: the client's answer
            // must not be taken for the answer to the server's request, or the reverse.
            let message = "request id reserved by mcpwall; refused";
            synth::error_response(
                &mut out.to_server,
                Some(id),
                synth::POLICY_DENIED,
                message,
                Some("mcpwall:reserved_id"),
            );
            out.to_server.push(b'\n');
            let mut e = AuditEvent::new(Direction::Outbound, Verdict::Block);
            e.id = Some(IdText::new(id));
            e.method = frame.method(msg).map(|m| self.calls.intern(m));
            e.rule = Some(RuleRef::Builtin("mcpwall:reserved_id"));
            e.message = Some(message.into());
            self.emit(out, Peer::Server, true, e, &[], &[]);
            return false;
        }
        let entry = match msg.kind {
            MessageKind::Result | MessageKind::Error => match self.answered_call(frame, msg, out) {
                Some(entry) => Some(entry),
                None => return false,
            },
            _ => None,
        };
        let (method, tool): (Option<&str>, Option<&str>) = match &entry {
            Some(e) => (
                Some(&*e.method).filter(|m| !m.is_empty()),
                e.tool.as_deref(),
            ),
            None => (frame.method(msg), None),
        };
        let call = CallInfo {
            method,
            tool,
            server: &self.server,
        };
        let program = self.program.clone();
        let outcome = match scanned {
            Some(s) if s.method.as_deref() == method && s.tool.as_deref() == tool => {
                match s.decided {
                    Decided::Pass => Outcome::Pass,
                    Decided::Redact(rule) => Outcome::Redact {
                        rule,
                        redactions: self.server_side.scratch.redactions(),
                    },
                    Decided::Block(rule) => Outcome::Block { rule },
                }
            }
            _ => program.scan_response(frame, msg, &call, &mut self.server_side.scratch),
        };
        let mark = dest.len();
        // The guard edits list results in `dest`: those are copied.
        let mut in_place =
            in_place.filter(|_| self.guard.is_none() || !guard::inspects_answers_to(method));
        let marker = self.server_side.marker;
        let mut redactions = Vec::new();
        let mut spans: &[crate::verdict::Redaction] = &[];
        let (mut action, mut rule) = match outcome {
            Outcome::Pass => {
                match in_place.as_deref_mut() {
                    Some(delivery) => *delivery = Delivery::InPlace(Vec::new()),
                    None => dest.extend_from_slice(&frame.raw[piece]),
                }
                (Verdict::Pass, None)
            }
            Outcome::Redact {
                rule,
                redactions: found,
            } => {
                redactions = label_counts(found);
                spans = found;
                let markers = &mut self.server_side.markers;
                if marker == RedactMarker::Typed {
                    for r in found {
                        markers.entry(r.label).or_insert_with(|| {
                            format!("[REDACTED BY MCPWALL: {}]", program.label(r.label))
                        });
                    }
                }
                let mut edits: Vec<(Range<usize>, &str)> = found
                    .iter()
                    .filter(|r| r.raw.start >= piece.start && r.raw.end <= piece.end)
                    .map(|r| {
                        let text = match marker {
                            RedactMarker::Plain => REDACT_MARKER,
                            RedactMarker::Typed => markers
                                .get(&r.label)
                                .map(String::as_str)
                                .unwrap_or(REDACT_MARKER),
                        };
                        (r.raw.start - piece.start..r.raw.end - piece.start, text)
                    })
                    .collect();
                match in_place.as_deref_mut() {
                    Some(delivery) => {
                        *delivery =
                            Delivery::InPlace(crate::frame::redact::splice(piece.len(), &mut edits))
                    }
                    None => crate::frame::redact::apply(&frame.raw[piece], &mut edits, dest),
                }
                (Verdict::Redact, Some(RuleRef::Outbound(rule)))
            }
            Outcome::Block { rule } => {
                let info = program.outbound_rule(rule);
                let message: Cow<'_, str> = match &info.message {
                    Some(m) => Cow::Borrowed(m),
                    None => Cow::Owned(format!("response blocked by rule {:?}", info.name)),
                };
                match (msg.kind, id) {
                    // A tool's error result is what a client shows the model for a tool;
                    // any other result (a prompt, a resource, a completion) has a shape
                    // of its own, which an error result would break: a JSON-RPC error.
                    (MessageKind::Result, Some(id)) if method == Some("tools/call") => {
                        synth::block_result(dest, id, &message)
                    }
                    (MessageKind::Result, Some(id)) => {
                        synth::block_error(dest, id, &message, &info.name)
                    }
                    (MessageKind::Error, Some(id)) => {
                        synth::block_error(dest, id, &message, &info.name)
                    }
                    (MessageKind::Request, Some(id)) => {
                        // A blocked server request never reaches the client; the server
                        // gets the refusal so it does not wait forever.
                        synth::block_error(&mut out.to_server, id, &message, &info.name);
                        out.to_server.push(b'\n');
                    }
                    _ => {}
                }
                (Verdict::Block, Some(RuleRef::Outbound(rule)))
            }
        };
        let spans = spans.to_vec();
        let logged: Vec<RuleRef> = super::logged_rules(self.server_side.scratch.logged());
        let mut wrote = match action {
            Verdict::Block => matches!(msg.kind, MessageKind::Result | MessageKind::Error),
            _ => true,
        };
        if action != Verdict::Block
            && msg.kind == MessageKind::Result
            && entry.as_ref().is_some_and(|e| &*e.method == "initialize")
        {
            self.note_protocol(&frame.raw[msg.span.clone()], "/result/protocolVersion");
        }
        // A server request the client will answer is filed, so that the answer can be
        // matched to it and judged as one of its method.
        // One that reuses the id of one the client has yet to answer is refused, as the
        // client's own are (`inbound.rs`): the client's answer could not be told apart.
        if msg.kind == MessageKind::Request
            && action != Verdict::Block
            && let (Some(id), Some(m)) = (id, frame.method(msg))
        {
            let refusal = if self.asks.contains(id) {
                Some((
                    None,
                    "a request with this id is still in flight in this session; \
                     request ids must be unique"
                        .to_string(),
                    super::RULE_DUPLICATE_ID,
                ))
            } else {
                match self.asks.insert(id, m, None, Instant::now(), true) {
                    Ok(_) => None,
                    Err(full) => Some((Some(id), full.to_string(), "mcpwall:pending_full")),
                }
            };
            if let Some((error_id, message, refused_by)) = refusal {
                dest.truncate(mark);
                if let Some(delivery) = in_place {
                    *delivery = Delivery::Written;
                }
                synth::error_response(
                    &mut out.to_server,
                    error_id,
                    synth::POLICY_DENIED,
                    &message,
                    Some(refused_by),
                );
                out.to_server.push(b'\n');
                action = Verdict::Block;
                rule = Some(RuleRef::Builtin(refused_by));
                wrote = false;
            }
        }
        if let Some(guard) = self.guard.clone()
            && (action == Verdict::Block || guard::inspects_answers_to(method))
        {
            self.guard_response(&guard, method, id, action, rule, dest, mark, out);
        }
        let own_method = match &entry {
            Some(_) => None,
            None => frame.method(msg).map(|m| self.calls.intern(m)),
        };
        let (m, t) = match &entry {
            Some(e) => (Some(&e.method), e.tool.as_ref()),
            None => (own_method.as_ref(), None),
        };
        self.log_only_events(id, m, t, out);
        let audited = entry.as_ref().is_some_and(|e| e.audited) || action != Verdict::Pass;
        if self.wants_events(out) {
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
            self.emit(out, Peer::Server, audited, e, &spans, &logged);
        }
        wrote
    }

    /// Audit events for the `log_only` rules that matched in the last scan.
    fn log_only_events(
        &mut self,
        id: Option<&[u8]>,
        method: Option<&Arc<str>>,
        tool: Option<&Arc<str>>,
        out: &mut Outbox,
    ) {
        if self.server_side.scratch.logged().is_empty() || !self.audit {
            return;
        }
        for &rule in self.server_side.scratch.logged() {
            let mut e = AuditEvent::new(Direction::Outbound, Verdict::LogOnly);
            e.id = id.map(IdText::new);
            e.method = method.cloned();
            e.tool = tool.cloned();
            e.rule = Some(RuleRef::Outbound(rule));
            out.events.push(e);
        }
    }

    /// The guard's part of a server message: filter list results written at
    /// `dest[mark..]` (pinning, poison, hiding) and report blocks to the breaker.
    #[allow(clippy::too_many_arguments)]
    fn guard_response(
        &mut self,
        guard: &Arc<crate::guard::Guard>,
        method: Option<&str>,
        id: Option<&[u8]>,
        action: Verdict,
        rule: Option<RuleRef>,
        dest: &mut Vec<u8>,
        mark: usize,
        out: &mut Outbox,
    ) {
        if action == Verdict::Block {
            let what = || match rule {
                Some(r) => format!(
                    "{} response blocked by {}",
                    method.unwrap_or("server message"),
                    self.rule_name(r)
                ),
                None => "response blocked".to_string(),
            };
            if let Some((event, notice)) = guard::record_violation(guard, what) {
                self.notice(out, LogLevel::Warn, format_args!("{notice}"));
                self.emit(out, Peer::Server, true, event, &[], &[]);
            }
            return;
        }
        if !guard::inspects_answers_to(method) || dest.len() <= mark {
            return;
        }
        // A listed resource is hidden when the rules would refuse to read it.
        let (program, scratch) = (&self.program, &mut self.server_side.scratch);
        let inspection = guard.on_server_message_judged(method, &dest[mark..], &mut |uri| {
            program.denies_resource_read(uri, scratch)
        });
        if let Some(bytes) = inspection.replacement {
            dest.truncate(mark);
            dest.extend_from_slice(&bytes);
        }
        let method: Option<Arc<str>> = method.map(Arc::from);
        for event in &inspection.events {
            if event.withheld() {
                self.notice(out, LogLevel::Warn, format_args!("{}", event.summary()));
            }
            let e = guard::to_audit(event, id, method.as_ref());
            self.emit(out, Peer::Server, true, e, &[], &[]);
        }
    }
}

/// Decoded text buffers larger than this are given back after the frame (a 20 MiB
/// frame's decoded text is not kept for the next one).
const SHRINK_PAST: usize = 4 * 1024 * 1024;

/// The first bytes of a frame [`Session::scan_off_loop`] looks in for its id.
const HEAD_BYTES: usize = 4096;

/// The pure part of judging one large server frame: parsing it and scanning its content
/// with the (immutable, `Sync`) program, for the request it answers. Issue 22: while it
/// runs on another thread, the session goes on with the client's lines, so one large
/// frame stalls nothing but itself. Made by [`Session::scan_off_loop`], handed back to
/// [`Session::from_server_scanned`]; frames of one side are handed back in the order
/// they came.
pub struct FrameScan {
    program: Arc<Program>,
    limits: Limits,
    server: Arc<str>,
    /// The method and tool of the request the frame answers (`None`: a message of the
    /// server's own).
    answers: Option<(Arc<str>, Option<Arc<str>>)>,
    parsed: Parsed,
    scratch: Scratch,
    parse: Option<Result<(), FrameError>>,
    scanned: Option<Scanned>,
}

/// What a [`FrameScan`] decided, and for which request.
struct Scanned {
    method: Option<String>,
    tool: Option<String>,
    decided: Decided,
}

/// An [`Outcome`] whose spans stay in the scan's [`Scratch`].
enum Decided {
    Pass,
    Redact(RuleId),
    Block(RuleId),
}

impl FrameScan {
    /// Parse `raw` (the frame's bytes, without `\n`) and scan its message. Touches
    /// nothing shared but the program.
    pub fn run(&mut self, raw: &[u8]) {
        let frame = match self.parsed.parse_frame(raw, &self.limits) {
            Ok(frame) => frame,
            Err(e) => {
                self.parse = Some(Err(e));
                return;
            }
        };
        self.scanned = scan_single(
            &frame,
            &self.program,
            &self.answers,
            &self.server,
            &mut self.scratch,
        );
        self.parse = Some(Ok(()));
    }
}

/// The scan of a frame's one message, as [`Session::from_server`] would do it for the
/// request `answers` names; `None` for a batch, or when the message is not what the
/// first bytes said (it is judged in line then).
fn scan_single(
    frame: &Frame<'_>,
    program: &Program,
    answers: &Option<(Arc<str>, Option<Arc<str>>)>,
    server: &str,
    scratch: &mut Scratch,
) -> Option<Scanned> {
    if frame.parsed.is_batch() {
        return None;
    }
    let msg = frame.messages().first()?;
    let (method, tool) = match (msg.kind, answers) {
        (MessageKind::Result | MessageKind::Error, Some((m, t))) => {
            (Some(&**m).filter(|m| !m.is_empty()), t.as_deref())
        }
        (MessageKind::Request | MessageKind::Notification, None) => (frame.method(msg), None),
        _ => return None,
    };
    let call = CallInfo {
        method,
        tool,
        server,
    };
    let decided = match program.scan_response(frame, msg, &call, scratch) {
        Outcome::Pass => Decided::Pass,
        Outcome::Redact { rule, .. } => Decided::Redact(rule),
        Outcome::Block { rule } => Decided::Block(rule),
    };
    Some(Scanned {
        method: method.map(str::to_owned),
        tool: tool.map(str::to_owned),
        decided,
    })
}

/// What a server message forwarded on a line of its own (`written`, as it went out,
/// redactions included) is, from what the parser found in it (only when the transport
/// keeps routes).
fn server_route(frame: &Frame<'_>, msg: &Message, written: &[u8]) -> Route {
    let id = frame.id_raw(msg);
    let method: Box<str> = frame.method(msg).unwrap_or_default().into();
    match msg.kind {
        MessageKind::Result | MessageKind::Error => Route::Answer(id.and_then(route_key)),
        MessageKind::Request => Route::Request {
            id: id.unwrap_or(b"null").into(),
            params: params_range(written),
            method,
        },
        MessageKind::Notification => {
            // A `params` member's value (depth 2: the message object is depth 1).
            let param = |name: &str| {
                let tokens = &frame.tokens()[msg.args.clone()];
                let at = tokens.iter().position(|t| {
                    t.kind == TokenKind::Key && t.depth == 2 && frame.text(t.text) == name
                })?;
                tokens
                    .get(at + 1)
                    .filter(|v| v.depth == 2 && v.kind != TokenKind::Key)
            };
            let progress = (&*method == "notifications/progress")
                .then(|| param("progressToken"))
                .flatten()
                .and_then(|t| {
                    let (start, end) = (t.raw.0 as usize, t.raw.1 as usize);
                    // A string's raw text is between its quotes.
                    let quoted = usize::from(t.kind == TokenKind::String);
                    route_key(frame.raw.get(start - quoted..end + quoted)?)
                });
            let uri = (&*method == "notifications/resources/updated")
                .then(|| param("uri"))
                .flatten()
                .filter(|t| t.kind == TokenKind::String)
                .map(|t| frame.text(t.text).into());
            Route::Notification {
                method,
                progress,
                uri,
            }
        }
    }
}

/// Where the `params` value of one message lies in its text.
fn params_range(message: &[u8]) -> Option<std::ops::Range<usize>> {
    #[derive(serde::Deserialize)]
    struct Head<'a> {
        #[serde(borrow)]
        params: Option<&'a serde_json::value::RawValue>,
    }
    let head: Head<'_> = serde_json::from_slice(message).ok()?;
    let params = head.params?.get().as_bytes();
    let start = params.as_ptr() as usize - message.as_ptr() as usize;
    Some(start..start + params.len())
}
