//! What `mcpwall serve` trusts, and how it refuses: a token file that is not a whole,
//! owner-only store stops it (or, while running, refuses everyone); revoking a token ends
//! that identity's open sessions and sockets at once, and issuing the first one closes a
//! tokenless gateway at once; refusals are counted and summarised in the audit log with
//! every logged field bounded; unknown paths are answered only after the Host and token
//! checks. The real binary on loopback, a temporary HOME. Needs `--features test-support`.

#[path = "support/gateway.rs"]
mod gateway;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use gateway::{Gateway, Home, Reply, initialize_msg, ws_call};
use serde_json::json;

/// A token-shaped string no token file holds, built at run time.
fn unknown_token() -> String {
    format!("Bearer mcpwall_{}", "0f".repeat(32))
}

/// A diagnostic as one line: miette wraps it to the terminal and draws a margin.
fn unwrapped(text: &str) -> String {
    text.split(|c: char| c.is_whitespace() || c == '│')
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(unix)]
#[test]
fn a_token_file_that_is_not_a_whole_owner_only_store_stops_serve() {
    let home = Home::new();
    home.token(&["add", "alice"]);
    let path = home.tokens_file();
    let whole = std::fs::read_to_string(&path).unwrap();
    let header = whole.lines().next().unwrap().to_string();
    let cases: Vec<(&str, String, u32, &str)> = vec![
        ("empty", String::new(), 0o600, "holds no token"),
        (
            "its header only",
            format!("{header}\n"),
            0o600,
            "holds no token",
        ),
        (
            "cut in its last line",
            whole[..whole.len() - 10].to_string(),
            0o600,
            "not `NAME SHA256-HEX`",
        ),
        (
            "cut at the end of its last line",
            whole.trim_end().to_string(),
            0o600,
            "ends in the middle of a line",
        ),
        (
            "a malformed line",
            format!("{whole}bob\n"),
            0o600,
            "line 3 of the token file",
        ),
        (
            "world-writable",
            whole.clone(),
            0o666,
            "writable by other users",
        ),
        (
            "group-writable",
            whole.clone(),
            0o620,
            "writable by other users",
        ),
    ];
    for (what, text, mode, says) in cases {
        std::fs::write(&path, &text).unwrap();
        gateway::chmod(&path, mode);
        let (code, stderr) = home.serve_fails();
        let stderr = unwrapped(&stderr);
        assert_ne!(code, Some(0), "{what}");
        assert!(
            stderr.contains(says) && stderr.contains(&path.display().to_string()),
            "{what}: {stderr}"
        );
    }
    // Another user's file (only root can make one here).
    if rustix::process::geteuid().is_root() {
        std::fs::write(&path, &whole).unwrap();
        gateway::chmod(&path, 0o600);
        rustix::fs::chown(&path, Some(rustix::process::Uid::from_raw(65534)), None).unwrap();
        let (code, stderr) = home.serve_fails();
        let stderr = unwrapped(&stderr);
        assert_ne!(code, Some(0));
        assert!(stderr.contains("belongs to another user"), "{stderr}");
    } else {
        eprintln!("skipped the other-owner case: it needs root to chown");
    }
    // No file at all is the one way to say "no tokens".
    std::fs::remove_file(&path).unwrap();
    let gw = Gateway::serve(home, "");
    assert!(gw.stderr().is_empty() || !gw.stderr().contains("error"));
    gw.initialize(&[]);
}

