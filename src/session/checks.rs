//! The session's invariants on arbitrary interleavings, for the fuzz target
//! (`tests/fuzz/fuzz_targets/session.rs`) and its replay on stable
//! (`tests/fuzz_regressions.rs`). Not part of the API.
//!
//! The input's bytes are read as a script of steps: client and server lines (requests
//! from small id pools, so ids collide; answers, notifications, cancellations, batches,
//! malformed, oversize and cut-off lines), decisions of `mcpwall approve`, the clock
//! passing deadlines, and the server exiting. After every step, against a model of what
//! each side sent:
//! - nothing unjudged is written: every line to a side is either a well-formed line the
//!   other side sent (byte for byte, or with redaction markers in it) or mcpwall's own
//!   (an error naming a rule, mcpwall's question), and no planted secret gets through;
//! - no request gets two answers, and none an answer it did not ask for;
//! - the tables stay bounded, and when the server exits every request still open is
//!   answered and nothing is left held.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{Line, Options, Outbox, REDACT_MARKER, Session};
use crate::program::Program;

const POLICY: &str = "version: 1
settings:
  ask_timeout_seconds: 30
rules:
  - name: no-wipe
    match: {tool: wipe}
    action: deny
  - name: ask-pay
    match: {tool: pay}
    action: ask
outbound_rules:
  - name: redact-secrets
    match: {secrets: true}
    action: redact
";

fn program() -> Arc<Program> {
    static PROGRAM: std::sync::OnceLock<Arc<Program>> = std::sync::OnceLock::new();
    PROGRAM
        .get_or_init(|| {
            let opts = crate::config::LoadOptions {
                explicit: None,
                home: "/home/u".into(),
                project_dir: "/home/u/p".into(),
            };
            let policy = crate::config::load_str("fuzz.yml", POLICY, &opts).expect("loads");
            Arc::new(Program::compile(&policy).expect("compiles"))
        })
        .clone()
}

/// A fake AWS key id, built at run time.
fn planted() -> String {
    format!("AKIA{}", "FUZZ7XW3NV5TR2KP")
}

/// Reads the script's bytes; past the end, zeros.
struct Script<'a> {
    data: &'a [u8],
    at: usize,
}

impl Script<'_> {
    fn byte(&mut self) -> u8 {
        let b = self.data.get(self.at).copied().unwrap_or(0);
        self.at += 1;
        b
    }

    fn done(&self) -> bool {
        self.at >= self.data.len()
    }
}

/// What the model knows: the well-formed lines each side sent, and the requests each side
/// has open (by canonical id text).
#[derive(Default)]
struct Model {
    from_client: BTreeSet<Vec<u8>>,
    from_server: BTreeSet<Vec<u8>>,
    /// Client requests that may still get one answer.
    client_open: BTreeSet<String>,
    /// Client requests it cancelled: at most one late answer.
    client_cancelled: BTreeSet<String>,
    server_open: BTreeSet<String>,
    log: String,
}

fn id_text(n: u8) -> String {
    match n % 5 {
        4 => format!("\"k{}\"", n % 3),
        _ => (n % 4).to_string(),
    }
}

fn canonical(id: &Value) -> Option<String> {
    match id {
        Value::Number(_) | Value::String(_) => Some(id.to_string()),
        _ => None,
    }
}

fn client_line(s: &mut Script<'_>) -> String {
    let id = id_text(s.byte());
    match s.byte() % 9 {
        0 => format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"echo","arguments":{{"text":"hi"}}}}}}"#
        ),
        1 => format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"wipe","arguments":{{}}}}}}"#
        ),
        2 => format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"pay","arguments":{{"amount":{}}}}}}}"#,
            s.byte()
        ),
        3 => format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#),
        4 => format!(
            r#"{{"jsonrpc":"2.0","method":"notifications/cancelled","params":{{"requestId":{id}}}}}"#
        ),
        5 => format!(
            r#"{{"jsonrpc":"2.0","id":"s{}","result":{{}}}}"#,
            s.byte() % 3
        ),
        6 => format!(
            "[{},{}]",
            format_args!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#),
            format_args!(r#"{{"jsonrpc":"2.0","method":"notifications/progress","params":{{}}}}"#)
        ),
        7 => format!(r#"{{"jsonrpc":"2.0","id":{id},"id":{id},"method":"ping"}}"#),
        _ => format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping""#),
    }
}

