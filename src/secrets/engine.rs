//! One detector's regex, compiled for the only search the detector does: anchored at a
//! keyword hit, running to the end of the text at most, reporting the match and its
//! `secret` group.
//!
//! The engines are picked for that search, which is why this is not a `meta::Regex`:
//! a meta regex also builds a reverse NFA, literal prefilters and a backtracker that an
//! anchored search never uses, and each build then costs about three times as much.
//! Every search finds the match end with a forward lazy DFA walked by `walk.rs`, which
//! lets a search over a run another search already read stop as soon as it joins it.
//! - A pattern `P (?P<secret>S) X` is three such walks (see [`Staged`]).
//! - Any other pattern is one walk for the match; a `secret` group is then read over the
//!   match alone by the one-pass DFA (or, for a pattern that is not one-pass, a bounded
//!   backtracker or, for a match too long for it, the PikeVM).

use std::ops::Range;
use std::sync::OnceLock;

use regex_automata::dfa::onepass;
use regex_automata::hybrid;
use regex_automata::nfa::thompson::{self, WhichCaptures, backtrack, pikevm};
use regex_automata::util::primitives::NonMaxUsize;
use regex_automata::{Anchored, Input, MatchKind, PatternID};

use super::walk::{self, Trail};
use regex_syntax::hir::Hir;

/// Size limits for a detector's automata (user patterns are untrusted input).
const NFA_SIZE_LIMIT: usize = 32 << 20;
const ONEPASS_SIZE_LIMIT: usize = 1 << 20;
/// Lazy DFA cache capacity of each detector (allocated as states are built; an
/// anchored DFA over one detector stays far below it).
const HYBRID_CACHE_CAPACITY: usize = 2 << 20;

/// A detector's compiled regex.
#[derive(Debug)]
pub(super) struct Engine {
    /// For a pattern of a token's usual shape: its match, decided by comparing bytes.
    shape: Option<Box<TokenShape>>,
    /// For `prefix (?P<secret>…) suffix`: three DFAs, tried before `whole`.
    staged: Option<Box<Staged>>,
    /// Engines for the whole pattern. A staged pattern needs them only when a staged
    /// search cannot decide (rare), so then they are built on first need from `hir`.
    whole: OnceLock<Whole>,
    /// The pattern, kept for building `whole` later.
    hir: Option<Box<Hir>>,
    has_secret: bool,
}

/// The whole pattern: a lazy DFA finds where a match ends (walked as `walk.rs` does, so
/// repeated searches over one run cost little), then, for a `secret` group, a capture
/// engine reads the group over the match alone.
#[derive(Debug)]
struct Whole {
    dfa: hybrid::dfa::DFA,
    groups: Option<Groups>,
    /// For a match the group engine cannot take (too long for the backtracker), and for
    /// a search the DFA gives up on (a Unicode `\b` in a user pattern, on non-ASCII text).
    pikevm: pikevm::PikeVM,
    /// Slot of the start of the `secret` group (its end is the next slot).
    secret_slot: Option<usize>,
}

/// Reads the `secret` group within a match.
#[derive(Debug)]
enum Groups {
    /// One pass over the match (most patterns).
    OnePass(Box<onepass::DFA>),
    /// Patterns that are not one-pass.
    Backtrack(backtrack::BoundedBacktracker),
}

/// A pattern `P (?P<secret>S) X` searched as three anchored DFA searches, P from the
/// start, S where P ended, X where S ended, each leftmost-first.
///
/// Why this gives the same spans as a capture search: leftmost-first prefers paths
/// by their choices in pattern order, so the winning path's P part is the preferred
/// P path, if that one can be completed; the S and X parts then follow the same way.
/// When a stage fails after P matched, a less preferred P path might still complete,
/// so the search falls back to the whole-pattern engines. A match costs three DFA
/// walks (about a byte a nanosecond) instead of a capture engine's walk, several
/// times slower per byte.
#[derive(Debug)]
struct Staged {
    prefix: Option<hybrid::dfa::DFA>,
    secret: SecretStage,
    suffix: Option<hybrid::dfa::DFA>,
}

/// How the `secret` part of a staged pattern is searched.
#[derive(Debug)]
enum SecretStage {
    Dfa(Box<hybrid::dfa::DFA>),
    Run(Box<ClassRun>),
}

