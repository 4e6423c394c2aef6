//! The gate in front of the shell parser: whether any clause of a `command` predicate
//! could hold for a string, decided from the raw string in one pass, so that the parser
//! and the clauses run only for strings that could match (issue 23: parsing is paid for
//! command lines, not for every multi-word string of every call).
//!
//! The gate is derived from the clauses and must never say "no" where the parser and the
//! clauses would say "yes". It reads the string through the one transformation that can
//! join letters the shell joins, the removal of quotes and backslashes (`r''m`,
//! `m\cpwall`, `"mc"'pw'all`), and treats as "could be anything" what the parser cannot
//! resolve statically: a `$` or a backquote anywhere opens the gate, and an unquoted glob
//! or brace expansion opens it for the conditions they can satisfy (an unknown command
//! name (also `(`: `time (…)`), a path or redirection that could expand to a protected one).
//!
//! What each condition of a clause needs in the string (every condition of a clause must
//! be satisfiable, any clause of the predicate will do):
//! - `name`: one of the names as a word of its own (a command basename: not preceded by a
//!   letter, digit, `_`, `-` or `.`; an exact name not followed by a letter, digit, `_` or
//!   `-`); with `unknown_name`, a glob or brace character, `(`, `{}` or `alias` is enough;
//! - `flags`: a short flag's letter in a run after `-`, a long flag's `--` and first two
//!   letters, a multi-letter short flag as written; `-r`/`--recursive` also by `find`
//!   (a command run over find's tree counts as recursive);
//! - `paths`: the literal piece each pattern's matches contain (as the clause's own
//!   prefilter uses), or `~`, `%` or a glob or brace character; no gate when the clause
//!   has `ancestors_of` or the pieces occur in HOME or the project directory;
//! - `redirect`: `<` or `>`, and the redirect globs' pieces (or `~`, `%`, `..`, a glob or
//!   brace character);
//! - `input`: a downloader or decoder name; `after_download`: a downloader name;
//!   `over_find`: `find`; `subcommand`: the first word of one of them, or `xargs` (which
//!   supplies operands the line does not show); `words` adds nothing (the name gates it).
//! - a line nested about as deep as the parser reads opens every gate (what it cannot
//!   read meets every clause that admits an unknown command), and so does the name of an
//!   interpreter whose string literals the parser joins (`'mcp' + 'wall'`).

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};

use super::{CommandPred, longest_literal, tokens_of};
use crate::config::policy::CommandClause;
use crate::paths::PathEnv;
use crate::shell::{DECODERS, DOWNLOADERS};

/// Byte classes of the raw string.
const REDIRECT: u8 = 1;
const TILDE: u8 = 2;
const PERCENT: u8 = 4;
const GLOB: u8 = 8;
const BRACE: u8 = 16;
const DOTDOT: u8 = 32;
/// `$` or a backquote: the parser resolves neither statically; every gate opens.
const DYNAMIC: u8 = 64;
/// `(`: `cmd (…)` is read as one unresolved word (PowerShell's grouping), which is the
/// command name after a wrapper (`time (…)`).
const PAREN: u8 = 128;

/// Flags of [`CLASS`] beyond the byte classes (which fill the low byte).
const NEXT_BYTE: u16 = 1 << 8;
const QUOTE: u16 = 1 << 9;
const DASH: u16 = 1 << 10;

/// Each byte's classes, for the one pass of [`Gate::scan`].
static CLASS: [u16; 256] = {
    let mut t = [0u16; 256];
    t[b'$' as usize] = DYNAMIC as u16;
    t[b'`' as usize] = DYNAMIC as u16;
    t[b'<' as usize] = REDIRECT as u16;
    t[b'>' as usize] = REDIRECT as u16;
    t[b'~' as usize] = TILDE as u16;
    t[b'%' as usize] = PERCENT as u16;
    t[b'*' as usize] = GLOB as u16;
    t[b'?' as usize] = GLOB as u16;
    t[b'[' as usize] = GLOB as u16;
    t[b'(' as usize] = PAREN as u16;
    t[b'{' as usize] = NEXT_BYTE;
    t[b'.' as usize] = NEXT_BYTE;
    t[b'\'' as usize] = QUOTE;
    t[b'"' as usize] = QUOTE;
    t[b'\\' as usize] = QUOTE;
    t[b'-' as usize] = DASH;
    t
};

