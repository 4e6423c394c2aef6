//! Byte-splicing edits of one server entry: wrap, and the two ways back.
//!
//! Only the bytes of `command` and `args` change (or, on an exact restore, the entry's own
//! bytes); every other byte of the file (key order, indentation, comments, the trailing
//! newline) stays as it was. Each function takes the whole text and returns the new text.
//! JSON, JSONC and TOML share the code: all three are read into the same span-tracked
//! [`Node`] tree, and only the syntax of a newly inserted `args` differs.

use std::ops::Range;

use super::json_span::{self, Dialect, Kind, Member, Node, SyntaxError};
use super::toml_span;

/// How a client file is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// JSON, strict or with comments.
    Json(Dialect),
    /// TOML (Codex).
    Toml,
}

/// Read a client file into a span-tracked tree.
pub fn parse(text: &str, format: Format) -> Result<Node, SyntaxError> {
    match format {
        Format::Json(dialect) => json_span::parse(text, dialect),
        Format::Toml => toml_span::parse(text),
    }
}

/// Why an entry could not be edited.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EditError {
    /// The file does not parse (it was valid when the plan was made; it changed since).
    #[error("the file no longer parses: {0}")]
    Syntax(#[from] SyntaxError),
    /// The entry is gone, or is not an object with a string `command`.
    #[error("entry {0} is missing or has no string `command`")]
    NoEntry(String),
    /// The entry is written in a way mcpwall cannot add `args` to safely.
    #[error("{0}")]
    Layout(String),
    /// A wrap record that does not describe this file's format.
    #[error("the wrap record of this entry is unreadable")]
    BadRecord,
    /// A wrap record that failed its check; the message says why and what to do.
    #[error("{0}")]
    Record(String),
}

/// One replacement of a byte range of the original text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Splice {
    /// The bytes replaced (empty for an insertion).
    pub range: Range<usize>,
    /// What goes there.
    pub with: String,
}

/// Apply splices that do not overlap (all computed against `text`).
pub fn apply(text: &str, mut splices: Vec<Splice>) -> String {
    splices.sort_by_key(|s| std::cmp::Reverse(s.range.start));
    let mut out = text.to_string();
    for s in splices {
        out.replace_range(s.range, &s.with);
    }
    out
}

fn entry<'n>(root: &'n Node, path: &[String]) -> Result<&'n Node, EditError> {
    root.at(path)
        .filter(|e| e.member("command").and_then(|c| c.value.as_str()).is_some())
        .ok_or_else(|| EditError::NoEntry(path.join(".")))
}

/// How members of this entry are written: the key `args` is spelled as, the bytes between
/// a key and its value (`": "`, `" = "`), the separator before a new member
/// (`",\n    "`, `", "`, or a bare line break in a TOML table), and between array items.
pub(super) struct MemberStyle {
    key: &'static str,
    pub(super) colon: String,
    pub(super) separator: String,
    item_separator: &'static str,
}

pub(super) fn member_style(
    text: &str,
    format: Format,
    entry: &Node,
    anchor: &Member,
) -> Result<MemberStyle, EditError> {
    let (key, assign, default_colon) = match format {
        Format::Json(_) => ("\"args\"", ':', ": "),
        Format::Toml => ("args", '=', " = "),
    };
    let colon = &text[anchor.key_span.end..anchor.value.span.start];
    let colon =
        if colon.contains(assign) && colon.chars().all(|c| c == assign || c == ' ' || c == '\t') {
            colon.to_string()
        } else {
            default_colon.to_string()
        };
    let item_separator = if colon == ":" { "," } else { ", " };
    let line_start = text[..anchor.key_span.start].rfind('\n').map(|i| i + 1);
    let indent = line_start
        .map(|s| &text[s..anchor.key_span.start])
        .filter(|indent| is_blank(indent));
    let newline = newline_before(text, line_start.unwrap_or(0));
    let inline_table = text.as_bytes().get(entry.span.start) == Some(&b'{');
    let separator = match (format, indent) {
        (Format::Toml, _) if inline_table => ", ".to_string(),
        (Format::Toml, Some(indent)) => format!("{newline}{indent}"),
        (Format::Toml, None) => {
            return Err(EditError::Layout(
                "`command` is not on a line of its own (a dotted key?): add `args = []` to the entry by hand, then wrap it".into(),
            ));
        }
        (Format::Json(_), Some(indent)) if line_start.unwrap_or(0) > entry.span.start => {
            format!(",{newline}{indent}")
        }
        (Format::Json(_), _) => item_separator.to_string(),
    };
    Ok(MemberStyle {
        key,
        colon,
        separator,
        item_separator,
    })
}

/// The line break ending just before `line_start`: `\r\n` in files written on Windows.
fn newline_before(text: &str, line_start: usize) -> &'static str {
    if line_start > 0 && text[..line_start].ends_with("\r\n") {
        "\r\n"
    } else {
        "\n"
    }
}

fn is_blank(s: &str) -> bool {
    s.chars().all(|c| c == ' ' || c == '\t')
}

/// `s` as a string literal of `format`, escaping everything its grammar requires: JSON
/// (serde_json escapes `"`, `\\` and U+0000–U+001F), and TOML basic strings, which also
/// forbid U+007F raw.
pub fn string_literal(format: Format, s: &str) -> String {
    match format {
        Format::Json(_) => serde_json::to_string(s).expect("a string always serialises"),
        Format::Toml => {
            let mut out = String::with_capacity(s.len() + 2);
            out.push('"');
            for c in s.chars() {
                match c {
                    '"' => out.push_str("\\\""),
                    '\\' => out.push_str("\\\\"),
                    '\n' => out.push_str("\\n"),
                    '\r' => out.push_str("\\r"),
                    '\t' => out.push_str("\\t"),
                    c if c < ' ' || c == '\u{7f}' => out.push_str(&format!("\\u{:04X}", c as u32)),
                    c => out.push(c),
                }
            }
            out.push('"');
            out
        }
    }
}

/// Put `wrapper` in front of the entry at `path`:
/// `"command": wrapper, "args": ["--server-name", name, "--", <orig command>, <orig args>…]`.
/// The original command and arguments keep their exact bytes.
pub fn wrap(
    text: &str,
    format: Format,
    path: &[String],
    name: &str,
    wrapper: &str,
) -> Result<String, EditError> {
    let root = parse(text, format)?;
    Ok(apply(
        text,
        wrap_splices(text, &root, format, path, name, wrapper)?,
    ))
}

