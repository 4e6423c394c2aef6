//! What the client sends: requests and notifications judged by the inbound rules, the
//! rate limit and the tool guard; responses to the server's requests judged the same
//! way, as messages of the method they answer.

use std::borrow::Cow;
use std::time::Instant;

use super::event::{AuditEvent, Direction, RuleRef, Verdict};
use super::ids::IdText;
use super::pending::{self, Entry};
use super::{Line, Outbox, Peer, RULE_BATCH, RULE_DUPLICATE_ID, Session, guard, synth};
use crate::config::policy::LogLevel;
use crate::frame::{Frame, FrameError, Message, MessageKind, Parsed, TokenKind};
use crate::program::Program;
use crate::verdict::Decision;

/// How one client message was decided, before it is acted on.
#[derive(Debug, Clone)]
pub(super) struct Ruling {
    allow: bool,
    /// An ask rule (or `default_action: ask`) matched: the call waits for a human.
    ask: bool,
    rule: Option<RuleRef>,
    /// mcpwall's own explanation, when the rule's message does not apply.
    message: Option<Cow<'static, str>>,
    /// Written to the audit log (everything but allowed protocol plumbing).
    audited: bool,
    /// For a response: the server request it answers.
    answers: Option<Entry>,
}

impl Ruling {
    fn refuse(rule: RuleRef, message: impl Into<Cow<'static, str>>) -> Ruling {
        Ruling {
            allow: false,
            ask: false,
            rule: Some(rule),
            message: Some(message.into()),
            audited: true,
            answers: None,
        }
    }
}

/// The refusal of a call that needs the replicas' shared state while it cannot answer
/// (fail closed): unreachable, or too full to track what the call needs. The agent and
/// the audit log get the same short message; the store's address and what failed are
/// told on stderr.
pub(super) fn shared_state_unavailable(why: &crate::shared_state::Unavailable) -> Ruling {
    Ruling::refuse(
        RuleRef::Builtin(shared_state_rule(why)),
        why.agent_message(),
    )
}

/// The rule a refusal for `why` is audited (and counted in `/metrics`) under.
pub(super) fn shared_state_rule(why: &crate::shared_state::Unavailable) -> &'static str {
    match why {
        crate::shared_state::Unavailable::Lost(_) => super::RULE_SHARED_STATE,
        crate::shared_state::Unavailable::Full(_) => crate::shared_state::RULE_FULL,
    }
}

/// The message a refusal carries: mcpwall's own, else the rule's, else a default.
fn refusal_message<'a>(program: &'a Program, d: &'a Ruling) -> Cow<'a, str> {
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

/// What the audit says of an allowed message that a pack rule would have decided but for
/// its exception: which rule, which exception, where it is written.
fn excepted_note(
    program: &Program,
    excepted: &[(crate::verdict::RuleId, crate::verdict::RuleId)],
) -> String {
    let parts: Vec<String> = excepted
        .iter()
        .map(|&(rule, exception)| {
            let e = program.exception(rule, exception);
            format!(
                "rule {:?} lifted by exception {:?} at {}",
                program.rule(rule).name,
                e.name,
                e.location
            )
        })
        .collect();
    parts.join("; ")
}

/// The ids that could be read of a refused line's messages (each from its first bytes).
#[derive(Debug, Default)]
struct Readable<'a> {
    /// Of the messages with a method.
    requests: Vec<&'a [u8]>,
    /// Of the messages without: answers to server requests.
    answers: Vec<&'a [u8]>,
    /// The line is a batch: the requests' errors go back as one array.
    batch: bool,
}

