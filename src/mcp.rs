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
