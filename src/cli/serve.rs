//! `mcpwall serve [--listen ADDR] -- CMD [ARGS...]`: the policy in front of a stdio
//! server, for clients that speak Streamable HTTP (see `crate::http`). Without a command
//! or `--upstream`, the policy's `servers:` are served, each at `/mcp/NAME`.
//!
//! The policy and the token file are reloaded without a restart when they change or on
//! SIGHUP (`crate::http::reload`; the building is in `serve/reload.rs`).

mod reload;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use crate::audit::Names;
use crate::config;
use crate::guard::pins::ServerIdentity;
use crate::http::conversation::Backend;
use crate::http::identities::{LiveJudges, PolicyNames};
use crate::http::metrics::Metrics;
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
    /// Serve Prometheus metrics at http://ADDR/metrics (a listener of its own; loopback unless --allow-remote). Every scrape needs the bearer token of a --metrics-reader identity.
    #[arg(long, value_name = "ADDR", requires = "metrics_readers")]
    pub metrics_listen: Option<SocketAddr>,
    /// An identity (`mcpwall token add NAME`) whose token may read /metrics; repeatable. Give it to the scraper only: agents' tokens are refused there.
    #[arg(
        long = "metrics-reader",
        value_name = "NAME",
        requires = "metrics_listen"
    )]
    pub metrics_readers: Vec<String>,
    /// This replica's name behind a load balancer: its session ids start with `NAME.`, so the balancer sends each session's requests back to it (docs/fleet.md). Replicas share limits and revocations through `settings.shared_state`.
    #[arg(long, value_name = "NAME")]
    pub replica: Option<String>,
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
                referenced_headers: None,
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
                            referenced_headers: None,
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
    let load_options = crate::cli::common::load_options(args.config.clone())?;
    // The files as they are before they are read: a change made from here on is seen by
    // the first look of the reload thread.
    let watched = reload::watched(&load_options, &home, &tokens_path);
    let seen = crate::http::reload::fingerprint(&watched);
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
    let policy = config::load_without_pack_examples(&load_options).map_err(miette::Report::new)?;
    let oauth = oauth_of(
        &policy,
        Chatter {
            level: args.log_level.unwrap_or(policy.settings.log_level),
        },
    )?;
    if !loopback && tokens.is_empty() && oauth.is_none() {
        return Err(miette::miette!(
            help = "issue one with `mcpwall token add NAME` and give it to the client as `Authorization: Bearer TOKEN`",
            "a non-loopback listener needs bearer tokens, and none exist"
        ));
    }
    if let Some(addr) = args.metrics_listen {
        if !addr.ip().is_loopback() && !args.allow_remote {
            return Err(miette::miette!(
                help = "serve metrics on 127.0.0.1 (e.g. --metrics-listen 127.0.0.1:9808), or pass --allow-remote",
                "--metrics-listen {addr} is not a loopback address"
            ));
        }
        for reader in &args.metrics_readers {
            if !tokens.names().any(|n| n == reader) {
                return Err(miette::miette!(
                    help = format!(
                        "issue its token with `mcpwall token add {reader}` and give it to the scraper (Prometheus: `authorization: {{credentials_file: …}}`)"
                    ),
                    "--metrics-reader {reader} names no identity of the token file"
                ));
            }
        }
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
    let settings = policy.settings.clone();
    let chatter = Chatter {
        level: args.log_level.unwrap_or(settings.log_level),
    };
    crate::cli::common::warn_ignored(&policy, &chatter);
    crate::cli::common::warn_shadowed(&policy, &load_options, &chatter);
    let mut fronts =
        if args.command.is_empty() && args.upstream.is_none() && !policy.servers.is_empty() {
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
    let identities = reload::identities_of(&tokens);
    let servers_mode =
        args.command.is_empty() && args.upstream.is_none() && !policy.servers.is_empty();
    let mut sandbox_events = Vec::new();
    for front in &mut fronts {
        // Every server a session starts runs in the sandbox of its own policy.
        if let Backend::Command(spec) = &mut front.backend {
            let own = front.policy.as_deref().unwrap_or(&policy);
            spec.sandbox = crate::cli::common::sandbox_plan(own, &load_options, &chatter)?;
            let mut event = crate::cli::common::sandbox_event(spec.sandbox.as_deref());
            event.server = Some(front.name.as_str().into());
            sandbox_events.push(event);
        }
    }
    if let Some(name) = &args.replica {
        tokens::set_replica(name).map_err(|e| miette::miette!("{e}"))?;
    }
    let shared = open_shared_state(&settings)?;
    // Calls held here for `mcpwall approve` are offered to every replica's machine.
    let _shared_approvals = match &shared {
        Some((state, _)) => Some(
            crate::http::shared_approvals::start(
                state.clone(),
                home.clone(),
                args.replica.clone(),
                chatter,
            )
            .map_err(|e| {
                miette::miette!("cannot start offering held calls to the replicas: {e}")
            })?,
        ),
        None => None,
    };
    let names = Arc::new(PolicyNames::default());
    let policy = Arc::new(policy);
    let mut builder = reload::Builder {
        fronts: fronts
            .iter()
            .map(|f| reload::FrontJudged {
                name: f.name.clone(),
                identity: ServerIdentity {
                    name: f.name.clone(),
                    command: f.identity_command.clone(),
                },
                runs_command: matches!(f.backend, Backend::Command(_)),
            })
            .collect(),
        load_options,
        home: home.clone(),
        tokens_path: tokens_path.clone(),
        servers_mode,
        names: names.clone(),
        chatter,
        hash: reload::policy_hash(&policy),
        policy: policy.clone(),
        identities: identities.clone(),
        federate: oauth.is_some(),
        shared: shared.clone(),
    };
    let judges = builder
        .judges(&policy, &identities, None)
        .map_err(|e| match e {
            crate::http::identities::JudgeError::Compile(e) => miette::Report::new(e),
            other => miette::miette!("{other}"),
        })?;
    for j in &judges {
        j.any_program().detector();
    }
    let metrics = Arc::new(Metrics::new(names.clone(), builder.hash.clone()));
    for j in &judges {
        metrics.register(j);
    }
    let audit = crate::cli::common::start_audit(
        &settings,
        crate::cli::common::audit_config(&settings, &home, listener_name),
        names as Arc<dyn Names>,
    )?;
    audit.sender().send(&mut sandbox_events);
    let (reloads, asks) = crate::http::reload::Trigger::new();
    // The builder's own view of what is in force starts from here.
    builder.identities = identities;

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
        let always = !loopback || args.client_ca.is_some() || oauth.is_some();
        let require_token = !tokens.is_empty() || always;
        let tokens = Arc::new(LiveTokens::new(tokens_path, issued, always));
        if let (Some((state, _)), Some(s)) = (&shared, &settings.shared_state) {
            let days = std::time::Duration::from_secs(u64::from(s.revocation_days) * 86_400);
            tokens.share(state.clone(), days);
        }
        let sessions = Arc::new(crate::http::registry::Registry::new(settings.gateway));
        let refusals = Arc::new(crate::http::refusals::Refusals::default());
        let gateways: Vec<Arc<Gateway>> = fronts
            .into_iter()
            .zip(judges)
            .map(|(front, judges)| {
                Arc::new(Gateway {
                    judges: Arc::new(LiveJudges::new(judges)),
                    metrics: metrics.clone(),
                    reloads: reloads.clone(),
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
                    oauth: oauth.clone(),
                })
            })
            .collect();
        let access = if oauth.is_some() {
            "the identity provider's access token or a bearer token required"
        } else if args.client_ca.is_some() {
            "client certificate or bearer token required"
        } else if require_token {
            "bearer token required"
        } else {
            "no tokens issued: any local client may connect"
        };
        let metrics_listener = match args.metrics_listen {
            Some(addr) => {
                let l = tokio::net::TcpListener::bind(addr)
                    .await
                    .map_err(|e| miette::miette!("cannot listen on {addr} for metrics: {e}"))?;
                let at = l
                    .local_addr()
                    .map_err(|e| miette::miette!("cannot read the metrics address: {e}"))?;
                Some((l, at))
            }
            None => None,
        };
        let reload_thread =
            crate::http::reload::start(gateways.clone(), metrics.clone(), asks, builder, seen)
                .map_err(|e| miette::miette!("cannot start the reload thread: {e}"))?;
        // Signals are taken before the listener is announced: a SIGHUP sent as soon as
        // the address is printed reloads rather than stops.
        let stop = stop_requests(reloads.clone());
        let (stopped_tx, stopped_rx) = tokio::sync::watch::channel(false);
        announce(&gateways, scheme, local, access);
        if let Some((l, at)) = metrics_listener {
            eprintln!(
                "mcpwall: metrics at http://{at}{} (bearer token of {} required)",
                crate::http::scrape::PATH,
                args.metrics_readers.join(", ")
            );
            let scrape = crate::http::scrape::Scrape {
                metrics: metrics.clone(),
                gateways: gateways.clone(),
                readers: args.metrics_readers.clone(),
                listen: at,
            };
            let mut stopped = stopped_rx.clone();
            tokio::spawn(crate::http::scrape::serve(l, scrape, async move {
                let _ = stopped.wait_for(|s| *s).await;
            }));
        }
        server::serve(listener, gateways, tls, settings.gateway, stop).await;
        let _ = stopped_tx.send(true);
        drop(reloads);
        drop(reload_thread);
        Ok::<_, miette::Report>(())
    });
    runtime.shutdown_timeout(Duration::from_secs(1));
    audit.finish(Duration::from_secs(2));
    result.map(|()| ExitCode::SUCCESS)
}

