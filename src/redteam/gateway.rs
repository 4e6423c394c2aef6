//! Identity and session attacks on an HTTP gateway (`mcpwall scan --url`): what a client
//! holding no token, a wrong or revoked one, or another identity's session id can do.
//!
//! Each attack is one or a few HTTP exchanges on loopback-style plain HTTP, judged by the
//! status and JSON-RPC error code the specification and `docs/http.md` prescribe, never by
//! the text of a message. There is no baseline: the gateway is the target. For a stdio
//! target they do not apply, and say so.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::attacks::Severity;
use super::report::{AttackResult, Outcome};

/// What to attack.
#[derive(Debug, Clone)]
pub struct Target {
    /// `http://HOST:PORT/PATH`.
    pub url: String,
    /// Identity A's bearer token.
    pub token: Option<String>,
    /// Identity B's (session hijack, identity-scoped tools).
    pub other_token: Option<String>,
    /// A token that was revoked (`mcpwall token remove`).
    pub revoked_token: Option<String>,
    pub timeout: Duration,
}

struct GatewayAttack {
    id: &'static str,
    name: &'static str,
    severity: Severity,
    remediation: &'static str,
}

/// OWASP Top 10 for Agentic Applications: identity and privilege abuse.
const CATEGORY: &str = "ASI03";

const ATTACKS: &[GatewayAttack] = &[
    GatewayAttack {
        id: "GW-001",
        name: "No bearer token",
        severity: Severity::Critical,
        remediation: "issue tokens (`mcpwall token add NAME`): once one exists, every request needs a valid one (401 otherwise)",
    },
    GatewayAttack {
        id: "GW-002",
        name: "Wrong bearer token",
        severity: Severity::Critical,
        remediation: "issue tokens (`mcpwall token add NAME`) and give each client only its own",
    },
    GatewayAttack {
        id: "GW-003",
        name: "Token of a revoked identity",
        severity: Severity::High,
        remediation: "revoke with `mcpwall token remove NAME`: the gateway rereads the token file at the next request",
    },
    GatewayAttack {
        id: "GW-004",
        name: "Session hijack by another identity",
        severity: Severity::Critical,
        remediation: "serve through mcpwall with one token per client: a session belongs to the identity that opened it (404 for any other)",
    },
    GatewayAttack {
        id: "GW-005",
        name: "Session id guessing",
        severity: Severity::High,
        remediation: "session ids must be unguessable (mcpwall: 128 random bits) and unknown ids answered 404",
    },
    GatewayAttack {
        id: "GW-006",
        name: "Foreign Origin (DNS rebinding, browser CSRF)",
        severity: Severity::High,
        remediation: "do not pass --allow-origin for origins you do not control; mcpwall refuses other origins with 403",
    },
    GatewayAttack {
        id: "GW-007",
        name: "Header/body mismatch (2026-07-28 Mcp-Method)",
        severity: Severity::Medium,
        remediation: "the gateway must check Mcp-Method/Mcp-Name against the body (400, -32020) so nothing routes on headers that differ from what is judged",
    },
    GatewayAttack {
        id: "GW-008",
        name: "Identity-scoped tool used by another identity",
        severity: Severity::High,
        remediation: "scope tools with `match: {identity: \"...\"}` rules; each identity gets only its tools listed and callable",
    },
];

/// Whether `--only` (empty: everything) leaves attack `id` out.
fn unselected(only: &[String], id: &str) -> bool {
    !only.is_empty() && !only.iter().any(|o| o.eq_ignore_ascii_case(id))
}

fn not_selected(a: &GatewayAttack) -> AttackResult {
    let mut r = result(a, Outcome::Skipped);
    r.reason = Some(super::report::NOT_SELECTED.into());
    r
}

/// Every gateway attack, not applicable: the target speaks stdio.
pub fn not_applicable_for_stdio(only: &[String]) -> Vec<AttackResult> {
    ATTACKS
        .iter()
        .map(|a| {
            if unselected(only, a.id) {
                return not_selected(a);
            }
            let mut r = result(a, Outcome::NotApplicable);
            r.note = Some(
                "skipped: the target is a stdio server; identity and session attacks need an HTTP gateway (`mcpwall scan --url http://127.0.0.1:PORT/mcp --token-file FILE`)".into(),
            );
            r
        })
        .collect()
}

