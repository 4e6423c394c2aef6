//! Unix: process groups and signals for the server, the status flags of our own stdin
//! and stdout, file modes, `O_NOFOLLOW` and `renameat2`. Through rustix's safe wrappers,
//! so mcpwall itself has no `unsafe` for them.

use std::fs::{DirBuilder, File, OpenOptions};
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::process::ExitStatus;

use rustix::fs::{FileType, OFlags};
use rustix::process::{Pid, Signal};

/// Send `signal` (a signal number, `libc::SIGTERM` say) to every process of `group`.
/// Errors are returned, not panicked: a group that has emptied gives `ESRCH`.
pub fn signal_group(group: i32, signal: i32) -> io::Result<()> {
    let pid = Pid::from_raw(group).ok_or_else(|| invalid("process group id must be positive"))?;
    let signal = Signal::from_named_raw(signal).ok_or_else(|| invalid("unknown signal number"))?;
    rustix::process::kill_process_group(pid, signal).map_err(io::Error::from)
}

/// Whether a process of `group` still exists.
pub fn group_exists(group: i32) -> bool {
    Pid::from_raw(group).is_some_and(|pid| rustix::process::test_kill_process_group(pid).is_ok())
}

/// Whether process `pid` still exists: a signal-0 probe, where a process we may not
/// signal (`EPERM`) exists too. A reused pid reads as running.
pub fn process_exists(pid: u32) -> bool {
    let Some(pid) = i32::try_from(pid).ok().and_then(Pid::from_raw) else {
        return false;
    };
    match rustix::process::test_kill_process(pid) {
        Ok(()) => true,
        Err(e) => e != rustix::io::Errno::SRCH,
    }
}

/// Whether `fd` is a pipe or a socket (not a file or a terminal).
pub fn is_pipe_or_socket(fd: BorrowedFd<'_>) -> bool {
    rustix::fs::fstat(fd).is_ok_and(|st| {
        matches!(
            FileType::from_raw_mode(st.st_mode),
            FileType::Fifo | FileType::Socket
        )
    })
}

/// Whether `fd` is a pipe.
pub fn is_fifo(fd: BorrowedFd<'_>) -> bool {
    rustix::fs::fstat(fd).is_ok_and(|st| FileType::from_raw_mode(st.st_mode) == FileType::Fifo)
}

/// The file status flags of an open file description (`O_NONBLOCK`, `O_APPEND`, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatusFlags(OFlags);

impl StatusFlags {
    pub fn of(fd: impl AsFd) -> io::Result<StatusFlags> {
        rustix::fs::fcntl_getfl(fd)
            .map(StatusFlags)
            .map_err(io::Error::from)
    }

    /// Give `fd` these flags.
    pub fn apply(self, fd: impl AsFd) -> io::Result<()> {
        rustix::fs::fcntl_setfl(fd, self.0).map_err(io::Error::from)
    }

    pub fn with_nonblocking(self) -> StatusFlags {
        StatusFlags(self.0 | OFlags::NONBLOCK)
    }

    pub fn is_nonblocking(self) -> bool {
        self.0.contains(OFlags::NONBLOCK)
    }
}

pub const SIGINT: i32 = libc::SIGINT;
pub const SIGTERM: i32 = libc::SIGTERM;
pub const SIGKILL: i32 = libc::SIGKILL;
pub const SIGHUP: i32 = libc::SIGHUP;

/// The server and everything it starts: a process group of its own, so that a signal
/// reaches the whole tree (`npx` → `node`), and a terminal's Ctrl-C reaches only mcpwall,
/// which forwards it once.
#[derive(Debug, Clone, Copy)]
pub struct ProcessTree {
    group: i32,
}

impl ProcessTree {
    /// Make the command start a new process group.
    pub fn prepare(command: &mut tokio::process::Command) {
        command.process_group(0);
    }

