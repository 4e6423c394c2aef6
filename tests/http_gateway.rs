//! `mcpwall serve` (issue 25): the real binary over loopback HTTP in front of
//! `mcpwall-fake-server`, asserting the HTTP exchanges and what the server received; and
//! `tests/interop/http_gateway.py`, the official MCP Python SDK client over Streamable
//! HTTP (and `websocket_gateway.py`, its ClientSession over WebSocket) to server-everything (skipped without the interop dependencies unless
//! `MCPWALL_REQUIRE_INTEROP=1`). Needs `--features test-support`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(60);

/// A fake AWS access key id, built at run time so no secret-looking literal is in the repo.
fn fake_aws_key() -> String {
    format!("AKIA{}", "QZ7XW3NV5TR2KPLM")
}

struct Gateway {
    child: Child,
    addr: String,
    dir: tempfile::TempDir,
}

impl Gateway {
    fn start(settings: &str) -> Gateway {
        Gateway::start_with(settings, "")
    }

    fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }

    fn start_with(settings: &str, rules: &str) -> Gateway {
        Gateway::launch(settings, rules, &[]).0
    }

    /// A gateway whose `tokens` identities were issued (`mcpwall token add`) before it
    /// started; their bearer tokens, in order.
    fn launch(settings: &str, rules: &str, tokens: &[&str]) -> (Gateway, Vec<String>) {
        Gateway::launch_env(settings, rules, tokens, &[])
    }

    /// [`Gateway::launch`] with `server_env` added to the environment the servers inherit.
    fn launch_env(
        settings: &str,
        rules: &str,
        tokens: &[&str],
        server_env: &[(&str, &str)],
    ) -> (Gateway, Vec<String>) {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        std::fs::create_dir_all(&home).unwrap();
        let issued = tokens
            .iter()
            .map(|name| {
                let out = Command::new(env!("CARGO_BIN_EXE_mcpwall"))
                    .args(["token", "add", name])
                    .env("HOME", &home)
                    .output()
                    .unwrap();
                assert!(out.status.success(), "token add {name}");
                String::from_utf8(out.stdout).unwrap().trim().to_string()
            })
            .collect();
        let policy = dir.path().join("policy.yml");
        std::fs::write(
            &policy,
            format!(
                r#"version: 1
settings:
  log_dir: "{}"
{settings}
rules:
  - name: block-ssh
    match:
      method: "*"
      arguments:
        _any_value: {{regex: '\.ssh'}}
    action: deny
{rules}
outbound_rules:
  - name: redact-secrets
    match: {{secrets: true}}
    action: redact
"#,
                dir.path().join("logs").display()
            ),
        )
        .unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_mcpwall"))
            .args(["serve", "--listen", "127.0.0.1:0", "-c"])
            .arg(&policy)
            .args(["--", env!("CARGO_BIN_EXE_mcpwall-fake-server")])
            .env("HOME", &home)
            .env("FAKE_RECV_LOG", dir.path().join("received.jsonl"))
            .envs(server_env.iter().copied())
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stderr = BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        let addr = loop {
            line.clear();
            assert!(
                stderr.read_line(&mut line).unwrap() > 0,
                "mcpwall serve exited"
            );
            if let Some(rest) = line.split("serving http://").nth(1) {
                break rest.split('/').next().unwrap().to_string();
            }
        };
        std::thread::spawn(move || {
            let mut rest = String::new();
            let _ = stderr.read_to_string(&mut rest);
            eprint!("{rest}");
        });
        (Gateway { child, addr, dir }, issued)
    }

    fn received(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("received.jsonl")).unwrap_or_default()
    }

    /// The audit log once a line holds every one of `needles` (the writer lingers).
    fn audit_with(&self, needles: &[&str]) -> String {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let text = self.audit();
            if text.lines().any(|l| needles.iter().all(|n| l.contains(n)))
                || Instant::now() > deadline
            {
                return text;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn audit(&self) -> String {
        let mut text = String::new();
        if let Ok(entries) = std::fs::read_dir(self.dir.path().join("logs")) {
            for e in entries {
                text.push_str(&std::fs::read_to_string(e.unwrap().path()).unwrap_or_default());
            }
        }
        text
    }

    /// One HTTP/1.1 exchange on a fresh connection; the whole response.
    fn send(&self, method: &str, headers: &[(&str, &str)], body: &[u8]) -> Reply {
        let mut stream = TcpStream::connect(&self.addr).unwrap();
        stream.set_read_timeout(Some(WAIT)).unwrap();
        let mut req = format!(
            "{method} /mcp HTTP/1.1\r\nConnection: close\r\nContent-Length: {}\r\n",
            body.len()
        );
        if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
            req.push_str(&format!("Host: {}\r\n", self.addr));
        }
        for (k, v) in headers {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        req.push_str("\r\n");
        stream.write_all(req.as_bytes()).unwrap();
        stream.write_all(body).unwrap();
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).unwrap();
        Reply::parse(&raw)
    }

    fn post(&self, session: Option<&str>, body: &Value, extra: &[(&str, &str)]) -> Reply {
        let mut headers = vec![
            ("Accept", "application/json, text/event-stream"),
            ("Content-Type", "application/json"),
        ];
        if let Some(s) = session {
            headers.push(("Mcp-Session-Id", s));
        }
        headers.extend_from_slice(extra);
        self.send("POST", &headers, body.to_string().as_bytes())
    }

    fn initialize(&self) -> String {
        let r = self.post(
            None,
            &json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}),
            &[],
        );
        assert_eq!(r.status, 200, "{}", r.body);
        assert_eq!(r.header("content-type"), Some("application/json"));
        let session = r
            .header("mcp-session-id")
            .expect("a session id")
            .to_string();
        assert!(session.len() >= 32 && session.bytes().all(|b| (0x21..=0x7e).contains(&b)));
        session
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .arg(self.child.id().to_string())
            .status();
        let deadline = Instant::now() + WAIT;
        while self.child.try_wait().unwrap().is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
    }
}

struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Reply {
    fn parse(raw: &[u8]) -> Reply {
        let text = String::from_utf8_lossy(raw).into_owned();
        let (head, body) = text.split_once("\r\n\r\n").expect("a whole HTTP response");
        let mut lines = head.lines();
        let status = lines
            .next()
            .unwrap()
            .split(' ')
            .nth(1)
            .unwrap()
            .parse()
            .unwrap();
        let headers = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
            .collect::<Vec<_>>();
        let chunked = headers
            .iter()
            .any(|(k, v)| k == "transfer-encoding" && v.contains("chunked"));
        let body = if chunked {
            dechunk(body)
        } else {
            body.to_string()
        };
        Reply {
            status,
            headers,
            body,
        }
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// `(event id, data)` of each SSE event.
    fn events(&self) -> Vec<(String, Value)> {
        self.body
            .split("\n\n")
            .filter(|e| !e.trim().is_empty())
            .map(|e| {
                let id = e
                    .lines()
                    .find_map(|l| l.strip_prefix("id: "))
                    .unwrap_or("")
                    .to_string();
                let data = e.lines().find_map(|l| l.strip_prefix("data: ")).unwrap();
                (id, serde_json::from_str(data).unwrap())
            })
            .collect()
    }
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 {
            break;
        }
        out.push_str(&rest[..n]);
        body = &rest[n + 2..];
    }
    out
}

