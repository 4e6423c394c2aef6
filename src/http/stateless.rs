//! Serving stateless (2026-07-28) clients through servers that speak the session-based
//! revision: the gateway keeps, per identity, one session-based conversation of its own
//! and translates each modern request onto it.
//!
//! ```text
//! POST (2026-07-28) ─► modern::triage ─► Backends::linked(identity)
//!     the identity's Conversation, started and `initialize`d by the gateway on first use,
//!     and again after its server died (or it idled out)
//! request: id := "mcpwall-N" (unique in the gateway), progressToken := the same,
//!     `io.modelcontextprotocol/*` keys left out of `_meta`
//!     ─► Conversation::from_client: the identity's Session judges it as any client's
//! answer (by "mcpwall-N") ─► the client's id and progress token put back, `resultType`
//!     added ─► JSON, or the request's SSE response with its progress (and its log
//!     messages when it asked for them with `io.modelcontextprotocol/logLevel`)
//! ```
//!
//! Why one conversation per identity and not per request: a stdio server is one process
//! per `initialize`; starting one per request would cost a process start and a handshake
//! per call. Why not one for all identities: each identity's Session holds its own rules,
//! guard and rate count, and the server itself then never mixes two identities' state.
//! Two requests of one identity may share the conversation at once: their gateway ids
//! differ, whatever ids the client chose, so answers cannot cross.
//!
//! A server's `sampling/createMessage`, `elicitation/create` or `roots/list` in the
//! middle of a call reaches a 2026-07-28 client the way that revision carries it (multi
//! round-trip requests): when exactly one of the identity's requests in flight may take it
//! (`tools/call`, `prompts/get` or `resources/read`, from a client that declared the
//! capability), that request is answered `input_required` with the server's request as
//! its input request and an unguessable `requestState`, and the backend call is parked
//! (`Routes::park`, in the identity's own conversation, so another identity's state finds
//! nothing). The client's retry of the same request with that state sends its
//! `inputResponses` to the server as the answers to its requests, judged by the session
//! as any client's, and gets the parked call's answer. A state is used once; a call not
//! retried within five minutes is cancelled on the server (at the identity's next
//! request); 16 calls may be parked per identity. Other server requests, and these when no one request can take them, the
//! gateway answers itself ([`super::modern::answer_server_request`]): `-32601`, and `ping` an empty
//! result.
//!
//! Change notifications that belong to no request go to the identity's
//! `subscriptions/listen` streams that opted in to them ([`listen`]), tagged with the
//! subscription id: list changes, and updates of the resources a stream named in
//! `resourceSubscriptions` (the gateway subscribes to them on the server); others are
//! dropped.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use hyper::header;
use hyper::{Response, StatusCode};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::conversation::{Conversation, InputAsk, Listener};
use super::modern::{LISTENED, sse_frame};
use super::sse::Reply;
use crate::session::Line;
use crate::session::ids::string_key;

/// How long the server may take to answer the gateway's `initialize`.
const HANDSHAKE: Duration = Duration::from_secs(30);
/// The session-based version the gateway speaks to the server for its stateless clients.
const BACKEND_VERSION: &str = "2025-11-25";
/// Results that carry `ttlMs` and `cacheScope` in the 2026-07-28 revision.
const CACHEABLE: &[&str] = &[
    "tools/list",
    "prompts/list",
    "resources/list",
    "resources/read",
    "resources/templates/list",
];

/// How long a call answered `input_required` waits for the client's retry before it is
/// cancelled on the server.
const PARKED_FOR: Duration = Duration::from_secs(300);
/// Requests a server may answer `input_required` in the 2026-07-28 revision.
const INPUT_REQUIRED_ON: &[&str] = &["tools/call", "prompts/get", "resources/read"];

/// What a stateless request lets its server ask the client for (MRTR): the server
/// requests matching the capabilities it declared, if its method may take any.
fn input_ask(request: &Value) -> Option<InputAsk> {
    let method = request["method"].as_str()?;
    if !INPUT_REQUIRED_ON.contains(&method) {
        return None;
    }
    let declared = &request["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"];
    let methods: Vec<&'static str> = [
        ("sampling", "sampling/createMessage"),
        ("elicitation", "elicitation/create"),
        ("roots", "roots/list"),
    ]
    .into_iter()
    .filter(|(capability, _)| declared.get(capability).is_some_and(Value::is_object))
    .map(|(_, server_method)| server_method)
    .collect();
    (!methods.is_empty()).then(|| InputAsk {
        method: method.to_string(),
        name: request["params"]["name"].as_str().map(str::to_string),
        methods,
        gateway_id: String::new(),
    })
}

