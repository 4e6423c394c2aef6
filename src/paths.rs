//! Path handling (ARCHITECTURE decision 9): expansion, normalisation, containment.
//!
//! A value sent to a server as a path can be spelled many ways: `~/.ssh`,
//! `${HOME}/.ssh`, `file:///home/u/.ssh`, `.aws//credentials`, `.aws/./credentials`,
//! `C:\Users\u\.ssh\id_rsa`. Rules are written once, so the engine matches a
//! path-shaped value in its written form *and* in the one normal form produced here,
//! the way a server would resolve it:
//!
//! 1. a NUL ends the path (a server written in C opens the bytes before it);
//! 2. `file://` URIs lose their scheme (and a `localhost` authority) and are
//!    percent-decoded;
//! 3. a leading `~`, `$HOME` or `${HOME}` becomes the HOME the program was compiled with;
//!    `~user` becomes that user's home from the password database, or, for a user it
//!    does not list, a directory beside HOME (`/home/user`): a home path either way,
//!    never a relative one;
//! 4. `\` becomes `/`;
//! 5. a relative path is joined to PROJECT_DIR (on Windows a drive-letter path such as
//!    `C:/x` counts as absolute; elsewhere `C:` is a directory name like any other, for
//!    values and `not_under` roots alike);
//! 6. `//` and `/./` are dropped and `..` removes the component before it (never climbing
//!    above the root), the way the kernel walks a path: when that component exists and is
//!    a symlink, `..` leaves the directory the link points to, not the one holding the
//!    link (`link/../secret` names a file beside the link's target).
//!
//! Normalisation is string work into a caller-owned buffer, with no allocation once the
//! buffer has grown, and no I/O except for a `..` (one `lstat` of the component it
//! removes, and `canonicalize` only when that is a symlink) and `~user` (the password
//! database, read once). Symlinks are resolved by one walk, [`resolve_links`] (what it
//! looks up is remembered, [`LinkCache`]), whose answer every rule kind judges: the regex
//! and glob rules match it, [`Root::contains`] (behind `not_under`) places it.
//!
//! Comparisons are by path component (`/proj2` is not under `/proj`) and ignore
//! ASCII case on macOS and Windows, whose default file systems do.

use std::path::{Path, PathBuf};

mod links;
pub mod roots;
mod users;

pub use links::{LinkCache, Lookups, MAX_LINKS};

/// HOME, PROJECT_DIR and the server's working directory as a program resolves paths
/// against them. All are kept normalised (absolute, `/`-separated, no trailing `/` except
/// for the root).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathEnv {
    home: String,
    project_dir: String,
    /// Where relative paths start: the working directory the server runs in.
    cwd: String,
}

/// The project directory of a server that has no project (decision 16: one started in
/// `/` or in the home directory): a path nothing a server opens is under, so nothing
/// counts as inside the project.
pub const NO_PROJECT: &str = "/nonexistent/mcpwall-no-project";

impl PathEnv {
    /// A glob over argument values may start with `~/`, `$HOME`, `${HOME}` or
    /// `${PROJECT_DIR}`: the prefix becomes the (glob-escaped) directory, so it meets the
    /// normal form of path-shaped values (ARCHITECTURE decision 9).
    pub fn expand_glob_prefix(&self, glob: &str) -> String {
        let prefixes: [(&str, &str); 5] = [
            ("${PROJECT_DIR}", self.project_dir()),
            ("$PROJECT_DIR", self.project_dir()),
            ("${HOME}", self.home()),
            ("$HOME", self.home()),
            ("~", self.home()),
        ];
        for (var, dir) in prefixes {
            if let Some(rest) = glob.strip_prefix(var)
                && (rest.is_empty() || rest.starts_with('/'))
            {
                let dir = dir.strip_suffix('/').unwrap_or(dir);
                return format!("{}{rest}", globset::escape(dir));
            }
        }
        glob.to_string()
    }

    /// Normalise `home` and `project_dir` (relative ones are taken against the
    /// process's working directory, which is the only thing they can mean).
    pub fn new(home: &Path, project_dir: &Path) -> PathEnv {
        let cwd = std::env::current_dir()
            .map(|p| to_slash_string(&p))
            .unwrap_or_else(|_| "/".to_string());
        let mut base = String::new();
        clean_into(&cwd, "/", &mut base);
        let mut h = String::new();
        clean_into(&to_slash_string(home), &base, &mut h);
        let mut p = String::new();
        clean_into(&to_slash_string(project_dir), &base, &mut p);
        PathEnv {
            home: h,
            cwd: p.clone(),
            project_dir: p,
        }
    }

    /// A server started in `cwd`: relative paths start there, and the project is `cwd`
    /// unless that is the root or the home directory, where there is none
    /// ([`project_roots`], the one resolver rules and sandbox share).
    pub fn for_server(home: &Path, cwd: &Path) -> PathEnv {
        let project = project_roots(home, cwd)
            .into_iter()
            .next()
            .unwrap_or_else(|| PathBuf::from(NO_PROJECT));
        let mut env = PathEnv::new(home, &project);
        let mut c = String::new();
        clean_into(&to_slash_string(cwd), &env.project_dir.clone(), &mut c);
        env.cwd = c;
        env
    }

    /// The same HOME and working directory with another project (the client's roots,
    /// decision 16): `${PROJECT_DIR}` becomes `project`; relative paths still start
    /// where the server runs.
    pub fn with_project(&self, project: &Path) -> PathEnv {
        let mut p = String::new();
        clean_into(&to_slash_string(project), &self.cwd, &mut p);
        PathEnv {
            home: self.home.clone(),
            project_dir: p,
            cwd: self.cwd.clone(),
        }
    }

    /// HOME from the environment (`USERPROFILE` on Windows) and the working directory.
    pub fn from_process() -> PathEnv {
        let home = std::env::var_os("HOME")
            .or_else(|| std::env::var_os("USERPROFILE"))
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/"));
        let project = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
        PathEnv::new(&home, &project)
    }