#[cfg(unix)]
#[test]
fn a_token_file_damaged_while_serving_refuses_everyone_until_fixed() {
    let home = Home::new();
    let alice = format!("Bearer {}", home.token(&["add", "alice"]));
    let path = home.tokens_file();
    let whole = std::fs::read_to_string(&path).unwrap();
    let gw = Gateway::serve(home, "");
    let auth = [("Authorization", alice.as_str())];
    gw.initialize(&auth);

    gateway::chmod(&path, 0o666);
    let r = gw.post(None, initialize_msg().to_string().as_bytes(), &auth);
    assert_eq!(r.status, 503, "{}", r.body);
    assert!(!r.body.contains(&path.display().to_string()), "{}", r.body);
    let audit = gw.audit_with(&["mcpwall:token_file", "writable by other users"]);
    assert!(audit.contains("writable by other users"), "{audit}");
    assert!(gw.stderr().contains("writable by other users"));
    gateway::chmod(&path, 0o600);
    gw.initialize(&auth);

    // Truncated to its header (as a crash mid-write of an older mcpwall left it): not
    // "no tokens", which would let anyone in.
    let header = whole.lines().next().unwrap();
    std::fs::write(&path, format!("{header}\n")).unwrap();
    for extra in [&auth[..], &[]] {
        let r = gw.post(None, initialize_msg().to_string().as_bytes(), extra);
        assert_eq!(r.status, 503, "{}", r.body);
    }
    std::fs::write(&path, &whole).unwrap();
    gw.initialize(&auth);
    assert_eq!(
        gw.post(None, initialize_msg().to_string().as_bytes(), &[])
            .status,
        401
    );
}

/// A GET stream of a Streamable HTTP session, read on its own thread; `ended` waits for
/// the gateway to close it.
struct OpenStream {
    done: std::sync::mpsc::Receiver<()>,
}

impl OpenStream {
    fn open(gw: &Gateway, request: Vec<u8>) -> OpenStream {
        let mut stream = TcpStream::connect(&gw.addr).unwrap();
        stream.write_all(&request).unwrap();
        let mut reader = BufReader::new(stream);
        let mut status = String::new();
        reader.read_line(&mut status).unwrap();
        assert!(status.contains(" 200 "), "{status}");
        let (tx, done) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut sink = Vec::new();
            let _ = reader.read_to_end(&mut sink);
            let _ = tx.send(());
        });
        OpenStream { done }
    }

    fn ended_within(&self, limit: Duration) -> bool {
        self.done.recv_timeout(limit).is_ok()
    }
}

/// A call on a socket whose session was ended gets no result (at most its error, when it
/// crossed the ending), and the socket closes.
fn assert_refused_then_closed(ws: &mut gateway::Socket, call: &serde_json::Value, what: &str) {
    if let Ok(answer) = ws_call(ws, call) {
        assert!(
            answer.get("result").is_none(),
            "{what} still answers: {answer}"
        );
        loop {
            match ws.read() {
                Ok(tokio_tungstenite::tungstenite::Message::Close(_)) | Err(_) => break,
                Ok(_) => {}
            }
        }
    }
}

