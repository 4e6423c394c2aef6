//! `mcpwall approve`: decide the calls an `ask` rule holds while the client has no
//! elicitation UI (they wait in `~/.mcpwall/pending/`, see [`crate::approval_queue`]).
//!
//! Without a code it lists every waiting call with what it would run; with a code it
//! shows that call again and records the decision (`--deny` to refuse), bound to the
//! call's digest: the proxy applies it only to the exact call shown here.
//!
//! With a policy that sets `settings.shared_state` (the replicas of a gateway), it also
//! lists the calls every other replica holds, and a decision about one of those is
//! recorded in the shared state, for the replica holding it to apply
//! ([`crate::http::shared_approvals`]).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

use miette::{IntoDiagnostic, miette};

use crate::approval_queue::{
    ApprovalQueue, ApprovalRequest, Decision, Offer, staleness, valid_code,
};
use crate::shared_state::SharedState;

/// Arguments of `mcpwall approve`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The code of the call to decide (as listed); without it, list the waiting calls.
    pub code: Option<String>,
    /// Refuse the call instead of approving it.
    #[arg(long, requires = "code")]
    pub deny: bool,
    /// Decide without asking (for scripts you run). Without it, the decision is asked
    /// for on a terminal and refused when there is none, as `pins approve` and `trust` do.
    #[arg(long, short = 'y', requires = "code")]
    pub yes: bool,
    /// The policy file whose `settings.shared_state` names the replicas' shared state:
    /// calls held by every replica of the gateway are listed and decided too (default:
    /// the policy found as `mcpwall serve` finds it, when it loads).
    #[arg(short = 'c', long, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

/// The replicas' shared state the policy names, if any. An explicit policy that does not
/// load is an error; a default one is passed over (this machine's queue only).
fn fleet(config: Option<PathBuf>) -> miette::Result<Option<crate::shared_state::redis::Redis>> {
    let explicit = config.is_some();
    let opts = crate::cli::common::load_options(config)?;
    let policy = match crate::config::load(&opts) {
        Ok(policy) => policy,
        Err(e) if explicit => return Err(miette::Report::new(e)),
        Err(_) => return Ok(None),
    };
    let Some(settings) = &policy.settings.shared_state else {
        return Ok(None);
    };
    crate::shared_state::redis::Redis::new(settings)
        .map(Some)
        .map_err(|e| miette!("{e}"))
}

/// The calls the other replicas offer (`None`: the shared state cannot be reached, said
/// on stderr).
fn offers(store: &crate::shared_state::redis::Redis) -> Option<Vec<Offer>> {
    match store.held() {
        Ok(texts) => {
            let mut offers: Vec<Offer> = texts
                .iter()
                .filter_map(|t| serde_json::from_str(t).ok())
                .filter(|o: &Offer| valid_code(&o.request.code))
                .collect();
            offers.sort_by_key(|o| (o.request.expires_unix, o.request.code.clone()));
            Some(offers)
        }
        Err(e) => {
            eprintln!(
                "warning: the calls held by the other replicas cannot be listed: {e}; decide \
                 them on their machines"
            );
            None
        }
    }
}

fn holder(offer: &Offer) -> String {
    match &offer.replica {
        Some(name) => format!("replica {name}"),
        None => "another replica".to_string(),
    }
}

