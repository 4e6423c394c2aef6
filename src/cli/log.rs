//! `mcpwall log`: read the audit log (every day file of the log directory), filter it,
//! summarise it, follow it; `mcpwall log verify`: check its hash chain.
//!
//! The log directory is the proxy's: `settings.log_dir` of the policy the proxy would
//! load here (or `-c FILE`), else `~/.mcpwall/logs`; `--dir` names one outright. The
//! original mcpwall's (Node) day files in it are shown, marked as foreign, and never
//! verified.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use globset::{Glob, GlobMatcher};
use serde::Serialize;

use crate::audit::files::{self, LogFile};
use crate::audit::read::{self, Entry};
use crate::audit::records;
use crate::audit::time::{self, Micros};
use crate::audit::verify;
use crate::config;
use crate::session::preview::escape_controls;

/// Arguments of `mcpwall log`.
#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct Args {
    #[command(subcommand)]
    pub command: Option<LogCommand>,
    #[command(flatten)]
    pub place: Place,
    /// Keep printing events as they are written (on into the next day's file).
    #[arg(short = 'f', long, conflicts_with = "summary")]
    pub follow: bool,
    /// Only these actions (comma-separated: allow, deny, pass, redact, block, log_only, drop, error, ask, approved, declined, timed_out).
    #[arg(long, value_delimiter = ',')]
    pub action: Vec<String>,
    /// Only events of servers whose name matches this glob.
    #[arg(long)]
    pub server: Option<String>,
    /// Only events of tools whose name matches this glob.
    #[arg(long)]
    pub tool: Option<String>,
    /// Only events of clients whose identity (`mcpwall serve` token name) matches this glob.
    #[arg(long)]
    pub identity: Option<String>,
    /// Only events decided by rules whose name matches this glob (`mcpwall:*` for mcpwall's own reasons).
    #[arg(long)]
    pub rule: Option<String>,
    /// Only events at or after this time: RFC 3339 (`2026-12-01T09:00:00Z`), a date, or a duration back from now (`30m`, `1h`, `2d`, `1w`).
    #[arg(long)]
    pub since: Option<String>,
    /// Only events before this time (same forms as --since).
    #[arg(long)]
    pub until: Option<String>,
    /// Counts by action, rule, tool and server, and the most frequent denials, instead of the events.
    #[arg(long)]
    pub summary: bool,
    /// `text` for a terminal; `json`: the selected events as JSON lines, as written.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

