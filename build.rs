//! Parses the embedded rule packs once, at build time, into the byte form of their YAML
//! tree (see `src/config/yaml_tree.rs`); the binary decodes those at start-up instead of
//! parsing the YAML on every run. A pack that does not parse gets no tree: the binary
//! then parses its text at run time and reports the problem like for any other file.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

#[path = "src/config/yaml_tree.rs"]
#[allow(dead_code)]
mod yaml_tree;

const PACK_DIRS: [&str; 3] = ["rules", "profiles", "servers"];

fn main() {
    println!("cargo:rerun-if-changed=src/config/yaml_tree.rs");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let mut table = String::from("pub(crate) const TREES: &[(&str, &[u8])] = &[\n");
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
            let key = path.to_string_lossy().replace('\\', "/");
            let blob_name = format!("{}.tree", key.replace('/', "__"));
            std::fs::write(out.join(&blob_name), yaml_tree::encode(&text, &root))
                .expect("write a pack tree to OUT_DIR");
            let _ = writeln!(
                table,
                "    ({key:?}, include_bytes!(concat!(env!(\"OUT_DIR\"), \"/{blob_name}\"))),"
            );
        }
    }
    table.push_str("];\n");
    std::fs::write(out.join("pack_trees.rs"), table).expect("write pack_trees.rs");
}

fn is_yaml(path: &Path) -> bool {
    matches!(
        path.extension().and_then(|e| e.to_str()),
        Some("yml" | "yaml")
    )
}