    pub fn home(&self) -> &str {
        &self.home
    }

    pub fn project_dir(&self) -> &str {
        &self.project_dir
    }

    /// Where relative paths start.
    pub fn cwd(&self) -> &str {
        &self.cwd
    }
}

fn to_slash_string(p: &Path) -> String {
    let s = p.to_string_lossy();
    if cfg!(windows) {
        s.replace('\\', "/")
    } else {
        s.into_owned()
    }
}

/// Whether a value is spelled like a path: it contains `/` or `\`, starts with `~`
/// or `.`, is a `file:` URI, starts with a drive letter (`C:`), or starts with
/// `$HOME`/`${HOME}`. URLs and shell commands that contain `/` count too: they get
/// one extra (harmless) normal form, and a scheme-like prefix is not trusted to mean
/// "not a path" because a server may still open it as one.
pub fn is_path_shaped(s: &str) -> bool {
    let b = s.as_bytes();
    let Some(&first) = b.first() else {
        return false;
    };
    first == b'~'
        || first == b'.'
        || has_separator(b)
        || has_drive_prefix(b)
        || starts_with_ignore_case(s, "file:")
        || home_var_prefix(s).is_some()
}

/// Whether `b` holds a `/` or a `\\`. Argument values are mostly short, and for them
/// `memchr2`'s set-up cost more than the bytes (about 130 instructions a value).
fn has_separator(b: &[u8]) -> bool {
    if b.len() < 32 {
        b.iter().any(|&c| c == b'/' || c == b'\\')
    } else {
        memchr::memchr2(b'/', b'\\', b).is_some()
    }
}

/// `C:` alone or followed by a separator, on Windows. Elsewhere `C:` is an ordinary
/// directory name: a server opens `C:/../../x` relative to its working directory, so
/// reading it as a drive path would let `..` climb out of the project unseen.
fn has_drive_prefix(b: &[u8]) -> bool {
    cfg!(windows)
        && b.len() >= 2
        && b[0].is_ascii_alphabetic()
        && b[1] == b':'
        && (b.len() == 2 || b[2] == b'/' || b[2] == b'\\')
}

fn starts_with_ignore_case(s: &str, prefix: &str) -> bool {
    s.len() >= prefix.len() && s.as_bytes()[..prefix.len()].eq_ignore_ascii_case(prefix.as_bytes())
}

/// Length of a leading `$HOME` / `${HOME}` / `%USERPROFILE%` (Windows' spelling, any
/// case) that stands alone as the first component. Each is home on every system: a
/// server may run elsewhere than mcpwall, and reading more as home only denies more.
fn home_var_prefix(s: &str) -> Option<usize> {
    let len = match *s.as_bytes().first()? {
        b'$' => ["${HOME}", "$HOME"]
            .iter()
            .find(|var| s.starts_with(**var))?
            .len(),
        b'%' if starts_with_ignore_case(s, "%USERPROFILE%") => "%USERPROFILE%".len(),
        _ => return None,
    };
    let rest = &s[len..];
    (rest.is_empty() || rest.starts_with('/') || rest.starts_with('\\')).then_some(len)
}

/// Argument names whose value a file tool opens as a path, even a bare file name
/// (`{"path": "notes.txt"}`): such values are judged with their symlinks resolved too.
const PATH_ARGUMENTS: &[&str] = &[
    "path",
    "paths",
    "file",
    "files",
    "file_path",
    "filepath",
    "filename",
    "source",
    "destination",
    "target",
    "directory",
    "dir",
];

/// Whether an argument of this name holds a path a server opens ([`PATH_ARGUMENTS`]).
pub fn is_path_argument(name: &str) -> bool {
    PATH_ARGUMENTS.contains(&name)
}

/// Reusable buffers for [`normalize_into`].
#[derive(Debug, Default)]
pub struct PathBuffers {
    expanded: String,
    decoded: Vec<u8>,
    /// Directories found not to exist while judging the current message: a `..` below
    /// one needs no look-up. Without it a value of many words like
    /// `/home/u/.sshx/id_rsa.pubx/../.envx` cost four `lstat`s per word, most of the
    /// time of judging it (docs/performance.md).
    missing: Vec<String>,
}

/// At most this many missing directories are remembered per message.
const MISSING_REMEMBERED: usize = 32;

impl PathBuffers {
    /// Forget what the file system looked like: called for each new message.
    pub fn forget(&mut self) {
        self.missing.clear();
    }
}

/// Write the normal form of `value` (see the module docs) into `out`.
///
/// Works for any string; callers decide with [`is_path_shaped`] whether a value is
/// worth it. Does not allocate once `out` and `bufs` have grown to the value's size.
pub fn normalize_into(value: &str, env: &PathEnv, bufs: &mut PathBuffers, out: &mut String) {
    let value = before_nul(value);
    let expanded = &mut bufs.expanded;
    expanded.clear();
    if starts_with_ignore_case(value, "file:") {
        let mut rest = &value[5..];
        if let Some(after) = rest.strip_prefix("//") {
            // `file://host/path`: drop an empty or `localhost` authority; keep any
            // other host as a UNC-like `//host/path`.
            rest = if after.starts_with('/') {
                after
            } else if starts_with_ignore_case(after, "localhost/") {
                &after[9..]
            } else {
                expanded.push_str("//");
                after
            };
        }
        percent_decode_into(rest, &mut bufs.decoded);
        match std::str::from_utf8(&bufs.decoded) {
            Ok(text) => expanded.push_str(text),
            Err(_) => expanded.push_str(&String::from_utf8_lossy(&bufs.decoded)),
        }
    } else if value == "~" || value.starts_with("~/") || value.starts_with("~\\") {
        expanded.push_str(&env.home);
        expanded.push('/');
        expanded.push_str(&value[1..]);
    } else if let Some(n) = home_var_prefix(value) {
        expanded.push_str(&env.home);
        expanded.push('/');
        expanded.push_str(&value[n..]);
    } else if let Some((user, rest)) = other_users_home(value) {
        match users::home_of(user) {
            Some(home) => expanded.push_str(home),
            None => {
                // Unknown here, but a server on another machine or with another user
                // database may know it: judge it as a home, beside ours.
                let parent = env.home.rfind('/').map_or("", |i| &env.home[..i]);
                expanded.push_str(parent);
                expanded.push('/');
                expanded.push_str(user);
            }
        }
        expanded.push('/');
        expanded.push_str(rest);
    } else {
        return clean_into_with(value, &env.cwd, out, &mut bufs.missing);
    }
    clean_into_with(expanded, &env.cwd, out, &mut bufs.missing);
}

