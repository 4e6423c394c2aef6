//! Splicing replacements into a frame: only inside JSON string tokens, every other byte kept.
//!
//! The engine finds secrets in a token's *decoded* text; [`raw_range`] maps such a
//! range back to the raw bytes that encode it (whole escapes, whole characters), and
//! [`apply`] appends the frame with those raw ranges replaced by an escaped marker. The
//! result is valid JSON whenever the input was and every edit lies inside one string
//! token, because a string's contents are replaced by well-formed string contents.

use std::ops::Range;

use super::string::{RawCursor, decode_unicode_escape, plain_run};
use super::{Frame, TextRef, Token};

/// Map a byte range of a string token's *decoded* text to the raw byte range that
/// encodes it (escapes included), so a secret written as `\u0041KIA…` is replaced whole.
///
/// The range is widened so it never splits an escape or a character: a boundary inside
/// a multi-byte character, or inside the 4 decoded bytes of a surrogate pair
/// `\ud83d\ude00`, moves outwards to take the whole character. Ranges past the end of
/// the text are clamped to it; an empty range maps to an empty raw range at a
/// character boundary. The result is absolute (an index range into `frame.raw`) and
/// always lies inside the token's raw contents. Never panics, even for a token of
/// another frame.
///
/// ```
/// use mcpwall::frame::{Frame, Limits, Parsed, redact};
/// let line = br#"{"jsonrpc":"2.0","method":"m","params":{"k":"a\u0042c"}}"#;
/// let mut parsed = Parsed::new();
/// parsed.parse(line, &Limits::default())?;
/// let frame = Frame::new(line, &parsed);
/// let value = frame.tokens().last().unwrap();
/// assert_eq!(frame.text(value.text), "aBc");
/// let raw = redact::raw_range(&frame, value, 1..2); // the "B"
/// assert_eq!(&line[raw], br"\u0042");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn raw_range(frame: &Frame<'_>, token: &Token, decoded: Range<usize>) -> Range<usize> {
    raw_range_from(frame, token, decoded, &mut RawCursor::default())
}

/// The last resume point the parser left inside `content` (one string's raw contents)
/// at or before the decoded offset `want`.
fn nearest_resume_point(
    frame: &Frame<'_>,
    content: Range<usize>,
    want: usize,
) -> Option<RawCursor> {
    let points = &frame.parsed.resume_points;
    // Points are in raw order: those of this string form one run.
    let first = points.partition_point(|p| p.at <= content.start);
    let end = first + points[first..].partition_point(|p| p.at < content.end);
    let inside = &points[first..end];
    // Within one string, decoded offsets grow with raw positions.
    let n = inside.partition_point(|p| p.offset <= want);
    n.checked_sub(1).map(|k| inside[k])
}

