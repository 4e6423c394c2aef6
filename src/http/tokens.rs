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
    #[error(
        "the token file {} belongs to another user (uid {owner}); a line in it would be an identity they chose: check its lines, then `mcpwall token add` as yourself rewrites it", .path.display()
    )]
    NotOwned { path: PathBuf, owner: u32 },
    #[error("the token file {} is not a regular file; remove it (`rm`) and issue tokens again", .path.display())]
    NotAFile { path: PathBuf },
    #[error(
        "the token file {} exists but holds no token (empty, or cut short); remove it if no token should exist (then any local client may connect), or issue one with `mcpwall token add NAME`", .path.display()
    )]
    NoEntries { path: PathBuf },
    #[error(
        "the token file {} ends in the middle of a line (cut short?); issue the lost tokens again with `mcpwall token add NAME`, or fix its last line", .path.display()
    )]
    Truncated { path: PathBuf },
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

/// The token file as `mcpwall serve` sees it, checked against the file on every request
/// (one `stat`) and by the listener's watch tick, and read again when it changed: a
/// `mcpwall token remove` takes effect at once, and so does the first `mcpwall token add`
/// on a gateway that started without tokens. A file that can no longer be read as a
/// whole, owner-only store refuses everyone until fixed: fail closed.
#[derive(Debug)]
pub struct LiveTokens {
    path: PathBuf,
    /// A token is required whatever the file holds (a non-loopback listener, `--client-ca`).
    always_required: bool,
    state: std::sync::Mutex<LiveState>,
    /// The replicas' shared state (`settings.shared_state`) and how long a revocation is
    /// kept there: a token removed from this replica's file is refused by all of them, and
    /// one removed from another replica's file is refused here.
    shared: std::sync::OnceLock<(
        Arc<dyn crate::shared_state::SharedState>,
        std::time::Duration,
    )>,
    /// Whether this replica hears the others' revocations as they are made (`None`: it
    /// has not started listening, see [`Self::listen`]).
    listening: std::sync::OnceLock<Arc<std::sync::atomic::AtomicBool>>,
    /// The open identities are being checked against the shared state (one check at a
    /// time, [`Self::begin_check`]).
    checking: std::sync::atomic::AtomicBool,
}

#[derive(Debug)]
struct LiveState {
    stamp: Option<Stamp>,
    store: Store,
    /// Tokens existed at some point of this gateway's life: from then on a token is
    /// required, also once the file is gone (its deletion does not reopen the gateway).
    required: bool,
}

/// What the token file holds now.
#[derive(Debug, Clone)]
enum Store {
    /// No file: no token was issued.
    Absent,
    Issued(Tokens),
    /// The file exists but is not a usable store: why.
    Unusable(Arc<str>),
}

/// Whether the gateway lets a request in without a token right now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gate {
    /// No token was ever issued and none is required: any local client may connect.
    Open,
    /// Every request needs a valid token or client certificate.
    Required,
    /// The token file is unusable: every request is refused, for this reason.
    Unusable(Arc<str>),
}

/// What changed in the token file since it was last looked at: whose sessions end now.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Change {
    /// Identities whose token is gone (removed, or the file became unusable).
    pub revoked: Vec<Arc<str>>,
    /// Clients without a token may no longer connect (the first token was issued, or the
    /// file became unusable): their sessions end too.
    pub closed: bool,
    /// The file just became unusable: why (to be told on stderr and in the audit log).
    pub unusable: Option<Arc<str>>,
}

/// What identifies one version of the file cheaply: a `token add/remove` replaces it (a
/// new inode), an edit changes its size or times, a `chmod`/`chown` its change time, mode
/// and owner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    len: u64,
    modified: Option<std::time::SystemTime>,
    #[cfg(unix)]
    unix: (u64, u64, i64, i64, u32, u32),
}

fn stamp(path: &Path) -> Option<Stamp> {
    let meta = std::fs::metadata(path).ok()?;
    Some(Stamp {
        len: meta.len(),
        modified: meta.modified().ok(),
        #[cfg(unix)]
        unix: {
            use std::os::unix::fs::MetadataExt;
            (
                meta.dev(),
                meta.ino(),
                meta.ctime(),
                meta.ctime_nsec(),
                meta.mode(),
                meta.uid(),
            )
        },
    })
}

/// A revocation check that ended without an answer (its task panicked): the token is
/// refused as when the shared state is lost (fail closed).
fn check_failed() -> crate::shared_state::Unavailable {
    crate::shared_state::Lost {
        store: "the shared state".to_string(),
        why: "the revocation check ended without an answer".to_string(),
    }
    .into()
}