/// A secret part of the form `[a][b]…[c]{k,}` over ASCII classes (the value of every
/// generic `key = value` row): its greedy match is the run of `[c]` after the leading
/// classes, if that run is long enough.
///
/// Why not a DFA walk: on a text made of one label repeated (`token=token=…`), every hit's
/// secret is the same run seen from a later start. Its end is remembered
/// ([`RunMemo`]), so a hit inside a run already read costs a comparison, where a DFA walk
/// (even one that joins the last one's path, `walk.rs`) cost a few hundred instructions
/// of start-up and bookkeeping per hit.
#[derive(Debug)]
struct ClassRun {
    lead: Box<[[bool; 256]]>,
    class: [bool; 256],
    min: usize,
}

/// The end of the last run of a [`ClassRun`]'s class that was read: every position in
/// `from..end` is in the class, and `end` is not (or is the end of the text).
#[derive(Debug, Default, Clone, Copy)]
struct RunMemo {
    scan: u64,
    from: usize,
    end: usize,
}

impl RunMemo {
    /// The end of the run of `class` from `at`: remembered when `at` lies in the last run
    /// read in this scan, read (and remembered) otherwise.
    fn run_end(&mut self, hay: &[u8], at: usize, class: &[bool; 256], scan: u64) -> usize {
        if self.scan == scan && self.from <= at && at <= self.end {
            return self.end;
        }
        let end = hay[at..]
            .iter()
            .position(|&b| !class[usize::from(b)])
            .map_or(hay.len(), |n| at + n);
        *self = RunMemo {
            scan,
            from: at,
            end,
        };
        end
    }
}

impl ClassRun {
    /// The end of the greedy match at `start`, as an anchored leftmost-first search of
    /// the part would find it.
    fn search(&self, hay: &[u8], start: usize, memo: &mut RunMemo, scan: u64) -> Option<usize> {
        let mut at = start;
        for set in &self.lead {
            let b = *hay.get(at)?;
            if !set[usize::from(b)] {
                return None;
            }
            // A class holding every non-ASCII character takes a whole one.
            at += utf8_len(b);
        }
        let end = memo.run_end(hay, at, &self.class, scan);
        // The repetition counts characters: only a run holding non-ASCII bytes (which
        // the class then holds all of) has fewer characters than bytes.
        let chars = |from: usize| {
            hay[from..end]
                .iter()
                .filter(|&&b| b & 0xC0 != 0x80)
                .take(self.min)
                .count()
        };
        let long_enough = end - at >= self.min && (!self.class[0x80] || chars(at) >= self.min);
        long_enough.then_some(end)
    }

    /// The part as a run, if it has that form.
    fn of(hir: &Hir) -> Option<ClassRun> {
        use regex_syntax::hir::HirKind;
        let (lead, last) = match hir.kind() {
            HirKind::Concat(parts) => parts.split_last().map(|(l, lead)| (lead, l))?,
            _ => (&[][..], hir),
        };
        let HirKind::Repetition(rep) = last.kind() else {
            return None;
        };
        if rep.max.is_some() || !rep.greedy {
            return None;
        }
        Some(ClassRun {
            lead: lead.iter().map(ascii_set).collect::<Option<_>>()?,
            class: ascii_set(&rep.sub)?,
            min: rep.min as usize,
        })
    }
}

/// A whole pattern of the shape most provider tokens have: a word boundary or none, a
/// literal prefix (or single-byte classes), one ASCII class repeated `{min,max}` or
/// `{min,}`, and a word boundary or none (`\bghp_[A-Za-z0-9]{36}\b`,
/// `\bglpat-[A-Za-z0-9_.-]{20,}`, `\bEZ[AT]K[A-Za-z0-9]{54}`). Its anchored
/// leftmost-first match is decided by comparing bytes: the lead, then the length of the
/// class's run and the bytes on either side of the match.
///
/// Why not a DFA walk: a hit whose token is one character short (a near miss, or a cut
/// token's pieces rejoined and scanned again) costs a walk's start-up, a few dozen steps
/// and its bookkeeping, about 1,300 instructions; comparing the bytes costs a few per
/// byte. A word boundary next to a non-ASCII character (a Unicode `\b` asks whether that
/// character is a letter) is left to the DFA.
#[derive(Debug)]
struct TokenShape {
    /// The word boundary before the lead, if the pattern starts with one.
    before: Option<Boundary>,
    lead: Box<[[bool; 256]]>,
    /// The repeated class: ASCII bytes only.
    class: [bool; 256],
    min: usize,
    max: Option<usize>,
    /// The word boundary after the repetition, if the pattern ends with one. Only a
    /// class of word characters takes one: then no shorter repetition can end at a
    /// boundary the greedy one did not (two word characters have none between them).
    after: Option<Boundary>,
}

/// A `\b`, as written: Unicode (`\b`) or ASCII (`(?-u:\b)`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Boundary {
    Unicode,
    Ascii,
}

