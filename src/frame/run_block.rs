//! The test of a block of string bytes for the end of a plain run: the frame parser's
//! one piece of `unsafe`, kept here alone (see `run_enders`).

/// Bit `k` set when `block[k]` is `"`, `\\` or below 0x20.
///
/// On x86-64 the sixteen bytes are tested in one SSE2 register: three compares and a
/// move-mask, which the compiler does not find on its own. Without it (the byte loop
/// below) a 1 MiB result cost 58% more instructions, and with the bytes tested as lanes
/// of one integer 48% more.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[inline]
pub(super) fn run_enders(block: &[u8; RUN_BLOCK]) -> u32 {
    // SAFETY: SSE2 is part of every x86-64 CPU, and the cfg above says it is enabled.
    unsafe { run_enders_sse2(block) }
}

#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[target_feature(enable = "sse2")]
fn run_enders_sse2(block: &[u8; RUN_BLOCK]) -> u32 {
    use std::arch::x86_64::{
        _mm_cmpeq_epi8, _mm_max_epu8, _mm_movemask_epi8, _mm_or_si128, _mm_set_epi64x,
        _mm_set1_epi8,
    };
    // Loaded from two integers rather than through a pointer.
    let [lo, hi] = [&block[..8], &block[8..]]
        .map(|half| i64::from_le_bytes(half.try_into().unwrap_or_default()));
    let v = _mm_set_epi64x(hi, lo);
    let quote = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'"' as i8));
    let backslash = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\\' as i8));
    // b <= 0x1f exactly when max(b, 0x1f) == 0x1f (unsigned).
    let low = _mm_set1_epi8(0x1f);
    let control = _mm_cmpeq_epi8(_mm_max_epu8(v, low), low);
    _mm_movemask_epi8(_mm_or_si128(_mm_or_si128(quote, backslash), control)) as u32
}

#[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
#[inline]
pub(super) fn run_enders(block: &[u8; RUN_BLOCK]) -> u32 {
    let mut ends = 0;
    for (k, &b) in block.iter().enumerate() {
        ends |= u32::from((b == b'"') | (b == b'\\') | (b < 0x20)) << k;
    }
    ends
}

/// Bytes tested together by [`plain_run`]: most strings of a frame are keys and short
/// values that end inside their first block.
pub(super) const RUN_BLOCK: usize = 16;

#[cfg(test)]
mod tests {
    use super::{RUN_BLOCK, run_enders};

    /// Every byte value in every lane is classified as a byte-wise test would, whatever
    /// the lanes around it hold.
    #[test]
    fn run_enders_classify_every_byte_in_every_lane() {
        for fill in [b'a', b'"', 0x00, 0x1f, 0x20, 0x7f, 0x80, 0xff] {
            for b in 0..=255u8 {
                for lane in 0..RUN_BLOCK {
                    let mut block = [fill; RUN_BLOCK];
                    block[lane] = b;
                    let want = block.iter().enumerate().fold(0u32, |m, (k, &x)| {
                        m | u32::from(x == b'"' || x == b'\\' || x < 0x20) << k
                    });
                    assert_eq!(
                        run_enders(&block),
                        want,
                        "{b:#x} in lane {lane} among {fill:#x}"
                    );
                }
            }
        }
    }
}
