//! The literal engine class: every `response_contains` literal in one `AhoCorasick`,
//! ASCII case-insensitive. Overlapping search, so a literal that overlaps an earlier
//! one is still seen (rule order is applied afterwards, from the predicate bits).
//!
//! Literals match text in its normalised form ([`crate::text::normalize`]: NFKC,
//! zero-width and bidi characters removed, look-alike letters folded, lower case,
//! white space collapsed), so `IGNORE\u{200B} previous  instructions` or a full-width
//! spelling still matches `ignore previous instructions`. Plain printable ASCII with
//! single spaces is already in normal form up to case, so only other texts pay for
//! normalising; a match found only in the normalised form covers the whole string.

use std::sync::OnceLock;

use aho_corasick::{AhoCorasick, AhoCorasickKind, Input, MatchKind};
use regex_automata::meta;

use super::PredMap;
use crate::text::normalize::{lowercase_collapsed, normalize};

#[derive(Debug)]
pub(crate) struct LiteralEngine {
    automata: OnceLock<Automata>,
    /// The literals (normalised, so lower case), kept for a deferred build.
    literals: Box<[String]>,
    pub map: PredMap,
}

/// Three automata over the same literals, for the two ways a text is searched.
#[derive(Debug)]
struct Automata {
    /// Overlapping, ASCII case-insensitive: short texts, searched as they are.
    overlapping: AhoCorasick,
    /// Leftmost-longest over lower-cased text: finds where some literal starts, with the
    /// SIMD prefilter (an overlapping search of a long text steps the automaton through
    /// nearly every byte, since the literals start with common letters).
    leftmost: AhoCorasick,
    /// The literals (lower case), and for each first byte the ones starting with it, to
    /// list every literal starting where the leftmost search found one.
    literals: Box<[String]>,
    by_first_byte: Box<[Box<[u32]>]>,
    /// Says of most plain ASCII texts, lower-cased, that they hold no literal; `None`
    /// when a literal is not ASCII.
    gate: Option<Gate>,
    /// Length in bytes of the shortest literal.
    min_len: usize,
}

/// Texts at least this long are lower-cased once and searched with the prefilter.
const LONG_TEXT: usize = 256;

fn build(literals: &[String]) -> Result<Automata, String> {
    let err = |e: aho_corasick::BuildError| e.to_string();
    Ok(Automata {
        overlapping: AhoCorasick::builder()
            .match_kind(MatchKind::Standard)
            .ascii_case_insensitive(true)
            .kind(Some(AhoCorasickKind::ContiguousNFA))
            .build(literals)
            .map_err(err)?,
        leftmost: AhoCorasick::builder()
            .match_kind(MatchKind::LeftmostLongest)
            .kind(Some(AhoCorasickKind::ContiguousNFA))
            .build(literals)
            .map_err(err)?,
        gate: gate(literals)?,
        min_len: literals.iter().map(String::len).min().unwrap_or(0),
        literals: literals.into(),
        by_first_byte: (0..=255u8)
            .map(|b| {
                (0..literals.len() as u32)
                    .filter(|&i| literals[i as usize].as_bytes().first() == Some(&b))
                    .collect()
            })
            .collect(),
    })
}

/// Two searches of lower-cased plain ASCII text, each of which clears most texts that
/// hold no literal: the cheap one first.
#[derive(Debug)]
struct Gate {
    /// The longest word of each literal. White space only separates words, so a text
    /// (or its collapsed form) holding a literal holds that word. A handful of words gets
    /// a vector (Teddy) search: on the calls benchmark's results, 340 instructions a
    /// result against the regex's 550.
    words: AhoCorasick,
    /// Length of the longest of `words`.
    longest_word: usize,
    /// Matches wherever a literal would match the text or its white-space-collapsed form
    /// (each space of a literal as a run of white space).
    literals: meta::Regex,
}

impl Gate {
    /// Whether `lower` (plain ASCII, lower-cased) certainly holds no literal.
    fn clears(&self, lower: &[u8]) -> bool {
        !self.words.is_match(lower) || !self.literals.is_match(lower)
    }

    /// Whether no word is in `text` (plain ASCII, any case), looked for in windows
    /// lower-cased on the stack, so a long text that holds none is never copied whole.
    /// Windows overlap by a word's length less one: a word is inside one of them.
    /// `None` when a word is too long for the windows.
    fn words_absent(&self, text: &[u8]) -> Option<bool> {
        let mut buf = [0u8; GATE_WINDOW];
        let overlap = self.longest_word.saturating_sub(1);
        let step = GATE_WINDOW
            .checked_sub(overlap)
            .filter(|&s| s >= GATE_WINDOW / 2)?;
        let mut start = 0;
        loop {
            let end = text.len().min(start + GATE_WINDOW);
            let window = &mut buf[..end - start];
            window.copy_from_slice(&text[start..end]);
            window.make_ascii_lowercase();
            if self.words.is_match(&*window) {
                return Some(false);
            }
            if end == text.len() {
                return Some(true);
            }
            start += step;
        }
    }
}

