//! The words for what happens to a message, in one place.
//!
//! | type | who says it | values |
//! | --- | --- | --- |
//! | [`RuleAction`] | a rule in the policy | allow, deny, redact, log_only |
//! | [`Decision`] | the program, on an inbound message | which rule (or default) decided |
//! | [`Outcome`] | the program, on an outbound message | pass, redact these spans, block |
//! | [`Verdict`] | the session, on every message | what was done with it: what the audit log and `check` report |

use std::ops::Range;

/// Index of a rule in [`crate::program::Program`]'s inbound or outbound rule table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RuleId(pub u32);

/// What a rule asks for when it matches (`action:` in the YAML). Inbound rules only
/// allow or deny; outbound rules may also redact or log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleAction {
    Allow,
    Deny,
    /// Inbound only: hold the call for a human's approval.
    Ask,
    Redact,
    /// Records an audit event; evaluation continues (like iptables' LOG target).
    LogOnly,
}

impl RuleAction {
    pub fn as_str(self) -> &'static str {
        match self {
            RuleAction::Allow => "allow",
            RuleAction::Deny => "deny",
            RuleAction::Ask => "ask",
            RuleAction::Redact => "redact",
            RuleAction::LogOnly => "log_only",
        }
    }
}

/// How the inbound rules decided a message ([`crate::program::Program::evaluate_request`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// An allow rule matched.
    AllowedBy(RuleId),
    /// A deny rule matched.
    DeniedBy(RuleId),
    /// An `ask` rule matched: the call waits for a human's approval.
    AskedBy(RuleId),
    /// No rule matched and `default_action: ask` judges this method.
    DefaultAsk,
    /// No rule matched; `default_action` decided (only for methods it judges).
    Default { allow: bool },
    /// No rule matched and `default_action` does not judge this method (protocol plumbing).
    Plumbing,
    /// No rule denied, but a path-shaped argument holds a NUL: a server may open only
    /// the part before it, which is what the rules judged, so the message is refused.
    NulInPath,
    /// No rule denied, but a path argument names a file by a spelling only the file
    /// system can expand (a Windows 8.3 short name, `SSH~1`), and it could not be: what
    /// it opens is unknown, so the message is refused.
    UnreadablePath,
}

impl Decision {
    pub fn is_allowed(&self) -> bool {
        match self {
            Decision::AllowedBy(_) | Decision::Plumbing => true,
            // Not (yet) allowed: a transport that does not hold calls refuses them.
            Decision::DeniedBy(_)
            | Decision::NulInPath
            | Decision::UnreadablePath
            | Decision::AskedBy(_)
            | Decision::DefaultAsk => false,
            Decision::Default { allow } => *allow,
        }
    }

    pub fn rule(&self) -> Option<RuleId> {
        match self {
            Decision::AllowedBy(r) | Decision::DeniedBy(r) | Decision::AskedBy(r) => Some(*r),
            _ => None,
        }
    }
}

/// One span of a server message to replace with the redaction marker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redaction {
    /// Raw byte range in the frame (inside one JSON string token).
    pub raw: Range<usize>,
    /// The outbound rule that asked for it.
    pub rule: RuleId,
    /// What was found, as an index into [`crate::program::Program::label`]: a secret
    /// detector's name, or the rule's name for content matches.
    pub label: u32,
}

/// The outcome of scanning one server message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome<'s> {
    /// Forward the original bytes.
    Pass,
    /// Forward with these spans replaced (sorted, non-overlapping).
    Redact {
        rule: RuleId,
        redactions: &'s [Redaction],
    },
    /// Replace the message with a block notice.
    Block { rule: RuleId },
}

/// What the session did with a message: the `action` of its audit event and the
/// `verdict` `mcpwall check` reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Inbound message forwarded.
    Allow,
    /// Inbound message refused (answered with an error, or dropped if a notification).
    Deny,
    /// Server message forwarded unchanged.
    Pass,
    /// Server message forwarded with secrets replaced.
    Redact,
    /// Server message replaced by a block notice (or dropped).
    Block,
    /// A `log_only` rule matched; evaluation went on.
    LogOnly,
    /// A line dropped: not a JSON-RPC message, oversize, or an answer to no request.
    Drop,
    /// mcpwall answered a request itself because the server could not (it exited).
    Error,
    /// A call held for a human's approval (an `ask` rule or `default_action: ask`).
    Ask,
    /// A held call the human approved: forwarded as it came.
    Approved,
    /// A held call the human declined (or the client answered with an error).
    Declined,
    /// A held call nobody answered within `ask_timeout_seconds`: refused.
    TimedOut,
}

impl Verdict {
    /// Every verdict, so that a reader of the log (`mcpwall log --action`) accepts each
    /// `action` the log can hold.
    pub const ALL: [Verdict; 12] = [
        Verdict::Allow,
        Verdict::Deny,
        Verdict::Pass,
        Verdict::Redact,
        Verdict::Block,
        Verdict::LogOnly,
        Verdict::Drop,
        Verdict::Error,
        Verdict::Ask,
        Verdict::Approved,
        Verdict::Declined,
        Verdict::TimedOut,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Allow => "allow",
            Verdict::Deny => "deny",
            Verdict::Pass => "pass",
            Verdict::Redact => "redact",
            Verdict::Block => "block",
            Verdict::LogOnly => "log_only",
            Verdict::Drop => "drop",
            Verdict::Error => "error",
            Verdict::Ask => "ask",
            Verdict::Approved => "approved",
            Verdict::Declined => "declined",
            Verdict::TimedOut => "timed_out",
        }
    }
}
