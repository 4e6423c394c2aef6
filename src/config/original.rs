//! What the original mcpwall (Node) can load: the policy files it reads
//! (`~/.mcpwall/config.yml`, a project's `.mcpwall.yml`, a `-c` file) are shared with
//! servers it still wraps, so `status` and `doctor` check them the way it does.
//!
//! The facts, from its README and its schema: a file must be a mapping with a numeric
//! `version`, a `settings` mapping holding `log_dir` (a string), `log_level`
//! (`debug|info|warn|error`) and `default_action` (`allow|deny|ask`), and a `rules`
//! list; each rule has a string `name`, a `match` mapping (optional string `method` and
//! `tool`, and `arguments` mapping names to `pattern`/`regex`/`not_under` strings and a
//! `secrets` boolean) and an `action` of `allow|deny|ask`, with an optional string
//! `message`. `outbound_rules` (each with a `name`, a non-empty `match` of `tool`,
//! `server`, `secrets`, `response_contains`, `response_contains_regex`,
//! `response_size_exceeds`, and an `action` of `allow|deny|redact|log_only`) and
//! `secrets.patterns` (each a `name` and a `regex`) are optional. A missing optional key
//! is fine, a null one is not. Keys it does not know are dropped without a word: a file
//! of this mcpwall's (`extends:`, `disable:`, new matchers) can load there and mean
//! something else, which [`ignored_keys`] names.

use super::yaml_tree::{Node, YNode};

/// Why the original would refuse to start with this file, in its terms (`settings:
/// expected a mapping, found nothing`), or `None` when it loads it.
pub fn rejects(text: &str) -> Option<String> {
    let root = match parse(text) {
        Ok(root) => root,
        Err(e) => return Some(format!("not YAML it can read: {e}")),
    };
    let mut why = Vec::new();
    check_root(&root.value, &mut why);
    why.into_iter().next()
}

/// Top-level and `settings` keys this mcpwall reads that the original drops silently
/// (so a server it wraps runs without them: without `extends:`, without the built-in
/// packs).
pub fn ignored_keys(text: &str) -> Vec<String> {
    let Ok(root) = parse(text) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    if let Node::Map(entries) = &root.value {
        for (k, v) in entries {
            let Some(key) = k.value.key_text() else {
                continue;
            };
            if !TOP.contains(&key.as_str()) {
                out.push(key.clone());
            }
            if key == "settings"
                && let Node::Map(settings) = &v.value
            {
                for (sk, _) in settings {
                    if let Some(sk) = sk.value.key_text()
                        && !SETTINGS.iter().any(|(name, _)| *name == sk)
                    {
                        out.push(format!("settings.{sk}"));
                    }
                }
            }
        }
    }
    out
}

const TOP: &[&str] = &["version", "settings", "rules", "outbound_rules", "secrets"];

/// The original's settings: name, and the values it accepts (`None`: any string).
const SETTINGS: &[(&str, Option<&[&str]>)] = &[
    ("log_dir", None),
    ("log_level", Some(&["debug", "info", "warn", "error"])),
    ("default_action", Some(&["allow", "deny", "ask"])),
    ("log_args", Some(&["full", "none"])),
    (
        "outbound_default_action",
        Some(&["allow", "deny", "redact", "log_only"]),
    ),
    ("log_redacted", Some(&["none", "hash", "full"])),
];
/// Of those, the ones it requires.
const REQUIRED_SETTINGS: &[&str] = &["log_dir", "log_level", "default_action"];

fn parse(text: &str) -> Result<YNode, String> {
    let text = text.to_string();
    std::thread::Builder::new()
        .name("mcpwall-yaml".into())
        .stack_size(super::model::PARSE_STACK)
        .spawn(move || super::yaml_tree::parse(&text).map_err(|e| e.to_string()))
        .map_err(|e| e.to_string())?
        .join()
        .unwrap_or_else(|_| Err("the file is too deeply nested".into()))
}

fn get<'a>(map: &'a [(YNode, YNode)], key: &str) -> Option<&'a Node> {
    map.iter()
        .find(|(k, _)| k.value.key_text().as_deref() == Some(key))
        .map(|(_, v)| &v.value)
}

fn found(node: &Node) -> &'static str {
    node.kind()
}

