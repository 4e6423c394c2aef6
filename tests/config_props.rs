//! Property tests for policy loading: the `policy_load` fuzz target's invariants
//! (`mcpwall::config::checks`), run as proptest so they run in every `cargo test`, and the
//! replay of the fuzz target's committed regressions:
//! - arbitrary YAML-ish text through `load_str` never panics;
//! - every diagnostic's labels lie inside its source and on character boundaries, and the
//!   reported line and column agree with the label's offset;
//! - every diagnostic renders with miette without panicking;
//! - a policy that loads has every span inside its source, and compiling it never panics;
//!   a compile error's labels lie inside their sources too.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;

use mcpwall::config::checks;
use proptest::prelude::*;

/// Pieces of the policy language and of YAML syntax, glued into plausible and broken files.
const PIECES: &[&str] = &[
    "version: 1",
    "version: 2",
    "extends: [default]",
    "extends: [nope]",
    "settings:",
    "  log_dir: ~/logs",
    "  log_dir: ${NOPE}/x",
    "  default_action: deny",
    "  rate_limit: {max_calls: 0, window_seconds: 1}",
    "  max_frame_bytes: -5",
    "rules:",
    "outbound_rules:",
    "secrets:",
    "  patterns:",
    "    - {name: t, regex: 'x[', entropy_threshold: 9}",
    "  disable: [slack-token, nope]",
    "  - name: a",
    "  - name: \"a b\"",
    "  - name: é-ü",
    "    match:",
    "    match: {}",
    "    match: {tool: \"read_*\"}",
    "    match: {tool: \"[\"}",
    "      arguments:",
    "        path: {regex: '(^|/)\\.ssh(/|$)'}",
    "        path: {regex: '(unclosed'}",
    "        path: {not_under: \"${PROJECT_DIR}\"}",
    "        _any_value: {not_under: /tmp}",
    "        _any_value: {pattern: \"**/.env\", secrets: true}",
    "    match: {secrets: true, response_contains: [\"\"], response_size_exceeds: 0}",
    "    action: deny",
    "    action: redact",
    "    action: allow",
    "    action: nope",
    "    examples: {match: [{tool: x}], no_match: [1, 2.5, null]}",
    "a: &a [1, 2]",
    "b: *a",
    "c: *missing",
    "<<: *a",
    "---",
    "- ",
    "  ",
    "\t",
    "{",
    "}",
    "[",
    "]",
    "'",
    "\"",
    "\\",
    ":",
    "#",
    "|",
    ">-",
    "é",
    "\u{feff}",
    "\r",
    "日本",
];

fn yamlish() -> impl Strategy<Value = String> {
    let piece = prop::sample::select(PIECES);
    let sep = prop::sample::select(&["\n", "\n", "\n", " ", "", "\r\n"][..]);
    prop::collection::vec((piece, sep), 0..40).prop_map(|parts| {
        parts
            .into_iter()
            .map(|(p, s)| format!("{p}{s}"))
            .collect::<String>()
    })
}

fn run(text: &str) {
    checks::check_text(text);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn yamlish_text_never_panics_and_spans_stay_inside(text in yamlish()) {
        run(&text);
    }

    #[test]
    fn arbitrary_text_never_panics(text in "\\PC{0,200}") {
        run(&text);
    }

    #[test]
    fn mutated_valid_policies_never_panic(
        cut in 0usize..400,
        insert in prop::sample::select(PIECES),
    ) {
        let base = "version: 1\nrules:\n  - name: block-ssh\n    match:\n      tool: \"read_*\"\n      arguments:\n        path: {regex: '(^|/)\\.ssh(/|$)'}\n    action: deny\noutbound_rules:\n  - name: r\n    match: {secrets: true}\n    action: redact\n";
        let mut at = cut.min(base.len());
        while !base.is_char_boundary(at) {
            at -= 1;
        }
        let text = format!("{}{}{}", &base[..at], insert, &base[at..]);
        run(&text);
    }
}

/// Every input under `tests/fuzz/regressions/policy_load/` still passes the checks.
#[test]
fn policy_load_regressions() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz/regressions/policy_load");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
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
        if catch_unwind(AssertUnwindSafe(|| checks::check_load(&data))).is_err() {
            failed.push(format!(
                "{}\n  reproducer: {}",
                path.display(),
                checks::reproducer(&data)
            ));
        }
    }
    assert!(failed.is_empty(), "failed:\n{}", failed.join("\n"));
}
