//! Loading policy files: YAML → validated, merged [`Policy`] (stage two of three).
//!
//! The only entry points are [`load`] (files on disk, with trust) and [`load_str`]
//! (one in-memory file; tests, `check --policy-text`). Every problem found is collected
//! into one [`PolicyError`], each pointing at its file, line and column.
//!
//! ```
//! use mcpwall::config::{LoadOptions, load_str};
//!
//! let opts = LoadOptions {
//!     explicit: None,
//!     home: "/home/me".into(),
//!     project_dir: "/home/me/proj".into(),
//! };
//! let yaml = "version: 1\nrules:\n  - name: no-ssh\n    match:\n      arguments:\n        path: {regex: '(^|/)\\.ssh(/|$)'}\n    action: deny\n";
//! let policy = load_str("policy.yml", yaml, &opts)?;
//! assert_eq!(policy.rules[0].name.value, "no-ssh");
//! assert_eq!(policy.rules[0].method.value, "tools/call");
//! # Ok::<(), mcpwall::config::PolicyError>(())
//! ```

use std::path::{Path, PathBuf};
use std::sync::Arc;

// Invariant oracles for the fuzz targets and property tests: built only for tests.
#[cfg(any(test, feature = "test-support"))]
pub mod checks;
pub mod diag;
mod merge;
pub(crate) mod model;
pub mod original;
pub mod policy;
pub mod project;
pub mod trust;
mod validate;
pub(crate) mod yaml_tree;

pub use diag::{Code, PolicyDiagnostic, PolicyError};
pub use merge::{Packs, UNTRUSTED_WHY, extends_names, resolve_extends};
pub use policy::Policy;
pub use trust::{PROJECT_FILE, TrustStatus, TrustStore};
// The discovered key-set address is held to the same rule (only with TLS: `http::oauth`).
#[cfg(feature = "tls")]
pub(crate) use validate::check_oauth_url;
pub use validate::{DEFAULT_METHOD, REGEX_SIZE_LIMIT};

use merge::{FileInput, Merger, Restricted};
use policy::SourceKind;
use validate::Vars;

/// The built-in pack that applies when no configuration file exists.
pub const DEFAULT_PACK: &str = "rules/default.yml";

/// This mcpwall's own user policy, in `~/.mcpwall`. `init` writes its settings here, never
/// into [`SHARED_USER_FILE`]: the original mcpwall (Node) reads that one too and refuses
/// to start with keys it cannot load (`extends:` without `settings:`), which stranded
/// every server it still wrapped.
pub const OWN_USER_FILE: &str = "mcpwall.yml";
/// The user policy the original mcpwall (Node) reads, `~/.mcpwall/config.yml`: read here
/// as it is while this mcpwall has no file of its own.
pub const SHARED_USER_FILE: &str = "config.yml";

/// The user policy file in `mcpwall_dir`: [`OWN_USER_FILE`] when it exists, else
/// [`SHARED_USER_FILE`].
pub fn user_file_in(mcpwall_dir: &Path) -> PathBuf {
    let own = mcpwall_dir.join(OWN_USER_FILE);
    if own.exists() {
        own
    } else {
        mcpwall_dir.join(SHARED_USER_FILE)
    }
}

/// Where to look for policy files.
#[derive(Debug, Clone)]
pub struct LoadOptions {
    /// `-c FILE`: exactly this file is the policy (plus what it `extends`).
    pub explicit: Option<PathBuf>,
    /// The user's home (for `~/.mcpwall/config.yml`, trust records, `~`, `${HOME}`).
    pub home: PathBuf,
    /// The project directory (for `.mcpwall.yml` and `${PROJECT_DIR}`): the working directory.
    pub project_dir: PathBuf,
}

impl LoadOptions {
    /// The user's policy file: `~/.mcpwall/mcpwall.yml` (this mcpwall's own) when it
    /// exists, else `~/.mcpwall/config.yml` (the file the original mcpwall reads too,
    /// loaded as it is). See [`user_file_in`].
    pub fn user_file(&self) -> PathBuf {
        user_file_in(&self.home.join(".mcpwall"))
    }

    /// `<project>/.mcpwall.yml`.
    pub fn project_file(&self) -> PathBuf {
        self.project_dir.join(PROJECT_FILE)
    }

    /// No `-c`, no project file and no user file: [`load`] gives the embedded default pack.
    pub fn is_zero_config(&self) -> bool {
        self.explicit.is_none() && !self.project_file().exists() && !self.user_file().exists()
    }

