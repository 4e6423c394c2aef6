//! The shared state in Redis: one store for every replica of a gateway.
//!
//! Each update is one Lua script (run with EVALSHA), so it is atomic however many replicas
//! call at once, and it reads the clock of the Redis server, not the replica's, so
//! replicas whose clocks disagree still count one window. Connections come from a small
//! pool, each call bounded by `timeout_ms` for connecting, writing and reading. After a
//! failure no new connection is tried for [`RETRY_AFTER`], so a Redis that is gone costs
//! each call nothing while it is gone.
//!
//! Losing Redis (an I/O error, a timeout, an error reply) fails closed: the call gets
//! [`Lost`], and the caller refuses what it was asked to admit. With `on_loss: local_only`
//! the replica counts on [`Local`] instead until Redis answers again. Both transitions are
//! told once on stderr.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::config::policy::{OnLoss, SharedStateSettings};

use super::{Local, Lost, Scope, SharedState, Tripped, Window, scoped_key};

/// How long after a failure calls fail at once instead of connecting again.
pub const RETRY_AFTER: Duration = Duration::from_secs(1);

/// Idle connections kept for reuse; more are opened when more calls run at once, and
/// closed after use.
const POOL: usize = 8;

/// Admit one call: trim the window, refuse when full, else record it.
/// KEYS[1]: the window. ARGV: window (µs), max, a unique member suffix.
const ADMIT: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local window = tonumber(ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then return 0 end
redis.call('ZADD', KEYS[1], now, now .. ':' .. ARGV[3])
redis.call('PEXPIRE', KEYS[1], math.ceil(window / 1000))
return 1
";

/// Record one violation: 2 when suspended already, 1 when this one suspends, else 0.
/// KEYS[1]: the violations, KEYS[2]: the suspension. ARGV: window (µs), max, a unique
/// member suffix, suspension (ms).
const VIOLATION: &str = r"
if redis.call('EXISTS', KEYS[2]) == 1 then return 2 end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local window = tonumber(ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
if redis.call('ZCARD', KEYS[1]) + 1 >= tonumber(ARGV[2]) then
  redis.call('DEL', KEYS[1])
  redis.call('SET', KEYS[2], '1', 'PX', ARGV[4])
  return 1
end
redis.call('ZADD', KEYS[1], now, now .. ':' .. ARGV[3])
redis.call('PEXPIRE', KEYS[1], math.ceil(window / 1000))
return 0
";

/// The shared state in one Redis.
pub struct Redis {
    client: redis::Client,
    /// The address as it may be shown: without user or password.
    shown: String,
    /// `mcpwall:<name>:`.
    prefix: String,
    timeout: Duration,
    on_loss: OnLoss,
    idle: Mutex<Vec<redis::Connection>>,
    /// No connection is tried before this, after a failure.
    retry_at: Mutex<Option<Instant>>,
    /// Redis is unreachable now (told on stderr when it changes).
    lost: AtomicBool,
    local: Local,
    admit: redis::Script,
    violation: redis::Script,
    /// Makes the members this replica adds to a window unique among replicas.
    nonce: String,
    counter: AtomicU64,
}

impl std::fmt::Debug for Redis {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Redis")
            .field("at", &self.shown)
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

/// Why a store cannot be set up from the settings.
#[derive(Debug, thiserror::Error)]
#[error("settings.shared_state.redis ({shown}): {why}")]
pub struct SetupError {
    pub shown: String,
    pub why: String,
}

/// `url` without its user and password, for messages.
pub fn shown(url: &str) -> String {
    match url.split_once("://") {
        Some((scheme, rest)) => {
            let host_end = rest.find('/').unwrap_or(rest.len());
            match rest[..host_end].rfind('@') {
                Some(at) => format!("{scheme}://{}", &rest[at + 1..]),
                None => url.to_string(),
            }
        }
        None => url.to_string(),
    }
}

impl Redis {
    /// The store the settings name. Connects lazily: a Redis that is down at start is
    /// treated as one lost later (refused calls, or local state with `local_only`).
    pub fn new(settings: &SharedStateSettings) -> Result<Redis, SetupError> {
        let shown = shown(&settings.redis);
        let client = redis::Client::open(settings.redis.as_str()).map_err(|e| SetupError {
            shown: shown.clone(),
            why: e.to_string(),
        })?;
        let mut nonce = [0u8; 8];
        getrandom::fill(&mut nonce).map_err(|e| SetupError {
            shown: shown.clone(),
            why: format!("the operating system's random generator failed: {e}"),
        })?;
        Ok(Redis {
            client,
            shown,
            prefix: format!("mcpwall:{}:", settings.name),
            timeout: Duration::from_millis(u64::from(settings.timeout_ms)),
            on_loss: settings.on_loss,
            idle: Mutex::new(Vec::new()),
            retry_at: Mutex::new(None),
            lost: AtomicBool::new(false),
            local: Local::default(),
            admit: redis::Script::new(ADMIT),
            violation: redis::Script::new(VIOLATION),
            nonce: super::hex(&nonce),
            counter: AtomicU64::new(0),
        })
    }

    /// Where the state lives, as it may be shown.
    pub fn shown(&self) -> &str {
        &self.shown
    }

    /// Connect now and say whether Redis answers (for the start-up line).
    pub fn ping(&self) -> Result<(), Lost> {
        self.call(|c| redis::cmd("PING").query::<String>(c).map(drop))
    }

    fn member(&self) -> String {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        format!("{}.{n}", self.nonce)
    }

    fn connection(&self) -> Result<redis::Connection, String> {
        if let Some(c) = self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop() {
            return Ok(c);
        }
        let retry_at = *self.retry_at.lock().unwrap_or_else(|e| e.into_inner());
        if retry_at.is_some_and(|t| Instant::now() < t) {
            return Err("it failed less than a second ago".to_string());
        }
        let c = self
            .client
            .get_connection_with_timeout(self.timeout)
            .map_err(|e| e.to_string())?;
        c.set_read_timeout(Some(self.timeout))
            .and_then(|()| c.set_write_timeout(Some(self.timeout)))
            .map_err(|e| e.to_string())?;
        Ok(c)
    }

    /// Run `op` on a connection; `Lost` on any failure.
    fn call<T>(
        &self,
        op: impl FnOnce(&mut redis::Connection) -> redis::RedisResult<T>,
    ) -> Result<T, Lost> {
        let result = self.connection().and_then(|mut c| match op(&mut c) {
            Ok(v) => {
                let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
                if idle.len() < POOL {
                    idle.push(c);
                }
                Ok(v)
            }
            // The connection may be mid-reply: never reused.
            Err(e) => Err(e.to_string()),
        });
        match result {
            Ok(v) => {
                if self.lost.swap(false, Ordering::AcqRel) {
                    eprintln!(
                        "mcpwall: shared state at {} answers again: limits, breakers and \
                         revocations are shared by every replica again",
                        self.shown
                    );
                }
                Ok(v)
            }
            Err(why) => {
                *self.retry_at.lock().unwrap_or_else(|e| e.into_inner()) =
                    Some(Instant::now() + RETRY_AFTER);
                self.idle.lock().unwrap_or_else(|e| e.into_inner()).clear();
                if !self.lost.swap(true, Ordering::AcqRel) {
                    let then = match self.on_loss {
                        OnLoss::FailClosed => {
                            "calls that need it are refused until it is back (fail closed)"
                        }
                        OnLoss::LocalOnly => {
                            "this replica counts on its own (local state only, \
                             settings.shared_state.on_loss: local_only) until it is back"
                        }
                    };
                    eprintln!(
                        "mcpwall: shared state at {} is unreachable ({why}): {then}",
                        self.shown
                    );
                }
                Err(Lost {
                    store: self.shown.clone(),
                    why,
                })
            }
        }
    }

    /// `call`, or the local state when Redis is lost and the settings allow it.
    fn shared<T>(
        &self,
        op: impl FnOnce(&mut redis::Connection) -> redis::RedisResult<T>,
        local: impl FnOnce(&Local) -> Result<T, Lost>,
    ) -> Result<T, Lost> {
        match self.call(op) {
            Ok(v) => Ok(v),
            Err(lost) => match self.on_loss {
                OnLoss::FailClosed => Err(lost),
                OnLoss::LocalOnly => local(&self.local),
            },
        }
    }

    fn pins_key(&self, server_key: &str) -> String {
        format!("{}pins:{}", self.prefix, super::key_part(server_key))
    }

    fn revocation_key(&self, token_hash: &[u8; 32]) -> String {
        format!("{}revoked:{}", self.prefix, super::hex(token_hash))
    }
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX).max(1)
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
}

impl SharedState for Redis {
    fn admit_call(&self, scope: Scope<'_>, tool: &str, limit: Window) -> Result<bool, Lost> {
        if limit.max == 0 {
            return Ok(false);
        }
        let key = scoped_key(&self.prefix, "rate", scope, Some(tool));
        let member = self.member();
        self.shared(
            |c| {
                self.admit
                    .key(&key)
                    .arg(micros(limit.window))
                    .arg(limit.max)
                    .arg(&member)
                    .invoke::<i64>(c)
                    .map(|n| n == 1)
            },
            |l| l.admit_call(scope, tool, limit),
        )
    }

    fn record_violation(
        &self,
        scope: Scope<'_>,
        limit: Window,
        suspension: Duration,
    ) -> Result<Tripped, Lost> {
        let key = scoped_key(&self.prefix, "violations", scope, None);
        let suspended = scoped_key(&self.prefix, "suspended", scope, None);
        let member = self.member();
        self.shared(
            |c| {
                self.violation
                    .key(&key)
                    .key(&suspended)
                    .arg(micros(limit.window))
                    .arg(limit.max.max(1))
                    .arg(&member)
                    .arg(millis(suspension))
                    .invoke::<i64>(c)
                    .map(|n| match n {
                        2 => Tripped::Already,
                        1 => Tripped::Now,
                        _ => Tripped::No,
                    })
            },
            |l| l.record_violation(scope, limit, suspension),
        )
    }

    fn is_suspended(&self, scope: Scope<'_>) -> Result<bool, Lost> {
        let key = scoped_key(&self.prefix, "suspended", scope, None);
        self.shared(
            |c| {
                redis::cmd("EXISTS")
                    .arg(&key)
                    .query::<i64>(c)
                    .map(|n| n > 0)
            },
            |l| l.is_suspended(scope),
        )
    }

    fn revoke(&self, token_hash: &[u8; 32], ttl: Duration) -> Result<(), Lost> {
        let key = self.revocation_key(token_hash);
        // Also locally: with `local_only`, a revocation made while Redis is away still
        // holds on this replica.
        let _ = self.local.revoke(token_hash, ttl);
        self.shared(
            |c| {
                redis::cmd("SET")
                    .arg(&key)
                    .arg("1")
                    .arg("PX")
                    .arg(millis(ttl))
                    .query::<()>(c)
            },
            |_| Ok(()),
        )
    }

    fn is_revoked(&self, token_hash: &[u8; 32], ttl: Duration) -> Result<bool, Lost> {
        let key = self.revocation_key(token_hash);
        self.shared(
            |c| {
                redis::cmd("GETEX")
                    .arg(&key)
                    .arg("PX")
                    .arg(millis(ttl))
                    .query::<Option<String>>(c)
                    .map(|v| v.is_some())
            },
            |l| l.is_revoked(token_hash, ttl),
        )
    }

    fn pins(&self, server_key: &str) -> Result<Option<String>, Lost> {
        let key = self.pins_key(server_key);
        self.shared(
            |c| redis::cmd("GET").arg(&key).query::<Option<String>>(c),
            |l| l.pins(server_key),
        )
    }

    fn store_pins(&self, server_key: &str, record: &str, ttl: Duration) -> Result<(), Lost> {
        let key = self.pins_key(server_key);
        self.shared(
            |c| {
                redis::cmd("SET")
                    .arg(&key)
                    .arg(record)
                    .arg("PX")
                    .arg(millis(ttl))
                    .query::<()>(c)
            },
            |l| l.store_pins(server_key, record, ttl),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shown_addresses_carry_no_credentials() {
        let secret = ["hun", "ter2"].concat();
        let url = format!("redis://user:{secret}@10.0.0.5:6379/2");
        assert_eq!(shown(&url), "redis://10.0.0.5:6379/2");
        assert_eq!(shown("redis://127.0.0.1:6379"), "redis://127.0.0.1:6379");
    }

    fn settings(on_loss: OnLoss) -> SharedStateSettings {
        SharedStateSettings {
            // Port 1 on loopback: nothing listens there, so connecting fails at once.
            redis: "redis://127.0.0.1:1/0".to_string(),
            name: "t".to_string(),
            on_loss,
            ..SharedStateSettings::default()
        }
    }

    #[test]
    fn a_lost_redis_fails_closed_by_default() {
        let store = Redis::new(&settings(OnLoss::FailClosed)).unwrap();
        let scope = Scope {
            server: "fs",
            identity: Some("ci"),
        };
        let limit = Window {
            max: 5,
            window: Duration::from_secs(60),
        };
        let lost = store.admit_call(scope, "t", limit).unwrap_err();
        assert_eq!(lost.store, "redis://127.0.0.1:1/0");
        assert!(store.is_suspended(scope).is_err());
        assert!(store.is_revoked(&[0; 32], Duration::from_secs(1)).is_err());
    }

    #[test]
    fn local_only_counts_on_local_state_while_redis_is_lost() {
        let store = Redis::new(&settings(OnLoss::LocalOnly)).unwrap();
        super::super::local::contract::check(&store, "2");
    }
}
