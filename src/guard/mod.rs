//! The tool-definition guard: least-privilege tool lists, pinned definitions (against
//! rug pulls), poisoned-description scanning and a per-session circuit breaker.
//!
//! The proxy owns one [`Guard`] per session (shared by both pumps as `Arc<Guard>`):
//! - every server message that answers `initialize`, `tools/list`, `prompts/list`,
//!   `resources/list` or `resources/templates/list` goes through
//!   [`Guard::on_server_message`], which may return rewritten bytes (withheld entries
//!   removed) and audit events;
//! - every `tools/call`, `prompts/get` and `resources/read` goes through
//!   [`Guard::check_request`] before
//!   the policy forwards it, so withheld tools stay unreachable and a suspended session
//!   stays suspended;
//! - every denial or blocked response is reported with [`Guard::record_violation`].
//!
//! Only list frames are parsed here; other messages cost one string comparison, and
//! `check_request` costs two atomic loads unless something is withheld or suspended.
//!
//! Order of judgement for one listed entry:
//! 1. a tool the policy denies unconditionally, or a resource whose `resources/read` it
//!    denies, is hidden (`hide_denied_tools`);
//! 2. a definition that differs from its pin is withheld (`pinning: enforce`);
//! 3. a definition judged poisoned is withheld (`poison_scan: enforce`), unless the
//!    user approved exactly this definition with `mcpwall pins approve`;
//! 4. anything else is forwarded as the server sent it, byte for byte.

pub mod breaker;
pub mod pins;
pub mod poison;
pub mod shared_pins;
pub mod toolfilter;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::Value;
use serde_json::value::RawValue;

use crate::config::policy::{PinningMode, PoisonScanMode, Policy, Settings};
use breaker::{BreakerLimits, CircuitBreaker};
use pins::{
    ApprovedBy, EntryKey, EntryKind, Observed, PinError, PinFile, PinStore, Pinned, ServerIdentity,
    Status,
};
use poison::Finding;
use toolfilter::{DenyIndex, FilterError, ListKind, ResultMessage};

/// The guard's settings, taken from the policy's [`Settings`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GuardConfig {
    pub hide_denied_tools: bool,
    pub pinning: PinningMode,
    pub poison_scan: PoisonScanMode,
    pub circuit_breaker: Option<BreakerLimits>,
}

impl GuardConfig {
    pub fn from_settings(settings: &Settings) -> GuardConfig {
        GuardConfig {
            hide_denied_tools: settings.hide_denied_tools,
            pinning: settings.pinning,
            poison_scan: settings.poison_scan,
            circuit_breaker: settings.circuit_breaker.map(|b| BreakerLimits {
                max_violations: b.max_violations,
                window: Duration::from_secs(b.window_seconds),
            }),
        }
    }
}

impl Default for GuardConfig {
    fn default() -> Self {
        GuardConfig::from_settings(&Settings::default())
    }
}

/// Why an entry is kept from the agent.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "reason", rename_all = "kebab-case")]
pub enum WithholdReason {
    /// The policy denies the tool whatever its arguments.
    DeniedByPolicy,
    /// The definition differs from the approved one.
    Changed { fields: Vec<String> },
    /// The entry was pinned but the server no longer lists it.
    Removed,
    /// The definition's text looks like prompt injection.
    Poisoned { findings: Vec<Finding> },
}

/// Something the audit log should record. Never contains secret bytes: evidence is a
/// short excerpt of server-supplied metadata.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum GuardEvent {
    /// First session of this server: its definitions were pinned.
    Pinned { server: String, entries: usize },
    /// An entry appeared after the server was first pinned (flagged, not withheld).
    Added { server: String, entry: String },
    /// An entry drifted from its pin.
    Drift {
        server: String,
        entry: String,
        change: &'static str,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        fields: Vec<String>,
        /// Whether it was withheld (`pinning: enforce`) or only reported (`warn`).
        withheld: bool,
    },
    /// Poison findings in an entry.
    Poisoned {
        server: String,
        entry: String,
        findings: Vec<Finding>,
        withheld: bool,
    },
    /// A tool hidden because the policy denies it unconditionally.
    Hidden { server: String, tool: String },
    /// A list result could not be inspected; it was replaced by an error.
    Unreadable {
        server: String,
        method: String,
        error: String,
    },
    /// The pin file could not be written; enforcement goes on in memory.
    PinWriteFailed { server: String, error: String },
    /// The circuit breaker tripped.
    Suspended {
        server: String,
        max_violations: u32,
        window_seconds: u64,
        /// The violations that tripped it, oldest first.
        triggering: Vec<String>,
    },
}

