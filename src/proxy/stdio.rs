//! Our own stdin and stdout as async streams.
//!
//! `tokio::io::stdin()` does every read on the blocking thread pool, a thread hop per
//! read that shows up directly in round-trip latency. When fd 0/1 are pipes or sockets
//! (what MCP clients give us) we register duplicates of them with the reactor instead,
//! in non-blocking mode, and put the original flags back when done ([`StdioGuard`]).
//! Anything else (a file, a terminal) falls back to tokio's blocking adapters, because
//! setting `O_NONBLOCK` on a terminal would leak into the shell after we exit.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::pin::Pin;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::unix::pipe;

pub type Reader = Pin<Box<dyn AsyncRead + Send>>;
pub type Writer = Pin<Box<dyn AsyncWrite + Send>>;

/// Restores the file status flags of fd 0 and 1 on drop.
#[derive(Debug)]
pub struct StdioGuard {
    saved: Vec<(i32, libc::c_int)>,
}

impl Drop for StdioGuard {
    fn drop(&mut self) {
        for &(fd, flags) in &self.saved {
            // SAFETY: fcntl(F_SETFL) on a descriptor number has no memory effects; if
            // the fd is closed it fails with EBADF, which is harmless here.
            unsafe {
                libc::fcntl(fd, libc::F_SETFL, flags);
            }
        }
    }
}

fn flags(fd: BorrowedFd<'_>) -> io::Result<libc::c_int> {
    // SAFETY: F_GETFL on a valid borrowed fd.
    let r = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// The file type bits of `fd` (`S_IFIFO`, `S_IFSOCK`, ...), or 0 if fstat fails.
fn file_type(fd: BorrowedFd<'_>) -> libc::mode_t {
    // SAFETY: all-zero is a valid `stat`; fstat writes into it.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: valid fd, valid pointer.
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
        return 0;
    }
    st.st_mode & libc::S_IFMT
}

fn is_pipe_or_socket(fd: BorrowedFd<'_>) -> bool {
    matches!(file_type(fd), libc::S_IFIFO | libc::S_IFSOCK)
}

/// A non-blocking duplicate of `fd`, or `None` when it is not a pipe or socket.
fn nonblocking_dup(fd: BorrowedFd<'_>, guard: &mut StdioGuard) -> Option<OwnedFd> {
    if !is_pipe_or_socket(fd) {
        return None;
    }
    let original = flags(fd).ok()?;
    let dup = fd.try_clone_to_owned().ok()?;
    // SAFETY: F_SETFL on a valid fd we own.
    if unsafe { libc::fcntl(dup.as_raw_fd(), libc::F_SETFL, original | libc::O_NONBLOCK) } != 0 {
        return None;
    }
    guard.saved.push((fd.as_raw_fd(), original));
    Some(dup)
}

/// Our stdin and stdout as async streams.
pub struct Stdio {
    pub reader: Reader,
    pub writer: Writer,
    /// Restores the flags of fd 0 and 1 when dropped.
    pub guard: StdioGuard,
}

/// Our stdin and stdout as async streams. Must be called inside a tokio runtime.
pub fn open() -> io::Result<Stdio> {
    let mut guard = StdioGuard { saved: Vec::new() };
    let stdin = io::stdin();
    let reader: Reader = match nonblocking_dup(stdin.as_fd(), &mut guard) {
        Some(fd) => Box::pin(pipe::Receiver::from_owned_fd_unchecked(fd)?),
        None => Box::pin(tokio::io::stdin()),
    };
    let stdout = io::stdout();
    let writer: Writer = match nonblocking_dup(stdout.as_fd(), &mut guard) {
        Some(fd) => Box::pin(pipe::Sender::from_owned_fd_unchecked(fd)?),
        None => Box::pin(tokio::io::stdout()),
    };
    Ok(Stdio {
        reader,
        writer,
        guard,
    })
}
