//! The compiled, immutable policy: stage three of three.
//!
//! Precedence (inbound), resolved after one pass of every engine over the message:
//! 1. the lowest-numbered rule (YAML order) whose predicates all hold decides;
//! 2. otherwise `default_action` decides for methods that act on the world
//!    (`tools/call`, `resources/read`, `prompts/get`, `completion/complete`);
//! 3. otherwise (protocol plumbing) the message is allowed.
//!
//! Outbound: the lowest-numbered terminal rule (`allow`, `deny`, `redact`) whose
//! predicates hold decides; `log_only` rules before it are recorded in the scratch.

use crate::config::policy::{Policy, Settings};
use crate::frame::{Frame, Message};
use crate::verdict::{Outcome, RuleId, Verdict};

/// Context for judging a server message: what it answers.
#[derive(Debug, Clone, Copy, Default)]
pub struct CallInfo<'a> {
    /// Method of the request this message answers (or the message's own method).
    pub method: Option<&'a str>,
    /// Tool of the `tools/call` it answers.
    pub tool: Option<&'a str>,
    /// The server's name.
    pub server: &'a str,
}

/// A compiled rule's identity, for messages, audit and `explain-policy`.
#[derive(Debug, Clone)]
pub struct RuleInfo {
    pub name: String,
    pub message: Option<String>,
    /// `file:line:column` of the rule.
    pub location: String,
}

/// The compiled policy. Immutable, `Send + Sync`; share it as `Arc<Program>`.
#[derive(Debug)]
pub struct Program {
    _private: (),
}

/// Per-pump mutable state for evaluation, so the hot path does not allocate.
#[derive(Debug)]
pub struct Scratch {
    _private: (),
}

impl Program {
    /// Compile a validated policy.
    pub fn compile(policy: &Policy) -> Result<Program, crate::config::PolicyError> {
        let _ = policy;
        todo!("compile")
    }

    pub fn scratch(&self) -> Scratch {
        todo!("scratch")
    }

    pub fn settings(&self) -> &Settings {
        todo!("settings")
    }

    /// Judge one inbound message of `frame`.
    pub fn evaluate_request(
        &self,
        frame: &Frame<'_>,
        msg: &Message,
        scratch: &mut Scratch,
    ) -> Verdict {
        let _ = (frame, msg, scratch);
        todo!("evaluate_request")
    }

    /// Judge one server message of `frame`.
    pub fn scan_response<'s>(
        &self,
        frame: &Frame<'_>,
        msg: &Message,
        call: &CallInfo<'_>,
        scratch: &'s mut Scratch,
    ) -> Outcome<'s> {
        let _ = (frame, msg, call);
        let _ = scratch;
        todo!("scan_response")
    }

    pub fn rule(&self, id: RuleId) -> &RuleInfo {
        let _ = id;
        todo!("rule")
    }

    pub fn outbound_rule(&self, id: RuleId) -> &RuleInfo {
        let _ = id;
        todo!("outbound_rule")
    }

    /// Name behind a [`crate::verdict::Redaction::label`].
    pub fn label(&self, label: u32) -> &str {
        let _ = label;
        todo!("label")
    }
}
