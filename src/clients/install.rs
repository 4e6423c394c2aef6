//! Where the running mcpwall was installed from, as far as the command `init` and `wrap`
//! write into a client's config depends on it (docs/install.md).
//!
//! A wrapped entry starts mcpwall every time the client starts the server, so the command
//! written must outlive the run that wrote it:
//! - a one-off runner's copy (`npx`, `uvx`, `pipx run`) lives in that tool's cache, which the
//!   tool empties when it likes (`npm cache clean`, `uv cache clean`, pipx after 14 days): a
//!   config pointing there stops starting its servers some day, with no mcpwall left to say
//!   why. [`one_off_runner`] recognises those copies, and `init`/`wrap` refuse to write them.
//! - an npm install (`npm install -g mcpwall-rs`) puts the launcher script on PATH and the
//!   native binary in a platform package beside it; the launcher only starts that binary, so
//!   `mcpwall` on PATH counts as this binary ([`npm_launcher_of`]).

use std::ffi::OsStr;
use std::path::{Component, Path};

/// The npm launcher package (`.ci/packaging/npm/`); its platform packages are
/// `mcpwall-rs-<platform>-<arch>`.
pub const NPM_PACKAGE: &str = "mcpwall-rs";

/// A tool that runs packages from its cache without installing them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OneOffRunner {
    /// `npx` (npm exec): `…/_npx/<hash>/node_modules/…`.
    Npx,
    /// `uvx` (uv tool run): `<uv's cache>/archive-v0/<id>/bin/mcpwall` (the cache is
    /// `~/.cache/uv` unless `UV_CACHE_DIR` moves it; `archive-v0` is its bucket's name).
    Uvx,
    /// `pipx run`: `…/pipx/.cache/<hash>/bin/mcpwall`.
    PipxRun,
}

impl OneOffRunner {
    /// The runner and its cache, as a user knows them.
    pub fn describe(self) -> &'static str {
        match self {
            OneOffRunner::Npx => "npx's cache, which npm empties when it likes",
            OneOffRunner::Uvx => "uv's cache, which `uv cache clean` or `uv cache prune` empties",
            OneOffRunner::PipxRun => {
                "pipx's cache of `pipx run` environments, which pipx deletes after 14 days"
            }
        }
    }

    /// The command that installs this mcpwall for good, from the same registry.
    pub fn install_command(self) -> String {
        match self {
            OneOffRunner::Npx => format!("npm install -g {NPM_PACKAGE}"),
            OneOffRunner::Uvx => "uv tool install mcpwall".into(),
            OneOffRunner::PipxRun => "pipx install mcpwall".into(),
        }
    }
}

/// The one-off runner whose cache holds `exe`, if any (by the cache's layout: each runner
/// names its cache directory the same way on every platform).
pub fn one_off_runner(exe: &Path) -> Option<OneOffRunner> {
    let names: Vec<&OsStr> = exe
        .components()
        .filter_map(|c| match c {
            Component::Normal(name) => Some(name),
            _ => None,
        })
        .collect();
    let has = |name: &str| names.iter().any(|n| n.eq_ignore_ascii_case(name));
    let pair = |first: &str, second: &str| {
        names
            .windows(2)
            .any(|w| w[0].eq_ignore_ascii_case(first) && w[1].eq_ignore_ascii_case(second))
    };
    if has("_npx") {
        Some(OneOffRunner::Npx)
    } else if has("archive-v0") {
        Some(OneOffRunner::Uvx)
    } else if pair("pipx", ".cache") {
        Some(OneOffRunner::PipxRun)
    } else {
        None
    }
}

/// When `found` (a command on PATH, resolved) is the npm launcher script of this project's
/// package, `…/node_modules/mcpwall-rs/bin/mcpwall.js`, the `node_modules` folder it was
/// installed in: the binary it starts is a platform package in that same folder (or nested
/// in the launcher's own `node_modules`).
pub fn npm_launcher_of(found: &Path) -> Option<&Path> {
    let real_name = found.file_name()?.to_str()?;
    let bin = found.parent()?;
    let package = bin.parent()?;
    let node_modules = package.parent()?;
    (real_name == "mcpwall.js"
        && bin.file_name()? == "bin"
        && package.file_name()? == NPM_PACKAGE
        && node_modules.file_name()? == "node_modules")
        .then_some(node_modules)
}

