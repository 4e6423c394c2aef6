//! The audit log end to end: the writer's hash chain, `mcpwall log verify` catching each
//! kind of tampering, retention, two processes writing one day file, the original
//! mcpwall's (Node) lines beside ours, and `mcpwall log` reading, filtering, summarising
//! and following.

#[path = "support/audit.rs"]
mod audit;
#[path = "support/sandbox.rs"]
mod sandbox;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use audit::{DAY, day_files, event, lines_of, name, seal_of, start, write_lines};
use mcpwall::audit::{Verdict, retention};
use sandbox::{Run, Sandbox};
use serde_json::Value;

/// Write `per_day` events on each of `days` consecutive days ending today, through the
/// real writer; every third is a denial.
fn write_days(dir: &Path, days: u64, per_day: u64) {
    let today = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
        / DAY;
    let audit = start(dir, "srv");
    let tx = audit.sender();
    for d in (0..days).rev() {
        let mut batch = Vec::new();
        for i in 0..per_day {
            let ts = UNIX_EPOCH + Duration::from_secs((today - d) * DAY + 60 + i);
            batch.push(event(ts, i));
        }
        tx.send(&mut batch);
    }
    drop(tx);
    assert_eq!(audit.finish(Duration::from_secs(10)).1, 0);
}

fn verify(sandbox: &Sandbox, dir: &Path) -> Run {
    audit::verify(sandbox, dir, &[])
}

/// A fresh log of three days, four events each, in its own directory.
fn fresh_log(sandbox: &Sandbox, tag: &str) -> (PathBuf, Vec<PathBuf>) {
    let dir = sandbox.root().join(tag);
    write_days(&dir, 3, 4);
    let files = day_files(&dir);
    assert_eq!(files.len(), 3);
    (dir, files)
}

