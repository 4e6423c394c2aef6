//! What a regex costs when every match in a text is wanted (redaction spans, secret
//! patterns): probed at load time, so a regex that would make each search re-read the
//! rest of the text is refused at start-up instead of stalling a session (issue 22).
//!
//! Finding all matches is one search after another, each starting where the last match
//! ended. A search for the leftmost-first match keeps reading while a longer or
//! higher-priority match is still possible, so `\w+Z|\w` over a long run of word
//! characters reads to the end of the run for every one-byte match: quadratic in the run.
//! The probe replays that loop on a lazy DFA of the regex over short texts made of its own
//! byte classes (each class repeated, and each pair of classes alternating), counting DFA
//! steps, and stops at a budget. This bounds the shapes it tries; it is a budget, not a
//! proof for every input.

use regex_automata::hybrid::dfa::{Cache, DFA};
use regex_automata::nfa::thompson::NFA;
use regex_automata::{Anchored, Input};

/// The length of each probe text.
const PROBE_LEN: usize = 2048;

/// Pairs of byte classes are tried among the first this many ASCII classes (the pairs grow
/// with the square; Unicode classes add many classes of UTF-8 bytes, probed one by one).
const MAX_PAIRED_CLASSES: usize = 24;

/// How many DFA steps per byte of text finding every match may take.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    pub steps_per_byte: usize,
}

/// A trusted file's regexes: generous (a counted repetition such as `[a-z]{0,100}x|a` reads
/// up to a hundred bytes per match).
pub const TRUSTED: Budget = Budget {
    steps_per_byte: 256,
};

/// An untrusted project file's regexes only add protection and get a tighter budget.
pub const UNTRUSTED: Budget = Budget { steps_per_byte: 32 };

/// A probe text on which finding every match exceeded the budget.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TooCostly {
    /// The probe text's repeating unit, as written for a person (`a`, `a `).
    pub unit: String,
}

/// Probes the regex compiled to `nfa`. `Ok` when every probe text stays within the budget,
/// or when the lazy DFA cannot run it (it gives up on Unicode word boundaries over
/// non-ASCII text; the runtime then uses another engine).
pub fn probe(nfa: &NFA, budget: Budget) -> Result<(), TooCostly> {
    let Ok(dfa) = DFA::builder()
        .configure(
            DFA::config()
                .cache_capacity(1 << 20)
                .skip_cache_capacity_check(true),
        )
        .build_from_nfa(nfa.clone())
    else {
        return Ok(());
    };
    let mut cache = dfa.create_cache();
    let reps: Vec<u8> = dfa
        .byte_classes()
        .representatives(..)
        .filter_map(|u| u.as_u8())
        .collect();
    let limit = budget.steps_per_byte * PROBE_LEN;
    let mut text = Vec::with_capacity(PROBE_LEN);
    let mut units: Vec<Vec<u8>> = reps.iter().map(|&r| vec![r]).collect();
    let ascii: Vec<u8> = reps
        .iter()
        .copied()
        .filter(u8::is_ascii)
        .take(MAX_PAIRED_CLASSES)
        .collect();
    for (i, &a) in ascii.iter().enumerate() {
        for &b in &ascii[i + 1..] {
            units.push(vec![a, b]);
        }
    }
    for unit in units {
        text.clear();
        while text.len() < PROBE_LEN {
            text.extend_from_slice(&unit);
        }
        if let Some(steps) = steps_to_find_all(&dfa, &mut cache, &text, limit)
            && steps > limit
        {
            return Err(TooCostly {
                unit: unit.iter().map(|&b| char::from(b)).collect::<String>(),
            });
        }
    }
    Ok(())
}

/// DFA steps taken to find every leftmost-first match in `text`, as `find_iter` does
/// (the next search starts at the last match's end, one byte later after an empty match);
/// counting stops just past `limit`. `None` when the lazy DFA gives up.
fn steps_to_find_all(dfa: &DFA, cache: &mut Cache, text: &[u8], limit: usize) -> Option<usize> {
    let mut steps = 0usize;
    let mut at = 0usize;
    while at <= text.len() {
        let input = Input::new(text).range(at..).anchored(Anchored::No);
        let mut sid = dfa.start_state_forward(cache, &input).ok()?;
        let mut end = None;
        let mut i = at;
        while i < text.len() {
            sid = dfa.next_state(cache, sid, text[i]).ok()?;
            steps += 1;
            if sid.is_tagged() {
                if sid.is_match() {
                    // Matches are reported one byte late: this one ends before `i`.
                    end = Some(i);
                } else if sid.is_dead() {
                    break;
                } else if sid.is_quit() {
                    return None;
                }
            }
            if steps > limit {
                return Some(steps);
            }
            i += 1;
        }
        if i == text.len() {
            sid = dfa.next_eoi_state(cache, sid).ok()?;
            if sid.is_match() {
                end = Some(text.len());
            }
        }
        match end {
            Some(e) if e > at => at = e,
            Some(_) => at += 1,
            None => break,
        }
    }
    Some(steps)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nfa(pattern: &str) -> NFA {
        NFA::new(pattern).expect("test regex compiles")
    }

    #[test]
    fn a_regex_that_rereads_the_text_for_every_match_is_too_costly() {
        for pattern in [r"\w+Z|\w", r"(?:a\s)+Z|a", r"[0-9]+x|[0-9]", r".*;|."] {
            assert!(probe(&nfa(pattern), TRUSTED).is_err(), "{pattern}");
        }
    }

    #[test]
    fn ordinary_redaction_and_secret_regexes_are_within_budget() {
        for pattern in [
            r"sk-[A-Za-z0-9]{20,}",
            r"(?i)password\s*[:=]\s*\S+",
            r"\b[0-9]{3}-[0-9]{2}-[0-9]{4}\b",
            r"[A-Za-z0-9+/]{40}",
            r"-----BEGIN [A-Z ]+-----",
            r"\w+",
            r"[a-z]{0,100}x|a",
        ] {
            assert_eq!(probe(&nfa(pattern), TRUSTED), Ok(()), "{pattern}");
        }
    }

    #[test]
    fn an_untrusted_file_gets_the_tighter_budget() {
        // Reads up to a hundred bytes ahead for every one-byte match: linear, but costly.
        let pattern = r"[a-z]{0,100}x|a";
        assert_eq!(probe(&nfa(pattern), TRUSTED), Ok(()));
        assert!(probe(&nfa(pattern), UNTRUSTED).is_err());
    }

    #[test]
    fn counting_follows_find_iter() {
        let dfa = DFA::builder().build_from_nfa(nfa(r"ab|b")).expect("dfa");
        let mut cache = dfa.create_cache();
        // Two matches, each search reading its match and at most a byte to see it end.
        let steps = steps_to_find_all(&dfa, &mut cache, b"abab", 1000).expect("runs");
        assert!((4..=8).contains(&steps), "{steps}");
    }
}
