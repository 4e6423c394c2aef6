//! mcpwall: a firewall for the Model Context Protocol.
//!
//! YAML policy → [`config::load`] (validated [`config::Policy`]) → [`program::Program`]
//! (compiled once, immutable) → a [`session::Session`] judges every message, fed by the
//! transports: the stdio [`proxy`] and `mcpwall check`. See `docs/architecture.md`.

pub mod approval_queue;
pub mod audit;
pub mod bridge;
pub mod cli;
pub mod clients;
pub mod compile;
pub mod config;
pub mod driver;
pub mod frame;
pub mod guard;
pub mod http;
pub mod io;
mod matcher_id;
pub mod mcp;
pub mod paths;
pub mod platform;
pub mod program;
pub mod proxy;
pub mod redteam;
pub mod regex_cost;
pub mod regex_dialect;
pub mod sandbox;
pub mod secrets;
pub mod session;
pub mod shared_state;
pub(crate) mod shell;
pub mod ship;
pub mod text;
pub mod upstream;
pub mod verdict;

#[cfg(test)]
mod test_rng;

/// The built-in rule packs, profiles and server packs, embedded so `cargo install`
/// users get them. Keys are the paths under the repository root.
pub mod builtin {
    /// `(path, contents)` of every embedded policy file.
    pub const FILES: &[(&str, &str)] = &[
        ("rules/default.yml", include_str!("../rules/default.yml")),
        ("rules/strict.yml", include_str!("../rules/strict.yml")),
        (
            "profiles/local-dev.yml",
            include_str!("../profiles/local-dev.yml"),
        ),
        (
            "profiles/company-laptop.yml",
            include_str!("../profiles/company-laptop.yml"),
        ),
        (
            "profiles/strict.yml",
            include_str!("../profiles/strict.yml"),
        ),
        (
            "servers/filesystem-mcp.yaml",
            include_str!("../servers/filesystem-mcp.yaml"),
        ),
        (
            "servers/github-mcp.yaml",
            include_str!("../servers/github-mcp.yaml"),
        ),
        (
            "servers/shell-mcp.yaml",
            include_str!("../servers/shell-mcp.yaml"),
        ),
    ];

    include!(concat!(env!("OUT_DIR"), "/pack_trees.rs"));

    /// The YAML tree of an embedded file, parsed at build time (see `build.rs`), in the
    /// byte form of `config::yaml_tree`.
    pub(crate) fn tree(path: &str) -> Option<&'static [u8]> {
        trees(path).map(|(full, _)| full)
    }

    /// [`tree`] without the rules' `examples`, for a caller that never reads them.
    pub(crate) fn lean_tree(path: &str) -> Option<&'static [u8]> {
        trees(path).map(|(_, lean)| lean)
    }

    fn trees(path: &str) -> Option<(&'static [u8], &'static [u8])> {
        TREES
            .iter()
            .find(|(p, _, _)| *p == path)
            .map(|(_, full, lean)| (*full, *lean))
    }

    /// The contents of an embedded file, by its path (`rules/default.yml`).
    pub fn get(path: &str) -> Option<&'static str> {
        FILES
            .iter()
            .find(|(p, _)| *p == path)
            .map(|(_, text)| *text)
    }
}