/// Run the gateway attacks `only` selects (empty: all) against `target`.
pub fn run(
    target: &Target,
    only: &[String],
    mut progress: impl FnMut(usize, usize, &str),
) -> Vec<AttackResult> {
    let total = ATTACKS.len();
    let mut results = Vec::with_capacity(total);
    for (i, attack) in ATTACKS.iter().enumerate() {
        if unselected(only, attack.id) {
            results.push(not_selected(attack));
            progress(i + 1, total, attack.id);
            continue;
        }
        let started = Instant::now();
        let verdict = match HttpTarget::parse(target) {
            Ok(http) => judge(attack.id, &http, target),
            Err(e) => Verdict::Error(e),
        };
        let mut r = match verdict {
            Verdict::Pass(note) => {
                let mut r = result(attack, Outcome::Pass);
                r.stopped_by = Some(note);
                r
            }
            Verdict::Vulnerable(evidence) => {
                let mut r = result(attack, Outcome::Vulnerable);
                r.evidence = Some(super::report::clean(&evidence, 300));
                r
            }
            Verdict::NotApplicable(why) => {
                let mut r = result(attack, Outcome::NotApplicable);
                r.note = Some(why);
                r
            }
            Verdict::Skipped(why) => {
                let mut r = result(attack, Outcome::Skipped);
                r.reason = Some(why);
                r
            }
            Verdict::Error(e) => {
                let mut r = result(attack, Outcome::Error);
                r.note = Some(e);
                r
            }
        };
        r.duration_ms = started.elapsed().as_millis() as u64;
        results.push(r);
        progress(i + 1, total, attack.id);
    }
    results
}

fn result(a: &GatewayAttack, protected: Outcome) -> AttackResult {
    AttackResult {
        attack_id: a.id.into(),
        name: a.name.into(),
        category: CATEGORY.into(),
        severity: a.severity,
        baseline: Outcome::NotApplicable,
        protected,
        stopped_by: None,
        kernel: None,
        evidence: None,
        baseline_evidence: None,
        remediation: a.remediation.into(),
        note: None,
        reason: None,
        skipped_by_policy: false,
        duration_ms: 0,
    }
}

enum Verdict {
    /// Refused as it must be; how.
    Pass(String),
    /// Got through; what came back.
    Vulnerable(String),
    NotApplicable(String),
    Skipped(String),
    Error(String),
}

