//! `mcpwall trust`.

use std::process::ExitCode;

/// Arguments of `mcpwall trust`.
#[derive(Debug, clap::Args)]
pub struct Args {}

pub fn run(args: Args) -> miette::Result<ExitCode> {
    let _ = args;
    Err(miette::miette!("`mcpwall trust` is being built"))
}