fn server_line(s: &mut Script<'_>) -> String {
    let id = id_text(s.byte());
    match s.byte() % 7 {
        0 => format!(
            r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[{{"type":"text","text":"ok"}}]}}}}"#
        ),
        1 => format!(
            r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[{{"type":"text","text":"key {}"}}]}}}}"#,
            planted()
        ),
        2 => format!(r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":-1,"message":"no"}}}}"#),
        3 => format!(
            r#"{{"jsonrpc":"2.0","id":"s{}","method":"roots/list"}}"#,
            s.byte() % 3
        ),
        4 => r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}"#
            .to_string(),
        5 => format!(r#"{{"jsonrpc":"2.0","id":{id}.5,"result":{{}}}}"#),
        _ => "not json".to_string(),
    }
}

/// Run the script the bytes make and check the invariants after each step; panics with
/// the transcript on a violation.
pub fn check_session(data: &[u8]) {
    let mut session = Session::new(program(), Options::quiet("fuzz"));
    let mut model = Model::default();
    let mut script = Script { data, at: 0 };
    let mut now = Instant::now();
    let mut steps = 0;
    while !script.done() && steps < 256 {
        steps += 1;
        let mut out = Outbox::default();
        match script.byte() % 8 {
            0..=2 => {
                let line = client_line(&mut script);
                model.client_sent(&line);
                session.from_client(Line::Frame(line.as_bytes()), &mut out);
            }
            3 | 4 => {
                let line = server_line(&mut script);
                model.server_sent(&line);
                session.from_server(Line::Frame(line.as_bytes()), &mut out, false);
            }
            5 if script.byte().is_multiple_of(2) => {
                let line = client_line(&mut script);
                let _ = writeln!(model.log, "client (cut short) {line}");
                session.from_client(Line::Truncated { len: line.len() }, &mut out);
            }
            5 => {
                // An oversize server line: only its head is seen, so a request in it is
                // the server's, still owed an (error) answer.
                let line = server_line(&mut script);
                let _ = writeln!(model.log, "server (oversize) {line}");
                if let Ok(msg) = serde_json::from_str::<Value>(&line)
                    && msg.get("method").is_some()
                    && let Some(id) = msg.get("id").and_then(canonical)
                {
                    model.server_open.insert(id);
                }
                let head = &line.as_bytes()[..line.len().min(40)];
                let len = 1 << 30;
                session.from_server(Line::TooLarge { len, head }, &mut out, false);
            }
            6 => {
                let approve = script.byte().is_multiple_of(2);
                let _ = writeln!(model.log, "approve: {approve}");
                if let Some((code, digest)) = session.awaiting_cli().into_iter().next() {
                    session.decide_approval(&code, &digest, approve, &mut out);
                }
            }
            _ => {
                if script.byte().is_multiple_of(4) {
                    let _ = writeln!(model.log, "server exits");
                    session.server_gone("exit code 0", &mut out);
                    model.check(&out, &session);
                    model.check_all_answered(&session);
                    return;
                }
                let _ = writeln!(model.log, "clock passes the deadlines");
                now += Duration::from_secs(31);
                session.expire(now, &mut out);
            }
        }
        model.check(&out, &session);
    }
}

