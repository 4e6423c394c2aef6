//! Golden tests for `mcpwall check` and `mcpwall explain-policy`, run through the real
//! binary with a temporary HOME and project directory and `NO_COLOR=1`.
//!
//! - `golden/check/<case>/frames.jsonl` (+ optional `policy.yaml` given with `-c`,
//!   `project.mcpwall.yml` placed as the project's untrusted `.mcpwall.yml`, and `args`, one
//!   extra argument per line) → `golden/check/<case>/output.snap`: stdout, stderr, exit code.
//! - every built-in pack → `golden/explain/<name>.snap` (`explain-policy --pack <name>`);
//!   a pack without a snapshot fails.
//! - `golden/explain/policies/<name>.yaml` → `golden/explain/<name>.snap`
//!   (`explain-policy -c <name>.yaml`; `project-*.yaml` is placed as the project's untrusted
//!   `.mcpwall.yml` instead), policies that exercise the warnings and the ignored list.
//!
//! Placeholders in inputs (`{{fake:DETECTOR}}`, `${HOME}`, `${PROJECT_DIR}`) are expanded
//! at run time; the temporary paths are written back as `$HOME` and `$PROJECT_DIR` in the
//! snapshots. Update with `INSTA_UPDATE=always cargo test --test golden`.

#[path = "support/fakes.rs"]
mod fakes;
#[path = "support/frames.rs"]
mod frames;
#[path = "support/sandbox.rs"]
mod sandbox;

use sandbox::Sandbox;

use std::path::{Path, PathBuf};

/// Golden runs: placeholders expanded on the way in, sandbox paths scrubbed on the way out,
/// colour off.
trait GoldenSandbox {
    fn expand(&self, text: &str) -> String;
    fn run_golden(&self, args: &[String], stdin: &str) -> (i32, String, String);
}

impl GoldenSandbox for Sandbox {
    fn expand(&self, text: &str) -> String {
        fakes::expand(
            text,
            &self.home().to_string_lossy(),
            &self.project().to_string_lossy(),
        )
    }

    fn run_golden(&self, args: &[String], stdin: &str) -> (i32, String, String) {
        let mut command = self.command(args);
        command.env("NO_COLOR", "1");
        let run = self.run_command(command, stdin);
        (
            run.code,
            scrub_kernel(&self.scrub(&run.stdout)),
            self.scrub(&run.stderr),
        )
    }
}

/// What the kernel offers (namespaces, the Landlock ABI) is this machine's, so the sandbox
/// section's `kernel:` line is scrubbed the way the status golden scrubs its kernel line;
/// the rest of the resolved sandbox is the policy's and stays in the snapshot.
fn scrub_kernel(text: &str) -> String {
    text.split_inclusive('\n')
        .map(|line| match line.strip_prefix("  kernel: ") {
            Some(_) => "  kernel: (this machine's kernel)\n",
            None => line,
        })
        .collect()
}

fn transcript(code: i32, stdout: &str, stderr: &str) -> String {
    format!("exit: {code}\n--- stdout ---\n{stdout}--- stderr ---\n{stderr}")
}

fn snapshot_in(dir: &Path, name: &str, value: &str) {
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path(dir);
    settings.remove_snapshot_suffix();
    settings.set_prepend_module_to_snapshot(false);
    settings.set_omit_expression(true);
    settings.set_sort_maps(true);
    settings.bind(|| insta::assert_snapshot!(name.to_string(), value));
}

/// insta keeps `glob!` failure counts in one process-wide stack, so a snapshot failing in
/// one test while another test runs `glob!` is counted against the wrong test. Snapshot
/// tests take this lock to run one at a time.
static SNAPSHOTS: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SNAPSHOTS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("golden")
}

