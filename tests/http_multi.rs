//! `mcpwall serve` with several named servers (`servers:` in the policy) behind one
//! listener: each at `/mcp/NAME`, each its own real server process, its own name for
//! `server:` rules, and sessions that never cross servers. Needs `--features test-support`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(60);

struct Listener {
    child: Child,
    addr: String,
    banner: String,
    dir: tempfile::TempDir,
}

/// A fake server that records what it received in `dir/NAME.jsonl`: `env` sets the log
/// path, since a `servers:` entry is a command and its arguments.
#[cfg(unix)]
fn fake_server_entry(name: &str, dir: &Path) -> String {
    format!(
        "  {name}:\n    command: env\n    args: [\"FAKE_RECV_LOG={}\", \"{}\"]\n",
        dir.join(format!("{name}.jsonl")).display(),
        env!("CARGO_BIN_EXE_mcpwall-fake-server")
    )
}

impl Listener {
    fn start() -> Listener {
        Listener::with_policy(|dir| {
            format!(
                r#"version: 1
settings:
  log_dir: "{}"
servers:
{}{}
outbound_rules:
  - name: beta-keeps-its-secrets
    match: {{server: beta, response_contains: "classified"}}
    action: deny
"#,
                dir.join("logs").display(),
                fake_server_entry("alpha", dir),
                fake_server_entry("beta", dir),
            )
        })
    }

    /// `mcpwall serve` on the policy `policy(dir)` writes, with its `servers:` (two).
    fn with_policy(policy: impl FnOnce(&Path) -> String) -> Listener {
        Listener::serving(policy, 2)
    }

    /// `mcpwall serve` on the policy `policy(dir)` writes, once `servers` endpoints are up.
    fn serving(policy: impl FnOnce(&Path) -> String, servers: usize) -> Listener {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        std::fs::create_dir_all(&home).unwrap();
        let text = policy(dir.path());
        let policy = dir.path().join("policy.yml");
        std::fs::write(&policy, text).unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_mcpwall"))
            .args(["serve", "--listen", "127.0.0.1:0", "-c"])
            .arg(&policy)
            .env("HOME", &home)
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stderr = BufReader::new(child.stderr.take().unwrap());
        let mut banner = String::new();
        // The banner line, then one line per server.
        while banner.lines().filter(|l| l.contains("/mcp/")).count() < servers {
            let mut line = String::new();
            assert!(
                stderr.read_line(&mut line).unwrap() > 0,
                "mcpwall serve exited: {banner}"
            );
            banner.push_str(&line);
        }
        let addr = banner
            .split("http://")
            .nth(1)
            .and_then(|r| r.split('/').next())
            .unwrap()
            .to_string();
        std::thread::spawn(move || {
            let mut rest = String::new();
            let _ = stderr.read_to_string(&mut rest);
            eprint!("{rest}");
        });
        Listener {
            child,
            addr,
            banner,
            dir,
        }
    }

    fn received(&self, server: &str) -> String {
        std::fs::read_to_string(self.dir.path().join(format!("{server}.jsonl"))).unwrap_or_default()
    }