/// `at`: a required key of kind `want`.
fn require<'a>(
    map: &'a [(YNode, YNode)],
    at: &str,
    key: &str,
    want: &str,
    why: &mut Vec<String>,
) -> Option<&'a Node> {
    match get(map, key) {
        None => {
            why.push(format!("{at}{key}: expected {want}, found nothing"));
            None
        }
        Some(v) => Some(v),
    }
}

fn string(node: Option<&Node>, at: &str, why: &mut Vec<String>) {
    if let Some(n) = node
        && !matches!(n, Node::Str(_))
    {
        why.push(format!("{at}: expected a string, found {}", found(n)));
    }
}

fn one_of(node: Option<&Node>, at: &str, allowed: &[&str], why: &mut Vec<String>) {
    match node {
        Some(Node::Str(s)) if allowed.contains(&s.as_str()) => {}
        Some(n) => why.push(format!(
            "{at}: expected one of {}, found {}",
            allowed.join("|"),
            match n {
                Node::Str(s) => format!("`{s}`"),
                other => found(other).to_string(),
            }
        )),
        None => {}
    }
}

fn check_root(root: &Node, why: &mut Vec<String>) {
    let Node::Map(top) = root else {
        why.push(format!("expected a mapping, found {}", found(root)));
        return;
    };
    match require(top, "", "version", "a number", why) {
        Some(Node::Int(_) | Node::Float(_)) | None => {}
        Some(n) => why.push(format!("version: expected a number, found {}", found(n))),
    }
    match require(top, "", "settings", "a mapping", why) {
        Some(Node::Map(settings)) => {
            for key in REQUIRED_SETTINGS {
                require(settings, "settings.", key, "a string", why);
            }
            for (name, allowed) in SETTINGS {
                let at = format!("settings.{name}");
                match allowed {
                    None => string(get(settings, name), &at, why),
                    Some(values) => one_of(get(settings, name), &at, values, why),
                }
            }
        }
        Some(n) => why.push(format!("settings: expected a mapping, found {}", found(n))),
        None => {}
    }
    match require(top, "", "rules", "a list", why) {
        Some(Node::Seq(rules)) => {
            for (i, rule) in rules.iter().enumerate() {
                check_rule(&rule.value, &format!("rules[{i}]"), false, why);
            }
        }
        Some(n) => why.push(format!("rules: expected a list, found {}", found(n))),
        None => {}
    }
    match get(top, "outbound_rules") {
        Some(Node::Seq(rules)) => {
            for (i, rule) in rules.iter().enumerate() {
                check_rule(&rule.value, &format!("outbound_rules[{i}]"), true, why);
            }
        }
        Some(n) => why.push(format!(
            "outbound_rules: expected a list, found {}",
            found(n)
        )),
        None => {}
    }
    match get(top, "secrets") {
        Some(Node::Map(secrets)) => match get(secrets, "patterns") {
            Some(Node::Seq(patterns)) => {
                for (i, p) in patterns.iter().enumerate() {
                    let at = format!("secrets.patterns[{i}]");
                    let Node::Map(p) = &p.value else {
                        why.push(format!(
                            "{at}: expected a mapping, found {}",
                            found(&p.value)
                        ));
                        continue;
                    };
                    string(
                        require(p, &format!("{at}."), "name", "a string", why),
                        &format!("{at}.name"),
                        why,
                    );
                    string(
                        require(p, &format!("{at}."), "regex", "a string", why),
                        &format!("{at}.regex"),
                        why,
                    );
                }
            }
            Some(n) => why.push(format!(
                "secrets.patterns: expected a list, found {}",
                found(n)
            )),
            None => why.push("secrets.patterns: expected a list, found nothing".into()),
        },
        Some(n) => why.push(format!("secrets: expected a mapping, found {}", found(n))),
        None => {}
    }
}

