//! The lexer and recursive-descent parser: lists, pipelines, compound commands, words.

use super::{
    ANY, ANY_HIDDEN, ASSIGN, BRACE, COMPUTED, Command, DECODED, DYNAMIC, GLOB, MAX_DEPTH, Parsed,
    Redirect, RedirectKind, Word,
};

/// What a command (or a list) produces on stdout, as far as a rule cares.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Output {
    /// [`super::DOWNLOADED`] / [`super::DECODED`].
    pub flags: u8,
    /// `find`'s start paths (a range of `Parsed::argv`), for `xargs` downstream.
    pub paths: Option<(u32, u32)>,
    /// A word whose text is what the command writes (`echo TEXT`, `cat <<EOF`): code,
    /// when a shell reads it.
    pub code: Option<u32>,
}

/// Parse `src` into `out` (cleared first). Never fails.
pub(crate) fn parse_into(src: &str, out: &mut Parsed) {
    out.clear();
    out.budget = super::word_budget(src.len());
    let mut p = P {
        src,
        b: src.as_bytes(),
        i: 0,
        depth: 0,
        skips_base: 0,
        out,
    };
    p.list(0, 0);
    p.out.skips_clear(0);
}

impl Parsed {
    fn skips_clear(&mut self, base: usize) {
        self.skips.truncate(base);
    }

    pub(super) fn take_string(&mut self) -> String {
        let mut s = self.pool.pop().unwrap_or_default();
        s.clear();
        s
    }

    pub(super) fn give_string(&mut self, s: String) {
        self.pool.push(s);
    }

    pub(super) fn push_word(&mut self, lit: &str, pat: &str, flags: u8, feed: u8) -> u32 {
        let a = self.text.len() as u32;
        self.text.push_str(lit);
        let b = self.text.len() as u32;
        let (pa, pb) = if flags & (GLOB | BRACE | COMPUTED) != 0 {
            self.text.push_str(pat);
            (b, self.text.len() as u32)
        } else {
            (a, b)
        };
        self.words.push(Word {
            lit: (a, b),
            pat: (pa, pb),
            flags,
            feed,
        });
        self.budget = self.budget.saturating_sub(1);
        (self.words.len() - 1) as u32
    }

    /// Parse another text (the code of `sh -c`, a backquote, a here-document) one level
    /// deeper, as part of the same command line; returns what it outputs.
    pub(super) fn parse_nested(&mut self, code: &str, depth: u8, input: u8) -> Output {
        if depth >= MAX_DEPTH {
            self.too_deep = true;
            return Output::default();
        }
        let base = self.skips.len();
        let mut p = P {
            src: code,
            b: code.as_bytes(),
            i: 0,
            depth,
            skips_base: base,
            out: self,
        };
        let o = p.list(0, input);
        p.out.skips_clear(base);
        o
    }
}

struct P<'a, 'o> {
    src: &'a str,
    b: &'a [u8],
    i: usize,
    depth: u8,
    skips_base: usize,
    out: &'o mut Parsed,
}

fn is_blank(c: u8) -> bool {
    c == b' ' || c == b'\t' || c == b'\r'
}

/// Characters that end an unquoted word.
fn is_meta(c: u8) -> bool {
    matches!(
        c,
        b' ' | b'\t' | b'\r' | b'\n' | b';' | b'&' | b'|' | b'<' | b'>' | b'(' | b')'
    )
}

/// Bytes an unquoted word copies as they are: none that ends a word, quotes, escapes,
/// expands or globs.
fn is_plain(c: u8) -> bool {
    !is_meta(c)
        && !matches!(
            c,
            b'\\' | b'\'' | b'"' | b'`' | b'$' | b'*' | b'?' | b'[' | b'{' | b'}' | b',' | b']'
        )
}

fn is_name_start(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'_'
}

fn is_name_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// The value of an array assignment's word: its elements are recorded one by one.
pub(super) const ARRAY: &str = "(…)";

/// A computed fragment: its text in the literal form, `any` in the pattern.
fn computed(lit: &mut String, pat: &mut String, flags: &mut u8, raw: &str, any: char) {
    lit.push_str(raw);
    pat.push(any);
    *flags |= DYNAMIC | COMPUTED;
}

/// A command substitution: its output is any text, hidden when it was decoded.
fn substituted(lit: &mut String, pat: &mut String, flags: &mut u8, raw: &str, output: u8) {
    let any = if output & DECODED != 0 {
        ANY_HIDDEN
    } else {
        ANY
    };
    computed(lit, pat, flags, raw, any);
}

/// The result of a string operation (`%suffix`, `##prefix`, `/a/b`, `//a/b`, `:off:len`,
/// `^^`, `,,`) on a literal value, when its pattern is literal too; `None` otherwise.
fn string_op(value: &str, op: &str) -> Option<String> {
    let literal = |p: &str| !p.contains(['*', '?', '[', '\\', '$', '`', '\'', '"']);
    if let Some(rest) = op.strip_prefix('%') {
        let suffix = rest.strip_prefix('%').unwrap_or(rest);
        return literal(suffix).then(|| value.strip_suffix(suffix).unwrap_or(value).to_string());
    }
    if let Some(rest) = op.strip_prefix('#') {
        let prefix = rest.strip_prefix('#').unwrap_or(rest);
        return literal(prefix).then(|| value.strip_prefix(prefix).unwrap_or(value).to_string());
    }
    if let Some(rest) = op.strip_prefix('/') {
        let (all, rest) = match rest.strip_prefix('/') {
            Some(r) => (true, r),
            None => (false, rest),
        };
        let (from, to) = rest.split_once('/').unwrap_or((rest, ""));
        if from.is_empty() || !literal(from) || !literal(to) {
            return None;
        }
        return Some(if all {
            value.replace(from, to)
        } else {
            value.replacen(from, to, 1)
        });
    }
    if let Some(rest) = op.strip_prefix(':') {
        let (off, len) = rest.split_once(':').unwrap_or((rest, ""));
        let off: usize = off.trim().parse().ok()?;
        let chars = value.chars().skip(off);
        return Some(match len.trim() {
            "" => chars.collect(),
            l => chars.take(l.parse().ok()?).collect(),
        });
    }
    match op {
        "^^" | "^" => Some(value.to_uppercase()),
        ",," | "," => Some(value.to_lowercase()),
        _ => None,
    }
}

