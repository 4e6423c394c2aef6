//! The literal engine class: every `response_contains` literal in one `AhoCorasick`,
//! ASCII case-insensitive. Overlapping search, so a literal that overlaps an earlier
//! one is still seen (rule order is applied afterwards, from the predicate bits).

use aho_corasick::{AhoCorasick, MatchKind};

use super::PredMap;

#[derive(Debug)]
pub(crate) struct LiteralEngine {
    ac: AhoCorasick,
    pub map: PredMap,
}

impl LiteralEngine {
    pub fn new(literals: &[String], map: PredMap) -> Result<LiteralEngine, String> {
        let ac = AhoCorasick::builder()
            .match_kind(MatchKind::Standard)
            .ascii_case_insensitive(true)
            .build(literals)
            .map_err(|e| e.to_string())?;
        Ok(LiteralEngine { ac, map })
    }

    /// Call `f(pattern, start, end)` for every occurrence of every literal in `text`.
    #[inline]
    pub fn for_each_match(&self, text: &str, mut f: impl FnMut(usize, usize, usize)) {
        for m in self.ac.find_overlapping_iter(text) {
            f(m.pattern().as_usize(), m.start(), m.end());
        }
    }
}
