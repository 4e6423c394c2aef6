//! Replays every committed fuzz input under `tests/fuzz/regressions/<target>/` through
//! the same checks the fuzz targets run, so a fixed crash stays fixed on stable Rust.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;

use mcpwall::frame::checks;

fn replay(target: &str, check: fn(&[u8])) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fuzz/regressions")
        .join(target);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .collect();
    files.sort();
    assert!(
        !files.is_empty(),
        "no regression inputs in {}",
        dir.display()
    );
    let mut failed = Vec::new();
    for path in &files {
        let data = std::fs::read(path).unwrap();
        if let Err(panic) = catch_unwind(AssertUnwindSafe(|| check(&data))) {
            let message = panic
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| panic.downcast_ref::<&str>().copied())
                .unwrap_or("(no message)");
            failed.push(format!(
                "{}: {}\n  reproducer: {}",
                path.display(),
                message,
                checks::reproducer(&data)
            ));
        }
    }
    assert!(
        failed.is_empty(),
        "{} of {} inputs failed:\n{}",
        failed.len(),
        files.len(),
        failed.join("\n")
    );
}

#[test]
fn frame_scan_regressions() {
    replay("frame_scan", checks::check_scan);
}

#[test]
fn redact_regressions() {
    replay("redact", |data| {
        let (frame, picks, marker) = checks::redact_case(data);
        checks::check_redact(frame, &picks, marker);
    });
}

#[test]
fn session_regressions() {
    replay("session", mcpwall::session::checks::check_session);
}

/// The session's fuzz target, run on stable for a few seconds: its kept inputs (the
/// committed regressions, and `tests/fuzz/corpus/session/`: libFuzzer's corpus, minimised
/// with `cargo fuzz cmin` and committed) replayed, then random scripts and random
/// mutations of those inputs. Without coverage
/// guidance this finds less than libFuzzer does, but it runs on every CI run. A failure
/// prints the seed and the input; `MCPWALL_FUZZ_SECONDS` sets the time (default 5).
#[test]
fn session_scripts_keep_the_contract() {
    // The committed regressions and libFuzzer's minimised corpus seed the mutations (a
    // local `cargo fuzz run` grows the corpus here; `cargo fuzz cmin` before committing).
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let corpus: Vec<Vec<u8>> = [
        "tests/fuzz/regressions/session",
        "tests/fuzz/corpus/session",
    ]
    .iter()
    .filter_map(|dir| std::fs::read_dir(root.join(dir)).ok())
    .flat_map(|entries| entries.filter_map(|e| std::fs::read(e.ok()?.path()).ok()))
    .collect();
    assert!(!corpus.is_empty(), "no session inputs to start from");
    let seconds: u64 = std::env::var("MCPWALL_FUZZ_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    // The replay counts toward the time: the corpus grows the coverage, not CI's time.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(seconds);
    for input in &corpus {
        run_one(input, 0);
    }
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64)
        | 1;
    let mut rng = seed;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let mut runs = 0u64;
    while std::time::Instant::now() < deadline {
        let mut input = match corpus.len() {
            0 => Vec::new(),
            n => corpus[(next() % n as u64) as usize].clone(),
        };
        if input.is_empty() || next() % 4 == 0 {
            input = (0..(next() % 200)).map(|_| next() as u8).collect();
        } else {
            for _ in 0..1 + next() % 8 {
                let at = (next() % input.len() as u64) as usize;
                input[at] = next() as u8;
            }
        }
        run_one(&input, seed);
        runs += 1;
    }
    eprintln!(
        "{} kept inputs replayed, then {runs} random session scripts (seed {seed})",
        corpus.len()
    );
}

fn run_one(input: &[u8], seed: u64) {
    if let Err(panic) = catch_unwind(AssertUnwindSafe(|| {
        mcpwall::session::checks::check_session(input)
    })) {
        let message = panic.downcast_ref::<String>().cloned().unwrap_or_default();
        panic!("seed {seed}, input {input:?}:\n{message}");
    }
}
