//! Secrets that are not written out: base64 text (an MCP resource's `blob`, a file read as
//! media, a `data:` URL, a base64 run in any text), and the body of a private key whose
//! header is missing (the output of `tail` on a key file).
//!
//! A base64 run of at least [`MIN_RUN`] characters is decoded and the decoded text is
//! scanned by the same detectors (one level: what the decoded text encodes again is not
//! decoded). A finding there marks the whole run, since a redaction can only cut the
//! encoded text, and any part of a run left in place decodes to part of the secret.
//! Decoding costs a pass over each run and a buffer of three quarters of its length,
//! so a scan stays linear in its text.
//!
//! Runs of at least [`MIN_REPORTED_RUN`] characters are found ([`RunFinder`]) and
//! reported; only those of [`MIN_RUN`] and more are decoded. The shorter ones may be the
//! rest of a token cut inside its keyword (`split::keyword_cut_before`).

use std::ops::Range;

/// Shortest base64 run that is decoded: 18 bytes of decoded text, as short as a labelled
/// credential gets (`key=` and an AWS key id of 20 characters is 32 characters encoded).
pub(super) const MIN_RUN: usize = 24;
/// Shortest run reported: the rest of the shortest whole token (an AWS key id, 20
/// characters) cut after the third byte of its keyword.
pub(super) const MIN_REPORTED_RUN: usize = 17;
/// A line break continues a run only after a line at least this long: base64 wrapped for
/// PEM (64) or MIME (76), not a column of short words.
const MIN_WRAPPED_LINE: usize = 48;

/// The 6-bit value of each base64 character (standard and URL-safe alphabets), or
/// [`NOT_BASE64`].
const fn decode_table() -> [u8; 256] {
    let mut t = [NOT_BASE64; 256];
    let mut i = 0;
    while i < 26 {
        t[b'A' as usize + i] = i as u8;
        t[b'a' as usize + i] = 26 + i as u8;
        i += 1;
    }
    let mut d = 0;
    while d < 10 {
        t[b'0' as usize + d] = 52 + d as u8;
        d += 1;
    }
    t[b'+' as usize] = 62;
    t[b'-' as usize] = 62;
    t[b'/' as usize] = 63;
    t[b'_' as usize] = 63;
    t
}

const NOT_BASE64: u8 = 0xFF;
static DECODE: [u8; 256] = decode_table();

#[inline]
fn is_base64(b: u8) -> bool {
    DECODE[usize::from(b)] != NOT_BASE64
}

/// How a run found by [`for_each_run`] is worth reading.
#[derive(Debug, Clone, Copy)]
pub(super) struct RunKind {
    /// Enough capital letters to be base64 of something.
    pub base64: bool,
    /// Hex digits only.
    pub hex: bool,
    /// At least [`MIN_RUN`] characters.
    pub long: bool,
}

impl RunKind {
    /// Worth decoding: long enough, and base64 of something or hex.
    pub fn decodable(self) -> bool {
        self.long && (self.base64 || self.hex)
    }
}

/// How the runs of a text are found. Both find the same runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum RunFinder {
    /// 32 bytes classified at a time, and the windows of [`MIN_REPORTED_RUN`] base64
    /// characters found in the masks: a word costs nothing, only a run is widened.
    #[cfg(target_arch = "x86_64")]
    Avx2,
    /// A probe every [`MIN_REPORTED_RUN`] bytes: every run that long holds one, and a
    /// probe on a base64 character is widened to its word, so ordinary prose costs a look
    /// at one byte in 17 and a word's length around each probe that lands on a letter.
    Portable,
}

impl RunFinder {
    /// The fastest finder this CPU runs.
    pub(super) fn detect() -> RunFinder {
        #[cfg(target_arch = "x86_64")]
        if is_x86_feature_detected!("avx2") {
            return RunFinder::Avx2;
        }
        RunFinder::Portable
    }

    /// The start of the first run of at least [`MIN_REPORTED_RUN`] base64 characters that
    /// is not before `from` (a run that began before `from` starts there).
    fn next_run(self, text: &[u8], from: usize) -> Option<usize> {
        match self {
            #[cfg(target_arch = "x86_64")]
            RunFinder::Avx2 => {
                // SAFETY: `detect` chose this finder only on a CPU with AVX2, which is
                // all `next_window` needs: it reads `text` through safe slices.
                unsafe { avx2::next_window(text, from) }
            }
            RunFinder::Portable => next_run_by_probes(text, from),
        }
    }
}

