//! Property test: random interleavings of client and server lines through one
//! [`Session`], checked against the message contract (`src/session/mod.rs`).
//!
//! Both sides send requests, notifications (`notifications/cancelled` for an earlier
//! request of their own), responses whose ids name a request of the other side in
//! every spelling (exact, escaped, as a string, as a float, never sent, `null`),
//! batches of those, malformed lines, oversize lines (`Line::TooLarge` with a head)
//! and cut-off lines (`Line::Truncated`). Clients answer the server's requests, some
//! of those answers carrying an AWS key id that the policy denies. A model of what
//! each side has sent and what is still in flight checks, after every line:
//!
//! - I1 every line written is whole and is a well-formed JSON-RPC 2.0 message or batch
//!   (no duplicate keys, `"jsonrpc":"2.0"`, the request/notification/response shape);
//! - I2 nothing goes out that was not received from the other side (byte for byte, or
//!   with redaction markers spliced in), unless it is mcpwall's own message (an error
//!   naming a rule or `mcpwall:…`, or the `[BLOCKED BY MCPWALL]` result);
//! - I3 a response goes only to a request in flight, exactly by JSON value, and no
//!   request ever gets two responses;
//! - I4 a response that matches a request only loosely (`"2"`, `2.0` for `2`) is never
//!   forwarded, and that request gets an error carrying its own id text;
//! - I5 malformed, oversize and cut-off lines are never forwarded; one whose id is
//!   readable gets the request it answers (exactly or loosely) an error in the same
//!   step; so does a request whose exact answer is not forwarded (refused, blocked), and
//!   a request that is not forwarded is answered with an error at once;
//! - I6 the same input gives the same bytes in two fresh sessions, whether server
//!   lines are delivered in place (`Delivery::InPlace`, as the proxy writes large
//!   lines) or copied;
//! - I7 no planted secret reaches the server, and none is in a message mcpwall writes.
//!
//! The harness panics with a diagnosis: the failed invariant, the policy, and the
//! transcript (every line in, every line out, the judgements) up to the failing step.

use std::collections::{BTreeMap, HashSet};
use std::fmt::{self, Write as _};
use std::sync::Arc;

use mcpwall::config::{LoadOptions, load_str};
use mcpwall::program::Program;
use mcpwall::session::synth::BLOCK_PREFIX;
use mcpwall::session::{Delivery, Judgement, Line, Names, Options, Outbox, REDACT_MARKER, Session};
use proptest::prelude::*;
use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use serde_json::value::RawValue;

// ---- the policy -------------------------------------------------------------------

/// Always on: I7 depends on it.
const NO_SECRETS: &str = "  - name: no-secrets\n    match:\n      method: \"*\"\n      arguments:\n        _any_value: {secrets: true}\n    action: deny\n";

/// Inbound rules switched on and off per case.
const RULES: &[&str] = &[
    "  - name: deny-rm\n    match: {tool: \"rm*\"}\n    action: deny\n",
    "  - name: allow-read\n    match: {tool: \"read_*\"}\n    action: allow\n",
    "  - name: deny-roots-answers\n    match:\n      method: roots/list\n      arguments:\n        _any_value: {regex: 'etc'}\n    action: deny\n",
];

/// Outbound rules switched on and off per case.
const OUTBOUND: &[&str] = &[
    "  - name: block-fruit\n    match: {response_contains: [forbidden-fruit]}\n    action: deny\n",
    "  - name: redact-secrets\n    match: {secrets: true}\n    action: redact\n",
];

const RULE_NAMES: &[&str] = &[
    "no-secrets",
    "deny-rm",
    "allow-read",
    "deny-roots-answers",
    "block-fruit",
    "redact-secrets",
];

#[derive(Debug, Clone)]
struct PolicyChoice {
    rules: Vec<bool>,
    outbound: Vec<bool>,
    default_deny: bool,
}

impl PolicyChoice {
    fn yaml(&self) -> String {
        let mut text = String::from("version: 1\n");
        if self.default_deny {
            text.push_str("settings:\n  default_action: deny\n");
        }
        text.push_str("rules:\n");
        text.push_str(NO_SECRETS);
        for (rule, on) in RULES.iter().zip(&self.rules) {
            if *on {
                text.push_str(rule);
            }
        }
        if self.outbound.iter().any(|on| *on) {
            text.push_str("outbound_rules:\n");
            for (rule, on) in OUTBOUND.iter().zip(&self.outbound) {
                if *on {
                    text.push_str(rule);
                }
            }
        }
        text
    }

    fn program(&self) -> Arc<Program> {
        let text = self.yaml();
        let opts = LoadOptions {
            explicit: None,
            home: "/home/u".into(),
            project_dir: "/home/u/p".into(),
        };
        let policy = load_str("session_props.yml", &text, &opts)
            .unwrap_or_else(|e| panic!("the test policy does not load: {e:?}\n{text}"));
        Arc::new(Program::compile(&policy).unwrap_or_else(|e| panic!("{e:?}\n{text}")))
    }
}

// ---- what the generator produces -------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Client,
    Server,
}

impl Side {
    fn index(self) -> usize {
        self as usize
    }
    fn other(self) -> Side {
        match self {
            Side::Client => Side::Server,
            Side::Server => Side::Client,
        }
    }
    fn name(self) -> &'static str {
        match self {
            Side::Client => "client",
            Side::Server => "server",
        }
    }
}

/// The id of a new request: a fresh number (per side) written as an integer, a numeric
/// string or an alphanumeric string; or the previous request's number written the
/// other way (`2` then `"2"`: two different requests a lax reader confuses).
#[derive(Debug, Clone, Copy)]
enum IdKind {
    Int,
    StrNum,
    StrAlpha,
    Twin,
}

/// How a response writes the id of the request it answers.
#[derive(Debug, Clone, Copy)]
enum IdForm {
    Exact,
    /// A string id with its first character as `\u00XX` (the same JSON value).
    Escaped,
    /// `2` as `"2"`, `"2"` as `2`.
    AsString,
    /// `2.0`: not a valid JSON-RPC id, but a lax reader's 2.
    AsFloat,
    /// An id nobody sent.
    Unknown,
    Null,
}

#[derive(Debug, Clone)]
enum Body {
    Text,
    Secret(String),
    /// Matches the `block-fruit` outbound rule.
    Forbidden,
    /// Matches `deny-roots-answers` when it answers `roots/list`.
    Etc,
    Error,
}

#[derive(Debug, Clone, Copy)]
enum Tool {
    ReadFile,
    RmRf,
    Other,
}

#[derive(Debug, Clone)]
enum Arg {
    Tmp,
    Secret(String),
}

