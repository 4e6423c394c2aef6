//! The `mcpwall` command line: parse, dispatch, map errors to exit codes.

use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};
use mcpwall::cli;

/// What `mcpwall --version` prints: the version, then the commit and the target it was built
/// from and for (build.rs), e.g. `mcpwall 0.1.0 (commit 0123456789ab, x86_64-unknown-linux-musl)`.
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("MCPWALL_COMMIT"),
    ", ",
    env!("MCPWALL_TARGET"),
    ")"
);

/// A firewall for the Model Context Protocol.
///
/// Put `mcpwall --` in front of an MCP server command to run it behind the policy:
/// `mcpwall -- npx -y @modelcontextprotocol/server-filesystem /proj`
#[derive(Debug, Parser)]
#[command(name = "mcpwall", version = VERSION, args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    proxy: cli::proxy::Args,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Judge JSON-RPC frames (from stdin or --input) against the policy; exit 0 allow, 1 deny/redact, 2 error.
    Check(cli::check::Args),
    /// Print the merged effective policy, with sources and warnings.
    ExplainPolicy(cli::explain::Args),
    /// Trust the project's .mcpwall.yml so its allow rules apply.
    Trust(cli::trust::Args),
    /// Find MCP client configs, write ~/.mcpwall/mcpwall.yml and wrap servers.
    Init(cli::init::Args),
    /// Wrap one server of a client config with mcpwall.
    Wrap(cli::wrap::Args),
    /// Restore wrapped servers to their original entries.
    Unwrap(cli::wrap::UnwrapArgs),
    /// Show which servers in which clients are protected.
    Status(cli::status::Args),
    /// Check the setup end to end and say what to fix.
    Doctor(cli::status::DoctorArgs),
    /// Review pinned tool definitions: list, diff, approve, reset, verify (exit 1 on drift).
    Pins(cli::pins::Args),
    /// List the calls waiting for your approval, or approve (or --deny) one by its code.
    Approve(cli::approve::Args),
    /// Red-team a server: run attacks directly and through mcpwall, report what got through.
    Scan(cli::scan::Args),
    /// Compare two scan reports (exit 1 when the second is worse or incomplete).
    Compare(cli::compare::Args),
    /// Serve a stdio server over Streamable HTTP (127.0.0.1:8808/mcp), judging every message.
    Serve(cli::serve::Args),
    /// Bearer tokens for `serve`: add NAME (prints it once), list, remove NAME.
    Token(cli::token::Args),
    /// Read the audit log: filter, summarise, follow (-f); `log verify` checks its hash chain.
    Log(cli::log::Args),
}

fn main() -> ExitCode {
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    // The sandbox helper becomes the server: nothing else may run first (it must still be
    // single-threaded to enter a user namespace).
    if argv
        .get(1)
        .is_some_and(|a| a == mcpwall::sandbox::helper::ARG)
    {
        return mcpwall::sandbox::helper::main(&argv[2..]);
    }
    // clap would say "unexpected argument"; a near miss of a verb or a server command
    // without its `--` deserves the line the user meant.
    let verbs: Vec<String> = Cli::command()
        .get_subcommands()
        .map(|c| c.get_name().to_string())
        .chain(["help".to_string()])
        .collect();
    if let Some((error, hint)) = cli::common::misplaced_word(&argv, &verbs) {
        eprint!(
            "{}",
            cli::common::error_text(
                &miette::miette!(help = hint, "{error}"),
                "",
                cli::common::colour_stderr()
            )
        );
        return ExitCode::from(2);
    }
    // A bare `mcpwall` typed at a terminal is someone asking what it does; a client
    // starting it without a server command still gets the error (no terminal there).
    if argv.len() == 1 && std::io::IsTerminal::is_terminal(&std::io::stdin()) {
        let _ = Cli::command().print_long_help();
        return ExitCode::from(2);
    }
    let cli = Cli::parse_from(argv);
    cli::common::tighten_state_dirs();
    let tag = if cli.command.is_none() {
        "mcpwall: "
    } else {
        ""
    };
    let result = match cli.command {
        Some(Command::Check(a)) => cli::check::run(a),
        Some(Command::ExplainPolicy(a)) => cli::explain::run(a),
        Some(Command::Trust(a)) => cli::trust::run(a),
        Some(Command::Init(a)) => cli::init::run(a),
        Some(Command::Wrap(a)) => cli::wrap::run(a),
        Some(Command::Unwrap(a)) => cli::wrap::run_unwrap(a),
        Some(Command::Status(a)) => cli::status::run(a),
        Some(Command::Doctor(a)) => cli::status::run_doctor(a),
        Some(Command::Pins(a)) => cli::pins::run(a),
        Some(Command::Approve(a)) => cli::approve::run(a),
        Some(Command::Scan(a)) => cli::scan::run(a),
        Some(Command::Compare(a)) => cli::compare::run(a),
        Some(Command::Log(a)) => cli::log::run(a),
        Some(Command::Serve(a)) => cli::serve::run(a),
        Some(Command::Token(a)) => cli::token::run(a),
        None => cli::proxy::run(cli.proxy),
    };
    match result {
        Ok(code) => code,
        Err(report) => {
            eprint!(
                "{}",
                cli::common::error_text(&report, tag, cli::common::colour_stderr())
            );
            ExitCode::from(2)
        }
    }
}
