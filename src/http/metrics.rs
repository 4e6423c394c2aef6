//! `/metrics` for Prometheus (text exposition format 0.0.4): HTTP requests by transport and
//! status, their latency, verdicts by rule, open sessions, each identity's circuit breaker,
//! the loaded policy's hash and the reloads that succeeded or failed.
//!
//! **Who may read it** ([`super::scrape`]). Not the agents. `/metrics` is served only on its own listener
//! (`serve --metrics-listen ADDR`, loopback unless `--allow-remote`), never on the MCP
//! listener, and every scrape needs the bearer token of an identity named with
//! `--metrics-reader NAME` (issued by `mcpwall token add NAME`, like any other): an agent's
//! token is refused there, as is no token. It holds identity names, server names and rule
//! names, never a token, an argument or a message.
//!
//! **Cost.** Counting is atomics only: a request adds to two counters and a histogram
//! bucket; a verdict adds to its rule's counter in its judge ([`VerdictCounts`]), the
//! default action's included. Only the verdicts of mcpwall's other rules (`mcpwall:…`:
//! malformed frames, refusals of the session), which are not on the allow path, are
//! counted by name under a lock. A scrape
//! adds the counts up.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hyper::StatusCode;

use super::identities::{PolicyNames, VerdictCounts};
use crate::audit::{AuditEvent, Direction, RuleRef};
use crate::verdict::{RuleId, Verdict};

/// How a request reached the gateway, as `/metrics` labels it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// Streamable HTTP (`/mcp`), session-based revisions.
    StreamableHttp,
    /// Streamable HTTP, the stateless 2026-07-28 revision.
    Stateless,
    /// The legacy HTTP+SSE transport (`/sse`, `/message`).
    LegacySse,
    WebSocket,
    /// A path no server is at.
    Unrouted,
}

impl Transport {
    const ALL: [Transport; 5] = [
        Transport::StreamableHttp,
        Transport::Stateless,
        Transport::LegacySse,
        Transport::WebSocket,
        Transport::Unrouted,
    ];

    fn label(self) -> &'static str {
        match self {
            Transport::StreamableHttp => "streamable_http",
            Transport::Stateless => "stateless_http",
            Transport::LegacySse => "legacy_sse",
            Transport::WebSocket => "websocket",
            Transport::Unrouted => "none",
        }
    }
}

/// Upper bounds of the latency histogram's buckets, in microseconds (the last one is +Inf).
const BUCKETS_US: [u64; 14] = [
    500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000, 1_000_000,
    2_500_000, 5_000_000, 10_000_000,
];

/// HTTP status codes are 100..=599; each has its counter.
const STATUSES: usize = 600;

struct PerTransport {
    by_status: Box<[AtomicU64]>,
    /// Requests per bucket (not cumulative; the last one is over the last bound).
    buckets: [AtomicU64; BUCKETS_US.len() + 1],
    sum_us: AtomicU64,
}

impl Default for PerTransport {
    fn default() -> PerTransport {
        PerTransport {
            by_status: (0..STATUSES).map(|_| AtomicU64::new(0)).collect(),
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
            sum_us: AtomicU64::new(0),
        }
    }
}

/// Verdict counts keyed by (direction, rule kind, rule id, verdict) of the listener's
/// names table: what judges no longer in use counted.
type Retired = BTreeMap<(u8, u8, u32, usize), u64>;

/// The listener's counters. See the module docs.
pub struct Metrics {
    transports: [PerTransport; Transport::ALL.len()],
    /// Verdicts of mcpwall's own rules, by (rule, direction).
    builtin: Mutex<HashMap<(&'static str, u8), [u64; Verdict::ALL.len()]>>,
    /// The verdict counts of every judge built; a judge's counts are folded into
    /// `retired` once nothing else holds them.
    tallies: Mutex<(Vec<Arc<VerdictCounts>>, Retired)>,
    names: Arc<PolicyNames>,
    reloads_ok: AtomicU64,
    reloads_failed: AtomicU64,
    /// SHA-256 of the policy in force (its files' names and texts).
    policy_hash: Mutex<String>,
    /// Scrapes refused (no token, or one of an identity not allowed to read).
    refused: AtomicU64,
}

fn direction_index(d: Direction) -> u8 {
    match d {
        Direction::Inbound => 0,
        Direction::Outbound => 1,
    }
}

fn direction_label(d: u8) -> &'static str {
    if d == 0 { "inbound" } else { "outbound" }
}

