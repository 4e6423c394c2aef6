//! Judging a conversation's lines without holding up the others.
//!
//! A message is judged in time linear in its size, but a large one still takes a while
//! (tens of milliseconds per MiB of adversarial path-like text). On a runtime that serves
//! many conversations on one thread (the gateway), judging it there stalls every other
//! identity for that long, and signals are not seen; in the stdio proxy, it stalls the
//! other side of the one conversation. So a line of at least the transport's
//! [`Judging::off_loop`] bytes is judged on the blocking pool, while the I/O thread goes
//! on with everything else; the smaller ones, which are nearly all, are judged in place
//! (the hand-over costs a thread wake-up).
//!
//! Every transport judges a large line the same way:
//! - **A server's line** is held in a buffer of its own ([`Held`]: the reader's buffer,
//!   detached from it, or an upstream's message), never copied. The session gives out
//!   its content scan ([`Session::scan_off_loop`]), which runs on the blocking pool while
//!   the session stays free for the client's lines (one large answer stalls nothing but
//!   itself); the verdict is then put together in the session. The buffer comes back, so
//!   a line that goes out unchanged or redacted can be written from it (the stdio
//!   proxy's `in_place`) and a reader can go on in it. A line whose scan the session
//!   cannot give out (a batch; an answer whose id is not in its first bytes) is judged
//!   whole on the blocking pool, the session held meanwhile.
//! - **A client's line** is judged whole on the blocking pool, the session held
//!   meanwhile (a call's judging changes the session's tables throughout); it is copied
//!   for that thread once it is its turn.
//!
//! Off the loop, two bounds keep one identity from taking the machine: at most one of its
//! large lines is judged at a time (its [`Share`]), and all identities together judge at
//! most one large line per core but one (the I/O thread keeps a core). Both semaphores
//! are first-come first-served, and each identity has at most one line waiting for a
//! core, so the cores go round the identities that wait.
//!
//! A session that consults the replicas' shared state (`settings.shared_state`: a Redis
//! round trip for a rate-limited or breaker-guarded call, or a tool list's pins) has
//! every line judged on the blocking pool, whatever its size: it waits on the network,
//! not on a core, so it takes neither semaphore, and the I/O thread serves the other
//! identities meanwhile.

use std::ops::Range;
use std::sync::{Arc, OnceLock};

use tokio::io::AsyncRead;
use tokio::sync::{Mutex, Semaphore};

use crate::io::codec::LineReader;
use crate::session::{Delivery, FrameScan, Line, Outbox, Peer, Session};

/// Lines at least this long are judged on the blocking pool by a transport that serves
/// many conversations (the gateway, the bridge). At 64 KiB a line costs about a
/// millisecond to judge at the slowest measured rate, under what a victim's call would
/// notice; the hand-over costs tens of microseconds.
pub const OFF_LOOP_BYTES: usize = 64 * 1024;

/// Lines at least this long are judged on the blocking pool by the stdio proxy, whose
/// process serves one conversation: judging a smaller one in line holds up only the
/// other side of that conversation, for the time of one frame (issue 22: no head-of-line
/// stall beyond the frame itself). The hand-over costs a thread wake-up and a third large
/// buffer (the reader goes on in another while the frame's is away). At 4 MiB, a 2-4 MiB
/// frame still held the client's lines back for its whole scan (tens of milliseconds for
/// an adversarial one). At 1 MiB the responses of the shared throughput bench (1 MiB of
/// text each) were handed over too, which cost that scenario about 10% more proxy CPU
/// and 40% more peak memory (0.19 → 0.21 s, 12.2 → 17.1 MiB, five alternated rounds); at
/// 2 MiB it was unchanged.
pub const OFF_LOOP_BYTES_ALONE: usize = 2 * 1024 * 1024;

/// A session several tasks feed: locked across the judging of one line, which may be on
/// another thread, so an async lock (waiting for it never blocks the I/O thread).
pub type SharedSession = Arc<Mutex<Session>>;

