//! Symlinks, resolved for the regex and glob rules: `notes.txt -> ../.pgpass` passed to a
//! file tool is judged as `.pgpass` as well as `notes.txt`, `docs/keys/config` with
//! `keys -> ~/.ssh` as `~/.ssh/config`.
//!
//! The walk follows the kernel's: component by component from `/`, a link's target put
//! in front of what is left of the path (from `/` when absolute), `..` leaving the
//! directory reached. A dangling link resolves to the path it names (a write creates
//! that file). What cannot be resolved (more than [`MAX_LINKS`] links on one walk, as a
//! loop does; a directory this process may not search; any other error) is
//! [`Resolution::Unknown`], which the program refuses: nobody can say what it opens.
//!
//! # Cost
//!
//! One `lstat` per component of every path argument of every call doubled the proxy's
//! CPU on the shared bench (a system call costs microseconds on a VM, a whole call's
//! judging about seven), so what is looked up is remembered, in two ways:
//!
//! - **Settled entries.** An entry of a directory that this process's user can neither
//!   write nor make writable (owned by another user, no group or other write bit; a POSIX
//!   ACL's grant shows in the group bits), reached through such directories only, stays
//!   what it is whatever the agent does: a directory, a file, a link and its target, or
//!   nothing by that name. Those entries (`/home`, `/usr/bin`, a missing `/home/u`,
//!   `/bin -> usr/bin`) are kept for the life of the cache and cost nothing again.
//! - **Watched entries.** The others (a project's files; as root, every entry, since root
//!   can change any directory) are remembered only while the kernel says their directory
//!   has not changed: each directory looked up is watched ([`DirWatch`], inotify on
//!   Linux) *before* its entries are read, and the resolutions of each message start by
//!   reading the changes queued since the last ones ([`LinkCache::lookups`]: one `read`,
//!   which finds none in the usual case).
//!   An entry is used only if its directory has had no change since it was read, and a
//!   directory is reached only through entries so checked, from `/` down: renaming or
//!   replacing any directory on the way is a change of its parent. The kernel queues the
//!   change inside the system call that makes it, so a link made before a call is judged
//!   is seen, as the `lstat` walk would see it; a change racing the judgment is a race
//!   with the walk as well (what the sandbox settles). When changes may have been missed
//!   (the queue overflowed, a watch ended) everything watched is forgotten. A mount is
//!   not a change of a directory's entries and is not seen, by the walk either: it needs
//!   no link to redirect a path. Without a watcher (other systems, too many in the
//!   process) these entries are looked up for each value.
//!
//! A path with a link on the way (`/bin/bash`, through `/bin -> usr/bin`) is resolved
//! once and its result kept with the watches of every directory read for it: while none
//! reports a change, the same walk would read the same entries, so it gives the same.

use std::collections::HashMap;

use super::{PATH_MAX, Resolution};
use crate::platform::DirWatch;

/// Links followed on one walk before it counts as a loop (Linux's `MAXSYMLINKS`).
pub const MAX_LINKS: usize = 40;

/// At most this many directories are watched at once (each costs the kernel about 1 KiB
/// of the user's `fs.inotify.max_user_watches`); when more are needed the cache starts
/// again, with a new watcher.
const MAX_WATCHES: usize = 1024;

/// At most this many resolved paths with links are kept (see `MAX_ENTRIES`).
const MAX_FOLLOWED: usize = 256;

/// At most this many entries are kept; when full the cache starts again, so made-up
/// names (`/usr/x1`, `/usr/x2`, …) cannot grow it without bound.
const MAX_ENTRIES: usize = 4096;

