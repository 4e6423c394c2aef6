//! The client's roots (MCP `roots/list`) read as the project (decision 16).
//!
//! A client that declares the `roots` capability says where the user's project is, as
//! `file://` URIs. The answer comes from a client an attacker may steer (a model that
//! writes its own tool calls can also be behind a client's roots, and a compromised
//! client can write anything), so each URI is read strictly and a root that would make
//! everything "inside the project" never counts:
//!
//! - only `file://` URIs, with an empty or `localhost` host (any other host names
//!   another machine's files: refused, never read as a local path);
//! - percent-decoded exactly once; a bad escape, a NUL, a query or a fragment, a control
//!   character or text that is not UTF-8 refuses the root;
//! - a Windows drive (`file:///C:/x`) only on Windows; elsewhere `/C:/x` is a directory
//!   of that name, as the server would open it;
//! - `..` is resolved as the kernel walks it; the result must not be `/`, the home
//!   directory or a directory above the home (`/home`, `/Users`): those hold every
//!   protected file, so a root there would be no project at all;
//! - at most [`MAX_CLIENT_ROOTS`] roots of at most [`MAX_ROOT_URI_BYTES`] bytes each.
//!   Roots past the first [`MAX_CLIENT_ROOTS`] are left out, which only makes the
//!   project smaller (a write there is judged as outside the project).

use std::fmt;
use std::path::{Path, PathBuf};

/// The most roots one answer contributes to the project.
pub const MAX_CLIENT_ROOTS: usize = 64;

/// The longest root URI read, in bytes.
pub const MAX_ROOT_URI_BYTES: usize = 4096;

/// Why a root the client named does not count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RootRefusal {
    /// Not a `file://` URI (another scheme, or `file:` without `//`).
    NotFileUri,
    /// A host other than empty or `localhost`.
    Host(String),
    /// The URI cannot be read as a path (the reason says what is wrong).
    Malformed(&'static str),
    /// Longer than [`MAX_ROOT_URI_BYTES`].
    TooLong(usize),
    /// `/`, the home directory or above it: no project.
    NoProject(PathBuf),
}

impl fmt::Display for RootRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RootRefusal::NotFileUri => f.write_str("not a file:// URI"),
            RootRefusal::Host(h) => write!(f, "names the host {h:?}, not this machine"),
            RootRefusal::Malformed(why) => f.write_str(why),
            RootRefusal::TooLong(n) => {
                write!(f, "{n} bytes long (at most {MAX_ROOT_URI_BYTES} are read)")
            }
            RootRefusal::NoProject(p) => write!(
                f,
                "{} is the root of the file system, the home directory or above it, \
                 which is no project",
                p.display()
            ),
        }
    }
}

/// What one `roots/list` answer makes of the project.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientRoots {
    /// The roots that count, in the client's order, without repeats. Empty: no project.
    pub roots: Vec<PathBuf>,
    /// The roots that do not count, each with its URI (cut to 200 characters for the
    /// log) and why.
    pub refused: Vec<(String, RootRefusal)>,
    /// Roots left out past [`MAX_CLIENT_ROOTS`].
    pub dropped: usize,
}

/// Read the URIs of a `roots/list` answer as the project.
pub fn client_roots<'a>(home: &Path, uris: impl IntoIterator<Item = &'a str>) -> ClientRoots {
    let mut out = ClientRoots::default();
    for uri in uris {
        if out.roots.len() >= MAX_CLIENT_ROOTS {
            out.dropped += 1;
            continue;
        }
        match root_from_uri(uri, home) {
            Ok(root) if out.roots.contains(&root) => {}
            Ok(root) => out.roots.push(root),
            Err(why) => {
                // Bounded, so a huge list of huge refused URIs cannot grow the log.
                if out.refused.len() < MAX_CLIENT_ROOTS {
                    out.refused.push((uri.chars().take(200).collect(), why));
                } else {
                    out.dropped += 1;
                }
            }
        }
    }
    out
}

/// One root URI as a project directory (see the module docs for what is refused).
pub fn root_from_uri(uri: &str, home: &Path) -> Result<PathBuf, RootRefusal> {
    if uri.len() > MAX_ROOT_URI_BYTES {
        return Err(RootRefusal::TooLong(uri.len()));
    }
    let path = file_uri_path(uri)?;
    let mut clean = String::new();
    super::clean_into(&path, "/", &mut clean);
    let root = PathBuf::from(&clean);
    if holds_home(&root, home) {
        return Err(RootRefusal::NoProject(root));
    }
    Ok(root)
}

