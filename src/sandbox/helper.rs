//! The sandbox helper: `mcpwall __sandbox-exec PARENT_PID PLAN -- PROGRAM [ARGS…]`.
//!
//! mcpwall starts a server by starting itself with these arguments; this process applies
//! the plan to itself (`platform::enter_sandbox`) and then `exec`s the server, which
//! inherits every restriction, as does everything it starts. A plan marked `required`
//! that cannot be enforced in full stops here, before the server runs, with exit code 126
//! (the shell's "cannot run"); otherwise what could not be enforced is said on stderr.

use std::ffi::OsString;
use std::process::ExitCode;

use super::Plan;

/// The first argument that selects the helper. Not a verb users type: `mcpwall -- CMD`
/// puts a server's words after `--`, where this is never read.
pub const ARG: &str = "__sandbox-exec";

/// The plan argument of a server started without a sandbox.
const NO_PLAN: &str = "off";

/// The helper's arguments for `plan` (`None`: no sandbox, only the tie to mcpwall's
/// life), in front of the server's command.
pub fn command_line(plan: Option<&Plan>, program: &OsString, args: &[OsString]) -> Vec<OsString> {
    let mut out: Vec<OsString> = vec![
        ARG.into(),
        std::process::id().to_string().into(),
        plan.map_or_else(|| NO_PLAN.into(), Plan::to_arg).into(),
        "--".into(),
        program.clone(),
    ];
    out.extend(args.iter().cloned());
    out
}

/// Run the helper on the arguments after [`ARG`]. Returns only on failure: on success the
/// process has become the server.
pub fn main(args: &[OsString]) -> ExitCode {
    let (parent, plan, command) = match parse(args) {
        Ok(parsed) => parsed,
        Err(e) => {
            eprintln!("mcpwall: sandbox: {e}");
            return ExitCode::from(2);
        }
    };
    // The server dies with mcpwall, sandboxed or not: a server that ignores the end of
    // its input must not outlive a killed proxy.
    if let Err(e) = crate::platform::tie_to_parent(parent) {
        eprintln!("mcpwall: error: cannot start the server: {e}");
        return ExitCode::from(126);
    }
    let Some(plan) = plan else {
        return exec(&command);
    };
    let entered = match crate::platform::enter_sandbox(&plan) {
        Ok(entered) => entered,
        Err(e) => {
            eprintln!("mcpwall: sandbox: cannot sandbox the server: {e}; it was not started");
            return ExitCode::from(126);
        }
    };
    if !entered.shortfalls.is_empty() {
        let what = entered.shortfalls.join("; ");
        if plan.required {
            eprintln!(
                "mcpwall: sandbox: the server was not started: `sandbox.required` is set and {what}"
            );
            return ExitCode::from(126);
        }
        eprintln!("mcpwall: warning: sandbox: {what}");
    }
    let mut argv: Vec<OsString> = entered.wrapper.unwrap_or_default();
    argv.extend(command);
    exec(&argv)
}

fn parse(args: &[OsString]) -> Result<(u32, Option<Plan>, Vec<OsString>), String> {
    let [parent, plan, dashes, command @ ..] = args else {
        return Err("usage: mcpwall __sandbox-exec PARENT_PID PLAN -- PROGRAM [ARGS...]".into());
    };
    let parent = parent
        .to_str()
        .and_then(|p| p.parse().ok())
        .ok_or("the parent pid is not a number")?;
    let plan = plan.to_str().ok_or("the plan is not UTF-8")?;
    let plan: Option<Plan> = match plan {
        NO_PLAN => None,
        json => Some(serde_json::from_str(json).map_err(|e| format!("unreadable plan: {e}"))?),
    };
    if dashes != "--" || command.is_empty() {
        return Err("no server command after `--`".into());
    }
    Ok((parent, plan, command.to_vec()))
}

#[cfg(unix)]
fn exec(argv: &[OsString]) -> ExitCode {
    use std::os::unix::process::CommandExt;
    let err = std::process::Command::new(&argv[0]).args(&argv[1..]).exec();
    let command = argv[0].to_string_lossy();
    match err.kind() {
        std::io::ErrorKind::NotFound => {
            eprintln!(
                "mcpwall: error: cannot start the server: command {command:?} not found (check the path or PATH)"
            );
            ExitCode::from(127)
        }
        std::io::ErrorKind::PermissionDenied => {
            eprintln!(
                "mcpwall: error: cannot start the server: permission denied running {command:?} (is it executable?)"
            );
            ExitCode::from(126)
        }
        _ => {
            eprintln!("mcpwall: error: cannot start the server {command:?}: {err}");
            ExitCode::from(126)
        }
    }
}

#[cfg(not(unix))]
fn exec(_argv: &[OsString]) -> ExitCode {
    // Never reached: on Windows servers are started directly (`io::child`).
    eprintln!("mcpwall: sandbox: the helper is not used on this system");
    ExitCode::from(2)
}
