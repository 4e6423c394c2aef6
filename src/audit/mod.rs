//! The audit log: one JSON line per decision, never secret bytes.
//!
//! Files are `<log_dir>/YYYY-MM-DD.audit.jsonl` (UTC date of the event), the directory
//! mode 0700 and the files 0600. The name differs from the original mcpwall's (Node)
//! `YYYY-MM-DD.jsonl` in the same default directory: this mcpwall never appends to a file
//! the original writes, and its readers take only files of its own name
//! ([`is_own_log_file`]), so the original's lines are never read as this mcpwall's. Events are formatted and written on a dedicated thread fed
//! by a bounded queue; the proxy never waits for it, so a slow or broken disk can cost
//! audit events (counted, reported once on stderr, and recorded in the chain as a gap
//! once writing works again, see [`records`]) but never stalls a frame.
//!
//! The writer is not woken per event: it wakes every [`LINGER`] or when
//! [`WAKE_AT`] events are queued, whichever comes first, and writes them in one system
//! call. Waking it per event cost a thread switch and a `write(2)` per frame, which on a
//! busy or single CPU dominated the proxy's round-trip time. Events therefore reach the
//! file at most [`LINGER`] after the decision (at once on a clean exit).
//!
//! # Event schema (stable; documented in the README)
//!
//! | key | type | meaning |
//! | --- | --- | --- |
//! | `ts` | string | RFC 3339 UTC time of the decision, microseconds |
//! | `session` | string | one id per proxy run; under `mcpwall serve`, one per HTTP session, socket or identity's stateless conversation (derived from its session id, never the id itself) |
//! | `server` | string | `--server-name` or the server command's basename; under `mcpwall serve` with several servers, the named server that judged |
//! | `direction` | string | `inbound` (client → server) or `outbound` (server → client) |
//! | `id` | JSON | the message's id exactly as sent, or `null` |
//! | `method` | string/null | the method (for responses: of the request answered) |
//! | `tool` | string/null | the tool of a `tools/call` (or of the call answered) |
//! | `action` | string | `allow`, `deny`, `pass`, `redact`, `block`, `log_only`, `drop`, `error`; for calls held by an `ask` rule: `ask`, then `approved`, `declined` or `timed_out` |
//! | `rule` | string/null | the deciding rule's name, or a built-in reason `mcpwall:…` |
//! | `message` | string/null | the rule's message or mcpwall's explanation |
//! | `redactions` | object | only when something was redacted: detector/rule name → count |
//! | `duration_us` | integer | only on answers to calls: time from request to answer |
//! | `args` | JSON | only with `log_args: full`, allowed requests, secrets redacted |
//! | `request` | string | only on denied requests: the telling argument, its value masked (`path: /hom…[18 chars]`) |
//! | `how` | string | only on `ask`/`approved`/`declined`/`timed_out`: `elicitation`, `cli`, `remembered`, `timeout` or `withdrawn` |
//! | `identity` | string | only for an authenticated client (`mcpwall serve` with tokens): the token's name |
//! | `transport` | string | only when not stdio: `http` (`mcpwall serve`), `websocket` (its `/ws` endpoint), `upstream` (bridge mode, `mcpwall --upstream URL`) |
//! | `prev`, `hash` | string | the hash chain ([`chain`]): last on every line |
//!
//! The writer's own lines ([`records`]: a cut line it sealed, a file found shorter than
//! its seal, a gap of lost events) have `record` as their second key.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs::{DirBuilder, File, OpenOptions};
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::platform;
pub use crate::session::event::{AuditEvent, Direction, Names, RuleRef, Verdict};

pub mod chain;
#[cfg(any(test, feature = "test-support"))]
pub mod fault;
pub mod files;
pub mod read;
pub mod records;
pub mod retention;
pub mod time;
pub mod verify;

/// Where and how to write.
#[derive(Debug, Clone)]
pub struct AuditConfig {
    pub dir: PathBuf,
    pub session: String,
    pub server: String,
    /// Applied by the writer thread when it starts (`None`: keep everything).
    pub retention: Option<retention::Cap>,
}

/// Events queued for the writer before new ones are dropped (bounds memory when the
/// disk stalls).
const MAX_QUEUED: usize = 16 * 1024;
/// Queued events that wake the writer before its next periodic round.
pub const WAKE_AT: usize = 256;
/// Emptied batches kept for reuse.
const SPARE_BATCHES: usize = 8;
/// A batch this small joins the last one queued instead of being queued itself.
const APPEND_AT_MOST: usize = 4;
/// Longest time an event waits in the queue.
pub const LINGER: Duration = Duration::from_millis(100);

#[derive(Debug, Default)]
struct Queue {
    /// The pumps' batches in the order they were handed over.
    batches: Vec<Vec<AuditEvent>>,
    /// Events in `batches`.
    len: usize,
    /// Emptied batches the writer gives back, so a pump's next batch keeps a capacity.
    spare: Vec<Vec<AuditEvent>>,
    /// No more events will come: write what is queued and stop.
    closed: bool,
    /// The writer has written everything and stopped.
    done: bool,
    /// Events ever accepted into `batches` (a [`Mark`] counts up to one of them).
    accepted: u64,
    /// Someone waits for events to be written ([`AuditSender::written`]): write now, not
    /// after the linger.
    urgent: bool,
}

#[derive(Debug, Default)]
struct Shared {
    queue: Mutex<Queue>,
    /// Signalled when `WAKE_AT` events are queued or the queue is closed.
    wake: Condvar,
    /// Signalled when the writer is done.
    finished: Condvar,
    dropped: AtomicU64,
    warned: AtomicBool,
    written: AtomicU64,
    /// Accepted events whose fate the writer settled: written, or recorded as lost.
    settled: AtomicU64,
    /// Signalled each time `settled` moves.
    settled_moved: tokio::sync::Notify,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Shared {
    /// Say once, on stderr, that audit events are being lost, and why.
    fn warn_once(&self, why: &str) {
        if !self.warned.swap(true, Ordering::Relaxed) {
            eprintln!("mcpwall: warning: audit events are being lost ({why}); proxying continues");
        }
    }
}

/// How many events had been handed to the writer when a batch was sent: waiting for the
/// mark ([`AuditSender::written`]) waits for that batch and everything before it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Mark(u64);

/// Cheap handle the pumps use to hand events to the writer.
#[derive(Debug, Clone)]
pub struct AuditSender {
    shared: Arc<Shared>,
    /// `false`: the log is disabled and events are discarded uncounted.
    enabled: bool,
}

impl AuditSender {
    /// Hand over every event in `batch` (leaving it empty). Never blocks on the disk.
    /// The mark says how far to wait to know the batch is in the file.
    pub fn send(&self, batch: &mut Vec<AuditEvent>) -> Mark {
        self.hand_over(batch, false).unwrap_or_default()
    }

