//! The audit log shipped to a real collector (Debian's rsyslog, on loopback): every line
//! of the local chain arrives byte for byte and the collected copy verifies; lines written
//! while the collector was away, or by a proxy killed before it shipped them, arrive with
//! `mcpwall log ship`; two proxies sharing a log send each line once; TLS is verified
//! against the configured CA; a bad address is a start-up error pointing into the file.
//!
//! rsyslog comes from `.ci/run`; without it these tests print why and pass, unless
//! `MCPWALL_REQUIRE_SERVICES` is set (CI), where a missing collector fails them.
//!
//! OpenTelemetry logs over OTLP/HTTP go to a receiver of the tests' own
//! (`support/otlp.rs`: no OpenTelemetry collector is packaged for Debian, PyPI or npm):
//! every line arrives as one record whose body is the line, and the copy verifies; lines
//! refused or missed arrive later; a damaged cursor makes shipping start again from the
//! first line; TLS is verified against the configured CA.

#[path = "support/otlp.rs"]
mod otlp;
#[path = "support/sandbox.rs"]
mod sandbox;
#[path = "support/services.rs"]
mod services;

use std::collections::HashSet;
use std::io::Write;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use sandbox::Sandbox;

fn fake_server() -> &'static str {
    env!("CARGO_BIN_EXE_mcpwall-fake-server")
}

fn rsyslogd() -> Option<PathBuf> {
    services::rsyslogd()
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The certificates of a TLS collector, made at run time.
struct Certs {
    ca: PathBuf,
    cert: PathBuf,
    key: PathBuf,
}

fn make_certs(dir: &Path, tag: &str) -> Certs {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::new(ca_params, ca_key);
    let key = KeyPair::generate().unwrap();
    let params = CertificateParams::new(vec!["localhost".to_string()]).unwrap();
    let cert = params.signed_by(&key, &issuer).unwrap();
    let certs = Certs {
        ca: dir.join(format!("{tag}-ca.pem")),
        cert: dir.join(format!("{tag}-cert.pem")),
        key: dir.join(format!("{tag}-key.pem")),
    };
    std::fs::write(&certs.ca, ca.pem()).unwrap();
    std::fs::write(&certs.cert, cert.pem()).unwrap();
    std::fs::write(&certs.key, key.serialize_pem()).unwrap();
    certs
}

fn policy(address: &str, extra: &str) -> String {
    format!(
        "version: 1\nsettings:\n  log_shipping:\n    syslog:\n      address: \"{address}\"\n{extra}\
         rules:\n  - name: no-deleting\n    match: {{tool: delete_file}}\n    action: deny\n    message: deleting is off\n"
    )
}

/// A short session through the proxy: initialize, an allowed and a denied call.
fn session_input(calls: u32) -> String {
    let mut input = String::from(
        r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#,
    );
    input.push('\n');
    for i in 1..=calls {
        let tool = if i % 2 == 0 {
            "delete_file"
        } else {
            "read_file"
        };
        input.push_str(&format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{i},\"method\":\"tools/call\",\"params\":{{\"name\":\"{tool}\",\"arguments\":{{\"path\":\"notes-{i}.txt\"}}}}}}\n"
        ));
    }
    input
}

fn run_proxy(sandbox: &Sandbox, calls: u32) -> sandbox::Run {
    sandbox.run(
        &["-c", "policy.yml", "--", fake_server()],
        &session_input(calls),
    )
}

