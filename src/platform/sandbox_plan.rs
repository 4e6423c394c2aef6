//! The data a sandbox is applied from, shared by the policy side (`crate::sandbox`, which
//! resolves a policy into a [`Plan`] and reports [`Support`]) and the kernel calls here.
//! Kept in the lower layer: the platform code must not depend on the policy.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// What the sandbox denies one server, as absolute paths. Built by `Plan::resolve` (`crate::sandbox`),
/// handed to the helper as JSON on its command line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    /// Neither readable nor writable: the contents are hidden.
    pub hidden: Vec<PathBuf>,
    /// Readable, but not writable, creatable, renamable or removable.
    pub read_only: Vec<PathBuf>,
    /// `Some`: writes only beneath these (`confine_writes`).
    pub writable: Option<Vec<PathBuf>>,
    pub network: Network,
    /// Refuse to start the server when any part of the plan cannot be enforced.
    pub required: bool,
}

/// `sandbox.network`, as the helper reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Network {
    All,
    Loopback,
    None,
}

/// What this machine's kernel offers the sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Support {
    /// Paths can be hidden and made read-only (Linux: unprivileged user and mount
    /// namespaces; macOS: Seatbelt).
    pub paths: bool,
    /// Writes can be confined (Linux: Landlock; macOS: Seatbelt).
    pub confine: bool,
    /// `network: none` (Linux: a network namespace; macOS: Seatbelt).
    pub network_none: bool,
    /// `network: loopback` (macOS only: Linux has no per-address filter without
    /// privileges).
    pub network_loopback: bool,
    /// The Landlock ABI version (Linux), 0 without Landlock.
    pub landlock_abi: u8,
}
