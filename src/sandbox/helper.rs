//! The sandbox helper: `mcpwall __sandbox-exec PARENT_PID PLAN -- PROGRAM [ARGS…]`.
//!
//! mcpwall starts a server by starting itself with these arguments; this process applies
//! the plan to itself (`platform::enter_sandbox`) and then `exec`s the server, which
//! inherits every restriction, as does everything it starts. A plan marked `required`
//! that cannot be enforced in full stops here, before the server runs, with exit code 126
//! (the shell's "cannot run"); otherwise what could not be enforced is said on stderr.
//!
//! The plan comes on the command line (JSON, or `off`), or, with `-`, as the first message
//! on standard input ([`plan_message`]): mcpwall then starts the helper before it has
//! loaded the policy, and the helper's own start (a second `exec` of a large binary, its
//! loader and relocations: about a millisecond) overlaps the loading instead of following
//! it. A helper whose input ends before a plan came exits without starting anything.

use std::ffi::OsString;
use std::process::ExitCode;

use super::Plan;

/// The first argument that selects the helper. Not a verb users type: `mcpwall -- CMD`
/// puts a server's words after `--`, where this is never read.
pub const ARG: &str = "__sandbox-exec";

/// The plan argument of a server started without a sandbox.
const NO_PLAN: &str = "off";

/// The plan argument that says: read the plan from standard input.
const PLAN_ON_STDIN: &str = "-";

/// How the helper gets its plan.
#[derive(Debug, Clone, Copy)]
pub enum Handover<'a> {
    /// On the command line (`None`: no sandbox, only the tie to mcpwall's life).
    Now(Option<&'a Plan>),
    /// Later, as [`plan_message`] on the helper's standard input.
    OnStdin,
}

/// The helper's arguments in front of the server's command.
pub fn command_line(plan: Handover<'_>, program: &OsString, args: &[OsString]) -> Vec<OsString> {
    let plan: OsString = match plan {
        Handover::Now(None) => NO_PLAN.into(),
        Handover::Now(Some(plan)) => plan.to_arg().into(),
        Handover::OnStdin => PLAN_ON_STDIN.into(),
    };
    let mut out: Vec<OsString> = vec![
        ARG.into(),
        std::process::id().to_string().into(),
        plan,
        "--".into(),
        program.clone(),
    ];
    out.extend(args.iter().cloned());
    out
}

/// The bytes that hand a helper started with [`Handover::OnStdin`] its plan: the length of
/// the JSON as four little-endian bytes (0: no sandbox), then the JSON. A length, not a
/// delimiter, so the helper reads exactly the plan and leaves the server's input alone.
pub fn plan_message(plan: Option<&Plan>) -> Vec<u8> {
    let json = plan.map(Plan::to_arg).unwrap_or_default();
    let len = u32::try_from(json.len()).expect("a plan is far below 4 GiB");
    let mut out = Vec::with_capacity(4 + json.len());
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(json.as_bytes());
    out
}

/// The largest plan a helper accepts on standard input: a bound on what it allocates.
const MAX_PLAN_BYTES: usize = 16 << 20;

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
    let plan = match plan {
        Given::Now(plan) => plan,
        Given::OnStdin => match read_plan() {
            Ok(plan) => plan,
            // mcpwall gave up on this start (its policy did not load): nothing to say.
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                return ExitCode::from(125);
            }
            Err(e) => {
                eprintln!(
                    "mcpwall: sandbox: cannot read the plan: {e}; the server was not started"
                );
                return ExitCode::from(126);
            }
        },
    };
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

/// The plan as the command line gives it.
enum Given {
    Now(Option<Plan>),
    OnStdin,
}

fn parse(args: &[OsString]) -> Result<(u32, Given, Vec<OsString>), String> {
    let [parent, plan, dashes, command @ ..] = args else {
        return Err("usage: mcpwall __sandbox-exec PARENT_PID PLAN -- PROGRAM [ARGS...]".into());
    };
    let parent = parent
        .to_str()
        .and_then(|p| p.parse().ok())
        .ok_or("the parent pid is not a number")?;
    let plan = plan.to_str().ok_or("the plan is not UTF-8")?;
    let plan = match plan {
        NO_PLAN => Given::Now(None),
        PLAN_ON_STDIN => Given::OnStdin,
        json => Given::Now(Some(
            serde_json::from_str(json).map_err(|e| format!("unreadable plan: {e}"))?,
        )),
    };
    if dashes != "--" || command.is_empty() {
        return Err("no server command after `--`".into());
    }
    Ok((parent, plan, command.to_vec()))
}

/// The [`plan_message`] on standard input; `UnexpectedEof` when mcpwall sent none.
fn read_plan() -> std::io::Result<Option<Plan>> {
    let mut len = [0u8; 4];
    crate::platform::read_stdin_exact(&mut len)?;
    let len = u32::from_le_bytes(len) as usize;
    if len == 0 {
        return Ok(None);
    }
    if len > MAX_PLAN_BYTES {
        return Err(std::io::Error::other(format!("a plan of {len} bytes")));
    }
    let mut json = vec![0u8; len];
    crate::platform::read_stdin_exact(&mut json)?;
    serde_json::from_slice(&json)
        .map(Some)
        .map_err(|e| std::io::Error::other(format!("unreadable plan: {e}")))
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
