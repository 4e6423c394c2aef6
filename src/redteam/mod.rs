//! `mcpwall scan`: attack an MCP server directly and through mcpwall, attack by attack.
//!
//! Every attack runs twice (baseline and protected), each time in a fresh fake home
//! ([`fakehome`]), with a small synchronous client ([`client`]). The outcome is decided by an
//! exact criterion (a canary received, a side effect in the fake home), never by the text
//! of an error.
//!
//! The module is `redteam`, not `scan`, so it is not mistaken for the JSON frame scanner
//! (`frame::scan`); the CLI verb stays `scan` (`cli/scan.rs`).

pub mod attacks;
pub mod client;
pub mod compare;
pub mod fakehome;
pub mod gateway;
pub mod report;
pub mod target;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::config::policy::Settings;
use attacks::{Attack, Canary, Delivery, Requires, Success};
use client::{ClientError, Session};
use fakehome::{Canaries, FakeHome};
pub use report::{AttackResult, Outcome, Report};

/// What to attack and how.
#[derive(Debug, Clone)]
pub struct ScanOptions {
    /// The mcpwall binary (runs the built-in target and the proxy).
    pub exe: PathBuf,
    /// The user's server argv; `None` → the built-in target.
    pub server: Option<Vec<String>>,
    /// Policy file that protects the server.
    pub policy: PathBuf,
    /// How the policy was chosen (for the report).
    pub policy_label: String,
    pub seed: u64,
    pub timeout: Duration,
    /// Run only these attack ids (empty: all).
    pub only: Vec<String>,
    /// Another stdio firewall to put in front of the server instead of this mcpwall.
    pub proxy: Option<Proxy>,
    /// A policy of the scanned policy's `sandbox:` section alone (no rules), written by
    /// [`run`] when that sandbox is on: each attack that lands at baseline is run through
    /// it too, to tell whether the kernel alone holds it.
    pub kernel_policy: Option<PathBuf>,
}

/// A stdio MCP firewall given as a command prefix (`npx -y mcpwall --`): the protected
/// runs start `prefix + server`, so tools are compared on the same attacks.
#[derive(Debug, Clone)]
pub struct Proxy {
    /// The prefix, word by word.
    pub argv: Vec<String>,
    /// The prefix as the user gave it (the report names the proxy by it).
    pub label: String,
    /// What `prefix --version` printed, or the prefix's command when it did not answer.
    pub version: String,
}

impl Proxy {
    /// The prefix from `--proxy`: a JSON argv (`["npx","-y","mcpwall","--"]`) or words
    /// separated by spaces (no shell quoting: an argument with a space needs the JSON form).
    pub fn parse(text: &str) -> Result<Proxy, String> {
        let argv: Vec<String> = if text.trim_start().starts_with('[') {
            serde_json::from_str(text).map_err(|e| format!("not a JSON argv: {e}"))?
        } else {
            text.split_whitespace().map(str::to_string).collect()
        };
        if argv.is_empty() {
            return Err("no command given".into());
        }
        let version = probe_version(&argv);
        Ok(Proxy {
            argv,
            label: text.trim().to_string(),
            version,
        })
    }
}

/// The first line `prefix --version` prints (the prefix's trailing `--` left off), within
/// a few seconds; otherwise the prefix's command itself.
fn probe_version(argv: &[String]) -> String {
    let command: Vec<&String> = match argv.split_last() {
        Some((last, rest)) if last == "--" => rest.iter().collect(),
        _ => argv.iter().collect(),
    };
    let named = command
        .iter()
        .map(|s| s.as_str())
        .collect::<Vec<_>>()
        .join(" ");
    let Some((program, args)) = command.split_first() else {
        return named;
    };
    let child = std::process::Command::new(program)
        .args(args)
        .arg("--version")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn();
    let Ok(mut child) = child else {
        return named;
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                let mut out = String::new();
                if let Some(mut stdout) = child.stdout.take() {
                    let _ = std::io::Read::read_to_string(&mut stdout, &mut out);
                }
                let first = report::clean(out.lines().next().unwrap_or("").trim(), 100);
                return if status.success() && !first.is_empty() {
                    first
                } else {
                    named
                };
            }
            Ok(None) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20));
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return named;
            }
        }
    }
}

