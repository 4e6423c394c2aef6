//! Client integration: `init`, `wrap`, `unwrap`, `status`, `doctor` against a fake HOME and
//! project holding realistic config files of every supported client.
//!
//! `golden/wrap/before/{home,project}` is the starting tree; `golden/wrap/after/` is what
//! wrapping every server makes of it; `golden/wrap/*.stdout` are the reports. Update them
//! with `INSTA_UPDATE=always cargo test --test clients` and review the diff.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_mcpwall");

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("golden/wrap")
}

/// A temporary HOME and project, copied from `golden/wrap/before`.
struct Sandbox {
    dir: tempfile::TempDir,
}

impl Sandbox {
    fn new() -> Sandbox {
        let dir = tempfile::tempdir().unwrap();
        copy_tree(&golden_dir().join("before"), dir.path());
        Sandbox { dir }
    }

    fn empty() -> Sandbox {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("home")).unwrap();
        std::fs::create_dir_all(dir.path().join("project")).unwrap();
        Sandbox { dir }
    }

    fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }

    fn project(&self) -> PathBuf {
        self.dir.path().join("project")
    }

    fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.dir.path().join(rel)).unwrap()
    }

    fn write(&self, rel: &str, text: &str) {
        let path = self.dir.path().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    /// Run mcpwall with only HOME and PATH set (PATH finds this mcpwall first, so wrapped
    /// entries say `mcpwall`), in the project directory, with no terminal on stdin.
    fn run(&self, args: &[&str]) -> Output {
        let bin_dir = Path::new(BIN).parent().unwrap();
        let path = format!("{}:/usr/local/bin:/usr/bin:/bin", bin_dir.display());
        Command::new(BIN)
            .args(args)
            .current_dir(self.project())
            .env_clear()
            .env("HOME", self.home())
            .env("PATH", path)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }

    /// stdout with the sandbox path replaced by `$TMP`.
    fn stdout(&self, output: &Output) -> String {
        String::from_utf8(output.stdout.clone())
            .unwrap()
            .replace(&self.dir.path().display().to_string(), "$TMP")
    }

    /// Every file under home/ and project/ except mcpwall's own state.
    fn tree(&self) -> Vec<(String, Vec<u8>)> {
        let mut files = Vec::new();
        list_files(self.dir.path(), self.dir.path(), &mut files);
        files.retain(|(rel, _)| !rel.starts_with("home/.mcpwall/"));
        files
    }
}

fn copy_tree(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            std::fs::create_dir_all(&target).unwrap();
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
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
];

