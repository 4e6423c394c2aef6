//! What every match of a regex contains: a set of literals, one of which occurs (ASCII
//! case aside) in any text the regex matches anywhere.
//!
//! The deferred regexes of the embedded packs take milliseconds to build, and every frame
//! needs them, the handshake included. The literals of those patterns are computed when
//! mcpwall is built (`build.rs` includes this file), so a frame whose texts hold none of
//! them is judged "no pattern matches" without waiting for the automaton.
//!
//! The analysis works on the parsed pattern (the `Hir`), bottom-up. For each node it
//! knows, when few enough, every string the node can match (`exact`), and a set one of
//! which every match contains (`required`). A concatenation requires what any of its
//! parts requires, or any string a run of its exactly-known parts spells; an
//! alternation requires the union of what each branch requires; a repetition that may
//! match nothing, an anchor and a large class require nothing. Literals are kept in
//! ASCII lower case: the search for them ignores ASCII case, which only adds hits.

use regex_syntax::hir::{Class, Hir, HirKind};

/// Most strings an `exact` set holds; past this a node is "too many strings".
const MAX_EXACT: usize = 64;
/// Most literals a `required` set holds.
const MAX_REQUIRED: usize = 256;
/// Most characters (after ASCII lower-casing) a class may have to count as a set of
/// one-character strings.
const MAX_CLASS: usize = 16;
/// Length from which a literal is as good as any longer one when comparing sets: a hit
/// on a literal this long is rare in ordinary text.
const GOOD_LEN: usize = 8;

/// Byte strings, sorted and without duplicates, in ASCII lower case.
type Set = Vec<Vec<u8>>;

#[derive(Debug, Default)]
struct Info {
    /// Every string the node matches, when there are at most [`MAX_EXACT`].
    exact: Option<Set>,
    /// Literals (none empty) one of which every match of the node contains.
    required: Option<Set>,
}

/// Literals, one of which (ignoring ASCII case) occurs in every text `hir` matches;
/// `None` when no such set is known (a pattern that can match the empty string, say).
/// Every literal is at least one byte; the set is sorted and has no duplicates.
pub fn required_literals(hir: &Hir) -> Option<Vec<Vec<u8>>> {
    best(analyze(hir))
}

fn analyze(hir: &Hir) -> Info {
    match hir.kind() {
        HirKind::Empty | HirKind::Look(_) => Info {
            exact: Some(vec![Vec::new()]),
            required: None,
        },
        HirKind::Literal(lit) => {
            let set = vec![lower(&lit.0)];
            Info {
                exact: Some(set.clone()),
                required: Some(set),
            }
        }
        HirKind::Class(class) => {
            let exact = class_strings(class);
            Info {
                required: exact.clone().filter(usable),
                exact,
            }
        }
        HirKind::Capture(cap) => analyze(&cap.sub),
        HirKind::Repetition(rep) => {
            let sub = analyze(&rep.sub);
            let once = rep.max == Some(1);
            if rep.min == 0 {
                // `x?` is `x` or nothing; any other optional repetition is unbounded
                // in the strings it spells, and requires nothing.
                let exact = sub.exact.filter(|_| once).map(|mut s| {
                    s.push(Vec::new());
                    normalize(s)
                });
                Info {
                    exact,
                    required: None,
                }
            } else {
                // One or more copies: every match contains a match of the sub-pattern.
                let exact = if rep.min == 1 && once {
                    sub.exact.clone()
                } else {
                    None
                };
                Info {
                    exact,
                    required: best(sub),
                }
            }
        }
        HirKind::Concat(subs) => concat(subs.iter().map(analyze).collect()),
        HirKind::Alternation(subs) => {
            let infos: Vec<Info> = subs.iter().map(analyze).collect();
            let exact = infos
                .iter()
                .try_fold(Vec::new(), |mut acc, i| {
                    acc.extend(i.exact.as_ref()?.iter().cloned());
                    Some(acc)
                })
                .map(normalize)
                .filter(|s| s.len() <= MAX_EXACT);
            // Each branch must require something: a match may come from any of them.
            let required = infos
                .into_iter()
                .try_fold(Vec::new(), |mut acc, i| {
                    acc.extend(best(i)?);
                    Some(acc)
                })
                .map(normalize)
                .filter(|s| s.len() <= MAX_REQUIRED);
            Info { exact, required }
        }
    }
}

