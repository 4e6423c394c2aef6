//! macOS and Windows: applying a [`Plan`] before the server starts.
//!
//! macOS: the plan becomes a Seatbelt profile ([`super::seatbelt`]) and the server
//! is started through `/usr/bin/sandbox-exec -p PROFILE`, which applies it before `exec`.
//! Windows: nothing is applied; every caller is told so (`shortfalls`), and a plan that
//! is `required` refuses to start.

use std::ffi::OsString;
use std::io;

use super::sandbox_plan::{Plan, Support};

/// What the helper did; `shortfalls` says what of the plan it could not do.
#[derive(Debug, Default)]
pub struct Entered {
    pub shortfalls: Vec<String>,
    /// A command to `exec` in front of the server (`sandbox-exec -p PROFILE`).
    pub wrapper: Option<Vec<OsString>>,
}

/// What this system offers.
pub fn sandbox_support() -> Support {
    let seatbelt = cfg!(target_os = "macos") && std::path::Path::new(SANDBOX_EXEC).exists();
    Support {
        paths: seatbelt,
        confine: seatbelt,
        network_none: seatbelt,
        network_loopback: seatbelt,
        landlock_abi: 0,
    }
}

const SANDBOX_EXEC: &str = "/usr/bin/sandbox-exec";

/// No parent-death signal here: on macOS the server's end of input is its only cue.
pub fn tie_to_parent(_parent: u32) -> io::Result<()> {
    Ok(())
}

/// macOS: the `sandbox-exec` wrapper for `plan`; elsewhere: only shortfalls.
pub fn enter_sandbox(plan: &Plan) -> io::Result<Entered> {
    let mut entered = Entered::default();
    if cfg!(target_os = "macos") && std::path::Path::new(SANDBOX_EXEC).exists() {
        entered.wrapper = Some(vec![
            SANDBOX_EXEC.into(),
            "-p".into(),
            super::seatbelt::profile(plan).into(),
        ]);
    } else {
        entered.shortfalls.push(
            "this system has no sandbox mcpwall can apply: the server runs unsandboxed".into(),
        );
    }
    Ok(entered)
}