/// [`wrap`] as splices against `text` (whose tree is `root`), so several entries of one
/// file are edited from a single parse.
pub fn wrap_splices(
    text: &str,
    root: &Node,
    format: Format,
    path: &[String],
    name: &str,
    wrapper: &str,
) -> Result<Vec<Splice>, EditError> {
    let entry = entry(root, path)?;
    let command = entry.member("command").expect("checked by entry()");
    let original_command = &text[command.value.span.clone()];
    let mut prefix = name_literals(format, name);
    prefix.extend([string_literal(format, "--"), original_command.to_string()]);
    let mut splices = vec![Splice {
        range: command.value.span.clone(),
        with: string_literal(format, wrapper),
    }];
    let style = member_style(text, format, entry, command);
    let inline_separator = style.as_ref().map_or(", ", |s| s.item_separator);
    match entry.member("args").map(|a| &a.value) {
        Some(args) => match args.elements() {
            Some([first, ..]) => {
                let separator = element_separator(text, args, inline_separator);
                let mut with = prefix.join(&separator);
                with.push_str(&separator);
                splices.push(Splice {
                    range: first.span.start..first.span.start,
                    with,
                });
            }
            _ => splices.push(Splice {
                range: args.span.clone(),
                with: format!("[{}]", prefix.join(inline_separator)),
            }),
        },
        None => {
            let style = style?;
            splices.push(Splice {
                range: command.value.span.end..command.value.span.end,
                with: format!(
                    "{}{}{}[{}]",
                    style.separator,
                    style.key,
                    style.colon,
                    prefix.join(inline_separator)
                ),
            });
        }
    }
    Ok(splices)
}

/// Make the remote entry at `path` (`url` or `serverUrl`, JSON clients) a stdio entry
/// running mcpwall's bridge: `type` (if any) becomes `stdio`, the URL member becomes
/// `"command": wrapper, "args": ["--server-name", name, "--upstream", <url>]` in its place,
/// and `headers` becomes `"env": {"MCPWALL_UPSTREAM_HEADERS": "Name: value\n…"}` there (the
/// values as written, `${VAR}` references included: the client expands them in `env` as it
/// did in `headers`). The URL keeps its exact bytes; every other member and byte stays.
/// Returns the splices and the header lines written (`None`: the entry had no headers).
pub fn wrap_remote_splices(
    text: &str,
    root: &Node,
    format: Format,
    path: &[String],
    name: &str,
    wrapper: &str,
) -> Result<(Vec<Splice>, Option<String>), EditError> {
    let no_entry = || EditError::NoEntry(path.join("."));
    if format == Format::Toml {
        return Err(EditError::Layout(
            "remote entries of TOML files are not rewritten".into(),
        ));
    }
    let entry = root.at(path).ok_or_else(no_entry)?;
    let url = entry
        .member("url")
        .or_else(|| entry.member("serverUrl"))
        .filter(|m| m.value.as_str().is_some())
        .ok_or_else(no_entry)?;
    let style = member_style(text, format, entry, url)?;
    let lit = |s: &str| string_literal(format, s);
    let mut args = name_literals(format, name);
    args.extend([lit("--upstream"), text[url.value.span.clone()].to_string()]);
    let mut splices = vec![Splice {
        range: url.key_span.start..url.value.span.end,
        with: format!(
            "{}{}{}{}{}{}[{}]",
            lit("command"),
            style.colon,
            lit(wrapper),
            style.separator,
            lit("args"),
            style.colon,
            args.join(style.item_separator)
        ),
    }];
    if let Some(ty) = entry.member("type") {
        splices.push(Splice {
            range: ty.value.span.clone(),
            with: lit("stdio"),
        });
    }
    let mut lines = None;
    if let Some(headers) = entry.member("headers") {
        let mut text_lines = Vec::new();
        for h in headers.value.members().ok_or_else(no_entry)? {
            let value = h.value.as_str().ok_or_else(no_entry)?;
            text_lines.push(format!("{}: {value}", h.key));
        }
        if text_lines.is_empty() {
            splices.push(remove_member(text, format, entry, "headers")?);
        } else {
            let joined = text_lines.join("\n");
            splices.push(Splice {
                range: headers.key_span.start..headers.value.span.end,
                with: format!(
                    "{}{}{{{}{}{}}}",
                    lit("env"),
                    style.colon,
                    lit(super::entry::UPSTREAM_HEADERS_ENV),
                    style.colon,
                    lit(&joined)
                ),
            });
            lines = Some(joined);
        }
    }
    Ok((splices, lines))
}

/// Undo [`wrap_remote_splices`] on the entry as it is now: `command` becomes `key` (`url`
/// or `serverUrl`) holding the `--upstream` URL, `args` goes, a `type: stdio` becomes
/// `original_type` (the raw bytes the entry had, else `"http"`), and an `env` holding
/// only the bridge's header lines becomes `headers` again. Every other member stays.
/// `add_type`: the entry has no `type` and its client needs one for a remote server
/// (Claude Code, VS Code), so `"type": "http"` comes before the URL.
pub fn unbridge_splices(
    text: &str,
    root: &Node,
    format: Format,
    path: &[String],
    key: &str,
    original_type: Option<&str>,
    add_type: bool,
) -> Result<Vec<Splice>, EditError> {
    let no_entry = || EditError::NoEntry(path.join("."));
    if format == Format::Toml {
        return Err(EditError::Layout(
            "remote entries of TOML files are not rewritten".into(),
        ));
    }
    let entry = entry(root, path)?;
    let command = entry.member("command").expect("checked by entry()");
    let args = entry.member("args").ok_or_else(no_entry)?;
    let words: Vec<&str> = args
        .value
        .elements()
        .ok_or_else(no_entry)?
        .iter()
        .map(|e| e.as_str().ok_or_else(no_entry))
        .collect::<Result<_, _>>()?;
    let url = words
        .iter()
        .enumerate()
        .find_map(|(i, w)| match w.strip_prefix("--upstream=") {
            Some(url) => Some(url),
            None => (*w == "--upstream")
                .then(|| words.get(i + 1).copied())
                .flatten(),
        })
        .ok_or_else(no_entry)?;
    let lit = |s: &str| string_literal(format, s);
    let colon = &text[command.key_span.end..command.value.span.start];
    let type_first = if add_type && entry.member("type").is_none() {
        let style = member_style(text, format, entry, command)?;
        format!("{}{colon}{}{}", lit("type"), lit("http"), style.separator)
    } else {
        String::new()
    };
    let mut splices = vec![
        Splice {
            range: command.key_span.start..command.value.span.end,
            with: format!("{type_first}{}{colon}{}", lit(key), lit(url)),
        },
        remove_member(text, format, entry, "args")?,
    ];
    if let Some(ty) = entry.member("type")
        && ty.value.as_str() == Some("stdio")
    {
        splices.push(Splice {
            range: ty.value.span.clone(),
            with: original_type.map_or_else(|| lit("http"), str::to_string),
        });
    }
    if let Some(env) = entry.member("env") {
        let members = env.value.members().unwrap_or_default();
        let ours = members
            .iter()
            .any(|m| m.key == super::entry::UPSTREAM_HEADERS_ENV);
        if ours && members.len() > 1 {
            return Err(EditError::Layout(format!(
                "its `env` holds more than mcpwall's {}: move those headers back into `headers` by hand",
                super::entry::UPSTREAM_HEADERS_ENV
            )));
        }
        if ours {
            let lines = members[0].value.as_str().ok_or_else(no_entry)?;
            let mut pairs = Vec::new();
            for line in lines.split('\n').filter(|l| !l.trim().is_empty()) {
                let (name, value) = line.split_once(':').ok_or_else(no_entry)?;
                let value = value.strip_prefix(' ').unwrap_or(value);
                pairs.push(format!("{}{colon}{}", lit(name.trim()), lit(value)));
            }
            splices.push(Splice {
                range: env.key_span.start..env.value.span.end,
                with: format!("{}{colon}{{{}}}", lit("headers"), pairs.join(", ")),
            });
        }
    }
    Ok(splices)
}

