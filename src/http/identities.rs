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
//!
//! A policy reload (`reload.rs`) builds new judges off the I/O thread and swaps them in
//! through [`LiveJudges`]; the names table only grows, so an id written before a reload
//! still names its rule after it. Each judge counts its verdicts by rule for `/metrics`
//! (atomics, no lock).

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use crate::audit::{AuditEvent, Direction, Names, RuleRef};
use crate::config::policy::Policy;
use crate::guard::Guard;
use crate::guard::pins::ServerIdentity;
use crate::paths::PathEnv;
use crate::program::Program;
use crate::verdict::{RuleId, Verdict};

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
    /// Its verdicts so far, by rule (`/metrics`).
    pub verdicts: Arc<VerdictCounts>,
}

/// How many messages a judge decided, by rule and verdict: one row per inbound rule, one
/// per outbound rule (each with its id in [`PolicyNames`], so the counts outlive the
/// judge), and one per direction for messages no rule decided (the default action for a
/// client's, no rule at all for a server's). The other rules of mcpwall's own
/// (`mcpwall:…`, refusals) are counted by the caller, by name.
pub struct VerdictCounts {
    inbound: Box<[(u32, Row)]>,
    outbound: Box<[(u32, Row)]>,
    /// No rule: `[inbound, outbound]`.
    unruled: [Row; 2],
}

/// The rule the session names for a message the default action decided.
pub const DEFAULT_ACTION: &str = "mcpwall:default_action";

/// One counter per [`Verdict`].
type Row = [AtomicU64; Verdict::ALL.len()];

fn row() -> Row {
    std::array::from_fn(|_| AtomicU64::new(0))
}

impl VerdictCounts {
    fn new(ids: &NameIds) -> VerdictCounts {
        VerdictCounts {
            inbound: ids.inbound.iter().map(|&id| (id, row())).collect(),
            outbound: ids.outbound.iter().map(|&id| (id, row())).collect(),
            unruled: [row(), row()],
        }
    }

    /// Count one event's verdict (its rule as the session wrote it, before
    /// [`Judge::audit_event`]); `false` for a rule of mcpwall's own, not counted here.
    pub fn count(&self, event: &AuditEvent) -> bool {
        let row = match event.rule {
            Some(RuleRef::Inbound(RuleId(i))) => self.inbound.get(i as usize).map(|r| &r.1),
            Some(RuleRef::Outbound(RuleId(i))) => self.outbound.get(i as usize).map(|r| &r.1),
            // The allow path of a policy without allow rules: counted here, without a lock.
            Some(RuleRef::Builtin(DEFAULT_ACTION)) | None => Some(match event.direction {
                Direction::Inbound => &self.unruled[0],
                Direction::Outbound => &self.unruled[1],
            }),
            Some(RuleRef::Builtin(_)) => return false,
        };
        if let Some(row) = row {
            row[event.action as usize].fetch_add(1, Ordering::Relaxed);
        }
        true
    }

    /// Every non-zero count: (direction, rule as the audit log numbers it, or `None` for
    /// the default action, verdict, count).
    pub fn each(&self, mut f: impl FnMut(Direction, Option<RuleRef>, Verdict, u64)) {
        let rows = self
            .inbound
            .iter()
            .map(|(id, r)| (Direction::Inbound, Some(RuleRef::Inbound(RuleId(*id))), r))
            .chain(
                self.outbound
                    .iter()
                    .map(|(id, r)| (Direction::Outbound, Some(RuleRef::Outbound(RuleId(*id))), r)),
            )
            .chain([
                (Direction::Inbound, None, &self.unruled[0]),
                (Direction::Outbound, None, &self.unruled[1]),
            ]);
        for (direction, rule, row) in rows {
            for (verdict, n) in Verdict::ALL.iter().zip(row.iter()) {
                let n = n.load(Ordering::Relaxed);
                if n > 0 {
                    f(direction, rule, *verdict, n);
                }
            }
        }
    }
}

