//! `mcpwall init`: find every MCP server, write `~/.mcpwall/mcpwall.yml` from a built-in
//! profile, and wrap the servers the user picks. `~/.mcpwall/config.yml` belongs to the
//! original mcpwall (Node) as well, so `init` never writes it (see [`write_config`]).

use std::io::{BufRead, IsTerminal, Write};
use std::process::ExitCode;

use miette::{IntoDiagnostic, miette};

use super::wrap::{finish, lock, report_broken, server_label, wrappable, wrapper};
use crate::clients::{self, EntryState, Env, Selection, Workspace, fsio};

/// Arguments of `mcpwall init`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The built-in profile the new ~/.mcpwall/mcpwall.yml extends (local-dev, company-laptop, strict).
    #[arg(long, default_value = DEFAULT_PROFILE, value_name = "NAME")]
    pub profile: String,
    /// Wrap every server found without asking (needed when stdin is not a terminal).
    #[arg(long, short = 'y')]
    pub yes: bool,
    /// Replace an existing ~/.mcpwall/mcpwall.yml without asking (a backup is kept), and
    /// wrap servers in client files that are read-only or hard-linked.
    #[arg(long)]
    pub force: bool,
    /// Write this mcpwall's absolute path even when `mcpwall` is on PATH (for clients that
    /// start servers with a shorter PATH, such as macOS apps opened from the Dock).
    #[arg(long, conflicts_with = "bare_command")]
    pub absolute_path: bool,
    /// Write `mcpwall` (found on PATH) instead of an absolute path; refused unless the
    /// `mcpwall` on PATH is this binary or a byte-identical copy of it.
    #[arg(long)]
    pub bare_command: bool,
    /// Print a unified diff of each file that would change, and change nothing.
    #[arg(long)]
    pub dry_run: bool,
}

/// The profile `init` uses when none is named.
pub const DEFAULT_PROFILE: &str = "local-dev";

/// Names of the profiles embedded in this build (`profiles/<name>.yml`).
pub fn profile_names() -> Vec<&'static str> {
    crate::builtin::FILES
        .iter()
        .filter_map(|(path, _)| path.strip_prefix("profiles/")?.strip_suffix(".yml"))
        .collect()
}

/// Check a profile name against the embedded profiles only: nothing on disk is ever read
/// as a profile, so a name like `../../etc/x` is simply unknown.
pub fn validate_profile(name: &str) -> miette::Result<&'static str> {
    let names = profile_names();
    names.iter().copied().find(|n| *n == name).ok_or_else(|| {
        let valid = if names.is_empty() {
            "none are embedded in this build".to_string()
        } else {
            names.join(", ")
        };
        miette!(
            code = "mcpwall::init::unknown_profile",
            help = format!("valid profiles: {valid}"),
            "unknown profile `{name}`"
        )
    })
}

/// The user policy `init` writes: the profile by reference, so built-in protection stays
/// and improves with each mcpwall release, with room for the user's own rules. `default`
/// is listed after the profile so the file is never weaker than the built-in pack, whatever
/// the profile extends (a pack reached twice is included once, where first reached).
pub fn config_text(profile: &str) -> String {
    format!(
        "# mcpwall user policy, written by `mcpwall init --profile {profile}`.\n\
         # Order: the deny rules of the built-in `{profile}` profile and default pack\n\
         # (updated with mcpwall) are checked first, then the rules you add under\n\
         # `rules:`, then the packs' allow rules: an allow of yours cannot lift a pack's\n\
         # deny. `exceptions: {{rule-name: [{{match: ..}}]}}` lifts one for the calls it\n\
         # matches, `disable: [rule-name]` entirely. Check the setup with `mcpwall doctor`,\n\
         # the effective rules and their order with `mcpwall explain-policy`.\n\
         version: 1\n\
         extends: [profiles/{profile}, default]\n"
    )
}

pub fn run(args: Args) -> miette::Result<ExitCode> {
    let profile = validate_profile(&args.profile)?;
    let interactive = std::io::stdin().is_terminal();
    if !interactive && !args.yes && !args.dry_run {
        return Err(miette!(
            help = "run `mcpwall init --yes` to wrap every server found, or run it in a terminal to choose",
            "stdin is not a terminal, so mcpwall cannot ask which servers to wrap"
        ));
    }
    // Before anything is written: a wrapper that cannot be written (mcpwall runs from a
    // one-off runner's cache) ends the run with nothing changed.
    let wrapper = wrapper(args.absolute_path, args.bare_command)?;
    let env = Env::from_process().into_diagnostic()?;
    let _lock = lock(&env, args.dry_run)?;
    let ws = Workspace::load(env);
    let mut out = std::io::stdout().lock();

    let candidates = list_servers(&ws, &mut out);
    let chosen = if args.yes || !interactive {
        candidates.clone()
    } else {
        ask_which(&candidates)?
    };

    let config = write_config(&ws, profile, &args, interactive, &mut out)?;
    drop(out);
    // A refused replacement is a failure the user must see (and a dry run ends the same
    // way the real run would); the servers are still wrapped, under the policy kept.
    if let ConfigOutcome::Refused(why) = &config {
        eprintln!("error: {why}");
    }
    let refused = matches!(config, ConfigOutcome::Refused(_));
    let code = if chosen.is_empty() {
        let broken = report_broken(&ws, &mut std::io::stdout().lock());
        println!(
            "{}",
            if args.dry_run {
                "no servers to wrap (dry run: nothing was written)"
            } else {
                "no servers to wrap"
            }
        );
        if broken {
            ExitCode::from(1)
        } else {
            ExitCode::SUCCESS
        }
    } else {
        let changes = ws.plan_wrap(&chosen, &wrapper);
        finish(&ws, changes, args.dry_run, args.force, Some(&wrapper))?
    };
    Ok(if refused { ExitCode::from(1) } else { code })
}

