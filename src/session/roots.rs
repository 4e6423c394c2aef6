//! The project from the client's roots (decision 16).
//!
//! A client whose `initialize` declares the `roots` capability says where the user's
//! project is. The session learns it in two ways:
//!
//! - it reads every answer the client gives to a server's `roots/list` (after that
//!   answer was judged and forwarded, as any answer);
//! - it asks itself: right after the client's `notifications/initialized` (the session
//!   has no clock, and a project known sooner is judged sooner; a server that asks too
//!   simply gets its own answer), and again after each
//!   `notifications/roots/list_changed`. Its request goes to the client with an id of
//!   its own (`"mcpwall-roots-N"`, reserved: a server request using an `"mcpwall-…"` id
//!   is refused, so the two can never be confused); the client's answer is consumed,
//!   never forwarded to the server.
//!
//! Each answer is read strictly ([`crate::paths::roots`]): only `file://` roots on this
//! machine count, `/`, the home directory and the directories above it never do, and
//! what does not count is written to the audit log and stderr. From then on the
//! session judges with its program compiled again for those roots
//! ([`crate::config::policy::Policy::for_project`]): `not_under: ${PROJECT_DIR}` and the
//! packs' "outside the project" rules mean outside the client's roots. An answer with
//! no root that counts means no project: nothing is inside it. An error answer, or one
//! that cannot be read, changes nothing.
//!
//! A session whose program does not keep its policy ([`Program::keep_source`]: `mcpwall
//! check`, tests) asks nothing and keeps the working directory's project.
//!
//! Until an answer arrives, messages are judged against the project of the working
//! directory (or none, when that is `/` or the home directory), as for a client without
//! roots; a call the client sends before the roots are known is judged that way.
//!
//! The sandbox is applied when the server starts, before any root is known, and the
//! kernel cannot widen it afterwards; mcpwall never widens it from a client's word (a
//! model may be steering the client). With `confine_writes`, a root outside the
//! sandbox's writable places stays unwritable for the server: the session says so once,
//! on stderr and in the audit log, with the fix.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::ids::IdText;
use super::{AuditEvent, Direction, Outbox, Route, RuleRef, Session, Verdict};
use crate::config::policy::LogLevel;
use crate::frame::{Frame, Message, MessageKind};
use crate::paths::roots::ClientRoots;
use crate::program::Program;

/// The id of every `roots/list` mcpwall sends starts with this (as JSON text).
pub const ROOTS_ID_PREFIX: &str = "\"mcpwall-roots-";

/// Ids of requests mcpwall itself sends to the client start with this (as a decoded
/// JSON string): a server request using one is refused.
pub const OWN_ID_PREFIX: &str = "\"mcpwall-";

/// The audit rule of a change of project.
const RULE_ROOTS: &str = "mcpwall:client_roots";

/// Changes of project one session makes. Each compiles the policy again (1.7 ms for the
/// default pack in a debug build, the start-up's own compile time), so a client that keeps changing its roots would keep a core busy (the
/// gateway's, shared with other identities); past this, the roots stay as they are.
pub const MAX_PROJECT_MOVES: u32 = 64;
/// The audit rule of a root that does not count.
const RULE_ROOT_REFUSED: &str = "mcpwall:client_root_refused";
/// The audit rule of roots the sandbox does not let the server write.
const RULE_OUTSIDE_SANDBOX: &str = "mcpwall:roots_outside_sandbox";

/// What the session knows of the client's roots.
#[derive(Default)]
pub(super) struct ClientProject {
    /// The client's `initialize` declared `roots`.
    declared: bool,
    /// The id (key) of mcpwall's own `roots/list` in flight.
    asking: Option<IdText>,
    /// mcpwall's `roots/list` requests so far (numbers its ids).
    asked: u64,
    /// The roots changed while mcpwall's question was in flight: ask again.
    again: bool,
    /// The roots in force; `None`: not known yet (the working directory's project).
    roots: Option<Vec<PathBuf>>,
    /// The program compiled for the start project, which the moved ones are made from.
    base: Option<Arc<Program>>,
    /// The sandbox warning was given.
    sandbox_told: bool,
    /// Changes of project so far ([`MAX_PROJECT_MOVES`]).
    moves: u32,
}

