//! The `command` engine class: an argument parsed as a shell command line
//! ([`crate::shell`]) and judged by what will run.
//!
//! A `command` predicate holds when any simple command of the line meets any of its
//! clauses; a clause holds when every condition it names holds for that one command.
//! The value is parsed once per frame value, and only for arguments a `command` matcher
//! names (or every string, for `_any_value`), and only when it is more than one plain
//! word ([`crate::shell::worth_parsing`]).
//!
//! Words the parser cannot resolve are judged by what they could become: a glob or brace
//! word meets a path pattern when some expansion of it could ([`meets`]); a command
//! name from a variable or substitution is *unknown*, which a clause admits with
//! `unknown_name: true`.

use std::sync::OnceLock;

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};

use super::glob::PathGlobs;

use crate::config::policy::{CommandClause, CommandPaths};
use crate::paths::{
    LinkCache, PathBuffers, PathEnv, Root, is_relative, normalize_into, resolve_links,
};
use crate::shell::{ANY, ANY_HIDDEN, BRACE, COMPUTED, Command, GLOB, Parsed, RedirectKind, Word};

mod gate;

/// One compiled clause.
#[derive(Debug)]
pub(crate) struct Clause {
    /// The clause as written, shortened, for `check`.
    text: String,
    names: Option<NameSet>,
    unknown_name: bool,
    flags: Box<[String]>,
    subcommands: Box<[Box<[String]>]>,
    paths: Option<OnReach<CommandPaths, PathCond>>,
    redirects: Option<OnReach<Box<[String]>, RedirectCond>>,
    words: Option<GlobSet>,
    input: u8,
    after_download: bool,
    over_find: bool,
}

/// Command-name globs: most are plain names, looked up without a glob engine (a
/// `GlobSet` builds a `Candidate` per call, and every clause is asked about every command).
#[derive(Debug)]
struct NameSet {
    /// Plain names, sorted.
    exact: Box<[Box<str>]>,
    /// `prefix*` globs.
    prefixes: Box<[Box<str>]>,
    /// Everything else.
    globs: Option<GlobSet>,
    /// Some glob holds a `/`: it is also matched against the name as written.
    by_path: bool,
}

impl NameSet {
    fn new(names: &[String]) -> Result<Option<NameSet>, ClauseFailure> {
        if names.is_empty() {
            return Ok(None);
        }
        let is_meta = |c: char| matches!(c, '*' | '?' | '[' | ']' | '{' | '}' | '\\');
        let mut exact: Vec<Box<str>> = Vec::new();
        let mut prefixes = Vec::new();
        let mut rest = Vec::new();
        for n in names {
            if !n.contains(is_meta) {
                exact.push(n.as_str().into());
            } else if let Some(p) = n.strip_suffix('*')
                && !p.contains(is_meta)
                && !p.contains('/')
            {
                prefixes.push(p.into());
            } else {
                rest.push(n.clone());
            }
        }
        exact.sort();
        Ok(Some(NameSet {
            exact: exact.into(),
            prefixes: prefixes.into(),
            by_path: rest.iter().any(|n| n.contains('/')),
            globs: glob_set(&rest, true)?,
        }))
    }

    fn is_match(&self, name: &str, written: &str) -> bool {
        self.exact
            .binary_search_by(|e| e.as_ref().cmp(name))
            .is_ok()
            || self.prefixes.iter().any(|p| name.starts_with(p.as_ref()))
            || self
                .globs
                .as_ref()
                .is_some_and(|g| g.is_match(name) || (self.by_path && g.is_match(written)))
    }
}

/// A clause's path or redirect condition, built when a command first reaches it (all of
/// the clause's cheaper conditions held), not with the clause: most commands a clause is
/// asked about fail on their name, and the glob sets of the default pack's path
/// conditions were most of the matcher's memory (issue 23's peak-RSS regression).
#[derive(Debug)]
struct OnReach<S, T> {
    spec: S,
    built: OnceLock<T>,
}

impl<S, T> OnReach<S, T> {
    /// Built now, for a user's policy: a failure is reported at start-up.
    fn eager<E>(spec: S, build: impl FnOnce(&S) -> Result<T, E>) -> Result<Self, E> {
        let built = build(&spec)?;
        Ok(OnReach {
            spec,
            built: OnceLock::from(built),
        })
    }

    fn deferred(spec: S) -> Self {
        OnReach {
            spec,
            built: OnceLock::new(),
        }
    }

    /// The condition, built by `build` on first use.
    fn get(&self, build: impl FnOnce(&S) -> T) -> &T {
        self.built.get_or_init(|| build(&self.spec))
    }
}

/// A compiled `redirect:` condition.
#[derive(Debug)]
struct RedirectCond {
    set: PathGlobs,
    /// The globs, expanded (`~`, braces), for glob targets ([`tokenize`]d when one comes).
    patterns: Box<[Box<str>]>,
}

impl RedirectCond {
    fn compile(globs: &[String], env: &PathEnv) -> Result<RedirectCond, ClauseFailure> {
        Ok(RedirectCond {
            set: path_globs(globs, env)?,
            patterns: patterns_of(globs, env),
        })
    }

    /// What a condition that failed to build stands for: every target (fail closed).
    fn everything() -> RedirectCond {
        RedirectCond {
            set: every_path(),
            patterns: Box::new(["**".into()]),
        }
    }
}

#[derive(Debug)]
struct PathCond {
    set: PathGlobs,
    /// Literal pieces one of which every pattern's match contains (the longest plain
    /// run of each pattern), when each is at least three bytes, and none is in the
    /// directories normalisation adds (HOME, the project, the working directory): an
    /// operand whose written form holds none of them (and that normalisation expands
    /// nothing in) cannot match, and is not normalised.
    prefilter: Option<aho_corasick::AhoCorasick>,
    /// The same patterns, expanded (`~`, braces), for glob operands: [`tokenize`]d one
    /// at a time when a glob operand comes (kept as tokens, the default pack's 300
    /// expansions held a third of a megabyte).
    patterns: Box<[Box<str>]>,
    not_under: Vec<Root>,
    /// Each root and every directory above it, normalised; `true` for the root itself.
    ancestors: Vec<(String, bool)>,
}

/// One `command` predicate.
#[derive(Debug)]
pub(crate) struct CommandPred {
    pub pred: u32,
    pub selector: u32,
    pub clauses: LazyClauses,
}