impl Metrics {
    /// A request to the metrics listener was refused.
    pub fn note_refused_scrape(&self) {
        self.refused.fetch_add(1, Ordering::Relaxed);
    }

    pub fn new(names: Arc<PolicyNames>, policy_hash: String) -> Metrics {
        Metrics {
            transports: std::array::from_fn(|_| PerTransport::default()),
            builtin: Mutex::default(),
            tallies: Mutex::default(),
            names,
            reloads_ok: AtomicU64::new(0),
            reloads_failed: AtomicU64::new(0),
            policy_hash: Mutex::new(policy_hash),
            refused: AtomicU64::new(0),
        }
    }

    /// One HTTP request answered (its head written) after `elapsed`.
    pub fn count_request(&self, transport: Transport, status: StatusCode, elapsed: Duration) {
        let t = &self.transports[transport as usize];
        if let Some(c) = t.by_status.get(usize::from(status.as_u16())) {
            c.fetch_add(1, Ordering::Relaxed);
        }
        let us = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
        let bucket = BUCKETS_US
            .iter()
            .position(|&b| us <= b)
            .unwrap_or(BUCKETS_US.len());
        t.buckets[bucket].fetch_add(1, Ordering::Relaxed);
        t.sum_us.fetch_add(us, Ordering::Relaxed);
    }

    /// A verdict under a rule of mcpwall's own (`mcpwall:…`).
    pub fn count_builtin_verdict(&self, event: &AuditEvent) {
        let Some(RuleRef::Builtin(name)) = event.rule else {
            return;
        };
        let mut builtin = self.builtin.lock().unwrap_or_else(|e| e.into_inner());
        let row = builtin
            .entry((name, direction_index(event.direction)))
            .or_insert([0; Verdict::ALL.len()]);
        row[event.action as usize] += 1;
    }

    /// Count the verdicts of these judges' from now on (at start, and for each reload's).
    pub fn register(&self, judges: &super::identities::Judges) {
        let mut tallies = self.lock_tallies();
        let federated = judges.federation.iter().flat_map(|f| f.judges());
        for judge in judges
            .iter()
            .map(|(_, j)| j.clone())
            .chain(federated.map(|(_, j)| j))
        {
            if !tallies.0.iter().any(|t| Arc::ptr_eq(t, &judge.verdicts)) {
                tallies.0.push(judge.verdicts.clone());
            }
        }
    }

    /// Count the verdicts of one judge built after start (an identity provider's identity).
    pub fn register_judge(&self, judge: &super::identities::Judge) {
        self.lock_tallies().0.push(judge.verdicts.clone());
    }

    fn lock_tallies(&self) -> std::sync::MutexGuard<'_, (Vec<Arc<VerdictCounts>>, Retired)> {
        self.tallies.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A reload succeeded and the policy in force now hashes to `hash`.
    pub fn reloaded(&self, hash: String) {
        *self.policy_hash.lock().unwrap_or_else(|e| e.into_inner()) = hash;
        self.reloads_ok.fetch_add(1, Ordering::Relaxed);
    }

    /// A reload failed; the policy in force did not change.
    pub fn reload_failed(&self) {
        self.reloads_failed.fetch_add(1, Ordering::Relaxed);
    }

