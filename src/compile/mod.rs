//! Compiling a [`crate::config::Policy`] into a [`crate::program::Program`]: matchers are
//! sorted into engine classes, one engine per class (STYLE house rule 2).
//!
//! Every distinct condition becomes one *predicate* (identical conditions of different
//! rules share it). Each engine keeps a [`PredMap`] from its pattern index to the
//! predicates the pattern feeds, and a rule is the conjunction of its predicates.
//! Build failures are mapped back to the YAML that caused them.
//!
//! Only the translation lives here; the engines themselves, and what the program needs
//! to run them, are in `program::engine`. Dependencies point down (STYLE house rule 12):
//! config → compile → program, so the program never imports this module, and
//! [`Program::compile`] is defined here.

use std::collections::HashMap;

use regex_automata::meta;

use crate::config::diag::{Code, PolicyDiagnostic, PolicyError};
use crate::config::policy::{
    Action, ArgSelector, Matcher, OutboundRule, Policy, Rule, RuleAction, SourceKind, Span,
};
use crate::paths::PathEnv;
use crate::program::engine::{
    COMMAND, GLOB, LITERAL, NOT_UNDER, Needs, PredMap, REGEX, SECRETS, command, glob, literal,
    path, regex, secret,
};
use crate::program::{
    ANY_SEL, ConditionInfo, Engine, InRule, Inbound, NO_SEL, OutRule, Outbound, Program, RuleInfo,
};
use crate::secrets::{Detector, DetectorSpec, builtin_specs};

pub mod required;
pub mod samples;
pub mod shadow;

const NONE: u32 = u32::MAX;

/// Distinct pattern texts of one engine, each with its predicates and the span of
/// its first use (for errors).
#[derive(Default)]
struct Patterns {
    index: HashMap<String, usize>,
    texts: Vec<String>,
    preds: Vec<Vec<u32>>,
    spans: Vec<Span>,
}

impl Patterns {
    fn add(&mut self, text: &str, pred: u32, span: Span) {
        let i = *self.index.entry(text.to_string()).or_insert_with(|| {
            self.texts.push(text.to_string());
            self.preds.push(Vec::new());
            self.spans.push(span);
            self.texts.len() - 1
        });
        if !self.preds[i].contains(&pred) {
            self.preds[i].push(pred);
        }
    }

    fn is_empty(&self) -> bool {
        self.texts.is_empty()
    }

    /// Whether every pattern comes from an embedded pack. Those are built by the test
    /// suite, so their engine can wait for the first frame that needs it; anything a user
    /// wrote is built at compile time, so a failure is reported at start-up.
    fn all_builtin(&self, policy: &Policy) -> bool {
        self.spans
            .iter()
            .all(|sp| policy.source(sp.source).kind == SourceKind::Builtin)
    }

    fn map(&self) -> PredMap {
        PredMap::from_lists(&self.preds)
    }
}

/// Collects diagnostics while compiling.
struct Diags<'p> {
    policy: &'p Policy,
    list: Vec<PolicyDiagnostic>,
}

impl Diags<'_> {
    fn push(&mut self, span: Option<Span>, code: &str, message: String, label: &str, help: &str) {
        let code = match code.rsplit("::").next() {
            Some("glob") => Code::BadGlob,
            Some("regex") | Some("secret_pattern") => Code::BadRegex,
            Some("unknown_secret") => Code::UnknownDetector,
            _ => Code::Compile,
        };
        let located = span.and_then(|s| {
            self.policy
                .sources
                .get(s.source.0 as usize)
                .map(|src| (s, src))
        });
        let diagnostic = match located {
            Some((s, src)) => PolicyDiagnostic::at(code, message, src, s, label),
            None => PolicyDiagnostic::new(code, message),
        };
        self.list.push(diagnostic.with_help(help));
    }
}

fn location(policy: &Policy, span: Span) -> String {
    let name = policy
        .sources
        .get(span.source.0 as usize)
        .map_or("<unknown>", |s| s.name.as_str());
    format!("{name}:{}:{}", span.line, span.column)
}