#[test]
fn messages_before_an_answer_make_its_post_an_sse_stream_that_can_be_resumed() {
    let gw = Gateway::start("");
    let session = gw.initialize();
    let key = fake_aws_key();
    let note = json!({"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":format!("key {key}")}}).to_string();
    let r = gw.post(
        Some(&session),
        &json!({"jsonrpc":"2.0","id":"say-1","method":"fake/say","params":{"lines":[note]}}),
        &[],
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.header("content-type"), Some("text/event-stream"));
    let events = r.events();
    assert_eq!(events.len(), 2, "{}", r.body);
    assert_eq!(events[0].1["method"], "notifications/message");
    let logged = events[0].1["params"]["data"].as_str().unwrap();
    assert!(
        !logged.contains(&key) && logged.contains("[REDACTED BY MCPWALL]"),
        "an SSE event is judged (redacted) before it is sent: {logged}"
    );
    assert_eq!(events[1].1["id"], "say-1");
    let (stream, seq) = events[0].0.split_once('-').unwrap();
    assert_eq!(seq, "1");

    // The client lost the connection after the first event: it resumes with GET.
    let r = gw.send(
        "GET",
        &[
            ("Accept", "text/event-stream"),
            ("Mcp-Session-Id", &session),
            ("Last-Event-ID", &format!("{stream}-1")),
        ],
        b"",
    );
    assert_eq!(r.status, 200);
    let replay = r.events();
    assert_eq!(replay.len(), 1, "{}", r.body);
    assert_eq!(replay[0].0, format!("{stream}-2"));
    assert_eq!(replay[0].1["id"], "say-1");
}

