//! The validated, merged policy: stage two of three (`RawPolicy` → `Policy` → `Program`).
//!
//! Everything here has been checked (regexes parse, globs parse, variables expanded,
//! names unique) and still knows where it came from, so `explain-policy` and compile
//! errors can point back into the YAML. Nothing in this module does I/O.

use std::path::PathBuf;
use std::sync::Arc;

/// Index into [`Policy::sources`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SourceId(pub u32);

/// Where a policy file came from. Decides trust (ARCHITECTURE decision 7).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SourceKind {
    /// An embedded pack, e.g. `rules/default.yml`, `profiles/strict.yml`, `servers/filesystem-mcp.yaml`.
    Builtin,
    /// `~/.mcpwall/config.yml`.
    User,
    /// A project's `.mcpwall.yml` that the user has trusted with `mcpwall trust`.
    ProjectTrusted,
    /// A project's `.mcpwall.yml` not (or no longer) trusted: only tightening parts apply.
    ProjectUntrusted,
    /// A file given with `-c FILE`.
    Explicit,
}

/// One loaded policy file, kept whole so diagnostics can render snippets.
#[derive(Debug, Clone)]
pub struct Source {
    /// Display name: a path, or `builtin:rules/default.yml`.
    pub name: String,
    pub kind: SourceKind,
    pub text: Arc<str>,
}

/// A byte range in one source, plus the 1-based line and column of its start
/// (the column counts characters, as editors do, not bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    pub source: SourceId,
    pub offset: usize,
    pub len: usize,
    pub line: u32,
    pub column: u32,
}

/// A value and where it was written.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spanned<T> {
    pub value: T,
    pub span: Span,
}

/// The merged effective policy.
#[derive(Debug, Clone)]
pub struct Policy {
    pub sources: Vec<Source>,
    pub settings: Settings,
    /// Inbound rules in evaluation order (first match wins).
    pub rules: Vec<Rule>,
    /// Outbound rules in evaluation order (first terminal match wins; `log_only` goes on).
    pub outbound_rules: Vec<OutboundRule>,
    /// User-defined secret detectors from `secrets.patterns`, in file order.
    pub secret_patterns: Vec<SecretPattern>,
    /// Built-in detector names switched off with `secrets: {disable: [..]}`.
    pub disabled_secrets: Vec<Spanned<String>>,
    /// Parts of the sources that were loaded but not applied, and why.
    pub ignored: Vec<Ignored>,
    /// `exceptions:` of trusted files: narrow cases in which one built-in inbound rule
    /// does not apply, in file order.
    pub exceptions: Vec<Exception>,
    /// The named servers `mcpwall serve` fronts, each at `/mcp/NAME` (`servers:` of
    /// trusted files only: an entry runs a command).
    pub servers: Vec<ServerDef>,
    /// `sandbox:`: the OS sandbox every server mcpwall starts runs in (decision 14).
    pub sandbox: SandboxPolicy,
}

/// The merged `sandbox:` sections: what the kernel denies the servers mcpwall starts.
///
/// Paths are kept as written (`~/.ssh`, `${PROJECT_DIR}/.git/hooks`, `/etc/x`): they are
/// resolved against the home and the project when a server starts ([`crate::sandbox`]),
/// because whether there is a project at all is known only then.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SandboxPolicy {
    /// Servers start sandboxed. Off unless a file (the default pack) turns it on.
    pub enabled: bool,
    /// A server that cannot be sandboxed (no kernel support) is not started.
    pub required: bool,
    /// Writes only under the project, the temporary directory and the package caches.
    pub confine_writes: bool,
    pub network: SandboxNetwork,
    /// Paths the server may neither read nor write (contents hidden).
    pub deny_read: Vec<Spanned<String>>,
    /// Paths the server may read but not change, create, rename or delete.
    pub deny_write: Vec<Spanned<String>>,
    /// Protected paths a trusted file gives back to the server (reading).
    pub allow_read: Vec<Spanned<String>>,
    /// Protected paths a trusted file gives back to the server (writing; with
    /// `confine_writes`, also extra writable places).
    pub allow_write: Vec<Spanned<String>>,
}

/// What the sandboxed server may reach over the network. Declared loosest first, so a
/// larger value is stricter.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum SandboxNetwork {
    #[default]
    All,
    /// Only this machine (`localhost`).
    Loopback,
    /// No network at all.
    None,
}