/// What [`TokenShape::search`] could decide.
enum Shape {
    Match(usize),
    /// No match, decided by the byte before the start and the `read` bytes from it (as
    /// a walk that died; `walk::same_window`).
    NoMatch {
        read: usize,
    },
    /// A Unicode word boundary next to a non-ASCII character: the DFA decides.
    Unsure,
}

impl TokenShape {
    /// The shape of the whole pattern `hir`, if it has this one.
    fn of(hir: &Hir) -> Option<TokenShape> {
        use regex_syntax::hir::{HirKind, Look};
        let HirKind::Concat(parts) = hir.kind() else {
            return None;
        };
        let boundary = |part: &Hir| match part.kind() {
            HirKind::Look(Look::WordUnicode) => Some(Boundary::Unicode),
            HirKind::Look(Look::WordAscii) => Some(Boundary::Ascii),
            _ => None,
        };
        let mut parts = &parts[..];
        let before = parts.first().and_then(boundary);
        if before.is_some() {
            parts = &parts[1..];
        }
        let after = parts.last().and_then(boundary);
        if after.is_some() {
            parts = &parts[..parts.len() - 1];
        }
        let (last, lead_parts) = parts.split_last()?;
        let HirKind::Repetition(rep) = last.kind() else {
            return None;
        };
        let class = ascii_set(&rep.sub)?;
        if !rep.greedy || class[0x80..].iter().any(|&b| b) {
            return None;
        }
        let mut lead = Vec::new();
        for part in lead_parts {
            match part.kind() {
                HirKind::Literal(lit) if lit.0.is_ascii() => {
                    lead.extend(lit.0.iter().map(|&b| {
                        let mut set = [false; 256];
                        set[usize::from(b)] = true;
                        set
                    }));
                }
                _ => lead.push(ascii_set(part).filter(|set| !set[0x80..].iter().any(|&b| b))?),
            }
        }
        let min = rep.min as usize;
        // The byte before a repetition that may be empty is the lead's last: it must be a
        // word character too for the boundary after to be read as above.
        let words_before_after = (0..256).all(|b| !class[b] || is_word_byte(b as u8))
            && (min > 0
                || lead
                    .last()
                    .is_some_and(|set| (0..256).all(|b| !set[b] || is_word_byte(b as u8))));
        if after.is_some() && !words_before_after {
            return None;
        }
        Some(TokenShape {
            before,
            lead: lead.into(),
            class,
            min,
            max: rep.max.map(|m| m as usize),
            after,
        })
    }

    /// The end of the match anchored at `start`, as a leftmost-first search finds it.
    /// `memo` remembers the last run of the class read, so that hits inside one long run
    /// (a keyword repeated) do not read it again.
    fn search(&self, hay: &[u8], start: usize, memo: &mut RunMemo, scan: u64) -> Shape {
        // Decided at `at`: by the bytes before it and the one there.
        let no_match = |at: usize| Shape::NoMatch {
            read: at + 1 - start,
        };
        if let Some(boundary) = self.before {
            let prev = start.checked_sub(1).map(|i| hay[i]);
            let next = hay.get(start).copied();
            match word_boundary(boundary, prev, next) {
                Some(true) => {}
                Some(false) => return no_match(start),
                None => return Shape::Unsure,
            }
        }
        let mut at = start;
        for set in &self.lead {
            match hay.get(at) {
                Some(&b) if set[usize::from(b)] => at += 1,
                _ => return no_match(at),
            }
        }
        let run_end = memo.run_end(hay, at, &self.class, scan);
        let run = run_end - at;
        let taken = self.max.map_or(run, |max| run.min(max));
        if taken < self.min {
            return no_match(run_end);
        }
        let end = at + taken;
        if let Some(boundary) = self.after {
            // The bytes before `end` are word characters (see `after`).
            match word_boundary(
                boundary,
                end.checked_sub(1).map(|i| hay[i]),
                hay.get(end).copied(),
            ) {
                Some(true) => {}
                Some(false) => return no_match(end),
                None => return Shape::Unsure,
            }
        }
        Shape::Match(end)
    }
}

/// Whether `b` is an ASCII word character (`[0-9A-Za-z_]`): what `\b` reads it as (an
/// ASCII byte; the rejoined texts of `split.rs` are ASCII).
pub(super) fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// Whether a word boundary lies between the bytes `prev` and `next` (`None`: the start
/// or the end of the text); `None` when a Unicode boundary depends on a non-ASCII
/// character.
fn word_boundary(boundary: Boundary, prev: Option<u8>, next: Option<u8>) -> Option<bool> {
    let word = |b: Option<u8>| match b {
        None => Some(false),
        Some(b) if b.is_ascii() => Some(is_word_byte(b)),
        Some(_) if boundary == Boundary::Ascii => Some(false),
        Some(_) => None,
    };
    Some(word(prev)? != word(next)?)
}

