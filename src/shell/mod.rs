//! What a shell will run: a command line parsed into simple commands (POSIX `sh` and
//! the bash syntax agents write), for the `command` matcher (`program/engine/command.rs`).
//!
//! Hand-written rather than a crate: `brush-parser` 0.4 parsed every evasion of issue 23
//! but cost about 64 µs for a 92-byte command (34 µs to tokenize and parse, 30 µs to
//! parse its words), three times the 20 µs budget for judging one, and brings `insta`,
//! `cached`, `bon`, `peg` and `tracing` into the binary. This parser is lenient (it never
//! fails; what it cannot read it keeps as words), bounded (nesting and recursion depth,
//! brace expansions) and writes into a reusable [`Parsed`] arena, so judging the same
//! shape of command again does not allocate.
//!
//! What it exposes, for every simple command in every list, pipeline, subshell, group,
//! `if`/`while`/`for`/`case` body, function body, command substitution (`$(…)`, `` `…` ``)
//! and process substitution (`<(…)`, `>(…)`):
//! - its words after quote removal, escapes and `$'…'` decoding ([`Word`]); unquoted
//!   glob characters and brace expansions are kept as a pattern ([`Word::pattern`]);
//!   `$HOME`/`${HOME…}` become `${HOME}` and `$PWD` becomes `.`, so the path normaliser
//!   resolves them; other expansions make the word [`DYNAMIC`];
//! - the command name after wrappers (`env`, `sudo`, `command`, `exec`, `nice`, `nohup`,
//!   `timeout`, `xargs`, `npx`, …); `sh -c`/`bash -c`/`eval`/`env -S` code and the code a
//!   shell reads from a here-document or here-string are parsed recursively; `find -exec`
//!   and `xargs` (reading from `find`) run their command over `find`'s start paths;
//! - redirections and their targets;
//! - what feeds each command: downloaded content (`curl`, `wget`, …) and decoded content
//!   (`base64 -d`, `xxd -r`, `rev`, …), through pipes, `<` redirections from process
//!   substitutions and substitutions in its arguments ([`Command::input`]).

mod parse;
mod resolve;

pub(crate) use parse::parse_into;
pub(crate) use resolve::{CODE_LITERAL_RUNNERS, DECODERS, DOWNLOADERS};

/// A word had an unquoted `*`, `?` or `[`: it is a glob the shell expands.
pub const GLOB: u8 = 1;
/// A word had an unquoted brace expansion (`{a,b}`, `{1..3}`).
pub const BRACE: u8 = 2;
/// A word holds an expansion the parser cannot resolve (a variable, a command or
/// arithmetic substitution).
pub const DYNAMIC: u8 = 4;
/// A word is an assignment `NAME=value` before the command name.
pub const ASSIGN: u8 = 8;
/// A word's pattern holds a computed fragment ([`ANY`] or [`ANY_HIDDEN`]): it is matched
/// as a glob, the fragment standing for any text.
pub const COMPUTED: u8 = 16;

/// In a word's pattern, a fragment the shell computes from outside the command line (a
/// variable the line never sets, `$1`, a command substitution's output): any text within
/// one path component. As a whole component it stands for "some entry", as a bare `*`
/// does, so `cat "$f"` names no particular protected file; inside a component
/// (`~/.ss${x}h`, `~/${d}wall`) it reads any characters, dots included.
pub const ANY: char = '\u{E000}';
/// In a word's pattern, a fragment computed in a way that hides what it is (a variable
/// set by `read`, `printf -v`, an array, a string operation; a substitution whose output
/// is decoded): any text, anywhere, so `cat $p` meets every protected path.
pub const ANY_HIDDEN: char = '\u{E001}';

/// Content that came from the network (`curl`, `wget`, …).
pub const DOWNLOADED: u8 = 1;
/// Content that was decoded or transformed to hide what it is (`base64 -d`, `xxd -r`,
/// `rev`, `tr`, `printf '\x..'`).
pub const DECODED: u8 = 2;

