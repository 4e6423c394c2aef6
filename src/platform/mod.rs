//! The operating-system calls mcpwall makes beyond what std and tokio offer: process
//! groups and signals for the server, and the status flags of our own stdin and stdout.
//! They go through rustix's safe wrappers, so mcpwall itself has no `unsafe` for them;
//! a port to another system (issue #28: Windows) replaces this module.

use std::io;
use std::os::fd::{AsFd, BorrowedFd};

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

fn invalid(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, what.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;
    use std::time::{Duration, Instant};

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