/// The local log's lines (today's day file and any other).
fn local_lines(sandbox: &Sandbox) -> Vec<String> {
    let dir = sandbox.home().join(".mcpwall/logs");
    let mut names: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().ends_with(".audit.jsonl"))
        .collect();
    names.sort();
    names
        .iter()
        .flat_map(|p| {
            std::fs::read_to_string(p)
                .unwrap()
                .lines()
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn every_line_of_the_local_chain_reaches_the_collector_and_the_copy_verifies() {
    let Some(rsyslogd) = rsyslogd() else { return };
    let sandbox = Sandbox::new();
    let collector = services::Collector::start(&rsyslogd, &sandbox.root(), free_port(), None);
    sandbox.write(
        "project/policy.yml",
        &policy(&format!("tcp://127.0.0.1:{}", collector.port), ""),
    );
    let run = run_proxy(&sandbox, 6);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let local = local_lines(&sandbox);
    assert!(
        local
            .iter()
            .filter(|l| l.contains("\"action\":\"deny\""))
            .count()
            == 3,
        "{local:#?}"
    );
    let collected = collector.lines(local.len());
    assert_eq!(
        collected, local,
        "the collected copy is the local log, line for line"
    );

    // The copy, as a log directory of its own, passes `log verify`.
    let copy = sandbox.root().join("copy");
    std::fs::create_dir_all(&copy).unwrap();
    let day = std::fs::read_dir(sandbox.home().join(".mcpwall/logs"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .find(|n| n.ends_with(".audit.jsonl"))
        .unwrap();
    std::fs::copy(&collector.out, copy.join(&day)).unwrap();
    let verify = sandbox.run(
        &["log", "verify", "--copy", "--dir", copy.to_str().unwrap()],
        "",
    );
    assert_eq!(verify.code, 0, "{}{}", verify.stdout, verify.stderr);
    // A line dropped from the middle of the copy is seen.
    let mut cut = collector.lines(local.len());
    cut.remove(3);
    std::fs::write(copy.join(&day), cut.join("\n") + "\n").unwrap();
    let verify = sandbox.run(
        &["log", "verify", "--copy", "--dir", copy.to_str().unwrap()],
        "",
    );
    assert_eq!(verify.code, 1, "{}{}", verify.stdout, verify.stderr);

    // A second session ships only its own new lines: nothing twice.
    let run = run_proxy(&sandbox, 2);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let local = local_lines(&sandbox);
    let collected = collector.lines(local.len());
    assert_eq!(collected, local);
}

#[test]
fn lines_written_while_the_collector_was_away_or_by_a_killed_proxy_arrive_with_log_ship() {
    let Some(rsyslogd) = rsyslogd() else { return };
    let sandbox = Sandbox::new();
    let port = free_port();
    sandbox.write(
        "project/policy.yml",
        &policy(&format!("tcp://127.0.0.1:{port}"), ""),
    );
    // No collector: the proxy works as ever and says the copy waits.
    let run = run_proxy(&sandbox, 4);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stderr.contains("cannot ship the audit log"),
        "{}",
        run.stderr
    );

    // A proxy killed mid-session leaves lines no shipper sent.
    let mut proxy = sandbox
        .command(&["-c", "policy.yml", "--", fake_server()])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = proxy.stdin.take().unwrap();
    stdin.write_all(session_input(3).as_bytes()).unwrap();
    stdin.flush().unwrap();
    let logs = sandbox.home().join(".mcpwall/logs");
    let deadline = Instant::now() + Duration::from_secs(20);
    while local_lines(&sandbox).len() < 11 {
        assert!(Instant::now() < deadline, "{:#?}", local_lines(&sandbox));
        std::thread::sleep(Duration::from_millis(20));
    }
    proxy.kill().unwrap();
    proxy.wait().unwrap();
    drop(stdin);

    let collector = services::Collector::start(&rsyslogd, &sandbox.root(), port, None);
    let ship = sandbox.run(&["log", "ship", "-c", "policy.yml"], "");
    assert_eq!(ship.code, 0, "{}{}", ship.stdout, ship.stderr);
    let local = local_lines(&sandbox);
    assert!(local.len() >= 11, "{local:#?}");
    assert_eq!(collector.lines(local.len()), local);
    assert!(
        ship.stdout.contains(&format!("{} lines", local.len())),
        "{}",
        ship.stdout
    );

    // Caught up: a second run ships nothing.
    let again = sandbox.run(&["log", "ship", "-c", "policy.yml"], "");
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert!(again.stdout.contains("shipped 0 lines"), "{}", again.stdout);
    assert!(logs.join("shipping").is_dir());
}

#[test]
fn two_proxies_sharing_a_log_ship_each_line_once() {
    let Some(rsyslogd) = rsyslogd() else { return };
    let sandbox = Sandbox::new();
    let collector = services::Collector::start(&rsyslogd, &sandbox.root(), free_port(), None);
    sandbox.write(
        "project/policy.yml",
        &policy(&format!("tcp://127.0.0.1:{}", collector.port), ""),
    );
    let first = std::thread::scope(|s| {
        let a = s.spawn(|| run_proxy(&sandbox, 20));
        let b = s.spawn(|| run_proxy(&sandbox, 20));
        (a.join().unwrap(), b.join().unwrap())
    });
    assert_eq!(first.0.code, 0, "{}", first.0.stderr);
    assert_eq!(first.1.code, 0, "{}", first.1.stderr);
    let local = local_lines(&sandbox);
    let collected = collector.lines(local.len());
    // Let a late duplicate show up, if there is one.
    std::thread::sleep(Duration::from_millis(500));
    let collected_now = collector.lines(local.len());
    assert_eq!(collected, collected_now);
    let unique: HashSet<&String> = collected.iter().collect();
    assert_eq!(unique.len(), collected.len(), "a line was shipped twice");
    assert_eq!(collected, local);
}

#[test]
fn a_proxy_ending_while_another_holds_the_shipping_lock_leaves_no_line_unshipped() {
    let Some(rsyslogd) = rsyslogd() else { return };
    let sandbox = Sandbox::new();
    let collector = services::Collector::start(&rsyslogd, &sandbox.root(), free_port(), None);
    sandbox.write(
        "project/policy.yml",
        &policy(&format!("tcp://127.0.0.1:{}", collector.port), ""),
    );
    assert_eq!(run_proxy(&sandbox, 2).code, 0);
    let before = local_lines(&sandbox).len();
    assert_eq!(collector.lines(before).len(), before);
    // Another process holds the sink's lock: its last pass may already have read the log.
    let lock_path = cursor_file(&sandbox).with_extension("lock");
    let holder = std::fs::File::open(&lock_path).unwrap();
    holder.try_lock().unwrap();
    std::thread::scope(|s| {
        let proxy = s.spawn(|| run_proxy(&sandbox, 10));
        // Every line of the second proxy is written (it has stopped writing), and only
        // then does the holder end.
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut seen = 0;
        loop {
            let now = local_lines(&sandbox).len();
            if now > before && now == seen || Instant::now() > deadline {
                break;
            }
            seen = now;
            std::thread::sleep(Duration::from_millis(150));
        }
        drop(holder);
        assert_eq!(proxy.join().unwrap().code, 0);
    });
    let local = local_lines(&sandbox);
    assert_eq!(collector.lines(local.len()), local);
}

#[test]
fn tls_shipping_verifies_the_collector_against_the_configured_ca() {
    let Some(rsyslogd) = rsyslogd() else { return };
    if !Path::new("/usr/lib/x86_64-linux-gnu/rsyslog/lmnsd_gtls.so").exists()
        && !Path::new("/usr/lib/rsyslog/lmnsd_gtls.so").exists()
    {
        assert!(
            std::env::var_os("MCPWALL_REQUIRE_SERVICES").is_none(),
            "rsyslog-gnutls is not installed, and MCPWALL_REQUIRE_SERVICES is set"
        );
        eprintln!(
            "skipped: rsyslog's TLS driver is not installed (apt-get install rsyslog-gnutls)"
        );
        return;
    }
    let sandbox = Sandbox::new();
    let root = sandbox.root();
    let real = make_certs(&root, "collector");
    let other = make_certs(&root, "stranger");
    let collector = services::Collector::start(
        &rsyslogd,
        &root,
        free_port(),
        Some((&real.ca, &real.cert, &real.key)),
    );
    let address = format!("tls://localhost:{}", collector.port);

    // A CA that did not sign the collector's certificate: nothing is sent.
    sandbox.write(
        "project/policy.yml",
        &policy(
            &address,
            &format!("      ca_file: \"{}\"\n", other.ca.display()),
        ),
    );
    let run = run_proxy(&sandbox, 2);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stderr.contains("cannot ship the audit log"),
        "{}",
        run.stderr
    );
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(collector.lines(0), Vec::<String>::new());

    // The right CA: what waited and what is new both arrive.
    sandbox.write(
        "project/policy.yml",
        &policy(
            &address,
            &format!("      ca_file: \"{}\"\n", real.ca.display()),
        ),
    );
    let run = run_proxy(&sandbox, 2);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let local = local_lines(&sandbox);
    assert_eq!(collector.lines(local.len()), local);
}

#[test]
fn a_bad_shipping_setting_is_a_start_up_error_with_its_place() {
    let sandbox = Sandbox::new();
    for (address, extra, expect) in [
        ("udp://127.0.0.1:514", "", "bad_address"),
        ("tcp://127.0.0.1:99999", "", "bad_address"),
        ("tcp://::1:514", "", "bad_address"),
        (
            "tcp://127.0.0.1:514",
            "      ca_file: ca.pem\n",
            "only to a `tls://` address",
        ),
        (
            "tls://127.0.0.1",
            "      client_cert: c.pem\n",
            "without `client_key`",
        ),
        (
            "tls://127.0.0.1",
            "      facility: local9\n",
            "did you mean",
        ),
    ] {
        sandbox.write("project/policy.yml", &policy(address, extra));
        let run = sandbox.run(&["explain-policy", "-c", "policy.yml"], "");
        assert_eq!(run.code, 2, "{address}: {}", run.stdout);
        assert!(run.stderr.contains(expect), "{address}: {}", run.stderr);
        assert!(run.stderr.contains("policy.yml:"), "{}", run.stderr);
    }
    // A CA file that can't be read stops the proxy before the server starts.
    sandbox.write(
        "project/policy.yml",
        &policy("tls://127.0.0.1:6514", "      ca_file: missing-ca.pem\n"),
    );
    let run = run_proxy(&sandbox, 1);
    assert_ne!(run.code, 0);
    assert!(run.stderr.contains("missing-ca.pem"), "{}", run.stderr);
}

#[test]
fn an_untrusted_project_file_cannot_ship_the_log() {
    let sandbox = Sandbox::new();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    // The project's own policy file, found (not named with -c), not trusted.
    sandbox.write(
        "project/.mcpwall.yml",
        &policy(&format!("tcp://127.0.0.1:{port}"), ""),
    );
    let run = sandbox.run(&["--", fake_server()], &session_input(2));
    assert_eq!(run.code, 0, "{}", run.stderr);
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        listener.accept().is_err(),
        "the untrusted file's destination got a connection"
    );
    let explain = sandbox.run(&["explain-policy"], "");
    assert!(
        explain.stdout.contains("log_shipping") || explain.stderr.contains("log_shipping"),
        "{}{}",
        explain.stdout,
        explain.stderr
    );
}

// ---- OpenTelemetry logs over OTLP/HTTP (JSON), against the loopback receiver of
// tests/support/otlp.rs: no OpenTelemetry collector is packaged here.

fn otlp_policy(endpoint: &str, extra: &str) -> String {
    format!(
        "version: 1\nsettings:\n  log_shipping:\n    otlp:\n      endpoint: \"{endpoint}\"\n{extra}\
         rules:\n  - name: no-deleting\n    match: {{tool: delete_file}}\n    action: deny\n    message: deleting is off\n"
    )
}

/// A sandbox whose policy ships to an OTLP collector on a loopback port where none
/// listens yet, that port, and the lines a proxy's run left waiting for it.
fn otlp_lines_waiting() -> (Sandbox, u16, Vec<String>) {
    let sandbox = Sandbox::new();
    let port = free_port();
    sandbox.write(
        "project/policy.yml",
        &otlp_policy(&format!("http://127.0.0.1:{port}/v1/logs"), ""),
    );
    let run = run_proxy(&sandbox, 4);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let waiting = local_lines(&sandbox);
    (sandbox, port, waiting)
}

/// The day file's name (the sandbox's log has one: the tests run within a day).
fn day_file(sandbox: &Sandbox) -> String {
    std::fs::read_dir(sandbox.home().join(".mcpwall/logs"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .find(|n| n.ends_with(".audit.jsonl"))
        .unwrap()
}

/// `log verify --copy` over `lines` written as a day file of their own.
fn verify_copy(sandbox: &Sandbox, lines: &[String]) -> sandbox::Run {
    let copy = sandbox.root().join("otlp-copy");
    std::fs::create_dir_all(&copy).unwrap();
    std::fs::write(copy.join(day_file(sandbox)), lines.join("\n") + "\n").unwrap();
    sandbox.run(
        &["log", "verify", "--copy", "--dir", copy.to_str().unwrap()],
        "",
    )
}

#[test]
fn every_line_reaches_an_otlp_collector_as_one_log_record_and_the_copy_verifies() {
    let sandbox = Sandbox::new();
    let receiver = otlp::Receiver::start(0, None);
    // The credential comes from a header file, built at run time; a plain header as written.
    let token = [
        "otlp",
        "test",
        "credential",
        &std::process::id().to_string(),
    ]
    .join("-");
    receiver.require_header("authorization", &format!("Bearer {token}"));
    sandbox.write(
        "home/otlp.headers",
        &format!("Authorization: Bearer {token}\n"),
    );
    // A base URL: `/v1/logs` is added, as OTLP exporters do.
    sandbox.write(
        "project/policy.yml",
        &otlp_policy(
            &format!("http://127.0.0.1:{}", receiver.port),
            &format!(
                "      headers: {{X-Scope-OrgID: team-a}}\n      header_file: \"{}\"\n      service_name: gateway-eu\n",
                sandbox.home().join("otlp.headers").display()
            ),
        ),
    );
    let run = run_proxy(&sandbox, 6);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(!run.stderr.contains(&token), "{}", run.stderr);
    let local = local_lines(&sandbox);
    let collected = receiver.lines(local.len());
    assert_eq!(collected, local, "each record's body is its line, in order");

    let requests = receiver.requests();
    assert!(requests.iter().all(|r| r.status == 200), "{requests:#?}");
    let first = &requests[0];
    assert_eq!(first.path, "/v1/logs");
    assert_eq!(first.header("content-type"), Some("application/json"));
    assert_eq!(first.header("x-scope-orgid"), Some("team-a"));
    let resource = &first.body["resourceLogs"][0]["resource"]["attributes"];
    assert!(
        resource
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["key"] == "service.name" && a["value"]["stringValue"] == "gateway-eu"),
        "{resource}"
    );
    // A denied call's record carries the verdict and the session as attributes, its
    // time is the event's own, and its severity is above a plain allow's.
    let records: Vec<serde_json::Value> = requests.iter().flat_map(|r| r.records()).collect();
    let deny = records
        .iter()
        .find(|r| {
            r["body"]["stringValue"]
                .as_str()
                .unwrap()
                .contains("\"action\":\"deny\"")
        })
        .unwrap();
    let line: serde_json::Value =
        serde_json::from_str(deny["body"]["stringValue"].as_str().unwrap()).unwrap();
    let attribute = |key: &str| {
        deny["attributes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["key"] == key)
            .map(|a| a["value"]["stringValue"].clone())
    };
    assert_eq!(attribute("mcpwall.event"), Some("audit".into()));
    assert_eq!(attribute("mcpwall.verdict"), Some("deny".into()));
    assert_eq!(attribute("mcpwall.session"), Some(line["session"].clone()));
    assert_eq!(deny["severityNumber"], 10);
    let nanos: u128 = deny["timeUnixNano"].as_str().unwrap().parse().unwrap();
    assert!(nanos > 1_700_000_000_000_000_000, "{nanos}");

    // The collected copy is the chain: it verifies, and a line taken out is seen.
    let verify = verify_copy(&sandbox, &collected);
    assert_eq!(verify.code, 0, "{}{}", verify.stdout, verify.stderr);
    let mut cut = collected.clone();
    cut.remove(2);
    let verify = verify_copy(&sandbox, &cut);
    assert_eq!(verify.code, 1, "{}{}", verify.stdout, verify.stderr);

    // A second session ships its own lines only.
    let run = run_proxy(&sandbox, 2);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let local = local_lines(&sandbox);
    assert_eq!(receiver.lines(local.len()), local);
}

#[test]
fn lines_an_otlp_collector_refused_or_missed_arrive_later_and_log_ship_catches_up() {
    let sandbox = Sandbox::new();
    let port = free_port();
    sandbox.write(
        "project/policy.yml",
        &otlp_policy(&format!("http://127.0.0.1:{port}/v1/logs"), ""),
    );
    // No collector: the proxy works as ever and says the copy waits.
    let run = run_proxy(&sandbox, 4);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stderr.contains("cannot ship the audit log"),
        "{}",
        run.stderr
    );
    let waiting = local_lines(&sandbox);

    // A collector that refuses twice (503, then 401) before taking: nothing is lost, and
    // the refusal is said with the collector's own words.
    let receiver = otlp::Receiver::start(port, None);
    receiver.refuse_next(1, 503);
    receiver.refuse_next(1, 401);
    let ship = sandbox.run(&["log", "ship", "-c", "policy.yml"], "");
    assert_eq!(ship.code, 1, "{}{}", ship.stdout, ship.stderr);
    assert!(ship.stderr.contains("503"), "{}", ship.stderr);
    assert!(ship.stderr.contains("not now"), "{}", ship.stderr);
    let ship = sandbox.run(&["log", "ship", "-c", "policy.yml"], "");
    assert_eq!(ship.code, 1, "{}{}", ship.stdout, ship.stderr);
    assert!(ship.stderr.contains("401"), "{}", ship.stderr);
    assert_eq!(receiver.accepted_lines(), Vec::<String>::new());
    let ship = sandbox.run(&["log", "ship", "-c", "policy.yml"], "");
    assert_eq!(ship.code, 0, "{}{}", ship.stdout, ship.stderr);
    assert!(
        ship.stdout
            .contains(&format!("shipped {} lines", waiting.len())),
        "{}",
        ship.stdout
    );
    assert_eq!(receiver.lines(waiting.len()), waiting);

    // A batch refused while a proxy runs is not dropped: its lines are sent again (by
    // the proxy's next try, or by `log ship`), and none twice.
    receiver.refuse_next(1, 503);
    let run = run_proxy(&sandbox, 3);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let ship = sandbox.run(&["log", "ship", "-c", "policy.yml"], "");
    assert_eq!(ship.code, 0, "{}{}", ship.stdout, ship.stderr);
    let local = local_lines(&sandbox);
    assert_eq!(receiver.lines(local.len()), local);
    let refused: Vec<String> = receiver
        .requests()
        .iter()
        .filter(|r| r.status == 503)
        .flat_map(otlp::Request::records)
        .map(|r| r["body"]["stringValue"].as_str().unwrap().to_string())
        .collect();
    assert!(!refused.is_empty(), "no batch was refused");
    assert!(
        refused.iter().all(|l| local.contains(l)),
        "a refused line is missing from the copy: {refused:#?}"
    );
    let again = sandbox.run(&["log", "ship", "-c", "policy.yml"], "");
    assert!(again.stdout.contains("shipped 0 lines"), "{}", again.stdout);
}

/// A collector that takes a batch but drops part of it on purpose (OTLP's partial
/// success) is not sent those lines again, and the audit log says so: stderr and a
/// `mcpwall:log_shipping` line with the count and the collector's reason, which reaches
/// the collector too. A pass where the collector drops from every batch notes it once.
#[test]
fn lines_an_otlp_collector_dropped_on_purpose_are_said_in_the_audit_log() {
    let (sandbox, port, waiting) = otlp_lines_waiting();

    let receiver = otlp::Receiver::start(port, None);
    receiver.drop_from_next(1, 2, "older than the retention window");
    let ship = sandbox.run(&["log", "ship", "-c", "policy.yml"], "");
    assert_eq!(ship.code, 0, "{}{}", ship.stdout, ship.stderr);
    assert!(
        ship.stderr.contains("dropped 2 of them") && ship.stderr.contains("retention window"),
        "{}",
        ship.stderr
    );
    let local = local_lines(&sandbox);
    let notes: Vec<&String> = local
        .iter()
        .filter(|l| l.contains("\"rule\":\"mcpwall:log_shipping\""))
        .collect();
    assert_eq!(notes.len(), 1, "{local:#?}");
    assert!(
        notes[0].contains(&format!(
            "took a batch of {} lines and dropped 2",
            waiting.len()
        )) && notes[0].contains("older than the retention window"),
        "{}",
        notes[0]
    );
    // The lines went once, the note after them: nothing is sent again.
    assert_eq!(receiver.lines(local.len()), local);
    let again = sandbox.run(&["log", "ship", "-c", "policy.yml"], "");
    assert!(again.stdout.contains("shipped 0 lines"), "{}", again.stdout);

    // A collector dropping from every batch: a proxy's run says it once, in its audit log
    // or, when only its last pass (after the log closed) saw it, through the next
    // process that ships the log.
    receiver.drop_from_next(1000, 1, "quota exceeded");
    let run = run_proxy(&sandbox, 3);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        run.stderr.matches("quota exceeded").count(),
        1,
        "{}",
        run.stderr
    );
    receiver.stop_dropping();
    let ship = sandbox.run(&["log", "ship", "-c", "policy.yml"], "");
    assert_eq!(ship.code, 0, "{}{}", ship.stdout, ship.stderr);
    let local = local_lines(&sandbox);
    let quota_notes = local
        .iter()
        .filter(|l| l.contains("quota exceeded"))
        .count();
    assert_eq!(quota_notes, 1, "{local:#?}");
    assert_eq!(receiver.lines(local.len()).len(), local.len());
}

/// The cursor file of the log's one shipping destination.
fn cursor_file(sandbox: &Sandbox) -> PathBuf {
    std::fs::read_dir(sandbox.home().join(".mcpwall/logs/shipping"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "cursor"))
        .unwrap()
}

#[test]
fn a_damaged_cursor_makes_a_proxy_ship_to_syslog_from_the_first_line_not_the_end() {
    let Some(rsyslogd) = rsyslogd() else { return };
    let sandbox = Sandbox::new();
    let port = free_port();
    sandbox.write(
        "project/policy.yml",
        &policy(&format!("tcp://127.0.0.1:{port}"), ""),
    );
    // Lines written while the collector is away wait behind the cursor, which is then
    // damaged: where shipping stopped is unknown.
    let run = run_proxy(&sandbox, 4);
    assert_eq!(run.code, 0, "{}", run.stderr);
    std::fs::write(
        cursor_file(&sandbox),
        "mcpwall-ship-cursor 1
garbage
",
    )
    .unwrap();
    let collector = services::Collector::start(&rsyslogd, &sandbox.root(), port, None);
    let run = run_proxy(&sandbox, 2);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stderr.contains("is damaged"), "{}", run.stderr);
    // Every line, the waiting ones first: none skipped.
    let local = local_lines(&sandbox);
    assert_eq!(collector.lines(local.len()), local);
    assert!(
        local
            .iter()
            .any(|l| l.contains("\"rule\":\"mcpwall:log_shipping\"") && l.contains("damaged")),
        "{local:#?}"
    );
}

