//! Calls held for a human's approval (`action: ask`, `default_action: ask`).
//!
//! A call an ask rule matches is not forwarded: the session keeps its line, as it came,
//! beside the rug-pull hold's queue (contract point 6), and asks the human. Two ways:
//! - the client declared the `elicitation` capability in `initialize`: the session sends
//!   the client an `elicitation/create` request (an id of mcpwall's own, see
//!   [`ELICITATION_ID_PREFIX`]); the client shows it to the user, not to the model, and
//!   the answer is consumed here and never reaches the server;
//! - otherwise the transport publishes an [`ApprovalRequest`] (the proxy writes it to
//!   `~/.mcpwall/pending/`) and hands back the decision `mcpwall approve` wrote
//!   ([`Session::decide_approval`]).
//!
//! Approved: the line goes to the server byte for byte. Declined, cancelled, answered
//! with an error, or unanswered after `ask_timeout_seconds`: the call gets a refusal
//! (fail closed). An approval is bound to the call by [`request_digest`] (server, method,
//! tool, canonical arguments); `remember: session` keeps it for identical calls.
//!
//! Nothing of this is sent to the agent but the refusal, which names neither the CLI verb
//! nor the code (STYLE rule 14).

use std::collections::HashSet;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use sha2::{Digest, Sha256};

use super::canonical::Canon;
use super::event::{AuditEvent, Direction, RuleRef, Verdict};
use super::ids::IdText;
use super::{Outbox, Peer, Route, Session, synth};
use crate::config::policy::LogLevel;
use crate::frame::{Frame, Message};

/// Calls held for approval at once, before new ones are refused (fail closed).
pub const MAX_ASKING: usize = 64;

/// The id of every `elicitation/create` mcpwall sends starts with this (as JSON text:
/// a string). A server request with such an id is refused, so the client's answer to
/// mcpwall's question can never be taken for an answer to the server's, or the reverse.
pub const ELICITATION_ID_PREFIX: &str = "\"mcpwall-ask-";

/// The longest argument preview shown to the approver, in characters.
const PREVIEW_CHARS: usize = 4000;

/// How a held call was decided (the audit event's `how`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum How {
    /// The client's elicitation UI.
    Elicitation,
    /// `mcpwall approve` in a terminal.
    Cli,
    /// An earlier approval of the identical call, kept by `remember: session`.
    Remembered,
    /// Nobody answered in time.
    Timeout,
    /// The client cancelled the call, or a side went away.
    Withdrawn,
}

impl How {
    pub fn as_str(self) -> &'static str {
        match self {
            How::Elicitation => "elicitation",
            How::Cli => "cli",
            How::Remembered => "remembered",
            How::Timeout => "timeout",
            How::Withdrawn => "withdrawn",
        }
    }
}

/// A held call the transport must offer to `mcpwall approve` (the client has no UI for
/// it): everything the approver is shown. Never sent to the agent.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ApprovalRequest {
    /// Short code the approver names it by.
    pub code: String,
    pub server: String,
    pub method: String,
    pub tool: Option<String>,
    /// The arguments as canonical JSON, every secret a detector finds masked.
    pub arguments: String,
    /// The rule that asked (`mcpwall:default_action` for the default).
    pub rule: String,
    /// [`request_digest`] of the call: the decision names it, so it can only approve
    /// this exact call.
    pub digest: String,
    /// Seconds since the epoch after which the call is refused anyway.
    pub expires_unix: u64,
    /// The proxy's process id (for the listing).
    pub pid: u32,
}

/// A call waiting for an answer.
#[derive(Debug)]
pub(super) struct HeldCall {
    code: String,
    request_id: IdText,
    raw: Vec<u8>,
    method: Arc<str>,
    tool: Option<Arc<str>>,
    rule: RuleRef,
    remember: bool,
    digest: String,
    started: Instant,
    deadline: Instant,
    /// The id of the `elicitation/create` sent for it; `None`: `mcpwall approve`.
    elicitation: Option<IdText>,
}

/// The session's held calls and remembered approvals.
#[derive(Debug, Default)]
pub(super) struct Approvals {
    held: Vec<HeldCall>,
    /// Digests approved under `remember: session`.
    remembered: HashSet<String>,
    /// The client declared `elicitation` in `initialize`.
    pub(super) client_elicits: bool,
    next: u64,
}

