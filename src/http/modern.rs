//! The stateless revision of Streamable HTTP (2026-07-28, "modern" MCP) on the same
//! endpoint as the session-based 2025-11-25 one: how much of it the gateway speaks.
//!
//! A modern request carries `MCP-Protocol-Version: 2026-07-28`, its method in `Mcp-Method`
//! and, for `tools/call`, `resources/read` and `prompts/get`, its name or URI in `Mcp-Name`
//! (Base64 in a `=?base64?…?=` sentinel when not plain ASCII), mirroring the body so that
//! intermediaries can route on headers. The headers must match the body: a mismatch (or a
//! missing header) is `400` with JSON-RPC error `-32020`, before anything else happens, so
//! no component can be steered by headers that say something else than the body judged.
//!
//! A valid request is then served through a session-based conversation of the gateway's
//! own (`stateless.rs`), except what the gateway answers itself: `server/discover` (from
//! that conversation's `initialize` result), and the methods this revision removed or the
//! gateway does not carry (`404`, `-32601`); `subscriptions/listen` streams are kept by the
//! gateway (`stateless.rs`). A dual-era client may as well use
//! `initialize` on the same endpoint: both eras are negotiated on one listener.

use base64::Engine;
use bytes::Bytes;
use hyper::HeaderMap;
use serde_json::{Value, json};

use crate::session::Route;

/// The modern revisions the gateway recognises (and validates).
pub const MODERN_VERSIONS: &[&str] = &["2026-07-28"];

/// `HeaderMismatch`: the headers do not match the body, or one is missing or malformed.
pub const HEADER_MISMATCH: i64 = -32020;
/// `Invalid params`: a request whose `_meta` lacks a field every request must carry.
pub const INVALID_PARAMS: i64 = -32602;

pub(crate) const VERSION_META: &str = "io.modelcontextprotocol/protocolVersion";
const CAPABILITIES_META: &str = "io.modelcontextprotocol/clientCapabilities";

/// Methods a 2026-07-28 client may not send: the handshake, `ping` and
/// `logging/setLevel` are gone from the revision, and `resources/subscribe` became
/// `subscriptions/listen`.
const NOT_SERVED: &[&str] = &[
    "initialize",
    "ping",
    "logging/setLevel",
    "resources/subscribe",
    "resources/unsubscribe",
];

/// Whether the request's `MCP-Protocol-Version` names a modern revision.
pub fn is_modern(headers: &HeaderMap) -> bool {
    headers
        .get("mcp-protocol-version")
        .is_some_and(|v| MODERN_VERSIONS.iter().any(|m| v.as_bytes() == m.as_bytes()))
}

/// What the gateway answers a modern POST with: an HTTP status and a JSON-RPC message.
#[derive(Debug, PartialEq)]
pub struct Answer {
    pub status: hyper::StatusCode,
    pub body: Value,
}

/// What becomes of a modern POST.
#[derive(Debug, PartialEq)]
pub enum Triage {
    /// Answered by the gateway without any server: a refusal, or a method it does not carry.
    Answer(Answer),
    /// `server/discover` (with the client's id): answered from the identity's conversation.
    Discover(Value),
    /// `subscriptions/listen`: a stream of the identity's conversation's change
    /// notifications.
    Listen(Value),
    /// A request to serve through the identity's conversation, headers checked.
    Serve(Value),
}