/// Where a program's inbound rules, outbound rules and labels are in [`PolicyNames`].
struct NameIds {
    inbound: Vec<u32>,
    outbound: Vec<u32>,
    labels: Vec<u32>,
}

impl Judge {
    /// The judge of `program`, compiled from `specialised` (a policy as it applies to one
    /// identity), with a tool guard and rate limiter of its own.
    fn new(
        program: Arc<Program>,
        specialised: &Policy,
        server: &ServerIdentity,
        home: &Path,
        names: &PolicyNames,
    ) -> Result<Judge, JudgeError> {
        let guard = Guard::from_policy(specialised, server.clone(), home)
            .map_err(|e| JudgeError::Guard(e.to_string()))?
            .per_identity();
        let rate = program
            .settings()
            .rate_limit
            .map(|l| Arc::new(std::sync::Mutex::new(crate::session::RateLimiter::new(l))));
        let ids = names.add(&program);
        Ok(Judge {
            verdicts: Arc::new(VerdictCounts::new(&ids)),
            ids,
            program,
            rate,
            guard: Some(Arc::new(guard)),
            share: Default::default(),
        })
    }

    /// Carry over what `old` (the same identity's judge before) counted: its tool guard's
    /// pins and breaker, and its rate window when the limit is the same.
    fn inherit(&mut self, old: &Judge) {
        if let (Some(new), Some(old)) = (&self.guard, &old.guard) {
            new.take_over(old);
        }
        if old.rate.is_some()
            && self.program.settings().rate_limit == old.program.settings().rate_limit
        {
            self.rate.clone_from(&old.rate);
        }
    }

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
    /// After a reload: the sandbox the server's processes started from now on run in
    /// (`Some(None)`: `sandbox: off`). `None`: the one the server was given at start.
    pub sandbox: Option<Option<Arc<crate::sandbox::Plan>>>,
    /// The judges of identities the identity provider vouches for (`settings.oauth`),
    /// built as they come.
    pub federation: Option<Arc<Federation>>,
}

/// Most identity-provider identities whose judges are kept at once per server. Past it,
/// the judge of one no session uses is dropped (its rate window and breaker with it);
/// when every one is in use, a new identity is refused (503) until one is free.
pub const MAX_MEMBERS: usize = 4096;

/// The judges of identities first seen at run time, with an identity provider's token:
/// rules name them or their groups (`identity: "group:NAME"`), so what judges one is the
/// policy as it applies to that name and those groups. Programs are shared by identities
/// to whom the same rules apply (one compile per distinct set, not per identity); the
/// tool guard and rate limiter are each identity's own, as for the token file's.
pub struct Federation {
    policy: Arc<Policy>,
    server: ServerIdentity,
    home: std::path::PathBuf,
    env: PathEnv,
    names: Arc<PolicyNames>,
    /// Programs by the indices of the rules that apply.
    programs: Mutex<HashMap<Vec<u32>, Arc<Program>>>,
    members: Mutex<HashMap<Arc<str>, Member>>,
    /// The replicas' shared state, when the gateway has one: each judge built counts there.
    sharing: Mutex<Option<Sharing>>,
}

struct Member {
    groups: Box<[Arc<str>]>,
    judge: Arc<Judge>,
}

/// Where the replicas' shared state counts a server's judges ([`Judges::share_state`]).
#[derive(Clone)]
struct Sharing {
    state: Arc<dyn crate::shared_state::SharedState>,
    server: Arc<str>,
    suspension: std::time::Duration,
}

