//! `mcpwall status` (which servers are protected, by which policy) and `mcpwall doctor`
//! (the setup checked end to end, with what to fix).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use miette::IntoDiagnostic;

use super::common::{OutputFormat, sgr};
use super::wrap::{report_broken, server_label};
use crate::clients::{
    self, Client, ConfigFile, Doc, EntryState, Env, Problem, Scope, Server, Workspace,
    entry::resolve_on_path, record::Records,
};

/// Arguments of `mcpwall status`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// `text`, or `json` for scripts: every file and server with its state and detail.
    #[arg(long, value_enum, default_value_t)]
    pub format: OutputFormat,
}

/// Arguments of `mcpwall doctor`.
#[derive(Debug, clap::Args)]
pub struct DoctorArgs {
    /// `text`, or `json` for scripts: every check with its status, detail and fix.
    #[arg(long, value_enum, default_value_t)]
    pub format: OutputFormat,
}

/// The directory a client starts a server in, where the proxy looks for `.mcpwall.yml`:
/// the project of a project file (or of a `~/.claude.json` local entry), else home.
fn server_dir(env: &Env, doc: &Doc, server: &Server) -> PathBuf {
    match &server.project {
        Some(p) => PathBuf::from(p),
        None => doc
            .file
            .project_dir(env)
            .unwrap_or_else(|| env.home.clone()),
    }
}

/// The policy file given with `-c FILE`, `--config FILE` or `--config=FILE` among a
/// wrapped entry's mcpwall options.
fn explicit_policy(options: &[String]) -> Option<&str> {
    for (i, option) in options.iter().enumerate() {
        if let Some(file) = option.strip_prefix("--config=") {
            return Some(file);
        }
        if option == "-c" || option == "--config" {
            return options.get(i + 1).map(String::as_str);
        }
    }
    None
}

/// Whether the policy each wrapped entry will start under loads and compiles, as the
/// proxy will load it there: its `-c` file, or the project's and the user's files. Each
/// distinct policy is loaded once.
#[derive(Default)]
struct PolicyCheck {
    seen: std::collections::HashMap<(Option<PathBuf>, PathBuf, bool), Result<String, String>>,
}

impl PolicyCheck {
    /// How the server will be sandboxed, in words; `Err(why)` when the server cannot start
    /// because of its policy (or of a required sandbox this machine cannot apply).
    fn verify(&mut self, env: &Env, doc: &Doc, server: &Server) -> Result<String, String> {
        let (EntryState::Wrapped { options, .. } | EntryState::WrappedRemote { options, .. }) =
            &server.state
        else {
            return Ok(String::new());
        };
        // A bridge to a remote server starts no local process: there is nothing to sandbox.
        let sandboxed = matches!(server.state, EntryState::Wrapped { .. });
        let dir = server_dir(env, doc, server);
        let explicit = explicit_policy(options).map(|f| dir.join(f));
        self.seen
            .entry((explicit.clone(), dir.clone(), sandboxed))
            .or_insert_with(|| load_policy(env, explicit, dir, sandboxed))
            .clone()
    }
}

fn load_policy(
    env: &Env,
    explicit: Option<PathBuf>,
    project_dir: PathBuf,
    sandboxed: bool,
) -> Result<String, String> {
    if let Some(file) = &explicit
        && !file.is_file()
    {
        return Err(format!(
            "its policy file {} (`-c`) does not exist",
            clients::display_path(env, file)
        ));
    }
    let opts = crate::config::LoadOptions {
        explicit,
        home: env.home.clone(),
        project_dir,
    };
    let policy = crate::config::load(&opts)
        .map_err(|e| format!("its policy does not load: {}", describe(&e, env)))?;
    let path_env = opts.path_env();
    crate::program::Program::compile_with(&policy, &path_env)
        .map_err(|e| format!("its policy does not compile: {}", describe(&e, env)))?;
    if !sandboxed {
        return Ok(String::new());
    }
    sandbox_state(&policy, &opts)
}

