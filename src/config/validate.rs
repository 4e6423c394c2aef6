//! Decoding one file's YAML tree into a [`RawPolicy`], checking everything a single file can
//! get wrong: unknown keys (with "did you mean"), wrong types, missing keys, bad words,
//! regexes, globs, variables, thresholds, empty conditions and duplicate names.
//!
//! Nothing stops at the first problem: each check pushes a diagnostic and decoding goes on
//! with the next key, so one run lists every problem in the file.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::diag::{Code, PolicyDiagnostic};
use super::model::{
    Lines, Node, RawPolicy, RawSandbox, RawSettings, YNode, node_span, span_of_location,
};
use super::policy::{
    Action, ArgCondition, ArgSelector, BackupSettings, BreakerAction, CircuitBreakerSettings,
    CommandClause, CommandPaths, Examples, Exception, GatewaySettings, LogArgs, LogLevel,
    LogRetention, LogShipping, Matcher, OAuthSettings, OnLoss, OtlpSink, OutboundRule, PinningMode,
    PoisonScanMode, RateLimit, RedactMarker, Remember, Rule, RuleAction, SYSLOG_FACILITIES,
    SandboxNetwork, SecretPattern, ServerBackend, ServerDef, SharedStateSettings, Source, SourceId,
    SourceKind, Span, Spanned, SyslogSink, UpstreamAuth,
};

/// Regexes are bounded like globset bounds its sets: a pattern whose compiled form exceeds
/// this is refused at load time instead of slowing every frame.
pub const REGEX_SIZE_LIMIT: usize = 10 * 1024 * 1024;

/// The budget of a regex in an untrusted project file: a file the user has not reviewed
/// gets a fraction of the trusted budget, so it cannot add a rule that costs every frame
/// seconds per MiB (large compiled forms fall back to the slow engines).
pub const UNTRUSTED_REGEX_SIZE_LIMIT: usize = 64 * 1024;

/// The method a rule judges when it names none.
pub const DEFAULT_METHOD: &str = "tools/call";

/// The variables `${..}` may name. Anything else is an error (decision 8: fail closed).
#[derive(Debug, Clone)]
pub(crate) struct Vars {
    pub(crate) home: PathBuf,
    /// `${PROJECT_DIR}` ([`crate::paths::NO_PROJECT`] when there is none).
    pub(crate) project_dir: PathBuf,
    /// Where relative paths start.
    pub(crate) cwd: PathBuf,
}

/// `text` with `~`, `${HOME}` and `${PROJECT_DIR}` expanded; `Err`: the name of a
/// variable that is neither. The one expansion of paths a policy writes, at load and
/// when the project changes ([`super::project`]).
pub(crate) fn expand_vars(text: &str, home: &Path, project: &Path) -> Result<String, String> {
    let home = home.to_string_lossy();
    let project = project.to_string_lossy();
    shellexpand::full_with_context(
        text,
        || Some(home.clone()),
        |var: &str| -> Result<Option<String>, ()> {
            match var {
                "HOME" => Ok(Some(home.to_string())),
                "PROJECT_DIR" => Ok(Some(project.to_string())),
                _ => Err(()),
            }
        },
    )
    .map(|text| text.into_owned())
    .map_err(|e| e.var_name)
}

/// Decoding state for one file.
pub(crate) struct Decoder<'a> {
    source: &'a Source,
    id: SourceId,
    lines: Lines,
    vars: &'a Vars,
    pub(crate) diags: Vec<PolicyDiagnostic>,
    /// Every rule name written, valid rule or not, for the duplicate check.
    /// With the rule's use site when the rule is an `*alias` of another.
    names: Vec<(Spanned<String>, Option<Span>)>,
}

/// The entries of one mapping, after unknown keys were reported.
struct Fields<'n> {
    entries: Vec<(String, &'n YNode, &'n YNode)>,
    /// Some keys were unknown (already reported), so "empty" would be a second, noisy report.
    had_unknown: bool,
}

impl<'n> Fields<'n> {
    fn get(&self, key: &str) -> Option<&'n YNode> {
        self.entries
            .iter()
            .find(|(k, _, _)| k == key)
            .map(|(_, _, v)| *v)
    }

    /// Written with no keys at all (not merely with only unknown ones).
    fn is_empty(&self) -> bool {
        self.entries.is_empty() && !self.had_unknown
    }
}

const TOP_KEYS: &[&str] = &[
    "version",
    "extends",
    "settings",
    "rules",
    "outbound_rules",
    "secrets",
    "disable",
    "exceptions",
    "servers",
    "sandbox",
];
const SANDBOX_KEYS: &[&str] = &[
    "enabled",
    "required",
    "confine_writes",
    "network",
    "deny_read",
    "deny_write",
    "allow_read",
    "allow_write",
];
const SERVER_KEYS: &[&str] = &[
    "command",
    "args",
    "url",
    "extends",
    "env",
    "token",
    "token_file",
    "token_env",
    "header_file",
];
const SETTINGS_KEYS: &[&str] = &[
    "log_dir",
    "log_level",
    "log_args",
    "default_action",
    "rate_limit",
    "max_frame_bytes",
    "redact_marker",
    "hide_denied_tools",
    "pinning",
    "poison_scan",
    "circuit_breaker",
    "backups",
    "log_retention",
    "ask_timeout_seconds",
    "gateway",
    "oauth",
    "shared_state",
    "log_shipping",
];
const SHIPPING_KEYS: &[&str] = &["syslog", "otlp"];
const OTLP_KEYS: &[&str] = &[
    "endpoint",
    "headers",
    "header_file",
    "ca_file",
    "service_name",
];
const SYSLOG_KEYS: &[&str] = &[
    "address",
    "ca_file",
    "client_cert",
    "client_key",
    "facility",
    "app_name",
];
const RULE_KEYS: &[&str] = &[
    "name",
    "description",
    "why",
    "match",
    "action",
    "message",
    "examples",
];
/// An inbound rule's keys: an outbound rule's, plus `remember` (for `action: ask`).
const INBOUND_RULE_KEYS: &[&str] = &[
    "name",
    "description",
    "why",
    "match",
    "action",
    "remember",
    "message",
    "examples",
];
const MATCH_KEYS: &[&str] = &["method", "tool", "identity", "arguments"];
/// An exception's keys, and the conditions its `match` may hold: no `identity` (an
/// exception follows its rule to every client the rule judges).
const EXCEPTION_KEYS: &[&str] = &["match", "why"];
const EXCEPTION_MATCH_KEYS: &[&str] = &["method", "tool", "arguments"];
const MATCHER_KEYS: &[&str] = &["regex", "pattern", "not_under", "secrets", "command"];
const COMMAND_KEYS: &[&str] = &[
    "name",
    "unknown_name",
    "flags",
    "subcommand",
    "paths",
    "redirect",
    "words",
    "input",
    "after_download",
    "over_find",
];
const COMMAND_PATH_KEYS: &[&str] = &["pattern", "not_under", "ancestors_of"];
const OUT_MATCH_KEYS: &[&str] = &[
    "method",
    "tool",
    "server",
    "secrets",
    "response_contains",
    "response_contains_regex",
    "response_size_exceeds",
];
const EXAMPLES_KEYS: &[&str] = &["match", "no_match"];
const SECRETS_KEYS: &[&str] = &["patterns", "disable"];
const PATTERN_KEYS: &[&str] = &["name", "regex", "entropy_threshold"];
const RATE_KEYS: &[&str] = &["max_calls", "window_seconds"];
const BREAKER_KEYS: &[&str] = &["max_violations", "window_seconds", "action"];
const BACKUP_KEYS: &[&str] = &["keep", "max_age_days"];
const RETENTION_KEYS: &[&str] = &["max_days", "max_mb"];
const SHARED_STATE_KEYS: &[&str] = &[
    "redis",
    "name",
    "on_loss",
    "timeout_ms",
    "suspension_seconds",
    "revocation_days",
];
const GATEWAY_KEYS: &[&str] = &[
    "max_sessions",
    "sessions_per_identity",
    "session_idle_seconds",
    "max_connections",
    "connections_per_peer",
    "header_timeout_seconds",
    "audit_before_answer",
];

const OAUTH_KEYS: &[&str] = &[
    "issuer",
    "resource",
    "jwks_url",
    "jwks_ca_file",
    "algorithms",
    "identity_claim",
    "groups_claim",
    "required_scopes",
    "leeway_seconds",
    "jwks_max_age_seconds",
    "jwks_min_refresh_seconds",
    "fetch_timeout_seconds",
    "max_token_bytes",
];

/// Why `url` cannot be an `oauth` URL: not absolute http(s) with a host, credentials in it,
/// a fragment, or plain http to a host that is not loopback.
pub(crate) fn check_oauth_url(url: &str) -> Result<(), String> {
    let uri: hyper::Uri = url.parse().map_err(|_| "not a URL".to_string())?;
    let host = uri.host().ok_or("no host")?;
    if uri.authority().is_some_and(|a| a.as_str().contains('@')) {
        return Err("user:password in a URL".into());
    }
    if url.contains('#') {
        return Err("a fragment (`#…`)".into());
    }
    match uri.scheme_str() {
        Some("https") => Ok(()),
        Some("http") => {
            let bare = host.trim_start_matches('[').trim_end_matches(']');
            let loopback = bare.eq_ignore_ascii_case("localhost")
                || bare
                    .parse::<std::net::IpAddr>()
                    .is_ok_and(|ip| ip.is_loopback());
            if loopback {
                Ok(())
            } else {
                Err("plain http:// to a host that is not loopback: keys and tokens would cross the network unprotected".into())
            }
        }
        _ => Err("not http:// or https://".into()),
    }
}

/// The closest of `candidates` to `word`, if it is close enough to be a likely typo.
pub(crate) fn did_you_mean<'c>(word: &str, candidates: &[&'c str]) -> Option<&'c str> {
    candidates
        .iter()
        .map(|c| (strsim::jaro_winkler(word, c), *c))
        .filter(|(score, _)| *score > 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| c)
}

impl<'a> Decoder<'a> {
    pub(crate) fn new(source: &'a Source, id: SourceId, vars: &'a Vars) -> Self {
        Decoder {
            source,
            id,
            lines: Lines::new(&source.text),
            vars,
            diags: Vec::new(),
            names: Vec::new(),
        }
    }

    fn span(&self, node: &YNode) -> Span {
        node_span(&self.source.text, &self.lines, self.id, node)
    }

    /// The span of a scalar only (for collections: their first token), for short labels.
    fn head_span(&self, node: &YNode) -> Span {
        let mut s = self.span(node);
        if matches!(node.value, Node::Map(_) | Node::Seq(_)) {
            let rest = &self.source.text[s.offset..];
            let first_line = rest.find('\n').unwrap_or(rest.len());
            let one_char = rest.chars().next().map_or(0, char::len_utf8);
            s.len = s.len.max(one_char).min(first_line);
        }
        s
    }

    fn report(
        &mut self,
        code: Code,
        message: impl Into<String>,
        span: Span,
        label: impl Into<String>,
        help: impl Into<String>,
    ) {
        self.diags
            .push(PolicyDiagnostic::at(code, message, self.source, span, label).with_help(help));
    }

    fn wrong_type(&mut self, node: &YNode, what: &str, expected: &str) {
        let found = node.value.kind();
        let span = self.head_span(node);
        let scalar = matches!(
            node.value,
            Node::Int(_) | Node::Float(_) | Node::Bool(_) | Node::Null
        );
        let help = if expected == "a string" && scalar {
            let written = self.written(span);
            format!("quote it to make it a string: `\"{written}\"`")
        } else {
            format!("write {what} as {expected}")
        };
        self.report(
            Code::WrongType,
            format!("{what} must be {expected}, found {found}"),
            span,
            format!("expected {expected}"),
            help,
        );
    }

    /// The text a span covers, as written.
    fn written(&self, span: Span) -> &str {
        self.source
            .text
            .get(span.offset..span.offset + span.len)
            .unwrap_or("")
    }

