//! The kernel's word (decision 14): every server mcpwall starts runs in an OS sandbox
//! compiled from the same policy as the rules.
//!
//! The rules judge what the agent asks by reading its spelling; whatever they allow then
//! runs with the user's authority. The sandbox is the boundary every spelling must cross:
//! the policy's `sandbox:` section ([`crate::config::policy::SandboxPolicy`]) is resolved
//! against the home and the project into a [`Plan`] of absolute paths, and the plan is
//! applied by a small helper (`mcpwall __sandbox-exec PLAN -- SERVER…`, [`helper`]) that
//! restricts itself and then `exec`s the server, so the server and everything it starts
//! inherit the restrictions. The kernel calls live in `platform/` (house rule 16).
//!
//! | platform | what holds the plan |
//! |---|---|
//! | Linux | a user + mount namespace: hidden paths covered by empty read-only mounts, read-only paths re-mounted read-only; then Landlock (writes outside the writable places with `confine_writes`; no mount changes, no signals or ptrace out of the sandbox); `network: none` in an empty network namespace; the server dies with mcpwall (parent-death signal) |
//! | macOS | a Seatbelt profile generated from the plan ([`seatbelt`]), applied with `sandbox-exec` |
//! | Windows | not sandboxed: `status`, `doctor` and the start-up say so; `required: true` refuses to start |

pub mod helper;

pub use crate::platform::sandbox_plan::{Network, Plan, Support};
pub use crate::platform::seatbelt;

use std::path::{Path, PathBuf};

use crate::config::policy::{SandboxNetwork, SandboxPolicy};

impl Network {
    pub fn word(self) -> &'static str {
        match self {
            Network::All => "all",
            Network::Loopback => "loopback",
            Network::None => "none",
        }
    }
}

impl From<SandboxNetwork> for Network {
    fn from(n: SandboxNetwork) -> Network {
        match n {
            SandboxNetwork::All => Network::All,
            SandboxNetwork::Loopback => Network::Loopback,
            SandboxNetwork::None => Network::None,
        }
    }
}

/// Where a server runs: what the plan's paths are resolved against.
#[derive(Debug, Clone)]
pub struct Place {
    pub home: PathBuf,
    /// The project roots ([`crate::paths::project_roots`]); empty: there is no project.
    pub projects: Vec<PathBuf>,
    /// The temporary directory servers write to (`$TMPDIR` or `/tmp`).
    pub temp: PathBuf,
    /// mcpwall's own state beyond `~/.mcpwall`: a `log_dir` elsewhere, a `-c` policy file.
    pub state: Vec<PathBuf>,
    /// The client configuration files (every candidate, existing or not), and whether each
    /// belongs to a project (read-only) or to the user (hidden: they hold the servers'
    /// environment, tokens included).
    pub client_files: Vec<(PathBuf, bool)>,
}

impl Place {
    /// The place of a server started in `cwd` under a policy with this `log_dir` and, with
    /// `-c`, this policy file: both are mcpwall's state, hidden like `~/.mcpwall`.
    pub fn for_server(
        home: &Path,
        cwd: &Path,
        log_dir: Option<&Path>,
        policy_file: Option<&Path>,
    ) -> Place {
        let mut place = Place::here(home, cwd);
        place.state.extend(log_dir.map(Path::to_path_buf));
        place.state.extend(
            policy_file.map(|f| std::path::absolute(f).unwrap_or_else(|_| f.to_path_buf())),
        );
        place
    }

    /// The place of a server started in the working directory `cwd` by this process.
    pub fn here(home: &Path, cwd: &Path) -> Place {
        let projects = crate::paths::project_roots(home, cwd);
        let project_dir = projects
            .first()
            .cloned()
            .unwrap_or_else(|| cwd.to_path_buf());
        let env = crate::clients::discover::Env {
            home: home.to_path_buf(),
            project_dir,
            appdata: std::env::var_os("APPDATA").map(PathBuf::from),
            xdg_config_home: std::env::var_os("XDG_CONFIG_HOME")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from),
            codex_home: std::env::var_os("CODEX_HOME")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from),
            path_var: None,
        };
        let client_files = env
            .candidates()
            .into_iter()
            .filter(|c| c.scope == crate::clients::discover::Scope::User || !projects.is_empty())
            .map(|c| {
                let in_project = c.scope == crate::clients::discover::Scope::Project;
                (c.path, in_project)
            })
            .collect();
        Place {
            home: home.to_path_buf(),
            projects,
            temp: std::env::temp_dir(),
            state: Vec::new(),
            client_files,
        }
    }
}