impl SandboxNetwork {
    pub fn word(self) -> &'static str {
        match self {
            SandboxNetwork::All => "all",
            SandboxNetwork::Loopback => "loopback",
            SandboxNetwork::None => "none",
        }
    }
}

/// One entry of `servers:`.
#[derive(Debug, Clone)]
pub struct ServerDef {
    /// The key: the endpoint's last path segment, and the server name `server:` matches.
    pub name: Spanned<String>,
    pub backend: ServerBackend,
    /// `extends:` of the entry: packs that apply to this server only.
    pub extends: Vec<Spanned<String>>,
    /// The policy this server is judged by when `extends` is not empty: the global
    /// policy with the entry's packs layered on it (see `merge`). `None`: the global one.
    pub policy: Option<Arc<Policy>>,
}

impl ServerDef {
    /// The built-in packs `extends` names, as written.
    pub fn pack_names(&self) -> impl Iterator<Item = &str> {
        self.extends.iter().map(|e| e.value.as_str())
    }
}

#[derive(Clone, PartialEq)]
pub enum ServerBackend {
    /// A stdio server: each HTTP session runs its own, with `env` added to mcpwall's
    /// environment (values expanded when loaded; never logged).
    Command {
        program: String,
        args: Vec<String>,
        env: Vec<(String, String)>,
    },
    /// A Streamable HTTP server.
    Url { url: String, auth: UpstreamAuth },
}

/// The environment's names only: its values may be secrets.
impl std::fmt::Debug for ServerBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ServerBackend::Command { program, args, env } => f
                .debug_struct("Command")
                .field("program", program)
                .field("args", args)
                .field("env", &env.iter().map(|(k, _)| k).collect::<Vec<_>>())
                .finish(),
            ServerBackend::Url { url, auth } => f
                .debug_struct("Url")
                .field("url", url)
                .field("auth", auth)
                .finish(),
        }
    }
}

/// Where a `url` server's credentials come from: never the policy itself, which is
/// shared, committed and printed by `explain-policy`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct UpstreamAuth {
    /// `token_file`: a file holding the bearer token.
    pub token_file: Option<PathBuf>,
    /// `token_env`: the environment variable holding the bearer token.
    pub token_env: Option<String>,
    /// `header_file`: `Name: value` lines sent with every request (as `--header-file`).
    pub header_file: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Allow,
    Deny,
    /// Hold the call until a human approves it (through the client's elicitation UI,
    /// or `mcpwall approve`); refused when declined or not answered in time.
    Ask,
}

impl Action {
    /// How much a verdict protects: allow < ask < deny. An untrusted file may only
    /// move a setting up this order.
    pub fn strictness(self) -> u8 {
        match self {
            Action::Allow => 0,
            Action::Ask => 1,
            Action::Deny => 2,
        }
    }
}

/// `remember:` on an `ask` rule: how long an approval holds for identical calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Remember {
    /// For the rest of the session (the proxy run), for the same server, tool and
    /// canonical arguments only.
    Session,
}

pub use crate::verdict::RuleAction;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum LogLevel {
    Error,
    Warn,
    Info,
    Debug,
}

/// What the audit log may say about allowed arguments. Denied arguments are never written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogArgs {
    None,
    /// Allowed arguments are written, with secrets redacted.
    Full,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RedactMarker {
    /// `[REDACTED BY MCPWALL]`
    Plain,
    /// `[REDACTED BY MCPWALL: <detector-name>]`
    Typed,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimit {
    pub max_calls: u32,
    pub window_seconds: u64,
}

/// `settings.pinning`: what happens when a server's pinned definitions drift.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PinningMode {
    /// Changed or removed definitions are withheld and calls to them denied until
    /// `mcpwall pins approve`.
    #[default]
    Enforce,
    /// Drift is audited and reported, but the changed definitions are forwarded.
    /// Hazard: a server that changes a tool after approval (a rug pull) gets through.
    Warn,
    /// No pins are recorded or compared.
    Off,
}

