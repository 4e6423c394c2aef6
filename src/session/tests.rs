//! Regression tests for the message contract, one per fixed bug, each named after what
//! it fixes. `tests/session_props.rs` found them; each replays its minimal reproducer
//! and checks the exact lines each side is sent.

use std::sync::Arc;

use super::{Line, Options, Outbox, Session};
use crate::config::{LoadOptions, load_str};
use crate::program::Program;

fn session() -> Session {
    let opts = LoadOptions {
        explicit: None,
        home: "/home/u".into(),
        project_dir: "/home/u/p".into(),
    };
    let policy = load_str("t.yml", "version: 1\nrules: []\n", &opts).expect("loads");
    let program = Arc::new(Program::compile(&policy).expect("compiles"));
    Session::new(program, Options::quiet("t"))
}

/// A server request, forwarded to the client (checked).
fn ask(s: &mut Session, id: &str) {
    let line = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"roots/list"}}"#);
    let mut out = Outbox::default();
    s.from_server(Line::Frame(line.as_bytes()), &mut out, false);
    assert_eq!(
        String::from_utf8_lossy(&out.to_client),
        format!("{line}\n"),
        "the server request was not forwarded"
    );
}

/// `(id, data.rule)` of each message written to one side.
type Written = Vec<(String, String)>;

/// What one client line makes the session write: (to the client, to the server).
fn from_client(s: &mut Session, line: &str) -> (Written, Written) {
    let mut out = Outbox::default();
    s.from_client(Line::Frame(line.as_bytes()), &mut out);
    (answers(&out.to_client), answers(&out.to_server))
}

fn answers(bytes: &[u8]) -> Written {
    let text = String::from_utf8_lossy(bytes);
    let mut all = Vec::new();
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("mcpwall wrote a line that is not JSON ({e}): {line}"));
        let items = match v {
            serde_json::Value::Array(items) => items,
            one => vec![one],
        };
        for m in items {
            let rule = m["error"]["data"]["rule"].as_str().unwrap_or("(none)");
            all.push((m["id"].to_string(), rule.to_string()));
        }
    }
    all
}

fn pairs(list: &[(&str, &str)]) -> Written {
    list.iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

#[test]
fn refused_batch_tells_the_server_request_its_exact_answer_took() {
    let mut s = session();
    ask(&mut s, "2");
    ask(&mut s, "3");
    // "2" answers 2 only by number: the batch is refused. Its exact answer to 3 was
    // taken from the table too, so 3 must get an error now: no other answer can reach it.
    let (client, server) = from_client(
        &mut s,
        r#"[{"jsonrpc":"2.0","id":"2","result":{}},{"jsonrpc":"2.0","id":3,"result":{}}]"#,
    );
    assert_eq!(client, pairs(&[]), "a client's answers get no answer");
    assert_eq!(
        server,
        pairs(&[
            ("2", "mcpwall:mismatched_id"),
            ("3", "mcpwall:mismatched_id")
        ]),
        "each server request the batch answered gets one error"
    );
}
