//! From words to what runs: assignments and wrappers skipped, `sh -c`/`eval` code parsed,
//! `find -exec` and `xargs` turned into the commands they run, and what each command
//! reads and outputs (downloaded or decoded content).

use super::parse::Output;
use super::{
    ANY, ASSIGN, BRACE, COMPUTED, Command, DECODED, DOWNLOADED, DYNAMIC, GLOB, Parsed,
    RedirectKind, command_basename,
};

/// Shells: `-c CODE` runs code, and with no script argument they run what stdin holds.
pub const SHELLS: &[&str] = &[
    "sh",
    "bash",
    "zsh",
    "dash",
    "ksh",
    "mksh",
    "ash",
    "fish",
    "csh",
    "tcsh",
    "yash",
    "rbash",
    "pwsh",
    "powershell",
];

/// Interpreters that run stdin as code when given no script.
pub const INTERPRETERS: &[&str] = &[
    "python",
    "python2",
    "python3",
    "pypy",
    "pypy3",
    "perl",
    "ruby",
    "node",
    "nodejs",
    "php",
    "deno",
    "bun",
    "lua",
    "Rscript",
    "osascript",
    "tclsh",
    "iex",
    "invoke-expression",
];

/// Commands whose code's string literals [`Parsed`] reads as operands and commands
/// (interpreter one-liners, awk programs): the gate in front of the parser opens for them.
pub const CODE_LITERAL_RUNNERS: &[&str] = &[
    "python",
    "pypy",
    "perl",
    "ruby",
    "node",
    "nodejs",
    "php",
    "deno",
    "bun",
    "lua",
    "tclsh",
    "Rscript",
    "osascript",
    "awk",
    "gawk",
    "mawk",
    "nawk",
];

/// Commands whose output is downloaded content.
pub const DOWNLOADERS: &[&str] = &[
    "curl",
    "wget",
    "wget2",
    "fetch",
    "aria2c",
    "http",
    "https",
    "xh",
    "xhs",
    "iwr",
    "irm",
    "invoke-webrequest",
    "invoke-restmethod",
    "lwp-download",
    "lwp-request",
    "GET",
    "ftp",
    "tftp",
    "scp",
    "rsync",
    // PowerShell: `(New-Object Net.WebClient).DownloadString(...)`.
    ".DownloadString",
    ".DownloadFile",
    ".DownloadData",
    "Start-BitsTransfer",
];

/// Commands that pass their input through (possibly transformed) to their output.
const PASSTHROUGH: &[&str] = &[
    "cat", "tee", "head", "tail", "gunzip", "zcat", "gzip", "bzip2", "bunzip2", "bzcat", "xz",
    "unxz", "xzcat", "zstd", "unzstd", "sort", "uniq", "sed", "awk", "gawk", "cut", "dd", "iconv",
    "stdbuf", "pv", "dos2unix", "grep",
];

/// Transforms that hide what the content is: always [`DECODED`] output.
const OBFUSCATORS: &[&str] = &["rev", "tr", "uudecode", "recode"];

/// Every command whose output may be [`DECODED`]: the decoders `resolve` reads flags of,
/// and the [`OBFUSCATORS`]. The `command` matcher's gate needs one of these names in a
/// string before an `input: decoded` clause can hold (a test checks the two agree).
pub const DECODERS: &[&str] = &[
    "base64", "base32", "basenc", "gbase64", "xxd", "openssl", "printf", "echo", "rev", "tr",
    "uudecode", "recode",
];

fn is_python(name: &str) -> bool {
    name.starts_with("python") && name[6..].bytes().all(|c| c.is_ascii_digit() || c == b'.')
}

/// Whether `name` is a shell or an interpreter that runs code.
pub fn runs_code(name: &str) -> bool {
    SHELLS.contains(&name) || INTERPRETERS.contains(&name) || is_python(name)
}

/// A word that names no command the parser can tell: computed, a glob or a brace
/// expansion.
const UNRESOLVED: u8 = DYNAMIC | GLOB | BRACE | COMPUTED;