#[test]
fn a_plain_answer_is_json_and_a_denied_call_never_reaches_the_server() {
    let gw = Gateway::start("");
    let session = gw.initialize();
    let r = gw.post(
        Some(&session),
        &json!({"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"read","arguments":{"path":"/home/u/.ssh/id_rsa"}}}),
        &[],
    );
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("application/json"));
    let answer: Value = serde_json::from_str(&r.body).unwrap();
    assert_eq!(answer["id"], 7);
    assert_eq!(answer["error"]["code"], -32001, "{answer}");
    let r = gw.post(
        Some(&session),
        &json!({"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"read","arguments":{"path":"/tmp/ok"}}}),
        &[],
    );
    let answer: Value = serde_json::from_str(&r.body).unwrap();
    assert_eq!(answer["id"], 8);
    assert!(answer.get("result").is_some(), "{answer}");
    let received = gw.received();
    assert!(received.contains("/tmp/ok"), "{received}");
    assert!(!received.contains(".ssh"), "{received}");
    let audit = gw.audit_with(&["\"action\":\"deny\"", "\"transport\":\"http\""]);
    assert!(
        audit
            .lines()
            .any(|l| l.contains("\"action\":\"deny\"") && l.contains("\"transport\":\"http\"")),
        "{audit}"
    );
}

/// Every server a session starts runs in the policy's sandbox: a computed path the rule
/// does not recognise still cannot read the hidden key.
#[test]
fn each_sessions_server_runs_in_the_sandbox() {
    // The fake server's `run_command` runs its command with bash.
    let (gw, _) = Gateway::launch_env(
        "sandbox: {enabled: true, deny_read: [~/.ssh]}",
        "",
        &[],
        &[("FAKE_BASH_TOOL", "1")],
    );
    let key = format!("FAKEKEY{}", std::process::id());
    std::fs::create_dir_all(gw.home().join(".ssh")).unwrap();
    std::fs::write(gw.home().join(".ssh/id_rsa"), &key).unwrap();
    let session = gw.initialize();
    let r = gw.post(
        Some(&session),
        &json!({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"run_command","arguments":{"command":"d=.ss; cat ~/${d}h/id_rsa; echo done"}}}),
        &[],
    );
    let answer: Value = serde_json::from_str(&r.body).unwrap();
    let text = answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.contains("done"), "the command ran: {answer}");
    assert!(!text.contains(&key), "the hidden key was read: {answer}");
    let audit = gw.audit_with(&["mcpwall:sandbox"]);
    assert!(audit.contains("server sandboxed"), "{audit}");
}

#[test]
fn messages_too_large_to_judge_are_refused_whole_in_both_directions() {
    let gw = Gateway::start("  max_frame_bytes: 4096");
    let session = gw.initialize();
    let big = "A".repeat(10_000);
    let r = gw.post(
        Some(&session),
        &json!({"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"echo","arguments":{"text":big}}}),
        &[],
    );
    let answer: Value = serde_json::from_str(&r.body).unwrap();
    assert_eq!(answer["id"], 9, "{answer}");
    assert!(answer.get("error").is_some(), "{answer}");
    assert!(
        !gw.received().contains("AAAAAAAAAA"),
        "no part of the oversize request reached the server"
    );

    let r = gw.post(
        Some(&session),
        &json!({"jsonrpc":"2.0","id":10,"method":"fake/big","params":{"unit":"B","count":10_000}}),
        &[],
    );
    let answer: Value = serde_json::from_str(&r.body).unwrap();
    assert_eq!(answer["id"], 10, "{answer}");
    assert!(answer.get("error").is_some(), "{answer}");
    assert!(
        !r.body.contains("BBBBBBBBBB"),
        "no part of the oversize answer reached the client"
    );
}

#[test]
fn sessions_are_required_checked_and_ended() {
    let gw = Gateway::start("");
    let call = json!({"jsonrpc":"2.0","id":1,"method":"fake/env","params":{"name":"X"}});
    assert_eq!(gw.post(None, &call, &[]).status, 400, "no session id");
    assert_eq!(gw.post(Some("not-a-session"), &call, &[]).status, 404);
    let session = gw.initialize();
    assert_eq!(gw.post(Some(&session), &call, &[]).status, 200);
    let evil = [("Origin", "http://evil.example")];
    assert_eq!(gw.post(Some(&session), &call, &evil).status, 403);
    let r = gw.send(
        "POST",
        &[
            ("Host", "evil.example"),
            ("Accept", "application/json, text/event-stream"),
            ("Content-Type", "application/json"),
            ("Mcp-Session-Id", &session),
        ],
        call.to_string().as_bytes(),
    );
    assert_eq!(r.status, 403, "a DNS-rebound Host");
    let version = [("MCP-Protocol-Version", "2026-07-28")];
    assert_eq!(gw.post(Some(&session), &call, &version).status, 400);
    let note = json!({"jsonrpc":"2.0","method":"notifications/initialized"});
    assert_eq!(gw.post(Some(&session), &note, &[]).status, 202);
    let r = gw.send("DELETE", &[("Mcp-Session-Id", &session)], b"");
    assert_eq!(r.status, 200);
    assert_eq!(
        gw.post(Some(&session), &call, &[]).status,
        404,
        "an ended session"
    );
    assert_eq!(gw.send("PUT", &[], b"").status, 405);
}

#[test]
fn the_sdk_client_over_streamable_http_matches_the_direct_connection() {
    run_interop("http_gateway.py");
}

#[test]
fn the_sdk_client_session_over_websocket_matches_the_direct_connection() {
    run_interop("websocket_gateway.py");
}

/// Run one of `tests/interop`'s scripts against the binary (skipped without the interop
/// dependencies unless `MCPWALL_REQUIRE_INTEROP=1`).
fn run_interop(script: &str) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop");
    let python: PathBuf = dir.join(".venv/bin/python");
    let have = python.exists() && dir.join("node_modules/.bin/mcp-server-everything").exists();
    if !have {
        assert!(
            std::env::var_os("MCPWALL_REQUIRE_INTEROP").is_none(),
            "interop dependencies missing in {} (run .ci/run to install them)",
            dir.display()
        );
        eprintln!("\n!!! SKIPPED {script}: no interop venv or node_modules !!!\n");
        return;
    }
    let mut child = Command::new(&python)
        .arg(dir.join(script))
        .arg(env!("CARGO_BIN_EXE_mcpwall"))
        .current_dir(&dir)
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(300);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("{script} did not finish within 300 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "{script} checks failed: {status:?}");
}

#[test]
fn the_legacy_sse_transport_judges_every_message_and_ends_with_its_stream() {
    let gw = Gateway::start("");
    let mut sse = TcpStream::connect(&gw.addr).unwrap();
    sse.set_read_timeout(Some(WAIT)).unwrap();
    write!(
        sse,
        "GET /sse HTTP/1.1\r\nHost: {}\r\nAccept: text/event-stream\r\n\r\n",
        gw.addr
    )
    .unwrap();
    let mut reader = BufReader::new(sse.try_clone().unwrap());
    let mut seen = String::new();
    // Read until `needle` arrives on the stream (chunked framing lines included).
    let mut read_until = |needle: &str, seen: &mut String| {
        let deadline = Instant::now() + WAIT;
        while !seen.contains(needle) {
            assert!(Instant::now() < deadline, "no {needle:?} in {seen}");
            let mut line = String::new();
            assert!(
                reader.read_line(&mut line).unwrap() > 0,
                "stream closed: {seen}"
            );
            seen.push_str(&line);
        }
    };
    read_until("session_id=", &mut seen);
    read_until("\n\n", &mut seen);
    let endpoint = seen
        .lines()
        .find_map(|l| l.strip_prefix("data: "))
        .unwrap()
        .to_string();
    assert!(endpoint.starts_with("/message?session_id="), "{endpoint}");
    let post = |body: &Value| {
        let mut s = TcpStream::connect(&gw.addr).unwrap();
        s.set_read_timeout(Some(WAIT)).unwrap();
        let body = body.to_string();
        write!(
            s,
            "POST {endpoint} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            gw.addr,
            body.len()
        )
        .unwrap();
        let mut raw = Vec::new();
        s.read_to_end(&mut raw).unwrap();
        Reply::parse(&raw).status
    };
    let denied = json!({"jsonrpc":"2.0","id":"d1","method":"tools/call","params":{"name":"read","arguments":{"path":"/home/u/.ssh/id_rsa"}}});
    assert_eq!(post(&denied), 202);
    read_until("\"d1\"", &mut seen);
    assert!(
        seen.contains("-32001"),
        "the refusal arrives on the stream: {seen}"
    );
    assert!(!gw.received().contains(".ssh"));
    let allowed = json!({"jsonrpc":"2.0","id":"a1","method":"fake/env","params":{"name":"X"}});
    assert_eq!(post(&allowed), 202);
    read_until("\"a1\"", &mut seen);
    // The session ends with its stream.
    drop(reader);
    sse.shutdown(std::net::Shutdown::Both).unwrap();
    drop(sse);
    let deadline = Instant::now() + WAIT;
    loop {
        if post(&allowed) == 404 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the legacy session outlived its stream"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_call_an_ask_rule_holds_waits_for_mcpwall_approve() {
    let gw = std::sync::Arc::new(Gateway::start_with(
        "",
        "  - name: ask-deploy\n    match: {tool: deploy}\n    action: ask",
    ));
    let session = gw.initialize();
    let call = json!({"jsonrpc":"2.0","id":"dep-1","method":"tools/call","params":{"name":"deploy","arguments":{"env":"prod"}}});
    let waiting = {
        let (gw, session) = (gw.clone(), session.clone());
        std::thread::spawn(move || gw.post(Some(&session), &call, &[]))
    };
    let approve = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_mcpwall"))
            .arg("approve")
            .args(args)
            .env("HOME", gw.home())
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let deadline = Instant::now() + WAIT;
    let code = loop {
        let listed = approve(&[]);
        if let Some(code) = listed
            .lines()
            .find_map(|l| l.split_once("  server ").map(|(c, _)| c.trim().to_string()))
        {
            break code;
        }
        assert!(
            Instant::now() < deadline,
            "the held call was not offered: {listed}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(
        !gw.received().contains("dep-1"),
        "nothing reaches the server before approval"
    );
    // No terminal and no --yes: nothing is decided (an agent's shell has no terminal).
    assert!(!approve(&[&code]).contains("Approved"));
    assert!(
        !gw.received().contains("dep-1"),
        "a call was approved without a terminal or --yes"
    );
    assert!(approve(&["--yes", &code]).contains("Approved"));
    let r = waiting.join().unwrap();
    let answer: Value = serde_json::from_str(&r.body).unwrap();
    assert_eq!(answer["id"], "dep-1");
    assert!(answer.get("result").is_some(), "{answer}");
    assert!(
        gw.received().contains("dep-1"),
        "the approved call reached the server"
    );
}

/// A user allow rule that matches what a built-in deny rule exists to stop is reported at
/// start-up, as the stdio proxy does: the user learns the built-in rule still applies.
#[test]
fn an_allow_rule_shadowing_a_builtin_deny_is_reported_at_start() {
    let startup = |rules: &str| {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        std::fs::create_dir_all(&home).unwrap();
        let policy = dir.path().join("policy.yml");
        std::fs::write(&policy, format!("version: 1\nextends: [default]\n{rules}")).unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_mcpwall"))
            .args(["serve", "--listen", "127.0.0.1:0", "-c"])
            .arg(&policy)
            .args(["--", env!("CARGO_BIN_EXE_mcpwall-fake-server")])
            .env("HOME", &home)
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stderr = BufReader::new(child.stderr.take().unwrap());
        let (mut line, mut before) = (String::new(), String::new());
        while stderr.read_line(&mut line).unwrap() > 0 && !line.contains("serving http://") {
            before.push_str(&line);
            line.clear();
        }
        let _ = child.kill();
        let _ = child.wait();
        assert!(
            line.contains("serving http://"),
            "serve did not start: {before}"
        );
        before
    };
    let quiet = startup("");
    assert!(!quiet.contains("your allow rule"), "{quiet}");
    let shadowing =
        startup("rules:\n  - name: any-read\n    match: {tool: read_file}\n    action: allow\n");
    assert!(
        shadowing.contains("your allow rule \"any-read\"") && shadowing.contains("block-ssh-keys"),
        "{shadowing}"
    );
}

/// A 2026-07-28 request with the headers the revision requires.
fn modern(gw: &Gateway, token: &str, id: Value, method: &str, mut params: Value) -> Reply {
    let mut meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": {}});
    if let Some(Value::Object(extra)) = params.get("_meta") {
        for (k, v) in extra {
            meta[k] = v.clone();
        }
    }
    params["_meta"] = meta;
    let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    let bearer = format!("Bearer {token}");
    let mut headers = vec![
        ("Accept", "application/json, text/event-stream"),
        ("Content-Type", "application/json"),
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", method),
        ("Authorization", &bearer),
    ];
    let name = params["name"].as_str().unwrap_or_default().to_string();
    if method == "tools/call" {
        headers.push(("Mcp-Name", &name));
    }
    gw.send("POST", &headers, body.to_string().as_bytes())
}

fn answer(r: &Reply) -> Value {
    if r.header("content-type") == Some("text/event-stream") {
        return r.events().pop().expect("an answer").1;
    }
    serde_json::from_str(&r.body).unwrap_or_else(|_| panic!("{} {}", r.status, r.body))
}

/// Lines of what the server processes received with `needle`.
fn received_with(gw: &Gateway, needle: &str) -> usize {
    gw.received().lines().filter(|l| l.contains(needle)).count()
}

#[test]
fn stateless_clients_are_served_per_identity_through_the_same_judging() {
    let (gw, tokens) = Gateway::launch(
        "",
        r#"  - name: ci-no-wipe
    match: {tool: wipe, identity: "ci-*"}
    action: deny
"#,
        &["alice", "ci-bob"],
    );
    let (alice, bob) = (&tokens[0], &tokens[1]);
    let init_marker = "mcpwall (for stateless clients)";

    // server/discover: the versions served, the server's capabilities.
    let r = modern(&gw, alice, json!("d"), "server/discover", json!({}));
    assert_eq!(r.status, 200, "{}", r.body);
    let d = answer(&r);
    assert_eq!(d["id"], "d");
    let versions = d["result"]["supportedVersions"].as_array().unwrap();
    assert_eq!(versions[0], "2026-07-28");
    assert!(versions.contains(&json!("2025-11-25")));
    assert_eq!(
        received_with(&gw, init_marker),
        1,
        "the gateway initialised alice's server"
    );

    // An allowed call: forwarded with the gateway's id and without the revision's _meta;
    // the answer carries the client's id.
    let r = modern(
        &gw,
        alice,
        json!(1),
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "hello-modern"}}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.header("content-type"), Some("application/json"));
    let a = answer(&r);
    assert_eq!(a["id"], 1, "{a}");
    assert_eq!(a["result"]["resultType"], "complete");
    assert_eq!(a["result"]["params"]["arguments"]["text"], "hello-modern");
    let forwarded = gw.received();
    let line = forwarded
        .lines()
        .find(|l| l.contains("hello-modern"))
        .unwrap();
    assert!(line.contains(r#""id":"mcpwall-"#), "{line}");
    assert!(!line.contains("io.modelcontextprotocol"), "{line}");
    assert!(!forwarded.contains("2026-07-28"), "{forwarded}");

    // A denied call never reaches the server.
    let r = modern(
        &gw,
        alice,
        json!(2),
        "tools/call",
        json!({"name": "read", "arguments": {"path": "/home/u/.ssh/id_rsa"}}),
    );
    let a = answer(&r);
    assert_eq!(
        (a["id"].clone(), a["error"]["code"].clone()),
        (json!(2), json!(-32001)),
        "{a}"
    );
    assert!(!gw.received().contains(".ssh"));

    // A secret in what the server says is redacted; the log message the request asked
    // for comes on its SSE response, before the answer.
    let key = fake_aws_key();
    let note = json!({"jsonrpc":"2.0","method":"notifications/message",
        "params":{"level":"info","data":format!("key {key}")}})
    .to_string();
    let r = modern(
        &gw,
        alice,
        json!("say"),
        "fake/say",
        json!({"lines": [note],
        "_meta": {"io.modelcontextprotocol/logLevel": "info"}}),
    );
    assert_eq!(
        r.header("content-type"),
        Some("text/event-stream"),
        "{}",
        r.body
    );
    let events = r.events();
    assert_eq!(events.len(), 2, "{}", r.body);
    assert_eq!(events[0].1["method"], "notifications/message");
    assert!(
        events[0].0.is_empty(),
        "no event ids in the stateless revision"
    );
    assert_eq!(events[1].1["id"], "say");
    assert!(
        !r.body.contains(&key) && r.body.contains("[REDACTED BY MCPWALL]"),
        "{}",
        r.body
    );
    let r = modern(
        &gw,
        alice,
        json!(3),
        "fake/echo",
        json!({"note": format!("k {key}")}),
    );
    assert!(!r.body.contains(&key), "{}", r.body);

    // The server's sampling request cannot reach a stateless client: the gateway answers it.
    let sampling = json!({"jsonrpc":"2.0","id":"s-1","method":"sampling/createMessage",
        "params":{"messages":[],"maxTokens":1}})
    .to_string();
    let r = modern(
        &gw,
        alice,
        json!(4),
        "fake/say",
        json!({"lines": [sampling]}),
    );
    assert_eq!(answer(&r)["id"], 4);
    let deadline = Instant::now() + WAIT;
    while received_with(&gw, "sampling/createMessage cannot reach the client") == 0 {
        assert!(Instant::now() < deadline, "{}", gw.received());
        std::thread::sleep(Duration::from_millis(20));
    }

    // Two requests of one identity in flight at once, with the same client id: each
    // gets its own answer.
    std::thread::scope(|s| {
        let held = s.spawn(|| modern(&gw, alice, json!(9), "fake/hold", json!({})));
        let deadline = Instant::now() + WAIT;
        while received_with(&gw, "fake/hold") == 0 {
            assert!(Instant::now() < deadline);
            std::thread::sleep(Duration::from_millis(20));
        }
        let released = answer(&modern(&gw, alice, json!(9), "fake/release", json!({})));
        let held = answer(&held.join().unwrap());
        assert_eq!(held["id"], 9);
        assert_eq!(held["result"]["released"], true, "{held}");
        assert_eq!(released["id"], 9);
        assert!(released["result"].get("released").is_none(), "{released}");
    });

    // ci-bob: his own server (a second initialize), his identity's rules; alice's
    // rules and held requests are not his.
    let r = modern(
        &gw,
        bob,
        json!(1),
        "tools/call",
        json!({"name": "wipe", "arguments": {"n": "bob-wipe"}}),
    );
    assert_eq!(answer(&r)["error"]["code"], -32001, "{}", r.body);
    assert_eq!(received_with(&gw, init_marker), 2, "bob has his own server");
    let r = modern(
        &gw,
        alice,
        json!(5),
        "tools/call",
        json!({"name": "wipe", "arguments": {"n": "alice-wipe"}}),
    );
    assert!(answer(&r).get("result").is_some(), "{}", r.body);
    assert!(gw.received().contains("alice-wipe") && !gw.received().contains("bob-wipe"));
    std::thread::scope(|s| {
        let bobs_hold = s.spawn(|| modern(&gw, bob, json!(7), "fake/hold", json!({})));
        let deadline = Instant::now() + WAIT;
        while received_with(&gw, "fake/hold") < 2 {
            assert!(Instant::now() < deadline);
            std::thread::sleep(Duration::from_millis(20));
        }
        let alices = answer(&modern(&gw, alice, json!(8), "fake/release", json!({})));
        assert!(
            alices["result"].get("released").is_none(),
            "alice's release reached only her server"
        );
        assert!(!bobs_hold.is_finished());
        answer(&modern(&gw, bob, json!(8), "fake/release", json!({})));
        assert_eq!(
            answer(&bobs_hold.join().unwrap())["result"]["released"],
            true
        );
    });
    let audit = gw.audit_with(&["ci-no-wipe", "\"identity\":\"ci-bob\""]);
    assert!(
        audit
            .lines()
            .any(|l| l.contains("ci-no-wipe") && l.contains("\"identity\":\"ci-bob\"")),
        "{audit}"
    );

    // The server dies: the request gets an error, the next one a new server.
    let r = modern(&gw, alice, json!(10), "fake/exit", json!({"code": 3}));
    assert!(answer(&r).get("error").is_some(), "{}", r.body);
    let r = modern(
        &gw,
        alice,
        json!(11),
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "after-exit"}}),
    );
    assert_eq!(
        answer(&r)["result"]["params"]["arguments"]["text"],
        "after-exit",
        "{}",
        r.body
    );
    assert_eq!(
        received_with(&gw, init_marker),
        3,
        "alice's server was started again"
    );

    // Headers that say something else than the body: refused before anything.
    let bearer = format!("Bearer {alice}");
    let body = json!({"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"wipe",
        "arguments":{"n":"mismatch"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",
        "io.modelcontextprotocol/clientCapabilities":{}}}});
    let r = gw.send(
        "POST",
        &[
            ("Accept", "application/json, text/event-stream"),
            ("Content-Type", "application/json"),
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", "echo"),
            ("Authorization", &bearer),
        ],
        body.to_string().as_bytes(),
    );
    assert_eq!(r.status, 400);
    assert_eq!(answer(&r)["error"]["code"], -32020);
    assert!(!gw.received().contains("mismatch"));
    let r = gw.send(
        "POST",
        &[
            ("Content-Type", "text/plain"),
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", "wipe"),
            ("Authorization", &bearer),
        ],
        body.to_string().as_bytes(),
    );
    assert_eq!(r.status, 415);
    for method in ["GET", "DELETE"] {
        let r = gw.send(
            method,
            &[
                ("MCP-Protocol-Version", "2026-07-28"),
                ("Authorization", &bearer),
            ],
            b"",
        );
        assert_eq!(r.status, 405, "{method}");
    }
    // No token: 401, and nothing started.
    let r = gw.send(
        "POST",
        &[
            ("Content-Type", "application/json"),
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", "wipe"),
        ],
        body.to_string().as_bytes(),
    );
    assert_eq!(r.status, 401);

    // The session-based era on the same listener.
    let r = gw.post(
        None,
        &json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
        "protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}),
        &[("Authorization", &bearer)],
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let session = r.header("mcp-session-id").unwrap().to_string();
    let r = gw.post(
        Some(&session),
        &json!({"jsonrpc":"2.0","id":1,"method":"tools/call",
        "params":{"name":"echo","arguments":{"text":"old-era"}}}),
        &[("Authorization", &bearer)],
    );
    assert_eq!(
        answer(&r)["result"]["params"]["arguments"]["text"],
        "old-era"
    );
}

#[test]
fn a_listen_stream_carries_the_change_notifications_it_opted_in_to() {
    let gw = Gateway::start("");
    let mut next_event = open_listen(
        &gw,
        "sub-1",
        json!({"toolsListChanged": true, "promptsListChanged": true}),
    );
    let ack = next_event().expect("the acknowledgement");
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
    assert_eq!(
        ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        "sub-1"
    );
    // The fake server offers tools.listChanged only.
    assert_eq!(
        ack["params"]["notifications"],
        json!({"toolsListChanged": true})
    );

    let lines = [
        json!({"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"file:///x"}}).to_string(),
        json!({"jsonrpc":"2.0","method":"notifications/tools/list_changed"}).to_string(),
    ];
    let r = modern(&gw, "", json!(1), "fake/say", json!({"lines": lines}));
    assert_eq!(answer(&r)["id"], 1, "{}", r.body);
    let changed = next_event().expect("the tools list change");
    assert_eq!(
        changed["method"], "notifications/tools/list_changed",
        "{changed}"
    );
    assert_eq!(
        changed["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        "sub-1"
    );

    // The server exits: the subscription is answered, and the stream ends.
    modern(&gw, "", json!(2), "fake/exit", json!({"code": 0}));
    let end = next_event().expect("the end of the subscription");
    assert_eq!(end["id"], "sub-1", "{end}");
    assert_eq!(end["result"]["resultType"], "complete");
    assert!(next_event().is_none());
}

/// Opens a `subscriptions/listen` stream on `gw` asking for `notifications`; a reader of
/// its SSE events' data.
fn open_listen(gw: &Gateway, id: &str, notifications: Value) -> impl FnMut() -> Option<Value> {
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}});
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "subscriptions/listen",
        "params": {"_meta": meta, "notifications": notifications}})
    .to_string();
    let mut stream = TcpStream::connect(&gw.addr).unwrap();
    stream.set_read_timeout(Some(WAIT)).unwrap();
    write!(
        stream,
        "POST /mcp HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nContent-Length: {}\r\n\
         Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\n\
         MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: subscriptions/listen\r\n\r\n{body}",
        gw.addr,
        body.len()
    )
    .unwrap();
    let mut reader = BufReader::new(stream);
    move || {
        let mut line = String::new();
        loop {
            line.clear();
            if reader.read_line(&mut line).unwrap() == 0 {
                return None;
            }
            if let Some(data) = line.trim_end().strip_prefix("data: ") {
                return Some(serde_json::from_str(data).unwrap());
            }
        }
    }
}

