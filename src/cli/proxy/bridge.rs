//! `mcpwall [OPTIONS] --upstream URL`: bridge mode (see `crate::bridge`).

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use crate::audit::Names;
use crate::bridge::{self, Options};
use crate::config;
use crate::guard::Guard;
use crate::guard::pins::ServerIdentity;
use crate::io::Chatter;
use crate::program::Program;
use crate::upstream::{self, Upstream};

/// The bridge shares the proxy's arguments (`--upstream` instead of a command).
pub fn run(args: super::Args) -> miette::Result<ExitCode> {
    let url = args.upstream.clone().unwrap_or_default();
    let load_options = crate::cli::common::load_options(args.config.clone())?;
    let home = load_options.home.clone();
    let policy = config::load_without_pack_examples(&load_options).map_err(miette::Report::new)?;
    let settings = policy.settings.clone();
    let chatter = Chatter {
        level: args.log_level.unwrap_or(settings.log_level),
    };
    crate::cli::common::warn_ignored(&policy, &chatter);
    crate::cli::common::warn_shadowed(&policy, &load_options, &chatter);
    let mut token = std::env::var(upstream::TOKEN_ENV)
        .ok()
        .filter(|t| !t.is_empty());
    // A wrapped Codex entry names its credentials' variables; each must be set.
    let referenced = upstream::referenced_credentials(&|name| std::env::var(name).ok())
        .map_err(|e| miette::miette!("{e}"))?;
    if let Some(from_var) = referenced.token {
        if token.is_some() {
            return Err(miette::miette!(
                "both ${} and ${} give the bearer token; keep one",
                upstream::TOKEN_ENV,
                upstream::TOKEN_VAR_ENV
            ));
        }
        token = Some(from_var);
    }
    // A remote entry `wrap` turned into a bridge carries its headers here.
    let var = crate::clients::entry::UPSTREAM_HEADERS_ENV;
    let header_env = std::env::var(var)
        .ok()
        .filter(|h| !h.trim().is_empty())
        .map(|h| (var, h));
    if let Some(file) = &args.header_file {
        crate::cli::common::warn_if_others_may_read(file, "the header file");
    }
    let upstream = Upstream::new(&upstream::Settings {
        url: url.clone(),
        ca_file: args.ca_file.clone(),
        header_file: args.header_file.clone(),
        token,
        header_env,
        referenced_headers: referenced.header_lines,
    })
    .map_err(|e| miette::miette!("{e}"))?;
    let server_name = args
        .server_name
        .clone()
        .unwrap_or_else(|| upstream.host().to_string());
    // Pins are keyed by the server's name and its URL, as a stdio server's by its command.
    let guard = Guard::from_policy(
        &policy,
        ServerIdentity {
            name: server_name.clone(),
            command: vec![url],
        },
        &home,
    )
    .map_err(|e| miette::miette!("{e}"))?;
    // Kept for the session, which compiles it again for the client's roots.
    let program =
        Program::compile_with(&policy, &load_options.path_env()).map_err(miette::Report::new)?;
    let program = Arc::new(program.keep_source(Arc::new(policy)));
    let audit = crate::cli::common::start_audit(
        &settings,
        crate::cli::common::audit_config(&settings, &home, server_name.clone()),
        program.clone() as Arc<dyn Names>,
    )?;
    let options = Options {
        server_name,
        chatter,
        guard: Some(Arc::new(guard)),
        home: Some(home),
    };
    // One thread, as the stdio proxy.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
        .map_err(|e| miette::miette!("cannot start the async runtime: {e}"))?;
    let sender = audit.sender();
    let result = runtime.block_on(async {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        crate::platform::forward_stop_requests(tx)
            .map_err(|e| miette::miette!("cannot install signal handlers: {e}"))?;
        bridge::run(Arc::new(upstream), program, sender, options, rx)
            .await
            .map_err(|e| miette::miette!("{e}"))
    });
    runtime.shutdown_background();
    audit.finish(Duration::from_secs(2));
    result.map(ExitCode::from)
}
