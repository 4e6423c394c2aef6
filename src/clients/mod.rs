//! MCP client configuration files: discovery, wrapping and unwrapping.
//!
//! [`discover`] finds the files, [`Workspace::load`] reads them (a broken file is kept as a
//! [`Broken`] with its line and column and never edited), [`Workspace::plan_wrap`] and
//! [`Workspace::plan_unwrap`] compute the new text of each file by splicing bytes
//! ([`edit`]), and [`Workspace::commit`] backs each file up and writes it atomically,
//! recording what it did in `~/.mcpwall/wrapped.json` ([`record`]).

pub mod codex;
pub mod discover;
pub mod edit;
pub mod entry;
pub mod fsio;
pub mod install;
pub mod json_span;
pub mod record;
pub mod sys;
pub mod toml_span;

use std::path::{Path, PathBuf};

pub use discover::{Client, ConfigFile, Env, Scope, discover};
pub use entry::EntryState;
use json_span::{Node, SyntaxError};
use record::{Record, RecordError, Records};

/// A client file that was read and parsed.
#[derive(Debug, Clone)]
pub struct Doc {
    /// Which file.
    pub file: ConfigFile,
    /// Its canonical path (the key of wrap records).
    pub canonical: PathBuf,
    /// Its text as read.
    pub text: String,
    /// Every server entry in it.
    pub servers: Vec<Server>,
}

/// A client file that could not be used; it is reported and left untouched.
#[derive(Debug)]
pub struct Broken {
    /// Which file.
    pub file: ConfigFile,
    /// Why.
    pub problem: Problem,
}

/// What is wrong with a [`Broken`] file.
#[derive(Debug, thiserror::Error)]
pub enum Problem {
    /// Not valid JSON (JSONC for VS Code and Zed, TOML for Codex).
    #[error("not valid syntax: {0}")]
    Syntax(SyntaxError),
    /// Unreadable (permissions, not UTF-8, …).
    #[error("cannot read it: {0}")]
    Io(std::io::Error),
}

/// One server entry of a client file.
#[derive(Debug, Clone)]
pub struct Server {
    /// The server's name (its key).
    pub name: String,
    /// JSON path from the root to the entry (`["mcpServers", "fs"]`).
    pub path: Vec<String>,
    /// For `~/.claude.json` local-scope entries: the project directory they belong to.
    pub project: Option<String>,
    /// Wrappable, wrapped or skipped.
    pub state: EntryState,
}

impl Doc {
    /// Read and parse one file (`env` tells whether a bare `mcpwall` command is the
    /// original, Node one: it is looked up on `env.path_var`).
    pub fn load(file: ConfigFile, env: &Env) -> Result<Doc, Broken> {
        let text = match std::fs::read_to_string(&file.path) {
            Ok(text) => text,
            Err(e) => {
                return Err(Broken {
                    file,
                    problem: Problem::Io(e),
                });
            }
        };
        let root = match edit::parse(&text, file.client.format()) {
            Ok(root) => root,
            Err(e) => {
                return Err(Broken {
                    file,
                    problem: Problem::Syntax(e),
                });
            }
        };
        let servers = servers_of(file.client, &root, env);
        let canonical = std::fs::canonicalize(&file.path).unwrap_or_else(|_| file.path.clone());
        Ok(Doc {
            file,
            canonical,
            text,
            servers,
        })
    }
}

fn servers_of(client: Client, root: &Node, env: &Env) -> Vec<Server> {
    let is_node = |command: &str| entry::is_node_mcpwall(command, env.path_var.as_deref());
    let mut out = Vec::new();
    for map_path in client.server_maps(root) {
        let project = (map_path.len() == 3).then(|| map_path[1].clone());
        let Some(members) = root.at(&map_path).and_then(Node::members) else {
            continue;
        };
        for (i, member) in members.iter().enumerate() {
            // With a duplicated name, clients (JavaScript's JSON.parse) keep the last one.
            if members[i + 1..].iter().any(|later| later.key == member.key) {
                continue;
            }
            let mut path = map_path.clone();
            path.push(member.key.clone());
            out.push(Server {
                name: member.key.clone(),
                path,
                project: project.clone(),
                state: state_in(client.format(), &member.value, &is_node),
            });
        }
    }
    out
}

/// [`EntryState::classify`] for an entry of a file in `format`.
fn state_in(format: edit::Format, node: &Node, is_node: &dyn Fn(&str) -> bool) -> EntryState {
    // Codex's remote entries carry credentials in keys of its own ([`codex`]).
    if format == edit::Format::Toml
        && node.member("url").is_some()
        && node.member("command").is_none()
    {
        return codex::state(node);
    }
    EntryState::classify(node, is_node)
}

/// Every client file found, read once.
#[derive(Debug)]
pub struct Workspace {
    /// Where things are.
    pub env: Env,
    /// Files that parsed.
    pub docs: Vec<Doc>,
    /// Files that did not; never edited.
    pub broken: Vec<Broken>,
}

/// Which servers a command applies to.
#[derive(Debug, Clone, Default)]
pub struct Selection {
    /// Only servers with this name (all when `None`).
    pub name: Option<String>,
    /// Only this client's files.
    pub client: Option<Client>,
}

impl Selection {
    fn covers(&self, doc: &Doc, server: &Server) -> bool {
        self.client.is_none_or(|c| c == doc.file.client)
            && self.name.as_ref().is_none_or(|n| *n == server.name)
    }
}

