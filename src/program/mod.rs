//! The compiled, immutable policy: stage three of three.

pub(crate) mod engine;

use std::borrow::Cow;
use std::ops::Range;

use regex_automata::meta;

use crate::config::policy::{Action, Settings, Span};
use crate::frame::{Frame, Message, Token, TokenKind};
use crate::paths::{PathBuffers, PathEnv, Root};
use crate::secrets::{Detector, DetectorCache, Finding};
use crate::text::normalize::{is_plain, normalize_keeping_case};
use crate::verdict::{Decision, Outcome, Redaction, RuleAction, RuleId};
use engine::glob::GlobEngine;
use engine::literal::LiteralEngine;
use engine::path::NotUnderCheck;
use engine::regex::{RegexEngine, SetScratch};
use engine::{Needs, PredMap};

/// Context for judging a server message: what it answers.
#[derive(Debug, Clone, Copy, Default)]
pub struct CallInfo<'a> {
    /// Method of the request this message answers (or the message's own method).
    pub method: Option<&'a str>,
    /// Tool of the `tools/call` it answers.
    pub tool: Option<&'a str>,
    /// The server's name.
    pub server: &'a str,
}

/// A command line as the `command` matcher understood it, for `check`.
#[derive(Debug, Clone)]
pub struct CommandExplanation {
    /// The simple commands, `; `-separated, with what feeds them.
    pub understood: String,
    /// Which command met which clause.
    pub why: String,
}

/// The engine a condition was compiled into (for `explain-policy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    /// The method globs.
    MethodGlob,
    /// The tool-name globs.
    ToolGlob,
    /// The server-name globs (outbound).
    ServerGlob,
    /// The multi-pattern argument regex.
    ArgRegex,
    /// The argument-value globs.
    ArgGlob,
    /// Path containment, with symlinks resolved.
    NotUnder,
    /// The secret detectors.
    Secrets,
    /// The shell command-line parser and its clauses.
    Command,
    /// The `response_contains` Aho-Corasick automaton.
    ContainsLiteral,
    /// The multi-pattern `response_contains_regex` regex.
    ContainsRegex,
    /// A comparison on the message size.
    Size,
}

/// One condition of a compiled rule, for `explain-policy`.
#[derive(Debug, Clone)]
pub struct ConditionInfo {
    /// The condition as written, e.g. `tool: "bash*"`, `command: regex "rm -rf"`.
    pub what: String,
    pub engine: Engine,
}

/// A compiled rule's identity, for messages, audit and `explain-policy`.
#[derive(Debug, Clone)]
pub struct RuleInfo {
    pub name: String,
    pub message: Option<String>,
    /// `file:line:column` of the rule.
    pub location: String,
    pub action: RuleAction,
    /// `remember: session` on an `ask` rule: an approval holds for identical calls.
    pub remember_session: bool,
    pub description: Option<String>,
    /// The rule's span in its source.
    pub span: Span,
    /// Every condition (all must hold), in the order written.
    pub conditions: Vec<ConditionInfo>,
}

pub(crate) const NO_SEL: u32 = u32::MAX - 1;
pub(crate) const ANY_SEL: u32 = u32::MAX;
const NONE: u32 = u32::MAX;

/// An inbound rule as the evaluator sees it: its method and tool predicates are
/// checked when its argument predicates are all satisfied.
#[derive(Debug, Clone, Copy)]
pub(crate) struct InRule {
    pub method: u32,
    /// Tool predicate, or `NONE`.
    pub tool: u32,
    /// Number of distinct argument predicates.
    pub n_args: u32,
    /// How many of them are `not_under` predicates.
    pub n_not_under: u32,
    pub allow: bool,
    /// `action: ask` (neither allow nor deny until a human answers).
    pub ask: bool,
}

#[derive(Debug)]
pub(crate) struct Inbound {
    pub n_preds: usize,
    pub rules: Box<[InRule]>,
    /// Selector of each predicate: an index into the named arguments, `ANY_SEL`, or
    /// `NO_SEL` for method and tool predicates.
    pub pred_selector: Box<[u32]>,
    /// Argument predicate → rules that need it.
    pub pred_rules: PredMap,
    pub method_globs: Option<GlobEngine>,
    pub tool_globs: Option<GlobEngine>,
    /// Method predicate → rules with no tool and no argument condition.
    pub by_method: PredMap,
    /// Tool predicate → rules with a tool and no argument condition.
    pub by_tool: PredMap,
    /// Looked up for every argument of every call: FxHash, not SipHash (the keys come
    /// from the policy, so there is no flooding to resist).
    pub arg_names: rustc_hash::FxHashMap<Box<str>, u32>,
    pub named_needs: Box<[Needs]>,
    pub any_needs: Needs,
    pub regex: Option<RegexEngine>,
    pub glob: Option<GlobEngine>,
    pub not_under: Box<[NotUnderCheck]>,
    pub roots: Box<[Root]>,
    /// `(pred, selector)` of every `secrets` predicate.
    pub secrets: Box<[(u32, u32)]>,
    pub command: Option<engine::command::CommandEngine>,
}

#[derive(Debug)]
pub(crate) struct OutRule {
    /// Every predicate: all must hold.
    pub preds: Box<[u32]>,
    /// The cheap ones (globs, size): if one fails, the rule's content need not be scanned.
    pub gates: Box<[u32]>,
    pub content: Needs,
    pub contains: u32,
    pub regex: u32,
    pub secrets: bool,
    pub action: RuleAction,
    /// An untrusted file's deny/redact: judged even after a trusted rule decided.
    pub additive: bool,
}

impl OutRule {
    /// Whether the rule matches on content (secrets, literals, patterns), whose spans a
    /// redaction cuts out.
    pub fn has_content(&self) -> bool {
        self.secrets || self.contains != NONE || self.regex != NONE
    }
}

#[derive(Debug)]
pub(crate) struct Outbound {
    pub n_preds: usize,
    pub rules: Box<[OutRule]>,
    /// Index of the first additive rule (they all come after the trusted ones); the
    /// rules' length when there are none.
    pub additive_from: usize,
    pub method_globs: Option<GlobEngine>,
    pub tool_globs: Option<GlobEngine>,
    pub server_globs: Option<GlobEngine>,
    /// `(threshold, pred)`: holds when the message is larger than the threshold.
    pub sizes: Box<[(u64, u32)]>,
    pub secrets_pred: u32,
    pub literal: Option<LiteralEngine>,
    pub regex: Option<RegexEngine>,
    /// For each contains-regex pattern used by a redact rule, a regex that finds where.
    pub span_regexes: Box<[Option<meta::Regex>]>,
}

/// The text of a string id (`None` for a number): borrowed unless it has escapes, which
/// are decoded so that `"\u0067hp_…"` is judged as the token it spells.
pub(crate) fn string_id(raw: &[u8]) -> Option<std::borrow::Cow<'_, str>> {
    let inner = raw.strip_prefix(b"\"")?.strip_suffix(b"\"")?;
    if inner.contains(&b'\\') {
        serde_json::from_slice::<String>(raw)
            .ok()
            .map(std::borrow::Cow::Owned)
    } else {
        std::str::from_utf8(inner)
            .ok()
            .map(std::borrow::Cow::Borrowed)
    }
}

