//! What the proxy says on stderr when it starts.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

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
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "proxy did not exit"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stderr.contains("allow rule `allow-all`") && stderr.contains(".mcpwall.yml:3:"),
        "stderr: {stderr}"
    );
    assert!(stderr.contains("is ignored"), "stderr: {stderr}");
    assert!(stdout.contains("\"code\":-32001"), "stdout: {stdout}");
}
