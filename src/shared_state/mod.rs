//! What the replicas of one `mcpwall serve` gateway keep in common
//! (`settings.shared_state`): per-identity rate-limit windows, circuit-breaker
//! suspensions, token revocations (and a channel announcing them), tool pin records, and
//! the calls held for `mcpwall approve` offered to every replica's machine.
//!
//! Without the setting, nothing here is used: each process counts in its own memory, as a
//! single gateway always has. With it, every replica consults one Redis ([`redis`]) so
//! that a limit spent, a breaker tripped or a token revoked on one replica holds on all of
//! them at once. [`Local`] is the same contract in memory: what a replica falls back to
//! when Redis is lost and `on_loss: local_only` says it may, and the reference the Redis
//! store is tested against.
//!
//! The calls are synchronous (the session layer that makes them is); the gateway judges
//! the lines of a session that consults Redis off its I/O thread, so one identity's round
//! trip never holds up another's messages.
//!
//! # Keys
//! Every key starts with `mcpwall:<name>:` (`shared_state.name`, one per gateway), names
//! its server and identity by their names when they are short and plain
//! (`[A-Za-z0-9._-]{1,64}`) and by a digest otherwise, so a client cannot make a key long
//! or make two keys collide; and every key has a TTL, so nothing stays behind a fleet that
//! is gone.

use std::fmt;
use std::time::Duration;

pub mod local;
pub mod redis;

pub use local::Local;

/// Who is counted: one identity's calls on one server.
#[derive(Debug, Clone, Copy)]
pub struct Scope<'a> {
    pub server: &'a str,
    /// `None`: clients without a token (a gateway that issued none).
    pub identity: Option<&'a str>,
}

/// At most `max` events within any `window`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub max: u32,
    pub window: Duration,
}

/// What recording a violation did to the identity's breaker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tripped {
    /// Below the limit.
    No,
    /// This violation suspended the identity.
    Now,
    /// It was suspended already (by this replica or another).
    Already,
}

/// The shared state could not be consulted, and the setting says to fail closed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the gateway's shared state ({store}) is unreachable: {why}")]
pub struct Lost {
    /// Where the state lives, without credentials (`redis://127.0.0.1:6379/0`).
    pub store: String,
    pub why: String,
}

impl Lost {
    /// What a refused client is told: no address, no detail (those go to stderr and the
    /// audit log).
    pub const AGENT_MESSAGE: &'static str = "refused: the gateway cannot reach its shared \
        state, so it cannot apply its limits (fail closed); try again later";
}

/// What a bounded table of the in-memory state holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Table {
    /// Rate-limit windows, one per (server, identity, tool).
    RateWindows,
    /// Circuit breakers (recent violations and suspensions), one per (server, identity).
    Breakers,
    /// Token revocations, one per revoked token.
    Revocations,
    /// Pin records, one per server.
    PinRecords,
    /// Calls held for approval offered to every replica's `mcpwall approve`.
    HeldCalls,
}

impl fmt::Display for Table {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Table::RateWindows => "rate-limit windows",
            Table::Breakers => "circuit breakers",
            Table::Revocations => "token revocations",
            Table::PinRecords => "pin records",
            Table::HeldCalls => "calls held for approval",
        })
    }
}

/// The in-memory state holds as many live entries of one table as it may, and a new one
/// was asked for. Nothing live is ever dropped to make room (that could lift a suspension
/// or restart a window), so what needs the new entry is refused until entries expire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "this replica's in-memory shared state holds {cap} live {table}, its bound, so it cannot \
     track a new one (fail closed) until some expire"
)]
pub struct Full {
    pub table: Table,
    pub cap: usize,
}

impl Full {
    /// What a refused client is told and the audit log records: the bound, not who fills
    /// it.
    pub fn agent_message(&self) -> String {
        format!(
            "refused: the gateway tracks as many {} as it may hold ({}), so it cannot count \
             this call (fail closed); try again when older ones expire",
            self.table, self.cap
        )
    }
}

/// Why the shared state could not answer; the caller refuses what it was asked to admit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unavailable {
    #[error(transparent)]
    Lost(#[from] Lost),
    #[error(transparent)]
    Full(#[from] Full),
}

impl Unavailable {
    /// What a refused client is told (the audit log records the same).
    pub fn agent_message(&self) -> std::borrow::Cow<'static, str> {
        match self {
            Unavailable::Lost(_) => Lost::AGENT_MESSAGE.into(),
            Unavailable::Full(full) => full.agent_message().into(),
        }
    }
}

/// What a replica hears of the revocations the others make
/// ([`SharedState::listen_for_revocations`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Heard {
    /// A replica revoked the token whose SHA-256 this is.
    Revoked([u8; 32]),
    /// Listening (again): whatever was published while not listening was missed, so
    /// what is open must be checked once.
    Listening,
}

/// The rule a call refused because the in-memory state is [`Full`] is audited under (and
/// counted under in `/metrics`).
pub const RULE_FULL: &str = "mcpwall:shared_state_full";

