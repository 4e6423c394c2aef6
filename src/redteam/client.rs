//! A small synchronous MCP client over a child's stdio, with timeouts on every wait.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// Why a session failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("cannot start {program}: {source}")]
    Spawn {
        program: String,
        source: std::io::Error,
    },
    #[error("no answer from the server within {:?}{}", .0, said(.1))]
    Timeout(Duration, String),
    #[error("the server closed its output{}", said(.0))]
    Closed(String),
    #[error("cannot write to the server: {}{}", .0, said(.1))]
    Write(std::io::Error, String),
    #[error("handshake failed: {}{}", .0, said(.1))]
    Handshake(String, String),
}

/// What the server wrote on stderr, for an error message: where it says why it failed.
fn said(stderr: &str) -> String {
    let text = stderr.trim();
    if text.is_empty() {
        return String::new();
    }
    let shown: Vec<String> = text.lines().map(|l| super::report::clean(l, 200)).collect();
    format!("; its stderr ends:\n    {}", shown.join("\n    "))
}

/// The most of a server's stderr kept: its last lines say why it failed.
const STDERR_KEPT: usize = 2048;

/// One running session.
pub struct Session {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    /// The tail of the server's stderr (at most [`STDERR_KEPT`] bytes).
    stderr: Arc<Mutex<Vec<u8>>>,
    timeout: Duration,
    next_id: u64,
}

const SENTINEL_BASE: u64 = 900_000_000;

impl Session {
    /// Spawn `argv` with HOME set to `home` and the working directory `cwd`.
    pub fn spawn(
        argv: &[String],
        home: &Path,
        cwd: &Path,
        timeout: Duration,
    ) -> Result<Session, ClientError> {
        let (program, args) = argv.split_first().ok_or_else(|| ClientError::Spawn {
            program: String::new(),
            source: std::io::Error::other("empty command"),
        })?;
        let mut child = Command::new(program)
            .args(args)
            .env("HOME", home)
            .current_dir(cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|source| ClientError::Spawn {
                program: program.clone(),
                source,
            })?;
        let stderr = Arc::new(Mutex::new(Vec::new()));
        if let Some(mut pipe) = child.stderr.take() {
            let tail = Arc::clone(&stderr);
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                while let Ok(n) = std::io::Read::read(&mut pipe, &mut buf) {
                    if n == 0 {
                        break;
                    }
                    let mut kept = tail.lock().unwrap_or_else(|e| e.into_inner());
                    kept.extend_from_slice(&buf[..n]);
                    let over = kept.len().saturating_sub(STDERR_KEPT);
                    kept.drain(..over);
                }
            });
        }
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take();
        Ok(Session {
            child,
            stdin,
            lines: rx,
            stderr,
            timeout,
            next_id: 1,
        })
    }

    /// initialize + notifications/initialized; returns the initialize result and tools/list tools.
    pub fn handshake(&mut self) -> Result<(Value, Vec<Value>), ClientError> {
        let result = self.initialize()?;
        let list = self.request("tools/list", json!({}))?;
        let tools = list["result"]["tools"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        Ok((result, tools))
    }

    /// `initialize` and `notifications/initialized`; returns the initialize result.
    pub fn initialize(&mut self) -> Result<Value, ClientError> {
        let init = self.request(
            "initialize",
            json!({
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "mcpwall-scan", "version": env!("CARGO_PKG_VERSION")}
            }),
        )?;
        let result = init
            .get("result")
            .cloned()
            .ok_or_else(|| ClientError::Handshake(init.to_string(), self.stderr_tail()))?;
        self.send_raw(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)?;
        Ok(result)
    }

    /// Send one request and wait for the reply with its id.
    pub fn request(&mut self, method: &str, params: Value) -> Result<Value, ClientError> {
        let id = self.next_id;
        self.next_id += 1;
        let frame = json!({"jsonrpc":"2.0","id":id,"method":method,"params":params});
        self.send_raw(&frame.to_string())?;
        let deadline = Instant::now() + self.timeout;
        loop {
            let line = self.recv(deadline)?;
            if let Ok(v) = serde_json::from_str::<Value>(&line)
                && v.get("id") == Some(&json!(id))
            {
                return Ok(v);
            }
        }
    }

    /// Send raw bytes (one frame, newline added), then a `ping` sentinel; return every line
    /// received before the sentinel's answer.
    pub fn exchange(&mut self, raw: &str) -> Result<Vec<String>, ClientError> {
        self.send_raw(raw)?;
        let sentinel = SENTINEL_BASE + self.next_id;
        self.next_id += 1;
        self.send_raw(&json!({"jsonrpc":"2.0","id":sentinel,"method":"ping"}).to_string())?;
        let deadline = Instant::now() + self.timeout;
        let mut got = Vec::new();
        loop {
            let line = self.recv(deadline)?;
            if let Ok(v) = serde_json::from_str::<Value>(&line)
                && v.get("id") == Some(&json!(sentinel))
            {
                return Ok(got);
            }
            got.push(line);
        }
    }

    pub fn next_id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    fn send_raw(&mut self, raw: &str) -> Result<(), ClientError> {
        let Some(stdin) = self.stdin.as_mut() else {
            return Err(ClientError::Closed(String::new()));
        };
        let written = stdin
            .write_all(raw.as_bytes())
            .and_then(|()| stdin.write_all(b"\n"))
            .and_then(|()| stdin.flush());
        written.map_err(|e| {
            // A server that exited: its last words may still be on their way.
            std::thread::sleep(Duration::from_millis(50));
            ClientError::Write(e, self.stderr_tail())
        })
    }

    fn recv(&self, deadline: Instant) -> Result<String, ClientError> {
        let left = deadline.saturating_duration_since(Instant::now());
        match self.lines.recv_timeout(left) {
            Ok(l) => Ok(l),
            Err(RecvTimeoutError::Timeout) => {
                Err(ClientError::Timeout(self.timeout, self.stderr_tail()))
            }
            Err(RecvTimeoutError::Disconnected) => {
                // The child's last words may still be on their way through the pipe.
                std::thread::sleep(Duration::from_millis(50));
                Err(ClientError::Closed(self.stderr_tail()))
            }
        }
    }

    /// What the server has written on stderr so far (its last [`STDERR_KEPT`] bytes).
    pub fn stderr_tail(&self) -> String {
        let kept = self.stderr.lock().unwrap_or_else(|e| e.into_inner());
        String::from_utf8_lossy(&kept).into_owned()
    }

    /// Close stdin, give the child a moment, then kill it.
    pub fn close(mut self) {
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_millis(1500);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
