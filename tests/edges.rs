//! Issue 24's rough edges, one test each (named `r24_…`): what a new user hit in
//! `init`, `wrap`/`unwrap`, `status`, `doctor`, `check`, `trust`, `scan` and the command
//! line itself. Every test drives the built binary in a sandbox (temporary HOME and
//! project, environment cleared).

use std::path::Path;
use std::process::Command;

#[path = "support/sandbox.rs"]
mod sandbox;

use sandbox::{MCPWALL, Run, Sandbox};

/// PATH with this mcpwall first and only the system directories after it.
fn path_with_mcpwall() -> String {
    let bin_dir = Path::new(MCPWALL).parent().unwrap();
    format!("{}:/usr/local/bin:/usr/bin:/bin", bin_dir.display())
}

trait Edges {
    /// `mcpwall ARGS` in the project, with this mcpwall on PATH.
    fn cmd(&self, args: &[&str]) -> Command;
    fn go(&self, args: &[&str]) -> Run;
    /// The same, run from `dir` instead of the project.
    fn go_in(&self, dir: &Path, args: &[&str]) -> Run;
}

impl Edges for Sandbox {
    fn cmd(&self, args: &[&str]) -> Command {
        let mut command = self.command(args);
        command.env("PATH", path_with_mcpwall());
        command
    }

    fn go(&self, args: &[&str]) -> Run {
        self.run_command(self.cmd(args), "")
    }

    fn go_in(&self, dir: &Path, args: &[&str]) -> Run {
        let mut command = self.cmd(args);
        command.current_dir(dir);
        self.run_command(command, "")
    }
}

fn show(run: &Run) -> String {
    format!(
        "exit {}\n--- stdout\n{}--- stderr\n{}",
        run.code, run.stdout, run.stderr
    )
}

const MCP_JSON: &str = "{\n  \"mcpServers\": {\n    \"notes\": { \"command\": \"sh\", \"args\": [\"-c\", \"cat\"] }\n  }\n}\n";
const VSCODE_JSON: &str = "{\n  // the editor's servers\n  \"servers\": {\n    \"search\": { \"type\": \"stdio\", \"command\": \"sh\", \"args\": [\"-c\", \"cat\"] }\n  }\n}\n";

/// A project with a Claude Code and a VS Code project file, each with one stdio server.
fn two_project_files() -> Sandbox {
    let sandbox = Sandbox::new();
    sandbox.write("project/.mcp.json", MCP_JSON);
    sandbox.write("project/.vscode/mcp.json", VSCODE_JSON);
    sandbox
}

#[test]
fn r24_wrap_all_then_status_and_unwrap_all_from_another_directory() {
    let sandbox = two_project_files();
    let run = sandbox.go(&["wrap", "--all"]);
    assert_eq!(run.code, 0, "{}", show(&run));
    assert!(sandbox.read("project/.mcp.json").contains("mcpwall"));
    assert!(sandbox.read("project/.vscode/mcp.json").contains("mcpwall"));

    // Elsewhere (the home directory): the wrap records still know both project files.
    let status = sandbox.go_in(sandbox.home(), &["status"]);
    let project = sandbox.project().display().to_string();
    for file in [".mcp.json", ".vscode/mcp.json"] {
        assert!(
            status.stdout.contains(&format!("{project}/{file}")),
            "{file} missing from status:\n{}",
            show(&status)
        );
    }
    assert!(
        status.stdout.contains("2 of 2 server(s) protected"),
        "{}",
        show(&status)
    );

    let unwrap = sandbox.go_in(sandbox.home(), &["unwrap", "--all"]);
    assert_eq!(unwrap.code, 0, "{}", show(&unwrap));
    assert!(
        !unwrap.stdout.contains("nothing to change"),
        "{}",
        show(&unwrap)
    );
    assert_eq!(sandbox.read("project/.mcp.json"), MCP_JSON);
    assert_eq!(sandbox.read("project/.vscode/mcp.json"), VSCODE_JSON);
}

