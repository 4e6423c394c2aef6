//! The shared-state contract in one process's memory: what a replica counts on while it
//! has lost Redis and `on_loss: local_only` allows it, and the model the Redis store is
//! tested against.
//!
//! Bounded, and fail closed at the bound: each table (rate-limit windows, breakers,
//! revocations, pin records) holds at most [`MAX_KEYS`] entries. A new one beyond that
//! first drops the expired ones; when every entry is live, the new one is refused with
//! [`Full`] (what needed it is refused, audited and told on stderr) rather than make room
//! by forgetting a live one, which could lift a suspension, restart a spent window or
//! honour a revoked token. A full table is swept at most once per expiry: until its
//! earliest entry can have expired, a refusal costs a length check.

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::{Full, Scope, SharedState, Table, Tripped, Unavailable, Window, scoped_key};

/// Entries of each table held at most.
pub const MAX_KEYS: usize = 65_536;

/// In-memory shared state (one process).
#[derive(Debug)]
pub struct Local {
    inner: Mutex<Inner>,
    /// Entries per table.
    cap: usize,
}

impl Default for Local {
    fn default() -> Local {
        Local::with_capacity(MAX_KEYS)
    }
}

#[derive(Debug, Default)]
struct Inner {
    /// Rate-limit windows, by key.
    rates: Bounded<String, Log>,
    /// Each scope's recent violations and suspension, by key.
    breakers: Bounded<String, Breaker>,
    /// Revoked tokens (their SHA-256): when each revocation ends.
    revoked: Bounded<[u8; 32], Instant>,
    /// Pin records, by key: the record and when it ends.
    records: Bounded<String, (String, Instant)>,
    /// Calls offered for approval, by code: what the approver is shown and when the
    /// offer ends.
    held: Bounded<String, (String, Instant)>,
    /// Decisions recorded about offered calls, by code (only of an offered call).
    decisions: HashMap<String, String>,
}

/// What a table holds: when it may be forgotten (`None`: now).
trait Expiring {
    fn expires(&self) -> Option<Instant>;
}

/// A sliding log of events within `window`.
#[derive(Debug)]
struct Log {
    window: Duration,
    events: VecDeque<Instant>,
}

impl Log {
    /// Drop the events at least `window` old; how many are left.
    fn trim(&mut self, now: Instant, window: Duration) -> usize {
        self.window = window;
        while self
            .events
            .front()
            .is_some_and(|t| now.duration_since(*t) >= window)
        {
            self.events.pop_front();
        }
        self.events.len()
    }
}

impl Expiring for Log {
    fn expires(&self) -> Option<Instant> {
        self.events.back().map(|t| *t + self.window)
    }
}

/// One scope's circuit breaker.
#[derive(Debug)]
struct Breaker {
    violations: Log,
    suspended_until: Option<Instant>,
}

impl Expiring for Breaker {
    fn expires(&self) -> Option<Instant> {
        self.violations.expires().max(self.suspended_until)
    }
}

impl Expiring for Instant {
    fn expires(&self) -> Option<Instant> {
        Some(*self)
    }
}

impl Expiring for (String, Instant) {
    fn expires(&self) -> Option<Instant> {
        Some(self.1)
    }
}

/// A map of at most `cap` entries that never drops a live one to make room.
#[derive(Debug)]
struct Bounded<K, V> {
    map: HashMap<K, V>,
    /// No entry expires before this: a full table is not swept again until then.
    swept_until: Option<Instant>,
    /// Told on stderr that the table is full (again once it had room).
    told: bool,
}

impl<K, V> Default for Bounded<K, V> {
    fn default() -> Self {
        Bounded {
            map: HashMap::new(),
            swept_until: None,
            told: false,
        }
    }
}

