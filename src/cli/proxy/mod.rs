//! `mcpwall [OPTIONS] -- CMD [ARGS...]`: run a server behind the policy.

mod bridge;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use crate::audit::Names;
use crate::config;
use crate::guard::Guard;
use crate::guard::pins::ServerIdentity;
use crate::io::{Chatter, LogLevel};
use crate::program::Program;
use crate::proxy::{self, Grace, Options, ProxyError};

/// Proxy-mode arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Use exactly this policy file (plus what it extends).
    #[arg(short = 'c', long = "config")]
    pub config: Option<PathBuf>,
    /// Accepted for the original mcpwall's command lines: lines the server prints that are not JSON-RPC are never forwarded, with or without it.
    #[arg(long)]
    pub strict: bool,
    /// Level of mcpwall's own stderr messages (error, warn, info, debug). Audit events are not affected.
    #[arg(long, value_parser = crate::cli::common::parse_level)]
    pub log_level: Option<LogLevel>,
    /// Name of the server for `server:` matchers and the audit log (default: the command's basename).
    #[arg(long)]
    pub server_name: Option<String>,
    /// Milliseconds between closing the server's stdin and sending SIGTERM (tests).
    #[arg(long, hide = true, default_value_t = 3000)]
    pub grace_ms: u64,
    /// Milliseconds between SIGTERM and SIGKILL (tests).
    #[arg(long, hide = true, default_value_t = 2000)]
    pub kill_grace_ms: u64,
    /// Bridge mode: the MCP server at this Streamable HTTP URL instead of a command (stdio towards the client). Headers and tokens come from --header-file, $MCPWALL_UPSTREAM_HEADERS (`Name: value` lines; what `wrap` writes for a remote entry's headers), $MCPWALL_UPSTREAM_TOKEN, and variables named by $MCPWALL_UPSTREAM_BEARER_ENV and $MCPWALL_UPSTREAM_ENV_HEADERS (`Header: VAR` lines; what `wrap` writes for Codex), never from the command line.
    #[arg(long, value_name = "URL", conflicts_with = "command")]
    pub upstream: Option<String>,
    /// With --upstream: a file of `Name: value` lines sent with every request (e.g. an API key).
    #[arg(long, value_name = "FILE", requires = "upstream")]
    pub header_file: Option<PathBuf>,
    /// With --upstream: trust only the CA certificates in this PEM file for https://.
    #[arg(long, value_name = "FILE", requires = "upstream")]
    pub ca_file: Option<PathBuf>,
    /// The server command and its arguments, after `--`.
    #[arg(last = true)]
    pub command: Vec<String>,
}