#[test]
fn removing_a_token_ends_that_identitys_sessions_and_sockets_at_once() {
    let home = Home::new();
    let alice = format!("Bearer {}", home.token(&["add", "alice"]));
    let carol = format!("Bearer {}", home.token(&["add", "carol"]));
    let gw = Gateway::serve(home, "");
    let as_carol = [("Authorization", carol.as_str())];
    let as_alice = [("Authorization", alice.as_str())];

    let session = gw.initialize(&as_carol);
    let get = OpenStream::open(
        &gw,
        gateway::request(
            &gw.addr,
            "GET",
            "/mcp",
            &[
                ("Authorization", &carol),
                ("Accept", "text/event-stream"),
                ("Mcp-Session-Id", &session),
            ],
            b"",
            true,
        ),
    );
    let legacy = OpenStream::open(
        &gw,
        gateway::request(
            &gw.addr,
            "GET",
            "/sse",
            &[("Authorization", &carol), ("Accept", "text/event-stream")],
            b"",
            true,
        ),
    );
    let mut carol_ws = gw.websocket(&as_carol).unwrap();
    ws_call(&mut carol_ws, &initialize_msg()).unwrap();
    let mut alice_ws = gw.websocket(&as_alice).unwrap();
    ws_call(&mut alice_ws, &initialize_msg()).unwrap();

    let removed = Instant::now();
    gw.home.token(&["remove", "carol"]);
    // Her streams close though she sends nothing.
    assert!(
        get.ended_within(Duration::from_secs(5)),
        "GET stream still open"
    );
    assert!(
        legacy.ended_within(Duration::from_secs(5)),
        "legacy SSE stream still open"
    );
    carol_ws
        .get_mut()
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let call = json!({"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"after revocation"}}});
    assert_refused_then_closed(&mut carol_ws, &call, "carol's WebSocket");
    assert!(removed.elapsed() < Duration::from_secs(5));
    let r = gw.post(Some(&session), call.to_string().as_bytes(), &as_carol);
    assert_eq!(r.status, 401, "{}", r.body);
    assert!(!gw.home.received().contains("after revocation"));
    // Alice is untouched.
    let answer = ws_call(&mut alice_ws, &call).unwrap();
    assert!(answer.get("result").is_some(), "{answer}");
    let audit = gw.audit_with(&["mcpwall:token_revoked", "\"identity\":\"carol\""]);
    assert!(
        audit
            .lines()
            .any(|l| l.contains("mcpwall:token_revoked") && l.contains("3 open session(s)")),
        "{audit}"
    );
}

#[test]
fn the_first_token_issued_closes_a_running_tokenless_gateway_at_once() {
    let home = Home::new();
    let gw = Gateway::serve(home, "");
    gw.initialize(&[]);
    let mut ws = gw.websocket(&[]).unwrap();
    ws_call(&mut ws, &initialize_msg()).unwrap();
    let alice = format!("Bearer {}", gw.home.token(&["add", "alice"]));
    // No wait: the request itself notices the new file.
    let r = gw.post(None, initialize_msg().to_string().as_bytes(), &[]);
    assert_eq!(r.status, 401, "{}", r.body);
    ws.get_mut()
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let call = json!({"jsonrpc":"2.0","id":3,"method":"tools/list"});
    assert_refused_then_closed(&mut ws, &call, "the tokenless socket");
    assert_eq!(gw.websocket(&[]).err(), Some(401));
    // The new identity is let in once the reload has built its judge (503 "retry"
    // until then); a wrong token is not.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let r = gw.post(
            None,
            initialize_msg().to_string().as_bytes(),
            &[("Authorization", &alice)],
        );
        if r.status == 200 {
            break;
        }
        assert_eq!(r.status, 503, "{}", r.body);
        assert!(std::time::Instant::now() < deadline, "alice never let in");
        std::thread::sleep(Duration::from_millis(50));
    }
    let r = gw.post(
        None,
        initialize_msg().to_string().as_bytes(),
        &[("Authorization", &unknown_token())],
    );
    assert_eq!(r.status, 401, "{}", r.body);
    // Removing that token again (the file is deleted) does not reopen the gateway.
    gw.home.token(&["remove", "alice"]);
    assert!(!gw.home.tokens_file().exists());
    let r = gw.post(None, initialize_msg().to_string().as_bytes(), &[]);
    assert_eq!(r.status, 401, "{}", r.body);
}

