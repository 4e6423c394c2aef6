//! `mcpwall scan` and `mcpwall compare`, end to end against the built binary.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

const SEED: &str = "42";

fn mcpwall(args: &[&str], home: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mcpwall"))
        .args(args)
        .env("HOME", home)
        .current_dir(home)
        .output()
        .expect("run mcpwall")
}

fn code(o: &Output) -> i32 {
    o.status.code().expect("exit code")
}

fn golden() -> insta::Settings {
    let mut s = insta::Settings::clone_current();
    s.set_snapshot_path(Path::new(env!("CARGO_MANIFEST_DIR")).join("golden/scan"));
    s.set_prepend_module_to_snapshot(false);
    s
}

/// The JSON report with what legitimately varies between runs zeroed.
fn stable(mut report: Value) -> Value {
    report["scanner_version"] = "X".into();
    // Changes with every edit of the default pack; checked for shape below.
    assert!(
        report["policy_digest"]
            .as_str()
            .unwrap()
            .starts_with("sha256:")
    );
    report["policy_digest"] = "sha256:X".into();
    for r in report["results"].as_array_mut().expect("results") {
        r["duration_ms"] = 0.into();
    }
    report
}

fn weak_policy(dir: &Path) -> PathBuf {
    let p = dir.join("weak.yml");
    std::fs::write(
        &p,
        "version: 1\nsettings:\n  pinning: off\n  poison_scan: off\n",
    )
    .unwrap();
    p
}

fn reason_of(results: &[Value], id: &str) -> String {
    results
        .iter()
        .find(|r| r["attack_id"] == id)
        .and_then(|r| r["reason"].as_str())
        .unwrap_or_else(|| panic!("{id} has no reason"))
        .to_string()
}

/// Scan with `args` (plus a fixed seed, JSON output); the report.
fn scan_json(args: &[&str], home: &Path) -> Value {
    let mut all = vec!["scan", "--seed", SEED, "--no-progress", "--format", "json"];
    all.extend(args);
    let out = mcpwall(&all, home);
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn result<'a>(report: &'a Value, id: &str) -> &'a Value {
    report["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["attack_id"] == id)
        .unwrap_or_else(|| panic!("no {id}"))
}

#[test]
fn strict_profile_stops_floods_repeat_offenders_and_writes_outside_the_project() {
    let home = tempfile::tempdir().unwrap();
    let ids = [
        "RL-001", "CB-001", "WR-004", "WR-005", "WR-006", "WR-007", "WR-008",
    ];
    let report = scan_json(
        &["--profile", "strict", "--only", &ids.join(",")],
        home.path(),
    );
    for id in ids {
        let r = result(&report, id);
        assert_eq!(r["baseline"], "VULNERABLE", "{id}: {r}");
        assert_eq!(r["protected"], "PASS", "{id}: {r}");
    }
    assert_eq!(
        result(&report, "RL-001")["stopped_by"],
        "mcpwall:rate_limit"
    );
    assert_eq!(
        result(&report, "CB-001")["stopped_by"],
        "mcpwall:session_suspended"
    );
    // Under strict nothing is skipped for lack of a setting.
    assert_eq!(
        report["summary"]["skipped_by_policy"],
        serde_json::json!([])
    );
    assert_eq!(report["summary"]["score"], 100);
}

