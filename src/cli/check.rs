//! `mcpwall check`: judge JSON-RPC frames against the policy, without a server.
//!
//! Input (stdin, or each `--input JSON`): one frame, a batch (a JSON array), or JSONL (one
//! frame per line; blank lines are skipped, a trailing `\r` is dropped). A single frame
//! pretty-printed over several lines is accepted too: when the lines do not parse one by
//! one but the whole text does as one frame, it is judged as one.
//!
//! Every message gets one verdict, printed in input order. A malformed line is reported
//! with its reason and checking goes on, so one run shows every problem; the exit code is
//! then 2. Otherwise the exit code is 1 when anything was denied, redacted, blocked or held
//! for approval (`ASK`: an `ask` rule matched; nobody is asked here), and 0 when
//! everything was allowed.
//!
//! Direction (`--direction auto`): requests and notifications are client messages judged by
//! the inbound rules, except the methods only a server sends (`sampling/createMessage`,
//! `elicitation/create`, `roots/list`, `notifications/message`, the `list_changed` and
//! `resources/updated` notifications); results and errors are server messages judged by the
//! outbound rules. A result answers the request with the same id earlier in the input, which
//! gives it its method and tool; `--tool` and `--server` set them explicitly. A result whose
//! id matches a server request earlier in the input is the client's answer to it, judged by
//! the inbound rules as a message of that request's method.
//!
//! Every message goes through the same [`Session`] the proxy uses, with the messages
//! before it: what `check` reports is what the proxy would do (the rate limit included; the
//! tool guard is left out, since it records tool pins). A response without its request is
//! judged as the answer to one (of `--tool`, if given). `--format forwarded` reads the
//! input as a transcript instead and assumes nothing: it prints, for each input line, the
//! frames the proxy would write to the server and to the client, so a response that answers
//! no request earlier in the input is dropped there as the proxy would drop it.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use serde::Serialize;

use crate::config;
use crate::config::policy::LogLevel;
use crate::config::policy::{Policy, Span};
use crate::frame::{Frame, Limits, Message, MessageKind, Parsed};
use crate::program::Program;
use crate::secrets::{DetectorCache, Finding};
use crate::session::preview;
use crate::session::{self, Judgement, Line, Outbox, Peer, RuleRef, Session, Verdict};
use crate::verdict::RuleId;

/// Arguments of `mcpwall check`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Use exactly this policy file (plus what it extends). Without it: the project's
    /// `.mcpwall.yml` and `~/.mcpwall/config.yml`, or the built-in default pack.
    #[arg(short = 'c', long = "config", value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Judge this JSON instead of stdin: one frame, a batch, or JSONL. Repeatable.
    #[arg(long = "input", value_name = "JSON")]
    pub input: Vec<String>,
    /// Output: `text` for people, `json` for one JSON verdict per message, `forwarded`
    /// for the frames the proxy would write to each side (a transcript: see `--help`).
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Which rules judge each message: `auto` decides by message kind (see `--help`).
    #[arg(long, value_enum, default_value_t = Direction::Auto)]
    pub direction: Direction,
    /// Tool that judged server messages answer (overrides what the input's requests say).
    #[arg(long, value_name = "NAME")]
    pub tool: Option<String>,
    /// Server name for outbound `server:` conditions; a `servers:` entry of that name also brings its own `extends` packs, as under `mcpwall serve`.
    #[arg(long, value_name = "NAME", default_value = "")]
    pub server: String,
}

/// Output format of `check`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Text,
    Json,
    /// One JSON object per frame the proxy would write: `{"line","to","frame"}`.
    Forwarded,
}

/// Which rules judge a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Direction {
    /// By message kind: client requests inbound, results and server-only methods outbound.
    Auto,
    /// Everything is a client message (inbound rules).
    Inbound,
    /// Everything is a server message (outbound rules).
    Outbound,
}

/// Methods only a server sends; `auto` judges them with the outbound rules.
const SERVER_METHODS: &[&str] = &[
    "sampling/createMessage",
    "elicitation/create",
    "roots/list",
    "notifications/message",
    "notifications/resources/updated",
    "notifications/resources/list_changed",
    "notifications/tools/list_changed",
    "notifications/prompts/list_changed",
];

