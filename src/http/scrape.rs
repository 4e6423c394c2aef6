//! The `/metrics` listener: who may scrape it ([`Scrape`]) and the gauges read from the
//! gateways at each scrape; the counters themselves are [`super::metrics`]'s.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};

use super::metrics::{Gauges, Metrics};
use super::server::Gateway;
use crate::io::LogLevel;

/// The one path of the metrics listener.
pub const PATH: &str = "/metrics";

/// Connections the metrics listener serves at once; more are closed unread.
const MAX_CONNECTIONS: usize = 8;

/// Who may scrape, and what.
pub struct Scrape {
    pub metrics: Arc<Metrics>,
    /// The listener's gateways (the first one's token file and audit log are used).
    pub gateways: Vec<Arc<Gateway>>,
    /// The identities whose bearer token may read `/metrics`.
    pub readers: Vec<String>,
    /// The metrics listener's address.
    pub listen: std::net::SocketAddr,
}

impl Scrape {
    async fn answer(&self, req: &Request<hyper::body::Incoming>) -> Response<Full<Bytes>> {
        let text = |status: StatusCode, body: &'static str| {
            let mut r = Response::new(Full::new(Bytes::from_static(body.as_bytes())));
            *r.status_mut() = status;
            r.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/plain; charset=utf-8"),
            );
            r
        };
        let Some(gateway) = self.gateways.first() else {
            return text(StatusCode::SERVICE_UNAVAILABLE, "no gateway\n");
        };
        // A browser page on a rebound name reaches a loopback listener too.
        if self.listen.ip().is_loopback() {
            let host = req
                .headers()
                .get(header::HOST)
                .and_then(|h| h.to_str().ok())
                .unwrap_or("");
            if !super::server::is_loopback_host(host) || req.headers().contains_key(header::ORIGIN)
            {
                self.metrics.note_refused_scrape();
                return text(StatusCode::FORBIDDEN, "forbidden\n");
            }
        }
        let presented = super::server::bearer_token(req);
        let identified = match presented {
            Some(t) => gateway.tokens.identify(t).await,
            None => Ok(None),
        };
        let identified = match identified {
            Err(why) => {
                // Whether the reader's token was revoked elsewhere cannot be known now.
                self.metrics.note_refused_scrape();
                gateway.chatter.log(
                    LogLevel::Info,
                    format_args!("a scrape of /metrics refused: {why}"),
                );
                let mut r = text(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "service unavailable: the token's revocation cannot be checked now; retry later\n",
                );
                r.headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
                return r;
            }
            Ok(name) => name,
        };
        let reader = identified.filter(|name| self.readers.iter().any(|r| **r == **name));
        if reader.is_none() {
            self.metrics.note_refused_scrape();
            let why = match presented {
                None => "a scrape of /metrics without a bearer token",
                Some(_) => "a scrape of /metrics with a token that is not a metrics reader's",
            };
            gateway
                .chatter
                .log(LogLevel::Info, format_args!("{why} refused"));
            let mut r = text(
                StatusCode::UNAUTHORIZED,
                "unauthorized: the bearer token of a --metrics-reader identity is required\n",
            );
            r.headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            return r;
        }
        if req.uri().path() != PATH {
            return text(StatusCode::NOT_FOUND, "not found\n");
        }
        if req.method() != Method::GET && req.method() != Method::HEAD {
            return text(StatusCode::METHOD_NOT_ALLOWED, "GET /metrics\n");
        }
        let mut r = Response::new(Full::new(Bytes::from(
            self.metrics.render(&gauges(&self.gateways)),
        )));
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
        );
        r
    }
}

/// Serve `/metrics` on `listener` until `shutdown` completes. Plain HTTP/1.1: a scrape is
/// one small request; connections are few (Prometheus keeps one).
pub async fn serve(
    listener: tokio::net::TcpListener,
    scrape: Scrape,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let scrape = Arc::new(scrape);
    // A scraper keeps one connection; more than a few open at once is someone else.
    let open = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                };
                let Ok(permit) = open.clone().try_acquire_owned() else {
                    continue;
                };
                let scrape = scrape.clone();
                tokio::spawn(async move {
                    let _permit = permit;
                    let service = hyper::service::service_fn(move |req| {
                        let scrape = scrape.clone();
                        async move { Ok::<_, Infallible>(scrape.answer(&req).await) }
                    });
                    let _ = tokio::time::timeout(
                        Duration::from_secs(30),
                        hyper::server::conn::http1::Builder::new()
                            .timer(hyper_util::rt::TokioTimer::new())
                            .header_read_timeout(Duration::from_secs(10))
                            .serve_connection(hyper_util::rt::TokioIo::new(stream), service),
                    )
                    .await;
                });
            }
            () = &mut shutdown => break,
        }
    }
}

/// The gauges as the gateways stand now.
fn gauges(gateways: &[Arc<Gateway>]) -> Gauges {
    let mut gauges = Gauges::default();
    if let Some(first) = gateways.first() {
        gauges.sessions = first.sessions.open_counts();
    }
    for g in gateways {
        let judges = g.judges.current();
        let mut rows: Vec<(String, bool)> = judges
            .iter()
            .filter_map(|(identity, judge)| {
                let guard = judge.guard.as_ref().filter(|g| g.has_breaker())?;
                Some((
                    identity.as_deref().unwrap_or("").to_string(),
                    guard.is_suspended(),
                ))
            })
            .collect();
        rows.sort();
        gauges.breakers.extend(
            rows.into_iter()
                .map(|(identity, suspended)| (g.server_name.clone(), identity, suspended)),
        );
    }
    gauges
}