/// Strings longer than this are parsed without asking the gate (its source map would
/// cost more than it saves; the parser is linear and bounded).
const MAX_GATED: usize = 64 * 1024;

/// How a literal must sit in the string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Bound {
    /// Anywhere (a path piece, a flag).
    None,
    /// A word start (a name glob `prefix*`).
    Left,
    /// A whole command basename.
    Both,
}

/// One condition of a clause: holds when any of its literals or byte classes occurs.
#[derive(Debug, Default)]
struct Need {
    lits: Vec<u32>,
    /// `lits` as a bit set over the literal ids, filled in once every literal is known.
    mask: Vec<u64>,
    bytes: u8,
    /// Short-flag letters (ASCII) that may occur in a run after `-`.
    dash: [u64; 2],
}

/// A predicate's gate: `None` when some clause cannot be gated (always parse).
type PredGate = Option<Vec<Vec<Need>>>;

/// The gates of every predicate of one engine, built on first use.
#[derive(Debug)]
pub(crate) struct Gate {
    ac: Option<AhoCorasick>,
    bounds: Vec<Bound>,
    preds: Vec<PredGate>,
    /// Literals that open every gate (interpreter names), as a bit set over literal ids.
    opens: Vec<u64>,
}

/// What one string holds, computed once per string for all predicates.
#[derive(Debug, Default)]
pub(crate) struct Seen {
    lits: Vec<u64>,
    bytes: u8,
    dash: [u64; 2],
    /// The string with quotes and backslashes removed, and where each byte came from.
    squeezed: Vec<u8>,
    source: Vec<u32>,
    /// Whether the gate was bypassed (string too long).
    open: bool,
    /// Whether nothing at all was seen: no gated predicate can hold.
    empty: bool,
}

struct Builder {
    lits: Vec<(String, Bound)>,
}

impl Builder {
    fn lit(&mut self, text: &str, bound: Bound) -> Option<u32> {
        // A literal holding a quote, a backslash or a space could be split by the
        // squeeze; such a condition is not gated.
        if text.is_empty() || text.bytes().any(|b| b"'\"\\ \t\n".contains(&b)) {
            return None;
        }
        let text = text.to_ascii_lowercase();
        if let Some(i) = self
            .lits
            .iter()
            .position(|(t, b)| *t == text && *b == bound)
        {
            return Some(i as u32);
        }
        self.lits.push((text, bound));
        Some((self.lits.len() - 1) as u32)
    }

    /// A name glob's literal: exact names whole, `prefix*` at a word start, anything
    /// else by its longest plain run.
    fn name(&mut self, name: &str) -> Option<u32> {
        let is_meta = |c: char| matches!(c, '*' | '?' | '[' | ']' | '{' | '}' | '\\');
        if !name.contains(is_meta) {
            return self.lit(name, Bound::Both);
        }
        if let Some(p) = name.strip_suffix('*')
            && !p.contains(is_meta)
            && !p.contains('/')
        {
            return self.lit(p, Bound::Left);
        }
        let run = name
            .split(is_meta)
            .max_by_key(|r| r.len())
            .filter(|r| !r.is_empty())?;
        self.lit(run, Bound::None)
    }