/// The string literals of interpreter code, in groups: literals joined by concatenation
/// (`'mcp' + 'wall'`, `"mcp" "wall"`, `'a' . 'b'`) form one text, list elements
/// (`['mcpwall', 'trust']`) one space-separated text; anything else starts a new group.
fn code_literals(code: &str) -> Vec<String> {
    let b = code.as_bytes();
    let mut groups: Vec<String> = Vec::new();
    let mut cur: Option<String> = None;
    let mut gap = String::new();
    let mut i = 0;
    while i < b.len() {
        let q = b[i];
        if matches!(q, b'\'' | b'"' | b'`') {
            let mut lit = String::new();
            i += 1;
            while i < b.len() && b[i] != q {
                if b[i] == b'\\' && i + 1 < b.len() {
                    i += 1;
                    match b[i] {
                        b'x' if i + 2 < b.len() => {
                            match u8::from_str_radix(code.get(i + 1..i + 3).unwrap_or(""), 16) {
                                Ok(v) => {
                                    lit.push(char::from(v));
                                    i += 3;
                                }
                                Err(_) => {
                                    lit.push('x');
                                    i += 1;
                                }
                            }
                            continue;
                        }
                        b'n' => lit.push('\n'),
                        b't' => lit.push('\t'),
                        _ => {}
                    }
                    if !matches!(b[i], b'n' | b't') {
                        let ch = code[i..].chars().next().unwrap_or(' ');
                        lit.push(ch);
                        i += ch.len_utf8();
                        continue;
                    }
                    i += 1;
                    continue;
                }
                let ch = code[i..].chars().next().unwrap_or(' ');
                lit.push(ch);
                i += ch.len_utf8();
            }
            i += 1;
            let joins = gap.trim().chars().all(|c| matches!(c, '+' | '.' | ','));
            match cur.as_mut() {
                Some(c) if joins => {
                    if gap.contains(',') {
                        c.push(' ');
                    }
                    c.push_str(&lit);
                }
                _ => {
                    if let Some(c) = cur.take()
                        && !c.trim().is_empty()
                    {
                        groups.push(c);
                    }
                    cur = Some(lit);
                }
            }
            gap.clear();
            continue;
        }
        let ch = code[i..].chars().next().unwrap_or(' ');
        gap.push(ch);
        i += ch.len_utf8();
    }
    if let Some(c) = cur
        && !c.trim().is_empty()
    {
        groups.push(c);
    }
    groups.truncate(256);
    groups
}

