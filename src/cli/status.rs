//! `mcpwall status`.

use std::process::ExitCode;

/// Arguments of `mcpwall status`.
#[derive(Debug, clap::Args)]
pub struct Args {}

pub fn run(args: Args) -> miette::Result<ExitCode> {
    let _ = args;
    Err(miette::miette!("`mcpwall status` is being built"))
}

/// Arguments of `mcpwall doctor`.
#[derive(Debug, clap::Args)]
pub struct DoctorArgs {}

pub fn run_doctor(args: DoctorArgs) -> miette::Result<ExitCode> {
    let _ = args;
    Err(miette::miette!("`mcpwall doctor` is being built"))
}
