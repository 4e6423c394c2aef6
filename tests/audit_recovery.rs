//! The audit log after things go wrong: a writer that stopped mid-line (a crash,
//! simulated by cutting the file mid-line with its seal as it was before that write), a
//! full disk (the `test-support` feature's `audit::fault`: appends write what fits, then
//! fail as `write(2)` does with ENOSPC), lines removed at a file's end, a wall clock
//! stepped back across midnight. The next run mends what it finds and records it in the
//! chain; `mcpwall log verify` tells each from an edit and checks the whole log.

#[path = "support/audit.rs"]
mod audit;
#[path = "support/sandbox.rs"]
mod sandbox;

use std::path::Path;
use std::time::{Duration, Instant, UNIX_EPOCH};

use audit::{DAY, day_files, event, lines_of, name, seal_of, start, today, verify, write_lines};
use mcpwall::audit::{chain, fault};
use sandbox::Sandbox;
use serde_json::Value;

/// One run of the writer: events `ids` at `at(id)`, in one batch.
fn run(dir: &Path, ids: std::ops::Range<u64>, at: impl Fn(u64) -> u64) -> (u64, u64) {
    let audit = start(dir, "srv");
    let mut batch: Vec<_> = ids
        .map(|i| event(UNIX_EPOCH + Duration::from_secs(at(i)), i))
        .collect();
    audit.sender().send(&mut batch);
    audit.finish(Duration::from_secs(10))
}

/// Cut `file` `back` bytes before its end (mid-line) and put back the seal it had before
/// its last write: what a writer that died in the middle of that write leaves.
fn crash_mid_line(file: &Path, seal_before: &[u8], back: usize) {
    let bytes = std::fs::read(file).unwrap();
    std::fs::write(file, &bytes[..bytes.len() - back]).unwrap();
    std::fs::write(seal_of(file), seal_before).unwrap();
}

fn json(run: &sandbox::Run) -> Value {
    serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("{e}: {}", run.stdout))
}

