//! `wrap` on remote (Streamable HTTP) entries: each JSON client's `url`/`serverUrl` entry
//! becomes a stdio entry running `mcpwall --upstream URL`, its headers carried (as written,
//! `${VAR}` references unexpanded) in `env`; `status` and `doctor` call it UNPROTECTED
//! before and protected after without printing a header value; `unwrap` puts back every
//! byte. The bridge itself, run from a wrapped entry, is tested in `tests/bridge.rs`.

use std::path::Path;
use std::process::Command;

#[path = "support/sandbox.rs"]
mod sandbox;

use sandbox::{MCPWALL, Run, Sandbox};

/// `mcpwall ARGS` with PATH holding this mcpwall first (so entries say `mcpwall`) and only
/// the system directories after it.
fn run(sandbox: &Sandbox, args: &[&str]) -> Run {
    let bin_dir = Path::new(MCPWALL).parent().unwrap();
    let mut command: Command = sandbox.command(args);
    command.env("PATH", format!("{}:/usr/bin:/bin", bin_dir.display()));
    sandbox.run_command(command, "")
}

/// A fake credential, built at run time.
fn fake_key() -> String {
    format!("{}-{}", "key", "5e1f0a9b7c3d2e4f")
}

const CLAUDE: &str = "project/.mcp.json";
const VSCODE: &str = "project/.vscode/mcp.json";
const CURSOR: &str = "project/.cursor/mcp.json";
const WINDSURF: &str = "home/.codeium/windsurf/mcp_config.json";

/// One remote entry per JSON client, each written the way that client's users write it:
/// Claude Code with CRLF line ends and a `${VAR}` header, VS Code JSONC with comments, a
/// trailing comma and an `${input:…}` header, Cursor on one line with a literal key,
/// Windsurf's `serverUrl` indented with tabs.
fn write_clients(sandbox: &Sandbox) -> Vec<(&'static str, String)> {
    let files = vec![
        (
            CLAUDE,
            "{\r\n  \"mcpServers\": {\r\n    \"api\": {\r\n      \"type\": \"http\",\r\n      \"url\": \"https://api.example.com/mcp\",\r\n      \"headers\": {\r\n        \"Authorization\": \"Bearer ${API_TOKEN}\"\r\n      }\r\n    }\r\n  }\r\n}\r\n".to_string(),
        ),
        (
            VSCODE,
            "// Team servers\n{\n  \"inputs\": [{\"type\": \"promptString\", \"id\": \"api-key\", \"password\": true}],\n  \"servers\": {\n    /* hosted, with a key */\n    \"hosted\": {\n      \"type\": \"http\", // streamable\n      \"url\": \"https://hosted.example.com/mcp\",\n      \"headers\": {\"X-Api-Key\": \"${input:api-key}\", \"X-Team\": \"blue\"}, // from the prompt\n    },\n  },\n}\n".to_string(),
        ),
        (
            CURSOR,
            format!(
                "{{\"mcpServers\":{{\"linear\":{{\"url\":\"https://linear.example.com/mcp\",\"headers\":{{\"X-Api-Key\":\"{}\"}}}}}}}}\n",
                fake_key()
            ),
        ),
        (
            WINDSURF,
            "{\n\t\"mcpServers\": {\n\t\t\"remote\": {\n\t\t\t\"serverUrl\": \"https://remote.example.com/mcp\",\n\t\t\t\"disabled\": false\n\t\t}\n\t}\n}\n".to_string(),
        ),
    ];
    for (rel, text) in &files {
        sandbox.write(rel, text);
    }
    files
}

fn assert_no_secret(run: &Run, what: &str) {
    let key = fake_key();
    assert!(
        !run.stdout.contains(&key) && !run.stderr.contains(&key),
        "{what} printed a header value:\n{}\n{}",
        run.stdout,
        run.stderr
    );
}

