//! Every `mcpwall` command written in a fenced block of README.md and docs/*.md is run, so
//! the documentation cannot drift from the command line: a verb, flag or value the binary
//! does not accept (a usage error, an unknown command) fails this test with the file and
//! line.
//!
//! Each command runs through `sh -c` in a temporary HOME and project, with stdin closed,
//! a PATH holding this mcpwall and a handful of shell tools only (so no example reaches a
//! real server or the network: `npx`, `python` and friends are not found), every URL
//! pointed at a closed loopback port and every listener at an ephemeral loopback one.
//! Commands that keep running (`serve`, `log -f`, `scan`) are stopped after a few seconds:
//! by then the command line has been parsed. Synopses with placeholders (`<server>`,
//! `[-c FILE]`) and the output lines shown with them (`mcpwall: serving …`) are not commands.

#![cfg(unix)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const RUN_FOR: Duration = Duration::from_secs(4);

/// A command found in the documentation.
#[derive(Debug, Clone)]
struct Example {
    file: String,
    line: usize,
    command: String,
}

fn doc_files() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = vec![root.join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    files.extend(docs);
    files
}

/// The shell commands of fenced `sh`/`bash`/`console`/unlabelled blocks that run mcpwall,
/// with `\` continuations joined and `$ ` prompts removed.
fn examples(file: &Path) -> Vec<Example> {
    let text = std::fs::read_to_string(file).unwrap();
    let name = file
        .strip_prefix(env!("CARGO_MANIFEST_DIR"))
        .unwrap_or(file)
        .display()
        .to_string();
    let mut out = Vec::new();
    let mut fence: Option<String> = None;
    let mut pending: Option<(usize, String)> = None;
    for (i, raw) in text.lines().enumerate() {
        let trimmed = raw.trim_start();
        if let Some(info) = trimmed.strip_prefix("```") {
            fence = match fence {
                None => Some(info.trim().to_string()),
                Some(_) => None,
            };
            pending = None;
            continue;
        }
        let Some(lang) = &fence else { continue };
        if !matches!(lang.as_str(), "sh" | "bash" | "console" | "shell" | "") {
            continue;
        }
        let line = trimmed.strip_prefix("$ ").unwrap_or(trimmed);
        let (start, mut command) = match pending.take() {
            Some((start, so_far)) => (start, so_far + " " + line),
            None => (i + 1, line.to_string()),
        };
        if let Some(head) = command.strip_suffix('\\') {
            command = head.to_string();
            pending = Some((start, command));
            continue;
        }
        let runs_mcpwall = command.starts_with("mcpwall ")
            || command == "mcpwall"
            || command.contains("| mcpwall ");
        let is_output = command.starts_with("mcpwall:");
        let is_synopsis = command.contains('<') || command.contains(" [");
        if runs_mcpwall && !is_output && !is_synopsis {
            out.push(Example {
                file: name.clone(),
                line: start,
                command,
            });
        }
    }
    out
}

/// Point every URL at a closed loopback port and every listener at an ephemeral loopback
/// one: no example reaches the network.
fn confine(command: &str) -> String {
    let mut out = String::new();
    let mut rest = command;
    while let Some(at) = rest.find("://") {
        let scheme_start = rest[..at]
            .rfind(|c: char| !c.is_ascii_alphanumeric())
            .map_or(0, |i| i + 1);
        let host_end = rest[at + 3..]
            .find(['/', ' ', '\'', '"'])
            .map_or(rest.len(), |i| at + 3 + i);
        out.push_str(&rest[..scheme_start]);
        out.push_str("http://127.0.0.1:9");
        rest = &rest[host_end..];
    }
    out.push_str(rest);
    out.replace("0.0.0.0:8443", "127.0.0.1:0")
        .replace("--allow-remote", "")
}

