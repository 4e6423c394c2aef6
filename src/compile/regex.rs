//! The `regex` engine class: every regex of one class (inbound argument regexes, or
//! outbound `response_contains_regex`) in one multi-pattern automaton with
//! `MatchKind::All`, queried once per value for the set of patterns that match.
//!
//! The automaton is a forward lazy DFA over one Thompson NFA: "which patterns match" needs
//! nothing else, and the general `meta::Regex` also compiled a reverse NFA, a one-pass DFA,
//! a backtracker and literal prefilters (about half the build, which sits on the path of
//! the first frame). Patterns are in the policy dialect (ASCII `\b`), so the lazy DFA
//! never has to give up; if it ever did, a PikeVM over the same NFA answers instead.

use std::sync::OnceLock;

use regex_automata::hybrid::dfa::{Cache as DfaCache, DFA};
use regex_automata::nfa::thompson::{self, NFA, pikevm::PikeVM};
use regex_automata::{Anchored, Input, MatchKind, PatternSet, meta};
use regex_syntax::hir::Hir;

use super::PredMap;

/// Bound on the compiled NFA, the full DFA and the lazy DFA cache, so a hostile or
/// careless pattern cannot make compilation or evaluation take unbounded memory
/// (the same bound globset uses).
pub(crate) const SIZE_LIMIT: usize = 10 << 20;

/// Why a regex engine failed to build.
#[derive(Debug)]
pub(crate) struct RegexFailure {
    /// The pattern to blame, when one pattern alone fails.
    pub pattern: Option<usize>,
    pub reason: String,
}

/// Every pattern parsed in the policy dialect; a failure names the pattern.
fn parse_all(patterns: &[String]) -> Result<Vec<Hir>, RegexFailure> {
    patterns
        .iter()
        .enumerate()
        .map(|(i, p)| {
            crate::regex_dialect::parse(p).map_err(|e| RegexFailure {
                pattern: Some(i),
                reason: e.message,
            })
        })
        .collect()
}

/// A regex for finding where one pattern matches (the redact path only).
pub(crate) fn build_one(pattern: &str) -> Result<meta::Regex, RegexFailure> {
    let hir = parse_all(std::slice::from_ref(&pattern.to_string()))?;
    meta::Regex::builder()
        .configure(
            meta::Config::new()
                .match_kind(MatchKind::LeftmostFirst)
                .nfa_size_limit(Some(SIZE_LIMIT))
                .dfa_size_limit(Some(SIZE_LIMIT))
                .onepass_size_limit(Some(SIZE_LIMIT))
                .hybrid_cache_capacity(SIZE_LIMIT),
        )
        .build_from_hir(&hir[0])
        .map_err(|e| RegexFailure {
            pattern: Some(0),
            reason: e.to_string(),
        })
}

/// All patterns of a class and the predicates each one feeds.
#[derive(Debug)]
pub(crate) struct RegexEngine {
    built: OnceLock<SetMatcher>,
    /// The patterns, kept until the automaton is built (deferred engines only).
    patterns: Box<[String]>,
    pub map: PredMap,
}

/// Which patterns of a set match a text.
#[derive(Debug)]
struct SetMatcher {
    dfa: DFA,
    /// Searches start at the first byte only (every pattern begins with `^`: globs).
    anchored: Anchored,
    /// Only for a search the lazy DFA gives up on (it should not: see the module docs).
    fallback: OnceLock<PikeVM>,
    nfa: NFA,
}

/// Per-caller search state of a [`RegexEngine`]: made by [`RegexEngine::scratch`], the
/// automaton caches created on first use.
#[derive(Debug)]
pub(crate) struct SetScratch {
    dfa: Option<DfaCache>,
    fallback: Option<regex_automata::nfa::thompson::pikevm::Cache>,
    set: PatternSet,
}

impl Default for SetScratch {
    /// Scratch for an engine that does not exist (an `Option<RegexEngine>` that is `None`).
    fn default() -> SetScratch {
        SetScratch {
            dfa: None,
            fallback: None,
            set: PatternSet::new(0),
        }
    }
}