/// A wrapped server's sandbox, in words, as it would start from `opts`' directory on this
/// machine; `Err` when `required` and this machine cannot apply all of it.
fn sandbox_state(
    policy: &crate::config::Policy,
    opts: &crate::config::LoadOptions,
) -> Result<String, String> {
    use crate::sandbox::{Place, Plan, Support};
    let place = Place::for_server(
        &opts.home,
        &opts.project_dir,
        policy.settings.log_dir.as_deref(),
        opts.explicit.as_deref(),
    );
    let Some(plan) = Plan::resolve(&policy.sandbox, &place) else {
        return Ok("sandbox: OFF".into());
    };
    let gaps = Support::probe().shortfalls(&plan);
    match (gaps.is_empty(), plan.required) {
        (true, _) => Ok(format!(
            "sandbox: on{}",
            if plan.required { " (required)" } else { "" }
        )),
        (false, false) => Ok(format!("sandbox: PARTIAL ({})", gaps.join("; "))),
        (false, true) => Err(format!(
            "its policy requires a sandbox and {}",
            gaps.join("; ")
        )),
    }
}

/// The policy files a wrapped server runs under, most specific first.
fn policy_files(env: &Env, doc: &Doc, server: &Server) -> Vec<String> {
    if let EntryState::WrappedByOriginal { options, .. } = &server.state
        && let Some(file) = &options.config
    {
        return vec![file.clone()];
    }
    if let EntryState::Wrapped { options, .. } | EntryState::WrappedRemote { options, .. } =
        &server.state
        && let Some(file) = explicit_policy(options)
    {
        return vec![file.to_string()];
    }
    let mut files = Vec::new();
    let project = match &server.project {
        Some(p) => Some(PathBuf::from(p)),
        None => doc.file.project_dir(env),
    };
    if let Some(project) = project {
        let file = project.join(".mcpwall.yml");
        if file.is_file() {
            files.push(clients::display_path(env, &file));
        }
    }
    let user = if matches!(server.state, EntryState::WrappedByOriginal { .. }) {
        env.mcpwall_dir().join(crate::config::SHARED_USER_FILE)
    } else {
        crate::config::user_file_in(&env.mcpwall_dir())
    };
    if user.is_file() {
        files.push(clients::display_path(env, &user));
    }
    if files.is_empty() {
        files.push("built-in default pack".to_string());
    }
    files
}

/// Why a server the original mcpwall (Node) still wraps cannot start, and the fix: each
/// policy file it reads there (its `-c` file, else the project's `.mcpwall.yml` and
/// `~/.mcpwall/config.yml`), checked the way it loads them ([`crate::config::original`]).
fn original_cannot_start(env: &Env, doc: &Doc, server: &Server) -> Option<(String, String)> {
    let EntryState::WrappedByOriginal { options, .. } = &server.state else {
        return None;
    };
    let dir = server_dir(env, doc, server);
    let move_it = || format!("`mcpwall wrap {}` moves it to this mcpwall", server.name);
    let files = match &options.config {
        Some(file) => {
            let path = dir.join(file);
            if !path.is_file() {
                return Some((
                    format!(
                        "its policy file {} (`-c`) does not exist",
                        clients::display_path(env, &path)
                    ),
                    format!("create it, or {}", move_it()),
                ));
            }
            vec![path]
        }
        None => vec![
            dir.join(crate::config::PROJECT_FILE),
            env.mcpwall_dir().join(crate::config::SHARED_USER_FILE),
        ],
    };
    for path in files {
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let Some(why) = crate::config::original::rejects(&text) else {
            continue;
        };
        let shown = clients::display_path(env, &path);
        let shared = options.config.is_none()
            && path == env.mcpwall_dir().join(crate::config::SHARED_USER_FILE);
        let own = env.mcpwall_dir().join(crate::config::OWN_USER_FILE);
        let fix = if shared && !own.exists() {
            format!(
                "`mv {shown} {}` (this mcpwall reads that file first; the original then uses its built-in rules), or {}",
                clients::display_path(env, &own),
                move_it()
            )
        } else {
            format!("make {shown} loadable by the original, or {}", move_it())
        };
        return Some((
            format!("the original mcpwall (Node) cannot load {shown}: {why}"),
            fix,
        ));
    }
    None
}

