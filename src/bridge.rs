//! Bridge mode, `mcpwall --upstream URL`: stdio towards the client, Streamable HTTP towards
//! a remote server ([`crate::upstream`]), one [`Session`] judging every message both ways,
//! as the stdio proxy does with a child process.
//!
//! ```text
//! client stdin ─► LineReader ─► Session::from_client ─┬─► Link ─► POST / GET ─► server
//!                                                      │
//! client stdout ◄─ writer ◄─ Session::from_server ◄────┴── FromUpstream ◄── server
//! ```
//! The session is locked for the judging of one message, never across an await.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::{Notify, mpsc};

use crate::approval_queue::ApprovalQueue;
use crate::audit::AuditSender;
use crate::io::codec::LineReader;
use crate::io::{Chatter, LogLevel, stdio};
use crate::program::Program;
use crate::session::{self, Line, Outbox, Session};
use crate::upstream::Upstream;
use crate::upstream::link::{FromUpstream, Link};

/// Batches for the client's stdout before a pump waits.
const TO_CLIENT: usize = 16;
/// How long the link may take to end (its grace for answers in flight, then `DELETE`).
const LINK_CLOSE: Duration = Duration::from_secs(8);
/// How long the last output to the client may take before we give up on it.
const CLIENT_DRAIN: Duration = Duration::from_secs(5);
/// How often the decision files of calls waiting for `mcpwall approve` are read.
const APPROVAL_POLL: Duration = Duration::from_millis(200);

/// Bridge options from the command line.
#[derive(Debug, Clone)]
pub struct Options {
    /// The server's name, for `server:` matchers and the audit log.
    pub server_name: String,
    pub chatter: Chatter,
    /// The tool-definition guard (`None`: none).
    pub guard: Option<Arc<crate::guard::Guard>>,
    /// Where calls an `ask` rule holds wait for `mcpwall approve`.
    pub home: Option<PathBuf>,
}

/// The bridge could not run.
#[derive(Debug, thiserror::Error)]
pub enum BridgeError {
    #[error("cannot set up mcpwall's own stdin/stdout: {0}")]
    Stdio(#[source] std::io::Error),
}

struct Bridge {
    session: Mutex<Session>,
    audit: AuditSender,
    chatter: Chatter,
    to_client: Mutex<Option<mpsc::Sender<Vec<u8>>>>,
    to_upstream: Mutex<Option<mpsc::Sender<Vec<u8>>>>,
    home: Option<PathBuf>,
    queue: Mutex<Option<ApprovalQueue>>,
    deadline_changed: Notify,
}

/// Run the bridge with our stdin/stdout as the client until the client closes its side,
/// a signal comes, or the upstream ends the session. Returns the exit code: 0, or 1 when
/// the upstream ended the session.
pub async fn run(
    upstream: Arc<Upstream>,
    program: Arc<Program>,
    audit: AuditSender,
    options: Options,
    mut signals: mpsc::UnboundedReceiver<i32>,
) -> Result<u8, BridgeError> {
    let stdio::Stdio {
        reader: client_in,
        writer: client_out,
        guard: _stdio_guard,
        ..
    } = stdio::open().map_err(BridgeError::Stdio)?;
    program.detector();
    let max_line = program.settings().max_frame_bytes;
    let session = Session::new(
        program,
        session::Options {
            server_name: options.server_name.as_str().into(),
            guard: options.guard.clone(),
            audit: audit.enabled(),
            log_level: options.chatter.level,
        },
    );
    let link = Link::start(upstream, max_line, options.chatter);
    let (client_tx, client_rx) = mpsc::channel(TO_CLIENT);
    let writer = tokio::spawn(write_client(client_out, client_rx));
    let bridge = Arc::new(Bridge {
        session: Mutex::new(session),
        audit,
        chatter: options.chatter,
        to_client: Mutex::new(Some(client_tx)),
        to_upstream: Mutex::new(Some(link.to_upstream)),
        home: options.home,
        queue: Mutex::new(None),
        deadline_changed: Notify::new(),
    });
    let mut reader = tokio::spawn(
        bridge
            .clone()
            .read_client(LineReader::new(client_in, max_line)),
    );
    let mut judge = tokio::spawn(bridge.clone().read_upstream(link.from_upstream));
    let approvals = tokio::spawn(bridge.clone().expire_approvals());
    let mut code = 0;
    let mut judged_all = false;
    tokio::select! {
        _ = &mut reader => {}
        Some(sig) = signals.recv() => {
            bridge.chatter.log(LogLevel::Info, format_args!("received signal {sig}; ending the upstream session"));
        }
        gone = &mut judge => {
            judged_all = true;
            if gone.unwrap_or(false) {
                code = 1;
            }
        }
    }
    reader.abort();
    // The link sends what is left, waits a moment for answers in flight, then DELETEs.
    bridge.lock_upstream().take();
    let mut task = link.task;
    if tokio::time::timeout(LINK_CLOSE, &mut task).await.is_err() {
        task.abort();
    }
    if !judged_all
        && tokio::time::timeout(CLIENT_DRAIN, &mut judge)
            .await
            .is_err()
    {
        judge.abort();
    }
    approvals.abort();
    // Every request still pending gets an error.
    let mut out = Outbox::default();
    bridge
        .lock_session()
        .server_gone("the upstream connection closed", &mut out);
    bridge.deliver(out).await;
    bridge
        .to_client
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take();
    if tokio::time::timeout(CLIENT_DRAIN, writer).await.is_err() {
        bridge.chatter.log(
            LogLevel::Warn,
            format_args!("the client is not reading; exiting anyway"),
        );
    }
    Ok(code)
}

async fn write_client<W: AsyncWrite + Unpin>(mut w: W, mut rx: mpsc::Receiver<Vec<u8>>) {
    while let Some(bytes) = rx.recv().await {
        if w.write_all(&bytes).await.is_err() {
            return;
        }
        if rx.is_empty() && w.flush().await.is_err() {
            return;
        }
    }
    let _ = w.flush().await;
    let _ = w.shutdown().await;
}

impl Bridge {
    fn lock_session(&self) -> MutexGuard<'_, Session> {
        self.session.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn lock_upstream(&self) -> MutexGuard<'_, Option<mpsc::Sender<Vec<u8>>>> {
        self.to_upstream.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Judge each line the client writes until its side closes.
    async fn read_client(self: Arc<Self>, mut reader: LineReader<stdio::Reader>) {
        loop {
            loop {
                let mut out = Outbox::default();
                {
                    let Some(line) = reader.next_buffered() else {
                        break;
                    };
                    self.lock_session().from_client(line, &mut out);
                }
                self.deliver(out).await;
            }
            match reader.fill().await {
                Ok(true) => {}
                Ok(false) => {
                    // A last line without its newline is refused, never forwarded.
                    let mut out = Outbox::default();
                    while let Some(line) = reader.next_buffered() {
                        self.lock_session().from_client(line, &mut out);
                    }
                    self.deliver(out).await;
                    return;
                }
                Err(e) => {
                    self.chatter.log(
                        LogLevel::Info,
                        format_args!("reading the client failed: {e}"),
                    );
                    return;
                }
            }
        }
    }

