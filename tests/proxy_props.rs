//! Property test: for random frames and random policies, what the proxy's frame path
//! forwards (and answers) is exactly what the engine's verdicts predict, the same
//! verdicts `mcpwall check` reports: allowed frames go to the server as their original
//! bytes, a batch with any denied member is not forwarded at all, and every denied
//! request is answered with a -32001 error carrying its exact id.

use std::sync::Arc;

use mcpwall::config::{LoadOptions, load_str};
use mcpwall::frame::{Frame, Limits, MessageKind, Parsed};
use mcpwall::program::Program;
use mcpwall::session::{Line, Options, Outbox, Session};
use proptest::prelude::*;

const RULES: &[&str] = &[
    "  - name: deny-rm\n    match: {tool: \"rm*\"}\n    action: deny\n",
    "  - name: deny-ssh\n    match:\n      method: \"*\"\n      arguments:\n        _any_value: {regex: '\\.ssh'}\n    action: deny\n",
    "  - name: allow-safe\n    match: {tool: \"safe_*\"}\n    action: allow\n",
    "  - name: deny-etc\n    match:\n      method: resources/read\n      arguments:\n        uri: {pattern: \"file:///etc/**\"}\n    action: deny\n",
    "  - name: deny-ping\n    match: {method: ping}\n    action: deny\n",
];

fn program(rules: &[bool], default_deny: bool) -> Arc<Program> {
    let mut text = String::from("version: 1\n");
    if default_deny {
        text.push_str("settings:\n  default_action: deny\n");
    }
    text.push_str("rules:\n");
    let mut any = false;
    for (rule, on) in RULES.iter().zip(rules) {
        if *on {
            text.push_str(rule);
            any = true;
        }
    }
    if !any {
        text = text.replace("rules:\n", "rules: []\n");
    }
    let opts = LoadOptions {
        explicit: None,
        home: "/home/u".into(),
        project_dir: "/home/u/p".into(),
    };
    let policy = load_str("props.yml", &text, &opts).unwrap_or_else(|e| panic!("{e:?}\n{text}"));
    Arc::new(Program::compile(&policy).expect("compiles"))
}

fn id() -> impl Strategy<Value = String> {
    prop_oneof![
        (0u64..u64::MAX).prop_map(|n| n.to_string()),
        "[a-z0-9]{1,8}".prop_map(|s| format!("\"{s}\"")),
    ]
}

fn message() -> impl Strategy<Value = String> {
    let tool = prop::sample::select(vec!["safe_read", "rm_rf", "read_file", "other"]);
    let path = prop::sample::select(vec![
        "/tmp/x",
        "~/.ssh/id_rsa",
        "/home/u/p/a b",
        "/home/u/p/\\u00e9",
    ]);
    let uri = prop::sample::select(vec![
        "file:///etc/passwd",
        "file:///home/u/p/x",
        "file:///home/u/.ssh/k",
    ]);
    prop_oneof![
        (id(), tool, path).prop_map(|(id, t, p)| format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{t}","arguments":{{"path":"{p}"}}}}}}"#
        )),
        (id(), uri).prop_map(|(id, u)| format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"resources/read","params":{{"uri":"{u}"}}}}"#
        )),
        id().prop_map(|id| format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#)),
        path_note(),
    ]
}

fn path_note() -> impl Strategy<Value = String> {
    prop::sample::select(vec!["/tmp/x", "/home/u/.ssh/k"]).prop_map(|p| {
        format!(r#"{{"jsonrpc":"2.0","method":"notifications/progress","params":{{"p":"{p}"}}}}"#)
    })
}

fn frame() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => message(),
        1 => prop::collection::vec(message(), 1..4).prop_map(|m| format!("[{}]", m.join(","))),
    ]
}

