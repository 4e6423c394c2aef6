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
pub mod syslog;

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::config::policy::SyslogSink;
use cursor::Cursor;
use syslog::{Connection, Header};

/// Bytes read from a day file at a time.
const CHUNK: usize = 256 * 1024;
/// A line longer than this (no audit line is: frames are capped) is not shipped; a
/// record says where it was.
const MAX_LINE: usize = 80 * 1024 * 1024;
/// Connect and write timeout while running.
const IO_TIMEOUT: Duration = Duration::from_secs(10);
/// Polling the log while lines arrive, and at most while idle.
const BUSY_POLL: Duration = Duration::from_millis(50);
const IDLE_POLL: Duration = Duration::from_secs(1);
/// Reconnection back-off.
const FIRST_RETRY: Duration = Duration::from_millis(250);
const MAX_RETRY: Duration = Duration::from_secs(30);

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
        "log_shipping.syslog: `tls://` needs a build with TLS (the `tls` feature); use such a build, or `tcp://` on a network you trust"
    )]
    NoTls,
    #[error("log_shipping: cannot prepare {dir}: {why}")]
    Dir { dir: PathBuf, why: io::Error },
}

/// What one shipper needs to reach its collector.
#[derive(Clone)]
pub struct Target {
    sink: SyslogSink,
    header: Arc<Header>,
    #[cfg(feature = "tls")]
    tls: Option<Arc<rustls::ClientConfig>>,
}

impl Target {
    /// Everything that can be checked before the first connection: certificates read,
    /// TLS configured.
    pub fn new(sink: &SyslogSink) -> Result<Target, ShipError> {
        #[cfg(not(feature = "tls"))]
        if sink.tls {
            return Err(ShipError::NoTls);
        }
        Ok(Target {
            sink: sink.clone(),
            header: Arc::new(Header::new(sink)),
            #[cfg(feature = "tls")]
            tls: if sink.tls {
                Some(tls_config(sink)?)
            } else {
                None
            },
        })
    }

    pub fn address(&self) -> String {
        self.sink.address()
    }

    fn connect(&self, timeout: Duration) -> io::Result<Connection> {
        Connection::open(
            &self.sink,
            #[cfg(feature = "tls")]
            self.tls.as_ref(),
            timeout,
        )
    }
}

#[cfg(feature = "tls")]
fn tls_config(sink: &SyslogSink) -> Result<Arc<rustls::ClientConfig>, ShipError> {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};
    let roots =
        crate::upstream::tls::roots(sink.ca_file.as_deref()).map_err(|why| ShipError::CaFile {
            path: sink.ca_file.clone().unwrap_or_default(),
            why,
        })?;
    let builder = crate::upstream::tls::builder(roots).map_err(|why| ShipError::CaFile {
        path: sink.ca_file.clone().unwrap_or_default(),
        why,
    })?;
    let config = match (&sink.client_cert, &sink.client_key) {
        (Some(cert), Some(key)) => {
            let bad = |why: String| ShipError::ClientCert {
                cert: cert.clone(),
                key: key.clone(),
                why,
            };
            let chain = CertificateDer::pem_file_iter(cert)
                .map_err(|e| bad(e.to_string()))?
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| bad(e.to_string()))?;
            if chain.is_empty() {
                return Err(bad("the certificate file holds no PEM certificate".into()));
            }
            let key = PrivateKeyDer::from_pem_file(key).map_err(|e| bad(e.to_string()))?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| bad(e.to_string()))?
        }
        _ => builder.with_no_client_auth(),
    };
    Ok(Arc::new(config))
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
}