    /// [`AuditSender::send`], unless the writer has finished: then the batch is left as
    /// it is and `false` returned (for a line that can be kept elsewhere until a later
    /// writer takes it).
    pub fn send_unless_finished(&self, batch: &mut Vec<AuditEvent>) -> bool {
        self.hand_over(batch, true).is_some()
    }

    /// `None` when the writer has finished and `keep_if_finished` (the batch untouched).
    fn hand_over(&self, batch: &mut Vec<AuditEvent>, keep_if_finished: bool) -> Option<Mark> {
        if batch.is_empty() || !self.enabled {
            batch.clear();
            return Some(Mark::default());
        }
        let shared = &self.shared;
        let n = batch.len();
        let mut queue = shared.lock();
        if queue.closed {
            drop(queue);
            if keep_if_finished {
                return None;
            }
            batch.clear();
            shared.dropped.fetch_add(n as u64, Ordering::Relaxed);
            return Some(Mark::default());
        }
        if queue.len + n > MAX_QUEUED {
            let mark = Mark(queue.accepted);
            drop(queue);
            batch.clear();
            shared.dropped.fetch_add(n as u64, Ordering::Relaxed);
            shared.warn_once("the audit writer cannot keep up with the traffic");
            return Some(mark);
        }
        let before = queue.len;
        match queue.batches.last_mut() {
            // A round trip hands over an event or two at a time. Taking its vector left
            // the pump an empty one to grow again, an allocation per round trip (the
            // writer gives back only a few); the events join the last batch instead.
            // Larger batches (pipelined bursts) are moved whole, never copied.
            Some(last) if n <= APPEND_AT_MOST => last.append(batch),
            _ => {
                let next = queue.spare.pop().unwrap_or_default();
                queue.batches.push(std::mem::replace(batch, next));
            }
        }
        queue.len += n;
        queue.accepted += n as u64;
        if before < WAKE_AT && queue.len >= WAKE_AT {
            shared.wake.notify_one();
        }
        Some(Mark(queue.accepted))
    }

    /// Returns once every event sent up to `mark` is written to the file (or recorded as
    /// lost, when the disk refuses it), waking the writer at once rather than after its
    /// linger. For an answer that must not reach the client before its audit line is on
    /// disk: a process killed after the answer then still leaves the line. Callers bound
    /// the wait (a writer stuck on a dead disk never settles).
    pub async fn written(&self, mark: Mark) {
        if !self.enabled {
            return;
        }
        let shared = &self.shared;
        loop {
            let moved = shared.settled_moved.notified();
            tokio::pin!(moved);
            moved.as_mut().enable();
            if shared.settled.load(Ordering::Acquire) >= mark.0 {
                return;
            }
            {
                let mut queue = shared.lock();
                if queue.done {
                    return;
                }
                queue.urgent = true;
                shared.wake.notify_one();
            }
            moved.await;
        }
    }

    /// Whether events go anywhere (lets callers skip building them).
    pub fn enabled(&self) -> bool {
        self.enabled
    }
}

/// The audit log writer.
pub struct Audit {
    sender: AuditSender,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Audit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Audit").finish_non_exhaustive()
    }
}

impl Audit {
    /// Start the writer thread.
    pub fn start(config: AuditConfig, names: Arc<dyn Names>) -> Audit {
        let shared = Arc::new(Shared::default());
        let writer = Writer {
            format: EventFormat::new(&config),
            config,
            names,
            shared: shared.clone(),
            file: None,
            day: i64::MIN,
            last_open_failure: None,
            out: String::with_capacity(64 * 1024),
            ends: Vec::new(),
            chained: Vec::with_capacity(64 * 1024),
            lost: Lost::default(),
            accounted: 0,
            last_round: time::now(),
            last_error: String::new(),
        };
        let thread = std::thread::Builder::new()
            .name("mcpwall-audit".into())
            .spawn(move || writer.run());
        match thread {
            Ok(thread) => Audit {
                sender: AuditSender {
                    shared,
                    enabled: true,
                },
                thread: Some(thread),
            },
            Err(e) => {
                shared.warn_once(&format!("cannot start the audit writer: {e}"));
                Audit {
                    sender: AuditSender {
                        shared,
                        enabled: false,
                    },
                    thread: None,
                }
            }
        }
    }

    /// An audit log that discards everything.
    pub fn disabled() -> Audit {
        Audit {
            sender: AuditSender {
                shared: Arc::default(),
                enabled: false,
            },
            thread: None,
        }
    }

    pub fn sender(&self) -> AuditSender {
        self.sender.clone()
    }

    /// Stop accepting events, write what is queued and wait for the writer (at most
    /// `timeout`). Returns `(written, dropped)` event counts.
    pub fn finish(mut self, timeout: Duration) -> (u64, u64) {
        let shared = self.sender.shared.clone();
        if self.sender.enabled {
            let mut queue = shared.lock();
            queue.closed = true;
            shared.wake.notify_one();
            // A writer stuck on a dead disk is abandoned after the timeout, not waited for.
            let (queue, _) = shared
                .finished
                .wait_timeout_while(queue, timeout, |q| !q.done)
                .unwrap_or_else(|e| e.into_inner());
            let done = queue.done;
            drop(queue);
            if let Some(thread) = self.thread.take()
                && done
            {
                let _ = thread.join();
            }
        }
        let dropped = shared.dropped.load(Ordering::Relaxed);
        if dropped > 0 {
            eprintln!("mcpwall: warning: {dropped} audit event(s) could not be written");
        }
        (shared.written.load(Ordering::Relaxed), dropped)
    }
}

struct Writer {
    config: AuditConfig,
    format: EventFormat,
    names: Arc<dyn Names>,
    shared: Arc<Shared>,
    file: Option<DayFile>,
    /// Days since the epoch of the open file.
    day: i64,
    last_open_failure: Option<Instant>,
    /// Formatted lines waiting to be written, each without its closing brace (the chain
    /// fields go there, once the previous line's hash is known under the file's lock).
    out: String,
    /// Where each line in `out` ends.
    ends: Vec<usize>,
    /// The chained lines of one write.
    chained: Vec<u8>,
    /// Events lost since the last gap record (written with the next write that works).
    lost: Lost,
    /// How much of `Shared::dropped` `lost` has taken in: the rest was dropped by the
    /// queue (a writer too slow for the traffic).
    accounted: u64,
    /// When the writer last looked at `Shared::dropped`.
    last_round: time::Micros,
    /// Why the last open or write failed (a gap record's reason).
    last_error: String,
}

/// Events that could not be written: how many, and the span of their times.
#[derive(Debug, Default)]
struct Lost {
    events: u64,
    from: time::Micros,
    until: time::Micros,
    /// The distinct reasons, `; `-separated (a few at most: each failure kind once).
    reason: String,
}

