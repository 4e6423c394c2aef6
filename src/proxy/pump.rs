//! The two pumps, I/O only. Each reads lines from one side, hands every line to the
//! [`Session`] and moves what comes back: bytes for each side into that side's
//! [`Sink`], audit events to the audit writer, notices to stderr. A sink's bytes are
//! handed to that side's single writer task when no complete line is left in the input
//! buffer (so pipelined frames go out in one write, and a lone round trip is never
//! delayed) or when they grow large. The writer queues are bounded in batches and bytes
//! ([`super::queue`]), so a slow reader on either side slows the pump that feeds it
//! instead of growing memory.

use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio::io::AsyncRead;

use super::queue::{Queue, Splice, WeakQueue};
use crate::driver::handout::Handout;
use crate::driver::judging::{Held, Judging, OFF_LOOP_BYTES_ALONE, Share, SharedSession};
use crate::driver::reading::{self, Ended, Feed};
use crate::io::codec::{Line, LineReader};
use crate::session::{Delivery, Outbox, Peer, Session};

/// Hand a sink's bytes to its writer once it holds this much, even mid-burst, so the
/// peer starts on the first frames of a pipelined burst while the rest are judged.
/// Holding a whole 32-call burst (about 7 KB) until it was judged left the server idle
/// meanwhile: with 2 KiB, pipelined calls ran about 1.3x as fast at the same CPU time.
/// 1 KiB ran about 1.1x as fast again (two same-run comparisons, of 5 and 7 rounds, with
/// a burst's refusals held to its end); 3 KiB and more, or no mid-burst flush of
/// answers, ran slower, 512 bytes or a flush per frame cost more CPU for less.
const FLUSH_BYTES: usize = 1024;
/// Initial capacity of a sink buffer.
const SINK_BUF: usize = 8 * 1024;

/// Frames at least this long from the server that go out unchanged or redacted are
/// written from the buffer they were read into (`LineReader::detach_line`), not copied.
/// A 1 MiB result lived four times over (read, decoded, forwarded copy, and the one
/// before still being written); now twice (see [`before_large_line`]). Frames of
/// [`OFF_LOOP_BYTES_ALONE`] and more are judged off the loop (`driver::judging`) in the
/// same buffer, handed over and back.
const DETACH_BYTES: usize = 256 * 1024;

/// The session both pumps feed, judged through `driver::judging` (a line of
/// [`OFF_LOOP_BYTES_ALONE`] or more off the loop). Both pumps run on one current-thread
/// runtime, so the lock is contended only while a large client line is judged off the
/// loop. With it, whether a frame is being judged off the loop, and how the server
/// side's pump tells the client side's that held lines went out.
#[derive(Clone)]
pub(crate) struct Shared {
    session: SharedSession,
    /// The proxy's one conversation: one large line judged off the loop at a time.
    share: Share,
    /// The server side's pump waits for a frame judged off the loop.
    scanning: Arc<AtomicBool>,
    held: Arc<HeldDrain>,
}

/// Client lines held behind an unanswered list (session contract point 6) are released
/// by the server side's pump, when the list's answer comes, into its weak sender to the
/// server. At the client's end of input the client side's pump keeps its strong sender
/// (so the server's stdin stays open) until none is held and the server side's pump has
/// no released line left to hand over.
#[derive(Default)]
pub(crate) struct HeldDrain {
    /// Notified whenever the server side's pump has handed its lines for the server over.
    flushed: tokio::sync::Notify,
    /// The server side's pump holds lines for the server it has not handed over yet.
    unsent: AtomicBool,
    /// The client side's pump waits (its input ended): only then is `flushed` notified,
    /// so a session in full flow pays no lock per flush.
    waiting: AtomicBool,
}

/// How long, after the client's end of input, held lines may wait for the server to
/// answer the list they wait for before they are given up (and answered with an error):
/// a server that never answers must not keep mcpwall running without a client.
const HELD_DRAIN: std::time::Duration = std::time::Duration::from_secs(30);

impl Shared {
    pub fn new(session: Session) -> Shared {
        Shared {
            session: Arc::new(tokio::sync::Mutex::new(session)),
            share: Share::default(),
            scanning: Arc::default(),
            held: Arc::default(),
        }
    }