impl Sharing {
    /// Count `judge`'s rate limit and circuit breaker (and its pins) in the shared state.
    fn apply(&self, judge: &Judge, identity: Option<Arc<str>>) {
        if let Some(rate) = &judge.rate {
            let mut rate = rate.lock().unwrap_or_else(|e| e.into_inner());
            if !rate.is_shared() {
                rate.share(crate::session::SharedCount {
                    state: self.state.clone(),
                    server: self.server.clone(),
                    identity: identity.clone(),
                });
            }
        }
        if let Some(guard) = &judge.guard {
            guard.share_pins(self.state.clone());
            guard.share_breaker(crate::guard::SharedBreaker {
                state: self.state.clone(),
                server: self.server.clone(),
                identity,
                suspension: self.suspension,
            });
        }
    }
}

/// Every identity-provider identity's judge is in use by a session: no room for another.
#[derive(Debug, thiserror::Error)]
#[error(
    "{MAX_MEMBERS} identity-provider identities hold sessions on this server; a new one must wait"
)]
pub struct Crowded;

impl Federation {
    pub fn new(
        policy: Arc<Policy>,
        server: ServerIdentity,
        home: std::path::PathBuf,
        env: PathEnv,
        names: Arc<PolicyNames>,
    ) -> Federation {
        Federation {
            policy,
            server,
            home,
            env,
            names,
            programs: Mutex::default(),
            members: Mutex::default(),
            sharing: Mutex::default(),
        }
    }

    /// Count every judge built from now on (and those kept) in the replicas' shared state.
    fn share(&self, sharing: Sharing) {
        for (name, judge) in self.judges() {
            sharing.apply(&judge, Some(name));
        }
        *self.sharing.lock().unwrap_or_else(|e| e.into_inner()) = Some(sharing);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Arc<str>, Member>> {
        self.members.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The judge of `name` in `groups`, if one is built.
    pub fn get(&self, name: &str, groups: Option<&[Arc<str>]>) -> Option<Arc<Judge>> {
        let members = self.lock();
        let member = members.get(name)?;
        groups
            .is_none_or(|g| *g == *member.groups)
            .then(|| member.judge.clone())
    }

    /// Build the judge of `name` in `groups` (compiling a program if no identity with the
    /// same rules has one yet): slow, so off the I/O thread. A judge `name` had before
    /// (other groups, or the federation this one replaces) hands over its guard and rate
    /// window.
    pub fn build(
        &self,
        name: &Arc<str>,
        groups: &[Arc<str>],
        before: Option<&Judge>,
    ) -> Result<Arc<Judge>, JudgeError> {
        let applies = self.policy.member_rule_indices(Some(name), groups);
        let specialised = self.policy.for_member(Some(name), groups);
        let cached = self
            .programs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&applies)
            .cloned();
        let program = match cached {
            Some(p) => p,
            None => {
                let p = Arc::new(Program::compile_with(&specialised, &self.env)?);
                self.programs
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(applies, p.clone());
                p
            }
        };
        let mut judge = Judge::new(program, &specialised, &self.server, &self.home, &self.names)?;
        let previous = self.lock().get(name).map(|m| m.judge.clone());
        if let Some(old) = previous.as_deref().or(before) {
            judge.inherit(old);
        }
        let sharing = self
            .sharing
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        if let Some(sharing) = sharing {
            sharing.apply(&judge, Some(name.clone()));
        }
        Ok(Arc::new(judge))
    }

    /// Keep `judge` as `name`'s, making room if needed; the judge in force for `name`
    /// (another request may have built one for the same groups meanwhile: that one stays,
    /// so an identity never counts its calls in two rate windows).
    pub fn insert(
        &self,
        name: Arc<str>,
        groups: &[Arc<str>],
        judge: Arc<Judge>,
    ) -> Result<Arc<Judge>, Crowded> {
        let mut members = self.lock();
        if let Some(member) = members.get(&name)
            && *member.groups == *groups
        {
            return Ok(member.judge.clone());
        }
        if members.len() >= MAX_MEMBERS && !members.contains_key(&name) {
            // Only the map holds it: no session judges with it.
            let idle = members
                .iter()
                .find(|(_, m)| Arc::strong_count(&m.judge) == 1)
                .map(|(k, _)| k.clone())
                .ok_or(Crowded)?;
            members.remove(&idle);
        }
        members.insert(
            name,
            Member {
                groups: groups.into(),
                judge: judge.clone(),
            },
        );
        Ok(judge)
    }

    /// After a reload: build under this policy the judge of every identity `old` had, so
    /// their open sessions go on (each judge hands over its guard and rate window).
    /// Runs on the reload thread; one that fails to build is left out (its sessions end).
    fn adopt(&self, old: &Federation) {
        let kept: Vec<(Arc<str>, Member)> = old
            .lock()
            .iter()
            .map(|(k, m)| {
                let member = Member {
                    groups: m.groups.clone(),
                    judge: m.judge.clone(),
                };
                (k.clone(), member)
            })
            .collect();
        for (name, old) in kept {
            if let Ok(new) = self.build(&name, &old.groups, Some(&old.judge)) {
                let _ = self.insert(name, &old.groups, new);
            }
        }
    }

    /// Every judge kept, with its identity.
    pub fn judges(&self) -> Vec<(Arc<str>, Arc<Judge>)> {
        self.lock()
            .iter()
            .map(|(k, m)| (k.clone(), m.judge.clone()))
            .collect()
    }
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
        // The policy is kept for the sessions, which compile it again for their
        // client's roots (decision 16).
        let policy = Arc::new(policy.for_identity(identity.as_deref()));
        let program = Arc::new(Program::compile_with(&policy, env)?.keep_source(policy));
        self.compiled.insert(key, program.clone());
        Ok(program)
    }
}