/// Which side of the comparison a session is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Baseline,
    Protected,
    /// Through mcpwall with the policy's sandbox and no rules.
    KernelOnly,
}

/// What one session observed.
struct Observed {
    outcome: Outcome,
    evidence: Option<String>,
    stopped_by: Option<String>,
    tools: Vec<String>,
    /// Why the session failed (with `Outcome::Error`), or why nothing arrived when the
    /// peer refused the attack by closing its input (with `Outcome::Pass`); the report's note.
    error: Option<String>,
}

impl ScanOptions {
    fn argv(&self, side: Side, home: &Path) -> Vec<String> {
        let server = match &self.server {
            Some(cmd) => cmd.clone(),
            None => vec![
                self.exe.to_string_lossy().into_owned(),
                "scan".into(),
                "--serve-target".into(),
                "--fake-home".into(),
                home.to_string_lossy().into_owned(),
            ],
        };
        match side {
            Side::Baseline => server,
            Side::Protected if self.proxy.is_some() => {
                let mut v = self
                    .proxy
                    .as_ref()
                    .map(|p| p.argv.clone())
                    .unwrap_or_default();
                v.extend(server);
                v
            }
            Side::Protected | Side::KernelOnly => {
                let policy = match (side, &self.kernel_policy) {
                    (Side::KernelOnly, Some(kernel)) => kernel,
                    _ => &self.policy,
                };
                let mut v = vec![
                    self.exe.to_string_lossy().into_owned(),
                    "-c".into(),
                    policy.to_string_lossy().into_owned(),
                    "--server-name".into(),
                    "scan-target".into(),
                    "--grace-ms".into(),
                    "300".into(),
                    "--".into(),
                ];
                v.extend(server);
                v
            }
        }
    }
}

impl ScanOptions {
    /// The protected run of a [`Delivery::Layered`] attack: no `-c`, so the proxy finds the
    /// user's and the project's files as it would on the user's machine.
    fn argv_layered(&self, home: &Path) -> Vec<String> {
        let mut v = self.argv(Side::Protected, home);
        // Another proxy finds its own files; its `-c`, if any, is the user's to keep.
        if self.proxy.is_some() {
            return v;
        }
        if let Some(at) = v.iter().position(|a| a == "-c") {
            v.drain(at..at + 2);
        }
        v
    }
}

/// Lay out a [`Delivery::Layered`] attack's files: `project` as the project's
/// `.mcpwall.yml` (trusted or not) and, with `user`, the scanned policy as the user's
/// `~/.mcpwall/config.yml` (without it, no user file).
fn layer(
    opts: &ScanOptions,
    home: &FakeHome,
    project: &str,
    trusted: bool,
    user: bool,
) -> std::io::Result<()> {
    let dir = home.path().join(".mcpwall");
    std::fs::create_dir_all(&dir)?;
    let user_file = dir.join("config.yml");
    if user {
        std::fs::copy(&opts.policy, &user_file)?;
    } else if user_file.exists() && user_file != opts.policy {
        std::fs::remove_file(&user_file)?;
    }
    let file = home.project().join(crate::config::PROJECT_FILE);
    let text = substitute(project, home, 0);
    std::fs::write(&file, &text)?;
    if trusted {
        let key = crate::config::trust::trust_key(&file).map_err(std::io::Error::other)?;
        let mut store =
            crate::config::TrustStore::load(home.path()).map_err(std::io::Error::other)?;
        store.trust(key, text.as_bytes());
        store.save().map_err(std::io::Error::other)?;
    }
    Ok(())
}

