//! Shannon entropy of a candidate secret, judged per match.

use std::ops::Range;

/// Longest slice counted with one-byte counters and the fixed-point table; every
/// credential format but key blocks is shorter.
const SHORT: usize = u8::MAX as usize;
/// Fractional bits of the fixed-point sums.
const FIXED_ONE: f64 = (1u64 << 32) as f64;

/// Shannon entropy of `bytes` in bits per byte (0.0 for an empty slice).
///
/// A random base62 key of 40 characters scores about 5; English words about 3;
/// a placeholder such as `xxxxxxxx` scores 0.
///
/// # Example
///
/// ```
/// use mcpwall::secrets::shannon_entropy;
///
/// assert_eq!(shannon_entropy(b"aaaa"), 0.0);
/// assert_eq!(shannon_entropy(b"abcd"), 2.0);
/// ```
pub fn shannon_entropy(bytes: &[u8]) -> f64 {
    // H = -Σ (c/n)·log2(c/n) = log2(n) - Σ c·log2(c) / n over the byte counts c.
    match bytes.len() {
        0 => 0.0,
        n if n <= SHORT => short(bytes),
        _ => long(bytes),
    }
}

/// One pass that adds, as each byte's count goes from `c` to `c + 1`, the step of
/// `c·log2(c)` in fixed point. The steps telescope, so the sum is exactly that of the
/// rounded table values at the final counts; integer adds keep the loop free of the
/// floating-point add chain and of a second pass over the distinct bytes (callgrind,
/// dense 1 MiB: the entropy of ~5,400 matches was 4.1M of 27.0M instructions, about
/// 760 per match; the whole scan went to 23.7M).
fn short(bytes: &[u8]) -> f64 {
    let tables = tables();
    let mut counts = [0u8; 256];
    let mut sum = 0u64;
    for &b in bytes {
        let c = &mut counts[b as usize];
        sum += tables.step[*c as usize];
        // At most `SHORT` bytes, so a count never passes 255.
        *c += 1;
    }
    let n = bytes.len();
    // Clamp the rounding error of the subtraction (all bytes equal gives exactly 0).
    (tables.log2[n] - sum as f64 / FIXED_ONE / n as f64).max(0.0)
}

/// The entropy a secret of `len` bytes must reach under a gate of `threshold` bits per
/// byte: the threshold, or `log2(len / 2)` when that is lower.
///
/// Why: no `n`-byte value scores above `log2(n)`, and a random one scores less whenever
/// a byte repeats, which in a short value is common: under a fixed 3.0, a random
/// password of 8 characters (of 68) failed 35% of the time, one of 9 42%, of 12 0.6%
/// (`--db-password 'mkme5MmxeOOb` scores 2.86: `m` three times, `e` and `O` twice).
/// `log2(n / 2)` is the score of a value using `n / 2` distinct bytes twice each, which a
/// random value of any length beats all but about once in 10,000 draws, while fillers
/// (`xxxxxxxx`, `********`, `aaaabbbb`, `passwordpassword`) stay under it. Above
/// `2^(threshold + 1)` bytes the cap is higher than the threshold and changes nothing.
#[inline]
pub(super) fn threshold_for(threshold: f64, len: usize) -> f64 {
    let cap = if len == 0 {
        0.0
    } else if len <= SHORT {
        tables().log2[len] - 1.0
    } else if threshold <= LONG_CAP_FLOOR {
        // Past `SHORT` bytes the cap is at least `LONG_CAP_FLOOR`, above every built-in
        // gate, so no logarithm is needed. Why: a labelled value that runs on (`secret=`
        // repeated) is judged at every hit, and the 20-term `log2` was 116 instructions
        // of each (callgrind, a MiB of `secret=`: 17.6M of 231M).
        return threshold;
    } else {
        log2(len as f64) - 1.0
    };
    threshold.min(cap)
}

/// `log2(SHORT + 1) - 1`: the lowest cap of [`threshold_for`] for a secret longer than
/// [`SHORT`].
const LONG_CAP_FLOOR: f64 = 7.0;

/// Key blocks and other long matches: counts, then a pass over the distinct bytes.
fn long(bytes: &[u8]) -> f64 {
    let mut counts = [0u32; 256];
    for &b in bytes {
        counts[b as usize] += 1;
    }
    let sum: f64 = counts
        .iter()
        .filter(|&&c| c > 1)
        .map(|&c| {
            let c = f64::from(c);
            c * log2(c)
        })
        .sum();
    let n = bytes.len() as f64;
    (log2(n) - sum / n).max(0.0)
}