impl ClientProject {
    /// The program for the start project, if the session moved away from it.
    pub(super) fn base(&self) -> Option<&Arc<Program>> {
        self.base.as_ref()
    }
}

/// Whether a request id (JSON text) is one of the ids mcpwall uses for its own requests,
/// compared as a JSON value (an escaped spelling is the same id).
pub(super) fn is_own_id(id: &[u8]) -> bool {
    IdText::key_of(id)
        .as_bytes()
        .starts_with(OWN_ID_PREFIX.as_bytes())
}

impl Session {
    /// What concerns the client's roots in a client message: notes the capability from
    /// `initialize`, asks after `notifications/initialized` and
    /// `notifications/roots/list_changed`, and consumes the answer to mcpwall's own
    /// question (returns `true` then: the message goes no further).
    pub(super) fn roots_traffic(
        &mut self,
        frame: &Frame<'_>,
        msg: &Message,
        out: &mut Outbox,
    ) -> bool {
        match msg.kind {
            MessageKind::Result | MessageKind::Error => {
                let Some(asking) = &self.project.asking else {
                    return false;
                };
                if frame
                    .id_raw(msg)
                    .is_none_or(|id| IdText::key_of(id) != *asking)
                {
                    return false;
                }
                self.project.asking = None;
                if msg.kind == MessageKind::Result {
                    self.roots_answered(frame, msg, out);
                } else {
                    self.notice(
                        out,
                        LogLevel::Warn,
                        format_args!(
                            "the client answered mcpwall's roots/list with an error; the project stays as it was"
                        ),
                    );
                }
                if std::mem::take(&mut self.project.again) {
                    self.ask_roots(out);
                }
                true
            }
            MessageKind::Request => {
                if frame.method(msg) == Some("initialize") {
                    self.project.declared = declares_roots(frame, msg);
                }
                false
            }
            MessageKind::Notification => {
                let method = frame.method(msg);
                let wanted = method == Some("notifications/initialized")
                    && self.project.roots.is_none()
                    || method == Some("notifications/roots/list_changed");
                // Only a session whose program keeps its policy can move the project
                // (`check` judges by the working directory's): no other asks.
                if wanted && self.project.declared && self.base_program().source().is_some() {
                    if self.project.asking.is_some() {
                        self.project.again = true;
                    } else {
                        self.ask_roots(out);
                    }
                }
                false
            }
        }
    }

    /// A forwarded client answer to the server's own `roots/list`: the project too.
    pub(super) fn roots_observed(&mut self, frame: &Frame<'_>, msg: &Message, out: &mut Outbox) {
        if msg.kind == MessageKind::Result && self.project.declared {
            self.roots_answered(frame, msg, out);
        }
    }

    fn ask_roots(&mut self, out: &mut Outbox) {
        self.project.asked += 1;
        let id = format!("{ROOTS_ID_PREFIX}{}\"", self.project.asked);
        self.project.asking = Some(IdText::key_of(id.as_bytes()));
        out.to_client
            .extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
        out.to_client.extend_from_slice(id.as_bytes());
        out.to_client
            .extend_from_slice(b",\"method\":\"roots/list\"}\n");
        out.routed(|| Route::Request {
            id: id.as_bytes().into(),
            method: "roots/list".into(),
            params: None,
        });
    }