#[test]
fn r24_dry_runs_say_would_and_show_what_the_real_run_does() {
    let sandbox = two_project_files();
    let mine = "version: 1\nextends: [default]\nrules: []\n";
    sandbox.write("home/.mcpwall/mcpwall.yml", mine);

    let dry = sandbox.go(&["init", "--yes", "--profile", "strict", "--dry-run"]);
    assert!(
        dry.stdout.contains("would wrap"),
        "a dry run says what it would do:\n{}",
        show(&dry)
    );
    assert!(
        !dry.stdout.contains("  wrapped "),
        "a dry run never says `wrapped`:\n{}",
        show(&dry)
    );
    assert!(
        !dry.stdout.contains("+extends: [profiles/strict, default]"),
        "the real run keeps the existing file without --force, so the dry run shows no change to it:\n{}",
        show(&dry)
    );
    // `--yes` takes what the run offers and keeps the user's edited policy: exit 0,
    // and it says so (a script re-running `init --yes` must not fail).
    let real = sandbox.go(&["init", "--yes", "--profile", "strict"]);
    assert_eq!(real.code, 0, "{}", show(&real));
    assert!(
        real.stdout.contains("kept your existing policy"),
        "{}",
        show(&real)
    );
    assert_eq!(
        dry.code,
        real.code,
        "dry run and real run end alike:\n{}\n{}",
        show(&dry),
        show(&real)
    );
    assert!(real.stdout.contains("--force"), "{}", show(&real));
    assert_eq!(sandbox.read("home/.mcpwall/mcpwall.yml"), mine);

    // With --force the dry run shows the replacement, and the real run makes it.
    let dry = sandbox.go(&[
        "init",
        "--yes",
        "--force",
        "--profile",
        "strict",
        "--dry-run",
    ]);
    assert!(
        dry.stdout.contains("+extends: [profiles/strict, default]"),
        "{}",
        show(&dry)
    );
    assert_eq!(dry.code, 0, "{}", show(&dry));

    // The real run above wrapped the servers (under the kept policy).
    let unwrap = sandbox.go(&["unwrap", "notes", "--dry-run"]);
    assert!(unwrap.stdout.contains("would restore"), "{}", show(&unwrap));
    assert!(sandbox.read("project/.mcp.json").contains("mcpwall"));
}

/// A user file whose one server runs behind mcpwall with `-c <missing file>`.
#[test]
fn r24_status_and_doctor_refuse_protected_when_the_policy_cannot_load() {
    let sandbox = Sandbox::new();
    let missing = sandbox.root().join("no-such-policy.yml");
    sandbox.write(
        "home/.claude.json",
        &format!(
            "{{\"mcpServers\": {{\"notes\": {{\"command\": \"mcpwall\", \"args\": [\"-c\", \"{}\", \"--\", \"sh\", \"-c\", \"cat\"]}}, \"plain\": {{\"command\": \"mcpwall\", \"args\": [\"--\", \"sh\", \"-c\", \"cat\"]}}}}}}\n",
            missing.display()
        ),
    );
    let status = sandbox.go(&["status"]);
    let notes = status
        .stdout
        .lines()
        .find(|l| l.contains("notes"))
        .unwrap_or_default()
        .to_string();
    assert!(
        !notes.contains("protected") && notes.contains("does not exist"),
        "{}",
        show(&status)
    );
    assert_ne!(status.code, 0, "{}", show(&status));
    let doctor = sandbox.go(&["doctor"]);
    assert!(
        doctor
            .stdout
            .lines()
            .any(|l| l.starts_with("FAIL") && l.contains("notes") && l.contains("does not exist")),
        "{}",
        show(&doctor)
    );

    // A broken user policy: every entry that uses it cannot start.
    sandbox.write(
        "home/.mcpwall/config.yml",
        "version: 1\nrules:\n  - nonsense: [\n",
    );
    let status = sandbox.go(&["status"]);
    let plain = status
        .stdout
        .lines()
        .find(|l| l.contains("plain"))
        .unwrap_or_default()
        .to_string();
    assert!(
        !plain.contains("protected") && plain.contains("~/.mcpwall/config.yml:3"),
        "{}",
        show(&status)
    );
    assert_ne!(status.code, 0, "{}", show(&status));
}

