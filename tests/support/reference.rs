//! The reference interpreter: deliberately naive. It loops over the rules in order,
//! builds one `regex::Regex` or `globset::Glob` per matcher per call, walks a
//! `serde_json::Value` instead of the frame's tokens, and normalises paths with
//! `path-clean` and `std::fs::canonicalize`. It shares nothing with the compiled
//! engine but the secret detectors (which have their own tests), so any disagreement
//! with `Program` is a compiler bug.

use std::path::{Path, PathBuf};

use mcpwall::config::policy::{Action, ArgSelector, Matcher, Policy, RuleAction};
use mcpwall::secrets::{Detector, DetectorSpec, Finding, builtin_specs};
use mcpwall::text::normalize::{normalize, normalize_keeping_case};
use serde_json::Value;

use super::{Call, TestEnv};

pub struct Reference<'p> {
    policy: &'p Policy,
    home: String,
    project: String,
    detector: Detector,
}

enum Scalar<'v> {
    Key(&'v str),
    Str(&'v str),
    /// A number or boolean, as JSON text.
    Other(String),
    Null,
}

impl Scalar<'_> {
    fn text(&self) -> Option<String> {
        match self {
            Scalar::Key(s) | Scalar::Str(s) => Some(s.to_string()),
            Scalar::Other(s) => Some(s.clone()),
            Scalar::Null => Some("null".to_string()),
        }
    }

    fn is_text(&self) -> bool {
        matches!(self, Scalar::Key(_) | Scalar::Str(_))
    }
}

fn collect<'v>(v: &'v Value, keys: bool, out: &mut Vec<Scalar<'v>>) {
    match v {
        Value::Object(map) => {
            for (k, v) in map {
                if keys {
                    out.push(Scalar::Key(k));
                }
                collect(v, keys, out);
            }
        }
        Value::Array(items) => items.iter().for_each(|v| collect(v, keys, out)),
        Value::String(s) => out.push(Scalar::Str(s)),
        Value::Number(n) => out.push(Scalar::Other(n.to_string())),
        Value::Bool(b) => out.push(Scalar::Other(b.to_string())),
        Value::Null => out.push(Scalar::Null),
    }
}

fn glob_matches(glob: &str, text: &str) -> bool {
    globset::Glob::new(glob)
        .expect("validated glob")
        .compile_matcher()
        .is_match(text)
}