pub fn run(args: Args) -> miette::Result<ExitCode> {
    let opts = crate::cli::common::load_options(args.config.clone())?;
    let policy = config::load(&opts)?;
    // Judged as `serve` judges that server: with the packs of its entry.
    let policy = match policy
        .servers
        .iter()
        .find(|s| s.name.value == args.server)
        .and_then(|s| s.policy.clone())
    {
        Some(own) => Policy::clone(&own),
        None => policy,
    };
    let env = opts.path_env();
    let program = Arc::new(Program::compile_with(&policy, &env)?);
    // What the proxy says at start-up about this policy, said here too (on stderr, so the
    // verdicts on stdout stay as they are).
    for ignored in &policy.ignored {
        eprintln!(
            "mcpwall: warning: {} at {} is ignored: {}",
            ignored.what,
            policy.location(ignored.span),
            ignored.why
        );
    }
    for warning in crate::compile::shadow::order_warnings(&policy, &env) {
        eprintln!("mcpwall: warning: {warning}");
    }

    let texts = if args.input.is_empty() {
        let mut buf = Vec::new();
        std::io::stdin()
            .lock()
            .read_to_end(&mut buf)
            .map_err(|e| miette::miette!("cannot read stdin: {e}"))?;
        // Nothing judged is not "everything allowed": exit 0 here would pass a CI step
        // whose frames never arrived.
        if buf.iter().all(u8::is_ascii_whitespace) {
            return Err(miette::miette!(
                help =
                    "pipe JSON-RPC frames in (one frame, a batch, or JSONL), or pass --input JSON",
                "read nothing on stdin: there is no frame to judge"
            ));
        }
        vec![buf]
    } else {
        args.input.iter().map(|s| s.clone().into_bytes()).collect()
    };

    let stdout = std::io::stdout();
    let colour = super::common::colour_stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let mut checker = Checker::new(&policy, &program, &args, colour);
    let written = (|| -> std::io::Result<()> {
        let mut line_no = 0;
        for text in &texts {
            for frame in split_frames(text, &mut line_no) {
                checker.judge(&frame, &mut out)?;
            }
        }
        out.flush()
    })();
    match written {
        Ok(()) => {}
        // Someone stopped reading (`| head`): nothing left to say, and no one to say it to.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(ExitCode::SUCCESS),
        Err(e) => return Err(miette::miette!("cannot write the verdicts: {e}")),
    }
    Ok(ExitCode::from(checker.exit_code()))
}

/// `file:line` of a span.
pub(crate) fn source_line(policy: &Policy, span: Span) -> String {
    format!("{}:{}", policy.source(span.source).name, span.line)
}

/// One unit of input: a frame to parse, or the line number and the bytes.
struct InputFrame {
    line: usize,
    bytes: Vec<u8>,
}

/// Split one input text into frames (see the module docs). `line_no` counts across texts.
fn split_frames(text: &[u8], line_no: &mut usize) -> Vec<InputFrame> {
    let first_line = *line_no + 1;
    let mut frames = Vec::new();
    for line in text.split(|&b| b == b'\n') {
        *line_no += 1;
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        frames.push(InputFrame {
            line: *line_no,
            bytes: line.to_vec(),
        });
    }
    // A pretty-printed frame: newlines only ever sit between JSON tokens (a JSON string
    // cannot hold a raw newline), so joining the lines with spaces loses nothing.
    if frames.len() > 1 {
        let mut parsed = Parsed::new();
        let lines_parse = frames
            .iter()
            .all(|f| parsed.parse(&f.bytes, &Limits::default()).is_ok());
        if !lines_parse {
            let joined: Vec<u8> = text
                .iter()
                .map(|&b| if b == b'\n' || b == b'\r' { b' ' } else { b })
                .collect();
            let trimmed = joined.trim_ascii();
            if parsed.parse(trimmed, &Limits::default()).is_ok() {
                return vec![InputFrame {
                    line: first_line,
                    bytes: trimmed.to_vec(),
                }];
            }
        }
    }
    frames
}

/// Judges frames one by one through a [`Session`], and remembers what the exit code
/// must be.
struct Checker<'p> {
    policy: &'p Policy,
    program: &'p Program,
    args: &'p Args,
    colour: bool,
    session: Session,
    /// The input parsed again for what is shown (the argument a call is about, the
    /// secrets masked): the session has judged it already.
    shown: Parsed,
    detector_cache: DetectorCache,
    findings: Vec<Finding>,
    any_error: bool,
    any_refused: bool,
    /// Who sent the line before (for a line that does not say).
    last_sender: Peer,
}