/// `log2(x)` for `x >= 1`, to within a few ulps, without libm: the exponent plus
/// `log2` of the mantissa `m` in [1, 2), as `2·atanh(s)/ln 2` with `s = (m-1)/(m+1)`
/// below 1/3, whose series has converged past `f64` precision after 20 terms.
/// Entropy was mcpwall's only use of libm; without it the dynamic linker loads one
/// library fewer and about 0.4 MiB less of it is resident.
fn log2(x: f64) -> f64 {
    debug_assert!(x >= 1.0 && x.is_finite());
    let bits = x.to_bits();
    let exponent = ((bits >> 52) & 0x7ff) as i64 - 1023;
    let mantissa = f64::from_bits((bits & ((1 << 52) - 1)) | (1023 << 52));
    let s = (mantissa - 1.0) / (mantissa + 1.0);
    let s2 = s * s;
    let (mut term, mut sum) = (s, 0.0);
    for k in 0..20 {
        sum += term / f64::from(2 * k + 1);
        term *= s2;
    }
    exponent as f64 + 2.0 * sum * std::f64::consts::LOG2_E
}

/// Secrets at least this long are judged by a [`RunningEntropy`]; shorter ones are
/// counted afresh, which costs less than moving counts.
const RUNNING_MIN: usize = 64;
/// Entries of the table of `log2` over the mantissa (see [`fast_log2`]).
const MANTISSA_BITS: u32 = 12;
/// A bound on how far the entropy moved is used only while the counts differ from those
/// it was computed for by at most this share (past it the bound is too loose to decide).
const MAX_DRIFT: f64 = 0.25;
/// Added to every bound: the error of the computed entropies ([`fast_log2`], summing).
const SLACK: f64 = 1e-6;

/// The entropy gate of the successive secrets of one detector within one scan.
///
/// Why: on a run made of one keyword repeated (`token=token=…`), every keyword hit
/// yields a secret that ends where the run ends and starts a few bytes after the last
/// one. Counting each afresh cost the square of the run's length. Here the byte counts
/// of the last secret are kept and moved to the next one (bytes counted in at its end,
/// out at its start), so a scan counts each byte in and out at most once per detector
/// while the secrets move forward, and afresh only when one does not.
///
/// Moving a count is an increment; the entropy itself (a logarithm per distinct byte) is
/// computed only when the gate's last answer may have changed: moving `k` of `n` bytes
/// changes the distribution by at most about `k/n` in total variation, which bounds the
/// change of its entropy (Audenaert's sharp Fannes inequality: `δ·log2(255) + h2(δ)`
/// over 256 symbols; see [`Anchor::new`]). On a long run whose entropy is well below (or
/// above) the threshold, one computation decides thousands of hits. Callgrind, a MiB of
/// `token=`: the gate cost 950 instructions per hit with a fixed-point sum kept up to
/// date (two logarithms per byte moved), and costs an increment per byte moved and a
/// comparison per hit now.
#[derive(Debug, Default)]
pub(super) struct RunningEntropy {
    /// The scan the counts belong to (another scan is another text).
    scan: u64,
    /// The bytes counted.
    range: Range<usize>,
    counts: Option<Box<[u32; 256]>>,
    /// The bytes whose count is not zero, one bit each.
    present: [u64; 4],
    /// The last entropy computed from the counts, and how they moved since.
    anchor: Option<Anchor>,
}

/// An entropy computed exactly, the gate's answer for it, and how many bytes may be
/// moved before that answer is in doubt.
#[derive(Debug, Clone, Copy)]
struct Anchor {
    threshold: f64,
    passes: bool,
    /// Bytes counted out plus bytes counted in since the entropy was computed.
    moved: usize,
    /// The answer holds while `moved` is at most this.
    allowed: usize,
}

