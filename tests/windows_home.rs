//! A Windows-shaped home (issue #28): `USERPROFILE` and `APPDATA`, no `HOME`. `init` and
//! `wrap` find and edit the clients' Windows config locations, and the proxy, started the
//! way a Windows client starts it, denies an SSH-key read spelled the Windows way and
//! redacts a secret the server sends back, with CRLF line ends from the client.
//!
//! Runs natively (discovery reads the same variables on every system) and, cross-built,
//! under Wine in CI (`.ci/cross`), where it drives `mcpwall.exe` and the fake server `.exe`.

#[path = "support/fakes.rs"]
mod fakes;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

const MCPWALL: &str = env!("CARGO_BIN_EXE_mcpwall");
const FAKE_SERVER: &str = env!("CARGO_BIN_EXE_mcpwall-fake-server");

struct WindowsHome {
    _root: tempfile::TempDir,
    profile: PathBuf,
    appdata: PathBuf,
    project: PathBuf,
}

impl WindowsHome {
    fn new() -> WindowsHome {
        let root = tempfile::tempdir().unwrap();
        let profile = root.path().join("Users").join("ada");
        let appdata = profile.join("AppData").join("Roaming");
        let project = root.path().join("work").join("proj");
        for dir in [&appdata, &project] {
            std::fs::create_dir_all(dir).unwrap();
        }
        WindowsHome {
            _root: root,
            profile,
            appdata,
            project,
        }
    }

    fn write(&self, path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    /// `mcpwall ARGS` with only the Windows variables telling where home is, and PATH
    /// holding this mcpwall's directory first.
    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(MCPWALL);
        let bin_dir = Path::new(MCPWALL).parent().unwrap().to_path_buf();
        let system = std::env::var_os("PATH").unwrap_or_default();
        let path =
            std::env::join_paths(std::iter::once(bin_dir).chain(std::env::split_paths(&system)))
                .unwrap();
        command
            .args(args)
            .env_remove("HOME")
            .env_remove("XDG_CONFIG_HOME")
            .env_remove("CODEX_HOME")
            .env("USERPROFILE", &self.profile)
            .env("APPDATA", &self.appdata)
            .env("PATH", path)
            .current_dir(&self.project);
        command
    }

    fn run(&self, args: &[&str]) -> Output {
        self.command(args).stdin(Stdio::null()).output().unwrap()
    }
}

fn server_entry(command: &str) -> String {
    format!(
        r#"{{"command": "{command}", "args": ["-y", "@modelcontextprotocol/server-filesystem", "C:\\Users\\ada\\docs"]}}"#
    )
}

/// Whether the JSON file at `path` runs server `name` through mcpwall.
fn wrapped(path: &Path, servers_key: &str, name: &str) -> bool {
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap())
        .unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()));
    let entry = &v[servers_key][name];
    let command = entry["command"].as_str().unwrap_or_default();
    let args = entry["args"].to_string();
    command.contains("mcpwall") && args.contains("\"--\"") && args.contains("server-filesystem")
}

#[test]
fn init_and_wrap_edit_the_windows_config_locations() {
    let home = WindowsHome::new();
    let desktop = home
        .appdata
        .join("Claude")
        .join("claude_desktop_config.json");
    let cursor = home.profile.join(".cursor").join("mcp.json");
    let vscode = home.appdata.join("Code").join("User").join("mcp.json");
    let windsurf = home
        .profile
        .join(".codeium")
        .join("windsurf")
        .join("mcp_config.json");
    let claude_code = home.profile.join(".claude.json");
    // Windows clients write CRLF files; npm's shim is `npx.cmd`, named `npx`.
    home.write(
        &desktop,
        &format!(
            "{{\r\n  \"mcpServers\": {{\r\n    \"files\": {}\r\n  }}\r\n}}\r\n",
            server_entry("npx")
        ),
    );
    home.write(
        &cursor,
        &format!(
            r#"{{"mcpServers": {{"docs": {}}}}}"#,
            server_entry("npx.cmd")
        ),
    );
    home.write(
        &vscode,
        &format!(r#"{{"servers": {{"code": {}}}}}"#, server_entry("npx")),
    );
    home.write(
        &windsurf,
        &format!(r#"{{"mcpServers": {{"surf": {}}}}}"#, server_entry("npx")),
    );
    home.write(
        &claude_code,
        &format!(r#"{{"mcpServers": {{"cc": {}}}}}"#, server_entry("npx")),
    );

    let out = home.run(&["wrap", "files"]);
    assert!(
        out.status.success(),
        "{:?}\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(wrapped(&desktop, "mcpServers", "files"));
    let text = std::fs::read_to_string(&desktop).unwrap();
    assert!(
        text.contains("\r\n"),
        "the file's CRLF line ends are kept: {text:?}"
    );
    assert!(
        !wrapped(&cursor, "mcpServers", "docs"),
        "wrap touched only `files`"
    );

    let out = home.run(&["init", "--yes", "--profile", "local-dev"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(wrapped(&cursor, "mcpServers", "docs"));
    assert!(wrapped(&vscode, "servers", "code"));
    assert!(wrapped(&windsurf, "mcpServers", "surf"));
    assert!(wrapped(&claude_code, "mcpServers", "cc"));
    assert!(
        home.profile.join(".mcpwall").is_dir(),
        "mcpwall's state lives in USERPROFILE"
    );
}

#[test]
fn the_proxy_denies_a_windows_key_path_and_redacts_a_secret() {
    let home = WindowsHome::new();
    // A secret the server itself holds (in its environment, which it inherits from
    // mcpwall) and sends back when asked: it must be redacted on the way out. (Put in a
    // request instead, the default pack refuses it inbound, before the server sees it.)
    let key = fakes::fake("aws-access-key-id").unwrap();
    let mut child = home
        .command(&["--", FAKE_SERVER])
        .env("FAKE_SERVER_SECRET", &key)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut recv = || {
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        serde_json::from_str::<serde_json::Value>(&line)
            .unwrap_or_else(|e| panic!("not JSON from mcpwall: {line:?}: {e}"))
    };
    // CRLF, as a Windows client may send.
    let mut send = |line: &str| {
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\r\n").unwrap();
        stdin.flush().unwrap();
    };
    send(
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
    );
    assert!(recv()["result"].is_object());
    send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);

    let key_path = home.profile.join(".ssh").join("id_rsa");
    let call = serde_json::json!({
        "jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "read_file", "arguments": {"path": key_path}},
    });
    send(&call.to_string());
    let denied = recv();
    assert_eq!(denied["id"], 2);
    assert!(
        denied["error"].is_object() || denied["result"]["isError"] == true,
        "{denied}"
    );

    send(r#"{"jsonrpc":"2.0","id":3,"method":"fake/env","params":{"name":"FAKE_SERVER_SECRET"}}"#);
    let said = recv();
    let text = said.to_string();
    assert_eq!(said["id"], 3, "{text}");
    assert!(
        !text.contains(&key),
        "the secret reached the client: {text}"
    );
    let value = said["result"]["value"].as_str().unwrap_or_default();
    assert!(
        value.contains("REDACTED") || value.contains("redacted"),
        "the server's answer came back without its secret, redacted in place: {text}"
    );

    drop(stdin);
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
}