/// `settings.poison_scan`: what happens to tool metadata that looks like prompt injection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PoisonScanMode {
    /// Poisoned tools, prompts, templates and instructions are withheld from the agent
    /// until approved with `mcpwall pins approve`.
    #[default]
    Enforce,
    /// Findings are audited, the text is forwarded. Hazard: the agent reads the injection.
    Warn,
    /// No scanning.
    Off,
}

/// What the circuit breaker does when it trips.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BreakerAction {
    /// Deny every further `tools/call` in the session.
    #[default]
    Suspend,
}

/// `settings.circuit_breaker`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CircuitBreakerSettings {
    /// Denials or blocked responses that trip the breaker...
    pub max_violations: u32,
    /// ...when they all fall within this many seconds.
    pub window_seconds: u64,
    pub action: BreakerAction,
}

/// `settings.log_retention`: how much of the audit log the proxy keeps. At start it
/// removes this mcpwall's oldest day files past either cap (today's file always stays)
/// and records each removal for `mcpwall log verify`. Only a trusted file sets it: an
/// untrusted project file could otherwise have the audit trail deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogRetention {
    /// Day files older than this many days are removed.
    pub max_days: u32,
    /// The oldest day files are removed while all of them together are larger.
    pub max_mb: u32,
}

impl Default for LogRetention {
    fn default() -> Self {
        LogRetention {
            max_days: 90,
            max_mb: 1024,
        }
    }
}

/// `settings.log_shipping`: a copy of the audit log, line by line as it is written, sent to
/// a collector the agent's user cannot rewrite (the local chain stays as it is). Only a
/// trusted file sets it: an untrusted project file could otherwise send the log to a host of
/// its choosing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogShipping {
    pub syslog: Option<SyslogSink>,
    pub otlp: Option<OtlpSink>,
}

/// `log_shipping.otlp`: OpenTelemetry logs over OTLP/HTTP with JSON encoding, one
/// `LogRecord` per audit line (its body the line as written), lines sent in batches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OtlpSink {
    /// The URL the batches are POSTed to (`…/v1/logs`; added when the URL has no path).
    pub endpoint: String,
    /// Headers sent with every batch, as written (never a credential: those come from
    /// `header_file`).
    pub headers: Vec<(String, String)>,
    /// `Name: value` lines read at start (an auth header): kept out of the policy file.
    pub header_file: Option<PathBuf>,
    /// https only: the CAs the collector's certificate is verified against (default: the
    /// public web roots).
    pub ca_file: Option<PathBuf>,
    /// The resource's `service.name`.
    pub service_name: String,
}

impl OtlpSink {
    /// The endpoint, as messages and the cursor's file name show it.
    pub fn address(&self) -> String {
        self.endpoint.clone()
    }
}

/// `log_shipping.syslog`: RFC 5424 messages over TCP or TLS (RFC 5425), octet-counted
/// (RFC 6587), one audit line per message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyslogSink {
    pub tls: bool,
    pub host: String,
    pub port: u16,
    /// TLS only: the CAs the collector's certificate is verified against (default: the
    /// public web roots).
    pub ca_file: Option<PathBuf>,
    /// TLS only: a client certificate and its key, for collectors that require one.
    pub client_cert: Option<PathBuf>,
    pub client_key: Option<PathBuf>,
    /// The syslog facility code (`local0` = 16).
    pub facility: u8,
    /// The message's APP-NAME.
    pub app_name: String,
}

impl SyslogSink {
    /// `tcp://HOST:PORT` or `tls://HOST:PORT`, as written in the policy.
    pub fn address(&self) -> String {
        let scheme = if self.tls { "tls" } else { "tcp" };
        if self.host.contains(':') {
            format!("{scheme}://[{}]:{}", self.host, self.port)
        } else {
            format!("{scheme}://{}:{}", self.host, self.port)
        }
    }
}

/// The facilities of RFC 5424 by name, with their codes.
pub const SYSLOG_FACILITIES: &[(&str, u8)] = &[
    ("kern", 0),
    ("user", 1),
    ("mail", 2),
    ("daemon", 3),
    ("auth", 4),
    ("syslog", 5),
    ("lpr", 6),
    ("news", 7),
    ("uucp", 8),
    ("cron", 9),
    ("authpriv", 10),
    ("ftp", 11),
    ("local0", 16),
    ("local1", 17),
    ("local2", 18),
    ("local3", 19),
    ("local4", 20),
    ("local5", 21),
    ("local6", 22),
    ("local7", 23),
];

