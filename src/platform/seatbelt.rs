//! macOS: the plan as a Seatbelt profile (SBPL), applied with `sandbox-exec -p`.
//!
//! The profile starts from `(allow default)` and denies what the plan names; in SBPL a
//! later rule wins over an earlier one, so the order below is the precedence:
//! confinement of writes first, then the writable places, then the deny lists (which win
//! inside writable places too), then the network.
//!
//! Generated and unit-tested here; it has not been run on macOS from this repository's CI
//! (docs/threat-model.md says so).

use std::fmt::Write as _;
use std::path::Path;

use super::sandbox_plan::{Network, Plan};

/// The SBPL text for `plan`.
pub fn profile(plan: &Plan) -> String {
    let mut out = String::from("(version 1)\n(allow default)\n");
    if let Some(writable) = &plan.writable {
        out.push_str("(deny file-write*)\n");
        if !writable.is_empty() {
            out.push_str("(allow file-write*");
            for p in writable {
                let _ = write!(out, " (subpath {})", quote(p));
            }
            out.push_str(")\n");
        }
    }
    if !plan.hidden.is_empty() {
        out.push_str("(deny file-read* file-write*");
        for p in &plan.hidden {
            let _ = write!(out, " {}", filter(p));
        }
        out.push_str(")\n");
    }
    if !plan.read_only.is_empty() {
        out.push_str("(deny file-write*");
        for p in &plan.read_only {
            let _ = write!(out, " {}", filter(p));
        }
        out.push_str(")\n");
    }
    match plan.network {
        Network::All => {}
        Network::Loopback => out.push_str(
            "(deny network*)\n(allow network* (remote ip \"localhost:*\") (local ip \"localhost:*\") (remote unix-socket))\n",
        ),
        Network::None => out.push_str("(deny network*)\n(allow network* (remote unix-socket))\n"),
    }
    out
}

/// A path and everything below it (a file is its own only member).
fn filter(path: &Path) -> String {
    format!("(subpath {})", quote(path))
}

/// An SBPL string literal: `"` and `\` escaped; a path is never cut or reinterpreted.
fn quote(path: &Path) -> String {
    let text = path.to_string_lossy();
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn plan() -> Plan {
        Plan {
            hidden: vec!["/Users/u/.mcpwall".into(), "/Users/u/.ssh".into()],
            read_only: vec!["/Users/u/.zshrc".into()],
            writable: None,
            network: Network::All,
            required: false,
        }
    }

    #[test]
    fn hidden_paths_deny_reading_and_writing_read_only_paths_writing() {
        let p = profile(&plan());
        assert_eq!(
            p,
            "(version 1)\n(allow default)\n\
             (deny file-read* file-write* (subpath \"/Users/u/.mcpwall\") (subpath \"/Users/u/.ssh\"))\n\
             (deny file-write* (subpath \"/Users/u/.zshrc\"))\n"
        );
    }

    #[test]
    fn confinement_comes_before_the_deny_lists_so_they_win_inside_writable_places() {
        let mut plan = plan();
        plan.writable = Some(vec!["/Users/u/p".into(), PathBuf::from("/private/tmp")]);
        plan.read_only.push("/Users/u/p/.git/hooks".into());
        let p = profile(&plan);
        let confine = p.find("(deny file-write*)").unwrap();
        let allow = p
            .find("(allow file-write* (subpath \"/Users/u/p\") (subpath \"/private/tmp\"))")
            .unwrap();
        let hooks = p.find("(subpath \"/Users/u/p/.git/hooks\")").unwrap();
        assert!(confine < allow && allow < hooks, "{p}");
    }

    #[test]
    fn network_words_become_network_rules() {
        let mut plan = plan();
        plan.network = Network::None;
        assert!(
            profile(&plan).ends_with("(deny network*)\n(allow network* (remote unix-socket))\n")
        );
        plan.network = Network::Loopback;
        assert!(profile(&plan).contains("(remote ip \"localhost:*\")"));
    }

    #[test]
    fn quotes_and_backslashes_cannot_end_the_string() {
        let mut plan = plan();
        plan.hidden = vec![PathBuf::from("/Users/u/a\") (allow default) (\"b\\")];
        let p = profile(&plan);
        assert!(
            p.contains(r#"(subpath "/Users/u/a\") (allow default) (\"b\\")"#),
            "{p}"
        );
    }
}
