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
//! the replica counts on [`Local`] instead until Redis answers again (not for held calls,
//! which only other replicas would need). Both transitions are told once on stderr.
//!
//! A revocation is recorded and published on `mcpwall:<name>:revocations` in one
//! transaction; each replica listens on that channel from a thread of its own
//! ([`SharedState::listen_for_revocations`]), with a PING every [`LISTEN_PING`] of quiet so
//! a connection that died silently is noticed, and connects again a second after a
//! failure.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::config::policy::{OnLoss, SharedStateSettings};

use super::{Heard, Local, Lost, Scope, SharedState, Tripped, Unavailable, Window, scoped_key};

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

/// Offer a held call: drop the offers that ended, refuse a new one past the bound, else
/// record it in the index (scored by when it ends) and under its code.
/// KEYS[1]: the index, KEYS[2]: the offer. ARGV: code, offer, ttl (ms), bound.
const OFFER: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) and redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[4]) then
  return 0
end
redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])
redis.call('SET', KEYS[2], ARGV[2], 'PX', ttl)
if redis.call('PTTL', KEYS[1]) < ttl then redis.call('PEXPIRE', KEYS[1], ttl) end
return 1
";

/// Every offer that has not ended. KEYS[1]: the index. ARGV: the offers' key prefix.
const OFFERS: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local out = {}
for _, code in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], now, '+inf')) do
  local offer = redis.call('GET', ARGV[1] .. code)
  if offer then table.insert(out, offer) end
end
return out
";

