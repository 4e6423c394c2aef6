//! `mcpwall wrap` and `mcpwall unwrap`, and the report both print (shared with `init`).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use miette::{Context, IntoDiagnostic, miette};

use crate::clients::{
    self, Broken, Client, CommitReport, Committed, ConfigFile, EntryState, Env, FileChange,
    Outcome, Problem, Scope, Selection, Workspace, fsio, record::Records,
};

/// Arguments of `mcpwall wrap`.
#[derive(Debug, clap::Args)]
#[command(group = clap::ArgGroup::new("which").required(true).args(["server_name", "all"]))]
pub struct Args {
    /// The server's name: its key in the client config.
    pub server_name: Option<String>,
    /// Wrap every server that can be wrapped.
    #[arg(long)]
    pub all: bool,
    /// Only this client's files: claude-code, claude-desktop, cursor, windsurf, vscode, zed, codex.
    #[arg(long, value_parser = parse_client)]
    pub client: Option<Client>,
    #[command(flatten)]
    pub file: ClientFileArg,
    /// Write this mcpwall's absolute path even when `mcpwall` is on PATH (for clients that
    /// start servers with a shorter PATH, such as macOS apps opened from the Dock).
    #[arg(long, conflicts_with = "bare_command")]
    pub absolute_path: bool,
    /// Write `mcpwall` (found on PATH) instead of an absolute path; refused unless the
    /// `mcpwall` on PATH is this binary or a byte-identical copy of it.
    #[arg(long)]
    pub bare_command: bool,
    /// Print a unified diff of each file that would change, and change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Also replace a client file that is read-only or has other hard links (which then
    /// no longer share its new text).
    #[arg(long)]
    pub force: bool,
}

/// The client file `wrap` and `unwrap` edit instead of the discovered ones. `-c/--config`
/// names a policy file in every other verb; here `--config` is the old spelling of
/// `--client-file`, kept with a warning: a policy file given to it is never taken for a
/// client file (its name is not a client file's unless `--client` is given, and YAML does
/// not parse as the client's JSON or TOML, so the file is reported and left untouched).
#[derive(Debug, Clone, clap::Args)]
pub struct ClientFileArg {
    /// Edit this client config file instead of the discovered ones.
    #[arg(long, value_name = "FILE", conflicts_with = "config")]
    pub client_file: Option<PathBuf>,
    /// Deprecated spelling of --client-file.
    #[arg(long, value_name = "FILE", hide = true)]
    pub config: Option<PathBuf>,
}

impl ClientFileArg {
    /// The file named, warning once about the old spelling.
    pub fn path(self) -> Option<PathBuf> {
        if self.config.is_some() {
            eprintln!(
                "mcpwall: warning: `--config` of wrap and unwrap is now `--client-file` (`-c/--config` names a policy file everywhere else); the old spelling will go"
            );
        }
        self.client_file.or(self.config)
    }
}

/// Arguments of `mcpwall unwrap`.
#[derive(Debug, clap::Args)]
#[command(group = clap::ArgGroup::new("which").required(true).args(["server_name", "all"]))]
pub struct UnwrapArgs {
    /// The server's name: its key in the client config.
    pub server_name: Option<String>,
    /// Unwrap every wrapped server.
    #[arg(long)]
    pub all: bool,
    /// Only this client's files: claude-code, claude-desktop, cursor, windsurf, vscode, zed, codex.
    #[arg(long, value_parser = parse_client)]
    pub client: Option<Client>,
    #[command(flatten)]
    pub file: ClientFileArg,
    /// Print a unified diff of each file that would change, and change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Also replace a client file that is read-only or has other hard links (which then
    /// no longer share its new text).
    #[arg(long)]
    pub force: bool,
}

pub(crate) fn parse_client(id: &str) -> Result<Client, String> {
    Client::from_id(id).ok_or_else(|| {
        let valid: Vec<_> = Client::ALL.iter().map(|c| c.id()).collect();
        let guess = super::common::did_you_mean(id, &valid)
            .map(|g| format!("did you mean `{g}`? "))
            .unwrap_or_default();
        format!(
            "unknown client `{id}`; {guess}valid clients: {}",
            valid.join(", ")
        )
    })
}

