//! Audit lines as OpenTelemetry logs: each line one `LogRecord`, a batch of them one
//! `ExportLogsServiceRequest` POSTed over OTLP/HTTP with JSON encoding to the collector's
//! `/v1/logs`.
//!
//! The record's body is the line as it stands in the day file (a `stringValue`; a line
//! that is not UTF-8, which only damage makes, a `bytesValue`), so the collected copy can
//! be checked with `mcpwall log verify --copy` like the local one. Its attributes carry
//! what a collector filters on without parsing the body: `mcpwall.event` (`audit`, or the
//! kind of the writer's record), `mcpwall.verdict` (the event's `action`) and
//! `mcpwall.session`. Its time is the event's own; its severity follows the action, as
//! for syslog (OpenTelemetry's numbers for syslog's informational, notice, warning and
//! error: 9, 10, 13, 17).
//!
//! A batch is shipped when the collector answers 2xx. Any other answer keeps its lines
//! for the next try (the cursor does not move), a 4xx too, although OTLP lets a client
//! drop such a batch: a copy of an audit log is not given up because the collector
//! refused it once (a wrong token is fixed, and the lines then go); the warning on stderr
//! says what the collector answered. A partial success (`rejectedLogRecords`) means the
//! collector took the batch and dropped some lines on purpose: sending them again would
//! not change that, so the cursor moves on, and the audit log says so (`Worker::note_drops`).

use std::borrow::Cow;
use std::io;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::header::{HeaderName, HeaderValue};
use serde_json::{Value, json};

use super::{Severity, ShipError, Taken, classify};
use crate::config::policy::OtlpSink;
use crate::upstream::{Upstream, UpstreamError};

/// Largest answer read from the collector (an `ExportLogsServiceResponse` is small).
const MAX_ANSWER: usize = 64 * 1024;
/// The instrumentation scope of every record.
const SCOPE: &str = "mcpwall.audit";

/// OpenTelemetry's severity number and text for a severity.
fn severity(severity: Severity) -> (u8, &'static str) {
    match severity {
        Severity::Info => (9, "INFO"),
        Severity::Notice => (10, "INFO2"),
        Severity::Warning => (13, "WARN"),
        Severity::Error => (17, "ERROR"),
    }
}

/// An OTLP/HTTP collector, checked and configured at start.
#[derive(Clone)]
pub struct Target {
    endpoint: String,
    upstream: Arc<Upstream>,
    /// `headers:` as written, and the content type.
    headers: Arc<[(HeaderName, HeaderValue)]>,
    /// The `resource` object every batch carries, as JSON.
    resource: Arc<str>,
}

impl Target {
    /// Everything that can be checked before the first batch: the URL, the CA file, the
    /// header file.
    pub fn new(sink: &OtlpSink) -> Result<Target, ShipError> {
        let endpoint = sink.endpoint.clone();
        let bad = |why: String| ShipError::Otlp {
            endpoint: endpoint.clone(),
            why,
        };
        #[cfg(not(feature = "tls"))]
        if endpoint.starts_with("https:") {
            return Err(ShipError::NoTls {
                sink: "otlp",
                scheme: "https://",
            });
        }
        let upstream = Upstream::new(&crate::upstream::Settings {
            url: endpoint.clone(),
            ca_file: sink.ca_file.clone(),
            header_file: sink.header_file.clone(),
            ..Default::default()
        })
        .map_err(|e| {
            bad(match e {
                UpstreamError::CaFile { path, why } => format!(
                    "ca_file {}: {why}; give a readable PEM file, or remove the key to verify the collector against the public roots",
                    path.display()
                ),
                UpstreamError::HeaderFile { path, why } => format!(
                    "header_file {}: {why}; give a readable file of `Name: value` lines",
                    path.display()
                ),
                other => other.to_string(),
            })
        })?;
        let mut headers = vec![(
            hyper::header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )];
        for (name, value) in &sink.headers {
            // Checked when the policy loaded; a failure here would be a bug, said plainly.
            let name = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| bad(format!("`{name}` is not a header name")))?;
            let value = HeaderValue::from_str(value)
                .map_err(|_| bad(format!("the value of {name} is not a header value")))?;
            headers.push((name, value));
        }
        let resource = json!({
            "attributes": [
                attribute("service.name", &sink.service_name),
                attribute("host.name", &super::syslog::hostname()),
            ]
        });
        Ok(Target {
            endpoint,
            upstream: Arc::new(upstream),
            headers: headers.into(),
            resource: resource.to_string().into(),
        })
    }

    pub fn address(&self) -> String {
        self.endpoint.clone()
    }
}