/// The clauses of a predicate, built at compile time (a user's policy, so a failure is
/// reported at start-up) or on first use (the embedded packs, which the test suite builds:
/// their glob sets would otherwise cost every start-up a few milliseconds); a deferred
/// clause's path and redirect conditions wait further, for a command that reaches them
/// ([`OnReach`]), and are built with the evaluating program's [`PathEnv`].
#[derive(Debug)]
pub(crate) struct LazyClauses {
    specs: Vec<CommandClause>,
    built: OnceLock<Box<[Clause]>>,
}

impl LazyClauses {
    pub fn eager(specs: &[CommandClause], env: &PathEnv) -> Result<LazyClauses, ClauseFailure> {
        let built = specs
            .iter()
            .map(|c| Clause::compile(c, env))
            .collect::<Result<Box<[Clause]>, _>>()?;
        Ok(LazyClauses {
            specs: specs.to_vec(),
            built: OnceLock::from(built),
        })
    }

    pub fn deferred(specs: &[CommandClause]) -> LazyClauses {
        LazyClauses {
            specs: specs.to_vec(),
            built: OnceLock::new(),
        }
    }

    /// The clauses as written (for the gate, [`gate::Gate`]).
    pub fn specs(&self) -> &[CommandClause] {
        &self.specs
    }

    pub fn get(&self) -> &[Clause] {
        self.built.get_or_init(|| {
            self.specs
                .iter()
                // An embedded pack's clause always builds (the test suite builds every
                // one); were one not to, it would match every command: fail closed.
                .map(|c| Clause::deferred(c).unwrap_or_else(|_| Clause::everything()))
                .collect()
        })
    }
}

/// Every `command` predicate of the inbound rules.
#[derive(Debug, Default)]
pub(crate) struct CommandEngine {
    pub preds: Vec<CommandPred>,
    /// What a string must hold for each predicate to be worth parsing it, built on first
    /// use (its automaton is not start-up work).
    gate: OnceLock<gate::Gate>,
}

/// Why a clause failed to compile.
#[derive(Debug)]
pub(crate) struct ClauseFailure {
    pub reason: String,
}

fn glob_set(globs: &[String], paths: bool) -> Result<Option<GlobSet>, ClauseFailure> {
    if globs.is_empty() {
        return Ok(None);
    }
    let mut b = GlobSetBuilder::new();
    for g in globs {
        // `*` stays within one path component, `**` crosses them (as in .gitignore).
        let glob = GlobBuilder::new(g)
            .literal_separator(paths)
            .build()
            .map_err(|e| ClauseFailure {
                reason: format!("{g}: {e}"),
            })?;
        b.add(glob);
    }
    b.build().map(Some).map_err(|e| ClauseFailure {
        reason: e.to_string(),
    })
}

/// Path globs with `~`/`${HOME}`/`${PROJECT_DIR}` expanded.
fn path_globs(globs: &[String], env: &PathEnv) -> Result<PathGlobs, ClauseFailure> {
    let expanded: Vec<String> = globs.iter().map(|g| env.expand_glob_prefix(g)).collect();
    PathGlobs::new(&expanded).map_err(|e| ClauseFailure { reason: e.reason })
}

/// What a path condition that failed to build matches: every path (fail closed).
fn every_path() -> PathGlobs {
    PathGlobs::new(&["**".to_string()]).expect("`**` is a glob")
}

/// Clause globs with `~`/`${HOME}`/`${PROJECT_DIR}` expanded and brace-expanded, to
/// meet glob operands.
fn patterns_of(globs: &[String], env: &PathEnv) -> Box<[Box<str>]> {
    let mut patterns = Vec::new();
    let mut alts = Vec::new();
    for g in globs {
        let g = env.expand_glob_prefix(g);
        alts.clear();
        brace_expand(&g, &mut alts, 256);
        patterns.extend(alts.iter().map(|a| Box::<str>::from(a.as_str())));
    }
    patterns.into()
}

/// [`patterns_of`], tokenised.
fn tokens_of(globs: &[String], env: &PathEnv) -> Vec<Vec<Tok>> {
    patterns_of(globs, env)
        .iter()
        .map(|p| tokenize(p, true))
        .collect()
}

impl PathCond {
    fn compile(p: &CommandPaths, env: &PathEnv) -> Result<PathCond, ClauseFailure> {
        let patterns = patterns_of(&p.patterns, env);
        let mut ancestors = Vec::new();
        for root in &p.ancestors_of {
            let r = Root::new(root, env);
            let mut dir = r.lexical.as_str();
            loop {
                ancestors.push((dir.to_string(), dir == r.lexical));
                match dir.rfind('/') {
                    Some(0) if dir != "/" => dir = "/",
                    Some(i) if i > 0 => dir = &dir[..i],
                    _ => break,
                }
            }
        }
        let pieces: Option<Vec<String>> = patterns
            .iter()
            .map(|p| longest_literal(&tokenize(p, true)).filter(|l| l.len() >= 3))
            .collect();
        let prefilter = pieces
            .as_ref()
            .filter(|p| !p.is_empty())
            // Without the automaton's own prefilter: it is asked about one shell word at a
            // time, mostly a few bytes long, and the pieces start with `/` or `.`, which
            // path-like words are full of, so its skip loop restarted on nearly every
            // byte (about 450 instructions for an 11-byte word).
            .and_then(|p| {
                aho_corasick::AhoCorasickBuilder::new()
                    .prefilter(false)
                    .build(p)
                    .ok()
            });
        let prefilter = prefilter.filter(|ac| {
            !ac.is_match(env.home()) && !ac.is_match(env.project_dir()) && !ac.is_match(env.cwd())
        });
        Ok(PathCond {
            prefilter,
            set: path_globs(&p.patterns, env)?,
            patterns,
            not_under: p.not_under.iter().map(|r| Root::new(r, env)).collect(),
            ancestors,
        })
    }

    /// What a condition that failed to build stands for: every operand (fail closed).
    fn everything() -> PathCond {
        PathCond {
            set: every_path(),
            prefilter: None,
            patterns: Box::new(["**".into()]),
            not_under: Vec::new(),
            ancestors: Vec::new(),
        }
    }
}

impl Clause {
    /// Whether the clause holds for a command whose name is unknown: it names none, or it
    /// says `unknown_name: true`. Such a clause holds for a line that was not fully read.
    fn admits_unknown(&self) -> bool {
        self.unknown_name || self.names.is_none()
    }

