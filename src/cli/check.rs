//! `mcpwall check`.

use std::process::ExitCode;

/// Arguments of `mcpwall check`.
#[derive(Debug, clap::Args)]
pub struct Args {}

pub fn run(args: Args) -> miette::Result<ExitCode> {
    let _ = args;
    Err(miette::miette!("`mcpwall check` is being built"))
}