/// The bytes of a character class (or a one-byte ASCII literal) whose non-ASCII part is
/// empty or every non-ASCII character (a negated ASCII class such as `[^\s"']`): on
/// UTF-8 text such a class holds a character exactly when it holds the character's
/// bytes, so a run of it can be read byte by byte.
fn ascii_set(hir: &Hir) -> Option<[bool; 256]> {
    use regex_syntax::hir::{Class, HirKind};
    let mut set = [false; 256];
    match hir.kind() {
        HirKind::Class(Class::Unicode(c)) => {
            let mut non_ascii = Vec::new();
            for r in c.ranges() {
                let (lo, hi) = (u32::from(r.start()), u32::from(r.end()));
                for b in lo..=hi.min(0x7F) {
                    set[b as usize] = true;
                }
                if hi > 0x7F {
                    non_ascii.push((lo.max(0x80), hi));
                }
            }
            match non_ascii[..] {
                [] => {}
                [(0x80, 0xD7FF), (0xE000, 0x10FFFF)] | [(0x80, 0x10FFFF)] => {
                    set[0x80..].fill(true);
                }
                _ => return None,
            }
        }
        HirKind::Class(Class::Bytes(c)) => {
            for r in c.ranges() {
                if r.end() > 0x7F {
                    return None;
                }
                set[usize::from(r.start())..=usize::from(r.end())].fill(true);
            }
        }
        HirKind::Literal(lit) if lit.0.len() == 1 && lit.0[0] < 0x80 => {
            set[usize::from(lit.0[0])] = true;
        }
        _ => return None,
    }
    Some(set)
}

/// The length of the UTF-8 character whose first byte is `b` (1 for any other byte).
fn utf8_len(b: u8) -> usize {
    match b {
        0xF0.. => 4,
        0xE0.. => 3,
        0xC0.. => 2,
        _ => 1,
    }
}

enum Stage {
    Found(Found),
    NoMatch,
    Unsure,
}

/// Per-caller scratch for one [`Engine`].
#[derive(Debug)]
pub(super) struct EngineCache {
    /// Caches of the prefix, secret and suffix DFAs of a staged search.
    stages: [Option<hybrid::dfa::Cache>; 3],
    /// The last walk of each of the prefix, secret and suffix DFAs and of the whole
    /// pattern's DFA, in the current scan.
    trails: [Trail; 4],
    /// The last run read by a [`ClassRun`] secret part.
    run: RunMemo,
    /// After a search that found nothing: how far its answer depended on the text
    /// (see [`EngineCache::refuted_within`]).
    refuted: Option<usize>,
    /// After a search that found nothing: whether the walk that decided it read to the
    /// end of the text (see [`Engine::none_from`]).
    ran_to_end: bool,
    /// Caches of the whole-pattern engines, created on first use.
    dfa: Option<hybrid::dfa::Cache>,
    onepass: Option<onepass::Cache>,
    backtrack: Option<backtrack::Cache>,
    pikevm: Option<pikevm::Cache>,
    slots: Vec<Option<NonMaxUsize>>,
}

/// A match: the whole span and the secret's span.
pub(super) struct Found {
    /// Checked against a capture search by the tests; the detector needs the secret only.
    #[cfg_attr(not(test), allow(dead_code))]
    pub whole: Range<usize>,
    pub secret: Range<usize>,
}

impl EngineCache {
    /// After [`Engine::search`] found no match at `start`: `Some(read)` when a search at
    /// any other start `s > 0` whose bytes `s - 1..s + read` equal those of
    /// `start - 1..start + read` finds none either (`walk::same_window`), because the
    /// search died within them.
    pub fn refuted_within(&self) -> Option<usize> {
        self.refuted
    }

    /// After [`Engine::search`] found no match: whether the walk that decided it read to
    /// the end of the text, so that [`Engine::none_from`] costs no more than it did.
    pub fn ran_to_end(&self) -> bool {
        self.ran_to_end
    }
}