/// `value` up to its first NUL.
fn before_nul(value: &str) -> &str {
    match memchr::memchr(0, value.as_bytes()) {
        Some(i) => &value[..i],
        None => value,
    }
}

/// Whether a path-shaped `value` holds a NUL: the server may open only what comes before
/// it, so rules judge that part, and the value is refused unless a rule denies it first.
pub fn has_nul(value: &str) -> bool {
    memchr::memchr(0, value.as_bytes()).is_some()
}

/// `~user/rest` (or `~user` alone) split into the user name and the rest.
fn other_users_home(value: &str) -> Option<(&str, &str)> {
    let after = value.strip_prefix('~')?;
    let end = after.find(['/', '\\']).unwrap_or(after.len());
    let user = &after[..end];
    is_user_name(user).then(|| (user, after[end..].trim_start_matches(['/', '\\'])))
}

/// A portable user name (a letter or `_`, then letters, digits, `_`, `-`, `.`, and an
/// optional final `$`), so `~$report.docx` (an office lock file) stays a file name.
fn is_user_name(name: &str) -> bool {
    let name = name.strip_suffix('$').unwrap_or(name);
    let b = name.as_bytes();
    b.first()
        .is_some_and(|c| c.is_ascii_alphabetic() || *c == b'_')
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b'.'))
}

fn percent_decode_into(s: &str, out: &mut Vec<u8>) {
    out.clear();
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && i + 2 < b.len()
            && let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2]))
        {
            out.push(h << 4 | l);
            i += 3;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
}

fn hex(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

/// Lexically clean `path` (with `\` read as `/`) into `out`; a relative path is
/// joined to `base`, which must already be clean and absolute.
fn clean_into(path: &str, base: &str, out: &mut String) {
    clean_into_with(path, base, out, &mut Vec::new());
}

/// [`clean_into`], skipping the look-up below a directory in `missing` and adding the
/// missing directories it finds.
fn clean_into_with(path: &str, base: &str, out: &mut String, missing: &mut Vec<String>) {
    out.clear();
    let b = path.as_bytes();
    if is_clean_absolute(b) {
        // The usual argument: nothing to resolve, one pass instead of a split.
        out.push_str(path);
        return;
    }
    clean_components(path, base, out, missing);
}

/// [`clean_into`] component by component; `out` is empty.
fn clean_components(path: &str, base: &str, out: &mut String, known_missing: &mut Vec<String>) {
    let b = path.as_bytes();
    let root_len;
    let rest: &str;
    if b.first().is_some_and(|&c| c == b'/' || c == b'\\') {
        out.push('/');
        root_len = 1;
        rest = path;
    } else if has_drive_prefix(b) {
        out.push(char::from(b[0]));
        out.push_str(":/");
        root_len = 3;
        rest = &path[2..];
    } else {
        out.push_str(base);
        root_len = root_len_of(base);
        rest = path;
    }
    // `out[..n]` names nothing on the file system (`None`: not known).
    let mut missing: Option<usize> = None;
    for comp in components(rest) {
        match comp {
            "" | "." => {}
            ".." => {
                // The kernel applies `..` to the directory it has reached, so a symlink
                // before it is followed first. Below a directory known not to exist
                // nothing is a symlink: no look-up (`a/x/../b/x/../…` costs one).
                let below_missing = missing.is_some_and(|n| out.len() >= n)
                    || known_missing.iter().any(|m| is_under(out, m));
                if !below_missing
                    && out.len() > root_len
                    && out.len() <= PATH_MAX
                    && out.starts_with('/')
                {
                    match link_state(out) {
                        LinkState::Symlink(resolved) => {
                            out.clear();
                            out.push_str(&resolved);
                            missing = None;
                        }
                        LinkState::Missing => {
                            let n = highest_missing(out, root_len);
                            if known_missing.len() < MISSING_REMEMBERED {
                                known_missing.push(out[..n].to_string());
                            }
                            missing = Some(n);
                        }
                        LinkState::Other => {}
                    }
                }
                // A byte search: `rfind` with a `char` cost about 140 instructions a `..`.
                let cut = out.as_bytes()[root_len..]
                    .iter()
                    .rposition(|&c| c == b'/')
                    .map_or(root_len, |i| root_len + i);
                out.truncate(cut.max(root_len));
                if missing.is_some_and(|n| out.len() < n) {
                    // Above the missing directory: what follows is not known.
                    missing = None;
                }
            }
            _ => {
                // Windows opens `.ssh.` and `id_rsa ` as `.ssh` and `id_rsa`.
                let comp = if cfg!(windows) {
                    windows_name(comp)
                } else {
                    comp
                };
                if comp.is_empty() {
                    continue;
                }
                if !out.ends_with('/') {
                    out.push('/');
                }
                out.push_str(comp);
            }
        }
    }
}

/// The components of `path` between `/` and `\\` separators, empty ones included (as
/// `str::split` with both separators gives them). Splitting on bytes: a `char` pattern
/// decodes every character, and this loop reads every byte of a value's normal form
/// (a megabyte of path-like text is a megabyte of components).
fn components(path: &str) -> impl Iterator<Item = &str> {
    let mut start = 0;
    let mut done = false;
    std::iter::from_fn(move || {
        if done {
            return None;
        }
        let b = &path.as_bytes()[start..];
        let end = match b.iter().position(|&c| c == b'/' || c == b'\\') {
            Some(k) => start + k,
            None => {
                done = true;
                path.len()
            }
        };
        // Both separators are ASCII, so `start..end` lies on character boundaries.
        let comp = &path[start..end];
        start = end + 1;
        Some(comp)
    })
}

/// The longest path the kernel opens (Linux's `PATH_MAX`; macOS's is 1024, Windows'
/// shorter still): a longer one names nothing on the file system, so it is resolved
/// lexically, without a system call per component (which made long values cost time
/// quadratic in their length).
const PATH_MAX: usize = 4096;

/// What the last component of a path is, for `..`.
enum LinkState {
    /// A symlink, and the real path it resolves to.
    Symlink(String),
    /// Nothing by that name (nor, then, below it).
    Missing,
    /// Something else, or a symlink that does not resolve.
    Other,
}

/// The length of the shortest prefix of `path` (which does not exist) that does not
/// exist either: one look-up per missing ancestor, once, so the `..`s below it need none.
fn highest_missing(path: &str, root_len: usize) -> usize {
    let mut n = path.len();
    while let Some(i) = path[root_len..n].rfind('/') {
        let parent = root_len + i;
        if parent <= root_len {
            break;
        }
        match std::fs::symlink_metadata(&path[..parent]) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => n = parent,
            _ => break,
        }
    }
    n
}

