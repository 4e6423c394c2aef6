//! A real `mcpwall serve` on loopback for integration tests: a temporary HOME (its token
//! file issued by the real `mcpwall token`), the fake server behind it, raw HTTP/1.1
//! exchanges, WebSocket sockets, the audit log and the gateway's stderr. Include with
//! `#[path = "support/gateway.rs"] mod gateway;` (needs `--features test-support`).
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::{self, Message, client::IntoClientRequest};

pub const WAIT: Duration = Duration::from_secs(60);

pub type Socket = tungstenite::WebSocket<TcpStream>;

/// A temporary HOME and log directory, before or after a gateway runs in them.
pub struct Home {
    pub dir: tempfile::TempDir,
}

impl Home {
    pub fn new() -> Home {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("home")).unwrap();
        Home { dir }
    }

    pub fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }

    pub fn tokens_file(&self) -> PathBuf {
        self.home().join(".mcpwall").join("tokens")
    }

    /// `mcpwall token ARGS` in this HOME; its stdout (the token, for `add`).
    pub fn token(&self, args: &[&str]) -> String {
        let out = Command::new(env!("CARGO_BIN_EXE_mcpwall"))
            .arg("token")
            .args(args)
            .env("HOME", self.home())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "token {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    }

    /// The rules of the policy [`Gateway::serve`] writes.
    pub const RULES: &'static str =
        "  - name: deny-forbidden\n    match: {tool: forbidden}\n    action: deny\n";

    /// The policy file `serve -c` reads.
    pub fn policy_file(&self) -> PathBuf {
        self.dir.path().join("policy.yml")
    }

    /// Write the policy: the audit log in this directory, `settings` lines, then `rules`
    /// (YAML list items under `rules:`).
    pub fn write_policy(&self, settings: &str, rules: &str) -> PathBuf {
        let policy = self.policy_file();
        std::fs::write(
            &policy,
            format!(
                "version: 1\nsettings:\n  log_dir: \"{}\"\n{settings}\nrules:\n{rules}",
                self.dir.path().join("logs").display()
            ),
        )
        .unwrap();
        policy
    }

    fn command(&self, settings: &str, extra: &[&str]) -> Command {
        self.command_with(settings, Home::RULES, extra)
    }

    fn command_with(&self, settings: &str, rules: &str, extra: &[&str]) -> Command {
        self.command_for(
            settings,
            rules,
            extra,
            &[env!("CARGO_BIN_EXE_mcpwall-fake-server")],
        )
    }

    /// `mcpwall serve` fronting the server command `server`.
    fn command_for(&self, settings: &str, rules: &str, extra: &[&str], server: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_mcpwall"));
        cmd.args(["serve", "--listen", "127.0.0.1:0", "-c"])
            .arg(self.write_policy(settings, rules))
            .args(extra)
            .arg("--")
            .args(server)
            .env("HOME", self.home())
            .env("FAKE_RECV_LOG", self.dir.path().join("received.jsonl"))
            .current_dir(self.dir.path())
            .stdin(Stdio::null());
        cmd
    }

    /// `mcpwall serve` that is expected to refuse to start: its exit code and stderr.
    pub fn serve_fails(&self) -> (Option<i32>, String) {
        let mut child = self
            .command("", &[])
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                let mut err = String::new();
                child
                    .stderr
                    .take()
                    .unwrap()
                    .read_to_string(&mut err)
                    .unwrap();
                return (status.code(), err);
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("mcpwall serve started on a token file it should refuse");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Everything in the audit log directory.
    pub fn audit(&self) -> String {
        let mut text = String::new();
        if let Ok(entries) = std::fs::read_dir(self.dir.path().join("logs")) {
            for e in entries {
                text.push_str(&std::fs::read_to_string(e.unwrap().path()).unwrap_or_default());
            }
        }
        text
    }

    pub fn received(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("received.jsonl")).unwrap_or_default()
    }
}

