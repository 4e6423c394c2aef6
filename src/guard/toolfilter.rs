//! Rewriting list results: `tools/list`, `prompts/list`, `resources/templates/list`
//! and the `initialize` result, by dropping members while keeping every other byte.
//!
//! A list result is rewritten by replacing only the bytes of its array (`tools`,
//! `prompts`, `resourceTemplates`) with the kept elements, each copied verbatim, so
//! `nextCursor`, `_meta` and everything else in the message are untouched and the
//! agent's pagination keeps working. Nothing is re-serialised when nothing is dropped.
//!
//! [`DenyIndex`] answers the policy question behind least-privilege lists: is a tool
//! denied whatever its arguments are?

use std::sync::OnceLock;

use globset::{Glob, GlobMatcher};
use serde::Deserialize;
use serde::de::{MapAccess, Visitor};
use serde_json::Value;
use serde_json::value::RawValue;

use crate::config::policy::{Action, Policy};

/// Why a server message could not be rewritten. The caller must not forward the
/// message as if it had been inspected (fail closed).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FilterError {
    #[error("server message is not valid JSON: {0}")]
    Json(String),
    #[error("server message has the key {0:?} twice")]
    DuplicateKey(String),
    #[error("`{0}` in the server's result is not an array")]
    NotAnArray(&'static str),
}

/// The lists the guard filters, by the request method that produced them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListKind {
    Tools,
    Prompts,
    Resources,
    ResourceTemplates,
}

impl ListKind {
    /// The list a request method returns, if the guard filters it.
    pub fn from_method(method: &str) -> Option<ListKind> {
        match method {
            "tools/list" => Some(ListKind::Tools),
            "prompts/list" => Some(ListKind::Prompts),
            "resources/list" => Some(ListKind::Resources),
            "resources/templates/list" => Some(ListKind::ResourceTemplates),
            _ => None,
        }
    }

    /// The member of the result holding the list.
    pub fn field(self) -> &'static str {
        match self {
            ListKind::Tools => "tools",
            ListKind::Prompts => "prompts",
            ListKind::Resources => "resources",
            ListKind::ResourceTemplates => "resourceTemplates",
        }
    }
}

/// An object's members in their original order, values kept as raw JSON text.
#[derive(Debug)]
struct Members<'a>(Vec<(String, &'a RawValue)>);

impl<'de> Deserialize<'de> for Members<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Members<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Members<'de>, A::Error> {
                let mut out: Vec<(String, &'de RawValue)> = Vec::new();
                while let Some((key, value)) = map.next_entry::<String, &'de RawValue>()? {
                    if out.iter().any(|(k, _)| *k == key) {
                        return Err(serde::de::Error::custom(DuplicateMarker(key)));
                    }
                    out.push((key, value));
                }
                Ok(Members(out))
            }
        }
        d.deserialize_map(V)
    }
}

/// Carries a duplicate key through serde's error type.
struct DuplicateMarker(String);

impl std::fmt::Display for DuplicateMarker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "duplicate key {}", self.0)
    }
}

fn parse_members(text: &str) -> Result<Members<'_>, FilterError> {
    serde_json::from_str(text).map_err(|e| {
        let msg = e.to_string();
        match msg.strip_prefix("duplicate key ") {
            Some(rest) => {
                FilterError::DuplicateKey(rest.split(" at line").next().unwrap_or(rest).to_string())
            }
            None => FilterError::Json(msg),
        }
    })
}

/// A JSON-RPC response with a `result` object, viewed without copying.
#[derive(Debug)]
pub struct ResultMessage<'a> {
    raw: &'a str,
    result_raw: &'a str,
    result: Members<'a>,
}

