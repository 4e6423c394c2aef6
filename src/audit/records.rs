//! The writer's own lines: what it found wrong with the log itself, or could not write,
//! chained like events, so `mcpwall log verify` tells a crash or a lost batch from an edit.
//!
//! A record is a line whose second key is `record` (an event's is always `session`):
//!
//! - `cut_line`: the day file's last line had no newline when this writer came to append
//!   (its writer stopped mid-line: a crash or a full disk). The writer ended it with a
//!   newline and wrote this record right after it, chained to the last complete line,
//!   with the cut line's byte `offset`, `length` and `sha256`: the chain goes on, and the
//!   cut bytes cannot be changed later without the record saying so.
//! - `truncated`: the file was shorter than its seal when this writer came to append:
//!   lines at its end were removed. The next seal covers the new end, so this record is
//!   what keeps the evidence.
//! - `gap`: events this writer could not write (a write error, a full disk, a queue
//!   full because the disk was too slow): how many, between which times, and why.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::chain::Link;
use super::time::{self, Micros};

/// One of the writer's records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    CutLine {
        offset: u64,
        length: u64,
        sha256: Link,
    },
    Truncated {
        sealed_length: u64,
        length: u64,
    },
    Gap {
        events: u64,
        from: Micros,
        until: Micros,
        reason: String,
    },
}

/// What follows `{"ts":"…"` on a record line.
const RECORD_KEY: &[u8] = b",\"record\":\"";

impl Record {
    fn kind(&self) -> &'static str {
        match self {
            Record::CutLine { .. } => "cut_line",
            Record::Truncated { .. } => "truncated",
            Record::Gap { .. } => "gap",
        }
    }

    /// The record as a line body (a JSON object without its closing brace, as
    /// [`super::chain::push_chained`] takes it). `session` and `server` are the writer's
    /// formatted `,"session":…` and `,"server":…` fragments.
    pub fn body(&self, now: SystemTime, session: &str, server: &str) -> String {
        let mut out = String::with_capacity(320);
        out.push_str("{\"ts\":\"");
        super::rfc3339(&mut out, now);
        out.push('"');
        out.push_str(std::str::from_utf8(RECORD_KEY).unwrap_or_default());
        out.push_str(self.kind());
        out.push('"');
        out.push_str(session);
        out.push_str(server);
        out.push_str(",\"method\":\"mcpwall/audit\",\"action\":\"log_only\",\"rule\":\"mcpwall:");
        out.push_str(self.kind());
        out.push_str("\",\"message\":");
        super::json_str(&mut out, &self.message());
        match self {
            Record::CutLine {
                offset,
                length,
                sha256,
            } => {
                out.push_str(&format!(
                    ",\"cut\":{{\"offset\":{offset},\"length\":{length},\"sha256\":\"{}\"}}",
                    String::from_utf8_lossy(sha256)
                ));
            }
            Record::Truncated {
                sealed_length,
                length,
            } => {
                out.push_str(&format!(
                    ",\"truncated\":{{\"sealed_length\":{sealed_length},\"length\":{length}}}"
                ));
            }
            Record::Gap {
                events,
                from,
                until,
                reason,
            } => {
                out.push_str(&format!(
                    ",\"gap\":{{\"events\":{events},\"from\":\"{}\",\"until\":\"{}\",\"reason\":",
                    time_text(*from),
                    time_text(*until)
                ));
                super::json_str(&mut out, reason);
                out.push('}');
            }
        }
        out
    }

    /// What a reader of `mcpwall log` is told.
    pub fn message(&self) -> String {
        match self {
            Record::CutLine { offset, length, .. } => format!(
                "the line at byte {offset} was cut off after {length} bytes (its writer stopped mid-line: a crash or a full disk); it was ended here and the chain goes on"
            ),
            Record::Truncated {
                sealed_length,
                length,
            } => format!(
                "this file was {length} bytes long, shorter than the {sealed_length} bytes its seal records: lines at its end were removed"
            ),
            Record::Gap {
                events,
                from,
                until,
                reason,
            } => format!(
                "{events} audit event(s) between {} and {} could not be written ({reason})",
                time_text(*from),
                time_text(*until)
            ),
        }
    }

    /// The record a line's body holds, `None` for an event (or a record that does not
    /// parse: verified as a line, never trusted as a record).
    pub fn parse(body: &[u8]) -> Option<Record> {
        let rest = body.strip_prefix(b"{\"ts\":\"")?;
        let quote = rest.iter().position(|&b| b == b'"')?;
        if !rest[quote + 1..].starts_with(RECORD_KEY) {
            return None;
        }
        let mut json = body.to_vec();
        json.push(b'}');
        let v: serde_json::Value = serde_json::from_slice(&json).ok()?;
        let u = |o: &serde_json::Value, k: &str| o.get(k).and_then(|v| v.as_u64());
        match v["record"].as_str()? {
            "cut_line" => {
                let c = &v["cut"];
                Some(Record::CutLine {
                    offset: u(c, "offset")?,
                    length: u(c, "length")?,
                    sha256: c["sha256"].as_str()?.as_bytes().try_into().ok()?,
                })
            }
            "truncated" => {
                let t = &v["truncated"];
                Some(Record::Truncated {
                    sealed_length: u(t, "sealed_length")?,
                    length: u(t, "length")?,
                })
            }
            "gap" => {
                let g = &v["gap"];
                Some(Record::Gap {
                    events: u(g, "events")?,
                    from: time::parse_rfc3339(g["from"].as_str()?)?,
                    until: time::parse_rfc3339(g["until"].as_str()?)?,
                    reason: g["reason"].as_str()?.to_string(),
                })
            }
            _ => None,
        }
    }
}

/// A time of the log as the writer writes it (`YYYY-MM-DDTHH:MM:SS.ffffffZ`).
pub fn time_text(t: Micros) -> String {
    let mut out = String::with_capacity(27);
    let micros = u64::try_from(t).unwrap_or(0);
    super::rfc3339(&mut out, UNIX_EPOCH + Duration::from_micros(micros));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::chain;

    #[test]
    fn records_round_trip_and_events_are_not_records() {
        let now = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        for record in [
            Record::CutLine {
                offset: 1234,
                length: 56,
                sha256: chain::digest(b"{\"ts\":\"2026"),
            },
            Record::Truncated {
                sealed_length: 900,
                length: 450,
            },
            Record::Gap {
                events: 446_689,
                from: 1_700_000_000_000_001,
                until: 1_700_000_300_000_000,
                reason: "No space left on device \"quoted\"".into(),
            },
        ] {
            let body = record.body(now, ",\"session\":\"s\"", ",\"server\":\"srv\"");
            assert_eq!(
                Record::parse(body.as_bytes()),
                Some(record.clone()),
                "{body}"
            );
            let v: serde_json::Value = serde_json::from_str(&format!("{body}}}")).unwrap();
            assert_eq!(v["session"], "s");
            assert_eq!(v["action"], "log_only");
            assert!(v["rule"].as_str().unwrap().starts_with("mcpwall:"));
            assert_eq!(v["message"], record.message());
        }
        // An event whose argument text spells a record is still an event.
        let event = br#"{"ts":"2026-01-01T00:00:00.000000Z","session":"s","args":{"record":"gap","gap":{"events":1}}"#;
        assert_eq!(Record::parse(event), None);
    }
}