/// One identity's right to judge a large line off the loop: one at a time.
#[derive(Clone)]
pub struct Share(Arc<Semaphore>);

impl Default for Share {
    fn default() -> Share {
        Share(Arc::new(Semaphore::new(1)))
    }
}

/// The cores large lines are judged on, for the whole process: all but one (at least one).
fn cores() -> &'static Semaphore {
    static CORES: OnceLock<Semaphore> = OnceLock::new();
    CORES.get_or_init(|| {
        let n = std::thread::available_parallelism().map_or(1, |n| n.get());
        Semaphore::new(n.saturating_sub(1).max(1))
    })
}

/// A line in a buffer of its own, which judging it off the loop takes to the judging
/// thread and gives back: `bytes[line]` is the line, without its `\n`.
#[derive(Debug, Default)]
pub struct Held {
    pub bytes: Vec<u8>,
    pub line: Range<usize>,
}

impl Held {
    /// The line [`LineReader::next_buffered`] just returned, in the buffer it was read
    /// into; the reader goes on in `fresh` (see [`LineReader::detach_line`]).
    pub fn detach<R: AsyncRead + Unpin>(reader: &mut LineReader<R>, fresh: Vec<u8>) -> Held {
        let (bytes, line) = reader.detach_line(fresh);
        Held { bytes, line }
    }

    /// A message that is a buffer of its own (an upstream's).
    pub fn whole(bytes: Vec<u8>) -> Held {
        Held {
            line: 0..bytes.len(),
            bytes,
        }
    }

    pub fn line(&self) -> &[u8] {
        &self.bytes[self.line.clone()]
    }
}

/// How one conversation has its lines judged: its session, the share of the identity it
/// judges for, and from what length a line is judged off the loop.
pub struct Judging<'a> {
    pub session: &'a SharedSession,
    pub share: &'a Share,
    /// [`OFF_LOOP_BYTES`] or [`OFF_LOOP_BYTES_ALONE`].
    pub off_loop: usize,
}

