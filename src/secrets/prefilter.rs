//! The keyword prefilter: finds every position where some detector's keyword occurs,
//! so the regex only ever runs anchored at those positions.
//!
//! Keywords are found in one pass whose cost per byte does not depend on how many
//! there are. Every position's first three bytes are hashed (16-bit multiply-add, 14
//! bits kept) into a 16 KiB table holding the hashed prefixes of all keywords, one bit
//! per fourth byte mod 8; AVX2 hashes 16 positions per instruction and tests the
//! fourth bytes of 32 at once, a portable loop gives the same candidates. A block of 32
//! positions yields a mask of candidates, and each is confirmed exactly among the
//! sorted keywords that share its first three bytes, so a false candidate costs a
//! binary search and no occurrence is missed. The last, partial block of a text (the only
//! one of a text under 35 bytes) is read from a zero-padded copy. Only a keyword set with
//! a keyword under three bytes (possible for user specs that list one) is searched by an
//! unanchored DFA walk instead, and only such a set builds that DFA.
//!
//! Measured on the 1 MiB benches (medians, alternated with the Teddy version in one
//! run): ordinary text with 10 detectors (13 keywords) 534 µs and with 100 (102
//! keywords) 579 µs, 1.08× (Teddy, one searcher per 24 keywords: 179 µs and 654 µs,
//! 3.65×, fast for few keywords and growing with each group); all built-ins 828 µs
//! against 968 µs. Gathering table words with AVX2 (`vpgatherdd`) or hashing in scalar
//! code was 1.3 to 1.6 times slower than hashing in vectors and reading the table from
//! general registers.

use aho_corasick::automaton::Automaton;
use aho_corasick::dfa::DFA;
use aho_corasick::{Anchored, MatchKind};

/// Positions examined per step of the block filter.
const BLOCK: usize = 32;
/// Bytes a block reads from its start: the 3-byte prefix and the fourth byte of its
/// last position (the AVX2 hasher reads 32 bytes at `at + 3`, ending exactly there).
const BLOCK_READ: usize = BLOCK + 3;
/// Bits of a prefix hash: the table has `1 << PREFIX_HASH_BITS` one-byte entries
/// (16 KiB, so it stays in L1 next to the text and the automaton).
const PREFIX_HASH_BITS: u32 = 14;
const TABLE_LEN: usize = 1 << PREFIX_HASH_BITS;
/// Multipliers of the prefix hash, one per byte (odd, with well-mixed bits). The hash
/// is `(b0 * M0 + b1 * M1 + b2 * M2) mod 2^16`, top [`PREFIX_HASH_BITS`] bits: 16-bit
/// arithmetic, so AVX2 computes it for 16 positions per instruction.
const HASH_MULTIPLIERS: [u16; 3] = [0x9E37, 0x79B1, 0x7F4B];

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
    /// How texts are searched: the block filter, or (a keyword under three bytes) the
    /// DFA walk.
    search: Search,
    /// Every keyword, sorted (a keyword's id is its index): a candidate position is
    /// looked up among those sharing its first three bytes (see [`Keywords::longest_at`]).
    sorted: Box<[Box<[u8]>]>,
    /// The first three bytes of each of `sorted`, as big-endian numbers (so in the same
    /// order): the binary search compares integers, not slices.
    heads: Box<[u32]>,
    hasher: BlockHasher,
    /// Whether a candidate reuses the keyword run of the previous one ([`HeadRun`]).
    remember_heads: bool,
}

#[derive(Debug)]
enum Search {
    /// Per prefix hash: bit `b3 % 8` is set when some keyword's first three bytes hash
    /// there and its fourth byte is `b3` (all eight bits for a 3-byte keyword).
    Blocks(Box<[u8; TABLE_LEN]>),
    /// A leftmost-longest DFA over every keyword (see [`next_hit`]), only for a set with
    /// a keyword under three bytes. The built-in set once built it too, for texts under
    /// 32 bytes: that was 4.8 M of the detector's 5.7 M instructions of construction, on
    /// the path of the first frame, and what padded blocks cost instead on short texts
    /// is 6 M instructions over 20,000 proxied calls (callgrind: 67.5 M to 73.7 M).
    Walk(Box<DFA>),
}