impl Program {
    /// Compile a validated policy, resolving paths against the process's HOME and
    /// working directory.
    pub fn compile(policy: &Policy) -> Result<Program, PolicyError> {
        compile(policy, &PathEnv::from_process())
    }

    /// Compile a validated policy, resolving paths against `env`.
    pub fn compile_with(policy: &Policy, env: &PathEnv) -> Result<Program, PolicyError> {
        compile(policy, env)
    }
}

/// Compile `policy`, resolving paths against `env`.
pub fn compile(policy: &Policy, env: &PathEnv) -> Result<Program, PolicyError> {
    // A rule naming an identity applies only to a client that has one: `mcpwall serve`
    // compiles `Policy::for_identity(Some(name))` per identity; anything else judges
    // without those rules.
    if policy.has_identity_rules() {
        return compile(&policy.for_identity(None), env);
    }
    let mut diags = Diags {
        policy,
        list: Vec::new(),
    };
    let detector = build_detector(policy, &mut diags);
    let (inbound, rules) = compile_inbound(policy, env, &mut diags);
    let (outbound, outbound_rules) = compile_outbound(policy, &mut diags);
    let exceptions = compile_exceptions(policy, env, &mut diags);
    match (detector, inbound, outbound) {
        (Some(detector), Some(inbound), Some(outbound)) if diags.list.is_empty() => Ok(Program {
            settings: policy.settings.clone(),
            env: env.clone(),
            inbound,
            outbound,
            detector,
            rules,
            outbound_rules,
            exceptions,
            source: None,
        }),
        _ => Err(PolicyError {
            diagnostics: diags.list,
        }),
    }
}

/// The policy's `exceptions`, one small program per excepted rule: its exceptions as
/// deny rules in file order under `default_action: allow`, so a `DeniedBy(i)` from it says
/// exception `i` holds. Messages pay for it only when an excepted rule has matched.
fn compile_exceptions(
    policy: &Policy,
    env: &PathEnv,
    diags: &mut Diags<'_>,
) -> Box<[crate::program::Excepted]> {
    let mut by_rule: Vec<(u32, Policy)> = Vec::new();
    for exception in &policy.exceptions {
        // A rule left out of this program (it names another identity) takes its
        // exceptions with it.
        let Some(rule) = policy
            .rules
            .iter()
            .position(|r| r.name.value == exception.rule.value)
        else {
            continue;
        };
        let rule = rule as u32;
        let mut conditions = exception.conditions.clone();
        conditions.action = Action::Deny;
        match by_rule.iter_mut().find(|(r, _)| *r == rule) {
            Some((_, p)) => p.rules.push(conditions),
            None => by_rule.push((
                rule,
                Policy {
                    sources: policy.sources.clone(),
                    settings: crate::config::policy::Settings {
                        default_action: Action::Allow,
                        ..policy.settings.clone()
                    },
                    rules: vec![conditions],
                    outbound_rules: Vec::new(),
                    secret_patterns: policy.secret_patterns.clone(),
                    disabled_secrets: policy.disabled_secrets.clone(),
                    ignored: Vec::new(),
                    exceptions: Vec::new(),
                    servers: Vec::new(),
                    sandbox: Default::default(),
                },
            )),
        }
    }
    let mut out = Vec::with_capacity(by_rule.len());
    for (rule, sub) in by_rule {
        match compile(&sub, env) {
            Ok(program) => out.push(crate::program::Excepted {
                rule,
                program: Box::new(program),
            }),
            Err(err) => diags.list.extend(err.diagnostics),
        }
    }
    out.into_boxed_slice()
}

