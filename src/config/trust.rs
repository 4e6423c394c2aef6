//! Trust records for project policy files (ARCHITECTURE decision 7).
//!
//! A project's `.mcpwall.yml` comes from a repository the user may not control. `mcpwall
//! trust` records the SHA-256 of the file's exact bytes in `~/.mcpwall/trusted.json`, keyed
//! by the file's canonical path. At load time the file is trusted only if its current bytes
//! hash to the recorded value, so any edit (a `git pull`, a malicious commit) makes it
//! untrusted again until the user looks at it and runs `mcpwall trust` once more.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// The project policy file name, looked up in the project directory.
pub const PROJECT_FILE: &str = ".mcpwall.yml";

/// What the store says about one file's current contents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrustStatus {
    /// Recorded with exactly these contents.
    Trusted,
    /// Recorded, but the contents changed since.
    Changed,
    /// Never recorded (or revoked).
    Unknown,
}

/// One trusted file.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TrustEntry {
    /// Lowercase hex SHA-256 of the file's bytes.
    pub sha256: String,
    /// When it was trusted, seconds since the Unix epoch.
    pub trusted_at: u64,
}

#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct TrustFile {
    version: u32,
    #[serde(default)]
    trusted: BTreeMap<String, TrustEntry>,
}

/// Problems reading or writing the trust store.
#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "{path} is not a valid trust store ({source}); fix or delete it, then run `mcpwall trust` again"
    )]
    Corrupt {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot resolve {path}: {source}")]
    Resolve {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// `~/.mcpwall/trusted.json`, loaded.
#[derive(Debug)]
pub struct TrustStore {
    path: PathBuf,
    entries: BTreeMap<String, TrustEntry>,
}

/// Lowercase hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut out = String::with_capacity(64);
    for b in digest.iter() {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

/// The key a file is recorded under: its canonical path, so `./.mcpwall.yml`, a symlinked
/// checkout and the absolute path all name one record.
pub fn trust_key(file: &Path) -> Result<String, TrustError> {
    std::fs::canonicalize(file)
        .map(|p| p.to_string_lossy().into_owned())
        .map_err(|source| TrustError::Resolve {
            path: file.to_path_buf(),
            source,
        })
}

impl TrustStore {
    /// Where the store lives for a given home directory.
    pub fn path_in(home: &Path) -> PathBuf {
        home.join(".mcpwall").join("trusted.json")
    }

    /// Load the store; a missing file is an empty store.
    pub fn load(home: &Path) -> Result<TrustStore, TrustError> {
        let path = Self::path_in(home);
        let text = match std::fs::read(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(TrustStore {
                    path,
                    entries: BTreeMap::new(),
                });
            }
            Err(source) => return Err(TrustError::Read { path, source }),
        };
        let file: TrustFile =
            serde_json::from_slice(&text).map_err(|source| TrustError::Corrupt {
                path: path.clone(),
                source,
            })?;
        Ok(TrustStore {
            path,
            entries: file.trusted,
        })
    }

    /// The store's file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether `contents`, read from the file recorded under `key`, is trusted.
    pub fn status(&self, key: &str, contents: &[u8]) -> TrustStatus {
        match self.entries.get(key) {
            Some(e) if e.sha256 == sha256_hex(contents) => TrustStatus::Trusted,
            Some(_) => TrustStatus::Changed,
            None => TrustStatus::Unknown,
        }
    }

    /// Record `contents` as trusted under `key`.
    pub fn trust(&mut self, key: String, contents: &[u8]) {
        let trusted_at = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        self.entries.insert(
            key,
            TrustEntry {
                sha256: sha256_hex(contents),
                trusted_at,
            },
        );
    }

    /// Forget `key`; returns whether it was recorded.
    pub fn revoke(&mut self, key: &str) -> bool {
        self.entries.remove(key).is_some()
    }

    /// All records, by canonical path.
    pub fn entries(&self) -> &BTreeMap<String, TrustEntry> {
        &self.entries
    }

    /// Write the store under the one file-writing discipline (`clients::fsio::edit_file`: a
    /// temp file created exclusively without following links, swapped in), mode 0600 in an
    /// owner-only `~/.mcpwall`, so other users can neither read nor forge it, and nothing
    /// planted in that directory can redirect the write.
    pub fn save(&self) -> Result<(), TrustError> {
        use crate::clients::fsio;
        let werr = |source| TrustError::Write {
            path: self.path.clone(),
            source,
        };
        let dir = self.path.parent().unwrap_or(Path::new("."));
        fsio::private_dir(dir).map_err(|e| werr(std::io::Error::other(e.to_string())))?;
        let file = TrustFile {
            version: 1,
            trusted: self.entries.clone(),
        };
        let mut json = serde_json::to_string_pretty(&file).expect("trust store serialises");
        json.push('\n');
        let validate = |text: &str| {
            serde_json::from_str::<serde_json::Value>(text)
                .map(|_| ())
                .map_err(|e| e.to_string())
        };
        let options = fsio::Options {
            force: true,
            ..fsio::Options::default()
        };
        fsio::edit_file(&self.path, None, options, "JSON", &validate, |_| {
            Ok((json.clone(), ()))
        })
        .map(|_| ())
        .map_err(|e| werr(std::io::Error::other(e.to_string())))?;
        // A store written by an older mcpwall may be group- or world-readable.
        crate::platform::restrict_to_owner(&self.path).map_err(werr)
    }
}
