//! Pinned definitions: trust on first use, then detect drift ("rug pulls").
//!
//! The first time a server is seen (keyed by its name and command, [`ServerIdentity`]),
//! the SHA-256 digest of the canonical JSON of every definition it offers is recorded
//! in `~/.mcpwall/pins/<server-key>.json`, together with the definition itself so a
//! later change can be shown side by side. A definition is a tool (its whole object:
//! name, title, description, input and output schema, annotations, `_meta`), a prompt,
//! a resource template, or the server's `instructions`; each has an [`EntryKey`].
//!
//! Later sessions compare ([`compare`]): an entry that is new is *added*; one whose
//! digest differs is *changed*; one that no longer appears in a complete list is
//! *removed*. The store also keeps what was last observed for every entry that is not
//! (yet) approved, and any poison findings, so `mcpwall pins diff` can show them and
//! `mcpwall pins approve` can accept them. Only that CLI approves: nothing a server or
//! an agent sends can write an approval.
//!
//! This module does the file I/O for the store (atomic replace, mode 0600); comparison
//! and digests are pure.

use std::collections::BTreeMap;
use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::poison::Finding;

/// Current version of the pin file format.
pub const PIN_FILE_VERSION: u32 = 1;

/// Which server a pin file belongs to: the name it runs under and its full command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerIdentity {
    pub name: String,
    pub command: Vec<String>,
}

impl ServerIdentity {
    /// File-name-safe key: the name (letters, digits, `-_.` kept) plus a digest of name
    /// and command, so the same name with another command gets its own pins.
    pub fn key(&self) -> String {
        let mut hasher = Sha256::new();
        hasher.update(self.name.as_bytes());
        for part in &self.command {
            hasher.update([0u8]);
            hasher.update(part.as_bytes());
        }
        let digest = hex(&hasher.finalize());
        let mut safe: String = self
            .name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                    c
                } else {
                    '_'
                }
            })
            .take(48)
            .collect();
        if safe.is_empty() || safe.starts_with('.') {
            safe.insert(0, 's');
        }
        format!("{safe}-{}", &digest[..12])
    }
}

/// What kind of definition an entry pins.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EntryKind {
    Tool,
    Prompt,
    Resource,
    ResourceTemplate,
    Instructions,
}

/// The key of one pinned definition: the tool name as is, `prompt:NAME`, `resource:URI`,
/// `resource-template:URI-TEMPLATE`, or `@instructions`. Tool names cannot contain
/// `:` or `@` (MCP restricts them to letters, digits, `_-./`), so keys never collide.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EntryKey(String);

impl EntryKey {
    pub const INSTRUCTIONS: &'static str = "@instructions";

    pub fn tool(name: &str) -> EntryKey {
        EntryKey(name.to_string())
    }

    pub fn prompt(name: &str) -> EntryKey {
        EntryKey(format!("prompt:{name}"))
    }

    pub fn resource(uri: &str) -> EntryKey {
        EntryKey(format!("resource:{uri}"))
    }

    pub fn resource_template(uri_template: &str) -> EntryKey {
        EntryKey(format!("resource-template:{uri_template}"))
    }

    pub fn instructions() -> EntryKey {
        EntryKey(Self::INSTRUCTIONS.to_string())
    }

    /// Parse a key as written on the command line or stored in a pin file.
    pub fn parse(text: &str) -> EntryKey {
        EntryKey(text.to_string())
    }

