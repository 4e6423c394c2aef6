//! What each identity is judged by on each server: rules can name identities
//! (`match: {identity: "ci-*"}`) and a `servers:` entry can add packs of its own, so the
//! gateway compiles one [`Program`] per distinct (server policy, identity) pair and one
//! tool [`Guard`] per (server, identity), once at start. Tool lists are then filtered per
//! identity by the guard as they are on stdio (a tool a rule denies for that identity
//! whatever its arguments is withheld from its `tools/list`), and no identity check runs
//! per message.
//!
//! The programs' rule tables differ, so their rule ids and redaction labels differ: the
//! listener keeps one table of names ([`PolicyNames`]) for the audit writer, and each
//! judge rewrites its events' ids into it ([`Judge::audit_event`]).

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use crate::audit::{AuditEvent, Names, RuleRef};
use crate::config::policy::Policy;
use crate::guard::Guard;
use crate::guard::pins::ServerIdentity;
use crate::paths::PathEnv;
use crate::program::Program;
use crate::verdict::RuleId;

/// The program and guard one identity's sessions on one server use.
pub struct Judge {
    pub program: Arc<Program>,
    pub guard: Option<Arc<Guard>>,
    /// `settings.rate_limit`, counted across all of this identity's sessions.
    pub rate: Option<crate::session::SharedRateLimit>,
    /// Its turn at judging a large line off the I/O thread, shared by all its sessions.
    pub share: crate::driver::judging::Share,
    /// This program's ids → the listener's [`PolicyNames`] ids.
    ids: NameIds,
}

/// Where a program's inbound rules, outbound rules and labels are in [`PolicyNames`].
struct NameIds {
    inbound: Vec<u32>,
    outbound: Vec<u32>,
    labels: Vec<u32>,
}

impl Judge {
    /// An event's rule as the audit log names it.
    pub fn audit_rule(&self, rule: RuleRef) -> RuleRef {
        let at = |map: &[u32], i: u32| map.get(i as usize).copied().unwrap_or(i);
        match rule {
            RuleRef::Inbound(RuleId(i)) => RuleRef::Inbound(RuleId(at(&self.ids.inbound, i))),
            RuleRef::Outbound(RuleId(i)) => RuleRef::Outbound(RuleId(at(&self.ids.outbound, i))),
            builtin => builtin,
        }
    }

    /// An event's rule and redaction labels as the audit log names them.
    pub fn audit_event(&self, event: &mut AuditEvent) {
        event.rule = event.rule.map(|r| self.audit_rule(r));
        for (label, _) in &mut event.redactions {
            *label = self
                .ids
                .labels
                .get(*label as usize)
                .copied()
                .unwrap_or(*label);
        }
    }
}

/// Every identity's judge on one server.
pub struct Judges {
    by_identity: HashMap<Option<Arc<str>>, Arc<Judge>>,
    /// The program of clients without an identity (or any identity's): for settings
    /// every identity on this server shares.
    any: Arc<Program>,
}

/// Building a judge failed.
#[derive(Debug, thiserror::Error)]
pub enum JudgeError {
    #[error(transparent)]
    Compile(#[from] crate::config::PolicyError),
    #[error("{0}")]
    Guard(String),
}

/// Programs compiled for a listener, by (policy, identity): servers judged by the same
/// policy share them, and a policy that names no identity compiles once for all.
#[derive(Default)]
pub struct Programs {
    compiled: HashMap<(usize, Option<Arc<str>>), Arc<Program>>,
}

impl Programs {
    /// The program of `policy` for `identity`. `policy` must outlive the cache's use
    /// (its address is the key): the serve command keeps every policy until it exits.
    fn get(
        &mut self,
        policy: &Policy,
        identity: Option<&Arc<str>>,
        env: &PathEnv,
    ) -> Result<Arc<Program>, JudgeError> {
        let identity = identity.filter(|_| policy.has_identity_rules()).cloned();
        let key = (policy as *const Policy as usize, identity.clone());
        if let Some(program) = self.compiled.get(&key) {
            return Ok(program.clone());
        }
        let program = Arc::new(Program::compile_with(
            &policy.for_identity(identity.as_deref()),
            env,
        )?);
        self.compiled.insert(key, program.clone());
        Ok(program)
    }
}

impl Judges {
    /// One judge for each of `identities` (`None` for clients without one) on the server
    /// `server`, judged by `policy`; the programs' names are added to `names`.
    pub fn build(
        policy: &Policy,
        identities: &[Option<Arc<str>>],
        server: &ServerIdentity,
        home: &Path,
        env: &PathEnv,
        programs: &mut Programs,
        names: &mut PolicyNames,
    ) -> Result<Judges, JudgeError> {
        // The guard (whose circuit breaker suspends) and the rate limiter are never
        // shared: each identity counts its own violations and calls across all of its
        // sessions, and one identity tripping the breaker leaves the others alone.
        let mut by_identity = HashMap::new();
        for identity in identities {
            let program = programs.get(policy, identity.as_ref(), env)?;
            let specialised = policy.for_identity(identity.as_deref());
            let guard = Guard::from_policy(&specialised, server.clone(), home)
                .map_err(|e| JudgeError::Guard(e.to_string()))?
                .per_identity();
            let rate = program
                .settings()
                .rate_limit
                .map(|l| Arc::new(std::sync::Mutex::new(crate::session::RateLimiter::new(l))));
            let judge = Judge {
                ids: names.add(&program),
                program,
                rate,
                guard: Some(Arc::new(guard)),
                share: Default::default(),
            };
            by_identity.insert(identity.clone(), Arc::new(judge));
        }
        let any = match by_identity.values().next() {
            Some(judge) => judge.program.clone(),
            None => programs.get(policy, None, env)?,
        };
        Ok(Judges { by_identity, any })
    }

