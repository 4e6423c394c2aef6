//! Codex's remote servers (`[mcp_servers.NAME]` with `url` in `config.toml`): which ones the
//! bridge can serve faithfully, and the edits that make one a bridge and back.
//!
//! Codex keeps a remote server's credentials as references or in keys of its own:
//! `bearer_token_env_var = "VAR"` (sent as `Authorization: Bearer $VAR`),
//! `env_http_headers = { "Header" = "VAR" }`, and literal `http_headers`. A stdio server it
//! starts gets only a few variables of Codex's environment (`HOME`, `PATH`, …), those its
//! `env_vars` names, and its `env`, taken literally (Codex expands nothing there). So the
//! bridge entry keeps every credential a reference, never writing a value into the file:
//!
//! ```toml
//! [mcp_servers.NAME]
//! command = "mcpwall"
//! args = ["--server-name", "NAME", "--upstream", "URL"]
//! env = { MCPWALL_UPSTREAM_BEARER_ENV = "VAR", MCPWALL_UPSTREAM_ENV_HEADERS = "Header: VAR2", MCPWALL_UPSTREAM_HEADERS = "X-Region: eu" }
//! env_vars = ["VAR", "VAR2"]
//! ```
//!
//! The bridge reads `$VAR` and `$VAR2` at start and refuses to start when one is unset
//! (`upstream::referenced_credentials`). A TOML table has no single span, so the wrap
//! record keeps the stretch of the file the edit changed ([`Stretch`]).

use super::edit::{self, EditError, Format, Splice};
use super::entry::{self, EntryState};
use super::entry::{HEADER_VARS_ENV, TOKEN_VAR_ENV, is_variable_name};
use super::json_span::{Kind, Member, Node};

/// The keys holding a Codex remote server's credentials, which the bridge entry carries
/// in `env` and `env_vars` instead.
const CREDENTIAL_KEYS: &[&str] = &["bearer_token_env_var", "http_headers", "env_http_headers"];

/// Keys Codex accepts on any server and that mean the same on the stdio entry the bridge
/// is (timeouts, switches, tool lists and approvals): kept as they are.
const SHARED_KEYS: &[&str] = &[
    "startup_timeout_sec",
    "startup_timeout_ms",
    "tool_timeout_sec",
    "enabled",
    "required",
    "supports_parallel_tool_calls",
    "default_tools_approval_mode",
    "enabled_tools",
    "disabled_tools",
    "tools",
    "name",
];

/// A Codex remote server the bridge can serve: everything it sends, by reference where
/// Codex has a reference.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CodexRemote {
    /// The URL.
    pub url: String,
    /// `bearer_token_env_var`: the variable holding the bearer token.
    pub bearer_var: Option<String>,
    /// `http_headers`: literal headers, in file order.
    pub literal: Vec<(String, String)>,
    /// `env_http_headers`: header name and the variable holding its value, in file order.
    pub referenced: Vec<(String, String)>,
}