/// Resources one `subscriptions/listen` may subscribe to (each is a request to the server).
const MAX_RESOURCE_SUBSCRIPTIONS: usize = 64;
/// Events of a `subscriptions/listen` stream not yet read before the client loses it.
const LISTEN_QUEUE: usize = 64;

/// An identity's conversation and what its server said to the gateway's `initialize`.
#[derive(Clone)]
pub struct Linked {
    pub conversation: Arc<Conversation>,
    /// The `initialize` result (as the session let it through).
    pub init: Arc<Value>,
}

/// An identity's conversation, if started; locked across the handshake, so concurrent
/// first requests wait for one.
type Slot = tokio::sync::Mutex<Option<Linked>>;
/// A slot's server name (the backend) and identity.
type SlotKey = (Arc<str>, Option<Arc<str>>);

/// Each identity's conversation for its stateless requests.
#[derive(Default)]
pub struct Backends {
    slots: Mutex<HashMap<SlotKey, Arc<Slot>>>,
    next_id: AtomicU64,
}

/// Why an identity has no conversation to serve it.
#[derive(Debug)]
pub enum Unlinked<E> {
    /// The conversation could not be opened (what `open` said).
    Open(E),
    /// The server did not complete the gateway's `initialize`.
    Handshake(String),
}

impl Backends {
    /// The identity's conversation with the server `server`, opened with `open` and
    /// initialised when there is none or the last one ended. Concurrent first requests
    /// wait for the one handshake.
    pub async fn linked<E>(
        &self,
        server: &Arc<str>,
        identity: &Option<Arc<str>>,
        open: impl FnOnce() -> Result<Arc<Conversation>, E>,
    ) -> Result<Linked, Unlinked<E>> {
        let slot = {
            let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
            slots
                .entry((server.clone(), identity.clone()))
                .or_default()
                .clone()
        };
        let mut slot = slot.lock().await;
        if let Some(linked) = slot.as_ref().filter(|l| !l.conversation.is_ended()) {
            linked.conversation.touch();
            return Ok(linked.clone());
        }
        *slot = None;
        let conversation = open().map_err(Unlinked::Open)?;
        match self.handshake(&conversation).await {
            Ok(init) => {
                let linked = Linked {
                    conversation,
                    init: Arc::new(init),
                };
                *slot = Some(linked.clone());
                Ok(linked)
            }
            Err(why) => {
                conversation.end();
                Err(Unlinked::Handshake(why))
            }
        }
    }

    fn gateway_id(&self) -> String {
        format!("mcpwall-{}", self.next_id.fetch_add(1, Ordering::Relaxed))
    }

    /// `initialize` and `notifications/initialized`, judged by the conversation's session
    /// like any client's. The client capabilities are sampling and elicitation, which the
    /// gateway carries to its clients that declare them (see the module docs); not roots,
    /// which a server asks for outside any request, where no client can be asked.
    async fn handshake(&self, conversation: &Conversation) -> Result<Value, String> {
        let params = json!({
            "protocolVersion": BACKEND_VERSION,
            "capabilities": {"sampling": {}, "elicitation": {}},
            "clientInfo": {"name": "mcpwall (for stateless clients)",
                           "version": env!("CARGO_PKG_VERSION")},
        });
        let result = self
            .request(conversation, "initialize", params)
            .await
            .map_err(|failure| match failure {
                Failure::Ended => "the server ended before initialize".to_string(),
                Failure::Unanswered => "the server ended before answering initialize".to_string(),
                Failure::TimedOut => format!(
                    "the server did not answer initialize within {} s",
                    HANDSHAKE.as_secs()
                ),
                Failure::NotJson => "the server's initialize answer is not JSON".to_string(),
                Failure::Refused => "the server refused initialize".to_string(),
            })?;
        let done = br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
        conversation
            .from_client(Line::Frame(done))
            .await
            .map_err(|_| "the server ended after initialize".to_string())?;
        Ok(result)
    }

    /// Subscribe the conversation to `uri` on the server (`resources/subscribe`, judged
    /// by its session as a client's): whether the server accepted it.
    async fn subscribe(&self, conversation: &Conversation, uri: &str) -> bool {
        self.request(conversation, "resources/subscribe", json!({"uri": uri}))
            .await
            .is_ok()
    }