fn judge(id: &str, http: &HttpTarget, t: &Target) -> Verdict {
    let a = t.token.as_deref();
    match id {
        "GW-001" => refused_401(http.initialize(None, &[]), "no token"),
        "GW-002" => refused_401(
            http.initialize(Some(&random_hex(24)), &[]),
            "a random token",
        ),
        "GW-003" => match &t.revoked_token {
            None => Verdict::Skipped("give a revoked token with --revoked-token-file".into()),
            Some(token) => refused_401(http.initialize(Some(token), &[]), "the revoked token"),
        },
        "GW-004" => {
            let Some(b) = &t.other_token else {
                return Verdict::Skipped(
                    "give a second identity's token with --other-token-file".into(),
                );
            };
            let session = match http.open_session(a) {
                Ok(s) => s,
                Err(e) => return Verdict::Error(e),
            };
            let r = http.post(Some(b), Some(&session), &tools_list(), &[]);
            let verdict = match r {
                Ok(r) if r.status == 404 => {
                    Verdict::Pass("404 for a session of another identity".into())
                }
                Ok(r) if r.status < 300 => Verdict::Vulnerable(r.body),
                Ok(r) => Verdict::Pass(format!("refused with {}", r.status)),
                Err(e) => Verdict::Error(e),
            };
            http.delete(a, &session);
            verdict
        }
        "GW-005" => {
            let session = match http.open_session(a) {
                Ok(s) => s,
                Err(e) => return Verdict::Error(e),
            };
            let entropy_ok = session.len() >= 32;
            let mut verdict = None;
            for _ in 0..32 {
                match http.post(a, Some(&random_hex(16)), &tools_list(), &[]) {
                    Ok(r) if r.status == 404 => {}
                    Ok(r) => {
                        verdict = Some(Verdict::Vulnerable(format!(
                            "a guessed session id got {}: {}",
                            r.status, r.body
                        )));
                        break;
                    }
                    Err(e) => {
                        verdict = Some(Verdict::Error(e));
                        break;
                    }
                }
            }
            http.delete(a, &session);
            verdict.unwrap_or(if entropy_ok {
                Verdict::Pass("32 guessed ids: 404 each; ids carry at least 128 bits".into())
            } else {
                Verdict::Vulnerable(format!(
                    "session id {session:?} is too short to be unguessable"
                ))
            })
        }
        "GW-006" => match http.initialize(a, &[("Origin", "https://attacker.example")]) {
            Ok(r) if r.status == 403 => Verdict::Pass("403 for a foreign Origin".into()),
            Ok(r) if r.status < 300 => {
                if let Some(s) = r.header("mcp-session-id") {
                    http.delete(a, s);
                }
                Verdict::Vulnerable(r.body)
            }
            Ok(r) => Verdict::Vulnerable(format!("answered {} instead of 403", r.status)),
            Err(e) => Verdict::Error(e),
        },
        "GW-007" => {
            let body = json!({"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"/etc/hostname"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}});
            let r = http.post(
                a,
                None,
                &body,
                &[
                    ("MCP-Protocol-Version", "2026-07-28"),
                    ("Mcp-Method", "tools/list"),
                ],
            );
            match r {
                Ok(r) if r.status == 400 && error_code(&r.body) == Some(-32020) => {
                    Verdict::Pass("400 with -32020 (header mismatch)".into())
                }
                Ok(r) => Verdict::Vulnerable(format!("{}: {}", r.status, r.body)),
                Err(e) => Verdict::Error(e),
            }
        }
        "GW-008" => {
            let Some(b) = t.other_token.as_deref() else {
                return Verdict::Skipped(
                    "give a second identity's token with --other-token-file".into(),
                );
            };
            let (tools_a, tools_b) = match (http.tool_names(a), http.tool_names(Some(b))) {
                (Ok(x), Ok(y)) => (x, y),
                (Err(e), _) | (_, Err(e)) => return Verdict::Error(e),
            };
            let Some(tool) = tools_a.iter().find(|t| !tools_b.contains(t)) else {
                return Verdict::NotApplicable(
                    "both identities are listed the same tools: no identity-scoped tool to try"
                        .into(),
                );
            };
            let session = match http.open_session(Some(b)) {
                Ok(s) => s,
                Err(e) => return Verdict::Error(e),
            };
            let call = json!({"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":tool,"arguments":{}}});
            let r = http.post(Some(b), Some(&session), &call, &[]);
            http.delete(Some(b), &session);
            match r {
                Ok(r) => match first_message(&r.body) {
                    Some(m) if refused_call(&m) => Verdict::Pass(format!(
                        "`{tool}` (listed for the first identity only) refused for the second"
                    )),
                    _ => Verdict::Vulnerable(r.body),
                },
                Err(e) => Verdict::Error(e),
            }
        }
        other => Verdict::Error(format!("unknown attack {other}")),
    }
}

fn refused_401(r: Result<Reply, String>, what: &str) -> Verdict {
    match r {
        Ok(r) if r.status == 401 && r.header("mcp-session-id").is_none() => {
            Verdict::Pass(format!("401 for {what}, no session opened"))
        }
        Ok(r) => Verdict::Vulnerable(format!("{what} got {}: {}", r.status, r.body)),
        Err(e) => Verdict::Error(e),
    }
}

/// A refusal as mcpwall writes it: a JSON-RPC error, or a tool result flagged as an error
/// whose text says mcpwall blocked it.
fn refused_call(m: &Value) -> bool {
    m.get("error").is_some()
        || (m["result"]["isError"] == true
            && m["result"]["content"][0]["text"]
                .as_str()
                .is_some_and(|t| t.contains("MCPWALL")))
}

fn error_code(body: &str) -> Option<i64> {
    first_message(body)?["error"]["code"].as_i64()
}

/// The first JSON-RPC message of a body (JSON, or the first `data:` of an SSE stream).
fn first_message(body: &str) -> Option<Value> {
    if let Ok(v) = serde_json::from_str::<Value>(body.trim()) {
        return Some(v);
    }
    body.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .find_map(|d| serde_json::from_str(d.trim()).ok())
}

fn tools_list() -> Value {
    json!({"jsonrpc":"2.0","id":2,"method":"tools/list"})
}

fn random_hex(bytes: usize) -> String {
    let mut b = vec![0u8; bytes];
    // A failed random source still gives an id no gateway issued.
    let _ = getrandom::fill(&mut b);
    b.iter().map(|x| format!("{x:02x}")).collect()
}

// ------------------------------------------------------------------------------ HTTP

struct HttpTarget {
    /// `host:port`, for the connection and the `Host` header.
    authority: String,
    path: String,
    timeout: Duration,
}

struct Reply {
    status: u16,
    /// Lower-cased `name: value` lines.
    head: String,
    body: String,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim() == name).then(|| v.trim())
        })
    }
}