#[derive(Debug, Clone)]
enum Msg {
    /// Client: `tools/call`.
    Call {
        id: IdKind,
        tool: Tool,
        arg: Arg,
    },
    /// Client: `initialize`.
    Initialize(IdKind),
    /// Server: `sampling/createMessage` or `roots/list`.
    Ask {
        id: IdKind,
        roots: bool,
        text: Body,
    },
    Ping(IdKind),
    Progress,
    /// `notifications/cancelled` for this side's `back`-th latest request.
    Cancel {
        back: u8,
    },
    /// A response to the other side's `back`-th latest request.
    Answer {
        back: u8,
        form: IdForm,
        body: Body,
    },
}

#[derive(Debug, Clone, Copy)]
enum Damage {
    /// Cut after `cut` bytes (a complete line of broken JSON).
    Broken {
        cut: u8,
    },
    Version1,
    /// The body key twice (`"result"` of a response, `"jsonrpc"` otherwise).
    DupKey,
    /// A response with both `result` and `error`; a request with a `result`.
    ResultAndError,
}

#[derive(Debug, Clone)]
enum Input {
    One(Msg),
    Batch(Vec<Msg>),
    Bad(Damage, Msg),
    /// An oversize line whose first `cut` bytes are kept.
    TooLarge(Msg, u8),
    Truncated(u8),
}

#[derive(Debug, Clone)]
struct Op {
    side: Side,
    input: Input,
    /// Server lines: offer the session to keep the line in place (run A; run B flips it).
    in_place: bool,
}

fn secret() -> impl Strategy<Value = String> {
    // 16 distinct characters: a key id random enough for the detector's entropy gate.
    let alphabet: Vec<char> = ('A'..='Z').chain('2'..='7').collect();
    prop::sample::subsequence(alphabet, 16)
        .prop_shuffle()
        .prop_map(|cs| format!("AKIA{}", cs.into_iter().collect::<String>()))
}

fn id_kind() -> impl Strategy<Value = IdKind> {
    prop_oneof![
        4 => Just(IdKind::Int),
        2 => Just(IdKind::StrNum),
        1 => Just(IdKind::StrAlpha),
        2 => Just(IdKind::Twin),
    ]
}

fn id_form() -> impl Strategy<Value = IdForm> {
    prop_oneof![
        8 => Just(IdForm::Exact),
        1 => Just(IdForm::Escaped),
        2 => Just(IdForm::AsString),
        2 => Just(IdForm::AsFloat),
        1 => Just(IdForm::Unknown),
        1 => Just(IdForm::Null),
    ]
}

fn body() -> impl Strategy<Value = Body> {
    prop_oneof![
        4 => Just(Body::Text),
        2 => secret().prop_map(Body::Secret),
        1 => Just(Body::Forbidden),
        1 => Just(Body::Etc),
        2 => Just(Body::Error),
    ]
}

fn back() -> impl Strategy<Value = u8> {
    prop_oneof![4 => Just(0u8), 2 => 1u8..4]
}

fn answer() -> impl Strategy<Value = Msg> {
    (back(), id_form(), body()).prop_map(|(back, form, body)| Msg::Answer { back, form, body })
}

fn client_msg() -> BoxedStrategy<Msg> {
    let tool = prop_oneof![Just(Tool::ReadFile), Just(Tool::RmRf), Just(Tool::Other)];
    let arg = prop_oneof![3 => Just(Arg::Tmp), 1 => secret().prop_map(Arg::Secret)];
    prop_oneof![
        5 => (id_kind(), tool, arg).prop_map(|(id, tool, arg)| Msg::Call { id, tool, arg }),
        1 => id_kind().prop_map(Msg::Initialize),
        1 => id_kind().prop_map(Msg::Ping),
        1 => Just(Msg::Progress),
        1 => back().prop_map(|back| Msg::Cancel { back }),
        5 => answer(),
    ]
    .boxed()
}

fn server_msg() -> BoxedStrategy<Msg> {
    prop_oneof![
        6 => (id_kind(), any::<bool>(), body())
            .prop_map(|(id, roots, text)| Msg::Ask { id, roots, text }),
        1 => id_kind().prop_map(Msg::Ping),
        1 => Just(Msg::Progress),
        1 => back().prop_map(|back| Msg::Cancel { back }),
        8 => answer(),
    ]
    .boxed()
}

fn damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        2 => (0u8..90).prop_map(|cut| Damage::Broken { cut }),
        1 => Just(Damage::Version1),
        1 => Just(Damage::DupKey),
        1 => Just(Damage::ResultAndError),
    ]
}

fn input(msg: BoxedStrategy<Msg>) -> impl Strategy<Value = Input> {
    prop_oneof![
        10 => msg.clone().prop_map(Input::One),
        2 => prop::collection::vec(msg.clone(), 1..4).prop_map(Input::Batch),
        2 => (damage(), msg.clone()).prop_map(|(d, m)| Input::Bad(d, m)),
        1 => (msg, 10u8..90).prop_map(|(m, cut)| Input::TooLarge(m, cut)),
        1 => (1u8..100).prop_map(Input::Truncated),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (input(client_msg()), any::<bool>()).prop_map(|(input, in_place)| Op {
            side: Side::Client,
            input,
            in_place,
        }),
        (input(server_msg()), any::<bool>()).prop_map(|(input, in_place)| Op {
            side: Side::Server,
            input,
            in_place,
        }),
    ]
}

// ---- rendering ops to lines ---------------------------------------------------------

/// Every message starts like this, so where its id ends is known.
const ID_PREFIX: &str = r#"{"jsonrpc":"2.0","id":"#;
const METHOD_KEY: &str = r#""method":"#;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Request,
    Notification,
    Response,
}

/// What the model knows about one message of a line.
#[derive(Debug, Clone)]
struct Meta {
    role: Role,
    /// The id as written, and its JSON value.
    id: Option<(String, Value)>,
    /// The session can read the id (false once a cut falls before its end).
    readable: bool,
    /// A reader of the line's first bytes sees that it has a method.
    method_visible: bool,
    /// The line is broken JSON: an error with `id: null` is an acceptable refusal.
    parse_error: bool,
    /// `notifications/cancelled`: the id it cancels.
    cancels: Option<Value>,
    /// The message's own text (an element of a batch, or the whole line).
    raw: String,
    /// Byte offsets in `raw` past which the id, and the method key, can be read.
    id_end: usize,
    method_end: usize,
}

#[derive(Debug, Clone)]
enum Wire {
    Frame(String),
    TooLarge { len: usize, head: String },
    Truncated { len: usize },
}

#[derive(Debug, Clone)]
struct Step {
    side: Side,
    wire: Wire,
    /// The session should judge the line (well-formed JSON-RPC, whole).
    valid: bool,
    msgs: Vec<Meta>,
    in_place: bool,
}

#[derive(Debug, Clone)]
struct ReqId {
    text: String,
    n: u64,
    quoted: bool,
    twin: bool,
}