#[test]
fn a_damaged_shipping_cursor_makes_shipping_start_again_from_the_first_line() {
    // Lines written while the collector is away wait behind the cursor...
    let (sandbox, port, waiting) = otlp_lines_waiting();
    assert!(waiting.len() >= 5, "{waiting:#?}");
    // ...and the cursor is then damaged.
    let cursor = cursor_file(&sandbox);
    std::fs::write(
        &cursor,
        "mcpwall-ship-cursor 1\n2026-01-01.audit.jsonl 12x\n",
    )
    .unwrap();

    let receiver = otlp::Receiver::start(port, None);
    let run = run_proxy(&sandbox, 2);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stderr.contains("is damaged") && run.stderr.contains("first line"),
        "{}",
        run.stderr
    );
    // Nothing is skipped: the lines that waited reach the collector, then the new ones,
    // among them the audit line that says what happened.
    let local = local_lines(&sandbox);
    let collected = receiver.lines(local.len());
    assert_eq!(collected, local);
    let note = local
        .iter()
        .find(|l| l.contains("\"rule\":\"mcpwall:log_shipping\""))
        .unwrap_or_else(|| panic!("no audit line about the cursor: {local:#?}"));
    assert!(note.contains("damaged"), "{note}");
    assert_eq!(verify_copy(&sandbox, &collected).code, 0);

    // `log ship` reads a damaged cursor the same way: everything again, plus its own line.
    std::fs::write(&cursor, [0xff_u8, 0xfe, 0x00]).unwrap();
    let before = receiver.accepted_lines().len();
    let ship = sandbox.run(&["log", "ship", "-c", "policy.yml"], "");
    assert_eq!(ship.code, 0, "{}{}", ship.stdout, ship.stderr);
    assert!(ship.stderr.contains("is damaged"), "{}", ship.stderr);
    let local = local_lines(&sandbox);
    let all = receiver.lines(before + local.len());
    assert_eq!(
        all[before..],
        local[..],
        "the whole log again, from its first line"
    );
    assert!(
        local
            .iter()
            .filter(|l| l.contains("\"rule\":\"mcpwall:log_shipping\""))
            .count()
            == 2,
        "{local:#?}"
    );
}