impl Judges {
    /// One judge for each of `identities` (`None` for clients without one) on the server
    /// `server`, judged by `policy`; the programs' names are added to `names`. `same`:
    /// the judges of a policy identical to `policy` (a reload that changed only the
    /// identities), whose judges are kept as they are.
    #[allow(clippy::too_many_arguments)]
    pub fn build(
        policy: &Policy,
        identities: &[Option<Arc<str>>],
        server: &ServerIdentity,
        home: &Path,
        env: &PathEnv,
        programs: &mut Programs,
        names: &PolicyNames,
        same: Option<&Judges>,
    ) -> Result<Judges, JudgeError> {
        // The guard (whose circuit breaker suspends) and the rate limiter are never
        // shared: each identity counts its own violations and calls across all of its
        // sessions, and one identity tripping the breaker leaves the others alone.
        let mut by_identity = HashMap::new();
        for identity in identities {
            if let Some(kept) = same.and_then(|j| j.by_identity.get(identity)) {
                by_identity.insert(identity.clone(), kept.clone());
                continue;
            }
            let program = programs.get(policy, identity.as_ref(), env)?;
            let specialised = policy.for_identity(identity.as_deref());
            let judge = Judge::new(program, &specialised, server, home, names)?;
            by_identity.insert(identity.clone(), Arc::new(judge));
        }
        let any = match by_identity.values().next() {
            Some(judge) => judge.program.clone(),
            None => programs.get(policy, None, env)?,
        };
        Ok(Judges {
            by_identity,
            any,
            sandbox: None,
            federation: None,
        })
    }

    /// Count every judge's rate limit and circuit breaker in `state`, the replicas' shared
    /// state, as the calls of `server` (its name, the same on every replica), suspending
    /// for `suspension`. Judges kept from an earlier build are shared already.
    pub fn share_state(
        &self,
        state: &Arc<dyn crate::shared_state::SharedState>,
        server: &str,
        suspension: std::time::Duration,
    ) {
        let sharing = Sharing {
            state: state.clone(),
            server: Arc::from(server),
            suspension,
        };
        for (identity, judge) in &self.by_identity {
            sharing.apply(judge, identity.clone());
        }
        if let Some(federation) = &self.federation {
            federation.share(sharing);
        }
    }