#[test]
fn an_intact_log_verifies_and_each_tampering_is_reported_where_it_is() {
    let sandbox = Sandbox::new();
    let (dir, files) = fresh_log(&sandbox, "intact");
    let run = verify(&sandbox, &dir);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert!(
        run.stdout.contains("3 day file(s), 12 chained line(s)"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("intact"));
    // Each line is JSON with the chain last; a day's first line chains to the day before.
    let first_of_day2: Value = serde_json::from_str(&lines_of(&files[1])[0]).unwrap();
    let last_of_day1: Value = serde_json::from_str(lines_of(&files[0]).last().unwrap()).unwrap();
    assert_eq!(first_of_day2["prev"], last_of_day1["hash"]);

    type Tamper = fn(&[PathBuf]);
    let cases: &[(&str, Tamper, &str)] = &[
        (
            "edit",
            |f| {
                let mut l = lines_of(&f[1]);
                l[1] = l[1].replace("read_file", "list_files");
                write_lines(&f[1], &l);
            },
            ":2: the line was edited",
        ),
        (
            "delete",
            |f| {
                let mut l = lines_of(&f[1]);
                l.remove(1);
                write_lines(&f[1], &l);
            },
            ":2: the line does not follow line 1",
        ),
        (
            "reorder",
            |f| {
                let mut l = lines_of(&f[1]);
                l.swap(1, 2);
                write_lines(&f[1], &l);
            },
            ":2: the line does not follow line 1",
        ),
        (
            "truncate the last line",
            |f| {
                let mut l = lines_of(&f[2]);
                l.pop();
                write_lines(&f[2], &l);
            },
            "truncated: its seal records",
        ),
        (
            "cut the last line short",
            |f| {
                let text = std::fs::read_to_string(&f[2]).unwrap();
                std::fs::write(&f[2], &text[..text.len() - 30]).unwrap();
            },
            ":4: the last line is cut off",
        ),
        (
            "remove a day file in the middle, seal too",
            |f| {
                std::fs::remove_file(&f[1]).unwrap();
                std::fs::remove_file(seal_of(&f[1])).unwrap();
            },
            ":1: the first line chains to no line of",
        ),
        (
            "remove a day file in the middle",
            |f| {
                std::fs::remove_file(&f[1]).unwrap();
            },
            "the day file is missing (its seal remains)",
        ),
        (
            "remove the first day file",
            |f| {
                std::fs::remove_file(&f[0]).unwrap();
                std::fs::remove_file(seal_of(&f[0])).unwrap();
            },
            ":1: the first line chains to a day file that is missing",
        ),
        (
            "replace the last line by an unchained one",
            |f| {
                let mut l = lines_of(&f[2]);
                l.pop();
                l.push(r#"{"ts":"2026-01-01T00:00:00Z","action":"allow"}"#.to_string());
                write_lines(&f[2], &l);
            },
            ":4: the line has no chain fields",
        ),
    ];
    for (what, tamper, expected) in cases {
        let (dir, files) = fresh_log(&sandbox, &what.replace(' ', "-"));
        tamper(&files);
        let run = verify(&sandbox, &dir);
        assert_eq!(run.code, 1, "{what} not detected:\n{}", run.stdout);
        assert!(
            run.stdout.contains("BROKEN") && run.stdout.contains(expected),
            "{what}: expected {expected:?} in\n{}",
            run.stdout
        );
    }
    // The file and line are named: the edit is in the middle day's file.
    let (dir, files) = fresh_log(&sandbox, "named");
    let mut l = lines_of(&files[1]);
    l[3] = l[3].replace("\"id\":3", "\"id\":4");
    write_lines(&files[1], &l);
    let run = verify(&sandbox, &dir);
    assert!(
        run.stdout.contains(&format!(
            "BROKEN  {}:4: the line was edited",
            name(&files[1])
        )),
        "{}",
        run.stdout
    );
    let json = sandbox.run(
        &[
            "log",
            "verify",
            "--format",
            "json",
            "--dir",
            dir.to_str().unwrap(),
        ],
        "",
    );
    assert_eq!(json.code, 1);
    let v: Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(v["intact"], false);
    assert_eq!(v["problems"][0]["line"], 4);
}

/// Rewrite a log's chain from its first line: lines of `sha_days` (by index) as an
/// earlier build wrote them (no `"chain"` member, SHA-256), the rest as this build does,
/// seals included.
fn rechain(files: &[PathBuf], sha_days: usize) {
    use sha2::Digest;
    const MARK: &str = r#","chain":"blake3""#;
    let mut prev = "0".repeat(64);
    for (day, file) in files.iter().enumerate() {
        let mut out = String::new();
        for line in lines_of(file) {
            let body = &line[..line.find(r#","prev":""#).unwrap()];
            let bare = body.strip_suffix(MARK).unwrap_or(body);
            let (body, hash) = if day < sha_days {
                let digest = sha2::Sha256::new()
                    .chain_update(prev.as_bytes())
                    .chain_update(bare.as_bytes())
                    .finalize();
                (bare.to_string(), hex(&digest))
            } else {
                let marked = format!("{bare}{MARK}");
                let mut h = blake3::Hasher::new();
                h.update(prev.as_bytes());
                h.update(marked.as_bytes());
                (marked, hex(h.finalize().as_bytes()))
            };
            out.push_str(&format!(
                "{body},\"prev\":\"{prev}\",\"hash\":\"{hash}\"}}\n"
            ));
            prev = hash;
        }
        std::fs::write(file, &out).unwrap();
        let seal = format!("mcpwall-seal-1 {:020} {prev}\n", out.len());
        std::fs::write(seal_of(file), seal).unwrap();
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn lines_hashed_with_sha256_by_earlier_builds_verify_in_one_chain_with_blake3_ones() {
    let sandbox = Sandbox::new();
    let (dir, files) = fresh_log(&sandbox, "mixed");
    // What this build writes: every line marked, and the writer's chain verifies.
    assert!(
        lines_of(&files[0])
            .iter()
            .all(|l| l.contains(r#","chain":"blake3","prev":"#))
    );
    rechain(&files, 1);
    assert!(!lines_of(&files[0])[0].contains(r#""chain""#));
    let run = verify(&sandbox, &dir);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert!(run.stdout.contains("12 chained line(s)"), "{}", run.stdout);
    // The writer goes on from a SHA-256 tip.
    let audit = start(&dir, "after-upgrade");
    audit.sender().send(&mut vec![event(SystemTime::now(), 99)]);
    assert_eq!(audit.finish(Duration::from_secs(10)).1, 0);
    let run = verify(&sandbox, &dir);
    assert_eq!(run.code, 0, "{}", run.stdout);
    assert!(run.stdout.contains("13 chained line(s)"), "{}", run.stdout);
    // The mark is part of what is hashed: taking it off a BLAKE3 line, or putting it on
    // a SHA-256 one, is an edit.
    for (file, line) in [(&files[2], 0), (&files[0], 1)] {
        rechain(&files, 1);
        let mut l = lines_of(file);
        l[line] = if l[line].contains(r#""chain""#) {
            l[line].replacen(r#","chain":"blake3""#, "", 1)
        } else {
            l[line].replacen(r#","prev":"#, r#","chain":"blake3","prev":"#, 1)
        };
        write_lines(file, &l);
        let run = verify(&sandbox, &dir);
        assert_eq!(run.code, 1, "{}", run.stdout);
        assert!(
            run.stdout
                .contains(&format!("{}:{}: the line was edited", name(file), line + 1)),
            "{}",
            run.stdout
        );
    }
}

#[test]
fn files_removed_by_retention_are_recorded_not_reported_as_tampering() {
    let sandbox = Sandbox::new();
    let dir = sandbox.root().join("logs");
    write_days(&dir, 5, 3);
    let today = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
        / DAY;
    let today_name = mcpwall::audit::date_string(today as i64);
    let cap = retention::Cap {
        max_days: 2,
        max_bytes: u64::MAX,
    };
    let gone = retention::apply(&dir, cap, &today_name, today as i64).unwrap();
    assert_eq!(gone.len(), 2, "{gone:?}");
    assert_eq!(day_files(&dir).len(), 3);
    let run = verify(&sandbox, &dir);
    assert_eq!(run.code, 0, "{}", run.stdout);
    assert!(
        run.stdout
            .contains("2 older day file(s) were removed by retention"),
        "{}",
        run.stdout
    );
    // Deleting the next oldest by hand is still caught.
    std::fs::remove_file(&day_files(&dir)[0]).unwrap();
    let run = verify(&sandbox, &dir);
    assert_eq!(run.code, 1, "{}", run.stdout);
}

/// Both helpers of the two-process test below run this: when `MCPWALL_TEST_WRITER_DIR`
/// is set, write 300 events in small batches (the chain is extended under the day
/// file's lock by whichever process writes).
#[test]
fn writer_child() {
    let Some(dir) = std::env::var_os("MCPWALL_TEST_WRITER_DIR") else {
        return;
    };
    let server = std::env::var("MCPWALL_TEST_WRITER_NAME").unwrap();
    let audit = start(Path::new(&dir), &server);
    let tx = audit.sender();
    for i in 0..300 {
        tx.send(&mut vec![event(SystemTime::now(), i)]);
        if i % 7 == 0 {
            std::thread::sleep(Duration::from_millis(3));
        }
    }
    drop(tx);
    assert_eq!(audit.finish(Duration::from_secs(10)), (300, 0));
}

#[test]
fn two_processes_writing_one_day_file_keep_one_intact_chain() {
    let sandbox = Sandbox::new();
    let dir = sandbox.root().join("logs");
    let me = std::env::current_exe().unwrap();
    let children: Vec<_> = ["one", "two"]
        .iter()
        .map(|name| {
            std::process::Command::new(&me)
                .args(["--exact", "writer_child", "--nocapture", "--test-threads=1"])
                .env("MCPWALL_TEST_WRITER_DIR", &dir)
                .env("MCPWALL_TEST_WRITER_NAME", name)
                .spawn()
                .unwrap()
        })
        .collect();
    for mut c in children {
        assert!(c.wait().unwrap().success());
    }
    let mut servers = std::collections::HashMap::new();
    for f in day_files(&dir) {
        for l in lines_of(&f) {
            let v: Value = serde_json::from_str(&l).unwrap();
            *servers
                .entry(v["server"].as_str().unwrap().to_string())
                .or_insert(0) += 1;
        }
    }
    assert_eq!(servers.get("one"), Some(&300), "{servers:?}");
    assert_eq!(servers.get("two"), Some(&300), "{servers:?}");
    let run = verify(&sandbox, &dir);
    assert_eq!(run.code, 0, "{}", run.stdout);
    assert!(run.stdout.contains("600 chained line(s)"), "{}", run.stdout);
}

/// Issue 27: the original mcpwall writes `YYYY-MM-DD.jsonl` beside our day files. Its lines
/// are shown as foreign and never enter or break the chain.
#[test]
fn the_original_mcpwall_s_lines_are_shown_as_foreign_and_left_out_of_the_chain() {
    let sandbox = Sandbox::new();
    let dir = sandbox.home().join(".mcpwall/logs");
    write_days(&dir, 1, 3);
    let today = mcpwall::audit::date_string(
        (SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs()
            / DAY) as i64,
    );
    // The original's line format, from its README.
    let theirs = format!(
        "{{\"ts\":\"{today}T00:00:30Z\",\"method\":\"tools/call\",\"tool\":\"read_file\",\"action\":\"allow\",\"rule\":null}}\n\
         {{\"ts\":\"{today}T00:01:30Z\",\"method\":\"tools/call\",\"tool\":\"read_file\",\"args\":\"[REDACTED]\",\"action\":\"deny\",\"rule\":\"block-ssh-keys\",\"message\":\"Blocked: access to SSH keys\"}}\n"
    );
    std::fs::write(dir.join(format!("{today}.jsonl")), &theirs).unwrap();
    let run = sandbox.run(&["log", "verify"], "");
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert!(
        run.stdout.contains("1 day file(s) of the original mcpwall"),
        "{}",
        run.stdout
    );

    // Read from the default directory (HOME's), interleaved by time, foreign marked.
    let run = sandbox.run(&["log"], "");
    assert_eq!(run.code, 0, "{}", run.stderr);
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(lines.len(), 5, "{}", run.stdout);
    assert!(
        lines[0].contains("[original mcpwall]") && lines[0].contains("ALLOW"),
        "{}",
        run.stdout
    );
    assert!(
        !lines[1].contains("[original mcpwall]") && lines[1].contains("srv"),
        "{}",
        run.stdout
    );
    assert!(
        lines[4].contains("[original mcpwall]") && lines[4].contains("block-ssh-keys"),
        "{}",
        run.stdout
    );
    assert!(
        !run.stdout.contains('\x1b'),
        "no colour when not on a terminal"
    );

    let run = sandbox.run(&["log", "--format", "json"], "");
    let events: Vec<Value> = run
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let foreign: Vec<&Value> = events
        .iter()
        .filter(|e| e.get("foreign").is_some())
        .collect();
    assert_eq!(foreign.len(), 2);
    assert_eq!(foreign[1]["event"]["rule"], "block-ssh-keys");
    assert!(
        events
            .iter()
            .filter(|e| e.get("foreign").is_none())
            .all(|e| e["hash"].is_string())
    );

    // Our later lines still chain, whatever the original wrote meanwhile.
    write_days(&dir, 1, 2);
    assert_eq!(sandbox.run(&["log", "verify"], "").code, 0);
    assert_eq!(
        std::fs::read_to_string(dir.join(format!("{today}.jsonl"))).unwrap(),
        theirs,
        "never written into"
    );
}

#[test]
fn filters_and_the_summary_select_what_was_asked() {
    let sandbox = Sandbox::new();
    let dir = sandbox.root().join("logs");
    write_days(&dir, 3, 6);
    let d = dir.to_str().unwrap();
    let json = |args: &[&str]| -> Vec<Value> {
        let mut all = vec!["log", "--format", "json", "--dir", d];
        all.extend_from_slice(args);
        let run = sandbox.run(&all, "");
        assert_eq!(run.code, 0, "{}", run.stderr);
        run.stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    assert_eq!(json(&[]).len(), 18);
    let denies = json(&["--action", "deny"]);
    assert_eq!(denies.len(), 6);
    assert!(denies.iter().all(|e| e["request"] == "cmd: rm -…[6 chars]"));
    assert_eq!(
        json(&["--action", "allow,deny", "--tool", "read_*"]).len(),
        12
    );
    assert_eq!(json(&["--rule", "mcpwall:*"]).len(), 6);
    assert_eq!(json(&["--server", "other"]).len(), 0);
    // Relative bounds: the three days' events lie between 2 and 3 days back (at most)
    // and the last is a minute past midnight, at most a day back.
    assert_eq!(json(&["--since", "3d"]).len(), 18);
    assert_eq!(json(&["--since", "1w", "--until", "1d"]).len(), 12);
    let today = mcpwall::audit::date_string(
        (SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs()
            / DAY) as i64,
    );
    // Absolute bounds: a date is its midnight UTC; --until is exclusive.
    assert_eq!(json(&["--since", &today]).len(), 6);
    assert_eq!(json(&["--until", &format!("{today}T00:00:00Z")]).len(), 12);
    let bad = sandbox.run(&["log", "--dir", d, "--since", "yesterday"], "");
    assert_eq!(bad.code, 2);
    assert!(bad.stderr.contains("not a time"), "{}", bad.stderr);

    let run = sandbox.run(&["log", "--summary", "--format", "json", "--dir", d], "");
    let s: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(s["events"], 18);
    assert_eq!(s["by_action"]["deny"], 6);
    assert_eq!(s["by_rule"]["mcpwall:default_action"], 6);
    assert_eq!(s["by_tool"]["read_file"], 12);
    assert_eq!(s["top_denials"][0]["count"], 6);
    assert_eq!(s["top_denials"][0]["tool"], "run_command");
    let text = sandbox.run(&["log", "--summary", "--dir", d], "");
    assert!(text.stdout.contains("top denials"), "{}", text.stdout);
}

/// A terminal-hostile field (a tool name a server chose) is escaped, never sent raw.
#[test]
fn text_output_escapes_control_characters() {
    let sandbox = Sandbox::new();
    let dir = sandbox.root().join("logs");
    let audit = start(&dir, "srv");
    let mut e = event(SystemTime::now(), 0);
    e.tool = Some("evil\u{1b}[2J\nFAKE".into());
    audit.sender().send(&mut vec![e]);
    audit.finish(Duration::from_secs(10));
    let run = sandbox.run(&["log", "--dir", dir.to_str().unwrap()], "");
    assert_eq!(run.stdout.lines().count(), 1, "{}", run.stdout);
    assert!(!run.stdout.contains('\u{1b}'));
}

/// The text log answers "what was blocked?" with the denial's masked shape, and says
/// which exception let an allowed call past a rule.
#[test]
fn text_output_shows_a_denials_shape_and_an_allows_exception() {
    let sandbox = Sandbox::new();
    let dir = sandbox.root().join("logs");
    let audit = start(&dir, "srv");
    let mut deny = event(SystemTime::now(), 2);
    deny.request = Some("path: ~/.…[3]/i…[5] (a path, 13 chars)".into());
    let mut allow = event(SystemTime::now(), 0);
    allow.message = Some(
        "rule \"block-ssh-keys\" lifted by exception \"block-ssh-keys#1\" at ~/.mcpwall/mcpwall.yml:7:7"
            .into(),
    );
    audit.sender().send(&mut vec![deny, allow]);
    audit.finish(Duration::from_secs(10));
    let run = sandbox.run(&["log", "--dir", dir.to_str().unwrap()], "");
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{}", run.stdout);
    assert!(
        lines[0].ends_with("[path: ~/.…[3]/i…[5] (a path, 13 chars)]"),
        "{}",
        lines[0]
    );
    assert!(
        lines[1].contains("lifted by exception \"block-ssh-keys#1\""),
        "{}",
        lines[1]
    );
}

/// What a script needs from the log: every action the log prints is a valid
/// `--action`, identities are shown, filtered and counted, times say they are UTC, and a
/// bidirectional override in a tool name is escaped (it would reorder the line).
#[test]
fn every_printed_action_and_identity_can_be_selected_and_counted() {
    let sandbox = Sandbox::new();
    let dir = sandbox.root().join("logs");
    let audit = start(&dir, "srv");
    let now = SystemTime::now();
    let mut events = Vec::new();
    for (i, (verdict, who)) in [
        (Verdict::Ask, "alice"),
        (Verdict::Approved, "alice"),
        (Verdict::Declined, "bob"),
        (Verdict::TimedOut, "bob"),
        (Verdict::Allow, "bob"),
    ]
    .into_iter()
    .enumerate()
    {
        let mut e = event(now, i as u64);
        e.action = verdict;
        e.identity = Some(who.into());
        events.push(e);
    }
    events[4].tool = Some("read\u{202E}elif".into());
    audit.sender().send(&mut events);
    audit.finish(Duration::from_secs(10));
    let d = dir.to_str().unwrap();
    for action in ["ask", "approved", "declined", "timed_out"] {
        let run = sandbox.run(&["log", "--dir", d, "--action", action], "");
        assert_eq!(run.code, 0, "--action {action}: {}", run.stderr);
        assert_eq!(
            run.stdout.lines().count(),
            1,
            "--action {action}: {}",
            run.stdout
        );
    }
    let run = sandbox.run(&["log", "--dir", d, "--identity", "bob"], "");
    assert_eq!(run.code, 0, "{}", run.stderr);
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{}", run.stdout);
    assert!(
        lines.iter().all(|l| l.contains("identity=bob")),
        "{}",
        run.stdout
    );
    assert!(lines.iter().all(|l| l.contains(" UTC ")), "{}", run.stdout);
    assert!(!run.stdout.contains('\u{202E}'), "{}", run.stdout);
    assert!(run.stdout.contains("read\\u{202e}elif"), "{}", run.stdout);
    // CLICOLOR_FORCE colours a pipe, as in every verb; NO_COLOR wins over it.
    let mut forced = sandbox.command(&["log", "--dir", d]);
    forced.env("CLICOLOR_FORCE", "1");
    let run = sandbox.run_command(forced, "");
    assert!(run.stdout.contains('\x1b'), "{}", run.stdout);
    let mut both = sandbox.command(&["log", "--dir", d]);
    both.env("CLICOLOR_FORCE", "1").env("NO_COLOR", "1");
    assert!(!sandbox.run_command(both, "").stdout.contains('\x1b'));
    let run = sandbox.run(&["log", "--dir", d, "--summary", "--format", "json"], "");
    let summary: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(summary["by_identity"]["alice"], 2, "{summary}");
    assert_eq!(summary["by_identity"]["bob"], 3, "{summary}");
}

#[test]
fn follow_prints_new_events_and_moves_on_to_the_next_day_file() {
    let sandbox = Sandbox::new();
    let dir = sandbox.root().join("logs");
    write_days(&dir, 1, 1);
    let mut child = sandbox
        .command(&[
            "log",
            "-f",
            "--format",
            "json",
            "--dir",
            dir.to_str().unwrap(),
        ])
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            if tx.send(line.unwrap()).is_err() {
                break;
            }
        }
    });
    let next = || {
        rx.recv_timeout(Duration::from_secs(20))
            .expect("followed line")
    };
    let first: Value = serde_json::from_str(&next()).unwrap();
    assert_eq!(first["id"], 0);
    // An event today, then one tomorrow: a new day file the follower must pick up.
    let audit = start(&dir, "later");
    let now = SystemTime::now();
    audit.sender().send(&mut vec![event(now, 7)]);
    audit
        .sender()
        .send(&mut vec![event(now + Duration::from_secs(DAY), 8)]);
    audit.finish(Duration::from_secs(10));
    let a: Value = serde_json::from_str(&next()).unwrap();
    let b: Value = serde_json::from_str(&next()).unwrap();
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(
        (a["id"].clone(), b["id"].clone()),
        (Value::from(7), Value::from(8))
    );
    assert_eq!(day_files(&dir).len(), 2);
    assert_eq!(verify(&sandbox, &dir).code, 0);
}

#[test]
fn log_retention_is_validated_with_its_place_in_the_file() {
    let sandbox = Sandbox::new();
    sandbox.write(
        "project/policy.yml",
        "version: 1\nsettings:\n  log_retention: {max_days: 0, max_mb: 100}\n",
    );
    let run = sandbox.run(&["explain-policy", "-c", "policy.yml"], "");
    assert_eq!(run.code, 2, "{}", run.stdout);
    assert!(
        run.stderr.contains("log_retention.max_days"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("policy.yml:3"), "{}", run.stderr);
    sandbox.write(
        "project/policy.yml",
        "version: 1\nsettings:\n  log_retention: {max_days: 30, max_mb: 100}\n",
    );
    assert_eq!(
        sandbox
            .run(&["explain-policy", "-c", "policy.yml"], "")
            .code,
        0
    );
}

/// One name for "no rule decided, `default_action` refused": `check` (text and JSON),
/// `explain-policy` and the audit log all say `mcpwall:default_action`.
#[test]
fn check_and_explain_name_the_default_action_as_the_log_does() {
    let sandbox = Sandbox::new();
    sandbox.write(
        "project/policy.yml",
        "version: 1\nsettings:\n  default_action: deny\n",
    );
    let call = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"anything","arguments":{}}}"#;
    let run = sandbox.run(&["check", "-c", "policy.yml", "--format", "json"], call);
    assert_eq!(run.code, 1, "{}", run.stderr);
    let v: Value = serde_json::from_str(run.stdout.trim()).unwrap();
    assert_eq!(v["rule"], "mcpwall:default_action");
    let run = sandbox.run(&["check", "-c", "policy.yml"], call);
    assert!(
        run.stdout.contains("Rule: mcpwall:default_action"),
        "{}",
        run.stdout
    );
    let run = sandbox.run(&["explain-policy", "-c", "policy.yml"], "");
    assert!(
        run.stdout.contains("`mcpwall:default_action`"),
        "{}",
        run.stdout
    );
}
