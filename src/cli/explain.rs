//! `mcpwall explain-policy`: the merged effective policy, where each part came from, and
//! what looks wrong with it.
//!
//! The text format lists sources, settings, every inbound and outbound rule in evaluation
//! order (with file and line, conditions, action, message and documentation), the secret
//! detectors, what was ignored and why, and warnings: rules that can never match and rules
//! an earlier rule shadows. `--format yaml` prints one self-contained policy (no `extends`,
//! every rule inlined in order, every setting explicit) that loads back to the same program.
//!
//! Everything is computed from the [`Policy`]; the [`Program`] is compiled only to prove the
//! policy compiles and to list the secret detectors exactly as the engine has them.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use serde::Serialize;
use serde::ser::SerializeMap;

use crate::config::policy::{
    Action, ArgSelector, BackupSettings, BreakerAction, Examples, GatewaySettings, LogArgs,
    LogLevel, LogRetention, Matcher, OutboundRule, PinningMode, PoisonScanMode, Policy,
    RedactMarker, Rule, RuleAction, Settings, SourceKind, Span,
};
use crate::config::{self, LoadOptions};
use crate::mcp::REQUEST_METHODS;
use crate::program::{JUDGED_METHODS, Program};

/// What a `servers:` entry is judged by, for `explain-policy`: its packs and the rules
/// they add to the policy's.
fn server_judged_by(policy: &config::Policy, server: &config::policy::ServerDef) -> String {
    let Some(own) = &server.policy else {
        return "judged by: the policy above".to_string();
    };
    let inbound: std::collections::HashSet<&str> =
        policy.rules.iter().map(|r| r.name.value.as_str()).collect();
    let outbound: std::collections::HashSet<&str> = policy
        .outbound_rules
        .iter()
        .map(|r| r.name.value.as_str())
        .collect();
    let added_in = own
        .rules
        .iter()
        .filter(|r| !inbound.contains(r.name.value.as_str()))
        .count();
    let added_out = own
        .outbound_rules
        .iter()
        .filter(|r| !outbound.contains(r.name.value.as_str()))
        .count();
    let packs: Vec<&str> = server.pack_names().collect();
    let mut text = format!(
        "judged by: the policy above + packs {} ({added_in} inbound and {added_out} outbound rules added)",
        packs.join(", ")
    );
    let changed = changed_settings(&policy.settings, &own.settings);
    if !changed.is_empty() {
        text.push_str(&format!(
            "\n    settings the packs set: {}",
            changed.join(", ")
        ));
    }
    text
}

/// The `sandbox:` section as merged: switches, then each list with where its entries
/// come from.
fn sandbox_lines(policy: &Policy) -> Vec<String> {
    let sb = &policy.sandbox;
    if !sb.enabled {
        return vec!["off: servers run with the user's full authority (`sandbox: off`)".into()];
    }
    let yes_no = |b: bool| if b { "yes" } else { "no" };
    let mut out = vec![
        format!(
            "on  required: {}  confine_writes: {}  network: {}",
            yes_no(sb.required),
            yes_no(sb.confine_writes),
            sb.network.word()
        ),
        "always hidden: ~/.mcpwall (mcpwall's state), a log_dir and -c file elsewhere, the MCP \
         clients' user configuration files; always read-only: their project files"
            .into(),
    ];
    for (what, list) in [
        ("deny_read (hidden)", &sb.deny_read),
        ("deny_write (read-only)", &sb.deny_write),
        ("allow_read (given back)", &sb.allow_read),
        ("allow_write (given back)", &sb.allow_write),
    ] {
        if list.is_empty() {
            continue;
        }
        let mut by_source: Vec<(String, Vec<&str>)> = Vec::new();
        for entry in list {
            let source = policy.source(entry.span.source).name.clone();
            match by_source.iter_mut().find(|(s, _)| *s == source) {
                Some((_, paths)) => paths.push(&entry.value),
                None => by_source.push((source, vec![&entry.value])),
            }
        }
        for (source, paths) in by_source {
            out.push(format!("{what} from {source}: {}", paths.join(", ")));
        }
    }
    out
}

/// The settings `own` sets differently from `global`, as `key: value`.
fn changed_settings(
    global: &config::policy::Settings,
    own: &config::policy::Settings,
) -> Vec<String> {
    let mut changed = Vec::new();
    macro_rules! compare {
        ($($field:ident),*) => {$(
            if global.$field != own.$field {
                changed.push(format!("{}: {:?}", stringify!($field), own.$field));
            }
        )*};
    }
    compare!(
        default_action,
        rate_limit,
        max_frame_bytes,
        redact_marker,
        hide_denied_tools,
        pinning,
        poison_scan,
        circuit_breaker,
        ask_timeout_seconds,
        log_dir,
        log_level,
        log_args,
        backups,
        log_retention
    );
    changed
}

/// Arguments of `mcpwall explain-policy`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Use exactly this policy file (plus what it extends). Without it: the project's
    /// `.mcpwall.yml` and `~/.mcpwall/config.yml`, or the built-in default pack.
    #[arg(
        short = 'c',
        long = "config",
        value_name = "FILE",
        conflicts_with = "pack"
    )]
    pub config: Option<PathBuf>,
    /// Explain a built-in pack by the name `extends` uses (`default`, `strict`,
    /// `profiles/local-dev`, `servers/github-mcp`, ...).
    #[arg(long, value_name = "NAME")]
    pub pack: Option<String>,
    /// `text` for people; `yaml` for one self-contained policy that loads back the same.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

/// Output format of `explain-policy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Text,
    Yaml,
}

pub fn run(args: Args) -> miette::Result<ExitCode> {
    let opts = crate::cli::common::load_options(args.config.clone())?;
    let policy = match &args.pack {
        Some(name) => load_pack(name, &opts)?,
        None => config::load(&opts)?,
    };
    let env = opts.path_env();
    let program = Program::compile_with(&policy, &env)?;
    let text = match args.format {
        Format::Text => {
            let mut order = crate::compile::shadow::shadowed_builtin_denies(&policy, &env)
                .iter()
                .map(crate::compile::shadow::Shadow::message)
                .collect::<Vec<_>>();
            order.extend(partial_overlaps(&policy, &env));
            let mut text = render_text(&policy, &program, &order);
            if args.pack.is_none() {
                text.push_str(&resolved_sandboxes(&policy, &opts));
                text.push_str(&original_differences(&policy));
            }
            text
        }
        Format::Yaml => render_yaml(&policy)?,
    };
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(ExitCode::SUCCESS),
        Err(e) => Err(miette::miette!("cannot write the policy: {e}")),
    }
}

