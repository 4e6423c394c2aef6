//! Secrets broken apart in the text as written: a token split by a line break (`\n`,
//! `\r\n`, or the two characters `\n` of a JSON string carried inside text), and a token
//! written with `%XX` escapes (a URL's query, a form body).
//!
//! Each shape is rebuilt into a short derived text, with the offset in the original of
//! every derived byte, and scanned by the plain detectors (one level: nothing derived is
//! decoded again). A finding there is kept only when it crosses a removed break or holds
//! a decoded escape (the plain scan has judged everything else already), and is mapped
//! back to the exact original bytes it came from, so a redaction cuts only the secret.
//!
//! Both passes begin with a `memchr` for their trigger byte, so text without line breaks,
//! backslashes or `%` costs one vectorised pass each; the derived texts are bounded by the
//! shapes found, so a scan stays linear in its text.

use std::ops::Range;

/// Fewest token characters a rejoined word must hold (both sides of its breaks together):
/// no provider token or labelled value worth a finding is shorter, and prose wrapped at a
/// line end (`quick\nbrown`) is.
const MIN_JOINED: usize = 16;
/// A chain of broken lines holding more token characters than this is a wrapped block
/// (base64 or hex of a file, a key body), which `encoded.rs` decodes as one run, not a
/// token split by a break; it is not rejoined.
const MAX_JOINED: usize = 1024;
/// Bytes kept before a rejoined word, so that what a format needs before it is read with
/// it: a label (`password: `, `AWS_SECRET_ACCESS_KEY=`), a key id before its secret, the
/// start of a URL whose signature was broken. Stretches merge where their contexts meet,
/// so the context adds no rescanning beyond one pass over the text.
const CONTEXT_BEFORE: usize = 256;
/// Bytes kept after it: the rest of a token made of several words (`sk.eyJ….…`, a
/// JWT's later segments), and a closing quote or separator some formats end on.
const CONTEXT_AFTER: usize = 256;

/// A character a token is made of, on either side of a break.
#[inline]
fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'+' | b'/')
}

/// The length of the line break starting at `at`: `\n`, `\r\n`, or their JSON escapes
/// written out (`\\n`, `\\r\\n`); 0 when there is none.
fn break_len(text: &[u8], at: usize) -> usize {
    let rest = &text[at..];
    if rest.starts_with(b"\r\n") || rest.starts_with(b"\\n") {
        2
    } else if rest.starts_with(b"\n") {
        1
    } else if rest.starts_with(b"\\r\\n") {
        4
    } else {
        0
    }
}

/// A derived text and where each of its bytes came from.
#[derive(Debug, Default)]
pub(super) struct Derived {
    /// The rebuilt text (ASCII only).
    pub text: String,
    /// `origin[i]`: the offset in the original of the first byte that gave `text[i]`.
    origin: Vec<usize>,
    /// `origin_end[i]`: one past the last original byte that gave `text[i]`.
    origin_end: Vec<usize>,
    /// The breaks of the stretch being rejoined, each with its [`FIRST`] and [`LAST`]
    /// marks.
    breaks: Vec<(Range<usize>, u8)>,
}

impl Derived {
    fn clear(&mut self) {
        self.text.clear();
        self.origin.clear();
        self.origin_end.clear();
    }

    fn push(&mut self, byte: u8, from: Range<usize>) {
        // ASCII only: the derived text must stay UTF-8, and credentials are ASCII.
        self.text.push(if byte.is_ascii() {
            char::from(byte)
        } else {
            ' '
        });
        self.origin.push(from.start);
        self.origin_end.push(from.end);
    }

    /// The original bytes that gave `self.text[range]`, when they are more than those
    /// bytes alone (a break or an escape lies inside): only then is a finding new.
    pub fn original(&self, range: Range<usize>) -> Option<Range<usize>> {
        if range.is_empty() || range.end > self.origin.len() {
            return None;
        }
        let span = self.origin[range.start]..self.origin_end[range.end - 1];
        (span.len() != range.len()).then_some(span)
    }
}

/// A break that begins a chain of two or more breaks: the line before it may end a word
/// of its own (`SETTING=x\nghp_…`), so it is also tried kept.
const FIRST: u8 = 1;
/// A break that ends such a chain: the line after it may begin a word of its own
/// (`…\nLOG_LEVEL=info`), so it is also tried kept.
const LAST: u8 = 2;

/// The chain of broken lines being read: where its first word starts, where its last
/// word ends, how many token characters it holds, and where its breaks begin in the
/// list of breaks to remove.
#[derive(Debug, Clone, Copy)]
struct Chain {
    start: usize,
    end: usize,
    chars: usize,
    first_break: usize,
}