impl HttpTarget {
    fn parse(t: &Target) -> Result<HttpTarget, String> {
        let rest = t.url.strip_prefix("http://").ok_or_else(|| {
            format!(
                "{}: only http:// is scanned (a gateway on loopback, or behind your TLS proxy: scan it from the proxy's host)",
                t.url
            )
        })?;
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/mcp"),
        };
        Ok(HttpTarget {
            authority: authority.to_string(),
            path: path.to_string(),
            timeout: t.timeout,
        })
    }

    fn send(
        &self,
        method: &str,
        token: Option<&str>,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Result<Reply, String> {
        let fail = |e: std::io::Error| format!("{}: {e}", self.authority);
        let mut stream = TcpStream::connect(&self.authority).map_err(fail)?;
        stream.set_read_timeout(Some(self.timeout)).map_err(fail)?;
        let mut req = format!(
            "{method} {} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nContent-Length: {}\r\n",
            self.path,
            self.authority,
            body.len()
        );
        if let Some(token) = token {
            req.push_str(&format!("Authorization: Bearer {token}\r\n"));
        }
        for (k, v) in headers {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        req.push_str("\r\n");
        stream.write_all(req.as_bytes()).map_err(fail)?;
        stream.write_all(body).map_err(fail)?;
        // A JSON answer ends with the connection; an SSE answer once its response event
        // arrived (the stream may stay open).
        let mut raw = Vec::new();
        let mut buf = [0u8; 8192];
        loop {
            let n = match stream.read(&mut buf) {
                Ok(n) => n,
                Err(e) if !raw.is_empty() && e.kind() == std::io::ErrorKind::WouldBlock => 0,
                Err(e) => return Err(fail(e)),
            };
            if n == 0 {
                break;
            }
            raw.extend_from_slice(&buf[..n]);
            if sse_answered(&String::from_utf8_lossy(&raw)) {
                break;
            }
            if raw.len() > 16 << 20 {
                break;
            }
        }
        let text = String::from_utf8_lossy(&raw).into_owned();
        let (head, body) = text
            .split_once("\r\n\r\n")
            .ok_or_else(|| format!("{}: not an HTTP answer", self.authority))?;
        let status = head
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| format!("{}: not an HTTP answer", self.authority))?;
        let body = if head
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked")
        {
            dechunk(body)
        } else {
            body.to_string()
        };
        Ok(Reply {
            status,
            head: head.to_ascii_lowercase(),
            body,
        })
    }

    fn post(
        &self,
        token: Option<&str>,
        session: Option<&str>,
        body: &Value,
        extra: &[(&str, &str)],
    ) -> Result<Reply, String> {
        let mut headers = vec![
            ("Accept", "application/json, text/event-stream"),
            ("Content-Type", "application/json"),
        ];
        if let Some(s) = session {
            headers.push(("Mcp-Session-Id", s));
        }
        headers.extend_from_slice(extra);
        self.send("POST", token, &headers, body.to_string().as_bytes())
    }

    fn initialize(&self, token: Option<&str>, extra: &[(&str, &str)]) -> Result<Reply, String> {
        let r = self.post(
            token,
            None,
            &json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"mcpwall-scan","version":env!("CARGO_PKG_VERSION")}}}),
            extra,
        )?;
        Ok(r)
    }

    /// A ready session of `token`'s identity.
    fn open_session(&self, token: Option<&str>) -> Result<String, String> {
        let r = self.initialize(token, &[])?;
        let Some(session) = r.header("mcp-session-id").map(str::to_string) else {
            return Err(format!(
                "initialize got {} and no session (is the token right?): {}",
                r.status,
                super::report::clean(&r.body, 200)
            ));
        };
        self.post(
            token,
            Some(&session),
            &json!({"jsonrpc":"2.0","method":"notifications/initialized"}),
            &[],
        )?;
        Ok(session)
    }

    fn delete(&self, token: Option<&str>, session: &str) {
        let _ = self.send("DELETE", token, &[("Mcp-Session-Id", session)], b"");
    }

    fn tool_names(&self, token: Option<&str>) -> Result<Vec<String>, String> {
        let session = self.open_session(token)?;
        let r = self.post(token, Some(&session), &tools_list(), &[]);
        self.delete(token, &session);
        let r = r?;
        let m = first_message(&r.body).ok_or_else(|| format!("tools/list: {}", r.body))?;
        Ok(m["result"]["tools"]
            .as_array()
            .map(|tools| {
                tools
                    .iter()
                    .filter_map(|t| t["name"].as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default())
    }
}

/// An SSE answer whose response event arrived (its stream may stay open).
fn sse_answered(text: &str) -> bool {
    let Some((head, body)) = text.split_once("\r\n\r\n") else {
        return false;
    };
    let head = head.to_ascii_lowercase();
    if !head.contains("text/event-stream") {
        return false;
    }
    let body = if head.contains("transfer-encoding: chunked") {
        dechunk(body)
    } else {
        body.to_string()
    };
    body.lines()
        .any(|l| l.starts_with("data:") && (l.contains("\"result\"") || l.contains("\"error\"")))
        && body.ends_with("\n\n")
}

/// A chunked body, joined.
fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || rest.len() < n {
            out.push_str(&rest[..rest.len().min(n)]);
            break;
        }
        out.push_str(&rest[..n]);
        body = rest[n..].strip_prefix("\r\n").unwrap_or(&rest[n..]);
    }
    out
}
