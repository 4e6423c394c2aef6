//! Arbitrary bytes through the strict parser: never panics, and agrees with
//! serde_json (see `mcpwall::frame::checks::check_scan`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcpwall::frame::checks;

fuzz_target!(|data: &[u8]| checks::check_scan(data));
