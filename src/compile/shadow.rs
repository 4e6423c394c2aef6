//! Which of a user's allow rules would shadow a built-in deny rule: the packs' examples
//! (`examples.match`) are the test data (ARCHITECTURE decision 7).
//!
//! Layering puts the extended packs' deny rules before the user's own rules, so such an
//! allow no longer re-opens what the deny closes; the warning still tells the user that
//! their rule overlaps a built-in protection (and that lifting it takes `disable`).
//! `explain-policy`, `check` and the proxy's start-up print these findings.

use std::rc::Rc;

use crate::config::policy::{Action, Policy, RuleAction, Settings, SourceKind};
use crate::frame::{Frame, Limits, Parsed};
use crate::paths::PathEnv;
use crate::program::{CallInfo, Program};
use crate::verdict::{Decision, Outcome, RuleId};

/// A user allow rule that matches an example a built-in deny rule must deny.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shadow {
    /// The allow rule's name and `file:line:column`.
    pub allow: String,
    pub allow_at: String,
    /// The built-in deny rule's name.
    pub deny: String,
    /// The example (a JSON object `{method?, tool, arguments}`) the allow rule matches.
    pub example: String,
    /// The example is the allow rule's own (a call it was written for, which the deny
    /// rule decides first), not one of the deny rule's.
    pub unreachable: bool,
}

impl Shadow {
    /// One line for `explain-policy`, `check` and stderr.
    pub fn message(&self) -> String {
        if self.unreachable {
            return format!(
                "your allow rule {:?} ({}) can never decide the call it was written for ({}): the built-in rule {:?} denies it first, because extended packs' deny rules come before your rules; to let such calls through, add `exceptions: {{{}: [{{match: ..}}]}}` with your rule's `match` (only that rule is lifted, only for those calls), or lift the whole rule with `disable: [{}]`",
                self.allow, self.allow_at, self.example, self.deny, self.deny, self.deny
            );
        }
        format!(
            "your allow rule {:?} ({}) matches what the built-in rule {:?} exists to stop (its example {}); the built-in rule still applies, because extended packs' deny rules come first; to lift it on purpose for some calls, add `exceptions: {{{}: [{{match: ..}}]}}`, or for all, `disable: [{}]`",
            self.allow, self.allow_at, self.deny, self.example, self.deny, self.deny
        )
    }
}

/// Whether any rule could shadow: an allow rule outside the built-in packs, and a built-in
/// deny (outbound: deny or redact) rule. Cheap; callers that loaded the packs without
/// examples reload only then.
pub fn may_shadow(policy: &Policy) -> bool {
    let builtin =
        |span: crate::config::policy::Span| policy.source(span.source).kind == SourceKind::Builtin;
    let inbound = policy
        .rules
        .iter()
        .any(|r| r.action == Action::Allow && !builtin(r.span))
        && policy
            .rules
            .iter()
            .any(|r| r.action == Action::Deny && builtin(r.span));
    let outbound = policy
        .outbound_rules
        .iter()
        .any(|r| r.action == RuleAction::Allow && !builtin(r.span))
        && policy
            .outbound_rules
            .iter()
            .any(|r| matches!(r.action, RuleAction::Deny | RuleAction::Redact) && builtin(r.span));
    inbound || outbound
}