/// The sandbox as a server started here would get it, resolved against this home and
/// project, with what this machine's kernel can enforce; one per `servers:` entry with
/// packs of its own.
fn resolved_sandboxes(policy: &Policy, opts: &LoadOptions) -> String {
    use crate::sandbox::{Place, Plan, Support};
    let support = Support::probe();
    let place = Place::for_server(
        &opts.home,
        &opts.project_dir,
        policy.settings.log_dir.as_deref(),
        opts.explicit.as_deref(),
    );
    let mut o = String::new();
    let project = match place.projects.first() {
        Some(p) => p.display().to_string(),
        None => "none (the working directory is / or the home directory)".into(),
    };
    let _ = writeln!(
        o,
        "\nSandbox of a server started here (project: {project}):"
    );
    let _ = writeln!(
        o,
        "  the rules' project becomes the client's roots when the client declares them; \
         this sandbox keeps the project it started with (it can only narrow)"
    );
    let _ = writeln!(o, "  kernel: {}", support.summary());
    let show = |o: &mut String, plan: Option<Plan>| match plan {
        None => {
            let _ = writeln!(o, "  off");
        }
        Some(plan) => {
            for line in plan.describe(&opts.home) {
                let _ = writeln!(o, "  {line}");
            }
            for gap in support.shortfalls(&plan) {
                let _ = writeln!(o, "  ! not enforced here: {gap}");
            }
        }
    };
    show(&mut o, Plan::resolve(&policy.sandbox, &place));
    for server in &policy.servers {
        if let Some(own) = &server.policy
            && own.sandbox != policy.sandbox
        {
            let _ = writeln!(o, "  server `{}` (its own packs):", server.name.value);
            show(&mut o, Plan::resolve(&own.sandbox, &place));
        }
    }
    o
}

/// Load a built-in pack as a one-line policy that extends it, so the pack keeps its
/// built-in source kind and pulls in what it extends itself.
pub fn load_pack(name: &str, opts: &LoadOptions) -> miette::Result<Policy> {
    if config::resolve_extends(name).is_none() {
        return Err(miette::miette!(
            help = format!("built-in packs: {}", config::extends_names().join(", ")),
            "no built-in pack is called {name:?}"
        ));
    }
    let text = format!("version: 1\nextends: [{name}]\n");
    Ok(config::load_str(&format!("(--pack {name})"), &text, opts)?)
}

// ---------------------------------------------------------------------------------------
// Text

/// The whole text report.
pub fn render_text(policy: &Policy, program: &Program, order_warnings: &[String]) -> String {
    let mut o = String::new();
    let w = &mut o;
    let _ = writeln!(w, "mcpwall effective policy\n");

    let _ = writeln!(w, "Sources (in precedence order):");
    for (i, s) in policy.sources.iter().enumerate() {
        let (kind, trusted) = match s.kind {
            SourceKind::Builtin => ("built-in pack", "trusted"),
            SourceKind::User => ("user file", "trusted"),
            SourceKind::ProjectTrusted => ("project file", "trusted"),
            SourceKind::ProjectUntrusted => {
                ("project file", "NOT trusted: only tightening parts apply")
            }
            SourceKind::Explicit => ("given with -c", "trusted"),
        };
        let _ = writeln!(w, "  {}. {}  ({kind}, {trusted})", i + 1, s.name);
    }

    // The first screen: what needs attention (warnings first), what was ignored and why,
    // and how the layers were put in order; the full listing follows.
    let mut all_warnings: Vec<String> = order_warnings.to_vec();
    all_warnings.extend(warnings(policy));
    let _ = writeln!(w, "\nWarnings ({}):", all_warnings.len());
    for warning in &all_warnings {
        let _ = writeln!(w, "  ! {warning}");
    }

    let _ = writeln!(w, "\nIgnored ({}):", policy.ignored.len());
    for ig in &policy.ignored {
        let _ = writeln!(w, "  - {}  ({})", ig.what, location(policy, ig.span));
        let _ = writeln!(w, "    why: {}", ig.why);
    }

    if !policy.servers.is_empty() {
        let _ = writeln!(
            w,
            "\nServers of `mcpwall serve` ({}; without a command on its command line):",
            policy.servers.len()
        );
        for server in &policy.servers {
            let name = &server.name.value;
            let reached = match &server.backend {
                config::policy::ServerBackend::Command { program, args, .. } => {
                    std::iter::once(program.as_str())
                        .chain(args.iter().map(String::as_str))
                        .collect::<Vec<_>>()
                        .join(" ")
                }
                config::policy::ServerBackend::Url { url, .. } => url.clone(),
            };
            let _ = writeln!(
                w,
                "  {name}  /mcp/{name} (legacy SSE: /sse/{name})  -> {reached}  ({})",
                location(policy, server.name.span)
            );
            let _ = writeln!(w, "    {}", server_judged_by(policy, server));
            match &server.backend {
                // Names only: the values may be secrets.
                config::policy::ServerBackend::Command { env, .. } if !env.is_empty() => {
                    let names: Vec<&str> = env.iter().map(|(n, _)| n.as_str()).collect();
                    let _ = writeln!(w, "    env: {}", names.join(", "));
                }
                config::policy::ServerBackend::Url { auth, .. } => {
                    if let Some(file) = &auth.token_file {
                        let _ = writeln!(w, "    token: from the file {}", file.display());
                    }
                    if let Some(var) = &auth.token_env {
                        let _ = writeln!(w, "    token: from ${var}");
                    }
                    if let Some(file) = &auth.header_file {
                        let _ = writeln!(w, "    headers: from the file {}", file.display());
                    }
                }
                _ => {}
            }
        }
    }

    let _ = writeln!(w, "\nOrder:");
    for line in layering_lines(policy) {
        let _ = writeln!(w, "  {line}");
    }

    let _ = writeln!(w, "\nSettings:");
    for (key, value) in settings_lines(&policy.settings) {
        let _ = writeln!(w, "  {key:<16} {value}");
    }

    let _ = writeln!(w, "\nSandbox (the kernel's part; docs/threat-model.md):");
    for line in sandbox_lines(policy) {
        let _ = writeln!(w, "  {line}");
    }

    let _ = writeln!(
        w,
        "\nInbound rules ({}, first match wins):",
        policy.rules.len()
    );
    for (i, rule) in policy.rules.iter().enumerate() {
        write_inbound_rule(w, policy, i, rule);
    }
    let _ = writeln!(
        w,
        "  then: no rule matched -> default_action {} for {} (named `mcpwall:default_action` in verdicts and the audit log); protocol messages (initialize, ping, */list, notifications) are allowed",
        action_word(policy.settings.default_action),
        JUDGED_METHODS.join(", ")
    );

    let _ = writeln!(
        w,
        "\nOutbound rules ({}, first allow/deny/redact wins; log_only records and goes on):",
        policy.outbound_rules.len()
    );
    for (i, rule) in policy.outbound_rules.iter().enumerate() {
        write_outbound_rule(w, policy, i, rule);
    }
    let _ = writeln!(w, "  then: no rule matched -> the message passes unchanged");

    let specs = program.detector().specs();
    let builtin: Vec<&str> = specs
        .iter()
        .filter(|s| s.origin == "builtin")
        .map(|s| s.name.as_str())
        .collect();
    let _ = writeln!(
        w,
        "\nSecret detectors ({}: {} built-in, {} from the policy):",
        specs.len(),
        builtin.len(),
        specs.len() - builtin.len()
    );
    for line in wrap_list(&builtin, 88) {
        let _ = writeln!(w, "  {line}");
    }
    for spec in specs.iter().filter(|s| s.origin != "builtin") {
        let origin = policy
            .secret_patterns
            .iter()
            .find(|p| p.name.value == spec.name)
            .map(|p| location(policy, p.name.span))
            .unwrap_or_else(|| spec.origin.clone());
        let entropy = spec
            .entropy_threshold
            .map(|t| format!("  (entropy >= {t})"))
            .unwrap_or_default();
        let replaces = if crate::secrets::builtin_specs()
            .iter()
            .any(|b| b.name == spec.name)
        {
            "  overrides built-in"
        } else {
            ""
        };
        let _ = writeln!(w, "  {}  {origin}{entropy}{replaces}", spec.name);
    }
    for d in &policy.disabled_secrets {
        let variants: Vec<String> = crate::secrets::builtin_specs()
            .into_iter()
            .filter(|b| b.name != d.value && crate::secrets::lifts(&d.value, &b.name))
            .map(|b| b.name)
            .collect();
        let with = match variants.is_empty() {
            true => String::new(),
            false => format!(", with {}", variants.join(", ")),
        };
        let _ = writeln!(
            w,
            "  disabled: {}{with}  ({})",
            d.value,
            location(policy, d.span)
        );
    }

    o
}

