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