/// The state replicas share. Every method is atomic across replicas, and fails with
/// [`Unavailable`] when the state cannot answer: the caller then refuses (fail closed).
pub trait SharedState: Send + Sync + fmt::Debug {
    /// Admit one call of `tool` in `scope` under `limit` (a sliding window, as
    /// `settings.rate_limit` counts), or refuse it when the window is full. A refused
    /// call is not counted.
    fn admit_call(&self, scope: Scope<'_>, tool: &str, limit: Window) -> Result<bool, Unavailable>;

    /// Record one violation in `scope`; `limit.max` violations within `limit.window`
    /// suspend the identity for `suspension` (every replica refuses its calls).
    fn record_violation(
        &self,
        scope: Scope<'_>,
        limit: Window,
        suspension: Duration,
    ) -> Result<Tripped, Unavailable>;

    /// Whether `scope` is suspended now.
    fn is_suspended(&self, scope: Scope<'_>) -> Result<bool, Unavailable>;

    /// Revoke the token whose SHA-256 is `token_hash` on every replica, for `ttl` after
    /// its last use (each refused use renews it).
    fn revoke(&self, token_hash: &[u8; 32], ttl: Duration) -> Result<(), Unavailable>;

    /// Whether the token whose SHA-256 is `token_hash` was revoked (renewing the
    /// revocation's TTL when it was).
    fn is_revoked(&self, token_hash: &[u8; 32], ttl: Duration) -> Result<bool, Unavailable>;

    /// The shared pin record of server `server_key` (the pin file's JSON), if any.
    fn pins(&self, server_key: &str) -> Result<Option<String>, Unavailable>;

    /// Replace the shared pin record of `server_key`, kept for `ttl` after this write.
    fn store_pins(&self, server_key: &str, record: &str, ttl: Duration) -> Result<(), Unavailable>;

    /// Offer the call held under `code` (`request`: what the approver is shown) to
    /// `mcpwall approve` on every replica's machine, for `ttl` (until the call times
    /// out). At most [`MAX_HELD`] calls are offered at once across the gateway.
    fn offer_held(&self, code: &str, request: &str, ttl: Duration) -> Result<(), Unavailable>;

    /// The call is no longer held: withdraw its offer and any decision about it.
    fn withdraw_held(&self, code: &str) -> Result<(), Unavailable>;

    /// Every call offered now (each as [`Self::offer_held`] was given it).
    fn held(&self) -> Result<Vec<String>, Unavailable>;

    /// Record the approver's `decision` about the call offered under `code`, for its
    /// holder to take; `false` when no call is offered under it (decided, withdrawn or
    /// timed out).
    fn decide_held(&self, code: &str, decision: &str) -> Result<bool, Unavailable>;

    /// The decision recorded about the call offered under `code`, taken (a second take
    /// finds none).
    fn take_decision(&self, code: &str) -> Result<Option<String>, Unavailable>;

    /// Hear the revocations the other replicas make as they make them: `tell` is called
    /// for each, from a thread of the store's own, until it returns `false`. The flag
    /// returned says whether the store is listening now (while it is not, a revocation
    /// can only be learnt by asking [`Self::is_revoked`]). `None`: there is no other
    /// replica to hear (the in-memory state).
    fn listen_for_revocations(
        &self,
        tell: Box<dyn Fn(Heard) -> bool + Send>,
    ) -> Option<std::sync::Arc<std::sync::atomic::AtomicBool>> {
        drop(tell);
        None
    }
}

/// Calls offered for approval across a gateway at once: as many as one session may hold.
pub const MAX_HELD: usize = 4096;

/// How long a shared pin record is kept after it was last written: a server no replica
/// has listed for this long is pinned afresh (on first use) when it comes back.
pub const PINS_TTL: Duration = Duration::from_secs(400 * 86_400);

/// The longest server or identity name used as it is in a key.
const MAX_PLAIN: usize = 64;

/// `name` as a key part: as it is when short and plain, else `~` and the hex of the first
/// 16 bytes of its SHA-256 (`~` is not a plain character, so the two never collide).
pub(crate) fn key_part(name: &str) -> String {
    let plain = !name.is_empty()
        && name.len() <= MAX_PLAIN
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if plain {
        return name.to_string();
    }
    use sha2::Digest;
    let digest = sha2::Sha256::digest(name.as_bytes());
    let mut s = String::with_capacity(33);
    s.push('~');
    s.push_str(&hex(&digest[..16]));
    s
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[usize::from(b >> 4)] as char);
        s.push(DIGITS[usize::from(b & 15)] as char);
    }
    s
}

/// The key of `what` (`rate`, `violations`, `suspended`) in `scope`, with `extra` (a
/// tool) when given. `*` stands for clients without an identity (not a plain character,
/// so no identity's name).
pub(crate) fn scoped_key(
    prefix: &str,
    what: &str,
    scope: Scope<'_>,
    extra: Option<&str>,
) -> String {
    let identity = scope.identity.map_or_else(|| "*".to_string(), key_part);
    let mut key = format!("{prefix}{what}:{}:{identity}", key_part(scope.server));
    if let Some(extra) = extra {
        key.push(':');
        key.push_str(&key_part(extra));
    }
    key
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_parts_are_bounded_and_cannot_collide() {
        assert_eq!(key_part("ci-bot.1"), "ci-bot.1");
        let long = "a".repeat(10_000);
        assert_eq!(key_part(&long).len(), 33);
        // A name with a separator is digested, so it cannot pose as two parts.
        let tricky = key_part("a:b");
        assert!(tricky.starts_with('~') && !tricky.contains(':'), "{tricky}");
        assert_ne!(key_part(""), "");
        let k = scoped_key(
            "mcpwall:gw:",
            "rate",
            Scope {
                server: "fs",
                identity: None,
            },
            Some("read_file"),
        );
        assert_eq!(k, "mcpwall:gw:rate:fs:*:read_file");
    }
}
