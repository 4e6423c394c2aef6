//! Regression tests for the message contract, one per fixed bug, each named after what
//! it fixes. `tests/session_props.rs` found them; each replays its minimal reproducer
//! and checks the exact lines each side is sent.

use std::sync::Arc;

use super::{Delivery, Line, Options, Outbox, Session};
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

#[test]
fn malformed_client_answer_errors_the_server_request_not_the_client() {
    let mut s = session();
    ask(&mut s, "1");
    // 1.0 is no JSON-RPC id: the line is refused. It answers the server's request 1
    // (a lax server reads 1.0 as 1), which can now never be answered: 1 gets the error.
    // The client's error must not carry 1.0: a client reading ids laxly would take it
    // for the answer to a request 1 of its own.
    let (client, server) = from_client(&mut s, r#"{"jsonrpc":"2.0","id":1.0,"result":{}}"#);
    assert_eq!(client, pairs(&[("null", "mcpwall:malformed")]));
    assert_eq!(server, pairs(&[("1", "mcpwall:malformed")]));

    // The same for an exact id on a line refused for another reason (two results).
    ask(&mut s, "2");
    let (client, server) = from_client(
        &mut s,
        r#"{"jsonrpc":"2.0","id":2,"result":{},"result":{}}"#,
    );
    assert_eq!(client, pairs(&[("null", "mcpwall:malformed")]));
    assert_eq!(server, pairs(&[("2", "mcpwall:malformed")]));
}

#[test]
fn oversize_client_answer_errors_the_server_request_not_the_client() {
    let mut s = session();
    ask(&mut s, r#""a""#);
    let mut out = Outbox::default();
    s.from_client(
        Line::TooLarge {
            len: 1 << 30,
            head: br#"{"jsonrpc":"2.0","id":"a","result":{"content":[{"type":"te"#,
        },
        &mut out,
    );
    assert_eq!(
        answers(&out.to_client),
        pairs(&[("null", "mcpwall:too_large")])
    );
    assert_eq!(
        answers(&out.to_server),
        pairs(&[("\"a\"", "mcpwall:too_large")])
    );

    // An oversize request still gets its error with its id.
    let mut out = Outbox::default();
    s.from_client(
        Line::TooLarge {
            len: 1 << 30,
            head: br#"{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"#,
        },
        &mut out,
    );
    assert_eq!(
        answers(&out.to_client),
        pairs(&[("\"a\"", "mcpwall:too_large")])
    );
    assert_eq!(answers(&out.to_server), pairs(&[]));
}

#[test]
fn malformed_client_batch_answers_each_member() {
    let mut s = session();
    ask(&mut s, "1");
    // One member's id (1.0) makes the whole batch unacceptable. Before, the client got
    // one error carrying 1.0 and nothing else: its request 7 never got an answer, nor did
    // the server's request 1.
    let (client, server) = from_client(
        &mut s,
        r#"[{"jsonrpc":"2.0","id":1.0,"result":{}},{"jsonrpc":"2.0","id":7,"method":"ping"}]"#,
    );
    assert_eq!(client, pairs(&[("7", "mcpwall:malformed")]));
    assert_eq!(server, pairs(&[("1", "mcpwall:malformed")]));
}

#[test]
fn malformed_server_batch_errors_every_request_it_answers() {
    let mut s = session();
    for id in ["1", "2"] {
        let line = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#);
        let (client, _) = from_client(&mut s, &line);
        assert_eq!(client, pairs(&[]), "ping {id} was refused");
    }
    // Before, a refused batch told no one: 1 and 2 waited forever for the answers it
    // held, and so did the server for its request 9.
    let mut out = Outbox::default();
    s.from_server(
        Line::Frame(
            br#"[{"jsonrpc":"2.0","id":1,"result":{}},{"jsonrpc":"2.0","id":2.0,"result":{}},{"jsonrpc":"2.0","id":9,"method":"ping"}]"#,
        ),
        &mut out,
        false,
    );
    assert_eq!(
        answers(&out.to_client),
        pairs(&[("1", "mcpwall:malformed"), ("2", "mcpwall:malformed")])
    );
    assert_eq!(
        answers(&out.to_server),
        pairs(&[("9", "mcpwall:malformed")])
    );
    assert_eq!(s.calls_in_flight(), 0);
}

/// A frame judged through [`Session::scan_off_loop`] (every transport's path for large
/// server frames, `driver::judging`, its scan run on another thread) gets what the in-line path gives:
/// the same delivery (a redaction in place), the same bytes and the same audit events,
/// judged for the call it answers (a block by a rule on that call's tool).
#[test]
fn a_frame_scanned_off_the_session_is_judged_as_in_line() {
    let opts = LoadOptions {
        explicit: None,
        home: "/home/u".into(),
        project_dir: "/home/u/p".into(),
    };
    let policy = "version: 1\nrules: []\noutbound_rules:\n  - name: no-boom\n    match: {tool: danger, response_contains: [boom]}\n    action: deny\n  - name: redact-secrets\n    match: {secrets: true}\n    action: redact\n";
    let policy = load_str("t.yml", policy, &opts).expect("loads");
    let program = Arc::new(Program::compile(&policy).expect("compiles"));
    let key = format!("{}{}", ["AK", "IA"].concat(), "QZ7XW2M4RT5YV6NB");
    let cases = [
        ("read_file", format!("key={key} ok")),
        ("danger", "boom".to_string()),
        ("read_file", "boom".to_string()),
    ];
    for (tool, text) in cases {
        let call = format!(
            r#"{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{{"name":"{tool}","arguments":{{}}}}}}"#
        );
        let line = format!(
            r#"{{"jsonrpc":"2.0","id":7,"result":{{"content":[{{"type":"text","text":"{text}"}}]}}}}"#
        );
        let line = line.as_bytes();
        let mut judged = Vec::new();
        for off_loop in [false, true] {
            let mut s = Session::new(program.clone(), Options::quiet("t"));
            s.from_client(Line::Frame(call.as_bytes()), &mut Outbox::default());
            let mut out = Outbox::default();
            let delivery = if off_loop {
                let mut scan = s.scan_off_loop(line).expect("an answer named in its head");
                let scan = std::thread::scope(|t| {
                    t.spawn(move || {
                        scan.run(line);
                        scan
                    })
                    .join()
                    .expect("the scan ran")
                });
                s.from_server_scanned(line, scan, &mut out, true)
            } else {
                s.from_server(Line::Frame(line), &mut out, true)
            };
            let events: Vec<String> = out
                .events
                .iter()
                .map(|e| format!("{:?} {:?}", e.action, e.rule))
                .collect();
            judged.push((delivery, out.to_client, events));
        }
        assert_eq!(judged[0], judged[1], "{tool}: {text}");
    }
}

/// A policy swapped in while a frame's scan was away (a reload, the client's roots)
/// judges that frame: the old program's verdict and scratch are not used with the new
/// one. Before, the scan's "pass" stood and the new program ran with the old scratch.
#[test]
fn a_frame_scanned_under_a_policy_swapped_out_meanwhile_is_judged_by_the_new_one() {
    let opts = LoadOptions {
        explicit: None,
        home: "/home/u".into(),
        project_dir: "/home/u/p".into(),
    };
    let compile = |text: &str| {
        let policy = load_str("t.yml", text, &opts).expect("loads");
        Arc::new(Program::compile(&policy).expect("compiles"))
    };
    let before = compile("version: 1\nrules: []\n");
    let after = compile(
        "version: 1\nrules: []\noutbound_rules:\n  - name: no-boom\n    match: {response_contains: [boom]}\n    action: deny\n  - name: also-bang\n    match: {response_contains: [bang]}\n    action: deny\n",
    );
    let mut s = Session::new(before, Options::quiet("t"));
    let call = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"read_file","arguments":{}}}"#;
    s.from_client(Line::Frame(call.as_bytes()), &mut Outbox::default());
    let line = br#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"boom"}]}}"#;
    let mut scan = s.scan_off_loop(line).expect("an answer named in its head");
    scan.run(line);
    s.adopt(after, None, None, &mut Outbox::default());
    let mut out = Outbox::default();
    let delivery = s.from_server_scanned(line, scan, &mut out, true);
    assert_eq!(delivery, Delivery::Written);
    let text = String::from_utf8_lossy(&out.to_client);
    assert!(text.contains("no-boom"), "{text}");
    assert!(!text.contains(r#""text":"boom""#), "{text}");
}

/// A resource the policy would refuse to read is hidden from `resources/list`, as a
/// denied tool is hidden from `tools/list`, and reading it anyway is denied.
#[test]
fn resources_the_policy_denies_are_hidden_and_unreadable() {
    let home = tempfile::tempdir().expect("temp dir");
    let opts = LoadOptions {
        explicit: None,
        home: "/home/u".into(),
        project_dir: "/home/u/p".into(),
    };
    let policy = load_str("t.yml", "version: 1\nextends: [default]\n", &opts).expect("loads");
    let server = crate::guard::pins::ServerIdentity {
        name: "files".into(),
        command: vec!["files-server".into()],
    };
    let guard = crate::guard::Guard::from_policy(&policy, server, home.path()).expect("guard");
    let program = Arc::new(Program::compile(&policy).expect("compiles"));
    let mut options = Options::quiet("files");
    options.guard = Some(Arc::new(guard));
    let mut s = Session::new(program, options);

    let (_, to_server) = from_client(
        &mut s,
        r#"{"jsonrpc":"2.0","id":1,"method":"resources/list"}"#,
    );
    assert_eq!(to_server, pairs(&[("1", "(none)")]));
    let listing = serde_json::json!({"jsonrpc": "2.0", "id": 1, "result": {"resources": [
        {"uri": "file:///home/u/.ssh/id_ed25519", "name": "id_ed25519"},
        {"uri": "file:///home/u/p/README.md", "name": "README.md"},
        {"uri": "file:///home/u/.aws/credentials", "name": "credentials"},
    ], "nextCursor": "2"}})
    .to_string();
    let mut out = Outbox::default();
    s.from_server(Line::Frame(listing.as_bytes()), &mut out, false);
    let shown: serde_json::Value =
        serde_json::from_slice(out.to_client.trim_ascii_end()).expect("one JSON line");
    let uris: Vec<&str> = shown["result"]["resources"]
        .as_array()
        .expect("a list")
        .iter()
        .map(|r| r["uri"].as_str().expect("uri"))
        .collect();
    assert_eq!(uris, vec!["file:///home/u/p/README.md"]);
    assert_eq!(shown["result"]["nextCursor"], "2", "pagination survives");

    let (to_client, to_server) = from_client(
        &mut s,
        r#"{"jsonrpc":"2.0","id":2,"method":"resources/read","params":{"uri":"file:///home/u/.ssh/id_ed25519"}}"#,
    );
    assert_eq!(to_server, pairs(&[]));
    assert_eq!(to_client.len(), 1);
    assert_ne!(to_client[0].1, "(none)", "refused by a rule: {to_client:?}");
}

fn session_with(yaml: &str) -> Session {
    let opts = LoadOptions {
        explicit: None,
        home: "/home/u".into(),
        project_dir: "/home/u/p".into(),
    };
    let policy = load_str("t.yml", yaml, &opts).expect("loads");
    let program = Arc::new(Program::compile(&policy).expect("compiles"));
    Session::new(program, Options::quiet("t"))
}

/// The server's answer to a `tools/call` (id 1) as the client receives it.
fn answer_with_items(s: &mut Session, items: &[&str]) -> serde_json::Value {
    let (_, to_server) = from_client(
        s,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"lookup","arguments":{}}}"#,
    );
    assert_eq!(to_server.len(), 1);
    let content: Vec<_> = items
        .iter()
        .map(|t| serde_json::json!({"type": "text", "text": t}))
        .collect();
    let line =
        serde_json::json!({"jsonrpc": "2.0", "id": 1, "result": {"content": content}}).to_string();
    let mut out = Outbox::default();
    s.from_server(Line::Frame(line.as_bytes()), &mut out, false);
    serde_json::from_slice(out.to_client.trim_ascii_end()).expect("one JSON line")
}