/// The compiled policy. Immutable, `Send + Sync`; share it as `Arc<Program>`.
///
/// # Precedence
///
/// Inbound (`evaluate_request`), resolved after one pass of every engine over the
/// message's arguments:
/// 1. the lowest-numbered rule (YAML order) whose conditions all hold decides
///    (`allow` or `deny`); a rule that names no method applies to `tools/call` only;
///    a rule one of whose `exceptions` also holds is passed over for this message, and
///    the next such rule decides ([`Scratch::excepted`] says which were);
/// 2. otherwise `default_action` decides, for the methods that act on the world:
///    `tools/call`, `resources/read`, `prompts/get`, `completion/complete`;
/// 3. otherwise (protocol plumbing: `initialize`, `ping`, `*/list`, notifications,
///    responses) the message is allowed.
///
/// Outbound (`scan_response`, `scan_text`):
/// 1. the lowest-numbered terminal rule (`allow`, `deny`, `redact`) whose conditions
///    all hold decides: `allow` passes, `deny` blocks, `redact` replaces what the
///    rule's own content conditions found (secrets, literals, regex matches);
/// 2. every `log_only` rule before it whose conditions hold is recorded in
///    [`Scratch::logged`];
/// 3. otherwise the message passes.
///
/// # Matching
///
/// A condition on a named argument holds when any scalar inside that argument
/// matches; `_any_value` holds when any key or scalar at any depth does. Numbers,
/// booleans and `null` are matched as their JSON text. A path-shaped value (see
/// [`crate::paths`]) is matched by `regex` and `pattern` in its written form *and*
/// in its normal form (`~/.ssh` and `/home/u/x/../.ssh` meet the same rules as
/// `/home/u/.ssh`). Because either form may satisfy a condition, an `allow` rule
/// with a path glob also admits `/proj/../etc/passwd` through its written form;
/// confine paths with `not_under`, which only ever judges the resolved form.
/// `not_under` holds when a value resolves outside its root: on a named argument
/// every string is taken as a path (a server resolves `notes.txt` against its working
/// directory), on `_any_value` only path-shaped ones are. A path-shaped value holding a
/// NUL is judged up to the NUL, and when no deny rule refuses the message it is refused
/// anyway ([`Decision::NulInPath`]): a server may read the value either way.
///
/// `response_contains` literals and `response_contains_regex` patterns match a server
/// message's text as it is *and* as [`crate::text::normalize`] reads it (invisible
/// characters removed, compatibility forms and look-alike letters folded); a match found
/// only in the normalised text covers the whole string.
///
/// # Resource usage
///
/// Compilation builds at most one automaton per engine class: two multi-pattern
/// regexes (argument regexes, `response_contains_regex`), one Aho-Corasick automaton,
/// up to six glob automata (method, tool, value; method, tool, server) and one secret
/// detector. Each regex and glob automaton is bounded to 10 MiB of NFA and each
/// [`Scratch`] to 10 MiB of lazy-DFA cache per automaton, so a
/// hostile pattern fails to compile rather than exhausting memory. Evaluation touches
/// each argument token once per engine class it needs; its cost grows with the size
/// of the message and the number of *satisfied* conditions, not with the number of
/// rules. The only I/O is the normal form of a path with `..` (one `lstat` per `..`) or
/// `~user` (the password file, read once per process), and the symlinks of path values,
/// resolved once per value for `not_under` and the regex and glob rules alike (an `lstat`
/// per component, except what [`crate::paths::LinkCache`] remembers; a `readlink` per
/// link). A `command`
/// matcher parses each value it reads as a shell command line once (linear in its length,
/// nesting bounded at 24 levels, into a per-[`Scratch`] arena) and judges each simple
/// command against its clauses; the glob sets of the embedded packs' clauses are built on
/// first use.
///
/// # Construction failure
///
/// [`Program::compile`] returns a [`crate::config::PolicyError`] pointing at the YAML
/// of each pattern that cannot be built (over the size limit, unknown secret detector
/// name). Policies come from users, so handle the error.
///
/// # Cloning
///
/// `Program` is not `Clone`: compile once and share an `Arc<Program>`. Each thread
/// that evaluates makes its own [`Scratch`] with [`Program::scratch`].
pub struct Program {
    pub(crate) settings: Settings,
    /// The `exceptions` of excepted inbound rules, one small program per rule.
    pub(crate) exceptions: Box<[Excepted]>,
    pub(crate) env: PathEnv,
    pub(crate) inbound: Inbound,
    pub(crate) outbound: Outbound,
    pub(crate) detector: engine::secret::SecretEngine,
    pub(crate) rules: Vec<RuleInfo>,
    pub(crate) outbound_rules: Vec<RuleInfo>,
    /// The policy this program was compiled from, kept by the transports whose sessions
    /// move the project to the client's roots ([`Program::keep_source`]).
    pub(crate) source: Option<std::sync::Arc<crate::config::policy::Policy>>,
}

/// An inbound rule with `exceptions`: a program holding them as deny rules (in file
/// order, `default_action: allow`), so its `DeniedBy(i)` says exception `i` holds.
pub(crate) struct Excepted {
    /// The excepted rule's index.
    pub rule: u32,
    pub program: Box<Program>,
}

impl std::fmt::Debug for Program {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Program")
            .field("rules", &self.rules.len())
            .field("outbound_rules", &self.outbound_rules.len())
            .field("inbound_predicates", &self.inbound.n_preds)
            .field("outbound_predicates", &self.outbound.n_preds)
            .field("detectors", &self.detector.specs().len())
            .finish()
    }
}

fn globs_scratch(globs: &Option<GlobEngine>) -> SetScratch {
    globs
        .as_ref()
        .map_or_else(Default::default, GlobEngine::scratch)
}

fn regex_scratch(regex: &Option<RegexEngine>) -> SetScratch {
    regex
        .as_ref()
        .map_or_else(Default::default, RegexEngine::scratch)
}

/// Predicate bits and per-rule counters for one evaluation.
#[derive(Debug, Default)]
struct RuleState {
    bits: Vec<u64>,
    counts: Vec<u32>,
    touched: Vec<u32>,
    best: u32,
    /// Rules an exception lifted for this message: never candidates.
    skip: Vec<u32>,
}

impl RuleState {
    fn reset(&mut self, n_preds: usize, n_rules: usize) {
        let words = n_preds.div_ceil(64);
        if self.bits.len() != words {
            self.bits.resize(words, 0);
        }
        self.bits.fill(0);
        if self.counts.len() != n_rules {
            // Switching between inbound and outbound tables: start from zero.
            self.counts.clear();
            self.counts.resize(n_rules, 0);
        } else {
            for &r in &self.touched {
                self.counts[r as usize] = 0;
            }
        }
        self.touched.clear();
        self.best = NONE;
    }

    #[inline]
    fn is_set(&self, pred: u32) -> bool {
        self.bits[(pred / 64) as usize] & (1 << (pred % 64)) != 0
    }

    /// Set a bit; `true` when it was not set before.
    #[inline]
    fn set(&mut self, pred: u32) -> bool {
        let word = &mut self.bits[(pred / 64) as usize];
        let bit = 1 << (pred % 64);
        let fresh = *word & bit == 0;
        *word |= bit;
        fresh
    }

    #[inline]
    fn candidate(&mut self, rule: u32) {
        if rule < self.best && !self.skip.contains(&rule) {
            self.best = rule;
        }
    }

    /// Mark an argument predicate satisfied and advance the rules that need it.
    #[inline]
    fn satisfy(&mut self, inb: &Inbound, pred: u32) {
        if !self.set(pred) {
            return;
        }
        for &r in inb.pred_rules.get(pred as usize) {
            let c = &mut self.counts[r as usize];
            if *c == 0 {
                self.touched.push(r);
            }
            *c += 1;
            let rule = &inb.rules[r as usize];
            if *c == rule.n_args
                && self.is_set(rule.method)
                && (rule.tool == NONE || self.is_set(rule.tool))
            {
                self.candidate(r);
            }
        }
    }
}

/// A piece of text found by an outbound content engine, kept for redaction.
#[derive(Debug, Clone, Copy)]
struct Hit {
    /// Which text (token index, or byte offset of a text chunk).
    text: u32,
    start: u32,
    end: u32,
    /// Detector index (secrets) or literal pattern index (contains).
    what: u32,
}

/// A value of the message judged after the pass, with its symlinks resolved: one walk
/// ([`crate::paths::resolve_links`]) serves its `not_under` checks and the regex and glob
/// rules that read it again.
#[derive(Debug)]
struct DeferredPath {
    sel: u32,
    /// The value's normal form.
    path: String,
    /// Opened from the server's working directory (the value is relative).
    relative: bool,
    /// A path argument's value: one name, not text that may hold several words.
    one_name: bool,
    /// Judged again by the regex and glob rules when it resolves elsewhere.
    rematch: bool,
    /// Its `not_under` checks: `Scratch::deferred_checks[checks.0..checks.1]`.
    checks: (u32, u32),
    /// What the walk found, once a check or the rematch needed it.
    opened: Option<crate::paths::Resolution>,
}