    fn names<'a>(&mut self, need: &mut Need, names: impl IntoIterator<Item = &'a str>) -> bool {
        for n in names {
            match self.name(n) {
                Some(i) => need.lits.push(i),
                None => return false,
            }
        }
        true
    }

    /// The needs of one clause; `None` when it cannot be gated. A condition that cannot
    /// be gated adds no need; the others still gate the clause.
    fn clause(&mut self, c: &CommandClause, env: &PathEnv) -> Option<Vec<Need>> {
        let mut needs = Vec::new();
        if !c.names.is_empty() || c.unknown_name {
            let mut need = Need::default();
            if self.names(&mut need, c.names.iter().map(String::as_str)) {
                if c.unknown_name {
                    need.bytes |= GLOB | PAREN | BRACE;
                    // `find … -exec {} …` runs each found file; an alias runs what the
                    // line defined under another name.
                    need.lits.extend(self.lit("{}", Bound::None));
                    need.lits.extend(self.lit("alias", Bound::Both));
                }
                needs.push(need);
            }
        }
        if !c.subcommands.is_empty() {
            // A subcommand's first word as written, or `xargs`, whose operands are read
            // from its input (a computed operand opens the gate as a `$` does).
            let mut need = Need::default();
            let firsts = c
                .subcommands
                .iter()
                .filter_map(|s| s.first().map(String::as_str));
            if self.names(&mut need, firsts.chain(["xargs"])) {
                needs.push(need);
            }
        }
        if !c.flags.is_empty()
            && let Some(need) = self.flags(&c.flags)
        {
            needs.push(need);
        }
        if let Some(p) = &c.paths
            // `rm -rf ..` holds no piece of anything: only the other conditions gate.
            && p.ancestors_of.is_empty()
            && let Some(need) = self.pieces(&p.patterns, env, TILDE | PERCENT | GLOB | BRACE)
        {
            needs.push(need);
        }
        if !c.redirects.is_empty() {
            needs.push(Need {
                bytes: REDIRECT,
                ..Need::default()
            });
            if let Some(need) =
                self.pieces(&c.redirects, env, TILDE | PERCENT | GLOB | BRACE | DOTDOT)
            {
                needs.push(need);
            }
        }
        if c.input != 0 {
            let mut need = Need::default();
            let mut names = DOWNLOADERS.to_vec();
            if c.input & crate::shell::DECODED != 0 {
                names.extend_from_slice(DECODERS);
            }
            if self.names(&mut need, names) {
                needs.push(need);
            }
        }
        if c.after_download {
            let mut need = Need::default();
            if self.names(&mut need, DOWNLOADERS.iter().copied()) {
                needs.push(need);
            }
        }
        if c.over_find {
            let mut need = Need::default();
            if self.names(&mut need, ["find"]) {
                needs.push(need);
            }
        }
        // A clause with no condition the gate can read holds for every command.
        (!needs.is_empty()).then_some(needs)
    }

    fn flags(&mut self, flags: &[String]) -> Option<Need> {
        let mut need = Need::default();
        for f in flags {
            if let Some(long) = f.strip_prefix("--") {
                let head: String = long.chars().take(2).collect();
                need.lits.push(self.lit(&format!("--{head}"), Bound::None)?);
                if f == "--recursive" {
                    need.lits.push(self.lit("find", Bound::Both)?);
                }
            } else if let Some(short) = f.strip_prefix('-')
                && short.chars().count() == 1
            {
                let b = short.as_bytes()[0];
                if !b.is_ascii_alphanumeric() {
                    // Read from the run after `-` only for ASCII letters and digits.
                    return None;
                }
                need.dash[usize::from(b >> 6)] |= 1 << (b & 63);
                if matches!(short, "r" | "R") {
                    need.lits.push(self.lit("find", Bound::Both)?);
                }
            } else {
                need.lits.push(self.lit(f, Bound::None)?);
            }
        }
        Some(need)
    }

    /// A path or redirect condition: one piece of each glob (the longest plain run of at
    /// least three bytes, as [`super::PathCond`]'s prefilter), or one of `bytes`.
    fn pieces(&mut self, globs: &[String], env: &PathEnv, bytes: u8) -> Option<Need> {
        let mut need = Need {
            bytes,
            ..Need::default()
        };
        let mut pieces = Vec::new();
        for t in tokens_of(globs, env) {
            pieces.push(longest_literal(&t).filter(|l| l.len() >= 3)?);
        }
        let home = env.home().to_ascii_lowercase();
        let project = env.project_dir().to_ascii_lowercase();
        let cwd = env.cwd().to_ascii_lowercase();
        for p in &pieces {
            // Normalising a relative path or `~` adds these directories: a piece in them
            // proves nothing.
            let lower = p.to_ascii_lowercase();
            if home.contains(&lower) || project.contains(&lower) || cwd.contains(&lower) {
                return None;
            }
            need.lits.push(self.lit(p, Bound::None)?);
        }
        Some(need)
    }
}