#[test]
fn otlp_over_tls_verifies_the_collector_against_the_configured_ca() {
    let sandbox = Sandbox::new();
    let root = sandbox.root();
    let real = make_certs(&root, "otel");
    let other = make_certs(&root, "stranger");
    let receiver = otlp::Receiver::start(0, Some(server_config(&real)));
    let endpoint = format!("https://localhost:{}/v1/logs", receiver.port);

    sandbox.write(
        "project/policy.yml",
        &otlp_policy(
            &endpoint,
            &format!("      ca_file: \"{}\"\n", other.ca.display()),
        ),
    );
    let run = run_proxy(&sandbox, 2);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stderr.contains("cannot ship the audit log"),
        "{}",
        run.stderr
    );
    assert_eq!(receiver.requests().len(), 0);

    sandbox.write(
        "project/policy.yml",
        &otlp_policy(
            &endpoint,
            &format!("      ca_file: \"{}\"\n", real.ca.display()),
        ),
    );
    let run = run_proxy(&sandbox, 2);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let local = local_lines(&sandbox);
    assert_eq!(receiver.lines(local.len()), local);
}

/// A TLS server configuration for `certs`' certificate (ring, as the crate uses).
fn server_config(certs: &Certs) -> std::sync::Arc<rustls::ServerConfig> {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};
    let chain = vec![CertificateDer::from_pem_file(&certs.cert).unwrap()];
    let key = PrivateKeyDer::from_pem_file(&certs.key).unwrap();
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    std::sync::Arc::new(
        rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .unwrap(),
    )
}