/// Nesting limit: deeper substitutions, subshells and `sh -c` levels are not parsed, and
/// the command line is marked [`Parsed::too_deep`].
pub(crate) const MAX_DEPTH: u8 = 24;

/// One word after quote removal.
#[derive(Debug, Clone, Copy, Default)]
pub struct Word {
    /// The literal text (quotes removed, escapes applied), in [`Parsed::text`].
    lit: (u32, u32),
    /// The glob pattern form (quoted metacharacters escaped as `[*]`), when
    /// [`GLOB`] or [`BRACE`] is set.
    pat: (u32, u32),
    pub flags: u8,
    /// What the substitutions inside the word produce ([`DOWNLOADED`], [`DECODED`]).
    pub feed: u8,
}

/// Redirection kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RedirectKind {
    /// `<`, `<>` (reads from the target).
    Input,
    /// `>`, `>>`, `>|`, `&>`, `>&` to a file.
    Output,
    /// `<<`, `<<<` (the target is the text itself).
    Here,
    /// `2>&1`, `<&3` (the target is a descriptor).
    Duplicate,
}

/// One redirection of a command.
#[derive(Debug, Clone, Copy)]
pub struct Redirect {
    pub kind: RedirectKind,
    /// Index of the target word.
    pub target: u32,
}

/// One simple command as it will run.
#[derive(Debug, Clone, Copy, Default)]
pub struct Command {
    /// All words, wrappers included: a range of [`Parsed::argv`].
    argv: (u32, u32),
    /// Where the command itself starts within `argv` (after assignments and wrappers);
    /// equal to the end when there is no command (only assignments or redirections).
    name_at: u32,
    redirects: (u32, u32),
    /// The command name could not be resolved (a variable, a substitution, a glob).
    pub name_unknown: bool,
    /// What the command reads as input: [`DOWNLOADED`], [`DECODED`], through stdin (a
    /// pipe or a redirection) or through the substitutions among its arguments.
    pub input: u8,
    /// A download ran earlier in the same command line.
    pub after_download: bool,
    /// Run by `find -exec` or by `xargs` over `find`'s output: it acts on whole trees.
    pub fans_out: bool,
    /// Nesting depth: 0 at the top, +1 inside each substitution or `sh -c`.
    pub depth: u8,
}

/// The arena one command line is parsed into; reused between parses.
#[derive(Debug, Default)]
pub struct Parsed {
    text: String,
    words: Vec<Word>,
    argv: Vec<u32>,
    redirects: Vec<Redirect>,
    commands: Vec<Command>,
    /// Word indices of the simple command being read, per nesting level.
    stack: Vec<u32>,
    /// Spare strings for the code of `sh -c`, backquotes and here-documents.
    pool: Vec<String>,
    /// Here-document bodies the lexer jumps over: `(first byte, resume at)`.
    skips: Vec<(u32, u32)>,
    /// A download command was seen earlier in this command line.
    seen_download: bool,
    /// Some part was nested deeper than [`MAX_DEPTH`] and was not parsed.
    pub too_deep: bool,
    /// Budget of words, so a pathological input stays linear.
    budget: u32,
    /// Counts the parses into this arena: what a caller remembers about the words of
    /// one parse ([`Parsed::generation`]) is stale once it changes.
    generation: u64,
    /// Variables the line assigns, in order: what `$NAME` may expand to ([`Value`]).
    vars: Vec<(String, Value)>,
    /// Names the line defines as aliases: a command by that name runs something else.
    aliases: Vec<String>,
    /// More variables than [`MAX_VARS`] were assigned: an unrecorded one is any text.
    vars_overflow: bool,
    /// More aliases than [`MAX_ALIASES`] were defined: any name may be one.
    aliases_overflow: bool,
}

/// What a variable assigned in the command line may hold: the words assigned to it (its
/// literal and pattern forms and their flags); more than one for a loop variable or a
/// variable assigned twice.
#[derive(Debug, Clone, Default)]
pub(crate) struct Value {
    alts: Vec<(String, String, u8)>,
}

impl Parsed {
    /// Every simple command, in the order the parser finished them.
    pub fn commands(&self) -> &[Command] {
        &self.commands
    }