impl<'a> ResultMessage<'a> {
    /// View `raw` (one JSON-RPC message) as a result. `Ok(None)` when it is valid JSON
    /// but not a response with an object `result` (an error, a notification).
    pub fn parse(raw: &'a [u8]) -> Result<Option<ResultMessage<'a>>, FilterError> {
        let raw = std::str::from_utf8(raw).map_err(|e| FilterError::Json(e.to_string()))?;
        let message = parse_members(raw)?;
        let Some((_, result)) = message.0.iter().find(|(k, _)| k == "result") else {
            return Ok(None);
        };
        let result_raw = result.get();
        if !result_raw.trim_start().starts_with('{') {
            return Ok(None);
        }
        Ok(Some(ResultMessage {
            raw,
            result_raw,
            result: parse_members(result_raw)?,
        }))
    }

    /// The raw JSON of a member of `result`.
    pub fn get(&self, key: &str) -> Option<&'a RawValue> {
        self.result
            .0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| *v)
    }

    /// The elements of a list member, each raw and parsed.
    pub fn list_items(&self, kind: ListKind) -> Result<Vec<(&'a RawValue, Value)>, FilterError> {
        let Some(list) = self.get(kind.field()) else {
            return Ok(Vec::new());
        };
        let items: Vec<&'a RawValue> =
            serde_json::from_str(list.get()).map_err(|_| FilterError::NotAnArray(kind.field()))?;
        items
            .into_iter()
            .map(|item| {
                serde_json::from_str(item.get())
                    .map(|v| (item, v))
                    .map_err(|e| FilterError::Json(e.to_string()))
            })
            .collect()
    }

    /// Whether the result carries a `nextCursor` (more pages follow).
    pub fn has_next_cursor(&self) -> bool {
        self.get("nextCursor")
            .is_some_and(|c| c.get().trim() != "null")
    }

    /// The message with the list member replaced by exactly `kept` (raw elements).
    pub fn with_list(&self, kind: ListKind, kept: &[&RawValue]) -> Vec<u8> {
        let mut array =
            String::with_capacity(kept.iter().map(|k| k.get().len() + 1).sum::<usize>() + 2);
        array.push('[');
        for (i, item) in kept.iter().enumerate() {
            if i > 0 {
                array.push(',');
            }
            array.push_str(item.get());
        }
        array.push(']');
        match self.get(kind.field()) {
            Some(list) => self.splice(list.get(), &array),
            None => self.raw.as_bytes().to_vec(),
        }
    }

    /// The message with the member `key` removed from `result`.
    pub fn without(&self, key: &str) -> Vec<u8> {
        let mut object = String::with_capacity(self.result_raw.len());
        object.push('{');
        let mut first = true;
        for (k, v) in self.result.0.iter().filter(|(k, _)| k != key) {
            if !first {
                object.push(',');
            }
            first = false;
            object.push_str(&serde_json::to_string(k).expect("strings serialise"));
            object.push(':');
            object.push_str(v.get());
        }
        object.push('}');
        self.splice(self.result_raw, &object)
    }

    /// Replace `part` (a slice of `self.raw`) with `with`.
    fn splice(&self, part: &str, with: &str) -> Vec<u8> {
        let start = part.as_ptr() as usize - self.raw.as_ptr() as usize;
        let end = start + part.len();
        let mut out = Vec::with_capacity(self.raw.len() - part.len() + with.len());
        out.extend_from_slice(&self.raw.as_bytes()[..start]);
        out.extend_from_slice(with.as_bytes());
        out.extend_from_slice(&self.raw.as_bytes()[end..]);
        out
    }
}

/// Which tools the policy denies whatever their arguments: the tools to hide.
///
/// A tool is denied unconditionally when, walking the inbound rules that apply to
/// `tools/call` in order, the first rule that could match it is a deny rule without
/// argument conditions; or when no rule could match it and `default_action` is deny.
/// An allow rule that could match (with or without conditions) keeps the tool visible,
/// and so does a deny rule with conditions, since some calls of the tool are allowed.
#[derive(Debug, Clone)]
pub struct DenyIndex {
    rules: Vec<RuleGlobs>,
    /// The rules that apply to `tools/call`, their tool globs compiled: built when a list
    /// is first filtered, since compiling a glob matcher per rule would otherwise sit on
    /// the path of every start-up.
    compiled: OnceLock<Vec<IndexedRule>>,
    default_deny: bool,
}

#[derive(Debug, Clone)]
struct RuleGlobs {
    method: String,
    tool: Option<String>,
    deny: bool,
    conditional: bool,
}

#[derive(Debug, Clone)]
struct IndexedRule {
    /// `None` matches every tool.
    tool: Option<GlobMatcher>,
    deny: bool,
    conditional: bool,
}

impl DenyIndex {
    pub fn from_policy(policy: &Policy) -> DenyIndex {
        DenyIndex {
            rules: policy
                .rules
                .iter()
                .map(|rule| RuleGlobs {
                    method: rule.method.value.clone(),
                    tool: rule.tool.as_ref().map(|t| t.value.clone()),
                    deny: rule.action == Action::Deny,
                    // A rule naming an identity holds only for some clients.
                    conditional: !rule.arguments.is_empty() || rule.identity.is_some(),
                })
                .collect(),
            compiled: OnceLock::new(),
            default_deny: policy.settings.default_action == Action::Deny,
        }
    }

