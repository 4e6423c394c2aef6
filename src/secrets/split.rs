//! Tokens written apart inside one text: a provider token cut by a line break (`\n`,
//! `\r\n`, or those escapes written out as in a JSON string carried inside text), or
//! split into groups by single spaces; and tokens written with `%XX` escapes (a URL's
//! query, a form body).
//!
//! Neither pass reads text on its own account. A token cut short is found from the
//! keyword scan: a hit of a whole-token format (`ghp_`, `AKIA`, `xoxb-`) that no finding
//! covers is a token shorter than its format at that point, and only there is the text
//! read on, to the end of the hit's run of token characters and across a separator to
//! the pieces after it ([`rejoin`]). A token whose run is complete is a finding of its own
//! and is never joined to the next line, so `ghp_…\nregion = eu-west-1` stays two
//! things. `%XX` escapes are found by one `memchr` for `%`: only a `%` followed by two
//! hex digits starts a run to decode ([`for_each_percent_run`]).
//!
//! Each shape is rebuilt into a short derived text with, for each of its pieces, the
//! original bytes it came from ([`Derived`]); the plain detectors scan it, and a finding
//! there is kept only when it crosses a separator or holds an escape (the plain scan has
//! judged everything else), mapped back to exactly the original bytes of the token:
//! the separator between two pieces is not part of any finding, and neither is any
//! text around them.

use std::ops::Range;

use super::engine::is_word_byte;

/// The longest piece of a token looked at on either side of a separator (a 1Password
/// service-account token is ~600 characters): a longer run of token characters around a
/// hit is not a cut token, and this bounds the bytes read per hit.
const MAX_PIECE: usize = 1024;
/// The longest rejoined token: a chain stops once it holds this many bytes.
const MAX_REJOINED: usize = 2048;
/// Indentation skipped after a line break (a token wrapped inside an indented block).
const MAX_INDENT: usize = 8;
/// A token split by spaces must already be this long before its first space, counted
/// from its keyword's start, and hold a digit or a capital letter after the keyword: a
/// keyword alone or with a word after it, then prose (`the ghp_ prefix of a token`,
/// `glpat-example lorem ipsum dolor`), is a word about tokens, not a token.
const MIN_HEAD_BEFORE_SPACE: usize = 12;
/// A piece that ends at a separator is a middle piece of a token only when it is this
/// long (lines of a wrapped token, groups of a spaced one); a short word there ends the
/// chain.
const MIN_MIDDLE_PIECE: usize = 4;

/// A character a provider token is made of (base64, base64url, JWT dots).
#[inline]
pub(super) fn is_token_byte(b: u8) -> bool {
    BYTE_CLASS[usize::from(b)] & TOKEN != 0
}

/// A character of a name an assignment's label may be ([`unless_label`]).
#[inline]
fn is_name_byte(b: u8) -> bool {
    BYTE_CLASS[usize::from(b)] & NAME != 0
}

const TOKEN: u8 = 1;
const NAME: u8 = 2;

/// Per byte, whether it is a [`TOKEN`] character and a [`NAME`] one: the rejoin reads
/// every piece through these two tests, one load each instead of a chain of range
/// comparisons.
static BYTE_CLASS: [u8; 256] = {
    let mut class = [0u8; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        if c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b'.') {
            class[b] = TOKEN | NAME;
        } else if matches!(c, b'+' | b'/' | b'=') {
            class[b] = TOKEN;
        }
        b += 1;
    }
    class
};

/// What separates two pieces of a token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Separator {
    /// `\n`, `\r\n`, or `\n`/`\r\n` written out, then up to [`MAX_INDENT`] spaces or tabs.
    Break,
    /// One space or tab.
    Space,
}

/// The separator starting at `at` and its length, when a token character follows it.
fn separator_at(text: &[u8], at: usize) -> Option<(Separator, usize)> {
    let rest = &text[at..];
    let (kind, mut len) = if rest.starts_with(b"\r\n") || rest.starts_with(b"\\n") {
        (Separator::Break, 2)
    } else if rest.starts_with(b"\n") {
        (Separator::Break, 1)
    } else if rest.starts_with(b"\\r\\n") {
        (Separator::Break, 4)
    } else if rest.starts_with(b" ") || rest.starts_with(b"\t") {
        (Separator::Space, 1)
    } else {
        return None;
    };
    if kind == Separator::Break {
        let indent = rest[len..]
            .iter()
            .take(MAX_INDENT)
            .take_while(|&&b| b == b' ' || b == b'\t')
            .count();
        len += indent;
    }
    rest.get(len)
        .is_some_and(|&b| is_token_byte(b))
        .then_some((kind, len))
}

/// `byte` as a derived text holds it: ASCII only (a space for anything else), since the
/// derived text must stay UTF-8 and credentials are ASCII.
fn printable(byte: u8) -> char {
    char::from(if (b' '..=b'~').contains(&byte) {
        byte
    } else {
        b' '
    })
}

/// A derived text and where its bytes came from, as a list of pieces.
#[derive(Debug, Default)]
pub(super) struct Derived {
    /// The rebuilt text (ASCII only).
    pub text: String,
    /// The pieces of `text`, in order and covering it: bytes copied as written from
    /// contiguous original bytes are one piece, a `%XX` escape's byte is one of its own.
    /// A rejoin holds a few; per-byte lists cost more than the copy itself.
    pieces: Vec<Piece>,
    /// Where each piece of a rejoined token after the first one past the cut starts in
    /// `text`: the words after a token's last group may have been read as more pieces.
    later_pieces: Vec<usize>,
    /// The original bytes of every derived byte, kept the plain way to check the pieces.
    #[cfg(test)]
    byte_origins: Vec<Range<usize>>,
}

/// Derived bytes from `at` to the next piece's start, and the original bytes `start..end`
/// they came from: as many as there are derived bytes when copied as written, or the
/// three bytes of the one byte a `%XX` escape decodes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Piece {
    at: usize,
    start: usize,
    end: usize,
}

impl Piece {
    /// Whether the piece's `len` derived bytes were copied one for one.
    fn as_written(&self, len: usize) -> bool {
        self.end - self.start == len
    }
}

impl Derived {
    fn clear(&mut self) {
        self.later_pieces.clear();
        self.text.clear();
        self.pieces.clear();
        #[cfg(test)]
        self.byte_origins.clear();
    }

    fn push(&mut self, byte: u8, from: Range<usize>) {
        let at = self.text.len();
        self.text.push(printable(byte));
        #[cfg(test)]
        self.byte_origins.push(from.clone());
        if from.len() == 1 {
            self.note_as_written(at, from);
        } else {
            self.pieces.push(Piece {
                at,
                start: from.start,
                end: from.end,
            });
        }
    }

    /// Notes that the derived bytes from `at` to the text's end were copied as written
    /// from `from`: they extend the last piece when it was copied too and ends there.
    fn note_as_written(&mut self, at: usize, from: Range<usize>) {
        match self.pieces.last_mut() {
            Some(last) if last.end == from.start && last.as_written(at - last.at) => {
                last.end = from.end;
            }
            _ => self.pieces.push(Piece {
                at,
                start: from.start,
                end: from.end,
            }),
        }
    }