impl GuardEvent {
    /// The built-in rule name this event is audited under.
    pub fn rule(&self) -> &'static str {
        match self {
            GuardEvent::Pinned { .. } => "mcpwall:pinned",
            GuardEvent::Added { .. } => "mcpwall:tool_added",
            GuardEvent::Drift { .. } => "mcpwall:tool_drift",
            GuardEvent::Poisoned { .. } => "mcpwall:tool_poisoned",
            GuardEvent::Hidden { .. } => "mcpwall:tool_hidden",
            GuardEvent::Unreadable { .. } => "mcpwall:list_unreadable",
            GuardEvent::PinWriteFailed { .. } => "mcpwall:pin_write_failed",
            GuardEvent::Suspended { .. } => "mcpwall:circuit_breaker",
        }
    }

    /// Whether the agent was kept from something (an entry, a list, the session).
    pub fn withheld(&self) -> bool {
        match self {
            GuardEvent::Drift { withheld, .. } | GuardEvent::Poisoned { withheld, .. } => *withheld,
            GuardEvent::Hidden { .. }
            | GuardEvent::Unreadable { .. }
            | GuardEvent::Suspended { .. } => true,
            GuardEvent::Pinned { .. }
            | GuardEvent::Added { .. }
            | GuardEvent::PinWriteFailed { .. } => false,
        }
    }

    /// The tool (or `prompt:…`, `@instructions`) the event is about.
    pub fn entry(&self) -> Option<&str> {
        match self {
            GuardEvent::Added { entry, .. }
            | GuardEvent::Drift { entry, .. }
            | GuardEvent::Poisoned { entry, .. } => Some(entry),
            GuardEvent::Hidden { tool, .. } => Some(tool),
            _ => None,
        }
    }

    /// One line for the audit message and stderr. Poison evidence is an excerpt of
    /// server metadata, escaped; it never contains client data.
    pub fn summary(&self) -> String {
        match self {
            GuardEvent::Pinned { server, entries } => {
                format!("first session of {server}: pinned {entries} definitions")
            }
            GuardEvent::Added { server, entry } => format!(
                "{server} added {entry} since it was pinned; review with `mcpwall pins diff {server}`"
            ),
            GuardEvent::Drift {
                server,
                entry,
                change,
                fields,
                withheld,
            } => format!(
                "{server}: {entry} {change} since it was approved{}{}",
                if fields.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", fields.join(", "))
                },
                if *withheld {
                    format!(
                        "; withheld: review with `mcpwall pins diff {server}`, then approve at a terminal with `mcpwall pins approve {server} {entry}`"
                    )
                } else {
                    "; forwarded (pinning: warn)".to_string()
                }
            ),
            GuardEvent::Poisoned {
                server,
                entry,
                findings,
                withheld,
            } => {
                let detail: Vec<String> = findings
                    .iter()
                    .map(|f| format!("{} [{}] {}", f.kind, f.rule, f.evidence))
                    .collect();
                format!(
                    "{server}: {entry} looks poisoned: {}{}",
                    detail.join("; "),
                    if *withheld {
                        format!(
                            "; withheld: review with `mcpwall pins diff {server}`; to let the agent see it anyway, approve at a terminal with `mcpwall pins approve --allow-poisoned {server} {entry}`"
                        )
                    } else {
                        "; forwarded (poison_scan: warn)".to_string()
                    }
                )
            }
            GuardEvent::Hidden { server, tool } => {
                format!(
                    "{server}: {tool} hidden from the agent: the policy denies it unconditionally"
                )
            }
            GuardEvent::Unreadable {
                server,
                method,
                error,
            } => {
                format!(
                    "{server}: {method} result could not be inspected ({error}); replaced by an error"
                )
            }
            GuardEvent::PinWriteFailed { server, error } => {
                format!("{server}: pins not saved: {error}")
            }
            GuardEvent::Suspended {
                server,
                max_violations,
                window_seconds,
                triggering,
            } => format!(
                "{server}: session suspended after {max_violations} violations within {window_seconds}s: {}",
                triggering.join("; ")
            ),
        }
    }
}

/// What [`Guard::on_server_message`] decided about one server message.
#[derive(Debug, Default)]
pub struct Inspection {
    /// Bytes to send instead of the original message (same id, entries removed), or
    /// `None` to forward the original bytes.
    pub replacement: Option<Vec<u8>>,
    pub events: Vec<GuardEvent>,
}

