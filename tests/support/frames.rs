//! The JSON-RPC frames a rule example stands for.

#![allow(dead_code)]

use serde_json::{Value, json};

/// The request an inbound example (`{method?, tool, arguments}`) stands for. For methods
/// other than tools/call, `arguments` are the request's `params`.
pub fn request_line(example: &Value) -> String {
    let method = example
        .get("method")
        .and_then(Value::as_str)
        .unwrap_or("tools/call");
    let args = example.get("arguments").cloned().unwrap_or(json!({}));
    let params = if method == "tools/call" {
        json!({"name": example["tool"], "arguments": args})
    } else {
        args
    };
    json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string()
}

/// The server result an outbound example stands for (`"text"`, `{tool?, server?, text}` or
/// `{tool?, server?, size}` for a text of that many bytes), and the tool and server of the
/// call it answers.
pub fn response_line(example: &Value) -> (String, Option<String>, String) {
    let (text, tool, server) = match example {
        Value::String(s) => (s.clone(), None, None),
        Value::Object(o) => {
            let text = match (o.get("text"), o.get("size")) {
                (Some(Value::String(t)), _) => t.clone(),
                (_, Some(n)) => "x".repeat(n.as_u64().expect("size is a number") as usize),
                _ => panic!("outbound example needs `text` or `size`: {example}"),
            };
            let s = |k: &str| o.get(k).and_then(Value::as_str).map(str::to_string);
            (text, s("tool"), s("server"))
        }
        other => panic!("outbound example must be a string or an object: {other}"),
    };
    let line =
        json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": text}]}})
            .to_string();
    (
        line,
        tool,
        server.unwrap_or_else(|| "example-server".to_string()),
    )
}