pub fn run(args: Args) -> miette::Result<ExitCode> {
    if args.upstream.is_some() {
        return bridge::run(args);
    }
    let spec = crate::cli::common::server_command(
        &args.command,
        "mcpwall -- npx -y @modelcontextprotocol/server-filesystem /project",
    )?;
    let started = std::time::Instant::now();
    let load_options = crate::cli::common::load_options(args.config.clone())?;
    let home = load_options.home.clone();

    // One thread: the pumps do little work per frame, and a single-threaded runtime
    // avoids cross-CPU wake-ups on every hop (they dominate round-trip latency).
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
        .map_err(|e| miette::miette!("cannot start the async runtime: {e}"))?;
    let mut audit = None;
    let result = runtime.block_on(async {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        crate::platform::forward_stop_requests(tx)
            .map_err(|e| miette::miette!("cannot install signal handlers: {e}"))?;
        // With no policy file anywhere the policy is the embedded default pack, which
        // the test suite loads and compiles: the server starts, in the sandbox of the
        // pack's `sandbox:` section (decoded alone, without the rules), while it loads.
        // Otherwise loading validates everything a user can get wrong (YAML, keys,
        // regexes, globs, their sizes), with file, line and column, and a policy that
        // fails it never starts the server.
        // With a policy file, the sandbox is known only once the file is loaded: the
        // sandbox helper starts now and waits for it, so that its own start (a second
        // exec of this binary: about a millisecond) overlaps the loading.
        let mut early = None;
        let mut prepared = None;
        if load_options.is_zero_config()
            && let Some(sandbox) = config::default_pack_sandbox(&load_options)
        {
            let quiet = Chatter {
                level: args.log_level.unwrap_or(LogLevel::Warn),
            };
            let mut spec = spec.clone();
            spec.sandbox =
                crate::cli::common::sandbox_plan_of(&sandbox, None, &load_options, &quiet)?;
            let started = proxy::start(&spec);
            early = Some((sandbox, spec, started));
        } else {
            prepared = Some(proxy::prepare(&spec));
        }
        let policy = match config::load_without_pack_examples(&load_options) {
            Ok(policy) => policy,
            Err(e) => {
                if let Some((_, _, Ok(server))) = early {
                    server.abandon().await;
                }
                if let Some(Ok(helper)) = prepared {
                    helper.abandon().await;
                }
                return Err(miette::Report::new(e));
            }
        };
        let loaded = started.elapsed();
        let settings = policy.settings.clone();
        let chatter = Chatter {
            level: args.log_level.unwrap_or(settings.log_level),
        };
        crate::cli::common::warn_ignored(&policy, &chatter);
        crate::cli::common::warn_shadowed(&policy, &load_options, &chatter);
        // The server started early runs in the sandbox the loaded policy says, or it is
        // replaced by one that does.
        let (spec, early) = match early {
            Some((sandbox, spec, server))
                if sandbox == policy.sandbox && policy.settings.log_dir.is_none() =>
            {
                (spec, Some(server))
            }
            other => {
                if let Some((_, _, Ok(server))) = other {
                    server.abandon().await;
                }
                let mut spec = spec;
                spec.sandbox =
                    match crate::cli::common::sandbox_plan(&policy, &load_options, &chatter) {
                        Ok(plan) => plan,
                        Err(e) => {
                            if let Some(Ok(helper)) = prepared {
                                helper.abandon().await;
                            }
                            return Err(e);
                        }
                    };
                // The helper waiting since the start gets its plan now; it becomes the
                // server while the policy compiles.
                let started = match prepared {
                    Some(Ok(helper)) => {
                        Some(proxy::start_prepared(helper, spec.sandbox.clone()).await)
                    }
                    Some(Err(e)) => Some(Err(e)),
                    None => None,
                };
                (spec, started)
            }
        };
        let sandbox_event = crate::cli::common::sandbox_event(spec.sandbox.as_deref());
        let server_name = match &args.server_name {
            Some(name) => name.clone(),
            None => match crate::cli::common::server_name(&args.command, &home) {
                Ok(name) => name,
                Err(e) => {
                    if let Some(Ok(server)) = early {
                        server.abandon().await;
                    }
                    return Err(e);
                }
            },
        };
        // Pins are keyed by the server's name and its full command. A damaged pin file
        // stops the start (fail closed): re-trusting silently would defeat pinning.
        let guard = match Guard::from_policy(
            &policy,
            ServerIdentity {
                name: server_name.clone(),
                command: args.command.clone(),
            },
            &home,
        ) {
            Ok(guard) => guard,
            Err(e) => {
                if let Some(Ok(server)) = early {
                    server.abandon().await;
                }
                return Err(miette::miette!("{e}"));
            }
        };
        let options = Options {
            strict: args.strict,
            server_name: server_name.clone(),
            chatter,
            grace: Grace {
                before_term: Duration::from_millis(args.grace_ms),
                before_kill: Duration::from_millis(args.kill_grace_ms),
            },
            guard: Some(Arc::new(guard)),
            home: Some(home.clone()),
        };
        // The server starts (about a millisecond for a small one) while the validated
        // policy compiles. Compiling can still fail on what loading does not check (all of
        // a class's regexes together over the size limit): the server, sent nothing, is
        // then killed.
        let server = match early.unwrap_or_else(|| proxy::start(&spec)) {
            Ok(s) => s,
            Err(e) => return Ok(Err(e)),
        };
        let compiling = started.elapsed();
        // Paths in the policy resolve against the same HOME and project the loader used.
        // The session compiles the policy again when the client names its roots
        // (decision 16), so the program keeps it.
        let program = match Program::compile_with(&policy, &load_options.path_env()) {
            Ok(p) => Arc::new(p.keep_source(Arc::new(policy))),
            Err(e) => {
                server.abandon().await;
                return Err(miette::Report::new(e));
            }
        };
        chatter.log(
            LogLevel::Debug,
            format_args!(
                "policy loaded in {} µs, compiled in {} µs",
                loaded.as_micros(),
                (started.elapsed() - compiling).as_micros()
            ),
        );
        let started_audit = crate::cli::common::start_audit(
            &settings,
            crate::cli::common::audit_config(&settings, &home, server_name),
            program.clone() as Arc<dyn Names>,
        )?;
        let sender = started_audit.sender();
        sender.send(&mut vec![sandbox_event]);
        audit = Some(started_audit);
        Ok::<_, miette::Report>(proxy::run(server, program, sender, options, rx).await)
    })?;
    // A fallback blocking stdin reader may still sit in read(2); do not wait for it.
    runtime.shutdown_background();
    if let Some(audit) = audit {
        audit.finish(Duration::from_secs(2));
    }
    match result {
        Ok(code) => Ok(ExitCode::from(code)),
        Err(ProxyError::Spawn(e)) => {
            eprintln!("mcpwall: error: {e}");
            Ok(ExitCode::from(e.exit_code()))
        }
        Err(e) => {
            eprintln!("mcpwall: error: {e}");
            Ok(ExitCode::from(1))
        }
    }
}