impl Anchor {
    /// The anchor of an entropy `entropy` computed over `len` bytes, for `threshold`.
    ///
    /// Moving `m` bytes (out of the `len` counted, or in) changes the distribution by at
    /// most `δ = m/(len - m)` in total variation (each step moves at most that much
    /// probability mass), and so its entropy by at most `δ·log2(255) + h2(δ)`, with
    /// `h2(δ) <= δ·(log2(1/δ) + log2(e))` and `log2(1/δ) <= log2(len)` for every `δ`
    /// at which one byte may move (`δ >= 1/len`). The answer holds while that stays
    /// below the distance between the entropy and the threshold.
    fn new(entropy: f64, len: usize, threshold: f64) -> Anchor {
        let gap = (entropy - threshold).abs() - 2.0 * SLACK;
        let per_delta =
            LOG2_255 + std::f64::consts::LOG2_E + fast_log2(len as u64, mantissa_logs()) + SLACK;
        let delta = (gap / per_delta).min(MAX_DRIFT);
        let allowed = if delta > 0.0 {
            (delta * len as f64 / (1.0 + delta)) as usize
        } else {
            0
        };
        Anchor {
            threshold,
            passes: entropy >= threshold,
            moved: 0,
            allowed,
        }
    }
}

/// `log2(255)`, rounded up.
const LOG2_255: f64 = 7.994_353_436_858_86;

impl RunningEntropy {
    /// Shannon entropy of `text[secret]`, in bits per byte (as [`shannon_entropy`], to
    /// within 1e-7 for secrets of [`RUNNING_MIN`] bytes or more).
    /// With `float`, a short secret is counted in `f64` (the plain form the bench
    /// measures the fixed-point table against).
    #[cfg(test)]
    pub fn of(&mut self, text: &[u8], secret: Range<usize>, scan: u64, float: bool) -> f64 {
        if secret.len() < RUNNING_MIN {
            return short_or_long(&text[secret], float);
        }
        self.slide(text, secret, scan);
        self.compute()
    }

    /// Whether the entropy of `text[secret]` is at least `threshold`: as
    /// `shannon_entropy(&text[secret]) >= threshold`, except for an entropy within 1e-6
    /// of the threshold, where either answer may come.
    pub fn passes(
        &mut self,
        text: &[u8],
        secret: Range<usize>,
        scan: u64,
        float: bool,
        threshold: f64,
    ) -> bool {
        if secret.len() < RUNNING_MIN {
            return short_or_long(&text[secret], float) >= threshold;
        }
        self.slide(text, secret, scan);
        if let Some(anchor) = self.anchor
            && anchor.threshold == threshold
            && anchor.moved <= anchor.allowed
        {
            return anchor.passes;
        }
        let entropy = self.compute();
        self.anchor = Some(Anchor::new(entropy, self.range.len(), threshold));
        entropy >= threshold
    }

    /// Moves the counts to `text[secret]` (or counts it afresh).
    fn slide(&mut self, text: &[u8], secret: Range<usize>, scan: u64) {
        let counts = self.counts.get_or_insert_with(|| Box::new([0; 256]));
        let slides = self.scan == scan
            && self.range.start <= secret.start
            && secret.start <= self.range.end
            && self.range.end <= secret.end;
        if !slides {
            counts.fill(0);
            self.present = [0; 4];
            self.anchor = None;
            self.range = secret.start..secret.start;
            self.scan = scan;
        }
        let added = &text[self.range.end..secret.end];
        for &b in added {
            let c = &mut counts[usize::from(b)];
            if *c == 0 {
                self.present[usize::from(b >> 6)] |= 1 << (b & 63);
            }
            *c += 1;
        }
        let removed = &text[self.range.start..secret.start];
        for &b in removed {
            let c = &mut counts[usize::from(b)];
            *c -= 1;
            if *c == 0 {
                self.present[usize::from(b >> 6)] &= !(1 << (b & 63));
            }
        }
        if let Some(anchor) = &mut self.anchor {
            anchor.moved += removed.len() + added.len();
        }
        self.range = secret;
    }

    /// The entropy of the counted bytes, computed from the counts (one logarithm per
    /// distinct byte).
    fn compute(&self) -> f64 {
        let counts = self.counts.as_deref().expect("counted before computing");
        let table = mantissa_logs();
        let mut sum = 0.0;
        for (word, &bits) in self.present.iter().enumerate() {
            let mut bits = bits;
            while bits != 0 {
                let b = word * 64 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                let c = counts[b];
                if c > 1 {
                    sum += f64::from(c) * fast_log2(u64::from(c), table);
                }
            }
        }
        let len = self.range.len();
        (fast_log2(len as u64, table) - sum / len as f64).max(0.0)
    }
}