    fn judging(&self) -> Judging<'_> {
        Judging {
            session: &self.session,
            share: &self.share,
            off_loop: OFF_LOOP_BYTES_ALONE,
        }
    }

    /// Wait until no client line is held and every released one was handed to the
    /// server's writer, or `HELD_DRAIN` passes.
    async fn held_drained(&self) {
        self.held.waiting.store(true, Ordering::SeqCst);
        let wait = async {
            loop {
                let flushed = self.held.flushed.notified();
                tokio::pin!(flushed);
                // Registered before the check, so a notification in between is not lost.
                flushed.as_mut().enable();
                let holds = self.lock().await.holds_client_lines();
                if !holds && !self.held.unsent.load(Ordering::SeqCst) {
                    return;
                }
                flushed.await;
            }
        };
        let _ = tokio::time::timeout(HELD_DRAIN, wait).await;
    }

    /// The server side's pump handed over what it had for the server (`unsent`: some
    /// is still left in its buffer).
    fn server_lines_flushed(&self, unsent: bool) {
        self.held.unsent.store(unsent, Ordering::SeqCst);
        if self.held.waiting.load(Ordering::SeqCst) {
            self.held.flushed.notify_waiters();
        }
    }

    pub async fn lock(&self) -> tokio::sync::MutexGuard<'_, Session> {
        self.session.lock().await
    }

    /// Whether the server side's pump is waiting for a frame it read to be judged off the
    /// loop: it is busy, not waiting for the server's output (see `STDOUT_DRAIN`).
    pub fn scanning(&self) -> bool {
        self.scanning.load(Ordering::Relaxed)
    }
}

/// The sending end of one writer task.
#[derive(Debug)]
enum SinkTx {
    Strong(Queue),
    /// The server side's pump only answers the server (blocked server requests) while
    /// the client side is still open; a weak sender lets the server's stdin close when
    /// the client side's pump finishes.
    Weak(WeakQueue),
}

/// Emptied batch buffers handed back by a writer task, so steady-state flushing does
/// not allocate; and the buffer of the last detached line written (see
/// `Pump::handle_line`).
#[derive(Debug, Clone, Default)]
pub(crate) struct BufPool(Arc<Mutex<Pooled>>);

#[derive(Debug, Default)]
struct Pooled {
    bufs: Vec<Vec<u8>>,
    line: Option<Vec<u8>>,
}

/// Buffers kept per pool, and the largest kept (a 20 MiB frame's buffer is dropped).
const POOL_BUFS: usize = 8;
const POOL_BUF_MAX: usize = 1024 * 1024;
/// The largest detached line's buffer kept (and decoded text kept, see
/// `Parsed::shrink_past`).
const POOL_LINE_MAX: usize = 4 * 1024 * 1024;

impl BufPool {
    fn lock(&self) -> std::sync::MutexGuard<'_, Pooled> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn take(&self) -> Vec<u8> {
        self.lock()
            .bufs
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(SINK_BUF))
    }

    pub fn give(&self, mut buf: Vec<u8>) {
        if buf.capacity() > POOL_BUF_MAX {
            return;
        }
        buf.clear();
        let mut pool = self.lock();
        if pool.bufs.len() < POOL_BUFS {
            pool.bufs.push(buf);
        }
    }

    /// Keep the buffer a detached line was written from, if not too large.
    pub fn give_line(&self, buf: Vec<u8>) {
        if buf.capacity() <= POOL_LINE_MAX {
            self.lock().line = Some(buf);
        }
    }

    pub fn take_line(&self) -> Option<Vec<u8>> {
        self.lock().line.take()
    }
}

/// The writer task of one side, and whether it is still there.
#[derive(Debug)]
pub(crate) struct Sink {
    tx: SinkTx,
    broken: bool,
    pool: BufPool,
}

impl Sink {
    pub fn strong(tx: Queue, pool: BufPool) -> Sink {
        Sink {
            tx: SinkTx::Strong(tx),
            broken: false,
            pool,
        }
    }

    pub fn weak(tx: WeakQueue, pool: BufPool) -> Sink {
        Sink {
            tx: SinkTx::Weak(tx),
            broken: false,
            pool,
        }
    }

