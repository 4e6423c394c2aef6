//! An anchored forward search of a lazy DFA that remembers its path, so that the next
//! search of the same automaton over the same text stops as soon as it joins that path.
//!
//! Why: a detector is searched anchored at every keyword hit. On a text made of one
//! keyword repeated (`token=token=…`, 170,000 times in a MiB), the match of every hit
//! runs to the end of the repetition, so each search read the whole rest of it and the
//! scan cost the square of its length (10-15 s per MiB). Two walks of one DFA that are
//! in the same state at the same position read the same bytes from there on: they see
//! the same matches and stop at the same place. So a walk is recorded, and a later walk
//! that reaches a recorded state at the same position takes the rest of its answer from
//! the record. On the runs detectors see (a class repeated, a lazy `[\s\S]*?` up to a
//! footer) walks from different starts are in the same state within a few dozen bytes,
//! so every search costs a few dozen bytes however long its match.
//!
//! The record holds the state at every position that is a multiple of [`STRIDE`] (a
//! joining walk reads at most that many bytes more than it must), as runs of equal
//! state: a walk through one long repetition is one entry.

use std::collections::VecDeque;

use regex_automata::hybrid::LazyStateID;
use regex_automata::hybrid::dfa::{Cache, DFA};
use regex_automata::{Input, MatchError};

/// States are recorded (and walks may join) at positions that are multiples of this.
const STRIDE: usize = 4;
/// A walk is first tried this far without the trail ([`short_walk`]); only one that
/// goes further is walked again with it.
const SHORT_WALK: usize = 16;
/// Longest walk that died whose bytes are remembered as refuting a search
/// ([`Trail::refuted_within`]): each later hit of the detector compares up to this many.
pub(super) const MAX_REFUTED_READ: usize = 128;
/// Most runs a record keeps (16 bytes each): past this, a walk's state is no longer
/// recorded. Only a walk whose state changes at nearly every recorded position (a text
/// full of partial footers, `-----E-----E…`) fills it, after 2 MiB of text.
const MAX_RUNS: usize = 1 << 18;

