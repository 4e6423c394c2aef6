//! `mcpwall serve [--listen ADDR] -- CMD [ARGS...]`: the policy in front of a stdio
//! server, for clients that speak Streamable HTTP (see `crate::http`). Without a command
//! or `--upstream`, the policy's `servers:` are served, each at `/mcp/NAME`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use crate::audit::{Audit, Names};
use crate::config;
use crate::guard::pins::ServerIdentity;
use crate::http::conversation::Backend;
use crate::http::identities::{Judges, PolicyNames, Programs};
use crate::http::server::{self, Gateway};
use crate::http::tokens::{self, LiveTokens, Tokens};
use crate::io::{Chatter, LogLevel};

/// `serve` arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Address to listen on. Loopback by default; any other address needs --allow-remote and at least one token (`mcpwall token add NAME`).
    #[arg(long, default_value = "127.0.0.1:8808")]
    pub listen: SocketAddr,
    /// Listen on a non-loopback address. Without --tls-cert mcpwall speaks plain HTTP: put a TLS-terminating proxy in front, or bearer tokens cross the network in clear.
    #[arg(long)]
    pub allow_remote: bool,
    /// An origin (scheme://host[:port]) whose browser requests are accepted besides loopback ones; repeatable.
    #[arg(long = "allow-origin", value_name = "ORIGIN")]
    pub allow_origins: Vec<String>,
    /// Use exactly this policy file (plus what it extends).
    #[arg(short = 'c', long = "config")]
    pub config: Option<PathBuf>,
    /// Level of mcpwall's own stderr messages (error, warn, info, debug).
    #[arg(long, value_parser = crate::cli::common::parse_level)]
    pub log_level: Option<LogLevel>,
    /// Name of the server for `server:` matchers and the audit log (default: the command's basename).
    #[arg(long)]
    pub server_name: Option<String>,
    /// Relay to the MCP server at this Streamable HTTP URL instead of running a command; each HTTP session opens its own upstream session. Headers and tokens come from --header-file and $MCPWALL_UPSTREAM_TOKEN, never from the command line.
    #[arg(long, value_name = "URL", conflicts_with = "command")]
    pub upstream: Option<String>,
    /// With --upstream: a file of `Name: value` lines sent with every upstream request.
    #[arg(long, value_name = "FILE", requires = "upstream")]
    pub header_file: Option<PathBuf>,
    /// With --upstream: trust only the CA certificates in this PEM file for https://.
    #[arg(long, value_name = "FILE", requires = "upstream")]
    pub ca_file: Option<PathBuf>,
    /// Serve HTTPS with this certificate chain (PEM; the server's certificate first).
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Accept client certificates issued by the CAs in this PEM file as identities: a certificate whose common name or an alternative name is an identity of `mcpwall token add NAME` stands for it. Every request then needs a valid certificate or bearer token.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub client_ca: Option<PathBuf>,
    /// The server command and its arguments, after `--`; each HTTP session runs its own.
    #[arg(last = true)]
    pub command: Vec<String>,
}

/// One server the listener fronts.
struct Front {
    /// `None`: at `/mcp` itself.
    mount: Option<Arc<str>>,
    backend: Backend,
    name: String,
    /// What pins are keyed by, with the name.
    identity_command: Vec<String>,
    /// The server's own policy (its `extends` layered on the global one); `None`: the
    /// global policy.
    policy: Option<Arc<config::Policy>>,
}

/// The server given on the command line (`-- CMD` or `--upstream URL`), at `/mcp`.
fn command_line_front(args: &Args) -> miette::Result<Front> {
    let (backend, default_name, identity_command) = match &args.upstream {
        Some(url) => {
            let token = std::env::var(crate::upstream::TOKEN_ENV)
                .ok()
                .filter(|t| !t.is_empty());
            if let Some(file) = &args.header_file {
                crate::cli::common::warn_if_others_may_read(file, "the header file");
            }
            let upstream = crate::upstream::Upstream::new(&crate::upstream::Settings {
                url: url.clone(),
                ca_file: args.ca_file.clone(),
                header_file: args.header_file.clone(),
                token,
                header_env: None,
            })
            .map_err(|e| miette::miette!("{e}"))?;
            let name = upstream.host().to_string();
            (
                Backend::Upstream(Arc::new(upstream)),
                name,
                vec![url.clone()],
            )
        }
        None => {
            let spec = crate::cli::common::server_command(
                &args.command,
                "mcpwall serve -- npx -y @modelcontextprotocol/server-everything",
            )?;
            let name = match &args.server_name {
                Some(name) => name.clone(),
                None => crate::cli::common::server_name(
                    &args.command,
                    &crate::cli::common::home_dir()?,
                )?,
            };
            (Backend::Command(spec), name, args.command.clone())
        }
    };
    Ok(Front {
        mount: None,
        backend,
        name: args.server_name.clone().unwrap_or(default_name),
        identity_command,
        policy: None,
    })
}

