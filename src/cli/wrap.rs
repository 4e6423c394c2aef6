//! `mcpwall wrap`.

use std::process::ExitCode;

/// Arguments of `mcpwall wrap`.
#[derive(Debug, clap::Args)]
pub struct Args {}

pub fn run(args: Args) -> miette::Result<ExitCode> {
    let _ = args;
    Err(miette::miette!("`mcpwall wrap` is being built"))
}

/// Arguments of `mcpwall unwrap`.
#[derive(Debug, clap::Args)]
pub struct UnwrapArgs {}

pub fn run_unwrap(args: UnwrapArgs) -> miette::Result<ExitCode> {
    let _ = args;
    Err(miette::miette!("`mcpwall unwrap` is being built"))
}
