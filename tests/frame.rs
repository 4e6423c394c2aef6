//! The strict frame parser: every refusal kind, every message kind, argument tokens and
//! decoded text, as tables of exact expectations.

use mcpwall::frame::{Frame, FrameError, Limits, MessageKind, Parsed, TextRef, Token, TokenKind};

fn parse(raw: &[u8]) -> Result<Parsed, FrameError> {
    let mut parsed = Parsed::new();
    parsed.parse(raw, &Limits::default()).map(|()| parsed)
}

fn parse_ok(raw: &str) -> Parsed {
    match parse(raw.as_bytes()) {
        Ok(p) => p,
        Err(e) => panic!("expected {raw:?} to parse, got {e:?}"),
    }
}

/// Bytes that are not strict JSON: `(name, line, byte offset of the problem)`.
const PARSE_ERRORS: &[(&str, &[u8], usize)] = &[
    ("empty line", b"", 0),
    ("only whitespace", b"  \t", 3),
    ("not json", b"hello", 0),
    ("truncated object", br#"{"jsonrpc":"2.0""#, 16),
    ("truncated string", br#"{"jsonrpc":"2."#, 14),
    ("trailing comma in object", br#"{"jsonrpc":"2.0",}"#, 17),
    (
        "trailing comma in array",
        br#"{"jsonrpc":"2.0","params":[1,]}"#,
        29,
    ),
    ("block comment", br#"{"jsonrpc":"2.0" /* c */}"#, 17),
    ("line comment", br#"{"jsonrpc":"2.0"} // c"#, 18),
    ("NaN", br#"{"a":NaN}"#, 5),
    ("Infinity", br#"{"a":Infinity}"#, 5),
    ("minus Infinity", br#"{"a":-Infinity}"#, 6),
    ("leading zero", br#"{"a":01}"#, 6),
    ("negative leading zero", br#"{"a":-01}"#, 7),
    ("leading plus", br#"{"a":+1}"#, 5),
    ("bare dot", br#"{"a":.5}"#, 5),
    ("dot without digits", br#"{"a":1.}"#, 7),
    ("exponent without digits", br#"{"a":1e+}"#, 8),
    ("hex number", br#"{"a":0x1}"#, 6),
    (
        "trailing garbage",
        br#"{"jsonrpc":"2.0","method":"a"} x"#,
        31,
    ),
    ("two values", br#"{} {}"#, 3),
    (
        "carriage return at the end",
        b"{\"jsonrpc\":\"2.0\",\"method\":\"a\"}\r",
        30,
    ),
    (
        "carriage return as whitespace",
        b"{\"jsonrpc\":\r\"2.0\",\"method\":\"a\"}",
        11,
    ),
    ("carriage return in a string", b"{\"a\":\"x\ry\"}", 7),
    ("tab in a string", b"{\"a\":\"x\ty\"}", 7),
    ("NUL in a string", b"{\"a\":\"x\0y\"}", 7),
    ("invalid UTF-8 in a string", b"{\"a\":\"x\xffy\"}", 7),
    ("overlong UTF-8", b"{\"a\":\"\xc0\xaf\"}", 6),
    ("UTF-8 surrogate bytes", b"{\"a\":\"\xed\xa0\x80\"}", 6),
    ("truncated UTF-8 before quote", b"{\"a\":\"\xe2\x82\"}", 6),
    ("invalid UTF-8 outside strings", b"{\"a\":1}\xff", 7),
    ("lone high surrogate", br#"{"a":"\ud800"}"#, 6),
    ("high surrogate then letter", br#"{"a":"\ud800\u0041"}"#, 6),
    ("two high surrogates", br#"{"a":"\ud800\ud800"}"#, 6),
    ("lone low surrogate", br#"{"a":"\udc00"}"#, 6),
    ("low then high", br#"{"a":"\ude00\ud83d"}"#, 6),
    ("lone surrogate in a key", br#"{"\ud83d":1}"#, 2),
    ("unknown escape", br#"{"a":"\x41"}"#, 6),
    ("upper-case U escape", br#"{"a":"\U0041"}"#, 6),
    ("short unicode escape", br#"{"a":"\u12"}"#, 8),
    ("non-hex unicode escape", br#"{"a":"\u12g4"}"#, 8),
    ("backslash at the end", br#"{"a":"\"#, 6),
    ("single quotes", br#"{'a':1}"#, 1),
    ("unquoted key", br#"{a:1}"#, 1),
    ("missing colon", br#"{"a" 1}"#, 5),
    ("missing comma", br#"{"a":1 "b":2}"#, 7),
    ("misspelled true", br#"{"a":tru}"#, 5),
    ("capitalised True", br#"{"a":True}"#, 5),
    ("unclosed array", br#"[{"jsonrpc":"2.0","method":"a"}"#, 31),
    ("mismatched closer", br#"{"a":[1}"#, 7),
];

#[test]
fn parse_errors_name_the_offending_byte() {
    for &(name, raw, at) in PARSE_ERRORS {
        match parse(raw) {
            Err(FrameError::Parse { at: got, reason }) => {
                assert_eq!(
                    got, at,
                    "{name}: {raw:?} refused at {got} ({reason}), expected {at}"
                )
            }
            other => panic!("{name}: {raw:?} gave {other:?}, expected a parse error at {at}"),
        }
    }
}

#[test]
fn parse_errors_answer_with_minus_32700() {
    let err = parse(b"{").unwrap_err();
    assert_eq!(err.code(), -32700);
}

/// Valid JSON that is not acceptable JSON-RPC: `(name, line, reason, raw id text)`.
const INVALID: &[(&str, &str, &str, Option<&str>)] = &[
    (
        "jsonrpc missing",
        r#"{"id":1,"method":"ping"}"#,
        JSONRPC,
        Some("1"),
    ),
    (
        "jsonrpc 1.0",
        r#"{"jsonrpc":"1.0","id":1,"method":"ping"}"#,
        JSONRPC,
        Some("1"),
    ),
    (
        "jsonrpc as number",
        r#"{"jsonrpc":2.0,"id":1,"method":"ping"}"#,
        JSONRPC,
        Some("1"),
    ),
    (
        "jsonrpc as object",
        r#"{"jsonrpc":{},"id":1,"method":"ping"}"#,
        JSONRPC,
        Some("1"),
    ),
    (
        "jsonrpc with a space",
        r#"{"jsonrpc":"2.0 ","method":"ping"}"#,
        JSONRPC,
        None,
    ),
    (
        "nothing to do",
        r#"{"jsonrpc":"2.0","id":1}"#,
        "a message needs method, result or error",
        Some("1"),
    ),
    (
        "result and error",
        r#"{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1}}"#,
        "a response cannot carry both result and error",
        Some("1"),
    ),
    (
        "method and result",
        r#"{"jsonrpc":"2.0","id":1,"method":"ping","result":{}}"#,
        "a request cannot carry result or error",
        Some("1"),
    ),
    (
        "method and error",
        r#"{"jsonrpc":"2.0","id":1,"method":"ping","error":{}}"#,
        "a request cannot carry result or error",
        Some("1"),
    ),
    (
        "response with params",
        r#"{"jsonrpc":"2.0","id":1,"result":{},"params":{}}"#,
        "a response cannot carry params",
        Some("1"),
    ),
    (
        "result without id",
        r#"{"jsonrpc":"2.0","result":{}}"#,
        "a response needs an id",
        None,
    ),
    (
        "error without id",
        r#"{"jsonrpc":"2.0","error":{"code":1}}"#,
        "a response needs an id",
        None,
    ),
    (
        "error as string",
        r#"{"jsonrpc":"2.0","id":1,"error":"bad"}"#,
        "error must be an object",
        Some("1"),
    ),
    (
        "error as array",
        r#"{"jsonrpc":"2.0","id":1,"error":[]}"#,
        "error must be an object",
        Some("1"),
    ),
    (
        "method as number",
        r#"{"jsonrpc":"2.0","id":1,"method":1}"#,
        "method must be a string",
        Some("1"),
    ),
    (
        "method as array",
        r#"{"jsonrpc":"2.0","id":1,"method":["a"]}"#,
        "method must be a string",
        Some("1"),
    ),
    (
        "empty method",
        r#"{"jsonrpc":"2.0","id":1,"method":""}"#,
        METHOD,
        Some("1"),
    ),
    (
        "method with a space",
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call "}"#,
        METHOD,
        Some("1"),
    ),
    (
        "method with an escaped newline",
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call\n"}"#,
        METHOD,
        Some("1"),
    ),
    (
        "method with a control character",
        r#"{"jsonrpc":"2.0","id":1,"method":"tools\u0007call"}"#,
        METHOD,
        Some("1"),
    ),
    (
        "method with a zero-width space",
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/\u{200b}call\"}",
        METHOD,
        Some("1"),
    ),
    (
        "method with a no-break space",
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/\u{a0}call\"}",
        METHOD,
        Some("1"),
    ),
    (
        "params as number",
        r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":1}"#,
        "params must be an object or an array",
        Some("1"),
    ),
    (
        "params as string",
        r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":"x"}"#,
        "params must be an object or an array",
        Some("1"),
    ),
    (
        "params as null",
        r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":null}"#,
        "params must be an object or an array",
        Some("1"),
    ),
    (
        "id as object",
        r#"{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}"#,
        ID,
        None,
    ),
    (
        "id as array",
        r#"{"jsonrpc":"2.0","id":[1],"method":"ping"}"#,
        ID,
        None,
    ),
    (
        "id as bool",
        r#"{"jsonrpc":"2.0","id":true,"method":"ping"}"#,
        ID,
        None,
    ),
    (
        // A number that is not an integer is refused, but its text is kept: a response
        // with it can still be matched by value to the request it meant to answer.
        "id as fraction",
        r#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#,
        ID,
        Some("1.5"),
    ),
    (
        "id with exponent",
        r#"{"jsonrpc":"2.0","id":1e3,"method":"ping"}"#,
        ID,
        Some("1e3"),
    ),
    (
        "request with null id",
        r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#,
        "a request id must not be null",
        Some("null"),
    ),
    (
        "tools/call without params",
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#,
        "tools/call needs params as an object",
        Some("1"),
    ),
    (
        "tools/call with array params",
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":["x"]}"#,
        "tools/call needs params as an object",
        Some("1"),
    ),
    (
        "tools/call without name",
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{}}}"#,
        TOOL,
        Some("1"),
    ),
    (
        "tools/call with numeric name",
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":7}}"#,
        TOOL,
        Some("1"),
    ),
    (
        "tools/call with object name",
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":{"a":"b"}}}"#,
        TOOL,
        Some("1"),
    ),
    (
        "tools/call with array arguments",
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":["a"]}}"#,
        "tools/call arguments must be an object",
        Some("1"),
    ),
    (
        "tools/call with string arguments",
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":"a"}}"#,
        "tools/call arguments must be an object",
        Some("1"),
    ),
    (
        "duplicate top-level key",
        r#"{"jsonrpc":"2.0","id":1,"method":"ping","method":"tools/call"}"#,
        DUP,
        Some("1"),
    ),
    (
        "duplicate key spelled with an escape",
        r#"{"jsonrpc":"2.0","id":1,"method":"ping","\u006dethod":"tools/call"}"#,
        DUP,
        Some("1"),
    ),
    (
        "duplicate key with an escaped slash",
        r#"{"jsonrpc":"2.0","id":1,"method":"x","params":{"a/b":1,"a\/b":2}}"#,
        DUP,
        Some("1"),
    ),
    (
        "duplicate key with a surrogate pair",
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\",\"params\":{\"\u{1f600}\":1,\"\\ud83d\\ude00\":2}}",
        DUP,
        Some("1"),
    ),
    (
        "duplicate argument",
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{"path":"/tmp","path":"/etc"}}}"#,
        DUP,
        Some("1"),
    ),
    (
        "duplicate deep in an array",
        r#"{"jsonrpc":"2.0","id":1,"method":"x","params":{"a":[{"b":{"c":1,"c":1}}]}}"#,
        DUP,
        Some("1"),
    ),
    (
        "duplicate before the id",
        r#"{"jsonrpc":"2.0","params":{"a":1,"a":2},"method":"x","id":"late"}"#,
        DUP,
        Some("\"late\""),
    ),
    (
        "duplicate id",
        r#"{"jsonrpc":"2.0","id":1,"method":"ping","id":2}"#,
        DUP,
        None,
    ),
    ("top-level number", "1", TOP, None),
    ("top-level string", r#""ping""#, TOP, None),
    ("top-level null", "null", TOP, None),
    ("empty batch", "[]", "empty batch", None),
    ("empty batch with spaces", "[ \t ]", "empty batch", None),
    ("batch of a number", "[1]", BATCH_ELEMENT, None),
    (
        "nested batch",
        r#"[[{"jsonrpc":"2.0","method":"a"}]]"#,
        BATCH_ELEMENT,
        None,
    ),
    (
        "batch with a bad element",
        r#"[{"jsonrpc":"2.0","id":1,"method":"a"},{"jsonrpc":"1.0","id":2,"method":"b"}]"#,
        JSONRPC,
        Some("2"),
    ),
    (
        "batch with a number after good ones",
        r#"[{"jsonrpc":"2.0","id":1,"method":"a"},3]"#,
        BATCH_ELEMENT,
        None,
    ),
    (
        "first bad element wins",
        r#"[{"jsonrpc":"2.0","id":"x"},{"jsonrpc":"2.0","id":"y","method":""}]"#,
        "a message needs method, result or error",
        Some("\"x\""),
    ),
];

const JSONRPC: &str = "jsonrpc must be \"2.0\"";
const METHOD: &str = "method must be a non-empty name without whitespace or control characters";
const ID: &str = "id must be a string, an integer or null";
const TOOL: &str = "tools/call needs params.name as a string";
const DUP: &str = "duplicate key in an object";
const TOP: &str = "a frame must be a JSON-RPC object or a batch array";
const BATCH_ELEMENT: &str = "a batch element must be an object";

#[test]
fn invalid_messages_are_refused_with_their_id() {
    for &(name, raw, reason, id) in INVALID {
        match parse(raw.as_bytes()) {
            Err(FrameError::Invalid {
                reason: got,
                id: got_id,
            }) => {
                assert_eq!(got, reason, "{name}: {raw}");
                let got_id = got_id.map(|r| &raw[r]);
                assert_eq!(got_id, id, "{name}: {raw}");
            }
            other => panic!("{name}: {raw} gave {other:?}, expected Invalid({reason})"),
        }
    }
}

#[test]
fn invalid_requests_answer_with_minus_32600() {
    let err = parse(br#"{"jsonrpc":"1.0","id":1,"method":"a"}"#).unwrap_err();
    assert_eq!(err.code(), -32600);
}

#[test]
fn broken_json_wins_over_a_bad_message_before_it() {
    // The first element is invalid JSON-RPC, the line as a whole is not JSON: -32700.
    let err = parse(br#"[{"jsonrpc":"1.0","id":1,"method":"a"}, {"#).unwrap_err();
    assert!(matches!(err, FrameError::Parse { at: 41, .. }), "{err:?}");
}

fn object_with_keys(n: usize, last: &str) -> String {
    let mut params = String::new();
    for i in 0..n {
        params.push_str(&format!("\"k{i}\":{i},"));
    }
    params.push_str(&format!("\"{last}\":0"));
    format!(r#"{{"jsonrpc":"2.0","id":1,"method":"x","params":{{{params}}}}}"#)
}

#[test]
fn large_objects_find_duplicates_by_sorting() {
    // Past the pairwise threshold the keys are sorted; the duplicate is the first and
    // the last key, spelled differently.
    let dup = object_with_keys(1000, "k\\u0030");
    match parse(dup.as_bytes()) {
        Err(FrameError::Invalid { reason, .. }) => assert_eq!(reason, DUP),
        other => panic!("expected a duplicate, got {other:?}"),
    }
    let distinct = object_with_keys(1000, "other");
    let parsed = parse_ok(&distinct);
    assert_eq!(parsed.tokens().len(), 7 + 2 * 1001);
}

#[test]
fn a_hundred_thousand_keys_are_checked_quickly() {
    let line = object_with_keys(100_000, "k99999");
    let started = std::time::Instant::now();
    let err = parse(line.as_bytes()).unwrap_err();
    assert!(
        matches!(err, FrameError::Invalid { reason: DUP, .. }),
        "{err:?}"
    );
    // Quadratic comparison would take minutes; sorting takes milliseconds.
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
}

fn nested(depth_inside_params: usize) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"x","params":{}1{}}}"#,
        "[".repeat(depth_inside_params),
        "]".repeat(depth_inside_params)
    )
}

#[test]
fn depth_limit_counts_every_container() {
    // message object + 63 arrays = 64: accepted at the default limit; one more is not.
    parse_ok(&nested(63));
    match parse(nested(64).as_bytes()) {
        Err(FrameError::Invalid { reason, id }) => {
            assert_eq!(reason, "nesting deeper than the limit");
            assert_eq!(id, Some(22..23));
        }
        other => panic!("expected a depth error, got {other:?}"),
    }
    // A deep frame under a huge limit neither overflows the stack nor fails.
    let mut parsed = Parsed::new();
    let limits = Limits {
        max_depth: u16::MAX,
        ..Limits::default()
    };
    parsed.parse(nested(60_000).as_bytes(), &limits).unwrap();
    assert_eq!(parsed.tokens()[parsed.tokens().len() - 1].depth, 60_001);
}

#[test]
fn batch_array_counts_towards_the_depth_limit() {
    let limits = Limits {
        max_depth: 2,
        ..Limits::default()
    };
    let mut parsed = Parsed::new();
    let flat = br#"[{"jsonrpc":"2.0","method":"a"}]"#;
    parsed.parse(flat, &limits).unwrap();
    let deeper = br#"[{"jsonrpc":"2.0","method":"a","params":{}}]"#;
    assert!(matches!(
        parsed.parse(deeper, &limits),
        Err(FrameError::Invalid {
            reason: "nesting deeper than the limit",
            ..
        })
    ));
}

#[test]
fn oversize_frames_are_refused_before_scanning() {
    let limits = Limits {
        max_frame_bytes: 10,
        ..Limits::default()
    };
    let mut parsed = Parsed::new();
    // Not even JSON: size is checked first.
    let err = parsed.parse(b"{{{{{{{{{{{", &limits).unwrap_err();
    assert_eq!(err, FrameError::TooLarge { len: 11, limit: 10 });
    assert_eq!(err.code(), -32600);
    parsed.parse(b"  [1]     ", &limits).unwrap_err(); // 10 bytes: scanned
    assert!(matches!(
        parsed.parse(b"  [1]     ", &limits),
        Err(FrameError::Invalid { .. })
    ));
}

/// Accepted ids and how their raw text is kept: `(id as written, kind)`.
const IDS: &[(&str, MessageKind)] = &[
    ("1", MessageKind::Request),
    ("0", MessageKind::Request),
    ("-5", MessageKind::Request),
    ("12345678901234567890", MessageKind::Request),
    ("\"abc\"", MessageKind::Request),
    ("\"\"", MessageKind::Request),
    ("\"a\\u0062\"", MessageKind::Request),
    ("\"1\"", MessageKind::Request),
    ("null", MessageKind::Result),
];

#[test]
fn ids_are_kept_as_written() {
    for &(id, kind) in IDS {
        let body = if kind == MessageKind::Request {
            r#""method":"ping""#
        } else {
            r#""result":{}"#
        };
        let line = format!(r#"{{"jsonrpc":"2.0","id": {id} ,{body}}}"#);
        let parsed = parse_ok(&line);
        let frame = Frame::new(line.as_bytes(), &parsed);
        let m = &frame.messages()[0];
        assert_eq!(m.kind, kind, "{line}");
        assert_eq!(frame.id_raw(m), Some(id.as_bytes()), "{line}");
    }
}

#[test]
fn error_response_may_have_a_null_id() {
    let line = r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}"#;
    let parsed = parse_ok(line);
    let frame = Frame::new(line.as_bytes(), &parsed);
    assert_eq!(frame.messages()[0].kind, MessageKind::Error);
    assert_eq!(frame.id_raw(&frame.messages()[0]), Some(&b"null"[..]));
}

/// `(line, kind, method, tool)` for each message kind.
const KINDS: &[(&str, MessageKind, Option<&str>, Option<&str>)] = &[
    (
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}"#,
        MessageKind::Request,
        Some("initialize"),
        None,
    ),
    (
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        MessageKind::Notification,
        Some("notifications/initialized"),
        None,
    ),
    (
        r#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"hi"}]}}"#,
        MessageKind::Result,
        None,
        None,
    ),
    (
        r#"{"jsonrpc":"2.0","id":7,"result":null}"#,
        MessageKind::Result,
        None,
        None,
    ),
    (
        r#"{"jsonrpc":"2.0","id":7,"error":{"code":-32601,"message":"no"}}"#,
        MessageKind::Error,
        None,
        None,
    ),
    (
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"/tmp/x"}}}"#,
        MessageKind::Request,
        Some("tools/call"),
        Some("read_file"),
    ),
    (
        r#"{"method":"tools\/call","params":{"arguments":{},"name":"r\u0065ad"},"id":"a","jsonrpc":"2.0"}"#,
        MessageKind::Request,
        Some("tools/call"),
        Some("read"),
    ),
    (
        r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"t"}}"#,
        MessageKind::Notification,
        Some("tools/call"),
        Some("t"),
    ),
    (
        r#"{"jsonrpc":"2.0","id":3,"method":"Tools/Call","params":{"name":7}}"#,
        MessageKind::Request,
        Some("Tools/Call"),
        None,
    ),
    (
        r#"{"jsonrpc":"2.0","id":3,"method":"ping","extra":[1,{"x":true}]}"#,
        MessageKind::Request,
        Some("ping"),
        None,
    ),
    (
        " \t{ \"jsonrpc\" : \"2.0\" , \"method\" : \"a\" }\n ",
        MessageKind::Notification,
        Some("a"),
        None,
    ),
];

#[test]
fn message_kinds_method_and_tool() {
    for &(line, kind, method, tool) in KINDS {
        let parsed = parse_ok(line);
        let frame = Frame::new(line.as_bytes(), &parsed);
        assert!(!parsed.is_batch(), "{line}");
        let [m] = frame.messages() else {
            panic!("{line}: expected one message");
        };
        assert_eq!(m.kind, kind, "{line}");
        assert_eq!(frame.method(m), method, "{line}");
        assert_eq!(frame.tool(m), tool, "{line}");
        assert_eq!(&line[m.span.clone()], line.trim(), "{line}");
        assert_eq!(m.tokens, 0..parsed.tokens().len(), "{line}");
    }
}

#[test]
fn batch_has_one_message_per_element() {
    let line = r#"[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{"p":1}}}, {"jsonrpc":"2.0","method":"n"},{"jsonrpc":"2.0","id":"r","result":{"k":"v"}}]"#;
    let parsed = parse_ok(line);
    let frame = Frame::new(line.as_bytes(), &parsed);
    assert!(parsed.is_batch());
    let kinds: Vec<_> = frame.messages().iter().map(|m| m.kind).collect();
    assert_eq!(
        kinds,
        [
            MessageKind::Request,
            MessageKind::Notification,
            MessageKind::Result
        ]
    );
    let spans: Vec<_> = frame
        .messages()
        .iter()
        .map(|m| &line[m.span.clone()])
        .collect();
    assert_eq!(
        spans,
        [
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{"p":1}}}"#,
            r#"{"jsonrpc":"2.0","method":"n"}"#,
            r#"{"jsonrpc":"2.0","id":"r","result":{"k":"v"}}"#,
        ]
    );
    // Message token ranges tile the token list; depth counts from each message object.
    let ms = frame.messages();
    assert_eq!(ms[0].tokens.start, 0);
    assert_eq!(ms[0].tokens.end, ms[1].tokens.start);
    assert_eq!(ms[1].tokens.end, ms[2].tokens.start);
    assert_eq!(ms[2].tokens.end, parsed.tokens().len());
    assert_eq!(parsed.tokens()[0].depth, 1);
    assert_eq!(frame.tool(&ms[0]), Some("a"));
    let args: Vec<_> = frame.tokens()[ms[0].args.clone()]
        .iter()
        .map(|t| frame.text(t.text))
        .collect();
    assert_eq!(args, ["p", "1"]);
}

/// Describe a message's argument tokens as `(kind, text, text of its argument key)`.
fn describe_args(line: &str) -> Vec<(TokenKind, String, Option<String>)> {
    let parsed = parse_ok(line);
    let frame = Frame::new(line.as_bytes(), &parsed);
    let m = &frame.messages()[0];
    frame.tokens()[m.args.clone()]
        .iter()
        .map(|t| {
            let arg = (t.arg != Token::NO_ARG)
                .then(|| frame.text(frame.tokens()[t.arg as usize].text).to_owned());
            (t.kind, frame.text(t.text).to_owned(), arg)
        })
        .collect()
}

fn row(kind: TokenKind, text: &str, arg: Option<&str>) -> (TokenKind, String, Option<String>) {
    (kind, text.to_owned(), arg.map(str::to_owned))
}

#[test]
fn tools_call_args_are_the_arguments_object() {
    use TokenKind::*;
    let line = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"write","arguments":{"path":"/tmp/a","opts":{"mode":"w","path":"inner","list":[1,null,{"k":true}]},"n":-2.5e3},"_meta":{"progressToken":"p"}}}"#;
    assert_eq!(
        describe_args(line),
        [
            row(Key, "path", Some("path")),
            row(String, "/tmp/a", Some("path")),
            row(Key, "opts", Some("opts")),
            row(Key, "mode", Some("opts")),
            row(String, "w", Some("opts")),
            row(Key, "path", Some("opts")),
            row(String, "inner", Some("opts")),
            row(Key, "list", Some("opts")),
            row(Number, "1", Some("opts")),
            row(Null, "null", Some("opts")),
            row(Key, "k", Some("opts")),
            row(True, "true", Some("opts")),
            row(Key, "n", Some("n")),
            row(Number, "-2.5e3", Some("n")),
        ]
    );
    // Tokens outside the arguments belong to no argument.
    let parsed = parse_ok(line);
    let m = &parsed.messages()[0];
    for (i, t) in parsed.tokens().iter().enumerate() {
        assert_eq!(
            t.arg == Token::NO_ARG,
            !m.args.contains(&i),
            "token {i}: {t:?}"
        );
    }
    // Depth: message keys 1, params keys 2, argument keys 3.
    assert_eq!(parsed.tokens()[m.args.start].depth, 3);
    let arguments_key = &parsed.tokens()[m.args.start - 1];
    assert_eq!(arguments_key.kind, Key);
    assert_eq!(arguments_key.depth, 2);
}

#[test]
fn tools_call_without_arguments_has_no_args() {
    let line = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list"}}"#;
    assert_eq!(describe_args(line), []);
    let line =
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list","arguments":{}}}"#;
    assert_eq!(describe_args(line), []);
}

#[test]
fn other_methods_use_all_of_params() {
    use TokenKind::*;
    let line = r#"{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"file:///etc/passwd","name":"x","arguments":{"a":"b"}}}"#;
    assert_eq!(
        describe_args(line),
        [
            row(Key, "uri", Some("uri")),
            row(String, "file:///etc/passwd", Some("uri")),
            row(Key, "name", Some("name")),
            row(String, "x", Some("name")),
            row(Key, "arguments", Some("arguments")),
            row(Key, "a", Some("arguments")),
            row(String, "b", Some("arguments")),
        ]
    );
}

#[test]
fn positional_params_have_no_argument_keys() {
    use TokenKind::*;
    let line = r#"{"jsonrpc":"2.0","method":"log","params":["a",2,{"k":"v"},false]}"#;
    assert_eq!(
        describe_args(line),
        [
            row(String, "a", None),
            row(Number, "2", None),
            row(Key, "k", None),
            row(String, "v", None),
            row(False, "false", None),
        ]
    );
}

/// A response's arguments are its `result` (or `error`): what inbound rules judge when
/// the client answers a server request.
#[test]
fn a_responses_args_are_its_result() {
    let line = r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"text":"x"}]}}"#;
    let parsed = parse_ok(line);
    let m = &parsed.messages()[0];
    assert_eq!(m.tokens, 0..8);
    // "content", "text", "x": every token inside the result, under its top-level key.
    assert_eq!(m.args, 5..8);
    let tokens = parsed.tokens();
    assert!(tokens[5..8].iter().all(|t| t.arg == 5));
    assert!(tokens[..5].iter().all(|t| t.arg == Token::NO_ARG));
    let error = r#"{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"m"}}"#;
    let parsed = parse_ok(error);
    assert_eq!(parsed.messages()[0].args.len(), 4);
}

/// `(string as written in JSON, decoded text)`.
const DECODED: &[(&str, &str)] = &[
    (r#"a\/b"#, "a/b"),
    (r#"\u0041KIA"#, "AKIA"),
    (r#"\u00e9t\u00E9"#, "été"),
    (r#"\ud83d\ude00!"#, "\u{1f600}!"),
    (r#"\uD83D\uDE00"#, "\u{1f600}"),
    (r#"\"\\\b\f\n\r\t"#, "\"\\\u{8}\u{c}\n\r\t"),
    (r#"\u0000"#, "\0"),
    ("été \\n 日本", "été \n 日本"),
    (
        r#"-----BEGIN KEY-----\nabc\n-----END KEY-----"#,
        "-----BEGIN KEY-----\nabc\n-----END KEY-----",
    ),
];

#[test]
fn escapes_are_decoded() {
    for &(written, decoded) in DECODED {
        let line = format!(
            r#"{{"jsonrpc":"2.0","method":"m","params":{{"k":"{written}","{written}":1}}}}"#
        );
        let parsed = parse_ok(&line);
        let frame = Frame::new(line.as_bytes(), &parsed);
        let params = &frame.tokens()[frame.messages()[0].args.clone()];
        let strings: Vec<_> = params
            .iter()
            .filter(|t| matches!(t.kind, TokenKind::String | TokenKind::Key))
            .filter(|t| frame.text(t.text) != "k")
            .map(|t| {
                assert!(
                    matches!(t.text, TextRef::Decoded { .. }),
                    "{written}: {t:?}"
                );
                let raw = &line.as_bytes()[t.raw.0 as usize..t.raw.1 as usize];
                assert_eq!(raw, written.as_bytes());
                frame.text(t.text)
            })
            .collect();
        assert_eq!(strings, [decoded, decoded], "{written}");
    }
}

#[test]
fn plain_strings_are_raw_text() {
    let line = r#"{"jsonrpc":"2.0","method":"m","params":{"k":"été"}}"#;
    let parsed = parse_ok(line);
    let frame = Frame::new(line.as_bytes(), &parsed);
    let v = frame
        .tokens()
        .iter()
        .find(|t| frame.text(t.text) == "été")
        .unwrap();
    assert_eq!(v.kind, TokenKind::String);
    let (s, e) = (v.raw.0, v.raw.1);
    assert_eq!(v.text, TextRef::Raw { start: s, end: e });
    assert_eq!(&line[s as usize..e as usize], "été");
}

#[test]
fn numbers_keep_their_text() {
    for n in [
        "0",
        "-0",
        "1.5",
        "1e10",
        "1E-10",
        "-0.0e+0",
        "123456789012345678901234567890",
    ] {
        let line = format!(r#"{{"jsonrpc":"2.0","method":"m","params":[{n}]}}"#);
        let parsed = parse_ok(&line);
        let frame = Frame::new(line.as_bytes(), &parsed);
        let t = frame.tokens().last().unwrap();
        assert_eq!((t.kind, frame.text(t.text)), (TokenKind::Number, n));
    }
}

#[test]
fn frame_text_never_panics() {
    let line = r#"{"jsonrpc":"2.0","method":"m","params":{"k":"é\n"}}"#;
    let parsed = parse_ok(line);
    let frame = Frame::new(line.as_bytes(), &parsed);
    for t in [
        TextRef::Raw {
            start: 0,
            end: 9999,
        },
        TextRef::Raw { start: 9, end: 2 },
        TextRef::Raw { start: 45, end: 46 }, // inside "é"
        TextRef::Decoded {
            start: 0,
            end: 9999,
        },
        TextRef::Decoded { start: 1, end: 2 }, // inside "é"
        TextRef::Decoded {
            start: u32::MAX,
            end: u32::MAX,
        },
    ] {
        assert_eq!(frame.text(t), "", "{t:?}");
    }
}

#[test]
fn parsed_is_reused_between_frames() {
    let mut parsed = Parsed::new();
    let limits = Limits::default();
    parsed
        .parse(
            br#"[{"jsonrpc":"2.0","method":"a\u0062"},{"jsonrpc":"2.0","method":"c"}]"#,
            &limits,
        )
        .unwrap();
    assert_eq!(parsed.messages().len(), 2);
    assert!(parsed.parse(b"{", &limits).is_err());
    assert!(parsed.messages().is_empty());
    let line = br#"{"jsonrpc":"2.0","method":"d"}"#;
    parsed.parse(line, &limits).unwrap();
    assert!(!parsed.is_batch());
    let frame = Frame::new(line, &parsed);
    assert_eq!(frame.messages().len(), 1);
    assert_eq!(frame.method(&frame.messages()[0]), Some("d"));
}

// ---- redaction ----

use mcpwall::frame::redact;

/// `(string contents as written, decoded range, raw text the range must cover)`.
#[allow(clippy::reversed_empty_ranges)] // an inverted range is one of the cases
const RAW_RANGES: &[(&str, std::ops::Range<usize>, &str)] = &[
    ("abcdef", 1..3, "bc"),
    ("abcdef", 0..6, "abcdef"),
    ("été", 1..2, "é"),
    ("été", 2..3, "t"),
    ("日本", 1..4, "日本"),
    (r"a\u0041b", 1..2, r"\u0041"),
    (r"a\u0041b", 0..2, r"a\u0041"),
    (r"\ud83d\ude00x", 0..1, r"\ud83d\ude00"),
    (r"\ud83d\ude00x", 2..4, r"\ud83d\ude00"),
    (r"\ud83d\ude00x", 3..5, r"\ud83d\ude00x"),
    (r"\ud83d\ude00x", 4..5, "x"),
    (r"a\nb", 1..2, r"\n"),
    (r"a\nb", 1..3, r"\nb"),
    (r"a\/b", 0..3, r"a\/b"),
    (r"\u00e9\u00e9", 1..3, r"\u00e9\u00e9"),
    (r"x\u00e9", 1..2, r"\u00e9"),
    ("abc", 2..100, "c"),
    (r"a\tc", 2..100, "c"),
    ("abc", 5..9, ""),
    ("abc", 1..1, ""),
    (r"\tbc", 3..1, ""),
];

#[test]
fn raw_range_covers_whole_escapes_and_characters() {
    for (written, decoded, want) in RAW_RANGES {
        let line = format!(r#"{{"jsonrpc":"2.0","method":"m","params":["{written}"]}}"#);
        let parsed = parse_ok(&line);
        let frame = Frame::new(line.as_bytes(), &parsed);
        let tok = frame.tokens().last().unwrap();
        let raw = redact::raw_range(&frame, tok, decoded.clone());
        assert_eq!(
            &line[raw.clone()],
            *want,
            "{written} {decoded:?} -> {raw:?}"
        );
        assert!(raw.start >= tok.raw.0 as usize && raw.end <= tok.raw.1 as usize);
    }
}

#[test]
fn raw_range_keeps_empty_ranges_at_boundaries() {
    let line = r#"{"jsonrpc":"2.0","method":"m","params":["ab\u0043d"]}"#;
    let parsed = parse_ok(line);
    let frame = Frame::new(line.as_bytes(), &parsed);
    let tok = frame.tokens().last().unwrap();
    let s = tok.raw.0 as usize;
    assert_eq!(redact::raw_range(&frame, tok, 2..2), s + 2..s + 2);
    assert_eq!(redact::raw_range(&frame, tok, 3..3), s + 8..s + 8);
    assert_eq!(redact::raw_range(&frame, tok, 4..4), s + 9..s + 9);
}

type Edit = (std::ops::Range<usize>, &'static str);

/// `(raw, edits, output)`.
#[allow(clippy::reversed_empty_ranges)] // an inverted range is one of the cases
const APPLY: &[(&str, &[Edit], &str)] = &[
    (r#"{"a":"xSECRETy"}"#, &[(7..13, "[R]")], r#"{"a":"x[R]y"}"#),
    (r#"{"a":"xSECRETy"}"#, &[], r#"{"a":"xSECRETy"}"#),
    // Overlapping and adjacent edits merge; the first (lowest start) text wins.
    (
        r#"{"a":"0123456789"}"#,
        &[(8..10, "B"), (6..9, "A")],
        r#"{"a":"A456789"}"#,
    ),
    (
        r#"{"a":"0123456789"}"#,
        &[(6..8, "A"), (8..10, "B")],
        r#"{"a":"A456789"}"#,
    ),
    (
        r#"{"a":"0123456789"}"#,
        &[(6..7, "A"), (8..9, "B")],
        r#"{"a":"A1B3456789"}"#,
    ),
    // Same start: the longer range wins.
    (
        r#"{"a":"0123456789"}"#,
        &[(6..7, "short"), (6..9, "long")],
        r#"{"a":"long3456789"}"#,
    ),
    // Several tokens, given out of order.
    (
        r#"{"a":"k1","b":"k2"}"#,
        &[(15..17, "Y"), (6..8, "X")],
        r#"{"a":"X","b":"Y"}"#,
    ),
    // The replacement is escaped for a JSON string.
    (
        r#"{"a":"s"}"#,
        &[(6..7, "[REDACTED: \"aws\" \\ key]")],
        r#"{"a":"[REDACTED: \"aws\" \\ key]"}"#,
    ),
    (
        r#"{"a":"s"}"#,
        &[(6..7, "a\nb\tc\u{1}d\u{1f}é")],
        r#"{"a":"a\nb\tc\u0001d\u001fé"}"#,
    ),
    // Out-of-range and inverted edits are clamped, never a panic.
    (r#"["ab"]"#, &[(4..99, "Z")], r#"["abZ"#),
    (r#"["ab"]"#, &[(3..2, "Z")], r#"["aZb"]"#),
    (r#"["ab"]"#, &[(2..2, "Z")], r#"["Zab"]"#),
];

#[test]
fn apply_splices_escaped_replacements() {
    for (raw, edits, want) in APPLY {
        let mut edits = edits.to_vec();
        // Appends: what the buffer held before stays in front.
        let mut out = b"earlier line\n".to_vec();
        redact::apply(raw.as_bytes(), &mut edits, &mut out);
        let got = String::from_utf8_lossy(&out);
        assert_eq!(
            got.strip_prefix("earlier line\n"),
            Some(*want),
            "{raw} {edits:?}"
        );
    }
}

#[test]
fn redacting_an_escaped_secret_keeps_valid_json() {
    // A fake key written with escapes: the whole escaped text is replaced.
    let key = format!("{}{}", "\\u0041KIA", "ABCDEFGHIJ\\u004bLMNOP");
    let line = format!(r#"{{"jsonrpc":"2.0","id":1,"result":{{"text":"key={key}\n"}}}}"#);
    let parsed = parse_ok(&line);
    let frame = Frame::new(line.as_bytes(), &parsed);
    let tok = frame
        .tokens()
        .iter()
        .rfind(|t| t.kind == TokenKind::String)
        .unwrap();
    let text = frame.text(tok.text);
    let start = text.find("AKIA").unwrap();
    let raw = redact::raw_range(&frame, tok, start..start + 20);
    assert_eq!(&line[raw.clone()], key);
    let mut out = Vec::new();
    redact::apply(
        line.as_bytes(),
        &mut vec![(raw, "[REDACTED:aws]")],
        &mut out,
    );
    assert_eq!(
        String::from_utf8(out).unwrap(),
        r#"{"jsonrpc":"2.0","id":1,"result":{"text":"key=[REDACTED:aws]\n"}}"#
    );
}