fn build_set(patterns: &[String]) -> Result<SetMatcher, RegexFailure> {
    build_from_hirs(&parse_all(patterns)?, Anchored::No)
}

fn build_from_hirs(hirs: &[Hir], anchored: Anchored) -> Result<SetMatcher, RegexFailure> {
    SetMatcher::from_hirs(hirs, anchored).map_err(|reason| RegexFailure {
        // The combined build does not say which pattern is too large: the first that
        // fails on its own.
        pattern: hirs
            .iter()
            .position(|h| SetMatcher::from_hirs(std::slice::from_ref(h), anchored).is_err()),
        reason,
    })
}

impl SetMatcher {
    fn from_hirs(hirs: &[Hir], anchored: Anchored) -> Result<SetMatcher, String> {
        let nfa = thompson::Compiler::new()
            .configure(
                thompson::Config::new()
                    .nfa_size_limit(Some(SIZE_LIMIT))
                    .shrink(false),
            )
            .build_many_from_hir(hirs)
            .map_err(|e| e.to_string())?;
        let dfa = DFA::builder()
            .configure(
                DFA::config()
                    .match_kind(MatchKind::All)
                    .cache_capacity(SIZE_LIMIT)
                    // A Unicode word boundary (only if spelled out explicitly) makes the
                    // lazy DFA stop at non-ASCII input; the PikeVM takes over then.
                    .unicode_word_boundary(true),
            )
            .build_from_nfa(nfa.clone())
            .map_err(|e| e.to_string())?;
        Ok(SetMatcher {
            dfa,
            anchored,
            fallback: OnceLock::new(),
            nfa,
        })
    }
}

impl RegexEngine {
    /// Built now; fails on a pattern that does not compile.
    pub fn new(patterns: &[String], map: PredMap) -> Result<RegexEngine, RegexFailure> {
        Ok(RegexEngine {
            built: OnceLock::from(build_set(patterns)?),
            patterns: patterns.into(),
            map,
        })
    }

    /// Built now from parsed patterns that all begin with `^`, searched from the first
    /// byte only (the glob engine class).
    pub fn anchored_from_hirs(hirs: &[Hir], map: PredMap) -> Result<RegexEngine, RegexFailure> {
        Ok(RegexEngine {
            built: OnceLock::from(build_from_hirs(hirs, Anchored::Yes)?),
            patterns: Box::default(),
            map,
        })
    }

    /// Built by the first search (or [`RegexEngine::warm_up`]). Only for patterns known to
    /// compile — the embedded packs, which the test suite compiles — since a failure
    /// then could only be reported by a panic.
    pub fn deferred(patterns: &[String], map: PredMap) -> RegexEngine {
        RegexEngine {
            built: OnceLock::new(),
            patterns: patterns.into(),
            map,
        }
    }

    fn matcher(&self) -> &SetMatcher {
        self.built.get_or_init(|| {
            build_set(&self.patterns).unwrap_or_else(|e| {
                panic!("a built-in policy regex does not compile: {}", e.reason)
            })
        })
    }

    /// Build a deferred engine now (from a background thread, say).
    pub fn warm_up(&self) {
        self.matcher();
    }

    /// Search state for this engine; one per thread that searches.
    pub fn scratch(&self) -> SetScratch {
        SetScratch {
            dfa: None,
            fallback: None,
            set: PatternSet::new(self.map.len()),
        }
    }