impl Engine {
    /// Compiles `hir`, the parsed pattern of one detector. With `complete`, every
    /// engine is built now (a user pattern: any error shows at start-up); without,
    /// engines a search may never need are left for later.
    pub fn new(hir: &Hir, complete: bool) -> Result<Engine, String> {
        let has_secret = has_secret_group(hir);
        let staged = staged(hir)?.map(Box::new);
        let shape = (!has_secret)
            .then(|| TokenShape::of(hir))
            .flatten()
            .map(Box::new);
        let whole = OnceLock::new();
        if complete || (staged.is_none() && shape.is_none()) {
            let _ = whole.set(Whole::new(hir, has_secret)?);
        }
        let hir = whole.get().is_none().then(|| Box::new(hir.clone()));
        Ok(Engine {
            shape,
            staged,
            whole,
            hir,
            has_secret,
        })
    }

    fn whole(&self) -> &Whole {
        self.whole.get_or_init(|| {
            let hir = self
                .hir
                .as_deref()
                .expect("an engine without `whole` keeps its pattern");
            // The same pattern was compiled into DFAs already; the test suite builds
            // every built-in with `complete` (`every_builtin_compiles`).
            Whole::new(hir, self.has_secret)
                .unwrap_or_else(|e| panic!("a built-in pattern does not compile: {e}"))
        })
    }

    /// Whether the pattern has a `secret` group (only part of a match is the secret).
    pub fn has_secret_group(&self) -> bool {
        self.has_secret
    }

    /// A cache for searches of this engine; `memos`: whether its walks may answer from
    /// the shifted and same-start memos (`walk.rs`; off only to measure them).
    pub fn create_cache(&self, memos: bool) -> EngineCache {
        let stages = match &self.staged {
            Some(st) => [
                st.prefix.as_ref().map(|d| d.create_cache()),
                match &st.secret {
                    SecretStage::Dfa(d) => Some(d.create_cache()),
                    SecretStage::Run(_) => None,
                },
                st.suffix.as_ref().map(|d| d.create_cache()),
            ],
            None => [None, None, None],
        };
        EngineCache {
            stages,
            trails: std::array::from_fn(|_| Trail::new(memos)),
            run: RunMemo::default(),
            refuted: None,
            ran_to_end: false,
            dfa: None,
            onepass: None,
            backtrack: None,
            pikevm: None,
            slots: Vec::new(),
        }
    }

    /// The leftmost-first match of an anchored search over `input`, and its secret.
    /// `input` reaches the end of its haystack; `scan` names the haystack (searches
    /// of one scan reuse each other's walks).
    pub fn search(&self, cache: &mut EngineCache, input: &Input<'_>, scan: u64) -> Option<Found> {
        debug_assert_eq!(input.end(), input.haystack().len());
        cache.refuted = None;
        cache.ran_to_end = false;
        if let Some(shape) = &self.shape {
            let start = input.start();
            match shape.search(input.haystack(), start, &mut cache.run, scan) {
                Shape::Match(end) => {
                    return Some(Found {
                        whole: start..end,
                        secret: start..end,
                    });
                }
                Shape::NoMatch { read } => {
                    // Like a walk that died: a later hit over the same bytes is answered
                    // by comparing them, unless the end of the text decided this one.
                    cache.refuted = (read <= walk::MAX_REFUTED_READ
                        && start + read <= input.haystack().len())
                    .then_some(read);
                    return None;
                }
                Shape::Unsure => {}
            }
        }
        if let Some(staged) = &self.staged {
            match staged.search(
                &mut cache.stages,
                &mut cache.trails,
                &mut cache.run,
                input,
                scan,
            ) {
                Stage::Found(found) => return Some(found),
                Stage::NoMatch => {
                    // Only the prefix was searched, and it matched nowhere.
                    cache.refuted = cache.trails[0].refuted_within();
                    cache.ran_to_end = cache.trails[0].ran_to_end();
                    return None;
                }
                Stage::Unsure => {}
            }
        }
        let whole = self.whole();
        let needed = whole.secret_slot.map_or(2, |s| s + 2);
        if cache.slots.len() < needed {
            cache.slots.resize(needed, None);
        }
        let dfa_cache = cache.dfa.get_or_insert_with(|| whole.dfa.create_cache());
        let slots = &mut cache.slots;
        let end = match walk::search_fwd(&whole.dfa, dfa_cache, &mut cache.trails[3], scan, input) {
            Ok(Some(end)) => end,
            Ok(None) => {
                cache.refuted = cache.trails[3].refuted_within();
                cache.ran_to_end = cache.trails[3].ran_to_end();
                return None;
            }
            Err(_) => {
                let vm_cache = cache
                    .pikevm
                    .get_or_insert_with(|| whole.pikevm.create_cache());
                whole.pikevm.search_slots(vm_cache, input, slots)?;
                return whole.found(slots);
            }
        };
        if whole.secret_slot.is_none() {
            let whole = input.start()..end;
            return Some(Found {
                secret: whole.clone(),
                whole,
            });
        }
        // Read the groups over the match alone.
        let within = input.clone().range(input.start()..end);
        let matched = match &whole.groups {
            Some(Groups::OnePass(op)) => {
                let op_cache = cache.onepass.get_or_insert_with(|| op.create_cache());
                op.try_search_slots(op_cache, &within, slots).ok().flatten()
            }
            Some(Groups::Backtrack(bt)) if within.get_span().len() <= bt.max_haystack_len() => {
                let bt_cache = cache.backtrack.get_or_insert_with(|| bt.create_cache());
                bt.try_search_slots(bt_cache, &within, slots).ok().flatten()
            }
            _ => {
                let vm_cache = cache
                    .pikevm
                    .get_or_insert_with(|| whole.pikevm.create_cache());
                whole.pikevm.search_slots(vm_cache, &within, slots)
            }
        };
        matched?;
        whole.found(slots)
    }
}