#[test]
fn a_listen_stream_gets_the_updates_of_the_resources_it_subscribed_to() {
    let gw = Gateway::start("");
    let mut next_event = open_listen(
        &gw,
        "sub-r",
        json!({"resourceSubscriptions":
            ["file:///a", "file:///b", "file:///a", "file:///home/u/.ssh/id_rsa"]}),
    );
    let ack = next_event().expect("the acknowledgement");
    // The policy's block-ssh rule refuses the last, as it would a client's subscribe.
    assert_eq!(
        ack["params"]["notifications"],
        json!({"resourceSubscriptions": ["file:///a", "file:///b"]}),
        "{ack}"
    );
    // The gateway subscribed on the server, once per resource, as a client would.
    assert_eq!(received_with(&gw, "\"resources/subscribe\""), 2);
    assert!(!gw.received().contains(".ssh"));

    let updated = |uri: &str| {
        json!({"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri": uri}})
            .to_string()
    };
    let r = modern(
        &gw,
        "",
        json!(1),
        "fake/say",
        json!({"lines": [updated("file:///c"), updated("file:///b")]}),
    );
    assert_eq!(answer(&r)["id"], 1, "{}", r.body);
    // Only the resource it asked for, tagged with its subscription.
    let event = next_event().expect("the update of file:///b");
    assert_eq!(
        event["method"], "notifications/resources/updated",
        "{event}"
    );
    assert_eq!(event["params"]["uri"], "file:///b", "{event}");
    assert_eq!(
        event["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        "sub-r"
    );

    // The stream is closed: the next update of its resource ends the subscription.
    drop(next_event);
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut n = 2;
    while received_with(&gw, "\"resources/unsubscribe\"") == 0 {
        assert!(
            Instant::now() < deadline,
            "no resources/unsubscribe: {}",
            gw.received()
        );
        modern(
            &gw,
            "",
            json!(n),
            "fake/say",
            json!({"lines": [updated("file:///a")]}),
        );
        n += 1;
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(gw.received().contains("file:///a"));
}

#[test]
fn a_server_request_mid_call_reaches_a_stateless_client_as_input_required() {
    let (gw, tokens) = Gateway::launch("", "", &["alice", "bob"]);
    let can_sample = json!({"io.modelcontextprotocol/clientCapabilities": {"sampling": {}}});
    let r = modern(
        &gw,
        &tokens[0],
        json!(1),
        "tools/call",
        json!({"name": "ask", "arguments": {}, "_meta": can_sample}),
    );
    let first = answer(&r);
    assert_eq!(first["id"], 1, "{first}");
    assert_eq!(first["result"]["resultType"], "input_required", "{first}");
    assert_eq!(
        first["result"]["inputRequests"]["input-1"]["method"],
        "sampling/createMessage"
    );
    let state = first["result"]["requestState"]
        .as_str()
        .unwrap()
        .to_string();
    let sampled = json!({"input-1": {"role": "assistant", "model": "m", "stopReason": "endTurn",
        "content": {"type": "text", "text": "blue"}}});
    let retry = |token: &str, id: u64, name: &str| {
        modern(
            &gw,
            token,
            json!(id),
            "tools/call",
            json!({"name": name, "arguments": {}, "_meta": can_sample,
                   "requestState": state, "inputResponses": sampled}),
        )
    };
    // Another identity cannot resume it, nor can a different request.
    for r in [retry(&tokens[1], 2, "ask"), retry(&tokens[0], 3, "other")] {
        assert_eq!(r.status, 400, "{}", r.body);
        assert_eq!(answer(&r)["error"]["code"], -32602, "{}", r.body);
    }
    // The retry: the client's answer goes to the server, and the call's answer comes back.
    let r = retry(&tokens[0], 4, "ask");
    let done = answer(&r);
    assert_eq!(done["id"], 4, "{done}");
    assert_eq!(done["result"]["resultType"], "complete", "{done}");
    assert!(
        done["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("blue"),
        "{done}"
    );
    // A request state is used once.
    assert_eq!(retry(&tokens[0], 5, "ask").status, 400);
    // A client that cannot sample is not asked: the server's request is refused for it.
    let r = modern(
        &gw,
        &tokens[0],
        json!(6),
        "tools/call",
        json!({"name": "ask", "arguments": {}}),
    );
    let refused = answer(&r);
    assert_eq!(refused["result"]["resultType"], "complete", "{refused}");
    assert_eq!(refused["result"]["content"][0]["text"], "null", "{refused}");
}

#[test]
fn a_stateless_client_that_goes_away_cancels_its_request() {
    let gw = Gateway::start("");
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}});
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "fake/hold", "params": {"_meta": meta}})
        .to_string();
    let mut stream = TcpStream::connect(&gw.addr).unwrap();
    write!(
        stream,
        "POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Length: {}\r\n\
         Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\n\
         MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: fake/hold\r\n\r\n{body}",
        gw.addr,
        body.len()
    )
    .unwrap();
    let deadline = Instant::now() + WAIT;
    while received_with(&gw, "fake/hold") == 0 {
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(stream);
    while received_with(&gw, "notifications/cancelled") == 0 {
        assert!(Instant::now() < deadline, "{}", gw.received());
        std::thread::sleep(Duration::from_millis(20));
    }
    let held = gw.received();
    let id = held.lines().find(|l| l.contains("fake/hold")).unwrap();
    let id: Value = serde_json::from_str(id).unwrap();
    let cancel = held
        .lines()
        .find(|l| l.contains("notifications/cancelled"))
        .unwrap();
    let cancel: Value = serde_json::from_str(cancel).unwrap();
    assert_eq!(cancel["params"]["requestId"], id["id"]);
}