impl Gate {
    pub fn build(preds: &[CommandPred], env: &PathEnv) -> Gate {
        let mut b = Builder { lits: Vec::new() };
        let preds: Vec<PredGate> = preds
            .iter()
            .map(|p| {
                p.clauses
                    .specs()
                    .iter()
                    .map(|c| b.clause(c, env))
                    .collect::<Option<Vec<_>>>()
            })
            .collect();
        // Interpreter code joins string literals the squeeze cannot (`'mcp' + 'wall'`,
        // `"/.p" . "gpass"`): a string that names an interpreter is always parsed.
        let mut interpreters = Vec::new();
        for name in crate::shell::CODE_LITERAL_RUNNERS {
            // As a command name of its own (`python3`, `python3.12` by its start), not
            // inside a word (`node_modules`).
            let bound = match *name {
                "python" | "pypy" => Bound::Left,
                _ => Bound::Both,
            };
            if let Some(i) = b.lit(name, bound) {
                interpreters.push(i);
            }
        }
        let words = b.lits.len().div_ceil(64);
        let mut opens = vec![0u64; words];
        for i in interpreters {
            opens[i as usize / 64] |= 1 << (i % 64);
        }
        let mut preds = preds;
        for need in preds.iter_mut().flatten().flatten().flatten() {
            need.mask = vec![0; words];
            for &i in &need.lits {
                need.mask[i as usize / 64] |= 1 << (i % 64);
            }
        }
        // The default (contiguous NFA) kind: a DFA of these ~340 literals searched 1.1 k
        // instructions per call less but held 750 KB against 67 KB, +0.7 MiB of peak RSS.
        let ac = AhoCorasickBuilder::new()
            .ascii_case_insensitive(true)
            .match_kind(MatchKind::Standard)
            .build(b.lits.iter().map(|(t, _)| t.as_str()))
            .ok();
        let preds = if ac.is_some() || b.lits.is_empty() {
            preds
        } else {
            // The automaton failed to build: no gate at all.
            preds.iter().map(|_| None).collect()
        };
        Gate {
            ac,
            bounds: b.lits.iter().map(|(_, bound)| *bound).collect(),
            preds,
            opens,
        }
    }