    /// The hash of the policy in force.
    pub fn policy_hash(&self) -> String {
        self.policy_hash
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Every verdict count, by (direction, rule name, verdict).
    fn verdicts(&self) -> BTreeMap<(&'static str, &'static str, &'static str), u64> {
        let mut out = BTreeMap::new();
        // No rule: the default action decided a client's message; a server's matched none.
        let name = |d: u8, kind: u8, id: u32| -> &'static str {
            match kind {
                0 => self.names.rule_name(Some(RuleRef::Inbound(RuleId(id)))),
                1 => self.names.rule_name(Some(RuleRef::Outbound(RuleId(id)))),
                _ if d == 0 => super::identities::DEFAULT_ACTION,
                _ => "none",
            }
        };
        let key = |direction: Direction, rule: Option<RuleRef>| -> (u8, u8, u32) {
            match rule {
                Some(RuleRef::Inbound(RuleId(id))) => (direction_index(direction), 0, id),
                Some(RuleRef::Outbound(RuleId(id))) => (direction_index(direction), 1, id),
                _ => (direction_index(direction), 2, 0),
            }
        };
        let mut all: Retired = {
            let mut tallies = self.lock_tallies();
            let (live, retired) = &mut *tallies;
            // Counts nothing can add to any more move to the retired table.
            live.retain(|t| {
                if Arc::strong_count(t) > 1 {
                    return true;
                }
                t.each(|d, rule, v, n| {
                    let (d, kind, id) = key(d, rule);
                    *retired.entry((d, kind, id, v as usize)).or_default() += n;
                });
                false
            });
            let mut all = retired.clone();
            for t in live.iter() {
                t.each(|d, rule, v, n| {
                    let (d, kind, id) = key(d, rule);
                    *all.entry((d, kind, id, v as usize)).or_default() += n;
                });
            }
            all
        };
        for ((d, kind, id, v), n) in std::mem::take(&mut all) {
            *out.entry((
                direction_label(d),
                name(d, kind, id),
                Verdict::ALL[v].as_str(),
            ))
            .or_default() += n;
        }
        let builtin = self.builtin.lock().unwrap_or_else(|e| e.into_inner());
        for ((rule, d), row) in builtin.iter() {
            for (v, n) in row.iter().enumerate() {
                if *n > 0 {
                    *out.entry((direction_label(*d), *rule, Verdict::ALL[v].as_str()))
                        .or_default() += n;
                }
            }
        }
        out
    }