/// What became of `~/.mcpwall/mcpwall.yml`.
enum ConfigOutcome {
    /// Written, already right, or (dry run) would be written.
    Done,
    /// The user answered no on the terminal.
    Kept,
    /// Not replaced without `--force` and no one to ask: the reason.
    Refused(String),
}

/// Print every server found; return the wrappable ones, in print order.
fn list_servers(ws: &Workspace, out: &mut impl Write) -> Vec<(usize, usize)> {
    let all = ws.selected(&Selection::default());
    let wrappable: Vec<_> = all
        .iter()
        .copied()
        .filter(|&(d, s)| wrappable(&ws.docs[d].servers[s].state))
        .collect();
    let _ = writeln!(
        out,
        "found {} MCP server(s) in {} client config file(s); {} can be wrapped",
        all.len(),
        ws.docs.len() + ws.broken.len(),
        wrappable.len()
    );
    for &(d, s) in &all {
        let doc = &ws.docs[d];
        let server = &doc.servers[s];
        let number = match wrappable.iter().position(|&c| c == (d, s)) {
            Some(i) => format!("{:>3}.", i + 1),
            None => "   -".to_string(),
        };
        let what = match &server.state {
            EntryState::Unwrapped { command, args } => clients::command_line(command, args),
            EntryState::Wrapped { command, args, .. } => {
                format!("already wrapped: {}", clients::command_line(command, args))
            }
            EntryState::WrappedByOriginal {
                options,
                command,
                args,
                ..
            } => format!(
                "protected by the original mcpwall (Node), {}; {}: {}",
                options.describe(),
                if options.unknown.is_empty() {
                    "can be moved to this mcpwall"
                } else {
                    "undocumented options, migrate by hand"
                },
                clients::command_line(command, args)
            ),
            EntryState::Remote { .. } => server.state.remote_line().unwrap_or_default(),
            EntryState::WrappedRemote { .. } => format!(
                "already wrapped: {}",
                server.state.remote_line().unwrap_or_default()
            ),
            EntryState::Skipped(why) => format!("skipped: {why}"),
        };
        let _ = writeln!(
            out,
            "{number} {:<15} {}  {}  {what}",
            doc.file.client.id(),
            ws.display_path(&doc.file.path),
            server_label(server),
        );
    }
    wrappable
}

/// Ask on stderr which of the numbered servers to wrap.
fn ask_which(candidates: &[(usize, usize)]) -> miette::Result<Vec<(usize, usize)>> {
    if candidates.is_empty() {
        return Ok(Vec::new());
    }
    loop {
        let answer = prompt("wrap which servers? [A]ll, [n]one, or numbers like 1,3-4: ")?;
        match parse_choice(&answer, candidates.len()) {
            Ok(picks) => return Ok(picks.into_iter().map(|i| candidates[i]).collect()),
            Err(why) => eprintln!("{why}"),
        }
    }
}

/// Parse `all`, `none` or `1,3-4` into 0-based indices below `count`.
pub fn parse_choice(answer: &str, count: usize) -> Result<Vec<usize>, String> {
    let answer = answer.trim().to_ascii_lowercase();
    match answer.as_str() {
        "" | "a" | "all" | "y" | "yes" => return Ok((0..count).collect()),
        "n" | "none" | "no" => return Ok(Vec::new()),
        _ => {}
    }
    let mut picks = Vec::new();
    for part in answer.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (lo, hi) = part.split_once('-').unwrap_or((part, part));
        let bad = || format!("`{part}` is not a number or range between 1 and {count}");
        let lo: usize = lo.trim().parse().map_err(|_| bad())?;
        let hi: usize = hi.trim().parse().map_err(|_| bad())?;
        if lo == 0 || hi < lo || hi > count {
            return Err(bad());
        }
        picks.extend(lo - 1..hi);
    }
    picks.sort_unstable();
    picks.dedup();
    Ok(picks)
}

fn prompt(question: &str) -> miette::Result<String> {
    eprint!("{question}");
    std::io::stderr().flush().into_diagnostic()?;
    let mut line = String::new();
    let read = std::io::stdin()
        .lock()
        .read_line(&mut line)
        .into_diagnostic()?;
    if read == 0 {
        return Err(miette!("no answer (end of input); nothing was changed"));
    }
    Ok(line)
}