/// Calls `f(derived)` for each stretch of text holding words of token characters broken
/// by line breaks (each word at least [`MIN_JOINED`] and at most [`MAX_JOINED`] token
/// characters), with those breaks removed and context kept around them. Stretches whose
/// context would overlap are merged, so every byte of `text` is rescanned once at most.
pub(super) fn for_each_rejoined(text: &str, out: &mut Derived, mut f: impl FnMut(&Derived)) {
    let b = text.as_bytes();
    // One vectorised pass decides for most texts: no line break, no backslash.
    let Some(first) = memchr::memchr2(b'\n', b'\\', b) else {
        return;
    };
    let mut breaks = std::mem::take(&mut out.breaks);
    breaks.clear();
    // The stretch being gathered (its breaks are `breaks[..chain.first_break]`), and
    // whether one of its chains has several breaks.
    let mut region: Option<(Range<usize>, bool)> = None;
    let mut chain: Option<Chain> = None;
    let mut at = first;
    while let Some(next) = memchr::memchr2(b'\n', b'\\', &b[at..]) {
        let hit = at + next;
        let brk = if b[hit] == b'\n' && hit > 0 && b[hit - 1] == b'\r' {
            hit - 1
        } else {
            hit
        };
        let len = break_len(b, brk);
        let after = brk + len;
        let joins = len > 0
            && brk > 0
            && is_token_byte(b[brk - 1])
            && b.get(after).is_some_and(|&c| is_token_byte(c));
        at = if joins { after } else { (hit + 1).max(after) };
        if !joins {
            if at >= b.len() {
                break;
            }
            continue;
        }
        let mut word_end = after;
        while word_end < b.len() && is_token_byte(b[word_end]) {
            word_end += 1;
        }
        match &mut chain {
            // The word before this break is the chain's last word: the chain goes on.
            Some(c) if c.end == brk => {
                c.chars += word_end - after;
                c.end = word_end;
            }
            _ => {
                if let Some(c) = chain.take() {
                    close_chain(text, c, &mut region, &mut breaks, out, &mut f);
                }
                let mut word_start = brk;
                while word_start > 0 && is_token_byte(b[word_start - 1]) {
                    word_start -= 1;
                }
                chain = Some(Chain {
                    start: word_start,
                    end: word_end,
                    chars: (brk - word_start) + (word_end - after),
                    first_break: breaks.len(),
                });
            }
        }
        breaks.push((brk..after, 0));
        if at >= b.len() {
            break;
        }
    }
    if let Some(c) = chain {
        close_chain(text, c, &mut region, &mut breaks, out, &mut f);
    }
    if let Some((r, multi)) = region {
        emit_variants(text, r, multi, &breaks, out, &mut f);
    }
    out.breaks = breaks;
}

/// Adds a finished chain to the stretch being gathered when it is the size of a token
/// (merging when their contexts meet), emitting the stretch before it otherwise.
fn close_chain(
    text: &str,
    chain: Chain,
    region: &mut Option<(Range<usize>, bool)>,
    breaks: &mut Vec<(Range<usize>, u8)>,
    out: &mut Derived,
    f: &mut impl FnMut(&Derived),
) {
    if !(MIN_JOINED..=MAX_JOINED).contains(&chain.chars) {
        breaks.truncate(chain.first_break);
        return;
    }
    let multi = breaks.len() - chain.first_break >= 2;
    if multi {
        breaks[chain.first_break].1 |= FIRST;
        if let Some(last) = breaks.last_mut() {
            last.1 |= LAST;
        }
    }
    let window =
        chain.start.saturating_sub(CONTEXT_BEFORE)..(chain.end + CONTEXT_AFTER).min(text.len());
    match region {
        Some((r, m)) if window.start <= r.end => {
            r.end = r.end.max(window.end);
            *m |= multi;
        }
        _ => {
            if let Some((r, m)) = region.take() {
                emit_variants(text, r, m, &breaks[..chain.first_break], out, f);
                breaks.drain(..chain.first_break);
            }
            *region = Some((window, multi));
        }
    }
}

/// [`emit`] with every break removed, then, when a chain has several breaks, with its
/// first, its last, and both kept: a chain's ends may be the ends of other words, and
/// which is cannot be told from the text (four scans of such a stretch at most).
fn emit_variants(
    text: &str,
    region: Range<usize>,
    multi: bool,
    breaks: &[(Range<usize>, u8)],
    out: &mut Derived,
    f: &mut impl FnMut(&Derived),
) {
    let variants: &[u8] = if multi {
        &[0, FIRST, LAST, FIRST | LAST]
    } else {
        &[0]
    };
    for &keep in variants {
        emit(text, region.clone(), breaks, keep, out, f);
    }
}

