//! How `serve` builds its servers' judges from the files, at start and at every reload
//! (`crate::http::reload` decides when, and swaps them in).

use std::path::PathBuf;
use std::sync::Arc;

use crate::config::policy::{Policy, ServerBackend};
use crate::config::{self, LoadOptions};
use crate::guard::pins::ServerIdentity;
use crate::http::identities::{Federation, JudgeError, Judges, PolicyNames, Programs};
use crate::http::reload::{Failed, Outcome, Rebuild, Rebuilt};
use crate::http::tokens::Tokens;
use crate::io::Chatter;

/// Most characters of a failed reload's summary in the audit log.
const SUMMARY_CHARS: usize = 2000;

/// One server of the listener, as far as its judges go.
pub(super) struct FrontJudged {
    pub name: String,
    pub identity: ServerIdentity,
    /// Its sessions start a server process (which runs in the sandbox).
    pub runs_command: bool,
}

/// Everything a rebuild needs, and what is in force.
pub(super) struct Builder {
    pub load_options: LoadOptions,
    pub home: PathBuf,
    pub tokens_path: PathBuf,
    /// In the gateways' order.
    pub fronts: Vec<FrontJudged>,
    /// The fronts are the policy's `servers:` (not a command-line server).
    pub servers_mode: bool,
    pub names: Arc<PolicyNames>,
    pub chatter: Chatter,
    /// The policy in force, its hash, and the identities judged.
    pub policy: Arc<Policy>,
    pub hash: String,
    pub identities: Vec<Option<Arc<str>>>,
    /// `settings.oauth` was set at start: identities the identity provider vouches for
    /// get judges as they come (`Federation`).
    pub federate: bool,
    /// `settings.shared_state` as opened at start (a change applies at the next restart):
    /// the store every judge counts in, and how long a suspension lasts.
    pub shared: Option<(
        Arc<dyn crate::shared_state::SharedState>,
        std::time::Duration,
    )>,
}

/// The files whose change asks for a reload: the token file, and the `-c` file or the
/// project's and the user's policy files and the trust records (whether or not they exist).
pub(super) fn watched(
    load_options: &LoadOptions,
    home: &std::path::Path,
    tokens_path: &std::path::Path,
) -> Vec<PathBuf> {
    let mut paths = vec![tokens_path.to_path_buf()];
    match &load_options.explicit {
        Some(file) => paths.push(file.clone()),
        None => {
            let dir = load_options.home.join(".mcpwall");
            paths.push(load_options.project_file());
            paths.push(dir.join("mcpwall.yml"));
            paths.push(dir.join("config.yml"));
            paths.push(crate::config::trust::TrustStore::path_in(home));
        }
    }
    paths
}

/// The SHA-256 of a policy's files: each one's name and text.
pub(super) fn policy_hash(policy: &Policy) -> String {
    let mut all = Vec::new();
    for s in &policy.sources {
        all.extend_from_slice(s.name.as_bytes());
        all.push(0);
        all.extend_from_slice(s.text.as_bytes());
        all.push(0);
    }
    crate::config::trust::sha256_hex(&all)
}

/// The identities judged when the token file holds `tokens`: one per token, or the one
/// of clients without a token when none was issued.
pub(super) fn identities_of(tokens: &Tokens) -> Vec<Option<Arc<str>>> {
    if tokens.is_empty() {
        vec![None]
    } else {
        tokens.names().map(|n| Some(Arc::from(n))).collect()
    }
}

/// What identifies the `servers:` of a policy for the listener: names and backends.
fn servers_signature(policy: &Policy) -> Vec<(String, Vec<String>)> {
    policy
        .servers
        .iter()
        .map(|def| {
            let backend = match &def.backend {
                ServerBackend::Command { program, args, env } => std::iter::once(program.clone())
                    .chain(args.iter().cloned())
                    .chain(env.iter().map(|(k, v)| format!("{k}={v}")))
                    .collect(),
                ServerBackend::Url { url, .. } => vec![url.clone()],
            };
            (def.name.value.clone(), backend)
        })
        .collect()
}