/// `--server-name <name>` as literals of `format`; a name that starts with `-` would read
/// as a flag, so it is given in the `=` form.
fn name_literals(format: Format, name: &str) -> Vec<String> {
    if name.starts_with('-') {
        vec![string_literal(format, &format!("--server-name={name}"))]
    } else {
        vec![
            string_literal(format, "--server-name"),
            string_literal(format, name),
        ]
    }
}

/// What separates the elements of the non-empty array `args` as written: a line break and
/// the first element's indentation, `,` when the first two touch, else `inline`.
fn element_separator(text: &str, args: &Node, inline: &str) -> String {
    let elements = args.elements().unwrap_or_default();
    let Some(first) = elements.first() else {
        return inline.to_string();
    };
    let opening = &text[args.span.start + 1..first.span.start];
    match (opening.rfind('\n'), elements.get(1)) {
        (Some(nl), _) if is_blank(&opening[nl + 1..]) => {
            let line_start = args.span.start + 1 + nl + 1;
            format!(
                ",{}{}",
                newline_before(text, line_start),
                &opening[nl + 1..]
            )
        }
        (_, Some(second)) if &text[first.span.end..second.span.start] == "," => ",".to_string(),
        _ => inline.to_string(),
    }
}

/// Move an entry from the original mcpwall (Node) to this one in one edit: `command`
/// becomes `wrapper`, the original's launcher (the first `launcher_args` args: `-y
/// mcpwall`, the script path) gives way to `--server-name <name>`, and its options, `--`
/// and the server keep their exact bytes.
pub fn migrate_splices(
    text: &str,
    root: &Node,
    format: Format,
    path: &[String],
    name: &str,
    wrapper: &str,
    launcher_args: usize,
) -> Result<Vec<Splice>, EditError> {
    let entry = entry(root, path)?;
    let command = entry.member("command").expect("checked by entry()");
    let no_entry = || EditError::NoEntry(path.join("."));
    let args = &entry.member("args").ok_or_else(no_entry)?.value;
    let elements = args.elements().ok_or_else(no_entry)?;
    let kept = elements.get(launcher_args).ok_or_else(no_entry)?;
    let separator = element_separator(text, args, ", ");
    let mut with = name_literals(format, name).join(&separator);
    with.push_str(&separator);
    Ok(vec![
        Splice {
            range: command.value.span.clone(),
            with: string_literal(format, wrapper),
        },
        Splice {
            range: elements[0].span.start..kept.span.start,
            with,
        },
    ])
}

/// Undo a migration on an entry edited since: this mcpwall's `command` and `--server-name`
/// give way to the original's command and launcher args (`launcher`: their bytes from the
/// wrap record), and everything from the options on stays as the user left it.
pub fn restore_launcher_splices(
    text: &str,
    root: &Node,
    path: &[String],
    launcher: &[String],
) -> Result<Vec<Splice>, EditError> {
    let entry = entry(root, path)?;
    let command = entry.member("command").expect("checked by entry()");
    let no_entry = || EditError::NoEntry(path.join("."));
    let (launcher_command, launcher_args) = launcher.split_first().ok_or_else(no_entry)?;
    let args = &entry.member("args").ok_or_else(no_entry)?.value;
    let elements = args.elements().ok_or_else(no_entry)?;
    let ours = match elements.first().and_then(Node::as_str) {
        Some("--server-name") => 2,
        Some(a) if a.starts_with("--server-name=") => 1,
        _ => 0,
    };
    let kept = elements.get(ours).ok_or_else(no_entry)?;
    let separator = element_separator(text, args, ", ");
    let mut with = launcher_args.join(&separator);
    if !with.is_empty() {
        with.push_str(&separator);
    }
    Ok(vec![
        Splice {
            range: command.value.span.clone(),
            with: launcher_command.clone(),
        },
        Splice {
            range: elements[0].span.start..kept.span.start,
            with,
        },
    ])
}

/// The raw bytes of an entry's `command` value and of its first `n` args, in order (what
/// [`restore_launcher_splices`] puts back).
pub fn launcher_bytes(text: &str, entry: &Node, n: usize) -> Option<Vec<String>> {
    let command = entry.member("command")?;
    let mut out = vec![text[command.value.span.clone()].to_string()];
    let elements = entry.member("args")?.value.elements()?;
    for e in elements.get(..n)? {
        out.push(text[e.span.clone()].to_string());
    }
    Some(out)
}

/// Replace only the `command` of a wrapped entry (a stale mcpwall path) with `wrapper`.
pub fn repoint_splices(
    root: &Node,
    format: Format,
    path: &[String],
    wrapper: &str,
) -> Result<Vec<Splice>, EditError> {
    let command = entry(root, path)?
        .member("command")
        .expect("checked by entry()");
    Ok(vec![Splice {
        range: command.value.span.clone(),
        with: string_literal(format, wrapper),
    }])
}

