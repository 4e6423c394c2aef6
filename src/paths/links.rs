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
//! judging about seven), so what cannot change is remembered. An entry of a directory
//! that this process's user can neither write nor make writable (owned by another user,
//! no group or other write bit; a POSIX ACL's grant shows in the group bits) stays what it
//! is whatever the agent does: a directory, a file, a link and its target, or nothing by
//! that name. Those entries (`/home`, `/usr/bin`, a missing `/home/u`, `/bin -> usr/bin`)
//! are kept for the life of the cache and cost no system call again; the others (a
//! project's files, owned by the user) are looked up for each value, because the agent
//! can make a link there at any time. A process running as root could change every
//! entry, so it remembers none.

use std::collections::HashMap;

use super::{PATH_MAX, Resolution};

/// Links followed on one walk before it counts as a loop (Linux's `MAXSYMLINKS`).
pub const MAX_LINKS: usize = 40;

/// At most this many settled entries are kept; when full the cache starts again, so
/// made-up names (`/usr/x1`, `/usr/x2`, …) cannot grow it without bound.
const MAX_SETTLED: usize = 4096;

/// Settled directory entries (see the module docs), for [`LinkCache::resolve`]. One per
/// [`crate::program::Scratch`]: no lock, and it only ever holds what no user but root
/// or the entry's owner could change.
#[derive(Debug, Default)]
pub struct LinkCache {
    settled: HashMap<String, Entry>,
    /// Whether `/` is settled (its entries are), once looked up.
    root: Option<bool>,
    /// The effective user id, once asked (Unix: ownership decides what can change).
    #[cfg(unix)]
    uid: Option<u32>,
}

/// What a name in a directory is.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Entry {
    Missing,
    /// A directory, and whether its own entries are settled.
    Dir {
        settled: bool,
    },
    /// A file or anything else that is not a directory.
    Other,
    /// A symlink, with its target once read.
    Link(Option<String>),
}

/// The outcome of looking one name up.
enum Step {
    Entry(Entry),
    /// The look-up failed for another reason than the name missing.
    Unreadable,
}

impl LinkCache {
    /// The clean absolute `path` as the file system opens it: [`Resolution::Unchanged`]
    /// when no existing component is a link (or the path is not one the kernel opens:
    /// relative, longer than `PATH_MAX`), [`Resolution::Resolved`] when one is and the
    /// real path differs, [`Resolution::Unknown`] when it cannot be resolved.
    ///
    /// Does not allocate unless a component is a link or an entry is seen for the first
    /// time in a settled directory.
    ///
    /// `cwd`, when given, is the server's working directory, a prefix of `path`, which
    /// came from a relative value: the server opens such a value from the directory it
    /// runs in, whatever its path names now, so only the components below it are
    /// looked up (and a link among them resolved from the directory's real path).
    pub fn resolve(&mut self, path: &str, cwd: Option<&str>) -> Resolution {
        if !path.starts_with('/') || path.len() > PATH_MAX {
            return Resolution::Unchanged;
        }
        // First the usual case, in place: walk the written path until a component is
        // missing, is not a directory, or is a link (only then build the real path).
        let below = cwd.filter(|c| c.len() > 1 && super::is_under(path, c));
        let (mut settled, mut end) = match below {
            Some(c) => (false, c.len()),
            None => (self.root_settled(), 0),
        };
        while end + 1 < path.len() {
            let start = end + 1;
            let next = path[start..].find('/').map_or(path.len(), |i| start + i);
            match self.look(&path[..next], settled) {
                Step::Entry(Entry::Dir { settled: s }) => {
                    settled = s;
                    end = next;
                }
                // Nothing below a missing name exists, and nothing below a file opens.
                Step::Entry(Entry::Missing | Entry::Other) => return Resolution::Unchanged,
                Step::Entry(Entry::Link(_)) => return self.follow(path, below),
                Step::Unreadable => return Resolution::Unknown,
            }
        }
        Resolution::Unchanged
    }

    /// The real path of `path`, one of whose components (below `cwd`, when given) is a
    /// link.
    fn follow(&mut self, path: &str, cwd: Option<&str>) -> Resolution {
        // Components still to walk, the next one last.
        let (mut out, rest) = match cwd.and_then(|c| Some((std::fs::canonicalize(c).ok()?, c))) {
            Some((real, c)) => (real.to_string_lossy().into_owned(), &path[c.len()..]),
            None => (String::from("/"), path),
        };
        let mut todo: Vec<String> = rest.rsplit('/').map(str::to_string).collect();
        // Whether each directory of `out` has settled entries: `..` pops one.
        let root = self.root_settled();
        // The working directory's entries are taken as not settled (it is the user's).
        let mut settled = vec![root && cwd.is_none()];
        let mut links = 0;
        while let Some(name) = todo.pop() {
            match name.as_str() {
                "" | "." => continue,
                ".." => {
                    if out.len() > 1 {
                        let cut = out.rfind('/').unwrap_or(0);
                        out.truncate(cut.max(1));
                        settled.pop();
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
            let parent_settled = *settled.last().unwrap_or(&false);
            match self.look(&out, parent_settled) {
                Step::Entry(Entry::Dir { settled: s }) => settled.push(s),
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
                        self.target(&out, parent_settled)
                    };
                    let Some(target) = target else {
                        return Resolution::Unknown;
                    };
                    if target.starts_with('/') {
                        out.clear();
                        out.push('/');
                        settled.clear();
                        settled.push(root);
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

    /// What `path` is, from the cache when its directory is settled.
    fn look(&mut self, path: &str, parent_settled: bool) -> Step {
        if parent_settled && let Some(entry) = self.settled.get(path) {
            return Step::Entry(entry.clone_kind());
        }
        let entry = match std::fs::symlink_metadata(path) {
            Ok(meta) if meta.file_type().is_symlink() => Entry::Link(None),
            Ok(meta) if meta.is_dir() => Entry::Dir {
                settled: parent_settled && self.unwritable(&meta),
            },
            Ok(_) => Entry::Other,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Entry::Missing,
            // A name too long for the file system names nothing on it.
            Err(e) if e.kind() == std::io::ErrorKind::InvalidFilename => Entry::Missing,
            Err(_) => return Step::Unreadable,
        };
        if parent_settled {
            self.remember(path, entry.clone_kind());
        }
        Step::Entry(entry)
    }

    /// The target of the link `path`, from the cache when its directory is settled.
    fn target(&mut self, path: &str, parent_settled: bool) -> Option<String> {
        if parent_settled && let Some(Entry::Link(Some(target))) = self.settled.get(path) {
            return Some(target.clone());
        }
        let target = std::fs::read_link(path).ok()?;
        let target = target.to_str()?.to_string();
        if parent_settled {
            self.remember(path, Entry::Link(Some(target.clone())));
        }
        Some(target)
    }

    fn remember(&mut self, path: &str, entry: Entry) {
        if self.settled.len() >= MAX_SETTLED && !self.settled.contains_key(path) {
            self.settled.clear();
        }
        self.settled.insert(path.to_string(), entry);
    }

    fn root_settled(&mut self) -> bool {
        if let Some(settled) = self.root {
            return settled;
        }
        let settled = std::fs::metadata("/").is_ok_and(|meta| self.unwritable(&meta));
        self.root = Some(settled);
        settled
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
            Entry::Dir { settled } => Entry::Dir { settled: *settled },
            Entry::Other => Entry::Other,
        }
    }
}