#[test]
fn r24_mistyped_verbs_and_a_forgotten_double_dash_get_a_suggestion() {
    let sandbox = Sandbox::new();
    let run = sandbox.go(&["stauts"]);
    assert_eq!(run.code, 2, "{}", show(&run));
    assert!(
        run.stderr.contains("did you mean `mcpwall status`"),
        "{}",
        show(&run)
    );
    let run = sandbox.go(&["npx", "-y", "some-server"]);
    assert_eq!(run.code, 2, "{}", show(&run));
    assert!(
        run.stderr
            .contains("did you mean `mcpwall -- npx -y some-server`"),
        "{}",
        show(&run)
    );
    let run = sandbox.go(&["--log-level", "debug", "npx", "x"]);
    assert!(
        run.stderr
            .contains("did you mean `mcpwall --log-level debug -- npx x`"),
        "{}",
        show(&run)
    );
}

#[test]
fn r24_wrap_names_a_client_file_with_client_file_and_config_still_works_with_a_warning() {
    let sandbox = Sandbox::new();
    sandbox.write("project/odd/place.json", MCP_JSON);
    let run = sandbox.go(&[
        "wrap",
        "notes",
        "--client",
        "claude-code",
        "--client-file",
        "odd/place.json",
    ]);
    assert_eq!(run.code, 0, "{}", show(&run));
    assert!(sandbox.read("project/odd/place.json").contains("mcpwall"));
    let run = sandbox.go(&[
        "unwrap",
        "notes",
        "--client",
        "claude-code",
        "--config",
        "odd/place.json",
    ]);
    assert_eq!(run.code, 0, "{}", show(&run));
    assert!(run.stderr.contains("--client-file"), "{}", show(&run));
    assert_eq!(sandbox.read("project/odd/place.json"), MCP_JSON);
    // `-c` means a policy file everywhere; wrap has none.
    let run = sandbox.go(&["wrap", "notes", "-c", "odd/place.json"]);
    assert_eq!(run.code, 2, "{}", show(&run));
}

#[test]
fn r24_check_says_when_it_read_nothing_and_lists_ignored_parts() {
    let sandbox = Sandbox::new();
    let run = sandbox.go(&["check"]);
    assert_eq!(run.code, 2, "{}", show(&run));
    assert!(run.stderr.contains("nothing"), "{}", show(&run));

    sandbox.write(
        "project/.mcpwall.yml",
        "version: 1\nsettings:\n  log_args: full\nrules:\n  - name: open-everything\n    action: allow\n    match: {tool: \"*\"}\n",
    );
    let frame = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"README.md"}}}"#;
    let run = sandbox.run_command(sandbox.cmd(&["check"]), frame);
    assert!(
        run.stderr.contains("open-everything") && run.stderr.contains("log_args"),
        "{}",
        show(&run)
    );
}

const LOOSE_PROJECT: &str = "version: 1\nsettings:\n  log_dir: /tmp/elsewhere\n  log_args: full\n  default_action: allow\nrules:\n  - name: open-everything\n    action: allow\n    match: {tool: \"*\"}\n";

#[test]
fn r24_trust_shows_everything_it_turns_on_and_asks_first() {
    let sandbox = Sandbox::new();
    sandbox.write("project/.mcpwall.yml", LOOSE_PROJECT);
    let run = sandbox.go(&["trust"]);
    assert_eq!(run.code, 2, "{}", show(&run));
    assert!(run.stderr.contains("--yes"), "{}", show(&run));
    let list = sandbox.go(&["trust", "--list"]);
    assert!(list.stdout.contains("no trusted"), "{}", show(&list));

    let run = sandbox.go(&["trust", "--yes"]);
    assert_eq!(run.code, 0, "{}", show(&run));
    for part in [
        "open-everything",
        "`log_dir`",
        "/tmp/elsewhere",
        "`log_args: full`",
        "`default_action: allow`",
    ] {
        assert!(
            run.stdout.contains(part),
            "{part} not shown:\n{}",
            show(&run)
        );
    }
    let list = sandbox.go(&["trust", "--list"]);
    assert!(list.stdout.contains("\ttrusted"), "{}", show(&list));
}

