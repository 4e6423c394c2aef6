//! The Streamable HTTP endpoint (MCP specification 2025-11-25, "Transports"): one path,
//! `/mcp`, taking POST (a message from the client), GET (the server's stream, or the
//! resumption of any stream with `Last-Event-ID`) and DELETE (end the session).
//!
//! Before a request reaches a session it passes, in order: the path; `Host` and
//! `Origin` (DNS rebinding: a foreign origin gets 403); the bearer token, when the
//! gateway requires one (401, audited, nothing forwarded); `MCP-Protocol-Version` (400
//! for a version this gateway does not speak); then the session id: required after
//! `initialize` (400 without it), 404 for a session that does not exist or belongs to
//! another identity. 404 and not 403 for the latter: the specification's answer for a
//! session id the server does not know, and it tells a caller holding a stolen id
//! nothing about whether the session exists; the attempt is audited.
//!
//! Several named servers may share a listener (`servers:` in the policy): each is a
//! [`Gateway`] mounted at `/mcp/NAME` (legacy `/sse/NAME`, `/message/NAME`), with its own
//! server name and judges, and one session registry for all of them, so a session id used
//! on another server's endpoint is a 404 like any unknown id, and audited.
//!
//! What a message becomes is decided by the session ([`super::conversation`]); this file
//! only moves HTTP.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};

use super::connections::{Backoff, Busy, Connections, Slot};
use super::conversation::Backend;
use super::conversation::{Conversation, Ended, Opening};
use super::identities::LiveJudges;
use super::metrics::{Metrics, Transport};
use super::refusals::{REASON_CHARS, Refusals, bounded, bounded_to};
use super::registry::{Full, Lookup, Registry};
use super::sse::{OnDrop, Reply, parse_event_id};
use super::tokens::{Change, Gate, LiveTokens, new_session_id};
use crate::audit::{AuditEvent, AuditSender, Direction, RuleRef, Verdict};
use crate::io::codec::HEAD_BYTES;
use crate::io::{Chatter, LogLevel};
use crate::session::ids::route_key;
use crate::session::{self, Line};

/// The one endpoint path.
pub const ENDPOINT: &str = "/mcp";
/// The legacy HTTP+SSE transport (protocol 2024-11-05): `GET /sse` opens a session and
/// its stream, whose first event names `POST /message?session_id=…` for the client's
/// messages.
pub const LEGACY_SSE: &str = "/sse";
pub const LEGACY_MESSAGE: &str = "/message";
/// The session-based protocol revisions whose Streamable HTTP (or HTTP+SSE negotiation)
/// this gateway speaks; the stateless ones are `modern::MODERN_VERSIONS`.
pub const PROTOCOL_VERSIONS: &[&str] = &["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];

/// How often the listener looks at the token file between requests, so a revoked
/// identity's WebSocket and SSE streams end though it sends nothing.
pub const TOKEN_WATCH: std::time::Duration = std::time::Duration::from_millis(250);
/// How often the refusals not logged one by one are summarised in the audit log.
pub const REFUSAL_SUMMARY: std::time::Duration = std::time::Duration::from_secs(60);

/// The client's address, in each request's extensions.
#[derive(Debug, Clone, Copy)]
struct Peer(std::net::IpAddr);

const SESSION_HEADER: &str = "mcp-session-id";
const VERSION_HEADER: &str = "mcp-protocol-version";

/// An HTTP answer that ends a request's handling (boxed: a response is large).
type Refusal = Box<Response<Reply>>;

/// Everything the request handlers share.
pub struct Gateway {
    /// Each identity's program and tool guard, as the last reload left them.
    pub judges: Arc<LiveJudges>,
    /// The listener's counters for `/metrics`.
    pub metrics: Arc<Metrics>,
    /// Asks the reload thread to look at the policy and token files now.
    pub reloads: super::trigger::Trigger,
    /// Where each session's messages go: a server process per session, or a remote server.
    pub backend: Backend,
    pub server_name: Arc<str>,
    /// The path segment after `/mcp/`, `/sse/`, `/message/`; `None`: the server is at
    /// `/mcp` itself (the single-server form).
    pub mount: Option<Arc<str>>,
    pub audit: AuditSender,
    pub chatter: Chatter,
    /// The token file, checked on every request and every [`TOKEN_WATCH`].
    pub tokens: Arc<LiveTokens>,
    /// HTTP refusals counted for the audit log's summaries; shared by the listener.
    pub refusals: Arc<Refusals>,
    /// The listening address.
    pub listen: SocketAddr,
    /// Origins allowed besides loopback ones (`--allow-origin`), e.g. `https://app.example`.
    pub allowed_origins: Vec<String>,
    /// Shared by every gateway of the listener.
    pub sessions: Arc<Registry>,
    /// The user's home: calls an `ask` rule holds wait in its `.mcpwall/pending/` for
    /// `mcpwall approve` when the client has no elicitation UI.
    pub home: Option<std::path::PathBuf>,
    /// Each identity's conversation for its stateless (2026-07-28) requests.
    pub stateless: super::stateless::Backends,
    /// The identity provider whose access tokens stand for identities (`settings.oauth`).
    pub oauth: Option<Arc<super::oauth::OAuth>>,
}

/// Which of a gateway's paths a request is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    Mcp,
    LegacySse,
    LegacyMessage,
    WebSocket,
}

/// The gateway a path is for, among those of one listener, and which of its paths.
pub fn route<'g>(gateways: &'g [Arc<Gateway>], path: &str) -> Option<(&'g Arc<Gateway>, Endpoint)> {
    let (base, name) = match path[1.min(path.len())..].split_once('/') {
        Some((base, name)) => (&path[..base.len() + 1], Some(name)),
        None => (path, None),
    };
    let endpoint = match base {
        ENDPOINT => Endpoint::Mcp,
        LEGACY_SSE => Endpoint::LegacySse,
        LEGACY_MESSAGE => Endpoint::LegacyMessage,
        super::websocket::PATH => Endpoint::WebSocket,
        _ => return None,
    };
    let gateway = gateways.iter().find(|g| g.mount.as_deref() == name)?;
    Some((gateway, endpoint))
}