    /// Hand `buf` to the writer, waiting for room in its queue; or, when nothing waits
    /// for it and it is short, write it into the writer's pipe at once. `buf` is left
    /// empty (with a pooled allocation).
    pub async fn flush(&mut self, buf: &mut Vec<u8>) {
        if buf.is_empty() {
            return;
        }
        if self.broken {
            buf.clear();
            return;
        }
        let Some(tx) = self.tx.queue() else {
            buf.clear();
            self.broken = true;
            return;
        };
        let written = tx.write_now(buf);
        if written == buf.len() {
            buf.clear();
            return;
        }
        buf.drain(..written);
        let batch = std::mem::replace(buf, self.pool.take());
        let sent = tx.send(batch).await.is_ok();
        if !sent {
            // The writer is gone (that side closed); keep consuming input so the
            // other side is not blocked, but stop producing for this one.
            self.broken = true;
        }
    }

    /// Whether [`Self::flush`] of `len` bytes would wait for room in the writer's queue
    /// (a peer that is not reading).
    fn would_wait(&self, len: usize) -> bool {
        self.tx.queue().is_some_and(|tx| tx.would_wait(len))
    }

    /// Wait until what was handed to the writer has been written.
    async fn drained(&self) {
        if let Some(tx) = self.tx.queue() {
            tx.drained().await;
        }
    }

    /// Queue one line spliced from `bytes` (see [`Splice`]), after `buf`.
    async fn send_spliced(&mut self, buf: &mut Vec<u8>, bytes: Vec<u8>, splice: Splice) {
        self.flush(buf).await;
        if self.broken {
            return;
        }
        let sent = match self.tx.queue() {
            Some(tx) => tx.send_spliced(bytes, splice).await.is_ok(),
            None => false,
        };
        if !sent {
            self.broken = true;
        }
    }
}

impl SinkTx {
    /// The writer's queue, while it has one (a weak sender's writer may be gone).
    fn queue(&self) -> Option<Cow<'_, Queue>> {
        match self {
            SinkTx::Strong(tx) => Some(Cow::Borrowed(tx)),
            SinkTx::Weak(tx) => tx.upgrade().map(Cow::Owned),
        }
    }
}

/// Reads one side and feeds the session.
pub(crate) struct Pump {
    session: Shared,
    from: Peer,
    /// What the session produced and the sinks have not taken yet.
    out: Outbox,
    to_client: Sink,
    to_server: Sink,
    /// Notices, audit events, and calls held for approval (their timer and the pending
    /// queue).
    handout: Handout,
}

impl Pump {
    pub fn new(
        session: Shared,
        from: Peer,
        to_client: Sink,
        to_server: Sink,
        handout: Handout,
    ) -> Pump {
        Pump {
            session,
            from,
            out: Outbox {
                to_client: to_client.pool.take(),
                to_server: to_server.pool.take(),
                ..Outbox::default()
            },
            to_client,
            to_server,
            handout,
        }
    }

    /// Read lines until EOF or a read error, judging each one (`driver::reading`).
    /// Writes are batched while more complete lines are buffered (pipelining) and
    /// flushed as soon as the input runs dry, so a lone round trip is never delayed. The
    /// server side keeps reading when the client is gone, so the server never blocks on a
    /// full pipe.
    pub async fn run<R: AsyncRead + Unpin>(mut self, mut reader: LineReader<R>) {
        let (from, chatter) = (self.from, self.handout.chatter);
        let ended = reading::read_lines(&mut reader, &mut self, from, &chatter).await;
        if ended == Ended::Eof && from == Peer::Client {
            // Lines held behind a list go to the server before its stdin closes (this
            // pump's end drops the last strong sender).
            self.session.held_drained().await;
        }
    }