impl Builder {
    /// Every front's judges under `policy` for `identities`; `same`: the judges in force,
    /// when `policy` is the one in force (only identities changed).
    pub fn judges(
        &self,
        policy: &Policy,
        identities: &[Option<Arc<str>>],
        same: Option<&[Arc<Judges>]>,
    ) -> Result<Vec<Judges>, JudgeError> {
        let mut programs = Programs::default();
        let env = self.load_options.path_env();
        self.fronts
            .iter()
            .enumerate()
            .map(|(i, front)| {
                let own = self.own_policy(policy, &front.name);
                let mut judges = Judges::build(
                    own,
                    identities,
                    &front.identity,
                    &self.home,
                    &env,
                    &mut programs,
                    &self.names,
                    same.and_then(|s| s.get(i)).map(|j| &**j),
                )?;
                if self.federate {
                    judges.federation = Some(Arc::new(Federation::new(
                        Arc::new(own.clone()),
                        front.identity.clone(),
                        self.home.clone(),
                        env.clone(),
                        self.names.clone(),
                    )));
                }
                if let Some((state, suspension)) = &self.shared {
                    judges.share_state(state, &front.name, *suspension);
                }
                Ok(judges)
            })
            .collect()
    }

    /// The sandbox each command server starts in under `policy`: kept from `current`
    /// when the policy is the one in force, planned again otherwise (a sandbox that is
    /// required and cannot be had fails the reload).
    fn sandboxes(
        &self,
        policy: &Policy,
        judges: &mut [Judges],
        current: &[Arc<Judges>],
        unchanged: bool,
    ) -> Result<(), Failed> {
        for (i, (front, judges)) in self.fronts.iter().zip(judges.iter_mut()).enumerate() {
            if unchanged {
                judges.sandbox = current.get(i).and_then(|c| c.sandbox.clone());
                continue;
            }
            if !front.runs_command {
                continue;
            }
            let own = self.own_policy(policy, &front.name);
            let plan = crate::cli::common::sandbox_plan(own, &self.load_options, &self.chatter)
                .map_err(|report| failed(report, Vec::new()))?;
            judges.sandbox = Some(plan);
        }
        Ok(())
    }

    /// The policy `front` is judged by under `policy`: its `servers:` entry's own, or
    /// `policy`.
    fn own_policy<'p>(&self, policy: &'p Policy, front: &str) -> &'p Policy {
        if !self.servers_mode {
            return policy;
        }
        policy
            .servers
            .iter()
            .find(|d| d.name.value == front)
            .and_then(|d| d.policy.as_deref())
            .unwrap_or(policy)
    }

    /// The notes of a reload from the policy in force to `new`: what it changes that only
    /// a restart applies.
    fn restart_notes(&self, new: &Policy) -> Vec<String> {
        let (old, now) = (&self.policy.settings, &new.settings);
        let mut notes = Vec::new();
        if old.shared_state != now.shared_state {
            notes.push(
                "settings.shared_state changed: the replicas' shared state changes at the next \
                 restart"
                    .to_string(),
            );
        }
        if old.gateway != now.gateway {
            notes.push(
                "settings.gateway changed: the listener's limits change at the next restart"
                    .to_string(),
            );
        }
        if old.log_dir != now.log_dir || old.log_retention != now.log_retention {
            notes.push(
                "settings.log_dir or log_retention changed: the audit log moves at the next restart"
                    .to_string(),
            );
        }
        if old.oauth != now.oauth {
            notes.push(
                "settings.oauth changed: the identity provider's settings change at the next restart"
                    .to_string(),
            );
        }
        if old.log_level != now.log_level {
            notes.push("settings.log_level changed: it applies at the next restart".to_string());
        }
        if self.policy.sandbox != new.sandbox {
            notes.push(
                "sandbox: changed: servers started from now on run in the new sandbox; those running keep theirs until their session ends"
                    .to_string(),
            );
        }
        notes
    }
}