    /// Where the `k`th piece ends in `text`: where the next one starts.
    fn piece_end(&self, k: usize) -> usize {
        self.pieces.get(k + 1).map_or(self.text.len(), |p| p.at)
    }

    /// Drops the last piece, unless it is the one right after the cut.
    pub fn drop_last_piece(&mut self) -> bool {
        let Some(at) = self.later_pieces.pop() else {
            return false;
        };
        self.truncate(at);
        true
    }

    /// Keeps the first `len` derived bytes and where they came from.
    fn truncate(&mut self, len: usize) {
        let mut piece_end = self.text.len();
        while let Some(last) = self.pieces.last() {
            if last.at < len {
                break;
            }
            piece_end = last.at;
            self.pieces.pop();
        }
        if let Some(last) = self.pieces.last_mut()
            && piece_end > len
            && last.as_written(piece_end - last.at)
        {
            last.end -= piece_end - len;
        }
        self.text.truncate(len);
        #[cfg(test)]
        self.byte_origins.truncate(len);
    }

    /// Copies `text[range]` as it is, as [`Derived::push`] would byte by byte: one copy
    /// and one piece. A rejoin's pieces are token characters, printable ASCII already;
    /// the start of a wrapped line may hold anything (or start inside a character) and
    /// is mapped byte by byte.
    fn push_verbatim(&mut self, text: &str, range: Range<usize>) {
        if range.is_empty() {
            return;
        }
        let at = self.text.len();
        match text.get(range.clone()) {
            // Every byte tested, no early exit: a short loop the compiler unrolls.
            Some(ascii)
                if ascii
                    .bytes()
                    .fold(true, |all, b| all & (b' '..=b'~').contains(&b)) =>
            {
                self.text.push_str(ascii);
            }
            _ => self.text.extend(
                text.as_bytes()[range.clone()]
                    .iter()
                    .map(|&byte| printable(byte)),
            ),
        }
        #[cfg(test)]
        self.byte_origins.extend(range.clone().map(|i| i..i + 1));
        self.note_as_written(at, range);
    }

    /// Calls `f` with each run of original bytes that gave `self.text[range]`, in order:
    /// one run when nothing was removed inside, one per piece across separators.
    /// Returns whether the finding is new to the plain scan: it crosses a separator, or
    /// an escape lies inside it.
    pub fn for_each_original(&self, range: Range<usize>, mut f: impl FnMut(Range<usize>)) -> bool {
        if range.is_empty() || range.end > self.text.len() {
            return false;
        }
        let Some(first) = self
            .pieces
            .partition_point(|p| p.at <= range.start)
            .checked_sub(1)
        else {
            return false;
        };
        let mut run: Option<Range<usize>> = None;
        let mut span_start = 0;
        let mut runs = 0;
        for (k, piece) in self.pieces.iter().enumerate().skip(first) {
            if piece.at >= range.end {
                break;
            }
            let piece_end = self.piece_end(k);
            let (start, end) = if piece.as_written(piece_end - piece.at) {
                let lo = range.start.max(piece.at);
                let hi = range.end.min(piece_end);
                (piece.start + (lo - piece.at), piece.start + (hi - piece.at))
            } else {
                (piece.start, piece.end)
            };
            match &mut run {
                Some(r) if r.end == start => r.end = end,
                Some(r) => {
                    f(r.clone());
                    runs += 1;
                    *r = start..end;
                }
                None => {
                    span_start = start;
                    run = Some(start..end);
                }
            }
        }
        let Some(last) = run else {
            return false;
        };
        let span = last.end - span_start;
        f(last);
        runs += 1;
        runs > 1 || span != range.len()
    }
}

/// The wrapped lines' texts one scan rebuilt and scanned ([`rejoin_wrapped`]), in order,
/// with what each held: a cut token on such a line, rejoined from its keyword
/// ([`rejoin`]), is the same text or its end, and its scan may be answered from there
/// ([`WrappedTexts::answers_for`]).
#[derive(Debug, Default)]
pub(super) struct WrappedTexts {
    texts: Vec<Wrapped>,
    /// The first text whose line does not end before the last hit looked for.
    cursor: usize,
}

#[derive(Debug)]
struct Wrapped {
    /// Where its first piece starts, and the break that ends it, in the original text.
    start: usize,
    brk: usize,
    /// The end of what was read.
    end: usize,
    outcome: ScanOutcome,
    /// It has pieces that a rejoined token's text without them would be scanned again
    /// for, when it found nothing ([`Derived::drop_last_piece`]).
    droppable: bool,
}

/// What the scan of a derived text found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct ScanOutcome {
    /// How many findings were new to the plain scan (`Detector::add_derived`).
    pub added: usize,
    /// Whether it found nothing at all, new or not.
    pub nothing: bool,
}

impl WrappedTexts {
    pub fn clear(&mut self) {
        self.texts.clear();
        self.cursor = 0;
    }

    /// Notes that `derived`, as [`rejoin_wrapped`] built it and returned `end`, was scanned
    /// and found `outcome`. Texts are noted in the order of their lines.
    pub fn note(&mut self, derived: &Derived, end: usize, outcome: ScanOutcome) {
        let Some(first) = derived.pieces.first() else {
            return;
        };
        self.texts.push(Wrapped {
            start: first.start,
            brk: first.end,
            end,
            outcome,
            droppable: !derived.later_pieces.is_empty(),
        });
    }

    /// Whether [`rejoin`] from the keyword hit at `hit` in `source` would build a text
    /// whose scan a wrapped line's answers for: then what it would read ends at the
    /// returned offset. That is so when the hit is on a noted line and its run ends at
    /// the line's break, which [`rejoin`] then reads on from as [`rejoin_wrapped`] did,
    /// so its text is the wrapped one's from the hit on, and either:
    /// - the hit starts the wrapped text: the same text, whose findings were added, and
    ///   which found some or has no pieces to drop and scan again;
    /// - with `widened`, the wrapped text found nothing at all and has no pieces to drop,
    ///   and the byte before the hit is not a word character.
    ///
    /// In the second case the wider text's scan tried every hit in the token's bytes, with
    /// nothing found before it to cover or skip it, and each search from a hit read the
    /// same bytes after it and a non-word byte before it, as at a text's start (for
    /// `\b`): a secret there would have been found. (A wider scan that found something
    /// proves nothing: a label before the token may read it as a value with the next
    /// line's word, where the token's own scan finds it only without that word.)
    /// `widened` must be false when a detector looks at where its text starts (`^`,
    /// `\A`), which the wider text has elsewhere.
    ///
    /// Hits are looked for in order: one on a line before the last one looked for is not
    /// answered for (and is scanned, which costs time only).
    pub fn answers_for(&mut self, source: &str, hit: usize, widened: bool) -> Option<usize> {
        let text = source.as_bytes();
        while self.texts.get(self.cursor).is_some_and(|w| w.brk <= hit) {
            self.cursor += 1;
        }
        let wrapped = self.texts.get(self.cursor)?;
        if hit < wrapped.start
            || !may_start_token(text, hit)
            || run_end(text, hit, hit + MAX_PIECE) != Some(wrapped.brk)
            || line_len(text, wrapped.brk).is_none()
        {
            return None;
        }
        let answered = if hit == wrapped.start {
            wrapped.outcome.added > 0 || !wrapped.droppable
        } else {
            let before = text[hit - 1];
            widened
                && wrapped.outcome.nothing
                && !wrapped.droppable
                && (b' '..=b'~').contains(&before)
                && !is_word_byte(before)
        };
        answered.then_some(wrapped.end)
    }
}

