//! Property tests for the frame parser and redaction (STYLE.md P1–P3, P5, P6, plus a
//! differential against serde_json). The checks themselves live in
//! `mcpwall::frame::checks`, shared with the fuzz targets and the regression replay;
//! they panic with the frame, the spans and the output.
//!
//! Frames are generated as JSON trees whose strings are written with random escapes
//! (`\uXXXX`, surrogate pairs, `\/`, short escapes), non-ASCII text and nesting.

use std::collections::BTreeSet;

use mcpwall::frame::checks::{self, Pick};
use mcpwall::frame::{Frame, Limits, Parsed, TokenKind, redact};
use proptest::prelude::*;

/// How one character of a string is written.
#[derive(Debug, Clone, Copy)]
enum Style {
    Plain,
    Unicode,
    UpperUnicode,
    Short,
}

#[derive(Debug, Clone)]
enum Json {
    Null,
    Bool(bool),
    Number(String),
    String(Vec<(char, Style)>),
    Array(Vec<Json>),
    Object(Vec<(Vec<(char, Style)>, Json)>),
}

fn style() -> impl Strategy<Value = Style> {
    prop_oneof![
        6 => Just(Style::Plain),
        2 => Just(Style::Unicode),
        1 => Just(Style::UpperUnicode),
        1 => Just(Style::Short),
    ]
}

fn text_char() -> impl Strategy<Value = char> {
    prop_oneof![
        8 => proptest::char::range('a', 'z'),
        2 => Just('/'),
        1 => Just('"'),
        1 => Just('\\'),
        1 => Just('\n'),
        1 => proptest::char::range('\0', '\u{1f}'),
        2 => proptest::char::range('\u{e0}', '\u{ff}'),
        2 => proptest::char::range('\u{3040}', '\u{30ff}'),
        2 => proptest::char::range('\u{1f600}', '\u{1f64f}'),
        1 => Just('\u{2028}'),
        1 => any::<char>(),
    ]
}

fn text() -> impl Strategy<Value = Vec<(char, Style)>> {
    proptest::collection::vec((text_char(), style()), 0..12)
}

fn number() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<i64>().prop_map(|n| n.to_string()),
        (any::<i32>(), 0u32..1000).prop_map(|(a, b)| format!("{a}.{b}")),
        (-20i32..20).prop_map(|e| format!("1.5e{e}")),
        Just("12345678901234567890".to_owned()),
        Just("-0".to_owned()),
    ]
}

fn json() -> impl Strategy<Value = Json> {
    let leaf = prop_oneof![
        1 => Just(Json::Null),
        1 => any::<bool>().prop_map(Json::Bool),
        1 => number().prop_map(Json::Number),
        3 => text().prop_map(Json::String),
    ];
    leaf.prop_recursive(5, 48, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Json::Array),
            proptest::collection::vec((text(), inner), 0..6)
                .prop_map(|members| { Json::Object(dedup_keys(members)) }),
        ]
    })
}

/// Keep the first of each decoded key: duplicate keys are refused by design.
fn dedup_keys<T>(members: Vec<(Vec<(char, Style)>, T)>) -> Vec<(Vec<(char, Style)>, T)> {
    let mut seen = BTreeSet::new();
    members
        .into_iter()
        .filter(|(k, _)| seen.insert(decoded(k)))
        .collect()
}

fn decoded(s: &[(char, Style)]) -> String {
    s.iter().map(|(c, _)| *c).collect()
}

fn write_string(s: &[(char, Style)], out: &mut String) {
    out.push('"');
    for &(c, style) in s {
        let must_escape = c == '"' || c == '\\' || c < ' ';
        match style {
            Style::Plain if !must_escape => out.push(c),
            Style::Unicode | Style::UpperUnicode | Style::Plain | Style::Short => {
                let short = match c {
                    '"' => Some("\\\""),
                    '\\' => Some("\\\\"),
                    '/' => Some("\\/"),
                    '\n' => Some("\\n"),
                    '\r' => Some("\\r"),
                    '\t' => Some("\\t"),
                    '\u{8}' => Some("\\b"),
                    '\u{c}' => Some("\\f"),
                    _ => None,
                };
                match (style, short) {
                    (Style::Short | Style::Plain, Some(esc)) => out.push_str(esc),
                    _ => {
                        let mut units = [0u16; 2];
                        for unit in c.encode_utf16(&mut units) {
                            if matches!(style, Style::UpperUnicode) {
                                out.push_str(&format!("\\u{unit:04X}"));
                            } else {
                                out.push_str(&format!("\\u{unit:04x}"));
                            }
                        }
                    }
                }
            }
        }
    }
    out.push('"');
}