impl Lost {
    fn add(&mut self, events: u64, from: time::Micros, until: time::Micros, reason: &str) {
        if events == 0 {
            return;
        }
        if self.events == 0 {
            (self.from, self.until) = (from, until);
        } else {
            (self.from, self.until) = (self.from.min(from), self.until.max(until));
        }
        self.events += events;
        if !self.reason.split("; ").any(|r| r == reason) && self.reason.len() < 512 {
            if !self.reason.is_empty() {
                self.reason.push_str("; ");
            }
            self.reason.push_str(reason);
        }
    }

    fn record(&self) -> records::Record {
        records::Record::Gap {
            events: self.events,
            from: self.from,
            until: self.until,
            reason: self.reason.clone(),
        }
    }
}

/// An open day file, its seal, and the chain's tip as this writer last left it.
struct DayFile {
    log: File,
    seal: File,
    /// `(length, last hash)` after this writer's last write: when the file still has that
    /// length under the lock, no other proxy wrote since and the tip need not be read.
    tip: Option<(u64, chain::Link)>,
}

impl Writer {
    fn run(mut self) {
        if let Some(cap) = self.config.retention {
            self.apply_retention(cap);
        }
        let shared = self.shared.clone();
        let mut batches = Vec::new();
        loop {
            let mut queue = shared.lock();
            if queue.len == 0 && !queue.closed {
                queue = shared
                    .wake
                    .wait_timeout_while(queue, LINGER, |q| {
                        q.len < WAKE_AT && !q.closed && !q.urgent
                    })
                    .map(|(q, _)| q)
                    .unwrap_or_else(|e| e.into_inner().0);
            }
            std::mem::swap(&mut batches, &mut queue.batches);
            queue.len = 0;
            queue.urgent = false;
            let taken = queue.accepted;
            let closed = queue.closed;
            drop(queue);
            for batch in &batches {
                self.write_batch(batch);
            }
            self.flush();
            self.note_queue_drops();
            if self.lost.events > 0 {
                // A gap to record as soon as writing works, events or not; on the way
                // out, one last try whatever the time since the last failure.
                if self.file.is_none() {
                    if closed {
                        self.last_open_failure = None;
                    }
                    self.open(days_since_epoch(SystemTime::now()));
                }
                self.flush();
            }
            // Written, or recorded as lost (a disk that refuses the events does not keep
            // whoever waits for them waiting).
            self.shared.settled.store(taken, Ordering::Release);
            self.shared.settled_moved.notify_waiters();
            // Give the emptied batches back (a few: a pump holds one at a time).
            let mut queue = shared.lock();
            for mut batch in batches.drain(..) {
                if queue.spare.len() < SPARE_BATCHES {
                    batch.clear();
                    queue.spare.push(batch);
                }
            }
            if closed && queue.len == 0 {
                break;
            }
        }
        let mut queue = shared.lock();
        queue.done = true;
        shared.finished.notify_all();
        shared.settled_moved.notify_waiters();
    }

    /// Remove day files past the cap, on this thread: the proxy's start never waits on it.
    fn apply_retention(&self, cap: retention::Cap) {
        let today = days_since_epoch(SystemTime::now());
        if let Err(e) = retention::apply(&self.config.dir, cap, &date_string(today), today) {
            eprintln!(
                "mcpwall: warning: cannot apply log_retention in {}: {e}",
                self.config.dir.display()
            );
        }
    }

    fn write_batch(&mut self, batch: &[AuditEvent]) {
        for event in batch {
            let day = days_since_epoch(event.ts);
            if day != self.day {
                self.flush();
                self.open(day);
            }
            if self.file.is_none() {
                let ts = time::to_micros(event.ts);
                self.lose(1, ts, ts);
                continue;
            }
            self.format.write(&mut self.out, event, &*self.names);
            self.out.pop(); // the closing brace: the chain fields go before it
            self.ends.push(self.out.len());
            self.shared.written.fetch_add(1, Ordering::Relaxed);
            if self.out.len() >= 64 * 1024 {
                self.flush();
            }
        }
    }

    fn flush(&mut self) {
        if self.out.is_empty() && self.lost.events == 0 {
            return;
        }
        let Some(file) = &mut self.file else {
            self.out.clear();
            self.ends.clear();
            return;
        };
        let gap = (self.lost.events > 0).then(|| {
            self.lost
                .record()
                .body(SystemTime::now(), &self.format.session, &self.format.server)
        });
        let own = OwnLines {
            session: &self.format.session,
            server: &self.format.server,
            gap: gap.as_deref(),
        };
        match file.append(
            &self.config.dir,
            self.day,
            &self.out,
            &self.ends,
            &mut self.chained,
            &own,
        ) {
            Ok(()) => self.lost = Lost::default(),
            Err(failed) => self.failed(failed),
        }
        self.out.clear();
        self.ends.clear();
    }

    /// A write failed after `failed.events_written` of the lines in `out`: the rest are
    /// lost, and recorded as such once writing works again.
    fn failed(&mut self, failed: Failed) {
        self.shared.warn_once(&format!(
            "cannot write the audit log in {}: {}",
            self.config.dir.display(),
            failed.error
        ));
        self.file = None;
        // Retry opening on the next event, but not more than once a second.
        self.day = i64::MIN;
        self.last_open_failure = Some(Instant::now());
        self.last_error = failed.error.to_string();
        if failed.gap_written {
            self.lost = Lost::default();
        }
        let lost = &self.ends[failed.events_written.min(self.ends.len())..];
        if lost.is_empty() {
            return;
        }
        // The lost lines' times, read back from their text (this path only: the events
        // themselves are gone, and keeping their times per event would cost every event).
        let mut start = match failed.events_written {
            0 => 0,
            n => self.ends[n - 1],
        };
        let (mut from, mut until) = (i64::MAX, i64::MIN);
        for &end in lost {
            let ts = self.out[start..end]
                .strip_prefix("{\"ts\":\"")
                .and_then(|rest| rest.get(..27))
                .and_then(time::parse_rfc3339);
            if let Some(ts) = ts {
                (from, until) = (from.min(ts), until.max(ts));
            }
            start = end;
        }
        if from > until {
            from = time::now();
            until = from;
        }
        let n = lost.len() as u64;
        self.shared.written.fetch_sub(n, Ordering::Relaxed);
        self.lose(n, from, until);
    }

    /// `events` (with times from `from` to `until`) could not be written.
    fn lose(&mut self, events: u64, from: time::Micros, until: time::Micros) {
        self.shared.dropped.fetch_add(events, Ordering::Relaxed);
        self.accounted += events;
        let reason = if self.last_error.is_empty() {
            "the audit log could not be opened"
        } else {
            &self.last_error
        };
        self.lost.add(events, from, until, reason);
    }