fn link_state(path: &str) -> LinkState {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() => match resolve_existing_prefix(path) {
            Some(resolved) => LinkState::Symlink(resolved),
            None => LinkState::Other,
        },
        Ok(_) => LinkState::Other,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => LinkState::Missing,
        Err(_) => LinkState::Other,
    }
}

/// Whether `clean_into` would return `b` unchanged: an absolute `/` path with no `\\`,
/// no empty, `.` or `..` component and no trailing separator.
fn is_clean_absolute(b: &[u8]) -> bool {
    if b.len() < 2 || b[0] != b'/' || b[b.len() - 1] == b'/' {
        return false;
    }
    // Windows drops a component's trailing dots and spaces (`windows_name`): such a path
    // is not clean there, the walk must see it.
    if cfg!(windows)
        && b.split(|&c| c == b'/')
            .any(|c| matches!(c.last(), Some(b'.' | b' ')))
    {
        return false;
    }
    for i in 0..b.len() {
        match b[i] {
            b'\\' => return false,
            b'/' => {
                let component_end = |j: usize| b.get(j).is_none_or(|&c| c == b'/');
                // `//`, `/.` and `/..` followed by a separator or the end.
                if component_end(i + 1)
                    || b[i + 1] == b'.'
                        && (component_end(i + 2) || b[i + 2] == b'.' && component_end(i + 3))
                {
                    return false;
                }
            }
            _ => {}
        }
    }
    true
}

fn root_len_of(clean: &str) -> usize {
    if has_drive_prefix(clean.as_bytes()) {
        3
    } else {
        1
    }
}

/// Whether the clean path `path` is `root` or lies below it, comparing by component.
pub fn is_under(path: &str, root: &str) -> bool {
    let (p, r) = (path.as_bytes(), root.as_bytes());
    if p.len() < r.len() || !bytes_eq(&p[..r.len()], r) {
        return false;
    }
    p.len() == r.len() || r.ends_with(b"/") || p[r.len()] == b'/'
}

#[cfg(any(target_os = "macos", windows))]
fn bytes_eq(a: &[u8], b: &[u8]) -> bool {
    a.eq_ignore_ascii_case(b)
}

#[cfg(not(any(target_os = "macos", windows)))]
fn bytes_eq(a: &[u8], b: &[u8]) -> bool {
    a == b
}

/// A `not_under` root, prepared at compile time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Root {
    /// The root's normal form.
    pub lexical: String,
    /// The normal form with the symlinks of its longest existing prefix resolved.
    pub canonical: String,
}

impl Root {
    /// Normalise (and resolve, once, at compile time) a root as written in a policy.
    pub fn new(root: &Path, env: &PathEnv) -> Root {
        let mut lexical = String::new();
        normalize_into(
            &to_slash_string(root),
            env,
            &mut PathBuffers::default(),
            &mut lexical,
        );
        let canonical = resolve_existing_prefix(&lexical).unwrap_or_else(|| lexical.clone());
        Root { lexical, canonical }
    }

    /// Whether the value whose normal form is `path` lies under this root, judged by what
    /// the file system opens for it: `opened`, what [`resolve_links`] found for `path`,
    /// the one resolution the regex and glob rules judge too.
    ///
    /// A path with no link on the way is inside when it is under the root as written or
    /// under the root's real path; one through a link, when the real path it leads to is
    /// (a link inside the root leading out is outside, one elsewhere leading in is
    /// inside). What cannot be resolved ([`Resolution::Unknown`]: a loop, a directory
    /// that may not be searched) and a path longer than the kernel opens are outside:
    /// nobody can say where they lead.
    ///
    /// No I/O (the walk was `resolve_links`'s) and no allocation, except on Windows,
    /// where junctions and symlinks are followed here (`canonicalize` of the longest
    /// existing prefix), since `resolve_links` there expands short names only.
    pub fn contains(&self, path: &str, opened: &Resolution) -> bool {
        let real = match opened {
            Resolution::Unknown => return false,
            Resolution::Unchanged => path,
            Resolution::Resolved(real) => real.as_str(),
        };
        if real.len() > PATH_MAX {
            return false;
        }
        if cfg!(windows) {
            return resolve_existing_prefix(real).is_some_and(|r| is_under(&r, &self.canonical));
        }
        is_under(real, &self.canonical) || is_under(real, &self.lexical)
    }
}

