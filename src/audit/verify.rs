//! `mcpwall log verify`: walk the chain of every day file (see [`super::chain`]), say
//! where it breaks, and go on to the end of every file.
//!
//! What is detected, each with its file and line: an edited line (its hash no longer
//! matches), a deleted, inserted or moved line (the next line's `prev` no longer
//! matches), a line without chain fields among chained ones, a file cut short (shorter
//! than its seal, or the sealed last line gone; or recorded so by a writer that found it
//! shorter), a day file missing (another file's first line chains to a line no day file
//! holds) or whose seal remains. After a problem the walk takes up the chain again at
//! the next chained line, so one edit is one problem and the rest of the day and the
//! following days are still checked.
//!
//! What is not tampering, and reported as such: a line cut off by a writer that stopped
//! mid-line (a crash or a full disk), either sealed by the next writer (ended with a
//! newline and followed by its `cut_line` record, see [`super::records`]) or still the
//! file's last line beyond its seal (no writer has come since); a line an older mcpwall
//! appended straight onto such a cut line (the line's chained part verifies); a `gap`
//! record (events a writer could not write). Files removed by retention are recorded
//! (`audit.retention.jsonl`) and not reported.
//!
//! Day files follow the chain, not the calendar: a file's first chained line may chain to
//! a line of any other day file (the newest when it was begun: after a clock stepped back
//! across midnight, a later-dated one), found in a first pass over the files' first lines.
//!
//! Limits: the chain has no secret key, so someone who rewrites a file and recomputes
//! every hash and the seal goes unnoticed; removing a day file no other file chains to
//! (the newest) together with its seal leaves nothing behind to compare with. Lines
//! written before tamper evidence existed (at the start of the log) are counted, not
//! verified.

use std::collections::{HashMap, HashSet};
use std::io::BufRead;
use std::path::Path;

use super::chain::{self, GENESIS, Link, Seal};
use super::files::{self, LogFile};
use super::records::Record;
use super::retention;
use super::time::Micros;

/// What kind of break a [`Problem`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProblemKind {
    /// A chained line whose content does not match its hash.
    Edited,
    /// A line that does not chain to the line before it.
    NotFollowing,
    /// A complete line without chain fields among chained ones.
    Unchained,
    /// Bytes removed at a file's end (its seal, or a writer's record, says so).
    Truncated,
    /// A record of a cut line that is not there as recorded.
    CutRecordMismatch,
    /// A day file's first line chains to a line no day file holds.
    MissingFile,
    /// A chain begun anew (zeros) after the log's first.
    NewChain,
    /// The seal is missing or disagrees with the file.
    Seal,
    Unreadable,
}

impl ProblemKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ProblemKind::Edited => "edited",
            ProblemKind::NotFollowing => "not_following",
            ProblemKind::Unchained => "unchained",
            ProblemKind::Truncated => "truncated",
            ProblemKind::CutRecordMismatch => "cut_record_mismatch",
            ProblemKind::MissingFile => "missing_file",
            ProblemKind::NewChain => "new_chain",
            ProblemKind::Seal => "seal",
            ProblemKind::Unreadable => "unreadable",
        }
    }
}

/// A place where the chain is broken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub file: String,
    /// 1-based; `None` for a problem with the file as a whole.
    pub line: Option<usize>,
    pub kind: ProblemKind,
    pub what: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.line {
            Some(n) => write!(f, "{}:{n}: {}", self.file, self.what),
            None => write!(f, "{}: {}", self.file, self.what),
        }
    }
}

/// A line cut off by a writer that stopped mid-line: lost, not tampered with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CutLine {
    pub file: String,
    pub line: usize,
    /// Lines the cut spans: one, or more when the write that mended it was cut off in
    /// turn (a disk that freed a little room) and mended by a later one.
    pub lines: usize,
    /// Its byte offset in the file and its length (the cut bytes, no last newline).
    pub offset: u64,
    pub length: u64,
    /// The line of the `cut_line` record that sealed it; `None` when it is still the
    /// file's unsealed last line, or when an older mcpwall appended onto it unsealed.
    pub sealed_at: Option<usize>,
    /// An older mcpwall appended the next line straight onto it (one line in the file).
    pub glued: bool,
}

