//! Merging files into one [`Policy`]: extends, layering, precedence, trust filtering.
//!
//! Order (first match wins, so order is policy):
//! 1. a file that `extends` packs is layered (ARCHITECTURE decision 7): the packs' deny
//!    rules (outbound: every rule but `allow`) come before the file's own rules, and their
//!    allow rules after them, so a file's allow never silently shadows a built-in deny. A
//!    pack's rules keep their order within each part; packs are flattened recursively the
//!    same way. A rule a file names in `disable: [..]` is lifted (validated against the
//!    rules of the packs the file extends, with "did you mean");
//! 2. the project's `.mcpwall.yml` (with its packs) comes before the user's
//!    `~/.mcpwall/config.yml` (with its packs);
//! 3. a built-in pack is included once, where it is first reached; a pack reached again
//!    through another file is not repeated (both `init`-written files say `extends: [default]`).
//!    Exception: a pack first reached through a restricted file is reached again, in full,
//!    by a trusted file; only the rules the first inclusion did not apply are added there;
//! 4. the outbound `deny`/`redact` rules of restricted inclusions (an untrusted project file
//!    and the packs it pulls in) come after every trusted outbound rule: they apply in
//!    addition to the trusted rules and never end evaluation before those have run.
//!
//! Settings: the first file in that order that sets a key wins, so the project beats the user
//! and a file beats the packs it extends. A file that is *restricted* (an untrusted project
//! file, and every pack it pulls in) may only tighten; see [`Restricted`].

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::diag::{Code, PolicyDiagnostic};
use super::model::{RawPolicy, RawSandbox, RawSettings, parse};
use super::policy::{
    Action, Exception, Ignored, LogArgs, OutboundRule, Policy, Rule, RuleAction, SandboxPolicy,
    SecretPattern, ServerDef, Settings, Source, SourceId, SourceKind, Span, Spanned,
};
use super::validate::{Decoder, Vars, did_you_mean};

/// Why a restricted file's part was ignored.
pub const UNTRUSTED_WHY: &str = "the project file is not trusted: only its tightening parts apply (run `mcpwall trust` after reviewing it)";

/// Whether a file may loosen the policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Restricted {
    /// Everything in it applies.
    No,
    /// Only tightening parts apply: deny rules, outbound deny/redact rules (placed after every
    /// trusted outbound rule), extra secret patterns (their regexes on a smaller budget; one
    /// named like a built-in detector, which would replace it, is ignored), and
    /// settings that tighten. Allow rules (inbound and outbound), the file's own outbound
    /// `log_only` rules, `disable`, `exceptions`, `secrets.disable`, `default_action: allow`, a larger `max_frame_bytes`, a looser
    /// `rate_limit`, `circuit_breaker`, `pinning` or `poison_scan`, `hide_denied_tools: false`,
    /// `log_dir`, `log_args: full` and a quieter `log_level` are ignored.
    Yes,
}

/// Whether `name` is a built-in secret detector's: a pattern with that name replaces it.
fn is_builtin_detector(name: &str) -> bool {
    crate::secrets::builtin_specs()
        .iter()
        .any(|s| s.name == name)
}

/// The built-in file a name in `extends` refers to.
///
/// - `default`, `strict`, ... (no slash): `rules/<name>.yml`
/// - `profiles/<name>`: `profiles/<name>.yml`
/// - `servers/<name>`: `servers/<name>.yml`
///
/// `.yaml` is accepted as the file extension too. Only embedded files resolve: a path on
/// disk can never be extended.
pub fn resolve_extends(name: &str) -> Option<&'static str> {
    resolve_in(crate::builtin::FILES, name)
}

/// A table of embedded files: `(path, contents)`, like [`crate::builtin::FILES`].
pub type Packs = &'static [(&'static str, &'static str)];

fn resolve_in(packs: Packs, name: &str) -> Option<&'static str> {
    let base = if name.contains('/') {
        let (dir, _) = name.split_once('/')?;
        if !matches!(dir, "profiles" | "servers" | "rules") {
            return None;
        }
        name.to_string()
    } else {
        format!("rules/{name}")
    };
    if name.contains("..") || name.ends_with(".yml") || name.ends_with(".yaml") {
        return None;
    }
    for ext in ["yml", "yaml"] {
        let path = format!("{base}.{ext}");
        if let Some((p, _)) = packs.iter().find(|(p, _)| *p == path) {
            return Some(p);
        }
    }
    None
}

/// Every name `extends` accepts, for "did you mean" and help texts.
pub fn extends_names() -> Vec<String> {
    names_in(crate::builtin::FILES)
}

fn names_in(packs: Packs) -> Vec<String> {
    packs
        .iter()
        .filter_map(|(p, _)| {
            let stem = p.strip_suffix(".yml").or_else(|| p.strip_suffix(".yaml"))?;
            Some(match stem.strip_prefix("rules/") {
                Some(n) if !n.contains('/') => n.to_string(),
                _ => stem.to_string(),
            })
        })
        .collect()
}

/// One file to load, as found by `load`.
pub(crate) struct FileInput {
    pub(crate) name: String,
    pub(crate) kind: SourceKind,
    pub(crate) text: Arc<str>,
}