    /// A mapping's entries; keys outside `allowed` are reported (with a near miss if any).
    fn fields<'n>(&mut self, node: &'n YNode, what: &str, allowed: &[&str]) -> Option<Fields<'n>> {
        let entries = match &node.value {
            Node::Map(entries) => entries.as_slice(),
            // `settings:` with nothing after it is an empty mapping, as YAML writers expect.
            Node::Null => &[],
            _ => {
                self.wrong_type(node, what, "a mapping");
                return None;
            }
        };
        let mut out = Vec::with_capacity(entries.len());
        let mut had_unknown = false;
        for (k, v) in entries {
            let Some(key) = k.value.key_text() else {
                self.wrong_type(k, &format!("a key in {what}"), "a plain word");
                had_unknown = true;
                continue;
            };
            if allowed.contains(&key.as_str()) {
                out.push((key, k, v));
                continue;
            }
            had_unknown = true;
            if key == "_any_value" {
                // Usually `arguments:` was forgotten, or the selector went inside a matcher.
                self.report(
                    Code::BadAnyValue,
                    format!("`_any_value` is not allowed in {what}"),
                    self.span(k),
                    "`_any_value` selects argument values",
                    "put it under `arguments`, beside the argument names: \
                     `arguments: {_any_value: {pattern: \"**/.env\"}}`",
                );
                continue;
            }
            let (label, help) = match did_you_mean(&key, allowed) {
                Some(near) => (
                    format!("did you mean `{near}`?"),
                    format!("rename `{key}` to `{near}`"),
                ),
                None => (
                    "unknown key".to_string(),
                    format!("{what} accepts: {}", allowed.join(", ")),
                ),
            };
            self.report(
                Code::UnknownKey,
                format!("unknown key `{key}` in {what}"),
                self.span(k),
                label,
                help,
            );
        }
        Some(Fields {
            entries: out,
            had_unknown,
        })
    }

    fn string(&mut self, node: &YNode, what: &str) -> Option<Spanned<String>> {
        match &node.value {
            Node::Str(s) => Some(Spanned {
                value: s.clone(),
                span: self.span(node),
            }),
            _ => {
                self.wrong_type(node, what, "a string");
                None
            }
        }
    }

    /// A list of strings; a single string is taken as a one-element list.
    fn strings(&mut self, node: &YNode, what: &str) -> Vec<Spanned<String>> {
        match &node.value {
            Node::Seq(items) => items
                .iter()
                .filter_map(|item| self.string(item, &format!("each entry of {what}")))
                .collect(),
            Node::Str(_) => self.string(node, what).into_iter().collect(),
            _ => {
                self.wrong_type(node, what, "a list of strings");
                Vec::new()
            }
        }
    }

    fn word<T: Copy>(
        &mut self,
        node: &YNode,
        what: &str,
        words: &[(&str, T)],
    ) -> Option<Spanned<T>> {
        let s = self.string(node, what)?;
        if let Some((_, v)) = words.iter().find(|(w, _)| *w == s.value) {
            return Some(Spanned {
                value: *v,
                span: s.span,
            });
        }
        let names: Vec<&str> = words.iter().map(|(w, _)| *w).collect();
        let label = match did_you_mean(&s.value, &names) {
            Some(near) => format!("did you mean `{near}`?"),
            None => "not allowed here".to_string(),
        };
        self.report(
            Code::UnknownValue,
            format!("`{}` is not a valid {what}", s.value),
            s.span,
            label,
            format!("{what} is one of: {}", names.join(", ")),
        );
        None
    }

    /// A positive integer (`> 0`).
    fn positive(&mut self, node: &YNode, what: &str) -> Option<Spanned<u64>> {
        match &node.value {
            Node::Int(i) if *i > 0 && *i <= i128::from(u64::MAX) => Some(Spanned {
                value: *i as u64,
                span: self.span(node),
            }),
            Node::Int(i) => {
                self.report(
                    Code::BadThreshold,
                    format!("{what} must be greater than 0, found {i}"),
                    self.span(node),
                    "must be > 0",
                    format!("set {what} to a positive whole number"),
                );
                None
            }
            _ => {
                self.wrong_type(node, what, "a whole number");
                None
            }
        }
    }

    fn bool(&mut self, node: &YNode, what: &str) -> Option<Spanned<bool>> {
        match &node.value {
            Node::Bool(b) => Some(Spanned {
                value: *b,
                span: self.span(node),
            }),
            _ => {
                self.wrong_type(node, what, "`true` or `false`");
                None
            }
        }
    }

    fn list<'n>(&mut self, node: &'n YNode, what: &str) -> &'n [YNode] {
        match &node.value {
            Node::Seq(items) => items,
            Node::Null => &[],
            _ => {
                self.wrong_type(node, what, "a list");
                &[]
            }
        }
    }

    // ---------------------------------------------------------------- the file

    /// Decode a whole file.
    pub(crate) fn policy(&mut self, root: &YNode) -> RawPolicy {
        let mut raw = RawPolicy::default();
        if let Node::Null = root.value {
            self.report(
                Code::BadVersion,
                "the policy file is empty",
                self.span(root),
                "empty file",
                "start the file with `version: 1`, then add `extends: [default]` or rules",
            );
            return raw;
        }
        let Some(f) = self.fields(root, "the policy file", TOP_KEYS) else {
            return raw;
        };
        match f.get("version") {
            None => self.report(
                Code::BadVersion,
                "the policy file has no `version`",
                self.head_span(root),
                "`version` is missing",
                "add `version: 1` as the first line",
            ),
            Some(v) if matches!(v.value, Node::Int(1)) => {}
            Some(v) => self.report(
                Code::BadVersion,
                format!(
                    "unsupported policy version `{}`",
                    self.written(self.head_span(v))
                ),
                self.span(v),
                "this mcpwall reads version 1",
                "set `version: 1`",
            ),
        }
        if let Some(n) = f.get("extends") {
            raw.extends = self.strings(n, "`extends`");
        }
        if let Some(n) = f.get("disable") {
            raw.disable = self.strings(n, "`disable`");
        }
        if let Some(n) = f.get("exceptions") {
            raw.exceptions = self.exceptions(n);
        }
        if let Some(n) = f.get("settings") {
            raw.settings = self.settings(n);
        }
        if let Some(n) = f.get("rules") {
            for item in self.list(n, "`rules`") {
                if let Some(rule) = self.rule(item) {
                    raw.rules.push(rule);
                }
            }
        }
        if let Some(n) = f.get("outbound_rules") {
            for item in self.list(n, "`outbound_rules`") {
                if let Some(rule) = self.outbound_rule(item) {
                    raw.outbound_rules.push(rule);
                }
            }
        }
        if let Some(n) = f.get("secrets") {
            self.secrets(n, &mut raw);
        }
        if let Some(n) = f.get("servers") {
            self.servers(n, &mut raw);
        }
        if let Some(n) = f.get("sandbox") {
            raw.sandbox = self.sandbox(n);
        }
        self.duplicate_names();
        raw
    }

    /// `sandbox: on|off` or `sandbox: {enabled, required, confine_writes, network,
    /// deny_read, deny_write, allow_read, allow_write}`.
    pub(crate) fn sandbox(&mut self, node: &YNode) -> RawSandbox {
        let mut s = RawSandbox::default();
        // `sandbox: off` (YAML 1.2 reads `off` as a string; 1.1 writers mean a boolean).
        let switch = match &node.value {
            Node::Bool(b) => Some(*b),
            Node::Str(w) if w == "on" => Some(true),
            Node::Str(w) if w == "off" => Some(false),
            _ => None,
        };
        if let Some(b) = switch {
            s.enabled = Some(Spanned {
                value: b,
                span: self.span(node),
            });
            return s;
        }
        if let Node::Str(_) = node.value {
            self.report(
                Code::UnknownValue,
                "`sandbox` is `on`, `off` or a mapping",
                self.span(node),
                "not `on` or `off`",
                "write `sandbox: on`, `sandbox: off`, or `sandbox: {required: true}`",
            );
            return s;
        }
        let Some(f) = self.fields(node, "`sandbox`", SANDBOX_KEYS) else {
            return s;
        };
        if let Some(n) = f.get("enabled") {
            s.enabled = self.bool(n, "`sandbox.enabled`");
        }
        if let Some(n) = f.get("required") {
            s.required = self.bool(n, "`sandbox.required`");
        }
        if let Some(n) = f.get("confine_writes") {
            s.confine_writes = self.bool(n, "`sandbox.confine_writes`");
        }
        if let Some(n) = f.get("network") {
            s.network = self.word(
                n,
                "`sandbox.network`",
                &[
                    ("all", SandboxNetwork::All),
                    ("loopback", SandboxNetwork::Loopback),
                    ("none", SandboxNetwork::None),
                ],
            );
        }
        for (key, list) in [
            ("deny_read", &mut s.deny_read),
            ("deny_write", &mut s.deny_write),
            ("allow_read", &mut s.allow_read),
            ("allow_write", &mut s.allow_write),
        ] {
            if let Some(n) = f.get(key) {
                let what = format!("`sandbox.{key}`");
                for path in self.strings(n, &what) {
                    if self.sandbox_path(&path, key.starts_with("allow")) {
                        list.push(path);
                    }
                }
            }
        }
        s
    }

    /// A sandbox path names one place: absolute, or under `~`, `${HOME}` or
    /// `${PROJECT_DIR}`; no globs, no `..`. An `allow_*` entry never reaches mcpwall's
    /// own state.
    fn sandbox_path(&mut self, path: &Spanned<String>, allow: bool) -> bool {
        let text = path.value.as_str();
        let rest = ["~/", "${HOME}/", "${PROJECT_DIR}/"]
            .iter()
            .find_map(|p| text.strip_prefix(p))
            .or_else(|| {
                (text == "~" || text == "${HOME}" || text == "${PROJECT_DIR}").then_some("")
            });
        let absolute = text.starts_with('/');
        let problem = if rest.is_none() && !absolute {
            Some((
                "a sandbox path must be absolute or start with `~/`, `${HOME}/` or `${PROJECT_DIR}/`",
                "write where it is: `~/.config/x`, `${PROJECT_DIR}/.git/hooks` or `/etc/x`"
                    .to_string(),
            ))
        } else if text.contains(['*', '?', '[', '{']) && !text.starts_with("${") {
            Some((
                "a sandbox path names one place: globs are not expanded",
                "list each path; the kernel protects a directory with everything below it".into(),
            ))
        } else if text.split('/').any(|c| c == ".." || c == ".") {
            Some((
                "a sandbox path may not contain `.` or `..` components",
                "write the path as it is, without `..`".into(),
            ))
        } else if text.matches("${").count() > usize::from(text.starts_with("${")) {
            Some((
                "only a leading `${HOME}` or `${PROJECT_DIR}` is expanded in a sandbox path",
                "write the rest of the path literally".into(),
            ))
        } else {
            None
        };
        if let Some((message, help)) = problem {
            self.report(Code::BadSandboxPath, message, path.span, "here", help);
            return false;
        }
        let home_rest = ["~/", "${HOME}/"]
            .iter()
            .find_map(|p| text.strip_prefix(p))
            .or_else(|| (text == "~" || text == "${HOME}").then_some(""));
        if allow
            && let Some(rest) = home_rest
            && (rest.is_empty() || rest == ".mcpwall" || rest.starts_with(".mcpwall/"))
        {
            self.report(
                Code::ProtectedState,
                format!("`{text}` would give the server mcpwall's own state"),
                path.span,
                "always protected",
                "`~/.mcpwall` (configuration, trust, pins, approvals, audit log) is never \
                 readable or writable by a server: name a narrower path",
            );
            return false;
        }
        true
    }

    /// `servers: {NAME: {command, args} | {url}}`: the servers `mcpwall serve` fronts.
    fn servers(&mut self, node: &YNode, raw: &mut RawPolicy) {
        let entries = match &node.value {
            Node::Map(entries) => entries.as_slice(),
            Node::Null => &[],
            _ => return self.wrong_type(node, "`servers`", "a mapping of server names"),
        };
        for (k, v) in entries {
            let Some(name) = self.string(k, "a server name") else {
                continue;
            };
            if name.value.is_empty()
                || !name
                    .value
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
                || name.value.starts_with('.')
            {
                self.report(
                    Code::UnknownValue,
                    format!("`{}` cannot name a server", name.value),
                    name.span,
                    "not a URL path segment",
                    "a server name becomes the endpoint `/mcp/NAME`: use letters, digits, `-`, `_` and `.` (not first)",
                );
                continue;
            }
            let what = format!("server `{}`", name.value);
            let Some(f) = self.fields(v, &what, SERVER_KEYS) else {
                continue;
            };
            let command = f.get("command").and_then(|n| self.string(n, "`command`"));
            let args = f
                .get("args")
                .map(|n| self.strings(n, "`args`"))
                .unwrap_or_default();
            let url = f.get("url").and_then(|n| self.string(n, "`url`"));
            let backend = match (command, url) {
                (Some(c), None) if !c.value.trim().is_empty() => {
                    for key in ["token", "token_file", "token_env", "header_file"] {
                        if let Some(n) = f.get(key) {
                            self.report(
                                Code::UnknownKey,
                                format!("{what} has `{key}` but no `url`"),
                                self.head_span(n),
                                "credentials for a remote server",
                                "a `command` server gets its secrets through `env` (or mcpwall's own environment, which it inherits)",
                            );
                        }
                    }
                    ServerBackend::Command {
                        program: c.value,
                        args: args.into_iter().map(|a| a.value).collect(),
                        env: f.get("env").map(|n| self.server_env(n)).unwrap_or_default(),
                    }
                }
                (Some(c), None) => {
                    self.report(
                        Code::UnknownValue,
                        "`command` is empty",
                        c.span,
                        "no program",
                        "name the program that runs the server, e.g. `command: npx`",
                    );
                    continue;
                }
                (None, Some(u)) => {
                    if !(u.value.starts_with("http://") || u.value.starts_with("https://")) {
                        self.report(
                            Code::UnknownValue,
                            format!("`{}` is not an http:// or https:// URL", u.value),
                            u.span,
                            "not a Streamable HTTP URL",
                            "write the server's endpoint, e.g. `url: https://mcp.example.com/mcp`",
                        );
                        continue;
                    }
                    if f.get("args").is_some() {
                        self.report(
                            Code::UnknownKey,
                            format!("{what} has `args` but no `command`"),
                            self.span(k),
                            "`args` go with `command`",
                            "remove `args`: a `url` server takes none",
                        );
                        continue;
                    }
                    if let Some(n) = f.get("env") {
                        self.report(
                            Code::UnknownKey,
                            format!("{what} has `env` but no `command`"),
                            self.head_span(n),
                            "environment for a process mcpwall does not run",
                            "remove `env`; give a remote server its token with `token_file: PATH` or `token_env: VAR`",
                        );
                        continue;
                    }
                    let Some(auth) = self.upstream_auth(&f, &what) else {
                        continue;
                    };
                    ServerBackend::Url { url: u.value, auth }
                }
                (Some(c), Some(u)) => {
                    self.diags.push(
                        PolicyDiagnostic::at(
                            Code::UnknownKey,
                            format!("{what} has both `command` and `url`"),
                            self.source,
                            u.span,
                            "second way to reach the server",
                        )
                        .with_label(c.span, "first way")
                        .with_help(
                            "keep `command` (a stdio server) or `url` (a remote one), not both",
                        ),
                    );
                    continue;
                }
                (None, None) => {
                    // A `command` or `url` of the wrong type was reported already.
                    if f.get("command").is_none() && f.get("url").is_none() {
                        self.report(
                            Code::MissingKey,
                            format!("{what} has neither `command` nor `url`"),
                            self.span(k),
                            "how is this server reached?",
                            "add `command: PROGRAM` (and `args: [..]`) for a stdio server, or `url: https://…` for a remote one",
                        );
                    }
                    continue;
                }
            };
            let extends = f
                .get("extends")
                .map(|n| self.strings(n, "`extends`"))
                .unwrap_or_default();
            raw.servers.push(ServerDef {
                name,
                backend,
                extends,
                policy: None,
            });
        }
    }

    /// `env: {NAME: value}` of a `command` server; values expand as paths do (`~`,
    /// `${HOME}`, `${PROJECT_DIR}`), without being made absolute.
    fn server_env(&mut self, node: &YNode) -> Vec<(String, String)> {
        let entries = match &node.value {
            Node::Map(entries) => entries.as_slice(),
            Node::Null => &[],
            _ => {
                self.wrong_type(node, "`env`", "a mapping of variable names to values");
                return Vec::new();
            }
        };
        let mut env: Vec<(String, String)> = Vec::new();
        for (k, v) in entries {
            let Some(name) = self.string(k, "an environment variable name") else {
                continue;
            };
            let valid = name
                .value
                .bytes()
                .next()
                .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
                && name
                    .value
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_');
            if !valid {
                self.report(
                    Code::UnknownValue,
                    format!("`{}` cannot name an environment variable", name.value),
                    name.span,
                    "not a variable name",
                    "use letters, digits and `_`, not starting with a digit, e.g. `API_BASE_URL`",
                );
                continue;
            }
            // Numbers and booleans are what a shell would pass: their text.
            let value = match &v.value {
                Node::Str(_) => self.string(v, "an environment value"),
                Node::Int(_) | Node::Float(_) | Node::Bool(_) => Some(Spanned {
                    value: self.written(self.head_span(v)).to_string(),
                    span: self.span(v),
                }),
                _ => {
                    self.wrong_type(v, &format!("`env.{}`", name.value), "a string");
                    None
                }
            };
            let Some(value) = value else { continue };
            let Some(value) = self.expand_text(&value) else {
                continue;
            };
            env.retain(|(n, _)| *n != name.value);
            env.push((name.value, value));
        }
        env
    }

    /// The credentials of a `url` server: files and variable names only. A token written
    /// into the policy is refused.
    fn upstream_auth(&mut self, f: &Fields<'_>, what: &str) -> Option<UpstreamAuth> {
        if let Some(n) = f.get("token") {
            self.report(
                Code::UnknownKey,
                format!("{what} has its token written in the policy"),
                self.head_span(n),
                "a secret in the policy file",
                "policy files are shared and printed by `explain-policy`: put the token in a file (`token_file: ~/.config/NAME.token`) or an environment variable (`token_env: VAR`)",
            );
            return None;
        }
        let mut auth = UpstreamAuth::default();
        let token_file = f
            .get("token_file")
            .and_then(|n| self.string(n, "`token_file`"));
        let token_env = f
            .get("token_env")
            .and_then(|n| self.string(n, "`token_env`"));
        if let (Some(file), Some(env)) = (&token_file, &token_env) {
            self.diags.push(
                PolicyDiagnostic::at(
                    Code::UnknownKey,
                    format!("{what} has both `token_file` and `token_env`"),
                    self.source,
                    env.span,
                    "second token",
                )
                .with_label(file.span, "first token")
                .with_help("keep one of them: a server is sent one bearer token"),
            );
            return None;
        }
        if let Some(file) = token_file {
            auth.token_file = Some(self.expand(&file)?);
        }
        if let Some(env) = token_env {
            let valid = !env.value.is_empty()
                && env
                    .value
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_');
            if !valid {
                self.report(
                    Code::UnknownValue,
                    format!("`{}` cannot name an environment variable", env.value),
                    env.span,
                    "not a variable name",
                    "write the variable's name without `$`, e.g. `token_env: GITHUB_MCP_TOKEN`",
                );
                return None;
            }
            auth.token_env = Some(env.value);
        }
        if let Some(n) = f.get("header_file") {
            let file = self.string(n, "`header_file`")?;
            auth.header_file = Some(self.expand(&file)?);
        }
        Some(auth)
    }

    fn duplicate_names(&mut self) {
        let mut seen: HashMap<&str, Span> = HashMap::new();
        let mut found = Vec::new();
        for (name, alias_at) in &self.names {
            if let Some(first) = seen.get(name.value.as_str()) {
                // A rule repeated through an alias has its name at the anchor; point at the
                // `*alias` that repeats it instead.
                found.push((name.value.clone(), alias_at.unwrap_or(name.span), *first));
            } else {
                seen.insert(&name.value, name.span);
            }
        }
        for (name, second, first) in found {
            self.diags.push(
                PolicyDiagnostic::at(
                    Code::DuplicateRule,
                    format!("two rules are named `{name}`"),
                    self.source,
                    second,
                    "second rule with this name",
                )
                .with_label(first, "first defined here")
                .with_help(
                    "rule names identify rules in audit logs and `explain-policy`: rename one of them",
                ),
            );
        }
    }

    fn settings(&mut self, node: &YNode) -> RawSettings {
        let mut s = RawSettings::default();
        let Some(f) = self.fields(node, "`settings`", SETTINGS_KEYS) else {
            return s;
        };
        if let Some(n) = f.get("log_dir")
            && let Some(dir) = self.string(n, "`log_dir`")
            && let Some(path) = self.expand(&dir)
        {
            s.log_dir = Some(Spanned {
                value: path,
                span: dir.span,
            });
        }
        if let Some(n) = f.get("log_level") {
            s.log_level = self.word(
                n,
                "`log_level`",
                &[
                    ("error", LogLevel::Error),
                    ("warn", LogLevel::Warn),
                    ("info", LogLevel::Info),
                    ("debug", LogLevel::Debug),
                ],
            );
        }
        if let Some(n) = f.get("log_args") {
            s.log_args = self.word(
                n,
                "`log_args`",
                &[("none", LogArgs::None), ("full", LogArgs::Full)],
            );
        }
        if let Some(n) = f.get("default_action") {
            s.default_action = self.word(
                n,
                "`default_action`",
                &[
                    ("allow", Action::Allow),
                    ("deny", Action::Deny),
                    ("ask", Action::Ask),
                ],
            );
        }
        if let Some(n) = f.get("ask_timeout_seconds") {
            s.ask_timeout_seconds = self.positive(n, "`ask_timeout_seconds`");
        }
        if let Some(n) = f.get("redact_marker") {
            s.redact_marker = self.word(
                n,
                "`redact_marker`",
                &[
                    ("plain", RedactMarker::Plain),
                    ("typed", RedactMarker::Typed),
                ],
            );
        }
        if let Some(n) = f.get("max_frame_bytes") {
            s.max_frame_bytes = self.positive(n, "`max_frame_bytes`").map(|v| Spanned {
                value: usize::try_from(v.value).unwrap_or(usize::MAX),
                span: v.span,
            });
        }
        if let Some(n) = f.get("rate_limit") {
            s.rate_limit = self.rate_limit(n);
        }
        if let Some(n) = f.get("hide_denied_tools") {
            s.hide_denied_tools = self.bool(n, "`hide_denied_tools`");
        }
        if let Some(n) = f.get("pinning") {
            s.pinning = self.word(
                n,
                "`pinning`",
                &[
                    ("enforce", PinningMode::Enforce),
                    ("warn", PinningMode::Warn),
                    ("off", PinningMode::Off),
                ],
            );
        }
        if let Some(n) = f.get("poison_scan") {
            s.poison_scan = self.word(
                n,
                "`poison_scan`",
                &[
                    ("enforce", PoisonScanMode::Enforce),
                    ("warn", PoisonScanMode::Warn),
                    ("off", PoisonScanMode::Off),
                ],
            );
        }
        if let Some(n) = f.get("circuit_breaker") {
            s.circuit_breaker = self.circuit_breaker(n);
        }
        if let Some(n) = f.get("backups") {
            s.backups = self.backups(n);
        }
        if let Some(n) = f.get("log_retention") {
            s.log_retention = self.log_retention(n);
        }
        if let Some(n) = f.get("gateway") {
            s.gateway = self.gateway(n);
        }
        if let Some(n) = f.get("oauth") {
            s.oauth = self.oauth(n);
        }
        if let Some(n) = f.get("shared_state") {
            s.shared_state = self.shared_state(n);
        }
        if let Some(n) = f.get("log_shipping") {
            s.log_shipping = self.log_shipping(n);
        }
        s
    }

    /// `shared_state: {redis: "redis://127.0.0.1:6379/0", name: team-gw, …}`.
    fn shared_state(&mut self, node: &YNode) -> Option<Spanned<SharedStateSettings>> {
        let f = self.fields(node, "`shared_state`", SHARED_STATE_KEYS)?;
        let example =
            "write `shared_state: {redis: \"redis://127.0.0.1:6379/0\", name: team-gateway}`";
        let mut value = SharedStateSettings::default();
        let mut ok = true;
        match f.get("redis") {
            Some(n) => match self.string(n, "`shared_state.redis`") {
                Some(url) => {
                    let scheme_ok = url.value.starts_with("redis://");
                    let parses = scheme_ok && redis::parse_redis_url(&url.value).is_some();
                    if !parses {
                        let help = if url.value.starts_with("rediss://") {
                            "TLS to Redis is not built in: reach it over loopback or a private \
                             network, or through a TLS tunnel (stunnel, spiped) on this host"
                        } else {
                            "write `redis://host:port/db` (a password as `redis://:PASSWORD@host:port`)"
                        };
                        self.report(
                            Code::BadSharedState,
                            "`shared_state.redis` is not a redis:// URL".to_string(),
                            url.span,
                            "not a redis:// URL",
                            help.to_string(),
                        );
                        ok = false;
                    }
                    value.redis = url.value;
                }
                None => ok = false,
            },
            None => {
                self.report(
                    Code::MissingKey,
                    "`shared_state` has no `redis`".to_string(),
                    self.head_span(node),
                    "`redis` is missing",
                    example.to_string(),
                );
                ok = false;
            }
        }
        match f.get("name") {
            Some(n) => match self.string(n, "`shared_state.name`") {
                Some(name) => {
                    let plain = !name.value.is_empty()
                        && name.value.len() <= 64
                        && name
                            .value
                            .bytes()
                            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
                    if !plain {
                        self.report(
                            Code::BadSharedState,
                            format!("`shared_state.name` {:?} is not a plain name", name.value),
                            name.span,
                            "not a plain name",
                            "use 1 to 64 letters, digits, `.`, `_` or `-`; every replica of the \
                             gateway uses the same name"
                                .to_string(),
                        );
                        ok = false;
                    }
                    value.name = name.value;
                }
                None => ok = false,
            },
            None => {
                self.report(
                    Code::MissingKey,
                    "`shared_state` has no `name`".to_string(),
                    self.head_span(node),
                    "`name` is missing",
                    example.to_string(),
                );
                ok = false;
            }
        }
        if let Some(n) = f.get("on_loss") {
            match self.word(
                n,
                "`shared_state.on_loss`",
                &[
                    ("fail_closed", OnLoss::FailClosed),
                    ("local_only", OnLoss::LocalOnly),
                ],
            ) {
                Some(w) => value.on_loss = w.value,
                None => ok = false,
            }
        }
        ok &= self.positive_u32s(
            &f,
            "shared_state",
            [
                ("timeout_ms", &mut value.timeout_ms),
                ("revocation_days", &mut value.revocation_days),
            ],
        );
        if let Some(n) = f.get("suspension_seconds") {
            match self.positive(n, "`shared_state.suspension_seconds`") {
                Some(v) => value.suspension_seconds = v.value,
                None => ok = false,
            }
        }
        if value.timeout_ms > 10_000 {
            let at = f
                .get("timeout_ms")
                .map_or_else(|| self.span(node), |n| self.span(n));
            self.report(
                Code::BadThreshold,
                format!(
                    "`shared_state.timeout_ms` ({}) is more than 10000",
                    value.timeout_ms
                ),
                at,
                "too long",
                "a call waits this long on a Redis that does not answer; use at most 10000 ms"
                    .to_string(),
            );
            ok = false;
        }
        ok.then(|| Spanned {
            value,
            span: self.span(node),
        })
    }

    /// `log_shipping: {syslog: {address: tls://logs.example.com:6514, …}, otlp: {endpoint:
    /// https://otel.example.com:4318/v1/logs, …}}`: one destination or both.
    fn log_shipping(&mut self, node: &YNode) -> Option<Spanned<LogShipping>> {
        let f = self.fields(node, "`log_shipping`", SHIPPING_KEYS)?;
        if f.get("syslog").is_none() && f.get("otlp").is_none() {
            self.report(
                Code::MissingKey,
                "`log_shipping` names no destination".to_string(),
                self.head_span(node),
                "`syslog` or `otlp` is missing",
                "write `log_shipping: {syslog: {address: \"tls://logs.example.com:6514\"}}` \
                 or `log_shipping: {otlp: {endpoint: \"https://otel.example.com:4318/v1/logs\"}}`",
            );
            return None;
        }
        let syslog = match f.get("syslog") {
            Some(n) => Some(self.syslog_sink(n)?),
            None => None,
        };
        let otlp = match f.get("otlp") {
            Some(n) => Some(self.otlp_sink(n)?),
            None => None,
        };
        Some(Spanned {
            value: LogShipping { syslog, otlp },
            span: self.span(node),
        })
    }

    /// `syslog: {address: tls://logs.example.com:6514, ca_file, client_cert, client_key,
    /// facility, app_name}`.
    fn syslog_sink(&mut self, syslog: &YNode) -> Option<SyslogSink> {
        let example = "write `log_shipping: {syslog: {address: \"tls://logs.example.com:6514\"}}`";
        let s = self.fields(syslog, "`log_shipping.syslog`", SYSLOG_KEYS)?;
        let Some(address) = s.get("address") else {
            self.report(
                Code::MissingKey,
                "`log_shipping.syslog` has no `address`".to_string(),
                self.head_span(syslog),
                "`address` is missing",
                example,
            );
            return None;
        };
        let address = self.string(address, "`log_shipping.syslog.address`")?;
        let (tls, host, port) = match parse_sink_address(&address.value) {
            Ok(parts) => parts,
            Err(why) => {
                self.report(
                    Code::BadAddress,
                    format!("`{}` is not a syslog address: {why}", address.value),
                    address.span,
                    "not `tcp://HOST:PORT` or `tls://HOST:PORT`",
                    "write `tls://HOST:PORT` (RFC 5425, port 6514 by default) or \
                     `tcp://HOST:PORT` (plain TCP, port 514 by default; only on a network you trust)",
                );
                return None;
            }
        };
        let path = |this: &mut Self, key: &str| -> Option<Option<PathBuf>> {
            let Some(n) = s.get(key) else {
                return Some(None);
            };
            let written = this.string(n, &format!("`log_shipping.syslog.{key}`"))?;
            if !tls {
                this.report(
                    Code::UnknownKey,
                    format!("`{key}` applies only to a `tls://` address"),
                    written.span,
                    "not used over plain TCP",
                    format!("remove `{key}`, or ship over `tls://`"),
                );
                return None;
            }
            this.expand(&written).map(Some)
        };
        let ca_file = path(self, "ca_file");
        let client_cert = path(self, "client_cert");
        let client_key = path(self, "client_key");
        let (ca_file, client_cert, client_key) = (ca_file?, client_cert?, client_key?);
        if client_cert.is_some() != client_key.is_some() {
            let (given, missing) = if client_cert.is_some() {
                ("client_cert", "client_key")
            } else {
                ("client_key", "client_cert")
            };
            let at = s
                .get(given)
                .map_or_else(|| self.span(syslog), |n| self.span(n));
            self.report(
                Code::MissingKey,
                format!("`log_shipping.syslog.{given}` without `{missing}`"),
                at,
                format!("`{missing}` is missing"),
                "a client certificate needs its private key: give both, or neither",
            );
            return None;
        }
        let facility = match s.get("facility") {
            Some(n) => self.word(n, "syslog facility", SYSLOG_FACILITIES)?.value,
            None => 16,
        };
        let app_name = match s.get("app_name") {
            Some(n) => {
                let name = self.string(n, "`log_shipping.syslog.app_name`")?;
                let printable = name.value.bytes().all(|b| (33..=126).contains(&b));
                if name.value.is_empty() || name.value.len() > 48 || !printable {
                    self.report(
                        Code::UnknownValue,
                        format!("`{}` is not a syslog APP-NAME", name.value),
                        name.span,
                        "1 to 48 printable ASCII characters, no spaces",
                        "RFC 5424 limits APP-NAME to 48 printable ASCII characters; \
                         write e.g. `mcpwall`",
                    );
                    return None;
                }
                name.value
            }
            None => "mcpwall".to_string(),
        };
        Some(SyslogSink {
            tls,
            host,
            port,
            ca_file,
            client_cert,
            client_key,
            facility,
            app_name,
        })
    }

    /// `otlp: {endpoint: https://otel.example.com:4318/v1/logs, headers: {X-Scope-OrgID:
    /// team}, header_file: ~/.config/mcpwall/otlp.headers, ca_file, service_name}`.
    fn otlp_sink(&mut self, node: &YNode) -> Option<OtlpSink> {
        let o = self.fields(node, "`log_shipping.otlp`", OTLP_KEYS)?;
        let Some(endpoint) = o.get("endpoint") else {
            self.report(
                Code::MissingKey,
                "`log_shipping.otlp` has no `endpoint`".to_string(),
                self.head_span(node),
                "`endpoint` is missing",
                "write `otlp: {endpoint: \"https://otel.example.com:4318/v1/logs\"}`",
            );
            return None;
        };
        let written = self.string(endpoint, "`log_shipping.otlp.endpoint`")?;
        let (endpoint, https, loopback) = match otlp_endpoint(&written.value) {
            Ok(parts) => parts,
            Err(why) => {
                self.report(
                    Code::BadAddress,
                    format!("`{}` is not an OTLP/HTTP endpoint: {why}", written.value),
                    written.span,
                    "not `https://HOST:PORT/v1/logs`",
                    "write the collector's logs URL, e.g. `https://otel.example.com:4318/v1/logs` \
                     (`http://` only on a network you trust)",
                );
                return None;
            }
        };
        let mut ok = true;
        let mut headers: Vec<(String, String)> = Vec::new();
        if let Some(n) = o.get("headers") {
            match &n.value {
                Node::Map(entries) => {
                    for (k, v) in entries {
                        let (Some(name), Some(value)) = (
                            self.string(k, "a header name"),
                            self.string(v, "a header value"),
                        ) else {
                            ok = false;
                            continue;
                        };
                        if let Err((why, help)) = otlp_header(&name.value, &value.value) {
                            self.report(Code::UnknownValue, why, name.span, "not sent", help);
                            ok = false;
                            continue;
                        }
                        headers.push((name.value, value.value));
                    }
                }
                _ => {
                    self.wrong_type(
                        n,
                        "`log_shipping.otlp.headers`",
                        "a mapping of header names to values",
                    );
                    ok = false;
                }
            }
        }
        let header_file = match o.get("header_file") {
            Some(n) => {
                let file = self.string(n, "`log_shipping.otlp.header_file`")?;
                if !https && !loopback {
                    self.report(
                        Code::UnknownKey,
                        "`header_file` over plain http:// to a host that is not loopback"
                            .to_string(),
                        file.span,
                        "its credentials would cross the network unprotected",
                        "ship over `https://`, or drop the credentials",
                    );
                    return None;
                }
                Some(self.expand(&file)?)
            }
            None => None,
        };
        let ca_file = match o.get("ca_file") {
            Some(n) => {
                let file = self.string(n, "`log_shipping.otlp.ca_file`")?;
                if !https {
                    self.report(
                        Code::UnknownKey,
                        "`ca_file` applies only to an `https://` endpoint".to_string(),
                        file.span,
                        "not used over plain http",
                        "remove `ca_file`, or ship over `https://`",
                    );
                    return None;
                }
                Some(self.expand(&file)?)
            }
            None => None,
        };
        let service_name = match o.get("service_name") {
            Some(n) => {
                let name = self.string(n, "`log_shipping.otlp.service_name`")?;
                if name.value.is_empty()
                    || name.value.len() > 128
                    || name.value.chars().any(char::is_control)
                {
                    self.report(
                        Code::UnknownValue,
                        format!(
                            "`{}` is not a usable service name",
                            name.value.escape_debug()
                        ),
                        name.span,
                        "1 to 128 characters, no control characters",
                        "write e.g. `mcpwall`, or the gateway's name",
                    );
                    return None;
                }
                name.value
            }
            None => "mcpwall".to_string(),
        };
        ok.then_some(OtlpSink {
            endpoint,
            headers,
            header_file,
            ca_file,
            service_name,
        })
    }

    /// `gateway: {max_sessions: 256, sessions_per_identity: 64, …}`; a key left out keeps
    /// its default. A share larger than the whole is a mistake, not a request for it.
    fn gateway(&mut self, node: &YNode) -> Option<Spanned<GatewaySettings>> {
        let f = self.fields(node, "`gateway`", GATEWAY_KEYS)?;
        let mut value = GatewaySettings::default();
        let ok = self.positive_u32s(
            &f,
            "gateway",
            [
                ("max_sessions", &mut value.max_sessions),
                ("sessions_per_identity", &mut value.sessions_per_identity),
                ("session_idle_seconds", &mut value.session_idle_seconds),
                ("max_connections", &mut value.max_connections),
                ("connections_per_peer", &mut value.connections_per_peer),
                ("header_timeout_seconds", &mut value.header_timeout_seconds),
            ],
        );
        if let Some(n) = f.get("audit_before_answer") {
            value.audit_before_answer = self.bool(n, "`gateway.audit_before_answer`")?.value;
        }
        if !ok {
            return None;
        }
        let mut fits = true;
        for (part, whole, part_key, whole_key) in [
            (
                value.sessions_per_identity,
                value.max_sessions,
                "sessions_per_identity",
                "max_sessions",
            ),
            (
                value.connections_per_peer,
                value.max_connections,
                "connections_per_peer",
                "max_connections",
            ),
        ] {
            if part > whole {
                let at = f
                    .get(part_key)
                    .map_or_else(|| self.span(node), |n| self.span(n));
                self.report(
                    Code::BadThreshold,
                    format!(
                        "`gateway.{part_key}` ({part}) is more than `gateway.{whole_key}` ({whole})"
                    ),
                    at,
                    "larger than the whole",
                    format!("set `{part_key}` to at most {whole}, or raise `{whole_key}`"),
                );
                fits = false;
            }
        }
        fits.then(|| Spanned {
            value,
            span: self.span(node),
        })
    }

    /// `oauth: {issuer, resource, jwks_url, algorithms, …}` (without `jwks_url`, the key
    /// set is discovered from the issuer): every URL absolute (https, or
    /// http on a loopback host), the algorithms a non-empty list of asymmetric ones, the
    /// numbers within their bounds.
    fn oauth(&mut self, node: &YNode) -> Option<Spanned<OAuthSettings>> {
        use super::policy::oauth_limits as lim;
        let f = self.fields(node, "`oauth`", OAUTH_KEYS)?;
        let example = "write `oauth: {issuer: https://idp.example, resource: https://gateway.example/mcp, jwks_url: https://idp.example/jwks.json, algorithms: [RS256]}`";
        let mut ok = true;
        let url = |this: &mut Self, key: &str| -> Option<String> {
            let Some(n) = f.get(key) else {
                this.report(
                    Code::MissingKey,
                    format!("`oauth` has no `{key}`"),
                    this.head_span(node),
                    format!("`{key}` is missing"),
                    example,
                );
                return None;
            };
            let s = this.string(n, &format!("`oauth.{key}`"))?;
            if let Err(why) = check_oauth_url(&s.value) {
                this.report(
                    Code::UnknownValue,
                    format!("`oauth.{key}` is not a usable URL: {why}"),
                    s.span,
                    "not usable here",
                    "write an absolute https:// URL (http:// only for a loopback host, as in tests)",
                );
                return None;
            }
            Some(s.value)
        };
        let issuer = url(self, "issuer");
        let resource = url(self, "resource");
        // Without `jwks_url`, the key set is found through OpenID Connect discovery.
        let jwks_url = f.get("jwks_url").map(|_| url(self, "jwks_url"));
        let jwks_ca_file = match f.get("jwks_ca_file") {
            Some(n) => {
                let file = self.string(n, "`oauth.jwks_ca_file`");
                let https =
                    |u: &Option<String>| u.as_deref().is_some_and(|u| u.starts_with("https:"));
                let fetched_over_https = match &jwks_url {
                    Some(jwks) => https(jwks),
                    None => https(&issuer),
                };
                match file {
                    Some(file) if !fetched_over_https => {
                        self.report(
                            Code::UnknownKey,
                            "`jwks_ca_file` applies only to a key set fetched over https://"
                                .to_string(),
                            file.span,
                            "not used over plain http",
                            "remove `jwks_ca_file`, or publish the key set over https://",
                        );
                        ok = false;
                        None
                    }
                    Some(file) => self.expand(&file),
                    None => {
                        ok = false;
                        None
                    }
                }
            }
            None => None,
        };
        let mut algorithms = Vec::new();
        match f.get("algorithms") {
            None => {
                self.report(
                    Code::MissingKey,
                    "`oauth` has no `algorithms`",
                    self.head_span(node),
                    "`algorithms` is missing",
                    "name the provider's signing algorithms, e.g. `algorithms: [RS256]`: pinning them keeps a token from choosing how it is checked",
                );
                ok = false;
            }
            Some(n) => {
                let list = self.strings(n, "`oauth.algorithms`");
                if list.is_empty() {
                    self.report(
                        Code::EmptyMatch,
                        "`oauth.algorithms` is empty: no token could ever be accepted",
                        self.span(n),
                        "no algorithm",
                        format!("name at least one of: {}", lim::ALGORITHMS.join(", ")),
                    );
                    ok = false;
                }
                for a in list {
                    if lim::ALGORITHMS.contains(&a.value.as_str()) {
                        if !algorithms.contains(&a.value) {
                            algorithms.push(a.value);
                        }
                        continue;
                    }
                    let why = if a.value.eq_ignore_ascii_case("none") {
                        "an unsigned token proves nothing".to_string()
                    } else if a.value.to_ascii_uppercase().starts_with("HS") {
                        "a shared-secret algorithm: the key set is public, so anyone could sign"
                            .to_string()
                    } else {
                        "not a signature algorithm mcpwall checks".to_string()
                    };
                    self.report(
                        Code::UnknownValue,
                        format!(
                            "`{}` is not an accepted `oauth.algorithms` entry: {why}",
                            a.value
                        ),
                        a.span,
                        "not accepted",
                        format!("use one of: {}", lim::ALGORITHMS.join(", ")),
                    );
                    ok = false;
                }
            }
        }
        let claim = |this: &mut Self, key: &str| -> Option<Option<String>> {
            let Some(n) = f.get(key) else {
                return Some(None);
            };
            let s = this.string(n, &format!("`oauth.{key}`"))?;
            if s.value.is_empty() || s.value.len() > 128 {
                this.report(
                    Code::UnknownValue,
                    format!("`oauth.{key}` must name a claim (1 to 128 characters)"),
                    s.span,
                    "not a claim name",
                    "write the claim's name, e.g. `sub`, `email` or `groups`",
                );
                return None;
            }
            Some(Some(s.value))
        };
        let identity_claim = claim(self, "identity_claim");
        let groups_claim = claim(self, "groups_claim");
        let required_scopes = match f.get("required_scopes") {
            Some(n) => self
                .strings(n, "`oauth.required_scopes`")
                .into_iter()
                .map(|s| s.value)
                .collect(),
            None => Vec::new(),
        };
        let mut value = OAuthSettings {
            issuer: issuer.clone().unwrap_or_default(),
            resource: resource.clone().unwrap_or_default(),
            jwks_url: jwks_url.clone().flatten(),
            jwks_ca_file,
            algorithms,
            identity_claim: String::new(),
            groups_claim: None,
            required_scopes,
            leeway_seconds: lim::LEEWAY_SECONDS,
            jwks_max_age_seconds: lim::JWKS_MAX_AGE_SECONDS,
            jwks_min_refresh_seconds: lim::JWKS_MIN_REFRESH_SECONDS,
            fetch_timeout_seconds: lim::FETCH_TIMEOUT_SECONDS,
            max_token_bytes: lim::MAX_TOKEN_BYTES,
        };
        ok &= self.positive_u32s(
            &f,
            "oauth",
            [
                ("jwks_max_age_seconds", &mut value.jwks_max_age_seconds),
                (
                    "jwks_min_refresh_seconds",
                    &mut value.jwks_min_refresh_seconds,
                ),
                ("fetch_timeout_seconds", &mut value.fetch_timeout_seconds),
                ("max_token_bytes", &mut value.max_token_bytes),
            ],
        );
        if let Some(n) = f.get("leeway_seconds") {
            match &n.value {
                Node::Int(i) if (0..=i128::from(lim::MAX_LEEWAY_SECONDS)).contains(i) => {
                    value.leeway_seconds = *i as u32;
                }
                _ => {
                    self.report(
                        Code::BadThreshold,
                        format!(
                            "`oauth.leeway_seconds` must be a whole number from 0 to {}",
                            lim::MAX_LEEWAY_SECONDS
                        ),
                        self.span(n),
                        "out of range",
                        "a few seconds of clock skew is enough; an expired token stays expired",
                    );
                    ok = false;
                }
            }
        }
        for (key, v, max) in [
            (
                "fetch_timeout_seconds",
                value.fetch_timeout_seconds,
                lim::MAX_FETCH_TIMEOUT_SECONDS,
            ),
            (
                "max_token_bytes",
                value.max_token_bytes,
                lim::MAX_MAX_TOKEN_BYTES,
            ),
            (
                "jwks_min_refresh_seconds",
                value.jwks_min_refresh_seconds,
                value.jwks_max_age_seconds,
            ),
        ] {
            if v > max {
                let at = f.get(key).map_or_else(|| self.span(node), |n| self.span(n));
                self.report(
                    Code::BadThreshold,
                    format!("`oauth.{key}` ({v}) is more than {max}"),
                    at,
                    "too large",
                    format!("set `{key}` to at most {max}"),
                );
                ok = false;
            }
        }
        match (identity_claim, groups_claim) {
            (Some(id), Some(groups)) => {
                value.identity_claim = id.unwrap_or_else(|| "sub".to_string());
                value.groups_claim = groups;
            }
            _ => ok = false,
        }
        // A `jwks_url` written but unusable is `Some(None)`: reported above.
        let complete =
            issuer.is_some() && resource.is_some() && jwks_url.is_none_or(|u| u.is_some());
        (ok && complete).then(|| Spanned {
            value,
            span: self.span(node),
        })
    }

    /// `backups: {keep: 10, max_age_days: 30}`; a key left out keeps its default.
    fn backups(&mut self, node: &YNode) -> Option<Spanned<BackupSettings>> {
        let f = self.fields(node, "`backups`", BACKUP_KEYS)?;
        let mut value = BackupSettings::default();
        let ok = self.positive_u32s(
            &f,
            "backups",
            [
                ("keep", &mut value.keep),
                ("max_age_days", &mut value.max_age_days),
            ],
        );
        ok.then(|| Spanned {
            value,
            span: self.span(node),
        })
    }

    /// Each slot from its key's positive integer in `section`, when the key is given;
    /// false when one is not a positive integer (reported).
    fn positive_u32s<const N: usize>(
        &mut self,
        f: &Fields<'_>,
        section: &str,
        slots: [(&str, &mut u32); N],
    ) -> bool {
        let mut ok = true;
        for (key, slot) in slots {
            if let Some(n) = f.get(key) {
                match self.positive(n, &format!("`{section}.{key}`")) {
                    Some(v) => *slot = u32::try_from(v.value).unwrap_or(u32::MAX),
                    None => ok = false,
                }
            }
        }
        ok
    }

    /// `log_retention: {max_days: 90, max_mb: 1024}`; a key left out keeps its default.
    fn log_retention(&mut self, node: &YNode) -> Option<Spanned<LogRetention>> {
        let f = self.fields(node, "`log_retention`", RETENTION_KEYS)?;
        let mut value = LogRetention::default();
        let ok = self.positive_u32s(
            &f,
            "log_retention",
            [
                ("max_days", &mut value.max_days),
                ("max_mb", &mut value.max_mb),
            ],
        );
        ok.then(|| Spanned {
            value,
            span: self.span(node),
        })
    }

    fn circuit_breaker(&mut self, node: &YNode) -> Option<Spanned<CircuitBreakerSettings>> {
        let f = self.fields(node, "`circuit_breaker`", BREAKER_KEYS)?;
        let example =
            "write `circuit_breaker: {max_violations: 5, window_seconds: 60, action: suspend}`";
        let violations =
            self.required_positive(&f, node, "circuit_breaker", "max_violations", example);
        let window = self.required_positive(&f, node, "circuit_breaker", "window_seconds", example);
        let action = match f.get("action") {
            Some(n) => self.word(
                n,
                "`circuit_breaker.action`",
                &[("suspend", BreakerAction::Suspend)],
            ),
            None => Some(Spanned {
                value: BreakerAction::Suspend,
                span: self.span(node),
            }),
        };
        let (violations, window, action) = (violations?, window?, action?);
        Some(Spanned {
            value: CircuitBreakerSettings {
                max_violations: u32::try_from(violations.value).unwrap_or(u32::MAX),
                window_seconds: window.value,
                action: action.value,
            },
            span: self.span(node),
        })
    }

    /// A required positive integer `section.key`; reports it missing with `example` as help.
    fn required_positive(
        &mut self,
        f: &Fields<'_>,
        node: &YNode,
        section: &str,
        key: &str,
        example: &str,
    ) -> Option<Spanned<u64>> {
        match f.get(key) {
            Some(n) => self.positive(n, &format!("`{section}.{key}`")),
            None => {
                self.report(
                    Code::MissingKey,
                    format!("`{section}` has no `{key}`"),
                    self.head_span(node),
                    format!("`{key}` is missing"),
                    example,
                );
                None
            }
        }
    }

    fn rate_limit(&mut self, node: &YNode) -> Option<Spanned<RateLimit>> {
        let f = self.fields(node, "`rate_limit`", RATE_KEYS)?;
        let example = "write `rate_limit: {max_calls: 60, window_seconds: 60}`";
        let calls = self.required_positive(&f, node, "rate_limit", "max_calls", example);
        let window = self.required_positive(&f, node, "rate_limit", "window_seconds", example);
        let calls = calls?;
        let window = window?;
        Some(Spanned {
            value: RateLimit {
                max_calls: u32::try_from(calls.value).unwrap_or(u32::MAX),
                window_seconds: window.value,
            },
            span: self.span(node),
        })
    }

    // ---------------------------------------------------------------- rules

    /// The fields every rule kind shares.
    fn rule_head(&mut self, f: &Fields<'_>, node: &YNode, what: &str) -> Option<Spanned<String>> {
        let name = match f.get("name") {
            Some(n) => self.string(n, "a rule's `name`"),
            None => {
                self.report(
                    Code::MissingKey,
                    format!("{what} has no `name`"),
                    self.head_span(node),
                    "this rule has no name",
                    "add `name: some-kebab-case-name`; names appear in audit logs and denials",
                );
                None
            }
        }?;
        let alias_at = (node.referenced != node.defined)
            .then(|| span_of_location(&self.source.text, &self.lines, self.id, &node.referenced));
        self.names.push((name.clone(), alias_at));
        let valid = !name.value.is_empty()
            && name.value.len() <= 80
            && name
                .value
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
        if !valid {
            self.report(
                Code::UnknownValue,
                format!("rule name `{}` is not a valid name", name.value),
                name.span,
                "letters, digits, `-`, `_` and `.` only",
                "use a short kebab-case name such as `block-ssh-keys`",
            );
        }
        Some(name)
    }

    fn opt_text(&mut self, f: &Fields<'_>, key: &str) -> Option<String> {
        let n = f.get(key)?;
        self.string(n, &format!("`{key}`")).map(|s| s.value)
    }

    fn missing_match(&mut self, name: &Spanned<String>, example: &str) {
        self.report(
            Code::MissingKey,
            format!("rule `{}` has no `match`", name.value),
            name.span,
            "this rule has no `match`",
            format!("add the conditions under `match:`, e.g. `match: {example}`"),
        );
    }

    fn missing_action(&mut self, name: &Spanned<String>, words: &str) {
        self.report(
            Code::MissingKey,
            format!("rule `{}` has no `action`", name.value),
            name.span,
            "this rule has no `action`",
            format!("add `action:` with one of: {words}"),
        );
    }

    fn rule(&mut self, node: &YNode) -> Option<Rule> {
        let f = self.fields(node, "a rule", INBOUND_RULE_KEYS)?;
        let name = self.rule_head(&f, node, "a rule");
        let description = self.opt_text(&f, "description");
        let why = self.opt_text(&f, "why");
        let message = self.opt_text(&f, "message");
        let action = match (f.get("action"), &name) {
            (Some(n), _) => self.word(
                n,
                "rule `action`",
                &[
                    ("allow", Action::Allow),
                    ("deny", Action::Deny),
                    ("ask", Action::Ask),
                ],
            ),
            (None, Some(name)) => {
                self.missing_action(name, "deny, allow, ask");
                None
            }
            (None, None) => None,
        };
        let remember = f.get("remember").and_then(|n| self.remember(n, action));
        let examples = f
            .get("examples")
            .map(|n| self.examples(n))
            .unwrap_or_default();
        let mut method = None;
        let mut tool = None;
        let mut identity = None;
        let mut arguments = Vec::new();
        let mut match_ok = true;
        match (f.get("match"), &name) {
            (Some(m), _) => match self.match_clause(m, MATCH_KEYS) {
                Some(c) => (method, tool, identity, arguments) = c,
                None => match_ok = false,
            },
            (None, Some(name)) => {
                self.missing_match(name, "{tool: \"read_*\"}");
                match_ok = false;
            }
            (None, None) => match_ok = false,
        }
        let span = self.span(node);
        let method = method.unwrap_or_else(|| Spanned {
            value: DEFAULT_METHOD.to_string(),
            span: f.get("match").map(|m| self.head_span(m)).unwrap_or(span),
        });
        if !match_ok {
            return None;
        }
        Some(Rule {
            name: name?,
            description,
            why,
            method,
            tool,
            identity,
            arguments,
            action: action?.value,
            remember,
            message,
            examples,
            span,
        })
    }

    /// A rule's or an exception's `match:` (keys from `allowed`): method, tool, identity
    /// and argument conditions; `None` (reported) when anything is wrong or it is empty.
    #[allow(clippy::type_complexity)]
    fn match_clause(
        &mut self,
        m: &YNode,
        allowed: &[&str],
    ) -> Option<(
        Option<Spanned<String>>,
        Option<Spanned<String>>,
        Option<Spanned<String>>,
        Vec<ArgCondition>,
    )> {
        let mf = self.fields(m, "`match`", allowed)?;
        if mf.is_empty() {
            self.report(
                Code::EmptyMatch,
                "`match` has no conditions, so the rule would judge every call",
                self.head_span(m),
                "empty `match`",
                "add `tool:` or `arguments:`; to judge every tool write `tool: \"*\"`, \
                 or set `settings.default_action` instead",
            );
            return None;
        }
        let mut ok = true;
        let mut glob = |this: &mut Self, key: &str| {
            let n = mf.get(key)?;
            let g = this.glob(n, &format!("in `{key}`"));
            ok &= g.is_some();
            g
        };
        let method = glob(self, "method");
        let tool = glob(self, "tool");
        let identity = glob(self, "identity");
        let mut arguments = Vec::new();
        if let Some(n) = mf.get("arguments") {
            match self.arguments(n) {
                Some(a) => arguments = a,
                None => ok = false,
            }
        }
        ok.then_some((method, tool, identity, arguments))
    }

    /// `exceptions: {RULE: [{match: {..}, why: ".."}, ..]}`: each entry a narrow case in
    /// which the pack rule `RULE` does not apply. Whether `RULE` exists is checked when the
    /// packs are merged; here only the shape.
    fn exceptions(&mut self, node: &YNode) -> Vec<Exception> {
        let Node::Map(entries) = &node.value else {
            self.wrong_type(
                node,
                "`exceptions`",
                "a mapping of rule names to lists of exceptions",
            );
            return Vec::new();
        };
        let mut out = Vec::new();
        for (k, v) in entries {
            let Some(rule) = self.string(k, "a rule name in `exceptions`") else {
                continue;
            };
            let items = match &v.value {
                Node::Seq(items) => items.as_slice(),
                _ => {
                    self.wrong_type(
                        v,
                        &format!("`exceptions.{}`", rule.value),
                        "a list of `{match: ..}` entries",
                    );
                    continue;
                }
            };
            for (i, item) in items.iter().enumerate() {
                let Some(f) = self.fields(item, "an exception", EXCEPTION_KEYS) else {
                    continue;
                };
                let why = self.opt_text(&f, "why");
                let Some(m) = f.get("match") else {
                    self.report(
                        Code::MissingKey,
                        format!("an exception to `{}` has no `match`", rule.value),
                        self.head_span(item),
                        "this exception has no `match`",
                        "add the case it covers under `match:`, e.g. `match: {tool: write_file, \
                         arguments: {path: {pattern: \"README.md\"}}}`",
                    );
                    continue;
                };
                let Some((method, tool, _, arguments)) = self.match_clause(m, EXCEPTION_MATCH_KEYS)
                else {
                    continue;
                };
                let span = self.span(item);
                out.push(Exception {
                    rule: rule.clone(),
                    conditions: Rule {
                        name: Spanned {
                            value: format!("{}#{}", rule.value, i + 1),
                            span,
                        },
                        description: None,
                        why,
                        method: method.unwrap_or_else(|| Spanned {
                            value: "*".to_string(),
                            span: self.head_span(m),
                        }),
                        tool,
                        identity: None,
                        arguments,
                        action: Action::Allow,
                        remember: None,
                        message: None,
                        examples: Examples::default(),
                        span,
                    },
                });
            }
        }
        out
    }

    /// `remember: session` (only beside `action: ask`): an approval holds for identical
    /// calls for the rest of the session.
    fn remember(&mut self, node: &YNode, action: Option<Spanned<Action>>) -> Option<Remember> {
        let value = self.word(node, "`remember`", &[("session", Remember::Session)])?;
        if let Some(a) = action
            && a.value != Action::Ask
        {
            self.report(
                Code::UnknownKey,
                "`remember` only applies to rules with `action: ask`",
                value.span,
                "an approval to remember needs a rule that asks",
                "remove `remember`, or set `action: ask`",
            );
            return None;
        }
        Some(value.value)
    }

    /// `arguments: {NAME: {matcher: ..}, _any_value: {..}}`; `None` if anything was wrong.
    fn arguments(&mut self, node: &YNode) -> Option<Vec<ArgCondition>> {
        let Node::Map(entries) = &node.value else {
            self.wrong_type(
                node,
                "`arguments`",
                "a mapping of argument names to matchers",
            );
            return None;
        };
        if entries.is_empty() {
            self.report(
                Code::EmptyMatch,
                "`arguments` names no argument",
                self.head_span(node),
                "empty `arguments`",
                "name an argument (`path: {regex: ...}`) or `_any_value`, or remove `arguments`",
            );
            return None;
        }
        let mut ok = true;
        let mut out = Vec::new();
        for (k, v) in entries {
            let Some(key) = k.value.key_text() else {
                self.wrong_type(k, "an argument name", "a plain word");
                ok = false;
                continue;
            };
            let selector = if key == "_any_value" {
                ArgSelector::AnyValue
            } else if key.starts_with('_') {
                let help = match did_you_mean(&key, &["_any_value"]) {
                    Some(near) => format!("did you mean `{near}`?"),
                    None => "names starting with `_` are reserved".to_string(),
                };
                self.report(
                    Code::UnknownKey,
                    format!("unknown selector `{key}` in `arguments`"),
                    self.span(k),
                    help,
                    "use an argument name, or `_any_value` to look at every key and value",
                );
                ok = false;
                continue;
            } else {
                ArgSelector::Named(key.clone())
            };
            ok &= self.matcher(v, &key, &selector, &mut out);
        }
        ok.then_some(out)
    }

    /// One matcher mapping; several keys become several conditions (all must hold).
    fn matcher(
        &mut self,
        node: &YNode,
        arg: &str,
        selector: &ArgSelector,
        out: &mut Vec<ArgCondition>,
    ) -> bool {
        let what = format!("the matcher of `{arg}`");
        let Some(f) = self.fields(node, &what, MATCHER_KEYS) else {
            return false;
        };
        if f.is_empty() {
            self.report(
                Code::EmptyMatch,
                format!("{what} has no condition"),
                self.head_span(node),
                "empty matcher",
                "add one of `regex`, `pattern`, `not_under`, `command` or `secrets: true`",
            );
            return false;
        }
        let mut ok = true;
        let mut push = |matcher: Matcher, span: Span| {
            out.push(ArgCondition {
                selector: selector.clone(),
                matcher,
                span,
            })
        };
        for (key, k, v) in &f.entries {
            let span = self.span(k);
            match key.as_str() {
                "regex" => match self.regex(v, &format!("for argument `{arg}`"), false) {
                    Some(r) => push(Matcher::Regex(r), span),
                    None => ok = false,
                },
                "pattern" => match self.glob(v, &format!("for argument `{arg}`")) {
                    Some(g) => push(Matcher::Pattern(g), span),
                    None => ok = false,
                },
                "not_under" => {
                    let roots = self.strings(v, "`not_under`");
                    if roots.is_empty() {
                        ok = false;
                    }
                    for written in roots {
                        match self.expand(&written) {
                            Some(root) => push(Matcher::NotUnder { root, written }, span),
                            None => ok = false,
                        }
                    }
                }
                "secrets" => match self.bool(v, "`secrets`") {
                    Some(b) if b.value => push(Matcher::Secrets, span),
                    Some(b) => {
                        self.report(
                            Code::EmptyMatch,
                            "`secrets: false` is not a condition",
                            b.span,
                            "matches nothing",
                            "write `secrets: true` to match values holding a secret, or remove the key",
                        );
                        ok = false;
                    }
                    None => ok = false,
                },
                "command" => match self.command_matcher(v, arg) {
                    Some(c) => push(Matcher::Command(c), span),
                    None => ok = false,
                },
                _ => unreachable!("fields() only returns allowed keys"),
            }
        }
        ok
    }

    /// `command: {clause}` or `command: [{clause}, …]`.
    fn command_matcher(&mut self, node: &YNode, arg: &str) -> Option<Spanned<Vec<CommandClause>>> {
        let span = self.head_span(node);
        let items: Vec<&YNode> = match &node.value {
            Node::Seq(items) => items.iter().collect(),
            _ => vec![node],
        };
        let mut clauses = Vec::new();
        let mut ok = true;
        for item in items {
            match self.command_clause(item, arg) {
                Some(c) => clauses.push(c),
                None => ok = false,
            }
        }
        if ok && clauses.is_empty() {
            self.report(
                Code::EmptyMatch,
                format!("the `command` matcher of `{arg}` has no clause"),
                span,
                "empty list",
                "write at least one clause, e.g. `command: {name: rm, flags: [-r]}`",
            );
            return None;
        }
        ok.then_some(Spanned {
            value: clauses,
            span,
        })
    }

    fn command_clause(&mut self, node: &YNode, arg: &str) -> Option<CommandClause> {
        let what = format!("a `command` clause of `{arg}`");
        let f = self.fields(node, &what, COMMAND_KEYS)?;
        if f.is_empty() {
            self.report(
                Code::EmptyMatch,
                format!("{what} has no condition"),
                self.head_span(node),
                "empty clause",
                format!("add one of: {}", COMMAND_KEYS.join(", ")),
            );
            return None;
        }
        let mut c = CommandClause::default();
        let mut ok = !f.had_unknown;
        let mut bad_glob = false;
        let mut globs = |me: &mut Self, v: &YNode, key: &str| -> Vec<String> {
            let mut out = Vec::new();
            for s in me.strings(v, &format!("`{key}`")) {
                match me.glob_value(&s, &format!("in `{key}`")) {
                    true => out.push(s.value),
                    false => bad_glob = true,
                }
            }
            out
        };
        for (key, _k, v) in &f.entries {
            match key.as_str() {
                "name" => c.names = globs(self, v, "name"),
                "redirect" => c.redirects = globs(self, v, "redirect"),
                "words" => c.words = globs(self, v, "words"),
                "flags" => {
                    for s in self.strings(v, "`flags`") {
                        if !s.value.starts_with('-') || s.value == "-" || s.value == "--" {
                            self.report(
                                Code::UnknownValue,
                                format!("`{}` is not a flag", s.value),
                                s.span,
                                "not a flag",
                                "write flags with their dashes: `-r` (any short spelling: -rf, -fr, -r -f), `--recursive`, or a one-dash word such as `-delete`",
                            );
                            ok = false;
                        } else {
                            c.flags.push(s.value);
                        }
                    }
                }
                "subcommand" => {
                    for s in self.strings(v, "`subcommand`") {
                        c.subcommands
                            .push(s.value.split_whitespace().map(str::to_string).collect());
                    }
                }
                "unknown_name" => {
                    c.unknown_name = self.bool(v, "`unknown_name`").is_some_and(|b| b.value)
                }
                "over_find" => c.over_find = self.bool(v, "`over_find`").is_some_and(|b| b.value),
                "after_download" => {
                    c.after_download = self.bool(v, "`after_download`").is_some_and(|b| b.value)
                }
                "input" => {
                    for s in self.strings(v, "`input`") {
                        match s.value.as_str() {
                            "downloaded" => c.input |= crate::shell::DOWNLOADED,
                            "decoded" => c.input |= crate::shell::DECODED,
                            _ => {
                                let label = match did_you_mean(&s.value, &["downloaded", "decoded"])
                                {
                                    Some(near) => format!("did you mean `{near}`?"),
                                    None => "unknown input".to_string(),
                                };
                                self.report(
                                    Code::UnknownValue,
                                    format!("unknown `input` `{}`", s.value),
                                    s.span,
                                    label,
                                    "`input` accepts `downloaded` and `decoded`",
                                );
                                ok = false;
                            }
                        }
                    }
                }
                "paths" => {
                    let Some(pf) =
                        self.fields(v, "`paths` of a `command` clause", COMMAND_PATH_KEYS)
                    else {
                        ok = false;
                        continue;
                    };
                    ok &= !pf.had_unknown;
                    let mut paths = CommandPaths::default();
                    for (pkey, _pk, pv) in &pf.entries {
                        match pkey.as_str() {
                            "pattern" => paths.patterns = globs(self, pv, "pattern"),
                            "not_under" | "ancestors_of" => {
                                for written in self.strings(pv, &format!("`{pkey}`")) {
                                    match self.expand(&written) {
                                        Some(root) if pkey == "not_under" => {
                                            paths.not_under.push(root);
                                            paths.not_under_written.push(written.value);
                                        }
                                        Some(root) => {
                                            paths.ancestors_of.push(root);
                                            paths.ancestors_of_written.push(written.value);
                                        }
                                        None => ok = false,
                                    }
                                }
                            }
                            _ => unreachable!("fields() only returns allowed keys"),
                        }
                    }
                    if pf.get("pattern").is_none() && pf.get("ancestors_of").is_none() {
                        self.report(
                            Code::EmptyMatch,
                            "`paths` needs `pattern` or `ancestors_of`",
                            self.head_span(v),
                            "no path condition",
                            "add `pattern: [\"/etc/**\"]` or `ancestors_of: ${PROJECT_DIR}`",
                        );
                        ok = false;
                    }
                    c.paths = Some(paths);
                }
                _ => unreachable!("fields() only returns allowed keys"),
            }
        }
        ok &= !bad_glob;
        ok.then_some(c)
    }

    /// Whether a glob of a `command` clause compiles; reports it if not.
    fn glob_value(&mut self, s: &Spanned<String>, what: &str) -> bool {
        // The embedded packs' clauses are built by the test suite (and on first use by the
        // proxy); checking their globs again at every start cost a third of start-up.
        if self.source.kind == SourceKind::Builtin {
            return true;
        }
        if let Err(e) = globset::Glob::new(&s.value) {
            let msg = e.kind().to_string();
            self.report(
                Code::BadGlob,
                format!("invalid glob {what}: {msg}"),
                s.span,
                msg,
                "globs use `*`, `**`, `?`, `[abc]` and `{a,b}`; escape a literal with `[*]`",
            );
            return false;
        }
        true
    }

    fn outbound_rule(&mut self, node: &YNode) -> Option<OutboundRule> {
        let f = self.fields(node, "an outbound rule", RULE_KEYS)?;
        let name = self.rule_head(&f, node, "an outbound rule");
        let description = self.opt_text(&f, "description");
        let why = self.opt_text(&f, "why");
        let message = self.opt_text(&f, "message");
        let action = match (f.get("action"), &name) {
            (Some(n), _) => self.word(
                n,
                "outbound `action`",
                &[
                    ("allow", RuleAction::Allow),
                    ("deny", RuleAction::Deny),
                    ("redact", RuleAction::Redact),
                    ("log_only", RuleAction::LogOnly),
                ],
            ),
            (None, Some(name)) => {
                self.missing_action(name, "redact, deny, log_only, allow");
                None
            }
            (None, None) => None,
        };
        let examples = f
            .get("examples")
            .map(|n| self.examples(n))
            .unwrap_or_default();
        let span = self.span(node);
        let mut rule = OutboundRule {
            name: Spanned {
                value: String::new(),
                span,
            },
            description,
            why,
            method: None,
            tool: None,
            server: None,
            secrets: false,
            response_contains: Vec::new(),
            response_contains_regex: Vec::new(),
            response_size_exceeds: None,
            action: RuleAction::LogOnly,
            additive: false,
            message,
            examples,
            span,
        };
        let mut ok = true;
        match (f.get("match"), &name) {
            (Some(m), _) => match self.fields(m, "`match`", OUT_MATCH_KEYS) {
                Some(mf) if mf.is_empty() => {
                    ok = false;
                    self.report(
                        Code::EmptyMatch,
                        "`match` has no conditions, so the rule would judge every message",
                        self.head_span(m),
                        "empty `match`",
                        "add `secrets: true`, `response_contains`, `response_contains_regex`, \
                         `response_size_exceeds`, or `method: \"*\"` to really mean every message",
                    );
                }
                Some(mf) => {
                    for key in ["method", "tool", "server"] {
                        if let Some(n) = mf.get(key) {
                            let g = self.glob(n, &format!("in `{key}`"));
                            ok &= g.is_some();
                            match key {
                                "method" => rule.method = g,
                                "tool" => rule.tool = g,
                                _ => rule.server = g,
                            }
                        }
                    }
                    if let Some(n) = mf.get("secrets") {
                        match self.bool(n, "`secrets`") {
                            Some(b) => rule.secrets = b.value,
                            None => ok = false,
                        }
                    }
                    if let Some(n) = mf.get("response_contains") {
                        for lit in self.strings(n, "`response_contains`") {
                            if lit.value.is_empty() {
                                self.report(
                                    Code::EmptyMatch,
                                    "an empty `response_contains` entry matches every message",
                                    lit.span,
                                    "empty text",
                                    "remove the empty entry",
                                );
                                ok = false;
                            } else {
                                rule.response_contains.push(lit);
                            }
                        }
                    }
                    if let Some(n) = mf.get("response_contains_regex") {
                        let items: Vec<&YNode> = match &n.value {
                            Node::Seq(items) => items.iter().collect(),
                            _ => vec![n],
                        };
                        for item in items {
                            match self.regex(item, "in `response_contains_regex`", true) {
                                Some(r) => rule.response_contains_regex.push(r),
                                None => ok = false,
                            }
                        }
                    }
                    if let Some(n) = mf.get("response_size_exceeds") {
                        match self.positive(n, "`response_size_exceeds`") {
                            Some(v) => rule.response_size_exceeds = Some(v.value),
                            None => ok = false,
                        }
                    }
                }
                None => ok = false,
            },
            (None, Some(name)) => {
                self.missing_match(name, "{secrets: true}");
                ok = false;
            }
            (None, None) => ok = false,
        }
        let name = name?;
        let action = action?;
        if ok
            && action.value == RuleAction::Redact
            && !rule.secrets
            && rule.response_contains.is_empty()
            && rule.response_contains_regex.is_empty()
        {
            self.report(
                Code::EmptyMatch,
                format!("rule `{}` redacts, but names nothing to redact", name.value),
                action.span,
                "nothing to redact",
                "add `secrets: true`, `response_contains` or `response_contains_regex` to say \
                 which bytes to replace, or use `action: deny`",
            );
            ok = false;
        }
        if !ok {
            return None;
        }
        rule.name = name;
        rule.action = action.value;
        Some(rule)
    }

    fn examples(&mut self, node: &YNode) -> Examples {
        let mut ex = Examples::default();
        let Some(f) = self.fields(node, "`examples`", EXAMPLES_KEYS) else {
            return ex;
        };
        if let Some(n) = f.get("match") {
            ex.should_match = self
                .list(n, "`examples.match`")
                .iter()
                .map(|i| to_json(&i.value))
                .collect();
        }
        if let Some(n) = f.get("no_match") {
            ex.should_not_match = self
                .list(n, "`examples.no_match`")
                .iter()
                .map(|i| to_json(&i.value))
                .collect();
        }
        ex
    }

    fn secrets(&mut self, node: &YNode, raw: &mut RawPolicy) {
        let Some(f) = self.fields(node, "`secrets`", SECRETS_KEYS) else {
            return;
        };
        let builtin: Vec<String> = crate::secrets::builtin_specs()
            .into_iter()
            .map(|s| s.name)
            .collect();
        let builtin_refs: Vec<&str> = builtin.iter().map(String::as_str).collect();
        if let Some(n) = f.get("patterns") {
            let mut seen: HashMap<String, Span> = HashMap::new();
            for item in self.list(n, "`secrets.patterns`") {
                let Some(pf) = self.fields(item, "a secret pattern", PATTERN_KEYS) else {
                    continue;
                };
                let name = match pf.get("name") {
                    Some(n) => self.string(n, "a secret pattern's `name`"),
                    None => {
                        self.report(
                            Code::MissingKey,
                            "a secret pattern has no `name`",
                            self.head_span(item),
                            "no `name`",
                            "add `name:`; it labels redactions and audit events",
                        );
                        None
                    }
                };
                let regex = match pf.get("regex") {
                    Some(n) => self.regex(n, "in a secret pattern", true),
                    None => {
                        self.report(
                            Code::MissingKey,
                            "a secret pattern has no `regex`",
                            self.head_span(item),
                            "no `regex`",
                            "add `regex:` describing the secret's shape",
                        );
                        None
                    }
                };
                let entropy = match pf.get("entropy_threshold") {
                    Some(n) => match n.value {
                        Node::Int(i) if (0..=8).contains(&i) => Some(Some(i as f64)),
                        Node::Float(x) if (0.0..=8.0).contains(&x) => Some(Some(x)),
                        Node::Int(_) | Node::Float(_) => {
                            self.report(
                                Code::BadThreshold,
                                "`entropy_threshold` must lie between 0 and 8",
                                self.span(n),
                                "out of range",
                                "Shannon entropy is measured in bits per byte (0 to 8); \
                                 3.0 to 4.5 suits most tokens",
                            );
                            None
                        }
                        _ => {
                            self.wrong_type(n, "`entropy_threshold`", "a number");
                            None
                        }
                    },
                    None => Some(None),
                };
                let (Some(name), Some(regex), Some(entropy_threshold)) = (name, regex, entropy)
                else {
                    continue;
                };
                // A built-in's name is allowed: the pattern replaces that detector
                // (ARCHITECTURE decision 7; configurations written for the original
                // mcpwall name theirs `github-token`, `private-key`). Whether a file may
                // replace one is a question of trust, settled in `merge.rs`.
                if let Some(first) = seen.get(&name.value) {
                    self.diags.push(
                        PolicyDiagnostic::at(
                            Code::UnknownDetector,
                            format!("two secret patterns are named `{}`", name.value),
                            self.source,
                            name.span,
                            "second pattern with this name",
                        )
                        .with_label(*first, "first defined here")
                        .with_help("rename one of them"),
                    );
                    continue;
                }
                seen.insert(name.value.clone(), name.span);
                raw.secret_patterns.push(SecretPattern {
                    name,
                    regex,
                    entropy_threshold,
                });
            }
        }
        if let Some(n) = f.get("disable") {
            for name in self.strings(n, "`secrets.disable`") {
                if builtin_refs.contains(&name.value.as_str()) {
                    raw.disabled_secrets.push(name);
                    continue;
                }
                let label = match did_you_mean(&name.value, &builtin_refs) {
                    Some(near) => format!("did you mean `{near}`?"),
                    None => "no such detector".to_string(),
                };
                self.report(
                    Code::UnknownDetector,
                    format!("there is no built-in detector named `{}`", name.value),
                    name.span,
                    label,
                    "use the exact name of a built-in detector; `mcpwall explain-policy` lists them",
                );
            }
        }
    }

    // ---------------------------------------------------------------- leaves

    /// A regex, checked to parse and to stay under [`REGEX_SIZE_LIMIT`].
    /// `all_matches`: the regex is searched for every match in a text (redaction spans,
    /// secret patterns), so its cost per byte is probed too ([`crate::regex_cost`]).
    fn regex(&mut self, node: &YNode, what: &str, all_matches: bool) -> Option<Spanned<String>> {
        let s = self.string(node, &format!("a regex {what}"))?;
        // The embedded packs' regexes are parsed and built by the test suite (and built on
        // first use by the proxy); checking them again at every start cost more than the
        // rest of loading.
        if self.source.kind == SourceKind::Builtin {
            return Some(s);
        }
        let hir = match crate::regex_dialect::parse(&s.value) {
            Ok(hir) => hir,
            Err(e) => {
                let span = match e.span {
                    Some(sp) => self.inner_span(&s, sp.start, sp.end),
                    None => s.span,
                };
                self.report(
                    Code::BadRegex,
                    format!("invalid regex {what}: {}", e.message),
                    span,
                    e.message,
                    "fix the regex (Rust `regex` syntax); in YAML prefer single quotes so \
                     backslashes stay as written",
                );
                return None;
            }
        };
        // One Thompson NFA compile checks the size limit, so an oversized user regex is
        // reported with the other problems of the file, not after them.
        let untrusted = self.source.kind == SourceKind::ProjectUntrusted;
        let limit = if untrusted {
            UNTRUSTED_REGEX_SIZE_LIMIT
        } else {
            REGEX_SIZE_LIMIT
        };
        let nfa = regex_automata::nfa::thompson::Compiler::new()
            .configure(
                regex_automata::nfa::thompson::Config::new()
                    .nfa_size_limit(Some(limit))
                    .shrink(false),
            )
            .build_from_hir(&hir);
        let nfa_error = match nfa {
            Ok(nfa) if all_matches => {
                let budget = if untrusted {
                    crate::regex_cost::UNTRUSTED
                } else {
                    crate::regex_cost::TRUSTED
                };
                if let Err(cost) = crate::regex_cost::probe(&nfa, budget) {
                    self.report(
                        Code::CostlyRegex,
                        format!(
                            "regex {what} is too costly to search for every match: on text \
                             repeating {:?}, each match makes the search re-read the text \
                             after it (more than {} steps per byte)",
                            cost.unit, budget.steps_per_byte
                        ),
                        s.span,
                        "re-reads the text",
                        "bound the repetition that can run ahead of a match (`\\w{1,64}` \
                         instead of `\\w+`), or anchor the costly branch with a literal \
                         that starts it",
                    );
                    return None;
                }
                return Some(s);
            }
            Ok(_) => return Some(s),
            Err(e) => e,
        };
        let (message, help) = match nfa_error.size_limit() {
            Some(limit) if untrusted => (
                format!(
                    "regex {what} is too large for an untrusted project file: its compiled \
                     form exceeds {} KiB",
                    limit >> 10
                ),
                "simplify the regex, or review the file and run `mcpwall trust` (a trusted \
                 file's regexes may be larger)"
                    .to_string(),
            ),
            Some(limit) => (
                format!(
                    "regex {what} is too large: its compiled form exceeds {} MiB",
                    limit >> 20
                ),
                "simplify the regex: large counted repetitions such as `{1000}` and big \
                 Unicode classes (`\\p{L}`, `.` repeated many times) multiply its size"
                    .to_string(),
            ),
            None => (
                format!("regex {what} cannot be compiled: {nfa_error}"),
                "simplify the regex".to_string(),
            ),
        };
        self.report(Code::BadRegex, message, s.span, "too large", help);
        None
    }

    /// A glob (globset syntax), checked to compile.
    fn glob(&mut self, node: &YNode, what: &str) -> Option<Spanned<String>> {
        let s = self.string(node, &format!("a glob {what}"))?;
        if let Err(e) = globset::Glob::new(&s.value) {
            let msg = e.kind().to_string();
            self.report(
                Code::BadGlob,
                format!("invalid glob {what}: {msg}"),
                s.span,
                msg,
                "globs use `*`, `**`, `?`, `[abc]` and `{a,b}`; escape a literal with `[*]`",
            );
            return None;
        }
        Some(s)
    }

    /// Expand `~`, `${HOME}` and `${PROJECT_DIR}`; relative results are taken from the
    /// project directory, the way a server started there would resolve them.
    fn expand(&mut self, s: &Spanned<String>) -> Option<PathBuf> {
        let path = PathBuf::from(self.expand_text(s)?);
        Some(if path.is_relative() {
            self.vars.cwd.join(path)
        } else {
            path
        })
    }

    /// Expand `~`, `${HOME}` and `${PROJECT_DIR}` in text.
    fn expand_text(&mut self, s: &Spanned<String>) -> Option<String> {
        match expand_vars(&s.value, &self.vars.home, &self.vars.project_dir) {
            Ok(text) => Some(text),
            Err(var) => {
                let span = self
                    .find_in(s, &format!("${{{var}}}"))
                    .or_else(|| self.find_in(s, &format!("${var}")))
                    .unwrap_or(s.span);
                self.report(
                    Code::UnknownVariable,
                    format!("unknown variable `{var}`"),
                    span,
                    "unknown variable",
                    "only `${HOME}`, `${PROJECT_DIR}` and a leading `~` are expanded; \
                     write the path out, or use one of those",
                );
                None
            }
        }
    }

    /// The span of `needle` inside a scalar's written text, if it is written verbatim there.
    fn find_in(&self, s: &Spanned<String>, needle: &str) -> Option<Span> {
        let text = self
            .source
            .text
            .get(s.span.offset..s.span.offset + s.span.len)?;
        let at = text.find(needle)?;
        Some(self.sub_span(s.span, at, needle.len()))
    }

    /// Map a byte range of a scalar's value to the YAML text when the value is written
    /// verbatim (plain, or quoted without escapes); otherwise the whole scalar.
    fn inner_span(&self, s: &Spanned<String>, start: usize, end: usize) -> Span {
        let Some(written) = self
            .source
            .text
            .get(s.span.offset..s.span.offset + s.span.len)
        else {
            return s.span;
        };
        let quote = match written.as_bytes().first() {
            Some(b'\'') | Some(b'"') => 1,
            _ => 0,
        };
        let body = &written[quote..written.len().saturating_sub(quote).max(quote)];
        if body != s.value {
            return s.span;
        }
        self.sub_span(s.span, quote + start, end.saturating_sub(start).max(1))
    }

    fn sub_span(&self, outer: Span, at: usize, len: usize) -> Span {
        self.lines
            .span(&self.source.text, outer.source, outer.offset + at, len)
    }
}

