//! The WebSocket endpoint, `GET /ws` with `Upgrade: websocket` (subprotocol `mcp`, as the
//! MCP SDKs' WebSocket clients ask for): one connection is one session, with its own
//! server process, owned by the identity whose bearer token the upgrade request carried.
//!
//! The upgrade request has passed the listener's `Host`, `Origin` and token checks before
//! it reaches this file (`server.rs`), so a refused client never gets a socket and no
//! server is spawned for it. After the upgrade, each text message is one JSON-RPC message
//! (or batch) handed to the session as a POST body is ([`Conversation::from_client`]); what
//! the session lets through to the client arrives on the session's one stream, as on the
//! legacy SSE transport, and goes out as one text message each.
//!
//! Refused whole, never passed in part: a message over `settings.max_frame_bytes` (the
//! session records the refusal, the socket closes with 1008, policy violation), and a
//! binary message (1003, unsupported data: MCP's WebSocket messages are JSON text). The
//! codec answers pings. Closing the socket ends the session and its server, which gets the
//! same grace period as on DELETE.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use futures_util::{SinkExt, StreamExt};
use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Request, Response, StatusCode};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, Role, WebSocketConfig};
use tokio_tungstenite::tungstenite::{Error as WsError, Message, error::CapacityError};

use super::conversation::Conversation;
use super::sse::Reply;
use super::tokens::LiveTokens;
use crate::io::{Chatter, LogLevel};
use crate::session::Line;

/// The endpoint path.
pub const PATH: &str = "/ws";
/// The subprotocol MCP's WebSocket clients request.
pub const SUBPROTOCOL: &str = "mcp";
/// How long the close frame may take to go out.
const CLOSE_GRACE: std::time::Duration = std::time::Duration::from_secs(2);
/// Room in a socket's write buffer beyond one whole message (pongs, a close frame).
const WRITE_SLACK: usize = 64 * 1024;
/// Pings a client may send while the socket cannot take our writes (it is not reading);
/// one more closes it with 1008.
const MAX_UNREAD_PONGS: usize = 64;

/// The identity of a socket opened with a token of the token file, checked before each
/// client message: a replica that hears revocations as they are made closes the socket
/// when one is heard and asks nothing; one that does not asks the shared state, on the
/// blocking pool ([`LiveTokens::still_valid_unless_heard`]).
pub struct Holder {
    pub tokens: Arc<LiveTokens>,
    pub identity: Arc<str>,
}

impl Holder {
    /// Why the socket must close before this message is relayed, if it must.
    async fn refusal(&self) -> Option<(CloseCode, &'static str)> {
        match self.tokens.still_valid_unless_heard(&self.identity).await {
            None | Some(Ok(true)) => None,
            // Revoked on this replica or another.
            Some(Ok(false)) => Some((CloseCode::Policy, "the token was revoked")),
            // Whether it was revoked cannot be known now: fail closed, try again later.
            Some(Err(_)) => Some((
                CloseCode::Again,
                "the gateway cannot check the token now: reconnect later",
            )),
        }
    }
}

/// What an upgrade request asks for, once its headers are found to be a WebSocket
/// handshake: the `Sec-WebSocket-Accept` value and whether to confirm `mcp`.
pub struct Handshake {
    accept: String,
    subprotocol: bool,
}

