//! `mcpwall approve`: decide the calls an `ask` rule holds while the client has no
//! elicitation UI (they wait in `~/.mcpwall/pending/`, see [`crate::approval_queue`]).
//!
//! Without a code it lists every waiting call with what it would run; with a code it
//! shows that call again and records the decision (`--deny` to refuse), bound to the
//! call's digest: the proxy applies it only to the exact call shown here.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

use miette::{IntoDiagnostic, miette};

use crate::approval_queue::{ApprovalQueue, ApprovalRequest, staleness, valid_code};

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
        if live.is_empty() {
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
    let Some(request) = request else {
        eprintln!(
            "error: no call is waiting under code {code:?} (it may have been decided, \
             cancelled or timed out)\n  hint: run `mcpwall approve` to list the waiting calls"
        );
        return Ok(ExitCode::from(1));
    };
    show(&request, now);
    let verb = if args.deny { "refuse" } else { "approve" };
    if !args.yes {
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
            return Ok(ExitCode::from(1));
        }
    }
    queue.record(&request, !args.deny).into_diagnostic()?;
    println!(
        "{} call {}.",
        if args.deny { "Refused" } else { "Approved" },
        request.code
    );
    Ok(ExitCode::SUCCESS)
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