/// Where the log is.
#[derive(Debug, Clone, clap::Args)]
pub struct Place {
    /// The log directory (default: the policy's `settings.log_dir`, else ~/.mcpwall/logs).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Take `settings.log_dir` from exactly this policy file.
    #[arg(short = 'c', long, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

#[derive(Debug, clap::Subcommand)]
pub enum LogCommand {
    /// Check the log's hash chain: exit 0 when intact, 1 at an edited, removed or moved line, a truncated file or a missing day file. Lines cut off by a crash or a full disk and events recorded as lost are listed, not counted as tampering.
    Verify(VerifyArgs),
    /// Send the lines not yet shipped to `settings.log_shipping`'s collector, then exit: 0 when every complete line is shipped, 1 when the collector can't be reached in time. A log never shipped before is sent from its first line. Proxies ship while they run; this catches up after a crash or for a log no proxy is writing.
    Ship(ShipArgs),
}

#[derive(Debug, clap::Args)]
pub struct ShipArgs {
    /// Take `settings.log_dir` and `settings.log_shipping` from exactly this policy file.
    #[arg(short = 'c', long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Give up after this many seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 30)]
    pub timeout: u64,
}

#[derive(Debug, clap::Args)]
pub struct VerifyArgs {
    #[command(flatten)]
    pub place: Place,
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Exit 1 also when lines were cut off by a crash or events were recorded as lost (an incomplete log).
    #[arg(long)]
    pub strict: bool,
    /// DIR is a copy without seals (the day files a collector received through `settings.log_shipping`): the chain is checked, lines removed at a file's end cannot be detected.
    #[arg(long)]
    pub copy: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Text,
    Json,
}

pub fn run(args: Args) -> miette::Result<ExitCode> {
    match args.command {
        Some(LogCommand::Verify(v)) => return run_verify(v),
        Some(LogCommand::Ship(s)) => return run_ship(s),
        None => {}
    }
    let dir = log_dir(&args.place)?;
    let now = time::now();
    let filter = Filter::new(&args, now)?;
    let colour = super::common::colour_stdout();
    let show = Show {
        format: args.format,
        colour,
    };
    let result = if args.summary {
        summarise(&dir, &filter, args.format)
    } else if args.follow {
        follow(&dir, &filter, show)
    } else {
        list(&dir, &filter, show)
    };
    match result {
        Ok(()) => Ok(ExitCode::SUCCESS),
        // Someone stopped reading (`| head`).
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(ExitCode::SUCCESS),
        Err(e) => Err(miette::miette!("cannot write the log: {e}")),
    }
}

/// The log directory the proxy writes, as it resolves it.
fn log_dir(place: &Place) -> miette::Result<PathBuf> {
    if let Some(dir) = &place.dir {
        return Ok(dir.clone());
    }
    let opts = crate::cli::common::load_options(place.config.clone())?;
    let default = opts.home.join(".mcpwall").join("logs");
    match config::load(&opts) {
        Ok(policy) => Ok(policy.settings.log_dir.clone().unwrap_or(default)),
        // An explicit policy that does not load is the user's mistake to see.
        Err(e) if place.config.is_some() => Err(miette::Report::new(e)),
        Err(_) => {
            eprintln!(
                "mcpwall: warning: the policy does not load (run `mcpwall doctor`); reading {}",
                default.display()
            );
            Ok(default)
        }
    }
}

fn run_ship(args: ShipArgs) -> miette::Result<ExitCode> {
    let opts = crate::cli::common::load_options(args.config)?;
    let policy = config::load(&opts).map_err(miette::Report::new)?;
    let Some(shipping) = &policy.settings.log_shipping else {
        return Err(miette::miette!(
            help = "add `settings.log_shipping: {syslog: {address: tls://HOST:6514}}` or \
                    `{otlp: {endpoint: https://HOST:4318/v1/logs}}` to your policy",
            "the policy ships the log nowhere"
        ));
    };
    let dir = policy
        .settings
        .log_dir
        .clone()
        .unwrap_or_else(|| opts.home.join(".mcpwall").join("logs"));
    let targets = crate::ship::targets(shipping).map_err(|e| miette::miette!("{e}"))?;
    let timeout = Duration::from_secs(args.timeout);
    let mut failed = false;
    for target in targets {
        let address = target.address();
        let mut outcome = crate::ship::ship_now(&dir, target.clone(), timeout);
        if let Ok(done) = &outcome
            && !done.notes.is_empty()
        {
            // What the shipper had to say goes into the log's chain, and so to the
            // collector with the next pass.
            let config = crate::cli::common::audit_config(
                &policy.settings,
                &opts.home,
                "mcpwall log ship".to_string(),
            );
            let audit =
                crate::audit::Audit::start(config, std::sync::Arc::new(crate::audit::NoNames));
            let mut events: Vec<_> = done
                .notes
                .iter()
                .map(|n| crate::ship::note_event(n.clone()))
                .collect();
            audit.sender().send(&mut events);
            audit.finish(timeout);
            let lines = done.lines;
            outcome = crate::ship::ship_now(&dir, target, timeout).map(|mut more| {
                more.lines += lines;
                more
            });
        }
        match outcome {
            Ok(outcome) if outcome.busy => {
                println!("another mcpwall is shipping {} to {address}", dir.display());
            }
            Ok(outcome) => {
                println!(
                    "shipped {} lines of {} to {address}",
                    outcome.lines,
                    dir.display()
                );
            }
            Err(why) => {
                eprintln!(
                    "mcpwall: error: cannot ship {} to {address}: {why}",
                    dir.display()
                );
                failed = true;
            }
        }
    }
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// Which events are shown.
#[derive(Debug)]
struct Filter {
    actions: Vec<String>,
    server: Option<GlobMatcher>,
    tool: Option<GlobMatcher>,
    identity: Option<GlobMatcher>,
    rule: Option<GlobMatcher>,
    since: Option<Micros>,
    until: Option<Micros>,
}

impl Filter {
    fn new(args: &Args, now: Micros) -> miette::Result<Filter> {
        let glob = |flag: &str, pattern: &Option<String>| -> miette::Result<Option<GlobMatcher>> {
            pattern
                .as_deref()
                .map(|p| {
                    Glob::new(p).map(|g| g.compile_matcher()).map_err(|e| {
                        miette::miette!(
                            help = "use `*` and `?` as wildcards",
                            "--{flag} {p:?}: {e}"
                        )
                    })
                })
                .transpose()
        };
        let bound = |flag: &str, value: &Option<String>| -> miette::Result<Option<Micros>> {
            value
                .as_deref()
                .map(|v| {
                    time::parse_bound(v, now).ok_or_else(|| {
                        miette::miette!(
                            help = "write an RFC 3339 time (2026-12-01T09:00:00Z), a date (2026-12-01) or a duration back from now (30m, 1h, 2d, 1w)",
                            "--{flag} {v:?} is not a time"
                        )
                    })
                })
                .transpose()
        };
        let actions_known: Vec<&str> = crate::verdict::Verdict::ALL
            .iter()
            .map(|v| v.as_str())
            .collect();
        let actions: Vec<String> = args
            .action
            .iter()
            .map(|a| a.trim().to_ascii_lowercase())
            .collect();
        if let Some(bad) = actions
            .iter()
            .find(|a| !actions_known.contains(&a.as_str()))
        {
            return Err(miette::miette!(
                help = format!("use one of {}", actions_known.join(", ")),
                "--action {bad:?} is not an action"
            ));
        }
        Ok(Filter {
            actions,
            server: glob("server", &args.server)?,
            tool: glob("tool", &args.tool)?,
            identity: glob("identity", &args.identity)?,
            rule: glob("rule", &args.rule)?,
            since: bound("since", &args.since)?,
            until: bound("until", &args.until)?,
        })
    }

    /// Whether a day file can hold a selected event (by its date).
    fn may_hold(&self, file: &LogFile) -> bool {
        let day = |m: Micros| crate::audit::date_string(m.div_euclid(86_400_000_000));
        self.since.is_none_or(|s| file.date >= day(s))
            && self.until.is_none_or(|u| file.date <= day(u))
    }

    fn matches(&self, e: &Entry) -> bool {
        let glob = |m: &Option<GlobMatcher>, key: &str| {
            m.as_ref()
                .is_none_or(|m| e.str(key).is_some_and(|v| m.is_match(v)))
        };
        (self.actions.is_empty()
            || e.str("action")
                .is_some_and(|a| self.actions.iter().any(|x| x == a)))
            && glob(&self.server, "server")
            && glob(&self.tool, "tool")
            && glob(&self.identity, "identity")
            && glob(&self.rule, "rule")
            && self.since.is_none_or(|s| e.ts.is_some_and(|t| t >= s))
            && self.until.is_none_or(|u| e.ts.is_some_and(|t| t < u))
    }
}

#[derive(Debug, Clone, Copy)]
struct Show {
    format: Format,
    colour: bool,
}

/// Every selected event of the directory, by day, and by time within a day (the
/// original mcpwall's lines interleaved with this one's).
fn selected(dir: &Path, filter: &Filter) -> Vec<Entry> {
    let mut out = Vec::new();
    let mut day: Vec<Entry> = Vec::new();
    let mut date = String::new();
    for file in files::log_files(dir).iter().filter(|f| filter.may_hold(f)) {
        if file.date != date {
            day.sort_by_key(|e| e.ts.unwrap_or(i64::MIN));
            out.append(&mut day);
            date = file.date.clone();
        }
        let (entries, _) = read::read_from(file, 0, 1);
        day.extend(entries.into_iter().filter(|e| filter.matches(e)));
    }
    day.sort_by_key(|e| e.ts.unwrap_or(i64::MIN));
    out.append(&mut day);
    out
}

fn list(dir: &Path, filter: &Filter, show: Show) -> std::io::Result<()> {
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let entries = selected(dir, filter);
    if entries.is_empty() && show.format == Format::Text {
        eprintln!("mcpwall: no events in {}", dir.display());
    }
    for e in &entries {
        write_entry(&mut out, e, show)?;
    }
    out.flush()
}

/// Print what is there, then what is appended, polling: a day file that appears (the
/// next day's, or a first one) is read from its start.
fn follow(dir: &Path, filter: &Filter, show: Show) -> std::io::Result<()> {
    let mut stdout = std::io::stdout();
    let mut offsets: HashMap<PathBuf, (u64, usize)> = HashMap::new();
    loop {
        let mut fresh = Vec::new();
        for file in files::log_files(dir) {
            let (offset, line) = offsets.get(&file.path).copied().unwrap_or((0, 1));
            let (entries, next) = read::read_from(&file, offset, line);
            offsets.insert(file.path.clone(), (next, line + entries.len()));
            fresh.extend(entries.into_iter().filter(|e| filter.matches(e)));
        }
        fresh.sort_by_key(|e| e.ts.unwrap_or(i64::MIN));
        if !fresh.is_empty() {
            let mut out = stdout.lock();
            for e in &fresh {
                write_entry(&mut out, e, show)?;
            }
            out.flush()?;
        }
        stdout.flush()?;
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn write_entry(out: &mut impl Write, e: &Entry, show: Show) -> std::io::Result<()> {
    match show.format {
        Format::Json if e.foreign => {
            #[derive(Serialize)]
            struct Foreign<'a> {
                foreign: &'static str,
                file: &'a str,
                line: usize,
                event: &'a serde_json::Value,
            }
            let v = Foreign {
                foreign: "mcpwall (Node)",
                file: &e.file,
                line: e.line,
                event: &e.value,
            };
            writeln!(
                out,
                "{}",
                serde_json::to_string(&v).map_err(std::io::Error::other)?
            )
        }
        Format::Json => writeln!(out, "{}", e.raw),
        Format::Text => writeln!(out, "{}", text_line(e, show.colour)),
    }
}

/// One event on one terminal line. Every field is escaped: a tool name or message came
/// from a server, and must not move the cursor or forge lines.
fn text_line(e: &Entry, colour: bool) -> String {
    let paint = |ansi: &str, text: &str| {
        if colour {
            format!("{ansi}{text}\x1b[0m")
        } else {
            text.to_string()
        }
    };
    if e.value.is_null() {
        return format!(
            "{}  {}:{}: not a JSON line",
            paint("\x1b[1;35m", "?"),
            e.file,
            e.line
        );
    }
    let field = |key: &str| e.str(key).map(escape_controls);
    let ts = field("ts").unwrap_or_default();
    // `2026-12-02T10:55:38.123456Z` → `2026-12-02 10:55:38 UTC` (the log's times are UTC)
    let ts = ts
        .get(..19)
        .map_or(ts.clone(), |t| format!("{} UTC", t.replacen('T', " ", 1)));
    let action = field("action").unwrap_or_else(|| "?".into());
    let ansi = match action.as_str() {
        "allow" | "pass" => "\x1b[32m",
        "deny" | "block" | "drop" | "error" => "\x1b[1;31m",
        "redact" | "log_only" => "\x1b[33m",
        _ => "",
    };
    let mut line = format!(
        "{ts}  {}",
        paint(ansi, &format!("{:<8}", action.to_ascii_uppercase()))
    );
    if e.foreign {
        line.push_str(&paint("\x1b[2m", " [original mcpwall]"));
    }
    for key in ["server", "method", "tool"] {
        if let Some(v) = field(key) {
            line.push(' ');
            line.push_str(&v);
        }
    }
    if let Some(who) = field("identity") {
        line.push_str(" identity=");
        line.push_str(&who);
    }
    if let Some(rule) = field("rule") {
        line.push_str("  ");
        line.push_str(&paint("\x1b[36m", &rule));
    }
    // An allow carries a message only when an exception lifted a rule for it.
    if let Some(m) = field("message") {
        line.push_str("  ");
        line.push_str(&m);
    }
    if let Some(r) = field("request") {
        line.push_str(&format!("  [{r}]"));
    }
    if let Some(counts) = e.value.get("redactions").and_then(|r| r.as_object()) {
        let list: Vec<String> = counts
            .iter()
            .map(|(k, v)| format!("{}×{v}", escape_controls(k)))
            .collect();
        line.push_str(&format!("  redacted {}", list.join(", ")));
    }
    line
}

/// Counts for `--summary`.
#[derive(Debug, Default, Serialize)]
struct Summary {
    events: u64,
    /// Lines of the original mcpwall among them.
    foreign: u64,
    first: Option<String>,
    last: Option<String>,
    by_action: BTreeMap<String, u64>,
    by_rule: BTreeMap<String, u64>,
    by_tool: BTreeMap<String, u64>,
    by_server: BTreeMap<String, u64>,
    /// Per client identity (`mcpwall serve` tokens); events without one are not counted.
    by_identity: BTreeMap<String, u64>,
    top_denials: Vec<Denial>,
}

#[derive(Debug, Serialize, PartialEq, Eq, Hash, Clone)]
struct Denial {
    rule: String,
    tool: String,
    server: String,
    count: u64,
}

const TOP_DENIALS: usize = 10;

fn summarise(dir: &Path, filter: &Filter, format: Format) -> std::io::Result<()> {
    let mut s = Summary::default();
    let mut denials: HashMap<(String, String, String), u64> = HashMap::new();
    for e in selected(dir, filter) {
        s.events += 1;
        s.foreign += u64::from(e.foreign);
        if let Some(ts) = e.str("ts") {
            if s.first.is_none() {
                s.first = Some(ts.to_string());
            }
            s.last = Some(ts.to_string());
        }
        let get = |k: &str| e.str(k).unwrap_or("-").to_string();
        *s.by_action.entry(get("action")).or_default() += 1;
        if let Some(rule) = e.str("rule") {
            *s.by_rule.entry(rule.to_string()).or_default() += 1;
        }
        if let Some(tool) = e.str("tool") {
            *s.by_tool.entry(tool.to_string()).or_default() += 1;
        }
        let server = if e.foreign {
            "(original mcpwall)".to_string()
        } else {
            get("server")
        };
        *s.by_server.entry(server.clone()).or_default() += 1;
        if let Some(identity) = e.str("identity") {
            *s.by_identity.entry(identity.to_string()).or_default() += 1;
        }
        if matches!(e.str("action"), Some("deny" | "block")) {
            *denials
                .entry((get("rule"), get("tool"), server))
                .or_default() += 1;
        }
    }
    let mut top: Vec<Denial> = denials
        .into_iter()
        .map(|((rule, tool, server), count)| Denial {
            rule,
            tool,
            server,
            count,
        })
        .collect();
    top.sort_by(|a, b| {
        b.count
            .cmp(&a.count)
            .then_with(|| (&a.rule, &a.tool, &a.server).cmp(&(&b.rule, &b.tool, &b.server)))
    });
    top.truncate(TOP_DENIALS);
    s.top_denials = top;
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    if format == Format::Json {
        return writeln!(
            out,
            "{}",
            serde_json::to_string(&s).map_err(std::io::Error::other)?
        );
    }
    writeln!(out, "{} events in {}", s.events, dir.display())?;
    if let (Some(first), Some(last)) = (&s.first, &s.last) {
        writeln!(
            out,
            "from {} to {} (UTC)",
            escape_controls(first),
            escape_controls(last)
        )?;
    }
    if s.foreign > 0 {
        writeln!(
            out,
            "{} of them written by the original mcpwall (Node)",
            s.foreign
        )?;
    }
    for (title, counts) in [
        ("by action", &s.by_action),
        ("by rule", &s.by_rule),
        ("by tool", &s.by_tool),
        ("by server", &s.by_server),
        ("by identity", &s.by_identity),
    ] {
        if counts.is_empty() {
            continue;
        }
        writeln!(out, "\n{title}:")?;
        let mut sorted: Vec<(&String, &u64)> = counts.iter().collect();
        sorted.sort_by(|a, b| b.1.cmp(a.1).then_with(|| a.0.cmp(b.0)));
        let width = sorted
            .iter()
            .map(|(k, _)| k.chars().count())
            .max()
            .unwrap_or(0);
        for (k, n) in sorted {
            writeln!(out, "  {:<width$}  {n:>6}", escape_controls(k))?;
        }
    }
    if !s.top_denials.is_empty() {
        writeln!(out, "\ntop denials (rule, tool, server):")?;
        for d in &s.top_denials {
            writeln!(
                out,
                "  {:>6}  {}  {}  {}",
                d.count,
                escape_controls(&d.rule),
                escape_controls(&d.tool),
                escape_controls(&d.server)
            )?;
        }
    }
    Ok(())
}

#[derive(Debug, Serialize)]
struct JsonVerify<'a> {
    intact: bool,
    complete: bool,
    dir: String,
    files: usize,
    lines: u64,
    chained_lines: u64,
    unchained_lines: u64,
    removed_by_retention: usize,
    foreign_files: usize,
    problems: Vec<JsonProblem<'a>>,
    cut_lines: Vec<JsonCut<'a>>,
    gaps: Vec<JsonGap<'a>>,
    lost_events: u64,
}

#[derive(Debug, Serialize)]
struct JsonProblem<'a> {
    file: &'a str,
    line: Option<usize>,
    kind: &'static str,
    problem: &'a str,
}

#[derive(Debug, Serialize)]
struct JsonCut<'a> {
    file: &'a str,
    line: usize,
    lines: usize,
    offset: u64,
    length: u64,
    /// The line of the record that sealed it (`null`: not sealed yet, or glued onto by
    /// an older mcpwall).
    sealed_at: Option<usize>,
    glued: bool,
}