/// Per-pump mutable state for evaluation, so the hot path does not allocate.
///
/// Made by [`Program::scratch`]; use it only with the program that made it.
#[derive(Debug)]
pub struct Scratch {
    state: RuleState,
    in_methods: SetScratch,
    in_tools: SetScratch,
    in_globs: SetScratch,
    in_regex: SetScratch,
    out_methods: SetScratch,
    out_tools: SetScratch,
    out_servers: SetScratch,
    out_regex: SetScratch,
    detector_cache: Option<DetectorCache>,
    findings: Vec<Finding>,
    path_bufs: PathBuffers,
    /// Directory entries no agent can change, remembered across messages.
    links: crate::paths::LinkCache,
    norm: String,
    /// The values judged after the pass with their symlinks resolved; spent strings go
    /// back to the pool.
    deferred_paths: Vec<DeferredPath>,
    /// Their `not_under` checks (indices into `Inbound::not_under`), each value's a range.
    deferred_checks: Vec<u32>,
    /// A path argument names something whose real path could not be found (a link loop,
    /// a directory that may not be searched, a Windows short name below what exists):
    /// refused unless a rule denies first.
    unreadable_path: bool,
    path_pool: Vec<String>,
    secret_hits: Vec<Hit>,
    literal_hits: Vec<Hit>,
    /// The content texts of a message and their joined forms (see [`Texts::content`]).
    content_ids: Vec<(u32, usize)>,
    content_starts: Vec<usize>,
    joined: String,
    logged: Vec<RuleId>,
    redactions: Vec<Redaction>,
    command: engine::command::CommandScratch,
    /// One per [`Program::exceptions`] entry, in the same order.
    exceptions: Vec<Scratch>,
    /// `(rule, exception)` lifted in the last inbound evaluation.
    excepted: Vec<(RuleId, RuleId)>,
}

impl Scratch {
    /// The `log_only` outbound rules that matched in the last scan, in rule order.
    pub fn logged(&self) -> &[RuleId] {
        &self.logged
    }

    /// The rules an `exceptions` entry lifted in the last inbound evaluation, each with
    /// the exception ([`Program::exception`]); usually empty.
    pub fn excepted(&self) -> &[(RuleId, RuleId)] {
        &self.excepted
    }

    /// The spans of the last scan that decided `Outcome::Redact`.
    pub fn redactions(&self) -> &[crate::verdict::Redaction] {
        &self.redactions
    }
}

/// Methods `default_action` judges (ARCHITECTURE decision 2).
pub const JUDGED_METHODS: [&str; 4] = [
    "tools/call",
    "resources/read",
    "prompts/get",
    "completion/complete",
];

/// Which texts an outbound scan reads, and how their ranges map to raw bytes.
trait Texts {
    fn for_each(&self, f: &mut dyn FnMut(u32, &str));
    fn raw_range(&self, text: u32, decoded: Range<usize>) -> Range<usize>;
    /// The ids of the message's content texts (the `text` values of its content items,
    /// in order), with each one's text: what the model reads as one passage even when a
    /// server cuts it into several items.
    fn content(&self, _f: &mut dyn FnMut(u32, &str)) {}
}

struct FrameTexts<'f, 'a> {
    frame: &'f Frame<'a>,
    msg: &'f Message,
    /// Where the last mapping into a decoded string ended: hits come in increasing order
    /// per string, so a long string with escapes is walked once, not once per hit.
    cursor: std::cell::Cell<(u32, crate::frame::string::RawCursor)>,
}

impl Texts for FrameTexts<'_, '_> {
    fn for_each(&self, f: &mut dyn FnMut(u32, &str)) {
        let tokens = self.frame.tokens();
        for i in self.msg.tokens.clone() {
            let tok = &tokens[i];
            if matches!(tok.kind, TokenKind::Key | TokenKind::String) {
                f(i as u32, self.frame.text(tok.text));
            }
        }
    }

    fn raw_range(&self, text: u32, decoded: Range<usize>) -> Range<usize> {
        let tok = &self.frame.tokens()[text as usize];
        let (last, mut cursor) = self.cursor.get();
        if last != text {
            cursor = crate::frame::string::RawCursor::default();
        }
        let raw = crate::frame::redact::raw_range_from(self.frame, tok, decoded, &mut cursor);
        self.cursor.set((text, cursor));
        raw
    }

    fn content(&self, f: &mut dyn FnMut(u32, &str)) {
        let tokens = self.frame.tokens();
        let range = self.msg.tokens.clone();
        for i in range.clone().skip(1) {
            let (key, tok) = (&tokens[i - 1], &tokens[i]);
            if tok.kind == TokenKind::String
                && key.kind == TokenKind::Key
                && self.frame.text(key.text) == "text"
            {
                f(i as u32, self.frame.text(tok.text));
            }
        }
    }
}

struct LineTexts<'a> {
    line: &'a [u8],
}

impl Texts for LineTexts<'_> {
    fn for_each(&self, f: &mut dyn FnMut(u32, &str)) {
        let mut at = 0;
        for chunk in self.line.utf8_chunks() {
            f(at as u32, chunk.valid());
            at += chunk.valid().len() + chunk.invalid().len();
        }
    }

    fn raw_range(&self, text: u32, decoded: Range<usize>) -> Range<usize> {
        text as usize + decoded.start..text as usize + decoded.end
    }
}

impl Program {
    /// Build now what the compiler deferred (the regexes and tool and server globs of the
    /// embedded packs), which the first frame that needs them builds otherwise. Safe to
    /// call from any thread, any number of times.
    pub fn warm_up(&self) {
        if let Some(globs) = &self.inbound.tool_globs {
            globs.warm_up();
        }
        if let Some(ce) = &self.inbound.command {
            for p in &ce.preds {
                p.clauses.get();
            }
        }
        if let Some(re) = &self.inbound.regex {
            re.warm_up();
        }
        for globs in [&self.outbound.tool_globs, &self.outbound.server_globs]
            .into_iter()
            .flatten()
        {
            globs.warm_up();
        }
        if let Some(re) = &self.outbound.regex {
            re.warm_up();
        }
        self.detector.detector();
        if let Some(lit) = &self.outbound.literal {
            lit.warm_up();
        }
    }

