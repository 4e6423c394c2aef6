//! `mcpwall-fake-server`: a scripted MCP server for the proxy's end-to-end tests.
//!
//! Reads newline-delimited JSON-RPC on stdin. Every line received is appended, exactly,
//! to `$FAKE_RECV_LOG` (if set), so tests can assert the bytes mcpwall forwarded.
//! Requests are answered according to their method:
//!
//! | method | effect |
//! | --- | --- |
//! | `initialize` | a minimal initialize result |
//! | `fake/say` | `params.lines` (strings) are written verbatim as stdout lines, then `{}` |
//! | `fake/exit` | write `params.lines` (and `params.partial` without a newline), then exit with `params.code` without answering |
//! | `fake/signal` | kill itself with `params.signal` without answering |
//! | `fake/hold` | not answered until `fake/release` |
//! | `fake/release` | answer every held request, newest first, then this one |
//! | `fake/big` | a result whose text is `params.unit` repeated `params.count` times; exits right after if `params.exit` |
//! | `fake/sleep` | answer after `params.ms` milliseconds (stdin is not read meanwhile) |
//! | `fake/env` | `{"value": $params.name, "cwd": ...}` |
//! | `tools/call` of `run_command`, with `FAKE_BASH_TOOL=1` | runs `params.arguments.command` with `bash -c` in the server's working directory and HOME; the result's text is its stdout and stderr |
//! | `tools/call` of `ask` | sends `sampling/createMessage` (id `"srv-ask"`), then answers the call with the client's result as its text |
//! | anything else | `{"method": <method>, "params": <params as received>}` |
//!
//! Every line written is appended to `$FAKE_SENT_LOG` too (if set), so a test can
//! replay the server's side of a conversation (`mcpwall check --format forwarded`).
//!
//! Environment: `FAKE_IGNORE_SIGTERM=1` ignores SIGTERM; `FAKE_IGNORE_EOF=1` keeps
//! running after stdin closes; `FAKE_EOF_EXIT=N` exits with N at stdin EOF.

use std::io::{BufRead, Write};
use std::time::Duration;

use serde::Deserialize;
use serde_json::value::RawValue;

#[derive(Deserialize)]
struct Incoming<'a> {
    #[serde(borrow)]
    id: Option<&'a RawValue>,
    method: Option<String>,
    #[serde(borrow)]
    params: Option<&'a RawValue>,
    #[serde(borrow)]
    result: Option<&'a RawValue>,
}

/// The id of the `ask` call waiting for the answer to its sampling request.
static ASKING: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);

fn param<T: for<'de> Deserialize<'de>>(params: Option<&RawValue>, key: &str) -> Option<T> {
    let v: serde_json::Value = serde_json::from_str(params?.get()).ok()?;
    serde_json::from_value(v.get(key)?.clone()).ok()
}

fn reply(out: &mut impl Write, id: &str, result: &str) {
    writeln!(
        out,
        "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{result}}}"
    )
    .unwrap();
}

/// Stdout, and a copy of every byte in `$FAKE_SENT_LOG`.
struct Tee<W> {
    out: W,
    copy: Option<std::fs::File>,
}

impl<W: Write> Write for Tee<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.out.write(buf)?;
        if let Some(copy) = &mut self.copy {
            copy.write_all(&buf[..n])?;
        }
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

fn main() {
    #[cfg(unix)]
    if std::env::var_os("FAKE_IGNORE_SIGTERM").is_some() {
        // SAFETY: setting a signal disposition to SIG_IGN has no memory effects.
        unsafe {
            libc::signal(libc::SIGTERM, libc::SIG_IGN);
        }
    }
    let mut recv_log = std::env::var_os("FAKE_RECV_LOG").map(|p| {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(p)
            .expect("open FAKE_RECV_LOG")
    });
    let mut input = std::io::BufReader::with_capacity(1 << 16, std::io::stdin());
    let stdout = std::io::stdout();
    let sent_log = std::env::var_os("FAKE_SENT_LOG").map(|p| {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(p)
            .expect("open FAKE_SENT_LOG")
    });
    let mut out = std::io::BufWriter::new(Tee {
        out: stdout.lock(),
        copy: sent_log,
    });
    let mut held: Vec<String> = Vec::new();
    let mut line = Vec::new();
    loop {
        line.clear();
        if input.read_until(b'\n', &mut line).unwrap_or(0) == 0 {
            break;
        }
        if let Some(log) = &mut recv_log {
            log.write_all(&line).unwrap();
            if !line.ends_with(b"\n") {
                log.write_all(b"\n").unwrap();
            }
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_end_matches('\n');
        // A batch is answered member by member.
        let members: Vec<&RawValue> = match serde_json::from_str::<Vec<&RawValue>>(text) {
            Ok(members) => members,
            Err(_) => match serde_json::from_str::<&RawValue>(text) {
                Ok(one) => vec![one],
                Err(_) => continue,
            },
        };
        for member in members {
            let Ok(msg) = serde_json::from_str::<Incoming<'_>>(member.get()) else {
                continue;
            };
            handle(msg, &mut out, &mut held);
        }
        // Answer promptly unless more input is already waiting (batch like a real server).
        if input.buffer().is_empty() {
            out.flush().unwrap();
        }
    }
    out.flush().unwrap();
    if std::env::var_os("FAKE_IGNORE_EOF").is_some() {
        loop {
            std::thread::sleep(Duration::from_secs(60));
        }
    }
    let code = std::env::var("FAKE_EOF_EXIT")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    std::process::exit(code);
}