impl Approvals {
    /// Forget the approvals remembered under `remember: session` (the policy that asked
    /// for them was replaced).
    pub(super) fn forget_remembered(&mut self) {
        self.remembered.clear();
    }
}

/// The digest an approval is bound to: SHA-256 over the server, the method, the tool
/// and the canonical JSON of the arguments ([`Canon::to_text`]), as hex. Arguments that
/// differ only in key order, escapes or the spelling of one exact number have the same
/// digest; one byte or one unit in the last digit of a value more or less does not.
pub fn request_digest(server: &str, method: &str, tool: Option<&str>, arguments: &str) -> String {
    let mut h = Sha256::new();
    for part in [server, method, tool.unwrap_or(""), arguments] {
        h.update((part.len() as u64).to_le_bytes());
        h.update(part.as_bytes());
    }
    hex(&h.finalize())
}

fn hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// A short code for the approver to type: 6 letters and digits without look-alikes,
/// different per call and per proxy (several proxies share the pending directory).
fn short_code(digest: &str, n: u64) -> String {
    const ALPHABET: &[u8] = b"abcdefghjkmnpqrstuvwxyz23456789";
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let mut h = Sha256::new();
    h.update(digest.as_bytes());
    h.update(n.to_le_bytes());
    h.update(nanos.to_le_bytes());
    h.update(std::process::id().to_le_bytes());
    let bytes = h.finalize();
    bytes[..6]
        .iter()
        .map(|b| ALPHABET[*b as usize % ALPHABET.len()] as char)
        .collect()
}

/// The arguments of a call (`params.arguments` of `tools/call`, else `params`), read
/// exactly ([`Canon`]); `None` when the message cannot be read that way (nested deeper
/// than the canonical reader goes), and then the digest covers the raw message.
fn call_arguments(frame: &Frame<'_>, msg: &Message) -> Option<Canon> {
    let value = Canon::parse(&frame.raw[msg.span.clone()]).ok()?;
    let params = value.get("params").cloned().unwrap_or(Canon::Null);
    if frame.method(msg) == Some("tools/call") {
        Some(params.get("arguments").cloned().unwrap_or(Canon::Null))
    } else {
        Some(params)
    }
}

/// The text an approval digest covers: the canonical arguments, or (unreadable) the raw
/// message behind a NUL, which canonical JSON never holds, so the two cannot meet.
fn digest_text(frame: &Frame<'_>, msg: &Message, args: Option<&Canon>) -> String {
    match args {
        Some(a) => a.to_text(),
        None => format!(
            "\0{}",
            String::from_utf8_lossy(&frame.raw[msg.span.clone()])
        ),
    }
}

/// Whether the client's `initialize` request declares the `elicitation` capability.
pub(super) fn declares_elicitation(frame: &Frame<'_>, msg: &Message) -> bool {
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(&frame.raw[msg.span.clone()])
    else {
        return false;
    };
    value
        .pointer("/params/capabilities/elicitation")
        .is_some_and(|e| e.is_object())
}

