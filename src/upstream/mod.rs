//! The HTTP client side: mcpwall as the client of a remote MCP server over Streamable
//! HTTP (specification 2025-11-25), for bridge mode (`mcpwall --upstream URL`: stdio
//! towards the client) and `mcpwall serve --upstream URL`.
//!
//! | file | job |
//! | --- | --- |
//! | `mod.rs` | [`Upstream`]: the endpoint, its headers, connections (TLS), redirects |
//! | `link.rs` | one MCP session with the server: POSTs, the GET stream, session id, resumption |
//! | `sse.rs` | the SSE reader: events cut out of the stream, each bounded |
//! | `tls.rs` | rustls with verified certificates, `--ca-file` |
//!
//! Nothing here judges a message: [`link::Link`] hands every message the server sends, and
//! every request that got no answer, to the transport, which feeds its `Session`.

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use hyper::header::{HeaderMap, HeaderName, HeaderValue};
use hyper::{Method, Request, Response, StatusCode, Uri};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};

pub mod link;
pub mod sse;
#[cfg(feature = "tls")]
pub mod tls;

/// The environment variable whose value is sent as `Authorization: Bearer <value>`.
pub const TOKEN_ENV: &str = "MCPWALL_UPSTREAM_TOKEN";
pub use crate::clients::entry::{HEADER_VARS_ENV, TOKEN_VAR_ENV, is_variable_name};
/// Redirects followed (same origin only) before giving up.
const MAX_REDIRECTS: usize = 5;
/// How long connecting (TCP and TLS) may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// Connections kept for reuse. A sender is busy until its answer's body has been read, a
/// little after the client has its answer, so N clients at once need somewhat more than N
/// connections; each one beyond the pool was closed after a single exchange (8 kept: with 8
/// clients, a new connection every ~50 requests). 64, as the bench's nginx `keepalive`.
const POOL_SIZE: usize = 64;

/// Why the upstream cannot be set up or reached.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    #[error("--upstream {url}: {why}")]
    Url { url: String, why: String },
    #[error(
        "--upstream {0}: this mcpwall was built without TLS (the `tls` feature); use an http:// URL or a build with it"
    )]
    NoTls(String),
    #[error("--ca-file {path}: {why}")]
    CaFile { path: PathBuf, why: String },
    #[error("--header-file {path}: {why}")]
    HeaderFile { path: PathBuf, why: String },
    /// The headers given in the environment (`$MCPWALL_UPSTREAM_HEADERS`, which `wrap`
    /// writes into a remote entry it turned into a bridge), named by the variable.
    #[error("${var}: {why}")]
    HeaderEnv { var: &'static str, why: String },
    #[error("${TOKEN_ENV} is not a valid header value (control characters?)")]
    BadToken,
    /// A credential named by reference ([`TOKEN_VAR_ENV`], [`HEADER_VARS_ENV`]) that
    /// cannot be had; the bridge does not start without it.
    #[error("${var}: {why}")]
    Reference { var: &'static str, why: String },
    #[error("TLS setup failed: {0}")]
    Tls(String),
    #[error("cannot connect to {authority}: {why}")]
    Connect { authority: String, why: String },
    #[error("the upstream request failed: {0}")]
    Request(String),
    #[error(
        "the upstream redirected to another origin ({to}); mcpwall does not follow it (the headers and token would go there)"
    )]
    CrossOriginRedirect { to: String },
    #[error("the upstream redirected a {method} with {status}, which would change the method")]
    MethodChangingRedirect { method: Method, status: StatusCode },
    #[error("the upstream redirected more than {MAX_REDIRECTS} times")]
    TooManyRedirects,
}

/// Scheme, host and port: what a redirect may not change.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Origin {
    https: bool,
    host: String,
    port: u16,
}

impl Origin {
    fn of(uri: &Uri) -> Option<Origin> {
        let https = match uri.scheme_str()? {
            "https" => true,
            "http" => false,
            _ => return None,
        };
        let host = uri.host()?.to_ascii_lowercase();
        let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
        Some(Origin { https, host, port })
    }

    /// The host without IPv6 brackets, as sockets and certificates name it.
    fn bare_host(&self) -> &str {
        self.host.trim_start_matches('[').trim_end_matches(']')
    }
}

