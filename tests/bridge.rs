//! Bridge mode, `mcpwall --upstream URL` (issue 25): the real binary, stdio towards the
//! test, Streamable HTTP towards a scripted upstream on loopback (plain and TLS with a CA
//! made at run time); and `tests/interop/bridge.py`, the official MCP Python SDK client
//! through the bridge to server-everything's Streamable HTTP mode (skipped without the
//! interop dependencies unless `MCPWALL_REQUIRE_INTEROP=1`).

use std::convert::Infallible;
use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Request, Response, StatusCode};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(60);

/// One request the upstream received.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    path: String,
    headers: Vec<(String, String)>,
    body: String,
}

impl Seen {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

type Reply = Response<Full<Bytes>>;
type Handler = Arc<dyn Fn(&Seen) -> Reply + Send + Sync>;

/// A scripted HTTP upstream on a loopback port, in its own thread; `tls` serves HTTPS with
/// that server configuration.
struct Upstream {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Upstream {
    fn start(handler: Handler, tls: Option<Arc<rustls::ServerConfig>>) -> Upstream {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let recorded = seen.clone();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                loop {
                    let Ok((tcp, _)) = listener.accept().await else {
                        return;
                    };
                    let handler = handler.clone();
                    let recorded = recorded.clone();
                    let tls = tls.clone();
                    tokio::spawn(async move {
                        let service = hyper::service::service_fn(
                            move |req: Request<hyper::body::Incoming>| {
                                let handler = handler.clone();
                                let recorded = recorded.clone();
                                async move {
                                    let (parts, body) = req.into_parts();
                                    let body = body
                                        .collect()
                                        .await
                                        .map(|b| b.to_bytes())
                                        .unwrap_or_default();
                                    let seen = Seen {
                                        method: parts.method.to_string(),
                                        path: parts.uri.path().to_string(),
                                        headers: parts
                                            .headers
                                            .iter()
                                            .map(|(n, v)| {
                                                (
                                                    n.to_string(),
                                                    v.to_str().unwrap_or("").to_string(),
                                                )
                                            })
                                            .collect(),
                                        body: String::from_utf8_lossy(&body).into_owned(),
                                    };
                                    recorded.lock().unwrap().push(seen.clone());
                                    Ok::<_, Infallible>(handler(&seen))
                                }
                            },
                        );
                        let builder = hyper::server::conn::http1::Builder::new();
                        match tls {
                            Some(config) => {
                                let acceptor = tokio_rustls::TlsAcceptor::from(config);
                                if let Ok(stream) = acceptor.accept(tcp).await {
                                    let io = hyper_util::rt::TokioIo::new(stream);
                                    let _ = builder.serve_connection(io, service).await;
                                }
                            }
                            None => {
                                let io = hyper_util::rt::TokioIo::new(tcp);
                                let _ = builder.serve_connection(io, service).await;
                            }
                        }
                    });
                }
            });
        });
        Upstream { addr, seen }
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    fn url(&self, scheme: &str) -> String {
        format!("{scheme}://{}/mcp", self.addr)
    }
}

fn reply(status: StatusCode, headers: &[(&str, &str)], body: impl Into<Bytes>) -> Reply {
    let mut r = Response::builder().status(status);
    for (n, v) in headers {
        r = r.header(*n, *v);
    }
    r.body(Full::new(body.into())).unwrap()
}

const SESSION: &str = "sess-0123";