/// [`raw_range`], resuming the walk at `cursor` when it lies before the range (the
/// cursor must come from earlier calls for the same token) and leaving it at the
/// boundary where the range starts.
pub fn raw_range_from(
    frame: &Frame<'_>,
    token: &Token,
    decoded: Range<usize>,
    cursor: &mut RawCursor,
) -> Range<usize> {
    let content_start = (token.raw.0 as usize).min(frame.raw.len());
    let content_end = (token.raw.1 as usize).clamp(content_start, frame.raw.len());
    let want_start = decoded.start;
    let want_end = decoded.end.max(decoded.start);
    match token.text {
        TextRef::Raw { .. } => {
            // No escapes: decoded offsets are raw offsets; widen to character boundaries.
            let content = &frame.raw[content_start..content_end];
            let len = content.len();
            let mut start = want_start.min(len);
            while start > 0 && start < len && is_continuation(content[start]) {
                start -= 1;
            }
            let mut end = want_end.min(len);
            while end < len && is_continuation(content[end]) {
                end += 1;
            }
            content_start + start..content_start + end.max(start)
        }
        TextRef::Decoded { .. } => {
            // Walk the raw contents: an escape is one decoded character; a run of
            // plain bytes decodes to itself, so it is crossed in one step.
            let raw = frame.raw;
            let resumable = cursor.at > content_start
                && cursor.at <= content_end
                && cursor.offset <= want_start;
            let (mut at, mut offset) = if resumable {
                (cursor.at, cursor.offset)
            } else {
                (content_start, 0usize) // decoded offset of the byte at `at`
            };
            // The parser's nearest resume point inside this string, if it is closer.
            if let Some(p) = nearest_resume_point(frame, content_start..content_end, want_start)
                && p.at > at
            {
                (at, offset) = (p.at, p.offset);
            }
            let mut start = None;
            let mut end = content_end;
            while at < content_end {
                if offset >= want_end {
                    end = at;
                    break;
                }
                if raw[at] == b'\\' {
                    let (next, decoded_len) = next_escape(raw, at, content_end);
                    if start.is_none() && offset + decoded_len > want_start {
                        start = Some(at);
                        *cursor = RawCursor { at, offset };
                    }
                    at = next;
                    offset += decoded_len;
                    continue;
                }
                // The scanner's run finder (block compares, inline) rather than a memchr
                // call per run: on text with an escape every line the runs are short
                // (callgrind, 16 proxied responses of 1 MiB: this function 72M -> 58M
                // instructions). It also stops at a quote or control byte, which the
                // parser never leaves in a string; such a byte is stepped over as plain.
                let run_end = plain_run(&raw[..content_end], at).max(at + 1);
                let run_len = run_end - at;
                if start.is_none() && offset + run_len > want_start {
                    *cursor = RawCursor { at, offset };
                    let mut p = at + want_start.saturating_sub(offset);
                    while p > at && is_continuation(raw[p]) {
                        p -= 1;
                    }
                    start = Some(p);
                }
                if offset + run_len >= want_end {
                    let mut p = at + (want_end - offset);
                    while p < run_end && is_continuation(raw[p]) {
                        p += 1;
                    }
                    end = p;
                    break;
                }
                at = run_end;
                offset += run_len;
            }
            let start = start.unwrap_or(end).min(end);
            start..end
        }
    }
}

fn is_continuation(b: u8) -> bool {
    b & 0xC0 == 0x80
}

/// Raw index after the escape at `raw[at]` (a backslash) and its decoded length in
/// bytes. Tolerates escapes the parser would have refused (it only moves forward).
fn next_escape(raw: &[u8], at: usize, limit: usize) -> (usize, usize) {
    match raw.get(at + 1) {
        Some(b'u') => match decode_unicode_escape(raw, at) {
            Ok((c, next)) if next <= limit => (next, c.len_utf8()),
            _ => ((at + 2).min(limit), 1),
        },
        _ => ((at + 2).min(limit), 1),
    }
}

/// Append `raw` to `out` with each range in `edits` replaced by its text.
///
/// `out` is appended to, not cleared: the proxy assembles a batch answer, or several
/// lines for one writer, in one buffer. `edits` is sorted in place by start (ties: the
/// longer range first, then by text), and overlapping or adjacent ranges are merged
/// into one, which gets the replacement text of the first of them in that order.
/// Ranges past the end of `raw` are clamped and inverted ranges are read as empty; an
/// empty range inserts its text. The text is JSON-escaped (`"`, `\` and control
/// characters), so a marker like `[REDACTED: aws key "x"]` cannot end the string it
/// lands in.
///
/// The ranges must lie inside string tokens (use [`raw_range`]); then what is appended
/// is valid JSON whenever `raw` was, and every byte outside the edits is unchanged.
/// Allocates only to grow `out`.
///
/// ```
/// use mcpwall::frame::redact;
/// let raw = br#"{"a":"key=abc123","b":"x"}"#;
/// let mut edits = vec![(10..16, "[REDACTED:\"secret\"]")];
/// let mut out = Vec::new();
/// redact::apply(raw, &mut edits, &mut out);
/// assert_eq!(out, br#"{"a":"key=[REDACTED:\"secret\"]","b":"x"}"#);
/// ```
pub fn apply(raw: &[u8], edits: &mut Vec<(Range<usize>, &str)>, out: &mut Vec<u8>) {
    out.reserve(raw.len() + edits.iter().map(|(_, text)| text.len()).sum::<usize>());
    let mut copied = 0;
    for_each_merged(raw.len(), edits, |range, text| {
        out.extend_from_slice(&raw[copied..range.start]);
        push_escaped(text, out);
        copied = range.end;
    });
    out.extend_from_slice(&raw[copied..]);
}