    /// Judge one buffered line (`driver::judging`); one the session leaves in place is
    /// queued from the reader's buffer at once, after what the client's sink holds.
    /// Returns whether there was a line.
    async fn handle_line<R: AsyncRead + Unpin>(&mut self, reader: &mut LineReader<R>) -> bool {
        let Some(line) = reader.next_buffered() else {
            return false;
        };
        let judging = self.session.judging();
        // A frame judged off the loop was detached from the reader already.
        let mut detached = None;
        let delivery = match self.from {
            Peer::Client => {
                judging
                    .judge(Peer::Client, line, &mut self.out, false)
                    .await
            }
            Peer::Server => {
                let large = matches!(line, Line::Frame(raw) if raw.len() >= DETACH_BYTES);
                let spare = if large {
                    before_large_line(&self.to_client).await
                } else {
                    None
                };
                if judging.goes_off_loop(&line) {
                    // The reader goes on in the buffer of the frame written before.
                    let held = Held::detach(reader, spare.unwrap_or_default());
                    self.session.scanning.store(true, Ordering::Relaxed);
                    let (delivery, held) = judging.judge_held(held, &mut self.out, true).await;
                    self.session.scanning.store(false, Ordering::Relaxed);
                    detached = Some(held);
                    delivery
                } else {
                    if let Some(buf) = spare {
                        self.session.lock().await.give_server_text_buffer(buf);
                    }
                    judging
                        .judge(Peer::Server, line, &mut self.out, large)
                        .await
                }
            }
        };
        if self.from == Peer::Server && !self.out.to_server.is_empty() {
            // Released client lines may be among them: not handed over yet.
            self.session.held.unsent.store(true, Ordering::SeqCst);
        }
        self.handout.notices(&mut self.out);
        if let Delivery::InPlace(edits) = delivery {
            let Held { bytes, line } = match detached.take() {
                Some(held) => held,
                None => {
                    let fresh = self.session.lock().await.take_server_text_buffer();
                    Held::detach(reader, fresh)
                }
            };
            self.to_client
                .send_spliced(&mut self.out.to_client, bytes, Splice { line, edits })
                .await;
        }
        if let Some(held) = detached {
            self.to_client.pool.give_line(held.bytes);
        }
        true
    }

    /// Audit events first, then both sinks.
    async fn flush(&mut self) {
        self.handout.side_effects(&mut self.out);
        self.to_client.flush(&mut self.out.to_client).await;
        self.flush_to_server().await;
    }

    async fn flush_to_server(&mut self) {
        self.to_server.flush(&mut self.out.to_server).await;
        if self.from == Peer::Server {
            self.session
                .server_lines_flushed(!self.out.to_server.is_empty());
        }
    }

    /// Mid-burst: audit events first, then only the sinks holding at least
    /// `FLUSH_BYTES`. The other side's few lines (the refusals of a burst the server is
    /// being fed) wait for the end of the burst: flushed with the server's share, each
    /// took a write of its own and woke the client for it, about 3 per 32-call burst
    /// with 10% refused. Unless the full sink's peer is not reading: then both go, as at
    /// the end of a burst, so that the refusals do not wait for a stalled server.
    async fn flush_full(&mut self) {
        self.handout.side_effects(&mut self.out);
        let (c, s) = (self.out.to_client.len(), self.out.to_server.len());
        let (c_full, s_full) = (c >= FLUSH_BYTES, s >= FLUSH_BYTES);
        let stalled =
            (c_full && self.to_client.would_wait(c)) || (s_full && self.to_server.would_wait(s));
        if c_full || stalled {
            self.to_client.flush(&mut self.out.to_client).await;
        }
        if s_full || stalled {
            self.flush_to_server().await;
        }
    }
}

/// Two large buffers take turns, so that streaming large results holds each frame once
/// and faults in no new memory: the reader's, and one that is in turn the decoded text of
/// the frame being judged, the buffer the reader goes on in once that frame is detached,
/// and (the detached frame's) the one being written. Before a large line is judged, the
/// one before it must have been written: it was read while that one was being written,
/// and judging it decodes its text. Returns that one's buffer, for the session's decoded
/// text (a frame judged in line) or for the reader to go on in (a frame judged off the
/// loop, whose text the session decodes into the buffer it has).
async fn before_large_line(to_client: &Sink) -> Option<Vec<u8>> {
    to_client.drained().await;
    to_client.pool.take_line()
}

impl<R: AsyncRead + Unpin> Feed<R> for Pump {
    /// Mid-burst, a sink holding `FLUSH_BYTES` goes out (see [`Pump::flush_full`]).
    async fn next_line(&mut self, reader: &mut LineReader<R>) -> bool {
        if !self.handle_line(reader).await {
            return false;
        }
        if self.out.to_client.len() >= FLUSH_BYTES || self.out.to_server.len() >= FLUSH_BYTES {
            self.flush_full().await;
        }
        true
    }