/// What happened (or would happen) to one server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Put behind mcpwall.
    Wrapped,
    /// Was behind the original mcpwall (Node) with these options; now behind this one,
    /// the options carried over.
    Migrated(entry::OriginalOptions),
    /// Was already behind mcpwall; untouched.
    AlreadyWrapped,
    /// Was behind an mcpwall command that no longer resolves (given); now behind this one.
    Repointed(String),
    /// Restored byte for byte.
    Restored,
    /// Carries no mcpwall prefix any more (replaced by the user): left as it is, and the
    /// wrap record that described the old entry was dropped.
    NoLongerWrapped,
    /// mcpwall's prefix taken off the entry as it is now; the user's later edits kept.
    RestoredKeepingEdits,
    /// No record: the wrapper was taken off the args.
    Unwrapped,
    /// Not wrapped; nothing to undo.
    NotWrapped,
    /// Cannot be wrapped, with the reason.
    Skipped(String),
    /// The edit failed, with the reason.
    Failed(String),
}

/// What a plan does to the selected entries of a file; kept with the plan so the plan can
/// be made again when the file changes before it is written.
#[derive(Debug, Clone)]
pub enum Op {
    /// Put them behind this mcpwall command.
    Wrap(String),
    /// Take mcpwall off them, using these records.
    Unwrap(Records),
}

/// The planned new text of one file, and what each selected server gets.
#[derive(Debug, Clone)]
pub struct FileChange {
    /// Index into [`Workspace::docs`].
    pub doc: usize,
    /// What is done.
    pub op: Op,
    /// The selected entries (paths), so the plan can be re-made on a newer text.
    pub paths: Vec<Vec<String>>,
    /// The text the plan was made from.
    pub before: String,
    /// The new text (equal to `before` when nothing changes).
    pub after: String,
    /// Each selected server (as it is in `before`) and what it gets.
    pub outcomes: Vec<(Server, Outcome)>,
    /// Records to add once the file is written.
    pub new_records: Vec<Record>,
    /// Entries (paths) whose records go once the file is written.
    pub done_records: Vec<Vec<String>>,
}

impl FileChange {
    /// Whether the file's bytes change.
    pub fn changes(&self) -> bool {
        self.after != self.before
    }
}

/// What [`Workspace::commit`] did to one planned file.
#[derive(Debug)]
pub struct Committed {
    /// The plan as finally carried out (re-made if the file changed meanwhile).
    pub change: FileChange,
    /// The write, `None` when nothing needed writing.
    pub result: Result<Option<fsio::Written>, fsio::WriteError>,
    /// Set when the run failed later and this file was put back (or could not be).
    pub rolled_back: Option<Result<(), fsio::WriteError>>,
}

/// What [`Workspace::commit`] did.
#[derive(Debug)]
pub struct CommitReport {
    /// Per planned file, in order.
    pub files: Vec<Committed>,
    /// The records file could not be updated; every written file was rolled back.
    pub records: Option<RecordError>,
}

impl CommitReport {
    /// Whether every write (files and records) succeeded.
    pub fn ok(&self) -> bool {
        self.records.is_none() && self.files.iter().all(|f| f.result.is_ok())
    }
}