/// What a wrap record keeps of an entry: its bytes (JSON), or for TOML, whose tables have
/// no single span, the bytes of its `command` and `args` values as a small JSON object.
pub fn entry_bytes(text: &str, format: Format, path: &[String]) -> Option<String> {
    entry_bytes_in(text, &parse(text, format).ok()?, format, path)
}

/// [`entry_bytes`] from an already parsed tree.
pub fn entry_bytes_in(text: &str, root: &Node, format: Format, path: &[String]) -> Option<String> {
    let entry = root.at(path)?;
    match format {
        Format::Json(_) => Some(text[entry.span.clone()].to_string()),
        Format::Toml => {
            let raw = |key: &str| entry.member(key).map(|m| &text[m.value.span.clone()]);
            Some(serde_json::json!({"command": raw("command"), "args": raw("args")}).to_string())
        }
    }
}

/// Replace the entry at `path` with `original` byte for byte (the exact restore, used
/// when the entry is still exactly what wrapping made of it).
pub fn restore_exact(
    text: &str,
    format: Format,
    path: &[String],
    original: &str,
) -> Result<String, EditError> {
    let root = parse(text, format)?;
    Ok(apply(
        text,
        restore_exact_splices(text, &root, format, path, original)?,
    ))
}

/// [`restore_exact`] as splices.
pub fn restore_exact_splices(
    text: &str,
    root: &Node,
    format: Format,
    path: &[String],
    original: &str,
) -> Result<Vec<Splice>, EditError> {
    if format == Format::Toml {
        // Wrapping touched only these two values; putting them back is the exact restore.
        return restore_command_splices(text, root, format, path, original);
    }
    let entry = root
        .at(path)
        .ok_or_else(|| EditError::NoEntry(path.join(".")))?;
    Ok(vec![Splice {
        range: entry.span.clone(),
        with: original.to_string(),
    }])
}

/// Restore only `command` and `args` from the original entry's bytes, keeping every other
/// change the user made to the entry after it was wrapped.
pub fn restore_command(
    text: &str,
    format: Format,
    path: &[String],
    original: &str,
) -> Result<String, EditError> {
    let root = parse(text, format)?;
    Ok(apply(
        text,
        restore_command_splices(text, &root, format, path, original)?,
    ))
}

/// [`restore_command`] as splices.
pub fn restore_command_splices(
    text: &str,
    root: &Node,
    format: Format,
    path: &[String],
    original: &str,
) -> Result<Vec<Splice>, EditError> {
    let (was_command, was_args) = match format {
        Format::Json(dialect) => {
            let before = json_span::parse(original, dialect)?;
            let raw = |key: &str| {
                before
                    .member(key)
                    .map(|m| original[m.value.span.clone()].to_string())
            };
            (raw("command").ok_or(EditError::BadRecord)?, raw("args"))
        }
        Format::Toml => {
            #[derive(serde::Deserialize)]
            struct Parts {
                command: String,
                args: Option<String>,
            }
            let parts: Parts = serde_json::from_str(original).map_err(|_| EditError::BadRecord)?;
            (parts.command, parts.args)
        }
    };
    let current = entry(root, path)?;
    let command = current.member("command").expect("checked by entry()");
    let mut splices = vec![Splice {
        range: command.value.span.clone(),
        with: was_command,
    }];
    match (was_args, current.member("args")) {
        (Some(was), Some(now)) => splices.push(Splice {
            range: now.value.span.clone(),
            with: was,
        }),
        (None, Some(_)) => splices.push(remove_member(text, format, current, "args")?),
        (Some(was), None) => {
            let style = member_style(text, format, current, command)?;
            splices.push(Splice {
                range: command.value.span.end..command.value.span.end,
                with: format!("{}{}{}{was}", style.separator, style.key, style.colon),
            });
        }
        (None, None) => {}
    }
    Ok(splices)
}

/// Take the wrapper off an entry no record describes (wrapped by hand, or the record was
/// lost): the command after `--` becomes the command, the arguments after it the args.
pub fn strip_wrapper(text: &str, format: Format, path: &[String]) -> Result<String, EditError> {
    let root = parse(text, format)?;
    Ok(apply(
        text,
        strip_wrapper_splices(text, &root, format, path, false)?,
    ))
}

/// [`strip_wrapper`] as splices. This is all `unwrap` ever does to an entry that is still
/// behind mcpwall: it removes mcpwall's prefix from the entry as it is now, so every later
/// edit (args, env, new keys) stays. `drop_empty_args`: the entry had no `args` before it
/// was wrapped (its record says so), so an `args` left empty goes too.
pub fn strip_wrapper_splices(
    text: &str,
    root: &Node,
    format: Format,
    path: &[String],
    drop_empty_args: bool,
) -> Result<Vec<Splice>, EditError> {
    let current = entry(root, path)?;
    let command = current.member("command").expect("checked by entry()");
    let no_entry = || EditError::NoEntry(path.join("."));
    let args = current.member("args").ok_or_else(no_entry)?;
    let elements = args.value.elements().ok_or_else(no_entry)?;
    let dash = elements
        .iter()
        .position(|e| e.as_str() == Some("--"))
        .ok_or_else(no_entry)?;
    let inner = elements.get(dash + 1).ok_or_else(no_entry)?;
    let mut splices = vec![Splice {
        range: command.value.span.clone(),
        with: text[inner.span.clone()].to_string(),
    }];
    splices.push(match elements.get(dash + 2) {
        // Drop everything up to the first real argument; the array's layout stays.
        Some(first_arg) => Splice {
            range: elements[0].span.start..first_arg.span.start,
            with: String::new(),
        },
        None if drop_empty_args => remove_member(text, format, current, "args")?,
        None => Splice {
            range: args.value.span.clone(),
            with: "[]".to_string(),
        },
    });
    Ok(splices)
}

