//! `mcpwall serve`'s `/metrics` scraped by a real Prometheus (Debian's, on loopback) with a
//! metrics reader's token: the target is up, and a denial made through the gateway shows
//! in Prometheus's own query API. Prometheus comes from `.ci/run`; without it the test says
//! why and passes, unless `MCPWALL_REQUIRE_SERVICES` is set (CI). Needs
//! `--features test-support`.

#[path = "support/gateway.rs"]
mod gateway;
#[path = "support/services.rs"]
mod services;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use gateway::{Gateway, Home};
use serde_json::{Value, json};

fn prometheus() -> Option<PathBuf> {
    services::installed(
        &["/usr/bin/prometheus", "/usr/local/bin/prometheus"],
        "prometheus",
    )
}

struct Prometheus {
    child: Child,
    port: u16,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Prometheus {
    /// The value of an instant query's first sample, if it has one.
    fn query(&self, promql: &str) -> Option<f64> {
        let mut encoded = String::new();
        for b in promql.bytes() {
            if b.is_ascii_alphanumeric() || b"_-.".contains(&b) {
                encoded.push(b as char);
            } else {
                encoded.push_str(&format!("%{b:02X}"));
            }
        }
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).ok()?;
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        write!(
            stream,
            "GET /api/v1/query?query={encoded} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nConnection: close\r\n\r\n",
            self.port
        )
        .ok()?;
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).ok()?;
        let reply = gateway::Reply::parse(&raw);
        let body: Value = serde_json::from_str(&reply.body).ok()?;
        body["data"]["result"][0]["value"][1].as_str()?.parse().ok()
    }

    /// Waits until `promql`'s value satisfies `ok`; the value.
    fn wait_for(&self, promql: &str, ok: impl Fn(f64) -> bool) -> f64 {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(v) = self.query(promql)
                && ok(v)
            {
                return v;
            }
            assert!(
                Instant::now() < deadline,
                "{promql} never held (last: {:?})",
                self.query(promql)
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

#[test]
fn prometheus_scrapes_the_gateway_with_a_metrics_readers_token() {
    let Some(binary) = prometheus() else { return };
    let home = Home::new();
    let alice = home.token(&["add", "alice"]);
    let reader = home.token(&["add", "prometheus"]);
    let root = home.home();
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
    let target = gw.metrics_address();

    let dir = root.join("prometheus");
    std::fs::create_dir_all(&dir).unwrap();
    let token_file = dir.join("token");
    std::fs::write(&token_file, &reader).unwrap();
    let config = dir.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: mcpwall\n    scrape_interval: 1s\n    authorization:\n      type: Bearer\n      credentials_file: {}\n    static_configs:\n      - targets: [\"{target}\"]\n",
            token_file.display()
        ),
    )
    .unwrap();
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let prometheus = Prometheus {
        child: Command::new(binary)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("prometheus starts"),
        port,
    };

    // The target is up: Prometheus's token was accepted.
    prometheus.wait_for("up{job=\"mcpwall\"}", |v| v == 1.0);

    // A denial through the gateway shows up in Prometheus.
    let auth = format!("Bearer {alice}");
    let session = gw.initialize(&[("Authorization", &auth)]);
    let r = gw.post(
        Some(&session),
        json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"forbidden","arguments":{"text":"x"}}})
            .to_string()
            .as_bytes(),
        &[("Authorization", &auth)],
    );
    assert_eq!(r.json()["error"]["code"], -32001, "{}", r.body);
    let denials = "mcpwall_verdicts_total{rule=\"deny-forbidden\",verdict=\"deny\"}";
    assert_eq!(prometheus.wait_for(denials, |v| v >= 1.0), 1.0);
}
