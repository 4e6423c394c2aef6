//! The literal engine class: every `response_contains` literal in one `AhoCorasick`,
//! ASCII case-insensitive. Overlapping search, so a literal that overlaps an earlier
//! one is still seen (rule order is applied afterwards, from the predicate bits).
//!
//! Literals match text in its normalised form ([`crate::guard::normalize`]: NFKC,
//! zero-width and bidi characters removed, look-alike letters folded, lower case,
//! white space collapsed), so `IGNORE\u{200B} previous  instructions` or a full-width
//! spelling still matches `ignore previous instructions`. Plain printable ASCII with
//! single spaces is already in normal form up to case, so only other texts pay for
//! normalising; a match found only in the normalised form covers the whole string.

use std::sync::OnceLock;

use aho_corasick::{AhoCorasick, MatchKind};

use super::PredMap;
use crate::guard::normalize::normalize;

#[derive(Debug)]
pub(crate) struct LiteralEngine {
    ac: OnceLock<AhoCorasick>,
    /// The literals, kept for a deferred build.
    literals: Box<[String]>,
    pub map: PredMap,
}

fn build(literals: &[String]) -> Result<AhoCorasick, String> {
    AhoCorasick::builder()
        .match_kind(MatchKind::Standard)
        .ascii_case_insensitive(true)
        .build(literals)
        .map_err(|e| e.to_string())
}

impl LiteralEngine {
    /// Built now; fails when the automaton cannot be built.
    pub fn new(literals: &[String], map: PredMap) -> Result<LiteralEngine, String> {
        Ok(LiteralEngine {
            ac: OnceLock::from(build(literals)?),
            literals: literals.into(),
            map,
        })
    }

    /// Built on first use (or by [`LiteralEngine::warm_up`]); only for literals known to
    /// build, those of the embedded packs.
    pub fn deferred(literals: &[String], map: PredMap) -> LiteralEngine {
        LiteralEngine {
            ac: OnceLock::new(),
            literals: literals.into(),
            map,
        }
    }

    fn ac(&self) -> &AhoCorasick {
        self.ac.get_or_init(|| {
            build(&self.literals).unwrap_or_else(|e| {
                panic!("the built-in response_contains literals do not build: {e}")
            })
        })
    }

    pub fn warm_up(&self) {
        self.ac();
    }

    /// Call `f(pattern, start, end)` for every occurrence of every literal in `text`.
    #[inline]
    pub fn for_each_match(&self, text: &str, mut f: impl FnMut(usize, usize, usize)) {
        let mut found = 0u64;
        for m in self.ac().find_overlapping_iter(text) {
            let p = m.pattern().as_usize();
            found |= 1u64.checked_shl(p as u32).unwrap_or(0);
            f(p, m.start(), m.end());
        }
        if is_normal_up_to_case(text) {
            return;
        }
        // Patterns past the 64th are reported again from the normalised text; a
        // duplicate hit only sets the same predicate bit twice.
        let normalized = normalize(text);
        let mut reported = found;
        for m in self.ac().find_overlapping_iter(&normalized) {
            let p = m.pattern().as_usize();
            let bit = 1u64.checked_shl(p as u32).unwrap_or(0);
            if bit != 0 && reported & bit != 0 {
                continue;
            }
            reported |= bit;
            f(p, 0, text.len());
        }
    }
}

/// A `response_contains` literal in the form it is matched in.
pub(crate) fn normalize_literal(literal: &str) -> String {
    let normalized = normalize(literal);
    // A literal made only of invisible characters would match everything once
    // normalised; keep it as written so it matches only itself.
    if normalized.is_empty() {
        literal.to_ascii_lowercase()
    } else {
        normalized
    }
}

/// Printable ASCII without runs of spaces: normalising would only change case, which
/// the automaton already ignores.
fn is_normal_up_to_case(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes.iter().all(|b| (0x20..0x7F).contains(b))
        && !bytes.windows(2).any(|w| w == b"  ")
        && bytes.first() != Some(&b' ')
        && bytes.last() != Some(&b' ')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hits(literals: &[&str], text: &str) -> Vec<(usize, usize, usize)> {
        let lits: Vec<String> = literals.iter().map(|l| normalize_literal(l)).collect();
        let engine = LiteralEngine::new(&lits, PredMap::default()).unwrap();
        let mut out = Vec::new();
        engine.for_each_match(text, |p, s, e| out.push((p, s, e)));
        out
    }

    #[test]
    fn plain_text_matches_with_exact_spans() {
        assert_eq!(
            hits(&["Ignore Previous"], "please IGNORE previous"),
            [(0, 7, 22)]
        );
    }

    #[test]
    fn disguised_text_matches_over_the_whole_string() {
        let text = "IGNORE\u{200B} previous\u{3000}\u{3000}instructions";
        assert_eq!(
            hits(&["ignore previous instructions"], text),
            [(0, 0, text.len())]
        );
        let fullwidth = "ｉｇｎｏｒｅ previous";
        assert_eq!(
            hits(&["ignore previous"], fullwidth),
            [(0, 0, fullwidth.len())]
        );
        let spaced = "ignore\n\n   previous";
        assert_eq!(hits(&["ignore previous"], spaced), [(0, 0, spaced.len())]);
    }

    #[test]
    fn a_match_is_reported_once_per_pattern_and_text() {
        let text = "ignore previous \u{200B}";
        assert_eq!(hits(&["ignore previous"], text), [(0, 0, 15)]);
    }

    #[test]
    fn invisible_only_literal_does_not_match_everything() {
        assert!(hits(&["\u{200B}"], "plain text").is_empty());
    }
}
