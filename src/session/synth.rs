//! Messages mcpwall writes itself: JSON-RPC errors for refused requests and the
//! replacement result for blocked responses. Ids are copied as their raw JSON text,
//! so whatever the peer sent (`7`, `"7"`, `12345678901234567890`) comes back unchanged.

/// JSON-RPC error code for every request refused by policy (a rule, `default_action`,
/// the rate limit or a full pending table). Fixed and documented: clients and tests can
/// tell a policy refusal from a server error by it. (-32000..-32099 is the range
/// JSON-RPC reserves for implementation-defined server errors.)
pub const POLICY_DENIED: i32 = -32001;

/// JSON-RPC error code sent to the client for requests still unanswered when the
/// server exits.
pub const SERVER_EXITED: i32 = -32002;

/// Prefix of the text that replaces a blocked response.
pub const BLOCK_PREFIX: &str = "[BLOCKED BY MCPWALL] ";

/// Write `s` as a JSON string literal (quotes and escapes included).
pub fn json_string(out: &mut Vec<u8>, s: &str) {
    // Writing into a Vec cannot fail, and a &str always serialises.
    let _ = serde_json::to_writer(&mut *out, s);
}

/// `{"jsonrpc":"2.0","id":ID,"error":{"code":CODE,"message":MSG[,"data":{"rule":RULE}]}}`
/// with `id: null` when none could be read. No trailing newline.
pub fn error_response(
    out: &mut Vec<u8>,
    id: Option<&[u8]>,
    code: i32,
    message: &str,
    rule: Option<&str>,
) {
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    out.extend_from_slice(id.unwrap_or(b"null"));
    out.extend_from_slice(b",\"error\":{\"code\":");
    out.extend_from_slice(code.to_string().as_bytes());
    out.extend_from_slice(b",\"message\":");
    json_string(out, message);
    if let Some(rule) = rule {
        out.extend_from_slice(b",\"data\":{\"rule\":");
        json_string(out, rule);
        out.push(b'}');
    }
    out.extend_from_slice(b"}}");
}

/// The result that replaces a blocked response:
/// `{"jsonrpc":"2.0","id":ID,"result":{"content":[{"type":"text","text":"[BLOCKED BY MCPWALL] MSG"}],"isError":true}}`.
pub fn block_result(out: &mut Vec<u8>, id: &[u8], message: &str) {
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    out.extend_from_slice(id);
    out.extend_from_slice(b",\"result\":{\"content\":[{\"type\":\"text\",\"text\":");
    let mut text = String::with_capacity(BLOCK_PREFIX.len() + message.len());
    text.push_str(BLOCK_PREFIX);
    text.push_str(message);
    json_string(out, &text);
    out.extend_from_slice(b"}],\"isError\":true}}");
}

/// The error that replaces a blocked error response (same code family as policy
/// denials, message prefixed like a blocked result).
pub fn block_error(out: &mut Vec<u8>, id: &[u8], message: &str, rule: &str) {
    let mut text = String::with_capacity(BLOCK_PREFIX.len() + message.len());
    text.push_str(BLOCK_PREFIX);
    text.push_str(message);
    error_response(out, Some(id), POLICY_DENIED, &text, Some(rule));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[u8]) -> &str {
        std::str::from_utf8(v).unwrap()
    }

    #[test]
    fn error_keeps_the_raw_id_and_escapes_the_message() {
        let mut out = Vec::new();
        error_response(
            &mut out,
            Some(b"12345678901234567890123"),
            POLICY_DENIED,
            "no \"ssh\" keys\n",
            Some("block-ssh"),
        );
        assert_eq!(
            s(&out),
            r#"{"jsonrpc":"2.0","id":12345678901234567890123,"error":{"code":-32001,"message":"no \"ssh\" keys\n","data":{"rule":"block-ssh"}}}"#
        );
        out.clear();
        error_response(&mut out, None, -32700, "parse error", None);
        assert_eq!(
            s(&out),
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}"#
        );
    }

    #[test]
    fn block_result_is_a_tool_error_result() {
        let mut out = Vec::new();
        block_result(&mut out, b"\"a\"", "secret found");
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["id"], "a");
        assert_eq!(v["result"]["isError"], true);
        assert_eq!(
            v["result"]["content"][0]["text"],
            "[BLOCKED BY MCPWALL] secret found"
        );
    }
}
