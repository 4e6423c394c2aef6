//! The `regex` engine class: every regex of one class (inbound argument regexes, or
//! outbound `response_contains_regex`) in one multi-pattern `meta::Regex` with
//! `MatchKind::All`, queried once per value for the set of patterns that match.

use std::sync::OnceLock;

use regex_automata::{Input, MatchKind, PatternSet, meta};

use super::PredMap;

/// Bound on the compiled NFA, the full DFA and the lazy DFA cache, so a hostile or
/// careless pattern cannot make compilation or evaluation take unbounded memory
/// (the same bound globset uses).
pub(crate) const SIZE_LIMIT: usize = 10 << 20;

fn config(kind: MatchKind) -> meta::Config {
    meta::Config::new()
        .match_kind(kind)
        .nfa_size_limit(Some(SIZE_LIMIT))
        .dfa_size_limit(Some(SIZE_LIMIT))
        .onepass_size_limit(Some(SIZE_LIMIT))
        .hybrid_cache_capacity(SIZE_LIMIT)
}

/// Why a regex engine failed to build.
#[derive(Debug)]
pub(crate) struct RegexFailure {
    /// The pattern to blame, when one pattern alone fails.
    pub pattern: Option<usize>,
    pub reason: String,
}

/// Build one multi-pattern regex. On failure, name the pattern that fails on its own
/// when the combined build does not say which one did (size limits).
pub(crate) fn build_many(
    patterns: &[String],
    kind: MatchKind,
) -> Result<meta::Regex, RegexFailure> {
    let mut hirs = Vec::with_capacity(patterns.len());
    for (i, p) in patterns.iter().enumerate() {
        hirs.push(crate::regex_dialect::parse(p).map_err(|e| RegexFailure {
            pattern: Some(i),
            reason: e.message,
        })?);
    }
    let build = |hirs: &[regex_syntax::hir::Hir]| {
        meta::Regex::builder()
            .configure(config(kind))
            .build_many_from_hir(hirs)
            .map_err(Box::new)
    };
    build(&hirs).map_err(|e| {
        let pattern = e.pattern().map(|p| p.as_usize()).or_else(|| {
            hirs.iter()
                .position(|h| build(std::slice::from_ref(h)).is_err())
        });
        RegexFailure {
            pattern,
            reason: e.to_string(),
        }
    })
}

/// A regex for finding where one pattern matches (the redact path only).
pub(crate) fn build_one(pattern: &str) -> Result<meta::Regex, RegexFailure> {
    build_many(
        std::slice::from_ref(&pattern.to_string()),
        MatchKind::LeftmostFirst,
    )
}

/// All patterns of a class and the predicates each one feeds.
#[derive(Debug)]
pub(crate) struct RegexEngine {
    re: OnceLock<meta::Regex>,
    /// The patterns, kept until the regex is built (deferred engines only).
    patterns: Box<[String]>,
    pub map: PredMap,
}

impl RegexEngine {
    /// Built now; fails on a pattern that does not compile.
    pub fn new(patterns: &[String], map: PredMap) -> Result<RegexEngine, RegexFailure> {
        Ok(RegexEngine {
            re: OnceLock::from(build_many(patterns, MatchKind::All)?),
            patterns: patterns.into(),
            map,
        })
    }

    /// Built by the first search (or [`RegexEngine::warm_up`]). Only for patterns known to
    /// compile — the embedded packs, which the test suite compiles — since a failure
    /// then could only be reported by a panic.
    pub fn deferred(patterns: &[String], map: PredMap) -> Result<RegexEngine, RegexFailure> {
        Ok(RegexEngine {
            re: OnceLock::new(),
            patterns: patterns.into(),
            map,
        })
    }

    fn regex(&self) -> &meta::Regex {
        self.re.get_or_init(|| {
            build_many(&self.patterns, MatchKind::All).unwrap_or_else(|e| {
                panic!("a built-in policy regex does not compile: {}", e.reason)
            })
        })
    }

    /// Build a deferred engine now (from a background thread, say).
    pub fn warm_up(&self) {
        self.regex();
    }

    pub fn pattern_set(&self) -> PatternSet {
        PatternSet::new(self.patterns.len())
    }

    /// Call `f` with the predicates of every pattern that matches `text`. `cache` is
    /// the caller's, created on first use.
    #[inline]
    pub fn for_each_match(
        &self,
        cache: &mut Option<meta::Cache>,
        set: &mut PatternSet,
        text: &str,
        mut f: impl FnMut(&[u32]),
    ) {
        let re = self.regex();
        let cache = cache.get_or_insert_with(|| re.create_cache());
        set.clear();
        re.which_overlapping_matches_with(cache, &Input::new(text), set);
        for pid in set.iter() {
            f(self.map.get(pid.as_usize()));
        }
    }
}
