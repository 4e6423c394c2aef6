//! The guard's settings in YAML: `hide_denied_tools`, `pinning`, `poison_scan`,
//! `circuit_breaker`, their defaults, their diagnostics, and how an untrusted project
//! file may only tighten them.

use std::path::Path;

use mcpwall::config::policy::{BreakerAction, CircuitBreakerSettings, PinningMode, PoisonScanMode};
use mcpwall::config::{LoadOptions, Policy, load, load_str};

fn opts(home: &Path, project: &Path) -> LoadOptions {
    LoadOptions {
        explicit: None,
        home: home.to_path_buf(),
        project_dir: project.to_path_buf(),
    }
}

fn load_text(text: &str) -> Result<Policy, String> {
    let dir = tempfile::tempdir().unwrap();
    load_str(
        "policy.yml",
        &format!("version: 1\n{text}"),
        &opts(dir.path(), dir.path()),
    )
    .map_err(|e| format!("{e:?}"))
}

#[test]
fn defaults_hide_enforce_and_have_no_breaker() {
    let p = load_text("rules: []\n").unwrap();
    assert!(p.settings.hide_denied_tools);
    assert_eq!(p.settings.pinning, PinningMode::Enforce);
    assert_eq!(p.settings.poison_scan, PoisonScanMode::Enforce);
    assert_eq!(p.settings.circuit_breaker, None);
}

#[test]
fn every_key_is_read() {
    let p = load_text(
        "settings:\n  hide_denied_tools: false\n  pinning: warn\n  poison_scan: off\n  \
         circuit_breaker: {max_violations: 5, window_seconds: 60, action: suspend}\n",
    )
    .unwrap();
    assert!(!p.settings.hide_denied_tools);
    assert_eq!(p.settings.pinning, PinningMode::Warn);
    assert_eq!(p.settings.poison_scan, PoisonScanMode::Off);
    assert_eq!(
        p.settings.circuit_breaker,
        Some(CircuitBreakerSettings {
            max_violations: 5,
            window_seconds: 60,
            action: BreakerAction::Suspend
        })
    );
    let p = load_text("settings:\n  circuit_breaker: {max_violations: 2, window_seconds: 9}\n")
        .unwrap();
    assert_eq!(
        p.settings.circuit_breaker.unwrap().action,
        BreakerAction::Suspend
    );
}

#[test]
fn bad_values_are_reported_with_help() {
    let err = load_text("settings:\n  pinning: enforced\n").unwrap_err();
    assert!(err.contains("enforce"), "{err}");
    let err = load_text("settings:\n  circuit_breaker: {max_violations: 0, window_seconds: 60}\n")
        .unwrap_err();
    assert!(err.contains("max_violations"), "{err}");
    let err = load_text("settings:\n  circuit_breaker: {window_seconds: 60}\n").unwrap_err();
    assert!(err.contains("max_violations"), "{err}");
    let err = load_text(
        "settings:\n  circuit_breaker: {max_violations: 3, window_seconds: 6, action: kill}\n",
    )
    .unwrap_err();
    assert!(err.contains("suspend"), "{err}");
    let err = load_text("settings:\n  hide_denied_tools: maybe\n").unwrap_err();
    assert!(err.contains("hide_denied_tools"), "{err}");
}

#[test]
fn untrusted_project_file_may_only_tighten() {
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join(".mcpwall")).unwrap();
    std::fs::write(
        home.path().join(".mcpwall/config.yml"),
        "version: 1\nsettings:\n  pinning: warn\n  circuit_breaker: {max_violations: 10, window_seconds: 60}\n",
    )
    .unwrap();
    std::fs::write(
        project.path().join(".mcpwall.yml"),
        "version: 1\nsettings:\n  pinning: enforce\n  poison_scan: off\n  hide_denied_tools: false\n  \
         circuit_breaker: {max_violations: 3, window_seconds: 60}\n",
    )
    .unwrap();
    let p = load(&opts(home.path(), project.path())).unwrap();
    assert_eq!(
        p.settings.pinning,
        PinningMode::Enforce,
        "tightening applies"
    );
    assert_eq!(
        p.settings.poison_scan,
        PoisonScanMode::Enforce,
        "loosening is ignored"
    );
    assert!(p.settings.hide_denied_tools, "loosening is ignored");
    assert_eq!(p.settings.circuit_breaker.unwrap().max_violations, 3);
    let ignored: Vec<&str> = p.ignored.iter().map(|i| i.what.as_str()).collect();
    assert!(
        ignored.iter().any(|w| w.contains("poison_scan")),
        "{ignored:?}"
    );
    assert!(
        ignored.iter().any(|w| w.contains("hide_denied_tools")),
        "{ignored:?}"
    );
}