    /// Call `f` with the predicates of every pattern that matches `text`. `scratch` is
    /// the caller's, made by [`RegexEngine::scratch`].
    #[inline]
    pub fn for_each_match(&self, scratch: &mut SetScratch, text: &str, mut f: impl FnMut(&[u32])) {
        let m = self.matcher();
        let set = &mut scratch.set;
        // Clearing and iterating a set is linear in the number of patterns: skip both for
        // the usual text that matches nothing.
        if !set.is_empty() {
            set.clear();
        }
        let input = Input::new(text).anchored(m.anchored);
        let dfa_cache = scratch.dfa.get_or_insert_with(|| m.dfa.create_cache());
        if which_match(&m.dfa, dfa_cache, &input, set).is_err() {
            set.clear();
            let vm = m.fallback.get_or_init(|| {
                PikeVM::new_from_nfa(m.nfa.clone()).expect("a PikeVM over a built NFA")
            });
            let vm_cache = scratch.fallback.get_or_insert_with(|| vm.create_cache());
            vm.which_overlapping_matches(vm_cache, &input, set);
        }
        if set.is_empty() {
            return;
        }
        for pid in set.iter().take(set.len()) {
            f(self.map.get(pid.as_usize()));
        }
    }
}

/// Add every pattern that matches somewhere in `text` to `set`, in one walk of the lazy
/// DFA. `DFA::try_which_overlapping_matches` stops at every match state and resumes,
/// through a general loop its own docs call unoptimised; "which patterns" only needs the
/// patterns of every match state on the way. `Err` when the DFA gives up (a quit byte or
/// a cache failure): the caller asks the PikeVM instead.
#[inline]
fn which_match(
    dfa: &DFA,
    cache: &mut DfaCache,
    input: &Input<'_>,
    set: &mut PatternSet,
) -> Result<(), ()> {
    let mut sid = dfa.start_state_forward(cache, input).map_err(drop)?;
    let text = input.haystack();
    let mut at = 0;
    while at < text.len() {
        // Most transitions lead to states already computed that are not special: walk
        // those without the checks for unknown and tagged states.
        if !sid.is_tagged() {
            let next = dfa.next_state_untagged(cache, sid, text[at]);
            if !next.is_tagged() {
                sid = next;
                at += 1;
                continue;
            }
        }
        sid = dfa.next_state(cache, sid, text[at]).map_err(drop)?;
        at += 1;
        if sid.is_tagged() {
            if sid.is_match() {
                add_patterns(dfa, cache, sid, set);
                if set.is_full() {
                    return Ok(());
                }
            } else if sid.is_dead() {
                return Ok(());
            } else if sid.is_quit() {
                return Err(());
            }
            // A start state needs nothing here (no prefilter is configured).
        }
    }
    // Matches are reported one byte late: the end of the text has its own transition.
    sid = dfa.next_eoi_state(cache, sid).map_err(drop)?;
    if sid.is_match() {
        add_patterns(dfa, cache, sid, set);
    }
    Ok(())
}

fn add_patterns(
    dfa: &DFA,
    cache: &DfaCache,
    sid: regex_automata::hybrid::LazyStateID,
    set: &mut PatternSet,
) {
    for i in 0..dfa.match_len(cache, sid) {
        set.insert(dfa.match_pattern(cache, sid, i));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Only a Unicode word boundary makes the lazy DFA give up, and the policy dialect
    /// never produces one, so the pattern is built here from the standard syntax.
    #[test]
    fn a_search_the_lazy_dfa_gives_up_on_is_answered_by_the_pikevm() {
        let hir = regex_syntax::parse(r"\bcafé\b").unwrap();
        let engine = RegexEngine {
            built: OnceLock::from(SetMatcher::from_hirs(&[hir], Anchored::No).unwrap()),
            patterns: vec![r"\bcafé\b".to_string()].into(),
            map: PredMap::from_lists(&[vec![7]]),
        };
        let mut scratch = engine.scratch();
        let mut hits = Vec::new();
        engine.for_each_match(&mut scratch, "le café noir", |p| hits.extend_from_slice(p));
        assert_eq!(hits, [7]);
        assert!(scratch.fallback.is_some(), "the PikeVM answered");
        hits.clear();
        engine.for_each_match(&mut scratch, "les cafés", |p| hits.extend_from_slice(p));
        assert!(hits.is_empty());
    }
}