    /// Take in the events the queue dropped since the last round (one atomic load a
    /// round): their times are not known, only that they fell since then.
    fn note_queue_drops(&mut self) {
        let dropped = self.shared.dropped.load(Ordering::Relaxed);
        let now = time::now();
        if dropped > self.accounted {
            self.lost.add(
                dropped - self.accounted,
                self.last_round,
                now,
                "the audit writer could not keep up: its queue was full",
            );
            self.accounted = dropped;
        }
        self.last_round = now;
    }

    fn open(&mut self, day: i64) {
        if self
            .last_open_failure
            .is_some_and(|t| t.elapsed() < Duration::from_secs(1))
        {
            return;
        }
        self.day = day;
        let path = self.config.dir.join(log_file_name(day));
        match open_log(&self.config.dir, &path).and_then(|log| {
            Ok(DayFile {
                seal: open_private(&chain::seal_path(&path), false)?,
                log,
                tip: None,
            })
        }) {
            Ok(f) => {
                self.file = Some(f);
                self.last_open_failure = None;
            }
            Err(e) => {
                self.file = None;
                self.day = i64::MIN;
                self.last_open_failure = Some(Instant::now());
                self.last_error = format!("cannot open {}: {e}", path.display());
                self.shared.warn_once(&format!(
                    "cannot open the audit log {}: {e}",
                    path.display()
                ));
            }
        }
    }
}

/// The writer's own lines for one write: its formatted session and server (for a
/// record of a cut line it mends), and a gap record to write before the events.
struct OwnLines<'a> {
    session: &'a str,
    server: &'a str,
    gap: Option<&'a str>,
}

/// A write that failed, and how far it got.
struct Failed {
    error: io::Error,
    /// Event lines written whole before the failure.
    events_written: usize,
    /// Whether the gap record (written before the events) got in whole.
    gap_written: bool,
}

impl From<io::Error> for Failed {
    /// A failure before anything was written.
    fn from(error: io::Error) -> Failed {
        Failed {
            error,
            events_written: 0,
            gap_written: false,
        }
    }
}

impl DayFile {
    /// Chain the lines of `out` (ending at `ends`) to the file's last line and append
    /// them, then seal the file. Several proxies append to one day file: the whole step
    /// runs under an exclusive `flock` on it, so each chain link is read and extended by
    /// one writer at a time.
    fn append(
        &mut self,
        dir: &Path,
        day: i64,
        out: &str,
        ends: &[usize],
        chained: &mut Vec<u8>,
        own: &OwnLines<'_>,
    ) -> Result<(), Failed> {
        // Where locks are not supported (some network file systems) the events are still
        // written: a chain two writers interleave shows up in `log verify`, a lost event
        // would not show anywhere.
        let locked = platform::lock_exclusive(&self.log).is_ok();
        let result = self.append_locked(dir, day, out, ends, chained, own);
        if locked {
            let _ = platform::unlock(&self.log);
        }
        result
    }

    fn append_locked(
        &mut self,
        dir: &Path,
        day: i64,
        out: &str,
        ends: &[usize],
        chained: &mut Vec<u8>,
        own: &OwnLines<'_>,
    ) -> Result<(), Failed> {
        let size = self.log.metadata()?.len();
        chained.clear();
        let mut prev = match self.tip {
            Some((len, hash)) if len == size => hash,
            _ => self.read_tip(dir, day, size, own, chained)?,
        };
        if let Some(gap) = own.gap {
            prev = chain::push_chained(chained, gap.as_bytes(), &prev);
        }
        let events_from = chained.len();
        let mut start = 0;
        for &end in ends {
            prev = chain::push_chained(chained, &out.as_bytes()[start..end], &prev);
            start = end;
        }
        let (written, result) = write_counted(&mut self.log, dir, chained);
        if let Err(error) = result {
            // Lines hold no raw newline (JSON escapes it): each one counted is whole.
            let whole = chained[events_from.min(written)..written]
                .iter()
                .filter(|&&b| b == b'\n')
                .count();
            return Err(Failed {
                error,
                events_written: whole,
                gap_written: written >= events_from,
            });
        }
        let len = size + chained.len() as u64;
        self.tip = Some((len, prev));
        chain::Seal { len, hash: prev }
            .write(&self.seal)
            .map_err(|error| Failed {
                error,
                events_written: ends.len(),
                gap_written: true,
            })
    }

    /// The hash the next line chains to, when this writer did not write the file's end
    /// itself (it just opened the file, or another writer appended since). A complete
    /// write leaves the file at its seal's length, ending where the seal says. Anything
    /// else is mended in `chained` first, before the new lines: a cut-off last line (its
    /// writer stopped mid-line) is ended with a newline and a record of it; a file
    /// shorter than its seal gets a record saying so (the next seal covers the new end).
    /// A new day file chains to the log's newest other day file ([`chain_head`]).
    fn read_tip(
        &mut self,
        dir: &Path,
        day: i64,
        size: u64,
        own: &OwnLines<'_>,
        chained: &mut Vec<u8>,
    ) -> io::Result<chain::Link> {
        let seal = chain::Seal::read_file(&self.seal);
        match seal {
            Some(seal) if seal.len == size && size > 0 => return Ok(seal.hash),
            _ if size == 0 && seal.is_none_or(|s| s.len == 0) => return Ok(chain_head(dir, day)),
            _ => {}
        }
        let tip = chain::find_tip(&mut self.log, size)?;
        let mut prev = match tip.chained {
            Some((_, hash)) => hash,
            None => chain_head(dir, day),
        };
        let now = SystemTime::now();
        if let Some(cut_from) = tip.cut_from {
            // The cut bytes run from the end of the last chained line: lines between it
            // and the cut one are what an earlier mending write (cut off in turn, on a
            // disk that freed a little room) left.
            let from = tip.chained.map_or(cut_from, |(end, _)| end);
            let sha256 = chain::digest_of(&mut self.log, from, size - from)?;
            chained.push(b'\n');
            let record = records::Record::CutLine {
                offset: from,
                length: size - from,
                sha256,
            };
            let body = record.body(now, own.session, own.server);
            prev = chain::push_chained(chained, body.as_bytes(), &prev);
        }
        if let Some(seal) = seal
            && seal.len > size
        {
            let record = records::Record::Truncated {
                sealed_length: seal.len,
                length: size,
            };
            let body = record.body(now, own.session, own.server);
            prev = chain::push_chained(chained, body.as_bytes(), &prev);
        }
        Ok(prev)
    }
}

/// Append `bytes`, as `write_all` does, and say how many got in when a write fails (a
/// full disk takes what fits, then refuses the rest).
fn write_counted(log: &mut File, dir: &Path, bytes: &[u8]) -> (usize, io::Result<()>) {
    let mut done = 0;
    while done < bytes.len() {
        let end = match room(dir, bytes.len() - done) {
            Ok(n) => done + n,
            Err(e) => return (done, Err(e)),
        };
        match log.write(&bytes[done..end]) {
            Ok(0) => return (done, Err(io::ErrorKind::WriteZero.into())),
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return (done, Err(e)),
        }
    }
    (done, Ok(()))
}