#[test]
fn refusals_are_counted_and_summarised_with_every_logged_field_bounded() {
    let home = Home::new();
    home.token(&["add", "alice"]);
    let mut gw = Gateway::serve(home, "");
    // A 300 KB method, first: it is logged (the first refusal of its kind), cut short.
    let long = "X".repeat(300_000);
    let r = gw.send_to(&long, "/mcp", &[], b"");
    assert_eq!(r.status, 401);
    // Then 10,000 bad requests on one connection.
    const N: usize = 10_000;
    let mut stream = TcpStream::connect(&gw.addr).unwrap();
    let reader = stream.try_clone().unwrap();
    let counting = std::thread::spawn(move || {
        // Answers carry no newline after their body: count status lines in the bytes.
        let mut reader = reader;
        let mut seen = Vec::new();
        let mut chunk = [0u8; 65536];
        let needle = b"HTTP/1.1 401";
        let count = |b: &[u8]| b.windows(needle.len()).filter(|w| w == needle).count();
        while count(&seen) < N {
            match reader.read(&mut chunk) {
                Ok(0) | Err(_) => break,
                Ok(n) => seen.extend_from_slice(&chunk[..n]),
            }
        }
        count(&seen)
    });
    let one = gateway::request(&gw.addr, "GET", "/mcp", &[], b"", false);
    for _ in 0..N {
        stream.write_all(&one).unwrap();
    }
    assert_eq!(counting.join().unwrap(), N);
    gw.stop();
    let audit = gw.home.audit();
    let refusals: Vec<&str> = audit.lines().filter(|l| l.contains("refus")).collect();
    assert!(
        (1..=4).contains(&refusals.len()),
        "{} refusal lines: {:?}",
        refusals.len(),
        &refusals[..refusals.len().min(5)]
    );
    assert!(audit.lines().all(|l| l.len() < 2_000), "a long audit line");
    assert!(
        refusals
            .iter()
            .any(|l| l.contains("mcpwall:refusals")
                && l.contains(&format!("{N} more HTTP refusal(s)"))),
        "no summary: {refusals:?}"
    );
    assert!(gw.stderr().lines().all(|l| l.len() < 2_000));
}

#[test]
fn an_unknown_path_is_answered_after_the_host_and_token_checks_and_names_no_path() {
    let home = Home::new();
    let alice = format!("Bearer {}", home.token(&["add", "alice"]));
    let gw = Gateway::serve(home, "");
    let r = gw.send_to("GET", "/admin", &[], b"");
    assert_eq!(r.status, 401, "{}", r.body);
    let r = gw.send_to(
        "GET",
        "/admin",
        &[("Host", "evil.example"), ("Authorization", &alice)],
        b"",
    );
    assert_eq!(r.status, 403, "{}", r.body);
    let r: Reply = gw.send_to("GET", "/admin", &[("Authorization", &alice)], b"");
    assert_eq!(r.status, 404, "{}", r.body);
    for path in ["/mcp", "/sse", "/ws", "/message"] {
        assert!(!r.body.contains(path), "{}", r.body);
    }
}

#[test]
fn a_malformed_body_whose_id_is_readable_gets_its_error_and_frees_the_id() {
    let gw = Gateway::serve(Home::new(), "");
    let session = gw.initialize(&[]);
    let broken = br#"{"jsonrpc":"2.0","id":41,"method":"tools/call","params":{"name":"echo","arguments":{"text":"cut"#;
    let r = gw.post(Some(&session), broken, &[]);
    let answer = r.json();
    assert_eq!(answer["id"], 41, "{answer}");
    assert!(answer.get("error").is_some(), "{answer}");
    // The id is not wedged in flight: the same id is usable again at once.
    let call = json!({"jsonrpc":"2.0","id":41,"method":"tools/list"});
    let r = gw.post(Some(&session), call.to_string().as_bytes(), &[]);
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["id"], 41);
    assert!(!gw.home.received().contains("cut"));
}

#[test]
fn bodies_that_are_not_utf8_json_text_get_400() {
    let gw = Gateway::serve(Home::new(), "");
    let session = gw.initialize(&[]);
    let call = json!({"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo","arguments":{"text":"NOT-UTF8-SENT"}}}).to_string();
    let utf16 = |bom: &[u8]| {
        let mut b = bom.to_vec();
        b.extend(call.encode_utf16().flat_map(u16::to_le_bytes));
        b
    };
    let mut with_bom = b"\xEF\xBB\xBF".to_vec();
    with_bom.extend_from_slice(call.as_bytes());
    let mut latin1 = call.clone().into_bytes();
    latin1.extend_from_slice(b" \xE9");
    for (what, body) in [
        ("a UTF-8 byte-order mark", with_bom),
        ("UTF-16 with its mark", utf16(b"\xFF\xFE")),
        ("UTF-16 without a mark", utf16(b"")),
        ("a byte that is not UTF-8", latin1),
    ] {
        let r = gw.post(Some(&session), &body, &[]);
        assert_eq!(r.status, 400, "{what}: {}", r.body);
        assert_eq!(r.json()["error"]["code"], -32700, "{what}");
    }
    assert!(!gw.home.received().contains("NOT-UTF8-SENT"));
}

