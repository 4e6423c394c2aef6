//! The stdio proxy: spawns the server and relays lines both ways through the
//! [`Session`], which alone decides what each line becomes.
//!
//! ```text
//! client stdin ─► LineReader ─► client pump ─┬─► server writer ─► server stdin
//!                                  Session ──┤
//! server stdout ─► LineReader ─► server pump ┴─► client writer ─► client stdout
//! ```
//! One writer task per sink, fed by a queue bounded in batches and bytes: frames never
//! interleave, and a slow side applies back-pressure to the pump that feeds it. [`run`]
//! owns the server process and the single shutdown path ([`shutdown::Shutdown`]).

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

mod approvals;
mod pump;
pub mod queue;
pub mod shutdown;

use crate::audit::AuditSender;
use crate::driver::approvals::Approvals;
use crate::driver::handout::Handout;
use crate::io::child::{self, describe};
pub use crate::io::child::{ChildSpec, SpawnError};
use crate::io::codec::LineReader;
use crate::io::stdio;
pub use crate::io::{Chatter, LogLevel};
use crate::program::Program;
use crate::session::{self, Outbox, Peer, Session};
use pump::{BufPool, Pump, Shared, Sink};
pub use shutdown::Grace;

/// Batches in flight to each writer before the pump feeding it waits.
const WRITER_CHANNEL: usize = 16;
/// After the server exits, how long its stdout may stay open (held by a grandchild)
/// before we stop reading it.
const STDOUT_DRAIN: Duration = Duration::from_secs(2);
/// Wait for the server side's pump to read the server's output to its end: `false` when
/// the output stays open `STDOUT_DRAIN` past the server's exit. Time the pump spends on a
/// frame scanned off the loop (a large final reply) does not count: it was read.
async fn drained(outbound: &mut JoinHandle<()>, session: &Shared) -> bool {
    loop {
        if tokio::time::timeout(STDOUT_DRAIN, &mut *outbound)
            .await
            .is_ok()
        {
            return true;
        }
        if !session.scanning() {
            return false;
        }
    }
}

/// How long what the server left running may take to end on SIGTERM before SIGKILL.
const LEFTOVER_GRACE: Duration = Duration::from_secs(1);
/// How long the last output to the client may take before we give up on it.
const CLIENT_DRAIN: Duration = Duration::from_secs(5);

/// Proxy options from the command line.
#[derive(Debug, Clone)]
pub struct Options {
    /// `--strict`, kept for the original mcpwall's command lines: lines that are not
    /// JSON-RPC are never forwarded, with or without it.
    pub strict: bool,
    /// The server's name for `server:` matchers and the audit log.
    pub server_name: String,
    pub chatter: Chatter,
    pub grace: Grace,
    /// The tool-definition guard for this session (`None`: no pinning, poison
    /// scanning, tool hiding or circuit breaker).
    pub guard: Option<Arc<crate::guard::Guard>>,
    /// The user's home: calls an `ask` rule holds while the client has no elicitation
    /// UI wait in its `.mcpwall/pending/` for `mcpwall approve`.
    pub home: Option<std::path::PathBuf>,
}