/// Start the server once as the baseline runs start it, then once behind the firewall as
/// the protected runs do, and complete each handshake. A server that cannot start fails
/// every attack the same way (86 times, for a relative path that does not resolve in the
/// fake home), so the scan stops here and says why, with the server's stderr.
pub fn preflight(opts: &ScanOptions) -> Result<(), (Side, String)> {
    for side in [Side::Baseline, Side::Protected] {
        let home = FakeHome::create(opts.seed)
            .map_err(|e| (side, format!("cannot create the fake home: {e}")))?;
        let argv = opts.argv(side, home.path());
        let mut session = Session::spawn(&argv, home.path(), &home.project(), opts.timeout)
            .map_err(|e| (side, e.to_string()))?;
        let shook = session.handshake().map_err(|e| (side, e.to_string()));
        session.close();
        shook?;
    }
    Ok(())
}

/// Run every selected attack; `progress` is called after each with (done, total, id).
pub fn run(opts: &ScanOptions, mut progress: impl FnMut(usize, usize, &str)) -> Report {
    let selected: Vec<&Attack> = attacks::ATTACKS.iter().collect();
    let total = selected.len();
    let settings = effective_settings(&opts.policy);
    // The kernel's part on its own: the same sandbox, no rules (not for another proxy,
    // whose sandbox, if any, is its own).
    let kernel_dir = tempfile::tempdir().ok();
    let mut opts = opts.clone();
    if opts.proxy.is_none()
        && let (Some(dir), Some(text)) = (&kernel_dir, kernel_only_policy(&opts.policy))
    {
        let file = dir.path().join("kernel-only.yml");
        if std::fs::write(&file, text).is_ok() {
            opts.kernel_policy = Some(file);
        }
    }
    let opts = &opts;
    let mut results = Vec::with_capacity(total);
    for (i, attack) in selected.into_iter().enumerate() {
        let started = Instant::now();
        let unselected =
            !opts.only.is_empty() && !opts.only.iter().any(|o| o.eq_ignore_ascii_case(attack.id));
        let skip_reason = if unselected {
            Some(SkipReason::NotSelected)
        } else {
            skip_reason(attack, &settings).map(SkipReason::Policy)
        };
        let result = if let Some(reason) = skip_reason {
            let mut r = AttackResult::new(attack, Outcome::Skipped, Outcome::Skipped);
            match reason {
                SkipReason::NotSelected => r.reason = Some(report::NOT_SELECTED.into()),
                SkipReason::Policy(why) => {
                    r.reason = Some(why);
                    r.skipped_by_policy = true;
                }
            }
            r
        } else if matches!(attack.delivery, Delivery::PerIdentity) {
            let mut r = AttackResult::new(attack, Outcome::NotApplicable, Outcome::NotApplicable);
            r.note = Some("per-identity policy needs an HTTP transport; this scan is stdio".into());
            r
        } else {
            let base = observe(opts, attack, Side::Baseline, &settings);
            let applicable = match attack.tool {
                Some(t) => base.error.is_some() || base.tools.iter().any(|x| x == t),
                None => true,
            };
            if !applicable {
                let mut r =
                    AttackResult::new(attack, Outcome::NotApplicable, Outcome::NotApplicable);
                r.note = Some(format!(
                    "{}{} tool",
                    report::NO_TOOL,
                    attack.tool.unwrap_or("")
                ));
                r
            } else {
                let prot = observe(opts, attack, Side::Protected, &settings);
                let mut r = AttackResult::new(attack, base.outcome, prot.outcome);
                // Layered attacks test the policy files themselves, not what a server does.
                if opts.kernel_policy.is_some()
                    && base.outcome == Outcome::Vulnerable
                    && !matches!(attack.delivery, Delivery::Layered { .. })
                {
                    r.kernel = Some(observe(opts, attack, Side::KernelOnly, &settings).outcome);
                }
                r.baseline_evidence = base.evidence;
                r.evidence = prot.evidence;
                r.stopped_by = match prot.outcome {
                    Outcome::Pass if base.outcome == Outcome::Pass => Some("server".into()),
                    Outcome::Pass => prot.stopped_by.or(Some(
                        if opts.proxy.is_some() {
                            "proxy"
                        } else {
                            UNATTRIBUTED
                        }
                        .into(),
                    )),
                    _ => None,
                };
                r.note = prot.error.or(base.error);
                r
            }
        };
        let mut result = result;
        result.duration_ms = started.elapsed().as_millis() as u64;
        progress(i + 1, total, attack.id);
        results.push(result);
    }
    results.extend(gateway::not_applicable_for_stdio(&opts.only));
    Report::new(opts, results)
}

