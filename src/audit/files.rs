//! The files of a log directory: this mcpwall's day files (`YYYY-MM-DD.audit.jsonl`) and
//! their seals, and the original mcpwall's (Node) day files (`YYYY-MM-DD.jsonl`), which
//! are read as foreign and never written, chained or verified.

use std::fs::File;
use std::path::{Path, PathBuf};

use super::chain::{self, Link, Seal};
use super::{LOG_SUFFIX, is_own_log_file};

/// One day file of a log directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogFile {
    pub name: String,
    pub path: PathBuf,
    /// `YYYY-MM-DD`
    pub date: String,
    /// Written by the original mcpwall (Node), not by this one.
    pub foreign: bool,
}

/// The suffix of the original mcpwall's day files.
const FOREIGN_SUFFIX: &str = ".jsonl";

/// Whether a file name is the original mcpwall's day file, `YYYY-MM-DD.jsonl`.
pub fn is_foreign_log_file(name: &str) -> bool {
    name.strip_suffix(FOREIGN_SUFFIX).is_some_and(is_date) && !is_own_log_file(name)
}

fn is_date(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 10
        && b.iter().enumerate().all(|(i, c)| {
            if matches!(i, 4 | 7) {
                *c == b'-'
            } else {
                c.is_ascii_digit()
            }
        })
}

/// Every day file of `dir`, this mcpwall's and the original's, by date (this mcpwall's
/// first on the same date). A missing directory has none.
pub fn log_files(dir: &Path) -> Vec<LogFile> {
    let mut files = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return files;
    };
    for entry in entries.flatten() {
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        let (date, foreign) = if is_own_log_file(&name) {
            (name.strip_suffix(LOG_SUFFIX), false)
        } else if is_foreign_log_file(&name) {
            (name.strip_suffix(FOREIGN_SUFFIX), true)
        } else {
            continue;
        };
        // Only regular files: a symlink or directory at a day's name is not a log.
        if !entry.file_type().is_ok_and(|t| t.is_file()) {
            continue;
        }
        files.push(LogFile {
            date: date.unwrap_or_default().to_string(),
            path: entry.path(),
            name,
            foreign,
        });
    }
    files.sort_by(|a, b| (&a.date, a.foreign).cmp(&(&b.date, b.foreign)));
    files
}

/// This mcpwall's day files of `dir`, oldest first.
pub fn own_log_files(dir: &Path) -> Vec<LogFile> {
    log_files(dir).into_iter().filter(|f| !f.foreign).collect()
}

/// The hash a line appended to `path` would chain to: the seal's when it covers the
/// whole file, else the last line's ([`chain::GENESIS`] when unreadable or unchained).
pub fn tip_of(path: &Path) -> Link {
    let Ok(mut file) = File::open(path) else {
        return chain::GENESIS;
    };
    let Ok(size) = file.metadata().map(|m| m.len()) else {
        return chain::GENESIS;
    };
    if let Some(seal) = Seal::read(&chain::seal_path(path))
        && seal.len == size
    {
        return seal.hash;
    }
    chain::last_link(&mut file, size).unwrap_or(chain::GENESIS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn day_files_are_told_apart_by_name() {
        let tmp = tempfile::tempdir().unwrap();
        for name in [
            "2026-02-17.audit.jsonl",
            "2026-02-16.jsonl",
            "2026-02-16.audit.jsonl",
            "2026-02-16.audit.seal",
            "notes.jsonl",
            "2026-2-16.jsonl",
        ] {
            std::fs::write(tmp.path().join(name), "").unwrap();
        }
        let files: Vec<(String, bool)> = log_files(tmp.path())
            .into_iter()
            .map(|f| (f.name, f.foreign))
            .collect();
        assert_eq!(
            files,
            [
                ("2026-02-16.audit.jsonl".to_string(), false),
                ("2026-02-16.jsonl".to_string(), true),
                ("2026-02-17.audit.jsonl".to_string(), false),
            ]
        );
    }
}
