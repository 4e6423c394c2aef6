//! A memo of short texts a matcher has found to match nothing.
//!
//! Argument keys and short values (`path`, `utf-8`, `GET`) recur call after call and
//! almost never match. Walking a regex DFA or the secret prefilter for one costs a few
//! hundred instructions, most of them set-up; a slot compare costs about twenty. Only
//! exact texts are remembered (length and every byte), so a hit is always right, and a
//! text that hashes to a taken slot replaces it, so the memo never grows. The matcher
//! must be deterministic and the memo its own: a memo travels with its matcher's cache.

use std::sync::atomic::{AtomicU64, Ordering};

/// A number no other matcher built by this process has (never 0), so a cache or memo
/// can tell whose it is.
pub(crate) fn next_matcher_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// Short texts known to match nothing, in slots picked by a hash of their bytes.
#[derive(Debug, Clone)]
pub(crate) struct MissMemo {
    slots: Box<[MissSlot; MISS_SLOTS]>,
}

/// `len` 0: empty slot (an empty text is never remembered).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct MissSlot {
    len: u8,
    bytes: [u64; 2],
}

/// A power of two: a slot is the top bits of a multiplicative hash.
const MISS_SLOTS: usize = 64;
const _: () = assert!(MISS_SLOTS.is_power_of_two());
/// Longest text remembered.
const MISS_TEXT: usize = 16;

impl Default for MissMemo {
    fn default() -> MissMemo {
        MissMemo {
            slots: Box::new([MissSlot::default(); MISS_SLOTS]),
        }
    }
}

impl MissSlot {
    /// The slot value for `text`, if it is short enough to remember.
    pub(crate) fn of(text: &[u8]) -> Option<MissSlot> {
        if text.is_empty() || text.len() > MISS_TEXT {
            return None;
        }
        let mut padded = [0u8; MISS_TEXT];
        padded[..text.len()].copy_from_slice(text);
        let word = |i: usize| u64::from_le_bytes(padded[i..i + 8].try_into().unwrap_or_default());
        Some(MissSlot {
            len: text.len() as u8,
            bytes: [word(0), word(8)],
        })
    }

    fn index(&self) -> usize {
        let mixed = (self.bytes[0] ^ self.bytes[1].rotate_left(29) ^ u64::from(self.len))
            .wrapping_mul(0x9e37_79b9_7f4a_7c15);
        (mixed >> (64 - MISS_SLOTS.trailing_zeros())) as usize
    }

    fn same(&self, other: &MissSlot) -> bool {
        self.len == other.len && self.bytes == other.bytes
    }
}

impl MissMemo {
    pub(crate) fn contains(&self, key: &MissSlot) -> bool {
        self.slots[key.index()].same(key)
    }

    pub(crate) fn insert(&mut self, key: MissSlot) {
        self.slots[key.index()] = key;
    }
}
