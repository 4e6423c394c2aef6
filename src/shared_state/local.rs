//! The shared-state contract in one process's memory: what a replica counts on while it
//! has lost Redis and `on_loss: local_only` allows it, and the model the Redis store is
//! tested against. Bounded: past [`MAX_KEYS`] keys, the expired ones are dropped first,
//! then the oldest.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::{Lost, Scope, SharedState, Tripped, Window, scoped_key};

/// Keys of each kind kept before the expired ones are swept.
pub const MAX_KEYS: usize = 65_536;

/// In-memory shared state (one process).
#[derive(Debug, Default)]
pub struct Local {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    /// Sliding logs: rate-limit windows and violation windows, by key.
    logs: HashMap<String, VecDeque<Instant>>,
    /// Suspensions and revocations, by key: when each ends.
    until: HashMap<String, Instant>,
    /// Pin records, by key: the record and when it ends.
    records: HashMap<String, (String, Instant)>,
}

impl Inner {
    fn sweep(&mut self, now: Instant, longest: Duration) {
        if self.logs.len() >= MAX_KEYS {
            self.logs
                .retain(|_, log| log.back().is_some_and(|t| now.duration_since(*t) < longest));
        }
        if self.until.len() >= MAX_KEYS {
            self.until.retain(|_, end| *end > now);
        }
        // Still full of live entries (a flood of distinct names): forget one at random
        // rather than grow; the store is a fallback, never the only record.
        if self.logs.len() >= MAX_KEYS
            && let Some(k) = self.logs.keys().next().cloned()
        {
            self.logs.remove(&k);
        }
        if self.until.len() >= MAX_KEYS
            && let Some(k) = self.until.keys().next().cloned()
        {
            self.until.remove(&k);
        }
    }

    /// Drop the events of `key` at least `window` old; the log's length afterwards.
    fn trim(&mut self, key: &str, now: Instant, window: Duration) -> usize {
        let Some(log) = self.logs.get_mut(key) else {
            return 0;
        };
        while log
            .front()
            .is_some_and(|t| now.duration_since(*t) >= window)
        {
            log.pop_front();
        }
        log.len()
    }

    fn live(&mut self, key: &str, now: Instant) -> bool {
        match self.until.get(key) {
            Some(end) if *end > now => true,
            Some(_) => {
                self.until.remove(key);
                false
            }
            None => false,
        }
    }
}

const PREFIX: &str = "local:";

impl Local {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn revocation_key(token_hash: &[u8; 32]) -> String {
    format!("{PREFIX}revoked:{}", super::hex(token_hash))
}

impl SharedState for Local {
    fn admit_call(&self, scope: Scope<'_>, tool: &str, limit: Window) -> Result<bool, Lost> {
        if limit.max == 0 {
            return Ok(false);
        }
        let key = scoped_key(PREFIX, "rate", scope, Some(tool));
        let now = Instant::now();
        let mut inner = self.lock();
        if inner.trim(&key, now, limit.window) >= limit.max as usize {
            return Ok(false);
        }
        inner.sweep(now, limit.window);
        inner.logs.entry(key).or_default().push_back(now);
        Ok(true)
    }

    fn record_violation(
        &self,
        scope: Scope<'_>,
        limit: Window,
        suspension: Duration,
    ) -> Result<Tripped, Lost> {
        let suspended = scoped_key(PREFIX, "suspended", scope, None);
        let key = scoped_key(PREFIX, "violations", scope, None);
        let now = Instant::now();
        let mut inner = self.lock();
        if inner.live(&suspended, now) {
            return Ok(Tripped::Already);
        }
        let count = inner.trim(&key, now, limit.window) + 1;
        if count >= limit.max.max(1) as usize {
            inner.logs.remove(&key);
            inner.sweep(now, limit.window);
            inner.until.insert(suspended, now + suspension);
            return Ok(Tripped::Now);
        }
        inner.sweep(now, limit.window);
        inner.logs.entry(key).or_default().push_back(now);
        Ok(Tripped::No)
    }

    fn is_suspended(&self, scope: Scope<'_>) -> Result<bool, Lost> {
        let key = scoped_key(PREFIX, "suspended", scope, None);
        Ok(self.lock().live(&key, Instant::now()))
    }

    fn revoke(&self, token_hash: &[u8; 32], ttl: Duration) -> Result<(), Lost> {
        let now = Instant::now();
        let mut inner = self.lock();
        inner.sweep(now, Duration::ZERO);
        inner.until.insert(revocation_key(token_hash), now + ttl);
        Ok(())
    }

    fn is_revoked(&self, token_hash: &[u8; 32], ttl: Duration) -> Result<bool, Lost> {
        let key = revocation_key(token_hash);
        let now = Instant::now();
        let mut inner = self.lock();
        if !inner.live(&key, now) {
            return Ok(false);
        }
        inner.until.insert(key, now + ttl);
        Ok(true)
    }

