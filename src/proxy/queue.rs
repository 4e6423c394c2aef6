//! The queue in front of each writer task, bounded in batches and in bytes.
//!
//! A channel of batches alone bounds the count, not the memory: sixteen waiting frames of
//! the 64 MiB default limit are a gibibyte held for a slow reader. Each batch therefore
//! also holds a share of a byte budget until it has been written, so what waits for one
//! writer is at most the budget or a single larger batch.
//!
//! When nothing waits for a writer whose output is a pipe, a short batch skips the queue
//! and goes straight into the pipe ([`Queue::write_now`]): a lone round trip then wakes
//! no writer task.

use crate::platform::DirectPipe;
use std::ops::Range;
use std::sync::{Arc, Weak};

use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};

/// Bytes queued for one writer before a sender waits (a single larger batch still
/// passes, alone).
pub const QUEUE_BYTES: usize = 1024 * 1024;

/// Bytes on their way to a writer, with their share of its budget.
#[derive(Debug)]
pub struct Batch {
    bytes: Vec<u8>,
    /// When set, what is written is not `bytes` but one line spliced from them.
    splice: Option<Splice>,
    _share: OwnedSemaphorePermit,
}

/// One line forwarded from the buffer it was read into: `bytes[line]` with each of
/// `edits` (ranges relative to the line, in order, disjoint) replaced by its bytes,
/// then a newline.
#[derive(Debug)]
pub struct Splice {
    pub line: Range<usize>,
    pub edits: Vec<(Range<usize>, Vec<u8>)>,
}

impl Splice {
    /// The line cut from `bytes` (the buffer it was read into), in the order written.
    pub fn pieces<'b>(&'b self, bytes: &'b [u8]) -> Vec<&'b [u8]> {
        let line = &bytes[self.line.clone()];
        let mut pieces = Vec::with_capacity(2 * self.edits.len() + 2);
        let mut copied = 0;
        for (range, text) in &self.edits {
            pieces.push(&line[copied..range.start]);
            pieces.push(&text[..]);
            copied = range.end;
        }
        pieces.push(&line[copied..]);
        pieces.push(b"\n");
        pieces
    }

    /// How many bytes the line takes once spliced, newline included.
    fn len(&self) -> usize {
        let removed: usize = self.edits.iter().map(|(r, _)| r.len()).sum();
        let added: usize = self.edits.iter().map(|(_, b)| b.len()).sum();
        self.line.len() - removed + added + 1
    }
}

impl Batch {
    /// The bytes queued; for a spliced line, the buffer it is spliced from.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Set when what is written is a line spliced from [`Self::bytes`].
    pub fn splice(&self) -> Option<&Splice> {
        self.splice.as_ref()
    }

    /// The buffer back, for reuse; the budget share is returned.
    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }
}

/// Batches this short are written into a pipe whole or not at all (POSIX `PIPE_BUF`), so
/// writing one straight into the pipe never leaves part of a frame behind. (0 where the
/// system offers no such write: Windows.)
pub const DIRECT_MAX: usize = crate::platform::PIPE_BUF;

/// The sending side of a writer's queue.
#[derive(Debug, Clone)]
pub struct Queue {
    tx: mpsc::Sender<Batch>,
    budget: Arc<Semaphore>,
    limit: usize,
    /// A duplicate of the writer's pipe, for [`Queue::write_now`].
    pipe: Option<Arc<DirectPipe>>,
}

/// A [`Queue`] that does not keep the writer alive.
#[derive(Debug, Clone)]
pub struct WeakQueue {
    tx: mpsc::WeakSender<Batch>,
    budget: Arc<Semaphore>,
    limit: usize,
    /// Weak, so that the pipe closes with the last [`Queue`] (the reader sees EOF).
    pipe: Option<Weak<DirectPipe>>,
}

/// A queue of at most `batches` batches and `bytes` bytes (or one larger batch).
pub fn queue(batches: usize, bytes: usize) -> (Queue, mpsc::Receiver<Batch>) {
    // Permits are taken as u32; the budget must fit.
    let limit = bytes.clamp(1, u32::MAX as usize);
    let (tx, rx) = mpsc::channel(batches);
    let budget = Arc::new(Semaphore::new(limit));
    (
        Queue {
            tx,
            budget,
            limit,
            pipe: None,
        },
        rx,
    )
}

impl Queue {
    /// Let [`Self::write_now`] write into `pipe` directly: a duplicate of the
    /// non-blocking pipe the receiver's writer writes to (the same open pipe, so the
    /// bytes land in one order). Senders and writer must run on one thread (the proxy's
    /// current-thread runtime), so the writer cannot start a batch between the check
    /// and the write.
    pub fn write_to_pipe(mut self, pipe: DirectPipe) -> Queue {
        self.pipe = Some(Arc::new(pipe));
        self
    }