    /// The literal text of a word.
    pub fn lit(&self, w: &Word) -> &str {
        self.text
            .get(w.lit.0 as usize..w.lit.1 as usize)
            .unwrap_or("")
    }

    /// The glob pattern of a word that has [`GLOB`] or [`BRACE`] set.
    pub fn pattern(&self, w: &Word) -> &str {
        self.text
            .get(w.pat.0 as usize..w.pat.1 as usize)
            .unwrap_or("")
    }

    pub fn word(&self, i: u32) -> &Word {
        &self.words[i as usize]
    }

    /// Which parse the arena holds: a different number after every parse into it.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The word indices ([`Parsed::word`]) of the arguments after the command name.
    pub fn arg_ids(&self, c: &Command) -> impl Iterator<Item = u32> + '_ {
        let start = (c.name_at + 1).min(c.argv.1);
        self.argv[start as usize..c.argv.1 as usize].iter().copied()
    }

    /// All words of a command, wrappers and assignments included.
    pub fn all_words(&self, c: &Command) -> impl Iterator<Item = &Word> + '_ {
        self.argv[c.argv.0 as usize..c.argv.1 as usize]
            .iter()
            .map(|&i| &self.words[i as usize])
    }

    /// The command name's word, if there is one.
    pub fn name(&self, c: &Command) -> Option<&Word> {
        (c.name_at < c.argv.1).then(|| &self.words[self.argv[c.name_at as usize] as usize])
    }

    /// The command name as it will be looked up: the basename of its literal text.
    pub fn name_text(&self, c: &Command) -> &str {
        match self.name(c) {
            Some(w) => command_basename(self.lit(w)),
            None => "",
        }
    }

    /// The arguments after the command name.
    pub fn args(&self, c: &Command) -> impl Iterator<Item = &Word> + '_ {
        let start = (c.name_at + 1).min(c.argv.1);
        self.argv[start as usize..c.argv.1 as usize]
            .iter()
            .map(|&i| &self.words[i as usize])
    }

    pub fn redirects(&self, c: &Command) -> &[Redirect] {
        &self.redirects[c.redirects.0 as usize..c.redirects.1 as usize]
    }

    /// Why the command line could not be read to its end, if it could not: a parser
    /// limit was reached, and what lies past it is unknown. An unreadable line meets
    /// every clause that admits an unknown command (ARCHITECTURE decision 15).
    pub fn unreadable(&self) -> Option<&'static str> {
        if self.too_deep {
            Some("nested deeper than 24 levels")
        } else if self.budget == 0 {
            Some("more words than the parser reads")
        } else {
            None
        }
    }

    fn clear(&mut self) {
        // The arena lives as long as its scratch (a pump's, a session's): after one huge
        // value it gives the memory back rather than hold it for every later one.
        if self.words.capacity() > RETAINED_WORDS {
            self.words = Vec::new();
            self.argv = Vec::new();
        }
        if self.text.capacity() > RETAINED_WORDS * 16 {
            self.text = String::new();
        }
        self.text.clear();
        self.words.clear();
        self.argv.clear();
        self.redirects.clear();
        self.commands.clear();
        self.stack.clear();
        self.skips.clear();
        self.seen_download = false;
        self.too_deep = false;
        self.budget = 100_000;
        self.generation = self.generation.wrapping_add(1);
        self.vars.clear();
        self.aliases.clear();
        self.vars_overflow = false;
        self.aliases_overflow = false;
    }

    /// A short description of what was understood, for `check` and error messages:
    /// one line per command, `name arg arg < target` with flags.
    pub fn describe(&self) -> String {
        use std::fmt::Write;
        let mut out = String::new();
        for c in &self.commands {
            if !out.is_empty() {
                out.push_str("; ");
            }
            if c.name_unknown {
                out.push_str("<unknown> ");
            }
            let mut first = true;
            for (i, w) in self.all_words(c).enumerate() {
                if (i as u32) < c.name_at - c.argv.0 {
                    continue;
                }
                if !first {
                    out.push(' ');
                }
                first = false;
                let lit = self.lit(w);
                if w.flags & (GLOB | BRACE) != 0 {
                    let shown = self.pattern(w).replace([ANY, ANY_HIDDEN], "*");
                    let _ = write!(out, "{shown}");
                } else if lit.is_empty() || lit.contains([' ', '\t', '\n']) {
                    let _ = write!(out, "{lit:?}");
                } else {
                    out.push_str(lit);
                }
            }
            for r in self.redirects(c) {
                let op = match r.kind {
                    RedirectKind::Input => "<",
                    RedirectKind::Output => ">",
                    RedirectKind::Here => "<<",
                    RedirectKind::Duplicate => ">&",
                };
                let _ = write!(out, " {op} {}", self.lit(self.word(r.target)));
            }
            let mut notes = Vec::new();
            if c.input & DOWNLOADED != 0 {
                notes.push("reads downloaded content");
            }
            if c.input & DECODED != 0 {
                notes.push("reads decoded content");
            }
            if c.fans_out {
                notes.push("over a find tree");
            }
            if c.after_download {
                notes.push("after a download");
            }
            if !notes.is_empty() {
                let _ = write!(out, " [{}]", notes.join(", "));
            }
        }
        if let Some(why) = self.unreadable() {
            if !out.is_empty() {
                out.push(' ');
            }
            let _ = write!(out, "[not fully read: {why}]");
        }
        out
    }
}

