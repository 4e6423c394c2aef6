//! Byte-splicing edits of one server entry: wrap, and the two ways back.
//!
//! Only the bytes of `command` and `args` change (or, on an exact restore, the entry's own
//! bytes); every other byte of the file (key order, indentation, comments, the trailing
//! newline) stays as it was. Each function takes the whole text and returns the new text.

use std::ops::Range;

use super::json_span::{Dialect, Member, Node, parse};

/// Why an entry could not be edited.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EditError {
    /// The file does not parse (it was valid when the plan was made; it changed since).
    #[error("the file is not valid JSON: {0}")]
    Syntax(#[from] super::json_span::SyntaxError),
    /// The entry is gone, or is not an object with a string `command`.
    #[error("entry {0} is missing or has no string `command`")]
    NoEntry(String),
}

/// One replacement of a byte range.
struct Splice {
    range: Range<usize>,
    with: String,
}

fn apply(text: &str, mut splices: Vec<Splice>) -> String {
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

/// How members of this entry are written: the bytes between a key and its value (`": "`)
/// and the separator before a new member (`",\n    "` or `", "`).
struct MemberStyle {
    colon: String,
    separator: String,
}

fn member_style(text: &str, entry: &Node, anchor: &Member) -> MemberStyle {
    let colon = text[anchor.key_span.end..anchor.value.span.start].to_string();
    let colon = if colon.chars().all(|c| c == ':' || c == ' ' || c == '\t') {
        colon
    } else {
        ": ".to_string()
    };
    let line_start = text[..anchor.key_span.start].rfind('\n').map(|i| i + 1);
    let indent = line_start.map(|s| &text[s..anchor.key_span.start]);
    let separator = match indent {
        Some(indent) if line_start.unwrap_or(0) > entry.span.start && is_blank(indent) => {
            format!(",{}{indent}", newline_before(text, line_start.unwrap_or(0)))
        }
        _ if colon == ":" => ",".to_string(),
        _ => ", ".to_string(),
    };
    MemberStyle { colon, separator }
}

/// The line break ending just before `line_start`: `\r\n` in files written on Windows.
fn newline_before(text: &str, line_start: usize) -> &'static str {
    if text[..line_start].ends_with("\r\n") {
        "\r\n"
    } else {
        "\n"
    }
}

fn is_blank(s: &str) -> bool {
    s.chars().all(|c| c == ' ' || c == '\t')
}

fn json_string(s: &str) -> String {
    serde_json::to_string(s).expect("a string always serialises")
}

/// Put `wrapper` in front of the entry at `path`:
/// `"command": wrapper, "args": ["--server-name", name, "--", <orig command>, <orig args>…]`.
/// The original command and arguments keep their exact bytes.
pub fn wrap(
    text: &str,
    dialect: Dialect,
    path: &[String],
    name: &str,
    wrapper: &str,
) -> Result<String, EditError> {
    let root = parse(text, dialect)?;
    let entry = entry(&root, path)?;
    let command = entry.member("command").expect("checked by entry()");
    let original_command = &text[command.value.span.clone()];
    let prefix = [
        json_string("--server-name"),
        json_string(name),
        json_string("--"),
        original_command.to_string(),
    ];
    let mut splices = vec![Splice {
        range: command.value.span.clone(),
        with: json_string(wrapper),
    }];
    let style = member_style(text, entry, command);
    let inline_separator = if style.colon == ":" { "," } else { ", " };
    match entry.member("args").map(|a| &a.value) {
        Some(args) => match args.elements() {
            Some([first, rest @ ..]) => {
                let opening = &text[args.span.start + 1..first.span.start];
                let separator = match (opening.rfind('\n'), rest.first()) {
                    (Some(nl), _) if is_blank(&opening[nl + 1..]) => {
                        let line_start = args.span.start + 1 + nl + 1;
                        format!(
                            ",{}{}",
                            newline_before(text, line_start),
                            &opening[nl + 1..]
                        )
                    }
                    (_, Some(second)) if &text[first.span.end..second.span.start] == "," => {
                        ",".to_string()
                    }
                    _ => inline_separator.to_string(),
                };
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
        None => splices.push(Splice {
            range: command.value.span.end..command.value.span.end,
            with: format!(
                "{}\"args\"{}[{}]",
                style.separator,
                style.colon,
                prefix.join(inline_separator)
            ),
        }),
    }
    Ok(apply(text, splices))
}

/// The bytes of the entry at `path`, if it exists.
pub fn entry_bytes(text: &str, dialect: Dialect, path: &[String]) -> Option<String> {
    let root = parse(text, dialect).ok()?;
    root.at(path).map(|e| text[e.span.clone()].to_string())
}

/// Replace the entry at `path` with `original` byte for byte (the exact restore, used
/// when the entry is still exactly what wrapping made of it).
pub fn restore_exact(
    text: &str,
    dialect: Dialect,
    path: &[String],
    original: &str,
) -> Result<String, EditError> {
    let root = parse(text, dialect)?;
    let entry = root
        .at(path)
        .ok_or_else(|| EditError::NoEntry(path.join(".")))?;
    Ok(apply(
        text,
        vec![Splice {
            range: entry.span.clone(),
            with: original.to_string(),
        }],
    ))
}

/// Restore only `command` and `args` from the original entry's bytes, keeping every other
/// change the user made to the entry after it was wrapped.
pub fn restore_command(
    text: &str,
    dialect: Dialect,
    path: &[String],
    original: &str,
) -> Result<String, EditError> {
    let root = parse(text, dialect)?;
    let current = entry(&root, path)?;
    let before = parse(original, dialect)?;
    let original_command = before
        .member("command")
        .ok_or_else(|| EditError::NoEntry(path.join(".")))?;
    let command = current.member("command").expect("checked by entry()");
    let mut splices = vec![Splice {
        range: command.value.span.clone(),
        with: original[original_command.value.span.clone()].to_string(),
    }];
    match (before.member("args"), current.member("args")) {
        (Some(was), Some(now)) => splices.push(Splice {
            range: now.value.span.clone(),
            with: original[was.value.span.clone()].to_string(),
        }),
        (None, Some(_)) => splices.push(remove_member(current, "args")),
        (Some(was), None) => {
            let style = member_style(text, current, command);
            splices.push(Splice {
                range: command.value.span.end..command.value.span.end,
                with: format!(
                    "{}\"args\"{}{}",
                    style.separator,
                    style.colon,
                    &original[was.value.span.clone()]
                ),
            });
        }
        (None, None) => {}
    }
    Ok(apply(text, splices))
}

/// Take the wrapper off an entry no record describes (wrapped by hand, or the record was
/// lost): the command after `--` becomes the command, the arguments after it the args.
pub fn strip_wrapper(text: &str, dialect: Dialect, path: &[String]) -> Result<String, EditError> {
    let root = parse(text, dialect)?;
    let current = entry(&root, path)?;
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
        None => Splice {
            range: args.value.span.clone(),
            with: "[]".to_string(),
        },
    });
    Ok(apply(text, splices))
}