    /// Fresh scratch space for evaluating with this program.
    pub fn scratch(&self) -> Scratch {
        let inb = &self.inbound;
        let out = &self.outbound;
        let mut state = RuleState::default();
        state.reset(
            inb.n_preds.max(out.n_preds),
            inb.rules.len().max(out.rules.len()),
        );
        Scratch {
            state,
            in_methods: globs_scratch(&inb.method_globs),
            in_tools: globs_scratch(&inb.tool_globs),
            in_globs: globs_scratch(&inb.glob),
            in_regex: regex_scratch(&inb.regex),
            out_methods: globs_scratch(&out.method_globs),
            out_tools: globs_scratch(&out.tool_globs),
            out_servers: globs_scratch(&out.server_globs),
            out_regex: regex_scratch(&out.regex),
            detector_cache: None,
            findings: Vec::with_capacity(8),
            path_bufs: PathBuffers::default(),
            links: Default::default(),
            norm: String::with_capacity(256),
            deferred_paths: Vec::new(),
            deferred_checks: Vec::new(),
            unreadable_path: false,
            path_pool: Vec::new(),
            secret_hits: Vec::new(),
            literal_hits: Vec::new(),
            content_ids: Vec::new(),
            content_starts: Vec::new(),
            joined: String::new(),
            logged: Vec::new(),
            redactions: Vec::new(),
            command: Default::default(),
            exceptions: self
                .exceptions
                .iter()
                .map(|e| e.program.scratch())
                .collect(),
            excepted: Vec::new(),
        }
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// HOME and PROJECT_DIR as this program resolves paths.
    pub fn path_env(&self) -> &PathEnv {
        &self.env
    }

    /// Keep the policy this program was compiled from (with [`Program::path_env`]), so a
    /// session can compile it again for the client's roots (decision 16). Without it, a
    /// session judges by the project the program was compiled for, whatever the client's
    /// roots. `policy` must be the one this program was compiled from.
    pub fn keep_source(mut self, policy: std::sync::Arc<crate::config::policy::Policy>) -> Program {
        self.source = Some(policy);
        self
    }

    /// The policy kept by [`Program::keep_source`].
    pub fn source(&self) -> Option<&std::sync::Arc<crate::config::policy::Policy>> {
        self.source.as_ref()
    }

    /// The secret detectors (built-in minus disabled, plus the policy's own), e.g. to
    /// redact allowed arguments before they are logged.
    pub fn detector(&self) -> &Detector {
        self.detector.detector()
    }

    /// Whether the inbound rules refuse a `resources/read` of `uri` (a deny rule, a NUL
    /// in its path, or `default_action: deny`), judged exactly as the client's request
    /// would be. A URI that cannot be judged counts as refused.
    pub fn denies_resource_read(&self, uri: &str, scratch: &mut Scratch) -> bool {
        let line = serde_json::json!({
            "jsonrpc": "2.0", "id": 0, "method": "resources/read", "params": {"uri": uri}
        })
        .to_string();
        let limits = crate::frame::Limits {
            max_frame_bytes: line.len() + 1,
            ..crate::frame::Limits::default()
        };
        let mut parsed = crate::frame::Parsed::new();
        if parsed.parse(line.as_bytes(), &limits).is_err() {
            return true;
        }
        let frame = Frame::new(line.as_bytes(), &parsed);
        let Some(msg) = frame.messages().first() else {
            return true;
        };
        matches!(
            self.evaluate_request(&frame, msg, scratch),
            Decision::DeniedBy(_)
                | Decision::NulInPath
                | Decision::UnreadablePath
                | Decision::Default { allow: false }
        )
    }

    /// Judge one inbound message of `frame`.
    pub fn evaluate_request(
        &self,
        frame: &Frame<'_>,
        msg: &Message,
        scratch: &mut Scratch,
    ) -> Decision {
        self.evaluate_as(frame, msg, frame.method(msg), scratch)
    }

    /// [`Self::evaluate_request`] for a message judged as one of `method`: a client's
    /// response to a server request is judged as a message of the method it answers
    /// (`sampling/createMessage`), its `result` or `error` standing for the arguments.
    pub fn evaluate_as(
        &self,
        frame: &Frame<'_>,
        msg: &Message,
        method: Option<&str>,
        scratch: &mut Scratch,
    ) -> Decision {
        scratch.state.skip.clear();
        scratch.excepted.clear();
        let mut best = self.first_match(frame, msg, method, scratch);
        // An excepted rule matched: when one of its exceptions holds, it is lifted for
        // this message and the pass runs again without it (rare: exceptions are few and
        // narrow, and only a message the rule would have decided pays).
        while best != NONE
            && let Some(k) = self.exceptions.iter().position(|e| e.rule == best)
        {
            let sub = &self.exceptions[k].program;
            match sub.evaluate_as(frame, msg, method, &mut scratch.exceptions[k]) {
                Decision::DeniedBy(exception) => {
                    scratch.excepted.push((RuleId(best), exception));
                    scratch.state.skip.push(best);
                    best = self.first_match(frame, msg, method, scratch);
                }
                _ => break,
            }
        }
        // The state is shared with the outbound scan, whose rule numbers differ.
        scratch.state.skip.clear();
        let inb = &self.inbound;
        let decision = if best != NONE {
            let rule = &inb.rules[best as usize];
            if rule.allow {
                Decision::AllowedBy(RuleId(best))
            } else if rule.ask {
                Decision::AskedBy(RuleId(best))
            } else {
                Decision::DeniedBy(RuleId(best))
            }
        } else if method.is_some_and(|m| JUDGED_METHODS.contains(&m)) {
            match self.settings.default_action {
                Action::Ask => Decision::DefaultAsk,
                a => Decision::Default {
                    allow: a == Action::Allow,
                },
            }
        } else {
            Decision::Plumbing
        };
        // A call a human could approve is checked like one allowed outright.
        let may_run = decision.is_allowed()
            || matches!(decision, Decision::AskedBy(_) | Decision::DefaultAsk);
        if may_run && has_nul_in_path(frame, msg) {
            return Decision::NulInPath;
        }
        if may_run && scratch.unreadable_path {
            return Decision::UnreadablePath;
        }
        decision
    }

    /// One pass of every engine over the message: the first rule (YAML order, not in
    /// `skip`) whose conditions all hold, or `NONE`.
    fn first_match(
        &self,
        frame: &Frame<'_>,
        msg: &Message,
        method: Option<&str>,
        scratch: &mut Scratch,
    ) -> u32 {
        let inb = &self.inbound;
        scratch.unreadable_path = false;
        scratch.path_bufs.forget();
        scratch.command.forget_file_system();
        let st = &mut scratch.state;
        st.reset(inb.n_preds, inb.rules.len());

        let mut any_method = false;
        if let (Some(m), Some(globs)) = (method, &inb.method_globs) {
            globs.for_each_match(&mut scratch.in_methods, m, |preds| {
                for &p in preds {
                    any_method = true;
                    st.set(p);
                    for &r in inb.by_method.get(p as usize) {
                        st.candidate(r);
                    }
                }
            });
        }
        // No rule names this method: nothing below can change the verdict.
        if any_method {
            if let (Some(t), Some(globs)) = (frame.tool(msg), &inb.tool_globs) {
                globs.for_each_match(&mut scratch.in_tools, t, |preds| {
                    for &p in preds {
                        st.set(p);
                        for &r in inb.by_tool.get(p as usize) {
                            if st.is_set(inb.rules[r as usize].method) {
                                st.candidate(r);
                            }
                        }
                    }
                });
            }
            self.scan_arguments(frame, msg, scratch);
            self.scan_names(frame, msg, scratch);
        }
        scratch.state.best
    }

    /// One pass over the message's argument tokens, setting predicate bits.
    fn scan_arguments(&self, frame: &Frame<'_>, msg: &Message, s: &mut Scratch) {
        use engine::{COMMAND, GLOB, NOT_UNDER, REGEX, SECRETS};
        let inb = &self.inbound;
        if inb.any_needs == 0 && inb.named_needs.iter().all(|&n| n == 0) {
            return;
        }
        let tokens = frame.tokens();
        let mut cur_arg = Token::NO_ARG;
        let mut cur_sel = NO_SEL;
        let mut names_path = false;
        let mut content_arg = false;
        // Known once some argument is a write's content: whether a path argument sits
        // beside it (a file write's shape, `path` + `content`/`edits`/`diff`).
        let mut writes_file: Option<bool> = None;
        for i in msg.args.clone() {
            let tok = &tokens[i];
            let is_key = tok.kind == TokenKind::Key;
            if tok.arg != cur_arg {
                cur_arg = tok.arg;
                let key = tokens
                    .get(tok.arg as usize)
                    .filter(|_| tok.arg != Token::NO_ARG)
                    .map(|key| frame.text(key.text));
                cur_sel = key
                    .and_then(|k| inb.arg_names.get(k).copied())
                    .unwrap_or(NO_SEL);
                names_path = key.is_some_and(crate::paths::may_name_a_path);
                content_arg = key.is_some_and(is_write_content_argument)
                    && *writes_file.get_or_insert_with(|| has_path_argument(frame, msg));
            }
            // Named selectors read scalars only; keys are seen by `_any_value` alone.
            let sel = if is_key { NO_SEL } else { cur_sel };
            let needs = inb.any_needs
                | if sel == NO_SEL {
                    0
                } else {
                    inb.named_needs[sel as usize]
                };
            if needs == 0 {
                continue;
            }
            let applies = |p: u32| {
                let ps = inb.pred_selector[p as usize];
                ps == ANY_SEL || ps == sel
            };
            let text = frame.text(tok.text);
            let is_text = matches!(tok.kind, TokenKind::Key | TokenKind::String);
            let shaped = is_text && crate::paths::is_path_shaped(text);
            let named_path = tok.kind == TokenKind::String
                && sel != NO_SEL
                && inb.named_needs[sel as usize] & NOT_UNDER != 0;
            let has_norm = shaped || named_path;
            if has_norm {
                crate::paths::normalize_into(text, &self.env, &mut s.path_bufs, &mut s.norm);
            }
            let alt = if shaped && s.norm != text {
                Some(s.norm.as_str())
            } else {
                None
            };

            if needs & REGEX != 0
                && let Some(re) = &inb.regex
            {
                for t in std::iter::once(text).chain(alt) {
                    re.for_each_match(&mut s.in_regex, t, |preds| {
                        for &p in preds {
                            if applies(p) {
                                s.state.satisfy(inb, p);
                            }
                        }
                    });
                }
            }
            if needs & GLOB != 0
                && let Some(globs) = &inb.glob
            {
                for t in std::iter::once(text).chain(alt) {
                    globs.for_each_match(&mut s.in_globs, t, |preds| {
                        for &p in preds {
                            if applies(p) {
                                s.state.satisfy(inb, p);
                            }
                        }
                    });
                }
            }
            // The path as the file system opens it (its symlinks followed; on Windows an
            // 8.3 short name expanded): judged by the same patterns after the pass, when
            // it differs. A bare name counts when its argument is named like a path
            // (`{"path": "notes.txt"}`, `notebook_path`); a file's content, a command, prose
            // or a URL outside such an argument (elsewhere than on Windows, where a short
            // name is expanded wherever it stands, as before), or text no kernel would
            // open as one path (a line break, longer than PATH_MAX), costs no look-up. What the look-ups
            // cost, and why most of them are remembered: `crate::paths::LinkCache`.
            let rematch = needs & (REGEX | GLOB) != 0
                && tok.kind == TokenKind::String
                && (names_path
                    || shaped && !content_arg && (cfg!(windows) || !looks_like_prose_or_url(text)))
                && crate::paths::may_name_a_file(text);
            // `not_under` is judged after the pass too, and only for a rule that can still
            // match: containment reads the file system (symlinks), which costs more than
            // every other matcher of the frame together.
            let first_check = s.deferred_checks.len() as u32;
            if needs & NOT_UNDER != 0 && tok.kind == TokenKind::String && has_norm {
                for (i, c) in inb.not_under.iter().enumerate() {
                    if s.state.is_set(c.pred) || !applies(c.pred) {
                        continue;
                    }
                    if c.selector == ANY_SEL && !shaped {
                        continue;
                    }
                    s.deferred_checks.push(i as u32);
                }
            }
            let checks = (first_check, s.deferred_checks.len() as u32);
            if rematch || checks.0 != checks.1 {
                let mut path = s.path_pool.pop().unwrap_or_default();
                if has_norm {
                    path.clear();
                    path.push_str(&s.norm);
                } else {
                    crate::paths::normalize_into(text, &self.env, &mut s.path_bufs, &mut path);
                }
                s.deferred_paths.push(DeferredPath {
                    sel,
                    path,
                    relative: crate::paths::is_relative(text),
                    one_name: names_path,
                    rematch,
                    checks,
                    opened: None,
                });
            }
            // A path-shaped glob (`~/.s*/id*`, a file tool's `paths` entry) is expanded by
            // the server or its glob library: judged as a shell operand, by its expansions.
            let glob_operand = shaped && !crate::shell::worth_parsing(text) && has_glob_meta(text);
            if needs & COMMAND != 0
                && tok.kind == TokenKind::String
                && let Some(ce) = &inb.command
                && (glob_operand || crate::shell::worth_parsing(text))
            {
                let mut parsed = false;
                let mut scanned = false;
                s.command.data_only = content_arg;
                for (k, cp) in ce.preds.iter().enumerate() {
                    if s.state.is_set(cp.pred) || !applies(cp.pred) {
                        continue;
                    }
                    if !scanned {
                        ce.gate_scan(text, &self.env, &mut s.command);
                        scanned = true;
                    }
                    if !ce.may_hold(k, &s.command) {
                        continue;
                    }
                    if !parsed {
                        if glob_operand {
                            s.command.parse_operand(text);
                        } else {
                            crate::shell::parse_into(text, &mut s.command.parsed);
                        }
                        parsed = true;
                    }
                    if ce.holds(cp, &self.env, &mut s.command, &mut s.links) {
                        s.state.satisfy(inb, cp.pred);
                    }
                }
            }
            if needs & SECRETS != 0 && tok.kind != TokenKind::Null {
                s.findings.clear();
                self.detector
                    .find(text, &mut s.detector_cache, &mut s.findings);
                if !s.findings.is_empty() {
                    for &(p, _) in inb.secrets.iter() {
                        if applies(p) {
                            s.state.satisfy(inb, p);
                        }
                    }
                }
            }
        }
        self.resolve_deferred_paths(s);
    }

    /// Judge the values the pass deferred with their symlinks resolved (component by
    /// component, [`crate::paths::resolve_links`]; one walk per value, whatever needs it):
    ///
    /// 1. each `not_under` check, only when a rule needing it could still decide: its
    ///    method and tool hold, no earlier rule has decided, and every argument condition
    ///    it still lacks is a `not_under` one. A value is inside only if what it opens is
    ///    ([`crate::paths::Root::contains`]);
    /// 2. the regex and glob rules again, on the path the value opens when it differs:
    ///    `project/link -> ~/.ssh` is read as `~/.ssh` too, and the worst verdict of the two
    ///    spellings wins. A dangling link is read as the path it names. Skipped when a deny
    ///    rule has already decided: nothing found now could make the verdict worse.
    ///
    /// A value that cannot be resolved (a loop, a directory that may not be searched) is
    /// outside every root, and makes the message unreadable: refused unless a rule denies
    /// it.
    fn resolve_deferred_paths(&self, s: &mut Scratch) {
        let inb = &self.inbound;
        let mut deferred = std::mem::take(&mut s.deferred_paths);
        let denied = |best: u32| {
            best != NONE && {
                let rule = &inb.rules[best as usize];
                !rule.allow && !rule.ask
            }
        };
        // One `read` of the file system's changes per message, when a path is looked up.
        let mut lookups = s.links.lookups();
        for d in deferred.iter_mut() {
            for k in d.checks.0..d.checks.1 {
                let c = &inb.not_under[s.deferred_checks[k as usize] as usize];
                let st = &s.state;
                let viable = !st.is_set(c.pred)
                    && inb.pred_rules.get(c.pred as usize).iter().any(|&r| {
                        let rule = &inb.rules[r as usize];
                        r < st.best
                            && st.is_set(rule.method)
                            && (rule.tool == NONE || st.is_set(rule.tool))
                            && rule.n_args - st.counts[r as usize] <= rule.n_not_under
                    });
                if !viable {
                    continue;
                }
                let opened = d.opened.get_or_insert_with(|| {
                    crate::paths::resolve_links(
                        &d.path,
                        d.relative.then_some(self.env.cwd()),
                        d.one_name,
                        &mut lookups,
                    )
                });
                if !inb.roots[c.root as usize].contains(&d.path, opened) {
                    s.state.satisfy(inb, c.pred);
                }
            }
        }
        for d in deferred.drain(..) {
            let opened = if d.opened.is_some() || !d.rematch || denied(s.state.best) {
                d.opened
            } else {
                Some(crate::paths::resolve_links(
                    &d.path,
                    d.relative.then_some(self.env.cwd()),
                    d.one_name,
                    &mut lookups,
                ))
            };
            match opened {
                Some(crate::paths::Resolution::Unknown) => s.unreadable_path = true,
                Some(crate::paths::Resolution::Resolved(resolved))
                    if d.rematch && !denied(s.state.best) =>
                {
                    let applies = |p: u32| {
                        let ps = inb.pred_selector[p as usize];
                        ps == ANY_SEL || ps == d.sel
                    };
                    if let Some(re) = &inb.regex {
                        re.for_each_match(&mut s.in_regex, &resolved, |preds| {
                            for &p in preds {
                                if applies(p) {
                                    s.state.satisfy(inb, p);
                                }
                            }
                        });
                    }
                    if let Some(globs) = &inb.glob {
                        globs.for_each_match(&mut s.in_globs, &resolved, |preds| {
                            for &p in preds {
                                if applies(p) {
                                    s.state.satisfy(inb, p);
                                }
                            }
                        });
                    }
                }
                _ => {}
            }
            s.path_pool.push(d.path);
        }
        s.deferred_checks.clear();
        s.deferred_paths = deferred;
    }

    /// `_any_value: {secrets: true}` judges the message's method, tool name and string
    /// id as values too: a credential sent as a tool name or an id leaves the machine (and
    /// reaches the server's logs) like one in an argument.
    fn scan_names(&self, frame: &Frame<'_>, msg: &Message, s: &mut Scratch) {
        let inb = &self.inbound;
        let any_value = |p: u32| inb.pred_selector[p as usize] == ANY_SEL;
        if !inb
            .secrets
            .iter()
            .any(|&(p, _)| any_value(p) && !s.state.is_set(p))
        {
            return;
        }
        let id = frame.id_raw(msg).and_then(string_id);
        let method = frame.method(msg).filter(|m| !crate::mcp::is_spec_method(m));
        let names = [method, frame.tool(msg), id.as_deref()];
        for text in names.into_iter().flatten() {
            s.findings.clear();
            self.detector
                .find(text, &mut s.detector_cache, &mut s.findings);
            if !s.findings.is_empty() {
                for &(p, _) in inb.secrets.iter() {
                    if any_value(p) {
                        s.state.satisfy(inb, p);
                    }
                }
                return;
            }
        }
    }

    /// Judge one server message of `frame`. `call` says what it answers; when
    /// `call.method` or `call.tool` is `None` the message's own are used.
    pub fn scan_response<'s>(
        &self,
        frame: &Frame<'_>,
        msg: &Message,
        call: &CallInfo<'_>,
        scratch: &'s mut Scratch,
    ) -> Outcome<'s> {
        let call = CallInfo {
            method: call.method.or_else(|| frame.method(msg)),
            tool: call.tool.or_else(|| frame.tool(msg)),
            server: call.server,
        };
        let size = msg.span.end - msg.span.start;
        self.scan_outbound(
            size,
            &call,
            &FrameTexts {
                frame,
                msg,
                cursor: Default::default(),
            },
            scratch,
        )
    }

    /// Judge a line a server printed on stdout that is not JSON. Conditions read the
    /// line's text (each valid UTF-8 stretch of it); redaction ranges are byte ranges
    /// of `line`.
    pub fn scan_text<'s>(
        &self,
        line: &[u8],
        call: &CallInfo<'_>,
        scratch: &'s mut Scratch,
    ) -> Outcome<'s> {
        self.scan_outbound(line.len(), call, &LineTexts { line }, scratch)
    }

    fn scan_outbound<'s>(
        &self,
        size: usize,
        call: &CallInfo<'_>,
        texts: &dyn Texts,
        s: &'s mut Scratch,
    ) -> Outcome<'s> {
        use engine::{LITERAL, REGEX, SECRETS};
        let out = &self.outbound;
        s.state.reset(out.n_preds, out.rules.len());
        s.logged.clear();
        s.redactions.clear();
        s.secret_hits.clear();
        s.literal_hits.clear();

        // Cheapest first: sizes, then the globs over the call's context.
        for &(threshold, p) in out.sizes.iter() {
            if size as u64 > threshold {
                s.state.set(p);
            }
        }
        let st = &mut s.state;
        for (text, globs, scratch) in [
            (call.method, &out.method_globs, &mut s.out_methods),
            (call.tool, &out.tool_globs, &mut s.out_tools),
            (Some(call.server), &out.server_globs, &mut s.out_servers),
        ] {
            if let (Some(t), Some(g)) = (text, globs) {
                g.for_each_match(scratch, t, |preds| {
                    for &p in preds {
                        st.set(p);
                    }
                });
            }
        }
        // Scan content only for engines some still-possible rule needs.
        let mut needs = 0;
        for rule in out.rules.iter() {
            if rule.gates.iter().all(|&p| st.is_set(p)) {
                needs |= rule.content;
            }
        }
        if needs != 0 {
            let detector = &self.detector;
            let (dcache, findings) = (&mut s.detector_cache, &mut s.findings);
            let (secret_hits, literal_hits) = (&mut s.secret_hits, &mut s.literal_hits);
            let out_regex = &mut s.out_regex;
            texts.for_each(&mut |id, text| {
                // Literals and patterns both judge the text with hidden characters and
                // look-alikes undone: the Unicode steps run once for both.
                let unveiled =
                    (needs & REGEX != 0 && !is_plain(text)).then(|| normalize_keeping_case(text));
                if needs & SECRETS != 0 {
                    findings.clear();
                    detector.find(text, dcache, findings);
                    for f in findings.iter() {
                        st.set(out.secrets_pred);
                        secret_hits.push(Hit {
                            text: id,
                            start: f.range.start as u32,
                            end: f.range.end as u32,
                            what: f.detector,
                        });
                    }
                }
                if needs & LITERAL != 0
                    && let Some(lit) = &out.literal
                {
                    lit.for_each_match_with(text, unveiled.as_deref(), |pattern, start, end| {
                        for &p in lit.map.get(pattern) {
                            st.set(p);
                        }
                        literal_hits.push(Hit {
                            text: id,
                            start: start as u32,
                            end: end as u32,
                            what: pattern as u32,
                        });
                    });
                }
                if needs & REGEX != 0
                    && let Some(re) = &out.regex
                {
                    let mut set = |preds: &[u32]| {
                        for &p in preds {
                            st.set(p);
                        }
                    };
                    re.for_each_match(out_regex, text, &mut set);
                    // Hidden characters and look-alikes must not split a match: the
                    // patterns also see the text as the literals do (case and lines kept).
                    if let Some(Cow::Owned(unveiled)) = &unveiled
                        && unveiled != text
                    {
                        re.for_each_match(out_regex, unveiled, &mut set);
                    }
                }
            });
        }

        if needs & (LITERAL | REGEX | SECRETS) != 0 {
            self.scan_joined_content(needs, texts, s);
        }

        // The first trusted rule that decides ends the trusted rules; additive rules (an
        // untrusted file's, all after the trusted ones) still run and can only tighten:
        // a deny refuses whatever was decided, a redaction adds its spans.
        let mut decided: Option<(RuleId, RuleAction)> = None;
        let mut i = 0;
        while i < out.rules.len() {
            let rule = &out.rules[i];
            i += 1;
            if !rule.preds.iter().all(|&p| s.state.is_set(p)) {
                continue;
            }
            let id = RuleId(i as u32 - 1);
            match (rule.action, decided) {
                (RuleAction::LogOnly, _) => s.logged.push(id),
                // Outbound rules never ask (refused at load); were one to, block.
                (RuleAction::Deny | RuleAction::Ask, _) => return Outcome::Block { rule: id },
                // A redaction that finds nothing to cut (a match only the joined,
                // normalised text holds) would forward what the rule matched: block.
                (RuleAction::Redact, None | Some((_, RuleAction::Allow))) => {
                    if self.collect_redactions(id, rule, texts, s) == 0 && rule.has_content() {
                        return Outcome::Block { rule: id };
                    }
                    decided = Some((id, RuleAction::Redact));
                }
                (RuleAction::Redact, Some(_)) => {
                    if self.collect_redactions(id, rule, texts, s) == 0 && rule.has_content() {
                        return Outcome::Block { rule: id };
                    }
                }
                (RuleAction::Allow, None) => decided = Some((id, RuleAction::Allow)),
                (RuleAction::Allow, Some(_)) => {}
            }
            if decided.is_some() {
                i = i.max(out.additive_from);
            }
        }
        match decided {
            Some((rule, RuleAction::Redact)) => Outcome::Redact {
                rule,
                redactions: &s.redactions,
            },
            _ => Outcome::Pass,
        }
    }

    /// Literals, patterns and secrets over the content texts of one message joined, so a
    /// phrase cut across two content items (`"Ignore previous"`, `"instructions and …"`)
    /// or a token cut in two (`"ghp_ab…"`, `"…cd"`) is read as the model reads it. Secrets
    /// only in the join without a space: a space ends a token. Joined twice, with nothing and with a space between items
    /// that do not meet at whitespace (a cut inside a word, a cut between words). Only a
    /// match that spans items counts here (the rest was found per text); a redaction cuts
    /// exactly its bytes in each item it touches (`collect_redactions` finds a pattern's
    /// the same way, and blocks the message when a match has no span it can cut). A
    /// message with fewer than two content texts costs nothing.
    fn scan_joined_content(&self, needs: engine::Needs, texts: &dyn Texts, s: &mut Scratch) {
        use engine::{LITERAL, REGEX, SECRETS};
        let out = &self.outbound;
        for sep in ["", " "] {
            if !join_content(
                texts,
                sep,
                &mut s.joined,
                &mut s.content_ids,
                &mut s.content_starts,
            ) {
                // Fewer than two items (nothing to join), or the spaced text is the
                // first pass's again.
                if s.content_ids.len() < 2 {
                    return;
                }
                continue;
            }
            let (ids, starts) = (&s.content_ids, &s.content_starts);
            let st = &mut s.state;
            let joined = s.joined.as_str();
            if needs & SECRETS != 0 && sep.is_empty() {
                let findings = &mut s.findings;
                findings.clear();
                self.detector.find(joined, &mut s.detector_cache, findings);
                for f in findings.iter() {
                    let before = s.secret_hits.len();
                    // A token inside one item was found in that item's own text.
                    item_segments(ids, starts, f.range.start, f.range.end, |id, r| {
                        s.secret_hits.push(Hit {
                            text: id,
                            start: r.start as u32,
                            end: r.end as u32,
                            what: f.detector,
                        });
                    });
                    if s.secret_hits.len() > before {
                        st.set(out.secrets_pred);
                    }
                }
            }
            if needs & LITERAL != 0
                && let Some(lit) = &out.literal
            {
                let hits = &mut s.literal_hits;
                lit.for_each_match_with(joined, None, |pattern, start, end| {
                    // A match over the whole text is a disguised one whose span is not
                    // known: it counts when no single item holds it (checked per text),
                    // and marks every item whole.
                    let whole = start == 0 && end == joined.len();
                    let before = hits.len();
                    if whole {
                        for &(id, len) in ids.iter() {
                            hits.push(Hit {
                                text: id,
                                start: 0,
                                end: len as u32,
                                what: pattern as u32,
                            });
                        }
                    } else {
                        // Exactly the phrase's bytes in each item it spans.
                        item_segments(ids, starts, start, end, |id, r| {
                            hits.push(Hit {
                                text: id,
                                start: r.start as u32,
                                end: r.end as u32,
                                what: pattern as u32,
                            });
                        });
                    }
                    if hits.len() > before {
                        for &p in lit.map.get(pattern) {
                            st.set(p);
                        }
                    }
                });
            }
            if needs & REGEX != 0
                && let Some(re) = &out.regex
            {
                let form = normalize_keeping_case(joined);
                let mut set = |preds: &[u32]| {
                    for &p in preds {
                        st.set(p);
                    }
                };
                re.for_each_match(&mut s.out_regex, &form, &mut set);
            }
        }
    }

    /// Everything the redact rule `id` found, as sorted, merged raw ranges.
    /// Returns how many spans the rule found: none, for a rule whose content condition
    /// matched, means what matched cannot be cut out (the caller blocks the message).
    fn collect_redactions(
        &self,
        id: RuleId,
        rule: &OutRule,
        texts: &dyn Texts,
        s: &mut Scratch,
    ) -> usize {
        let out = &self.outbound;
        let rule_label = self.detector.specs().len() as u32 + id.0;
        let red = &mut s.redactions;
        let before = red.len();
        if rule.secrets {
            for h in &s.secret_hits {
                red.push(Redaction {
                    raw: texts.raw_range(h.text, h.start as usize..h.end as usize),
                    rule: id,
                    label: h.what,
                });
            }
        }
        if rule.contains != NONE
            && let Some(lit) = &out.literal
        {
            for h in &s.literal_hits {
                if lit.map.get(h.what as usize).contains(&rule.contains) {
                    red.push(Redaction {
                        raw: texts.raw_range(h.text, h.start as usize..h.end as usize),
                        rule: id,
                        label: rule_label,
                    });
                }
            }
        }
        if rule.regex != NONE
            && let Some(re) = &out.regex
        {
            let finders: Vec<&meta::Regex> = (0..re.map.len())
                .filter(|&i| re.map.get(i).contains(&rule.regex))
                .filter_map(|i| out.span_regexes[i].as_ref())
                .collect();
            texts.for_each(&mut |tid, text| {
                let mut unveiled = None;
                for finder in &finders {
                    let before = red.len();
                    for m in finder.find_iter(text) {
                        if !m.is_empty() {
                            red.push(Redaction {
                                raw: texts.raw_range(tid, m.range()),
                                rule: id,
                                label: rule_label,
                            });
                        }
                    }
                    // A match only the normalised form holds has no span in the raw text:
                    // the whole string goes, as for literals.
                    if red.len() == before
                        && let Cow::Owned(form) =
                            unveiled.get_or_insert_with(|| normalize_keeping_case(text))
                        && finder.is_match(form.as_str())
                    {
                        red.push(Redaction {
                            raw: texts.raw_range(tid, 0..text.len()),
                            rule: id,
                            label: rule_label,
                        });
                    }
                }
            });
            // A match across content items (`CODE-1234` + `5678`): exactly its bytes in
            // each item it spans. One the joined text holds only once normalised has no
            // span; then nothing is found here, and the message is blocked.
            for sep in ["", " "] {
                if !join_content(
                    texts,
                    sep,
                    &mut s.joined,
                    &mut s.content_ids,
                    &mut s.content_starts,
                ) {
                    if s.content_ids.len() < 2 {
                        break;
                    }
                    continue;
                }
                let (ids, starts) = (&s.content_ids, &s.content_starts);
                for finder in &finders {
                    for m in finder.find_iter(s.joined.as_str()) {
                        item_segments(ids, starts, m.start(), m.end(), |tid, r| {
                            red.push(Redaction {
                                raw: texts.raw_range(tid, r),
                                rule: id,
                                label: rule_label,
                            });
                        });
                    }
                }
            }
        }
        let found = red.len() - before;
        merge_redactions(red);
        found
    }

    /// Counts of redactions per label name, sorted by name (for audit events).
    pub fn redaction_counts<'p>(&'p self, redactions: &[Redaction]) -> Vec<(&'p str, usize)> {
        let mut counts: Vec<(&str, usize)> = Vec::new();
        for r in redactions {
            let name = self.label(r.label);
            match counts.iter_mut().find(|(n, _)| *n == name) {
                Some((_, c)) => *c += 1,
                None => counts.push((name, 1)),
            }
        }
        counts.sort_unstable();
        counts
    }

    /// The inbound rules in precedence order.
    pub fn rules(&self) -> impl ExactSizeIterator<Item = (RuleId, &RuleInfo)> {
        self.rules
            .iter()
            .enumerate()
            .map(|(i, r)| (RuleId(i as u32), r))
    }

    /// The outbound rules in precedence order.
    pub fn outbound_rules(&self) -> impl ExactSizeIterator<Item = (RuleId, &RuleInfo)> {
        self.outbound_rules
            .iter()
            .enumerate()
            .map(|(i, r)| (RuleId(i as u32), r))
    }

    pub fn rule(&self, id: RuleId) -> &RuleInfo {
        &self.rules[id.0 as usize]
    }

    /// The `exceptions` of inbound rule `rule`, in file order (empty for most rules): each
    /// one's `name` is `RULE#N`, its `location` where it is written, its `conditions`
    /// what it matches.
    pub fn exceptions_of(&self, rule: RuleId) -> &[RuleInfo] {
        self.exceptions
            .iter()
            .find(|e| e.rule == rule.0)
            .map_or(&[], |e| &e.program.rules)
    }

    /// Exception `exception` of inbound rule `rule` (as [`Scratch::excepted`] gives them).
    pub fn exception(&self, rule: RuleId, exception: RuleId) -> &RuleInfo {
        &self.exceptions_of(rule)[exception.0 as usize]
    }

    /// How the argument values of `msg` that a `command` condition of the inbound rule
    /// `rule` reads were understood as shell command lines, and which command meets the
    /// condition (for `check`). Empty when the rule has no `command` condition.
    pub fn explain_commands(
        &self,
        rule: RuleId,
        frame: &Frame<'_>,
        msg: &Message,
    ) -> Vec<CommandExplanation> {
        let inb = &self.inbound;
        let Some(ce) = &inb.command else {
            return Vec::new();
        };
        let preds: Vec<&engine::command::CommandPred> = ce
            .preds
            .iter()
            .filter(|p| inb.pred_rules.get(p.pred as usize).contains(&rule.0))
            .collect();
        if preds.is_empty() {
            return Vec::new();
        }
        let mut out = Vec::new();
        let mut s = engine::command::CommandScratch::default();
        let mut links = crate::paths::LinkCache::default();
        let tokens = frame.tokens();
        for i in msg.args.clone() {
            let tok = &tokens[i];
            if tok.kind != TokenKind::String {
                continue;
            }
            let key = tokens
                .get(tok.arg as usize)
                .filter(|_| tok.arg != Token::NO_ARG)
                .map(|key| frame.text(key.text));
            let sel = key
                .and_then(|k| inb.arg_names.get(k).copied())
                .unwrap_or(NO_SEL);
            // As judged: a write's content is read, but a parser limit there is not
            // "any command" (`scan_arguments`).
            s.data_only =
                key.is_some_and(is_write_content_argument) && has_path_argument(frame, msg);
            let text = frame.text(tok.text);
            let glob_operand = !crate::shell::worth_parsing(text)
                && has_glob_meta(text)
                && crate::paths::is_path_shaped(text);
            if !glob_operand && !crate::shell::worth_parsing(text) {
                continue;
            }
            for p in &preds {
                if p.selector != ANY_SEL && p.selector != sel {
                    continue;
                }
                if glob_operand {
                    s.parse_operand(text);
                } else {
                    crate::shell::parse_into(text, &mut s.parsed);
                }
                if let Some(why) = ce.why(p, &self.env, &mut s, &mut links) {
                    out.push(CommandExplanation {
                        understood: s.parsed.describe(),
                        why,
                    });
                    break;
                }
            }
        }
        out
    }

    pub fn outbound_rule(&self, id: RuleId) -> &RuleInfo {
        &self.outbound_rules[id.0 as usize]
    }

    /// Name behind a [`crate::verdict::Redaction::label`]: a secret detector's name,
    /// or the name of the outbound rule whose content condition matched.
    pub fn label(&self, label: u32) -> &str {
        let n = self.detector.specs().len() as u32;
        if label < n {
            self.detector.name(label)
        } else {
            self.outbound_rules
                .get((label - n) as usize)
                .map_or("unknown", |r| r.name.as_str())
        }
    }
}

