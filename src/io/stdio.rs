//! Our own stdin and stdout as async streams.
//!
//! `tokio::io::stdin()` does every read on the blocking thread pool, a thread hop per
//! read that shows up directly in round-trip latency. When fd 0/1 are pipes or sockets
//! (what MCP clients give us) we register duplicates of them with the reactor instead,
//! in non-blocking mode, and put the original flags back when done ([`StdioGuard`]).
//! Anything else (a file, a terminal) falls back to tokio's blocking adapters, because
//! setting `O_NONBLOCK` on a terminal would leak into the shell after we exit.
//!
//! On Windows, anonymous pipes and consoles have no readiness to wait for: tokio's
//! adapters (a blocking read or write on its thread pool) serve both.

use std::io;
#[cfg(unix)]
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::pin::Pin;

use tokio::io::{AsyncRead, AsyncWrite};
#[cfg(unix)]
use tokio::net::unix::pipe;

use crate::platform::DirectPipe;
#[cfg(unix)]
use crate::platform::{self, StatusFlags};

pub type Reader = Pin<Box<dyn AsyncRead + Send>>;
pub type Writer = Pin<Box<dyn AsyncWrite + Send>>;

/// Restores the file status flags of our stdin and stdout on drop.
#[derive(Debug)]
pub struct StdioGuard {
    #[cfg(unix)]
    saved: Vec<(Std, StatusFlags)>,
}

#[cfg(unix)]
#[derive(Debug, Clone, Copy)]
enum Std {
    In,
    Out,
}

#[cfg(unix)]
impl Drop for StdioGuard {
    fn drop(&mut self) {
        for &(which, flags) in &self.saved {
            // A closed descriptor fails with EBADF, which is harmless here.
            let _ = match which {
                Std::In => flags.apply(io::stdin()),
                Std::Out => flags.apply(io::stdout()),
            };
        }
    }
}

/// A non-blocking duplicate of `fd`, or `None` when it is not a pipe or socket.
#[cfg(unix)]
fn nonblocking_dup(which: Std, fd: BorrowedFd<'_>, guard: &mut StdioGuard) -> Option<OwnedFd> {
    if !platform::is_pipe_or_socket(fd) {
        return None;
    }
    let original = StatusFlags::of(fd).ok()?;
    let dup = fd.try_clone_to_owned().ok()?;
    original.with_nonblocking().apply(&dup).ok()?;
    guard.saved.push((which, original));
    Some(dup)
}

/// Our stdin and stdout as async streams.
pub struct Stdio {
    pub reader: Reader,
    pub writer: Writer,
    /// A duplicate of the descriptor `writer` writes to, when that is a pipe (see
    /// `Queue::write_to_pipe`).
    pub writer_pipe: Option<DirectPipe>,
    /// Restores the flags of fd 0 and 1 when dropped.
    pub guard: StdioGuard,
}

/// Our stdin and stdout as async streams. Must be called inside a tokio runtime.
#[cfg(windows)]
pub fn open() -> io::Result<Stdio> {
    Ok(Stdio {
        reader: Box::pin(tokio::io::stdin()),
        writer: Box::pin(tokio::io::stdout()),
        writer_pipe: None,
        guard: StdioGuard {},
    })
}

/// Our stdin and stdout as async streams. Must be called inside a tokio runtime.
#[cfg(unix)]
pub fn open() -> io::Result<Stdio> {
    let mut guard = StdioGuard { saved: Vec::new() };
    let stdin = io::stdin();
    let reader: Reader = match nonblocking_dup(Std::In, stdin.as_fd(), &mut guard) {
        Some(fd) => Box::pin(pipe::Receiver::from_owned_fd_unchecked(fd)?),
        None => Box::pin(tokio::io::stdin()),
    };
    let stdout = io::stdout();
    let mut writer_pipe = None;
    let writer: Writer = match nonblocking_dup(Std::Out, stdout.as_fd(), &mut guard) {
        Some(fd) => {
            if platform::is_fifo(fd.as_fd()) {
                writer_pipe = fd.try_clone().ok();
            }
            Box::pin(pipe::Sender::from_owned_fd_unchecked(fd)?)
        }
        None => Box::pin(tokio::io::stdout()),
    };
    Ok(Stdio {
        reader,
        writer,
        writer_pipe,
        guard,
    })
}