    /// The judge of an identity known at start.
    pub fn get(&self, identity: Option<&str>) -> Option<Arc<Judge>> {
        self.by_identity
            .iter()
            .find(|(k, _)| k.as_deref() == identity)
            .map(|(_, v)| v.clone())
    }

    /// Any judge's program (for settings every identity shares).
    pub fn any_program(&self) -> &Arc<Program> {
        &self.any
    }
}

/// Rule and label names for the audit log, for every program of a listener: each
/// distinct name (with its message) once.
#[derive(Default)]
pub struct PolicyNames {
    inbound: Vec<(String, Option<String>)>,
    outbound: Vec<(String, Option<String>)>,
    labels: Vec<String>,
}

impl PolicyNames {
    /// Add a program's names; where each of its ids is in this table.
    fn add(&mut self, program: &Program) -> NameIds {
        fn place<T: PartialEq>(table: &mut Vec<T>, item: T) -> u32 {
            match table.iter().position(|t| *t == item) {
                Some(i) => i as u32,
                None => {
                    table.push(item);
                    (table.len() - 1) as u32
                }
            }
        }
        let named = |r: &crate::program::RuleInfo| (r.name.clone(), r.message.clone());
        let inbound = program
            .rules()
            .map(|(_, r)| place(&mut self.inbound, named(r)))
            .collect();
        let outbound = program
            .outbound_rules()
            .map(|(_, r)| place(&mut self.outbound, named(r)))
            .collect();
        let label_count = program.detector().specs().len() + program.outbound_rules().len();
        let labels = (0..label_count as u32)
            .map(|l| place(&mut self.labels, program.label(l).to_string()))
            .collect();
        NameIds {
            inbound,
            outbound,
            labels,
        }
    }
}

impl Names for PolicyNames {
    fn rule(&self, rule: RuleRef) -> (&str, Option<&str>) {
        let entry = match rule {
            RuleRef::Inbound(RuleId(i)) => self.inbound.get(i as usize),
            RuleRef::Outbound(RuleId(i)) => self.outbound.get(i as usize),
            RuleRef::Builtin(name) => return (name, None),
        };
        match entry {
            Some((name, message)) => (name, message.as_deref()),
            None => ("(unknown rule)", None),
        }
    }