/// The end of the run of token characters from `from`, unless it runs on past `limit`.
fn run_end(text: &[u8], from: usize, limit: usize) -> Option<usize> {
    let limit = limit.min(text.len());
    let mut at = from;
    while at < limit && is_token_byte(text[at]) {
        at += 1;
    }
    (at < limit || at == text.len()).then_some(at)
}

/// Whether `text[at]` is the letter of a backslash escape written out.
fn escaped(text: &[u8], at: usize) -> bool {
    at >= 1 && text[at - 1] == b'\\'
}

/// The length of the line that ends at `end`: from the last line break (real or written
/// out) or the start of the text; `None` when it is longer than [`MAX_PIECE`].
fn line_len(text: &[u8], end: usize) -> Option<usize> {
    let floor = end.saturating_sub(MAX_PIECE);
    // The last `\n`, or `\` then `n`, from `floor` on: one `memrchr2` where a byte-by-byte
    // walk back cost a sixth of a rejoin on a text of short lines.
    let from = floor.saturating_sub(1);
    let mut upto = end;
    while let Some(i) = memchr::memrchr2(b'\n', b'\\', &text[from..upto]) {
        let i = from + i;
        if text[i] == b'\n' && i >= floor {
            return Some(end - (i + 1));
        }
        if text[i] == b'\\' && i + 1 < end && text[i + 1] == b'n' {
            return Some(end - (i + 2));
        }
        upto = i;
    }
    (floor == 0).then_some(end)
}

/// Rebuilds into `out` the token a keyword hit at `hit` begins when its run of token
/// characters ends at a separator: the run, then each following piece, without the
/// separators. Returns the end of what was read (a later hit before it is part of the
/// same token), or `None` when the hit's run is not cut.
///
/// The piece after the cut is always read; a chain goes on past a piece only when that
/// piece has the shape of a token's middle: for line breaks, as long as the line the
/// token started on (a token wrapped at a terminal's or an editor's width), for spaces,
/// as long as the first group (a token written in groups). So the line after a token's
/// last piece (`…\nLOG_LEVEL=info`) is not read into it.
pub(super) fn rejoin(source: &str, hit: usize, out: &mut Derived) -> Option<usize> {
    let text = source.as_bytes();
    let end = run_end(text, hit, hit + MAX_PIECE)?;
    let (kind, sep_len) = separator_at(text, end)?;
    if kind == Separator::Space
        && (end - hit < MIN_HEAD_BEFORE_SPACE
            || !text[hit + 3..end]
                .iter()
                .any(|b| b.is_ascii_digit() || b.is_ascii_uppercase()))
    {
        return None;
    }
    // The token starts at its keyword: what comes before it in the run (`TOKEN=`) is not
    // read, so no labelled row takes a label from before the cut and a value across it.
    if !may_start_token(text, hit) {
        return None;
    }
    let start = hit;
    let width = match kind {
        Separator::Break => line_len(text, end),
        Separator::Space => None,
    };
    out.clear();
    out.push_verbatim(source, start..end);
    chain(source, end + sep_len, kind, width, out)
}

/// Whether a token may start at a keyword hit at `hit`: not inside a word, nor where the
/// keyword's first letter is an escape's (`\napi_key=…`: the `n` of `\n`, not neon's
/// `napi_`).
fn may_start_token(text: &[u8], hit: usize) -> bool {
    hit == 0 || !((is_word_byte(text[hit - 1]) && !escaped(text, hit - 1)) || escaped(text, hit))
}

/// Appends to `out` the pieces of a token from `at` on, the first one right after a
/// separator of `kind` (see [`rejoin`]); `width` is the width of a middle piece, when
/// known. Returns the end of what was read.
fn chain(
    source: &str,
    mut at: usize,
    kind: Separator,
    mut width: Option<usize>,
    out: &mut Derived,
) -> Option<usize> {
    let text = source.as_bytes();
    let mut after_cut = 0;
    let mut read_to = None;
    while out.text.len() < MAX_REJOINED {
        let run = run_end(text, at, at + MAX_PIECE)?;
        let Some(piece_end) = unless_label(text, at, run) else {
            // The chain ends before the label: a token's last piece is never the next
            // line's first word when that word is assigned to.
            return read_to;
        };
        read_to = Some(piece_end);
        if after_cut > 0 {
            out.later_pieces.push(out.text.len());
        }
        after_cut += 1;
        out.push_verbatim(source, at..piece_end);
        let len = piece_end - at;
        let middle = len >= MIN_MIDDLE_PIECE && *width.get_or_insert(len) == len;
        match separator_at(text, piece_end) {
            Some((k, n)) if k == kind && middle => at = piece_end + n,
            _ => return Some(piece_end),
        }
    }
    Some(at)
}

/// Blanks looked past after a piece for an assignment's `=` or `:` (as the labelled
/// rows allow around theirs).
const MAX_BLANKS_BEFORE_ASSIGNMENT: usize = 4;

/// The longest name read as an assignment's label ([`unless_label`]).
const MAX_LABEL: usize = 32;

/// `run`, the end of the run of token characters from `at`, unless the run starts with
/// an assignment's label: a name (a letter, then letters, digits, `_`, `.` or `-`, in one
/// case: `region`, `LOG_LEVEL`, `db.host`) followed by a `=` inside the run
/// (`region=eu-west-1`; not `==`, base64's padding), or the whole run a name followed
/// by `=` or `:`, or by blanks and one of them standing alone (`region = eu-west-1`,
/// `region: eu`, `LOG := 1`). A token's
/// tail is random characters, mixed in case, and ends at the end of its line, a quote
/// or punctuation; a checksum after a `=` (`…Zxh=46D0A07B`) or a group starting with
/// one (`yebF =D78`) follows no name.
fn unless_label(text: &[u8], at: usize, run: usize) -> Option<usize> {
    let piece = &text[at..run];
    let name_len = piece
        .iter()
        .take(MAX_LABEL + 1)
        .take_while(|&&b| is_name_byte(b))
        .count();
    let name = &piece[..name_len];
    let is_name = name_len <= MAX_LABEL
        && name.first().is_some_and(u8::is_ascii_alphabetic)
        && !(name.iter().any(u8::is_ascii_lowercase) && name.iter().any(u8::is_ascii_uppercase));
    if !is_name {
        return Some(run);
    }
    let assigned = if name_len < piece.len() {
        piece[name_len] == b'=' && piece.get(name_len + 1).is_some_and(|&b| b != b'=')
    } else {
        // Past blanks, the operator must stand alone (`region = eu`, `LOG := 1`): a group
        // of a spaced token may start with a `=` (`KW79 =3A2`).
        let rest = &text[run..];
        let blanks = rest
            .iter()
            .take(MAX_BLANKS_BEFORE_ASSIGNMENT)
            .take_while(|&&b| b == b' ' || b == b'\t')
            .count();
        let op = &rest[blanks..];
        let op_len = match op {
            [b':' | b'=', b'=' | b'>', ..] => 2,
            [b':' | b'=', ..] => 1,
            _ => 0,
        };
        op_len > 0 && (blanks == 0 || op.get(op_len).is_none_or(|&b| !is_token_byte(b)))
    };
    (!assigned).then_some(run)
}