fn write_json(j: &Json, out: &mut String) {
    match j {
        Json::Null => out.push_str("null"),
        Json::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Json::Number(n) => out.push_str(n),
        Json::String(s) => write_string(s, out),
        Json::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_json(item, out);
            }
            out.push(']');
        }
        Json::Object(members) => {
            out.push('{');
            for (i, (k, v)) in members.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_string(k, out);
                out.push(':');
                write_json(v, out);
            }
            out.push('}');
        }
    }
}

/// A JSON-RPC message around a generated tree: a response, a tools/call, another
/// request with object params, a notification with array params.
fn message() -> impl Strategy<Value = String> {
    (0u8..4, json(), any::<u32>(), text(), text()).prop_map(|(shape, tree, id, tool, method)| {
        let mut body = String::new();
        write_json(&tree, &mut body);
        let object = |body: &str| {
            if body.starts_with('{') {
                body.to_owned()
            } else {
                format!("{{\"value\":{body}}}")
            }
        };
        let mut tool_name = String::new();
        write_string(&tool, &mut tool_name);
        let mut method_name = String::new();
        write_string(&method, &mut method_name);
        match shape {
            0 => format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{body}}}"#),
            1 => format!(
                r#"{{"jsonrpc":"2.0","id":"c{id}","method":"tools/call","params":{{"name":{tool_name},"arguments":{}}}}}"#,
                object(&body)
            ),
            2 => format!(
                r#"{{"params":{},"id":{id},"method":"resources/read","jsonrpc":"2.0"}}"#,
                object(&body)
            ),
            _ => format!(r#"{{"jsonrpc":"2.0","method":"notifications/x","params":[{body},{method_name}]}}"#),
        }
    })
}

fn frame() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => message(),
        1 => proptest::collection::vec(message(), 1..4).prop_map(|ms| format!("[{}]", ms.join(" , "))),
    ]
}

fn picks() -> impl Strategy<Value = Vec<Pick>> {
    proptest::collection::vec(
        (0usize..64, 0usize..40, 0usize..24).prop_map(|(token, start, len)| Pick {
            token,
            start,
            end: start + len,
        }),
        0..5,
    )
}