    pub fn kind(&self) -> EntryKind {
        if self.0 == Self::INSTRUCTIONS {
            EntryKind::Instructions
        } else if self.0.starts_with("prompt:") {
            EntryKind::Prompt
        } else if self.0.starts_with("resource:") {
            EntryKind::Resource
        } else if self.0.starts_with("resource-template:") {
            EntryKind::ResourceTemplate
        } else {
            EntryKind::Tool
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for EntryKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Serialize for EntryKey {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for EntryKey {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<EntryKey, D::Error> {
        String::deserialize(d).map(EntryKey)
    }
}

/// Who approved a pinned definition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ApprovedBy {
    /// Recorded automatically the first time the server (or entry) was seen.
    FirstUse,
    /// Approved with `mcpwall pins approve`. Overrides poison findings for this digest
    /// only when the pin says `allow_poisoned` (`--allow-poisoned`).
    User,
}

/// An approved definition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pinned {
    /// `sha256:<hex>` of the canonical JSON of `definition`.
    pub digest: String,
    pub definition: Value,
    pub approved_by: ApprovedBy,
    /// Unix seconds.
    pub at: u64,
    /// The user approved this definition despite its poison findings
    /// (`mcpwall pins approve --allow-poisoned`): the agent sees it. Without it, an
    /// approved definition that looks poisoned stays withheld.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_poisoned: bool,
}

/// Why an observed entry needs the user's attention.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    /// Appeared after the server was first pinned. Pinned automatically; flagged until reviewed.
    Added,
    /// Its definition differs from the pinned one (drift).
    Changed,
    /// Pinned, but missing from a complete list (drift).
    Removed,
    /// Its text was judged poisoned; withheld until approved.
    Poisoned,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Added => "added",
            Status::Changed => "changed",
            Status::Removed => "removed",
            Status::Poisoned => "poisoned",
        }
    }

    /// Whether this status is drift in the sense of `mcpwall pins verify`.
    pub fn is_drift(self) -> bool {
        matches!(self, Status::Changed | Status::Removed)
    }
}

/// What was last seen of an entry that is not approved as it is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Observed {
    pub status: Status,
    /// The definition as last seen (`None` when removed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub definition: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    /// Fields that differ from the pinned definition (`description`,
    /// `inputSchema.properties.path.type`), for changed entries.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fields: Vec<String>,
    /// Poison findings in the observed definition.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub findings: Vec<Finding>,
    /// Unix seconds.
    pub at: u64,
}

/// The on-disk pin record of one server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PinFile {
    pub version: u32,
    pub server: ServerIdentity,
    /// Unix seconds of the first session.
    pub first_seen: u64,
    pub pinned: BTreeMap<EntryKey, Pinned>,
    #[serde(default)]
    pub observed: BTreeMap<EntryKey, Observed>,
}

impl PinFile {
    pub fn new(server: ServerIdentity, now: u64) -> PinFile {
        PinFile {
            version: PIN_FILE_VERSION,
            server,
            first_seen: now,
            pinned: BTreeMap::new(),
            observed: BTreeMap::new(),
        }
    }

    /// Whether any observed entry is drift (changed or removed).
    pub fn has_drift(&self) -> bool {
        self.observed.values().any(|o| o.status.is_drift())
    }

    /// Entries needing attention with the given status.
    pub fn with_status(&self, status: Status) -> impl Iterator<Item = (&EntryKey, &Observed)> {
        self.observed
            .iter()
            .filter(move |(_, o)| o.status == status)
    }

    /// Accept the observed state of `keys` (all observed entries when empty): changed,
    /// added and poisoned definitions become pinned as approved by the user, removed
    /// ones are unpinned. Returns the keys approved; unknown keys are an error.
    /// `allow_poisoned` is recorded in each pin: only then does a definition with poison
    /// findings reach the agent.
    pub fn approve(
        &mut self,
        keys: &[EntryKey],
        now: u64,
        allow_poisoned: bool,
    ) -> Result<Vec<EntryKey>, PinError> {
        let targets: Vec<EntryKey> = if keys.is_empty() {
            self.observed.keys().cloned().collect()
        } else {
            for key in keys {
                if !self.observed.contains_key(key) {
                    return Err(PinError::NothingToApprove {
                        server: self.server.name.clone(),
                        key: key.to_string(),
                    });
                }
            }
            keys.to_vec()
        };
        for key in &targets {
            let Some(observed) = self.observed.remove(key) else {
                continue;
            };
            match (observed.status, observed.definition) {
                (Status::Removed, _) | (_, None) => {
                    self.pinned.remove(key);
                }
                (_, Some(definition)) => {
                    self.pinned.insert(
                        key.clone(),
                        Pinned {
                            digest: digest(&definition),
                            definition,
                            approved_by: ApprovedBy::User,
                            at: now,
                            allow_poisoned,
                        },
                    );
                }
            }
        }
        Ok(targets)
    }
}

