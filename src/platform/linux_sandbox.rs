//! Linux: applying a [`Plan`] to the calling process before it `exec`s the server.
//!
//! Runs in the sandbox helper (`mcpwall __sandbox-exec`), a freshly started, single-threaded
//! process (a new user namespace requires one thread), so nothing else in mcpwall is
//! affected and no `pre_exec` closure is needed. In order:
//!
//! 1. the parent-death signal: the server is killed when mcpwall dies, even by SIGKILL;
//! 2. a user + mount namespace (+ an empty network namespace for `network: none`), the
//!    caller's uid and gid mapped to themselves;
//! 3. every hidden path that exists covered by an empty, read-only mount (a `tmpfs` for a
//!    directory, `/dev/null` for a file or socket), every read-only path bind-mounted on
//!    itself read-only, shallowest first; a mount cannot be renamed, removed or written
//!    through, whatever the spelling that reaches it;
//! 4. Landlock: no mount changes (so the server cannot lift the covers), no ptrace or
//!    signals out of the sandbox, writes only beneath the writable places with
//!    `confine_writes`, and, where the network namespace failed, no TCP for `network: none`.
//!
//! Why mounts for the deny lists and not Landlock alone: Landlock only grants, beneath
//! directories, so denying `~/.ssh` means granting every sibling instead, and then no file
//! can be created directly in the home directory or in the project (a new file has no
//! rule of its own). A mount covers exactly one path and leaves its siblings alone.

use std::io;
use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset,
    RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope,
};
use rustix::mount::{MountFlags, MountPropagationFlags};

use super::sandbox_plan::{Network, Plan, Support};

/// The newest Landlock ABI this code asks for; the crate downgrades it to the kernel's.
const WANTED: ABI = ABI::V6;

/// What the kernel offers, read without changing anything (no namespace is created: the
/// caller may be multi-threaded).
pub fn sandbox_support() -> Support {
    let landlock_abi = landlock_abi();
    let userns = user_namespaces_allowed();
    Support {
        paths: userns,
        confine: landlock_abi > 0,
        network_none: userns || landlock_abi >= 4,
        network_loopback: false,
        landlock_abi,
    }
}

/// The highest ABI version a ruleset can be created for (0: no Landlock).
fn landlock_abi() -> u8 {
    for (abi, n) in [
        (ABI::V7, 7),
        (ABI::V6, 6),
        (ABI::V5, 5),
        (ABI::V4, 4),
        (ABI::V3, 3),
        (ABI::V2, 2),
        (ABI::V1, 1),
    ] {
        let created = Ruleset::default()
            .set_compatibility(CompatLevel::HardRequirement)
            .handle_access(AccessFs::from_all(abi))
            .and_then(|r| r.create());
        if created.is_ok() {
            return n;
        }
    }
    0
}

/// Whether this user may create a user namespace: root may; otherwise the sysctls that
/// distributions use to forbid it must not.
fn user_namespaces_allowed() -> bool {
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .ok()
            .map(|s| s.trim().to_string())
    };
    if read("/proc/sys/user/max_user_namespaces").as_deref() == Some("0") {
        return false;
    }
    if rustix::process::geteuid().is_root() {
        return true;
    }
    if read("/proc/sys/kernel/unprivileged_userns_clone").as_deref() == Some("0") {
        return false;
    }
    // Ubuntu 24.04 and later: unprivileged namespaces exist but hold no capabilities.
    read("/proc/sys/kernel/apparmor_restrict_unprivileged_userns").as_deref() != Some("1")
}

/// What the helper did; `shortfalls` says what of the plan it could not do.
#[derive(Debug, Default)]
pub struct Entered {
    pub shortfalls: Vec<String>,
    /// A command to `exec` in front of the server (macOS's `sandbox-exec`); none here.
    pub wrapper: Option<Vec<std::ffi::OsString>>,
}

/// The calling process (which becomes the server) is killed when its parent, mcpwall,
/// dies, even by SIGKILL. `parent` is mcpwall's pid: if it is gone already, fail.
pub fn tie_to_parent(parent: u32) -> io::Result<()> {
    rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))?;
    if rustix::process::getppid().map(|p| p.as_raw_nonzero().get() as u32) != Some(parent) {
        return Err(io::Error::other("mcpwall exited before the server started"));
    }
    Ok(())
}

/// Restrict the calling process as `plan` says.
pub fn enter_sandbox(plan: &Plan) -> io::Result<Entered> {
    let mut entered = Entered::default();
    let wants_paths = !(plan.hidden.is_empty() && plan.read_only.is_empty());
    let wants_netns = plan.network == Network::None;
    let mut netns = false;
    if wants_paths || wants_netns {
        match enter_namespaces(wants_netns) {
            Ok(()) => {
                netns = wants_netns;
                if let Err(e) = cover(plan) {
                    entered
                        .shortfalls
                        .push(format!("protected paths could not be covered: {e}"));
                }
            }
            Err(e) => entered.shortfalls.push(format!(
                "protected paths are not hidden or read-only: no user namespace ({e})"
            )),
        }
    }
    if plan.network == Network::Loopback {
        entered.shortfalls.push(
            "`network: loopback` is not enforced on Linux (no unprivileged per-address \
             filter): the server keeps the network"
                .into(),
        );
    }
    landlock(plan, !netns && wants_netns, &mut entered)?;
    Ok(entered)
}

