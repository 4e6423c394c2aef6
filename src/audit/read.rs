//! Reading day files back for `mcpwall log`: one [`Entry`] per line, this mcpwall's and
//! the original mcpwall's (marked foreign), from a byte offset on (for following).

use std::io::{Read, Seek, SeekFrom};

use super::files::LogFile;
use super::time::{self, Micros};

/// One line of a day file.
#[derive(Debug, Clone)]
pub struct Entry {
    pub file: String,
    /// 1-based line number in its file (0 when read from an offset, see [`read_from`]).
    pub line: usize,
    /// A line of the original mcpwall (Node): shown, never verified or chained.
    pub foreign: bool,
    pub ts: Option<Micros>,
    /// The line as written, without its newline.
    pub raw: String,
    /// The line parsed; `Null` when it is not JSON.
    pub value: serde_json::Value,
}

impl Entry {
    pub fn new(file: &LogFile, line: usize, raw: &str) -> Entry {
        let value: serde_json::Value = serde_json::from_str(raw).unwrap_or_default();
        Entry {
            file: file.name.clone(),
            line,
            foreign: file.foreign,
            ts: value["ts"].as_str().and_then(time::parse_rfc3339),
            raw: raw.to_string(),
            value,
        }
    }

    /// A string field, `None` when absent or not a string.
    pub fn str(&self, key: &str) -> Option<&str> {
        self.value.get(key).and_then(|v| v.as_str())
    }
}

/// The complete lines of `file` from byte `offset` on, and the offset after the last
/// complete line (a line still being written is left for the next read).
pub fn read_from(file: &LogFile, offset: u64, first_line: usize) -> (Vec<Entry>, u64) {
    let mut bytes = Vec::new();
    let ok = std::fs::File::open(&file.path).and_then(|mut f| {
        f.seek(SeekFrom::Start(offset))?;
        f.read_to_end(&mut bytes)
    });
    if ok.is_err() {
        return (Vec::new(), offset);
    }
    let complete = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    let entries = bytes[..complete]
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .enumerate()
        .map(|(i, l)| Entry::new(file, first_line + i, &String::from_utf8_lossy(l)))
        .collect();
    (entries, offset + complete as u64)
}
