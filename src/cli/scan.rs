//! `mcpwall scan`: red-team a server directly and through mcpwall.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use crate::redteam::attacks::Severity;
use crate::redteam::{self, ScanOptions};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The server to attack, as a JSON argv (never a shell string), e.g. '["python","server.py"]'.
    /// Default: the built-in deliberately vulnerable server.
    #[arg(long)]
    pub server_cmd: Option<String>,
    /// The policy file that protects the server.
    #[arg(short = 'c', long = "config", conflicts_with = "profile")]
    pub config: Option<PathBuf>,
    /// A built-in profile that protects the server (e.g. local-dev, strict).
    #[arg(long)]
    pub profile: Option<String>,
    /// text or json.
    #[arg(long, default_value = "text", value_parser = ["text", "json"])]
    pub format: String,
    /// Also save the JSON report to this file.
    #[arg(long)]
    pub output: Option<PathBuf>,
    /// Exit 1 when an attack of this severity or higher gets through (critical, high, medium, low).
    #[arg(long, value_parser = ["critical", "high", "medium", "low"])]
    pub fail_on: Option<String>,
    /// Print only the summary line.
    #[arg(long)]
    pub quiet: bool,
    /// Hide the progress bar.
    #[arg(long)]
    pub no_progress: bool,
    /// Seed for the fake credentials (default: random).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Leave durations out of the table (stable output for tests).
    #[arg(long, hide = true)]
    pub no_timings: bool,
    /// Run only these attack ids (comma-separated); the rest are SKIPPED.
    #[arg(long, value_delimiter = ',')]
    pub only: Vec<String>,
    /// Run the protected side through another stdio MCP firewall instead of this mcpwall:
    /// its command prefix, e.g. 'npx -y mcpwall --' (words split on spaces, or a JSON argv).
    /// The report names it and its version; the policy options then only size the flood
    /// attacks (the proxy applies its own policy).
    #[arg(long, value_name = "PREFIX")]
    pub proxy: Option<String>,
    /// Seconds to wait for each answer from the server.
    #[arg(long, default_value_t = 20)]
    pub timeout: u64,
    /// Attack an HTTP gateway (`mcpwall serve`) at this URL instead of a stdio server: the
    /// identity and session attacks (http:// only).
    #[arg(long, value_name = "URL", conflicts_with_all = ["server_cmd", "proxy", "config", "profile"])]
    pub url: Option<String>,
    /// With --url: a file holding the bearer token of one identity (never on the command line).
    #[arg(long, value_name = "FILE", requires = "url")]
    pub token_file: Option<PathBuf>,
    /// With --url: a second identity's token (session hijack, identity-scoped tools).
    #[arg(long, value_name = "FILE", requires = "url")]
    pub other_token_file: Option<PathBuf>,
    /// With --url: a token that was revoked (`mcpwall token remove`); it must get 401.
    #[arg(long, value_name = "FILE", requires = "url")]
    pub revoked_token_file: Option<PathBuf>,
    /// Serve the built-in vulnerable target on stdio (used by the scan itself).
    #[arg(long, hide = true)]
    pub serve_target: bool,
    /// The fake home the built-in target lives in.
    #[arg(long, hide = true)]
    pub fake_home: Option<PathBuf>,
}

