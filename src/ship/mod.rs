//! Audit lines shipped off the machine (`settings.log_shipping`), so a copy lives where
//! the agent's user cannot rewrite it.
//!
//! The shipper does not take events from the writer: it reads the day files from where
//! it stopped ([`cursor`]) and sends every complete line, in file order, byte for byte.
//! So the collected copy is the local chain itself (the writer's own records of gaps and
//! cut lines included, hashes included: `mcpwall log verify` checks it); lines written by
//! every proxy sharing the log directory are sent once, by whichever of them holds the
//! sink's lock; and lines written just before a crash, a `kill -9` or an outage of the
//! collector are sent by the next mcpwall that starts with the same log directory, or by
//! `mcpwall log ship`. Delivery is at least once: a line whose write the connection
//! lost may be sent again (the line's `hash` tells copies apart).
//!
//! The shipper runs on its own thread and never holds up a frame: a collector that is
//! slow or gone only delays the copy.

pub mod cursor;
pub mod otlp;
pub mod syslog;

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use memchr::memmem;

use crate::audit::{AuditEvent, AuditSender, Direction, RuleRef, Verdict};
use crate::config::policy::LogShipping;
use cursor::Cursor;

/// Bytes read from a day file at a time (and so the most lines in one batch).
const CHUNK: usize = 256 * 1024;
/// A line longer than this (no audit line is: frames are capped) is not shipped; a
/// record says where it was.
const MAX_LINE: usize = 80 * 1024 * 1024;
/// Connect and write timeout while running.
const IO_TIMEOUT: Duration = Duration::from_secs(10);
/// Polling the log while lines arrive, and at most while idle.
const BUSY_POLL: Duration = Duration::from_millis(50);
const IDLE_POLL: Duration = Duration::from_secs(1);
/// How long a process ending waits for another to ship its last lines, when no deadline
/// is given.
const HAND_OVER: Duration = Duration::from_secs(2);
/// Reconnection back-off.
const FIRST_RETRY: Duration = Duration::from_millis(250);
const MAX_RETRY: Duration = Duration::from_secs(30);

/// Most bytes of notes kept for the next shipper ([`Worker::keep`]): a few per process
/// that ended since one last started. Past this a note is said on stderr only.
const MAX_KEPT_NOTES: u64 = 64 * 1024;

/// The audit log's rule for what the shipper itself has to say (a damaged cursor).
pub const RULE_LOG_SHIPPING: &str = "mcpwall:log_shipping";

/// Why shipping could not start (the proxy or gateway then does not start either: a copy
/// the user asked for is not silently dropped).
#[derive(Debug, thiserror::Error)]
pub enum ShipError {
    #[error(
        "log_shipping.syslog: {path}: {why}; give a readable PEM file, or remove the key to verify the collector against the public roots"
    )]
    CaFile { path: PathBuf, why: String },
    #[error(
        "log_shipping.syslog: the client certificate {cert} or its key {key} cannot be used: {why}"
    )]
    ClientCert {
        cert: PathBuf,
        key: PathBuf,
        why: String,
    },
    #[error(
        "log_shipping.{sink}: `{scheme}` needs a build with TLS (the `tls` feature); use such a build, or a plain address on a network you trust"
    )]
    NoTls {
        sink: &'static str,
        scheme: &'static str,
    },
    #[error("log_shipping.otlp: {endpoint}: {why}")]
    Otlp { endpoint: String, why: String },
    #[error("log_shipping: cannot prepare {dir}: {why}")]
    Dir { dir: PathBuf, why: io::Error },
}

/// One collector, with everything that can be checked before the first connection:
/// certificates and header files read, TLS configured.
#[derive(Clone)]
pub enum Target {
    Syslog(syslog::Target),
    Otlp(otlp::Target),
}

/// The collectors `shipping` names, each ready to ship to (syslog first).
pub fn targets(shipping: &LogShipping) -> Result<Vec<Target>, ShipError> {
    let mut out = Vec::new();
    if let Some(sink) = &shipping.syslog {
        out.push(Target::Syslog(syslog::Target::new(sink)?));
    }
    if let Some(sink) = &shipping.otlp {
        out.push(Target::Otlp(otlp::Target::new(sink)?));
    }
    Ok(out)
}