#[derive(Default)]
struct Renderer {
    sent: [Vec<ReqId>; 2],
    /// Per side: indices into `sent` of the requests an earlier line answered (as far
    /// as the generator knows: it does not know what the session refused).
    answered: [HashSet<usize>; 2],
    next: [u64; 2],
}

fn value(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("generated id {text} is not JSON: {e}"))
}

impl Renderer {
    fn new_id(&mut self, side: Side, kind: IdKind) -> String {
        let s = side.index();
        if let IdKind::Twin = kind
            && let Some(last) = self.sent[s].last().filter(|l| !l.twin).cloned()
        {
            let text = if last.quoted {
                last.n.to_string()
            } else {
                format!("\"{}\"", last.n)
            };
            self.sent[s].push(ReqId {
                text: text.clone(),
                n: last.n,
                quoted: !last.quoted,
                twin: true,
            });
            return text;
        }
        self.next[s] += 1;
        let n = self.next[s];
        let (text, quoted) = match kind {
            IdKind::Int | IdKind::Twin => (n.to_string(), false),
            IdKind::StrNum => (format!("\"{n}\""), true),
            IdKind::StrAlpha => (format!("\"r{n}\""), true),
        };
        self.sent[s].push(ReqId {
            text: text.clone(),
            n,
            quoted,
            twin: false,
        });
        text
    }

    fn latest(&self, side: Side, back: u8) -> Option<&ReqId> {
        let list = &self.sent[side.index()];
        list.len()
            .checked_sub(1 + usize::from(back))
            .map(|i| &list[i])
    }

    /// The request an answer names: the `back`-th latest (or else the oldest) of the
    /// other side's that no earlier line answered; with none left, the `back`-th latest
    /// (or else the oldest) of all, answered again.
    fn answer_id(&mut self, answering: Side, back: u8, form: IdForm) -> String {
        let asker = answering.other().index();
        let open: Vec<usize> = (0..self.sent[asker].len())
            .filter(|i| !self.answered[asker].contains(i))
            .collect();
        let back = usize::from(back);
        let index = match open.len() {
            0 => self.sent[asker]
                .len()
                .checked_sub(1)
                .map(|last| last.saturating_sub(back)),
            n => Some(open[(n - 1).saturating_sub(back)]),
        };
        if let Some(i) = index
            && !matches!(form, IdForm::Null | IdForm::Unknown)
        {
            self.answered[asker].insert(i);
        }
        let target = index.map(|i| &self.sent[asker][i]);
        match (form, target) {
            (IdForm::Null, _) => "null".into(),
            (_, None) => "77777".into(),
            (IdForm::Exact, Some(t)) => t.text.clone(),
            (IdForm::Escaped, Some(t)) if t.quoted => {
                let inner = &t.text[1..t.text.len() - 1];
                let c = inner.chars().next().expect("ids are not empty");
                format!("\"\\u{:04x}{}\"", c as u32, &inner[c.len_utf8()..])
            }
            (IdForm::Escaped, Some(t)) => t.text.clone(),
            (IdForm::AsString, Some(t)) if t.quoted => t.n.to_string(),
            (IdForm::AsString, Some(t)) => format!("\"{}\"", t.n),
            (IdForm::AsFloat, Some(t)) => format!("{}.0", t.n),
            (IdForm::Unknown, Some(t)) => (1000 + t.n).to_string(),
        }
    }