/// Argument names that carry a file's content to a write tool (`write_file`'s `content`,
/// an edit's `new_string`, a patch's `diff`).
const WRITE_CONTENT_ARGUMENTS: &[&str] = &[
    "content",
    "contents",
    "file_text",
    "text",
    "new_string",
    "old_string",
    "new_str",
    "old_str",
    "newText",
    "oldText",
    "new_text",
    "old_text",
    "edits",
    "diff",
    "patch",
    "insert_text",
];

fn is_write_content_argument(name: &str) -> bool {
    WRITE_CONTENT_ARGUMENTS.contains(&name)
}

/// Whether one of `msg`'s top-level arguments names a path (`path`, `file_path`, …).
fn has_path_argument(frame: &Frame<'_>, msg: &Message) -> bool {
    let tokens = frame.tokens();
    msg.args.clone().any(|k| {
        let t = &tokens[k];
        t.kind == TokenKind::Key
            && t.arg == k as u32
            && crate::paths::is_path_argument(frame.text(t.text))
    })
}

/// Whether a path-shaped value outside a path argument reads as a command, prose or a
/// URL rather than one file's name: it holds white space (`ls -la src/x`; a file name with a space in an argument named
/// like a path is looked up), or it is a URL
/// of another scheme than `file:`. Such values are not looked up for symlinks: a server
/// opens them as no path, and one lookup each cost a tenth of an allowed call.
fn looks_like_prose_or_url(text: &str) -> bool {
    crate::paths::is_remote_url(text) || text.bytes().any(|b| b.is_ascii_whitespace())
}