fn check_rule(rule: &Node, at: &str, outbound: bool, why: &mut Vec<String>) {
    let Node::Map(rule) = rule else {
        why.push(format!("{at}: expected a mapping, found {}", found(rule)));
        return;
    };
    let dot = format!("{at}.");
    string(
        require(rule, &dot, "name", "a string", why),
        &format!("{at}.name"),
        why,
    );
    string(get(rule, "message"), &format!("{at}.message"), why);
    let actions: &[&str] = if outbound {
        &["allow", "deny", "redact", "log_only"]
    } else {
        &["allow", "deny", "ask"]
    };
    let action = require(rule, &dot, "action", "an action", why);
    one_of(action, &format!("{at}.action"), actions, why);
    let matcher = match require(rule, &dot, "match", "a mapping", why) {
        Some(Node::Map(m)) => m,
        Some(n) => {
            why.push(format!(
                "{at}.match: expected a mapping, found {}",
                found(n)
            ));
            return;
        }
        None => return,
    };
    if outbound {
        const KNOWN: &[&str] = &[
            "tool",
            "server",
            "secrets",
            "response_contains",
            "response_contains_regex",
            "response_size_exceeds",
        ];
        if !matcher
            .iter()
            .any(|(k, _)| KNOWN.contains(&k.value.key_text().unwrap_or_default().as_str()))
        {
            why.push(format!(
                "{at}.match: an outbound rule must have at least one match field it knows ({})",
                KNOWN.join(", ")
            ));
        }
        string(get(matcher, "tool"), &format!("{at}.match.tool"), why);
        string(get(matcher, "server"), &format!("{at}.match.server"), why);
        return;
    }
    string(get(matcher, "method"), &format!("{at}.match.method"), why);
    string(get(matcher, "tool"), &format!("{at}.match.tool"), why);
    match get(matcher, "arguments") {
        Some(Node::Map(arguments)) => {
            for (name, m) in arguments {
                let at = format!(
                    "{at}.match.arguments.{}",
                    name.value.key_text().unwrap_or_default()
                );
                let Node::Map(m) = &m.value else {
                    why.push(format!(
                        "{at}: expected a mapping, found {}",
                        found(&m.value)
                    ));
                    continue;
                };
                for key in ["pattern", "regex", "not_under"] {
                    string(get(m, key), &format!("{at}.{key}"), why);
                }
                if let Some(n) = get(m, "secrets")
                    && !matches!(n, Node::Bool(_))
                {
                    why.push(format!(
                        "{at}.secrets: expected a boolean, found {}",
                        found(n)
                    ));
                }
            }
        }
        Some(n) => why.push(format!(
            "{at}.match.arguments: expected a mapping, found {}",
            found(n)
        )),
        None => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Its README's example configuration loads there.
    const README_EXAMPLE: &str = "version: 1\nsettings:\n  log_dir: ~/.mcpwall/logs\n  log_level: info\n  default_action: allow\nrules:\n  - name: block-ssh-keys\n    match:\n      method: tools/call\n      tool: \"*\"\n      arguments:\n        _any_value:\n          regex: \"(\\\\.ssh/|id_rsa)\"\n    action: deny\n    message: \"Blocked: access to SSH keys\"\noutbound_rules:\n  - name: flag-large\n    match:\n      response_size_exceeds: 102400\n    action: log_only\nsecrets:\n  patterns:\n    - name: aws-access-key\n      regex: \"AKIA[0-9A-Z]{16}\"\n";

    #[test]
    fn the_original_loads_its_own_documented_example() {
        assert_eq!(rejects(README_EXAMPLE), None);
        assert!(ignored_keys(README_EXAMPLE).is_empty());
    }

    /// What `mcpwall init` used to write: the original refuses to start with it.
    #[test]
    fn a_file_of_this_mcpwall_alone_is_refused_there() {
        let ours = "version: 1\nextends: [profiles/local-dev, default]\n";
        let why = rejects(ours).expect("the original cannot load it");
        assert!(why.starts_with("settings: expected a mapping"), "{why}");
        assert_eq!(ignored_keys(ours), ["extends"]);
        let ask = README_EXAMPLE.replace("action: log_only", "action: ask");
        assert!(rejects(&ask).unwrap().contains("outbound_rules[0].action"));
        let null = README_EXAMPLE.replace("message: \"Blocked: access to SSH keys\"", "message: ~");
        assert!(rejects(&null).unwrap().contains("rules[0].message"));
        assert!(rejects("version: 1\nsettings: {log_dir: x, log_level: loud, default_action: allow}\nrules: []\n").unwrap().contains("settings.log_level"));
    }
}