/// Bytes of a long text lower-cased at a time by [`Gate::words_absent`].
const GATE_WINDOW: usize = 8 * 1024;

fn gate(literals: &[String]) -> Result<Option<Gate>, String> {
    if literals.is_empty() || !literals.iter().all(|l| l.is_ascii()) {
        return Ok(None);
    }
    let mut words: Vec<&str> = literals
        .iter()
        .filter_map(|l| l.split(' ').rev().max_by_key(|w| w.len()))
        .collect();
    words.sort_unstable();
    words.dedup();
    let alternatives: Vec<String> = literals
        .iter()
        .map(|l| {
            l.split(' ')
                .map(regex_syntax::escape)
                .collect::<Vec<_>>()
                .join(r"[\t\n ]+")
        })
        .collect();
    Ok(Some(Gate {
        longest_word: words.iter().map(|w| w.len()).max().unwrap_or(0),
        // Leftmost-first: the vector search only serves leftmost semantics.
        words: AhoCorasick::builder()
            .match_kind(MatchKind::LeftmostFirst)
            .build(&words)
            .map_err(|e| e.to_string())?,
        literals: meta::Regex::new(&format!("(?:{})", alternatives.join("|")))
            .map_err(|e| e.to_string())?,
    }))
}

/// Printable ASCII, tabs and newlines: text whose normal form is its lower-cased,
/// white-space-collapsed self.
fn is_plain_ascii(text: &str) -> bool {
    let plain = |b: u8| (0x20..0x7F).contains(&b) | (b == b'\t') | (b == b'\n');
    // Blocks tested without an early exit, which the compiler turns into vector compares
    // (a byte-by-byte `all` was a fifth of the proxy's time on 1 MiB results).
    let mut blocks = text.as_bytes().chunks_exact(64);
    for block in blocks.by_ref() {
        let mut ok = true;
        for &b in block {
            ok &= plain(b);
        }
        if !ok {
            return false;
        }
    }
    blocks.remainder().iter().all(|&b| plain(b))
}

impl LiteralEngine {
    /// Built now; fails when the automaton cannot be built.
    pub fn new(literals: &[String], map: PredMap) -> Result<LiteralEngine, String> {
        Ok(LiteralEngine {
            automata: OnceLock::from(build(literals)?),
            literals: literals.into(),
            map,
        })
    }

    /// Built on first use (or by [`LiteralEngine::warm_up`]); only for literals known to
    /// build, those of the embedded packs.
    pub fn deferred(literals: &[String], map: PredMap) -> LiteralEngine {
        LiteralEngine {
            automata: OnceLock::new(),
            literals: literals.into(),
            map,
        }
    }

    fn automata(&self) -> &Automata {
        self.automata.get_or_init(|| {
            build(&self.literals).unwrap_or_else(|e| {
                panic!("the built-in response_contains literals do not build: {e}")
            })
        })
    }

    pub fn warm_up(&self) {
        self.automata();
    }

    /// Call `f(pattern, start, end)` for every occurrence of every literal in `text`.
    #[cfg(test)]
    pub fn for_each_match(&self, text: &str, f: impl FnMut(usize, usize, usize)) {
        self.for_each_match_with(text, None, f)
    }