    /// Judge what the upstream sends. Returns whether the upstream ended the session.
    async fn read_upstream(self: Arc<Self>, mut rx: mpsc::Receiver<FromUpstream>) -> bool {
        while let Some(item) = rx.recv().await {
            let mut out = Outbox::default();
            let gone = {
                let mut session = self.lock_session();
                match &item {
                    FromUpstream::Message(data) => {
                        session.from_server(Line::Frame(data), &mut out, false);
                        false
                    }
                    FromUpstream::TooLarge { len, head } => {
                        let line = Line::TooLarge { len: *len, head };
                        session.from_server(line, &mut out, false);
                        false
                    }
                    FromUpstream::Unanswered { sent, why } => {
                        session.unanswered(sent, why, &mut out);
                        false
                    }
                    FromUpstream::Gone(why) => {
                        session.server_gone(why, &mut out);
                        true
                    }
                }
            };
            self.deliver(out).await;
            if gone {
                self.chatter.log(
                    LogLevel::Warn,
                    format_args!("the upstream ended the session"),
                );
                return true;
            }
        }
        false
    }

    /// Hand out what one call of the session produced.
    async fn deliver(&self, mut out: Outbox) {
        for notice in &out.notices {
            self.chatter
                .log(notice.level, format_args!("{}", notice.text));
        }
        if !out.events.is_empty() {
            for e in &mut out.events {
                e.transport = Some("upstream");
            }
            self.audit.send(&mut out.events);
        }
        self.offer_approvals(&mut out);
        if out.asked {
            self.deadline_changed.notify_one();
        }
        if !out.to_server.is_empty() {
            let tx = self.lock_upstream().clone();
            if let Some(tx) = tx {
                let _ = tx.send(std::mem::take(&mut out.to_server)).await;
            }
        }
        if !out.to_client.is_empty() {
            let tx = self
                .to_client
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone();
            if let Some(tx) = tx {
                let _ = tx.send(out.to_client).await;
            }
        }
    }

    /// Calls held for `mcpwall approve` go to the pending queue; calls no longer held
    /// leave it.
    fn offer_approvals(&self, out: &mut Outbox) {
        if out.approvals.is_empty() && out.withdrawn.is_empty() {
            return;
        }
        let mut queue = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        crate::approval_queue::hand_over(&mut queue, self.home.as_deref(), out, &self.chatter);
    }

    /// The session has no clock: refuse held calls whose time is up, and apply the
    /// decisions `mcpwall approve` wrote.
    async fn expire_approvals(self: Arc<Self>) {
        loop {
            let (deadline, waiting) = {
                let s = self.lock_session();
                (s.next_deadline(), !s.awaiting_cli().is_empty())
            };
            let poll = waiting.then(|| std::time::Instant::now() + APPROVAL_POLL);
            let Some(at) = [deadline, poll].into_iter().flatten().min() else {
                self.deadline_changed.notified().await;
                continue;
            };
            tokio::select! {
                () = tokio::time::sleep_until(at.into()) => {
                    let mut out = Outbox::default();
                    {
                        let queue = self.queue.lock().unwrap_or_else(|e| e.into_inner());
                        if let Some(queue) = queue.as_ref() {
                            queue.apply_decisions(&mut self.lock_session(), &mut out);
                        }
                    }
                    self.lock_session().expire(std::time::Instant::now(), &mut out);
                    self.deliver(out).await;
                }
                () = self.deadline_changed.notified() => {}
            }
        }
    }
}