    /// A clause with no condition: it holds for every command.
    fn everything() -> Clause {
        Clause {
            text: "{}".to_string(),
            names: None,
            unknown_name: false,
            flags: Box::new([]),
            subcommands: Box::new([]),
            paths: None,
            redirects: None,
            words: None,
            input: 0,
            after_download: false,
            over_find: false,
        }
    }

    /// The clause with every condition built: a failure is the policy's error.
    pub fn compile(c: &CommandClause, env: &PathEnv) -> Result<Clause, ClauseFailure> {
        let paths = match &c.paths {
            None => None,
            Some(p) => Some(OnReach::eager(p.clone(), |p| PathCond::compile(p, env))?),
        };
        let redirects = match c.redirects.is_empty() {
            true => None,
            false => Some(OnReach::eager(
                c.redirects.clone().into_boxed_slice(),
                |g| RedirectCond::compile(g, env),
            )?),
        };
        Clause::with(c, paths, redirects)
    }

    /// The clause with its path and redirect conditions left for the first command that
    /// reaches them (an embedded pack's, which the test suite builds).
    fn deferred(c: &CommandClause) -> Result<Clause, ClauseFailure> {
        let paths = c.paths.clone().map(OnReach::deferred);
        let redirects = (!c.redirects.is_empty())
            .then(|| OnReach::deferred(c.redirects.clone().into_boxed_slice()));
        Clause::with(c, paths, redirects)
    }

    fn with(
        c: &CommandClause,
        paths: Option<OnReach<CommandPaths, PathCond>>,
        redirects: Option<OnReach<Box<[String]>, RedirectCond>>,
    ) -> Result<Clause, ClauseFailure> {
        let mut text = crate::config::policy::describe_clauses(std::slice::from_ref(c));
        if text.chars().count() > 160 {
            text = text.chars().take(157).collect::<String>() + "...}";
        }
        Ok(Clause {
            text,
            names: NameSet::new(&c.names)?,
            unknown_name: c.unknown_name,
            flags: c.flags.clone().into(),
            subcommands: c
                .subcommands
                .iter()
                .map(|s| s.clone().into_boxed_slice())
                .collect(),
            paths,
            redirects,
            words: glob_set(&c.words, false)?,
            input: c.input,
            after_download: c.after_download,
            over_find: c.over_find,
        })
    }
}

/// Per-evaluation buffers.
#[derive(Debug, Default)]
pub(crate) struct CommandScratch {
    pub parsed: Parsed,
    seen: gate::Seen,
    bufs: PathBuffers,
    norm: String,
    normals: Normals,
    alts: Vec<String>,
    /// `: VALUE`, for a path-shaped glob judged as a shell operand.
    operand_line: String,
    /// The value parsed is a file's content given to a write tool, not a command run
    /// now: what the parser read is judged, but a limit it hit does not make the value
    /// "any command" (a 25-deep Lisp file is data; see `Program::scan_arguments`).
    pub data_only: bool,
}

/// The normal forms of the parsed line's operands, each computed once per parse: every
/// clause with a path condition that a command reaches asks about each of its operands
/// (a `cat` of thousands of words was normalised again for each of the five clauses of
/// the default pack that name `cat` or no command).
#[derive(Debug, Default)]
struct Normals {
    /// The [`Parsed::generation`] the forms belong to.
    generation: u64,
    /// Per word index: the span of its normal form in `text`, or [`Normals::UNSET`].
    spans: Vec<(u32, u32)>,
    text: String,
}

impl Normals {
    const UNSET: (u32, u32) = (u32::MAX, 0);

    /// Forget the forms of an earlier parse; after a huge one, give its memory back.
    fn sync(&mut self, p: &Parsed) {
        if self.generation == p.generation() {
            return;
        }
        self.generation = p.generation();
        if self.text.capacity() > 1 << 20 {
            self.text = String::new();
            self.spans = Vec::new();
        }
        self.text.clear();
        self.spans.clear();
    }

    /// The normal form of word `id`, whose literal text is `lit`.
    fn get(
        &mut self,
        id: u32,
        lit: &str,
        env: &PathEnv,
        bufs: &mut PathBuffers,
        tmp: &mut String,
    ) -> &str {
        let i = id as usize;
        if i >= self.spans.len() {
            self.spans.resize(i + 1, Self::UNSET);
        }
        if self.spans[i] == Self::UNSET {
            normalize_word(lit, env, bufs, tmp);
            let start = self.text.len() as u32;
            self.text.push_str(tmp);
            self.spans[i] = (start, self.text.len() as u32);
        }
        let (a, b) = self.spans[i];
        &self.text[a as usize..b as usize]
    }
}

impl CommandScratch {
    /// Forget what the file system looked like ([`PathBuffers::forget`]): called for
    /// each new message.
    pub fn forget_file_system(&mut self) {
        self.bufs.forget();
    }

    /// Parse `value`, a path-shaped glob a file tool was given, as the operand of a
    /// command that does nothing (`:`), so the clauses judge it by its expansions.
    pub fn parse_operand(&mut self, value: &str) {
        self.operand_line.clear();
        self.operand_line.push_str(": ");
        self.operand_line.push_str(value);
        crate::shell::parse_into(&self.operand_line, &mut self.parsed);
    }
}

impl CommandEngine {
    /// Reads `text` into the scratch's [`gate::Seen`], for [`CommandEngine::may_hold`].
    pub fn gate_scan(&self, text: &str, env: &PathEnv, s: &mut CommandScratch) {
        self.gate
            .get_or_init(|| gate::Gate::build(&self.preds, env))
            .scan(text, &mut s.seen);
    }

    /// Whether predicate `index` (of `preds`) could hold for the string last given to
    /// [`CommandEngine::gate_scan`]: when not, the string need not be parsed for it.
    pub fn may_hold(&self, index: usize, s: &CommandScratch) -> bool {
        self.gate.get().is_none_or(|g| g.may_hold(index, &s.seen))
    }

    /// Whether this predicate's clauses meet the command line already in `s.parsed`.
    /// `links`: the scratch's symlink look-ups, for the clauses' `not_under` roots.
    pub fn holds(
        &self,
        p: &CommandPred,
        env: &PathEnv,
        s: &mut CommandScratch,
        links: &mut LinkCache,
    ) -> bool {
        s.normals.sync(&s.parsed);
        if s.parsed.unreadable().is_some()
            && !s.data_only
            && p.clauses.get().iter().any(Clause::admits_unknown)
        {
            return true;
        }
        let commands = s.parsed.commands().len();
        for i in 0..commands {
            let c = s.parsed.commands()[i];
            for cl in p.clauses.get() {
                if clause_holds(cl, &c, env, s, links) {
                    return true;
                }
            }
        }
        false
    }

