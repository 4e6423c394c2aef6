//! Secret detection: every detector's regex in one multi-pattern automaton, with a
//! per-match entropy gate. Shared by the inbound `secrets: true` matcher and outbound
//! `secrets` rules.

use std::ops::Range;

use regex_automata::{Input, meta};

/// One detector as declared (built-in or from `secrets.patterns`).
#[derive(Debug, Clone)]
pub struct DetectorSpec {
    /// Stable, kebab-case name, e.g. `aws-access-key-id`.
    pub name: String,
    pub regex: String,
    /// Minimum Shannon entropy (bits per byte) of the match; lower matches are ignored.
    pub entropy_threshold: Option<f64>,
    /// `builtin` or the policy file that declared it.
    pub origin: String,
}

/// A secret found in a text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// Index of the detector (see [`Detector::name`]).
    pub detector: u32,
    /// Byte range of the secret in the scanned text.
    pub range: Range<usize>,
}

/// A detector failed to build.
#[derive(Debug, thiserror::Error)]
#[error("secret pattern {name:?} does not compile: {reason}")]
pub struct DetectorError {
    /// Index of the spec that failed.
    pub index: usize,
    pub name: String,
    pub reason: String,
}

/// The compiled detectors. Immutable; share it.
#[derive(Debug)]
pub struct Detector {
    specs: Vec<DetectorSpec>,
    regex: Option<meta::Regex>,
}

/// Per-caller scratch for [`Detector::find`].
#[derive(Debug)]
pub struct DetectorCache {
    cache: Option<meta::Cache>,
}

/// The built-in detectors.
pub fn builtin_specs() -> Vec<DetectorSpec> {
    let b = |name: &str, regex: &str, entropy: Option<f64>| DetectorSpec {
        name: name.to_string(),
        regex: regex.to_string(),
        entropy_threshold: entropy,
        origin: "builtin".to_string(),
    };
    vec![
        b(
            "aws-access-key-id",
            r"\b(?:AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16}\b",
            None,
        ),
        b("github-token", r"\bgh[pousr]_[A-Za-z0-9]{36,255}\b", None),
        b(
            "github-fine-grained-pat",
            r"\bgithub_pat_[A-Za-z0-9_]{82}\b",
            None,
        ),
        b(
            "openai-api-key",
            r"\bsk-(?:proj-|svcacct-)?[A-Za-z0-9_-]{20,}\b",
            Some(3.0),
        ),
        b(
            "anthropic-api-key",
            r"\bsk-ant-(?:api03|admin01)-[A-Za-z0-9_-]{80,}\b",
            None,
        ),
        b("slack-token", r"\bxox[baprs]-[A-Za-z0-9-]{10,}\b", None),
        b(
            "private-key",
            r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----",
            None,
        ),
    ]
}

impl Detector {
    /// Build one automaton over all specs.
    pub fn new(specs: Vec<DetectorSpec>) -> Result<Detector, DetectorError> {
        for (index, spec) in specs.iter().enumerate() {
            if let Err(e) = meta::Regex::new(&spec.regex) {
                return Err(DetectorError {
                    index,
                    name: spec.name.clone(),
                    reason: e.to_string(),
                });
            }
        }
        let regex = if specs.is_empty() {
            None
        } else {
            let patterns: Vec<&str> = specs.iter().map(|s| s.regex.as_str()).collect();
            Some(
                meta::Regex::builder()
                    .configure(meta::Config::new().nfa_size_limit(Some(10 << 20)))
                    .build_many(&patterns)
                    .map_err(|e| DetectorError {
                        index: e.pattern().map(|p| p.as_usize()).unwrap_or(0),
                        name: String::new(),
                        reason: e.to_string(),
                    })?,
            )
        };
        Ok(Detector { specs, regex })
    }

    pub fn cache(&self) -> DetectorCache {
        DetectorCache {
            cache: self.regex.as_ref().map(|r| r.create_cache()),
        }
    }

    pub fn specs(&self) -> &[DetectorSpec] {
        &self.specs
    }

    pub fn name(&self, detector: u32) -> &str {
        &self.specs[detector as usize].name
    }

    /// Append every secret in `text` to `out`, leftmost-first, non-overlapping.
    pub fn find(&self, text: &str, cache: &mut DetectorCache, out: &mut Vec<Finding>) {
        let (Some(re), Some(cache)) = (&self.regex, cache.cache.as_mut()) else {
            return;
        };
        let mut at = 0;
        while at <= text.len() {
            let input = Input::new(text).range(at..);
            let Some(m) = re.search_with(cache, &input) else {
                break;
            };
            let spec = &self.specs[m.pattern().as_usize()];
            let hit = &text.as_bytes()[m.range()];
            let passes = spec
                .entropy_threshold
                .is_none_or(|t| shannon_entropy(hit) >= t);
            if passes {
                out.push(Finding {
                    detector: m.pattern().as_u32(),
                    range: m.range(),
                });
                at = m.end().max(m.start() + 1);
            } else {
                // Judge entropy per match: a low-entropy decoy must not hide a key behind it.
                at = m.start() + 1;
            }
        }
    }
}

/// Shannon entropy in bits per byte.
pub fn shannon_entropy(bytes: &[u8]) -> f64 {
    if bytes.is_empty() {
        return 0.0;
    }
    let mut counts = [0u32; 256];
    for &b in bytes {
        counts[b as usize] += 1;
    }
    let n = bytes.len() as f64;
    counts
        .iter()
        .filter(|&&c| c > 0)
        .map(|&c| {
            let p = c as f64 / n;
            -p * p.log2()
        })
        .sum()
}
