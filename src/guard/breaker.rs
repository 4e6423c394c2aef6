//! Circuit breaker: an agent that keeps hitting the policy is stopped for the session.
//!
//! Every denial or blocked response in a session is a violation. When
//! `max_violations` of them fall within `window` of each other, the session is
//! suspended: every further `tools/call` is denied until the client restarts the
//! server (a new session). Pure: the caller passes the time, so tests control it.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// Breaker limits (from `settings.circuit_breaker`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BreakerLimits {
    pub max_violations: u32,
    pub window: Duration,
}

/// One denial or block, as remembered for the suspension record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub at: Instant,
    /// What happened, e.g. `tools/call read_file denied by rule no-ssh-keys`.
    pub what: String,
}

/// The moment a session was suspended, and the violations that caused it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Suspension {
    pub at: Instant,
    pub triggering: Vec<Violation>,
}

/// Sliding-window violation counter for one session.
#[derive(Debug, Clone)]
pub struct CircuitBreaker {
    limits: BreakerLimits,
    recent: VecDeque<Violation>,
    suspended: Option<Suspension>,
}

impl CircuitBreaker {
    pub fn new(limits: BreakerLimits) -> CircuitBreaker {
        CircuitBreaker {
            limits,
            recent: VecDeque::new(),
            suspended: None,
        }
    }

    /// Record a violation at `now`. Returns the suspension when this violation trips
    /// the breaker (once per session); later violations return `None`.
    pub fn record(&mut self, now: Instant, what: impl Into<String>) -> Option<&Suspension> {
        if self.suspended.is_some() {
            return None;
        }
        while let Some(oldest) = self.recent.front() {
            if now.saturating_duration_since(oldest.at) >= self.limits.window {
                self.recent.pop_front();
            } else {
                break;
            }
        }
        self.recent.push_back(Violation {
            at: now,
            what: what.into(),
        });
        if self.recent.len() >= self.limits.max_violations.max(1) as usize {
            self.suspended = Some(Suspension {
                at: now,
                triggering: self.recent.drain(..).collect(),
            });
            return self.suspended.as_ref();
        }
        None
    }

    pub fn is_suspended(&self) -> bool {
        self.suspended.is_some()
    }

    pub fn suspension(&self) -> Option<&Suspension> {
        self.suspended.as_ref()
    }

    pub fn limits(&self) -> BreakerLimits {
        self.limits
    }

    /// The same record (recent violations, suspension) under `limits` from now on.
    pub fn with_limits(mut self, limits: BreakerLimits) -> CircuitBreaker {
        self.limits = limits;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn breaker(n: u32, secs: u64) -> CircuitBreaker {
        CircuitBreaker::new(BreakerLimits {
            max_violations: n,
            window: Duration::from_secs(secs),
        })
    }

    #[test]
    fn trips_on_the_nth_violation_within_the_window() {
        let t0 = Instant::now();
        let mut b = breaker(3, 60);
        assert!(b.record(t0, "one").is_none());
        assert!(b.record(t0 + Duration::from_secs(10), "two").is_none());
        assert!(!b.is_suspended());
        let s = b.record(t0 + Duration::from_secs(20), "three").unwrap();
        let whats: Vec<_> = s.triggering.iter().map(|v| v.what.as_str()).collect();
        assert_eq!(whats, ["one", "two", "three"]);
        assert!(b.is_suspended());
        // Tripping is reported once.
        assert!(b.record(t0 + Duration::from_secs(21), "four").is_none());
        assert!(b.is_suspended());
    }

    #[test]
    fn violations_outside_the_window_do_not_count() {
        let t0 = Instant::now();
        let mut b = breaker(3, 60);
        b.record(t0, "old");
        b.record(t0 + Duration::from_secs(30), "a");
        // `old` is exactly one window older than this one: it has expired.
        assert!(b.record(t0 + Duration::from_secs(60), "b").is_none());
        let s = b.record(t0 + Duration::from_secs(61), "c").unwrap();
        assert_eq!(s.triggering.len(), 3);
        assert_eq!(s.triggering[0].what, "a");
    }

    #[test]
    fn a_limit_of_one_trips_immediately() {
        let mut b = breaker(1, 1);
        assert!(b.record(Instant::now(), "x").is_some());
        let mut zero = breaker(0, 1);
        assert!(zero.record(Instant::now(), "x").is_some());
    }
}