enum SkipReason {
    NotSelected,
    Policy(String),
}

/// What STOPPED BY says when mcpwall stopped an attack but neither a denial nor the audit
/// log named the rule (should not happen with the built-in target).
pub const UNATTRIBUTED: &str = "mcpwall";

/// The largest flood RL-001 sends and the most violations CB-001 commits; a policy whose
/// limit is higher is not tested (SKIPPED) rather than flooded.
const MAX_BURST: u64 = 5000;
/// The largest frame JS-009 sends.
const MAX_HUGE_FRAME: usize = 256 * 1024 * 1024;

/// The settings of the policy file the protected run uses. The proxy loads the same file
/// with `-c`, so these are its settings; a file that does not load gives the defaults (the
/// protected runs then fail, and say why).
pub fn effective_settings(policy: &Path) -> Settings {
    let Ok(dir) = tempfile::tempdir() else {
        return Settings::default();
    };
    crate::config::load(&crate::config::LoadOptions {
        explicit: Some(policy.to_path_buf()),
        home: dir.path().to_path_buf(),
        project_dir: dir.path().to_path_buf(),
    })
    .map(|p| p.settings)
    .unwrap_or_default()
}

/// A policy of `policy`'s merged `sandbox:` section alone — no rules, and the tool guard
/// off (only the strict frame parser, which is not a setting, stays) — or `None` when that
/// sandbox is off (or the policy does not load: the protected runs then say why).
fn kernel_only_policy(policy: &Path) -> Option<String> {
    let dir = tempfile::tempdir().ok()?;
    let loaded = crate::config::load(&crate::config::LoadOptions {
        explicit: Some(policy.to_path_buf()),
        home: dir.path().to_path_buf(),
        project_dir: dir.path().to_path_buf(),
    })
    .ok()?;
    let sb = &loaded.sandbox;
    if !sb.enabled {
        return None;
    }
    let list = |items: &[crate::config::policy::Spanned<String>]| {
        let quoted: Vec<String> = items
            .iter()
            .map(|i| format!("'{}'", i.value.replace('\'', "''")))
            .collect();
        format!("[{}]", quoted.join(", "))
    };
    Some(format!(
        "version: 1\nsettings:\n  pinning: off\n  poison_scan: off\n  hide_denied_tools: false\nsandbox:\n  enabled: true\n  required: {}\n  confine_writes: {}\n  network: {}\n  deny_read: {}\n  deny_write: {}\n  allow_read: {}\n  allow_write: {}\n",
        sb.required,
        sb.confine_writes,
        sb.network.word(),
        list(&sb.deny_read),
        list(&sb.deny_write),
        list(&sb.allow_read),
        list(&sb.allow_write),
    ))
}

/// Why `attack` cannot be evaluated under `settings`, if it cannot.
fn skip_reason(attack: &Attack, settings: &Settings) -> Option<String> {
    match attack.requires {
        Requires::RateLimit => match settings.rate_limit {
            None => Some(
                "skipped: the policy sets no settings.rate_limit; enable it (remediation YAML) or scan with --profile strict".into(),
            ),
            Some(l) if u64::from(l.max_calls) + 5 > MAX_BURST => Some(format!(
                "skipped: settings.rate_limit.max_calls is {}; the scan sends at most {MAX_BURST} calls",
                l.max_calls
            )),
            Some(_) => None,
        },
        Requires::CircuitBreaker => match settings.circuit_breaker {
            None => Some(
                "skipped: the policy sets no settings.circuit_breaker; enable it (remediation YAML) or scan with --profile strict".into(),
            ),
            Some(b) if u64::from(b.max_violations) + 1 > MAX_BURST => Some(format!(
                "skipped: settings.circuit_breaker.max_violations is {}; the scan commits at most {MAX_BURST} violations",
                b.max_violations
            )),
            Some(_) => None,
        },
        Requires::Nothing => match attack.delivery {
            Delivery::HugeFrame(_) if settings.max_frame_bytes >= MAX_HUGE_FRAME => Some(format!(
                "skipped: settings.max_frame_bytes is {}; the scan sends frames of at most {MAX_HUGE_FRAME} bytes",
                settings.max_frame_bytes
            )),
            _ => None,
        },
    }
}