impl Engine {
    /// Whether no match starts anywhere in `input`'s range (an anchored search at any
    /// of its positions finds none): one unanchored pass of the DFA whose failure
    /// decides a search, the prefix's for a staged pattern (no `P` match, no match).
    /// `false` when unsure (the DFA gave up).
    ///
    /// Why: on a label repeated with no separator after it (`SECRETKEYSECRETKEY…`), a
    /// row's search at every hit reads the identifier to the end of the text and finds
    /// nothing. The walks join each other's paths (`walk.rs`), but joining still cost a
    /// few hundred instructions per hit; one pass answers for every later hit.
    pub fn none_from(&self, cache: &mut EngineCache, input: &Input<'_>) -> bool {
        let input = input.clone().anchored(Anchored::No).earliest(true);
        let prefix = self.staged.as_deref().and_then(|s| s.prefix.as_ref());
        let found = match (prefix, &mut cache.stages[0]) {
            (Some(dfa), Some(prefix_cache)) => dfa.try_search_fwd(prefix_cache, &input),
            _ => {
                let whole = self.whole();
                let dfa_cache = cache.dfa.get_or_insert_with(|| whole.dfa.create_cache());
                whole.dfa.try_search_fwd(dfa_cache, &input)
            }
        };
        matches!(found, Ok(None))
    }
}

impl Whole {
    fn new(hir: &Hir, has_secret: bool) -> Result<Whole, String> {
        let nfa = thompson::Compiler::new()
            .configure(
                thompson::Config::new()
                    .nfa_size_limit(Some(NFA_SIZE_LIMIT))
                    .which_captures(if has_secret {
                        WhichCaptures::All
                    } else {
                        WhichCaptures::Implicit
                    }),
            )
            .build_from_hir(hir)
            .map_err(|e| e.to_string())?;
        let secret_slot = if has_secret {
            nfa.group_info()
                .to_index(PatternID::ZERO, "secret")
                .map(|group| group * 2)
        } else {
            None
        };
        let groups = match secret_slot {
            None => None,
            Some(_) => {
                let onepass = onepass::Builder::new()
                    .configure(
                        onepass::Config::new()
                            .match_kind(MatchKind::LeftmostFirst)
                            .size_limit(Some(ONEPASS_SIZE_LIMIT)),
                    )
                    .build_from_nfa(nfa.clone());
                Some(match onepass {
                    Ok(onepass) => Groups::OnePass(Box::new(onepass)),
                    Err(_) => Groups::Backtrack(
                        backtrack::BoundedBacktracker::new_from_nfa(nfa.clone())
                            .map_err(|e| e.to_string())?,
                    ),
                })
            }
        };
        let dfa = hybrid::dfa::Builder::new()
            .configure(
                hybrid::dfa::Config::new()
                    .match_kind(MatchKind::LeftmostFirst)
                    .unicode_word_boundary(true)
                    .cache_capacity(HYBRID_CACHE_CAPACITY),
            )
            .build_from_nfa(nfa.clone())
            .map_err(|e| e.to_string())?;
        let pikevm = pikevm::PikeVM::new_from_nfa(nfa).map_err(|e| e.to_string())?;
        Ok(Whole {
            dfa,
            groups,
            pikevm,
            secret_slot,
        })
    }

    fn found(&self, slots: &[Option<NonMaxUsize>]) -> Option<Found> {
        let whole = span(slots, 0)?;
        let secret = self.secret_slot.and_then(|s| span(slots, s));
        Some(Found {
            secret: secret.unwrap_or_else(|| whole.clone()),
            whole,
        })
    }
}