    /// Why the command line in `s.parsed` meets a predicate: the command and the clause,
    /// for `check`.
    pub fn why(
        &self,
        p: &CommandPred,
        env: &PathEnv,
        s: &mut CommandScratch,
        links: &mut LinkCache,
    ) -> Option<String> {
        s.normals.sync(&s.parsed);
        if let Some(reason) = s.parsed.unreadable()
            && !s.data_only
            && let Some((k, cl)) = p
                .clauses
                .get()
                .iter()
                .enumerate()
                .find(|(_, c)| c.admits_unknown())
        {
            return Some(format!(
                "the command line was not fully read ({reason}); what was not read could be \
                 any command, which meets clause {}: {}",
                k + 1,
                cl.text
            ));
        }
        let commands = s.parsed.commands().len();
        for i in 0..commands {
            let c = s.parsed.commands()[i];
            for (k, cl) in p.clauses.get().iter().enumerate() {
                if clause_holds(cl, &c, env, s, links) {
                    let words: Vec<String> = s
                        .parsed
                        .all_words(&c)
                        .map(|w| s.parsed.lit(w).to_string())
                        .collect();
                    let name = if c.name_unknown {
                        "an unknown command".to_string()
                    } else {
                        format!("`{}`", s.parsed.name_text(&c))
                    };
                    return Some(format!(
                        "{name} (from `{}`) meets clause {}: {}",
                        words.join(" "),
                        k + 1,
                        cl.text
                    ));
                }
            }
        }
        None
    }
}

fn clause_holds(
    cl: &Clause,
    c: &Command,
    env: &PathEnv,
    s: &mut CommandScratch,
    links: &mut LinkCache,
) -> bool {
    let CommandScratch {
        parsed: p,
        bufs,
        norm,
        normals,
        alts,
        ..
    } = s;
    let p = &*p;
    // The cheap conditions first: every clause is asked about every command.
    if cl.input != 0 && c.input & cl.input == 0 {
        return false;
    }
    if cl.after_download && !c.after_download {
        return false;
    }
    if cl.over_find && !c.fans_out {
        return false;
    }
    if cl.names.is_some() || cl.unknown_name {
        let named = !c.name_unknown
            && cl.names.as_ref().is_some_and(|set| {
                p.name(c)
                    .is_some_and(|w| set.is_match(p.name_text(c), p.lit(w)))
            });
        if !(named || (cl.unknown_name && c.name_unknown)) {
            return false;
        }
    }
    if !cl.flags.is_empty() && !has_flag(cl, c, p) {
        return false;
    }
    if !cl.subcommands.is_empty() && !has_subcommand(cl, c, p) {
        return false;
    }
    if let Some(words) = &cl.words
        && !p.args(c).any(|w| words.is_match(p.lit(w)))
    {
        return false;
    }
    if let Some(rc) = &cl.redirects {
        let rc = rc
            .get(|g| RedirectCond::compile(g, env).unwrap_or_else(|_| RedirectCond::everything()));
        let set = &rc.set;
        let mut hit = false;
        for r in p.redirects(c) {
            if !matches!(r.kind, RedirectKind::Output | RedirectKind::Input) {
                continue;
            }
            let w = p.word(r.target);
            let t = p.lit(w);
            normalize_word(t, env, bufs, norm);
            if set.is_match(t) || set.is_match(norm.as_str()) {
                hit = true;
                break;
            }
            if w.flags & (GLOB | BRACE | COMPUTED) != 0 {
                alts.clear();
                brace_expand(p.pattern(w), alts, 64);
                for a in alts.iter() {
                    normalize_pattern(a, env, bufs, norm);
                    let word = tokenize(norm, false);
                    if rc.patterns.iter().any(|t| meets(&word, &tokenize(t, true))) {
                        hit = true;
                    }
                }
                if hit {
                    break;
                }
            }
        }
        if !hit {
            return false;
        }
    }
    if let Some(pc) = &cl.paths {
        let pc = pc.get(|p| PathCond::compile(p, env).unwrap_or_else(|_| PathCond::everything()));
        let mut bufs = PathScratch {
            bufs,
            norm,
            normals,
            alts,
            links,
        };
        if !p
            .arg_ids(c)
            .any(|id| path_word_meets(pc, p, id, c.fans_out, env, &mut bufs))
        {
            return false;
        }
    }
    true
}

fn has_flag(cl: &Clause, c: &Command, p: &Parsed) -> bool {
    for f in cl.flags.iter() {
        if c.fans_out && matches!(f.as_str(), "-r" | "-R" | "--recursive") {
            return true;
        }
        for w in p.args(c) {
            let t = p.lit(w);
            if t == "--" {
                break;
            }
            // An operand computed out of sight (`printf -v o`, `read`, decoded) may be
            // any flag.
            if flag_spelled(f, t) || (w.flags & COMPUTED != 0 && hidden(p, w)) {
                return true;
            }
        }
    }
    false
}

/// Whether a computed word holds a fragment computed out of sight ([`ANY_HIDDEN`]).
fn hidden(p: &Parsed, w: &Word) -> bool {
    p.pattern(w).contains(ANY_HIDDEN)
}

/// Whether the operand `t` spells the flag `f`.
fn flag_spelled(f: &str, t: &str) -> bool {
    if let Some(long) = f.strip_prefix("--") {
        let Some(tl) = t.strip_prefix("--") else {
            return false;
        };
        let tl = tl.split('=').next().unwrap_or(tl);
        // GNU getopt accepts any unambiguous prefix: `--recur` for `--recursive`.
        return tl == long || (tl.len() >= 2 && long.starts_with(tl));
    }
    let short = &f[1..];
    if short.chars().count() == 1 {
        let Some(rest) = t.strip_prefix('-') else {
            return false;
        };
        !rest.starts_with('-')
            && !rest.is_empty()
            && rest.bytes().all(|b| b.is_ascii_alphanumeric())
            && rest.contains(short)
    } else {
        t == f || t.strip_prefix(f).is_some_and(|r| r.starts_with('='))
    }
}