/// Errors of the pin store. Each says what to do.
#[derive(Debug, thiserror::Error)]
pub enum PinError {
    #[error("cannot read pin file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "pin file {path} is damaged ({source}); inspect it, or run `mcpwall pins reset` for that server to re-pin on next use"
    )]
    Corrupt {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("cannot write pin file {path}: {source}; check the permissions of ~/.mcpwall/pins")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("no pinned server matches {0:?}; `mcpwall pins list` shows the pinned servers")]
    UnknownServer(String),
    #[error("{0:?} matches several pinned servers ({1}); use the key shown by `mcpwall pins list`")]
    AmbiguousServer(String, String),
    #[error(
        "{key:?} of server {server:?} has nothing to approve; `mcpwall pins diff {server}` shows what is pending"
    )]
    NothingToApprove { server: String, key: String },
}

/// The pin directory: `~/.mcpwall/pins` under `home`.
#[derive(Debug, Clone)]
pub struct PinStore {
    dir: PathBuf,
}

impl PinStore {
    /// The store under `home` (`<home>/.mcpwall/pins`). Nothing is created until a write.
    pub fn under_home(home: &Path) -> PinStore {
        PinStore {
            dir: home.join(".mcpwall").join("pins"),
        }
    }

    /// A store in exactly this directory.
    pub fn at(dir: PathBuf) -> PinStore {
        PinStore { dir }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn path_for(&self, key: &str) -> PathBuf {
        self.dir.join(format!("{key}.json"))
    }

    /// The pin file for `key`, or `None` when the server was never pinned.
    pub fn load(&self, key: &str) -> Result<Option<PinFile>, PinError> {
        let path = self.path_for(key);
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => return Err(PinError::Read { path, source }),
        };
        serde_json::from_str(&text)
            .map(Some)
            .map_err(|source| PinError::Corrupt { path, source })
    }

    /// Every pin file in the store, sorted by key.
    pub fn list(&self) -> Result<Vec<(String, PinFile)>, PinError> {
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(source) => {
                return Err(PinError::Read {
                    path: self.dir.clone(),
                    source,
                });
            }
        };
        let mut out = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|source| PinError::Read {
                path: self.dir.clone(),
                source,
            })?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some(key) = name.strip_suffix(".json") else {
                continue;
            };
            if key.starts_with('.') {
                continue;
            }
            if let Some(file) = self.load(key)? {
                out.push((key.to_string(), file));
            }
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }

    /// Find a server by key, or by name when exactly one pinned server has it.
    pub fn find(&self, server: &str) -> Result<(String, PinFile), PinError> {
        let all = self.list()?;
        if let Some(found) = all.iter().find(|(key, _)| key == server) {
            return Ok(found.clone());
        }
        let by_name: Vec<_> = all
            .iter()
            .filter(|(_, f)| f.server.name == server)
            .collect();
        match by_name.as_slice() {
            [] => Err(PinError::UnknownServer(server.to_string())),
            [one] => Ok((*one).clone()),
            many => Err(PinError::AmbiguousServer(
                server.to_string(),
                many.iter()
                    .map(|(k, _)| k.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            )),
        }
    }

    /// Write `file` for `key` atomically (temporary file, then rename), readable only by
    /// the user (0600, directory 0700).
    pub fn save(&self, key: &str, file: &PinFile) -> Result<(), PinError> {
        let path = self.path_for(key);
        let write_err = |source| PinError::Write {
            path: path.clone(),
            source,
        };
        create_private_dir(&self.dir).map_err(write_err)?;
        let mut text = serde_json::to_vec_pretty(file).expect("pin files serialise");
        text.push(b'\n');
        let nonce = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let tmp = self
            .dir
            .join(format!(".{key}.json.{}.{nonce}.tmp", std::process::id()));
        let result = (|| {
            let mut options = std::fs::OpenOptions::new();
            options.write(true).create_new(true);
            crate::platform::owner_only_file(&mut options);
            let mut f = options.open(&tmp)?;
            f.write_all(&text)?;
            f.sync_all()?;
            crate::platform::replace(&tmp, &path)
        })();
        if result.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        result.map_err(write_err)
    }

    /// Move the pins recorded for `from` to `to` (the same server under a new name), unless
    /// `to` already has pins. Returns whether a file moved. A server renamed without this
    /// would be pinned afresh on its next start, and a definition changed meanwhile would
    /// be trusted as new.
    pub fn migrate(&self, from: &ServerIdentity, to: &ServerIdentity) -> Result<bool, PinError> {
        let (old, new) = (from.key(), to.key());
        if old == new || self.load(&new)?.is_some() {
            return Ok(false);
        }
        let Some(mut file) = self.load(&old)? else {
            return Ok(false);
        };
        file.server = to.clone();
        self.save(&new, &file)?;
        self.remove(&old)?;
        Ok(true)
    }

    /// Delete the pin file for `key`; the next session pins the server afresh.
    /// Returns whether there was one.
    pub fn remove(&self, key: &str) -> Result<bool, PinError> {
        let path = self.path_for(key);
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(source) => Err(PinError::Write { path, source }),
        }
    }
}

fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    crate::platform::owner_only_dir(std::fs::DirBuilder::new().recursive(true)).create(dir)?;
    // The pins dir is created inside ~/.mcpwall, whose owner-only ACL it inherits on
    // Windows; on Unix the mode above did it.
    Ok(())
}

/// Current time in Unix seconds.
pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// `sha256:<hex>` of the canonical JSON of `definition`.
pub fn digest(definition: &Value) -> String {
    let mut canonical = Vec::new();
    write_canonical(definition, &mut canonical);
    format!("sha256:{}", hex(&Sha256::digest(&canonical)))
}

/// Canonical JSON: object keys sorted by their UTF-8 bytes, no white space, strings and
/// numbers as serde_json writes them. Independent of map ordering features, so a digest
/// never changes because a dependency's feature flags did.
pub fn write_canonical(v: &Value, out: &mut Vec<u8>) {
    match v {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push(b'{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                serde_json::to_writer(&mut *out, key).expect("writing to a Vec cannot fail");
                out.push(b':');
                write_canonical(&map[key], out);
            }
            out.push(b'}');
        }
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_canonical(item, out);
            }
            out.push(b']');
        }
        scalar => serde_json::to_writer(&mut *out, scalar).expect("writing to a Vec cannot fail"),
    }
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[usize::from(b >> 4)] as char);
        s.push(DIGITS[usize::from(b & 15)] as char);
    }
    s
}

/// One difference between pinned and current definitions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    Added,
    /// With the paths of the fields that differ.
    Changed {
        fields: Vec<String>,
    },
    Removed,
}

/// Compare pinned definitions with the current ones (`key → definition`). Entries of
/// kinds listed in `complete_kinds` that are pinned but absent are reported removed;
/// for other kinds the current set may be partial (a page of a paginated list), so
/// absence means nothing.
pub fn compare(
    pinned: &BTreeMap<EntryKey, Pinned>,
    current: &BTreeMap<EntryKey, Value>,
    complete_kinds: &[EntryKind],
) -> BTreeMap<EntryKey, Change> {
    let mut changes = BTreeMap::new();
    for (key, definition) in current {
        match pinned.get(key) {
            None => {
                changes.insert(key.clone(), Change::Added);
            }
            Some(pin) if pin.digest != digest(definition) => {
                changes.insert(
                    key.clone(),
                    Change::Changed {
                        fields: changed_fields(&pin.definition, definition),
                    },
                );
            }
            Some(_) => {}
        }
    }
    for key in pinned.keys() {
        if complete_kinds.contains(&key.kind()) && !current.contains_key(key) {
            changes.insert(key.clone(), Change::Removed);
        }
    }
    changes
}

/// Most field paths reported for one changed definition.
const MAX_FIELDS: usize = 24;

/// Paths of the fields that differ between two definitions, e.g. `description`,
/// `inputSchema.properties.path.type`, `annotations.destructiveHint`, `inputSchema.required`.
/// Arrays are compared whole.
pub fn changed_fields(old: &Value, new: &Value) -> Vec<String> {
    let mut out = Vec::new();
    diff_into(old, new, &mut String::new(), &mut out);
    if out.len() > MAX_FIELDS {
        let more = out.len() - MAX_FIELDS;
        out.truncate(MAX_FIELDS);
        out.push(format!("… and {more} more"));
    }
    out
}