impl<'a> Readable<'a> {
    fn of(messages: &[&'a [u8]]) -> Readable<'a> {
        let mut ids = Readable::default();
        for m in messages {
            let seen = crate::frame::read_head(m);
            match seen.id {
                Some(r) if seen.method => ids.requests.push(&m[r]),
                Some(r) => ids.answers.push(&m[r]),
                None => {}
            }
        }
        ids
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

impl Session {
    /// Judge one line from the client. See the module docs of [`super`].
    pub fn from_client(&mut self, line: Line<'_>, out: &mut Outbox) {
        match line {
            Line::TooLarge { len, head } => {
                let message = format!(
                    "frame of {len} bytes exceeds max_frame_bytes ({}); not forwarded",
                    self.limits.max_frame_bytes
                );
                let ids = Readable::of(&[head]);
                self.refuse_malformed(ids, -32600, message, "mcpwall:too_large", out);
            }
            Line::Truncated { len } => {
                let message = format!(
                    "incomplete frame of {len} bytes at end of input (no newline); not forwarded"
                );
                let ids = Readable::default();
                self.refuse_malformed(ids, -32700, message, "mcpwall:truncated", out);
            }
            Line::Frame(raw) => {
                let mut parsed = std::mem::take(&mut self.client.parsed);
                match parsed.parse_frame(raw, &self.limits) {
                    Ok(frame) if self.must_hold(&frame) => self.hold(&frame, out),
                    Ok(frame) => self.judge_client_frame(&frame, out),
                    Err(e) => {
                        // A refused batch: every member's id is read, as for a line.
                        let members = match e {
                            FrameError::Invalid { .. } => super::batch_members(raw),
                            _ => None,
                        };
                        let ids = match members {
                            Some(members) => Readable {
                                batch: true,
                                ..Readable::of(&members)
                            },
                            None => {
                                let ids = Readable::of(&[raw]);
                                let parsed_id = match &e {
                                    FrameError::Invalid { id: Some(r), .. } => raw.get(r.clone()),
                                    _ => None,
                                };
                                if ids.answers.is_empty() {
                                    // A request's id is the one the parser read, else the
                                    // one its head shows (broken JSON after a whole `id`):
                                    // a readable id always gets its error, so a transport
                                    // waiting for that id's answer is not left waiting.
                                    // Not under the id of a request in flight, though: there
                                    // it would read as that request's answer.
                                    let id =
                                        parsed_id.or_else(|| ids.requests.first().copied()).filter(
                                            |id| !self.calls.contains(id) && !self.holds_call(id),
                                        );
                                    Readable {
                                        requests: id.into_iter().collect(),
                                        ..Readable::default()
                                    }
                                } else {
                                    ids
                                }
                            }
                        };
                        let rule = match e {
                            FrameError::TooLarge { .. } => "mcpwall:too_large",
                            _ => "mcpwall:malformed",
                        };
                        self.refuse_malformed(ids, e.code(), e.to_string(), rule, out);
                    }
                }
                self.client.parsed = parsed;
            }
        }
        // A cancelled list no longer holds anything up.
        self.release_held(out);
    }

    /// Whether this frame waits for a list's answer (contract point 6): with the guard
    /// on, a call while a list is unanswered, and anything behind a held line.
    fn must_hold(&self, frame: &Frame<'_>) -> bool {
        if self.guard.is_none() {
            return false;
        }
        if !self.held.is_empty() {
            return true;
        }
        self.calls.lists() > 0
            && frame.messages().iter().any(|m| {
                m.kind == MessageKind::Request
                    && matches!(frame.method(m), Some("tools/call" | "prompts/get"))
            })
    }

    /// Keep a line until the lists are answered; refuse its requests when the queue is
    /// full.
    fn hold(&mut self, frame: &Frame<'_>, out: &mut Outbox) {
        if self.held.len() >= super::MAX_HELD_LINES
            || self.held_bytes + frame.raw.len() > super::MAX_HELD_BYTES
        {
            let message = "too many calls waiting for the server's tool list to be checked; \
                           refused";
            let rule = "mcpwall:held_full";
            self.refuse_requests_in(frame.raw, synth::POLICY_DENIED, rule, message, out);
            return;
        }
        self.notice(
            out,
            LogLevel::Debug,
            format_args!("holding a client line until the tool list is checked"),
        );
        self.held_bytes += frame.raw.len();
        self.held.push_back(frame.raw.to_vec());
    }

    /// Judge the held lines, oldest first, once no list is unanswered; a released line
    /// that asks for a list holds the ones behind it again.
    pub(super) fn release_held(&mut self, out: &mut Outbox) {
        while self.calls.lists() == 0
            && let Some(raw) = self.held.pop_front()
        {
            self.held_bytes -= raw.len();
            let mut parsed = std::mem::take(&mut self.client.parsed);
            // It parsed when it was held.
            if let Ok(frame) = parsed.parse_frame(&raw, &self.limits) {
                self.judge_client_frame(&frame, out);
            }
            self.client.parsed = parsed;
        }
    }

    /// Answer every request in a line that will never be judged (held when the server
    /// exited, or past the hold queue) with an error, and audit it.
    pub(super) fn refuse_requests_in(
        &mut self,
        raw: &[u8],
        code: i32,
        rule: &'static str,
        message: &str,
        out: &mut Outbox,
    ) {
        let mut parsed = Parsed::new();
        let Ok(frame) = parsed.parse_frame(raw, &self.limits) else {
            return;
        };
        for msg in frame.messages() {
            let id = frame.id_raw(msg);
            if msg.kind == MessageKind::Request {
                synth::error_response(&mut out.to_client, id, code, message, Some(rule));
                out.to_client.push(b'\n');
                out.routed_answer(id);
            }
            let mut e = AuditEvent::new(Direction::Inbound, Verdict::Deny);
            e.id = id.map(IdText::new);
            e.method = frame.method(msg).map(|m| self.calls.intern(m));
            e.tool = frame.tool(msg).map(|t| self.calls.intern(t));
            e.rule = Some(RuleRef::Builtin(rule));
            e.message = Some(message.into());
            e.request = super::preview::denied_summary(&frame, msg).map(Into::into);
            self.emit(out, Peer::Client, true, e, &[], &[]);
        }
    }

    /// A line that is not an acceptable message: never forwarded, answered with a
    /// JSON-RPC error (with the id when one could be read), audited.
    ///
    /// The ids in `ids.answers` are those of responses (an id and no method): they
    /// answer server requests, not the client's. The client's error does not carry them
    /// (it would read as the answer to a request of the client's own with the same id,
    /// or, to a lax reader, `2` for `2.0`); the server request each matches, exactly or
    /// by number, gets the error instead, so that the server does not wait forever.
    fn refuse_malformed(
        &mut self,
        ids: Readable<'_>,
        code: i32,
        message: String,
        rule: &'static str,
        out: &mut Outbox,
    ) {
        self.notice(
            out,
            LogLevel::Info,
            format_args!("refused a malformed client frame: {message}"),
        );
        let mut asked = None;
        for id in &ids.answers {
            let Some(entry) = self
                .asks
                .remove(id)
                .or_else(|| self.asks.remove_by_number(id))
            else {
                continue;
            };
            synth::error_response(
                &mut out.to_server,
                Some(entry.id.as_bytes()),
                synth::POLICY_DENIED,
                &message,
                Some(rule),
            );
            out.to_server.push(b'\n');
            asked.get_or_insert(entry);
        }
        match ids.requests.as_slice() {
            [] => synth::error_response(&mut out.to_client, None, code, &message, Some(rule)),
            [id] if !ids.batch => {
                synth::error_response(&mut out.to_client, Some(id), code, &message, Some(rule))
            }
            requests => {
                out.to_client.push(b'[');
                for (i, id) in requests.iter().enumerate() {
                    if i > 0 {
                        out.to_client.push(b',');
                    }
                    synth::error_response(&mut out.to_client, Some(id), code, &message, Some(rule));
                }
                out.to_client.push(b']');
            }
        }
        out.to_client.push(b'\n');
        match ids.requests.as_slice() {
            [] => out.routed_answer(None),
            [id] if !ids.batch => out.routed_answer(Some(id)),
            _ => out.routed(|| super::Route::Batch),
        }
        let mut e = AuditEvent::new(Direction::Inbound, Verdict::Deny);
        e.id = ids
            .requests
            .first()
            .or(ids.answers.first())
            .map(|id| IdText::new(id));
        if let Some(entry) = asked {
            e.method = Some(entry.method);
            e.tool = entry.tool;
            e.duration = Some(entry.started.elapsed());
        }
        e.rule = Some(RuleRef::Builtin(rule));
        e.message = Some(message.into());
        self.emit(out, Peer::Client, true, e, &[], &[]);
    }

    /// The policy's verdict on one message, plus correlation, the rate limit and the
    /// guard.
    fn decide(&mut self, frame: &Frame<'_>, msg: &Message, out: &mut Outbox) -> Ruling {
        // Ids are unique among a client's requests in flight (the specification says so,
        // and an answer could not be told to the right one): a request reusing one is
        // refused whatever the policy says, on every transport.
        if msg.kind == MessageKind::Request
            && let Some(id) = frame.id_raw(msg)
            && (self.calls.contains(id) || self.holds_call(id))
        {
            return Ruling::refuse(
                RuleRef::Builtin(RULE_DUPLICATE_ID),
                "a request with this id is still in flight in this session; \
                 request ids must be unique",
            );
        }
        let answers = match msg.kind {
            MessageKind::Result | MessageKind::Error => match self.answered_ask(frame, msg, out) {
                Ok(entry) => Some(entry),
                Err(refusal) => return *refusal,
            },
            _ => None,
        };
        let method = match &answers {
            Some(entry) => Some(&*entry.method),
            None => frame.method(msg),
        };
        let verdict = self
            .program
            .evaluate_as(frame, msg, method, &mut self.client.scratch);
        let mut d = match verdict {
            Decision::AllowedBy(r) => Ruling {
                allow: true,
                ask: false,
                rule: Some(RuleRef::Inbound(r)),
                message: None,
                audited: true,
                answers: None,
            },
            Decision::DeniedBy(r) => Ruling {
                allow: false,
                ask: false,
                rule: Some(RuleRef::Inbound(r)),
                message: None,
                audited: true,
                answers: None,
            },
            // `default_action` judges requests that act on the world, never an answer.
            // Only a request can wait for a human; an answer or a notification an ask
            // rule matches is refused.
            Decision::AskedBy(r) if msg.kind == MessageKind::Request => Ruling {
                allow: false,
                ask: true,
                rule: Some(RuleRef::Inbound(r)),
                message: None,
                audited: true,
                answers: None,
            },
            Decision::AskedBy(r) => Ruling::refuse(
                RuleRef::Inbound(r),
                "this message needs a human's approval, which only a request can wait for",
            ),
            Decision::DefaultAsk if answers.is_none() && msg.kind == MessageKind::Request => {
                Ruling {
                    allow: false,
                    ask: true,
                    rule: Some(RuleRef::Builtin("mcpwall:default_action")),
                    message: None,
                    audited: true,
                    answers: None,
                }
            }
            Decision::DefaultAsk if answers.is_none() => Ruling::refuse(
                RuleRef::Builtin("mcpwall:default_action"),
                "this message needs a human's approval, which only a request can wait for",
            ),
            Decision::Default { allow } if answers.is_none() => Ruling {
                allow,
                ask: false,
                rule: Some(RuleRef::Builtin("mcpwall:default_action")),
                message: (!allow).then_some(Cow::Borrowed(
                    "denied by default_action: no rule allows this call",
                )),
                audited: true,
                answers: None,
            },
            Decision::NulInPath => Ruling::refuse(
                RuleRef::Builtin("mcpwall:nul_in_path"),
                "a path argument holds a NUL character; refused",
            ),
            Decision::UnreadablePath => Ruling::refuse(
                RuleRef::Builtin("mcpwall:unreadable_path"),
                "a path argument names a file whose real path could not be resolved (a symlink loop, a directory that may not be searched, or a Windows short name); refused",
            ),
            Decision::Default { .. } | Decision::DefaultAsk | Decision::Plumbing => Ruling {
                allow: true,
                ask: false,
                rule: None,
                message: None,
                audited: answers.as_ref().is_some_and(|e| e.audited),
                answers: None,
            },
        };
        d.answers = answers;
        // A pack rule lifted by an exception: the audit names the exception that let
        // the message through (exceptions are rare, so this allocation is too).
        if d.allow && !self.client.scratch.excepted().is_empty() {
            d.message = Some(Cow::Owned(excepted_note(
                &self.program,
                self.client.scratch.excepted(),
            )));
            d.audited = true;
        }
        if (d.allow || d.ask)
            && msg.kind == MessageKind::Request
            && frame.method(msg) == Some("tools/call")
            && let Some(rate) = &self.rate
        {
            let tool = frame.tool(msg).unwrap_or("");
            let mut rate = rate.lock().unwrap_or_else(|e| e.into_inner());
            match rate.admit_call(tool, Instant::now()) {
                super::ratelimit::Admission::Admitted => {}
                super::ratelimit::Admission::Refused => {
                    d = Ruling::refuse(RuleRef::Builtin("mcpwall:rate_limit"), rate.message(tool));
                }
                super::ratelimit::Admission::Unavailable(why) => {
                    d = shared_state_unavailable(&why);
                }
            }
        }
        // Withheld tools and prompts, and a suspended session, are refused whatever
        // the policy said.
        if let Some(guard) = &self.guard
            && let Some((denial, rule)) = guard::check_request(guard, frame, msg)
        {
            d = Ruling::refuse(RuleRef::Builtin(rule), denial.message);
        }
        d
    }

    /// The server request a client response answers, taken from the table; or the
    /// refusal of a response that answers none (see the module docs of [`super`]),
    /// boxed: a `Ruling` is large, and only refusals pay for the allocation.
    fn answered_ask(
        &mut self,
        frame: &Frame<'_>,
        msg: &Message,
        out: &mut Outbox,
    ) -> Result<Entry, Box<Ruling>> {
        let id = frame.id_raw(msg).unwrap_or(b"null");
        if let Some(entry) = self.asks.remove(id) {
            return Ok(entry);
        }
        if let Some(entry) = self.asks.remove_by_number(id) {
            // The server would read this as the answer to its request; it gets an
            // error for that request instead.
            let message = "the client's answer to this request carried its id written \
                           differently; not forwarded";
            synth::error_response(
                &mut out.to_server,
                Some(entry.id.as_bytes()),
                synth::POLICY_DENIED,
                message,
                Some("mcpwall:mismatched_id"),
            );
            out.to_server.push(b'\n');
            let mut d = Ruling::refuse(
                RuleRef::Builtin("mcpwall:mismatched_id"),
                "response id does not match the request's; not forwarded",
            );
            d.answers = Some(entry);
            return Err(Box::new(d));
        }
        Err(Box::new(Ruling::refuse(
            RuleRef::Builtin("mcpwall:unknown_id"),
            "response to no pending server request; not forwarded",
        )))
    }

    fn judge_client_frame(&mut self, frame: &Frame<'_>, out: &mut Outbox) {
        let messages = frame.messages();
        if !frame.parsed.is_batch() {
            let Some(msg) = messages.first() else { return };
            if self.roots_traffic(frame, msg, out) || self.approval_traffic(frame, msg, out) {
                return;
            }
            let mut d = self.decide(frame, msg, out);
            if d.ask {
                let rule = d.rule.unwrap_or(RuleRef::Builtin("mcpwall:default_action"));
                self.ask(frame, msg, rule, out);
                return;
            }
            let mut names = None;
            if d.allow && msg.kind == MessageKind::Request {
                match self.register(frame, msg, d.audited) {
                    Ok(n) => names = n,
                    Err(full) => {
                        d = Ruling::refuse(
                            RuleRef::Builtin("mcpwall:pending_full"),
                            full.to_string(),
                        )
                    }
                }
            }
            if d.allow {
                self.note_cancel(frame, msg);
                if msg.kind == MessageKind::Request && frame.method(msg) == Some("initialize") {
                    self.note_protocol(&frame.raw[msg.span.clone()], "/params/protocolVersion");
                }
                out.to_server.extend_from_slice(frame.raw);
                out.to_server.push(b'\n');
                if d.answers
                    .as_ref()
                    .is_some_and(|e| &*e.method == "roots/list")
                {
                    self.roots_observed(frame, msg, out);
                }
            } else if self.refusal(frame, msg, &d, &mut out.to_client, &mut out.to_server) {
                out.to_client.push(b'\n');
                // A duplicate's refusal goes out with a null id (see `refusal`).
                let duplicate = d.rule == Some(RuleRef::Builtin(RULE_DUPLICATE_ID));
                out.routed_answer(frame.id_raw(msg).filter(|_| !duplicate));
            }
            self.audit_client(frame, msg, &d, names, out);
            return;
        }

        // A batch (decision 3): all allowed → forwarded unchanged; any denied → nothing
        // of it is forwarded and every request in it is answered with an error.
        let mut batch = std::mem::take(&mut self.client.rulings);
        batch.clear();
        for msg in messages {
            // A batch's notifications and `initialize` count for the roots too; an answer
            // to mcpwall's own question inside a batch is not looked for (it is refused
            // as an answer to nothing, and the project stays as it was).
            if msg.kind == MessageKind::Notification || msg.kind == MessageKind::Request {
                self.roots_traffic(frame, msg, out);
            }
            let mut d = self.decide(frame, msg, out);
            if d.ask {
                // A held member would hold the whole batch (it goes out as one line).
                let rule = d.rule.unwrap_or(RuleRef::Builtin("mcpwall:default_action"));
                d = Ruling::refuse(
                    rule,
                    "this call needs a human's approval, which a batch cannot wait for; \
                     send it on its own",
                );
            }
            batch.push(d);
        }
        // Refused whole, whatever its members: where batches are not part of the
        // protocol, and where two of its requests share an id (their answers could not
        // be told apart).
        let refused = match self.batch_refusal() {
            Some(why) => Some((RULE_BATCH, why)),
            None => has_duplicate_request_ids(frame, messages).then(|| {
                (
                    RULE_DUPLICATE_ID,
                    "two requests in this batch share an id; request ids must be unique"
                        .to_string(),
                )
            }),
        };
        if let Some((rule, why)) = refused {
            for d in batch.iter_mut() {
                let answers = d.answers.take();
                *d = Ruling::refuse(RuleRef::Builtin(rule), why.clone());
                d.answers = answers;
            }
        }
        let mut all_allowed = batch.iter().all(|d| d.allow);
        if all_allowed {
            let mut registered = Vec::new();
            for (msg, d) in messages.iter().zip(&batch) {
                if msg.kind != MessageKind::Request {
                    continue;
                }
                match self.register(frame, msg, d.audited) {
                    Ok(_) => registered.push(msg),
                    Err(full) => {
                        for m in &registered {
                            if let Some(id) = frame.id_raw(m) {
                                self.calls.remove(id);
                            }
                        }
                        for (m, d) in messages.iter().zip(batch.iter_mut()) {
                            if m.kind == MessageKind::Request {
                                *d = Ruling::refuse(
                                    RuleRef::Builtin("mcpwall:pending_full"),
                                    full.to_string(),
                                );
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
            out.to_server.extend_from_slice(frame.raw);
            out.to_server.push(b'\n');
            for (msg, d) in messages.iter().zip(&batch) {
                if d.answers
                    .as_ref()
                    .is_some_and(|e| &*e.method == "roots/list")
                {
                    self.roots_observed(frame, msg, out);
                }
            }
        } else {
            // Allowed members of a refused batch are refused too, naming the reason.
            let culprit = batch
                .iter()
                .find(|d| !d.allow)
                .map(|d| (d.rule, refusal_message(&self.program, d).into_owned()));
            if let Some((rule, why)) = culprit {
                for d in batch.iter_mut().filter(|d| d.allow) {
                    d.allow = false;
                    d.rule = rule;
                    d.message = Some(Cow::Owned(format!(
                        "batch refused because another message in it was denied: {why}"
                    )));
                    d.audited = true;
                }
            }
            let mut answers = vec![b'['];
            let mut n = 0;
            for (msg, d) in messages.iter().zip(&batch) {
                let mark = answers.len();
                if n > 0 {
                    answers.push(b',');
                }
                if self.refusal(frame, msg, d, &mut answers, &mut out.to_server) {
                    n += 1;
                } else {
                    answers.truncate(mark);
                }
            }
            if n > 0 {
                answers.push(b']');
                out.to_client.extend_from_slice(&answers);
                out.to_client.push(b'\n');
                out.routed(|| super::Route::Batch);
            }
        }
        for (msg, d) in messages.iter().zip(&batch) {
            self.audit_client(frame, msg, d, None, out);
        }
        self.client.rulings = batch;
    }

    /// Write what answers a refused message: an error object to `client` for a
    /// request (returns `true`), an error line to `server` for a client's response to
    /// a server request (so the server does not wait forever), nothing for a
    /// notification (dropped).
    fn refusal(
        &self,
        frame: &Frame<'_>,
        msg: &Message,
        d: &Ruling,
        client: &mut Vec<u8>,
        server: &mut Vec<u8>,
    ) -> bool {
        let message = refusal_message(&self.program, d);
        let rule = d.rule.map(|r| self.rule_name(r));
        match msg.kind {
            MessageKind::Request => {
                // A duplicate's refusal under its id would read as the answer to the
                // request in flight with that id: it goes out with a null id.
                let duplicate = d.rule == Some(RuleRef::Builtin(RULE_DUPLICATE_ID));
                synth::error_response(
                    client,
                    frame.id_raw(msg).filter(|_| !duplicate),
                    synth::POLICY_DENIED,
                    &message,
                    rule,
                );
                true
            }
            MessageKind::Result | MessageKind::Error => {
                // Only the request the response answered exactly is told here; one
                // matched by number was told in `answered_ask`. (Told apart by the ids,
                // not the rule: a batch refused for a mismatched id gives its other
                // members that rule.)
                let exact = |entry: &Entry| {
                    frame
                        .id_raw(msg)
                        .is_some_and(|id| IdText::key_of(id) == IdText::key_of(entry.id.as_bytes()))
                };
                if let Some(entry) = d.answers.as_ref().filter(|e| exact(e)) {
                    synth::error_response(
                        server,
                        Some(entry.id.as_bytes()),
                        synth::POLICY_DENIED,
                        &message,
                        rule,
                    );
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
        audited: bool,
    ) -> Result<Option<pending::Names>, pending::Full> {
        let Some(id) = frame.id_raw(msg) else {
            return Ok(None);
        };
        let method = frame.method(msg).unwrap_or("");
        self.calls
            .insert(id, method, frame.tool(msg), Instant::now(), audited)
            .map(Some)
    }

    /// What concerns the calls held for approval, taken out of the stream (returns
    /// `true` when the message was consumed): the client's answer to mcpwall's own
    /// question, and the cancellation of a held call. Notes the client's `elicitation`
    /// capability from `initialize` on the way.
    fn approval_traffic(&mut self, frame: &Frame<'_>, msg: &Message, out: &mut Outbox) -> bool {
        match msg.kind {
            MessageKind::Result | MessageKind::Error => {
                if let Some(id) = frame.id_raw(msg)
                    && self.answers_elicitation(id)
                {
                    self.elicitation_answered(frame, msg, out);
                    return true;
                }
                false
            }
            MessageKind::Notification => {
                frame.method(msg) == Some("notifications/cancelled")
                    && cancelled_request_id(frame, msg).is_some_and(|id| self.cancel_held(id, out))
            }
            MessageKind::Request => {
                if frame.method(msg) == Some("initialize") {
                    self.approvals.client_elicits =
                        super::approval::declares_elicitation(frame, msg);
                }
                false
            }
        }
    }

    /// A forwarded `notifications/cancelled` ends the correlation of its request.
    fn note_cancel(&mut self, frame: &Frame<'_>, msg: &Message) {
        if msg.kind == MessageKind::Notification
            && frame.method(msg) == Some("notifications/cancelled")
            && let Some(id) = cancelled_request_id(frame, msg)
        {
            self.calls.remove(id);
        }
    }

    /// `names`: the request's names as [`Session::register`] interned them, if it did.
    fn audit_client(
        &mut self,
        frame: &Frame<'_>,
        msg: &Message,
        d: &Ruling,
        names: Option<pending::Names>,
        out: &mut Outbox,
    ) {
        if !d.allow
            && let Some(guard) = &self.guard
            && let Some((event, notice)) = guard::record_violation(guard, || {
                format!(
                    "{} {} denied: {}",
                    frame.method(msg).unwrap_or("(response)"),
                    frame.tool(msg).unwrap_or(""),
                    refusal_message(&self.program, d)
                )
            })
        {
            self.notice(out, LogLevel::Warn, format_args!("{notice}"));
            self.emit(out, Peer::Client, true, event, &[], &[]);
        }
        if !d.allow {
            // A token sent as the method or tool name is not repeated on stderr.
            let method = self.masked(frame.method(msg).unwrap_or("(response)"));
            let tool = self.masked(frame.tool(msg).unwrap_or(""));
            self.notice(
                out,
                LogLevel::Info,
                format_args!(
                    "denied {method} {tool}: {}",
                    refusal_message(&self.program, d)
                ),
            );
        }
        if !self.wants_events(out) || !(d.audited || out.judgements.is_some()) {
            return;
        }
        let action = if d.allow {
            Verdict::Allow
        } else {
            Verdict::Deny
        };
        let mut e = AuditEvent::new(Direction::Inbound, action);
        e.id = frame.id_raw(msg).map(IdText::new);
        match (names, &d.answers) {
            (Some(names), _) => {
                e.method = Some(names.method);
                e.tool = names.tool;
            }
            (None, Some(entry)) => {
                e.method = Some(entry.method.clone());
                e.tool = entry.tool.clone();
                e.duration = Some(entry.started.elapsed());
            }
            (None, None) => {
                e.method = frame.method(msg).map(|m| self.calls.intern(m));
                e.tool = frame.tool(msg).map(|t| self.calls.intern(t));
            }
        }
        e.rule = d.rule;
        e.message = d.message.as_ref().map(|m| m.as_ref().into());
        if !d.allow && msg.kind != MessageKind::Result && msg.kind != MessageKind::Error {
            // Denials are rare: summarising one costs nothing on the allowed path.
            e.request = super::preview::denied_summary(frame, msg).map(Into::into);
        }
        if d.allow
            && msg.kind == MessageKind::Request
            && let Some((cache, findings)) = &mut self.client.log_args
        {
            e.args = logged_args(&self.program, frame, msg, cache, findings);
        }
        self.emit(out, Peer::Client, d.audited, e, &[], &[]);
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
                    *s = super::redacted(s, findings);
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

/// Whether two requests of a batch share an id (compared as JSON values). Hashed: a
/// batch may hold as many members as `max_frame_bytes` allows.
fn has_duplicate_request_ids(frame: &Frame<'_>, messages: &[Message]) -> bool {
    let mut seen = std::collections::HashSet::new();
    messages
        .iter()
        .filter(|m| m.kind == MessageKind::Request)
        .filter_map(|m| frame.id_raw(m))
        .any(|id| !seen.insert(IdText::key_of(id)))
}