/// Why a request was refused by the guard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DenialKind {
    Withheld,
    Suspended,
    /// The replicas' shared state, which holds the breaker, cannot be consulted.
    SharedStateLost,
    /// The in-memory shared state is too full to track this identity's breaker.
    SharedStateFull,
}

/// A refusal, with the message for the JSON-RPC error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    pub kind: DenialKind,
    pub message: String,
}

/// One session's guard. `Send + Sync`; share it as `Arc<Guard>`.
#[derive(Debug)]
pub struct Guard {
    config: GuardConfig,
    deny: DenyIndex,
    server: ServerIdentity,
    key: String,
    store: PinStore,
    state: Mutex<State>,
    /// Fast paths for `check_request`: nothing withheld, not suspended.
    any_withheld: AtomicBool,
    suspended: AtomicBool,
    /// Shared by every session of one identity (`mcpwall serve`): a suspension outlives
    /// the session, so the agent is not told a new session ends it.
    per_identity: bool,
    /// The breaker counts and suspends in the replicas' shared state (set once, by
    /// [`Guard::share_breaker`]).
    shared: std::sync::OnceLock<SharedBreaker>,
    /// Pins are judged against the replicas' shared record ([`shared_pins`]), set once by
    /// [`Guard::share_pins`].
    shared_pins: std::sync::OnceLock<std::sync::Arc<dyn crate::shared_state::SharedState>>,
}

/// Where a shared breaker counts: one identity on one server, in every replica.
#[derive(Debug, Clone)]
pub struct SharedBreaker {
    pub state: std::sync::Arc<dyn crate::shared_state::SharedState>,
    pub server: std::sync::Arc<str>,
    pub identity: Option<std::sync::Arc<str>>,
    /// How long a suspension lasts (`shared_state.suspension_seconds`).
    pub suspension: std::time::Duration,
}

impl SharedBreaker {
    fn scope(&self) -> crate::shared_state::Scope<'_> {
        crate::shared_state::Scope {
            server: &self.server,
            identity: self.identity.as_deref(),
        }
    }
}

#[derive(Debug)]
struct State {
    pins: PinFile,
    /// No pin file existed when the session started: everything clean gets pinned.
    first_use: bool,
    withheld: HashMap<EntryKey, WithholdReason>,
    /// Entries seen so far in the current (possibly paginated) listing, per kind.
    seen: BTreeMap<EntryKind, BTreeSet<EntryKey>>,
    breaker: Option<CircuitBreaker>,
}

impl Guard {
    /// The guard for a session of `server`, with pins stored under `home`.
    pub fn from_policy(
        policy: &Policy,
        server: ServerIdentity,
        home: &Path,
    ) -> Result<Guard, PinError> {
        Guard::new(
            GuardConfig::from_settings(&policy.settings),
            DenyIndex::from_policy(policy),
            server,
            PinStore::under_home(home),
        )
    }

    /// Fails only when an existing pin file cannot be read or parsed: starting without
    /// it would silently re-trust a server whose pins were tampered with.
    pub fn new(
        config: GuardConfig,
        deny: DenyIndex,
        server: ServerIdentity,
        store: PinStore,
    ) -> Result<Guard, PinError> {
        let key = server.key();
        let loaded = store.load(&key)?;
        let first_use = loaded.is_none();
        let pins = loaded.unwrap_or_else(|| PinFile::new(server.clone(), pins::unix_now()));
        Ok(Guard {
            config,
            deny,
            key,
            store,
            state: Mutex::new(State {
                pins,
                first_use,
                withheld: HashMap::new(),
                seen: BTreeMap::new(),
                breaker: config.circuit_breaker.map(CircuitBreaker::new),
            }),
            server,
            any_withheld: AtomicBool::new(false),
            suspended: AtomicBool::new(false),
            per_identity: false,
            shared: std::sync::OnceLock::new(),
            shared_pins: std::sync::OnceLock::new(),
        })
    }

    /// This guard is shared by all the sessions of one identity (the HTTP gateway).
    pub fn per_identity(mut self) -> Guard {
        self.per_identity = true;
        self
    }

    /// Count violations and suspend in `shared` (every replica of the gateway) from now
    /// on. Without a breaker configured, nothing changes. Set once; later calls are ignored.
    pub fn share_breaker(&self, shared: SharedBreaker) {
        if self.config.circuit_breaker.is_some() {
            let _ = self.shared.set(shared);
        }
    }

