//! `mcpwall [OPTIONS] -- CMD [ARGS...]`: run a server behind the policy.

use std::path::PathBuf;
use std::process::ExitCode;

/// Proxy-mode arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Use exactly this policy file (plus what it extends).
    #[arg(short = 'c', long = "config")]
    pub config: Option<PathBuf>,
    /// Drop non-JSON lines the server prints on stdout instead of scanning and forwarding them.
    #[arg(long)]
    pub strict: bool,
    /// Level of mcpwall's own stderr messages (error, warn, info, debug). Audit events are not affected.
    #[arg(long)]
    pub log_level: Option<String>,
    /// Name of the server for `server:` matchers and the audit log (default: the command's basename).
    #[arg(long)]
    pub server_name: Option<String>,
    /// The server command and its arguments, after `--`.
    #[arg(last = true)]
    pub command: Vec<String>,
}

pub fn run(args: Args) -> miette::Result<ExitCode> {
    let _ = args;
    Err(miette::miette!("the proxy is being built"))
}
