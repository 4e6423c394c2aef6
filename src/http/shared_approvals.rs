//! Calls held for `mcpwall approve` offered to every replica of a gateway
//! (`settings.shared_state`): approve anywhere, answer at home.
//!
//! A held call lives in its session, on the replica that holds the session (its home):
//! only there can it be forwarded or refused, so the approval is what is shared, not the
//! call. The home replica offers each call it holds for `mcpwall approve` (the files
//! `driver::approvals` writes in `~/.mcpwall/pending/` for this process) in the shared
//! state, as an [`Offer`] naming the replica; `mcpwall approve -c POLICY` on any replica's
//! machine lists the offers and records its decision there, bound to the digest of the
//! call it showed; the home replica takes the decision and writes it where its session
//! reads decisions, as a local `mcpwall approve` would. The session applies it only to
//! the held call with that code and digest.
//!
//! Fail closed: while the shared state is lost nothing is offered and no decision is
//! taken; the held calls can still be decided on the home machine, or time out. Bounded:
//! at most [`crate::shared_state::MAX_HELD`] offers per gateway, each kept only until its
//! call times out.
//!
//! Cost: one `stat` of the pending directory per [`POLL`] while this replica holds
//! nothing; while it holds calls, one round trip per held call per poll.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::approval_queue::{ApprovalQueue, ApprovalRequest, Decision, Offer};
use crate::io::{Chatter, LogLevel};
use crate::shared_state::SharedState;

/// How often the pending directory is looked at and decisions are asked for.
pub const POLL: Duration = Duration::from_millis(200);

/// The directory is listed again this often even when its time stamp says nothing
/// changed (a file system with coarse time stamps), and after a failure.
const RELIST: Duration = Duration::from_secs(2);

/// The offering thread; stopped (its offers withdrawn) when dropped.
pub struct SharedApprovals {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for SharedApprovals {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Offer this process's held calls (`home`'s pending directory) in `state`, as held by
/// `replica`, and bring the decisions recorded there home.
pub fn start(
    state: Arc<dyn SharedState>,
    home: PathBuf,
    replica: Option<String>,
    chatter: Chatter,
) -> std::io::Result<SharedApprovals> {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let thread = std::thread::Builder::new()
        .name("mcpwall-approvals".into())
        .spawn(move || {
            let mut offering = Offering {
                state,
                queue: ApprovalQueue::at(&home),
                replica,
                chatter,
                pid: std::process::id(),
                offered: HashMap::new(),
                decided: std::collections::HashSet::new(),
                stamp: None,
                listed: None,
                failing: false,
            };
            while !flag.load(Ordering::Acquire) {
                offering.tick();
                std::thread::sleep(POLL);
            }
            offering.withdraw_all();
        })?;
    Ok(SharedApprovals {
        stop,
        thread: Some(thread),
    })
}

struct Offering {
    state: Arc<dyn SharedState>,
    queue: ApprovalQueue,
    replica: Option<String>,
    chatter: Chatter,
    pid: u32,
    /// The calls offered, by code.
    offered: HashMap<String, ApprovalRequest>,
    /// The calls decided elsewhere, whose decision is home: not offered again while the
    /// session applies it.
    decided: std::collections::HashSet<String>,
    /// The directory's time stamp when last listed.
    stamp: Option<SystemTime>,
    listed: Option<Instant>,
    /// The shared state failed last time (told once on stderr until it answers again).
    failing: bool,
}

fn now_unix() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl Offering {
    fn tick(&mut self) {
        let stamp = std::fs::metadata(self.queue.dir())
            .and_then(|m| m.modified())
            .ok();
        let stale = self.listed.is_none_or(|t| t.elapsed() >= RELIST);
        if stamp != self.stamp || (stale && (self.failing || !self.offered.is_empty())) {
            self.stamp = stamp;
            self.listed = Some(Instant::now());
            self.sync();
        }
        self.bring_decisions_home();
    }

    /// Offer the calls this process holds now, and withdraw those it no longer holds.
    fn sync(&mut self) {
        let now = now_unix();
        let held: HashMap<String, ApprovalRequest> = match self.queue.list() {
            Ok(list) => list
                .into_iter()
                .filter(|(r, _)| r.pid == self.pid && r.expires_unix > now)
                .map(|(r, _)| (r.code.clone(), r))
                .collect(),
            Err(_) => return,
        };
        let gone: Vec<String> = self
            .offered
            .keys()
            .filter(|code| !held.contains_key(*code))
            .cloned()
            .collect();
        for code in gone {
            match self.state.withdraw_held(&code) {
                Ok(()) => {
                    self.offered.remove(&code);
                }
                Err(e) => self.failed(&e),
            }
        }
        self.decided.retain(|code| held.contains_key(code));
        for (code, request) in held {
            if self.offered.contains_key(&code) || self.decided.contains(&code) {
                continue;
            }
            let ttl = Duration::from_secs(request.expires_unix.saturating_sub(now).max(1));
            let offer = Offer {
                replica: self.replica.clone(),
                request,
            };
            let Ok(text) = serde_json::to_string(&offer) else {
                continue;
            };
            match self.state.offer_held(&code, &text, ttl) {
                Ok(()) => {
                    self.answered();
                    self.offered.insert(code, offer.request);
                }
                Err(e) => self.failed(&e),
            }
        }
    }

    /// Write each decision recorded for an offered call where the session reads it.
    fn bring_decisions_home(&mut self) {
        let mut decided = Vec::new();
        for (code, request) in &self.offered {
            match self.state.take_decision(code) {
                Ok(Some(text)) => decided.push((code.clone(), request.clone(), text)),
                Ok(None) => {}
                Err(e) => {
                    self.failed(&e);
                    return;
                }
            }
        }
        for (code, request, text) in decided {
            let decision: Option<Decision> = serde_json::from_str(&text).ok();
            match decision {
                // Bound to the call the approver was shown: one under the same code with
                // other arguments is not decided by it.
                Some(d) if d.digest == request.digest && self.queue.get(&code).is_some() => {
                    // Decided: no longer offered (another approver would decide nothing).
                    self.offered.remove(&code);
                    self.decided.insert(code.clone());
                    let _ = self.state.withdraw_held(&code);
                    if let Err(e) = self.queue.record(&request, d.approve) {
                        self.chatter.log(
                            LogLevel::Error,
                            format_args!(
                                "cannot write the decision about call {code} made on another \
                                 replica to {}: {e}; decide it here with `mcpwall approve`",
                                self.queue.dir().display()
                            ),
                        );
                    }
                }
                _ => self.chatter.log(
                    LogLevel::Warn,
                    format_args!(
                        "ignored a decision made on another replica for {code}: it names \
                         another call"
                    ),
                ),
            }
        }
    }

    fn failed(&mut self, why: &crate::shared_state::Unavailable) {
        if !std::mem::replace(&mut self.failing, true) {
            self.chatter.log(
                LogLevel::Error,
                format_args!(
                    "calls held for approval cannot be offered to the other replicas ({why}): \
                     decide them on this machine with `mcpwall approve`, or they time out"
                ),
            );
        }
    }

    fn answered(&mut self) {
        if std::mem::replace(&mut self.failing, false) {
            self.chatter.log(
                LogLevel::Info,
                format_args!("calls held for approval are offered to every replica again"),
            );
        }
    }

    /// Stopping: the held calls are refused with the sessions; their offers go.
    fn withdraw_all(&mut self) {
        for code in std::mem::take(&mut self.offered).into_keys() {
            let _ = self.state.withdraw_held(&code);
        }
    }
}