fn build_detector(policy: &Policy, diags: &mut Diags<'_>) -> Option<secret::SecretEngine> {
    let builtin = builtin_specs();
    for disabled in &policy.disabled_secrets {
        if !builtin.iter().any(|s| s.name == disabled.value) {
            let names: Vec<&str> = builtin.iter().map(|s| s.name.as_str()).collect();
            diags.push(
                Some(disabled.span),
                "mcpwall::compile::unknown_secret",
                format!(
                    "there is no built-in secret detector named {:?}",
                    disabled.value
                ),
                "unknown detector",
                &format!("built-in detectors: {}", names.join(", ")),
            );
        }
    }
    // A policy pattern with a built-in's name replaces that built-in (only trusted files
    // get this far with one, see `config::merge`).
    let mut specs: Vec<DetectorSpec> = builtin
        .into_iter()
        .filter(|s| {
            !policy
                .disabled_secrets
                .iter()
                .any(|d| crate::secrets::lifts(&d.value, &s.name))
        })
        .filter(|s| {
            !policy
                .secret_patterns
                .iter()
                .any(|p| p.name.value == s.name)
        })
        .collect();
    let n_builtin = specs.len();
    for p in &policy.secret_patterns {
        let origin = policy
            .sources
            .get(p.name.span.source.0 as usize)
            .map_or_else(String::new, |s| s.name.clone());
        specs.push(DetectorSpec {
            name: p.name.value.clone(),
            regex: p.regex.value.clone(),
            entropy_threshold: p.entropy_threshold,
            origin,
            ..DetectorSpec::default()
        });
    }
    if policy.secret_patterns.is_empty() {
        return Some(secret::SecretEngine::deferred(specs));
    }
    match Detector::new(specs) {
        Ok(d) => Some(secret::SecretEngine::new(d)),
        Err(e) => {
            let span = e
                .index
                .checked_sub(n_builtin)
                .and_then(|i| policy.secret_patterns.get(i))
                .map(|p| p.regex.span);
            diags.push(
                span,
                "mcpwall::compile::secret_pattern",
                format!(
                    "secret pattern {:?} cannot be compiled: {}",
                    e.name, e.reason
                ),
                "this pattern",
                "simplify the pattern; each regex may use at most 10 MiB once compiled",
            );
            None
        }
    }
}

#[derive(Hash, PartialEq, Eq)]
enum InKey {
    Method(String),
    Tool(String),
    Regex(u32, String),
    Glob(u32, String),
    NotUnder(u32, u32),
    Secrets(u32),
    Command(u32, String),
}