/// Check a modern request's headers against its body and say what becomes of it (see
/// the module docs).
pub fn triage(headers: &HeaderMap, body: &[u8]) -> Triage {
    let refuse = |status, id: &Value, code: i64, message: String| {
        Triage::Answer(Answer {
            status,
            body: json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}),
        })
    };
    let message: Value = match serde_json::from_slice(body) {
        Ok(v @ Value::Object(_)) => v,
        _ => {
            return Triage::Answer(Answer {
                status: hyper::StatusCode::BAD_REQUEST,
                body: json!({"jsonrpc": "2.0", "error": {"code": -32700,
                    "message": "the body is not one JSON-RPC message"}}),
            });
        }
    };
    let id = message.get("id").cloned().unwrap_or(Value::Null);
    if let Err(which) = check_headers(headers, &message) {
        let why = format!("Header mismatch: {which}");
        return refuse(hyper::StatusCode::BAD_REQUEST, &id, HEADER_MISMATCH, why);
    }
    if !matches!(id, Value::String(_) | Value::Number(_)) {
        // The revision defines no client notification over HTTP (closing a response
        // stream is the cancellation): nothing is forwarded.
        let why = "this gateway takes only requests from 2026-07-28 clients".to_string();
        return refuse(hyper::StatusCode::BAD_REQUEST, &Value::Null, -32600, why);
    }
    if !message["params"]["_meta"][CAPABILITIES_META].is_object() {
        let why = format!("params._meta must carry {CAPABILITIES_META}");
        return refuse(hyper::StatusCode::BAD_REQUEST, &id, INVALID_PARAMS, why);
    }
    let method = message["method"].as_str().unwrap_or_default();
    if method == "server/discover" {
        return Triage::Discover(id);
    }
    if method == "subscriptions/listen" {
        return Triage::Listen(message);
    }
    if NOT_SERVED.contains(&method) {
        let why = format!("Method not found: {method} is not served to 2026-07-28 clients");
        return refuse(hyper::StatusCode::NOT_FOUND, &id, -32601, why);
    }
    Triage::Serve(message)
}

/// The answer to `server/discover`: the versions served (newest first), and the
/// capabilities, identity and instructions of the server behind the gateway, from the
/// `initialize` result of the identity's conversation.
pub fn discover(id: Value, legacy: &[&str], init: &Value, server: &str) -> Answer {
    let mut versions: Vec<&str> = MODERN_VERSIONS.to_vec();
    versions.extend(legacy.iter().rev());
    let server_info = match &init["serverInfo"] {
        info @ Value::Object(_) => info.clone(),
        _ => json!({"name": server, "version": env!("CARGO_PKG_VERSION")}),
    };
    let mut result = json!({
        "resultType": "complete",
        "supportedVersions": versions,
        "capabilities": init.get("capabilities").cloned().unwrap_or_else(|| json!({})),
        "_meta": {"io.modelcontextprotocol/serverInfo": server_info},
        // What the server offers may differ per identity (its rules filter the lists).
        "ttlMs": 0,
        "cacheScope": "private",
    });
    if let Some(instructions) = init.get("instructions").filter(|i| i.is_string()) {
        result["instructions"] = instructions.clone();
    }
    Answer {
        status: hyper::StatusCode::OK,
        body: json!({"jsonrpc": "2.0", "id": id, "result": result}),
    }
}

/// `Err(what is wrong)` unless `MCP-Protocol-Version`, `Mcp-Method` and (where the
/// method has one) `Mcp-Name` are present, well-formed and equal to the body's values.
fn check_headers(headers: &HeaderMap, message: &Value) -> Result<(), &'static str> {
    let header = |name: &str| -> Result<Option<&str>, &'static str> {
        match headers.get(name) {
            None => Ok(None),
            Some(v) => v
                .to_str()
                .map(Some)
                .map_err(|_| "a header holds characters outside visible ASCII"),
        }
    };
    let version = header("mcp-protocol-version")?.ok_or("MCP-Protocol-Version is missing")?;
    if message["params"]["_meta"][VERSION_META].as_str() != Some(version) {
        return Err("MCP-Protocol-Version does not match params._meta's protocol version");
    }
    let method = header("mcp-method")?.ok_or("Mcp-Method is missing")?;
    let Some(body_method) = message["method"].as_str() else {
        return Err("the body is not a request");
    };
    if method != body_method {
        return Err("Mcp-Method does not match the body's method");
    }
    let body_name = match body_method {
        "tools/call" | "prompts/get" => message["params"]["name"].as_str(),
        "resources/read" => message["params"]["uri"].as_str(),
        _ => return Ok(()),
    };
    let name = header("mcp-name")?.ok_or("Mcp-Name is missing")?;
    let name = decode_value(name).ok_or("Mcp-Name is not a valid header value")?;
    if Some(name.as_str()) != body_name {
        return Err("Mcp-Name does not match the body's name or URI");
    }
    Ok(())
}