    fn pins(&self, server_key: &str) -> Result<Option<String>, Lost> {
        let now = Instant::now();
        Ok(self
            .lock()
            .records
            .get(server_key)
            .filter(|(_, end)| *end > now)
            .map(|(r, _)| r.clone()))
    }

    fn store_pins(&self, server_key: &str, record: &str, ttl: Duration) -> Result<(), Lost> {
        let now = Instant::now();
        let mut inner = self.lock();
        if inner.records.len() >= MAX_KEYS {
            inner.records.retain(|_, (_, end)| *end > now);
        }
        if inner.records.len() < MAX_KEYS || inner.records.contains_key(server_key) {
            inner
                .records
                .insert(server_key.to_string(), (record.to_string(), now + ttl));
        }
        Ok(())
    }
}

/// The contract every [`SharedState`] keeps, run against [`Local`] here and against a
/// real Redis in `tests/fleet.rs`.
#[cfg(any(test, feature = "test-support"))]
pub mod contract {
    use super::*;

    fn scope(identity: &str) -> Scope<'_> {
        Scope {
            server: "fs",
            identity: Some(identity),
        }
    }

    /// `unique` keeps runs against one Redis apart.
    pub fn check(state: &dyn SharedState, unique: &str) {
        let minute = Duration::from_secs(60);
        let (a, b) = (format!("a{unique}"), format!("b{unique}"));
        let limit = Window {
            max: 2,
            window: minute,
        };
        // Rate: two calls per window per (identity, tool); refusals are not counted.
        assert!(state.admit_call(scope(&a), "t", limit).unwrap());
        assert!(state.admit_call(scope(&a), "t", limit).unwrap());
        assert!(!state.admit_call(scope(&a), "t", limit).unwrap());
        assert!(state.admit_call(scope(&a), "other", limit).unwrap());
        assert!(state.admit_call(scope(&b), "t", limit).unwrap());
        let none = Window {
            max: 0,
            window: minute,
        };
        assert!(!state.admit_call(scope(&b), "z", none).unwrap());
        // A short window frees up.
        let short = Window {
            max: 1,
            window: Duration::from_millis(150),
        };
        assert!(state.admit_call(scope(&a), "s", short).unwrap());
        assert!(!state.admit_call(scope(&a), "s", short).unwrap());
        std::thread::sleep(Duration::from_millis(300));
        assert!(state.admit_call(scope(&a), "s", short).unwrap());

        // Breaker: the third violation within the window suspends; only that identity.
        let three = Window {
            max: 3,
            window: minute,
        };
        let hour = Duration::from_secs(3600);
        assert!(!state.is_suspended(scope(&a)).unwrap());
        assert_eq!(
            state.record_violation(scope(&a), three, hour).unwrap(),
            Tripped::No
        );
        assert_eq!(
            state.record_violation(scope(&a), three, hour).unwrap(),
            Tripped::No
        );
        assert_eq!(
            state.record_violation(scope(&a), three, hour).unwrap(),
            Tripped::Now
        );
        assert_eq!(
            state.record_violation(scope(&a), three, hour).unwrap(),
            Tripped::Already
        );
        assert!(state.is_suspended(scope(&a)).unwrap());
        assert!(!state.is_suspended(scope(&b)).unwrap());
        // A suspension ends with its TTL.
        let one = Window {
            max: 1,
            window: minute,
        };
        let brief = Duration::from_millis(150);
        assert_eq!(
            state.record_violation(scope(&b), one, brief).unwrap(),
            Tripped::Now
        );
        assert!(state.is_suspended(scope(&b)).unwrap());
        std::thread::sleep(Duration::from_millis(300));
        assert!(!state.is_suspended(scope(&b)).unwrap());

        // Revocations.
        let mut token = [0u8; 32];
        token[..unique.len().min(32)].copy_from_slice(&unique.as_bytes()[..unique.len().min(32)]);
        let mut other = token;
        other[31] ^= 1;
        assert!(!state.is_revoked(&token, hour).unwrap());
        state.revoke(&token, hour).unwrap();
        assert!(state.is_revoked(&token, hour).unwrap());
        assert!(!state.is_revoked(&other, hour).unwrap());

        // Pin records.
        let server = format!("fs-{unique}");
        assert_eq!(state.pins(&server).unwrap(), None);
        state.store_pins(&server, "{\"v\":1}", hour).unwrap();
        state.store_pins(&server, "{\"v\":2}", hour).unwrap();
        assert_eq!(state.pins(&server).unwrap().as_deref(), Some("{\"v\":2}"));
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn local_state_keeps_the_contract() {
        super::contract::check(&super::Local::default(), "1");
    }
}