    /// The exposition text: these counters, and the gauges read from the gateways.
    pub fn render(&self, gauges: &Gauges) -> String {
        let mut out = String::with_capacity(4096);
        out.push_str("# HELP mcpwall_http_requests_total HTTP requests answered, by transport and status.\n# TYPE mcpwall_http_requests_total counter\n");
        for t in Transport::ALL {
            for (status, n) in self.transports[t as usize].by_status.iter().enumerate() {
                let n = n.load(Ordering::Relaxed);
                if n > 0 {
                    let _ = writeln!(
                        out,
                        "mcpwall_http_requests_total{{transport=\"{}\",status=\"{status}\"}} {n}",
                        t.label()
                    );
                }
            }
        }
        out.push_str("# HELP mcpwall_http_request_duration_seconds Time from a request's arrival to its answer's head (for a stream: its start).\n# TYPE mcpwall_http_request_duration_seconds histogram\n");
        for t in Transport::ALL {
            let per = &self.transports[t as usize];
            let mut cumulative = 0;
            for (i, bucket) in per.buckets.iter().enumerate() {
                cumulative += bucket.load(Ordering::Relaxed);
                let le = match BUCKETS_US.get(i) {
                    Some(us) => format!("{}", *us as f64 / 1e6),
                    None => "+Inf".to_string(),
                };
                let _ = writeln!(
                    out,
                    "mcpwall_http_request_duration_seconds_bucket{{transport=\"{}\",le=\"{le}\"}} {cumulative}",
                    t.label()
                );
            }
            let _ = writeln!(
                out,
                "mcpwall_http_request_duration_seconds_sum{{transport=\"{}\"}} {}",
                t.label(),
                per.sum_us.load(Ordering::Relaxed) as f64 / 1e6
            );
            let _ = writeln!(
                out,
                "mcpwall_http_request_duration_seconds_count{{transport=\"{}\"}} {cumulative}",
                t.label()
            );
        }
        out.push_str("# HELP mcpwall_verdicts_total Messages judged, by direction, deciding rule (mcpwall:default_action: no rule decided a client message; none: no rule matched a server message) and verdict.\n# TYPE mcpwall_verdicts_total counter\n");
        for ((direction, rule, verdict), n) in self.verdicts() {
            let _ = writeln!(
                out,
                "mcpwall_verdicts_total{{direction=\"{direction}\",rule=\"{}\",verdict=\"{verdict}\"}} {n}",
                escape(rule)
            );
        }
        out.push_str("# HELP mcpwall_sessions_open Sessions open, by server and identity.\n# TYPE mcpwall_sessions_open gauge\n");
        for ((server, identity), n) in &gauges.sessions {
            let _ = writeln!(
                out,
                "mcpwall_sessions_open{{server=\"{}\",identity=\"{}\"}} {n}",
                escape(server),
                escape(identity.as_deref().unwrap_or(""))
            );
        }
        out.push_str("# HELP mcpwall_circuit_breaker_suspended Whether an identity's circuit breaker has suspended its tool calls on a server (1) or not (0).\n# TYPE mcpwall_circuit_breaker_suspended gauge\n");
        for (server, identity, suspended) in &gauges.breakers {
            let _ = writeln!(
                out,
                "mcpwall_circuit_breaker_suspended{{server=\"{}\",identity=\"{}\"}} {}",
                escape(server),
                escape(identity),
                u8::from(*suspended)
            );
        }
        let _ = write!(
            out,
            "# HELP mcpwall_policy_info The policy in force: SHA-256 of its files' names and texts.\n# TYPE mcpwall_policy_info gauge\nmcpwall_policy_info{{sha256=\"{}\"}} 1\n",
            self.policy_hash()
        );
        let _ = write!(
            out,
            "# HELP mcpwall_policy_reloads_total Policy and token-file reloads, by result (a failed one keeps the policy in force).\n# TYPE mcpwall_policy_reloads_total counter\nmcpwall_policy_reloads_total{{result=\"success\"}} {}\nmcpwall_policy_reloads_total{{result=\"failure\"}} {}\n",
            self.reloads_ok.load(Ordering::Relaxed),
            self.reloads_failed.load(Ordering::Relaxed)
        );
        let _ = write!(
            out,
            "# HELP mcpwall_metrics_scrapes_refused_total Requests to the metrics listener refused (no token, or not a reader's).\n# TYPE mcpwall_metrics_scrapes_refused_total counter\nmcpwall_metrics_scrapes_refused_total {}\n",
            self.refused.load(Ordering::Relaxed)
        );
        out
    }
}

/// A label value as the exposition format writes it.
fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// What the gauges show at a scrape, read from the gateways ([`super::scrape`]).
#[derive(Debug, Default)]
pub struct Gauges {
    /// Sessions open, by server and identity.
    pub sessions: BTreeMap<(Arc<str>, Option<Arc<str>>), u64>,
    /// Each identity's circuit breaker per server: suspended or not.
    pub breakers: Vec<(Arc<str>, String, bool)>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_refused_by_a_full_shared_state_is_counted_under_its_rule() {
        let metrics = Metrics::new(Arc::default(), "h".to_string());
        let mut event = AuditEvent::new(Direction::Inbound, Verdict::Deny);
        event.rule = Some(RuleRef::Builtin(crate::shared_state::RULE_FULL));
        metrics.count_builtin_verdict(&event);
        metrics.count_builtin_verdict(&event);
        let text = metrics.render(&Gauges::default());
        let line = text
            .lines()
            .find(|l| l.contains("rule=\"mcpwall:shared_state_full\""))
            .unwrap_or_else(|| panic!("not counted:\n{text}"));
        assert!(line.ends_with(" 2") && line.contains("deny"), "{line}");
    }
}
