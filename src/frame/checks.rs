//! Invariant checks shared by the fuzz targets (`tests/fuzz/`), the regression replay
//! (`tests/fuzz_regressions.rs`) and the property tests (`tests/redact_props.rs`).
//!
//! Each check panics with the input, what was found and what was expected, so a
//! failure in any of the three harnesses reads the same. Not part of the API.

use std::fmt::Write as _;
use std::ops::Range;

use super::{Frame, FrameError, Limits, Parsed, Token, TokenKind, redact};

/// The parser against serde_json on arbitrary bytes:
/// - it never panics;
/// - whatever serde_json refuses, the parser refuses (except numbers serde_json
///   cannot represent, like `1e400`);
/// - it refuses valid JSON with a syntax error only for a `\r` (serde_json takes it as
///   whitespace); serde_json keeps duplicate keys (last wins), we refuse them as Invalid;
/// - when both accept, the multiset of decoded keys and strings is the same, and every
///   message agrees with serde_json's view of it (see [`check_frame`]).
pub fn check_scan(data: &[u8]) {
    let mut parsed = Parsed::new();
    let ours = parsed.parse(data, &Limits::default());
    let theirs = serde_json::from_slice::<serde_json::Value>(data);
    let show = reproducer(data);
    match (&ours, &theirs) {
        (Ok(()), Ok(value)) => {
            let frame = Frame::new(data, &parsed);
            check_frame(&frame);
            let mut expected = Vec::new();
            collect_strings(value, &mut expected);
            let mut found: Vec<&str> = frame
                .tokens()
                .iter()
                .filter(|t| matches!(t.kind, TokenKind::Key | TokenKind::String))
                .map(|t| frame.text(t.text))
                .collect();
            expected.sort_unstable();
            found.sort_unstable();
            assert_eq!(
                found, expected,
                "decoded strings differ from serde_json's for {show}"
            );
        }
        (Ok(()), Err(e)) => {
            assert!(
                e.to_string().contains("number out of range"),
                "accepted {show}, which serde_json refuses: {e}"
            );
        }
        (Err(FrameError::Parse { at, reason }), Ok(_)) => {
            assert!(
                data.contains(&b'\r'),
                "refused valid JSON {show} at {at}: {reason}"
            );
        }
        (Err(FrameError::Parse { at, .. }), Err(_)) => {
            assert!(
                *at <= data.len(),
                "error offset {at} past the end of {show}"
            );
        }
        (Err(FrameError::Invalid { reason, id }), theirs) => {
            if let Err(e) = theirs {
                assert!(
                    *reason == "nesting deeper than the limit"
                        || e.to_string().contains("recursion limit")
                        || e.to_string().contains("number out of range"),
                    "Invalid({reason}) for {show}, which is not JSON: {e}"
                );
            }
            if let Some(id) = id {
                let text = data.get(id.clone()).unwrap_or_else(|| {
                    panic!("id range {id:?} outside {show}");
                });
                let id_value: serde_json::Value = serde_json::from_slice(text)
                    .unwrap_or_else(|e| panic!("id {id:?} of {show} is not JSON: {e}"));
                // A refused message keeps any number as its id (`2.0` too), so that the
                // request it meant to answer can be matched by value.
                assert!(
                    id_value.is_string() || id_value.is_number() || id_value.is_null(),
                    "id {id_value} of {show}"
                );
            }
        }
        (Err(FrameError::TooLarge { .. }), _) => {
            panic!("{} bytes are not over the default limit", data.len())
        }
    }
}

/// Newline-delimited input, one [`Parsed`] reused for every line (as a pump does):
/// each line gives exactly what a fresh parser gives, so no state leaks between
/// frames, and each line passes [`check_scan`].
pub fn check_lines(data: &[u8]) {
    let limits = Limits::default();
    let mut reused = Parsed::new();
    for line in data.split(|&b| b == b'\n') {
        let got = reused.parse(line, &limits);
        let mut fresh = Parsed::new();
        let want = fresh.parse(line, &limits);
        let show = reproducer(line);
        assert_eq!(got, want, "reused parser disagrees on {show}");
        assert_eq!(reused.is_batch(), fresh.is_batch(), "{show}");
        assert_eq!(reused.messages(), fresh.messages(), "{show}");
        assert_eq!(reused.tokens(), fresh.tokens(), "{show}");
        let (a, b) = (Frame::new(line, &reused), Frame::new(line, &fresh));
        for t in reused.tokens() {
            assert_eq!(a.text(t.text), b.text(t.text), "{show}");
        }
        check_scan(line);
    }
}