/// The caches package managers write while starting a server (`npx`, `uvx`, `pip`,
/// `cargo`, `go`), writable under `confine_writes`. A poisoned cache can change what a
/// later, unsandboxed run installs; docs/threat-model.md says so.
const CACHES: &[&str] = &[
    ".npm",
    ".cache",
    ".cargo/registry",
    ".cargo/git",
    ".local/share/uv",
    ".local/share/pnpm",
    ".yarn",
    "go/pkg/mod",
    ".m2/repository",
    ".gradle/caches",
];

impl Plan {
    /// Resolve a policy's sandbox against a place. `None`: the sandbox is off.
    pub fn resolve(policy: &SandboxPolicy, place: &Place) -> Option<Plan> {
        if !policy.enabled {
            return None;
        }
        let expand = |written: &str| -> Vec<PathBuf> { expand(written, place) };
        let allow_read: Vec<PathBuf> = policy
            .allow_read
            .iter()
            .flat_map(|p| expand(&p.value))
            .collect();
        let allow_write: Vec<PathBuf> = policy
            .allow_write
            .iter()
            .flat_map(|p| expand(&p.value))
            .collect();
        let covered = |path: &Path, by: &[PathBuf]| by.iter().any(|a| path.starts_with(a));

        let mut hidden = Vec::new();
        let mut read_only = Vec::new();
        for path in policy.deny_read.iter().flat_map(|p| expand(&p.value)) {
            match (covered(&path, &allow_read), covered(&path, &allow_write)) {
                (false, _) => hidden.push(path),
                (true, false) => read_only.push(path),
                (true, true) => {}
            }
        }
        for path in policy.deny_write.iter().flat_map(|p| expand(&p.value)) {
            if !covered(&path, &allow_write) {
                read_only.push(path);
            }
        }
        // Always, whatever the files say: mcpwall's own state and the client
        // configuration files that start (and could unwrap) the servers.
        hidden.push(place.home.join(".mcpwall"));
        hidden.extend(place.state.iter().cloned());
        for (file, in_project) in &place.client_files {
            if *in_project {
                read_only.push(file.clone());
            } else {
                hidden.push(file.clone());
            }
        }
        let writable = policy.confine_writes.then(|| {
            let mut w: Vec<PathBuf> = place.projects.clone();
            w.push(place.temp.clone());
            w.push(PathBuf::from("/dev"));
            w.extend(CACHES.iter().map(|c| place.home.join(c)));
            w.extend(allow_write.iter().cloned());
            normalise(w)
        });
        let hidden = normalise(hidden);
        // A read-only path inside a hidden one is hidden already.
        let read_only = normalise(read_only)
            .into_iter()
            .filter(|p| !covered(p, &hidden))
            .collect();
        Some(Plan {
            hidden,
            read_only,
            writable,
            network: policy.network.into(),
            required: policy.required,
        })
    }

    /// The plan as the helper's command-line argument.
    pub fn to_arg(&self) -> String {
        serde_json::to_string(self).expect("a plan serialises")
    }

