//! Every verb reports a failure in one voice: `error: WHAT` as the first line, then
//! `  hint: WHAT TO DO` lines (clap's own usage errors read the same way); a policy error
//! then draws each problem where it is in its file. No `×` headline, no second style.

#[path = "support/sandbox.rs"]
mod sandbox;

use sandbox::Sandbox;

/// The failure of `mcpwall ARGS` in a fresh sandbox: exit code and stderr.
fn fail(sandbox: &Sandbox, args: &[&str]) -> (i32, String) {
    let run = sandbox.run(args, "");
    assert_ne!(run.code, 0, "`mcpwall {}` should fail", args.join(" "));
    (run.code, run.stderr)
}

fn assert_voice(args: &[&str], stderr: &str, hint: Option<&str>) {
    let shown = format!("`mcpwall {}`:\n{stderr}", args.join(" "));
    assert!(stderr.starts_with("error: "), "{shown}");
    assert!(!stderr.contains("mcpwall: error"), "{shown}");
    for line in stderr.lines().skip(1).take_while(|l| !l.is_empty()) {
        assert!(
            line.starts_with("  hint: ") || line.starts_with("  cause: "),
            "only hint and cause lines follow the error line: {shown}"
        );
    }
    if let Some(hint) = hint {
        assert!(
            stderr
                .lines()
                .any(|l| l.starts_with("  hint: ") && l.contains(hint)),
            "{shown}"
        );
    }
}

#[test]
fn every_verb_reports_errors_in_one_voice() {
    let sandbox = Sandbox::new();
    sandbox.write(
        "project/bad.yaml",
        "version: 1\nrules:\n  - name: x\n    match: {arguments: {path: {regex: '(unclosed'}}}\n    action: deny\n",
    );
    let cases: &[(&[&str], Option<&str>)] = &[
        (
            &["wrap", "nosuch"],
            Some("add the server to your MCP client"),
        ),
        (
            &["init", "--profile", "nope", "--yes"],
            Some("valid profiles"),
        ),
        (&["log", "--since", "yesterdayish"], Some("RFC 3339")),
        (
            &["explain-policy", "--pack", "nope"],
            Some("built-in packs"),
        ),
        (&["statsu"], Some("did you mean `mcpwall status`?")),
        (&["approve", "zzzzzz"], Some("mcpwall approve")),
        (&["compare", "a.json", "b.json"], None),
        (&["status", "--bogus"], None),
        (
            &["check", "-c", "bad.yaml"],
            Some("fix every problem listed below"),
        ),
    ];
    for (args, hint) in cases {
        let (_, stderr) = fail(&sandbox, args);
        assert_voice(args, &stderr, *hint);
    }
}

/// A policy error keeps the drawing that points into the file, after the error line.
#[test]
fn a_policy_error_points_into_its_file_after_the_error_line() {
    let sandbox = Sandbox::new();
    sandbox.write(
        "project/bad.yaml",
        "version: 1\nrules:\n  - name: x\n    match: {arguments: {path: {regex: '(unclosed'}}}\n    action: deny\n",
    );
    let (code, stderr) = fail(&sandbox, &["check", "-c", "bad.yaml"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.starts_with("error: the policy could not be loaded: 1 problem\n"),
        "{stderr}"
    );
    assert!(stderr.contains("bad.yaml:4:"), "{stderr}");
    assert!(stderr.contains("unclosed group"), "{stderr}");
}

/// In proxy mode the server's stderr shares the stream: mcpwall's errors carry its name.
#[test]
fn proxy_mode_errors_name_mcpwall() {
    let sandbox = Sandbox::new();
    let (_, stderr) = fail(&sandbox, &["--log-level", "info"]);
    assert!(stderr.starts_with("mcpwall: error: "), "{stderr}");
}
