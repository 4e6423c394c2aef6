//! Test support: a log directory on a full disk. The audit writer's appends to a day file
//! of such a directory write what still fits and then fail with "no space left on
//! device", as `write(2)` does on a full file system; [`free_disk`] makes room again.
//! Only in builds with the `test-support` feature (and the crate's own tests).

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// A directory whose disk is full.
struct Full {
    dir: PathBuf,
    /// Bytes that still fit.
    room: u64,
    /// Writes refused so far.
    refused: u64,
}

static FULL: Mutex<Vec<Full>> = Mutex::new(Vec::new());

fn full() -> std::sync::MutexGuard<'static, Vec<Full>> {
    FULL.lock().unwrap_or_else(|e| e.into_inner())
}

/// From now on, only `room` more bytes fit in the day files of `dir`.
pub fn fill_disk(dir: &Path, room: u64) {
    let mut full = full();
    full.retain(|f| f.dir != dir);
    full.push(Full {
        dir: dir.to_path_buf(),
        room,
        refused: 0,
    });
}

/// Writing to `dir` works again.
pub fn free_disk(dir: &Path) {
    full().retain(|f| f.dir != dir);
}

/// How many writes to `dir` were refused since [`fill_disk`].
pub fn refused(dir: &Path) -> u64 {
    full()
        .iter()
        .find(|f| f.dir == dir)
        .map_or(0, |f| f.refused)
}

/// How many of `want` bytes fit in `dir` (taking them), `None` when its disk is not full.
pub(crate) fn room(dir: &Path, want: usize) -> Option<usize> {
    let mut full = full();
    let f = full.iter_mut().find(|f| f.dir == dir)?;
    let fits = usize::try_from(f.room).unwrap_or(usize::MAX).min(want);
    f.room -= fits as u64;
    if fits == 0 {
        f.refused += 1;
    }
    Some(fits)
}

/// The error a write into a full directory gets.
pub(crate) fn disk_full() -> io::Error {
    io::Error::new(
        io::ErrorKind::StorageFull,
        "no space left on device (test-support: a full disk)",
    )
}
