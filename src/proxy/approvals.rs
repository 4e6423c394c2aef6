//! The I/O of calls held for approval: the timer that refuses them when
//! `ask_timeout_seconds` passes, the pending queue `mcpwall approve` answers through
//! ([`ApprovalQueue`]), and the desktop notification. The session decides; this task
//! only reads the clock and the files and hands what it finds to the session.
//!
//! Cost: the task sleeps on its channel while nothing is held (no timer, no polling).
//! While a call waits for `mcpwall approve`, it reads that call's decision file every
//! [`POLL`]: one failed `open(2)` per held call per poll.

use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use super::Chatter;
use super::pump::{AskNote, Shared, Sink};
use crate::approval_queue::ApprovalQueue;
use crate::audit::AuditSender;
use crate::config::policy::LogLevel;
use crate::session::{ApprovalRequest, Outbox};

/// How often the decision files of calls waiting for `mcpwall approve` are read.
const POLL: Duration = Duration::from_millis(200);

/// Everything the task needs.
pub(crate) struct Approvals {
    pub session: Shared,
    pub notes: mpsc::UnboundedReceiver<AskNote>,
    pub to_client: Sink,
    pub to_server: Sink,
    pub audit: AuditSender,
    pub chatter: Chatter,
    /// Where the pending directory goes (`None`: no HOME; calls that need
    /// `mcpwall approve` time out).
    pub home: Option<std::path::PathBuf>,
    /// Opened (created) when the first call is published.
    pub queue: Option<ApprovalQueue>,
}

impl Approvals {
    /// Run until every pump is gone.
    pub async fn run(mut self) {
        let mut out = Outbox::default();
        loop {
            let (deadline, waiting) = {
                let s = self.session.lock();
                (s.next_deadline(), !s.awaiting_cli().is_empty())
            };
            let poll = (waiting && self.queue.is_some()).then(|| Instant::now() + POLL);
            let wake = [deadline, poll].into_iter().flatten().min();
            tokio::select! {
                note = self.notes.recv() => match note {
                    Some(note) => self.apply(note),
                    None => return,
                },
                () = async {
                    if let Some(at) = wake {
                        tokio::time::sleep_until(at.into()).await;
                    }
                }, if wake.is_some() => {
                    self.check(&mut out);
                    for notice in out.notices.drain(..) {
                        self.chatter.log(notice.level, format_args!("{}", notice.text));
                    }
                    self.audit.send(&mut out.events);
                    if let Some(note) = AskNote::take(&mut out) {
                        self.apply(note);
                    }
                    self.to_client.flush(&mut out.to_client).await;
                    self.to_server.flush(&mut out.to_server).await;
                }
            }
        }
    }

    /// Apply the decisions `mcpwall approve` wrote, then refuse what timed out.
    fn check(&mut self, out: &mut Outbox) {
        let mut session = self.session.lock();
        if let Some(queue) = &self.queue {
            // A discarded decision was written for another call than the one held.
            for code in queue.apply_decisions(&mut session, out) {
                self.chatter.log(
                    LogLevel::Warn,
                    format_args!("ignored a decision for {code}: it names another call"),
                );
            }
        }
        session.expire(Instant::now(), out);
    }

    fn apply(&mut self, note: AskNote) {
        if self.queue.is_none()
            && !note.publish.is_empty()
            && let Some(home) = &self.home
        {
            match ApprovalQueue::open(home) {
                Ok(q) => self.queue = Some(q),
                Err(e) => self.chatter.log(
                    LogLevel::Error,
                    format_args!(
                        "cannot create ~/.mcpwall/pending for calls waiting for approval: {e}; \
                         they will time out"
                    ),
                ),
            }
        }
        let Some(queue) = &self.queue else { return };
        for request in &note.publish {
            match queue.publish(request) {
                Ok(()) => notify_desktop(request),
                Err(e) => self.chatter.log(
                    LogLevel::Error,
                    format_args!(
                        "cannot write the call waiting for approval to {}: {e}; it will time out",
                        queue.dir().display()
                    ),
                ),
            }
        }
        for code in &note.withdraw {
            queue.withdraw(code);
        }
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