impl Parsed {
    /// Finish a command: find its name, parse the code it runs, record it (and the
    /// commands it runs for others); returns what it outputs.
    pub(super) fn resolve(&mut self, mut cmd: Command, fed: Output, depth: u8) -> Output {
        let fed_paths = fed.paths;
        let (a, b) = cmd.argv;
        let mut i = a;
        while i < b && self.word(self.argv[i as usize]).flags & ASSIGN != 0 {
            let w = *self.word(self.argv[i as usize]);
            self.note_assignment(&w);
            i += 1;
        }
        let mut code_feed = 0u8;
        let mut nested_code: Option<(u32, bool)> = None; // (word, join the rest)
        // Wrappers, as many as are stacked (`sudo env X=1 nice -n 5 rm`).
        for _ in 0..16 {
            if i >= b {
                break;
            }
            let w = *self.word(self.argv[i as usize]);
            if w.flags & UNRESOLVED != 0 {
                break;
            }
            let mut name = self.take_string();
            name.push_str(command_basename(self.lit(&w)));
            let skip = |p: &Parsed, at: u32, with_arg: &[&str], stop_at_positional: bool| -> u32 {
                let mut j = at + 1;
                while j < b {
                    let t = p.lit(p.word(p.argv[j as usize]));
                    if t == "--" {
                        return j + 1;
                    }
                    if t.starts_with('-') && t.len() > 1 {
                        let takes = with_arg.contains(&t);
                        j += 1 + u32::from(takes);
                        continue;
                    }
                    if !stop_at_positional && t.contains('=') {
                        j += 1;
                        continue;
                    }
                    break;
                }
                j.min(b)
            };
            let next = match name.as_str() {
                "env" => {
                    // `env -S 'cmd args'` splits its argument into a command.
                    let mut j = i + 1;
                    let mut split = None;
                    while j < b {
                        let t = self.lit(self.word(self.argv[j as usize]));
                        if t == "-S" || t == "--split-string" {
                            split = Some(j + 1);
                            break;
                        }
                        if let Some(rest) = t.strip_prefix("--split-string=") {
                            let _ = rest;
                            split = Some(j);
                            break;
                        }
                        if t == "--" {
                            j += 1;
                            break;
                        }
                        if t.starts_with('-') && t.len() > 1 {
                            let takes = matches!(t, "-u" | "--unset" | "-C" | "--chdir");
                            j += 1 + u32::from(takes);
                            continue;
                        }
                        if t.contains('=') {
                            j += 1;
                            continue;
                        }
                        break;
                    }
                    if let Some(s) = split.filter(|&s| s < b) {
                        nested_code = Some((s, true));
                        i = b;
                        break;
                    }
                    j
                }
                "sudo" | "doas" | "run0" | "pkexec" => skip(
                    self,
                    i,
                    &[
                        "-u", "-g", "-h", "-p", "-U", "-C", "-r", "-t", "-D", "-T", "-R", "--user",
                        "--group",
                    ],
                    true,
                ),
                "command" => {
                    let t = self.lit(self.word(self.argv[((i + 1).min(b - 1)) as usize]));
                    if t == "-v" || t == "-V" {
                        // A lookup, not a run.
                        i = b;
                        break;
                    }
                    skip(self, i, &[], true)
                }
                "builtin" | "nohup" | "time" | "setsid" | "unbuffer" | "caffeinate" | "noglob"
                | "exec" | "busybox" => skip(self, i, &["-a"], true),
                "nice" => skip(self, i, &["-n", "--adjustment"], true),
                "ionice" => skip(self, i, &["-c", "-n", "-p", "-P", "-u"], true),
                "stdbuf" => skip(self, i, &["-i", "-o", "-e"], true),
                "timeout" | "chrt" | "taskset" => {
                    // Options, then one positional (duration, priority, mask).
                    let j = skip(self, i, &["-s", "-k", "--signal", "--kill-after"], true);
                    (j + 1).min(b)
                }
                "watch" => {
                    let j = skip(self, i, &["-n", "--interval", "-d"], true);
                    if j < b {
                        nested_code = Some((j, true));
                    }
                    i = b;
                    break;
                }
                "npx" | "bunx" | "pnpx" => {
                    let mut j = i + 1;
                    while j < b {
                        let t = self.lit(self.word(self.argv[j as usize]));
                        if t == "-c" || t == "--call" {
                            nested_code = Some((j + 1, false));
                            j = b;
                            break;
                        }
                        if t.starts_with('-') {
                            j += 1 + u32::from(matches!(t, "-p" | "--package"));
                            continue;
                        }
                        break;
                    }
                    j
                }
                _ => {
                    self.give_string(name);
                    break;
                }
            };
            self.give_string(name);
            i = next.min(b);
        }
        cmd.name_at = i;
        let mut name = self.take_string();
        if i < b {
            let w = *self.word(self.argv[i as usize]);
            name.push_str(command_basename(self.lit(&w)));
            if w.flags & UNRESOLVED != 0 || self.is_alias(&name) {
                cmd.name_unknown = true;
            }
        }
        let args = (i + 1).min(b)..b;
        let arg = |p: &Parsed, j: u32| *p.word(p.argv[j as usize]);
        let mut arg_feed = 0u8;
        for j in args.clone() {
            arg_feed |= arg(self, j).feed;
        }

        // The code this command runs from an argument or from stdin.
        let mut reads_stdin_code = cmd.name_unknown;
        let is_shell = SHELLS.contains(&name.as_str());
        if is_shell {
            let mut positional = false;
            let mut j = args.start;
            while j < b {
                let t = self.lit(&arg(self, j));
                if t == "--" {
                    positional = j + 1 < b;
                    break;
                }
                if t.starts_with('-') && t.len() > 1 && !t.starts_with("--") {
                    if t[1..].contains('c') {
                        // The first operand after the options is the code.
                        let mut k = j + 1;
                        while k < b && self.lit(&arg(self, k)).starts_with('-') {
                            k += 1;
                        }
                        if k < b {
                            nested_code = Some((k, false));
                        }
                        break;
                    }
                    if t == "-o" || t == "+o" {
                        j += 1;
                    }
                    if t.contains('s') {
                        reads_stdin_code = true;
                    }
                } else if t.starts_with("--") {
                    if t == "--command" {
                        nested_code = Some(((j + 1).min(b.saturating_sub(1)), false));
                        break;
                    }
                } else if !t.starts_with('+') {
                    positional = true;
                    break;
                }
                j += 1;
            }
            if nested_code.is_none() && (!positional || reads_stdin_code) {
                reads_stdin_code = true;
            }
            if name == "pwsh" || name == "powershell" {
                // `-Command -` / `-c` / `-EncodedCommand` are read by the loop above loosely.
                reads_stdin_code |= !positional;
            }
        } else if INTERPRETERS.contains(&name.as_str()) || is_python(&name) {
            let mut positional = false;
            let mut code_flag = false;
            for j in args.clone() {
                let t = self.lit(&arg(self, j));
                if t == "-" {
                    break;
                }
                if matches!(
                    t,
                    "-c" | "-e" | "-E" | "-m" | "-r" | "--eval" | "-p" | "--print" | "-x"
                ) {
                    code_flag = true;
                    break;
                }
                if !t.starts_with('-') {
                    positional = true;
                    break;
                }
            }
            reads_stdin_code = !positional && !code_flag;
            if name == "iex" || name == "invoke-expression" {
                reads_stdin_code = true;
            }
        } else if name == "eval" {
            if args.start < b {
                nested_code = Some((args.start, true));
            }
        } else if name == "source" || name == "." {
            reads_stdin_code =
                args.start < b && matches!(self.lit(&arg(self, args.start)), "/dev/stdin" | "-");
        }

        // Input: stdin where the command reads it as code (or is not an interpreter, so
        // any input counts), and every substitution among its arguments.
        let stdin = cmd.input;
        let interp = runs_code(&name) || name == "eval" || name == "source" || name == ".";
        cmd.input = arg_feed
            | if !interp || reads_stdin_code {
                stdin
            } else {
                0
            };
        if let Some((k, _)) = nested_code {
            code_feed |= arg(self, k.min(b.saturating_sub(1))).feed;
            cmd.input |= code_feed;
        }
        cmd.after_download = self.seen_download;
        cmd.depth = depth;

        // Output.
        let mut out = Output::default();
        if DOWNLOADERS
            .iter()
            .any(|d| d.eq_ignore_ascii_case(name.as_str()))
        {
            out.flags |= DOWNLOADED;
            self.seen_download = true;
        }
        let has_arg =
            |p: &Parsed, pred: &dyn Fn(&str) -> bool| args.clone().any(|j| pred(p.lit(&arg(p, j))));
        let decodes = match name.as_str() {
            "base64" | "base32" | "basenc" | "gbase64" => has_arg(self, &|t| {
                t == "--decode"
                    || (t.starts_with('-') && !t.starts_with("--") && t.contains(['d', 'D']))
            }),
            "xxd" => has_arg(self, &|t| t.starts_with('-') && t.contains('r')),
            "openssl" => has_arg(self, &|t| {
                t == "-d" || t == "-base64" || t == "base64" || t == "-a"
            }),
            "printf" | "echo" => has_arg(self, &|t| {
                t.contains("\\x") || t.contains("\\0") || t.contains("\\u")
            }),
            _ => OBFUSCATORS.contains(&name.as_str()),
        };
        if decodes {
            out.flags |= DECODED | stdin;
        } else if PASSTHROUGH.contains(&name.as_str()) {
            out.flags |= stdin;
        }
        // `find`'s start paths: the operands before its expression.
        let mut find_paths = None;
        if name == "find" {
            let mut j = args.start;
            while j < b {
                let t = self.lit(&arg(self, j));
                if t.starts_with('-') && !matches!(t, "-H" | "-L" | "-P") || t == "(" || t == "!" {
                    break;
                }
                j += 1;
            }
            let mut s = args.start;
            while s < j && matches!(self.lit(&arg(self, s)), "-H" | "-L" | "-P") {
                s += 1;
            }
            if s < j {
                find_paths = Some((s, j));
                out.paths = find_paths;
            }
        }
        let pushed = self.commands.len();
        self.commands.push(cmd);

        // Code run by this command, parsed as commands of their own.
        if let Some((k, join)) = nested_code
            && k < b
        {
            let mut code = self.take_string();
            let end = if join { b } else { k + 1 };
            for j in k..end {
                if !code.is_empty() {
                    code.push(' ');
                }
                let w = arg(self, j);
                code.push_str(self.lit(&w));
            }
            let o = self.parse_nested(&code, depth + 1, if reads_stdin_code { stdin } else { 0 });
            self.give_string(code);
            out.flags |= o.flags & DOWNLOADED;
        }
        // A shell reading what `echo TEXT` or `cat <<EOF` writes reads TEXT as code.
        let sources = name == "source" || name == ".";
        if (is_shell || sources)
            && reads_stdin_code
            && let Some(k) = fed.code
        {
            let mut code = self.take_string();
            code.push_str(self.lit(self.word(k)));
            self.parse_nested(&code, depth + 1, 0);
            self.give_string(code);
        }
        // A shell reading a here-document or here-string reads it as code.
        if (is_shell || sources) && reads_stdin_code {
            let (ra, rb) = cmd.redirects;
            for r in ra..rb {
                let red = self.redirects[r as usize];
                if red.kind == RedirectKind::Here {
                    let mut code = self.take_string();
                    code.push_str(self.lit(self.word(red.target)));
                    self.parse_nested(&code, depth + 1, 0);
                    self.give_string(code);
                }
            }
        }
        // `find … -exec CMD {} ;`: CMD runs over every path under find's start paths.
        if name == "find" {
            let mut j = args.start;
            while j < b {
                let t = self.lit(&arg(self, j));
                if matches!(t, "-exec" | "-execdir" | "-ok" | "-okdir") {
                    let start = j + 1;
                    let mut e = start;
                    while e < b && !matches!(self.lit(&arg(self, e)), ";" | "+") {
                        e += 1;
                    }
                    if start < e {
                        self.derived(start, e, find_paths, depth, true);
                    }
                    j = e;
                }
                j += 1;
            }
        }
        if name == "xargs" {
            let mut j = args.start;
            while j < b {
                let t = self.lit(&arg(self, j));
                if !t.starts_with('-') {
                    break;
                }
                let takes = matches!(
                    t,
                    "-I" | "-n"
                        | "-P"
                        | "-d"
                        | "-E"
                        | "-L"
                        | "-s"
                        | "-a"
                        | "--max-args"
                        | "--max-procs"
                        | "--delimiter"
                        | "--arg-file"
                        | "--replace"
                        | "--max-lines"
                );
                j += 1 + u32::from(takes);
            }
            if j < b {
                self.derived(j, b, fed_paths, depth, fed_paths.is_some());
            }
        }
        // What a command writes, as text a shell downstream may read as code.
        match name.as_str() {
            "echo" | "printf" => {
                out.code = args
                    .clone()
                    .map(|j| self.argv[j as usize])
                    .find(|&w| !self.lit(self.word(w)).starts_with('-'));
            }
            "cat" => {
                let (ra, rb) = cmd.redirects;
                out.code = self.redirects[ra as usize..rb as usize]
                    .iter()
                    .find(|r| r.kind == RedirectKind::Here)
                    .map(|r| r.target);
            }
            _ => {}
        }
        // The text `read` reads, where the line shows it: a here-string or here-document,
        // or what `echo`/`cat <<EOF` writes into the pipe.
        let (ra, rb) = cmd.redirects;
        let text_in = self.redirects[ra as usize..rb as usize]
            .iter()
            .find(|r| r.kind == RedirectKind::Here)
            .map(|r| r.target)
            .or(fed.code);
        self.note_builtin_assignments(&name, args.clone(), depth, text_in);
        let mut codes = Vec::new();
        self.code_in_options(&name, args.clone(), &mut codes);
        for code in &codes {
            self.parse_nested(code, depth + 1, 0);
        }
        if i < b {
            self.interpreter_literals(&name, self.argv[i as usize], args.clone(), depth);
        }
        let _ = pushed;
        self.give_string(name);
        out
    }