fn diff_into(old: &Value, new: &Value, path: &mut String, out: &mut Vec<String>) {
    match (old, new) {
        (Value::Object(a), Value::Object(b)) => {
            let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
            keys.sort();
            keys.dedup();
            for key in keys {
                let len = path.len();
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(key);
                match (a.get(key), b.get(key)) {
                    (Some(x), Some(y)) => diff_into(x, y, path, out),
                    _ => out.push(path.clone()),
                }
                path.truncate(len);
            }
        }
        (a, b) if a == b => {}
        _ => out.push(if path.is_empty() {
            "(whole definition)".to_string()
        } else {
            path.clone()
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pin(def: Value) -> Pinned {
        Pinned {
            digest: digest(&def),
            definition: def,
            approved_by: ApprovedBy::FirstUse,
            at: 1,
            allow_poisoned: false,
        }
    }

    #[test]
    fn digest_ignores_key_order_and_whitespace() {
        let a: Value =
            serde_json::from_str(r#"{"name":"x","inputSchema":{"b":1,"a":[1,2]}}"#).unwrap();
        let b: Value = serde_json::from_str(
            "{ \"inputSchema\": { \"a\": [1, 2], \"b\": 1 },\n \"name\": \"x\" }",
        )
        .unwrap();
        assert_eq!(digest(&a), digest(&b));
        assert!(digest(&a).starts_with("sha256:"));
        assert_eq!(digest(&a).len(), "sha256:".len() + 64);
    }

    #[test]
    fn digest_changes_with_any_field() {
        let base = json!({"name": "x", "description": "d", "annotations": {"readOnlyHint": true}});
        let mut changed = base.clone();
        changed["annotations"]["readOnlyHint"] = json!(false);
        assert_ne!(digest(&base), digest(&changed));
        let mut reordered_array = base.clone();
        reordered_array["x"] = json!([2, 1]);
        let mut array = base.clone();
        array["x"] = json!([1, 2]);
        assert_ne!(digest(&reordered_array), digest(&array));
    }

    #[test]
    fn canonical_form_escapes_strings() {
        let mut out = Vec::new();
        write_canonical(&json!({"b": "a\"\n", "a": 1.5}), &mut out);
        assert_eq!(String::from_utf8(out).unwrap(), r#"{"a":1.5,"b":"a\"\n"}"#);
    }

    #[test]
    fn server_key_depends_on_name_and_command() {
        let a = ServerIdentity {
            name: "files".into(),
            command: vec!["npx".into(), "server".into(), "/a".into()],
        };
        let mut b = a.clone();
        b.command[2] = "/b".into();
        assert_ne!(a.key(), b.key());
        assert!(a.key().starts_with("files-"));
        // Splitting arguments differently is a different command.
        let c = ServerIdentity {
            name: "files".into(),
            command: vec!["npx server".into(), "/a".into()],
        };
        assert_ne!(a.key(), c.key());
        let odd = ServerIdentity {
            name: "../../etc/x y".into(),
            command: vec![],
        };
        assert!(!odd.key().contains('/'));
        assert!(!odd.key().starts_with('.'));
    }

    #[test]
    fn entry_keys_know_their_kind() {
        assert_eq!(EntryKey::tool("read_file").kind(), EntryKind::Tool);
        assert_eq!(EntryKey::prompt("p").kind(), EntryKind::Prompt);
        assert_eq!(
            EntryKey::resource_template("file:///{path}").kind(),
            EntryKind::ResourceTemplate
        );
        assert_eq!(EntryKey::instructions().kind(), EntryKind::Instructions);
    }

    #[test]
    fn compare_reports_added_changed_removed_with_fields() {
        let mut pinned = BTreeMap::new();
        pinned.insert(
            EntryKey::tool("a"),
            pin(json!({"name": "a", "description": "A", "inputSchema": {"properties": {"p": {"type": "string"}}}})),
        );
        pinned.insert(EntryKey::tool("gone"), pin(json!({"name": "gone"})));
        pinned.insert(EntryKey::prompt("kept"), pin(json!({"name": "kept"})));
        let mut current = BTreeMap::new();
        current.insert(
            EntryKey::tool("a"),
            json!({"name": "a", "description": "A!", "inputSchema": {"properties": {"p": {"type": "integer"}}}, "annotations": {"destructiveHint": true}}),
        );
        current.insert(EntryKey::tool("new"), json!({"name": "new"}));

        let changes = compare(&pinned, &current, &[EntryKind::Tool]);
        assert_eq!(changes[&EntryKey::tool("new")], Change::Added);
        assert_eq!(changes[&EntryKey::tool("gone")], Change::Removed);
        assert_eq!(
            changes[&EntryKey::tool("a")],
            Change::Changed {
                fields: vec![
                    "annotations".to_string(),
                    "description".to_string(),
                    "inputSchema.properties.p.type".to_string()
                ]
            }
        );
        // Prompts were not listed completely: absence is not removal.
        assert!(!changes.contains_key(&EntryKey::prompt("kept")));
        // A partial page of tools reports no removals.
        assert!(!compare(&pinned, &current, &[]).contains_key(&EntryKey::tool("gone")));
    }

    #[test]
    fn unchanged_definitions_produce_no_change() {
        let def = json!({"name": "a", "description": "A"});
        let mut pinned = BTreeMap::new();
        pinned.insert(EntryKey::tool("a"), pin(def.clone()));
        let mut current = BTreeMap::new();
        current.insert(EntryKey::tool("a"), def);
        assert!(compare(&pinned, &current, &[EntryKind::Tool]).is_empty());
    }

    #[test]
    fn store_round_trips_atomically_with_private_mode() {
        let home = tempfile::tempdir().unwrap();
        let store = PinStore::under_home(home.path());
        let id = ServerIdentity {
            name: "srv".into(),
            command: vec!["srv".into()],
        };
        assert!(store.load(&id.key()).unwrap().is_none());
        let mut file = PinFile::new(id.clone(), 10);
        file.pinned
            .insert(EntryKey::tool("a"), pin(json!({"name": "a"})));
        store.save(&id.key(), &file).unwrap();
        assert_eq!(store.load(&id.key()).unwrap().unwrap(), file);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(store.path_for(&id.key()))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
            let dir_mode = std::fs::metadata(store.dir()).unwrap().permissions().mode();
            assert_eq!(dir_mode & 0o777, 0o700);
        }
        // No temporary files are left behind.
        let names: Vec<_> = std::fs::read_dir(store.dir())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 1, "{names:?}");
        assert_eq!(store.find("srv").unwrap().0, id.key());
        assert!(store.remove(&id.key()).unwrap());
        assert!(!store.remove(&id.key()).unwrap());
    }

    #[test]
    fn corrupt_file_is_an_error_not_a_fresh_start() {
        let home = tempfile::tempdir().unwrap();
        let store = PinStore::under_home(home.path());
        std::fs::create_dir_all(store.dir()).unwrap();
        std::fs::write(store.path_for("x-1"), "{not json").unwrap();
        assert!(matches!(store.load("x-1"), Err(PinError::Corrupt { .. })));
    }

    #[test]
    fn approve_moves_observed_into_pinned() {
        let id = ServerIdentity {
            name: "s".into(),
            command: vec![],
        };
        let mut file = PinFile::new(id, 1);
        file.pinned
            .insert(EntryKey::tool("a"), pin(json!({"name": "a"})));
        file.pinned
            .insert(EntryKey::tool("b"), pin(json!({"name": "b"})));
        file.observed.insert(
            EntryKey::tool("a"),
            Observed {
                status: Status::Changed,
                definition: Some(json!({"name": "a", "description": "new"})),
                digest: None,
                fields: vec!["description".into()],
                findings: vec![],
                at: 2,
            },
        );
        file.observed.insert(
            EntryKey::tool("b"),
            Observed {
                status: Status::Removed,
                definition: None,
                digest: None,
                fields: vec![],
                findings: vec![],
                at: 2,
            },
        );
        assert!(file.has_drift());
        let err = file
            .approve(&[EntryKey::tool("zzz")], 3, false)
            .unwrap_err();
        assert!(matches!(err, PinError::NothingToApprove { .. }));
        assert_eq!(
            file.approve(&[EntryKey::tool("a")], 3, false)
                .unwrap()
                .len(),
            1
        );
        assert_eq!(
            file.pinned[&EntryKey::tool("a")].approved_by,
            ApprovedBy::User
        );
        assert_eq!(
            file.pinned[&EntryKey::tool("a")].digest,
            digest(&json!({"name": "a", "description": "new"}))
        );
        assert!(file.has_drift(), "b is still pending");
        file.approve(&[], 4, false).unwrap();
        assert!(!file.pinned.contains_key(&EntryKey::tool("b")));
        assert!(file.observed.is_empty());
        assert!(!file.has_drift());
    }
}