/// Read an upgrade request's handshake headers (RFC 6455 section 4.2.1). `Err` is the
/// reason the request is not one this endpoint accepts (400).
pub fn handshake(req: &Request<Incoming>) -> Result<Handshake, &'static str> {
    let headers = req.headers();
    let has_token = |name: header::HeaderName, token: &str| {
        headers.get_all(name).iter().any(|v| {
            v.to_str()
                .is_ok_and(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case(token)))
        })
    };
    if req.method() != hyper::Method::GET
        || !has_token(header::UPGRADE, "websocket")
        || !has_token(header::CONNECTION, "upgrade")
    {
        return Err("this endpoint takes WebSocket upgrade requests (GET, Upgrade: websocket)\n");
    }
    if headers
        .get(header::SEC_WEBSOCKET_VERSION)
        .is_none_or(|v| v.as_bytes() != b"13")
    {
        return Err("Sec-WebSocket-Version must be 13\n");
    }
    let Some(key) = headers.get(header::SEC_WEBSOCKET_KEY) else {
        return Err("Sec-WebSocket-Key is missing\n");
    };
    let offered = headers
        .get_all(header::SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .count()
        > 0;
    let subprotocol = has_token(header::SEC_WEBSOCKET_PROTOCOL, SUBPROTOCOL);
    if offered && !subprotocol {
        return Err("this endpoint speaks the `mcp` WebSocket subprotocol only\n");
    }
    Ok(Handshake {
        accept: tokio_tungstenite::tungstenite::handshake::derive_accept_key(key.as_bytes()),
        subprotocol,
    })
}

/// Switch the connection to WebSocket and relay it to `conversation` until either side
/// ends; the 101 answer is returned at once and the relay runs on its own task.
pub fn accept(
    req: Request<Incoming>,
    shake: Handshake,
    conversation: Arc<Conversation>,
    max_message: usize,
    chatter: Chatter,
    holder: Option<Holder>,
) -> Response<Reply> {
    let Ok(accept) = HeaderValue::from_str(&shake.accept) else {
        conversation.end();
        return Response::new(Reply::empty());
    };
    let mut response = Response::new(Reply::empty());
    *response.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let h = response.headers_mut();
    h.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    h.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
    h.insert(header::SEC_WEBSOCKET_ACCEPT, accept);
    if shake.subprotocol {
        h.insert(
            header::SEC_WEBSOCKET_PROTOCOL,
            HeaderValue::from_static(SUBPROTOCOL),
        );
    }
    tokio::spawn(async move {
        match hyper::upgrade::on(req).await {
            Ok(upgraded) => {
                // The write buffer holds at most one whole message beyond what the
                // socket takes (an answer is never sent in part); tungstenite wants the
                // bound above its buffering size.
                let config = WebSocketConfig::default();
                let max_write = max_message
                    .max(config.write_buffer_size)
                    .saturating_add(WRITE_SLACK);
                let config = config
                    .max_message_size(Some(max_message))
                    .max_frame_size(Some(max_message))
                    .max_write_buffer_size(max_write);
                let blocked = Arc::new(AtomicBool::new(false));
                let io = Watched {
                    io: hyper_util::rt::TokioIo::new(upgraded),
                    blocked: blocked.clone(),
                };
                let socket = WebSocketStream::from_raw_socket(io, Role::Server, Some(config)).await;
                relay(socket, &conversation, &blocked, chatter, holder.as_ref()).await;
            }
            Err(e) => chatter.log(
                LogLevel::Info,
                format_args!("WebSocket upgrade failed: {e}"),
            ),
        }
        conversation.end();
    });
    response
}