/// `settings.backups`: which backups `wrap`, `unwrap` and `init` keep of each client file
/// they rewrite (in `~/.mcpwall/backups`). Only a trusted file sets it: an untrusted
/// project file could otherwise have the user's backups deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackupSettings {
    /// At most this many per file (the newest).
    pub keep: u32,
    /// None older than this many days (by the UTC time in the backup's name); the newest
    /// backup of a file is always kept.
    pub max_age_days: u32,
}

impl Default for BackupSettings {
    fn default() -> Self {
        BackupSettings {
            keep: 10,
            max_age_days: 30,
        }
    }
}

/// `settings.gateway`: how much of `mcpwall serve` one client may take. Only a trusted
/// file sets it (these bound the operator's machine, not the agent's reach).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GatewaySettings {
    /// Sessions open at once on a listener (every transport, every server); past it,
    /// `initialize` ends an idle session first, or gets 503.
    pub max_sessions: u32,
    /// Sessions one identity may hold at once (a token's name; without tokens every
    /// client is one identity and the share is `max_sessions`).
    pub sessions_per_identity: u32,
    /// A session without a request or a stream being read for this long is ended.
    pub session_idle_seconds: u32,
    /// Plain connections open at once (a WebSocket leaves the count once upgraded: it
    /// is a session).
    pub max_connections: u32,
    /// Connections open at once from one peer address.
    pub connections_per_peer: u32,
    /// A request's headers must arrive within this many seconds of the connection
    /// opening or of the previous answer (the keep-alive idle time).
    pub header_timeout_seconds: u32,
    /// Hold what goes to a client until the audit lines of everything before it are in
    /// the file: a gateway killed after answering then still leaves them (for
    /// `log_shipping`, or `log ship`, to send on). Costs a write per answer instead of one
    /// per 100 ms.
    pub audit_before_answer: bool,
}

impl Default for GatewaySettings {
    fn default() -> Self {
        GatewaySettings {
            max_sessions: 256,
            sessions_per_identity: 64,
            session_idle_seconds: 30 * 60,
            max_connections: 512,
            connections_per_peer: 256,
            header_timeout_seconds: 10,
            audit_before_answer: false,
        }
    }
}

/// `settings.oauth`: `mcpwall serve` accepts the identity provider's OAuth 2.1 access
/// tokens (signed JWTs) besides the token file's, as the MCP authorization specification
/// describes (`crate::http::oauth`). Only a trusted file sets it: a repository could
/// otherwise name an identity provider of its own choosing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OAuthSettings {
    /// The provider's issuer identifier: a token's `iss` must equal it.
    pub issuer: String,
    /// This gateway's resource URL (RFC 8707): a token's `aud` must name it, and the
    /// protected-resource metadata is served for it.
    pub resource: String,
    /// Where the provider publishes its signing keys (a JWK set): https, or http on loopback.
    /// `None`: found through OpenID Connect discovery, the `jwks_uri` of
    /// `<issuer>/.well-known/openid-configuration`.
    pub jwks_url: Option<String>,
    /// The CAs the provider's certificate is verified against, for the key set and the
    /// discovery document (default: the public web roots).
    pub jwks_ca_file: Option<PathBuf>,
    /// The signature algorithms accepted (asymmetric only; never `none` or HS*).
    pub algorithms: Vec<String>,
    /// The claim naming the identity (default `sub`).
    pub identity_claim: String,
    /// The claim listing the identity's groups (`identity: "group:NAME"` in rules).
    pub groups_claim: Option<String>,
    /// Scopes every token must hold (403 `insufficient_scope` otherwise).
    pub required_scopes: Vec<String>,
    /// Clock skew allowed on `exp`, `nbf` and `iat`, in seconds (at most 300).
    pub leeway_seconds: u32,
    /// The key set is fetched again once it is this old.
    pub jwks_max_age_seconds: u32,
    /// At most one fetch of the key set per this many seconds (an unknown `kid`, a failed fetch).
    pub jwks_min_refresh_seconds: u32,
    /// A fetch of the key set that takes longer fails (at most 60).
    pub fetch_timeout_seconds: u32,
    /// Longest token accepted, in bytes (at most 65536).
    pub max_token_bytes: u32,
}

