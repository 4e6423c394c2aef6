//! The keyword prefilter: finds every position where some detector's keyword occurs,
//! so the regex only ever runs anchored at those positions.
//!
//! Keywords are split into groups of at most [`GROUP_SIZE`] and each group becomes one
//! SIMD (Teddy) searcher. A Teddy searcher's cost is its false candidates, which grow
//! with the patterns sharing its eight buckets, so several small groups beat one big
//! one; the size was measured on the 1 MiB benches (ordinary text, 100 detectors: 32 per
//! group 1.0 ms, 16 per group 0.57 ms, 24 per group 0.45 ms; one Teddy over all
//! keywords is ten times slower, Fat Teddy with 64 no better). Keywords shorter than four
//! bytes get groups of their own so they do not shrink the fingerprint of the others.
//! Short texts (most JSON string values) skip Teddy's set-up cost and use one
//! Aho-Corasick automaton over every keyword instead.

use aho_corasick::automaton::Automaton;
use aho_corasick::dfa::DFA;
use aho_corasick::{Anchored, MatchKind, Span, packed};

/// Keywords per Teddy searcher.
const GROUP_SIZE: usize = 24;
/// Texts shorter than this are searched with the Aho-Corasick automaton.
const SHORT_TEXT: usize = 256;

/// A detector to try when a keyword is found: anchored at `keyword_position - offset`
/// for every offset in `min_offset..=max_offset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Candidate {
    pub detector: u32,
    pub min_offset: usize,
    pub max_offset: usize,
}

/// Every keyword of every keyword-triggered detector.
#[derive(Debug)]
pub(super) struct Keywords {
    /// Per keyword id: the candidates of this keyword and of every keyword that is a
    /// prefix of it (a longest-match search reports only the longest one at a position).
    candidates: Vec<Box<[Candidate]>>,
    /// Leftmost-longest DFA over every keyword, walked directly (see [`Keywords::next_hit`]).
    automaton: DFA,
    groups: Vec<Group>,
}

#[derive(Debug)]
struct Group {
    searcher: packed::Searcher,
    /// Group-local pattern id -> keyword id.
    map: Vec<u32>,
}

/// Per-search scratch: the next hit of each group.
#[derive(Debug, Default, Clone)]
pub(super) struct HitScratch {
    next: Vec<Option<(usize, usize, u32)>>,
}

/// A keyword could not be compiled into the prefilter.
#[derive(Debug)]
pub(super) struct KeywordError(pub String);

impl Keywords {
    /// `entries` are `(keyword, candidate)` pairs; a keyword may appear many times.
    pub fn new(entries: Vec<(String, Candidate)>) -> Result<Keywords, KeywordError> {
        let mut keywords: Vec<String> = entries.iter().map(|(k, _)| k.clone()).collect();
        keywords.sort();
        keywords.dedup();
        let mut candidates: Vec<Vec<Candidate>> = vec![Vec::new(); keywords.len()];
        for (i, kw) in keywords.iter().enumerate() {
            for (other, cand) in &entries {
                if kw.starts_with(other.as_str()) && !candidates[i].contains(cand) {
                    candidates[i].push(*cand);
                }
            }
            // Priority order: the detector listed first is tried first.
            candidates[i].sort_by_key(|c| (c.detector, c.max_offset));
        }
        let automaton = DFA::builder()
            .match_kind(MatchKind::LeftmostLongest)
            // Its walk is the whole search: no prefilter, so start states are not special.
            .prefilter(false)
            .build(&keywords)
            .map_err(|e| KeywordError(e.to_string()))?;
        let groups = build_groups(&keywords);
        Ok(Keywords {
            candidates: candidates.into_iter().map(Vec::into_boxed_slice).collect(),
            automaton,
            groups,
        })
    }

    pub fn candidates(&self, keyword: u32) -> &[Candidate] {
        &self.candidates[keyword as usize]
    }

    /// Calls `f(position, keyword id)` for every position of `text` where a keyword
    /// starts, in increasing order (the longest keyword when several start there).
    /// `f` returns the position to continue from (at least `position + 1`), which
    /// lets the caller skip over a secret it has just found.
    pub fn for_each_hit(
        &self,
        text: &[u8],
        scratch: &mut HitScratch,
        mut f: impl FnMut(usize, u32) -> usize,
    ) {
        if text.len() < SHORT_TEXT || self.groups.is_empty() {
            let mut at = 0;
            while let Some((start, kw)) = self.next_hit(text, at) {
                at = f(start, kw).max(start + 1);
            }
            return;
        }
        let next = &mut scratch.next;
        next.clear();
        for group in &self.groups {
            next.push(group.find(text, 0));
        }
        loop {
            // The earliest hit; at equal positions the longest keyword (its candidates
            // include those of the shorter one, which is a prefix of it).
            let mut best: Option<(usize, usize, u32)> = None;
            for hit in next.iter().flatten() {
                let better = match best {
                    None => true,
                    Some(b) => hit.0 < b.0 || (hit.0 == b.0 && hit.1 > b.1),
                };
                if better {
                    best = Some(*hit);
                }
            }
            let Some((pos, _, kw)) = best else {
                return;
            };
            let resume = f(pos, kw).max(pos + 1);
            for (group, hit) in self.groups.iter().zip(next.iter_mut()) {
                if let Some((p, _, _)) = *hit
                    && p < resume
                {
                    *hit = group.find(text, resume);
                }
            }
        }
    }
}