/// The name under which `set -- …` records the positional parameters (`$1`, `$@`).
pub(crate) const POSITIONAL: &str = "@";

/// Words the arena keeps room for between parses.
const RETAINED_WORDS: usize = 1 << 16;

/// The word budget of a value of `len` bytes: more than such a value can hold (a word
/// takes at least two bytes) up to 4 MiB, so ordinary text is always read to its end;
/// at most 2 M words (some 60 MB of arena), past which a value is unreadable.
pub(crate) fn word_budget(len: usize) -> u32 {
    (len / 2 + 1).clamp(100_000, 2_000_000) as u32
}

/// More values than this for one variable and it stands for any text.
const MAX_VALUES: usize = 16;
/// Variables followed per line: looking one up is a scan, so the bound keeps a line of
/// many assignments linear.
const MAX_VARS: usize = 256;
/// Aliases recorded per line, for the same reason.
const MAX_ALIASES: usize = 64;

impl Parsed {
    /// Record that `name` may hold the word `w` (its literal text and pattern).
    pub(crate) fn assign_word(&mut self, name: &str, w: &Word, skip: usize) {
        let lit = self.lit(w).get(skip..).unwrap_or("").to_string();
        let pat = if w.flags & (GLOB | BRACE | COMPUTED) != 0 {
            self.pattern(w).get(skip..).unwrap_or("").to_string()
        } else {
            let mut pat = String::with_capacity(lit.len());
            for c in lit.chars() {
                if matches!(c, '*' | '?' | '[' | ']' | '{' | '}' | ',') {
                    pat.push('[');
                    pat.push(c);
                    pat.push(']');
                } else {
                    pat.push(c);
                }
            }
            pat
        };
        let flags = w.flags & (GLOB | BRACE | COMPUTED | DYNAMIC);
        self.assign(name, lit, pat, flags);
    }

    /// Record that `name` holds something the parser does not follow (`read`,
    /// `printf -v`, `+=`): any text.
    pub(crate) fn assign_hidden(&mut self, name: &str) {
        self.assign(
            name,
            format!("${name}"),
            ANY_HIDDEN.to_string(),
            COMPUTED | DYNAMIC,
        );
    }

    /// Record that `name` holds a value from outside the line (`read` from a file).
    pub(crate) fn assign_outside(&mut self, name: &str) {
        self.assign(
            name,
            format!("${name}"),
            ANY.to_string(),
            COMPUTED | DYNAMIC,
        );
    }