/// A YAML value as JSON (rule examples).
pub(crate) fn to_json(node: &Node) -> serde_json::Value {
    use serde_json::Value;
    match node {
        Node::Null => Value::Null,
        Node::Bool(b) => Value::Bool(*b),
        Node::Int(i) => i64::try_from(*i)
            .map(Value::from)
            .or_else(|_| u64::try_from(*i).map(Value::from))
            .unwrap_or_else(|_| Value::String(i.to_string())),
        Node::Float(f) => serde_json::Number::from_f64(*f)
            .map(Value::Number)
            .unwrap_or(Value::Null),
        Node::Str(s) => Value::String(s.clone()),
        Node::Seq(items) => Value::Array(items.iter().map(|i| to_json(&i.value)).collect()),
        Node::Map(entries) => Value::Object(
            entries
                .iter()
                .map(|(k, v)| (k.value.key_text().unwrap_or_default(), to_json(&v.value)))
                .collect(),
        ),
    }
}

/// `tcp://HOST:PORT` or `tls://HOST:PORT` (`[v6]` hosts; the port defaults to 514 over TCP
/// and 6514 over TLS): `(tls, host, port)`, or why not.
/// An OTLP/HTTP logs endpoint: the URL to POST to (`/v1/logs` added when it has no
/// path, as OTLP exporters do with a base URL), whether it is https, whether its host is
/// loopback.
fn otlp_endpoint(text: &str) -> Result<(String, bool, bool), &'static str> {
    let uri: hyper::Uri = text.parse().map_err(|_| "not a URL")?;
    let https = match uri.scheme_str() {
        Some("https") => true,
        Some("http") => false,
        _ => return Err("the scheme is not `https://` or `http://`"),
    };
    let authority = uri.authority().ok_or("the host is missing")?;
    if authority.as_str().contains('@') {
        return Err(
            "user:password in the URL would sit in the process list and the logs; use `header_file`",
        );
    }
    if text.contains('#') {
        return Err("a fragment (`#…`) is never sent");
    }
    let host = authority
        .host()
        .trim_start_matches('[')
        .trim_end_matches(']');
    if host.is_empty() {
        return Err("the host is missing");
    }
    let loopback = host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    let endpoint = match uri.path() {
        "" | "/" if uri.query().is_none() => format!(
            "{}://{}/v1/logs",
            uri.scheme_str().unwrap_or("https"),
            authority.as_str()
        ),
        _ => text.to_string(),
    };
    Ok((endpoint, https, loopback))
}