impl Staged {
    fn search(
        &self,
        caches: &mut [Option<hybrid::dfa::Cache>; 3],
        trails: &mut [Trail; 4],
        run_memo: &mut RunMemo,
        input: &Input<'_>,
        scan: u64,
    ) -> Stage {
        let [prefix_cache, secret_cache, suffix_cache] = caches;
        let [prefix_trail, secret_trail, suffix_trail, _] = trails;
        let start = input.start();
        let secret_start = match (&self.prefix, prefix_cache) {
            (Some(dfa), Some(cache)) => {
                match walk::search_fwd(dfa, cache, prefix_trail, scan, input) {
                    Ok(Some(end)) => end,
                    // No P path matches at all, so the whole pattern cannot either.
                    Ok(None) => return Stage::NoMatch,
                    Err(_) => return Stage::Unsure,
                }
            }
            _ => start,
        };
        let at = |from: usize| input.clone().range(from..input.end());
        let secret_end = match (&self.secret, secret_cache) {
            (SecretStage::Run(run), _) => {
                match run.search(input.haystack(), secret_start, run_memo, scan) {
                    Some(end) => end,
                    None => return Stage::Unsure,
                }
            }
            (SecretStage::Dfa(dfa), Some(cache)) => {
                match walk::search_fwd(dfa, cache, secret_trail, scan, &at(secret_start)) {
                    Ok(Some(end)) => end,
                    _ => return Stage::Unsure,
                }
            }
            (SecretStage::Dfa(_), None) => return Stage::Unsure,
        };
        let end = match (&self.suffix, suffix_cache) {
            (Some(dfa), Some(cache)) => {
                match walk::search_fwd(dfa, cache, suffix_trail, scan, &at(secret_end)) {
                    Ok(Some(end)) => end,
                    _ => return Stage::Unsure,
                }
            }
            _ => secret_end,
        };
        Stage::Found(Found {
            whole: start..end,
            secret: secret_start..secret_end,
        })
    }
}

/// The three DFAs of a pattern whose top level is `P (?P<secret>S) X`.
fn staged(hir: &Hir) -> Result<Option<Staged>, String> {
    use regex_syntax::hir::HirKind;
    let HirKind::Concat(parts) = hir.kind() else {
        return Ok(None);
    };
    let is_secret =
        |h: &Hir| matches!(h.kind(), HirKind::Capture(c) if c.name.as_deref() == Some("secret"));
    let Some(i) = parts.iter().position(is_secret) else {
        return Ok(None);
    };
    let HirKind::Capture(secret) = parts[i].kind() else {
        return Ok(None);
    };
    let part = |hirs: &[Hir]| -> Result<Option<hybrid::dfa::DFA>, String> {
        if hirs.is_empty() {
            return Ok(None);
        }
        stage_dfa(&Hir::concat(hirs.to_vec())).map(Some)
    };
    Ok(Some(Staged {
        prefix: part(&parts[..i])?,
        secret: match ClassRun::of(&secret.sub) {
            Some(run) => SecretStage::Run(Box::new(run)),
            None => SecretStage::Dfa(Box::new(stage_dfa(&secret.sub)?)),
        },
        suffix: part(&parts[i + 1..])?,
    }))
}

fn stage_dfa(hir: &Hir) -> Result<hybrid::dfa::DFA, String> {
    let nfa = thompson::Compiler::new()
        .configure(
            thompson::Config::new()
                .nfa_size_limit(Some(NFA_SIZE_LIMIT))
                .which_captures(WhichCaptures::None),
        )
        .build_from_hir(hir)
        .map_err(|e| e.to_string())?;
    hybrid::dfa::Builder::new()
        .configure(
            hybrid::dfa::Config::new()
                .match_kind(MatchKind::LeftmostFirst)
                .unicode_word_boundary(true)
                .cache_capacity(HYBRID_CACHE_CAPACITY),
        )
        .build_from_nfa(nfa)
        .map_err(|e| e.to_string())
}

fn span(slots: &[Option<NonMaxUsize>], slot: usize) -> Option<Range<usize>> {
    let start = slots.get(slot).copied().flatten()?.get();
    let end = slots.get(slot + 1).copied().flatten()?.get();
    Some(start..end)
}