/// Whether `found` (resolved on PATH) is the npm launcher that starts `exe`: both real
/// paths, `exe` inside one of the launcher's platform packages.
pub fn npm_launcher_runs(found: &Path, exe: &Path) -> bool {
    let Some(node_modules) = npm_launcher_of(found) else {
        return false;
    };
    let Ok(inside) = exe.strip_prefix(node_modules) else {
        return false;
    };
    let mut parts = inside.components().map(|c| c.as_os_str().to_string_lossy());
    let platform_package = |name: &str| name.starts_with(&format!("{NPM_PACKAGE}-"));
    match (parts.next().as_deref(), parts.next().as_deref()) {
        (Some(first), _) if platform_package(first) => true,
        (Some(NPM_PACKAGE), Some("node_modules")) => {
            parts.next().is_some_and(|p| platform_package(&p))
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognises_the_one_off_runners_caches() {
        let cases = [
            (
                "/home/u/.npm/_npx/4b1f0a/node_modules/mcpwall-rs-linux-x64/bin/mcpwall",
                Some(OneOffRunner::Npx),
            ),
            (
                r"C:\Users\u\AppData\Local\npm-cache\_npx\4b1f\node_modules\mcpwall-rs-win32-x64\bin\mcpwall.exe",
                Some(OneOffRunner::Npx),
            ),
            (
                "/home/u/.cache/uv/archive-v0/Xk3J2/bin/mcpwall",
                Some(OneOffRunner::Uvx),
            ),
            (
                "/tmp/ci/uv-cache/archive-v0/Xk3J2/bin/mcpwall",
                Some(OneOffRunner::Uvx),
            ),
            (
                "/home/u/.local/share/pipx/.cache/0a1b2c/bin/mcpwall",
                Some(OneOffRunner::PipxRun),
            ),
            (
                "/home/u/.local/pipx/.cache/0a1b2c/bin/mcpwall",
                Some(OneOffRunner::PipxRun),
            ),
            // Installs that stay: global npm, uv tool install, pipx install, a venv, cargo.
            (
                "/usr/lib/node_modules/mcpwall-rs/node_modules/mcpwall-rs-linux-x64/bin/mcpwall",
                None,
            ),
            ("/home/u/.local/share/uv/tools/mcpwall/bin/mcpwall", None),
            ("/home/u/.local/share/pipx/venvs/mcpwall/bin/mcpwall", None),
            ("/home/u/proj/.venv/bin/mcpwall", None),
            ("/home/u/.cargo/bin/mcpwall", None),
        ];
        for (path, want) in cases {
            let path = path.replace('\\', std::path::MAIN_SEPARATOR_STR);
            assert_eq!(one_off_runner(Path::new(&path)), want, "{path}");
        }
    }

    #[test]
    fn the_npm_launcher_counts_only_for_its_own_platform_packages() {
        let launcher = Path::new("/usr/lib/node_modules/mcpwall-rs/bin/mcpwall.js");
        for exe in [
            "/usr/lib/node_modules/mcpwall-rs-linux-x64/bin/mcpwall",
            "/usr/lib/node_modules/mcpwall-rs/node_modules/mcpwall-rs-linux-arm64/bin/mcpwall",
        ] {
            assert!(npm_launcher_runs(launcher, Path::new(exe)), "{exe}");
        }
        for exe in [
            // Another install's binary, a different package, the original (Node) mcpwall.
            "/home/u/.npm/_npx/1/node_modules/mcpwall-rs-linux-x64/bin/mcpwall",
            "/usr/lib/node_modules/other/bin/mcpwall",
            "/usr/lib/node_modules/mcpwall/dist/index.js",
        ] {
            assert!(!npm_launcher_runs(launcher, Path::new(exe)), "{exe}");
        }
        assert!(
            npm_launcher_of(Path::new("/usr/lib/node_modules/mcpwall/dist/index.js")).is_none()
        );
    }
}