/// The differences from the original mcpwall, for a policy that includes a file of the
/// user's (it may have been written for the original, which reads the same paths); empty
/// for built-in packs alone.
fn original_differences(policy: &Policy) -> String {
    let mut o = String::new();
    if policy.sources.iter().all(|s| s.kind == SourceKind::Builtin) {
        return o;
    }
    let _ = writeln!(
        o,
        "\nDifferences from the original mcpwall (Node) ({}):",
        ORIGINAL_DIFFERENCES.len()
    );
    for (what, why) in ORIGINAL_DIFFERENCES {
        let _ = writeln!(o, "  - {what}");
        let _ = writeln!(o, "    why: {why}");
    }
    o
}

/// What a configuration written for the original mcpwall does differently here, each with
/// its reason in one line (issue 27). Its files, rule fields, secret pattern names (a
/// pattern with a built-in's name replaces it, as there), CLI forms and outbound actions
/// behave as its documentation says; these are the exceptions.
pub const ORIGINAL_DIFFERENCES: &[(&str, &str)] = &[
    (
        "lines that are not JSON-RPC are refused in both directions, with or without --strict",
        "a line mcpwall could not judge could carry anything, and forwarding it would bypass every rule",
    ),
    (
        "a project's .mcpwall.yml can only tighten until `mcpwall trust` records it: its allow rules, loosening settings and replacements of built-in detectors are ignored and listed",
        "a cloned repository is not yours to trust, and its file could otherwise allow reading your keys",
    ),
    (
        "resources/read, prompts/get and completion/complete are judged like tools/call (default_action included), and every other request by the rules that name its method",
        "they reach files and data just as tools do",
    ),
    (
        "every server message is judged: errors, notifications and server requests as well as results",
        "a secret or an injected instruction can travel in any of them",
    ),
    (
        "path-shaped values are also matched as the server opens them: ~user expanded, symlinks before `..` followed, a NUL ending the path (and refused)",
        "a lexical path.resolve() can be walked out of with a symlink and misses what a C server opens",
    ),
    (
        "response_contains and response_contains_regex also see the text with invisible characters removed and look-alike letters folded",
        "a zero-width or variation-selector character must not split a phrase the rule names",
    ),
    (
        "over 100 built-in secret detectors run beside your patterns (`secrets.disable` lifts one)",
        "a token format that no pattern of yours names would otherwise leak",
    ),
];