    /// A request of the gateway's own to the server, judged by the conversation's session
    /// as a client's, and its `result`, awaited for at most [`HANDSHAKE`].
    async fn request(
        &self,
        conversation: &Conversation,
        method: &str,
        params: Value,
    ) -> Result<Value, Failure> {
        let id = self.gateway_id();
        let key = string_key(&id);
        let mut answer = conversation.expect_answer(key.clone(), false);
        let request =
            json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string();
        if conversation
            .from_client(Line::Frame(request.as_bytes()))
            .await
            .is_err()
        {
            conversation.forget_answer(&key);
            return Err(Failure::Ended);
        }
        let event = match tokio::time::timeout(HANDSHAKE, answer.rx.recv()).await {
            Ok(Some(event)) => event,
            Ok(None) => return Err(Failure::Unanswered),
            Err(_) => {
                conversation.forget_answer(&key);
                return Err(Failure::TimedOut);
            }
        };
        let mut answer: Value =
            serde_json::from_slice(&event.data).map_err(|_| Failure::NotJson)?;
        match answer.get_mut("result") {
            Some(result @ Value::Object(_)) => Ok(result.take()),
            _ => Err(Failure::Refused),
        }
    }

    /// Serve one modern request on `linked` (see the module docs). `reads_sse`: the client
    /// accepts `text/event-stream`.
    pub async fn serve(&self, linked: &Linked, request: Value, reads_sse: bool) -> Response<Reply> {
        let conversation = &linked.conversation;
        for expired in conversation.expired_parked(PARKED_FOR) {
            // The client never retried: the server's call is cancelled as a client would.
            let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                "params": {"requestId": expired.ask.gateway_id,
                           "reason": "the client did not give the input the server asked for"}});
            let _ = conversation
                .from_client(Line::Frame(cancel.to_string().as_bytes()))
                .await;
        }
        let ask = input_ask(&request);
        if let Some(state) = request["params"]["requestState"].as_str() {
            return self.resume(linked, &request, state, ask, reads_sse).await;
        }
        let gateway_id = self.gateway_id();
        let Translated {
            line,
            client_id,
            client_token,
            logs,
            method,
        } = translate(request, &gateway_id);
        let key = string_key(&gateway_id);
        let answer = conversation.expect_answer_with_progress(
            key.clone(),
            reads_sse && logs,
            client_token.is_some().then(|| key.clone()),
        );
        conversation.audit_under(&key, &client_id);
        if let Some(mut ask) = ask {
            ask.gateway_id.clone_from(&gateway_id);
            conversation.expect_input(key.clone(), ask);
        }
        let back = Back {
            client_id,
            client_token,
            method,
            server_info: linked.init.get("serverInfo").cloned(),
        };
        if let Err(gone) = forward(conversation, &key, line.as_bytes(), &back.client_id).await {
            return gone;
        }
        self.respond(conversation, key, gateway_id, answer, back, reads_sse)
            .await
    }

    /// A retry carrying the `requestState` of a parked call: the client's
    /// `inputResponses` go to the server as the answers to its requests (judged by the
    /// session as any client's), and the parked call's answer comes back on this request.
    async fn resume(
        &self,
        linked: &Linked,
        request: &Value,
        state: &str,
        ask: Option<InputAsk>,
        reads_sse: bool,
    ) -> Response<Reply> {
        let client_id = request["id"].clone();
        let conversation = &linked.conversation;
        let method = request["method"].as_str().unwrap_or_default();
        let name = request["params"]["name"].as_str();
        let Some(parked) = conversation.unpark(state, |parked| {
            parked.method == method && parked.name.as_deref() == name
        }) else {
            let body = json!({"jsonrpc": "2.0", "id": client_id, "error": {"code": -32602,
                "message": "unknown or expired requestState, or not a retry of its request"}});
            return Reply::json(StatusCode::BAD_REQUEST, body.to_string());
        };
        let logs = request["params"]["_meta"]
            .get("io.modelcontextprotocol/logLevel")
            .is_some();
        let gateway_id = parked.ask.gateway_id.clone();
        let key = parked.key.clone();
        let answer = conversation.expect_answer_with_progress(key.clone(), reads_sse && logs, None);
        conversation.audit_under(&key, &client_id);
        if let Some(mut ask) = ask {
            // The server may ask again; the retry's declared capabilities count now.
            ask.gateway_id.clone_from(&gateway_id);
            conversation.expect_input(key.clone(), ask);
        }
        let back = Back {
            client_id,
            client_token: None,
            method: method.to_string(),
            server_info: linked.init.get("serverInfo").cloned(),
        };
        let responses = &request["params"]["inputResponses"];
        for (input, server_id) in &parked.inputs {
            let answer = match responses.get(input) {
                Some(result @ Value::Object(_)) => {
                    json!({"jsonrpc": "2.0", "id": server_id, "result": result})
                }
                _ => json!({"jsonrpc": "2.0", "id": server_id, "error": {"code": -32600,
                    "message": "the client gave no answer to this request"}}),
            };
            let frame = answer.to_string();
            if let Err(gone) = forward(conversation, &key, frame.as_bytes(), &back.client_id).await
            {
                return gone;
            }
        }
        self.respond(conversation, key, gateway_id, answer, back, reads_sse)
            .await
    }

    /// The answer to a forwarded request, in the client's terms: JSON, or an SSE stream
    /// when messages came before it and the client reads SSE.
    async fn respond(
        &self,
        conversation: &Arc<Conversation>,
        key: String,
        gateway_id: String,
        mut answer: super::conversation::Answer,
        back: Back,
        reads_sse: bool,
    ) -> Response<Reply> {
        // From here, a client that goes away cancels the request (this future is dropped).
        let mut cancel = Cancel {
            conversation: conversation.clone(),
            key,
            gateway_id,
            armed: true,
        };
        // Until the answer: with SSE, the first message decides JSON or a stream; without,
        // notifications are left out and only the answer is sent.
        let first = loop {
            match answer.rx.recv().await {
                None => {
                    cancel.armed = false;
                    return gone(&back.client_id);
                }
                Some(event) if event.last || reads_sse => break event,
                Some(_) => {}
            }
        };
        let Some(data) = back.map(&first.data) else {
            return gone(&back.client_id);
        };
        if first.last {
            cancel.armed = false;
            // The revision's answer to a method the server does not have is `404`.
            // (Parsed again only when the code's digits are there at all.)
            let unknown = memchr::memmem::find(&data, b"-32601").is_some()
                && serde_json::from_slice::<Value>(&data)
                    .is_ok_and(|a| a["error"]["code"] == -32601);
            let status = if unknown {
                StatusCode::NOT_FOUND
            } else {
                StatusCode::OK
            };
            return Reply::json(status, data);
        }
        let (tx, rx) = mpsc::channel(16);
        let _ = tx.try_send(sse_frame(&data));
        let mut events = answer.rx;
        tokio::spawn(async move {
            // Dropped armed when the client closed the response stream first.
            let mut cancel = cancel;
            loop {
                tokio::select! {
                    event = events.recv() => {
                        let Some(event) = event else {
                            cancel.armed = false;
                            return;
                        };
                        if event.last {
                            cancel.armed = false;
                        }
                        if let Some(data) = back.map(&event.data)
                            && tx.send(sse_frame(&data)).await.is_err()
                        {
                            return;
                        }
                        if event.last {
                            return;
                        }
                    }
                    () = tx.closed() => return,
                }
            }
        });
        sse_response(rx)
    }
}