impl Target {
    /// The collector's address as the policy wrote it (`tls://HOST:PORT`, an OTLP URL).
    pub fn address(&self) -> String {
        match self {
            Target::Syslog(t) => t.address(),
            Target::Otlp(t) => t.address(),
        }
    }

    fn sink(&self) -> Box<dyn Sink> {
        match self {
            Target::Syslog(t) => Box::new(syslog::Sender::new(t.clone())),
            Target::Otlp(t) => Box::new(otlp::Sender::new(t.clone())),
        }
    }
}

/// A collector's connection and the batch of lines on its way there.
trait Sink: Send {
    /// Add one line (without its newline) to the batch.
    fn add(&mut self, line: &[u8]);
    /// Send the batch within `timeout`. It is emptied whether or not it went: on an error
    /// the lines are read from the day file again, from the cursor.
    fn send(&mut self, timeout: Duration) -> io::Result<Taken>;
    /// Forget the connection and the batch (after a failure), so the next send connects
    /// anew and sends what the cursor says.
    fn disconnect(&mut self);
}

/// What a collector did with a batch it answered for.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Taken {
    /// Every line.
    All,
    /// The batch of `lines`, but it said it dropped `dropped` of them on purpose, and
    /// why (OTLP's partial success): sending them again would not change that.
    Partly {
        lines: usize,
        dropped: u64,
        why: String,
    },
}

/// What the audit log says of the lines a collector drops on purpose: the first drop, then
/// nothing until the collector takes a batch whole again, when one line counts the drops
/// in between. (A note per batch would itself be shipped, and a collector that drops
/// everything would drop each note in turn, for as long as mcpwall runs.)
#[derive(Debug, Default)]
struct DropNotes {
    /// Since the last note: `(batches, lines)` dropped, when the collector is dropping.
    since_note: Option<(u64, u64)>,
}

impl DropNotes {
    /// What to say after the collector at `address` answered a batch with `taken`.
    fn after(&mut self, taken: Taken, address: &str) -> Option<String> {
        match (taken, &mut self.since_note) {
            (
                Taken::Partly {
                    lines,
                    dropped,
                    why,
                },
                None,
            ) => {
                self.since_note = Some((0, 0));
                Some(format!(
                    "the collector at {address} took a batch of {lines} lines and dropped {dropped} of them: {why}; they are in the local log only (`mcpwall log verify --copy` shows which), and later drops are counted until it takes a batch whole"
                ))
            }
            (Taken::Partly { dropped, .. }, Some((batches, lines))) => {
                *batches += 1;
                *lines += dropped;
                None
            }
            (Taken::All, since_note) => match since_note.take() {
                Some((batches, lines)) if batches > 0 => Some(format!(
                    "the collector at {address} takes whole batches again; before, it had dropped {lines} more lines of {batches} batches, which are in the local log only"
                )),
                _ => None,
            },
        }
    }
}

/// How serious an audit line is, for the collector's filters: the writer's records (a
/// gap, a cut line) are warnings; refusals notices; errors errors; the rest informational.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Severity {
    Info,
    Notice,
    Warning,
    Error,
}

/// The line's severity, and whether it is one of the writer's records.
fn classify(line: &[u8]) -> (Severity, bool) {
    let head = &line[..line.len().min(80)];
    if memmem::find(head, b"\"record\":\"").is_some() {
        return (Severity::Warning, true);
    }
    let Some(at) = memmem::find(line, b"\"action\":\"") else {
        return (Severity::Info, false);
    };
    let word = &line[at + 10..];
    let word = &word[..memchr::memchr(b'"', word).unwrap_or(0)];
    let severity = match word {
        b"error" => Severity::Error,
        b"deny" | b"block" | b"redact" | b"drop" | b"declined" | b"timed_out" => Severity::Notice,
        _ => Severity::Info,
    };
    (severity, false)
}