    /// The judge of an identity: one of the token file's, or one the identity provider
    /// vouched for whose judge is built.
    pub fn get(&self, identity: Option<&str>) -> Option<Arc<Judge>> {
        let known = self
            .by_identity
            .iter()
            .find(|(k, _)| k.as_deref() == identity)
            .map(|(_, v)| v.clone());
        known.or_else(|| {
            self.federation
                .as_ref()
                .and_then(|f| f.get(identity?, None))
        })
    }

    /// Any judge's program (for settings every identity shares).
    pub fn any_program(&self) -> &Arc<Program> {
        &self.any
    }

    /// Every judge, with its identity.
    pub fn iter(&self) -> impl Iterator<Item = (&Option<Arc<str>>, &Arc<Judge>)> {
        self.by_identity.iter()
    }

    /// After a reload: what the judges being replaced learnt carries over to these. The
    /// tool guards take over their pins, withheld tools and circuit breakers (a suspended
    /// identity stays suspended, and a tool withheld after a rug pull stays withheld until
    /// the client lists tools again under the new policy); a judge whose program settings
    /// keep the same rate limit keeps its counting window.
    pub fn take_over(&mut self, old: &Judges) {
        for (identity, judge) in &mut self.by_identity {
            let Some(before) = old.by_identity.get(identity) else {
                continue;
            };
            if Arc::ptr_eq(judge, before) {
                continue;
            }
            if let (Some(new), Some(old)) = (&judge.guard, &before.guard) {
                new.take_over(old);
            }
            let same_limit =
                judge.program.settings().rate_limit == before.program.settings().rate_limit;
            if same_limit
                && before.rate.is_some()
                && let Some(judge) = Arc::get_mut(judge)
            {
                judge.rate.clone_from(&before.rate);
            }
        }
    }
}

/// A server's judges as they are now: swapped whole by a reload, read on every new session
/// and on each message of a session whose judge is older ([`LiveJudges::generation`]).
pub struct LiveJudges {
    generation: AtomicU64,
    current: RwLock<Arc<Judges>>,
}

impl LiveJudges {
    pub fn new(judges: Judges) -> LiveJudges {
        LiveJudges {
            generation: AtomicU64::new(0),
            current: RwLock::new(Arc::new(judges)),
        }
    }

    /// Bumped by every swap: a session compares it with the one its judge came from.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// The judges now, and their generation.
    pub fn load(&self) -> (u64, Arc<Judges>) {
        let current = self.current.read().unwrap_or_else(|e| e.into_inner());
        (self.generation(), current.clone())
    }

    /// The judges now.
    pub fn current(&self) -> Arc<Judges> {
        self.load().1
    }

    /// Swap in `judges` (after they took over from the ones they replace).
    pub fn replace(&self, mut judges: Judges) {
        // The identity provider's identities are rebuilt before the lock is taken: that
        // compiles, and sessions read the judges meanwhile.
        let before = self.current();
        if let (Some(new), Some(old)) = (&judges.federation, &before.federation) {
            new.adopt(old);
        }
        drop(before);
        let mut current = self.current.write().unwrap_or_else(|e| e.into_inner());
        judges.take_over(&current);
        *current = Arc::new(judges);
        self.generation.fetch_add(1, Ordering::AcqRel);
    }
}

/// Rule and label names for the audit log, for every program of a listener: each
/// distinct name (with its message) once. It only grows: a reload adds the names of the
/// new programs, and ids handed out before stay valid. Names are interned for the life of
/// the process (the audit writer borrows them without holding a lock); a reload that
/// changes nothing adds nothing, so what is kept is bounded by the distinct names the
/// operator ever wrote.
#[derive(Default)]
pub struct PolicyNames {
    table: Mutex<NameTable>,
}

type Named = (&'static str, Option<&'static str>);

#[derive(Default)]
struct NameTable {
    inbound: Vec<Named>,
    outbound: Vec<Named>,
    labels: Vec<&'static str>,
    /// Every text interned so far.
    interned: std::collections::HashSet<&'static str>,
}