/// Remove member `key` of `object`. In a TOML table, only its own line (a table's members
/// need not be contiguous: `[x.env]` may come before `[x]`, so a byte range between two
/// members could take a table header with it).
pub(super) fn remove_member(
    text: &str,
    format: Format,
    object: &Node,
    key: &str,
) -> Result<Splice, EditError> {
    if format == Format::Toml && text.as_bytes().get(object.span.start) != Some(&b'{') {
        let member = object
            .members()
            .unwrap_or_default()
            .iter()
            .rfind(|m| m.key == key)
            .expect("caller checked the member exists");
        // From the end of whatever precedes the line (only blanks and line breaks in
        // between) to the end of the value: a comment after the value joins the line above.
        let key_start = member.key_span.start;
        let start = text[..key_start]
            .trim_end_matches([' ', '\t', '\r', '\n'])
            .len();
        if !text[start..key_start].contains('\n') {
            return Err(EditError::Layout(format!(
                "`{key}` is not on a line of its own; remove it by hand"
            )));
        }
        let end = member.value.span.end;
        return Ok(Splice {
            range: start..end,
            with: String::new(),
        });
    }
    let members = object.members().unwrap_or_default();
    let index = members
        .iter()
        .rposition(|m| m.key == key)
        .expect("caller checked the member exists");
    let member = &members[index];
    let range = if index > 0 {
        members[index - 1].value.span.end..member.value.span.end
    } else if let Some(next) = members.get(1) {
        member.key_span.start..next.key_span.start
    } else {
        member.key_span.start..member.value.span.end
    };
    Ok(Splice {
        range,
        with: String::new(),
    })
}

/// What an edited entry must hold afterwards: its command, and its args (absent counts as
/// empty).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expect {
    /// The entry's path.
    pub path: Vec<String>,
    /// Its `command`.
    pub command: String,
    /// Its `args`.
    pub args: Vec<String>,
    /// For a remote entry made a bridge or put back: what else the edit must leave.
    pub remote: Option<RemoteExpect>,
}

/// What the edit of a remote entry must leave besides `command` and `args`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RemoteExpect {
    /// Made a bridge: no `url`, `serverUrl` or `headers`; `type`, if any, is `stdio`; `env`
    /// holds exactly these header lines (`None`: the entry had no headers, `env` untouched).
    Bridged {
        /// The `MCPWALL_UPSTREAM_HEADERS` value written.
        headers: Option<String>,
    },
    /// A Codex remote entry made a bridge: no `url` or credential keys; `env` holds
    /// exactly these variables and `env_vars` these names (each absent when empty).
    BridgedCodex {
        /// The bridge's `env`.
        env: Vec<(String, String)>,
        /// The bridge's `env_vars`.
        env_vars: Vec<String>,
    },
    /// Back to a remote entry: no `command` or `args`; `key` holds `url`.
    Restored {
        /// `url` or `serverUrl`.
        key: String,
        /// The URL.
        url: String,
    },
}

/// Members an edit of a Codex remote entry may change: the URL and credentials on one
/// side, the bridge's `command`, `args`, `env` and `env_vars` on the other.
pub const CODEX_EDITED_MEMBERS: &[&str] = &[
    "url",
    "bearer_token_env_var",
    "http_headers",
    "env_http_headers",
    "env",
    "env_vars",
];

/// The members of a remote entry an edit may change besides `command` and `args`.
const REMOTE_MEMBERS: &[&str] = &["type", "url", "serverUrl", "headers", "env"];

/// Check what [`RemoteExpect`] says of the edited `entry`.
fn check_remote(entry: &Node, e: &Expect, remote: &RemoteExpect) -> Result<(), String> {
    let at = e.path.join(".");
    let text = |key: &str| entry.member(key).map(|m| m.value.as_str());
    match remote {
        RemoteExpect::Bridged { headers } => {
            if ["url", "serverUrl", "headers"]
                .iter()
                .any(|k| entry.member(k).is_some())
            {
                return Err(format!("entry {at} still names its remote server"));
            }
            if !matches!(text("type"), None | Some(Some("stdio"))) {
                return Err(format!("entry {at} has the wrong type"));
            }
            if let Some(headers) = headers {
                let env = entry.member("env").and_then(|m| m.value.members());
                let ok = env.is_some_and(|members| {
                    members.len() == 1
                        && members[0].key == super::entry::UPSTREAM_HEADERS_ENV
                        && members[0].value.as_str() == Some(headers.as_str())
                });
                if !ok {
                    return Err(format!("entry {at} does not carry its headers"));
                }
            }
        }
        RemoteExpect::BridgedCodex { env, env_vars } => {
            if [
                "url",
                "bearer_token_env_var",
                "http_headers",
                "env_http_headers",
            ]
            .iter()
            .any(|k| entry.member(k).is_some())
            {
                return Err(format!("entry {at} still names its remote server"));
            }
            let env_now: Option<Vec<(String, String)>> = match entry.member("env") {
                None => Some(Vec::new()),
                Some(m) => m.value.members().and_then(|ms| {
                    ms.iter()
                        .map(|m| m.value.as_str().map(|v| (m.key.clone(), v.to_string())))
                        .collect()
                }),
            };
            let vars_now: Option<Vec<String>> = match entry.member("env_vars") {
                None => Some(Vec::new()),
                Some(m) => m
                    .value
                    .elements()
                    .and_then(|els| els.iter().map(|e| e.as_str().map(str::to_string)).collect()),
            };
            if env_now.as_ref() != Some(env) || vars_now.as_ref() != Some(env_vars) {
                return Err(format!(
                    "entry {at} does not carry its credentials' references"
                ));
            }
        }
        RemoteExpect::Restored { key, url } => {
            if entry.member("command").is_some() || entry.member("args").is_some() {
                return Err(format!("entry {at} still runs a command"));
            }
            if text(key) != Some(Some(url.as_str())) {
                return Err(format!("entry {at} has the wrong URL"));
            }
        }
    }
    Ok(())
}

/// Re-read an edit's result with the format's own parser and check it did what was meant:
/// each edited entry holds exactly its expected `command` and `args`, and everything else
/// (every other key and value in the file, the entries' other members) is unchanged. This
/// catches a splice that parses but means something else (a table header swallowed, a
/// member moved into a sub-table) as well as a damaged wrap record.
pub fn verify(before: &str, after: &str, format: Format, expects: &[Expect]) -> Result<(), String> {
    let before_root =
        parse(before, format).map_err(|e| format!("the original does not parse: {e}"))?;
    let after_root = parse(after, format).map_err(|e| e.to_string())?;
    for e in expects {
        let entry = after_root
            .at(&e.path)
            .ok_or_else(|| format!("entry {} is gone", e.path.join(".")))?;
        if let Some(remote) = &e.remote {
            check_remote(entry, e, remote)?;
            if matches!(remote, RemoteExpect::Restored { .. }) {
                continue;
            }
        }
        let command = entry.member("command").and_then(|c| c.value.as_str());
        if command != Some(e.command.as_str()) {
            return Err(format!("entry {} has the wrong command", e.path.join(".")));
        }
        let args: Option<Vec<&str>> = match entry.member("args") {
            None => Some(Vec::new()),
            Some(a) => a
                .value
                .elements()
                .and_then(|els| els.iter().map(Node::as_str).collect()),
        };
        if args != Some(e.args.iter().map(String::as_str).collect()) {
            return Err(format!("entry {} has the wrong args", e.path.join(".")));
        }
    }
    let mut at = Vec::new();
    let edited_members: Vec<&str> = match format {
        Format::Json(_) => REMOTE_MEMBERS.to_vec(),
        Format::Toml => CODEX_EDITED_MEMBERS.to_vec(),
    };
    let context = Outside {
        expects,
        remote_members: &edited_members,
    };
    same_outside(before, &before_root, after, &after_root, &mut at, &context)
        .map_err(|p| format!("the edit changed {p}, which it must not touch"))
}

