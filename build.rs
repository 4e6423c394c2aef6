//! Parses the embedded rule packs once, at build time, into the byte form of their YAML
//! tree (see `src/config/yaml_tree.rs`); the binary decodes those at start-up instead of
//! parsing the YAML on every run. A pack that does not parse gets no tree: the binary
//! then parses its text at run time and reports the problem like for any other file.
//!
//! Each pack also gets a lean tree, without its rules' `examples` (half the default pack's
//! text): the proxy never reads them, and decoding them was a third of its loading.
//!
//! It also computes the literals every match of each of the packs' regexes contains
//! (`src/compile/required.rs`), so a frame can be cleared of those regexes before
//! their automaton is built.
//!
//! And it asks the linker to lay out the code the frame path runs first, in the order of
//! `src/link_order.txt` (see [`linker_options`]).
//!
//! Last, it records what `mcpwall --version` prints besides the version: the commit and the
//! target the binary was built from and for (see [`build_facts`]).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

#[path = "src/config/yaml_tree.rs"]
#[allow(dead_code)]
mod yaml_tree;

#[path = "src/regex_dialect.rs"]
#[allow(dead_code)]
mod regex_dialect;

#[path = "src/compile/required.rs"]
#[allow(dead_code)]
mod required;

const PACK_DIRS: [&str; 3] = ["rules", "profiles", "servers"];

fn main() {
    linker_options();
    build_facts();
    println!("cargo:rerun-if-changed=src/config/yaml_tree.rs");
    println!("cargo:rerun-if-changed=src/regex_dialect.rs");
    println!("cargo:rerun-if-changed=src/compile/required.rs");
    let mut patterns = std::collections::BTreeSet::new();
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let mut table = String::from("pub(crate) const TREES: &[(&str, &[u8], &[u8])] = &[\n");
    for dir in PACK_DIRS {
        println!("cargo:rerun-if-changed={dir}");
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
            .map(|entries| entries.filter_map(|e| e.ok().map(|e| e.path())).collect())
            .unwrap_or_default();
        files.sort();
        for path in files.iter().filter(|p| is_yaml(p)) {
            let Ok(text) = std::fs::read_to_string(path) else {
                continue;
            };
            let Ok(root) = yaml_tree::parse(&text) else {
                continue;
            };
            collect_regexes(&root, false, &mut patterns);
            let key = path.to_string_lossy().replace('\\', "/");
            let blob_name = format!("{}.tree", key.replace('/', "__"));
            std::fs::write(out.join(&blob_name), yaml_tree::encode(&text, &root))
                .expect("write a pack tree to OUT_DIR");
            let lean_name = format!("{}.lean.tree", key.replace('/', "__"));
            std::fs::write(out.join(&lean_name), yaml_tree::encode(&text, &lean(&root)))
                .expect("write a lean pack tree to OUT_DIR");
            let _ = writeln!(
                table,
                "    ({key:?}, include_bytes!(concat!(env!(\"OUT_DIR\"), \"/{blob_name}\")), \
                 include_bytes!(concat!(env!(\"OUT_DIR\"), \"/{lean_name}\"))),"
            );
        }
    }
    table.push_str("];\n");
    std::fs::write(out.join("pack_trees.rs"), table).expect("write pack_trees.rs");

    let mut table = String::from("pub(crate) const REQUIRED_LITERALS: &[(&str, &[&[u8]])] = &[\n");
    for pattern in &patterns {
        // A pattern that does not parse (or requires nothing) gets no entry: it is
        // reported, or waited for, like any other.
        let Some(set) = regex_dialect::parse(pattern)
            .ok()
            .and_then(|hir| required::required_literals(&hir))
        else {
            continue;
        };
        let _ = write!(table, "    ({pattern:?}, &[");
        for lit in set {
            let _ = write!(table, "b\"{}\", ", lit.escape_ascii());
        }
        table.push_str("]),\n");
    }
    table.push_str("];\n");
    std::fs::write(out.join("required_literals.rs"), table).expect("write required_literals.rs");
}