pub fn is_path_shaped(s: &str) -> bool {
    let lower = s.to_ascii_lowercase();
    let b = s.as_bytes();
    // A drive letter starts a path on Windows only; elsewhere `C:` is a directory name.
    let drive = cfg!(windows)
        && b.len() >= 2
        && b[0].is_ascii_alphabetic()
        && b[1] == b':'
        && (b.len() == 2 || b[2] == b'/' || b[2] == b'\\');
    s.contains('/')
        || s.contains('\\')
        || s.starts_with('~')
        || s.starts_with('.')
        || lower.starts_with("file:")
        || drive
        || ["$HOME", "${HOME}"]
            .iter()
            .any(|v| s == *v || s.starts_with(&format!("{v}/")) || s.starts_with(&format!("{v}\\")))
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        if b[i] == b'%'
            && i + 2 < b.len()
            && let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2]))
        {
            out.push((h * 16 + l) as u8);
            i += 3;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

impl<'p> Reference<'p> {
    pub fn new(policy: &'p Policy, env: &TestEnv) -> Reference<'p> {
        let mut specs: Vec<DetectorSpec> = builtin_specs()
            .into_iter()
            .filter(|s| !policy.disabled_secrets.iter().any(|d| d.value == s.name))
            .filter(|s| {
                !policy
                    .secret_patterns
                    .iter()
                    .any(|p| p.name.value == s.name)
            })
            .collect();
        for p in &policy.secret_patterns {
            specs.push(DetectorSpec {
                name: p.name.value.clone(),
                regex: p.regex.value.clone(),
                entropy_threshold: p.entropy_threshold,
                origin: "test".into(),
                ..DetectorSpec::default()
            });
        }
        Reference {
            policy,
            home: env.env.home().to_string(),
            project: env.env.project_dir().to_string(),
            detector: Detector::new(specs).expect("detectors build"),
        }
    }

    pub fn normalize(&self, s: &str) -> String {
        let s = s.split('\0').next().unwrap_or("");
        let lower = s.to_ascii_lowercase();
        let mut p = if lower.starts_with("file:") {
            let mut rest = s[5..].to_string();
            if let Some(after) = rest.strip_prefix("//") {
                rest = if after.starts_with('/') {
                    after.to_string()
                } else if after.to_ascii_lowercase().starts_with("localhost/") {
                    after[9..].to_string()
                } else {
                    format!("//{after}")
                };
            }
            percent_decode(&rest)
        } else if s == "~" || s.starts_with("~/") || s.starts_with("~\\") {
            format!("{}/{}", self.home, &s[1..])
        } else if let Some(after) = s.strip_prefix('~')
            && let user = after.split(['/', '\\']).next().unwrap()
            && let bare = user.strip_suffix('$').unwrap_or(user)
            && bare
                .bytes()
                .next()
                .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
            && bare
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"_-.".contains(&b))
        {
            let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
            let home = passwd
                .lines()
                .map(|l| l.split(':').collect::<Vec<_>>())
                .find(|f| f.len() >= 7 && f[0] == user && f[5].starts_with('/'))
                .map(|f| f[5].to_string())
                .unwrap_or_else(|| {
                    let parent = Path::new(&self.home).parent().unwrap();
                    parent.join(user).to_string_lossy().into_owned()
                });
            format!("{home}/{}", &after[user.len()..])
        } else if let Some(rest) = ["${HOME}", "$HOME"].iter().find_map(|v| {
            s.strip_prefix(v)
                .filter(|r| r.is_empty() || r.starts_with('/') || r.starts_with('\\'))
        }) {
            format!("{}/{}", self.home, rest)
        } else {
            s.to_string()
        };
        p = p.replace('\\', "/");
        let b = p.as_bytes();
        let drive = cfg!(windows)
            && b.len() >= 2
            && b[0].is_ascii_alphabetic()
            && b[1] == b':'
            && (b.len() == 2 || b[2] == b'/');
        if drive {
            let cleaned = path_clean::clean(format!("/{}", &p[2..]));
            return format!("{}{}", &p[..2], cleaned.to_string_lossy());
        }
        if !p.starts_with('/') {
            p = format!("{}/{}", self.project, p);
        }
        // `..` after a symlink leaves the link's target, as the kernel walks it.
        let mut walked = PathBuf::from("/");
        for comp in p.split('/').filter(|c| !c.is_empty() && *c != ".") {
            if comp == ".." {
                if std::fs::symlink_metadata(&walked).is_ok_and(|m| m.file_type().is_symlink()) {
                    walked = Path::new(&Self::resolve(&walked.to_string_lossy())).to_path_buf();
                }
                walked.pop();
            } else {
                walked.push(comp);
            }
        }
        path_clean::clean(&walked).to_string_lossy().into_owned()
    }

    fn resolve(path: &str) -> String {
        if !path.starts_with('/') {
            return path.to_string();
        }
        let full = Path::new(path);
        for anc in full.ancestors() {
            if let Ok(real) = std::fs::canonicalize(anc) {
                let rest = full.strip_prefix(anc).unwrap();
                let joined: PathBuf = if rest.as_os_str().is_empty() {
                    real
                } else {
                    real.join(rest)
                };
                return joined.to_string_lossy().into_owned();
            }
        }
        path.to_string()
    }

    fn not_under(&self, value: &str, root: &Path) -> bool {
        let root = Self::resolve(&self.normalize(&root.to_string_lossy()));
        let value = Self::resolve(&self.normalize(value));
        !Path::new(&value).starts_with(Path::new(&root))
    }

    fn has_secret(&self, text: &str) -> bool {
        let mut cache = self.detector.cache();
        let mut out: Vec<Finding> = Vec::new();
        self.detector.find(text, &mut cache, &mut out);
        !out.is_empty()
    }

    fn matcher_holds(&self, matcher: &Matcher, named: bool, v: &Scalar<'_>) -> bool {
        let text = v.text().unwrap();
        let forms = || {
            let mut f = vec![text.clone()];
            if v.is_text() && is_path_shaped(&text) {
                f.push(self.normalize(&text));
            }
            f
        };
        match matcher {
            Matcher::Regex(re) => {
                let re = policy_regex(&re.value);
                forms().iter().any(|t| re.is_match(t))
            }
            Matcher::Pattern(g) => {
                let mut glob = g.value.clone();
                for (var, dir) in [
                    ("${PROJECT_DIR}", &self.project),
                    ("$PROJECT_DIR", &self.project),
                    ("${HOME}", &self.home),
                    ("$HOME", &self.home),
                    ("~", &self.home),
                ] {
                    if glob == var || glob.starts_with(&format!("{var}/")) {
                        glob = format!("{}{}", globset::escape(dir), &glob[var.len()..]);
                        break;
                    }
                }
                forms().iter().any(|t| glob_matches(&glob, t))
            }
            Matcher::NotUnder { root, .. } => match v {
                Scalar::Str(s) if named || is_path_shaped(s) => self.not_under(s, root),
                _ => false,
            },
            Matcher::Secrets => !matches!(v, Scalar::Null) && self.has_secret(&text),
            // A second shell parser would be a second product, not a naive reference: the
            // `command` rows of tests/rules.rs are judged against their expectations only.
            Matcher::Command(_) => panic!(
                "the reference interpreter does not model the `command` matcher; \
                 judge such rows with the compiled program alone"
            ),
        }
    }

    /// Inbound decisions, one per message, in the same notation as `engine_inbound`.
    pub fn evaluate_request(&self, line: &str) -> Vec<String> {
        let value: Value = serde_json::from_str(line).expect("test frame is JSON");
        let messages: Vec<&Value> = match &value {
            Value::Array(items) => items.iter().collect(),
            v => vec![v],
        };
        messages.into_iter().map(|m| self.decide(m)).collect()
    }

    fn decide(&self, msg: &Value) -> String {
        let method = msg.get("method").and_then(Value::as_str);
        let params = msg.get("params");
        let tool = if method == Some("tools/call") {
            params.and_then(|p| p.get("name")).and_then(Value::as_str)
        } else {
            None
        };
        let args = if method == Some("tools/call") {
            params.and_then(|p| p.get("arguments"))
        } else {
            params
        };
        let verdict = self.decide_by_rules(method, tool, args);
        let mut values = Vec::new();
        if let Some(a) = args {
            collect(a, true, &mut values);
        }
        let nul_path = values.iter().any(|v| {
            v.is_text()
                && v.text()
                    .is_some_and(|t| t.contains('\0') && is_path_shaped(&t))
        });
        if nul_path && !verdict.starts_with("deny:") && verdict != "default:deny" {
            return "nul_in_path".into();
        }
        verdict
    }

    fn decide_by_rules(
        &self,
        method: Option<&str>,
        tool: Option<&str>,
        args: Option<&Value>,
    ) -> String {
        for rule in &self.policy.rules {
            let Some(m) = method else { continue };
            if !glob_matches(&rule.method.value, m) {
                continue;
            }
            if let Some(t) = &rule.tool
                && !tool.is_some_and(|tool| glob_matches(&t.value, tool))
            {
                continue;
            }
            let all = rule.arguments.iter().all(|cond| {
                let mut values = Vec::new();
                let named = match &cond.selector {
                    ArgSelector::Named(name) => {
                        if let Some(v) = args.and_then(|a| a.as_object()).and_then(|o| o.get(name))
                        {
                            collect(v, false, &mut values);
                        }
                        true
                    }
                    ArgSelector::AnyValue => {
                        if let Some(a) = args {
                            collect(a, true, &mut values);
                        }
                        false
                    }
                };
                values
                    .iter()
                    .any(|v| self.matcher_holds(&cond.matcher, named, v))
            });
            if all {
                return match rule.action {
                    Action::Allow => format!("allow:{}", rule.name.value),
                    Action::Deny => format!("deny:{}", rule.name.value),
                    Action::Ask => format!("ask:{}", rule.name.value),
                };
            }
        }
        match method {
            Some("tools/call" | "resources/read" | "prompts/get" | "completion/complete") => {
                match self.policy.settings.default_action {
                    Action::Allow => "default:allow".into(),
                    Action::Deny => "default:deny".into(),
                    Action::Ask => "default:ask".into(),
                }
            }
            _ => "plumbing".into(),
        }
    }

    /// Outbound outcomes, one per message, in the notation of `engine_outbound`.
    pub fn scan_response(&self, line: &str, call: &Call) -> Vec<String> {
        let value: Value = serde_json::from_str(line).expect("test frame is JSON");
        match &value {
            Value::Array(items) => items
                .iter()
                .map(|m| self.outbound(m, serde_json::to_string(m).unwrap().len(), call))
                .collect(),
            v => vec![self.outbound(v, line.len(), call)],
        }
    }

    fn outbound(&self, msg: &Value, size: usize, call: &Call) -> String {
        let own_method = msg.get("method").and_then(Value::as_str);
        let method = call.method.or(own_method);
        let own_tool = if own_method == Some("tools/call") {
            msg.get("params")
                .and_then(|p| p.get("name"))
                .and_then(Value::as_str)
        } else {
            None
        };
        let tool = call.tool.or(own_tool);
        let mut scalars = Vec::new();
        collect(msg, true, &mut scalars);
        let texts: Vec<String> = scalars
            .iter()
            .filter(|s| s.is_text())
            .map(|s| s.text().unwrap())
            .collect();
        // Content items: strings under a `"text"` key, by their index in `texts`.
        let mut content = Vec::new();
        let mut at = 0;
        for (i, s) in scalars.iter().enumerate() {
            if !s.is_text() {
                continue;
            }
            if matches!(s, Scalar::Str(_)) && i > 0 && matches!(scalars[i - 1], Scalar::Key("text"))
            {
                content.push(at);
            }
            at += 1;
        }
        self.outbound_texts(&texts, &content, size, method, tool, call.server)
    }

    /// Outbound outcome for a non-JSON line.
    pub fn scan_text(&self, line: &str, call: &Call) -> String {
        self.outbound_texts(
            &[line.to_string()],
            &[],
            line.len(),
            call.method,
            call.tool,
            call.server,
        )
    }

    fn outbound_texts(
        &self,
        texts: &[String],
        content: &[usize],
        size: usize,
        method: Option<&str>,
        tool: Option<&str>,
        server: &str,
    ) -> String {
        let mut logged = Vec::new();
        let glob_ok =
            |g: &Option<mcpwall::config::policy::Spanned<String>>, v: Option<&str>| match g {
                None => true,
                Some(g) => v.is_some_and(|v| glob_matches(&g.value, v)),
            };
        let mut result = "pass".to_string();
        for rule in &self.policy.outbound_rules {
            // (text index, start, end) of everything the rule's content conditions found.
            let mut found: Vec<(usize, usize, usize)> = Vec::new();
            let holds = glob_ok(&rule.method, method)
                && glob_ok(&rule.tool, tool)
                && glob_ok(&rule.server, Some(server))
                && rule.response_size_exceeds.is_none_or(|n| size as u64 > n)
                && (!rule.secrets || {
                    let mut any = false;
                    for (ti, t) in texts.iter().enumerate() {
                        let mut cache = self.detector.cache();
                        let mut out = Vec::new();
                        self.detector.find(t, &mut cache, &mut out);
                        for f in &out {
                            found.push((ti, f.range.start, f.range.end));
                            any = true;
                        }
                    }
                    // A token cut across content items: their join without a space.
                    if content.len() >= 2 {
                        let mut joined = String::new();
                        let mut starts = Vec::new();
                        for &ti in content {
                            starts.push(joined.len());
                            joined.push_str(&texts[ti]);
                        }
                        let mut cache = self.detector.cache();
                        let mut out = Vec::new();
                        self.detector.find(&joined, &mut cache, &mut out);
                        for f in &out {
                            let parts: Vec<(usize, usize, usize)> = content
                                .iter()
                                .zip(&starts)
                                .filter_map(|(&ti, &start)| {
                                    let end = start + texts[ti].len();
                                    let (a, b) = (f.range.start.max(start), f.range.end.min(end));
                                    (a < b).then(|| (ti, a - start, b - start))
                                })
                                .collect();
                            if parts.len() > 1 {
                                found.extend(parts);
                                any = true;
                            }
                        }
                    }
                    any
                })
                && (rule.response_contains.is_empty() || {
                    let mut any = false;
                    for lit in &rule.response_contains {
                        let needle = lit.value.to_ascii_lowercase();
                        for (ti, t) in texts.iter().enumerate() {
                            let hay = t.to_ascii_lowercase();
                            // Every occurrence, overlapping ones included.
                            let mut from = 0;
                            let mut in_raw = false;
                            while let Some(i) = hay[from..].find(&needle) {
                                let at = from + i;
                                found.push((ti, at, at + needle.len()));
                                any = true;
                                in_raw = true;
                                from = at + hay[at..].chars().next().map_or(1, char::len_utf8);
                            }
                            // Found only once normalised: the whole text.
                            let norm_lit = normalize(&lit.value);
                            if !in_raw && !norm_lit.is_empty() && normalize(t).contains(&norm_lit) {
                                found.push((ti, 0, t.len()));
                                any = true;
                            }
                        }
                    }
                    any
                })
                && (rule.response_contains_regex.is_empty() || {
                    let mut any = false;
                    for re in &rule.response_contains_regex {
                        let re = policy_regex(&re.value);
                        for (ti, t) in texts.iter().enumerate() {
                            if re.is_match(t) {
                                any = true;
                            }
                            let before = found.len();
                            for m in re.find_iter(t) {
                                if !m.as_str().is_empty() {
                                    found.push((ti, m.start(), m.end()));
                                }
                            }
                            // Found only once normalised: the whole text.
                            if found.len() == before && re.is_match(&normalize_keeping_case(t)) {
                                any = true;
                                found.push((ti, 0, t.len()));
                            }
                        }
                    }
                    any
                });
            if !holds {
                continue;
            }
            match rule.action {
                RuleAction::LogOnly => logged.push(rule.name.value.clone()),
                RuleAction::Allow => break,
                RuleAction::Deny | RuleAction::Ask => {
                    result = format!("block:{}", rule.name.value);
                    break;
                }
                RuleAction::Redact => {
                    // Overlapping or touching finds in one text become one redaction.
                    found.sort();
                    let mut merged: Vec<(usize, usize, usize)> = Vec::new();
                    for (ti, a, b) in found {
                        match merged.last_mut() {
                            Some(last) if last.0 == ti && a <= last.2 => last.2 = last.2.max(b),
                            _ => merged.push((ti, a, b)),
                        }
                    }
                    let mut parts: Vec<String> = merged
                        .iter()
                        .map(|&(ti, a, b)| texts[ti][a..b].to_string())
                        .collect();
                    parts.sort();
                    result = format!("redact:{}[{}]", rule.name.value, parts.join("|"));
                    break;
                }
            }
        }
        if logged.is_empty() {
            result
        } else {
            format!("log:{} {result}", logged.join(","))
        }
    }
}

/// A regex in the policy dialect (ASCII Perl classes and word boundaries), through the
/// `regex` crate: the dialect's syntax tree printed back as a pattern.
fn policy_regex(pattern: &str) -> regex::Regex {
    let hir = mcpwall::regex_dialect::parse(pattern).expect("validated regex");
    regex::Regex::new(&hir.to_string()).expect("a printed HIR parses")
}
