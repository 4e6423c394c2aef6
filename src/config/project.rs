//! A loaded policy moved to another project: the client's roots (decision 16).
//!
//! `${PROJECT_DIR}` is expanded when a policy loads, against the directory mcpwall was
//! started in. A client that declares roots says where the project really is, later,
//! in the middle of a session; [`Policy::for_project`] gives the same policy with every
//! project-relative path written again for those roots, so that compiling it judges
//! "outside the project" against them. Nothing else changes: the same rules in the same
//! order (so rule ids stay valid), the same sources, settings and sandbox section (the
//! sandbox is applied when the server starts; see [`crate::session`]'s roots docs).
//!
//! Several roots: a `not_under: ${PROJECT_DIR}` condition becomes one condition per root,
//! all of which must hold (the value is under none of them); an `ancestors_of:
//! ${PROJECT_DIR}` entry one entry per root (any one counts). No root: the paths are
//! written against [`crate::paths::NO_PROJECT`], under which nothing lies. A glob that
//! starts with `${PROJECT_DIR}` is expanded when the program compiles, against the
//! first root (the program's single project directory).

use std::path::{Path, PathBuf};

use super::policy::{ArgCondition, CommandPaths, Matcher, Policy, Rule};
use super::validate::expand_vars;

/// Whether a path as written depends on the project.
fn names_project(written: &str) -> bool {
    written.contains("${PROJECT_DIR}") || written.contains("$PROJECT_DIR")
}

/// Where a project-relative path as written lies for each of `roots`; relative results
/// start at `cwd`, as at load. `None` when the text no longer expands (it did at load).
fn per_root(written: &str, home: &Path, cwd: &Path, roots: &[PathBuf]) -> Option<Vec<PathBuf>> {
    let none = [PathBuf::from(crate::paths::NO_PROJECT)];
    let roots = if roots.is_empty() { &none[..] } else { roots };
    roots
        .iter()
        .map(|root| {
            let path = PathBuf::from(expand_vars(written, home, root).ok()?);
            Some(if path.is_relative() {
                cwd.join(path)
            } else {
                path
            })
        })
        .collect()
}

impl Policy {
    /// This policy with the project at `roots` (empty: no project): see the module docs.
    /// `home` and `cwd` are the ones it was loaded with (`LoadOptions::home`, the server's
    /// working directory).
    pub fn for_project(&self, home: &Path, cwd: &Path, roots: &[PathBuf]) -> Policy {
        let mut moved = self.clone();
        for rule in &mut moved.rules {
            move_rule(rule, home, cwd, roots);
        }
        for exception in &mut moved.exceptions {
            move_rule(&mut exception.conditions, home, cwd, roots);
        }
        moved
    }
}

fn move_rule(rule: &mut Rule, home: &Path, cwd: &Path, roots: &[PathBuf]) {
    let conditions = std::mem::take(&mut rule.arguments);
    for mut condition in conditions {
        match &mut condition.matcher {
            Matcher::NotUnder { written, .. } if names_project(&written.value) => {
                match per_root(&written.value, home, cwd, roots) {
                    Some(paths) => {
                        for root in paths {
                            rule.arguments.push(ArgCondition {
                                selector: condition.selector.clone(),
                                matcher: Matcher::NotUnder {
                                    root,
                                    written: written.clone(),
                                },
                                span: condition.span,
                            });
                        }
                    }
                    // Cannot happen (it expanded at load); kept as it was.
                    None => rule.arguments.push(condition),
                }
            }
            Matcher::Command(clauses) => {
                for clause in &mut clauses.value {
                    if let Some(paths) = &mut clause.paths {
                        move_command_paths(paths, home, cwd, roots);
                    }
                }
                rule.arguments.push(condition);
            }
            _ => rule.arguments.push(condition),
        }
    }
}