    /// [`Self::for_each_match`], given `normalize_keeping_case(text)` when the caller
    /// already has it (the regexes of the same rules need it), so the Unicode steps
    /// run once per text.
    #[inline]
    pub fn for_each_match_with(
        &self,
        text: &str,
        kept_case: Option<&str>,
        mut f: impl FnMut(usize, usize, usize),
    ) {
        let automata = self.automata();
        // Normalising never lengthens ASCII text (NFKC can lengthen other text: `ﬃ`,
        // `¼`): an ASCII text shorter than every literal (a JSON key, a small value)
        // cannot hold any.
        if text.len() < automata.min_len && text.is_ascii() {
            return;
        }
        let mut found = 0u64;
        let mut note = |p: usize, start: usize, end: usize| {
            found |= 1u64.checked_shl(p as u32).unwrap_or(0);
            f(p, start, end);
        };
        if text.len() < LONG_TEXT {
            if let Some(gate) = &automata.gate
                && is_plain_ascii(text)
            {
                // Lower-cased on the stack: case-sensitive searches get the vector
                // prefilters, which ASCII case-insensitive ones cannot.
                let mut buf = [0u8; LONG_TEXT];
                let lower = &mut buf[..text.len()];
                lower.copy_from_slice(text.as_bytes());
                lower.make_ascii_lowercase();
                if gate.clears(lower) {
                    return;
                }
            }
            for m in automata.overlapping.find_overlapping_iter(text) {
                note(m.pattern().as_usize(), m.start(), m.end());
            }
        } else {
            let gate = automata.gate.as_ref().filter(|_| is_plain_ascii(text));
            let words_absent = gate.and_then(|g| g.words_absent(text.as_bytes()));
            if words_absent == Some(true) {
                return;
            }
            // ASCII lower-casing keeps every byte offset.
            let lower = text.to_ascii_lowercase();
            if let Some(gate) = gate {
                // The windows have already found a word (unless one is too long for them).
                let cleared = match words_absent {
                    Some(_) => !gate.literals.is_match(lower.as_bytes()),
                    None => gate.clears(lower.as_bytes()),
                };
                if cleared {
                    return;
                }
            }
            automata.each_in_lowercase(&lower, &mut note);
        }
        if is_normal_up_to_case(text) {
            return;
        }
        // Patterns past the 64th are reported again from the normalised text; a
        // duplicate hit only sets the same predicate bit twice. Printable ASCII with tabs
        // and newlines only needs its white space collapsed (case is ignored anyway), which
        // is one cheap pass instead of the full Unicode normalisation.
        let normalized = match collapse_ascii_whitespace(text) {
            Some(mut collapsed) => {
                collapsed.make_ascii_lowercase();
                collapsed
            }
            None => match kept_case {
                Some(kept) => lowercase_collapsed(kept),
                None => normalize(text),
            },
        };
        let mut reported = found;
        automata.each_in_lowercase(&normalized, &mut |p, _, _| {
            let bit = 1u64.checked_shl(p as u32).unwrap_or(0);
            if bit != 0 && reported & bit != 0 {
                return;
            }
            reported |= bit;
            f(p, 0, text.len());
        });
    }
}