/// What [`same_outside`] may find changed: the edited entries, and which members of a
/// remote entry an edit of the format rewrites.
struct Outside<'a> {
    expects: &'a [Expect],
    remote_members: &'a [&'a str],
}

fn same_outside(
    a_text: &str,
    a: &Node,
    b_text: &str,
    b: &Node,
    at: &mut Vec<String>,
    context: &Outside,
) -> Result<(), String> {
    let expects = context.expects;
    fn here(at: &[String]) -> String {
        if at.is_empty() {
            "the document".to_string()
        } else {
            at.join(".")
        }
    }
    match (&a.kind, &b.kind) {
        (Kind::Object(am), Kind::Object(bm)) => {
            let edited = expects.iter().find(|e| e.path == *at);
            let remote = edited.and_then(|e| e.remote.as_ref());
            // A bridge made from an entry without headers leaves its `env` as it was.
            let env_kept = matches!(remote, Some(RemoteExpect::Bridged { headers: None }));
            let keep = |m: &&Member| {
                !(edited.is_some() && (m.key == "command" || m.key == "args"))
                    && !(remote.is_some()
                        && context.remote_members.contains(&m.key.as_str())
                        && !(env_kept && m.key == "env"))
            };
            let am: Vec<&Member> = am.iter().filter(keep).collect();
            let bm: Vec<&Member> = bm.iter().filter(keep).collect();
            if am.len() != bm.len() {
                return Err(here(at));
            }
            for (x, y) in am.iter().zip(&bm) {
                if x.key != y.key {
                    return Err(here(at));
                }
                at.push(x.key.clone());
                same_outside(a_text, &x.value, b_text, &y.value, at, context)?;
                at.pop();
            }
            Ok(())
        }
        (Kind::Array(ae), Kind::Array(be)) if ae.len() == be.len() => {
            for (x, y) in ae.iter().zip(be) {
                same_outside(a_text, x, b_text, y, at, context)?;
            }
            Ok(())
        }
        (Kind::String(x), Kind::String(y)) if x == y => Ok(()),
        (Kind::Scalar, Kind::Scalar)
            if a_text.get(a.span.clone()) == b_text.get(b.span.clone()) =>
        {
            Ok(())
        }
        _ => Err(here(at)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(p: &[&str]) -> Vec<String> {
        p.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn wrap_keeps_layout_of_multiline_args() {
        let text = "{\n  \"mcpServers\": {\n    \"fs\": {\n      \"command\": \"npx\",\n      \"args\": [\n        \"-y\",\n        \"srv\"\n      ],\n      \"env\": {}\n    }\n  }\n}\n";
        let out = wrap(
            text,
            Format::Json(Dialect::Json),
            &path(&["mcpServers", "fs"]),
            "fs",
            "mcpwall",
        )
        .unwrap();
        assert_eq!(
            out,
            "{\n  \"mcpServers\": {\n    \"fs\": {\n      \"command\": \"mcpwall\",\n      \"args\": [\n        \"--server-name\",\n        \"fs\",\n        \"--\",\n        \"npx\",\n        \"-y\",\n        \"srv\"\n      ],\n      \"env\": {}\n    }\n  }\n}\n"
        );
        let back = strip_wrapper(
            &out,
            Format::Json(Dialect::Json),
            &path(&["mcpServers", "fs"]),
        )
        .unwrap();
        assert_eq!(back, text);
    }

    #[test]
    fn wrap_inserts_args_in_the_entrys_style() {
        let text = "{\"s\":{\"x\":{\"command\":\"srv\"}}}";
        let out = wrap(
            text,
            Format::Json(Dialect::Json),
            &path(&["s", "x"]),
            "x",
            "/bin/mcpwall",
        )
        .unwrap();
        assert_eq!(
            out,
            "{\"s\":{\"x\":{\"command\":\"/bin/mcpwall\",\"args\":[\"--server-name\",\"x\",\"--\",\"srv\"]}}}"
        );
        let text = "{\"s\": {\"x\": {\n\t\"command\" : \"srv\",\n\t\"cwd\": \"/\"\n}}}";
        let out = wrap(
            text,
            Format::Json(Dialect::Json),
            &path(&["s", "x"]),
            "x",
            "mcpwall",
        )
        .unwrap();
        assert_eq!(
            out,
            "{\"s\": {\"x\": {\n\t\"command\" : \"mcpwall\",\n\t\"args\" : [\"--server-name\", \"x\", \"--\", \"srv\"],\n\t\"cwd\": \"/\"\n}}}"
        );
        let original = "{\n\t\"command\" : \"srv\",\n\t\"cwd\": \"/\"\n}";
        let back = restore_command(
            &out,
            Format::Json(Dialect::Json),
            &path(&["s", "x"]),
            original,
        )
        .unwrap();
        assert_eq!(back, text);
    }

    #[test]
    fn a_name_like_a_flag_uses_the_equals_form() {
        let text = r#"{"-x": {"command": "srv"}}"#;
        let out = wrap(
            text,
            Format::Json(Dialect::Json),
            &path(&["-x"]),
            "-x",
            "mcpwall",
        )
        .unwrap();
        assert_eq!(
            out,
            r#"{"-x": {"command": "mcpwall", "args": ["--server-name=-x", "--", "srv"]}}"#
        );
    }

    #[test]
    fn toml_tables_wrap_and_come_back_byte_exact() {
        let text = "# Codex\nmodel = \"o3\"\n\n[mcp_servers.docs]\ncommand = 'npx' # launcher\nargs = [\n  \"-y\", # yes\n  \"srv\",\n]\n\n[mcp_servers.bare]\n  command = \"srv\"\n  env = { K = \"v\" }\n\n[mcp_servers.inline]\nx = { command = \"a\" }\n";
        let docs = path(&["mcp_servers", "docs"]);
        let out = wrap(text, Format::Toml, &docs, "docs", "mcpwall").unwrap();
        assert!(
            out.contains("command = \"mcpwall\" # launcher\nargs = [\n  \"--server-name\",\n  \"docs\",\n  \"--\",\n  'npx',\n  \"-y\", # yes\n"),
            "{out}"
        );
        let bare = path(&["mcp_servers", "bare"]);
        let out2 = wrap(&out, Format::Toml, &bare, "bare", "mcpwall").unwrap();
        assert!(
            out2.contains("  command = \"mcpwall\"\n  args = [\"--server-name\", \"bare\", \"--\", \"srv\"]\n  env"),
            "{out2}"
        );
        toml_edit::Document::parse(out2.as_str()).unwrap();
        let original = entry_bytes(&out, Format::Toml, &bare).unwrap();
        let back = restore_exact(&out2, Format::Toml, &bare, &original).unwrap();
        assert_eq!(back, out);
        assert_eq!(strip_wrapper(&out, Format::Toml, &docs).unwrap(), text);
        let original = entry_bytes(text, Format::Toml, &docs).unwrap();
        assert_eq!(
            restore_exact(&out, Format::Toml, &docs, &original).unwrap(),
            text
        );
    }

    #[test]
    fn toml_dotted_keys_without_args_are_refused() {
        let text = "mcp_servers.x.command = \"srv\"\n";
        let err = wrap(
            text,
            Format::Toml,
            &path(&["mcp_servers", "x"]),
            "x",
            "mcpwall",
        );
        assert!(matches!(err, Err(EditError::Layout(_))), "{err:?}");
        let text = "[mcp_servers]\nx = { command = \"srv\" }\n";
        let out = wrap(
            text,
            Format::Toml,
            &path(&["mcp_servers", "x"]),
            "x",
            "mcpwall",
        )
        .unwrap();
        assert_eq!(
            out,
            "[mcp_servers]\nx = { command = \"mcpwall\", args = [\"--server-name\", \"x\", \"--\", \"srv\"] }\n"
        );
    }

    #[test]
    fn crlf_files_keep_crlf() {
        let text = "{\r\n  \"x\": {\r\n    \"command\": \"srv\",\r\n    \"args\": [\r\n      \"a\"\r\n    ]\r\n  }\r\n}\r\n";
        let out = wrap(
            text,
            Format::Json(Dialect::Json),
            &path(&["x"]),
            "x",
            "mcpwall",
        )
        .unwrap();
        assert!(!out.replace("\r\n", "").contains('\n'), "{out:?}");
        let text = "{\r\n  \"x\": {\r\n    \"command\": \"srv\"\r\n  }\r\n}\r\n";
        let out = wrap(
            text,
            Format::Json(Dialect::Json),
            &path(&["x"]),
            "x",
            "mcpwall",
        )
        .unwrap();
        assert!(out.contains("\"mcpwall\",\r\n    \"args\": ["), "{out:?}");
    }

    #[test]
    fn restore_command_keeps_other_edits() {
        let original = "{ \"command\": \"node\", \"args\": [\"a.js\"] }";
        let text = "{\"x\": { \"command\": \"mcpwall\", \"args\": [\"--server-name\", \"x\", \"--\", \"node\", \"a.js\"], \"env\": {\"K\": \"1\"} }}";
        let out =
            restore_command(text, Format::Json(Dialect::Json), &path(&["x"]), original).unwrap();
        assert_eq!(
            out,
            "{\"x\": { \"command\": \"node\", \"args\": [\"a.js\"], \"env\": {\"K\": \"1\"} }}"
        );
    }

    /// Issue 29: every character a name or the wrapper's path may hold is written in a
    /// form the format's grammar accepts, and reads back as itself (checked with the
    /// format's own parsers: serde_json, toml_edit).
    #[test]
    fn r29_writers_escape_everything_their_grammar_requires() {
        let mut names: Vec<String> = (0u32..0x20)
            .chain([0x7f])
            .map(|c| format!("a{}b", char::from_u32(c).unwrap()))
            .collect();
        names.extend(
            [
                "q\"uote",
                "back\\slash",
                "it's",
                "café",
                "日本",
                "🦀",
                "x\u{2028}y",
                "-dash\u{7f}",
                "#[x]",
            ]
            .map(String::from),
        );
        let formats = [
            Format::Json(Dialect::Json),
            Format::Json(Dialect::Jsonc),
            Format::Toml,
        ];
        for format in formats {
            for name in &names {
                let lit = |v: &str| string_literal(format, v);
                let (text, p) = match format {
                    Format::Toml => (
                        format!("[mcp_servers.{}]\ncommand = {}\n", lit(name), lit(name)),
                        path(&["mcp_servers", name]),
                    ),
                    Format::Json(_) => (
                        format!(
                            "{{\"mcpServers\": {{{}: {{\"command\": {}}}}}}}",
                            lit(name),
                            lit(name)
                        ),
                        path(&["mcpServers", name]),
                    ),
                };
                let wrapper = format!("/opt/{name}/mcpwall");
                let out = wrap(&text, format, &p, name, &wrapper)
                    .unwrap_or_else(|e| panic!("{format:?} {name:?}: {e}\n{text}"));
                let independent = match format {
                    Format::Toml => toml_edit::Document::parse(out.as_str())
                        .map(|_| ())
                        .map_err(|e| e.to_string()),
                    Format::Json(_) => serde_json::from_str::<serde_json::Value>(&out)
                        .map(|_| ())
                        .map_err(|e| e.to_string()),
                };
                assert!(
                    independent.is_ok(),
                    "{format:?} {name:?}: {independent:?}\n{out}"
                );
                let mut args = wrap_prefix_for_test(name);
                args.push(name.clone());
                let expect = Expect {
                    path: p.clone(),
                    command: wrapper.clone(),
                    args,
                    remote: None,
                };
                verify(&text, &out, format, &[expect])
                    .unwrap_or_else(|e| panic!("{format:?} {name:?}: {e}\n{out}"));
                let back = strip_wrapper(&out, format, &p).unwrap();
                let root = parse(&back, format).unwrap();
                assert_eq!(
                    root.at(&p)
                        .unwrap()
                        .member("command")
                        .unwrap()
                        .value
                        .as_str(),
                    Some(name.as_str()),
                    "{format:?}"
                );
            }
        }
    }

    fn wrap_prefix_for_test(name: &str) -> Vec<String> {
        let mut v = if name.starts_with('-') {
            vec![format!("--server-name={name}")]
        } else {
            vec!["--server-name".to_string(), name.to_string()]
        };
        v.push("--".into());
        v
    }

    /// Issue 29: `[x.env]` before `[x]`, and `args` moved below other keys or away from
    /// `command`: unwrapping removes only mcpwall's part; no header or key moves.
    #[test]
    fn r29_toml_sub_tables_stay_in_their_place() {
        let x = path(&["mcp_servers", "x"]);
        let cases = [
            "[mcp_servers.x.env]\nK = \"v\"\n\n[mcp_servers.x]\ncommand = \"srv\"\n",
            "[mcp_servers.x.env]\nK = \"v\"\n\n[mcp_servers.x]\ncommand = \"srv\"\ntimeout = 3\nargs = [\"a\"]\n",
            "[mcp_servers.x]\nargs = [\"a\", \"b\"] # moved up\nname = \"n\"\ncommand = \"srv\"\n[mcp_servers.x.env]\nK = \"v\"\n",
            "[mcp_servers.x]\ncommand = \"srv\"\n\n[mcp_servers.x.env]\nK = \"v\"\n[other]\nargs = 1\n",
        ];
        for text in cases {
            let out = wrap(text, Format::Toml, &x, "x", "mcpwall").unwrap();
            toml_edit::Document::parse(out.as_str()).unwrap();
            let root = parse(&out, Format::Toml).unwrap();
            let before = parse(text, Format::Toml).unwrap();
            let was: Vec<String> = match before.at(&x).unwrap().member("args") {
                Some(a) => a
                    .value
                    .elements()
                    .unwrap()
                    .iter()
                    .map(|e| e.as_str().unwrap().to_string())
                    .collect(),
                None => Vec::new(),
            };
            let mut args = wrap_prefix_for_test("x");
            args.push("srv".into());
            args.extend(was.iter().cloned());
            verify(
                text,
                &out,
                Format::Toml,
                &[Expect {
                    path: x.clone(),
                    command: "mcpwall".into(),
                    args,
                    remote: None,
                }],
            )
            .unwrap_or_else(|e| panic!("{e}\n{out}"));
            assert!(root.at(&x).is_some());
            // Taking the wrapper off, with and without dropping an emptied `args`.
            for drop_empty in [false, true] {
                let splices = strip_wrapper_splices(
                    &out,
                    &root,
                    Format::Toml,
                    &x,
                    drop_empty && was.is_empty(),
                )
                .unwrap();
                let back = apply(&out, splices);
                verify(
                    &out,
                    &back,
                    Format::Toml,
                    &[Expect {
                        path: x.clone(),
                        command: "srv".into(),
                        args: was.clone(),
                        remote: None,
                    }],
                )
                .unwrap_or_else(|e| panic!("{e}\n{back}"));
                if drop_empty && was.is_empty() {
                    assert_eq!(back, text);
                }
            }
        }
    }

    /// A remote entry in any member order (headers first, empty headers, no `type`) becomes
    /// a bridge, and taking the bridge off the entry as it is gives the remote entry back.
    #[test]
    fn remote_entries_bridge_and_come_back_in_any_member_order() {
        let json = Format::Json(Dialect::Jsonc);
        let x = path(&["s", "x"]);
        let cases = [
            (
                r#"{"s": {"x": {"headers": {"K": "v ${T}"}, "url": "https://h/mcp", "type": "http"}}}"#,
                r#"{"s": {"x": {"env": {"MCPWALL_UPSTREAM_HEADERS": "K: v ${T}"}, "command": "mcpwall", "args": ["--server-name", "x", "--upstream", "https://h/mcp"], "type": "stdio"}}}"#,
            ),
            (
                r#"{"s": {"x": {"headers": {}, "url": "https://h/mcp"}}}"#,
                r#"{"s": {"x": {"command": "mcpwall", "args": ["--server-name", "x", "--upstream", "https://h/mcp"]}}}"#,
            ),
            (
                r#"{"s": {"x": {"serverUrl": "https://h/mcp", "disabled": false}}}"#,
                r#"{"s": {"x": {"command": "mcpwall", "args": ["--server-name", "x", "--upstream", "https://h/mcp"], "disabled": false}}}"#,
            ),
        ];
        for (before, after) in cases {
            let root = parse(before, json).unwrap();
            let (splices, _) =
                wrap_remote_splices(before, &root, json, &x, "x", "mcpwall").unwrap();
            let out = apply(before, splices);
            assert_eq!(out, after);
            let key = if before.contains("serverUrl") {
                "serverUrl"
            } else {
                "url"
            };
            let root = parse(&out, json).unwrap();
            let back = apply(
                &out,
                unbridge_splices(&out, &root, json, &x, key, None, false).unwrap(),
            );
            let expect = Expect {
                path: x.clone(),
                command: String::new(),
                args: Vec::new(),
                remote: Some(RemoteExpect::Restored {
                    key: key.into(),
                    url: "https://h/mcp".into(),
                }),
            };
            verify(&out, &back, json, &[expect]).unwrap_or_else(|e| panic!("{e}\n{back}"));
            let restored: serde_json::Value = serde_json::from_str(&back).unwrap();
            let mut was: serde_json::Value = serde_json::from_str(before).unwrap();
            if was["s"]["x"]["headers"] == serde_json::json!({}) {
                was["s"]["x"].as_object_mut().unwrap().remove("headers");
            }
            assert_eq!(restored, was, "{back}");
        }
    }

    /// A record's original bytes that do not describe the entry are caught by `verify`.
    #[test]
    fn r29_verify_catches_a_damaged_restore() {
        let x = path(&["mcp_servers", "x"]);
        let text = "[mcp_servers.x]\ncommand = \"mcpwall\"\nargs = [\"--server-name\", \"x\", \"--\", \"srv\"]\n";
        let root = parse(text, Format::Toml).unwrap();
        let damaged = r#"{"command":"\"srv\"\n[evil]\nk = 1","args":null}"#;
        let splices = restore_exact_splices(text, &root, Format::Toml, &x, damaged).unwrap();
        let out = apply(text, splices);
        let expect = Expect {
            path: x,
            command: "srv".into(),
            args: vec![],
            remote: None,
        };
        assert!(
            verify(text, &out, Format::Toml, &[expect]).is_err(),
            "{out}"
        );
    }
}
