//! Splicing replacements into a frame: only inside JSON string tokens, every other byte kept.

use std::ops::Range;

use super::{Frame, Token};

/// Map a byte range of a string token's *decoded* text to the raw byte range that
/// encodes it (escapes included), so a secret written as `\u0041KIA…` is replaced whole.
pub fn raw_range(frame: &Frame<'_>, token: &Token, decoded: Range<usize>) -> Range<usize> {
    let _ = (frame, token, decoded);
    todo!("raw_range")
}

/// Write `raw` to `out` with each range in `edits` replaced by its text. The ranges must
/// lie inside string tokens; overlapping or adjacent ranges are merged (the first
/// replacement text wins). The replacement text is JSON-escaped as needed.
pub fn apply(raw: &[u8], edits: &mut Vec<(Range<usize>, &str)>, out: &mut Vec<u8>) {
    let _ = (raw, edits, out);
    todo!("apply")
}
