//! Identities of built matchers, so a cache or scratch can tell whose it is.

use std::sync::atomic::{AtomicU64, Ordering};

/// A number no other matcher built by this process has (never 0).
pub(crate) fn next() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}