#[test]
fn a_bad_otlp_setting_is_a_start_up_error_with_its_place() {
    let sandbox = Sandbox::new();
    for (endpoint, extra, expect) in [
        ("grpc://127.0.0.1:4317", "", "not an OTLP/HTTP endpoint"),
        ("https://user:pw@otel.example/v1/logs", "", "user:password"),
        (
            "http://127.0.0.1:4318",
            "      ca_file: ca.pem\n",
            "only to an `https://` endpoint",
        ),
        (
            "http://otel.example:4318",
            "      header_file: otlp.headers\n",
            "plain http://",
        ),
        (
            "https://otel.example",
            "      headers: {Authorization: \"Bearer x\"}\n",
            "looks like a credential",
        ),
        (
            "https://otel.example",
            "      headers: {Content-Type: application/x-protobuf}\n",
            "set by mcpwall itself",
        ),
        ("https://otel.example", "      port: 4318\n", "port"),
    ] {
        sandbox.write("project/policy.yml", &otlp_policy(endpoint, extra));
        let run = sandbox.run(&["explain-policy", "-c", "policy.yml"], "");
        assert_eq!(run.code, 2, "{endpoint}: {}", run.stdout);
        assert!(run.stderr.contains(expect), "{endpoint}: {}", run.stderr);
        assert!(run.stderr.contains("policy.yml:"), "{}", run.stderr);
    }
    // A header file that can't be read stops the proxy before the server starts.
    sandbox.write(
        "project/policy.yml",
        &otlp_policy(
            "http://127.0.0.1:4318",
            "      header_file: missing.headers\n",
        ),
    );
    let run = run_proxy(&sandbox, 1);
    assert_ne!(run.code, 0);
    assert!(run.stderr.contains("missing.headers"), "{}", run.stderr);
}