/// The line's own time (`{"ts":"2026-12-06T13:22:04.123456Z",…`): RFC 3339 with at most
/// six fractional digits.
fn event_time(line: &[u8]) -> Option<&str> {
    let rest = line.strip_prefix(b"{\"ts\":\"")?;
    let end = memchr::memchr(b'"', rest.get(..40)?)?;
    let ts = std::str::from_utf8(&rest[..end]).ok()?;
    let well_formed = ts.len() >= 20
        && ts.ends_with('Z')
        && ts
            .bytes()
            .all(|b| b.is_ascii_digit() || b"-:.TZ".contains(&b));
    well_formed.then_some(ts)
}

/// The shipping thread of one process.
pub struct Shipper {
    control: Arc<Control>,
    thread: Option<JoinHandle<()>>,
}

struct Control {
    stop: AtomicBool,
    /// Set by [`Shipper::finish`]: the last pass ends by then.
    deadline: Mutex<Option<Instant>>,
    /// What the shipper has to tell the audit log, and the writer to tell it to once the
    /// log is open ([`Shipper::audit_to`]).
    audit: Mutex<Notes>,
}

#[derive(Default)]
struct Notes {
    waiting: Vec<String>,
    sender: Option<AuditSender>,
    /// Said after the audit writer finished (a drop seen by a proxy's last pass): kept in
    /// the shipping directory for the next process that ships this log.
    late: Vec<String>,
}

impl Control {
    /// Say `text` in the audit log, now if the writer is there, or once it is; after it
    /// finished, through the next process that ships the log ([`Worker::keep_late`]).
    fn note(&self, text: String) {
        let mut notes = self.audit.lock().unwrap_or_else(|e| e.into_inner());
        match &notes.sender {
            Some(sender) => {
                if !sender.send_unless_finished(&mut vec![note_event(text.clone())]) {
                    notes.late.push(text);
                }
            }
            None => notes.waiting.push(text),
        }
    }
}

/// The audit event of something the shipper has to say (in the chain, so in the copy).
pub fn note_event(text: String) -> AuditEvent {
    let mut event = AuditEvent::new(Direction::Inbound, Verdict::LogOnly);
    event.method = Some("mcpwall/log_shipping".into());
    event.rule = Some(RuleRef::Builtin(RULE_LOG_SHIPPING));
    event.message = Some(text.into());
    event
}

impl Shipper {
    /// Ship the log of `dir` to `target` from now on, on a thread of its own.
    pub fn start(dir: &Path, target: Target) -> Result<Shipper, ShipError> {
        let mut worker = Worker::new(dir, target)?;
        let control = Arc::new(Control {
            stop: AtomicBool::new(false),
            deadline: Mutex::new(None),
            audit: Mutex::new(Notes::default()),
        });
        // Taken now, when it is free, so the cursor of a log shipped for the first time
        // is its end before this process writes a line.
        worker.try_hold(&control);
        let thread_control = control.clone();
        let thread = std::thread::Builder::new()
            .name("mcpwall-ship".into())
            .spawn(move || worker.run(&thread_control))
            .map_err(|why| ShipError::Dir {
                dir: dir.to_path_buf(),
                why,
            })?;
        Ok(Shipper {
            control,
            thread: Some(thread),
        })
    }

    /// The audit log is open: what the shipper had to say goes there now, and whatever it
    /// has to say later.
    pub fn audit_to(&self, sender: AuditSender) {
        let mut notes = self.control.audit.lock().unwrap_or_else(|e| e.into_inner());
        let mut events: Vec<AuditEvent> = notes.waiting.drain(..).map(note_event).collect();
        sender.send(&mut events);
        notes.sender = Some(sender);
    }

    /// Ship what is left (call it after the audit writer has finished), for at most
    /// `timeout`, then stop.
    pub fn finish(mut self, timeout: Duration) {
        *self
            .control
            .deadline
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some(Instant::now() + timeout);
        self.control.stop.store(true, Ordering::Release);
        if let Some(thread) = self.thread.take() {
            thread.thread().unpark();
            let _ = thread.join();
        }
    }
}