/// How the rules were put in order: a line per rule (source and action), or, for long
/// lists, runs of consecutive rules from the same file with the same action.
fn layering_lines(policy: &Policy) -> Vec<String> {
    let mut out = vec![
        "extended packs' deny rules come before the file's own rules, their allow rules after; `disable: [name]` lifts one; `exceptions: {name: [{match: ..}]}` lifts one for the cases it names only"
            .to_string(),
    ];
    if policy
        .sources
        .iter()
        .any(|s| s.kind == SourceKind::ProjectUntrusted)
    {
        out.push(
            "the untrusted project file only adds protection: its deny rules apply, its outbound deny/redact rules come after every trusted outbound rule"
                .to_string(),
        );
    }
    let runs = |items: Vec<(String, &'static str)>| -> Vec<String> {
        let mut runs: Vec<(String, &'static str, usize, usize)> = Vec::new();
        for (i, (src, act)) in items.into_iter().enumerate() {
            match runs.last_mut() {
                Some(last) if last.0 == src && last.1 == act => last.3 = i + 1,
                _ => runs.push((src, act, i + 1, i + 1)),
            }
        }
        runs.into_iter()
            .map(|(src, act, a, b)| {
                if a == b {
                    format!("{a:>3}      {act:<8} {src}")
                } else {
                    format!("{a:>3}-{b:<3}  {act:<8} {src}")
                }
            })
            .collect()
    };
    let name = |span: Span| policy.source(span.source).name.clone();
    out.push("inbound:".to_string());
    out.extend(
        runs(
            policy
                .rules
                .iter()
                .map(|r| (name(r.span), action_word(r.action)))
                .collect(),
        )
        .into_iter()
        .map(|l| format!("  {l}")),
    );
    out.push("outbound:".to_string());
    out.extend(
        runs(
            policy
                .outbound_rules
                .iter()
                .map(|r| (name(r.span), outbound_action_word(r.action)))
                .collect(),
        )
        .into_iter()
        .map(|l| format!("  {l}")),
    );
    out
}

/// Comma-separated names, wrapped before `width` columns.
fn wrap_list(names: &[&str], width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for (i, name) in names.iter().enumerate() {
        let item = if i + 1 < names.len() {
            format!("{name},")
        } else {
            name.to_string()
        };
        if !line.is_empty() && line.len() + 1 + item.len() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(&item);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

fn settings_lines(s: &Settings) -> Vec<(&'static str, String)> {
    let mut lines = vec![
        (
            "default_action",
            format!(
                "{}  (judges {})",
                action_word(s.default_action),
                JUDGED_METHODS.join(", ")
            ),
        ),
        ("log_level", log_level_word(s.log_level).to_string()),
        ("log_args", log_args_word(s.log_args).to_string()),
        (
            "log_dir",
            s.log_dir
                .as_ref()
                .map(|d| d.display().to_string())
                .unwrap_or_else(|| "~/.mcpwall/logs  (default)".to_string()),
        ),
        ("max_frame_bytes", s.max_frame_bytes.to_string()),
        (
            "redact_marker",
            redact_marker_word(s.redact_marker).to_string(),
        ),
        (
            "rate_limit",
            s.rate_limit
                .map(|r| format!("{} calls per {} s", r.max_calls, r.window_seconds))
                .unwrap_or_else(|| "none".to_string()),
        ),
        (
            "circuit_breaker",
            s.circuit_breaker
                .map(|b| {
                    format!(
                        "{} violations per {} s, then suspend",
                        b.max_violations, b.window_seconds
                    )
                })
                .unwrap_or_else(|| "none".to_string()),
        ),
    ];
    // Only when set: the listing of a policy without it does not change.
    if let Some(shared) = &s.shared_state {
        lines.push((
            "shared_state",
            format!(
                "{} (gateway {}), on loss: {}",
                crate::shared_state::redis::shown(&shared.redis),
                shared.name,
                match shared.on_loss {
                    crate::config::policy::OnLoss::FailClosed => "fail_closed",
                    crate::config::policy::OnLoss::LocalOnly => "local_only",
                }
            ),
        ));
    }
    lines
}

fn write_inbound_rule(w: &mut String, policy: &Policy, i: usize, rule: &Rule) {
    let _ = writeln!(
        w,
        "\n  {}. {}  [{}]  {}",
        i + 1,
        rule.name.value,
        action_word(rule.action),
        location(policy, rule.span)
    );
    let _ = writeln!(w, "       method       {}", rule.method.value);
    let _ = writeln!(
        w,
        "       tool         {}",
        rule.tool.as_ref().map_or("(any)", |t| t.value.as_str())
    );
    if let Some(identity) = &rule.identity {
        let _ = writeln!(
            w,
            "       identity     {}   [only for `mcpwall serve` clients with a matching token]",
            identity.value
        );
    }
    for cond in &rule.arguments {
        let selector = selector_name(&cond.selector);
        let (kind, value, engine) = matcher_parts(&cond.matcher);
        let _ = writeln!(w, "       {selector:<12} {kind} {value}   [{engine}]");
    }
    for e in policy
        .exceptions
        .iter()
        .filter(|e| e.rule.value == rule.name.value)
    {
        let c = &e.conditions;
        let _ = writeln!(
            w,
            "       except       {}  {}: this rule does not apply when all of these hold",
            c.name.value,
            location(policy, c.span)
        );
        let _ = writeln!(w, "         method     {}", c.method.value);
        if let Some(tool) = &c.tool {
            let _ = writeln!(w, "         tool       {}", tool.value);
        }
        for cond in &c.arguments {
            let selector = selector_name(&cond.selector);
            let (kind, value, engine) = matcher_parts(&cond.matcher);
            let _ = writeln!(w, "         {selector:<10} {kind} {value}   [{engine}]");
        }
        if let Some(why) = &c.why {
            let _ = writeln!(w, "         why: {why}");
        }
    }
    write_docs(
        w,
        rule.message.as_deref(),
        rule.description.as_deref(),
        rule.why.as_deref(),
        &rule.examples,
    );
}

fn write_outbound_rule(w: &mut String, policy: &Policy, i: usize, rule: &OutboundRule) {
    let _ = writeln!(
        w,
        "\n  {}. {}  [{}]  {}",
        i + 1,
        rule.name.value,
        outbound_action_word(rule.action),
        location(policy, rule.span)
    );
    for (key, value) in [
        ("method", &rule.method),
        ("tool", &rule.tool),
        ("server", &rule.server),
    ] {
        if let Some(v) = value {
            let _ = writeln!(w, "       {key:<12} {}", v.value);
        }
    }
    if rule.secrets {
        let _ = writeln!(w, "       secrets      true   [secret detectors]");
    }
    for s in &rule.response_contains {
        let _ = writeln!(
            w,
            "       contains     {:?}   [literal automaton, any case]",
            s.value
        );
    }
    for s in &rule.response_contains_regex {
        let _ = writeln!(w, "       contains     regex {}   [regex set]", s.value);
    }
    if let Some(n) = rule.response_size_exceeds {
        let _ = writeln!(w, "       size         > {n} bytes");
    }
    write_docs(
        w,
        rule.message.as_deref(),
        rule.description.as_deref(),
        rule.why.as_deref(),
        &rule.examples,
    );
}

fn write_docs(
    w: &mut String,
    message: Option<&str>,
    description: Option<&str>,
    why: Option<&str>,
    ex: &Examples,
) {
    if let Some(m) = message {
        let _ = writeln!(w, "       message:     {m}");
    }
    if let Some(d) = description {
        let _ = writeln!(w, "       description: {d}");
    }
    if let Some(y) = why {
        let _ = writeln!(w, "       why:         {y}");
    }
    if !ex.should_match.is_empty() || !ex.should_not_match.is_empty() {
        let _ = writeln!(
            w,
            "       examples:    {} match, {} no_match",
            ex.should_match.len(),
            ex.should_not_match.len()
        );
        for (tag, list) in [
            ("match   ", &ex.should_match),
            ("no_match", &ex.should_not_match),
        ] {
            for e in list {
                let _ = writeln!(w, "         {tag}  {e}");
            }
        }
    }
}

fn selector_name(s: &ArgSelector) -> &str {
    match s {
        ArgSelector::Named(n) => n,
        ArgSelector::AnyValue => "_any_value",
    }
}

/// `(matcher kind, value as written, engine it compiles into)`.
fn matcher_parts(m: &Matcher) -> (&'static str, String, &'static str) {
    match m {
        Matcher::Regex(r) => ("regex", r.value.clone(), "regex set"),
        Matcher::Pattern(p) => ("pattern", p.value.clone(), "glob set"),
        Matcher::NotUnder { root, written } => {
            let root = root.display().to_string();
            let value = if root == written.value {
                root
            } else {
                format!("{} (= {root})", written.value)
            };
            ("not_under", value, "path containment")
        }
        Matcher::Secrets => ("secrets", "true".to_string(), "secret detectors"),
        Matcher::Command(c) => (
            "command",
            crate::config::policy::describe_clauses(&c.value),
            "shell command parser",
        ),
    }
}

fn location(policy: &Policy, span: Span) -> String {
    super::check::source_line(policy, span)
}

fn action_word(a: Action) -> &'static str {
    match a {
        Action::Allow => "allow",
        Action::Deny => "deny",
        Action::Ask => "ask",
    }
}

fn outbound_action_word(a: RuleAction) -> &'static str {
    match a {
        RuleAction::Allow => "allow",
        RuleAction::Deny => "deny",
        RuleAction::Ask => "ask",
        RuleAction::Redact => "redact",
        RuleAction::LogOnly => "log_only",
    }
}

fn log_level_word(l: LogLevel) -> &'static str {
    match l {
        LogLevel::Error => "error",
        LogLevel::Warn => "warn",
        LogLevel::Info => "info",
        LogLevel::Debug => "debug",
    }
}

fn log_args_word(l: LogArgs) -> &'static str {
    match l {
        LogArgs::None => "none",
        LogArgs::Full => "full",
    }
}

fn redact_marker_word(r: RedactMarker) -> &'static str {
    match r {
        RedactMarker::Plain => "plain",
        RedactMarker::Typed => "typed",
    }
}

// ---------------------------------------------------------------------------------------
// Warnings

/// The partial overlaps ([`crate::compile::shadow::overlaps`]) that the full-shadowing
/// warnings of [`warnings`] do not already name.
fn partial_overlaps(policy: &Policy, env: &crate::paths::PathEnv) -> Vec<String> {
    use crate::compile::shadow::Side;
    crate::compile::shadow::overlaps(policy, env)
        .into_iter()
        .filter(|o| match o.side {
            Side::Inbound => !inbound_covers(&policy.rules[o.earlier], &policy.rules[o.later]),
            Side::Outbound => !outbound_covers(
                &policy.outbound_rules[o.earlier],
                &policy.outbound_rules[o.later],
            ),
        })
        .map(|o| o.message().to_string())
        .collect()
}

