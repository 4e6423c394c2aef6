//! One audit line as one syslog message: RFC 5424's header in front of the line as it
//! stands in the day file, octet-counted (RFC 6587 §3.4.1) for a TCP or TLS stream.
//!
//! The header carries what a collector filters on without parsing JSON: the event's own
//! time, a severity from its action, and `audit` or `record` (the writer's own lines) as
//! MSGID. The body is the line byte for byte, chain fields included, so the collected copy
//! can be checked with `mcpwall log verify` like the local one.

use std::io::{self, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use memchr::memmem;

use crate::config::policy::SyslogSink;

/// RFC 5424 severities used here.
const WARNING: u8 = 4;
const NOTICE: u8 = 5;
const INFO: u8 = 6;
const ERROR: u8 = 3;

/// What every message of one shipper has in common.
pub struct Header {
    facility: u8,
    hostname: String,
    app_name: String,
}

impl Header {
    pub fn new(sink: &SyslogSink) -> Header {
        Header {
            facility: sink.facility,
            hostname: hostname(),
            app_name: sink.app_name.clone(),
        }
    }

    /// Append `line` (without its newline) to `out` as one octet-counted message.
    pub fn frame(&self, out: &mut Vec<u8>, line: &[u8]) {
        let (severity, msgid) = classify(line);
        let pri = u16::from(self.facility) * 8 + u16::from(severity);
        let ts = event_time(line).unwrap_or("-");
        let head = format!(
            "<{pri}>1 {ts} {} {} - {msgid} - ",
            self.hostname, self.app_name
        );
        let len = head.len() + line.len();
        out.extend_from_slice(len.to_string().as_bytes());
        out.push(b' ');
        out.extend_from_slice(head.as_bytes());
        out.extend_from_slice(line);
    }
}

/// The line's own time (`{"ts":"2026-12-06T13:22:04.123456Z",…`): RFC 3339 with at most
/// six fractional digits, as RFC 5424 allows.
fn event_time(line: &[u8]) -> Option<&str> {
    let rest = line.strip_prefix(b"{\"ts\":\"")?;
    let end = memchr::memchr(b'"', rest.get(..40)?)?;
    let ts = std::str::from_utf8(&rest[..end]).ok()?;
    let well_formed = ts.len() >= 20
        && ts.ends_with('Z')
        && ts
            .bytes()
            .all(|b| b.is_ascii_digit() || b"-:.TZ".contains(&b));
    well_formed.then_some(ts)
}

/// Severity and MSGID: the writer's records (a gap, a cut line) are warnings; refusals
/// notices; errors errors; the rest informational.
fn classify(line: &[u8]) -> (u8, &'static str) {
    let head = &line[..line.len().min(80)];
    if memmem::find(head, b"\"record\":\"").is_some() {
        return (WARNING, "record");
    }
    let Some(at) = memmem::find(line, b"\"action\":\"") else {
        return (INFO, "audit");
    };
    let word = &line[at + 10..];
    let word = &word[..memchr::memchr(b'"', word).unwrap_or(0)];
    let severity = match word {
        b"error" => ERROR,
        b"deny" | b"block" | b"redact" | b"drop" | b"declined" | b"timed_out" => NOTICE,
        _ => INFO,
    };
    (severity, "audit")
}

/// This machine's name as RFC 5424 wants it (printable ASCII, at most 255), or `-`.
fn hostname() -> String {
    let raw = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .or_else(|| std::env::var("COMPUTERNAME").ok())
        .unwrap_or_default();
    let name: String = raw
        .trim()
        .chars()
        .filter(|c| c.is_ascii_graphic())
        .take(255)
        .collect();
    if name.is_empty() { "-".into() } else { name }
}

/// A connection to the collector.
pub enum Connection {
    Tcp(TcpStream),
    #[cfg(feature = "tls")]
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, TcpStream>>),
}

