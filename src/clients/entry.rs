//! What a server entry is: wrappable, already wrapped, or out of a stdio proxy's reach.
//!
//! The wrapped form (documented in docs/clients.md) is
//! `"command": "<mcpwall>", "args": ["--server-name", "<name>", "--", "<orig command>", <orig args…>]`.
//! An entry counts as wrapped when its command's basename is `mcpwall` and its args
//! contain `--`: that holds for entries wrapped by hand too, and never for a server that
//! merely has `--` among its own arguments.
//!
//! The original mcpwall (Node, installed from npm) wraps servers as
//! `npx [-y] mcpwall[@version] [options] -- CMD`, `mcpwall [options] -- CMD` (a global
//! install), `node …/mcpwall/dist/index.js [options] -- CMD`, or that script run
//! directly (a checkout's build, whose `#!` line runs node); such an entry is
//! [`EntryState::WrappedByOriginal`]. A bare `mcpwall` command is the Node one only when it
//! resolves to a Node script (the caller says, [`EntryState::classify`]).

use std::path::Path;

use super::json_span::{Kind, Node};

/// The state of one server entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EntryState {
    /// A stdio server not yet behind mcpwall.
    Unwrapped {
        /// Its command.
        command: String,
        /// Its arguments.
        args: Vec<String>,
    },
    /// Already behind mcpwall.
    Wrapped {
        /// The mcpwall command (path or `mcpwall`).
        wrapper: String,
        /// mcpwall's own options (before `--`), e.g. `-c FILE`.
        options: Vec<String>,
        /// The real server command after `--`.
        command: String,
        /// The real server's arguments.
        args: Vec<String>,
    },
    /// Behind the original mcpwall (Node).
    WrappedByOriginal {
        /// How it is started, up to its options: `npx -y mcpwall`, `mcpwall`,
        /// `node /usr/lib/node_modules/mcpwall/dist/index.js` (the command first).
        launcher: Vec<String>,
        /// Its options as written (between the launcher and `--`), and what they mean.
        options: OriginalOptions,
        /// The real server command after `--`.
        command: String,
        /// The real server's arguments.
        args: Vec<String>,
    },
    /// A remote server (`url`, or Windsurf's `serverUrl`; Streamable HTTP or HTTP+SSE), not
    /// yet behind mcpwall: `wrap` makes it a stdio entry running `mcpwall --upstream URL`.
    Remote {
        /// The member holding the URL: `url` or `serverUrl`.
        key: String,
        /// The URL as written (`${VAR}` references unexpanded).
        url: String,
        /// The names of its `headers` (never their values: they are credentials).
        headers: Vec<String>,
    },
    /// A remote server behind mcpwall's bridge: `<mcpwall> [options] --upstream URL`.
    WrappedRemote {
        /// The mcpwall command (path or `mcpwall`).
        wrapper: String,
        /// All of mcpwall's arguments, `--upstream URL` included.
        options: Vec<String>,
        /// The remote server's URL.
        url: String,
    },
    /// Cannot be wrapped by a stdio proxy; the reason says why.
    Skipped(String),
}

/// The environment variable a wrapped remote entry's `headers` move to, one `Name: value`
/// line each: the client expands `${VAR}` in it when it starts the server, as it did in
/// `headers`, and the value never reaches the process list as an argument would.
pub const UPSTREAM_HEADERS_ENV: &str = "MCPWALL_UPSTREAM_HEADERS";

/// The environment variable naming *another* variable whose value is the bearer token:
/// how a wrapped Codex entry's `bearer_token_env_var` reaches the bridge (Codex writes no
/// value into the file, and neither does `wrap`).
pub const TOKEN_VAR_ENV: &str = "MCPWALL_UPSTREAM_BEARER_ENV";

/// The environment variable holding `Name: VARIABLE` lines: header `Name` is sent with the
/// value of `$VARIABLE` (a wrapped Codex entry's `env_http_headers`).
pub const HEADER_VARS_ENV: &str = "MCPWALL_UPSTREAM_ENV_HEADERS";

