//! What several verbs share: colour on a terminal, the owner-only state directory, and the
//! hint for a command line that forgot its `--`.

use std::ffi::OsString;
use std::io::IsTerminal;
use std::path::Path;

/// Whether stdout gets colour: on a terminal, unless `NO_COLOR` is set (non-empty);
/// `CLICOLOR_FORCE` (non-empty, not `0`) forces it where no terminal is.
pub fn colour_stdout() -> bool {
    let set = |name: &str| std::env::var_os(name).is_some_and(|v| !v.is_empty() && v != "0");
    if set("NO_COLOR") {
        return false;
    }
    set("CLICOLOR_FORCE") || std::io::stdout().is_terminal()
}

/// Whether stderr gets colour: as [`colour_stdout`], for stderr.
pub fn colour_stderr() -> bool {
    let set = |name: &str| std::env::var_os(name).is_some_and(|v| !v.is_empty() && v != "0");
    if set("NO_COLOR") {
        return false;
    }
    set("CLICOLOR_FORCE") || std::io::stderr().is_terminal()
}

/// How every verb reports a failure, in clap's voice so a usage error and a failed run
/// read alike: `error: WHAT`, then `  hint: WHAT TO DO` lines. A policy error's problems,
/// which point into files, follow as miette draws them (file, line, the text marked).
/// `tag` goes before `error:`: `mcpwall: ` in proxy mode, where the server's own stderr
/// shares the stream (the proxy's run-time errors say `mcpwall: error:` too), else empty.
pub fn error_text(report: &miette::Report, tag: &str, colour: bool) -> String {
    use miette::Diagnostic;
    use std::fmt::Write as _;
    let diag: &dyn Diagnostic = report.as_ref();
    let mut out = format!("{tag}{} {diag}\n", paint(colour, sgr::RED, "error:"));
    // The causes a plain error wraps (`cannot read X: permission denied`).
    let mut cause = std::error::Error::source(report.as_ref() as &dyn std::error::Error);
    while let Some(c) = cause {
        let _ = writeln!(out, "  cause: {c}");
        cause = c.source();
    }
    if let Some(help) = diag.help() {
        for line in help.to_string().lines() {
            let _ = writeln!(out, "  {} {line}", paint(colour, sgr::CYAN, "hint:"));
        }
    }
    let theme = if colour {
        miette::GraphicalTheme::unicode()
    } else {
        miette::GraphicalTheme::unicode_nocolor()
    };
    let handler = miette::GraphicalReportHandler::new_themed(theme).with_width(80);
    let mut drawn = |d: &dyn Diagnostic| {
        let mut text = String::new();
        if handler.render_report(&mut text, d).is_ok() {
            out.push('\n');
            out.push_str(text.trim_end());
            out.push('\n');
        }
    };
    // The error itself points into a file: draw it (the message is repeated there, with
    // the marked text).
    if diag.labels().is_some_and(|mut l| l.next().is_some()) {
        drawn(diag);
    }
    if let Some(related) = diag.related() {
        for d in related {
            drawn(d);
        }
    }
    out
}

/// Launchers that fetch and run a package (`npx -y @scope/pkg`): the words before the
/// package, and their options that take a value.
const LAUNCHERS: &[(&[&str], &[&str])] = &[
    (&["npx"], &["-p", "--package", "-c", "--call"]),
    (&["pnpx"], &["-p", "--package"]),
    (&["bunx"], &["-p", "--package"]),
    (&["npm", "exec"], &["-p", "--package", "-c", "--call"]),
    (&["pnpm", "dlx"], &["-p", "--package"]),
    (&["yarn", "dlx"], &["-p", "--package"]),
    (&["uvx"], &["--from", "--with", "--python", "-p"]),
    (
        &["uv", "tool", "run"],
        &["--from", "--with", "--python", "-p"],
    ),
    (&["pipx", "run"], &["--spec", "--python"]),
];