/// How the upstream is reached, from the command line and the environment.
#[derive(Debug, Clone, Default)]
pub struct Settings {
    pub url: String,
    /// `--ca-file`: trust only the CAs in this PEM file.
    pub ca_file: Option<PathBuf>,
    /// `--header-file`: `Name: value` lines sent with every request.
    pub header_file: Option<PathBuf>,
    /// The value of [`TOKEN_ENV`], if set.
    pub token: Option<String>,
    /// `Name: value` lines from an environment variable (named first, for messages),
    /// read as a header file's: how a wrapped remote entry's `headers` reach the server.
    pub header_env: Option<(&'static str, String)>,
    /// Headers whose values were read from the variables [`HEADER_VARS_ENV`] names
    /// ([`referenced_credentials`]): `Name: value` lines.
    pub referenced_headers: Option<String>,
}

/// What [`referenced_credentials`] found.
#[derive(Default)]
pub struct Referenced {
    /// The bearer token, from the variable [`TOKEN_VAR_ENV`] names.
    pub token: Option<String>,
    /// `Name: value` lines, each value from the variable [`HEADER_VARS_ENV`] names for it.
    pub header_lines: Option<String>,
}

/// Read the credentials the environment names rather than holds ([`TOKEN_VAR_ENV`],
/// [`HEADER_VARS_ENV`]), with `lookup` reading a variable. A named variable that is unset
/// or empty is an error: the bridge never falls back to an unauthenticated connection.
/// Errors name variables and headers, never a value.
pub fn referenced_credentials(
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Referenced, UpstreamError> {
    let mut out = Referenced::default();
    let read = |var: &'static str, name: &str, what: &str| {
        if !is_variable_name(name) {
            return Err(UpstreamError::Reference {
                var,
                why: format!("{name:?} is not an environment variable name"),
            });
        }
        match lookup(name) {
            Some(v) if !v.trim().is_empty() => Ok(v),
            _ => Err(UpstreamError::Reference {
                var,
                why: format!(
                    "{what} comes from ${name}, which is not set (or empty) where mcpwall was started; set it where the client runs (Codex passes it on when the entry's `env_vars` names it), then start the client again"
                ),
            }),
        }
    };
    if let Some(name) = lookup(TOKEN_VAR_ENV).filter(|n| !n.trim().is_empty()) {
        out.token = Some(read(TOKEN_VAR_ENV, name.trim(), "the bearer token")?);
    }
    if let Some(lines) = lookup(HEADER_VARS_ENV).filter(|l| !l.trim().is_empty()) {
        let mut resolved = Vec::new();
        for (n, line) in lines.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() {
                continue;
            }
            let Some((header, name)) = line.split_once(':') else {
                return Err(UpstreamError::Reference {
                    var: HEADER_VARS_ENV,
                    why: format!("line {}: expected `Header: VARIABLE`", n + 1),
                });
            };
            let header = header.trim();
            let value = read(HEADER_VARS_ENV, name.trim(), &format!("header {header}"))?;
            if value.contains(['\r', '\n']) {
                return Err(UpstreamError::Reference {
                    var: HEADER_VARS_ENV,
                    why: format!(
                        "the value of ${} for header {header} holds a line break",
                        name.trim()
                    ),
                });
            }
            resolved.push(format!("{header}: {}", value.trim()));
        }
        out.header_lines = Some(resolved.join("\n"));
    }
    Ok(out)
}

type Io = Box<dyn Conn>;
trait Conn: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Conn for T {}

/// A remote MCP endpoint and the connections to it. Cheap to share (`Arc`).
pub struct Upstream {
    endpoint: Uri,
    origin: Origin,
    headers: HeaderMap,
    #[cfg(feature = "tls")]
    tls: Option<tokio_rustls::TlsConnector>,
    /// Connections to the origin; a sender is taken when it is ready for a request.
    pool: Mutex<Vec<SendRequest<Full<Bytes>>>>,
}

impl std::fmt::Debug for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the headers: they hold the token.
        f.debug_struct("Upstream")
            .field("endpoint", &self.endpoint)
            .finish_non_exhaustive()
    }
}