/// A portable environment variable name: a letter or `_`, then letters, digits or `_`.
pub fn is_variable_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// The options of an original mcpwall (Node) wrapper: `-c/--config FILE`,
/// `--log-level LEVEL`, `--strict` (its README's CLI section).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OriginalOptions {
    /// The options exactly as written.
    pub written: Vec<String>,
    /// `-c FILE` / `--config FILE`: exactly this policy file.
    pub config: Option<String>,
    /// `--log-level LEVEL`.
    pub log_level: Option<String>,
    /// `--strict`: refuse malformed JSON-RPC lines (the original forwards them otherwise).
    pub strict: bool,
    /// Options the original's documentation does not list; an entry with any is not
    /// migrated automatically.
    pub unknown: Vec<String>,
}

impl OriginalOptions {
    /// Read the options the original documents, in any of their spellings.
    pub fn parse(written: &[String]) -> OriginalOptions {
        let mut out = OriginalOptions {
            written: written.to_vec(),
            ..OriginalOptions::default()
        };
        let mut i = 0;
        while i < written.len() {
            let word = written[i].as_str();
            let value = |i: &mut usize| {
                *i += 1;
                written.get(*i).cloned()
            };
            match word {
                "-c" | "--config" => match value(&mut i) {
                    Some(v) => out.config = Some(v),
                    None => out.unknown.push(word.to_string()),
                },
                "--log-level" => match value(&mut i) {
                    Some(v) => out.log_level = Some(v),
                    None => out.unknown.push(word.to_string()),
                },
                "--strict" => out.strict = true,
                _ => {
                    if let Some(v) = word.strip_prefix("--config=") {
                        out.config = Some(v.to_string());
                    } else if let Some(v) = word.strip_prefix("--log-level=") {
                        out.log_level = Some(v.to_string());
                    } else if let Some(v) = word.strip_prefix("-c").filter(|v| !v.is_empty()) {
                        out.config = Some(v.to_string());
                    } else {
                        out.unknown.push(word.to_string());
                    }
                }
            }
            i += 1;
        }
        out
    }

    /// What to do to move the entry `name` to this mcpwall, told the same by `status`,
    /// `doctor`, `init` and `wrap`.
    pub fn migration_hint(&self, name: &str) -> String {
        if self.unknown.is_empty() {
            format!(
                "`mcpwall wrap {name}` moves it to this mcpwall in one edit (options kept; `mcpwall unwrap {name}` moves it back)"
            )
        } else {
            format!(
                "options the original does not document ({}), so `mcpwall wrap` leaves it: take the original's wrapper off by hand (keep the server command), then run `mcpwall wrap {name}`",
                self.unknown.join(" ")
            )
        }
    }

    /// How the options read to a person (`-c team.yml --strict`), or `no options`.
    pub fn describe(&self) -> String {
        if self.written.is_empty() {
            "no options".to_string()
        } else {
            self.written.join(" ")
        }
    }
}

impl EntryState {
    /// How a remote entry reads to a person: `remote https://h/mcp (headers: Authorization)`
    /// for one not yet wrapped, `remote https://h/mcp via mcpwall --upstream` once wrapped;
    /// the URL without credentials or query, header names without their values. `None`
    /// for other entries.
    pub fn remote_line(&self) -> Option<String> {
        match self {
            EntryState::Remote { url, headers, .. } => Some(format!(
                "remote {}{}",
                shown_url(url),
                if headers.is_empty() {
                    String::new()
                } else {
                    format!(" (headers: {})", headers.join(", "))
                }
            )),
            EntryState::WrappedRemote { url, .. } => {
                Some(format!("remote {} via mcpwall --upstream", shown_url(url)))
            }
            _ => None,
        }
    }

    /// Classify an entry value, taking a bare `mcpwall` command for this mcpwall.
    pub fn of(entry: &Node) -> EntryState {
        Self::classify(entry, &|_| false)
    }