/// A header of `log_shipping.otlp.headers`: a valid name and value, not one the transport
/// sets, and not a credential (those go in `header_file`, out of the shared policy file).
fn otlp_header(name: &str, value: &str) -> Result<(), (String, String)> {
    let Ok(header) = hyper::header::HeaderName::from_bytes(name.as_bytes()) else {
        return Err((
            format!("`{name}` is not an HTTP header name"),
            "use letters, digits and `-`, e.g. `X-Scope-OrgID`".to_string(),
        ));
    };
    if hyper::header::HeaderValue::from_str(value).is_err() {
        return Err((
            format!("the value of `{name}` holds control characters"),
            "write the value on one line, in visible characters".to_string(),
        ));
    }
    let reserved = [
        "host",
        "content-type",
        "content-length",
        "content-encoding",
        "transfer-encoding",
        "connection",
        "accept",
    ];
    if reserved.contains(&header.as_str()) {
        return Err((
            format!("`{name}` is set by mcpwall itself"),
            "remove it: the transport sets it for OTLP/HTTP with JSON".to_string(),
        ));
    }
    let credential = ["authorization", "proxy-authorization", "cookie"].contains(&header.as_str())
        || ["key", "token", "secret", "password"]
            .iter()
            .any(|word| header.as_str().contains(word));
    if credential {
        return Err((
            format!("`{name}` looks like a credential written into the policy"),
            "policy files are shared and printed by `explain-policy`: put `Name: value` lines in a file \
             and name it with `header_file: ~/.config/mcpwall/otlp.headers`"
                .to_string(),
        ));
    }
    Ok(())
}