/// A concatenation: the exact strings are the products of the parts'; what it requires
/// is the best of what each part requires and of the products of runs of consecutive
/// parts known exactly (each such product holds a substring of every match).
fn concat(parts: Vec<Info>) -> Info {
    let mut candidates: Vec<Set> = parts.iter().filter_map(|p| p.required.clone()).collect();
    let whole = parts
        .iter()
        .try_fold(vec![Vec::new()], |acc, p| product(&acc, p.exact.as_ref()?));
    // Every run of consecutive exact parts whose product is small enough: a short run
    // of rare parts can beat a long one that starts with a large class.
    for start in 0..parts.len() {
        let mut acc = vec![Vec::new()];
        for part in &parts[start..] {
            let Some(next) = part.exact.as_ref().and_then(|e| product(&acc, e)) else {
                break;
            };
            acc = next;
            candidates.push(acc.clone());
        }
    }
    let required = candidates.into_iter().filter(usable).max_by_key(score);
    Info {
        exact: whole,
        required,
    }
}

/// The better of what `info` requires and (when it has no empty string) its exact set.
fn best(info: Info) -> Option<Set> {
    let exact = info.exact.filter(usable);
    match (info.required, exact) {
        (Some(r), Some(e)) => Some(if score(&e) > score(&r) { e } else { r }),
        (r, e) => r.or(e),
    }
}

/// How selective a set is: the shortest literal first (capped at [`GOOD_LEN`]), then
/// the fewer literals the better.
fn score(set: &Set) -> (usize, std::cmp::Reverse<usize>) {
    let shortest = set.iter().map(Vec::len).min().unwrap_or(0);
    (shortest.min(GOOD_LEN), std::cmp::Reverse(set.len()))
}

/// A set can serve as "one of these occurs": not empty, and no empty literal.
fn usable(set: &Set) -> bool {
    !set.is_empty() && set.iter().all(|l| !l.is_empty())
}

/// Every concatenation of a string of `a` and one of `b`, if at most [`MAX_EXACT`].
fn product(a: &Set, b: &Set) -> Option<Set> {
    if a.len().saturating_mul(b.len()) > MAX_EXACT {
        return None;
    }
    let mut out = Vec::with_capacity(a.len() * b.len());
    for x in a {
        for y in b {
            let mut s = x.clone();
            s.extend_from_slice(y);
            out.push(s);
        }
    }
    Some(normalize(out))
}

/// The one-character strings of a class (UTF-8 for a Unicode class), if at most
/// [`MAX_CLASS`] after lower-casing.
fn class_strings(class: &Class) -> Option<Set> {
    let mut out = Vec::new();
    match class {
        Class::Unicode(c) => {
            for r in c.ranges() {
                // Letters of both cases count twice until lower-cased: allow for that.
                if out.len() + (r.end() as usize - r.start() as usize) >= 2 * MAX_CLASS {
                    return None;
                }
                for ch in r.start()..=r.end() {
                    let mut buf = [0u8; 4];
                    out.push(lower(ch.encode_utf8(&mut buf).as_bytes()));
                }
            }
        }
        Class::Bytes(c) => {
            for r in c.ranges() {
                if out.len() + usize::from(r.end() - r.start()) >= 2 * MAX_CLASS {
                    return None;
                }
                for b in r.start()..=r.end() {
                    out.push(lower(&[b]));
                }
            }
        }
    }
    let out = normalize(out);
    (out.len() <= MAX_CLASS).then_some(out)
}

fn lower(bytes: &[u8]) -> Vec<u8> {
    bytes.to_ascii_lowercase()
}

