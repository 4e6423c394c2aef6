//! The session without I/O ([`mcpwall::session::Session`]): what the proxy does per
//! line, with the built-in rules, and allocations per line (divan's AllocProfiler), so
//! regressions show up in review.
//!
//! `cargo bench --bench proxy`

use std::sync::Arc;

use divan::counter::BytesCount;
use divan::{Bencher, black_box};
use mcpwall::config::{LoadOptions, load_str};
use mcpwall::program::Program;
use mcpwall::session::{Line, Options, Outbox, Peer, Session};

#[global_allocator]
static ALLOC: divan::AllocProfiler = divan::AllocProfiler::system();

fn main() {
    divan::main();
}

/// The built-in rules plus a secrets redaction rule, as a user's config would have.
fn program() -> Arc<Program> {
    let opts = LoadOptions {
        explicit: None,
        home: "/home/bench".into(),
        project_dir: "/home/bench/project".into(),
    };
    let text = "version: 1\nextends: [default]\noutbound_rules:\n  - name: redact\n    match: {secrets: true}\n    action: redact\n";
    let policy = load_str("bench.yml", text, &opts).expect("bench policy loads");
    Arc::new(Program::compile(&policy).expect("bench policy compiles"))
}

/// A session and its outbox, fed one line at a time.
struct Path {
    session: Session,
    out: Outbox,
}

impl Path {
    fn client_line(&mut self, raw: &[u8]) {
        self.session.from_client(Line::Frame(raw), &mut self.out);
    }

    /// A server response to request 7, a `read_file` call (filed first, as the
    /// client's side of the proxy would have).
    fn server_line(&mut self, raw: &[u8]) {
        self.session
            .expect_answer(Peer::Server, b"7", "tools/call", Some("read_file"));
        self.session
            .from_server(Line::Frame(raw), &mut self.out, false);
    }

    fn clear(&mut self) {
        self.out.to_client.clear();
        self.out.to_server.clear();
    }
}

fn path() -> Path {
    Path {
        session: Session::new(program(), Options::quiet("bench")),
        out: Outbox::default(),
    }
}

const ALLOWED: &[u8] = br#"{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"/home/bench/project/src/main.rs","encoding":"utf-8","max_bytes":65536}}}"#;
const DENIED: &[u8] = br#"{"jsonrpc":"2.0","id":43,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"/home/bench/.ssh/id_rsa"}}}"#;

fn response(bytes: usize, secret: bool) -> Vec<u8> {
    let mut text = String::new();
    let mut i = 0;
    while text.len() < bytes {
        text.push_str(&format!("    let v{i} = cfg.get(\\\"k{i}\\\");\\n"));
        if secret && i % 1000 == 0 {
            text.push_str(&format!("AKIA{}\\n", "QZ7XW3NV5TR2KPLM"));
        }
        i += 1;
    }
    format!(
        r#"{{"jsonrpc":"2.0","id":7,"result":{{"content":[{{"type":"text","text":"{text}"}}]}}}}"#
    )
    .into_bytes()
}

#[divan::bench]
fn inbound_allowed_call(b: Bencher) {
    let mut p = path();
    b.counter(BytesCount::new(ALLOWED.len())).bench_local(|| {
        p.client_line(black_box(ALLOWED));
        p.clear();
    });
}

#[divan::bench]
fn inbound_denied_call(b: Bencher) {
    let mut p = path();
    b.counter(BytesCount::new(DENIED.len())).bench_local(|| {
        p.client_line(black_box(DENIED));
        p.clear();
    });
}

#[divan::bench(args = [1024, 64 * 1024])]
fn outbound_clean_response(b: Bencher, bytes: usize) {
    let mut p = path();
    let line = response(bytes, false);
    b.counter(BytesCount::new(line.len())).bench_local(|| {
        p.server_line(black_box(&line));
        p.clear();
    });
}

#[divan::bench(args = [64 * 1024, 1024 * 1024])]
fn outbound_response_with_secrets(b: Bencher, bytes: usize) {
    let mut p = path();
    let line = response(bytes, true);
    b.counter(BytesCount::new(line.len())).bench_local(|| {
        p.server_line(black_box(&line));
        p.clear();
    });
}
