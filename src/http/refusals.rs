//! HTTP-level refusals (401, 403 and the like, refused before a session saw anything) in
//! the audit log without letting one client write it full: the first refusal of each
//! (peer address, reason) in a period is logged as it happens, the rest are counted, and
//! one summary line per period gives the counts. Every field taken from the request is
//! cut to a bound and escaped before it is logged ([`bounded`]).

use std::collections::HashMap;
use std::fmt::Write as _;
use std::net::IpAddr;
use std::sync::Mutex;

/// Longest text of a request field (method, path, header value) in a log line, in chars.
pub const FIELD_CHARS: usize = 48;
/// Longest reason in a log line, in chars.
pub const REASON_CHARS: usize = 256;
/// Distinct (peer, reason) pairs tracked in one period; refusals past them are counted
/// under "other" (bounds memory when many addresses are refused).
const MAX_KEYS: usize = 1024;
/// Pairs named in a summary line; the rest are folded into its total.
const SUMMARY_KEYS: usize = 8;

/// The refusals of the current period.
#[derive(Debug, Default)]
pub struct Refusals {
    period: Mutex<Period>,
}

#[derive(Debug, Default)]
struct Period {
    /// (peer, reason) → refusals in this period.
    counts: HashMap<(Option<IpAddr>, Box<str>), u64>,
    /// Refusals of pairs past [`MAX_KEYS`].
    other: u64,
}

impl Refusals {
    /// Count one refusal; `true` when it is the first of its (peer, reason) this period
    /// and is to be logged in full.
    pub fn note(&self, peer: Option<IpAddr>, reason: &str) -> bool {
        let mut period = self.period.lock().unwrap_or_else(|e| e.into_inner());
        let key = (peer, Box::from(reason));
        if let Some(n) = period.counts.get_mut(&key) {
            *n += 1;
            return false;
        }
        if period.counts.len() >= MAX_KEYS {
            period.other += 1;
            return false;
        }
        period.counts.insert(key, 1);
        true
    }

    /// End the period: one line giving the refusals not logged one by one, or `None`
    /// when there were none.
    pub fn summary(&self) -> Option<String> {
        let period = std::mem::take(&mut *self.period.lock().unwrap_or_else(|e| e.into_inner()));
        let mut unlogged: Vec<_> = period
            .counts
            .into_iter()
            .filter(|(_, n)| *n > 1)
            .map(|(k, n)| (k, n - 1))
            .collect();
        let total: u64 = unlogged.iter().map(|(_, n)| n).sum::<u64>() + period.other;
        if total == 0 {
            return None;
        }
        unlogged.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
        let mut text = format!("{total} more HTTP refusal(s) since the last summary:");
        for ((peer, reason), n) in unlogged.iter().take(SUMMARY_KEYS) {
            let peer = peer.map_or_else(|| "unknown peer".to_string(), |p| p.to_string());
            let _ = write!(text, " {n} from {peer} ({reason});");
        }
        let rest = unlogged.len().saturating_sub(SUMMARY_KEYS);
        if rest > 0 || period.other > 0 {
            let _ = write!(text, " and others from {rest} more peer/reason pair(s)");
        }
        Some(text)
    }
}

/// `text` as it may appear in a log line: at most [`FIELD_CHARS`] characters, control
/// characters and quotes escaped, with the original length when it was cut.
pub fn bounded(text: &str) -> String {
    bounded_to(text, FIELD_CHARS)
}

/// [`bounded`] to `max` characters (a reason the gateway composed of names it checked
/// may be longer than a request field).
pub fn bounded_to(text: &str, max: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max + 16));
    for (i, c) in text.chars().enumerate() {
        if i == max {
            let _ = write!(out, "…[{} bytes]", text.len());
            break;
        }
        out.extend(c.escape_debug());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_peer_and_reason_then_a_summary_of_the_rest() {
        let r = Refusals::default();
        let a = Some(IpAddr::from([127, 0, 0, 1]));
        let b = Some(IpAddr::from([127, 0, 0, 2]));
        assert!(r.note(a, "no bearer token"));
        for _ in 0..999 {
            assert!(!r.note(a, "no bearer token"));
        }
        assert!(r.note(a, "unknown bearer token"));
        assert!(r.note(b, "no bearer token"));
        let summary = r.summary().unwrap();
        assert!(
            summary.starts_with("999 more HTTP refusal(s)")
                && summary.contains("999 from 127.0.0.1 (no bearer token)"),
            "{summary}"
        );
        assert_eq!(r.summary(), None, "a new period starts empty");
        assert!(
            r.note(a, "no bearer token"),
            "logged again in the next period"
        );
    }

    #[test]
    fn many_peers_are_bounded() {
        let r = Refusals::default();
        for i in 0..(MAX_KEYS as u32 + 10) {
            r.note(Some(IpAddr::from(i.to_be_bytes())), "x");
        }
        assert!(!r.note(Some(IpAddr::from([255, 255, 255, 255])), "x"));
        let summary = r.summary().unwrap();
        assert!(summary.starts_with("11 more"), "{summary}");
        assert!(summary.len() < 1000);
    }

    #[test]
    fn logged_fields_are_cut_and_escaped() {
        let long = "G".repeat(300_000);
        let cut = bounded(&long);
        assert!(cut.len() < 100 && cut.ends_with("…[300000 bytes]"), "{cut}");
        assert_eq!(bounded("a\"b\n\u{1b}"), "a\\\"b\\n\\u{1b}");
    }
}