/// Every (user allow rule, built-in deny rule) pair where the allow rule matches one of the
/// deny rule's `match` examples, with the first such example. A policy loaded without the
/// packs' examples finds nothing.
pub fn shadowed_builtin_denies(policy: &Policy, env: &PathEnv) -> Vec<Shadow> {
    let mut out = Vec::new();
    if !may_shadow(policy) {
        return out;
    }
    let builtin = |i: usize| policy.source(policy.rules[i].span.source).kind == SourceKind::Builtin;
    let denies: Vec<usize> = (0..policy.rules.len())
        .filter(|&i| builtin(i) && policy.rules[i].action == Action::Deny)
        .collect();
    for (i, allow) in policy.rules.iter().enumerate() {
        if allow.action != Action::Allow || builtin(i) {
            continue;
        }
        // The allow rule alone, as a deny: "denied by rule 0" means "it matches".
        let mut alone = policy.clone();
        let mut rule = allow.clone();
        rule.action = Action::Deny;
        alone.rules = vec![rule];
        alone.outbound_rules.clear();
        alone.settings = Settings::default();
        let Ok(program) = Program::compile_with(&alone, env) else {
            continue;
        };
        let mut scratch = program.scratch();
        for &j in &denies {
            let deny = &policy.rules[j];
            let hit = deny.examples.should_match.iter().find(|ex| {
                let line = request_line(&expand(ex, env));
                let mut parsed = Parsed::new();
                if parsed.parse(line.as_bytes(), &Limits::default()).is_err() {
                    return false;
                }
                let frame = Frame::new(line.as_bytes(), &parsed);
                let Some(message) = frame.messages().first() else {
                    return false;
                };
                program.evaluate_request(&frame, message, &mut scratch)
                    == Decision::DeniedBy(RuleId(0))
            });
            if let Some(ex) = hit {
                out.push(Shadow {
                    allow: allow.name.value.clone(),
                    allow_at: policy.location(allow.name.span),
                    deny: deny.name.value.clone(),
                    example: ex.to_string(),
                    unreachable: false,
                });
            }
        }
    }
    let found = unreachable_allows(policy, env, &out);
    out.extend(found);
    out.extend(shadowed_outbound(policy, env));
    out
}

/// User allow rules that can never decide what they were written for: a call made from
/// the rule itself (its `examples.match`, or its conditions when each is a literal glob,
/// such as `path: {pattern: '~/.ssh/config'}`) is denied by a built-in rule first, since
/// the packs' deny rules come before the user's. Pairs `found` already has are left out.
fn unreachable_allows(policy: &Policy, env: &PathEnv, found: &[Shadow]) -> Vec<Shadow> {
    let mut out: Vec<Shadow> = Vec::new();
    let samples: Vec<(&crate::config::policy::Rule, Vec<serde_json::Value>)> = policy
        .rules
        .iter()
        .filter(|r| {
            r.action == Action::Allow && policy.source(r.span.source).kind != SourceKind::Builtin
        })
        .map(|r| (r, own_samples(r, env)))
        .filter(|(_, s)| !s.is_empty())
        .collect();
    // The whole policy is compiled again only when there is something to try (start-up
    // of the proxy runs this).
    if samples.is_empty() {
        return out;
    }
    let Ok(program) = Program::compile_with(policy, env) else {
        return out;
    };
    let mut scratch = program.scratch();
    let builtin_deny = |name: &str| {
        policy.rules.iter().any(|r| {
            r.name.value == name
                && r.action == Action::Deny
                && policy.source(r.span.source).kind == SourceKind::Builtin
        })
    };
    for (allow, samples) in samples {
        for sample in samples {
            let line = request_line(&sample);
            let mut parsed = Parsed::new();
            if parsed.parse(line.as_bytes(), &Limits::default()).is_err() {
                continue;
            }
            let frame = Frame::new(line.as_bytes(), &parsed);
            let Some(message) = frame.messages().first() else {
                continue;
            };
            let Decision::DeniedBy(id) = program.evaluate_request(&frame, message, &mut scratch)
            else {
                continue;
            };
            let deny = program.rule(id).name.clone();
            let known = |s: &Shadow| s.allow == allow.name.value && s.deny == deny;
            if builtin_deny(&deny) && !found.iter().any(known) && !out.iter().any(known) {
                out.push(Shadow {
                    allow: allow.name.value.clone(),
                    allow_at: policy.location(allow.name.span),
                    deny,
                    example: sample.to_string(),
                    unreachable: true,
                });
            }
        }
    }
    out
}