    fn vars(&self) -> Vars {
        Vars {
            home: self.home.clone(),
            project_dir: self.project_root(),
            cwd: self.project_dir.clone(),
        }
    }

    /// What `${PROJECT_DIR}` means for a server started here: the working directory,
    /// unless that is `/` or the home directory, which are no project
    /// ([`crate::paths::NO_PROJECT`]).
    pub fn project_root(&self) -> PathBuf {
        crate::paths::project_roots(&self.home, &self.project_dir)
            .into_iter()
            .next()
            .unwrap_or_else(|| PathBuf::from(crate::paths::NO_PROJECT))
    }

    /// How a server started here resolves paths (decision 16).
    pub fn path_env(&self) -> crate::paths::PathEnv {
        crate::paths::PathEnv::for_server(&self.home, &self.project_dir)
    }
}

/// The `sandbox:` section of the built-in default pack alone: the sandbox of a server
/// started with no policy file anywhere, decoded from the pack's prebuilt tree without
/// its rules, so the proxy can start the server while the rest of the policy loads.
/// `None` if the pack's tree is not at hand (then the caller loads the policy first).
pub fn default_pack_sandbox(opts: &LoadOptions) -> Option<policy::SandboxPolicy> {
    let text = crate::builtin::get(DEFAULT_PACK)?;
    let root = yaml_tree::decode(text, crate::builtin::lean_tree(DEFAULT_PACK)?)?;
    let sandbox = decode_sandbox(text, &root, opts);
    // The load that follows takes this tree instead of decoding the pack again.
    if let Ok(mut slot) = DECODED_DEFAULT_PACK.lock() {
        *slot = Some(root);
    }
    sandbox
}

/// The default pack's lean tree, decoded by [`default_pack_sandbox`] and not yet taken by
/// the load that follows it (the proxy's start without a policy file decodes the pack once).
static DECODED_DEFAULT_PACK: std::sync::Mutex<Option<yaml_tree::YNode>> =
    std::sync::Mutex::new(None);

/// The tree [`default_pack_sandbox`] decoded, once, if it was decoded from `text`.
fn take_decoded_default_pack(text: &str) -> Option<yaml_tree::YNode> {
    let root = DECODED_DEFAULT_PACK.lock().ok()?.take()?;
    (crate::builtin::get(DEFAULT_PACK) == Some(text)).then_some(root)
}

fn decode_sandbox(
    text: &'static str,
    root: &yaml_tree::YNode,
    opts: &LoadOptions,
) -> Option<policy::SandboxPolicy> {
    let model::Node::Map(entries) = &root.value else {
        return None;
    };
    let (_, node) = entries
        .iter()
        .find(|(k, _)| k.value.key_text().as_deref() == Some("sandbox"))?;
    let source = policy::Source {
        name: format!("builtin:{DEFAULT_PACK}"),
        kind: SourceKind::Builtin,
        text: std::sync::Arc::from(text),
    };
    let vars = opts.vars();
    let mut decoder = validate::Decoder::new(&source, policy::SourceId(0), &vars);
    let raw = decoder.sandbox(node);
    decoder.diags.is_empty().then(|| Merger::sandbox_alone(raw))
}

/// Load the effective policy per ARCHITECTURE decision 7:
///
/// - `explicit` set: exactly that file, plus the packs it `extends`;
/// - otherwise, if neither `<project>/.mcpwall.yml` nor `~/.mcpwall/config.yml` exists:
///   the built-in `rules/default.yml`;
/// - otherwise the project file (its rules first, its settings winning), then the user file.
///   An untrusted project file only tightens (see `docs-config.md`); when it is the only
///   file, the built-in default pack follows it, so an untrusted file can never leave less
///   protection than no file at all.
pub fn load(opts: &LoadOptions) -> Result<Policy, PolicyError> {
    load_with_packs(opts, crate::builtin::FILES)
}

/// [`load`] for the proxy: the rules of the embedded packs come without their
/// `examples` (empty), which only the tests and `explain-policy` read; decoding them was a third
/// of loading, on the path of the first frame. A user file's examples are still checked.
pub fn load_without_pack_examples(opts: &LoadOptions) -> Result<Policy, PolicyError> {
    load_into(
        opts,
        Merger::new(opts.vars(), crate::builtin::FILES).without_pack_examples(),
    )
}