    /// Read a `roots/list` result and move the project there.
    fn roots_answered(&mut self, frame: &Frame<'_>, msg: &Message, out: &mut Outbox) {
        let value: serde_json::Value =
            serde_json::from_slice(&frame.raw[msg.span.clone()]).unwrap_or_default();
        let Some(list) = value.pointer("/result/roots").and_then(|r| r.as_array()) else {
            self.roots_event(
                out,
                Verdict::Drop,
                RULE_ROOT_REFUSED,
                "the client's roots/list answer has no `roots` list; the project stays as it was"
                    .into(),
            );
            return;
        };
        let home = PathBuf::from(self.base_program().path_env().home());
        let mut unnamed = 0usize;
        let uris = list.iter().filter_map(|r| {
            let uri = r.get("uri").and_then(|u| u.as_str());
            unnamed += usize::from(uri.is_none());
            uri
        });
        let read: ClientRoots = crate::paths::roots::client_roots(&home, uris);
        for (uri, why) in &read.refused {
            self.roots_event(
                out,
                Verdict::Drop,
                RULE_ROOT_REFUSED,
                format!("the client's root {uri:?} does not count: {why}"),
            );
        }
        if unnamed > 0 || read.dropped > 0 {
            self.roots_event(
                out,
                Verdict::Drop,
                RULE_ROOT_REFUSED,
                format!(
                    "{} of the client's roots were not read ({unnamed} without a `uri` string, \
                     {} past the first {} or past the log's bound)",
                    unnamed + read.dropped,
                    read.dropped,
                    crate::paths::roots::MAX_CLIENT_ROOTS
                ),
            );
        }
        if self.project.roots.as_ref() == Some(&read.roots) {
            return;
        }
        self.move_project(read.roots, true, out);
    }

    fn base_program(&self) -> &Arc<Program> {
        self.project.base.as_ref().unwrap_or(&self.program)
    }

    /// Judge from now on with the program compiled for `roots` (see the module docs).
    /// `counted`: a change the client asked for (a reload compiling the same roots again
    /// is not).
    fn move_project(&mut self, roots: Vec<PathBuf>, counted: bool, out: &mut Outbox) {
        if counted && self.project.moves >= MAX_PROJECT_MOVES {
            if self.project.moves == MAX_PROJECT_MOVES {
                self.project.moves += 1;
                self.roots_event(
                    out,
                    Verdict::Drop,
                    RULE_ROOTS,
                    format!(
                        "the client changed its roots {MAX_PROJECT_MOVES} times in this session; \
                         further changes are ignored and the project stays as it is"
                    ),
                );
            }
            return;
        }
        let base = self.base_program().clone();
        let Some(policy) = base.source().cloned() else {
            // A transport that keeps no policy (a test, `check`): the start project stays.
            self.project.roots = Some(roots);
            return;
        };
        let env = base.path_env();
        let (home, cwd) = (PathBuf::from(env.home()), PathBuf::from(env.cwd()));
        let first = roots
            .first()
            .cloned()
            .unwrap_or_else(|| PathBuf::from(crate::paths::NO_PROJECT));
        let moved = policy.for_project(&home, &cwd, &roots);
        let program = match crate::compile::compile(&moved, &env.with_project(&first)) {
            Ok(p) if same_rules(&p, &base) => p,
            Ok(_) | Err(_) => {
                self.roots_event(
                    out,
                    Verdict::Drop,
                    RULE_ROOTS,
                    "the policy could not be compiled for the client's roots; the project stays \
                     as it was"
                        .into(),
                );
                return;
            }
        };
        let text = if roots.is_empty() {
            "the client named no root that counts: there is no project, nothing is inside it"
                .to_string()
        } else {
            let list: Vec<String> = roots.iter().map(|r| r.display().to_string()).collect();
            format!("the project is the client's roots: {}", list.join(", "))
        };
        self.notice(out, LogLevel::Info, format_args!("{text}"));
        self.roots_event(out, Verdict::LogOnly, RULE_ROOTS, text);
        self.sandbox_check(&policy, &home, &cwd, &roots, out);
        self.project.base = Some(base);
        self.project.roots = Some(roots);
        self.project.moves += u32::from(counted);
        self.install_moved(Arc::new(program));
    }