    /// `NAME=value` before a command: `$NAME` may hold the value from here on (a
    /// `NAME+=…` or an array holds more than the parser follows).
    fn note_assignment(&mut self, w: &super::Word) {
        let lit = self.lit(w);
        let Some(eq) = lit.find('=') else { return };
        let (name, append) = match lit[..eq].strip_suffix('+') {
            Some(n) => (n.to_string(), true),
            None => (lit[..eq].to_string(), false),
        };
        if name.is_empty()
            || !name.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_')
            || lit[eq + 1..] == *super::parse::ARRAY
        {
            return;
        }
        if append {
            self.assign_hidden(&name);
        } else {
            self.assign_word(&name, w, eq + 1);
        }
    }

    /// Builtins that set variables (`declare`, `read`, `printf -v`, `set --`, …) and
    /// aliases.
    fn note_builtin_assignments(
        &mut self,
        name: &str,
        args: std::ops::Range<u32>,
        depth: u8,
        text_in: Option<u32>,
    ) {
        let arg = |p: &Parsed, j: u32| *p.word(p.argv[j as usize]);
        match name {
            "declare" | "typeset" | "local" | "export" | "readonly" => {
                for j in args {
                    let w = arg(self, j);
                    if !self.lit(&w).starts_with('-') {
                        self.note_assignment(&w);
                    }
                }
            }
            "read" | "mapfile" | "readarray" | "getopts" | "printf" => {
                let takes: &[&str] = match name {
                    "read" => &["-p", "-d", "-n", "-N", "-t", "-u", "-i"],
                    "mapfile" | "readarray" => &["-d", "-n", "-O", "-s", "-u", "-C", "-c"],
                    _ => &[],
                };
                let mut names = Vec::new();
                let mut j = args.start;
                while j < args.end {
                    let t = self.lit(&arg(self, j)).to_string();
                    if name == "printf" {
                        if t == "-v" && j + 1 < args.end {
                            names.push(self.lit(&arg(self, j + 1)).to_string());
                        }
                        break;
                    }
                    if takes.contains(&t.as_str()) {
                        j += 2;
                        continue;
                    }
                    if t == "-a" && j + 1 < args.end {
                        names.push(self.lit(&arg(self, j + 1)).to_string());
                        j += 2;
                        continue;
                    }
                    if !t.starts_with('-') {
                        names.push(t);
                    }
                    j += 1;
                }
                if name == "getopts" {
                    names = names.into_iter().skip(1).take(1).collect();
                }
                if matches!(name, "mapfile" | "readarray") {
                    names = names.pop().into_iter().collect();
                    if names.is_empty() {
                        names.push("MAPFILE".into());
                    }
                }
                if name == "read" && names.is_empty() {
                    names.push("REPLY".into());
                }
                for n in names {
                    match (name, text_in) {
                        // `read p <<< TEXT`: p holds (a part of) TEXT.
                        ("read", Some(k)) => {
                            let w = *self.word(k);
                            self.assign_word(&n, &w, 0);
                        }
                        // `read` from a file or a pipe the line does not show: a value
                        // from outside, as an unset variable's.
                        ("read", None) => self.assign_outside(&n),
                        _ => self.assign_hidden(&n),
                    }
                }
            }
            "set" => {
                let mut j = args.start;
                while j < args.end {
                    let t = self.lit(&arg(self, j));
                    if t == "--" {
                        j += 1;
                        break;
                    }
                    if !t.starts_with(['-', '+']) {
                        break;
                    }
                    j += 1 + u32::from(t == "-o" || t == "+o");
                }
                for k in j..args.end {
                    let w = arg(self, k);
                    self.assign_word(super::POSITIONAL, &w, 0);
                }
            }
            "alias" => {
                for j in args {
                    let w = arg(self, j);
                    let lit = self.lit(&w);
                    if let Some((n, code)) = lit.split_once('=') {
                        let (n, code) = (n.to_string(), code.to_string());
                        self.add_alias(&n);
                        self.parse_nested(&code, depth + 1, 0);
                    }
                }
            }
            _ => {}
        }
    }