    /// One line per kind, for `explain-policy` and the start-up note.
    pub fn describe(&self, home: &Path) -> Vec<String> {
        let show = |paths: &[PathBuf]| -> String {
            paths
                .iter()
                .map(|p| tilde(p, home))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut out = vec![
            format!("hidden (no read, no write): {}", show(&self.hidden)),
            format!("read-only: {}", show(&self.read_only)),
        ];
        out.push(match &self.writable {
            None => "writes: anywhere else the user may write".to_string(),
            Some(w) => format!("writes only under: {}", show(w)),
        });
        out.push(format!(
            "network: {}",
            match self.network {
                Network::All => "all",
                Network::Loopback => "loopback (this machine only)",
                Network::None => "none",
            }
        ));
        out.push(format!(
            "required: {}",
            if self.required {
                "yes (a server that cannot be sandboxed is not started)"
            } else {
                "no (a server that cannot be sandboxed starts with a warning)"
            }
        ));
        out
    }
}

/// `~`, `${HOME}`, `${PROJECT_DIR}` (one path per project root; none without a project)
/// and absolute paths, as validated by the loader.
fn expand(written: &str, place: &Place) -> Vec<PathBuf> {
    let join = |base: &Path, rest: &str| {
        if rest.is_empty() {
            base.to_path_buf()
        } else {
            base.join(rest)
        }
    };
    let home_rest = ["~/", "${HOME}/"]
        .iter()
        .find_map(|p| written.strip_prefix(p))
        .or_else(|| (written == "~" || written == "${HOME}").then_some(""));
    if let Some(rest) = home_rest {
        return vec![join(&place.home, rest)];
    }
    let project_rest = written
        .strip_prefix("${PROJECT_DIR}/")
        .or_else(|| (written == "${PROJECT_DIR}").then_some(""));
    if let Some(rest) = project_rest {
        return place.projects.iter().map(|p| join(p, rest)).collect();
    }
    vec![PathBuf::from(written)]
}

/// Sorted, without duplicates and without paths inside another one of the list.
fn normalise(mut paths: Vec<PathBuf>) -> Vec<PathBuf> {
    paths.sort();
    paths.dedup();
    let mut out: Vec<PathBuf> = Vec::with_capacity(paths.len());
    for p in paths {
        if !out.iter().any(|q| p.starts_with(q)) {
            out.push(p);
        }
    }
    out
}

/// `~/x` for a path under the home directory.
pub fn tilde(path: &Path, home: &Path) -> String {
    match path.strip_prefix(home) {
        Ok(rest) if rest.as_os_str().is_empty() => "~".to_string(),
        Ok(rest) => format!("~/{}", rest.display()),
        Err(_) => path.display().to_string(),
    }
}

impl Support {
    /// What this machine offers, read from the kernel without changing anything (once
    /// per process: the answer does not change while mcpwall runs).
    pub fn probe() -> Support {
        static SUPPORT: std::sync::OnceLock<Support> = std::sync::OnceLock::new();
        *SUPPORT.get_or_init(crate::platform::sandbox_support)
    }

    /// One line for `status`, `doctor` and warnings.
    pub fn summary(&self) -> String {
        if cfg!(windows) {
            return "Windows: servers are not sandboxed (no kernel sandbox is used)".into();
        }
        if cfg!(target_os = "macos") {
            return "macOS: Seatbelt (sandbox-exec)".into();
        }
        let mut parts = Vec::new();
        parts.push(if self.paths {
            "user and mount namespaces: yes"
        } else {
            "user and mount namespaces: NO (protected paths not hidden)"
        });
        let landlock = if self.landlock_abi > 0 {
            format!("Landlock ABI {}", self.landlock_abi)
        } else {
            "Landlock: NO (writes not confined)".into()
        };
        format!("Linux: {}, {landlock}", parts.join(", "))
    }