impl NameTable {
    fn intern(&mut self, text: &str) -> &'static str {
        if let Some(known) = self.interned.get(text) {
            return known;
        }
        let kept: &'static str = Box::leak(text.to_string().into_boxed_str());
        self.interned.insert(kept);
        kept
    }
}

impl PolicyNames {
    fn lock(&self) -> std::sync::MutexGuard<'_, NameTable> {
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Add a program's names; where each of its ids is in this table.
    fn add(&self, program: &Program) -> NameIds {
        fn place<T: PartialEq>(table: &mut Vec<T>, item: T) -> u32 {
            match table.iter().position(|t| *t == item) {
                Some(i) => i as u32,
                None => {
                    table.push(item);
                    (table.len() - 1) as u32
                }
            }
        }
        let mut t = self.lock();
        let named = |t: &mut NameTable, r: &crate::program::RuleInfo| -> Named {
            let name = t.intern(&r.name);
            let message = r.message.as_deref().map(|m| t.intern(m));
            (name, message)
        };
        let inbound = program
            .rules()
            .map(|(_, r)| {
                let n = named(&mut t, r);
                place(&mut t.inbound, n)
            })
            .collect();
        let outbound = program
            .outbound_rules()
            .map(|(_, r)| {
                let n = named(&mut t, r);
                place(&mut t.outbound, n)
            })
            .collect();
        let label_count = program.detector().specs().len() + program.outbound_rules().len();
        let labels = (0..label_count as u32)
            .map(|l| {
                let label = t.intern(program.label(l));
                place(&mut t.labels, label)
            })
            .collect();
        NameIds {
            inbound,
            outbound,
            labels,
        }
    }

    /// A rule's name as the audit log writes it (`None`: the default action).
    pub fn rule_name(&self, rule: Option<RuleRef>) -> &'static str {
        match rule {
            Some(r) => self.static_rule(r).0,
            None => "default_action",
        }
    }

    fn static_rule(&self, rule: RuleRef) -> Named {
        let t = self.lock();
        let entry = match rule {
            RuleRef::Inbound(RuleId(i)) => t.inbound.get(i as usize),
            RuleRef::Outbound(RuleId(i)) => t.outbound.get(i as usize),
            RuleRef::Builtin(name) => return (name, None),
        };
        entry.copied().unwrap_or(("(unknown rule)", None))
    }
}

impl Names for PolicyNames {
    fn rule(&self, rule: RuleRef) -> (&str, Option<&str>) {
        self.static_rule(rule)
    }

