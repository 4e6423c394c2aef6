//! Request ids: their exact text, the key a request is filed under, and the number an
//! SDK would read one as.
//!
//! A response is delivered only to the request it answers (ARCHITECTURE decision 10).
//! "Answers" means: the same JSON value, the same type (`2` is not `"2"`). The official
//! SDKs are laxer than that: the TypeScript SDK looks a response up by `Number(id)`, and
//! pydantic reads `2.0` as the integer `2`. A response whose id only matches that way
//! would be taken as the answer by the client while mcpwall judged it as an answer to
//! nothing (no `tool:` rules, no tool-list guard), so such a response is never forwarded
//! and the request it would have answered gets an error instead ([`numeric_value`]).

/// Longest id text kept without a heap allocation. JSON-RPC ids are almost always
/// short numbers or short strings.
const INLINE_ID: usize = 30;

/// The JSON text of a request id.
#[derive(Clone, PartialEq, Eq)]
pub enum IdText {
    Inline { len: u8, bytes: [u8; INLINE_ID] },
    Heap(Box<[u8]>),
}

impl IdText {
    pub fn new(raw: &[u8]) -> IdText {
        if raw.len() <= INLINE_ID {
            let mut bytes = [0; INLINE_ID];
            bytes[..raw.len()].copy_from_slice(raw);
            IdText::Inline {
                len: raw.len() as u8,
                bytes,
            }
        } else {
            IdText::Heap(raw.into())
        }
    }

    /// The key of the id's JSON value: equal for `"a\u0062"` and `"ab"`, different for
    /// `2` and `"2"`. Integers and strings without escapes (nearly every id) are their
    /// own key; a string with escapes is decoded and written again with the fewest.
    pub fn key_of(raw: &[u8]) -> IdText {
        if raw.first() == Some(&b'"')
            && raw.contains(&b'\\')
            && let Ok(decoded) = serde_json::from_slice::<String>(raw)
            && let Ok(plain) = serde_json::to_vec(&decoded)
        {
            return IdText::new(&plain);
        }
        IdText::new(raw)
    }

    pub fn as_bytes(&self) -> &[u8] {
        match self {
            IdText::Inline { len, bytes } => &bytes[..*len as usize],
            IdText::Heap(b) => b,
        }
    }
}

/// The key of a string or number id as text ([`IdText::key_of`]), for transports that
/// route answers by id (the gateway, the upstream link); `None` for any other JSON value
/// (`null`, an object, a boolean), which no request has. One key for the whole program:
/// a transport that canonicalised ids its own way would route an answer the session
/// matched elsewhere.
pub fn route_key(raw: &[u8]) -> Option<String> {
    let is_number = |b: &u8| b.is_ascii_digit() || *b == b'-';
    let scalar = match raw.first() {
        Some(b'"') => serde_json::from_slice::<String>(raw).is_ok(),
        Some(b) if is_number(b) => serde_json::from_slice::<serde_json::Number>(raw).is_ok(),
        _ => false,
    };
    if !scalar {
        return None;
    }
    String::from_utf8(IdText::key_of(raw).as_bytes().to_vec()).ok()
}

/// The key of a string id given as text (not as JSON): what [`route_key`] gives for the
/// JSON string holding it, for a transport that makes up ids of its own (the gateway's
/// requests for stateless clients).
pub fn string_key(text: &str) -> String {
    // serde_json writes a string with the fewest escapes, as `IdText::key_of` does.
    serde_json::Value::from(text).to_string()
}

/// Hashes the id's text alone, not the unused tail of the inline array (equal ids have
/// equal text, whichever variant holds them).
impl std::hash::Hash for IdText {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        state.write(self.as_bytes());
    }
}

impl std::fmt::Debug for IdText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", String::from_utf8_lossy(self.as_bytes()))
    }
}