/// [`RunFinder::Portable`].
fn next_run_by_probes(text: &[u8], from: usize) -> Option<usize> {
    let mut probe = from + MIN_REPORTED_RUN - 1;
    let mut floor = from;
    while probe < text.len() {
        if !is_base64(text[probe]) {
            probe += MIN_REPORTED_RUN;
            continue;
        }
        let mut start = probe;
        while start > floor && is_base64(text[start - 1]) {
            start -= 1;
        }
        // Most probes land in a word: find its end before anything else.
        let mut end = probe + 1;
        while end < text.len() && end - start < MIN_REPORTED_RUN && is_base64(text[end]) {
            end += 1;
        }
        if end - start >= MIN_REPORTED_RUN {
            return Some(start);
        }
        floor = end;
        probe = end + MIN_REPORTED_RUN - 1;
    }
    None
}

/// Calls `f(run, kind)` for every base64 run of at least [`MIN_REPORTED_RUN`] characters in
/// `text`, in order; a run includes its `=` padding and the line breaks of wrapped base64.
/// Runs not worth decoding (short ones, paths, identifiers: see [`RunKind`]) are reported
/// too, as the rest of a token cut inside its keyword may be one
/// (`split::keyword_cut_before`).
pub(super) fn for_each_run(
    text: &[u8],
    finder: RunFinder,
    mut f: impl FnMut(Range<usize>, RunKind),
) {
    let mut done = 0;
    // A segment shorter than a run cannot begin wrapped base64 (its lines are longer),
    // and an earlier line of a wrapped run is found first.
    while let Some(start) = finder.next_run(text, done) {
        let (end, chars, upper, hex) = run_end(text, start);
        // Base64 of text is about a fifth capital letters or more (the first character
        // of nearly every group of four is), of random bytes two fifths: a run with
        // fewer is a path or an identifier (`/home/user/project/src`, `snake_case_name`),
        // not worth decoding. A run of hex digits only is kept: it may be hex of a token.
        let kind = RunKind {
            // A run with no small letter at all is not base64 of anything either: base64
            // of text or of random bytes holds them everywhere (of random bytes, 24
            // characters without one: 4 in a million). Capitals and digits alone are a
            // near-miss key id repeated (`AKIAAKIA…`) or base32, read as they are written.
            // Looked for only in a run with enough capitals (the first small letter
            // ends the look), not counted over every run.
            base64: upper * 8 >= chars && text[start..end].iter().any(u8::is_ascii_lowercase),
            hex: hex == chars,
            long: chars >= MIN_RUN,
        };
        f(start..end, kind);
        // The next run starts at `end` at the earliest (after padding, a base64
        // character may follow).
        done = end;
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    use super::MIN_REPORTED_RUN;

    /// Bytes classified at a time.
    const BLOCK: usize = 32;

    /// Which bytes of `block` are base64 characters, as bits. A byte is one when the
    /// class of its low nibble and the class of its high nibble share a bit: high nibble
    /// 2 (`+`, `-`, `/`), 3 (digits), 4 and 6 (letters from `A`/`a`), 5 (letters from
    /// `P`, and `_`), 7 (letters from `p`); bytes from 0x80 have none.
    #[target_feature(enable = "avx2")]
    pub(super) fn base64_mask(block: &[u8; BLOCK]) -> u32 {
        const SIGN: i8 = 1;
        const DIGIT: i8 = 2;
        const FROM_A: i8 = 4;
        const FROM_P: i8 = 8;
        const FROM_SMALL_P: i8 = 16;
        const LETTER: i8 = FROM_A | FROM_P | FROM_SMALL_P;
        // Per low nibble, the high-nibble classes it completes (0 to 9: digits and
        // letters but `@` and `` ` ``; A: `Z`, `z`, `J`, `j`; B, D, F: `+`, `-`, `/`;
        // F: `_`, and `O`, `o`, but not DEL).
        let by_low = _mm256_broadcastsi128_si256(_mm_setr_epi8(
            DIGIT | FROM_P | FROM_SMALL_P,
            DIGIT | LETTER,
            DIGIT | LETTER,
            DIGIT | LETTER,
            DIGIT | LETTER,
            DIGIT | LETTER,
            DIGIT | LETTER,
            DIGIT | LETTER,
            DIGIT | LETTER,
            DIGIT | LETTER,
            LETTER,
            FROM_A | SIGN,
            FROM_A,
            FROM_A | SIGN,
            FROM_A,
            FROM_A | FROM_P | SIGN,
        ));
        let by_high = _mm256_broadcastsi128_si256(_mm_setr_epi8(
            0,
            0,
            SIGN,
            DIGIT,
            FROM_A,
            FROM_P,
            FROM_A,
            FROM_SMALL_P,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
        ));
        // Four lanes read from the array (the compiler makes them one load): no pointer,
        // so no `unsafe`.
        let (lanes, _) = block.as_chunks::<8>();
        let lane = |i: usize| i64::from_le_bytes(lanes[i]);
        let bytes = _mm256_setr_epi64x(lane(0), lane(1), lane(2), lane(3));
        let nibble = _mm256_set1_epi8(0x0F);
        let low = _mm256_shuffle_epi8(by_low, _mm256_and_si256(bytes, nibble));
        let high = _mm256_shuffle_epi8(
            by_high,
            _mm256_and_si256(_mm256_srli_epi16(bytes, 4), nibble),
        );
        let none = _mm256_cmpeq_epi8(_mm256_and_si256(low, high), _mm256_setzero_si256());
        !(_mm256_movemask_epi8(none) as u32)
    }

    /// The block of `text` at `at`, which must hold one.
    fn block(text: &[u8], at: usize) -> &[u8; BLOCK] {
        text[at..at + BLOCK]
            .try_into()
            .expect("a block lies inside the text")
    }

    /// Bit `j` set when bits `j..j + MIN_REPORTED_RUN` of `mask` all are.
    fn window_starts(mask: u64) -> u64 {
        const _: () = assert!(MIN_REPORTED_RUN == 17);
        let two = mask & (mask >> 1);
        let four = two & (two >> 2);
        let eight = four & (four >> 4);
        let sixteen = eight & (eight >> 8);
        sixteen & (mask >> 16)
    }

    /// [`super::RunFinder::next_run`]: the start of the first window of
    /// [`MIN_REPORTED_RUN`] base64 characters at or after `from`.
    #[target_feature(enable = "avx2")]
    pub(super) fn next_window(text: &[u8], from: usize) -> Option<usize> {
        let mut at = from;
        if at + 2 * BLOCK <= text.len() {
            let mut this = base64_mask(block(text, at));
            while at + 2 * BLOCK <= text.len() {
                let next = base64_mask(block(text, at + BLOCK));
                // Windows starting in this block end at most 16 bytes into the next.
                let starts = window_starts(u64::from(this) | (u64::from(next) << 32)) as u32;
                if starts != 0 {
                    return Some(at + starts.trailing_zeros() as usize);
                }
                this = next;
                at += BLOCK;
            }
        }
        // The last bytes, fewer than two blocks (all of most short strings), padded with
        // zeros: not base64, so no window runs past the text's end.
        let rest = &text[at.min(text.len())..];
        if rest.len() < MIN_REPORTED_RUN {
            return None;
        }
        let mut padded = [0u8; 2 * BLOCK];
        padded[..rest.len()].copy_from_slice(rest);
        let mask = u64::from(base64_mask(block(&padded, 0)))
            | (u64::from(base64_mask(block(&padded, BLOCK))) << 32);
        let starts = window_starts(mask);
        (starts != 0).then(|| at + starts.trailing_zeros() as usize)
    }
}

/// The end of the run starting at `start` (after its padding), how many base64
/// characters it holds, how many of those are capital letters and how many hex digits.
fn run_end(text: &[u8], start: usize) -> (usize, usize, usize, usize) {
    let mut at = start;
    let mut chars = 0;
    let mut upper = 0;
    let mut hex = 0;
    let mut line = 0;
    loop {
        let segment = at;
        while at < text.len() && is_base64(text[at]) {
            upper += usize::from(text[at].is_ascii_uppercase());
            hex += usize::from(text[at].is_ascii_hexdigit());
            at += 1;
        }
        line += at - segment;
        chars += at - segment;
        let mut end = at;
        while end < text.len() && text[end] == b'=' && end - at < 2 {
            end += 1;
        }
        // Wrapped base64 goes on after a long line's break.
        let mut next = end;
        if next < text.len() && text[next] == b'\r' {
            next += 1;
        }
        let wrapped = line >= MIN_WRAPPED_LINE
            && end == at
            && next < text.len()
            && text[next] == b'\n'
            && text.get(next + 1).is_some_and(|&b| is_base64(b));
        if !wrapped {
            return (end, chars, upper, hex);
        }
        at = next + 1;
        line = 0;
    }
}

/// Decodes the run `text[run]` into `out` (cleared first), as text a detector can scan:
/// bytes outside ASCII become spaces (credentials are ASCII, and the scan needs UTF-8).
/// Trailing bits that do not make a byte are dropped.
// Not inlined: inlined into the run finder, it slowed the finder on ordinary text.
#[inline(never)]
pub(super) fn decode_into(text: &[u8], run: Range<usize>, out: &mut String) {
    out.clear();
    let mut bytes = std::mem::take(out).into_bytes();
    bytes.reserve(run.len() / 4 * 3 + 3);
    let (mut acc, mut bits) = (0u32, 0u32);
    let src = &text[run];
    let mut at = 0;
    // Whole groups of four characters at a byte boundary give three bytes at once (a
    // byte at a time cost twice as much, on every run of a text made of letters).
    while at + 4 <= src.len() {
        let v = [0, 1, 2, 3].map(|i| DECODE[usize::from(src[at + i])]);
        if v.contains(&NOT_BASE64) {
            break;
        }
        let group = v.iter().fold(0u32, |n, &x| (n << 6) | u32::from(x));
        // Without a branch: on random bytes, half are not ASCII, and a branch per byte
        // was mispredicted at half of them (twice the time of the whole decoding).
        let ascii = |byte: u8| {
            let high = 0u8.wrapping_sub(byte >> 7);
            (byte & !high) | (b' ' & high)
        };
        bytes.extend_from_slice(&[
            ascii((group >> 16) as u8),
            ascii((group >> 8) as u8),
            ascii(group as u8),
        ]);
        at += 4;
    }
    for &b in &src[at..] {
        let v = DECODE[usize::from(b)];
        if v == NOT_BASE64 {
            continue;
        }
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            let byte = (acc >> bits) as u8;
            bytes.push(if byte.is_ascii() { byte } else { b' ' });
        }
    }
    // Every byte is ASCII.
    *out = String::from_utf8(bytes).unwrap_or_default();
}