/// `subscriptions/listen`: an SSE stream that starts with the acknowledgement (the list
/// changes the server offers among those asked for, and the resources it subscribed to)
/// and then carries those notifications, as the session let them through, until the
/// client closes it or the conversation ends (then a final result ends the subscription).
///
/// Each resource in `resourceSubscriptions` is subscribed to on the server with a
/// `resources/subscribe` of the gateway's, judged and audited as a session-based client's
/// would be: one the policy refuses, or the server does not accept, is left out of the
/// acknowledgement. When no open stream wants a resource any more, its next update ends
/// the gateway's subscription (`resources/unsubscribe`).
pub async fn listen(
    backends: &Backends,
    linked: &Linked,
    request: &Value,
    reads_sse: bool,
) -> Response<Reply> {
    let id = request["id"].clone();
    if !reads_sse {
        let body = json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32600, "message":
            "subscriptions/listen answers with an SSE stream: Accept must list text/event-stream"}});
        return Reply::json(StatusCode::NOT_ACCEPTABLE, body.to_string());
    }
    let asked = &request["params"]["notifications"];
    let offered = &linked.init["capabilities"];
    let mut agreed = serde_json::Map::new();
    let mut methods = Vec::new();
    for (field, capability, method) in LISTENED {
        if asked[field] == true && offered[capability]["listChanged"] == true {
            agreed.insert((*field).into(), Value::Bool(true));
            methods.push(*method);
        }
    }
    let mut uris: Vec<String> = Vec::new();
    if let Some(wanted) = asked["resourceSubscriptions"].as_array()
        && offered["resources"]["subscribe"] == true
    {
        for uri in wanted
            .iter()
            .filter_map(Value::as_str)
            .take(MAX_RESOURCE_SUBSCRIPTIONS)
        {
            if !uris.iter().any(|u| u == uri) && backends.subscribe(&linked.conversation, uri).await
            {
                uris.push(uri.to_string());
            }
        }
        agreed.insert("resourceSubscriptions".into(), json!(uris));
    }
    let ack = json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
        "params": {"_meta": {"io.modelcontextprotocol/subscriptionId": id},
                   "notifications": agreed}});
    let (tx, rx) = mpsc::channel(LISTEN_QUEUE);
    let _ = tx.try_send(sse_frame(ack.to_string().as_bytes()));
    if !linked.conversation.listen(Listener {
        methods,
        id: id.clone(),
        tx,
        uris,
    }) {
        return gone(&id);
    }
    sse_response(rx)
}