#[test]
fn remote_entries_become_bridges_and_unwrap_restores_every_byte() {
    let sandbox = Sandbox::new();
    let files = write_clients(&sandbox);

    let status = run(&sandbox, &["status"]);
    assert_eq!(status.code, 1, "unprotected servers: {}", status.stdout);
    for line in [
        "UNPROTECTED  api  remote https://api.example.com/mcp (headers: Authorization)  (run `mcpwall wrap api`",
        "UNPROTECTED  hosted  remote https://hosted.example.com/mcp (headers: X-Api-Key, X-Team)",
        "UNPROTECTED  linear  remote https://linear.example.com/mcp (headers: X-Api-Key)",
        "UNPROTECTED  remote  remote https://remote.example.com/mcp  (run",
    ] {
        assert!(status.stdout.contains(line), "{line}\n{}", status.stdout);
    }
    assert_no_secret(&status, "status");
    let doctor = run(&sandbox, &["doctor"]);
    assert!(
        doctor
            .stdout
            .contains("not protected by mcpwall: remote https://api.example.com/mcp"),
        "{}",
        doctor.stdout
    );
    assert_no_secret(&doctor, "doctor");

    let wrap = run(&sandbox, &["wrap", "--all"]);
    assert_eq!(wrap.code, 0, "{}\n{}", wrap.stdout, wrap.stderr);
    assert_no_secret(&wrap, "wrap");
    // Claude Code: CRLF kept, the URL's bytes kept, the header as written in `env`.
    assert_eq!(
        sandbox.read(CLAUDE),
        "{\r\n  \"mcpServers\": {\r\n    \"api\": {\r\n      \"type\": \"stdio\",\r\n      \"command\": \"mcpwall\",\r\n      \"args\": [\"--server-name\", \"api\", \"--upstream\", \"https://api.example.com/mcp\"],\r\n      \"env\": {\"MCPWALL_UPSTREAM_HEADERS\": \"Authorization: Bearer ${API_TOKEN}\"}\r\n    }\r\n  }\r\n}\r\n"
    );
    // VS Code: every comment and the trailing commas stay where they were.
    assert_eq!(
        sandbox.read(VSCODE),
        "// Team servers\n{\n  \"inputs\": [{\"type\": \"promptString\", \"id\": \"api-key\", \"password\": true}],\n  \"servers\": {\n    /* hosted, with a key */\n    \"hosted\": {\n      \"type\": \"stdio\", // streamable\n      \"command\": \"mcpwall\",\n      \"args\": [\"--server-name\", \"hosted\", \"--upstream\", \"https://hosted.example.com/mcp\"],\n      \"env\": {\"MCPWALL_UPSTREAM_HEADERS\": \"X-Api-Key: ${input:api-key}\\nX-Team: blue\"}, // from the prompt\n    },\n  },\n}\n"
    );
    // Cursor: one line, in its compact style; the literal key moves, it is not copied.
    let cursor: serde_json::Value = serde_json::from_str(&sandbox.read(CURSOR)).unwrap();
    assert_eq!(
        cursor["mcpServers"]["linear"],
        serde_json::json!({
            "command": "mcpwall",
            "args": ["--server-name", "linear", "--upstream", "https://linear.example.com/mcp"],
            "env": {"MCPWALL_UPSTREAM_HEADERS": format!("X-Api-Key: {}", fake_key())},
        })
    );
    assert_eq!(sandbox.read(CURSOR).lines().count(), 1);
    assert_eq!(sandbox.read(CURSOR).matches(&fake_key()).count(), 1);
    // Windsurf: `serverUrl` gives way to the command, tabs kept, `disabled` kept.
    assert_eq!(
        sandbox.read(WINDSURF),
        "{\n\t\"mcpServers\": {\n\t\t\"remote\": {\n\t\t\t\"command\": \"mcpwall\",\n\t\t\t\"args\": [\"--server-name\", \"remote\", \"--upstream\", \"https://remote.example.com/mcp\"],\n\t\t\t\"disabled\": false\n\t\t}\n\t}\n}\n"
    );

    let status = run(&sandbox, &["status"]);
    assert_eq!(status.code, 0, "{}", status.stdout);
    for name in ["api", "hosted", "linear", "remote"] {
        assert!(
            status
                .stdout
                .lines()
                .any(|l| l.contains(&format!("protected    {name}  remote "))
                    && l.contains("via mcpwall --upstream")),
            "{name}: {}",
            status.stdout
        );
    }
    assert_no_secret(&status, "status");
    let json = run(&sandbox, &["status", "--format", "json"]);
    let rows: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(rows["unprotected"], 0);
    assert_eq!(rows["protected"], 4);
    let doctor = run(&sandbox, &["doctor"]);
    assert!(
        doctor
            .stdout
            .contains("protected; remote https://api.example.com/mcp via mcpwall --upstream"),
        "{}",
        doctor.stdout
    );
    assert_no_secret(&doctor, "doctor");

    // Again: nothing to change.
    let again = run(&sandbox, &["wrap", "api"]);
    assert!(again.stdout.contains("already wrapped"), "{}", again.stdout);

    let unwrap = run(&sandbox, &["unwrap", "--all"]);
    assert_eq!(unwrap.code, 0, "{}\n{}", unwrap.stdout, unwrap.stderr);
    assert_no_secret(&unwrap, "unwrap");
    for (rel, text) in &files {
        assert_eq!(
            &sandbox.read(rel),
            text,
            "{rel} is not restored byte for byte"
        );
    }
    let status = run(&sandbox, &["status"]);
    assert_eq!(status.code, 1);
}