/// Defaults and bounds of `settings.oauth`.
pub mod oauth_limits {
    pub const LEEWAY_SECONDS: u32 = 30;
    pub const MAX_LEEWAY_SECONDS: u32 = 300;
    pub const JWKS_MAX_AGE_SECONDS: u32 = 3600;
    pub const JWKS_MIN_REFRESH_SECONDS: u32 = 30;
    pub const FETCH_TIMEOUT_SECONDS: u32 = 5;
    pub const MAX_FETCH_TIMEOUT_SECONDS: u32 = 60;
    pub const MAX_TOKEN_BYTES: u32 = 8192;
    pub const MAX_MAX_TOKEN_BYTES: u32 = 65536;
    /// The algorithms `algorithms:` may name.
    pub const ALGORITHMS: &[&str] = &[
        "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "EdDSA",
    ];
}

/// `settings.shared_state`: the state the replicas of one `mcpwall serve` gateway share
/// (per-identity rate-limit windows, circuit-breaker suspensions, token revocations), in
/// Redis. Only a trusted file sets it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharedStateSettings {
    /// `redis://[user:password@]host[:port][/db]`. May hold a password: shown only without it.
    pub redis: String,
    /// The gateway's name: every key starts with `mcpwall:<name>:`, so gateways sharing
    /// one Redis count apart. Every replica of one gateway uses the same name.
    pub name: String,
    /// What a replica does while Redis is unreachable.
    pub on_loss: OnLoss,
    /// Bound on connecting to, writing to and reading from Redis, per call.
    pub timeout_ms: u32,
    /// How long a suspension by the circuit breaker lasts on every replica.
    pub suspension_seconds: u64,
    /// How long a token revocation is kept after the token was last presented.
    pub revocation_days: u32,
}

impl Default for SharedStateSettings {
    fn default() -> Self {
        SharedStateSettings {
            redis: String::new(),
            name: String::new(),
            on_loss: OnLoss::FailClosed,
            timeout_ms: 250,
            suspension_seconds: 24 * 3600,
            revocation_days: 30,
        }
    }
}

/// `settings.shared_state.on_loss`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnLoss {
    /// Calls that need the shared state (rate-limited or breaker-guarded calls, requests
    /// with a token) are refused until Redis answers again. The default.
    FailClosed,
    /// Hazard: each replica counts on its own while Redis is away, so N replicas admit up
    /// to N times the rate limit, a breaker tripped on one replica does not hold on the
    /// others, and a token revoked elsewhere meanwhile is honoured here. Said on stderr
    /// when it happens.
    LocalOnly,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// Audit log directory, already expanded. `None` → `~/.mcpwall/logs`.
    pub log_dir: Option<PathBuf>,
    pub log_level: LogLevel,
    pub log_args: LogArgs,
    pub default_action: Action,
    pub rate_limit: Option<RateLimit>,
    pub max_frame_bytes: usize,
    pub redact_marker: RedactMarker,
    /// Remove tools the policy denies unconditionally from `tools/list` results.
    pub hide_denied_tools: bool,
    pub pinning: PinningMode,
    pub poison_scan: PoisonScanMode,
    /// `None`: no breaker.
    pub circuit_breaker: Option<CircuitBreakerSettings>,
    /// Backups of rewritten client files.
    pub backups: BackupSettings,
    /// How much of the audit log is kept.
    pub log_retention: LogRetention,
    /// How long a call an `ask` rule holds waits for the human's answer before it is
    /// refused (fail closed).
    pub ask_timeout_seconds: u64,
    /// `mcpwall serve`'s shares and limits.
    pub gateway: GatewaySettings,
    /// `mcpwall serve`'s identity provider, if any.
    pub oauth: Option<OAuthSettings>,
    /// `None`: each `mcpwall serve` process keeps its state in its own memory.
    pub shared_state: Option<SharedStateSettings>,
    /// Where a copy of the audit log goes (`None`: nowhere).
    pub log_shipping: Option<LogShipping>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            log_dir: None,
            log_level: LogLevel::Warn,
            log_args: LogArgs::None,
            default_action: Action::Allow,
            rate_limit: None,
            max_frame_bytes: 64 * 1024 * 1024,
            redact_marker: RedactMarker::Plain,
            hide_denied_tools: true,
            pinning: PinningMode::Enforce,
            poison_scan: PoisonScanMode::Enforce,
            circuit_breaker: None,
            backups: BackupSettings::default(),
            log_retention: LogRetention::default(),
            ask_timeout_seconds: 120,
            gateway: GatewaySettings::default(),
            oauth: None,
            shared_state: None,
            log_shipping: None,
        }
    }
}