pub fn run(args: Args) -> miette::Result<ExitCode> {
    if args.serve_target {
        let Some(home) = &args.fake_home else {
            return Err(miette::miette!("--serve-target needs --fake-home DIR"));
        };
        redteam::target::serve(home).map_err(|e| miette::miette!("target failed: {e}"))?;
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(url) = &args.url {
        return run_gateway(&args, url);
    }
    let server = match &args.server_cmd {
        None => None,
        Some(text) => {
            let argv: Vec<String> = serde_json::from_str(text).map_err(|e| {
                miette::miette!(
                    help = r#"give a JSON array of strings, e.g. --server-cmd '["python","my_server.py"]'"#,
                    "--server-cmd is not a JSON argv: {e}"
                )
            })?;
            if argv.is_empty() {
                return Err(miette::miette!("--server-cmd is an empty list"));
            }
            let cwd = std::env::current_dir()
                .map_err(|e| miette::miette!("cannot read the working directory: {e}"))?;
            Some(anchor_to(&argv, &cwd))
        }
    };
    let exe = std::env::current_exe()
        .map_err(|e| miette::miette!("cannot find the mcpwall binary: {e}"))?;
    let policy_dir = tempfile::tempdir()
        .map_err(|e| miette::miette!("cannot create a temporary directory: {e}"))?;
    let (policy, label) = match (&args.config, &args.profile) {
        (Some(file), _) => {
            let abs = std::path::absolute(file).map_err(|e| miette::miette!("bad -c path: {e}"))?;
            if !abs.exists() {
                return Err(miette::miette!(
                    "policy file {} does not exist",
                    abs.display()
                ));
            }
            (abs.clone(), abs.display().to_string())
        }
        (None, Some(name)) => {
            let known = crate::builtin::FILES
                .iter()
                .any(|(p, _)| *p == format!("profiles/{name}.yml"));
            if !known {
                return Err(miette::miette!(
                    help = "see the profiles/ directory",
                    "unknown profile {name:?}"
                ));
            }
            let p = policy_dir.path().join("policy.yml");
            write_policy(&p, &format!("version: 1\nextends: [profiles/{name}]\n"))?;
            (p, format!("profile {name}"))
        }
        (None, None) => {
            // The user's effective policy, as `explain-policy --format yaml` prints it: one
            // self-contained file, so the proxy (run with the fake HOME) applies exactly it.
            let home = crate::platform::home_var()
                .filter(|h| !h.is_empty())
                .map(PathBuf::from)
                .ok_or_else(|| {
                    miette::miette!(help = "or pass the policy with -c", "HOME is not set")
                })?;
            let project_dir = std::env::current_dir()
                .map_err(|e| miette::miette!("cannot read the working directory: {e}"))?;
            let policy = crate::config::load(&crate::config::LoadOptions {
                explicit: None,
                home,
                project_dir,
            })?;
            let p = policy_dir.path().join("policy.yml");
            write_policy(&p, &crate::cli::explain::render_yaml(&policy)?)?;
            (
                p,
                "effective policy (as explain-policy prints it)".to_string(),
            )
        }
    };
    let proxy = match &args.proxy {
        None => None,
        Some(text) => Some(redteam::Proxy::parse(text).map_err(|e| {
            miette::miette!(
                help = r#"give the firewall's command prefix, e.g. --proxy 'npx -y mcpwall --' or --proxy '["my firewall","--"]'"#,
                "--proxy: {e}"
            )
        })?),
    };
    let label = match &proxy {
        Some(p) => format!(
            "{label}; sizes the flood attacks only, {} applies its own",
            p.label
        ),
        None => label,
    };
    let opts = ScanOptions {
        exe,
        server,
        policy,
        policy_label: label,
        seed: args.seed.unwrap_or_else(random_seed),
        timeout: Duration::from_secs(args.timeout.max(1)),
        only: args.only.clone(),
        proxy,
        kernel_policy: None,
    };
    if let Err((side, why)) = redteam::preflight(&opts) {
        return Err(match side {
            redteam::Side::Baseline => miette::miette!(
                help = "run the command yourself to see it start; the scan runs it with HOME set to a \
                        fake home and the working directory inside it (relative paths that name a \
                        file here were made absolute), so it cannot read files under your real HOME",
                "the server to scan did not start, so no attack can run: {why}"
            ),
            _ => miette::miette!(
                help = "the server starts on its own; check the policy with `mcpwall check -c FILE` \
                        (or the --proxy prefix) and run the scan again",
                "the server did not start behind the firewall, so no attack can run: {why}"
            ),
        });
    }
    let show_progress = !args.no_progress && !args.quiet && std::io::stderr().is_terminal();
    let report = redteam::run(&opts, |done, total, id| {
        if show_progress {
            let width = 30;
            let filled = done * width / total.max(1);
            eprint!(
                "\r[{}{}] {done}/{total} {id:<8}",
                "#".repeat(filled),
                "-".repeat(width - filled)
            );
            if done == total {
                eprint!("\r{}\r", " ".repeat(width + 24));
            }
            let _ = std::io::stderr().flush();
        }
    });
    finish(&args, &report)
}

fn write_policy(path: &std::path::Path, text: &str) -> miette::Result<()> {
    std::fs::write(path, text).map_err(|e| miette::miette!("cannot write {}: {e}", path.display()))
}

fn random_seed() -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    t ^ (u64::from(std::process::id()) << 32)
}