/// Every finding about rules that can never match or never decide, in rule order.
pub fn warnings(policy: &Policy) -> Vec<String> {
    let mut out = Vec::new();
    let name_at = |name: &str, span: Span| format!("rule {name:?} ({})", location(policy, span));

    for (j, rule) in policy.rules.iter().enumerate() {
        let me = name_at(&rule.name.value, rule.span);
        for why in never_matches(
            &rule.method.value,
            rule.tool.as_ref().map(|t| t.value.as_str()),
        ) {
            out.push(format!("{me} can never match: {why}"));
        }
        if let Some(hint) = unknown_method(&rule.method.value) {
            out.push(format!("{me}: {hint}"));
        }
        for cond in &rule.arguments {
            if let Matcher::Regex(r) = &cond.matcher
                && let Some(problem) = regex_problem(&r.value)
            {
                out.push(format!(
                    "{me}: the regex on {} {problem}",
                    selector_name(&cond.selector)
                ));
            }
        }
        if let Some(why) = contradiction(rule) {
            out.push(format!("{me} can never match: {why}"));
        }
        if let Some(i) = (0..j).find(|&i| inbound_covers(&policy.rules[i], rule)) {
            let earlier = &policy.rules[i];
            let other = name_at(&earlier.name.value, earlier.span);
            if earlier.action == rule.action {
                out.push(format!(
                    "{me} is redundant: the earlier {other} matches everything it matches and also {} it",
                    match rule.action {
                        Action::Allow => "allows",
                        Action::Deny => "denies",
                        Action::Ask => "asks about",
                    }
                ));
            } else {
                out.push(format!(
                    "{me} is shadowed and can never decide: the earlier {other} matches everything it matches and {} it first",
                    match earlier.action {
                        Action::Allow => "allows",
                        Action::Deny => "denies",
                        Action::Ask => "asks about",
                    }
                ));
            }
        }
    }

    for (j, rule) in policy.outbound_rules.iter().enumerate() {
        let me = name_at(&rule.name.value, rule.span);
        if let (Some(m), Some(t)) = (&rule.method, &rule.tool) {
            for why in never_matches(&m.value, Some(&t.value)) {
                out.push(format!("{me} can never match: {why}"));
            }
        }
        if let Some(hint) = rule.method.as_ref().and_then(|m| unknown_method(&m.value)) {
            out.push(format!("{me}: {hint}"));
        }
        for r in &rule.response_contains_regex {
            if let Some(problem) = regex_problem(&r.value) {
                out.push(format!("{me}: the response_contains_regex {problem}"));
            }
        }
        let earlier = (0..j).find(|&i| {
            let a = &policy.outbound_rules[i];
            a.action != RuleAction::LogOnly && outbound_covers(a, rule)
        });
        if let Some(i) = earlier {
            let a = &policy.outbound_rules[i];
            let other = name_at(&a.name.value, a.span);
            if a.action == rule.action {
                out.push(format!(
                    "{me} is redundant: the earlier {other} matches every message it matches and also decides {}",
                    outbound_action_word(rule.action)
                ));
            } else {
                out.push(format!(
                    "{me} is shadowed and can never apply: the earlier {other} matches every message it matches and decides {} first",
                    outbound_action_word(a.action)
                ));
            }
        }
    }

    for p in &policy.secret_patterns {
        if let Some(problem) = regex_problem(&p.regex.value) {
            out.push(format!(
                "secret pattern {:?} ({}) {problem}",
                p.name.value,
                location(policy, p.name.span)
            ));
        }
    }
    out
}

/// Reasons a method/tool pair can never occur together.
fn never_matches(method: &str, tool: Option<&str>) -> Vec<String> {
    let mut why = Vec::new();
    if method.chars().any(|c| c.is_whitespace() || c.is_control()) {
        why.push(format!(
            "method {method:?} contains whitespace, and a method with whitespace is refused as malformed before any rule runs"
        ));
    }
    if let Some(tool) = tool
        && !glob_matches(method, "tools/call")
    {
        why.push(format!(
            "it names tool {tool:?}, but only tools/call carries a tool and method {method:?} excludes tools/call"
        ));
    }
    why
}

/// A hint when a literal method is not an MCP method.
fn unknown_method(method: &str) -> Option<String> {
    if !is_literal(method)
        || REQUEST_METHODS.contains(&method)
        || method.starts_with("notifications/")
    {
        return None;
    }
    let closest = REQUEST_METHODS
        .iter()
        .map(|m| (strsim::levenshtein(m, method), *m))
        .min()
        .filter(|(d, _)| *d <= 3)
        .map(|(_, m)| format!(" (did you mean {m:?}?)"))
        .unwrap_or_default();
    Some(format!(
        "method {method:?} is not an MCP method, so it matches only a server's custom method{closest}"
    ))
}

/// A regex that can never match, or that matches the empty string only (and so every value).
fn regex_problem(pattern: &str) -> Option<&'static str> {
    let hir = regex_syntax::parse(pattern).ok()?;
    let props = hir.properties();
    match (props.minimum_len(), props.maximum_len()) {
        (None, _) => Some("can never match anything, so the rule can never match"),
        (_, Some(0)) => Some("can only match the empty string, so it holds for every value"),
        _ => None,
    }
}

/// A `not_under` root and a regex or pattern on the same argument that rule each other out:
/// the regex or glob only accepts paths under the root that `not_under` requires to be left.
fn contradiction(rule: &Rule) -> Option<String> {
    for a in &rule.arguments {
        let Matcher::NotUnder { root, written } = &a.matcher else {
            continue;
        };
        let ArgSelector::Named(arg) = &a.selector else {
            continue;
        };
        let root = root.to_string_lossy();
        let root = root.trim_end_matches('/');
        for b in rule.arguments.iter().filter(|b| b.selector == a.selector) {
            let prefix = match &b.matcher {
                Matcher::Regex(r) => regex_literal_prefix(&r.value),
                Matcher::Pattern(p) => Some(glob_literal_prefix(&p.value)),
                _ => None,
            };
            let Some(prefix) = prefix else { continue };
            // Only the directory part of the prefix is certain.
            let dir = match prefix.rfind('/') {
                Some(i) if i > 0 => &prefix[..i],
                _ => continue,
            };
            if dir.starts_with('/') && crate::paths::is_under(dir, root) {
                return Some(format!(
                    "every value of {arg:?} it accepts starts with {dir:?}, which is under {:?}, but not_under requires a path outside it",
                    written.value
                ));
            }
        }
    }
    None
}

/// The literal text an anchored regex must start with (`^/home/u/` → `/home/u/`).
fn regex_literal_prefix(pattern: &str) -> Option<String> {
    let rest = pattern.strip_prefix('^')?;
    let mut out = String::new();
    let mut chars = rest.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(e) if "./-_~".contains(e) => out.push(e),
                _ => break,
            },
            '.' | '*' | '+' | '?' | '(' | ')' | '[' | ']' | '{' | '}' | '|' | '^' | '$' => {
                // A quantifier applies to the character before it, which is then uncertain.
                if matches!(c, '*' | '+' | '?' | '{') {
                    out.pop();
                }
                break;
            }
            c => out.push(c),
        }
    }
    Some(out)
}

/// The literal text a glob must start with.
fn glob_literal_prefix(glob: &str) -> String {
    glob.chars()
        .take_while(|c| !matches!(c, '*' | '?' | '[' | '{' | '\\'))
        .collect()
}