/// How a block's candidates are computed. Both give the same candidates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum BlockHasher {
    /// 16 positions per instruction; chosen when the CPU has AVX2.
    #[cfg(target_arch = "x86_64")]
    Avx2,
    /// One position at a time, on any target.
    Portable,
}

impl BlockHasher {
    /// The fastest hasher this CPU runs.
    pub(super) fn detect() -> BlockHasher {
        #[cfg(target_arch = "x86_64")]
        if is_x86_feature_detected!("avx2") {
            return BlockHasher::Avx2;
        }
        BlockHasher::Portable
    }
}

/// A keyword could not be compiled into the prefilter.
#[derive(Debug)]
pub(super) struct KeywordError(pub String);

impl Keywords {
    /// `entries` are `(keyword, candidate)` pairs; a keyword may appear many times.
    #[cfg(test)]
    pub fn new(entries: Vec<(String, Candidate)>) -> Result<Keywords, KeywordError> {
        Keywords::with_hasher(entries, BlockHasher::detect(), true)
    }

    /// The prefilter over `entries` (`(keyword, candidate)` pairs; a keyword may appear
    /// many times), hashing with `hasher` (the bench can force the portable one).
    pub(super) fn with_hasher(
        entries: Vec<(String, Candidate)>,
        hasher: BlockHasher,
        remember_heads: bool,
    ) -> Result<Keywords, KeywordError> {
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
        let (search, heads) = if keywords.iter().all(|k| k.len() >= 3) {
            let mut table = Box::new([0u8; TABLE_LEN]);
            for kw in &keywords {
                let b = kw.as_bytes();
                table[prefix_hash(b[0], b[1], b[2])] |=
                    b.get(3).map_or(0xFF, |&b3| fourth_byte_bit(b3));
            }
            let heads = keywords.iter().map(|k| head_of(k.as_bytes())).collect();
            (Search::Blocks(table), heads)
        } else {
            let dfa = DFA::builder()
                .match_kind(MatchKind::LeftmostLongest)
                // Its walk is the whole search: no prefilter, so start states are not
                // special.
                .prefilter(false)
                .build(&keywords)
                .map_err(|e| KeywordError(e.to_string()))?;
            (Search::Walk(Box::new(dfa)), Box::default())
        };
        Ok(Keywords {
            heads,
            candidates: candidates.into_iter().map(Vec::into_boxed_slice).collect(),
            search,
            sorted: keywords
                .into_iter()
                .map(|k| k.into_bytes().into_boxed_slice())
                .collect(),
            hasher,
            remember_heads,
        })
    }

    pub fn candidates(&self, keyword: u32) -> &[Candidate] {
        &self.candidates[keyword as usize]
    }

    /// The keyword with id `keyword`.
    pub fn keyword(&self, keyword: u32) -> &[u8] {
        &self.sorted[keyword as usize]
    }

    /// How many keywords there are (ids are `0..len`).
    pub fn len(&self) -> usize {
        self.candidates.len()
    }