impl Judging<'_> {
    /// Whether `line` is judged off the loop; a server's is then handed over as a
    /// [`Held`] line ([`Self::judge_held`]) by a transport that can give up its buffer.
    pub fn goes_off_loop(&self, line: &Line<'_>) -> bool {
        matches!(line, Line::Frame(bytes) if bytes.len() >= self.off_loop)
    }

    /// Judge one line from `from` into `out`: in place when it is short, else off the
    /// loop (see the module docs). With `in_place`, a short server line that goes out
    /// unchanged or redacted is not copied into `out` ([`Session::from_server`]).
    pub async fn judge(
        &self,
        from: Peer,
        line: Line<'_>,
        out: &mut Outbox,
        in_place: bool,
    ) -> Delivery {
        let Line::Frame(bytes) = line else {
            let mut session = self.lock().await;
            return feed(&mut session, from, line, out, false);
        };
        if bytes.len() >= self.off_loop {
            return match from {
                // The caller keeps its buffer: a copy is held.
                Peer::Server => {
                    self.judge_held(Held::whole(bytes.to_vec()), out, false)
                        .await
                        .0
                }
                Peer::Client => self.judge_client_off_loop(bytes, out).await,
            };
        }
        let mut session = self.lock().await;
        if !session.consults_shared_state() {
            return feed(&mut session, from, line, out, in_place);
        }
        drop(session);
        let line = Held::whole(bytes.to_vec());
        let session = self.session.clone().lock_owned().await;
        on_pool(session, out, move |session, out| {
            feed(session, from, Line::Frame(line.line()), out, false);
        })
        .await;
        Delivery::Written
    }

    /// The session, for a short line. It is nearly always free (only a line judged off
    /// the loop holds it for long), and taking it without the wait's future saved about
    /// 280 instructions of the stdio proxy's 58k per pipelined call (callgrind).
    async fn lock(&self) -> tokio::sync::MutexGuard<'_, Session> {
        match self.session.try_lock() {
            Ok(session) => session,
            Err(_) => self.session.lock().await,
        }
    }

    /// A large client line, judged whole on the blocking pool once `share` and a core
    /// are free, the session held meanwhile.
    async fn judge_client_off_loop(&self, bytes: &[u8], out: &mut Outbox) -> Delivery {
        // The semaphores are never closed: an error cannot happen, and would only mean
        // judging without the bound.
        let _own = self.share.0.acquire().await;
        let _core = cores().acquire().await;
        // Copied for the judging thread only once it is this line's turn: lines waiting
        // for a core hold no second copy.
        let line = bytes.to_vec();
        let session = self.session.clone().lock_owned().await;
        on_pool(session, out, move |session, out| {
            session.from_client(Line::Frame(&line), out);
        })
        .await;
        Delivery::Written
    }

    /// Judge a large server line held in a buffer of its own into `out` (see the module
    /// docs), once `share` and a core are free; the buffer comes back with the delivery
    /// (empty if the judging thread panicked). With `in_place`, see
    /// [`Session::from_server`]: the line is then to be written from the buffer.
    pub async fn judge_held(
        &self,
        held: Held,
        out: &mut Outbox,
        in_place: bool,
    ) -> (Delivery, Held) {
        // On the heap: its state holds a frame's scan (the session's scratch, several
        // KiB) across awaits, which would otherwise make every read loop's task that
        // much larger for good (7 KiB more per idle gateway session, measured).
        Box::pin(self.judge_held_boxed(held, out, in_place)).await
    }

    async fn judge_held_boxed(
        &self,
        held: Held,
        out: &mut Outbox,
        in_place: bool,
    ) -> (Delivery, Held) {
        let _own = self.share.0.acquire().await;
        let _core = cores().acquire().await;
        // What is left of the line if its judging thread panics: the request it answers
        // is told from its first bytes.
        let head = held.line()[..held.line.len().min(HEAD_BYTES)].to_vec();
        let scan = self.session.lock().await.scan_off_loop(held.line());
        let judged = match scan {
            Some(mut scan) => {
                let scanned = tokio::task::spawn_blocking(move || {
                    scan.run(held.line());
                    (scan, held)
                })
                .await;
                match scanned {
                    Ok((scan, held)) => self.scanned(scan, held, out, in_place).await,
                    Err(_) => None,
                }
            }
            None => {
                // Judged whole: the session cannot tell what the line answers from its
                // head.
                let session = self.session.clone().lock_owned().await;
                on_pool(session, out, move |session, out| {
                    let line = Line::Frame(held.line());
                    (session.from_server(line, out, in_place), held)
                })
                .await
            }
        };
        match judged {
            Some(judged) => judged,
            None => {
                let delivery = self.session.lock().await.scan_lost(&head, out);
                (delivery, Held::default())
            }
        }
    }

    /// The verdict on a held line whose scan has run, put together in the session.
    async fn scanned(
        &self,
        scan: FrameScan,
        held: Held,
        out: &mut Outbox,
        in_place: bool,
    ) -> Option<(Delivery, Held)> {
        let mut session = self.session.clone().lock_owned().await;
        if !session.consults_shared_state() {
            let delivery = session.from_server_scanned(held.line(), scan, out, in_place);
            return Some((delivery, held));
        }
        on_pool(session, out, move |session, out| {
            let delivery = session.from_server_scanned(held.line(), scan, out, in_place);
            (delivery, held)
        })
        .await
    }
}

/// The first bytes of a line kept while its scan is away.
const HEAD_BYTES: usize = crate::io::codec::HEAD_BYTES;

