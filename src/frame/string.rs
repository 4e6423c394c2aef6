//! The raw contents of JSON strings, shared by the scanner ([`super::scan`]) and
//! redaction ([`super::redact`]), which do not import each other: where a run of plain
//! bytes ends, how a `\u` escape decodes, and a resumable position inside a string.

use super::run_block::{RUN_BLOCK, run_enders};
use super::{FrameError, parse_error};

/// A place inside one string's raw contents where decoding can resume: the raw index of
/// an escape or of the start of a plain run, and the decoded offset there. Mapping many
/// ranges of one long string in increasing order with one cursor costs one walk over the
/// string, not one walk per range.
#[derive(Debug, Clone, Copy, Default)]
pub struct RawCursor {
    /// Raw index (0: not set, start at the beginning of the string).
    pub at: usize,
    /// Decoded offset at `at`.
    pub offset: usize,
}

/// End of the run of plain string bytes (not `"`, `\\` or a control character) starting
/// at `i`. UTF-8 is checked by the caller; a run never ends inside a valid character
/// (continuation bytes are never below 0x80).
pub(crate) fn plain_run(raw: &[u8], mut i: usize) -> usize {
    // A block at a time: a mask of the bytes that end the run, whose lowest bit is the
    // end. Runs between escapes are short in source-like text, so the first block
    // usually decides.
    while let Some(block) = raw.get(i..i + RUN_BLOCK) {
        let ends = run_enders(block.try_into().unwrap_or(&[0; RUN_BLOCK]));
        if ends != 0 {
            return i + ends.trailing_zeros() as usize;
        }
        i += RUN_BLOCK;
    }
    // The last partial block: the slice's final RUN_BLOCK bytes, shifted so bit 0 is
    // `i`, instead of a byte-wise loop.
    let len = raw.len();
    if i >= len {
        return i;
    }
    let ends = match len.checked_sub(RUN_BLOCK) {
        Some(base) => {
            let block = raw[base..].try_into().unwrap_or(&[0; RUN_BLOCK]);
            run_enders(block) >> (i - base)
        }
        None => {
            // A frame shorter than a block: zero padding ends the run at `len`.
            let mut block = [0; RUN_BLOCK];
            block[..len - i].copy_from_slice(&raw[i..]);
            run_enders(&block)
        }
    };
    if ends == 0 {
        len
    } else {
        i + ends.trailing_zeros() as usize
    }
}

/// Decode `\uXXXX` (or a surrogate pair `\uD8xx\uDCxx`) at `raw[i]`.
pub(crate) fn decode_unicode_escape(raw: &[u8], i: usize) -> Result<(char, usize), FrameError> {
    let hi = hex4(raw, i + 2)?;
    match hi {
        0xD800..=0xDBFF => {
            if raw.get(i + 6) == Some(&b'\\') && raw.get(i + 7) == Some(&b'u') {
                let lo = hex4(raw, i + 8)?;
                if (0xDC00..=0xDFFF).contains(&lo) {
                    let cp = 0x10000 + ((u32::from(hi) - 0xD800) << 10) + (u32::from(lo) - 0xDC00);
                    let c = char::from_u32(cp)
                        .ok_or_else(|| parse_error(i, "invalid unicode escape"))?;
                    return Ok((c, i + 12));
                }
            }
            Err(parse_error(i, "lone high surrogate in a unicode escape"))
        }
        0xDC00..=0xDFFF => Err(parse_error(i, "lone low surrogate in a unicode escape")),
        _ => {
            let c = char::from_u32(u32::from(hi))
                .ok_or_else(|| parse_error(i, "invalid unicode escape"))?;
            Ok((c, i + 6))
        }
    }
}

fn hex4(raw: &[u8], at: usize) -> Result<u16, FrameError> {
    let digits = raw
        .get(at..at + 4)
        .ok_or_else(|| parse_error(at, "short unicode escape"))?;
    let mut v = 0u16;
    for &d in digits {
        let n = match d {
            b'0'..=b'9' => d - b'0',
            b'a'..=b'f' => d - b'a' + 10,
            b'A'..=b'F' => d - b'A' + 10,
            _ => return Err(parse_error(at, "invalid hex digit in a unicode escape")),
        };
        v = (v << 4) | u16::from(n);
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::plain_run;

    /// The word and block tricks agree with a byte-by-byte scan, whatever the bytes
    /// around the end of the run (high bytes and borrows included).
    #[test]
    fn plain_run_stops_at_the_first_ender() {
        let naive = |raw: &[u8], i: usize| {
            raw[i..]
                .iter()
                .position(|&b| b == b'"' || b == b'\\' || b < 0x20)
                .map_or(raw.len(), |p| i + p)
        };
        let alphabet = [
            b'a', b'"', b'\\', 0x00, 0x1f, 0x20, 0x21, 0x7f, 0x80, 0x9f, 0xa0, 0xff, b'z',
        ];
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..20_000 {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1);
            let len = (state >> 58) as usize + 1;
            let plain_prefix = (state >> 40) as usize % 80;
            let mut raw = vec![b'x'; plain_prefix];
            for k in 0..len {
                let pick = (state.rotate_left(k as u32 * 5) % alphabet.len() as u64) as usize;
                raw.push(alphabet[pick]);
            }
            let start = (state >> 20) as usize % raw.len();
            assert_eq!(
                plain_run(&raw, start),
                naive(&raw, start),
                "{raw:?} from {start}"
            );
        }
    }
}