/// The proxy could not run.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    #[error(transparent)]
    Spawn(#[from] SpawnError),
    #[error("cannot set up mcpwall's own stdin/stdout: {0}")]
    Stdio(#[source] std::io::Error),
    #[error("waiting for the server failed: {0}")]
    Wait(#[source] std::io::Error),
}

/// Copy batches from the queue to `w` until every sender is gone.
async fn write_from<W: AsyncWrite + Unpin>(
    mut w: W,
    mut rx: mpsc::Receiver<queue::Batch>,
    pool: BufPool,
) -> std::io::Result<()> {
    while let Some(batch) = rx.recv().await {
        if let Some(splice) = batch.splice() {
            for piece in splice.pieces(batch.bytes()) {
                w.write_all(piece).await?;
            }
            pool.give_line(batch.into_bytes());
        } else {
            w.write_all(batch.bytes()).await?;
            // Written: its bytes leave the queue's budget.
            pool.give(batch.into_bytes());
        }
        if rx.is_empty() {
            w.flush().await?;
        }
    }
    w.flush().await?;
    w.shutdown().await
}

/// A server that has been spawned and is not connected to anything yet: nothing reaches
/// it until [`run`] has a Program.
pub struct Started {
    server: child::ServerProcess,
    server_in: tokio::process::ChildStdin,
    server_out: tokio::process::ChildStdout,
}

/// Spawn the server (inside the runtime), so that it starts while the policy compiles.
pub fn start(spec: &ChildSpec) -> Result<Started, ProxyError> {
    let (server, server_in, server_out) = child::spawn(spec)?;
    Ok(Started {
        server,
        server_in,
        server_out,
    })
}

/// Start the server's sandbox helper before the policy is loaded (inside the runtime):
/// [`start_prepared`] hands it the sandbox, and the helper's own start has overlapped
/// the load.
pub fn prepare(spec: &ChildSpec) -> Result<child::Prepared, ProxyError> {
    Ok(child::prepare(spec)?)
}

/// The [`prepare`]d server, in the sandbox of `plan` (`None`: `sandbox: off`).
pub async fn start_prepared(
    prepared: child::Prepared,
    plan: Option<Arc<crate::sandbox::Plan>>,
) -> Result<Started, ProxyError> {
    let (server, server_in, server_out) = prepared.start(plan).await?;
    Ok(Started {
        server,
        server_in,
        server_out,
    })
}

impl Started {
    /// The policy cannot run: kill the server, which has been sent nothing, and reap it.
    pub async fn abandon(mut self) {
        drop(self.server_in);
        self.server.signal(crate::platform::SIGKILL);
        let _ = self.server.wait().await;
    }
}

/// Run the [`Started`] server behind `program` with our stdin/stdout as the client,
/// until the server exits. `signals` delivers the signals mcpwall receives (SIGINT,
/// SIGTERM, SIGHUP); each is forwarded to the server and starts the shutdown. Returns
/// the exit code: the server's, or 128 + the signal that killed it.
pub async fn run(
    started: Started,
    program: Arc<Program>,
    audit: AuditSender,
    options: Options,
    mut signals: mpsc::UnboundedReceiver<i32>,
) -> Result<u8, ProxyError> {
    let stdio::Stdio {
        reader: client_in,
        writer: client_out,
        writer_pipe: client_pipe,
        guard: _stdio_guard,
    } = stdio::open().map_err(ProxyError::Stdio)?;
    let Started {
        mut server,
        server_in,
        server_out,
    } = started;
    // The first request's arguments and the reply to the handshake are scanned for
    // secrets: build the detector here while the server starts (no task runs yet). A
    // second warm-up thread did the same at the cost of another malloc arena, about
    // 1 MiB of RSS.
    program.detector();
    let session = Shared::new(Session::new(
        program.clone(),
        session::Options {
            server_name: options.server_name.as_str().into(),
            guard: options.guard.clone(),
            audit: audit.enabled(),
            log_level: options.chatter.level,
        },
    ));
    let max_line = program.settings().max_frame_bytes;

    let (mut client_tx, client_rx) = queue::queue(WRITER_CHANNEL, queue::QUEUE_BYTES);
    let (mut server_tx, server_rx) = queue::queue(WRITER_CHANNEL, queue::QUEUE_BYTES);
    // Every sender runs on this current-thread runtime: the contract of `write_to_pipe`.
    // The server's stdin is always a pipe (tokio makes it non-blocking).
    if let Some(pipe) = client_pipe {
        client_tx = client_tx.write_to_pipe(pipe);
    }
    if let Some(pipe) = crate::platform::direct_pipe(&server_in) {
        server_tx = server_tx.write_to_pipe(pipe);
    }
    let (client_pool, server_pool) = (BufPool::default(), BufPool::default());
    let mut client_writer = Some(tokio::spawn(write_from(
        client_out,
        client_rx,
        client_pool.clone(),
    )));
    let server_writer = tokio::spawn(write_from(server_in, server_rx, server_pool.clone()));

    let handout = Handout {
        chatter: options.chatter,
        audit: audit.clone(),
        // The human sits at this machine: a held call is also shown on the desktop.
        approvals: Arc::new(Approvals::new(options.home.clone(), options.chatter, true)),
        transport: None,
    };
    let approvals = approvals::Timer {
        session: session.clone(),
        sinks: tokio::sync::Mutex::new((
            Sink::strong(client_tx.clone(), client_pool.clone()),
            // Weak, like the outbound pump's: the server's stdin closes with the client side.
            Sink::weak(server_tx.downgrade(), server_pool.clone()),
        )),
        handout: handout.clone(),
    };
    let approvals = tokio::spawn(approvals.run());
    let outbound = Pump::new(
        session.clone(),
        Peer::Server,
        Sink::strong(client_tx.clone(), client_pool.clone()),
        Sink::weak(server_tx.downgrade(), server_pool.clone()),
        handout.clone(),
    );
    let inbound = Pump::new(
        session.clone(),
        Peer::Client,
        Sink::strong(client_tx.clone(), client_pool),
        Sink::strong(server_tx, server_pool),
        handout.clone(),
    );
    let mut outbound: JoinHandle<()> =
        tokio::spawn(outbound.run(LineReader::new(server_out, max_line)));
    let mut inbound: Option<JoinHandle<()>> = Some(tokio::spawn(
        inbound.run(LineReader::new(client_in, max_line)),
    ));
    let mut outbound_done = false;

    let mut shutdown = shutdown::Shutdown::new(options.grace);
    let chatter = options.chatter;
    // Stops the client side: the inbound pump's end drops the last strong sender to the
    // server writer, which then closes the server's stdin once drained.
    let stop_inbound = |inbound: &mut Option<JoinHandle<()>>| {
        if let Some(h) = inbound.take() {
            h.abort();
        }
    };

    // The escalation timer, kept across turns of the loop while its deadline stands.
    let mut escalation: Option<(std::time::Instant, Pin<Box<tokio::time::Sleep>>)> = None;
    let status = loop {
        let deadline = shutdown.deadline();
        if escalation.as_ref().map(|(at, _)| *at) != deadline {
            escalation = deadline.map(|at| (at, Box::pin(tokio::time::sleep_until(at.into()))));
        }
        tokio::select! {
            status = server.wait() => break status.map_err(ProxyError::Wait)?,
            _ = async { inbound.as_mut().unwrap().await }, if inbound.is_some() => {
                // The client closed its stdin (or reading it failed).
                inbound = None;
                shutdown.begin();
            }
            _ = &mut outbound, if !outbound_done => {
                // The server closed its stdout: it can answer nothing more.
                outbound_done = true;
                stop_inbound(&mut inbound);
                shutdown.begin();
            }
            r = async { client_writer.as_mut().unwrap().await }, if client_writer.is_some() => {
                // The client stopped reading (broken pipe): nobody is left to answer.
                client_writer = None;
                if let Ok(Err(e)) = r {
                    chatter.log(LogLevel::Info, format_args!("client output closed: {e}"));
                }
                stop_inbound(&mut inbound);
                shutdown.begin();
            }
            Some(sig) = signals.recv() => {
                chatter.log(LogLevel::Info, format_args!("received signal {sig}; passing it to the server"));
                server.signal(sig);
                stop_inbound(&mut inbound);
                shutdown.begin();
            }
            () = async { escalation.as_mut().unwrap().1.as_mut().await }, if escalation.is_some() => {
                escalation = None;
                if let Some(sig) = shutdown.escalate() {
                    chatter.log(LogLevel::Warn, format_args!(
                        "the server has not exited; sending {}",
                        crate::platform::signal_name(sig)
                    ));
                    server.signal(sig);
                }
            }
        }
    };

    // The server is gone. Read what it wrote before exiting (a large final reply
    // arrives whole), unless a grandchild keeps its stdout open.
    if !outbound_done && !drained(&mut outbound, &session).await {
        outbound.abort();
        // Something the server started still holds its stdout: it goes with the server.
        chatter.log(
            LogLevel::Info,
            format_args!("the server exited but left processes holding its output; ending them"),
        );
        server.end_leftovers(LEFTOVER_GRACE).await;
    }
    stop_inbound(&mut inbound);
    server_writer.abort();
    // It holds a sender to the client writer; the calls it held are answered below.
    approvals.abort();

    // Every request still pending gets an error, oldest first.
    let mut out = Outbox::default();
    session
        .lock()
        .await
        .server_gone(&describe(status), &mut out);
    audit.send(&mut out.events);
    handout.approvals.offer(&mut out);
    if !out.to_client.is_empty() {
        let _ = tokio::time::timeout(CLIENT_DRAIN, client_tx.send(out.to_client)).await;
    }
    drop(client_tx);
    drop(session);
    if let Some(w) = client_writer
        && tokio::time::timeout(CLIENT_DRAIN, w).await.is_err()
    {
        chatter.log(
            LogLevel::Warn,
            format_args!("the client is not reading; exiting anyway"),
        );
    }
    Ok(child::exit_code(status))
}