    /// Swap in a program that differs from the current one only in its project: same
    /// rules, settings and detectors, so what the session counts (rate limit, remembered
    /// approvals, held calls) stays; only the per-program scratch is made anew.
    fn install_moved(&mut self, program: Arc<Program>) {
        self.client.scratch = program.scratch();
        self.client.rulings.clear();
        self.server_side.scratch = program.scratch();
        self.program = program;
    }

    /// After a reload ([`Session::adopt`]) installed `self.program` for the start project:
    /// compile it again for the roots in force.
    pub(super) fn reapply_roots(&mut self, out: &mut Outbox) {
        self.project.base = None;
        if let Some(roots) = self.project.roots.take() {
            self.move_project(roots, false, out);
        }
    }

    /// With `confine_writes`, say once which roots the sandbox does not let the server
    /// write, and how to fix it.
    fn sandbox_check(
        &mut self,
        policy: &crate::config::policy::Policy,
        home: &Path,
        cwd: &Path,
        roots: &[PathBuf],
        out: &mut Outbox,
    ) {
        if self.project.sandbox_told || !(policy.sandbox.enabled && policy.sandbox.confine_writes) {
            return;
        }
        let place = crate::sandbox::Place::here(home, cwd);
        let Some(writable) =
            crate::sandbox::Plan::resolve(&policy.sandbox, &place).and_then(|plan| plan.writable)
        else {
            return;
        };
        let outside: Vec<String> = roots
            .iter()
            .filter(|r| !writable.iter().any(|w| r.starts_with(w)))
            .map(|r| r.display().to_string())
            .collect();
        if outside.is_empty() {
            return;
        }
        self.project.sandbox_told = true;
        let text = format!(
            "the client's roots {} are outside the places the server's sandbox lets it write \
             (it was set up when the server started, from {}): the kernel refuses writes there. \
             Start the client from the project, or name the directory under `sandbox.allow_write` \
             in your own (trusted) policy",
            outside.join(", "),
            cwd.display()
        );
        self.notice(out, LogLevel::Warn, format_args!("{text}"));
        self.roots_event(out, Verdict::LogOnly, RULE_OUTSIDE_SANDBOX, text);
    }

    fn roots_event(&mut self, out: &mut Outbox, action: Verdict, rule: &'static str, text: String) {
        if action == Verdict::Drop {
            self.notice(out, LogLevel::Warn, format_args!("{text}"));
        }
        let mut e = AuditEvent::new(Direction::Inbound, action);
        e.method = Some(self.calls.intern("roots/list"));
        e.rule = Some(RuleRef::Builtin(rule));
        e.message = Some(text.into());
        self.emit(out, super::Peer::Client, true, e, &[], &[]);
    }
}

/// Whether the client's `initialize` request declares the `roots` capability.
fn declares_roots(frame: &Frame<'_>, msg: &Message) -> bool {
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(&frame.raw[msg.span.clone()])
    else {
        return false;
    };
    value
        .pointer("/params/capabilities/roots")
        .is_some_and(|r| r.is_object())
}

/// Two programs name the same rules at the same ids (so events stay named right).
fn same_rules(a: &Program, b: &Program) -> bool {
    a.rules()
        .map(|(_, r)| &r.name)
        .eq(b.rules().map(|(_, r)| &r.name))
        && a.outbound_rules()
            .map(|(_, r)| &r.name)
            .eq(b.outbound_rules().map(|(_, r)| &r.name))
}

// The sessions here have POSIX roots (`file:///home/u/…`), which on Windows name no drive.
#[cfg(all(test, unix))]
mod tests {
    use std::sync::Arc;

    use super::super::{Line, Options, Outbox, Session};
    use crate::config::{LoadOptions, load_str};
    use crate::program::Program;

    const POLICY: &str = r#"version: 1
settings:
  default_action: allow
rules:
  - name: writes-outside-project
    match:
      method: "*"
      tool: write_file
      arguments:
        path: {not_under: "${PROJECT_DIR}"}
    action: deny
"#;

