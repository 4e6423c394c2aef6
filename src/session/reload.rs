//! A session going on under a reloaded policy (`mcpwall serve` reloads without a restart).
//!
//! What the session knows about the conversation stays: the requests in flight each way
//! (their answers are judged under the new policy, as every message after the swap), the
//! protocol revision, the held client lines. What the old policy decided and that no
//! later message would re-decide does not: calls held for approval are answered with an
//! error (the client may send them again, to be judged anew), and approvals remembered
//! under `remember: session` are forgotten (the new policy asks again where it asks).

use std::sync::Arc;

use super::{Outbox, RateLimiter, Session, SharedRateLimit};
use crate::config::policy::LogArgs;
use crate::guard::Guard;
use crate::program::Program;

impl Session {
    /// Judge every message from now on with `program` and `guard`. `rate`: the limiter
    /// shared by the sessions of this transport's client (see [`Session::share_rate_limit`]),
    /// if any. What the swap does to calls held for approval is written to `out`, as
    /// events of the old program (map their rule ids before judging anything else).
    pub fn adopt(
        &mut self,
        program: Arc<Program>,
        guard: Option<Arc<Guard>>,
        rate: Option<SharedRateLimit>,
        out: &mut Outbox,
    ) {
        if Arc::ptr_eq(&program, &self.program) {
            self.guard = guard;
            return;
        }
        self.drop_held(
            "the gateway's policy was reloaded while this call waited for approval; send it again",
            out,
        );
        self.approvals.forget_remembered();
        let settings = program.settings();
        self.limits.max_frame_bytes = settings.max_frame_bytes;
        self.rate = settings.rate_limit.map(|limit| {
            rate.unwrap_or_else(|| Arc::new(std::sync::Mutex::new(RateLimiter::new(limit))))
        });
        self.client.scratch = program.scratch();
        self.client.rulings.clear();
        self.client.log_args = (settings.log_args == LogArgs::Full && self.audit)
            .then(|| (program.detector().cache(), Vec::new()));
        self.server_side.scratch = program.scratch();
        self.server_side.marker = settings.redact_marker;
        self.server_side.markers.clear();
        self.masking = None;
        self.guard = guard;
        self.program = program;
    }
}
