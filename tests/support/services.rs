//! Real services some tests start on loopback (a syslog collector, Prometheus), installed
//! by `.ci/run` (`.ci/services`). Include with
//! `#[path = "support/services.rs"] mod services;`.
#![allow(dead_code)]

use std::path::PathBuf;

/// The first of `candidates` that exists; otherwise `None`, after saying on stderr that
/// the test is skipped and how to install `package` — or failing the test when
/// `MCPWALL_REQUIRE_SERVICES` is set (CI installed them: a missing one is a fault there).
pub fn installed(candidates: &[&str], package: &str) -> Option<PathBuf> {
    let found = candidates.iter().map(PathBuf::from).find(|p| p.exists());
    if found.is_none() {
        assert!(
            std::env::var_os("MCPWALL_REQUIRE_SERVICES").is_none(),
            "{package} is not installed, and MCPWALL_REQUIRE_SERVICES is set"
        );
        eprintln!("skipped: {package} is not installed (apt-get install {package})");
    }
    found
}