fn parse_sink_address(text: &str) -> Result<(bool, String, u16), &'static str> {
    let (tls, rest) = if let Some(rest) = text.strip_prefix("tls://") {
        (true, rest)
    } else if let Some(rest) = text.strip_prefix("tcp://") {
        (false, rest)
    } else {
        return Err("the scheme is not `tcp://` or `tls://`");
    };
    if rest.contains(['/', '@', '?', '#']) || rest.chars().any(char::is_whitespace) {
        return Err("only a host and a port may follow the scheme");
    }
    let default_port = if tls { 6514 } else { 514 };
    let (host, port) = if let Some(v6) = rest.strip_prefix('[') {
        let (host, after) = v6.split_once(']').ok_or("a `[` without its `]`")?;
        match after {
            "" => (host, None),
            _ => (host, Some(after.strip_prefix(':').ok_or("junk after `]`")?)),
        }
    } else {
        match rest.rsplit_once(':') {
            Some((host, _)) if host.contains(':') => {
                return Err("an IPv6 host is written in brackets: `[::1]:6514`");
            }
            Some((host, port)) => (host, Some(port)),
            None => (rest, None),
        }
    };
    if host.is_empty() {
        return Err("the host is missing");
    }
    let port = match port {
        None => default_port,
        Some(p) => match p.parse::<u16>() {
            Ok(0) | Err(_) => return Err("the port is not a number from 1 to 65535"),
            Ok(p) => p,
        },
    };
    Ok((tls, host.to_string(), port))
}