/// Move messages both ways until the client closes, the server's side ends, or a message
/// is refused whole. The two directions progress independently: a client message waiting
/// for room on the server's stdin never stops the server's messages from going out. A
/// client that reads slowly is paced, not cut off: while 64 messages wait for it, the
/// session waits to hand it more, so its server's output and its own next messages wait
/// too (`Conversation::send_paced`).
async fn relay<S>(
    socket: WebSocketStream<S>,
    conversation: &Conversation,
    blocked: &AtomicBool,
    chatter: Chatter,
    holder: Option<&Holder>,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let Some((_, replay, mut rx)) = conversation.open_stream(None) else {
        return;
    };
    let (mut sink, mut source) = socket.split();
    let outgoing = async {
        for event in replay {
            send_text(&mut sink, event.data).await?;
        }
        while let Some(event) = rx.recv().await {
            send_text(&mut sink, event.data).await?;
        }
        Ok::<_, ()>(())
    };
    let incoming = async {
        let mut unread_pongs = 0usize;
        loop {
            match source.next().await {
                Some(Ok(Message::Text(text))) => {
                    if let Some(holder) = holder
                        && let Some(refusal) = holder.refusal().await
                    {
                        return Some(refusal);
                    }
                    conversation.touch();
                    // JSON allows newlines only as whitespace between tokens, and the
                    // server reads one message per line.
                    let mut line = text.as_bytes().to_vec();
                    for b in &mut line {
                        if matches!(*b, b'\n' | b'\r') {
                            *b = b' ';
                        }
                    }
                    if conversation.from_client(Line::Frame(&line)).await.is_err() {
                        return Some((CloseCode::Away, "the session has ended"));
                    }
                    // One message at a time: a client sending as fast as it can does not
                    // keep the gateway's one thread from the other sessions.
                    tokio::task::yield_now().await;
                }
                Some(Ok(Message::Binary(_))) => {
                    chatter.log(
                        LogLevel::Info,
                        format_args!("WebSocket: a binary message refused; closing"),
                    );
                    return Some((
                        CloseCode::Unsupported,
                        "binary messages are not accepted: send JSON-RPC as text",
                    ));
                }
                // The codec answers pings itself, but a pong waits in the write buffer
                // while the client does not read: pings sent meanwhile grow it, so a
                // client that keeps pinging without reading is closed.
                Some(Ok(Message::Ping(_))) => {
                    if blocked.load(Ordering::Acquire) {
                        unread_pongs += 1;
                        if unread_pongs > MAX_UNREAD_PONGS {
                            chatter.log(
                                LogLevel::Info,
                                format_args!(
                                    "WebSocket: pings sent while not reading our answers; closing"
                                ),
                            );
                            return Some((
                                CloseCode::Policy,
                                "pings sent while not reading: read the answers",
                            ));
                        }
                    } else {
                        unread_pongs = 0;
                    }
                }
                // Pongs and raw frames need nothing.
                Some(Ok(Message::Pong(_) | Message::Frame(_))) => {}
                Some(Ok(Message::Close(_))) | None => return None,
                Some(Err(WsError::Capacity(CapacityError::MessageTooLong { size, .. }))) => {
                    // The session records the refusal (audit, stderr) as it does for an
                    // oversized POST body; the message's bytes were never kept.
                    let too_large = Line::TooLarge {
                        len: size,
                        head: b"",
                    };
                    let _ = conversation.from_client(too_large).await;
                    return Some((
                        CloseCode::Policy,
                        "message over max_frame_bytes: refused whole",
                    ));
                }
                Some(Err(e)) => {
                    chatter.log(LogLevel::Info, format_args!("WebSocket: {e}; closing"));
                    return Some((CloseCode::Protocol, "WebSocket protocol error"));
                }
            }
        }
    };
    let close = tokio::select! {
        sent = outgoing => sent.ok().map(|()| {
            // The session's stream ended: its server exited, or the client fell behind.
            (CloseCode::Away, "the session has ended")
        }),
        close = incoming => close,
    };
    // A client that does not read never takes the close frame: it gets a moment.
    let closing = async {
        if let Some((code, reason)) = close {
            let _ = sink
                .send(Message::Close(Some(CloseFrame {
                    code,
                    reason: reason.into(),
                })))
                .await;
        }
        let _ = sink.close().await;
    };
    let _ = tokio::time::timeout(CLOSE_GRACE, closing).await;
}

/// One message the session let through, as a text message. The session forwards only
/// JSON it parsed, so it is UTF-8; anything else is not sent.
async fn send_text<S>(
    sink: &mut futures_util::stream::SplitSink<WebSocketStream<S>, Message>,
    data: bytes::Bytes,
) -> Result<(), ()>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let Ok(text) = tokio_tungstenite::tungstenite::Utf8Bytes::try_from(data) else {
        return Ok(());
    };
    sink.send(Message::Text(text)).await.map_err(|_| ())
}

/// The upgraded connection, noting whether the last write found the socket full (the
/// client is not reading).
struct Watched<S> {
    io: S,
    blocked: Arc<AtomicBool>,
}

impl<S: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for Watched<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_read(cx, buf)
    }
}

impl<S: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for Watched<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.io).poll_write(cx, buf);
        this.blocked.store(polled.is_pending(), Ordering::Release);
        polled
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}
