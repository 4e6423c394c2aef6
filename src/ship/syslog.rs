//! One audit line as one syslog message: RFC 5424's header in front of the line as it
//! stands in the day file, octet-counted (RFC 6587 §3.4.1) for a TCP or TLS stream.
//!
//! The header carries what a collector filters on without parsing JSON: the event's own
//! time, a severity from its action, and `audit` or `record` (the writer's own lines) as
//! MSGID. The body is the line byte for byte, chain fields included, so the collected copy
//! can be checked with `mcpwall log verify` like the local one.

use std::io::{self, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;

use super::{Severity, ShipError, classify, event_time};
use crate::config::policy::SyslogSink;

/// RFC 5424's code for a severity.
fn code(severity: Severity) -> u8 {
    match severity {
        Severity::Error => 3,
        Severity::Warning => 4,
        Severity::Notice => 5,
        Severity::Info => 6,
    }
}

/// A syslog collector, checked and configured at start.
#[derive(Clone)]
pub struct Target {
    sink: SyslogSink,
    header: Arc<Header>,
    #[cfg(feature = "tls")]
    tls: Option<Arc<rustls::ClientConfig>>,
}

impl Target {
    /// Everything that can be checked before the first connection: certificates read,
    /// TLS configured.
    pub fn new(sink: &SyslogSink) -> Result<Target, ShipError> {
        #[cfg(not(feature = "tls"))]
        if sink.tls {
            return Err(ShipError::NoTls {
                sink: "syslog",
                scheme: "tls://",
            });
        }
        Ok(Target {
            sink: sink.clone(),
            header: Arc::new(Header::new(sink)),
            #[cfg(feature = "tls")]
            tls: if sink.tls {
                Some(tls_config(sink)?)
            } else {
                None
            },
        })
    }

    pub fn address(&self) -> String {
        self.sink.address()
    }

    fn connect(&self, timeout: Duration) -> io::Result<Connection> {
        Connection::open(
            &self.sink,
            #[cfg(feature = "tls")]
            self.tls.as_ref(),
            timeout,
        )
    }
}

#[cfg(feature = "tls")]
fn tls_config(sink: &SyslogSink) -> Result<Arc<rustls::ClientConfig>, ShipError> {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};
    let roots =
        crate::upstream::tls::roots(sink.ca_file.as_deref()).map_err(|why| ShipError::CaFile {
            path: sink.ca_file.clone().unwrap_or_default(),
            why,
        })?;
    let builder = crate::upstream::tls::builder(roots).map_err(|why| ShipError::CaFile {
        path: sink.ca_file.clone().unwrap_or_default(),
        why,
    })?;
    let config = match (&sink.client_cert, &sink.client_key) {
        (Some(cert), Some(key)) => {
            let bad = |why: String| ShipError::ClientCert {
                cert: cert.clone(),
                key: key.clone(),
                why,
            };
            let chain = CertificateDer::pem_file_iter(cert)
                .map_err(|e| bad(e.to_string()))?
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| bad(e.to_string()))?;
            if chain.is_empty() {
                return Err(bad("the certificate file holds no PEM certificate".into()));
            }
            let key = PrivateKeyDer::from_pem_file(key).map_err(|e| bad(e.to_string()))?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| bad(e.to_string()))?
        }
        _ => builder.with_no_client_auth(),
    };
    Ok(Arc::new(config))
}

/// The stream to one collector and the octet-counted messages waiting to be written.
pub struct Sender {
    target: Target,
    conn: Option<Connection>,
    out: Vec<u8>,
}

impl Sender {
    pub fn new(target: Target) -> Sender {
        Sender {
            target,
            conn: None,
            out: Vec::new(),
        }
    }
}

impl super::Sink for Sender {
    fn add(&mut self, line: &[u8]) {
        self.target.header.frame(&mut self.out, line);
    }

    fn send(&mut self, timeout: Duration) -> io::Result<super::Taken> {
        let result = (|| {
            let conn = match &mut self.conn {
                Some(conn) => conn,
                None => self.conn.insert(self.target.connect(timeout)?),
            };
            conn.write_all(&self.out).and_then(|()| conn.flush())
        })();
        self.out.clear();
        if result.is_err() {
            self.conn = None;
        }
        // A syslog collector does not answer: what was written was taken.
        result.map(|()| super::Taken::All)
    }

    fn disconnect(&mut self) {
        self.conn = None;
        self.out.clear();
    }
}

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
        let (severity, record) = classify(line);
        let msgid = if record { "record" } else { "audit" };
        let pri = u16::from(self.facility) * 8 + u16::from(code(severity));
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

/// This machine's name as RFC 5424 wants it (printable ASCII, at most 255), or `-`.
pub(super) fn hostname() -> String {
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