/// The clean absolute `path` as the file system opens it (see [`Lookups::resolve`]);
/// on Windows, with its 8.3 short names expanded (and, when `one_name`, every trailing
/// run of dots and spaces dropped: see [`resolve_short_names`]).
/// `cwd`: see [`Lookups::resolve`].
pub fn resolve_links(
    path: &str,
    cwd: Option<&str>,
    one_name: bool,
    lookups: &mut Lookups<'_>,
) -> Resolution {
    if cfg!(windows) {
        return resolve_short_names(path, one_name);
    }
    lookups.resolve(path, cwd)
}

/// Whether a server opens `value` relative to its working directory: not absolute, not
/// from a home (`~`, `$HOME`, `%USERPROFILE%`), not a `file:` URI, not a drive path.
pub fn is_relative(value: &str) -> bool {
    !value.starts_with(['/', '\\', '~', '$', '%'])
        && !starts_with_ignore_case(value, "file:")
        && !has_drive_prefix(value.as_bytes())
}

/// Whether an argument of this name may hold a path a server opens: a
/// [`PATH_ARGUMENTS`] name, or one ending like one (`notebook_path`, `output_dir`).
pub fn may_name_a_path(name: &str) -> bool {
    is_path_argument(name)
        || ["path", "file", "dir", "directory", "folder", "filename"]
            .iter()
            .any(|end| name.len() > end.len() && ends_with_ignore_case(name, end))
}

fn ends_with_ignore_case(s: &str, suffix: &str) -> bool {
    s.len() >= suffix.len()
        && s.as_bytes()[s.len() - suffix.len()..].eq_ignore_ascii_case(suffix.as_bytes())
}

/// Whether `value` is a URL of another scheme than `file:` (`https://host/x`): what a
/// server fetches, not a path on this file system.
pub fn is_remote_url(value: &str) -> bool {
    let Some(at) = value.find("://") else {
        return false;
    };
    let scheme = &value.as_bytes()[..at];
    scheme.len() >= 2
        && scheme[0].is_ascii_alphabetic()
        && scheme
            .iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'+' | b'-' | b'.'))
        && !scheme.eq_ignore_ascii_case(b"file")
}

/// Whether `value` could be one path a server opens: not empty, no line break, no
/// longer than the kernel opens. Others are not looked up on the file system.
pub fn may_name_a_file(value: &str) -> bool {
    !value.is_empty()
        && value.len() <= PATH_MAX
        && memchr::memchr2(b'\n', b'\r', value.as_bytes()).is_none()
}

/// What [`resolve_links`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolution {
    /// Nothing to resolve: no existing component is a link (judged as written).
    Unchanged,
    /// The path the file system opens, which differs from the one written.
    Resolved(String),
    /// What the path opens cannot be known: a link loop (more than [`MAX_LINKS`]
    /// links), a directory this process may not search, or a Windows short name below
    /// what exists. Unreadable, refused.
    Unknown,
}

/// On Windows, `path` as the file system opens it: when it is `one_name` (a path
/// argument's value), every component without its trailing dots and spaces (the normal
/// form keeps ` .` after a name, `app.log .`, which in a command line is more often a
/// second word, as in `scp host:/tmp/app.log .`; a path argument's `id_rsa .` is the file
/// `id_rsa`), and its 8.3 short names (`C:/Users/u/SSH~1/ID_ED2~1`) expanded to the long names of what exists
/// ([`crate::platform::long_path_name`]). A short name below what exists cannot be
/// expanded: it could stand for any name there, so the path is [`Resolution::Unknown`]
/// (refused unless a rule denies it).
fn resolve_short_names(path: &str, one_name: bool) -> Resolution {
    let stripped = one_name.then(|| strip_windows_names(path)).flatten();
    let path_now = stripped.as_deref().unwrap_or(path);
    if !path_now.split('/').any(is_short_name) {
        return match stripped {
            Some(stripped) => Resolution::Resolved(stripped),
            None => Resolution::Unchanged,
        };
    }
    // The longest existing prefix, expanded; what follows it must hold no short name.
    let root = root_len_of(path_now).min(path_now.len());
    let mut end = path_now.len();
    loop {
        if let Some(long) = crate::platform::long_path_name(&path_now[..end]) {
            let rest = &path_now[end..];
            if long.split('/').any(is_short_name) || rest.split('/').any(is_short_name) {
                return Resolution::Unknown;
            }
            let mut long = long;
            long.truncate(long.trim_end_matches('/').len().max(root));
            if !rest.is_empty() && !long.ends_with('/') {
                long.push('/');
            }
            long.push_str(rest.trim_start_matches('/'));
            return if long == path {
                Resolution::Unchanged
            } else {
                Resolution::Resolved(long)
            };
        }
        match path_now[..end].rfind('/') {
            Some(i) if i >= root => end = i.max(root),
            Some(i) if end > root && i + 1 == root => end = root,
            _ => return Resolution::Unknown,
        }
    }
}

/// `path` with every component's trailing dots and spaces dropped, as Windows opens it,
/// when that changes it.
fn strip_windows_names(path: &str) -> Option<String> {
    if !path
        .split('/')
        .any(|c| c != "." && c != ".." && c.ends_with(['.', ' ']))
    {
        return None;
    }
    let mut out = String::with_capacity(path.len());
    for (i, component) in path.split('/').enumerate() {
        if i > 0 {
            out.push('/');
        }
        if component == "." || component == ".." {
            out.push_str(component);
        } else {
            out.push_str(component.trim_end_matches(['.', ' ']));
        }
    }
    Some(out)
}

/// Whether a path component is spelled as an 8.3 short name: one to six characters, `~`,
/// a digit string, and an optional extension of one to three characters (`PROGRA~1`,
/// `SSH~1`, `ID_ED2~1.PUB`). Windows opens such a name as the long name it stands for.
pub fn is_short_name(component: &str) -> bool {
    let (base, ext) = match component.rsplit_once('.') {
        Some((base, ext)) => (base, Some(ext)),
        None => (component, None),
    };
    let Some((stem, number)) = base.rsplit_once('~') else {
        return false;
    };
    !stem.is_empty()
        && stem.len() + 1 + number.len() <= 8
        && !number.is_empty()
        && number.bytes().all(|b| b.is_ascii_digit())
        && !stem.contains(['~', '.', ' '])
        && ext.is_none_or(|e| (1..=3).contains(&e.len()) && !e.contains(['~', ' ']))
}