/// A header value as the revision encodes it: plain, or `=?base64?…?=` (UTF-8).
fn decode_value(value: &str) -> Option<String> {
    match value
        .strip_prefix("=?base64?")
        .and_then(|v| v.strip_suffix("?="))
    {
        Some(encoded) => {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(encoded)
                .ok()?;
            String::from_utf8(bytes).ok()
        }
        None => Some(value.to_string()),
    }
}

/// The list changes a `subscriptions/listen` may opt in to: its filter field, the server
/// capability that must offer `listChanged`, the notification.
pub const LISTENED: &[(&str, &str, &str)] = &[
    (
        "toolsListChanged",
        "tools",
        "notifications/tools/list_changed",
    ),
    (
        "promptsListChanged",
        "prompts",
        "notifications/prompts/list_changed",
    ),
    (
        "resourcesListChanged",
        "resources",
        "notifications/resources/list_changed",
    ),
];

/// A change notification for the subscription `id`, as an SSE event, made from what the
/// session said the server's notification is (its method, and for a resource's update its
/// uri): the server's line is not read again. Nothing else of it is carried (these
/// notifications say which list or resource changed, and nothing more), so the
/// subscription id is always the gateway's.
pub fn tagged(method: &str, uri: Option<&str>, id: &Value) -> Bytes {
    let mut params = json!({"_meta": {"io.modelcontextprotocol/subscriptionId": id}});
    if let Some(uri) = uri {
        params["uri"] = uri.into();
    }
    let message = json!({"jsonrpc": "2.0", "method": method, "params": params});
    sse_frame(message.to_string().as_bytes())
}

/// The result that ends the subscription `id` when its conversation ends.
pub fn listen_ended(id: &Value) -> Bytes {
    let end = json!({"jsonrpc": "2.0", "id": id, "result": {"resultType": "complete",
        "_meta": {"io.modelcontextprotocol/subscriptionId": id}}});
    sse_frame(end.to_string().as_bytes())
}

/// The gateway's answer to a request of the server's (`route`, as the session said it
/// forwarded it), for a conversation whose client speaks the stateless revision (see the
/// module docs); `None` for other messages.
pub fn answer_server_request(route: &Route) -> Option<Vec<u8>> {
    let Route::Request { id, method, .. } = route else {
        return None;
    };
    let id: Value = serde_json::from_slice(id).ok()?;
    let answer = if &**method == "ping" {
        json!({"jsonrpc": "2.0", "id": id, "result": {}})
    } else {
        json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": format!(
            "{method} cannot reach the client: it is a stateless client behind mcpwall, \
             which carries such a request only in the middle of one request of a client \
             that declared the capability")}})
    };
    serde_json::to_vec(&answer).ok()
}