fn marker() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("[REDACTED:aws-access-key]".to_owned()),
        Just("[REDACTED: \"quoted\" \\ back]".to_owned()),
        Just(String::new()),
        proptest::collection::vec(text_char(), 0..8).prop_map(|cs| cs.into_iter().collect()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Generated frames parse, and agree with serde_json on every decoded string.
    #[test]
    fn generated_frames_parse_like_serde_json(line in frame()) {
        let mut parsed = Parsed::new();
        if let Err(e) = parsed.parse(line.as_bytes(), &Limits::default()) {
            panic!("refused {line:?}: {e}");
        }
        checks::check_scan(line.as_bytes());
    }

    /// serde_json's own serialisation of a generated frame parses too.
    #[test]
    fn serde_json_output_parses(line in frame()) {
        let value: serde_json::Value = serde_json::from_str(&line).unwrap();
        let reserialised = serde_json::to_string(&value).unwrap();
        let mut parsed = Parsed::new();
        // serde_json may reorder members but keeps the message valid.
        if let Err(e) = parsed.parse(reserialised.as_bytes(), &Limits::default()) {
            panic!("refused {reserialised:?}: {e}");
        }
        checks::check_scan(reserialised.as_bytes());
    }

    /// Random byte edits of valid frames: whatever serde_json refuses, we refuse; we
    /// never panic; accepted results still agree with serde_json.
    #[test]
    fn mutated_frames_never_disagree(
        line in frame(),
        edits in proptest::collection::vec((any::<prop::sample::Index>(), 0u8..4, any::<u8>()), 1..4),
    ) {
        let mut bytes = line.into_bytes();
        for (at, op, byte) in edits {
            let i = at.index(bytes.len() + 1);
            let byte = [byte, b'"', b'\\', b',', b'}', b']', b'\r', b'u'][usize::from(byte % 8)];
            match op {
                0 if i < bytes.len() => bytes[i] = byte,
                1 if i < bytes.len() => { bytes.remove(i); }
                _ => bytes.insert(i, byte),
            }
        }
        checks::check_scan(&bytes);
    }

    /// P1, P3, P6 and escape-safety of `raw_range` for random picks and markers.
    #[test]
    fn redaction_keeps_json_and_every_other_byte(line in frame(), picks in picks(), marker in marker()) {
        checks::check_redact(line.as_bytes(), &picks, &marker);
    }

    /// A frame written out in pieces from `splice` (the bytes between its ranges, then
    /// each replacement) is what `apply` produces, for any edits: out of range,
    /// inverted, overlapping, adjacent, empty, with texts that need escaping.
    #[test]
    fn spliced_pieces_equal_the_applied_edits(
        line in frame(),
        raw_edits in proptest::collection::vec((0usize..400, 0usize..40, 0usize..4), 0..12),
    ) {
        const TEXTS: [&str; 4] = ["[REDACTED]", "", "a \"quoted\" \\ marker", "tab\there\n"];
        let raw = line.as_bytes();
        let edits: Vec<(std::ops::Range<usize>, &str)> = raw_edits
            .iter()
            .map(|&(start, len, text)| {
                let end = if text == 3 { start.saturating_sub(len) } else { start + len };
                (start..end, TEXTS[text])
            })
            .collect();
        let mut applied = Vec::new();
        redact::apply(raw, &mut edits.clone(), &mut applied);
        let pieces = redact::splice(raw.len(), &mut edits.clone());
        let mut spliced = Vec::new();
        let mut copied = 0;
        for (range, text) in &pieces {
            prop_assert!(copied <= range.start && range.start <= range.end && range.end <= raw.len());
            spliced.extend_from_slice(&raw[copied..range.start]);
            spliced.extend_from_slice(text);
            copied = range.end;
        }
        spliced.extend_from_slice(&raw[copied..]);
        prop_assert_eq!(spliced, applied);
    }

    /// P5: no edits, same bytes (appended after what `out` held).
    #[test]
    fn no_edits_forward_the_input(line in frame()) {
        let mut out = b"[".to_vec();
        redact::apply(line.as_bytes(), &mut Vec::new(), &mut out);
        prop_assert_eq!(&out[..1], b"[");
        prop_assert_eq!(&out[1..], line.as_bytes());
    }

    /// P2 at the frame level: a fake secret planted in strings (written with random
    /// escapes) is found in the decoded text, mapped back with `raw_range`, and no
    /// decoded string of the output still contains it.
    #[test]
    fn planted_secrets_do_not_survive(
        tree in json(),
        styles in proptest::collection::vec(style(), 20),
        at in 0usize..4,
        id in any::<u16>(),
    ) {
        let secret: String = format!("{}{}", "AKIA", "QWERTYUIOPASDFGH");
        let written: Vec<(char, Style)> = secret.chars().zip(styles).collect();
        let mut planted = String::new();
        write_string(&written, &mut planted);
        let mut body = String::new();
        write_json(&tree, &mut body);
        let prefix = ["", "x", "\\n", "é"][at];
        let plain = &planted[1..planted.len() - 1];
        let line = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[{body},"{prefix}{plain}","{plain}{prefix}{plain}"],"meta":{{"k":"{plain}"}}}}}}"#
        );
        let mut parsed = Parsed::new();
        parsed.parse(line.as_bytes(), &Limits::default()).unwrap();
        let frame = Frame::new(line.as_bytes(), &parsed);
        let mut edits = Vec::new();
        for tok in frame.tokens().iter().filter(|t| t.kind == TokenKind::String) {
            let text = frame.text(tok.text);
            for (start, found) in text.match_indices(&secret) {
                edits.push((redact::raw_range(&frame, tok, start..start + found.len()), "[REDACTED]"));
            }
        }
        prop_assert!(edits.len() >= 4);
        let mut out = Vec::new();
        redact::apply(line.as_bytes(), &mut edits, &mut out);
        let value: serde_json::Value = serde_json::from_slice(&out)
            .unwrap_or_else(|e| panic!("output of {line:?} is not JSON: {e}: {}", String::from_utf8_lossy(&out)));
        let mut strings = Vec::new();
        collect(&value, &mut strings);
        for s in strings {
            prop_assert!(!s.contains(&secret), "secret survived in {:?} of {}", s, String::from_utf8_lossy(&out));
        }
    }
}

fn collect<'v>(v: &'v serde_json::Value, out: &mut Vec<&'v str>) {
    match v {
        serde_json::Value::String(s) => out.push(s),
        serde_json::Value::Array(items) => items.iter().for_each(|i| collect(i, out)),
        serde_json::Value::Object(map) => map.iter().for_each(|(k, v)| {
            out.push(k);
            collect(v, out);
        }),
        _ => {}
    }
}
