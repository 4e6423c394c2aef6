//! The `glob` engine class: every glob of one class (tool names, method names, server
//! names, argument `pattern`s) matched together, once per value.
//!
//! globset defines what a glob means by the regex it translates the glob to
//! ([`Glob::regex`]); its `GlobMatcher` runs exactly that regex. Here those regexes go
//! into one anchored lazy DFA of the regex engine class, instead of a `GlobSet`, whose
//! strategies cost a `Candidate` (basename and extension found with a reverse search)
//! and then a general overlapping search per value: on the default pack's tool-name
//! alternation that was a fifth of evaluating a call.

use std::sync::OnceLock;

use globset::Glob;
use regex_syntax::ParserBuilder;

use super::PredMap;
use super::regex::{RegexEngine, SetScratch};

/// Why a glob set failed to build: the glob to blame and why.
#[derive(Debug)]
pub(crate) struct GlobFailure {
    pub pattern: Option<usize>,
    pub reason: String,
}

#[derive(Debug)]
pub(crate) struct GlobEngine {
    engine: OnceLock<RegexEngine>,
    /// The globs and their predicates, until a deferred engine is built.
    globs: Box<[String]>,
    map: PredMap,
}

impl GlobEngine {
    /// Built now; fails on a glob that does not compile.
    pub fn new(globs: &[String], map: PredMap) -> Result<GlobEngine, GlobFailure> {
        Ok(GlobEngine {
            engine: OnceLock::from(build(globs, map)?),
            globs: Box::default(),
            map: PredMap::default(),
        })
    }

    /// Built by the first match (or [`GlobEngine::warm_up`]). Only for globs known to
    /// compile — tool and server names of the embedded packs, which the test suite
    /// compiles — since a failure then could only be reported by a panic. The handshake
    /// names no tool, so it does not wait for them: the default pack's tool globs were
    /// most of its compilation.
    pub fn deferred(globs: &[String], map: PredMap) -> GlobEngine {
        GlobEngine {
            engine: OnceLock::new(),
            globs: globs.into(),
            map,
        }
    }

    fn engine(&self) -> &RegexEngine {
        self.engine.get_or_init(|| {
            build(&self.globs, self.map.clone())
                .unwrap_or_else(|e| panic!("a built-in policy glob does not compile: {}", e.reason))
        })
    }

    /// Build a deferred engine now (from a background thread, say).
    pub fn warm_up(&self) {
        self.engine();
    }

    /// Search state for this engine; one per thread that matches.
    pub fn scratch(&self) -> SetScratch {
        match self.engine.get() {
            Some(engine) => engine.scratch(),
            None => SetScratch::for_patterns(self.map.len()),
        }
    }

    /// Call `f` with the predicates of every glob that matches `text`.
    #[inline]
    pub fn for_each_match(&self, scratch: &mut SetScratch, text: &str, f: impl FnMut(&[u32])) {
        self.engine().for_each_match(scratch, text, f);
    }
}

/// Every glob translated the way globset defines it, in one anchored automaton.
fn build(globs: &[String], map: PredMap) -> Result<RegexEngine, GlobFailure> {
    let hirs = globs
        .iter()
        .enumerate()
        .map(|(i, g)| {
            let failure = |reason: String| GlobFailure {
                pattern: Some(i),
                reason,
            };
            let glob = Glob::new(g).map_err(|e| failure(e.to_string()))?;
            // The syntax globset compiles its regexes with: bytes, and `*` crosses
            // newlines.
            ParserBuilder::new()
                .utf8(false)
                .dot_matches_new_line(true)
                .build()
                .parse(glob.regex())
                .map_err(|e| failure(e.to_string()))
        })
        .collect::<Result<Vec<_>, _>>()?;
    RegexEngine::anchored_from_hirs(&hirs, map).map_err(|e| GlobFailure {
        pattern: e.pattern,
        reason: e.reason,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The engine agrees with globset's own matcher for each glob, on texts chosen to
    /// sit at the edges of the strategies globset would have picked (literal, basename,
    /// extension, prefix, suffix, alternation, classes, newlines, non-UTF-8 escapes).
    #[test]
    fn agrees_with_globset_matchers() {
        let globs = [
            "read_file",
            "*_file",
            "**/.env*",
            "**/.git-credentials",
            "/home/u/**",
            "*.pem",
            "{*write*,*Write*,str_replace*}",
            "[a-c]?x",
            "tools/*",
            "**",
            "caf\u{e9}*",
        ];
        let texts = [
            "",
            "read_file",
            "read_files",
            "x_file",
            "_file",
            "a/b_file",
            ".env",
            "/p/.env.local",
            "p/.envrc",
            "env",
            "/home/u/.git-credentials",
            ".git-credentials",
            "/home/u",
            "/home/u/",
            "/home/u/a/b",
            "/home/user/x",
            "k.pem",
            "a/k.pem",
            "k.pem.bak",
            "write_file",
            "fs_Write",
            "str_replace_editor",
            "rewrite",
            "abx",
            "dzx",
            "tools/call",
            "tools/a/b",
            "line\nbreak_file",
            "caf\u{e9} noir",
            "cafe",
        ];
        let lists: Vec<Vec<u32>> = (0..globs.len() as u32).map(|i| vec![i]).collect();
        let globs_owned: Vec<String> = globs.iter().map(|g| g.to_string()).collect();
        let engine = GlobEngine::new(&globs_owned, PredMap::from_lists(&lists)).unwrap();
        let mut scratch = engine.scratch();
        for text in texts {
            let mut got = Vec::new();
            engine.for_each_match(&mut scratch, text, |p| got.extend_from_slice(p));
            got.sort_unstable();
            let want: Vec<u32> = globs
                .iter()
                .enumerate()
                .filter(|(_, g)| Glob::new(g).unwrap().compile_matcher().is_match(text))
                .map(|(i, _)| i as u32)
                .collect();
            assert_eq!(got, want, "{text:?}");
        }
    }

    #[test]
    fn a_bad_glob_is_named() {
        let globs = vec!["ok".to_string(), "a[".to_string()];
        let err = GlobEngine::new(&globs, PredMap::from_lists(&[vec![0], vec![1]])).unwrap_err();
        assert_eq!(err.pattern, Some(1));
    }
}