    fn audit_with(&self, needle: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let mut text = String::new();
            if let Ok(entries) = std::fs::read_dir(self.dir.path().join("logs")) {
                for e in entries {
                    text.push_str(&std::fs::read_to_string(e.unwrap().path()).unwrap_or_default());
                }
            }
            if text.contains(needle) || Instant::now() > deadline {
                return text;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// One request on a fresh connection; `(status, headers, body)`. With `stop_at`, reading
    /// ends once the response holds it (an SSE stream stays open).
    fn send(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
        stop_at: Option<&str>,
    ) -> (u16, String, String) {
        let mut stream = TcpStream::connect(&self.addr).unwrap();
        stream.set_read_timeout(Some(WAIT)).unwrap();
        let mut req = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nContent-Length: {}\r\n",
            self.addr,
            body.len()
        );
        for (k, v) in headers {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        req.push_str("\r\n");
        stream.write_all(req.as_bytes()).unwrap();
        stream.write_all(body).unwrap();
        let mut raw = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            let n = stream.read(&mut buf).unwrap_or(0);
            if n == 0 {
                break;
            }
            raw.extend_from_slice(&buf[..n]);
            if stop_at.is_some_and(|s| String::from_utf8_lossy(&raw).contains(s)) {
                break;
            }
        }
        let text = String::from_utf8_lossy(&raw).into_owned();
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        let status = head.split(' ').nth(1).unwrap().parse().unwrap();
        (status, head.to_ascii_lowercase(), body.to_string())
    }

    fn post(&self, path: &str, session: Option<&str>, body: &Value) -> (u16, String, String) {
        let mut headers = vec![
            ("Accept", "application/json, text/event-stream"),
            ("Content-Type", "application/json"),
        ];
        if let Some(s) = session {
            headers.push(("Mcp-Session-Id", s));
        }
        self.send("POST", path, &headers, body.to_string().as_bytes(), None)
    }

    fn initialize(&self, path: &str) -> String {
        let (status, head, body) = self.post(
            path,
            None,
            &json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}),
        );
        assert_eq!(status, 200, "{body}");
        head.lines()
            .find_map(|l| l.strip_prefix("mcp-session-id: "))
            .expect("a session id")
            .trim()
            .to_string()
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn call(id: u64, text: &str) -> Value {
    json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":"echo","arguments":{"text":text}}})
}

#[cfg(unix)]
#[test]
fn each_named_server_has_its_endpoint_process_name_and_sessions() {
    let l = Listener::start();
    // The startup output names each endpoint.
    for name in ["alpha", "beta"] {
        assert!(
            l.banner
                .contains(&format!("{name}  http://{}/mcp/{name}", l.addr)),
            "{}",
            l.banner
        );
    }

    let a = l.initialize("/mcp/alpha");
    let b = l.initialize("/mcp/beta");
    assert_ne!(a, b);

    // Each call reaches its own server only.
    let (status, _, body) = l.post("/mcp/alpha", Some(&a), &call(1, "for-alpha classified"));
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("for-alpha classified"), "{body}");
    let (status, _, body) = l.post("/mcp/beta", Some(&b), &call(2, "for-beta"));
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("for-beta"), "{body}");
    assert!(l.received("alpha").contains("for-alpha"));
    assert!(!l.received("alpha").contains("for-beta"));
    assert!(l.received("beta").contains("for-beta"));
    assert!(!l.received("beta").contains("for-alpha"));

    // `server: beta` applies to beta's answers, not alpha's (above, it passed).
    let (status, _, body) = l.post("/mcp/beta", Some(&b), &call(3, "beta classified"));
    assert_eq!(status, 200, "{body}");
    assert!(!body.contains("beta classified"), "{body}");
    assert!(body.contains("BLOCKED BY MCPWALL"), "{body}");

    // Alpha's session on beta's endpoint: 404, nothing forwarded, audited.
    let (status, _, body) = l.post("/mcp/beta", Some(&a), &call(4, "crossing-over"));
    assert_eq!(status, 404, "{body}");
    assert!(!l.received("alpha").contains("crossing-over"));
    assert!(!l.received("beta").contains("crossing-over"));
    let audit = l.audit_with("mcpwall:session_server");
    assert!(
        audit
            .lines()
            .any(|line| line.contains("mcpwall:session_server")
                && line.contains("a session of server alpha used on the endpoint of beta")),
        "{audit}"
    );

    // No server at `/mcp` itself, nor at an unknown name: 404, naming no endpoint (a
    // caller learns nothing of the listener's paths).
    for path in ["/mcp", "/mcp/gamma", "/mcp/alpha/x"] {
        let (status, _, body) = l.post(path, None, &call(5, "nowhere"));
        assert_eq!(status, 404, "{path}: {body}");
        assert!(!body.contains("/mcp/alpha"), "{body}");
    }

    // Legacy HTTP+SSE: the endpoint event names the server's own message path.
    let (status, _, body) = l.send(
        "GET",
        "/sse/beta",
        &[("Accept", "text/event-stream")],
        b"",
        Some("session_id="),
    );
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("data: /message/beta?session_id="), "{body}");
}

/// A `servers:` entry running the fake server with a `run_command` tool (bash), logging
/// what it receives, with `extra` YAML lines added to the entry.
#[cfg(unix)]
fn bash_server_entry(name: &str, dir: &Path, extra: &str) -> String {
    format!(
        "  {name}:\n    command: \"{}\"\n    env:\n      FAKE_BASH_TOOL: 1\n      FAKE_RECV_LOG: \"{}\"\n      GREETING: \"hello from ${{PROJECT_DIR}}\"\n{extra}",
        env!("CARGO_BIN_EXE_mcpwall-fake-server"),
        dir.join(format!("{name}.jsonl")).display(),
    )
}

fn run_command(id: u64, command: &str) -> Value {
    json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":"run_command","arguments":{"command":command}}})
}