/// A small MCP server over Streamable HTTP: `initialize` (JSON, with a session id),
/// notifications (202), `tools/call` `echo` (SSE: a progress notification, then the
/// answer), `tools/call` `big` (one SSE event of `big` bytes), GET 405, DELETE 200.
fn mcp_server(big: usize) -> Handler {
    Arc::new(move |seen: &Seen| {
        match seen.method.as_str() {
            "GET" => return reply(StatusCode::METHOD_NOT_ALLOWED, &[], ""),
            "DELETE" => return reply(StatusCode::OK, &[], ""),
            _ => {}
        }
        let msg: Value = serde_json::from_str(&seen.body).unwrap_or(Value::Null);
        let id = msg["id"].clone();
        match msg["method"].as_str() {
            Some("initialize") => {
                let body = json!({"jsonrpc": "2.0", "id": id, "result": {
                    "protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                    "serverInfo": {"name": "scripted", "version": "1"}}});
                reply(
                    StatusCode::OK,
                    &[
                        ("content-type", "application/json"),
                        ("mcp-session-id", SESSION),
                    ],
                    body.to_string(),
                )
            }
            Some("tools/call") if msg["params"]["name"] == "big" => {
                let text = "B".repeat(big);
                let answer = json!({"jsonrpc": "2.0", "id": id, "result": {"content": [{"type": "text", "text": text}]}});
                reply(
                    StatusCode::OK,
                    &[("content-type", "text/event-stream")],
                    format!("data: {answer}\n\n"),
                )
            }
            Some("tools/call") => {
                let text = msg["params"]["arguments"]["message"]
                    .as_str()
                    .unwrap_or("")
                    .to_string();
                let progress = json!({"jsonrpc": "2.0", "method": "notifications/progress",
                    "params": {"progressToken": 1, "progress": 1}});
                // Pretty-printed over two data lines: the bridge must write it as one line.
                let answer = serde_json::to_string_pretty(&json!({"jsonrpc": "2.0", "id": id,
                    "result": {"content": [{"type": "text", "text": text}]}}))
                .unwrap();
                let data: String = answer.lines().map(|l| format!("data: {l}\n")).collect();
                let body = format!("id: e1\ndata: {progress}\n\nid: e2\n{data}\n");
                reply(
                    StatusCode::OK,
                    &[("content-type", "text/event-stream")],
                    body,
                )
            }
            _ => reply(StatusCode::ACCEPTED, &[], ""),
        }
    })
}

struct Sandbox {
    dir: tempfile::TempDir,
}

impl Sandbox {
    fn new(settings: &str) -> Sandbox {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("home")).unwrap();
        std::fs::write(
            dir.path().join("policy.yml"),
            format!(
                "version: 1\nsettings:\n  log_dir: \"{}\"\n{settings}rules:\n  - name: no-secret-word\n    match: {{tool: echo, arguments: {{message: {{regex: forbidden}}}}}}\n    action: deny\n",
                dir.path().join("logs").display()
            ),
        )
        .unwrap();
        Sandbox { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn audit(&self) -> String {
        let Ok(entries) = std::fs::read_dir(self.path("logs")) else {
            return String::new();
        };
        entries
            .flatten()
            .map(|e| std::fs::read_to_string(e.path()).unwrap_or_default())
            .collect()
    }

    /// Run the bridge with `lines` on its stdin, then end of input; returns stdout's lines
    /// as JSON and stderr.
    fn bridge(
        &self,
        url: &str,
        extra: &[&str],
        env: &[(&str, &str)],
        lines: &[Value],
    ) -> (Vec<Value>, String) {
        self.bridge_held(url, extra, env, lines, Duration::ZERO)
    }

    /// [`Sandbox::bridge`] with its input kept open for `hold` after the lines.
    fn bridge_held(
        &self,
        url: &str,
        extra: &[&str],
        env: &[(&str, &str)],
        lines: &[Value],
        hold: Duration,
    ) -> (Vec<Value>, String) {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_mcpwall"));
        cmd.arg("-c")
            .arg(self.path("policy.yml"))
            .args(extra)
            .arg("--upstream")
            .arg(url)
            .env_clear()
            .env("HOME", self.path("home"))
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .current_dir(self.dir.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().unwrap();
        let mut stdin = child.stdin.take().unwrap();
        for line in lines {
            writeln!(stdin, "{line}").unwrap();
        }
        std::thread::sleep(hold);
        drop(stdin);
        let started = Instant::now();
        while child.try_wait().unwrap().is_none() {
            assert!(
                started.elapsed() < WAIT,
                "the bridge did not exit after its input ended"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        let out = child.wait_with_output().unwrap();
        let stdout = String::from_utf8(out.stdout).unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        let frames = stdout
            .lines()
            .map(|l| {
                serde_json::from_str(l).unwrap_or_else(|e| {
                    panic!("stdout line is not one JSON message ({e}): {l}\n{stderr}")
                })
            })
            .collect();
        (frames, stderr)
    }
}

fn initialize() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}})
}

fn initialized() -> Value {
    json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
}

fn call(id: u64, tool: &str, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": tool, "arguments": {"message": message}}})
}

fn answer(frames: &[Value], id: u64) -> &Value {
    frames
        .iter()
        .find(|f| f["id"] == json!(id) && f.get("method").is_none())
        .unwrap_or_else(|| panic!("no answer to {id} in {frames:?}"))
}

#[test]
fn the_bridge_judges_both_ways_and_keeps_the_session() {
    let sandbox = Sandbox::new("  max_frame_bytes: 65536\n");
    let upstream = Upstream::start(mcp_server(200_000), None);
    let forbidden = "forbidden-word";
    let (frames, stderr) = sandbox.bridge(
        &upstream.url("http"),
        &[],
        &[],
        &[
            initialize(),
            initialized(),
            call(2, "echo", "hello"),
            call(3, "echo", forbidden),
            call(4, "big", ""),
        ],
    );
    assert_eq!(
        answer(&frames, 1)["result"]["serverInfo"]["name"],
        "scripted",
        "{stderr}"
    );
    // An SSE answer written over two data lines comes out as one line, whole.
    assert_eq!(answer(&frames, 2)["result"]["content"][0]["text"], "hello");
    assert!(
        frames
            .iter()
            .any(|f| f["method"] == "notifications/progress"),
        "the SSE notification is relayed"
    );
    // Denied: answered by mcpwall, never sent upstream.
    assert_eq!(answer(&frames, 3)["error"]["code"], -32001);
    // Over max_frame_bytes: refused whole, never passed in part.
    assert_eq!(answer(&frames, 4)["error"]["code"], -32001);
    assert!(
        !frames.iter().any(|f| f.to_string().contains("BBBB")),
        "no part of the oversize answer"
    );

    let seen = upstream.seen();
    assert!(
        !seen.iter().any(|s| s.body.contains(forbidden)),
        "the denied call reached the upstream"
    );
    let posts: Vec<&Seen> = seen.iter().filter(|s| s.method == "POST").collect();
    assert_eq!(
        posts.len(),
        4,
        "initialize, initialized and two calls: {posts:?}"
    );
    assert_eq!(posts[0].header("mcp-session-id"), None);
    for later in &posts[1..] {
        assert_eq!(
            later.header("mcp-session-id"),
            Some(SESSION),
            "the session id is kept"
        );
        assert_eq!(later.header("mcp-protocol-version"), Some("2025-11-25"));
    }
    let delete = seen
        .iter()
        .find(|s| s.method == "DELETE")
        .expect("the session is ended with DELETE");
    assert_eq!(delete.header("mcp-session-id"), Some(SESSION));

    let audit = sandbox.audit();
    assert!(audit.contains("\"transport\":\"upstream\""), "{audit}");
    assert!(
        audit.contains("no-secret-word") && audit.contains("mcpwall:too_large"),
        "{audit}"
    );
}

#[test]
fn headers_and_token_come_from_the_environment_and_a_file_never_from_argv() {
    let sandbox = Sandbox::new("");
    let upstream = Upstream::start(mcp_server(0), None);
    // Fake credentials, built at run time.
    let token = format!("tok-{}", "9f8e7d6c5b4a");
    let key = format!("key-{}", "a1b2c3d4");
    std::fs::write(
        sandbox.path("headers"),
        format!("# for the test\nX-Api-Key: {key}\n"),
    )
    .unwrap();
    let header_file = sandbox.path("headers");
    let (frames, stderr) = sandbox.bridge(
        &upstream.url("http"),
        &["--header-file", header_file.to_str().unwrap()],
        &[("MCPWALL_UPSTREAM_TOKEN", &token)],
        &[initialize()],
    );
    assert!(answer(&frames, 1).get("result").is_some(), "{stderr}");
    let seen = upstream.seen();
    let post = seen.iter().find(|s| s.method == "POST").unwrap();
    assert_eq!(
        post.header("authorization"),
        Some(format!("Bearer {token}").as_str())
    );
    assert_eq!(post.header("x-api-key"), Some(key.as_str()));
    assert!(!stderr.contains(&token) && !sandbox.audit().contains(&token));

    // There is no option that takes a header or a token on the command line.
    let out = Command::new(env!("CARGO_BIN_EXE_mcpwall"))
        .args([
            "--header",
            "Authorization: x",
            "--upstream",
            &upstream.url("http"),
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
}

#[test]
fn a_redirect_to_another_origin_is_not_followed() {
    let sandbox = Sandbox::new("");
    let elsewhere = Upstream::start(mcp_server(0), None);
    let target = elsewhere.url("http");
    let same_origin_moved = Upstream::start(
        Arc::new({
            let inner = mcp_server(0);
            move |seen: &Seen| {
                if seen.path == "/mcp" {
                    reply(
                        StatusCode::TEMPORARY_REDIRECT,
                        &[("location", "/v2/mcp")],
                        "",
                    )
                } else {
                    inner(seen)
                }
            }
        }),
        None,
    );
    let (frames, stderr) =
        sandbox.bridge(&same_origin_moved.url("http"), &[], &[], &[initialize()]);
    assert!(
        answer(&frames, 1).get("result").is_some(),
        "a same-origin 307 is followed: {stderr}"
    );
    assert!(same_origin_moved.seen().iter().any(|s| s.path == "/v2/mcp"));

    let redirecting = Upstream::start(
        Arc::new(move |_: &Seen| {
            reply(
                StatusCode::TEMPORARY_REDIRECT,
                &[("location", target.as_str())],
                "",
            )
        }),
        None,
    );
    let (frames, stderr) = sandbox.bridge(
        &redirecting.url("http"),
        &[],
        &[("MCPWALL_UPSTREAM_TOKEN", "t0k")],
        &[initialize()],
    );
    let error = &answer(&frames, 1)["error"];
    assert_eq!(error["code"], -32002, "{frames:?}");
    assert!(stderr.contains("another origin"), "{stderr}");
    assert!(
        elsewhere.seen().is_empty(),
        "the other origin was contacted: {:?}",
        elsewhere.seen()
    );
}

/// A CA and a certificate for 127.0.0.1 it signed, made now.
fn ca_and_server_config(dir: &Path) -> (PathBuf, Arc<rustls::ServerConfig>) {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "mcpwall test CA");
    let ca_cert = ca_params.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::new(ca_params, ca_key);
    let server_key = rcgen::KeyPair::generate().unwrap();
    let server_params = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap();
    let server_cert = server_params.signed_by(&server_key, &issuer).unwrap();
    let ca_path = dir.join("ca.pem");
    std::fs::write(&ca_path, ca_cert.pem()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![server_cert.der().clone()],
            rustls_pki_types::PrivateKeyDer::Pkcs8(server_key.serialize_der().into()),
        )
        .unwrap();
    (ca_path, Arc::new(config))
}

#[test]
fn tls_needs_a_known_ca_and_takes_one_from_ca_file() {
    let sandbox = Sandbox::new("");
    let (ca, config) = ca_and_server_config(sandbox.dir.path());
    let upstream = Upstream::start(mcp_server(0), Some(config));
    let url = upstream.url("https");

    let (frames, stderr) = sandbox.bridge(&url, &[], &[], &[initialize()]);
    assert_eq!(answer(&frames, 1)["error"]["code"], -32002, "{frames:?}");
    assert!(
        stderr.contains("certificate"),
        "the refusal says why: {stderr}"
    );
    assert!(
        upstream.seen().is_empty(),
        "a request went over an unverified connection"
    );

    let (frames, stderr) = sandbox.bridge(
        &url,
        &["--ca-file", ca.to_str().unwrap()],
        &[],
        &[initialize()],
    );
    assert_eq!(
        answer(&frames, 1)["result"]["serverInfo"]["name"],
        "scripted",
        "{stderr}"
    );
    assert_eq!(upstream.seen().len(), 2, "initialize, then DELETE");
}

#[test]
fn official_sdk_client_through_the_bridge_to_server_everything() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop");
    let python = dir.join(".venv/bin/python");
    let server = dir.join("node_modules/.bin/mcp-server-everything");
    if !(python.exists() && server.exists()) {
        assert!(
            std::env::var_os("MCPWALL_REQUIRE_INTEROP").is_none(),
            "interop dependencies missing in {} (run .ci/run to install them)",
            dir.display()
        );
        eprintln!("\n!!! SKIPPED bridge.py: no interop venv or node_modules; run .ci/run !!!\n");
        return;
    }
    let mut child = Command::new(&python)
        .arg(dir.join("bridge.py"))
        .arg(env!("CARGO_BIN_EXE_mcpwall"))
        .current_dir(&dir)
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(300);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("bridge.py did not finish within 300 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(
        status.success(),
        "bridge.py checks failed: {status:?} (see output above)"
    );
}

/// A Streamable HTTP upstream whose GET stream says `retry: 0` and closes at once; the
/// rest as [`mcp_server`].
fn impatient_server() -> Handler {
    let inner = mcp_server(0);
    Arc::new(move |seen: &Seen| match seen.method.as_str() {
        "GET" => reply(
            StatusCode::OK,
            &[("content-type", "text/event-stream")],
            "retry: 0\n\n",
        ),
        _ => inner(seen),
    })
}

#[test]
fn a_server_asking_retry_0_is_reconnected_to_with_a_floor_and_back_off() {
    let sandbox = Sandbox::new("");
    let upstream = Upstream::start(impatient_server(), None);
    let (frames, stderr) = sandbox.bridge_held(
        &upstream.url("http"),
        &[],
        &[],
        &[initialize(), initialized()],
        Duration::from_secs(4),
    );
    assert_eq!(
        answer(&frames, 1)["result"]["serverInfo"]["name"],
        "scripted",
        "{stderr}"
    );
    let gets = upstream.seen().iter().filter(|s| s.method == "GET").count();
    // At least 1 s, then 2 s, 4 s (each plus up to half again): 3 GETs in 4 s at most.
    assert!((1..=3).contains(&gets), "{gets} GETs in 4 s");
}

/// What `mcpwall wrap` makes of a Claude Code `type: http` entry with a `${VAR}` header,
/// started the way the client starts it (its `${VAR}` expanded in `env`, then the command
/// run with that environment): the calls go through the policy to the loopback server, and
/// the header reaches it with the value the client expanded, never written to the file.
#[test]
fn a_wrapped_remote_entry_runs_through_the_bridge_with_its_headers() {
    let sandbox = Sandbox::new("");
    let upstream = Upstream::start(mcp_server(0), None);
    let token = format!("tok-{}", "3c2b1a0f9e8d");
    let project = sandbox.path("project");
    std::fs::create_dir_all(&project).unwrap();
    // The policy as the wrapped entry finds it: the project's file (its deny rules apply
    // whether or not the project is trusted).
    std::fs::copy(sandbox.path("policy.yml"), project.join(".mcpwall.yml")).unwrap();
    let client_file = project.join(".mcp.json");
    std::fs::write(
        &client_file,
        format!(
            "{{\n  \"mcpServers\": {{\n    \"api\": {{\n      \"type\": \"http\",\n      \"url\": \"{}\",\n      \"headers\": {{\"Authorization\": \"Bearer ${{API_TOKEN}}\", \"X-Team\": \"blue\"}}\n    }}\n  }}\n}}\n",
            upstream.url("http")
        ),
    )
    .unwrap();
    let wrap = Command::new(env!("CARGO_BIN_EXE_mcpwall"))
        .args(["wrap", "api", "--absolute-path", "--client-file"])
        .arg(&client_file)
        .env_clear()
        .env("HOME", sandbox.path("home"))
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .current_dir(&project)
        .output()
        .unwrap();
    assert!(
        wrap.status.success(),
        "{}{}",
        String::from_utf8_lossy(&wrap.stdout),
        String::from_utf8_lossy(&wrap.stderr)
    );
    let text = std::fs::read_to_string(&client_file).unwrap();
    assert!(
        !text.contains(&token) && text.contains("${API_TOKEN}"),
        "{text}"
    );
    let entry: Value = serde_json::from_str::<Value>(&text).unwrap()["mcpServers"]["api"].clone();

    // The client's part: expand `${VAR}` in `env`, then start `command args`.
    let mut cmd = Command::new(entry["command"].as_str().unwrap());
    cmd.args(
        entry["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap()),
    )
    .env_clear()
    .env("HOME", sandbox.path("home"))
    .env("PATH", std::env::var_os("PATH").unwrap_or_default())
    .current_dir(&project)
    .stdin(Stdio::piped())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    for (name, value) in entry["env"].as_object().unwrap() {
        cmd.env(
            name,
            value.as_str().unwrap().replace("${API_TOKEN}", &token),
        );
    }
    let mut child = cmd.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    for line in [
        initialize(),
        initialized(),
        call(2, "echo", "hello"),
        call(3, "echo", "forbidden-word"),
    ] {
        writeln!(stdin, "{line}").unwrap();
    }
    drop(stdin);
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        assert!(started.elapsed() < WAIT, "the bridge did not exit");
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let frames: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        answer(&frames, 2)["result"]["content"][0]["text"],
        "hello",
        "{stderr}"
    );
    assert_eq!(answer(&frames, 3)["error"]["code"], -32001, "{stderr}");
    let seen = upstream.seen();
    assert!(!seen.iter().any(|s| s.body.contains("forbidden-word")));
    let posts: Vec<&Seen> = seen.iter().filter(|s| s.method == "POST").collect();
    assert_eq!(
        posts.len(),
        3,
        "initialize, initialized, one call: {posts:?}"
    );
    for post in posts {
        assert_eq!(
            post.header("authorization"),
            Some(format!("Bearer {token}").as_str())
        );
        assert_eq!(post.header("x-team"), Some("blue"));
    }
    assert!(!stderr.contains(&token), "{stderr}");
}

/// `$MCPWALL_UPSTREAM_HEADERS` (what `wrap` writes for a remote entry's headers): its
/// lines are sent; a `${VAR}` the client left unexpanded is named on stderr (the header,
/// never the value); a header the bridge sets itself stops it at start.
#[test]
fn headers_from_the_environment_are_sent_and_checked() {
    let sandbox = Sandbox::new("");
    let upstream = Upstream::start(mcp_server(0), None);
    let (frames, stderr) = sandbox.bridge(
        &upstream.url("http"),
        &[],
        &[(
            "MCPWALL_UPSTREAM_HEADERS",
            "X-Key: pre-${NOT_SET}\nX-Team: blue",
        )],
        &[initialize()],
    );
    assert!(answer(&frames, 1).get("result").is_some(), "{stderr}");
    let seen = upstream.seen();
    let post = seen.iter().find(|s| s.method == "POST").unwrap();
    assert_eq!(post.header("x-team"), Some("blue"));
    assert!(
        stderr.contains("$MCPWALL_UPSTREAM_HEADERS: header x-key still holds a `${…}` reference")
            && !stderr.contains("pre-"),
        "{stderr}"
    );

    let out = Command::new(env!("CARGO_BIN_EXE_mcpwall"))
        .args(["--upstream", &upstream.url("http")])
        .env_clear()
        .env("MCPWALL_UPSTREAM_HEADERS", "Host: elsewhere.example")
        .env("HOME", sandbox.path("home"))
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("$MCPWALL_UPSTREAM_HEADERS: host is set by mcpwall itself"),
        "{stderr}"
    );
}

/// A Codex remote entry wrapped by `mcpwall wrap`, started the way Codex starts a stdio
/// server: a fresh environment holding only Codex's few defaults, the variables the
/// entry's `env_vars` names (read from Codex's own environment), and its literal `env`.
/// The bridge reads the bearer token and the key from the variables the entry names; with
/// one of them unset it refuses to start, naming the variable, never sending a request.
#[test]
fn a_wrapped_codex_entry_reads_its_credentials_from_the_variables_codex_passes() {
    let sandbox = Sandbox::new("");
    let upstream = Upstream::start(mcp_server(0), None);
    let token = format!("tok-{}", "7d6c5b4a3f2e");
    let key = format!("key-{}", "0a1b2c3d4e5f");
    let home = sandbox.path("home");
    std::fs::create_dir_all(home.join(".mcpwall")).unwrap();
    std::fs::copy(sandbox.path("policy.yml"), home.join(".mcpwall/config.yml")).unwrap();
    std::fs::create_dir_all(home.join(".codex")).unwrap();
    let config = home.join(".codex/config.toml");
    std::fs::write(
        &config,
        format!(
            "[mcp_servers.svc]\nurl = \"{}\"\nbearer_token_env_var = \"SVC_TOKEN\"\nhttp_headers = {{ \"X-Team\" = \"blue\" }}\nenv_http_headers = {{ \"X-Api-Key\" = \"SVC_KEY\" }}\n",
            upstream.url("http")
        ),
    )
    .unwrap();
    let wrap = Command::new(env!("CARGO_BIN_EXE_mcpwall"))
        .args(["wrap", "svc", "--absolute-path"])
        .env_clear()
        .env("HOME", &home)
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .current_dir(sandbox.path(""))
        .output()
        .unwrap();
    assert!(
        wrap.status.success(),
        "{}{}",
        String::from_utf8_lossy(&wrap.stdout),
        String::from_utf8_lossy(&wrap.stderr)
    );
    let text = std::fs::read_to_string(&config).unwrap();
    let doc = toml_edit::Document::parse(text.as_str()).unwrap();
    let entry = &doc.as_table()["mcp_servers"]["svc"];

    // Codex's part (its stdio launcher): only these of its own variables, then the ones
    // `env_vars` names, then `env` as written.
    let codex_env = [
        ("HOME", home.to_string_lossy().into_owned()),
        ("PATH", std::env::var("PATH").unwrap_or_default()),
        ("SVC_TOKEN", token.clone()),
        ("SVC_KEY", key.clone()),
        ("UNRELATED_SECRET", "never-passed".to_string()),
    ];
    let start = |codex_env: &[(&str, String)]| {
        let mut cmd = Command::new(entry["command"].as_str().unwrap());
        let args = entry["args"].as_array().unwrap();
        cmd.args(args.iter().map(|a| a.as_str().unwrap()))
            .env_clear()
            .current_dir(sandbox.path(""))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let passed = entry["env_vars"].as_array().unwrap();
        for (name, value) in codex_env {
            let default = ["HOME", "PATH"].contains(name);
            if default || passed.iter().any(|v| v.as_str() == Some(name)) {
                cmd.env(name, value);
            }
        }
        for (name, value) in entry["env"].as_inline_table().unwrap() {
            cmd.env(name, value.as_str().unwrap());
        }
        let mut child = cmd.spawn().unwrap();
        let mut stdin = child.stdin.take().unwrap();
        for line in [initialize(), initialized(), call(2, "echo", "hello")] {
            let _ = writeln!(stdin, "{line}");
        }
        drop(stdin);
        let started = Instant::now();
        while child.try_wait().unwrap().is_none() {
            assert!(started.elapsed() < WAIT, "the bridge did not exit");
            std::thread::sleep(Duration::from_millis(20));
        }
        let out = child.wait_with_output().unwrap();
        let frames: Vec<Value> = String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        (
            out.status.success(),
            frames,
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (ok, frames, stderr) = start(&codex_env);
    assert!(ok, "{stderr}");
    assert_eq!(
        answer(&frames, 2)["result"]["content"][0]["text"],
        "hello",
        "{stderr}"
    );
    let seen = upstream.seen();
    let posts: Vec<&Seen> = seen.iter().filter(|s| s.method == "POST").collect();
    assert_eq!(posts.len(), 3, "{posts:?}");
    for post in posts {
        assert_eq!(
            post.header("authorization"),
            Some(format!("Bearer {token}").as_str())
        );
        assert_eq!(post.header("x-api-key"), Some(key.as_str()));
        assert_eq!(post.header("x-team"), Some("blue"));
    }
    assert!(
        !stderr.contains(&token) && !stderr.contains(&key),
        "{stderr}"
    );

    // SVC_KEY unset where Codex runs: refused at start, naming the variable and the header.
    let without_key: Vec<(&str, String)> = codex_env
        .iter()
        .filter(|(n, _)| *n != "SVC_KEY")
        .cloned()
        .collect();
    let before = upstream.seen().len();
    let (ok, frames, stderr) = start(&without_key);
    assert!(!ok && frames.is_empty(), "{stderr}");
    assert!(
        stderr.contains(
            "$MCPWALL_UPSTREAM_ENV_HEADERS: header X-Api-Key comes from $SVC_KEY, which is not set"
        ),
        "{stderr}"
    );
    assert!(!stderr.contains(&token), "{stderr}");
    assert_eq!(upstream.seen().len(), before, "a request went out");
    // The token's variable unset: the same, never an unauthenticated connection.
    let without_token: Vec<(&str, String)> = codex_env
        .iter()
        .filter(|(n, _)| *n != "SVC_TOKEN")
        .cloned()
        .collect();
    let (ok, _, stderr) = start(&without_token);
    assert!(!ok, "{stderr}");
    assert!(
        stderr.contains(
            "$MCPWALL_UPSTREAM_BEARER_ENV: the bearer token comes from $SVC_TOKEN, which is not set"
        ),
        "{stderr}"
    );
    assert_eq!(upstream.seen().len(), before, "a request went out");
}

/// An upstream that answers its POSTs and then cannot be reached on its GET stream: each
/// GET's connection is closed before any answer, as when the server went away. Plain
/// sockets, so that no HTTP answer at all comes back.
fn unreachable_stream_upstream() -> String {
    use std::io::{BufRead, BufReader, Read};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for tcp in listener.incoming() {
            let Ok(tcp) = tcp else { return };
            std::thread::spawn(move || {
                let mut reader = BufReader::new(tcp.try_clone().unwrap());
                let mut tcp = tcp;
                loop {
                    let mut head = Vec::new();
                    loop {
                        let mut line = String::new();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        if line == "\r\n" {
                            break;
                        }
                        head.push(line.to_ascii_lowercase());
                    }
                    if head.first().is_some_and(|l| l.starts_with("get ")) {
                        // Gone: no answer, the connection just closes.
                        return;
                    }
                    let len = head
                        .iter()
                        .find_map(|l| l.strip_prefix("content-length:"))
                        .and_then(|v| v.trim().parse::<usize>().ok())
                        .unwrap_or(0);
                    let mut body = vec![0; len];
                    if reader.read_exact(&mut body).is_err() {
                        return;
                    }
                    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                    let reply = if body["method"] == "initialize" {
                        let answer = json!({"jsonrpc": "2.0", "id": body["id"], "result": {
                            "protocolVersion": "2025-11-25", "capabilities": {},
                            "serverInfo": {"name": "scripted", "version": "1"}}})
                        .to_string();
                        format!(
                            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nmcp-session-id: s-1\r\ncontent-length: {}\r\n\r\n{answer}",
                            answer.len()
                        )
                    } else {
                        "HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n".to_string()
                    };
                    if tcp.write_all(reply.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    format!("http://{addr}/mcp")
}

/// A server that can no longer be reached ends the bridged session (exit code 1, what is
/// in flight answered), instead of leaving the client connected to nothing.
#[test]
fn an_upstream_that_cannot_be_reached_ends_the_session() {
    let sandbox = Sandbox::new("");
    let url = unreachable_stream_upstream();
    let started = Instant::now();
    let (frames, stderr) = sandbox.bridge_held(
        &url,
        &[],
        &[],
        &[initialize(), initialized()],
        Duration::from_secs(8),
    );
    assert_eq!(
        answer(&frames, 1)["result"]["serverInfo"]["name"],
        "scripted",
        "{stderr}"
    );
    assert!(
        stderr.contains("could not be reached") && stderr.contains("ended the session"),
        "{stderr}"
    );
    assert!(started.elapsed() < WAIT);
}