#[test]
fn r24_trust_asks_on_a_terminal() {
    let Some(script) = terminal_runner() else {
        eprintln!("skipped: no `script` to give mcpwall a terminal");
        return;
    };
    let sandbox = Sandbox::new();
    sandbox.write("project/.mcpwall.yml", LOOSE_PROJECT);
    let run = in_terminal(&sandbox, &script, "trust", "n\n");
    assert!(run.stdout.contains("[y/N]"), "{}", show(&run));
    assert!(
        sandbox
            .go(&["trust", "--list"])
            .stdout
            .contains("no trusted"),
        "answering no trusts nothing"
    );
    let run = in_terminal(&sandbox, &script, "trust", "y\n");
    assert!(run.stdout.contains("trusted"), "{}", show(&run));
    assert!(
        sandbox
            .go(&["trust", "--list"])
            .stdout
            .contains("\ttrusted")
    );
}

/// A bare `mcpwall` typed at a terminal prints the commands, not an error; started with
/// no terminal (as a client would, by mistake) it still says what is missing.
#[test]
fn bare_mcpwall_on_a_terminal_prints_the_commands() {
    let Some(script) = terminal_runner() else {
        eprintln!("skipped: no `script` to give mcpwall a terminal");
        return;
    };
    let sandbox = Sandbox::new();
    let run = in_terminal(&sandbox, &script, "", "");
    assert!(
        run.stdout.contains("explain-policy") && run.stdout.contains("doctor"),
        "{}",
        show(&run)
    );
    assert!(
        !run.stdout.contains("no server command given"),
        "{}",
        show(&run)
    );
    let run = sandbox.go(&[]);
    assert_eq!(run.code, 2, "{}", show(&run));
    assert!(
        run.stderr.contains("no server command given"),
        "{}",
        show(&run)
    );
}

/// Run from a directory above the home, the user's files still read `~/…`.
#[test]
fn paths_under_home_show_as_tilde_from_a_directory_above_it() {
    let sandbox = Sandbox::new();
    sandbox.write(
        "home/.claude.json",
        "{\"mcpServers\": {\"notes\": {\"command\": \"sh\", \"args\": [\"-c\", \"cat\"]}}}\n",
    );
    let status = sandbox.go_in(&sandbox.root(), &["status"]);
    assert!(
        status.stdout.contains("~/.claude.json"),
        "{}",
        show(&status)
    );
    assert!(!status.stdout.contains("./home/"), "{}", show(&status));
}