    /// Reads `text` into `seen`: which literals and byte classes it holds.
    pub fn scan(&self, text: &str, seen: &mut Seen) {
        let raw = text.as_bytes();
        seen.lits.clear();
        seen.lits.resize(self.bounds.len().div_ceil(64), 0);
        seen.bytes = 0;
        seen.dash = [0; 2];
        seen.open = raw.len() > MAX_GATED;
        seen.empty = false;
        if seen.open {
            return;
        }
        // One table lookup per byte; the rare bytes whose class depends on the next one
        // (`{`, `.`) or that need a second look (quotes, `-`) are only flagged here.
        let mut classes = 0u16;
        for &c in raw {
            classes |= CLASS[usize::from(c)];
        }
        seen.bytes = classes as u8;
        if classes & (PAREN as u16 | NEXT_BYTE) != 0 && nests_past_parser(raw) {
            // The parser will stop short of the innermost levels, and a line it cannot
            // read to its end meets every clause that admits an unknown command.
            seen.open = true;
            return;
        }
        if classes & NEXT_BYTE != 0 {
            // A brace expansion needs a word character after `{` (bash: `{ a,b}` and `{}`
            // do not expand).
            if memchr::memchr_iter(b'{', raw).any(|i| {
                raw.get(i + 1)
                    .is_some_and(|n| !n.is_ascii_whitespace() && *n != b'}')
            }) {
                seen.bytes |= BRACE;
            }
            if memchr::memmem::find(raw, b"..").is_some() {
                seen.bytes |= DOTDOT;
            }
        }
        if seen.bytes & DYNAMIC != 0 {
            return;
        }
        let squeeze = classes & QUOTE != 0;
        seen.squeezed.clear();
        seen.source.clear();
        let view: &[u8] = if squeeze {
            let mut i = 0;
            while i < raw.len() {
                match raw[i] {
                    b'\'' | b'"' => {}
                    b'\\' => {
                        // A line continuation joins the lines.
                        if raw.get(i + 1) == Some(&b'\n') {
                            i += 1;
                        }
                    }
                    c => {
                        seen.squeezed.push(c);
                        seen.source.push(i as u32);
                    }
                }
                i += 1;
            }
            &seen.squeezed
        } else {
            raw
        };
        if classes & DASH != 0 {
            let mut in_dash = false;
            for &c in view {
                if c == b'-' {
                    in_dash = true;
                } else if in_dash && c.is_ascii_alphanumeric() {
                    seen.dash[usize::from(c >> 6)] |= 1 << (c & 63);
                } else {
                    in_dash = false;
                }
            }
        }
        let Some(ac) = &self.ac else {
            return;
        };
        let src = |k: usize| -> usize { if squeeze { seen.source[k] as usize } else { k } };
        let mut lits = std::mem::take(&mut seen.lits);
        for m in ac.find_overlapping_iter(view) {
            let id = m.pattern().as_usize();
            if lits[id / 64] & (1 << (id % 64)) != 0 {
                continue;
            }
            let bound = self.bounds[id];
            if bound != Bound::None {
                let first = src(m.start());
                let left = first == 0 || !is_name_byte(raw[first - 1], true);
                if !left {
                    continue;
                }
                if bound == Bound::Both {
                    let last = src(m.end() - 1);
                    if raw.get(last + 1).is_some_and(|&c| is_name_byte(c, false)) {
                        continue;
                    }
                }
            }
            lits[id / 64] |= 1 << (id % 64);
        }
        seen.empty = seen.bytes == 0 && seen.dash == [0; 2] && lits.iter().all(|&w| w == 0);
        seen.open = lits.iter().zip(&self.opens).any(|(a, b)| a & b != 0);
        seen.lits = lits;
    }

    /// Whether predicate `index` could hold for the string last read by [`Gate::scan`].
    pub fn may_hold(&self, index: usize, seen: &Seen) -> bool {
        if seen.open || seen.bytes & DYNAMIC != 0 {
            return true;
        }
        let Some(Some(clauses)) = self.preds.get(index) else {
            return true;
        };
        // Every need of a gated clause asks for something seen.
        if seen.empty {
            return false;
        }
        clauses.iter().any(|needs| {
            needs.iter().all(|n| {
                n.bytes & seen.bytes != 0
                    || n.dash[0] & seen.dash[0] != 0
                    || n.dash[1] & seen.dash[1] != 0
                    || n.mask.iter().zip(&seen.lits).any(|(a, b)| a & b != 0)
            })
        })
    }
}

/// Whether `(`, `{` and backquotes nest, anywhere in `raw`, about as deep as the parser
/// reads ([`crate::shell::MAX_DEPTH`]); quotes are not minded, so this errs towards yes.
fn nests_past_parser(raw: &[u8]) -> bool {
    let near = usize::from(crate::shell::MAX_DEPTH) - 4;
    let (mut depth, mut backquoted) = (0usize, false);
    for &c in raw {
        match c {
            b'(' | b'{' => depth += 1,
            b')' | b'}' => depth = depth.saturating_sub(1),
            b'`' => backquoted = !backquoted,
            _ => continue,
        }
        if depth + usize::from(backquoted) >= near {
            return true;
        }
    }
    false
}

/// A byte that continues a word around a command name: before it, a name is not a
/// basename of its own (`xrm`, `x-rm`, `x.rm`); after it, the word goes on (`rmdir`,
/// `rm-x`). `.` and `@` may follow (`rm.exe`, `mcpwall@1`).
fn is_name_byte(c: u8, before: bool) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'-' || (before && c == b'.')
}

#[cfg(test)]
mod tests;
