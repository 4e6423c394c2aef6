//! The harness of the load tests (`tests/gateway_load.rs`). A real `mcpwall serve` process in front of `mcpwall-fake-server`, on loopback, with a
//! temporary HOME, its tokens issued before it starts; raw HTTP/1.1 and WebSocket
//! exchanges with it, and what the kernel says about its memory and CPU time.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

pub const WAIT: Duration = Duration::from_secs(30);

pub struct Serve {
    pub child: Child,
    pub addr: String,
    pub dir: tempfile::TempDir,
    /// The bearer tokens of the identities asked for, in order.
    pub tokens: Vec<String>,
}

impl Serve {
    /// `settings` is YAML indented under `settings:`.
    pub fn launch(settings: &str, identities: &[&str]) -> Serve {
        Serve::launch_limited(settings, identities, None)
    }

    /// [`Serve::launch`] with the process's descriptor limit set to `nofile`.
    pub fn launch_limited(settings: &str, identities: &[&str], nofile: Option<u32>) -> Serve {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        std::fs::create_dir_all(&home).unwrap();
        let tokens = identities
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
                "version: 1\nsettings:\n  log_dir: \"{}\"\n{settings}\nrules:\n  - name: block-ssh\n    match:\n      method: \"*\"\n      arguments:\n        _any_value: {{regex: '\\.ssh'}}\n    action: deny\noutbound_rules:\n  - name: redact-secrets\n    match: {{secrets: true}}\n    action: redact\n",
                dir.path().join("logs").display()
            ),
        )
        .unwrap();
        let mut command = match nofile {
            None => Command::new(env!("CARGO_BIN_EXE_mcpwall")),
            Some(n) => {
                let mut c = Command::new("sh");
                c.args([
                    "-c",
                    &format!("ulimit -n {n} && exec \"$0\" \"$@\""),
                    env!("CARGO_BIN_EXE_mcpwall"),
                ]);
                c
            }
        };
        let mut child = command
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
        Serve {
            child,
            addr,
            dir,
            tokens,
        }
    }

    /// Resident memory now and at its highest, in KiB (`/proc/PID/status`).
    pub fn memory(&self) -> Memory {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.split_whitespace().next()?.parse().ok())
                .unwrap_or(0)
        };
        Memory {
            rss_kib: field("VmRSS:"),
            hwm_kib: field("VmHWM:"),
        }
    }

    /// CPU time used so far, user and system, in clock ticks (`/proc/PID/stat`).
    pub fn cpu_ticks(&self) -> u64 {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())).unwrap();
        // After the command name in parentheses: state is field 3; utime, stime 14, 15.
        let rest = &stat[stat.rfind(')').unwrap() + 2..];
        let fields: Vec<&str> = rest.split_whitespace().collect();
        fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
    }

    /// The server processes `serve` has running.
    pub fn servers(&self) -> usize {
        let mut n = 0;
        let tasks = format!("/proc/{}/task", self.child.id());
        for t in std::fs::read_dir(tasks).unwrap() {
            let text =
                std::fs::read_to_string(t.unwrap().path().join("children")).unwrap_or_default();
            n += text.split_whitespace().count();
        }
        n
    }

    pub fn connect(&self) -> TcpStream {
        let stream = TcpStream::connect(&self.addr).unwrap();
        stream.set_read_timeout(Some(WAIT)).unwrap();
        stream
    }

    /// One HTTP/1.1 exchange on a fresh connection; the whole response.
    pub fn send(&self, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Reply {
        let mut stream = self.connect();
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
        stream.read_to_end(&mut raw).unwrap();
        Reply::parse(&raw)
    }

    /// A POST to `/mcp` with `token`, on `session` if given.
    pub fn post(&self, token: &str, session: Option<&str>, body: &[u8]) -> Reply {
        let auth = format!("Bearer {token}");
        let mut headers = vec![
            ("Accept", "application/json, text/event-stream"),
            ("Content-Type", "application/json"),
            ("Authorization", auth.as_str()),
        ];
        if let Some(s) = session {
            headers.push(("Mcp-Session-Id", s));
        }
        self.send("POST", "/mcp", &headers, body)
    }

    /// `initialize` for `token`: the reply (200 with a session id, or a refusal).
    pub fn open(&self, token: &str) -> Reply {
        self.post(token, None, initialize().to_string().as_bytes())
    }

    /// A new session of `token`'s; panics unless it opens.
    pub fn session(&self, token: &str) -> String {
        let r = self.open(token);
        assert_eq!(r.status, 200, "initialize: {}", r.body);
        r.header("mcp-session-id").unwrap().to_string()
    }

    /// A WebSocket upgrade with `token` on a raw connection; the stream after the 101.
    pub fn websocket(&self, token: &str) -> TcpStream {
        let mut stream = self.connect();
        let req = format!(
            "GET /ws HTTP/1.1\r\nHost: {}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Protocol: mcp\r\nAuthorization: Bearer {token}\r\n\r\n",
            self.addr
        );
        stream.write_all(req.as_bytes()).unwrap();
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            assert_eq!(
                stream.read(&mut byte).unwrap(),
                1,
                "upgrade answer cut short"
            );
            head.push(byte[0]);
        }
        let head = String::from_utf8_lossy(&head);
        assert!(head.starts_with("HTTP/1.1 101"), "{head}");
        stream
    }
}