    /// Code a command runs from one of its options: `script -c`, `su -c`, `runuser -c`,
    /// `flock -c`, `tar --to-command=`, `vim +CMD` / `-c CMD` (an Ex command, which reads
    /// files and runs `!shell` commands like a shell line).
    fn code_in_options(&self, name: &str, args: std::ops::Range<u32>, codes: &mut Vec<String>) {
        let lit = |j: u32| self.lit(self.word(self.argv[j as usize]));
        let mut j = args.start;
        while j < args.end {
            let t = lit(j);
            let next = || (j + 1 < args.end).then(|| lit(j + 1).to_string());
            let code = match name {
                "script" | "su" | "runuser" | "sg" | "flock" => {
                    if let Some(c) = t.strip_prefix("--command=") {
                        Some(c.to_string())
                    } else if t == "--command"
                        || (t.starts_with('-')
                            && !t.starts_with("--")
                            && t.ends_with('c')
                            && t[1..].bytes().all(|c| c.is_ascii_alphabetic()))
                    {
                        next()
                    } else {
                        None
                    }
                }
                "tar" | "gtar" | "bsdtar" => {
                    let inline = [
                        "--to-command=",
                        "--use-compress-program=",
                        "--checkpoint-action=exec=",
                        "--info-script=",
                        "--new-volume-script=",
                    ];
                    if let Some(c) = inline.iter().find_map(|p| t.strip_prefix(p)) {
                        Some(c.to_string())
                    } else if matches!(
                        t,
                        "--to-command" | "--use-compress-program" | "-I" | "--info-script" | "-F"
                    ) {
                        next()
                    } else {
                        None
                    }
                }
                "vim" | "vi" | "nvim" | "view" | "ex" | "gvim" | "vimdiff" | "rvim" => {
                    if let Some(c) = t.strip_prefix('+')
                        && !c.bytes().all(|b| b.is_ascii_digit())
                    {
                        Some(c.trim_start_matches(':').to_string())
                    } else if t == "-c" || t == "--cmd" {
                        next().map(|c| c.trim_start_matches(':').to_string())
                    } else {
                        None
                    }
                }
                _ => return,
            };
            if let Some(c) = code {
                codes.push(c);
            }
            j += 1;
        }
    }

