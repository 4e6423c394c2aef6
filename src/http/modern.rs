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
//! The servers behind the gateway speak the session-based revision (a stdio server has one
//! `initialize` per process), so a valid modern request is answered by the gateway itself:
//! `server/discover` lists the versions it serves, and any other method gets
//! `UnsupportedProtocolVersionError` (`-32022`) with the same list. A dual-era client then
//! falls back to `initialize` on the same endpoint, as the revision's backward-compatibility
//! rules say; both eras are negotiated on one listener.

use base64::Engine;
use hyper::HeaderMap;
use serde_json::{Value, json};

/// The modern revisions the gateway recognises (and validates).
pub const MODERN_VERSIONS: &[&str] = &["2026-07-28"];

/// `HeaderMismatch`: the headers do not match the body, or one is missing or malformed.
pub const HEADER_MISMATCH: i64 = -32020;
/// `UnsupportedProtocolVersionError`.
pub const UNSUPPORTED_VERSION: i64 = -32022;

const VERSION_META: &str = "io.modelcontextprotocol/protocolVersion";

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

/// Check a modern request's headers against its body and answer it (see the module docs).
/// `legacy` lists the session-based versions the gateway serves.
pub fn answer(headers: &HeaderMap, body: &[u8], legacy: &[&str], server: &str) -> Answer {
    let message: Value = match serde_json::from_slice(body) {
        Ok(v @ Value::Object(_)) => v,
        _ => {
            return Answer {
                status: hyper::StatusCode::BAD_REQUEST,
                body: json!({"jsonrpc": "2.0", "error": {"code": -32700,
                    "message": "the body is not one JSON-RPC message"}}),
            };
        }
    };
    let id = message.get("id").cloned().unwrap_or(Value::Null);
    if let Err(which) = check_headers(headers, &message) {
        return Answer {
            status: hyper::StatusCode::BAD_REQUEST,
            body: json!({"jsonrpc": "2.0", "id": id, "error": {"code": HEADER_MISMATCH,
                "message": format!("Header mismatch: {which}")}}),
        };
    }
    let requested = message["params"]["_meta"][VERSION_META].clone();
    if message["method"] == "server/discover" {
        let mut versions: Vec<&str> = legacy.to_vec();
        versions.reverse();
        return Answer {
            status: hyper::StatusCode::OK,
            body: json!({"jsonrpc": "2.0", "id": id, "result": {
                "resultType": "complete",
                "supportedVersions": versions,
                "capabilities": {},
                "_meta": {"io.modelcontextprotocol/serverInfo": {
                    "name": server, "version": env!("CARGO_PKG_VERSION")}},
            }}),
        };
    }
    Answer {
        status: hyper::StatusCode::BAD_REQUEST,
        body: json!({"jsonrpc": "2.0", "id": id, "error": {"code": UNSUPPORTED_VERSION,
            "message": "Unsupported protocol version",
            "data": {"supported": legacy, "requested": requested}}}),
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
            "arguments": {}, "_meta": {VERSION_META: "2026-07-28"}}})
        .to_string()
        .into_bytes()
    }

    const LEGACY: &[&str] = &["2025-06-18", "2025-11-25"];

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
            let a = answer(&h, &call("delete_everything"), LEGACY, "gw");
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
        let a = answer(&wrong_method, &call("x"), LEGACY, "gw");
        assert_eq!(a.body["error"]["code"], HEADER_MISMATCH);
    }

    #[test]
    fn a_valid_modern_request_learns_which_versions_are_served() {
        // "delete_everything" base64-encoded, as a client may send any name.
        let h = headers(&[
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "=?base64?ZGVsZXRlX2V2ZXJ5dGhpbmc=?="),
        ]);
        let a = answer(&h, &call("delete_everything"), LEGACY, "gw");
        assert_eq!(a.body["error"]["code"], UNSUPPORTED_VERSION);
        assert_eq!(a.body["error"]["data"]["supported"], json!(LEGACY));

        let discover = json!({"jsonrpc": "2.0", "id": "d", "method": "server/discover",
            "params": {"_meta": {VERSION_META: "2026-07-28"}}});
        let h = headers(&[
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "server/discover"),
        ]);
        let a = answer(&h, discover.to_string().as_bytes(), LEGACY, "gw");
        assert_eq!(a.status, 200);
        assert_eq!(
            a.body["result"]["supportedVersions"],
            json!(["2025-11-25", "2025-06-18"])
        );
    }
}
