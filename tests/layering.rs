//! The layering of `docs/architecture.md`, checked on the source: a module may import only
//! from modules below it in [`LAYERS`], so no two modules depend on each other; and no
//! files of one directory import each other in a circle.
//!
//! Read from `src/`: every `crate::a::b` path and `crate::{…}` group outside comments and
//! test code (`tests.rs`, `#[cfg(test)] mod … { … }` at the end of a file, and the
//! `checks.rs` invariant oracles the fuzz targets share, built only for tests). The policy
//! model, `config::policy`, is a layer of its own below the loader (`config`): the program,
//! the guard and the session read its types, while the loader builds on the program.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Lowest first. A module may use the modules listed before it.
const LAYERS: &[&str] = &[
    // Foundations: OS calls, names, text, the frame parser.
    "platform",
    "verdict",
    "matcher_id",
    "regex_dialect",
    "regex_cost",
    "text",
    "mcp",
    "builtin",
    "frame",
    // What the program is made of.
    "secrets",
    "shell",
    "paths",
    "clients",
    "config::policy",
    // What the replicas of a gateway share (Redis), below everything that counts on it.
    "shared_state",
    // The compiled program and what sits beside it.
    "program",
    "guard",
    "sandbox",
    // YAML → Policy → Program.
    "config",
    "compile",
    // The one judge.
    "session",
    // Around the session, for the transports.
    "audit",
    "io",
    "approval_queue",
    "upstream",
    "ship",
    // What drives a session for every transport.
    "driver",
    // Transports.
    "proxy",
    "bridge",
    "http",
    "redteam",
    // Verbs and the binary.
    "cli",
    "(root)",
];

struct Source {
    path: PathBuf,
    /// The module path under `src/` (`http::conversation`).
    module: Vec<String>,
    code: String,
}

fn sources() -> Vec<Source> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut out = Vec::new();
    let mut dirs = vec![root.clone()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                if path.file_name().is_some_and(|n| n != "tests") {
                    dirs.push(path);
                }
                continue;
            }
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if !name.ends_with(".rs")
                || name == "tests.rs"
                || name == "checks.rs"
                || name == "test_rng.rs"
            {
                continue;
            }
            let rel = path.strip_prefix(&root).unwrap().with_extension("");
            let mut module: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if module.last().is_some_and(|m| m == "mod") {
                module.pop();
            }
            let code = without_tests_and_comments(&std::fs::read_to_string(&path).unwrap());
            out.push(Source { path, module, code });
        }
    }
    out
}