    /// Calls `f(position, keyword id)` for every position of `text` where a keyword
    /// starts, in increasing order (the longest keyword when several start there).
    /// `f` returns the position to continue from (at least `position + 1`), which
    /// lets the caller skip over a secret it has just found.
    ///
    /// Returns whether a `%` lies among the bytes read, which are all but those `f`
    /// skipped over: the block filter compares each block's bytes with `%` as it loads
    /// them (two vector instructions a block), so the detector's search for `%XX`
    /// escapes needs no pass of its own on the texts without one, most of them.
    pub fn for_each_hit(&self, text: &[u8], mut f: impl FnMut(usize, u32) -> usize) -> bool {
        let table = match &self.search {
            Search::Blocks(table) => &**table,
            Search::Walk(dfa) => {
                walk(dfa, text, f);
                return memchr::memchr(b'%', text).is_some();
            }
        };
        // A block compares its bytes from `at + 3` on (those it reads as fourth bytes):
        // the three before, at the start and after each skip, are compared here.
        // Three bytes compared inline: `contains` calls `memchr`, which on every text's
        // first bytes cost 169 instructions per pipelined call (callgrind, shared bench).
        let head_percent = |at: usize| text[at..].iter().take(3).any(|&b| b == b'%');
        let mut percent = head_percent(0);
        let mut at = 0;
        let mut heads = HeadRun::default();
        // The last block, shorter than `BLOCK_READ`, is read from a zero-padded copy, so
        // a short text costs one block and not an anchored look-up per position.
        let mut padded = [0u8; BLOCK_READ];
        // A keyword (three bytes at least) can still start at `at`.
        'blocks: while at + 2 < text.len() {
            let (mut candidates, percents) = if at + BLOCK_READ <= text.len() {
                self.block_candidates(text, at, table, BLOCK)
            } else {
                let n = text.len() - at;
                padded[..n].copy_from_slice(&text[at..]);
                padded[n..].fill(0);
                // Only positions whose first three bytes are text: `n - 2` of them
                // (between 1 and `BLOCK`, as `3 <= n < BLOCK_READ`). Most texts are
                // short values that need only the first half of the block hashed.
                let (candidates, percents) = self.block_candidates(&padded, 0, table, n - 2);
                (candidates & (u32::MAX >> (BLOCK + 2 - n)), percents)
            };
            percent |= percents != 0;
            while candidates != 0 {
                let pos = at + candidates.trailing_zeros() as usize;
                candidates &= candidates - 1;
                if let Some(kw) = self.longest_at(text, pos, &mut heads) {
                    let resume = f(pos, kw).max(pos + 1);
                    if resume >= at + BLOCK {
                        at = resume;
                        percent |= at < text.len() && head_percent(at);
                        continue 'blocks;
                    }
                    // Drop the candidates the caller skipped over.
                    candidates &= u32::MAX << (resume - at);
                }
            }
            at += BLOCK;
        }
        percent
    }

    /// The candidates among positions `at..at + BLOCK`, bit `k` for `at + k`: those
    /// whose prefix hash is in `table` with the bit of their fourth byte set (which
    /// rules out about seven in eight 3-byte matches before the look-up). Positions from
    /// `wanted` on (rounded up to a half block) may be left out. Then the `%` bytes
    /// among `at + 3..at + BLOCK_READ`, bit `k` for `at + 3 + k`. Needs
    /// `at + BLOCK_READ <= text.len()`.
    ///
    /// The mask is built without branches: which positions are candidates is random,
    /// so a branch per position is mispredicted at each of them.
    #[inline]
    fn block_candidates(
        &self,
        text: &[u8],
        at: usize,
        table: &[u8; TABLE_LEN],
        wanted: usize,
    ) -> (u32, u32) {
        assert!(at + BLOCK_READ <= text.len());
        match self.hasher {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `Avx2` is only chosen when the CPU has AVX2 (`BlockHasher::detect`,
            // or a test that checks first), and the assert above is the bound on reads.
            BlockHasher::Avx2 => unsafe {
                avx2::block_candidates(text, at, table, wanted.div_ceil(16))
            },
            BlockHasher::Portable => {
                // Hashes the whole block: `wanted` saves work for AVX2 alone (and is
                // otherwise unused where there is no AVX2 path, as on aarch64).
                let _ = wanted;
                let block = &text[at..at + BLOCK_READ];
                let (mut candidates, mut percents) = (0u32, 0u32);
                for k in 0..BLOCK {
                    let entry = table[prefix_hash(block[k], block[k + 1], block[k + 2])];
                    let hit = entry & fourth_byte_bit(block[k + 3]) != 0;
                    candidates |= u32::from(hit) << k;
                    percents |= u32::from(block[k + 3] == b'%') << k;
                }
                (candidates, percents)
            }
        }
    }

    /// The longest keyword starting exactly at `pos`: among the sorted keywords, those
    /// sharing its first three bytes form one run, found by binary search (or taken
    /// from `last`, the run of the previous candidate, when it shares them: on a keyword
    /// repeated, the binary search was half the cost of a hit). (An anchored start state
    /// in the DFA did the same, but doubled its size and build time.)
    #[inline]
    fn longest_at(&self, text: &[u8], pos: usize, last: &mut HeadRun) -> Option<u32> {
        let rest = &text[pos..];
        if rest.len() < 3 {
            return None;
        }
        let head = head_of(rest);
        if last.head != Some(head) || !self.remember_heads {
            let first = self.heads.partition_point(|&h| h < head);
            let len = self.heads[first..]
                .iter()
                .take_while(|&&h| h == head)
                .count();
            *last = HeadRun {
                head: Some(head),
                ids: first..first + len,
            };
        }
        let mut longest = None;
        for id in last.ids.clone() {
            // Sorted order puts a keyword after its prefixes: the last match is longest.
            let kw = &self.sorted[id];
            if rest.len() >= kw.len() && super::bytes_eq(&rest[..kw.len()], kw) {
                longest = Some(id as u32);
            }
        }
        longest
    }
}