impl Upstream {
    /// Check the URL, read the header file and the token, set up TLS. Fails at start,
    /// never at the first message.
    pub fn new(settings: &Settings) -> Result<Upstream, UpstreamError> {
        let url = settings.url.clone();
        let bad = |why: &str| UpstreamError::Url {
            url: url.clone(),
            why: why.to_string(),
        };
        let endpoint: Uri = url.parse().map_err(|_| bad("not a URL"))?;
        let origin =
            Origin::of(&endpoint).ok_or_else(|| bad("needs http:// or https:// and a host"))?;
        if endpoint
            .authority()
            .is_some_and(|a| a.as_str().contains('@'))
        {
            return Err(bad(
                "user:password in the URL would sit in the process list; use --header-file or $MCPWALL_UPSTREAM_TOKEN",
            ));
        }
        let mut headers = HeaderMap::new();
        if let Some(path) = &settings.header_file {
            read_header_file(path, &mut headers)?;
        }
        if let Some((var, lines)) = &settings.header_env {
            let bad = |why: String| UpstreamError::HeaderEnv { var, why };
            let mut from_env = HeaderMap::new();
            parse_header_lines(lines, &mut from_env).map_err(bad)?;
            for (name, value) in &from_env {
                if is_reserved(name) {
                    return Err(bad(format!("{name} is set by mcpwall itself")));
                }
                // The client expands `${VAR}` before it starts mcpwall; one left means the
                // variable was not set there (the value itself is never shown).
                if value.as_bytes().windows(2).any(|w| w == b"${") {
                    eprintln!(
                        "mcpwall: warning: ${var}: header {name} still holds a `${{…}}` reference: the client did not expand it (is the variable set where the client runs?); it is sent as written"
                    );
                }
            }
            headers.extend(from_env);
        }
        if let Some(lines) = &settings.referenced_headers {
            let bad = |why: String| UpstreamError::Reference {
                var: HEADER_VARS_ENV,
                why,
            };
            let mut from_env = HeaderMap::new();
            parse_header_lines(lines, &mut from_env).map_err(bad)?;
            for (name, _) in &from_env {
                if is_reserved(name) || headers.contains_key(name) {
                    return Err(bad(format!(
                        "{name} is set by mcpwall itself or given twice"
                    )));
                }
            }
            headers.extend(from_env);
        }
        if let Some(token) = &settings.token {
            let value = HeaderValue::from_str(&format!("Bearer {}", token.trim()))
                .map_err(|_| UpstreamError::BadToken)?;
            headers.insert(hyper::header::AUTHORIZATION, value);
        }
        for (name, _) in headers.iter() {
            if is_reserved(name) {
                return Err(UpstreamError::HeaderFile {
                    path: settings.header_file.clone().unwrap_or_default(),
                    why: format!("{name} is set by mcpwall itself"),
                });
            }
        }
        #[cfg(feature = "tls")]
        let tls = if origin.https {
            let config = tls::client_config(settings.ca_file.as_deref())?;
            Some(tokio_rustls::TlsConnector::from(config))
        } else {
            None
        };
        #[cfg(not(feature = "tls"))]
        if origin.https {
            return Err(UpstreamError::NoTls(url));
        }
        Ok(Upstream {
            endpoint,
            origin,
            headers,
            #[cfg(feature = "tls")]
            tls,
            pool: Mutex::new(Vec::new()),
        })
    }

    /// The endpoint URL (for messages and the server's name).
    pub fn endpoint(&self) -> &Uri {
        &self.endpoint
    }

    /// The host, the default server name.
    pub fn host(&self) -> &str {
        self.origin.bare_host()
    }

    /// Send one request to the endpoint with the configured headers and `extra`, following
    /// same-origin redirects that keep the method. The response body is the caller's to read.
    pub async fn send(
        &self,
        method: Method,
        extra: &[(HeaderName, HeaderValue)],
        body: Bytes,
    ) -> Result<Response<Incoming>, UpstreamError> {
        self.send_to(self.endpoint.clone(), method, extra, body)
            .await
    }

    /// `location` (absolute, or a path) resolved against the endpoint, if it is on the
    /// endpoint's origin: the only place the configured headers and token may go.
    pub fn same_origin(&self, location: &str) -> Option<Uri> {
        let uri = resolve(&self.endpoint, location)?;
        (Origin::of(&uri).as_ref() == Some(&self.origin)).then_some(uri)
    }