/// The symbol list `src/link_order.txt`, given to the linker for the release binary: the
/// code every proxy workload runs (per-frame code first, then start-up code), then the code
/// only some workloads run, at the front of the text. Scattered over 4.9 MB of text, the per-frame code touched pages in most of its
/// 64 KiB windows, and the kernel maps a whole window around every page of code faulted
/// in: laid out together, a proxy keeps about 2 MiB less of its binary resident (peak
/// RSS 7.8 against 9.9 MiB in the shared bench's round trips). Only where the linker is
/// known to be LLD (rustc's default on x86-64 Linux since 1.90, unless a linker is
/// configured); GNU ld lacks the option. Symbols the list names but the binary lacks are
/// ignored; `tests/benches/link_order.py` regenerates it.
fn linker_options() {
    const LIST: &str = "src/link_order.txt";
    println!("cargo:rerun-if-changed={LIST}");
    println!("cargo:rerun-if-env-changed=RUSTC_LINKER");
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    let rustflags = var("CARGO_ENCODED_RUSTFLAGS");
    let linker_chosen = !var("RUSTC_LINKER").is_empty()
        || rustflags.contains("linker")
        || rustflags.contains("fuse-ld");
    if var("PROFILE") != "release"
        || var("TARGET") != "x86_64-unknown-linux-gnu"
        || linker_chosen
        || rustc_minor().is_none_or(|minor| minor < 90)
    {
        return;
    }
    let list = Path::new(&var("CARGO_MANIFEST_DIR")).join(LIST);
    // `-Wl,` splits its argument at commas.
    if !list.is_file() || list.to_string_lossy().contains(',') {
        return;
    }
    println!(
        "cargo:rustc-link-arg-bin=mcpwall=-Wl,--symbol-ordering-file={}",
        list.display()
    );
    println!("cargo:rustc-link-arg-bin=mcpwall=-Wl,--no-warn-symbol-ordering");
}

/// The minor version of the compiler building us (`rustc 1.95.0 (...)` gives 95).
fn rustc_minor() -> Option<u32> {
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let out = std::process::Command::new(rustc).arg("-V").output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    let version = text.split_whitespace().nth(1)?;
    let mut parts = version.split('.');
    match (parts.next()?, parts.next()?) {
        ("1", minor) => minor.parse().ok(),
        _ => None,
    }
}

/// `root` with the `examples` of the items of its `rules` and `outbound_rules` emptied.
/// The empty mapping left in place covers the bytes the examples did, so a rule's span
/// (which ends with its last node) is the same as in the full tree.
fn lean(root: &yaml_tree::YNode) -> yaml_tree::YNode {
    use yaml_tree::Node;
    let mut root = root.clone();
    let Node::Map(entries) = &mut root.value else {
        return root;
    };
    let rule_lists = entries.iter_mut().filter(|(k, _)| {
        matches!(
            k.value.key_text().as_deref(),
            Some("rules" | "outbound_rules")
        )
    });
    for (_, list) in rule_lists {
        let Node::Seq(rules) = &mut list.value else {
            continue;
        };
        for rule in rules {
            let Node::Map(fields) = &mut rule.value else {
                continue;
            };
            for (_, examples) in fields
                .iter_mut()
                .filter(|(k, _)| k.value.key_text().as_deref() == Some("examples"))
            {
                let mut loc = examples.defined;
                if let Some((offset, _)) = loc.byte {
                    loc.byte = Some((offset, byte_end(examples) - offset));
                }
                *examples = yaml_tree::YNode {
                    value: Node::Map(Vec::new()),
                    referenced: loc,
                    defined: loc,
                };
            }
        }
    }
    root
}

/// The end of the last byte of `node` and everything in it.
fn byte_end(node: &yaml_tree::YNode) -> u32 {
    use yaml_tree::Node;
    let own = node.defined.byte.map_or(0, |(o, l)| o + l);
    let children = match &node.value {
        Node::Seq(items) => items.iter().map(byte_end).max().unwrap_or(0),
        Node::Map(entries) => entries
            .iter()
            .map(|(k, v)| byte_end(k).max(byte_end(v)))
            .max()
            .unwrap_or(0),
        _ => 0,
    };
    own.max(children)
}