    /// Write `bytes` straight into the writer's pipe when nothing is queued for it or
    /// being written, without waking the writer task. Returns how many were written: all
    /// or none, as a pipe takes [`DIRECT_MAX`] bytes. None when the queue is busy, the
    /// batch is longer, the pipe is full or broken, or there is no pipe; the caller then
    /// queues them (and the writer reports any error).
    ///
    /// A lone round trip then wakes no writer task: 3,400 of 35,000 instructions per
    /// sequential round trip (callgrind).
    pub fn write_now(&self, bytes: &[u8]) -> usize {
        let Some(pipe) = &self.pipe else {
            return 0;
        };
        // Every batch holds its share of the budget until it has been written: a full
        // budget means nothing is waiting or being written, so these bytes overtake none.
        if bytes.len() > DIRECT_MAX
            || self.tx.is_closed()
            || self.budget.available_permits() != self.limit
        {
            return 0;
        }
        crate::platform::write_direct(pipe, bytes)
    }

    /// Whether [`Self::send`] would wait for room for `len` bytes.
    pub fn would_wait(&self, len: usize) -> bool {
        let share = len.clamp(1, self.limit);
        self.budget.available_permits() < share || self.tx.capacity() == 0
    }

    /// Queue `bytes` once there is room for them. Gives them back if the writer is gone.
    pub async fn send(&self, bytes: Vec<u8>) -> Result<(), Vec<u8>> {
        let len = bytes.len();
        self.send_batch(bytes, None, len).await
    }

    /// Queue the line `splice` describes, written from `bytes` in pieces (see
    /// [`Splice`]). Gives the bytes back if the writer is gone.
    pub async fn send_spliced(&self, bytes: Vec<u8>, splice: Splice) -> Result<(), Vec<u8>> {
        let len = splice.len();
        self.send_batch(bytes, Some(splice), len).await
    }

    async fn send_batch(
        &self,
        bytes: Vec<u8>,
        splice: Option<Splice>,
        len: usize,
    ) -> Result<(), Vec<u8>> {
        // A batch larger than the budget takes all of it, and so waits alone.
        let share = len.clamp(1, self.limit) as u32;
        let Ok(share) = self.budget.clone().acquire_many_owned(share).await else {
            return Err(bytes);
        };
        self.tx
            .send(Batch {
                bytes,
                splice,
                _share: share,
            })
            .await
            .map_err(|e| e.0.bytes)
    }

    /// Wait until everything queued so far has been written (or the writer is gone).
    pub async fn drained(&self) {
        // The whole budget is free only once every batch has been written; the
        // semaphore is fair, so batches queued after this call wait for it.
        let _ = self.budget.acquire_many(self.limit as u32).await;
    }

    pub fn downgrade(&self) -> WeakQueue {
        WeakQueue {
            tx: self.tx.downgrade(),
            budget: self.budget.clone(),
            limit: self.limit,
            pipe: self.pipe.as_ref().map(Arc::downgrade),
        }
    }
}