/// A user and a mount namespace (and an empty network namespace), uid and gid mapped to
/// themselves so files keep their owners.
fn enter_namespaces(netns: bool) -> io::Result<()> {
    use rustix::thread::UnshareFlags;
    let uid = rustix::process::getuid().as_raw();
    let gid = rustix::process::getgid().as_raw();
    let mut flags = UnshareFlags::NEWUSER | UnshareFlags::NEWNS;
    if netns {
        flags |= UnshareFlags::NEWNET;
    }
    // SAFETY: the helper is single-threaded (it runs before any thread is started) and
    // FILES is not among the flags, so no thread can observe a changed descriptor table.
    unsafe { rustix::thread::unshare_unsafe(flags) }?;
    std::fs::write("/proc/self/setgroups", "deny")?;
    std::fs::write("/proc/self/uid_map", format!("{uid} {uid} 1"))?;
    std::fs::write("/proc/self/gid_map", format!("{gid} {gid} 1"))?;
    // Our mounts stay in this namespace.
    rustix::mount::mount_change(
        "/",
        MountPropagationFlags::PRIVATE | MountPropagationFlags::REC,
    )?;
    Ok(())
}

/// Cover hidden paths with empty read-only mounts and re-mount read-only paths read-only,
/// shallowest first (a hidden path inside a read-only directory is covered after it).
fn cover(plan: &Plan) -> io::Result<()> {
    let mut ops: Vec<(&PathBuf, bool)> = plan
        .hidden
        .iter()
        .map(|p| (p, true))
        .chain(plan.read_only.iter().map(|p| (p, false)))
        .collect();
    // Each path's depth once: counting components inside the comparisons was a fifth
    // of the helper's instructions (callgrind, the default plan's 77 paths).
    ops.sort_by_cached_key(|(p, _)| p.components().count());
    // One path that cannot be covered does not leave the others uncovered.
    let mut failed = Vec::new();
    for (path, hide) in ops {
        // A path that does not exist has nothing to cover (see docs/threat-model.md).
        let Ok(meta) = std::fs::metadata(path) else {
            continue;
        };
        let done = if hide {
            hide_path(path, meta.is_dir())
        } else {
            make_read_only(path)
        };
        if let Err(e) = done {
            failed.push(format!("{}: {e}", path.display()));
        }
    }
    // A working directory inside a covered path would still reach what is under the
    // cover: enter it again, through the new mounts.
    if let Ok(cwd) = std::env::current_dir() {
        let _ = std::env::set_current_dir(cwd);
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(io::Error::other(failed.join("; ")))
    }
}

fn hide_path(path: &Path, dir: bool) -> io::Result<()> {
    let flags = MountFlags::RDONLY | MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC;
    if dir {
        rustix::mount::mount("mcpwall-hidden", path, "tmpfs", flags, c"size=4k,mode=0500")?;
    } else {
        rustix::mount::mount_bind("/dev/null", path)?;
        rustix::mount::mount_remount(path, MountFlags::BIND | flags, "")?;
    }
    Ok(())
}

fn make_read_only(path: &Path) -> io::Result<()> {
    rustix::mount::mount_bind_recursive(path, path)?;
    rustix::mount::mount_remount(
        path,
        MountFlags::BIND | MountFlags::RDONLY | MountFlags::NOSUID | MountFlags::NODEV,
        "",
    )?;
    Ok(())
}

/// The Landlock part: the covers stay on, nothing leaves the sandbox by ptrace or signal,
/// and writes stay in the writable places when they are confined.
fn landlock(plan: &Plan, tcp_fallback: bool, entered: &mut Entered) -> io::Result<()> {
    let fail = |e: landlock::RulesetError| io::Error::other(e.to_string());
    let all = AccessFs::from_all(WANTED);
    let mut ruleset = Ruleset::default().handle_access(all).map_err(fail)?;
    ruleset = ruleset
        .scope(Scope::AbstractUnixSocket | Scope::Signal)
        .map_err(fail)?;
    if tcp_fallback {
        ruleset = ruleset
            .handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)
            .map_err(fail)?;
    }
    let mut created = ruleset.create().map_err(fail)?;
    let root_access = if plan.writable.is_some() {
        AccessFs::from_read(WANTED)
    } else {
        all
    };
    created = created
        .add_rule(PathBeneath::new(
            PathFd::new("/").map_err(|e| io::Error::other(e.to_string()))?,
            root_access,
        ))
        .map_err(fail)?;
    for place in plan.writable.iter().flatten() {
        // A writable place that does not exist (no npm cache yet) is skipped.
        let Ok(fd) = PathFd::new(place) else { continue };
        let access = if place.is_dir() {
            all
        } else {
            AccessFs::from_file(WANTED)
        };
        created = created
            .add_rule(PathBeneath::new(fd, access))
            .map_err(fail)?;
    }
    let status = created.restrict_self().map_err(fail)?;
    if status.ruleset == RulesetStatus::NotEnforced {
        if plan.writable.is_some() {
            entered
                .shortfalls
                .push("writes are not confined: this kernel has no Landlock".into());
        }
        if tcp_fallback {
            entered.shortfalls.push(
                "`network: none` is not enforced: no network namespace and no Landlock".into(),
            );
        }
        if !entered.shortfalls.is_empty() || !plan.hidden.is_empty() {
            entered.shortfalls.push(
                "without Landlock, a server running as root in its namespace could lift \
                 the covers"
                    .into(),
            );
        }
    } else if tcp_fallback {
        entered.shortfalls.push(
            "`network: none` holds for TCP only (Landlock; no network namespace): UDP is open"
                .into(),
        );
    }
    Ok(())
}