/// The workspace a verb works on: the discovered files, or the one `--config` names.
pub(crate) fn workspace(
    env: Env,
    client: Option<Client>,
    config: Option<PathBuf>,
) -> miette::Result<Workspace> {
    let Some(path) = config else {
        return Ok(Workspace::load(env));
    };
    if !path.is_file() {
        return Err(miette!("{} does not exist", path.display()));
    }
    let client = match client.or_else(|| guess_client(&path)) {
        Some(c) => c,
        None => {
            return Err(miette!(
                help = "pass --client claude-code|claude-desktop|cursor|windsurf|vscode|zed|codex",
                "cannot tell which client {} belongs to",
                path.display()
            ));
        }
    };
    let path = std::path::absolute(&path).into_diagnostic()?;
    let scope = if path.starts_with(&env.project_dir) && env.project_dir != env.home {
        Scope::Project
    } else {
        Scope::User
    };
    Ok(Workspace::load_file(
        env,
        ConfigFile {
            client,
            path,
            scope,
        },
    ))
}

/// A client, from a config file's name and folder.
fn guess_client(path: &std::path::Path) -> Option<Client> {
    let name = path.file_name()?.to_str()?;
    let parent = path
        .parent()
        .and_then(|p| p.file_name())
        .and_then(|n| n.to_str())
        .unwrap_or("");
    match (name, parent) {
        (".claude.json" | ".mcp.json", _) => Some(Client::ClaudeCode),
        ("claude_desktop_config.json", _) => Some(Client::ClaudeDesktop),
        ("mcp_config.json", _) => Some(Client::Windsurf),
        ("mcp.json", ".cursor") => Some(Client::Cursor),
        ("mcp.json", ".vscode" | "User") => Some(Client::VsCode),
        ("settings.json", "zed" | ".zed" | "Zed") => Some(Client::Zed),
        ("config.toml", ".codex") => Some(Client::Codex),
        _ => None,
    }
}

/// The command to write into wrapped entries: `mcpwall` when the one on PATH is this
/// binary, else this binary's absolute path (always with `absolute`); with `bare`,
/// `mcpwall` whenever the one on PATH is this binary or a byte-identical copy.
///
/// Refused when this binary runs from a one-off runner's cache (`npx`, `uvx`, `pipx run`):
/// the path would stop working when that cache is emptied (`clients::install`).
pub(crate) fn wrapper(absolute: bool, bare: bool) -> miette::Result<String> {
    let exe = std::env::current_exe()
        .into_diagnostic()
        .wrap_err("cannot find the running mcpwall binary")?;
    if let Some(runner) = clients::install::one_off_runner(&exe) {
        return Err(miette!(
            help = format!(
                "install it: `{}`, then run this again with the installed mcpwall (docs/install.md)",
                runner.install_command()
            ),
            "nothing was written: this mcpwall runs from {} ({}), and a client config pointing there would stop starting its servers once that copy is gone",
            runner.describe(),
            exe.display()
        ));
    }
    if bare {
        return match same_binary_on_path(&exe) {
            Ok(()) => Ok("mcpwall".to_string()),
            Err(why) => Err(miette!(
                help = "install this mcpwall on your PATH (e.g. `cargo install --path .`), or leave out --bare-command",
                "--bare-command: {why}"
            )),
        };
    }
    let path_var = std::env::var_os("PATH").filter(|_| !absolute);
    Ok(clients::entry::wrapper_command(path_var.as_deref(), &exe))
}

/// Whether `mcpwall` on PATH runs the same program as `exe` (the same file, or a copy
/// with the same bytes); the error says what PATH holds instead.
fn same_binary_on_path(exe: &std::path::Path) -> Result<(), String> {
    let path_var = std::env::var_os("PATH");
    let Some(found) = clients::entry::resolve_on_path("mcpwall", path_var.as_deref(), None) else {
        return Err("there is no `mcpwall` on your PATH".to_string());
    };
    let (found_real, exe_real) = (
        std::fs::canonicalize(&found).ok(),
        std::fs::canonicalize(exe).ok(),
    );
    let same_file = found_real == exe_real;
    // `npm install -g mcpwall-rs`: PATH's `mcpwall` is the launcher that starts this binary.
    let launcher = || match (&found_real, &exe_real) {
        (Some(found), Some(exe)) => clients::install::npm_launcher_runs(found, exe),
        _ => false,
    };
    let same_bytes = || match (std::fs::read(&found), std::fs::read(exe)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    };
    if same_file || launcher() || same_bytes() {
        Ok(())
    } else {
        Err(format!(
            "`mcpwall` on your PATH is {}, a different binary from this one ({})",
            found.display(),
            exe.display()
        ))
    }
}