/// The batch being built, and the runtime its requests run on (the shipper's thread is
/// not async; the HTTP client is).
pub struct Sender {
    target: Target,
    runtime: Option<tokio::runtime::Runtime>,
    /// The members of the `logRecords` array, comma-separated.
    records: Vec<u8>,
    count: usize,
}

impl Sender {
    pub fn new(target: Target) -> Sender {
        Sender {
            target,
            runtime: None,
            records: Vec::new(),
            count: 0,
        }
    }

    /// The request's body: the batch wrapped in its resource and scope.
    fn body(&self) -> Bytes {
        let mut body = Vec::with_capacity(self.records.len() + self.target.resource.len() + 128);
        body.extend_from_slice(b"{\"resourceLogs\":[{\"resource\":");
        body.extend_from_slice(self.target.resource.as_bytes());
        body.extend_from_slice(b",\"scopeLogs\":[{\"scope\":{\"name\":\"");
        body.extend_from_slice(SCOPE.as_bytes());
        body.extend_from_slice(b"\",\"version\":\"");
        body.extend_from_slice(env!("CARGO_PKG_VERSION").as_bytes());
        body.extend_from_slice(b"\"},\"logRecords\":[");
        body.extend_from_slice(&self.records);
        body.extend_from_slice(b"]}]}]}");
        Bytes::from(body)
    }

    fn clear(&mut self) {
        self.records.clear();
        self.count = 0;
    }
}

impl super::Sink for Sender {
    fn add(&mut self, line: &[u8]) {
        if self.count > 0 {
            self.records.push(b',');
        }
        // Writing a `Value` into a Vec cannot fail.
        let _ = serde_json::to_writer(&mut self.records, &record(line, unix_nanos_now()));
        self.count += 1;
    }

    fn send(&mut self, timeout: Duration) -> io::Result<Taken> {
        if self.count == 0 {
            return Ok(Taken::All);
        }
        let body = self.body();
        let count = self.count;
        self.clear();
        if self.runtime.is_none() {
            self.runtime = Some(
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()?,
            );
        }
        let runtime = self.runtime.as_ref().expect("made above");
        let target = &self.target;
        let answer = runtime.block_on(async {
            let exchange = async {
                // A kept connection the collector closed while idle fails the first
                // request: one more, on a new connection (a batch may arrive twice: its
                // lines' hashes tell the copies apart).
                match post(target, body.clone()).await {
                    Err(UpstreamError::Request(_)) => post(target, body).await,
                    other => other,
                }
            };
            tokio::time::timeout(timeout, exchange).await
        });
        let (status, text) = match answer {
            Err(_) => {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("no answer within {} ms", timeout.as_millis()),
                ));
            }
            Ok(Err(e)) => return Err(io::Error::other(e.to_string())),
            Ok(Ok(answer)) => answer,
        };
        if !status.is_success() {
            return Err(io::Error::other(format!(
                "the collector answered {status}{}",
                message(&text).map_or(String::new(), |m| format!(": {m}"))
            )));
        }
        Ok(match partial_success(&text) {
            Some((dropped, why)) => Taken::Partly {
                lines: count,
                dropped,
                why,
            },
            None => Taken::All,
        })
    }

    fn disconnect(&mut self) {
        self.clear();
        // The runtime's connections go with it.
        self.runtime = None;
    }
}

/// One POST of a batch: the status and (the start of) the answer's body.
async fn post(target: &Target, body: Bytes) -> Result<(hyper::StatusCode, Bytes), UpstreamError> {
    let response = target
        .upstream
        .send(hyper::Method::POST, &target.headers, body)
        .await?;
    let status = response.status();
    let text = http_body_util::Limited::new(response.into_body(), MAX_ANSWER)
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    Ok((status, text))
}

/// `{"key": KEY, "value": {"stringValue": VALUE}}`.
fn attribute(key: &str, value: &str) -> Value {
    json!({"key": key, "value": {"stringValue": value}})
}

/// The fields of an audit line that become attributes.
#[derive(serde::Deserialize)]
struct Fields<'a> {
    #[serde(borrow)]
    ts: Option<Cow<'a, str>>,
    #[serde(borrow)]
    record: Option<Cow<'a, str>>,
    #[serde(borrow)]
    action: Option<Cow<'a, str>>,
    #[serde(borrow)]
    session: Option<Cow<'a, str>>,
}

