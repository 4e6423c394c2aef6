//! The session's side of the [`Guard`]: which requests and responses it looks at, and
//! how its decisions and events become audit events.

use std::sync::Arc;
use std::time::Instant;

use super::event::{AuditEvent, Direction, RuleRef, Verdict};
use super::ids::IdText;
use crate::frame::{Frame, Message, MessageKind, TokenKind};

use crate::guard::{Denial, DenialKind, Guard, GuardEvent};

/// Rule name on refusals of withheld tools and prompts.
pub const RULE_WITHHELD: &str = "mcpwall:tool_withheld";
/// Rule name on refusals in a suspended session.
pub const RULE_SUSPENDED: &str = "mcpwall:session_suspended";

/// Whether answers to `method` go through [`Guard::on_server_message`]: one comparison
/// chain on the method of the request answered, so other responses cost nothing more.
#[inline]
pub fn inspects_answers_to(method: Option<&str>) -> bool {
    matches!(
        method,
        Some(
            "tools/list"
                | "prompts/list"
                | "resources/list"
                | "resources/templates/list"
                | "initialize"
        )
    )
}

/// The guard's refusal of a client request, if any, with the rule name to report.
#[inline]
pub fn check_request(
    guard: &Guard,
    frame: &Frame<'_>,
    msg: &Message,
) -> Option<(Denial, &'static str)> {
    if msg.kind != MessageKind::Request {
        return None;
    }
    let denial = match frame.method(msg)? {
        "tools/call" => guard.check_request("tools/call", frame.tool(msg)),
        "prompts/get" => guard.check_request("prompts/get", param(frame, msg, "name")),
        "resources/read" => guard.check_request("resources/read", param(frame, msg, "uri")),
        _ => None,
    }?;
    let rule = match denial.kind {
        DenialKind::Withheld => RULE_WITHHELD,
        DenialKind::Suspended => RULE_SUSPENDED,
        DenialKind::SharedStateLost => super::RULE_SHARED_STATE,
        DenialKind::SharedStateFull => crate::shared_state::RULE_FULL,
    };
    Some((denial, rule))
}

/// `params.<name>` of a request (the prompt of `prompts/get`, the URI of `resources/read`).
fn param<'a>(frame: &Frame<'a>, msg: &Message, name: &str) -> Option<&'a str> {
    let tokens = frame.tokens();
    for k in msg.args.clone() {
        let t = &tokens[k];
        if t.kind == TokenKind::Key && t.arg == k as u32 && frame.text(t.text) == name {
            let v = tokens.get(k + 1)?;
            return (v.kind == TokenKind::String).then(|| frame.text(v.text));
        }
    }
    None
}

/// Report a refusal or block to the circuit breaker. Returns the audit event and a
/// one-line notice for stderr when this one suspends the session.
pub fn record_violation(
    guard: &Guard,
    what: impl FnOnce() -> String,
) -> Option<(AuditEvent, String)> {
    if !guard.has_breaker() || guard.is_suspended() {
        return None;
    }
    let event = guard.record_violation(Instant::now(), &what())?;
    let notice = event.summary();
    Some((to_audit(&event, None, None), notice))
}

/// One guard event as an audit event: withheld entries are `block`s, everything else
/// (pins recorded, additions, drift in warn mode) is `log_only`.
pub fn to_audit(event: &GuardEvent, id: Option<&[u8]>, method: Option<&Arc<str>>) -> AuditEvent {
    let (direction, action) = match event {
        GuardEvent::Suspended { .. } => (Direction::Inbound, Verdict::Deny),
        _ if event.withheld() => (Direction::Outbound, Verdict::Block),
        _ => (Direction::Outbound, Verdict::LogOnly),
    };
    let mut e = AuditEvent::new(direction, action);
    e.id = id.map(IdText::new);
    e.method = method.cloned();
    e.tool = event.entry().map(Arc::from);
    e.rule = Some(RuleRef::Builtin(event.rule()));
    e.message = Some(event.summary().into());
    e
}