impl Policy {
    /// Whether any inbound rule names an identity.
    pub fn has_identity_rules(&self) -> bool {
        self.rules.iter().any(|r| r.identity.is_some())
    }

    /// The policy as it applies to a client of `identity` (`None`: no identity, as on
    /// stdio and in `check`): rules whose `identity` glob does not match it are left
    /// out, and those that match keep their place in the order without the condition.
    /// Leaving a rule out is what an unmet condition does under first-match-wins, so
    /// one compiled program per identity judges exactly as an identity predicate would,
    /// at no cost per message.
    pub fn for_identity(&self, identity: Option<&str>) -> Policy {
        self.for_member(identity, &[])
    }

    /// [`Self::for_identity`] for an identity that belongs to `groups` (an identity
    /// provider's token): a rule's `identity: "group:GLOB"` applies when one of them
    /// matches GLOB.
    pub fn for_member(&self, identity: Option<&str>, groups: &[Arc<str>]) -> Policy {
        // Exceptions name no identity (refused when loaded): they follow their rule.
        let mut policy = self.clone();
        policy
            .rules
            .retain(|rule| applies_to(rule, identity, groups));
        for rule in &mut policy.rules {
            rule.identity = None;
        }
        policy
    }

    /// For each rule of [`Self::for_identity`]`(identity)`, its index in `self.rules`.
    pub fn identity_rule_indices(&self, identity: Option<&str>) -> Vec<u32> {
        self.member_rule_indices(identity, &[])
    }

    /// [`Self::identity_rule_indices`] for an identity that belongs to `groups`.
    pub fn member_rule_indices(&self, identity: Option<&str>, groups: &[Arc<str>]) -> Vec<u32> {
        (0..self.rules.len() as u32)
            .filter(|&i| applies_to(&self.rules[i as usize], identity, groups))
            .collect()
    }
}

/// What an `identity:` glob written `group:GLOB` matches: a group, never a name.
pub const GROUP_PREFIX: &str = "group:";

fn applies_to(rule: &Rule, identity: Option<&str>, groups: &[Arc<str>]) -> bool {
    let Some(glob) = &rule.identity else {
        return true;
    };
    // Groups only come with an identity; a client without one belongs to none.
    identity.is_some_and(|id| match glob.value.strip_prefix(GROUP_PREFIX) {
        Some(group) => groups.iter().any(|g| identity_matches(group, g)),
        None => identity_matches(&glob.value, id),
    })
}

/// Whether an `identity:` glob (validated when loaded) matches a name.
pub fn identity_matches(glob: &str, identity: &str) -> bool {
    globset::Glob::new(glob).is_ok_and(|g| g.compile_matcher().is_match(identity))
}

/// An inbound rule. All conditions must hold; the first rule that matches decides.
#[derive(Debug, Clone)]
pub struct Rule {
    pub name: Spanned<String>,
    pub description: Option<String>,
    /// Why the rule exists (documentation, shown by `explain-policy`).
    pub why: Option<String>,
    /// Glob over the JSON-RPC method. Defaults to `tools/call` when the YAML names none.
    pub method: Spanned<String>,
    /// Glob over the tool name (`params.name` of `tools/call`).
    pub tool: Option<Spanned<String>>,
    /// Glob over the client's identity (the bearer token's name, `mcpwall serve`). A
    /// rule with one applies only to clients whose identity matches it, never on stdio or
    /// in `check`, where there is no identity ([`Policy::for_identity`]).
    pub identity: Option<Spanned<String>>,
    pub arguments: Vec<ArgCondition>,
    pub action: Action,
    /// `remember: session` (only with `action: ask`).
    pub remember: Option<Remember>,
    pub message: Option<String>,
    pub examples: Examples,
    /// The whole rule's span (its `- name:` entry).
    pub span: Span,
}

