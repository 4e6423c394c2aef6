//! What a server entry is: wrappable, already wrapped, or out of a stdio proxy's reach.
//!
//! The wrapped form (documented in docs/clients.md) is
//! `"command": "<mcpwall>", "args": ["--server-name", "<name>", "--", "<orig command>", <orig args…>]`.
//! An entry counts as wrapped when its command's basename is `mcpwall` and its args
//! contain `--`: that holds for entries wrapped by hand too, and never for a server that
//! merely has `--` among its own arguments.

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
    /// Cannot be wrapped by a stdio proxy; the reason says why.
    Skipped(String),
}

impl EntryState {
    /// Classify an entry value.
    pub fn of(entry: &Node) -> EntryState {
        if entry.members().is_none() {
            return EntryState::Skipped("the entry is not an object".into());
        }
        for key in ["url", "serverUrl"] {
            if entry.member(key).is_some() {
                return EntryState::Skipped(format!(
                    "remote server (`{key}`): a stdio proxy cannot wrap it"
                ));
            }
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
        assert!(matches!(
            state(r#"{"type":"http","url":"https://x"}"#),
            EntryState::Skipped(_)
        ));
        assert!(matches!(
            state(r#"{"type":"sse","command":"x"}"#),
            EntryState::Skipped(_)
        ));
        assert!(matches!(
            state(r#"{"serverUrl":"https://x"}"#),
            EntryState::Skipped(_)
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
}