impl std::fmt::Display for CutLine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (file, line, len) = (&self.file, self.line, self.length);
        match self.sealed_at {
            Some(at) if self.lines > 1 => write!(
                f,
                "{file}:{line}: {} lines cut off ({len} bytes: a line its writer stopped writing mid-way, a crash or a full disk, and the mending writes cut off in turn), sealed by the record at line {at}",
                self.lines
            ),
            Some(at) => write!(
                f,
                "{file}:{line}: a line cut off after {len} bytes (its writer stopped mid-line: a crash or a full disk), sealed by the record at line {at}"
            ),
            None if self.glued => write!(
                f,
                "{file}:{line}: the line begins with {len} bytes of a line cut off mid-write, which an older mcpwall appended onto without sealing; the line's own event verifies"
            ),
            None => write!(
                f,
                "{file}:{line}: the last line is cut off after {len} bytes (its writer stopped mid-line: a crash or a full disk); the next write seals it"
            ),
        }
    }
}

/// Events a writer could not write, as its `gap` record says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gap {
    pub file: String,
    pub line: usize,
    pub events: u64,
    pub from: Micros,
    pub until: Micros,
    pub reason: String,
}

impl std::fmt::Display for Gap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}:{}: {} event(s) between {} and {} could not be written ({})",
            self.file,
            self.line,
            self.events,
            super::records::time_text(self.from),
            super::records::time_text(self.until),
            self.reason
        )
    }
}

/// What `verify` found.
#[derive(Debug, Default)]
pub struct Report {
    pub files: usize,
    /// Lines in all day files.
    pub lines: u64,
    /// Chained lines whose hash was checked.
    pub chained_lines: u64,
    /// Lines at the start of the log written before tamper evidence (not verifiable).
    pub unchained_lines: u64,
    /// Day files retention removed (recorded, not tampering).
    pub removed_by_retention: usize,
    /// The original mcpwall's day files seen and left out (never part of the chain).
    pub foreign_files: usize,
    /// Every problem, in file and line order.
    pub problems: Vec<Problem>,
    /// Lines cut off by a crash or a full disk.
    pub cut_lines: Vec<CutLine>,
    /// Events the writers recorded as lost.
    pub gaps: Vec<Gap>,
}

impl Report {
    /// No tampering found (cut lines and gaps are losses, not tampering).
    pub fn intact(&self) -> bool {
        self.problems.is_empty()
    }

    /// Events lost according to the gap records.
    pub fn lost_events(&self) -> u64 {
        self.gaps.iter().map(|g| g.events).sum()
    }
}

/// Verify every day file of `dir`.
pub fn verify(dir: &Path) -> Report {
    verify_with(dir, Seals::Expected)
}

/// Whether a log directory has seals to check the files' ends against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seals {
    /// The writer's own directory.
    Expected,
    /// A copy with the day files only (what a collector received, `log_shipping`): the
    /// chain is checked, lines removed at a file's end cannot be seen.
    Absent,
}