impl Connection {
    /// Connect to `sink` within `timeout`; writes time out after `timeout` too, so a
    /// collector that stops reading holds the shipper, never the proxy.
    pub fn open(
        sink: &SyslogSink,
        #[cfg(feature = "tls")] tls: Option<&std::sync::Arc<rustls::ClientConfig>>,
        timeout: Duration,
    ) -> io::Result<Connection> {
        let mut last = io::Error::new(io::ErrorKind::NotFound, "the host has no address");
        for addr in (sink.host.as_str(), sink.port).to_socket_addrs()? {
            match TcpStream::connect_timeout(&addr, timeout) {
                Ok(stream) => {
                    stream.set_write_timeout(Some(timeout))?;
                    stream.set_read_timeout(Some(timeout))?;
                    let _ = stream.set_nodelay(true);
                    return Connection::wrap(
                        sink,
                        stream,
                        #[cfg(feature = "tls")]
                        tls,
                    );
                }
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    fn wrap(
        sink: &SyslogSink,
        stream: TcpStream,
        #[cfg(feature = "tls")] tls: Option<&std::sync::Arc<rustls::ClientConfig>>,
    ) -> io::Result<Connection> {
        if !sink.tls {
            return Ok(Connection::Tcp(stream));
        }
        #[cfg(feature = "tls")]
        {
            let config = tls.ok_or_else(|| io::Error::other("no TLS configuration"))?;
            let name = rustls_pki_types::ServerName::try_from(sink.host.clone())
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
            let mut conn =
                rustls::ClientConnection::new(config.clone(), name).map_err(io::Error::other)?;
            let mut stream = stream;
            // The handshake now, so a certificate the collector can't prove fails the
            // connection, not the first write long after.
            while conn.is_handshaking() {
                conn.complete_io(&mut stream)?;
            }
            Ok(Connection::Tls(Box::new(rustls::StreamOwned::new(
                conn, stream,
            ))))
        }
        #[cfg(not(feature = "tls"))]
        {
            let _ = stream;
            Err(io::Error::other("this mcpwall was built without TLS"))
        }
    }
}

impl Write for Connection {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Connection::Tcp(s) => s.write(buf),
            #[cfg(feature = "tls")]
            Connection::Tls(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Connection::Tcp(s) => s.flush(),
            #[cfg(feature = "tls")]
            Connection::Tls(s) => s.flush(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header() -> Header {
        Header {
            facility: 16,
            hostname: "box".into(),
            app_name: "mcpwall".into(),
        }
    }

    fn framed(line: &str) -> String {
        let mut out = Vec::new();
        header().frame(&mut out, line.as_bytes());
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn a_line_is_one_octet_counted_rfc5424_message() {
        let line =
            r#"{"ts":"2026-12-06T13:22:04.123456Z","session":"s","action":"allow","hash":"h"}"#;
        let out = framed(line);
        let (len, msg) = out.split_once(' ').unwrap();
        assert_eq!(len.parse::<usize>().unwrap(), msg.len());
        assert_eq!(
            msg,
            format!("<134>1 2026-12-06T13:22:04.123456Z box mcpwall - audit - {line}")
        );
    }

    #[test]
    fn severity_follows_the_action_and_records_are_warnings() {
        let deny = framed(r#"{"ts":"2026-12-06T00:00:00.000000Z","action":"deny"}"#);
        assert!(deny.contains("<133>1 "), "{deny}");
        let error = framed(r#"{"ts":"2026-12-06T00:00:00.000000Z","action":"error"}"#);
        assert!(error.contains("<131>1 "), "{error}");
        let record = framed(r#"{"ts":"2026-12-06T00:00:00.000000Z","record":"gap"}"#);
        assert!(
            record.contains("<132>1 ") && record.contains(" record - "),
            "{record}"
        );
    }

    #[test]
    fn a_line_without_a_readable_time_gets_the_nil_time() {
        let cut = framed(r#"{"ts":"2026-12-0"#);
        assert!(cut.contains("<134>1 - box "), "{cut}");
        let odd = framed(r#"{"ts":"now; rm -rf ~","action":"allow"}"#);
        assert!(odd.contains("<134>1 - box "), "{odd}");
    }
}