fn collect_strings<'v>(v: &'v serde_json::Value, out: &mut Vec<&'v str>) {
    match v {
        serde_json::Value::String(s) => out.push(s),
        serde_json::Value::Array(items) => items.iter().for_each(|i| collect_strings(i, out)),
        serde_json::Value::Object(map) => {
            for (k, v) in map {
                out.push(k);
                collect_strings(v, out);
            }
        }
        _ => {}
    }
}

/// Structural invariants of an accepted frame, and each message against serde_json.
pub fn check_frame(frame: &Frame<'_>) {
    let raw = frame.raw;
    let show = reproducer(raw);
    let tokens = frame.tokens();
    for (i, t) in tokens.iter().enumerate() {
        let (s, e) = (t.raw.0 as usize, t.raw.1 as usize);
        assert!(s <= e && e <= raw.len(), "token {i} {t:?} outside {show}");
        if matches!(t.kind, TokenKind::Key | TokenKind::String) {
            assert!(
                s >= 1 && raw[s - 1] == b'"' && raw.get(e) == Some(&b'"'),
                "token {i} {t:?} is not between quotes in {show}"
            );
            // The raw contents decode (as serde_json sees them) to the token's text.
            let mut quoted = Vec::with_capacity(e - s + 2);
            quoted.push(b'"');
            quoted.extend_from_slice(&raw[s..e]);
            quoted.push(b'"');
            let decoded: String = serde_json::from_slice(&quoted)
                .unwrap_or_else(|err| panic!("token {i} of {show} does not decode: {err}"));
            assert_eq!(decoded, frame.text(t.text), "token {i} of {show}");
        } else {
            assert_eq!(
                frame.text(t.text).as_bytes(),
                &raw[s..e],
                "token {i} of {show}"
            );
        }
    }
    let mut prev_span_end = 0;
    let mut prev_tokens_end = 0;
    for m in frame.messages() {
        assert!(
            prev_span_end <= m.span.start && m.span.end <= raw.len(),
            "{m:?} in {show}"
        );
        assert_eq!(m.tokens.start, prev_tokens_end, "{m:?} in {show}");
        assert!(
            m.args.start >= m.tokens.start && m.args.end <= m.tokens.end,
            "{m:?} args outside its tokens in {show}"
        );
        prev_span_end = m.span.end;
        prev_tokens_end = m.tokens.end;
        for i in m.tokens.clone() {
            let t = &tokens[i];
            if t.arg == Token::NO_ARG {
                continue;
            }
            let arg = t.arg as usize;
            assert!(
                m.args.contains(&i) && m.args.contains(&arg) && arg <= i,
                "token {i} {t:?} points at argument {arg} outside {:?} in {show}",
                m.args
            );
            assert_eq!(tokens[arg].kind, TokenKind::Key, "{show}");
            assert_eq!(tokens[arg].arg as usize, arg, "{show}");
        }
        let value: serde_json::Value = serde_json::from_slice(&raw[m.span.clone()])
            .unwrap_or_else(|e| panic!("message {:?} of {show}: {e}", m.span));
        assert_eq!(value["jsonrpc"], "2.0", "{show}");
        assert_eq!(
            frame.method(m),
            value.get("method").and_then(|v| v.as_str()),
            "{show}"
        );
        if frame.method(m) == Some("tools/call") {
            assert_eq!(frame.tool(m), value["params"]["name"].as_str(), "{show}");
        } else {
            assert_eq!(frame.tool(m), None, "{show}");
        }
        match frame.id_raw(m) {
            Some(id) => {
                let id: serde_json::Value = serde_json::from_slice(id).unwrap();
                assert_eq!(Some(&id), value.get("id"), "{show}");
            }
            None => assert!(value.get("id").is_none(), "{show}"),
        }
    }
    assert_eq!(prev_tokens_end, tokens.len(), "{show}");
}