/// Collects files, diagnostics and the merged parts.
#[derive(Clone)]
pub(crate) struct Merger {
    /// Why the trust store could not be read, when that is why the project file counts
    /// as untrusted: the reason given for what it ignores names the store.
    trust_problem: Option<String>,
    vars: Vars,
    /// Where `extends` names are looked up (the embedded files; a fixed table in tests).
    packs: Packs,
    sources: Vec<Source>,
    diags: Vec<PolicyDiagnostic>,
    /// Packs already included (by embedded path), and whether that inclusion was restricted.
    included: HashMap<&'static str, Restricted>,
    rules: Vec<Rule>,
    outbound_rules: Vec<OutboundRule>,
    secret_patterns: Vec<SecretPattern>,
    disabled_secrets: Vec<Spanned<String>>,
    ignored: Vec<Ignored>,
    servers: Vec<ServerDef>,
    /// `(source name, rule name)` of every rule taken, so a pack included a second time
    /// does not repeat the rules its first inclusion already contributed.
    taken: HashSet<(String, String)>,
    /// Index into `ignored` and key of each ignored rule: a rule a restricted inclusion of a
    /// pack ignored, but a later trusted inclusion applied, is not reported as ignored.
    ignored_rules: Vec<(usize, (String, String))>,
    /// Settings in visit order, with whether each file was restricted.
    settings: Vec<(RawSettings, Restricted)>,
    /// `sandbox:` sections in visit order, with whether each file was restricted.
    sandboxes: Vec<(RawSandbox, Restricted)>,
    /// Outbound deny/redact rules of restricted inclusions, with their keys: they go after
    /// every trusted outbound rule (one a trusted inclusion also took is dropped).
    restricted_outbound: Vec<((String, String), OutboundRule)>,
    /// Inbound `ask` rules of restricted inclusions, with their keys: they go after the
    /// last deny rule (see [`Merger::place_restricted_asks`]).
    restricted_asks: Vec<((String, String), Rule)>,
    /// Rule names of each pack decoded, and the packs it extends (to validate `disable`).
    pack_rules: HashMap<&'static str, (Vec<String>, Vec<&'static str>)>,
    /// `disable` entries of trusted files, with the packs each file extends.
    disables: Vec<(Spanned<String>, Vec<&'static str>)>,
    /// `exceptions` entries of trusted files, with the packs each file extends.
    exceptions: Vec<(Exception, Vec<&'static str>)>,
    /// Leave out the embedded packs' `examples` (see [`Merger::without_pack_examples`]).
    lean: bool,
}

impl Merger {
    pub(crate) fn new(vars: Vars, packs: Packs) -> Merger {
        Merger {
            vars,
            packs,
            sources: Vec::new(),
            diags: Vec::new(),
            included: HashMap::new(),
            rules: Vec::new(),
            outbound_rules: Vec::new(),
            secret_patterns: Vec::new(),
            disabled_secrets: Vec::new(),
            ignored: Vec::new(),
            servers: Vec::new(),
            taken: HashSet::new(),
            ignored_rules: Vec::new(),
            settings: Vec::new(),
            sandboxes: Vec::new(),
            restricted_outbound: Vec::new(),
            restricted_asks: Vec::new(),
            pack_rules: HashMap::new(),
            disables: Vec::new(),
            exceptions: Vec::new(),
            trust_problem: None,
            lean: false,
        }
    }

    /// Embedded packs come without their rules' `examples`, which only the tests and
    /// `explain-policy` read (a user file's are still checked).
    pub(crate) fn without_pack_examples(mut self) -> Merger {
        self.lean = true;
        self
    }

    /// A problem with no place in a file (an unreadable file).
    pub(crate) fn push_diagnostic(&mut self, d: PolicyDiagnostic) {
        self.diags.push(d);
    }

    /// Load one top-level file and, recursively, what it extends.
    pub(crate) fn add_file(&mut self, file: FileInput, restricted: Restricted) {
        let mut stack = Vec::new();
        let (rules, outbound) = self.add(file, restricted, &mut stack);
        self.rules.extend(rules);
        self.outbound_rules.extend(outbound);
    }

    /// Load a built-in pack as a top-level file (no configuration anywhere).
    pub(crate) fn add_builtin(&mut self, path: &'static str) {
        // Included in full already: nothing to add. Included only by a restricted file: the
        // rest of it applies now (rules already taken are not repeated).
        if self.included.insert(path, Restricted::No) == Some(Restricted::No) {
            return;
        }
        let text = self.pack_text(path);
        let mut stack = vec![path];
        let (rules, outbound) = self.add(
            FileInput {
                name: format!("builtin:{path}"),
                kind: SourceKind::Builtin,
                text: Arc::from(text),
            },
            Restricted::No,
            &mut stack,
        );
        self.rules.extend(rules);
        self.outbound_rules.extend(outbound);
    }

    /// Decode one file and what it extends; its rules, layered, in evaluation order.
    fn add(
        &mut self,
        file: FileInput,
        restricted: Restricted,
        stack: &mut Vec<&'static str>,
    ) -> (Vec<Rule>, Vec<OutboundRule>) {
        let id = SourceId(self.sources.len() as u32);
        self.sources.push(Source {
            name: file.name,
            kind: file.kind,
            text: file.text,
        });
        let source = self.sources[id.0 as usize].clone();
        // An embedded pack's tree was parsed at build time; it is used only if it was
        // parsed from exactly this text.
        let pack = (source.kind == SourceKind::Builtin)
            .then(|| source.name.strip_prefix("builtin:"))
            .flatten();
        let handed_over = pack
            .filter(|p| self.lean && *p == super::DEFAULT_PACK)
            .and_then(|_| super::take_decoded_default_pack(&source.text));
        let prebuilt = handed_over.or_else(|| {
            pack.and_then(if self.lean {
                crate::builtin::lean_tree
            } else {
                crate::builtin::tree
            })
            .and_then(|blob| super::yaml_tree::decode(&source.text, blob))
        });
        let parsed = match prebuilt {
            Some(root) => Ok(root),
            None => parse(&source, id),
        };
        let raw = match parsed {
            Ok(root) => {
                let mut decoder = Decoder::new(&source, id, &self.vars);
                let raw = decoder.policy(&root);
                self.diags.append(&mut decoder.diags);
                raw
            }
            Err(d) => {
                self.diags.push(*d);
                return (Vec::new(), Vec::new());
            }
        };
        let RawPolicy {
            extends,
            settings,
            rules,
            outbound_rules,
            secret_patterns,
            disabled_secrets,
            disable,
            exceptions,
            servers,
            sandbox,
        } = raw;
        self.sandboxes.push((sandbox, restricted));
        self.take_servers(servers, restricted);
        let this_pack = stack
            .last()
            .copied()
            .filter(|_| source.kind == SourceKind::Builtin);
        if let Some(path) = this_pack {
            let names = rules
                .iter()
                .map(|r| r.name.value.clone())
                .chain(outbound_rules.iter().map(|r| r.name.value.clone()))
                .collect();
            self.pack_rules.insert(path, (names, Vec::new()));
        }
        let (own_in, own_out) = self.take_rules(&source, rules, outbound_rules, restricted);
        let mut packs_in: Vec<Rule> = Vec::new();
        let mut packs_out: Vec<OutboundRule> = Vec::new();
        let mut extended: Vec<&'static str> = Vec::new();
        for pattern in secret_patterns {
            if restricted == Restricted::Yes && is_builtin_detector(&pattern.name.value) {
                self.ignore(
                    pattern.name.span,
                    format!(
                        "secret pattern `{}` (it would replace the built-in detector)",
                        pattern.name.value
                    ),
                    UNTRUSTED_WHY,
                );
                continue;
            }
            self.secret_patterns.push(pattern);
        }
        for d in disabled_secrets {
            if restricted == Restricted::Yes {
                self.ignore(
                    d.span,
                    format!("`secrets.disable: {}`", d.value),
                    UNTRUSTED_WHY,
                );
            } else {
                self.disabled_secrets.push(d);
            }
        }
        self.settings.push((settings, restricted));
        for name in extends {
            let Some(path) = resolve_in(self.packs, &name.value) else {
                self.unknown_pack(&source, &name);
                continue;
            };
            extended.push(path);
            if stack.contains(&path) {
                let chain: Vec<&str> = stack.iter().copied().chain([path]).collect();
                self.diags.push(
                    PolicyDiagnostic::at(
                        Code::ExtendsCycle,
                        format!("`extends` loops: {}", chain.join(" -> ")),
                        &source,
                        name.span,
                        "extends a pack that is already being loaded",
                    )
                    .with_help("remove this entry; a pack cannot include itself"),
                );
                continue;
            }
            // A pack is included once; but a pack first pulled in by a restricted file is
            // included again, in full, where a trusted file reaches it (its rules already
            // present from the restricted inclusion are not repeated).
            match self.included.get(path) {
                Some(Restricted::No) => continue,
                Some(Restricted::Yes) if restricted == Restricted::Yes => continue,
                _ => {}
            }
            self.included.insert(path, restricted);
            stack.push(path);
            let text = self.pack_text(path);
            let (i, o) = self.add(
                FileInput {
                    name: format!("builtin:{path}"),
                    kind: SourceKind::Builtin,
                    text: Arc::from(text),
                },
                restricted,
                stack,
            );
            packs_in.extend(i);
            packs_out.extend(o);
            stack.pop();
        }
        if let Some(path) = this_pack
            && let Some(entry) = self.pack_rules.get_mut(path)
        {
            entry.1 = extended.clone();
        }
        for name in disable {
            if restricted == Restricted::Yes {
                self.ignore(
                    name.span,
                    format!("`disable: {}`", name.value),
                    UNTRUSTED_WHY,
                );
            } else {
                self.disables.push((name, extended.clone()));
            }
        }
        // An exception loosens: an untrusted file's is listed, never applied.
        for exception in exceptions {
            if restricted == Restricted::Yes {
                self.ignore(
                    exception.conditions.span,
                    format!("exception to rule `{}`", exception.rule.value),
                    UNTRUSTED_WHY,
                );
            } else {
                self.exceptions.push((exception, extended.clone()));
            }
        }
        // Layering: the packs' denies, the file's own rules, the packs' allows.
        let (pack_allow, pack_deny): (Vec<Rule>, Vec<Rule>) = packs_in
            .into_iter()
            .partition(|r| r.action == Action::Allow);
        let (out_allow, out_rest): (Vec<OutboundRule>, Vec<OutboundRule>) = packs_out
            .into_iter()
            .partition(|r| r.action == RuleAction::Allow);
        let rules = pack_deny
            .into_iter()
            .chain(own_in)
            .chain(pack_allow)
            .collect();
        let outbound = out_rest
            .into_iter()
            .chain(own_out)
            .chain(out_allow)
            .collect();
        (rules, outbound)
    }

    fn unknown_pack(&mut self, source: &Source, name: &Spanned<String>) {
        let names = names_in(self.packs);
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let label = match did_you_mean(&name.value, &refs) {
            Some(near) => format!("did you mean `{near}`?"),
            None => "no built-in pack by this name".to_string(),
        };
        self.diags.push(
            PolicyDiagnostic::at(
                Code::UnknownExtends,
                format!(
                    "`extends` names `{}`, which is not a built-in pack",
                    name.value
                ),
                source,
                name.span,
                label,
            )
            .with_help(format!(
                "only built-in packs can be extended: {}",
                names.join(", ")
            )),
        );
    }

    /// Layer a `servers:` entry's packs on everything merged so far, as a file extending
    /// them would: their deny (and ask) rules before every rule, their allow rules after
    /// every rule; their settings only where no file set the key. A pack the policy
    /// already includes adds nothing.
    fn add_server_packs(&mut self, server: &ServerDef) {
        let mut deny_in = Vec::new();
        let mut allow_in = Vec::new();
        let mut deny_out = Vec::new();
        let mut allow_out = Vec::new();
        for name in &server.extends {
            let Some(path) = resolve_in(self.packs, &name.value) else {
                continue; // reported with the entry
            };
            if self.included.insert(path, Restricted::No) == Some(Restricted::No) {
                continue;
            }
            let text = self.pack_text(path);
            let mut stack = vec![path];
            let (rules, outbound) = self.add(
                FileInput {
                    name: format!("builtin:{path}"),
                    kind: SourceKind::Builtin,
                    text: Arc::from(text),
                },
                Restricted::No,
                &mut stack,
            );
            for rule in rules {
                match rule.action {
                    Action::Allow => allow_in.push(rule),
                    _ => deny_in.push(rule),
                }
            }
            for rule in outbound {
                match rule.action {
                    RuleAction::Allow => allow_out.push(rule),
                    _ => deny_out.push(rule),
                }
            }
        }
        self.rules.splice(0..0, deny_in);
        self.rules.extend(allow_in);
        self.outbound_rules.splice(0..0, deny_out);
        self.outbound_rules.extend(allow_out);
    }

    /// Finish, and give each `servers:` entry that extends packs its own policy.
    pub(crate) fn finish(self) -> Result<Policy, super::PolicyError> {
        let base = self
            .servers
            .iter()
            .any(|s| !s.extends.is_empty())
            .then(|| self.clone());
        let mut policy = self.finish_one()?;
        let Some(base) = base else {
            return Ok(policy);
        };
        let mut diags = Vec::new();
        // Entries extending the same packs share one policy (and so, in `serve`, the
        // compiled programs).
        let mut merged: Vec<(Vec<String>, Arc<Policy>)> = Vec::new();
        for server in &mut policy.servers {
            if server.extends.is_empty() {
                continue;
            }
            let packs: Vec<String> = server.pack_names().map(str::to_string).collect();
            if let Some((_, own)) = merged.iter().find(|(p, _)| *p == packs) {
                server.policy = Some(own.clone());
                continue;
            }
            let mut merger = base.clone();
            merger.add_server_packs(server);
            match merger.finish_one() {
                Ok(mut own) => {
                    own.servers.clear();
                    let own = Arc::new(own);
                    merged.push((packs, own.clone()));
                    server.policy = Some(own);
                }
                Err(e) => diags.extend(e.diagnostics),
            }
        }
        if !diags.is_empty() {
            return Err(super::PolicyError::new(diags));
        }
        Ok(policy)
    }

    fn pack_text(&self, path: &str) -> &'static str {
        self.packs
            .iter()
            .find(|(p, _)| *p == path)
            .map(|(_, t)| *t)
            .unwrap_or("")
    }

    /// A file's own rules that apply, in file order. A restricted inclusion's outbound
    /// deny/redact rules are set aside for the end of the outbound list.
    fn take_rules(
        &mut self,
        source: &Source,
        rules: Vec<Rule>,
        outbound: Vec<OutboundRule>,
        r: Restricted,
    ) -> (Vec<Rule>, Vec<OutboundRule>) {
        let mut taken_in = Vec::new();
        let mut taken_out = Vec::new();
        for mut rule in rules {
            let key = (source.name.clone(), rule.name.value.clone());
            if self.taken.contains(&key) {
                continue;
            }
            if r == Restricted::Yes && rule.action == Action::Allow {
                self.ignore_rule(rule.span, format!("allow rule `{}`", key.1), key);
            } else if r == Restricted::Yes && rule.action == Action::Ask {
                if source.kind != SourceKind::Builtin {
                    self.drop_message(&mut rule.message, rule.span, &key.1);
                }
                if !self.restricted_asks.iter().any(|(k, _)| *k == key) {
                    self.restricted_asks.push((key, rule));
                }
            } else {
                if r == Restricted::Yes && source.kind != SourceKind::Builtin {
                    self.drop_message(&mut rule.message, rule.span, &key.1);
                }
                self.taken.insert(key);
                taken_in.push(rule);
            }
        }
        for rule in outbound {
            let key = (source.name.clone(), rule.name.value.clone());
            if self.taken.contains(&key) {
                continue;
            }
            if r == Restricted::No {
                self.taken.insert(key);
                taken_out.push(rule);
                continue;
            }
            match rule.action {
                RuleAction::Allow => {
                    self.ignore_rule(rule.span, format!("outbound allow rule `{}`", key.1), key);
                }
                // A built-in pack's log_only only records; an untrusted file's could make
                // the audit log say what the file's author chose.
                RuleAction::LogOnly if source.kind != SourceKind::Builtin => {
                    self.ignore_rule(
                        rule.span,
                        format!("outbound log_only rule `{}`", key.1),
                        key,
                    );
                }
                _ => {
                    if !self.restricted_outbound.iter().any(|(k, _)| *k == key) {
                        let mut rule = rule;
                        rule.additive = true;
                        if source.kind != SourceKind::Builtin {
                            self.drop_message(&mut rule.message, rule.span, &key.1);
                        }
                        self.restricted_outbound.push((key, rule));
                    }
                }
            }
        }
        (taken_in, taken_out)
    }

    /// An untrusted rule's `message` is what the agent reads when the rule refuses: text
    /// the file's author wrote, for a model they may be steering. It is dropped (the
    /// refusal names the rule instead) and listed.
    fn drop_message(&mut self, message: &mut Option<String>, span: Span, rule: &str) {
        if message.take().is_some() {
            self.ignore(
                span,
                format!("the `message` of rule `{rule}`"),
                UNTRUSTED_WHY,
            );
        }
    }

    fn ignore_rule(&mut self, span: Span, what: String, key: (String, String)) {
        self.ignored_rules.push((self.ignored.len(), key));
        self.ignore(span, what, UNTRUSTED_WHY);
    }

    fn ignore(&mut self, span: Span, what: String, why: &str) {
        let why = match &self.trust_problem {
            Some(problem) if why == UNTRUSTED_WHY => format!(
                "the project file counts as untrusted because the trust store cannot be read: {problem}; only its tightening parts apply"
            ),
            _ => why.to_string(),
        };
        self.ignored.push(Ignored { span, what, why });
    }

    /// The trust store could not be read (`problem` says why and what to do): the
    /// project file is untrusted for that reason, and what it ignores says so.
    pub(crate) fn set_trust_problem(&mut self, problem: String) {
        self.trust_problem = Some(problem);
    }

    /// Finish: settings, cross-file checks, and either the policy or every problem.
    fn finish_one(mut self) -> Result<Policy, super::PolicyError> {
        let settings = self.merge_settings();
        let sandbox = self.merge_sandbox();
        // Restricted outbound rules after every trusted one; a rule a trusted inclusion of
        // the same pack also took applies there, in its trusted place.
        for (key, rule) in std::mem::take(&mut self.restricted_outbound) {
            if !self.taken.contains(&key) {
                self.outbound_rules.push(rule);
            }
        }
        self.place_restricted_asks(settings.default_action);
        self.apply_disables();
        let exceptions = self.check_exceptions();
        self.check_duplicates();
        let applied: HashSet<usize> = self
            .ignored_rules
            .iter()
            .filter(|(_, key)| self.taken.contains(key))
            .map(|(i, _)| *i)
            .collect();
        let mut index = 0;
        self.ignored.retain(|_| {
            index += 1;
            !applied.contains(&(index - 1))
        });
        if !self.diags.is_empty() {
            // Read like the files: by file, then by position.
            self.diags.sort_by_key(|d| {
                let file = d.location.as_ref().map(|l| l.0.clone());
                let at = d.labels.first().map(|l| l.offset()).unwrap_or(0);
                let id = self
                    .sources
                    .iter()
                    .position(|s| Some(&s.name) == file.as_ref());
                (id, at)
            });
            return Err(super::PolicyError::new(self.diags));
        }
        Ok(Policy {
            sources: self.sources,
            settings,
            rules: self.rules,
            outbound_rules: self.outbound_rules,
            secret_patterns: self.secret_patterns,
            disabled_secrets: self.disabled_secrets,
            ignored: self.ignored,
            exceptions,
            servers: self.servers,
            sandbox,
        })
    }

    /// The `sandbox:` section of one trusted file, as the merge would make it alone.
    pub(crate) fn sandbox_alone(layer: RawSandbox) -> SandboxPolicy {
        let mut merger = Merger::new(
            super::validate::Vars {
                home: Default::default(),
                project_dir: Default::default(),
                cwd: Default::default(),
            },
            &[],
        );
        merger.sandboxes.push((layer, Restricted::No));
        merger.merge_sandbox()
    }

    /// The `sandbox:` sections, merged. Trusted files: the first to set a switch wins
    /// (the project before the user, a file before the packs it extends), and every deny
    /// and allow list adds up. A restricted file may only tighten: it can turn the
    /// sandbox, `required` and `confine_writes` on, make `network` stricter and add to
    /// the deny lists; its `off`s and `allow_*` entries are ignored and listed.
    fn merge_sandbox(&mut self) -> SandboxPolicy {
        let layers = std::mem::take(&mut self.sandboxes);
        let mut s = SandboxPolicy::default();
        let (mut enabled, mut required, mut confine, mut network) = (None, None, None, None);
        for (layer, r) in &layers {
            s.deny_read.extend(layer.deny_read.iter().cloned());
            s.deny_write.extend(layer.deny_write.iter().cloned());
            if *r == Restricted::Yes {
                for entry in layer.allow_read.iter().chain(&layer.allow_write) {
                    self.ignore(
                        entry.span,
                        format!("`sandbox` exception `{}`", entry.value),
                        UNTRUSTED_WHY,
                    );
                }
                continue;
            }
            s.allow_read.extend(layer.allow_read.iter().cloned());
            s.allow_write.extend(layer.allow_write.iter().cloned());
            enabled = enabled.or(layer.enabled.map(|v| v.value));
            required = required.or(layer.required.map(|v| v.value));
            confine = confine.or(layer.confine_writes.map(|v| v.value));
            network = network.or(layer.network.map(|v| v.value));
        }
        s.enabled = enabled.unwrap_or(false);
        s.required = required.unwrap_or(false);
        s.confine_writes = confine.unwrap_or(false);
        s.network = network.unwrap_or_default();
        for (layer, r) in &layers {
            if *r == Restricted::No {
                continue;
            }
            for (switch, value, what) in [
                (&mut s.enabled, layer.enabled, "`sandbox: off`"),
                (&mut s.required, layer.required, "`sandbox.required: false`"),
                (
                    &mut s.confine_writes,
                    layer.confine_writes,
                    "`sandbox.confine_writes: false`",
                ),
            ] {
                match value {
                    Some(v) if v.value => *switch = true,
                    Some(_) if !*switch => {}
                    Some(v) => self.ignore(v.span, what.into(), UNTRUSTED_WHY),
                    None => {}
                }
            }
            if let Some(v) = layer.network {
                if v.value >= s.network {
                    s.network = v.value;
                } else {
                    self.ignore(v.span, "a looser `sandbox.network`".into(), UNTRUSTED_WHY);
                }
            }
        }
        s
    }

    /// A restricted file's servers are ignored: an entry runs a command. A name a later
    /// file defines again replaces the earlier definition (a file beats what it extends
    /// and the user file comes before the project file).
    fn take_servers(&mut self, servers: Vec<ServerDef>, restricted: Restricted) {
        for server in servers {
            if restricted == Restricted::Yes {
                self.ignore(
                    server.name.span,
                    format!("server `{}` (it would run a command)", server.name.value),
                    UNTRUSTED_WHY,
                );
                continue;
            }
            for name in &server.extends {
                if resolve_in(self.packs, &name.value).is_none() {
                    let source = self.sources[name.span.source.0 as usize].clone();
                    self.unknown_pack(&source, name);
                }
            }
            self.servers.retain(|s| s.name.value != server.name.value);
            self.servers.push(server);
        }
    }

    /// An untrusted file's `ask` rules may only tighten: they go after the last rule that
    /// denies, so an ask never stands in for a deny that would have decided the call, and
    /// can only turn what a later allow rule or `default_action: allow` would let through
    /// into a question (under `default_action: ask` an unmatched call is asked about
    /// anyway). Under `default_action: deny` an unmatched call is refused, and a rule
    /// placed after every deny would loosen that: the rules are then ignored (listed in
    /// `Policy::ignored`).
    fn place_restricted_asks(&mut self, default_action: Action) {
        let asks = std::mem::take(&mut self.restricted_asks);
        let mut placed = Vec::new();
        for (key, rule) in asks {
            if self.taken.contains(&key) {
                continue;
            }
            if default_action != Action::Deny {
                self.taken.insert(key);
                placed.push(rule);
            } else {
                self.ignore(
                    rule.span,
                    format!("ask rule `{}`", key.1),
                    "the project file is not trusted, and under `default_action: deny` its \
                     ask rule could only loosen the policy",
                );
            }
        }
        let at = self
            .rules
            .iter()
            .rposition(|r| r.action == Action::Deny)
            .map_or(0, |i| i + 1);
        self.rules.splice(at..at, placed);
    }

    /// Every rule of the packs `extended` reaches, transitively.
    fn pack_rule_names(&self, extended: &[&'static str]) -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        let mut todo = extended.to_vec();
        let mut seen: HashSet<&'static str> = HashSet::new();
        while let Some(p) = todo.pop() {
            if !seen.insert(p) {
                continue;
            }
            if let Some((rules, sub)) = self.pack_rules.get(p) {
                names.extend(rules.iter().cloned());
                todo.extend(sub.iter().copied());
            }
        }
        names
    }

    /// Check each exception names an inbound deny or ask rule still in the policy (one
    /// lifted by `disable` is gone), and keep those that do.
    fn check_exceptions(&mut self) -> Vec<Exception> {
        let mut kept = Vec::new();
        for (exception, extended) in std::mem::take(&mut self.exceptions) {
            let name = &exception.rule;
            let source = self.sources[name.span.source.0 as usize].clone();
            let problem = match self.rules.iter().find(|r| r.name.value == name.value) {
                Some(rule) if rule.action == Action::Allow => Some((
                    format!("`exceptions` names `{}`, an allow rule", name.value),
                    "an allow rule needs no exception".to_string(),
                    "exceptions narrow the rules that deny or ask; remove this entry".to_string(),
                )),
                Some(_) => None,
                None if self
                    .outbound_rules
                    .iter()
                    .any(|r| r.name.value == name.value) =>
                {
                    Some((
                        format!("`exceptions` names `{}`, an outbound rule", name.value),
                        "exceptions apply to inbound rules".to_string(),
                        "to let a server message through an outbound rule, add an outbound \
                     `allow` rule before it, or lift it with `disable`"
                            .to_string(),
                    ))
                }
                None => {
                    let lifted = self.ignored.iter().any(|i| {
                        i.what == format!("built-in rule `{}`", name.value)
                            && i.why.starts_with("lifted by `disable`")
                    });
                    let mut names = self.pack_rule_names(&extended);
                    names.extend(self.rules.iter().map(|r| r.name.value.clone()));
                    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
                    let (label, help) = if lifted {
                        (
                            "this rule is lifted by `disable`, so it needs no exception"
                                .to_string(),
                            "remove the exception, or take the rule out of `disable` to keep \
                             it with this exception",
                        )
                    } else {
                        (
                            match did_you_mean(&name.value, &refs) {
                                Some(near) => format!("did you mean `{near}`?"),
                                None => "no inbound rule by this name".to_string(),
                            },
                            "name an inbound rule of this policy, usually one of the packs \
                             this file extends; `mcpwall explain-policy` lists them",
                        )
                    };
                    Some((
                        format!(
                            "`exceptions` names `{}`, which is not a rule of this policy",
                            name.value
                        ),
                        label,
                        help.to_string(),
                    ))
                }
            };
            match problem {
                Some((message, label, help)) => self.diags.push(
                    PolicyDiagnostic::at(
                        Code::UnknownException,
                        message,
                        &source,
                        name.span,
                        label,
                    )
                    .with_help(help),
                ),
                None => kept.push(exception),
            }
        }
        kept
    }

    /// Lift the pack rules named in `disable`, after checking each name is a rule of a pack
    /// its file extends.
    fn apply_disables(&mut self) {
        let mut lifted: Vec<Spanned<String>> = Vec::new();
        for (name, extended) in std::mem::take(&mut self.disables) {
            let names = self.pack_rule_names(&extended);
            if names.contains(&name.value) {
                lifted.push(name);
                continue;
            }
            let source = self.sources[name.span.source.0 as usize].clone();
            let refs: Vec<&str> = names.iter().map(String::as_str).collect();
            let label = match did_you_mean(&name.value, &refs) {
                Some(near) => format!("did you mean `{near}`?"),
                None => "no rule by this name in the extended packs".to_string(),
            };
            let help = if extended.is_empty() {
                "`disable` lifts rules of the packs this file extends, and it extends none"
                    .to_string()
            } else {
                format!(
                    "name a rule of the packs this file extends ({}); `mcpwall explain-policy --pack <name>` lists them",
                    extended
                        .iter()
                        .map(|p| p.trim_end_matches(".yml").trim_end_matches(".yaml"))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            };
            self.diags.push(
                PolicyDiagnostic::at(
                    Code::UnknownDisable,
                    format!(
                        "`disable` names `{}`, which is not a rule of an extended pack",
                        name.value
                    ),
                    &source,
                    name.span,
                    label,
                )
                .with_help(help),
            );
        }
        if lifted.is_empty() {
            return;
        }
        let builtin = |span: Span, sources: &[Source]| {
            sources[span.source.0 as usize].kind == SourceKind::Builtin
        };
        let lifted_by = |n: &str| lifted.iter().find(|l| l.value == n).map(|l| l.span);
        let sources = &self.sources;
        let mut removed: Vec<(Span, String, Span)> = Vec::new();
        let mut keep = |name: &Spanned<String>, span: Span| match lifted_by(&name.value) {
            Some(by) if builtin(span, sources) => {
                removed.push((span, name.value.clone(), by));
                false
            }
            _ => true,
        };
        self.rules.retain(|r| keep(&r.name, r.span));
        self.outbound_rules.retain(|r| keep(&r.name, r.span));
        for (span, name, by) in removed {
            let at = format!(
                "{}:{}:{}",
                self.sources[by.source.0 as usize].name, by.line, by.column
            );
            self.ignore(
                span,
                format!("built-in rule `{name}`"),
                &format!("lifted by `disable` at {at}"),
            );
        }
    }

    /// Names unique across the merged policy. Duplicates inside one file were reported by
    /// the decoder; here only pairs from different files remain.
    fn check_duplicates(&mut self) {
        let mut seen: HashMap<String, Span> = HashMap::new();
        let names: Vec<Spanned<String>> = self
            .rules
            .iter()
            .map(|r| r.name.clone())
            .chain(self.outbound_rules.iter().map(|r| r.name.clone()))
            .collect();
        for name in names {
            match seen.get(&name.value) {
                Some(first) if first.source != name.span.source => {
                    let first_at = format!(
                        "{}:{}:{}",
                        self.sources[first.source.0 as usize].name, first.line, first.column
                    );
                    let source = self.sources[name.span.source.0 as usize].clone();
                    self.diags.push(
                        PolicyDiagnostic::at(
                            Code::DuplicateRule,
                            format!("rule `{}` is also defined in {first_at}", name.value),
                            &source,
                            name.span,
                            "second rule with this name",
                        )
                        .with_help(format!(
                            "rule names are unique across all policy files: rename this rule \
                             (the first one is at {first_at})"
                        )),
                    );
                }
                Some(_) => {}
                None => {
                    seen.insert(name.value.clone(), name.span);
                }
            }
        }
    }

    fn merge_settings(&mut self) -> Settings {
        let mut s = Settings::default();
        let layers = std::mem::take(&mut self.settings);
        // Trusted files: the first one to set a key wins (visit order = precedence).
        let mut set = RawSettings::default();
        for (layer, r) in &layers {
            if *r == Restricted::No {
                fill(&mut set, layer);
            }
        }
        if let Some(v) = &set.log_dir {
            s.log_dir = Some(v.value.clone());
        }
        if let Some(v) = set.log_level {
            s.log_level = v.value;
        }
        if let Some(v) = set.log_args {
            s.log_args = v.value;
        }
        if let Some(v) = set.default_action {
            s.default_action = v.value;
        }
        if let Some(v) = set.rate_limit {
            s.rate_limit = Some(v.value);
        }
        if let Some(v) = set.max_frame_bytes {
            s.max_frame_bytes = v.value;
        }
        if let Some(v) = set.redact_marker {
            s.redact_marker = v.value;
        }
        if let Some(v) = set.hide_denied_tools {
            s.hide_denied_tools = v.value;
        }
        if let Some(v) = set.pinning {
            s.pinning = v.value;
        }
        if let Some(v) = set.poison_scan {
            s.poison_scan = v.value;
        }
        if let Some(v) = set.circuit_breaker {
            s.circuit_breaker = Some(v.value);
        }
        if let Some(v) = set.backups {
            s.backups = v.value;
        }
        if let Some(v) = set.log_retention {
            s.log_retention = v.value;
        }
        if let Some(v) = set.ask_timeout_seconds {
            s.ask_timeout_seconds = v.value;
        }
        if let Some(v) = set.gateway {
            s.gateway = v.value;
        }
        if let Some(v) = set.oauth {
            s.oauth = Some(v.value);
        }
        if let Some(v) = set.shared_state {
            s.shared_state = Some(v.value);
        }
        if let Some(v) = set.log_shipping {
            s.log_shipping = Some(v.value);
        }
        // Restricted files, in reverse so the first one (highest precedence) is applied last:
        // each key applies only where it tightens what the trusted files decided.
        for (layer, r) in layers.iter().rev() {
            if *r == Restricted::Yes {
                self.tighten(&mut s, layer);
            }
        }
        s
    }

    fn tighten(&mut self, s: &mut Settings, layer: &RawSettings) {
        if let Some(v) = &layer.log_dir {
            self.ignore(v.span, "`log_dir`".into(), UNTRUSTED_WHY);
        }
        if let Some(v) = &layer.backups {
            // Fewer or shorter-lived backups would delete the user's copies of their files.
            self.ignore(v.span, "`backups`".into(), UNTRUSTED_WHY);
        }
        if let Some(v) = &layer.gateway {
            // The gateway's capacity is the operator's: a repository could otherwise
            // shrink it to nothing for everyone served.
            self.ignore(v.span, "`gateway`".into(), UNTRUSTED_WHY);
        }
        if let Some(v) = &layer.oauth {
            // Who may connect is the operator's: a repository could otherwise name an
            // identity provider it controls.
            self.ignore(v.span, "`oauth`".into(), UNTRUSTED_WHY);
        }
        if let Some(v) = &layer.shared_state {
            // Where the fleet keeps its limits, and whether it may run without them, is
            // the operator's: a repository could point it at a store it controls.
            self.ignore(v.span, "`shared_state`".into(), UNTRUSTED_WHY);
        }
        if let Some(v) = &layer.log_shipping {
            // A repository could otherwise send the audit log to a host of its choosing,
            // or stop the copy the user relies on.
            self.ignore(v.span, "`log_shipping`".into(), UNTRUSTED_WHY);
        }
        if let Some(v) = &layer.log_retention {
            // A shorter retention would delete the audit trail.
            self.ignore(v.span, "`log_retention`".into(), UNTRUSTED_WHY);
        }
        if let Some(v) = layer.log_level {
            // A quieter log could hide the warnings about what this very file tried.
            if v.value >= s.log_level {
                s.log_level = v.value;
            } else {
                self.ignore(v.span, "a quieter `log_level`".into(), UNTRUSTED_WHY);
            }
        }
        if let Some(v) = layer.log_args {
            if v.value == LogArgs::None {
                s.log_args = LogArgs::None;
            } else {
                self.ignore(v.span, "`log_args: full`".into(), UNTRUSTED_WHY);
            }
        }
        if let Some(v) = layer.default_action {
            // allow < ask < deny: an untrusted file may move it up, never down.
            if v.value != Action::Allow && v.value.strictness() >= s.default_action.strictness() {
                s.default_action = v.value;
            } else {
                let what = match v.value {
                    Action::Allow => "`default_action: allow`",
                    _ => "`default_action: ask` under a stricter default",
                };
                self.ignore(v.span, what.into(), UNTRUSTED_WHY);
            }
        }
        if let Some(v) = layer.ask_timeout_seconds {
            // A shorter wait refuses sooner (fail closed); a longer one keeps calls open.
            if v.value <= s.ask_timeout_seconds {
                s.ask_timeout_seconds = v.value;
            } else {
                self.ignore(
                    v.span,
                    "a longer `ask_timeout_seconds`".into(),
                    UNTRUSTED_WHY,
                );
            }
        }
        if let Some(v) = layer.rate_limit {
            let stricter = match s.rate_limit {
                None => true,
                // fewer calls per second: a/b <= c/d  <=>  a*d <= c*b
                Some(cur) => {
                    u128::from(v.value.max_calls) * u128::from(cur.window_seconds)
                        <= u128::from(cur.max_calls) * u128::from(v.value.window_seconds)
                }
            };
            if stricter {
                s.rate_limit = Some(v.value);
            } else {
                self.ignore(v.span, "a looser `rate_limit`".into(), UNTRUSTED_WHY);
            }
        }
        if let Some(v) = layer.max_frame_bytes {
            if v.value <= s.max_frame_bytes {
                s.max_frame_bytes = v.value;
            } else {
                self.ignore(v.span, "a larger `max_frame_bytes`".into(), UNTRUSTED_WHY);
            }
        }
        if let Some(v) = layer.redact_marker {
            // Cosmetic: it changes the replacement text, not what is redacted.
            s.redact_marker = v.value;
        }
        if let Some(v) = layer.hide_denied_tools {
            if v.value {
                s.hide_denied_tools = true;
            } else {
                self.ignore(v.span, "`hide_denied_tools: false`".into(), UNTRUSTED_WHY);
            }
        }
        // enforce > warn > off: the enums are declared strictest first.
        if let Some(v) = layer.pinning {
            if (v.value as u8) <= (s.pinning as u8) {
                s.pinning = v.value;
            } else {
                self.ignore(v.span, "a looser `pinning`".into(), UNTRUSTED_WHY);
            }
        }
        if let Some(v) = layer.poison_scan {
            if (v.value as u8) <= (s.poison_scan as u8) {
                s.poison_scan = v.value;
            } else {
                self.ignore(v.span, "a looser `poison_scan`".into(), UNTRUSTED_WHY);
            }
        }
        if let Some(v) = layer.circuit_breaker {
            let stricter = match s.circuit_breaker {
                None => true,
                // fewer violations tolerated per second: a/b <= c/d  <=>  a*d <= c*b
                Some(cur) => {
                    u128::from(v.value.max_violations) * u128::from(cur.window_seconds)
                        <= u128::from(cur.max_violations) * u128::from(v.value.window_seconds)
                }
            };
            if stricter {
                s.circuit_breaker = Some(v.value);
            } else {
                self.ignore(v.span, "a looser `circuit_breaker`".into(), UNTRUSTED_WHY);
            }
        }
    }
}

/// Set every key of `into` that is unset and set in `from`.
fn fill(into: &mut RawSettings, from: &RawSettings) {
    fn f<T: Clone>(a: &mut Option<T>, b: &Option<T>) {
        if a.is_none() {
            a.clone_from(b);
        }
    }
    f(&mut into.log_dir, &from.log_dir);
    f(&mut into.log_level, &from.log_level);
    f(&mut into.log_args, &from.log_args);
    f(&mut into.default_action, &from.default_action);
    f(&mut into.rate_limit, &from.rate_limit);
    f(&mut into.max_frame_bytes, &from.max_frame_bytes);
    f(&mut into.redact_marker, &from.redact_marker);
    f(&mut into.hide_denied_tools, &from.hide_denied_tools);
    f(&mut into.pinning, &from.pinning);
    f(&mut into.poison_scan, &from.poison_scan);
    f(&mut into.circuit_breaker, &from.circuit_breaker);
    f(&mut into.backups, &from.backups);
    f(&mut into.log_retention, &from.log_retention);
    f(&mut into.ask_timeout_seconds, &from.ask_timeout_seconds);
    f(&mut into.gateway, &from.gateway);
    f(&mut into.oauth, &from.oauth);
    f(&mut into.shared_state, &from.shared_state);
    f(&mut into.log_shipping, &from.log_shipping);
}
