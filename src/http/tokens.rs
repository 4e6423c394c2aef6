//! Bearer tokens and the identities they stand for (`~/.mcpwall/tokens`).
//!
//! `mcpwall token add NAME` draws 32 bytes from the operating system's CSPRNG, prints them
//! once as a token, and stores only the token's SHA-256. A plain hash (no salt, no slow
//! KDF) is enough here: slow hashing protects guessable secrets such as passwords, while a
//! 256-bit random token cannot be found from its hash by any search, and looking a token
//! up by its hash gives an attacker who times the lookup nothing they could not compute.
//!
//! The file holds one `NAME SHA256-HEX` line per token, is written whole (a temporary file
//! renamed over it) with mode 0600, and is refused when other users could write it: a
//! line added by someone else would be an identity they hold.

use std::fmt::Write as _;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use sha2::{Digest, Sha256};

/// What every token starts with, so a scanner (and a human) can tell what it is.
const TOKEN_PREFIX: &str = "mcpwall_";
/// Longest identity name.
const MAX_NAME: usize = 64;

/// A token file could not be read, written or changed.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error("cannot read the token file {}: {source}", .path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot write the token file {}: {source}", .path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(
        "the token file {} is writable by other users (mode {mode:o}); run `chmod 600 {}` and check its lines", .path.display(), .path.display()
    )]
    OpenToOthers { path: PathBuf, mode: u32 },
    #[error("line {line} of the token file {} is not `NAME SHA256-HEX`; fix or remove it", .path.display())]
    Malformed { path: PathBuf, line: usize },
    #[error(
        "{name:?} is not a valid identity name: use 1 to {MAX_NAME} letters, digits, `.`, `_` or `-`"
    )]
    BadName { name: String },
    #[error("an identity named {name:?} already has a token; `mcpwall token remove {name}` first")]
    Exists { name: String },
    #[error("no identity named {name:?}; `mcpwall token list` shows the names")]
    Unknown { name: String },
    #[error("the operating system's random generator failed: {0}")]
    Random(String),
}

/// The identities and their token hashes, as read from the file.
#[derive(Debug, Clone, Default)]
pub struct Tokens {
    entries: Vec<(String, [u8; 32])>,
}

/// The token file as `mcpwall serve` sees it: read again whenever it changes, so a
/// `mcpwall token remove` takes effect at the next request. A file that can no longer be
/// read (or is open to others) accepts no token until fixed: fail closed.
#[derive(Debug)]
pub struct LiveTokens {
    path: PathBuf,
    state: std::sync::Mutex<(Tokens, Option<std::time::SystemTime>)>,
}

impl LiveTokens {
    pub fn new(path: PathBuf, tokens: Tokens) -> LiveTokens {
        let stamp = modified(&path);
        LiveTokens {
            path,
            state: std::sync::Mutex::new((tokens, stamp)),
        }
    }

    /// The token file as it is now.
    fn current(&self) -> std::sync::MutexGuard<'_, (Tokens, Option<std::time::SystemTime>)> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let stamp = modified(&self.path);
        if stamp != state.1 {
            let tokens = Tokens::load(&self.path).unwrap_or_else(|e| {
                eprintln!("mcpwall: error: {e}; no token is accepted until it is fixed");
                Tokens::default()
            });
            *state = (tokens, stamp);
        }
        state
    }

    /// The identity a presented token belongs to now.
    pub fn identify(&self, token: &str) -> Option<Arc<str>> {
        self.current().0.identify(token).map(Arc::from)
    }

    /// The identity a verified client certificate stands for: the one identity of the
    /// token file its names (common name, alternative names) name. A certificate whose
    /// identity was removed (`mcpwall token remove`) is refused from the next request on,
    /// as its token is. `Err`: why it stands for none.
    pub fn identify_certificate(&self, names: &[String]) -> Result<Arc<str>, &'static str> {
        let state = self.current();
        let mut found: Option<&str> = None;
        for name in names {
            if let Some(identity) = state.0.names().find(|n| n == name) {
                if found.is_some_and(|f| f != identity) {
                    return Err("the client certificate names more than one identity");
                }
                found = Some(identity);
            }
        }
        found
            .map(Arc::from)
            .ok_or("the client certificate names no identity of the token file")
    }
}

fn modified(path: &Path) -> Option<std::time::SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

/// `~/.mcpwall/tokens`.
pub fn default_path(home: &Path) -> PathBuf {
    home.join(".mcpwall").join("tokens")
}