#[cfg(unix)]
#[test]
fn a_servers_packs_and_environment_apply_to_that_server_only() {
    let l = Listener::with_policy(|dir| {
        format!(
            "version: 1\nsettings:\n  default_action: allow\n  log_dir: \"{}\"\nrules:\n  - name: no-forbidden-word\n    match: {{tool: run_command, arguments: {{command: {{regex: forbidden-word}}}}}}\n    action: deny\nservers:\n{}{}",
            dir.join("logs").display(),
            bash_server_entry("plain", dir, ""),
            bash_server_entry("guarded", dir, "    extends: [servers/shell-mcp]\n"),
        )
    });
    let plain = l.initialize("/mcp/plain");
    let guarded = l.initialize("/mcp/guarded");
    let project = l.dir.path().display().to_string();

    // `env` reaches each child, `${PROJECT_DIR}` expanded.
    for (path, session) in [("/mcp/plain", &plain), ("/mcp/guarded", &guarded)] {
        let (status, _, body) = l.post(path, Some(session), &run_command(1, "echo \"$GREETING\""));
        assert_eq!(status, 200, "{body}");
        assert!(
            body.contains(&format!("hello from {project}")),
            "{path}: {body}"
        );
    }

    // The shell pack of `guarded` refuses a setuid chmod; `plain` has no such rule.
    let risky = "chmod u+s /nonexistent/mcpwall-test; echo ran-risky";
    let (status, _, body) = l.post("/mcp/plain", Some(&plain), &run_command(2, risky));
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("ran-risky"), "{body}");
    assert!(l.received("plain").contains("chmod u+s"));
    let (status, _, body) = l.post("/mcp/guarded", Some(&guarded), &run_command(3, risky));
    assert_eq!(status, 200, "{body}");
    assert!(!body.contains("ran-risky"), "{body}");
    assert!(body.contains("shell-block-privilege-escalation"), "{body}");
    assert!(!l.received("guarded").contains("chmod u+s"));

    // The global rule applies on both, behind the pack's rules on guarded.
    for (id, path, session) in [(4, "/mcp/plain", &plain), (5, "/mcp/guarded", &guarded)] {
        let (status, _, body) =
            l.post(path, Some(session), &run_command(id, "echo forbidden-word"));
        assert_eq!(status, 200, "{body}");
        assert!(body.contains("no-forbidden-word"), "{path}: {body}");
    }

    // The audit log names each rule as written, though the two programs number their
    // rules differently and only guarded's has the pack's.
    let audit = l.audit_with("\"id\":5,");
    // A field of the inbound audit line of request `id`.
    let field_of = |id: u64, field: &str| {
        audit
            .lines()
            .find(|line| line.contains(&format!("\"id\":{id},")) && line.contains("\"inbound\""))
            .and_then(|line| line.split(&format!("\"{field}\":\"")).nth(1))
            .and_then(|rest| rest.split('"').next())
            .map(str::to_string)
    };
    let rule_of = |id: u64| field_of(id, "rule");
    assert_eq!(
        rule_of(3).as_deref(),
        Some("shell-block-privilege-escalation"),
        "{audit}"
    );
    assert_eq!(rule_of(4).as_deref(), Some("no-forbidden-word"), "{audit}");
    assert_eq!(rule_of(5).as_deref(), Some("no-forbidden-word"), "{audit}");
    // The environment's values never reach the log.
    assert!(!audit.contains("hello from"), "{audit}");
    // Each line names the server that judged it, not the listener.
    let server_of = |id: u64| field_of(id, "server");
    assert_eq!(server_of(4).as_deref(), Some("plain"), "{audit}");
    assert_eq!(server_of(5).as_deref(), Some("guarded"), "{audit}");
}

/// A `url` server gets the bearer token of its `token_file`: the upstream here is a
/// second mcpwall gateway that requires one.
#[cfg(unix)]
#[test]
fn a_url_server_is_sent_the_token_of_its_token_file() {
    // The upstream: `mcpwall serve` in front of the fake server, with a token issued.
    let up_dir = tempfile::tempdir().unwrap();
    let up_home = up_dir.path().join("home");
    std::fs::create_dir_all(&up_home).unwrap();
    let issued = Command::new(env!("CARGO_BIN_EXE_mcpwall"))
        .args(["token", "add", "gateway"])
        .env("HOME", &up_home)
        .output()
        .unwrap();
    assert!(issued.status.success());
    let token = String::from_utf8(issued.stdout).unwrap().trim().to_string();
    let mut upstream = Command::new(env!("CARGO_BIN_EXE_mcpwall"))
        .args(["serve", "--listen", "127.0.0.1:0", "--"])
        .arg(env!("CARGO_BIN_EXE_mcpwall-fake-server"))
        .env("HOME", &up_home)
        .env("FAKE_RECV_LOG", up_dir.path().join("upstream.jsonl"))
        .current_dir(up_dir.path())
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut up_err = BufReader::new(upstream.stderr.take().unwrap());
    let mut line = String::new();
    while !line.contains("serving http://") {
        line.clear();
        assert!(up_err.read_line(&mut line).unwrap() > 0, "upstream exited");
    }
    std::thread::spawn(move || std::io::copy(&mut up_err, &mut std::io::sink()));
    let up_url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .expect("the upstream's URL")
        .to_string();

    let l = Listener::with_policy(|dir| {
        std::fs::write(dir.join("up.token"), format!("{token}\n")).unwrap();
        // Readable by others: used, with a warning.
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir.join("up.token"), std::fs::Permissions::from_mode(0o644))
            .unwrap();
        format!(
            "version: 1\nservers:\n  with-token:\n    url: \"{up_url}\"\n    token_file: \"{}\"\n  without-token:\n    url: \"{up_url}\"\n",
            dir.join("up.token").display()
        )
    });
    assert!(
        l.banner.contains("server `with-token`: the token file")
            && l.banner.contains("can be read by other users (mode 644)"),
        "{}",
        l.banner
    );
    assert!(!l.banner.contains(&token), "{}", l.banner);
    let session = l.initialize("/mcp/with-token");
    let (status, _, body) = l.post(
        "/mcp/with-token",
        Some(&session),
        &call(1, "through-two-gateways"),
    );
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("through-two-gateways"), "{body}");
    // The entry without one is refused by the upstream.
    let (status, _, body) = l.post(
        "/mcp/without-token",
        None,
        &json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}),
    );
    assert!(!body.contains("serverInfo"), "{status} {body}");
    let _ = upstream.kill();
    let _ = upstream.wait();
}