/// One message as an SSE event.
pub(super) fn sse_frame(data: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(data.len() + 24);
    out.extend_from_slice(b"event: message\ndata: ");
    out.extend_from_slice(data);
    out.extend_from_slice(b"\n\n");
    Bytes::from(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (n, v) in pairs {
            h.insert(*n, v.parse().unwrap());
        }
        h
    }

    fn call(name: &str) -> Vec<u8> {
        json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": name,
            "arguments": {}, "_meta": {VERSION_META: "2026-07-28", CAPABILITIES_META: {}}}})
        .to_string()
        .into_bytes()
    }

    fn refused(t: Triage) -> Answer {
        match t {
            Triage::Answer(a) => a,
            other => panic!("not refused: {other:?}"),
        }
    }

    const LEGACY: &[&str] = &["2025-06-18", "2025-11-25"];

    #[test]
    fn a_tagged_notification_carries_the_gateways_subscription_id() {
        let frame = tagged(
            "notifications/resources/updated",
            Some("file:///a"),
            &json!("sub-1"),
        );
        let text = std::str::from_utf8(&frame).unwrap();
        let data = text
            .lines()
            .find_map(|l| l.strip_prefix("data: "))
            .expect("a data line");
        let message: Value = serde_json::from_str(data).unwrap();
        assert_eq!(
            message,
            json!({"jsonrpc": "2.0", "method": "notifications/resources/updated",
                "params": {"uri": "file:///a",
                    "_meta": {"io.modelcontextprotocol/subscriptionId": "sub-1"}}})
        );
    }

    #[test]
    fn headers_that_say_something_else_than_the_body_are_refused() {
        let ok = [
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
        ];
        let cases: &[(&[(&str, &str)], &str)] = &[
            (&[("mcp-name", "read_file")], "Mcp-Name does not match"),
            (&[], "Mcp-Name is missing"),
            (
                &[("mcp-name", "=?base64?bm90X2l0?=")],
                "Mcp-Name does not match",
            ),
            (&[("mcp-name", "=?base64?!!?=")], "not a valid header value"),
        ];
        for (extra, expect) in cases {
            let mut h = headers(&ok);
            for (n, v) in *extra {
                h.insert(*n, v.parse().unwrap());
            }
            let a = refused(triage(&h, &call("delete_everything")));
            assert_eq!(a.status, 400, "{extra:?}");
            assert_eq!(a.body["error"]["code"], HEADER_MISMATCH);
            assert_eq!(a.body["id"], 7);
            assert!(
                a.body["error"]["message"]
                    .as_str()
                    .unwrap()
                    .contains(expect),
                "{a:?}"
            );
        }
        let wrong_method = headers(&[
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/list"),
        ]);
        let a = refused(triage(&wrong_method, &call("x")));
        assert_eq!(a.body["error"]["code"], HEADER_MISMATCH);
    }

    #[test]
    fn a_valid_modern_request_is_served_and_removed_methods_are_not() {
        // "delete_everything" base64-encoded, as a client may send any name.
        let h = headers(&[
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "=?base64?ZGVsZXRlX2V2ZXJ5dGhpbmc=?="),
        ]);
        let Triage::Serve(request) = triage(&h, &call("delete_everything")) else {
            panic!("not served");
        };
        assert_eq!(request["params"]["name"], "delete_everything");

        let bare = |method: &str, meta: Value| {
            let body = json!({"jsonrpc": "2.0", "id": "d", "method": method,
                "params": {"_meta": meta}});
            let h = headers(&[
                ("mcp-protocol-version", "2026-07-28"),
                ("mcp-method", method),
            ]);
            triage(&h, body.to_string().as_bytes())
        };
        let meta = json!({VERSION_META: "2026-07-28", CAPABILITIES_META: {}});
        assert_eq!(
            bare("server/discover", meta.clone()),
            Triage::Discover(json!("d"))
        );
        let a = refused(bare("ping", meta.clone()));
        assert_eq!(
            (a.status.as_u16(), &a.body["error"]["code"]),
            (404, &json!(-32601))
        );
        let a = refused(bare("tools/list", json!({VERSION_META: "2026-07-28"})));
        assert_eq!(a.body["error"]["code"], INVALID_PARAMS);

        let a = discover(
            json!("d"),
            LEGACY,
            &json!({"capabilities": {"tools": {}},
            "serverInfo": {"name": "s", "version": "1"}}),
            "gw",
        );
        assert_eq!(a.status, 200);
        assert_eq!(
            a.body["result"]["supportedVersions"],
            json!(["2026-07-28", "2025-11-25", "2025-06-18"])
        );
        assert_eq!(a.body["result"]["capabilities"], json!({"tools": {}}));
    }
}