/// The machine-readable verdict on one message (`--format json`).
#[derive(Debug, Serialize)]
struct JsonVerdict<'a> {
    verdict: &'static str,
    direction: &'static str,
    line: usize,
    method: Option<&'a str>,
    tool: Option<&'a str>,
    id: Option<serde_json::Value>,
    rule: Option<&'a str>,
    message: Option<&'a str>,
    source: Option<String>,
    redactions: Vec<JsonRedaction<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    logged: Vec<&'a str>,
    /// How a shell command in the arguments was understood, when a `command` matcher
    /// decided.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    commands: Vec<JsonCommand<'a>>,
}

#[derive(Debug, Serialize)]
struct JsonCommand<'a> {
    understood: &'a str,
    matched: &'a str,
}

#[derive(Debug, Serialize)]
struct JsonRedaction<'a> {
    detector: &'a str,
    count: usize,
}

#[derive(Debug, Serialize)]
struct JsonError {
    verdict: &'static str,
    line: usize,
    error: String,
}

/// One frame the proxy would write (`--format forwarded`).
#[derive(Debug, Serialize)]
struct JsonForwarded<'a> {
    line: usize,
    to: &'static str,
    frame: &'a str,
}

/// The verdict kinds, with their text-format label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Allow,
    Deny,
    Redact,
    Block,
    /// Held for a human's approval (`action: ask`): not forwarded without one.
    Ask,
}

impl Kind {
    fn word(self) -> &'static str {
        match self {
            Kind::Allow => "allow",
            Kind::Deny => "deny",
            Kind::Redact => "redact",
            Kind::Block => "block",
            Kind::Ask => "ask",
        }
    }

    fn label(self) -> &'static str {
        match self {
            Kind::Allow => "✓ ALLOW",
            Kind::Deny => "✗ DENY",
            Kind::Redact => "~ REDACT",
            Kind::Block => "✗ BLOCK",
            Kind::Ask => "? ASK",
        }
    }

    fn ansi(self) -> &'static str {
        match self {
            Kind::Allow => "\x1b[32m",
            Kind::Deny | Kind::Block => "\x1b[1;31m",
            Kind::Redact | Kind::Ask => "\x1b[33m",
        }
    }
}

