//! Texts a regex matches, made up from its syntax tree: the test data for overlap
//! warnings when a rule has no examples of its own ([`super::shadow::overlaps`]).
//!
//! Each sample takes one branch of every alternation (sample `k` the `k`-th, so a few
//! samples visit every branch of a small pattern), a random member of every class (a
//! printable ASCII one when the class has any: a pattern for a key id then yields a
//! random-looking key id, as a detector expects) and a repetition count near the
//! minimum. Assertions (`^`, `\b`) are left out: callers put spaces around a sample.

use regex_syntax::hir::{Class, Hir, HirKind};

/// The longest sample made; longer ones are cut off (they would match nothing useful).
const MAX_SAMPLE: usize = 4096;
/// How far past its minimum an open or wide repetition goes.
const EXTRA_REPEATS: u32 = 8;

/// `n` texts `hir` is meant to match, deterministic for a `seed`. A sample that could
/// not be completed (an empty class, one over the size cap) is left out.
pub fn samples(hir: &Hir, n: usize, seed: u64) -> Vec<String> {
    let mut out = Vec::with_capacity(n);
    for k in 0..n {
        let mut rng = Lcg(seed ^ (k as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let mut text = String::new();
        if build(hir, k, &mut rng, &mut text) && !text.is_empty() && !out.contains(&text) {
            out.push(text);
        }
    }
    out
}

struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }

    fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next() % n }
    }
}

fn build(hir: &Hir, k: usize, rng: &mut Lcg, out: &mut String) -> bool {
    if out.len() > MAX_SAMPLE {
        return false;
    }
    match hir.kind() {
        HirKind::Empty | HirKind::Look(_) => true,
        HirKind::Literal(lit) => match std::str::from_utf8(&lit.0) {
            Ok(s) => {
                out.push_str(s);
                true
            }
            Err(_) => false,
        },
        HirKind::Class(class) => match pick(class, rng) {
            Some(c) => {
                out.push(c);
                true
            }
            None => false,
        },
        HirKind::Repetition(rep) => {
            let hi = rep
                .max
                .map_or(rep.min + EXTRA_REPEATS, |m| m.min(rep.min + EXTRA_REPEATS));
            // At least once where allowed: an optional part is what a sample should show.
            let lo = if rep.min == 0 && hi > 0 { 1 } else { rep.min };
            let count = lo + rng.below(u64::from(hi - lo) + 1) as u32;
            (0..count).all(|_| build(&rep.sub, k, rng, out))
        }
        HirKind::Capture(cap) => build(&cap.sub, k, rng, out),
        HirKind::Concat(parts) => parts.iter().all(|p| build(p, k, rng, out)),
        HirKind::Alternation(branches) => build(&branches[k % branches.len()], k, rng, out),
    }
}

/// A member of `class`: printable ASCII when it has some, else any scalar value.
fn pick(class: &Class, rng: &mut Lcg) -> Option<char> {
    let ranges: Vec<(u32, u32)> = match class {
        Class::Unicode(c) => c
            .ranges()
            .iter()
            .map(|r| (r.start() as u32, r.end() as u32))
            .collect(),
        Class::Bytes(c) => c
            .ranges()
            .iter()
            .filter(|r| r.start() < 0x80)
            .map(|r| (u32::from(r.start()), u32::from(r.end().min(0x7F))))
            .collect(),
    };
    let printable: Vec<(u32, u32)> = ranges
        .iter()
        .filter_map(|&(a, b)| {
            let (a, b) = (a.max(0x21), b.min(0x7E));
            (a <= b).then_some((a, b))
        })
        .collect();
    let pool = if printable.is_empty() {
        &ranges
    } else {
        &printable
    };
    let total: u64 = pool.iter().map(|&(a, b)| u64::from(b - a) + 1).sum();
    let mut at = rng.below(total);
    for &(a, b) in pool {
        let size = u64::from(b - a) + 1;
        if at < size {
            return char::from_u32(a + at as u32).or(char::from_u32(a));
        }
        at -= size;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(pattern: &str) -> Vec<String> {
        let hir = crate::regex_dialect::parse(pattern).unwrap();
        samples(&hir, 4, 7)
    }

    #[test]
    fn every_sample_matches_its_pattern() {
        for pattern in [
            r"AKIA[0-9A-Z]{16}",
            r"-----BEGIN (RSA|OPENSSH|EC|DSA) PRIVATE KEY-----",
            r"(?i)secret\s*=\s*\w+",
            r"^[a-f0-9]{40}$",
            r"\bx+y?z*\b",
            r"é[^a-z]",
        ] {
            let re = regex::Regex::new(pattern).unwrap();
            let got = of(pattern);
            assert!(!got.is_empty(), "{pattern}");
            for s in &got {
                assert!(re.is_match(s), "{pattern}: {s:?}");
            }
        }
    }

    #[test]
    fn samples_visit_the_branches_and_look_random() {
        let got = of(r"-----BEGIN (RSA|OPENSSH|EC|DSA) PRIVATE KEY-----");
        assert_eq!(got.len(), 4, "{got:?}");
        let ids = of(r"AKIA[0-9A-Z]{16}");
        assert!(ids.iter().all(|s| s.len() == 20));
        // Not a run of one character: a detector's entropy gate would not take that.
        assert!(
            ids[0][4..]
                .chars()
                .collect::<std::collections::HashSet<_>>()
                .len()
                > 6
        );
    }
}