/// A secret under [`RUNNING_MIN`] bytes, counted afresh.
fn short_or_long(bytes: &[u8], float: bool) -> f64 {
    if float || bytes.len() > SHORT {
        long(bytes)
    } else {
        shannon_entropy(bytes)
    }
}

/// `log2(x)` for `x >= 1`: the exponent, plus the table's value for the top bits of the
/// mantissa, interpolated over the rest (within 2e-8; exact table values when `x` has
/// at most 13 significant bits).
#[inline]
fn fast_log2(x: u64, table: &[f64]) -> f64 {
    debug_assert!(x >= 1);
    let bits = (x as f64).to_bits();
    let exponent = ((bits >> 52) & 0x7ff) as i64 - 1023;
    let mantissa = bits & ((1 << 52) - 1);
    let index = (mantissa >> (52 - MANTISSA_BITS)) as usize;
    let rest_bits = 52 - MANTISSA_BITS;
    let rest = (mantissa & ((1 << rest_bits) - 1)) as f64 / (1u64 << rest_bits) as f64;
    exponent as f64 + table[index] + rest * (table[index + 1] - table[index])
}

/// `log2(1 + j / 2^MANTISSA_BITS)` for `j` in `0..=2^MANTISSA_BITS` (32 KiB, built the
/// first time a long secret is judged).
fn mantissa_logs() -> &'static [f64] {
    static TABLE: std::sync::OnceLock<Box<[f64]>> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        let n = 1usize << MANTISSA_BITS;
        (0..=n).map(|j| log2(1.0 + j as f64 / n as f64)).collect()
    })
}

struct Tables {
    /// `T(c + 1) - T(c)` where `T(c) = round(c·log2(c)·2^32)`.
    step: [u64; SHORT],
    /// `log2(n)`.
    log2: [f64; SHORT + 1],
}