/// Whether the leading operands spell one of the clause's subcommands; a computed operand
/// (`"$@"`, `$(…)`, what `xargs` reads) may be any word.
fn has_subcommand(cl: &Clause, c: &Command, p: &Parsed) -> bool {
    let positionals = || {
        p.args(c)
            .map(|w| (p.lit(w), w.flags & COMPUTED != 0))
            .filter(|(t, any)| *any || !t.starts_with('-'))
    };
    cl.subcommands.iter().any(|seq| {
        (0..2).any(|at| {
            let mut ops = positionals().skip(at);
            seq.iter()
                .all(|want| ops.next().is_some_and(|(t, any)| any || t == want))
        })
    })
}

/// The buffers [`path_word_meets`] works in.
struct PathScratch<'a> {
    bufs: &'a mut PathBuffers,
    norm: &'a mut String,
    normals: &'a mut Normals,
    alts: &'a mut Vec<String>,
    links: &'a mut LinkCache,
}

/// Whether operand `id` (or the value of a `key=value` operand) meets the path condition.
fn path_word_meets(
    pc: &PathCond,
    p: &Parsed,
    id: u32,
    fans_out: bool,
    env: &PathEnv,
    s: &mut PathScratch<'_>,
) -> bool {
    let w = p.word(id);
    let is_glob = w.flags & (GLOB | BRACE | COMPUTED) != 0;
    if !is_glob {
        // The common case, without copies: the operand (its normal form shared by every
        // clause), then the value after `key=`.
        let lit = p.lit(w);
        if lit.is_empty() {
            return false;
        }
        return literal_meets(pc, lit, fans_out, env, s, Some(id))
            || key_value(lit).is_some_and(|v| literal_meets(pc, v, fans_out, env, s, None));
    }
    // Taken out while its entries are judged (which needs the rest of `s`), then put back.
    let mut alts = std::mem::take(&mut *s.alts);
    alts.clear();
    brace_expand(p.pattern(w), &mut alts, 64);
    let n = alts.len();
    for k in 0..n {
        if let Some(v) = key_value(&alts[k]) {
            let v = v.to_string();
            alts.push(v);
        }
    }
    let hit = alts.iter().any(|a| {
        if has_meta(a) {
            glob_meets(pc, a, fans_out, env, s)
        } else {
            literal_meets(pc, &unescape(a), fans_out, env, s, None)
        }
    });
    *s.alts = alts;
    hit
}

/// The value of a `key=value` operand (`of=/dev/sda`, `--output=x`).
fn key_value(s: &str) -> Option<&str> {
    // The key's characters, then `=`: reading only the key, not the whole word (asked
    // about every operand, for every clause with a path condition).
    let eq = s
        .bytes()
        .position(|b| !(b.is_ascii_alphanumeric() || b == b'-' || b == b'_'))?;
    (s.as_bytes()[eq] == b'=').then(|| &s[eq + 1..])
}

/// A command run over what `find` lists (`fans_out`) is selective: the project itself as
/// its start is not a delete of the whole project; a directory above it still is.
/// `memo`: the id of `lit` when it is a whole word of the parse, whose normal form
/// `s.normals` keeps.
fn literal_meets(
    pc: &PathCond,
    lit: &str,
    fans_out: bool,
    env: &PathEnv,
    s: &mut PathScratch<'_>,
    memo: Option<u32>,
) -> bool {
    if lit.starts_with('-') {
        return false;
    }
    if pc.ancestors.is_empty()
        && !lit.starts_with(['~', '$'])
        && !lit.contains('%')
        && pc.prefilter.as_ref().is_some_and(|ac| !ac.is_match(lit))
    {
        // Normalising adds only HOME or the project directory, which hold no piece.
        return false;
    }
    let PathScratch {
        bufs,
        norm,
        normals,
        links,
        ..
    } = s;
    let norm = match memo {
        Some(id) => normals.get(id, lit, env, bufs, norm),
        None => {
            normalize_word(lit, env, bufs, norm);
            norm.as_str()
        }
    };
    if pc
        .ancestors
        .iter()
        .any(|(a, is_root)| a == norm && !(fans_out && *is_root))
    {
        return true;
    }
    // A normal form equal to the written one is not read again.
    let matched = pc.set.is_match(lit) || norm != lit && pc.set.is_match(norm);
    matched && outside_every_root(pc, lit, norm, env, links)
}

/// Whether the normal form `norm` of the operand `written` lies outside every `not_under`
/// root of the condition, judged by what it opens (its symlinks resolved, as for the
/// argument rules).
fn outside_every_root(
    pc: &PathCond,
    written: &str,
    norm: &str,
    env: &PathEnv,
    links: &mut LinkCache,
) -> bool {
    if pc.not_under.is_empty() {
        return true;
    }
    let opened = resolve_links(
        norm,
        is_relative(written).then_some(env.cwd()),
        true,
        &mut links.lookups(),
    );
    pc.not_under.iter().all(|r| !r.contains(norm, &opened))
}

fn glob_meets(
    pc: &PathCond,
    pat: &str,
    fans_out: bool,
    env: &PathEnv,
    s: &mut PathScratch<'_>,
) -> bool {
    if pat.starts_with('-') {
        return false;
    }
    normalize_pattern(pat, env, s.bufs, s.norm);
    let glob = s.norm.clone();
    // `dir/*` removes everything in `dir`: judge it as `dir` too.
    if let Some(dir) = glob.strip_suffix("/*")
        && !has_meta(dir)
    {
        let dir = if dir.is_empty() { "/" } else { dir };
        if literal_meets(pc, dir, fans_out, env, s, None) {
            return true;
        }
    }
    let word = tokenize(&glob, false);
    if pc
        .ancestors
        .iter()
        .any(|(a, is_root)| !(fans_out && *is_root) && meets(&word, &tokenize(a, false)))
    {
        return true;
    }
    let word_last = last_component(&word);
    let hit = pc.patterns.iter().any(|pattern| {
        // Most patterns end in a plain name: compare their literal endings first (a
        // string both match ends in both: `*.rs` cannot meet `**/id_rsa`), then the last
        // components (a few tokens each), and the whole globs only when those can meet.
        if !tail_agrees(&word, pattern) {
            return false;
        }
        let t = tokenize(pattern, true);
        match (word_last, last_component(&t)) {
            (Some(w), Some(l)) if !meets(w, l) => false,
            _ => meets(&word, &t),
        }
    });
    if !hit {
        return false;
    }
    // Outside `not_under` unless every expansion stays inside: the literal directory
    // before the first metacharacter is under the root.
    let fixed = match glob.find(['*', '?', '[', ANY, ANY_HIDDEN]) {
        Some(i) => glob[..i].rfind('/').map_or("/", |j| &glob[..j.max(1)]),
        None => glob.as_str(),
    };
    outside_every_root(pc, pat, fixed, env, s.links)
}