    fn assign(&mut self, name: &str, lit: String, pat: String, flags: u8) {
        let i = match self.vars.iter().position(|(n, _)| n == name) {
            Some(i) => i,
            None if self.vars.len() >= MAX_VARS => {
                // Past the bound the line's variables are no longer followed, and every
                // variable it did not record is any text (a line cannot hide one
                // assignment behind a thousand others).
                self.vars_overflow = true;
                return;
            }
            None => {
                self.vars.push((name.to_string(), Value::default()));
                self.vars.len() - 1
            }
        };
        let v = &mut self.vars[i].1;
        if v.alts.iter().any(|(_, p, _)| *p == pat) {
            return;
        }
        if v.alts.len() >= MAX_VALUES {
            v.alts.clear();
            v.alts
                .push((lit, ANY_HIDDEN.to_string(), COMPUTED | DYNAMIC));
            return;
        }
        v.alts.push((lit, pat, flags));
    }

    /// Append what `$name` expands to, if the line assigns it: one value as itself, several
    /// as a brace expansion of them. `false` when the line does not assign it.
    pub(crate) fn splice(
        &self,
        name: &str,
        lit: &mut String,
        pat: &mut String,
        flags: &mut u8,
    ) -> bool {
        let Some((_, v)) = self.vars.iter().find(|(n, _)| n == name) else {
            if self.vars_overflow {
                lit.push('$');
                lit.push_str(name);
                pat.push(ANY_HIDDEN);
                *flags |= COMPUTED | DYNAMIC;
                return true;
            }
            return false;
        };
        match v.alts.as_slice() {
            [] => return false,
            [(l, p, f)] => {
                lit.push_str(l);
                pat.push_str(p);
                *flags |= f;
            }
            alts => {
                lit.push_str(&alts[0].0);
                pat.push('{');
                for (i, (_, p, f)) in alts.iter().enumerate() {
                    if i > 0 {
                        pat.push(',');
                    }
                    pat.push_str(p);
                    *flags |= f;
                }
                pat.push('}');
                *flags |= BRACE;
            }
        }
        true
    }

    /// The value of `name` when the line assigns it exactly one literal value.
    pub(crate) fn literal_value(&self, name: &str) -> Option<&str> {
        match self
            .vars
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.alts.as_slice())
        {
            Some([(lit, _, 0)]) => Some(lit.as_str()),
            _ => None,
        }
    }

    /// Record an alias: a command by this name runs what the line cannot see.
    pub(crate) fn add_alias(&mut self, name: &str) {
        if self.aliases.len() < MAX_ALIASES {
            self.aliases.push(name.to_string());
        } else {
            self.aliases_overflow = true;
        }
    }

    /// Whether `name` is an alias the line defined (past the bound, every name may be).
    pub(crate) fn is_alias(&self, name: &str) -> bool {
        self.aliases_overflow || self.aliases.iter().any(|a| a == name)
    }
}

/// `/usr/bin/rm` → `rm`, `C:\bin\curl.exe` → `curl`, `mcpwall@latest` → `mcpwall`.
pub fn command_basename(name: &str) -> &str {
    let base = name.rsplit(['/', '\\']).next().unwrap_or(name);
    let base = base
        .strip_suffix(".exe")
        .or_else(|| base.strip_suffix(".EXE"))
        .unwrap_or(base);
    // `npx pkg@version`: the package name without its version (a scope's `@` leads).
    match base.get(1..).and_then(|rest| rest.find('@')) {
        Some(i) => &base[..i + 1],
        None => base,
    }
}

/// Whether a string needs the parser at all: a single plain word (a file name, an
/// identifier) runs as a command with no arguments, which no shell rule is about.
pub fn worth_parsing(s: &str) -> bool {
    s.bytes().any(|b| SEPARATES[usize::from(b)])
}

/// The bytes that make a string more than one plain word for the shell.
static SEPARATES: [bool; 256] = {
    let mut t = [false; 256];
    let bytes = b" \t\n\r;|&<>()$`{'\"\\";
    let mut i = 0;
    while i < bytes.len() {
        t[bytes[i] as usize] = true;
        i += 1;
    }
    t
};

#[cfg(test)]
mod tests;
