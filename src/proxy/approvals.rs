//! The stdio proxy's side of the approval timer (`driver::approvals`): its session and
//! the writer queues the timer's refusals and released calls go to.

use super::pump::{Shared, Sink};
use crate::driver::Driven;
use crate::driver::handout::Handout;
use crate::session::{Outbox, Session};

/// What the timer task drives: the pumps' session, and senders of its own to both
/// writers (the server's weak, like the server side pump's, so the server's stdin closes
/// with the client side).
pub(crate) struct Timer {
    pub session: Shared,
    pub sinks: tokio::sync::Mutex<(Sink, Sink)>,
    pub handout: Handout,
}

impl Timer {
    /// Run until aborted (the proxy's end).
    pub async fn run(self) {
        self.handout.approvals.clone().run(&self).await;
    }
}

impl Driven for Timer {
    async fn act<R>(&self, f: impl FnOnce(&mut Session, &mut Outbox) -> R) -> (Outbox, R) {
        let mut out = Outbox::default();
        let r = f(&mut *self.session.lock().await, &mut out);
        (out, r)
    }

    async fn deliver(&self, mut out: Outbox) {
        self.handout.side_effects(&mut out);
        let (to_client, to_server) = &mut *self.sinks.lock().await;
        to_client.flush(&mut out.to_client).await;
        to_server.flush(&mut out.to_server).await;
    }
}