/// Whether the literal endings of a tokenised glob and a clause glob agree (the shorter
/// one ends the longer): otherwise no string matches both. A metacharacter or escape in
/// the clause glob ends the comparison (the answer is then "may meet").
fn tail_agrees(word: &[Tok], pattern: &str) -> bool {
    word.iter()
        .rev()
        .zip(pattern.chars().rev())
        .map_while(|(t, c)| match t {
            Tok::Lit(x) if !matches!(c, '*' | '?' | '[' | ']' | '{' | '}' | '\\') => Some(*x == c),
            _ => None,
        })
        .all(|same| same)
}

/// Normalise a glob operand as a path; one that starts with a computed fragment is
/// anything already (absolute or relative), and is kept as written.
fn normalize_pattern(pat: &str, env: &PathEnv, bufs: &mut PathBuffers, norm: &mut String) {
    if pat.starts_with([ANY, ANY_HIDDEN]) {
        norm.clear();
        norm.push_str(pat);
    } else {
        normalize_word(pat, env, bufs, norm);
    }
}

/// Normalise a shell word as a path: the parser writes `$HOME` as `${HOME}` wherever it
/// stands, and the shell expands it there too (`C:/../../$HOME/docs`), not only first.
fn normalize_word(word: &str, env: &PathEnv, bufs: &mut PathBuffers, norm: &mut String) {
    if !word.get(1..).is_some_and(|rest| rest.contains("${HOME}")) {
        normalize_into(word, env, bufs, norm);
        return;
    }
    // Rare: a copy is fine. The leading one stays for the normaliser, which reads it as
    // HOME (and knows a Windows HOME's spelling).
    let (head, rest) = match word.strip_prefix("${HOME}") {
        Some(rest) => ("${HOME}", rest),
        None => ("", word),
    };
    let expanded = format!("{head}{}", rest.replace("${HOME}", env.home()));
    normalize_into(&expanded, env, bufs, norm);
}

fn has_meta(s: &str) -> bool {
    if s.contains([ANY, ANY_HIDDEN]) {
        return true;
    }
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'*' | b'?' => return true,
            b'[' => {
                // `[x]` escapes one character; a longer class is a glob.
                if b.get(i + 2) == Some(&b']') && b.get(i + 1) != Some(&b'!') {
                    i += 3;
                    continue;
                }
                return true;
            }
            _ => {}
        }
        i += 1;
    }
    false
}

/// `[*]` → `*`: a pattern with no metacharacter left, as the literal it stands for.
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'[' && b.get(i + 2) == Some(&b']') {
            let ch = s[i + 1..].chars().next().unwrap_or('[');
            if ch.len_utf8() == 1 {
                out.push(ch);
                i += 3;
                continue;
            }
        }
        let ch = s[i..].chars().next().unwrap_or(' ');
        out.push(ch);
        i += ch.len_utf8();
    }
    out
}

/// Expand `{a,b}` and `{1..3}` (bash brace expansion), at most `limit` results; a
/// brace that does not expand stays as written.
pub(crate) fn brace_expand(s: &str, out: &mut Vec<String>, limit: usize) {
    expand_braces(s, out, limit, 0);
}

/// Nesting bound of [`brace_expand`]: each brace group is one level of recursion, and a
/// word with thousands of groups must not exhaust the stack. Past it the rest of the
/// word stays as written.
const MAX_BRACE_GROUPS: usize = 32;

fn expand_braces(s: &str, out: &mut Vec<String>, limit: usize, depth: usize) {
    if depth >= MAX_BRACE_GROUPS {
        if out.len() < limit {
            out.push(s.to_string());
        }
        return;
    }
    let b = s.as_bytes();
    // The first `{` that has a matching `}` with a top-level `,` or `..`.
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'[' if b.get(i + 2) == Some(&b']') => {
                i += 3;
                continue;
            }
            b'\\' => {
                i += 2;
                continue;
            }
            b'{' => {
                let mut level = 0;
                let mut parts = Vec::new();
                let mut start = i + 1;
                let mut j = i + 1;
                let mut close = None;
                while j < b.len() {
                    match b[j] {
                        b'[' if b.get(j + 2) == Some(&b']') => j += 2,
                        b'{' => level += 1,
                        b'}' if level == 0 => {
                            close = Some(j);
                            break;
                        }
                        b'}' => level -= 1,
                        b',' if level == 0 => {
                            parts.push(&s[start..j]);
                            start = j + 1;
                        }
                        _ => {}
                    }
                    j += 1;
                }
                if let Some(close) = close {
                    let inner = &s[i + 1..close];
                    let (pre, post) = (&s[..i], &s[close + 1..]);
                    if !parts.is_empty() {
                        parts.push(&s[start..close]);
                        for part in parts {
                            if out.len() >= limit {
                                return;
                            }
                            expand_braces(&format!("{pre}{part}{post}"), out, limit, depth + 1);
                        }
                        return;
                    }
                    if let Some((x, y)) = inner.split_once("..")
                        && let (Ok(x), Ok(y)) = (x.parse::<i64>(), y.parse::<i64>())
                    {
                        let (lo, hi) = (x.min(y), x.max(y));
                        for v in lo..=hi.min(lo + limit as i64) {
                            if out.len() >= limit {
                                return;
                            }
                            expand_braces(&format!("{pre}{v}{post}"), out, limit, depth + 1);
                        }
                        return;
                    }
                    if let Some((x, y)) = inner.split_once("..")
                        && x.chars().count() == 1
                        && y.chars().count() == 1
                    {
                        let (x, y) = (
                            x.chars().next().unwrap_or('a'),
                            y.chars().next().unwrap_or('a'),
                        );
                        let (lo, hi) = (x.min(y), x.max(y));
                        for v in lo..=hi {
                            if out.len() >= limit {
                                return;
                            }
                            expand_braces(&format!("{pre}{v}{post}"), out, limit, depth + 1);
                        }
                        return;
                    }
                }
            }
            _ => {}
        }
        i += 1;
    }
    if out.len() < limit {
        out.push(s.to_string());
    }
}

