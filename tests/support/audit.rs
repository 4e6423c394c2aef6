//! Set-up shared by the audit log's tests: the real writer with a name, events of a known
//! shape, the directory's day files and `mcpwall log verify` on it. Include it with
//! `#[path = "support/audit.rs"] mod audit;` next to `support/sandbox.rs`.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use mcpwall::audit::{Audit, AuditConfig, AuditEvent, Direction, NoNames, RuleRef, Verdict};
use mcpwall::session::ids::IdText;

use super::sandbox::{Run, Sandbox};

pub const DAY: u64 = 86_400;

/// Days since the epoch, now.
pub fn today() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
        / DAY
}

/// The real writer on `dir`, naming itself `server`.
pub fn start(dir: &Path, server: &str) -> Audit {
    Audit::start(
        AuditConfig {
            dir: dir.to_path_buf(),
            session: "s".into(),
            server: server.into(),
            retention: None,
        },
        Arc::new(NoNames),
    )
}

/// Event `i` at `ts`: a call to `read_file`, every third a denied `run_command`.
pub fn event(ts: SystemTime, i: u64) -> AuditEvent {
    let deny = i % 3 == 2;
    let mut e = AuditEvent::new(
        Direction::Inbound,
        if deny { Verdict::Deny } else { Verdict::Allow },
    );
    e.ts = ts;
    e.id = Some(IdText::new(i.to_string().as_bytes()));
    e.method = Some("tools/call".into());
    e.tool = Some(if deny { "run_command" } else { "read_file" }.into());
    if deny {
        e.rule = Some(RuleRef::Builtin("mcpwall:default_action"));
        e.request = Some("cmd: rm -…[6 chars]".into());
    }
    e
}

/// This mcpwall's day files of `dir`, oldest first.
pub fn day_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".audit.jsonl"))
        .collect();
    files.sort();
    files
}

/// `mcpwall log verify --dir DIR` and `extra` arguments.
pub fn verify(sandbox: &Sandbox, dir: &Path, extra: &[&str]) -> Run {
    let mut args = vec!["log", "verify", "--dir", dir.to_str().unwrap()];
    args.extend_from_slice(extra);
    sandbox.run(&args, "")
}

pub fn lines_of(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

pub fn write_lines(path: &Path, lines: &[String]) {
    let mut text = lines.join("\n");
    text.push('\n');
    std::fs::write(path, text).unwrap();
}

pub fn seal_of(day_file: &Path) -> PathBuf {
    day_file.with_extension("").with_extension("audit.seal")
}

pub fn name(path: &Path) -> String {
    path.file_name().unwrap().to_string_lossy().into_owned()
}
