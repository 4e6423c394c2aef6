//! Interop with the official implementations, through the real `mcpwall` binary:
//! - `tests/interop/interop.py`: the MCP Python SDK client to
//!   `@modelcontextprotocol/server-filesystem` and `@modelcontextprotocol/server-everything`;
//! - `tests/interop/session_core.py`: the same client to `misbehaving_server.py`, a server
//!   that breaks the session rules (re-typed ids, duplicate keys, non-JSON-RPC lines,
//!   oversize frames, a sampling request answered with a credential);
//! - `tests/interop/trust.py`: the same client, with mcpwall finding its policy where a
//!   user's would be, against issue 21's bypasses: an untrusted project file's outbound rule
//!   (official filesystem server), a user allow rule over a built-in deny (the same), the
//!   agent approving its own tools through a shell tool, and a rug-pulled tool, also with the
//!   call pipelined behind the list (`trust_server.py`);
//! - `tests/interop/ask.py`: the same client against `action: ask` (issue 26): approved,
//!   declined and unanswered elicitations, `remember: session`, and a client without
//!   elicitation answered through `mcpwall approve` (`trust_server.py`'s shell mode);
//! - `tests/interop/injection.py`: the same client against `injection_server.py`, whose
//!   prompts, completions, resources, results (cut across content items), sampling and
//!   elicitation requests, log and progress notifications carry a prompt injection.
//!
//! `.ci/run` installs their dependencies (pinned) into `tests/interop/.venv` and
//! `tests/interop/node_modules`. Without them each test is skipped with a loud message,
//! unless `MCPWALL_REQUIRE_INTEROP=1` (set by `.ci/run`), which makes their absence a failure.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const TIMEOUT: Duration = Duration::from_secs(300);

/// Runs `tests/interop/<script> MCPWALL` with the interop venv's Python, once the venv and
/// the npm servers in `npm_bins` are there, and fails unless it exits 0 within `TIMEOUT`.
fn run_interop_script(script: &str, npm_bins: &[&str]) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop");
    let python = dir.join(".venv/bin/python");
    let servers = dir.join("node_modules/.bin");
    let have = python.exists() && npm_bins.iter().all(|b| servers.join(b).exists());
    if !have {
        assert!(
            std::env::var_os("MCPWALL_REQUIRE_INTEROP").is_none(),
            "interop dependencies missing in {} (run .ci/run to install them)",
            dir.display()
        );
        eprintln!(
            "\n!!! SKIPPED {script}: no {} or node_modules; run .ci/run to install the \
             official MCP SDK and servers !!!\n",
            python.display()
        );
        return;
    }
    let mut child = Command::new(&python)
        .arg(dir.join(script))
        .arg(env!("CARGO_BIN_EXE_mcpwall"))
        .current_dir(&dir)
        .stdin(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("run {script}: {e}"));
    let deadline = Instant::now() + TIMEOUT;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("{script} did not finish within {TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(
        status.success(),
        "{script} checks failed: {status:?} (see output above)"
    );
}

#[test]
fn official_sdk_client_and_servers_through_mcpwall() {
    run_interop_script(
        "interop.py",
        &["mcp-server-filesystem", "mcp-server-everything"],
    );
}

#[test]
fn official_sdk_client_and_a_misbehaving_server_through_mcpwall() {
    run_interop_script("session_core.py", &[]);
}

#[test]
fn official_sdk_client_against_trust_bypasses_through_mcpwall() {
    run_interop_script("trust.py", &["mcp-server-filesystem"]);
}

#[test]
fn official_sdk_client_answers_ask_rules_through_mcpwall() {
    run_interop_script("ask.py", &[]);
}

#[test]
fn official_sdk_client_gets_no_injection_from_any_server_message_through_mcpwall() {
    run_interop_script("injection.py", &[]);
}