/// The identity provider of `settings.oauth`, if set.
fn oauth_of(
    policy: &config::Policy,
    chatter: Chatter,
) -> miette::Result<Option<Arc<crate::http::oauth::OAuth>>> {
    let Some(settings) = &policy.settings.oauth else {
        return Ok(None);
    };
    #[cfg(feature = "tls")]
    {
        crate::http::oauth::OAuth::new(settings, chatter)
            .map(|o| Some(Arc::new(o)))
            .map_err(|e| miette::miette!(code = "mcpwall::serve::oauth", "{e}"))
    }
    #[cfg(not(feature = "tls"))]
    {
        let _ = (settings, chatter);
        Err(miette::miette!(
            code = "mcpwall::serve::oauth",
            help = "use a build with the `tls` feature (the default), or remove settings.oauth",
            "settings.oauth needs the `tls` feature, which this mcpwall was built without"
        ))
    }
}

/// Say where each server is served.
fn announce(gateways: &[Arc<Gateway>], scheme: &str, local: SocketAddr, access: &str) {
    if let [gateway] = gateways
        && gateway.mount.is_none()
    {
        eprintln!(
            "mcpwall: serving {scheme}://{local}{} ({access})",
            server::ENDPOINT
        );
    } else {
        eprintln!("mcpwall: serving {} servers ({access}):", gateways.len());
        for g in gateways {
            eprintln!(
                "mcpwall:   {}  {scheme}://{local}{}  (legacy SSE: {})",
                g.server_name,
                g.path(server::ENDPOINT),
                g.path(server::LEGACY_SSE)
            );
        }
    }
}