/// How many of `want` bytes may be written to `dir` now: all of them, but on the tests'
/// full disk ([`fault`]).
#[cfg(any(test, feature = "test-support"))]
fn room(dir: &Path, want: usize) -> io::Result<usize> {
    match fault::room(dir, want) {
        Some(0) => Err(fault::disk_full()),
        Some(n) => Ok(n),
        None => Ok(want),
    }
}

#[cfg(not(any(test, feature = "test-support")))]
fn room(_dir: &Path, want: usize) -> io::Result<usize> {
    Ok(want)
}

/// The hash a new day file's first line chains to: the tip of the log's newest other day
/// file, whichever side of `day` it is ([`chain::GENESIS`] when there is none). The chain
/// goes on from where it was, not from the calendar: a clock stepped back across
/// midnight makes a file for an earlier day after a later one was written, and its first
/// line then chains to the later file.
fn chain_head(dir: &Path, day: i64) -> chain::Link {
    let this = log_file_name(day);
    files::own_log_files(dir)
        .into_iter()
        .rfind(|f| f.name != this)
        .map_or(chain::GENESIS, |f| files::tip_of(&f.path))
}

/// Create the directory (owner-only: 0700 on Unix) and open the day's file for appending
/// (owner-only: 0600).
fn open_log(dir: &Path, path: &Path) -> io::Result<File> {
    if !dir.is_dir() {
        platform::owner_only_dir(DirBuilder::new().recursive(true)).create(dir)?;
    }
    // Tighten a directory someone created with looser permissions (ignore failure: it
    // may not be ours; the file itself is still owner-only).
    let _ = platform::restrict_to_owner(dir);
    open_private(path, true)
}

/// Open (creating, owner-only) a file of the log directory for appending or for writing
/// in place, never through a symlink planted at its name.
fn open_private(path: &Path, append: bool) -> io::Result<File> {
    let file = platform::owner_only_nofollow(
        OpenOptions::new()
            .append(append)
            .write(!append)
            .read(true)
            .create(true),
    )
    .open(path)?;
    let _ = platform::restrict_file_to_owner(&file, path);
    Ok(file)
}

fn json_str(out: &mut String, s: &str) {
    out.push('"');
    // The bytes JSON needs escaped are exactly those that end a plain run of a string.
    if crate::frame::string::plain_run(s.as_bytes(), 0) == s.len() {
        out.push_str(s);
        out.push('"');
        return;
    }
    // Names, ids and messages rarely need escaping: copy runs of plain bytes whole.
    let mut plain = 0;
    for (i, b) in s.bytes().enumerate() {
        let escape = match b {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0..=0x1f => "",
            _ => continue,
        };
        out.push_str(&s[plain..i]);
        if escape.is_empty() {
            let _ = write!(out, "\\u{:04x}", b);
        } else {
            out.push_str(escape);
        }
        plain = i + 1;
    }
    out.push_str(&s[plain..]);
    out.push('"');
}

fn opt_str(out: &mut String, s: Option<&str>) {
    match s {
        Some(s) => json_str(out, s),
        None => out.push_str("null"),
    }
}

/// One event as a JSON line (without the newline).
pub fn format_event(out: &mut String, e: &AuditEvent, config: &AuditConfig, names: &dyn Names) {
    EventFormat::new(config).write(out, e, names);
}

/// What every line of one session shares, formatted once: the session and server
/// fragments, and the timestamp up to its second (events come many per second).
#[derive(Debug)]
struct EventFormat {
    /// `,"session":"…"`
    session: String,
    /// `,"server":"…"`, unless the event names its own server.
    server: String,
    /// The whole seconds of the last timestamp and its text `YYYY-MM-DDTHH:MM:SS.`
    second: Option<(u64, String)>,
}

impl EventFormat {
    fn new(config: &AuditConfig) -> EventFormat {
        let mut session = String::from(",\"session\":");
        json_str(&mut session, &config.session);
        let mut server = String::from(",\"server\":");
        json_str(&mut server, &config.server);
        EventFormat {
            session,
            server,
            second: None,
        }
    }

    fn timestamp(&mut self, out: &mut String, ts: SystemTime) {
        let d = ts.duration_since(UNIX_EPOCH).unwrap_or_default();
        let secs = d.as_secs();
        match &self.second {
            Some((cached, text)) if *cached == secs => out.push_str(text),
            _ => {
                let mut text = String::with_capacity(20);
                rfc3339_seconds(&mut text, secs);
                text.push('.');
                out.push_str(&text);
                self.second = Some((secs, text));
            }
        }
        push_padded(out, u64::from(d.subsec_micros()), 6);
        out.push('Z');
    }

    fn write(&mut self, out: &mut String, e: &AuditEvent, names: &dyn Names) {
        out.push_str("{\"ts\":\"");
        self.timestamp(out, e.ts);
        out.push('"');
        match &e.session {
            Some(id) => {
                out.push_str(",\"session\":");
                json_str(out, id);
            }
            None => out.push_str(&self.session),
        }
        match &e.server {
            Some(name) => {
                out.push_str(",\"server\":");
                json_str(out, name);
            }
            None => out.push_str(&self.server),
        }
        out.push_str(",\"direction\":");
        out.push_str(match e.direction {
            Direction::Inbound => "\"inbound\"",
            Direction::Outbound => "\"outbound\"",
        });
        out.push_str(",\"id\":");
        match &e.id {
            // Ids come from the strict parser: valid JSON text (a number or a string).
            Some(id) => match std::str::from_utf8(id.as_bytes()) {
                Ok(text) => out.push_str(text),
                Err(_) => json_str(out, &String::from_utf8_lossy(id.as_bytes())),
            },
            None => out.push_str("null"),
        }
        out.push_str(",\"method\":");
        opt_str(out, e.method.as_deref());
        out.push_str(",\"tool\":");
        opt_str(out, e.tool.as_deref());
        out.push_str(",\"action\":\"");
        out.push_str(e.action.as_str());
        out.push_str("\",\"rule\":");
        let (rule, rule_message) = match e.rule {
            Some(r) => {
                let (name, message) = names.rule(r);
                (Some(name), message)
            }
            None => (None, None),
        };
        opt_str(out, rule);
        out.push_str(",\"message\":");
        opt_str(out, e.message.as_deref().or(rule_message));
        if !e.redactions.is_empty() {
            let mut counts: BTreeMap<&str, u64> = BTreeMap::new();
            for &(label, n) in &e.redactions {
                *counts.entry(names.label(label)).or_default() += n as u64;
            }
            out.push_str(",\"redactions\":{");
            for (i, (name, n)) in counts.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                json_str(out, name);
                out.push(':');
                push_padded(out, *n, 1);
            }
            out.push('}');
        }
        if let Some(d) = e.duration {
            out.push_str(",\"duration_us\":");
            push_padded(out, u64::try_from(d.as_micros()).unwrap_or(u64::MAX), 1);
        }
        if let Some(args) = &e.args {
            out.push_str(",\"args\":");
            out.push_str(args);
        }
        if let Some(request) = &e.request {
            out.push_str(",\"request\":");
            json_str(out, request);
        }
        if let Some(how) = e.how {
            out.push_str(",\"how\":");
            json_str(out, how);
        }
        if let Some(identity) = &e.identity {
            out.push_str(",\"identity\":");
            json_str(out, identity);
        }
        if let Some(transport) = e.transport {
            out.push_str(",\"transport\":");
            json_str(out, transport);
        }
        out.push('}');
    }
}