/// `script`, which runs a command on a pseudo-terminal.
fn terminal_runner() -> Option<String> {
    ["/usr/bin/script", "/bin/script"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .map(str::to_string)
}

/// `mcpwall VERB` on a pseudo-terminal in the sandbox's project, fed `input`.
fn in_terminal(sandbox: &Sandbox, script: &str, verb: &str, input: &str) -> Run {
    let mut command = Command::new(script);
    command
        .args(["-qec", &format!("{MCPWALL} {verb}"), "/dev/null"])
        .current_dir(sandbox.project())
        .env_clear()
        .env("HOME", sandbox.home())
        .env("PATH", path_with_mcpwall())
        .env("TERM", "xterm");
    sandbox.run_command(command, input)
}

#[test]
fn r24_status_and_doctor_have_colour_on_a_terminal_only() {
    let Some(script) = terminal_runner() else {
        eprintln!("skipped: no `script` to give mcpwall a terminal");
        return;
    };
    let sandbox = two_project_files();
    assert_eq!(sandbox.go(&["wrap", "notes"]).code, 0);
    for verb in ["status", "doctor"] {
        let run = in_terminal(&sandbox, &script, verb, "");
        assert!(run.stdout.contains("\u{1b}["), "{verb}: {}", show(&run));
        let piped = sandbox.go(&[verb]);
        assert!(!piped.stdout.contains('\u{1b}'), "{verb}: {}", show(&piped));
        let mut command = Command::new(&script);
        command
            .args(["-qec", &format!("{MCPWALL} {verb}"), "/dev/null"])
            .current_dir(sandbox.project())
            .env_clear()
            .env("HOME", sandbox.home())
            .env("PATH", path_with_mcpwall())
            .env("NO_COLOR", "1");
        let run = sandbox.run_command(command, "");
        assert!(!run.stdout.contains('\u{1b}'), "{verb}: {}", show(&run));
    }
}

#[test]
fn r24_explain_policy_puts_warnings_first() {
    // Issue 21's work already moved them up; this keeps them there.
    let sandbox = Sandbox::new();
    let run = sandbox.go(&["explain-policy"]);
    assert_eq!(run.code, 0, "{}", show(&run));
    let line = run
        .stdout
        .lines()
        .position(|l| l.starts_with("Warnings ("))
        .expect("a warnings section");
    assert!(line < 10, "warnings open the output:\n{}", show(&run));
}

#[test]
fn r24_an_absolute_path_written_into_a_project_file_is_named() {
    let sandbox = Sandbox::new();
    sandbox.write("project/.mcp.json", MCP_JSON);
    // No mcpwall on PATH: the wrapper must be this binary's absolute path.
    let mut command = sandbox.command(&["wrap", "notes"]);
    command.env("PATH", "/usr/bin:/bin");
    let run = sandbox.run_command(command, "");
    assert_eq!(run.code, 0, "{}", show(&run));
    assert!(sandbox.read("project/.mcp.json").contains(MCPWALL));
    assert!(
        run.stderr.contains("./.mcp.json") && run.stderr.contains(MCPWALL),
        "{}",
        show(&run)
    );

    // A copy of this binary on PATH: `--bare-command` writes `mcpwall` instead.
    let bin = sandbox.root().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::copy(MCPWALL, bin.join("mcpwall")).unwrap();
    let path = format!("{}:/usr/bin:/bin", bin.display());
    let mut command = sandbox.command(&["unwrap", "notes"]);
    command.env("PATH", &path);
    assert_eq!(sandbox.run_command(command, "").code, 0);
    let mut command = sandbox.command(&["wrap", "notes"]);
    command.env("PATH", &path);
    let run = sandbox.run_command(command, "");
    assert!(run.stderr.contains("--bare-command"), "{}", show(&run));
    let mut command = sandbox.command(&["unwrap", "notes"]);
    command.env("PATH", &path);
    assert_eq!(sandbox.run_command(command, "").code, 0);
    let mut command = sandbox.command(&["wrap", "notes", "--bare-command"]);
    command.env("PATH", &path);
    let run = sandbox.run_command(command, "");
    assert_eq!(run.code, 0, "{}", show(&run));
    assert!(
        sandbox
            .read("project/.mcp.json")
            .contains("\"command\": \"mcpwall\""),
        "{}",
        sandbox.read("project/.mcp.json")
    );
}

#[cfg(unix)]
#[test]
fn r24_state_dir_is_tightened_at_start_with_a_note() {
    use std::os::unix::fs::PermissionsExt;
    let sandbox = Sandbox::new();
    let state = sandbox.home().join(".mcpwall");
    std::fs::create_dir_all(state.join("backups")).unwrap();
    for dir in [&state, &state.join("backups")] {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let run = sandbox.go(&["status"]);
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&state), 0o700, "{}", show(&run));
    assert_eq!(mode(&state.join("backups")), 0o700, "{}", show(&run));
    assert!(run.stderr.contains("0700"), "{}", show(&run));

    let run = sandbox.go(&["init", "--yes"]);
    assert_eq!(mode(&state.join("mcpwall.yml")), 0o600, "{}", show(&run));
}

