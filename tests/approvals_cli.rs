//! `mcpwall approve` against the pending queue: a call whose holder (the mcpwall that
//! held it) is gone is shown as such, cannot be approved, and its files are removed.

#[path = "support/sandbox.rs"]
mod sandbox;

use sandbox::Sandbox;

/// The pid of a process that has exited (and been reaped).
fn dead_pid() -> u32 {
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    pid
}

/// Offer a call under `code` in the sandbox's queue, as a proxy with `pid` would.
fn offer(sandbox: &Sandbox, code: &str, pid: u32) {
    let expires = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 600;
    let request = serde_json::json!({
        "code": code,
        "server": "deployer",
        "method": "tools/call",
        "tool": "deploy",
        "arguments": "{\"env\":\"prod\"}",
        "rule": "ask-deploy",
        "digest": "d1",
        "expires_unix": expires,
        "pid": pid,
    });
    sandbox.write(
        &format!("home/.mcpwall/pending/{code}.json"),
        &request.to_string(),
    );
}

#[test]
fn a_call_whose_holder_is_gone_cannot_be_approved_and_leaves_the_queue() {
    let sandbox = Sandbox::new();
    let pending = sandbox.home().join(".mcpwall/pending");
    offer(&sandbox, "abcdef", dead_pid());
    let run = sandbox.run(&["approve", "--yes", "abcdef"], "");
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    assert!(!run.stdout.contains("Approved"), "{}", run.stdout);
    assert!(
        run.stderr.contains("is no longer running"),
        "{}",
        run.stderr
    );
    assert!(
        !pending.join("abcdef.json").exists() && !pending.join("abcdef.decision").exists(),
        "the stale call's files stay behind"
    );

    // Listing removes such calls too, saying so once; a live holder's call stays.
    offer(&sandbox, "ghjkmn", dead_pid());
    offer(&sandbox, "pqrstu", std::process::id());
    let run = sandbox.run(&["approve"], "");
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout
            .contains("ghjkmn  server deployer: removed from the queue"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("pqrstu  server deployer  ("),
        "{}",
        run.stdout
    );
    assert!(!pending.join("ghjkmn.json").exists());
    assert!(pending.join("pqrstu.json").exists());
    let run = sandbox.run(&["approve"], "");
    assert!(!run.stdout.contains("ghjkmn"), "{}", run.stdout);
}