    /// One message's text and what the model knows about it; the second value says
    /// whether it is well-formed JSON-RPC (a float id is not).
    fn msg(&mut self, side: Side, msg: &Msg) -> (Meta, bool) {
        let request = |id: String, method: &str, params: Option<String>| {
            let mut raw = format!(r#"{ID_PREFIX}{id},{METHOD_KEY}"{method}""#);
            if let Some(p) = params {
                write!(raw, r#","params":{p}"#).unwrap();
            }
            raw.push('}');
            let id_end = ID_PREFIX.len() + id.len() + 1;
            Meta {
                role: Role::Request,
                id: Some((id.clone(), value(&id))),
                readable: true,
                method_visible: true,
                parse_error: false,
                cancels: None,
                raw,
                id_end,
                method_end: id_end + METHOD_KEY.len(),
            }
        };
        let notification = |method: &str, params: String, cancels: Option<Value>| Meta {
            role: Role::Notification,
            id: None,
            readable: false,
            method_visible: true,
            parse_error: false,
            cancels,
            raw: format!(r#"{{"jsonrpc":"2.0",{METHOD_KEY}"{method}","params":{params}}}"#),
            id_end: usize::MAX,
            method_end: 0,
        };
        match msg {
            Msg::Call { id, tool, arg } => {
                let id = self.new_id(side, *id);
                let tool = match tool {
                    Tool::ReadFile => "read_file",
                    Tool::RmRf => "rm_rf",
                    Tool::Other => "other",
                };
                let arg = match arg {
                    Arg::Tmp => "/tmp/x".to_string(),
                    Arg::Secret(s) => format!("key {s}"),
                };
                let params = format!(r#"{{"name":"{tool}","arguments":{{"path":"{arg}"}}}}"#);
                (request(id, "tools/call", Some(params)), true)
            }
            Msg::Initialize(id) => {
                let id = self.new_id(side, *id);
                let params = r#"{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"props","version":"1"}}"#;
                (request(id, "initialize", Some(params.into())), true)
            }
            Msg::Ask { id, roots, text } => {
                let id = self.new_id(side, *id);
                if *roots {
                    return (request(id, "roots/list", None), true);
                }
                let text = match text {
                    Body::Secret(s) => format!("key {s}"),
                    Body::Forbidden => "a forbidden-fruit".into(),
                    _ => "hello".into(),
                };
                let params = format!(
                    r#"{{"messages":[{{"role":"user","content":{{"type":"text","text":"{text}"}}}}],"maxTokens":10}}"#
                );
                (request(id, "sampling/createMessage", Some(params)), true)
            }
            Msg::Ping(id) => {
                let id = self.new_id(side, *id);
                (request(id, "ping", None), true)
            }
            Msg::Progress => (
                notification(
                    "notifications/progress",
                    r#"{"progressToken":"t","progress":1}"#.into(),
                    None,
                ),
                true,
            ),
            Msg::Cancel { back } => {
                let id = match self.latest(side, *back) {
                    Some(t) => t.text.clone(),
                    None => "88888".into(),
                };
                let params = format!(r#"{{"requestId":{id},"reason":"changed my mind"}}"#);
                (
                    notification("notifications/cancelled", params, Some(value(&id))),
                    true,
                )
            }
            Msg::Answer { back, form, body } => {
                let id = self.answer_id(side, *back, *form);
                let (key, content) = match body {
                    Body::Text => (
                        "result",
                        r#"{"content":[{"type":"text","text":"fine"}]}"#.to_string(),
                    ),
                    Body::Secret(s) => (
                        "result",
                        format!(r#"{{"content":[{{"type":"text","text":"key {s} here"}}]}}"#),
                    ),
                    Body::Forbidden => (
                        "result",
                        r#"{"content":[{"type":"text","text":"a forbidden-fruit"}]}"#.into(),
                    ),
                    Body::Etc => ("result", r#"{"roots":[{"uri":"file:///etc"}]}"#.into()),
                    Body::Error => ("error", r#"{"code":-32000,"message":"nope"}"#.into()),
                };
                let raw = format!(r#"{ID_PREFIX}{id},"{key}":{content}}}"#);
                let valid = !matches!(form, IdForm::AsFloat) || id == "77777" || id == "null";
                let meta = Meta {
                    role: Role::Response,
                    id: Some((id.clone(), value(&id))),
                    readable: true,
                    method_visible: false,
                    parse_error: false,
                    cancels: None,
                    raw,
                    id_end: ID_PREFIX.len() + id.len() + 1,
                    method_end: usize::MAX,
                };
                (meta, valid)
            }
        }
    }

    fn step(&mut self, op: &Op) -> Step {
        let side = op.side;
        let mut step = Step {
            side,
            wire: Wire::Truncated { len: 0 },
            valid: false,
            msgs: Vec::new(),
            in_place: op.in_place,
        };
        match &op.input {
            Input::One(msg) => {
                let (meta, valid) = self.msg(side, msg);
                step.wire = Wire::Frame(meta.raw.clone());
                step.valid = valid;
                step.msgs.push(meta);
            }
            Input::Batch(msgs) => {
                let mut valid = true;
                for m in msgs {
                    let (meta, ok) = self.msg(side, m);
                    valid &= ok;
                    step.msgs.push(meta);
                }
                let parts: Vec<&str> = step.msgs.iter().map(|m| m.raw.as_str()).collect();
                step.wire = Wire::Frame(format!("[{}]", parts.join(",")));
                step.valid = valid;
            }
            Input::Bad(d, msg) => {
                let (mut meta, _) = self.msg(side, msg);
                let text = damage_text(&meta, *d);
                if let Damage::Broken { .. } = d {
                    cut_meta(&mut meta, text.len());
                }
                meta.raw = text.clone();
                step.wire = Wire::Frame(text);
                step.msgs.push(meta);
            }
            Input::TooLarge(msg, cut) => {
                let (mut meta, _) = self.msg(side, msg);
                let keep = usize::from(*cut).min(meta.raw.len() - 1);
                let head = meta.raw[..keep].to_string();
                let len = meta.raw.len() + 100_000_000;
                cut_meta(&mut meta, keep);
                meta.raw = head.clone();
                step.wire = Wire::TooLarge { len, head };
                step.msgs.push(meta);
            }
            Input::Truncated(len) => {
                step.wire = Wire::Truncated {
                    len: usize::from(*len),
                };
            }
        }
        step
    }
}

/// What can still be read of a message cut after `keep` bytes.
fn cut_meta(meta: &mut Meta, keep: usize) {
    meta.readable &= keep >= meta.id_end;
    meta.method_visible &= keep >= meta.method_end;
    meta.parse_error = true;
}

fn damage_text(meta: &Meta, d: Damage) -> String {
    let raw = &meta.raw;
    let body = raw.strip_suffix('}').expect("messages end in }");
    let is_error = raw.contains(r#""error":"#);
    match d {
        Damage::Broken { cut } => raw[..usize::from(cut).clamp(1, raw.len() - 1)].to_string(),
        Damage::Version1 => raw.replacen(r#""jsonrpc":"2.0""#, r#""jsonrpc":"1.0""#, 1),
        Damage::DupKey => match meta.role {
            Role::Response if is_error => format!(r#"{body},"error":{{"code":1,"message":"x"}}}}"#),
            Role::Response => format!(r#"{body},"result":{{}}}}"#),
            _ => format!(r#"{body},"jsonrpc":"2.0"}}"#),
        },
        Damage::ResultAndError => match meta.role {
            Role::Response if is_error => format!(r#"{body},"result":{{}}}}"#),
            Role::Response => format!(r#"{body},"error":{{"code":1,"message":"x"}}}}"#),
            _ => format!(r#"{body},"result":{{}}}}"#),
        },
    }
}

fn render(ops: &[Op]) -> Vec<Step> {
    let mut r = Renderer::default();
    ops.iter().map(|op| r.step(op)).collect()
}

fn planted_secrets(ops: &[Op]) -> Vec<String> {
    let mut out = Vec::new();
    let mut add = |m: &Msg| match m {
        Msg::Call {
            arg: Arg::Secret(s),
            ..
        }
        | Msg::Ask {
            text: Body::Secret(s),
            ..
        }
        | Msg::Answer {
            body: Body::Secret(s),
            ..
        } => out.push(s.clone()),
        _ => {}
    };
    for op in ops {
        match &op.input {
            Input::One(m) | Input::Bad(_, m) | Input::TooLarge(m, _) => add(m),
            Input::Batch(ms) => ms.iter().for_each(&mut add),
            Input::Truncated(_) => {}
        }
    }
    out
}

// ---- running a session ----------------------------------------------------------------

/// What one step wrote.
struct Written {
    to_client: Vec<u8>,
    to_server: Vec<u8>,
    judgements: Vec<Judgement>,
}

/// Feed every step to one fresh session; `flip` inverts each server line's `in_place`.
fn run(program: &Arc<Program>, steps: &[Step], flip: bool) -> Vec<Written> {
    let mut session = Session::new(program.clone(), Options::quiet("props"));
    steps
        .iter()
        .map(|step| {
            let mut out = Outbox::recording();
            let line = match &step.wire {
                Wire::Frame(text) => Line::Frame(text.as_bytes()),
                Wire::TooLarge { len, head } => Line::TooLarge {
                    len: *len,
                    head: head.as_bytes(),
                },
                Wire::Truncated { len } => Line::Truncated { len: *len },
            };
            let mut spliced = None;
            match step.side {
                Side::Client => session.from_client(line, &mut out),
                Side::Server => {
                    let in_place = step.in_place != flip;
                    if let Delivery::InPlace(edits) = session.from_server(line, &mut out, in_place)
                    {
                        let Wire::Frame(raw) = &step.wire else {
                            panic!("InPlace delivery for {:?}", step.wire);
                        };
                        spliced = Some(splice(raw.as_bytes(), &edits));
                    }
                }
            }
            let mut to_client = std::mem::take(&mut out.to_client);
            // As the proxy's pump does: what the outbox holds is written, then the line.
            if let Some(line) = spliced {
                to_client.extend_from_slice(&line);
                to_client.push(b'\n');
            }
            Written {
                to_client,
                to_server: out.to_server,
                judgements: out.judgements.unwrap_or_default(),
            }
        })
        .collect()
}

fn splice(raw: &[u8], edits: &[(std::ops::Range<usize>, Vec<u8>)]) -> Vec<u8> {
    let mut out = Vec::with_capacity(raw.len());
    let mut at = 0;
    for (range, text) in edits {
        assert!(
            at <= range.start && range.start <= range.end && range.end <= raw.len(),
            "in-place edits out of order or out of bounds: {edits:?} on {}",
            String::from_utf8_lossy(raw)
        );
        out.extend_from_slice(&raw[at..range.start]);
        out.extend_from_slice(text);
        at = range.end;
    }
    out.extend_from_slice(&raw[at..]);
    out
}

// ---- reading what was written ---------------------------------------------------------

/// A JSON value read with duplicate keys refused (serde_json keeps the last one).
struct Strict(Value);

impl<'de> Deserialize<'de> for Strict {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Strict, D::Error> {
        d.deserialize_any(StrictVisitor).map(Strict)
    }
}

struct StrictVisitor;

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(v.into())
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(v.into())
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(v.into())
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.into()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(Strict(v)) = seq.next_element()? {
            items.push(v);
        }
        Ok(Value::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = serde_json::Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let Strict(v) = map.next_value()?;
            if object.insert(key.clone(), v).is_some() {
                return Err(de::Error::custom(format!("duplicate key {key:?}")));
            }
        }
        Ok(Value::Object(object))
    }
}

/// One message as written to a side: its text, value and id text.
#[derive(Debug, Clone)]
struct Out {
    raw: String,
    value: Value,
    id_text: Option<String>,
}

impl Out {
    fn is_response(&self) -> bool {
        self.value.get("method").is_none()
    }
    fn is_error_with_id(&self, text: &str) -> bool {
        self.value.get("error").is_some() && self.id_text.as_deref() == Some(text)
    }
}

/// I1: split one side's output into whole lines of well-formed JSON-RPC, and those into
/// messages.
fn read_output(bytes: &[u8]) -> Result<Vec<Out>, String> {
    if bytes.is_empty() {
        return Ok(Vec::new());
    }
    let Some(body) = bytes.strip_suffix(b"\n") else {
        return Err("the output does not end with a newline (a partial line)".into());
    };
    let mut outs = Vec::new();
    for (n, line) in body.split(|&b| b == b'\n').enumerate() {
        let text = std::str::from_utf8(line).map_err(|e| format!("line {n} is not UTF-8: {e}"))?;
        if text.is_empty() {
            return Err(format!("line {n} is empty"));
        }
        let Strict(v) = serde_json::from_str::<Strict>(text)
            .map_err(|e| format!("line {n} is not strict JSON ({e}): {text}"))?;
        shape(&v).map_err(|e| format!("line {n} is not JSON-RPC 2.0 ({e}): {text}"))?;
        let pieces: Vec<String> = if text.starts_with('[') {
            let items: Vec<&RawValue> = serde_json::from_str(text).expect("checked above");
            items.iter().map(|r| r.get().to_string()).collect()
        } else {
            vec![text.to_string()]
        };
        for raw in pieces {
            let members: BTreeMap<String, Box<RawValue>> =
                serde_json::from_str(&raw).expect("checked above");
            outs.push(Out {
                value: serde_json::from_str(&raw).expect("checked above"),
                id_text: members.get("id").map(|r| r.get().to_string()),
                raw,
            });
        }
    }
    Ok(outs)
}

fn shape(v: &Value) -> Result<(), String> {
    match v {
        Value::Array(items) if items.is_empty() => Err("empty batch".into()),
        Value::Array(items) => items.iter().try_for_each(message_shape),
        _ => message_shape(v),
    }
}

fn message_shape(v: &Value) -> Result<(), String> {
    let o = v.as_object().ok_or("not an object")?;
    if o.get("jsonrpc") != Some(&Value::from("2.0")) {
        return Err("jsonrpc is not \"2.0\"".into());
    }
    // JSON-RPC 2.0 allows any number (fractions "SHOULD NOT" be used): mcpwall echoes a
    // peer's `1.0` in a refusal. That such an id is never forwarded is I4's business.
    let id_ok = |id: &Value, null: bool| match id {
        Value::String(_) | Value::Number(_) => true,
        Value::Null => null,
        _ => false,
    };
    if let Some(m) = o.get("method") {
        if m.as_str().is_none_or(str::is_empty) {
            return Err("method is not a non-empty string".into());
        }
        if o.contains_key("result") || o.contains_key("error") {
            return Err("a request with result or error".into());
        }
        if o.get("id").is_some_and(|id| !id_ok(id, false)) {
            return Err("bad request id".into());
        }
        if o.get("params")
            .is_some_and(|p| !p.is_object() && !p.is_array())
        {
            return Err("params is not an object or array".into());
        }
        return Ok(());
    }
    let id = o.get("id").ok_or("a response without an id")?;
    match (o.get("result"), o.get("error")) {
        (Some(_), Some(_)) => return Err("both result and error".into()),
        (None, None) => return Err("neither method, result nor error".into()),
        (None, Some(e)) => {
            if !e.get("code").is_some_and(|c| c.is_i64())
                || !e.get("message").is_some_and(Value::is_string)
            {
                return Err("error without an integer code and a string message".into());
            }
        }
        (Some(_), None) => {}
    }
    if o.contains_key("params") {
        return Err("a response with params".into());
    }
    if !id_ok(id, o.contains_key("error")) {
        return Err("bad response id".into());
    }
    Ok(())
}

/// I2: one of mcpwall's own messages, and which.
fn own_message(v: &Value) -> Option<&'static str> {
    if let Some(rule) = v.pointer("/error/data/rule").and_then(Value::as_str)
        && (rule.starts_with("mcpwall:") || RULE_NAMES.contains(&rule))
    {
        return Some("error");
    }
    if v.pointer("/result/content/0/text")
        .and_then(Value::as_str)
        .is_some_and(|t| t.starts_with(BLOCK_PREFIX))
        && v.pointer("/result/isError") == Some(&Value::Bool(true))
    {
        return Some("block");
    }
    None
}

/// `out` is `input` with one or more stretches replaced by the redaction marker.
fn redacted_from(out: &str, input: &str) -> bool {
    let pieces: Vec<&str> = out.split(REDACT_MARKER).collect();
    let (Some(first), Some(last)) = (pieces.first(), pieces.last()) else {
        return false;
    };
    if pieces.len() < 2
        || input.len() < first.len() + last.len()
        || !input.starts_with(first)
        || !input.ends_with(last)
    {
        return false;
    }
    let end = input.len() - last.len();
    let mut at = first.len();
    for p in &pieces[1..pieces.len() - 1] {
        match input.get(at..end).and_then(|rest| rest.find(p)) {
            Some(k) => at += k + p.len(),
            None => return false,
        }
    }
    at <= end
}

fn strings(v: &Value, f: &mut impl FnMut(&str)) {
    match v {
        Value::String(s) => f(s),
        Value::Array(items) => items.iter().for_each(|i| strings(i, f)),
        Value::Object(map) => {
            for (k, v) in map {
                f(k);
                strings(v, f);
            }
        }
        _ => {}
    }
}

// ---- the model ----------------------------------------------------------------------

/// A request one side sent that the session forwarded and that has had no response.
#[derive(Debug, Clone)]
struct InFlight {
    id: Value,
    text: String,
    /// Order of forwarding (the oldest wins a loose match).
    seq: usize,
    step: usize,
    /// The client cancelled it (the session forgets it; one late answer is still fine).
    cancelled: bool,
}

#[derive(Debug, Clone)]
struct Answered {
    id: Value,
    step: usize,
    by: String,
}

#[derive(Default)]
struct Model {
    /// Per side: its requests in flight.
    pending: [Vec<InFlight>; 2],
    /// Per side: its requests that got their response.
    answered: [Vec<Answered>; 2],
    seq: usize,
}

/// The number a lax SDK reads an id as (`Number(id)`), for the ids generated here.
fn lax_number(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => match s.trim() {
            "" => Some(0.0),
            t => t.parse::<f64>().ok().filter(|x| x.is_finite()),
        },
        _ => None,
    }
}

impl Model {
    /// The live request a response with id `v` reaches in the session: exact, or else the
    /// oldest loose match. `taken` holds requests consumed earlier in the same line.
    fn find(&self, side: Side, v: &Value, taken: &HashSet<usize>) -> Option<(&InFlight, bool)> {
        let live = || {
            self.pending[side.index()]
                .iter()
                .filter(|q| !q.cancelled && !taken.contains(&q.seq))
        };
        if let Some(q) = live().find(|q| q.id == *v) {
            return Some((q, true));
        }
        let n = lax_number(v)?;
        live()
            .filter(|q| lax_number(&q.id) == Some(n))
            .min_by_key(|q| q.seq)
            .map(|q| (q, false))
    }

    fn describe(&self) -> String {
        let mut s = String::new();
        for side in [Side::Client, Side::Server] {
            let list: Vec<String> = self.pending[side.index()]
                .iter()
                .map(|q| {
                    format!(
                        "{}{} (step {})",
                        q.text,
                        if q.cancelled { " cancelled" } else { "" },
                        q.step
                    )
                })
                .collect();
            writeln!(
                s,
                "  {} requests in flight: [{}]",
                side.name(),
                list.join(", ")
            )
            .unwrap();
        }
        s
    }
}

/// Something the step must have written.
#[derive(Debug)]
struct Expect {
    to: Side,
    id_text: String,
    /// `id: null` is accepted too (a refusal of broken JSON).
    or_null: bool,
    /// Any response of mcpwall's will do (the block result too), not only an error.
    any: bool,
    why: String,
}

/// Where an output message came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    /// Message `i` of the step's line, as received or redacted.
    Forwarded(usize),
    Own,
}

struct Checker<'a> {
    choice: &'a PolicyChoice,
    program: &'a Program,
    steps: &'a [Step],
    runs: &'a [Written],
    secrets: &'a [String],
    model: Model,
}

impl Checker<'_> {
    fn fail(&self, k: usize, invariant: &str, what: String) -> ! {
        let mut s = String::new();
        writeln!(s, "\n{invariant} violated at step {k}: {what}\n").unwrap();
        writeln!(s, "policy:\n{}", self.choice.yaml()).unwrap();
        writeln!(s, "model at the failure:\n{}", self.model.describe()).unwrap();
        writeln!(s, "transcript:").unwrap();
        for (i, (step, w)) in self.steps.iter().zip(self.runs).enumerate().take(k + 1) {
            let line = match &step.wire {
                Wire::Frame(t) => t.clone(),
                Wire::TooLarge { len, head } => format!("TooLarge {{ len: {len}, head: {head} }}"),
                Wire::Truncated { len } => format!("Truncated {{ len: {len} }}"),
            };
            let place = if step.side == Side::Server && step.in_place {
                " (in place)"
            } else {
                ""
            };
            writeln!(s, "#{i} {}{place} -> {line}", step.side.name()).unwrap();
            for (to, bytes) in [("client", &w.to_client), ("server", &w.to_server)] {
                for l in String::from_utf8_lossy(bytes).lines() {
                    writeln!(s, "     to {to}: {l}").unwrap();
                }
            }
            for j in &w.judgements {
                let rule = j
                    .event
                    .rule
                    .map(|r| Names::rule(self.program, r).0.to_string());
                writeln!(
                    s,
                    "     judged {:?} {}: {:?} {}",
                    j.from,
                    j.event
                        .id
                        .as_ref()
                        .map(|i| format!("{i:?}"))
                        .unwrap_or_default(),
                    j.event.action,
                    rule.unwrap_or_default()
                )
                .unwrap();
            }
        }
        panic!("{s}");
    }

    fn check(mut self, other: &[Written]) {
        for k in 0..self.steps.len() {
            self.check_step(k, other);
        }
    }

    fn check_step(&mut self, k: usize, other: &[Written]) {
        let (steps, runs) = (self.steps, self.runs);
        let step = &steps[k];
        let w = &runs[k];
        let (s, r) = (step.side, step.side.other());

        // I6: the same bytes from a second session, the in-place offers flipped.
        for (to, a, b) in [
            ("client", &w.to_client, &other[k].to_client),
            ("server", &w.to_server, &other[k].to_server),
        ] {
            if a != b {
                self.fail(
                    k,
                    "I6 (determinism)",
                    format!(
                        "the second session wrote to the {to}:\n  {}\ninstead of\n  {}",
                        String::from_utf8_lossy(b),
                        String::from_utf8_lossy(a)
                    ),
                );
            }
        }

        // I1: whole lines of well-formed JSON-RPC.
        let mut outs: [Vec<Out>; 2] = Default::default();
        for (side, bytes) in [(Side::Client, &w.to_client), (Side::Server, &w.to_server)] {
            match read_output(bytes) {
                Ok(o) => outs[side.index()] = o,
                Err(e) => self.fail(
                    k,
                    "I1 (well-formed output)",
                    format!("to the {}: {e}", side.name()),
                ),
            }
        }

        // I2: where each message came from.
        let line_raw = match &step.wire {
            Wire::Frame(t) => Some(t.as_str()),
            _ => None,
        };
        let mut sources: [Vec<Source>; 2] = Default::default();
        for to in [Side::Client, Side::Server] {
            let mut next = 0;
            for o in &outs[to.index()] {
                let mut source = None;
                if to == r && step.valid {
                    for i in next..step.msgs.len() {
                        let input = &step.msgs[i].raw;
                        if o.raw == *input || (s == Side::Server && redacted_from(&o.raw, input)) {
                            source = Some(Source::Forwarded(i));
                            next = i + 1;
                            break;
                        }
                    }
                }
                let source = match source {
                    Some(src) => src,
                    None => match own_message(&o.value) {
                        Some("block") if to == Side::Server => self.fail(
                            k,
                            "I2 (only what was received)",
                            format!("a block result went to the server: {}", o.raw),
                        ),
                        Some(_) => Source::Own,
                        None if line_raw.is_some_and(|l| l.contains(&o.raw)) && !step.valid => self.fail(
                            k,
                            "I5 (malformed lines are not forwarded)",
                            format!("the {} got a message of a malformed line: {}", to.name(), o.raw),
                        ),
                        None if to == s && line_raw.is_some_and(|l| l.contains(&o.raw)) => self.fail(
                            k,
                            "I2 (only what was received)",
                            format!("the {} got its own message back: {}", to.name(), o.raw),
                        ),
                        None => self.fail(
                            k,
                            "I2 (only what was received)",
                            format!(
                                "the {} got a message the {} did not send and mcpwall did not write: {}",
                                to.name(),
                                to.other().name(),
                                o.raw
                            ),
                        ),
                    },
                };
                sources[to.index()].push(source);
            }
        }

        // I2: a client line goes to the server whole and as it came, or not at all.
        if s == Side::Client
            && sources[r.index()]
                .iter()
                .any(|x| matches!(x, Source::Forwarded(_)))
        {
            let whole = format!("{}\n", line_raw.unwrap_or_default());
            if !String::from_utf8_lossy(&w.to_server)
                .split_inclusive('\n')
                .any(|l| l == whole)
            {
                self.fail(
                    k,
                    "I2 (only what was received)",
                    "a client line went to the server in part or changed".into(),
                );
            }
        }

        // I7: no planted secret reaches the server, or is in a message of mcpwall's.
        for to in [Side::Client, Side::Server] {
            for (o, src) in outs[to.index()].iter().zip(&sources[to.index()]) {
                if to == Side::Client && *src != Source::Own {
                    continue;
                }
                let mut found = None;
                strings(&o.value, &mut |t| {
                    if let Some(secret) = self.secrets.iter().find(|x| t.contains(x.as_str())) {
                        found = Some(secret.clone());
                    }
                });
                if let Some(secret) = found {
                    self.fail(
                        k,
                        "I7 (no secret reaches the server)",
                        format!("{secret} is in a message to the {}: {}", to.name(), o.raw),
                    );
                }
            }
        }

        // What the model predicts from the line alone (I4, I5), against the requests in
        // flight before it; then it is brought up to date (I3).
        let mut expects = Vec::new();
        let mut not_forwarded = Vec::new();
        let mut exact = Vec::new();
        let mut taken = HashSet::new();
        for (i, m) in step.msgs.iter().enumerate() {
            let Some((text, v)) = &m.id else { continue };
            match m.role {
                Role::Response if step.valid => match self.model.find(r, v, &taken) {
                    Some((q, true)) => {
                        taken.insert(q.seq);
                        exact.push((i, q.text.clone()));
                    }
                    Some((q, false)) => {
                        taken.insert(q.seq);
                        not_forwarded.push((
                            i,
                            format!("I4 (id {text} matches request {} only loosely)", q.text),
                        ));
                        expects.push(Expect {
                            to: r,
                            id_text: q.text.clone(),
                            or_null: false,
                            any: false,
                            why: format!(
                                "I4 (the {} answered its request {} with id {text})",
                                s.name(),
                                q.text
                            ),
                        });
                    }
                    None => not_forwarded
                        .push((i, format!("I3 (id {text} matches no request in flight)"))),
                },
                Role::Response if m.readable && !v.is_null() => {
                    if let Some((q, exact)) = self.model.find(r, v, &taken) {
                        taken.insert(q.seq);
                        expects.push(Expect {
                            to: r,
                            id_text: q.text.clone(),
                            or_null: false,
                            any: false,
                            why: format!(
                                "I5 (the {}'s malformed or oversize answer with id {text} {} its request {})",
                                s.name(),
                                if exact { "answers" } else { "loosely matches" },
                                q.text
                            ),
                        });
                    }
                }
                Role::Request if !step.valid && m.readable && m.method_visible => {
                    expects.push(Expect {
                        to: s,
                        id_text: text.clone(),
                        or_null: m.parse_error,
                        any: false,
                        why: format!(
                            "I5 (the {}'s malformed or oversize request {text} is refused at once)",
                            s.name()
                        ),
                    })
                }
                _ => {}
            }
        }
        for (i, why) in not_forwarded {
            if sources[r.index()].contains(&Source::Forwarded(i)) {
                self.fail(k, &why, format!("{} was forwarded", step.msgs[i].raw));
            }
        }
        for (i, text) in exact {
            if !sources[r.index()].contains(&Source::Forwarded(i)) {
                expects.push(Expect {
                    to: r,
                    id_text: text.clone(),
                    or_null: false,
                    any: true,
                    why: format!(
                        "I5 (the {}'s answer to request {text} was not forwarded: the request gets an error)",
                        s.name()
                    ),
                });
            }
        }
        if step.valid {
            for (i, m) in step.msgs.iter().enumerate() {
                if m.role == Role::Request && !sources[r.index()].contains(&Source::Forwarded(i)) {
                    let (text, _) = m.id.as_ref().expect("requests have ids");
                    expects.push(Expect {
                        to: s,
                        id_text: text.clone(),
                        or_null: false,
                        any: false,
                        why: format!(
                            "I5 (the {}'s request {text} was not forwarded: it gets an error)",
                            s.name()
                        ),
                    });
                }
            }
        }
        for e in &expects {
            let found = outs[e.to.index()].iter().zip(&sources[e.to.index()]).any(|(o, src)| {
                *src == Source::Own
                    && (o.is_error_with_id(&e.id_text)
                        // A block result carries the response's id: the same value.
                        || (e.any && o.is_response() && o.value.get("id") == Some(&value(&e.id_text)))
                        || (e.or_null && o.is_error_with_id("null")))
            });
            if !found {
                self.fail(
                    k,
                    &e.why,
                    format!(
                        "no error with id {} was written to the {}",
                        e.id_text,
                        e.to.name()
                    ),
                );
            }
        }

        // I3: forwarded messages first (a request goes in flight), then mcpwall's own.
        let mut refusable: Vec<Value> = step
            .msgs
            .iter()
            .filter(|m| m.role == Role::Request && m.readable)
            .filter_map(|m| m.id.as_ref().map(|(_, v)| v.clone()))
            .collect();
        for pass in [false, true] {
            for to in [r, s] {
                for (o, src) in outs[to.index()].iter().zip(&sources[to.index()]) {
                    if (*src == Source::Own) != pass {
                        continue;
                    }
                    if let Source::Forwarded(i) = src {
                        let m = &step.msgs[*i];
                        match m.role {
                            Role::Request => {
                                let (text, v) = m.id.clone().expect("requests have ids");
                                self.model.seq += 1;
                                self.model.pending[s.index()].push(InFlight {
                                    id: v,
                                    text,
                                    seq: self.model.seq,
                                    step: k,
                                    cancelled: false,
                                });
                                // Forwarded: not to be refused as well.
                                if let Some(p) = refusable
                                    .iter()
                                    .position(|x| Some(x) == m.id.as_ref().map(|(_, v)| v))
                                {
                                    refusable.remove(p);
                                }
                                continue;
                            }
                            Role::Notification => {
                                if s == Side::Client
                                    && let Some(c) = &m.cancels
                                {
                                    for q in &mut self.model.pending[s.index()] {
                                        if q.id == *c {
                                            q.cancelled = true;
                                        }
                                    }
                                }
                                continue;
                            }
                            Role::Response => {}
                        }
                    }
                    if !o.is_response() {
                        continue;
                    }
                    self.account(k, to, o, *src, &mut refusable);
                }
            }
        }
    }

    /// A response written to `to`: it answers one of `to`'s requests in flight, or
    /// refuses a request of this step's line, or has `id: null` (mcpwall's only).
    fn account(&mut self, k: usize, to: Side, o: &Out, src: Source, refusable: &mut Vec<Value>) {
        let id = o.value.get("id").cloned().unwrap_or(Value::Null);
        let step = &self.steps[k];
        if src == Source::Own {
            if id.is_null() {
                return;
            }
            if to == step.side
                && let Some(p) = refusable.iter().position(|x| *x == id)
            {
                refusable.remove(p);
                return;
            }
        }
        let pending = &mut self.model.pending[to.index()];
        if let Some(p) = pending.iter().position(|q| q.id == id) {
            let q = pending.remove(p);
            self.model.answered[to.index()].push(Answered {
                id: q.id,
                step: k,
                by: o.raw.clone(),
            });
            return;
        }
        let how = if src == Source::Own {
            "mcpwall wrote"
        } else {
            "the session forwarded"
        };
        if let Some(a) = self.model.answered[to.index()].iter().find(|a| a.id == id) {
            self.fail(
                k,
                "I3 (no request gets two responses)",
                format!(
                    "{how} to the {} a second response for its request {id}: {}\n  it was answered at step {} by {}",
                    to.name(),
                    o.raw,
                    a.step,
                    a.by
                ),
            );
        }
        self.fail(
            k,
            "I3 (responses go only to requests in flight)",
            format!(
                "{how} to the {} a response with id {id}, which names none of its requests in flight: {}",
                to.name(),
                o.raw
            ),
        );
    }
}

fn check_ops(choice: &PolicyChoice, ops: &[Op]) {
    let program = choice.program();
    let steps = render(ops);
    let a = run(&program, &steps, false);
    let b = run(&program, &steps, true);
    let secrets = planted_secrets(ops);
    let checker = Checker {
        choice,
        program: &program,
        steps: &steps,
        runs: &a,
        secrets: &secrets,
        model: Model::default(),
    };
    checker.check(&b);
}

fn policy_choice() -> impl Strategy<Value = PolicyChoice> {
    (
        prop::collection::vec(any::<bool>(), RULES.len()),
        prop::collection::vec(any::<bool>(), OUTBOUND.len()),
        any::<bool>(),
    )
        .prop_map(|(rules, outbound, default_deny)| PolicyChoice {
            rules,
            outbound,
            default_deny,
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn session_keeps_the_message_contract(
        choice in policy_choice(),
        ops in prop::collection::vec(op(), 1..24),
    ) {
        check_ops(&choice, &ops);
    }
}

// ---- the minimal reproducers of what this test found, replayed ------------------------

fn no_rules() -> PolicyChoice {
    PolicyChoice {
        rules: vec![false; RULES.len()],
        outbound: vec![false; OUTBOUND.len()],
        default_deny: false,
    }
}

fn ask(text: Body) -> Op {
    Op {
        side: Side::Server,
        input: Input::One(Msg::Ask {
            id: IdKind::Int,
            roots: false,
            text,
        }),
        in_place: false,
    }
}

fn client(input: Input) -> Op {
    Op {
        side: Side::Client,
        input,
        in_place: false,
    }
}

fn answer_as(form: IdForm) -> Msg {
    Msg::Answer {
        back: 0,
        form,
        body: Body::Text,
    }
}

/// The client answers the server's request 1 with id 1.0: the client got an error with
/// id 1.0, the server nothing (fixed in `refuse_malformed`).
#[test]
fn replay_malformed_client_answer() {
    let ops = [
        ask(Body::Text),
        client(Input::One(answer_as(IdForm::AsFloat))),
    ];
    check_ops(&no_rules(), &ops);
}

/// The same in a batch: a refused batch told no one but its first bad member's id.
#[test]
fn replay_malformed_client_batch() {
    let ops = [
        ask(Body::Text),
        client(Input::Batch(vec![answer_as(IdForm::AsFloat)])),
    ];
    check_ops(&no_rules(), &ops);
}

/// `[{"id":"2",…},{"id":1,…}]` for the server's 1 and 2: the batch is refused for the
/// mismatched "2", and 1, answered exactly, was forgotten without an error.
#[test]
fn replay_refused_batch_with_an_exact_answer() {
    let ops = [
        ask(Body::Text),
        ask(Body::Text),
        client(Input::Batch(vec![
            answer_as(IdForm::AsString),
            Msg::Answer {
                back: 0,
                form: IdForm::Exact,
                body: Body::Forbidden,
            },
        ])),
    ];
    check_ops(&no_rules(), &ops);
}

/// A server batch with one 2.0 id: the client's requests it answered waited forever.
#[test]
fn replay_malformed_server_batch() {
    let call = |id| {
        client(Input::One(Msg::Call {
            id,
            tool: Tool::ReadFile,
            arg: Arg::Tmp,
        }))
    };
    let ops = [
        call(IdKind::Int),
        call(IdKind::Int),
        Op {
            side: Side::Server,
            input: Input::Batch(vec![
                Msg::Answer {
                    back: 1,
                    form: IdForm::Exact,
                    body: Body::Text,
                },
                answer_as(IdForm::AsFloat),
            ]),
            in_place: false,
        },
    ];
    check_ops(&no_rules(), &ops);
}
