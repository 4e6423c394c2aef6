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
use regex_automata::{Input, MatchKind, PatternSet, meta};
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
    /// Only for a search the lazy DFA gives up on (it should not: see the module docs).
    fallback: OnceLock<PikeVM>,
    nfa: NFA,
}

/// Per-caller search state of a [`RegexEngine`], created on first use.
#[derive(Debug, Default)]
pub(crate) struct SetCache {
    dfa: Option<DfaCache>,
    fallback: Option<regex_automata::nfa::thompson::pikevm::Cache>,
}

fn build_set(patterns: &[String]) -> Result<SetMatcher, RegexFailure> {
    let hirs = parse_all(patterns)?;
    SetMatcher::from_hirs(&hirs).map_err(|reason| RegexFailure {
        // The combined build does not say which pattern is too large: the first that
        // fails on its own.
        pattern: hirs
            .iter()
            .position(|h| SetMatcher::from_hirs(std::slice::from_ref(h)).is_err()),
        reason,
    })
}

impl SetMatcher {
    fn from_hirs(hirs: &[Hir]) -> Result<SetMatcher, String> {
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

    pub fn pattern_set(&self) -> PatternSet {
        PatternSet::new(self.patterns.len())
    }

    /// Call `f` with the predicates of every pattern that matches `text`. `cache` is
    /// the caller's.
    #[inline]
    pub fn for_each_match(
        &self,
        cache: &mut SetCache,
        set: &mut PatternSet,
        text: &str,
        mut f: impl FnMut(&[u32]),
    ) {
        let m = self.matcher();
        set.clear();
        let input = Input::new(text);
        let dfa_cache = cache.dfa.get_or_insert_with(|| m.dfa.create_cache());
        if m.dfa
            .try_which_overlapping_matches(dfa_cache, &input, set)
            .is_err()
        {
            set.clear();
            let vm = m.fallback.get_or_init(|| {
                PikeVM::new_from_nfa(m.nfa.clone()).expect("a PikeVM over a built NFA")
            });
            let vm_cache = cache.fallback.get_or_insert_with(|| vm.create_cache());
            vm.which_overlapping_matches(vm_cache, &input, set);
        }
        for pid in set.iter() {
            f(self.map.get(pid.as_usize()));
        }
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
            built: OnceLock::from(SetMatcher::from_hirs(&[hir]).unwrap()),
            patterns: vec![r"\bcafé\b".to_string()].into(),
            map: PredMap::from_lists(&[vec![7]]),
        };
        let mut cache = SetCache::default();
        let mut set = engine.pattern_set();
        let mut hits = Vec::new();
        engine.for_each_match(&mut cache, &mut set, "le café noir", |p| {
            hits.extend_from_slice(p)
        });
        assert_eq!(hits, [7]);
        assert!(cache.fallback.is_some(), "the PikeVM answered");
        hits.clear();
        engine.for_each_match(&mut cache, &mut set, "les cafés", |p| {
            hits.extend_from_slice(p)
        });
        assert!(hits.is_empty());
    }
}