/// The local path a `file://` URI names, decoded (RFC 8089, strictly).
pub fn file_uri_path(uri: &str) -> Result<String, RootRefusal> {
    let scheme_end = uri.find(':').ok_or(RootRefusal::NotFileUri)?;
    if !uri[..scheme_end].eq_ignore_ascii_case("file") {
        return Err(RootRefusal::NotFileUri);
    }
    let rest = uri[scheme_end + 1..]
        .strip_prefix("//")
        .ok_or(RootRefusal::NotFileUri)?;
    if uri.bytes().any(|b| b.is_ascii_control()) {
        return Err(RootRefusal::Malformed("holds a control character"));
    }
    if rest.contains(['?', '#']) {
        return Err(RootRefusal::Malformed(
            "has a query or a fragment, which no directory has",
        ));
    }
    let (host, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    let host = percent_decode(host)?;
    if !(host.is_empty() || host.eq_ignore_ascii_case("localhost")) {
        return Err(RootRefusal::Host(host.chars().take(100).collect()));
    }
    if path.is_empty() {
        return Err(RootRefusal::Malformed("has no path"));
    }
    let decoded = percent_decode(path)?;
    if decoded.contains('\0') {
        return Err(RootRefusal::Malformed("holds a NUL character"));
    }
    if cfg!(windows) {
        let b = decoded.as_bytes();
        // `/C:/x` and `/C:` are the drive path `C:/x`; any other path has no drive and
        // would be taken against the current drive, which is no project anyone named.
        if b.len() >= 3 && b[1].is_ascii_alphabetic() && b[2] == b':' {
            if b.len() == 3 || b[3] == b'/' || b[3] == b'\\' {
                return Ok(decoded[1..].replace('\\', "/"));
            }
            return Err(RootRefusal::Malformed("has a malformed drive"));
        }
        return Err(RootRefusal::Malformed("names no drive"));
    }
    Ok(decoded)
}

/// `%XX` escapes decoded; a `%` not followed by two hex digits, or bytes that are not
/// UTF-8 afterwards, refuse the URI.
fn percent_decode(text: &str) -> Result<String, RootRefusal> {
    if !text.contains('%') {
        return Ok(text.to_string());
    }
    let b = text.as_bytes();
    let mut bytes = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = |c: u8| (c as char).to_digit(16);
            match (
                b.get(i + 1).and_then(|&c| hex(c)),
                b.get(i + 2).and_then(|&c| hex(c)),
            ) {
                (Some(h), Some(l)) => bytes.push((h * 16 + l) as u8),
                _ => return Err(RootRefusal::Malformed("has a malformed %-escape")),
            }
            i += 3;
        } else {
            bytes.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(bytes).map_err(|_| RootRefusal::Malformed("does not decode to UTF-8"))
}

/// Whether `root` is `/`, the home directory or a directory above it, compared in their
/// canonical forms (a link to the home is the home) and, where the file system ignores
/// case, without case.
fn holds_home(root: &Path, home: &Path) -> bool {
    // Both as the file system has them (what exists resolved, Windows's `\\?\` prefix
    // dropped), so a home that does not exist is still compared with a root that does.
    let resolved = |p: &Path| {
        let mut clean = String::new();
        super::clean_into(&super::to_slash_string(p), "/", &mut clean);
        let real = super::resolve_existing_prefix(&clean).unwrap_or(clean);
        if cfg!(any(windows, target_os = "macos")) {
            real.to_ascii_lowercase()
        } else {
            real
        }
    };
    let (r, h) = (resolved(root), resolved(home));
    let r = Path::new(&r);
    r.parent().is_none() || Path::new(&h).starts_with(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn home() -> PathBuf {
        PathBuf::from("/home/u")
    }

    // POSIX roots (`file:///home/…`): on Windows a root names its drive.
    #[cfg(unix)]
    #[test]
    fn a_plain_root_and_a_localhost_root_are_read_as_paths() {
        assert_eq!(
            root_from_uri("file:///home/u/proj", &home()),
            Ok(PathBuf::from("/home/u/proj"))
        );
        assert_eq!(
            root_from_uri("FILE://LocalHost/srv/app", &home()),
            Ok(PathBuf::from("/srv/app"))
        );
    }

    // POSIX roots (`file:///home/…`): on Windows a root names its drive.
    #[cfg(unix)]
    #[test]
    fn escapes_are_decoded_once() {
        assert_eq!(
            root_from_uri("file:///home/u/my%20proj/%2541", &home()),
            Ok(PathBuf::from("/home/u/my proj/%41"))
        );
    }

    #[test]
    fn other_hosts_schemes_and_bad_escapes_are_refused() {
        let h = home();
        assert!(matches!(
            root_from_uri("file://evil-host/home/u/proj", &h),
            Err(RootRefusal::Host(_))
        ));
        assert!(matches!(
            root_from_uri("file://evil%2Dhost/x", &h),
            Err(RootRefusal::Host(_))
        ));
        assert_eq!(
            root_from_uri("https://x/home/u/proj", &h),
            Err(RootRefusal::NotFileUri)
        );
        assert_eq!(
            root_from_uri("file:/home/u/p", &h),
            Err(RootRefusal::NotFileUri)
        );
        assert_eq!(root_from_uri("/home/u/p", &h), Err(RootRefusal::NotFileUri));
        for bad in [
            "file:///home/u/p%2",
            "file:///home/u/p%zz",
            "file:///home/u/p%00x",
            "file:///home/u/p%ff",
            "file:///home/u/p?x=1",
            "file:///home/u/p#frag",
            "file:///home/u/p\nq",
            "file://",
        ] {
            assert!(
                matches!(root_from_uri(bad, &h), Err(RootRefusal::Malformed(_))),
                "{bad:?}: {:?}",
                root_from_uri(bad, &h)
            );
        }
    }

    // POSIX roots (`file:///home/…`): on Windows a root names its drive.
    #[cfg(unix)]
    #[test]
    fn the_root_the_home_and_above_it_are_no_project() {
        let h = home();
        for uri in [
            "file:///",
            "file:///home/u",
            "file:///home/u/",
            "file:///home",
            "file:///home/u/proj/../..",
            "file:///home/u/proj/%2E%2E",
            "file:///..",
        ] {
            assert!(
                matches!(root_from_uri(uri, &h), Err(RootRefusal::NoProject(_))),
                "{uri}: {:?}",
                root_from_uri(uri, &h)
            );
        }
    }

    /// On Windows a root names its drive; a POSIX-style root names none and is refused,
    /// and the home directory (and what holds it) is no project there either.
    #[cfg(windows)]
    #[test]
    fn a_windows_root_names_its_drive() {
        let home = PathBuf::from("C:/Users/u");
        assert_eq!(
            root_from_uri("file:///C:/Users/u/proj", &home),
            Ok(PathBuf::from("C:/Users/u/proj"))
        );
        assert_eq!(
            root_from_uri("file:///C%3A/Users/u/my%20proj", &home),
            Ok(PathBuf::from("C:/Users/u/my proj"))
        );
        for refused in ["file:///home/u/proj", "file:///C:x/proj", "file:///1:/proj"] {
            assert!(
                matches!(
                    root_from_uri(refused, &home),
                    Err(RootRefusal::Malformed(_))
                ),
                "{refused}: {:?}",
                root_from_uri(refused, &home)
            );
        }
        for no_project in ["file:///C:/Users/u", "file:///C:/Users", "file:///C:/"] {
            assert!(
                matches!(
                    root_from_uri(no_project, &home),
                    Err(RootRefusal::NoProject(_))
                ),
                "{no_project}: {:?}",
                root_from_uri(no_project, &home)
            );
        }
    }

    #[cfg(not(windows))]
    #[test]
    fn a_drive_is_a_directory_name_off_windows() {
        assert_eq!(
            root_from_uri("file:///C:/work", &home()),
            Ok(PathBuf::from("/C:/work"))
        );
    }

    // POSIX roots (`file:///home/…`): on Windows a root names its drive.
    #[cfg(unix)]
    #[test]
    fn lists_are_bounded_and_repeats_count_once() {
        let h = home();
        let uris: Vec<String> = (0..MAX_CLIENT_ROOTS + 10)
            .map(|i| format!("file:///home/u/p{i}"))
            .collect();
        let got = client_roots(&h, uris.iter().map(String::as_str));
        assert_eq!(got.roots.len(), MAX_CLIENT_ROOTS);
        assert_eq!(got.dropped, 10);
        let got = client_roots(&h, ["file:///home/u/p", "file:///home/u/p/", "file:///"]);
        assert_eq!(got.roots, vec![PathBuf::from("/home/u/p")]);
        assert_eq!(got.refused.len(), 1);
        let long = format!("file:///home/u/{}", "a".repeat(MAX_ROOT_URI_BYTES));
        assert!(matches!(
            root_from_uri(&long, &h),
            Err(RootRefusal::TooLong(_))
        ));
    }
}