/// A 200 whose body is the SSE events sent on `rx` (unbuffered by proxies on the way).
fn sse_response(rx: mpsc::Receiver<Bytes>) -> Response<Reply> {
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .header("x-accel-buffering", "no")
        .body(Reply::Frames(rx))
        .unwrap_or_else(|_| Response::new(Reply::empty()))
}

/// Cancels a forwarded request when dropped armed: its client went away before the
/// answer. Closing the response is the cancellation in the 2026-07-28 revision; the server
/// hears it the session-based way, judged by the session like any client message.
struct Cancel {
    conversation: Arc<Conversation>,
    key: String,
    gateway_id: String,
    armed: bool,
}

impl Drop for Cancel {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        self.conversation.forget_answer(&self.key);
        let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": self.gateway_id, "reason": "the client went away"}})
        .to_string();
        let conversation = self.conversation.clone();
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _ = conversation
                    .from_client(Line::Frame(cancel.as_bytes()))
                    .await;
            });
        }
    }
}

/// A modern request made into a session-based one.
struct Translated {
    line: String,
    client_id: Value,
    client_token: Option<Value>,
    /// The client asked for log messages (`io.modelcontextprotocol/logLevel`).
    logs: bool,
    method: String,
}

fn translate(mut request: Value, gateway_id: &str) -> Translated {
    let client_id = request["id"].take();
    request["id"] = Value::String(gateway_id.to_string());
    let method = request["method"].as_str().unwrap_or_default().to_string();
    let mut client_token = None;
    let mut logs = false;
    if let Some(Value::Object(meta)) = request
        .get_mut("params")
        .and_then(|p| p.as_object_mut())
        .and_then(|p| p.get_mut("_meta"))
    {
        logs = meta.contains_key("io.modelcontextprotocol/logLevel");
        // The revision's per-request fields mean nothing to a session-based server.
        meta.retain(|k, _| !k.starts_with("io.modelcontextprotocol/"));
        if let Some(token) = meta.get_mut("progressToken") {
            client_token = Some(std::mem::replace(
                token,
                Value::String(gateway_id.to_string()),
            ));
        }
        if meta.is_empty()
            && let Some(params) = request["params"].as_object_mut()
        {
            params.remove("_meta");
        }
    }
    Translated {
        line: request.to_string(),
        client_id,
        client_token,
        logs,
        method,
    }
}

/// How a message for one modern request is put back into the client's terms.
struct Back {
    client_id: Value,
    client_token: Option<Value>,
    method: String,
    server_info: Option<Value>,
}