fn is_literal(glob: &str) -> bool {
    !glob.contains(['*', '?', '[', '{', '\\'])
}

fn glob_matches(glob: &str, text: &str) -> bool {
    globset::Glob::new(glob).is_ok_and(|g| g.compile_matcher().is_match(text))
}

/// The literal alternatives a glob stands for, when it is literal or one `{a,b,c}` group of
/// literals; `None` when it has other wildcards.
fn literal_alternatives(glob: &str) -> Option<Vec<String>> {
    if is_literal(glob) {
        return Some(vec![glob.to_string()]);
    }
    let open = glob.find('{')?;
    let close = open + glob[open..].find('}')?;
    let (head, inner, tail) = (&glob[..open], &glob[open + 1..close], &glob[close + 1..]);
    if !is_literal(head) || !is_literal(tail) || !is_literal(inner) {
        return None;
    }
    Some(
        inner
            .split(',')
            .map(|alt| format!("{head}{alt}{tail}"))
            .collect(),
    )
}

/// Whether glob `a` matches every text glob `b` matches (conservatively: `false` when unsure).
fn glob_covers(a: &str, b: &str) -> bool {
    if a == b || a == "*" || a == "**" {
        return true;
    }
    literal_alternatives(b).is_some_and(|alts| alts.iter().all(|t| glob_matches(a, t)))
}

fn optional_glob_covers(a: Option<&str>, b: Option<&str>) -> bool {
    match (a, b) {
        (None, _) => true,
        (Some(a), Some(b)) => glob_covers(a, b),
        (Some(_), None) => false,
    }
}

fn same_matcher(a: &Matcher, b: &Matcher) -> bool {
    match (a, b) {
        (Matcher::Regex(x), Matcher::Regex(y)) | (Matcher::Pattern(x), Matcher::Pattern(y)) => {
            x.value == y.value
        }
        (Matcher::NotUnder { root: x, .. }, Matcher::NotUnder { root: y, .. }) => x == y,
        (Matcher::Secrets, Matcher::Secrets) => true,
        _ => false,
    }
}

/// Whether every request inbound rule `b` matches is also matched by `a`: `a`'s method and
/// tool are at least as broad, and each of `a`'s argument conditions is implied by one of
/// `b`'s (the same matcher on the same argument, or `a` looks at `_any_value`, which sees
/// every value a named argument holds).
fn inbound_covers(a: &Rule, b: &Rule) -> bool {
    glob_covers(&a.method.value, &b.method.value)
        && optional_glob_covers(
            a.tool.as_ref().map(|t| t.value.as_str()),
            b.tool.as_ref().map(|t| t.value.as_str()),
        )
        && optional_glob_covers(
            a.identity.as_ref().map(|t| t.value.as_str()),
            b.identity.as_ref().map(|t| t.value.as_str()),
        )
        && a.arguments.iter().all(|ca| {
            b.arguments.iter().any(|cb| {
                same_matcher(&ca.matcher, &cb.matcher)
                    && (ca.selector == cb.selector || ca.selector == ArgSelector::AnyValue)
            })
        })
}

/// Whether every message outbound rule `b` matches is also matched by `a`.
fn spanned_str(x: &Option<crate::config::policy::Spanned<String>>) -> Option<&str> {
    x.as_ref().map(|s| s.value.as_str())
}

fn outbound_covers(a: &OutboundRule, b: &OutboundRule) -> bool {
    let g = spanned_str;
    let subset = |xs: &[crate::config::policy::Spanned<String>],
                  ys: &[crate::config::policy::Spanned<String>],
                  fold: bool| {
        xs.is_empty()
            || (!ys.is_empty()
                && ys.iter().all(|y| {
                    xs.iter().any(|x| {
                        if fold {
                            x.value.eq_ignore_ascii_case(&y.value)
                        } else {
                            x.value == y.value
                        }
                    })
                }))
    };
    optional_glob_covers(g(&a.method), g(&b.method))
        && optional_glob_covers(g(&a.tool), g(&b.tool))
        && optional_glob_covers(g(&a.server), g(&b.server))
        && (!a.secrets || b.secrets)
        && subset(&a.response_contains, &b.response_contains, true)
        && subset(
            &a.response_contains_regex,
            &b.response_contains_regex,
            false,
        )
        && match (a.response_size_exceeds, b.response_size_exceeds) {
            (None, _) => true,
            (Some(x), Some(y)) => x <= y,
            (Some(_), None) => false,
        }
}

// ---------------------------------------------------------------------------------------
// YAML

/// One self-contained policy: no `extends`, every rule inlined in evaluation order, every
/// setting explicit.
pub fn render_yaml(policy: &Policy) -> miette::Result<String> {
    let doc = YamlPolicy {
        version: 1,
        settings: YamlSettings::from(&policy.settings),
        rules: policy.rules.iter().map(YamlRule::from).collect(),
        exceptions: yaml_exceptions(policy),
        outbound_rules: policy
            .outbound_rules
            .iter()
            .map(YamlOutbound::from)
            .collect(),
        secrets: YamlSecrets {
            patterns: policy
                .secret_patterns
                .iter()
                .map(|p| YamlPattern {
                    name: p.name.value.clone(),
                    regex: p.regex.value.clone(),
                    entropy_threshold: p.entropy_threshold,
                })
                .collect(),
            disable: policy
                .disabled_secrets
                .iter()
                .map(|d| d.value.clone())
                .collect(),
        },
        sandbox: YamlSandbox::from(&policy.sandbox),
    };
    let body = serde_saphyr::to_string(&doc)
        .map_err(|e| miette::miette!("cannot write the policy as YAML: {e}"))?;
    let sources: Vec<&str> = policy.sources.iter().map(|s| s.name.as_str()).collect();
    Ok(format!(
        "# mcpwall effective policy, merged from: {}\n{body}",
        sources.join(", ")
    ))
}

/// `exceptions:` grouped by rule, in the order the rules are first excepted.
fn yaml_exceptions(policy: &Policy) -> YamlExceptions {
    let mut groups: Vec<(String, Vec<YamlException>)> = Vec::new();
    for e in &policy.exceptions {
        let rule = YamlRule::from(&e.conditions);
        let entry = YamlException {
            matches: rule.matches,
            why: rule.why,
        };
        match groups.iter_mut().find(|(name, _)| *name == e.rule.value) {
            Some((_, list)) => list.push(entry),
            None => groups.push((e.rule.value.clone(), vec![entry])),
        }
    }
    YamlExceptions(groups)
}

#[derive(Serialize)]
struct YamlPolicy {
    version: u32,
    settings: YamlSettings,
    rules: Vec<YamlRule>,
    #[serde(skip_serializing_if = "YamlExceptions::is_empty")]
    exceptions: YamlExceptions,
    outbound_rules: Vec<YamlOutbound>,
    secrets: YamlSecrets,
    sandbox: YamlSandbox,
}

/// `sandbox:` as merged; the lists only when not empty.
#[derive(Serialize)]
struct YamlSandbox {
    enabled: bool,
    required: bool,
    confine_writes: bool,
    network: &'static str,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    deny_read: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    deny_write: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    allow_read: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    allow_write: Vec<String>,
}