// ---- The WebSocket endpoint (`/ws`) and the circuit breaker per identity ----

use tokio_tungstenite::tungstenite::{
    self, Message, client::IntoClientRequest, protocol::frame::coding::CloseCode,
};

type Socket = tungstenite::WebSocket<TcpStream>;

impl Gateway {
    /// Open `/ws` with `headers`; `Err(status)` when the upgrade is refused.
    fn websocket(&self, headers: &[(&str, &str)]) -> Result<Socket, u16> {
        let stream = TcpStream::connect(&self.addr).unwrap();
        stream.set_read_timeout(Some(WAIT)).unwrap();
        let mut req = format!("ws://{}/ws", self.addr)
            .into_client_request()
            .unwrap();
        req.headers_mut()
            .insert("Sec-WebSocket-Protocol", "mcp".parse().unwrap());
        for (k, v) in headers {
            let name = http_header::HeaderName::from_bytes(k.as_bytes()).unwrap();
            req.headers_mut()
                .insert(name, v.parse::<http_header::HeaderValue>().unwrap());
        }
        match tungstenite::client(req, stream) {
            Ok((socket, response)) => {
                assert_eq!(
                    response
                        .headers()
                        .get("sec-websocket-protocol")
                        .map(|v| v.to_str().unwrap()),
                    Some("mcp")
                );
                Ok(socket)
            }
            Err(tungstenite::HandshakeError::Failure(tungstenite::Error::Http(r))) => {
                Err(r.status().as_u16())
            }
            Err(e) => panic!("WebSocket handshake: {e}"),
        }
    }