/// The name Windows opens for a path component: it drops trailing dots and spaces, so
/// `.ssh.` opens `.ssh` and `id_rsa. ` opens `id_rsa`; a component of dots and spaces
/// only (`...`) is dropped like `.`. `.` and `..` are left to the caller.
pub fn windows_name(component: &str) -> &str {
    let name = component.trim_end_matches(['.', ' ']);
    // A run that starts with a space and goes on with a dot (`app.log .`) is a word
    // after a name in a command line far more often than one file's name: read as
    // written, or `scp host:/tmp/app.log .` would read as ending in the remote file.
    let tail = &component[name.len()..];
    if !name.is_empty() && tail.starts_with(' ') && tail.contains('.') {
        return component;
    }
    name
}

/// `canonicalize` the longest existing ancestor of the clean absolute `path` and
/// append the rest. `None` when nothing of it exists on this file system.
fn resolve_existing_prefix(path: &str) -> Option<String> {
    if !(path.starts_with('/') || cfg!(windows)) {
        return None;
    }
    let full = Path::new(path);
    for ancestor in full.ancestors().filter(|a| a.as_os_str().len() <= PATH_MAX) {
        if let Ok(real) = std::fs::canonicalize(ancestor) {
            let mut out = to_slash_string(&real);
            if cfg!(windows)
                && let Some(stripped) = out.strip_prefix("//?/")
            {
                out = stripped.to_string();
            }
            let rest = full.strip_prefix(ancestor).ok()?;
            for comp in rest.components() {
                if !out.ends_with('/') {
                    out.push('/');
                }
                out.push_str(&comp.as_os_str().to_string_lossy());
            }
            return Some(out);
        }
    }
    None
}

/// The project, defined once (decision 16): the working directory, unless it is the root
/// of the file system or the home directory, which desktop clients start servers in and
/// which hold everything, so that nothing would be outside the project. Then there is no
/// project, and nothing counts as inside one.
pub fn project_roots(home: &Path, cwd: &Path) -> Vec<PathBuf> {
    // Compared in their canonical forms (a link to the home is the home), returned as
    // given: on Windows the canonical form is a `\\?\` path no rule is written against.
    let canonical = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let dir = canonical(cwd);
    if dir.parent().is_none() || dir == canonical(home) {
        return Vec::new();
    }
    vec![std::path::absolute(cwd).unwrap_or_else(|_| cwd.to_path_buf())]
}

