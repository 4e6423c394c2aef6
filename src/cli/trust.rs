//! `mcpwall trust`: record (or list, or revoke) trust in a project's `.mcpwall.yml`.
//!
//! Until trusted, a project file only tightens the policy (ARCHITECTURE decision 7). Trust
//! is recorded as the SHA-256 of the file's bytes, so any later change needs a new `trust`.

use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use miette::{IntoDiagnostic, miette};

use crate::config::{self, LoadOptions, PROJECT_FILE, TrustStatus, TrustStore, trust};

/// Arguments of `mcpwall trust`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The project whose `.mcpwall.yml` to trust [default: the current directory].
    #[arg(long, value_name = "DIR")]
    pub project_dir: Option<PathBuf>,
    /// List every trusted file and whether it is still unchanged.
    #[arg(long, conflicts_with = "revoke")]
    pub list: bool,
    /// Forget the trust given to the project's `.mcpwall.yml`.
    #[arg(long)]
    pub revoke: bool,
    /// Trust without asking (scripts); without it mcpwall shows what the file turns on
    /// and asks on the terminal, and refuses when there is no terminal to ask on.
    #[arg(long, short = 'y')]
    pub yes: bool,
}

pub fn run(args: Args) -> miette::Result<ExitCode> {
    let home = home_dir()?;
    if args.list {
        return list(&home);
    }
    let project_dir = match args.project_dir {
        Some(dir) => dir,
        None => std::env::current_dir().into_diagnostic()?,
    };
    let file = project_dir.join(PROJECT_FILE);
    if args.revoke {
        return revoke(&home, &file);
    }
    trust_file(&home, &project_dir, &file, args.yes)
}

fn home_dir() -> miette::Result<PathBuf> {
    crate::platform::home_var()
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .ok_or_else(|| miette!("HOME is not set; mcpwall keeps its trust records in ~/.mcpwall"))
}

fn trust_file(home: &Path, project_dir: &Path, file: &Path, yes: bool) -> miette::Result<ExitCode> {
    let bytes = match std::fs::read(file) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(miette!(
                help = "run `mcpwall trust` in the project directory, or pass --project-dir DIR",
                "there is no {PROJECT_FILE} in {}",
                project_dir.display()
            ));
        }
        Err(e) => return Err(miette!("cannot read {}: {e}", file.display())),
    };
    let text = String::from_utf8(bytes.clone())
        .map_err(|_| miette!("{} is not UTF-8 text", file.display()))?;
    let opts = LoadOptions {
        explicit: None,
        home: home.to_path_buf(),
        project_dir: project_dir.to_path_buf(),
    };
    // Refuse to trust a file that does not load: the user should see what it says first.
    let policy = config::load_str(&file.to_string_lossy(), &text, &opts)
        .map_err(|e| miette::Report::new(e).wrap_err("not trusted: the file has problems"))?;
    let key = trust::trust_key(file).map_err(|e| miette!("{e}"))?;
    let mut store = TrustStore::load(home).map_err(|e| miette!("{e}"))?;
    if store.status(&key, &bytes) == TrustStatus::Trusted {
        println!("{key} is already trusted (unchanged)");
        return Ok(ExitCode::SUCCESS);
    }
    let turned_on = untrusted_parts(&opts, &text);
    if turned_on.is_empty() {
        println!("{key} only tightens the policy: it already applies in full, trusted or not");
    } else {
        println!(
            "trusting {key} turns on what is ignored while it is untrusted ({}):",
            turned_on.len()
        );
        for part in &turned_on {
            println!("  {part}");
        }
    }
    if !yes {
        if !std::io::stdin().is_terminal() {
            return Err(miette!(
                help = "review the parts above, then run `mcpwall trust --yes`",
                "stdin is not a terminal, so mcpwall cannot ask; nothing was trusted"
            ));
        }
        eprint!("trust {key}? [y/N] ");
        std::io::stderr().flush().into_diagnostic()?;
        let mut answer = String::new();
        std::io::stdin()
            .lock()
            .read_line(&mut answer)
            .into_diagnostic()?;
        if !matches!(answer.trim().to_ascii_lowercase().as_str(), "y" | "yes") {
            println!("not trusted; nothing was changed");
            return Ok(ExitCode::from(1));
        }
    }
    store.trust(key.clone(), &bytes);
    store.save().map_err(|e| miette!("{e}"))?;
    let sha = config::trust::sha256_hex(&bytes);
    println!("trusted {key} (sha256 {})", &sha[..16]);
    let allows: Vec<&str> = policy
        .rules
        .iter()
        .filter(|r| r.action == config::policy::Action::Allow)
        .map(|r| r.name.value.as_str())
        .collect();
    if !allows.is_empty() {
        println!("its allow rules now apply: {}", allows.join(", "));
    }
    println!("any change to the file makes it untrusted again until you run `mcpwall trust`");
    Ok(ExitCode::SUCCESS)
}

/// Every part of the project file that the effective policy ignores while the file is
/// untrusted (allow rules, looser settings and their values, `disable:`, …), each with
/// its line: exactly what trusting turns on. If the policy does not load as a whole (the
/// user's file is broken), the file's own lines are shown instead.
fn untrusted_parts(opts: &LoadOptions, text: &str) -> Vec<String> {
    let policy = match config::load(opts) {
        Ok(policy) => policy,
        Err(_) => {
            return text
                .lines()
                .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
                .map(|l| format!("| {l}"))
                .collect();
        }
    };
    policy
        .ignored
        .iter()
        .filter(|i| {
            policy.source(i.span.source).kind == config::policy::SourceKind::ProjectUntrusted
        })
        .map(|i| {
            let source = policy.source(i.span.source);
            let line = source
                .text
                .lines()
                .nth(i.span.line.saturating_sub(1) as usize)
                .unwrap_or("")
                .trim();
            format!("{} (line {}: {line})", i.what, i.span.line)
        })
        .collect()
}

fn revoke(home: &Path, file: &Path) -> miette::Result<ExitCode> {
    let key = match trust::trust_key(file) {
        Ok(k) => k,
        // The file is gone: its record may still be there under the plain path.
        Err(_) => file.to_string_lossy().into_owned(),
    };
    let mut store = TrustStore::load(home).map_err(|e| miette!("{e}"))?;
    if store.revoke(&key) {
        store.save().map_err(|e| miette!("{e}"))?;
        println!("revoked trust in {key}");
    } else {
        println!("{key} was not trusted");
    }
    Ok(ExitCode::SUCCESS)
}

fn list(home: &Path) -> miette::Result<ExitCode> {
    let store = TrustStore::load(home).map_err(|e| miette!("{e}"))?;
    if store.entries().is_empty() {
        println!("no trusted project files ({})", store.path().display());
        return Ok(ExitCode::SUCCESS);
    }
    for key in store.entries().keys() {
        let state = match std::fs::read(key) {
            Ok(bytes) => match store.status(key, &bytes) {
                TrustStatus::Trusted => "trusted",
                TrustStatus::Changed => "changed since trusted (not applied)",
                TrustStatus::Unknown => "unknown",
            },
            Err(_) => "missing",
        };
        println!("{key}\t{state}");
    }
    Ok(ExitCode::SUCCESS)
}
