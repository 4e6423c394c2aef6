//! MCP client configuration files: discovery, wrapping and unwrapping.
//!
//! [`discover`] finds the files, [`Workspace::load`] reads them (a broken file is kept as a
//! [`Broken`] with its line and column and never edited), [`Workspace::plan_wrap`] and
//! [`Workspace::plan_unwrap`] compute the new text of each file by splicing bytes
//! ([`edit`]), and [`Workspace::commit`] backs each file up and writes it atomically,
//! recording what it did in `~/.mcpwall/wrapped.json` ([`record`]).

pub mod discover;
pub mod edit;
pub mod entry;
pub mod fsio;
pub mod json_span;
pub mod record;
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
    /// Read and parse one file.
    pub fn load(file: ConfigFile) -> Result<Doc, Broken> {
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
        let servers = servers_of(file.client, &root);
        let canonical = std::fs::canonicalize(&file.path).unwrap_or_else(|_| file.path.clone());
        Ok(Doc {
            file,
            canonical,
            text,
            servers,
        })
    }
}

fn servers_of(client: Client, root: &Node) -> Vec<Server> {
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
                state: EntryState::of(&member.value),
            });
        }
    }
    out
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
    /// Was already behind mcpwall; untouched.
    AlreadyWrapped,
    /// Was behind an mcpwall command that no longer resolves (given); now behind this one.
    Repointed(String),
    /// Restored byte for byte.
    Restored,
    /// Command and args restored from the record; the user's other edits kept.
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

/// The planned new text of one file, and what each selected server gets.
#[derive(Debug, Clone)]
pub struct FileChange {
    /// Index into [`Workspace::docs`].
    pub doc: usize,
    /// The new text (equal to the old one when nothing changes).
    pub after: String,
    /// `(server index in the doc, outcome)`.
    pub outcomes: Vec<(usize, Outcome)>,
    /// Records to add once the file is written.
    pub new_records: Vec<Record>,
    /// Entries (paths) whose records go once the file is written.
    pub done_records: Vec<Vec<String>>,
}

impl FileChange {
    /// Whether the file's bytes change.
    pub fn changes(&self, ws: &Workspace) -> bool {
        self.after != ws.docs[self.doc].text
    }
}

/// A write that failed.
#[derive(Debug, thiserror::Error)]
pub enum CommitError {
    /// The records file.
    #[error(transparent)]
    Records(#[from] RecordError),
}

impl Workspace {
    /// Discover and read every client file.
    pub fn load(env: Env) -> Workspace {
        let mut docs = Vec::new();
        let mut broken = Vec::new();
        for file in discover(&env) {
            match Doc::load(file) {
                Ok(doc) => docs.push(doc),
                Err(b) => broken.push(b),
            }
        }
        Workspace { env, docs, broken }
    }