    /// The server processes `mcpwall serve` has running (Linux: `/proc/PID/task/*/children`).
    fn servers(&self) -> Vec<String> {
        let mut out = Vec::new();
        let tasks = format!("/proc/{}/task", self.child.id());
        for t in std::fs::read_dir(tasks).unwrap() {
            let text =
                std::fs::read_to_string(t.unwrap().path().join("children")).unwrap_or_default();
            out.extend(text.split_whitespace().map(str::to_string));
        }
        out
    }

    /// Wait until no server process is left, or fail.
    fn wait_no_servers(&self, what: &str) {
        let deadline = Instant::now() + WAIT;
        while !self.servers().is_empty() {
            assert!(Instant::now() < deadline, "{what}: {:?}", self.servers());
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

use tokio_tungstenite::tungstenite::http as http_header;

/// Send one JSON-RPC message and read text messages until the answer to `id`.
fn ws_call(socket: &mut Socket, msg: &Value) -> Value {
    socket.send(Message::text(msg.to_string())).unwrap();
    loop {
        match socket.read().unwrap() {
            Message::Text(t) => {
                let v: Value = serde_json::from_str(t.as_str()).unwrap();
                if v.get("id") == msg.get("id") && v.get("method").is_none() {
                    return v;
                }
            }
            Message::Close(c) => panic!("closed while waiting for {msg}: {c:?}"),
            _ => {}
        }
    }
}

/// Read until the server's close frame; its code.
fn ws_close_code(socket: &mut Socket) -> Option<CloseCode> {
    loop {
        match socket.read() {
            Ok(Message::Close(c)) => return c.map(|c| c.code),
            Ok(_) => {}
            Err(e) => panic!("no close frame: {e}"),
        }
    }
}

fn initialize_msg() -> Value {
    json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}})
}