    /// An interpreter one-liner (`python -c`, `perl -e`, `node -e`, `ruby -e`, `php -r`,
    /// an awk program): the string literals of its code are the files it opens and the
    /// commands it runs. They become the operands of a command of the interpreter's name
    /// (so the path rules judge them), and, where the code runs commands (`system`,
    /// `popen`, `subprocess`, backquotes, awk's `| getline`), are parsed as command lines.
    fn interpreter_literals(
        &mut self,
        name: &str,
        name_word: u32,
        args: std::ops::Range<u32>,
        depth: u8,
    ) {
        let awk = matches!(name, "awk" | "gawk" | "mawk" | "nawk");
        if !(awk || INTERPRETERS.contains(&name) || is_python(name)) {
            return;
        }
        if depth + 1 >= super::MAX_DEPTH {
            self.too_deep = true;
            return;
        }
        let mut code = String::new();
        let mut j = args.start;
        while j < args.end {
            let t = self.lit(self.word(self.argv[j as usize]));
            let next = j + 1 < args.end;
            if awk {
                if matches!(
                    t,
                    "-F" | "-v" | "--field-separator" | "--assign" | "-i" | "--include"
                ) {
                    j += 2;
                    continue;
                }
                if t == "-f" || t == "--file" || t.starts_with("--file=") {
                    return;
                }
                if t.starts_with('-') && t.len() > 1 {
                    j += 1;
                    continue;
                }
                code.push_str(t);
                break;
            }
            if let Some(c) = t
                .strip_prefix("--eval=")
                .or_else(|| t.strip_prefix("--print="))
            {
                code.push_str(c);
                code.push('\n');
            } else if next
                && (matches!(t, "--eval" | "--print" | "--command")
                    || (t.starts_with('-')
                        && !t.starts_with("--")
                        && t.len() > 1
                        && t[1..].bytes().all(|c| c.is_ascii_alphanumeric())
                        && t.ends_with(['c', 'e', 'E', 'r', 'p'])))
            {
                j += 1;
                code.push_str(self.lit(self.word(self.argv[j as usize])));
                code.push('\n');
            } else if !t.starts_with('-') {
                // A script file: its code is not on the command line.
                break;
            }
            j += 1;
        }
        if code.is_empty() {
            return;
        }
        let groups = code_literals(&code);
        if groups.is_empty() {
            return;
        }
        let start = self.argv.len() as u32;
        self.argv.push(name_word);
        for token in groups.iter().flat_map(|g| g.split_whitespace()) {
            let flags = if token.contains(['*', '?', '[']) {
                GLOB
            } else {
                0
            };
            let w = self.push_word(token, token, flags, 0);
            self.argv.push(w);
        }
        let end = self.argv.len() as u32;
        let r = self.redirects.len() as u32;
        self.commands.push(Command {
            argv: (start, end),
            name_at: start,
            redirects: (r, r),
            depth: depth + 1,
            ..Command::default()
        });
        let runs_commands = [
            "system",
            "popen",
            "subprocess",
            "exec",
            "spawn",
            "`",
            "qx",
            "shell",
            "getline",
            "Process",
            "passthru",
            "open3",
            "IO.popen",
            "%x",
        ]
        .iter()
        .any(|m| code.contains(m));
        if runs_commands {
            for g in &groups {
                self.parse_nested(g, depth + 1, 0);
            }
        }
    }

