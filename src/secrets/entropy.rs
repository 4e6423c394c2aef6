//! Shannon entropy of a candidate secret, judged per match.

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