/// The number a lax reader takes the id for, as JavaScript's `Number(id)` does: `2`,
/// `2.0`, `2e0`, `"2"`, `" 2 "`, `"0x2"` are all 2. `None` for an id no SDK reads as a
/// number (`"abc"`, `null`, an object).
pub fn numeric_value(raw: &[u8]) -> Option<f64> {
    let text: std::borrow::Cow<'_, str> = match raw.first()? {
        b'"' => serde_json::from_slice::<String>(raw).ok()?.into(),
        b'-' | b'0'..=b'9' => std::str::from_utf8(raw).ok()?.into(),
        _ => return None,
    };
    let t = text.trim();
    if t.is_empty() {
        // `Number("")` is 0.
        return Some(0.0);
    }
    let radix = |prefix: &str, radix: u32| {
        t.strip_prefix(prefix)
            .or_else(|| t.strip_prefix(&prefix.to_ascii_uppercase()))
            .and_then(|digits| u64::from_str_radix(digits, radix).ok())
            .map(|n| n as f64)
    };
    let value = radix("0x", 16)
        .or_else(|| radix("0o", 8))
        .or_else(|| radix("0b", 2))
        .or_else(|| {
            // Rust's float syntax, less the spellings JavaScript does not read.
            let lower = t.to_ascii_lowercase();
            let named = lower.trim_start_matches(['+', '-']);
            if named.starts_with("inf") || named.starts_with("nan") {
                return None;
            }
            t.parse::<f64>().ok()
        })?;
    value.is_finite().then_some(value)
}

#[cfg(test)]
mod tests {

    #[test]
    fn route_keys_are_the_session_keys_of_strings_and_numbers() {
        assert_eq!(route_key(br#""a\u0062""#), route_key(br#""ab""#));
        assert_eq!(route_key(br#""ab""#).as_deref(), Some(r#""ab""#));
        assert_ne!(route_key(b"2"), route_key(br#""2""#));
        // `2.0` is not `2` (a lax match the session refuses), so not the same key.
        assert_ne!(route_key(b"2.0"), route_key(b"2"));
        for not_an_id in [&b"null"[..], b"[1]", b"true", b"{}", b"", b"\"x", b"01x"] {
            assert_eq!(
                route_key(not_an_id),
                None,
                "{}",
                String::from_utf8_lossy(not_an_id)
            );
        }
    }

    use super::*;

    #[test]
    fn a_string_key_is_the_route_key_of_the_string() {
        for text in ["mcpwall-1", "a\"b", "tab\there", "é/ü", "\u{1}"] {
            let json = serde_json::Value::from(text).to_string();
            assert_eq!(
                Some(string_key(text)),
                route_key(json.as_bytes()),
                "{text:?}"
            );
        }
        // A string with escapes that need not be there still has the one key.
        assert_eq!(Some(string_key("a/b")), route_key(br#""a\/b""#));
    }

    #[test]
    fn keys_are_json_values() {
        assert_eq!(IdText::key_of(br#""a\u0062""#), IdText::new(br#""ab""#));
        assert_eq!(IdText::key_of(br#""a\/b""#), IdText::new(br#""a/b""#));
        assert_ne!(IdText::key_of(b"2"), IdText::key_of(br#""2""#));
        // A string whose escapes must stay keeps them, written the one way.
        assert_eq!(
            IdText::key_of(br#""\u0022""#).as_bytes(),
            br#""\"""#.as_slice()
        );
    }

    #[test]
    fn lax_readers_take_these_for_numbers() {
        for raw in [
            &b"2"[..],
            b"2.0",
            b"2e0",
            br#""2""#,
            br#"" 2 ""#,
            br#""2.0""#,
            br#""0x2""#,
            br#""\u0032""#,
        ] {
            assert_eq!(
                numeric_value(raw),
                Some(2.0),
                "{}",
                String::from_utf8_lossy(raw)
            );
        }
        for raw in [
            &br#""abc""#[..],
            b"null",
            br#""Infinity""#,
            b"{}",
            br#""2x""#,
        ] {
            assert_eq!(numeric_value(raw), None, "{}", String::from_utf8_lossy(raw));
        }
    }

    #[test]
    fn long_ids_round_trip() {
        let raw = format!("\"{}\"", "x".repeat(100));
        assert_eq!(IdText::new(raw.as_bytes()).as_bytes(), raw.as_bytes());
    }
}