#[derive(Debug, Serialize)]
struct JsonGap<'a> {
    file: &'a str,
    line: usize,
    events: u64,
    from: String,
    until: String,
    reason: &'a str,
}

fn run_verify(args: VerifyArgs) -> miette::Result<ExitCode> {
    let dir = log_dir(&args.place)?;
    let seals = if args.copy {
        verify::Seals::Absent
    } else {
        verify::Seals::Expected
    };
    let report = verify::verify_with(&dir, seals);
    let complete = report.cut_lines.is_empty() && report.gaps.is_empty();
    let code = if report.intact() && (complete || !args.strict) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    };
    let text = match args.format {
        Format::Json => {
            let v = JsonVerify {
                intact: report.intact(),
                complete,
                dir: dir.display().to_string(),
                files: report.files,
                lines: report.lines,
                chained_lines: report.chained_lines,
                unchained_lines: report.unchained_lines,
                removed_by_retention: report.removed_by_retention,
                foreign_files: report.foreign_files,
                problems: report
                    .problems
                    .iter()
                    .map(|p| JsonProblem {
                        file: &p.file,
                        line: p.line,
                        kind: p.kind.as_str(),
                        problem: &p.what,
                    })
                    .collect(),
                cut_lines: report
                    .cut_lines
                    .iter()
                    .map(|c| JsonCut {
                        file: &c.file,
                        line: c.line,
                        lines: c.lines,
                        offset: c.offset,
                        length: c.length,
                        sealed_at: c.sealed_at,
                        glued: c.glued,
                    })
                    .collect(),
                gaps: report
                    .gaps
                    .iter()
                    .map(|g| JsonGap {
                        file: &g.file,
                        line: g.line,
                        events: g.events,
                        from: records::time_text(g.from),
                        until: records::time_text(g.until),
                        reason: &g.reason,
                    })
                    .collect(),
                lost_events: report.lost_events(),
            };
            serde_json::to_string(&v).map_err(|e| miette::miette!("{e}"))? + "\n"
        }
        Format::Text => verify_text(&dir, &report),
    };
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    Ok(code)
}

