//! Secret detector throughput: 1 MiB of ordinary text with no secrets, 1 MiB dense
//! with secret-like tokens, and the cost of 10 versus 100 detectors.
//!
//! Run with `cargo bench --bench secrets`; divan reports bytes per second.

#[path = "../support/secrets_corpus.rs"]
mod corpus;

use divan::{Bencher, counter::BytesCount};
use mcpwall::secrets::{Detector, DetectorSpec, Finding, builtin_specs};

const MIB: usize = 1 << 20;

fn main() {
    divan::main();
}

fn scan(bencher: Bencher, detector: &Detector, text: &str) {
    let mut cache = detector.cache();
    let mut out: Vec<Finding> = Vec::new();
    // Warm the lazy DFA so the first iteration is not an outlier.
    detector.find(text, &mut cache, &mut out);
    bencher
        .counter(BytesCount::new(text.len()))
        .bench_local(|| {
            out.clear();
            detector.find(divan::black_box(text), &mut cache, &mut out);
            out.len()
        });
}

/// Source code, prose, logs and JSON: keywords such as `token` and `://` occur, secrets do not.
#[divan::bench]
fn ordinary_1mib(bencher: Bencher) {
    let detector = Detector::new(builtin_specs()).unwrap();
    let text = corpus::ordinary_text(1, MIB);
    scan(bencher, &detector, &text);
}

/// A credential of a random format every ~200 bytes.
#[divan::bench]
fn dense_1mib(bencher: Bencher) {
    let detector = Detector::new(builtin_specs()).unwrap();
    let text = corpus::dense_text(2, MIB);
    scan(bencher, &detector, &text);
}

/// `n` detectors: the first built-ins in table order, then generated user patterns
/// (`acme017_[a-z0-9]{32}`) to reach `n`.
fn detectors(n: usize) -> Detector {
    let mut specs: Vec<DetectorSpec> = builtin_specs().into_iter().take(n).collect();
    let mut i = 0;
    while specs.len() < n {
        specs.push(DetectorSpec::new(
            format!("user-pattern-{i}"),
            format!("acme{i:03}_[a-z0-9]{{32}}"),
            "bench.yaml",
        ));
        i += 1;
    }
    Detector::new(specs).unwrap()
}

#[divan::bench(args = [10, 100])]
fn ordinary_1mib_detectors(bencher: Bencher, n: usize) {
    let detector = detectors(n);
    let text = corpus::ordinary_text(1, MIB);
    scan(bencher, &detector, &text);
}

#[divan::bench(args = [10, 100])]
fn dense_1mib_detectors(bencher: Bencher, n: usize) {
    let detector = detectors(n);
    let text = corpus::dense_text(2, MIB);
    scan(bencher, &detector, &text);
}