impl Back {
    fn map(&self, data: &[u8]) -> Option<Vec<u8>> {
        let mut message: Value = serde_json::from_slice(data).ok()?;
        if message.get("method").is_some() {
            if let (Some(token), Some(params)) = (
                &self.client_token,
                message.get_mut("params").and_then(Value::as_object_mut),
            ) && params.contains_key("progressToken")
            {
                params.insert("progressToken".into(), token.clone());
            }
        } else {
            message["id"] = self.client_id.clone();
            if let Some(result) = message.get_mut("result").and_then(Value::as_object_mut) {
                result
                    .entry("resultType")
                    .or_insert_with(|| Value::String("complete".into()));
                if CACHEABLE.contains(&self.method.as_str()) {
                    // Lists are filtered per identity: no shared cache may keep them.
                    result.entry("ttlMs").or_insert(json!(0));
                    result.insert("cacheScope".into(), json!("private"));
                }
                if let Some(info) = &self.server_info {
                    let meta = result.entry("_meta").or_insert_with(|| json!({}));
                    if let Some(meta) = meta.as_object_mut() {
                        meta.entry("io.modelcontextprotocol/serverInfo")
                            .or_insert_with(|| info.clone());
                    }
                }
            }
        }
        serde_json::to_vec(&message).ok()
    }
}

/// The conversation ended before the answer (its server died): the next request starts
/// another.
/// Hands `frame` to the conversation's session for the server. When the server has ended,
/// the answer awaited under `key` is given up and the client's reply is [`gone`].
async fn forward(
    conversation: &Conversation,
    key: &str,
    frame: &[u8],
    client_id: &Value,
) -> Result<(), Response<Reply>> {
    if conversation.from_client(Line::Frame(frame)).await.is_err() {
        conversation.forget_answer(key);
        return Err(gone(client_id));
    }
    Ok(())
}

/// Why a request of the gateway's own ([`Backends::request`]) got no result.
enum Failure {
    /// The server ended before the request reached it.
    Ended,
    /// The server ended before answering.
    Unanswered,
    TimedOut,
    NotJson,
    /// An error, or a result that is not an object.
    Refused,
}

fn gone(client_id: &Value) -> Response<Reply> {
    let body = json!({"jsonrpc": "2.0", "id": client_id, "error": {"code": -32603,
        "message": "the MCP server behind the gateway ended; retry the request"}});
    Reply::json(StatusCode::BAD_GATEWAY, body.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::modern::answer_server_request;

    #[test]
    fn a_modern_request_gets_the_gateways_id_and_token_and_they_are_put_back() {
        let request = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "echo", "arguments": {"message": "hi"},
            "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                      "io.modelcontextprotocol/clientCapabilities": {},
                      "io.modelcontextprotocol/logLevel": "info",
                      "progressToken": "p1"}}});
        let t = translate(request, "mcpwall-9");
        let sent: Value = serde_json::from_str(&t.line).unwrap();
        assert_eq!(sent["id"], "mcpwall-9");
        assert_eq!(
            sent["params"]["_meta"],
            json!({"progressToken": "mcpwall-9"})
        );
        assert!(t.logs);
        let back = Back {
            client_id: t.client_id,
            client_token: t.client_token,
            method: t.method,
            server_info: Some(json!({"name": "s", "version": "1"})),
        };
        let progress = br#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"mcpwall-9","progress":1}}"#;
        let p: Value = serde_json::from_slice(&back.map(progress).unwrap()).unwrap();
        assert_eq!(p["params"]["progressToken"], "p1");
        let answer = br#"{"jsonrpc":"2.0","id":"mcpwall-9","result":{"content":[]}}"#;
        let a: Value = serde_json::from_slice(&back.map(answer).unwrap()).unwrap();
        assert_eq!(a["id"], 1);
        assert_eq!(a["result"]["resultType"], "complete");
        assert_eq!(
            a["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
            "s"
        );
    }

    #[test]
    fn the_servers_requests_are_answered_by_the_gateway() {
        use crate::session::Route;
        let request = |id: &[u8], method: &str| Route::Request {
            id: id.into(),
            method: method.into(),
            params: None,
        };
        let sampling = request(b"5", "sampling/createMessage");
        let a: Value = serde_json::from_slice(&answer_server_request(&sampling).unwrap()).unwrap();
        assert_eq!(a["id"], 5);
        assert_eq!(a["error"]["code"], -32601);
        let ping = request(br#""x""#, "ping");
        let a: Value = serde_json::from_slice(&answer_server_request(&ping).unwrap()).unwrap();
        assert_eq!(a["id"], "x");
        assert_eq!(a["result"], json!({}));
        let notification = Route::Notification {
            method: "notifications/message".into(),
            progress: None,
            uri: None,
        };
        assert!(answer_server_request(&notification).is_none());
        assert!(answer_server_request(&Route::Answer(Some("1".into()))).is_none());
    }
}
