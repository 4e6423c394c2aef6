//! The `glob` engine class: every glob of one class (tool names, method names, server
//! names, argument `pattern`s) in one `GlobSet`, matched once per value.

use globset::{Candidate, Glob, GlobSet, GlobSetBuilder};

use super::PredMap;

/// Why a glob set failed to build: the glob to blame and why.
#[derive(Debug)]
pub(crate) struct GlobFailure {
    pub pattern: Option<usize>,
    pub reason: String,
}

#[derive(Debug)]
pub(crate) struct GlobEngine {
    set: GlobSet,
    pub map: PredMap,
}

impl GlobEngine {
    pub fn new(globs: &[String], map: PredMap) -> Result<GlobEngine, GlobFailure> {
        let mut builder = GlobSetBuilder::new();
        for (i, g) in globs.iter().enumerate() {
            let glob = Glob::new(g).map_err(|e| GlobFailure {
                pattern: Some(i),
                reason: e.to_string(),
            })?;
            builder.add(glob);
        }
        let set = builder.build().map_err(|e| GlobFailure {
            pattern: e.glob().and_then(|g| globs.iter().position(|x| x == g)),
            reason: e.to_string(),
        })?;
        Ok(GlobEngine { set, map })
    }

    /// Call `f` with the predicates of every glob that matches `text`. `hits` is
    /// scratch space, reused so matching does not allocate.
    #[inline]
    pub fn for_each_match(&self, text: &str, hits: &mut Vec<usize>, mut f: impl FnMut(&[u32])) {
        self.set
            .matches_candidate_into(&Candidate::from_bytes(text.as_bytes()), hits);
        for &i in hits.iter() {
            f(self.map.get(i));
        }
    }
}