/// Remembered directory entries (see the module docs), for [`Lookups::resolve`]. One
/// per [`crate::program::Scratch`]: no lock.
#[derive(Debug, Default)]
pub struct LinkCache {
    /// Entries of settled directories, kept for the life of the cache.
    settled: HashMap<String, Entry>,
    /// Entries of watched directories, with the watch and its count of changes when read.
    watched: HashMap<String, (Entry, Seen)>,
    /// Per watch of the current watcher: the changes it reported. (Fx: the kernel numbers
    /// watches, not the agent.)
    watches: rustc_hash::FxHashMap<i32, u64>,
    /// Paths with a link on the way, as [`Self::follow`] resolved them, with the watches
    /// of the directories it read and their changes then.
    followed: HashMap<String, (Resolution, Vec<(i32, u64)>)>,
    /// How many times everything was forgotten (watch numbers start again each time).
    forgotten: u64,
    watcher: Watcher,
    /// What `/` is, once looked up.
    root: Option<Dir>,
    /// The effective user id, once asked (Unix: ownership decides what can change).
    #[cfg(unix)]
    uid: Option<u32>,
}

#[derive(Debug, Default)]
enum Watcher {
    #[default]
    Untried,
    None,
    On(DirWatch),
}

/// When a watched entry was read: its directory's watch, and the changes seen by then.
#[derive(Debug, Clone, Copy)]
struct Seen {
    wd: i32,
    changes: u64,
}

/// How a directory's entries may be remembered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dir {
    /// Nobody but root or its owner can change them, nor its path: for good.
    Settled,
    /// While this watch reports no change.
    Watched(i32),
    /// Not at all: looked up each time.
    Unknown,
}

/// What a name in a directory is.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Entry {
    Missing,
    /// A directory, and how its own entries may be remembered.
    Dir(Dir),
    /// A file or anything else that is not a directory.
    Other,
    /// A symlink, with its target once read.
    Link(Option<String>),
}

/// The resolutions of one message's paths: [`LinkCache::lookups`].
pub struct Lookups<'c> {
    cache: &'c mut LinkCache,
    /// The changes reported before the first resolution have been taken in.
    caught_up: bool,
}

impl Lookups<'_> {
    /// The clean absolute `path` as the file system opens it: [`Resolution::Unchanged`]
    /// when no existing component is a link (or the path is not one the kernel opens:
    /// relative, longer than `PATH_MAX`), [`Resolution::Resolved`] when one is and the
    /// real path differs, [`Resolution::Unknown`] when it cannot be resolved.
    ///
    /// Does not allocate unless a component is a link or an entry is seen for the first
    /// time.
    ///
    /// `cwd`, when given, is the server's working directory, a prefix of `path`, which
    /// came from a relative value: the server opens such a value from the directory it
    /// runs in, so when the directory's path holds a link (or is gone) only the
    /// components below it are looked up (and a link among them resolved from the
    /// directory's real path).
    pub fn resolve(&mut self, path: &str, cwd: Option<&str>) -> Resolution {
        if !self.caught_up {
            self.cache.catch_up();
            self.caught_up = true;
        }
        self.cache.resolve(path, cwd)
    }
}

/// Where a walk of the written path stopped.
enum Walked {
    /// Below a missing name or a file, or at the end: no link on the way.
    Plain,
    Link,
    Unreadable,
}

/// The outcome of looking one name up.
enum Step {
    Entry(Entry),
    /// The look-up failed for another reason than the name missing.
    Unreadable,
}

