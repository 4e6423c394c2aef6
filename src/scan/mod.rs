//! `mcpwall scan`: attack an MCP server directly and through mcpwall, attack by attack.
//!
//! Every attack runs twice (baseline and protected), each time in a fresh fake home
//! ([`fakehome`]), with a small synchronous client ([`client`]). The outcome is decided by an
//! exact criterion (a canary received, a side effect in the fake home), never by the text
//! of an error.

pub mod attacks;
pub mod client;
pub mod compare;
pub mod fakehome;
pub mod report;
pub mod target;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;

use attacks::{Attack, Canary, Delivery, Success};
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
}

/// Which side of the comparison a session is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Baseline,
    Protected,
}

/// What one session observed.
struct Observed {
    outcome: Outcome,
    evidence: Option<String>,
    stopped_by: Option<String>,
    tools: Vec<String>,
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
            Side::Protected => {
                let mut v = vec![
                    self.exe.to_string_lossy().into_owned(),
                    "-c".into(),
                    self.policy.to_string_lossy().into_owned(),
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

/// Run every selected attack; `progress` is called after each with (done, total, id).
pub fn run(opts: &ScanOptions, mut progress: impl FnMut(usize, usize, &str)) -> Report {
    let selected: Vec<&Attack> = attacks::ATTACKS.iter().collect();
    let total = selected.len();
    let mut results = Vec::with_capacity(total);
    for (i, attack) in selected.into_iter().enumerate() {
        let started = Instant::now();
        let skipped =
            !opts.only.is_empty() && !opts.only.iter().any(|o| o.eq_ignore_ascii_case(attack.id));
        let result = if skipped {
            AttackResult::new(attack, Outcome::Skipped, Outcome::Skipped)
        } else if matches!(attack.delivery, Delivery::PerIdentity) {
            let mut r = AttackResult::new(attack, Outcome::NotApplicable, Outcome::NotApplicable);
            r.note = Some("per-identity policy needs an HTTP transport; this scan is stdio".into());
            r
        } else {
            let base = observe(opts, attack, Side::Baseline);
            let applicable = match attack.tool {
                Some(t) => base.error.is_some() || base.tools.iter().any(|x| x == t),
                None => true,
            };
            if !applicable {
                let mut r =
                    AttackResult::new(attack, Outcome::NotApplicable, Outcome::NotApplicable);
                r.note = Some(format!(
                    "the target has no {} tool",
                    attack.tool.unwrap_or("")
                ));
                r
            } else {
                let prot = observe(opts, attack, Side::Protected);
                let mut r = AttackResult::new(attack, base.outcome, prot.outcome);
                r.baseline_evidence = base.evidence;
                r.evidence = prot.evidence;
                r.stopped_by = match prot.outcome {
                    Outcome::Pass if base.outcome == Outcome::Pass => Some("server".into()),
                    Outcome::Pass => prot.stopped_by.or(Some("mcpwall".into())),
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
    Report::new(opts, results)
}

fn observe(opts: &ScanOptions, attack: &Attack, side: Side) -> Observed {
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
    match session(opts, attack, side, &home) {
        Ok(o) => o,
        Err(e) => failed(e.to_string()),
    }
}

fn session(
    opts: &ScanOptions,
    attack: &Attack,
    side: Side,
    home: &FakeHome,
) -> Result<Observed, ClientError> {
    let argv = opts.argv(side, home.path());
    let spawn = || Session::spawn(&argv, home.path(), &home.project(), opts.timeout);
    let mut s = spawn()?;
    let (init, tools) = s.handshake()?;
    let tool_names: Vec<String> = tools
        .iter()
        .filter_map(|t| t["name"].as_str().map(str::to_string))
        .collect();
    let received: Vec<String> = match attack.delivery {
        Delivery::Call(args) => {
            let args = substitute(args, home, 0);
            let args: Value = serde_json::from_str(&args).unwrap_or(Value::Null);
            let id = s.next_id();
            let frame = serde_json::json!({"jsonrpc":"2.0","id":id,"method":"tools/call",
                "params":{"name":attack.tool.unwrap_or(""),"arguments":args}});
            s.exchange(&frame.to_string())?
        }
        Delivery::Raw(raw) => {
            let id = s.next_id();
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
        Delivery::PerIdentity => vec![],
    };
    s.close();
    let (hit, evidence) = judge(attack.success, &received, home);
    let stopped_by = if hit {
        None
    } else {
        stopper(&received, attack, &tool_names)
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
        error: None,
    })
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

fn judge(success: Success, received: &[String], home: &FakeHome) -> (bool, Option<String>) {
    match success {
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

/// The rule named in a denial, or what else kept the attack out.
fn stopper(received: &[String], attack: &Attack, tools: &[String]) -> Option<String> {
    for line in received {
        if let Ok(v) = serde_json::from_str::<Value>(line) {
            let items = match v {
                Value::Array(a) => a,
                other => vec![other],
            };
            for item in items {
                if let Some(rule) = item["error"]["data"]["rule"].as_str() {
                    return Some(rule.to_string());
                }
            }
        }
    }
    if received.iter().any(|l| l.contains("[REDACTED BY MCPWALL")) {
        return Some("redaction".into());
    }
    if let Some(t) = attack.tool
        && !tools.iter().any(|x| x == t)
    {
        return Some("tool withheld".into());
    }
    None
}
