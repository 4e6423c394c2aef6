//! The one shutdown path. Whatever starts it (client EOF, a signal to mcpwall, the
//! server closing its stdout, the client going away), the server's stdin is closed, and
//! if the server is still running after a grace period it gets SIGTERM, then after a
//! second grace period SIGKILL. Starting it again (a second signal) changes nothing.

use std::time::{Duration, Instant};

/// Grace periods. The defaults suit real servers (`npx` start-up and clean exit take
/// well under a second); tests shorten them with hidden flags.
#[derive(Debug, Clone, Copy)]
pub struct Grace {
    /// After closing the server's stdin, before SIGTERM.
    pub before_term: Duration,
    /// After SIGTERM, before SIGKILL.
    pub before_kill: Duration,
}

impl Default for Grace {
    fn default() -> Self {
        Grace {
            before_term: Duration::from_secs(3),
            before_kill: Duration::from_secs(2),
        }
    }
}

/// Where the shutdown sequence is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    Running,
    /// stdin closed; SIGTERM at the deadline.
    Closed,
    /// SIGTERM sent; SIGKILL at the deadline.
    Terminated,
    /// SIGKILL sent; only waiting.
    Killed,
}

/// The shutdown state machine. Idempotent: [`Shutdown::begin`] only acts once.
#[derive(Debug)]
pub struct Shutdown {
    grace: Grace,
    step: Step,
    deadline: Option<Instant>,
}

impl Shutdown {
    pub fn new(grace: Grace) -> Shutdown {
        Shutdown {
            grace,
            step: Step::Running,
            deadline: None,
        }
    }

    /// Start shutting down (the caller closes the server's stdin). Returns `true` the
    /// first time only.
    pub fn begin(&mut self) -> bool {
        if self.step != Step::Running {
            return false;
        }
        self.step = Step::Closed;
        self.deadline = Some(Instant::now() + self.grace.before_term);
        true
    }

    pub fn is_shutting_down(&self) -> bool {
        self.step != Step::Running
    }

    /// When the next escalation is due, if one is.
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// The deadline passed: the signal to send now, if any.
    pub fn escalate(&mut self) -> Option<i32> {
        match self.step {
            Step::Closed => {
                self.step = Step::Terminated;
                self.deadline = Some(Instant::now() + self.grace.before_kill);
                Some(crate::platform::SIGTERM)
            }
            Step::Terminated => {
                self.step = Step::Killed;
                self.deadline = None;
                Some(crate::platform::SIGKILL)
            }
            Step::Running | Step::Killed => {
                self.deadline = None;
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escalates_term_then_kill_once() {
        let mut s = Shutdown::new(Grace::default());
        assert!(s.deadline().is_none());
        assert!(s.begin());
        assert!(!s.begin());
        assert!(s.deadline().is_some());
        assert_eq!(s.escalate(), Some(crate::platform::SIGTERM));
        assert_eq!(s.escalate(), Some(crate::platform::SIGKILL));
        assert_eq!(s.escalate(), None);
        assert!(s.deadline().is_none());
    }
}