#[test]
fn check_cases() {
    let _serial = serial();
    insta::glob!("../golden/check", "*/frames.jsonl", |path| {
        let case = path.parent().expect("case dir");
        let sandbox = Sandbox::project_inside_home();
        let mut args = vec!["check".to_string()];
        let policy = case.join("policy.yaml");
        if policy.exists() {
            let text = std::fs::read_to_string(&policy).expect("policy.yaml");
            std::fs::write(sandbox.project().join("policy.yaml"), sandbox.expand(&text))
                .expect("write policy");
            args.extend(["-c".to_string(), "policy.yaml".to_string()]);
        }
        let project_file = case.join("project.mcpwall.yml");
        if project_file.exists() {
            let text = std::fs::read_to_string(&project_file).expect("project.mcpwall.yml");
            std::fs::write(
                sandbox.project().join(".mcpwall.yml"),
                sandbox.expand(&text),
            )
            .expect("write .mcpwall.yml");
        }
        if let Ok(extra) = std::fs::read_to_string(case.join("args")) {
            args.extend(
                extra
                    .lines()
                    .filter(|l| !l.is_empty())
                    .map(|l| sandbox.expand(l)),
            );
        }
        let frames = fakes::expand_in_json(
            &std::fs::read_to_string(path).expect("frames.jsonl"),
            &sandbox.home().to_string_lossy(),
            &sandbox.project().to_string_lossy(),
        );
        let (code, stdout, stderr) = sandbox.run_golden(&args, &frames);
        for detector in [
            "aws-access-key-id",
            "github-token",
            "private-key",
            "slack-token",
        ] {
            let secret = fakes::fake(detector).expect("detector");
            assert!(
                !stdout.contains(&secret) && !stderr.contains(&secret),
                "{}: the {detector} secret was printed",
                case.display()
            );
        }
        snapshot_in(case, "output", &transcript(code, &stdout, &stderr));
    });
}

/// The name `extends` uses for an embedded file.
fn pack_name(path: &str) -> String {
    let stem = path
        .strip_suffix(".yml")
        .or_else(|| path.strip_suffix(".yaml"))
        .expect("pack files are YAML");
    match stem.strip_prefix("rules/") {
        Some(n) => n.to_string(),
        None => stem.to_string(),
    }
}

#[test]
fn explain_every_builtin_pack() {
    let _serial = serial();
    let dir = golden_dir().join("explain");
    for (path, _) in mcpwall::builtin::FILES {
        let name = pack_name(path);
        let sandbox = Sandbox::project_inside_home();
        let (code, stdout, stderr) = sandbox.run_golden(
            &[
                "explain-policy".to_string(),
                "--pack".to_string(),
                name.clone(),
            ],
            "",
        );
        assert_eq!(code, 0, "{path}: {stderr}");
        assert!(
            stdout.contains("\nWarnings (0):\n"),
            "{path}: a shipped pack must have no warnings:\n{stdout}"
        );
        snapshot_in(&dir, &name.replace('/', "__"), &stdout);
    }
}

#[test]
fn explain_custom_policies() {
    let _serial = serial();
    insta::glob!("../golden/explain/policies", "*.yaml", |path| {
        let sandbox = Sandbox::project_inside_home();
        let text = sandbox.expand(&std::fs::read_to_string(path).expect("policy"));
        let stem = path
            .file_stem()
            .expect("stem")
            .to_string_lossy()
            .into_owned();
        // `project-*.yaml` stands for an untrusted project file; the others are given with -c.
        let args: Vec<String> = if stem.starts_with("project-") {
            std::fs::write(sandbox.project().join(".mcpwall.yml"), text).expect("write policy");
            vec!["explain-policy".to_string()]
        } else {
            std::fs::write(sandbox.project().join("policy.yaml"), text).expect("write policy");
            ["explain-policy", "-c", "policy.yaml"]
                .map(String::from)
                .to_vec()
        };
        let (code, stdout, stderr) = sandbox.run_golden(&args, "");
        snapshot_in(
            &golden_dir().join("explain"),
            &stem,
            &transcript(code, &stdout, &stderr),
        );
    });
}

/// Every YAML file in the pack directories is embedded (and so explained above).
#[test]
fn every_pack_file_is_embedded() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut missing = Vec::new();
    for dir in ["rules", "profiles", "servers"] {
        for entry in std::fs::read_dir(root.join(dir)).expect("pack dir") {
            let file = entry
                .expect("entry")
                .file_name()
                .to_string_lossy()
                .into_owned();
            if !(file.ends_with(".yml") || file.ends_with(".yaml")) {
                continue;
            }
            let path = format!("{dir}/{file}");
            let embedded = mcpwall::builtin::FILES.iter().find(|(p, _)| *p == path);
            match embedded {
                None => missing.push(path),
                Some((_, text)) => {
                    let on_disk = std::fs::read_to_string(root.join(&path)).expect("read pack");
                    assert_eq!(
                        *text, on_disk,
                        "{path}: embedded text differs from the file"
                    );
                }
            }
        }
    }
    assert!(missing.is_empty(), "not in builtin::FILES: {missing:?}");
}