    /// Judge listings against the pin record `state` shares with the other replicas, and
    /// carry this machine's approvals into it. Set once.
    pub fn share_pins(&self, state: std::sync::Arc<dyn crate::shared_state::SharedState>) {
        let _ = self.shared_pins.set(state);
    }

    /// Take the shared pin record as this guard's pins, with this machine's approvals
    /// (`local`, its pin file) merged in; the record as read. `None`: no record yet (this
    /// guard's pins become it), a damaged one (overwritten), or a lost store (the listing
    /// is judged against this replica's own pins; the store says so on stderr).
    fn adopt_shared_pins(
        &self,
        shared: &dyn crate::shared_state::SharedState,
        state: &mut State,
        local: Option<&PinFile>,
    ) -> Option<PinFile> {
        let record = shared.pins(&self.key).ok()??;
        let record: PinFile = serde_json::from_str(&record).ok()?;
        state.pins = shared_pins::merge_approvals(record.clone(), local);
        state.first_use = false;
        Some(record)
    }

    /// Whether the breaker (a round trip per tool call) or the pins (per listing) are
    /// consulted in a shared state.
    pub fn consults_shared_state(&self) -> bool {
        self.shared.get().is_some() || self.shared_pins.get().is_some()
    }

    /// The pin store key of this server (`<name>-<digest>`).
    pub fn server_key(&self) -> &str {
        &self.key
    }

    /// Inspect a server message answering a request of `request_method`. `raw` is the
    /// message's bytes (one element, for a batch). Messages that answer other methods
    /// are not parsed.
    pub fn on_server_message(&self, request_method: Option<&str>, raw: &[u8]) -> Inspection {
        self.on_server_message_judged(request_method, raw, &mut |_| false)
    }

    /// [`Guard::on_server_message`], hiding (with `hide_denied_tools`) every resource of a
    /// `resources/list` whose URI `denies_read` says the policy refuses to read: the agent
    /// is not shown what it may not open, as it is not shown a tool it may not call.
    pub fn on_server_message_judged(
        &self,
        request_method: Option<&str>,
        raw: &[u8],
        denies_read: &mut dyn FnMut(&str) -> bool,
    ) -> Inspection {
        let Some(method) = request_method else {
            return Inspection::default();
        };
        let list = ListKind::from_method(method);
        if list.is_none() && method != "initialize" {
            return Inspection::default();
        }
        let mut inspection = Inspection::default();
        let message = match ResultMessage::parse(raw) {
            Ok(Some(message)) => message,
            Ok(None) => return inspection,
            Err(error) => {
                self.unreadable(method, raw, &error, &mut inspection);
                return inspection;
            }
        };
        let mut state = self.lock();
        // Pick up approvals made with `mcpwall pins approve` while this session runs, so
        // a re-listing shows the approved entries and this session never overwrites them.
        let shared = self.shared_pins.get();
        // The file is kept for the merge only when pins are shared; otherwise moved in.
        let local = match self.store.load(&self.key).ok().flatten() {
            Some(fresh) if shared.is_some() => {
                state.pins = fresh.clone();
                Some(fresh)
            }
            Some(fresh) => {
                state.pins = fresh;
                None
            }
            None => None,
        };
        let shared_before =
            shared.and_then(|s| self.adopt_shared_pins(&**s, &mut state, local.as_ref()));
        let before = state.pins.clone();
        let result = match list {
            Some(kind) => self.filter_list(
                &mut state,
                &message,
                kind,
                denies_read,
                &mut inspection.events,
            ),
            None => Ok(self.filter_instructions(&mut state, &message, &mut inspection.events)),
        };
        match result {
            Ok(replacement) => inspection.replacement = replacement,
            Err(error) => self.unreadable(method, raw, &error, &mut inspection),
        }
        self.any_withheld
            .store(!state.withheld.is_empty(), Ordering::Release);
        let disk_stale =
            state.pins != before || (shared.is_some() && local.as_ref() != Some(&state.pins));
        if disk_stale && let Err(e) = self.store.save(&self.key, &state.pins) {
            // Not fatal: the session's verdicts are in memory and still enforced.
            inspection.events.push(GuardEvent::PinWriteFailed {
                server: self.server.name.clone(),
                error: e.to_string(),
            });
        }
        if let Some(shared) = shared
            && shared_before.as_ref() != Some(&state.pins)
            && let Ok(record) = serde_json::to_string(&state.pins)
        {
            // A lost store is told on stderr by the store; the next listing writes again.
            let _ = shared.store_pins(&self.key, &record, crate::shared_state::PINS_TTL);
        }
        inspection
    }