/// The name a server started as `command` runs under when none is given: the package a
/// launcher runs (`npx -y @modelcontextprotocol/server-filesystem@1.2 /proj` is
/// `server-filesystem`, `uvx mcp-server-fetch` is `mcp-server-fetch`), else the program's
/// file name. Pins recorded under the program's name (what mcpwall called such a server
/// before) move to the new one, so they still apply; failing that, the start is refused
/// rather than the server pinned afresh.
pub fn server_name(command: &[String], home: &Path) -> miette::Result<String> {
    use crate::guard::pins::{PinStore, ServerIdentity};
    let Some(program) = command.first() else {
        return Ok(String::new());
    };
    let legacy = Path::new(program)
        .file_name()
        .map_or_else(|| program.clone(), |n| n.to_string_lossy().into_owned());
    let Some(name) = launched_package(command) else {
        return Ok(legacy);
    };
    let identity = |name: &str| ServerIdentity {
        name: name.to_string(),
        command: command.to_vec(),
    };
    PinStore::under_home(home)
        .migrate(&identity(&legacy), &identity(&name))
        .map_err(|e| {
            miette::miette!(
                help = "fix the file (or remove it with `mcpwall pins reset`), or keep the old \
                        name with `--server-name {legacy}`",
                "this server is now named \"{name}\" (after its package), and its pins recorded \
                 as \"{legacy}\" could not be moved: {e}"
            )
        })?;
    Ok(name)
}

/// The package a launcher command runs, unscoped and without its version.
fn launched_package(command: &[String]) -> Option<String> {
    let stem = |w: &str| {
        let base = w
            .rsplit(['/', '\\'])
            .next()
            .unwrap_or(w)
            .to_ascii_lowercase();
        for ext in [".exe", ".cmd", ".bat", ".ps1"] {
            if let Some(s) = base.strip_suffix(ext) {
                return s.to_string();
            }
        }
        base
    };
    let (words, valued) = LAUNCHERS.iter().find(|(words, _)| {
        command.len() > words.len()
            && stem(&command[0]) == words[0]
            && command[1..words.len()]
                .iter()
                .zip(&words[1..])
                .all(|(c, w)| c == w)
    })?;
    let mut rest = command[words.len()..].iter();
    let operand = loop {
        let word = rest.next()?;
        if word == "--" {
            break rest.next()?;
        }
        if word.starts_with('-') {
            if valued.contains(&word.as_str()) {
                rest.next();
            }
            continue;
        }
        break word;
    };
    let spec = operand.strip_prefix("npm:").unwrap_or(operand);
    // `@scope/pkg@1.2`, `pkg@latest`, `pkg==1.0` (uvx): the name, without the version.
    let unversioned = match spec.strip_prefix('@') {
        Some(scoped) => scoped.split('@').next().unwrap_or(scoped),
        None => spec.split(['@', '=']).next().unwrap_or(spec),
    };
    let name = unversioned.rsplit('/').next().unwrap_or(unversioned);
    let plain = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    plain.then(|| name.to_string())
}

/// SGR codes used by the verbs.
pub mod sgr {
    pub const GREEN: &str = "32";
    pub const YELLOW: &str = "33";
    pub const RED: &str = "1;31";
    pub const CYAN: &str = "36";
    pub const DIM: &str = "2";
}

/// `text` in colour `code` when `on`.
pub fn paint(on: bool, code: &str, text: &str) -> String {
    if on {
        format!("\u{1b}[{code}m{text}\u{1b}[0m")
    } else {
        text.to_string()
    }
}

/// A unified diff with added lines green, removed lines red and hunk headers cyan.
pub fn paint_diff(on: bool, diff: &str) -> String {
    if !on {
        return diff.to_string();
    }
    diff.split_inclusive('\n')
        .map(|line| {
            let (body, end) = match line.strip_suffix('\n') {
                Some(body) => (body, "\n"),
                None => (line, ""),
            };
            let code = if body.starts_with("+++") || body.starts_with("---") {
                sgr::DIM
            } else if body.starts_with('+') {
                sgr::GREEN
            } else if body.starts_with('-') {
                sgr::RED
            } else if body.starts_with("@@") {
                sgr::CYAN
            } else {
                return line.to_string();
            };
            format!("{}{end}", paint(true, code, body))
        })
        .collect()
}