/// The WORD of `${X:-WORD}`, `${X-WORD}`, `${X:=WORD}`, `${X=WORD}` (quotes removed), from
/// what follows the name.
fn default_word(rest: &str) -> Option<String> {
    let word = rest
        .strip_prefix(":-")
        .or_else(|| rest.strip_prefix(":="))
        .or_else(|| rest.strip_prefix('-'))
        .or_else(|| rest.strip_prefix('='))?;
    Some(word.chars().filter(|c| !matches!(c, '\'' | '"')).collect())
}

/// Push a literal character into the literal and pattern forms; a quoted glob
/// metacharacter is escaped in the pattern as a one-character class.
fn push_lit(lit: &mut String, pat: &mut String, c: char, quoted: bool) {
    lit.push(c);
    if quoted && matches!(c, '*' | '?' | '[' | ']' | '{' | '}' | ',') {
        pat.push('[');
        pat.push(c);
        pat.push(']');
    } else {
        pat.push(c);
    }
}

fn push_str_lit(lit: &mut String, pat: &mut String, s: &str, quoted: bool) {
    for c in s.chars() {
        push_lit(lit, pat, c, quoted);
    }
}

impl P<'_, '_> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn at(&self, k: usize) -> Option<u8> {
        self.b.get(self.i + k).copied()
    }

    fn eof(&self) -> bool {
        self.i >= self.b.len() || self.out.budget == 0
    }

    /// Blanks, line continuations and comments (not newlines).
    fn skip_blanks(&mut self) {
        while let Some(c) = self.peek() {
            if is_blank(c) {
                self.i += 1;
            } else if c == b'\\' && self.at(1) == Some(b'\n') {
                self.i += 2;
            } else if c == b'#' {
                while self.peek().is_some_and(|c| c != b'\n') {
                    self.i += 1;
                }
            } else {
                break;
            }
        }
    }

    /// Consume a newline, jumping over a here-document body that starts after it.
    fn newline(&mut self) {
        self.i += 1;
        let skips = &mut self.out.skips;
        if let Some(pos) = skips[self.skips_base..]
            .iter()
            .position(|&(s, _)| s as usize == self.i)
        {
            let (_, e) = skips.remove(self.skips_base + pos);
            self.i = e as usize;
        }
    }

    fn skip_separators(&mut self) {
        loop {
            self.skip_blanks();
            match self.peek() {
                Some(b'\n') => self.newline(),
                Some(b';') if self.at(1) != Some(b';') => self.i += 1,
                Some(b'&') if self.at(1) != Some(b'&') && self.at(1) != Some(b'>') => self.i += 1,
                _ => break,
            }
        }
    }

    fn skip_newlines(&mut self) {
        loop {
            self.skip_blanks();
            if self.peek() == Some(b'\n') {
                self.newline();
            } else {
                break;
            }
        }
    }

    /// The plain word at the cursor (no quotes or expansions), for reserved words.
    fn plain_word(&self) -> &str {
        let mut j = self.i;
        while j < self.b.len() && !is_meta(self.b[j]) {
            if matches!(self.b[j], b'\'' | b'"' | b'\\' | b'$' | b'`') {
                return "";
            }
            j += 1;
        }
        &self.src[self.i..j]
    }

    /// A list up to `end` (`)`, `}` or 0 for the end of the text). Returns the union of
    /// what its commands output.
    fn list(&mut self, end: u8, input: u8) -> Output {
        let mut out = Output::default();
        loop {
            self.skip_separators();
            let Some(c) = self.peek() else { break };
            if self.eof() {
                break;
            }
            if end != 0 && c == end {
                if end == b')' {
                    break;
                }
                // `}` ends a group only as a word of its own at command position.
                if self.plain_word() == "}" {
                    break;
                }
            }
            if c == b')' || (c == b';' && self.at(1) == Some(b';')) {
                // Stray `)` or `;;` outside their construct: skip.
                self.i += 1 + usize::from(c == b';');
                continue;
            }
            let before = self.i;
            let o = self.and_or(end, input);
            out.flags |= o.flags;
            if o.paths.is_some() {
                out.paths = o.paths;
            }
            if self.i == before {
                // Nothing consumed (an operator out of place): step over it.
                self.i += 1;
            }
        }
        out
    }

    fn and_or(&mut self, end: u8, input: u8) -> Output {
        let mut out = self.pipeline(end, input);
        loop {
            self.skip_blanks();
            if (self.peek() == Some(b'&') && self.at(1) == Some(b'&'))
                || (self.peek() == Some(b'|') && self.at(1) == Some(b'|'))
            {
                self.i += 2;
                self.skip_newlines();
                let o = self.pipeline(end, input);
                out.flags |= o.flags;
                out.paths = o.paths.or(out.paths);
            } else {
                return out;
            }
        }
    }

    fn pipeline(&mut self, end: u8, input: u8) -> Output {
        self.skip_blanks();
        let mut fed = Output {
            flags: input,
            ..Output::default()
        };
        let mut piped = false;
        loop {
            self.skip_blanks();
            if self.plain_word() == "!" || self.plain_word() == "time" {
                self.i += self.plain_word().len();
                continue;
            }
            let o = self.command(end, fed, piped);
            self.skip_blanks();
            if self.peek() == Some(b'|') && self.at(1) != Some(b'|') {
                self.i += 1;
                if self.peek() == Some(b'&') {
                    self.i += 1;
                }
                self.skip_newlines();
                fed = o;
                piped = true;
            } else {
                return o;
            }
        }
    }

    /// One command: compound or simple. `fed` is what its stdin carries. Reserved words
    /// that only introduce a command (`if`, `then`, `do`, `function NAME`) are stepped over
    /// in a loop, not by recursion, so a long run of them costs no stack.
    fn command(&mut self, end: u8, fed: Output, piped: bool) -> Output {
        let (mut fed, mut piped) = (fed, piped);
        loop {
            self.skip_blanks();
            let Some(c) = self.peek() else {
                return Output::default();
            };
            if c == b'(' {
                // `(( … ))` is arithmetic where it parses as such and nested subshells
                // where it does not (bash tries both): read as subshells, arithmetic
                // runs no command the rules are about.
                self.i += 1;
                let o = self.nested_list(b')', fed.flags);
                if self.peek() == Some(b')') {
                    self.i += 1;
                }
                let r = self.trailing_redirects(fed);
                return Output {
                    flags: o.flags | r.flags,
                    paths: o.paths,
                    code: None,
                };
            }
            let word = self.plain_word();
            match word {
                "{" => {
                    self.i += 1;
                    let o = self.nested_list(b'}', fed.flags);
                    if self.peek() == Some(b'}') {
                        self.i += 1;
                    }
                    self.trailing_redirects(fed);
                    return o;
                }
                "if" | "then" | "else" | "elif" | "do" | "while" | "until" => {
                    self.i += word.len();
                }
                "fi" | "done" | "esac" | "}" => {
                    self.i += word.len();
                    self.trailing_redirects(fed);
                    return Output::default();
                }
                "for" | "select" => {
                    self.i += word.len();
                    self.for_head();
                    return Output::default();
                }
                "case" => {
                    self.i += word.len();
                    if self.depth + 1 >= MAX_DEPTH {
                        self.out.too_deep = true;
                        return Output::default();
                    }
                    self.depth += 1;
                    let o = self.case_clause(fed.flags);
                    self.depth -= 1;
                    return o;
                }
                "function" => {
                    self.i += word.len();
                    self.skip_blanks();
                    let name_len = self.plain_word().len();
                    self.i += name_len.max(1).min(self.b.len() - self.i);
                    self.skip_blanks();
                    if self.peek() == Some(b'(') && self.at(1) == Some(b')') {
                        self.i += 2;
                    }
                    self.skip_newlines();
                    (fed, piped) = (Output::default(), false);
                }
                "[[" => {
                    self.test_expression();
                    return Output::default();
                }
                _ => return self.simple(end, fed, piped),
            }
        }
    }

    fn nested_list(&mut self, end: u8, input: u8) -> Output {
        if self.depth + 1 >= MAX_DEPTH {
            self.out.too_deep = true;
            self.skip_to_close(end);
            return Output::default();
        }
        self.depth += 1;
        let o = self.list(end, input);
        self.depth -= 1;
        o
    }

    /// Skip to (not past) the `end` that closes the current level, minding quotes.
    fn skip_to_close(&mut self, end: u8) {
        let open = if end == b')' { b'(' } else { b'{' };
        let mut level = 0usize;
        while let Some(c) = self.peek() {
            match c {
                b'\\' => self.i += 1,
                b'\'' => {
                    self.i += 1;
                    while self.peek().is_some_and(|c| c != b'\'') {
                        self.i += 1;
                    }
                }
                b'"' => {
                    self.i += 1;
                    while let Some(c) = self.peek() {
                        if c == b'\\' {
                            self.i += 1;
                        } else if c == b'"' {
                            break;
                        }
                        self.i += 1;
                    }
                }
                _ if c == open => level += 1,
                _ if c == end => {
                    if level == 0 {
                        return;
                    }
                    level -= 1;
                }
                _ => {}
            }
            self.i += 1;
        }
    }

    /// Skip a balanced `((…))` or `$((…))` starting at the cursor's `open`.
    fn skip_balanced(&mut self, open: u8, close: u8) {
        let mut level = 0usize;
        while let Some(c) = self.peek() {
            self.i += 1;
            if c == open {
                level += 1;
            } else if c == close {
                level = level.saturating_sub(1);
                if level == 0 {
                    return;
                }
            }
        }
    }

    /// `for NAME [in WORDS…]` up to `;`/newline: the words' substitutions still run.
    fn for_head(&mut self) {
        self.skip_blanks();
        if self.peek() == Some(b'(') && self.at(1) == Some(b'(') {
            self.skip_balanced(b'(', b')');
            return;
        }
        let mark = self.out.stack.len();
        // `for NAME in WORDS`: NAME takes each word in turn.
        let name_len = self.plain_word().len();
        let name = (name_len > 0
            && self.b[self.i..self.i + name_len]
                .iter()
                .all(|&c| is_name_char(c)))
        .then(|| self.src[self.i..self.i + name_len].to_string());
        let mut values = false;
        while let Some(c) = self.peek() {
            if c == b'\n' || c == b';' || c == b'&' || c == b'|' || c == b')' {
                break;
            }
            if is_blank(c) {
                self.skip_blanks();
                continue;
            }
            if matches!(c, b'<' | b'>' | b'(') {
                self.i += 1;
                continue;
            }
            let at_in = self.plain_word() == "in";
            let w = self.word(false);
            if values && let Some(name) = &name {
                let word = self.out.words[w as usize];
                self.out.assign_word(name, &word, 0);
            }
            values |= at_in;
        }
        self.out.stack.truncate(mark);
    }

    /// `case WORD in [(]pat[|pat]) list ;; … esac`.
    fn case_clause(&mut self, input: u8) -> Output {
        let mut out = Output::default();
        self.skip_blanks();
        if self.peek().is_some_and(|c| !is_meta(c)) {
            self.word(false);
        }
        self.skip_newlines();
        if self.plain_word() == "in" {
            self.i += 2;
        }
        loop {
            self.skip_separators();
            if self.eof() {
                break;
            }
            if self.plain_word() == "esac" {
                self.i += 4;
                break;
            }
            // The pattern list, up to its `)`.
            if self.peek() == Some(b'(') {
                self.i += 1;
            }
            while let Some(c) = self.peek() {
                if c == b')' {
                    self.i += 1;
                    break;
                }
                if c == b'\n' && self.plain_word() == "esac" {
                    break;
                }
                if is_blank(c) || c == b'|' || c == b'\n' {
                    self.i += 1;
                    continue;
                }
                self.word(false);
            }
            // The clause's commands, up to `;;`, `;&`, `;;&` or `esac`.
            loop {
                self.skip_separators();
                if self.eof() || self.plain_word() == "esac" {
                    break;
                }
                if self.peek() == Some(b';') && self.at(1) == Some(b';') {
                    self.i += 2;
                    if self.peek() == Some(b'&') {
                        self.i += 1;
                    }
                    break;
                }
                if self.peek() == Some(b';') && self.at(1) == Some(b'&') {
                    self.i += 2;
                    break;
                }
                if self.peek() == Some(b')') {
                    self.i += 1;
                    continue;
                }
                let before = self.i;
                let o = self.and_or(0, input);
                out.flags |= o.flags;
                if self.i == before {
                    self.i += 1;
                }
            }
        }
        out
    }

    /// `[[ … ]]`: its words are read for their substitutions; `&&`, `<`, `(` inside it
    /// are operators of the test, not of the shell.
    fn test_expression(&mut self) {
        self.i += 2;
        let mark = self.out.stack.len();
        loop {
            self.skip_blanks();
            let Some(c) = self.peek() else { break };
            if c == b'\n' || c == b';' {
                break;
            }
            if self.plain_word() == "]]" {
                self.i += 2;
                break;
            }
            if matches!(c, b'&' | b'|' | b'<' | b'>' | b'(' | b')' | b'!') {
                self.i += 1;
                continue;
            }
            self.word(false);
        }
        self.out.stack.truncate(mark);
    }

    /// Redirections after a compound command.
    fn trailing_redirects(&mut self, fed: Output) -> Output {
        let mark_w = self.out.stack.len();
        let mark_r = self.out.redirects.len();
        let mut out = Output::default();
        loop {
            self.skip_blanks();
            if !self.redirect_here() {
                break;
            }
            let (_, f) = self.redirect();
            out.flags |= f;
        }
        if self.out.redirects.len() > mark_r {
            // Keep them visible as a command with no name, so redirection rules see them.
            self.finish(mark_w, mark_r, fed);
        }
        self.out.stack.truncate(mark_w);
        out
    }

    /// Whether a redirection operator (with an optional descriptor number) starts here.
    fn redirect_here(&self) -> bool {
        let mut j = self.i;
        while j < self.b.len() && self.b[j].is_ascii_digit() {
            j += 1;
        }
        match self.b.get(j) {
            Some(b'<') | Some(b'>') => {
                // `<(` and `>(` are process substitutions, not redirections.
                !(j == self.i && self.b.get(j + 1) == Some(&b'('))
            }
            Some(b'&') => j == self.i && self.b.get(j + 1) == Some(&b'>'),
            _ => false,
        }
    }

    /// A simple command: assignments, words, redirections.
    fn simple(&mut self, end: u8, fed: Output, piped: bool) -> Output {
        let mark_w = self.out.stack.len();
        let mark_r = self.out.redirects.len();
        let mut stdin = if piped { fed.flags } else { 0 };
        let mut named = false;
        loop {
            self.skip_blanks();
            let Some(c) = self.peek() else { break };
            if self.eof() {
                break;
            }
            if c == b'\n' || c == b';' || c == b')' {
                break;
            }
            if c == b'|' && self.at(1) != Some(b'>') {
                break;
            }
            if c == b'&' && self.at(1) != Some(b'>') {
                break;
            }
            if self.redirect_here() {
                let (kind, f) = self.redirect();
                if kind == Some(RedirectKind::Input) || kind == Some(RedirectKind::Here) {
                    stdin |= f;
                }
                continue;
            }
            if c == b'(' {
                if named && self.at(1) == Some(b')') {
                    // `name () body`: a function definition; its body is what runs.
                    self.i += 2;
                    self.out.stack.truncate(mark_w);
                    self.out.redirects.truncate(mark_r);
                    self.skip_newlines();
                    if self.depth + 1 >= MAX_DEPTH {
                        self.out.too_deep = true;
                        return Output::default();
                    }
                    self.depth += 1;
                    let o = self.command(end, Output::default(), false);
                    self.depth -= 1;
                    return o;
                }
                // `cmd (…)`: not bash, but PowerShell's grouping (`iex (iwr …)`); read it as
                // an argument whose content the command consumes.
                self.i += 1;
                let o = self.nested_list(b')', 0);
                if self.peek() == Some(b')') {
                    self.i += 1;
                }
                let w = self.out.push_word("(…)", "", DYNAMIC, o.flags);
                self.out.stack.push(w);
                named = true;
                continue;
            }
            if (c == b'<' || c == b'>') && self.at(1) == Some(b'(') {
                let w = self.word(false);
                self.out.stack.push(w);
                named = true;
                continue;
            }
            let w = self.word(!named);
            if self.out.words[w as usize].flags & ASSIGN == 0 {
                named = true;
            }
            self.out.stack.push(w);
        }
        let o = self.finish(
            mark_w,
            mark_r,
            Output {
                flags: stdin,
                paths: if piped { fed.paths } else { None },
                code: if piped { fed.code } else { None },
            },
        );
        self.out.stack.truncate(mark_w);
        o
    }

    /// Turn the words on the stack above `mark_w` into a [`Command`] (see `resolve.rs`).
    fn finish(&mut self, mark_w: usize, mark_r: usize, fed: Output) -> Output {
        let a = self.out.argv.len() as u32;
        let Parsed { stack, argv, .. } = &mut *self.out;
        argv.extend_from_slice(&stack[mark_w.min(stack.len())..]);
        let b = self.out.argv.len() as u32;
        let r = (mark_r as u32, self.out.redirects.len() as u32);
        let cmd = Command {
            argv: (a, b),
            name_at: a,
            redirects: r,
            depth: self.depth,
            input: fed.flags,
            ..Command::default()
        };
        self.out.resolve(cmd, fed, self.depth)
    }

    /// One redirection at the cursor; returns its kind and what its target feeds.
    fn redirect(&mut self) -> (Option<RedirectKind>, u8) {
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.i += 1;
        }
        let rest = &self.b[self.i..];
        let (kind, len) = if rest.starts_with(b"<<<") {
            (RedirectKind::Here, 3)
        } else if rest.starts_with(b"<<-") {
            return self.heredoc(3, true);
        } else if rest.starts_with(b"<<") {
            return self.heredoc(2, false);
        } else if rest.starts_with(b"&>>") {
            (RedirectKind::Output, 3)
        } else if rest.starts_with(b"<&") || rest.starts_with(b">&") || rest.starts_with(b"&>") {
            (RedirectKind::Duplicate, 2)
        } else if rest.starts_with(b">>") || rest.starts_with(b">|") || rest.starts_with(b"<>") {
            (
                if rest[0] == b'<' {
                    RedirectKind::Input
                } else {
                    RedirectKind::Output
                },
                2,
            )
        } else if rest.starts_with(b"<") {
            (RedirectKind::Input, 1)
        } else {
            (RedirectKind::Output, 1)
        };
        self.i += len;
        self.skip_blanks();
        if self
            .peek()
            .is_none_or(|c| is_meta(c) && c != b'<' && c != b'>')
        {
            return (None, 0);
        }
        let w = self.word(false);
        let word = self.out.words[w as usize];
        let mut kind = kind;
        if kind == RedirectKind::Duplicate {
            let lit = self.out.lit(&word);
            let is_fd = lit == "-" || lit.bytes().all(|c| c.is_ascii_digit());
            // `>&file` and `&>file` send output to a file.
            if !is_fd {
                kind = RedirectKind::Output;
            }
        }
        self.out.redirects.push(Redirect { kind, target: w });
        (Some(kind), word.feed)
    }

    /// `<<DELIM` / `<<-DELIM`: the body (the lines after this one, up to DELIM) becomes the
    /// target word, and the lexer jumps over it when it reaches that line.
    fn heredoc(&mut self, len: usize, strip_tabs: bool) -> (Option<RedirectKind>, u8) {
        self.i += len;
        self.skip_blanks();
        let w = self.word(false);
        let delim_word = self.out.words[w as usize];
        let mut delim = self.out.take_string();
        delim.push_str(self.out.lit(&delim_word));
        // The body starts after the end of this line, or after an earlier body that does.
        let line_end = self.src[self.i..]
            .find('\n')
            .map_or(self.b.len(), |k| self.i + k + 1);
        let mut start = line_end;
        for &(s, e) in &self.out.skips[self.skips_base..] {
            if s as usize == start {
                start = e as usize;
            }
        }
        let mut pos = start;
        let mut body_end = self.b.len();
        let mut resume = self.b.len();
        while pos < self.b.len() {
            let eol = self.src[pos..].find('\n').map_or(self.b.len(), |k| pos + k);
            let mut line = &self.src[pos..eol];
            if strip_tabs {
                line = line.trim_start_matches('\t');
            }
            if line == delim {
                body_end = pos;
                resume = (eol + 1).min(self.b.len());
                break;
            }
            pos = eol + 1;
        }
        let body = &self.src[start.min(self.b.len())..body_end.max(start).min(self.b.len())];
        let target = self.out.push_word(body, "", 0, 0);
        self.out.give_string(delim);
        if start < self.b.len() {
            // Chained here-documents: extend the existing region instead of adding one.
            if let Some(r) = self.out.skips[self.skips_base..]
                .iter_mut()
                .find(|r| r.1 as usize == start)
            {
                r.1 = resume as u32;
            } else {
                self.out.skips.push((line_end as u32, resume as u32));
            }
        }
        self.out.redirects.push(Redirect {
            kind: RedirectKind::Here,
            target,
        });
        (Some(RedirectKind::Here), 0)
    }

    /// One word at the cursor; `assign_ok` when an assignment may stand here.
    fn word(&mut self, assign_ok: bool) -> u32 {
        let mut lit = self.out.take_string();
        let mut pat = self.out.take_string();
        let mut flags = 0u8;
        let mut feed = 0u8;
        // `NAME=` / `NAME+=` at command start.
        if assign_ok && self.peek().is_some_and(is_name_start) {
            let start_name = self.i;
            let mut j = self.i;
            while j < self.b.len() && is_name_char(self.b[j]) {
                j += 1;
            }
            if self.b.get(j) == Some(&b'=')
                || (self.b.get(j) == Some(&b'+') && self.b.get(j + 1) == Some(&b'='))
            {
                flags |= ASSIGN;
                let eq = if self.b[j] == b'=' { j + 1 } else { j + 2 };
                push_str_lit(&mut lit, &mut pat, &self.src[self.i..eq], false);
                self.i = eq;
                if self.peek() == Some(b'(') {
                    // `arr=(a b c)`: `${arr[@]}` may be any of the elements.
                    let name = self.src[start_name..j].to_string();
                    self.i += 1;
                    loop {
                        while self.peek().is_some_and(|c| is_blank(c) || c == b'\n') {
                            self.i += 1;
                        }
                        match self.peek() {
                            None => break,
                            Some(b')') => {
                                self.i += 1;
                                break;
                            }
                            Some(_) if self.out.budget == 0 => break,
                            Some(_) => {
                                let e = self.word(false);
                                let element = self.out.words[e as usize];
                                self.out.assign_word(&name, &element, 0);
                            }
                        }
                    }
                    lit.push_str(ARRAY);
                    pat.push_str(ARRAY);
                }
            }
        }
        let start = self.i;
        // Process substitution `<(…)` / `>(…)` as a whole word.
        if matches!(self.peek(), Some(b'<') | Some(b'>')) && self.at(1) == Some(b'(') {
            self.i += 2;
            let o = self.nested_list(b')', 0);
            if self.peek() == Some(b')') {
                self.i += 1;
            }
            lit.push_str("<(…)");
            pat.push_str("<(…)");
            flags |= DYNAMIC;
            feed |= o.flags;
        }
        while let Some(c) = self.peek() {
            if self.out.budget == 0 {
                break;
            }
            match c {
                _ if is_meta(c) => {
                    // `@(…)`, `!(…)` extended globs and `$(` are handled elsewhere; a bare
                    // `(` ends the word.
                    break;
                }
                b'\\' => match self.at(1) {
                    Some(b'\n') => self.i += 2,
                    Some(_) => {
                        let ch = self.src[self.i + 1..].chars().next().unwrap_or('\\');
                        push_lit(&mut lit, &mut pat, ch, true);
                        self.i += 1 + ch.len_utf8();
                    }
                    None => {
                        self.i += 1;
                    }
                },
                b'\'' => {
                    self.i += 1;
                    let close = self.src[self.i..]
                        .find('\'')
                        .map_or(self.b.len(), |k| self.i + k);
                    push_str_lit(&mut lit, &mut pat, &self.src[self.i..close], true);
                    self.i = (close + 1).min(self.b.len());
                }
                b'"' => {
                    self.i += 1;
                    self.double_quoted(&mut lit, &mut pat, &mut flags, &mut feed);
                }
                b'`' => {
                    self.backquote(&mut lit, &mut pat, &mut flags, &mut feed);
                }
                b'$' => {
                    self.dollar(&mut lit, &mut pat, &mut flags, &mut feed, false);
                }
                b'*' | b'?' => {
                    flags |= GLOB;
                    lit.push(c as char);
                    pat.push(c as char);
                    self.i += 1;
                }
                b'[' => {
                    // A class only if it closes within the word.
                    let closes = self.b[self.i + 1..]
                        .iter()
                        .take_while(|&&c| !is_meta(c))
                        .skip(1)
                        .any(|&c| c == b']');
                    if closes {
                        flags |= GLOB;
                        lit.push('[');
                        pat.push('[');
                    } else {
                        push_lit(&mut lit, &mut pat, '[', true);
                    }
                    self.i += 1;
                }
                b'{' => {
                    if self.brace_expands() {
                        flags |= BRACE;
                        lit.push('{');
                        pat.push('{');
                    } else {
                        push_lit(&mut lit, &mut pat, '{', true);
                    }
                    self.i += 1;
                }
                b'}' | b',' | b']' => {
                    // Inside an expanding brace these are syntax; otherwise literal.
                    let syntax = flags & (BRACE | GLOB) != 0;
                    lit.push(c as char);
                    if syntax {
                        pat.push(c as char);
                    } else {
                        push_lit(&mut String::new(), &mut pat, c as char, true);
                    }
                    self.i += 1;
                }
                _ => {
                    // A run of plain characters (this one is plain: no arm above took
                    // it), copied at once: most of a long value is such runs, and a
                    // character at a time cost about 40 instructions a byte. The run
                    // ends at an ASCII byte or the end, so on a character boundary.
                    let run = self.b[self.i..]
                        .iter()
                        .position(|&c| !is_plain(c))
                        .map_or(self.b.len(), |k| self.i + k);
                    lit.push_str(&self.src[self.i..run]);
                    pat.push_str(&self.src[self.i..run]);
                    self.i = run;
                }
            }
        }
        if self.i == start && lit.is_empty() && flags & ASSIGN == 0 {
            // Nothing readable here (a lone operator character): consume it as a word.
            if let Some(ch) = self.src[self.i..].chars().next() {
                lit.push(ch);
                pat.push(ch);
                self.i += ch.len_utf8();
            }
        }
        let w = self.out.push_word(&lit, &pat, flags, feed);
        self.out.give_string(lit);
        self.out.give_string(pat);
        w
    }

    /// Whether the unquoted `{` at the cursor starts a brace expansion: a `,` or `..`
    /// at its own level before the matching `}` within the word.
    fn brace_expands(&self) -> bool {
        let mut level = 0usize;
        let mut j = self.i + 1;
        let mut sep = false;
        while j < self.b.len() && !is_meta(self.b[j]) {
            match self.b[j] {
                b'{' => level += 1,
                b'}' if level == 0 => return sep,
                b'}' => level -= 1,
                b',' if level == 0 => sep = true,
                b'.' if level == 0 && self.b.get(j + 1) == Some(&b'.') => sep = true,
                b'\\' => j += 1,
                _ => {}
            }
            j += 1;
        }
        false
    }

    fn double_quoted(&mut self, lit: &mut String, pat: &mut String, flags: &mut u8, feed: &mut u8) {
        while let Some(c) = self.peek() {
            match c {
                b'"' => {
                    self.i += 1;
                    return;
                }
                b'\\' => match self.at(1) {
                    Some(b'\n') => self.i += 2,
                    Some(n @ (b'$' | b'`' | b'"' | b'\\')) => {
                        push_lit(lit, pat, n as char, true);
                        self.i += 2;
                    }
                    _ => {
                        push_lit(lit, pat, '\\', true);
                        self.i += 1;
                    }
                },
                b'$' => self.dollar(lit, pat, flags, feed, true),
                b'`' => self.backquote(lit, pat, flags, feed),
                _ => {
                    let ch = self.src[self.i..].chars().next().unwrap_or(' ');
                    push_lit(lit, pat, ch, true);
                    self.i += ch.len_utf8();
                }
            }
        }
    }

    fn backquote(&mut self, lit: &mut String, pat: &mut String, flags: &mut u8, feed: &mut u8) {
        self.i += 1;
        let mut code = self.out.take_string();
        while let Some(c) = self.peek() {
            if c == b'`' {
                self.i += 1;
                break;
            }
            if c == b'\\' && matches!(self.at(1), Some(b'`' | b'\\' | b'$')) {
                code.push(self.b[self.i + 1] as char);
                self.i += 2;
                continue;
            }
            let ch = self.src[self.i..].chars().next().unwrap_or(' ');
            code.push(ch);
            self.i += ch.len_utf8();
        }
        let o = self.out.parse_nested(&code, self.depth + 1, 0);
        self.out.give_string(code);
        *feed |= o.flags;
        substituted(lit, pat, flags, "$(…)", o.flags);
    }

    /// `$…` at the cursor: parameters, substitutions, arithmetic, `$'…'`.
    fn dollar(
        &mut self,
        lit: &mut String,
        pat: &mut String,
        flags: &mut u8,
        feed: &mut u8,
        in_dq: bool,
    ) {
        match self.at(1) {
            Some(b'\'') if !in_dq => {
                self.i += 2;
                self.ansi_c(lit, pat);
            }
            Some(b'"') if !in_dq => {
                self.i += 2;
                self.double_quoted(lit, pat, flags, feed);
            }
            Some(b'(') if self.at(2) == Some(b'(') => {
                self.i += 1;
                self.skip_balanced(b'(', b')');
                substituted(lit, pat, flags, "$((…))", 0);
            }
            Some(b'(') => {
                self.i += 2;
                let o = self.nested_list(b')', 0);
                if self.peek() == Some(b')') {
                    self.i += 1;
                }
                *feed |= o.flags;
                substituted(lit, pat, flags, "$(…)", o.flags);
            }
            Some(b'[') => {
                self.i += 1;
                self.skip_balanced(b'[', b']');
                substituted(lit, pat, flags, "$[…]", 0);
            }
            Some(b'{') => {
                let start = self.i;
                self.i += 2;
                let name_start = self.i;
                while self.peek().is_some_and(is_name_char) {
                    self.i += 1;
                }
                let name = &self.src[name_start..self.i];
                // The operator right after the name: `}`, `:?`, `:-`, `%`, …
                let op = self.peek();
                // Skip to the matching `}` (nested braces and quotes).
                let mut level = 0usize;
                while let Some(c) = self.peek() {
                    self.i += 1;
                    match c {
                        b'\\' => self.i += 1,
                        b'{' => level += 1,
                        b'}' if level == 0 => break,
                        b'}' => level -= 1,
                        _ => {}
                    }
                }
                self.i = self.i.min(self.b.len());
                let plain = matches!(op, Some(b'}') | Some(b':') | Some(b'-') | Some(b'?'))
                    && !matches!(
                        self.src.as_bytes()[name_start..self.i].get(name.len() + 1),
                        Some(b'+')
                    );
                let raw = &self.src[start..self.i];
                if name == "HOME" && plain {
                    push_str_lit(lit, pat, "${HOME}", false);
                } else if name == "PWD" && plain {
                    push_str_lit(lit, pat, ".", false);
                } else if !name.is_empty()
                    && (op == Some(b'}') || (op == Some(b'[') && raw.ends_with("]}")))
                {
                    if !self.out.splice(name, lit, pat, flags) {
                        computed(lit, pat, flags, raw, ANY);
                    }
                } else if !name.is_empty()
                    && let Some(default) = default_word(
                        raw.strip_suffix('}')
                            .unwrap_or(raw)
                            .get(2 + name.len()..)
                            .unwrap_or(""),
                    )
                {
                    // `${X:-WORD}`, `${X-WORD}`, `${X:=WORD}`: X's value or WORD.
                    let mut value_lit = String::new();
                    let mut value_pat = String::new();
                    let mut value_flags = 0u8;
                    if !self
                        .out
                        .splice(name, &mut value_lit, &mut value_pat, &mut value_flags)
                    {
                        computed(&mut value_lit, &mut value_pat, &mut value_flags, "", ANY);
                    }
                    lit.push_str(raw);
                    pat.push('{');
                    pat.push_str(&value_pat);
                    pat.push(',');
                    for ch in default.chars() {
                        push_lit(&mut String::new(), pat, ch, ch != '~');
                    }
                    pat.push('}');
                    *flags |= DYNAMIC | COMPUTED | BRACE | value_flags;
                } else if raw.starts_with("${!") {
                    // An indirection: the variable named by another's value.
                    computed(lit, pat, flags, raw, ANY_HIDDEN);
                } else if let Some(v) = self.out.literal_value(name).and_then(|v| {
                    string_op(
                        v,
                        raw.strip_suffix('}').unwrap_or(raw).get(2 + name.len()..)?,
                    )
                }) {
                    // `${x%suffix}`, `${x/a/b}`, `${x:0:3}` of a literal value: computed
                    // here, as the shell will.
                    lit.push_str(&v);
                    for ch in v.chars() {
                        push_lit(&mut String::new(), pat, ch, true);
                    }
                } else {
                    // A length, or a pattern operation on a value not known literally:
                    // some text the line does not spell.
                    computed(lit, pat, flags, raw, ANY);
                }
            }
            Some(c) if is_name_start(c) => {
                let start = self.i;
                self.i += 1;
                while self.peek().is_some_and(is_name_char) {
                    self.i += 1;
                }
                let name = &self.src[start + 1..self.i];
                if name == "HOME" {
                    push_str_lit(lit, pat, "${HOME}", false);
                } else if name == "PWD" {
                    push_str_lit(lit, pat, ".", false);
                } else if !self.out.splice(name, lit, pat, flags) {
                    computed(lit, pat, flags, &self.src[start..self.i], ANY);
                }
            }
            Some(c) if c.is_ascii_digit() || b"@*#?$!-".contains(&c) => {
                let raw = &self.src[self.i..self.i + 2];
                if !(matches!(c, b'1'..=b'9' | b'@' | b'*')
                    && self.out.splice(super::POSITIONAL, lit, pat, flags))
                {
                    computed(lit, pat, flags, raw, ANY);
                }
                self.i += 2;
            }
            _ => {
                push_lit(lit, pat, '$', true);
                self.i += 1;
            }
        }
    }

    /// `$'…'`: ANSI-C escapes decoded (`\x72` → `r`), the result quoted.
    fn ansi_c(&mut self, lit: &mut String, pat: &mut String) {
        while let Some(c) = self.peek() {
            self.i += 1;
            match c {
                b'\'' => return,
                b'\\' => {
                    let Some(e) = self.peek() else { return };
                    self.i += 1;
                    let ch = match e {
                        b'n' => '\n',
                        b't' => '\t',
                        b'r' => '\r',
                        b'a' => '\x07',
                        b'b' => '\x08',
                        b'e' | b'E' => '\x1b',
                        b'f' => '\x0c',
                        b'v' => '\x0b',
                        b'x' => {
                            let v = self.hex_digits(2);
                            char::from_u32(v).unwrap_or('?')
                        }
                        b'u' => char::from_u32(self.hex_digits(4)).unwrap_or('?'),
                        b'U' => char::from_u32(self.hex_digits(8)).unwrap_or('?'),
                        b'0'..=b'7' => {
                            let mut v = u32::from(e - b'0');
                            for _ in 0..2 {
                                match self.peek() {
                                    Some(d @ b'0'..=b'7') => {
                                        v = v * 8 + u32::from(d - b'0');
                                        self.i += 1;
                                    }
                                    _ => break,
                                }
                            }
                            char::from_u32(v & 0xff).unwrap_or('?')
                        }
                        b'c' => {
                            self.i += 1;
                            '?'
                        }
                        other => other as char,
                    };
                    push_lit(lit, pat, ch, true);
                }
                _ => {
                    let ch = self.src[self.i - 1..].chars().next().unwrap_or(' ');
                    push_lit(lit, pat, ch, true);
                    self.i += ch.len_utf8() - 1;
                }
            }
        }
    }

    fn hex_digits(&mut self, max: usize) -> u32 {
        let mut v = 0u32;
        for _ in 0..max {
            match self.peek().and_then(|c| (c as char).to_digit(16)) {
                Some(d) => {
                    v = v * 16 + d;
                    self.i += 1;
                }
                None => break,
            }
        }
        v
    }
}