/// [`load`] with `extends` resolved against `packs` instead of the embedded files.
#[doc(hidden)]
pub fn load_with_packs(opts: &LoadOptions, packs: Packs) -> Result<Policy, PolicyError> {
    load_into(opts, Merger::new(opts.vars(), packs))
}

fn load_into(opts: &LoadOptions, mut merger: Merger) -> Result<Policy, PolicyError> {
    if let Some(path) = &opts.explicit {
        match read(path) {
            Ok(text) => merger.add_file(
                FileInput {
                    name: display_name(path),
                    kind: SourceKind::Explicit,
                    text: text.into(),
                },
                Restricted::No,
            ),
            Err(d) => merger.push_diagnostic(*d),
        }
        return merger.finish();
    }
    let project_path = opts.project_file();
    let user_path = opts.user_file();
    let project = read_if_exists(&project_path);
    let user = read_if_exists(&user_path);
    if matches!((&project, &user), (Ok(None), Ok(None))) {
        merger.add_builtin(DEFAULT_PACK);
        return merger.finish();
    }
    let mut untrusted_alone = false;
    match project {
        Ok(Some(text)) => {
            let trusted = match TrustStore::load(&opts.home) {
                Ok(_) => is_trusted(&opts.home, &project_path, text.as_bytes()),
                Err(e) => {
                    merger.set_trust_problem(e.to_string());
                    false
                }
            };
            untrusted_alone = !trusted && !matches!(user, Ok(Some(_)));
            merger.add_file(
                FileInput {
                    name: display_name(&project_path),
                    kind: if trusted {
                        SourceKind::ProjectTrusted
                    } else {
                        SourceKind::ProjectUntrusted
                    },
                    text: text.into(),
                },
                if trusted {
                    Restricted::No
                } else {
                    Restricted::Yes
                },
            );
        }
        Ok(None) => {}
        Err(d) => merger.push_diagnostic(*d),
    }
    match user {
        Ok(Some(text)) => merger.add_file(
            FileInput {
                name: display_name(&user_path),
                kind: SourceKind::User,
                text: text.into(),
            },
            Restricted::No,
        ),
        Ok(None) => {}
        Err(d) => merger.push_diagnostic(*d),
    }
    if untrusted_alone {
        merger.add_builtin(DEFAULT_PACK);
    }
    merger.finish()
}

/// Load one policy from text, as if it were the file `name` given with `-c`.
pub fn load_str(name: &str, text: &str, opts: &LoadOptions) -> Result<Policy, PolicyError> {
    load_str_with_packs(name, text, opts, crate::builtin::FILES)
}

/// [`load_str`] with `extends` resolved against `packs` instead of the embedded files
/// (tests of extends order and cycles; the packs engineer's pack tests).
#[doc(hidden)]
pub fn load_str_with_packs(
    name: &str,
    text: &str,
    opts: &LoadOptions,
    packs: Packs,
) -> Result<Policy, PolicyError> {
    let mut merger = Merger::new(opts.vars(), packs);
    merger.add_file(
        FileInput {
            name: name.to_string(),
            kind: SourceKind::Explicit,
            text: Arc::from(text),
        },
        Restricted::No,
    );
    merger.finish()
}

/// Whether the project file with these exact bytes is recorded as trusted. A store that
/// cannot be read trusts nothing (fail closed); `mcpwall trust --list` reports why.
pub fn is_trusted(home: &Path, file: &Path, contents: &[u8]) -> bool {
    let Ok(store) = TrustStore::load(home) else {
        return false;
    };
    let Ok(key) = trust::trust_key(file) else {
        return false;
    };
    store.status(&key, contents) == TrustStatus::Trusted
}

fn display_name(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

fn read(path: &Path) -> Result<String, Box<PolicyDiagnostic>> {
    std::fs::read_to_string(path).map_err(|e| read_failed(path, &e))
}

fn read_if_exists(path: &Path) -> Result<Option<String>, Box<PolicyDiagnostic>> {
    match std::fs::read_to_string(path) {
        Ok(t) => Ok(Some(t)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(read_failed(path, &e)),
    }
}

fn read_failed(path: &Path, e: &std::io::Error) -> Box<PolicyDiagnostic> {
    Box::new(
        PolicyDiagnostic::new(
            Code::ReadFailed,
            format!("cannot read policy file {}: {e}", path.display()),
        )
        .with_help("check that the file exists, is readable and is UTF-8 text"),
    )
}