/// Take group and other access away from `~/.mcpwall` and `~/.mcpwall/backups` if an
/// older mcpwall (or the user) left them open: they hold copies of client files, which may
/// carry tokens. Said on stderr, once, when it happens; nothing is created here.
pub fn tighten_state_dirs() {
    let Some(home) = crate::platform::home_var().filter(|h| !h.is_empty()) else {
        return;
    };
    let state = Path::new(&home).join(".mcpwall");
    for dir in [state.join("backups"), state.clone()] {
        tighten(&dir);
    }
}

#[cfg(unix)]
fn tighten(dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    // Not through a symlink: the link's target is not ours to change.
    let Ok(meta) = std::fs::symlink_metadata(dir) else {
        return;
    };
    let mode = meta.permissions().mode() & 0o777;
    if !meta.is_dir() || mode & 0o077 == 0 {
        return;
    }
    match std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)) {
        Ok(()) => eprintln!(
            "mcpwall: note: {} was open to other users (mode {mode:o}); it is now owner-only (0700): it holds copies of client configs, which may carry tokens",
            dir.display()
        ),
        Err(e) => eprintln!(
            "mcpwall: warning: {} is open to other users (mode {mode:o}) and could not be made owner-only: {e}; run `chmod 700 {}`",
            dir.display(),
            dir.display()
        ),
    }
}

#[cfg(not(unix))]
fn tighten(_dir: &Path) {}

/// Options of proxy mode that take a value (`-c FILE`), so the word after them is theirs.
const VALUE_OPTIONS: &[&str] = &[
    "-c",
    "--config",
    "--log-level",
    "--server-name",
    "--grace-ms",
    "--kill-grace-ms",
    "--upstream",
    "--header-file",
    "--ca-file",
];

/// The message for a command line whose first word is not a verb and not after `--`:
/// a near miss of a verb (`stauts`), or a server command missing its `--` (`npx foo`).
/// `None` when the line is fine for clap to parse; else the error and the hint.
pub fn misplaced_word(argv: &[OsString], verbs: &[String]) -> Option<(String, String)> {
    let words: Vec<String> = argv
        .iter()
        .skip(1)
        .map(|w| w.to_string_lossy().into_owned())
        .collect();
    let mut i = 0;
    while i < words.len() {
        let word = &words[i];
        if word == "--" {
            return None;
        }
        if word.starts_with('-') {
            i += if VALUE_OPTIONS.contains(&word.as_str()) {
                2
            } else {
                1
            };
            continue;
        }
        if verbs.iter().any(|v| v == word) {
            return None;
        }
        let near = verbs
            .iter()
            .map(|v| (strsim::damerau_levenshtein(word, v), v))
            .filter(|(d, v)| *d <= 2.min(v.len() / 2))
            .min_by_key(|(d, _)| *d)
            .map(|(_, v)| v);
        let quoted: Vec<String> = words.iter().map(|w| quote(w)).collect();
        let (options, command) = quoted.split_at(i);
        let mut behind = String::from("mcpwall ");
        for option in options {
            behind.push_str(option);
            behind.push(' ');
        }
        behind.push_str("-- ");
        behind.push_str(&command.join(" "));
        return Some(match near {
            // A lone word is a mistyped verb; with more words it may be a server command
            // (`docker run …` is one edit from `doctor`): offer both.
            Some(verb) if command.len() == 1 => (
                format!("unknown command `{word}`"),
                format!("did you mean `mcpwall {verb}`? (`mcpwall --help` lists the commands)"),
            ),
            Some(verb) => (
                format!("unknown command `{word}`"),
                format!(
                    "did you mean `mcpwall {verb}`, or `{behind}` to run a server behind mcpwall?"
                ),
            ),
            None => (
                format!("`{word}` is not a mcpwall command"),
                format!(
                    "to run a server behind mcpwall, put its command after `--`: did you mean `{behind}`?"
                ),
            ),
        });
    }
    None
}