pub fn run(args: Args) -> miette::Result<ExitCode> {
    let Args { format } = args;
    let json = format == OutputFormat::Json;
    let env = Env::from_process().into_diagnostic()?;
    let ws = Workspace::load(env);
    let colour = super::common::colour_stdout() && !json;
    let label = |text: &str, code: &str| super::common::paint(colour, code, &format!("{text:<12}"));
    // JSON: the text goes nowhere, and each server's row is kept instead.
    let mut text: Box<dyn Write> = if json {
        Box::new(std::io::sink())
    } else {
        Box::new(std::io::stdout().lock())
    };
    let out = &mut text;
    let mut rows: Vec<serde_json::Value> = Vec::new();
    let broken_files: Vec<serde_json::Value> = ws
        .broken
        .iter()
        .map(|b| {
            let problem = match &b.problem {
                Problem::Syntax(e) => format!(
                    "{}:{}: not valid {}: {}",
                    e.line,
                    e.column,
                    b.file.client.syntax(),
                    e.message
                ),
                Problem::Io(e) => format!("cannot read it: {e}"),
            };
            serde_json::json!({
                "file": ws.display_path(&b.file.path),
                "client": b.file.client.id(),
                "problem": problem,
            })
        })
        .collect();
    let broken = report_broken(&ws, out);
    let mut policies = PolicyCheck::default();
    let (mut protected, mut total, mut cannot_start, mut unprotected) = (0, 0, 0, 0);
    for doc in &ws.docs {
        let _ = writeln!(
            out,
            "{} [{}]",
            ws.display_path(&doc.file.path),
            doc.file.client
        );
        if doc.servers.is_empty() {
            let _ = writeln!(out, "  (no servers)");
        }
        for server in &doc.servers {
            total += 1;
            let verified = policies.verify(&ws.env, doc, server);
            let cannot = verified.as_ref().err().cloned();
            let sandbox = verified.unwrap_or_default();
            let original_broken = original_cannot_start(&ws.env, doc, server);
            let line = match &server.state {
                EntryState::WrappedByOriginal { command, args, .. }
                    if original_broken.is_some() =>
                {
                    cannot_start += 1;
                    let (why, fix) = original_broken.clone().unwrap_or_default();
                    format!(
                        "{} {}  {}  cannot start: {why}  (fix: {fix})",
                        label("BROKEN", sgr::RED),
                        server_label(server),
                        clients::command_line(command, args),
                    )
                }
                EntryState::WrappedRemote { .. } if cannot.is_some() => {
                    cannot_start += 1;
                    format!(
                        "{} {}  {}  cannot start: {}  (run `mcpwall doctor`)",
                        label("BROKEN", sgr::RED),
                        server_label(server),
                        server.state.remote_line().unwrap_or_default(),
                        cannot.as_deref().unwrap_or_default()
                    )
                }
                EntryState::WrappedRemote { .. } => {
                    protected += 1;
                    // No server process runs here, so there is nothing to sandbox.
                    format!(
                        "{} {}  {}  policy: {}",
                        label("protected", sgr::GREEN),
                        server_label(server),
                        server.state.remote_line().unwrap_or_default(),
                        policy_files(&ws.env, doc, server).join(" + "),
                    )
                }
                EntryState::Remote { .. } => {
                    unprotected += 1;
                    format!(
                        "{} {}  {}  (run `mcpwall wrap {}`: it becomes a stdio entry running `mcpwall --upstream`, headers kept)",
                        label("UNPROTECTED", sgr::RED),
                        server_label(server),
                        server.state.remote_line().unwrap_or_default(),
                        server.name
                    )
                }
                EntryState::Wrapped { command, args, .. } if cannot.is_some() => {
                    cannot_start += 1;
                    let why = cannot.as_deref().unwrap_or_default();
                    format!(
                        "{} {}  {}  cannot start: {why}  (run `mcpwall doctor`)",
                        label("BROKEN", sgr::RED),
                        server_label(server),
                        clients::command_line(command, args),
                    )
                }
                EntryState::Wrapped { command, args, .. }
                    if clients::entry::original_inside(command, args).is_some() =>
                {
                    protected += 1;
                    format!(
                        "{} {}  {}  WRAPPED TWICE: this mcpwall runs the original mcpwall (Node), so every frame passes both (run `mcpwall unwrap {}`, then `mcpwall wrap {}`, to keep only this one)",
                        label("protected", sgr::YELLOW),
                        server_label(server),
                        clients::command_line(command, args),
                        server.name,
                        server.name
                    )
                }
                EntryState::Wrapped { command, args, .. } => {
                    protected += 1;
                    format!(
                        "{} {}  {}  policy: {}; {}",
                        label("protected", sgr::GREEN),
                        server_label(server),
                        clients::command_line(command, args),
                        policy_files(&ws.env, doc, server).join(" + "),
                        sandbox
                    )
                }
                EntryState::WrappedByOriginal {
                    options,
                    command,
                    args,
                    ..
                } => {
                    protected += 1;
                    format!(
                        "{} {}  {}  protected by the original mcpwall (Node), {}; policy: {}  ({})",
                        label("protected", sgr::GREEN),
                        server_label(server),
                        clients::command_line(command, args),
                        original_options_summary(options),
                        policy_files(&ws.env, doc, server).join(" + "),
                        options.migration_hint(&server.name)
                    )
                }
                EntryState::Unwrapped { command, args } => {
                    unprotected += 1;
                    format!(
                        "{} {}  {}  (run `mcpwall wrap {}`)",
                        label("UNPROTECTED", sgr::RED),
                        server_label(server),
                        clients::command_line(command, args),
                        server.name
                    )
                }
                EntryState::Skipped(why) => {
                    format!(
                        "{} {}  {why}",
                        label("skipped", sgr::DIM),
                        server_label(server)
                    )
                }
            };
            let _ = writeln!(out, "  {}", line.trim_end());
            rows.push(serde_json::json!({
                "file": ws.display_path(&doc.file.path),
                "client": doc.file.client.id(),
                "server": server.name,
                "state": row_state(server, original_broken.is_some() || cannot.is_some()),
                "sandbox": matches!(server.state, EntryState::Wrapped { .. })
                    .then_some(&sandbox),
                "line": strip_sgr(line.trim_end()),
            }));
        }
    }
    let _ = writeln!(
        out,
        "kernel sandbox: {}",
        crate::sandbox::Support::probe().summary()
    );
    let _ = writeln!(
        out,
        "{protected} of {total} server(s) protected in {} file(s){}",
        ws.docs.len(),
        if cannot_start > 0 {
            format!("; {cannot_start} wrapped server(s) cannot start (run `mcpwall doctor`)")
        } else {
            String::new()
        }
    );
    drop(text);
    if json {
        super::common::print_json(&serde_json::json!({
            "servers": rows,
            "broken_files": broken_files,
            "protected": protected,
            "total": total,
            "cannot_start": cannot_start,
            "unprotected": unprotected,
            "kernel_sandbox": crate::sandbox::Support::probe().summary(),
        }));
    }
    // Scripts check this: 1 while any server found is unprotected or cannot start.
    Ok(if broken || cannot_start > 0 || unprotected > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// A server's state for `status --format json`: `protected`, `protected_by_original`,
/// `broken`, `unprotected` or `skipped`.
fn row_state(server: &Server, cannot_start: bool) -> &'static str {
    match &server.state {
        _ if cannot_start => "broken",
        EntryState::Wrapped { .. } | EntryState::WrappedRemote { .. } => "protected",
        EntryState::WrappedByOriginal { .. } => "protected_by_original",
        EntryState::Unwrapped { .. } | EntryState::Remote { .. } => "unprotected",
        EntryState::Skipped(_) => "skipped",
    }
}

/// `text` without the colour escapes `paint` added.
fn strip_sgr(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("\x1b[") {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        match rest.find('m') {
            Some(end) => rest = &rest[end + 1..],
            None => break,
        }
    }
    out.push_str(rest);
    out
}

/// The original's options as `status` and `doctor` explain them.
fn original_options_summary(options: &clients::entry::OriginalOptions) -> String {
    let mut parts = Vec::new();
    if let Some(file) = &options.config {
        parts.push(format!("-c {file} (exactly that policy file)"));
    }
    if let Some(level) = &options.log_level {
        parts.push(format!("--log-level {level}"));
    }
    if options.strict {
        parts.push("--strict (malformed lines refused; this mcpwall always refuses them)".into());
    }
    if !options.unknown.is_empty() {
        parts.push(format!(
            "options it does not document: {}",
            options.unknown.join(" ")
        ));
    }
    if parts.is_empty() {
        "no options".to_string()
    } else {
        parts.join(", ")
    }
}

/// How a check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Fine.
    Ok,
    /// Works, but worth a look.
    Warn,
    /// Broken: mcpwall or a server will not work as intended.
    Fail,
}