    fn label(&self, label: u32) -> &str {
        self.labels
            .get(label as usize)
            .map_or("unknown", String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{LoadOptions, load_str};
    use crate::session::{Line, Options, Outbox, Session};

    const POLICY: &str = r#"version: 1
settings:
  default_action: allow
rules:
  - name: ci-no-shell
    match: {tool: run_command, identity: "ci-*"}
    action: deny
  - name: no-secrets-dir
    match:
      arguments:
        path: {pattern: "/secrets/**"}
    action: deny
"#;

    fn policy() -> Policy {
        let opts = LoadOptions {
            explicit: None,
            home: "/home/u".into(),
            project_dir: "/home/u/p".into(),
        };
        load_str("t.yml", POLICY, &opts).expect("loads")
    }

    /// `(allowed, rule name as audited)` of a call to `tool` judged for `identity`.
    fn judge_call(
        judges: &Judges,
        names: &PolicyNames,
        identity: Option<&str>,
        tool: &str,
        path: &str,
    ) -> (bool, String) {
        let judge = judges.get(identity).expect("a judge");
        let mut session = Session::new(judge.program.clone(), Options::quiet("t"));
        let line = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"{tool}","arguments":{{"path":"{path}"}}}}}}"#
        );
        let mut out = Outbox::recording();
        session.from_client(Line::Frame(line.as_bytes()), &mut out);
        let event = &out.judgements.unwrap()[0].event;
        let rule = event
            .rule
            .map(|r| names.rule(judge.audit_rule(r)).0.to_string())
            .unwrap_or_default();
        (!out.to_server.is_empty(), rule)
    }

    #[test]
    fn a_rule_naming_an_identity_applies_to_that_identity_only() {
        let policy = policy();
        let dir = tempfile::tempdir().unwrap();
        let env = PathEnv::new(Path::new("/home/u"), Path::new("/home/u/p"));
        let server = ServerIdentity {
            name: "t".into(),
            command: vec!["t".into()],
        };
        let ids = [Some(Arc::from("ci-bot")), Some(Arc::from("alice"))];
        let mut names = PolicyNames::default();
        let judges = Judges::build(
            &policy,
            &ids,
            &server,
            dir.path(),
            &env,
            &mut Programs::default(),
            &mut names,
        )
        .unwrap();
        assert_eq!(
            judge_call(&judges, &names, Some("ci-bot"), "run_command", "/tmp"),
            (false, "ci-no-shell".to_string())
        );
        assert!(judge_call(&judges, &names, Some("alice"), "run_command", "/tmp").0);
        // The rule after it keeps its name in the audit log whichever program judged.
        for who in ["ci-bot", "alice"] {
            assert_eq!(
                judge_call(&judges, &names, Some(who), "read_file", "/secrets/a"),
                (false, "no-secrets-dir".to_string())
            );
        }
        assert!(judges.get(Some("mallory")).is_none());
        // On stdio and in check (no identity) the identity rule never applies.
        let stdio = Program::compile_with(&policy, &env).unwrap();
        assert_eq!(stdio.rule(RuleId(0)).name, "no-secrets-dir");
        // The tool guard hides the tool from the lists of that identity only.
        let ci = judges.get(Some("ci-bot")).unwrap();
        let alice = judges.get(Some("alice")).unwrap();
        let list = r#"{"jsonrpc":"2.0","id":2,"result":{"tools":[{"name":"run_command","inputSchema":{"type":"object"}},{"name":"read_file","inputSchema":{"type":"object"}}]}}"#;
        let listed = |judge: &Judge| {
            let mut session = Session::new(
                judge.program.clone(),
                Options {
                    guard: judge.guard.clone(),
                    ..Options::quiet("t")
                },
            );
            let mut out = Outbox::default();
            session.from_client(
                Line::Frame(br#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#),
                &mut out,
            );
            let mut out = Outbox::default();
            session.from_server(Line::Frame(list.as_bytes()), &mut out, false);
            String::from_utf8(out.to_client).unwrap()
        };
        let ci_list = listed(&ci);
        assert!(
            !ci_list.contains("run_command") && ci_list.contains("read_file"),
            "{ci_list}"
        );
        assert!(listed(&alice).contains("run_command"));
    }

    #[test]
    fn servers_judged_by_one_policy_share_its_programs() {
        let policy = policy();
        let dir = tempfile::tempdir().unwrap();
        let env = PathEnv::new(Path::new("/home/u"), Path::new("/home/u/p"));
        let ids = [Some(Arc::from("ci-bot")), Some(Arc::from("alice"))];
        let mut programs = Programs::default();
        let mut names = PolicyNames::default();
        let mut build = |name: &str| {
            let server = ServerIdentity {
                name: name.into(),
                command: vec![name.into()],
            };
            Judges::build(
                &policy,
                &ids,
                &server,
                dir.path(),
                &env,
                &mut programs,
                &mut names,
            )
            .unwrap()
        };
        let (one, two) = (build("one"), build("two"));
        for id in ["ci-bot", "alice"] {
            let (a, b) = (one.get(Some(id)).unwrap(), two.get(Some(id)).unwrap());
            assert!(Arc::ptr_eq(&a.program, &b.program));
            // The guards (circuit breakers) are each server's own.
            assert!(!Arc::ptr_eq(
                a.guard.as_ref().unwrap(),
                b.guard.as_ref().unwrap()
            ));
        }
        // One program per identity, since a rule names one; no more for a second server.
        assert_eq!(programs.compiled.len(), 2);
    }
}