/// Decodes `text[run]` as hex into `out` (cleared first) when the run is hex digits only
/// (line breaks aside), an even number of them: a provider token written as hex (`ghp_…`
/// is `6768705f…`). Bytes outside ASCII become spaces, as for base64. `false`, and `out`
/// left empty, for any other run.
pub(super) fn decode_hex_into(text: &[u8], run: Range<usize>, out: &mut String) -> bool {
    out.clear();
    let src = &text[run];
    // Hex of a token is hex of printable ASCII and line breaks: every byte's high digit is
    // 0 or 2 to 7. A hash or an id (a git SHA) fails this within its first bytes, and is
    // not decoded.
    let printable = src
        .iter()
        .filter(|b| !matches!(b, b'\n' | b'\r'))
        .step_by(2)
        .take(8)
        .all(|b| *b == b'0' || (b'2'..=b'7').contains(b));
    if !printable {
        return false;
    }
    let digits = src.iter().filter(|b| !matches!(b, b'\n' | b'\r')).count();
    if digits % 2 != 0
        || !src
            .iter()
            .all(|b| b.is_ascii_hexdigit() || matches!(b, b'\n' | b'\r'))
    {
        return false;
    }
    let mut bytes = std::mem::take(out).into_bytes();
    let mut high: Option<u8> = None;
    for &b in src {
        let Some(v) = (b as char).to_digit(16) else {
            continue;
        };
        match high.take() {
            None => high = Some(v as u8),
            Some(h) => {
                let byte = (h << 4) | v as u8;
                bytes.push(if byte.is_ascii() { byte } else { b' ' });
            }
        }
    }
    // Every byte is ASCII.
    *out = String::from_utf8(bytes).unwrap_or_default();
    true
}

