//! A minimal OpenTelemetry logs receiver on loopback: OTLP/HTTP with JSON encoding, plain
//! or TLS, for the shipping tests. No OpenTelemetry collector is packaged for Debian, PyPI
//! or npm, so the tests bring this one: it keeps every request it took (path, headers,
//! the parsed `ExportLogsServiceRequest`), can demand a header, can refuse a number of
//! requests first, and can take some while saying it dropped part of them. Include with `#[path = "support/otlp.rs"] mod otlp;`.
#![allow(dead_code)]

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::Value;

/// One request the receiver answered.
#[derive(Debug, Clone)]
pub struct Request {
    pub path: String,
    /// Names in lowercase.
    pub headers: Vec<(String, String)>,
    pub body: Value,
    /// The status it was answered with.
    pub status: u16,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// Every `LogRecord` of the request, in order.
    pub fn records(&self) -> Vec<Value> {
        let mut out = Vec::new();
        for resource in self.body["resourceLogs"].as_array().into_iter().flatten() {
            for scope in resource["scopeLogs"].as_array().into_iter().flatten() {
                out.extend(
                    scope["logRecords"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .cloned(),
                );
            }
        }
        out
    }
}

#[derive(Default)]
struct State {
    requests: Vec<Request>,
    /// Statuses to answer the next requests with, before 200.
    refusals: VecDeque<u16>,
    /// Partial successes to answer the next taken requests with: how many of its records
    /// each says it dropped, and why.
    drops: VecDeque<(u64, String)>,
    /// A header every request must carry (else 401).
    required: Option<(String, String)>,
}

pub struct Receiver {
    pub port: u16,
    state: Arc<Mutex<State>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Receiver {
    /// Listen on `127.0.0.1:port` (0: any free port), with TLS when `tls` is given.
    pub fn start(port: u16, tls: Option<Arc<rustls::ServerConfig>>) -> Receiver {
        let listener = TcpListener::bind(("127.0.0.1", port)).expect("the receiver's port");
        let port = listener.local_addr().unwrap().port();
        let state = Arc::new(Mutex::new(State::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let (thread_state, thread_stop) = (state.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            for stream in listener.incoming() {
                if thread_stop.load(Ordering::Acquire) {
                    return;
                }
                let Ok(stream) = stream else { continue };
                let state = thread_state.clone();
                let tls = tls.clone();
                std::thread::spawn(move || {
                    let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
                    match tls {
                        None => serve(stream, &state),
                        Some(config) => {
                            let Ok(conn) = rustls::ServerConnection::new(config) else {
                                return;
                            };
                            serve(rustls::StreamOwned::new(conn, stream), &state);
                        }
                    }
                });
            }
        });
        Receiver {
            port,
            state,
            stop,
            thread: Some(thread),
        }
    }

    /// Answer the next `n` requests with `status` (and keep nothing of them).
    pub fn refuse_next(&self, n: usize, status: u16) {
        let mut state = self.state.lock().unwrap();
        state.refusals.extend(std::iter::repeat_n(status, n));
    }

    /// Take the next `n` requests but answer that `dropped` records of each were dropped,
    /// for `why` (OTLP's partial success; the requests count as accepted).
    pub fn drop_from_next(&self, n: usize, dropped: u64, why: &str) {
        let mut state = self.state.lock().unwrap();
        state
            .drops
            .extend(std::iter::repeat_n((dropped, why.to_string()), n));
    }

    /// Forget the partial successes not answered yet.
    pub fn stop_dropping(&self) {
        self.state.lock().unwrap().drops.clear();
    }

    /// Answer 401 to requests without `name: value`.
    pub fn require_header(&self, name: &str, value: &str) {
        self.state.lock().unwrap().required = Some((name.to_ascii_lowercase(), value.to_string()));
    }

    pub fn requests(&self) -> Vec<Request> {
        self.state.lock().unwrap().requests.clone()
    }

    /// The bodies (`stringValue`) of every record of every accepted request, in order.
    pub fn accepted_lines(&self) -> Vec<String> {
        self.requests()
            .iter()
            .filter(|r| r.status == 200)
            .flat_map(Request::records)
            .map(|r| r["body"]["stringValue"].as_str().unwrap_or("").to_string())
            .collect()
    }

    /// [`Receiver::accepted_lines`], once there are at least `n` (or 20 s passed).
    pub fn lines(&self, n: usize) -> Vec<String> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let lines = self.accepted_lines();
            if lines.len() >= n || Instant::now() > deadline {
                return lines;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Requests on one connection, kept alive until the client closes it.
fn serve<S: Read + Write>(stream: S, state: &Mutex<State>) {
    let mut reader = BufReader::new(stream);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut parts = line.split_whitespace();
        let (Some(method), Some(path)) = (parts.next(), parts.next()) else {
            return;
        };
        let (method, path) = (method.to_string(), path.to_string());
        let mut headers = Vec::new();
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header).unwrap_or(0) == 0 {
                return;
            }
            let header = header.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':') {
                headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
            }
        }
        let length: usize = headers
            .iter()
            .find(|(n, _)| n == "content-length")
            .and_then(|(_, v)| v.parse().ok())
            .unwrap_or(0);
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let (status, answer) = {
            let mut state = state.lock().unwrap();
            let authorised = state
                .required
                .as_ref()
                .is_none_or(|(n, v)| headers.iter().any(|(hn, hv)| hn == n && hv == v));
            let json = headers
                .iter()
                .any(|(n, v)| n == "content-type" && v == "application/json");
            let (status, answer) = if let Some(status) = state.refusals.pop_front() {
                (status, r#"{"code":14,"message":"not now"}"#.to_string())
            } else if !authorised {
                (401, r#"{"code":16,"message":"who are you"}"#.to_string())
            } else if method != "POST" || path != "/v1/logs" || !json {
                (
                    404,
                    r#"{"code":5,"message":"only POST /v1/logs with JSON"}"#.to_string(),
                )
            } else if let Some((dropped, why)) = state.drops.pop_front() {
                let answer = serde_json::json!({"partialSuccess": {
                    "rejectedLogRecords": dropped.to_string(),
                    "errorMessage": why,
                }});
                (200, answer.to_string())
            } else {
                (200, "{}".to_string())
            };
            state.requests.push(Request {
                path,
                headers,
                body: serde_json::from_slice(&body).unwrap_or(Value::Null),
                status,
            });
            (status, answer)
        };
        let head = format!(
            "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
            answer.len()
        );
        let stream = reader.get_mut();
        if stream
            .write_all(head.as_bytes())
            .and_then(|()| stream.write_all(answer.as_bytes()))
            .and_then(|()| stream.flush())
            .is_err()
        {
            return;
        }
    }
}