    /// The tree of the child just spawned from a [`Self::prepare`]d command.
    pub fn adopt(child: &tokio::process::Child) -> io::Result<ProcessTree> {
        let pid = child
            .id()
            .ok_or_else(|| invalid("the server exited before it could be tracked"))?;
        Ok(ProcessTree { group: pid as i32 })
    }

    /// Send `signal` to every process of the tree. Fails once the tree has emptied.
    pub fn signal(&self, signal: i32) -> io::Result<()> {
        signal_group(self.group, signal)
    }

    /// Whether a process of the tree still runs.
    pub fn exists(&self) -> bool {
        group_exists(self.group)
    }
}

/// Forward the stop requests mcpwall receives (SIGINT, SIGTERM, SIGHUP) to `tx`.
/// Must be called inside a tokio runtime.
pub fn forward_stop_requests(tx: tokio::sync::mpsc::UnboundedSender<i32>) -> io::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    for kind in [
        SignalKind::interrupt(),
        SignalKind::terminate(),
        SignalKind::hangup(),
    ] {
        let mut stream = signal(kind)?;
        let tx = tx.clone();
        tokio::spawn(async move {
            while stream.recv().await.is_some() {
                if tx.send(kind.as_raw_value()).is_err() {
                    break;
                }
            }
        });
    }
    Ok(())
}

/// The program a client's `command` names: on Unix, `execvp` searches `PATH` itself.
#[inline]
pub fn resolve_program(program: &std::ffi::OsStr) -> std::ffi::OsString {
    program.to_owned()
}

/// Whether `program` names an executable file, as `execvp` would look it up: a path with a
/// slash as it is, a bare name in each directory of `PATH` (the server's own, when its
/// environment sets one).
pub fn program_exists(
    program: &std::ffi::OsStr,
    env: &[(std::ffi::OsString, std::ffi::OsString)],
) -> bool {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &std::path::Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.as_bytes().contains(&b'/') {
        // One that is there but cannot run gets its own error from the helper's exec.
        return std::path::Path::new(program).exists();
    }
    let path = env
        .iter()
        .rev()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.clone())
        .or_else(|| std::env::var_os("PATH"))
        .unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    std::env::split_paths(&path).any(|dir| executable(&dir.join(program)))
}

/// This program, to start the sandbox helper. On Linux, the running binary through
/// `/proc/self/exe`, which stays valid when the file is replaced on disk while mcpwall
/// runs. It is opened once and executed through its descriptor: under valgrind (the
/// instruction counts of docs/performance.md) `/proc/self/exe` is valgrind's own tool,
/// which refuses to be started, while opening it gives the program valgrind runs.
pub fn own_executable() -> std::path::PathBuf {
    if cfg!(target_os = "linux") {
        static RUNNING: std::sync::OnceLock<Option<File>> = std::sync::OnceLock::new();
        return match RUNNING.get_or_init(|| File::open("/proc/self/exe").ok()) {
            // Still open in the forked child when `execve` resolves the path (the
            // descriptor is close-on-exec, so the helper does not inherit it).
            Some(file) => format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(file)).into(),
            None => "/proc/self/exe".into(),
        };
    }
    std::env::current_exe().unwrap_or_else(|_| "mcpwall".into())
}