/// The range of a private key's body whose `-----END … PRIVATE KEY-----` line starts at
/// `end_line` and has no header above it: the base64 lines of a key's width (40 to 80
/// characters, the last one shorter) right above, through the end of the footer. `None`
/// when no such line is there.
pub(super) fn headless_key_body(text: &[u8], end_line: usize) -> Option<Range<usize>> {
    let footer_end = footer_end(text, end_line)?;
    // Walk up line by line while the line above is base64 of a key's width.
    let mut start = end_line;
    let mut full_lines = 0;
    let mut last = true;
    while start > 0 && text[start - 1] == b'\n' {
        let line_end = if start >= 2 && text[start - 2] == b'\r' {
            start - 2
        } else {
            start - 1
        };
        let mut line_start = line_end;
        while line_start > 0 && (is_base64(text[line_start - 1]) || text[line_start - 1] == b'=') {
            line_start -= 1;
        }
        let len = line_end - line_start;
        let at_line_start = line_start == 0 || text[line_start - 1] == b'\n';
        let fits = if last {
            (4..=80).contains(&len)
        } else {
            (40..=80).contains(&len)
        };
        if !at_line_start || !fits {
            break;
        }
        if len >= 40 {
            full_lines += 1;
        }
        start = line_start;
        last = false;
    }
    (full_lines >= 1).then_some(start..footer_end)
}