impl Drop for Serve {
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

#[derive(Debug, Clone, Copy, Default)]
pub struct Memory {
    pub rss_kib: u64,
    pub hwm_kib: u64,
}

pub fn initialize() -> Value {
    json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}})
}

pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Reply {
    pub fn parse(raw: &[u8]) -> Reply {
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
        let headers: Vec<(String, String)> = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
            .collect();
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

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 || rest.len() < n + 2 {
            break;
        }
        out.push_str(&rest[..n]);
        body = &rest[n + 2..];
    }
    out
}

/// WebSocket opcodes a test sends or reads.
pub const WS_TEXT: u8 = 0x1;
pub const WS_CLOSE: u8 = 0x8;
pub const WS_PING: u8 = 0x9;
pub const WS_PONG: u8 = 0xa;

/// One client frame (masked, as RFC 6455 requires of clients; the zero mask leaves the
/// payload as it is).
pub fn ws_frame(opcode: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = vec![0x80 | opcode];
    match payload.len() {
        n if n < 126 => out.push(0x80 | n as u8),
        n if n <= 0xffff => {
            out.push(0x80 | 126);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            out.push(0x80 | 127);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    out.extend_from_slice(&[0, 0, 0, 0]);
    out.extend_from_slice(payload);
    out
}

/// Read one server frame: its opcode and payload; `None` at the end of the connection.
pub fn ws_read(stream: &mut impl Read) -> Option<(u8, Vec<u8>)> {
    let mut head = [0u8; 2];
    stream.read_exact(&mut head).ok()?;
    let len = match head[1] & 0x7f {
        126 => {
            let mut b = [0u8; 2];
            stream.read_exact(&mut b).ok()?;
            u16::from_be_bytes(b) as usize
        }
        127 => {
            let mut b = [0u8; 8];
            stream.read_exact(&mut b).ok()?;
            u64::from_be_bytes(b) as usize
        }
        n => n as usize,
    };
    let mut payload = vec![0u8; len];
    stream.read_exact(&mut payload).ok()?;
    Some((head[0] & 0x0f, payload))
}

/// Latencies of calls, and what the gateway's memory was meanwhile.
#[derive(Debug, Default)]
pub struct Fairness {
    pub latencies: Vec<Duration>,
    pub failures: Vec<String>,
    pub peak: Memory,
}

impl Fairness {
    pub fn p99(&self) -> Duration {
        let mut sorted = self.latencies.clone();
        sorted.sort();
        let at = (sorted.len() * 99).div_ceil(100).saturating_sub(1);
        sorted.get(at).copied().unwrap_or_default()
    }

    pub fn max(&self) -> Duration {
        self.latencies.iter().max().copied().unwrap_or_default()
    }
}

/// A victim's small calls on `session`, one every `every`, for `run`: each call's time
/// (a fresh connection each, as a client after a pause makes), and the gateway's memory
/// sampled between them.
pub fn victim_calls(
    gw: &Serve,
    token: &str,
    session: &str,
    run: Duration,
    every: Duration,
) -> Fairness {
    let mut out = Fairness::default();
    let end = Instant::now() + run;
    let mut n = 0u64;
    while Instant::now() < end {
        n += 1;
        let body = json!({"jsonrpc":"2.0","id":n,"method":"tools/call",
            "params":{"name":"echo","arguments":{"text":"hello"}}})
        .to_string();
        let started = Instant::now();
        let r = gw.post(token, Some(session), body.as_bytes());
        let took = started.elapsed();
        if r.status != 200 || !r.body.contains("hello") {
            out.failures.push(format!("{}: {}", r.status, r.body));
        }
        out.latencies.push(took);
        let m = gw.memory();
        out.peak.rss_kib = out.peak.rss_kib.max(m.rss_kib);
        out.peak.hwm_kib = out.peak.hwm_kib.max(m.hwm_kib);
        std::thread::sleep(every.saturating_sub(took));
    }
    out
}