/// One finding of `doctor`.
#[derive(Debug, Clone)]
pub struct Check {
    /// What was checked.
    pub name: String,
    /// The result.
    pub status: Status,
    /// What was found.
    pub detail: String,
    /// What to do about it, when something is wrong.
    pub fix: Option<String>,
}

impl Check {
    fn ok(name: impl Into<String>, detail: impl Into<String>) -> Check {
        Check {
            name: name.into(),
            status: Status::Ok,
            detail: detail.into(),
            fix: None,
        }
    }

    fn bad(
        status: Status,
        name: impl Into<String>,
        detail: impl Into<String>,
        fix: impl Into<String>,
    ) -> Check {
        Check {
            name: name.into(),
            status,
            detail: detail.into(),
            fix: Some(fix.into()),
        }
    }
}

pub fn run_doctor(args: DoctorArgs) -> miette::Result<ExitCode> {
    let DoctorArgs { format } = args;
    let env = Env::from_process().into_diagnostic()?;
    let ws = Workspace::load(env);
    let path_var = std::env::var_os("PATH");
    let mut checks = Vec::new();
    let log_dir = match check_policy(&ws.env) {
        Ok((check, log_dir)) => {
            checks.push(check);
            log_dir
        }
        Err(check) => {
            checks.push(check);
            None
        }
    };
    checks.push(check_log_dir(
        &log_dir.unwrap_or_else(|| ws.env.mcpwall_dir().join("logs")),
        &ws.env,
    ));
    checks.push(check_sandbox());
    checks.extend(check_client_files(&ws));
    checks.extend(check_servers(&ws, path_var.as_deref()));
    checks.extend(check_records(&ws));

    let failed = checks.iter().filter(|c| c.status == Status::Fail).count();
    let warned = checks.iter().filter(|c| c.status == Status::Warn).count();
    let code = if failed > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    };
    if format == OutputFormat::Json {
        let rows: Vec<serde_json::Value> = checks
            .iter()
            .map(|c| {
                serde_json::json!({
                    "name": c.name,
                    "status": match c.status {
                        Status::Ok => "ok",
                        Status::Warn => "warn",
                        Status::Fail => "fail",
                    },
                    "detail": c.detail,
                    "fix": c.fix,
                })
            })
            .collect();
        super::common::print_json(&serde_json::json!({
            "checks": rows,
            "failed": failed,
            "warnings": warned,
        }));
        return Ok(code);
    }
    let colour = super::common::colour_stdout();
    let mut out = std::io::stdout().lock();
    for check in &checks {
        let mark = match check.status {
            Status::Ok => super::common::paint(colour, sgr::GREEN, "ok  "),
            Status::Warn => super::common::paint(colour, sgr::YELLOW, "warn"),
            Status::Fail => super::common::paint(colour, sgr::RED, "FAIL"),
        };
        let _ = writeln!(out, "{mark}  {}: {}", check.name, check.detail);
        if let Some(fix) = &check.fix {
            let _ = writeln!(out, "      fix: {fix}");
        }
    }
    let _ = writeln!(
        out,
        "{} check(s): {failed} failed, {warned} warning(s)",
        checks.len()
    );
    Ok(code)
}