/// A word as a POSIX shell would need it to read it back.
fn quote(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:@%+,".contains(c));
    if plain {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// `--log-level`: error, warn, info or debug.
pub fn parse_level(s: &str) -> Result<crate::io::LogLevel, String> {
    match s.to_ascii_lowercase().as_str() {
        "error" => Ok(crate::io::LogLevel::Error),
        "warn" | "warning" => Ok(crate::io::LogLevel::Warn),
        "info" => Ok(crate::io::LogLevel::Info),
        "debug" => Ok(crate::io::LogLevel::Debug),
        _ => Err(format!(
            "unknown log level {s:?}; use error, warn, info or debug"
        )),
    }
}

/// `$HOME`, or an error that says how to do without it.
/// The server command given after `--`; `example` is a whole command line for the help.
pub fn server_command(
    command: &[String],
    example: &str,
) -> miette::Result<crate::io::child::ChildSpec> {
    let Some((program, args)) = command.split_first() else {
        return Err(miette::miette!(
            help = format!("put the server command after `--`, e.g. `{example}`"),
            "no server command given"
        ));
    };
    Ok(crate::io::child::ChildSpec {
        program: program.into(),
        args: args.iter().map(Into::into).collect(),
        env: Vec::new(),
        sandbox: None,
    })
}

/// The sandbox a server started here runs in (`None`: `sandbox: off`), said once on
/// stderr at info level and, where this system can enforce none or only part of it, as a
/// warning. A `required` sandbox that this system cannot apply at all (Windows) stops the
/// start here; on Linux and macOS the helper itself refuses when a part fails.
pub fn sandbox_plan(
    policy: &crate::config::policy::Policy,
    load_options: &crate::config::LoadOptions,
    chatter: &crate::io::Chatter,
) -> miette::Result<Option<std::sync::Arc<crate::sandbox::Plan>>> {
    sandbox_plan_of(
        &policy.sandbox,
        policy.settings.log_dir.as_deref(),
        load_options,
        chatter,
    )
}

/// [`sandbox_plan`] from a `sandbox:` section and the policy's `log_dir`.
pub fn sandbox_plan_of(
    sandbox: &crate::config::policy::SandboxPolicy,
    log_dir: Option<&std::path::Path>,
    load_options: &crate::config::LoadOptions,
    chatter: &crate::io::Chatter,
) -> miette::Result<Option<std::sync::Arc<crate::sandbox::Plan>>> {
    use crate::sandbox::{Place, Plan, Support};
    let place = Place::for_server(
        &load_options.home,
        &load_options.project_dir,
        log_dir,
        load_options.explicit.as_deref(),
    );
    let Some(plan) = Plan::resolve(sandbox, &place) else {
        chatter.log(
            crate::io::LogLevel::Info,
            format_args!("sandbox: off (the policy says `sandbox: off`)"),
        );
        return Ok(None);
    };
    // A mount covers what exists: mcpwall's state directories exist before the server
    // starts, or the server could create one first (a policy or an approval in
    // `~/.mcpwall`, forged days or a planted link in a `log_dir` elsewhere) and keep it
    // open to itself, since the audit writer creates the log directory only later.
    for dir in std::iter::once(load_options.home.join(".mcpwall")).chain(log_dir.map(Into::into)) {
        if let Err(e) = create_private_dir(&dir) {
            chatter.log(
                crate::io::LogLevel::Warn,
                format_args!(
                    "sandbox: cannot create {} ({e}): the sandbox hides it only once it exists",
                    dir.display()
                ),
            );
        }
    }
    if cfg!(windows) {
        let shortfalls = Support::probe().shortfalls(&plan);
        if plan.required {
            return Err(miette::miette!(
                help = "run the server on Linux or macOS, or lift `sandbox.required` in your \
                        policy to run it unsandboxed",
                "the server was not started: `sandbox.required` is set and {}",
                shortfalls.join("; ")
            ));
        }
        chatter.log(
            crate::io::LogLevel::Warn,
            format_args!("sandbox: {}", shortfalls.join("; ")),
        );
    }
    // Said only when asked for: the server's start waits for this.
    if chatter.level >= crate::io::LogLevel::Info {
        chatter.log(
            crate::io::LogLevel::Info,
            format_args!(
                "sandbox: {}; {}",
                Support::probe().summary(),
                plan.describe(&load_options.home).join("; ")
            ),
        );
    }
    Ok(Some(std::sync::Arc::new(plan)))
}

/// Create `dir` and its missing parents owner-only (0700 on Unix); one that exists is left
/// as it is (the audit writer tightens a log directory it opens).
fn create_private_dir(dir: &std::path::Path) -> std::io::Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    crate::platform::owner_only_dir(std::fs::DirBuilder::new().recursive(true)).create(dir)
}

/// The audit line that says how the server was sandboxed (or that it was not).
pub fn sandbox_event(plan: Option<&crate::sandbox::Plan>) -> crate::session::AuditEvent {
    use crate::session::event::{AuditEvent, Direction, RuleRef, Verdict};
    let message = match plan {
        None => "server started without a sandbox (`sandbox: off`)".to_string(),
        Some(plan) => {
            let support = crate::sandbox::Support::probe();
            let shortfalls = support.shortfalls(plan);
            format!(
                "server sandboxed ({}): {} hidden, {} read-only, writes {}, network {}{}",
                support.summary(),
                plan.hidden.len(),
                plan.read_only.len(),
                if plan.writable.is_some() {
                    "confined"
                } else {
                    "not confined"
                },
                plan.network.word(),
                if shortfalls.is_empty() {
                    String::new()
                } else {
                    format!("; NOT enforced: {}", shortfalls.join("; "))
                }
            )
        }
    };
    let mut event = AuditEvent::new(Direction::Inbound, Verdict::LogOnly);
    event.method = Some("mcpwall/sandbox".into());
    event.rule = Some(RuleRef::Builtin("mcpwall:sandbox"));
    event.message = Some(message.into());
    event
}

/// Warn about what an untrusted project file asked for and did not get; said at every
/// start, since the user may expect it to apply (`mcpwall trust` makes it apply).
pub fn warn_ignored(policy: &crate::config::policy::Policy, chatter: &crate::io::Chatter) {
    for ignored in &policy.ignored {
        chatter.log(
            crate::io::LogLevel::Warn,
            format_args!(
                "{} at {} is ignored: {}",
                ignored.what,
                policy.location(ignored.span),
                ignored.why
            ),
        );
    }
}

/// Warns about user allow rules that match a built-in deny rule's examples, and about
/// earlier rules that decide first for some of a later rule's messages. The proxies load
/// the packs without their examples (start-up speed), so they are read again, only when a
/// user rule could shadow one; overlaps found on samples need no examples.
pub fn warn_shadowed(
    policy: &crate::config::policy::Policy,
    load_options: &crate::config::LoadOptions,
    chatter: &crate::io::Chatter,
) {
    let env = load_options.path_env();
    let full = crate::compile::shadow::may_shadow(policy)
        .then(|| crate::config::load(load_options).ok())
        .flatten();
    let warnings = crate::compile::shadow::order_warnings(full.as_ref().unwrap_or(policy), &env);
    for warning in warnings {
        chatter.log(crate::io::LogLevel::Warn, format_args!("{warning}"));
    }
}

/// Where a policy is looked for: `explicit` (`-c FILE`), else `$HOME` and the working
/// directory (the project).
pub fn load_options(
    explicit: Option<std::path::PathBuf>,
) -> miette::Result<crate::config::LoadOptions> {
    Ok(crate::config::LoadOptions {
        explicit,
        home: home_dir()?,
        project_dir: std::env::current_dir()
            .map_err(|e| miette::miette!("cannot read the working directory: {e}"))?,
    })
}

/// The audit log's settings for a server named `server`: `settings.log_dir` (or
/// `~/.mcpwall/logs`), a new session id, `settings.log_retention`.
pub fn audit_config(
    settings: &crate::config::policy::Settings,
    home: &std::path::Path,
    server: String,
) -> crate::audit::AuditConfig {
    crate::audit::AuditConfig {
        dir: settings
            .log_dir
            .clone()
            .unwrap_or_else(|| home.join(".mcpwall").join("logs")),
        session: crate::audit::new_session_id(),
        server,
        retention: Some(crate::audit::retention::Cap {
            max_days: settings.log_retention.max_days,
            max_bytes: u64::from(settings.log_retention.max_mb) * 1024 * 1024,
        }),
    }
}

/// The audit log of `config`, started with its shipper when `settings.log_shipping` asks
/// for one. A shipping target that can't be set up (an unreadable CA file, a build
/// without TLS) stops the start: the user asked for a copy, and would not know it is
/// missing.
pub fn start_audit(
    settings: &crate::config::policy::Settings,
    config: crate::audit::AuditConfig,
    names: std::sync::Arc<dyn crate::audit::Names>,
) -> miette::Result<AuditLog> {
    let mut shippers = Vec::new();
    if let Some(shipping) = &settings.log_shipping {
        if let Some(file) = shipping.otlp.as_ref().and_then(|o| o.header_file.as_ref()) {
            warn_if_others_may_read(file, "log_shipping.otlp.header_file");
        }
        // Before the writer starts: a log shipped for the first time is shipped from its
        // end as it stands now, so this process's lines are all in the copy.
        for target in crate::ship::targets(shipping).map_err(|e| miette::miette!("{e}"))? {
            shippers.push(
                crate::ship::Shipper::start(&config.dir, target)
                    .map_err(|e| miette::miette!("{e}"))?,
            );
        }
    }
    let audit = crate::audit::Audit::start(config, names);
    for shipper in &shippers {
        shipper.audit_to(audit.sender());
    }
    Ok(AuditLog { audit, shippers })
}

/// The audit writer and, with `settings.log_shipping`, its shippers (one per collector).
pub struct AuditLog {
    pub audit: crate::audit::Audit,
    shippers: Vec<crate::ship::Shipper>,
}

impl AuditLog {
    pub fn sender(&self) -> crate::audit::AuditSender {
        self.audit.sender()
    }

    /// Write what is queued (for at most `timeout`), then ship what is written (for at
    /// most as long again; the collectors side by side).
    pub fn finish(self, timeout: std::time::Duration) {
        self.audit.finish(timeout);
        std::thread::scope(|scope| {
            for shipper in self.shippers {
                scope.spawn(move || shipper.finish(timeout));
            }
        });
    }
}

/// Warns on stderr when a file holding a credential (`what`) can be read by other users:
/// mcpwall still uses it (the user chose the file), but the secret is not theirs alone.
/// Unix only: a Windows file's inherited ACL is not a sign of carelessness.
pub fn warn_if_others_may_read(path: &std::path::Path, what: &str) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if let Ok(meta) = std::fs::metadata(path) {
            let mode = meta.permissions().mode() & 0o777;
            if mode & 0o044 != 0 {
                eprintln!(
                    "mcpwall: warning: {what} {} can be read by other users (mode {mode:o}); \
                     `chmod 600` it",
                    path.display()
                );
            }
        }
    }
    #[cfg(not(unix))]
    let _ = (path, what);
}