impl LiveTokens {
    /// The file at `path` as `serve` read it at start (`None`: there was none).
    /// `always_required`: a token is required even while none exists.
    pub fn new(path: PathBuf, tokens: Option<Tokens>, always_required: bool) -> LiveTokens {
        // No stamp yet: the first look reads the file again, so a change made between
        // `serve` reading it and this point is not missed.
        let stamp = None;
        let store = match tokens {
            Some(t) => Store::Issued(t),
            None => Store::Absent,
        };
        LiveTokens {
            shared: std::sync::OnceLock::new(),
            listening: std::sync::OnceLock::new(),
            checking: std::sync::atomic::AtomicBool::new(false),
            path,
            always_required,
            state: std::sync::Mutex::new(LiveState {
                required: always_required || matches!(store, Store::Issued(_)),
                stamp,
                store,
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, LiveState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Publish and consult revocations in `state` from now on, each kept for `ttl` after
    /// the revoked token was last presented. Set once.
    pub fn share(
        &self,
        state: Arc<dyn crate::shared_state::SharedState>,
        ttl: std::time::Duration,
    ) {
        let _ = self.shared.set((state, ttl));
    }

    /// Tell the other replicas that the tokens hashed `gone` are revoked. A store that
    /// cannot be reached is told on stderr by the store; the token is refused here anyway.
    fn publish_revocations(&self, gone: &[[u8; 32]]) {
        let Some((state, ttl)) = self.shared.get() else {
            return;
        };
        for hash in gone {
            if let Err(lost) = state.revoke(hash, *ttl) {
                eprintln!(
                    "mcpwall: a token revoked here could not be revoked on the other replicas: \
                     {lost}; remove it from their token files too"
                );
            }
        }
    }

    /// Whether the token hashed `hash` may be used: not revoked by any replica. `Err`: the
    /// store cannot say (the caller refuses it, fail closed; `on_loss: local_only` answers
    /// from this replica's own record instead).
    fn not_revoked(&self, hash: &[u8; 32]) -> Result<bool, crate::shared_state::Unavailable> {
        match self.shared.get() {
            None => Ok(true),
            Some((state, ttl)) => state.is_revoked(hash, *ttl).map(|revoked| !revoked),
        }
    }

    /// Start hearing the revocations the other replicas make (once; `None` without a
    /// shared state, or when already listening): what is heard arrives on the receiver.
    pub fn listen(
        &self,
    ) -> Option<tokio::sync::mpsc::UnboundedReceiver<crate::shared_state::Heard>> {
        let (state, _) = self.shared.get()?;
        if self.listening.get().is_some() {
            return None;
        }
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let flag = state.listen_for_revocations(Box::new(move |heard| tx.send(heard).is_ok()))?;
        let _ = self.listening.set(flag);
        Some(rx)
    }

    /// Whether a revocation made by another replica reaches this one as it is made. While
    /// not, every message of an open stream is checked ([`Self::still_valid`]).
    pub fn hears_revocations(&self) -> bool {
        match self.listening.get() {
            Some(flag) => flag.load(std::sync::atomic::Ordering::Acquire),
            None => self.shared.get().is_none(),
        }
    }

    /// Start checking the open identities against the shared state; `false` while a
    /// check runs already.
    pub fn begin_check(&self) -> bool {
        !self
            .checking
            .swap(true, std::sync::atomic::Ordering::AcqRel)
    }

    /// The check [`Self::begin_check`] started is over.
    pub fn end_check(&self) {
        self.checking
            .store(false, std::sync::atomic::Ordering::Release);
    }

    /// The identity of the token file whose token is hashed `hash`.
    pub fn name_of(&self, hash: &[u8; 32]) -> Option<Arc<str>> {
        match &self.lock().store {
            Store::Issued(tokens) => tokens
                .entries
                .iter()
                .find(|(_, h)| h == hash)
                .map(|(n, _)| Arc::from(n.as_str())),
            _ => None,
        }
    }

    /// Whether identity `name` of the token file may still come in: its token is in the
    /// file and no replica revoked it. Identities the file never held (an identity
    /// provider's) are not revoked here. `Err`: the shared state cannot say.
    pub fn still_valid(&self, name: &str) -> Result<bool, crate::shared_state::Unavailable> {
        match self.hash_of(name) {
            Some(hash) => self.not_revoked(&hash),
            None => Ok(true),
        }
    }

    /// The hash of identity `name`'s token, when the token file holds it.
    fn hash_of(&self, name: &str) -> Option<[u8; 32]> {
        match &self.lock().store {
            Store::Issued(tokens) => tokens
                .entries
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, h)| *h),
            _ => None,
        }
    }

    /// [`Self::not_revoked`] for the I/O thread: asking the shared state is a round trip
    /// of up to its `timeout_ms`, so it is made on the blocking pool, where it holds up no
    /// other connection; without a shared state there is nothing to ask.
    async fn not_revoked_off_thread(
        self: &Arc<Self>,
        hash: [u8; 32],
    ) -> Result<bool, crate::shared_state::Unavailable> {
        if self.shared.get().is_none() {
            return Ok(true);
        }
        let tokens = self.clone();
        tokio::task::spawn_blocking(move || tokens.not_revoked(&hash))
            .await
            .unwrap_or_else(|_| Err(check_failed()))
    }

    /// Look at the file (one `stat`); read it again if it changed, and say what that
    /// revoked. Cheap when nothing changed.
    pub fn refresh(&self) -> Change {
        let now = stamp(&self.path);
        let mut state = self.lock();
        if now == state.stamp {
            return Change::default();
        }
        let store = match Tokens::read(&self.path) {
            Ok(Some(tokens)) => Store::Issued(tokens),
            Ok(None) => Store::Absent,
            Err(e) => Store::Unusable(Arc::from(e.to_string())),
        };
        // The stamp read before the file: a change made while reading it is seen next time.
        state.stamp = now;
        let gone: Vec<[u8; 32]> = match (&state.store, &store) {
            (Store::Issued(old), Store::Issued(new)) => old
                .entries
                .iter()
                .filter(|(_, h)| !new.entries.iter().any(|(_, n)| n == h))
                .map(|(_, h)| *h)
                .collect(),
            (Store::Issued(old), Store::Absent) => old.entries.iter().map(|(_, h)| *h).collect(),
            _ => Vec::new(),
        };
        self.publish_revocations(&gone);
        let mut change = Change::default();
        let old_names: Vec<&str> = match &state.store {
            Store::Issued(t) => t.names().collect(),
            _ => Vec::new(),
        };
        change.revoked = match &store {
            Store::Issued(new) => old_names
                .iter()
                .filter(|n| !new.names().any(|m| m == **n))
                .map(|n| Arc::from(*n))
                .collect(),
            _ => old_names.iter().map(|n| Arc::from(*n)).collect(),
        };
        let was_open = !state.required && !matches!(state.store, Store::Unusable(_));
        match &store {
            Store::Issued(_) => state.required = true,
            Store::Unusable(why) => {
                if !matches!(&state.store, Store::Unusable(old) if old == why) {
                    change.unusable = Some(why.clone());
                }
            }
            Store::Absent => {}
        }
        let open_now = !state.required && matches!(store, Store::Absent);
        change.closed = was_open && !open_now;
        state.store = store;
        change
    }

    /// Who may come in now.
    pub fn gate(&self) -> Gate {
        let state = self.lock();
        match &state.store {
            Store::Unusable(why) => Gate::Unusable(why.clone()),
            _ if state.required || self.always_required => Gate::Required,
            _ => Gate::Open,
        }
    }

    /// Whether `name` is an identity of the token file now.
    pub fn has_name(&self, name: &str) -> bool {
        match &self.lock().store {
            Store::Issued(tokens) => tokens.names().any(|n| n == name),
            _ => false,
        }
    }

    /// The identity a presented token belongs to now (`None`: none, or it was revoked).
    /// `Err`: the shared state cannot say whether another replica revoked it.
    pub async fn identify(
        self: &Arc<Self>,
        token: &str,
    ) -> Result<Option<Arc<str>>, crate::shared_state::Unavailable> {
        let identity = match &self.lock().store {
            Store::Issued(tokens) => tokens.identify(token).map(Arc::from),
            _ => None,
        };
        let Some(identity) = identity else {
            return Ok(None);
        };
        let hash: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        Ok(self.not_revoked_off_thread(hash).await?.then_some(identity))
    }

    /// [`Self::still_valid`] for an open stream's next message: `None` when nothing need
    /// be asked (this replica hears revocations as they are made, or shares none), so
    /// its messages pay nothing for the question in the usual case.
    pub async fn still_valid_unless_heard(
        self: &Arc<Self>,
        name: &str,
    ) -> Option<Result<bool, crate::shared_state::Unavailable>> {
        if self.hears_revocations() {
            return None;
        }
        Some(match self.hash_of(name) {
            Some(hash) => self.not_revoked_off_thread(hash).await,
            None => Ok(true),
        })
    }

    /// The identity a verified client certificate stands for: the one identity of the
    /// token file its names (common name, alternative names) name. A certificate whose
    /// identity was removed (`mcpwall token remove`) is refused from the next request on,
    /// as its token is. `Err`: why it stands for none.
    pub fn identify_certificate(&self, names: &[String]) -> Result<Arc<str>, &'static str> {
        let state = self.lock();
        let Store::Issued(tokens) = &state.store else {
            return Err("the client certificate names no identity of the token file");
        };
        let mut found: Option<&str> = None;
        for name in names {
            if let Some(identity) = tokens.names().find(|n| n == name) {
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

/// `~/.mcpwall/tokens`.
pub fn default_path(home: &Path) -> PathBuf {
    home.join(".mcpwall").join("tokens")
}

impl Tokens {
    /// Read the token file as `mcpwall serve` does: `None` when there is no file; an
    /// error unless it is a complete store (at least one well-formed line, ending in a
    /// newline) that only its owner, the user, can write.
    pub fn read(path: &Path) -> Result<Option<Tokens>, TokenError> {
        match Tokens::read_lenient(path)? {
            None => Ok(None),
            Some((tokens, _)) if tokens.is_empty() => {
                Err(TokenError::NoEntries { path: path.into() })
            }
            Some((_, false)) => Err(TokenError::Truncated { path: path.into() }),
            Some((tokens, true)) => Ok(Some(tokens)),
        }
    }

    /// Read the token file for `mcpwall token`: a missing file, or one holding no token,
    /// is an empty store (the commands that repair it write it whole).
    pub fn load(path: &Path) -> Result<Tokens, TokenError> {
        Ok(Tokens::read_lenient(path)?.map_or_else(Tokens::default, |(t, _)| t))
    }

    /// The file's tokens and whether it ends with a newline; `None`: no file. Refuses a
    /// file others can write or that is not the user's, and a malformed line.
    fn read_lenient(path: &Path) -> Result<Option<(Tokens, bool)>, TokenError> {
        let read_err = |source| TokenError::Read {
            path: path.into(),
            source,
        };
        let mut file = match std::fs::File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(source) => return Err(read_err(source)),
        };
        // The checks and the read are of the same open file, not of a name that could
        // be swapped in between.
        let meta = file.metadata().map_err(read_err)?;
        if !meta.is_file() {
            return Err(TokenError::NotAFile { path: path.into() });
        }
        check_owner(path, &meta)?;
        let mut text = String::new();
        io::Read::read_to_string(&mut file, &mut text).map_err(read_err)?;
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
        Ok(Some((Tokens { entries }, text.ends_with('\n'))))
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
        let _lock = Writing::lock(path)?;
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
        let _lock = Writing::lock(path)?;
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
        if self.entries.is_empty() {
            // "No token issued" is the absence of the file, never an empty one: a file
            // without tokens is what a damaged store looks like, and `serve` refuses it.
            return match std::fs::remove_file(path) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => Err(write_err(e)),
                _ => crate::platform::fsync_dir(dir).map_err(write_err),
            };
        }
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
        // A reader (a running `serve`) sees the old file or the new one, never a part.
        tmp.persist(path).map_err(|e| write_err(e.error))?;
        crate::platform::fsync_dir(dir).map_err(write_err)?;
        // On Windows the owner-only ACL (mode 0600 is already set on Unix).
        crate::platform::restrict_to_owner(path).map_err(write_err)?;
        Ok(())
    }
}

/// Held while `token add/remove` reads, changes and writes the file: two at once would
/// otherwise each write their own version and one change would be lost.
struct Writing {
    _file: std::fs::File,
}

impl Writing {
    fn lock(path: &Path) -> Result<Writing, TokenError> {
        let write_err = |source| TokenError::Write {
            path: path.into(),
            source,
        };
        let dir = path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).map_err(write_err)?;
        let mut lock_path = path.as_os_str().to_owned();
        lock_path.push(".lock");
        let mut options = std::fs::OpenOptions::new();
        options.create(true).write(true).truncate(false);
        crate::platform::owner_only_file(&mut options);
        let file = options.open(&lock_path).map_err(write_err)?;
        match crate::platform::lock_exclusive(&file) {
            Err(e) if !crate::platform::lock_unsupported(&e) => return Err(write_err(e)),
            _ => {}
        }
        // Released when the file is closed.
        Ok(Writing { _file: file })
    }
}

/// A session id for `Mcp-Session-Id`: 128 random bits, hex (visible ASCII, as the
/// specification requires).
///
/// Behind a load balancer (`serve --replica NAME`), the id starts with `NAME.`, so the
/// balancer can send every request of the session to the replica that holds it without
/// a table of its own (docs/fleet.md).
pub fn new_session_id() -> Result<String, TokenError> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|e| TokenError::Random(e.to_string()))?;
    Ok(match REPLICA.get() {
        Some(name) => format!("{name}.{}", hex(&bytes)),
        None => hex(&bytes),
    })
}