impl CodexRemote {
    /// Read a Codex entry with `url`; the error is why `wrap` leaves it (the reason a user
    /// reads in `status` and `wrap`).
    pub fn read(entry: &Node) -> Result<CodexRemote, String> {
        let members = entry.members().ok_or("the entry is not a table")?;
        let url = entry
            .member("url")
            .and_then(|m| m.value.as_str())
            .ok_or("`url` is not a string")?;
        if let Some(why) = entry::url_problem("url", url, false) {
            return Err(why.replace("`headers`", "`http_headers`/`env_http_headers`"));
        }
        for m in members {
            let key = m.key.as_str();
            if key == "url" || CREDENTIAL_KEYS.contains(&key) || SHARED_KEYS.contains(&key) {
                continue;
            }
            return Err(match key {
                "oauth" | "oauth_resource" | "scopes" => format!(
                    "Codex remote server that signs in with OAuth (`{key}`), which the bridge cannot do, so `wrap` leaves it"
                ),
                "bearer_token" => "Codex refuses an inline `bearer_token` on a url entry: put the token in a variable and name it in `bearer_token_env_var`, then run `mcpwall wrap` again".into(),
                "command" | "args" | "env" | "env_vars" | "cwd" => format!(
                    "both `url` and `{key}`: Codex refuses such an entry; keep one, then run `mcpwall wrap` again"
                ),
                "experimental_environment" => "Codex starts this server in another environment (`experimental_environment`), where mcpwall may not be: `wrap` leaves it".into(),
                other => format!(
                    "Codex remote server with `{other}`, a setting mcpwall does not know, so it cannot tell whether the bridge would serve the server the same way: `wrap` leaves it"
                ),
            });
        }
        let mut out = CodexRemote {
            url: url.to_string(),
            ..CodexRemote::default()
        };
        if let Some(m) = entry.member("bearer_token_env_var") {
            let name = m
                .value
                .as_str()
                .ok_or("`bearer_token_env_var` is not a string")?;
            if !is_variable_name(name) {
                return Err(format!(
                    "`bearer_token_env_var` {name:?} is not an environment variable name"
                ));
            }
            out.bearer_var = Some(name.to_string());
        }
        out.literal = header_map(entry, "http_headers", |name, value| {
            if value.chars().any(|c| c.is_control() && c != '\t') {
                return Err(format!(
                    "the value of header `{name}` holds a line break or control character"
                ));
            }
            if !value.is_ascii() {
                return Err(format!(
                    "the value of header `{name}` holds non-ASCII characters, which an HTTP header cannot carry as written"
                ));
            }
            Ok(())
        })?;
        out.referenced = header_map(entry, "env_http_headers", |name, var| {
            if is_variable_name(var) {
                Ok(())
            } else {
                Err(format!(
                    "`env_http_headers` names {var:?} for header `{name}`, which is not an environment variable name"
                ))
            }
        })?;
        let mut seen: Vec<&str> = Vec::new();
        if out.bearer_var.is_some() {
            seen.push("Authorization");
        }
        for (name, _) in out.literal.iter().chain(&out.referenced) {
            if seen.iter().any(|s| s.eq_ignore_ascii_case(name)) {
                return Err(format!(
                    "header `{name}` is given twice (`bearer_token_env_var` sends Authorization): keep one, then run `mcpwall wrap` again"
                ));
            }
            seen.push(name);
        }
        Ok(out)
    }

    /// The names of the headers it sends (never their values).
    pub fn header_names(&self) -> Vec<String> {
        let mut names = Vec::new();
        if self.bearer_var.is_some() {
            names.push("Authorization".to_string());
        }
        names.extend(
            self.literal
                .iter()
                .chain(&self.referenced)
                .map(|(n, _)| n.clone()),
        );
        names
    }

    /// The bridge entry's `env`, in the order written.
    pub fn bridge_env(&self) -> Vec<(String, String)> {
        let mut env = Vec::new();
        if let Some(var) = &self.bearer_var {
            env.push((TOKEN_VAR_ENV.to_string(), var.clone()));
        }
        if !self.referenced.is_empty() {
            env.push((HEADER_VARS_ENV.to_string(), lines(&self.referenced)));
        }
        if !self.literal.is_empty() {
            env.push((
                entry::UPSTREAM_HEADERS_ENV.to_string(),
                lines(&self.literal),
            ));
        }
        env
    }

    /// The bridge entry's `env_vars`: every variable a credential is read from, once.
    pub fn env_vars(&self) -> Vec<String> {
        let mut vars: Vec<String> = Vec::new();
        for var in self
            .bearer_var
            .iter()
            .chain(self.referenced.iter().map(|(_, v)| v))
        {
            if !vars.contains(var) {
                vars.push(var.clone());
            }
        }
        vars
    }
}