    /// A command run on another's behalf (`find -exec`, `xargs`): its words, then the
    /// paths it will be given.
    fn derived(
        &mut self,
        start: u32,
        end: u32,
        paths: Option<(u32, u32)>,
        depth: u8,
        fans_out: bool,
    ) {
        if depth + 1 >= super::MAX_DEPTH {
            self.too_deep = true;
            return;
        }
        let a = self.argv.len() as u32;
        for j in start..end {
            let w = self.argv[j as usize];
            if self.lit(self.word(w)) == "{}" {
                if j == start {
                    // `-exec {} …`: each found file is the command.
                    let any = self.push_word("{}", &ANY.to_string(), DYNAMIC | COMPUTED, 0);
                    self.argv.push(any);
                }
                continue;
            }
            self.argv.push(w);
        }
        match paths {
            Some((pa, pb)) => {
                for j in pa..pb {
                    let w = self.argv[j as usize];
                    self.argv.push(w);
                }
            }
            None => {
                // `… | xargs CMD`: CMD's further operands are whatever its input holds.
                let any = self.push_word("…", &ANY.to_string(), DYNAMIC | COMPUTED, 0);
                self.argv.push(any);
            }
        }
        let b = self.argv.len() as u32;
        let r = self.redirects.len() as u32;
        let cmd = Command {
            argv: (a, b),
            name_at: a,
            redirects: (r, r),
            fans_out,
            depth: depth + 1,
            ..Command::default()
        };
        let before = self.commands.len();
        self.resolve(cmd, Output::default(), depth + 1);
        if let Some(c) = self.commands.get_mut(before) {
            c.fans_out = fans_out;
        }
    }
}