#[test]
fn an_entry_edited_after_wrapping_unwraps_to_a_remote_entry_keeping_the_edits() {
    let sandbox = Sandbox::new();
    write_clients(&sandbox);
    assert_eq!(run(&sandbox, &["wrap", "api"]).code, 0);
    // The user moves the server and adds a key to the wrapped entry.
    let edited = sandbox
        .read(CLAUDE)
        .replace(
            "https://api.example.com/mcp",
            "https://api2.example.com/mcp",
        )
        .replace(
            "\"type\": \"stdio\",",
            "\"type\": \"stdio\",\r\n      \"timeout\": 30,",
        );
    sandbox.write(CLAUDE, &edited);
    let unwrap = run(&sandbox, &["unwrap", "api"]);
    assert!(
        unwrap.stdout.contains("made a remote entry again") && unwrap.code == 0,
        "{}\n{}",
        unwrap.stdout,
        unwrap.stderr
    );
    let text = sandbox.read(CLAUDE);
    assert!(!text.replace("\r\n", "").contains('\n'), "{text:?}");
    let entry: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        entry["mcpServers"]["api"],
        serde_json::json!({
            "type": "http",
            "timeout": 30,
            "url": "https://api2.example.com/mcp",
            "headers": {"Authorization": "Bearer ${API_TOKEN}"},
        })
    );
}