/// Calls an allow rule was written for: its `examples.match`, and, when every condition
/// is a glob without wildcards, the call holding exactly those values.
fn own_samples(rule: &crate::config::policy::Rule, env: &PathEnv) -> Vec<serde_json::Value> {
    use crate::config::policy::{ArgSelector, Matcher};
    let literal = |s: &str| !s.contains(['*', '?', '[', ']', '{', '}']);
    let mut out: Vec<serde_json::Value> = rule
        .examples
        .should_match
        .iter()
        .map(|e| expand(e, env))
        .collect();
    let tool = match &rule.tool {
        Some(t) if literal(&t.value) => t.value.clone(),
        Some(_) => return out,
        None => "read_file".to_string(),
    };
    if !literal(&rule.method.value) || rule.arguments.is_empty() {
        return out;
    }
    let mut arguments = serde_json::Map::new();
    for condition in &rule.arguments {
        match (&condition.selector, &condition.matcher) {
            (ArgSelector::Named(name), Matcher::Pattern(p)) if literal(&p.value) => {
                arguments.insert(name.clone(), p.value.clone().into());
            }
            _ => return out,
        }
    }
    out.push(serde_json::json!({
        "method": rule.method.value,
        "tool": tool,
        "arguments": arguments,
    }));
    out
}

/// The outbound half: a user outbound allow rule that matches a `match` example of a
/// built-in outbound deny or redact rule.
fn shadowed_outbound(policy: &Policy, env: &PathEnv) -> Vec<Shadow> {
    let mut out = Vec::new();
    let builtin =
        |span: crate::config::policy::Span| policy.source(span.source).kind == SourceKind::Builtin;
    for allow in &policy.outbound_rules {
        if allow.action != RuleAction::Allow || builtin(allow.span) {
            continue;
        }
        let mut alone = policy.clone();
        let mut rule = allow.clone();
        rule.action = RuleAction::Deny;
        alone.outbound_rules = vec![rule];
        alone.rules.clear();
        alone.settings = Settings::default();
        let Ok(program) = Program::compile_with(&alone, env) else {
            continue;
        };
        let mut scratch = program.scratch();
        for deny in policy.outbound_rules.iter().filter(|r| {
            builtin(r.span) && matches!(r.action, RuleAction::Deny | RuleAction::Redact)
        }) {
            let hit = deny.examples.should_match.iter().find(|ex| {
                let Some((line, tool, server)) = response_line(ex) else {
                    return false;
                };
                let mut parsed = Parsed::new();
                if parsed.parse(line.as_bytes(), &Limits::default()).is_err() {
                    return false;
                }
                let frame = Frame::new(line.as_bytes(), &parsed);
                let Some(message) = frame.messages().first() else {
                    return false;
                };
                let call = CallInfo {
                    method: Some("tools/call"),
                    tool: tool.as_deref(),
                    server: &server,
                };
                matches!(
                    program.scan_response(&frame, message, &call, &mut scratch),
                    Outcome::Block { rule } if rule == RuleId(0)
                )
            });
            if let Some(ex) = hit {
                out.push(Shadow {
                    allow: allow.name.value.clone(),
                    allow_at: policy.location(allow.name.span),
                    deny: deny.name.value.clone(),
                    example: ex.to_string(),
                    unreachable: false,
                });
            }
        }
    }
    out
}

/// The server result an outbound example stands for (`"text"`, `{tool?, server?, text}` or
/// `{tool?, server?, size}`), with the tool and server of the call it answers.
fn response_line(example: &serde_json::Value) -> Option<(String, Option<String>, String)> {
    use serde_json::Value;
    let (text, tool, server) = match example {
        Value::String(s) => (s.clone(), None, None),
        Value::Object(o) => {
            let text = match (o.get("text"), o.get("size")) {
                (Some(Value::String(t)), _) => t.clone(),
                (_, Some(n)) => "x".repeat(usize::try_from(n.as_u64()?).ok()?.min(1 << 24)),
                _ => return None,
            };
            let s = |k: &str| o.get(k).and_then(Value::as_str).map(str::to_string);
            (text, s("tool"), s("server"))
        }
        _ => return None,
    };
    let line = serde_json::json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": text}]}})
        .to_string();
    Some((
        line,
        tool,
        server.unwrap_or_else(|| "example-server".to_string()),
    ))
}