    /// [`Upstream::send`] to `uri`, a URL [`Upstream::same_origin`] gave.
    pub async fn send_to(
        &self,
        mut uri: Uri,
        method: Method,
        extra: &[(HeaderName, HeaderValue)],
        body: Bytes,
    ) -> Result<Response<Incoming>, UpstreamError> {
        for _ in 0..=MAX_REDIRECTS {
            let mut request = Request::builder().method(method.clone()).uri(path_of(&uri));
            let headers = request.headers_mut().expect("a fresh builder has headers");
            headers.extend(self.headers.clone());
            let host = uri
                .authority()
                .map(|a| a.as_str())
                .unwrap_or(&self.origin.host);
            headers.insert(
                hyper::header::HOST,
                HeaderValue::from_str(host).map_err(|e| UpstreamError::Request(e.to_string()))?,
            );
            for (name, value) in extra {
                headers.insert(name.clone(), value.clone());
            }
            let request = request
                .body(Full::new(body.clone()))
                .map_err(|e| UpstreamError::Request(e.to_string()))?;
            let response = self.round_trip(request).await?;
            let status = response.status();
            if !status.is_redirection() || status == StatusCode::NOT_MODIFIED {
                return Ok(response);
            }
            let keeps_method = matches!(
                status,
                StatusCode::TEMPORARY_REDIRECT | StatusCode::PERMANENT_REDIRECT
            );
            if !keeps_method && method != Method::GET {
                return Err(UpstreamError::MethodChangingRedirect { method, status });
            }
            let location = response
                .headers()
                .get(hyper::header::LOCATION)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("");
            let next =
                resolve(&uri, location).ok_or_else(|| UpstreamError::CrossOriginRedirect {
                    to: location.chars().take(200).collect(),
                })?;
            if Origin::of(&next).as_ref() != Some(&self.origin) {
                return Err(UpstreamError::CrossOriginRedirect {
                    to: location.chars().take(200).collect(),
                });
            }
            uri = next;
        }
        Err(UpstreamError::TooManyRedirects)
    }

    async fn round_trip(
        &self,
        request: Request<Full<Bytes>>,
    ) -> Result<Response<Incoming>, UpstreamError> {
        let mut sender = match self.idle_sender() {
            Some(s) => s,
            None => self.connect().await?,
        };
        let response = sender.send_request(request);
        // Back in the pool at once: it is ready again once this exchange is over.
        self.give_back(sender);
        response
            .await
            .map_err(|e| UpstreamError::Request(e.to_string()))
    }

    fn idle_sender(&self) -> Option<SendRequest<Full<Bytes>>> {
        let mut pool = self.pool.lock().unwrap_or_else(|e| e.into_inner());
        pool.retain(|s| !s.is_closed());
        let ready = pool.iter().position(|s| s.is_ready())?;
        Some(pool.swap_remove(ready))
    }

    fn give_back(&self, sender: SendRequest<Full<Bytes>>) {
        let mut pool = self.pool.lock().unwrap_or_else(|e| e.into_inner());
        pool.retain(|s| !s.is_closed());
        if pool.len() < POOL_SIZE {
            pool.push(sender);
        }
    }

    async fn connect(&self) -> Result<SendRequest<Full<Bytes>>, UpstreamError> {
        let authority = format!("{}:{}", self.origin.host, self.origin.port);
        let failed = |why: String| UpstreamError::Connect {
            authority: authority.clone(),
            why,
        };
        let tcp = tokio::time::timeout(
            CONNECT_TIMEOUT,
            tokio::net::TcpStream::connect((self.origin.bare_host(), self.origin.port)),
        )
        .await
        .map_err(|_| failed("timed out".into()))?
        .map_err(|e| failed(e.to_string()))?;
        let _ = tcp.set_nodelay(true);
        let io: Io = self.secure(tcp).await.map_err(failed)?;
        let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(io))
            .await
            .map_err(|e| failed(e.to_string()))?;
        tokio::spawn(async move {
            // Ends when the connection closes; its errors reach the request that used it.
            let _ = connection.await;
        });
        Ok(sender)
    }

    #[cfg(feature = "tls")]
    async fn secure(&self, tcp: tokio::net::TcpStream) -> Result<Io, String> {
        let Some(tls) = &self.tls else {
            return Ok(Box::new(tcp));
        };
        let name = rustls_pki_types::ServerName::try_from(self.origin.bare_host().to_string())
            .map_err(|e| e.to_string())?;
        let stream = tokio::time::timeout(CONNECT_TIMEOUT, tls.connect(name, tcp))
            .await
            .map_err(|_| "the TLS handshake timed out".to_string())?
            .map_err(|e| format!("TLS: {e}"))?;
        Ok(Box::new(stream))
    }

    #[cfg(not(feature = "tls"))]
    async fn secure(&self, tcp: tokio::net::TcpStream) -> Result<Io, String> {
        Ok(Box::new(tcp))
    }
}

