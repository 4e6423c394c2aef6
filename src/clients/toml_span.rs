//! TOML (Codex's `config.toml`) read into the same span-tracked [`Node`] tree as JSON, so
//! the byte-splicing editor works on both. toml_edit parses and gives the spans; nothing
//! is ever re-serialised by it.

use toml_edit::{Item, Table, Value};

use super::json_span::{Kind, Member, Node, SyntaxError, line_column};

/// Read a whole TOML document.
pub fn parse(text: &str) -> Result<Node, SyntaxError> {
    let doc = toml_edit::Document::parse(text).map_err(|e| {
        let (line, column) = line_column(text, e.span().map_or(0, |s| s.start));
        SyntaxError {
            message: e.message().trim().to_string(),
            line,
            column,
        }
    })?;
    let table = doc
        .as_item()
        .as_table()
        .expect("a parsed document's root is a table");
    let mut root = table_node(table);
    root.span = 0..text.len();
    Ok(root)
}

fn table_node(table: &Table) -> Node {
    let members = table
        .iter()
        .map(|(key, item)| Member {
            key: key.to_string(),
            key_span: table.key(key).and_then(|k| k.span()).unwrap_or(0..0),
            value: item_node(item),
        })
        .collect();
    Node {
        span: table.span().unwrap_or(0..0),
        kind: Kind::Object(members),
    }
}

fn item_node(item: &Item) -> Node {
    match item {
        Item::Value(value) => value_node(value),
        Item::Table(table) => table_node(table),
        Item::ArrayOfTables(tables) => Node {
            span: tables.span().unwrap_or(0..0),
            kind: Kind::Array(tables.iter().map(table_node).collect()),
        },
        Item::None => Node {
            span: 0..0,
            kind: Kind::Scalar,
        },
    }
}

fn value_node(value: &Value) -> Node {
    let span = value.span().unwrap_or(0..0);
    let kind = match value {
        Value::String(s) => Kind::String(s.value().clone()),
        Value::Array(items) => Kind::Array(items.iter().map(value_node).collect()),
        Value::InlineTable(table) => Kind::Object(
            table
                .iter()
                .map(|(key, v)| Member {
                    key: key.to_string(),
                    key_span: table.key(key).and_then(|k| k.span()).unwrap_or(0..0),
                    value: value_node(v),
                })
                .collect(),
        ),
        _ => Kind::Scalar,
    };
    Node { span, kind }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_point_at_values_and_keys() {
        let text = "model = \"o3\"\n\n[mcp_servers.docs]\ncommand = 'npx' # launcher\nargs = [\n  \"-y\",\n  \"srv\",\n]\nenv = { K = \"v\" }\n";
        let root = parse(text).unwrap();
        let entry = root.at(&["mcp_servers", "docs"]).unwrap();
        let command = entry.member("command").unwrap();
        assert_eq!(&text[command.key_span.clone()], "command");
        assert_eq!(&text[command.value.span.clone()], "'npx'");
        assert_eq!(command.value.as_str(), Some("npx"));
        let args = entry.member("args").unwrap();
        assert_eq!(
            &text[args.value.span.clone()],
            "[\n  \"-y\",\n  \"srv\",\n]"
        );
        let elements = args.value.elements().unwrap();
        assert_eq!(&text[elements[1].span.clone()], "\"srv\"");
        let env = entry.member("env").unwrap();
        assert_eq!(&text[env.value.span.clone()], "{ K = \"v\" }");
    }

    #[test]
    fn invalid_toml_reports_line_and_column() {
        let err = parse("[mcp_servers.x]\ncommand = \"npx\nargs = []\n").unwrap_err();
        assert_eq!(err.line, 2, "{err}");
    }
}