fn finish(args: &Args, report: &redteam::Report) -> miette::Result<ExitCode> {
    let json = serde_json::to_string_pretty(&report)
        .map_err(|e| miette::miette!("cannot encode the report: {e}"))?;
    if let Some(out) = &args.output {
        std::fs::write(out, format!("{json}\n"))
            .map_err(|e| miette::miette!("cannot write {}: {e}", out.display()))?;
    }
    if args.quiet {
        println!("{}", report.summary_line());
    } else if args.format == "json" {
        println!("{json}");
    } else {
        print!("{}", report.render_text(!args.no_timings));
    }
    let level = args.fail_on.as_deref().and_then(Severity::parse);
    Ok(if report.gate_met(level) {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// `scan --url`: the identity and session attacks on an HTTP gateway.
fn run_gateway(args: &Args, url: &str) -> miette::Result<ExitCode> {
    let read = |file: &Option<PathBuf>| -> miette::Result<Option<String>> {
        let Some(file) = file else { return Ok(None) };
        let text = std::fs::read_to_string(file)
            .map_err(|e| miette::miette!("cannot read {}: {e}", file.display()))?;
        let token = text.trim().to_string();
        if token.is_empty() {
            return Err(miette::miette!("{} holds no token", file.display()));
        }
        Ok(Some(token))
    };
    let target = redteam::gateway::Target {
        url: url.to_string(),
        token: read(&args.token_file)?,
        other_token: read(&args.other_token_file)?,
        revoked_token: read(&args.revoked_token_file)?,
        timeout: Duration::from_secs(args.timeout.max(1)),
    };
    let results = redteam::gateway::run(&target, &args.only, |_, _, _| {});
    let opts = ScanOptions {
        exe: PathBuf::new(),
        server: None,
        policy: PathBuf::new(),
        policy_label: "the gateway's own".into(),
        seed: args.seed.unwrap_or(0),
        timeout: target.timeout,
        only: args.only.clone(),
        proxy: None,
        kernel_policy: None,
    };
    let mut report = redteam::Report::new(&opts, results);
    report.target = url.to_string();
    report.policy_digest = "n/a (the gateway's)".into();
    finish(args, &report)
}

/// The server runs in the scan's fake home, not where the user typed the command: a
/// relative path in its argv (`["python","my_server.py"]`, `["./server"]`) that names a
/// file here is made absolute, so it still names that file there.
fn anchor_to(argv: &[String], cwd: &std::path::Path) -> Vec<String> {
    argv.iter()
        .enumerate()
        .map(|(i, word)| {
            let path = std::path::Path::new(word);
            let names_a_file = !word.starts_with('-')
                && path.is_relative()
                && (i > 0 || word.contains('/'))
                && cwd.join(path).exists();
            if names_a_file {
                cwd.join(path).display().to_string()
            } else {
                word.clone()
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths_of_the_server_command_are_anchored_where_scan_was_run() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("my_server.py"), "").unwrap();
        std::fs::create_dir(dir.path().join("bin")).unwrap();
        std::fs::write(dir.path().join("bin/srv"), "").unwrap();
        let argv = |words: &[&str]| words.iter().map(|w| w.to_string()).collect::<Vec<_>>();
        let at = |rel: &str| dir.path().join(rel).display().to_string();
        assert_eq!(
            anchor_to(
                &argv(&["python", "my_server.py", "--port", "7"]),
                dir.path()
            ),
            ["python", &at("my_server.py"), "--port", "7"]
        );
        assert_eq!(
            anchor_to(&argv(&["./bin/srv", "missing.py"]), dir.path()),
            [&at("./bin/srv"), "missing.py"]
        );
        // A program name found on PATH stays a name, even if a file shares it here.
        std::fs::write(dir.path().join("python"), "").unwrap();
        assert_eq!(anchor_to(&argv(&["python"]), dir.path()), ["python"]);
    }
}
