//! Redaction properties P1-P3 and P6 (see `mcpwall::frame::checks::check_redact`).
//!
//! Input format (`checks::redact_case`): the frame, a `0xFF` byte, then 3 bytes per
//! edit (string token, start, length). On failure the check panics with the frame, the
//! picks, the planned ranges and the output; `checks::reproducer` prints the input
//! as a Rust byte string for a regression file.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcpwall::frame::checks;

fuzz_target!(|data: &[u8]| {
    let (frame, picks, marker) = checks::redact_case(data);
    checks::check_redact(frame, &picks, marker);
});