#[test]
fn remote_entries_the_bridge_cannot_serve_are_left_with_the_reason() {
    let sandbox = Sandbox::new();
    let cases: &[(&str, &str, &str)] = &[
        (
            "helper",
            r#"{"type": "http", "url": "https://h.example/mcp", "headersHelper": "/bin/get-token"}"#,
            "client-side `headersHelper`",
        ),
        (
            "newline",
            r#"{"type": "http", "url": "https://h.example/mcp", "headers": {"X-A": "a\nX-Evil: b"}}"#,
            "the value of header `X-A` holds a line break",
        ),
        (
            "accent",
            r#"{"type": "http", "url": "https://h.example/mcp", "headers": {"X-A": "café"}}"#,
            "holds non-ASCII characters",
        ),
        (
            "host",
            r#"{"type": "http", "url": "https://h.example/mcp", "headers": {"Host": "other"}}"#,
            "header `Host` is one the bridge sets itself",
        ),
        (
            "userinfo",
            r#"{"type": "http", "url": "https://me:pw@h.example/mcp"}"#,
            "holds a user name or password",
        ),
        (
            "query",
            r#"{"type": "http", "url": "https://h.example/mcp?key=${QUERY_KEY}"}"#,
            "has a query (`?…`)",
        ),
        (
            "both",
            r#"{"type": "http", "url": "https://h.example/mcp", "headers": {"X-A": "1"}, "env": {"K": "v"}}"#,
            "both `headers` and `env`",
        ),
        (
            "socket",
            r#"{"type": "ws", "url": "https://h.example/ws"}"#,
            "`type: ws` with `url` is not a transport mcpwall can relay",
        ),
        (
            "ftp",
            r#"{"type": "http", "url": "ftp://h.example/mcp"}"#,
            "is not an http:// or https:// URL",
        ),
    ];
    let entries: Vec<String> = cases
        .iter()
        .map(|(name, entry, _)| format!("\"{name}\": {entry}"))
        .collect();
    let text = format!("{{\"mcpServers\": {{{}}}}}\n", entries.join(", "));
    sandbox.write(CLAUDE, &text);
    let wrap = run(&sandbox, &["wrap", "--all"]);
    assert_eq!(sandbox.read(CLAUDE), text, "{}", wrap.stdout);
    let status = run(&sandbox, &["status"]);
    for (name, _, why) in cases {
        let line = status
            .stdout
            .lines()
            .find(|l| l.contains(&format!("skipped      {name}  ")))
            .unwrap_or_else(|| panic!("{name}: {}", status.stdout));
        assert!(line.contains(why), "{name}: {line}");
        let wrap = run(&sandbox, &["wrap", name]);
        assert!(
            wrap.stdout.contains(&format!("skipped          {name}: ")),
            "{name}: {}",
            wrap.stdout
        );
    }
    // Neither the password nor the query of a URL, nor a header value, is shown.
    assert!(
        !status.stdout.contains("pw@")
            && !status.stdout.contains("QUERY_KEY")
            && !status.stdout.contains("X-Evil")
    );
    assert_eq!(sandbox.read(CLAUDE), text);
}

#[test]
fn a_bridge_whose_policy_cannot_load_is_broken_not_protected() {
    let sandbox = Sandbox::new();
    sandbox.write(
        CLAUDE,
        r#"{"mcpServers": {"api": {"command": "mcpwall", "args": ["-c", "missing.yml", "--server-name", "api", "--upstream", "https://api.example.com/mcp"]}}}"#,
    );
    let status = run(&sandbox, &["status"]);
    assert_eq!(status.code, 1, "{}", status.stdout);
    assert!(
        status.stdout.contains("BROKEN       api  remote https://api.example.com/mcp via mcpwall --upstream  cannot start: its policy file ./missing.yml (`-c`) does not exist"),
        "{}",
        status.stdout
    );
    let doctor = run(&sandbox, &["doctor"]);
    assert!(
        doctor.stdout.contains("cannot start: its policy file"),
        "{}",
        doctor.stdout
    );
    // Wrapped by hand (no record): unwrap makes it a remote entry from what it holds.
    let unwrap = run(&sandbox, &["unwrap", "api"]);
    assert_eq!(unwrap.code, 0, "{}\n{}", unwrap.stdout, unwrap.stderr);
    assert!(
        unwrap
            .stdout
            .contains("made again from its `--upstream` URL"),
        "{}",
        unwrap.stdout
    );
    assert_eq!(
        sandbox.read(CLAUDE),
        r#"{"mcpServers": {"api": {"type": "http", "url": "https://api.example.com/mcp"}}}"#
    );
}