/// Write this mcpwall's own `~/.mcpwall/mcpwall.yml`, asking before replacing a different
/// existing file. `~/.mcpwall/config.yml` is the original mcpwall's (Node) too: it is
/// never written, and one the original cannot load (an earlier `init` wrote it) is moved
/// to `mcpwall.yml`, so the servers the original still wraps start again. A dry run
/// decides exactly as the real run would and shows that decision.
fn write_config(
    ws: &Workspace,
    profile: &str,
    args: &Args,
    interactive: bool,
    out: &mut impl Write,
) -> miette::Result<ConfigOutcome> {
    let dir = ws.env.mcpwall_dir();
    let path = dir.join(crate::config::OWN_USER_FILE);
    let shared = dir.join(crate::config::SHARED_USER_FILE);
    let shown = ws.display_path(&path);
    let shown_shared = ws.display_path(&shared);
    let read = |path: &std::path::Path| match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(miette!("cannot read {}: {e}", ws.display_path(path))),
    };
    let existing = read(&path)?;
    if existing.is_none()
        && let Some(text) = read(&shared)?
        && let Some(why) = crate::config::original::rejects(&text)
    {
        // Written for this mcpwall (or broken for both): it moves to our own file.
        if args.dry_run {
            let _ = writeln!(
                out,
                "{shown_shared}: would be moved to {shown} (the original mcpwall cannot load it: {why})"
            );
            return Ok(ConfigOutcome::Done);
        }
        fsio::private_dir(&dir).into_diagnostic()?;
        fsio::write_atomic(&path, None, &text).into_diagnostic()?;
        std::fs::remove_file(&shared).into_diagnostic()?;
        let _ = writeln!(
            out,
            "{shown_shared}: moved to {shown}: the original mcpwall (Node) could not load it ({why}); servers it wraps use its built-in rules again"
        );
        return Ok(ConfigOutcome::Done);
    }
    let wanted = config_text(profile);
    if existing.as_deref() == Some(wanted.as_str()) {
        let _ = writeln!(out, "{shown}: already extends the `{profile}` profile");
        return Ok(ConfigOutcome::Done);
    }
    let colour = super::common::colour_stdout();
    if existing.is_some() && !args.force {
        let refusal = || {
            format!(
                "{shown} exists and differs from the `{profile}` profile's file; it was not replaced (pass --force to replace it; a backup is kept)"
            )
        };
        // `--yes` accepts what the run offers; an edited policy is the user's, kept.
        let kept = if args.yes || interactive {
            ConfigOutcome::Kept
        } else {
            ConfigOutcome::Refused(refusal())
        };
        if args.dry_run {
            let _ = writeln!(
                out,
                "{shown}: would {} (it exists and differs; --force replaces it, keeping a backup)",
                if interactive && !args.yes {
                    "ask before replacing it"
                } else {
                    "keep your existing policy"
                }
            );
            return Ok(kept);
        }
        let replace = interactive
            && !args.yes
            && matches!(
                prompt(&format!(
                    "{shown} exists and differs; replace it (a backup is kept)? [y/N] "
                ))?
                .trim()
                .to_ascii_lowercase()
                .as_str(),
                "y" | "yes"
            );
        if !replace {
            let _ = writeln!(
                out,
                "{shown}: kept your existing policy (pass --force to replace it with the `{profile}` profile; a backup is kept)"
            );
            return Ok(kept);
        }
    }
    if args.dry_run {
        let diff = clients::unified_diff(&shown, existing.as_deref().unwrap_or(""), &wanted);
        let _ = write!(out, "{}", super::common::paint_diff(colour, &diff));
        return Ok(ConfigOutcome::Done);
    }
    if let Some(existing) = &existing {
        let backup = fsio::write_backup(&dir.join("backups"), &path, existing).into_diagnostic()?;
        let _ = writeln!(out, "{shown}: backed up to {}", ws.display_path(&backup));
    }
    fsio::private_dir(&dir).into_diagnostic()?;
    fsio::write_atomic(&path, existing.as_deref(), &wanted).into_diagnostic()?;
    let _ = writeln!(out, "{shown}: written, extends the `{profile}` profile");
    if shared.exists() {
        let _ = writeln!(
            out,
            "{shown_shared}: left as it is for the original mcpwall (Node); this mcpwall reads {shown} from now on (copy rules of yours from one to the other)"
        );
    }
    Ok(ConfigOutcome::Done)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn choices_parse_to_indices() {
        assert_eq!(parse_choice("", 3), Ok(vec![0, 1, 2]));
        assert_eq!(parse_choice("none", 3), Ok(vec![]));
        assert_eq!(parse_choice("3, 1-2,2", 3), Ok(vec![0, 1, 2]));
        assert!(parse_choice("0", 3).is_err());
        assert!(parse_choice("2-4", 3).is_err());
        assert!(parse_choice("x", 3).is_err());
    }

    #[test]
    fn profile_names_never_reach_the_disk() {
        for bad in ["../../etc/passwd", "/etc/passwd", "local-dev.yml", ""] {
            assert!(validate_profile(bad).is_err(), "{bad}");
        }
        for name in profile_names() {
            assert_eq!(validate_profile(name).unwrap(), name);
        }
    }
}
