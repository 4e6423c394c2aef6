//! Golden diagnostics: every `golden/diagnostics/<case>.yaml` is loaded with `load_str`, and
//! its rendered report (unicode, no colour, 80 columns) must equal `<case>.snap` beside it.
//! Update with `INSTA_UPDATE=always cargo test --test golden_diagnostics`.

use std::path::{Path, PathBuf};

use mcpwall::config::{LoadOptions, Packs, load_str_with_packs};

/// A fixed pack table, so the snapshots (which list pack names in help texts) do not change
/// whenever a built-in pack is added.
const PACKS: Packs = &[
    ("rules/default.yml", "version: 1\n"),
    ("rules/strict.yml", "version: 1\n"),
    (
        "profiles/strict.yml",
        "version: 1\nextends: [default, strict]\n",
    ),
    ("servers/filesystem-mcp.yaml", "version: 1\n"),
];

fn render(name: &str, text: &str) -> String {
    let opts = LoadOptions {
        explicit: None,
        home: "/home/user".into(),
        project_dir: "/home/user/project".into(),
    };
    match load_str_with_packs(name, text, &opts, PACKS) {
        Ok(p) => panic!("{name} should not load; it loaded {} rules", p.rules.len()),
        Err(e) => {
            let mut out = String::new();
            miette::GraphicalReportHandler::new_themed(miette::GraphicalTheme::unicode_nocolor())
                .with_width(80)
                .render_report(&mut out, &e)
                .expect("rendering into a String cannot fail");
            out
        }
    }
}

#[test]
fn golden_diagnostics() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("golden/diagnostics");
    let mut cases: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("golden/diagnostics exists")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    cases.sort();
    assert!(
        cases.len() >= 15,
        "expected the golden cases, found {}",
        cases.len()
    );
    let mut failed = Vec::new();
    for path in &cases {
        let case = path.file_stem().unwrap().to_string_lossy().into_owned();
        let file_name = path.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(path).unwrap();
        let mut settings = insta::Settings::clone_current();
        settings.set_snapshot_path(&dir);
        settings.set_prepend_module_to_snapshot(false);
        settings.set_omit_expression(true);
        settings.set_input_file(path);
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            settings.bind(|| {
                // Relative names keep snapshots independent of where the repo is checked out.
                insta::assert_snapshot!(case.as_str(), render(&file_name, &text));
            })
        }));
        if result.is_err() {
            failed.push(case);
        }
    }
    assert!(failed.is_empty(), "golden diagnostics differ: {failed:?}");
}