    /// A session under [`POLICY`] for a server started in `cwd`, the policy kept.
    fn session(cwd: &str) -> Session {
        let opts = LoadOptions {
            explicit: None,
            home: "/home/u".into(),
            project_dir: cwd.into(),
        };
        let policy = load_str("t.yml", POLICY, &opts).expect("loads");
        let program = Program::compile_with(&policy, &opts.path_env()).expect("compiles");
        Session::new(
            Arc::new(program.keep_source(Arc::new(policy))),
            Options::quiet("t"),
        )
    }

    fn client(s: &mut Session, line: &str) -> Outbox {
        let mut out = Outbox::recording();
        s.from_client(Line::Frame(line.as_bytes()), &mut out);
        out
    }

    fn text(b: &[u8]) -> String {
        String::from_utf8_lossy(b).into_owned()
    }

    const INIT_ROOTS: &str = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{"roots":{"listChanged":true}},"clientInfo":{"name":"c","version":"1"}}}"#;
    const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;

    /// Whether a `write_file` of `path` reaches the server.
    fn writes(s: &mut Session, id: u32, path: &str) -> bool {
        let line = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"write_file","arguments":{{"path":"{path}","content":"x"}}}}}}"#
        );
        let out = client(s, &line);
        let sent = text(&out.to_server).contains("write_file");
        if sent {
            // Answer it, so the id may be used again.
            let mut o = Outbox::default();
            let answer = format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{}}}}"#);
            s.from_server(Line::Frame(answer.as_bytes()), &mut o, false);
        }
        sent
    }

    /// Initialise with roots declared; returns mcpwall's own question's id.
    fn initialised(s: &mut Session) -> String {
        let out = client(s, INIT_ROOTS);
        assert!(text(&out.to_server).contains("initialize"));
        assert!(out.to_client.is_empty());
        let mut o = Outbox::default();
        s.from_server(
            Line::Frame(br#"{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-06-18","capabilities":{},"serverInfo":{"name":"s","version":"1"}}}"#),
            &mut o,
            false,
        );
        let out = client(s, INITIALIZED);
        assert_eq!(text(&out.to_server), format!("{INITIALIZED}\n"));
        let asked: serde_json::Value = serde_json::from_slice(&out.to_client).expect("one request");
        assert_eq!(asked["method"], "roots/list");
        asked["id"].to_string()
    }

    fn answer(s: &mut Session, id: &str, roots: &str) -> Outbox {
        client(
            s,
            &format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"roots":{roots}}}}}"#),
        )
    }

    #[test]
    fn mcpwall_asks_once_initialised_and_its_answer_moves_the_project() {
        let mut s = session("/");
        // No project yet (started in `/`): every write in the home is outside.
        assert!(!writes(&mut s, 1, "/home/u/proj/a.txt"));
        let id = initialised(&mut s);
        assert_eq!(id, "\"mcpwall-roots-1\"");
        let out = answer(&mut s, &id, r#"[{"uri":"file:///home/u/proj","name":"p"}]"#);
        assert!(out.to_server.is_empty(), "the answer reached the server");
        assert!(out.to_client.is_empty());
        assert!(writes(&mut s, 2, "/home/u/proj/a.txt"));
        assert!(!writes(&mut s, 3, "/home/u/other/a.txt"));
        assert!(!writes(&mut s, 4, "/home/u/proj/../other/a.txt"));
    }

    #[test]
    fn without_the_capability_nothing_is_asked_and_the_start_project_stays() {
        let mut s = session("/home/u/p");
        client(
            &mut s,
            r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}"#,
        );
        let out = client(&mut s, INITIALIZED);
        assert!(out.to_client.is_empty());
        assert!(writes(&mut s, 1, "/home/u/p/a"));
        assert!(!writes(&mut s, 2, "/home/u/q/a"));
    }

    #[test]
    fn the_answer_to_the_servers_own_question_counts_and_is_forwarded() {
        let mut s = session("/home/u/p");
        let _ = initialised(&mut s);
        let mut o = Outbox::default();
        s.from_server(
            Line::Frame(br#"{"jsonrpc":"2.0","id":"s1","method":"roots/list"}"#),
            &mut o,
            false,
        );
        let out = answer(&mut s, "\"s1\"", r#"[{"uri":"file:///home/u/q"}]"#);
        assert!(text(&out.to_server).contains("\"s1\""), "not forwarded");
        assert!(writes(&mut s, 1, "/home/u/q/a"));
        assert!(!writes(&mut s, 2, "/home/u/p/a"));
    }

    #[test]
    fn list_changed_asks_again_and_the_new_roots_replace_the_old() {
        let mut s = session("/");
        let id = initialised(&mut s);
        answer(&mut s, &id, r#"[{"uri":"file:///home/u/a"}]"#);
        assert!(writes(&mut s, 1, "/home/u/a/x"));
        let changed = r#"{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}"#;
        let out = client(&mut s, changed);
        assert_eq!(text(&out.to_server), format!("{changed}\n"));
        let asked: serde_json::Value = serde_json::from_slice(&out.to_client).unwrap();
        assert_eq!(asked["id"], "mcpwall-roots-2");
        // A second change while the question is out: asked again once it is answered.
        assert!(client(&mut s, changed).to_client.is_empty());
        let out = answer(
            &mut s,
            "\"mcpwall-roots-2\"",
            r#"[{"uri":"file:///home/u/b"}]"#,
        );
        let again: serde_json::Value = serde_json::from_slice(&out.to_client).unwrap();
        assert_eq!(again["id"], "mcpwall-roots-3");
        assert!(writes(&mut s, 2, "/home/u/b/x"));
        assert!(!writes(&mut s, 3, "/home/u/a/x"));
    }

    #[test]
    fn roots_that_do_not_count_leave_no_project_and_are_audited() {
        let mut s = session("/home/u/p");
        let id = initialised(&mut s);
        let out = answer(
            &mut s,
            &id,
            r#"[{"uri":"file://evil-host/home/u/p"},{"uri":"file:///"},{"uri":"file:///home"},{"name":"no uri"},{"uri":"file:///home/u/p%zz"}]"#,
        );
        let rules: Vec<String> = out
            .judgements
            .as_ref()
            .unwrap()
            .iter()
            .map(|j| format!("{:?}", j.event.rule))
            .collect();
        assert_eq!(
            rules
                .iter()
                .filter(|r| r.contains("client_root_refused"))
                .count(),
            5,
            "{rules:?}"
        );
        assert!(
            rules.iter().any(|r| r.contains("mcpwall:client_roots")),
            "{rules:?}"
        );
        // No project: even the start project is outside now.
        assert!(!writes(&mut s, 1, "/home/u/p/a"));
    }

    #[test]
    fn a_huge_list_is_bounded() {
        let mut s = session("/");
        let id = initialised(&mut s);
        let list: Vec<String> = (0..5000)
            .map(|i| format!(r#"{{"uri":"file:///home/u/p{i}"}}"#))
            .collect();
        answer(&mut s, &id, &format!("[{}]", list.join(",")));
        assert!(writes(&mut s, 1, "/home/u/p0/x"));
        assert!(writes(&mut s, 2, "/home/u/p63/x"));
        assert!(
            !writes(&mut s, 3, "/home/u/p64/x"),
            "roots past the bound count"
        );
    }

    #[test]
    fn a_server_request_cannot_use_mcpwalls_roots_ids_in_any_spelling() {
        let mut s = session("/");
        for id in [r#""mcpwall-roots-1""#, r#""mcpwall\u002droots-1""#] {
            let line = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"roots/list"}}"#);
            let mut out = Outbox::default();
            s.from_server(Line::Frame(line.as_bytes()), &mut out, false);
            assert!(out.to_client.is_empty(), "{id} reached the client");
            assert!(text(&out.to_server).contains("mcpwall:reserved_id"));
        }
    }

    #[test]
    fn roots_the_sandbox_does_not_let_the_server_write_are_told_once() {
        let opts = LoadOptions {
            explicit: None,
            home: "/home/u".into(),
            project_dir: "/home/u/p".into(),
        };
        let text = format!("{POLICY}sandbox:\n  enabled: true\n  confine_writes: true\n");
        let policy = load_str("t.yml", &text, &opts).expect("loads");
        let program = Program::compile_with(&policy, &opts.path_env()).unwrap();
        let mut s = Session::new(
            Arc::new(program.keep_source(Arc::new(policy))),
            Options::quiet("t"),
        );
        let id = initialised(&mut s);
        let told = |out: &Outbox| {
            out.judgements
                .as_ref()
                .unwrap()
                .iter()
                .filter(|j| format!("{:?}", j.event.rule).contains("roots_outside_sandbox"))
                .count()
        };
        // Inside the start project: writable, nothing to say.
        let out = answer(&mut s, &id, r#"[{"uri":"file:///home/u/p/sub"}]"#);
        assert_eq!(told(&out), 0);
        client(
            &mut s,
            r#"{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}"#,
        );
        let out = answer(
            &mut s,
            "\"mcpwall-roots-2\"",
            r#"[{"uri":"file:///srv/elsewhere"}]"#,
        );
        assert_eq!(told(&out), 1);
        let message = out.judgements.as_ref().unwrap().iter().find_map(|j| {
            j.event
                .message
                .as_deref()
                .filter(|m| m.contains("allow_write"))
                .map(str::to_string)
        });
        assert!(message.is_some_and(|m| m.contains("/srv/elsewhere")));
        client(
            &mut s,
            r#"{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}"#,
        );
        let out = answer(
            &mut s,
            "\"mcpwall-roots-3\"",
            r#"[{"uri":"file:///srv/third"}]"#,
        );
        assert_eq!(told(&out), 0, "told twice");
    }

    #[test]
    fn a_client_that_keeps_changing_its_roots_is_stopped_after_the_bound() {
        let mut s = session("/");
        let id = initialised(&mut s);
        answer(&mut s, &id, r#"[{"uri":"file:///home/u/p1"}]"#);
        let changed = r#"{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}"#;
        let mut last = String::new();
        for n in 2..(super::MAX_PROJECT_MOVES + 4) {
            client(&mut s, changed);
            last = format!("/home/u/p{n}");
            answer(
                &mut s,
                &format!("\"mcpwall-roots-{n}\""),
                &format!(r#"[{{"uri":"file://{last}"}}]"#),
            );
        }
        // The last answers changed nothing: the project is the one of the 64th move.
        assert!(!writes(&mut s, 1, &format!("{last}/x")));
        let kept = format!("/home/u/p{}", super::MAX_PROJECT_MOVES);
        assert!(writes(&mut s, 2, &format!("{kept}/x")));
    }

    #[test]
    fn a_reload_keeps_the_clients_roots() {
        let mut s = session("/");
        let id = initialised(&mut s);
        answer(&mut s, &id, r#"[{"uri":"file:///home/u/a"}]"#);
        let opts = LoadOptions {
            explicit: None,
            home: "/home/u".into(),
            project_dir: "/".into(),
        };
        let policy = load_str("t.yml", POLICY, &opts).unwrap();
        let program = Program::compile_with(&policy, &opts.path_env()).unwrap();
        let mut out = Outbox::default();
        s.adopt(
            Arc::new(program.keep_source(Arc::new(policy))),
            None,
            None,
            &mut out,
        );
        assert!(writes(&mut s, 1, "/home/u/a/x"));
        assert!(!writes(&mut s, 2, "/home/u/b/x"));
    }
}
