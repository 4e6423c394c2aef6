//! `mcpwall log verify`: walk the chain of every day file (see [`super::chain`]) and
//! say where it breaks.
//!
//! What is detected: an edited line (its hash no longer matches), a deleted, inserted or
//! moved line (the next line's `prev` no longer matches), a file cut short (shorter than
//! its seal, or the sealed last line gone), a day file missing between two others (the
//! later one's first line chains to no line of the earlier one) or whose seal remains.
//! Files removed by retention are recorded (`audit.retention.jsonl`) and not reported.
//!
//! Limits: the chain has no secret key, so someone who rewrites a file and recomputes
//! every hash and the seal goes unnoticed; removing the newest day file together with its
//! seal leaves nothing behind to compare with. Lines written before tamper evidence
//! existed (at the start of the log) are counted, not verified.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use super::chain::{self, GENESIS, Link, Seal};
use super::files::{self, LogFile};
use super::retention;

/// A place where the chain is broken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub file: String,
    /// 1-based; `None` for a problem with the file as a whole.
    pub line: Option<usize>,
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

/// What `verify` found.
#[derive(Debug, Default)]
pub struct Report {
    pub files: usize,
    pub chained_lines: u64,
    /// Lines at the start of the log written before tamper evidence (not verifiable).
    pub unchained_lines: u64,
    /// Day files retention removed (recorded, not tampering).
    pub removed_by_retention: usize,
    /// The original mcpwall's day files seen and left out (never part of the chain).
    pub foreign_files: usize,
    /// The first problem of each file, in file order.
    pub problems: Vec<Problem>,
}

impl Report {
    pub fn intact(&self) -> bool {
        self.problems.is_empty()
    }
}

/// Verify every day file of `dir`.
pub fn verify(dir: &Path) -> Report {
    let mut report = Report::default();
    let all = files::log_files(dir);
    report.foreign_files = all.iter().filter(|f| f.foreign).count();
    let own: Vec<&LogFile> = all.iter().filter(|f| !f.foreign).collect();
    let removed = retention::removed(dir);
    report.removed_by_retention = removed.len();
    let removed_hashes: HashSet<Link> = removed.iter().map(|r| r.last_hash).collect();
    let removed_names: HashSet<&str> = removed.iter().map(|r| r.file.as_str()).collect();

    // Hashes of the previous file's lines (a first line may chain to any: a proxy can
    // still append a late event to yesterday's file after another began today's).
    let mut previous: Option<(String, HashSet<Link>, bool)> = None;
    let mut chain_started = false;
    for file in &own {
        report.files += 1;
        let bytes = match std::fs::read(&file.path) {
            Ok(b) => b,
            Err(e) => {
                report.problems.push(Problem {
                    file: file.name.clone(),
                    line: None,
                    what: format!("cannot be read: {e}"),
                });
                previous = None;
                continue;
            }
        };
        let mut hashes = HashSet::new();
        // Line end offset → hash, for the seal.
        let mut ends: HashMap<u64, Link> = HashMap::new();
        let mut last: Option<Link> = None;
        let mut problem = None;
        let mut offset = 0u64;
        for (i, line) in bytes.split_inclusive(|&b| b == b'\n').enumerate() {
            let n = i + 1;
            offset += line.len() as u64;
            let broken = |what: String| Problem {
                file: file.name.clone(),
                line: Some(n),
                what,
            };
            if !line.ends_with(b"\n") {
                problem = Some(broken(
                    "the last line is cut off (no newline): the file was truncated mid-line".into(),
                ));
                break;
            }
            let Some((body, prev, hash)) = chain::split(line) else {
                if chain_started {
                    problem = Some(broken(
                        "the line has no chain fields: it was edited or inserted".into(),
                    ));
                    break;
                }
                report.unchained_lines += 1;
                continue;
            };
            if chain::link(&prev, body) != hash {
                problem = Some(broken(
                    "the line was edited: its content does not match its hash".into(),
                ));
                break;
            }
            let follows = match (last, &previous) {
                (Some(last), _) => prev == last,
                // The log's first chained line, or the first after unchained ones.
                (None, _) if !chain_started => {
                    prev == GENESIS || removed_hashes.contains(&prev) || previous.is_none()
                }
                (None, Some((_, before, _))) => before.contains(&prev),
                (None, None) => true,
            };
            if !follows {
                let what = match (last, &previous) {
                    (Some(_), _) => format!(
                        "the line does not follow line {}: a line was deleted, inserted or moved",
                        n - 1
                    ),
                    (None, Some((name, _, _))) => format!(
                        "the first line chains to no line of {name}: a day file between them is missing"
                    ),
                    (None, None) => "the first line chains to a missing day file".into(),
                };
                problem = Some(broken(what));
                break;
            }
            if last.is_none() && !chain_started && previous.is_none() && prev != GENESIS {
                // The first file of the log chains to something before it: a removed file
                // retention did not record.
                if !removed_hashes.contains(&prev) {
                    problem = Some(broken(
                        "the first line chains to a day file that is missing (not removed by retention)"
                            .into(),
                    ));
                    break;
                }
            }
            chain_started = true;
            hashes.insert(hash);
            ends.insert(offset, hash);
            last = Some(hash);
            report.chained_lines += 1;
        }
        if problem.is_none()
            && let Some(last) = last
        {
            problem = check_seal(file, bytes.len() as u64, &ends, last);
        }
        if let Some(p) = problem {
            report.problems.push(p);
        }
        previous = Some((file.name.clone(), hashes, last.is_some()));
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
                what: "the day file is missing (its seal remains)".into(),
            });
        }
    }
    report
}

/// A file's end against its seal.
fn check_seal(file: &LogFile, size: u64, ends: &HashMap<u64, Link>, last: Link) -> Option<Problem> {
    let problem = |what: String| {
        Some(Problem {
            file: file.name.clone(),
            line: None,
            what,
        })
    };
    let Some(seal) = Seal::read(&chain::seal_path(&file.path)) else {
        return problem(
            "its seal is missing or unreadable: lines removed at its end could not be detected"
                .into(),
        );
    };
    if seal.len > size {
        return problem(format!(
            "truncated: its seal records {} bytes, the file has {size} (lines were removed at its end)",
            seal.len
        ));
    }
    match ends.get(&seal.len) {
        Some(h) if *h == seal.hash => None,
        _ if seal.len == size && last == seal.hash => None,
        _ => problem(
            "the line its seal ends at is not there: lines at its end were replaced or removed"
                .into(),
        ),
    }
}
