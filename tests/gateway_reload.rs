//! `mcpwall serve` takes policy and token-file changes without a restart (a file watch and
//! SIGHUP), keeps the policy in force when a change fails to load, and serves `/metrics`
//! to its metrics readers only. The real binary on loopback in front of the fake server,
//! in a temporary HOME. Needs `--features test-support`.

#[path = "support/gateway.rs"]
mod gateway;

use std::time::{Duration, Instant};

use gateway::{Gateway, Home};
use serde_json::{Value, json};

/// How long a change may take to be seen (the watch looks every second).
const RELOAD: Duration = Duration::from_secs(20);

const DENY_ECHO: &str = "  - name: deny-echo\n    match: {tool: echo}\n    action: deny\n";

fn call(gw: &Gateway, session: &str, id: u64, tool: &str, auth: &[(&str, &str)]) -> Value {
    let r = gw.post(
        Some(session),
        json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":tool,"arguments":{"text":"hi"}}})
            .to_string()
            .as_bytes(),
        auth,
    );
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()
}

fn denied(answer: &Value) -> bool {
    answer["error"]["code"] == -32001
}

/// Call `tool` in `session` until `done` holds of the answer (a reload is seen within a
/// second or so); the answer.
fn call_until(
    gw: &Gateway,
    session: &str,
    tool: &str,
    auth: &[(&str, &str)],
    done: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = Instant::now() + RELOAD;
    let mut id = 100;
    loop {
        id += 1;
        let answer = call(gw, session, id, tool, auth);
        if done(&answer) {
            return answer;
        }
        assert!(
            Instant::now() < deadline,
            "the change never took effect: {answer}\n{}",
            gw.stderr()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_policy_edited_under_a_running_gateway_judges_the_next_message_of_open_sessions() {
    let gw = Gateway::serve(Home::new(), "");
    let session = gw.initialize(&[]);
    assert!(!denied(&call(&gw, &session, 1, "echo", &[])));
    let mut ws = gw.websocket(&[]).unwrap();
    gateway::ws_call(&mut ws, &gateway::initialize_msg()).unwrap();
    let ws_echo = |ws: &mut gateway::Socket, id: u64| {
        gateway::ws_call(
            ws,
            &json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":"echo","arguments":{}}}),
        )
        .unwrap()
    };
    assert!(!denied(&ws_echo(&mut ws, 1)));

    // Deny it: the sessions opened before the edit are judged by the new policy.
    gw.home
        .write_policy("", &format!("{}{DENY_ECHO}", Home::RULES));
    let answer = call_until(&gw, &session, "echo", &[], denied);
    assert_eq!(answer["error"]["data"]["rule"], "deny-echo", "{answer}");
    let answer = ws_echo(&mut ws, 2);
    assert_eq!(answer["error"]["data"]["rule"], "deny-echo", "{answer}");
    // A session opened now, too.
    let fresh = gw.initialize(&[]);
    assert!(denied(&call(&gw, &fresh, 1, "echo", &[])));

    // And back: allowed again, in the same session.
    gw.home.write_policy("", Home::RULES);
    call_until(&gw, &session, "echo", &[], |a| !denied(a));
    assert!(denied(&call(&gw, &session, 500, "forbidden", &[])));

    let audit = gw.audit_with(&["mcpwall:policy_reloaded"]);
    assert!(
        audit.lines().any(|l| l.contains("mcpwall:policy_reloaded")),
        "{audit}"
    );
    assert!(
        gw.stderr().contains("policy reloaded (a file changed)"),
        "{}",
        gw.stderr()
    );
}

#[test]
fn a_broken_edit_keeps_the_policy_in_force_says_where_and_is_retried_on_the_next_change() {
    let gw = Gateway::serve(Home::new(), "");
    let session = gw.initialize(&[]);

    // An unknown key on line 6 of the file (the settings take lines 2-4).
    let broken = format!(
        "{}{DENY_ECHO}  - name: typo\n    match: {{tool: x}}\n    acton: deny\n",
        Home::RULES
    );
    gw.home.write_policy("", &broken);
    let file = gw.home.policy_file().display().to_string();
    let stderr = gw.stderr_until("a failed reload", |e| e.contains("policy reload"));
    assert!(
        stderr.contains("policy reload (a file changed) failed"),
        "{stderr}"
    );
    assert!(stderr.contains(&format!("{file}:14:5")), "{stderr}");
    // The policy in force stays: echo allowed, forbidden denied.
    assert!(!denied(&call(&gw, &session, 1, "echo", &[])));
    assert!(denied(&call(&gw, &session, 2, "forbidden", &[])));
    let audit = gw.audit_with(&["mcpwall:policy_reload_failed", &format!("{file}:14:5")]);
    let line = audit
        .lines()
        .find(|l| l.contains("mcpwall:policy_reload_failed"))
        .unwrap_or_else(|| panic!("no failed reload in the audit log:\n{audit}"));
    assert!(line.contains(&format!("{file}:14:5")), "{line}");

    // The next change is tried again.
    gw.home
        .write_policy("", &format!("{}{DENY_ECHO}", Home::RULES));
    call_until(&gw, &session, "echo", &[], denied);
    let verify = std::process::Command::new(env!("CARGO_BIN_EXE_mcpwall"))
        .args(["log", "verify", "--dir"])
        .arg(gw.home.dir.path().join("logs"))
        .env("HOME", gw.home.home())
        .output()
        .unwrap();
    assert!(
        verify.status.success(),
        "the reload events are part of the chain: {}",
        String::from_utf8_lossy(&verify.stderr)
    );
}

/// The answer text of the fake server's `run_command` (bash) in a new session.
fn run_in_new_session(gw: &Gateway, command: &str) -> String {
    let session = gw.initialize(&[]);
    let r = gw.post(
        Some(&session),
        json!({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"run_command","arguments":{"command":command}}})
            .to_string()
            .as_bytes(),
        &[],
    );
    let answer = r.json();
    answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no result: {answer}"))
        .to_string()
}

#[test]
fn a_reloaded_sandbox_applies_to_the_servers_started_after_it() {
    let gw = Gateway::serve_env(
        Home::new(),
        "sandbox: {enabled: true}",
        Home::RULES,
        &[],
        &[("FAKE_BASH_TOOL", "1")],
    );
    let key = format!("FAKEKEY{}", std::process::id());
    let dir = gw.home.home().join(".vault");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("key"), &key).unwrap();
    let read = "cat ~/.vault/key; echo done";
    let text = run_in_new_session(&gw, read);
    assert!(text.contains(&key), "readable before the edit: {text}");

    gw.home.write_policy(
        "sandbox: {enabled: true, deny_read: [~/.vault]}",
        Home::RULES,
    );
    let stderr = gw.stderr_until("the reload", |e| e.contains("policy reloaded"));
    assert!(stderr.contains("sandbox: changed"), "{stderr}");
    let text = run_in_new_session(&gw, read);
    assert!(text.contains("done"), "the command ran: {text}");
    assert!(!text.contains(&key), "the hidden key was read: {text}");
}

#[cfg(unix)]
#[test]
fn sighup_reloads_and_does_not_stop_the_gateway() {
    let mut gw = Gateway::serve(Home::new(), "");
    let session = gw.initialize(&[]);
    let status = std::process::Command::new("kill")
        .args(["-HUP", &gw.child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let stderr = gw.stderr_until("the SIGHUP reload", |e| e.contains("(SIGHUP)"));
    assert!(stderr.contains("reloaded (SIGHUP)"), "{stderr}");
    assert!(gw.child.try_wait().unwrap().is_none(), "SIGHUP stopped it");
    // The session is still served, under the same policy.
    assert!(!denied(&call(&gw, &session, 1, "echo", &[])));
    assert!(denied(&call(&gw, &session, 2, "forbidden", &[])));
    let audit = gw.audit_with(&["mcpwall:policy_reloaded", "SIGHUP"]);
    assert!(audit.contains("SIGHUP"), "{audit}");
}

#[test]
fn a_token_added_while_serving_is_accepted_and_one_removed_is_refused() {
    let home = Home::new();
    let alice = home.token(&["add", "alice"]);
    let gw = Gateway::serve(home, "");
    let alice_auth = format!("Bearer {alice}");
    gw.initialize(&[("Authorization", &alice_auth)]);

    let bob = gw.home.token(&["add", "bob"]);
    let bob_auth = format!("Bearer {bob}");
    let deadline = Instant::now() + RELOAD;
    let session = loop {
        let r = gw.post(
            None,
            gateway::initialize_msg().to_string().as_bytes(),
            &[("Authorization", &bob_auth)],
        );
        if r.status == 200 {
            break r.header("mcp-session-id").unwrap().to_string();
        }
        // Until the reload builds bob's judge: "retry in a second".
        assert_eq!(r.status, 503, "{}", r.body);
        assert_eq!(r.header("retry-after"), Some("1"));
        assert!(Instant::now() < deadline, "bob was never let in");
        std::thread::sleep(Duration::from_millis(50));
    };
    let answer = call(&gw, &session, 1, "echo", &[("Authorization", &bob_auth)]);
    assert!(!denied(&answer), "{answer}");

    gw.home.token(&["remove", "bob"]);
    let r = gw.post(
        Some(&session),
        json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{}}})
            .to_string()
            .as_bytes(),
        &[("Authorization", &bob_auth)],
    );
    assert_eq!(r.status, 401, "{}", r.body);
    // Alice was never disturbed.
    let again = gw.initialize(&[("Authorization", &alice_auth)]);
    assert!(!denied(&call(
        &gw,
        &again,
        3,
        "echo",
        &[("Authorization", &alice_auth)]
    )));
}