/// The tokens after the last `/`, unless they hold a `**` (which reads across components).
fn last_component(tokens: &[Tok]) -> Option<&[Tok]> {
    let start = tokens
        .iter()
        .rposition(|t| *t == Tok::Lit('/'))
        .map_or(0, |i| i + 1);
    let last = &tokens[start..];
    (!last
        .iter()
        .any(|t| matches!(t, Tok::Star { slash: true, .. })))
    .then_some(last)
}

/// The longest run of plain characters (within one path component) in a tokenised glob.
fn longest_literal(tokens: &[Tok]) -> Option<String> {
    let mut best = String::new();
    let mut cur = String::new();
    for t in tokens {
        match t {
            // Pieces never span a separator: `\` and `/` differ between the written and
            // the normal form.
            Tok::Lit(c) if *c != '/' && *c != '\\' => cur.push(*c),
            _ => {
                if cur.len() > best.len() {
                    best = std::mem::take(&mut cur);
                }
                cur.clear();
            }
        }
    }
    if cur.len() > best.len() {
        best = cur;
    }
    (!best.is_empty()).then_some(best)
}

/// One element of a glob.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    Lit(char),
    /// `?`: one character, not `/`; `nodot`: not `.` either (it starts a component of a
    /// shell word, where bash never matches a leading dot without `dotglob`).
    One {
        nodot: bool,
    },
    /// `*`; `slash` when it may match `/` (`**`); `bare` when it is a whole component of
    /// a shell word (`dir/*`): it stands for "everything", which the rules about whole
    /// directories judge, not for a spelling of one protected name, so it reads only
    /// what a wildcard of the other glob reads.
    Star {
        slash: bool,
        bare: bool,
        /// A value from outside the line ([`ANY`]) inside a component: it may supply
        /// letters of a protected name (`~/.ss${x}h`), not the dots that make one
        /// (`x:$PATH` is not `x:.kdbx`).
        nodot: bool,
    },
    Class {
        neg: bool,
        ranges: Vec<(char, char)>,
        nodot: bool,
    },
}

/// A glob as tokens. `policy`: a clause glob, where `\` escapes; in a shell word it was
/// already removed, and `[x]` escapes.
fn tokenize(g: &str, policy: bool) -> Vec<Tok> {
    let cs: Vec<char> = g.chars().collect();
    let mut out = Vec::with_capacity(cs.len());
    let mut i = 0;
    while i < cs.len() {
        match cs[i] {
            '\\' if policy && i + 1 < cs.len() => {
                out.push(Tok::Lit(cs[i + 1]));
                i += 2;
                continue;
            }
            '*' => {
                let first = i;
                while i + 1 < cs.len() && cs[i + 1] == '*' {
                    i += 1;
                }
                let comp_start = first == 0 || cs[first - 1] == '/';
                let comp_end = i + 1 == cs.len() || cs[i + 1] == '/';
                // `**` crosses `/`; `*` does not (shell words, and the clause globs,
                // which are built with `literal_separator`).
                let slash = i > first;
                if !policy && comp_start && !comp_end {
                    // `*.rs`, `*rc`: at least one character, and not a leading dot.
                    out.push(Tok::One { nodot: true });
                }
                out.push(Tok::Star {
                    slash,
                    bare: !policy && comp_start && comp_end,
                    nodot: false,
                });
            }
            // A computed fragment of a shell word: any text, `/` and dots included.
            ANY | ANY_HIDDEN if !policy => {
                let comp_start = i == 0 || cs[i - 1] == '/';
                let comp_end = i + 1 == cs.len() || cs[i + 1] == '/';
                // A value from outside the line stays within its component (a `/` in
                // it would be a path the line did not write); a hidden one reads across.
                out.push(Tok::Star {
                    slash: cs[i] == ANY_HIDDEN,
                    bare: cs[i] == ANY && comp_start && comp_end,
                    nodot: cs[i] == ANY,
                });
            }
            '?' => out.push(Tok::One {
                nodot: !policy && (i == 0 || cs[i - 1] == '/'),
            }),
            '[' => {
                let mut j = i + 1;
                let neg = j < cs.len() && (cs[j] == '!' || cs[j] == '^');
                if neg {
                    j += 1;
                }
                let first = j;
                let mut ranges = Vec::new();
                let mut closed = false;
                while j < cs.len() {
                    if cs[j] == ']' && j > first {
                        closed = true;
                        break;
                    }
                    if j + 2 < cs.len() && cs[j + 1] == '-' && cs[j + 2] != ']' {
                        ranges.push((cs[j], cs[j + 2]));
                        j += 3;
                    } else {
                        ranges.push((cs[j], cs[j]));
                        j += 1;
                    }
                }
                if closed {
                    let nodot = !policy && (i == 0 || cs[i - 1] == '/');
                    out.push(Tok::Class { neg, ranges, nodot });
                    i = j + 1;
                    continue;
                }
                out.push(Tok::Lit('['));
            }
            c => out.push(Tok::Lit(c)),
        }
        i += 1;
    }
    out
}

fn class_has(neg: bool, ranges: &[(char, char)], c: char) -> bool {
    ranges.iter().any(|&(a, b)| a <= c && c <= b) != neg
}

/// Whether a token can read `c`.
fn reads(t: &Tok, c: char) -> bool {
    match t {
        Tok::Lit(x) => *x == c,
        Tok::One { nodot } => c != '/' && !(*nodot && c == '.'),
        Tok::Star { slash, nodot, .. } => (*slash || c != '/') && !(*nodot && c == '.'),
        Tok::Class { neg, ranges, nodot } => {
            c != '/' && !(*nodot && c == '.') && class_has(*neg, ranges, c)
        }
    }
}

/// Whether one character can be read by both tokens (neither being a star).
fn chars_meet(a: &Tok, b: &Tok) -> bool {
    match (a, b) {
        (Tok::Lit(c), t) | (t, Tok::Lit(c)) => reads(t, *c),
        (
            Tok::Class {
                ranges, neg: false, ..
            },
            t,
        )
        | (
            t,
            Tok::Class {
                ranges, neg: false, ..
            },
        ) => ranges.iter().any(|&(lo, hi)| {
            (lo..=hi)
                .take(256)
                .any(|c| reads(t, c) && reads(a, c) && reads(b, c))
        }),
        // Two wildcards that each exclude at most `/` and `.`: some letter fits both.
        _ => true,
    }
}

/// Whether a star may read the character the other token reads.
fn star_reads(star: &Tok, t: &Tok) -> bool {
    match t {
        Tok::Lit(c) => reads(star, *c),
        _ => true,
    }
}