#[test]
fn a_line_cut_by_a_crash_is_sealed_by_the_next_run_and_verify_checks_the_rest() {
    let sandbox = Sandbox::new();
    let dir = sandbox.root().join("logs");
    let yesterday = (today() - 1) * DAY + 3600;
    run(&dir, 0..5, |i| yesterday + i);
    let file = day_files(&dir)[0].clone();
    let seal_before = std::fs::read(seal_of(&file)).unwrap();
    run(&dir, 5..8, |i| yesterday + i);
    crash_mid_line(&file, &seal_before, 40);

    // Before any writer comes back: the cut last line lies beyond the seal, a crash.
    let v = json(&verify(&sandbox, &dir, &["--format", "json"]));
    assert_eq!(v["intact"], true, "{v}");
    assert_eq!(v["cut_lines"][0]["line"], 8, "{v}");
    assert_eq!(v["cut_lines"][0]["sealed_at"], Value::Null, "{v}");

    // The next run ends the cut line, records it and chains on; so does the next day.
    run(&dir, 8..12, |i| yesterday + i);
    run(&dir, 12..15, |i| yesterday + DAY + i);
    let lines = lines_of(&file);
    let record: Value = serde_json::from_str(&lines[8]).unwrap();
    assert_eq!(record["record"], "cut_line", "{}", lines[8]);
    assert_eq!(record["rule"], "mcpwall:cut_line");
    let offset: usize = lines[..7].iter().map(|l| l.len() + 1).sum();
    assert_eq!(record["cut"]["offset"], offset as u64);
    assert_eq!(record["cut"]["length"], lines[7].len() as u64);
    assert!(
        serde_json::from_str::<Value>(&lines[9]).unwrap()["prev"] == record["hash"],
        "the run's events chain to the record"
    );
    let run_verify = verify(&sandbox, &dir, &[]);
    assert_eq!(run_verify.code, 0, "{}", run_verify.stdout);
    assert!(
        run_verify.stdout.contains(&format!(
            "CUT     {}:8: a line cut off after {} bytes",
            name(&file),
            lines[7].len()
        )) && run_verify.stdout.contains("sealed by the record at line 9"),
        "{}",
        run_verify.stdout
    );
    assert!(
        run_verify
            .stdout
            .contains("15 chained line(s) checked of 16 line(s)"),
        "{}",
        run_verify.stdout
    );
    assert!(
        run_verify.stdout.contains("intact:"),
        "{}",
        run_verify.stdout
    );
    assert_eq!(verify(&sandbox, &dir, &["--strict"]).code, 1);

    // An edit after the cut, and one in the next day's file: both found, the cut still
    // told apart, every line still checked.
    let mut l = lines_of(&file);
    l[10] = l[10].replace("\"id\":9", "\"id\":99");
    write_lines(&file, &l);
    let today_file = day_files(&dir)[1].clone();
    let mut l = lines_of(&today_file);
    l[1] = l[1].replace("read_file", "list_files");
    write_lines(&today_file, &l);
    let broken = verify(&sandbox, &dir, &["--format", "json"]);
    assert_eq!(broken.code, 1, "{}", broken.stdout);
    let v = json(&broken);
    let problems: Vec<(String, u64, String)> = v["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["file"].as_str().unwrap().to_string(),
                p["line"].as_u64().unwrap(),
                p["kind"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        problems,
        [
            (name(&file), 11, "edited".to_string()),
            (name(&today_file), 2, "edited".to_string())
        ],
        "{v}"
    );
    assert_eq!(v["cut_lines"][0]["sealed_at"], 9, "{v}");
    assert_eq!(v["chained_lines"], 15, "{v}");
    assert_eq!(v["lines"], 16, "{v}");

    // The record is a line of the log like any other.
    let shown = sandbox.run(
        &[
            "log",
            "--dir",
            dir.to_str().unwrap(),
            "--rule",
            "mcpwall:cut_line",
        ],
        "",
    );
    assert_eq!(shown.stdout.lines().count(), 1, "{}", shown.stdout);
    assert!(
        shown.stdout.contains("was cut off after"),
        "{}",
        shown.stdout
    );
}

/// A cut line changed after the next run sealed it is no longer the line its record
/// describes; removing it leaves a record of a line that is not there.
#[test]
fn a_sealed_cut_line_cannot_be_changed_or_removed_unnoticed() {
    let sandbox = Sandbox::new();
    let base = today() * DAY + 60;
    for (tag, tamper) in [
        (
            "changed",
            (|l: &mut Vec<String>| l[3] = l[3].replace("tools", "TOOLS")) as fn(&mut Vec<String>),
        ),
        ("removed", |l: &mut Vec<String>| {
            l.remove(3);
        }),
    ] {
        let dir = sandbox.root().join(tag);
        run(&dir, 0..3, |i| base + i);
        let file = day_files(&dir)[0].clone();
        let seal_before = std::fs::read(seal_of(&file)).unwrap();
        run(&dir, 3..4, |i| base + i);
        crash_mid_line(&file, &seal_before, 30);
        run(&dir, 4..6, |i| base + i);
        assert_eq!(verify(&sandbox, &dir, &[]).code, 0, "{tag}");
        let mut l = lines_of(&file);
        tamper(&mut l);
        write_lines(&file, &l);
        let v = json(&verify(&sandbox, &dir, &["--format", "json"]));
        assert_eq!(v["intact"], false, "{tag}: {v}");
        assert!(
            v["problems"]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p["kind"] == "cut_record_mismatch"),
            "{tag}: {v}"
        );
    }
}