impl<K: Hash + Eq, V: Expiring> Bounded<K, V> {
    /// Whether `key` has (or may take) a place: `Err` when it is new and every one of
    /// `cap` places holds a live entry.
    fn room(&mut self, key: &K, now: Instant, cap: usize, table: Table) -> Result<(), Full> {
        if self.map.len() < cap || self.map.contains_key(key) {
            return Ok(());
        }
        if self.swept_until.is_none_or(|t| now >= t) {
            self.map
                .retain(|_, v| v.expires().is_some_and(|end| end > now));
            // Entries only ever expire later than they did when swept (a new event, a
            // renewal), so this stays a lower bound.
            self.swept_until = self.map.values().filter_map(Expiring::expires).min();
        }
        if self.map.len() < cap {
            self.told = false;
            return Ok(());
        }
        let full = Full { table, cap };
        if !std::mem::replace(&mut self.told, true) {
            eprintln!(
                "mcpwall: {full}; what needs a new one is refused and audited under \
                 {}",
                crate::shared_state::RULE_FULL
            );
        }
        Err(full)
    }
}

const PREFIX: &str = "local:";

impl Local {
    /// In-memory state of at most `cap` entries per table.
    pub fn with_capacity(cap: usize) -> Local {
        Local {
            inner: Mutex::new(Inner::default()),
            cap: cap.max(1),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl SharedState for Local {
    fn admit_call(&self, scope: Scope<'_>, tool: &str, limit: Window) -> Result<bool, Unavailable> {
        if limit.max == 0 {
            return Ok(false);
        }
        let key = scoped_key(PREFIX, "rate", scope, Some(tool));
        let now = Instant::now();
        let mut inner = self.lock();
        if let Some(log) = inner.rates.map.get_mut(&key) {
            if log.trim(now, limit.window) >= limit.max as usize {
                return Ok(false);
            }
            log.events.push_back(now);
            return Ok(true);
        }
        inner.rates.room(&key, now, self.cap, Table::RateWindows)?;
        inner.rates.map.insert(
            key,
            Log {
                window: limit.window,
                events: VecDeque::from([now]),
            },
        );
        Ok(true)
    }

    fn record_violation(
        &self,
        scope: Scope<'_>,
        limit: Window,
        suspension: Duration,
    ) -> Result<Tripped, Unavailable> {
        let key = scoped_key(PREFIX, "breaker", scope, None);
        let now = Instant::now();
        let mut inner = self.lock();
        inner.breakers.room(&key, now, self.cap, Table::Breakers)?;
        let breaker = inner.breakers.map.entry(key).or_insert_with(|| Breaker {
            violations: Log {
                window: limit.window,
                events: VecDeque::new(),
            },
            suspended_until: None,
        });
        if breaker.suspended_until.is_some_and(|end| end > now) {
            return Ok(Tripped::Already);
        }
        let count = breaker.violations.trim(now, limit.window) + 1;
        if count >= limit.max.max(1) as usize {
            breaker.violations.events.clear();
            breaker.suspended_until = Some(now + suspension);
            return Ok(Tripped::Now);
        }
        breaker.violations.events.push_back(now);
        Ok(Tripped::No)
    }

    fn is_suspended(&self, scope: Scope<'_>) -> Result<bool, Unavailable> {
        let key = scoped_key(PREFIX, "breaker", scope, None);
        let now = Instant::now();
        let mut inner = self.lock();
        if let Some(breaker) = inner.breakers.map.get(&key) {
            return Ok(breaker.suspended_until.is_some_and(|end| end > now));
        }
        // A scope the full table could not track: its next violation could not be
        // counted, so its calls are refused until there is room (fail closed).
        inner.breakers.room(&key, now, self.cap, Table::Breakers)?;
        Ok(false)
    }

    fn revoke(&self, token_hash: &[u8; 32], ttl: Duration) -> Result<(), Unavailable> {
        let now = Instant::now();
        let mut inner = self.lock();
        inner
            .revoked
            .room(token_hash, now, self.cap, Table::Revocations)?;
        inner.revoked.map.insert(*token_hash, now + ttl);
        Ok(())
    }

    fn is_revoked(&self, token_hash: &[u8; 32], ttl: Duration) -> Result<bool, Unavailable> {
        let now = Instant::now();
        let mut inner = self.lock();
        match inner.revoked.map.get_mut(token_hash) {
            Some(end) if *end > now => {
                *end = now + ttl;
                return Ok(true);
            }
            Some(_) => {
                inner.revoked.map.remove(token_hash);
            }
            None => {}
        }
        // While the table is full of live revocations, one more may have been refused:
        // an unknown token cannot be told apart from it (fail closed).
        inner
            .revoked
            .room(token_hash, now, self.cap, Table::Revocations)?;
        Ok(false)
    }

    fn pins(&self, server_key: &str) -> Result<Option<String>, Unavailable> {
        let now = Instant::now();
        Ok(self
            .lock()
            .records
            .map
            .get(server_key)
            .filter(|(_, end)| *end > now)
            .map(|(r, _)| r.clone()))
    }

    fn store_pins(&self, server_key: &str, record: &str, ttl: Duration) -> Result<(), Unavailable> {
        let now = Instant::now();
        let mut inner = self.lock();
        let key = server_key.to_string();
        inner.records.room(&key, now, self.cap, Table::PinRecords)?;
        inner
            .records
            .map
            .insert(key, (record.to_string(), now + ttl));
        Ok(())
    }

    fn offer_held(&self, code: &str, request: &str, ttl: Duration) -> Result<(), Unavailable> {
        let now = Instant::now();
        let mut inner = self.lock();
        let key = code.to_string();
        let cap = self.cap.min(super::MAX_HELD);
        inner.held.room(&key, now, cap, Table::HeldCalls)?;
        inner.held.map.insert(key, (request.to_string(), now + ttl));
        Ok(())
    }

    fn withdraw_held(&self, code: &str) -> Result<(), Unavailable> {
        let mut inner = self.lock();
        inner.held.map.remove(code);
        inner.decisions.remove(code);
        Ok(())
    }

    fn held(&self) -> Result<Vec<String>, Unavailable> {
        let now = Instant::now();
        Ok(self
            .lock()
            .held
            .map
            .values()
            .filter(|(_, end)| *end > now)
            .map(|(r, _)| r.clone())
            .collect())
    }

    fn decide_held(&self, code: &str, decision: &str) -> Result<bool, Unavailable> {
        let now = Instant::now();
        let mut inner = self.lock();
        if inner.held.map.get(code).is_none_or(|(_, end)| *end <= now) {
            return Ok(false);
        }
        inner
            .decisions
            .insert(code.to_string(), decision.to_string());
        Ok(true)
    }

    fn take_decision(&self, code: &str) -> Result<Option<String>, Unavailable> {
        Ok(self.lock().decisions.remove(code))
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

    /// The held-calls part of the contract (a store that lost Redis has no local fallback
    /// for it: there is no other replica to offer to).
    pub fn check_held(state: &dyn SharedState, unique: &str) {
        let minute = Duration::from_secs(60);
        // Calls held for approval: offered, decided once, taken once, withdrawn.
        let code = format!("c{unique}");
        let offer = format!("{{\"code\":\"{code}\"}}");
        assert!(
            !state.decide_held(&code, "yes").unwrap(),
            "decided unoffered"
        );
        state.offer_held(&code, &offer, minute).unwrap();
        assert!(state.held().unwrap().contains(&offer));
        assert_eq!(state.take_decision(&code).unwrap(), None);
        assert!(state.decide_held(&code, "yes").unwrap());
        assert_eq!(state.take_decision(&code).unwrap().as_deref(), Some("yes"));
        assert_eq!(state.take_decision(&code).unwrap(), None);
        state.withdraw_held(&code).unwrap();
        assert!(!state.held().unwrap().contains(&offer));
        assert!(!state.decide_held(&code, "yes").unwrap());
        // An offer ends with its time.
        let brief = format!("b{unique}");
        state
            .offer_held(&brief, "{}", Duration::from_millis(150))
            .unwrap();
        std::thread::sleep(Duration::from_millis(300));
        assert!(!state.decide_held(&brief, "yes").unwrap());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_state_keeps_the_contract() {
        super::contract::check(&super::Local::default(), "1");
        super::contract::check_held(&super::Local::default(), "1");
    }

    fn scope(identity: &str) -> Scope<'_> {
        Scope {
            server: "fs",
            identity: Some(identity),
        }
    }

    fn full(e: Unavailable, table: Table) {
        assert_eq!(
            e,
            Unavailable::Full(Full {
                table,
                cap: MAX_KEYS
            })
        );
    }

    #[test]
    fn a_flood_of_tools_is_refused_at_the_bound_and_spends_no_live_window() {
        let state = Local::default();
        let limit = Window {
            max: 1,
            window: Duration::from_secs(600),
        };
        for i in 0..MAX_KEYS {
            assert!(
                state
                    .admit_call(scope("ci"), &format!("t{i}"), limit)
                    .unwrap()
            );
        }
        // A new window cannot be opened: the call is refused, not counted elsewhere.
        full(
            state
                .admit_call(scope("ci"), "one-more", limit)
                .unwrap_err(),
            Table::RateWindows,
        );
        full(
            state.admit_call(scope("other"), "t0", limit).unwrap_err(),
            Table::RateWindows,
        );
        // Every spent window is still spent: none was forgotten to make room.
        for i in 0..MAX_KEYS {
            assert!(
                !state
                    .admit_call(scope("ci"), &format!("t{i}"), limit)
                    .unwrap(),
                "window t{i} was forgotten"
            );
        }
    }

    #[test]
    fn a_flood_of_identities_lifts_no_suspension_and_is_refused_at_the_bound() {
        let state = Local::default();
        let one = Window {
            max: 1,
            window: Duration::from_secs(600),
        };
        let day = Duration::from_secs(86_400);
        for i in 0..MAX_KEYS {
            let who = format!("id{i}");
            assert_eq!(
                state.record_violation(scope(&who), one, day).unwrap(),
                Tripped::Now
            );
        }
        // A new identity's violation cannot be counted, and its calls are refused while
        // its breaker cannot be tracked.
        full(
            state.record_violation(scope("new"), one, day).unwrap_err(),
            Table::Breakers,
        );
        full(
            state.is_suspended(scope("new")).unwrap_err(),
            Table::Breakers,
        );
        for i in 0..MAX_KEYS {
            assert!(
                state.is_suspended(scope(&format!("id{i}"))).unwrap(),
                "the suspension of id{i} was lifted"
            );
        }
    }

    #[test]
    fn a_full_table_takes_new_entries_once_old_ones_expire() {
        let state = Local::with_capacity(2);
        let brief = Window {
            max: 1,
            window: Duration::from_millis(100),
        };
        assert!(state.admit_call(scope("a"), "t", brief).unwrap());
        assert!(state.admit_call(scope("b"), "t", brief).unwrap());
        assert!(state.admit_call(scope("c"), "t", brief).is_err());
        std::thread::sleep(Duration::from_millis(150));
        assert!(state.admit_call(scope("c"), "t", brief).unwrap());
        // Revocations: a token the full table cannot tell from a refused revocation is
        // refused too.
        let hour = Duration::from_secs(3600);
        state.revoke(&[1; 32], hour).unwrap();
        state.revoke(&[2; 32], hour).unwrap();
        assert!(state.revoke(&[3; 32], hour).is_err());
        assert!(state.is_revoked(&[3; 32], hour).is_err());
        assert!(state.is_revoked(&[1; 32], hour).unwrap());
    }
}