/// What the engine says should happen: (bytes to the server, ids answered with an error).
/// `in_flight`: the ids of the requests forwarded so far (the test's server never answers),
/// as JSON values; a request reusing one is refused and answered with a null id, so its
/// answer cannot pass for the one in flight's (session contract point 2).
fn predict(
    program: &Program,
    raw: &[u8],
    in_flight: &mut std::collections::HashSet<String>,
) -> (Vec<u8>, Vec<String>) {
    const NULL: &str = "null";
    let mut parsed = Parsed::new();
    parsed
        .parse(raw, &Limits::default())
        .expect("generated frames are valid");
    let frame = Frame::new(raw, &parsed);
    let mut scratch = program.scratch();
    let key = |m: &mcpwall::frame::Message| -> Option<String> {
        (m.kind == MessageKind::Request).then(|| {
            let id = frame.id_raw(m).expect("requests have ids");
            serde_json::from_slice::<serde_json::Value>(id)
                .unwrap()
                .to_string()
        })
    };
    // Why each message is refused, if it is: `Some(true)` for a reused id.
    let refusals: Vec<Option<bool>> = frame
        .messages()
        .iter()
        .map(|m| {
            if key(m).is_some_and(|k| in_flight.contains(&k)) {
                Some(true)
            } else if !program
                .evaluate_request(&frame, m, &mut scratch)
                .is_allowed()
            {
                Some(false)
            } else {
                None
            }
        })
        .collect();
    let keys: Vec<String> = frame.messages().iter().filter_map(key).collect();
    let twins = keys.len() != keys.iter().collect::<std::collections::HashSet<_>>().len();
    if !twins && refusals.iter().all(Option::is_none) {
        in_flight.extend(keys);
        let mut out = raw.to_vec();
        out.push(b'\n');
        return (out, Vec::new());
    }
    // A batch is refused whole; its allowed members under its first refused member's rule.
    let culprit_reused = twins || refusals.iter().flatten().next() == Some(&true);
    let ids = frame
        .messages()
        .iter()
        .zip(&refusals)
        .filter(|(m, refused)| {
            m.kind == MessageKind::Request && (parsed.is_batch() || refused.is_some())
        })
        .map(|(m, refused)| {
            let reused = twins || refused.unwrap_or(culprit_reused);
            if reused {
                NULL.to_string()
            } else {
                String::from_utf8(frame.id_raw(m).unwrap().to_vec()).unwrap()
            }
        })
        .collect();
    (Vec::new(), ids)
}

fn answered_ids(client: &[u8]) -> Vec<String> {
    let mut ids = Vec::new();
    for line in client.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        let v: serde_json::Value = serde_json::from_slice(line).expect("answers are JSON");
        let items = match v {
            serde_json::Value::Array(items) => items,
            one => vec![one],
        };
        for item in items {
            assert_eq!(item["error"]["code"], -32001, "{item}");
            ids.push(item["id"].to_string());
        }
    }
    ids
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn forwarded_equals_predicted(
        rules in prop::collection::vec(any::<bool>(), RULES.len()),
        default_deny in any::<bool>(),
        frames in prop::collection::vec(frame(), 1..12),
    ) {
        let program = program(&rules, default_deny);
        let mut session = Session::new(program.clone(), Options::quiet("props"));
        let mut in_flight = std::collections::HashSet::new();
        for raw in &frames {
            let (to_server, ids) = predict(&program, raw.as_bytes(), &mut in_flight);
            let mut out = Outbox::default();
            session.from_client(Line::Frame(raw.as_bytes()), &mut out);
            let forwarded = out.to_server;
            prop_assert_eq!(
                String::from_utf8_lossy(&forwarded),
                String::from_utf8_lossy(&to_server),
                "frame {}", raw
            );
            // Ids are compared as JSON values (the proxy copies the raw text; serde
            // normalises e.g. big integers the same way on both sides).
            let normalise = |ids: Vec<String>| -> Vec<String> {
                ids.iter()
                    .map(|i| serde_json::from_str::<serde_json::Value>(i).unwrap().to_string())
                    .collect()
            };
            prop_assert_eq!(normalise(answered_ids(&out.to_client)), normalise(ids), "frame {}", raw);
        }
    }
}
