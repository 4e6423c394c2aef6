//! `mcpwall pins`: review and approve pinned tool definitions.
//!
//! The proxy pins every server's tools, prompts, resource templates and instructions on
//! first use and withholds what later drifts or looks poisoned. This verb is the only
//! way to accept such a change: nothing that reaches the proxy over MCP can approve.
//!
//! - `list`: every pinned server and what is pending for it;
//! - `diff SERVER`: the approved and the current definition side by side, with findings;
//! - `approve SERVER [ENTRY…]`: accept the pending state of the entries (all when none);
//! - `reset SERVER`: forget the server's pins; its next session pins afresh;
//! - `verify`: exit 1 when any server has drift or withheld poisoned entries (for CI).

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use miette::miette;
use serde_json::Value;
use similar::{DiffOp, TextDiff};

use crate::guard::pins::{ApprovedBy, EntryKey, Observed, PinFile, PinStore, Status, unix_now};

/// Arguments of `mcpwall pins`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub command: PinsCommand,
}

#[derive(Debug, clap::Subcommand)]
pub enum PinsCommand {
    /// List pinned servers and what is pending for each.
    List {
        /// `text`, or `json` for scripts: every server with its entries and their status.
        #[arg(long, value_enum, default_value_t)]
        format: super::common::OutputFormat,
    },
    /// Show pending changes of a server side by side (approved | now), with poison findings.
    Diff {
        /// Server name (as in `list`), or its pin key.
        server: String,
    },
    /// Accept the pending state of a server's entries (all of them when none are named).
    Approve {
        /// Server name (as in `list`), or its pin key.
        server: String,
        /// Tool names; `prompt:NAME`, `resource:URI`, `resource-template:URI` or `@instructions` for the rest.
        entries: Vec<String>,
        /// Approve without asking (for scripts). Without it, approval asks on a terminal
        /// and is refused when there is none.
        #[arg(long, short = 'y')]
        yes: bool,
        /// Let the agent see approved definitions that have poison findings. Without it, a
        /// poisoned definition is recorded as approved but stays withheld.
        #[arg(long)]
        allow_poisoned: bool,
    },
    /// Forget a server's pins; its next session pins it afresh (trust on first use).
    Reset {
        /// Server name (as in `list`), or its pin key.
        server: String,
        /// Forget without asking (for scripts). Without it, reset asks on a terminal and
        /// is refused when there is none.
        #[arg(long, short = 'y')]
        yes: bool,
    },
    /// Exit 1 if any pinned server has drift or withheld poisoned entries (for CI).
    Verify,
}

pub fn run(args: Args) -> miette::Result<ExitCode> {
    let store = PinStore::under_home(&home_dir()?);
    let width = terminal_width();
    let mut out = String::new();
    let code = match args.command {
        PinsCommand::List { format } => list(&store, format, &mut out)?,
        PinsCommand::Diff { server } => diff(&store, &server, width, &mut out)?,
        PinsCommand::Approve {
            server,
            entries,
            yes,
            allow_poisoned,
        } => {
            let how = Approval {
                yes,
                allow_poisoned,
                width,
            };
            approve(&store, &server, &entries, how, &mut out)?
        }
        PinsCommand::Reset { server, yes } => reset(&store, &server, yes, &mut out)?,
        PinsCommand::Verify => verify(&store, &mut out)?,
    };
    print!("{out}");
    Ok(code)
}

fn home_dir() -> miette::Result<PathBuf> {
    crate::platform::home_var()
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .ok_or_else(|| miette!("HOME is not set; mcpwall keeps its pins in ~/.mcpwall/pins"))
}

fn terminal_width() -> usize {
    std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.parse().ok())
        .filter(|w| *w >= 40)
        .unwrap_or(160)
}

fn err(e: impl std::fmt::Display) -> miette::Report {
    miette!("{e}")
}

/// One line per pending problem class, e.g. `drift: 1 changed, 1 removed`.
fn summary(file: &PinFile) -> String {
    let count = |s: Status| file.with_status(s).count();
    let mut parts = Vec::new();
    let (changed, removed) = (count(Status::Changed), count(Status::Removed));
    if changed + removed > 0 {
        parts.push(format!("DRIFT: {changed} changed, {removed} removed"));
    }
    let poisoned = count(Status::Poisoned);
    if poisoned > 0 {
        parts.push(format!("POISONED: {poisoned} withheld"));
    }
    let added = count(Status::Added);
    if added > 0 {
        parts.push(format!("{added} added since first use (review)"));
    }
    if parts.is_empty() {
        "ok".to_string()
    } else {
        parts.join("; ")
    }
}