/// One edit of a redaction check: a string value token (an index among the frame's
/// `String` tokens, wrapped around) and a range of its decoded text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pick {
    /// Which string value: an index among the picked frame's candidate tokens, modulo
    /// their number.
    pub token: usize,
    /// Start of the decoded range (may be past the end: clamped).
    pub start: usize,
    /// End of the decoded range.
    pub end: usize,
}

/// Decode a redaction fuzz input: the frame, then a `0xFF` byte (never part of UTF-8
/// JSON), then 3 bytes per pick (token, start, length). The first pick byte also
/// chooses the marker. Regression files under `tests/fuzz/regressions/redact/` use this
/// format.
pub fn redact_case(data: &[u8]) -> (&[u8], Vec<Pick>, &'static str) {
    const MARKERS: [&str; 4] = [
        "[REDACTED:aws-access-key]",
        "[REDACTED: \"quoted\" \\ back]",
        "",
        "line\nbreak\t\u{1}é😀",
    ];
    let Some(split) = data.iter().rposition(|&b| b == 0xFF) else {
        return (data, Vec::new(), MARKERS[0]);
    };
    let (frame, rest) = (&data[..split], &data[split + 1..]);
    let picks = rest
        .chunks_exact(3)
        .map(|c| Pick {
            token: usize::from(c[0]),
            start: usize::from(c[1]),
            end: usize::from(c[1]) + usize::from(c[2] % 64),
        })
        .collect();
    let marker = MARKERS[rest.first().map_or(0, |b| usize::from(*b) % MARKERS.len())];
    (frame, picks, marker)
}