/// Whether a string holds a glob metacharacter (`*`, `?`, `[`).
fn has_glob_meta(text: &str) -> bool {
    text.bytes().any(|b| matches!(b, b'*' | b'?' | b'['))
}

/// Whether a path-shaped string among `msg`'s arguments holds a NUL. Only a JSON escape
/// can put one there, so strings read straight from the raw bytes are skipped.
fn has_nul_in_path(frame: &Frame<'_>, msg: &Message) -> bool {
    let tokens = frame.tokens();
    msg.args.clone().any(|i| {
        let tok = &tokens[i];
        matches!(tok.kind, TokenKind::Key | TokenKind::String)
            && matches!(tok.text, crate::frame::TextRef::Decoded { .. })
            && {
                let text = frame.text(tok.text);
                crate::paths::has_nul(text) && crate::paths::is_path_shaped(text)
            }
    })
}

/// Fills `joined` with the content texts of one message joined by `sep` (only where two
/// items do not already meet at whitespace), `ids` with each item's text id and length,
/// and `starts` with where each begins in `joined`. `false` when the message has fewer
/// than two content texts, or when `sep` was never inserted (the text is the one joined
/// with nothing).
fn join_content(
    texts: &dyn Texts,
    sep: &str,
    joined: &mut String,
    ids: &mut Vec<(u32, usize)>,
    starts: &mut Vec<usize>,
) -> bool {
    joined.clear();
    ids.clear();
    starts.clear();
    // Most results hold one item: nothing to join, and no copy of it (a 1 MiB result's
    // copy was a tenth of the instructions spent on it).
    let mut items = 0;
    texts.content(&mut |_, _| items += 1);
    if items < 2 {
        return false;
    }
    let mut spaced = false;
    texts.content(&mut |id, text| {
        let bare = !joined.is_empty()
            && !joined.ends_with(|c: char| c.is_whitespace())
            && !text.starts_with(|c: char| c.is_whitespace());
        if bare && !sep.is_empty() {
            joined.push_str(sep);
            spaced = true;
        }
        ids.push((id, text.len()));
        starts.push(joined.len());
        joined.push_str(text);
    });
    ids.len() >= 2 && (sep.is_empty() || spaced)
}

