//! What the proxy says on stderr when it starts.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The proxy's output once it exits (within a minute, or the test fails).
fn wait_for_exit(mut child: std::process::Child) -> std::process::Output {
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "proxy did not exit"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// An untrusted project file's allow rule does not apply, and the proxy says so at start-up
/// (naming the file and line) instead of ignoring it silently.
#[test]
fn ignored_parts_of_an_untrusted_project_file_are_reported_at_start() {
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    std::fs::write(
        project.path().join(".mcpwall.yml"),
        "version: 1\nrules:\n  - name: allow-all\n    match: {method: \"*\"}\n    action: allow\n",
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_mcpwall"))
        .args(["--", "cat"])
        .env("HOME", home.path())
        .current_dir(project.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The allow rule is ignored, so the default pack still denies the SSH key read.
    child
        .stdin
        .take()
        .unwrap()
        .write_all(
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"~/.ssh/id_rsa"}}}
"#,
        )
        .unwrap();
    let out = wait_for_exit(child);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stderr.contains("allow rule `allow-all`") && stderr.contains(".mcpwall.yml:3:"),
        "stderr: {stderr}"
    );
    assert!(stderr.contains("is ignored"), "stderr: {stderr}");
    assert!(stdout.contains("\"code\":-32001"), "stdout: {stdout}");
}

/// The server command of [`run_marking`]: `sh -c 'touch MARKER; cat'`.
fn marking_command(project: &std::path::Path) -> Vec<String> {
    let marker = project.join("server-ran");
    vec![
        "sh".into(),
        "-c".into(),
        format!("touch '{}'; cat", marker.display()),
    ]
}

/// Runs mcpwall in front of [`marking_command`] with `home` and `project`, stdin closed,
/// and returns its exit code, its stderr and whether the server process ran.
fn run_marking(home: &std::path::Path, project: &std::path::Path) -> (Option<i32>, String, bool) {
    let child = Command::new(env!("CARGO_BIN_EXE_mcpwall"))
        .args(["--grace-ms", "200", "--kill-grace-ms", "200", "--"])
        .args(marking_command(project))
        .env("HOME", home)
        .current_dir(project)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = wait_for_exit(child);
    // A server that was spawned and then killed may not have got as far as the touch:
    // only its absence after a long enough wait is asserted.
    std::thread::sleep(Duration::from_millis(200));
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        project.join("server-ran").exists(),
    )
}

/// A policy file that fails validation stops mcpwall before the server is spawned.
#[test]
fn an_invalid_policy_file_never_starts_the_server() {
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join(".mcpwall")).unwrap();
    // Thousands of valid rules before the bad one: loading takes long enough that a
    // server spawned before it (or alongside it) would have run.
    let mut policy = String::from("version: 1\nrules:\n");
    for i in 0..3000 {
        policy.push_str(&format!(
            "  - name: rule-{i}\n    match: {{method: \"m{i}\", arguments: {{path: {{regex: 'x{i}'}}}}}}\n    action: deny\n"
        ));
    }
    policy.push_str(
        "  - name: bad\n    match: {method: \"*\", arguments: {path: {regex: '(unclosed'}}}\n    action: deny\n",
    );
    std::fs::write(home.path().join(".mcpwall/config.yml"), policy).unwrap();
    let (code, stderr, ran) = run_marking(home.path(), project.path());
    assert_eq!(code, Some(2), "stderr: {stderr}");
    assert!(stderr.contains("config.yml"), "stderr: {stderr}");
    assert!(!ran, "the server was started for an invalid policy");
}

/// With no policy file the embedded default pack applies, and the server may start while
/// it loads; a damaged pin file still stops the start (exit 2), and the server started
/// early is killed, having been sent nothing.
#[test]
fn a_damaged_pin_file_stops_a_zero_config_start() {
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let (code, stderr, ran) = run_marking(home.path(), project.path());
    assert_eq!(code, Some(0), "a clean zero-config run works: {stderr}");
    assert!(ran, "the server ran");
    let identity = mcpwall::guard::pins::ServerIdentity {
        name: "sh".into(),
        command: marking_command(project.path()),
    };
    let pins = home.path().join(".mcpwall/pins");
    std::fs::create_dir_all(&pins).unwrap();
    std::fs::write(pins.join(format!("{}.json", identity.key())), "{ not json").unwrap();
    let (code, stderr, _) = run_marking(home.path(), project.path());
    assert_eq!(code, Some(2), "stderr: {stderr}");
    assert!(stderr.contains("pin"), "stderr: {stderr}");
}

/// A user's outbound deny that the default pack's `redact-secrets` partly shadows is
/// warned about when the proxy starts, with the fix, and the proxy still runs.
#[test]
fn a_partly_shadowed_rule_is_reported_at_start() {
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join(".mcpwall")).unwrap();
    std::fs::write(
        home.path().join(".mcpwall/config.yml"),
        "version: 1\nextends: [default]\noutbound_rules:\n  - name: withhold-keys\n    match:\n      response_contains_regex: ['AKIA[0-9A-Z]{16}']\n    action: deny\n",
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_mcpwall"))
        .args(["--", "cat"])
        .env("HOME", home.path())
        .current_dir(project.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n")
        .unwrap();
    let out = wait_for_exit(child);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("\"withhold-keys\"")
            && stderr.contains("partly shadowed")
            && stderr.contains("disable: [redact-secrets]"),
        "stderr: {stderr}"
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("\"id\":1"));
}
