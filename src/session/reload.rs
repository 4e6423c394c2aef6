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
        // The program in force may be the start one compiled again for the client's
        // roots: a reload that changed nothing hands back the start one.
        let current = self.project.base().unwrap_or(&self.program);
        if Arc::ptr_eq(&program, current) {
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
        self.reapply_roots(out);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::super::{Line, Options, Outbox, Session};
    use crate::config::{LoadOptions, load_str};
    use crate::program::Program;
    use crate::verdict::Verdict;

    fn program(rules: &str) -> Arc<Program> {
        let opts = LoadOptions {
            explicit: None,
            home: "/home/u".into(),
            project_dir: "/home/u/p".into(),
        };
        let text = format!("version: 1\nsettings:\n  ask_timeout_seconds: 5\nrules:\n{rules}");
        let policy = load_str("t.yml", &text, &opts).expect("loads");
        Arc::new(Program::compile(&policy).expect("compiles"))
    }

    fn client(s: &mut Session, line: &str) -> Outbox {
        let mut out = Outbox::default();
        s.from_client(Line::Frame(line.as_bytes()), &mut out);
        out
    }

    const ASK_RUN: &str = "  - name: ask-run\n    match: {tool: run}\n    action: ask\n";
    const DENY_READ: &str = "  - name: deny-read\n    match: {tool: read}\n    action: deny\n";
    const INIT: &str = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{"elicitation":{}},"clientInfo":{"name":"t","version":"1"}}}"#;
    const RUN: &str =
        r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"run","arguments":{}}}"#;
    const READ: &str =
        r#"{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"read","arguments":{}}}"#;

    #[test]
    fn an_adopted_program_judges_the_next_message_and_held_calls_are_answered() {
        let old = program(ASK_RUN);
        let mut s = Session::new(
            old.clone(),
            Options {
                audit: true,
                ..Options::quiet("t")
            },
        );
        client(&mut s, INIT);
        let out = client(&mut s, RUN);
        assert!(out.to_server.is_empty(), "the call is held");
        assert!(
            !client(&mut s, READ).to_server.is_empty(),
            "read is allowed"
        );

        let mut out = Outbox::default();
        s.adopt(program(DENY_READ), None, None, &mut out);
        // The held call is answered with an error, audited under the old program's rule.
        let answer: serde_json::Value = serde_json::from_slice(
            out.to_client
                .split(|b| *b == b'\n')
                .find(|l| l.starts_with(b"{\"jsonrpc\":\"2.0\",\"id\":7"))
                .expect("an answer to the held call"),
        )
        .unwrap();
        assert!(
            answer["error"]["message"]
                .as_str()
                .unwrap()
                .contains("policy was reloaded")
        );
        let event = out.events.iter().find(|e| e.action == Verdict::Declined);
        let rule = event.and_then(|e| e.rule).expect("the held call's event");
        assert_eq!(super::super::rule_name(&old, rule), "ask-run");
        // The next message is judged by the new program.
        let out = client(&mut s, READ.replace("\"id\":8", "\"id\":9").as_str());
        assert!(out.to_server.is_empty(), "read is denied now");
        assert!(
            !client(&mut s, RUN.replace("\"id\":7", "\"id\":10").as_str())
                .to_server
                .is_empty()
        );
    }
}
