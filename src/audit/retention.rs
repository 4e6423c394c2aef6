//! Retention: at start the proxy removes this mcpwall's oldest day files past the
//! `settings.log_retention` cap (age in days, total size). Each removal is recorded in
//! `audit.retention.jsonl` with the file's last hash, so `mcpwall log verify` tells a
//! removal by retention from a deleted file. The original mcpwall's files are never
//! touched, and neither are today's or later ones.

use std::fs::OpenOptions;
use std::io::{self, BufRead, Write};
use std::path::Path;

use super::chain::{self, Link};
use super::files;

/// The record of removals, in the log directory.
pub const RECORD: &str = "audit.retention.jsonl";

/// How much of the log to keep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cap {
    /// Day files older than this many days are removed.
    pub max_days: u32,
    /// Oldest day files are removed while all of them together are larger.
    pub max_bytes: u64,
}

/// One recorded removal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Removed {
    pub file: String,
    pub last_hash: Link,
}

/// The removals recorded in `dir`.
pub fn removed(dir: &Path) -> Vec<Removed> {
    let Ok(file) = std::fs::File::open(dir.join(RECORD)) else {
        return Vec::new();
    };
    io::BufReader::new(file)
        .lines()
        .map_while(Result::ok)
        .filter_map(|line| {
            let v: serde_json::Value = serde_json::from_str(&line).ok()?;
            let hash: Link = v["last_hash"].as_str()?.as_bytes().try_into().ok()?;
            Some(Removed {
                file: v["removed"].as_str()?.to_string(),
                last_hash: hash,
            })
        })
        .collect()
}

/// Remove the oldest day files of `dir` past `cap`, `today` being `YYYY-MM-DD`; returns
/// the names removed. Runs under a lock on the record, so proxies starting together
/// do not both record one removal.
pub fn apply(dir: &Path, cap: Cap, today: &str, today_day: i64) -> io::Result<Vec<String>> {
    let own = files::own_log_files(dir);
    if own.is_empty() {
        return Ok(Vec::new());
    }
    let oldest_kept = super::date_string(today_day - i64::from(cap.max_days));
    let sizes: Vec<u64> = own
        .iter()
        .map(|f| std::fs::metadata(&f.path).map_or(0, |m| m.len()))
        .collect();
    let mut total: u64 = sizes.iter().sum();
    let mut doomed = Vec::new();
    for (f, size) in own.iter().zip(&sizes) {
        if f.date.as_str() >= today {
            break;
        }
        if f.date < oldest_kept || total > cap.max_bytes {
            doomed.push(f);
            total -= size;
        } else {
            break;
        }
    }
    if doomed.is_empty() {
        return Ok(Vec::new());
    }
    let mut record =
        crate::platform::owner_only_nofollow(OpenOptions::new().append(true).create(true))
            .open(dir.join(RECORD))?;
    crate::platform::lock_exclusive(&record)?;
    let mut gone = Vec::new();
    for f in doomed {
        if !f.path.exists() {
            continue; // another proxy removed it first
        }
        let hash = files::tip_of(&f.path);
        let reason = if f.date < oldest_kept {
            format!("older than {} days", cap.max_days)
        } else {
            format!("the log was larger than {} bytes", cap.max_bytes)
        };
        let mut ts = String::new();
        super::rfc3339_now(&mut ts);
        let mut line = serde_json::json!({
            "ts": ts,
            "removed": f.name,
            "last_hash": std::str::from_utf8(&hash).unwrap_or_default(),
            "reason": reason,
        })
        .to_string();
        line.push('\n');
        // Recorded before removed: a crash in between leaves a record of a file that is
        // still there, never a removal verify would call tampering.
        record.write_all(line.as_bytes())?;
        std::fs::remove_file(&f.path)?;
        let _ = std::fs::remove_file(chain::seal_path(&f.path));
        gone.push(f.name.clone());
    }
    let _ = crate::platform::unlock(&record);
    Ok(gone)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oldest_files_past_the_cap_are_removed_and_recorded() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        for (date, size) in [
            ("2026-01-01", 10),
            ("2026-03-01", 100),
            ("2026-03-02", 100),
            ("2026-03-03", 100),
        ] {
            std::fs::write(dir.join(format!("{date}.audit.jsonl")), "x".repeat(size)).unwrap();
        }
        std::fs::write(dir.join("2026-01-01.jsonl"), "foreign").unwrap();
        let today = "2026-03-03";
        let today_day = crate::audit::time::parse_rfc3339(today).unwrap() / 86_400_000_000;
        // Age: 2026-01-01 is older than 30 days.
        let cap = Cap {
            max_days: 30,
            max_bytes: 1 << 30,
        };
        assert_eq!(
            apply(dir, cap, today, today_day).unwrap(),
            ["2026-01-01.audit.jsonl"]
        );
        // Size: the oldest go until the rest fit, today's file stays whatever its size.
        let cap = Cap {
            max_days: 30,
            max_bytes: 150,
        };
        assert_eq!(
            apply(dir, cap, today, today_day).unwrap(),
            ["2026-03-01.audit.jsonl", "2026-03-02.audit.jsonl"]
        );
        let cap = Cap {
            max_days: 1,
            max_bytes: 1,
        };
        assert!(apply(dir, cap, today, today_day).unwrap().is_empty());
        assert!(
            dir.join("2026-01-01.jsonl").exists(),
            "foreign files are never removed"
        );
        let names: Vec<String> = removed(dir).into_iter().map(|r| r.file).collect();
        assert_eq!(
            names,
            [
                "2026-01-01.audit.jsonl",
                "2026-03-01.audit.jsonl",
                "2026-03-02.audit.jsonl"
            ]
        );
    }
}