/// Hold mcpwall's lock for the rest of the run (not for a dry run, which writes nothing
/// and must not create `~/.mcpwall`): runs that edit files take turns, so neither loses
/// the other's change or record.
pub(crate) fn lock(env: &Env, dry_run: bool) -> miette::Result<Option<clients::sys::Lock>> {
    if dry_run {
        return Ok(None);
    }
    clients::fsio::lock(&env.mcpwall_dir())
        .map(Some)
        .into_diagnostic()
        .wrap_err("cannot take mcpwall's lock")
}

pub fn run(args: Args) -> miette::Result<ExitCode> {
    // First: a wrapper that cannot be written ends the run with nothing changed.
    let wrapper = wrapper(args.absolute_path, args.bare_command)?;
    let env = Env::from_process().into_diagnostic()?;
    let _lock = lock(&env, args.dry_run)?;
    let ws = workspace(env, args.client, args.file.path())?;
    let selection = Selection {
        name: if args.all {
            None
        } else {
            args.server_name.clone()
        },
        client: args.client,
    };
    let mut chosen = ws.selected(&selection);
    if args.all {
        // `--all` is about servers that can be wrapped; the rest would be noise.
        chosen.retain(|&(d, s)| wrappable(&ws.docs[d].servers[s].state));
    } else if chosen.is_empty() {
        report_broken(&ws, &mut std::io::stdout().lock());
        return Err(no_such_server(
            &ws,
            args.server_name.as_deref().unwrap_or_default(),
        ));
    }
    let changes = ws.plan_wrap(&chosen, &wrapper);
    finish(&ws, changes, args.dry_run, args.force, Some(&wrapper))
}

/// A server `wrap --all` and `init` offer to wrap: a plain one, or one behind the
/// original mcpwall with only options it documents (moved over with them).
pub(crate) fn wrappable(state: &EntryState) -> bool {
    match state {
        EntryState::Unwrapped { .. } | EntryState::Remote { .. } => true,
        EntryState::WrappedByOriginal { options, .. } => options.unknown.is_empty(),
        _ => false,
    }
}

pub fn run_unwrap(args: UnwrapArgs) -> miette::Result<ExitCode> {
    let env = Env::from_process().into_diagnostic()?;
    let _lock = lock(&env, args.dry_run)?;
    let ws = workspace(env, args.client, args.file.path())?;
    let selection = Selection {
        name: if args.all {
            None
        } else {
            args.server_name.clone()
        },
        client: args.client,
    };
    let mut chosen = ws.selected(&selection);
    if args.all {
        // `--all` is about wrapped servers; listing every other one as "not wrapped" is noise.
        chosen.retain(|&(d, s)| {
            matches!(
                ws.docs[d].servers[s].state,
                EntryState::Wrapped { .. } | EntryState::WrappedRemote { .. }
            )
        });
    } else if chosen.is_empty() {
        report_broken(&ws, &mut std::io::stdout().lock());
        return Err(no_such_server(
            &ws,
            args.server_name.as_deref().unwrap_or_default(),
        ));
    }
    let (records, _) = Records::load(&ws.env.mcpwall_dir()).into_diagnostic()?;
    let changes = ws.plan_unwrap(&chosen, &records);
    finish(&ws, changes, args.dry_run, args.force, None)
}

fn no_such_server(ws: &Workspace, name: &str) -> miette::Report {
    let mut known: Vec<&str> = ws
        .docs
        .iter()
        .flat_map(|d| d.servers.iter().map(|s| s.name.as_str()))
        .collect();
    known.sort_unstable();
    known.dedup();
    let files = ws.docs.len() + ws.broken.len();
    if known.is_empty() {
        miette!(
            help = "add the server to your MCP client first, or name its file with --config",
            "no server named `{name}`: {files} client config file(s) found, none lists a server"
        )
    } else {
        let guess = super::common::did_you_mean(name, &known)
            .map(|g| format!("did you mean `{g}`? "))
            .unwrap_or_default();
        miette!(
            help = format!("{guess}servers found: {}", known.join(", ")),
            "no server named `{name}` in the {files} client config file(s) found"
        )
    }
}