fn normalize(mut set: Set) -> Set {
    set.sort_unstable();
    set.dedup();
    set
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_rng::Rng;

    /// The table `build.rs` wrote, which the regex engine reads, holds what the analysis
    /// gives for the same pattern now.
    #[test]
    fn the_embedded_literal_table_is_current() {
        for (pattern, literals) in crate::program::engine::regex::embedded::REQUIRED_LITERALS {
            let hir = crate::regex_dialect::parse(pattern).unwrap();
            let now = required_literals(&hir).unwrap();
            let table: Vec<Vec<u8>> = literals.iter().map(|l| l.to_vec()).collect();
            assert_eq!(table, now, "{pattern}");
        }
    }

    fn literals(pattern: &str) -> Option<Vec<String>> {
        let hir = crate::regex_dialect::parse(pattern).unwrap();
        required_literals(&hir).map(|set| {
            set.into_iter()
                .map(|l| String::from_utf8(l).unwrap())
                .collect()
        })
    }

    #[test]
    fn a_literal_run_is_required_whole() {
        assert_eq!(
            literals(r"(?:^|/)\.ssh/id_rsa"),
            Some(vec![".ssh/id_rsa".into()])
        );
        assert_eq!(
            literals(r"\b(?:curl|wget)\b[^\n]*\|\s*sh"),
            Some(vec!["curl".into(), "wget".into()])
        );
    }

    #[test]
    fn case_folding_keeps_every_spelling_a_fold_allows() {
        // `(?i)k` also matches the Kelvin sign, which no ASCII case rule covers.
        let got = literals(r"(?i)\.kube").unwrap();
        assert!(got.contains(&".kube".to_string()), "{got:?}");
        assert!(got.contains(&".\u{212a}ube".to_string()), "{got:?}");
    }

    #[test]
    fn what_can_match_nothing_requires_nothing() {
        assert_eq!(literals(r"a*"), None);
        assert_eq!(literals(r"(?:abc)?"), None);
        assert_eq!(literals(r"^$"), None);
        assert_eq!(literals(r"abc|x*"), None);
        assert_eq!(literals(r"\S+"), None);
    }

    #[test]
    fn every_branch_contributes() {
        assert_eq!(
            literals(r"foo\d+|bar"),
            Some(vec!["bar".into(), "foo".into()])
        );
    }

    /// A random pattern over a small alphabet, so random texts match it often.
    fn random_pattern(r: &mut Rng, depth: u32) -> String {
        const ATOMS: &[&str] = &[
            "a", "b", "c", "A", "/", ".", "ab", "bca", "[ab]", "[^a]", r"\.", "[a-c]", r"\s",
            r"\b", "^", "$", ".", r"\w",
        ];
        if depth == 0 || r.below(3) == 0 {
            return ATOMS[r.below(ATOMS.len())].to_string();
        }
        match r.below(6) {
            0 | 1 => (0..2 + r.below(3))
                .map(|_| random_pattern(r, depth - 1))
                .collect(),
            2 => format!(
                "(?:{}|{})",
                random_pattern(r, depth - 1),
                random_pattern(r, depth - 1)
            ),
            3 => format!(
                "(?:{}){}",
                random_pattern(r, depth - 1),
                ["*", "+", "?", "{2}", "{1,3}", "*?"][r.below(6)]
            ),
            4 => format!("(?i:{})", random_pattern(r, depth - 1)),
            _ => format!("({})", random_pattern(r, depth - 1)),
        }
    }

    fn random_text(r: &mut Rng) -> String {
        const CHARS: &[char] = &['a', 'b', 'c', 'A', 'B', '/', '.', ' ', '\n', 'ſ', 'é'];
        (0..r.below(14))
            .map(|_| CHARS[r.below(CHARS.len())])
            .collect()
    }

    /// The property the gate relies on: whenever the pattern matches a text, one of
    /// its literals occurs in that text (ASCII case aside).
    #[test]
    fn every_match_contains_a_required_literal() {
        let r = &mut Rng(5);
        let (mut gated, mut matched) = (0, 0);
        for _ in 0..3000 {
            let pattern = random_pattern(r, 3);
            let hir = crate::regex_dialect::parse(&pattern).unwrap();
            let Some(set) = required_literals(&hir) else {
                continue;
            };
            gated += 1;
            assert!(set.iter().all(|l| !l.is_empty()), "{pattern}: {set:?}");
            let re = regex_automata::meta::Regex::builder()
                .build_from_hir(&hir)
                .unwrap();
            let gate = aho_corasick::AhoCorasick::builder()
                .ascii_case_insensitive(true)
                .build(&set)
                .unwrap();
            for _ in 0..40 {
                let text = random_text(r);
                if re.is_match(&text) {
                    matched += 1;
                    assert!(
                        gate.is_match(&text),
                        "{pattern:?} matches {text:?}, which holds none of {:?}",
                        set.iter()
                            .map(|l| String::from_utf8_lossy(l))
                            .collect::<Vec<_>>()
                    );
                }
            }
        }
        // The test means something only if many patterns had a set and matched often.
        assert!(gated > 1000 && matched > 10_000, "{gated} {matched}");
    }
}
