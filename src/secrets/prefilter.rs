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

use aho_corasick::{AhoCorasick, AhoCorasickKind, Input, MatchKind, Span, packed};

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
    automaton: AhoCorasick,
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
        let automaton = AhoCorasick::builder()
            .kind(Some(AhoCorasickKind::DFA))
            .match_kind(MatchKind::LeftmostLongest)
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
            while at < text.len() {
                let Some(m) = self.automaton.find(Input::new(text).span(at..text.len())) else {
                    return;
                };
                at = f(m.start(), m.pattern().as_u32()).max(m.start() + 1);
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