    async fn dry(&mut self) {
        self.flush().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{LoadOptions, load_str};
    use crate::program::Program;
    use crate::proxy::queue::Batch;
    use crate::session::Options;
    use tokio::sync::mpsc::Receiver;

    fn session() -> Shared {
        let opts = LoadOptions {
            explicit: None,
            home: "/home/t".into(),
            project_dir: "/home/t/p".into(),
        };
        let text = "version: 1\nrules:\n  - name: no-keys\n    match:\n      arguments:\n        path:\n          regex: 'id_rsa'\n    action: deny\n";
        let policy = load_str("t.yml", text, &opts).unwrap();
        let program = Arc::new(Program::compile(&policy).unwrap());
        Shared::new(Session::new(program, Options::quiet("t")))
    }

    fn handout() -> Handout {
        let chatter = crate::io::Chatter {
            level: crate::config::policy::LogLevel::Error,
        };
        Handout {
            chatter,
            audit: crate::audit::Audit::disabled().sender(),
            approvals: Arc::new(crate::driver::approvals::Approvals::new(
                None, chatter, false,
            )),
            transport: None,
        }
    }

    fn call(id: usize, path: &str) -> String {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"read_file","arguments":{{"path":"{path}"}}}}}}"#
        ) + "\n"
    }

    /// Three refused calls, each followed by allowed ones longer than `FLUSH_BYTES`;
    /// and how many calls that is.
    fn burst() -> (String, usize) {
        let mut burst = String::new();
        let mut id = 0;
        for _ in 0..3 {
            id += 1;
            burst += &call(id, "/home/t/.ssh/id_rsa");
            let run_start = burst.len();
            while burst.len() - run_start <= FLUSH_BYTES {
                id += 1;
                burst += &call(id, "/home/t/p/src/main.rs");
            }
        }
        (burst, id)
    }

    /// The batches queued so far, as text.
    fn batches(rx: &mut Receiver<Batch>) -> Vec<String> {
        let mut out = Vec::new();
        while let Ok(b) = rx.try_recv() {
            out.push(String::from_utf8(b.into_bytes()).unwrap());
        }
        out
    }

    /// Run the inbound pump over `input`, read at once (one burst), with a server
    /// queue of `server_batches` batches and `server_bytes` bytes; give up after 200 ms.
    /// Returns whether it finished, and the batches for the server and the client.
    fn run_inbound(
        input: &str,
        server_batches: usize,
        server_bytes: usize,
    ) -> (bool, Vec<String>, Vec<String>) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        rt.block_on(async {
            let (server_tx, mut server_rx) =
                super::super::queue::queue(server_batches, server_bytes);
            let (client_tx, mut client_rx) = super::super::queue::queue(64, 1 << 20);
            let inbound = Pump::new(
                session(),
                Peer::Client,
                Sink::strong(client_tx, BufPool::default()),
                Sink::strong(server_tx, BufPool::default()),
                handout(),
            );
            let run = inbound.run(LineReader::new(input.as_bytes(), 1 << 20));
            let finished = tokio::time::timeout(std::time::Duration::from_millis(200), run)
                .await
                .is_ok();
            (finished, batches(&mut server_rx), batches(&mut client_rx))
        })
    }

    /// The server gets the allowed calls of a burst as they are judged, in several
    /// writes; the client gets the refusals together, once the burst is judged.
    #[test]
    fn refusals_of_a_burst_go_to_the_client_in_one_write() {
        let (burst, calls) = burst();
        let (finished, to_server, to_client) = run_inbound(&burst, 64, 1 << 20);
        assert!(finished);
        assert!(to_server.len() >= 3, "server batches: {}", to_server.len());
        assert_eq!(to_server.concat().lines().count(), calls - 3);
        assert_eq!(to_client.len(), 1, "client batches: {to_client:#?}");
        let refused: Vec<&str> = to_client[0].lines().collect();
        assert_eq!(refused.len(), 3, "{refused:#?}");
        assert!(
            refused.iter().all(|l| l.contains("no-keys")),
            "{refused:#?}"
        );
    }

    /// The server stops reading after the first mid-burst flush (its queue has room for
    /// one batch, which nobody takes): the refusals judged before the pump waits for
    /// the server reach the client.
    #[test]
    fn refusals_do_not_wait_for_a_stalled_server() {
        let (burst, _) = burst();
        let (finished, _, to_client) = run_inbound(&burst, 1, 1);
        assert!(!finished, "the pump should be waiting for the server");
        assert_eq!(to_client.concat().lines().count(), 2, "{to_client:#?}");
    }
}