/// A failed load or build, for stderr and for the audit log.
fn failed(report: miette::Report, places: Vec<String>) -> Failed {
    let text = crate::cli::common::error_text(&report, "mcpwall: ", false);
    let mut summary = format!("{report}");
    if !places.is_empty() {
        summary.push_str(": ");
        summary.push_str(&places.join("; "));
    }
    if summary.chars().count() > SUMMARY_CHARS {
        summary = summary.chars().take(SUMMARY_CHARS).collect::<String>() + "…";
    }
    Failed {
        report: text,
        summary,
    }
}

fn policy_failed(e: config::PolicyError) -> Failed {
    let places = e
        .diagnostics
        .iter()
        .map(|d| match &d.location {
            Some((file, line, column)) => format!("{file}:{line}:{column}: {}", d.message),
            None => d.message.clone(),
        })
        .collect();
    failed(miette::Report::new(e), places)
}

fn judge_failed(e: JudgeError) -> Failed {
    match e {
        JudgeError::Compile(e) => policy_failed(e),
        JudgeError::Guard(why) => failed(
            miette::miette!(
                help =
                    "fix or remove the pin file named, then save the policy again (or send SIGHUP)",
                "the tool guard could not be built: {why}"
            ),
            Vec::new(),
        ),
    }
}

impl Rebuild for Builder {
    fn watched(&self) -> Vec<PathBuf> {
        watched(&self.load_options, &self.home, &self.tokens_path)
    }

    fn rebuild(&mut self, current: &[Arc<Judges>], forced: bool) -> Outcome {
        let mut outcome = Outcome::default();
        // An unusable token file refuses everyone already (`tokens.rs`); the identities
        // judged stay as they were.
        let identities = match Tokens::read(&self.tokens_path) {
            Ok(tokens) => identities_of(&tokens.unwrap_or_default()),
            Err(_) => self.identities.clone(),
        };
        let loaded = config::load_without_pack_examples(&self.load_options)
            .map_err(policy_failed)
            .and_then(|policy| {
                if self.servers_mode && servers_signature(&policy) != servers_signature(&self.policy) {
                    return Err(failed(
                        miette::miette!(
                            help = "restart `mcpwall serve` to serve the new set; until then the policy in force stays",
                            "the `servers:` section changed (a server added, removed or given another command or URL), which takes a restart"
                        ),
                        Vec::new(),
                    ));
                }
                Ok(policy)
            });
        let (policy, new_policy) = match loaded {
            Ok(policy) => {
                let hash = policy_hash(&policy);
                if hash == self.hash {
                    (self.policy.clone(), None)
                } else {
                    (Arc::new(policy), Some(hash))
                }
            }
            Err(f) => {
                outcome.failed = Some(f);
                (self.policy.clone(), None)
            }
        };
        let same_identities = identities == self.identities;
        if new_policy.is_none() && same_identities && (!forced || outcome.failed.is_some()) {
            return outcome;
        }
        let same = new_policy.is_none().then_some(current);
        let built = self
            .judges(&policy, &identities, same)
            .map_err(judge_failed);
        let built = built.and_then(|mut judges| {
            self.sandboxes(&policy, &mut judges, current, new_policy.is_none())?;
            Ok(judges)
        });
        match built {
            Ok(judges) => {
                let notes = match &new_policy {
                    Some(_) => {
                        crate::cli::common::warn_ignored(&policy, &self.chatter);
                        self.restart_notes(&policy)
                    }
                    None => Vec::new(),
                };
                if let Some(hash) = new_policy {
                    self.hash = hash;
                    self.policy = policy;
                }
                self.identities = identities;
                outcome.rebuilt = Some(Rebuilt {
                    judges,
                    policy_hash: self.hash.clone(),
                    notes,
                });
            }
            Err(f) => {
                // The policy loaded but does not compile for some identity, or its sandbox
                // cannot be had: nothing changes.
                outcome.failed = Some(f);
            }
        }
        outcome
    }
}