impl WeakQueue {
    pub fn upgrade(&self) -> Option<Queue> {
        Some(Queue {
            tx: self.tx.upgrade()?,
            budget: self.budget.clone(),
            limit: self.limit,
            pipe: self.pipe.as_ref().and_then(Weak::upgrade),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    /// Waits until `send` is blocked on the budget (it cannot finish within the wait).
    async fn blocks(q: &Queue, len: usize) -> bool {
        tokio::time::timeout(Duration::from_millis(50), q.send(vec![0; len]))
            .await
            .is_err()
    }

    #[test]
    fn queued_bytes_stay_within_the_budget_until_written() {
        runtime().block_on(async {
            let (q, mut rx) = queue(16, 1000);
            q.send(vec![1; 600]).await.unwrap();
            q.send(vec![2; 400]).await.unwrap();
            // 1000 bytes wait; the channel has room for 14 more batches, the budget none.
            assert!(blocks(&q, 1).await);
            let first = rx.recv().await.unwrap();
            // Received but not yet written: its bytes still count.
            assert!(blocks(&q, 1).await);
            assert_eq!(first.into_bytes(), vec![1; 600]);
            q.send(vec![3; 600]).await.unwrap();
            assert!(blocks(&q, 1).await);
        });
    }

    #[test]
    fn a_batch_larger_than_the_budget_passes_alone() {
        runtime().block_on(async {
            let (q, mut rx) = queue(16, 1000);
            q.send(vec![1; 10]).await.unwrap();
            // Needs the whole budget: waits for the small batch to be written.
            assert!(blocks(&q, 5000).await);
            drop(rx.recv().await.unwrap());
            q.send(vec![2; 5000]).await.unwrap();
            assert!(blocks(&q, 1).await);
            assert_eq!(rx.recv().await.unwrap().bytes().len(), 5000);
        });
    }

    #[test]
    fn sending_to_a_gone_writer_gives_the_bytes_back() {
        runtime().block_on(async {
            let (q, rx) = queue(1, 1000);
            let weak = q.downgrade();
            drop(rx);
            assert_eq!(q.send(vec![7; 3]).await, Err(vec![7; 3]));
            drop(q);
            assert!(weak.upgrade().is_none());
        });
    }

    /// A non-blocking pipe: its read end, and a queue that may write into it directly.
    #[cfg(unix)]
    fn piped_queue() -> (
        std::io::PipeReader,
        std::io::PipeWriter,
        Queue,
        mpsc::Receiver<Batch>,
    ) {
        let (r, w) = std::io::pipe().unwrap();
        let flags = crate::platform::StatusFlags::of(&w).unwrap();
        flags.with_nonblocking().apply(&w).unwrap();
        let (q, rx) = queue(16, 1000);
        let q = q.write_to_pipe(w.try_clone().unwrap().into());
        (r, w, q, rx)
    }

    /// Everything readable from `r` now, without blocking.
    #[cfg(unix)]
    fn drain(r: &std::io::PipeReader) -> Vec<u8> {
        use std::io::Read;
        let flags = crate::platform::StatusFlags::of(r).unwrap();
        flags.with_nonblocking().apply(r).unwrap();
        let mut out = Vec::new();
        let mut buf = [0u8; 8192];
        while let Ok(n @ 1..) = (&mut &*r).read(&mut buf) {
            out.extend_from_slice(&buf[..n]);
        }
        out
    }

    #[cfg(unix)]
    #[test]
    fn an_idle_queue_writes_short_batches_straight_into_the_pipe() {
        runtime().block_on(async {
            let (r, _w, q, _rx) = piped_queue();
            assert_eq!(q.write_now(b"{\"id\":1}\n"), 9);
            assert_eq!(q.downgrade().upgrade().unwrap().write_now(b"x\n"), 2);
            assert_eq!(drain(&r), b"{\"id\":1}\nx\n");
        });
    }

    /// Written directly while a batch waits, the bytes would reach the pipe before it.
    #[cfg(unix)]
    #[test]
    fn nothing_is_written_directly_while_a_batch_waits_or_is_being_written() {
        runtime().block_on(async {
            let (r, _w, q, mut rx) = piped_queue();
            q.send(b"first\n".to_vec()).await.unwrap();
            assert_eq!(q.write_now(b"second\n"), 0);
            let first = rx.recv().await.unwrap();
            // Taken by the writer but not yet written: still counts.
            assert_eq!(q.write_now(b"second\n"), 0);
            drop(first);
            assert_eq!(q.write_now(b"second\n"), 7);
            assert_eq!(drain(&r), b"second\n");
        });
    }

    #[cfg(unix)]
    #[test]
    fn long_batches_full_pipes_and_gone_writers_take_the_queue() {
        runtime().block_on(async {
            let (r, w, q, rx) = piped_queue();
            assert_eq!(q.write_now(&vec![b'a'; DIRECT_MAX + 1]), 0);
            assert!(drain(&r).is_empty());
            // Fill the pipe: a short batch is then refused whole, never written in part.
            let mut filled = 0;
            loop {
                let n = q.write_now(&[b'b'; DIRECT_MAX]);
                if n == 0 {
                    break;
                }
                assert_eq!(n, DIRECT_MAX);
                filled += n;
            }
            assert_eq!(q.write_now(b"cc\n"), 0);
            assert_eq!(drain(&r).len(), filled);
            drop(rx);
            assert_eq!(q.write_now(b"dd\n"), 0);
            assert!(drain(&r).is_empty());
            // Without a pipe there is nothing to write into.
            let (plain, _rx) = queue(16, 1000);
            assert_eq!(plain.write_now(b"ee\n"), 0);
            drop(w);
        });
    }

    /// Drained means written: a batch taken by the writer but not yet written (not
    /// dropped) still counts.
    #[test]
    fn drained_waits_for_every_batch_to_be_written() {
        runtime().block_on(async {
            let (q, mut rx) = queue(16, 1000);
            tokio::time::timeout(Duration::from_millis(50), q.drained())
                .await
                .expect("an empty queue is drained");
            q.send(vec![1; 10]).await.unwrap();
            q.send(vec![2; 10]).await.unwrap();
            let first = rx.recv().await.unwrap();
            drop(first);
            let waiting = tokio::time::timeout(Duration::from_millis(50), q.drained()).await;
            assert!(waiting.is_err(), "drained with a batch still queued");
            let second = rx.recv().await.unwrap();
            assert!(
                tokio::time::timeout(Duration::from_millis(50), q.drained())
                    .await
                    .is_err()
            );
            drop(second);
            tokio::time::timeout(Duration::from_secs(5), q.drained())
                .await
                .expect("drained once both are written");
        });
    }

    /// Batches still queued when the writer goes return their share: a sender then
    /// fails instead of waiting for room forever.
    #[test]
    fn a_writer_gone_with_a_full_queue_does_not_strand_senders() {
        runtime().block_on(async {
            let (q, rx) = queue(16, 1000);
            let weak = q.downgrade();
            q.send(vec![1; 1000]).await.unwrap();
            assert!(blocks(&q, 1).await);
            drop(rx);
            let sent = tokio::time::timeout(Duration::from_secs(5), q.send(vec![2; 10])).await;
            assert_eq!(sent, Ok(Err(vec![2; 10])));
            drop(q);
            assert!(weak.upgrade().is_none());
        });
    }
}