fn observe(opts: &ScanOptions, attack: &Attack, side: Side, settings: &Settings) -> Observed {
    let failed = |e: String| Observed {
        outcome: Outcome::Error,
        evidence: None,
        stopped_by: None,
        tools: vec![],
        error: Some(e),
    };
    let home = match FakeHome::create(opts.seed) {
        Ok(h) => h,
        Err(e) => return failed(format!("cannot create the fake home: {e}")),
    };
    match session(opts, attack, side, &home, settings) {
        Ok(o) => o,
        Err(e) => failed(e.to_string()),
    }
}

fn session(
    opts: &ScanOptions,
    attack: &Attack,
    side: Side,
    home: &FakeHome,
    settings: &Settings,
) -> Result<Observed, ClientError> {
    let argv = match (attack.delivery, side) {
        (
            Delivery::Layered {
                project,
                trusted,
                user,
                ..
            },
            Side::Protected,
        ) => {
            layer(opts, home, project, trusted, user).map_err(|e| ClientError::Spawn {
                program: "mcpwall".into(),
                source: e,
            })?;
            opts.argv_layered(home.path())
        }
        _ => opts.argv(side, home.path()),
    };
    let spawn = || Session::spawn(&argv, home.path(), &home.project(), opts.timeout);
    let mut s = spawn()?;
    let (init, tools) = s.handshake()?;
    let tool_names: Vec<String> = tools
        .iter()
        .filter_map(|t| t["name"].as_str().map(str::to_string))
        .collect();
    let tool = attack.tool.unwrap_or("");
    // The request whose fate says what stopped the attack (default: the first refusal).
    let mut decisive: Option<u64> = None;
    // Why nothing came back when the peer refused the attack by closing its input.
    let mut refused: Option<String> = None;
    // For attacks carried by the handshake, the method whose audit events count.
    let method = match attack.delivery {
        Delivery::ToolList | Delivery::SecondSession => Some("tools/list"),
        Delivery::Instructions => Some("initialize"),
        _ => None,
    };
    let received: Vec<String> = match attack.delivery {
        Delivery::Call(args) | Delivery::Layered { args, .. } => {
            let args = substitute(args, home, 0);
            let args: Value = serde_json::from_str(&args).unwrap_or(Value::Null);
            let id = s.next_id();
            decisive = Some(id);
            let frame = serde_json::json!({"jsonrpc":"2.0","id":id,"method":"tools/call",
                "params":{"name":attack.tool.unwrap_or(""),"arguments":args}});
            s.exchange(&frame.to_string())?
        }
        Delivery::Raw(raw) => {
            let id = s.next_id();
            decisive = Some(id);
            s.exchange(&substitute(raw, home, id))?
        }
        Delivery::ToolList => vec![Value::Array(tools.clone()).to_string()],
        Delivery::Instructions => vec![init.to_string()],
        Delivery::SecondSession => {
            s.close();
            s = spawn()?;
            let (_, tools2) = s.handshake()?;
            vec![Value::Array(tools2).to_string()]
        }
        Delivery::PipelinedRugPull(args) => {
            s.close();
            s = spawn()?;
            s.initialize()?;
            let (list, call) = (s.next_id(), s.next_id());
            decisive = Some(call);
            let frames = [
                serde_json::json!({"jsonrpc":"2.0","id":list,"method":"tools/list","params":{}})
                    .to_string(),
                call_frame(call, tool, &substitute(args, home, 0)),
            ];
            s.exchange(&frames.join("\n"))?
        }
        Delivery::PerIdentity => vec![],
        Delivery::Burst(args) => {
            let calls = settings.rate_limit.map_or(0, |l| l.max_calls as usize + 5);
            let frames: Vec<String> = (0..calls)
                .map(|_| call_frame(s.next_id(), tool, &substitute(args, home, 0)))
                .collect();
            s.exchange(&frames.join("\n"))?
        }
        Delivery::Breaker { violation, then } => {
            let violations = settings
                .circuit_breaker
                .map_or(0, |b| b.max_violations as usize + 1);
            let mut frames: Vec<String> = (0..violations)
                .map(|_| call_frame(s.next_id(), tool, &substitute(violation, home, 0)))
                .collect();
            let last = s.next_id();
            decisive = Some(last);
            frames.push(call_frame(last, tool, &substitute(then, home, 0)));
            s.exchange(&frames.join("\n"))?
        }
        Delivery::HugeFrame(args) => {
            let rest = substitute(args, home, 0);
            let rest = rest.trim_start().trim_start_matches('{');
            let pad = "x".repeat(settings.max_frame_bytes + 1);
            let id = s.next_id();
            decisive = Some(id);
            match s.exchange(&call_frame(
                id,
                tool,
                &format!("{{\"pad\":\"{pad}\",{rest}"),
            )) {
                Ok(received) => received,
                // A server (or firewall) that stops reading and closes its input on the
                // oversized frame refused it: the attack's outcome is judged on what
                // arrived (nothing) and on the fake home, and the report says why.
                Err(ClientError::Write(e, _)) if e.kind() == std::io::ErrorKind::BrokenPipe => {
                    refused = Some(
                        "the server closed its input on the oversized frame (broken pipe): the frame was refused, not delivered"
                            .to_string(),
                    );
                    Vec::new()
                }
                Err(e) => return Err(e),
            }
        }
    };
    s.close();
    let (hit, evidence) = judge(attack.success, &received, home, settings);
    let stopped_by = if hit {
        None
    } else {
        stopper(&received, decisive, method, attack, &tool_names, home)
    };
    Ok(Observed {
        outcome: if hit {
            Outcome::Vulnerable
        } else {
            Outcome::Pass
        },
        evidence,
        stopped_by,
        tools: tool_names,
        error: refused,
    })
}