impl Session {
    /// Hold a call an ask rule matched: forward it at once if an identical call was
    /// approved under `remember: session`, else ask the human (see the module docs).
    pub(super) fn ask(
        &mut self,
        frame: &Frame<'_>,
        msg: &Message,
        rule: RuleRef,
        out: &mut Outbox,
    ) {
        let method = frame.method(msg).unwrap_or("");
        let tool = frame.tool(msg);
        let args = call_arguments(frame, msg);
        let canonical = digest_text(frame, msg, args.as_ref());
        let digest = request_digest(&self.server, method, tool, &canonical);
        let remember = match rule {
            RuleRef::Inbound(r) => self.program.rule(r).remember_session,
            _ => false,
        };
        let id = frame.id_raw(msg).unwrap_or(b"null");
        let method_name = self.calls.intern(method);
        let tool_name = tool.map(|t| self.calls.intern(t));
        if remember && self.approvals.remembered.contains(&digest) {
            let held = HeldCall {
                code: String::new(),
                request_id: IdText::new(id),
                raw: frame.raw.to_vec(),
                method: method_name,
                tool: tool_name,
                rule,
                remember,
                digest,
                started: Instant::now(),
                deadline: Instant::now(),
                elicitation: None,
            };
            self.release_approved(held, How::Remembered, out);
            return;
        }
        if self.approvals.held.len() >= MAX_ASKING {
            let message = "too many calls are waiting for approval; refused";
            synth::error_response(
                &mut out.to_client,
                Some(id),
                synth::POLICY_DENIED,
                message,
                Some("mcpwall:ask_full"),
            );
            out.to_client.push(b'\n');
            out.routed_answer(Some(id));
            let mut e = AuditEvent::new(Direction::Inbound, Verdict::Deny);
            e.id = Some(IdText::new(id));
            e.method = Some(method_name);
            e.tool = tool_name;
            e.rule = Some(RuleRef::Builtin("mcpwall:ask_full"));
            e.message = Some(message.into());
            self.emit(out, Peer::Client, true, e, &[], &[]);
            return;
        }
        self.approvals.next += 1;
        let code = short_code(&digest, self.approvals.next);
        let preview = self.preview(args.as_ref(), &canonical);
        let rule_name = self.rule_name(rule).to_string();
        let timeout = Duration::from_secs(self.program.settings().ask_timeout_seconds);
        let started = Instant::now();
        let elicitation = self
            .approvals
            .client_elicits
            .then(|| IdText::new(format!("{ELICITATION_ID_PREFIX}{code}\"").as_bytes()));
        let how = match &elicitation {
            Some(eid) => {
                self.send_elicitation(eid, method, tool, &preview, &rule_name, remember, out);
                How::Elicitation
            }
            None => {
                out.approvals.push(ApprovalRequest {
                    code: code.clone(),
                    server: self.server.to_string(),
                    method: method.to_string(),
                    tool: tool.map(str::to_string),
                    arguments: preview,
                    rule: rule_name.clone(),
                    digest: digest.clone(),
                    expires_unix: SystemTime::now()
                        .checked_add(timeout)
                        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
                        .map_or(0, |d| d.as_secs()),
                    pid: std::process::id(),
                });
                How::Cli
            }
        };
        // For the human, on stderr: where to answer.
        let what = self.masked(tool.unwrap_or(method)).into_owned();
        match how {
            How::Cli => self.notice(
                out,
                LogLevel::Warn,
                format_args!(
                    "call {what} (rule {rule_name}) waits for approval, code {code}: run \
                     `mcpwall approve` in a terminal within {} s",
                    timeout.as_secs()
                ),
            ),
            _ => self.notice(
                out,
                LogLevel::Info,
                format_args!("call {what} (rule {rule_name}) waits for the user's answer"),
            ),
        }
        let mut e = AuditEvent::new(Direction::Inbound, Verdict::Ask);
        e.id = Some(IdText::new(id));
        e.method = Some(method_name.clone());
        e.tool = tool_name.clone();
        e.rule = Some(rule);
        e.how = Some(how.as_str());
        self.emit(out, Peer::Client, true, e, &[], &[]);
        out.asked = true;
        self.approvals.held.push(HeldCall {
            code,
            request_id: IdText::new(id),
            raw: frame.raw.to_vec(),
            method: method_name,
            tool: tool_name,
            rule,
            remember,
            digest,
            started,
            deadline: started + timeout,
            elicitation,
        });
    }

    /// The masked, canonical arguments the approver is shown: exactly the values the
    /// digest covers (numbers as their exact decimal text), secrets masked.
    fn preview(&mut self, args: Option<&Canon>, canonical: &str) -> String {
        let text = match args {
            Some(a) => a.to_text_mapped(&mut |s| self.masked(s)),
            None => self.masked(canonical).into_owned(),
        };
        if text.chars().count() <= PREVIEW_CHARS {
            return text;
        }
        let mut cut: String = text.chars().take(PREVIEW_CHARS).collect();
        cut.push_str(" … (cut)");
        cut
    }

