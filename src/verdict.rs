//! What the engine decides about a message.

use std::ops::Range;

/// Index of a rule in [`crate::program::Program`]'s inbound or outbound rule table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RuleId(pub u32);

/// Why an inbound message was decided the way it was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// An allow rule matched.
    AllowedBy(RuleId),
    /// A deny rule matched.
    DeniedBy(RuleId),
    /// No rule matched; `default_action` decided (only for methods it judges).
    Default { allow: bool },
    /// No rule matched and `default_action` does not judge this method (protocol plumbing).
    Plumbing,
}

/// The verdict on one inbound message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    pub decision: Decision,
}

impl Verdict {
    pub fn is_allowed(&self) -> bool {
        match self.decision {
            Decision::AllowedBy(_) | Decision::Plumbing => true,
            Decision::DeniedBy(_) => false,
            Decision::Default { allow } => allow,
        }
    }

    pub fn rule(&self) -> Option<RuleId> {
        match self.decision {
            Decision::AllowedBy(r) | Decision::DeniedBy(r) => Some(r),
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
