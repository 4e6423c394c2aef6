//! `mcpwall token add NAME | list | remove NAME`: the bearer tokens `mcpwall serve`
//! accepts, each naming an identity (see `crate::http::tokens`).

use std::process::ExitCode;

use crate::http::tokens::{self, Tokens};

/// `token` arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub action: Action,
}

#[derive(Debug, clap::Subcommand)]
pub enum Action {
    /// Issue a token for identity NAME; it is printed once and only its hash is kept.
    Add { name: String },
    /// List the identities that have a token.
    List,
    /// Revoke NAME's token.
    Remove { name: String },
}

pub fn run(args: Args) -> miette::Result<ExitCode> {
    let home = crate::cli::common::home_dir()?;
    let path = tokens::default_path(&home);
    let fail = |e: tokens::TokenError| miette::miette!("{e}");
    match args.action {
        Action::Add { name } => {
            let token = Tokens::add(&path, &name).map_err(fail)?;
            // The token on stdout alone, so `$(mcpwall token add ci)` captures it.
            println!("{token}");
            eprintln!(
                "mcpwall: token for {name:?} issued; it is shown only now. Clients send it as `Authorization: Bearer <token>`; a running `mcpwall serve` requires a token from now on, and serves {name:?} after a restart (identities are compiled at start)."
            );
        }
        Action::List => {
            let tokens = Tokens::load(&path).map_err(fail)?;
            for name in tokens.names() {
                println!("{name}");
            }
        }
        Action::Remove { name } => {
            Tokens::remove(&path, &name).map_err(fail)?;
            eprintln!(
                "mcpwall: token of {name:?} removed; a running `mcpwall serve` ends {name:?}'s open sessions and refuses the token from now on"
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
