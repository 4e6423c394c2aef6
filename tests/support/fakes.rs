//! Fake credentials for tests, built at run time so no secret-looking literal sits in the
//! repository, and the placeholders the built-in packs' examples use.
//!
//! - `{{fake:DETECTOR}}` becomes a fake credential that the named built-in detector finds;
//! - `${HOME}` and `${PROJECT_DIR}` become the test's temporary directories.

#![allow(dead_code)]

/// A small deterministic generator: the same test run produces the same fakes, which
/// keeps snapshots stable, and nothing about them is real.
struct Gen(u64);

impl Gen {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn pick(&mut self, alphabet: &str, n: usize) -> String {
        let bytes = alphabet.as_bytes();
        (0..n)
            .map(|_| bytes[(self.next() % bytes.len() as u64) as usize] as char)
            .collect()
    }
}

const UPPER32: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
const ALNUM: &str = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";

/// A fake credential of the shape `detector` finds, or `None` for an unknown detector.
pub fn fake(detector: &str) -> Option<String> {
    let seed = detector.bytes().fold(0x9E37_79B9_7F4A_7C15u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01B3)
    });
    let mut g = Gen(seed | 1);
    let s = match detector {
        "aws-access-key-id" => format!("{}{}", "AK", "IA") + &g.pick(UPPER32, 16),
        "github-token" => format!("{}{}", "gh", "p_") + &g.pick(ALNUM, 36),
        "github-fine-grained-pat" => format!("{}{}", "github_", "pat_") + &g.pick(ALNUM, 82),
        "openai-api-key" => format!("{}{}", "sk", "-proj-") + &g.pick(ALNUM, 40),
        "anthropic-api-key" => format!("{}{}", "sk-ant-", "api03-") + &g.pick(ALNUM, 90),
        "slack-token" => format!("{}{}", "xo", "xb-") + &g.pick(ALNUM, 24),
        "private-key" => {
            let kind = ["RSA", "PRIVATE", "KEY"].join(" ");
            format!(
                "-----BEGIN {kind}-----\n{}\n{}\n-----END {kind}-----",
                g.pick(ALNUM, 64),
                g.pick(ALNUM, 40)
            )
        }
        _ => return None,
    };
    Some(s)
}

/// Replace every placeholder in `text`.
pub fn expand(text: &str, home: &str, project_dir: &str) -> String {
    expand_with(text, home, project_dir, |s| s.to_string())
}

/// Replace every placeholder in `text` that sits inside JSON strings (a JSONL file), with
/// the replacements JSON-escaped.
pub fn expand_in_json(text: &str, home: &str, project_dir: &str) -> String {
    expand_with(text, home, project_dir, |s| {
        let quoted = serde_json::to_string(s).expect("a string serialises");
        quoted[1..quoted.len() - 1].to_string()
    })
}

fn expand_with(
    text: &str,
    home: &str,
    project_dir: &str,
    escape: impl Fn(&str) -> String,
) -> String {
    let mut out = text
        .replace("${HOME}", &escape(home))
        .replace("${PROJECT_DIR}", &escape(project_dir));
    while let Some(start) = out.find("{{fake:") {
        let end = out[start..]
            .find("}}")
            .map(|e| start + e)
            .unwrap_or_else(|| panic!("unterminated placeholder in {text:?}"));
        let name = out[start + 7..end].to_string();
        let value = fake(&name).unwrap_or_else(|| panic!("no fake for detector {name:?}"));
        out.replace_range(start..end + 2, &escape(&value));
    }
    out
}

/// [`expand`] applied to every string (and key) of a JSON value.
pub fn expand_json(v: &serde_json::Value, home: &str, project_dir: &str) -> serde_json::Value {
    use serde_json::Value;
    match v {
        Value::String(s) => Value::String(expand(s, home, project_dir)),
        Value::Array(a) => Value::Array(
            a.iter()
                .map(|x| expand_json(x, home, project_dir))
                .collect(),
        ),
        Value::Object(o) => Value::Object(
            o.iter()
                .map(|(k, x)| {
                    (
                        expand(k, home, project_dir),
                        expand_json(x, home, project_dir),
                    )
                })
                .collect(),
        ),
        other => other.clone(),
    }
}