/// The next revocation heard, or never when nothing is listened to.
async fn next_heard(
    heard: &mut Option<tokio::sync::mpsc::UnboundedReceiver<crate::shared_state::Heard>>,
) -> Option<crate::shared_state::Heard> {
    match heard {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

/// Serve `listener` until `shutdown` completes; then end every session. `gateways`
/// share one session registry. With `tls`, every connection is HTTPS. `limits` bound
/// the connections (`connections.rs`).
pub async fn serve(
    listener: tokio::net::TcpListener,
    gateways: Vec<Arc<Gateway>>,
    tls: Option<super::tls::Tls>,
    limits: crate::config::policy::GatewaySettings,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let gateways: Arc<[Arc<Gateway>]> = gateways.into();
    let Some(gateway) = gateways.first().cloned() else {
        return;
    };
    let connections = Connections::new(limits.max_connections, limits.connections_per_peer);
    let header_timeout = Duration::from_secs(u64::from(limits.header_timeout_seconds));
    let mut backoff = Backoff::default();
    tokio::pin!(shutdown);
    let reap_every = gateway.sessions.idle_limit().min(Duration::from_secs(60));
    let mut reaper = tokio::time::interval(reap_every);
    let mut summary = tokio::time::interval(REFUSAL_SUMMARY);
    summary.tick().await;
    let mut watch = tokio::time::interval(TOKEN_WATCH);
    watch.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // The revocations other replicas make, as they make them (`settings.shared_state`).
    let mut heard = gateway.tokens.listen();
    loop {
        tokio::select! {
            _ = watch.tick() => {
                gateway.watch_tokens();
                if !gateway.tokens.hears_revocations() {
                    gateway.check_revoked_elsewhere();
                }
            }
            Some(news) = next_heard(&mut heard) => gateway.heard(news),
            _ = summary.tick() => gateway.summarise_refusals(),
            _ = reaper.tick() => {
                // A client that vanished without DELETE does not hold a process for long.
                let ended = gateway.sessions.end_idle(gateway.sessions.idle_limit());
                if ended > 0 {
                    gateway.chatter.log(LogLevel::Info, format_args!("ended {ended} idle session(s)"));
                }
            }
            accepted = listener.accept() => {
                let (stream, peer) = match accepted {
                    Ok(accepted) => accepted,
                    Err(e) => {
                        // Out of descriptors (EMFILE) or another transient failure: free
                        // an idle connection and wait, rather than spin on the error.
                        let wait = backoff.failed();
                        if backoff.is_first() {
                            gateway.chatter.log(
                                LogLevel::Warn,
                                format_args!("accepting a connection failed: {e}; backing off"),
                            );
                        }
                        connections.shed_one();
                        tokio::time::sleep(wait).await;
                        continue;
                    }
                };
                backoff.succeeded();
                let Some(ticket) = connections.admit(peer.ip()) else {
                    // Every connection of that scope is busy: this one is closed unread.
                    continue;
                };
                let peer = Peer(peer.ip());
                let _ = stream.set_nodelay(true);
                let gateways = gateways.clone();
                let tls = tls.clone();
                tokio::spawn(async move {
                    let slot = ticket.slot.clone();
                    let serving = async {
                        match tls {
                            None => serve_connection(stream, gateways, None, &slot, header_timeout, peer).await,
                            #[cfg(feature = "tls")]
                            Some(tls) => {
                                // A failed handshake (no TLS, a certificate the CA did not
                                // issue) ends the connection: nothing was read from it. The
                                // handshake has the header time to finish.
                                if let Ok(Ok((stream, cert))) =
                                    tokio::time::timeout(header_timeout, tls.accept(stream)).await
                                {
                                    serve_connection(stream, gateways, cert, &slot, header_timeout, peer).await;
                                }
                            }
                            #[cfg(not(feature = "tls"))]
                            Some(_) => {}
                        }
                    };
                    tokio::select! {
                        () = serving => {}
                        () = slot.closed() => {}
                    }
                    drop(ticket);
                });
            }
            () = &mut shutdown => break,
        }
    }
    gateway.summarise_refusals();
    let ending = gateway.sessions.end_all();
    for c in ending {
        for _ in 0..60 {
            if c.is_ended() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// HTTP/1.1 on one connection; each request carries the connection's verified client
/// certificate, if any, in its extensions, and keeps `slot` busy until its answer is
/// written. Headers must come within `header_timeout` of the connection's start or of the
/// previous answer's end (hyper restarts the timer for each request head it waits for).
async fn serve_connection<S>(
    io: S,
    gateways: Arc<[Arc<Gateway>]>,
    cert: Option<super::tls::ClientCertificate>,
    slot: &Arc<Slot>,
    header_timeout: Duration,
    peer: Peer,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let cert = cert.map(Arc::new);
    let slot = slot.clone();
    let service = hyper::service::service_fn(move |mut req: Request<Incoming>| {
        let gateways = gateways.clone();
        let busy = slot.begin();
        let started = std::time::Instant::now();
        if let Some(cert) = &cert {
            req.extensions_mut().insert(cert.clone());
        }
        req.extensions_mut().insert(peer);
        async move {
            let routed = route(&gateways, req.uri().path());
            let transport = match routed {
                None => Transport::Unrouted,
                Some((_, Endpoint::WebSocket)) => Transport::WebSocket,
                Some((_, Endpoint::LegacySse | Endpoint::LegacyMessage)) => Transport::LegacySse,
                Some((_, Endpoint::Mcp)) if super::modern::is_modern(req.headers()) => {
                    Transport::Stateless
                }
                Some((_, Endpoint::Mcp)) => Transport::StreamableHttp,
            };
            let metrics = gateways[0].metrics.clone();
            let response = match routed {
                // Host and token first: a caller who may not use the gateway learns
                // nothing about it, not even which paths exist.
                None => {
                    let gateway = &gateways[0];
                    if let Some(refusal) = gateway.check_origin(&req) {
                        refusal
                    } else if let Some(metadata) = gateway.resource_metadata(&req) {
                        metadata
                    } else if let Err(refusal) = gateway.authenticate(&req).await {
                        *refusal
                    } else {
                        plain(StatusCode::NOT_FOUND, "not found\n")
                    }
                }
                Some((gateway, endpoint)) => gateway.handle(req, endpoint).await,
            };
            metrics.count_request(transport, response.status(), started.elapsed());
            Ok::<_, Infallible>(response.map(|body| Tracked { body, _busy: busy }))
        }
    });
    let _ = hyper::server::conn::http1::Builder::new()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(header_timeout)
        .serve_connection(hyper_util::rt::TokioIo::new(io), service)
        .with_upgrades()
        .await;
}

/// A response body that keeps its connection counted busy until it is written or dropped.
struct Tracked {
    body: Reply,
    _busy: Busy,
}

impl hyper::body::Body for Tracked {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, Infallible>>> {
        std::pin::Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}

impl Gateway {
    /// The largest message judged (`max_frame_bytes` of the policy in force).
    fn max_frame_bytes(&self) -> usize {
        self.judges
            .current()
            .any_program()
            .settings()
            .max_frame_bytes
    }

    /// The path of `base` (`/mcp`, `/sse`, `/message`, `/ws`) for this gateway.
    pub fn path(&self, base: &str) -> String {
        match &self.mount {
            Some(name) => format!("{base}/{name}"),
            None => base.to_string(),
        }
    }

    async fn handle(&self, req: Request<Incoming>, endpoint: Endpoint) -> Response<Reply> {
        if let Some(refusal) = self.check_origin(&req) {
            return refusal;
        }
        let identity = match self.authenticate(&req).await {
            Ok(identity) => identity,
            Err(refusal) => return *refusal,
        };
        match (endpoint, req.method()) {
            (Endpoint::WebSocket, _) => return self.websocket(req, identity),
            (Endpoint::LegacySse, &Method::GET) => return self.legacy_open(identity),
            (Endpoint::LegacyMessage, &Method::POST) => {
                return self.legacy_post(req, identity).await;
            }
            (Endpoint::LegacySse | Endpoint::LegacyMessage, _) => {
                return plain(StatusCode::METHOD_NOT_ALLOWED, "GET /sse, POST /message\n");
            }
            _ => {}
        }
        if super::modern::is_modern(req.headers()) {
            return self.modern(req, identity).await;
        }
        if let Some(version) = req.headers().get(VERSION_HEADER)
            && !PROTOCOL_VERSIONS
                .iter()
                .any(|v| version.as_bytes() == v.as_bytes())
        {
            return rpc_error(
                StatusCode::BAD_REQUEST,
                -32600,
                &format!(
                    "unsupported MCP-Protocol-Version; this gateway speaks {}",
                    PROTOCOL_VERSIONS.join(", ")
                ),
            );
        }
        match *req.method() {
            Method::POST => self.post(req, identity).await,
            Method::GET => self.get(&req, identity),
            Method::DELETE => self.delete(&req, identity),
            _ => {
                let mut r = plain(StatusCode::METHOD_NOT_ALLOWED, "use POST, GET or DELETE\n");
                r.headers_mut()
                    .insert(header::ALLOW, HeaderValue::from_static("GET, POST, DELETE"));
                r
            }
        }
    }

    /// `Host` must name this listener when it is on loopback (a DNS-rebound name does
    /// not), and an `Origin`, when sent, must be a loopback one or an allowed one.
    fn check_origin(&self, req: &Request<Incoming>) -> Option<Response<Reply>> {
        let loopback = self.listen.ip().is_loopback();
        if loopback {
            let host = req
                .headers()
                .get(header::HOST)
                .and_then(|h| h.to_str().ok())
                .unwrap_or("");
            if !is_loopback_host(host) {
                return Some(rpc_error(
                    StatusCode::FORBIDDEN,
                    -32600,
                    "forbidden: the Host header does not name this loopback gateway",
                ));
            }
        }
        let origin = req.headers().get(header::ORIGIN)?;
        let origin = origin.to_str().unwrap_or("");
        let allowed = self.allowed_origins.iter().any(|o| o == origin)
            || (loopback && origin_is_loopback(origin));
        (!allowed).then(|| {
            rpc_error(
                StatusCode::FORBIDDEN,
                -32600,
                "forbidden: requests from this Origin are not accepted",
            )
        })
    }

    /// The protected-resource metadata (RFC 9728), if the request asks for it: served
    /// to anyone (a client reads it to learn where to get a token).
    fn resource_metadata(&self, req: &Request<Incoming>) -> Option<Response<Reply>> {
        let body = self.oauth.as_ref()?.metadata_at(req.uri().path())?;
        if req.method() != Method::GET {
            let mut r = plain(StatusCode::METHOD_NOT_ALLOWED, "GET only\n");
            r.headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static("GET"));
            return Some(r);
        }
        Some(
            Response::builder()
                .status(StatusCode::OK)
                .header(header::CONTENT_TYPE, "application/json")
                .body(Reply::text(body))
                .unwrap_or_else(|_| Response::new(Reply::empty())),
        )
    }

    /// The identity of the bearer token (the token file's, or the identity provider's
    /// access token) or of the connection's client certificate, `None` when neither is
    /// required. Both may be presented only for the same identity.
    async fn authenticate(&self, req: &Request<Incoming>) -> Result<Option<Arc<str>>, Refusal> {
        let peer = req.extensions().get::<Peer>().map(|p| p.0);
        // One `stat` of the token file: a change since the last request (or watch tick)
        // is read and its revocations applied before this request is let in.
        self.watch_tokens();
        match self.tokens.gate() {
            Gate::Open => return Ok(None),
            Gate::Required => {}
            Gate::Unusable(why) => {
                let why = format!("the token file is unusable: {why}");
                self.audit_refusal("mcpwall:token_file", &why, None, req.method(), peer);
                return Err(Box::new(rpc_error(
                    StatusCode::SERVICE_UNAVAILABLE,
                    -32000,
                    "service unavailable: the gateway cannot check credentials until its operator fixes it",
                )));
            }
        }
        let cert = req.extensions().get::<Arc<super::tls::ClientCertificate>>();
        let presented = bearer_token(req);
        let by_cert = cert.map(|c| self.tokens.identify_certificate(&c.names));
        let mut rejection = None;
        let by_token = match presented {
            None => None,
            Some(token) => match self.tokens.identify(token).await {
                Ok(Some(name)) => Some(Some(name)),
                Err(why) => {
                    // Whether another replica revoked the token cannot be known now: not
                    // a bad credential (401 would tell the client to drop it), a service
                    // that cannot check it (fail closed).
                    let audited = format!("the bearer token's revocation cannot be checked: {why}");
                    self.audit_refusal(
                        crate::session::RULE_SHARED_STATE,
                        &audited,
                        None,
                        req.method(),
                        peer,
                    );
                    let mut r = rpc_error(
                        StatusCode::SERVICE_UNAVAILABLE,
                        -32000,
                        "service unavailable: the gateway cannot check whether the token was \
                         revoked (fail closed); retry later",
                    );
                    r.headers_mut()
                        .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
                    return Err(Box::new(r));
                }
                Ok(None) => match &self.oauth {
                    Some(oauth) if super::oauth::OAuth::looks_like_jwt(token) => {
                        match self.federated(oauth, token).await {
                            Ok(name) => Some(Some(name)),
                            Err(Err(refusal)) => return Err(refusal),
                            Err(Ok(r)) => {
                                rejection = Some(r);
                                Some(None)
                            }
                        }
                    }
                    _ => Some(None),
                },
            },
        };
        let unknown = rejection.as_ref().map(super::oauth::Rejection::reason);
        let why = match (by_token, by_cert) {
            (Some(Some(name)), None | Some(Err(_))) => return Ok(Some(name)),
            (Some(Some(name)), Some(Ok(by_cert))) if name == by_cert => return Ok(Some(name)),
            (Some(Some(_)), Some(Ok(_))) => {
                "the bearer token and the client certificate stand for different identities"
            }
            (Some(None), _) => unknown.as_deref().unwrap_or("unknown bearer token"),
            (None, Some(Ok(name))) => return Ok(Some(name)),
            (None, Some(Err(why))) => why,
            (None, None) => "no bearer token",
        };
        self.audit_refusal("mcpwall:unauthenticated", why, None, req.method(), peer);
        let scope = matches!(rejection, Some(super::oauth::Rejection::Scope(_)));
        let mut r = if scope {
            rpc_error(
                StatusCode::FORBIDDEN,
                -32600,
                "forbidden: the access token lacks a scope this gateway requires",
            )
        } else {
            rpc_error(
                StatusCode::UNAUTHORIZED,
                -32600,
                "unauthorized: a valid bearer token or client certificate is required",
            )
        };
        let challenge = match &self.oauth {
            Some(oauth) => oauth.challenge(rejection.as_ref()),
            None => HeaderValue::from_static("Bearer"),
        };
        r.headers_mut().insert(header::WWW_AUTHENTICATE, challenge);
        Err(Box::new(r))
    }

    /// The identity an access token of the identity provider stands for, with its judge
    /// built (off the I/O thread, the first time an identity with its groups comes).
    /// `Err(Ok)`: the token is refused; `Err(Err)`: the gateway cannot serve it now.
    async fn federated(
        &self,
        oauth: &super::oauth::OAuth,
        token: &str,
    ) -> Result<Arc<str>, Result<super::oauth::Rejection, Refusal>> {
        let principal = oauth
            .verify(token, |name| self.tokens.has_name(name))
            .await
            .map_err(Ok)?;
        let judges = self.judges.current();
        let Some(federation) = judges.federation.clone() else {
            return Ok(principal.name);
        };
        if federation
            .get(&principal.name, Some(&principal.groups))
            .is_some()
        {
            return Ok(principal.name);
        }
        let unavailable = |why: String| {
            self.chatter.log(
                LogLevel::Error,
                format_args!("no policy for {}: {why}", principal.name),
            );
            let mut r = rpc_error(
                StatusCode::SERVICE_UNAVAILABLE,
                -32000,
                "this identity's policy cannot be loaded now; retry later",
            );
            r.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            Err(Err(Box::new(r)))
        };
        let building = {
            let (federation, name, groups) = (
                federation.clone(),
                principal.name.clone(),
                principal.groups.clone(),
            );
            tokio::task::spawn_blocking(move || federation.build(&name, &groups, None))
        };
        let judge = match building.await {
            Ok(Ok(judge)) => judge,
            Ok(Err(e)) => return unavailable(e.to_string()),
            Err(e) => return unavailable(e.to_string()),
        };
        match federation.insert(principal.name.clone(), &principal.groups, judge.clone()) {
            Ok(kept) => {
                if Arc::ptr_eq(&kept, &judge) {
                    self.metrics.register_judge(&judge);
                }
                Ok(principal.name)
            }
            Err(e) => unavailable(e.to_string()),
        }
    }

    /// Look at the token file and act on what changed: the sessions of a revoked
    /// identity end at once (on every server and transport: their streams close, their
    /// next message is refused), and so do those of clients without a token once the
    /// first token is issued or the file becomes unusable, and those of an identity
    /// provider's identity once its latest access token expired.
    pub fn watch_tokens(&self) {
        let Change {
            revoked,
            closed,
            unusable,
        } = self.tokens.refresh();
        if let Some(why) = unusable {
            self.chatter.log(
                LogLevel::Error,
                format_args!("{why}; every request is refused until it is fixed"),
            );
            self.audit_gateway_event(
                "mcpwall:token_file",
                format!(
                    "the token file is unusable, every request is refused until it is fixed: {why}"
                ),
                None,
            );
        }
        for name in revoked {
            let ended = self.sessions.end_identity(Some(&name));
            let text = format!("the token of {name} is gone: {ended} open session(s) ended");
            self.chatter.log(LogLevel::Info, format_args!("{text}"));
            self.audit_gateway_event("mcpwall:token_revoked", text, Some(name));
        }
        if let Some(oauth) = &self.oauth {
            for name in oauth.expired() {
                let ended = self.sessions.end_identity(Some(&name));
                if ended == 0 {
                    continue;
                }
                let text = format!(
                    "the access token of {name} expired without a newer one: {ended} open session(s) ended"
                );
                self.chatter.log(LogLevel::Info, format_args!("{text}"));
                self.audit_gateway_event("mcpwall:token_expired", text, Some(name));
            }
        }
        if closed {
            let ended = self.sessions.end_identity(None);
            let text = format!(
                "a token is now required (the token file appeared or changed): {ended} session(s) without a token ended"
            );
            self.chatter.log(LogLevel::Info, format_args!("{text}"));
            self.audit_gateway_event("mcpwall:token_required", text, None);
        }
    }

    /// Act on what was heard of another replica's revocations: the sessions of the
    /// identity whose token it revoked end at once (their streams close); on listening
    /// (again), every open identity is checked, as revocations made meanwhile were missed.
    fn heard(self: &Arc<Self>, news: crate::shared_state::Heard) {
        match news {
            crate::shared_state::Heard::Revoked(hash) => {
                if let Some(name) = self.tokens.name_of(&hash) {
                    self.end_revoked(name);
                }
            }
            crate::shared_state::Heard::Listening => self.check_revoked_elsewhere(),
        }
    }

    /// End the sessions of every open identity another replica revoked, asked of the
    /// shared state (one round trip per identity) on the blocking pool, so a slow store
    /// never holds up the listener's thread; one check at a time. An identity whose
    /// revocation cannot be checked now keeps its sessions: each of its requests is
    /// refused meanwhile (503), and it is checked again at the next tick.
    pub fn check_revoked_elsewhere(self: &Arc<Self>) {
        if !self.tokens.begin_check() {
            return;
        }
        let open: Vec<Arc<str>> = self
            .sessions
            .open_counts()
            .into_keys()
            .filter_map(|(_, identity)| identity)
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        let gateway = self.clone();
        tokio::spawn(async move {
            let tokens = gateway.tokens.clone();
            let revoked = tokio::task::spawn_blocking(move || {
                open.into_iter()
                    .filter(|name| matches!(tokens.still_valid(name), Ok(false)))
                    .collect::<Vec<_>>()
            })
            .await
            .unwrap_or_default();
            for name in revoked {
                gateway.end_revoked(name);
            }
            gateway.tokens.end_check();
        });
    }

    /// The sessions of `name`, whose token another replica revoked, end.
    fn end_revoked(&self, name: Arc<str>) {
        let ended = self.sessions.end_identity(Some(&name));
        if ended == 0 {
            return;
        }
        let text = format!(
            "the token of {name} was revoked on another replica: {ended} open session(s) ended"
        );
        self.chatter.log(LogLevel::Info, format_args!("{text}"));
        self.audit_gateway_event("mcpwall:token_revoked", text, Some(name));
    }

    /// An event of the gateway itself (no client message) in the audit log.
    fn audit_gateway_event(&self, rule: &'static str, text: String, identity: Option<Arc<str>>) {
        let mut e = AuditEvent::new(Direction::Inbound, Verdict::Deny);
        e.rule = Some(RuleRef::Builtin(rule));
        e.message = Some(text.into());
        e.identity = identity;
        e.transport = Some("http");
        e.server = self.mount.as_ref().map(|_| self.server_name.clone());
        self.audit.send(&mut vec![e]);
    }

    /// An HTTP-level refusal in the audit log (nothing of it reached a session): the first
    /// of its (peer, reason) in a [`REFUSAL_SUMMARY`] period in full, the others counted
    /// for the period's summary line.
    fn audit_refusal(
        &self,
        rule: &'static str,
        why: &str,
        identity: Option<Arc<str>>,
        method: &Method,
        peer: Option<std::net::IpAddr>,
    ) {
        let why = bounded_to(why, REASON_CHARS);
        let key = match &identity {
            Some(name) => format!("{rule} {name}: {why}"),
            None => format!("{rule}: {why}"),
        };
        if !self.refusals.note(peer, &key) {
            return;
        }
        let method = bounded(method.as_str());
        let peer = peer.map_or_else(|| "?".to_string(), |p| p.to_string());
        let text = format!(
            "HTTP {method} from {peer} refused: {why} (further refusals like it are counted in a summary every {} s)",
            REFUSAL_SUMMARY.as_secs()
        );
        self.chatter.log(LogLevel::Info, format_args!("{text}"));
        self.audit_gateway_event(rule, text, identity);
    }

    /// The summary line of the refusals not logged one by one, if there were any.
    fn summarise_refusals(&self) {
        if let Some(text) = self.refusals.summary() {
            self.chatter.log(LogLevel::Info, format_args!("{text}"));
            self.audit_gateway_event("mcpwall:refusals", text, None);
        }
    }

    /// The session a request names, if its identity may use it.
    fn session(
        &self,
        req_headers: &hyper::HeaderMap,
        identity: &Option<Arc<str>>,
        method: &Method,
    ) -> Result<Arc<Conversation>, Refusal> {
        let id = req_headers
            .get(SESSION_HEADER)
            .and_then(|h| h.to_str().ok());
        self.session_by_id(id, identity, method)
    }

    fn session_by_id(
        &self,
        id: Option<&str>,
        identity: &Option<Arc<str>>,
        method: &Method,
    ) -> Result<Arc<Conversation>, Refusal> {
        let Some(id) = id else {
            return Err(Box::new(rpc_error(
                StatusCode::BAD_REQUEST,
                -32600,
                "bad request: Mcp-Session-Id is required (send initialize first)",
            )));
        };
        match self
            .sessions
            .get(id, &self.server_name, identity.as_deref())
        {
            Ok(c) => Ok(c),
            Err(Lookup::Unknown) => Err(Box::new(rpc_error(
                StatusCode::NOT_FOUND,
                -32001,
                "session not found",
            ))),
            Err(Lookup::OtherServer { server }) => {
                let why = format!(
                    "a session of server {server} used on the endpoint of {}",
                    self.server_name
                );
                self.audit_refusal(
                    "mcpwall:session_server",
                    &why,
                    identity.clone(),
                    method,
                    None,
                );
                Err(Box::new(rpc_error(
                    StatusCode::NOT_FOUND,
                    -32001,
                    "session not found",
                )))
            }
            Err(Lookup::NotYours { owner }) => {
                let why = format!(
                    "a session of {} used by {}",
                    owner.as_deref().unwrap_or("(no identity)"),
                    identity.as_deref().unwrap_or("(no identity)")
                );
                self.audit_refusal(
                    "mcpwall:session_identity",
                    &why,
                    identity.clone(),
                    method,
                    None,
                );
                Err(Box::new(rpc_error(
                    StatusCode::NOT_FOUND,
                    -32001,
                    "session not found",
                )))
            }
        }
    }

    /// A request of the stateless 2026-07-28 revision (see `modern.rs`): its headers are
    /// checked against its body, then it is served through the identity's conversation
    /// (`stateless.rs`).
    async fn modern(&self, req: Request<Incoming>, identity: Option<Arc<str>>) -> Response<Reply> {
        if req.method() != Method::POST {
            let mut r = plain(
                StatusCode::METHOD_NOT_ALLOWED,
                "the 2026-07-28 revision uses POST only\n",
            );
            r.headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static("POST"));
            return r;
        }
        let reads_sse = accepts(req.headers(), "text/event-stream");
        if !is_json(req.headers()) {
            return rpc_error(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                -32600,
                "unsupported media type: the body must be application/json",
            );
        }
        let (parts, body) = req.into_parts();
        let max = self.max_frame_bytes();
        let body = match read_body(body, max).await {
            Ok(Body::Whole(b)) => b,
            Ok(Body::NotUtf8) => return not_utf8(),
            _ => {
                return rpc_error(
                    StatusCode::BAD_REQUEST,
                    -32600,
                    "the request body could not be read, or is over max_frame_bytes",
                );
            }
        };
        use super::modern::Triage;
        let request = match super::modern::triage(&parts.headers, &body) {
            Triage::Answer(answer) => return json_answer(answer),
            request => request,
        };
        let linked = self
            .stateless
            .linked(&self.server_name, &identity, || {
                self.open_session(identity.clone(), false, true, "http")
            })
            .await;
        let linked = match linked {
            Ok(linked) => linked,
            Err(super::stateless::Unlinked::Open(refusal)) => return *refusal,
            Err(super::stateless::Unlinked::Handshake(why)) => {
                self.chatter.log(
                    LogLevel::Error,
                    format_args!("no conversation for a 2026-07-28 client: {why}"),
                );
                return rpc_error(
                    StatusCode::BAD_GATEWAY,
                    -32603,
                    "the MCP server behind the gateway could not be started",
                );
            }
        };
        match request {
            Triage::Answer(answer) => json_answer(answer),
            Triage::Discover(id) => json_answer(super::modern::discover(
                id,
                PROTOCOL_VERSIONS,
                &linked.init,
                &self.server_name,
            )),
            Triage::Listen(request) => {
                super::stateless::listen(&self.stateless, &linked, &request, reads_sse).await
            }
            Triage::Serve(request) => self.stateless.serve(&linked, request, reads_sse).await,
        }
    }

    async fn post(&self, req: Request<Incoming>, identity: Option<Arc<str>>) -> Response<Reply> {
        let (parts, body) = req.into_parts();
        let accept = parts
            .headers
            .get(header::ACCEPT)
            .and_then(|h| h.to_str().ok())
            .unwrap_or("");
        let any = accept.contains("*/*");
        let reads_sse = any || accept.contains("text/event-stream");
        let reads_json = any || accept.contains("application/json");
        if !reads_sse && !reads_json {
            return rpc_error(
                StatusCode::NOT_ACCEPTABLE,
                -32600,
                "not acceptable: Accept must list application/json and text/event-stream",
            );
        }
        if !is_json(&parts.headers) {
            return rpc_error(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                -32600,
                "unsupported media type: the body must be application/json",
            );
        }
        let max = self.max_frame_bytes();
        let Ok(body) = read_body(body, max).await else {
            return plain(
                StatusCode::BAD_REQUEST,
                "the request body could not be read\n",
            );
        };
        let (text, too_large) = match &body {
            Body::Whole(b) => (&b[..], None),
            Body::TooLarge { len, head } => (&head[..], Some(*len)),
            Body::NotUtf8 => return not_utf8(),
        };
        let is_batch = text.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[');
        if is_batch
            && too_large.is_none()
            && parts.headers.contains_key(SESSION_HEADER)
            && let Ok(conversation) = self.session(&parts.headers, &identity, &parts.method)
        {
            // The session refuses it (audited, as every refusal); its answer comes back
            // here, since a POST reads one message.
            return match conversation.judge_unrouted(Line::Frame(text)).await {
                Ok(refusal) if !refusal.is_empty() => Response::builder()
                    .status(StatusCode::BAD_REQUEST)
                    .header(header::CONTENT_TYPE, "application/json")
                    .body(Reply::text(refusal))
                    .unwrap_or_else(|_| Response::new(Reply::empty())),
                // Notifications only: refused, and nothing to answer them with.
                Ok(_) => rpc_error(
                    StatusCode::BAD_REQUEST,
                    -32600,
                    "bad request: one JSON-RPC message per POST; the batch was not forwarded",
                ),
                Err(Ended) => rpc_error(StatusCode::NOT_FOUND, -32001, "session not found"),
            };
        }
        if is_batch {
            return rpc_error(
                StatusCode::BAD_REQUEST,
                -32600,
                "bad request: one JSON-RPC message per POST (batches are not part of this protocol version)",
            );
        }
        let head = crate::frame::read_head(text);
        let id = head.id.clone().and_then(|r| route_key(&text[r]));
        let is_request = head.method && id.is_some();
        let line = match too_large {
            Some(len) => Line::TooLarge { len, head: text },
            None => Line::Frame(text),
        };

        let mut new_session = None;
        let conversation = match parts.headers.get(SESSION_HEADER) {
            Some(_) => match self.session(&parts.headers, &identity, &parts.method) {
                Ok(c) => c,
                Err(refusal) => return *refusal,
            },
            None if too_large.is_none() && crate::mcp::is_initialize(text) => {
                match self.open_session(identity.clone(), false, false, "http") {
                    Ok(c) => {
                        new_session = Some(c.id.clone());
                        c
                    }
                    Err(refusal) => return *refusal,
                }
            }
            None => {
                return rpc_error(
                    StatusCode::BAD_REQUEST,
                    -32600,
                    "bad request: Mcp-Session-Id is required (send initialize first)",
                );
            }
        };

        let answer = match &id {
            Some(key) if is_request => {
                if conversation.is_in_flight(key) {
                    // Its answer could not be told from the first one's: the session
                    // refuses it (audited, as on every transport), and its refusal comes
                    // back on this POST.
                    return match conversation.judge_unrouted(line).await {
                        Ok(refusal) if !refusal.is_empty() => Response::builder()
                            .status(StatusCode::CONFLICT)
                            .header(header::CONTENT_TYPE, "application/json")
                            .body(Reply::text(refusal))
                            .unwrap_or_else(|_| Response::new(Reply::empty())),
                        Ok(_) => rpc_error(
                            StatusCode::CONFLICT,
                            -32600,
                            "a request with this id is already in flight in this session",
                        ),
                        Err(Ended) => rpc_error(StatusCode::NOT_FOUND, -32001, "session not found"),
                    };
                }
                Some((
                    key.clone(),
                    conversation.expect_answer(key.clone(), reads_sse),
                ))
            }
            _ => None,
        };
        if conversation.from_client(line).await.is_err() {
            return rpc_error(StatusCode::NOT_FOUND, -32001, "session not found");
        }
        let Some((key, mut answer)) = answer else {
            // A notification or a response: judged, and forwarded if allowed.
            return with_session(
                Response::builder()
                    .status(StatusCode::ACCEPTED)
                    .body(Reply::empty())
                    .unwrap_or_else(|_| Response::new(Reply::empty())),
                new_session.as_deref(),
            );
        };
        let Some(first) = answer.rx.recv().await else {
            conversation.forget_answer(&key);
            return rpc_error(StatusCode::NOT_FOUND, -32001, "session not found");
        };
        let response = if first.last && reads_json {
            conversation.delivered_whole(answer.stream);
            Response::builder()
                .status(StatusCode::OK)
                .header(header::CONTENT_TYPE, "application/json")
                .body(Reply::text(first.data))
        } else {
            Response::builder()
                .status(StatusCode::OK)
                .header(header::CONTENT_TYPE, "text/event-stream")
                .header(header::CACHE_CONTROL, "no-cache")
                .body(Reply::Sse {
                    stream: answer.stream,
                    queued: [first].into(),
                    live: Some(answer.rx),
                })
        };
        with_session(
            response.unwrap_or_else(|_| Response::new(Reply::empty())),
            new_session.as_deref(),
        )
    }

    fn open_session(
        &self,
        identity: Option<Arc<str>>,
        legacy: bool,
        stateless: bool,
        transport: &'static str,
    ) -> Result<Arc<Conversation>, Refusal> {
        if let Err(full) = self.sessions.admit(identity.as_deref()) {
            let (log, answer) = match full {
                Full::Share { share } => (
                    format!(
                        "{} holds its share of sessions ({share}), none idle; a new one refused",
                        identity.as_deref().unwrap_or("(no identity)")
                    ),
                    "too many sessions open for this identity; end one (DELETE) and retry",
                ),
                Full::Listener { max } => (
                    format!("the gateway holds {max} sessions, none idle; a new one refused"),
                    "too many sessions open on this gateway; end one (DELETE) and retry",
                ),
            };
            self.chatter.log(LogLevel::Info, format_args!("{log}"));
            return Err(Box::new(rpc_error(
                StatusCode::SERVICE_UNAVAILABLE,
                -32000,
                answer,
            )));
        }
        let id = new_session_id().map_err(|e| {
            self.chatter.log(LogLevel::Error, format_args!("{e}"));
            Box::new(rpc_error(
                StatusCode::INTERNAL_SERVER_ERROR,
                -32603,
                "cannot create a session id",
            ))
        })?;
        // An identity whose token was issued since the last reload has no judge until the
        // reload thread builds it (off this thread, within a second): the client retries.
        let (generation, judges) = self.judges.load();
        let Some(judge) = judges.get(identity.as_deref()) else {
            self.reloads.look();
            let mut r = rpc_error(
                StatusCode::SERVICE_UNAVAILABLE,
                -32000,
                "this identity's policy is being loaded; retry in a second",
            );
            r.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            return Err(Box::new(r));
        };
        // A reload that changed `sandbox:` applies to the servers started from now on.
        let resandboxed = match (&self.backend, &judges.sandbox) {
            (Backend::Command(spec), Some(plan)) => {
                Some(Backend::Command(crate::io::child::ChildSpec {
                    sandbox: plan.clone(),
                    ..spec.clone()
                }))
            }
            _ => None,
        };
        let backend = resandboxed.as_ref().unwrap_or(&self.backend);
        let options = session::Options {
            server_name: self.server_name.clone(),
            guard: judge.guard.clone(),
            audit: self.audit.enabled(),
            log_level: self.chatter.level,
        };
        let c = Conversation::start(
            Opening {
                id,
                identity,
                legacy,
                stateless,
                transport,
                server: self.mount.as_ref().map(|_| self.server_name.clone()),
                home: self.home.clone(),
                live: self.judges.clone(),
                generation,
                metrics: self.metrics.clone(),
                audit_before_answer: self.sessions.limits().audit_before_answer,
            },
            backend,
            judge,
            options,
            self.audit.clone(),
            self.chatter,
        )
        .map_err(|e| {
            self.chatter.log(LogLevel::Error, format_args!("{e}"));
            Box::new(rpc_error(
                StatusCode::BAD_GATEWAY,
                -32603,
                "the MCP server could not be started",
            ))
        })?;
        self.sessions.insert(&self.server_name, c.clone());
        Ok(c)
    }

    /// `GET /ws` with `Upgrade: websocket`: a new session for the life of the socket
    /// (`websocket.rs`).
    fn websocket(&self, req: Request<Incoming>, identity: Option<Arc<str>>) -> Response<Reply> {
        let shake = match super::websocket::handshake(&req) {
            Ok(shake) => shake,
            Err(why) => return plain(StatusCode::BAD_REQUEST, why),
        };
        // Only identities of the token file can be revoked; an identity provider's
        // tokens end when they expire (`still_valid` answers `true` for them).
        let holder = identity.clone().map(|identity| super::websocket::Holder {
            tokens: self.tokens.clone(),
            identity,
        });
        let conversation = match self.open_session(identity, true, false, "websocket") {
            Ok(c) => c,
            Err(refusal) => return *refusal,
        };
        let max = self.max_frame_bytes();
        super::websocket::accept(req, shake, conversation, max, self.chatter, holder)
    }

    /// `GET /sse`: a new session whose every message goes on this one stream, after an
    /// `endpoint` event naming where to POST. The session ends with the connection.
    fn legacy_open(&self, identity: Option<Arc<str>>) -> Response<Reply> {
        let conversation = match self.open_session(identity, true, false, "http") {
            Ok(c) => c,
            Err(refusal) => return *refusal,
        };
        let Some((stream, replay, rx)) = conversation.open_stream(None) else {
            conversation.end();
            return plain(StatusCode::INTERNAL_SERVER_ERROR, "no stream\n");
        };
        let preamble = format!(
            "event: endpoint\ndata: {}?session_id={}\n\n",
            self.path(LEGACY_MESSAGE),
            conversation.id
        );
        let ending = conversation.clone();
        Response::builder()
            .status(StatusCode::OK)
            .header(header::CONTENT_TYPE, "text/event-stream")
            .header(header::CACHE_CONTROL, "no-cache")
            .body(Reply::Legacy {
                preamble: Some(Bytes::from(preamble)),
                inner: Box::new(Reply::Sse {
                    stream,
                    queued: replay.into(),
                    live: Some(rx),
                }),
                ends: OnDrop::new(move || ending.end()),
            })
            .unwrap_or_else(|_| Response::new(Reply::empty()))
    }

    /// `POST /message?session_id=…`: one client message of a legacy session; whatever
    /// comes of it goes on the session's stream.
    async fn legacy_post(
        &self,
        req: Request<Incoming>,
        identity: Option<Arc<str>>,
    ) -> Response<Reply> {
        let (parts, body) = req.into_parts();
        let id = parts.uri.query().and_then(|q| {
            q.split('&').find_map(|kv| {
                kv.strip_prefix("session_id=")
                    .or_else(|| kv.strip_prefix("sessionId="))
            })
        });
        let conversation = match self.session_by_id(id, &identity, &parts.method) {
            Ok(c) => c,
            Err(refusal) => return *refusal,
        };
        let max = self.max_frame_bytes();
        let Ok(body) = read_body(body, max).await else {
            return plain(
                StatusCode::BAD_REQUEST,
                "the request body could not be read\n",
            );
        };
        let line = match &body {
            Body::Whole(b) => Line::Frame(b),
            Body::TooLarge { len, head } => Line::TooLarge { len: *len, head },
            Body::NotUtf8 => return not_utf8(),
        };
        if conversation.from_client(line).await.is_err() {
            return rpc_error(StatusCode::NOT_FOUND, -32001, "session not found");
        }
        plain(StatusCode::ACCEPTED, "Accepted")
    }

    fn get(&self, req: &Request<Incoming>, identity: Option<Arc<str>>) -> Response<Reply> {
        let accept = req
            .headers()
            .get(header::ACCEPT)
            .and_then(|h| h.to_str().ok())
            .unwrap_or("");
        if !accept.contains("text/event-stream") && !accept.contains("*/*") {
            return rpc_error(
                StatusCode::NOT_ACCEPTABLE,
                -32600,
                "not acceptable: GET opens an SSE stream; Accept must list text/event-stream",
            );
        }
        let conversation = match self.session(req.headers(), &identity, req.method()) {
            Ok(c) => c,
            Err(refusal) => return *refusal,
        };
        let resume = match req.headers().get("last-event-id") {
            Some(h) => match h.to_str().ok().and_then(parse_event_id) {
                Some(at) => Some(at),
                None => {
                    return rpc_error(
                        StatusCode::BAD_REQUEST,
                        -32600,
                        "bad request: unreadable Last-Event-ID",
                    );
                }
            },
            None => None,
        };
        let Some((stream, replay, rx)) = conversation.open_stream(resume) else {
            return rpc_error(
                StatusCode::NOT_FOUND,
                -32001,
                "no such stream in this session",
            );
        };
        Response::builder()
            .status(StatusCode::OK)
            .header(header::CONTENT_TYPE, "text/event-stream")
            .header(header::CACHE_CONTROL, "no-cache")
            .body(Reply::Sse {
                stream,
                queued: replay.into(),
                live: Some(rx),
            })
            .unwrap_or_else(|_| Response::new(Reply::empty()))
    }

    fn delete(&self, req: &Request<Incoming>, identity: Option<Arc<str>>) -> Response<Reply> {
        match self.session(req.headers(), &identity, req.method()) {
            Ok(c) => {
                self.sessions.remove(&c.id);
                plain(StatusCode::OK, "")
            }
            Err(refusal) => *refusal,
        }
    }
}

enum Body {
    Whole(Vec<u8>),
    /// Over the limit: its length and first bytes (for the id).
    TooLarge {
        len: usize,
        head: Vec<u8>,
    },
    /// Not JSON text as the protocol sends it: UTF-8 without a byte-order mark (a BOM, or
    /// UTF-16 with its NUL bytes, would otherwise pass as an unanswerable notification).
    NotUtf8,
}

/// Whether `bytes` (a whole body, or the first bytes of one) can be JSON text in UTF-8:
/// no byte-order mark (UTF-8's or UTF-16's), no NUL, valid UTF-8 (a cut last character
/// is allowed when only the head was kept).
fn is_utf8_json_text(bytes: &[u8], whole: bool) -> bool {
    if bytes.starts_with(b"\xEF\xBB\xBF")
        || bytes.starts_with(b"\xFE\xFF")
        || bytes.starts_with(b"\xFF\xFE")
        || memchr::memchr(0, bytes).is_some()
    {
        return false;
    }
    match std::str::from_utf8(bytes) {
        Ok(_) => true,
        Err(e) => !whole && e.error_len().is_none(),
    }
}

/// 400 for a body that is not UTF-8 JSON text.
fn not_utf8() -> Response<Reply> {
    rpc_error(
        StatusCode::BAD_REQUEST,
        -32700,
        "parse error: the body must be JSON text in UTF-8, without a byte-order mark",
    )
}

/// Read a request body up to `max` bytes; past that, keep its first bytes and count the
/// rest without keeping it. Newlines become spaces: JSON allows them only as whitespace
/// between tokens, and the server reads one message per line.
async fn read_body(mut body: Incoming, max: usize) -> Result<Body, hyper::Error> {
    let mut whole = Vec::new();
    let mut len = 0usize;
    while let Some(frame) = body.frame().await {
        let frame = frame?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        len += data.len();
        if len <= max {
            whole.extend_from_slice(&data);
        } else if whole.len() < HEAD_BYTES {
            let room = HEAD_BYTES - whole.len().min(HEAD_BYTES);
            whole.extend_from_slice(&data[..data.len().min(room)]);
        } else {
            whole.truncate(HEAD_BYTES);
        }
    }
    // memchr, not a loop over every byte: this runs on the I/O thread for bodies of up to
    // `max_frame_bytes`, before any judging is handed off.
    let breaks: Vec<usize> = memchr::memchr2_iter(b'\n', b'\r', &whole).collect();
    for at in breaks {
        whole[at] = b' ';
    }
    if len > max {
        whole.truncate(HEAD_BYTES);
        if !is_utf8_json_text(&whole, false) {
            return Ok(Body::NotUtf8);
        }
        Ok(Body::TooLarge { len, head: whole })
    } else if !is_utf8_json_text(&whole, true) {
        Ok(Body::NotUtf8)
    } else {
        Ok(Body::Whole(whole))
    }
}

/// The token of an `Authorization: Bearer …` header, if the request has one.
pub(super) fn bearer_token<B>(req: &Request<B>) -> Option<&str> {
    let value = req.headers().get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.trim().split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

pub(super) fn is_loopback_host(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or(""),
        None => host.rsplit_once(':').map_or(host, |(name, _)| name),
    };
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

fn origin_is_loopback(origin: &str) -> bool {
    let Some((scheme, rest)) = origin.split_once("://") else {
        return false;
    };
    matches!(scheme, "http" | "https") && !rest.contains('/') && is_loopback_host(rest)
}

fn plain(status: StatusCode, text: &'static str) -> Response<Reply> {
    Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "text/plain; charset=utf-8")
        .body(Reply::text(Bytes::from_static(text.as_bytes())))
        .unwrap_or_else(|_| Response::new(Reply::empty()))
}

/// An HTTP error with a JSON-RPC error without an id as its body (as the specification
/// allows).
fn rpc_error(status: StatusCode, code: i64, message: &str) -> Response<Reply> {
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "error": {"code": code, "message": message},
    })
    .to_string();
    Reply::json(status, body)
}

fn json_answer(answer: super::modern::Answer) -> Response<Reply> {
    Reply::json(answer.status, answer.body.to_string())
}

fn is_json(headers: &hyper::HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|h| h.to_str().ok())
        .is_some_and(|c| c.trim_start().starts_with("application/json"))
}

/// Whether the request's `Accept` lists `media` (or `*/*`).
fn accepts(headers: &hyper::HeaderMap, media: &str) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|h| h.to_str().ok())
        .any(|h| h.contains(media) || h.contains("*/*"))
}

fn with_session(mut response: Response<Reply>, id: Option<&str>) -> Response<Reply> {
    if let Some(id) = id.and_then(|id| HeaderValue::from_str(id).ok()) {
        response.headers_mut().insert(SESSION_HEADER, id);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_hosts_and_origins_pass_on_a_loopback_listener() {
        for host in [
            "127.0.0.1:8808",
            "localhost",
            "LOCALHOST:1",
            "[::1]:8808",
            "127.0.0.2",
        ] {
            assert!(is_loopback_host(host), "{host}");
        }
        for host in [
            "evil.example:8808",
            "127.0.0.1.evil.example",
            "",
            "[fe80::1]:1",
        ] {
            assert!(!is_loopback_host(host), "{host}");
        }
        assert!(origin_is_loopback("http://localhost:3000"));
        assert!(origin_is_loopback("http://127.0.0.1"));
        assert!(!origin_is_loopback("http://evil.example"));
        assert!(!origin_is_loopback("null"));
        assert!(!origin_is_loopback("http://localhost.evil.example"));
    }
}
