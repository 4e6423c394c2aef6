//! The audit log shipped to a real collector (Debian's rsyslog, on loopback): every line
//! of the local chain arrives byte for byte and the collected copy verifies; lines written
//! while the collector was away, or by a proxy killed before it shipped them, arrive with
//! `mcpwall log ship`; two proxies sharing a log send each line once; TLS is verified
//! against the configured CA; a bad address is a start-up error pointing into the file.
//!
//! rsyslog comes from `.ci/run`; without it these tests print why and pass, unless
//! `MCPWALL_REQUIRE_SERVICES` is set (CI), where a missing collector fails them.

#[path = "support/sandbox.rs"]
mod sandbox;
#[path = "support/services.rs"]
mod services;

use std::collections::HashSet;
use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use sandbox::Sandbox;

fn fake_server() -> &'static str {
    env!("CARGO_BIN_EXE_mcpwall-fake-server")
}

/// rsyslogd, or `None` (after saying why) when it is not installed here.
fn rsyslogd() -> Option<PathBuf> {
    services::installed(&["/usr/sbin/rsyslogd", "/sbin/rsyslogd"], "rsyslog")
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

/// An rsyslog listening on loopback that writes each message's MSG (the audit line) to
/// `out`, one per line.
struct Collector {
    child: Child,
    port: u16,
    out: PathBuf,
}

impl Collector {
    fn start(rsyslogd: &Path, dir: &Path, port: u16, tls: Option<&Certs>) -> Collector {
        let work = dir.join("rsyslog-work");
        std::fs::create_dir_all(&work).unwrap();
        let out = dir.join("collected.audit.jsonl");
        let (global_tls, input_tls) = match tls {
            Some(c) => (
                format!(
                    "global(DefaultNetstreamDriver=\"gtls\" DefaultNetstreamDriverCAFile=\"{}\" \
                     DefaultNetstreamDriverCertFile=\"{}\" DefaultNetstreamDriverKeyFile=\"{}\")\n",
                    c.ca.display(),
                    c.cert.display(),
                    c.key.display()
                ),
                " StreamDriver.Name=\"gtls\" StreamDriver.Mode=\"1\" StreamDriver.AuthMode=\"anon\"",
            ),
            None => (String::new(), ""),
        };
        let conf = format!(
            "global(workDirectory=\"{work}\" maxMessageSize=\"1m\")\n{global_tls}\
             module(load=\"imtcp\"{input_tls})\n\
             template(name=\"line\" type=\"string\" string=\"%msg%\\n\")\n\
             ruleset(name=\"audit\") {{ action(type=\"omfile\" file=\"{out}\" template=\"line\") }}\n\
             input(type=\"imtcp\" address=\"127.0.0.1\" port=\"{port}\" ruleset=\"audit\")\n",
            work = work.display(),
            out = out.display(),
        );
        let conf_path = dir.join(format!("rsyslog-{port}.conf"));
        std::fs::write(&conf_path, conf).unwrap();
        let child = Command::new(rsyslogd)
            .arg("-n")
            .arg("-f")
            .arg(&conf_path)
            .arg("-i")
            .arg(dir.join(format!("rsyslog-{port}.pid")))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("rsyslogd starts");
        let collector = Collector { child, port, out };
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "rsyslogd did not listen on {port}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        collector
    }

    /// The collected lines, once there are `n` of them (or the deadline passed).
    fn lines(&self, n: usize) -> Vec<String> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let text = std::fs::read_to_string(&self.out).unwrap_or_default();
            let lines: Vec<String> = text.lines().map(str::to_string).collect();
            if lines.len() >= n || Instant::now() > deadline {
                return lines;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
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
    let collector = Collector::start(&rsyslogd, &sandbox.root(), free_port(), None);
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

    let collector = Collector::start(&rsyslogd, &sandbox.root(), port, None);
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
    let collector = Collector::start(&rsyslogd, &sandbox.root(), free_port(), None);
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
    let collector = Collector::start(&rsyslogd, &root, free_port(), Some(&real));
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
