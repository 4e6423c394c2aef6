//! The `not_under` engine class: roots are normalised and resolved once, at compile
//! time; values are normalised per frame by [`crate::paths`].

use std::path::Path;

use crate::paths::{PathEnv, Root};

/// One `not_under` predicate: which selector it reads and which root it checks.
#[derive(Debug, Clone, Copy)]
pub(crate) struct NotUnderCheck {
    pub pred: u32,
    pub selector: u32,
    pub root: u32,
}

/// The distinct roots of a policy, deduplicated by their normal form.
#[derive(Debug, Default)]
pub(crate) struct Roots {
    pub roots: Vec<Root>,
}

impl Roots {
    pub fn intern(&mut self, root: &Path, env: &PathEnv) -> u32 {
        let root = Root::new(root, env);
        if let Some(i) = self.roots.iter().position(|r| *r == root) {
            return i as u32;
        }
        self.roots.push(root);
        (self.roots.len() - 1) as u32
    }
}
