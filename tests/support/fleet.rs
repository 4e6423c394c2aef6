//! A fleet on loopback: a `redis-server`, an HAProxy and an nginx of their own (Debian's
//! packages), started on free ports and killed when dropped. Include with
//! `#[path = "support/fleet.rs"] mod fleet;` beside `support/gateway.rs`.
//!
//! A missing tool skips the test with the reason on stderr; with
//! `MCPWALL_REQUIRE_SERVICES=1` (CI, which installs them: `.ci/services`) it fails instead.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// `name` on PATH or in the sbin directories (HAProxy is in `/usr/sbin`, often not on a
/// user's PATH); `None` (test skipped) or a panic (`MCPWALL_REQUIRE_SERVICES`) when missing.
pub fn tool(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let found = std::env::split_paths(&path)
        .chain(["/usr/sbin".into(), "/usr/local/sbin".into(), "/sbin".into()])
        .map(|d: PathBuf| d.join(name))
        .find(|p| p.is_file());
    if found.is_none() {
        let why = format!("{name} is not installed (Debian: apt-get install {name})");
        if std::env::var_os("MCPWALL_REQUIRE_SERVICES").is_some() {
            panic!("{why}; MCPWALL_REQUIRE_SERVICES is set");
        }
        eprintln!("skipped: {why}");
    }
    found
}

/// A free loopback port (bound, then released).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn wait_listening(port: u16, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "{what} never listened on {port}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A child killed (and reaped) when dropped.
pub struct Running {
    pub child: Child,
    pub port: u16,
    /// Files the process needs while it runs (nginx's configuration and temp files).
    pub dir: Option<tempfile::TempDir>,
}

impl Running {
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.kill();
    }
}

/// `redis-server` on a free loopback port, without persistence.
pub fn redis(binary: &Path) -> Running {
    let port = free_port();
    let child = Command::new(binary)
        .args(["--bind", "127.0.0.1", "--port", &port.to_string()])
        .args([
            "--save",
            "",
            "--appendonly",
            "no",
            "--protected-mode",
            "yes",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let running = Running {
        child,
        port,
        dir: None,
    };
    wait_listening(port, "redis-server");
    running
}

/// HAProxy with the documented configuration (`docs/fleet/haproxy.cfg`), listening on a
/// free port, in front of replicas `a`, `b` and `c` at these addresses.
pub fn haproxy(binary: &Path, [replica_a, replica_b, replica_c]: [&str; 3]) -> Running {
    let port = free_port();
    let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/fleet/haproxy.cfg");
    let child = Command::new(binary)
        .args(["-db", "-f"])
        .arg(&config)
        .env("MCPWALL_LB_LISTEN", format!("127.0.0.1:{port}"))
        .env("MCPWALL_REPLICA_A", replica_a)
        .env("MCPWALL_REPLICA_B", replica_b)
        .env("MCPWALL_REPLICA_C", replica_c)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let running = Running {
        child,
        port,
        dir: None,
    };
    wait_listening(port, "haproxy");
    running
}

/// nginx with the documented configuration (`docs/fleet/nginx.conf`, its `http` part),
/// listening on a free port, in front of replicas `a` and `b` at these addresses: the
/// file's example addresses are replaced, nothing else. One process (`master_process
/// off`), so killing it leaves no worker behind.
pub fn nginx(binary: &Path, [replica_a, replica_b]: [&str; 2]) -> Running {
    let port = free_port();
    let documented = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/fleet/nginx.conf"),
    )
    .unwrap();
    for example in ["127.0.0.1:8801", "127.0.0.1:8802", "127.0.0.1:8808"] {
        assert!(
            documented.contains(example),
            "nginx.conf no longer names {example}"
        );
    }
    let routing = documented
        .replace("127.0.0.1:8801", replica_a)
        .replace("127.0.0.1:8802", replica_b)
        .replace("127.0.0.1:8808", &format!("127.0.0.1:{port}"));
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::write(root.join("mcpwall.conf"), routing).unwrap();
    let main = format!(
        "daemon off;
master_process off;
error_log stderr warn;
pid {root}/nginx.pid;
         events {{ worker_connections 256; }}
         http {{
  access_log off;
  client_body_temp_path {root}/body;
  proxy_temp_path {root}/proxy;
           fastcgi_temp_path {root}/fastcgi;
  uwsgi_temp_path {root}/uwsgi;
  scgi_temp_path {root}/scgi;
           include {root}/mcpwall.conf;
}}
",
        root = root.display()
    );
    std::fs::write(root.join("nginx.conf"), main).unwrap();
    let child = Command::new(binary)
        .args(["-e", "stderr", "-p"])
        .arg(root)
        .arg("-c")
        .arg(root.join("nginx.conf"))
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let running = Running {
        child,
        port,
        dir: Some(dir),
    };
    wait_listening(port, "nginx");
    running
}

/// One HTTP/1.1 exchange with `addr` on a fresh connection: (status, headers, body).
pub fn exchange(
    addr: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> (u16, String, String) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut req = format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    stream.write_all(req.as_bytes()).unwrap();
    stream.write_all(body).unwrap();
    let mut raw = Vec::new();
    let _ = stream.read_to_end(&mut raw);
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, head.to_string(), body.to_string())
}

/// The value of header `name` in `head`.
pub fn header(head: &str, name: &str) -> Option<String> {
    head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim()
            .eq_ignore_ascii_case(name)
            .then(|| v.trim().to_string())
    })
}