    /// Classify an entry value; `is_node_mcpwall` tells whether a command named `mcpwall`
    /// is the original (Node) one ([`is_node_mcpwall`] resolves it on `PATH`).
    pub fn classify(entry: &Node, is_node_mcpwall: &dyn Fn(&str) -> bool) -> EntryState {
        if entry.members().is_none() {
            return EntryState::Skipped("the entry is not an object".into());
        }
        if let Some(state) = remote(entry) {
            return state;
        }
        if let Some(ty) = entry.member("type") {
            match ty.value.as_str() {
                Some("stdio") => {}
                Some(other) => {
                    return EntryState::Skipped(format!(
                        "`type: {other}` is not a stdio server: a stdio proxy cannot wrap it"
                    ));
                }
                None => return EntryState::Skipped("`type` is not a string".into()),
            }
        }
        let Some(command) = entry.member("command") else {
            if entry.member("source").and_then(|s| s.value.as_str()) == Some("extension") {
                return EntryState::Skipped(
                    "started by a Zed extension, not by a `command` mcpwall could wrap".into(),
                );
            }
            return EntryState::Skipped("the entry has no `command`".into());
        };
        let Some(command) = command.value.as_str() else {
            if command.value.member("path").is_some() {
                return EntryState::Skipped(
                    "older `\"command\": {\"path\": …}` form: write it as `command` + `args` to wrap it"
                        .into(),
                );
            }
            return EntryState::Skipped("`command` is not a string".into());
        };
        let args = match entry.member("args") {
            None => Vec::new(),
            Some(args) => match string_list(&args.value) {
                Some(list) => list,
                None => {
                    return EntryState::Skipped("`args` is not a list of strings".into());
                }
            },
        };
        if let Some(state) = original_wrapper(command, &args, is_node_mcpwall) {
            return state;
        }
        if is_mcpwall(command)
            && !args.iter().any(|a| a == "--")
            && let Some(url) = upstream_of(&args)
        {
            return EntryState::WrappedRemote {
                wrapper: command.to_string(),
                options: args.clone(),
                url,
            };
        }
        if is_mcpwall(command)
            && let Some(dash) = args.iter().position(|a| a == "--")
        {
            if let Some((inner, rest)) = args[dash + 1..].split_first() {
                return EntryState::Wrapped {
                    wrapper: command.to_string(),
                    options: args[..dash].to_vec(),
                    command: inner.clone(),
                    args: rest.to_vec(),
                };
            }
            return EntryState::Skipped("wrapped by mcpwall but names no server command".into());
        }
        EntryState::Unwrapped {
            command: command.to_string(),
            args,
        }
    }
}

/// The URL of `--upstream URL` / `--upstream=URL` among mcpwall's arguments.
fn upstream_of(args: &[String]) -> Option<String> {
    args.iter().enumerate().find_map(|(i, a)| {
        if a == "--upstream" {
            args.get(i + 1).cloned()
        } else {
            a.strip_prefix("--upstream=").map(str::to_string)
        }
    })
}

/// The transports `type` may name for a remote server the bridge relays: Streamable HTTP
/// (Claude Code and VS Code write `http`; other clients spell it out) and the older
/// HTTP+SSE (`sse`).
const REMOTE_TYPES: &[&str] = &["http", "streamable-http", "streamableHttp", "sse"];

/// Members of a remote entry that make the client itself authenticate or compute headers:
/// the bridge cannot do that, so such an entry is left as it is.
const CLIENT_SIDE_AUTH: &[&str] = &["headersHelper", "oauth", "auth", "authorization"];

