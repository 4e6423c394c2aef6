//! `~/.mcpwall/wrapped.json`: what `wrap` changed, so `unwrap` can put back the exact bytes.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::fsio::{self, WriteError};

/// Every wrap mcpwall has made and not yet undone.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct Records {
    /// Format version (1).
    pub version: u32,
    /// One per wrapped entry.
    pub entries: Vec<Record>,
}

/// One wrapped entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// The client id (`claude-code`, …).
    pub client: String,
    /// The client file, absolute and canonical.
    pub file: PathBuf,
    /// JSON path (object keys) from the document root to the entry.
    pub path: Vec<String>,
    /// The entry's bytes before wrapping.
    pub original: String,
    /// The entry's bytes right after wrapping; if the file still holds exactly these, the
    /// user has not touched the entry and `original` goes back byte for byte.
    pub wrapped: String,
    /// When (UTC, `YYYYMMDDTHHMMSSZ`).
    pub wrapped_at: String,
    /// For a Codex remote entry made a bridge, whose edit changes keys a TOML table need
    /// not hold together: `original` and `wrapped` are the stretch of the file the edit
    /// changed, and this many of `wrapped`'s bytes come before the bridge's `command` key
    /// (where `unwrap` finds the stretch again). Absent from every other record, and from
    /// records written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stretch_before_command: Option<usize>,
}

impl Record {
    /// The stretch a Codex remote wrap changed, if this record is one.
    pub fn stretch(&self) -> Option<super::codex::Stretch> {
        Some(super::codex::Stretch {
            original: self.original.clone(),
            wrapped: self.wrapped.clone(),
            before_command: self.stretch_before_command?,
        })
    }
}

/// The records file is unreadable or malformed.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// Could not read it.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The records file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Not the JSON we write.
    #[error("{path} is not a valid wrap record file ({source}); fix or move it away")]
    Parse {
        /// The records file.
        path: PathBuf,
        /// Where it is broken.
        #[source]
        source: serde_json::Error,
    },
    /// Could not write it.
    #[error(transparent)]
    Write(#[from] WriteError),
}

impl Records {
    /// `<mcpwall dir>/wrapped.json`.
    pub fn path(mcpwall_dir: &Path) -> PathBuf {
        mcpwall_dir.join("wrapped.json")
    }

    /// Load the records, or none if the file does not exist. Returns the text read too,
    /// so [`Records::save`] can refuse to overwrite a concurrent change.
    pub fn load(mcpwall_dir: &Path) -> Result<(Records, Option<String>), RecordError> {
        let path = Self::path(mcpwall_dir);
        match std::fs::read_to_string(&path) {
            Ok(text) => {
                let records = serde_json::from_str(&text)
                    .map_err(|source| RecordError::Parse { path, source })?;
                Ok((records, Some(text)))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok((
                Records {
                    version: 1,
                    entries: Vec::new(),
                },
                None,
            )),
            Err(source) => Err(RecordError::Read { path, source }),
        }
    }

    /// Change the records with `change`, on the records as they are on disk now, and write
    /// them back under [`fsio::edit_file`]'s discipline (pretty JSON, trailing newline,
    /// owner-only). Callers hold [`fsio::lock`], so no other mcpwall run's record is lost.
    pub fn update(mcpwall_dir: &Path, change: impl Fn(&mut Records)) -> Result<(), RecordError> {
        fsio::private_dir(mcpwall_dir)?;
        let path = Self::path(mcpwall_dir);
        let validate = |text: &str| {
            serde_json::from_str::<Records>(text)
                .map(|_| ())
                .map_err(|e| e.to_string())
        };
        let result = fsio::edit_file(
            &path,
            None,
            fsio::Options {
                force: true,
                ..fsio::Options::default()
            },
            "JSON",
            &validate,
            |now| {
                let mut records = match now {
                    None => Records {
                        version: 1,
                        entries: Vec::new(),
                    },
                    Some(text) => serde_json::from_str(text).map_err(|e| {
                        format!(
                            "{} is not a valid wrap record file ({e}); fix or move it away",
                            path.display()
                        )
                    })?,
                };
                change(&mut records);
                let mut text =
                    serde_json::to_string_pretty(&records).expect("records always serialise");
                text.push('\n');
                Ok((text, ()))
            },
        );
        match result {
            Ok(_) => Ok(()),
            Err(e) => Err(RecordError::Write(e)),
        }
    }

    /// The latest record for an entry.
    pub fn find(&self, file: &Path, path: &[String]) -> Option<&Record> {
        self.entries
            .iter()
            .rev()
            .find(|r| r.file == file && r.path == path)
    }

    /// Add a record, replacing any older one for the same entry.
    pub fn put(&mut self, record: Record) {
        self.forget(&record.file.clone(), &record.path.clone());
        self.entries.push(record);
    }

    /// Drop the records of an entry.
    pub fn forget(&mut self, file: &Path, path: &[String]) {
        self.entries.retain(|r| !(r.file == file && r.path == path));
    }
}
