//! Names the MCP specification defines.

/// The request methods of the specification. A rule naming a literal method outside
/// this list (and not a notification) most likely holds a typo.
pub const REQUEST_METHODS: &[&str] = &[
    "initialize",
    "ping",
    "tools/list",
    "tools/call",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "resources/subscribe",
    "resources/unsubscribe",
    "prompts/list",
    "prompts/get",
    "completion/complete",
    "logging/setLevel",
    "sampling/createMessage",
    "elicitation/create",
    "roots/list",
];

/// The notifications of the specification.
pub const NOTIFICATIONS: &[&str] = &[
    "notifications/initialized",
    "notifications/cancelled",
    "notifications/progress",
    "notifications/message",
    "notifications/roots/list_changed",
    "notifications/tools/list_changed",
    "notifications/prompts/list_changed",
    "notifications/resources/list_changed",
    "notifications/resources/updated",
];

/// Whether `method` is one the specification defines: such a name carries no secret, so
/// the secret detectors need not read it.
pub fn is_spec_method(method: &str) -> bool {
    REQUEST_METHODS.contains(&method) || NOTIFICATIONS.contains(&method)
}

/// Whether a message is an `initialize` request (the one message that opens a session).
/// Not JSON, or not an object, is not one.
pub fn is_initialize(message: &[u8]) -> bool {
    #[derive(serde::Deserialize)]
    struct Head<'a> {
        #[serde(borrow)]
        method: Option<std::borrow::Cow<'a, str>>,
    }
    serde_json::from_slice::<Head<'_>>(message)
        .is_ok_and(|h| h.method.as_deref() == Some("initialize"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_initialize_is_told_from_other_messages() {
        assert!(is_initialize(
            br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#
        ));
        assert!(!is_initialize(
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#
        ));
        assert!(!is_initialize(
            br#"{"jsonrpc":"2.0","id":1,"method":"initialized"}"#
        ));
        assert!(!is_initialize(b"not json"));
        assert!(!is_initialize(
            br#"[{"jsonrpc":"2.0","id":1,"method":"initialize"}]"#
        ));
    }
}