fn handle(msg: Incoming<'_>, out: &mut impl Write, held: &mut Vec<String>) {
    let mut out = out;
    {
        let Some(method) = msg.method.as_deref() else {
            // A response from the client: the answer to an `ask` call's request, which
            // then answers the call with what it got.
            if msg.id.map(|i| i.get()) == Some(r#""srv-ask""#)
                && let Some(call) = ASKING.lock().unwrap().take()
            {
                let got = msg.result.map_or("null", |r| r.get());
                let text = serde_json::to_string(got).unwrap();
                reply(
                    out,
                    &call,
                    &format!(r#"{{"content":[{{"type":"text","text":{text}}}]}}"#),
                );
            }
            return;
        };
        let id = msg.id.map(|i| i.get().to_string());
        match method {
            "tools/call" if param::<String>(msg.params, "name").as_deref() == Some("ask") => {
                // A request of the server's in the middle of the call (sampling).
                if let Some(id) = &id {
                    *ASKING.lock().unwrap() = Some(id.clone());
                    writeln!(
                        out,
                        r#"{{"jsonrpc":"2.0","id":"srv-ask","method":"sampling/createMessage","params":{{"messages":[{{"role":"user","content":{{"type":"text","text":"which colour?"}}}}],"maxTokens":10}}}}"#
                    )
                    .unwrap();
                    out.flush().unwrap();
                }
            }
            "initialize" => {
                if let Some(id) = &id {
                    reply(
                        &mut out,
                        id,
                        r#"{"protocolVersion":"2025-06-18","capabilities":{"tools":{"listChanged":true},"resources":{"subscribe":true}},"serverInfo":{"name":"fake","version":"0"}}"#,
                    );
                }
            }
            "fake/say" => {
                for l in param::<Vec<String>>(msg.params, "lines").unwrap_or_default() {
                    writeln!(out, "{l}").unwrap();
                }
                if let Some(id) = &id {
                    reply(out, id, "{}");
                }
            }
            "fake/exit" => {
                for l in param::<Vec<String>>(msg.params, "lines").unwrap_or_default() {
                    writeln!(out, "{l}").unwrap();
                }
                if let Some(partial) = param::<String>(msg.params, "partial") {
                    write!(out, "{partial}").unwrap();
                }
                out.flush().unwrap();
                std::process::exit(param(msg.params, "code").unwrap_or(0));
            }
            "fake/signal" => {
                out.flush().unwrap();
                #[cfg(unix)]
                {
                    let sig: i32 = param(msg.params, "signal").unwrap_or(libc::SIGKILL);
                    // SAFETY: kill(2) on our own pid.
                    unsafe {
                        libc::kill(libc::getpid(), sig);
                    }
                    std::thread::sleep(Duration::from_secs(60));
                }
                // No signals on Windows: end as a killed process would, abruptly.
                #[cfg(windows)]
                std::process::exit(137);
            }
            "fake/hold" => {
                if let Some(id) = id {
                    held.push(id);
                }
            }
            "fake/release" => {
                while let Some(h) = held.pop() {
                    reply(out, &h, r#"{"released":true}"#);
                }
                if let Some(id) = &id {
                    reply(out, id, "{}");
                }
            }
            "fake/big" => {
                let unit: String = param(msg.params, "unit").unwrap_or_else(|| "x".into());
                let count: usize = param(msg.params, "count").unwrap_or(1);
                let text = serde_json::to_string(&unit.repeat(count)).unwrap();
                if let Some(id) = &id {
                    reply(
                        &mut out,
                        id,
                        &format!(r#"{{"content":[{{"type":"text","text":{text}}}]}}"#),
                    );
                }
                if param(msg.params, "exit").unwrap_or(false) {
                    out.flush().unwrap();
                    std::process::exit(0);
                }
            }
            "fake/sleep" => {
                out.flush().unwrap();
                std::thread::sleep(Duration::from_millis(param(msg.params, "ms").unwrap_or(0)));
                if let Some(id) = &id {
                    reply(out, id, "{}");
                }
            }
            "tools/call" if std::env::var_os("FAKE_BASH_TOOL").is_some() => {
                let name: String = param(msg.params, "name").unwrap_or_default();
                let args: serde_json::Value = param(msg.params, "arguments").unwrap_or_default();
                let command = args["command"].as_str().unwrap_or_default();
                let text = if name == "run_command" {
                    match std::process::Command::new("bash")
                        .arg("-c")
                        .arg(command)
                        .output()
                    {
                        Ok(o) => format!(
                            "{}{}",
                            String::from_utf8_lossy(&o.stdout),
                            String::from_utf8_lossy(&o.stderr)
                        ),
                        Err(e) => format!("bash: {e}"),
                    }
                } else {
                    format!("unknown tool {name}")
                };
                let result = serde_json::json!({"content": [{"type": "text", "text": text}]});
                if let Some(id) = &id {
                    reply(out, id, &result.to_string());
                }
            }
            "fake/env" => {
                let name: String = param(msg.params, "name").unwrap_or_default();
                let value = std::env::var(&name).ok();
                let cwd = std::env::current_dir().unwrap();
                let result = serde_json::json!({"value": value, "cwd": cwd});
                if let Some(id) = &id {
                    reply(out, id, &result.to_string());
                }
            }
            _ => {
                if let Some(id) = &id {
                    let params = msg.params.map(|p| p.get()).unwrap_or("null");
                    let method = serde_json::to_string(method).unwrap();
                    reply(
                        &mut out,
                        id,
                        &format!(r#"{{"method":{method},"params":{params}}}"#),
                    );
                }
            }
        }
    }
}
