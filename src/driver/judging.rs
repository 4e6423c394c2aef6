//! Judging a conversation's lines without holding up the others.
//!
//! A message is judged in time linear in its size, but a large one still takes a while
//! (tens of milliseconds per MiB of adversarial path-like text). On a runtime that serves
//! many conversations on one thread (the gateway), judging it there stalls every other
//! identity for that long, and signals are not seen. So a line of at least
//! [`OFF_LOOP_BYTES`] is judged on the blocking pool, while the I/O thread goes on with
//! everything else; the smaller ones, which are nearly all, are judged in place (the
//! hand-over costs a thread wake-up and a copy).
//!
//! Off the loop, two bounds keep one identity from taking the machine: at most one of its
//! large lines is judged at a time (its [`Share`]), and all identities together judge at
//! most one large line per core but one (the I/O thread keeps a core). Both semaphores
//! are first-come first-served, and each identity has at most one line waiting for a
//! core, so the cores go round the identities that wait.
//!
//! A session that consults the replicas' shared state (`settings.shared_state`: a Redis
//! round trip for a rate-limited or breaker-guarded call) has every line judged on the
//! blocking pool, whatever its size: it waits on the network, not on a core, so it takes
//! neither semaphore, and the I/O thread serves the other identities meanwhile.

use std::sync::{Arc, OnceLock};

use tokio::sync::{Mutex, Semaphore};

use crate::session::{Delivery, Line, Outbox, Peer, Session};

/// Lines at least this long are judged on the blocking pool. At 64 KiB a line costs about
/// a millisecond to judge at the slowest measured rate, under what a victim's call would
/// notice; the hand-over costs tens of microseconds.
pub const OFF_LOOP_BYTES: usize = 64 * 1024;

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

/// Judge one line from `from` with `session` into `out` (an empty outbox, with or without
/// routes) and return what comes of it: in place when it is short, else on the blocking
/// pool once `share` and a core are free.
pub async fn judge(
    session: &SharedSession,
    share: &Share,
    from: Peer,
    line: Line<'_>,
    mut out: Outbox,
) -> Outbox {
    let bytes = match line {
        Line::Frame(bytes) if bytes.len() >= OFF_LOOP_BYTES => bytes,
        small => {
            let mut guard = session.clone().lock_owned().await;
            let Line::Frame(bytes) = small else {
                feed(&mut guard, from, small, &mut out);
                return out;
            };
            if !guard.consults_shared_state() {
                feed(&mut guard, from, small, &mut out);
                return out;
            }
            let line = bytes.to_vec();
            let judged = tokio::task::spawn_blocking(move || {
                feed(&mut guard, from, Line::Frame(&line), &mut out);
                out
            })
            .await;
            return judged.unwrap_or_default();
        }
    };
    // The semaphores are never closed: an error cannot happen, and would only mean
    // judging without the bound.
    let _own = share.0.acquire().await;
    let _core = cores().acquire().await;
    // Copied for the judging thread only once it is this line's turn: lines waiting for
    // a core hold no second copy.
    let large = bytes.to_vec();
    let mut guard = session.clone().lock_owned().await;
    let judged = tokio::task::spawn_blocking(move || {
        feed(&mut guard, from, Line::Frame(&large), &mut out);
        out
    })
    .await;
    // `Err`: the judging thread panicked. The line was not judged, so nothing of it goes
    // out; the session's tables are as the panic left them.
    judged.unwrap_or_default()
}

fn feed(session: &mut Session, from: Peer, line: Line<'_>, out: &mut Outbox) {
    match from {
        Peer::Client => session.from_client(line, out),
        Peer::Server => {
            let delivery = session.from_server(line, out, false);
            debug_assert_eq!(delivery, Delivery::Written);
        }
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

    #[tokio::test(flavor = "current_thread")]
    async fn a_large_line_is_judged_as_a_small_one_is() {
        let session = session();
        let share = Share::default();
        for (id, padding) in [(1, 10), (2, OFF_LOOP_BYTES)] {
            let line = call(id, padding);
            let out = judge(
                &session,
                &share,
                Peer::Client,
                Line::Frame(&line),
                Outbox::default(),
            )
            .await;
            assert_eq!(out.to_server, [&line[..], b"\n"].concat());
        }
        assert_eq!(session.lock().await.calls_in_flight(), 2);
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
        let out = judge(
            &session,
            &share,
            Peer::Client,
            Line::Frame(&line),
            Outbox::default(),
        )
        .await;
        ticker.abort();
        assert!(!out.to_server.is_empty());
        // On the loop, the ticker could not have run while the line was judged.
        assert!(ticks.load(std::sync::atomic::Ordering::Relaxed) > 1);
    }
}