/// The keywords of the whole-token formats (`ghp_`, `AKIA`, `xoxb-`), for finding a
/// token whose keyword a line break cuts (`gh` / `p_…`): no keyword hit starts such a
/// token, so it is looked for from the run of its tail ([`keyword_cut_before`]).
#[derive(Debug)]
pub(super) struct CutKeywords {
    /// Sorted, so the keywords a joined text may start with are those sharing its first
    /// byte, one range.
    sorted: Vec<Box<[u8]>>,
    /// `sorted[by_first[b]..by_first[b + 1]]` are the keywords starting with byte `b`:
    /// a head's range without a binary search, which cost half of the check on a text
    /// with a head at every line's end.
    by_first: Box<[u32]>,
    /// The longest keyword's length: a cut inside one leaves at most one byte less on
    /// either side of the break.
    longest: usize,
}

impl CutKeywords {
    pub fn new(keywords: impl IntoIterator<Item = Box<[u8]>>) -> CutKeywords {
        let mut sorted: Vec<Box<[u8]>> = keywords.into_iter().filter(|k| !k.is_empty()).collect();
        sorted.sort();
        sorted.dedup();
        let longest = sorted.iter().map(|k| k.len()).max().unwrap_or(0);
        let by_first = (0..=256)
            .map(|b| sorted.partition_point(|k| usize::from(k[0]) < b) as u32)
            .collect();
        CutKeywords {
            sorted,
            by_first,
            longest,
        }
    }

    /// Whether `head` then `tail` start with a keyword that the cut between them falls
    /// inside (a keyword `head` holds whole has a hit of its own).
    fn crosses(&self, head: &[u8], tail: &[u8]) -> bool {
        let Some(&first) = head.first() else {
            return false;
        };
        let first = usize::from(first);
        let bucket = &self.sorted[self.by_first[first] as usize..self.by_first[first + 1] as usize];
        bucket.iter().any(|k| {
            k.len() > head.len() && k.starts_with(head) && tail.starts_with(&k[head.len()..])
        })
    }
}

/// Token characters looked back over from a run to its line's start: a token's tail
/// may hold a few short parts before its first long run (`G.` of `SG.…`, `pt.` of
/// `dp.pt.…`, a JWT's header before its payload).
const MAX_LEAD_BEFORE_RUN: usize = 64;

/// Where a whole-token keyword cut by a line break starts (`token: gh` then `p_…`),
/// looked for from a long run of token characters (`run_start`, as the base64 pass finds
/// them) near the start of a line: that is what the rest of a cut token is. The line
/// before must end in the head of a keyword, starting a word, whose rest the line holding
/// the run begins with. Returns the head's start, a hit for [`rejoin`]: it reads the head
/// to the break and the pieces after it.
///
/// Ordinary text pays a look at the bytes before each long run (most are not preceded by
/// token characters, nor at a line's start); a break alone, the common case, costs
/// nothing.
#[inline]
pub(super) fn keyword_cut_before(
    text: &[u8],
    run_start: usize,
    keywords: &CutKeywords,
) -> Option<usize> {
    // The run starts a line's content, or its lead or indentation does: what is before
    // it is a break, indentation or a token's own punctuation. Most runs follow one
    // blank after a word.
    let before = *text.get(run_start.checked_sub(1)?)?;
    let maybe = match before {
        b'\n' | b'\\' | b'.' | b'=' => true,
        b' ' | b'\t' => run_start < 2 || matches!(text[run_start - 2], b'\n' | b' ' | b'\t' | b'n'),
        _ => false,
    };
    if !maybe || keywords.longest < 2 {
        return None;
    }
    keyword_cut_at_line_start(text, run_start, keywords)
}

/// [`keyword_cut_before`] past its first test: kept out of the run finder's loop.
#[inline(never)]
fn keyword_cut_at_line_start(
    text: &[u8],
    run_start: usize,
    keywords: &CutKeywords,
) -> Option<usize> {
    // The run's line starts after its lead of token characters and its indentation; a
    // lead starting with the `n` of a `\n` written out starts after that `n`.
    let mut line = run_start;
    let floor = run_start.saturating_sub(MAX_LEAD_BEFORE_RUN);
    while line > floor && is_token_byte(text[line - 1]) {
        line -= 1;
    }
    if line > 0 && text[line - 1] == b'\\' && text[line] == b'n' {
        line += 1;
    }
    let content = line;
    let indent_floor = line.saturating_sub(MAX_INDENT);
    while line > indent_floor && matches!(text[line - 1], b' ' | b'\t') {
        line -= 1;
    }
    let brk = break_ending_at(text, line)?;
    // The line before ends in the keyword's head: its last token characters, fewer than
    // the longest keyword's.
    let mut head = brk;
    let head_floor = brk.saturating_sub(keywords.longest - 1);
    while head > head_floor && is_token_byte(text[head - 1]) {
        head -= 1;
    }
    let tail = &text[content..(content + keywords.longest).min(text.len())];
    (head..brk).find(|&q| {
        let starts_word = q == 0
            || (!(text[q - 1].is_ascii_alphanumeric() || text[q - 1] == b'_')
                || escaped(text, q - 1))
                && !escaped(text, q);
        starts_word && keywords.crosses(&text[q..brk], tail)
    })
}

/// The start of the line break (real or written out, `\n` or `\r\n`) that ends just
/// before `at`.
fn break_ending_at(text: &[u8], at: usize) -> Option<usize> {
    let before = &text[..at];
    if before.ends_with(b"\r\n") {
        Some(at - 2)
    } else if before.ends_with(b"\n") {
        Some(at - 1)
    } else if before.ends_with(b"\\r\\n") {
        Some(at - 4)
    } else if before.ends_with(b"\\n") {
        Some(at - 2)
    } else {
        None
    }
}

/// A line at least this wide before a break is read as wrapped at a terminal's or an
/// editor's width (72 to 120 columns, base64 at 64 or 76): there a value that looks
/// complete before the break (an open-length token, a labelled password) is read on
/// across it when the next line starts with a tail's characters. A narrower line's
/// break ends what is on it unless the next line is a cut tail as a whole
/// ([`is_cut_tail`]): a narrow line is as often a list of settings as a cut value.
pub(super) const MIN_WRAPPED_WIDTH: usize = 60;

/// The shortest tail read on after a narrow line's break: shorter lines (`OK`, `v2`,
/// `A1`) are table cells and answers, and a value cut that late is mostly found before
/// the break already.
const MIN_NARROW_TAIL: usize = 4;