#[test]
fn wrap_every_client_then_unwrap_restores_every_byte() {
    let sandbox = Sandbox::new();
    let before = sandbox.tree();
    let mut report = String::new();
    for name in WRAPPABLE {
        let out = sandbox.run(&["wrap", name]);
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
        let out = sandbox.run(&["wrap", name]);
        assert!(sandbox.stdout(&out).contains("already wrapped"), "{name}");
    }
    assert_eq!(sandbox.tree(), wrapped);

    // The broken file was reported and never touched.
    assert_eq!(
        sandbox.read("home/.cursor/mcp.json"),
        std::fs::read_to_string(golden_dir().join("before/home/.cursor/mcp.json")).unwrap()
    );

    for name in WRAPPABLE {
        let out = sandbox.run(&["unwrap", name]);
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
    let sandbox = Sandbox::new();
    let out = sandbox.run(&["wrap", "github"]);
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
    let sandbox = Sandbox::new();
    let before = sandbox.tree();
    let out = sandbox.run(&["wrap", "search", "--dry-run"]);
    assert_golden("dry-run.stdout", sandbox.stdout(&out).as_bytes());
    let out = sandbox.run(&["unwrap", "memory", "--dry-run"]);
    assert!(
        sandbox
            .stdout(&out)
            .contains("+      \"command\": \"npx\",")
    );
    assert_eq!(sandbox.tree(), before);
    assert!(!sandbox.home().join(".mcpwall").exists());
}

#[test]
fn http_and_sse_entries_are_skipped_with_the_reason() {
    let sandbox = Sandbox::new();
    let out = sandbox.run(&["wrap", "sentry"]);
    let stdout = sandbox.stdout(&out);
    assert!(
        stdout.contains(
            "skipped          sentry: remote server (`url`): a stdio proxy cannot wrap it"
        ),
        "{stdout}"
    );
    let out = sandbox.run(&["wrap", "remote"]);
    assert!(sandbox.stdout(&out).contains("remote server (`serverUrl`)"));
    assert_eq!(sandbox.tree(), Sandbox::new().tree());
}

#[test]
fn unwrap_keeps_edits_made_after_wrapping() {
    let sandbox = Sandbox::new();
    assert_eq!(code(&sandbox.run(&["wrap", "git"])), 1);
    let wrapped = sandbox.read("project/.mcp.json");
    let edited = wrapped.replace("\"cwd\": \".\"", "\"cwd\": \"./src\"");
    assert_ne!(edited, wrapped);
    sandbox.write("project/.mcp.json", &edited);
    let out = sandbox.run(&["unwrap", "git"]);
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
    let sandbox = Sandbox::new();
    let out = sandbox.run(&["unwrap", "--all"]);
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
    let sandbox = Sandbox::empty();
    sandbox.write(
        "elsewhere/mcp.json",
        "{\n  \"mcpServers\": {\n    \"x\": { \"command\": \"srv\" }\n  }\n}\n",
    );
    let file = sandbox.dir.path().join("elsewhere/mcp.json");
    let out = sandbox.run(&["wrap", "x", "--config", file.to_str().unwrap()]);
    assert_eq!(code(&out), 2);
    assert!(String::from_utf8_lossy(&out.stderr).contains("--client"));
    let out = sandbox.run(&[
        "wrap",
        "x",
        "--config",
        file.to_str().unwrap(),
        "--client",
        "cursor",
    ]);
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        sandbox.read("elsewhere/mcp.json"),
        "{\n  \"mcpServers\": {\n    \"x\": { \"command\": \"mcpwall\", \"args\": [\"--server-name\", \"x\", \"--\", \"srv\"] }\n  }\n}\n"
    );
    let out = sandbox.run(&[
        "unwrap",
        "x",
        "--config",
        file.to_str().unwrap(),
        "--client",
        "cursor",
    ]);
    assert_eq!(code(&out), 0);
    assert_eq!(
        sandbox.read("elsewhere/mcp.json"),
        "{\n  \"mcpServers\": {\n    \"x\": { \"command\": \"srv\" }\n  }\n}\n"
    );
}

#[test]
fn unknown_server_name_lists_the_known_ones() {
    let sandbox = Sandbox::new();
    let out = sandbox.run(&["wrap", "nope"]);
    assert_eq!(code(&out), 2);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no server named `nope`"), "{stderr}");
    assert!(stderr.contains("filesystem"), "{stderr}");
}

#[cfg(unix)]
#[test]
fn writes_keep_permissions_and_leave_a_backup() {
    use std::os::unix::fs::PermissionsExt;
    let sandbox = Sandbox::new();
    let file = sandbox.home().join(".claude.json");
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let original = std::fs::read(&file).unwrap();
    assert_eq!(code(&sandbox.run(&["wrap", "filesystem"])), 1);
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
    let sandbox = Sandbox::new();
    let out = sandbox.run(&["status"]);
    assert_golden("status.stdout", sandbox.stdout(&out).as_bytes());
}

#[test]
#[ignore = "waits on profiles/*.yml from the packs branch"]
fn init_needs_yes_without_a_terminal() {
    let sandbox = Sandbox::new();
    let profile = any_profile();
    let out = sandbox.run(&["init", "--profile", profile]);
    assert_eq!(code(&out), 2);
    assert!(String::from_utf8_lossy(&out.stderr).contains("--yes"));
    assert_eq!(sandbox.tree(), Sandbox::new().tree());
}