/// The state of an entry that names a URL (`url`, `serverUrl`), or `None` when it names
/// none. Everything `wrap` will move (URL, header names and values) is checked here, so an
/// entry classified [`EntryState::Remote`] always wraps into a bridge that starts.
fn remote(entry: &Node) -> Option<EntryState> {
    let members = entry.members()?;
    let key = ["url", "serverUrl"]
        .into_iter()
        .find(|k| entry.member(k).is_some())?;
    let skip = |why: String| Some(EntryState::Skipped(why));
    let url_node = &entry.member(key)?.value;
    let Some(url) = url_node.as_str() else {
        return skip(format!("`{key}` is not a string"));
    };
    for twice in [
        "type",
        "url",
        "serverUrl",
        "headers",
        "env",
        "command",
        "args",
    ] {
        if members.iter().filter(|m| m.key == twice).count() > 1 {
            return skip(format!(
                "remote server with `{twice}` given twice: clients disagree on which one counts; keep one, then run `mcpwall wrap` again"
            ));
        }
    }
    if entry.member("url").is_some() && entry.member("serverUrl").is_some() {
        return skip("both `url` and `serverUrl`: keep one, then run `mcpwall wrap` again".into());
    }
    if entry.member("command").is_some() {
        return skip(format!(
            "both `command` and `{key}`: clients disagree on which one they start"
        ));
    }
    match entry.member("type").map(|t| t.value.as_str()) {
        // The bridge speaks both: Streamable HTTP, and the older HTTP+SSE transport when
        // the server refuses the `initialize` POST (docs/http.md, bridge mode).
        None => {}
        Some(Some(t)) if REMOTE_TYPES.contains(&t) => {}
        Some(Some(other)) => {
            return skip(format!(
                "`type: {other}` with `{key}` is not a transport mcpwall can relay"
            ));
        }
        Some(None) => return skip("`type` is not a string".into()),
    }
    // `${VAR}`: the client expands it in the bridge's arguments as it did in `url`.
    if let Some(why) = url_problem(key, url, true) {
        return skip(why);
    }
    if let Some(auth) = CLIENT_SIDE_AUTH.iter().find(|k| entry.member(k).is_some()) {
        return skip(format!(
            "remote server whose client-side `{auth}` the bridge cannot perform, so `wrap` leaves it"
        ));
    }
    let mut headers = Vec::new();
    if let Some(h) = entry.member("headers") {
        let Some(list) = h.value.members() else {
            return skip("`headers` is not an object".into());
        };
        for header in list {
            let name = header.key.as_str();
            if !is_header_name(name) {
                return skip(format!("header {name:?} is not a valid header name"));
            }
            // The value is never shown: it may be a credential.
            let Some(value) = header.value.as_str() else {
                return skip(format!("the value of header `{name}` is not a string"));
            };
            if value.chars().any(|c| c.is_control() && c != '\t') {
                return skip(format!(
                    "the value of header `{name}` holds a line break or control character"
                ));
            }
            // What the bridge's HTTP client accepts in a value (it refuses to start on more).
            if !value.is_ascii() {
                return skip(format!(
                    "the value of header `{name}` holds non-ASCII characters, which an HTTP header cannot carry as written"
                ));
            }
            if RESERVED_HEADERS
                .iter()
                .any(|r| r.eq_ignore_ascii_case(name))
            {
                return skip(format!(
                    "header `{name}` is one the bridge sets itself; remove it from `headers`, then run `mcpwall wrap` again"
                ));
            }
            if headers
                .iter()
                .any(|h: &String| h.eq_ignore_ascii_case(name))
            {
                return skip(format!("header `{name}` is given twice"));
            }
            headers.push(name.to_string());
        }
        if entry.member("env").is_some() {
            return skip(
                "remote server with both `headers` and `env`: `wrap` moves the headers into `env` and will not merge them; remove `env` (a remote server gets no environment), then run `mcpwall wrap` again".into(),
            );
        }
    }
    Some(EntryState::Remote {
        key: key.to_string(),
        url: url.to_string(),
        headers,
    })
}