    /// What of `plan` this machine cannot enforce, in words; empty: everything.
    pub fn shortfalls(&self, plan: &Plan) -> Vec<String> {
        let mut out = Vec::new();
        if cfg!(windows) {
            out.push(
                "Windows has no sandbox mcpwall can apply: the server runs unsandboxed".into(),
            );
            return out;
        }
        let protects_paths = !plan.hidden.is_empty() || !plan.read_only.is_empty();
        if protects_paths && !self.paths {
            out.push(
                "protected paths are not hidden or read-only (unprivileged user namespaces \
                 are unavailable)"
                    .into(),
            );
        }
        if plan.writable.is_some() && !self.confine {
            out.push("writes are not confined (no Landlock in this kernel)".into());
        }
        match plan.network {
            Network::None if !self.network_none => {
                out.push("`network: none` is not enforced (no network namespace)".into())
            }
            Network::Loopback if !self.network_loopback => out.push(
                "`network: loopback` is not enforced on Linux (the kernel offers no \
                 unprivileged per-address filter): the server keeps the network"
                    .into(),
            ),
            _ => {}
        }
        out
    }
}

/// Check, end to end, that the sandbox works on this machine: a process started through
/// the helper with a plan hiding a fresh directory cannot read the file inside it.
pub fn self_test() -> Result<(), String> {
    if cfg!(windows) {
        return Err("no sandbox on Windows".into());
    }
    let dir = tempfile::tempdir().map_err(|e| format!("no temporary directory: {e}"))?;
    let hidden = dir.path().join("hidden");
    std::fs::create_dir(&hidden).map_err(|e| e.to_string())?;
    let marker = "mcpwall-sandbox-self-test";
    std::fs::write(hidden.join("secret"), marker).map_err(|e| e.to_string())?;
    let plan = Plan {
        hidden: vec![hidden.clone()],
        read_only: Vec::new(),
        writable: None,
        network: Network::All,
        required: true,
    };
    let out = std::process::Command::new(crate::platform::own_executable())
        .args(helper::command_line(
            helper::Handover::Now(Some(&plan)),
            &"cat".into(),
            &[hidden.join("secret").into_os_string()],
        ))
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("cannot start the helper: {e}"))?;
    if String::from_utf8_lossy(&out.stdout).contains(marker) {
        return Err("a hidden file was readable".into());
    }
    if out.status.code() == Some(126) {
        let why = String::from_utf8_lossy(&out.stderr);
        return Err(why
            .trim()
            .trim_start_matches("mcpwall: sandbox: ")
            .to_string());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::policy::{Span, Spanned};

    fn s(v: &str) -> Spanned<String> {
        Spanned {
            value: v.into(),
            span: Span {
                source: crate::config::policy::SourceId(0),
                offset: 0,
                len: 0,
                line: 1,
                column: 1,
            },
        }
    }

    fn place(project: Option<&str>) -> Place {
        Place {
            home: "/home/u".into(),
            projects: project.into_iter().map(PathBuf::from).collect(),
            temp: "/tmp".into(),
            state: vec![],
            client_files: vec![
                ("/home/u/.claude.json".into(), false),
                ("/home/u/p/.mcp.json".into(), true),
            ],
        }
    }

    #[test]
    fn an_off_sandbox_has_no_plan() {
        assert_eq!(Plan::resolve(&SandboxPolicy::default(), &place(None)), None);
    }

    #[test]
    fn mcpwall_state_and_client_files_are_always_protected() {
        let policy = SandboxPolicy {
            enabled: true,
            allow_read: vec![s("~")],
            allow_write: vec![s("~")],
            ..Default::default()
        };
        let plan = Plan::resolve(&policy, &place(Some("/home/u/p"))).unwrap();
        assert!(plan.hidden.contains(&PathBuf::from("/home/u/.mcpwall")));
        assert!(plan.hidden.contains(&PathBuf::from("/home/u/.claude.json")));
        assert!(
            plan.read_only
                .contains(&PathBuf::from("/home/u/p/.mcp.json"))
        );
    }

    #[test]
    fn exceptions_lift_only_what_they_name() {
        let policy = SandboxPolicy {
            enabled: true,
            deny_read: vec![s("~/.ssh"), s("~/.aws")],
            deny_write: vec![s("~/.bashrc"), s("${PROJECT_DIR}/.git/hooks")],
            allow_read: vec![s("~/.aws")],
            ..Default::default()
        };
        let plan = Plan::resolve(&policy, &place(Some("/home/u/p"))).unwrap();
        assert!(plan.hidden.contains(&PathBuf::from("/home/u/.ssh")));
        assert!(!plan.hidden.contains(&PathBuf::from("/home/u/.aws")));
        assert!(plan.read_only.contains(&PathBuf::from("/home/u/.aws")));
        assert!(
            plan.read_only
                .contains(&PathBuf::from("/home/u/p/.git/hooks"))
        );
        // Without a project, project paths name nothing.
        let plan = Plan::resolve(&policy, &place(None)).unwrap();
        assert!(!plan.read_only.iter().any(|p| p.ends_with(".git/hooks")));
    }

    #[test]
    fn confined_writes_keep_the_project_temp_and_caches() {
        let policy = SandboxPolicy {
            enabled: true,
            confine_writes: true,
            allow_write: vec![s("/srv/out")],
            ..Default::default()
        };
        let plan = Plan::resolve(&policy, &place(Some("/home/u/p"))).unwrap();
        let w = plan.writable.unwrap();
        for p in [
            "/home/u/p",
            "/tmp",
            "/home/u/.npm",
            "/home/u/.cache",
            "/srv/out",
        ] {
            assert!(w.contains(&PathBuf::from(p)), "{p} in {w:?}");
        }
    }

    #[test]
    fn the_root_and_the_home_are_not_projects() {
        let home = tempfile::tempdir().unwrap();
        let home = home.path().canonicalize().unwrap();
        assert!(crate::paths::project_roots(&home, Path::new("/")).is_empty());
        assert!(crate::paths::project_roots(&home, &home).is_empty());
        let p = home.join("p");
        std::fs::create_dir(&p).unwrap();
        assert_eq!(crate::paths::project_roots(&home, &p), vec![p]);
    }

    #[test]
    fn a_plan_survives_the_command_line() {
        let policy = SandboxPolicy {
            enabled: true,
            deny_read: vec![s("~/.ssh")],
            network: SandboxNetwork::None,
            required: true,
            ..Default::default()
        };
        let plan = Plan::resolve(&policy, &place(None)).unwrap();
        let back: Plan = serde_json::from_str(&plan.to_arg()).unwrap();
        assert_eq!(back, plan);
    }
}
