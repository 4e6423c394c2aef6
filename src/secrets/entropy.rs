//! Shannon entropy of a candidate secret, judged per match.

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