/// The `LogRecord` of one audit line.
fn record(line: &[u8], observed: u128) -> Value {
    let (level, _) = classify(line);
    let (number, text) = severity(level);
    let fields: Option<Fields<'_>> = serde_json::from_slice(line).ok();
    let mut attributes = Vec::with_capacity(3);
    let event = fields
        .as_ref()
        .and_then(|f| f.record.as_deref())
        .unwrap_or("audit");
    attributes.push(attribute("mcpwall.event", event));
    if let Some(f) = &fields {
        if let Some(action) = &f.action {
            attributes.push(attribute("mcpwall.verdict", action));
        }
        if let Some(session) = &f.session {
            attributes.push(attribute("mcpwall.session", session));
        }
    }
    let body = match std::str::from_utf8(line) {
        Ok(text) => json!({ "stringValue": text }),
        Err(_) => {
            use base64::Engine as _;
            json!({ "bytesValue": base64::engine::general_purpose::STANDARD.encode(line) })
        }
    };
    let mut record = json!({
        "observedTimeUnixNano": observed.to_string(),
        "severityNumber": number,
        "severityText": text,
        "body": body,
        "attributes": attributes,
    });
    let event_time = fields
        .as_ref()
        .and_then(|f| f.ts.as_deref())
        .and_then(crate::audit::time::parse_rfc3339);
    if let Some(micros) = event_time.filter(|&m| m > 0) {
        // int64 fields are JSON strings in OTLP's JSON encoding.
        record["timeUnixNano"] = Value::from((i128::from(micros) * 1000).to_string());
    }
    record
}

fn unix_nanos_now() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

/// The `message` of a JSON error answer (a `google.rpc.Status`), or the start of a plain
/// one: at most 200 visible characters.
fn message(body: &[u8]) -> Option<String> {
    let text = match serde_json::from_slice::<Value>(body) {
        Ok(v) => v["message"].as_str().map(str::to_string)?,
        Err(_) => String::from_utf8_lossy(body).into_owned(),
    };
    let shown: String = text.chars().filter(|c| !c.is_control()).take(200).collect();
    (!shown.trim().is_empty()).then_some(shown)
}

/// `partialSuccess` of an `ExportLogsServiceResponse`, when it reports dropped records.
fn partial_success(body: &[u8]) -> Option<(u64, String)> {
    let v: Value = serde_json::from_slice(body).ok()?;
    let partial = &v["partialSuccess"];
    // An int64: a string in OTLP's JSON, a number from some encoders.
    let rejected = match &partial["rejectedLogRecords"] {
        Value::String(s) => s.parse().ok()?,
        Value::Number(n) => n.as_u64()?,
        _ => return None,
    };
    if rejected == 0 {
        return None;
    }
    let why = message(
        serde_json::to_vec(&json!({"message": partial["errorMessage"]}))
            .unwrap_or_default()
            .as_slice(),
    )
    .unwrap_or_else(|| "no reason given".into());
    Some((rejected, why))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_is_one_log_record_with_its_body_verbatim_and_its_attributes() {
        let line = br#"{"ts":"2026-12-06T13:22:04.123456Z","session":"s-1","action":"deny","tool":"x\"y","hash":"h"}"#;
        let r = record(line, 7);
        assert_eq!(r["body"]["stringValue"].as_str().unwrap().as_bytes(), line);
        assert_eq!(r["timeUnixNano"], "1796563324123456000");
        assert_eq!(r["observedTimeUnixNano"], "7");
        assert_eq!(r["severityNumber"], 10);
        let attrs: Vec<(String, String)> = r["attributes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| {
                (
                    a["key"].as_str().unwrap().to_string(),
                    a["value"]["stringValue"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        assert_eq!(
            attrs,
            [
                ("mcpwall.event".into(), "audit".into()),
                ("mcpwall.verdict".into(), "deny".into()),
                ("mcpwall.session".into(), "s-1".into()),
            ]
        );
    }

    #[test]
    fn records_are_warnings_and_damaged_lines_still_go_verbatim() {
        let gap = record(br#"{"ts":"2026-12-06T00:00:00.000000Z","record":"gap"}"#, 0);
        assert_eq!(gap["severityNumber"], 13);
        assert_eq!(gap["attributes"][0]["value"]["stringValue"], "gap");
        let cut = record(br#"{"ts":"2026-12-0"#, 0);
        assert_eq!(cut["body"]["stringValue"], r#"{"ts":"2026-12-0"#);
        assert!(cut.get("timeUnixNano").is_none());
        let binary = record(b"{\"ts\":\xff}", 0);
        assert_eq!(binary["body"]["bytesValue"], "eyJ0cyI6/30=");
    }

    #[test]
    fn a_partial_success_is_read_in_both_int64_spellings() {
        let s = br#"{"partialSuccess":{"rejectedLogRecords":"2","errorMessage":"too old"}}"#;
        assert_eq!(partial_success(s), Some((2, "too old".into())));
        let n = br#"{"partialSuccess":{"rejectedLogRecords":3}}"#;
        assert_eq!(partial_success(n), Some((3, "no reason given".into())));
        assert_eq!(partial_success(br#"{"partialSuccess":{}}"#), None);
        assert_eq!(partial_success(b"{}"), None);
    }
}