/// A `tools/call` line; `args` is JSON text.
fn call_frame(id: u64, tool: &str, args: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":{},"arguments":{args}}}}}"#,
        Value::String(tool.into())
    )
}

fn substitute(template: &str, home: &FakeHome, id: u64) -> String {
    let home_str = home.path().to_string_lossy();
    template
        .replace("{HOME}", &home_str)
        .replace("{AWS_KEY}", &home.canaries.aws_key_id)
        .replace("{ID}", &id.to_string())
}

fn canary_value(c: Canary, k: &Canaries) -> String {
    match c {
        Canary::SshKey => k.ssh_key.clone(),
        Canary::AwsKeyId => k.aws_key_id.clone(),
        Canary::Token(kind) => k.token(kind).to_string(),
        Canary::PemBody => k.pem_body.clone(),
        Canary::LeakKeyId => k.leak_key_id.clone(),
        Canary::PoisonPhrase => k.poison_phrase.clone(),
        Canary::RugPullPhrase => k.rugpull_phrase.clone(),
        Canary::InjectionPhrase => k.injection_phrase.clone(),
        Canary::InstructionsPhrase => k.instructions_phrase.clone(),
        Canary::SshKeyName => "authorized_keys\nid_rsa".into(),
        Canary::ReadmePhrase => k.readme_phrase.clone(),
    }
}

