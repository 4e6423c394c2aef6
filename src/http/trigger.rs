//! How the request handlers and the signal handler ask the reload thread
//! ([`super::reload`]) to look at the policy and token files now.

use std::sync::mpsc::{Receiver, SyncSender};

/// What asks the reload thread to look now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ask {
    /// SIGHUP: rebuild, changed or not.
    Signal,
    /// Something may have changed (an identity with no judge yet came in): look now.
    Look,
}

/// Asks the reload thread to look (cheap; never blocks). Dropping every handle ends it.
#[derive(Debug, Clone)]
pub struct Trigger(SyncSender<Ask>);

/// Asks waiting for the reload thread; more are dropped (one waiting look sees every
/// change made before it, so a client asking in a loop queues nothing).
const WAITING_ASKS: usize = 4;

impl Trigger {
    /// A trigger and the end the reload thread reads.
    pub fn new() -> (Trigger, Receiver<Ask>) {
        let (tx, rx) = std::sync::mpsc::sync_channel(WAITING_ASKS);
        (Trigger(tx), rx)
    }

    /// SIGHUP: rebuild now, whether or not a file changed.
    pub fn signal(&self) {
        let _ = self.0.try_send(Ask::Signal);
    }

    /// Look at the files now rather than at the next [`super::reload::POLL`].
    pub fn look(&self) {
        let _ = self.0.try_send(Ask::Look);
    }
}
