//! What each identity is judged by: rules can name identities (`match: {identity: "ci-*"}`),
//! so the gateway compiles one [`Program`] and one tool [`Guard`] per identity from
//! [`Policy::for_identity`], once at start. Tool lists are then filtered per identity by
//! the guard as they are on stdio (a tool a rule denies for that identity whatever its
//! arguments is withheld from its `tools/list`), and no identity check runs per message.
//!
//! The programs' inbound rule tables differ, so their rule ids differ: events are
//! rewritten to the full policy's rule indices ([`Judge::audit_rule`]) and the audit
//! writer names them from the full policy ([`PolicyNames`]).

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use crate::audit::{Names, RuleRef};
use crate::config::policy::Policy;
use crate::guard::Guard;
use crate::guard::pins::ServerIdentity;
use crate::paths::PathEnv;
use crate::program::Program;
use crate::verdict::RuleId;

/// The program and guard one identity's sessions use.
pub struct Judge {
    pub program: Arc<Program>,
    pub guard: Option<Arc<Guard>>,
    /// `settings.rate_limit`, counted across all of this identity's sessions.
    pub rate: Option<crate::session::SharedRateLimit>,
    /// This program's inbound rule index → the full policy's (`None`: the same).
    rule_map: Option<Vec<u32>>,
}

impl Judge {
    /// An event's rule as the audit log names it.
    pub fn audit_rule(&self, rule: RuleRef) -> RuleRef {
        match (rule, &self.rule_map) {
            (RuleRef::Inbound(RuleId(i)), Some(map)) => {
                RuleRef::Inbound(RuleId(map.get(i as usize).copied().unwrap_or(i)))
            }
            _ => rule,
        }
    }
}

/// Every identity's judge, and the names the audit log uses.
pub struct Judges {
    by_identity: HashMap<Option<Arc<str>>, Arc<Judge>>,
    pub names: Arc<PolicyNames>,
}

/// Building a judge failed.
#[derive(Debug, thiserror::Error)]
pub enum JudgeError {
    #[error(transparent)]
    Compile(#[from] crate::config::PolicyError),
    #[error("{0}")]
    Guard(String),
}

impl Judges {
    /// One judge for each of `identities` (`None` for clients without one), sharing
    /// one when the policy names no identity.
    pub fn build(
        policy: &Policy,
        identities: &[Option<Arc<str>>],
        server: &ServerIdentity,
        home: &Path,
        env: &PathEnv,
    ) -> Result<Judges, JudgeError> {
        // The program is shared when no rule names an identity; the guard (whose circuit
        // breaker suspends) and the rate limiter never are: each identity counts its own
        // violations and calls across all of its sessions, and one identity tripping the
        // breaker leaves the others alone.
        let build_one =
            |identity: Option<&str>, program: Option<&Arc<Program>>| -> Result<Judge, JudgeError> {
                let specialised = policy.for_identity(identity);
                let program = match program {
                    Some(shared) => shared.clone(),
                    None => Arc::new(Program::compile_with(&specialised, env)?),
                };
                let guard = Guard::from_policy(&specialised, server.clone(), home)
                    .map_err(|e| JudgeError::Guard(e.to_string()))?;
                let rate = program
                    .settings()
                    .rate_limit
                    .map(|l| Arc::new(std::sync::Mutex::new(crate::session::RateLimiter::new(l))));
                Ok(Judge {
                    program,
                    rate,
                    guard: Some(Arc::new(guard)),
                    rule_map: policy
                        .has_identity_rules()
                        .then(|| policy.identity_rule_indices(identity)),
                })
            };
        let shared = match policy.has_identity_rules() {
            true => None,
            false => Some(Arc::new(Program::compile_with(policy, env)?)),
        };
        let mut by_identity = HashMap::new();
        for identity in identities {
            let judge = build_one(identity.as_deref(), shared.as_ref())?;
            by_identity.insert(identity.clone(), Arc::new(judge));
        }
        let base = match (shared, by_identity.values().next()) {
            (Some(program), _) => program,
            (None, Some(judge)) => judge.program.clone(),
            (None, None) => Arc::new(Program::compile_with(policy, env)?),
        };
        let names = Arc::new(PolicyNames {
            inbound: policy
                .rules
                .iter()
                .map(|r| (r.name.value.clone(), r.message.clone()))
                .collect(),
            base,
        });
        Ok(Judges { by_identity, names })
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
        &self.names.base
    }
}

/// Rule names for the audit log: inbound rules from the full policy (identity rules
/// included), outbound rules and redaction labels from a compiled program (identical in
/// every identity's program: `for_identity` leaves them alone).
pub struct PolicyNames {
    inbound: Vec<(String, Option<String>)>,
    base: Arc<Program>,
}

impl Names for PolicyNames {
    fn rule(&self, rule: RuleRef) -> (&str, Option<&str>) {
        match rule {
            RuleRef::Inbound(RuleId(i)) => match self.inbound.get(i as usize) {
                Some((name, message)) => (name, message.as_deref()),
                None => ("(unknown rule)", None),
            },
            other => Names::rule(&*self.base, other),
        }
    }

    fn label(&self, label: u32) -> &str {
        Names::label(&*self.base, label)
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
            .map(|r| judges.names.rule(judge.audit_rule(r)).0.to_string())
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
        let judges = Judges::build(&policy, &ids, &server, dir.path(), &env).unwrap();
        assert_eq!(
            judge_call(&judges, Some("ci-bot"), "run_command", "/tmp"),
            (false, "ci-no-shell".to_string())
        );
        assert!(judge_call(&judges, Some("alice"), "run_command", "/tmp").0);
        // The rule after it keeps its name in the audit log whichever program judged.
        for who in ["ci-bot", "alice"] {
            assert_eq!(
                judge_call(&judges, Some(who), "read_file", "/secrets/a"),
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
}