impl LinkCache {
    /// Start resolving the paths of one message: the changes reported since the last
    /// resolution are taken in before its first resolution (see the module docs), so
    /// what is remembered holds for the file system as it is now. A message that
    /// resolves nothing costs nothing.
    pub fn lookups(&mut self) -> Lookups<'_> {
        Lookups {
            cache: self,
            caught_up: false,
        }
    }

    fn resolve(&mut self, path: &str, cwd: Option<&str>) -> Resolution {
        if !path.starts_with('/') || path.len() > PATH_MAX {
            return Resolution::Unchanged;
        }
        let below = cwd.filter(|c| c.len() > 1 && super::is_under(path, c));
        let root = self.root_dir();
        match self.walk(path, 0, root, below.map_or(0, str::len)) {
            Some(Walked::Plain) => Resolution::Unchanged,
            Some(Walked::Link) => self.follow_remembered(path, below),
            Some(Walked::Unreadable) => Resolution::Unknown,
            // The working directory's path is not a plain directory's now (a link on the
            // way, or gone): the server still runs where it started, so only what is
            // below the written directory is looked up, and nothing of it remembered.
            None => match self.walk(path, below.map_or(0, str::len), Dir::Unknown, 0) {
                Some(Walked::Plain) | None => Resolution::Unchanged,
                Some(Walked::Link) => self.follow(path, below, &mut None),
                Some(Walked::Unreadable) => Resolution::Unknown,
            },
        }
    }

    /// Walk the written `path` from byte `end` (a directory remembered as `dir`) until a
    /// component is missing, is not a directory, or is a link, in place (only a link makes
    /// the real path worth building). `None` when a component of the first `prefix` bytes
    /// is not a directory that exists.
    fn walk(&mut self, path: &str, mut end: usize, mut dir: Dir, prefix: usize) -> Option<Walked> {
        while end + 1 < path.len() {
            let start = end + 1;
            let next = path[start..].find('/').map_or(path.len(), |i| start + i);
            let step = self.look(&path[..next], dir);
            if next <= prefix && !matches!(step, Step::Entry(Entry::Dir(_))) {
                return None;
            }
            match step {
                Step::Entry(Entry::Dir(d)) => {
                    dir = d;
                    end = next;
                }
                // Nothing below a missing name exists, and nothing below a file opens.
                Step::Entry(Entry::Missing | Entry::Other) => return Some(Walked::Plain),
                Step::Entry(Entry::Link(_)) => return Some(Walked::Link),
                Step::Unreadable => return Some(Walked::Unreadable),
            }
        }
        Some(Walked::Plain)
    }

    /// [`Self::follow`], or what it gave for `path` before when no directory it read has
    /// changed since (`/bin/bash` through `/bin -> usr/bin` on every call costs a hash).
    fn follow_remembered(&mut self, path: &str, cwd: Option<&str>) -> Resolution {
        if cwd.is_none()
            && let Some((resolution, read)) = self.followed.get(path)
            && read
                .iter()
                .all(|(wd, changes)| self.watches.get(wd) == Some(changes))
        {
            return resolution.clone();
        }
        let forgotten = self.forgotten;
        let mut read = Some(Vec::new());
        let resolution = self.follow(path, cwd, &mut read);
        // Only a walk from `/` through remembered directories, with the same watches
        // throughout, says the same while they report no change.
        if let Some(read) = read
            && cwd.is_none()
            && self.forgotten == forgotten
            && resolution != Resolution::Unknown
        {
            if self.followed.len() >= MAX_FOLLOWED {
                self.followed.clear();
            }
            self.followed
                .insert(path.to_string(), (resolution.clone(), read));
        }
        resolution
    }

    /// The real path of `path`, one of whose components (below `cwd`, when given) is a
    /// link. `read`, when given, gets the watches of the directories whose entries were
    /// read, with their changes then, or becomes `None` when one was not remembered.
    fn follow(
        &mut self,
        path: &str,
        cwd: Option<&str>,
        read: &mut Option<Vec<(i32, u64)>>,
    ) -> Resolution {
        // Components still to walk, the next one last.
        let (mut out, rest) = match cwd.and_then(|c| Some((std::fs::canonicalize(c).ok()?, c))) {
            Some((real, c)) => (real.to_string_lossy().into_owned(), &path[c.len()..]),
            None => (String::from("/"), path),
        };
        let mut todo: Vec<String> = rest.rsplit('/').map(str::to_string).collect();
        // How each directory of `out` may be remembered: `..` pops one.
        let root = self.root_dir();
        // The working directory's entries are not remembered (see `resolve`).
        let mut dirs = vec![if cwd.is_none() { root } else { Dir::Unknown }];
        let mut links = 0;
        while let Some(name) = todo.pop() {
            match name.as_str() {
                "" | "." => continue,
                ".." => {
                    if out.len() > 1 {
                        let cut = out.rfind('/').unwrap_or(0);
                        out.truncate(cut.max(1));
                        dirs.pop();
                    }
                    continue;
                }
                _ => {}
            }
            let here = out.len();
            if !out.ends_with('/') {
                out.push('/');
            }
            out.push_str(&name);
            if out.len() > PATH_MAX {
                return Resolution::Unknown;
            }
            let parent = *dirs.last().unwrap_or(&Dir::Unknown);
            match parent {
                Dir::Settled => {}
                Dir::Watched(wd) => match (read.as_mut(), self.watches.get(&wd)) {
                    (Some(read), Some(&changes)) => read.push((wd, changes)),
                    _ => *read = None,
                },
                Dir::Unknown => *read = None,
            }
            match self.look(&out, parent) {
                Step::Entry(Entry::Dir(d)) => dirs.push(d),
                Step::Entry(Entry::Missing | Entry::Other) => {
                    // Nothing below exists (or opens): the rest is taken as written.
                    while let Some(name) = todo.pop() {
                        match name.as_str() {
                            "" | "." => {}
                            ".." => {
                                let cut = out.rfind('/').unwrap_or(0);
                                out.truncate(cut.max(1));
                            }
                            _ => {
                                if !out.ends_with('/') {
                                    out.push('/');
                                }
                                out.push_str(&name);
                            }
                        }
                    }
                    break;
                }
                Step::Entry(Entry::Link(_)) => {
                    links += 1;
                    let target = if links > MAX_LINKS {
                        None
                    } else {
                        self.target(&out, parent)
                    };
                    let Some(target) = target else {
                        return Resolution::Unknown;
                    };
                    if target.starts_with('/') {
                        out.clear();
                        out.push('/');
                        dirs.clear();
                        dirs.push(root);
                    } else {
                        out.truncate(here.max(1));
                    }
                    todo.extend(target.rsplit('/').map(str::to_string));
                }
                Step::Unreadable => return Resolution::Unknown,
            }
        }
        if out == path {
            Resolution::Unchanged
        } else {
            Resolution::Resolved(out)
        }
    }

    /// What `path`, an entry of a directory remembered as `parent`, is: from the cache
    /// when it may be, else looked up (and remembered when it may be).
    fn look(&mut self, path: &str, parent: Dir) -> Step {
        if let Some(entry) = self.remembered(path, parent) {
            return Step::Entry(entry.clone_kind());
        }
        let forgotten = self.forgotten;
        let entry = match std::fs::symlink_metadata(path) {
            Ok(meta) if meta.file_type().is_symlink() => Entry::Link(None),
            Ok(meta) if meta.is_dir() => Entry::Dir(self.dir_kind(path, &meta, parent)),
            Ok(_) => Entry::Other,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Entry::Missing,
            // A name too long for the file system names nothing on it.
            Err(e) if e.kind() == std::io::ErrorKind::InvalidFilename => Entry::Missing,
            Err(_) => return Step::Unreadable,
        };
        // Watching the directory may have made the cache start again: `parent` is then a
        // watch number of the old watcher, which may name another directory now.
        if self.forgotten == forgotten {
            self.remember(path, parent, entry.clone_kind());
        }
        Step::Entry(entry)
    }

    /// The target of the link `path`, from the cache when it may be.
    fn target(&mut self, path: &str, parent: Dir) -> Option<String> {
        if let Some(Entry::Link(Some(target))) = self.remembered(path, parent) {
            return Some(target.clone());
        }
        let target = std::fs::read_link(path).ok()?;
        let target = target.to_str()?.to_string();
        self.remember(path, parent, Entry::Link(Some(target.clone())));
        Some(target)
    }

    /// How the entries of the directory `path` (an entry of `parent`, described by
    /// `meta`) may be remembered. Watched before any of its entries is read, so a change
    /// made after that is reported.
    fn dir_kind(&mut self, path: &str, meta: &std::fs::Metadata, parent: Dir) -> Dir {
        if parent == Dir::Settled && self.unwritable(meta) {
            return Dir::Settled;
        }
        // Below a directory looked up each time, its path may name another directory at
        // the next look: a watch would say nothing about that one.
        if parent == Dir::Unknown {
            return Dir::Unknown;
        }
        self.watch(path).map_or(Dir::Unknown, Dir::Watched)
    }

    /// The remembered entry `path` of a directory remembered as `parent`, if still valid.
    fn remembered(&self, path: &str, parent: Dir) -> Option<&Entry> {
        let entry = match parent {
            Dir::Settled => self.settled.get(path)?,
            Dir::Watched(wd) => {
                let (entry, seen) = self.watched.get(path)?;
                if seen.wd != wd || self.watches.get(&wd) != Some(&seen.changes) {
                    return None;
                }
                entry
            }
            Dir::Unknown => return None,
        };
        // A directory watched by a watcher since forgotten is looked up (and watched)
        // again.
        match entry {
            Entry::Dir(dir) if !self.holds(*dir) => None,
            _ => Some(entry),
        }
    }

    fn remember(&mut self, path: &str, parent: Dir, entry: Entry) {
        let seen = match parent {
            Dir::Settled => None,
            Dir::Watched(wd) => match self.watches.get(&wd) {
                Some(&changes) => Some(Seen { wd, changes }),
                None => return,
            },
            Dir::Unknown => return,
        };
        if self.settled.len() + self.watched.len() >= MAX_ENTRIES
            && !self.settled.contains_key(path)
            && !self.watched.contains_key(path)
        {
            // Start again; this entry was read under a watcher now gone.
            self.forget();
            return;
        }
        // An entry read again after its directory changed replaces the old one in place:
        // no new key (the warm allow path does not allocate while `/tmp` churns).
        match seen {
            None => match self.settled.get_mut(path) {
                Some(slot) => *slot = entry,
                None => {
                    self.settled.insert(path.to_string(), entry);
                }
            },
            Some(seen) => match self.watched.get_mut(path) {
                Some(slot) => *slot = (entry, seen),
                None => {
                    self.watched.insert(path.to_string(), (entry, seen));
                }
            },
        }
    }

    /// Watch the directory `path` names now, through this cache's watcher (made on first
    /// use).
    fn watch(&mut self, path: &str) -> Option<i32> {
        if self.watches.len() >= MAX_WATCHES {
            self.forget();
        }
        if matches!(self.watcher, Watcher::Untried) {
            self.watcher = DirWatch::new().map_or(Watcher::None, Watcher::On);
        }
        let Watcher::On(watcher) = &mut self.watcher else {
            return None;
        };
        // The same number again when the directory is already watched: what was read
        // under it stays valid while it reports no change.
        let wd = watcher.watch(path)?;
        self.watches.entry(wd).or_default();
        Some(wd)
    }

    /// Take in the changes reported since the last resolution: each makes what was read
    /// in its directory invalid; a lost change makes everything watched invalid.
    fn catch_up(&mut self) {
        let Watcher::On(watcher) = &mut self.watcher else {
            return;
        };
        if !watcher.is_watching() {
            return;
        }
        let watches = &mut self.watches;
        let complete = watcher.drain(|wd| {
            let changes = watches.entry(wd).or_default();
            *changes = changes.wrapping_add(1);
        });
        if !complete {
            self.forget();
        }
    }

    /// Forget every remembered entry and watch (a new watcher is made on next use).
    fn forget(&mut self) {
        self.forgotten += 1;
        self.followed.clear();
        self.settled.clear();
        self.watched.clear();
        self.root = None;
        if matches!(self.watcher, Watcher::On(_)) {
            self.watcher = Watcher::Untried;
        }
        // Watch numbers start again with a new watcher: no old state may match them.
        self.watches.clear();
    }

    fn root_dir(&mut self) -> Dir {
        if let Some(dir) = self.root
            && self.holds(dir)
        {
            return dir;
        }
        let dir = match std::fs::metadata("/") {
            Ok(meta) if self.unwritable(&meta) => Dir::Settled,
            Ok(_) => self.watch("/").map_or(Dir::Unknown, Dir::Watched),
            Err(_) => Dir::Unknown,
        };
        self.root = Some(dir);
        dir
    }

    /// Whether a remembered directory's watch (if it has one) is one of the current
    /// watcher's.
    fn holds(&self, dir: Dir) -> bool {
        match dir {
            Dir::Watched(wd) => self.watches.contains_key(&wd),
            Dir::Settled | Dir::Unknown => true,
        }
    }

    /// Whether this process's user can neither change the entries of the directory
    /// `meta` describes nor give itself the right to.
    #[cfg(unix)]
    fn unwritable(&mut self, meta: &std::fs::Metadata) -> bool {
        use std::os::unix::fs::MetadataExt;
        let uid = *self.uid.get_or_insert_with(crate::platform::effective_uid);
        uid != 0 && meta.uid() != uid && meta.mode() & 0o022 == 0
    }

    #[cfg(not(unix))]
    fn unwritable(&mut self, _meta: &std::fs::Metadata) -> bool {
        false
    }
}