pub fn days_since_epoch(ts: SystemTime) -> i64 {
    let secs = ts
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    secs.div_euclid(86_400)
}

/// (year, month, day) of a day count since 1970-01-01 (proleptic Gregorian).
pub(crate) fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// The audit log file of a day (days since 1970-01-01, UTC): `YYYY-MM-DD.audit.jsonl`.
pub fn log_file_name(day: i64) -> String {
    format!("{}{LOG_SUFFIX}", date_string(day))
}

pub(crate) const LOG_SUFFIX: &str = ".audit.jsonl";

/// Whether a file name in a log directory is one of this mcpwall's audit logs
/// (`YYYY-MM-DD.audit.jsonl`), not the original mcpwall's `YYYY-MM-DD.jsonl` or anything else.
pub fn is_own_log_file(name: &str) -> bool {
    name.strip_suffix(LOG_SUFFIX).is_some_and(|date| {
        let b = date.as_bytes();
        b.len() == 10
            && b[4] == b'-'
            && b[7] == b'-'
            && b.iter()
                .enumerate()
                .all(|(i, c)| matches!(i, 4 | 7) || c.is_ascii_digit())
    })
}

pub fn date_string(day: i64) -> String {
    let (y, m, d) = civil_from_days(day);
    format!("{y:04}-{m:02}-{d:02}")
}

/// The current time as `YYYY-MM-DDTHH:MM:SS.ffffffZ`.
pub fn rfc3339_now(out: &mut String) {
    rfc3339(out, SystemTime::now());
}

/// `YYYY-MM-DDTHH:MM:SS.ffffffZ`
pub fn rfc3339(out: &mut String, ts: SystemTime) {
    let d = ts.duration_since(UNIX_EPOCH).unwrap_or_default();
    rfc3339_seconds(out, d.as_secs());
    out.push('.');
    push_padded(out, u64::from(d.subsec_micros()), 6);
    out.push('Z');
}

/// `YYYY-MM-DDTHH:MM:SS` of whole seconds since the epoch.
fn rfc3339_seconds(out: &mut String, secs: u64) {
    let secs = secs as i64;
    let (y, m, day) = civil_from_days(secs.div_euclid(86_400));
    let rem = secs.rem_euclid(86_400) as u64;
    // Written digit by digit: `write!` with padding cost more than the rest of an event.
    push_padded(out, y.clamp(0, 9999) as u64, 4);
    out.push('-');
    push_padded(out, u64::from(m), 2);
    out.push('-');
    push_padded(out, u64::from(day), 2);
    out.push('T');
    push_padded(out, rem / 3600, 2);
    out.push(':');
    push_padded(out, rem % 3600 / 60, 2);
    out.push(':');
    push_padded(out, rem % 60, 2);
}

/// `n` in decimal, left-padded with zeros to `width` digits (more if it needs them).
fn push_padded(out: &mut String, mut n: u64, width: usize) {
    // Two digits per division: every event has a timestamp and most a duration.
    const PAIRS: &[u8; 200] = b"0001020304050607080910111213141516171819\
        2021222324252627282930313233343536373839\
        4041424344454647484950515253545556575859\
        6061626364656667686970717273747576777879\
        8081828384858687888990919293949596979899";
    let mut digits = [b'0'; 20];
    let mut i = digits.len();
    while n >= 10 {
        let pair = (n % 100) as usize * 2;
        n /= 100;
        i -= 2;
        digits[i..i + 2].copy_from_slice(&PAIRS[pair..pair + 2]);
    }
    if n > 0 || i == digits.len() {
        i -= 1;
        digits[i] = b'0' + n as u8;
    }
    let start = i.min(digits.len() - width.min(digits.len()));
    // One copy instead of a `push` per digit (which checked capacity and encoded a char
    // each time: about 250 instructions per timestamp or duration, the largest part of
    // formatting an event).
    out.push_str(std::str::from_utf8(&digits[start..]).unwrap_or_default());
}

/// The audit `session` of a conversation known by the secret `id` (an `Mcp-Session-Id`):
/// 16 hex digits of its SHA-256, so the log tells sessions apart without holding an id
/// that would let its reader use the session.
pub fn derived_session_id(id: &str) -> String {
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(id.as_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    format!("{:016x}", u64::from_be_bytes(first))
}

/// A process-unique session id: 16 hex digits from the std's per-process random keys,
/// the pid and the time.
pub fn new_session_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    h.write_u128(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos(),
    );
    format!("{:016x}", h.finish())
}

/// Names for tests and for runs without a program.
#[derive(Debug, Default)]
pub struct NoNames;

impl Names for NoNames {
    fn rule(&self, rule: RuleRef) -> (&str, Option<&str>) {
        match rule {
            RuleRef::Builtin(name) => (name, None),
            RuleRef::Inbound(_) | RuleRef::Outbound(_) => ("?", None),
        }
    }
    fn label(&self, _label: u32) -> &str {
        "?"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::IdText;
    use crate::verdict::RuleId;

    struct TestNames;
    impl Names for TestNames {
        fn rule(&self, rule: RuleRef) -> (&str, Option<&str>) {
            match rule {
                RuleRef::Inbound(_) => ("block-ssh", Some("SSH keys are off limits")),
                RuleRef::Outbound(_) => ("redact-secrets", None),
                RuleRef::Builtin(n) => (n, None),
            }
        }
        fn label(&self, label: u32) -> &str {
            ["aws-access-key-id", "github-token"][label as usize]
        }
    }

    fn config(dir: &Path) -> AuditConfig {
        AuditConfig {
            dir: dir.to_path_buf(),
            session: "s1".into(),
            server: "srv".into(),
            retention: None,
        }
    }

    #[test]
    fn strings_are_escaped() {
        let mut s = String::new();
        json_str(&mut s, "a\"b\\c\nd\u{1}é");
        assert_eq!(s, r#""a\"b\\c\nd\u0001é""#);
        let back: String = serde_json::from_str(&s).unwrap();
        assert_eq!(back, "a\"b\\c\nd\u{1}é");
    }

    #[test]
    fn padded_numbers_match_the_formatter() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut samples: Vec<u64> = (0..1000).chain([u64::MAX, 999_999, 1_000_000]).collect();
        for _ in 0..2000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            samples.push(state >> (state % 64));
        }
        for n in samples {
            for width in [1, 2, 4, 6, 20] {
                let mut out = String::from("x");
                push_padded(&mut out, n, width);
                assert_eq!(out, format!("x{n:0width$}"), "{n} at width {width}");
            }
        }
    }