/// `explain-policy --format yaml` of every built-in pack loads back to the same policy:
/// the same rules in the same order with the same conditions, the same settings and
/// detectors, and the same verdict on every example.
#[test]
fn yaml_round_trip_of_every_builtin_pack() {
    use mcpwall::config::LoadOptions;
    use mcpwall::frame::{Frame, Limits, Parsed};
    use mcpwall::paths::PathEnv;
    use mcpwall::program::{CallInfo, Program};

    let sandbox = Sandbox::project_inside_home();
    let opts = LoadOptions {
        explicit: None,
        home: sandbox.home().to_path_buf(),
        project_dir: sandbox.project().to_path_buf(),
    };
    let env = PathEnv::new(sandbox.home(), sandbox.project());
    for (path, _) in mcpwall::builtin::FILES {
        let name = pack_name(path);
        let first = mcpwall::cli::explain::load_pack(&name, &opts).expect("pack loads");
        let yaml = mcpwall::cli::explain::render_yaml(&first).expect("yaml renders");
        let second =
            mcpwall::config::load_str("round-trip.yaml", &yaml, &opts).unwrap_or_else(|e| {
                panic!(
                    "{path}: YAML does not load back: {:?}\n{yaml}",
                    miette::Report::new(e)
                )
            });
        assert_eq!(
            shape(&first),
            shape(&second),
            "{path}: policy changed in the round trip"
        );
        assert!(
            second.ignored.is_empty(),
            "{path}: round trip ignored parts"
        );

        let p1 = Program::compile_with(&first, &env).expect("compiles");
        let p2 = Program::compile_with(&second, &env).expect("compiles");
        let (mut s1, mut s2) = (p1.scratch(), p2.scratch());
        let home = sandbox.home().to_string_lossy();
        let project = sandbox.project().to_string_lossy();
        let mut parsed = Parsed::new();
        for rule in &first.rules {
            for ex in rule
                .examples
                .should_match
                .iter()
                .chain(&rule.examples.should_not_match)
            {
                let line = frames::request_line(&fakes::expand_json(ex, &home, &project));
                parsed
                    .parse(line.as_bytes(), &Limits::default())
                    .expect("example parses");
                let frame = Frame::new(line.as_bytes(), &parsed);
                let msg = &frame.messages()[0];
                assert_eq!(
                    p1.evaluate_request(&frame, msg, &mut s1),
                    p2.evaluate_request(&frame, msg, &mut s2),
                    "{path}: verdicts differ after the round trip on {line}"
                );
            }
        }
        for rule in &first.outbound_rules {
            for ex in rule
                .examples
                .should_match
                .iter()
                .chain(&rule.examples.should_not_match)
            {
                let (line, tool, server) =
                    frames::response_line(&fakes::expand_json(ex, &home, &project));
                parsed
                    .parse(line.as_bytes(), &Limits::default())
                    .expect("example parses");
                let frame = Frame::new(line.as_bytes(), &parsed);
                let msg = &frame.messages()[0];
                let call = CallInfo {
                    method: Some("tools/call"),
                    tool: tool.as_deref(),
                    server: &server,
                };
                let a = format!("{:?}", p1.scan_response(&frame, msg, &call, &mut s1));
                let b = format!("{:?}", p2.scan_response(&frame, msg, &call, &mut s2));
                assert_eq!(
                    a, b,
                    "{path}: outcomes differ after the round trip on {line}"
                );
            }
        }
    }
}