impl Entry {
    /// A copy without a link's target (what the walk needs; no allocation).
    fn clone_kind(&self) -> Entry {
        match self {
            Entry::Link(_) => Entry::Link(None),
            Entry::Missing => Entry::Missing,
            Entry::Dir(dir) => Entry::Dir(*dir),
            Entry::Other => Entry::Other,
        }
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn real_tempdir() -> (tempfile::TempDir, String) {
        let dir = tempfile::tempdir().unwrap();
        let real = std::fs::canonicalize(dir.path()).unwrap();
        let real = real.to_str().unwrap().to_string();
        (dir, real)
    }

    /// What a first resolution read is remembered, yet a link made afterwards, in place
    /// of a file, a missing name, or a directory on the way (replaced by a rename), is
    /// seen by the next resolution: the remembered entries are dropped when their
    /// directory changes.
    #[test]
    fn a_link_made_after_a_lookup_is_seen() {
        let (_guard, tmp) = real_tempdir();
        let secret = format!("{tmp}/secret");
        std::fs::create_dir_all(format!("{secret}/b")).unwrap();
        std::fs::create_dir_all(format!("{tmp}/a/b")).unwrap();
        std::fs::write(format!("{tmp}/a/b/notes.txt"), "x").unwrap();
        let mut cache = LinkCache::default();

        let notes = format!("{tmp}/a/b/notes.txt");
        let missing = format!("{tmp}/a/b/missing/x");
        assert_eq!(cache.lookups().resolve(&notes, None), Resolution::Unchanged);
        assert_eq!(
            cache.lookups().resolve(&missing, None),
            Resolution::Unchanged
        );
        if cfg!(target_os = "linux") {
            assert!(
                cache.watched.contains_key(&notes) || cache.settled.contains_key(&notes),
                "the entries read are remembered"
            );
        }

        std::fs::remove_file(&notes).unwrap();
        symlink("../../secret/pgpass", &notes).unwrap();
        assert_eq!(
            cache.lookups().resolve(&notes, None),
            Resolution::Resolved(format!("{secret}/pgpass"))
        );

        symlink(&secret, format!("{tmp}/a/b/missing")).unwrap();
        assert_eq!(
            cache.lookups().resolve(&missing, None),
            Resolution::Resolved(format!("{secret}/x"))
        );

        // A directory two levels up swapped for a link by renames.
        let deep = format!("{tmp}/a/b/other/file");
        assert_eq!(cache.lookups().resolve(&deep, None), Resolution::Unchanged);
        std::fs::rename(format!("{tmp}/a"), format!("{tmp}/a-old")).unwrap();
        symlink(&secret, format!("{tmp}/a")).unwrap();
        assert_eq!(
            cache.lookups().resolve(&deep, None),
            Resolution::Resolved(format!("{secret}/b/other/file"))
        );
    }

    /// A path through a link, resolved once, is resolved again when the link is replaced
    /// or a directory on its way changes.
    #[test]
    fn a_replaced_link_is_followed_to_its_new_target() {
        let (_guard, tmp) = real_tempdir();
        std::fs::create_dir_all(format!("{tmp}/one")).unwrap();
        std::fs::create_dir_all(format!("{tmp}/two")).unwrap();
        let link = format!("{tmp}/current");
        symlink("one", &link).unwrap();
        let mut cache = LinkCache::default();
        let path = format!("{link}/config");
        assert_eq!(
            cache.lookups().resolve(&path, None),
            Resolution::Resolved(format!("{tmp}/one/config"))
        );
        assert_eq!(
            cache.lookups().resolve(&path, None),
            Resolution::Resolved(format!("{tmp}/one/config"))
        );
        // A link made below the target, in a directory the first resolutions read.
        symlink("../two/key", format!("{tmp}/one/config")).unwrap();
        assert_eq!(
            cache.lookups().resolve(&path, None),
            Resolution::Resolved(format!("{tmp}/two/key"))
        );
        std::fs::remove_file(format!("{tmp}/one/config")).unwrap();
        let next = format!("{tmp}/current.new");
        symlink("two", &next).unwrap();
        std::fs::rename(&next, &link).unwrap();
        assert_eq!(
            cache.lookups().resolve(&path, None),
            Resolution::Resolved(format!("{tmp}/two/config"))
        );
    }

    /// When changes may have been missed (here: a watched directory removed, which ends
    /// its watch), everything watched is forgotten and looked up again.
    #[test]
    fn a_removed_directory_makes_the_cache_start_again() {
        let (_guard, tmp) = real_tempdir();
        std::fs::create_dir_all(format!("{tmp}/d/e")).unwrap();
        let mut cache = LinkCache::default();
        let path = format!("{tmp}/d/e/f");
        assert_eq!(cache.lookups().resolve(&path, None), Resolution::Unchanged);
        std::fs::remove_dir(format!("{tmp}/d/e")).unwrap();
        std::fs::remove_dir(format!("{tmp}/d")).unwrap();
        symlink("/etc", format!("{tmp}/d")).unwrap();
        assert_eq!(
            cache.lookups().resolve(&path, None),
            Resolution::Resolved("/etc/e/f".to_string())
        );
    }

    /// A relative value is opened from the server's working directory: what is below it
    /// is remembered and dropped on change like the rest, and a working directory whose
    /// path holds a link is resolved from its real path.
    #[test]
    fn relative_values_are_resolved_below_the_working_directory() {
        let (_guard, tmp) = real_tempdir();
        let proj = format!("{tmp}/proj");
        std::fs::create_dir_all(format!("{proj}/src")).unwrap();
        std::fs::create_dir_all(format!("{tmp}/secret")).unwrap();
        let mut cache = LinkCache::default();
        let text = format!("{proj}/text/html");
        assert_eq!(
            cache.lookups().resolve(&text, Some(&proj)),
            Resolution::Unchanged
        );
        symlink("../secret", format!("{proj}/text")).unwrap();
        assert_eq!(
            cache.lookups().resolve(&text, Some(&proj)),
            Resolution::Resolved(format!("{tmp}/secret/html"))
        );

        // The working directory named through a link.
        symlink("proj", format!("{tmp}/here")).unwrap();
        let here = format!("{tmp}/here");
        assert_eq!(
            cache
                .lookups()
                .resolve(&format!("{here}/text/html"), Some(&here)),
            Resolution::Resolved(format!("{tmp}/secret/html"))
        );
        assert_eq!(
            cache
                .lookups()
                .resolve(&format!("{here}/src/main.rs"), Some(&here)),
            Resolution::Unchanged
        );
    }
}
