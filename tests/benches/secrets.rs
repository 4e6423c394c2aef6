//! Secret detector throughput: 1 MiB of ordinary text with no secrets, 1 MiB dense
//! with secret-like tokens, 1 MiB of each adversarial text (a keyword repeated, near-miss
//! prefixes, key headers without a footer, base64, dense `key=value`; see
//! `corpus::ADVERSARIAL`), and the cost of 10 versus 100 detectors.
//!
//! Run with `cargo bench --bench secrets`; divan reports bytes per second. Before the
//! benches run, the peak heap of building the built-in table (and of a first scan) is
//! printed, measured by a counting allocator.

#[path = "../support/secrets_corpus.rs"]
mod corpus;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use divan::{Bencher, counter::BytesCount};
use mcpwall::secrets::{Detector, DetectorSpec, Finding, Machinery, builtin_specs};

const MIB: usize = 1 << 20;

/// The system allocator, keeping the current and the peak number of live heap bytes.
struct PeakAlloc;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for PeakAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded unchanged to the system allocator.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let live = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(live, Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded unchanged to the system allocator.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            if new_size >= layout.size() {
                let grow = new_size - layout.size();
                let live = LIVE.fetch_add(grow, Ordering::Relaxed) + grow;
                PEAK.fetch_max(live, Ordering::Relaxed);
            } else {
                LIVE.fetch_sub(layout.size() - new_size, Ordering::Relaxed);
            }
        }
        p
    }
}

#[global_allocator]
static ALLOC: PeakAlloc = PeakAlloc;

/// Peak heap growth (above what was live before) while `f` runs, and what `f` returned.
fn peak_heap<T>(f: impl FnOnce() -> T) -> (usize, T) {
    let before = LIVE.load(Ordering::Relaxed);
    PEAK.store(before, Ordering::Relaxed);
    let out = f();
    (PEAK.load(Ordering::Relaxed) - before, out)
}

fn main() {
    let (build_peak, detector) = peak_heap(|| Detector::new(builtin_specs()).unwrap());
    let text = corpus::dense_text(3, 16 * 1024);
    let (scan_peak, _) = peak_heap(|| {
        let mut cache = detector.cache();
        let mut out = Vec::new();
        detector.find(&text, &mut cache, &mut out);
        out.len()
    });
    let (full_peak, _) = peak_heap(|| {
        let detector = Detector::new(builtin_specs()).unwrap();
        let mut cache = detector.cache();
        let mut out = Vec::new();
        detector.find(&corpus::dense_text(4, MIB), &mut cache, &mut out);
        out.len()
    });
    println!(
        "peak heap: build built-ins {} KiB; first scan of 16 KiB dense text {} KiB; build + scan of 1 MiB dense text {} KiB",
        build_peak >> 10,
        scan_peak >> 10,
        full_peak >> 10
    );
    drop(detector);
    divan::main();
}

/// Start-up: building the built-in table.
#[divan::bench]
fn build_builtin(bencher: Bencher) {
    bencher.bench_local(|| Detector::new(builtin_specs()).unwrap());
}

/// Start-up plus the first scan of a 16 KiB text dense with secrets (every detector a
/// first-time hit pays for is paid here).
#[divan::bench]
fn build_and_first_scan_16kib(bencher: Bencher) {
    let text = corpus::dense_text(3, 16 * 1024);
    bencher.bench_local(|| {
        let detector = Detector::new(builtin_specs()).unwrap();
        let mut cache = detector.cache();
        let mut out = Vec::new();
        detector.find(divan::black_box(&text), &mut cache, &mut out);
        out.len()
    });
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

/// An adversarial text (`corpus::ADVERSARIAL`): target at least 100 MB/s, and at least a
/// tenth of `ordinary_1mib`.
#[divan::bench(args = corpus::ADVERSARIAL)]
fn adversarial_1mib(bencher: Bencher, kind: &str) {
    let detector = Detector::new(builtin_specs()).unwrap();
    let text = corpus::adversarial_text(kind, 6, MIB);
    scan(bencher, &detector, &text);
}

/// A text whose every line holds a secret in an adversarial shape
/// (`corpus::FINDINGS_ON_EVERY_LINE`, a secret every 48 bytes): what a finding costs,
/// compared per finding with `dense_1mib` (a secret every ~200 bytes).
#[divan::bench(args = corpus::FINDINGS_ON_EVERY_LINE)]
fn findings_on_every_line_1mib(bencher: Bencher, kind: &str) {
    let detector = Detector::new(builtin_specs()).unwrap();
    let text = corpus::adversarial_text(kind, 6, MIB);
    scan(bencher, &detector, &text);
}

/// The adversarial texts again, every keyword hit searched (`Machinery::no_hit_memos`):
/// what the hit memos are worth, against `adversarial_1mib` in the same run.
#[divan::bench(args = corpus::ADVERSARIAL)]
fn adversarial_1mib_no_hit_memos(bencher: Bencher, kind: &str) {
    let text = corpus::adversarial_text(kind, 6, MIB);
    scan(bencher, &with_machinery("no-hit-memos"), &text);
}

/// Issue #20's rule: each hand-made mechanism against its plain form, in one run (see
/// docs/performance.md for the table and what was kept).
const MACHINERY: &[&str] = &[
    "as-built",
    "portable-prefilter",
    "f64-entropy",
    "no-hit-memos",
    "portable-run-finder",
];

fn with_machinery(variant: &str) -> Detector {
    let machinery = match variant {
        "as-built" => Machinery::default(),
        "portable-prefilter" => Machinery {
            portable_prefilter: true,
            ..Machinery::default()
        },
        "portable-run-finder" => Machinery {
            portable_run_finder: true,
            ..Machinery::default()
        },
        "f64-entropy" => Machinery {
            float_entropy: true,
            ..Machinery::default()
        },
        "no-hit-memos" => Machinery {
            no_hit_memos: true,
            ..Machinery::default()
        },
        other => panic!("no variant {other}"),
    };
    Detector::with_machinery(builtin_specs(), machinery).unwrap()
}

#[divan::bench(args = MACHINERY)]
fn machinery_ordinary_1mib(bencher: Bencher, variant: &str) {
    let text = corpus::ordinary_text(1, MIB);
    scan(bencher, &with_machinery(variant), &text);
}

#[divan::bench(args = MACHINERY)]
fn machinery_dense_1mib(bencher: Bencher, variant: &str) {
    let text = corpus::dense_text(2, MIB);
    scan(bencher, &with_machinery(variant), &text);
}

#[divan::bench(args = MACHINERY)]
fn machinery_dense_key_value_1mib(bencher: Bencher, variant: &str) {
    let text = corpus::adversarial_text("dense-key-value", 6, MIB);
    scan(bencher, &with_machinery(variant), &text);
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

/// The same 1 MiB text and the same findings for 10 and 100 detectors: the text holds
/// only credentials of the first 10 built-ins (and ordinary text), so the extra 90
/// detectors add keywords and automaton size but no findings.
#[divan::bench(args = [10, 100])]
fn same_findings_1mib_detectors(bencher: Bencher, n: usize) {
    let detector = detectors(n);
    let first_ten: Vec<String> = builtin_specs()
        .into_iter()
        .take(10)
        .map(|s| s.name)
        .collect();
    let first_ten: Vec<&str> = first_ten.iter().map(String::as_str).collect();
    let text = corpus::dense_text_of(5, MIB, &first_ten);
    scan(bencher, &detector, &text);
}