/// The first stop request mcpwall receives (SIGINT or SIGTERM; Ctrl-C, Ctrl-Break or
/// console close on Windows). SIGHUP asks for a reload instead (`reloads`). The handlers
/// are installed before this returns.
fn stop_requests(reloads: crate::http::reload::Trigger) -> impl std::future::Future<Output = ()> {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let installed = crate::platform::forward_stop_requests(tx).is_ok();
    async move {
        if !installed {
            return std::future::pending().await;
        }
        while let Some(signal) = rx.recv().await {
            // On Windows the console closing arrives as SIGHUP: a stop.
            if cfg!(unix) && signal == crate::platform::SIGHUP {
                reloads.signal();
                continue;
            }
            return;
        }
    }
}

/// The replicas' shared state of `settings.shared_state`, and how long a suspension lasts
/// in it; `None` without the setting. Redis is asked once here so the start-up line says
/// whether it answers; one that does not is treated as lost (fail closed, or local state
/// with `on_loss: local_only`), not as a reason not to start, so replicas can start before
/// their Redis.
#[allow(clippy::type_complexity)]
fn open_shared_state(
    settings: &crate::config::policy::Settings,
) -> miette::Result<
    Option<(
        Arc<dyn crate::shared_state::SharedState>,
        std::time::Duration,
    )>,
> {
    let Some(s) = &settings.shared_state else {
        return Ok(None);
    };
    let store = crate::shared_state::redis::Redis::new(s).map_err(|e| {
        miette::miette!(
            code = "mcpwall::serve::shared_state",
            help = "fix `settings.shared_state.redis`",
            "{e}"
        )
    })?;
    if store.ping().is_ok() {
        eprintln!(
            "mcpwall: shared state at {} (gateway {:?}): rate limits, circuit breakers and \
             token revocations are shared with every replica",
            store.shown(),
            s.name
        );
    }
    let suspension = std::time::Duration::from_secs(s.suspension_seconds);
    Ok(Some((Arc::new(store), suspension)))
}