/// Whether the line from `at`, the first after a narrow line's break, is the shape a
/// deliberately cut tail leaves: one run of token characters, at least
/// [`MIN_NARROW_TAIL`] long, that ends the line (a break, the text's end, or a closing
/// quote, `\"` included), holds a digit or a capital letter, and reads as neither words
/// nor numbers ([`reads_as_words`]) nor a hash or UUID on a line of its own
/// ([`is_id_line`]). What a narrow line's next line usually is, a setting
/// (`region: eu`), a word (`EOF`, `END`, `fi`), an id or a version (`ID123`,
/// `HTTP/1.1`, `2024-01-01`), a commit hash or a sentence, is none of that.
fn is_cut_tail(text: &[u8], at: usize) -> bool {
    let Some(end) = run_end(text, at, at + MAX_PIECE) else {
        return false;
    };
    let tail = &text[at..end];
    let rest = &text[end..];
    let ends_line = matches!(rest, [] | [b'\n' | b'\r' | b'"' | b'\'' | b'`', ..])
        || [&b"\\n"[..], b"\\r", b"\\\""]
            .iter()
            .any(|escape| rest.starts_with(escape));
    tail.len() >= MIN_NARROW_TAIL
        && ends_line
        && tail
            .iter()
            .any(|b| b.is_ascii_digit() || b.is_ascii_uppercase())
        && !reads_as_words(tail)
        && !is_id_line(tail)
}

/// Whether every part of `run` between its punctuation (`_-./+=`) is a word or a number:
/// letters in one case or capitalised words run together (`end`, `EOF`, `Region`,
/// `nextToken`), then digits, either left out (`ID123`, `x86`, `v1`, `2024`).
/// `HTTP/1.1`, `eu-west-1`, `node-01`, `README.md` are; random characters mixed in case
/// and digits (`Lp2Rz9Kw`, `7pQ2Xz`) are not. Digits before a word (`2nd`, `64bit`) are
/// not read as one: a random tail of hex or of capitals and digits starts so too often
/// (`3fa9`, `7PQ2`).
///
/// Read part by part, so a random tail is turned away at its first letter after a digit,
/// not after a search for its part's end (on a narrow line of tail after tail, that
/// search was a tenth of the time).
fn reads_as_words(run: &[u8]) -> bool {
    let mut rest = run;
    loop {
        let letters = rest.iter().take_while(|b| b.is_ascii_alphabetic()).count();
        let digits = rest[letters..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count();
        if !is_word(&rest[..letters]) {
            return false;
        }
        match rest.get(letters + digits) {
            None => return true,
            // A letter after the digits.
            Some(b) if b.is_ascii_alphanumeric() => return false,
            Some(_) => rest = &rest[letters + digits + 1..],
        }
    }
}

/// Letters that read as a word: all small, all capitals, or words each starting with one
/// capital and going on in at least two small letters (`Region`, `nextToken`,
/// `NextPage`). Random letters mixed in case (`xQvLpR`) are not, nor are words with a
/// two-letter one among them (`EndOfFile`): a price paid to let fewer random tails go.
fn is_word(letters: &[u8]) -> bool {
    if letters.iter().all(u8::is_ascii_lowercase) || letters.iter().all(u8::is_ascii_uppercase) {
        return true;
    }
    let mut small_after_capital = 2;
    for &b in letters {
        if b.is_ascii_uppercase() {
            if small_after_capital < 2 {
                return false;
            }
            small_after_capital = 0;
        } else {
            small_after_capital += 1;
        }
    }
    small_after_capital >= 2
}

/// Whether `run` is an id printed on a line of its own: a UUID, or the hex digits of an
/// MD5, SHA-1 or SHA-256 hash (32, 40 or 64 of them, in one case).
fn is_id_line(run: &[u8]) -> bool {
    let uuid = run.len() == 36
        && run
            .split(|&b| b == b'-')
            .map(<[u8]>::len)
            .eq([8, 4, 4, 4, 12]);
    let hash = matches!(run.len(), 32 | 40 | 64);
    let one_case =
        || !(run.iter().any(u8::is_ascii_lowercase) && run.iter().any(u8::is_ascii_uppercase));
    (uuid || hash)
        && one_case()
        && run
            .iter()
            .all(|&b| b.is_ascii_hexdigit() || (uuid && b == b'-'))
}

/// The break (real or written out) that ends the line holding `at`, looked for within
/// [`MAX_PIECE`] bytes: where it starts, and its length (indentation included) when a
/// token character follows it.
fn line_break_after(text: &[u8], at: usize) -> Option<(usize, Option<usize>)> {
    let limit = (at + MAX_PIECE).min(text.len());
    for c in memchr::memchr2_iter(b'\n', b'\\', &text[at..limit]) {
        let c = at + c;
        let start = if text[c] == b'\n' {
            if c > at && text[c - 1] == b'\r' {
                c - 1
            } else {
                c
            }
        } else if text[c..].starts_with(b"\\n") || text[c..].starts_with(b"\\r\\n") {
            c
        } else {
            continue;
        };
        let sep = separator_at(text, start)
            .filter(|&(kind, _)| kind == Separator::Break)
            .map(|(_, len)| len);
        return Some((start, sep));
    }
    None
}

/// Rebuilds into `out` the end of the line holding a keyword hit at `hit`, from `label`
/// bytes before the hit (where a labelled row's match starts; not before the line), to
/// the break that ends the line, then the pieces after the break as [`rejoin`] reads
/// them. Returns the end of what was read, or else where the next hit worth trying may
/// start: past the line's break when the line does not end inside a run of token
/// characters or has no token's tail after it (a line narrower than
/// [`MIN_WRAPPED_WIDTH`] needs a whole line of one, [`is_cut_tail`]; every hit on the
/// line gets the same answer), and near the end of the bytes looked through when no
/// break was found (so a text of one long line with hits all along it is searched about
/// once, not once per hit).
///
/// This reads on what the plain scan found complete, or did not find at all, before a
/// wrap or a cut: an open-length token whose head is already a token (`glpat-…` at the
/// end of an 80-column line, its tail on the next), a labelled value cut by the wrap
/// (`DB_PASSWORD=xQ7v` then `Lp2Rz9Kw`), the same on a narrow line or column.
pub(super) fn rejoin_wrapped(
    source: &str,
    hit: usize,
    label: usize,
    out: &mut Derived,
) -> Result<usize, usize> {
    let text = source.as_bytes();
    let Some((brk, sep)) = line_break_after(text, hit) else {
        return Err((hit + MAX_PIECE)
            .saturating_sub(WRAP_LOOK_BACK)
            .max(hit + 1));
    };
    let line_done = Err(brk + 1);
    let Some(sep) = sep else {
        return line_done;
    };
    if brk == 0 || !is_token_byte(text[brk - 1]) {
        return line_done;
    }
    // A line longer than `MAX_PIECE` is wide; where it starts does not matter then.
    let width = line_len(text, brk).unwrap_or(MAX_PIECE);
    let next = brk + sep;
    // What follows a complete value on a wide line is as often the next line's word
    // (`region`, `LOG_LEVEL`) as a tail: a token's tail holds a digit or a capital letter
    // (all but 3% of random 4-character ones), a lower-case word does not. After a narrow
    // line the whole next line must be a cut tail's.
    let tail_like = if width < MIN_WRAPPED_WIDTH {
        is_cut_tail(text, next)
    } else {
        run_end(text, next, next + MAX_PIECE).is_some_and(|next_end| {
            text[next..next_end]
                .iter()
                .any(|b| b.is_ascii_digit() || b.is_ascii_uppercase())
        })
    };
    if !tail_like {
        return line_done;
    }
    let start = hit.saturating_sub(label).max(brk.saturating_sub(width));
    out.clear();
    out.push_verbatim(source, start..brk);
    chain(source, brk + sep, Separator::Break, Some(width), out).ok_or(brk + 1)
}

/// A hit this close to the end of the bytes searched for a line's break, in vain, is
/// searched again ([`rejoin_wrapped`]): its line may end just past them.
const WRAP_LOOK_BACK: usize = 128;

/// A character of a URL or form body that a `%XX` run is read over.
#[inline]
fn is_url_byte(b: u8) -> bool {
    b.is_ascii_graphic() && !matches!(b, b'"' | b'\'' | b'`' | b'<' | b'>' | b'&' | b'\\')
}

fn hex_value(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|v| v as u8)
}

