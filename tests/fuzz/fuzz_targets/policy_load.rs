//! Arbitrary bytes as a policy file through `load_str` and `compile`: never panics, and
//! every diagnostic points inside its source (see `mcpwall::config::checks`).
//! Run: `cargo fuzz run --fuzz-dir tests/fuzz policy_load -- -dict=tests/fuzz/yaml.dict`
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcpwall::config::checks;

fuzz_target!(|data: &[u8]| checks::check_load(data));