/// The kernel sandbox works here: a hidden directory is really unreadable to a process
/// started through the helper.
fn check_sandbox() -> Check {
    let support = crate::sandbox::Support::probe();
    match crate::sandbox::self_test() {
        Ok(()) => Check::ok(
            "sandbox",
            format!("{}; a hidden file was unreadable", support.summary()),
        ),
        Err(why) => Check::bad(
            Status::Warn,
            "sandbox",
            format!("{}: {why}", support.summary()),
            if cfg!(windows) {
                "servers run unsandboxed on Windows: keep the default pack's rules on"
            } else {
                "allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1 \
                 or, on Ubuntu, an AppArmor profile for mcpwall), or run on a kernel with Landlock"
            },
        ),
    }
}

/// The policy loads and compiles; returns the configured log directory too.
fn check_policy(env: &Env) -> Result<(Check, Option<PathBuf>), Check> {
    let opts = crate::config::LoadOptions {
        explicit: None,
        home: env.home.clone(),
        project_dir: env.project_dir.clone(),
    };
    let fix = "run `mcpwall explain-policy` to see every problem with its file and line";
    let policy = crate::config::load(&opts).map_err(|e| {
        Check::bad(
            Status::Fail,
            "policy",
            format!("does not load: {}", describe(&e, env)),
            fix,
        )
    })?;
    let path_env = opts.path_env();
    let program = crate::program::Program::compile_with(&policy, &path_env).map_err(|e| {
        Check::bad(
            Status::Fail,
            "policy",
            format!("does not compile: {}", describe(&e, env)),
            fix,
        )
    })?;
    let has_default_pack = policy.sources.iter().any(|s| {
        s.kind == crate::config::policy::SourceKind::Builtin
            && s.name.ends_with(crate::config::DEFAULT_PACK)
    });
    if !has_default_pack {
        return Err(Check::bad(
            Status::Warn,
            "policy",
            "loads and compiles, but does not include the built-in default pack",
            "add `default` to `extends:` in your policy file (`mcpwall init` writes it so)",
        ));
    }
    let sources: Vec<_> = policy
        .sources
        .iter()
        .filter(|s| s.kind != crate::config::policy::SourceKind::Builtin)
        .map(|s| clients::display_path(env, Path::new(&s.name)))
        .collect();
    let check = Check::ok(
        "policy",
        format!(
            "loads and compiles ({} inbound and {} outbound rule(s) from {})",
            policy.rules.len(),
            policy.outbound_rules.len(),
            if sources.is_empty() {
                "the built-in default pack".to_string()
            } else {
                format!("{} and built-in packs", sources.join(", "))
            }
        ),
    );
    Ok((check, program.settings().log_dir.clone()))
}