/// A running `mcpwall serve`.
pub struct Gateway {
    pub child: Child,
    pub addr: String,
    pub home: Home,
    stderr: Arc<Mutex<String>>,
}

impl Gateway {
    /// Serve from `home` (tokens issued there before, or none) with `settings` lines.
    pub fn serve(home: Home, settings: &str) -> Gateway {
        Gateway::serve_with(home, settings, &[])
    }

    /// [`Gateway::serve`] with extra `serve` arguments.
    pub fn serve_with(home: Home, settings: &str, extra: &[&str]) -> Gateway {
        Gateway::serve_rules(home, settings, Home::RULES, extra)
    }

    /// [`Gateway::serve_with`] with the policy's `rules` (YAML list items).
    pub fn serve_rules(home: Home, settings: &str, rules: &str, extra: &[&str]) -> Gateway {
        Gateway::serve_env(home, settings, rules, extra, &[])
    }

    /// [`Gateway::serve_rules`] with `env` added to the environment its servers inherit.
    pub fn serve_env(
        home: Home,
        settings: &str,
        rules: &str,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Gateway {
        let command = home.command_with(settings, rules, extra);
        Gateway::spawn(home, command, env)
    }

    /// [`Gateway::serve_env`] fronting the server command `server` instead of the fake
    /// server.
    pub fn serve_server(
        home: Home,
        settings: &str,
        extra: &[&str],
        server: &[&str],
        env: &[(&str, &str)],
    ) -> Gateway {
        let command = home.command_for(settings, Home::RULES, extra, server);
        Gateway::spawn(home, command, env)
    }

    fn spawn(home: Home, mut command: Command, env: &[(&str, &str)]) -> Gateway {
        let mut child = command
            .envs(env.iter().copied())
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
            if let Some(rest) = line.split("http://").nth(1) {
                break rest.split('/').next().unwrap().to_string();
            }
        };
        let kept = Arc::new(Mutex::new(String::new()));
        let sink = kept.clone();
        std::thread::spawn(move || {
            let mut line = String::new();
            while stderr.read_line(&mut line).unwrap_or(0) > 0 {
                eprint!("{line}");
                sink.lock().unwrap().push_str(&line);
                line.clear();
            }
        });
        Gateway {
            child,
            addr,
            home,
            stderr: kept,
        }
    }

    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Wait until `ready` holds of the gateway's stderr so far; that stderr.
    pub fn stderr_until(&self, what: &str, ready: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let text = self.stderr();
            if ready(&text) {
                return text;
            }
            assert!(Instant::now() < deadline, "no {what} on stderr:\n{text}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Where `--metrics-listen` listens, once the gateway says so on stderr.
    pub fn metrics_address(&self) -> String {
        let stderr = self.stderr_until("the metrics address", |e| e.contains("metrics at http://"));
        stderr
            .split("metrics at http://")
            .nth(1)
            .unwrap()
            .split('/')
            .next()
            .unwrap()
            .to_string()
    }

    /// The audit log once a line holds every one of `needles` (the writer lingers).
    pub fn audit_with(&self, needles: &[&str]) -> String {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let text = self.home.audit();
            if text.lines().any(|l| needles.iter().all(|n| l.contains(n)))
                || Instant::now() > deadline
            {
                return text;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Stop the gateway (SIGTERM) and wait for it.
    pub fn stop(&mut self) {
        let _ = Command::new("kill")
            .arg(self.child.id().to_string())
            .status();
        let deadline = Instant::now() + WAIT;
        while self.child.try_wait().unwrap().is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
    }

    /// One HTTP/1.1 exchange on a fresh connection to `path`; the whole response.
    pub fn send_to(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Reply {
        let mut stream = TcpStream::connect(&self.addr).unwrap();
        stream.set_read_timeout(Some(WAIT)).unwrap();
        stream
            .write_all(&request(&self.addr, method, path, headers, body, true))
            .unwrap();
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).unwrap();
        Reply::parse(&raw)
    }

    pub fn post(&self, session: Option<&str>, body: &[u8], extra: &[(&str, &str)]) -> Reply {
        let mut headers = vec![
            ("Accept", "application/json, text/event-stream"),
            ("Content-Type", "application/json"),
        ];
        if let Some(s) = session {
            headers.push(("Mcp-Session-Id", s));
        }
        headers.extend_from_slice(extra);
        self.send_to("POST", "/mcp", &headers, body)
    }

    /// `initialize` over Streamable HTTP with `extra` headers; the session id.
    pub fn initialize(&self, extra: &[(&str, &str)]) -> String {
        let r = self.post(None, initialize_msg().to_string().as_bytes(), extra);
        assert_eq!(r.status, 200, "{}", r.body);
        r.header("mcp-session-id")
            .expect("a session id")
            .to_string()
    }

    /// Open `/ws` with `headers`; `Err(status)` when the upgrade is refused.
    pub fn websocket(&self, headers: &[(&str, &str)]) -> Result<Socket, u16> {
        let stream = TcpStream::connect(&self.addr).unwrap();
        stream.set_read_timeout(Some(WAIT)).unwrap();
        let mut req = format!("ws://{}/ws", self.addr)
            .into_client_request()
            .unwrap();
        req.headers_mut()
            .insert("Sec-WebSocket-Protocol", "mcp".parse().unwrap());
        for (k, v) in headers {
            let name = tungstenite::http::HeaderName::from_bytes(k.as_bytes()).unwrap();
            req.headers_mut().insert(name, v.parse().unwrap());
        }
        match tungstenite::client(req, stream) {
            Ok((socket, _)) => Ok(socket),
            Err(tungstenite::HandshakeError::Failure(tungstenite::Error::Http(r))) => {
                Err(r.status().as_u16())
            }
            Err(e) => panic!("WebSocket handshake: {e}"),
        }
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The bytes of one HTTP/1.1 request (`Host` added unless given).
pub fn request(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
    close: bool,
) -> Vec<u8> {
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nContent-Length: {}\r\n",
        body.len()
    );
    if close {
        req.push_str("Connection: close\r\n");
    }
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        req.push_str(&format!("Host: {addr}\r\n"));
    }
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    let mut bytes = req.into_bytes();
    bytes.extend_from_slice(body);
    bytes
}

pub fn initialize_msg() -> Value {
    json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}})
}

/// Send one JSON-RPC message and read text messages until the answer to it;
/// `Err` with what ended the socket instead.
pub fn ws_call(socket: &mut Socket, msg: &Value) -> Result<Value, String> {
    socket
        .send(Message::text(msg.to_string()))
        .map_err(|e| e.to_string())?;
    loop {
        match socket.read() {
            Ok(Message::Text(t)) => {
                let v: Value = serde_json::from_str(t.as_str()).unwrap();
                if v.get("id") == msg.get("id") && v.get("method").is_none() {
                    return Ok(v);
                }
            }
            Ok(Message::Close(c)) => return Err(format!("closed: {c:?}")),
            Ok(_) => {}
            Err(e) => return Err(e.to_string()),
        }
    }
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

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The body as JSON (the data of the first SSE event for a stream).
    pub fn json(&self) -> Value {
        if self.header("content-type") == Some("text/event-stream") {
            let data = self
                .body
                .lines()
                .find_map(|l| l.strip_prefix("data: "))
                .expect("an SSE event");
            return serde_json::from_str(data).unwrap();
        }
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 || rest.len() < n + 2 {
            out.push_str(&rest[..n.min(rest.len())]);
            break;
        }
        out.push_str(&rest[..n]);
        body = &rest[n + 2..];
    }
    out
}

/// Set `path`'s mode (Unix permission bits).
#[cfg(unix)]
pub fn chmod(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}
