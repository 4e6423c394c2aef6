//! Telling when a directory's entries change, without looking at them again: Linux's
//! inotify (through rustix's safe wrappers). Elsewhere there is no watcher
//! ([`DirWatch::new`] gives `None`) and callers look entries up each time.
//!
//! inotify queues an event inside the system call that changes a directory (the
//! `symlink`, `rename`, `unlink`, `mkdir`, `chmod`… returns only after it is queued), so
//! a change completed before [`DirWatch::drain`] is seen by it, whoever made it, root
//! included. What it does not see: a mount over a directory (it replaces what a path
//! opens without changing any entry; no link is involved), and changes made on another
//! machine to a network file system's directories.

/// At most this many watchers in one process: each is an inotify instance, of which a
/// user has few (`fs.inotify.max_user_instances`, 128 by default) to share with every
/// other program. Beyond them, look-ups are simply not remembered.
#[cfg(target_os = "linux")]
const MAX_WATCHERS: usize = 8;

#[cfg(target_os = "linux")]
static WATCHERS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Watches over directories' entries (see the module docs).
#[cfg(target_os = "linux")]
#[derive(Debug)]
pub struct DirWatch {
    fd: std::os::fd::OwnedFd,
    watching: bool,
}

#[cfg(target_os = "linux")]
impl DirWatch {
    /// A new watcher, or `None` when the system gives none (too many in this process, or
    /// the user's inotify instances are used up).
    pub fn new() -> Option<DirWatch> {
        use rustix::fs::inotify::{CreateFlags, init};
        use std::sync::atomic::Ordering;
        if WATCHERS.fetch_add(1, Ordering::Relaxed) >= MAX_WATCHERS {
            WATCHERS.fetch_sub(1, Ordering::Relaxed);
            return None;
        }
        match init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK) {
            Ok(fd) => Some(DirWatch {
                fd,
                watching: false,
            }),
            Err(_) => {
                WATCHERS.fetch_sub(1, Ordering::Relaxed);
                None
            }
        }
    }

    /// Watch the directory `dir` names now (not following a link in its last component):
    /// the watch's number, the same for every path of one directory, or `None` when it
    /// cannot be watched (not a directory any more, the user's watches used up).
    pub fn watch(&mut self, dir: &str) -> Option<i32> {
        use rustix::fs::inotify::{WatchFlags, add_watch};
        // Everything that changes what a name in the directory is (created, removed,
        // renamed, its mode or owner changed) or the directory itself.
        let events = WatchFlags::CREATE
            | WatchFlags::DELETE
            | WatchFlags::MOVED_FROM
            | WatchFlags::MOVED_TO
            | WatchFlags::ATTRIB
            | WatchFlags::DELETE_SELF
            | WatchFlags::MOVE_SELF
            | WatchFlags::DONT_FOLLOW
            | WatchFlags::ONLYDIR;
        let wd = add_watch(&self.fd, dir, events).ok()?;
        self.watching = true;
        Some(wd)
    }

    /// Whether any directory is watched.
    pub fn is_watching(&self) -> bool {
        self.watching
    }

    /// Calls `changed` with the number of each watched directory whose entries changed
    /// since the last drain. `false` when changes may have been missed (the kernel's
    /// queue overflowed, a watch ended because its directory went or its file system was
    /// unmounted, a read failed): then nothing learnt under these watches can be trusted.
    pub fn drain(&mut self, mut changed: impl FnMut(i32)) -> bool {
        use rustix::fs::inotify::{ReadFlags, Reader};
        let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); 4096];
        let mut events = Reader::new(&self.fd, &mut buf);
        loop {
            match events.next() {
                Ok(event) => {
                    let lost = ReadFlags::QUEUE_OVERFLOW | ReadFlags::IGNORED | ReadFlags::UNMOUNT;
                    if event.events().intersects(lost) {
                        return false;
                    }
                    changed(event.wd());
                }
                Err(rustix::io::Errno::AGAIN) => return true,
                Err(rustix::io::Errno::INTR) => continue,
                Err(_) => return false,
            }
        }
    }
}

#[cfg(target_os = "linux")]
impl Drop for DirWatch {
    fn drop(&mut self) {
        WATCHERS.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// No watcher on this system: [`DirWatch::new`] gives `None`, so no value exists.
#[cfg(not(target_os = "linux"))]
#[derive(Debug)]
pub struct DirWatch {
    never: std::convert::Infallible,
}

#[cfg(not(target_os = "linux"))]
impl DirWatch {
    pub fn new() -> Option<DirWatch> {
        None
    }

    pub fn watch(&mut self, _dir: &str) -> Option<i32> {
        match self.never {}
    }

    pub fn is_watching(&self) -> bool {
        match self.never {}
    }

    pub fn drain(&mut self, _changed: impl FnMut(i32)) -> bool {
        match self.never {}
    }
}