#[test]
fn a_bridge_whose_mcpwall_is_gone_is_pointed_at_this_one() {
    let sandbox = Sandbox::new();
    let gone = sandbox.root().join("old-build/mcpwall");
    let text = format!(
        "{{\"mcpServers\": {{\"api\": {{\"type\": \"stdio\", \"command\": \"{}\", \"args\": [\"--server-name\", \"api\", \"--upstream\", \"https://api.example.com/mcp\"]}}}}}}",
        gone.display()
    );
    sandbox.write(CLAUDE, &text);
    let doctor = run(&sandbox, &["doctor"]);
    assert!(doctor.stdout.contains("is not found"), "{}", doctor.stdout);
    let wrap = run(&sandbox, &["wrap", "api"]);
    assert!(wrap.stdout.contains("re-pointed"), "{}", wrap.stdout);
    assert_eq!(
        sandbox.read(CLAUDE),
        text.replace(&gone.display().to_string(), "mcpwall")
    );
}

const CODEX: &str = "home/.codex/config.toml";

/// A Codex file as its users write one: comments, a stdio server before and after, the
/// remote server's credentials as Codex keeps them (a variable for the bearer token, one
/// for a header, a literal header), a per-tool table after it.
fn codex_file() -> String {
    "# Codex\nmodel = \"o3\"\n\n[mcp_servers.local]\ncommand = \"npx\" # first\nargs = [\"-y\", \"srv\"]\n\n[mcp_servers.docs]\n# the hosted docs server\nurl = \"https://docs.example.com/mcp\" # prod\nbearer_token_env_var = \"DOCS_TOKEN\"\ntool_timeout_sec = 30\nhttp_headers = { \"X-Region\" = \"eu\" }\nenv_http_headers = { \"X-Api-Key\" = \"DOCS_KEY\" }\n\n[mcp_servers.docs.tools.search]\napproval_mode = \"approve\"\n\n[mcp_servers.after]\ncommand = \"uvx\"\n".to_string()
}

#[test]
fn a_codex_remote_entry_becomes_a_bridge_by_reference_and_unwrap_restores_every_byte() {
    let sandbox = Sandbox::new();
    let before = codex_file();
    sandbox.write(CODEX, &before);

    let status = run(&sandbox, &["status"]);
    assert_eq!(status.code, 1, "{}", status.stdout);
    assert!(
        status.stdout.contains(
            "UNPROTECTED  docs  remote https://docs.example.com/mcp (headers: Authorization, X-Region, X-Api-Key)"
        ),
        "{}",
        status.stdout
    );
    let doctor = run(&sandbox, &["doctor"]);
    assert!(
        doctor
            .stdout
            .contains("not protected by mcpwall: remote https://docs.example.com/mcp"),
        "{}",
        doctor.stdout
    );

    let wrap = run(&sandbox, &["wrap", "docs"]);
    assert_eq!(wrap.code, 0, "{}\n{}", wrap.stdout, wrap.stderr);
    // Every credential stays a reference: the variables' names, never a value; Codex passes
    // the named variables to the stdio server through `env_vars`.
    assert_eq!(
        sandbox.read(CODEX),
        "# Codex\nmodel = \"o3\"\n\n[mcp_servers.local]\ncommand = \"npx\" # first\nargs = [\"-y\", \"srv\"]\n\n[mcp_servers.docs]\n# the hosted docs server\ncommand = \"mcpwall\"\nargs = [\"--server-name\", \"docs\", \"--upstream\", \"https://docs.example.com/mcp\"] # prod\nenv = { MCPWALL_UPSTREAM_BEARER_ENV = \"DOCS_TOKEN\", MCPWALL_UPSTREAM_ENV_HEADERS = \"X-Api-Key: DOCS_KEY\", MCPWALL_UPSTREAM_HEADERS = \"X-Region: eu\" }\nenv_vars = [\"DOCS_TOKEN\", \"DOCS_KEY\"]\ntool_timeout_sec = 30\n\n[mcp_servers.docs.tools.search]\napproval_mode = \"approve\"\n\n[mcp_servers.after]\ncommand = \"uvx\"\n"
    );
    let status = run(&sandbox, &["status"]);
    assert!(
        status.stdout.lines().any(|l| l.contains(
            "protected    docs  remote https://docs.example.com/mcp via mcpwall --upstream"
        )),
        "{}",
        status.stdout
    );
    let doctor = run(&sandbox, &["doctor"]);
    assert!(
        doctor
            .stdout
            .contains("protected; remote https://docs.example.com/mcp via mcpwall --upstream"),
        "{}",
        doctor.stdout
    );
    let again = run(&sandbox, &["wrap", "docs"]);
    assert!(again.stdout.contains("already wrapped"), "{}", again.stdout);

    // Another server wrapped since, in the same file: the stretch is still found.
    assert_eq!(run(&sandbox, &["wrap", "local"]).code, 0);
    let unwrap = run(&sandbox, &["unwrap", "docs"]);
    assert_eq!(unwrap.code, 0, "{}\n{}", unwrap.stdout, unwrap.stderr);
    assert_eq!(run(&sandbox, &["unwrap", "local"]).code, 0);
    assert_eq!(sandbox.read(CODEX), before, "not restored byte for byte");
}