/// Headers the transport sets itself: a header file naming one is a mistake.
fn is_reserved(name: &HeaderName) -> bool {
    use hyper::header;
    [
        header::HOST,
        header::CONTENT_TYPE,
        header::CONTENT_LENGTH,
        header::ACCEPT,
        header::TRANSFER_ENCODING,
        header::CONNECTION,
    ]
    .contains(name)
        || ["mcp-session-id", "mcp-protocol-version", "last-event-id"].contains(&name.as_str())
}

/// `Name: value` lines; blank lines and `#` comments skipped.
fn read_header_file(path: &std::path::Path, headers: &mut HeaderMap) -> Result<(), UpstreamError> {
    let bad = |why: String| UpstreamError::HeaderFile {
        path: path.to_path_buf(),
        why,
    };
    let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
    parse_header_lines(&text, headers).map_err(bad)
}

/// `Name: value` lines (a header file's text, or a variable's); blank lines and `#`
/// comments skipped. The error names the line, never the value.
fn parse_header_lines(text: &str, headers: &mut HeaderMap) -> Result<(), String> {
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (name, value) = line
            .split_once(':')
            .ok_or_else(|| format!("line {}: expected `Name: value`", n + 1))?;
        let name = HeaderName::from_bytes(name.trim().as_bytes())
            .map_err(|_| format!("line {}: not a header name", n + 1))?;
        // The value is never shown: it may be a credential.
        let value = HeaderValue::from_str(value.trim())
            .map_err(|_| format!("line {}: the value holds control characters", n + 1))?;
        headers.append(name, value);
    }
    Ok(())
}

fn path_of(uri: &Uri) -> Uri {
    let path = uri.path_and_query().map_or("/", |p| p.as_str());
    path.parse().unwrap_or_else(|_| Uri::from_static("/"))
}

/// A `Location` resolved against the URL it answered: absolute, or an absolute path.
fn resolve(base: &Uri, location: &str) -> Option<Uri> {
    if location.starts_with("//") {
        return format!("{}:{location}", base.scheme_str()?).parse().ok();
    }
    if location.starts_with('/') {
        let mut parts = base.clone().into_parts();
        parts.path_and_query = Some(location.parse().ok()?);
        return Uri::from_parts(parts).ok();
    }
    let uri: Uri = location.parse().ok()?;
    uri.scheme()?;
    Some(uri)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn origin(s: &str) -> Option<Origin> {
        Origin::of(&s.parse().unwrap())
    }

    #[test]
    fn origins_compare_scheme_host_and_port() {
        assert_eq!(
            origin("https://Example.com/mcp"),
            origin("https://example.com:443/x")
        );
        assert_ne!(
            origin("https://example.com/"),
            origin("http://example.com/")
        );
        assert_ne!(
            origin("http://127.0.0.1:80/"),
            origin("http://127.0.0.1:8080/")
        );
        assert_eq!(origin("ftp://x/"), None);
    }

    #[test]
    fn locations_resolve_against_the_url_they_answered() {
        let base: Uri = "http://127.0.0.1:9/mcp".parse().unwrap();
        assert_eq!(
            resolve(&base, "/v2/mcp").unwrap().to_string(),
            "http://127.0.0.1:9/v2/mcp"
        );
        assert_eq!(
            resolve(&base, "//evil.example/mcp").unwrap().to_string(),
            "http://evil.example/mcp"
        );
        assert_eq!(resolve(&base, "relative"), None);
    }

    #[test]
    fn credentials_never_come_from_the_url() {
        let settings = Settings {
            url: "http://user:pw@127.0.0.1/mcp".into(),
            ..Settings::default()
        };
        assert!(matches!(
            Upstream::new(&settings),
            Err(UpstreamError::Url { .. })
        ));
    }

    #[test]
    fn a_header_file_may_not_set_the_transport_headers() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("headers");
        std::fs::write(&path, "# comment\nX-Api-Key: k\nMcp-Session-Id: forged\n").unwrap();
        let settings = Settings {
            url: "http://127.0.0.1/mcp".into(),
            header_file: Some(path.clone()),
            ..Settings::default()
        };
        let err = Upstream::new(&settings).unwrap_err().to_string();
        assert!(err.contains("mcp-session-id is set by mcpwall"), "{err}");
        std::fs::write(&path, "X-Api-Key: k\n").unwrap();
        let up = Upstream::new(&settings).unwrap();
        assert_eq!(up.headers.get("x-api-key").unwrap(), "k");
    }
}