/// Why the URL of `key` cannot become the bridge's `--upstream` argument, if it cannot:
/// not http(s) (`expanded`: the client expands a leading `${VAR}` in arguments), or
/// holding a user name, password or query, which would sit in the process list.
pub(super) fn url_problem(key: &str, url: &str, expanded: bool) -> Option<String> {
    let shown = shown_url(url);
    let lower = url.to_ascii_lowercase();
    if !(lower.starts_with("http://")
        || lower.starts_with("https://")
        || (expanded && url.starts_with("${")))
    {
        return Some(format!("`{key}` {shown} is not an http:// or https:// URL"));
    }
    let before_query = url.split(['?', '#']).next().unwrap_or(url);
    let authority = before_query
        .split_once("://")
        .map_or("", |(_, rest)| rest.split('/').next().unwrap_or(rest));
    if authority.contains('@') {
        return Some(
            "the URL holds a user name or password, which would sit in the process list as an argument: move them to `headers`, then run `mcpwall wrap` again".into(),
        );
    }
    if url.split('#').next().unwrap_or(url).contains('?') {
        return Some(format!(
            "the URL {shown} has a query (`?…`), where keys often travel; as the bridge's argument it would be visible to every user in the process list: move a key to `headers` if the server accepts one there, then run `mcpwall wrap` again"
        ));
    }
    None
}

/// Headers the bridge's HTTP client sets itself and refuses from configuration (the list
/// `upstream::is_reserved` enforces at start).
pub(super) const RESERVED_HEADERS: &[&str] = &[
    "host",
    "content-type",
    "content-length",
    "accept",
    "transfer-encoding",
    "connection",
    "mcp-session-id",
    "mcp-protocol-version",
    "last-event-id",
];

/// An HTTP header name: a token (RFC 9110), which also keeps `:` and line breaks out of
/// the `Name: value` lines the bridge reads.
pub(super) fn is_header_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// The original mcpwall's wrapper, if `command args` is one: how many leading args belong
/// to the launcher, then the options up to `--`, then the server.
fn original_wrapper(
    command: &str,
    args: &[String],
    is_node_mcpwall: &dyn Fn(&str) -> bool,
) -> Option<EntryState> {
    let base = basename(command);
    let launcher_args = match base.as_str() {
        "npx" | "npx.cmd" | "npx.exe" => {
            // npx's own flags come first, then the package (any version of it).
            let flags = args
                .iter()
                .take_while(|a| matches!(a.as_str(), "-y" | "--yes" | "-q" | "--quiet"))
                .count();
            let package = args.get(flags)?;
            if package != "mcpwall" && !package.starts_with("mcpwall@") {
                return None;
            }
            flags + 1
        }
        "node" | "node.exe" => {
            if !is_original_script(args.first()?) {
                return None;
            }
            1
        }
        // The script run directly (its `#!` line runs node): a checkout's build.
        _ if is_original_script(command) => 0,
        _ if is_mcpwall(command) && is_node_mcpwall(command) => 0,
        _ => return None,
    };
    let rest = &args[launcher_args..];
    let dash = rest.iter().position(|a| a == "--")?;
    let (inner, inner_args) = rest[dash + 1..].split_first()?;
    let mut launcher = vec![command.to_string()];
    launcher.extend(args[..launcher_args].iter().cloned());
    Some(EntryState::WrappedByOriginal {
        launcher,
        options: OriginalOptions::parse(&rest[..dash]),
        command: inner.clone(),
        args: inner_args.to_vec(),
    })
}