/// One `ARG_NAME: {matcher}` entry. A YAML matcher mapping with several keys
/// (e.g. `{regex: .., not_under: ..}`) becomes several conditions on the same selector.
#[derive(Debug, Clone)]
pub struct ArgCondition {
    pub selector: ArgSelector,
    pub matcher: Matcher,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArgSelector {
    /// The value of this top-level argument (every scalar inside it, if it is an array or object).
    Named(String),
    /// `_any_value`: every key and every scalar at every depth of the arguments.
    AnyValue,
}

#[derive(Debug, Clone)]
pub enum Matcher {
    /// A regex (Rust syntax), validated to compile.
    Regex(Spanned<String>),
    /// A glob, validated to compile.
    Pattern(Spanned<String>),
    /// Holds when a path-shaped value is NOT under this root. The root is already
    /// expanded (`~`, `${HOME}`, `${PROJECT_DIR}`) and absolute (a relative root is joined
    /// to the project directory), but not yet normalised. A list
    /// `not_under: [a, b]` becomes one condition per root, all of which must hold.
    NotUnder {
        root: PathBuf,
        written: Spanned<String>,
    },
    /// Holds when any secret detector finds a secret in the value.
    Secrets,
    /// Holds when the value, parsed as a shell command line, runs a command that meets
    /// any of these clauses (see `program/engine/command.rs`).
    Command(Spanned<Vec<CommandClause>>),
}

/// One clause of a `command` matcher: every condition it names must hold for one
/// simple command of the command line.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommandClause {
    /// Globs over the command name (its basename, or the written name for a glob with
    /// a `/`), after wrappers such as `sudo`, `env`, `xargs`.
    pub names: Vec<String>,
    /// A name the parser cannot resolve (`$(echo rm)`, `$SHELL`) meets this clause.
    pub unknown_name: bool,
    /// Any of these flags, in any spelling (`-r` in `-rf`, `--recursive`, `--recur`).
    pub flags: Vec<String>,
    /// Any of these sequences of leading operands (`pins approve`).
    pub subcommands: Vec<Vec<String>>,
    /// Path operands (and `key=PATH` values) matched as file tools match paths.
    pub paths: Option<CommandPaths>,
    /// Globs over redirection targets (`/dev/tcp/**`, `/dev/sd*`), written and normalised.
    pub redirects: Vec<String>,
    /// Globs over any operand as written (after quote removal).
    pub words: Vec<String>,
    /// What the command must read: `downloaded`, `decoded` (either is enough).
    pub input: u8,
    /// A download ran earlier in the same command line.
    pub after_download: bool,
    /// The command runs over the paths `find` lists (`find -exec`, `find | xargs`).
    pub over_find: bool,
}

/// `paths:` of a command clause. A path operand meets it when it matches a pattern and
/// is not under `not_under`, or when it is (or would expand to everything in) one of
/// `ancestors_of` or a directory above it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommandPaths {
    pub patterns: Vec<String>,
    pub not_under: Vec<std::path::PathBuf>,
    pub ancestors_of: Vec<std::path::PathBuf>,
    /// `not_under` and `ancestors_of` as written (`${PROJECT_DIR}`, `~/.cache`), entry for
    /// entry, so that a session can move the project to the client's roots
    /// ([`Policy::for_project`]).
    pub not_under_written: Vec<String>,
    pub ancestors_of_written: Vec<String>,
}

/// `examples: {match: [...], no_match: [...]}` on a built-in rule. Inbound examples are
/// objects `{method?, tool, arguments}`; outbound examples are response texts (strings)
/// or objects `{tool?, server?, text}`.
#[derive(Debug, Clone, Default)]
pub struct Examples {
    pub should_match: Vec<serde_json::Value>,
    pub should_not_match: Vec<serde_json::Value>,
}

