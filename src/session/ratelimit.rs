//! `settings.rate_limit`: at most `max_calls` calls of each tool per sliding window.
//!
//! A sliding log per tool (the start times of the calls admitted within the window),
//! so a burst at the end of one window and the start of the next cannot double the
//! rate, which a fixed window would allow. Refused calls are not counted.
//!
//! A gateway with `settings.shared_state` counts in the shared store instead
//! ([`RateLimiter::share`]), so every replica spends one window per identity.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::config::policy::RateLimit;
use crate::shared_state::{Scope, SharedState, Unavailable, Window};

/// Tools tracked before the oldest idle ones are forgotten; bounds memory when a
/// client invents tool names.
const MAX_TOOLS: usize = 4096;

#[derive(Debug)]
pub struct RateLimiter {
    max_calls: usize,
    window: Duration,
    calls: HashMap<Box<str>, VecDeque<Instant>>,
    /// Counted in the replicas' shared state instead of `calls`.
    shared: Option<SharedCount>,
}

/// Where a shared limiter counts: one identity's calls on one server.
#[derive(Debug, Clone)]
pub struct SharedCount {
    pub state: Arc<dyn SharedState>,
    pub server: Arc<str>,
    pub identity: Option<Arc<str>>,
}

/// Whether a call may go on.
#[derive(Debug, PartialEq, Eq)]
pub enum Admission {
    Admitted,
    /// The window is full.
    Refused,
    /// The shared state could not be consulted (lost, or too full to count a new
    /// window): refused (fail closed).
    Unavailable(Unavailable),
}

impl RateLimiter {
    pub fn new(limit: RateLimit) -> RateLimiter {
        RateLimiter {
            max_calls: limit.max_calls as usize,
            window: Duration::from_secs(limit.window_seconds.max(1)),
            calls: HashMap::new(),
            shared: None,
        }
    }

    /// Count in `shared` from now on (the gateway's replicas share one window per identity).
    pub fn share(&mut self, shared: SharedCount) {
        self.shared = Some(shared);
    }

    /// Whether this limiter counts in a shared state (each call a round trip to it).
    pub fn is_shared(&self) -> bool {
        self.shared.is_some()
    }

    /// [`Self::admit`], in the shared state when there is one.
    pub fn admit_call(&mut self, tool: &str, now: Instant) -> Admission {
        let Some(shared) = &self.shared else {
            return if self.admit(tool, now) {
                Admission::Admitted
            } else {
                Admission::Refused
            };
        };
        let scope = Scope {
            server: &shared.server,
            identity: shared.identity.as_deref(),
        };
        let limit = Window {
            max: u32::try_from(self.max_calls).unwrap_or(u32::MAX),
            window: self.window,
        };
        match shared.state.admit_call(scope, tool, limit) {
            Ok(true) => Admission::Admitted,
            Ok(false) => Admission::Refused,
            Err(why) => Admission::Unavailable(why),
        }
    }

    /// Admit a call of `tool` at `now`, or refuse it when the tool's window is full.
    pub fn admit(&mut self, tool: &str, now: Instant) -> bool {
        if self.max_calls == 0 {
            return false;
        }
        if !self.calls.contains_key(tool) && self.calls.len() >= MAX_TOOLS {
            let window = self.window;
            self.calls
                .retain(|_, log| log.back().is_some_and(|t| now.duration_since(*t) < window));
        }
        let log = match self.calls.get_mut(tool) {
            Some(log) => log,
            None => self.calls.entry(tool.into()).or_default(),
        };
        while log
            .front()
            .is_some_and(|t| now.duration_since(*t) >= self.window)
        {
            log.pop_front();
        }
        if log.len() >= self.max_calls {
            return false;
        }
        log.push_back(now);
        true
    }

    /// The message a refused call is answered with.
    pub fn message(&self, tool: &str) -> String {
        format!(
            "rate limit exceeded for tool {tool:?}: at most {} calls per {} s (settings.rate_limit)",
            self.max_calls,
            self.window.as_secs()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sliding_window_per_tool() {
        let mut r = RateLimiter::new(RateLimit {
            max_calls: 2,
            window_seconds: 10,
        });
        let t0 = Instant::now();
        assert!(r.admit("a", t0));
        assert!(r.admit("a", t0 + Duration::from_secs(1)));
        assert!(!r.admit("a", t0 + Duration::from_secs(2)));
        // Other tools have their own budget.
        assert!(r.admit("b", t0 + Duration::from_secs(2)));
        // Refused calls did not count: once the first call leaves the window, one more fits.
        assert!(r.admit("a", t0 + Duration::from_secs(10)));
        assert!(!r.admit("a", t0 + Duration::from_secs(10)));
        assert!(r.admit("a", t0 + Duration::from_secs(11)));
    }
}