fn compile_inbound(
    policy: &Policy,
    env: &PathEnv,
    diags: &mut Diags<'_>,
) -> (Option<Inbound>, Vec<RuleInfo>) {
    let mut keys: HashMap<InKey, u32> = HashMap::new();
    let mut pred_selector: Vec<u32> = Vec::new();
    let mut intern = |key: InKey, sel: u32| -> (u32, bool) {
        let next = pred_selector.len() as u32;
        let id = *keys.entry(key).or_insert(next);
        let fresh = id == next;
        if fresh {
            pred_selector.push(sel);
        }
        (id, fresh)
    };
    let mut methods = Patterns::default();
    let mut tools = Patterns::default();
    let mut regexes = Patterns::default();
    let mut globs = Patterns::default();
    let mut roots = path::Roots::default();
    let mut not_under = Vec::new();
    let mut secrets = Vec::new();
    let mut commands = command::CommandEngine::default();
    let mut arg_names = rustc_hash::FxHashMap::<Box<str>, u32>::default();
    let mut named_needs: Vec<Needs> = Vec::new();
    let mut any_needs: Needs = 0;
    let mut rule_preds: Vec<Vec<u32>> = Vec::new();
    let mut rules = Vec::with_capacity(policy.rules.len());
    let mut infos = Vec::with_capacity(policy.rules.len());

    for rule in &policy.rules {
        let mut conditions = Vec::new();
        let (method, _) = intern(InKey::Method(rule.method.value.clone()), NO_SEL);
        methods.add(&rule.method.value, method, rule.method.span);
        conditions.push(ConditionInfo {
            what: format!("method: {:?}", rule.method.value),
            engine: Engine::MethodGlob,
        });
        let tool = match &rule.tool {
            Some(t) => {
                let (p, _) = intern(InKey::Tool(t.value.clone()), NO_SEL);
                tools.add(&t.value, p, t.span);
                conditions.push(ConditionInfo {
                    what: format!("tool: {:?}", t.value),
                    engine: Engine::ToolGlob,
                });
                p
            }
            None => NONE,
        };
        let mut args: Vec<u32> = Vec::new();
        for cond in &rule.arguments {
            let (sel, sel_name) = match &cond.selector {
                ArgSelector::Named(name) => {
                    let next = named_needs.len() as u32;
                    let sel = *arg_names.entry(name.as_str().into()).or_insert(next);
                    if sel == next {
                        named_needs.push(0);
                    }
                    (sel, name.as_str())
                }
                ArgSelector::AnyValue => (ANY_SEL, "_any_value"),
            };
            let (need, pred, what, engine) = match &cond.matcher {
                Matcher::Regex(re) => {
                    let (p, _) = intern(InKey::Regex(sel, re.value.clone()), sel);
                    regexes.add(&re.value, p, re.span);
                    (
                        REGEX,
                        p,
                        format!("{sel_name}: regex {:?}", re.value),
                        Engine::ArgRegex,
                    )
                }
                Matcher::Pattern(g) => {
                    let expanded = env.expand_glob_prefix(&g.value);
                    let (p, _) = intern(InKey::Glob(sel, expanded.clone()), sel);
                    globs.add(&expanded, p, g.span);
                    (
                        GLOB,
                        p,
                        format!("{sel_name}: pattern {:?}", g.value),
                        Engine::ArgGlob,
                    )
                }
                Matcher::NotUnder { root, written } => {
                    let r = roots.intern(root, env);
                    let (p, fresh) = intern(InKey::NotUnder(sel, r), sel);
                    if fresh {
                        not_under.push(path::NotUnderCheck {
                            pred: p,
                            selector: sel,
                            root: r,
                        });
                    }
                    let resolved = &roots.roots[r as usize].canonical;
                    (
                        NOT_UNDER,
                        p,
                        format!("{sel_name}: not_under {:?} ({resolved})", written.value),
                        Engine::NotUnder,
                    )
                }
                Matcher::Secrets => {
                    let (p, fresh) = intern(InKey::Secrets(sel), sel);
                    if fresh {
                        secrets.push((p, sel));
                    }
                    (SECRETS, p, format!("{sel_name}: secrets"), Engine::Secrets)
                }
                Matcher::Command(clauses) => {
                    let key = format!("{:?}", clauses.value);
                    let (p, fresh) = intern(InKey::Command(sel, key), sel);
                    if fresh {
                        let builtin =
                            policy.source(clauses.span.source).kind == SourceKind::Builtin;
                        let lazy = if builtin {
                            Ok(command::LazyClauses::deferred(&clauses.value))
                        } else {
                            command::LazyClauses::eager(&clauses.value, env)
                        };
                        match lazy {
                            Ok(lazy) => commands.preds.push(command::CommandPred {
                                pred: p,
                                selector: sel,
                                clauses: lazy,
                            }),
                            Err(e) => diags.push(
                                Some(clauses.span),
                                "mcpwall::compile::command",
                                format!("command matcher cannot be compiled: {}", e.reason),
                                "this matcher",
                                "check the globs of `name`, `paths`, `redirect` and `words`",
                            ),
                        }
                    }
                    (
                        COMMAND,
                        p,
                        format!(
                            "{sel_name}: command {}",
                            crate::config::policy::describe_clauses(&clauses.value)
                        ),
                        Engine::Command,
                    )
                }
            };
            if sel == ANY_SEL {
                any_needs |= need;
            } else {
                named_needs[sel as usize] |= need;
            }
            if !args.contains(&pred) {
                args.push(pred);
            }
            conditions.push(ConditionInfo { what, engine });
        }
        let n_not_under = args
            .iter()
            .filter(|&&p| not_under.iter().any(|c| c.pred == p))
            .count() as u32;
        rules.push(InRule {
            method,
            tool,
            n_args: args.len() as u32,
            n_not_under,
            allow: rule.action == Action::Allow,
            ask: rule.action == Action::Ask,
        });
        rule_preds.push(args);
        infos.push(rule_info(policy, rule, conditions));
    }

    let n_preds = pred_selector.len();
    let mut pred_rules = vec![Vec::new(); n_preds];
    let mut by_method = vec![Vec::new(); n_preds];
    let mut by_tool = vec![Vec::new(); n_preds];
    for (r, (rule, args)) in rules.iter().zip(&rule_preds).enumerate() {
        let r = r as u32;
        for &p in args {
            pred_rules[p as usize].push(r);
        }
        if args.is_empty() {
            if rule.tool != NONE {
                by_tool[rule.tool as usize].push(r);
            } else {
                by_method[rule.method as usize].push(r);
            }
        }
    }

    let method_globs = build_globs(&methods, diags, "method");
    let tool_globs = build_name_globs(policy, &tools, diags, "tool");
    let glob = build_globs(&globs, diags, "pattern");
    let regex = build_regexes(policy, &regexes, diags);
    let inbound = (|| {
        Some(Inbound {
            n_preds,
            rules: rules.into(),
            pred_selector: pred_selector.into(),
            pred_rules: PredMap::from_lists(&pred_rules),
            method_globs: method_globs.ok()?,
            tool_globs: tool_globs.ok()?,
            by_method: PredMap::from_lists(&by_method),
            by_tool: PredMap::from_lists(&by_tool),
            arg_names,
            named_needs: named_needs.into(),
            any_needs,
            regex: regex.ok()?,
            glob: glob.ok()?,
            not_under: not_under.into(),
            roots: roots.roots.into(),
            secrets: secrets.into(),
            command: (!commands.preds.is_empty()).then_some(commands),
        })
    })();
    (inbound, infos)
}