/// The first problems of a policy error, each as `file:line:col: message`.
fn describe(error: &crate::config::PolicyError, env: &Env) -> String {
    const SHOWN: usize = 3;
    let mut parts: Vec<String> = error
        .diagnostics
        .iter()
        .take(SHOWN)
        .map(|d| match &d.location {
            Some((file, line, column)) => format!(
                "{}:{line}:{column}: {}",
                clients::display_path(env, Path::new(file)),
                d.message
            ),
            None => d.message.clone(),
        })
        .collect();
    if error.diagnostics.len() > SHOWN {
        parts.push(format!("and {} more", error.diagnostics.len() - SHOWN));
    }
    if parts.is_empty() {
        error.to_string()
    } else {
        parts.join("; ")
    }
}

/// The audit log directory exists (or can be made) and takes a new file.
fn check_log_dir(dir: &Path, env: &Env) -> Check {
    let shown = clients::display_path(env, dir);
    let probe = dir.join(format!(".mcpwall-doctor-{}", std::process::id()));
    // Created owner-only, as every verb creates mcpwall's directories; the probe is created
    // exclusively, so a name planted there is never written through.
    let result = clients::fsio::private_dir(dir)
        .map_err(|e| std::io::Error::other(e.to_string()))
        .and_then(|()| clients::sys::create_exclusive(&probe))
        .and_then(|mut f| std::io::Write::write_all(&mut f, b"probe"))
        .and_then(|()| std::fs::remove_file(&probe));
    match result {
        Ok(()) => Check::ok("log directory", format!("{shown} is writable")),
        Err(e) => Check::bad(
            Status::Fail,
            "log directory",
            format!("{shown} is not writable: {e}"),
            format!("create {shown} and make it writable by you, or set `log_dir` in your policy"),
        ),
    }
}

