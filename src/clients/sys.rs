//! The file operations the editing discipline ([`super::fsio`]) needs beyond plain std:
//! locks, opening without following links, owner-only creation, an atomic exchange of
//! two names, owners kept. The system-specific calls are in [`crate::platform`]; this
//! module gathers them so `fsio` reads as policy.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::Path;

use crate::platform;

/// An exclusive advisory lock on a file, held until dropped (closing the descriptor
/// releases it, also when the process dies, so a crashed run never leaves a stale lock).
#[derive(Debug)]
pub struct Lock {
    _file: File,
}

impl Lock {
    /// Create `path` (owner-only) if needed and wait until this process holds it exclusively.
    pub fn acquire(path: &Path) -> io::Result<Lock> {
        let file = open_options_nofollow()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode_owner_only()
            .open(path)?;
        flock_exclusive(&file)?;
        Ok(Lock { _file: file })
    }
}

/// An exclusive advisory lock (`flock` on Unix, `LockFileEx` on Windows), through std.
fn flock_exclusive(file: &File) -> io::Result<()> {
    file.lock()
}

/// An exclusive advisory lock on a file being edited, held until dropped. It is taken on
/// the file itself (not a lock file beside it), so any program that locks the file it
/// edits (an editor, a sync tool, an mcpwall run with another `HOME`, such as `sudo` without
/// `-E`) takes turns with mcpwall.
#[derive(Debug)]
pub struct TargetLock {
    file: File,
}

impl TargetLock {
    /// Lock the file `path` names now, waiting up to `wait` for another holder to let go.
    /// `Ok(None)`: there is no such file (nothing to lock; creating it is exclusive anyway).
    /// `ErrorKind::WouldBlock`: still held by another program after `wait`.
    ///
    /// A lock belongs to the file, not the name: when the name is replaced while this
    /// waits (another editor's rename), the lock is taken again on what the name holds now.
    pub fn acquire(path: &Path, wait: std::time::Duration) -> io::Result<Option<TargetLock>> {
        let deadline = std::time::Instant::now() + wait;
        loop {
            let file = match open_read_nofollow(path) {
                Ok(f) => f,
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
                Err(e) => return Err(e),
            };
            // A Windows lock is mandatory: it would fail our own reads of the file (and the
            // client's), so nothing takes turns with it that way there; the compare-and-swap
            // still guards the write.
            if cfg!(windows) {
                return Ok(None);
            }
            match file.try_lock() {
                Ok(()) => {}
                Err(std::fs::TryLockError::WouldBlock) => {
                    if std::time::Instant::now() >= deadline {
                        return Err(io::Error::from(io::ErrorKind::WouldBlock));
                    }
                    std::thread::sleep(std::time::Duration::from_millis(10));
                    continue;
                }
                // A file system without locks (some network mounts): edit without one, as
                // the compare-and-swap still guards the write.
                Err(std::fs::TryLockError::Error(e)) if platform::lock_unsupported(&e) => {
                    return Ok(None);
                }
                Err(std::fs::TryLockError::Error(e)) => return Err(e),
            }
            let lock = TargetLock { file };
            if lock.still_named_by(path) {
                return Ok(Some(lock));
            }
        }
    }

    /// Whether `path` still names the locked file.
    pub fn still_named_by(&self, path: &Path) -> bool {
        match (self.file.metadata(), std::fs::symlink_metadata(path)) {
            (Ok(a), Ok(b)) => platform::same_file(&a, &b),
            _ => false,
        }
    }
}

trait OwnerOnly {
    fn mode_owner_only(&mut self) -> &mut Self;
}

impl OwnerOnly for OpenOptions {
    fn mode_owner_only(&mut self) -> &mut Self {
        platform::owner_only_file(self)
    }
}

fn open_options_nofollow() -> OpenOptions {
    let mut options = OpenOptions::new();
    platform::nofollow(&mut options);
    options
}

/// Open an existing file for reading without following a symlink in its last component.
pub fn open_read_nofollow(path: &Path) -> io::Result<File> {
    open_options_nofollow().read(true).open(path)
}

/// Create a new file, owner-only, failing if anything (a file, a symlink, dangling or not)
/// already has that name: `O_CREAT|O_EXCL|O_NOFOLLOW`. A name planted by someone else is
/// never opened, so nothing is ever written through it.
pub fn create_exclusive(path: &Path) -> io::Result<File> {
    open_options_nofollow()
        .write(true)
        .create_new(true)
        .mode_owner_only()
        .open(path)
}

/// Whether this process runs as root (then it can, and must, give a rewritten file back
/// to its owner: `sudo -E mcpwall wrap` must not leave the user's file owned by root).
pub use platform::is_root;

/// Give `file` the owner and group `uid`/`gid`.
#[cfg(unix)]
pub fn chown(file: &File, uid: u32, gid: u32) -> io::Result<()> {
    std::os::unix::fs::fchown(file, Some(uid), Some(gid))
}

/// Flush a directory's entries (a rename is durable only once its directory is).
pub use platform::fsync_dir;

/// Atomically swap the names `a` and `b` (both must exist). Returns `Ok(false)` where the
/// OS or file system has no such call; the caller then falls back to [`replace`].
pub use platform::exchange;

/// Replace `target` by `temp` (Windows: retried while a client holds the target open).
pub use platform::replace;

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn exclusive_create_never_follows_a_planted_link() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "keep").unwrap();
        let planted = dir.path().join("planted");
        std::os::unix::fs::symlink(&victim, &planted).unwrap();
        let dangling = dir.path().join("dangling");
        std::os::unix::fs::symlink(dir.path().join("nowhere"), &dangling).unwrap();
        for name in [&planted, &dangling, &victim] {
            let err = create_exclusive(name).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::AlreadyExists, "{name:?}");
        }
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
        assert!(!dir.path().join("nowhere").exists());
        assert!(open_read_nofollow(&planted).is_err());
    }

    #[test]
    fn exchange_swaps_names() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        std::fs::write(&a, "A").unwrap();
        std::fs::write(&b, "B").unwrap();
        if exchange(&a, &b).unwrap() {
            assert_eq!(std::fs::read_to_string(&a).unwrap(), "B");
            assert_eq!(std::fs::read_to_string(&b).unwrap(), "A");
        }
    }

    #[test]
    fn lock_is_exclusive_between_descriptors() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lock");
        let held = Lock::acquire(&path).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let p = path.clone();
        let waiter = std::thread::spawn(move || {
            let _l = Lock::acquire(&p).unwrap();
            tx.send(()).unwrap();
        });
        assert!(
            rx.recv_timeout(std::time::Duration::from_millis(200))
                .is_err()
        );
        drop(held);
        rx.recv_timeout(std::time::Duration::from_secs(5)).unwrap();
        waiter.join().unwrap();
    }
}