fn has_secret_group(hir: &Hir) -> bool {
    use regex_syntax::hir::HirKind;
    match hir.kind() {
        HirKind::Capture(c) => c.name.as_deref() == Some("secret") || has_secret_group(&c.sub),
        HirKind::Concat(subs) | HirKind::Alternation(subs) => subs.iter().any(has_secret_group),
        HirKind::Repetition(r) => has_secret_group(&r.sub),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use regex_automata::{Anchored, meta};

    /// The generic `key = value` rows, whose values are what repeated labels run over,
    /// read their value as a run of bytes, not by a DFA walk.
    #[test]
    fn generic_values_are_read_as_runs() {
        for spec in crate::secrets::builtin_specs() {
            if !spec.name.starts_with("generic-") {
                continue;
            }
            let hir = regex_syntax::parse(&spec.regex).unwrap();
            let engine = Engine::new(&hir, false).unwrap();
            let staged = engine.staged.as_deref().expect("staged");
            assert!(
                matches!(staged.secret, SecretStage::Run(_)),
                "{} reads its value with a DFA",
                spec.name
            );
        }
    }

    /// Most provider formats are read by comparing bytes, not by a DFA walk.
    #[test]
    fn token_formats_are_read_by_comparing_bytes() {
        let shaped: Vec<String> = crate::secrets::builtin_specs()
            .into_iter()
            .filter(|spec| {
                let hir = regex_syntax::parse(&spec.regex).unwrap();
                Engine::new(&hir, false).unwrap().shape.is_some()
            })
            .map(|spec| spec.name)
            .collect();
        for name in [
            "github-token",
            "gitlab-pat",
            "huggingface-token",
            "npm-token",
        ] {
            assert!(
                shaped.iter().any(|n| n == name),
                "{name} is walked by a DFA"
            );
        }
        assert!(
            shaped.len() >= 70,
            "only {} formats: {shaped:?}",
            shaped.len()
        );
    }

    /// The engine (staged, one-pass or DFA + backtracker) against a meta regex's
    /// capture search, anchored at every position of many small random texts. The
    /// patterns are ambiguous on purpose: where the preferred prefix path cannot be
    /// completed, the staged search must fall back and still agree.
    #[test]
    fn spans_agree_with_a_capture_search() {
        let patterns = [
            r"k(?:=|:=|:)?=?(?P<secret>[=a-c]{2,})(?:[^=a-c]|$)",
            r"k:?(?P<secret>:?a+)b",
            r"(?:ka|k)(?P<secret>ab|a)(?:bb|b)?c",
            r"k(?P<secret>a*?)b",
            r"(?-u:\b)k(?P<secret>[a-c]{3})(?-u:\b)",
            r"k[a-c]{0,3}?c(?P<secret>[a-c]+)",
            r"(?P<secret>k[ab]+)=?",
            r"k[ab]{2}c",
            // Read as runs of bytes (`ClassRun`), non-ASCII characters included.
            r"k=?(?P<secret>[^ =][^ ]{2,})(?:[ ]|$)",
            r"k(?P<secret>[a-cé]{3,})",
            // Read by comparing bytes (`TokenShape`), word boundaries next to non-ASCII
            // characters left to the DFA.
            r"\bk[a-c]{3}\b",
            r"\bk[a-c]{2,}",
            r"\bka[a-c_]{1,3}\b",
            r"(?-u:\b)k[a-c_]{2}(?-u:\b)",
            r"k[a-c=]{0,2}",
            r"\bk[ab][a-c]{2,3}\b",
            r"\bk=[abc]{0,2}\b",
        ];
        let alphabet = ["k", "a", "b", "c", "=", ":", " ", "é", "€", "_"];
        let mut rng = crate::test_rng::Rng(0x9E37_79B9_7F4A_7C15);
        let mut next = || rng.next();
        for pattern in patterns {
            let hir = regex_syntax::parse(pattern).unwrap();
            let engine = Engine::new(&hir, false).unwrap();
            let mut cache = engine.create_cache(true);
            let meta = meta::Regex::new(pattern).unwrap();
            let mut caps = meta.create_captures();
            for scan in 0..3000 {
                let len = (next() % 12) as usize;
                let text: String = (0..len)
                    .map(|_| alphabet[(next() % alphabet.len() as u64) as usize])
                    .collect();
                for start in (0..text.len()).filter(|&i| text.is_char_boundary(i)) {
                    let input = Input::new(&text).range(start..).anchored(Anchored::Yes);
                    meta.search_captures(&input, &mut caps);
                    let want = caps.get_match().map(|m| {
                        let secret = caps
                            .get_group_by_name("secret")
                            .map_or(m.range(), |s| s.range());
                        (m.range(), secret)
                    });
                    let got = engine
                        .search(&mut cache, &input, scan)
                        .map(|f| (f.whole, f.secret));
                    assert_eq!(got, want, "{pattern} on {text:?} at {start}");
                }
            }
        }
    }
}