#[test]
fn the_websocket_endpoint_judges_every_message_both_ways() {
    let gw = Gateway::start("");
    let mut ws = gw.websocket(&[]).unwrap();
    let init = ws_call(&mut ws, &initialize_msg());
    assert!(init.get("result").is_some(), "{init}");
    ws.send(Message::text(
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    ))
    .unwrap();
    // A message split over lines is still one message to the server.
    let denied = "{\"jsonrpc\":\"2.0\",\"id\":7,\n\"method\":\"tools/call\",\"params\":{\"name\":\"read\",\"arguments\":{\"path\":\"/home/u/.ssh/id_rsa\"}}}";
    ws.send(Message::text(denied)).unwrap();
    let answer = ws_call(
        &mut ws,
        &json!({"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"read","arguments":{"path":"/tmp/ok"}}}),
    );
    assert!(answer.get("result").is_some(), "{answer}");
    let received = gw.received();
    assert!(received.contains("/tmp/ok"), "{received}");
    assert!(
        !received.contains(".ssh"),
        "the denied call never reached the server"
    );
    // The refusal of 7 came before the answer to 8 (one stream, in order): ask again
    // for it as a fresh call to check its shape.
    let refusal = ws_call(
        &mut ws,
        &json!({"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"read","arguments":{"path":"/root/.ssh/x"}}}),
    );
    assert_eq!(refusal["error"]["code"], -32001, "{refusal}");
    // A secret the server sends back is redacted before the client sees it.
    let key = fake_aws_key();
    let echoed = ws_call(
        &mut ws,
        &json!({"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"echo","arguments":{"text":format!("key {key}")}}}),
    );
    assert!(echoed.get("result").is_some(), "{echoed}");
    assert!(!echoed.to_string().contains(&key), "{echoed}");
    assert!(
        gw.received().contains(&key),
        "the request itself was allowed"
    );
    // Pings are answered.
    ws.send(Message::Ping(b"p".to_vec().into())).unwrap();
    loop {
        if let Message::Pong(p) = ws.read().unwrap() {
            assert_eq!(&p[..], b"p");
            break;
        }
    }
    let audit = gw.audit_with(&["\"action\":\"deny\"", "\"transport\":\"websocket\""]);
    assert!(
        audit.lines().any(
            |l| l.contains("\"action\":\"deny\"") && l.contains("\"transport\":\"websocket\"")
        ),
        "{audit}"
    );
    assert!(!audit.contains(&key));
}

/// A `serve` session learns the client's roots as a stdio proxy does: mcpwall asks over
/// the session's own stream, the answer stays with mcpwall, and from then on "outside the
/// project" means outside the roots, not outside the directory `serve` started in.
#[test]
fn a_sessions_project_is_its_clients_roots() {
    let rules = "  - name: writes-outside-project\n    match:\n      method: \"*\"\n      tool: write_file\n      arguments:\n        path: {not_under: \"${PROJECT_DIR}\"}\n    action: deny\n";
    let gw = Gateway::start_with("", rules);
    let start = gw.dir.path().canonicalize().unwrap();
    let (proj, other) = (start.join("proj"), start.join("other"));
    let write = |id: u32, dir: &Path| json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":"write_file","arguments":{"path":dir.join("f.txt"),"content":"x"}}});
    let mut ws = gw.websocket(&[]).unwrap();
    let init = ws_call(
        &mut ws,
        &json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"roots":{"listChanged":true}},"clientInfo":{"name":"t","version":"0"}}}),
    );
    assert!(init.get("result").is_some(), "{init}");
    ws.send(Message::text(
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    ))
    .unwrap();
    let asked = loop {
        if let Message::Text(t) = ws.read().unwrap() {
            let v: Value = serde_json::from_str(t.as_str()).unwrap();
            if v["method"] == "roots/list" {
                break v;
            }
        }
    };
    assert!(
        asked["id"].as_str().unwrap().starts_with("mcpwall-roots-"),
        "{asked}"
    );
    ws.send(Message::text(
        json!({"jsonrpc":"2.0","id":asked["id"],"result":{"roots":[{"uri":format!("file://{}", proj.display())}]}})
            .to_string(),
    ))
    .unwrap();
    let inside = ws_call(&mut ws, &write(1, &proj));
    assert!(inside.get("result").is_some(), "{inside}");
    // Inside the directory `serve` started in, but outside the client's roots.
    let outside = ws_call(&mut ws, &write(2, &other));
    assert_eq!(
        outside["error"]["data"]["rule"], "writes-outside-project",
        "{outside}"
    );
    let received = gw.received();
    assert!(!received.contains("mcpwall-roots"), "{received}");
    assert!(
        !received.contains(&other.display().to_string()),
        "{received}"
    );
}

#[test]
fn websocket_upgrades_need_a_token_and_a_local_origin_and_spawn_nothing_otherwise() {
    let (gw, tokens) = Gateway::launch("", "", &["alice"]);
    let alice = format!("Bearer {}", tokens[0]);
    assert_eq!(gw.websocket(&[]).err(), Some(401), "no token");
    assert_eq!(
        gw.websocket(&[("Authorization", "Bearer mcpwall_not-a-token")])
            .err(),
        Some(401),
        "an unknown token"
    );
    assert_eq!(
        gw.websocket(&[("Authorization", &alice), ("Origin", "http://evil.example")])
            .err(),
        Some(403),
        "a foreign Origin"
    );
    assert!(
        gw.servers().is_empty(),
        "a refused upgrade spawned a server"
    );
    assert!(gw.received().is_empty());
    let audit = gw.audit_with(&["mcpwall:unauthenticated"]);
    assert!(audit.contains("mcpwall:unauthenticated"), "{audit}");
    // A plain GET on /ws is not an upgrade.
    let mut s = TcpStream::connect(&gw.addr).unwrap();
    write!(
        s,
        "GET /ws HTTP/1.1\r\nHost: {}\r\nAuthorization: {alice}\r\nConnection: close\r\n\r\n",
        gw.addr
    )
    .unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    assert_eq!(Reply::parse(&raw).status, 400);
    assert!(gw.servers().is_empty());
    let mut ws = gw.websocket(&[("Authorization", &alice)]).unwrap();
    assert!(ws_call(&mut ws, &initialize_msg()).get("result").is_some());
}

#[test]
fn websocket_messages_too_large_or_binary_are_refused_whole() {
    let gw = Gateway::start("  max_frame_bytes: 4096");
    let mut ws = gw.websocket(&[]).unwrap();
    ws_call(&mut ws, &initialize_msg());
    // Too large from the server: an error answer, no part of it forwarded.
    let answer = ws_call(
        &mut ws,
        &json!({"jsonrpc":"2.0","id":10,"method":"fake/big","params":{"unit":"B","count":10_000}}),
    );
    assert!(answer.get("error").is_some(), "{answer}");
    assert!(!answer.to_string().contains("BBBBBBBBBB"));
    // Too large from the client: the socket closes with 1008 (policy violation).
    let big = json!({"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"echo","arguments":{"text":"A".repeat(10_000)}}});
    ws.send(Message::text(big.to_string())).unwrap();
    assert_eq!(ws_close_code(&mut ws), Some(CloseCode::Policy));
    assert!(!gw.received().contains("AAAAAAAAAA"));
    let audit = gw.audit_with(&["\"transport\":\"websocket\"", "\"action\":\"deny\""]);
    assert!(audit.contains("\"transport\":\"websocket\""), "{audit}");
    // Binary: closed with 1003 (unsupported data), nothing forwarded.
    let mut ws = gw.websocket(&[]).unwrap();
    ws_call(&mut ws, &initialize_msg());
    let binary =
        json!({"jsonrpc":"2.0","id":12,"method":"fake/env","params":{"name":"BINARY_SENT"}});
    ws.send(Message::binary(binary.to_string().into_bytes()))
        .unwrap();
    assert_eq!(ws_close_code(&mut ws), Some(CloseCode::Unsupported));
    assert!(!gw.received().contains("BINARY_SENT"));
}

#[test]
fn closing_the_websocket_ends_its_server() {
    let gw = Gateway::start("");
    let mut ws = gw.websocket(&[]).unwrap();
    ws_call(&mut ws, &initialize_msg());
    assert_eq!(gw.servers().len(), 1, "one server for the socket");
    ws.close(None).unwrap();
    let _ = ws.read();
    drop(ws);
    gw.wait_no_servers("the server outlived its socket");
    // A socket dropped without a close frame too.
    let mut ws = gw.websocket(&[]).unwrap();
    ws_call(&mut ws, &initialize_msg());
    assert_eq!(gw.servers().len(), 1);
    ws.get_mut().shutdown(std::net::Shutdown::Both).unwrap();
    drop(ws);
    gw.wait_no_servers("the server outlived its dropped socket");
}

#[test]
fn the_circuit_breaker_counts_per_identity_across_its_sessions_and_transports() {
    let (gw, tokens) = Gateway::launch(
        "  circuit_breaker: {max_violations: 2, window_seconds: 600, action: suspend}",
        "",
        &["alice", "bob"],
    );
    let alice = format!("Bearer {}", tokens[0]);
    let bob = format!("Bearer {}", tokens[1]);
    let open = |auth: &str| {
        let r = gw.post(None, &initialize_msg(), &[("Authorization", auth)]);
        assert_eq!(r.status, 200, "{}", r.body);
        r.header("mcp-session-id").unwrap().to_string()
    };
    let call = |session: &str, auth: &str, id: u32, path: &str| -> Value {
        let r = gw.post(
            Some(session),
            &json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":"read","arguments":{"path":path}}}),
            &[("Authorization", auth)],
        );
        assert_eq!(r.status, 200, "{}", r.body);
        serde_json::from_str(&r.body).unwrap()
    };
    let a1 = open(&alice);
    let a2 = open(&alice);
    let b1 = open(&bob);
    assert!(call(&a2, &alice, 1, "/tmp/before").get("result").is_some());
    // Two violations in alice's first session trip the breaker...
    assert!(call(&a1, &alice, 2, "/x/.ssh/a").get("error").is_some());
    assert!(call(&a1, &alice, 3, "/x/.ssh/b").get("error").is_some());
    // ...which suspends her other session, a new one, and her WebSocket session.
    let r = call(&a2, &alice, 4, "/tmp/after-a2");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("suspended"),
        "{r}"
    );
    // The agent is not told that a new session would end it: it would not.
    let message = r["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("identity is suspended") && !message.contains("restart the MCP client"),
        "{r}"
    );
    let a3 = open(&alice);
    let r = call(&a3, &alice, 5, "/tmp/after-a3");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("suspended"),
        "{r}"
    );
    let mut ws = gw.websocket(&[("Authorization", &alice)]).unwrap();
    ws_call(&mut ws, &initialize_msg());
    let r = ws_call(
        &mut ws,
        &json!({"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"read","arguments":{"path":"/tmp/after-ws"}}}),
    );
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("suspended"),
        "{r}"
    );
    // Bob is not affected.
    assert!(call(&b1, &bob, 7, "/tmp/bob").get("result").is_some());
    let received = gw.received();
    assert!(received.contains("/tmp/before") && received.contains("/tmp/bob"));
    assert!(!received.contains("/tmp/after"), "{received}");
    let audit = gw.audit_with(&["mcpwall:circuit_breaker", "alice"]);
    assert!(
        audit
            .lines()
            .any(|l| l.contains("mcpwall:circuit_breaker") && l.contains("\"alice\"")),
        "{audit}"
    );
}

#[test]
fn a_request_reusing_an_id_in_flight_is_refused_by_the_session_and_audited() {
    let gw = Gateway::start("");
    let session = gw.initialize();
    let call = |method: &str| json!({"jsonrpc": "2.0", "id": 9, "method": method, "params": {}});
    std::thread::scope(|s| {
        let held = s.spawn(|| gw.post(Some(&session), &call("fake/hold"), &[]));
        let deadline = Instant::now() + WAIT;
        while !gw.received().contains("fake/hold") {
            assert!(Instant::now() < deadline, "{}", gw.received());
            std::thread::sleep(Duration::from_millis(20));
        }
        let again = gw.post(Some(&session), &call("fake/release"), &[]);
        assert_eq!(again.status, 409, "{}", again.body);
        let refusal: Value = serde_json::from_str(&again.body).expect(&again.body);
        // Under its own id it would read as the held call's answer.
        assert_eq!(refusal["id"], Value::Null, "{refusal}");
        assert!(
            refusal["error"]["message"]
                .as_str()
                .unwrap()
                .contains("in flight")
        );
        assert!(
            !gw.received().contains("fake/release"),
            "the duplicate reached the server"
        );
        let audit = gw.audit_with(&["mcpwall:duplicate_id"]);
        assert!(audit.contains("mcpwall:duplicate_id"), "{audit}");
        // The held call is still the one its id belongs to; release it by another id.
        let other = json!({"jsonrpc": "2.0", "id": 10, "method": "fake/release", "params": {}});
        assert_eq!(gw.post(Some(&session), &other, &[]).status, 200);
        let held = held.join().unwrap();
        assert_eq!(held.status, 200, "{}", held.body);
    });
}

#[test]
fn a_batch_in_a_session_is_refused_by_the_session_and_audited() {
    let gw = Gateway::start("");
    let session = gw.initialize();
    let batch = json!([
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    ]);
    let r = gw.post(Some(&session), &batch, &[]);
    assert_eq!(r.status, 400, "{}", r.body);
    let answers: Value = serde_json::from_str(&r.body).expect(&r.body);
    let answers = answers.as_array().expect("one error per request");
    assert_eq!(answers.len(), 2, "{answers:?}");
    assert_eq!(answers[0]["id"], 1);
    assert_eq!(answers[0]["error"]["data"]["rule"], "mcpwall:batch");
    let audit = gw.audit_with(&["mcpwall:batch"]);
    assert!(audit.contains("mcpwall:batch"), "{audit}");
    assert!(
        !gw.received().contains("tools/list"),
        "the batch reached the server"
    );
}

/// The gateway sends a stateless request to the server under an id of its own
/// (`mcpwall-N`), but the audit log records the id the client gave, as for every other
/// transport: the log is read against the client's own records.
#[test]
fn stateless_requests_are_audited_under_the_clients_ids() {
    let (gw, tokens) = Gateway::launch("", "", &["alice"]);
    let alice = &tokens[0];
    let r = modern(
        &gw,
        alice,
        json!("client-41"),
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "hello"}}),
    );
    assert_eq!(answer(&r)["id"], "client-41", "{}", r.body);
    let r = modern(
        &gw,
        alice,
        json!(42),
        "tools/call",
        json!({"name": "read", "arguments": {"path": "/home/u/.ssh/id_rsa"}}),
    );
    assert_eq!(answer(&r)["id"], 42, "{}", r.body);

    let audit = gw.audit_with(&["\"action\":\"deny\"", "\"tool\":\"read\""]);
    let calls: Vec<&str> = audit
        .lines()
        .filter(|l| l.contains("\"tool\":\"echo\"") || l.contains("\"tool\":\"read\""))
        .collect();
    assert!(
        calls.iter().any(|l| l.contains("\"id\":\"client-41\"")),
        "{audit}"
    );
    assert!(calls.iter().any(|l| l.contains("\"id\":42")), "{audit}");
    assert!(
        calls.iter().all(|l| !l.contains("\"id\":\"mcpwall-")),
        "a call audited under the gateway's id: {audit}"
    );
}
