//! Bridge mode, `mcpwall --upstream URL`: stdio towards the client, Streamable HTTP towards
//! a remote server ([`crate::upstream`]), one [`Session`] judging every message both ways,
//! as the stdio proxy does with a child process.
//!
//! ```text
//! client stdin ─► LineReader ─► Session::from_client ─┬─► Link ─► POST / GET ─► server
//!                                                      │
//! client stdout ◄─ writer ◄─ Session::from_server ◄────┴── FromUpstream ◄── server
//! ```
//! The bridge is a [`Driven`] conversation: `crate::driver` reads the client's lines and
//! the link's reports, judges them (a large line off the I/O thread, the session behind an
//! async lock), hands out what comes of them and runs the approval timer; what is the
//! bridge's own is its two sides, the client's stdout and the link.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

use crate::audit::AuditSender;
use crate::driver::approvals::Approvals;
use crate::driver::handout::{Handout, Side};
use crate::driver::judging::{Held, Judging, OFF_LOOP_BYTES, Share, SharedSession};
use crate::driver::{Driven, Judged, reading};
use crate::io::codec::LineReader;
use crate::io::{Chatter, LogLevel, stdio};
use crate::program::Program;
use crate::session::{self, Line, Outbox, Peer, Session};
use crate::upstream::Upstream;
use crate::upstream::link::Link;

/// Batches for the client's stdout before a pump waits.
const TO_CLIENT: usize = 16;
/// How long the link may take to end (its grace for answers in flight, then `DELETE`).
const LINK_CLOSE: Duration = Duration::from_secs(8);
/// How long the last output to the client may take before we give up on it.
const CLIENT_DRAIN: Duration = Duration::from_secs(5);

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
    session: SharedSession,
    /// Large lines are judged off the loop one at a time (see `driver::judging`).
    share: Share,
    handout: Handout,
    to_client: Side,
    to_upstream: Side,
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
    let chatter = options.chatter;
    let bridge = Arc::new(Bridge {
        session: Arc::new(tokio::sync::Mutex::new(session)),
        share: Share::default(),
        handout: Handout {
            chatter,
            audit,
            approvals: Arc::new(Approvals::new(options.home, chatter, false)),
            transport: Some("upstream"),
        },
        to_client: Side::new(client_tx),
        to_upstream: Side::new(link.to_upstream),
    });
    let mut reader = tokio::spawn({
        let bridge = bridge.clone();
        async move {
            let reader = LineReader::new(client_in, max_line);
            reading::relay(reader, Peer::Client, &*bridge, &chatter).await;
        }
    });
    let mut judge = tokio::spawn(bridge.clone().read_upstream(link.from_upstream));
    let approvals = tokio::spawn({
        let bridge = bridge.clone();
        async move { bridge.handout.approvals.run(&*bridge).await }
    });
    let mut code = 0;
    let mut judged_all = false;
    tokio::select! {
        _ = &mut reader => {}
        Some(sig) = signals.recv() => {
            chatter.log(LogLevel::Info, format_args!("received signal {sig}; ending the upstream session"));
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
    bridge.to_upstream.close();
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
    let (out, ()) = bridge
        .act(|session, out| session.server_gone("the upstream connection closed", out))
        .await;
    bridge.deliver(out).await;
    bridge.to_client.close();
    if tokio::time::timeout(CLIENT_DRAIN, writer).await.is_err() {
        chatter.log(
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
    /// Judge what the upstream sends. Returns whether the upstream ended the session.
    async fn read_upstream(
        self: Arc<Self>,
        mut rx: mpsc::Receiver<crate::upstream::link::FromUpstream>,
    ) -> bool {
        let Some(why) = reading::relay_upstream(&mut rx, &*self).await else {
            return false;
        };
        let (out, ()) = self
            .act(|session, out| session.server_gone(&why, out))
            .await;
        self.deliver(out).await;
        self.handout.chatter.log(
            LogLevel::Warn,
            format_args!("the upstream ended the session"),
        );
        true
    }
}

impl Bridge {
    fn judging(&self) -> Judging<'_> {
        Judging {
            session: &self.session,
            share: &self.share,
            off_loop: OFF_LOOP_BYTES,
        }
    }
}

impl Judged for Bridge {
    async fn judge(&self, from: Peer, line: Line<'_>) -> Outbox {
        let mut out = Outbox::default();
        self.judging().judge(from, line, &mut out, false).await;
        out
    }

    async fn judge_held(&self, held: Held) -> (Outbox, Held) {
        let mut out = Outbox::default();
        let (_, held) = self.judging().judge_held(held, &mut out, false).await;
        (out, held)
    }
}

impl Driven for Bridge {
    async fn act<R>(&self, f: impl FnOnce(&mut Session, &mut Outbox) -> R) -> (Outbox, R) {
        let mut out = Outbox::default();
        let r = f(&mut *self.session.lock().await, &mut out);
        (out, r)
    }

    async fn deliver(&self, mut out: Outbox) {
        self.handout.side_effects(&mut out);
        self.to_upstream.send(&mut out.to_server).await;
        self.to_client.send(&mut out.to_client).await;
    }
}