/// The byte escaped at `at` when `text[at..]` starts with `%` and two hex digits.
fn escape_at(text: &[u8], at: usize) -> Option<u8> {
    if text.get(at) != Some(&b'%') {
        return None;
    }
    let high = hex_value(*text.get(at + 1)?)?;
    let low = hex_value(*text.get(at + 2)?)?;
    Some(high << 4 | low)
}

/// Calls `f(derived)` for each run of URL characters holding a `%XX` escape, decoded
/// (each escape becomes its byte; a byte outside printable ASCII, a space). Runs do not
/// overlap, so each byte of `text` is decoded once at most.
pub(super) fn for_each_percent_run(text: &[u8], out: &mut Derived, mut f: impl FnMut(&Derived)) {
    let mut done = 0;
    for pct in memchr::memchr_iter(b'%', text) {
        if pct < done || escape_at(text, pct).is_none() {
            continue;
        }
        let mut start = pct;
        while start > done && is_url_byte(text[start - 1]) {
            start -= 1;
        }
        let mut end = pct;
        while end < text.len() && is_url_byte(text[end]) {
            end += 1;
        }
        out.clear();
        let mut at = start;
        while at < end {
            match escape_at(text, at) {
                Some(byte) if at + 3 <= end => {
                    out.push(byte, at..at + 3);
                    at += 3;
                }
                _ => {
                    out.push(text[at], at..at + 1);
                    at += 1;
                }
            }
        }
        f(out);
        done = end;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The line's length found by `memrchr2` is the one a walk back byte by byte finds:
    /// real and written-out breaks, a backslash that escapes something else, a `\\n`
    /// whose backslash is just before the floor, lines longer than the floor.
    #[test]
    fn line_lengths_agree_with_a_walk_back() {
        fn walk_back(text: &[u8], end: usize) -> Option<usize> {
            let floor = end.saturating_sub(MAX_PIECE);
            let mut at = end;
            while at > floor {
                let b = text[at - 1];
                if b == b'\n' || (b == b'n' && escaped(text, at - 1)) {
                    return Some(end - at);
                }
                at -= 1;
            }
            (at == 0).then_some(end)
        }
        let mut r = crate::test_rng::Rng(0x11E_1E46);
        let alphabet = b"ab\\n\n t";
        for _ in 0..4000 {
            let len = (r.next() % 2200) as usize;
            let text: Vec<u8> = (0..len)
                .map(|_| {
                    if r.next().is_multiple_of(64) {
                        alphabet[(r.next() % alphabet.len() as u64) as usize]
                    } else {
                        b'x'
                    }
                })
                .collect();
            for _ in 0..8 {
                let end = (r.next() % (len as u64 + 1)) as usize;
                assert_eq!(
                    line_len(&text, end),
                    walk_back(&text, end),
                    "end {end} of {len}"
                );
            }
        }
        // Breaks right at the floor, one byte before it and after it.
        for shift in 0..4 {
            for brk in [&b"\n"[..], b"\\n"] {
                let mut text = vec![b'x'; MAX_PIECE + 8];
                let end = text.len();
                let at = end - MAX_PIECE - 2 + shift;
                text[at..at + brk.len()].copy_from_slice(brk);
                assert_eq!(
                    line_len(&text, end),
                    walk_back(&text, end),
                    "{shift} {brk:?}"
                );
            }
        }
    }

    fn rejoined(text: &str, hit: usize) -> Option<(String, usize)> {
        let mut out = Derived::default();
        let end = rejoin(text, hit, &mut out)?;
        Some((out.text.clone(), end))
    }

    #[test]
    fn a_cut_run_is_rejoined_across_breaks_of_one_kind() {
        assert_eq!(
            rejoined("x ghp_abc\ndef\r\nghi z", 2),
            Some(("ghp_abcdef".into(), 13))
        );
        // A chain goes on while its lines are as wide as the first one.
        assert_eq!(
            rejoined("ghp_ab\\nghp_cd\\nefghij\\nkl\\nLOG=1", 8),
            Some(("ghp_cdefghijkl".into(), 26))
        );
        assert_eq!(
            rejoined("SETTING=ghp_ab\nrest_of_it\nLOG_LEVEL=info", 8),
            Some(("ghp_abrest_of_it".into(), 25))
        );
        // Indentation after a break is skipped; a spaced token needs a long head.
        assert_eq!(
            rejoined("ghp_ab\n    cdef", 0),
            Some(("ghp_abcdef".into(), 15))
        );
        assert_eq!(rejoined("ghp_ab cdef", 0), None);
        assert_eq!(
            rejoined("ghp_aBcdefgh ijkl mnop qr", 0),
            Some(("ghp_aBcdefghijklmnopqr".into(), 25))
        );
        // A run that is not cut, or runs on too long, is not read.
        assert_eq!(rejoined("ghp_abcdef, next", 0), None);
        assert_eq!(rejoined(&format!("ghp_{}\nx", "a".repeat(1100)), 0), None);
        // A spaced head of one word is not a token's.
        assert_eq!(rejoined("glpat-example lorem ipsum dolor", 0), None);
    }

    /// After a token's full-width middle lines, the next line is its last piece only
    /// when it is not an assignment's label (`region = …` once was read in).
    #[test]
    fn a_last_piece_stops_before_an_assignment() {
        let lines = "ghp_abcdefgh\nijklmnopqrst\n";
        for next in [
            "region = eu-west-1",
            "region=eu-west-1",
            "region: eu",
            "LOG := 1",
        ] {
            assert_eq!(
                rejoined(&format!("{lines}{next}"), 0),
                Some(("ghp_abcdefghijklmnopqrst".into(), 25)),
                "{next}"
            );
        }
        // A genuine short last piece is still read, up to a quote, a space or the end.
        for (next, end) in [("uv7X", 30), ("uv7X\" more", 30), ("uv7X is it", 30)] {
            assert_eq!(
                rejoined(&format!("{lines}{next}"), 0),
                Some(("ghp_abcdefghijklmnopqrstuv7X".into(), end)),
                "{next}"
            );
        }
        // Nor is a name before a group that starts with `=` (a spaced token's checksum).
        assert_eq!(
            rejoined(&format!("{lines}uv7x =46D0"), 0),
            Some(("ghp_abcdefghijklmnopqrstuv7x".into(), 30))
        );
        // Base64 padding and a checksum after a random tail are no assignments.
        assert_eq!(
            rejoined(&format!("{lines}uv7X=="), 0),
            Some(("ghp_abcdefghijklmnopqrstuv7X==".into(), 32))
        );
        assert_eq!(
            rejoined(&format!("{lines}uv7X=46D0A07B"), 0),
            Some(("ghp_abcdefghijklmnopqrstuv7X=46D0A07B".into(), 39))
        );
        // The piece right after the cut is no label's either: no rejoin at all.
        assert_eq!(rejoined("ghp_ab\nregion = eu", 0), None);
    }

    fn wrapped(text: &str, hit: usize) -> Option<String> {
        let mut out = Derived::default();
        rejoin_wrapped(text, hit, 4, &mut out)
            .ok()
            .map(|_| out.text.clone())
    }

    #[test]
    fn a_wide_line_is_read_on_into_a_tail_that_starts_the_next_line() {
        let wide = "w".repeat(MIN_WRAPPED_WIDTH);
        let text = format!("{wide} pw=ab\\nC9d e");
        let hit = wide.len() + 1;
        assert_eq!(
            wrapped(&text, hit),
            Some(format!("{wide} pw=abC9d")[hit - 4..].into())
        );
        // A next line without a digit or a capital, a line ending in a space: not read on.
        assert_eq!(wrapped(&format!("{wide} pw=ab\nregion"), hit), None);
        assert_eq!(wrapped(&format!("{wide} pw=ab \nC9d"), hit), None);
    }

    /// A narrow line (issue 40) is read on only when its next line, as a whole, is a cut
    /// tail's shape; before the narrow-line pass every one of these was `None`.
    #[test]
    fn a_narrow_line_is_read_on_only_into_a_whole_line_of_tail() {
        for (text, want) in [
            ("DB_pw=xQ7v\nLp2Rz9Kw", "DB_pw=xQ7vLp2Rz9Kw"),
            ("DB_pw=xQ7v\r\n  Lp2Rz9Kw\nPORT=1", "DB_pw=xQ7vLp2Rz9Kw"),
            ("pw=ab\\nC9d7\\n", "pw=abC9d7"),
            ("\"pw=ab\n7pQ2Xz\", next", "\"pw=ab7pQ2Xz"),
            ("{\"log\": \"pw=ab\\n7pQ2Xz\\\"\"}", "\": \"pw=ab7pQ2Xz"),
            // Hex, or capitals and digits, is a tail unless it is a whole hash or UUID
            // or starts with a word.
            ("key=3fa9\n0c1d2e", "key=3fa90c1d2e"),
            ("key=AKQ2\n7PQ2X", "key=AKQ27PQ2X"),
        ] {
            let hit = text.find("pw=").or(text.find("key=")).unwrap();
            assert_eq!(wrapped(text, hit).as_deref(), Some(want), "{text:?}");
        }
        for next in [
            "C9d",
            "region",
            "EOF",
            "END",
            "Done",
            "NextPage",
            "EOF_MARKER",
            "ID123",
            "Region2: x",
            "region = eu-west-1",
            "region=eu-west-1",
            "HTTP/1.1",
            "HTTP/1.1 200 OK",
            "2024-01-01",
            "v1.2.3",
            "x86_64",
            "node-01",
            "TEMPOR28",
            "README.md",
            "12345",
            "7pQ2Xz and more",
            "7pQ2Xz ",
            "0123456789abcdef0123456789abcdef01234567",
            "0123456789ABCDEF0123456789ABCDEF",
            "123e4567-e89b-12d3-a456-426614174000",
        ] {
            let text = format!("pw=ab\n{next}");
            assert_eq!(wrapped(&text, 0), None, "{text:?}");
        }
    }

    /// Read part by part, a run reads as words exactly when each of its parts between
    /// punctuation, split first, is a word then digits: over every run of up to five
    /// characters from a small alphabet of each kind, and random longer ones.
    #[test]
    fn runs_read_as_words_part_by_part_as_split_first() {
        let split_first = |run: &[u8]| {
            run.split(|b| !b.is_ascii_alphanumeric()).all(|part| {
                let letters = part.iter().take_while(|b| b.is_ascii_alphabetic()).count();
                let (word, digits) = part.split_at(letters);
                digits.iter().all(u8::is_ascii_digit) && is_word(word)
            })
        };
        let alphabet = b"aZe7-.";
        let mut run = Vec::new();
        let mut words = 0;
        for n in 0..6u32 {
            for mut code in 0..alphabet.len().pow(n) {
                run.clear();
                for _ in 0..n {
                    run.push(alphabet[code % alphabet.len()]);
                    code /= alphabet.len();
                }
                words += usize::from(split_first(&run));
                assert_eq!(reads_as_words(&run), split_first(&run), "{run:?}");
            }
        }
        let mut seed = 7u64;
        for _ in 0..20_000 {
            run.clear();
            for _ in 0..(seed % 40) {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                run.push(b"abcXYZ0129-._/"[(seed >> 33) as usize % 14]);
            }
            assert_eq!(reads_as_words(&run), split_first(&run), "{run:?}");
        }
        assert!(words > 500, "{words}");
    }

    #[test]
    fn findings_map_back_to_the_pieces_as_written() {
        let text = "k ghp_ab\r\ncd%5Fe";
        let mut out = Derived::default();
        rejoin(text, 2, &mut out).unwrap();
        assert_eq!(out.text, "ghp_abcd");
        let mut pieces = Vec::new();
        assert!(out.for_each_original(0..8, |r| pieces.push(r)));
        assert_eq!(pieces, vec![2..8, 10..12]);
        // Inside one piece nothing is new.
        assert!(!out.for_each_original(0..4, |_| {}));

        let mut runs = Vec::new();
        for_each_percent_run(text.as_bytes(), &mut out, |d| {
            let mut ranges = Vec::new();
            let new = d.for_each_original(0..d.text.len(), |r| ranges.push(r));
            runs.push((d.text.clone(), ranges, new));
        });
        let expected: Vec<Range<usize>> = std::iter::once(10..16).collect();
        assert_eq!(runs, vec![("cd_e".to_string(), expected, true)]);
    }

    /// `Derived::for_each_original` over a per-byte list of origins, as it was written
    /// before pieces: the reference the pieces must agree with.
    fn by_bytes(origins: &[Range<usize>], range: Range<usize>) -> (Vec<Range<usize>>, bool) {
        let mut runs = Vec::new();
        if range.is_empty() || range.end > origins.len() {
            return (runs, false);
        }
        let mut start = origins[range.start].start;
        for i in range.clone() {
            let last = i + 1 == range.end;
            if last || origins[i + 1].start != origins[i].end {
                runs.push(start..origins[i].end);
                if !last {
                    start = origins[i + 1].start;
                }
            }
        }
        let span = origins[range.end - 1].end - origins[range.start].start;
        let new = runs.len() > 1 || span != range.len();
        (runs, new)
    }

    /// Checks every range of a short derived text, and random ones of a longer one.
    fn check_against_bytes(d: &Derived, r: &mut crate::test_rng::Rng, what: &str) -> bool {
        let len = d.text.len();
        assert_eq!(d.byte_origins.len(), len, "{what}");
        let ranges: Vec<Range<usize>> = if len <= 24 {
            (0..=len)
                .flat_map(|s| (s..=len + 1).map(move |e| s..e))
                .collect()
        } else {
            (0..200)
                .map(|_| {
                    let s = r.below(len + 1);
                    s..s + r.below(len + 2 - s)
                })
                .collect()
        };
        let mut crossing = false;
        for range in ranges {
            let mut runs = Vec::new();
            let new = d.for_each_original(range.clone(), |run| runs.push(run));
            let want = by_bytes(&d.byte_origins, range.clone());
            assert_eq!((runs, new), want, "{what}: {:?} {range:?}", d.text);
            crossing |= want.1;
        }
        crossing
    }

    /// The pieces map every range of a rejoined, a wrapped or a percent-decoded text back
    /// to the same original runs, with the same answer to "new to the plain scan", as a
    /// list of each derived byte's origin does: also after pieces are dropped.
    #[test]
    fn pieces_map_back_as_a_list_per_byte_does() {
        const PARTS: &[&str] = &[
            "ghp_",
            "- ",
            "pw=",
            "x",
            "Lp2R",
            "z9Kw",
            "7pQ2Xz",
            "abcdefgh",
            "AB12cd34",
            "\n",
            "\r\n",
            "\\n",
            "\\r\\n",
            "\n    ",
            " ",
            "\t",
            "%5F",
            "%41",
            "%e9",
            "%zz",
            "=",
            "é",
            // Wrapped and grouped tokens: a chain of middle pieces, words after them.
            "ghp_Ab12\nCd34\nEf56\nGh7\nword",
            "ghp_Ab12%5F\r\nCd34\r\nxy",
            "ghp_Ab12Cd34Xy Ef56Gh78Ij90 Kl12Mn34Op56 word and",
        ];
        let mut r = crate::test_rng::Rng(0x0D1F_F5E7);
        let mut out = Derived::default();
        let (mut rejoins, mut drops, mut wraps, mut percents, mut crossing) = (0, 0, 0, 0, 0);
        for round in 0..400 {
            let mut text = String::new();
            while text.len() < 80 {
                text.push_str(PARTS[r.below(PARTS.len())]);
            }
            let bytes = text.as_bytes();
            for hit in 0..bytes.len() {
                if rejoin(&text, hit, &mut out).is_some() {
                    rejoins += 1;
                    loop {
                        let what = format!("round {round}, rejoin at {hit} of {text:?}");
                        crossing += usize::from(check_against_bytes(&out, &mut r, &what));
                        if !out.drop_last_piece() {
                            break;
                        }
                        drops += 1;
                    }
                    // Cut anywhere, inside a piece too.
                    out.truncate(r.below(out.text.len() + 1));
                    let what = format!("round {round}, rejoin at {hit} of {text:?}, truncated");
                    check_against_bytes(&out, &mut r, &what);
                }
                if rejoin_wrapped(&text, hit, 4, &mut out).is_ok() {
                    wraps += 1;
                    let what = format!("round {round}, wrapped at {hit} of {text:?}");
                    crossing += usize::from(check_against_bytes(&out, &mut r, &what));
                }
            }
            for_each_percent_run(bytes, &mut out, |d| {
                percents += 1;
                let what = format!("round {round}, percent run of {text:?}");
                crossing += usize::from(check_against_bytes(d, &mut r, &what));
            });
        }
        // Each shape was built often enough for the comparison to mean something.
        assert!(
            rejoins > 500 && drops > 50 && wraps > 100 && percents > 300 && crossing > 1000,
            "{rejoins} rejoins, {drops} drops, {wraps} wraps, {percents} percent runs, \
             {crossing} crossing"
        );
    }

    /// A cut token's rejoined text is answered for by the narrow line's text it is, or
    /// is the end of after a space: the same text when it found something or has no
    /// pieces to drop; the end of one that found nothing, only when no detector reads the
    /// text's start and no word character comes before the token. What is answered for
    /// is exactly what `rejoin` would have read.
    #[test]
    fn a_cut_token_is_answered_for_by_the_wrapped_line_it_ends() {
        let nothing = ScanOutcome {
            added: 0,
            nothing: true,
        };
        let one = ScanOutcome {
            added: 1,
            nothing: false,
        };
        let answers = |text: &str, hit: usize, outcome: ScanOutcome, widened: bool| {
            let mut wrapped = WrappedTexts::default();
            let mut out = Derived::default();
            let line_start = text[..hit].rfind('\n').map_or(0, |i| i + 1);
            let end = rejoin_wrapped(text, hit, 64, &mut out).unwrap();
            assert!(out.pieces[0].start == line_start, "{text:?}: {out:?}");
            wrapped.note(&out, end, outcome);
            let answer = wrapped.answers_for(text, hit, widened);
            if answer.is_some() {
                assert_eq!(answer, rejoin(text, hit, &mut out), "{text:?}");
            }
            answer
        };
        let tail = "\n  Lp2Rz9Kw7Zq3Xw9\n";
        let starts = format!("ghp_abcdefghij0123456789{tail}");
        for (outcome, widened) in [(one, false), (nothing, false), (nothing, true)] {
            assert!(answers(&starts, 0, outcome, widened).is_some());
        }
        let after = format!("- ghp_abcdefghij0123456789{tail}");
        assert!(answers(&after, 2, nothing, true).is_some());
        assert_eq!(answers(&after, 2, nothing, false), None);
        assert_eq!(answers(&after, 2, one, true), None);
        // A word character before the token (the `t` of `\t` written out).
        let escaped = format!("- x\\tghp_abcdefghij0123456789{tail}");
        let hit = escaped.find("ghp_").unwrap();
        assert_eq!(answers(&escaped, hit, nothing, true), None);
        // Not the run that ends at the break (`=` is a token character, `:` is not).
        let inside = format!("ghp_abc:defghij0123456789{tail}");
        assert_eq!(answers(&inside, 0, nothing, true), None);
        // A keyword inside a word starts no token, and a hit on no noted line has no
        // answer.
        assert_eq!(answers(&after, 3, nothing, true), None);
        let mut wrapped = WrappedTexts::default();
        assert_eq!(wrapped.answers_for(&after, 2, true), None);

        // With pieces to drop, only the same text that found something answers.
        let text = "ghp_Ab12\nCd34Xy9Z\nEf56Qw3R\nGh7\n";
        assert!(answers(text, 0, one, true).is_some());
        assert_eq!(answers(text, 0, nothing, true), None);
        let text = "- ghp_Ab12\n  Cd34Xy9Z10\n  Ef56Qw3R10\n  Gh7\n";
        assert_eq!(answers(text, 2, nothing, true), None);
    }

    #[test]
    fn percent_runs_need_an_escape() {
        let mut n = 0;
        let mut out = Derived::default();
        for_each_percent_run(b"50% of 100%, %zz and %4", &mut out, |_| n += 1);
        assert_eq!(n, 0);
    }
}
