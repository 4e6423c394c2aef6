//! Judging argument text made of many path-like words costs time linear in its length:
//! `/home/u/.sshx/id_rsa.pubx/../.envx` repeated once took `check` 6 s for 1 MB and 26 s
//! for 2 MB (a file-system look-up per `..`, each over the whole path so far), and behind
//! `mcpwall serve` one such call stalled every identity.
//!
//! The test judges each adversarial text at N and 2N bytes with the default pack, in
//! process, and requires the larger to cost at most about twice the smaller (the best of
//! three runs each, and a pair that looks slow measured again, so a busy machine does not
//! decide); quadratic cost would be four times.

use std::time::{Duration, Instant};

use mcpwall::config::{self, LoadOptions};
use mcpwall::frame::{Frame, Limits, Parsed};
use mcpwall::paths::PathEnv;
use mcpwall::program::Program;
use serde_json::json;

fn program() -> (tempfile::TempDir, Program) {
    let dir = tempfile::tempdir().expect("temp dir");
    let home = dir.path().join("home");
    let project = home.join("projects/app");
    std::fs::create_dir_all(&project).expect("project dir");
    let opts = LoadOptions {
        explicit: None,
        home: home.clone(),
        project_dir: project.clone(),
    };
    let policy = config::load_str("cost.yml", "version: 1\nextends: [default]\n", &opts)
        .unwrap_or_else(|e| panic!("{:?}", miette::Report::new(e)));
    let env = PathEnv::new(&home, &project);
    let program = Program::compile_with(&policy, &env)
        .unwrap_or_else(|e| panic!("{:?}", miette::Report::new(e)));
    (dir, program)
}

/// The best of three judgements of `arguments` as a `tools/call` of `tool`.
fn judge_time(program: &Program, tool: &str, arguments: serde_json::Value) -> Duration {
    let line = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": tool, "arguments": arguments}})
    .to_string();
    let limits = Limits {
        max_frame_bytes: 64 << 20,
        ..Limits::default()
    };
    let mut parsed = Parsed::new();
    parsed
        .parse(line.as_bytes(), &limits)
        .expect("frame parses");
    let frame = Frame::new(line.as_bytes(), &parsed);
    (0..3)
        .map(|_| {
            let mut scratch = program.scratch();
            let started = Instant::now();
            let _ = program.evaluate_request(&frame, &frame.messages()[0], &mut scratch);
            started.elapsed()
        })
        .min()
        .expect("three runs")
}

fn repeated(unit: &str, len: usize) -> String {
    unit.repeat(len / unit.len() + 1)[..len].to_string()
}

#[test]
fn doubling_path_like_text_at_most_doubles_the_time_to_judge_it() {
    let (_dir, program) = program();
    let n = 256 << 10;
    let mut slow = Vec::new();
    for unit in [
        "/home/u/.sshx/id_rsa.pubx/../.envx ",
        "/home/u/x/../y",
        "/home/u/.sshx/id_rsa.pubx/../.envx",
        "a/../b/../c ",
    ] {
        for (tool, key) in [
            ("write_file", "content"),
            ("read_file", "path"),
            ("run_command", "command"),
        ] {
            // Twice the work, plus room for caches that no longer fit and a busy machine;
            // quadratic cost would be four times. A pair that looks slow is measured
            // again (up to three pairs): a load spike lands on one pair, a quadratic
            // cost on every one.
            let mut line = String::new();
            let linear = (0..3).any(|_| {
                let small = judge_time(&program, tool, json!({ key: repeated(unit, n) }));
                let large = judge_time(&program, tool, json!({ key: repeated(unit, 2 * n) }));
                line = format!(
                    "{unit:?} as {tool}.{key}: {small:?} for {n} bytes, {large:?} for {} bytes",
                    2 * n
                );
                eprintln!("{line}");
                large <= small * 3 + Duration::from_millis(20)
            });
            if !linear {
                slow.push(line);
            }
        }
    }
    assert!(slow.is_empty(), "superlinear:\n{}", slow.join("\n"));
}
