//! The listener's open connections: at most `gateway.max_connections` in all and
//! `gateway.connections_per_peer` from one address. A connection over either bound takes
//! the place of the one that has been idle longest in that scope (no request being read
//! or answered: a half-open connection, or a keep-alive one between requests); when every
//! one is busy, the new connection is closed at once. A WebSocket leaves the count once
//! upgraded (it is a session, bounded as one).
//!
//! Idle connections also end on their own: hyper's header-read timeout
//! (`gateway.header_timeout_seconds`) runs from the connection's start and from each
//! answer's end until the next request's headers are in, so it is the keep-alive idle
//! time as well (`server.rs`).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

/// One open connection.
#[derive(Debug)]
pub struct Slot {
    peer: IpAddr,
    /// Requests being read or answered (an answer lasts until its body is written or
    /// dropped: an SSE stream keeps its connection busy).
    busy: AtomicUsize,
    /// When the connection last became idle (opened, or its last answer ended).
    idle_since: Mutex<Instant>,
    /// Told when the connection must close to make room.
    close: Notify,
}

impl Slot {
    fn idle_since(&self) -> Option<Instant> {
        (self.busy.load(Ordering::Acquire) == 0)
            .then(|| *self.idle_since.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// A request began on the connection; it is busy until the guard drops.
    pub fn begin(self: &Arc<Self>) -> Busy {
        self.busy.fetch_add(1, Ordering::AcqRel);
        Busy(self.clone())
    }

    /// Wait until the connection is told to close.
    pub async fn closed(&self) {
        self.close.notified().await;
    }
}

/// A request of a connection in progress.
#[derive(Debug)]
pub struct Busy(Arc<Slot>);

impl Drop for Busy {
    fn drop(&mut self) {
        *self.0.idle_since.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
        self.0.busy.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A connection's place in the table; dropping it gives the place back.
pub struct Ticket {
    id: u64,
    pub slot: Arc<Slot>,
    table: Arc<Connections>,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.table.lock().open.remove(&self.id);
    }
}

#[derive(Default)]
struct Table {
    next: u64,
    open: HashMap<u64, Arc<Slot>>,
}

/// See the module docs.
pub struct Connections {
    table: Mutex<Table>,
    max: usize,
    per_peer: usize,
}

impl Connections {
    pub fn new(max: u32, per_peer: u32) -> Arc<Connections> {
        Arc::new(Connections {
            table: Mutex::new(Table::default()),
            max: max as usize,
            per_peer: per_peer as usize,
        })
    }

    fn lock(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A place for a new connection from `peer`, after closing the longest-idle one of
    /// a full scope; `None` when that scope has no idle connection (close the new one).
    pub fn admit(self: &Arc<Self>, peer: IpAddr) -> Option<Ticket> {
        let mut table = self.lock();
        let from_peer = table.open.values().filter(|s| s.peer == peer).count();
        if from_peer >= self.per_peer {
            shed(&mut table, |s| s.peer == peer)?;
        } else if table.open.len() >= self.max {
            shed(&mut table, |_| true)?;
        }
        table.next += 1;
        let id = table.next;
        let slot = Arc::new(Slot {
            peer,
            busy: AtomicUsize::new(0),
            idle_since: Mutex::new(Instant::now()),
            close: Notify::new(),
        });
        table.open.insert(id, slot.clone());
        Some(Ticket {
            id,
            slot,
            table: self.clone(),
        })
    }

    /// Close the connection idle longest, if any (the process is out of descriptors).
    pub fn shed_one(&self) -> bool {
        shed(&mut self.lock(), |_| true).is_some()
    }
}

/// Close and forget the connection idle longest among those `in_scope`.
fn shed(table: &mut Table, in_scope: impl Fn(&Slot) -> bool) -> Option<()> {
    let (id, _) = table
        .open
        .iter()
        .filter(|(_, s)| in_scope(s))
        .filter_map(|(id, s)| Some((*id, s.idle_since()?)))
        .min_by_key(|(_, since)| *since)?;
    let slot = table.open.remove(&id)?;
    // `notify_one` keeps the permit if the connection's task is not waiting yet.
    slot.close.notify_one();
    Some(())
}

/// How long the accept loop pauses after a failed accept: doubling from 10 ms to 1 s, so
/// a process out of descriptors (EMFILE) waits for one instead of spinning.
#[derive(Debug, Default)]
pub struct Backoff {
    failures: u32,
}

impl Backoff {
    pub fn failed(&mut self) -> Duration {
        self.failures = self.failures.saturating_add(1);
        let ms = 10u64 << self.failures.clamp(1, 8).saturating_sub(1);
        Duration::from_millis(ms.min(1000))
    }

    pub fn succeeded(&mut self) {
        self.failures = 0;
    }

    /// Whether this failure is the first of a run (logged; the rest are not).
    pub fn is_first(&self) -> bool {
        self.failures == 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([127, 0, 0, last])
    }

    #[test]
    fn a_full_table_closes_the_longest_idle_connection_never_a_busy_one() {
        let table = Connections::new(3, 2);
        let a = table.admit(ip(1)).unwrap();
        std::thread::sleep(Duration::from_millis(2));
        let b = table.admit(ip(1)).unwrap();
        let _busy = b.slot.begin();
        // Peer 1 holds its two: the idle one (a) makes room, the busy one stays.
        let c = table.admit(ip(1)).unwrap();
        assert!(table.lock().open.values().all(|s| !Arc::ptr_eq(s, &a.slot)));
        let _busy_c = c.slot.begin();
        // Peer 1's two are busy now: a third from it is refused.
        assert!(table.admit(ip(1)).is_none());
        // Another peer still gets in (the table holds 2 of 3).
        let d = table.admit(ip(2)).unwrap();
        assert_eq!(table.lock().open.len(), 3);
        // The table is full; d is the only idle one and gives way.
        let _e = table.admit(ip(3)).unwrap();
        assert!(table.lock().open.values().all(|s| !Arc::ptr_eq(s, &d.slot)));
        drop(a);
        drop(d);
        assert_eq!(table.lock().open.len(), 3);
    }

    #[test]
    fn accept_failures_back_off_to_a_second() {
        let mut b = Backoff::default();
        let waits: Vec<u64> = (0..10).map(|_| b.failed().as_millis() as u64).collect();
        assert_eq!(waits, [10, 20, 40, 80, 160, 320, 640, 1000, 1000, 1000]);
        b.succeeded();
        assert_eq!(b.failed(), Duration::from_millis(10));
    }
}