#[test]
fn r24_scan_only_prints_the_selected_rows() {
    let sandbox = Sandbox::new();
    let run = sandbox.go(&[
        "scan",
        "--only",
        "JS-001",
        "--seed",
        "1",
        "--no-progress",
        "--no-timings",
    ]);
    let rows = run
        .stdout
        .lines()
        .filter(|l| {
            l.len() > 7 && l.as_bytes()[2] == b'-' && l[..2].chars().all(|c| c.is_ascii_uppercase())
        })
        .count();
    assert_eq!(rows, 1, "{}", show(&run));
}

/// A relay that passes every line both ways untouched: a "firewall" that stops nothing.
const RELAY: &str = r#"
import subprocess, sys, threading
args = sys.argv[1:]
if args and args[0] == "--":
    args = args[1:]
child = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
def up():
    for line in sys.stdin.buffer:
        child.stdin.write(line); child.stdin.flush()
    child.stdin.close()
threading.Thread(target=up, daemon=True).start()
for line in child.stdout:
    sys.stdout.buffer.write(line); sys.stdout.buffer.flush()
child.wait()
"#;

fn scan_json(sandbox: &Sandbox, extra: &[&str]) -> (Run, serde_json::Value) {
    let mut args = vec![
        "scan",
        "--seed",
        "1",
        "--no-progress",
        "--format",
        "json",
        "--only",
        "PT-001,CR-001,LK-001",
        "--timeout",
        "10",
    ];
    args.extend_from_slice(extra);
    let run = sandbox.go(&args);
    let report = serde_json::from_str(&run.stdout)
        .unwrap_or_else(|e| panic!("not a JSON report ({e}):\n{}", show(&run)));
    (run, report)
}

#[test]
fn r24_scan_through_another_proxy_names_it_and_scores_it() {
    let sandbox = Sandbox::new();
    let (_, own) = scan_json(&sandbox, &[]);
    let proxy = format!("{MCPWALL} --");
    let (run, through_mcpwall) = scan_json(&sandbox, &["--proxy", &proxy]);
    assert_eq!(
        through_mcpwall["proxy"].as_str(),
        Some(proxy.as_str()),
        "{}",
        show(&run)
    );
    assert!(
        through_mcpwall["proxy_version"]
            .as_str()
            .is_some_and(|v| v.starts_with("mcpwall ")),
        "{}",
        show(&run)
    );
    assert_eq!(
        through_mcpwall["summary"]["vulnerable"],
        own["summary"]["vulnerable"],
        "mcpwall given as the proxy scores as mcpwall does:\n{}",
        show(&run)
    );

    // The interpreter's own path: the scan runs with a PATH of system directories only.
    let python = ["python3", "python"].into_iter().find_map(|p| {
        let out = Command::new(p)
            .args(["-c", "import sys; print(sys.executable)"])
            .output()
            .ok()?;
        let path = String::from_utf8(out.stdout).ok()?.trim().to_string();
        (out.status.success() && !path.is_empty() && !path.contains(' ')).then_some(path)
    });
    let Some(python) = python else {
        eprintln!("skipped the relay half: no python");
        return;
    };
    let relay = sandbox.root().join("relay.py");
    std::fs::write(&relay, RELAY).unwrap();
    let proxy = format!("{python} {} --", relay.display());
    let (run, through_relay) = scan_json(&sandbox, &["--proxy", &proxy]);
    assert_eq!(through_relay["proxy"].as_str(), Some(proxy.as_str()));
    assert_eq!(
        through_relay["proxy_version"].as_str(),
        Some(proxy.trim_end_matches(" --")),
        "a relay that does not answer --version is named by its command:\n{}",
        show(&run)
    );
    assert!(
        through_relay["summary"]["vulnerable"].as_u64().unwrap_or(0) > 0,
        "a plain relay lets attacks through:\n{}",
        show(&run)
    );
}
