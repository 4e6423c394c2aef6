//! Loading policy files: YAML → validated, merged [`Policy`] (stage two of three).
//!
//! The only entry points are [`load`] (files on disk, with trust) and [`load_str`]
//! (one in-memory file; tests, `check --policy-text`). Every problem found is collected
//! into one [`PolicyError`], each pointing at its file, line and column.

use std::path::PathBuf;

pub mod diag;
pub mod policy;

pub use diag::PolicyError;
pub use policy::Policy;

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

/// Load the effective policy per ARCHITECTURE decision 7.
pub fn load(opts: &LoadOptions) -> Result<Policy, PolicyError> {
    let _ = opts;
    todo!("config::load")
}

/// Load one policy from text, as if it were the file `name` given with `-c`.
pub fn load_str(name: &str, text: &str, opts: &LoadOptions) -> Result<Policy, PolicyError> {
    let _ = (name, text, opts);
    todo!("config::load_str")
}
