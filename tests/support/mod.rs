//! Shared test helpers: a temporary HOME and project dir, a small YAML test-policy
//! loader, frame parsing and the naive reference interpreter.
#![allow(dead_code)]

pub mod packs;
pub mod reference;

use std::path::PathBuf;

use mcpwall::frame::{Frame, Limits, Parsed};
use mcpwall::paths::PathEnv;
use mcpwall::program::{CallInfo, Program, Scratch};
use mcpwall::verdict::{Decision, Outcome};

/// A temporary HOME and project directory; never the real ones.
pub struct TestEnv {
    _dir: tempfile::TempDir,
    pub home: PathBuf,
    pub project: PathBuf,
    pub env: PathEnv,
}

impl TestEnv {
    pub fn new() -> TestEnv {
        let dir = tempfile::tempdir().expect("temp dir");
        let base = dir.path().canonicalize().expect("canonical temp dir");
        let home = base.join("home");
        let project = base.join("proj");
        std::fs::create_dir_all(home.join(".ssh")).unwrap();
        std::fs::create_dir_all(project.join("src")).unwrap();
        std::fs::create_dir_all(base.join("outside")).unwrap();
        #[cfg(unix)]
        std::os::unix::fs::symlink(base.join("outside"), project.join("escape")).unwrap();
        #[cfg(unix)]
        std::os::unix::fs::symlink(home.join(".ssh"), project.join("keys")).unwrap();
        let env = PathEnv::new(&home, &project);
        TestEnv {
            _dir: dir,
            home,
            project,
            env,
        }
    }

    pub fn env_ref(&self) -> &PathEnv {
        &self.env
    }

    /// Replace `{home}`, `{project}` and the fake-credential placeholders in a test text.
    pub fn fill(&self, text: &str) -> String {
        text.replace("{home}", &self.home.to_string_lossy())
            .replace("{project}", &self.project.to_string_lossy())
            .replace("{aws_u}", &format!("\\u0041{}", &fake_aws()[1..]))
            .replace("{aws}", &fake_aws())
            .replace("{ghp}", &fake_github())
    }
}

/// Load a policy text with the real loader, as the file `test.yml` given with `-c`;
/// `{home}`, `{project}` and the fake-credential placeholders are filled in first.
pub fn load_policy(yaml: &str, env: &TestEnv) -> mcpwall::config::Policy {
    let opts = mcpwall::config::LoadOptions {
        explicit: None,
        home: env.home.clone(),
        project_dir: env.project.clone(),
    };
    let filled = env.fill(yaml);
    let text = match filled.strip_prefix('{') {
        Some(rest) => format!("{{version: 1, {rest}"),
        None => format!("version: 1\n{filled}"),
    };
    mcpwall::config::load_str("test.yml", &text, &opts)
        .unwrap_or_else(|e| panic!("test policy does not load: {e:?}\n{text}"))
}

/// What the outbound side is answering, for a test row.
#[derive(Debug, Clone, Copy)]
pub struct Call {
    pub method: Option<&'static str>,
    pub tool: Option<&'static str>,
    pub server: &'static str,
}

impl Call {
    pub fn info(&self) -> CallInfo<'static> {
        CallInfo {
            method: self.method,
            tool: self.tool,
            server: self.server,
        }
    }
}

pub fn parse(line: &[u8], parsed: &mut Parsed) {
    parsed.parse(line, &Limits::default()).unwrap_or_else(|e| {
        panic!(
            "test frame does not parse: {e}\n{}",
            String::from_utf8_lossy(line)
        )
    });
}

/// The compiled program's inbound decisions, one per message, as
/// `allow:RULE`, `deny:RULE`, `default:allow`, `default:deny` or `plumbing`.
pub fn engine_inbound(program: &Program, line: &str, scratch: &mut Scratch) -> Vec<String> {
    let mut parsed = Parsed::new();
    parse(line.as_bytes(), &mut parsed);
    let frame = Frame::new(line.as_bytes(), &parsed);
    frame
        .messages()
        .iter()
        .map(|m| {
            let v = program.evaluate_request(&frame, m, scratch);
            match v {
                Decision::AllowedBy(r) => format!("allow:{}", program.rule(r).name),
                Decision::DeniedBy(r) => format!("deny:{}", program.rule(r).name),
                Decision::AskedBy(r) => format!("ask:{}", program.rule(r).name),
                Decision::DefaultAsk => "default:ask".to_string(),
                Decision::Default { allow: true } => "default:allow".to_string(),
                Decision::Default { allow: false } => "default:deny".to_string(),
                Decision::Plumbing => "plumbing".to_string(),
                Decision::NulInPath => "nul_in_path".to_string(),
                Decision::UnreadablePath => "unreadable_path".to_string(),
            }
        })
        .collect()
}

/// The compiled program's outbound outcomes, one per message, as
/// `[log:A,B ]pass`, `block:RULE` or `redact:RULE[text|text]`.
pub fn engine_outbound(
    program: &Program,
    line: &str,
    call: &Call,
    scratch: &mut Scratch,
) -> Vec<String> {
    let mut parsed = Parsed::new();
    parse(line.as_bytes(), &mut parsed);
    let frame = Frame::new(line.as_bytes(), &parsed);
    frame
        .messages()
        .iter()
        .map(|m| {
            let outcome = program.scan_response(&frame, m, &call.info(), scratch);
            let body = describe_outcome(program, &outcome, line.as_bytes());
            with_logged(program, scratch.logged(), body)
        })
        .collect()
}

/// Like [`engine_outbound`] for a non-JSON line.
pub fn engine_text(program: &Program, line: &str, call: &Call, scratch: &mut Scratch) -> String {
    let outcome = program.scan_text(line.as_bytes(), &call.info(), scratch);
    let body = describe_outcome(program, &outcome, line.as_bytes());
    with_logged(program, scratch.logged(), body)
}

fn describe_outcome(program: &Program, outcome: &Outcome<'_>, raw: &[u8]) -> String {
    match outcome {
        Outcome::Pass => "pass".to_string(),
        Outcome::Block { rule } => format!("block:{}", program.outbound_rule(*rule).name),
        Outcome::Redact { rule, redactions } => {
            let texts: Vec<String> = redactions
                .iter()
                .map(|r| String::from_utf8_lossy(&raw[r.raw.clone()]).into_owned())
                .collect();
            let mut texts = texts;
            texts.sort();
            format!(
                "redact:{}[{}]",
                program.outbound_rule(*rule).name,
                texts.join("|")
            )
        }
    }
}

fn with_logged(program: &Program, logged: &[mcpwall::verdict::RuleId], body: String) -> String {
    if logged.is_empty() {
        return body;
    }
    let names: Vec<&str> = logged
        .iter()
        .map(|&r| program.outbound_rule(r).name.as_str())
        .collect();
    format!("log:{} {body}", names.join(","))
}

/// A fake AWS access key id, built at run time so no key-shaped literal is in the repo.
pub fn fake_aws() -> String {
    format!("{}{}", ["AK", "IA"].concat(), "QZ7XW2M4RT5YV6NB")
}

/// A fake GitHub token, built at run time.
pub fn fake_github() -> String {
    format!(
        "{}_{}",
        ["gh", "p"].concat(),
        "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    )
}