/// Fill `buf` from standard input, unbuffered: the sandbox helper reads its plan there and
/// must not take a byte more, since what follows in the pipe is the server's input.
pub fn read_stdin_exact(mut buf: &mut [u8]) -> io::Result<()> {
    let stdin = std::io::stdin();
    while !buf.is_empty() {
        match rustix::io::read(stdin.as_fd(), &mut *buf) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => buf = &mut buf[n..],
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// The signal that ended a process, if one did.
pub fn exit_signal(status: ExitStatus) -> Option<i32> {
    std::os::unix::process::ExitStatusExt::signal(&status)
}

/// A pipe the proxy may write short frames into directly (`proxy::queue`).
pub type DirectPipe = OwnedFd;

/// Writes this short are atomic on a pipe (POSIX `PIPE_BUF`): whole or not at all.
pub const PIPE_BUF: usize = libc::PIPE_BUF;

/// The server's stdin as a [`DirectPipe`] (tokio made it non-blocking).
pub fn direct_pipe(stdin: &tokio::process::ChildStdin) -> Option<DirectPipe> {
    stdin.as_fd().try_clone_to_owned().ok()
}

/// Write `bytes` (at most [`PIPE_BUF`]) into `pipe` now: how many were written, all or
/// none; none when the pipe is full or broken.
#[inline]
pub fn write_direct(pipe: &DirectPipe, bytes: &[u8]) -> usize {
    loop {
        match rustix::io::write(pipe, bytes) {
            Ok(n) => return n,
            Err(rustix::io::Errno::INTR) => continue,
            Err(_) => return 0,
        }
    }
}

/// Directories created with `builder` are owner-only (0700).
pub fn owner_only_dir(builder: &mut DirBuilder) -> &mut DirBuilder {
    builder.mode(0o700)
}

/// Files created with `options` are owner-only (0600), and are opened without following
/// a symlink at the last component (`O_NOFOLLOW`), closed on exec.
pub fn owner_only_nofollow(options: &mut OpenOptions) -> &mut OpenOptions {
    options
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
}

/// Files created with `options` are owner-only (0600).
pub fn owner_only_file(options: &mut OpenOptions) -> &mut OpenOptions {
    options.mode(0o600)
}

/// Temporary files made with `builder` are owner-only (0600).
pub fn owner_only_temp<'b, 'p, 's>(
    builder: &'b mut tempfile::Builder<'p, 's>,
) -> &'b mut tempfile::Builder<'p, 's> {
    builder.permissions(std::fs::Permissions::from_mode(0o600))
}

/// Opened without following a symlink at the last component, closed on exec.
pub fn nofollow(options: &mut OpenOptions) -> &mut OpenOptions {
    options.custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
}

/// Take group and other access away from `path` (a directory or file that mcpwall
/// created, or an older mcpwall created looser; through a symlink, what it names).
pub fn restrict_to_owner(path: &Path) -> io::Result<()> {
    let meta = std::fs::metadata(path)?;
    if meta.permissions().mode() & 0o077 == 0 {
        return Ok(());
    }
    let mode = if meta.is_dir() { 0o700 } else { 0o600 };
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
}

/// Whether group and others have no access to `path` (mode `0?00`). For tests.
pub fn is_owner_only(path: &Path) -> io::Result<bool> {
    Ok(std::fs::metadata(path)?.permissions().mode() & 0o077 == 0)
}

/// Assert that group and others have no access to `path`. For tests.
#[cfg(test)]
pub fn assert_owner_only(path: &Path) {
    let mode = std::fs::metadata(path).unwrap().permissions().mode();
    assert_eq!(mode & 0o077, 0, "{path:?} has mode {mode:o}");
}

/// [`restrict_to_owner`] for a file already open.
pub fn restrict_file_to_owner(file: &File, _path: &Path) -> io::Result<()> {
    let meta = file.metadata()?;
    if meta.permissions().mode() & 0o077 == 0 {
        return Ok(());
    }
    file.set_permissions(std::fs::Permissions::from_mode(0o600))
}

/// Take an exclusive advisory lock on `file` (`flock`), waiting for another holder.
/// Released by [`unlock`] or when the file is closed (also when the process dies).
pub fn lock_exclusive(file: &File) -> io::Result<()> {
    rustix::fs::flock(file, rustix::fs::FlockOperation::LockExclusive).map_err(io::Error::from)
}

/// Release [`lock_exclusive`]'s lock.
pub fn unlock(file: &File) -> io::Result<()> {
    rustix::fs::flock(file, rustix::fs::FlockOperation::Unlock).map_err(io::Error::from)
}

/// Read into `buf` from `offset` (`pread`: the file position is unchanged).
pub fn read_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    std::os::unix::fs::FileExt::read_at(file, buf, offset)
}

