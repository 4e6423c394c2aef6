//! A warm parser does not allocate (STYLE.md rule 4): parsing reuses `Parsed`'s
//! buffers, and redaction reuses the caller's output buffer.
//!
//! Counts allocations of the current thread only, so tests running in parallel
//! threads do not disturb each other.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use mcpwall::frame::{Frame, Limits, Parsed, TokenKind, redact};

struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: forwards every call to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.with(|n| n.set(n.get() + 1));
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.with(|n| n.set(n.get() + 1));
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations_during(f: impl FnOnce()) -> usize {
    let before = ALLOCATIONS.with(Cell::get);
    f();
    ALLOCATIONS.with(Cell::get) - before
}

fn frames() -> Vec<Vec<u8>> {
    let many_keys: String = (0..200)
        .map(|i| format!("\"k{i}\":\"v\\u00e9{i}\""))
        .collect::<Vec<_>>()
        .join(",");
    vec![
        br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"/tmp/\u0061","n":[1,2,{"deep":true}]}}}"#.to_vec(),
        br#"[{"jsonrpc":"2.0","id":"a","result":{"text":"x\ny\ud83d\ude00"}},{"jsonrpc":"2.0","method":"notifications/progress","params":{"p":0.5}}]"#.to_vec(),
        format!(r#"{{"jsonrpc":"2.0","id":2,"method":"x","params":{{{many_keys}}}}}"#).into_bytes(),
        // Refused frames must not allocate either (duplicate keys, bad JSON).
        br#"{"jsonrpc":"2.0","id":3,"method":"x","params":{"a":1,"\u0061":2}}"#.to_vec(),
        br#"{"jsonrpc":"2.0","id":3,"method":"x","params":{"a":"\ud800"}}"#.to_vec(),
    ]
}

#[test]
fn warm_parse_does_not_allocate() {
    let frames = frames();
    let limits = Limits::default();
    let mut parsed = Parsed::new();
    for line in &frames {
        let _ = parsed.parse(line, &limits);
    }
    for line in &frames {
        let n = allocations_during(|| {
            let _ = parsed.parse(line, &limits);
        });
        assert_eq!(
            n,
            0,
            "{} allocations parsing {}",
            n,
            String::from_utf8_lossy(line)
        );
    }
}

#[test]
fn cold_parse_does_allocate() {
    // The counter works: a fresh parser has to grow its buffers.
    let line = &frames()[0];
    let mut parsed = Parsed::new();
    let n = allocations_during(|| parsed.parse(line, &Limits::default()).unwrap());
    assert!(n > 0);
}

#[test]
fn redaction_into_a_warm_buffer_does_not_allocate() {
    let line = br#"{"jsonrpc":"2.0","id":1,"result":{"text":"key=\u0041KIAQWERTYUIOPASDFGH\n"}}"#;
    let mut parsed = Parsed::new();
    parsed.parse(line, &Limits::default()).unwrap();
    let frame = Frame::new(line, &parsed);
    let tok = *frame
        .tokens()
        .iter()
        .rfind(|t| t.kind == TokenKind::String)
        .unwrap();
    let mut out = Vec::with_capacity(4096);
    let mut edits = Vec::with_capacity(4);
    let n = allocations_during(|| {
        let raw = redact::raw_range(&frame, &tok, 4..24);
        edits.push((raw, "[REDACTED:aws-access-key]"));
        redact::apply(line, &mut edits, &mut out);
    });
    assert_eq!(n, 0);
    assert_eq!(
        String::from_utf8_lossy(&out),
        r#"{"jsonrpc":"2.0","id":1,"result":{"text":"key=[REDACTED:aws-access-key]\n"}}"#
    );
}