/// What [`ship_now`] did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    pub lines: u64,
    /// Another process holds the sink's lock: it ships.
    pub busy: bool,
    /// What the caller is to write into the audit log (a damaged cursor).
    pub notes: Vec<String>,
}

/// One pass in the calling thread (`mcpwall log ship`): everything outstanding, within
/// `timeout`. A log never shipped before is shipped from its first line.
pub fn ship_now(dir: &Path, target: Target, timeout: Duration) -> Result<Outcome, String> {
    let mut worker = Worker::new(dir, target).map_err(|e| e.to_string())?;
    worker.from_start = true;
    let control = Control {
        stop: AtomicBool::new(true),
        deadline: Mutex::new(None),
        audit: Mutex::new(Notes::default()),
    };
    if !worker.try_hold(&control) {
        return Ok(Outcome {
            lines: 0,
            busy: true,
            notes: Vec::new(),
        });
    }
    let notes = std::mem::take(
        &mut control
            .audit
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .waiting,
    );
    let deadline = Instant::now() + timeout;
    let failed = match worker.pass(Some(deadline)) {
        Progress::Failed(why) => Some(why),
        _ if worker.waiting => Some(format!(
            "a line was still being written when the time ran out; {} lines were shipped",
            worker.shipped
        )),
        _ => None,
    };
    if let Some(why) = failed {
        // Nothing is written to the audit log on a failure: the notes wait for the next try.
        let later = std::mem::take(&mut worker.notes);
        worker.keep(notes.into_iter().chain(later));
        return Err(why);
    }
    Ok(Outcome {
        lines: worker.shipped,
        busy: false,
        notes: notes.into_iter().chain(worker.notes).collect(),
    })
}

/// The log's day files as they stand now: `(name, length)`.
fn log_lengths(dir: &Path) -> Vec<(String, u64)> {
    crate::audit::files::own_log_files(dir)
        .into_iter()
        .filter_map(|f| Some((f.name, std::fs::metadata(&f.path).ok()?.len())))
        .collect()
}

enum Progress {
    /// Lines went out.
    Sent,
    /// Nothing new.
    Idle,
    /// The collector could not be reached or stopped taking lines.
    Failed(String),
}

struct Worker {
    dir: PathBuf,
    target: Target,
    cursor_path: PathBuf,
    /// Notes said after the audit writer finished, for the next process to write.
    kept_notes: PathBuf,
    lock: File,
    holding: bool,
    /// With no cursor yet: ship from the first line (`log ship`), not from now.
    from_start: bool,
    cursor: Cursor,
    sink: Box<dyn Sink>,
    retry_at: Option<Instant>,
    backoff: Duration,
    /// The current outage was reported on stderr.
    warned: bool,
    /// What the collector dropped on purpose, and what the audit log said of it.
    drops: DropNotes,
    /// What to say in the audit log (`Control::note`, or [`Outcome::notes`]).
    notes: Vec<String>,
    shipped: u64,
    /// A day file ends in a line still being written.
    waiting: bool,
    buf: Vec<u8>,
}

impl Worker {
    fn new(dir: &Path, target: Target) -> Result<Worker, ShipError> {
        let (cursor_path, lock_path) = cursor::paths(dir, &target.address());
        let shipping = cursor_path.parent().unwrap_or(dir);
        let prepare = || -> io::Result<File> {
            crate::platform::owner_only_dir(std::fs::DirBuilder::new().recursive(true))
                .create(shipping)?;
            std::fs::OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(&lock_path)
        };
        let lock = prepare().map_err(|why| ShipError::Dir {
            dir: shipping.to_path_buf(),
            why,
        })?;
        Ok(Worker {
            dir: dir.to_path_buf(),
            sink: target.sink(),
            target,
            kept_notes: cursor_path.with_extension("notes"),
            cursor_path,
            lock,
            holding: false,
            from_start: false,
            cursor: Cursor::default(),
            retry_at: None,
            backoff: FIRST_RETRY,
            warned: false,
            drops: DropNotes::default(),
            notes: Vec::new(),
            shipped: 0,
            waiting: false,
            buf: Vec::new(),
        })
    }