/// The request an inbound example stands for.
fn request_line(example: &serde_json::Value) -> String {
    let method = example
        .get("method")
        .and_then(serde_json::Value::as_str)
        .unwrap_or("tools/call");
    let args = example
        .get("arguments")
        .cloned()
        .unwrap_or_else(|| serde_json::json!({}));
    let params = if method == "tools/call" {
        serde_json::json!({"name": example.get("tool").cloned().unwrap_or_default(), "arguments": args})
    } else {
        args
    };
    serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string()
}

/// `${HOME}` and `${PROJECT_DIR}` in every string of an example, as the tests expand them.
fn expand(v: &serde_json::Value, env: &PathEnv) -> serde_json::Value {
    use serde_json::Value;
    match v {
        Value::String(s) => Value::String(
            s.replace("${HOME}", env.home())
                .replace("${PROJECT_DIR}", env.project_dir()),
        ),
        Value::Array(a) => Value::Array(a.iter().map(|x| expand(x, env)).collect()),
        Value::Object(o) => {
            Value::Object(o.iter().map(|(k, x)| (k.clone(), expand(x, env))).collect())
        }
        other => other.clone(),
    }
}

/// Which rule list an [`Overlap`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Inbound,
    Outbound,
}

/// An earlier rule that decides first for some of a later rule's messages (not
/// necessarily all of them: full shadowing is `explain-policy`'s own warning), found on
/// the later rule's examples and on samples made from its literals and regexes. At least
/// one of the two rules is the user's: overlaps inside the built-in packs are by design.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overlap {
    pub side: Side,
    /// Index of the earlier rule in its list.
    pub earlier: usize,
    /// Index of the later rule in its list.
    pub later: usize,
    message: String,
}

impl Overlap {
    /// One line for `explain-policy`, `check` and stderr, with the fix.
    pub fn message(&self) -> &str {
        &self.message
    }
}

/// Samples made per `response_contains_regex` of a rule.
const SAMPLES_PER_REGEX: usize = 6;

/// Every [`Overlap`] of `policy`, inbound then outbound, in rule order.
pub fn overlaps(policy: &Policy, env: &PathEnv) -> Vec<Overlap> {
    let mut out = Vec::new();
    inbound_overlaps(policy, env, &mut out);
    outbound_overlaps(policy, env, &mut out);
    out
}

/// What a sample stands for, in a warning.
enum Origin<'a> {
    Example(&'a serde_json::Value),
    Literal(&'a str),
    Pattern(&'a str),
}

impl Origin<'_> {
    fn describe(&self) -> String {
        match self {
            Origin::Example(ex) => format!("its example {ex}"),
            Origin::Literal(lit) => format!("a message containing {lit:?}"),
            Origin::Pattern(re) => format!("a message matching its pattern {re:?}"),
        }
    }
}

fn is_builtin(policy: &Policy, span: crate::config::policy::Span) -> bool {
    policy.source(span.source).kind == SourceKind::Builtin
}

/// The fix, said the same way for both directions.
fn fix(earlier: &str, earlier_builtin: bool, later: &str) -> String {
    if earlier_builtin {
        format!(
            "to let {later:?} decide there, add `disable: [{earlier}]` (and a rule of your own after {later:?} if you still want what {earlier:?} does), or give {later:?} a condition {earlier:?} does not share"
        )
    } else {
        format!(
            "to let {later:?} decide there, move it before {earlier:?}, or add an exception to {earlier:?} that leaves these messages out"
        )
    }
}

fn inbound_word(a: Action) -> &'static str {
    match a {
        Action::Allow => "allows",
        Action::Deny => "denies",
        Action::Ask => "asks about",
    }
}

fn outbound_word(a: RuleAction) -> &'static str {
    match a {
        RuleAction::Allow => "passes",
        RuleAction::Deny | RuleAction::Ask => "blocks",
        RuleAction::Redact => "redacts",
        RuleAction::LogOnly => "logs",
    }
}

