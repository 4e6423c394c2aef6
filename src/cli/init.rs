//! `mcpwall init`.

use std::process::ExitCode;

/// Arguments of `mcpwall init`.
#[derive(Debug, clap::Args)]
pub struct Args {}

pub fn run(args: Args) -> miette::Result<ExitCode> {
    let _ = args;
    Err(miette::miette!("`mcpwall init` is being built"))
}