/// The end of a `-----END [ A-Z0-9]*PRIVATE KEY-----` footer starting at `at`.
fn footer_end(text: &[u8], at: usize) -> Option<usize> {
    const OPEN: &[u8] = b"-----END ";
    let rest = text.get(at..)?.strip_prefix(OPEN)?;
    let label = rest
        .iter()
        .take_while(|&&b| b == b' ' || b.is_ascii_uppercase() || b.is_ascii_digit())
        .count();
    (rest[..label].ends_with(b"PRIVATE KEY") && rest[label..].starts_with(b"-----"))
        .then_some(at + OPEN.len() + label + 5)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runs(text: &str) -> Vec<&str> {
        let mut out = Vec::new();
        for_each_run(text.as_bytes(), RunFinder::detect(), |r, kind| {
            if kind.decodable() {
                out.push(&text[r])
            }
        });
        out
    }

    /// Capitals and digits alone (a near-miss key id repeated, base32) are not decoded as
    /// base64: decoding 1 MiB of `AKIA` repeated and scanning it again was a tenth of that
    /// text's scan.
    #[test]
    fn runs_without_small_letters_are_not_base64() {
        let mut kinds = Vec::new();
        let akia = "AKIA".repeat(64);
        for_each_run(akia.as_bytes(), RunFinder::detect(), |_, kind| {
            kinds.push(kind.decodable())
        });
        assert_eq!(kinds, vec![false]);
        kinds.clear();
        for_each_run(
            b"QUtJQVE3WksyTTRYVzNITjVKUFI=",
            RunFinder::detect(),
            |_, kind| kinds.push(kind.decodable()),
        );
        assert_eq!(kinds, vec![true]);
    }

    /// Every run a finder reports, with its kind's length flag.
    fn all_runs(text: &[u8], finder: RunFinder) -> Vec<(Range<usize>, bool)> {
        let mut out = Vec::new();
        for_each_run(text, finder, |r, kind| out.push((r, kind.long)));
        out
    }

    /// Runs from 17 characters are reported (the rest of an AWS key id cut after `AKI`),
    /// at every offset; 16 are not. Only runs from 24 are worth decoding.
    #[test]
    fn runs_from_seventeen_characters_are_reported() {
        for finder in finders() {
            for pad in 0..80 {
                for len in [16, 17, 23, 24] {
                    let run = "Q".repeat(len);
                    let text = format!("{} {run} {}", "x ".repeat(pad), ". ".repeat(pad));
                    let at = 2 * pad + 1;
                    let want = if len >= MIN_REPORTED_RUN {
                        vec![(at..at + len, len >= MIN_RUN)]
                    } else {
                        vec![]
                    };
                    assert_eq!(
                        all_runs(text.as_bytes(), finder),
                        want,
                        "{finder:?} {pad} {len}"
                    );
                }
            }
        }
    }

    /// The finders to compare: the one this CPU runs and the portable one.
    fn finders() -> Vec<RunFinder> {
        let mut out = vec![RunFinder::Portable];
        if RunFinder::detect() != RunFinder::Portable {
            out.push(RunFinder::detect());
        }
        out
    }

    /// The vector classification agrees with the table for every byte, in every lane.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_vector_classification_agrees_with_the_table() {
        if RunFinder::detect() == RunFinder::Portable {
            return;
        }
        for byte in 0..=255u8 {
            for lane in 0..32 {
                let mut block = [b' '; 32];
                block[lane] = byte;
                // SAFETY: AVX2 is there (`detect`).
                let mask = unsafe { avx2::base64_mask(&block) };
                let want = if is_base64(byte) { 1 << lane } else { 0 };
                assert_eq!(mask, want, "byte {byte:#04x} in lane {lane}");
            }
        }
    }

    /// Both finders report the same runs, over texts of random words and runs of every
    /// length around the limits, wrapped base64 and bytes outside ASCII.
    #[test]
    fn the_finders_report_the_same_runs() {
        let finders = finders();
        let mut r = crate::test_rng::Rng(0x5EED_0F2B);
        const B64: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/-_";
        for _ in 0..3000 {
            let mut text = Vec::new();
            let target = r.below(400);
            while text.len() < target {
                match r.below(6) {
                    0 => text.extend_from_slice(b" "),
                    1 => text.extend_from_slice(b"\n"),
                    2 => text.extend_from_slice("é.,=\"".as_bytes()),
                    3 => {
                        let len = 10 + r.below(20);
                        text.extend((0..len).map(|_| B64[r.below(B64.len())]));
                    }
                    4 => {
                        // Wrapped lines of base64, some long enough to join.
                        for _ in 0..1 + r.below(3) {
                            let len = 40 + r.below(30);
                            text.extend((0..len).map(|_| B64[r.below(B64.len())]));
                            text.push(b'\n');
                        }
                    }
                    _ => text.extend_from_slice(b"word"),
                }
            }
            let first = all_runs(&text, finders[0]);
            for &finder in &finders[1..] {
                assert_eq!(
                    all_runs(&text, finder),
                    first,
                    "{:?}",
                    String::from_utf8_lossy(&text)
                );
            }
            // And both agree with the definition: every maximal run of 17 or more.
            let mut want = Vec::new();
            let mut start = None;
            for (i, &b) in text.iter().chain([b' '].iter()).enumerate() {
                match (is_base64(b), start) {
                    (true, None) => start = Some(i),
                    (false, Some(s)) => {
                        if i - s >= MIN_REPORTED_RUN {
                            want.push(s);
                        }
                        start = None;
                    }
                    _ => {}
                }
            }
            let got: Vec<usize> = first.iter().map(|(r, _)| r.start).collect();
            // A wrapped run takes in the lines after it: those are not runs of their own.
            assert!(
                want.iter()
                    .all(|s| got.contains(s) || first.iter().any(|(r, _)| r.contains(s))),
                "{want:?} {got:?} in {:?}",
                String::from_utf8_lossy(&text)
            );
            assert!(got.iter().all(|s| want.contains(s)), "{want:?} {got:?}");
        }
    }

    #[test]
    fn runs_are_found_whole_and_short_ones_are_not() {
        let long = "QUtJQVE3WksyTTRYVzNITjVKUFI=";
        assert_eq!(runs(&format!("blob: {long}, ok")), vec![long]);
        assert_eq!(runs(long), vec![long]);
        assert!(runs("the quick brown fox jumps over the lazy dog").is_empty());
        assert!(runs("short QUtJQVE3WksyTTRY!").is_empty());
        // Every offset of a run of exactly the minimum, in longer text.
        for pad in 0..60 {
            let run = "A".repeat(MIN_RUN);
            let text = format!("{} {run} {}", "x ".repeat(pad), ". ".repeat(pad));
            assert_eq!(runs(&text), vec![run.as_str()], "pad {pad}");
            let short = "A".repeat(MIN_RUN - 1);
            let text = format!("{} {short} {}", "x ".repeat(pad), ". ".repeat(pad));
            assert!(runs(&text).is_empty(), "pad {pad}");
        }
        // Wrapped at 64: one run; short lines: separate words.
        let wrapped = format!(
            "{}\n{}\n{}==",
            "aB".repeat(32),
            "Cd".repeat(32),
            "eF".repeat(5)
        );
        assert_eq!(runs(&format!("x\n{wrapped}\ny")), vec![wrapped.as_str()]);
        assert_eq!(
            runs("alpha_BETA_gamma_DELTA_1\nepsilon_ZETA_eta_THETA_2"),
            vec!["alpha_BETA_gamma_DELTA_1", "epsilon_ZETA_eta_THETA_2"]
        );
        // Paths and identifiers in lower case are not decoded.
        assert!(runs("/home/user/projects/mcpwall/src/secrets/mod.rs").is_empty());
        assert!(runs("a_very_long_snake_case_identifier_name").is_empty());
    }

    #[test]
    fn decoding_gives_the_text_back() {
        let mut out = String::new();
        let text = b"QUtJQVE3WksyTTRYVzNITjVKUFI=";
        decode_into(text, 0..text.len(), &mut out);
        assert_eq!(out, "AKIAQ7ZK2M4XW3HN5JPR");
        // URL-safe and wrapped, non-ASCII bytes become spaces.
        let text = b"_-_-\nAAAA";
        decode_into(text, 0..text.len(), &mut out);
        assert_eq!(out.len(), 6);
        assert!(out.is_ascii());
    }

    /// Decoding by groups of four gives what decoding a character at a time gives, on
    /// runs with line breaks and padding at every offset.
    #[test]
    fn decoding_by_groups_agrees_with_one_character_at_a_time() {
        let reference = |text: &[u8]| {
            let (mut acc, mut bits, mut out) = (0u32, 0u32, String::new());
            for &b in text {
                let v = DECODE[usize::from(b)];
                if v == NOT_BASE64 {
                    continue;
                }
                acc = (acc << 6) | u32::from(v);
                bits += 6;
                if bits >= 8 {
                    bits -= 8;
                    let byte = (acc >> bits) as u8;
                    out.push(if byte.is_ascii() {
                        char::from(byte)
                    } else {
                        ' '
                    });
                }
            }
            out
        };
        let alphabet = b"AZaz09+/-_=\n\r";
        let mut rng = crate::test_rng::Rng(0x5DEE_CE66_D1CE_4E5B);
        let mut out = String::new();
        for _ in 0..2000 {
            let len = (rng.next() % 90) as usize;
            let text: Vec<u8> = (0..len)
                .map(|_| match rng.next() % 8 {
                    0 => alphabet[(rng.next() % alphabet.len() as u64) as usize],
                    _ => b"QUtJQVE3WksyTTRYVzNITjVKUFI"[(rng.next() % 27) as usize],
                })
                .collect();
            decode_into(&text, 0..text.len(), &mut out);
            assert_eq!(
                out,
                reference(&text),
                "{:?}",
                String::from_utf8_lossy(&text)
            );
        }
    }

    #[test]
    fn a_key_body_without_its_header_is_found_up_to_its_footer() {
        let line = "M".repeat(64);
        let text =
            format!("$ tail -3 key.pem\n{line}\n{line}\nABCD==\n-----END RSA PRIVATE KEY-----\n$ ");
        let end_line = text.find("-----END").unwrap();
        let body = headless_key_body(text.as_bytes(), end_line).expect("found");
        assert_eq!(
            &text[body],
            format!("{line}\n{line}\nABCD==\n-----END RSA PRIVATE KEY-----")
        );
        // A footer alone, or under prose, is not a key.
        let text = "see below\n-----END PRIVATE KEY-----";
        assert_eq!(headless_key_body(text.as_bytes(), 10), None);
        let text = "-----END PRIVATE KEY-----";
        assert_eq!(headless_key_body(text.as_bytes(), 0), None);
        let text = format!("{line}\n-----END PUBLIC KEY-----");
        assert_eq!(headless_key_body(text.as_bytes(), 65), None);
    }
}