fn tables() -> &'static Tables {
    static TABLES: std::sync::OnceLock<Tables> = std::sync::OnceLock::new();
    TABLES.get_or_init(|| {
        let fixed = |c: usize| {
            let c = c as f64;
            if c < 2.0 {
                0
            } else {
                (c * log2(c) * FIXED_ONE).round() as u64
            }
        };
        let mut step = [0; SHORT];
        for (c, s) in step.iter_mut().enumerate() {
            *s = fixed(c + 1) - fixed(c);
        }
        // Index 0 is never read: an empty slice returns before the table.
        let mut logs = [0.0; SHORT + 1];
        for (n, l) in logs.iter_mut().enumerate().skip(1) {
            *l = log2(n as f64);
        }
        Tables { step, log2: logs }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The textbook definition, one logarithm per distinct byte.
    fn reference(bytes: &[u8]) -> f64 {
        let mut counts = [0u32; 256];
        for &b in bytes {
            counts[b as usize] += 1;
        }
        let n = bytes.len() as f64;
        counts
            .iter()
            .filter(|&&c| c > 0)
            .map(|&c| {
                let p = f64::from(c) / n;
                -p * p.log2()
            })
            .sum()
    }

    #[test]
    fn running_entropy_agrees_with_counting_afresh() {
        let mut state = 0x2545F4914F6CDD1Du64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let text: Vec<u8> = (0..20_000)
            .map(|i| match (i / 3000) % 3 {
                0 => b"token="[i % 6],
                1 => (next() % 64) as u8 + b'0',
                _ => (next() % 3) as u8 + b'a',
            })
            .collect();
        let mut running = RunningEntropy::default();
        for scan in 0..3 {
            // Secrets moving forward to a common end, then jumps back and forth.
            let mut start = 0;
            while start + 10 < text.len() {
                let end = if scan == 2 {
                    (start + 10 + (next() as usize % 5000)).min(text.len())
                } else {
                    text.len() - (next() as usize % 3) * scan as usize
                };
                let got = running.of(&text, start..end, scan, false);
                let want = reference(&text[start..end]);
                assert!((got - want).abs() < 1e-7, "{start}..{end}: {got} vs {want}");
                start += 1 + next() as usize % 700;
            }
        }
    }

    /// The gate decided from bounds gives the answer of the exact entropy, on runs whose
    /// entropy sits well below, well above and close to the threshold.
    #[test]
    fn bounded_gate_agrees_with_the_exact_entropy() {
        let mut rng = crate::test_rng::Rng(0x5DEE_CE66_D1CE_4E5B);
        let mut next = move || rng.next();
        for round in 0..12u64 {
            let alphabet = [3u64, 6, 9, 12, 20, 64][round as usize % 6];
            let len = 400 + (next() % 6000) as usize;
            let text: Vec<u8> = (0..len)
                .map(|i| match (i / (50 + round as usize * 40)) % 3 {
                    0 => b"token="[i % 6],
                    _ => (next() % alphabet) as u8 + b'0',
                })
                .collect();
            for threshold in [1.0, 2.5, 2.6, 3.0, 3.2, 4.0, 5.5] {
                let mut running = RunningEntropy::default();
                let mut start = 0;
                while start + 64 < text.len() {
                    let end = text.len() - (next() % 2) as usize * (next() % 64) as usize;
                    let end = end.max(start + 64);
                    let want = reference(&text[start..end]);
                    let got = running.passes(&text, start..end, round, false, threshold);
                    if (want - threshold).abs() > 1e-6 {
                        assert_eq!(
                            got,
                            want >= threshold,
                            "{start}..{end} of {len}, threshold {threshold}: entropy {want}"
                        );
                    }
                    start += 1 + (next() % 9) as usize;
                }
            }
        }
    }

    #[test]
    fn a_short_secret_is_held_to_what_its_length_can_score() {
        assert_eq!(threshold_for(3.0, 8), 2.0);
        assert!((threshold_for(3.0, 12) - (6f64).log2()).abs() < 1e-12);
        assert_eq!(threshold_for(3.0, 16), 3.0);
        assert_eq!(threshold_for(3.0, 40), 3.0);
        assert!((threshold_for(7.5, 300) - 150f64.log2()).abs() < 1e-12);
        // The long branch's shortcut agrees with the cap it skips.
        assert_eq!(threshold_for(7.0, 256), 7.0);
        assert_eq!(threshold_for(4.5, 1 << 20), 4.5);
        assert_eq!(threshold_for(2.5, 0), 0.0);
        // What it is for: a random value of its length clears it, fillers do not.
        for (value, passes) in [
            (&b"mkme5MmxeOOb"[..], true),
            (b"hunter22", true),
            (b"xxxxxxxx", false),
            (b"aaaabbbb", false),
            (b"********", false),
            (b"passwordpassword", false),
        ] {
            assert_eq!(
                shannon_entropy(value) >= threshold_for(3.0, value.len()),
                passes,
                "{}",
                String::from_utf8_lossy(value)
            );
        }
    }

    #[test]
    fn log2_agrees_with_libm() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut samples: Vec<f64> = (1..5000).map(f64::from).collect();
        for _ in 0..10_000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            samples.push(1.0 + (state >> 11) as f64 / (1u64 << 20) as f64);
        }
        for x in samples {
            let (ours, std) = (log2(x), x.log2());
            assert!(
                (ours - std).abs() <= 4.0 * f64::EPSILON * std.max(1.0),
                "{x}: {ours} vs {std}"
            );
        }
        for k in 0..63 {
            assert_eq!(log2((1u64 << k) as f64), f64::from(k));
        }
    }

    #[test]
    fn agrees_with_the_definition() {
        let mut state = 0x2545F4914F6CDD1Du64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for len in [
            1usize, 2, 3, 7, 16, 20, 40, 63, 64, 65, 100, 254, 255, 256, 300, 5000,
        ] {
            for alphabet in [1u64, 2, 4, 16, 62, 256] {
                let bytes: Vec<u8> = (0..len).map(|_| (next() % alphabet) as u8).collect();
                let (fast, slow) = (shannon_entropy(&bytes), reference(&bytes));
                assert!(
                    (fast - slow).abs() < 1e-9,
                    "{len} {alphabet}: {fast} vs {slow}"
                );
            }
        }
        assert_eq!(shannon_entropy(b""), 0.0);
        assert_eq!(shannon_entropy(b"aaaa"), 0.0);
        assert_eq!(shannon_entropy(&[7; 1000]), 0.0);
        assert_eq!(shannon_entropy(b"abcd"), 2.0);
        assert_eq!(shannon_entropy(b"aabb"), 1.0);
        // The longest slice of the fixed-point path: one byte 255 times.
        assert!(shannon_entropy(&[7; 255]) < 1e-9);
        let all: Vec<u8> = (0..=254).collect();
        assert!((shannon_entropy(&all) - 255f64.log2()).abs() < 1e-9);
    }
}