/// What [`apply`] would replace in a `raw_len`-byte frame: the merged ranges, in order,
/// each with its JSON-escaped replacement. Lets a large frame be written out from the
/// buffer it was read into, in pieces, instead of being copied with the edits applied.
pub fn splice(
    raw_len: usize,
    edits: &mut Vec<(Range<usize>, &str)>,
) -> Vec<(Range<usize>, Vec<u8>)> {
    let mut merged = Vec::with_capacity(edits.len());
    for_each_merged(raw_len, edits, |range, text| {
        let mut escaped = Vec::with_capacity(text.len());
        push_escaped(text, &mut escaped);
        merged.push((range, escaped));
    });
    merged
}

/// The edits of [`apply`], clamped, sorted and merged: `f` gets each merged range (in
/// order, disjoint) with the text that replaces it.
fn for_each_merged<'t>(
    raw_len: usize,
    edits: &mut [(Range<usize>, &'t str)],
    mut f: impl FnMut(Range<usize>, &'t str),
) {
    for (range, _) in edits.iter_mut() {
        let start = range.start.min(raw_len);
        let end = range.end.min(raw_len).max(start);
        *range = start..end;
    }
    edits.sort_unstable_by(|a, b| {
        (a.0.start.cmp(&b.0.start))
            .then(b.0.end.cmp(&a.0.end))
            .then(a.1.cmp(b.1))
    });
    let mut i = 0;
    while i < edits.len() {
        let (ref first, text) = edits[i];
        let start = first.start;
        let mut end = first.end;
        i += 1;
        while i < edits.len() && edits[i].0.start <= end {
            end = end.max(edits[i].0.end);
            i += 1;
        }
        f(start..end, text);
    }
}

/// Append `text` as the contents of a JSON string.
fn push_escaped(text: &str, out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for &b in text.as_bytes() {
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x00..=0x1f => {
                out.extend_from_slice(b"\\u00");
                out.push(HEX[usize::from(b >> 4)]);
                out.push(HEX[usize::from(b & 0xf)]);
            }
            _ => out.push(b),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::{Limits, Parsed};

    /// A long string with escapes: mapping from the parser's resume points gives the
    /// same raw ranges as walking from the string's start, for ranges anywhere in it,
    /// in any order, with or without a cursor.
    #[test]
    fn resume_points_map_ranges_as_a_walk_from_the_start_does() {
        let mut rng = crate::test_rng::Rng(3);
        let pieces = [
            "plain text ",
            "\\\"quoted\\\"",
            "\\n",
            "\\\\",
            "\\u00e9",
            "\\ud83d\\ude00",
            "é",
            "日本",
            "x",
        ];
        let mut body = String::new();
        while body.len() < 60_000 {
            body.push_str(pieces[rng.below(pieces.len())]);
        }
        let line =
            format!(r#"{{"jsonrpc":"2.0","id":1,"result":{{"a":"short\n","text":"{body}"}}}}"#);
        let mut parsed = Parsed::new();
        parsed.parse(line.as_bytes(), &Limits::default()).unwrap();
        assert!(
            parsed.resume_points.len() > 5,
            "the string has resume points"
        );
        let mut walked = Parsed::new();
        walked.parse(line.as_bytes(), &Limits::default()).unwrap();
        walked.resume_points.clear();
        let (fast, slow) = (
            Frame::new(line.as_bytes(), &parsed),
            Frame::new(line.as_bytes(), &walked),
        );
        let token = *fast.tokens().last().unwrap();
        let len = fast.text(token.text).len();
        let mut cursor = RawCursor::default();
        let mut last = 0;
        for _ in 0..2_000 {
            // Increasing starts (as redaction asks) and random ones.
            let start = if rng.below(2) == 0 {
                last + rng.below(64)
            } else {
                rng.below(len)
            }
            .min(len);
            let range = start..(start + rng.below(40)).min(len);
            last = start;
            let want = raw_range(&slow, &token, range.clone());
            assert_eq!(raw_range(&fast, &token, range.clone()), want, "{range:?}");
            if start >= cursor.offset {
                assert_eq!(
                    raw_range_from(&fast, &token, range.clone(), &mut cursor),
                    want
                );
            }
        }
    }
}