/// Every string the client received: the raw lines and each decoded string value.
fn strings(received: &[String]) -> Vec<String> {
    fn walk(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::String(s) => out.push(s.clone()),
            Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
            Value::Object(m) => m.values().for_each(|x| walk(x, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    for line in received {
        out.push(line.clone());
        if let Ok(v) = serde_json::from_str::<Value>(line) {
            walk(&v, &mut out);
        }
    }
    out
}

fn excerpt(text: &str, needle: &str) -> String {
    let at = text.find(needle).unwrap_or(0);
    let start = text[..at]
        .char_indices()
        .rev()
        .nth(40)
        .map_or(0, |(i, _)| i);
    let end = (at + needle.len() + 40).min(text.len());
    let end = (end..=text.len())
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(text.len());
    text[start..end].to_string()
}

fn judge(
    success: Success,
    received: &[String],
    home: &FakeHome,
    settings: &Settings,
) -> (bool, Option<String>) {
    match success {
        Success::OverRateLimit => {
            let Some(limit) = settings.rate_limit else {
                return (false, None);
            };
            let phrase = &home.canaries.readme_phrase;
            let answered = received.iter().filter(|l| l.contains(phrase)).count();
            let sent = limit.max_calls as usize + 5;
            (
                answered > limit.max_calls as usize,
                Some(format!(
                    "{answered} of {sent} calls answered; the limit is {} per {} s",
                    limit.max_calls, limit.window_seconds
                )),
            )
        }
        Success::Received(c) => {
            let needle = canary_value(c, &home.canaries);
            strings(received)
                .iter()
                .find(|s| s.contains(&needle))
                .map_or((false, None), |s| {
                    (true, Some(format!("received: {}", excerpt(s, &needle))))
                })
        }
        Success::Executed => side_effect(&home.path().join(".target/executed.log"), "executed"),
        Success::Exfiltrated => side_effect(
            &home.path().join(".target/exfil.log"),
            "exfiltration endpoint received",
        ),
        Success::Written(rel) => {
            let path = home.path().join(rel);
            match std::fs::read_to_string(&path) {
                Ok(t) if t.contains("scan-attacker") => (true, Some(format!("wrote ~/{rel}"))),
                _ => (false, None),
            }
        }
    }
}

fn side_effect(log: &Path, what: &str) -> (bool, Option<String>) {
    match std::fs::read_to_string(log) {
        Ok(t) if !t.trim().is_empty() => (
            true,
            Some(format!("{what}: {}", t.lines().next().unwrap_or(""))),
        ),
        _ => (false, None),
    }
}

/// What kept the attack out, named the way mcpwall's audit log names it: a policy rule
/// (`block-ssh-keys`, `redact-secrets`, ...) or one of mcpwall's own mechanisms
/// (`mcpwall:malformed`, `mcpwall:too_large`, `mcpwall:rate_limit`,
/// `mcpwall:session_suspended`, `mcpwall:tool_poisoned`, `mcpwall:tool_drift`, ...).
/// Taken from `error.data.rule` of the refusal when there is one (of the `decisive`
/// request's answer if given), otherwise from the protected run's audit log.
fn stopper(
    received: &[String],
    decisive: Option<u64>,
    method: Option<&str>,
    attack: &Attack,
    tools: &[String],
    home: &FakeHome,
) -> Option<String> {
    for line in received {
        if let Ok(v) = serde_json::from_str::<Value>(line) {
            let items = match v {
                Value::Array(a) => a,
                other => vec![other],
            };
            for item in items {
                // A refusal whose id could not be read (a malformed frame) has id null.
                if decisive
                    .is_some_and(|d| item["id"] != serde_json::json!(d) && !item["id"].is_null())
                {
                    continue;
                }
                if let Some(rule) = item["error"]["data"]["rule"].as_str() {
                    return Some(rule.to_string());
                }
            }
        }
    }
    if let Some(rule) = audited_stopper(home.path(), decisive, method, attack.tool) {
        return Some(rule);
    }
    if let Some(t) = attack.tool
        && !tools.iter().any(|x| x == t)
    {
        return Some(crate::session::RULE_WITHHELD.into());
    }
    None
}

/// The rule of the first audit event in `home`'s default log directory that changed or
/// refused something about request `id` (or, for the handshake attacks, about an answer to
/// `method`). The handshake's own events (a poisoned tool withheld from every tools/list)
/// do not count for an attack carried by a tool call.
fn audited_stopper(
    home: &Path,
    id: Option<u64>,
    method: Option<&str>,
    tool: Option<&str>,
) -> Option<String> {
    let dir = home.join(".mcpwall/logs");
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(crate::audit::is_own_log_file)
        })
        .collect();
    files.sort();
    let mut events: Vec<Value> = files
        .iter()
        .filter_map(|f| std::fs::read_to_string(f).ok())
        .flat_map(|t| {
            t.lines()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .collect::<Vec<_>>()
        })
        .collect();
    events.sort_by(|a, b| a["ts"].as_str().cmp(&b["ts"].as_str()));
    events
        .iter()
        .filter(|e| {
            matches!(
                e["action"].as_str(),
                Some("deny" | "redact" | "block" | "drop")
            )
        })
        .filter(|e| match (id, method) {
            // The call's own events, or a notification the server sent while answering it.
            (Some(id), _) => {
                e["id"] == serde_json::json!(id)
                    || e["id"] == serde_json::json!(id.to_string())
                    || (e["id"].is_null()
                        && e["method"]
                            .as_str()
                            .is_some_and(|m| m.starts_with("notifications/")))
            }
            (None, Some(m)) => {
                e["method"].as_str() == Some(m)
                    && (m != "tools/list" || tool.is_none() || e["tool"].as_str() == tool)
            }
            (None, None) => true,
        })
        .find_map(|e| e["rule"].as_str().map(str::to_string))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::policy::{BreakerAction, CircuitBreakerSettings, RateLimit};

    fn attack(id: &str) -> &'static Attack {
        Attack::by_id(id).expect("attack exists")
    }

    #[test]
    fn setting_attacks_are_skipped_with_a_reason_unless_the_policy_enables_the_setting() {
        let mut s = Settings::default();
        let reason = skip_reason(attack("RL-001"), &s).expect("skipped");
        assert!(reason.contains("settings.rate_limit") && reason.contains("--profile strict"));
        let reason = skip_reason(attack("CB-001"), &s).expect("skipped");
        assert!(reason.contains("settings.circuit_breaker"));
        assert_eq!(skip_reason(attack("JS-009"), &s), None);
        assert_eq!(skip_reason(attack("PT-001"), &s), None);

        s.rate_limit = Some(RateLimit {
            max_calls: 120,
            window_seconds: 60,
        });
        s.circuit_breaker = Some(CircuitBreakerSettings {
            max_violations: 10,
            window_seconds: 60,
            action: BreakerAction::Suspend,
        });
        assert_eq!(skip_reason(attack("RL-001"), &s), None);
        assert_eq!(skip_reason(attack("CB-001"), &s), None);
    }

    #[test]
    fn limits_too_large_to_exercise_are_skipped_not_flooded() {
        let s = Settings {
            rate_limit: Some(RateLimit {
                max_calls: 1_000_000,
                window_seconds: 1,
            }),
            max_frame_bytes: 1 << 30,
            ..Settings::default()
        };
        let reason = skip_reason(attack("RL-001"), &s).expect("skipped");
        assert!(reason.contains("1000000"), "{reason}");
        let reason = skip_reason(attack("JS-009"), &s).expect("skipped");
        assert!(reason.contains("max_frame_bytes"), "{reason}");
    }

    #[test]
    fn call_frames_are_valid_json_rpc() {
        let line = call_frame(7, "read_file", r#"{"path":"a \"b\""}"#);
        let v: Value = serde_json::from_str(&line).expect("valid JSON");
        assert_eq!(v["id"], 7);
        assert_eq!(v["params"]["name"], "read_file");
        assert_eq!(v["params"]["arguments"]["path"], "a \"b\"");
    }
}