#[cfg(test)]
thread_local! {
    /// DFA steps taken by this thread's walks (the cost the tests bound).
    pub(super) static WALKED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// The recorded path of the last walk of one DFA in one scan.
#[derive(Debug, Default)]
pub(super) struct Trail {
    /// The scan ([`super::DetectorCache`]'s count) it belongs to: another scan is
    /// another text.
    scan: u64,
    /// The cache's clear count when recorded: clearing the cache renumbers states.
    clears: usize,
    /// `(position, state)` in position order; the state at a recorded position `p` is
    /// that of the last run starting at or before `p`.
    runs: VecDeque<(usize, LazyStateID)>,
    /// Recorded positions are below this.
    end: usize,
    /// The last match the walk saw: the position whose state reported it (one past the
    /// text for a match at the end), and the match's end.
    last_match: Option<(usize, usize)>,
    /// Whether the fields above describe a walk.
    valid: bool,
    /// Whether the recorded walk read to the end of the text.
    ended: bool,
    /// The walk in progress.
    own: Vec<(usize, LazyStateID)>,
    /// The last short walk that died (see [`ShortMemo`]).
    short: Option<ShortMemo>,
    /// The last short walk that went on (see [`GoingMemo`]).
    going: Option<GoingMemo>,
    /// The start and answer of the last walk (see [`search_fwd`]).
    last: Option<(u64, usize, Option<usize>)>,
    /// Whether the shifted ([`GoingMemo`]) and same-start memos are used.
    memos: bool,
    /// Set by each search: `Some(read)` when it found no match and its answer depended
    /// only on the byte before its start and the `read` bytes from it (see
    /// [`Trail::refuted_within`]).
    refuted: Option<usize>,
    /// Set by each search: it found no match, and its path (its own or the trail it
    /// joined) read to the end of the text (see [`Trail::ran_to_end`]).
    ran_to_end: bool,
}

impl Trail {
    pub(super) fn new(memos: bool) -> Trail {
        Trail {
            memos,
            ..Trail::default()
        }
    }

    /// After a search that found no match: `Some(read)` if a search at any other start
    /// `s > 0` with `hay[s - 1..s + read]` equal to this one's bytes finds none either
    /// (see [`same_window`]).
    pub(super) fn refuted_within(&self) -> Option<usize> {
        self.refuted
    }

    /// After a search: whether it found no match on a path that read to the end of the
    /// text. A walk that did has cost as much as one unanchored pass over the rest of
    /// the text, which may then refute every later start at once.
    pub(super) fn ran_to_end(&self) -> bool {
        self.ran_to_end
    }
}

/// Whether walks of one DFA from `start` and from `theirs` read the same bytes for `read`
/// bytes, and so are in the same state after them: a walk's start state depends only on
/// the byte before it (its look-behind; a walk from the start of the text has none and is
/// never compared), each step only on the state and the byte read.
pub(super) fn same_window(hay: &[u8], start: usize, theirs: usize, read: usize) -> bool {
    if start == 0 || theirs == 0 {
        return false;
    }
    let len = read + 1;
    match (
        hay.get(start - 1..start - 1 + len),
        hay.get(theirs - 1..theirs - 1 + len),
    ) {
        (Some(a), Some(b)) => super::bytes_eq(a, b),
        _ => false,
    }
}

/// A walk that read all of its first [`SHORT_WALK`] bytes without dying: a walk from
/// another start over the same bytes (and the same byte before it) is in state `sid`
/// after them, with the same matches, shifted.
///
/// Why: where a label repeats (`SECRETKEYSECRETKEY…`), a row reading an identifier to its
/// end walks far from every hit; skipping its start state and first steps leaves a walk
/// that joins the last one's trail within [`STRIDE`] bytes.
#[derive(Debug, Clone, Copy)]
struct GoingMemo {
    scan: u64,
    /// The cache's clear count when recorded: clearing the cache renumbers states.
    clears: usize,
    start: usize,
    sid: LazyStateID,
    /// The last match within the first bytes: the offsets from `start` of the position
    /// whose state reported it and of its end.
    mat: Option<(usize, usize)>,
}

/// A short walk that ended in the dead state: its answer depends only on the byte before
/// its start (the look-behind of the start state) and the bytes it read, so a walk from
/// another start over the same bytes gives the same answer, shifted.
///
/// Why: on a keyword repeated (`token=token=…`, `ghp_ghp_…`) every hit's walk reads the
/// same few bytes; comparing them costs a few instructions where the walk's start state
/// and steps cost a few hundred.
#[derive(Debug, Clone, Copy)]
struct ShortMemo {
    scan: u64,
    start: usize,
    /// Bytes read from `start` (the last one led to the dead state).
    read: usize,
    /// The match end, as an offset from `start`.
    found: Option<usize>,
}

impl ShortMemo {
    /// The answer of a walk at `start`, if it reads what the remembered one read.
    fn answer(&self, hay: &[u8], start: usize, scan: u64) -> Option<Option<usize>> {
        let same = self.scan == scan && same_window(hay, start, self.start, self.read);
        same.then(|| self.found.map(|f| start + f))
    }
}

/// The end of the leftmost-first match of `dfa` anchored at `input.start()`, as
/// [`DFA::try_search_fwd`] finds it with `earliest(false)`. `input` must be anchored
/// and reach the end of its haystack, and every search passing `trail` must use the
/// same DFA, cache and kind of input.
pub(super) fn search_fwd(
    dfa: &DFA,
    cache: &mut Cache,
    trail: &mut Trail,
    scan: u64,
    input: &Input<'_>,
) -> Result<Option<usize>, MatchError> {
    let hay = input.haystack();
    debug_assert_eq!(input.end(), hay.len());
    let start = input.start();
    trail.refuted = None;
    trail.ran_to_end = false;
    // The same start as the last walk (the suffix of every hit whose secret ends at the
    // end of one run): the same answer.
    if let Some((s, at, answer)) = trail.last
        && trail.memos
        && s == scan
        && at == start
    {
        return Ok(answer);
    }
    let answer = walk_fwd(dfa, cache, trail, scan, input)?;
    trail.last = Some((scan, start, answer));
    Ok(answer)
}

fn walk_fwd(
    dfa: &DFA,
    cache: &mut Cache,
    trail: &mut Trail,
    scan: u64,
    input: &Input<'_>,
) -> Result<Option<usize>, MatchError> {
    let hay = input.haystack();
    let start = input.start();
    if let Some(m) = trail.short
        && let Some(answer) = m.answer(hay, start, scan)
    {
        if answer.is_none() {
            trail.refuted = Some(m.read);
        }
        return Ok(answer);
    }
    let clears_now = cache.clear_count();
    let going = trail.going.filter(|g| {
        trail.memos
            && g.scan == scan
            && g.clears == clears_now
            && start + SHORT_WALK < hay.len()
            && same_window(hay, start, g.start, SHORT_WALK)
    });
    let (mut sid, walked, mut mat) = if let Some(g) = going {
        let shift = |(p, e): (usize, usize)| (start + p, start + e);
        (g.sid, start + SHORT_WALK, g.mat.map(shift))
    } else {
        let sid = dfa.start_state_forward(cache, input)?;
        match short_walk(dfa, cache, trail, sid, hay, start)? {
            ShortWalk::Ended(found) => {
                trail.ran_to_end = found.is_none();
                return Ok(found);
            }
            ShortWalk::Died { read, found } => {
                trail.short = Some(ShortMemo {
                    scan,
                    start,
                    read,
                    found: found.map(|f| f - start),
                });
                if found.is_none() {
                    trail.refuted = Some(read);
                }
                return Ok(found);
            }
            ShortWalk::Going { sid, at, mat } => {
                if trail.memos && cache.clear_count() == clears_now {
                    trail.going = Some(GoingMemo {
                        scan,
                        clears: clears_now,
                        start,
                        sid,
                        mat: mat.map(|(p, e)| (p - start, e - start)),
                    });
                }
                (sid, at, mat)
            }
        }
    };
    // The walk goes on from where the short walk stopped, now with the trail.
    let start = walked;
    let clears = cache.clear_count();
    let joinable = trail.valid && trail.scan == scan && trail.clears == clears;
    let first_recorded = trail.runs.front().map_or(usize::MAX, |r| r.0);
    let mut cursor = 0;
    trail.own.clear();
    let mut recording = true;
    let mut recorded_to = start;
    let mut at = start;
    loop {
        if at.is_multiple_of(STRIDE) {
            if joinable && at >= first_recorded && at < trail.end {
                while cursor + 1 < trail.runs.len() && trail.runs[cursor + 1].0 <= at {
                    cursor += 1;
                }
                if trail.runs[cursor].1 == sid && cache.clear_count() == clears {
                    let found = match trail.last_match {
                        Some(m) if m.0 >= at => Some(m),
                        _ => mat,
                    };
                    join(trail, cursor, at, found, recording);
                    trail.ran_to_end = found.is_none() && trail.ended;
                    return Ok(found.map(|m| m.1));
                }
            }
            if recording {
                if trail.own.last().is_none_or(|r| r.1 != sid) {
                    if trail.own.len() == MAX_RUNS {
                        recording = false;
                    } else {
                        trail.own.push((at, sid));
                    }
                }
                if recording {
                    recorded_to = at + 1;
                }
            }
        }
        if at == hay.len() {
            break;
        }
        #[cfg(test)]
        WALKED.with(|w| w.set(w.get() + 1));
        sid = dfa
            .next_state(cache, sid, hay[at])
            .map_err(|_| MatchError::gave_up(at))?;
        at += 1;
        if sid.is_tagged() {
            if sid.is_match() {
                // Matches are reported one byte late: this state ends one at `at - 1`.
                mat = Some((at, at - 1));
            } else if sid.is_dead() {
                record(
                    trail,
                    scan,
                    clears,
                    cache,
                    recorded_to.max(start),
                    mat,
                    false,
                );
                // Like a short walk that died: nothing but the byte before the start
                // and the bytes read decided it (a near miss such as `postgres://user:`
                // repeated dies some 25 bytes on, at every hit). Only for a few bytes:
                // every later hit compares them.
                let read = at - input.start();
                if mat.is_none() && read <= MAX_REFUTED_READ {
                    trail.refuted = Some(read);
                }
                return Ok(mat.map(|m| m.1));
            } else if sid.is_quit() {
                trail.valid = false;
                return Err(MatchError::quit(hay[at - 1], at - 1));
            }
        }
    }
    let eoi = dfa
        .next_eoi_state(cache, sid)
        .map_err(|_| MatchError::gave_up(hay.len()))?;
    if eoi.is_match() {
        mat = Some((hay.len() + 1, hay.len()));
    }
    record(trail, scan, clears, cache, recorded_to, mat, true);
    trail.ran_to_end = mat.is_none();
    Ok(mat.map(|m| m.1))
}

/// The answer of a walk from `sid` at `start` if it ends within [`SHORT_WALK`] bytes,
/// without reading or writing the trail; `None` when it runs further.
///
/// Why: most walks end within a few bytes (a near miss such as `ghp_ghp_…` dies at its
/// first byte, a label's separator after a handful). For those the trail's bookkeeping
/// (the start of a record, a join, replacing the record) cost several times the steps
/// themselves, and a record of a short walk saves a later walk little. Leaving the trail
/// alone also keeps the record of the last long walk for the next one to join.
fn short_walk(
    dfa: &DFA,
    cache: &mut Cache,
    trail: &mut Trail,
    mut sid: LazyStateID,
    hay: &[u8],
    start: usize,
) -> Result<ShortWalk, MatchError> {
    let stop = hay.len().min(start + SHORT_WALK);
    // As in `search_fwd`: the position whose state reported the last match, and its end.
    let mut mat: Option<(usize, usize)> = None;
    for (i, &byte) in hay[start..stop].iter().enumerate() {
        let at = start + i;
        #[cfg(test)]
        WALKED.with(|w| w.set(w.get() + 1));
        sid = dfa
            .next_state(cache, sid, byte)
            .map_err(|_| MatchError::gave_up(at))?;
        if sid.is_tagged() {
            if sid.is_match() {
                // Matches are reported one byte late: this state ends one at `at`.
                mat = Some((at + 1, at));
            } else if sid.is_dead() {
                return Ok(ShortWalk::Died {
                    read: at + 1 - start,
                    found: mat.map(|m| m.1),
                });
            } else if sid.is_quit() {
                trail.valid = false;
                return Err(MatchError::quit(byte, at));
            }
        }
    }
    if stop < hay.len() {
        return Ok(ShortWalk::Going { sid, at: stop, mat });
    }
    let eoi = dfa
        .next_eoi_state(cache, sid)
        .map_err(|_| MatchError::gave_up(hay.len()))?;
    Ok(ShortWalk::Ended(if eoi.is_match() {
        Some(hay.len())
    } else {
        mat.map(|m| m.1)
    }))
}

enum ShortWalk {
    /// The walk ended at the end of the text: the end of its match, if any.
    Ended(Option<usize>),
    /// The walk died after reading `read` bytes: the end of its match, if any.
    Died { read: usize, found: Option<usize> },
    /// The walk goes on from `at` in state `sid`, with `mat` seen so far.
    Going {
        sid: LazyStateID,
        at: usize,
        mat: Option<(usize, usize)>,
    },
}

/// Keeps the walk just finished as the trail, if its states are still valid.
fn record(
    trail: &mut Trail,
    scan: u64,
    clears: usize,
    cache: &Cache,
    end: usize,
    last_match: Option<(usize, usize)>,
    ended: bool,
) {
    trail.ended = ended;
    trail.valid = cache.clear_count() == clears && !trail.own.is_empty();
    trail.scan = scan;
    trail.clears = clears;
    trail.runs.clear();
    trail.runs.extend(trail.own.drain(..));
    trail.end = end;
    trail.last_match = last_match;
}

/// The walk just joined the trail in run `cursor`: the new trail is the walk's own runs,
/// then the old trail from there on.
fn join(
    trail: &mut Trail,
    cursor: usize,
    at: usize,
    found: Option<(usize, usize)>,
    complete: bool,
) {
    if !complete {
        // The walk's own record stops short of `at`: keep the old trail as it is.
        return;
    }
    trail.last_match = found;
    trail.runs.drain(..cursor);
    // The old trail counts from `at` on: before it, its path may have seen matches that
    // `found` does not hold.
    trail.runs[0].0 = at;
    // The walk's last run, if it is in the state the trail has at `at`, is one run with
    // it (it is not when the state changed at `at` itself: states are recorded after
    // the join check).
    if let Some(&(from, state)) = trail.own.last()
        && state == trail.runs[0].1
    {
        trail.runs[0].0 = from;
        trail.own.pop();
    }
    while let Some(run) = trail.own.pop() {
        trail.runs.push_front(run);
    }
    if trail.runs.len() > 2 * MAX_RUNS {
        trail.runs.truncate(MAX_RUNS);
        trail.end = trail.runs[MAX_RUNS - 1].0 + 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use regex_automata::{Anchored, MatchKind};

    /// Walks joining each other's trails give what a plain search gives, at every start
    /// in increasing (and now and then decreasing) order over long texts made of few
    /// letters, so that walks run long and join often.
    #[test]
    fn joined_walks_agree_with_a_plain_search() {
        let patterns = [
            r"t=[a-z=]{16,}",
            r"(?-u:\b)k[a-z]{4,}(?:[^a-z]|$)",
            r"B[\s\S]*?E|B[a-z]*",
            r"k(?:ab)*c",
            r"[a-z]{3}=[=a-z]*?z",
            r"(?:t|k)[a-z=]{0,9}",
        ];
        let alphabet = b"tk=abzBE ";
        let mut rng = crate::test_rng::Rng(0x9E37_79B9_7F4A_7C15);
        let mut next = || rng.next();
        for pattern in patterns {
            let dfa = DFA::builder()
                .configure(DFA::config().match_kind(MatchKind::LeftmostFirst))
                .build(pattern)
                .unwrap();
            let mut cache = dfa.create_cache();
            let mut plain_cache = dfa.create_cache();
            let mut trail = Trail::new(true);
            for scan in 0..60u64 {
                let len = (next() % 3000) as usize;
                let skew = (next() % alphabet.len() as u64) as usize;
                let text: Vec<u8> = (0..len)
                    .map(|_| match next() % 4 {
                        0 => alphabet[skew],
                        _ => alphabet[(next() % alphabet.len() as u64) as usize],
                    })
                    .collect();
                let mut start = 0usize;
                while start < text.len() {
                    let input = Input::new(&text).range(start..).anchored(Anchored::Yes);
                    let want = dfa
                        .try_search_fwd(&mut plain_cache, &input)
                        .unwrap()
                        .map(|m| m.offset());
                    let got = search_fwd(&dfa, &mut cache, &mut trail, scan, &input).unwrap();
                    assert_eq!(got, want, "{pattern} at {start} of {len}, scan {scan}");
                    start = match next() % 10 {
                        0 => start.saturating_sub((next() % 40) as usize),
                        _ => start + 1 + (next() % 7) as usize,
                    };
                }
            }
        }
    }
}
