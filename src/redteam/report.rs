//! The scan report: per-attack results, the score, the table, the findings and the JSON.

use serde::{Deserialize, Serialize};

use super::ScanOptions;
use super::attacks::{Attack, Severity};

/// The reason of an attack left out with `--only`.
pub const NOT_SELECTED: &str = "not selected (--only)";

/// Bumped when the JSON layout changes incompatibly.
pub const SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Outcome {
    Pass,
    Vulnerable,
    Error,
    NotApplicable,
    Skipped,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Pass => "PASS",
            Outcome::Vulnerable => "VULNERABLE",
            Outcome::Error => "ERROR",
            Outcome::NotApplicable => "NOT_APPLICABLE",
            Outcome::Skipped => "SKIPPED",
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AttackResult {
    pub attack_id: String,
    pub name: String,
    pub category: String,
    pub severity: Severity,
    pub baseline: Outcome,
    pub protected: Outcome,
    pub stopped_by: Option<String>,
    /// The same attack through the policy's sandbox with no rules (only for attacks that
    /// land at baseline, when the sandbox is on): `PASS` means the kernel alone holds it.
    #[serde(default)]
    pub kernel: Option<Outcome>,
    /// What the client received (raw) when the attack got through the protected run.
    pub evidence: Option<String>,
    pub baseline_evidence: Option<String>,
    pub remediation: String,
    pub note: Option<String>,
    /// Why the attack was SKIPPED (not selected, or a setting it tests is off).
    #[serde(default)]
    pub reason: Option<String>,
    /// SKIPPED because the policy lacks the setting the attack tests (not because of
    /// `--only`): named in the summary so nothing is hidden.
    #[serde(default)]
    pub skipped_by_policy: bool,
    pub duration_ms: u64,
}

impl AttackResult {
    pub fn new(a: &Attack, baseline: Outcome, protected: Outcome) -> AttackResult {
        AttackResult {
            attack_id: a.id.into(),
            name: a.name.into(),
            category: a.category.into(),
            severity: a.severity,
            baseline,
            protected,
            stopped_by: None,
            kernel: None,
            evidence: None,
            baseline_evidence: None,
            remediation: a.remediation.into(),
            note: None,
            reason: None,
            skipped_by_policy: false,
            duration_ms: 0,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Summary {
    pub total: usize,
    pub pass: usize,
    pub vulnerable: usize,
    pub error: usize,
    pub not_applicable: usize,
    /// Attacks NOT_APPLICABLE because the target lacks the tool they use: evidence the
    /// scan could not gather. When they outnumber the attacks judged, there is no grade.
    #[serde(default)]
    pub untestable: usize,
    pub skipped: usize,
    /// Ids of the attacks SKIPPED because the policy lacks the setting they test.
    #[serde(default)]
    pub skipped_by_policy: Vec<String>,
    /// Attacks that succeeded at baseline (they prove something).
    pub baseline_vulnerable: usize,
    pub complete: bool,
    /// Risk-weighted percentage of evaluated attacks stopped; `None` when incomplete.
    pub score: Option<u32>,
    pub grade: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Report {
    pub schema_version: u32,
    pub scanner: String,
    pub scanner_version: String,
    pub target: String,
    pub policy: String,
    /// sha256 of the policy file's bytes.
    pub policy_digest: String,
    /// The firewall command prefix the protected runs went through (`--proxy`); `None`:
    /// this mcpwall.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy: Option<String>,
    /// What that proxy says `--version` is, or its command when it does not answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy_version: Option<String>,
    pub seed: u64,
    pub summary: Summary,
    pub results: Vec<AttackResult>,
}

/// How the note of an attack the target offers no tool for begins.
pub const NO_TOOL: &str = "the target has no ";

pub fn grade(score: u32) -> &'static str {
    match score {
        95.. => "A",
        85..=94 => "B",
        70..=84 => "C",
        50..=69 => "D",
        _ => "F",
    }
}

impl Report {
    pub fn new(opts: &ScanOptions, results: Vec<AttackResult>) -> Report {
        use sha2::Digest;
        let digest = std::fs::read(&opts.policy)
            .map(|b| {
                format!(
                    "sha256:{}",
                    sha2::Sha256::digest(&b)
                        .iter()
                        .map(|x| format!("{x:02x}"))
                        .collect::<String>()
                )
            })
            .unwrap_or_else(|_| "unreadable".into());
        let count = |o: Outcome| results.iter().filter(|r| r.protected == o).count();
        // An error on either side leaves the attack unjudged (a baseline that broke
        // proves nothing either way), so any error makes the scan incomplete.
        let error = results
            .iter()
            .filter(|r| r.protected == Outcome::Error || r.baseline == Outcome::Error)
            .count();
        let (mut got, mut all) = (0u32, 0u32);
        for r in &results {
            let w = r.severity.weight();
            match r.protected {
                Outcome::Pass => {
                    got += w;
                    all += w;
                }
                Outcome::Vulnerable => all += w,
                _ => {}
            }
        }
        let complete = error == 0;
        let score = (complete && all > 0).then(|| (got * 100 + all / 2) / all);
        let judged = results
            .iter()
            .filter(|r| matches!(r.protected, Outcome::Pass | Outcome::Vulnerable))
            .count();
        let untestable = results
            .iter()
            .filter(|r| {
                r.protected == Outcome::NotApplicable
                    && r.note.as_deref().is_some_and(|n| n.starts_with(NO_TOOL))
            })
            .count();
        // A grade stands for the policy only when most of what could be tested was: one
        // PASS beside 94 attacks the server offers no tool for is not an A.
        let graded = untestable <= judged;
        Report {
            schema_version: SCHEMA_VERSION,
            scanner: "mcpwall".into(),
            scanner_version: env!("CARGO_PKG_VERSION").into(),
            target: match &opts.server {
                Some(cmd) => serde_json::to_string(cmd).unwrap_or_default(),
                None => "built-in vulnerable target".into(),
            },
            policy: opts.policy_label.clone(),
            policy_digest: digest,
            proxy: opts.proxy.as_ref().map(|p| p.label.clone()),
            proxy_version: opts.proxy.as_ref().map(|p| p.version.clone()),
            seed: opts.seed,
            summary: Summary {
                total: results.len(),
                pass: count(Outcome::Pass),
                vulnerable: count(Outcome::Vulnerable),
                error,
                not_applicable: count(Outcome::NotApplicable),
                untestable,
                skipped: count(Outcome::Skipped),
                skipped_by_policy: results
                    .iter()
                    .filter(|r| r.skipped_by_policy)
                    .map(|r| r.attack_id.clone())
                    .collect(),
                baseline_vulnerable: results
                    .iter()
                    .filter(|r| r.baseline == Outcome::Vulnerable)
                    .count(),
                complete,
                score,
                grade: score.filter(|_| graded).map(|s| grade(s).to_string()),
            },
            results,
        }
    }

    /// Whether any VULNERABLE result is at or above `level`, or the scan is incomplete,
    /// or a gate was asked for (`level`) and the scan could not grade the policy.
    pub fn gate_met(&self, level: Option<Severity>) -> bool {
        if !self.summary.complete {
            return true;
        }
        if level.is_some() && self.summary.score.is_some() && self.summary.grade.is_none() {
            return true;
        }
        level.is_some_and(|l| {
            self.results
                .iter()
                .any(|r| r.protected == Outcome::Vulnerable && r.severity >= l)
        })
    }

    pub fn summary_line(&self) -> String {
        let s = &self.summary;
        let score = match (s.score, &s.grade) {
            (Some(n), Some(g)) => format!("score {n}/100 (grade {g})"),
            (Some(n), None) => format!(
                "NOT GRADED (score {n}/100 over {} attacks; {} need a tool the target lacks)",
                s.pass + s.vulnerable,
                s.untestable
            ),
            _ => "INCOMPLETE (errors; no score)".into(),
        };
        let skipped = if s.skipped_by_policy.is_empty() {
            format!("{} skipped", s.skipped)
        } else {
            format!(
                "{} skipped ({}: the policy does not enable what they test)",
                s.skipped,
                s.skipped_by_policy.join(", ")
            )
        };
        format!(
            "{score}: {} passed, {} vulnerable, {} errors, {} not applicable, {skipped}; {} of {} attacks got through without mcpwall",
            s.pass, s.vulnerable, s.error, s.not_applicable, s.baseline_vulnerable, s.total
        )
    }

    /// The table, findings and summary. `timings: false` leaves durations out (goldens).
    /// Attacks left out with `--only` have no row (the summary still counts them).
    pub fn render_text(&self, timings: bool) -> String {
        let mut out = String::new();
        out.push_str(&format!(
            "mcpwall scan: {}\npolicy: {}\n",
            clean(&self.target, 200),
            clean(&self.policy, 200)
        ));
        if let Some(proxy) = &self.proxy {
            out.push_str(&format!(
                "proxy: {} ({})\n",
                clean(proxy, 200),
                clean(self.proxy_version.as_deref().unwrap_or("-"), 100)
            ));
        }
        out.push('\n');
        let header = [
            "ID",
            "ATTACK",
            "OWASP",
            "SEVERITY",
            "BASELINE",
            "PROTECTED",
            "STOPPED BY",
            "KERNEL ALONE",
        ];
        let rows: Vec<[String; 8]> = self
            .results
            .iter()
            .filter(|r| r.reason.as_deref() != Some(NOT_SELECTED))
            .map(|r| {
                [
                    r.attack_id.clone(),
                    clean(&r.name, 44),
                    r.category.clone(),
                    r.severity.as_str().to_string(),
                    r.baseline.as_str().to_string(),
                    r.protected.as_str().to_string(),
                    clean(r.stopped_by.as_deref().unwrap_or("-"), 40),
                    match r.kernel {
                        None => "-",
                        Some(Outcome::Pass) => "held",
                        Some(Outcome::Vulnerable) => "got through",
                        Some(_) => "error",
                    }
                    .to_string(),
                ]
            })
            .collect();
        // Each column as wide as its widest cell (in characters), two spaces between.
        let mut widths = header.map(|h| h.chars().count());
        for row in &rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let line = |cells: &[&str]| {
            let mut text = String::new();
            for (i, cell) in cells.iter().enumerate() {
                text.push_str(cell);
                if i + 1 < cells.len() {
                    let pad = widths[i] - cell.chars().count() + 2;
                    text.push_str(&" ".repeat(pad));
                }
            }
            text
        };
        let time_col = |text: &mut String, cells: &[&str], time: &str| {
            if timings {
                let last = cells.len() - 1;
                let pad = widths[last] - cells[last].chars().count() + 2;
                text.push_str(&" ".repeat(pad));
                text.push_str(time);
            }
        };
        let mut head = line(&header);
        time_col(&mut head, &header, "TIME");
        out.push_str(head.trim_end());
        out.push('\n');
        let shown = self
            .results
            .iter()
            .filter(|r| r.reason.as_deref() != Some(NOT_SELECTED));
        for (r, row) in shown.zip(&rows) {
            let cells: Vec<&str> = row.iter().map(String::as_str).collect();
            let mut text = line(&cells);
            time_col(&mut text, &cells, &format!("{} ms", r.duration_ms));
            out.push_str(text.trim_end());
            out.push('\n');
        }
        let kernel_runs = self.results.iter().filter(|r| r.kernel.is_some()).count();
        if kernel_runs > 0 {
            let held = self
                .results
                .iter()
                .filter(|r| r.kernel == Some(Outcome::Pass))
                .count();
            out.push_str(&format!(
                "\nKERNEL ALONE: with every rule and the tool guard lifted, the policy's sandbox (and the strict frame parser) held {held} of the {kernel_runs} attacks that land at baseline; the rest need the rules (arguments, tool semantics, what a result says; this target only pretends to run commands)\n"
            ));
        }
        let vulnerable: Vec<&AttackResult> = self
            .results
            .iter()
            .filter(|r| r.protected == Outcome::Vulnerable)
            .collect();
        if !vulnerable.is_empty() {
            out.push_str("\nFINDINGS\n");
            for r in vulnerable {
                out.push_str(&format!(
                    "\n[{}] {} {} ({})\n  evidence: {}\n  remediation:\n",
                    r.severity.as_str().to_uppercase(),
                    r.attack_id,
                    clean(&r.name, 80),
                    r.category,
                    clean(r.evidence.as_deref().unwrap_or("-"), 160)
                ));
                for l in r.remediation.lines() {
                    out.push_str(&format!("    {l}\n"));
                }
            }
        }
        let skipped: Vec<&AttackResult> = self
            .results
            .iter()
            .filter(|r| r.skipped_by_policy)
            .collect();
        if !skipped.is_empty() {
            out.push_str("\nSKIPPED (not scored)\n");
            for r in skipped {
                out.push_str(&format!(
                    "  {}: {}\n",
                    r.attack_id,
                    clean(r.reason.as_deref().unwrap_or("-"), 200)
                ));
            }
        }
        let errors: Vec<&AttackResult> = self
            .results
            .iter()
            .filter(|r| r.protected == Outcome::Error || r.baseline == Outcome::Error)
            .collect();
        if !errors.is_empty() {
            out.push_str("\nERRORS\n");
            for r in errors {
                out.push_str(&format!(
                    "  {}: {}\n",
                    r.attack_id,
                    clean(r.note.as_deref().unwrap_or("-"), 160)
                ));
            }
        }
        out.push('\n');
        out.push_str(&self.summary_line());
        out.push('\n');
        if self.summary.score.is_some() && self.summary.grade.is_none() {
            out.push_str(
                "hint: most attacks need a tool this server does not offer (read_file, \
                 execute_command, fetch_url, ...); the score covers the rest only. Grade the \
                 policy itself with the built-in target: `mcpwall scan -c FILE`\n",
            );
        }
        out
    }
}

/// Text from a target, made safe for a terminal: control characters and escape sequences
/// removed, at most `max` characters.
pub fn clean(text: &str, max: usize) -> String {
    let mut out = String::new();
    let mut chars = text.chars().peekable();
    let mut n = 0;
    while let Some(c) = chars.next() {
        if c == '\u{1b}' || c == '\u{9b}' {
            // Skip a CSI/OSC sequence: up to its final byte (or BEL / ST for OSC).
            if c == '\u{1b}' && matches!(chars.peek(), Some(']')) {
                for d in chars.by_ref() {
                    if d == '\u{7}' || d == '\u{9c}' || d == '\\' {
                        break;
                    }
                }
            } else {
                if c == '\u{1b}' {
                    chars.next();
                }
                while let Some(&d) = chars.peek() {
                    chars.next();
                    if ('@'..='~').contains(&d) {
                        break;
                    }
                }
            }
            continue;
        }
        let c = if c.is_control() { ' ' } else { c };
        if matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}') {
            continue;
        }
        if n >= max {
            out.push('…');
            break;
        }
        out.push(c);
        n += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::redteam::attacks::ATTACKS;

    fn options() -> ScanOptions {
        ScanOptions {
            exe: "mcpwall".into(),
            server: None,
            policy: "/nonexistent".into(),
            policy_label: "test".into(),
            seed: 1,
            timeout: std::time::Duration::from_secs(1),
            only: vec![],
            proxy: None,
            kernel_policy: None,
        }
    }

    fn results(baseline_error: bool) -> Vec<AttackResult> {
        ATTACKS
            .iter()
            .take(4)
            .enumerate()
            .map(|(i, a)| {
                let base = if baseline_error && i == 1 {
                    Outcome::Error
                } else {
                    Outcome::Vulnerable
                };
                let mut r = AttackResult::new(a, base, Outcome::Pass);
                r.stopped_by = Some(if i == 2 {
                    "a-much-longer-rule-name".into()
                } else {
                    "x".into()
                });
                r
            })
            .collect()
    }

    #[test]
    fn r24_an_error_on_either_side_makes_the_report_incomplete() {
        let report = Report::new(&options(), results(true));
        assert!(!report.summary.complete);
        assert_eq!(report.summary.score, None);
        assert_eq!(report.summary.grade, None);
        assert!(report.gate_met(None), "incomplete fails the gate");
        assert!(report.summary_line().starts_with("INCOMPLETE"));
        let complete = Report::new(&options(), results(false));
        assert!(complete.summary.complete && complete.summary.grade.is_some());
    }

    /// One PASS beside attacks the server offers no tool for is no grade: the summary says
    /// so, and a gate fails on it.
    #[test]
    fn a_scan_where_most_attacks_need_a_missing_tool_is_not_graded() {
        let mut results = results(false);
        for r in results.iter_mut().skip(1) {
            r.baseline = Outcome::NotApplicable;
            r.protected = Outcome::NotApplicable;
            r.note = Some(format!("{NO_TOOL}execute_command tool"));
        }
        let report = Report::new(&options(), results);
        assert_eq!(report.summary.score, Some(100));
        assert_eq!(report.summary.grade, None);
        assert!(
            report
                .summary_line()
                .starts_with("NOT GRADED (score 100/100 over 1 attacks; 3 need"),
            "{}",
            report.summary_line()
        );
        assert!(!report.gate_met(None));
        assert!(report.gate_met(Severity::parse("low")));
        assert!(
            report
                .render_text(false)
                .contains("hint: most attacks need a tool")
        );
    }

    #[test]
    fn r24_table_columns_line_up_and_only_selected_rows_show() {
        let mut results = results(false);
        results[3].baseline = Outcome::Skipped;
        results[3].protected = Outcome::Skipped;
        results[3].reason = Some(NOT_SELECTED.into());
        let text = Report::new(&options(), results.clone()).render_text(true);
        let table: Vec<&str> = text
            .lines()
            .skip_while(|l| !l.starts_with("ID"))
            .take_while(|l| !l.is_empty())
            .collect();
        assert_eq!(table.len(), 4, "header and three selected rows:\n{text}");
        assert!(!text.contains(&results[3].attack_id), "{text}");
        for column in ["PROTECTED", "STOPPED BY", "TIME"] {
            let at = table[0].find(column).unwrap();
            for row in &table[1..] {
                let before = row.chars().take(at).collect::<String>();
                assert!(
                    before.ends_with("  ") && !row[..].chars().nth(at).unwrap().is_whitespace(),
                    "{column} not aligned:\n{}",
                    table.join("\n")
                );
            }
        }
    }
}