fn lines(pairs: &[(String, String)]) -> String {
    pairs
        .iter()
        .map(|(n, v)| format!("{n}: {v}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The `key` table of header names to strings, each checked by `check`.
fn header_map(
    entry: &Node,
    key: &str,
    check: impl Fn(&str, &str) -> Result<(), String>,
) -> Result<Vec<(String, String)>, String> {
    let Some(m) = entry.member(key) else {
        return Ok(Vec::new());
    };
    let list = m
        .value
        .members()
        .ok_or_else(|| format!("`{key}` is not a table"))?;
    let mut out = Vec::new();
    for h in list {
        let name = h.key.as_str();
        if !entry::is_header_name(name) {
            return Err(format!("header {name:?} is not a valid header name"));
        }
        if entry::RESERVED_HEADERS
            .iter()
            .any(|r| r.eq_ignore_ascii_case(name))
        {
            return Err(format!(
                "header `{name}` is one the bridge sets itself; remove it from `{key}`, then run `mcpwall wrap` again"
            ));
        }
        // The value is never shown: it may be a credential.
        let value = h
            .value
            .as_str()
            .ok_or_else(|| format!("the value of header `{name}` is not a string"))?;
        check(name, value)?;
        out.push((name.to_string(), value.to_string()));
    }
    Ok(out)
}

/// The state of a Codex entry with `url`: [`EntryState::Remote`] when the bridge can serve
/// it, else skipped with the reason.
pub fn state(entry: &Node) -> EntryState {
    match CodexRemote::read(entry) {
        Ok(remote) => state_of(&remote),
        Err(why) => EntryState::Skipped(why),
    }
}

/// [`EntryState::Remote`] for a server read.
pub fn state_of(remote: &CodexRemote) -> EntryState {
    EntryState::Remote {
        key: "url".into(),
        headers: remote.header_names(),
        url: remote.url.clone(),
    }
}

/// The stretch of a client file a Codex wrap changed: its bytes before and after, and
/// where it begins, counted back from the `command` key of the bridge entry (how `unwrap`
/// finds it again in a file edited elsewhere since).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stretch {
    /// The bytes before the wrap.
    pub original: String,
    /// The bytes after it.
    pub wrapped: String,
    /// Bytes from the stretch's start to the `command` key.
    pub before_command: usize,
}

/// What [`wrap_splices`] does to an entry.
#[derive(Debug, Clone)]
pub struct Bridged {
    /// The edit.
    pub splices: Vec<Splice>,
    /// The server, as read.
    pub remote: CodexRemote,
    /// The stretch of the file the edit changes.
    pub stretch: Stretch,
}

/// Make the Codex remote entry at `path` a stdio entry running mcpwall's bridge: `url`
/// becomes `command = wrapper` and `args = ["--server-name", name, "--upstream", <url>]` in
/// its place (the URL's bytes kept); the first credential key becomes `env` (and
/// `env_vars`) in its place, and the others go. Every other byte stays. Each edited key must
/// sit on a line of its own as `key = value` in the entry's `[mcp_servers.NAME]` table.
pub fn wrap_splices(
    text: &str,
    root: &Node,
    path: &[String],
    name: &str,
    wrapper: &str,
) -> Result<Bridged, EditError> {
    let no_entry = || EditError::NoEntry(path.join("."));
    let entry = root.at(path).ok_or_else(no_entry)?;
    let remote = CodexRemote::read(entry).map_err(EditError::Layout)?;
    if text.as_bytes().get(entry.span.start) == Some(&b'{') {
        return Err(EditError::Layout(
            "written as an inline table: write it as a `[mcp_servers.NAME]` table, then run `mcpwall wrap` again".into(),
        ));
    }
    let url = entry.member("url").ok_or_else(no_entry)?;
    let mut edited: Vec<&Member> = vec![url];
    edited.extend(
        entry
            .members()
            .unwrap_or_default()
            .iter()
            .filter(|m| CREDENTIAL_KEYS.contains(&m.key.as_str())),
    );
    for m in &edited {
        own_line(text, m)?;
    }
    let format = Format::Toml;
    let lit = |s: &str| edit::string_literal(format, s);
    let style = edit::member_style(text, format, entry, url)?;
    let mut args: Vec<String> = if name.starts_with('-') {
        vec![lit(&format!("--server-name={name}"))]
    } else {
        vec![lit("--server-name"), lit(name)]
    };
    args.extend([lit("--upstream"), text[url.value.span.clone()].to_string()]);
    let mut splices = vec![Splice {
        range: url.key_span.start..url.value.span.end,
        with: format!(
            "command{}{}{}args{}[{}]",
            style.colon,
            lit(wrapper),
            style.separator,
            style.colon,
            args.join(", ")
        ),
    }];
    let mut credentials: Vec<&&Member> = edited[1..].iter().collect();
    credentials.sort_by_key(|m| m.key_span.start);
    if let Some((first, rest)) = credentials.split_first() {
        let first_style = edit::member_style(text, format, entry, first)?;
        let env: Vec<String> = remote
            .bridge_env()
            .iter()
            .map(|(k, v)| format!("{k} = {}", lit(v)))
            .collect();
        let mut with = format!("env{}{{ {} }}", first_style.colon, env.join(", "));
        let vars = remote.env_vars();
        if !vars.is_empty() {
            let vars: Vec<String> = vars.iter().map(|v| lit(v)).collect();
            with.push_str(&format!(
                "{}env_vars{}[{}]",
                first_style.separator,
                first_style.colon,
                vars.join(", ")
            ));
        }
        splices.push(Splice {
            range: first.key_span.start..first.value.span.end,
            with,
        });
        for m in rest {
            splices.push(edit::remove_member(text, format, entry, &m.key)?);
        }
    }
    let stretch = stretch_of(text, &splices, url.key_span.start);
    Ok(Bridged {
        splices,
        remote,
        stretch,
    })
}

/// A member written `key = value` on a line of its own, its value on that line: not a
/// dotted key, not a sub-table (`[mcp_servers.NAME.http_headers]`).
fn own_line(text: &str, m: &Member) -> Result<(), EditError> {
    let between = &text[m.key_span.end..m.value.span.start.max(m.key_span.end)];
    let line_start = text[..m.key_span.start].rfind('\n').map_or(0, |i| i + 1);
    let value = &text[m.value.span.clone()];
    let inline = match m.value.kind {
        Kind::Object(_) => value.starts_with('{'),
        _ => true,
    };
    if m.value.span.is_empty()
        || between.trim_matches([' ', '\t']) != "="
        || !text[line_start..m.key_span.start]
            .chars()
            .all(|c| c == ' ' || c == '\t')
        || !inline
    {
        return Err(EditError::Layout(format!(
            "`{}` is not written as `{} = …` on a line of its own in the server's table: write it so, then run `mcpwall wrap` again",
            m.key, m.key
        )));
    }
    Ok(())
}

/// The stretch of `text` the splices change, before and after.
fn stretch_of(text: &str, splices: &[Splice], command_at: usize) -> Stretch {
    let start = splices.iter().map(|s| s.range.start).min().unwrap_or(0);
    let end = splices.iter().map(|s| s.range.end).max().unwrap_or(0);
    let shifted = splices
        .iter()
        .map(|s| Splice {
            range: s.range.start - start..s.range.end - start,
            with: s.with.clone(),
        })
        .collect();
    let grown: isize = splices
        .iter()
        .filter(|s| s.range.end <= command_at && s.range.start < command_at)
        .map(|s| s.with.len() as isize - s.range.len() as isize)
        .sum();
    Stretch {
        original: text[start..end].to_string(),
        wrapped: edit::apply(&text[start..end], shifted),
        before_command: (command_at as isize - start as isize + grown) as usize,
    }
}

/// Put the stretch a wrap changed back byte for byte, if the file still holds exactly what
/// the wrap wrote there; `None` when it does not (the entry was edited since).
pub fn restore_splices(
    text: &str,
    root: &Node,
    path: &[String],
    stretch: &Stretch,
) -> Option<Vec<Splice>> {
    let command = root.at(path)?.member("command")?;
    let start = command.key_span.start.checked_sub(stretch.before_command)?;
    let end = start + stretch.wrapped.len();
    (text.get(start..end) == Some(stretch.wrapped.as_str())).then(|| {
        vec![Splice {
            range: start..end,
            with: stretch.original.clone(),
        }]
    })
}

/// Check a record's stretch: the original bytes must read as a Codex remote server the
/// bridge serves, and the wrapped ones as that server behind mcpwall. Returns the server.
pub fn check_stretch(stretch: &Stretch) -> Result<CodexRemote, String> {
    let parse =
        |text: &str| super::toml_span::parse(text).map_err(|e| format!("not TOML lines ({e})"));
    let original = parse(&stretch.original)?;
    let remote = CodexRemote::read(&original)
        .map_err(|why| format!("its `original` is not a remote server `wrap` bridges ({why})"))?;
    let wrapped = parse(&stretch.wrapped)?;
    match EntryState::of(&wrapped) {
        EntryState::WrappedRemote { url, .. } if url == remote.url => {}
        _ => return Err("its `wrapped` is not its `original` server behind mcpwall".into()),
    }
    if !stretch.wrapped[stretch.before_command.min(stretch.wrapped.len())..].starts_with("command")
    {
        return Err("its stretch does not begin where it says".into());
    }
    Ok(remote)
}

/// Undo a bridge on the entry as it is now (edited since `wrap`, or never recorded):
/// `command` becomes `url` holding the `--upstream` URL, `args` goes, an `env` holding only
/// the bridge's variables becomes the credential keys again, and an `env_vars` naming only
/// the variables they reference goes. Everything else the entry holds stays.
pub fn unbridge_splices(
    text: &str,
    root: &Node,
    path: &[String],
) -> Result<(Vec<Splice>, CodexRemote), EditError> {
    let no_entry = || EditError::NoEntry(path.join("."));
    let layout = |why: &str| EditError::Layout(why.to_string());
    let entry = root.at(path).ok_or_else(no_entry)?;
    let command = entry.member("command").ok_or_else(no_entry)?;
    let url = match EntryState::of(entry) {
        EntryState::WrappedRemote { url, .. } => url,
        _ => return Err(no_entry()),
    };
    let mut remote = CodexRemote {
        url,
        ..CodexRemote::default()
    };
    if let Some(env) = entry.member("env") {
        for m in env.value.members().ok_or_else(no_entry)? {
            let value = m.value.as_str().ok_or_else(no_entry)?;
            let pairs = || -> Result<Vec<(String, String)>, EditError> {
                value
                    .lines()
                    .filter(|l| !l.trim().is_empty())
                    .map(|l| {
                        let (n, v) = l.split_once(':').ok_or_else(no_entry)?;
                        Ok((n.trim().to_string(), v.trim().to_string()))
                    })
                    .collect()
            };
            match m.key.as_str() {
                TOKEN_VAR_ENV => remote.bearer_var = Some(value.trim().to_string()),
                HEADER_VARS_ENV => remote.referenced = pairs()?,
                k if k == entry::UPSTREAM_HEADERS_ENV => remote.literal = pairs()?,
                _ => {
                    return Err(layout(
                        "its `env` holds more than the bridge's variables, which a Codex url entry cannot carry: take them out, then run `mcpwall unwrap` again",
                    ));
                }
            }
        }
        own_line(text, env)?;
    }
    if let Some(vars) = entry.member("env_vars") {
        let wanted = remote.env_vars();
        let names: Option<Vec<&str>> = vars
            .value
            .elements()
            .and_then(|els| els.iter().map(Node::as_str).collect());
        if names.is_none_or(|n| n.iter().any(|v| !wanted.iter().any(|w| w == v))) {
            return Err(layout(
                "its `env_vars` names variables no credential reads, which a Codex url entry cannot carry: take them out, then run `mcpwall unwrap` again",
            ));
        }
    }
    if entry.member("cwd").is_some() {
        return Err(layout(
            "it has `cwd`, which a Codex url entry cannot carry: take it out, then run `mcpwall unwrap` again",
        ));
    }
    own_line(text, command)?;
    let format = Format::Toml;
    let lit = |s: &str| edit::string_literal(format, s);
    let style = edit::member_style(text, format, entry, command)?;
    let mut splices = vec![Splice {
        range: command.key_span.start..command.value.span.end,
        with: format!("url{}{}", style.colon, lit(&remote.url)),
    }];
    if entry.member("args").is_some() {
        splices.push(edit::remove_member(text, format, entry, "args")?);
    }
    if let Some(env) = entry.member("env") {
        let table = |pairs: &[(String, String)]| {
            let items: Vec<String> = pairs
                .iter()
                .map(|(n, v)| format!("{} = {}", lit(n), lit(v)))
                .collect();
            format!("{{ {} }}", items.join(", "))
        };
        let mut keys = Vec::new();
        if let Some(var) = &remote.bearer_var {
            keys.push(format!("bearer_token_env_var{}{}", style.colon, lit(var)));
        }
        if !remote.literal.is_empty() {
            keys.push(format!(
                "http_headers{}{}",
                style.colon,
                table(&remote.literal)
            ));
        }
        if !remote.referenced.is_empty() {
            keys.push(format!(
                "env_http_headers{}{}",
                style.colon,
                table(&remote.referenced)
            ));
        }
        if keys.is_empty() {
            splices.push(edit::remove_member(text, format, entry, "env")?);
        } else {
            splices.push(Splice {
                range: env.key_span.start..env.value.span.end,
                with: keys.join(&style.separator),
            });
        }
    }
    if entry.member("env_vars").is_some() {
        splices.push(edit::remove_member(text, format, entry, "env_vars")?);
    }
    Ok((splices, remote))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(p: &[&str]) -> Vec<String> {
        p.iter().map(|s| s.to_string()).collect()
    }

    const ENTRY: &str = "[mcp_servers.docs]\n# hosted docs\nurl = \"https://h.example/mcp\" # prod\nbearer_token_env_var = \"DOCS_TOKEN\"\ntool_timeout_sec = 30\nhttp_headers = { \"X-Region\" = \"eu\" }\nenv_http_headers = { \"X-Api-Key\" = \"DOCS_KEY\" }\n\n[mcp_servers.docs.tools.search]\napproval_mode = \"approve\"\n";

    #[test]
    fn a_remote_entry_becomes_a_bridge_with_references_and_comes_back() {
        let p = path(&["mcp_servers", "docs"]);
        let root = super::super::toml_span::parse(ENTRY).unwrap();
        let bridged = wrap_splices(ENTRY, &root, &p, "docs", "mcpwall").unwrap();
        let out = edit::apply(ENTRY, bridged.splices.clone());
        assert_eq!(
            out,
            "[mcp_servers.docs]\n# hosted docs\ncommand = \"mcpwall\"\nargs = [\"--server-name\", \"docs\", \"--upstream\", \"https://h.example/mcp\"] # prod\nenv = { MCPWALL_UPSTREAM_BEARER_ENV = \"DOCS_TOKEN\", MCPWALL_UPSTREAM_ENV_HEADERS = \"X-Api-Key: DOCS_KEY\", MCPWALL_UPSTREAM_HEADERS = \"X-Region: eu\" }\nenv_vars = [\"DOCS_TOKEN\", \"DOCS_KEY\"]\ntool_timeout_sec = 30\n\n[mcp_servers.docs.tools.search]\napproval_mode = \"approve\"\n"
        );
        check_stretch(&bridged.stretch).unwrap();
        let after = super::super::toml_span::parse(&out).unwrap();
        let back = restore_splices(&out, &after, &p, &bridged.stretch).unwrap();
        assert_eq!(edit::apply(&out, back), ENTRY);
        // Without the record: the same server, its keys in the bridge's order.
        let (splices, remote) = unbridge_splices(&out, &after, &p).unwrap();
        assert_eq!(remote, bridged.remote);
        let rebuilt = edit::apply(&out, splices);
        let again = super::super::toml_span::parse(&rebuilt).unwrap();
        assert_eq!(
            CodexRemote::read(again.at(&p).unwrap()).unwrap(),
            bridged.remote,
            "{rebuilt}"
        );
    }

    #[test]
    fn entries_the_bridge_cannot_serve_say_why() {
        let cases = [
            ("oauth = { client_id = \"x\" }", "OAuth"),
            ("scopes = [\"read\"]", "OAuth"),
            ("bearer_token = \"x\"", "inline `bearer_token`"),
            (
                "bearer_token_env_var = \"A-B\"",
                "not an environment variable name",
            ),
            ("http_headers = { \"Host\" = \"x\" }", "sets itself"),
            (
                "env_http_headers = { \"Authorization\" = \"T\" }\nbearer_token_env_var = \"T\"",
                "given twice",
            ),
            ("whatever = 1", "does not know"),
        ];
        for (extra, why) in cases {
            let text = format!("[mcp_servers.x]\nurl = \"https://h/mcp\"\n{extra}\n");
            let root = super::super::toml_span::parse(&text).unwrap();
            match state(root.at(&["mcp_servers", "x"]).unwrap()) {
                EntryState::Skipped(reason) => assert!(reason.contains(why), "{extra}: {reason}"),
                other => panic!("{extra}: {other:?}"),
            }
        }
        let text =
            "[mcp_servers.x]\nurl = \"https://h/mcp\"\n[mcp_servers.x.http_headers]\nX-A = \"v\"\n";
        let root = super::super::toml_span::parse(text).unwrap();
        let err = wrap_splices(text, &root, &path(&["mcp_servers", "x"]), "x", "mcpwall");
        assert!(matches!(err, Err(EditError::Layout(_))), "{err:?}");
    }
}