fn verify_text(dir: &Path, report: &verify::Report) -> String {
    let mut s = format!(
        "{}: {} day file(s), {} chained line(s) checked of {} line(s)\n",
        dir.display(),
        report.files,
        report.chained_lines,
        report.lines
    );
    if report.unchained_lines > 0 {
        s.push_str(&format!(
            "  {} line(s) at the start predate the chain and are not verified\n",
            report.unchained_lines
        ));
    }
    if report.removed_by_retention > 0 {
        s.push_str(&format!(
            "  {} older day file(s) were removed by retention (recorded in {})\n",
            report.removed_by_retention,
            crate::audit::retention::RECORD
        ));
    }
    if report.foreign_files > 0 {
        s.push_str(&format!(
            "  {} day file(s) of the original mcpwall (Node) are not part of the chain\n",
            report.foreign_files
        ));
    }
    // Files and lines come from the file system and the log: printed escaped.
    for c in &report.cut_lines {
        s.push_str(&format!("CUT     {}\n", escape_controls(&c.to_string())));
    }
    for g in &report.gaps {
        s.push_str(&format!("GAP     {}\n", escape_controls(&g.to_string())));
    }
    for p in &report.problems {
        s.push_str(&format!("BROKEN  {}\n", escape_controls(&p.to_string())));
    }
    let losses = report.cut_lines.len() + report.gaps.len();
    match (report.intact(), losses) {
        (true, 0) => s.push_str("intact\n"),
        (true, _) => s.push_str(&format!(
            "intact: no line was edited, removed or inserted; {} line(s) cut off by a crash or a full disk and {} event(s) recorded as lost (CUT, GAP above)\n",
            report.cut_lines.len(),
            report.lost_events()
        )),
        (false, _) => s.push_str(&format!(
            "{} problem(s): the log was changed or lost lines after they were written\n",
            report.problems.len()
        )),
    }
    s
}
