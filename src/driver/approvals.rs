//! The I/O of calls held for approval, for every transport: the timer that refuses them
//! when `ask_timeout_seconds` passes, the pending queue `mcpwall approve` answers through
//! ([`ApprovalQueue`]), and, for a local client, the desktop notification. The session
//! decides; this only reads the clock and the files and hands what it finds to the
//! session.
//!
//! Cost: the timer sleeps on a [`Notify`] while nothing is held (no timer, no polling).
//! While a call waits for `mcpwall approve`, it reads that call's decision file every
//! [`POLL`]: one failed `open(2)` per held call per poll.

use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use super::Driven;
use crate::approval_queue::ApprovalQueue;
use crate::io::{Chatter, LogLevel};
use crate::session::{ApprovalRequest, Outbox};

/// How often the decision files of calls waiting for `mcpwall approve` are read.
const POLL: Duration = Duration::from_millis(200);

/// One conversation's held calls as the transport sees them: where they are offered to
/// `mcpwall approve`, and the wake-up of their timer ([`Self::run`]).
pub struct Approvals {
    /// Where the pending directory goes (`None`: no HOME; calls that need
    /// `mcpwall approve` time out).
    home: Option<PathBuf>,
    /// Opened (created) when the first call is offered.
    queue: Mutex<Option<ApprovalQueue>>,
    /// A call was held: the session's next deadline moved.
    changed: Notify,
    chatter: Chatter,
    /// Tell the human at their desktop that a call waits (a local client).
    desktop: bool,
}

impl Approvals {
    pub fn new(home: Option<PathBuf>, chatter: Chatter, desktop: bool) -> Approvals {
        Approvals {
            home,
            queue: Mutex::new(None),
            changed: Notify::new(),
            chatter,
            desktop,
        }
    }

    /// Wake the timer (the conversation ended: it returns).
    pub fn wake(&self) {
        self.changed.notify_one();
    }

    fn lock_queue(&self) -> MutexGuard<'_, Option<ApprovalQueue>> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Take what `out` holds for the approver: calls just held are offered to
    /// `mcpwall approve`, calls no longer held are withdrawn, and the timer is woken when
    /// a deadline was set. Costs one branch when nothing changed (every message).
    pub fn offer(&self, out: &mut Outbox) {
        if out.asked {
            out.asked = false;
            self.changed.notify_one();
        }
        if out.approvals.is_empty() && out.withdrawn.is_empty() {
            return;
        }
        let mut queue = self.lock_queue();
        if queue.is_none()
            && !out.approvals.is_empty()
            && let Some(home) = &self.home
        {
            match ApprovalQueue::open(home) {
                Ok(q) => *queue = Some(q),
                Err(e) => self.chatter.log(
                    LogLevel::Error,
                    format_args!(
                        "cannot create ~/.mcpwall/pending for calls waiting for approval: {e}; \
                         they will time out"
                    ),
                ),
            }
        }
        let Some(queue) = queue.as_ref() else {
            out.approvals.clear();
            out.withdrawn.clear();
            return;
        };
        for request in out.approvals.drain(..) {
            match queue.publish(&request) {
                Ok(()) if self.desktop => notify_desktop(&request),
                Ok(()) => {}
                Err(e) => self.chatter.log(
                    LogLevel::Error,
                    format_args!(
                        "cannot write the call waiting for approval to {}: {e}; it will time out",
                        queue.dir().display()
                    ),
                ),
            }
        }
        for code in out.withdrawn.drain(..) {
            queue.withdraw(&code);
        }
    }

    /// The session has no clock: refuse held calls whose time is up, and apply the
    /// decisions `mcpwall approve` wrote (read every [`POLL`] while a call waits for
    /// one). Runs until `driven` has ended.
    pub async fn run(&self, driven: &impl Driven) {
        while !driven.is_ended() {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            // Registered before the session is read, so a call held in between wakes it.
            changed.as_mut().enable();
            let (_, (deadline, waiting)) = driven
                .act(|s, _| (s.next_deadline(), !s.awaiting_cli().is_empty()))
                .await;
            let poll = (waiting && self.lock_queue().is_some()).then(|| Instant::now() + POLL);
            let Some(at) = [deadline, poll].into_iter().flatten().min() else {
                changed.await;
                continue;
            };
            tokio::select! {
                () = tokio::time::sleep_until(at.into()) => {
                    let (out, ()) = driven.act(|session, out| self.check(session, out)).await;
                    driven.deliver(out).await;
                }
                () = changed => {}
            }
        }
    }

    /// Apply the decisions `mcpwall approve` wrote, then refuse what timed out.
    fn check(&self, session: &mut crate::session::Session, out: &mut Outbox) {
        if let Some(queue) = self.lock_queue().as_ref() {
            // A discarded decision was written for another call than the one held.
            for code in queue.apply_decisions(session, out) {
                self.chatter.log(
                    LogLevel::Warn,
                    format_args!("ignored a decision for {code}: it names another call"),
                );
            }
        }
        session.expire(Instant::now(), out);
    }
}

/// Tell the human at their desktop that a call waits, where the platform has a way
/// (`notify-send`, `osascript`); skipped quietly otherwise. Never waited for.
fn notify_desktop(request: &ApprovalRequest) {
    let what = request.tool.as_deref().unwrap_or(&request.method);
    let text = format!(
        "{} wants to run {what} (rule {}). Run `mcpwall approve` in a terminal to decide (code {}).",
        request.server, request.rule, request.code
    );
    let (program, args): (&str, Vec<String>) = if cfg!(target_os = "macos") {
        let quoted = serde_json::to_string(&text).unwrap_or_default();
        (
            "osascript",
            vec![
                "-e".into(),
                format!("display notification {quoted} with title \"mcpwall: approval needed\""),
            ],
        )
    } else {
        ("notify-send", vec!["mcpwall: approval needed".into(), text])
    };
    if !on_path(program) {
        return;
    }
    let child = tokio::process::Command::new(program)
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    if let Ok(mut child) = child {
        // Reaped in the background; a notifier that hangs costs nothing but its process.
        tokio::spawn(async move {
            let _ = child.wait().await;
        });
    }
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
}