impl Tokens {
    /// Read the token file; a missing file holds no token.
    pub fn load(path: &Path) -> Result<Tokens, TokenError> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Tokens::default()),
            Err(source) => {
                return Err(TokenError::Read {
                    path: path.into(),
                    source,
                });
            }
        };
        check_mode(path)?;
        let mut entries = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let malformed = || TokenError::Malformed {
                path: path.into(),
                line: i + 1,
            };
            let (name, hex) = line.split_once(' ').ok_or_else(malformed)?;
            let hash = parse_hash(hex.trim()).ok_or_else(malformed)?;
            if !valid_name(name) {
                return Err(malformed());
            }
            entries.push((name.to_string(), hash));
        }
        Ok(Tokens { entries })
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The identity names, in file order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|(n, _)| n.as_str())
    }

    /// The identity a presented token belongs to.
    pub fn identify(&self, token: &str) -> Option<&str> {
        let hash: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        // Every entry is compared in full, so the time taken does not tell how many
        // leading bytes of which hash matched.
        let mut found = None;
        for (name, stored) in &self.entries {
            let diff = stored
                .iter()
                .zip(hash.iter())
                .fold(0u8, |acc, (a, b)| acc | (a ^ b));
            if diff == 0 {
                found = Some(name.as_str());
            }
        }
        found
    }

    /// Issue a fresh token for `name`, store its hash in `path`, and return the token
    /// (the only time it exists in clear).
    pub fn add(path: &Path, name: &str) -> Result<String, TokenError> {
        if !valid_name(name) {
            return Err(TokenError::BadName { name: name.into() });
        }
        let mut tokens = Tokens::load(path)?;
        if tokens.names().any(|n| n == name) {
            return Err(TokenError::Exists { name: name.into() });
        }
        let mut secret = [0u8; 32];
        getrandom::fill(&mut secret).map_err(|e| TokenError::Random(e.to_string()))?;
        let token = format!("{TOKEN_PREFIX}{}", hex(&secret));
        tokens
            .entries
            .push((name.into(), Sha256::digest(token.as_bytes()).into()));
        tokens.save(path)?;
        Ok(token)
    }

    /// Remove `name`'s token from `path`.
    pub fn remove(path: &Path, name: &str) -> Result<(), TokenError> {
        let mut tokens = Tokens::load(path)?;
        let before = tokens.entries.len();
        tokens.entries.retain(|(n, _)| n != name);
        if tokens.entries.len() == before {
            return Err(TokenError::Unknown { name: name.into() });
        }
        tokens.save(path)
    }

    fn save(&self, path: &Path) -> Result<(), TokenError> {
        let write_err = |source| TokenError::Write {
            path: path.into(),
            source,
        };
        let dir = path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).map_err(write_err)?;
        let mut text = String::from(
            "# mcpwall bearer tokens: NAME SHA256-of-token (mcpwall token add/remove)\n",
        );
        for (name, hash) in &self.entries {
            let _ = writeln!(text, "{name} {}", hex(hash));
        }
        // tempfile creates with mode 0600; the rename replaces the file whole.
        let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(write_err)?;
        io::Write::write_all(&mut tmp, text.as_bytes()).map_err(write_err)?;
        tmp.as_file().sync_all().map_err(write_err)?;
        tmp.persist(path).map_err(|e| write_err(e.error))?;
        // On Windows the owner-only ACL (mode 0600 is already set on Unix).
        crate::platform::restrict_to_owner(path).map_err(write_err)?;
        Ok(())
    }
}

/// A session id for `Mcp-Session-Id`: 128 random bits, hex (visible ASCII, as the
/// specification requires).
pub fn new_session_id() -> Result<String, TokenError> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|e| TokenError::Random(e.to_string()))?;
    Ok(hex(&bytes))
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

fn hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

fn parse_hash(hex: &str) -> Option<[u8; 32]> {
    if hex.len() != 64 || !hex.is_ascii() {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&hex[i * 2..i * 2 + 2], 16).ok()?;
    }
    Some(out)
}

#[cfg(unix)]
fn check_mode(path: &Path) -> Result<(), TokenError> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(path)
        .map_err(|source| TokenError::Read {
            path: path.into(),
            source,
        })?
        .permissions()
        .mode()
        & 0o777;
    if mode & 0o022 != 0 {
        return Err(TokenError::OpenToOthers {
            path: path.into(),
            mode,
        });
    }
    Ok(())
}

/// Windows: the file is written with an owner-only ACL; reading ACLs back is not checked
/// here (Wine, where the lib tests run in CI, does not keep them).
#[cfg(not(unix))]
fn check_mode(_path: &Path) -> Result<(), TokenError> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_identifies_its_name_and_only_its_hash_is_stored() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens");
        let ci = Tokens::add(&path, "ci-runner").unwrap();
        let dev = Tokens::add(&path, "dev").unwrap();
        assert_ne!(ci, dev);
        assert!(ci.starts_with(TOKEN_PREFIX) && ci.len() == TOKEN_PREFIX.len() + 64);
        let stored = std::fs::read_to_string(&path).unwrap();
        assert!(!stored.contains(&ci[TOKEN_PREFIX.len()..]), "{stored}");
        let tokens = Tokens::load(&path).unwrap();
        assert_eq!(tokens.identify(&ci), Some("ci-runner"));
        assert_eq!(tokens.identify(&dev), Some("dev"));
        assert_eq!(tokens.identify(&format!("{ci}x")), None);
        assert_eq!(tokens.identify(""), None);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600);
        }
        Tokens::remove(&path, "ci-runner").unwrap();
        let tokens = Tokens::load(&path).unwrap();
        assert_eq!(tokens.identify(&ci), None);
        assert_eq!(tokens.names().collect::<Vec<_>>(), ["dev"]);
        assert!(matches!(
            Tokens::remove(&path, "ci-runner"),
            Err(TokenError::Unknown { .. })
        ));
        assert!(matches!(
            Tokens::add(&path, "dev"),
            Err(TokenError::Exists { .. })
        ));
        assert!(matches!(
            Tokens::add(&path, "a b"),
            Err(TokenError::BadName { .. })
        ));
    }

    #[cfg(unix)]
    #[test]
    fn a_token_file_others_can_write_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens");
        Tokens::add(&path, "dev").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
        assert!(matches!(
            Tokens::load(&path),
            Err(TokenError::OpenToOthers { .. })
        ));
    }
}
