//! Property tests for policy loading (the `policy_load` fuzz target's invariants, run as
//! proptest so they run in every `cargo test`):
//! - arbitrary YAML-ish text through `load_str` never panics;
//! - every diagnostic's labels lie inside its source and on character boundaries, and the
//!   reported line and column agree with the label's offset;
//! - every diagnostic renders with miette without panicking;
//! - a policy that loads has every span inside its source, and compiling it never panics;
//!   a compile error's labels lie inside their sources too.

use mcpwall::config::policy::{Policy, Span};
use mcpwall::config::{LoadOptions, PolicyError, load_str};
use proptest::prelude::*;

fn opts() -> LoadOptions {
    LoadOptions {
        explicit: None,
        home: "/home/prop".into(),
        project_dir: "/home/prop/project".into(),
    }
}

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

fn check_span(policy: &Policy, span: Span, what: &str) {
    let text = &policy.source(span.source).text;
    assert!(
        span.offset + span.len <= text.len(),
        "{what}: span {span:?} outside a source of {} bytes",
        text.len()
    );
    assert!(
        text.is_char_boundary(span.offset),
        "{what}: {span:?} splits a character"
    );
    assert!(span.line >= 1 && span.column >= 1, "{what}: {span:?}");
}

fn check_ok(policy: &Policy) {
    for r in &policy.rules {
        check_span(policy, r.span, "rule");
        check_span(policy, r.name.span, "rule name");
        check_span(policy, r.method.span, "method");
        for c in &r.arguments {
            check_span(policy, c.span, "argument condition");
        }
    }
    for r in &policy.outbound_rules {
        check_span(policy, r.span, "outbound rule");
        check_span(policy, r.name.span, "outbound rule name");
    }
    for i in &policy.ignored {
        check_span(policy, i.span, "ignored part");
    }
}

fn check_err(text: &str, e: &PolicyError, from_load: bool) {
    assert!(!e.diagnostics.is_empty(), "an error with no diagnostics");
    for d in &e.diagnostics {
        assert!(d.help.is_some(), "{} has no help", d.code);
        for l in &d.labels {
            assert!(
                l.offset() + l.len() <= text.len(),
                "{}: label {}+{} outside {} bytes",
                d.code,
                l.offset(),
                l.len(),
                text.len()
            );
            assert!(
                text.is_char_boundary(l.offset()),
                "{}: label splits a char",
                d.code
            );
            assert!(
                text.is_char_boundary(l.offset() + l.len()),
                "{}: label splits a char",
                d.code
            );
        }
        let Some((_, line, column)) = d.location.clone() else {
            assert!(!from_load, "{}: every load_str problem has a place", d.code);
            continue;
        };
        let offset = d.labels[0].offset();
        let before = &text[..offset];
        let want_line = before.matches('\n').count() as u32 + 1;
        let line_start = before.rfind('\n').map(|i| i + 1).unwrap_or(0);
        let want_col = before[line_start..].chars().count() as u32 + 1;
        // serde-saphyr counts `\r` alone as a line break; only check where no `\r` precedes.
        if !before.contains('\r') {
            assert_eq!(
                (line, column),
                (want_line, want_col),
                "{}: location disagrees with the label offset {offset}",
                d.code
            );
        }
    }
    let mut out = String::new();
    miette::GraphicalReportHandler::new_themed(miette::GraphicalTheme::unicode_nocolor())
        .with_width(80)
        .render_report(&mut out, e)
        .expect("render");
}

fn run(text: &str) {
    match load_str("prop.yml", text, &opts()) {
        Ok(p) => {
            check_ok(&p);
            let env = mcpwall::paths::PathEnv::new(&opts().home, &opts().project_dir);
            if let Err(e) = mcpwall::program::Program::compile_with(&p, &env) {
                check_err(text, &e, false);
            }
        }
        Err(e) => check_err(text, &e, true),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

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