#[test]
fn limits_come_from_the_effective_policy() {
    // Small limits keep the flood, the violations and the frame small; the attacks size
    // themselves from whatever the policy sets.
    let home = tempfile::tempdir().unwrap();
    let policy = home.path().join("limits.yml");
    std::fs::write(
        &policy,
        "version: 1\nextends: [default]\nsettings:\n  max_frame_bytes: 4096\n  rate_limit: {max_calls: 3, window_seconds: 60}\n  circuit_breaker: {max_violations: 2, window_seconds: 60}\n",
    )
    .unwrap();
    let report = scan_json(
        &[
            "-c",
            policy.to_str().unwrap(),
            "--only",
            "RL-001,CB-001,JS-009",
        ],
        home.path(),
    );
    for (id, by) in [
        ("RL-001", "mcpwall:rate_limit"),
        ("CB-001", "mcpwall:session_suspended"),
        ("JS-009", "mcpwall:too_large"),
    ] {
        let r = result(&report, id);
        assert_eq!(r["baseline"], "VULNERABLE", "{id}: {r}");
        assert_eq!(r["protected"], "PASS", "{id}: {r}");
        assert_eq!(r["stopped_by"], by, "{id}");
    }
    // The flood was sized from max_calls: 3 allowed + 5 more, and the baseline served all.
    assert_eq!(
        result(&report, "RL-001")["baseline_evidence"],
        "8 of 8 calls answered; the limit is 3 per 60 s"
    );
}

#[test]
fn default_pack_stops_every_applicable_attack_that_lands_at_baseline() {
    let home = tempfile::tempdir().unwrap();
    let json_path = home.path().join("report.json");
    let out = mcpwall(
        &[
            "scan",
            "--seed",
            SEED,
            "--no-progress",
            "--no-timings",
            "--output",
            json_path.to_str().unwrap(),
        ],
        home.path(),
    );
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stderr));
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap()).unwrap();
    let results = report["results"].as_array().unwrap();
    assert!(results.len() >= 40, "only {} attacks", results.len());
    let mut applicable = 0;
    for r in results {
        let id = r["attack_id"].as_str().unwrap();
        if r["protected"] == "NOT_APPLICABLE" || r["protected"] == "SKIPPED" {
            continue;
        }
        applicable += 1;
        assert_eq!(
            r["baseline"], "VULNERABLE",
            "{id} proves nothing: it fails without mcpwall too"
        );
        assert_eq!(
            r["baseline"], "VULNERABLE",
            "{id} proves nothing: it fails without mcpwall too"
        );
        assert_eq!(
            r["protected"], "PASS",
            "{id} got through the default pack: {}",
            r["evidence"]
        );
        assert!(r["stopped_by"].is_string(), "{id} has no stopper");
    }
    assert!(applicable >= 40);
    assert_eq!(report["summary"]["score"], 100);
    assert_eq!(report["summary"]["grade"], "A");
    // Each attack that lands at baseline also ran through the sandbox alone: the kernel
    // holds the file attacks by itself, not what only the rules can see.
    let kernel = |id: &str| {
        results
            .iter()
            .find(|r| r["attack_id"] == id)
            .unwrap_or_else(|| panic!("no {id}"))["kernel"]
            .clone()
    };
    if mcpwall::sandbox::Support::probe().paths {
        for id in ["PT-001", "PT-006", "CR-002", "CR-013", "WR-001", "WR-002"] {
            assert_eq!(kernel(id), "PASS", "{id}: the kernel alone holds it");
        }
        for id in ["CE-004", "LK-001", "SC-001", "PI-001"] {
            assert_eq!(
                kernel(id),
                "VULNERABLE",
                "{id} needs the rules or the guard"
            );
        }
    }
    // STOPPED BY names the rule or the mechanism, as the audit log does.
    let stopped = |id: &str| {
        results
            .iter()
            .find(|r| r["attack_id"] == id)
            .unwrap_or_else(|| panic!("no {id}"))["stopped_by"]
            .as_str()
            .unwrap()
            .to_string()
    };
    for (id, by) in [
        ("PT-001", "block-ssh-keys"),
        ("EX-002", "redact-secrets"),
        ("LK-003", "redact-secrets"),
        ("SC-001", "mcpwall:tool_poisoned"),
        ("SC-002", "mcpwall:tool_drift"),
        ("JS-002", "mcpwall:malformed"),
        ("JS-003", "mcpwall:malformed"),
        ("JS-009", "mcpwall:too_large"),
        ("PI-001", "block-prompt-injection-in-results"),
        ("PI-003", "block-prompt-injection-in-results"),
        ("WR-004", "block-writes-to-startup-files"),
        ("WR-006", "block-shell-writes-to-startup-files"),
        // Issue 23: spellings only a shell-aware matcher sees.
        ("SH-001", "block-recursive-delete-outside-project"),
        ("SH-003", "block-secret-files-in-shell-commands"),
        ("SH-007", "block-mass-delete-with-find"),
        ("SH-008", "block-remote-code-piped-to-shell"),
        ("SH-011", "block-network-redirects"),
        ("SH-012", "block-disk-destruction"),
        ("SH-013", "block-mcpwall-tampering"),
    ] {
        assert_eq!(stopped(id), by, "{id}");
    }
    // The default pack has no rate limit and no circuit breaker: those attacks are
    // SKIPPED, not scored, and say why in the JSON, the table and the summary.
    for id in ["RL-001", "CB-001"] {
        let r = results.iter().find(|r| r["attack_id"] == id).unwrap();
        assert_eq!(r["protected"], "SKIPPED", "{id}");
        assert_eq!(r["skipped_by_policy"], true, "{id}");
        let reason = r["reason"].as_str().unwrap();
        assert!(reason.contains("--profile strict"), "{id}: {reason}");
    }
    assert!(reason_of(results, "RL-001").contains("settings.rate_limit"));
    assert!(reason_of(results, "CB-001").contains("settings.circuit_breaker"));
    assert_eq!(
        report["summary"]["skipped_by_policy"],
        serde_json::json!(["RL-001", "CB-001"])
    );
    assert_eq!(report["schema_version"], 1);
    // Per-identity attacks cannot be tested over stdio.
    let id = results.iter().find(|r| r["attack_id"] == "ID-001").unwrap();
    assert_eq!(id["protected"], "NOT_APPLICABLE");
    // The scan leaves nothing behind in the home it ran from.
    let left: Vec<_> = std::fs::read_dir(home.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(left, vec![std::ffi::OsString::from("report.json")]);

    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains(&format!("RL-001: {}", reason_of(results, "RL-001"))));
    assert!(text.contains(&format!("CB-001: {}", reason_of(results, "CB-001"))));
    assert!(text.contains("2 skipped (RL-001, CB-001: the policy does not enable what they test)"));
    golden().bind(|| {
        insta::assert_snapshot!("default_pack_table", text);
        insta::assert_snapshot!(
            "default_pack_report",
            serde_json::to_string_pretty(&stable(report)).unwrap()
        );
    });
}