    /// Judge a request before it is forwarded: `tools/call` of `name` (the tool),
    /// `prompts/get` of `name` (the prompt) or `resources/read` of `name` (the URI).
    /// `None` lets the policy decide.
    pub fn check_request(&self, method: &str, name: Option<&str>) -> Option<Denial> {
        let is_call = method == "tools/call";
        if is_call && self.suspended.load(Ordering::Acquire) {
            return Some(self.suspension_denial());
        }
        if is_call && let Some(shared) = self.shared.get() {
            match shared.state.is_suspended(shared.scope()) {
                Ok(false) => {}
                Ok(true) => return Some(self.suspension_denial()),
                Err(why) => {
                    let kind = match why {
                        crate::shared_state::Unavailable::Lost(_) => DenialKind::SharedStateLost,
                        crate::shared_state::Unavailable::Full(_) => DenialKind::SharedStateFull,
                    };
                    return Some(Denial {
                        kind,
                        message: why.agent_message().into_owned(),
                    });
                }
            }
        }
        if !self.any_withheld.load(Ordering::Acquire) {
            return None;
        }
        let key = match (method, name) {
            ("tools/call", Some(tool)) => EntryKey::tool(tool),
            ("prompts/get", Some(prompt)) => EntryKey::prompt(prompt),
            ("resources/read", Some(uri)) => EntryKey::resource(uri),
            _ => return None,
        };
        let state = self.lock();
        let reason = state.withheld.get(&key)?;
        Some(Denial {
            kind: DenialKind::Withheld,
            message: self.withheld_message(&key, reason),
        })
    }

    /// Shorthand for `check_request("tools/call", Some(tool))`.
    pub fn check_call(&self, tool: &str) -> Option<Denial> {
        self.check_request("tools/call", Some(tool))
    }

    /// Record a denial or blocked response at `now`. Returns the audit event when this
    /// violation suspends the session.
    pub fn record_violation(&self, now: Instant, what: &str) -> Option<GuardEvent> {
        if let Some(shared) = self.shared.get() {
            return self.record_shared_violation(shared, what);
        }
        let mut state = self.lock();
        let breaker = state.breaker.as_mut()?;
        let limits = breaker.limits();
        let suspension = breaker.record(now, what)?;
        let event = GuardEvent::Suspended {
            server: self.server.name.clone(),
            max_violations: limits.max_violations,
            window_seconds: limits.window.as_secs(),
            triggering: suspension
                .triggering
                .iter()
                .map(|v| v.what.clone())
                .collect(),
        };
        self.suspended.store(true, Ordering::Release);
        Some(event)
    }

    /// [`Self::record_violation`] in the shared state: the suspension, when this violation
    /// trips it, holds on every replica for `shared.suspension` (a lost store, or an
    /// in-memory one too full to track this identity, records nothing: the calls it would
    /// have counted are refused meanwhile, fail closed).
    fn record_shared_violation(&self, shared: &SharedBreaker, what: &str) -> Option<GuardEvent> {
        let limits = self.config.circuit_breaker?;
        let window = crate::shared_state::Window {
            max: limits.max_violations,
            window: limits.window,
        };
        match shared
            .state
            .record_violation(shared.scope(), window, shared.suspension)
        {
            Ok(crate::shared_state::Tripped::Now) => Some(GuardEvent::Suspended {
                server: self.server.name.clone(),
                max_violations: limits.max_violations,
                window_seconds: limits.window.as_secs(),
                triggering: vec![what.to_string()],
            }),
            _ => None,
        }
    }

    /// This guard replaces `old` after a policy reload (`mcpwall serve`): it takes over
    /// what `old` learnt, so a reload is no way out of a guard's verdicts. Pins and withheld
    /// entries carry over as they are (a tool withheld after a rug pull stays withheld
    /// until the client lists tools again, judged then under the new policy); the circuit
    /// breaker's recent violations and suspension carry over under this guard's limits, and
    /// end only when the new policy has no breaker at all.
    pub fn take_over(&self, old: &Guard) {
        if std::ptr::eq(self, old) || self.key != old.key {
            return;
        }
        let (withheld, seen, breaker) = {
            let before = old.lock();
            (
                before.withheld.clone(),
                before.seen.clone(),
                before.breaker.clone(),
            )
        };
        let mut state = self.lock();
        state.withheld = withheld;
        state.seen = seen;
        state.breaker = match (state.breaker.take(), breaker) {
            (Some(new), Some(before)) => Some(before.with_limits(new.limits())),
            (new, _) => new,
        };
        let suspended = state
            .breaker
            .as_ref()
            .is_some_and(CircuitBreaker::is_suspended);
        self.any_withheld
            .store(!state.withheld.is_empty(), Ordering::Release);
        self.suspended.store(suspended, Ordering::Release);
    }