impl Shipper {
    /// Ship the log of `dir` to `target` from now on, on a thread of its own.
    pub fn start(dir: &Path, target: Target) -> Result<Shipper, ShipError> {
        let mut worker = Worker::new(dir, target)?;
        // Taken now, when it is free, so the cursor of a log shipped for the first time
        // is its end before this process writes a line.
        worker.try_hold();
        let control = Arc::new(Control {
            stop: AtomicBool::new(false),
            deadline: Mutex::new(None),
        });
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
}

/// One pass in the calling thread (`mcpwall log ship`): everything outstanding, within
/// `timeout`. A log never shipped before is shipped from its first line.
pub fn ship_now(dir: &Path, target: Target, timeout: Duration) -> Result<Outcome, String> {
    let mut worker = Worker::new(dir, target).map_err(|e| e.to_string())?;
    worker.from_start = true;
    if !worker.try_hold() {
        return Ok(Outcome {
            lines: 0,
            busy: true,
        });
    }
    let deadline = Instant::now() + timeout;
    match worker.pass(Some(deadline)) {
        Progress::Failed(why) => Err(why),
        _ if worker.waiting => Err(format!(
            "a line was still being written when the time ran out; {} lines were shipped",
            worker.shipped
        )),
        _ => Ok(Outcome {
            lines: worker.shipped,
            busy: false,
        }),
    }
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
    lock: File,
    holding: bool,
    /// With no cursor yet: ship from the first line (`log ship`), not from now.
    from_start: bool,
    cursor: Cursor,
    conn: Option<Connection>,
    retry_at: Option<Instant>,
    backoff: Duration,
    /// The current outage was reported on stderr.
    warned: bool,
    shipped: u64,
    /// A day file ends in a line still being written.
    waiting: bool,
    buf: Vec<u8>,
    out: Vec<u8>,
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
            target,
            cursor_path,
            lock,
            holding: false,
            from_start: false,
            cursor: Cursor::default(),
            conn: None,
            retry_at: None,
            backoff: FIRST_RETRY,
            warned: false,
            shipped: 0,
            waiting: false,
            buf: Vec::new(),
            out: Vec::new(),
        })
    }

    /// Become the one process shipping this log to this sink, if none is.
    fn try_hold(&mut self) -> bool {
        if self.holding {
            return true;
        }
        if self.lock.try_lock().is_err() {
            return false;
        }
        self.holding = true;
        self.cursor = match Cursor::load(&self.cursor_path) {
            Some(cursor) => cursor,
            None if self.from_start => Cursor::default(),
            None => {
                if self.cursor_path.exists() {
                    eprintln!(
                        "mcpwall: warning: {} cannot be read; shipping to {} starts at the log's end",
                        self.cursor_path.display(),
                        self.target.address()
                    );
                }
                let now: Vec<(String, u64)> = crate::audit::files::own_log_files(&self.dir)
                    .into_iter()
                    .filter_map(|f| Some((f.name, std::fs::metadata(&f.path).ok()?.len())))
                    .collect();
                let cursor = Cursor::at_end_of(&now);
                let _ = cursor.save(&self.cursor_path);
                cursor
            }
        };
        true
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
            if self.try_hold() {
                match self.pass(deadline) {
                    Progress::Sent => poll = BUSY_POLL,
                    Progress::Idle | Progress::Failed(_) => poll = (poll * 2).min(IDLE_POLL),
                }
            }
            if stopping {
                return;
            }
            std::thread::park_timeout(poll);
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
                self.out.clear();
                let mut lines = 0;
                for line in self.buf[..complete].split(|&b| b == b'\n') {
                    if !line.is_empty() {
                        self.target.header.frame(&mut self.out, line);
                        lines += 1;
                    }
                }
                let out = std::mem::take(&mut self.out);
                let result = self.send(&out, deadline);
                self.out = out;
                result?;
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
        let mut out = Vec::new();
        self.target.header.frame(&mut out, line.as_bytes());
        self.send(&out, deadline)
    }

    fn send(&mut self, bytes: &[u8], deadline: Option<Instant>) -> io::Result<()> {
        let timeout = match deadline {
            Some(at) => at
                .saturating_duration_since(Instant::now())
                .clamp(Duration::from_millis(1), IO_TIMEOUT),
            None => IO_TIMEOUT,
        };
        if deadline.is_some_and(|at| Instant::now() >= at) {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the time to ship ran out",
            ));
        }
        let conn = match &mut self.conn {
            Some(conn) => conn,
            None => self.conn.insert(self.target.connect(timeout)?),
        };
        if let Err(e) = conn.write_all(bytes).and_then(|()| conn.flush()) {
            self.conn = None;
            return Err(e);
        }
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

    fn failed(&mut self, error: io::Error) -> Progress {
        self.conn = None;
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