/// GET `/metrics` from the metrics listener at `addr`.
fn scrape(gw: &Gateway, addr: &str, token: Option<&str>) -> gateway::Reply {
    let auth = token.map(|t| format!("Bearer {t}"));
    let mut headers = vec![("Host", addr)];
    if let Some(a) = &auth {
        headers.push(("Authorization", a.as_str()));
    }
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(gateway::WAIT)).unwrap();
    use std::io::{Read, Write};
    stream
        .write_all(&gateway::request(
            addr, "GET", "/metrics", &headers, b"", true,
        ))
        .unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).unwrap();
    let _ = gw;
    gateway::Reply::parse(&raw)
}

/// The value of the sample whose name and labels are `series`, e.g.
/// `mcpwall_verdicts_total{direction="inbound",rule="deny-forbidden",verdict="deny"}`.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .map(|v| v.trim().parse().unwrap())
}

#[test]
fn metrics_count_traffic_show_the_policy_hash_and_are_for_metrics_readers_only() {
    let home = Home::new();
    let alice = home.token(&["add", "alice"]);
    let prom = home.token(&["add", "prometheus"]);
    let gw = Gateway::serve_with(
        home,
        "",
        &[
            "--metrics-listen",
            "127.0.0.1:0",
            "--metrics-reader",
            "prometheus",
        ],
    );
    let addr = gw.metrics_address();

    // Readers only: no token, an agent's token and a wrong one are refused; the MCP
    // listener has no /metrics at all.
    for token in [None, Some(alice.as_str()), Some("mcpwall_not-a-token")] {
        let r = scrape(&gw, &addr, token);
        assert_eq!(r.status, 401, "{token:?}: {}", r.body);
        assert!(!r.body.contains("mcpwall_"), "{}", r.body);
    }
    let alice_auth = format!("Bearer {alice}");
    let r = gw.send_to("GET", "/metrics", &[("Authorization", &alice_auth)], b"");
    assert_eq!(r.status, 404, "{}", r.body);
    // A rebound Host is refused before the token is looked at.
    let prom_auth = format!("Bearer {prom}");
    let mut stream = std::net::TcpStream::connect(&addr).unwrap();
    {
        use std::io::{Read, Write};
        stream
            .write_all(&gateway::request(
                &addr,
                "GET",
                "/metrics",
                &[("Host", "evil.example"), ("Authorization", &prom_auth)],
                b"",
                true,
            ))
            .unwrap();
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).unwrap();
        assert_eq!(gateway::Reply::parse(&raw).status, 403);
    }

    let before = scrape(&gw, &addr, Some(&prom));
    assert_eq!(before.status, 200, "{}", before.body);
    assert_eq!(
        before.header("content-type"),
        Some("text/plain; version=0.0.4; charset=utf-8")
    );
    let ok_requests = "mcpwall_http_requests_total{transport=\"streamable_http\",status=\"200\"}";
    let denials =
        "mcpwall_verdicts_total{direction=\"inbound\",rule=\"deny-forbidden\",verdict=\"deny\"}";
    let n_before = sample(&before.body, ok_requests).unwrap_or(0.0);
    assert_eq!(sample(&before.body, denials), None, "{}", before.body);

    let session = gw.initialize(&[("Authorization", &alice_auth)]);
    let secret_argument = format!("{}{}", "hunter", "2-planted");
    let r = gw.post(
        Some(&session),
        json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"forbidden","arguments":{"text":secret_argument}}})
            .to_string()
            .as_bytes(),
        &[("Authorization", &alice_auth)],
    );
    assert!(denied(&r.json()));
    call(&gw, &session, 2, "echo", &[("Authorization", &alice_auth)]);

    let after = scrape(&gw, &addr, Some(&prom)).body;
    assert!(
        sample(&after, ok_requests).unwrap() >= n_before + 3.0,
        "{after}"
    );
    assert_eq!(sample(&after, denials), Some(1.0), "{after}");
    let allowed = "mcpwall_verdicts_total{direction=\"inbound\",rule=\"mcpwall:default_action\",verdict=\"allow\"}";
    assert!(sample(&after, allowed).unwrap_or(0.0) >= 1.0, "{after}");
    assert_eq!(
        sample(
            &after,
            "mcpwall_sessions_open{server=\"mcpwall-fake-server\",identity=\"alice\"}"
        ),
        Some(1.0),
        "{after}"
    );
    assert!(
        after.contains("mcpwall_http_request_duration_seconds_bucket{transport=\"streamable_http\",le=\"+Inf\"}"),
        "{after}"
    );
    // Names only: no token, no argument.
    for secret in [alice.as_str(), prom.as_str(), secret_argument.as_str()] {
        assert!(!after.contains(secret), "{after}");
    }

    // The hash of the policy in force changes with a reload, and the reload is counted.
    let hash = |text: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix("mcpwall_policy_info{sha256=\""))
            .map(|rest| rest.split('"').next().unwrap().to_string())
            .unwrap_or_else(|| panic!("no policy hash:\n{text}"))
    };
    let old_hash = hash(&after);
    assert_eq!(old_hash.len(), 64);
    let reloads = "mcpwall_policy_reloads_total{result=\"success\"}";
    assert_eq!(sample(&after, reloads), Some(0.0));
    gw.home
        .write_policy("", &format!("{}{DENY_ECHO}", Home::RULES));
    let deadline = Instant::now() + RELOAD;
    let reloaded = loop {
        let text = scrape(&gw, &addr, Some(&prom)).body;
        if sample(&text, reloads) == Some(1.0) {
            break text;
        }
        assert!(Instant::now() < deadline, "no reload counted:\n{text}");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_ne!(hash(&reloaded), old_hash);
    // The counts of the judges the reload replaced are kept.
    assert_eq!(sample(&reloaded, denials), Some(1.0), "{reloaded}");
    let broken = "  - name: bad\n    match: {tool: [x\n";
    gw.home.write_policy("", broken);
    let deadline = Instant::now() + RELOAD;
    loop {
        let text = scrape(&gw, &addr, Some(&prom)).body;
        if sample(&text, "mcpwall_policy_reloads_total{result=\"failure\"}") == Some(1.0) {
            assert_eq!(hash(&text), hash(&reloaded));
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no failed reload counted:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
