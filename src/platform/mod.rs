//! The operating-system calls mcpwall makes beyond what std and tokio offer, one
//! implementation per system family, chosen at compile time (no indirection at run time):
//!
//! | need | Unix ([`unix`]) | Windows (`windows`) |
//! |---|---|---|
//! | end the server's whole tree | its own process group, signalled | a Job object, terminated |
//! | ask the server to stop | SIGTERM to the group | Ctrl-Break to its console process group |
//! | write a short frame straight into a pipe | `write(2)` on a non-blocking duplicate | not offered (queued) |
//! | owner-only files and directories | modes 0600 / 0700 | a protected DACL granting the owner alone |
//! | open without following a link | `O_NOFOLLOW` | not offered (links need privilege to create) |
//! | replace a file atomically | `rename(2)`, `renameat2(RENAME_EXCHANGE)` | `MoveFileEx`, retried while the file is held open |
//! | is a process still running | signal 0 (`ESRCH` = gone) | `OpenProcess` + `GetExitCodeProcess` |
//! | know when a directory's entries change | Linux: inotify (`dir_watch`); elsewhere none | none |
//! | sandbox a server | Linux: namespaces, mounts, Landlock (`linux_sandbox`); macOS: `sandbox-exec` (`other_sandbox`) | none (`other_sandbox` says so) |
//!
//! The rest of the code base uses only what this module exports, under the same names on
//! every system.

#[cfg(unix)]
mod unix;
#[cfg(unix)]
pub use unix::*;

#[cfg(windows)]
mod windows;
#[cfg(windows)]
pub use windows::*;

mod dir_watch;
pub use dir_watch::DirWatch;

// The sandbox every server starts in (`crate::sandbox`): what a plan is, the Seatbelt
// profile it becomes on macOS, and the calls that apply it.
#[cfg(target_os = "linux")]
mod linux_sandbox;
pub mod sandbox_plan;
pub mod seatbelt;
#[cfg(target_os = "linux")]
pub use linux_sandbox::{Entered, enter_sandbox, sandbox_support, tie_to_parent};
#[cfg(not(target_os = "linux"))]
mod other_sandbox;
#[cfg(not(target_os = "linux"))]
pub use other_sandbox::{Entered, enter_sandbox, sandbox_support, tie_to_parent};

/// The name a log line gives a stop request.
pub fn signal_name(signal: i32) -> &'static str {
    match signal {
        SIGKILL => "SIGKILL",
        SIGTERM => "SIGTERM",
        SIGINT => "SIGINT",
        SIGHUP => "SIGHUP",
        _ => "a signal",
    }
}

/// The user's home directory as the environment gives it: `HOME`, or `USERPROFILE` where
/// `HOME` is unset (Windows).
pub fn home_var() -> Option<std::ffi::OsString> {
    std::env::var_os("HOME").or_else(|| std::env::var_os("USERPROFILE"))
}
