//! `mcpwall explain`.

use std::process::ExitCode;

/// Arguments of `mcpwall explain`.
#[derive(Debug, clap::Args)]
pub struct Args {}

pub fn run(args: Args) -> miette::Result<ExitCode> {
    let _ = args;
    Err(miette::miette!("`mcpwall explain` is being built"))
}