/// Verify every day file of `dir`, with or without seals.
pub fn verify_with(dir: &Path, seals: Seals) -> Report {
    let mut report = Report::default();
    let all = files::log_files(dir);
    report.foreign_files = all.iter().filter(|f| f.foreign).count();
    let own: Vec<&LogFile> = all.iter().filter(|f| !f.foreign).collect();
    let removed = retention::removed(dir);
    report.removed_by_retention = removed.len();
    let removed_hashes: HashSet<Link> = removed.iter().map(|r| r.last_hash).collect();
    let removed_names: HashSet<&str> = removed.iter().map(|r| r.file.as_str()).collect();

    // First pass: what each file's first chained line chains to. The second pass notes
    // which file holds each of those hashes (the whole log's hashes would not fit in
    // memory for a large log; these are one per file).
    let wanted: HashSet<Link> = own
        .iter()
        .filter_map(|f| entry_link(&f.path))
        .filter(|l| *l != GENESIS)
        .collect();
    let mut found: HashMap<Link, usize> = HashMap::new();
    let mut entries: Vec<Option<(usize, Link)>> = Vec::with_capacity(own.len());
    let mut chain_started = false;
    for (index, file) in own.iter().enumerate() {
        report.files += 1;
        let bytes = match std::fs::read(&file.path) {
            Ok(b) => b,
            Err(e) => {
                report.problems.push(Problem {
                    file: file.name.clone(),
                    line: None,
                    kind: ProblemKind::Unreadable,
                    what: format!("cannot be read: {e}"),
                });
                entries.push(None);
                continue;
            }
        };
        let mut walk = Walk {
            file,
            report: &mut report,
            chain_started: &mut chain_started,
            seal: Seal::read(&chain::seal_path(&file.path)),
            seals,
        };
        let result = walk.run(&bytes, |hash| {
            if wanted.contains(hash) {
                found.entry(*hash).or_insert(index);
            }
        });
        entries.push(result);
    }

    // Each file's first chained line: to the log's first line (once), a file retention
    // removed, or a line of another day file.
    let mut genesis_seen = false;
    for (index, (file, entry)) in own.iter().zip(&entries).enumerate() {
        let Some((line, prev)) = *entry else {
            continue;
        };
        let ok = if prev == GENESIS {
            !std::mem::replace(&mut genesis_seen, true)
        } else {
            removed_hashes.contains(&prev) || found.get(&prev).is_some_and(|&i| i != index)
        };
        if ok {
            continue;
        }
        let (kind, what) = if prev == GENESIS {
            (
                ProblemKind::NewChain,
                "the first line starts a new chain: the day files before it were removed (not by retention) or could not be read when it was written".to_string(),
            )
        } else if let Some(before) = index.checked_sub(1).map(|i| own[i]) {
            (
                ProblemKind::MissingFile,
                format!(
                    "the first line chains to no line of {} (nor of any other day file): a day file between them is missing",
                    before.name
                ),
            )
        } else {
            (
                ProblemKind::MissingFile,
                "the first line chains to a day file that is missing (not removed by retention)"
                    .to_string(),
            )
        };
        report.problems.push(Problem {
            file: file.name.clone(),
            line: Some(line),
            kind,
            what,
        });
    }

    // A seal whose day file is gone.
    let own_names: HashSet<&str> = own.iter().map(|f| f.name.as_str()).collect();
    if let Ok(entries) = std::fs::read_dir(dir) {
        let mut orphans: Vec<String> = entries
            .flatten()
            .filter_map(|e| e.file_name().into_string().ok())
            .filter_map(|n| {
                n.strip_suffix(chain::SEAL_SUFFIX)
                    .map(|d| format!("{d}{}", super::LOG_SUFFIX))
            })
            .filter(|log| {
                super::is_own_log_file(log)
                    && !own_names.contains(log.as_str())
                    && !removed_names.contains(log.as_str())
            })
            .collect();
        orphans.sort();
        for log in orphans {
            report.problems.push(Problem {
                file: log,
                line: None,
                kind: ProblemKind::MissingFile,
                what: "the day file is missing (its seal remains)".into(),
            });
        }
    }
    let order: HashMap<&str, usize> = own
        .iter()
        .enumerate()
        .map(|(i, f)| (f.name.as_str(), i))
        .collect();
    report.problems.sort_by_key(|p| {
        (
            order.get(p.file.as_str()).copied().unwrap_or(usize::MAX),
            p.line.unwrap_or(usize::MAX),
        )
    });
    report
}

/// The `prev` of a day file's first chained line, reading no further than that line.
fn entry_link(path: &Path) -> Option<Link> {
    let file = std::fs::File::open(path).ok()?;
    let mut reader = std::io::BufReader::new(file);
    let mut line = Vec::new();
    loop {
        line.clear();
        if reader.read_until(b'\n', &mut line).ok()? == 0 {
            return None;
        }
        if line.ends_with(b"\n")
            && let Some((_, prev, _)) = chain::split(&line)
        {
            return Some(prev);
        }
    }
}

/// Lines without chain fields met since the last chained line.
#[derive(Debug, Clone, Copy)]
struct Debris {
    line: usize,
    offset: u64,
    /// Without its newline.
    length: u64,
    terminated: bool,
}

