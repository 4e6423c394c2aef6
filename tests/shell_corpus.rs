//! The shell corpus of issue 23: everyday developer commands the default pack must allow
//! and evasions it must deny, sent as `run_command {command}` from a project inside the
//! home directory (where real projects live).
//!
//! - `tests/corpus/shell/benign.txt`: commands written for this corpus (builds, tests,
//!   git, package managers, containers, file handling inside the project);
//! - `tests/corpus/shell/evasions.txt`: the spellings of issue 23 and more of each class.
//!
//! One command per line; `⏎` stands for a newline (here-documents). The test prints recall
//! and the false-positive rate; it fails on any allowed evasion or on more than 0.5% of
//! benign commands denied.

use std::path::Path;

use mcpwall::config::{self, LoadOptions};
use mcpwall::frame::{Frame, Limits, Parsed};
use mcpwall::paths::PathEnv;
use mcpwall::program::Program;
use mcpwall::verdict::Decision;
use serde_json::json;

fn lines(name: &str) -> Vec<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/corpus/shell")
        .join(name);
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with("# "))
        .map(|l| l.replace('⏎', "\n"))
        .collect()
}

struct Judge {
    _dir: tempfile::TempDir,
    program: Program,
}

impl Judge {
    fn new(policy: &str) -> Judge {
        let dir = tempfile::tempdir().expect("temp dir");
        let home = dir.path().join("home");
        let project = home.join("projects/app");
        std::fs::create_dir_all(&project).expect("project dir");
        let opts = LoadOptions {
            explicit: None,
            home: home.clone(),
            project_dir: project.clone(),
        };
        let policy = config::load_str("corpus.yml", policy, &opts)
            .unwrap_or_else(|e| panic!("{:?}", miette::Report::new(e)));
        let env = PathEnv::new(&home, &project);
        let program = Program::compile_with(&policy, &env)
            .unwrap_or_else(|e| panic!("{:?}", miette::Report::new(e)));
        Judge { _dir: dir, program }
    }

    fn denies(&self, command: &str) -> Option<String> {
        let line = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "run_command", "arguments": {"command": command}}})
        .to_string();
        let mut parsed = Parsed::new();
        parsed
            .parse(line.as_bytes(), &Limits::default())
            .expect("frame parses");
        let frame = Frame::new(line.as_bytes(), &parsed);
        let mut scratch = self.program.scratch();
        match self
            .program
            .evaluate_request(&frame, &frame.messages()[0], &mut scratch)
        {
            Decision::DeniedBy(r) => Some(self.program.rule(r).name.clone()),
            Decision::Default { allow: false } => Some("default_action".into()),
            _ => None,
        }
    }
}

#[test]
fn default_pack_denies_every_evasion_and_allows_everyday_commands() {
    let judge = Judge::new("version: 1\nextends: [default]\n");
    let benign = lines("benign.txt");
    let evasions = lines("evasions.txt");
    assert!(benign.len() >= 300, "{} benign commands", benign.len());

    let false_positives: Vec<String> = benign
        .iter()
        .filter_map(|c| judge.denies(c).map(|rule| format!("{rule}: {c}")))
        .collect();
    let missed: Vec<&String> = evasions
        .iter()
        .filter(|c| judge.denies(c).is_none())
        .collect();

    let recall = 100.0 * (evasions.len() - missed.len()) as f64 / evasions.len() as f64;
    let fp_rate = 100.0 * false_positives.len() as f64 / benign.len() as f64;
    eprintln!(
        "shell corpus, default pack: recall {recall:.1}% ({} of {} evasions denied), \
         false positives {fp_rate:.2}% ({} of {} everyday commands denied)",
        evasions.len() - missed.len(),
        evasions.len(),
        false_positives.len(),
        benign.len()
    );
    for fp in &false_positives {
        eprintln!("  denied: {fp}");
    }
    assert!(missed.is_empty(), "evasions allowed:\n{missed:#?}");
    assert!(
        fp_rate <= 0.5,
        "false positives over 0.5%:\n{}",
        false_positives.join("\n")
    );
}
