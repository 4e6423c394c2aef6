//! One verb per file. Each exposes `Args` (clap) and `run(args) -> Result<ExitCode, miette::Report>`.

pub mod approve;
pub mod check;
pub mod common;
pub mod compare;
pub mod explain;
pub mod init;
pub mod log;
pub mod pins;
pub mod proxy;
pub mod scan;
pub mod serve;
pub mod status;
pub mod token;
pub mod trust;
pub mod wrap;
