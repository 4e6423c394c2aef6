//! Interop with the official implementations: the MCP Python SDK client, through the
//! real `mcpwall` binary, to `@modelcontextprotocol/server-filesystem` and
//! `@modelcontextprotocol/server-everything`. The checks live in
//! `tests/interop/interop.py`; `.ci/run` installs its dependencies (pinned) into
//! `tests/interop/.venv` and `tests/interop/node_modules`.
//!
//! Without those dependencies the test is skipped with a loud message, unless
//! `MCPWALL_REQUIRE_INTEROP=1` (set by `.ci/run`), which makes their absence a failure.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const TIMEOUT: Duration = Duration::from_secs(300);

#[test]
fn official_sdk_client_and_servers_through_mcpwall() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop");
    let python = dir.join(".venv/bin/python");
    let servers = dir.join("node_modules/.bin");
    let have = python.exists()
        && servers.join("mcp-server-filesystem").exists()
        && servers.join("mcp-server-everything").exists();
    if !have {
        assert!(
            std::env::var_os("MCPWALL_REQUIRE_INTEROP").is_none(),
            "interop dependencies missing in {} (run .ci/run to install them)",
            dir.display()
        );
        eprintln!(
            "\n!!! SKIPPED interop test: no {} or node_modules; run .ci/run to install the \
             official MCP SDK and servers !!!\n",
            python.display()
        );
        return;
    }
    let mut child = Command::new(&python)
        .arg(dir.join("interop.py"))
        .arg(env!("CARGO_BIN_EXE_mcpwall"))
        .current_dir(&dir)
        .stdin(Stdio::null())
        .spawn()
        .expect("run interop.py");
    let deadline = Instant::now() + TIMEOUT;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("interop.py did not finish within {TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(
        status.success(),
        "interop checks failed: {status:?} (see output above)"
    );
}