impl Automata {
    /// Every occurrence of every literal in `lower` (lower-case text), overlapping ones
    /// included: the leftmost search finds each place where some literal starts, the
    /// anchored one lists all literals starting there, and the search goes on one byte
    /// further.
    fn each_in_lowercase(&self, lower: &str, f: &mut dyn FnMut(usize, usize, usize)) {
        let mut at = 0;
        while at < lower.len() {
            let Some(m) = self.leftmost.find(Input::new(lower).span(at..lower.len())) else {
                return;
            };
            let start = m.start();
            let rest = &lower.as_bytes()[start..];
            for &p in self.by_first_byte[usize::from(rest[0])].iter() {
                let literal = self.literals[p as usize].as_bytes();
                if rest.starts_with(literal) {
                    f(p as usize, start, start + literal.len());
                }
            }
            at = start + 1;
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

/// `text` with every run of white space turned into one space and none at either end,
/// when `text` is printable ASCII, tabs and newlines only: for such text that is what
/// [`normalize`] gives, up to case. `None` for any other text.
fn collapse_ascii_whitespace(text: &str) -> Option<String> {
    if !is_plain_ascii(text) {
        return None;
    }
    let mut out = String::with_capacity(text.len());
    for word in text.split([' ', '\t', '\n']).filter(|w| !w.is_empty()) {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    }
    Some(out)
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

    /// Long texts (lower-cased, leftmost search plus anchored enumeration) report exactly
    /// the occurrences an overlapping search finds, overlapping and nested ones included.
    #[test]
    fn long_texts_report_every_occurrence() {
        let literals = [
            "ignore previous instructions",
            "previous instructions",
            "instructions",
            "ions",
            "<important>",
            "do not tell",
        ];
        let lits: Vec<String> = literals.iter().map(|l| normalize_literal(l)).collect();
        let engine = LiteralEngine::new(&lits, PredMap::default()).unwrap();
        let words = [
            "Ignore",
            "PREVIOUS",
            "instructions",
            "<IMPORTANT>",
            "do",
            "not",
            "tell",
            "lorem",
            "ipsum",
            "ions",
        ];
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..300 {
            let mut text = String::new();
            while text.len() < LONG_TEXT + 200 {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                if !text.is_empty() {
                    text.push(' ');
                }
                text.push_str(words[(state % words.len() as u64) as usize]);
            }
            let mut got = Vec::new();
            engine.for_each_match(&text, |p, s, e| got.push((p, s, e)));
            got.sort();
            let lower = text.to_ascii_lowercase();
            let mut want = Vec::new();
            for (p, lit) in lits.iter().enumerate() {
                for start in 0..lower.len() {
                    if lower[start..].starts_with(lit.as_str()) {
                        want.push((p, start, start + lit.len()));
                    }
                }
            }
            want.sort();
            assert_eq!(got, want, "{text}");
        }
    }

    /// A long text is searched for the literals' words in overlapping windows; a
    /// literal whose word straddles a window's end, at every offset around it, is
    /// still found, in any case.
    #[test]
    fn words_across_window_boundaries_are_found() {
        let lits = vec![
            normalize_literal("ignore previous instructions"),
            normalize_literal("<important>"),
        ];
        let engine = LiteralEngine::new(&lits, PredMap::default()).unwrap();
        let step = GATE_WINDOW - "instructions".len() + 1;
        for literal in ["IGNORE previous Instructions", "<Important>"] {
            for boundary in [GATE_WINDOW, step + GATE_WINDOW] {
                for at in boundary - literal.len() - 2..boundary + 2 {
                    let mut text = "x".repeat(at);
                    text.push_str(literal);
                    text.push_str(&"y".repeat(3 * GATE_WINDOW - text.len()));
                    let mut hits = Vec::new();
                    engine.for_each_match(&text, |p, s, e| hits.push((p, s, e)));
                    let p = usize::from(literal.starts_with('<'));
                    assert_eq!(hits, [(p, at, at + literal.len())], "{literal} at {at}");
                }
            }
        }
        // A text holding no word at all is cleared without any hit.
        let mut hits = 0;
        engine.for_each_match(&"no such words here ".repeat(2000), |_, _, _| hits += 1);
        assert_eq!(hits, 0);
    }

    /// The gates that skip texts with no literal still let through a literal whose
    /// words are split by runs of white space, tabs or newlines.
    #[test]
    fn texts_with_split_literals_still_match() {
        let lits = vec![normalize_literal("ignore previous instructions")];
        let engine = LiteralEngine::new(&lits, PredMap::default()).unwrap();
        let pad = "lorem ipsum dolor sit amet ".repeat(20);
        for (text, want) in [
            (
                format!("{pad}IGNORE \n  previous\t\tinstructions{pad}"),
                true,
            ),
            (format!("{pad}ignore previous instructions"), true),
            (format!("{pad}\nignore\nprevious\n"), false),
            (pad.clone(), false),
            ("IGNORE \n  previous\tinstructions".to_string(), true),
            ("ignore previous".to_string(), false),
        ] {
            let mut hits = Vec::new();
            engine.for_each_match(&text, |p, _, _| hits.push(p));
            assert_eq!(!hits.is_empty(), want, "{text:?}");
        }
    }

    /// The fast path for plain ASCII gives what the full normalisation gives, up to case.
    #[test]
    fn ascii_collapse_agrees_with_normalize() {
        let alphabet = [
            " ",
            "  ",
            "\t",
            "\n",
            "\n\n",
            "Ignore",
            "PREVIOUS",
            "x",
            "-",
            "<IMPORTANT>",
            ".",
            "a b",
        ];
        let mut state = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..5_000 {
            let mut text = String::new();
            for _ in 0..(state % 9) {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                text.push_str(alphabet[(state % alphabet.len() as u64) as usize]);
            }
            let fast = collapse_ascii_whitespace(&text).expect("ascii");
            assert_eq!(fast.to_ascii_lowercase(), normalize(&text), "{text:?}");
        }
        assert_eq!(collapse_ascii_whitespace("caf\u{e9}"), None);
        assert_eq!(collapse_ascii_whitespace("a\rb"), None);
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

    /// A text shorter than every literal is skipped only when it is ASCII: NFKC can make
    /// a short text longer (`¼` is two bytes, its normal form `1⁄4` five).
    #[test]
    fn plain_ascii_is_exact_at_every_position() {
        let long = "a".repeat(200);
        assert!(is_plain_ascii(&long));
        for at in [0, 63, 64, 65, 127, 199] {
            for bad in ['\r', '\u{7f}', '\u{1b}', '\u{e9}'] {
                let mut t = long.clone();
                t.replace_range(at..at + 1, &bad.to_string());
                assert!(!is_plain_ascii(&t), "{bad:?} at {at}");
            }
            let mut t = long.clone();
            t.replace_range(at..at + 1, "\t");
            assert!(is_plain_ascii(&t));
        }
    }

    #[test]
    fn short_texts_are_skipped_only_when_normalising_cannot_lengthen_them() {
        assert!(!hits(&["1\u{2044}4"], "\u{bc}").is_empty());
        assert!(hits(&["<important>"], "<import").is_empty());
        assert!(!hits(&["<important>"], "<IMPORTANT>").is_empty());
    }
}