/// Run `f` on the held session on the blocking pool, into an outbox of its own appended
/// to `out` when it is done. `None`: the thread panicked; nothing of what it wrote goes
/// out (the session's tables are as the panic left them), and what `out` held before is
/// kept.
async fn on_pool<T: Send + 'static>(
    mut session: tokio::sync::OwnedMutexGuard<Session>,
    out: &mut Outbox,
    f: impl FnOnce(&mut Session, &mut Outbox) -> T + Send + 'static,
) -> Option<T> {
    let mut own = Outbox {
        routes: out.routes.as_ref().map(|_| Vec::new()),
        ..Outbox::default()
    };
    let done = tokio::task::spawn_blocking(move || {
        let r = f(&mut session, &mut own);
        (r, own)
    })
    .await;
    let (r, own) = done.ok()?;
    append(out, own);
    Some(r)
}

/// Put what `more` holds after what `out` holds.
fn append(out: &mut Outbox, more: Outbox) {
    let Outbox {
        mut to_client,
        mut to_server,
        events,
        notices,
        judgements,
        approvals,
        withdrawn,
        asked,
        routes,
    } = more;
    for (into, from) in [
        (&mut out.to_client, &mut to_client),
        (&mut out.to_server, &mut to_server),
    ] {
        if into.is_empty() {
            std::mem::swap(into, from);
        } else {
            into.append(from);
        }
    }
    out.events.extend(events);
    out.notices.extend(notices);
    if let (Some(into), Some(from)) = (&mut out.judgements, judgements) {
        into.extend(from);
    }
    out.approvals.extend(approvals);
    out.withdrawn.extend(withdrawn);
    out.asked |= asked;
    if let (Some(into), Some(from)) = (&mut out.routes, routes) {
        into.extend(from);
    }
}