impl Keywords {
    /// The leftmost-longest keyword starting at or after `at`: `(start, keyword id)`.
    ///
    /// The same walk as the automaton's own `find`, without its per-call set-up (input
    /// checks, prefilter dispatch), which cost more than the walk on the short texts
    /// this is for.
    #[inline]
    fn next_hit(&self, text: &[u8], at: usize) -> Option<(usize, u32)> {
        let dfa = &self.automaton;
        let mut sid = dfa.start_state(Anchored::No).ok()?;
        let mut hit = None;
        for (i, &b) in text.iter().enumerate().skip(at) {
            sid = dfa.next_state(Anchored::No, sid, b);
            if dfa.is_special(sid) {
                if dfa.is_dead(sid) {
                    break;
                }
                if dfa.is_match(sid) {
                    // A leftmost-longest automaton goes on past a match while a longer
                    // keyword can still end here, and dies once none can.
                    let kw = dfa.match_pattern(sid, 0);
                    hit = Some((i + 1 - dfa.pattern_len(kw), kw.as_u32()));
                }
            }
        }
        hit
    }
}

impl Group {
    /// The next hit at or after `at`: `(start, keyword length, keyword id)`.
    fn find(&self, text: &[u8], at: usize) -> Option<(usize, usize, u32)> {
        if at >= text.len() {
            return None;
        }
        let m = self.searcher.find_in(
            text,
            Span {
                start: at,
                end: text.len(),
            },
        )?;
        Some((m.start(), m.len(), self.map[m.pattern().as_usize()]))
    }
}

fn build_groups(keywords: &[String]) -> Vec<Group> {
    let (short, long): (Vec<usize>, Vec<usize>) =
        (0..keywords.len()).partition(|&i| keywords[i].len() < 4);
    let mut groups = Vec::new();
    for ids in [short, long] {
        for chunk in ids.chunks(GROUP_SIZE) {
            let mut builder = packed::Config::new()
                .match_kind(packed::MatchKind::LeftmostLongest)
                .builder();
            for &i in chunk {
                builder.add(&keywords[i]);
            }
            let Some(searcher) = builder.build() else {
                // No SIMD searcher on this target: the automaton handles every text.
                return Vec::new();
            };
            groups.push(Group {
                searcher,
                map: chunk.iter().map(|&i| i as u32).collect(),
            });
        }
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On short and long texts alike, every hit is the leftmost-longest keyword from
    /// where the search resumed, as the automaton's own iterator reports them.
    #[test]
    fn hits_are_the_leftmost_longest_keywords() {
        let words = [
            "sk-", "sk-ant-", "ghp_", "AKIA", "://", "oken", "ken", "assword",
        ];
        let cand = |d: u32| Candidate {
            detector: d,
            min_offset: 0,
            max_offset: 0,
        };
        let entries = words
            .iter()
            .enumerate()
            .map(|(i, w)| (w.to_string(), cand(i as u32)))
            .collect();
        let keywords = Keywords::new(entries).unwrap();
        let mut sorted: Vec<&str> = words.to_vec();
        sorted.sort();
        let reference = aho_corasick::AhoCorasick::builder()
            .match_kind(MatchKind::LeftmostLongest)
            .build(&sorted)
            .unwrap();
        let pieces = [
            "sk-ant-x",
            "token ",
            "https://a",
            "ghp_",
            "AKIAB",
            "passwor",
            "xx",
            "é",
        ];
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        for round in 0..3_000 {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1);
            let mut text = String::new();
            // Rounds past the first third are long enough for the Teddy groups.
            let n = if round % 3 == 0 { 40 } else { 6 };
            for k in 0..(state >> 59) as usize * n / 8 + 1 {
                text.push_str(pieces[(state.rotate_left(k as u32 * 7) % 8) as usize]);
            }
            let want: Vec<(usize, u32)> = reference
                .find_iter(&text)
                .map(|m| (m.start(), m.pattern().as_u32()))
                .collect();
            let mut got = Vec::new();
            keywords.for_each_hit(text.as_bytes(), &mut HitScratch::default(), |pos, kw| {
                got.push((pos, kw));
                pos + sorted[kw as usize].len()
            });
            assert_eq!(got, want, "{text:?}");
        }
    }
}
