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

use globset::{Glob, GlobBuilder};
use regex_automata::{Input, meta};
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

/// Globs judged against paths (a `command` clause's `paths:` and `redirects:`): `*` stays
/// within one component, `**` crosses them, as in .gitignore. Asked only whether any glob
/// matches, about each form of every path-like shell word, so it is the command engine's
/// inner loop: one anchored regex over globset's translations of all of them answers in
/// one walk of its lazy DFA: about 500 instructions for a 35-byte path, where a `GlobSet`
/// cost about 1.5 k a call (a `Candidate` with its basename and extension, then each
/// strategy in turn) on issue 39's path-like text, and needed an Aho-Corasick prefilter in
/// front of it (docs/performance.md, "Third pass").
#[derive(Debug)]
pub(crate) struct PathGlobs {
    /// `None`: no glob, nothing matches.
    regex: Option<meta::Regex>,
}

impl PathGlobs {
    pub fn new(globs: &[String]) -> Result<PathGlobs, GlobFailure> {
        if globs.is_empty() {
            return Ok(PathGlobs { regex: None });
        }
        let regexes = globs
            .iter()
            .enumerate()
            .map(|(i, g)| {
                GlobBuilder::new(g)
                    .literal_separator(true)
                    .build()
                    .map(|g| g.regex().to_string())
                    .map_err(|e| GlobFailure {
                        pattern: Some(i),
                        reason: format!("{g}: {e}"),
                    })
            })
            .collect::<Result<Vec<_>, _>>()?;
        // The options globset builds its own matchers with: bytes, `*` crosses newlines.
        let syntax = regex_automata::util::syntax::Config::new()
            .utf8(false)
            .dot_matches_new_line(true);
        let config = meta::Regex::config()
            .utf8_empty(false)
            .nfa_size_limit(Some(super::regex::SIZE_LIMIT))
            .hybrid_cache_capacity(super::regex::SIZE_LIMIT)
            // Only `is_match` is asked, which these never serve: not built.
            .onepass(false)
            .backtrack(false);
        let regex = meta::Regex::builder()
            .syntax(syntax)
            .configure(config)
            .build_many(&regexes)
            .map_err(|e| GlobFailure {
                pattern: e.pattern().map(|p| p.as_usize()),
                reason: e.to_string(),
            })?;
        Ok(PathGlobs { regex: Some(regex) })
    }

    /// Whether some glob matches `path`.
    #[inline]
    pub fn is_match(&self, path: &str) -> bool {
        let Some(regex) = &self.regex else {
            return false;
        };
        // globset reads every separator of the platform as `/` (a copy only when
        // there is one to turn).
        #[cfg(windows)]
        let path = match path.contains('\\') {
            true => std::borrow::Cow::Owned(path.replace('\\', "/")),
            false => std::borrow::Cow::Borrowed(path),
        };
        regex.is_match(Input::new(path.as_bytes()).anchored(regex_automata::Anchored::Yes))
    }
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

    /// Path globs agree with globset's own `GlobSet` built as the command engine built
    /// it (`literal_separator`), on texts at the edges of its strategies: `*` within a
    /// component, `**` across them, basenames, extensions, classes, braces, newlines.
    #[test]
    fn path_globs_agree_with_a_globset() {
        let globs = [
            "**/.ssh/**",
            "**/id_rsa*",
            "**/.env",
            "**/.env.*",
            "/home/u/*",
            "/home/u/**/*.pem",
            "*.key",
            "**/{credentials,config}.json",
            "/etc/[ps]hadow",
            "/dev/sd?",
            "**",
        ];
        let texts = [
            "",
            "/",
            "/home/u/.ssh",
            "/home/u/.ssh/id_rsa",
            "/home/u/.sshx/id_rsa.pubx/../.envx",
            "/home/u/.envx",
            "/home/u/.env",
            ".env",
            "a/.env.local",
            "/home/u/x",
            "/home/u/x/y",
            "/home/u/a/b/k.pem",
            "/home/u/k.pem",
            "k.key",
            "a/k.key",
            "/p/credentials.json",
            "config.json",
            "/etc/shadow",
            "/etc/passwd",
            "/etc/xhadow",
            "/dev/sda",
            "/dev/sda1",
            "line\n/.ssh/x",
            "/home/u/id_rsa\n.pub",
        ];
        for k in 0..globs.len() {
            // Each glob alone, and all but the catch-all `**` together.
            let chosen: Vec<String> = match k {
                0 => globs[..globs.len() - 1]
                    .iter()
                    .map(|g| g.to_string())
                    .collect(),
                _ => vec![globs[k].to_string()],
            };
            let ours = PathGlobs::new(&chosen).unwrap();
            let mut b = globset::GlobSetBuilder::new();
            for g in &chosen {
                b.add(GlobBuilder::new(g).literal_separator(true).build().unwrap());
            }
            let theirs = b.build().unwrap();
            for text in texts {
                assert_eq!(
                    ours.is_match(text),
                    theirs.is_match(text),
                    "{chosen:?} on {text:?}"
                );
            }
        }
        assert!(!PathGlobs::new(&[]).unwrap().is_match("/home/u/.ssh/id_rsa"));
    }

    #[test]
    fn a_bad_glob_is_named() {
        let globs = vec!["ok".to_string(), "a[".to_string()];
        let err = GlobEngine::new(&globs, PredMap::from_lists(&[vec![0], vec![1]])).unwrap_err();
        assert_eq!(err.pattern, Some(1));
    }
}