    #[test]
    fn dates_are_utc_civil_dates() {
        assert_eq!(date_string(0), "1970-01-01");
        assert_eq!(date_string(19_782), "2024-02-29");
        assert_eq!(date_string(-1), "1969-12-31");
        for (n, width, text) in [
            (0, 1, "0"),
            (7, 2, "07"),
            (1_234_567, 2, "1234567"),
            (u64::MAX, 1, "18446744073709551615"),
        ] {
            let mut s = String::new();
            push_padded(&mut s, n, width);
            assert_eq!(s, text);
        }
        let mut s = String::new();
        rfc3339(
            &mut s,
            UNIX_EPOCH + Duration::new(1_709_164_800 + 3661, 5_000),
        );
        assert_eq!(s, "2024-02-29T01:01:01.000005Z");
    }

    /// A line reuses the text of the previous line's second only for that same second.
    #[test]
    fn timestamps_from_the_cached_second_are_exact() {
        let mut format = EventFormat::new(&config(Path::new("/x")));
        let base = 1_709_164_800 + 3661;
        for (secs, micros) in [
            (base, 5),
            (base, 999_999),
            (base + 1, 0),
            (base, 7),
            (0, 1),
            (base + 86_400, 42),
        ] {
            let ts = UNIX_EPOCH + Duration::new(secs, micros * 1000);
            let (mut cached, mut fresh) = (String::new(), String::new());
            format.timestamp(&mut cached, ts);
            rfc3339(&mut fresh, ts);
            assert_eq!(cached, fresh, "{secs}.{micros}");
        }
    }