fn check_client_files(ws: &Workspace) -> Vec<Check> {
    let mut checks: Vec<Check> = ws
        .broken
        .iter()
        .map(|b| {
            let shown = ws.display_path(&b.file.path);
            match &b.problem {
                Problem::Syntax(e) => Check::bad(
                    Status::Fail,
                    format!("{} config", b.file.client),
                    format!(
                        "{shown}:{}:{}: not valid {}: {}",
                        e.line,
                        e.column,
                        b.file.client.syntax(),
                        e.message
                    ),
                    format!(
                        "fix {shown} at line {}, column {} (mcpwall does not edit it until then)",
                        e.line, e.column
                    ),
                ),
                Problem::Io(e) => Check::bad(
                    Status::Fail,
                    format!("{} config", b.file.client),
                    format!("{shown}: cannot read it: {e}"),
                    format!("make {shown} readable"),
                ),
            }
        })
        .collect();
    if ws.docs.is_empty() && ws.broken.is_empty() {
        checks.push(Check::bad(
            Status::Warn,
            "client configs",
            "no MCP client config file found",
            "add a server to your MCP client, then run `mcpwall init`",
        ));
    } else if !ws.docs.is_empty() {
        checks.push(Check::ok(
            "client configs",
            format!("{} file(s) read", ws.docs.len()),
        ));
    }
    checks
}

fn check_servers(ws: &Workspace, path_var: Option<&std::ffi::OsStr>) -> Vec<Check> {
    let mut checks = Vec::new();
    let mut policies = PolicyCheck::default();
    for doc in &ws.docs {
        let shown = ws.display_path(&doc.file.path);
        for server in &doc.servers {
            let name = format!("{}/{}", doc.file.client, server_label(server));
            let cwd = server_dir(&ws.env, doc, server);
            // What every wrapped entry needs, stdio or remote: its mcpwall command found
            // and its policy loading.
            let mut wrapper_problem = |wrapper: &str| {
                if resolve_on_path(wrapper, path_var, Some(&cwd)).is_none() {
                    Some(Check::bad(
                        Status::Fail,
                        name.clone(),
                        format!("the mcpwall command `{wrapper}` in {shown} is not found"),
                        format!(
                            "run `mcpwall wrap {}` to point it at this mcpwall",
                            server.name
                        ),
                    ))
                } else if let Err(why) = policies.verify(&ws.env, doc, server) {
                    Some(Check::bad(
                        Status::Fail,
                        name.clone(),
                        format!("cannot start: {why} ({shown})"),
                        "fix the policy (`mcpwall explain-policy -c FILE` shows every problem with its line), or point `-c` in the entry at a file that exists",
                    ))
                } else {
                    None
                }
            };
            match &server.state {
                EntryState::Wrapped {
                    wrapper,
                    command,
                    args,
                    ..
                } => {
                    if let Some(problem) = wrapper_problem(wrapper) {
                        checks.push(problem);
                    } else if clients::entry::original_inside(command, args).is_some() {
                        checks.push(Check::bad(
                            Status::Warn,
                            name,
                            format!(
                                "wrapped twice in {shown}: this mcpwall runs the original mcpwall (Node), so every frame passes both firewalls"
                            ),
                            format!(
                                "`mcpwall unwrap {}` then `mcpwall wrap {}` leave only this mcpwall (the original's options carried over)",
                                server.name, server.name
                            ),
                        ));
                    } else if resolve_on_path(command, path_var, Some(&cwd)).is_none() {
                        checks.push(Check::bad(
                            Status::Fail,
                            name,
                            format!("the server command `{command}` is not found on PATH"),
                            format!(
                                "install it, or put its absolute path in {shown} (clients may start servers with a shorter PATH than your shell's)"
                            ),
                        ));
                    } else {
                        checks.push(Check::ok(name, format!("protected; `{command}` found")));
                    }
                }
                EntryState::WrappedRemote { wrapper, .. } => {
                    let what = server.state.remote_line().unwrap_or_default();
                    match wrapper_problem(wrapper) {
                        Some(problem) => checks.push(problem),
                        None => checks.push(Check::ok(name, format!("protected; {what}"))),
                    }
                }
                EntryState::Remote { .. } => checks.push(Check::bad(
                    Status::Warn,
                    name,
                    format!(
                        "not protected by mcpwall: {} ({shown})",
                        server.state.remote_line().unwrap_or_default()
                    ),
                    format!("mcpwall wrap {}", server.name),
                )),
                EntryState::Unwrapped { .. } => checks.push(Check::bad(
                    Status::Warn,
                    name,
                    format!("not protected by mcpwall ({shown})"),
                    format!("mcpwall wrap {}", server.name),
                )),
                EntryState::WrappedByOriginal { .. }
                    if let Some((why, fix)) = original_cannot_start(&ws.env, doc, server) =>
                {
                    checks.push(Check::bad(
                        Status::Fail,
                        name,
                        format!("cannot start ({shown}): {why}"),
                        fix,
                    ));
                }
                EntryState::WrappedByOriginal { options, .. } => checks.push(Check::bad(
                    Status::Warn,
                    name,
                    format!(
                        "protected by the original mcpwall (Node), {} ({shown}); its log lines share ~/.mcpwall/logs with this mcpwall's, in files of their own",
                        original_options_summary(options)
                    ),
                    options.migration_hint(&server.name),
                )),
                EntryState::Skipped(why) => {
                    checks.push(Check::ok(name, format!("not wrapped: {why}")));
                }
            }
        }
    }
    checks
}