/// How client files are written: `--force`, and the backups `settings.backups` keeps (from
/// the policy as the proxy would load it here; a trusted file sets it). A policy that does
/// not load prunes no backup at all, and says so: its `backups` setting cannot be known.
pub(crate) fn edit_options(env: &Env, force: bool) -> fsio::Options {
    let opts = crate::config::LoadOptions {
        explicit: None,
        home: env.home.clone(),
        project_dir: env.project_dir.clone(),
    };
    let backups = match crate::config::load(&opts) {
        Ok(policy) => fsio::BackupLimits {
            keep: policy.settings.backups.keep as usize,
            max_age: std::time::Duration::from_secs(
                u64::from(policy.settings.backups.max_age_days) * 86_400,
            ),
        },
        Err(_) => {
            eprintln!(
                "mcpwall: warning: the policy does not load (run `mcpwall doctor`), so its `backups` setting is unknown: no old backup is deleted this time"
            );
            fsio::BackupLimits {
                keep: usize::MAX,
                max_age: std::time::Duration::MAX,
            }
        }
    };
    fsio::Options {
        force,
        backups,
        ..fsio::Options::default()
    }
}

/// Write unless `dry_run`, print the report (and diffs with `--dry-run`), pick the exit
/// code. A failure names each file and whether it changed.
pub(crate) fn finish(
    ws: &Workspace,
    changes: Vec<FileChange>,
    dry_run: bool,
    force: bool,
    wrapper: Option<&str>,
) -> miette::Result<ExitCode> {
    let colour = super::common::colour_stdout();
    let mut out = std::io::stdout().lock();
    let mut trouble = report_broken(ws, &mut out);
    let report = if dry_run {
        CommitReport {
            files: changes
                .into_iter()
                .map(|change| Committed {
                    change,
                    result: Ok(None),
                    rolled_back: None,
                })
                .collect(),
            records: None,
        }
    } else {
        ws.commit(changes, edit_options(&ws.env, force))
    };
    let mut wrote = 0;
    for committed in &report.files {
        let change = &committed.change;
        let doc = &ws.docs[change.doc];
        let shown = ws.display_path(&doc.file.path);
        let _ = writeln!(out, "{shown} [{}]", doc.file.client);
        let failed = committed.result.is_err() || matches!(committed.rolled_back, Some(Ok(())));
        for (server, outcome) in &change.outcomes {
            trouble |= matches!(outcome, Outcome::Failed(_));
            let (label, detail) = if failed && change.changes() {
                ("not changed", String::new())
            } else {
                (
                    outcome_label(outcome, dry_run),
                    outcome_detail(server, outcome),
                )
            };
            let _ = writeln!(out, "  {label:<16} {}{detail}", server_label(server));
        }
        if !change.changes() {
            continue;
        }
        if dry_run {
            let diff = clients::unified_diff(
                shown.trim_start_matches("./"),
                &change.before,
                &change.after,
            );
            let _ = write!(out, "{}", super::common::paint_diff(colour, &diff));
            continue;
        }
        match (&committed.result, &committed.rolled_back) {
            (Err(e), _) => {
                trouble = true;
                let _ = writeln!(out, "  error: {e}; the file was left as it was");
            }
            (Ok(_), Some(Ok(()))) => {
                trouble = true;
                let _ = writeln!(out, "  rolled back: the file is as it was before this run");
            }
            (Ok(_), Some(Err(e))) => {
                trouble = true;
                let _ = writeln!(
                    out,
                    "  error: could not roll back: {e}; the file keeps this run's change"
                );
            }
            (Ok(written), None) => {
                wrote += 1;
                if let Some(links) = written.as_ref().and_then(|w| w.split_links) {
                    let _ = writeln!(
                        out,
                        "  note: it had {links} hard links; the other names keep the old text (--force)"
                    );
                }
            }
        }
    }
    if let Some(e) = &report.records {
        trouble = true;
        let _ = writeln!(
            out,
            "error: {e}; every file this run changed was put back (see above), and no backup was kept"
        );
    }
    let changes: Vec<&FileChange> = report.files.iter().map(|c| &c.change).collect();
    let shared: Vec<String> = changes
        .iter()
        .filter(|c| ws.docs[c.doc].file.scope == Scope::Project)
        .filter(|c| c.outcomes.iter().any(|(_, o)| *o == Outcome::Wrapped))
        .map(|c| ws.display_path(&ws.docs[c.doc].file.path))
        .collect();
    if !shared.is_empty() {
        let _ = writeln!(
            out,
            "note: {} usually committed to the repository; teammates without mcpwall on their PATH cannot start the wrapped servers",
            if shared.len() == 1 {
                format!("{} is a project file,", shared[0])
            } else {
                format!("{} are project files,", shared.join(", "))
            }
        );
    }
    if let Some(wrapper) = wrapper.filter(|w| std::path::Path::new(w).is_absolute()) {
        warn_absolute_in_project_files(ws, &changes, wrapper, dry_run);
    }
    if dry_run {
        let _ = writeln!(out, "dry run: nothing was written");
    } else if wrote > 0 && report.records.is_none() {
        let backups = ws.display_path(&ws.env.mcpwall_dir().join("backups"));
        let _ = writeln!(
            out,
            "changed {wrote} file(s); backups in {backups}; restart your MCP clients to apply"
        );
    } else if report.ok() {
        let _ = writeln!(out, "nothing to change");
    } else {
        let _ = writeln!(out, "no file was changed");
    }
    Ok(if trouble {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// An absolute path to this binary goes into a project file, which is usually committed:
/// on a teammate's machine (or after a rebuild elsewhere) it names nothing. Say so, naming
/// the file, and how to write `mcpwall` instead.
fn warn_absolute_in_project_files(
    ws: &Workspace,
    changes: &[&FileChange],
    wrapper: &str,
    dry_run: bool,
) {
    let files: Vec<String> = changes
        .iter()
        .filter(|c| ws.docs[c.doc].file.scope == Scope::Project)
        .filter(|c| {
            c.outcomes.iter().any(|(_, o)| {
                matches!(
                    o,
                    Outcome::Wrapped | Outcome::Migrated(_) | Outcome::Repointed(_)
                )
            })
        })
        .map(|c| ws.display_path(&ws.docs[c.doc].file.path))
        .collect();
    if files.is_empty() {
        return;
    }
    let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from(wrapper));
    let how = match same_binary_on_path(&exe) {
        Ok(()) => "`mcpwall` on your PATH is this same binary: run again with --bare-command to write `mcpwall` instead".to_string(),
        Err(why) => format!(
            "{why}; install this mcpwall on your PATH, then run again with --bare-command to write `mcpwall` instead"
        ),
    };
    eprintln!(
        "mcpwall: warning: {} {} mcpwall by its absolute path {wrapper}; {} usually committed, and that path exists only on this machine\n  fix: {how}",
        files.join(", "),
        match (dry_run, files.len()) {
            (true, _) => "would start",
            (false, 1) => "now starts",
            (false, _) => "now start",
        },
        if files.len() == 1 {
            "a project file is"
        } else {
            "project files are"
        }
    );
}

/// List files that could not be read; returns whether there were any.
pub(crate) fn report_broken(ws: &Workspace, out: &mut impl Write) -> bool {
    for Broken { file, problem } in &ws.broken {
        let shown = ws.display_path(&file.path);
        let _ = match problem {
            Problem::Syntax(e) => writeln!(
                out,
                "{shown}:{}:{} [{}]\n  error: not valid {}: {}; left untouched",
                e.line,
                e.column,
                file.client,
                file.client.syntax(),
                e.message
            ),
            Problem::Io(e) => writeln!(
                out,
                "{shown} [{}]\n  error: cannot read it: {e}; left untouched",
                file.client
            ),
        };
    }
    !ws.broken.is_empty()
}

pub(crate) fn server_label(server: &clients::Server) -> String {
    match &server.project {
        Some(project) => format!("{} (project {project})", server.name),
        None => server.name.clone(),
    }
}

fn outcome_label(outcome: &Outcome, dry_run: bool) -> &'static str {
    if dry_run {
        let would = match outcome {
            Outcome::Wrapped => Some("would wrap"),
            Outcome::Migrated(_) => Some("would migrate"),
            Outcome::Repointed(_) => Some("would re-point"),
            Outcome::Restored | Outcome::RestoredKeepingEdits => Some("would restore"),
            Outcome::NoLongerWrapped => Some("would drop record"),
            Outcome::Unwrapped => Some("would unwrap"),
            _ => None,
        };
        if let Some(label) = would {
            return label;
        }
    }
    match outcome {
        Outcome::Wrapped => "wrapped",
        Outcome::Migrated(_) => "migrated",
        Outcome::AlreadyWrapped => "already wrapped",
        Outcome::Repointed(_) => "re-pointed",
        Outcome::Restored => "restored",
        Outcome::NoLongerWrapped => "left as it is",
        Outcome::RestoredKeepingEdits => "restored",
        Outcome::Unwrapped => "unwrapped",
        Outcome::NotWrapped => "not wrapped",
        Outcome::Skipped(_) => "skipped",
        Outcome::Failed(_) => "failed",
    }
}

fn outcome_detail(server: &clients::Server, outcome: &Outcome) -> String {
    match outcome {
        Outcome::Skipped(why) | Outcome::Failed(why) => format!(": {why}"),
        Outcome::Repointed(old) => format!(": `{old}` no longer exists; now behind this mcpwall"),
        Outcome::Migrated(options) => {
            let mut detail = format!(
                ": was behind the original mcpwall (Node), now behind this one ({} kept",
                options.describe()
            );
            if options.strict {
                detail.push_str("; --strict changes nothing here: malformed lines are always refused");
            }
            detail.push_str("); `mcpwall unwrap` puts the original's wrapper back");
            detail
        }
        Outcome::RestoredKeepingEdits if matches!(server.state, EntryState::WrappedRemote { .. }) => {
            ": made a remote entry again from the entry as it is now; your later edits to it were kept".into()
        }
        Outcome::RestoredKeepingEdits => {
            ": mcpwall's prefix taken off; your later edits to the entry were kept".into()
        }
        Outcome::NoLongerWrapped => {
            ": it no longer runs behind mcpwall (replaced since it was wrapped?); its old wrap record was dropped".into()
        }
        Outcome::Unwrapped if matches!(server.state, EntryState::WrappedRemote { .. }) => {
            ": no wrap record, so the remote entry was made again from its `--upstream` URL and header lines".into()
        }
        Outcome::Unwrapped => {
            ": no wrap record, so the command after `--` was made the command again".into()
        }
        _ => match &server.state {
            EntryState::Unwrapped { command, args }
            | EntryState::Wrapped { command, args, .. }
            | EntryState::WrappedByOriginal { command, args, .. } => {
                format!("  {}", clients::command_line(command, args))
            }
            // Codex's server map: its tokens are named in `bearer_token_env_var`.
            EntryState::Remote { headers, .. }
                if *outcome == Outcome::Wrapped
                    && headers.is_empty()
                    && server.path.first().map(String::as_str) == Some("mcp_servers") =>
            {
                format!(
                    "  {}; note: it sends no headers now, so a server that signs in through Codex (OAuth, `codex mcp login`) will refuse the bridge: then `mcpwall unwrap {}`, name the token's variable in `bearer_token_env_var`, and wrap it again",
                    server.state.remote_line().unwrap_or_default(),
                    server.name
                )
            }
            EntryState::Remote { headers, .. }
                if *outcome == Outcome::Wrapped && headers.is_empty() =>
            {
                format!(
                    "  {}; note: it sends no headers now, so a server that signs in through your client (OAuth) will refuse the bridge: then add its token as `headers` or $MCPWALL_UPSTREAM_TOKEN, or `mcpwall unwrap {}`",
                    server.state.remote_line().unwrap_or_default(),
                    server.name
                )
            }
            EntryState::Remote { .. } | EntryState::WrappedRemote { .. } => {
                format!("  {}", server.state.remote_line().unwrap_or_default())
            }
            EntryState::Skipped(_) => String::new(),
        },
    }
}
