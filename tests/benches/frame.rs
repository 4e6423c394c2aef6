//! Parse and redaction throughput, with allocations per call (divan::AllocProfiler).
//!
//! `cargo bench --bench frame`. A warm `Parsed` is reused as a pump does, so the
//! allocation counts show the steady state (expected: none).

use divan::counter::BytesCount;
use divan::{Bencher, black_box};
use mcpwall::frame::{Frame, Limits, Parsed, TokenKind, redact};

#[global_allocator]
static ALLOC: divan::AllocProfiler = divan::AllocProfiler::system();

fn main() {
    divan::main();
}

/// A typical tools/call request of about 200 bytes.
fn tools_call() -> Vec<u8> {
    let line = br#"{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"/home/user/project/src/main.rs","encoding":"utf-8","max_bytes":65536},"_meta":{"progressToken":7}}}"#;
    line.to_vec()
}

/// A 64 KiB `read_file`-style result: one long text with `\n` and `\"` escapes.
fn text_response() -> Vec<u8> {
    let mut text = String::new();
    let mut i = 0;
    while text.len() < 64 * 1024 - 128 {
        text.push_str(&format!(
            "    let value_{i} = config.get(\\\"key_{i}\\\").unwrap_or(é);\\n"
        ));
        i += 1;
    }
    format!(r#"{{"jsonrpc":"2.0","id":42,"result":{{"content":[{{"type":"text","text":"{text}"}}],"isError":false}}}}"#)
        .into_bytes()
}

/// A 64 KiB structured result: many small objects, keys and scalars.
fn structured_response() -> Vec<u8> {
    let mut items = Vec::new();
    let mut len = 0;
    let mut i = 0;
    while len < 64 * 1024 - 128 {
        let item = format!(
            r#"{{"name":"file_{i}.rs","size":{},"dir":false,"mtime":"2026-11-29T22:00:00Z"}}"#,
            i * 37
        );
        len += item.len() + 1;
        items.push(item);
        i += 1;
    }
    format!(
        r#"{{"jsonrpc":"2.0","id":"list-1","result":{{"entries":[{}]}}}}"#,
        items.join(",")
    )
    .into_bytes()
}

fn bench_parse(bencher: Bencher, line: Vec<u8>) {
    let limits = Limits::default();
    let mut parsed = Parsed::new();
    parsed.parse(&line, &limits).unwrap();
    bencher
        .counter(BytesCount::new(line.len()))
        .bench_local(|| parsed.parse(black_box(&line), &limits).unwrap());
}

#[divan::bench]
fn parse_tools_call_200b(bencher: Bencher) {
    bench_parse(bencher, tools_call());
}

#[divan::bench]
fn parse_text_response_64k(bencher: Bencher) {
    bench_parse(bencher, text_response());
}

#[divan::bench]
fn parse_structured_response_64k(bencher: Bencher) {
    bench_parse(bencher, structured_response());
}

/// Map three decoded ranges of the long text back to raw bytes and splice markers.
#[divan::bench]
fn redact_text_response_64k(bencher: Bencher) {
    let line = text_response();
    let mut parsed = Parsed::new();
    parsed.parse(&line, &Limits::default()).unwrap();
    let frame = Frame::new(&line, &parsed);
    let tok = *frame
        .tokens()
        .iter()
        .max_by_key(|t| (t.kind == TokenKind::String, t.raw.1 - t.raw.0))
        .unwrap();
    let mut out = Vec::with_capacity(line.len() * 2);
    let mut edits = Vec::with_capacity(3);
    bencher
        .counter(BytesCount::new(line.len()))
        .bench_local(|| {
            edits.clear();
            for start in [100, 30_000, 60_000] {
                let raw = redact::raw_range(&frame, &tok, start..start + 20);
                edits.push((raw, "[REDACTED:aws-access-key]"));
            }
            out.clear();
            redact::apply(black_box(&line), &mut edits, &mut out);
        });
}
