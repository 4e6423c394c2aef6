//! Real services some tests start on loopback (a syslog collector, Prometheus), installed
//! by `.ci/run` (`.ci/services`). Include with
//! `#[path = "support/services.rs"] mod services;`.
#![allow(dead_code)]

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The first of `candidates` that exists; otherwise `None`, after saying on stderr that
/// the test is skipped and how to install `package` — or failing the test when
/// `MCPWALL_REQUIRE_SERVICES` is set (CI installed them: a missing one is a fault there).
pub fn installed(candidates: &[&str], package: &str) -> Option<PathBuf> {
    let found = candidates.iter().map(PathBuf::from).find(|p| p.exists());
    if found.is_none() {
        assert!(
            std::env::var_os("MCPWALL_REQUIRE_SERVICES").is_none(),
            "{package} is not installed, and MCPWALL_REQUIRE_SERVICES is set"
        );
        eprintln!("skipped: {package} is not installed (apt-get install {package})");
    }
    found
}

/// rsyslogd, or `None` (after saying why) when it is not installed here.
pub fn rsyslogd() -> Option<PathBuf> {
    installed(&["/usr/sbin/rsyslogd", "/sbin/rsyslogd"], "rsyslog")
}

/// An rsyslog listening on loopback that writes each message's MSG (the audit line) to
/// `out`, one per line.
pub struct Collector {
    child: Child,
    pub port: u16,
    pub out: PathBuf,
}

impl Collector {
    pub fn start(
        rsyslogd: &Path,
        dir: &Path,
        port: u16,
        tls: Option<(&Path, &Path, &Path)>,
    ) -> Collector {
        let work = dir.join("rsyslog-work");
        std::fs::create_dir_all(&work).unwrap();
        let out = dir.join("collected.audit.jsonl");
        let (global_tls, input_tls) = match tls {
            Some((ca, cert, key)) => (
                format!(
                    "global(DefaultNetstreamDriver=\"gtls\" DefaultNetstreamDriverCAFile=\"{}\" \
                     DefaultNetstreamDriverCertFile=\"{}\" DefaultNetstreamDriverKeyFile=\"{}\")\n",
                    ca.display(),
                    cert.display(),
                    key.display()
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
    pub fn lines(&self, n: usize) -> Vec<String> {
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
