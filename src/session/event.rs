//! What the session says about each message: audit events, built on the frame path
//! without formatting strings (names are resolved by the writer, [`crate::audit`]).

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use super::ids::IdText;
use crate::verdict::RuleId;
pub use crate::verdict::Verdict;

/// Which way the judged message was travelling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    Inbound,
    Outbound,
}

/// Which rule decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleRef {
    Inbound(RuleId),
    Outbound(RuleId),
    /// A decision mcpwall makes itself, e.g. `mcpwall:rate_limit`.
    Builtin(&'static str),
}

/// Resolves rule ids and redaction labels to names when events are written, so the
/// frame path never formats strings. Implemented by [`crate::program::Program`].
pub trait Names: Send + Sync {
    /// Name and message of a rule.
    fn rule(&self, rule: RuleRef) -> (&str, Option<&str>);
    /// Name behind a redaction label.
    fn label(&self, label: u32) -> &str;
}

/// One decision. Cheap to build on the frame path: names are resolved by the writer.
#[derive(Debug, Clone)]
pub struct AuditEvent {
    pub ts: SystemTime,
    pub direction: Direction,
    pub id: Option<IdText>,
    pub method: Option<Arc<str>>,
    pub tool: Option<Arc<str>>,
    pub action: Verdict,
    pub rule: Option<RuleRef>,
    /// Overrides the rule's own message (e.g. rate limit, malformed-frame reason).
    pub message: Option<Box<str>>,
    /// `(label, count)` pairs.
    pub redactions: Vec<(u32, u32)>,
    pub duration: Option<Duration>,
    /// Already-redacted JSON text of the arguments (`log_args: full` only).
    pub args: Option<Box<str>>,
    /// On a denied request: what it asked for, masked ([`super::preview::denied_summary`]).
    pub request: Option<Box<str>>,
    /// For a call held for approval: how it was asked or decided (`elicitation`,
    /// `cli`, `remembered`, `timeout`, `withdrawn`; see [`super::How`]).
    pub how: Option<&'static str>,
    /// Who sent the request, for transports that authenticate their clients (the HTTP
    /// gateway: the bearer token's name). `None` on stdio, where the client is the
    /// user who started mcpwall.
    pub identity: Option<Arc<str>>,
    /// The transport the message travelled on, when it is not stdio (`"http"`).
    pub transport: Option<&'static str>,
    /// The server that judged it, when one listener serves several (`mcpwall serve` with
    /// a `servers:` list); `None`: the log's own server name.
    pub server: Option<Arc<str>>,
    /// The audit `session` of the conversation it belongs to, when one process serves
    /// many (`mcpwall serve`: one per HTTP session or socket); `None`: the log's own (one
    /// per proxy run).
    pub session: Option<Arc<str>>,
}

impl AuditEvent {
    pub fn new(direction: Direction, action: Verdict) -> AuditEvent {
        AuditEvent {
            ts: SystemTime::now(),
            direction,
            id: None,
            method: None,
            tool: None,
            action,
            rule: None,
            message: None,
            redactions: Vec::new(),
            duration: None,
            args: None,
            request: None,
            how: None,
            identity: None,
            transport: None,
            server: None,
            session: None,
        }
    }
}