fn move_command_paths(paths: &mut CommandPaths, home: &Path, cwd: &Path, roots: &[PathBuf]) {
    let rewrite = |written: &mut Vec<String>, expanded: &mut Vec<PathBuf>| {
        if !written.iter().any(|w| names_project(w)) || written.len() != expanded.len() {
            return;
        }
        let mut new_written = Vec::new();
        let mut new_expanded = Vec::new();
        for (w, e) in written.iter().zip(expanded.iter()) {
            match per_root(w, home, cwd, roots).filter(|_| names_project(w)) {
                Some(list) => {
                    for p in list {
                        new_written.push(w.clone());
                        new_expanded.push(p);
                    }
                }
                None => {
                    new_written.push(w.clone());
                    new_expanded.push(e.clone());
                }
            }
        }
        *written = new_written;
        *expanded = new_expanded;
    };
    rewrite(&mut paths.not_under_written, &mut paths.not_under);
    rewrite(&mut paths.ancestors_of_written, &mut paths.ancestors_of);
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use crate::config::policy::Matcher;
    use crate::config::{LoadOptions, load_str};

    const POLICY: &str = r#"version: 1
rules:
  - name: writes-outside
    match:
      method: "*"
      tool: write_file
      arguments:
        path: {not_under: ["${PROJECT_DIR}", "/tmp"]}
    action: deny
  - name: rm-outside
    match:
      method: "*"
      arguments:
        command:
          command:
            - name: [rm]
              paths:
                not_under: ["${PROJECT_DIR}", "~/.cache"]
                ancestors_of: "${PROJECT_DIR}"
    action: deny
"#;

    fn roots_of(
        policy: &crate::config::policy::Policy,
    ) -> (Vec<PathBuf>, Vec<PathBuf>, Vec<PathBuf>) {
        let mut not_under = Vec::new();
        let mut cmd_not_under = Vec::new();
        let mut ancestors = Vec::new();
        for rule in &policy.rules {
            for c in &rule.arguments {
                match &c.matcher {
                    Matcher::NotUnder { root, .. } => not_under.push(root.clone()),
                    Matcher::Command(clauses) => {
                        for clause in &clauses.value {
                            let p = clause.paths.as_ref().unwrap();
                            cmd_not_under.extend(p.not_under.iter().cloned());
                            ancestors.extend(p.ancestors_of.iter().cloned());
                        }
                    }
                    _ => {}
                }
            }
        }
        (not_under, cmd_not_under, ancestors)
    }

    #[test]
    fn project_paths_follow_the_roots_and_the_rest_stays() {
        let opts = LoadOptions {
            explicit: None,
            home: "/home/u".into(),
            project_dir: "/".into(),
        };
        let policy = load_str("policy.yml", POLICY, &opts).unwrap();
        let (before, _, _) = roots_of(&policy);
        assert_eq!(
            before,
            [
                PathBuf::from(crate::paths::NO_PROJECT),
                PathBuf::from("/tmp")
            ]
        );
        let moved = policy.for_project(
            Path::new("/home/u"),
            Path::new("/"),
            &[PathBuf::from("/home/u/a"), PathBuf::from("/home/u/b")],
        );
        let (not_under, cmd, anc) = roots_of(&moved);
        let p = |s: &str| PathBuf::from(s);
        assert_eq!(not_under, [p("/home/u/a"), p("/home/u/b"), p("/tmp")]);
        assert_eq!(cmd, [p("/home/u/a"), p("/home/u/b"), p("/home/u/.cache")]);
        assert_eq!(anc, [p("/home/u/a"), p("/home/u/b")]);
        assert_eq!(moved.rules.len(), policy.rules.len());
        let (none, _, anc) =
            roots_of(&policy.for_project(Path::new("/home/u"), Path::new("/"), &[]));
        assert_eq!(none[0], p(crate::paths::NO_PROJECT));
        assert_eq!(anc, [p(crate::paths::NO_PROJECT)]);
    }
}
