//! `mcpwall compare before.json after.json`: score and vulnerability deltas between scans.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::redteam::Report;
use crate::redteam::compare::compare;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The earlier scan report (JSON from `mcpwall scan --format json`).
    pub before: PathBuf,
    /// The later scan report.
    pub after: PathBuf,
    /// text or json.
    #[arg(long, default_value = "text", value_parser = ["text", "json"])]
    pub format: String,
}

fn load(path: &PathBuf) -> miette::Result<Report> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| miette::miette!("cannot read {}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| {
        miette::miette!(
            help = "give two files written by `mcpwall scan --format json` or `--output`",
            "{} is not a scan report: {e}",
            path.display()
        )
    })
}

pub fn run(args: Args) -> miette::Result<ExitCode> {
    let before = load(&args.before)?;
    let after = load(&args.after)?;
    let cmp = compare(&before, &after).map_err(|e| miette::miette!("{e}"))?;
    if args.format == "json" {
        println!(
            "{}",
            serde_json::to_string_pretty(&cmp).map_err(|e| miette::miette!("{e}"))?
        );
    } else {
        print!("{}", cmp.render_text());
    }
    Ok(if cmp.worse {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