#[test]
fn a_codex_bridge_edited_after_wrapping_unwraps_to_a_remote_entry_keeping_the_edits() {
    let sandbox = Sandbox::new();
    sandbox.write(CODEX, &codex_file());
    assert_eq!(run(&sandbox, &["wrap", "docs"]).code, 0);
    let edited = sandbox
        .read(CODEX)
        .replace("tool_timeout_sec = 30", "tool_timeout_sec = 45");
    sandbox.write(CODEX, &edited);
    let unwrap = run(&sandbox, &["unwrap", "docs"]);
    assert_eq!(unwrap.code, 0, "{}\n{}", unwrap.stdout, unwrap.stderr);
    let text = sandbox.read(CODEX);
    let doc = toml_edit::Document::parse(text.as_str()).unwrap();
    let docs = &doc.as_table()["mcp_servers"]["docs"];
    assert_eq!(docs["url"].as_str(), Some("https://docs.example.com/mcp"));
    assert_eq!(docs["bearer_token_env_var"].as_str(), Some("DOCS_TOKEN"));
    assert_eq!(docs["http_headers"]["X-Region"].as_str(), Some("eu"));
    assert_eq!(
        docs["env_http_headers"]["X-Api-Key"].as_str(),
        Some("DOCS_KEY")
    );
    assert_eq!(docs["tool_timeout_sec"].as_integer(), Some(45));
    for gone in ["command", "args", "env", "env_vars"] {
        assert!(docs.get(gone).is_none(), "{gone} left:\n{text}");
    }
}

#[test]
fn codex_remote_entries_the_bridge_cannot_serve_are_left_with_the_reason() {
    let sandbox = Sandbox::new();
    let text = "[mcp_servers.oauthy]\nurl = \"https://o.example.com/mcp\"\nscopes = [\"read\"]\n\n[mcp_servers.odd]\nurl = \"https://odd.example.com/mcp\"\nsomething_new = true\n";
    sandbox.write(CODEX, text);
    let status = run(&sandbox, &["status"]);
    for line in [
        "oauthy  Codex remote server that signs in with OAuth (`scopes`)",
        "odd  Codex remote server with `something_new`, a setting mcpwall does not know",
    ] {
        assert!(status.stdout.contains(line), "{line}\n{}", status.stdout);
    }
    let wrap = run(&sandbox, &["wrap", "oauthy"]);
    assert!(
        wrap.stdout
            .contains("oauthy: Codex remote server that signs in with OAuth (`scopes`)"),
        "{}",
        wrap.stdout
    );
    assert_eq!(run(&sandbox, &["wrap", "--all"]).code, 0);
    assert_eq!(sandbox.read(CODEX), text);
}