/// `Ok(None)` when there is nothing to build; `Err(())` when building failed (and a
/// diagnostic was recorded).
fn build_globs(
    patterns: &Patterns,
    diags: &mut Diags<'_>,
    what: &str,
) -> Result<Option<glob::GlobEngine>, ()> {
    if patterns.is_empty() {
        return Ok(None);
    }
    glob::GlobEngine::new(&patterns.texts, patterns.map())
        .map(Some)
        .map_err(|e| {
            diags.push(
                e.pattern.map(|i| patterns.spans[i]),
                "mcpwall::compile::glob",
                format!("{what} glob cannot be compiled: {}", e.reason),
                "this glob",
                "check the glob syntax: `*`, `?`, `[...]`, `{a,b}` and `**`",
            );
        })
}

/// Tool or server name globs: deferred when all come from embedded packs (names, no
/// variables expanded into them), built now otherwise.
fn build_name_globs(
    policy: &Policy,
    patterns: &Patterns,
    diags: &mut Diags<'_>,
    what: &str,
) -> Result<Option<glob::GlobEngine>, ()> {
    if !patterns.is_empty() && patterns.all_builtin(policy) {
        return Ok(Some(glob::GlobEngine::deferred(
            &patterns.texts,
            patterns.map(),
        )));
    }
    build_globs(patterns, diags, what)
}

fn build_regexes(
    policy: &Policy,
    patterns: &Patterns,
    diags: &mut Diags<'_>,
) -> Result<Option<regex::RegexEngine>, ()> {
    if patterns.is_empty() {
        return Ok(None);
    }
    if patterns.all_builtin(policy) {
        return Ok(Some(regex::RegexEngine::deferred(
            &patterns.texts,
            patterns.map(),
        )));
    }
    regex::RegexEngine::new(&patterns.texts, patterns.map())
        .map(Some)
        .map_err(|e| {
            let (span, message) = match e.pattern {
                Some(i) => (
                    Some(patterns.spans[i]),
                    format!("regex cannot be compiled: {}", e.reason),
                ),
                None => (
                    patterns.spans.first().copied(),
                    format!(
                        "the policy's {} regexes together are too large to compile: {}",
                        patterns.texts.len(),
                        e.reason
                    ),
                ),
            };
            diags.push(
                span,
                "mcpwall::compile::regex",
                message,
                "this regex",
                "simplify the regex (large counted repetitions and Unicode classes such as \\w grow quickly); the compiled size limit is 10 MiB",
            );
        })
}