/// Rebuilds `text[region]` without `breaks` (but those marked in `keep`) into `out` and hands it to `f`.
fn emit(
    text: &str,
    region: Range<usize>,
    breaks: &[(Range<usize>, u8)],
    keep: u8,
    out: &mut Derived,
    f: &mut impl FnMut(&Derived),
) {
    let b = text.as_bytes();
    let mut from = region.start;
    while !text.is_char_boundary(from) {
        from += 1;
    }
    let mut to = region.end;
    while !text.is_char_boundary(to) {
        to -= 1;
    }
    out.clear();
    let mut at = from;
    for (brk, marks) in breaks {
        if marks & keep != 0 {
            continue;
        }
        for i in at..brk.start {
            out.push(b[i], i..i + 1);
        }
        at = brk.end;
    }
    for i in at..to {
        out.push(b[i], i..i + 1);
    }
    f(out);
}

/// Calls `f(derived)` for each stretch of URL characters holding a `%XX` escape, with its
/// escapes decoded (bytes outside ASCII become spaces).
pub(super) fn for_each_percent_decoded(text: &str, out: &mut Derived, mut f: impl FnMut(&Derived)) {
    let b = text.as_bytes();
    let is_url_byte =
        |c: u8| c.is_ascii_graphic() && !matches!(c, b'"' | b'\'' | b'<' | b'>' | b'`');
    let escape_at = |i: usize| {
        b[i] == b'%'
            && b.get(i + 1).is_some_and(u8::is_ascii_hexdigit)
            && b.get(i + 2).is_some_and(u8::is_ascii_hexdigit)
    };
    let mut at = 0;
    while let Some(next) = memchr::memchr(b'%', &b[at.min(b.len())..]) {
        let pct = at + next;
        if !escape_at(pct) {
            at = pct + 1;
            continue;
        }
        let mut start = pct;
        while start > at && is_url_byte(b[start - 1]) {
            start -= 1;
        }
        let mut end = pct;
        while end < b.len() && is_url_byte(b[end]) {
            end += 1;
        }
        out.clear();
        let mut i = start;
        while i < end {
            if escape_at(i) {
                let hex = |c: u8| (c as char).to_digit(16).unwrap_or(0) as u8;
                out.push((hex(b[i + 1]) << 4) | hex(b[i + 2]), i..i + 3);
                i += 3;
            } else {
                out.push(b[i], i..i + 1);
                i += 1;
            }
        }
        f(out);
        at = end;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rejoined(text: &str) -> Vec<String> {
        let mut d = Derived::default();
        let mut out = Vec::new();
        for_each_rejoined(text, &mut d, |d| out.push(d.text.clone()));
        out
    }

    #[test]
    fn breaks_inside_a_long_word_are_removed_and_prose_is_left_alone() {
        let w = "abcdefghij";
        for brk in ["\n", "\r\n", "\\n", "\\r\\n"] {
            let text = format!("key: {w}{brk}{w}{brk}{w} end");
            assert_eq!(
                rejoined(&text),
                vec![format!("key: {w}{w}{w} end")],
                "{brk:?}"
            );
        }
        assert!(rejoined("the quick brown\nfox jumps over\nthe lazy dog").is_empty());
        assert!(rejoined("no breaks at all, just text").is_empty());
        assert!(rejoined("C:\\new\\folder").is_empty());
        // A wrapped block of token characters is not a split token.
        let block = format!("{}\n", "A".repeat(64)).repeat(40);
        assert!(rejoined(&block).is_empty());
    }

    #[test]
    fn a_finding_maps_back_to_the_bytes_it_came_from_breaks_included() {
        let text = "x=abcdefghij\r\nklmnopqrst;";
        let mut d = Derived::default();
        let mut seen = false;
        for_each_rejoined(text, &mut d, |d| {
            let at = d.text.find("abc").unwrap();
            let end = d.text.find(';').unwrap();
            assert_eq!(d.original(at..end), Some(2..text.len() - 1));
            // Bytes on one side only are not new.
            assert_eq!(d.original(at..at + 5), None);
            seen = true;
        });
        assert!(seen);
    }

    #[test]
    fn percent_escapes_are_decoded_within_their_url_word() {
        let mut d = Derived::default();
        let mut out = Vec::new();
        let text = "see https://x.test/?t=gh%70_abc%2Bdef&u=1 \"next %zz\"";
        for_each_percent_decoded(text, &mut d, |d| {
            out.push(d.text.clone());
            let at = d.text.find("ghp_").unwrap();
            let orig = d.original(at..at + 4).unwrap();
            assert_eq!(&text[orig], "gh%70_");
        });
        assert_eq!(out, vec!["https://x.test/?t=ghp_abc+def&u=1"]);
    }
}