pub fn run(args: Args) -> miette::Result<ExitCode> {
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .ok_or_else(|| {
            miette!("HOME is not set; calls waiting for approval are in ~/.mcpwall/pending")
        })?;
    let queue = ApprovalQueue::at(&home);
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let fleet = fleet(args.config)?;
    let Some(code) = args.code else {
        // Calls nobody can decide any more leave the queue, each said once.
        for (request, why) in queue.sweep(now).into_diagnostic()? {
            println!(
                "{}  server {}: removed from the queue: {}",
                request.code,
                request.server,
                why.describe(&request)
            );
        }
        let waiting = queue.list().into_diagnostic()?;
        let live: Vec<_> = waiting.iter().collect();
        // Offers of this machine's own replica are its local calls, listed above.
        let elsewhere: Vec<Offer> = fleet
            .as_ref()
            .and_then(offers)
            .unwrap_or_default()
            .into_iter()
            .filter(|o| !live.iter().any(|(r, _)| r.code == o.request.code))
            .filter(|o| o.request.expires_unix >= now)
            .collect();
        if live.is_empty() && elsewhere.is_empty() {
            println!("No call is waiting for approval.");
            return Ok(ExitCode::SUCCESS);
        }
        for (request, decided) in live {
            show(request, now);
            if *decided {
                println!("  (decided; waiting for mcpwall to pick it up)");
            }
            println!();
        }
        for offer in &elsewhere {
            show(&offer.request, now);
            println!(
                "  held by:   {} (the decision reaches it through the shared state)",
                holder(offer)
            );
            println!();
        }
        println!(
            "Approve one with `mcpwall approve CODE`, refuse it with `mcpwall approve --deny CODE`."
        );
        return Ok(ExitCode::SUCCESS);
    };
    let code = code.trim().to_ascii_lowercase();
    let request = valid_code(&code).then(|| queue.get(&code)).flatten();
    if let Some(request) = &request
        && let Some(why) = staleness(request, now)
    {
        queue.withdraw(&request.code);
        eprintln!(
            "error: call {code} cannot be {}: {}; it was removed from the queue",
            if args.deny { "refused" } else { "approved" },
            why.describe(request)
        );
        return Ok(ExitCode::from(1));
    }
    let offer = match (&request, &fleet) {
        (None, Some(store)) if valid_code(&code) => offers(store)
            .unwrap_or_default()
            .into_iter()
            .find(|o| o.request.code == code && o.request.expires_unix >= now),
        _ => None,
    };
    if let (Some(offer), Some(store)) = (offer, &fleet) {
        return decide_elsewhere(store, &offer, args.deny, args.yes, now);
    }
    let Some(request) = request else {
        eprintln!(
            "error: no call is waiting under code {code:?} (it may have been decided, \
             cancelled or timed out)\n  hint: run `mcpwall approve` to list the waiting calls"
        );
        return Ok(ExitCode::from(1));
    };
    show(&request, now);
    if !confirmed(&request, args.deny, args.yes)? {
        return Ok(ExitCode::from(1));
    }
    queue.record(&request, !args.deny).into_diagnostic()?;
    println!(
        "{} call {}.",
        if args.deny { "Refused" } else { "Approved" },
        request.code
    );
    Ok(ExitCode::SUCCESS)
}

/// Whether the person confirmed the decision (`--yes`: without asking).
fn confirmed(request: &ApprovalRequest, deny: bool, yes: bool) -> miette::Result<bool> {
    if yes {
        return Ok(true);
    }
    let verb = if deny { "refuse" } else { "approve" };
    if !std::io::IsTerminal::is_terminal(&std::io::stdin()) {
        return Err(miette!(
            help = "run it yourself in a terminal to review and confirm, or pass --yes in a script you run",
            "not deciding: no terminal to confirm on, and --yes was not given"
        ));
    }
    eprint!("{verb} call {}? [y/N] ", request.code);
    let mut answer = String::new();
    std::io::stdin()
        .read_line(&mut answer)
        .map_err(|e| miette!("cannot read the answer: {e}"))?;
    if !matches!(answer.trim(), "y" | "Y" | "yes" | "YES" | "Yes") {
        println!("Nothing decided; call {} is still waiting.", request.code);
        return Ok(false);
    }
    Ok(true)
}

/// Decide a call another replica holds: recorded in the shared state, bound to the digest
/// shown, for the holder to apply.
fn decide_elsewhere(
    store: &crate::shared_state::redis::Redis,
    offer: &Offer,
    deny: bool,
    yes: bool,
    now: u64,
) -> miette::Result<ExitCode> {
    let request = &offer.request;
    show(request, now);
    println!("  held by:   {}", holder(offer));
    if !confirmed(request, deny, yes)? {
        return Ok(ExitCode::from(1));
    }
    let decision = Decision {
        approve: !deny,
        digest: request.digest.clone(),
    };
    let text = serde_json::to_string(&decision).into_diagnostic()?;
    match store.decide_held(&request.code, &text) {
        Ok(true) => {
            println!(
                "{} call {}; {} applies it within a second.",
                if deny { "Refused" } else { "Approved" },
                request.code,
                holder(offer)
            );
            Ok(ExitCode::SUCCESS)
        }
        Ok(false) => {
            eprintln!(
                "error: call {} is no longer waiting (it was decided, cancelled or timed out)",
                request.code
            );
            Ok(ExitCode::from(1))
        }
        Err(e) => Err(miette!(
            help = "decide it on the machine of the replica that holds it",
            "cannot record the decision: {e}"
        )),
    }
}

fn show(r: &ApprovalRequest, now: u64) {
    println!("{}  server {}  (mcpwall pid {})", r.code, r.server, r.pid);
    match &r.tool {
        Some(tool) => println!("  call:      {} {tool}", r.method),
        None => println!("  call:      {}", r.method),
    }
    println!("  arguments: {}", r.arguments);
    println!("  rule:      {}", r.rule);
    println!("  digest:    {}", r.digest);
    println!("  expires:   in {} s", r.expires_unix.saturating_sub(now));
}