/// A PATH directory with only the shell tools the examples pipe through.
fn tool_dir(base: &Path) -> PathBuf {
    let dir = base.join("bin");
    std::fs::create_dir_all(&dir).unwrap();
    for tool in ["sh", "cat", "printf", "echo", "true"] {
        for prefix in ["/usr/bin", "/bin"] {
            let found = Path::new(prefix).join(tool);
            if found.exists() {
                std::os::unix::fs::symlink(&found, dir.join(tool)).unwrap();
                break;
            }
        }
    }
    dir
}

/// Run one example; `Err` with what went wrong when the binary refused its command line.
fn run(example: &Example) -> Result<(), String> {
    let base = tempfile::tempdir().unwrap();
    let home = base.path().join("home");
    let project = base.path().join("project");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&project).unwrap();
    let bin = Path::new(env!("CARGO_BIN_EXE_mcpwall")).parent().unwrap();
    let path = format!("{}:{}", bin.display(), tool_dir(base.path()).display());
    let command = confine(&example.command);
    let mut child = {
        use std::os::unix::process::CommandExt;
        Command::new("/bin/sh")
            .arg("-c")
            .arg(&command)
            .current_dir(&project)
            .env_clear()
            .env("HOME", &home)
            .env("PATH", path)
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .unwrap()
    };
    let group = child.id();
    let stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = std::io::Read::read_to_string(&mut std::io::BufReader::new(stderr), &mut text);
        text
    });
    let deadline = Instant::now() + RUN_FOR;
    while child.try_wait().unwrap().is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    // Still running (a server, a follower, a scan): stop it and all it started.
    let _ = Command::new("kill")
        .args(["-KILL", "--", &format!("-{group}")])
        .stderr(Stdio::null())
        .status();
    let _ = child.wait();
    let stderr = reader.join().unwrap();
    let refused = stderr.contains("Usage: mcpwall")
        || stderr.contains("unknown command")
        || stderr.contains("mcpwall: not found");
    if refused {
        Err(format!(
            "{}:{}: `{}`\n{}",
            example.file, example.line, example.command, stderr
        ))
    } else {
        Ok(())
    }
}

#[test]
fn every_documented_command_line_is_accepted() {
    let all: Vec<Example> = doc_files().iter().flat_map(|f| examples(f)).collect();
    // The extraction itself must keep finding the examples.
    assert!(
        all.len() >= 40,
        "only {} examples found: {all:#?}",
        all.len()
    );
    let failures: Vec<String> = std::thread::scope(|s| {
        let chunks: Vec<&[Example]> = all.chunks(all.len().div_ceil(4)).collect();
        let handles: Vec<_> = chunks
            .into_iter()
            .map(|chunk| {
                s.spawn(move || {
                    chunk
                        .iter()
                        .filter_map(|e| run(e).err())
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    assert!(
        failures.is_empty(),
        "{} of {} documented commands are refused:\n\n{}",
        failures.len(),
        all.len(),
        failures.join("\n")
    );
}

#[test]
fn urls_and_listeners_stay_on_loopback() {
    assert_eq!(
        confine("mcpwall serve --upstream https://mcp.example.com/mcp"),
        "mcpwall serve --upstream http://127.0.0.1:9/mcp"
    );
    assert_eq!(
        confine("mcpwall serve --listen 0.0.0.0:8443 --allow-remote --tls-cert c"),
        "mcpwall serve --listen 127.0.0.1:0  --tls-cert c"
    );
}

/// The check itself can fail: a flag or verb the binary does not know is caught.
#[test]
fn a_command_line_the_binary_refuses_is_caught() {
    for command in ["mcpwall status --no-such-flag", "mcpwall stauts"] {
        let example = Example {
            file: "t.md".into(),
            line: 1,
            command: command.into(),
        };
        assert!(run(&example).is_err(), "{command} was not caught");
    }
    let fine = Example {
        file: "t.md".into(),
        line: 1,
        command: "mcpwall status".into(),
    };
    assert!(run(&fine).is_ok());
}