/// Every string written as a regex in a pack: the value of a `regex` key, and the items
/// of `response_contains_regex`. (Strings that are not regexes of a rule cost a table
/// entry, nothing more.)
fn collect_regexes(
    node: &yaml_tree::YNode,
    is_regex: bool,
    out: &mut std::collections::BTreeSet<String>,
) {
    match &node.value {
        yaml_tree::Node::Str(s) if is_regex => {
            out.insert(s.clone());
        }
        yaml_tree::Node::Seq(items) => {
            for item in items {
                collect_regexes(item, is_regex, out);
            }
        }
        yaml_tree::Node::Map(entries) => {
            for (key, value) in entries {
                let key = key.value.key_text();
                let is_regex = matches!(key.as_deref(), Some("regex" | "response_contains_regex"));
                collect_regexes(value, is_regex, out);
            }
        }
        _ => {}
    }
}

fn is_yaml(path: &Path) -> bool {
    matches!(
        path.extension().and_then(|e| e.to_str()),
        Some("yml" | "yaml")
    )
}

/// `MCPWALL_COMMIT` and `MCPWALL_TARGET` for `mcpwall --version`, so a user reporting a
/// problem (or checking a download) can say exactly which build they run. The commit comes
/// from, in order: `MCPWALL_COMMIT` in the environment (the release script sets it); the
/// `.cargo_vcs_info.json` cargo writes into a published crate (what `cargo install mcpwall`
/// builds from); for a release build in a checkout (`cargo install --path .`), `git` (the
/// commit HEAD names: changes not yet committed are not shown, the release script adds
/// `-modified` for those); else `unknown`, never a guess. Debug builds leave git alone: the
/// commit would have to be watched, and every commit would then rebuild the crate before the
/// next test run (CI sets `MCPWALL_COMMIT` instead).
fn build_facts() {
    println!("cargo:rerun-if-env-changed=MCPWALL_COMMIT");
    let target = std::env::var("TARGET").unwrap_or_else(|_| "unknown".into());
    println!("cargo:rustc-env=MCPWALL_TARGET={target}");
    let commit = std::env::var("MCPWALL_COMMIT")
        .ok()
        .filter(|c| !c.is_empty())
        .or_else(commit_of_package)
        .or_else(commit_of_checkout)
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=MCPWALL_COMMIT={commit}");
}

/// The commit cargo recorded when it packed the crate (`git.sha1`, and `dirty` when the
/// packed files differed from it).
fn commit_of_package() -> Option<String> {
    // Watched only when present: cargo reruns a build script on every build while a file it
    // watches does not exist.
    let text = std::fs::read_to_string(".cargo_vcs_info.json").ok()?;
    println!("cargo:rerun-if-changed=.cargo_vcs_info.json");
    let field = |name: &str| {
        let at = text.find(&format!("\"{name}\""))?;
        let rest = text[at + name.len() + 2..].trim_start().strip_prefix(':')?;
        Some(rest.trim_start().to_string())
    };
    let sha = field("sha1")?;
    let sha: String = sha
        .strip_prefix('"')?
        .chars()
        .take_while(|c| c.is_ascii_hexdigit())
        .collect();
    let dirty = field("dirty").is_some_and(|v| v.starts_with("true"));
    (sha.len() >= 12).then(|| format!("{}{}", &sha[..12], if dirty { "-modified" } else { "" }))
}

/// `git rev-parse` in a checkout. The build reruns when HEAD moves (the files git keeps it
/// in are watched), so the commit printed is never a stale one.
fn commit_of_checkout() -> Option<String> {
    if std::env::var("PROFILE").ok()? != "release" {
        return None;
    }
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git").args(args).output().ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
    };
    let sha = git(&["rev-parse", "--short=12", "HEAD"])?;
    let mut watched = vec!["HEAD".to_string(), "packed-refs".to_string()];
    watched.extend(git(&["symbolic-ref", "-q", "HEAD"]));
    for name in watched {
        if let Some(path) = git(&["rev-parse", "--git-path", &name])
            && Path::new(&path).exists()
        {
            println!("cargo:rerun-if-changed={path}");
        }
    }
    Some(sha)
}
