//! What drives a [`Session`] for every transport (the stdio proxy, the bridge, the
//! gateway): the transports differ in how they read and write (pipes, an upstream link,
//! HTTP streams), not in what they do with a line. This layer holds that common part:
//!
//! - [`reading`]: the read loops. A line source (a [`LineReader`](crate::io::codec::LineReader)
//!   or an upstream link's messages) read to its end, each line judged and what comes of it
//!   handed out, in order; the end of input and read errors handled once.
//! - [`judging`]: judging a line without one conversation holding up the others (large
//!   lines on the blocking pool, bounded per identity and in all).
//! - [`approvals`]: the approval/expiry timer of calls an `ask` rule holds, and the
//!   pending queue `mcpwall approve` reads.
//! - [`handout`]: what an [`Outbox`] holds besides its lines (notices, audit events,
//!   held calls), handed to stderr, the audit writer and the approver; the lines go to the
//!   transport's two sides.
//!
//! A transport implements [`Driven`] (how to reach its session and how to write an
//! outbox's lines) and [`Judged`] (how it has a line judged: through
//! [`judging::Judging`] with its own outbox and share), and the driver does the rest. The
//! stdio proxy's pumps, the hot path, keep their own batching of writes and their writing
//! of large answers from the buffer they were read into ([`reading::Feed`] is the seam),
//! and use the same read loop, judging, hand-out and timer.

use std::future::Future;

use crate::session::{Line, Outbox, Peer, Session};
use judging::Held;

pub mod approvals;
pub mod handout;
pub mod judging;
pub mod reading;

/// A conversation as the driver's timer sees it: a session to act on and two sides to
/// write to. Implemented by each transport.
pub trait Driven {
    /// Run `f` on the session (a timer, an upstream's report, the server's exit) and
    /// return what it wrote, with `f`'s result.
    fn act<R>(
        &self,
        f: impl FnOnce(&mut Session, &mut Outbox) -> R,
    ) -> impl Future<Output = (Outbox, R)>;

    /// Hand out what one call of the session produced (see [`handout`]).
    fn deliver(&self, out: Outbox) -> impl Future<Output = ()>;

    /// The conversation has ended: its timer stops.
    fn is_ended(&self) -> bool {
        false
    }
}

/// A conversation whose lines the driver's read loops judge ([`reading`]): each through
/// [`judging::Judging`], a large server line held in its own buffer.
pub trait Judged: Driven {
    /// Judge one line from `from` and return what comes of it.
    fn judge(&self, from: Peer, line: Line<'_>) -> impl Future<Output = Outbox>;

    /// Judge a server line of at least [`Self::off_loop_bytes`], held in a buffer of its
    /// own, and return what comes of it with the buffer (for the reader to go on in).
    fn judge_held(&self, held: Held) -> impl Future<Output = (Outbox, Held)>;

    /// From what length a line is judged off the I/O thread.
    fn off_loop_bytes(&self) -> usize {
        judging::OFF_LOOP_BYTES
    }
}