/// The keywords (ids, a range of the sorted ones) whose first three bytes are `head`.
#[derive(Debug, Default)]
struct HeadRun {
    head: Option<u32>,
    ids: std::ops::Range<usize>,
}

/// The whole search by the unanchored automaton, for keywords the block filter cannot
/// hash.
fn walk(dfa: &DFA, text: &[u8], mut f: impl FnMut(usize, u32) -> usize) {
    let mut at = 0;
    while let Some((start, kw)) = next_hit(dfa, text, at) {
        at = f(start, kw).max(start + 1);
    }
}

/// The leftmost-longest keyword starting at or after `at`: `(start, keyword id)`.
///
/// The same walk as the automaton's own `find`, without its per-call set-up (input
/// checks, prefilter dispatch), which cost more than the walk on short texts.
#[inline]
fn next_hit(dfa: &DFA, text: &[u8], at: usize) -> Option<(usize, u32)> {
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

/// The first three bytes of `bytes` (at least three) as a number ordered like them.
#[inline]
fn head_of(bytes: &[u8]) -> u32 {
    u32::from_be_bytes([bytes[0], bytes[1], bytes[2], 0])
}

/// The bit of a table entry for a keyword (or text position) whose fourth byte is `b3`.
#[inline]
fn fourth_byte_bit(b3: u8) -> u8 {
    1 << (b3 & 7)
}

/// The table index of a position whose first three bytes are `b0 b1 b2`.
#[inline]
fn prefix_hash(b0: u8, b1: u8, b2: u8) -> usize {
    let [m0, m1, m2] = HASH_MULTIPLIERS;
    let h = u16::from(b0)
        .wrapping_mul(m0)
        .wrapping_add(u16::from(b1).wrapping_mul(m1))
        .wrapping_add(u16::from(b2).wrapping_mul(m2));
    usize::from(h >> (16 - PREFIX_HASH_BITS))
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    use super::{BLOCK, BLOCK_READ, HASH_MULTIPLIERS, PREFIX_HASH_BITS, TABLE_LEN};

    /// [`super::Keywords`]'s `block_candidates`: the prefix hashes 16 at a time in
    /// 16-bit lanes, the table entries read from general registers (the hashes come
    /// out 64 bits at a time, half the loads of reading them back from memory: a
    /// fifth of the filter's time), then the fourth-byte test and the mask in vectors.
    /// Only the first `halves` halves (16 positions each) of the block; the rest are
    /// left out. With them, the `%` bytes among the fourth bytes, all 32 of them.
    ///
    /// # Safety
    ///
    /// The CPU must have AVX2, and `at + BLOCK_READ <= text.len()`.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn block_candidates(
        text: &[u8],
        at: usize,
        table: &[u8; TABLE_LEN],
        halves: usize,
    ) -> (u32, u32) {
        debug_assert!(at + BLOCK_READ <= text.len());
        let [m0, m1, m2] = HASH_MULTIPLIERS.map(|m| _mm256_set1_epi16(m as i16));
        let shift = _mm_cvtsi32_si128(16 - PREFIX_HASH_BITS as i32);
        // Left-out positions keep entry 0: no keyword, no candidate.
        let mut entries = [0u8; BLOCK];
        for half in 0..halves.min(BLOCK / 16) {
            let start = at + half * 16;
            // SAFETY: the three loads read `start..start + 18`, which is at most
            // `at + BLOCK_READ`, inside `text` by the caller's contract.
            let [b0, b1, b2] = [0, 1, 2].map(|offset| unsafe {
                _mm256_cvtepu8_epi16(_mm_loadu_si128(
                    text.as_ptr().add(start + offset).cast::<__m128i>(),
                ))
            });
            let sum = _mm256_add_epi16(
                _mm256_add_epi16(_mm256_mullo_epi16(b0, m0), _mm256_mullo_epi16(b1, m1)),
                _mm256_mullo_epi16(b2, m2),
            );
            let hash = _mm256_srl_epi16(sum, shift);
            let low = _mm256_castsi256_si128(hash);
            let high = _mm256_extracti128_si256(hash, 1);
            for (quarter, four) in [
                _mm_cvtsi128_si64(low),
                _mm_extract_epi64(low, 1),
                _mm_cvtsi128_si64(high),
                _mm_extract_epi64(high, 1),
            ]
            .into_iter()
            .enumerate()
            {
                let four = four as u64;
                for lane in 0..4 {
                    // The mask changes nothing (the shift above left that many bits)
                    // but lets the compiler drop the bounds check.
                    entries[half * 16 + quarter * 4 + lane] =
                        table[(four >> (16 * lane)) as usize & (TABLE_LEN - 1)];
                }
            }
        }
        // The fourth-byte bit of every position, `1 << (b3 & 7)`, by a byte shuffle.
        let bit_of = _mm256_setr_epi8(
            1, 2, 4, 8, 16, 32, 64, -128, 1, 2, 4, 8, 16, 32, 64, -128, 1, 2, 4, 8, 16, 32, 64,
            -128, 1, 2, 4, 8, 16, 32, 64, -128,
        );
        // SAFETY: reads `at + 3..at + 3 + BLOCK`, which is `at + BLOCK_READ`, inside
        // `text` by the caller's contract; `entries` holds exactly one vector.
        let (fourth, entries) = unsafe {
            (
                _mm256_loadu_si256(text.as_ptr().add(at + 3).cast::<__m256i>()),
                _mm256_loadu_si256(entries.as_ptr().cast::<__m256i>()),
            )
        };
        let bits = _mm256_shuffle_epi8(bit_of, _mm256_and_si256(fourth, _mm256_set1_epi8(7)));
        let misses = _mm256_cmpeq_epi8(_mm256_and_si256(entries, bits), _mm256_setzero_si256());
        let percents = _mm256_cmpeq_epi8(fourth, _mm256_set1_epi8(b'%' as i8));
        (
            !(_mm256_movemask_epi8(misses) as u32),
            _mm256_movemask_epi8(percents) as u32,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_rng::Rng;

    fn candidate(detector: u32) -> Candidate {
        Candidate {
            detector,
            min_offset: 0,
            max_offset: 0,
        }
    }

    /// Every hasher this machine can run: the portable one always, AVX2 when present.
    fn hashers() -> Vec<BlockHasher> {
        #[allow(unused_mut)]
        let mut hashers = vec![BlockHasher::Portable];
        #[cfg(target_arch = "x86_64")]
        if is_x86_feature_detected!("avx2") {
            hashers.push(BlockHasher::Avx2);
        }
        hashers
    }

    /// The prefilter over `words` and the keyword ids' texts (ids are indices into it).
    fn build(words: &[String], hasher: BlockHasher) -> (Keywords, Vec<String>) {
        let entries = words
            .iter()
            .enumerate()
            .map(|(i, w)| (w.clone(), candidate(i as u32)))
            .collect();
        let keywords = Keywords::with_hasher(entries, hasher, true).unwrap();
        let mut sorted = words.to_vec();
        sorted.sort();
        sorted.dedup();
        (keywords, sorted)
    }

    /// Hits reported when the callback resumes at `resume(position, keyword length)`.
    /// Checks on the way that the pass says whether the text holds a `%` (no keyword
    /// here holds one, so no `%` is ever skipped over).
    fn hits(
        keywords: &Keywords,
        sorted: &[String],
        text: &[u8],
        resume: fn(usize, usize) -> usize,
    ) -> Vec<(usize, u32)> {
        let mut got = Vec::new();
        let percent = keywords.for_each_hit(text, |pos, kw| {
            got.push((pos, kw));
            resume(pos, sorted[kw as usize].len())
        });
        assert_eq!(
            percent,
            text.contains(&b'%'),
            "{:?}",
            String::from_utf8_lossy(text)
        );
        got
    }

    /// Checks both resume modes on one text against independent references: a
    /// non-overlapping leftmost-longest search (resuming after each keyword), and the
    /// longest keyword that each position starts with (resuming one byte on).
    fn check(words: &[String], text: &[u8], hasher: BlockHasher) {
        let (keywords, sorted) = build(words, hasher);
        let reference = aho_corasick::AhoCorasick::builder()
            .match_kind(MatchKind::LeftmostLongest)
            .build(&sorted)
            .unwrap();
        let want: Vec<(usize, u32)> = reference
            .find_iter(text)
            .map(|m| (m.start(), m.pattern().as_u32()))
            .collect();
        let got = hits(&keywords, &sorted, text, |pos, len| pos + len);
        assert_eq!(
            got,
            want,
            "resume after the keyword, {hasher:?}\nkeywords: {sorted:?}\ntext: {:?}",
            String::from_utf8_lossy(text)
        );
        let want: Vec<(usize, u32)> = (0..text.len())
            .filter_map(|pos| {
                // Sorted order puts a keyword after its prefixes: the last one found
                // is the longest.
                let kw = sorted
                    .iter()
                    .rposition(|k| text[pos..].starts_with(k.as_bytes()))?;
                Some((pos, kw as u32))
            })
            .collect();
        let got = hits(&keywords, &sorted, text, |pos, _| pos + 1);
        assert_eq!(
            got,
            want,
            "resume one byte on, {hasher:?}\nkeywords: {sorted:?}\ntext: {:?}",
            String::from_utf8_lossy(text)
        );
    }

    /// A keyword of `3..=20` bytes (or `1..=2` when `short`) mixing ASCII, control
    /// bytes and multi-byte characters, or one sharing a prefix with an earlier one.
    fn random_keyword(r: &mut Rng, earlier: &[String], short: bool) -> String {
        const CHARS: &[char] = &[
            'a', 'e', 'k', 's', 'A', 'K', '0', '9', '_', '-', '.', ':', '/', '"', ' ', '\0', '\n',
            '\u{7f}', 'é', 'ß', '€', '\u{ffff}', '😀',
        ];
        let (min, max) = if short { (1, 2) } else { (3, 20) };
        let target = min + r.below(max - min + 1);
        let mut kw = String::new();
        if !earlier.is_empty() && r.below(3) == 0 {
            // A shared prefix: part or all of an earlier keyword, extended below.
            let other = &earlier[r.below(earlier.len())];
            let mut cut = r.below(other.len().min(target) + 1);
            while !other.is_char_boundary(cut) {
                cut -= 1;
            }
            kw.push_str(&other[..cut]);
        }
        while kw.len() < target {
            let c = CHARS[r.below(CHARS.len())];
            if kw.len() + c.len_utf8() > max && kw.len() >= min {
                break;
            }
            kw.push(c);
        }
        kw
    }

    /// A text of `0..5000` bytes: random bytes of every value, ordinary words, and
    /// keywords planted whole, overlapping, cut short, back to back and at the end.
    fn random_text(r: &mut Rng, words: &[String]) -> Vec<u8> {
        let len = match r.below(4) {
            0 => r.below(300),
            _ => r.below(5000),
        };
        let mut text = Vec::with_capacity(len + 32);
        while text.len() < len {
            let kw = words[r.below(words.len())].as_bytes();
            match r.below(8) {
                0 => text.extend((0..r.below(40)).map(|_| r.next() as u8)),
                1 => text.extend_from_slice(b"the token was sent to https://host/ "),
                2 => text.extend_from_slice(&kw[..r.below(kw.len())]),
                3 => {
                    // Another keyword starting inside this one.
                    let cut = 1 + r.below(kw.len());
                    text.extend_from_slice(&kw[..cut]);
                    text.extend_from_slice(words[r.below(words.len())].as_bytes());
                }
                4 => text.extend((0..r.below(12)).map(|_| b'a' + r.below(26) as u8)),
                5 if r.below(4) == 0 => text.extend_from_slice(b"%2F"),
                _ => text.extend_from_slice(kw),
            }
        }
        text.truncate(len);
        if !text.is_empty() && r.below(3) == 0 {
            // A keyword that ends exactly where the text does.
            let kw = words[r.below(words.len())].as_bytes();
            let keep = text.len().saturating_sub(kw.len());
            text.truncate(keep);
            text.extend_from_slice(kw);
        }
        text
    }

    /// The real configuration: every keyword of every built-in row.
    #[test]
    fn builtin_keywords_hit_exactly_what_a_reference_search_finds() {
        let mut words: Vec<String> = super::super::builtin::BUILTINS
            .iter()
            .flat_map(|b| b.keywords.iter().map(|k| k.to_string()))
            .collect();
        words.sort();
        words.dedup();
        let r = &mut Rng(7);
        for hasher in hashers() {
            for _ in 0..300 {
                let text = random_text(r, &words);
                check(&words, &text, hasher);
            }
        }
    }

    /// Random keyword sets of every shape, including (one set in eight) keywords of
    /// one or two bytes, which the block filter cannot hash and leaves to the automaton.
    #[test]
    fn random_keywords_hit_exactly_what_a_reference_search_finds() {
        let r = &mut Rng(11);
        for round in 0..250 {
            let short = round % 8 == 7;
            let mut words = Vec::new();
            for _ in 0..1 + r.below(if round % 2 == 0 { 8 } else { 150 }) {
                let this_short = short && r.below(4) == 0;
                let kw = random_keyword(r, &words, this_short);
                words.push(kw);
            }
            for hasher in hashers() {
                for _ in 0..4 {
                    let text = random_text(r, &words);
                    check(&words, &text, hasher);
                }
            }
        }
    }

    /// Hand-picked shapes: keywords that are prefixes of others, a keyword inside
    /// another, hits in the last bytes, and texts of lengths around the block and
    /// short-text boundaries.
    #[test]
    fn boundary_cases_hit_exactly_what_a_reference_search_finds() {
        let words: Vec<String> = ["sk-", "sk-ant-", "ghp_", "AKIA", "://", "oken", "ken"]
            .map(String::from)
            .to_vec();
        for hasher in hashers() {
            for len in [0, 1, 2, 3, 31, 32, 33, 34, 35, 66, 255, 256, 257, 290, 1000] {
                for kw in &words {
                    for end_gap in 0..3 {
                        let mut text = vec![b'x'; len];
                        if kw.len() + end_gap <= len {
                            let at = len - end_gap - kw.len();
                            text[at..at + kw.len()].copy_from_slice(kw.as_bytes());
                        }
                        check(&words, &text, hasher);
                    }
                }
                let mut text: Vec<u8> = b"tokensk-ant-://".repeat(len / 15 + 1);
                text.truncate(len);
                check(&words, &text, hasher);
                // A `%` at every place of the text, alone or after a keyword skipped.
                for at in 0..len.min(70) {
                    for mut text in [vec![b'x'; len], b"ghp_".repeat(len / 4 + 1)] {
                        text.truncate(len);
                        text[at] = b'%';
                        check(&words, &text, hasher);
                    }
                }
            }
        }
    }

    /// A hit's candidates include those of every shorter keyword it starts with.
    #[test]
    fn a_hit_carries_the_candidates_of_its_prefixes() {
        let entries = vec![
            ("sk-".to_string(), candidate(2)),
            ("sk-ant-".to_string(), candidate(0)),
            ("sk-".to_string(), candidate(1)),
        ];
        let keywords = Keywords::new(entries).unwrap();
        let mut got = Vec::new();
        keywords.for_each_hit(b"an sk-ant-key", |pos, kw| {
            got.push((pos, keywords.candidates(kw).to_vec()));
            pos + 1
        });
        assert_eq!(
            got,
            vec![(3, vec![candidate(0), candidate(1), candidate(2)])]
        );
    }
}