impl From<&config::policy::SandboxPolicy> for YamlSandbox {
    fn from(s: &config::policy::SandboxPolicy) -> Self {
        let list =
            |l: &[config::policy::Spanned<String>]| l.iter().map(|e| e.value.clone()).collect();
        YamlSandbox {
            enabled: s.enabled,
            required: s.required,
            confine_writes: s.confine_writes,
            network: s.network.word(),
            deny_read: list(&s.deny_read),
            deny_write: list(&s.deny_write),
            allow_read: list(&s.allow_read),
            allow_write: list(&s.allow_write),
        }
    }
}

#[derive(Serialize)]
struct YamlSettings {
    #[serde(skip_serializing_if = "Option::is_none")]
    log_dir: Option<String>,
    log_level: &'static str,
    log_args: &'static str,
    default_action: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    rate_limit: Option<YamlRateLimit>,
    max_frame_bytes: usize,
    redact_marker: &'static str,
    // The settings below are written only when they differ from the default, so the
    // rendering of a policy that leaves them alone does not change.
    #[serde(skip_serializing_if = "is_true")]
    hide_denied_tools: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pinning: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    poison_scan: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    circuit_breaker: Option<YamlBreaker>,
    #[serde(skip_serializing_if = "Option::is_none")]
    backups: Option<YamlBackups>,
    #[serde(skip_serializing_if = "Option::is_none")]
    log_retention: Option<YamlRetention>,
    #[serde(skip_serializing_if = "Option::is_none")]
    gateway: Option<YamlGateway>,
    #[serde(skip_serializing_if = "Option::is_none")]
    oauth: Option<YamlOAuth>,
}

/// `settings.oauth`, every key written out (the defaults too: which provider and which
/// checks is what a reader of the policy wants to see).
#[derive(Serialize)]
struct YamlOAuth {
    issuer: String,
    resource: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    jwks_url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    jwks_ca_file: Option<String>,
    algorithms: Vec<String>,
    identity_claim: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    groups_claim: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    required_scopes: Vec<String>,
    leeway_seconds: u32,
    jwks_max_age_seconds: u32,
    jwks_min_refresh_seconds: u32,
    fetch_timeout_seconds: u32,
    max_token_bytes: u32,
}

#[derive(Serialize)]
struct YamlGateway {
    max_sessions: u32,
    sessions_per_identity: u32,
    session_idle_seconds: u32,
    max_connections: u32,
    connections_per_peer: u32,
    header_timeout_seconds: u32,
}

#[derive(Serialize)]
struct YamlRetention {
    max_days: u32,
    max_mb: u32,
}

#[derive(Serialize)]
struct YamlBackups {
    keep: u32,
    max_age_days: u32,
}

fn is_true(b: &bool) -> bool {
    *b
}

#[derive(Serialize)]
struct YamlRateLimit {
    max_calls: u32,
    window_seconds: u64,
}

#[derive(Serialize)]
struct YamlBreaker {
    max_violations: u32,
    window_seconds: u64,
    action: &'static str,
}

impl From<&Settings> for YamlSettings {
    fn from(s: &Settings) -> Self {
        YamlSettings {
            log_dir: s.log_dir.as_ref().map(|d| d.display().to_string()),
            log_level: log_level_word(s.log_level),
            log_args: log_args_word(s.log_args),
            default_action: action_word(s.default_action),
            rate_limit: s.rate_limit.map(|r| YamlRateLimit {
                max_calls: r.max_calls,
                window_seconds: r.window_seconds,
            }),
            max_frame_bytes: s.max_frame_bytes,
            redact_marker: redact_marker_word(s.redact_marker),
            hide_denied_tools: s.hide_denied_tools,
            pinning: match s.pinning {
                PinningMode::Enforce => None,
                PinningMode::Warn => Some("warn"),
                PinningMode::Off => Some("off"),
            },
            poison_scan: match s.poison_scan {
                PoisonScanMode::Enforce => None,
                PoisonScanMode::Warn => Some("warn"),
                PoisonScanMode::Off => Some("off"),
            },
            circuit_breaker: s.circuit_breaker.map(|b| YamlBreaker {
                max_violations: b.max_violations,
                window_seconds: b.window_seconds,
                action: match b.action {
                    BreakerAction::Suspend => "suspend",
                },
            }),
            backups: (s.backups != BackupSettings::default()).then_some(YamlBackups {
                keep: s.backups.keep,
                max_age_days: s.backups.max_age_days,
            }),
            log_retention: (s.log_retention != LogRetention::default()).then_some(YamlRetention {
                max_days: s.log_retention.max_days,
                max_mb: s.log_retention.max_mb,
            }),
            gateway: (s.gateway != GatewaySettings::default()).then_some(YamlGateway {
                max_sessions: s.gateway.max_sessions,
                sessions_per_identity: s.gateway.sessions_per_identity,
                session_idle_seconds: s.gateway.session_idle_seconds,
                max_connections: s.gateway.max_connections,
                connections_per_peer: s.gateway.connections_per_peer,
                header_timeout_seconds: s.gateway.header_timeout_seconds,
            }),
            oauth: s.oauth.as_ref().map(|o| YamlOAuth {
                issuer: o.issuer.clone(),
                resource: o.resource.clone(),
                jwks_url: o.jwks_url.clone(),
                jwks_ca_file: o
                    .jwks_ca_file
                    .as_ref()
                    .map(|p| p.to_string_lossy().into_owned()),
                algorithms: o.algorithms.clone(),
                identity_claim: o.identity_claim.clone(),
                groups_claim: o.groups_claim.clone(),
                required_scopes: o.required_scopes.clone(),
                leeway_seconds: o.leeway_seconds,
                jwks_max_age_seconds: o.jwks_max_age_seconds,
                jwks_min_refresh_seconds: o.jwks_min_refresh_seconds,
                fetch_timeout_seconds: o.fetch_timeout_seconds,
                max_token_bytes: o.max_token_bytes,
            }),
        }
    }
}

#[derive(Serialize)]
struct YamlRule {
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    why: Option<String>,
    #[serde(rename = "match")]
    matches: YamlInMatch,
    action: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    examples: Option<YamlExamples>,
}

#[derive(Serialize)]
struct YamlInMatch {
    method: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    identity: Option<String>,
    #[serde(skip_serializing_if = "YamlArguments::is_empty")]
    arguments: YamlArguments,
}

/// `exceptions: {rule: [..]}` in order (a map that keeps it).
struct YamlExceptions(Vec<(String, Vec<YamlException>)>);