#[test]
fn weak_policy_shows_findings_with_evidence_and_remediation() {
    let home = tempfile::tempdir().unwrap();
    let policy = weak_policy(home.path());
    let out = mcpwall(
        &[
            "scan",
            "-c",
            policy.to_str().unwrap(),
            "--seed",
            SEED,
            "--no-progress",
            "--no-timings",
            "--only",
            "PT-001,CE-004,LK-001,SC-001",
        ],
        home.path(),
    );
    let text = String::from_utf8(out.stdout).unwrap();
    // The policy path is a temp dir: keep it out of the golden.
    let text = text.replace(policy.to_str().unwrap(), "<POLICY>");
    golden().bind(|| insta::assert_snapshot!("weak_policy_findings", text));
}

#[test]
fn fail_on_levels_set_the_exit_code() {
    let home = tempfile::tempdir().unwrap();
    let policy = weak_policy(home.path());
    let p = policy.to_str().unwrap();
    // CR-013 (shell history) is medium: it gets through a policy without rules.
    let run = |level: Option<&str>| {
        let mut args = vec![
            "scan",
            "-c",
            p,
            "--seed",
            SEED,
            "--no-progress",
            "--quiet",
            "--only",
            "CR-013",
        ];
        if let Some(l) = level {
            args.extend(["--fail-on", l]);
        }
        code(&mcpwall(&args, home.path()))
    };
    assert_eq!(run(None), 0);
    assert_eq!(run(Some("critical")), 0);
    assert_eq!(run(Some("high")), 0);
    assert_eq!(run(Some("medium")), 1);
    assert_eq!(run(Some("low")), 1);
    // With the default pack nothing gets through: even --fail-on low is met by nobody.
    let ok = mcpwall(
        &[
            "scan",
            "--seed",
            SEED,
            "--no-progress",
            "--quiet",
            "--only",
            "CR-013",
            "--fail-on",
            "low",
        ],
        home.path(),
    );
    assert_eq!(code(&ok), 0, "{}", String::from_utf8_lossy(&ok.stdout));
    // Usage errors exit 2.
    assert_eq!(
        code(&mcpwall(&["scan", "--fail-on", "severe"], home.path())),
        2
    );
    assert_eq!(
        code(&mcpwall(
            &["scan", "--server-cmd", "python server.py"],
            home.path()
        )),
        2
    );
}