    /// Read exactly one file given with `--config` (as `client`'s).
    pub fn load_file(env: Env, file: ConfigFile) -> Workspace {
        let (docs, broken) = match Doc::load(file) {
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
        self.plan(chosen, |doc, root, server, change| {
            let format = doc.file.client.format();
            match root.at(&server.path).map_or(
                EntryState::Skipped("the entry is gone".into()),
                EntryState::of,
            ) {
                EntryState::Unwrapped { .. } => {}
                EntryState::Wrapped { wrapper: old, .. } => {
                    // An mcpwall that moved away (a reinstall, a deleted build): point the
                    // entry at this one; everything else stays.
                    let stale = old != wrapper
                        && entry::resolve_on_path(&old, self.env.path_var.as_deref(), None)
                            .is_none();
                    if !stale {
                        return Ok((Outcome::AlreadyWrapped, Vec::new()));
                    }
                    let splices = edit::repoint_splices(root, &server.path, wrapper)?;
                    return Ok((Outcome::Repointed(old), splices));
                }
                EntryState::Skipped(why) => return Ok((Outcome::Skipped(why), Vec::new())),
            }
            let splices =
                edit::wrap_splices(&doc.text, root, format, &server.path, &server.name, wrapper)?;
            change.new_records.push(Record {
                client: doc.file.client.id().to_string(),
                file: doc.canonical.clone(),
                path: server.path.clone(),
                original: edit::entry_bytes_in(&doc.text, root, format, &server.path)
                    .unwrap_or_default(),
                // Filled in from the new text once every entry of the file is planned.
                wrapped: String::new(),
                wrapped_at: fsio::timestamp(std::time::SystemTime::now()),
            });
            Ok((Outcome::Wrapped, splices))
        })
    }

    /// Plan unwrapping `chosen` servers using `records`.
    pub fn plan_unwrap(&self, chosen: &[(usize, usize)], records: &Records) -> Vec<FileChange> {
        self.plan(chosen, |doc, root, server, change| {
            if !matches!(server.state, EntryState::Wrapped { .. }) {
                return Ok((Outcome::NotWrapped, Vec::new()));
            }
            let format = doc.file.client.format();
            let text = &doc.text;
            let path = &server.path;
            let current = edit::entry_bytes_in(text, root, format, path).unwrap_or_default();
            let (splices, outcome) = match records.find(&doc.canonical, path) {
                Some(r) if r.wrapped == current => (
                    edit::restore_exact_splices(text, root, format, path, &r.original)?,
                    Outcome::Restored,
                ),
                Some(r) => (
                    edit::restore_command_splices(text, root, format, path, &r.original)?,
                    Outcome::RestoredKeepingEdits,
                ),
                None => (
                    edit::strip_wrapper_splices(text, root, path)?,
                    Outcome::Unwrapped,
                ),
            };
            change.done_records.push(path.clone());
            Ok((outcome, splices))
        })
    }

    /// Run `step` for each chosen server, one file at a time, all against one parse of the
    /// file (entries never overlap, so their splices combine), then apply the splices.
    fn plan(
        &self,
        chosen: &[(usize, usize)],
        mut step: impl FnMut(
            &Doc,
            &Node,
            &Server,
            &mut FileChange,
        ) -> Result<(Outcome, Vec<edit::Splice>), edit::EditError>,
    ) -> Vec<FileChange> {
        let mut order: Vec<usize> = Vec::new();
        for &(d, _) in chosen {
            if !order.contains(&d) {
                order.push(d);
            }
        }
        let mut changes = Vec::new();
        for d in order {
            let doc = &self.docs[d];
            let format = doc.file.client.format();
            let mut change = FileChange {
                doc: d,
                after: doc.text.clone(),
                outcomes: Vec::new(),
                new_records: Vec::new(),
                done_records: Vec::new(),
            };
            let root = edit::parse(&doc.text, format);
            let mut splices = Vec::new();
            let mut seen: Vec<&[String]> = Vec::new();
            for &(_, s) in chosen.iter().filter(|(cd, _)| *cd == d) {
                let server = &doc.servers[s];
                if seen.contains(&server.path.as_slice()) {
                    continue;
                }
                seen.push(&server.path);
                let outcome = match &root {
                    Err(e) => Outcome::Failed(e.to_string()),
                    Ok(root) => match step(doc, root, server, &mut change) {
                        Ok((outcome, more)) => {
                            splices.extend(more);
                            outcome
                        }
                        Err(e) => Outcome::Failed(e.to_string()),
                    },
                };
                change.outcomes.push((s, outcome));
            }
            change.after = edit::apply(&doc.text, splices);
            if !change.new_records.is_empty() {
                let after_root = edit::parse(&change.after, format).ok();
                for record in &mut change.new_records {
                    record.wrapped = after_root
                        .as_ref()
                        .and_then(|r| edit::entry_bytes_in(&change.after, r, format, &record.path))
                        .unwrap_or_default();
                }
            }
            changes.push(change);
        }
        changes
    }

    /// Back up and write every changed file, and update the records. Returns, per change,
    /// the backup path or the error that stopped that file (other files still go ahead).
    pub fn commit(
        &self,
        changes: &[FileChange],
    ) -> Result<Vec<Result<Option<PathBuf>, fsio::WriteError>>, CommitError> {
        let dir = self.env.mcpwall_dir();
        let backups = dir.join("backups");
        let (mut records, read) = Records::load(&dir)?;
        // Records go to disk before the files: a record without its wrap is harmless
        // (unwrap finds nothing to do), a wrap without its record loses the original bytes.
        let mut pending = records.clone();
        for change in changes.iter().filter(|c| c.changes(self)) {
            for r in &change.new_records {
                pending.put(r.clone());
            }
        }
        if !changes.iter().all(|c| c.new_records.is_empty()) {
            pending.save(&dir, read.as_deref())?;
        }
        let mut results = Vec::new();
        for change in changes {
            let doc = &self.docs[change.doc];
            if !change.changes(self) {
                results.push(Ok(None));
                continue;
            }
            let written = fsio::backup(&doc.file.path, &backups).and_then(|backup| {
                fsio::write_atomic(&doc.file.path, Some(&doc.text), &change.after).map(|()| backup)
            });
            if written.is_ok() {
                for r in &change.new_records {
                    records.put(r.clone());
                }
                for path in &change.done_records {
                    records.forget(&doc.canonical, path);
                }
            }
            results.push(written.map(Some));
        }
        let (_, read) = Records::load(&dir)?;
        let unchanged = match read.as_deref() {
            None => records.entries.is_empty(),
            Some(text) => {
                serde_json::from_str::<Records>(text).is_ok_and(|r| r.entries == records.entries)
            }
        };
        if !unchanged {
            records.save(&dir, read.as_deref())?;
        }
        Ok(results)
    }

    /// Show a path with the home directory as `~` and the project directory as `.`.
    pub fn display_path(&self, path: &Path) -> String {
        display_path(&self.env, path)
    }
}

/// Show a path with the home directory as `~` and the project directory as `.`.
pub fn display_path(env: &Env, path: &Path) -> String {
    if let Ok(rest) = path.strip_prefix(&env.project_dir)
        && env.project_dir != env.home
    {
        return Path::new(".").join(rest).display().to_string();
    }
    if let Ok(rest) = path.strip_prefix(&env.home) {
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