fn feed(
    session: &mut Session,
    from: Peer,
    line: Line<'_>,
    out: &mut Outbox,
    in_place: bool,
) -> Delivery {
    match from {
        Peer::Client => {
            session.from_client(line, out);
            Delivery::Written
        }
        Peer::Server => session.from_server(line, out, in_place),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::program::Program;
    use crate::session::Options;

    fn session() -> SharedSession {
        let opts = crate::config::LoadOptions {
            explicit: None,
            home: "/home/u".into(),
            project_dir: "/home/u/p".into(),
        };
        let policy =
            crate::config::load_str("t.yml", "version: 1\nrules: []\n", &opts).expect("loads");
        let program = Arc::new(Program::compile(&policy).expect("compiles"));
        Arc::new(Mutex::new(Session::new(program, Options::quiet("t"))))
    }

    fn call(id: u32, padding: usize) -> Vec<u8> {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"echo","arguments":{{"text":"{}"}}}}}}"#,
            "a".repeat(padding)
        )
        .into_bytes()
    }

    fn answer(id: u32, padding: usize) -> Vec<u8> {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[{{"type":"text","text":"{}"}}]}}}}"#,
            "b".repeat(padding)
        )
        .into_bytes()
    }

    fn judging<'a>(session: &'a SharedSession, share: &'a Share) -> Judging<'a> {
        Judging {
            session,
            share,
            off_loop: OFF_LOOP_BYTES,
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_large_line_is_judged_as_a_small_one_is() {
        let session = session();
        let share = Share::default();
        let judging = judging(&session, &share);
        for (id, padding) in [(1, 10), (2, OFF_LOOP_BYTES)] {
            let line = call(id, padding);
            let mut out = Outbox::default();
            judging
                .judge(Peer::Client, Line::Frame(&line), &mut out, false)
                .await;
            assert_eq!(out.to_server, [&line[..], b"\n"].concat());
        }
        assert_eq!(session.lock().await.calls_in_flight(), 2);
        for (id, padding) in [(1, 10), (2, OFF_LOOP_BYTES)] {
            let line = answer(id, padding);
            let mut out = Outbox::default();
            judging
                .judge(Peer::Server, Line::Frame(&line), &mut out, false)
                .await;
            assert_eq!(out.to_client, [&line[..], b"\n"].concat());
        }
        assert_eq!(session.lock().await.calls_in_flight(), 0);
    }

    /// A held answer that goes out unchanged is not copied: the delivery says so and the
    /// buffer it is to be written from comes back; the call it answers is done.
    #[tokio::test(flavor = "current_thread")]
    async fn a_held_answer_comes_back_to_be_written_in_place() {
        let session = session();
        let share = Share::default();
        let judging = judging(&session, &share);
        let mut out = Outbox::default();
        judging
            .judge(Peer::Client, Line::Frame(&call(7, 10)), &mut out, false)
            .await;
        let line = answer(7, 2 * OFF_LOOP_BYTES);
        let mut bytes = b"before\n".to_vec();
        bytes.extend_from_slice(&line);
        bytes.extend_from_slice(b"\nafter");
        let held = Held {
            line: 7..7 + line.len(),
            bytes,
        };
        let mut out = Outbox::default();
        let (delivery, back) = judging.judge_held(held, &mut out, true).await;
        assert_eq!(delivery, Delivery::InPlace(Vec::new()));
        assert_eq!(back.line(), &line[..]);
        assert!(out.to_client.is_empty());
        assert_eq!(session.lock().await.calls_in_flight(), 0);
    }

    /// While a large answer is scanned off the loop, the session is free: the client's
    /// lines go on being judged. Before, the whole session was held for the scan.
    #[tokio::test(flavor = "current_thread")]
    async fn the_session_is_free_while_a_large_answer_is_scanned() {
        let session = session();
        let share = Share::default();
        let mut out = Outbox::default();
        judging(&session, &share)
            .judge(Peer::Client, Line::Frame(&call(1, 10)), &mut out, false)
            .await;
        let free = Arc::new(std::sync::atomic::AtomicU32::new(0));
        let prober = {
            let (session, free) = (session.clone(), free.clone());
            tokio::spawn(async move {
                loop {
                    if session.try_lock().is_ok() {
                        free.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                    tokio::task::yield_now().await;
                }
            })
        };
        let mut out = Outbox::default();
        let held = Held::whole(answer(1, 64 * OFF_LOOP_BYTES));
        judging(&session, &share)
            .judge_held(held, &mut out, false)
            .await;
        prober.abort();
        assert!(!out.to_client.is_empty());
        assert!(free.load(std::sync::atomic::Ordering::Relaxed) > 1);
    }

    /// Every read loop's task holds the judging's future for good: what judging a large
    /// line keeps across its awaits (a frame's scan, with the session's scratch) is on
    /// the heap only while such a line is judged. Unboxed, the future was 33 KB in a
    /// debug build, and each idle gateway session 7 KiB larger in a release build.
    #[test]
    fn the_judging_future_is_small() {
        let session = session();
        let share = Share::default();
        let judging = judging(&session, &share);
        let mut out = Outbox::default();
        let judge = judging.judge(Peer::Server, Line::Frame(b"{}"), &mut out, false);
        let size = std::mem::size_of_val(&judge);
        drop(judge);
        assert!(size < 2048, "judge: {size} bytes");
        let held = judging.judge_held(Held::default(), &mut out, false);
        let size = std::mem::size_of_val(&held);
        drop(held);
        assert!(size < 2048, "judge_held: {size} bytes");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn the_loop_runs_while_a_large_line_is_judged() {
        let session = session();
        let share = Share::default();
        let line = call(1, 8 * OFF_LOOP_BYTES);
        let ticks = Arc::new(std::sync::atomic::AtomicU32::new(0));
        let ticker = {
            let ticks = ticks.clone();
            tokio::spawn(async move {
                loop {
                    ticks.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    tokio::task::yield_now().await;
                }
            })
        };
        let mut out = Outbox::default();
        judging(&session, &share)
            .judge(Peer::Client, Line::Frame(&line), &mut out, false)
            .await;
        ticker.abort();
        assert!(!out.to_server.is_empty());
        // On the loop, the ticker could not have run while the line was judged.
        assert!(ticks.load(std::sync::atomic::Ordering::Relaxed) > 1);
    }
}
