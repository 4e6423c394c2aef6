//! How far the log has been shipped: for each of the newest day files, the byte offset
//! up to which its lines reached the collector. Files older than the oldest one named
//! are done. Several day files are tracked, not one, because a proxy still writing
//! yesterday's events after midnight appends to yesterday's file.
//!
//! The file is `<log_dir>/shipping/<sink>.cursor`, replaced whole (write, then rename) so
//! a crash leaves the old or the new cursor, never half of one. Whoever can write it can
//! make lines be skipped or sent twice; the shipped lines carry the hash chain, so a skip
//! shows as a break in the collected copy.

use std::io;
use std::path::{Path, PathBuf};

/// Day files tracked (the newest ones).
const TRACKED: usize = 3;
const MAGIC: &str = "mcpwall-ship-cursor 1";

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Cursor {
    /// `(day file name, offset)`, oldest first.
    files: Vec<(String, u64)>,
}

impl Cursor {
    /// The cursor at `path`: `Ok(None)` if there is none, `Err` (why) if there is one that
    /// can't be read whole. The caller then ships from the log's first line: lines sent
    /// twice are told apart by their hash, lines skipped would be lost to the copy.
    pub fn load(path: &Path) -> Result<Option<Cursor>, String> {
        let text = match std::fs::read(path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e.to_string()),
        };
        let text = String::from_utf8(text).map_err(|_| "it is not text".to_string())?;
        let mut lines = text.lines();
        if lines.next() != Some(MAGIC) {
            return Err(format!("it does not start with `{MAGIC}`"));
        }
        let mut files = Vec::new();
        for (n, line) in lines.enumerate() {
            let bad = || format!("line {} is not `DAY-FILE OFFSET`", n + 2);
            let (name, offset) = line.rsplit_once(' ').ok_or_else(bad)?;
            if !crate::audit::is_own_log_file(name) {
                return Err(bad());
            }
            files.push((name.to_string(), offset.parse().map_err(|_| bad())?));
        }
        files.sort();
        Ok(Some(Cursor { files }))
    }

    pub fn save(&self, path: &Path) -> io::Result<()> {
        let mut text = format!("{MAGIC}\n");
        for (name, offset) in &self.files {
            text.push_str(&format!("{name} {offset}\n"));
        }
        let tmp = path.with_extension("cursor.tmp");
        std::fs::write(&tmp, text)?;
        std::fs::rename(&tmp, path)
    }

    /// Where shipping of `name` resumes: its offset, 0 for a file newer than every file
    /// named, `None` for a file older than all of them (done).
    pub fn offset(&self, name: &str) -> Option<u64> {
        if let Some((_, offset)) = self.files.iter().find(|(n, _)| n == name) {
            return Some(*offset);
        }
        match self.files.first() {
            Some((oldest, _)) if name < oldest.as_str() => None,
            _ => Some(0),
        }
    }

    /// `name` was shipped up to `offset`; only the newest files stay tracked.
    pub fn advance(&mut self, name: &str, offset: u64) {
        match self.files.iter_mut().find(|(n, _)| n == name) {
            Some(entry) => entry.1 = offset,
            None => {
                self.files.push((name.to_string(), offset));
                self.files.sort();
            }
        }
        let excess = self.files.len().saturating_sub(TRACKED);
        self.files.drain(..excess);
    }

    /// Tracked files that are gone from the directory, with the offset shipping had reached.
    pub fn missing(&self, present: &[String]) -> Vec<(String, u64)> {
        self.files
            .iter()
            .filter(|(n, _)| !present.contains(n))
            .cloned()
            .collect()
    }

    pub fn forget(&mut self, name: &str) {
        self.files.retain(|(n, _)| n != name);
    }

    /// The cursor of a log not shipped before: its files as they stand now count as done,
    /// so turning shipping on sends what is written from then on.
    pub fn at_end_of(files: &[(String, u64)]) -> Cursor {
        let mut cursor = Cursor::default();
        for (name, len) in files {
            cursor.advance(name, *len);
        }
        cursor
    }
}

/// `<log_dir>/shipping/<sink>.cursor` and `.lock`, the sink's address made a file name.
pub fn paths(dir: &Path, sink_address: &str) -> (PathBuf, PathBuf) {
    let name: String = sink_address
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    let base = dir.join("shipping");
    (
        base.join(format!("{name}.cursor")),
        base.join(format!("{name}.lock")),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const D1: &str = "2026-12-04.audit.jsonl";
    const D2: &str = "2026-12-05.audit.jsonl";
    const D3: &str = "2026-12-06.audit.jsonl";
    const D4: &str = "2026-12-07.audit.jsonl";

    #[test]
    fn files_before_the_oldest_tracked_are_done_and_newer_ones_start_at_zero() {
        let mut c = Cursor::at_end_of(&[(D2.into(), 10), (D3.into(), 20)]);
        assert_eq!(c.offset(D1), None);
        assert_eq!(c.offset(D2), Some(10));
        assert_eq!(c.offset(D4), Some(0));
        c.advance(D4, 5);
        c.advance(D1, 1); // an old file shows up again: tracked, then the oldest goes
        assert_eq!(c.files.len(), TRACKED);
    }

    #[test]
    fn a_saved_cursor_reads_back_and_a_damaged_one_does_not() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("x.cursor");
        let c = Cursor::at_end_of(&[(D2.into(), 10), (D3.into(), 20)]);
        c.save(&path).unwrap();
        assert_eq!(Cursor::load(&path), Ok(Some(c)));
        std::fs::write(&path, format!("{MAGIC}\n../../etc/passwd 3\n")).unwrap();
        assert!(Cursor::load(&path).is_err());
        std::fs::write(&path, format!("{MAGIC}\n{D2} ten\n")).unwrap();
        assert!(Cursor::load(&path).is_err());
        std::fs::write(&path, b"\xff\xfe").unwrap();
        assert!(Cursor::load(&path).is_err());
        std::fs::write(&path, "").unwrap();
        assert!(Cursor::load(&path).is_err());
        assert_eq!(Cursor::load(&tmp.path().join("none.cursor")), Ok(None));
    }
}