/// Everything printed about one message.
struct Report<'a> {
    kind: Kind,
    outbound: bool,
    line: usize,
    /// The message's method, or for a response the method of the request it answers.
    method: Option<String>,
    /// The tool called, or for a response the tool of the call it answers.
    tool: Option<String>,
    /// As the audit log has it: a secret in it is masked.
    id: Option<Box<[u8]>>,
    /// What the message is about (an argument value, or "response to id 3").
    subject: String,
    rule: Option<(&'a str, Span)>,
    /// A built-in reason that decided (`mcpwall:default_action` when no rule did), as the
    /// audit log and `explain-policy` name it.
    rule_text: Option<String>,
    message: Option<String>,
    redactions: Vec<(&'a str, usize, Vec<String>)>,
    logged: Vec<&'a str>,
    /// Shell command lines the deciding rule's `command` matcher parsed, and why it held.
    commands: Vec<crate::program::CommandExplanation>,
}

/// The built-in reasons that mean the input itself is broken (exit code 2), not that
/// the policy refused it.
const INPUT_ERRORS: &[&str] = &[
    "mcpwall:malformed",
    "mcpwall:too_large",
    "mcpwall:truncated",
];

impl<'p> Checker<'p> {
    fn new(policy: &'p Policy, program: &'p Arc<Program>, args: &'p Args, colour: bool) -> Self {
        let options = session::Options {
            server_name: args.server.as_str().into(),
            // `check` judges a transcript: it approves no tool definitions and keeps no
            // pins, so the guard (which records them in ~/.mcpwall) stays out.
            guard: None,
            audit: false,
            log_level: LogLevel::Error,
        };
        Checker {
            policy,
            program,
            args,
            colour,
            session: Session::new(program.clone(), options),
            shown: Parsed::new(),
            detector_cache: program.detector().cache(),
            findings: Vec::new(),
            any_error: false,
            any_refused: false,
            last_sender: Peer::Client,
        }
    }

    fn exit_code(&self) -> u8 {
        if self.any_error {
            2
        } else if self.any_refused {
            1
        } else {
            0
        }
    }

    /// Which side sent a frame: `--direction`, or by what its first message is. A
    /// line that does not parse is read as far as it goes (a method: a request; an id
    /// alone: an answer); one that says nothing comes from the side of the line before.
    fn sender(&self, frame: Option<&Frame<'_>>, raw: &[u8]) -> Peer {
        match self.args.direction {
            Direction::Inbound => return Peer::Client,
            Direction::Outbound => return Peer::Server,
            Direction::Auto => {}
        }
        let answerer = |id: &[u8]| {
            // The client's answer to a request the server made earlier in the input.
            if self.session.awaits_answer(Peer::Client, id) {
                Peer::Client
            } else {
                Peer::Server
            }
        };
        let Some((frame, msg)) = frame.and_then(|f| f.messages().first().map(|m| (f, m))) else {
            let head = crate::frame::read_head(raw);
            return match (head.method, head.id) {
                (true, _) => Peer::Client,
                (false, Some(id)) => answerer(&raw[id]),
                (false, None) => self.last_sender,
            };
        };
        match msg.kind {
            MessageKind::Result | MessageKind::Error => {
                answerer(frame.id_raw(msg).unwrap_or(b"null"))
            }
            MessageKind::Request | MessageKind::Notification => {
                if frame
                    .method(msg)
                    .is_some_and(|m| SERVER_METHODS.contains(&m))
                {
                    Peer::Server
                } else {
                    Peer::Client
                }
            }
        }
    }

    fn judge(&mut self, input: &InputFrame, out: &mut impl Write) -> std::io::Result<()> {
        let mut shown = std::mem::take(&mut self.shown);
        let limits = self.session.limits();
        let frame = shown
            .parse(&input.bytes, &limits)
            .ok()
            .map(|()| Frame::new(&input.bytes, &shown));
        let from = self.sender(frame.as_ref(), &input.bytes);
        self.last_sender = from;
        let forwarded = self.args.format == Format::Forwarded;
        // A response in the input without its request: judged as the answer to one
        // (of `--tool`, if given), the way `check` has always read single responses.
        // A transcript (`--format forwarded`) assumes nothing, as the proxy would not.
        if let Some(frame) = &frame
            && !forwarded
        {
            for msg in frame.messages() {
                let (MessageKind::Result | MessageKind::Error, Some(id)) =
                    (msg.kind, frame.id_raw(msg))
                else {
                    continue;
                };
                // The sender of a response is the side that owes the answer.
                match (&self.args.tool, from) {
                    (Some(tool), Peer::Server) => {
                        self.session
                            .expect_answer(from, id, "tools/call", Some(tool))
                    }
                    _ if !self.session.awaits_answer(from, id) => {
                        self.session.expect_answer(from, id, "", None)
                    }
                    _ => {}
                }
            }
        }
        let mut outbox = Outbox::recording();
        match from {
            Peer::Client => self
                .session
                .from_client(Line::Frame(&input.bytes), &mut outbox),
            Peer::Server => {
                self.session
                    .from_server(Line::Frame(&input.bytes), &mut outbox, false);
            }
        }
        let result = if forwarded {
            self.write_forwarded(input.line, &outbox, out)
        } else {
            self.write_judgements(input, frame.as_ref(), from, &outbox, out)
        };
        self.shown = shown;
        result
    }

    /// The frames the proxy would write for this input line, each side's in order.
    fn write_forwarded(
        &mut self,
        line: usize,
        outbox: &Outbox,
        out: &mut impl Write,
    ) -> std::io::Result<()> {
        for j in outbox.judgements.iter().flatten() {
            self.note(j);
        }
        for (to, bytes) in [("server", &outbox.to_server), ("client", &outbox.to_client)] {
            for frame in bytes.split(|&b| b == b'\n').filter(|f| !f.is_empty()) {
                let v = JsonForwarded {
                    line,
                    to,
                    frame: &String::from_utf8_lossy(frame),
                };
                writeln!(
                    out,
                    "{}",
                    serde_json::to_string(&v).map_err(std::io::Error::other)?
                )?;
            }
        }
        Ok(())
    }

    /// Count a judgement towards the exit code.
    fn note(&mut self, j: &Judgement) {
        match j.event.rule {
            Some(RuleRef::Builtin(r)) if INPUT_ERRORS.contains(&r) => self.any_error = true,
            _ => {
                if !matches!(j.event.action, Verdict::Allow | Verdict::Pass) {
                    self.any_refused = true;
                }
            }
        }
    }

    fn write_judgements(
        &mut self,
        input: &InputFrame,
        frame: Option<&Frame<'_>>,
        from: Peer,
        outbox: &Outbox,
        out: &mut impl Write,
    ) -> std::io::Result<()> {
        let judgements = outbox.judgements.as_deref().unwrap_or_default();
        let messages = frame.map(|f| f.messages()).unwrap_or_default();
        let mut batch_denied = false;
        for (i, j) in judgements.iter().enumerate() {
            self.note(j);
            if let Some(RuleRef::Builtin(r)) = j.event.rule
                && INPUT_ERRORS.contains(&r)
            {
                let reason = j.event.message.as_deref().unwrap_or("malformed frame");
                // The session's notes on what was not forwarded are not the input's.
                let reason = reason
                    .strip_prefix("server line is not a valid JSON-RPC message (")
                    .and_then(|r| r.strip_suffix("); dropped"))
                    .unwrap_or(reason);
                self.write_error(input.line, reason, out)?;
                continue;
            }
            let msg = frame.and(messages.get(i));
            let report = self.report(input.line, frame, msg, j, from);
            batch_denied |= report.kind == Kind::Deny && !report.outbound;
            self.write_report(&report, out)?;
        }
        if batch_denied && messages.len() > 1 && self.args.format == Format::Text {
            writeln!(
                out,
                "  Batch: an element was denied, so nothing in this batch would be forwarded"
            )?;
        }
        Ok(())
    }

    /// What is printed about one message, from the session's judgement of it.
    fn report<'f>(
        &mut self,
        line: usize,
        frame: Option<&Frame<'f>>,
        msg: Option<&Message>,
        j: &Judgement,
        from: Peer,
    ) -> Report<'f>
    where
        'p: 'f,
    {
        let e = &j.event;
        let outbound = from == Peer::Server;
        let kind = match e.action {
            Verdict::Allow | Verdict::Pass | Verdict::LogOnly => Kind::Allow,
            Verdict::Deny | Verdict::Drop | Verdict::Error => Kind::Deny,
            Verdict::Redact => Kind::Redact,
            Verdict::Block => Kind::Block,
            Verdict::Ask => Kind::Ask,
            // The session reports these only after a human answered; `check` asks no one.
            Verdict::Approved => Kind::Allow,
            Verdict::Declined | Verdict::TimedOut => Kind::Deny,
        };
        let (rule, rule_text, message) = match e.rule {
            Some(RuleRef::Inbound(r)) => {
                let (name, span, message) = self.inbound_rule(r);
                // The session's own explanation (a batch refused for another member's
                // sake) before the rule's; on an allow, only the session's (a pack rule
                // an exception lifted).
                let message = match kind {
                    Kind::Allow => e.message.as_deref().map(str::to_string),
                    _ => Some(e.message.as_deref().unwrap_or(message).to_string()),
                };
                (Some((name, span)), None, message)
            }
            Some(RuleRef::Outbound(r)) => {
                let (name, span, message) = self.outbound_rule(r);
                (Some((name, span)), None, Some(message.to_string()))
            }
            // An allowed call names no rule when no rule decided.
            Some(RuleRef::Builtin(_)) | None if kind == Kind::Allow => {
                (None, None, e.message.as_deref().map(str::to_string))
            }
            Some(RuleRef::Builtin(name @ "mcpwall:default_action")) => (
                None,
                Some(name.to_string()),
                Some("no rule allows this call".to_string()),
            ),
            Some(RuleRef::Builtin(name)) => (
                None,
                Some(name.to_string()),
                e.message.as_deref().map(str::to_string),
            ),
            None => (None, None, e.message.as_deref().map(str::to_string)),
        };
        let id: Option<Box<[u8]>> = match &e.id {
            Some(id) => Some(id.as_bytes().into()),
            None => frame
                .zip(msg)
                .and_then(|(f, m)| f.id_raw(m))
                .map(Into::into),
        };
        let is_response =
            msg.is_some_and(|m| matches!(m.kind, MessageKind::Result | MessageKind::Error));
        let subject = match (frame, msg, id.as_deref()) {
            (Some(_), Some(_), Some(id)) if is_response => {
                format!("(response to id {})", String::from_utf8_lossy(id))
            }
            (Some(f), Some(m), _) => self.telling_value(f, m),
            _ => String::new(),
        };
        let method = e
            .method
            .as_deref()
            .filter(|m| !m.is_empty())
            .map(str::to_string);
        // The method column shows what a response answers, when known.
        let method = method.or_else(|| match msg.map(|m| m.kind) {
            Some(MessageKind::Result) => Some("result".to_string()),
            Some(MessageKind::Error) => Some("error".to_string()),
            _ => None,
        });
        let mut grouped: Vec<(&'p str, usize, Vec<String>)> = Vec::new();
        if let Some(f) = frame {
            for r in &j.redactions {
                let name = self.program.label(r.label);
                let preview = preview::mask(&preview::decode_raw(&f.raw[r.raw.clone()]));
                match grouped.iter_mut().find(|(n, _, _)| *n == name) {
                    Some((_, count, previews)) => {
                        *count += 1;
                        previews.push(preview);
                    }
                    None => grouped.push((name, 1, vec![preview])),
                }
            }
        }
        grouped.sort_by(|a, b| a.0.cmp(b.0));
        let logged = j
            .logged
            .iter()
            .filter_map(|r| match *r {
                RuleRef::Outbound(r) => Some(self.program.outbound_rule(r).name.as_str()),
                RuleRef::Inbound(r) => Some(self.program.rule(r).name.as_str()),
                RuleRef::Builtin(_) => None,
            })
            .collect();
        let commands = match (e.rule, frame, msg) {
            (Some(RuleRef::Inbound(r)), Some(f), Some(m)) => self.program.explain_commands(r, f, m),
            _ => Vec::new(),
        };
        Report {
            commands,
            kind,
            outbound,
            line,
            method,
            tool: e.tool.as_deref().map(str::to_string),
            id,
            subject,
            rule,
            rule_text,
            message,
            redactions: grouped,
            logged,
        }
    }

    fn inbound_rule(&self, id: RuleId) -> (&'p str, Span, &'p str) {
        let info = self.program.rule(id);
        let message = info
            .message
            .as_deref()
            .or(info.description.as_deref())
            .unwrap_or(match info.action {
                crate::verdict::RuleAction::Ask => "held for your approval",
                _ => "denied by policy",
            });
        (info.name.as_str(), info.span, message)
    }

    fn outbound_rule(&self, id: RuleId) -> (&'p str, Span, &'p str) {
        let info = self.program.outbound_rule(id);
        let message = info
            .message
            .as_deref()
            .or(info.description.as_deref())
            .unwrap_or("matched an outbound rule");
        (info.name.as_str(), info.span, message)
    }

    /// The argument value that best says what a message is about, shortened, with control
    /// characters escaped and any secret in it masked.
    fn telling_value(&mut self, frame: &Frame<'_>, msg: &Message) -> String {
        let Some((_, value)) = preview::telling_arg(frame, msg) else {
            return String::new();
        };
        preview::shown_value(
            value,
            self.program.detector(),
            &mut self.detector_cache,
            &mut self.findings,
        )
    }

    fn write_error(&self, line: usize, reason: &str, out: &mut impl Write) -> std::io::Result<()> {
        match self.args.format {
            Format::Json | Format::Forwarded => {
                let v = JsonError {
                    verdict: "error",
                    line,
                    error: reason.to_string(),
                };
                writeln!(
                    out,
                    "{}",
                    serde_json::to_string(&v).map_err(std::io::Error::other)?
                )
            }
            Format::Text => {
                let label = self.paint("\x1b[1;35m", "! ERROR");
                writeln!(out, "{label}  line {line}: {reason}")
            }
        }
    }

    fn write_report(&self, r: &Report<'_>, out: &mut impl Write) -> std::io::Result<()> {
        match self.args.format {
            Format::Json | Format::Forwarded => {
                let v = JsonVerdict {
                    verdict: r.kind.word(),
                    direction: if r.outbound { "outbound" } else { "inbound" },
                    line: r.line,
                    method: r.method.as_deref(),
                    tool: r.tool.as_deref(),
                    id: r
                        .id
                        .as_deref()
                        .and_then(|raw| serde_json::from_slice(raw).ok()),
                    rule: r.rule.map(|(n, _)| n).or(r.rule_text.as_deref()),
                    message: r.message.as_deref(),
                    source: r.rule.map(|(_, span)| source_line(self.policy, span)),
                    redactions: r
                        .redactions
                        .iter()
                        .map(|(d, c, _)| JsonRedaction {
                            detector: d,
                            count: *c,
                        })
                        .collect(),
                    logged: r.logged.clone(),
                    commands: r
                        .commands
                        .iter()
                        .map(|c| JsonCommand {
                            understood: &c.understood,
                            matched: &c.why,
                        })
                        .collect(),
                };
                writeln!(
                    out,
                    "{}",
                    serde_json::to_string(&v).map_err(std::io::Error::other)?
                )
            }
            Format::Text => {
                let label = format!("{:<8}", r.kind.label());
                let mut head = self.paint(r.kind.ansi(), &label);
                for col in [&r.method, &r.tool].into_iter().flatten() {
                    head.push(' ');
                    head.push_str(&preview::escape_controls(col));
                    head.push(' ');
                }
                if !r.subject.is_empty() {
                    head.push(' ');
                    head.push_str(&r.subject);
                }
                writeln!(out, "{}", head.trim_end())?;
                if let Some(rule) = r.rule.map(|(n, _)| n).or(r.rule_text.as_deref()) {
                    writeln!(out, "  Rule: {rule}")?;
                }
                match r.kind {
                    Kind::Deny | Kind::Block => {
                        let message = r.message.as_deref().unwrap_or("denied by policy");
                        // Messages written for the original mcpwall say `Blocked: …`
                        // themselves; its documented output shows the label once.
                        let message = message
                            .strip_prefix("Blocked: ")
                            .or_else(|| message.strip_prefix("Blocked:"))
                            .unwrap_or(message);
                        writeln!(out, "  Blocked: {message}")?
                    }
                    Kind::Redact => {
                        for (detector, count, previews) in &r.redactions {
                            writeln!(
                                out,
                                "  Redacted: {detector} ×{count} ({})",
                                previews.join(", ")
                            )?;
                        }
                    }
                    Kind::Ask => writeln!(
                        out,
                        "  Held: waits for a human's approval; refused without one"
                    )?,
                    Kind::Allow => {
                        if let Some(message) = &r.message {
                            writeln!(out, "  Excepted: {message}")?
                        }
                    }
                }
                for name in &r.logged {
                    writeln!(out, "  Logged: {name}")?;
                }
                for c in &r.commands {
                    writeln!(
                        out,
                        "  Understood: {}",
                        preview::escape_controls(&c.understood)
                    )?;
                    writeln!(out, "  Matched: {}", preview::escape_controls(&c.why))?;
                }
                Ok(())
            }
        }
    }

    fn paint(&self, ansi: &str, text: &str) -> String {
        if self.colour {
            format!("{ansi}{text}\x1b[0m")
        } else {
            text.to_string()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pretty_printed_frame_is_one_frame() {
        let text = b"{\n  \"jsonrpc\": \"2.0\",\n  \"id\": 1,\n  \"method\": \"ping\"\n}\n";
        let mut n = 0;
        let frames = split_frames(text, &mut n);
        assert_eq!(frames.len(), 1);
        assert_eq!(frames[0].line, 1);
    }

    #[test]
    fn jsonl_keeps_line_numbers_and_skips_blank_lines() {
        let text = b"{\"jsonrpc\":\"2.0\",\"method\":\"ping\",\"id\":1}\r\n\n{\"jsonrpc\":\"2.0\",\"method\":\"ping\",\"id\":2}\n";
        let mut n = 0;
        let frames = split_frames(text, &mut n);
        let lines: Vec<usize> = frames.iter().map(|f| f.line).collect();
        assert_eq!(lines, [1, 3]);
        assert!(!frames[0].bytes.ends_with(b"\r"));
    }

    #[test]
    fn a_broken_line_stays_its_own_frame() {
        let text = b"{\"jsonrpc\":\"2.0\",\"method\":\"ping\",\"id\":1}\n{broken\n";
        let mut n = 0;
        assert_eq!(split_frames(text, &mut n).len(), 2);
    }
}