/// Redaction properties for one frame and a set of picks, all replaced by `marker`:
/// - every raw range lies inside its token and decodes, alone, to the picked decoded
///   range widened to whole characters (no escape is split);
/// - P1: the output is JSON (serde_json) and strict JSON-RPC again (our parser);
/// - P3: the output is exactly the input with the merged raw ranges replaced by the
///   escaped marker: every other byte is unchanged;
/// - P6: the output has the same tokens (kinds, depths, messages) and the same decoded
///   text, except that each picked string reads as its original with the picked
///   ranges replaced by the marker.
///
/// Frames the parser refuses, and frames without string values below the message's
/// own fields, are skipped.
pub fn check_redact(data: &[u8], picks: &[Pick], marker: &str) {
    let mut parsed = Parsed::new();
    if parsed.parse(data, &Limits::default()).is_err() {
        return;
    }
    let frame = Frame::new(data, &parsed);
    // String values inside params, result or error: `jsonrpc`, `method` and ids are the
    // message's own fields, which a marker would make invalid JSON-RPC.
    let strings: Vec<usize> = (0..frame.tokens().len())
        .filter(|&i| frame.tokens()[i].kind == TokenKind::String && frame.tokens()[i].depth >= 2)
        .collect();
    if strings.is_empty() {
        return;
    }
    let show = reproducer(data);
    // (token index, raw range, widened decoded range)
    let mut planned: Vec<(usize, Range<usize>, Range<usize>)> = Vec::new();
    for p in picks {
        let ti = strings[p.token % strings.len()];
        let tok = &frame.tokens()[ti];
        let text = frame.text(tok.text);
        let raw = redact::raw_range(&frame, tok, p.start..p.end);
        let widened = widen(text, p.start..p.end);
        assert!(
            tok.raw.0 as usize <= raw.start && raw.end <= tok.raw.1 as usize,
            "raw range {raw:?} for {p:?} leaves token {tok:?} in {show}"
        );
        let mut quoted = vec![b'"'];
        quoted.extend_from_slice(&data[raw.clone()]);
        quoted.push(b'"');
        let alone: String = serde_json::from_slice(&quoted).unwrap_or_else(|e| {
            panic!(
                "raw range {raw:?} for {p:?} splits an escape in {show}: {:?}: {e}",
                String::from_utf8_lossy(&data[raw.clone()])
            )
        });
        assert_eq!(
            alone,
            &text[widened.clone()],
            "raw range {raw:?} for {p:?} in {show}"
        );
        planned.push((ti, raw, widened));
    }
    let mut edits: Vec<(Range<usize>, &str)> = planned
        .iter()
        .map(|(_, raw, _)| (raw.clone(), marker))
        .collect();
    let mut out = Vec::new();
    redact::apply(data, &mut edits, &mut out);
    let out_show = reproducer(&out);
    let context =
        || format!("input {show}\npicks {picks:?}\nplanned {planned:?}\noutput {out_show}");

    // P3, exactly: input with merged ranges replaced by the escaped marker.
    let mut escaped_marker = Vec::new();
    redact::apply(b"", &mut vec![(0..0, marker)], &mut escaped_marker);
    let raw_ranges = merge(planned.iter().map(|(_, r, _)| r.clone()).collect());
    let mut expected = Vec::new();
    let mut copied = 0;
    for r in &raw_ranges {
        expected.extend_from_slice(&data[copied..r.start]);
        expected.extend_from_slice(&escaped_marker);
        copied = r.end;
    }
    expected.extend_from_slice(&data[copied..]);
    assert!(
        out == expected,
        "P3: bytes outside the edits changed\n{}",
        context()
    );

    // P1
    // IgnoredAny checks the syntax without converting numbers (`1e400` is JSON).
    if let Err(e) = serde_json::from_slice::<serde::de::IgnoredAny>(&out) {
        panic!("P1: output is not JSON: {e}\n{}", context());
    }
    let mut reparsed = Parsed::new();
    if let Err(e) = reparsed.parse(&out, &Limits::default()) {
        panic!(
            "P1: output refused by the strict parser: {e}\n{}",
            context()
        );
    }

    // P6
    let after = Frame::new(&out, &reparsed);
    assert_eq!(
        after.tokens().len(),
        frame.tokens().len(),
        "P6\n{}",
        context()
    );
    assert_eq!(
        after.messages().len(),
        frame.messages().len(),
        "P6\n{}",
        context()
    );
    for (a, b) in frame.messages().iter().zip(after.messages()) {
        assert_eq!(
            (a.kind, &a.tokens, &a.args),
            (b.kind, &b.tokens, &b.args),
            "P6\n{}",
            context()
        );
    }
    for (i, (before, now)) in frame.tokens().iter().zip(after.tokens()).enumerate() {
        assert_eq!(
            (before.kind, before.depth, before.arg),
            (now.kind, now.depth, now.arg),
            "P6: token {i}\n{}",
            context()
        );
        let original = frame.text(before.text);
        let ranges = merge(
            planned
                .iter()
                .filter(|(ti, _, _)| *ti == i)
                .map(|(_, _, w)| w.clone())
                .collect(),
        );
        let mut want = String::new();
        let mut copied = 0;
        for r in &ranges {
            want.push_str(&original[copied..r.start]);
            want.push_str(marker);
            copied = r.end;
        }
        want.push_str(&original[copied..]);
        assert_eq!(after.text(now.text), want, "P6: token {i}\n{}", context());
    }
}

/// The decoded range `raw_range` promises to cover: clamped, and widened to whole
/// characters.
fn widen(text: &str, r: Range<usize>) -> Range<usize> {
    let mut start = r.start.min(text.len());
    let mut end = r.end.max(r.start).min(text.len());
    while !text.is_char_boundary(start) {
        start -= 1;
    }
    while !text.is_char_boundary(end) {
        end += 1;
    }
    start..end
}

/// Sort and merge overlapping or adjacent ranges, as `redact::apply` does.
fn merge(mut ranges: Vec<Range<usize>>) -> Vec<Range<usize>> {
    ranges.sort_by_key(|r| (r.start, std::cmp::Reverse(r.end)));
    let mut merged: Vec<Range<usize>> = Vec::new();
    for r in ranges {
        match merged.last_mut() {
            Some(last) if r.start <= last.end => last.end = last.end.max(r.end),
            _ => merged.push(r),
        }
    }
    merged
}

/// A paste-ready Rust expression for a byte input, for failure messages and fuzz
/// `Debug` output.
pub fn reproducer(data: &[u8]) -> String {
    let mut s = String::from("b\"");
    for &b in data {
        match b {
            b'"' => s.push_str("\\\""),
            b'\\' => s.push_str("\\\\"),
            0x20..=0x7e => s.push(char::from(b)),
            _ => {
                let _ = write!(s, "\\x{b:02x}");
            }
        }
    }
    s.push('"');
    s
}
