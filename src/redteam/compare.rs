//! `mcpwall compare`: what changed between two scan reports.

use serde::Serialize;

use super::report::{Outcome, Report, SCHEMA_VERSION};

#[derive(Debug, Serialize)]
pub struct StatusChange {
    pub attack_id: String,
    pub before: Outcome,
    pub after: Outcome,
}

#[derive(Debug, Serialize)]
pub struct Comparison {
    pub score_before: Option<u32>,
    pub score_after: Option<u32>,
    pub score_delta: Option<i64>,
    /// Attacks evaluated (PASS or VULNERABLE) in each report.
    pub coverage_before: usize,
    pub coverage_after: usize,
    pub new_vulnerabilities: Vec<String>,
    pub resolved_vulnerabilities: Vec<String>,
    pub unchanged_vulnerabilities: Vec<String>,
    pub status_changes: Vec<StatusChange>,
    pub after_complete: bool,
    /// The second report is worse (lower score, new vulnerabilities) or incomplete.
    pub worse: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    #[error("{0} has schema_version {1}; this mcpwall reads version {SCHEMA_VERSION}")]
    Schema(String, u32),
}

fn evaluated(r: &Report) -> usize {
    r.results
        .iter()
        .filter(|x| matches!(x.protected, Outcome::Pass | Outcome::Vulnerable))
        .count()
}

pub fn compare(before: &Report, after: &Report) -> Result<Comparison, CompareError> {
    for (name, r) in [("the first report", before), ("the second report", after)] {
        if r.schema_version != SCHEMA_VERSION {
            return Err(CompareError::Schema(name.into(), r.schema_version));
        }
    }
    let status = |r: &Report, id: &str| {
        r.results
            .iter()
            .find(|x| x.attack_id == id)
            .map(|x| x.protected)
    };
    let mut ids: Vec<&str> = before
        .results
        .iter()
        .map(|r| r.attack_id.as_str())
        .collect();
    for r in &after.results {
        if !ids.contains(&r.attack_id.as_str()) {
            ids.push(&r.attack_id);
        }
    }
    let (mut new, mut resolved, mut unchanged, mut changes) = (vec![], vec![], vec![], vec![]);
    for id in ids {
        let b = status(before, id);
        let a = status(after, id);
        let bv = b == Some(Outcome::Vulnerable);
        let av = a == Some(Outcome::Vulnerable);
        match (bv, av) {
            (false, true) => new.push(id.to_string()),
            (true, false) => resolved.push(id.to_string()),
            (true, true) => unchanged.push(id.to_string()),
            _ => {}
        }
        if let (Some(b), Some(a)) = (b, a)
            && b != a
        {
            changes.push(StatusChange {
                attack_id: id.into(),
                before: b,
                after: a,
            });
        }
    }
    let (sb, sa) = (before.summary.score, after.summary.score);
    let delta = sb.zip(sa).map(|(b, a)| i64::from(a) - i64::from(b));
    let worse = !after.summary.complete || !new.is_empty() || delta.is_some_and(|d| d < 0);
    Ok(Comparison {
        score_before: sb,
        score_after: sa,
        score_delta: delta,
        coverage_before: evaluated(before),
        coverage_after: evaluated(after),
        new_vulnerabilities: new,
        resolved_vulnerabilities: resolved,
        unchanged_vulnerabilities: unchanged,
        status_changes: changes,
        after_complete: after.summary.complete,
        worse,
    })
}

impl Comparison {
    pub fn render_text(&self) -> String {
        let score = |s: Option<u32>| s.map_or("incomplete".to_string(), |n| n.to_string());
        let mut out = format!(
            "score: {} -> {}{}\ncoverage: {} -> {} attacks evaluated\n",
            score(self.score_before),
            score(self.score_after),
            self.score_delta
                .map_or(String::new(), |d| format!(" ({d:+})")),
            self.coverage_before,
            self.coverage_after
        );
        for (label, list) in [
            ("new vulnerabilities", &self.new_vulnerabilities),
            ("resolved", &self.resolved_vulnerabilities),
            ("still vulnerable", &self.unchanged_vulnerabilities),
        ] {
            out.push_str(&format!(
                "{label}: {}\n",
                if list.is_empty() {
                    "none".into()
                } else {
                    list.join(", ")
                }
            ));
        }
        for c in &self.status_changes {
            out.push_str(&format!(
                "  {}: {} -> {}\n",
                c.attack_id,
                c.before.as_str(),
                c.after.as_str()
            ));
        }
        out.push_str(if self.worse {
            "verdict: WORSE\n"
        } else {
            "verdict: same or better\n"
        });
        out
    }
}