fn rule_info(policy: &Policy, rule: &Rule, conditions: Vec<ConditionInfo>) -> RuleInfo {
    RuleInfo {
        name: rule.name.value.clone(),
        message: rule.message.clone(),
        location: location(policy, rule.span),
        action: match rule.action {
            Action::Allow => RuleAction::Allow,
            Action::Deny => RuleAction::Deny,
            Action::Ask => RuleAction::Ask,
        },
        remember_session: rule.remember.is_some(),
        description: rule.description.clone(),
        span: rule.span,
        conditions,
    }
}

#[derive(Hash, PartialEq, Eq)]
enum OutKey {
    Method(String),
    Tool(String),
    Server(String),
    Size(u64),
    Secrets,
    Contains(Vec<String>),
    Regex(Vec<String>),
}

fn compile_outbound(policy: &Policy, diags: &mut Diags<'_>) -> (Option<Outbound>, Vec<RuleInfo>) {
    let mut keys: HashMap<OutKey, u32> = HashMap::new();
    let mut intern = |key: OutKey| -> u32 {
        let next = keys.len() as u32;
        *keys.entry(key).or_insert(next)
    };
    let mut methods = Patterns::default();
    let mut tools = Patterns::default();
    let mut servers = Patterns::default();
    let mut literals = Patterns::default();
    let mut regexes = Patterns::default();
    let mut sizes: Vec<(u64, u32)> = Vec::new();
    let mut secrets_pred = NONE;
    let mut redact_regex_preds: Vec<u32> = Vec::new();
    let mut rules = Vec::with_capacity(policy.outbound_rules.len());
    let mut infos = Vec::with_capacity(policy.outbound_rules.len());

    for rule in &policy.outbound_rules {
        let mut conditions = Vec::new();
        let mut gates = Vec::new();
        let mut preds = Vec::new();
        let mut content: Needs = 0;
        let globs = [
            (&rule.method, &mut methods, Engine::MethodGlob, "method"),
            (&rule.tool, &mut tools, Engine::ToolGlob, "tool"),
            (&rule.server, &mut servers, Engine::ServerGlob, "server"),
        ];
        for (glob, table, engine, what) in globs {
            if let Some(g) = glob {
                let key = match engine {
                    Engine::MethodGlob => OutKey::Method(g.value.clone()),
                    Engine::ToolGlob => OutKey::Tool(g.value.clone()),
                    _ => OutKey::Server(g.value.clone()),
                };
                let p = intern(key);
                table.add(&g.value, p, g.span);
                gates.push(p);
                conditions.push(ConditionInfo {
                    what: format!("{what}: {:?}", g.value),
                    engine,
                });
            }
        }
        if let Some(n) = rule.response_size_exceeds {
            let p = intern(OutKey::Size(n));
            if !sizes.iter().any(|&(_, q)| q == p) {
                sizes.push((n, p));
            }
            gates.push(p);
            conditions.push(ConditionInfo {
                what: format!("response_size_exceeds: {n}"),
                engine: Engine::Size,
            });
        }
        preds.extend_from_slice(&gates);
        if rule.secrets {
            secrets_pred = intern(OutKey::Secrets);
            preds.push(secrets_pred);
            content |= SECRETS;
            conditions.push(ConditionInfo {
                what: "secrets: true".to_string(),
                engine: Engine::Secrets,
            });
        }
        let mut contains = NONE;
        if !rule.response_contains.is_empty() {
            // Literals are matched in normalised form (see `literal.rs`), so lists equal
            // after normalisation are one predicate.
            let mut list: Vec<String> = rule
                .response_contains
                .iter()
                .map(|s| literal::normalize_literal(&s.value))
                .collect();
            list.sort();
            list.dedup();
            contains = intern(OutKey::Contains(list));
            for lit in &rule.response_contains {
                literals.add(&literal::normalize_literal(&lit.value), contains, lit.span);
            }
            preds.push(contains);
            content |= LITERAL;
            conditions.push(ConditionInfo {
                what: format!(
                    "response_contains: {:?}",
                    rule.response_contains
                        .iter()
                        .map(|s| &s.value)
                        .collect::<Vec<_>>()
                ),
                engine: Engine::ContainsLiteral,
            });
        }
        let mut regex = NONE;
        if !rule.response_contains_regex.is_empty() {
            let mut list: Vec<String> = rule
                .response_contains_regex
                .iter()
                .map(|s| s.value.clone())
                .collect();
            list.sort();
            list.dedup();
            regex = intern(OutKey::Regex(list));
            for re in &rule.response_contains_regex {
                regexes.add(&re.value, regex, re.span);
            }
            preds.push(regex);
            content |= REGEX;
            if rule.action == RuleAction::Redact {
                redact_regex_preds.push(regex);
            }
            conditions.push(ConditionInfo {
                what: format!(
                    "response_contains_regex: {:?}",
                    rule.response_contains_regex
                        .iter()
                        .map(|s| &s.value)
                        .collect::<Vec<_>>()
                ),
                engine: Engine::ContainsRegex,
            });
        }
        preds.sort_unstable();
        preds.dedup();
        rules.push(OutRule {
            preds: preds.into(),
            gates: gates.into(),
            content,
            contains,
            regex,
            secrets: rule.secrets,
            action: rule.action,
            additive: rule.additive,
        });
        infos.push(outbound_info(policy, rule, conditions));
    }

    let method_globs = build_globs(&methods, diags, "method");
    let tool_globs = build_name_globs(policy, &tools, diags, "tool");
    let server_globs = build_name_globs(policy, &servers, diags, "server");
    let regex = build_regexes(policy, &regexes, diags);
    let literal = if literals.is_empty() {
        Ok(None)
    } else if literals.all_builtin(policy) {
        Ok(Some(literal::LiteralEngine::deferred(
            &literals.texts,
            literals.map(),
        )))
    } else {
        literal::LiteralEngine::new(&literals.texts, literals.map())
            .map(Some)
            .map_err(|reason| {
                diags.push(
                    literals.spans.first().copied(),
                    "mcpwall::compile::literal",
                    format!("response_contains literals cannot be compiled: {reason}"),
                    "here",
                    "use fewer or shorter literals",
                );
            })
    };
    let mut span_regexes = Vec::with_capacity(regexes.texts.len());
    for (i, text) in regexes.texts.iter().enumerate() {
        if regexes.preds[i]
            .iter()
            .any(|p| redact_regex_preds.contains(p))
        {
            match regex::build_one(text) {
                Ok(re) => span_regexes.push(Some(re)),
                Err(e) => {
                    diags.push(
                        Some(regexes.spans[i]),
                        "mcpwall::compile::regex",
                        format!("regex cannot be compiled: {}", e.reason),
                        "this regex",
                        "simplify the regex; the compiled size limit is 10 MiB",
                    );
                    span_regexes.push(None);
                }
            }
        } else {
            span_regexes.push(None::<meta::Regex>);
        }
    }
    let outbound = (|| {
        // Additive rules are placed after every trusted one by the merge; the evaluation
        // skips to the first of them once a trusted rule has decided.
        let additive_from = rules.iter().position(|r| r.additive).unwrap_or(rules.len());
        debug_assert!(rules[additive_from..].iter().all(|r| r.additive));
        Some(Outbound {
            n_preds: keys.len(),
            additive_from,
            rules: rules.into(),
            method_globs: method_globs.ok()?,
            tool_globs: tool_globs.ok()?,
            server_globs: server_globs.ok()?,
            sizes: sizes.into(),
            secrets_pred,
            literal: literal.ok()?,
            regex: regex.ok()?,
            span_regexes: span_regexes.into(),
        })
    })();
    (outbound, infos)
}

fn outbound_info(policy: &Policy, rule: &OutboundRule, conditions: Vec<ConditionInfo>) -> RuleInfo {
    RuleInfo {
        name: rule.name.value.clone(),
        message: rule.message.clone(),
        location: location(policy, rule.span),
        action: rule.action,
        remember_session: false,
        description: rule.description.clone(),
        span: rule.span,
        conditions,
    }
}