/// A URL as printed in a hint: without credentials, query or fragment (where tokens
/// travel), so the hint never puts one on a screen or in a terminal log; a control or
/// invisible character (a bidi override) is written as `\u{…}`, never sent to the terminal.
pub fn shown_url(url: &str) -> String {
    let cut = url.find(['?', '#']).unwrap_or(url.len());
    let url = &url[..cut];
    let bare = match (url.find("://"), url.find('@')) {
        (Some(scheme), Some(at)) if at > scheme && !url[scheme + 3..at].contains('/') => {
            format!("{}{}", &url[..scheme + 3], &url[at + 1..])
        }
        _ => url.to_string(),
    };
    bare.chars()
        .map(|c| {
            if c.is_control() || crate::text::normalize::is_invisible(c) {
                format!("\\u{{{:x}}}", c as u32)
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// Whether `path` is the original's entry script, `…/mcpwall/dist/<name>.js`, in an npm
/// install (`node_modules/mcpwall`) or in a checkout built from its repository.
fn is_original_script(path: &str) -> bool {
    let script = path.replace('\\', "/");
    let parts: Vec<&str> = script.rsplit('/').take(3).collect();
    parts.len() == 3
        && parts[2].eq_ignore_ascii_case("mcpwall")
        && parts[1] == "dist"
        && parts[0].ends_with(".js")
}

/// The options of the original mcpwall's wrapper that `command args` (a server line) is,
/// if it is one in its `npx` or `node` form: a server this mcpwall wraps that is itself
/// behind the original (wrapped twice, as an older `mcpwall wrap` did).
pub fn original_inside(command: &str, args: &[String]) -> Option<OriginalOptions> {
    match original_wrapper(command, args, &|_| false)? {
        EntryState::WrappedByOriginal { options, .. } => Some(options),
        _ => None,
    }
}

fn basename(command: &str) -> String {
    command
        .rsplit(['/', '\\'])
        .next()
        .unwrap_or(command)
        .to_ascii_lowercase()
}

/// Whether the `mcpwall` a client would start for `command` is the original (Node) one: it
/// resolves (on `path_var`) to a `.js` file inside a `node_modules/mcpwall` package, or to
/// a script whose `#!` line runs node (npm's global install links the package's script).
pub fn is_node_mcpwall(command: &str, path_var: Option<&std::ffi::OsStr>) -> bool {
    let Some(found) = resolve_on_path(command, path_var, None) else {
        return false;
    };
    let real = std::fs::canonicalize(&found).unwrap_or(found);
    // This mcpwall's own npm launcher is a node script too, and starts the native binary.
    if super::install::npm_launcher_of(&real).is_some() {
        return false;
    }
    let shown = real.to_string_lossy().replace('\\', "/");
    // A script of the npm package (not a native binary that happens to be shipped in one).
    if shown.contains("/node_modules/mcpwall/") && shown.ends_with(".js") {
        return true;
    }
    let mut head = [0u8; 128];
    let n = std::fs::File::open(&real)
        .and_then(|mut f| std::io::Read::read(&mut f, &mut head))
        .unwrap_or(0);
    let first_line = head[..n].split(|&b| b == b'\n').next().unwrap_or_default();
    first_line.starts_with(b"#!") && first_line.windows(4).any(|w| w == b"node")
}

/// Whether a command names mcpwall (by basename, with or without `.exe`).
pub fn is_mcpwall(command: &str) -> bool {
    let base = command.rsplit(['/', '\\']).next().unwrap_or(command);
    let base = base.to_ascii_lowercase();
    base == "mcpwall" || base == "mcpwall.exe"
}

fn string_list(node: &Node) -> Option<Vec<String>> {
    match &node.kind {
        Kind::Array(items) => items
            .iter()
            .map(|n| n.as_str().map(str::to_string))
            .collect(),
        _ => None,
    }
}

/// The command to put in front of servers: `mcpwall` when the `mcpwall` found on `PATH` is
/// this very binary, otherwise this binary's absolute path as it was started (not resolved
/// through symlinks, so a package manager's stable link survives upgrades).
pub fn wrapper_command(path_var: Option<&std::ffi::OsStr>, current_exe: &Path) -> String {
    let me = std::fs::canonicalize(current_exe).unwrap_or_else(|_| current_exe.to_path_buf());
    if let Some(found) = resolve_on_path("mcpwall", path_var, None)
        && std::fs::canonicalize(&found).is_ok_and(|f| f == me)
    {
        return "mcpwall".to_string();
    }
    std::path::absolute(current_exe)
        .unwrap_or(me)
        .to_string_lossy()
        .into_owned()
}

/// Resolve a command the way a client's process spawner would: a name with a path
/// separator is taken relative to `cwd`; a bare name is searched on `PATH`.
pub fn resolve_on_path(
    command: &str,
    path_var: Option<&std::ffi::OsStr>,
    cwd: Option<&Path>,
) -> Option<std::path::PathBuf> {
    let has_separator = command.contains('/') || (cfg!(windows) && command.contains('\\'));
    if has_separator {
        let path = Path::new(command);
        let path = match cwd {
            Some(cwd) if path.is_relative() => cwd.join(path),
            _ => path.to_path_buf(),
        };
        return is_executable(&path).then_some(path);
    }
    let extensions: &[&str] = if cfg!(windows) {
        &["", ".exe", ".cmd", ".bat"]
    } else {
        &[""]
    };
    std::env::split_paths(path_var?).find_map(|dir| {
        extensions.iter().find_map(|ext| {
            let candidate = dir.join(format!("{command}{ext}"));
            is_executable(&candidate).then_some(candidate)
        })
    })
}

fn is_executable(path: &Path) -> bool {
    let Ok(meta) = std::fs::metadata(path) else {
        return false;
    };
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        meta.is_file() && meta.permissions().mode() & 0o111 != 0
    }
    #[cfg(not(unix))]
    {
        meta.is_file()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clients::json_span::{Dialect, parse};

    fn state(text: &str) -> EntryState {
        EntryState::of(&parse(text, Dialect::Json).unwrap())
    }

    #[test]
    fn classifies_entries() {
        assert_eq!(
            state(r#"{"command":"npx","args":["-y","srv"]}"#),
            EntryState::Unwrapped {
                command: "npx".into(),
                args: vec!["-y".into(), "srv".into()]
            }
        );
        assert_eq!(
            state(
                r#"{"type":"http","url":"https://x/mcp","headers":{"Authorization":"Bearer ${T}"}}"#
            ),
            EntryState::Remote {
                key: "url".into(),
                url: "https://x/mcp".into(),
                headers: vec!["Authorization".into()]
            }
        );
        assert_eq!(
            state(
                r#"{"command":"mcpwall","args":["--server-name","x","--upstream","https://x/mcp"]}"#
            ),
            EntryState::WrappedRemote {
                wrapper: "mcpwall".into(),
                options: ["--server-name", "x", "--upstream", "https://x/mcp"]
                    .map(String::from)
                    .to_vec(),
                url: "https://x/mcp".into()
            }
        );
        // A header name that would break the bridge's `Name: value` lines is refused.
        assert!(matches!(
            state(r#"{"url":"https://x/mcp","headers":{"A:B":"v"}}"#),
            EntryState::Skipped(_)
        ));
        assert!(matches!(
            state(r#"{"type":"sse","command":"x"}"#),
            EntryState::Skipped(_)
        ));
        assert!(matches!(
            state(r#"{"serverUrl":"https://x"}"#),
            EntryState::Remote { .. }
        ));
        assert_eq!(
            state(
                r#"{"command":"/opt/bin/mcpwall","args":["--server-name","a","--","node","s.js"]}"#
            ),
            EntryState::Wrapped {
                wrapper: "/opt/bin/mcpwall".into(),
                options: vec!["--server-name".into(), "a".into()],
                command: "node".into(),
                args: vec!["s.js".into()]
            }
        );
        // A server whose own arguments contain `--` is not mistaken for a wrapped one.
        assert!(matches!(
            state(r#"{"command":"uvx","args":["srv","--","x"]}"#),
            EntryState::Unwrapped { .. }
        ));
        assert!(is_mcpwall(r"C:\Tools\MCPWALL.EXE"));
    }

    #[test]
    fn a_remote_entry_hint_shows_no_credentials() {
        assert_eq!(
            shown_url("https://u:p@h.example/mcp?key=x#f"),
            "https://h.example/mcp"
        );
        assert_eq!(
            shown_url("http://localhost:3001/sse"),
            "http://localhost:3001/sse"
        );
        assert_eq!(
            shown_url("https://h.example/\u{202E}lmth.mcp\u{1b}[8m"),
            "https://h.example/\\u{202e}lmth.mcp\\u{1b}[8m"
        );
    }

    /// Issue 27: every documented form of the original's wrapper, with its options.
    #[test]
    fn r27_recognises_the_original_wrappers() {
        let node_state = |text: &str, node: bool| {
            EntryState::classify(&parse(text, Dialect::Json).unwrap(), &|_| node)
        };
        let cases: &[(&str, &[&str], &[&str], bool)] = &[
            (
                r#"{"command":"npx","args":["-y","mcpwall","--","npx","-y","srv","/tmp"]}"#,
                &["npx", "-y", "mcpwall"],
                &[],
                false,
            ),
            (
                r#"{"command":"npx","args":["mcpwall@0.3.1","-c","team.yml","--log-level","debug","--strict","--","srv"]}"#,
                &["npx", "mcpwall@0.3.1"],
                &["-c", "team.yml", "--log-level", "debug", "--strict"],
                false,
            ),
            (
                r#"{"command":"node","args":["/usr/lib/node_modules/mcpwall/dist/index.js","--config=/x.yml","--","srv"]}"#,
                &["node", "/usr/lib/node_modules/mcpwall/dist/index.js"],
                &["--config=/x.yml"],
                false,
            ),
            (
                r#"{"command":"node","args":["/home/me/src/mcpwall/dist/index.js","--","srv"]}"#,
                &["node", "/home/me/src/mcpwall/dist/index.js"],
                &[],
                false,
            ),
            (
                r#"{"command":"/home/me/src/mcpwall/dist/index.js","args":["-c","team.yml","--","srv"]}"#,
                &["/home/me/src/mcpwall/dist/index.js"],
                &["-c", "team.yml"],
                false,
            ),
            (
                r#"{"command":"mcpwall","args":["--log-level=warn","--","srv"]}"#,
                &["mcpwall"],
                &["--log-level=warn"],
                true,
            ),
        ];
        for (text, launcher, options, node) in cases {
            match node_state(text, *node) {
                EntryState::WrappedByOriginal {
                    launcher: l,
                    options: o,
                    command,
                    ..
                } => {
                    assert_eq!(l, *launcher, "{text}");
                    assert_eq!(o.written, *options, "{text}");
                    assert!(o.unknown.is_empty(), "{text}: {o:?}");
                    assert!(command == "srv" || command == "npx", "{text}");
                }
                other => panic!("{text}: {other:?}"),
            }
        }
        let o = OriginalOptions::parse(
            &["-c", "a.yml", "--log-level", "debug", "--strict"].map(String::from),
        );
        assert_eq!(
            (o.config.as_deref(), o.log_level.as_deref(), o.strict),
            (Some("a.yml"), Some("debug"), true)
        );
        assert_eq!(
            OriginalOptions::parse(&["--verbose".into()]).unknown,
            ["--verbose"]
        );
        // This mcpwall's own form, and other packages run by npx, are not the original.
        assert!(matches!(
            node_state(
                r#"{"command":"mcpwall","args":["--server-name","a","--","srv"]}"#,
                false
            ),
            EntryState::Wrapped { .. }
        ));
        assert!(matches!(
            node_state(
                r#"{"command":"npx","args":["-y","mcpwall-other","--","srv"]}"#,
                false
            ),
            EntryState::Unwrapped { .. }
        ));
        assert!(matches!(
            node_state(
                r#"{"command":"node","args":["/srv/dist/index.js","--","x"]}"#,
                false
            ),
            EntryState::Unwrapped { .. }
        ));
    }
}