/// Whether two globs can match a common string: a search over pairs of positions
/// (the product of the two automata), O(len(a) × len(b)). `a` is a shell word, `b` a
/// clause glob.
#[cfg(test)]
pub(crate) fn meets_str(a: &str, b: &str) -> bool {
    meets(&tokenize(a, false), &tokenize(b, true))
}

/// Visited states and the work list of [`meets`].
type MeetBuffers = (Vec<bool>, Vec<(usize, usize)>);

thread_local! {
    /// The visited states and the work list of [`meets`], reused: it runs once per
    /// pattern for every glob operand, and allocating them each time was most of its cost.
    static MEET_BUFFERS: std::cell::RefCell<MeetBuffers> =
        const { std::cell::RefCell::new((Vec::new(), Vec::new())) };
}

fn meets(a: &[Tok], b: &[Tok]) -> bool {
    MEET_BUFFERS.with(|bufs| match bufs.try_borrow_mut() {
        Ok(mut bufs) => {
            let (seen, todo) = &mut *bufs;
            meets_with(a, b, seen, todo)
        }
        Err(_) => meets_with(a, b, &mut Vec::new(), &mut Vec::new()),
    })
}

fn meets_with(a: &[Tok], b: &[Tok], seen: &mut Vec<bool>, todo: &mut Vec<(usize, usize)>) -> bool {
    let (n, m) = (a.len(), b.len());
    seen.clear();
    seen.resize((n + 1) * (m + 1), false);
    todo.clear();
    todo.push((0usize, 0usize));
    while let Some((i, j)) = todo.pop() {
        let k = i * (m + 1) + j;
        if seen[k] {
            continue;
        }
        seen[k] = true;
        if i == n && j == m {
            return true;
        }
        let sa = match a.get(i) {
            Some(t @ Tok::Star { bare, .. }) => Some((t, *bare)),
            _ => None,
        };
        let sb = match b.get(j) {
            Some(t @ Tok::Star { .. }) => Some(t),
            _ => None,
        };
        // A star matches the empty string.
        if sa.is_some() {
            todo.push((i + 1, j));
        }
        if sb.is_some() {
            todo.push((i, j + 1));
        }
        match (sa, sb) {
            // Both stars read the same characters: no change of state.
            (Some(_), Some(_)) => {}
            (Some((star, bare)), None) => {
                if !bare
                    && let Some(t) = b.get(j)
                    && star_reads(star, t)
                {
                    todo.push((i, j + 1));
                }
            }
            (None, Some(star)) => {
                if let Some(t) = a.get(i)
                    && star_reads(star, t)
                {
                    todo.push((i + 1, j));
                }
            }
            (None, None) => {
                if let (Some(x), Some(y)) = (a.get(i), b.get(j))
                    && chars_meet(x, y)
                {
                    todo.push((i + 1, j + 1));
                }
            }
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_meet_when_some_string_matches_both() {
        let home = "/home/u";
        assert!(meets_str(
            &format!("{home}/.ss[h]/id_rs[a]"),
            &format!("{home}/.ssh/**")
        ));
        assert!(meets_str("/p/.e?v", "**/.env"));
        assert!(meets_str("/etc/sha*", "/etc/shadow"));
        assert!(meets_str(
            "/h?me",
            "/{bin,home}".replace("{bin,home}", "home").as_str()
        ));
        assert!(!meets_str("/p/src/*.rs", "**/.env"));
        assert!(!meets_str("/etc/pass*", "/etc/shadow"));
        assert!(!meets_str("/p/*/x", "/p/a/b/x"));
        assert!(meets_str("/p/*/x", "/p/**"));
        // bash never matches a leading dot with a wildcard; a bare `*` is "everything".
        assert!(!meets_str("/p/src/*/mod.rs", "**/.ssh/**"));
        assert!(!meets_str("/p/*", "**/id_rsa"));
        assert!(!meets_str("/p/*.env", "**/.env"));
        assert!(meets_str("/home/u/.ssh/*", "**/.ssh/**"));
        assert!(meets_str("/proc/[s]elf/environ", "/proc/*/environ"));
    }

    #[test]
    fn computed_fragments_meet_as_wildcards() {
        // A value from outside the line supplies letters within a component...
        assert!(meets_str(&format!("/h/.ss{ANY}h/id_rsa"), "**/.ssh/**"));
        assert!(meets_str(&format!("/h/.{ANY}"), "**/.ssh"));
        // ...but neither the dots that make a name (`~/${d}wall` is `~/.mcpwall` only where
        // the line sets `d=.mcp`, which it then expands) nor a `/`...
        assert!(!meets_str(&format!("/h/{ANY}wall"), "**/.mcpwall"));
        assert!(!meets_str(&format!("/p/x:{ANY}"), "**/*.kdbx"));
        assert!(!meets_str(&format!("/p/a{ANY}"), "**/.ssh/**"));
        // ...and as a whole component it is "some entry", not a spelling of each name.
        assert!(!meets_str(&format!("/p/{ANY}"), "**/.ssh"));
        assert!(!meets_str(&ANY.to_string(), "/"));
        assert!(meets_str(&format!("{ANY}/id_rsa"), "**/id_rsa"));
        // A value computed out of sight is any text, `/` and dots included.
        assert!(meets_str(&ANY_HIDDEN.to_string(), "**/.ssh/**"));
        assert!(meets_str(&format!("/h/{ANY_HIDDEN}/config"), "/h/.ssh/**"));
    }

    #[test]
    fn braces_expand() {
        let mut out = Vec::new();
        brace_expand("~/.ssh{,}/id_rs{a,}", &mut out, 64);
        assert_eq!(
            out,
            [
                "~/.ssh/id_rsa",
                "~/.ssh/id_rs",
                "~/.ssh/id_rsa",
                "~/.ssh/id_rs"
            ]
        );
        out.clear();
        brace_expand("/{home,etc}", &mut out, 64);
        assert_eq!(out, ["/home", "/etc"]);
    }

    #[test]
    fn flags_in_any_spelling() {
        assert!(flag_spelled("-r", "-rf"));
        assert!(flag_spelled("-r", "-fr"));
        assert!(flag_spelled("--recursive", "--recursive"));
        assert!(flag_spelled("--recursive", "--recur"));
        assert!(!flag_spelled("-r", "--force"));
        assert!(flag_spelled("-delete", "-delete"));
        assert!(!flag_spelled("-r", "/tmp/-r"));
    }
}