/// Remove member `key` of `object` together with one separating comma.
fn remove_member(object: &Node, key: &str) -> Splice {
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
    Splice {
        range,
        with: String::new(),
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
            Dialect::Json,
            &path(&["mcpServers", "fs"]),
            "fs",
            "mcpwall",
        )
        .unwrap();
        assert_eq!(
            out,
            "{\n  \"mcpServers\": {\n    \"fs\": {\n      \"command\": \"mcpwall\",\n      \"args\": [\n        \"--server-name\",\n        \"fs\",\n        \"--\",\n        \"npx\",\n        \"-y\",\n        \"srv\"\n      ],\n      \"env\": {}\n    }\n  }\n}\n"
        );
        let back = strip_wrapper(&out, Dialect::Json, &path(&["mcpServers", "fs"])).unwrap();
        assert_eq!(back, text);
    }

    #[test]
    fn wrap_inserts_args_in_the_entrys_style() {
        let text = "{\"s\":{\"x\":{\"command\":\"srv\"}}}";
        let out = wrap(text, Dialect::Json, &path(&["s", "x"]), "x", "/bin/mcpwall").unwrap();
        assert_eq!(
            out,
            "{\"s\":{\"x\":{\"command\":\"/bin/mcpwall\",\"args\":[\"--server-name\",\"x\",\"--\",\"srv\"]}}}"
        );
        let text = "{\"s\": {\"x\": {\n\t\"command\" : \"srv\",\n\t\"cwd\": \"/\"\n}}}";
        let out = wrap(text, Dialect::Json, &path(&["s", "x"]), "x", "mcpwall").unwrap();
        assert_eq!(
            out,
            "{\"s\": {\"x\": {\n\t\"command\" : \"mcpwall\",\n\t\"args\" : [\"--server-name\", \"x\", \"--\", \"srv\"],\n\t\"cwd\": \"/\"\n}}}"
        );
        let original = "{\n\t\"command\" : \"srv\",\n\t\"cwd\": \"/\"\n}";
        let back = restore_command(&out, Dialect::Json, &path(&["s", "x"]), original).unwrap();
        assert_eq!(back, text);
    }

    #[test]
    fn crlf_files_keep_crlf() {
        let text = "{\r\n  \"x\": {\r\n    \"command\": \"srv\",\r\n    \"args\": [\r\n      \"a\"\r\n    ]\r\n  }\r\n}\r\n";
        let out = wrap(text, Dialect::Json, &path(&["x"]), "x", "mcpwall").unwrap();
        assert!(!out.replace("\r\n", "").contains('\n'), "{out:?}");
        let text = "{\r\n  \"x\": {\r\n    \"command\": \"srv\"\r\n  }\r\n}\r\n";
        let out = wrap(text, Dialect::Json, &path(&["x"]), "x", "mcpwall").unwrap();
        assert!(out.contains("\"mcpwall\",\r\n    \"args\": ["), "{out:?}");
    }

    #[test]
    fn restore_command_keeps_other_edits() {
        let original = "{ \"command\": \"node\", \"args\": [\"a.js\"] }";
        let text = "{\"x\": { \"command\": \"mcpwall\", \"args\": [\"--server-name\", \"x\", \"--\", \"node\", \"a.js\"], \"env\": {\"K\": \"1\"} }}";
        let out = restore_command(text, Dialect::Json, &path(&["x"]), original).unwrap();
        assert_eq!(
            out,
            "{\"x\": { \"command\": \"node\", \"args\": [\"a.js\"], \"env\": {\"K\": \"1\"} }}"
        );
    }
}