#[test]
fn a_url_servers_token_variable_must_be_set() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.yml");
    std::fs::write(
        &policy,
        "version: 1\nservers:\n  remote:\n    url: \"http://127.0.0.1:9/mcp\"\n    token_env: MCPWALL_TEST_UNSET_TOKEN\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_mcpwall"))
        .args(["serve", "--listen", "127.0.0.1:0", "-c"])
        .arg(&policy)
        .env("HOME", dir.path())
        .env_remove("MCPWALL_TEST_UNSET_TOKEN")
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("server `remote`: $MCPWALL_TEST_UNSET_TOKEN is not set"),
        "{err}"
    );
}

#[test]
fn servers_entries_are_checked_with_diagnostics_pointing_into_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.yml");
    std::fs::write(
        &policy,
        r#"version: 1
servers:
  "bad/name": {command: x}
  both: {command: x, url: "https://example.com/mcp"}
  neither: {args: [a]}
  remote: {url: "ftp://example.com"}
"#,
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_mcpwall"))
        .args(["serve", "--listen", "127.0.0.1:0", "-c"])
        .arg(&policy)
        .env("HOME", dir.path())
        .env("NO_COLOR", "1")
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    for expected in [
        "`bad/name` cannot name a server",
        "server `both` has both `command` and `url`",
        "server `neither` has neither `command` nor `url`",
        "`ftp://example.com` is not an http:// or https:// URL",
        "policy.yml:3:",
    ] {
        assert!(err.contains(expected), "missing {expected:?} in:\n{err}");
    }
}

#[test]
fn explain_policy_names_each_servers_endpoint() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.yml");
    std::fs::write(
        &policy,
        r#"version: 1
servers:
  files: {command: npx, args: [-y, "@modelcontextprotocol/server-filesystem", /tmp]}
  remote: {url: "https://mcp.example.com/mcp", token_env: REMOTE_MCP_TOKEN}
  shell:
    command: shell-mcp
    extends: [servers/shell-mcp]
    env: {SHELL_MCP_KEY: "value-not-for-printing"}
  locked: {command: locked-mcp, extends: [strict]}
"#,
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_mcpwall"))
        .args(["explain-policy", "-c"])
        .arg(&policy)
        .env("HOME", dir.path())
        .current_dir(dir.path())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("files  /mcp/files (legacy SSE: /sse/files)  -> npx -y @modelcontextprotocol/server-filesystem /tmp"),
        "{text}"
    );
    assert!(
        text.contains(
            "remote  /mcp/remote (legacy SSE: /sse/remote)  -> https://mcp.example.com/mcp"
        ),
        "{text}"
    );
    // Per server: the packs it adds, where its token comes from, its variables' names.
    assert!(text.contains("token: from $REMOTE_MCP_TOKEN"), "{text}");
    let shell = text
        .split("shell  /mcp/shell")
        .nth(1)
        .expect("the shell server");
    assert!(
        shell.contains("judged by: the policy above + packs servers/shell-mcp ("),
        "{text}"
    );
    assert!(shell.contains("env: SHELL_MCP_KEY"), "{text}");
    assert!(!text.contains("value-not-for-printing"), "{text}");
    // Settings a server's pack brings are listed with it.
    let locked = text.split("locked  /mcp/locked").nth(1).expect("locked");
    assert!(
        locked.contains("settings the packs set: default_action: Deny"),
        "{text}"
    );
}