/// This process's replica name (`serve --replica`), set once at start.
static REPLICA: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Name this process's sessions after replica `name` (`serve --replica`); `Err` when the
/// name is not 1 to 32 letters, digits, `_` or `-` (a `.` would blur where the name ends).
pub fn set_replica(name: &str) -> Result<(), String> {
    let plain = !name.is_empty()
        && name.len() <= 32
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-'));
    if !plain {
        return Err(format!(
            "--replica {name:?}: use 1 to 32 letters, digits, `_` or `-`"
        ));
    }
    let _ = REPLICA.set(name.to_string());
    Ok(())
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

/// Only the user may write the file: a line someone else added would be an identity they
/// hold.
#[cfg(unix)]
fn check_owner(path: &Path, meta: &std::fs::Metadata) -> Result<(), TokenError> {
    use std::os::unix::fs::MetadataExt;
    let mode = meta.mode() & 0o777;
    if mode & 0o022 != 0 {
        return Err(TokenError::OpenToOthers {
            path: path.into(),
            mode,
        });
    }
    let me = rustix::process::geteuid().as_raw();
    if meta.uid() != me {
        return Err(TokenError::NotOwned {
            path: path.into(),
            owner: meta.uid(),
        });
    }
    Ok(())
}

/// Windows: the file is written with an owner-only ACL; reading ACLs back is not checked
/// here (Wine, where the lib tests run in CI, does not keep them).
#[cfg(not(unix))]
fn check_owner(_path: &Path, _meta: &std::fs::Metadata) -> Result<(), TokenError> {
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

    #[test]
    fn serve_reads_only_a_whole_store_and_no_file_as_no_tokens() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens");
        assert!(Tokens::read(&path).unwrap().is_none());
        Tokens::add(&path, "dev").unwrap();
        let whole = std::fs::read_to_string(&path).unwrap();
        assert_eq!(Tokens::read(&path).unwrap().unwrap().names().count(), 1);
        let header = whole.lines().next().unwrap();
        for (text, want) in [
            (String::new(), "holds no token"),
            (format!("{header}\n"), "holds no token"),
            (whole.trim_end().to_string(), "middle of a line"),
            (whole[..whole.len() - 5].to_string(), "line 2"),
        ] {
            std::fs::write(&path, &text).unwrap();
            let e = Tokens::read(&path).unwrap_err().to_string();
            assert!(e.contains(want), "{text:?}: {e}");
            // `token add` repairs a file without tokens; it never overwrites a bad line.
            assert_eq!(Tokens::load(&path).is_ok(), !want.starts_with("line"));
        }
        // Removing the last token removes the file: "no tokens" is only its absence.
        std::fs::write(&path, &whole).unwrap();
        Tokens::remove(&path, "dev").unwrap();
        assert!(!path.exists());
    }

    #[test]
    fn a_live_store_reports_revocations_and_closing_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens");
        let live = Arc::new(LiveTokens::new(path.clone(), None, false));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let identify = |token: &str| runtime.block_on(live.identify(token));
        assert_eq!(live.gate(), Gate::Open);
        let token = Tokens::add(&path, "dev").unwrap();
        let change = live.refresh();
        assert!(change.closed && change.revoked.is_empty(), "{change:?}");
        assert_eq!(live.gate(), Gate::Required);
        assert_eq!(identify(&token).unwrap().as_deref(), Some("dev"));
        assert_eq!(live.refresh(), Change::default());
        Tokens::add(&path, "ci").unwrap();
        assert_eq!(live.refresh(), Change::default());
        Tokens::remove(&path, "dev").unwrap();
        let change = live.refresh();
        assert_eq!(change.revoked, [Arc::from("dev")]);
        assert!(!change.closed);
        assert_eq!(identify(&token).unwrap(), None);
        // Gone: still closed, nobody identified.
        Tokens::remove(&path, "ci").unwrap();
        assert_eq!(live.refresh().revoked, [Arc::from("ci")]);
        assert_eq!(live.gate(), Gate::Required);
        std::fs::write(&path, "").unwrap();
        let change = live.refresh();
        assert!(change.unusable.is_some(), "{change:?}");
        assert!(matches!(live.gate(), Gate::Unusable(_)));
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