/// The policy's `servers:`, each at `/mcp/NAME` and named NAME for `server:` rules.
fn policy_fronts(args: &Args, policy: &config::Policy) -> miette::Result<Vec<Front>> {
    use crate::config::policy::ServerBackend;
    policy
        .servers
        .iter()
        .map(|def| {
            let name = def.name.value.clone();
            let (backend, identity_command) = match &def.backend {
                ServerBackend::Command { program, args, env } => (
                    Backend::Command(crate::io::child::ChildSpec {
                        program: program.into(),
                        args: args.iter().map(Into::into).collect(),
                        env: env.iter().map(|(k, v)| (k.into(), v.into())).collect(),
                        sandbox: None,
                    }),
                    std::iter::once(program.clone())
                        .chain(args.iter().cloned())
                        .collect(),
                ),
                // Only the entry's own credentials: those given for --upstream are for
                // that one server, and a secret must not reach a server it was not meant
                // for.
                ServerBackend::Url { url, auth } => (
                    Backend::Upstream(Arc::new(
                        crate::upstream::Upstream::new(&crate::upstream::Settings {
                            url: url.clone(),
                            ca_file: args.ca_file.clone(),
                            header_file: auth.header_file.clone(),
                            token: upstream_token(&name, auth)?,
                            header_env: None,
                        })
                        .map_err(|e| miette::miette!("server `{name}`: {e}"))?,
                    )),
                    vec![url.clone()],
                ),
            };
            Ok(Front {
                mount: Some(name.as_str().into()),
                backend,
                name,
                identity_command,
                policy: def.policy.clone(),
            })
        })
        .collect()
}

/// A `url` server's bearer token, from its `token_file` or `token_env` (with a warning
/// for a credential file others may read).
fn upstream_token(
    server: &str,
    auth: &crate::config::policy::UpstreamAuth,
) -> miette::Result<Option<String>> {
    if let Some(file) = &auth.header_file {
        crate::cli::common::warn_if_others_may_read(
            file,
            &format!("server `{server}`: the header file"),
        );
    }
    if let Some(file) = &auth.token_file {
        crate::cli::common::warn_if_others_may_read(
            file,
            &format!("server `{server}`: the token file"),
        );
        let text = std::fs::read_to_string(file).map_err(|e| {
            miette::miette!(
                help = "write the token alone in that file, readable by you only (chmod 600)",
                "server `{server}`: cannot read its token file {}: {e}",
                file.display()
            )
        })?;
        let token = text.trim();
        if token.is_empty() {
            return Err(miette::miette!(
                help = "write the token alone in that file",
                "server `{server}`: its token file {} is empty",
                file.display()
            ));
        }
        return Ok(Some(token.to_string()));
    }
    if let Some(var) = &auth.token_env {
        return match std::env::var(var) {
            Ok(token) if !token.trim().is_empty() => Ok(Some(token.trim().to_string())),
            _ => Err(miette::miette!(
                help = format!("set ${var} in mcpwall's environment, or remove `token_env`"),
                "server `{server}`: ${var} is not set"
            )),
        };
    }
    Ok(None)
}