    #[test]
    fn event_line_has_the_documented_keys() {
        let mut e = AuditEvent::new(Direction::Outbound, Verdict::Redact);
        e.ts = UNIX_EPOCH;
        e.id = Some(IdText::new(b"\"a\""));
        e.method = Some("tools/call".into());
        e.tool = Some("read".into());
        e.rule = Some(RuleRef::Outbound(RuleId(0)));
        e.redactions = vec![(0, 2), (1, 1), (0, 1)];
        e.duration = Some(Duration::from_micros(42));
        let mut line = String::new();
        format_event(&mut line, &e, &config(Path::new("/x")), &TestNames);
        assert_eq!(
            line,
            r#"{"ts":"1970-01-01T00:00:00.000000Z","session":"s1","server":"srv","direction":"outbound","id":"a","method":"tools/call","tool":"read","action":"redact","rule":"redact-secrets","message":null,"redactions":{"aws-access-key-id":3,"github-token":1},"duration_us":42}"#
        );
        let mut e = AuditEvent::new(Direction::Inbound, Verdict::Deny);
        e.ts = UNIX_EPOCH;
        e.rule = Some(RuleRef::Inbound(RuleId(3)));
        line.clear();
        format_event(&mut line, &e, &config(Path::new("/x")), &TestNames);
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["message"], "SSH keys are off limits");
        assert_eq!(v["id"], serde_json::Value::Null);
    }

    #[test]
    fn writer_creates_private_dir_and_file() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("logs");
        let audit = Audit::start(config(&dir), Arc::new(TestNames));
        let tx = audit.sender();
        let mut batch = vec![AuditEvent::new(Direction::Inbound, Verdict::Allow)];
        tx.send(&mut batch);
        assert!(batch.is_empty());
        drop(tx);
        let (written, dropped) = audit.finish(Duration::from_secs(5));
        assert_eq!((written, dropped), (1, 0));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let meta = std::fs::metadata(&dir).unwrap();
            assert_eq!(meta.permissions().mode() & 0o777, 0o700);
        }
        platform::assert_owner_only(&dir);
        let files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        // The day file and its seal, both private.
        assert_eq!(files.len(), 2, "{files:?}");
        for f in &files {
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                let mode = std::fs::metadata(f).unwrap().permissions().mode();
                assert_eq!(mode & 0o777, 0o600);
            }
            platform::assert_owner_only(f);
        }
        let path = files::own_log_files(&dir)[0].path.clone();
        assert!(chain::Seal::read(&chain::seal_path(&path)).is_some());
        assert_eq!(
            path.file_name().unwrap().to_str().unwrap(),
            log_file_name(days_since_epoch(SystemTime::now()))
        );
        assert!(is_own_log_file(path.file_name().unwrap().to_str().unwrap()));
        // The original mcpwall's (Node) day file, and anything else, is not ours.
        for foreign in [
            "2026-02-16.jsonl",
            "notes.audit.jsonl",
            "2026-02-16.audit.jsonl.bak",
        ] {
            assert!(!is_own_log_file(foreign), "{foreign}");
        }
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 1);
        assert!(text.contains("\"action\":\"allow\""));
    }

    /// Events are batched, not written per frame, but a running session's events still
    /// reach the file within about one `LINGER`, and a burst of `WAKE_AT` wakes the
    /// writer at once.
    /// Lines in the day files of `dir` so far.
    fn lines_in(dir: &Path) -> usize {
        files::own_log_files(dir)
            .iter()
            .map(|f| {
                std::fs::read_to_string(&f.path)
                    .unwrap_or_default()
                    .lines()
                    .count()
            })
            .sum()
    }

    #[test]
    fn queued_events_reach_the_file_while_the_session_runs() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("logs");
        let audit = Audit::start(config(&dir), Arc::new(TestNames));
        let tx = audit.sender();
        let lines = || lines_in(&dir);
        let wait_for = |want: usize| {
            let start = Instant::now();
            while lines() < want {
                assert!(
                    start.elapsed() < Duration::from_secs(5),
                    "only {} of {want} lines",
                    lines()
                );
                std::thread::sleep(Duration::from_millis(5));
            }
            start.elapsed()
        };
        let mut batch = vec![AuditEvent::new(Direction::Inbound, Verdict::Allow)];
        tx.send(&mut batch);
        let waited = wait_for(1);
        assert!(waited < LINGER * 10, "one event took {waited:?}");
        let mut burst: Vec<AuditEvent> = (0..WAKE_AT)
            .map(|_| AuditEvent::new(Direction::Outbound, Verdict::Pass))
            .collect();
        tx.send(&mut burst);
        wait_for(1 + WAKE_AT);
        drop(tx);
        assert_eq!(
            audit.finish(Duration::from_secs(5)),
            (1 + WAKE_AT as u64, 0)
        );
    }

    /// Waiting for a mark returns once the events up to it are in the file, and sooner
    /// than the writer's linger: an answer held for its audit line is not held 100 ms.
    #[test]
    fn waiting_for_a_mark_returns_with_the_events_in_the_file() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("logs");
        let audit = Audit::start(config(&dir), Arc::new(TestNames));
        let tx = audit.sender();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let lines = || lines_in(&dir);
        let mut waited = Duration::ZERO;
        for round in 1..=20 {
            let mut batch = vec![AuditEvent::new(Direction::Inbound, Verdict::Allow)];
            let mark = tx.send(&mut batch);
            let started = Instant::now();
            runtime.block_on(tx.written(mark));
            waited += started.elapsed();
            assert_eq!(lines(), round, "the line is in the file when the wait ends");
        }
        // Woken at once: twenty waits for the linger would take two seconds.
        assert!(waited < LINGER * 10, "20 waits took {waited:?}");
        // A mark already written returns at once; one of a finished log does not hang.
        runtime.block_on(tx.written(Mark(1)));
        let mut batch = vec![AuditEvent::new(Direction::Inbound, Verdict::Allow)];
        let mark = tx.send(&mut batch);
        drop(tx);
        let sender = audit.sender();
        audit.finish(Duration::from_secs(5));
        runtime.block_on(sender.written(mark));
        assert_eq!(lines(), 21);
    }

    /// Batches are handed over whole; the file has their events in the order sent, and
    /// the sender's vector comes back empty for the next batch.
    #[test]
    fn events_of_many_batches_are_written_in_order() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("logs");
        let audit = Audit::start(config(&dir), Arc::new(TestNames));
        let tx = audit.sender();
        let mut batch = Vec::new();
        let mut next = 0u32;
        for size in [1, 3, 0, 7, 2, 50, 1].iter().cycle().take(70) {
            for _ in 0..*size {
                let mut e = AuditEvent::new(Direction::Inbound, Verdict::Allow);
                e.id = Some(IdText::new(next.to_string().as_bytes()));
                batch.push(e);
                next += 1;
            }
            tx.send(&mut batch);
            assert!(batch.is_empty());
        }
        drop(tx);
        assert_eq!(audit.finish(Duration::from_secs(5)), (u64::from(next), 0));
        let mut ids = Vec::new();
        for file in files::own_log_files(&dir) {
            let text = std::fs::read_to_string(&file.path).unwrap();
            for line in text.lines() {
                let v: serde_json::Value = serde_json::from_str(line).unwrap();
                ids.push(v["id"].as_u64().unwrap() as u32);
            }
        }
        assert_eq!(ids, (0..next).collect::<Vec<_>>());
    }

    /// A round trip hands over an event at a time: it joins the batch already queued and
    /// the sender keeps its vector (taking it meant an allocation per event); a burst's
    /// batch is moved whole.
    #[test]
    fn small_batches_join_the_last_one_and_leave_the_sender_its_vector() {
        // No writer thread: the queue keeps what it is sent.
        let tx = AuditSender {
            shared: Arc::default(),
            enabled: true,
        };
        let event = || AuditEvent::new(Direction::Inbound, Verdict::Allow);
        let mut batch: Vec<AuditEvent> = (0..10).map(|_| event()).collect();
        tx.send(&mut batch);
        assert_eq!(batch.capacity(), 0, "a burst's vector goes with it");
        for _ in 0..5 {
            batch.push(event());
            let capacity = batch.capacity();
            tx.send(&mut batch);
            assert!(batch.is_empty());
            assert_eq!(batch.capacity(), capacity);
        }
        let queue = tx.shared.lock();
        assert_eq!((queue.batches.len(), queue.len), (1, 15));
        assert_eq!(queue.batches[0].len(), 15);
    }

    /// A writer held up (here: another holder of the day file's lock, as a stalled disk
    /// would) lets the queue fill and drop events; once it goes on, the first thing it
    /// writes is a gap record of exactly those.
    #[test]
    fn events_the_full_queue_dropped_are_recorded_as_a_gap() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("logs");
        let audit = Audit::start(config(&dir), Arc::new(TestNames));
        let tx = audit.sender();
        tx.send(&mut vec![AuditEvent::new(
            Direction::Inbound,
            Verdict::Allow,
        )]);
        let start = Instant::now();
        let path = loop {
            if let Some(f) = files::own_log_files(&dir).first()
                && std::fs::metadata(&f.path).is_ok_and(|m| m.len() > 0)
            {
                break f.path.clone();
            }
            assert!(start.elapsed() < Duration::from_secs(5));
            std::thread::sleep(Duration::from_millis(5));
        };
        let holder = File::open(&path).unwrap();
        platform::lock_exclusive(&holder).unwrap();
        for _ in 0..3 * MAX_QUEUED / WAKE_AT {
            let mut batch: Vec<AuditEvent> = (0..WAKE_AT)
                .map(|_| AuditEvent::new(Direction::Outbound, Verdict::Pass))
                .collect();
            tx.send(&mut batch);
        }
        platform::unlock(&holder).unwrap();
        drop(tx);
        let (written, dropped) = audit.finish(Duration::from_secs(20));
        assert!(dropped >= MAX_QUEUED as u64, "{dropped}");
        assert_eq!(written + dropped, 1 + 3 * MAX_QUEUED as u64);
        let text = std::fs::read_to_string(&path).unwrap();
        let gaps: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .filter(|v| v["record"] == "gap")
            .collect();
        assert_eq!(gaps.len(), 1, "{gaps:?}");
        assert_eq!(gaps[0]["gap"]["events"], dropped);
        assert!(
            gaps[0]["gap"]["reason"]
                .as_str()
                .unwrap()
                .contains("could not keep up"),
            "{}",
            gaps[0]
        );
        let report = verify::verify(&dir);
        assert!(report.intact(), "{:?}", report.problems);
        assert_eq!(report.lost_events(), dropped);
    }

    #[test]
    fn unwritable_dir_loses_events_without_blocking() {
        let tmp = tempfile::tempdir().unwrap();
        // A file where the directory should be: creating the log fails.
        let blocker = tmp.path().join("logs");
        std::fs::write(&blocker, b"").unwrap();
        let audit = Audit::start(config(&blocker), Arc::new(TestNames));
        let tx = audit.sender();
        for _ in 0..10 {
            tx.send(&mut vec![AuditEvent::new(
                Direction::Inbound,
                Verdict::Allow,
            )]);
        }
        drop(tx);
        let (written, dropped) = audit.finish(Duration::from_secs(5));
        assert_eq!(written, 0);
        assert_eq!(dropped, 10);
    }
}