const REDACT_CODES: &str = "version: 1\noutbound_rules:\n  - name: redact-codes\n    match: {response_contains_regex: ['CODE-[0-9]{8}']}\n    action: redact\n";

/// A redact rule's match cut across two content items is redacted in both, exactly its
/// bytes in each: what surrounds it in either item reaches the agent unchanged.
#[test]
fn a_redaction_spanning_two_content_items_cuts_exactly_its_bytes_in_each() {
    let mut s = session_with(REDACT_CODES);
    let got = answer_with_items(&mut s, &["your code is CODE-1234", "5678, thanks"]);
    let texts: Vec<&str> = got["result"]["content"]
        .as_array()
        .expect("content")
        .iter()
        .map(|c| c["text"].as_str().expect("text"))
        .collect();
    assert_eq!(texts.len(), 2, "{got}");
    assert!(
        texts[0].starts_with("your code is ") && !texts[0].contains("1234"),
        "{texts:?}"
    );
    assert!(
        texts[1].ends_with(", thanks") && !texts[1].contains("5678"),
        "{texts:?}"
    );
    assert_ne!(
        texts[0], "your code is ",
        "a marker stands for the cut: {texts:?}"
    );
}

/// A match only the joined and normalised text holds (a zero-width space at the cut) has
/// no span to cut: the message is withheld, never forwarded with the match in it.
#[test]
fn a_redaction_with_no_span_to_cut_blocks_the_message() {
    let mut s = session_with(REDACT_CODES);
    let got = answer_with_items(&mut s, &["your code is CODE-1234", "\u{200B}5678, thanks"]);
    assert_eq!(got["result"]["isError"], true, "{got}");
    let text = got["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.starts_with("[BLOCKED BY MCPWALL]"), "{got}");
    assert!(!got.to_string().contains("5678"), "{got}");
}

/// What one line makes the session write to the client, and the routes it gives.
fn routed(s: &mut Session, from: super::Peer, line: &str) -> (Vec<String>, Vec<super::Route>) {
    let mut out = Outbox::with_routes();
    match from {
        super::Peer::Client => s.from_client(Line::Frame(line.as_bytes()), &mut out),
        super::Peer::Server => {
            s.from_server(Line::Frame(line.as_bytes()), &mut out, false);
        }
    }
    let lines: Vec<String> = String::from_utf8_lossy(&out.to_client)
        .lines()
        .map(str::to_string)
        .collect();
    let routes = out.routes.expect("routes were asked for");
    assert_eq!(
        lines.len(),
        routes.len(),
        "one route per line: {lines:#?} {routes:#?}"
    );
    (lines, routes)
}

#[test]
fn every_line_for_the_client_comes_with_what_it_is() {
    use super::{Peer, Route};
    let mut s = session();
    let call = |id: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"x","arguments":{{}}}}}}"#
        )
    };
    // An answer, by its id's key: an escaped string id is filed as written plainly.
    routed(&mut s, Peer::Client, &call(r#""a\u0062""#));
    let (_, routes) = routed(
        &mut s,
        Peer::Server,
        r#"{"jsonrpc":"2.0","id":"ab","result":{}}"#,
    );
    assert_eq!(routes, [Route::Answer(Some(r#""ab""#.into()))]);

    // A server request: its id, method, and where its params lie in the line.
    let request =
        r#"{"jsonrpc":"2.0","id":9,"method":"sampling/createMessage","params":{"messages":[]}}"#;
    let (lines, routes) = routed(&mut s, Peer::Server, request);
    let Route::Request { id, method, params } = &routes[0] else {
        panic!("{routes:?}")
    };
    assert_eq!((&**id, &**method), (&b"9"[..], "sampling/createMessage"));
    assert_eq!(&lines[0][params.clone().unwrap()], r#"{"messages":[]}"#);

    // Notifications: the progress token's key, a changed resource's uri.
    for (token, key) in [(r#""t\u0031""#, r#""t1""#), ("7", "7")] {
        let progress = format!(
            r#"{{"jsonrpc":"2.0","method":"notifications/progress","params":{{"progress":1,"progressToken":{token}}}}}"#
        );
        let (_, routes) = routed(&mut s, Peer::Server, &progress);
        assert_eq!(
            routes,
            [Route::Notification {
                method: "notifications/progress".into(),
                progress: Some(key.into()),
                uri: None
            }]
        );
    }
    let updated = r#"{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"file:///a"}}"#;
    let (_, routes) = routed(&mut s, Peer::Server, updated);
    assert_eq!(
        routes,
        [Route::Notification {
            method: "notifications/resources/updated".into(),
            progress: None,
            uri: Some("file:///a".into())
        }]
    );

    // A batch is one line of several messages.
    let batch = r#"[{"jsonrpc":"2.0","method":"notifications/a"},{"jsonrpc":"2.0","method":"notifications/b"}]"#;
    assert_eq!(routed(&mut s, Peer::Server, batch).1, [Route::Batch]);

    // Refusals: a request reusing an id in flight is refused under a null id (it must
    // not read as the answer to the one in flight); an unreadable one under what can be
    // read of its id.
    routed(&mut s, Peer::Client, &call("3"));
    assert_eq!(
        routed(&mut s, Peer::Client, &call("3")).1,
        [Route::Answer(None)]
    );
    let broken = r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":"#;
    assert_eq!(
        routed(&mut s, Peer::Client, broken).1,
        [Route::Answer(Some("4".into()))]
    );

    // The server's exit answers what is in flight.
    let mut out = Outbox::with_routes();
    s.server_gone("it exited", &mut out);
    assert_eq!(out.routes.unwrap(), [Route::Answer(Some("3".into()))]);
}

#[test]
fn an_outbox_without_routes_keeps_none() {
    let mut s = session();
    let mut out = Outbox::default();
    s.from_server(
        Line::Frame(br#"{"jsonrpc":"2.0","method":"notifications/a"}"#),
        &mut out,
        false,
    );
    assert!(!out.to_client.is_empty());
    assert_eq!(out.routes, None);
}

/// A call that would need a new rate-limit window while the in-memory shared state holds
/// as many as it may is refused, audited under its own rule with the bound in its message;
/// the windows already open keep counting.
#[test]
fn a_call_the_full_local_shared_state_cannot_count_is_refused_and_audited() {
    let opts = LoadOptions {
        explicit: None,
        home: "/home/u".into(),
        project_dir: "/home/u/p".into(),
    };
    let policy = load_str(
        "t.yml",
        "version: 1\nsettings: {rate_limit: {max_calls: 5, window_seconds: 60}}\nrules: []\n",
        &opts,
    )
    .expect("loads");
    let program = Arc::new(Program::compile(&policy).expect("compiles"));
    let mut options = Options::quiet("t");
    options.audit = true;
    let mut s = Session::new(program, options);
    let mut limiter = super::RateLimiter::new(crate::config::policy::RateLimit {
        max_calls: 5,
        window_seconds: 60,
    });
    limiter.share(super::SharedCount {
        state: Arc::new(crate::shared_state::Local::with_capacity(1)),
        server: Arc::from("fs"),
        identity: Some(Arc::from("ci")),
    });
    s.share_rate_limit(Arc::new(std::sync::Mutex::new(limiter)));
    let call = |id: u32, tool: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{tool}","arguments":{{}}}}}}"#
        )
    };
    let (client, server) = from_client(&mut s, &call(1, "read"));
    assert_eq!(
        (client.len(), server.len()),
        (0, 1),
        "the first window opens"
    );
    let mut out = Outbox::default();
    s.from_client(Line::Frame(call(2, "write").as_bytes()), &mut out);
    assert!(out.to_server.is_empty(), "forwarded uncounted");
    assert_eq!(
        answers(&out.to_client),
        pairs(&[("2", crate::shared_state::RULE_FULL)])
    );
    let event = out
        .events
        .iter()
        .find(|e| {
            e.rule
                == Some(crate::audit::RuleRef::Builtin(
                    crate::shared_state::RULE_FULL,
                ))
        })
        .expect("audited");
    let message = event.message.as_deref().unwrap_or("");
    assert!(
        message.contains("rate-limit windows") && message.contains("fail closed"),
        "{message}"
    );
    // The open window still counts.
    let (_, server) = from_client(&mut s, &call(3, "read"));
    assert_eq!(server.len(), 1);
}
