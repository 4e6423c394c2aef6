//! The correlation table (ARCHITECTURE decision 10): request id → what was asked and when.
//!
//! The session keeps one per direction: the client's requests the server has to answer,
//! and the server's requests (sampling, elicitation, roots) the client has to answer. A
//! response needs its entry to know which method and tool it answers (for `tool:`
//! matchers, the tool guard, audit and `duration_us`); at shutdown every client request
//! still here gets an error response. Requests are filed under their id's JSON value
//! ([`IdText::key_of`]), so `1` and `"1"` differ. Entries leave when answered or
//! cancelled, never by age; the table is bounded and a full table makes the session
//! refuse new requests (fail closed) rather than grow.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use super::ids::{IdText, numeric_value};

/// What a pending request asked.
#[derive(Debug, Clone)]
pub struct Entry {
    /// The id as the request carried it: what an error mcpwall answers it with carries.
    pub id: IdText,
    pub method: Arc<str>,
    pub tool: Option<Arc<str>>,
    pub started: Instant,
    /// The request's own decision was audited, so its answer is audited too
    /// (with `duration_us`).
    pub audited: bool,
    /// Order of arrival: "oldest first" must not depend on the clock's resolution or on
    /// the map's order (the same input gives the same output).
    seq: u64,
}

/// The interned names of a request just recorded.
#[derive(Debug, Clone)]
pub struct Names {
    pub method: Arc<str>,
    pub tool: Option<Arc<str>>,
}

/// The table could not take another entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("too many requests in flight ({limit}); refusing new calls until some are answered")]
pub struct Full {
    pub limit: usize,
}

/// Bounded map id → [`Entry`], plus an interner so method and tool names are not
/// allocated per call.
#[derive(Debug)]
pub struct Pending {
    entries: HashMap<IdText, Entry>,
    limit: usize,
    names: Interner,
    /// Entries that are list requests ([`is_list`]).
    lists: usize,
    next_seq: u64,
}

/// Whether a method lists definitions the tool guard checks before calls may use them.
pub fn is_list(method: &str) -> bool {
    matches!(method, "tools/list" | "prompts/list")
}

impl Pending {
    pub fn new(limit: usize) -> Pending {
        Pending {
            // Grown as requests come: a session rarely has more than a few dozen in
            // flight, and a table sized for the limit kept 180 KB resident.
            entries: HashMap::new(),
            limit,
            names: Interner::default(),
            lists: 0,
            next_seq: 0,
        }
    }

    /// Record a forwarded request. A request reusing an id still in flight replaces it.
    /// Returns the interned method and tool names, for the request's audit event.
    pub fn insert(
        &mut self,
        id: &[u8],
        method: &str,
        tool: Option<&str>,
        started: Instant,
        audited: bool,
    ) -> Result<Names, Full> {
        let key = IdText::key_of(id);
        if self.entries.len() >= self.limit && !self.entries.contains_key(&key) {
            return Err(Full { limit: self.limit });
        }
        let names = Names {
            method: self.names.get(method),
            tool: tool.map(|t| self.names.get(t)),
        };
        let entry = Entry {
            id: IdText::new(id),
            method: names.method.clone(),
            tool: names.tool.clone(),
            started,
            audited,
            seq: self.next_seq,
        };
        self.next_seq += 1;
        self.lists += usize::from(is_list(method));
        if let Some(old) = self.entries.insert(key, entry) {
            self.lists -= usize::from(is_list(&old.method));
        }
        Ok(names)
    }

    /// Whether an insert of a new id would fail.
    pub fn is_full(&self) -> bool {
        self.entries.len() >= self.limit
    }

    /// Whether a response with this id would answer a pending request.
    pub fn contains(&self, id: &[u8]) -> bool {
        self.entries.contains_key(&IdText::key_of(id))
    }

    /// The entry a response with this id answers, left in the table.
    pub fn get(&self, id: &[u8]) -> Option<&Entry> {
        self.entries.get(&IdText::key_of(id))
    }

    /// Take the entry a response (or a cancellation) with this id answers.
    pub fn remove(&mut self, id: &[u8]) -> Option<Entry> {
        let entry = self.entries.remove(&IdText::key_of(id))?;
        self.lists -= usize::from(is_list(&entry.method));
        Some(entry)
    }

    /// Take the entry a lax reader would match this id with (see [`numeric_value`]),
    /// after [`Self::remove`] found none: the oldest, should several match.
    pub fn remove_by_number(&mut self, id: &[u8]) -> Option<Entry> {
        let n = numeric_value(id)?;
        let key = self
            .entries
            .iter()
            .filter(|(k, _)| numeric_value(k.as_bytes()) == Some(n))
            .min_by_key(|(_, e)| e.seq)
            .map(|(k, _)| k.clone())?;
        self.remove(key.as_bytes())
    }

    /// Take every entry (shutdown), oldest first.
    pub fn drain(&mut self) -> Vec<Entry> {
        self.lists = 0;
        let mut all: Vec<Entry> = self.entries.drain().map(|(_, e)| e).collect();
        all.sort_by_key(|e| e.seq);
        all
    }

