//! The run-time matcher engines of a [`super::Program`], one per engine class (STYLE
//! house rule 2): the multi-pattern regex, the glob automaton, the `response_contains`
//! literals, `not_under` roots and the secret detector. The compiler (`compile/`) sorts
//! a policy's matchers into these classes and builds them from already-validated
//! patterns; the program only searches them.
//!
//! Every engine maps its pattern index to the predicates the pattern feeds ([`PredMap`]),
//! and [`Needs`] says which classes a selector or an outbound rule needs scanned.

pub(crate) mod command;
pub(crate) mod glob;
pub(crate) mod literal;
pub(crate) mod path;
pub(crate) mod regex;
pub(crate) mod secret;

/// Which engine classes a selector (or an outbound rule) needs, as bits.
pub(crate) type Needs = u8;
pub(crate) const REGEX: Needs = 1;
pub(crate) const GLOB: Needs = 2;
pub(crate) const NOT_UNDER: Needs = 4;
pub(crate) const SECRETS: Needs = 8;
pub(crate) const LITERAL: Needs = 16;
pub(crate) const COMMAND: Needs = 32;

/// Pattern index → predicates, stored flat (compressed rows).
#[derive(Debug, Clone, Default)]
pub(crate) struct PredMap {
    starts: Box<[u32]>,
    preds: Box<[u32]>,
}

impl PredMap {
    pub fn from_lists(lists: &[Vec<u32>]) -> PredMap {
        let mut starts = Vec::with_capacity(lists.len() + 1);
        let mut preds = Vec::new();
        starts.push(0);
        for list in lists {
            preds.extend_from_slice(list);
            starts.push(preds.len() as u32);
        }
        PredMap {
            starts: starts.into(),
            preds: preds.into(),
        }
    }

    #[inline]
    pub fn get(&self, i: usize) -> &[u32] {
        match (self.starts.get(i), self.starts.get(i + 1)) {
            (Some(&a), Some(&b)) => &self.preds[a as usize..b as usize],
            _ => &[],
        }
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.starts.len().saturating_sub(1)
    }
}