pub fn home_dir() -> miette::Result<std::path::PathBuf> {
    match crate::platform::home_var() {
        Some(h) if !h.is_empty() => Ok(std::path::PathBuf::from(h)),
        _ => Err(miette::miette!(
            help = "set HOME, or give a policy with -c and settings.log_dir",
            "cannot find your home directory (HOME is not set)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(words: &[&str]) -> Vec<OsString> {
        std::iter::once("mcpwall")
            .chain(words.iter().copied())
            .map(OsString::from)
            .collect()
    }

    fn verbs() -> Vec<String> {
        [
            "status", "scan", "init", "wrap", "unwrap", "check", "doctor",
        ]
        .map(String::from)
        .to_vec()
    }

    #[test]
    fn near_misses_and_missing_double_dash() {
        let hint = |w: &[&str]| misplaced_word(&argv(w), &verbs()).map(|(_, hint)| hint);
        assert!(hint(&["stauts"]).unwrap().contains("`mcpwall status`"));
        assert!(hint(&["wrpa", "x"]).unwrap().contains("`mcpwall wrap`"));
        let docker = hint(&["docker", "run", "img"]).unwrap();
        assert!(docker.contains("`mcpwall -- docker run img`"), "{docker}");
        assert!(
            hint(&["-c", "p.yml", "npx", "a b"])
                .unwrap()
                .contains("`mcpwall -c p.yml -- npx 'a b'`")
        );
        assert_eq!(hint(&["status"]), None);
        assert_eq!(hint(&["--", "npx", "foo"]), None);
        assert_eq!(hint(&["--strict", "--", "npx"]), None);
        assert_eq!(hint(&["--version"]), None);
    }

    #[test]
    fn a_launched_package_names_its_server() {
        let name =
            |w: &[&str]| launched_package(&w.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(
            name(&[
                "npx",
                "-y",
                "@modelcontextprotocol/server-filesystem@1.2",
                "/proj"
            ]),
            Some("server-filesystem".into())
        );
        assert_eq!(
            name(&["/usr/bin/npx", "--yes", "mcp-remote"]),
            Some("mcp-remote".into())
        );
        assert_eq!(name(&["NPX.CMD", "-y", "pkg@latest"]), Some("pkg".into()));
        assert_eq!(
            name(&["npx", "-p", "@a/tools", "--", "b-cli"]),
            Some("b-cli".into())
        );
        assert_eq!(
            name(&["uvx", "mcp-server-fetch==1.0"]),
            Some("mcp-server-fetch".into())
        );
        assert_eq!(name(&["pnpm", "dlx", "@x/y"]), Some("y".into()));
        assert_eq!(
            name(&["uvx", "--from", "git+https://x/y", "tool"]),
            Some("tool".into())
        );
        assert_eq!(name(&["npx", "-y"]), None);
        assert_eq!(name(&["npx"]), None);
        assert_eq!(name(&["python", "server.py"]), None);
        assert_eq!(name(&["pnpm", "install"]), None);
    }

    #[test]
    fn diffs_are_painted_by_line_kind() {
        let diff = "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-old\n+new\n same\n";
        assert_eq!(paint_diff(false, diff), diff);
        let painted = paint_diff(true, diff);
        assert!(painted.contains("\u{1b}[32m+new\u{1b}[0m\n"));
        assert!(painted.contains("\u{1b}[1;31m-old\u{1b}[0m\n"));
        assert!(painted.ends_with(" same\n"));
    }
}

/// `--format` of the verbs that report to a person or to a script (`status`, `doctor`,
/// `pins list`): `text`, or `json` (one document on stdout, stable keys).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum OutputFormat {
    #[default]
    Text,
    Json,
}

/// Print `value` as one JSON document on stdout.
pub fn print_json(value: &serde_json::Value) {
    println!(
        "{}",
        serde_json::to_string_pretty(value).unwrap_or_else(|_| "null".into())
    );
}

/// The candidate a mistyped name most likely meant (`filesytem` → `filesystem`): at most
/// one edit (a swap counts as one) per four characters, at least one. Short names are
/// too alike for more: `nope` is not a typo of `notes`.
pub fn did_you_mean<'c>(word: &str, candidates: &[&'c str]) -> Option<&'c str> {
    let allowed = (word.chars().count() / 4).max(1);
    candidates
        .iter()
        .map(|c| (strsim::damerau_levenshtein(word, c), *c))
        .filter(|(edits, _)| *edits <= allowed)
        .min_by_key(|(edits, _)| *edits)
        .map(|(_, c)| c)
}
