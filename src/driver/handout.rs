//! Handing out an [`Outbox`]: what the session produced besides lines goes where it
//! belongs (notices to stderr, audit events to the writer, held calls to the approver),
//! and the lines go to the two sides. How a side writes is the transport's: the stdio
//! proxy's writer queues (`proxy/queue.rs`), the gateway's HTTP streams, or a [`Side`]
//! (a channel to a writer task: the bridge's stdout, an upstream link, a server's stdin).

use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::mpsc;

use super::approvals::Approvals;
use crate::audit::{AuditSender, Mark};
use crate::io::Chatter;
use crate::session::Outbox;

/// Where one conversation's notices, audit events and held calls go.
#[derive(Clone)]
pub struct Handout {
    pub chatter: Chatter,
    pub audit: AuditSender,
    pub approvals: Arc<Approvals>,
    /// The audit log's `transport` for every event, when the transport does not name
    /// its events itself (`None`: left as the session wrote it).
    pub transport: Option<&'static str>,
}

impl Handout {
    /// Notices to stderr.
    pub fn notices(&self, out: &mut Outbox) {
        for notice in out.notices.drain(..) {
            self.chatter
                .log(notice.level, format_args!("{}", notice.text));
        }
    }

    /// Everything but the lines: notices, audit events, held calls (the approver and the
    /// timer). What is handed out leaves `out`; its lines stay. The mark to wait for to
    /// know the events are in the file ([`AuditSender::written`]).
    pub fn side_effects(&self, out: &mut Outbox) -> Mark {
        self.notices(out);
        let mut mark = Mark::default();
        if !out.events.is_empty() {
            if let Some(transport) = self.transport {
                for e in &mut out.events {
                    e.transport = Some(transport);
                }
            }
            mark = self.audit.send(&mut out.events);
        }
        self.approvals.offer(out);
        mark
    }
}

/// One side a conversation writes whole lines to through a writer task's channel; closed
/// (taken) when that side is to end.
pub struct Side(Mutex<Option<mpsc::Sender<Vec<u8>>>>);

impl Side {
    pub fn new(tx: mpsc::Sender<Vec<u8>>) -> Side {
        Side(Mutex::new(Some(tx)))
    }

    fn lock(&self) -> MutexGuard<'_, Option<mpsc::Sender<Vec<u8>>>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Hand `lines` to the writer, waiting for room (back-pressure); dropped once the
    /// side is closed or its writer is gone. `lines` is left empty.
    pub async fn send(&self, lines: &mut Vec<u8>) {
        if lines.is_empty() {
            return;
        }
        let tx = self.lock().clone();
        let lines = std::mem::take(lines);
        if let Some(tx) = tx {
            let _ = tx.send(lines).await;
        }
    }

    /// Nothing more goes to this side; its writer ends once it has written what it holds.
    pub fn close(&self) {
        self.lock().take();
    }
}
