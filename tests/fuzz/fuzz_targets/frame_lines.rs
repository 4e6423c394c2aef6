//! Newline-delimited bytes through one reused parser, as a pump feeds it: every line
//! parses exactly as with a fresh parser (see `mcpwall::frame::checks::check_lines`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcpwall::frame::checks;

fuzz_target!(|data: &[u8]| checks::check_lines(data));