    /// A policy that denies nothing unconditionally.
    pub fn none() -> DenyIndex {
        DenyIndex {
            rules: Vec::new(),
            compiled: OnceLock::new(),
            default_deny: false,
        }
    }

    fn compiled(&self) -> &[IndexedRule] {
        self.compiled.get_or_init(|| {
            let mut rules = Vec::new();
            for rule in &self.rules {
                let applies_to_calls = Glob::new(&rule.method)
                    .map(|g| g.compile_matcher().is_match("tools/call"))
                    // Globs are validated at load; if one were not, keep the tool visible.
                    .unwrap_or(!rule.deny);
                if !applies_to_calls {
                    continue;
                }
                let tool = match &rule.tool {
                    None => None,
                    Some(pattern) => match Glob::new(pattern) {
                        Ok(g) => Some(g.compile_matcher()),
                        Err(_) if rule.deny => continue,
                        Err(_) => None,
                    },
                };
                rules.push(IndexedRule {
                    tool,
                    deny: rule.deny,
                    conditional: rule.conditional,
                });
            }
            rules
        })
    }

    pub fn denied_unconditionally(&self, tool: &str) -> bool {
        for rule in self.compiled() {
            if rule.tool.as_ref().is_some_and(|g| !g.is_match(tool)) {
                continue;
            }
            if !rule.deny {
                return false;
            }
            if !rule.conditional {
                return true;
            }
        }
        self.default_deny
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_rewrite_keeps_every_other_byte() {
        let raw = br#"{"jsonrpc":"2.0","id":7,"result":{"tools":[{"name":"a"}, {"name":"b","description":"x"} ,{"name":"c"}],"nextCursor":"p2","_meta":{"k":1}}}"#;
        let msg = ResultMessage::parse(raw).unwrap().unwrap();
        let items = msg.list_items(ListKind::Tools).unwrap();
        assert_eq!(items.len(), 3);
        assert!(msg.has_next_cursor());
        let kept: Vec<&RawValue> = items
            .iter()
            .filter(|(_, v)| v["name"] != "b")
            .map(|(r, _)| *r)
            .collect();
        let out = String::from_utf8(msg.with_list(ListKind::Tools, &kept)).unwrap();
        assert_eq!(
            out,
            r#"{"jsonrpc":"2.0","id":7,"result":{"tools":[{"name":"a"},{"name":"c"}],"nextCursor":"p2","_meta":{"k":1}}}"#
        );
    }

    #[test]
    fn removing_a_member_keeps_order_and_escapes() {
        let raw = br#"{"id":1,"jsonrpc":"2.0","result":{"protocolVersion":"2025-06-18","instructions":"do x","serverInfo":{"name":"s"},"k\"q":2}}"#;
        let msg = ResultMessage::parse(raw).unwrap().unwrap();
        let out = String::from_utf8(msg.without("instructions")).unwrap();
        assert_eq!(
            out,
            r#"{"id":1,"jsonrpc":"2.0","result":{"protocolVersion":"2025-06-18","serverInfo":{"name":"s"},"k\"q":2}}"#
        );
        serde_json::from_str::<Value>(&out).unwrap();
    }

    #[test]
    fn errors_and_notifications_are_not_results() {
        let err = br#"{"jsonrpc":"2.0","id":1,"error":{"code":-1,"message":"no"}}"#;
        assert!(ResultMessage::parse(err).unwrap().is_none());
        let note = br#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#;
        assert!(ResultMessage::parse(note).unwrap().is_none());
    }

    #[test]
    fn malformed_and_ambiguous_messages_are_errors() {
        assert!(matches!(
            ResultMessage::parse(b"{\"result\":"),
            Err(FilterError::Json(_))
        ));
        let dup = br#"{"jsonrpc":"2.0","id":1,"result":{"tools":[],"tools":[{"name":"x"}]}}"#;
        assert_eq!(
            ResultMessage::parse(dup).unwrap_err(),
            FilterError::DuplicateKey("tools".into())
        );
        let not_array = br#"{"jsonrpc":"2.0","id":1,"result":{"tools":{"name":"x"}}}"#;
        let msg = ResultMessage::parse(not_array).unwrap().unwrap();
        assert_eq!(
            msg.list_items(ListKind::Tools).unwrap_err(),
            FilterError::NotAnArray("tools")
        );
    }

    #[test]
    fn null_cursor_is_last_page() {
        let raw = br#"{"jsonrpc":"2.0","id":1,"result":{"tools":[],"nextCursor":null}}"#;
        assert!(
            !ResultMessage::parse(raw)
                .unwrap()
                .unwrap()
                .has_next_cursor()
        );
    }
}