/// One file's walk.
struct Walk<'a> {
    file: &'a LogFile,
    report: &'a mut Report,
    chain_started: &'a mut bool,
    seal: Option<Seal>,
    seals: Seals,
}

impl Walk<'_> {
    fn problem(&mut self, line: Option<usize>, kind: ProblemKind, what: String) {
        self.report.problems.push(Problem {
            file: self.file.name.clone(),
            line,
            kind,
            what,
        });
    }

    /// Walk `bytes` to the end; `seen` gets every chained line's hash. Returns the first
    /// chained line and its `prev` (the link to another day file).
    fn run(&mut self, bytes: &[u8], mut seen: impl FnMut(&Link)) -> Option<(usize, Link)> {
        let mut entry = None;
        // The last chained line: its number and hash.
        let mut last: Option<(usize, Link)> = None;
        let mut debris: Vec<Debris> = Vec::new();
        // Whether the line the seal names is here (where it is does not matter: an edit
        // that changed a line's length moves it, and is reported as an edit).
        let mut sealed_line_seen = false;
        let mut offset = 0u64;
        let mut n = 0;
        for line in bytes.split_inclusive(|&b| b == b'\n') {
            n += 1;
            let start = offset;
            offset += line.len() as u64;
            self.report.lines += 1;
            let terminated = line.ends_with(b"\n");
            let parts = if terminated { chain::split(line) } else { None };
            let Some((mut body, prev, hash)) = parts else {
                if !*self.chain_started && terminated {
                    self.report.unchained_lines += 1;
                    continue;
                }
                debris.push(Debris {
                    line: n,
                    offset: start,
                    length: line.len() as u64 - u64::from(terminated),
                    terminated,
                });
                continue;
            };
            if chain::link(&prev, body) != hash {
                match glued_at(body, &prev, &hash) {
                    Some(at) => {
                        self.report.cut_lines.push(CutLine {
                            file: self.file.name.clone(),
                            line: n,
                            lines: 1,
                            offset: start,
                            length: at as u64,
                            sealed_at: None,
                            glued: true,
                        });
                        body = &body[at..];
                    }
                    None => self.problem(
                        Some(n),
                        ProblemKind::Edited,
                        "the line was edited: its content does not match its hash".into(),
                    ),
                }
            }
            let record = Record::parse(body);
            self.settle_debris(&mut debris, bytes, record.as_ref(), n, start);
            match last {
                Some((k, l)) if prev != l => self.problem(
                    Some(n),
                    ProblemKind::NotFollowing,
                    format!(
                        "the line does not follow line {k}: a line was deleted, inserted or moved"
                    ),
                ),
                None if entry.is_none() => entry = Some((n, prev)),
                _ => {}
            }
            match record {
                Some(Record::Gap {
                    events,
                    from,
                    until,
                    reason,
                }) => self.report.gaps.push(Gap {
                    file: self.file.name.clone(),
                    line: n,
                    events,
                    from,
                    until,
                    reason,
                }),
                Some(r @ Record::Truncated { .. }) => {
                    self.problem(Some(n), ProblemKind::Truncated, r.message())
                }
                _ => {}
            }
            *self.chain_started = true;
            seen(&hash);
            sealed_line_seen |= self.seal.is_some_and(|s| s.hash == hash);
            last = Some((n, hash));
            self.report.chained_lines += 1;
        }
        // Lines without chain fields at the end: a cut-off last line beyond the seal is
        // a writer that stopped mid-line and no writer since; anything else is a break.
        let tail = debris
            .last()
            .copied()
            .filter(|d| !d.terminated && self.seal.is_none_or(|s| d.offset >= s.len));
        if let Some(d) = tail {
            debris.pop();
            self.report.cut_lines.push(CutLine {
                file: self.file.name.clone(),
                line: d.line,
                lines: 1,
                offset: d.offset,
                length: d.length,
                sealed_at: None,
                glued: false,
            });
        }
        let cut_inside_seal = debris.last().is_some_and(|d| !d.terminated);
        self.report_debris(&debris);
        if last.is_some()
            && !cut_inside_seal
            && (self.seals == Seals::Expected || self.seal.is_some())
            && let Some(p) = self.check_seal(bytes.len() as u64, sealed_line_seen)
        {
            self.report.problems.push(p);
        }
        entry
    }

    /// Lines without chain fields before the chained line `n` (at byte `start`): the
    /// last is a sealed cut line when `record` is the cut-line record made for it; the
    /// others are breaks. A cut-line record with no such line before it is a break too.
    fn settle_debris(
        &mut self,
        debris: &mut Vec<Debris>,
        bytes: &[u8],
        record: Option<&Record>,
        n: usize,
        start: u64,
    ) {
        if let Some(Record::CutLine {
            offset,
            length,
            sha256,
        }) = record
        {
            // The cut lines run from `offset` to the newline the writer put before its
            // record (more than one line when a mending write was itself cut off).
            let first = debris.iter().position(|d| d.offset == *offset);
            let sealed = first.is_some_and(|i| {
                debris.last().is_some_and(|d| {
                    d.terminated
                        && d.offset + d.length == offset + length
                        && offset + length + 1 == start
                        && bytes
                            .get(*offset as usize..(offset + length) as usize)
                            .is_some_and(|cut| chain::digest(cut) == *sha256)
                }) && debris[i..].iter().all(|d| d.terminated)
            });
            if let (true, Some(i)) = (sealed, first) {
                let run = debris.split_off(i);
                self.report.cut_lines.push(CutLine {
                    file: self.file.name.clone(),
                    line: run[0].line,
                    lines: run.len(),
                    offset: *offset,
                    length: *length,
                    sealed_at: Some(n),
                    glued: false,
                });
            } else {
                self.problem(
                    Some(n),
                    ProblemKind::CutRecordMismatch,
                    format!(
                        "the line records a cut line of {length} bytes at byte {offset}, and the line before it is not that line: it was changed or removed after it was sealed"
                    ),
                );
            }
        }
        self.report_debris(debris);
        debris.clear();
    }

    /// One problem per run of lines without chain fields.
    fn report_debris(&mut self, debris: &[Debris]) {
        let mut i = 0;
        while i < debris.len() {
            let first = debris[i];
            let mut j = i + 1;
            while j < debris.len() && debris[j].line == debris[j - 1].line + 1 {
                j += 1;
            }
            let last = debris[j - 1];
            let what = if !last.terminated {
                "the last line is cut off (no newline) inside the part its seal covers: the file was truncated mid-line".to_string()
            } else if j - i == 1 {
                "the line has no chain fields: it was edited or inserted".to_string()
            } else {
                format!(
                    "the line and the {} after it have no chain fields: they were edited or inserted",
                    j - i - 1
                )
            };
            let kind = if last.terminated {
                ProblemKind::Unchained
            } else {
                ProblemKind::Truncated
            };
            self.problem(Some(first.line), kind, what);
            i = j;
        }
    }

    /// The file's end against its seal: the line the seal names must be there (lines
    /// after it are a writer's whose seal did not follow: a crash).
    fn check_seal(&self, size: u64, sealed_line_seen: bool) -> Option<Problem> {
        let problem = |what: String| {
            Some(Problem {
                file: self.file.name.clone(),
                line: None,
                kind: ProblemKind::Seal,
                what,
            })
        };
        let Some(seal) = self.seal else {
            return problem(
                "its seal is missing or unreadable: lines removed at its end could not be detected"
                    .into(),
            );
        };
        if sealed_line_seen {
            return None;
        }
        if seal.len > size {
            return Some(Problem {
                file: self.file.name.clone(),
                line: None,
                kind: ProblemKind::Truncated,
                what: format!(
                    "truncated: its seal records {} bytes, the file has {size} (lines were removed at its end)",
                    seal.len
                ),
            });
        }
        problem(
            "the line its seal ends at is not there: lines at its end were replaced or removed"
                .into(),
        )
    }
}

/// Where the chained event of a line that fails its hash starts, when it starts after
/// the line's beginning: an older mcpwall appended it straight onto a line cut off
/// mid-write. `None` for an edited line.
fn glued_at(body: &[u8], prev: &Link, hash: &Link) -> Option<usize> {
    memchr::memmem::find_iter(body, b"{\"ts\":\"")
        .filter(|&at| at > 0)
        .find(|&at| chain::link(prev, &body[at..]) == *hash)
}
