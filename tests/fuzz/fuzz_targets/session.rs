//! Arbitrary interleavings of client and server lines, approvals, expiries and the
//! server's exit through one `Session` (see `mcpwall::session::checks::check_session`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcpwall::session::checks;

fuzz_target!(|data: &[u8]| checks::check_session(data));
