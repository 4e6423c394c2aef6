//! Poison-scanner quality gates on two corpora:
//! - `tests/corpus/poison/cases.jsonl`: poisoned tool metadata, one technique per line,
//!   modelled on published tool-poisoning write-ups (each described in our own words);
//! - `tests/corpus/benign/*.json`: the real `tools/list`, `prompts/list` and
//!   `initialize` instructions of published MCP servers (package and version recorded in
//!   each file), as those servers return them.
//!
//! Gates: recall ≥ 95% on poisoned cases, false positives ≤ 1% on benign descriptions.
//! The test prints both figures.

use std::collections::BTreeSet;
use std::path::Path;

use mcpwall::guard::poison::{self, Finding};
use serde_json::Value;

const MIN_RECALL: f64 = 0.95;
const MAX_FALSE_POSITIVE_RATE: f64 = 0.01;

fn corpus_dir() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/corpus"))
}

struct PoisonCase {
    id: String,
    expect: String,
    findings: Vec<Finding>,
}

fn poison_cases() -> Vec<PoisonCase> {
    let text = std::fs::read_to_string(corpus_dir().join("poison/cases.jsonl")).unwrap();
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let case: Value = serde_json::from_str(line).unwrap();
            let findings = match (&case["text"], &case["tool"]) {
                (Value::String(t), _) => poison::scan(t),
                (_, tool @ Value::Object(_)) => poison::scan_definition(tool),
                _ => panic!("case without text or tool: {line}"),
            };
            PoisonCase {
                id: case["id"].as_str().unwrap().to_string(),
                expect: case["expect"].as_str().unwrap().to_string(),
                findings,
            }
        })
        .collect()
}

/// Every human-written description in a server's lists: tool titles and descriptions,
/// schema descriptions at any depth, prompt and prompt-argument descriptions, server
/// instructions. Deduplicated: servers repeat boilerplate parameter descriptions.
fn benign_descriptions() -> Vec<(String, String)> {
    let mut out = BTreeSet::new();
    let mut files: Vec<_> = std::fs::read_dir(corpus_dir().join("benign"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    for path in files {
        let doc: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let server = doc["server"].as_str().unwrap().to_string();
        if let Some(instructions) = doc["instructions"].as_str() {
            out.insert((instructions.to_string(), format!("{server}: instructions")));
        }
        for list in ["tools", "prompts", "resources", "resourceTemplates"] {
            for item in doc[list].as_array().into_iter().flatten() {
                let name = item["name"].as_str().unwrap_or("?");
                collect_descriptions(item, &format!("{server}/{name}"), &mut out);
            }
        }
    }
    // Keep the first location of each distinct text.
    let mut seen = BTreeSet::new();
    out.into_iter()
        .filter(|(text, _)| seen.insert(text.clone()))
        .collect()
}

fn collect_descriptions(v: &Value, at: &str, out: &mut BTreeSet<(String, String)>) {
    match v {
        Value::Object(map) => {
            for (key, item) in map {
                match (key.as_str(), item) {
                    ("description" | "title", Value::String(s)) if !s.trim().is_empty() => {
                        out.insert((s.clone(), format!("{at}.{key}")));
                    }
                    _ => collect_descriptions(item, &format!("{at}.{key}"), out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|i| collect_descriptions(i, at, out)),
        _ => {}
    }
}

#[test]
fn poison_corpus_meets_recall_and_false_positive_gates() {
    let cases = poison_cases();
    assert!(
        cases.len() >= 40,
        "need at least 40 poisoned cases, have {}",
        cases.len()
    );
    let missed: Vec<&PoisonCase> = cases
        .iter()
        .filter(|c| !poison::is_poisoned(&c.findings))
        .collect();
    let recall = 1.0 - missed.len() as f64 / cases.len() as f64;

    let benign = benign_descriptions();
    assert!(
        benign.len() >= 200,
        "need at least 200 benign descriptions, have {}",
        benign.len()
    );
    let flagged: Vec<(&(String, String), Vec<Finding>)> = benign
        .iter()
        .map(|entry| (entry, poison::scan(&entry.0)))
        .filter(|(_, findings)| poison::is_poisoned(findings))
        .collect();
    let fp_rate = flagged.len() as f64 / benign.len() as f64;

    println!(
        "poison recall: {}/{} = {:.1}% (gate ≥ {:.0}%)",
        cases.len() - missed.len(),
        cases.len(),
        recall * 100.0,
        MIN_RECALL * 100.0
    );
    println!(
        "false positives: {}/{} = {:.2}% (gate ≤ {:.0}%)",
        flagged.len(),
        benign.len(),
        fp_rate * 100.0,
        MAX_FALSE_POSITIVE_RATE * 100.0
    );
    for case in &missed {
        println!("  missed {}: {:?}", case.id, case.findings);
    }
    for ((text, at), findings) in &flagged {
        let short: String = text.chars().take(160).collect();
        println!("  false positive {at}: {short:?}\n    {findings:?}");
    }
    assert!(recall >= MIN_RECALL, "recall {recall:.3} below the gate");
    assert!(
        fp_rate <= MAX_FALSE_POSITIVE_RATE,
        "false-positive rate {fp_rate:.4} above the gate"
    );
}

#[test]
fn each_poisoned_case_is_caught_for_the_reason_it_was_written() {
    // The expected kind must be among the findings: a case caught only by accident
    // (say, an unrelated weak word) would hide a gap in the rule it exercises.
    let mut wrong = Vec::new();
    for case in poison_cases() {
        if !case.findings.iter().any(|f| f.kind.as_str() == case.expect) {
            wrong.push(format!(
                "{} expects {}: {:?}",
                case.id, case.expect, case.findings
            ));
        }
    }
    assert!(
        wrong.len() <= 2,
        "cases not caught for their own reason:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn every_benign_tool_definition_passes_whole() {
    // Scanning a whole definition (property names, enums, defaults) must not turn
    // honest servers into poisoned ones either.
    let mut total = 0usize;
    let mut flagged = Vec::new();
    let started = std::time::Instant::now();
    for entry in std::fs::read_dir(corpus_dir().join("benign")).unwrap() {
        let doc: Value =
            serde_json::from_str(&std::fs::read_to_string(entry.unwrap().path()).unwrap()).unwrap();
        for tool in doc["tools"].as_array().unwrap() {
            total += 1;
            let findings = poison::scan_definition(tool);
            if poison::is_poisoned(&findings) {
                flagged.push(format!("{}/{}: {findings:?}", doc["server"], tool["name"]));
            }
        }
    }
    println!(
        "benign tool definitions flagged: {}/{total} (scanned in {:?}, debug build)",
        flagged.len(),
        started.elapsed()
    );
    assert!(
        (flagged.len() as f64) <= (total as f64) * MAX_FALSE_POSITIVE_RATE,
        "{}",
        flagged.join("\n")
    );
}