/// Records whose entry is gone or no longer wrapped.
fn check_records(ws: &Workspace) -> Vec<Check> {
    let dir = ws.env.mcpwall_dir();
    let shown = ws.display_path(&Records::path(&dir));
    let records = match Records::load(&dir) {
        Ok((records, _)) => records,
        Err(e) => {
            return vec![Check::bad(
                Status::Fail,
                "wrap records",
                e.to_string(),
                format!("move {shown} away; `mcpwall unwrap` then works from the entries alone"),
            )];
        }
    };
    // Each record is checked as `unwrap` would before using it.
    let damaged: Vec<String> = records
        .entries
        .iter()
        .filter_map(|r| {
            let client = Client::from_id(&r.client);
            let why = match client {
                Some(c) => clients::check_record(r, c).err()?,
                None => format!("unknown client `{}`", r.client),
            };
            Some(format!("{} {}: {why}", r.file.display(), r.path.join(".")))
        })
        .collect();
    let mut checks = Vec::new();
    if !damaged.is_empty() {
        checks.push(Check::bad(
            Status::Fail,
            "wrap records",
            format!(
                "{} damaged record(s) in {shown}, which unwrap refuses: {}",
                damaged.len(),
                damaged.join("; ")
            ),
            format!(
                "repair them in {shown}, or delete them: `mcpwall unwrap` then takes mcpwall's prefix off those entries as they are"
            ),
        ));
    }
    let stale = records
        .entries
        .iter()
        .filter(|r| {
            // A file named with `wrap --client-file` is not among the discovered ones: read it.
            let discovered = ws.docs.iter().find(|d| d.canonical == r.file);
            let outside = match discovered {
                Some(_) => None,
                None => Client::from_id(&r.client).and_then(|client| {
                    Doc::load(
                        ConfigFile {
                            client,
                            path: r.file.clone(),
                            scope: Scope::User,
                        },
                        &ws.env,
                    )
                    .ok()
                }),
            };
            let wrapped = discovered.or(outside.as_ref()).is_some_and(|d| {
                d.servers.iter().any(|s| {
                    s.path == r.path
                        && matches!(
                            s.state,
                            EntryState::Wrapped { .. } | EntryState::WrappedRemote { .. }
                        )
                })
            });
            // A broken file is reported on its own; its records are not stale.
            let broken = ws
                .broken
                .iter()
                .any(|b| std::fs::canonicalize(&b.file.path).is_ok_and(|p| p == r.file));
            !wrapped && !broken
        })
        .count();
    if stale == 0 && damaged.is_empty() {
        checks.push(Check::ok(
            "wrap records",
            format!("{} record(s) in {shown}", records.entries.len()),
        ));
    } else if stale > 0 {
        checks.push(Check::bad(
            Status::Warn,
            "wrap records",
            format!("{stale} record(s) in {shown} describe entries that are no longer wrapped"),
            "nothing breaks; `mcpwall wrap` replaces them when it wraps those servers again",
        ));
    }
    checks
}