/// An outbound rule, judged on every server message.
#[derive(Debug, Clone)]
pub struct OutboundRule {
    pub name: Spanned<String>,
    pub description: Option<String>,
    /// Why the rule exists (documentation, shown by `explain-policy`).
    pub why: Option<String>,
    /// Glob over the method of the request this message answers (or of the message itself
    /// for server requests and notifications). `None` matches every message.
    pub method: Option<Spanned<String>>,
    /// Glob over the tool of the `tools/call` this message answers.
    pub tool: Option<Spanned<String>>,
    /// Glob over the server name (`--server-name` or the command's basename).
    pub server: Option<Spanned<String>>,
    pub secrets: bool,
    /// Case-insensitive literals, any of which matching satisfies the condition.
    pub response_contains: Vec<Spanned<String>>,
    /// Regexes, any of which matching satisfies the condition.
    pub response_contains_regex: Vec<Spanned<String>>,
    /// Holds when the message's raw size exceeds this many bytes.
    pub response_size_exceeds: Option<u64>,
    pub action: RuleAction,
    /// From an untrusted file: applies in addition to whatever the trusted rules decided
    /// (a deny still refuses, a redaction adds to theirs), never instead of them.
    pub additive: bool,
    pub message: Option<String>,
    pub examples: Examples,
    pub span: Span,
}

/// A user-defined secret detector (`secrets.patterns`).
#[derive(Debug, Clone)]
pub struct SecretPattern {
    pub name: Spanned<String>,
    pub regex: Spanned<String>,
    pub entropy_threshold: Option<f64>,
}

/// One entry of `exceptions: {RULE: [..]}`: a case in which the built-in inbound rule
/// `RULE` does not apply. Only that rule is lifted, only for messages the entry's
/// conditions match: every other rule still judges them, in its place.
#[derive(Debug, Clone)]
pub struct Exception {
    /// The pack rule it narrows (validated against the packs its file extends).
    pub rule: Spanned<String>,
    /// Its conditions, held as a rule: `name` is `RULE#N` (N counts this rule's exceptions
    /// from 1, in file order), `action` is meaningless, and `method` defaults to `*` (the
    /// excepted rule already says which methods it judges).
    pub conditions: Rule,
}

/// A part of a source that was loaded but does not apply.
#[derive(Debug, Clone)]
pub struct Ignored {
    pub span: Span,
    /// What was ignored, e.g. `allow rule "allow-everything"`.
    pub what: String,
    /// Why, e.g. `project file is not trusted (run \`mcpwall trust\`)`.
    pub why: String,
}

impl Policy {
    /// The file a span points into.
    pub fn source(&self, id: SourceId) -> &Source {
        &self.sources[id.0 as usize]
    }

    /// `file:line:column` of a span, for messages, audit and `explain-policy`.
    pub fn location(&self, span: Span) -> String {
        format!(
            "{}:{}:{}",
            self.source(span.source).name,
            span.line,
            span.column
        )
    }
}

/// A `command` matcher in one line, for `explain-policy` and `check`.
pub fn describe_clauses(clauses: &[CommandClause]) -> String {
    let mut parts = Vec::new();
    for c in clauses {
        let mut p = Vec::new();
        if !c.names.is_empty() {
            p.push(format!("name {}", c.names.join("|")));
        }
        if c.unknown_name {
            p.push("unknown_name".to_string());
        }
        if !c.flags.is_empty() {
            p.push(format!("flags {}", c.flags.join("|")));
        }
        if !c.subcommands.is_empty() {
            let subs: Vec<String> = c.subcommands.iter().map(|s| s.join(" ")).collect();
            p.push(format!("subcommand {}", subs.join("|")));
        }
        if let Some(paths) = &c.paths {
            let mut q = Vec::new();
            if !paths.patterns.is_empty() {
                q.push(format!("pattern {}", paths.patterns.join("|")));
            }
            for r in &paths.not_under {
                q.push(format!("not_under {}", r.display()));
            }
            for r in &paths.ancestors_of {
                q.push(format!("ancestors_of {}", r.display()));
            }
            p.push(format!("paths ({})", q.join(", ")));
        }
        if !c.redirects.is_empty() {
            p.push(format!("redirect {}", c.redirects.join("|")));
        }
        if !c.words.is_empty() {
            p.push(format!("words {}", c.words.join("|")));
        }
        if c.input & crate::shell::DOWNLOADED != 0 {
            p.push("input downloaded".to_string());
        }
        if c.input & crate::shell::DECODED != 0 {
            p.push("input decoded".to_string());
        }
        if c.after_download {
            p.push("after_download".to_string());
        }
        if c.over_find {
            p.push("over_find".to_string());
        }
        parts.push(format!("{{{}}}", p.join(", ")));
    }
    parts.join(" or ")
}