fn inbound_overlaps(policy: &Policy, env: &PathEnv, out: &mut Vec<Overlap>) {
    let rules = &policy.rules;
    let mut alone: Vec<Option<Option<Rc<Program>>>> = vec![None; rules.len()];
    let mut program_of = |i: usize| -> Option<Rc<Program>> {
        alone[i]
            .get_or_insert_with(|| {
                let mut p = policy.clone();
                let mut rule = rules[i].clone();
                rule.action = Action::Deny;
                p.rules = vec![rule];
                p.outbound_rules.clear();
                p.settings = Settings::default();
                Program::compile_with(&p, env).ok().map(Rc::new)
            })
            .clone()
    };
    for (j, later) in rules.iter().enumerate() {
        if later.examples.should_match.is_empty() {
            continue;
        }
        let later_builtin = is_builtin(policy, later.span);
        if later_builtin && rules[..j].iter().all(|r| is_builtin(policy, r.span)) {
            continue;
        }
        for (i, earlier) in rules[..j].iter().enumerate() {
            let earlier_builtin = is_builtin(policy, earlier.span);
            if (earlier_builtin && later_builtin) || earlier.action == later.action {
                continue;
            }
            let Some(program) = program_of(i) else {
                continue;
            };
            let mut scratch = program.scratch();
            let hit = later.examples.should_match.iter().find(|ex| {
                let line = request_line(&expand(ex, env));
                let mut parsed = Parsed::new();
                if parsed.parse(line.as_bytes(), &Limits::default()).is_err() {
                    return false;
                }
                let frame = Frame::new(line.as_bytes(), &parsed);
                frame.messages().first().is_some_and(|m| {
                    program.evaluate_request(&frame, m, &mut scratch)
                        == Decision::DeniedBy(RuleId(0))
                })
            });
            if let Some(ex) = hit {
                let (e, l) = (&earlier.name.value, &later.name.value);
                out.push(Overlap {
                    side: Side::Inbound,
                    earlier: i,
                    later: j,
                    message: format!(
                        "rule {l:?} ({}) is partly shadowed: the earlier rule {e:?} ({}) also matches {} and {} it first, so {l:?} never {} it; {}",
                        policy.location(later.name.span),
                        policy.location(earlier.name.span),
                        Origin::Example(ex).describe(),
                        inbound_word(earlier.action),
                        inbound_word(later.action),
                        fix(e, earlier_builtin, l)
                    ),
                });
            }
        }
    }
}

/// The call a sample of `rule` answers: its method and tool when they name one, else a
/// `tools/call` of no particular tool.
fn sample_call(rule: &crate::config::policy::OutboundRule) -> (String, Option<String>) {
    let plain = |g: &str| !g.contains(['*', '?', '[', '{', '!']);
    let method = match rule.method.as_ref().map(|m| m.value.as_str()) {
        Some(m) if plain(m) => m.to_string(),
        Some(m) if m.starts_with('{') && m.ends_with('}') => m[1..m.len() - 1]
            .split(',')
            .next()
            .filter(|first| plain(first))
            .unwrap_or("tools/call")
            .to_string(),
        _ => "tools/call".to_string(),
    };
    let tool = rule
        .tool
        .as_ref()
        .map(|t| t.value.as_str())
        .filter(|t| plain(t))
        .map(str::to_string);
    (method, tool)
}