#[test]
fn init_rejects_unknown_profiles_and_reads_none_from_disk() {
    let sandbox = Sandbox::new();
    sandbox.write("project/evil.yml", "version: 1\n");
    for bad in ["evil", "../project/evil", "nope"] {
        let out = sandbox.run(&["init", "--yes", "--profile", bad]);
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
#[ignore = "waits on profiles/*.yml from the packs branch"]
fn init_writes_the_config_and_wraps_everything() {
    let sandbox = Sandbox::new();
    let profile = any_profile();
    let out = sandbox.run(&["init", "--yes", "--profile", profile]);
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
        sandbox.read("home/.mcpwall/config.yml"),
        mcpwall::cli::init::config_text(profile)
    );
    // A second run changes nothing.
    let tree = sandbox.tree();
    let out = sandbox.run(&["init", "--yes", "--profile", profile]);
    assert!(sandbox.stdout(&out).contains("already extends"));
    assert!(sandbox.stdout(&out).contains("no servers to wrap"));
    assert_eq!(sandbox.tree(), tree);
}

#[test]
#[ignore = "waits on profiles/*.yml from the packs branch"]
fn init_keeps_an_existing_config_unless_forced() {
    let sandbox = Sandbox::new();
    let profile = any_profile();
    let mine = "version: 1\nextends: [strict]\nrules: []\n";
    sandbox.write("home/.mcpwall/config.yml", mine);
    let out = sandbox.run(&["init", "--yes", "--profile", profile]);
    assert!(sandbox.stdout(&out).contains("kept your existing policy"));
    assert_eq!(sandbox.read("home/.mcpwall/config.yml"), mine);
    let out = sandbox.run(&["init", "--yes", "--force", "--profile", profile]);
    assert!(
        sandbox
            .stdout(&out)
            .contains("backed up to ~/.mcpwall/backups/")
    );
    assert_eq!(
        sandbox.read("home/.mcpwall/config.yml"),
        mcpwall::cli::init::config_text(profile)
    );
    let backups = std::fs::read_dir(sandbox.home().join(".mcpwall/backups")).unwrap();
    let kept = backups
        .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
        .any(|t| t == mine);
    assert!(kept);
}

fn doctor_sandbox() -> Sandbox {
    let sandbox = Sandbox::empty();
    sandbox.write(
        "home/.claude.json",
        "{\n  \"mcpServers\": {\n    \"ok\": { \"command\": \"sh\", \"args\": [\"-c\", \"cat\"] },\n    \"gone\": { \"command\": \"no-such-server-binary\" }\n  }\n}\n",
    );
    sandbox.write(
        "project/.cursor/mcp.json",
        "{\n  \"mcpServers\": {\n    \"x\": \"\n}\n",
    );
    for name in ["ok", "gone"] {
        assert_eq!(code(&sandbox.run(&["wrap", name])), 1);
    }
    sandbox
}

#[test]
fn doctor_says_what_to_fix() {
    let sandbox = doctor_sandbox();
    // A file where the log directory should be: it cannot be created.
    sandbox.write("home/.mcpwall/logs", "not a directory");
    let out = sandbox.run(&["doctor"]);
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
    let out = sandbox.run(&["doctor"]);
    assert_eq!(code(&out), 0, "{}", sandbox.stdout(&out));
}

#[test]
fn doctor_reports_a_policy_that_does_not_load() {
    let sandbox = doctor_sandbox();
    sandbox.write(
        "home/.mcpwall/config.yml",
        "version: 1\nrules:\n  - nonsense: [\n",
    );
    let out = sandbox.run(&["doctor"]);
    let stdout = sandbox.stdout(&out);
    assert_eq!(code(&out), 1, "{stdout}");
    assert!(stdout.contains("FAIL  policy: does not load: ~/.mcpwall/config.yml:3:"), "{stdout}");
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
#[ignore = "waits on the proxy, engine and default pack (proxy, engine, packs branches)"]
fn e2e_wrapped_command_from_the_rewritten_file_denies_and_unwrap_restores_bytes() {
    use std::io::Write;
    let sandbox = Sandbox::empty();
    let original = "{\n  \"mcpServers\": {\n    \"files\": {\n      \"command\": \"sh\",\n      \"args\": [\"-c\", \"cat\"],\n      \"env\": {}\n    }\n  }\n}\n";
    sandbox.write("home/.claude.json", original);
    let out = sandbox.run(&["wrap", "files"]);
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
    let bin_dir = Path::new(BIN).parent().unwrap();
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
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "{call}").unwrap();
    drop(stdin);
    let lines = read_lines_with_timeout(child.stdout.take().unwrap(), 20);
    let _ = child.kill();
    let _ = child.wait();
    let frames: Vec<serde_json::Value> = lines
        .iter()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?}: {e}")))
        .collect();
    // `cat` echoes whatever reaches it: a denied call must not come back as a request.
    assert!(
        frames.iter().all(|f| f.get("method").is_none()),
        "the call reached the server: {lines:?}"
    );
    let denial = frames
        .iter()
        .find(|f| f["id"] == 7)
        .unwrap_or_else(|| panic!("no answer to the call: {lines:?}"));
    assert!(
        denial.get("error").is_some() || denial["result"]["isError"] == true,
        "{denial}"
    );

    let out = sandbox.run(&["unwrap", "files"]);
    assert_eq!(code(&out), 0);
    assert_eq!(sandbox.read("home/.claude.json"), original);
}