#[test]
fn each_http_session_has_its_own_audit_session_id() {
    let gw = Gateway::serve(Home::new(), "");
    let forbidden = json!({"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"forbidden","arguments":{}}});
    let ids = [gw.initialize(&[]), gw.initialize(&[])];
    for id in &ids {
        let r = gw.post(Some(id), forbidden.to_string().as_bytes(), &[]);
        assert!(r.json().get("error").is_some(), "{}", r.body);
    }
    let mut ws = gw.websocket(&[]).unwrap();
    ws_call(&mut ws, &initialize_msg()).unwrap();
    ws_call(&mut ws, &forbidden).unwrap();
    let audit = gw.audit_with(&["\"transport\":\"websocket\"", "deny-forbidden"]);
    let sessions: std::collections::BTreeSet<String> = audit
        .lines()
        .filter(|l| l.contains("deny-forbidden"))
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["session"].to_string())
        .collect();
    assert_eq!(sessions.len(), 3, "{audit}");
    for id in &ids {
        assert!(
            !audit.contains(id.as_str()),
            "the audit log holds a session id"
        );
    }
}

#[test]
fn the_bridge_falls_back_to_a_legacy_http_sse_upstream() {
    let gw = Gateway::serve(Home::new(), "");
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("home")).unwrap();
    let policy = dir.path().join("policy.yml");
    std::fs::write(
        &policy,
        format!(
            "version: 1\nsettings:\n  log_dir: \"{}\"\nrules:\n  - name: deny-forbidden\n    match: {{tool: forbidden}}\n    action: deny\n",
            dir.path().join("logs").display()
        ),
    )
    .unwrap();
    let mut bridge = std::process::Command::new(env!("CARGO_BIN_EXE_mcpwall"))
        .arg("-c")
        .arg(&policy)
        .args(["--upstream", &format!("http://{}/sse", gw.addr)])
        .env("HOME", dir.path().join("home"))
        .current_dir(dir.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = bridge.stdin.take().unwrap();
    let mut stdout = BufReader::new(bridge.stdout.take().unwrap());
    let mut next = move || {
        let mut line = String::new();
        assert!(
            stdout.read_line(&mut line).unwrap() > 0,
            "the bridge closed stdout"
        );
        serde_json::from_str::<serde_json::Value>(&line).unwrap()
    };
    writeln!(stdin, "{}", initialize_msg()).unwrap();
    let init = next();
    assert_eq!(init["id"], 0, "{init}");
    assert!(init.get("result").is_some(), "{init}");
    writeln!(
        stdin,
        "{}",
        json!({"jsonrpc":"2.0","method":"notifications/initialized"})
    )
    .unwrap();
    let echo = json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"through legacy"}}});
    writeln!(stdin, "{echo}").unwrap();
    let answer = next();
    assert_eq!(answer["id"], 1, "{answer}");
    assert!(answer.to_string().contains("through legacy"), "{answer}");
    // Still judged by the bridge's own policy.
    let forbidden = json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"forbidden","arguments":{}}});
    writeln!(stdin, "{forbidden}").unwrap();
    assert!(next().get("error").is_some());
    drop(stdin);
    let deadline = Instant::now() + Duration::from_secs(30);
    while bridge.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "the bridge did not exit");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(gw.home.received().contains("through legacy"));
}