/// A write that failed before any file was touched.
#[derive(Debug, thiserror::Error)]
pub enum CommitError {
    /// The records file.
    #[error(transparent)]
    Records(#[from] RecordError),
}

impl Doc {
    /// A file's text, parsed as it is now (for re-planning an edit on a newer text).
    pub fn from_text(
        file: ConfigFile,
        canonical: PathBuf,
        text: String,
        env: &Env,
    ) -> Result<Doc, SyntaxError> {
        let root = edit::parse(&text, file.client.format())?;
        let servers = servers_of(file.client, &root, env);
        Ok(Doc {
            file,
            canonical,
            text,
            servers,
        })
    }
}

/// The arguments mcpwall puts in front of a server's command line.
fn wrap_prefix(name: &str) -> Vec<String> {
    let mut prefix = if name.starts_with('-') {
        vec![format!("--server-name={name}")]
    } else {
        vec!["--server-name".to_string(), name.to_string()]
    };
    prefix.push("--".to_string());
    prefix
}

/// What a wrap record says, once checked ([`check_record`]).
#[derive(Debug, Clone)]
pub struct CheckedRecord {
    /// The entry before wrapping had no `args` (then unwrapping drops an emptied one).
    pub had_no_args: bool,
    /// The entry before wrapping, classified.
    pub original: EntryState,
    /// The entry before wrapping: its `command` and `args`.
    pub original_command: String,
    /// See `original_command`.
    pub original_args: Vec<String>,
    /// For an entry migrated from the original mcpwall: the bytes of its command and
    /// launcher args, to put back in front of an entry edited since.
    pub launcher_bytes: Option<Vec<String>>,
    /// For a remote entry made a bridge: what the entry put back must hold.
    pub remote: Option<edit::RemoteExpect>,
}

/// One of a record's entry texts as a tree: the entry's bytes (JSON), or for TOML the
/// `{"command": <raw TOML>, "args": <raw TOML or null>}` object [`edit::entry_bytes_in`]
/// writes, each raw value re-read by the TOML parser and required to be exactly one value.
/// Returns the tree and the text its spans point into.
fn record_entry(format: edit::Format, bytes: &str) -> Result<(Node, String), String> {
    match format {
        edit::Format::Json(dialect) => {
            let node = json_span::parse(bytes, dialect).map_err(|e| e.to_string())?;
            if node.members().is_none() {
                return Err("not an object".into());
            }
            Ok((node, bytes.to_string()))
        }
        edit::Format::Toml => {
            #[derive(serde::Deserialize)]
            #[serde(deny_unknown_fields)]
            struct Parts {
                command: String,
                args: Option<String>,
            }
            let parts: Parts = serde_json::from_str(bytes).map_err(|e| e.to_string())?;
            let mut doc = format!("command = {}\n", parts.command);
            let command_at = "command = ".len()..doc.len() - 1;
            let mut args_at = None;
            if let Some(args) = &parts.args {
                let start = doc.len() + "args = ".len();
                doc.push_str(&format!("args = {args}\n"));
                args_at = Some(start..doc.len() - 1);
            }
            let node = toml_span::parse(&doc).map_err(|e| e.to_string())?;
            // Each raw text must be one whole value: anything else in it (a second key, a
            // table header) would be spliced into the client's file as written.
            let keys: Vec<&str> = node
                .members()
                .unwrap_or_default()
                .iter()
                .map(|m| m.key.as_str())
                .collect();
            let expected: &[&str] = if args_at.is_some() {
                &["command", "args"]
            } else {
                &["command"]
            };
            let whole = |key: &str, at: &std::ops::Range<usize>| {
                node.member(key).is_some_and(|m| m.value.span == *at)
            };
            if keys != expected
                || !whole("command", &command_at)
                || args_at.as_ref().is_some_and(|at| !whole("args", at))
            {
                return Err("a value holds more than one TOML value".into());
            }
            Ok((node, doc))
        }
    }
}

/// Check a wrap record before it is used, so a damaged or hand-edited record is refused
/// with the reason and never spliced into a client's file: it must be for `client`, carry
/// a timestamp of mcpwall's form, keep as `original` an entry of the client's format with
/// a string `command` (and `args` a list of strings), and as `wrapped` that same server
/// behind mcpwall.
pub fn check_record(record: &Record, client: Client) -> Result<CheckedRecord, String> {
    if record.client != client.id() {
        return Err(format!(
            "it is for client `{}`, but the file is {}'s",
            record.client,
            client.id()
        ));
    }
    let format = client.format();
    if let Some(stretch) = record.stretch() {
        if client != Client::Codex {
            return Err("it keeps a stretch of a file, which only Codex records do".into());
        }
        let remote = codex::check_stretch(&stretch)?;
        check_stamp(record)?;
        return Ok(CheckedRecord {
            had_no_args: true,
            original: codex::state_of(&remote),
            original_command: String::new(),
            original_args: Vec::new(),
            launcher_bytes: None,
            remote: Some(edit::RemoteExpect::Restored {
                key: "url".into(),
                url: remote.url,
            }),
        });
    }
    let (original, original_text) = record_entry(format, &record.original)
        .map_err(|e| format!("its `original` is not a {} entry: {e}", client.syntax()))?;
    let had_no_args = original.member("args").is_none();
    // `wrap` makes no record for an entry already behind this mcpwall, so an `original`
    // whose command is a bare `mcpwall … --` was the Node one (a migration).
    let original_state = EntryState::classify(&original, &|_| true);
    if let EntryState::Remote { key, url, .. } = &original_state {
        let (wrapped, _) = record_entry(format, &record.wrapped)
            .map_err(|e| format!("its `wrapped` is not a {} entry: {e}", client.syntax()))?;
        match EntryState::of(&wrapped) {
            EntryState::WrappedRemote { url: bridged, .. } if bridged == *url => {}
            _ => {
                return Err(
                    "its `wrapped` entry is not its `original` remote server behind mcpwall".into(),
                );
            }
        }
        check_stamp(record)?;
        return Ok(CheckedRecord {
            had_no_args: true,
            original: original_state.clone(),
            original_command: String::new(),
            original_args: Vec::new(),
            launcher_bytes: None,
            remote: Some(edit::RemoteExpect::Restored {
                key: key.clone(),
                url: url.clone(),
            }),
        });
    }
    let server = match &original_state {
        EntryState::Unwrapped { command, args }
        | EntryState::Wrapped { command, args, .. }
        | EntryState::WrappedByOriginal { command, args, .. } => (command, args),
        EntryState::Skipped(why) => {
            return Err(format!("its `original` is not a server entry ({why})"));
        }
        EntryState::Remote { .. } | EntryState::WrappedRemote { .. } => {
            return Err("its `original` is not an entry `wrap` records".into());
        }
    };
    let launcher_bytes = match &original_state {
        EntryState::WrappedByOriginal { launcher, .. } => Some(
            edit::launcher_bytes(&original_text, &original, launcher.len() - 1)
                .ok_or("its `original` entry's launcher cannot be read")?,
        ),
        _ => None,
    };
    let original_command = original
        .member("command")
        .and_then(|c| c.value.as_str())
        .unwrap_or_default()
        .to_string();
    let original_args = original
        .member("args")
        .and_then(|a| a.value.elements())
        .map(|els| {
            els.iter()
                .filter_map(|e| e.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    let (wrapped, _) = record_entry(format, &record.wrapped)
        .map_err(|e| format!("its `wrapped` is not a {} entry: {e}", client.syntax()))?;
    match EntryState::of(&wrapped) {
        EntryState::Wrapped { command, args, .. } if (&command, &args) == server => {}
        _ => {
            return Err("its `wrapped` entry is not its `original` server behind mcpwall".into());
        }
    }
    check_stamp(record)?;
    Ok(CheckedRecord {
        had_no_args,
        original: original_state,
        original_command,
        original_args,
        launcher_bytes,
        remote: None,
    })
}

/// A record's `wrapped_at` must be a time of the form mcpwall writes.
fn check_stamp(record: &Record) -> Result<(), String> {
    let stamp = record.wrapped_at.as_bytes();
    if !(stamp.len() == 16
        && stamp[8] == b'T'
        && stamp[15] == b'Z'
        && stamp
            .iter()
            .enumerate()
            .all(|(i, c)| matches!(i, 8 | 15) || c.is_ascii_digit()))
    {
        return Err(format!(
            "its `wrapped_at` ({:?}) is not a time mcpwall wrote",
            record.wrapped_at
        ));
    }
    Ok(())
}

/// Plan `op` on the entries at `paths` of `doc`, and check the result: it must parse with
/// the client's own format rules, hold exactly the intended `command` and `args` in each
/// edited entry, and leave everything else as it was ([`edit::verify`]).
fn plan_doc(env: &Env, d: usize, doc: &Doc, op: &Op, paths: &[Vec<String>]) -> FileChange {
    let try_exact = |exact: bool| plan_doc_with(env, d, doc, op, paths, exact);
    let change = try_exact(true);
    if matches!(op, Op::Unwrap(_)) && change_failed(&change) {
        // The exact restore of a checked record did not verify (a record from another
        // mcpwall version that wrote entries differently): take the prefix off the entry as
        // it is instead. A damaged record fails both ways and is reported.
        return try_exact(false);
    }
    change
}

fn change_failed(change: &FileChange) -> bool {
    change
        .outcomes
        .iter()
        .any(|(_, o)| matches!(o, Outcome::Failed(_)))
}

fn plan_doc_with(
    env: &Env,
    d: usize,
    doc: &Doc,
    op: &Op,
    paths: &[Vec<String>],
    exact: bool,
) -> FileChange {
    let format = doc.file.client.format();
    let text = &doc.text;
    let mut change = FileChange {
        doc: d,
        op: op.clone(),
        paths: paths.to_vec(),
        before: text.clone(),
        after: text.clone(),
        outcomes: Vec::new(),
        new_records: Vec::new(),
        done_records: Vec::new(),
    };
    let root = match edit::parse(text, format) {
        Ok(root) => root,
        Err(e) => {
            for path in paths {
                if let Some(server) = doc.servers.iter().find(|s| s.path == *path) {
                    change
                        .outcomes
                        .push((server.clone(), Outcome::Failed(e.to_string())));
                }
            }
            return change;
        }
    };
    let mut splices = Vec::new();
    let mut expects = Vec::new();
    for path in paths {
        let Some(server) = doc.servers.iter().find(|s| s.path == *path) else {
            continue;
        };
        if change.outcomes.iter().any(|(s, _)| s.path == *path) {
            continue;
        }
        let is_node = |command: &str| entry::is_node_mcpwall(command, env.path_var.as_deref());
        let state = root
            .at(path)
            .map_or(EntryState::Skipped("the entry is gone".into()), |node| {
                state_in(format, node, &is_node)
            });
        let step = match op {
            Op::Wrap(wrapper) => {
                plan_wrap_entry(env, doc, &root, server, &state, wrapper, &mut change)
            }
            Op::Unwrap(records) => {
                plan_unwrap_entry(doc, &root, server, &state, records, exact, &mut change)
            }
        };
        let outcome = match step {
            Ok((outcome, more, expect)) => {
                splices.extend(more);
                expects.extend(expect);
                outcome
            }
            Err(e) => Outcome::Failed(e.to_string()),
        };
        change.outcomes.push((server.clone(), outcome));
    }
    let after = edit::apply(text, splices);
    if let Err(why) = edit::verify(text, &after, format, &expects) {
        for (_, outcome) in &mut change.outcomes {
            if !matches!(
                outcome,
                Outcome::AlreadyWrapped | Outcome::NotWrapped | Outcome::Skipped(_)
            ) {
                *outcome = Outcome::Failed(format!(
                    "mcpwall's edit did not check out ({why}); the file was left as it was"
                ));
            }
        }
        change.new_records.clear();
        change.done_records.clear();
        return change;
    }
    change.after = after;
    if !change.new_records.is_empty() {
        let after_root = edit::parse(&change.after, format).ok();
        for record in change
            .new_records
            .iter_mut()
            .filter(|r| r.stretch_before_command.is_none())
        {
            record.wrapped = after_root
                .as_ref()
                .and_then(|r| edit::entry_bytes_in(&change.after, r, format, &record.path))
                .unwrap_or_default();
        }
    }
    change
}

type Step = Result<(Outcome, Vec<edit::Splice>, Option<edit::Expect>), edit::EditError>;

fn plan_wrap_entry(
    env: &Env,
    doc: &Doc,
    root: &Node,
    server: &Server,
    state: &EntryState,
    wrapper: &str,
    change: &mut FileChange,
) -> Step {
    let format = doc.file.client.format();
    let (command, args) = match state {
        EntryState::Unwrapped { command, args } => (command, args),
        EntryState::Wrapped {
            wrapper: old,
            options,
            command,
            args,
        } => {
            // An mcpwall that moved away (a reinstall, a deleted build): point the
            // entry at this one; everything else stays.
            let stale = old != wrapper
                && entry::resolve_on_path(old, env.path_var.as_deref(), None).is_none();
            if !stale {
                return Ok((Outcome::AlreadyWrapped, Vec::new(), None));
            }
            let splices = edit::repoint_splices(root, format, &server.path, wrapper)?;
            let mut all = options.clone();
            all.push("--".into());
            all.push(command.clone());
            all.extend(args.iter().cloned());
            let expect = edit::Expect {
                path: server.path.clone(),
                command: wrapper.to_string(),
                args: all,
                remote: None,
            };
            return Ok((Outcome::Repointed(old.clone()), splices, Some(expect)));
        }
        EntryState::WrappedByOriginal {
            launcher,
            options,
            command,
            args,
        } => {
            return plan_migrate_entry(
                doc, root, server, wrapper, launcher, options, command, args, change,
            );
        }
        EntryState::Remote { .. } if format == edit::Format::Toml => {
            return plan_wrap_codex_remote(doc, root, server, wrapper, change);
        }
        EntryState::Remote { url, .. } => {
            return plan_wrap_remote(doc, root, server, url, wrapper, change);
        }
        EntryState::WrappedRemote {
            wrapper: old,
            options,
            ..
        } => {
            // As for a stdio server: an mcpwall that moved away is replaced by this one.
            let stale = old != wrapper
                && entry::resolve_on_path(old, env.path_var.as_deref(), None).is_none();
            if !stale {
                return Ok((Outcome::AlreadyWrapped, Vec::new(), None));
            }
            let splices = edit::repoint_splices(root, format, &server.path, wrapper)?;
            let expect = edit::Expect {
                path: server.path.clone(),
                command: wrapper.to_string(),
                args: options.clone(),
                remote: None,
            };
            return Ok((Outcome::Repointed(old.clone()), splices, Some(expect)));
        }
        EntryState::Skipped(why) => return Ok((Outcome::Skipped(why.clone()), Vec::new(), None)),
    };
    let splices = edit::wrap_splices(&doc.text, root, format, &server.path, &server.name, wrapper)?;
    let mut expected_args = wrap_prefix(&server.name);
    expected_args.push(command.clone());
    expected_args.extend(args.iter().cloned());
    let expect = record_wrap(doc, root, server, wrapper, expected_args, change);
    Ok((Outcome::Wrapped, splices, Some(expect)))
}

/// Make a remote entry a stdio entry running mcpwall's bridge to its URL, its headers
/// carried in `env` (see [`edit::wrap_remote_splices`]), recorded so `unwrap` puts the
/// remote entry back byte for byte.
fn plan_wrap_remote(
    doc: &Doc,
    root: &Node,
    server: &Server,
    url: &str,
    wrapper: &str,
    change: &mut FileChange,
) -> Step {
    let format = doc.file.client.format();
    let (splices, headers) =
        edit::wrap_remote_splices(&doc.text, root, format, &server.path, &server.name, wrapper)?;
    let mut args = wrap_prefix(&server.name);
    args.pop();
    args.extend(["--upstream".to_string(), url.to_string()]);
    let mut expect = record_wrap(doc, root, server, wrapper, args, change);
    expect.remote = Some(edit::RemoteExpect::Bridged { headers });
    Ok((Outcome::Wrapped, splices, Some(expect)))
}

/// Make a Codex remote entry a stdio entry running mcpwall's bridge, its credentials
/// carried as references ([`codex::wrap_splices`]), recorded as the stretch of the file the
/// edit changed so `unwrap` puts every byte back.
fn plan_wrap_codex_remote(
    doc: &Doc,
    root: &Node,
    server: &Server,
    wrapper: &str,
    change: &mut FileChange,
) -> Step {
    let bridged = codex::wrap_splices(&doc.text, root, &server.path, &server.name, wrapper)?;
    let mut args = wrap_prefix(&server.name);
    args.pop();
    args.extend(["--upstream".to_string(), bridged.remote.url.clone()]);
    let mut expect = record_wrap(doc, root, server, wrapper, args, change);
    let record = change
        .new_records
        .last_mut()
        .expect("record_wrap just added it");
    record.original = bridged.stretch.original;
    record.wrapped = bridged.stretch.wrapped;
    record.stretch_before_command = Some(bridged.stretch.before_command);
    expect.remote = Some(edit::RemoteExpect::BridgedCodex {
        env: bridged.remote.bridge_env(),
        env_vars: bridged.remote.env_vars(),
    });
    Ok((Outcome::Wrapped, bridged.splices, Some(expect)))
}

/// Record the entry as it is now, for `unwrap`, and say what it must look like once
/// `wrapper` is in front of it with `args`.
fn record_wrap(
    doc: &Doc,
    root: &Node,
    server: &Server,
    wrapper: &str,
    args: Vec<String>,
    change: &mut FileChange,
) -> edit::Expect {
    let format = doc.file.client.format();
    change.new_records.push(Record {
        client: doc.file.client.id().to_string(),
        file: doc.canonical.clone(),
        path: server.path.clone(),
        original: edit::entry_bytes_in(&doc.text, root, format, &server.path).unwrap_or_default(),
        // Filled in from the new text once every entry of the file is planned.
        wrapped: String::new(),
        wrapped_at: fsio::timestamp(std::time::SystemTime::now()),
        stretch_before_command: None,
    });
    edit::Expect {
        path: server.path.clone(),
        command: wrapper.to_string(),
        args,
        remote: None,
    }
}

/// Move an entry from the original mcpwall (Node) to this one: one edit, its options kept
/// (they mean the same here), recorded so `unwrap` can put the original's wrapper back.
#[allow(clippy::too_many_arguments)]
fn plan_migrate_entry(
    doc: &Doc,
    root: &Node,
    server: &Server,
    wrapper: &str,
    launcher: &[String],
    options: &entry::OriginalOptions,
    command: &str,
    args: &[String],
    change: &mut FileChange,
) -> Step {
    if !options.unknown.is_empty() {
        return Ok((
            Outcome::Skipped(format!(
                "behind the original mcpwall (Node) with {}",
                options.migration_hint(&server.name)
            )),
            Vec::new(),
            None,
        ));
    }
    let format = doc.file.client.format();
    let splices = edit::migrate_splices(
        &doc.text,
        root,
        format,
        &server.path,
        &server.name,
        wrapper,
        launcher.len() - 1,
    )?;
    let mut expected_args = wrap_prefix(&server.name);
    expected_args.pop();
    expected_args.extend(options.written.iter().cloned());
    expected_args.push("--".into());
    expected_args.push(command.to_string());
    expected_args.extend(args.iter().cloned());
    let expect = record_wrap(doc, root, server, wrapper, expected_args, change);
    Ok((Outcome::Migrated(options.clone()), splices, Some(expect)))
}

fn plan_unwrap_entry(
    doc: &Doc,
    root: &Node,
    server: &Server,
    state: &EntryState,
    records: &Records,
    exact: bool,
    change: &mut FileChange,
) -> Step {
    let format = doc.file.client.format();
    let text = &doc.text;
    let path = &server.path;
    let record = records.find(&doc.canonical, path);
    if let EntryState::WrappedRemote { url, .. } = state {
        return plan_unwrap_remote(doc, root, server, url, record, exact, change);
    }
    let EntryState::Wrapped { command, args, .. } = state else {
        if record.is_some() {
            // Replaced by the user since it was wrapped: the record describes an entry
            // that is not there any more, and must never overwrite the new one.
            change.done_records.push(path.clone());
            return Ok((Outcome::NoLongerWrapped, Vec::new(), None));
        }
        if matches!(state, EntryState::WrappedByOriginal { .. }) {
            return Ok((
                Outcome::Skipped(
                    "behind the original mcpwall (Node), not this one: nothing of this mcpwall's to take off".into(),
                ),
                Vec::new(),
                None,
            ));
        }
        return Ok((Outcome::NotWrapped, Vec::new(), None));
    };
    // A record is checked before it is used; a damaged one stops this entry (the user
    // decides: repair the record, or drop it and unwrap without it).
    let checked = match record {
        Some(r) => Some(check_record(r, doc.file.client).map_err(|why| {
            edit::EditError::Record(format!(
                "its wrap record in ~/.mcpwall/wrapped.json is damaged ({why}), so the entry was left as it is; repair the record, or delete it and run unwrap again to take mcpwall's prefix off the entry as it is now"
            ))
        })?),
        None => None,
    };
    let had_no_args = checked.as_ref().map(|c| c.had_no_args);
    let expect = edit::Expect {
        path: path.clone(),
        command: command.clone(),
        args: args.clone(),
        remote: None,
    };
    change.done_records.push(path.clone());
    let current = edit::entry_bytes_in(text, root, format, path).unwrap_or_default();
    if exact
        && let Some(r) = record
        && let Some(c) = &checked
        && r.wrapped == current
    {
        // Untouched since wrapping: put the original bytes back (checked by verify).
        let splices = edit::restore_exact_splices(text, root, format, path, &r.original)?;
        let expect = edit::Expect {
            path: path.clone(),
            command: c.original_command.clone(),
            args: c.original_args.clone(),
            remote: None,
        };
        return Ok((Outcome::Restored, splices, Some(expect)));
    }
    if let Some(c) = &checked
        && let Some(launcher) = &c.launcher_bytes
        && let EntryState::WrappedByOriginal {
            launcher: words, ..
        } = &c.original
    {
        // Migrated from the original mcpwall and edited since: the original's launcher goes
        // back in front of the entry as it is now.
        let splices = edit::restore_launcher_splices(text, root, path, launcher)?;
        let root_entry = root
            .at(path)
            .ok_or_else(|| edit::EditError::NoEntry(path.join(".")))?;
        let now: Vec<String> = root_entry
            .member("args")
            .and_then(|a| a.value.elements())
            .map(|els| {
                els.iter()
                    .filter_map(|e| e.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default();
        let ours = match now.first().map(String::as_str) {
            Some("--server-name") => 2,
            Some(a) if a.starts_with("--server-name=") => 1,
            _ => 0,
        };
        let mut args = words[1..].to_vec();
        args.extend(now.into_iter().skip(ours));
        let expect = edit::Expect {
            path: path.clone(),
            command: words[0].clone(),
            args,
            remote: None,
        };
        return Ok((Outcome::RestoredKeepingEdits, splices, Some(expect)));
    }
    let drop_empty = had_no_args == Some(true) && args.is_empty();
    let splices = edit::strip_wrapper_splices(text, root, format, path, drop_empty)?;
    let outcome = if record.is_some() {
        Outcome::RestoredKeepingEdits
    } else {
        Outcome::Unwrapped
    };
    Ok((outcome, splices, Some(expect)))
}

/// Put a remote entry made a bridge back: byte for byte when it is untouched since `wrap`,
/// else from the entry as it is now (its URL and headers as they are now; every other
/// edit kept).
fn plan_unwrap_remote(
    doc: &Doc,
    root: &Node,
    server: &Server,
    url: &str,
    record: Option<&Record>,
    exact: bool,
    change: &mut FileChange,
) -> Step {
    let format = doc.file.client.format();
    let path = &server.path;
    let checked = match record {
        Some(r) => Some(check_record(r, doc.file.client).map_err(|why| {
            edit::EditError::Record(format!(
                "its wrap record in ~/.mcpwall/wrapped.json is damaged ({why}), so the entry was left as it is; repair the record, or delete it and run unwrap again to make it a remote entry from what it holds now"
            ))
        })?),
        None => None,
    };
    change.done_records.push(path.clone());
    if format == edit::Format::Toml {
        return plan_unwrap_codex_remote(doc, root, server, record, checked, exact);
    }
    let current = edit::entry_bytes_in(&doc.text, root, format, path).unwrap_or_default();
    let was = checked.as_ref().and_then(|c| match &c.original {
        EntryState::Remote { key, .. } => Some(key.clone()),
        _ => None,
    });
    if exact
        && let Some(r) = record
        && let Some(remote) = checked.as_ref().and_then(|c| c.remote.clone())
        && r.wrapped == current
    {
        let splices = edit::restore_exact_splices(&doc.text, root, format, path, &r.original)?;
        let expect = edit::Expect {
            path: path.clone(),
            command: String::new(),
            args: Vec::new(),
            remote: Some(remote),
        };
        return Ok((Outcome::Restored, splices, Some(expect)));
    }
    let original_type = record.and_then(|r| {
        let (node, text) = record_entry(format, &r.original).ok()?;
        node.member("type")
            .map(|t| text[t.value.span.clone()].to_string())
    });
    let key = was.unwrap_or_else(|| "url".to_string());
    // Without a record nothing says how the entry was typed: a client that needs `type`
    // for a remote server gets `http`.
    let add_type =
        record.is_none() && matches!(doc.file.client, Client::ClaudeCode | Client::VsCode);
    let splices = edit::unbridge_splices(
        &doc.text,
        root,
        format,
        path,
        &key,
        original_type.as_deref(),
        add_type,
    )?;
    let expect = edit::Expect {
        path: path.clone(),
        command: String::new(),
        args: Vec::new(),
        remote: Some(edit::RemoteExpect::Restored {
            key,
            url: url.to_string(),
        }),
    };
    let outcome = if record.is_some() {
        Outcome::RestoredKeepingEdits
    } else {
        Outcome::Unwrapped
    };
    Ok((outcome, splices, Some(expect)))
}

/// Put a Codex bridge back: the recorded stretch byte for byte when the file still holds
/// what the wrap wrote there, else the remote entry rebuilt from the bridge entry as it is
/// now (its other keys kept).
fn plan_unwrap_codex_remote(
    doc: &Doc,
    root: &Node,
    server: &Server,
    record: Option<&Record>,
    checked: Option<CheckedRecord>,
    exact: bool,
) -> Step {
    let path = &server.path;
    let restored = |url: String| edit::Expect {
        path: path.clone(),
        command: String::new(),
        args: Vec::new(),
        remote: Some(edit::RemoteExpect::Restored {
            key: "url".into(),
            url,
        }),
    };
    if exact
        && let Some(stretch) = record.and_then(Record::stretch)
        && let Some(remote) = checked.and_then(|c| c.remote)
        && let Some(splices) = codex::restore_splices(&doc.text, root, path, &stretch)
        && let edit::RemoteExpect::Restored { url, .. } = remote
    {
        return Ok((Outcome::Restored, splices, Some(restored(url))));
    }
    let (splices, remote) = codex::unbridge_splices(&doc.text, root, path)?;
    let outcome = if record.is_some() {
        Outcome::RestoredKeepingEdits
    } else {
        Outcome::Unwrapped
    };
    Ok((outcome, splices, Some(restored(remote.url))))
}

impl Workspace {
    /// Discover and read every client file, and every file the wrap records name that
    /// discovery here does not find (another project's `.mcp.json`, a file given to
    /// `wrap --client-file`): what mcpwall wrapped is seen from any directory.
    pub fn load(env: Env) -> Workspace {
        let mut docs = Vec::new();
        let mut broken = Vec::new();
        let mut files = discover(&env);
        let known: Vec<PathBuf> = files
            .iter()
            .map(|f| std::fs::canonicalize(&f.path).unwrap_or_else(|_| f.path.clone()))
            .collect();
        // Damaged records are reported by `doctor` and refused by `unwrap`; here they
        // only cannot add files.
        if let Ok((records, _)) = Records::load(&env.mcpwall_dir()) {
            let mut seen = known;
            for record in &records.entries {
                let Some(client) = Client::from_id(&record.client) else {
                    continue;
                };
                if seen.contains(&record.file) || !record.file.is_file() {
                    continue;
                }
                seen.push(record.file.clone());
                files.push(ConfigFile::recorded(client, record.file.clone(), &env));
            }
        }
        for file in files {
            match Doc::load(file, &env) {
                Ok(doc) => docs.push(doc),
                Err(b) => broken.push(b),
            }
        }
        Workspace { env, docs, broken }
    }

    /// Read exactly one file given with `--client-file` (as `client`'s).
    pub fn load_file(env: Env, file: ConfigFile) -> Workspace {
        let (docs, broken) = match Doc::load(file, &env) {
            Ok(doc) => (vec![doc], Vec::new()),
            Err(b) => (Vec::new(), vec![b]),
        };
        Workspace { env, docs, broken }
    }

    /// `(doc index, server index)` of every selected server.
    pub fn selected(&self, selection: &Selection) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        for (d, doc) in self.docs.iter().enumerate() {
            for (s, server) in doc.servers.iter().enumerate() {
                if selection.covers(doc, server) {
                    out.push((d, s));
                }
            }
        }
        out
    }

    /// Plan wrapping `chosen` servers with `wrapper`.
    pub fn plan_wrap(&self, chosen: &[(usize, usize)], wrapper: &str) -> Vec<FileChange> {
        self.plan(chosen, &Op::Wrap(wrapper.to_string()))
    }

    /// Plan unwrapping `chosen` servers using `records`.
    pub fn plan_unwrap(&self, chosen: &[(usize, usize)], records: &Records) -> Vec<FileChange> {
        self.plan(chosen, &Op::Unwrap(records.clone()))
    }

    /// One plan per file, all of a file's entries against one parse of it (entries never
    /// overlap, so their splices combine).
    fn plan(&self, chosen: &[(usize, usize)], op: &Op) -> Vec<FileChange> {
        let mut order: Vec<usize> = Vec::new();
        for &(d, _) in chosen {
            if !order.contains(&d) {
                order.push(d);
            }
        }
        order
            .into_iter()
            .map(|d| {
                let doc = &self.docs[d];
                let paths: Vec<Vec<String>> = chosen
                    .iter()
                    .filter(|(cd, _)| *cd == d)
                    .map(|&(_, s)| doc.servers[s].path.clone())
                    .collect();
                plan_doc(&self.env, d, doc, op, &paths)
            })
            .collect()
    }

    /// Write every changed file under [`fsio::edit_file`]'s discipline (re-making a file's
    /// plan if the file changed since it was read), then update the records in the same
    /// critical section (the caller holds [`fsio::lock`]). A file that fails is left as it
    /// was and the others go ahead; if the records cannot be written, every file written
    /// is put back, so no run leaves a wrap without its record or a record without its wrap.
    pub fn commit(&self, changes: Vec<FileChange>, options: fsio::Options) -> CommitReport {
        let dir = self.env.mcpwall_dir();
        let backups = dir.join("backups");
        let mut files = Vec::new();
        for change in changes {
            if !change.changes() {
                files.push(Committed {
                    change,
                    result: Ok(None),
                    rolled_back: None,
                });
                continue;
            }
            let doc = &self.docs[change.doc];
            if let Some(refusal) = self.leaves_the_project(doc, options) {
                files.push(Committed {
                    change,
                    result: Err(refusal),
                    rolled_back: None,
                });
                continue;
            }
            let format = doc.file.client.format();
            let validate = |text: &str| {
                edit::parse(text, format)
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            };
            let mut latest = change;
            let result = fsio::edit_file(
                &doc.file.path,
                Some(&backups),
                options,
                doc.file.client.syntax(),
                &validate,
                |now| {
                    let Some(now) = now else {
                        return Err(format!("{} is gone", doc.file.path.display()));
                    };
                    if now != latest.before {
                        let fresh = Doc::from_text(
                            doc.file.clone(),
                            doc.canonical.clone(),
                            now.to_string(),
                            &self.env,
                        )
                        .map_err(|e| {
                            format!("{} no longer parses: {e}", doc.file.path.display())
                        })?;
                        latest = plan_doc(&self.env, latest.doc, &fresh, &latest.op, &latest.paths);
                    }
                    Ok((latest.after.clone(), ()))
                },
            )
            .map(|(written, ())| written);
            files.push(Committed {
                change: latest,
                result,
                rolled_back: None,
            });
        }
        let written = files.iter().filter(|f| matches!(f.result, Ok(Some(_))));
        let mut add = Vec::new();
        let mut forget = Vec::new();
        for f in written {
            let doc = &self.docs[f.change.doc];
            add.extend(f.change.new_records.iter().cloned());
            forget.extend(
                f.change
                    .done_records
                    .iter()
                    .map(|p| (doc.canonical.clone(), p.clone())),
            );
        }
        let mut records = None;
        if (!add.is_empty() || !forget.is_empty())
            && let Err(e) = Records::update(&dir, |r| {
                for (file, path) in &forget {
                    r.forget(file, path);
                }
                for record in &add {
                    r.put(record.clone());
                }
            })
        {
            for f in &mut files {
                if let Ok(Some(written)) = &f.result {
                    f.rolled_back = Some(fsio::roll_back(written));
                }
            }
            records = Some(e);
        }
        CommitReport { files, records }
    }

    /// Show a path with the home directory as `~` and the project directory as `.`.
    pub fn display_path(&self, path: &Path) -> String {
        display_path(&self.env, path)
    }

    /// A project file that is a symlink to a file outside the project: the repository
    /// chose where it points, so writing through it (to any file of the user's that
    /// happens to parse) needs `--force`.
    fn leaves_the_project(&self, doc: &Doc, options: fsio::Options) -> Option<fsio::WriteError> {
        if doc.file.scope != Scope::Project || options.force {
            return None;
        }
        let project = std::fs::canonicalize(doc.file.project_dir(&self.env)?).ok()?;
        let is_link =
            std::fs::symlink_metadata(&doc.file.path).is_ok_and(|m| m.file_type().is_symlink());
        let parent_moves = doc
            .file
            .path
            .parent()
            .and_then(|p| std::fs::canonicalize(p).ok())
            .is_none_or(|p| !p.starts_with(&project));
        (!doc.canonical.starts_with(&project) && (is_link || parent_moves)).then(|| {
            fsio::WriteError::OutsideProject {
                path: doc.file.path.clone(),
                target: doc.canonical.clone(),
            }
        })
    }
}

/// Show a path with the home directory as `~` and the project directory as `.`, by
/// whichever of the two is the closer ancestor: run from a directory above the home
/// (`/`, `/Users`), `~/.claude.json` stays `~/.claude.json`, not `./me/.claude.json`.
pub fn display_path(env: &Env, path: &Path) -> String {
    let in_home = path.strip_prefix(&env.home).ok();
    let in_project = path
        .strip_prefix(&env.project_dir)
        .ok()
        .filter(|_| env.project_dir != env.home)
        .filter(|_| in_home.is_none() || env.project_dir.starts_with(&env.home));
    if let Some(rest) = in_project {
        return Path::new(".").join(rest).display().to_string();
    }
    if let Some(rest) = in_home {
        return Path::new("~").join(rest).display().to_string();
    }
    path.display().to_string()
}

/// A unified diff of one file's change, with `a/` and `b/` headers naming `label`.
pub fn unified_diff(label: &str, before: &str, after: &str) -> String {
    similar::TextDiff::from_lines(before, after)
        .unified_diff()
        .context_radius(3)
        .header(&format!("a/{label}"), &format!("b/{label}"))
        .to_string()
}

/// A server's command line for display (`npx -y @scope/server`).
pub fn command_line(command: &str, args: &[String]) -> String {
    std::iter::once(command)
        .chain(args.iter().map(String::as_str))
        .map(|a| {
            if a.is_empty() || a.contains(char::is_whitespace) {
                format!("{a:?}")
            } else {
                a.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toml_env_table_before_its_server_wraps() {
        let text = "[mcp_servers.\"a\\u007Fb\"]\ncommand = \"srv\"\n\n[mcp_servers.n.env]\nK = \"v\"\n\n[mcp_servers.n]\ncommand = \"notes\"\n";
        let p: Vec<String> = vec!["mcp_servers".into(), "n".into()];
        let out = edit::wrap(text, edit::Format::Toml, &p, "n", "mcpwall").unwrap();
        let mut args: Vec<String> = ["--server-name", "n", "--", "notes"]
            .map(String::from)
            .to_vec();
        let r = edit::verify(
            text,
            &out,
            edit::Format::Toml,
            &[edit::Expect {
                path: p.clone(),
                command: "mcpwall".into(),
                args: std::mem::take(&mut args),
                remote: None,
            }],
        );
        assert!(r.is_ok(), "{r:?}\n{text}\n---\n{out}");
        let root = edit::parse(&out, edit::Format::Toml).unwrap();
        let record = edit::entry_bytes(text, edit::Format::Toml, &p).unwrap();
        let splices =
            edit::restore_exact_splices(&out, &root, edit::Format::Toml, &p, &record).unwrap();
        let back = edit::apply(&out, splices);
        let r = edit::verify(
            &out,
            &back,
            edit::Format::Toml,
            &[edit::Expect {
                path: p.clone(),
                command: "notes".into(),
                args: vec![],
                remote: None,
            }],
        );
        assert!(r.is_ok(), "{r:?}\n{out}\n---\n{back}");
    }
}