    #[allow(clippy::too_many_arguments)]
    fn send_elicitation(
        &self,
        id: &IdText,
        method: &str,
        tool: Option<&str>,
        preview: &str,
        rule: &str,
        remember: bool,
        out: &mut Outbox,
    ) {
        let mut message = format!(
            "mcpwall is holding a call from the agent until you decide.\n\
             Server: {}\nCall: {}\nArguments: {preview}\nAsked by rule: {rule}\n\
             Approve to run this exact call once; decline to refuse it.",
            self.server,
            match tool {
                Some(t) => format!("{method} {t}"),
                None => method.to_string(),
            },
        );
        if remember {
            message.push_str(
                " An approval also holds for identical calls (same arguments) for the rest \
                 of this session.",
            );
        }
        let request = serde_json::json!({
            "jsonrpc": "2.0",
            "method": "elicitation/create",
            "params": {
                "message": message,
                "requestedSchema": {
                    "type": "object",
                    "properties": {
                        "approve": {
                            "type": "boolean",
                            "title": "Run this call",
                            "description": "Check to let the call run as shown.",
                            "default": false
                        }
                    },
                    "required": ["approve"]
                }
            }
        });
        // The id first, as its exact text.
        let line_start = out.to_client.len();
        out.to_client
            .extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
        out.to_client.extend_from_slice(id.as_bytes());
        out.to_client
            .extend_from_slice(b",\"method\":\"elicitation/create\",\"params\":");
        let params_at = out.to_client.len() - line_start;
        out.to_client
            .extend_from_slice(request["params"].to_string().as_bytes());
        let params = params_at..out.to_client.len() - line_start;
        out.to_client.extend_from_slice(b"}\n");
        out.routed(|| Route::Request {
            id: id.as_bytes().into(),
            method: "elicitation/create".into(),
            params: Some(params),
        });
    }

    /// Whether a call with this request id is held for a human's approval.
    pub(super) fn holds_call(&self, request_id: &[u8]) -> bool {
        let key = IdText::key_of(request_id);
        self.approvals
            .held
            .iter()
            .any(|h| IdText::key_of(h.request_id.as_bytes()) == key)
    }

    /// Whether a client response with this id answers one of mcpwall's own questions.
    pub(super) fn answers_elicitation(&self, id: &[u8]) -> bool {
        let key = IdText::key_of(id);
        self.approvals
            .held
            .iter()
            .any(|h| h.elicitation.as_ref() == Some(&key))
    }

    /// The client's answer to mcpwall's `elicitation/create`: approve only on `accept`
    /// with `approve: true`; anything else declines. Never forwarded.
    pub(super) fn elicitation_answered(
        &mut self,
        frame: &Frame<'_>,
        msg: &Message,
        out: &mut Outbox,
    ) {
        let key = IdText::key_of(frame.id_raw(msg).unwrap_or(b"null"));
        let Some(i) = self
            .approvals
            .held
            .iter()
            .position(|h| h.elicitation.as_ref() == Some(&key))
        else {
            return;
        };
        let held = self.approvals.held.remove(i);
        let value: serde_json::Value =
            serde_json::from_slice(&frame.raw[msg.span.clone()]).unwrap_or_default();
        let approved = value.pointer("/result/action").and_then(|a| a.as_str()) == Some("accept")
            && value.pointer("/result/content/approve") == Some(&serde_json::Value::Bool(true));
        if approved {
            self.release_approved(held, How::Elicitation, out);
        } else {
            let why = if value.get("error").is_some() {
                "the client could not ask the user; the call was refused"
            } else {
                "the user declined this call"
            };
            self.refuse_held(held, Verdict::Declined, How::Elicitation, why, out);
        }
    }

    /// A decision `mcpwall approve` wrote: applies only to the held call with this code
    /// and digest (an approval names the exact call it saw). Returns whether it applied.
    pub fn decide_approval(
        &mut self,
        code: &str,
        digest: &str,
        approve: bool,
        out: &mut Outbox,
    ) -> bool {
        let Some(i) = self
            .approvals
            .held
            .iter()
            .position(|h| h.elicitation.is_none() && h.code == code && h.digest == digest)
        else {
            return false;
        };
        let held = self.approvals.held.remove(i);
        out.withdrawn.push(held.code.clone());
        if approve {
            self.release_approved(held, How::Cli, out);
        } else {
            self.refuse_held(
                held,
                Verdict::Declined,
                How::Cli,
                "the user declined this call",
                out,
            );
        }
        true
    }