#[cfg(test)]
mod tests {
    /// The one-pass check only ever claims paths the component walk leaves unchanged,
    /// and claims the plain ones.
    #[test]
    fn clean_absolute_paths_are_left_as_the_walk_leaves_them() {
        let alphabet = ["/", ".", "..", "a", "\\", "b.c", "~", "//"];
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut claimed = 0;
        for _ in 0..20_000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let mut path = String::from("/");
            for k in 0..(state % 7) {
                path.push_str(alphabet[(state >> (8 + 3 * k)) as usize % alphabet.len()]);
            }
            let mut walked = String::new();
            super::clean_components(&path, "/base", &mut walked, &mut Vec::new());
            if super::is_clean_absolute(path.as_bytes()) {
                claimed += 1;
                assert_eq!(walked, path, "{path:?}");
            } else {
                assert!(
                    walked != path || path == "/",
                    "{path:?} is clean but not claimed"
                );
            }
        }
        assert!(claimed > 1_000);
        assert!(super::is_clean_absolute(b"/home/u/.ssh/id_rsa"));
        assert!(super::is_clean_absolute(b"/p/...x/..y/.z"));
    }

    #[test]
    fn components_split_as_str_split_does() {
        for path in [
            "",
            "/",
            "//",
            "a",
            "/a/b",
            "a\\b/c\\",
            "/héllo/wörld/../日本/",
            "..",
            "x//y\\\\z",
        ] {
            let by_bytes: Vec<&str> = super::components(path).collect();
            let by_chars: Vec<&str> = path.split(['/', '\\']).collect();
            assert_eq!(by_bytes, by_chars, "{path:?}");
        }
    }

    use super::*;

    fn env() -> PathEnv {
        PathEnv::new(Path::new("/home/u"), Path::new("/proj"))
    }

    fn norm(s: &str) -> String {
        let mut out = String::new();
        normalize_into(s, &env(), &mut PathBuffers::default(), &mut out);
        out
    }

    #[test]
    fn other_users_homes() {
        // `root` is in every Linux password file; the unknown user lives beside HOME.
        if cfg!(target_os = "linux") {
            assert_eq!(norm("~root/.ssh/id_rsa"), "/root/.ssh/id_rsa");
        }
        assert_eq!(norm("~no-such-user-r22/x"), "/home/no-such-user-r22/x");
        assert_eq!(norm("~no-such-user-r22"), "/home/no-such-user-r22");
        assert_eq!(norm("~$report.docx"), "/proj/~$report.docx");
        assert_eq!(norm("~+/x"), "/proj/~+/x");
    }

    #[test]
    fn nul_ends_the_path() {
        assert_eq!(norm("/srv/app/.env\0.txt"), "/srv/app/.env");
        assert_eq!(norm("~/.ssh/id_rsa\0"), "/home/u/.ssh/id_rsa");
        assert!(has_nul("a\0b") && !has_nul("ab"));
    }

    #[test]
    fn spellings_of_one_file_share_a_normal_form() {
        for s in [
            "/home/u/.aws/credentials",
            "~/.aws/credentials",
            "${HOME}/.aws/credentials",
            "$HOME/.aws//credentials",
            "/home/u/.aws/./credentials",
            "/home/u/x/../.aws/credentials",
            "file:///home/u/.aws/credentials",
            "file://localhost/home/u/%2Eaws/credentials",
            "../home/u/.aws/credentials",
            "~\\.aws\\credentials",
            "%USERPROFILE%\\.aws\\credentials",
            "%userprofile%/.aws/credentials",
        ] {
            assert_eq!(norm(s), "/home/u/.aws/credentials", "{s}");
        }
        // Only the whole first component is the variable.
        assert_eq!(norm("%USERPROFILE%x/y"), "/proj/%USERPROFILE%x/y");
        assert!(is_path_shaped("%USERPROFILE%"));
    }

    #[test]
    fn relative_paths_join_the_project_dir() {
        assert_eq!(norm(".aws//credentials"), "/proj/.aws/credentials");
        assert_eq!(norm("src/../lib.rs"), "/proj/lib.rs");
        assert_eq!(norm("."), "/proj");
        assert_eq!(norm(""), "/proj");
    }

    #[test]
    fn dotdot_never_climbs_above_the_root() {
        assert_eq!(norm("/../../etc/passwd"), "/etc/passwd");
        if cfg!(windows) {
            assert_eq!(
                norm("C:\\..\\Users\\u\\.ssh\\id_rsa"),
                "C:/Users/u/.ssh/id_rsa"
            );
        }
        assert_eq!(norm("/a/.."), "/");
    }

    #[test]
    fn a_drive_letter_is_a_directory_name_off_windows() {
        if cfg!(windows) {
            return;
        }
        // A server opens `C:/..` relative to its working directory.
        assert_eq!(norm("C:/../../etc/passwd"), "/etc/passwd");
        assert_eq!(norm("C:\\x"), "/proj/C:/x");
        assert_eq!(norm("D:/x"), "/proj/D:/x");
        assert!(!is_path_shaped("C:"));
    }

    #[test]
    fn windows_spellings_are_recognised() {
        for yes in [
            "PROGRA~1",
            "SSH~1",
            "ID_ED2~1",
            "ID_ED2~1.PUB",
            "MCPWAL~1",
            "A~12345",
        ] {
            assert!(is_short_name(yes), "{yes}");
        }
        for no in [
            "~",
            "~1",
            "file~",
            "a~b",
            "LONGNAME~1",
            ".ssh",
            "x~1.long",
            "~user",
            "a~1.b~",
        ] {
            assert!(!is_short_name(no), "{no}");
        }
        assert_eq!(windows_name(".ssh."), ".ssh");
        assert_eq!(windows_name("id_rsa. ."), "id_rsa");
        assert_eq!(windows_name("..."), "");
        assert_eq!(windows_name("a.b"), "a.b");
        assert_eq!(windows_name("app.log ."), "app.log .");
    }

    /// On Windows, a short name below what exists cannot be expanded: unknown, refused.
    #[cfg(windows)]
    #[test]
    fn a_short_name_that_cannot_be_expanded_is_unknown() {
        let mut cache = LinkCache::default();
        assert_eq!(
            resolve_links(
                "C:/nonexistent-mcpwall-test/SSH~1/ID_ED2~1",
                None,
                true,
                &mut cache.lookups()
            ),
            Resolution::Unknown
        );
        assert_eq!(
            resolve_links(
                "C:/nonexistent-mcpwall-test/ssh/id_ed25519",
                None,
                true,
                &mut cache.lookups()
            ),
            Resolution::Unchanged
        );
    }

    /// On Windows, a name followed by ` .` (kept as written in the normal form, where it
    /// is mostly a second word of a command line) is judged stripped too: Windows opens
    /// `id_rsa .` as `id_rsa`.
    #[cfg(windows)]
    #[test]
    fn a_dot_after_a_space_is_dropped_when_resolving() {
        let mut cache = LinkCache::default();
        assert_eq!(
            resolve_links("C:/Users/u/.ssh/id_rsa .", None, true, &mut cache.lookups()),
            Resolution::Resolved("C:/Users/u/.ssh/id_rsa".to_string())
        );
        assert_eq!(
            resolve_links(
                "C:/Users/u/.aws. ./credentials",
                None,
                true,
                &mut cache.lookups()
            ),
            Resolution::Resolved("C:/Users/u/.aws/credentials".to_string())
        );
        // Not in text that may hold several words: `scp host:/tmp/app.log .`.
        assert_eq!(
            resolve_links(
                "C:/proj/scp user@h:/tmp/app.log .",
                None,
                false,
                &mut cache.lookups()
            ),
            Resolution::Unchanged
        );
    }

    /// On Windows, an 8.3 short name of what exists is expanded to its long name
    /// (`GetLongPathNameW`), also when what follows it does not exist yet.
    #[cfg(windows)]
    #[test]
    fn a_short_name_of_what_exists_is_expanded() {
        let dir = tempfile::tempdir().unwrap();
        let long_dir = dir.path().join("credentials store");
        std::fs::create_dir(&long_dir).unwrap();
        std::fs::write(long_dir.join("private key file.pem"), "x").unwrap();
        let long = crate::platform::long_path_name(&long_dir.to_string_lossy()).unwrap();
        let Some(short) = crate::platform::short_path_name(&long) else {
            eprintln!("note: this file system gives no short names; not checked");
            return;
        };
        // Whatever form the short names take (Wine makes `CRED~SRS`), they expand back.
        assert_eq!(crate::platform::long_path_name(&short), Some(long.clone()));
        if !short.split('/').any(is_short_name) {
            eprintln!("note: no 8.3 name for {long} ({short}); not checked");
            return;
        }
        let mut cache = LinkCache::default();
        let file = format!("{long}/private key file.pem");
        let short_file = crate::platform::short_path_name(&file).unwrap();
        assert_eq!(
            resolve_links(&short_file, None, true, &mut cache.lookups()),
            Resolution::Resolved(file)
        );
        assert_eq!(
            resolve_links(
                &format!("{short}/new.txt"),
                None,
                true,
                &mut cache.lookups()
            ),
            Resolution::Resolved(format!("{long}/new.txt"))
        );
    }

    /// On Windows, trailing dots and spaces are dropped from every component, as the
    /// file system does; elsewhere they are part of the name.
    #[test]
    fn trailing_dots_and_spaces_follow_the_platform() {
        if cfg!(windows) {
            assert_eq!(norm("C:/Users/u/.ssh./id_rsa."), "C:/Users/u/.ssh/id_rsa");
            assert_eq!(
                norm("C:/Users/u/.aws. /credentials "),
                "C:/Users/u/.aws/credentials"
            );
        } else {
            assert_eq!(norm("/home/u/.ssh./id_rsa."), "/home/u/.ssh./id_rsa.");
        }
    }

    /// Which values the symlink look-up treats as opened from the working directory, and
    /// which argument names and values it looks up at all.
    #[test]
    fn what_the_link_lookup_reads() {
        for rel in ["notes.txt", "docs/x", "./a", "../a", "text/html"] {
            assert!(is_relative(rel), "{rel}");
        }
        for abs in [
            "/etc/x",
            "~/x",
            "$HOME/x",
            "%USERPROFILE%/x",
            "file:///x",
            "\\x",
        ] {
            assert!(!is_relative(abs), "{abs}");
        }
        for name in [
            "path",
            "notebook_path",
            "output_dir",
            "input_file",
            "targetFolder",
        ] {
            assert!(may_name_a_path(name), "{name}");
        }
        for name in ["command", "url", "content", "accept"] {
            assert!(!may_name_a_path(name), "{name}");
        }
        assert!(is_remote_url("https://docs.rs/x") && is_remote_url("s3://b/k"));
        assert!(!is_remote_url("file:///etc/x") && !is_remote_url("C://x"));
        assert!(!is_remote_url("a/b://c"));
    }

    #[test]
    fn path_shape() {
        for yes in [
            "/x",
            "a\\b",
            "~",
            ".env",
            "c:\\x",
            "file:x",
            "$HOME",
            "${HOME}/x",
        ] {
            assert!(is_path_shaped(yes), "{yes}");
        }
        for no in ["", "ls", "key:value", "AB:", "$HOMEDIR", "hello world"] {
            assert!(!is_path_shaped(no), "{no}");
        }
    }

    #[test]
    fn containment_is_by_component() {
        assert!(is_under("/proj", "/proj"));
        assert!(is_under("/proj/a", "/proj"));
        assert!(!is_under("/proj2", "/proj"));
        assert!(!is_under("/pro", "/proj"));
        assert!(is_under("/anything", "/"));
    }

    #[test]
    fn symlinks_inside_the_root_are_followed() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        let proj = base.join("proj");
        let outside = base.join("outside");
        std::fs::create_dir_all(proj.join("sub")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        #[cfg(unix)]
        std::os::unix::fs::symlink(&outside, proj.join("escape")).unwrap();
        let env = PathEnv::new(Path::new("/home/u"), &proj);
        let root = Root::new(&proj, &env);
        let mut cache = LinkCache::default();
        let mut inside = |s: &str| {
            let mut path = String::new();
            normalize_into(s, &env, &mut PathBuffers::default(), &mut path);
            let opened = resolve_links(&path, None, true, &mut cache.lookups());
            root.contains(&path, &opened)
        };
        assert!(inside("sub/new-file"));
        assert!(inside("not-yet/created/file"));
        assert!(!inside("../outside/x"));
        #[cfg(unix)]
        assert!(!inside("escape/x"));
    }

    /// What cannot be resolved is outside every root, the root itself included; so is a
    /// path longer than the kernel opens. On Windows, a short name below what exists
    /// (which could stand for any name there) is such a path.
    #[test]
    fn what_cannot_be_resolved_is_outside() {
        let env = env();
        let root = Root::new(Path::new("/proj"), &env);
        // (On Windows, `/proj` is taken on the current drive.)
        assert!(cfg!(windows) || root.contains("/proj/src", &Resolution::Unchanged));
        assert!(!root.contains("/proj", &Resolution::Unknown));
        assert!(!root.contains("/proj/src", &Resolution::Unknown));
        let long = format!("/proj/{}", "x/".repeat(PATH_MAX));
        assert!(!root.contains(&long, &Resolution::Unchanged));
        #[cfg(windows)]
        {
            let root = Root::new(Path::new("C:/nonexistent-mcpwall-test"), &env);
            let short = "C:/nonexistent-mcpwall-test/SSH~1/ID_ED2~1";
            let mut cache = LinkCache::default();
            let opened = resolve_links(short, None, true, &mut cache.lookups());
            assert!(!root.contains(short, &opened));
        }
    }

    /// Running on Windows, a Windows user's key path is judged against a Windows home,
    /// in any case and with either separator.
    #[cfg(windows)]
    #[test]
    fn windows_paths_are_judged_as_windows_paths() {
        let env = PathEnv::new(Path::new("C:\\Users\\x"), Path::new("C:\\work\\proj"));
        let n = |s: &str| {
            let mut out = String::new();
            normalize_into(s, &env, &mut PathBuffers::default(), &mut out);
            out
        };
        let ssh = Root::new(Path::new("~/.ssh"), &env);
        let mut cache = LinkCache::default();
        let mut inside = |path: &str| {
            let opened = resolve_links(path, None, true, &mut cache.lookups());
            ssh.contains(path, &opened)
        };
        for spelling in [
            "C:\\Users\\x\\.ssh\\id_rsa",
            "c:\\users\\X\\.SSH\\id_rsa",
            "C:/Users/x/.ssh/id_rsa",
            "%USERPROFILE%\\.ssh\\id_rsa",
            "~\\.ssh\\id_rsa",
            "..\\..\\Users\\x\\.ssh\\id_rsa",
        ] {
            assert!(inside(&n(spelling)), "{spelling} -> {}", n(spelling));
        }
        assert!(!inside(&n("C:\\Users\\x\\.sshx\\id_rsa")));
        assert!(!inside(&n("D:\\Users\\x\\.ssh\\id_rsa")));
    }
}
