//! Shannon entropy of a candidate secret, judged per match.

/// `c * log2(c)` for the counts a secret usually has, so a match costs no logarithm
/// per distinct byte.
const C_LOG2_C_TABLE: usize = 64;

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
    if bytes.is_empty() {
        return 0.0;
    }
    // H = -Σ (c/n)·log2(c/n) = log2(n) - Σ c·log2(c) / n, summed over the distinct
    // bytes only (a secret has a few dozen of the 256).
    let mut counts = [0u32; 256];
    // One spare slot: the loop writes a byte before knowing whether it is new.
    let mut distinct = [0u8; 257];
    let mut n_distinct = 0;
    for &b in bytes {
        let c = &mut counts[b as usize];
        // Branch-free: whether a byte is new is unpredictable in a random key.
        distinct[n_distinct] = b;
        n_distinct += usize::from(*c == 0);
        *c += 1;
    }
    let table = c_log2_c();
    let sum: f64 = distinct[..n_distinct]
        .iter()
        .map(|&b| {
            let c = counts[b as usize] as usize;
            match table.get(c) {
                Some(&v) => v,
                None => {
                    let c = c as f64;
                    c * c.log2()
                }
            }
        })
        .sum();
    let n = bytes.len() as f64;
    // Clamp the rounding error of the subtraction (all bytes equal gives exactly 0).
    (n.log2() - sum / n).max(0.0)
}

fn c_log2_c() -> &'static [f64; C_LOG2_C_TABLE] {
    static TABLE: std::sync::OnceLock<[f64; C_LOG2_C_TABLE]> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        let mut t = [0.0; C_LOG2_C_TABLE];
        for (c, v) in t.iter_mut().enumerate().skip(1) {
            let c = c as f64;
            *v = c * c.log2();
        }
        t
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
    fn agrees_with_the_definition() {
        let mut state = 0x2545F4914F6CDD1Du64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for len in [1usize, 2, 3, 7, 16, 20, 40, 63, 64, 65, 100, 300, 5000] {
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
    }
}