#[test]
fn an_untrusted_project_file_cannot_ship_the_log_over_otlp() {
    let sandbox = Sandbox::new();
    let receiver = otlp::Receiver::start(0, None);
    sandbox.write(
        "project/.mcpwall.yml",
        &otlp_policy(&format!("http://127.0.0.1:{}/v1/logs", receiver.port), ""),
    );
    let run = sandbox.run(&["--", fake_server()], &session_input(2));
    assert_eq!(run.code, 0, "{}", run.stderr);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(receiver.requests().len(), 0);
}

#[test]
fn syslog_and_otlp_side_by_side_each_get_every_line_and_log_ship_names_both() {
    let Some(rsyslogd) = rsyslogd() else { return };
    let sandbox = Sandbox::new();
    let collector = services::Collector::start(&rsyslogd, &sandbox.root(), free_port(), None);
    let otlp_port = free_port();
    sandbox.write(
        "project/policy.yml",
        &policy(
            &format!("tcp://127.0.0.1:{}", collector.port),
            &format!("    otlp:\n      endpoint: \"http://127.0.0.1:{otlp_port}/v1/logs\"\n"),
        ),
    );
    // The OTLP collector is away: syslog gets its copy all the same.
    let run = run_proxy(&sandbox, 4);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let local = local_lines(&sandbox);
    assert_eq!(collector.lines(local.len()), local);
    // It comes back: `log ship` catches it up, and has nothing left for syslog.
    let receiver = otlp::Receiver::start(otlp_port, None);
    let ship = sandbox.run(&["log", "ship", "-c", "policy.yml"], "");
    assert_eq!(ship.code, 0, "{}{}", ship.stdout, ship.stderr);
    assert!(
        ship.stdout.contains(&format!(
            "shipped 0 lines of {}",
            sandbox.home().join(".mcpwall/logs").display()
        )) && ship
            .stdout
            .contains(&format!("shipped {} lines", local.len())),
        "{}",
        ship.stdout
    );
    assert_eq!(receiver.lines(local.len()), local);
}