impl YamlExceptions {
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Serialize for YamlExceptions {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

#[derive(Serialize)]
struct YamlException {
    #[serde(rename = "match")]
    matches: YamlInMatch,
    #[serde(skip_serializing_if = "Option::is_none")]
    why: Option<String>,
}

/// Argument conditions grouped by argument, in the order first written.
struct YamlArguments(Vec<(String, YamlMatcher)>);

impl YamlArguments {
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Serialize for YamlArguments {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

#[derive(Serialize, Default)]
struct YamlMatcher {
    #[serde(skip_serializing_if = "Option::is_none")]
    regex: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pattern: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    not_under: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    secrets: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    command: Option<Vec<serde_json::Value>>,
}

/// A `command` clause as YAML would write it.
fn clause_value(c: &crate::config::policy::CommandClause) -> serde_json::Value {
    let mut m = serde_json::Map::new();
    if !c.names.is_empty() {
        m.insert("name".into(), c.names.clone().into());
    }
    if c.unknown_name {
        m.insert("unknown_name".into(), true.into());
    }
    if !c.flags.is_empty() {
        m.insert("flags".into(), c.flags.clone().into());
    }
    if !c.subcommands.is_empty() {
        let subs: Vec<String> = c.subcommands.iter().map(|s| s.join(" ")).collect();
        m.insert("subcommand".into(), subs.into());
    }
    if let Some(p) = &c.paths {
        let mut pm = serde_json::Map::new();
        if !p.patterns.is_empty() {
            pm.insert("pattern".into(), p.patterns.clone().into());
        }
        let show = |v: &[std::path::PathBuf]| -> Vec<String> {
            v.iter().map(|r| r.display().to_string()).collect()
        };
        if !p.not_under.is_empty() {
            pm.insert("not_under".into(), show(&p.not_under).into());
        }
        if !p.ancestors_of.is_empty() {
            pm.insert("ancestors_of".into(), show(&p.ancestors_of).into());
        }
        m.insert("paths".into(), pm.into());
    }
    if !c.redirects.is_empty() {
        m.insert("redirect".into(), c.redirects.clone().into());
    }
    if !c.words.is_empty() {
        m.insert("words".into(), c.words.clone().into());
    }
    let mut input = Vec::new();
    if c.input & crate::shell::DOWNLOADED != 0 {
        input.push("downloaded");
    }
    if c.input & crate::shell::DECODED != 0 {
        input.push("decoded");
    }
    if !input.is_empty() {
        m.insert("input".into(), input.into());
    }
    if c.after_download {
        m.insert("after_download".into(), true.into());
    }
    if c.over_find {
        m.insert("over_find".into(), true.into());
    }
    m.into()
}

#[derive(Serialize)]
struct YamlExamples {
    #[serde(rename = "match", skip_serializing_if = "Vec::is_empty")]
    should_match: Vec<serde_json::Value>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    no_match: Vec<serde_json::Value>,
}

fn yaml_examples(ex: &Examples) -> Option<YamlExamples> {
    if ex.should_match.is_empty() && ex.should_not_match.is_empty() {
        return None;
    }
    Some(YamlExamples {
        should_match: ex.should_match.clone(),
        no_match: ex.should_not_match.clone(),
    })
}

impl From<&Rule> for YamlRule {
    fn from(r: &Rule) -> Self {
        let mut args: Vec<(String, YamlMatcher)> = Vec::new();
        for cond in &r.arguments {
            let key = selector_name(&cond.selector).to_string();
            let idx = match args.iter().position(|(k, _)| *k == key) {
                Some(i) => i,
                None => {
                    args.push((key, YamlMatcher::default()));
                    args.len() - 1
                }
            };
            let m = &mut args[idx].1;
            match &cond.matcher {
                Matcher::Regex(x) => m.regex = Some(x.value.clone()),
                Matcher::Pattern(x) => m.pattern = Some(x.value.clone()),
                // As written, so `${PROJECT_DIR}` and `~` stay portable; loading it in the
                // same place expands it to the same root.
                Matcher::NotUnder { written, .. } => m.not_under = Some(written.value.clone()),
                Matcher::Secrets => m.secrets = Some(true),
                Matcher::Command(c) => {
                    m.command = Some(c.value.iter().map(clause_value).collect());
                }
            }
        }
        YamlRule {
            name: r.name.value.clone(),
            description: r.description.clone(),
            why: r.why.clone(),
            matches: YamlInMatch {
                method: r.method.value.clone(),
                tool: r.tool.as_ref().map(|t| t.value.clone()),
                identity: r.identity.as_ref().map(|t| t.value.clone()),
                arguments: YamlArguments(args),
            },
            action: action_word(r.action),
            message: r.message.clone(),
            examples: yaml_examples(&r.examples),
        }
    }
}

#[derive(Serialize)]
struct YamlOutbound {
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    why: Option<String>,
    #[serde(rename = "match")]
    matches: YamlOutMatch,
    action: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    examples: Option<YamlExamples>,
}

#[derive(Serialize)]
struct YamlOutMatch {
    #[serde(skip_serializing_if = "Option::is_none")]
    method: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    server: Option<String>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    secrets: bool,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    response_contains: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    response_contains_regex: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    response_size_exceeds: Option<u64>,
}

impl From<&OutboundRule> for YamlOutbound {
    fn from(r: &OutboundRule) -> Self {
        let v = |x: &Option<crate::config::policy::Spanned<String>>| {
            x.as_ref().map(|s| s.value.clone())
        };
        YamlOutbound {
            name: r.name.value.clone(),
            description: r.description.clone(),
            why: r.why.clone(),
            matches: YamlOutMatch {
                method: v(&r.method),
                tool: v(&r.tool),
                server: v(&r.server),
                secrets: r.secrets,
                response_contains: r
                    .response_contains
                    .iter()
                    .map(|s| s.value.clone())
                    .collect(),
                response_contains_regex: r
                    .response_contains_regex
                    .iter()
                    .map(|s| s.value.clone())
                    .collect(),
                response_size_exceeds: r.response_size_exceeds,
            },
            action: outbound_action_word(r.action),
            message: r.message.clone(),
            examples: yaml_examples(&r.examples),
        }
    }
}

#[derive(Serialize)]
struct YamlSecrets {
    patterns: Vec<YamlPattern>,
    disable: Vec<String>,
}

#[derive(Serialize)]
struct YamlPattern {
    name: String,
    regex: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    entropy_threshold: Option<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glob_cover_is_conservative() {
        assert!(glob_covers("*", "tools/call"));
        assert!(glob_covers("read_*", "{read_file,read_text_file}"));
        assert!(!glob_covers("read_*", "{read_file,write_file}"));
        assert!(!glob_covers("read_file", "read_*"));
        assert!(glob_covers("tools/call", "tools/call"));
    }

    #[test]
    fn regex_problems() {
        assert!(regex_problem("^$").is_some());
        assert!(regex_problem(r"[^\s\S]").is_some());
        assert!(regex_problem(r"\.ssh").is_none());
    }

    #[test]
    fn literal_prefixes() {
        assert_eq!(
            regex_literal_prefix(r"^/home/u/proj/.*").as_deref(),
            Some("/home/u/proj/")
        );
        assert_eq!(
            regex_literal_prefix(r"^/tmp\.d/x+").as_deref(),
            Some("/tmp.d/")
        );
        assert_eq!(regex_literal_prefix(r"/x"), None);
        assert_eq!(glob_literal_prefix("/srv/data/**"), "/srv/data/");
    }

    #[test]
    fn unknown_methods_get_a_suggestion() {
        let hint = unknown_method("tool/call").expect("typo is flagged");
        assert!(hint.contains("tools/call"), "{hint}");
        assert!(unknown_method("tools/call").is_none());
        assert!(unknown_method("notifications/cancelled").is_none());
        assert!(unknown_method("tools/*").is_none());
    }
}
