//! A small YAML shape for test policies, turned into a validated `Policy` the way the
//! config loader would (variables expanded, defaults applied). Spans point at the
//! first occurrence of each value in the text, which is enough for error tests.

use std::collections::BTreeMap;
use std::sync::Arc;

use mcpwall::config::policy::{
    Action, ArgCondition, ArgSelector, Examples, Matcher, OutboundAction, OutboundRule, Policy, Rule,
    SecretPattern, Settings, Source, SourceId, SourceKind, Span, Spanned,
};
use serde::Deserialize;

use super::TestEnv;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TPolicy {
    #[serde(default)]
    settings: TSettings,
    #[serde(default)]
    secrets: TSecrets,
    #[serde(default)]
    rules: Vec<TRule>,
    #[serde(default)]
    outbound_rules: Vec<TOutRule>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct TSettings {
    default_action: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct TSecrets {
    #[serde(default)]
    disable: Vec<String>,
    #[serde(default)]
    patterns: Vec<TPattern>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TPattern {
    name: String,
    regex: String,
    entropy_threshold: Option<f64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TRule {
    name: String,
    method: Option<String>,
    tool: Option<String>,
    #[serde(default)]
    arguments: BTreeMap<String, TMatcher>,
    action: String,
    message: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct TMatcher {
    regex: Option<String>,
    pattern: Option<String>,
    not_under: Option<String>,
    secrets: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TOutRule {
    name: String,
    method: Option<String>,
    tool: Option<String>,
    server: Option<String>,
    #[serde(default)]
    secrets: bool,
    #[serde(default)]
    response_contains: Vec<String>,
    #[serde(default)]
    response_contains_regex: Vec<String>,
    response_size_exceeds: Option<u64>,
    action: String,
    message: Option<String>,
}

struct Spans<'t> {
    text: &'t str,
}

impl Spans<'_> {
    fn at(&self, value: &str) -> Span {
        let offset = self.text.find(value).unwrap_or(0);
        let before = &self.text[..offset];
        let line = before.matches('\n').count() as u32 + 1;
        let column = (offset - before.rfind('\n').map_or(0, |i| i + 1)) as u32 + 1;
        Span {
            source: SourceId(0),
            offset,
            len: if offset == 0 && !self.text.starts_with(value) { 0 } else { value.len() },
            line,
            column,
        }
    }

    fn spanned(&self, value: &str) -> Spanned<String> {
        Spanned {
            value: value.to_string(),
            span: self.at(value),
        }
    }
}

/// Load a test policy; `{home}`, `{project}`, `${HOME}` and `${PROJECT_DIR}` are
/// replaced by the test's directories.
pub fn load(yaml: &str, env: &TestEnv) -> Policy {
    let text = env
        .fill(yaml)
        .replace("${HOME}", &env.home.to_string_lossy())
        .replace("${PROJECT_DIR}", &env.project.to_string_lossy());
    let t: TPolicy = serde_saphyr::from_str(&text)
        .unwrap_or_else(|e| panic!("test policy does not parse: {e}\n{text}"));
    let s = Spans { text: &text };
    let mut settings = Settings::default();
    if let Some(a) = &t.settings.default_action {
        settings.default_action = action(a);
    }
    let rules = t
        .rules
        .iter()
        .map(|r| {
            let mut arguments = Vec::new();
            for (name, m) in &r.arguments {
                let selector = if name == "_any_value" {
                    ArgSelector::AnyValue
                } else {
                    ArgSelector::Named(name.clone())
                };
                let mut push = |matcher: Matcher| {
                    arguments.push(ArgCondition {
                        selector: selector.clone(),
                        matcher,
                        span: s.at(name),
                    })
                };
                if let Some(re) = &m.regex {
                    push(Matcher::Regex(s.spanned(re)));
                }
                if let Some(g) = &m.pattern {
                    push(Matcher::Pattern(s.spanned(g)));
                }
                if let Some(root) = &m.not_under {
                    push(Matcher::NotUnder {
                        root: root.into(),
                        written: s.spanned(root),
                    });
                }
                if m.secrets == Some(true) {
                    push(Matcher::Secrets);
                }
            }
            Rule {
                name: s.spanned(&r.name),
                description: None,
                why: None,
                method: r
                    .method
                    .as_deref()
                    .map_or_else(|| Spanned { value: "tools/call".into(), span: s.at(&r.name) }, |m| s.spanned(m)),
                tool: r.tool.as_deref().map(|t| s.spanned(t)),
                arguments,
                action: action(&r.action),
                message: r.message.clone(),
                examples: Examples::default(),
                span: s.at(&r.name),
            }
        })
        .collect();
    let outbound_rules = t
        .outbound_rules
        .iter()
        .map(|r| OutboundRule {
            name: s.spanned(&r.name),
            description: None,
            why: None,
            method: r.method.as_deref().map(|m| s.spanned(m)),
            tool: r.tool.as_deref().map(|m| s.spanned(m)),
            server: r.server.as_deref().map(|m| s.spanned(m)),
            secrets: r.secrets,
            response_contains: r.response_contains.iter().map(|x| s.spanned(x)).collect(),
            response_contains_regex: r.response_contains_regex.iter().map(|x| s.spanned(x)).collect(),
            response_size_exceeds: r.response_size_exceeds,
            action: match r.action.as_str() {
                "allow" => OutboundAction::Allow,
                "deny" => OutboundAction::Deny,
                "redact" => OutboundAction::Redact,
                "log_only" => OutboundAction::LogOnly,
                other => panic!("unknown outbound action {other}"),
            },
            message: r.message.clone(),
            examples: Examples::default(),
            span: s.at(&r.name),
        })
        .collect();
    Policy {
        sources: vec![Source {
            name: "test.yml".into(),
            kind: SourceKind::Explicit,
            text: Arc::from(text.as_str()),
        }],
        settings,
        rules,
        outbound_rules,
        secret_patterns: t
            .secrets
            .patterns
            .iter()
            .map(|p| SecretPattern {
                name: s.spanned(&p.name),
                regex: s.spanned(&p.regex),
                entropy_threshold: p.entropy_threshold,
            })
            .collect(),
        disabled_secrets: t.secrets.disable.iter().map(|d| s.spanned(d)).collect(),
        ignored: Vec::new(),
    }
}

fn action(a: &str) -> Action {
    match a {
        "allow" => Action::Allow,
        "deny" => Action::Deny,
        other => panic!("unknown action {other}"),
    }
}