/// A server that cannot start stops the scan before the first attack, with what it wrote
/// on stderr: not 86 identical errors and a report.
#[test]
fn a_server_that_cannot_start_stops_the_scan_with_its_stderr() {
    let home = tempfile::tempdir().unwrap();
    let started = std::time::Instant::now();
    let out = mcpwall(
        &[
            "scan",
            "--server-cmd",
            r#"["sh","-c","echo 'ModuleNotFoundError: No module named mcp' >&2; exit 1"]"#,
            "--no-progress",
            "--format",
            "json",
            "--timeout",
            "5",
        ],
        home.path(),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(code(&out), 2, "{stderr}");
    assert!(out.stdout.is_empty(), "no report for a scan that never ran");
    assert!(
        stderr.starts_with("error: the server to scan did not start"),
        "{stderr}"
    );
    assert!(
        stderr.contains("ModuleNotFoundError: No module named mcp"),
        "{stderr}"
    );
    assert!(
        stderr.contains("hint: run the command yourself"),
        "{stderr}"
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(20),
        "stopped early"
    );
}

#[test]
fn compare_reports_deltas_and_exit_codes() {
    let home = tempfile::tempdir().unwrap();
    let policy = weak_policy(home.path());
    let only = "PT-001,CR-013,CE-004,ID-001";
    let good = home.path().join("good.json");
    let bad = home.path().join("bad.json");
    mcpwall(
        &[
            "scan",
            "--seed",
            SEED,
            "--no-progress",
            "--quiet",
            "--only",
            only,
            "--output",
            good.to_str().unwrap(),
        ],
        home.path(),
    );
    mcpwall(
        &[
            "scan",
            "-c",
            policy.to_str().unwrap(),
            "--seed",
            SEED,
            "--no-progress",
            "--quiet",
            "--only",
            only,
            "--output",
            bad.to_str().unwrap(),
        ],
        home.path(),
    );
    let (g, b) = (good.to_str().unwrap(), bad.to_str().unwrap());
    let worse = mcpwall(&["compare", g, b, "--format", "json"], home.path());
    assert_eq!(code(&worse), 1);
    let better = mcpwall(&["compare", b, g], home.path());
    assert_eq!(code(&better), 0);
    assert_eq!(code(&mcpwall(&["compare", g, g], home.path())), 0);
    let worse_json: Value = serde_json::from_slice(&worse.stdout).unwrap();
    golden().bind(|| {
        insta::assert_snapshot!(
            "compare_worse",
            serde_json::to_string_pretty(&worse_json).unwrap()
        );
        insta::assert_snapshot!("compare_better", String::from_utf8(better.stdout).unwrap());
    });
    // Incompatible inputs.
    let mut future: Value = serde_json::from_str(&std::fs::read_to_string(&good).unwrap()).unwrap();
    future["schema_version"] = 99.into();
    let f = home.path().join("future.json");
    std::fs::write(&f, future.to_string()).unwrap();
    assert_eq!(
        code(&mcpwall(&["compare", g, f.to_str().unwrap()], home.path())),
        2
    );
    std::fs::write(&f, "not json").unwrap();
    assert_eq!(
        code(&mcpwall(&["compare", g, f.to_str().unwrap()], home.path())),
        2
    );
}

#[test]
fn third_party_filesystem_server_marks_missing_tools_not_applicable() {
    let bin = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/interop/node_modules/.bin/mcp-server-filesystem");
    if !bin.exists() {
        assert!(
            std::env::var_os("MCPWALL_REQUIRE_INTEROP").is_none(),
            "{} missing (run .ci/run to install it)",
            bin.display()
        );
        eprintln!(
            "\n!!! SKIPPED: no {}; run .ci/run to install it !!!\n",
            bin.display()
        );
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let project = home.path().join("proj");
    std::fs::create_dir_all(&project).unwrap();
    let cmd = serde_json::to_string(&[bin.to_str().unwrap(), project.to_str().unwrap()]).unwrap();
    // The attacks on file tools, which it has, and one of each kind that needs a tool it
    // lacks: every attack starts the Node server twice (baseline and protected), and the
    // whole list took 5 minutes of CI on a loaded machine. The built-in target runs them all.
    let only = "PT-001,PT-002,PT-003,CR-001,CR-002,CR-003,WR-001,WR-003,JS-001,GH-001,\
                CE-001,EX-001,EX-003,LK-001,SC-001";
    let out = mcpwall(
        &[
            "scan",
            "--server-cmd",
            &cmd,
            "--only",
            only,
            "--no-progress",
            "--format",
            "json",
            "--timeout",
            "30",
        ],
        home.path(),
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let by_id = |id: &str| {
        report["results"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["attack_id"] == id)
            .unwrap()
            .clone()
    };
    // It has read_file / write_file but no shell, fetch or database tools.
    for id in ["CE-001", "EX-001", "EX-003", "LK-001", "SC-001"] {
        assert_eq!(by_id(id)["protected"], "NOT_APPLICABLE", "{id}");
    }
    for id in ["PT-001", "CR-002"] {
        assert_eq!(by_id(id)["protected"], "PASS", "{id}: {}", by_id(id));
    }
    assert_eq!(report["summary"]["error"], 0, "{report}");
}

#[test]
fn target_text_is_sanitised_for_the_terminal() {
    let evil = "ok\u{1b}[2J\u{1b}]0;pwned\u{7}\u{202e}txt\rdone";
    let clean = mcpwall::redteam::report::clean(evil, 100);
    assert_eq!(clean, "oktxt done");
    assert_eq!(
        mcpwall::redteam::report::clean(&"x".repeat(500), 10)
            .chars()
            .count(),
        11
    );
}

/// A running `mcpwall serve` with tokens for alice and bob (carol's revoked) in front of
/// the built-in target, where bob may not use `execute_command`.
struct Served {
    child: std::process::Child,
    url: String,
    dir: tempfile::TempDir,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve_gateway(extra_args: &[&str]) -> Served {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let fake = dir.path().join("fake");
    std::fs::create_dir_all(&home).unwrap();
    // The built-in target keeps its state in `.target/`.
    std::fs::create_dir_all(fake.join(".target")).unwrap();
    for name in ["alice", "bob", "carol"] {
        let o = mcpwall(&["token", "add", name], &home);
        assert_eq!(code(&o), 0, "{}", String::from_utf8_lossy(&o.stderr));
        std::fs::write(dir.path().join(format!("{name}.tok")), &o.stdout).unwrap();
    }
    assert_eq!(code(&mcpwall(&["token", "remove", "carol"], &home)), 0);
    let policy = dir.path().join("policy.yml");
    std::fs::write(
        &policy,
        format!(
            "version: 1\nsettings:\n  log_dir: \"{}\"\nrules:\n  - name: bob-no-shell\n    match: {{identity: bob, tool: execute_command}}\n    action: deny\n",
            dir.path().join("logs").display()
        ),
    )
    .unwrap();
    let exe = env!("CARGO_BIN_EXE_mcpwall");
    let mut child = Command::new(exe)
        .args(["serve", "--listen", "127.0.0.1:0", "-c"])
        .arg(&policy)
        .args(extra_args)
        .args(["--", exe, "scan", "--serve-target", "--fake-home"])
        .arg(&fake)
        .env("HOME", &home)
        .current_dir(dir.path())
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    let url = loop {
        line.clear();
        assert!(stderr.read_line(&mut line).unwrap() > 0, "serve exited");
        if let Some(rest) = line.split("serving ").nth(1) {
            break rest.split(' ').next().unwrap().to_string();
        }
    };
    std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
    Served { child, url, dir }
}

fn scan_gateway(s: &Served, with_other: bool) -> Value {
    let tok = |n: &str| s.dir.path().join(format!("{n}.tok"));
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mcpwall"));
    cmd.args(["scan", "--format", "json", "--url", &s.url, "--token-file"])
        .arg(tok("alice"))
        .arg("--revoked-token-file")
        .arg(tok("carol"));
    if with_other {
        cmd.arg("--other-token-file").arg(tok("bob"));
    }
    let o = cmd.env("HOME", s.dir.path().join("home")).output().unwrap();
    assert_eq!(code(&o), 0, "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

#[test]
fn gateway_identity_and_session_attacks_are_refused_by_mcpwall_serve() {
    let served = serve_gateway(&[]);
    let report = scan_gateway(&served, true);
    assert_eq!(report["target"], served.url.as_str());
    for (id, stopped) in [
        ("GW-001", "401"),
        ("GW-002", "401"),
        ("GW-003", "401"),
        ("GW-004", "404"),
        ("GW-005", "404"),
        ("GW-006", "403"),
        ("GW-007", "-32020"),
        ("GW-008", "`execute_command`"),
    ] {
        let r = result(&report, id);
        assert_eq!(r["protected"], "PASS", "{id}: {r}");
        assert!(
            r["stopped_by"].as_str().unwrap().contains(stopped),
            "{id}: {r}"
        );
    }
    assert_eq!(report["summary"]["vulnerable"], 0);
    assert_eq!(report["summary"]["complete"], true);

    // Without a second identity the attacks that need one say why they were skipped.
    let report = scan_gateway(&served, false);
    for id in ["GW-004", "GW-008"] {
        let r = result(&report, id);
        assert_eq!(r["protected"], "SKIPPED", "{id}: {r}");
        assert!(r["reason"].as_str().unwrap().contains("--other-token-file"));
    }
}

#[test]
fn gateway_attacks_find_an_origin_the_operator_allowed() {
    // An allowed foreign origin is what GW-006 reports, with its remediation.
    let served = serve_gateway(&["--allow-origin", "https://attacker.example"]);
    let report = scan_gateway(&served, true);
    let r = result(&report, "GW-006");
    assert_eq!(r["protected"], "VULNERABLE", "{r}");
    assert!(
        r["remediation"]
            .as_str()
            .unwrap()
            .contains("--allow-origin")
    );
}

#[test]
fn gateway_attacks_do_not_apply_to_a_stdio_target() {
    let home = tempfile::tempdir().unwrap();
    let report = scan_json(&["--only", "GW-001,GW-004,GW-008"], home.path());
    for id in ["GW-001", "GW-004", "GW-008"] {
        let r = result(&report, id);
        assert_eq!(r["protected"], "NOT_APPLICABLE", "{id}: {r}");
        assert!(r["note"].as_str().unwrap().contains("--url"), "{r}");
    }
}