/// The part of `joined[start..end]` in each content item it touches, as (item text id,
/// range in that item), when it touches more than one; nothing otherwise (a match inside
/// one item was found in that item's own text).
fn item_segments(
    ids: &[(u32, usize)],
    starts: &[usize],
    start: usize,
    end: usize,
    mut f: impl FnMut(u32, Range<usize>),
) {
    let first = starts.partition_point(|&b| b <= start).saturating_sub(1);
    let last = starts.partition_point(|&b| b < end).saturating_sub(1);
    if last <= first {
        return;
    }
    for i in first..=last {
        let (id, len) = ids[i];
        let from = start.max(starts[i]) - starts[i];
        let to = end.min(starts[i] + len).saturating_sub(starts[i]);
        if from < to {
            f(id, from..to);
        }
    }
}

/// Sort by start and merge overlapping or touching ranges (the first label wins).
fn merge_redactions(red: &mut Vec<Redaction>) {
    red.retain(|r| !r.raw.is_empty());
    red.sort_by_key(|r| (r.raw.start, std::cmp::Reverse(r.raw.end)));
    let mut w = 0;
    for i in 0..red.len() {
        if w > 0 && red[i].raw.start <= red[w - 1].raw.end {
            let end = red[i].raw.end.max(red[w - 1].raw.end);
            red[w - 1].raw.end = end;
        } else {
            red.swap(w, i);
            w += 1;
        }
    }
    red.truncate(w);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(a: usize, b: usize, label: u32) -> Redaction {
        Redaction {
            raw: a..b,
            rule: RuleId(0),
            label,
        }
    }

    #[test]
    fn program_is_shareable_and_scratch_is_sendable() {
        fn shareable<T: Send + Sync>() {}
        fn sendable<T: Send>() {}
        shareable::<Program>();
        sendable::<Scratch>();
    }

    #[test]
    fn rule_state_survives_switching_table_sizes() {
        let mut st = RuleState::default();
        st.reset(10, 50);
        st.touched.push(40);
        st.counts[40] = 3;
        // A smaller table (outbound after inbound) must not index past its end.
        st.reset(4, 3);
        assert_eq!(st.counts, vec![0; 3]);
        assert!(st.touched.is_empty());
        st.reset(10, 50);
        assert!(st.counts.iter().all(|&c| c == 0));
    }

    #[test]
    fn redactions_are_sorted_and_merged() {
        let mut v = vec![
            r(10, 12, 1),
            r(0, 4, 2),
            r(3, 6, 3),
            r(6, 8, 4),
            r(20, 20, 5),
        ];
        merge_redactions(&mut v);
        assert_eq!(v, vec![r(0, 8, 2), r(10, 12, 1)]);
    }
}