fn without_tests_and_comments(text: &str) -> String {
    let end = text
        .find("#[cfg(test)]\nmod ")
        .filter(|&at| text[at..].lines().nth(1).is_some_and(|l| l.ends_with('{')))
        .unwrap_or(text.len());
    text[..end]
        .lines()
        .map(|line| line.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The layer a module path belongs to.
fn node(module: &[String]) -> String {
    match module {
        [] => "(root)".into(),
        [first, ..] if first == "lib" || first == "main" => "(root)".into(),
        [config, policy, ..] if config == "config" && policy == "policy" => "config::policy".into(),
        [first, ..] => first.clone(),
    }
}

/// Every module path named after `crate::` (groups expanded one level).
fn crate_paths(code: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        rest = &rest[at + "crate::".len()..];
        let path: Vec<String> = segments(rest);
        if rest.starts_with('{')
            || rest[path.iter().map(|s| s.len() + 2).sum::<usize>()..].starts_with('{')
        {
            let prefix_len: usize = path.iter().map(|s| s.len() + 2).sum();
            let group = &rest[prefix_len + 1..];
            let group = &group[..group.find('}').unwrap_or(group.len())];
            for item in group.split(',') {
                let item = segments(item.trim_start());
                if !item.is_empty() {
                    out.push(path.iter().cloned().chain(item).collect());
                }
            }
        } else if !path.is_empty() {
            out.push(path);
        }
    }
    out
}

/// The leading `a::b::` segments of a path (lowercase module names only).
fn segments(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    loop {
        let len = rest
            .find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'))
            .unwrap_or(rest.len());
        if len == 0 {
            break;
        }
        out.push(rest[..len].to_string());
        match rest[len..].strip_prefix("::") {
            Some(next) => rest = next,
            None => break,
        }
    }
    out
}

#[test]
fn modules_import_only_from_the_layers_below_them() {
    let rank: BTreeMap<&str, usize> = LAYERS.iter().enumerate().map(|(i, l)| (*l, i)).collect();
    let mut violations = BTreeSet::new();
    let mut unknown = BTreeSet::new();
    for source in sources() {
        let from = node(&source.module);
        let Some(&from_rank) = rank.get(from.as_str()) else {
            unknown.insert(format!("{from} ({})", source.path.display()));
            continue;
        };
        let mut targets: Vec<Vec<String>> = crate_paths(&source.code);
        // Inside config/, `super::policy` is the policy model and anything else the loader.
        if source.module.first().is_some_and(|m| m == "config") {
            for line in source.code.lines() {
                if let Some(at) = line.find("super::") {
                    let path = segments(&line[at + "super::".len()..]);
                    if source.module.len() == 2 && !path.is_empty() {
                        targets.push(std::iter::once("config".to_string()).chain(path).collect());
                    }
                }
            }
        }
        for target in targets {
            let to = node(&target);
            if to == from {
                continue;
            }
            match rank.get(to.as_str()) {
                Some(&to_rank) if to_rank < from_rank => {}
                Some(_) => {
                    violations.insert(format!(
                        "{} imports crate::{} ({from} → {to})",
                        source.path.display(),
                        target.join("::")
                    ));
                }
                None => {
                    unknown.insert(to);
                }
            }
        }
    }
    assert!(
        unknown.is_empty(),
        "modules missing from LAYERS: {unknown:?}"
    );
    assert!(
        violations.is_empty(),
        "imports from a layer above (move the type down, or the module up in LAYERS and docs/architecture.md):\n{}",
        violations.into_iter().collect::<Vec<_>>().join("\n")
    );
}

#[test]
fn no_files_of_one_directory_import_each_other_in_a_circle() {
    // Edges between sibling modules: `super::x` from a file of the directory, or
    // `crate::dir::x` naming a sibling.
    let sources = sources();
    let mut edges: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
    let modules: BTreeSet<Vec<String>> = sources.iter().map(|s| s.module.clone()).collect();
    for source in &sources {
        let Some((_, parent)) = source.module.split_last() else {
            continue;
        };
        let mut named = Vec::new();
        for line in source.code.lines() {
            let mut rest = line;
            while let Some(at) = rest.find("super::") {
                rest = &rest[at + "super::".len()..];
                if let Some(first) = segments(rest).into_iter().next() {
                    named.push(parent.iter().cloned().chain([first]).collect::<Vec<_>>());
                }
            }
        }
        for path in crate_paths(&source.code) {
            if path.len() > parent.len() && path[..parent.len()] == *parent {
                named.push(path[..=parent.len()].to_vec());
            }
        }
        for sibling in named {
            if sibling != source.module
                && modules.contains(&sibling)
                && sibling.len() == source.module.len()
            {
                edges
                    .entry(source.module.clone())
                    .or_default()
                    .insert(sibling);
            }
        }
    }
    let mut circles = Vec::new();
    for (a, targets) in &edges {
        for b in targets {
            if a < b && edges.get(b).is_some_and(|t| t.contains(a)) {
                circles.push(format!("{} <-> {}", a.join("::"), b.join("::")));
            }
        }
    }
    // Longer circles: a depth-first search from each module.
    for start in edges.keys() {
        let mut stack = vec![(start.clone(), vec![start.clone()])];
        while let Some((at, path)) = stack.pop() {
            for next in edges.get(&at).into_iter().flatten() {
                if next == start && path.len() > 2 {
                    circles.push(
                        path.iter()
                            .map(|m| m.join("::"))
                            .collect::<Vec<_>>()
                            .join(" -> "),
                    );
                } else if !path.contains(next) && path.len() < 6 {
                    let mut longer = path.clone();
                    longer.push(next.clone());
                    stack.push((next.clone(), longer));
                }
            }
        }
    }
    assert!(
        circles.is_empty(),
        "sibling modules that import each other:\n{}",
        circles.join("\n")
    );
}