/// Everything about a policy that decides verdicts or is shown to users, without spans.
fn shape(p: &mcpwall::config::Policy) -> Vec<String> {
    use mcpwall::config::policy::Matcher;
    let mut out = vec![format!("{:?}", p.settings)];
    for r in &p.rules {
        let conds: Vec<String> = r
            .arguments
            .iter()
            .map(|c| {
                let m = match &c.matcher {
                    Matcher::Regex(x) => format!("regex {}", x.value),
                    Matcher::Pattern(x) => format!("pattern {}", x.value),
                    Matcher::NotUnder { root, .. } => format!("not_under {}", root.display()),
                    Matcher::Secrets => "secrets".to_string(),
                    // As for `not_under`, the written forms are where a path came
                    // from, not what it is: the rendered YAML writes paths expanded.
                    Matcher::Command(x) => {
                        let mut clauses = x.value.clone();
                        for paths in clauses.iter_mut().filter_map(|c| c.paths.as_mut()) {
                            paths.not_under_written.clear();
                            paths.ancestors_of_written.clear();
                        }
                        format!("command {clauses:?}")
                    }
                };
                format!("{:?} {m}", c.selector)
            })
            .collect();
        out.push(format!(
            "in {} {} {:?} {conds:?} {:?} {:?} {:?} {:?} {:?} {:?}",
            r.name.value,
            r.method.value,
            r.tool.as_ref().map(|t| &t.value),
            r.action,
            r.message,
            r.description,
            r.why,
            r.examples.should_match,
            r.examples.should_not_match
        ));
    }
    for r in &p.outbound_rules {
        let v = |x: &Option<mcpwall::config::policy::Spanned<String>>| {
            x.as_ref().map(|s| s.value.clone())
        };
        let list = |xs: &[mcpwall::config::policy::Spanned<String>]| {
            xs.iter().map(|s| s.value.clone()).collect::<Vec<_>>()
        };
        out.push(format!(
            "out {} {:?} {:?} {:?} {} {:?} {:?} {:?} {:?} {:?} {:?} {:?} {:?} {:?}",
            r.name.value,
            v(&r.method),
            v(&r.tool),
            v(&r.server),
            r.secrets,
            list(&r.response_contains),
            list(&r.response_contains_regex),
            r.response_size_exceeds,
            r.action,
            r.message,
            r.description,
            r.why,
            r.examples.should_match,
            r.examples.should_not_match
        ));
    }
    for s in &p.secret_patterns {
        out.push(format!(
            "secret {} {} {:?}",
            s.name.value, s.regex.value, s.entropy_threshold
        ));
    }
    for d in &p.disabled_secrets {
        out.push(format!("disabled {}", d.value));
    }
    out
}

/// The same round trip for the hand-written policies, which use secret patterns,
/// `disable`, `not_under` and outbound conditions the packs do not.
#[test]
fn yaml_round_trip_of_custom_policies() {
    use mcpwall::config::LoadOptions;

    let sandbox = Sandbox::project_inside_home();
    let opts = LoadOptions {
        explicit: None,
        home: sandbox.home().to_path_buf(),
        project_dir: sandbox.project().to_path_buf(),
    };
    let dir = golden_dir().join("explain").join("policies");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).expect("policies dir") {
        let path = entry.expect("entry").path();
        let text = sandbox.expand(&std::fs::read_to_string(&path).expect("policy"));
        let first = mcpwall::config::load_str("policy.yaml", &text, &opts).expect("policy loads");
        let yaml = mcpwall::cli::explain::render_yaml(&first).expect("yaml renders");
        let second =
            mcpwall::config::load_str("round-trip.yaml", &yaml, &opts).unwrap_or_else(|e| {
                panic!(
                    "{}: YAML does not load back: {:?}\n{yaml}",
                    path.display(),
                    miette::Report::new(e)
                )
            });
        assert_eq!(
            shape(&first),
            shape(&second),
            "{}: changed in the round trip",
            path.display()
        );
        n += 1;
    }
    assert!(n >= 3);
}

/// Every profile followed by every server pack (the way users combine them) explains with no
/// shadowed, redundant or never-matching rule.
#[test]
fn profiles_with_server_packs_have_no_warnings() {
    use mcpwall::config::LoadOptions;

    let sandbox = Sandbox::project_inside_home();
    let opts = LoadOptions {
        explicit: None,
        home: sandbox.home().to_path_buf(),
        project_dir: sandbox.project().to_path_buf(),
    };
    let names: Vec<String> = mcpwall::builtin::FILES
        .iter()
        .map(|(p, _)| pack_name(p))
        .collect();
    let servers: Vec<&String> = names.iter().filter(|n| n.starts_with("servers/")).collect();
    let mut firsts: Vec<&str> = names
        .iter()
        .filter(|n| n.starts_with("profiles/"))
        .map(String::as_str)
        .collect();
    firsts.push("default");
    let mut problems = Vec::new();
    for first in firsts {
        let list = std::iter::once(first.to_string())
            .chain(servers.iter().map(|s| s.to_string()))
            .collect::<Vec<_>>()
            .join(", ");
        let text = format!("version: 1\nextends: [{list}]\n");
        let policy =
            mcpwall::config::load_str("combo.yaml", &text, &opts).expect("combination loads");
        for w in mcpwall::cli::explain::warnings(&policy) {
            problems.push(format!("[{list}]: {w}"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