    /// Whether a circuit breaker is configured.
    pub fn has_breaker(&self) -> bool {
        self.config.circuit_breaker.is_some()
    }

    pub fn is_suspended(&self) -> bool {
        self.suspended.load(Ordering::Acquire)
    }

    /// The entries currently withheld, with their reasons.
    pub fn withheld(&self) -> Vec<(String, WithholdReason)> {
        let state = self.lock();
        let mut out: Vec<_> = state
            .withheld
            .iter()
            .map(|(k, r)| (k.to_string(), r.clone()))
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding the lock leaves consistent-enough state (maps of
        // verdicts); keep enforcing rather than propagate the poison.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn suspension_denial(&self) -> Denial {
        let state = self.lock();
        let (n, secs) = state
            .breaker
            .as_ref()
            .map(|b| (b.limits().max_violations, b.limits().window.as_secs()))
            .unwrap_or_default();
        Denial {
            kind: DenialKind::Suspended,
            message: if self.per_identity {
                format!(
                    "mcpwall: this client's identity is suspended: {n} policy violations within \
                     {secs} seconds tripped the circuit breaker, so every further tool call from \
                     it is denied, in this session and in new ones, until the gateway's operator \
                     lifts it."
                )
            } else {
                format!(
                    "mcpwall: this session is suspended: {n} policy violations within {secs} \
                     seconds tripped the circuit breaker, so every further tool call is denied. \
                     To resume, restart the MCP client (or reload this server) to start a new \
                     session."
                )
            },
        }
    }

    fn withheld_message(&self, key: &EntryKey, reason: &WithholdReason) -> String {
        let server = &self.server.name;
        let what = match key.kind() {
            EntryKind::Tool => format!("tool {:?}", key.as_str()),
            _ => format!("{:?}", key.as_str()),
        };
        // Read by the agent: it says what happened and that the user decides, never which
        // command approves (STYLE rule 14). The instruction for the human is in the guard
        // event's summary (stderr and the audit log).
        let review = "It stays unavailable until the user reviews it; mcpwall has told them how.";
        match reason {
            WithholdReason::DeniedByPolicy => {
                format!("mcpwall: {what} is denied by policy.")
            }
            WithholdReason::Changed { fields } => format!(
                "mcpwall: {what} of server {server:?} is withheld: its definition changed since it was approved ({}). {review}",
                if fields.is_empty() {
                    "changed".to_string()
                } else {
                    format!("changed: {}", fields.join(", "))
                }
            ),
            WithholdReason::Removed => format!(
                "mcpwall: {what} of server {server:?} was removed from the server's list since it was approved. {review}"
            ),
            WithholdReason::Poisoned { findings } => {
                let kinds: BTreeSet<&str> = findings.iter().map(|f| f.kind.as_str()).collect();
                format!(
                    "mcpwall: {what} of server {server:?} is withheld: its description looks like prompt injection ({}). {review}",
                    kinds.into_iter().collect::<Vec<_>>().join(", ")
                )
            }
        }
    }

    fn unreadable(
        &self,
        method: &str,
        raw: &[u8],
        error: &FilterError,
        inspection: &mut Inspection,
    ) {
        let id = serde_json::from_slice::<Value>(raw)
            .ok()
            .and_then(|v| v.get("id").cloned())
            .unwrap_or(Value::Null);
        let reply = serde_json::json!({
            "jsonrpc": "2.0",
            "id": id,
            "error": {
                "code": -32603,
                "message": format!("mcpwall: could not inspect the server's {method} result ({error}), so it was not forwarded"),
            }
        });
        inspection.replacement = Some(serde_json::to_vec(&reply).expect("JSON values serialise"));
        inspection.events.push(GuardEvent::Unreadable {
            server: self.server.name.clone(),
            method: method.to_string(),
            error: error.to_string(),
        });
    }

    fn filter_list(
        &self,
        state: &mut State,
        message: &ResultMessage<'_>,
        kind: ListKind,
        denies_read: &mut dyn FnMut(&str) -> bool,
        events: &mut Vec<GuardEvent>,
    ) -> Result<Option<Vec<u8>>, FilterError> {
        let items = message.list_items(kind)?;
        let entry_kind = match kind {
            ListKind::Tools => EntryKind::Tool,
            ListKind::Prompts => EntryKind::Prompt,
            ListKind::Resources => EntryKind::Resource,
            ListKind::ResourceTemplates => EntryKind::ResourceTemplate,
        };
        let pinned_before = state.pins.pinned.len();
        let mut kept: Vec<&RawValue> = Vec::with_capacity(items.len());
        for (raw, value) in &items {
            let Some(key) = entry_key(kind, value) else {
                // Nameless entries are unusable by the agent; pass them on untouched.
                kept.push(raw);
                continue;
            };
            state
                .seen
                .entry(entry_kind)
                .or_default()
                .insert(key.clone());
            let mut verdict = self.judge(state, &key, value, events);
            let denied = self.config.hide_denied_tools
                && match kind {
                    ListKind::Tools => self.deny.denied_unconditionally(key.as_str()),
                    ListKind::Resources => value
                        .get("uri")
                        .and_then(Value::as_str)
                        .is_some_and(&mut *denies_read),
                    // A template names many resources: each read is judged by its URI.
                    ListKind::Prompts | ListKind::ResourceTemplates => false,
                };
            if denied {
                events.push(GuardEvent::Hidden {
                    server: self.server.name.clone(),
                    tool: key.to_string(),
                });
                verdict = Some(WithholdReason::DeniedByPolicy);
            }
            match verdict {
                // Policy-hidden tools are denied by the policy itself; the guard only
                // tracks what it withholds on its own account.
                Some(WithholdReason::DeniedByPolicy) => {
                    state.withheld.remove(&key);
                }
                Some(reason) => {
                    state.withheld.insert(key, reason);
                }
                None => {
                    state.withheld.remove(&key);
                    kept.push(raw);
                }
            }
        }
        if !message.has_next_cursor() {
            self.finish_listing(state, entry_kind, events);
        }
        if state.first_use && state.pins.pinned.len() > pinned_before {
            events.push(GuardEvent::Pinned {
                server: self.server.name.clone(),
                entries: state.pins.pinned.len() - pinned_before,
            });
        }
        Ok((kept.len() != items.len()).then(|| message.with_list(kind, &kept)))
    }

    fn filter_instructions(
        &self,
        state: &mut State,
        message: &ResultMessage<'_>,
        events: &mut Vec<GuardEvent>,
    ) -> Option<Vec<u8>> {
        let raw = message.get("instructions")?;
        let value: Value = serde_json::from_str(raw.get()).ok()?;
        if !value.is_string() {
            return None;
        }
        let key = EntryKey::instructions();
        let verdict = self.judge(state, &key, &value, events);
        if state.first_use && state.pins.pinned.contains_key(&key) {
            events.push(GuardEvent::Pinned {
                server: self.server.name.clone(),
                entries: 1,
            });
        }
        match verdict {
            Some(reason) => {
                state.withheld.insert(key, reason);
                Some(message.without("instructions"))
            }
            None => {
                state.withheld.remove(&key);
                None
            }
        }
    }

    /// Pin comparison and poison scan of one entry; `Some` when it must be withheld.
    fn judge(
        &self,
        state: &mut State,
        key: &EntryKey,
        definition: &Value,
        events: &mut Vec<GuardEvent>,
    ) -> Option<WithholdReason> {
        let now = pins::unix_now();
        let digest = pins::digest(definition);
        let findings = match self.config.poison_scan {
            PoisonScanMode::Off => Vec::new(),
            _ => poison::scan_definition(definition),
        };
        let pinned = state.pins.pinned.get(key);
        // Approving a definition does not make poisoned text visible: only an approval
        // that says so (`--allow-poisoned`, recorded in the pin) overrides the scanner.
        let user_allowed_poison = pinned.is_some_and(|p| {
            p.digest == digest && p.approved_by == ApprovedBy::User && p.allow_poisoned
        });
        let poisoned = !user_allowed_poison && poison::is_poisoned(&findings);
        let server = self.server.name.clone();
        let mut withhold = None;

        if self.config.pinning != PinningMode::Off {
            match pinned {
                // Unchanged: anything pending for it (a reverted change, a tool that is
                // back) is settled, unless it is poisoned and still awaits the user's
                // approval. An addition stays flagged until the user reviews it.
                Some(pin)
                    if pin.digest == digest
                        && !poisoned
                        && state
                            .pins
                            .observed
                            .get(key)
                            .is_some_and(|o| o.status != Status::Added) =>
                {
                    state.pins.observed.remove(key);
                }
                Some(pin) if pin.digest == digest => {}
                Some(pin) => {
                    let fields = pins::changed_fields(&pin.definition, definition);
                    let enforce = self.config.pinning == PinningMode::Enforce;
                    let already = state
                        .pins
                        .observed
                        .get(key)
                        .and_then(|o| o.digest.as_deref())
                        == Some(digest.as_str());
                    if !already {
                        state.pins.observed.insert(
                            key.clone(),
                            Observed {
                                status: Status::Changed,
                                definition: Some(definition.clone()),
                                digest: Some(digest.clone()),
                                fields: fields.clone(),
                                findings: findings.clone(),
                                at: now,
                            },
                        );
                    }
                    events.push(GuardEvent::Drift {
                        server: server.clone(),
                        entry: key.to_string(),
                        change: "changed",
                        fields: fields.clone(),
                        withheld: enforce,
                    });
                    if enforce {
                        withhold = Some(WithholdReason::Changed { fields });
                    }
                }
                None if !poisoned => {
                    state.pins.pinned.insert(
                        key.clone(),
                        Pinned {
                            digest: digest.clone(),
                            definition: definition.clone(),
                            approved_by: ApprovedBy::FirstUse,
                            allow_poisoned: false,
                            at: now,
                        },
                    );
                    if !state.first_use {
                        state.pins.observed.insert(
                            key.clone(),
                            Observed {
                                status: Status::Added,
                                definition: Some(definition.clone()),
                                digest: Some(digest.clone()),
                                fields: Vec::new(),
                                findings: findings.clone(),
                                at: now,
                            },
                        );
                        events.push(GuardEvent::Added {
                            server: server.clone(),
                            entry: key.to_string(),
                        });
                    }
                }
                None => {}
            }
        }

        if poisoned {
            let enforce = self.config.poison_scan == PoisonScanMode::Enforce;
            let status_changed = state
                .pins
                .observed
                .get(key)
                .is_some_and(|o| o.status == Status::Changed);
            if !status_changed {
                state.pins.observed.insert(
                    key.clone(),
                    Observed {
                        status: Status::Poisoned,
                        definition: Some(definition.clone()),
                        digest: Some(digest.clone()),
                        fields: Vec::new(),
                        findings: findings.clone(),
                        at: now,
                    },
                );
            }
            events.push(GuardEvent::Poisoned {
                server,
                entry: key.to_string(),
                findings: findings.clone(),
                withheld: enforce,
            });
            if enforce && withhold.is_none() {
                withhold = Some(WithholdReason::Poisoned { findings });
            }
        }
        withhold
    }

    /// A complete listing of `kind` has been seen: pinned entries not in it were removed.
    fn finish_listing(&self, state: &mut State, kind: EntryKind, events: &mut Vec<GuardEvent>) {
        let seen = state.seen.remove(&kind).unwrap_or_default();
        if self.config.pinning == PinningMode::Off {
            return;
        }
        let removed: Vec<EntryKey> = state
            .pins
            .pinned
            .keys()
            .filter(|k| k.kind() == kind && !seen.contains(*k))
            .cloned()
            .collect();
        let enforce = self.config.pinning == PinningMode::Enforce;
        for key in removed {
            let known = state
                .pins
                .observed
                .get(&key)
                .is_some_and(|o| o.status == Status::Removed);
            if !known {
                state.pins.observed.insert(
                    key.clone(),
                    Observed {
                        status: Status::Removed,
                        definition: None,
                        digest: None,
                        fields: Vec::new(),
                        findings: Vec::new(),
                        at: pins::unix_now(),
                    },
                );
            }
            events.push(GuardEvent::Drift {
                server: self.server.name.clone(),
                entry: key.to_string(),
                change: "removed",
                fields: Vec::new(),
                withheld: enforce,
            });
            if enforce {
                state.withheld.insert(key, WithholdReason::Removed);
            }
        }
    }
}

/// The pin key of a listed entry: a tool's or prompt's `name`, a resource's `uri`, a
/// template's `uriTemplate`.
fn entry_key(kind: ListKind, item: &Value) -> Option<EntryKey> {
    match kind {
        ListKind::Tools => item.get("name")?.as_str().map(EntryKey::tool),
        ListKind::Prompts => item.get("name")?.as_str().map(EntryKey::prompt),
        ListKind::Resources => item.get("uri")?.as_str().map(EntryKey::resource),
        ListKind::ResourceTemplates => item
            .get("uriTemplate")?
            .as_str()
            .map(EntryKey::resource_template),
    }
}
