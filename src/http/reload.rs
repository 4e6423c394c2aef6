//! Policy changes without a restart: the policy files and the token file are watched, and
//! a change (or SIGHUP) rebuilds every server's judges on a thread of their own, off the
//! I/O thread, and swaps them in ([`super::identities::LiveJudges`]). Sessions take the
//! new judges at their next message (`conversation.rs`).
//!
//! **Watching** is polling: once a [`POLL`], every watched file's length, modification
//! time and SHA-256 are compared with the last look (a file that is absent counts as a
//! state too, so creating the project's `.mcpwall.yml` is a change). Polling works the
//! same on every platform and file system (network mounts, editors that replace the file
//! by rename, a symlink swapped under the path), costs a few small reads a second, and
//! needs no crate; the content hash catches an edit that keeps the length within the
//! clock's resolution. A change made while a rebuild reads the files is seen at the next
//! look, since the look comes first.
//!
//! **Failure** keeps the judges in force: the problem goes to stderr (the diagnostic,
//! pointing at file, line and column) and to the audit log (an event in the chain: the
//! problems' places and messages, never a token), `/metrics` counts it, and the next
//! change (or SIGHUP) tries again. A change that cannot take effect without a restart (the
//! set of `servers:`) is a failure too, said as such.
//!
//! What a reload cannot change is fixed at start and said in the notes of the reload that
//! changed it: the listener's limits (`settings.gateway`) and the audit log's settings. A
//! changed `sandbox:` applies to the servers started after the reload; running ones keep
//! theirs.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::Duration;

use sha2::{Digest, Sha256};

use super::identities::Judges;
use super::metrics::Metrics;
use super::server::Gateway;
pub use super::trigger::{Ask, Trigger};
use crate::audit::{AuditEvent, Direction, RuleRef, Verdict};
use crate::io::LogLevel;

/// How often the watched files are looked at.
pub const POLL: Duration = Duration::from_secs(1);

/// The audit log's rule for a reload that took effect.
pub const RULE_RELOADED: &str = "mcpwall:policy_reloaded";
/// The audit log's rule for a reload that failed (the policy in force stays).
pub const RULE_RELOAD_FAILED: &str = "mcpwall:policy_reload_failed";

/// What a rebuild made: each gateway's judges, in the gateways' order.
pub struct Rebuilt {
    pub judges: Vec<Judges>,
    /// SHA-256 of the policy's files (names and texts), hex.
    pub policy_hash: String,
    /// Said on stderr and in the reload's audit event (what needs a restart, warnings).
    pub notes: Vec<String>,
}

/// Why a rebuild failed.
pub struct Failed {
    /// For stderr: the rendered diagnostic.
    pub report: String,
    /// For the audit log: the problems' places and messages, on one line.
    pub summary: String,
}

/// What one rebuild came to: new judges, a failure, or both (a broken policy edit and a
/// new token in the same look: the new identity is judged by the policy in force).
#[derive(Default)]
pub struct Outcome {
    pub rebuilt: Option<Rebuilt>,
    pub failed: Option<Failed>,
}

/// Builds the judges again from the files (the serve command knows how).
pub trait Rebuild: Send + 'static {
    /// The files whose change asks for a rebuild.
    fn watched(&self) -> Vec<PathBuf>;
    /// Read the files and build every gateway's judges; `current`: those in force, in
    /// the gateways' order. `forced`: asked by SIGHUP (rebuild even if nothing changed).
    fn rebuild(&mut self, current: &[Arc<Judges>], forced: bool) -> Outcome;
}

/// One look at the watched files.
pub type Fingerprint = Vec<Option<(u64, Option<std::time::SystemTime>, [u8; 32])>>;

/// Look at `paths`: each one's length, modification time and SHA-256 (`None`: absent or
/// unreadable).
pub fn fingerprint(paths: &[PathBuf]) -> Fingerprint {
    paths
        .iter()
        .map(|p| {
            let meta = std::fs::metadata(p).ok()?;
            let text = std::fs::read(p).ok()?;
            Some((
                meta.len(),
                meta.modified().ok(),
                Sha256::digest(&text).into(),
            ))
        })
        .collect()
}

/// Start the reload thread for `gateways`: it runs until every [`Trigger`] is dropped.
/// `seen`: the watched files as they were before the judges in force were built from them.
pub fn start(
    gateways: Vec<Arc<Gateway>>,
    metrics: Arc<Metrics>,
    asks: Receiver<Ask>,
    mut rebuild: impl Rebuild,
    mut seen: Fingerprint,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("mcpwall-reload".into())
        .spawn(move || {
            loop {
                let ask = match asks.recv_timeout(POLL) {
                    Ok(ask) => Some(ask),
                    Err(RecvTimeoutError::Timeout) => None,
                    Err(RecvTimeoutError::Disconnected) => return,
                };
                // Looked at before the rebuild reads the files: a change made meanwhile
                // is seen next time.
                let now = fingerprint(&rebuild.watched());
                let forced = ask == Some(Ask::Signal);
                if now == seen && !forced {
                    continue;
                }
                seen = now;
                let current: Vec<Arc<Judges>> =
                    gateways.iter().map(|g| g.judges.current()).collect();
                let outcome = rebuild.rebuild(&current, forced);
                apply(&gateways, &metrics, outcome, forced);
            }
        })
}

/// Swap in what a rebuild made, and say what happened.
fn apply(gateways: &[Arc<Gateway>], metrics: &Metrics, outcome: Outcome, forced: bool) {
    let Some(gateway) = gateways.first() else {
        return;
    };
    let why = if forced { "SIGHUP" } else { "a file changed" };
    if let Some(failed) = outcome.failed {
        metrics.reload_failed();
        eprint!("{}", failed.report);
        let text = format!(
            "policy reload ({why}) failed; the policy in force (sha256 {}) stays: {}",
            metrics.policy_hash(),
            failed.summary
        );
        gateway.chatter.log(LogLevel::Error, format_args!("{text}"));
        audit(gateway, RULE_RELOAD_FAILED, Verdict::Deny, text);
    }
    let Some(rebuilt) = outcome.rebuilt else {
        return;
    };
    let changed = rebuilt.policy_hash != metrics.policy_hash();
    for (g, judges) in gateways.iter().zip(rebuilt.judges) {
        metrics.register(&judges);
        g.judges.replace(judges);
    }
    metrics.reloaded(rebuilt.policy_hash.clone());
    for note in &rebuilt.notes {
        gateway.chatter.log(LogLevel::Warn, format_args!("{note}"));
    }
    let mut text = if changed {
        format!(
            "policy reloaded ({why}): sha256 {}; each session's next message is judged by it",
            rebuilt.policy_hash
        )
    } else {
        format!(
            "policy and identities reloaded ({why}): sha256 {} (policy unchanged)",
            rebuilt.policy_hash
        )
    };
    for note in &rebuilt.notes {
        text.push_str("; ");
        text.push_str(note);
    }
    // Said whatever the log level, as the address at start is: which policy is in force
    // is what an operator looks for after editing it.
    eprintln!("mcpwall: {text}");
    audit(gateway, RULE_RELOADED, Verdict::Allow, text);
}

/// A reload's event in the audit log (its chain, like every event).
fn audit(gateway: &Gateway, rule: &'static str, verdict: Verdict, text: String) {
    let mut e = AuditEvent::new(Direction::Inbound, verdict);
    e.rule = Some(RuleRef::Builtin(rule));
    e.message = Some(text.into());
    e.transport = Some("http");
    gateway.audit.send(&mut vec![e]);
}