impl Model {
    fn client_sent(&mut self, line: &str) {
        let _ = writeln!(self.log, "client  {line}");
        if has_duplicate_id(line) || serde_json::from_str::<Value>(line).is_err() {
            // Not a message, but its id may be readable: a request under an id not in
            // flight gets its error under that id.
            if let Some(id) = line
                .split(r#""id":"#)
                .nth(1)
                .and_then(|rest| rest.split(',').next())
                .and_then(|id| serde_json::from_str::<Value>(id).ok())
                .and_then(|id| canonical(&id))
                && line.contains(r#""method""#)
                && !self.client_open.contains(&id)
            {
                self.client_cancelled.insert(id);
            }
            return;
        }
        self.from_client.insert(line.as_bytes().to_vec());
        for msg in messages(line) {
            if msg.get("method").is_some()
                && let Some(id) = msg.get("id").and_then(canonical)
            {
                // A new request under a cancelled one's id: a late answer to the old one
                // would read as this one's, and the session lets only one through.
                self.client_cancelled.remove(&id);
                self.client_open.insert(id);
            } else if msg["method"] == "notifications/cancelled"
                && let Some(id) = canonical(&msg["params"]["requestId"])
                && self.client_open.remove(&id)
            {
                self.client_cancelled.insert(id);
            }
        }
    }

    fn server_sent(&mut self, line: &str) {
        let _ = writeln!(self.log, "server  {line}");
        if serde_json::from_str::<Value>(line).is_err() {
            return;
        }
        self.from_server.insert(line.as_bytes().to_vec());
        for msg in messages(line) {
            if msg.get("method").is_some()
                && let Some(id) = msg.get("id").and_then(canonical)
            {
                self.server_open.insert(id);
            }
        }
    }

    fn fail(&self, what: &str) -> ! {
        panic!(
            "session invariant broken: {what}\ntranscript:\n{}",
            self.log
        )
    }

    fn check(&mut self, out: &Outbox, session: &Session) {
        for line in lines(&out.to_server) {
            let _ = writeln!(self.log, "  → server {}", String::from_utf8_lossy(line));
            self.check_line(line, &self.from_client.clone(), "server");
            for msg in messages_bytes(line) {
                if msg.get("method").is_none()
                    && let Some(id) = msg.get("id").and_then(canonical)
                    && !self.server_open.remove(&id)
                {
                    self.fail(&format!(
                        "the server got an answer to {id} it did not ask for"
                    ));
                }
            }
        }
        for line in lines(&out.to_client) {
            let _ = writeln!(self.log, "  → client {}", String::from_utf8_lossy(line));
            self.check_line(line, &self.from_server.clone(), "client");
            if String::from_utf8_lossy(line).contains(&planted()) {
                self.fail("a planted secret reached the client");
            }
            for msg in messages_bytes(line) {
                if msg.get("method").is_none()
                    && let Some(id) = msg.get("id").and_then(canonical)
                    && !self.client_open.remove(&id)
                    && !self.client_cancelled.remove(&id)
                {
                    self.fail(&format!(
                        "the client got a second answer, or one it did not ask for, to {id}"
                    ));
                }
            }
        }
        if session.calls_in_flight() > 8 {
            self.fail("more client requests in flight than ids exist");
        }
    }

    /// A line written to `to` is the other side's, byte for byte or redacted, or
    /// mcpwall's own message.
    fn check_line(&self, line: &[u8], sent: &BTreeSet<Vec<u8>>, to: &str) {
        let Ok(value) = serde_json::from_slice::<Value>(line) else {
            self.fail(&format!("a line to the {to} is not JSON"));
        };
        if sent.contains(line) {
            return;
        }
        let text = String::from_utf8_lossy(line);
        // mcpwall's own: errors it writes (a refusal, a server gone), its questions.
        let own = |m: &Value| {
            m["error"]["code"].is_i64()
                || m["id"]
                    .as_str()
                    .is_some_and(|id| id.starts_with("mcpwall-"))
        };
        let own = match &value {
            Value::Array(items) => items.iter().all(own),
            one => own(one),
        };
        if !own && !text.contains(REDACT_MARKER) {
            self.fail(&format!("the {to} got a line no one sent: {text}"));
        }
    }

    fn check_all_answered(&self, session: &Session) {
        if !self.client_open.is_empty() {
            self.fail(&format!(
                "the server exited and these requests got no answer: {:?}",
                self.client_open
            ));
        }
        if session.calls_in_flight() != 0 || session.next_deadline().is_some() {
            self.fail("the server exited and the session still holds calls");
        }
    }
}

fn has_duplicate_id(line: &str) -> bool {
    line.matches(r#""id":"#).count() > 1 && !line.starts_with('[')
}

fn messages(line: &str) -> Vec<Value> {
    messages_bytes(line.as_bytes())
}

fn messages_bytes(line: &[u8]) -> Vec<Value> {
    match serde_json::from_slice::<Value>(line) {
        Ok(Value::Array(items)) => items,
        Ok(v) => vec![v],
        Err(_) => Vec::new(),
    }
}

fn lines(bytes: &[u8]) -> impl Iterator<Item = &[u8]> {
    bytes.split(|b| *b == b'\n').filter(|l| !l.is_empty())
}