    /// Become the one process shipping this log to this sink, if none is.
    fn try_hold(&mut self, control: &Control) -> bool {
        if self.holding {
            return true;
        }
        if self.lock.try_lock().is_err() {
            return false;
        }
        self.holding = true;
        self.cursor = match Cursor::load(&self.cursor_path) {
            Ok(Some(cursor)) => cursor,
            // Where shipping stopped is unknown: from the first line, so that no line is
            // missing from the copy. Lines sent again are told apart by their hash; a
            // line skipped could never be told from one deleted.
            Err(why) => {
                let text = format!(
                    "the shipping cursor {} is damaged ({why}): shipping to {} starts again from the log's first line, so the collector may get lines it already has (the same `hash`)",
                    self.cursor_path.display(),
                    self.target.address()
                );
                eprintln!("mcpwall: warning: {text}");
                control.note(text);
                let cursor = Cursor::default();
                let _ = cursor.save(&self.cursor_path);
                cursor
            }
            Ok(None) if self.from_start => Cursor::default(),
            Ok(None) => {
                let cursor = Cursor::at_end_of(&log_lengths(&self.dir));
                let _ = cursor.save(&self.cursor_path);
                cursor
            }
        };
        // What an earlier process had to say after its audit log closed.
        let mut kept = String::new();
        if File::open(&self.kept_notes)
            .and_then(|f| f.take(MAX_KEPT_NOTES).read_to_string(&mut kept))
            .is_ok()
        {
            let _ = std::fs::remove_file(&self.kept_notes);
            for note in kept.lines().filter(|l| !l.is_empty()) {
                control.note(note.to_string());
            }
        }
        true
    }