pub fn run(args: Args) -> miette::Result<ExitCode> {
    let home = crate::cli::common::home_dir()?;
    let tokens_path = tokens::default_path(&home);
    // A token file that exists must be a usable store: read as "no tokens" it would let
    // any local client in and stop `identity:` rules from applying.
    let issued = Tokens::read(&tokens_path).map_err(|e| {
        miette::miette!(
            code = "mcpwall::serve::token_file",
            help = "`mcpwall serve` starts only once the token file is whole and yours alone, or gone (then no token is required on loopback)",
            "{e}"
        )
    })?;
    let tokens = issued.clone().unwrap_or_default();
    let loopback = args.listen.ip().is_loopback();
    if !loopback && !args.allow_remote {
        return Err(miette::miette!(
            help = "listen on 127.0.0.1 (the default), or pass --allow-remote with tokens issued by `mcpwall token add NAME`",
            "{} is not a loopback address",
            args.listen
        ));
    }
    if !loopback && tokens.is_empty() {
        return Err(miette::miette!(
            help = "issue one with `mcpwall token add NAME` and give it to the client as `Authorization: Bearer TOKEN`",
            "a non-loopback listener needs bearer tokens, and none exist"
        ));
    }
    if args.client_ca.is_some() && tokens.is_empty() {
        return Err(miette::miette!(
            help = "create the identity with `mcpwall token add NAME`, NAME being the certificate's common name or one of its alternative names",
            "client certificates stand for identities of the token file, and none exist"
        ));
    }
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(
            crate::http::tls::Tls::new(cert, key, args.client_ca.as_deref())
                .map_err(|e| miette::miette!("{e}"))?,
        ),
        _ => None,
    };
    let scheme = if tls.is_some() { "https" } else { "http" };
    let load_options = crate::cli::common::load_options(args.config.clone())?;
    let policy = config::load_without_pack_examples(&load_options).map_err(miette::Report::new)?;
    let settings = policy.settings.clone();
    let chatter = Chatter {
        level: args.log_level.unwrap_or(settings.log_level),
    };
    crate::cli::common::warn_ignored(&policy, &chatter);
    crate::cli::common::warn_shadowed(&policy, &load_options, &chatter);
    let fronts = if args.command.is_empty() && args.upstream.is_none() && !policy.servers.is_empty()
    {
        if args.server_name.is_some() {
            return Err(miette::miette!(
                help = "each server of `servers:` is named by its key; drop --server-name",
                "--server-name names the one server given on the command line"
            ));
        }
        policy_fronts(&args, &policy)?
    } else {
        vec![command_line_front(&args)?]
    };
    let listener_name = fronts
        .iter()
        .map(|f| f.name.as_str())
        .collect::<Vec<_>>()
        .join("+");
    // Clients without a token when none exist; otherwise one identity per token.
    let identities: Vec<Option<Arc<str>>> = if tokens.is_empty() {
        vec![None]
    } else {
        tokens.names().map(|n| Some(Arc::from(n))).collect()
    };
    let mut built = Vec::with_capacity(fronts.len());
    let mut programs = Programs::default();
    let mut names = PolicyNames::default();
    let mut sandbox_events = Vec::new();
    for mut front in fronts {
        // Every server a session starts runs in the sandbox of its own policy.
        if let Backend::Command(spec) = &mut front.backend {
            let own = front.policy.as_deref().unwrap_or(&policy);
            spec.sandbox = crate::cli::common::sandbox_plan(own, &load_options, &chatter)?;
            let mut event = crate::cli::common::sandbox_event(spec.sandbox.as_deref());
            event.server = Some(front.name.as_str().into());
            sandbox_events.push(event);
        }
        let judges = Judges::build(
            front.policy.as_deref().unwrap_or(&policy),
            &identities,
            &ServerIdentity {
                name: front.name.clone(),
                command: front.identity_command.clone(),
            },
            &home,
            &load_options.path_env(),
            &mut programs,
            &mut names,
        )
        .map_err(|e| match e {
            crate::http::identities::JudgeError::Compile(e) => miette::Report::new(e),
            other => miette::miette!("{other}"),
        })?;
        judges.any_program().detector();
        built.push((front, judges));
    }
    drop(programs);
    let audit = Audit::start(
        crate::cli::common::audit_config(&settings, &home, listener_name),
        Arc::new(names) as Arc<dyn Names>,
    );
    audit.sender().send(&mut sandbox_events);

    // One thread, as the stdio proxy: judging a message is short, and a current-thread
    // runtime needs no locks contended across CPUs.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
        .map_err(|e| miette::miette!("cannot start the async runtime: {e}"))?;
    let result = runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind(args.listen)
            .await
            .map_err(|e| miette::miette!("cannot listen on {}: {e}", args.listen))?;
        let local = listener
            .local_addr()
            .map_err(|e| miette::miette!("cannot read the listening address: {e}"))?;
        let require_token = !tokens.is_empty() || !loopback || args.client_ca.is_some();
        let tokens = Arc::new(LiveTokens::new(
            tokens_path,
            issued,
            !loopback || args.client_ca.is_some(),
        ));
        let sessions = Arc::new(crate::http::registry::Registry::new(settings.gateway));
        let refusals = Arc::new(crate::http::refusals::Refusals::default());
        let gateways: Vec<Arc<Gateway>> = built
            .into_iter()
            .map(|(front, judges)| {
                Arc::new(Gateway {
                    judges,
                    backend: front.backend,
                    server_name: front.name.as_str().into(),
                    mount: front.mount,
                    audit: audit.sender(),
                    chatter,
                    tokens: tokens.clone(),
                    refusals: refusals.clone(),
                    listen: local,
                    allowed_origins: args.allow_origins.clone(),
                    sessions: sessions.clone(),
                    home: Some(home.clone()),
                    stateless: Default::default(),
                })
            })
            .collect();
        let access = if args.client_ca.is_some() {
            "client certificate or bearer token required"
        } else if require_token {
            "bearer token required"
        } else {
            "no tokens issued: any local client may connect"
        };
        if let [gateway] = &gateways[..]
            && gateway.mount.is_none()
        {
            eprintln!(
                "mcpwall: serving {scheme}://{local}{} ({access})",
                server::ENDPOINT
            );
        } else {
            eprintln!("mcpwall: serving {} servers ({access}):", gateways.len());
            for g in &gateways {
                eprintln!(
                    "mcpwall:   {}  {scheme}://{local}{}  (legacy SSE: {})",
                    g.server_name,
                    g.path(server::ENDPOINT),
                    g.path(server::LEGACY_SSE)
                );
            }
        }
        server::serve(listener, gateways, tls, settings.gateway, shutdown_signal()).await;
        Ok::<_, miette::Report>(())
    });
    runtime.shutdown_timeout(Duration::from_secs(1));
    audit.finish(Duration::from_secs(2));
    result.map(|()| ExitCode::SUCCESS)
}

/// The first stop request mcpwall receives (SIGINT, SIGTERM or SIGHUP; Ctrl-C, Ctrl-Break
/// or console close on Windows).
async fn shutdown_signal() {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    if crate::platform::forward_stop_requests(tx).is_err() {
        return std::future::pending().await;
    }
    rx.recv().await;
}