    /// List requests still unanswered.
    pub fn lists(&self) -> usize {
        self.lists
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// An interned copy of a method or tool name.
    pub fn intern(&mut self, name: &str) -> Arc<str> {
        self.names.get(name)
    }
}

/// Shares method and tool names. Bounded: past `MAX_NAMES` distinct names, new ones
/// are allocated per use instead of remembered, so a client inventing names cannot
/// grow memory.
#[derive(Debug, Default)]
struct Interner {
    names: HashMap<Box<str>, Arc<str>>,
    /// The last names handed out, checked before the map: a session uses a handful of
    /// methods and tools, and comparing a short name costs less than hashing it.
    recent: [Option<Arc<str>>; RECENT],
    next: usize,
}

const MAX_NAMES: usize = 1024;
const RECENT: usize = 8;

impl Interner {
    fn get(&mut self, name: &str) -> Arc<str> {
        if let Some(a) = self.recent.iter().flatten().find(|a| ***a == *name) {
            return a.clone();
        }
        let a = match self.names.get(name) {
            Some(a) => a.clone(),
            None => {
                let a: Arc<str> = Arc::from(name);
                if self.names.len() < MAX_NAMES {
                    self.names.insert(name.into(), a.clone());
                }
                a
            }
        };
        self.recent[self.next] = Some(a.clone());
        self.next = (self.next + 1) % RECENT;
        a
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_exact_json_text() {
        let mut p = Pending::new(10);
        let t = Instant::now();
        let names = p.insert(b"1", "tools/call", Some("read"), t, true).unwrap();
        assert!(p.remove(b"\"1\"").is_none());
        let e = p.remove(b"1").unwrap();
        assert_eq!(&*e.method, "tools/call");
        assert_eq!(e.tool.as_deref(), Some("read"));
        // The names handed back for the audit event are the entry's own.
        assert!(Arc::ptr_eq(&names.method, &e.method));
        assert!(Arc::ptr_eq(
            names.tool.as_ref().unwrap(),
            e.tool.as_ref().unwrap()
        ));
        assert!(p.is_empty());
    }

    #[test]
    fn long_ids_round_trip() {
        let mut p = Pending::new(10);
        let id = format!("\"{}\"", "x".repeat(100));
        p.insert(id.as_bytes(), "ping", None, Instant::now(), false)
            .unwrap();
        assert!(p.remove(id.as_bytes()).is_some());
    }

    #[test]
    fn the_same_value_written_otherwise_is_the_same_request() {
        let mut p = Pending::new(10);
        p.insert(br#""ab""#, "ping", None, Instant::now(), false)
            .unwrap();
        let e = p.remove(br#""a\u0062""#).unwrap();
        assert_eq!(e.id.as_bytes(), br#""ab""#);
    }

    #[test]
    fn numbers_written_otherwise_match_only_by_number() {
        let mut p = Pending::new(10);
        let t = Instant::now();
        p.insert(b"2", "tools/call", Some("read"), t, true).unwrap();
        p.insert(b"3", "tools/call", None, t, true).unwrap();
        assert!(p.remove(br#""2""#).is_none());
        assert!(p.remove(b"2.0").is_none());
        let e = p.remove_by_number(br#""2""#).unwrap();
        assert_eq!(e.id.as_bytes(), b"2");
        assert!(p.remove_by_number(b"2.0").is_none());
        assert!(p.remove_by_number(br#""abc""#).is_none());
        assert_eq!(p.len(), 1);
    }

    #[test]
    fn full_table_refuses_new_ids_but_accepts_answers() {
        let mut p = Pending::new(2);
        let t = Instant::now();
        p.insert(b"1", "m", None, t, false).unwrap();
        p.insert(b"2", "m", None, t, false).unwrap();
        assert_eq!(
            p.insert(b"3", "m", None, t, false).unwrap_err(),
            Full { limit: 2 }
        );
        // Reusing an id in flight does not grow the table.
        p.insert(b"2", "m", None, t, false).unwrap();
        assert!(p.remove(b"1").is_some());
        p.insert(b"3", "m", None, t, false).unwrap();
        assert_eq!(p.len(), 2);
    }

    #[test]
    fn unanswered_lists_are_counted() {
        let mut p = Pending::new(10);
        let t = Instant::now();
        p.insert(b"1", "tools/list", None, t, false).unwrap();
        p.insert(b"2", "prompts/list", None, t, false).unwrap();
        p.insert(b"3", "tools/call", Some("x"), t, false).unwrap();
        assert_eq!(p.lists(), 2);
        // Replaced by a request that is not a list.
        p.insert(b"2", "ping", None, t, false).unwrap();
        assert_eq!(p.lists(), 1);
        p.remove_by_number(br#""1""#).unwrap();
        assert_eq!(p.lists(), 0);
        p.insert(b"4", "tools/list", None, t, false).unwrap();
        p.drain();
        assert_eq!(p.lists(), 0);
    }

    #[test]
    fn names_are_shared() {
        let mut p = Pending::new(10);
        let a = p.intern("read_file");
        let b = p.intern("read_file");
        assert!(Arc::ptr_eq(&a, &b));
        // Still shared once it has left the recent names.
        for i in 0..2 * RECENT {
            assert_eq!(&*p.intern(&format!("tool_{i}")), format!("tool_{i}"));
        }
        assert!(Arc::ptr_eq(&a, &p.intern("read_file")));
        assert_eq!(&*p.intern("read_fil"), "read_fil");
    }
}