/// Record a decision about an offered call, kept as long as the offer.
/// KEYS[1]: the offer, KEYS[2]: the decision. ARGV: the decision.
const DECIDE: &str = r"
local ttl = redis.call('PTTL', KEYS[1])
if ttl <= 0 then return 0 end
redis.call('SET', KEYS[2], ARGV[1], 'PX', ttl)
return 1
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
    offer: redis::Script,
    offers: redis::Script,
    decide: redis::Script,
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
            offer: redis::Script::new(OFFER),
            offers: redis::Script::new(OFFERS),
            decide: redis::Script::new(DECIDE),
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
        local: impl FnOnce(&Local) -> Result<T, Unavailable>,
    ) -> Result<T, Unavailable> {
        match self.call(op) {
            Ok(v) => Ok(v),
            Err(lost) => match self.on_loss {
                OnLoss::FailClosed => Err(lost.into()),
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

    /// The index of held calls offered, and the key prefix of each offer and decision.
    fn held_keys(&self) -> (String, String, String) {
        (
            format!("{}held", self.prefix),
            format!("{}held:", self.prefix),
            format!("{}decision:", self.prefix),
        )
    }

    /// The channel revocations are published on.
    fn revocation_channel(&self) -> String {
        format!("{}revocations", self.prefix)
    }
}

/// How long the listener waits for a message before it checks, with a PING, that its
/// connection still stands (a Redis gone without closing it is noticed within this).
const LISTEN_PING: Duration = Duration::from_secs(5);

/// Listen on `channel` until `tell` says to stop, connecting again after each failure
/// (one second apart); `listening` is true while subscribed.
fn listen(
    client: &redis::Client,
    channel: &str,
    timeout: Duration,
    listening: &std::sync::atomic::AtomicBool,
    tell: &(dyn Fn(Heard) -> bool + Send),
) {
    // Told on stderr once per loss, and once when listening again.
    let mut deaf = false;
    loop {
        // `Ok`: told to stop.
        let heard = (|| -> redis::RedisResult<()> {
            let mut c = client.get_connection_with_timeout(timeout)?;
            c.set_write_timeout(Some(timeout))?;
            c.set_read_timeout(Some(timeout))?;
            let mut pubsub = c.as_pubsub();
            pubsub.subscribe(channel)?;
            pubsub.set_read_timeout(Some(LISTEN_PING))?;
            listening.store(true, Ordering::Release);
            if std::mem::replace(&mut deaf, false) {
                eprintln!("mcpwall: hearing the other replicas' revocations again");
            }
            if !tell(Heard::Listening) {
                return Ok(());
            }
            loop {
                match pubsub.get_message() {
                    Ok(message) => {
                        let hash = parse_hash(message.get_payload_bytes());
                        if let Some(hash) = hash
                            && !tell(Heard::Revoked(hash))
                        {
                            return Ok(());
                        }
                    }
                    Err(e) if e.is_timeout() => {
                        pubsub.set_read_timeout(Some(timeout))?;
                        pubsub.ping::<String>()?;
                        pubsub.set_read_timeout(Some(LISTEN_PING))?;
                    }
                    Err(e) => return Err(e),
                }
            }
        })();
        listening.store(false, Ordering::Release);
        match heard {
            Ok(()) => return,
            Err(e) if !std::mem::replace(&mut deaf, true) => eprintln!(
                "mcpwall: not hearing the other replicas' revocations ({e}): open streams are \
                 checked against the shared state at each message and every 250 ms meanwhile"
            ),
            Err(_) => {}
        }
        std::thread::sleep(RETRY_AFTER);
    }
}

/// A token hash as published: 64 lowercase hex digits.
fn parse_hash(text: &[u8]) -> Option<[u8; 32]> {
    if text.len() != 64 {
        return None;
    }
    let mut hash = [0u8; 32];
    for (i, pair) in text.chunks(2).enumerate() {
        let digit = |b: u8| match b {
            b'0'..=b'9' => Some(b - b'0'),
            b'a'..=b'f' => Some(b - b'a' + 10),
            _ => None,
        };
        hash[i] = (digit(pair[0])? << 4) | digit(pair[1])?;
    }
    Some(hash)
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX).max(1)
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
}

impl SharedState for Redis {
    fn admit_call(&self, scope: Scope<'_>, tool: &str, limit: Window) -> Result<bool, Unavailable> {
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
    ) -> Result<Tripped, Unavailable> {
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

    fn is_suspended(&self, scope: Scope<'_>) -> Result<bool, Unavailable> {
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

    fn revoke(&self, token_hash: &[u8; 32], ttl: Duration) -> Result<(), Unavailable> {
        let key = self.revocation_key(token_hash);
        let channel = self.revocation_channel();
        // Also locally: with `local_only`, a revocation made while Redis is away still
        // holds on this replica.
        let _ = self.local.revoke(token_hash, ttl);
        // Recorded and published at once (MULTI): a replica that hears it finds it
        // recorded, and one that was not listening finds it by asking.
        self.shared(
            |c| {
                redis::pipe()
                    .atomic()
                    .cmd("SET")
                    .arg(&key)
                    .arg("1")
                    .arg("PX")
                    .arg(millis(ttl))
                    .ignore()
                    .cmd("PUBLISH")
                    .arg(&channel)
                    .arg(super::hex(token_hash))
                    .ignore()
                    .query::<()>(c)
            },
            |_| Ok(()),
        )
    }

    // Held calls are only ever in Redis: a replica that lost it offers its held calls to
    // its own machine's `mcpwall approve` only (no local fallback to answer from).

    fn offer_held(&self, code: &str, request: &str, ttl: Duration) -> Result<(), Unavailable> {
        let code = super::key_part(code);
        let (index, offers, _) = self.held_keys();
        let offered = self.call(|c| {
            self.offer
                .key(&index)
                .key(format!("{offers}{code}"))
                .arg(&code)
                .arg(request)
                .arg(millis(ttl))
                .arg(super::MAX_HELD)
                .invoke::<i64>(c)
        })?;
        if offered == 1 {
            Ok(())
        } else {
            Err(super::Full {
                table: super::Table::HeldCalls,
                cap: super::MAX_HELD,
            }
            .into())
        }
    }

    fn withdraw_held(&self, code: &str) -> Result<(), Unavailable> {
        let code = super::key_part(code);
        let (index, offers, decisions) = self.held_keys();
        self.call(|c| {
            redis::pipe()
                .atomic()
                .cmd("ZREM")
                .arg(&index)
                .arg(&code)
                .ignore()
                .cmd("DEL")
                .arg(format!("{offers}{code}"))
                .arg(format!("{decisions}{code}"))
                .ignore()
                .query::<()>(c)
        })
        .map_err(Into::into)
    }

    fn held(&self) -> Result<Vec<String>, Unavailable> {
        let (index, offers, _) = self.held_keys();
        self.call(|c| {
            self.offers
                .key(&index)
                .arg(&offers)
                .invoke::<Vec<String>>(c)
        })
        .map_err(Into::into)
    }

    fn decide_held(&self, code: &str, decision: &str) -> Result<bool, Unavailable> {
        let code = super::key_part(code);
        let (_, offers, decisions) = self.held_keys();
        self.call(|c| {
            self.decide
                .key(format!("{offers}{code}"))
                .key(format!("{decisions}{code}"))
                .arg(decision)
                .invoke::<i64>(c)
                .map(|n| n == 1)
        })
        .map_err(Into::into)
    }

    fn take_decision(&self, code: &str) -> Result<Option<String>, Unavailable> {
        let code = super::key_part(code);
        let (_, _, decisions) = self.held_keys();
        self.call(|c| {
            redis::cmd("GETDEL")
                .arg(format!("{decisions}{code}"))
                .query::<Option<String>>(c)
        })
        .map_err(Into::into)
    }

    fn listen_for_revocations(
        &self,
        tell: Box<dyn Fn(Heard) -> bool + Send>,
    ) -> Option<Arc<std::sync::atomic::AtomicBool>> {
        let listening = Arc::new(AtomicBool::new(false));
        let flag = listening.clone();
        let client = self.client.clone();
        let channel = self.revocation_channel();
        let timeout = self.timeout;
        let spawned = std::thread::Builder::new()
            .name("mcpwall-revocations".into())
            .spawn(move || listen(&client, &channel, timeout, &flag, &*tell));
        if let Err(e) = spawned {
            eprintln!(
                "mcpwall: cannot start listening for revocations ({e}): every message of an \
                 open stream is checked against the shared state instead"
            );
        }
        Some(listening)
    }

    fn is_revoked(&self, token_hash: &[u8; 32], ttl: Duration) -> Result<bool, Unavailable> {
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

    fn pins(&self, server_key: &str) -> Result<Option<String>, Unavailable> {
        let key = self.pins_key(server_key);
        self.shared(
            |c| redis::cmd("GET").arg(&key).query::<Option<String>>(c),
            |l| l.pins(server_key),
        )
    }

    fn store_pins(&self, server_key: &str, record: &str, ttl: Duration) -> Result<(), Unavailable> {
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
        let Err(Unavailable::Lost(lost)) = store.admit_call(scope, "t", limit) else {
            panic!("admitted without Redis");
        };
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