/// Logs written before the writer sealed cut lines: the next run appended its first
/// line straight onto the cut one. The line's own event still verifies.
#[test]
fn a_line_an_older_writer_appended_onto_a_cut_line_is_a_cut_not_an_edit() {
    let sandbox = Sandbox::new();
    let dir = sandbox.root().join("logs");
    let base = today() * DAY + 60;
    run(&dir, 0..3, |i| base + i);
    let file = day_files(&dir)[0].clone();
    let seal_before = std::fs::read(seal_of(&file)).unwrap();
    run(&dir, 3..4, |i| base + i);
    crash_mid_line(&file, &seal_before, 50);
    // What the older writer did: chain to the last whole line and append, no newline first.
    let last: Value = serde_json::from_str(&lines_of(&file)[2]).unwrap();
    let prev: chain::Link = last["hash"]
        .as_str()
        .unwrap()
        .as_bytes()
        .try_into()
        .unwrap();
    let mut glued = Vec::new();
    let body = format!(
        r#"{{"ts":"{}T00:02:00.000000Z","session":"s","server":"srv","direction":"inbound","id":7,"method":"tools/call","tool":"read_file","action":"allow","rule":null,"message":null"#,
        mcpwall::audit::date_string(today() as i64)
    );
    let hash = chain::push_chained(&mut glued, body.as_bytes(), &prev);
    let mut bytes = std::fs::read(&file).unwrap();
    bytes.extend_from_slice(&glued);
    std::fs::write(&file, &bytes).unwrap();
    let seal = chain::Seal {
        len: bytes.len() as u64,
        hash,
    };
    std::fs::write(seal_of(&file), seal.to_bytes()).unwrap();
    run(&dir, 8..10, |i| base + 200 + i);

    let out = verify(&sandbox, &dir, &[]);
    assert_eq!(out.code, 0, "{}", out.stdout);
    assert!(
        out.stdout.contains(":4: the line begins with") && out.stdout.contains("older mcpwall"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("6 chained line(s)"), "{}", out.stdout);
}

#[test]
fn lines_removed_at_a_file_s_end_stay_reported_after_the_next_run() {
    let sandbox = Sandbox::new();
    let dir = sandbox.root().join("logs");
    let base = today() * DAY + 60;
    run(&dir, 0..6, |i| base + i);
    let file = day_files(&dir)[0].clone();
    let mut l = lines_of(&file);
    l.truncate(4);
    write_lines(&file, &l);
    // The next run rewrites the seal: only its record keeps what it found.
    run(&dir, 6..8, |i| base + i);
    let out = verify(&sandbox, &dir, &[]);
    assert_eq!(out.code, 1, "{}", out.stdout);
    assert!(
        out.stdout
            .contains(&format!("BROKEN  {}:5: this file was", name(&file)))
            && out.stdout.contains("shorter than the"),
        "{}",
        out.stdout
    );
}

/// Events at 00:00:05, then a clock stepped back to 23:59:58 of the day before (a day
/// file begun after the later one), then on again: one chain, no missing day.
#[test]
fn a_clock_stepped_back_across_midnight_is_not_a_missing_day_file() {
    let sandbox = Sandbox::new();
    let dir = sandbox.root().join("logs");
    let midnight = today() * DAY;
    run(&dir, 0..3, |i| midnight + 5 + i);
    run(&dir, 3..7, |i| {
        if i < 5 {
            midnight - 2 + (i - 3)
        } else {
            midnight + 10 + i
        }
    });
    let files = day_files(&dir);
    assert_eq!(files.len(), 2, "{files:?}");
    let first_of_yesterday: Value = serde_json::from_str(&lines_of(&files[0])[0]).unwrap();
    let third_of_today: Value = serde_json::from_str(&lines_of(&files[1])[2]).unwrap();
    assert_eq!(
        first_of_yesterday["prev"], third_of_today["hash"],
        "the earlier-dated file goes on from the later one"
    );
    let out = verify(&sandbox, &dir, &[]);
    assert_eq!(out.code, 0, "{}", out.stdout);
    assert!(out.stdout.ends_with("intact\n"), "{}", out.stdout);
    assert!(out.stdout.contains("7 chained line(s)"), "{}", out.stdout);
    // Deleting the file the other chains to is still found.
    std::fs::remove_file(&files[1]).unwrap();
    std::fs::remove_file(seal_of(&files[1])).unwrap();
    let out = verify(&sandbox, &dir, &[]);
    assert_eq!(out.code, 1, "{}", out.stdout);
    assert!(
        out.stdout.contains("chains to a day file that is missing"),
        "{}",
        out.stdout
    );
}

/// A full disk: the write that meets it gets in part (a line cut mid-way), the events
/// after it are lost until there is room again; then the writer seals the cut line and
/// records a gap of exactly the events lost, with their times, before going on.
#[test]
fn events_lost_to_a_full_disk_are_recorded_as_a_gap_once_writing_works() {
    let sandbox = Sandbox::new();
    let dir = sandbox.root().join("logs");
    let t0 = today() * DAY + 3600;
    let at = |i: u64| UNIX_EPOCH + Duration::from_secs(t0 + i * 10);
    let audit = start(&dir, "srv");
    let tx = audit.sender();
    let send = |ids: std::ops::Range<u64>| {
        let mut batch: Vec<_> = ids.map(|i| event(at(i), i)).collect();
        tx.send(&mut batch);
    };
    let wait = |what: &str, done: &dyn Fn() -> bool| {
        let start = Instant::now();
        while !done() {
            assert!(start.elapsed() < Duration::from_secs(20), "{what}");
            std::thread::sleep(Duration::from_millis(5));
        }
    };
    send(0..5);
    wait("the first events written", &|| {
        dir.is_dir()
            && day_files(&dir)
                .first()
                .is_some_and(|f| lines_of(f).len() == 5)
    });
    fault::fill_disk(&dir, 100);
    send(5..15);
    wait("the writer meets the full disk", &|| {
        fault::refused(&dir) > 0
    });
    send(15..20);
    std::thread::sleep(Duration::from_millis(300));
    fault::free_disk(&dir);
    // Past the writer's one-second pause before it opens the file again.
    std::thread::sleep(Duration::from_millis(1200));
    send(20..25);
    drop(tx);
    let (written, dropped) = audit.finish(Duration::from_secs(10));
    assert_eq!(written + dropped, 25);
    assert!(dropped >= 10, "{dropped}");

    let file = day_files(&dir)[0].clone();
    let mut ids = Vec::new();
    let mut gaps = Vec::new();
    for line in lines_of(&file) {
        let Ok(v) = serde_json::from_str::<Value>(&line) else {
            continue; // the cut line
        };
        match v["record"].as_str() {
            Some("gap") => gaps.push(v),
            Some(_) => {}
            None => ids.push(v["id"].as_u64().unwrap()),
        }
    }
    assert_eq!(gaps.len(), 1, "{gaps:?}");
    let gap = &gaps[0]["gap"];
    assert_eq!(gap["events"], dropped, "{gap}");
    assert_eq!(ids.len() as u64, written);
    assert!(
        ids.starts_with(&[0, 1, 2, 3, 4]) && ids.ends_with(&[20, 21, 22, 23, 24]),
        "{ids:?}"
    );
    let text = |i: u64| {
        let mut s = String::new();
        mcpwall::audit::rfc3339(&mut s, at(i));
        s
    };
    assert_eq!(gap["from"], text(5), "{gap}");
    assert!(
        gap["until"] == text(14) || gap["until"] == text(19),
        "{gap}"
    );
    assert!(
        gap["reason"]
            .as_str()
            .unwrap()
            .contains("no space left on device"),
        "{gap}"
    );

    let out = verify(&sandbox, &dir, &[]);
    assert_eq!(out.code, 0, "{}", out.stdout);
    assert!(
        out.stdout.contains(&format!("GAP     {}:", name(&file)))
            && out
                .stdout
                .contains(&format!("{dropped} event(s) between {} and", text(5))),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("CUT     "), "{}", out.stdout);
    let v = json(&verify(&sandbox, &dir, &["--format", "json"]));
    assert_eq!(v["lost_events"], dropped, "{v}");
    assert_eq!(v["complete"], false, "{v}");
    assert_eq!(verify(&sandbox, &dir, &["--strict"]).code, 1);
}

/// A disk that frees a little room: the write that mends a cut line is cut off in turn;
/// the next one seals both as one cut and the chain holds.
#[test]
fn a_mending_write_cut_off_in_turn_is_sealed_with_the_line_it_mended() {
    let sandbox = Sandbox::new();
    let dir = sandbox.root().join("logs");
    let t0 = today() * DAY + 3600;
    let audit = start(&dir, "srv");
    let tx = audit.sender();
    let send = |ids: std::ops::Range<u64>| {
        let mut batch: Vec<_> = ids
            .map(|i| event(UNIX_EPOCH + Duration::from_secs(t0 + i), i))
            .collect();
        tx.send(&mut batch);
    };
    let wait = |what: &str, done: &dyn Fn() -> bool| {
        let start = Instant::now();
        while !done() {
            assert!(start.elapsed() < Duration::from_secs(20), "{what}");
            std::thread::sleep(Duration::from_millis(5));
        }
    };
    send(0..3);
    wait("the first events written", &|| {
        dir.is_dir()
            && day_files(&dir)
                .first()
                .is_some_and(|f| lines_of(f).len() == 3)
    });
    fault::fill_disk(&dir, 60);
    send(3..6);
    wait("the writer meets the full disk", &|| {
        fault::refused(&dir) > 0
    });
    // Room for 30 bytes: the mending write (a newline, the record, the gap) gets in part.
    fault::fill_disk(&dir, 30);
    wait("the mending write is cut off", &|| fault::refused(&dir) > 0);
    fault::free_disk(&dir);
    std::thread::sleep(Duration::from_millis(1200));
    send(6..8);
    drop(tx);
    let (written, dropped) = audit.finish(Duration::from_secs(10));
    assert_eq!((written, dropped), (5, 3));

    let v = json(&verify(&sandbox, &dir, &["--format", "json"]));
    assert_eq!(v["intact"], true, "{v}");
    assert_eq!(v["cut_lines"].as_array().unwrap().len(), 1, "{v}");
    assert_eq!(v["cut_lines"][0]["lines"], 2, "{v}");
    assert_eq!(v["cut_lines"][0]["line"], 4, "{v}");
    assert_eq!(v["lost_events"], 3, "{v}");
}

/// A tmpfs mounted for one test, unmounted when dropped.
struct Tmpfs(std::path::PathBuf);

impl Tmpfs {
    /// `None` (and the reason on stderr) where mounting is not allowed (not root, or no
    /// mount namespace of ours).
    fn mount(at: &Path, size: &str) -> Option<Tmpfs> {
        std::fs::create_dir_all(at).unwrap();
        let out = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(at)
            .output();
        match out {
            Ok(o) if o.status.success() => Some(Tmpfs(at.to_path_buf())),
            Ok(o) => {
                eprintln!(
                    "skipped: cannot mount a tmpfs here: {}",
                    String::from_utf8_lossy(&o.stderr).trim()
                );
                None
            }
            Err(e) => {
                eprintln!("skipped: cannot run mount: {e}");
                None
            }
        }
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
    }
}

/// The same on a real full file system: a 64 KiB tmpfs, filled by the log and a
/// spare file; the spare file is removed once the writer has met the full disk.
#[test]
fn a_real_full_disk_costs_events_that_a_gap_records_and_the_chain_stays_intact() {
    let sandbox = Sandbox::new();
    let Some(disk) = Tmpfs::mount(&sandbox.root().join("disk"), "64k") else {
        return;
    };
    let dir = disk.0.join("logs");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(disk.0.join("spare"), vec![b'x'; 24 * 1024]).unwrap();
    let audit = start(&dir, "srv");
    let tx = audit.sender();
    let t0 = today() * DAY + 7200;
    let sent = std::cell::Cell::new(0u64);
    let send_some = |n: u64| {
        let from = sent.get();
        let mut batch: Vec<_> = (from..from + n)
            .map(|i| {
                let mut e = event(UNIX_EPOCH + Duration::from_secs(t0 + i), i);
                e.message = Some("m".repeat(700).into());
                e
            })
            .collect();
        sent.set(from + n);
        tx.send(&mut batch);
        std::thread::sleep(Duration::from_millis(150));
    };
    // About 1 KiB a line: the disk is full after some 40 of them.
    for _ in 0..12 {
        send_some(10);
    }
    let full_at = sent.get();
    std::fs::remove_file(disk.0.join("spare")).unwrap();
    std::thread::sleep(Duration::from_millis(1200));
    send_some(5);
    drop(tx);
    let (written, dropped) = audit.finish(Duration::from_secs(10));
    assert_eq!(written + dropped, sent.get());
    assert!(
        dropped > 0 && dropped < full_at,
        "{written} written, {dropped} lost"
    );

    let file = day_files(&dir)[0].clone();
    let gaps: Vec<Value> = lines_of(&file)
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["record"] == "gap")
        .collect();
    let recorded: u64 = gaps
        .iter()
        .map(|g| g["gap"]["events"].as_u64().unwrap())
        .sum();
    assert_eq!(recorded, dropped, "{gaps:?}");
    let v = json(&verify(&sandbox, &dir, &["--format", "json"]));
    assert_eq!(v["intact"], true, "{v}");
    assert_eq!(v["lost_events"], dropped, "{v}");
    eprintln!(
        "a 64 KiB tmpfs: {written} events written, {dropped} lost and recorded in {} gap(s), {} cut line(s) sealed",
        gaps.len(),
        v["cut_lines"].as_array().unwrap().len()
    );
}