    /// Codes of the held calls waiting for `mcpwall approve`.
    pub fn awaiting_cli(&self) -> Vec<(String, String)> {
        self.approvals
            .held
            .iter()
            .filter(|h| h.elicitation.is_none())
            .map(|h| (h.code.clone(), h.digest.clone()))
            .collect()
    }

    /// When the first held call times out.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.approvals.held.iter().map(|h| h.deadline).min()
    }

    /// Refuse every held call whose time is up at `now`.
    pub fn expire(&mut self, now: Instant, out: &mut Outbox) {
        let timeout = self.program.settings().ask_timeout_seconds;
        while let Some(i) = self.approvals.held.iter().position(|h| h.deadline <= now) {
            let held = self.approvals.held.remove(i);
            if held.elicitation.is_none() {
                out.withdrawn.push(held.code.clone());
            }
            let why = format!("no approval within {timeout} s; the call was refused");
            self.refuse_held(held, Verdict::TimedOut, How::Timeout, &why, out);
        }
    }

    /// `notifications/cancelled` for a held call: it is dropped (the client expects no
    /// answer), and a question about it is withdrawn. Returns whether one was held.
    pub(super) fn cancel_held(&mut self, request_id: &[u8], out: &mut Outbox) -> bool {
        let key = IdText::key_of(request_id);
        let Some(i) = self
            .approvals
            .held
            .iter()
            .position(|h| IdText::key_of(h.request_id.as_bytes()) == key)
        else {
            return false;
        };
        let held = self.approvals.held.remove(i);
        match &held.elicitation {
            Some(eid) => {
                out.to_client.extend_from_slice(
                    b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":",
                );
                out.to_client.extend_from_slice(eid.as_bytes());
                out.to_client
                    .extend_from_slice(b",\"reason\":\"the call was cancelled\"}}\n");
                out.routed(|| Route::Notification {
                    method: "notifications/cancelled".into(),
                    progress: None,
                    uri: None,
                });
            }
            None => out.withdrawn.push(held.code.clone()),
        }
        let mut e = AuditEvent::new(Direction::Inbound, Verdict::Declined);
        e.id = Some(held.request_id);
        e.method = Some(held.method);
        e.tool = held.tool;
        e.rule = Some(held.rule);
        e.how = Some(How::Withdrawn.as_str());
        e.duration = Some(held.started.elapsed());
        e.message = Some("the client cancelled the call while it waited for approval".into());
        self.emit(out, Peer::Client, true, e, &[], &[]);
        true
    }

    /// The server is gone: every held call is refused like the calls in flight.
    pub(super) fn drop_held(&mut self, message: &str, out: &mut Outbox) {
        for held in std::mem::take(&mut self.approvals.held) {
            if held.elicitation.is_none() {
                out.withdrawn.push(held.code.clone());
            }
            synth::error_response(
                &mut out.to_client,
                Some(held.request_id.as_bytes()),
                synth::SERVER_EXITED,
                message,
                None,
            );
            out.to_client.push(b'\n');
            out.routed_answer(Some(held.request_id.as_bytes()));
            let mut e = AuditEvent::new(Direction::Inbound, Verdict::Declined);
            e.id = Some(held.request_id);
            e.method = Some(held.method);
            e.tool = held.tool;
            e.rule = Some(held.rule);
            e.how = Some(How::Withdrawn.as_str());
            e.duration = Some(held.started.elapsed());
            e.message = Some(message.into());
            self.emit(out, Peer::Client, true, e, &[], &[]);
        }
    }

    /// Forward an approved call as it came, and file it to be answered.
    fn release_approved(&mut self, held: HeldCall, how: How, out: &mut Outbox) {
        if held.remember {
            self.approvals.remembered.insert(held.digest.clone());
        }
        let registered = self.calls.insert(
            held.request_id.as_bytes(),
            &held.method,
            held.tool.as_deref(),
            Instant::now(),
            true,
        );
        if let Err(full) = registered {
            let message = full.to_string();
            self.refuse_held(held, Verdict::Deny, how, &message, out);
            return;
        }
        out.to_server.extend_from_slice(&held.raw);
        out.to_server.push(b'\n');
        let mut e = AuditEvent::new(Direction::Inbound, Verdict::Approved);
        e.id = Some(held.request_id);
        e.method = Some(held.method);
        e.tool = held.tool;
        e.rule = Some(held.rule);
        e.how = Some(how.as_str());
        if how != How::Remembered {
            e.duration = Some(held.started.elapsed());
        }
        self.emit(out, Peer::Client, true, e, &[], &[]);
    }

    /// Answer a held call with a refusal (never naming how to approve it) and audit it.
    fn refuse_held(
        &mut self,
        held: HeldCall,
        verdict: Verdict,
        how: How,
        why: &str,
        out: &mut Outbox,
    ) {
        let rule = self.rule_name(held.rule).to_string();
        synth::error_response(
            &mut out.to_client,
            Some(held.request_id.as_bytes()),
            synth::POLICY_DENIED,
            why,
            Some(&rule),
        );
        out.to_client.push(b'\n');
        out.routed_answer(Some(held.request_id.as_bytes()));
        self.notice(
            out,
            LogLevel::Info,
            format_args!("held call refused ({}): {why}", how.as_str()),
        );
        let mut e = AuditEvent::new(Direction::Inbound, verdict);
        e.id = Some(held.request_id);
        e.method = Some(held.method);
        e.tool = held.tool;
        e.rule = Some(held.rule);
        e.how = Some(how.as_str());
        e.duration = Some(held.started.elapsed());
        e.message = Some(why.into());
        self.emit(out, Peer::Client, true, e, &[], &[]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canonical_json(args: &str) -> String {
        Canon::parse(args.as_bytes()).expect("parses").to_text()
    }

    fn digest_of(args: &str) -> String {
        request_digest("srv", "tools/call", Some("run"), &canonical_json(args))
    }

    #[test]
    fn key_order_escapes_and_number_spelling_do_not_change_the_digest() {
        let a = digest_of(r#"{"cmd":"git push","force":true,"n":1}"#);
        assert_eq!(a, digest_of(r#"{"n":1,"force":true,"cmd":"git push"}"#));
        assert_eq!(
            a,
            digest_of(r#"{"c\u006dd":"git\u0020push","force":true,"n":1.0}"#)
        );
        assert_eq!(
            a,
            digest_of(r#"{ "cmd" : "git push" , "force" : true , "n" : 1e0 }"#)
        );
    }

    #[test]
    fn one_byte_of_a_value_changes_the_digest() {
        let a = digest_of(r#"{"cmd":"git push","force":true,"n":1}"#);
        assert_ne!(a, digest_of(r#"{"cmd":"git pusH","force":true,"n":1}"#));
        assert_ne!(a, digest_of(r#"{"cmd":"git push ","force":true,"n":1}"#));
        assert_ne!(a, digest_of(r#"{"cmd":"git push","force":true,"n":2}"#));
        assert_ne!(a, digest_of(r#"{"cmd":"git push","force":"true","n":1}"#));
        // The same arguments to another tool or server are another call.
        let c = canonical_json(r#"{"cmd":"git push","force":true,"n":1}"#);
        assert_ne!(a, request_digest("srv", "tools/call", Some("exec"), &c));
        assert_ne!(a, request_digest("other", "tools/call", Some("run"), &c));
    }

    #[test]
    fn canonical_json_sorts_nested_keys() {
        assert_eq!(
            canonical_json(r#"{"b":[{"z":1,"a":"\/"}],"a":null}"#),
            r#"{"a":null,"b":[{"a":"/","z":1}]}"#
        );
    }

    #[test]
    fn codes_are_short_and_differ() {
        let a = short_code("d", 1);
        let b = short_code("d", 2);
        assert_eq!(a.len(), 6);
        assert_ne!(a, b);
    }
}

#[cfg(test)]
mod session_tests {
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use super::super::{Line, Options, Outbox, Session};
    use crate::config::{LoadOptions, load_str};
    use crate::program::Program;

    const POLICY: &str = "version: 1\nsettings:\n  ask_timeout_seconds: 5\nrules:\n  - name: ask-push\n    match:\n      tool: run\n      arguments:\n        cmd: {regex: 'push'}\n    action: ask\n";
    const INIT_ELICITS: &str = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{"elicitation":{}},"clientInfo":{"name":"t","version":"1"}}}"#;
    const PUSH: &str = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"run","arguments":{"cmd":"git push"}}}"#;

    fn session(policy: &str) -> Session {
        let opts = LoadOptions {
            explicit: None,
            home: "/home/u".into(),
            project_dir: "/home/u/p".into(),
        };
        let policy = load_str("t.yml", policy, &opts).expect("loads");
        let program = Arc::new(Program::compile(&policy).expect("compiles"));
        Session::new(program, Options::quiet("t"))
    }

    fn client(s: &mut Session, line: &str) -> Outbox {
        let mut out = Outbox::default();
        s.from_client(Line::Frame(line.as_bytes()), &mut out);
        out
    }

    fn text(b: &[u8]) -> String {
        String::from_utf8_lossy(b).into_owned()
    }

    /// An elicitation-capable client's session with PUSH held; the elicitation's id.
    fn held(s: &mut Session) -> String {
        let out = client(s, INIT_ELICITS);
        assert_eq!(text(&out.to_server), format!("{INIT_ELICITS}\n"));
        let out = client(s, PUSH);
        assert!(out.to_server.is_empty(), "held call reached the server");
        let v: serde_json::Value = serde_json::from_slice(&out.to_client).unwrap();
        assert_eq!(v["method"], "elicitation/create");
        assert!(!text(&out.to_client).contains("mcpwall approve"));
        v["id"].to_string()
    }

    #[test]
    fn accepted_call_goes_out_byte_for_byte_and_its_answer_is_delivered() {
        let mut s = session(POLICY);
        let eid = held(&mut s);
        let answer = format!(
            r#"{{"jsonrpc":"2.0","id":{eid},"result":{{"action":"accept","content":{{"approve":true}}}}}}"#
        );
        let out = client(&mut s, &answer);
        assert_eq!(text(&out.to_server), format!("{PUSH}\n"));
        assert!(out.to_client.is_empty());
        // Correlated: the server's answer reaches the client.
        let reply = r#"{"jsonrpc":"2.0","id":7,"result":{"content":[]}}"#;
        let mut out = Outbox::default();
        s.from_server(Line::Frame(reply.as_bytes()), &mut out, false);
        assert_eq!(text(&out.to_client), format!("{reply}\n"));
    }

    #[test]
    fn an_error_answer_declines_and_never_reaches_the_server() {
        let mut s = session(POLICY);
        let eid = held(&mut s);
        let answer =
            format!(r#"{{"jsonrpc":"2.0","id":{eid},"error":{{"code":-1,"message":"no"}}}}"#);
        let out = client(&mut s, &answer);
        assert!(out.to_server.is_empty());
        let v: serde_json::Value = serde_json::from_slice(&out.to_client).unwrap();
        assert_eq!(v["id"], 7);
        assert_eq!(v["error"]["data"]["rule"], "ask-push");
        assert!(!text(&out.to_client).contains("mcpwall approve"));
    }

    #[test]
    fn a_cancelled_held_call_is_dropped_and_its_question_withdrawn() {
        let mut s = session(POLICY);
        let eid = held(&mut s);
        let out = client(
            &mut s,
            r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}"#,
        );
        assert!(out.to_server.is_empty(), "{}", text(&out.to_server));
        let v: serde_json::Value = serde_json::from_slice(&out.to_client).unwrap();
        assert_eq!(v["method"], "notifications/cancelled");
        assert_eq!(v["params"]["requestId"].to_string(), eid);
        assert!(s.next_deadline().is_none());
        // A late acceptance releases nothing.
        let answer = format!(
            r#"{{"jsonrpc":"2.0","id":{eid},"result":{{"action":"accept","content":{{"approve":true}}}}}}"#
        );
        let out = client(&mut s, &answer);
        assert!(out.to_server.is_empty());
    }

    #[test]
    fn unanswered_calls_time_out_and_the_server_is_told_nothing() {
        let mut s = session(POLICY);
        held(&mut s);
        let deadline = s.next_deadline().unwrap();
        let mut out = Outbox::default();
        s.expire(deadline - Duration::from_millis(1), &mut out);
        assert!(out.to_client.is_empty());
        s.expire(Instant::now() + Duration::from_secs(6), &mut out);
        assert!(out.to_server.is_empty());
        assert!(text(&out.to_client).contains("no approval within 5 s"));
        assert!(s.next_deadline().is_none());
    }

    #[test]
    fn without_elicitation_the_call_is_offered_and_decided_by_its_digest() {
        let mut s = session(POLICY);
        let out = client(&mut s, PUSH);
        assert!(out.to_server.is_empty() && out.to_client.is_empty());
        let [offer] = &out.approvals[..] else {
            panic!("{:?}", out.approvals)
        };
        assert_eq!(offer.arguments, r#"{"cmd":"git push"}"#);
        assert_eq!(offer.rule, "ask-push");
        let mut out = Outbox::default();
        // A decision for another call (another digest) does not apply.
        assert!(!s.decide_approval(&offer.code, "0000", true, &mut out));
        assert!(s.decide_approval(&offer.code, &offer.digest, true, &mut out));
        assert_eq!(text(&out.to_server), format!("{PUSH}\n"));
        assert_eq!(out.withdrawn, vec![offer.code.clone()]);
    }

    #[test]
    fn a_remembered_approval_covers_only_the_exact_number_the_approver_saw() {
        let policy = "version: 1\nsettings:\n  ask_timeout_seconds: 5\nrules:\n  - name: ask-pay\n    match:\n      tool: pay\n    action: ask\n    remember: session\n";
        let call = |id: u32, amount: &str| {
            format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"pay","arguments":{{"amount":{amount}}}}}}}"#
            )
        };
        let mut s = session(policy);
        let first = call(1, "1e20");
        let out = client(&mut s, &first);
        let [offer] = &out.approvals[..] else {
            panic!("{:?}", out.approvals)
        };
        // The approver sees the integer the server will read, not a float's rendering.
        assert_eq!(offer.arguments, r#"{"amount":100000000000000000000}"#);
        let mut out = Outbox::default();
        assert!(s.decide_approval(&offer.code, &offer.digest, true, &mut out));
        assert_eq!(text(&out.to_server), format!("{first}\n"));
        // The same value spelled out is the approved call ...
        let same = call(2, "100000000000000000000");
        let out = client(&mut s, &same);
        assert_eq!(text(&out.to_server), format!("{same}\n"));
        // ... one more is not, nor is a value a float would round to it.
        for (id, amount) in (3..).zip(["100000000000000000001", "100000000000000000000.5", "-0"]) {
            let out = client(&mut s, &call(id, amount));
            assert!(out.to_server.is_empty(), "{amount} ran unasked");
            assert_eq!(out.approvals.len(), 1, "{amount}");
        }
    }

    #[test]
    fn secrets_in_the_arguments_are_masked_for_the_approver() {
        let mut s = session(POLICY);
        let token = format!("ghp_{}", "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8");
        let line = PUSH.replace(
            "git push",
            &format!("git push https://{token}@github.com/x"),
        );
        let out = client(&mut s, &line);
        let offer = &out.approvals[0];
        assert!(!offer.arguments.contains(&token), "{}", offer.arguments);
        assert!(offer.arguments.contains("REDACTED"), "{}", offer.arguments);
    }

    #[test]
    fn a_server_request_cannot_use_mcpwalls_question_ids() {
        let mut s = session(POLICY);
        let line = r#"{"jsonrpc":"2.0","id":"mcpwall-ask-abc234","method":"roots/list"}"#;
        let mut out = Outbox::default();
        s.from_server(Line::Frame(line.as_bytes()), &mut out, false);
        assert!(out.to_client.is_empty());
        assert!(text(&out.to_server).contains("mcpwall:reserved_id"));
    }

    #[test]
    fn an_asked_member_of_a_batch_refuses_the_batch() {
        let mut s = session(POLICY);
        let batch = format!("[{PUSH}]");
        let out = client(&mut s, &batch);
        assert!(out.to_server.is_empty());
        assert!(text(&out.to_client).contains("batch cannot wait"));
        assert!(s.next_deadline().is_none());
    }

    #[test]
    fn the_server_exiting_answers_held_calls() {
        let mut s = session(POLICY);
        held(&mut s);
        let mut out = Outbox::default();
        s.server_gone("exit code 0", &mut out);
        // `initialize` (id 0, in flight) and the held call (id 7) are both answered.
        let ids: Vec<serde_json::Value> = text(&out.to_client)
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["id"].clone())
            .collect();
        assert_eq!(ids, vec![serde_json::json!(0), serde_json::json!(7)]);
        assert!(s.next_deadline().is_none());
    }
}