    fn label(&self, label: u32) -> &str {
        self.lock()
            .labels
            .get(label as usize)
            .copied()
            .unwrap_or("unknown")
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
        let names = PolicyNames::default();
        let judges = Judges::build(
            &policy,
            &ids,
            &server,
            dir.path(),
            &env,
            &mut Programs::default(),
            &names,
            None,
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
        let names = PolicyNames::default();
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
                &names,
                None,
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

    #[test]
    fn a_reload_keeps_a_suspended_identity_suspended_and_its_names_valid() {
        let opts = LoadOptions {
            explicit: None,
            home: "/home/u".into(),
            project_dir: "/home/u/p".into(),
        };
        let load = |rule: &str| {
            let text = format!(
                "version: 1\nsettings:\n  circuit_breaker: {{max_violations: 2, window_seconds: 60}}\nrules:\n  - name: {rule}\n    match: {{tool: x}}\n    action: deny\n"
            );
            load_str("t.yml", &text, &opts).expect("loads")
        };
        let dir = tempfile::tempdir().unwrap();
        let env = PathEnv::new(Path::new("/home/u"), Path::new("/home/u/p"));
        let server = ServerIdentity {
            name: "t".into(),
            command: vec!["t".into()],
        };
        let ids = [Some(Arc::from("ci-bot")), Some(Arc::from("alice"))];
        let names = PolicyNames::default();
        let build = |policy: &Policy| {
            Judges::build(
                policy,
                &ids,
                &server,
                dir.path(),
                &env,
                &mut Programs::default(),
                &names,
                None,
            )
            .unwrap()
        };
        let (old, new) = (load("first-rule"), load("second-rule"));
        let live = LiveJudges::new(build(&old));
        let ci = live.current().get(Some("ci-bot")).unwrap();
        let first = ci.audit_rule(RuleRef::Inbound(RuleId(0)));
        let guard = ci.guard.clone().unwrap();
        let now = std::time::Instant::now();
        guard.record_violation(now, "one");
        guard.record_violation(now, "two");
        assert!(guard.is_suspended());

        live.replace(build(&new));
        assert_eq!(live.generation(), 1);
        let after = live.current();
        let ci_after = after.get(Some("ci-bot")).unwrap();
        assert!(!Arc::ptr_eq(&ci, &ci_after));
        assert!(ci_after.guard.as_ref().unwrap().is_suspended());
        assert!(
            !after
                .get(Some("alice"))
                .unwrap()
                .guard
                .as_ref()
                .unwrap()
                .is_suspended()
        );
        // Ids handed out before the reload still name their rules; the new ones are new.
        assert_eq!(names.rule(first).0, "first-rule");
        let second = ci_after.audit_rule(RuleRef::Inbound(RuleId(0)));
        assert_eq!(names.rule(second).0, "second-rule");
    }

    #[test]
    fn a_provider_identity_gets_one_judge_whose_rules_follow_its_name_and_groups() {
        let opts = LoadOptions {
            explicit: None,
            home: "/home/u".into(),
            project_dir: "/home/u/p".into(),
        };
        let text = "version: 1\nsettings:\n  rate_limit: {max_calls: 5, window_seconds: 60}\nrules:\n  - name: ops-no-shell\n    match: {tool: run_command, identity: \"group:ops\"}\n    action: deny\n";
        let policy = Arc::new(load_str("t.yml", text, &opts).expect("loads"));
        let dir = tempfile::tempdir().unwrap();
        let names = Arc::new(PolicyNames::default());
        let federation = Federation::new(
            policy,
            ServerIdentity {
                name: "t".into(),
                command: vec!["t".into()],
            },
            dir.path().into(),
            PathEnv::new(Path::new("/home/u"), Path::new("/home/u/p")),
            names.clone(),
        );
        let name: Arc<str> = Arc::from("auth0|42");
        let ops: Vec<Arc<str>> = vec![Arc::from("ops")];
        // Two requests racing to build the same identity's judge: the first kept stays.
        let first = federation.build(&name, &ops, None).unwrap();
        let second = federation.build(&name, &ops, None).unwrap();
        let kept = federation
            .insert(name.clone(), &ops, first.clone())
            .unwrap();
        assert!(Arc::ptr_eq(&kept, &first));
        let kept = federation.insert(name.clone(), &ops, second).unwrap();
        assert!(Arc::ptr_eq(&kept, &first), "one rate window per identity");
        assert!(Arc::ptr_eq(
            &federation.get(&name, Some(&ops)).unwrap(),
            &first
        ));
        assert!(federation.get(&name, Some(&[])).is_none());
        // Its groups decide which rules apply; identities with the same rules share a program.
        let judges = Judges {
            by_identity: HashMap::new(),
            any: first.program.clone(),
            sandbox: None,
            federation: Some(Arc::new(federation)),
        };
        let (allowed, rule) = judge_call(&judges, &names, Some("auth0|42"), "run_command", "/tmp");
        assert!(!allowed);
        assert_eq!(rule, "ops-no-shell");
        let federation = judges.federation.as_ref().unwrap();
        let other = federation.build(&Arc::from("bob"), &ops, None).unwrap();
        assert!(Arc::ptr_eq(&other.program, &first.program));
        let outsider = federation.build(&Arc::from("carol"), &[], None).unwrap();
        assert!(!Arc::ptr_eq(&outsider.program, &first.program));
    }
}
