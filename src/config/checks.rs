//! Invariants of policy loading, shared by the `policy_load` fuzz target, its regression
//! replay and the property tests. Each check panics with a diagnosis when an invariant breaks.
//!
//! 1. Loading any text never panics.
//! 2. Every diagnostic has a help line; every label lies inside its source, on character
//!    boundaries; the reported line and column agree with the label's offset.
//! 3. Every report renders with miette.
//! 4. A policy that loads has every span inside its source, and compiling it never panics;
//!    a compile error obeys 2 and 3 (a compile problem may lack a place).

use super::policy::{Policy, Span};
use super::{LoadOptions, PolicyError, load_str};

/// The options every check loads with (fixed, so runs are reproducible).
pub fn options() -> LoadOptions {
    LoadOptions {
        explicit: None,
        home: "/home/fuzz".into(),
        project_dir: "/home/fuzz/project".into(),
    }
}

/// Inputs above this are skipped: the YAML budget refuses them long before, and the fuzzer
/// should spend its time on structure, not size.
pub const MAX_INPUT: usize = 64 * 1024;

/// Load `data` (as UTF-8, lossily) and compile it, checking every invariant.
pub fn check_load(data: &[u8]) {
    if data.len() > MAX_INPUT {
        return;
    }
    let text = String::from_utf8_lossy(data);
    check_text(&text);
}

/// [`check_load`] on text.
pub fn check_text(text: &str) {
    match load_str("fuzz.yml", text, &options()) {
        Ok(policy) => {
            check_policy(&policy);
            let opts = options();
            let env = crate::paths::PathEnv::new(&opts.home, &opts.project_dir);
            if let Err(e) = crate::program::Program::compile_with(&policy, &env) {
                check_error(text, &e, false);
            }
        }
        Err(e) => check_error(text, &e, true),
    }
}

fn check_span(policy: &Policy, span: Span, what: &str) {
    let text = &policy.source(span.source).text;
    assert!(
        span.offset + span.len <= text.len(),
        "{what}: span {span:?} outside a source of {} bytes",
        text.len()
    );
    assert!(
        text.is_char_boundary(span.offset) && text.is_char_boundary(span.offset + span.len),
        "{what}: {span:?} splits a character"
    );
    assert!(span.line >= 1 && span.column >= 1, "{what}: {span:?}");
}

fn check_policy(policy: &Policy) {
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

/// Check a [`PolicyError`] about `text`; `from_load` errors must all have a place.
pub fn check_error(text: &str, e: &PolicyError, from_load: bool) {
    assert!(!e.diagnostics.is_empty(), "an error with no diagnostics");
    for d in &e.diagnostics {
        assert!(d.help.is_some(), "{} has no help", d.code);
        for l in &d.labels {
            let end = l.offset() + l.len();
            assert!(
                end <= text.len(),
                "{}: label {}+{} outside {} bytes",
                d.code,
                l.offset(),
                l.len(),
                text.len()
            );
            assert!(
                text.is_char_boundary(l.offset()) && text.is_char_boundary(end),
                "{}: label {}+{} splits a character",
                d.code,
                l.offset(),
                l.len()
            );
        }
        let Some((_, line, column)) = d.location.clone() else {
            assert!(!from_load, "{}: a load problem without a place", d.code);
            continue;
        };
        let offset = d.labels[0].offset();
        let before = &text[..offset];
        let want_line = before.matches('\n').count() as u32 + 1;
        let line_start = before.rfind('\n').map(|i| i + 1).unwrap_or(0);
        // Columns count characters; a byte-order mark opening the file is not counted.
        let line_text = &before[line_start..];
        let line_text = line_text
            .strip_prefix('\u{feff}')
            .filter(|_| line_start == 0)
            .unwrap_or(line_text);
        let want_column = line_text.chars().count() as u32 + 1;
        assert_eq!(
            (line, column),
            (want_line, want_column),
            "{}: location disagrees with the label offset {offset}",
            d.code
        );
    }
    let mut out = String::new();
    miette::GraphicalReportHandler::new_themed(miette::GraphicalTheme::unicode_nocolor())
        .with_width(80)
        .render_report(&mut out, e)
        .expect("a report renders");
}

/// A paste-ready Rust reproducer for a failing input.
pub fn reproducer(data: &[u8]) -> String {
    format!(
        "mcpwall::config::checks::check_text({:?});",
        String::from_utf8_lossy(data)
    )
}