/// Write all of `buf` at `offset` (`pwrite`), on a file not opened for appending.
pub fn write_all_at(file: &File, buf: &[u8], offset: u64) -> io::Result<()> {
    std::os::unix::fs::FileExt::write_all_at(file, buf, offset)
}

/// Whether a lock failed because the file system has none (some network mounts).
pub fn lock_unsupported(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::Unsupported || e.raw_os_error() == Some(libc::ENOLCK)
}

/// Whether two open files or names are the same file (device and inode).
pub fn same_file(a: &std::fs::Metadata, b: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    a.dev() == b.dev() && a.ino() == b.ino()
}

/// Replace `target` by `temp` (a rename: atomic, the old file's readers keep it).
pub fn replace(temp: &Path, target: &Path) -> io::Result<()> {
    std::fs::rename(temp, target)
}

/// Whether this process runs as root.
pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// The user id this process acts as (what decides which files it may change).
pub fn effective_uid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// Windows' long form of a path with 8.3 short names: Unix file systems have none, so
/// there is nothing to expand.
pub fn long_path_name(_path: &str) -> Option<String> {
    None
}

/// Flush a directory's entries (a rename is durable only once its directory is).
pub fn fsync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Atomically swap the names `a` and `b` (both must exist). Returns `Ok(false)` where the
/// OS or file system has no such call; the caller then falls back to [`replace`].
pub fn exchange(a: &Path, b: &Path) -> io::Result<bool> {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        use rustix::fs::{CWD, RenameFlags, renameat_with};
        match renameat_with(CWD, a, CWD, b, RenameFlags::EXCHANGE) {
            Ok(()) => Ok(true),
            Err(e) => {
                let err = io::Error::from(e);
                match err.raw_os_error() {
                    Some(libc::EINVAL | libc::ENOSYS | libc::ENOTSUP) => Ok(false),
                    _ => Err(err),
                }
            }
        }
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    {
        let _ = (a, b);
        Ok(false)
    }
}

fn invalid(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, what.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;
    use std::time::{Duration, Instant};

    /// A live process exists; one that exited and was reaped does not (the holder check
    /// behind `mcpwall approve`).
    #[test]
    fn a_reaped_process_no_longer_exists() {
        assert!(process_exists(std::process::id()));
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        assert!(!process_exists(pid));
        assert!(!process_exists(0), "0 is not a process");
    }

    /// A signal reaches every member of the group, and the group is then gone.
    #[test]
    fn a_signalled_group_ends_whole() {
        let mut leader = std::process::Command::new("sh")
            .args(["-c", "sleep 30 & sleep 30"])
            .process_group(0)
            .spawn()
            .unwrap();
        let group = leader.id() as i32;
        assert!(group_exists(group));
        signal_group(group, libc::SIGKILL).unwrap();
        leader.wait().unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while group_exists(group) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(
            !group_exists(group),
            "the background sleep outlived the signal"
        );
        assert!(
            signal_group(group, libc::SIGTERM).is_err(),
            "an empty group is an error"
        );
        assert!(signal_group(0, libc::SIGTERM).is_err(), "0 is not a group");
    }

    #[test]
    fn pipes_are_told_from_files_and_flags_round_trip() {
        let (reader, _writer) = std::io::pipe().unwrap();
        assert!(is_pipe_or_socket(reader.as_fd()));
        assert!(is_fifo(reader.as_fd()));
        let file = tempfile::tempfile().unwrap();
        assert!(!is_pipe_or_socket(file.as_fd()));
        assert!(!is_fifo(file.as_fd()));

        let before = StatusFlags::of(&reader).unwrap();
        assert!(!before.is_nonblocking());
        before.with_nonblocking().apply(&reader).unwrap();
        assert!(StatusFlags::of(&reader).unwrap().is_nonblocking());
        before.apply(&reader).unwrap();
        assert_eq!(StatusFlags::of(&reader).unwrap(), before);
    }
}