    /// Keeps `notes` in the shipping directory, one a line, for the next process that
    /// holds this sink's lock ([`Worker::try_hold`]).
    fn keep(&self, notes: impl IntoIterator<Item = String>) {
        let mut text = String::new();
        for note in notes {
            text.push_str(&note.replace(['\n', '\r'], " "));
            text.push('\n');
        }
        if text.is_empty() {
            return;
        }
        let held = std::fs::metadata(&self.kept_notes).map_or(0, |m| m.len());
        if held + text.len() as u64 > MAX_KEPT_NOTES {
            eprintln!(
                "mcpwall: warning: {} holds {held} bytes of notes for the next shipper, the most it keeps: these were said above only",
                self.kept_notes.display()
            );
            return;
        }
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.kept_notes)
            .and_then(|mut f| io::Write::write_all(&mut f, text.as_bytes()));
        if let Err(why) = written {
            eprintln!(
                "mcpwall: warning: cannot keep the shipper's notes in {}: {why}; they were said above only",
                self.kept_notes.display()
            );
        }
    }

    /// Keeps what was said after the audit writer finished ([`Notes::late`]).
    fn keep_late(&self, control: &Control) {
        let late =
            std::mem::take(&mut control.audit.lock().unwrap_or_else(|e| e.into_inner()).late);
        self.keep(late.into_iter().map(|note| {
            format!("{note} (seen by an earlier mcpwall after its audit log had closed)")
        }));
    }

    fn run(mut self, control: &Control) {
        let mut poll = BUSY_POLL;
        loop {
            let stopping = control.stop.load(Ordering::Acquire);
            let deadline = *control.deadline.lock().unwrap_or_else(|e| e.into_inner());
            if stopping {
                // The last pass: whatever the back-off says, one more try.
                self.retry_at = None;
            }
            if self.try_hold(control) {
                match self.pass(deadline) {
                    Progress::Sent => poll = BUSY_POLL,
                    Progress::Idle | Progress::Failed(_) => poll = (poll * 2).min(IDLE_POLL),
                }
                for note in self.notes.drain(..) {
                    control.note(note);
                }
            }
            if stopping {
                if !self.holding {
                    self.hand_over(control, deadline);
                    for note in self.notes.drain(..) {
                        control.note(note);
                    }
                }
                self.keep_late(control);
                return;
            }
            std::thread::park_timeout(poll);
        }
    }

    /// The last pass of a process that does not hold the sink's lock: its lines are
    /// written, but the holder's last pass may have read the log before they were (two
    /// proxies ending together). Wait, until `deadline`, for the holder's cursor to pass
    /// the end of the log as it stands now, or for the lock to come free (the holder
    /// ended) and ship them itself: giving up at once could leave them unshipped until
    /// some later start or `log ship`.
    fn hand_over(&mut self, control: &Control, deadline: Option<Instant>) {
        let written = log_lengths(&self.dir);
        let deadline = deadline.unwrap_or_else(|| Instant::now() + HAND_OVER);
        while Instant::now() < deadline {
            if self.try_hold(control) {
                self.pass(Some(deadline));
                return;
            }
            if let Ok(Some(cursor)) = Cursor::load(&self.cursor_path)
                && written
                    .iter()
                    .all(|(name, len)| cursor.offset(name).is_none_or(|at| at >= *len))
            {
                return;
            }
            std::thread::sleep(BUSY_POLL / 5);
        }
    }

    /// Ship every complete line past the cursor, oldest file first.
    fn pass(&mut self, deadline: Option<Instant>) -> Progress {
        if let Some(at) = self.retry_at
            && Instant::now() < at
        {
            return Progress::Idle;
        }
        self.waiting = false;
        let files = crate::audit::files::own_log_files(&self.dir);
        let names: Vec<String> = files.iter().map(|f| f.name.clone()).collect();
        let mut sent = false;
        for (name, offset) in self.cursor.missing(&names) {
            let why = format!(
                "the day file was removed before shipping was sure of its end; lines after byte {offset}, if any, were not shipped"
            );
            if let Err(e) = self.send_record(&name, offset, &why, deadline) {
                return self.failed(e);
            }
            self.cursor.forget(&name);
            let _ = self.cursor.save(&self.cursor_path);
            sent = true;
        }
        for file in &files {
            let Some(offset) = self.cursor.offset(&file.name) else {
                continue;
            };
            match self.ship_file(&file.name, &file.path, offset, deadline) {
                Ok(true) => sent = true,
                Ok(false) => {}
                Err(e) => return self.failed(e),
            }
        }
        if sent { Progress::Sent } else { Progress::Idle }
    }

    /// Ship `path` from `offset` to its last complete line; whether anything went out.
    fn ship_file(
        &mut self,
        name: &str,
        path: &Path,
        mut offset: u64,
        deadline: Option<Instant>,
    ) -> io::Result<bool> {
        let Ok(mut file) = File::open(path) else {
            return Ok(false);
        };
        let len = file.metadata()?.len();
        if len < offset {
            let why = format!(
                "the day file is {len} bytes, shorter than the {offset} already shipped: it was truncated or replaced; shipping goes on from its end"
            );
            self.send_record(name, offset, &why, deadline)?;
            self.cursor.advance(name, len);
            let _ = self.cursor.save(&self.cursor_path);
            return Ok(true);
        }
        let mut sent = false;
        while offset < len {
            let want = usize::try_from(len - offset)
                .unwrap_or(usize::MAX)
                .min(CHUNK);
            file.seek(SeekFrom::Start(offset))?;
            self.buf.clear();
            (&mut file).take(want as u64).read_to_end(&mut self.buf)?;
            let mut complete = memchr::memrchr(b'\n', &self.buf).map(|i| i + 1);
            if complete.is_none() && self.buf.len() == CHUNK {
                complete = self.read_long_line(&mut file, offset, len)?;
            }
            let Some(complete) = complete else {
                // The file ends in a line being written (or cut off, until the next
                // writer mends it): it is shipped once whole.
                self.waiting = true;
                break;
            };
            if complete > MAX_LINE {
                let why = format!("a line longer than {MAX_LINE} bytes was not shipped");
                self.send_record(name, offset, &why, deadline)?;
            } else {
                let mut lines = 0;
                for line in self.buf[..complete].split(|&b| b == b'\n') {
                    if !line.is_empty() {
                        self.sink.add(line);
                        lines += 1;
                    }
                }
                self.send(deadline)?;
                self.shipped += lines;
            }
            offset += complete as u64;
            self.cursor.advance(name, offset);
            let _ = self.cursor.save(&self.cursor_path);
            sent = true;
        }
        Ok(sent)
    }

    /// The rest of a line longer than [`CHUNK`], appended to the buffer up to
    /// [`MAX_LINE`]; past that only its end is looked for. The line's length with its
    /// newline, or `None` when the file ends first.
    fn read_long_line(
        &mut self,
        file: &mut File,
        offset: u64,
        len: u64,
    ) -> io::Result<Option<usize>> {
        let mut pos = offset + self.buf.len() as u64;
        let mut chunk = vec![0; CHUNK];
        while pos < len {
            let want = usize::try_from(len - pos).unwrap_or(usize::MAX).min(CHUNK);
            file.seek(SeekFrom::Start(pos))?;
            let n = file.read(&mut chunk[..want])?;
            if n == 0 {
                break;
            }
            let found = memchr::memchr(b'\n', &chunk[..n]);
            let keep = found.map_or(n, |i| i + 1);
            if self.buf.len() + keep <= MAX_LINE + 1 {
                self.buf.extend_from_slice(&chunk[..keep]);
            }
            pos += keep as u64;
            if found.is_some() {
                return Ok(usize::try_from(pos - offset).ok());
            }
        }
        Ok(None)
    }

    /// A line of the shipper's own, telling the collector what it will not get.
    fn send_record(
        &mut self,
        file: &str,
        offset: u64,
        why: &str,
        deadline: Option<Instant>,
    ) -> io::Result<()> {
        let mut line = String::from("{\"ts\":\"");
        crate::audit::rfc3339_now(&mut line);
        line.push_str("\",\"record\":\"not_shipped\",\"file\":");
        line.push_str(&serde_json::Value::from(file).to_string());
        line.push_str(&format!(",\"offset\":{offset},\"why\":"));
        line.push_str(&serde_json::Value::from(why).to_string());
        line.push('}');
        eprintln!(
            "mcpwall: warning: shipping the audit log to {}: {file}: {why}",
            self.target.address()
        );
        self.sink.add(line.as_bytes());
        self.send(deadline)
    }

    /// Send the sink's batch.
    fn send(&mut self, deadline: Option<Instant>) -> io::Result<()> {
        let timeout = match deadline {
            Some(at) => at
                .saturating_duration_since(Instant::now())
                .clamp(Duration::from_millis(1), IO_TIMEOUT),
            None => IO_TIMEOUT,
        };
        if deadline.is_some_and(|at| Instant::now() >= at) {
            self.sink.disconnect();
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the time to ship ran out",
            ));
        }
        let taken = self.sink.send(timeout)?;
        self.note_drops(taken);
        if std::mem::take(&mut self.warned) {
            eprintln!(
                "mcpwall: shipping the audit log to {} works again",
                self.target.address()
            );
        }
        self.retry_at = None;
        self.backoff = FIRST_RETRY;
        Ok(())
    }

    /// Says in the audit log (and on stderr) what the collector dropped on purpose
    /// ([`DropNotes`]).
    fn note_drops(&mut self, taken: Taken) {
        if let Some(note) = self.drops.after(taken, &self.target.address()) {
            eprintln!("mcpwall: warning: shipping the audit log: {note}");
            self.notes.push(note);
        }
    }

    fn failed(&mut self, error: io::Error) -> Progress {
        self.sink.disconnect();
        let why = error.to_string();
        if !self.warned {
            eprintln!(
                "mcpwall: warning: cannot ship the audit log to {}: {why}; its lines wait in {} and go when it answers",
                self.target.address(),
                self.dir.display()
            );
            self.warned = true;
        }
        self.retry_at = Some(Instant::now() + self.backoff);
        self.backoff = (self.backoff * 2).min(MAX_RETRY);
        Progress::Failed(why)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn worker(dir: &Path) -> Worker {
        let sink = crate::config::policy::SyslogSink {
            tls: false,
            host: "127.0.0.1".into(),
            port: 9,
            ca_file: None,
            client_cert: None,
            client_key: None,
            facility: 16,
            app_name: "mcpwall".into(),
        };
        Worker::new(dir, Target::Syslog(syslog::Target::new(&sink).unwrap())).unwrap()
    }

    fn control() -> Control {
        Control {
            stop: AtomicBool::new(false),
            deadline: Mutex::new(None),
            audit: Mutex::new(Notes::default()),
        }
    }

    /// A note said after the audit writer finished (a drop seen by a proxy's last pass)
    /// is not lost: it is kept in the shipping directory, and the next process to hold
    /// the sink's lock says it in its own audit log, once.
    #[test]
    fn a_note_said_after_the_audit_log_closed_is_said_by_the_next_shipper() {
        let dir = tempfile::tempdir().unwrap();
        let audit = crate::audit::Audit::start(
            crate::audit::AuditConfig {
                dir: dir.path().to_path_buf(),
                session: "s".into(),
                server: "x".into(),
                retention: None,
            },
            Arc::new(crate::audit::NoNames),
        );
        let first = control();
        let mut shipper = worker(dir.path());
        assert!(shipper.try_hold(&first));
        first.audit.lock().unwrap().sender = Some(audit.sender());
        first.note("while open".into());
        audit.finish(Duration::from_secs(5));
        first.note("the collector dropped 2 lines".into());
        shipper.keep_late(&first);
        drop(shipper);

        let next = control();
        let mut shipper = worker(dir.path());
        assert!(shipper.try_hold(&next));
        let waiting = next.audit.lock().unwrap().waiting.clone();
        assert_eq!(
            waiting,
            [
                "the collector dropped 2 lines (seen by an earlier mcpwall after its audit log had closed)"
            ]
        );
        assert!(!shipper.kept_notes.exists());
        drop(shipper);
        let again = control();
        assert!(worker(dir.path()).try_hold(&again));
        assert!(again.audit.lock().unwrap().waiting.is_empty());
    }

    /// The notes kept for the next shipper are bounded: past [`MAX_KEPT_NOTES`] a note is
    /// not kept (it was said on stderr).
    #[test]
    fn kept_notes_are_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let shipper = worker(dir.path());
        let note = "n".repeat(MAX_KEPT_NOTES as usize / 3);
        for _ in 0..5 {
            shipper.keep([note.clone()]);
        }
        let held = std::fs::metadata(&shipper.kept_notes).unwrap().len();
        assert_eq!(held, 2 * (note.len() as u64 + 1));
        assert!(held <= MAX_KEPT_NOTES);
    }

    /// The first drop is noted; later ones are counted, not noted, until a batch is taken
    /// whole, which notes their count (and nothing when there were none); a drop after
    /// that is noted again.
    #[test]
    fn drops_are_noted_once_then_counted_until_a_batch_is_taken_whole() {
        let partly = |dropped| Taken::Partly {
            lines: 10,
            dropped,
            why: "too old".into(),
        };
        let mut notes = DropNotes::default();
        let first = notes.after(partly(2), "https://c/v1/logs").unwrap();
        assert!(
            first.contains("https://c/v1/logs")
                && first.contains("batch of 10 lines and dropped 2")
                && first.contains("too old"),
            "{first}"
        );
        assert_eq!(notes.after(partly(3), "a"), None);
        assert_eq!(notes.after(partly(4), "a"), None);
        let whole = notes.after(Taken::All, "a").unwrap();
        assert!(
            whole.contains("dropped 7 more lines of 2 batches"),
            "{whole}"
        );
        assert_eq!(notes.after(Taken::All, "a"), None);

        assert!(notes.after(partly(1), "a").is_some());
        assert_eq!(
            notes.after(Taken::All, "a"),
            None,
            "no drops since the note"
        );
        assert!(notes.after(partly(1), "a").is_some());
    }
}