fn outbound_overlaps(policy: &Policy, env: &PathEnv, out: &mut Vec<Overlap>) {
    let rules = &policy.outbound_rules;
    let mut alone: Vec<Option<Option<Rc<Program>>>> = vec![None; rules.len()];
    let mut program_of = |i: usize| -> Option<Rc<Program>> {
        alone[i]
            .get_or_insert_with(|| {
                let mut p = policy.clone();
                let mut rule = rules[i].clone();
                rule.action = RuleAction::Deny;
                rule.additive = false;
                p.outbound_rules = vec![rule];
                p.rules.clear();
                p.settings = Settings::default();
                Program::compile_with(&p, env).ok().map(Rc::new)
            })
            .clone()
    };
    for (j, later) in rules.iter().enumerate() {
        // An untrusted file's rules run after whatever decided: nothing shadows them.
        if later.additive {
            continue;
        }
        let later_builtin = is_builtin(policy, later.span);
        if later_builtin && rules[..j].iter().all(|r| is_builtin(policy, r.span)) {
            continue;
        }
        let (method, tool) = sample_call(later);
        // The later rule's own messages: examples, then made-up texts holding each of its
        // literals and each of its patterns.
        let mut samples: Vec<(String, Option<String>, String, Origin<'_>)> = Vec::new();
        for ex in &later.examples.should_match {
            if let Some((line, t, server)) = response_line(ex) {
                samples.push((
                    line,
                    t.or_else(|| tool.clone()),
                    server,
                    Origin::Example(ex),
                ));
            }
        }
        let line_of = |text: &str| {
            serde_json::json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": format!("sample: {text} (end)")}]}})
                .to_string()
        };
        for lit in &later.response_contains {
            samples.push((
                line_of(&lit.value),
                tool.clone(),
                "example-server".into(),
                Origin::Literal(&lit.value),
            ));
        }
        for (k, re) in later.response_contains_regex.iter().enumerate() {
            let Ok(hir) = crate::regex_dialect::parse(&re.value) else {
                continue;
            };
            for text in super::samples::samples(&hir, SAMPLES_PER_REGEX, 0x5A3D + k as u64) {
                samples.push((
                    line_of(&text),
                    tool.clone(),
                    "example-server".into(),
                    Origin::Pattern(&re.value),
                ));
            }
        }
        if samples.is_empty() {
            continue;
        }
        // Only samples the later rule really matches count.
        let Some(own) = program_of(j) else {
            continue;
        };
        let judge = |program: &Program, (line, tool, server): (&str, Option<&str>, &str)| {
            let mut parsed = Parsed::new();
            if parsed.parse(line.as_bytes(), &Limits::default()).is_err() {
                return false;
            }
            let frame = Frame::new(line.as_bytes(), &parsed);
            let Some(message) = frame.messages().first() else {
                return false;
            };
            let call = CallInfo {
                method: Some(&method),
                tool,
                server,
            };
            let mut scratch = program.scratch();
            matches!(
                program.scan_response(&frame, message, &call, &mut scratch),
                Outcome::Block { rule } if rule == RuleId(0)
            )
        };
        let mine: Vec<&(String, Option<String>, String, Origin<'_>)> = samples
            .iter()
            .filter(|(line, t, server, _)| judge(&own, (line, t.as_deref(), server)))
            .collect();
        if mine.is_empty() {
            continue;
        }
        for (i, earlier) in rules[..j].iter().enumerate() {
            let earlier_builtin = is_builtin(policy, earlier.span);
            let same = earlier.action == later.action && later.action != RuleAction::Redact;
            if (earlier_builtin && later_builtin) || same || earlier.action == RuleAction::LogOnly {
                continue;
            }
            let Some(program) = program_of(i) else {
                continue;
            };
            let hit = mine
                .iter()
                .find(|(line, t, server, _)| judge(&program, (line, t.as_deref(), server)));
            if let Some((_, _, _, origin)) = hit {
                let (e, l) = (&earlier.name.value, &later.name.value);
                out.push(Overlap {
                    side: Side::Outbound,
                    earlier: i,
                    later: j,
                    message: format!(
                        "rule {l:?} ({}) is partly shadowed: the earlier rule {e:?} ({}) also matches {} and {} it first, so {l:?} never {} it; {}",
                        policy.location(later.name.span),
                        policy.location(earlier.name.span),
                        origin.describe(),
                        outbound_word(earlier.action),
                        outbound_word(later.action),
                        fix(e, earlier_builtin, l)
                    ),
                });
            }
        }
    }
}

/// Every warning about rule order this module finds, as lines: user allow rules over
/// built-in denies ([`shadowed_builtin_denies`]) and partial overlaps ([`overlaps`]).
pub fn order_warnings(policy: &Policy, env: &PathEnv) -> Vec<String> {
    let mut out: Vec<String> = shadowed_builtin_denies(policy, env)
        .iter()
        .map(Shadow::message)
        .collect();
    out.extend(
        overlaps(policy, env)
            .iter()
            .map(|o| o.message().to_string()),
    );
    out
}