fn list(
    store: &PinStore,
    format: super::common::OutputFormat,
    out: &mut String,
) -> miette::Result<ExitCode> {
    let files = store.list().map_err(err)?;
    if format == super::common::OutputFormat::Json {
        let servers: Vec<serde_json::Value> = files
            .iter()
            .map(|(key, file)| {
                let pending: serde_json::Map<String, serde_json::Value> = file
                    .observed
                    .iter()
                    .map(|(entry, o)| (entry.to_string(), o.status.as_str().into()))
                    .collect();
                serde_json::json!({
                    "key": key.to_string(),
                    "name": file.server.name,
                    "command": file.server.command,
                    "pinned": file.pinned.len(),
                    "first_seen_unix": file.first_seen,
                    "status": summary(file),
                    "pending": pending,
                })
            })
            .collect();
        out.push_str(
            &serde_json::to_string_pretty(&serde_json::json!({ "servers": servers }))
                .map_err(err)?,
        );
        out.push('\n');
        return Ok(ExitCode::SUCCESS);
    }
    if files.is_empty() {
        writeln!(
            out,
            "no pinned servers in {} (servers are pinned the first time they run behind mcpwall)",
            store.dir().display()
        )
        .ok();
        return Ok(ExitCode::SUCCESS);
    }
    for (key, file) in &files {
        writeln!(out, "{}  [{key}]", file.server.name).ok();
        writeln!(out, "  command: {}", file.server.command.join(" ")).ok();
        writeln!(
            out,
            "  pinned:  {} entries since {}",
            file.pinned.len(),
            format_time(file.first_seen)
        )
        .ok();
        writeln!(out, "  status:  {}", summary(file)).ok();
        for (entry, observed) in &file.observed {
            writeln!(out, "    {:<9} {entry}", observed.status.as_str()).ok();
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn diff(
    store: &PinStore,
    server: &str,
    width: usize,
    out: &mut String,
) -> miette::Result<ExitCode> {
    let (key, file) = store.find(server).map_err(err)?;
    writeln!(out, "{}  [{key}]  {}", file.server.name, summary(&file)).ok();
    if file.observed.is_empty() {
        writeln!(out, "nothing pending: every definition matches its pin").ok();
        return Ok(ExitCode::SUCCESS);
    }
    for (entry, observed) in &file.observed {
        out.push('\n');
        render_entry(&file, entry, observed, width, out);
    }
    writeln!(
        out,
        "\naccept with `mcpwall pins approve {} [ENTRY…]` (all pending entries when none are named)",
        file.server.name
    )
    .ok();
    Ok(ExitCode::SUCCESS)
}

fn render_entry(
    file: &PinFile,
    entry: &EntryKey,
    observed: &Observed,
    width: usize,
    out: &mut String,
) {
    let fields = if observed.fields.is_empty() {
        String::new()
    } else {
        format!(" ({})", observed.fields.join(", "))
    };
    writeln!(out, "== {entry}: {}{fields}", observed.status.as_str()).ok();
    for f in &observed.findings {
        let at = if f.field.is_empty() {
            String::new()
        } else {
            format!(" in {}", f.field)
        };
        writeln!(
            out,
            "   finding: {} [{}]{at}: {}",
            f.kind,
            f.rule,
            visible(&f.evidence)
        )
        .ok();
    }
    let old = file.pinned.get(entry);
    let left_title = match old {
        // Listed after the server's first session: pinned as first seen, never reviewed.
        Some(pin) if observed.status == Status::Added => format!(
            "new since first use {}: not reviewed yet",
            format_time(pin.at)
        ),
        Some(pin) => format!(
            "approved {} ({})",
            format_time(pin.at),
            match pin.approved_by {
                ApprovedBy::FirstUse => "first use",
                ApprovedBy::User => "by you",
            }
        ),
        None => "approved: (nothing)".to_string(),
    };
    let right_title = match observed.status {
        Status::Removed => format!("now {}: (removed)", format_time(observed.at)),
        _ => format!("now (seen {})", format_time(observed.at)),
    };
    let old_text = old.map(|p| pretty(&p.definition)).unwrap_or_default();
    let new_text = observed.definition.as_ref().map(pretty).unwrap_or_default();
    side_by_side(&left_title, &right_title, &old_text, &new_text, width, out);
}

fn pretty(v: &Value) -> String {
    let mut text = serde_json::to_string_pretty(v).expect("JSON values serialise");
    text.push('\n');
    text
}

/// Escape what a terminal would hide or interpret (bidi, zero-width, tag characters,
/// controls): the definitions shown here may be the attack itself.
fn visible(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        let hidden = c.is_control() || crate::text::normalize::is_invisible(c);
        if hidden {
            write!(out, "\\u{{{:x}}}", c as u32).ok();
        } else {
            out.push(c);
        }
    }
    out
}

/// Split one line into pieces of at most `width` characters.
fn wrap(line: &str, width: usize) -> Vec<String> {
    let chars: Vec<char> = visible(line.trim_end_matches('\n')).chars().collect();
    if chars.is_empty() {
        return vec![String::new()];
    }
    chars.chunks(width).map(|c| c.iter().collect()).collect()
}

/// Two columns, `old | new`, like `diff --side-by-side`: ` ` same, `|` changed,
/// `<` only on the left, `>` only on the right. Long lines wrap within their column.
fn side_by_side(
    left_title: &str,
    right_title: &str,
    old: &str,
    new: &str,
    width: usize,
    out: &mut String,
) {
    let col = (width.saturating_sub(3) / 2).max(20);
    let row = |out: &mut String, l: &str, mark: char, r: &str| {
        let pad = col.saturating_sub(l.chars().count());
        writeln!(out, "{l}{} {mark} {r}", " ".repeat(pad)).ok();
    };
    let pair = |out: &mut String, l: Option<&str>, r: Option<&str>, mark: char| {
        let lw = l.map(|l| wrap(l, col)).unwrap_or_default();
        let rw = r.map(|r| wrap(r, col)).unwrap_or_default();
        for i in 0..lw.len().max(rw.len()) {
            let a = lw.get(i).map_or("", |s| s.as_str());
            let b = rw.get(i).map_or("", |s| s.as_str());
            row(out, a, mark, b);
        }
    };
    pair(out, Some(left_title), Some(right_title), ' ');
    row(out, &"-".repeat(col), ' ', &"-".repeat(col));
    let diff = TextDiff::from_lines(old, new);
    let old_lines: Vec<&str> = old.lines().collect();
    let new_lines: Vec<&str> = new.lines().collect();
    for op in diff.ops() {
        match *op {
            DiffOp::Equal {
                old_index,
                new_index,
                len,
            } => {
                for i in 0..len {
                    pair(
                        out,
                        old_lines.get(old_index + i).copied(),
                        new_lines.get(new_index + i).copied(),
                        ' ',
                    );
                }
            }
            DiffOp::Delete {
                old_index, old_len, ..
            } => {
                for i in 0..old_len {
                    pair(out, old_lines.get(old_index + i).copied(), None, '<');
                }
            }
            DiffOp::Insert {
                new_index, new_len, ..
            } => {
                for i in 0..new_len {
                    pair(out, None, new_lines.get(new_index + i).copied(), '>');
                }
            }
            DiffOp::Replace {
                old_index,
                old_len,
                new_index,
                new_len,
            } => {
                for i in 0..old_len.max(new_len) {
                    let l = (i < old_len)
                        .then(|| old_lines.get(old_index + i).copied())
                        .flatten();
                    let r = (i < new_len)
                        .then(|| new_lines.get(new_index + i).copied())
                        .flatten();
                    let mark = match (l, r) {
                        (Some(_), Some(_)) => '|',
                        (Some(_), None) => '<',
                        _ => '>',
                    };
                    pair(out, l, r, mark);
                }
            }
        }
    }
}

/// How `pins approve` was asked to approve.
#[derive(Debug, Clone, Copy)]
struct Approval {
    /// `--yes`: no question (scripts).
    yes: bool,
    /// `--allow-poisoned`: poisoned definitions reach the agent once approved.
    allow_poisoned: bool,
    width: usize,
}

/// Show what is about to be approved (the side-by-side diff and every poison finding),
/// then ask on the terminal unless `--yes`. Without a terminal and without `--yes`, refuse:
/// an approval is the human's decision, and a process that is not at a terminal (an agent's
/// shell tool, a script that forgot the flag) does not get to make it silently.
fn approve(
    store: &PinStore,
    server: &str,
    entries: &[String],
    how: Approval,
    out: &mut String,
) -> miette::Result<ExitCode> {
    use std::io::IsTerminal as _;

    let (key, mut file) = store.find(server).map_err(err)?;
    if file.observed.is_empty() {
        writeln!(out, "{}: nothing pending to approve", file.server.name).ok();
        return Ok(ExitCode::SUCCESS);
    }
    let keys: Vec<EntryKey> = entries.iter().map(|e| EntryKey::parse(e)).collect();
    for k in &keys {
        if !file.observed.contains_key(k) {
            // The same error `approve` gives, before anything is shown or asked.
            return Err(err(file
                .clone()
                .approve(&keys, unix_now(), false)
                .unwrap_err()));
        }
    }
    let targets: Vec<EntryKey> = if keys.is_empty() {
        file.observed.keys().cloned().collect()
    } else {
        keys.clone()
    };
    let statuses: Vec<(EntryKey, Status)> = file
        .observed
        .iter()
        .map(|(k, o)| (k.clone(), o.status))
        .collect();
    let poisoned: Vec<EntryKey> = targets
        .iter()
        .filter(|k| {
            file.observed
                .get(*k)
                .is_some_and(|o| crate::guard::poison::is_poisoned(&o.findings))
        })
        .cloned()
        .collect();

    // What the user is approving, before the question.
    let mut shown = String::new();
    writeln!(shown, "{}  [{key}]  {}", file.server.name, summary(&file)).ok();
    for entry in &targets {
        if let Some(observed) = file.observed.get(entry) {
            shown.push('\n');
            render_entry(&file, entry, observed, how.width, &mut shown);
        }
    }
    if !poisoned.is_empty() {
        let names: Vec<String> = poisoned.iter().map(ToString::to_string).collect();
        if how.allow_poisoned {
            writeln!(
                shown,
                "\nWARNING: {} {} poison findings (above); with --allow-poisoned the agent will read {} text",
                names.join(", "),
                if names.len() == 1 { "has" } else { "have" },
                if names.len() == 1 { "its" } else { "their" },
            )
            .ok();
        } else {
            writeln!(
                shown,
                "\nnote: {} {} poison findings (above): approving records the definition, but it stays withheld from the agent; pass --allow-poisoned to let the agent see it",
                names.join(", "),
                if names.len() == 1 { "has" } else { "have" },
            )
            .ok();
        }
    }
    let stdin_is_terminal = std::io::stdin().is_terminal();
    if !how.yes {
        if !stdin_is_terminal {
            eprint!("{shown}");
            return Err(miette!(
                help = "run it yourself in a terminal to review and confirm, or pass --yes in a script",
                "not approving: no terminal to confirm on, and --yes was not given"
            ));
        }
        eprint!("{shown}");
        eprint!(
            "\napprove {} {} of {}? [y/N] ",
            targets.len(),
            if targets.len() == 1 {
                "entry"
            } else {
                "entries"
            },
            file.server.name
        );
        let mut answer = String::new();
        std::io::stdin()
            .read_line(&mut answer)
            .map_err(|e| miette!("cannot read the answer: {e}"))?;
        if !matches!(answer.trim(), "y" | "Y" | "yes" | "YES" | "Yes") {
            writeln!(out, "not approved").ok();
            return Ok(ExitCode::from(1));
        }
    } else {
        out.push_str(&shown);
        out.push('\n');
    }
    let approved = file
        .approve(&keys, unix_now(), how.allow_poisoned)
        .map_err(err)?;
    store.save(&key, &file).map_err(err)?;
    for entry in &approved {
        let status = statuses
            .iter()
            .find(|(k, _)| k == entry)
            .map_or("pending", |(_, s)| s.as_str());
        let withheld = if poisoned.contains(entry) && !how.allow_poisoned {
            "; still withheld from the agent: poison findings (--allow-poisoned to release)"
        } else {
            ""
        };
        writeln!(out, "approved {entry} ({status}){withheld}").ok();
    }
    writeln!(
        out,
        "{}: {} approved; the agent sees them from the next tools/list (or the next session)",
        file.server.name,
        approved.len()
    )
    .ok();
    Ok(ExitCode::SUCCESS)
}

fn reset(store: &PinStore, server: &str, yes: bool, out: &mut String) -> miette::Result<ExitCode> {
    let (key, file) = store.find(server).map_err(err)?;
    if !yes {
        let question = format!(
            "forget the {} pinned definition(s) of {} [{key}]? its next session trusts whatever it lists [y/N] ",
            file.pinned.len(),
            file.server.name
        );
        if !std::io::IsTerminal::is_terminal(&std::io::stdin()) {
            return Err(miette!(
                help = "run it yourself in a terminal to confirm, or pass --yes in a script",
                "not resetting: no terminal to confirm on, and --yes was not given"
            ));
        }
        eprint!("{question}");
        let mut answer = String::new();
        std::io::stdin()
            .read_line(&mut answer)
            .map_err(|e| miette!("cannot read the answer: {e}"))?;
        if !matches!(answer.trim(), "y" | "Y" | "yes" | "YES" | "Yes") {
            writeln!(out, "not reset").ok();
            return Ok(ExitCode::from(1));
        }
    }
    store.remove(&key).map_err(err)?;
    writeln!(
        out,
        "forgot the pins of {} [{key}]; its next session pins it afresh (trust on first use)",
        file.server.name
    )
    .ok();
    Ok(ExitCode::SUCCESS)
}

fn verify(store: &PinStore, out: &mut String) -> miette::Result<ExitCode> {
    let files = store.list().map_err(err)?;
    let mut failing = 0usize;
    for (key, file) in &files {
        let bad: Vec<String> = file
            .observed
            .iter()
            .filter(|(_, o)| o.status.is_drift() || o.status == Status::Poisoned)
            .map(|(k, o)| format!("{k} {}", o.status.as_str()))
            .collect();
        if bad.is_empty() {
            writeln!(out, "ok    {} [{key}]: {}", file.server.name, summary(file)).ok();
        } else {
            failing += 1;
            writeln!(
                out,
                "FAIL  {} [{key}]: {}",
                file.server.name,
                bad.join(", ")
            )
            .ok();
        }
    }
    writeln!(
        out,
        "{} pinned servers, {failing} with drift or poisoned entries",
        files.len()
    )
    .ok();
    Ok(if failing == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// `YYYY-MM-DD HH:MM UTC` from Unix seconds (civil-from-days, proleptic Gregorian).
fn format_time(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02} UTC",
        rem / 3_600,
        rem % 3_600 / 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_unix_times() {
        assert_eq!(format_time(0), "1970-01-01 00:00 UTC");
        assert_eq!(format_time(951_782_400), "2000-02-29 00:00 UTC");
        assert_eq!(format_time(1_798_761_599), "2026-12-31 23:59 UTC");
    }

    #[test]
    fn side_by_side_marks_changes_and_wraps() {
        let mut out = String::new();
        side_by_side(
            "old",
            "new",
            "{\n  \"a\": 1,\n  \"b\": 2\n}\n",
            "{\n  \"a\": 1,\n  \"b\": 3,\n  \"c\": \"x\"\n}\n",
            60,
            &mut out,
        );
        let lines: Vec<&str> = out.lines().collect();
        assert!(lines[0].starts_with("old") && lines[0].contains("new"));
        assert!(
            lines
                .iter()
                .any(|l| l.contains("\"b\": 2") && l.contains(" | ") && l.contains("\"b\": 3"))
        );
        assert!(
            lines
                .iter()
                .any(|l| l.contains(" > ") && l.contains("\"c\""))
        );
        assert!(
            lines
                .iter()
                .any(|l| l.contains("\"a\": 1") && !l.contains('|'))
        );
        let mut wide = String::new();
        side_by_side(
            "o",
            "n",
            "",
            &format!("{}\n", "x".repeat(100)),
            43,
            &mut wide,
        );
        assert_eq!(wide.lines().filter(|l| l.contains('>')).count(), 5);
    }

    #[test]
    fn hidden_characters_are_shown_escaped() {
        assert_eq!(
            visible("a\u{202E}b\u{1B}[8m\u{E0041}"),
            "a\\u{202e}b\\u{1b}[8m\\u{e0041}"
        );
    }
}
