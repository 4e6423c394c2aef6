//! Property tests: for random policies (from a small alphabet of regexes, globs, roots
//! and argument names) and random frames, the compiled `Program` decides exactly as
//! the naive reference interpreter does.

mod support;

use proptest::prelude::*;
use serde_json::{Value, json};
use support::reference::Reference;
use support::{Call, TestEnv};

const ARGS: &[&str] = &["path", "command", "uri"];
const REGEXES: &[&str] = &[
    "ssh",
    "^/etc",
    r"rm\s+-rf",
    r"\.aws/credentials",
    "^ls$",
    r"main\.rs$",
    "^[0-9]+$",
    "^true$",
    "^(?i)HELLO",
    r"\.\./",
];
const GLOBS: &[&str] = &[
    "*.rs",
    "**/.ssh/**",
    "/etc/*",
    "~/.ssh/*",
    "${PROJECT_DIR}/**",
    "*passwd*",
    "read_*",
    "{a,b}*",
];
const ROOTS: &[&str] = &["${PROJECT_DIR}", "${HOME}", "/etc", "${PROJECT_DIR}/src"];
const VALUES: &[&str] = &[
    "/etc/passwd",
    "~/.ssh/id_rsa",
    ".aws//credentials",
    "src/main.rs",
    "rm -rf /",
    "ls",
    "{project}/src/a.rs",
    "../outside/x",
    "escape/y",
    "hello",
    "HELLO world",
    "C:\\Users\\u\\.ssh\\id_rsa",
    "file://{home}/.ssh/known_hosts",
    "key {aws}",
    "src/../../etc/passwd",
    "$HOME/.aws/credentials",
    "a.txt",
    "",
];
const TOOLS: &[&str] = &["read_file", "bash", "fetch"];
const METHODS: &[&str] = &["tools/call", "resources/read", "prompts/get", "ping"];

#[derive(Debug, Clone)]
enum M {
    Regex(usize),
    Glob(usize),
    NotUnder(usize),
    Secrets,
}

#[derive(Debug, Clone)]
struct Cond {
    /// Index into ARGS, or `None` for `_any_value`.
    arg: Option<usize>,
    matcher: M,
}

#[derive(Debug, Clone)]
struct InRule {
    method: Option<&'static str>,
    tool: Option<&'static str>,
    conds: Vec<Cond>,
    allow: bool,
}

fn cond() -> impl Strategy<Value = Cond> {
    (
        prop::option::weighted(0.7, 0..ARGS.len()),
        prop_oneof![
            4 => (0..REGEXES.len()).prop_map(M::Regex),
            3 => (0..GLOBS.len()).prop_map(M::Glob),
            2 => (0..ROOTS.len()).prop_map(M::NotUnder),
            1 => Just(M::Secrets),
        ],
    )
        .prop_map(|(arg, matcher)| {
            // `not_under` needs a named argument (the loader rejects it on `_any_value`).
            let arg = match (&matcher, arg) {
                (M::NotUnder(_), None) => Some(0),
                (_, a) => a,
            };
            Cond { arg, matcher }
        })
}

fn in_rule() -> impl Strategy<Value = InRule> {
    (
        prop::option::weighted(
            0.4,
            prop::sample::select(vec!["*", "resources/read", "tools/*", "ping"]),
        ),
        prop::option::weighted(
            0.4,
            prop::sample::select(vec!["read_*", "bash", "*", "fetch"]),
        ),
        prop::collection::vec(cond(), 0..3),
        any::<bool>(),
    )
        .prop_map(|(method, tool, conds, allow)| {
            let tool = if method.is_none() && tool.is_none() && conds.is_empty() {
                Some("*")
            } else {
                tool
            };
            InRule {
                method,
                tool,
                conds,
                allow,
            }
        })
}

fn yaml_policy(rules: &[InRule], default_deny: bool) -> String {
    let mut y = format!(
        "version: 1\nsettings: {{default_action: {}}}\nrules:\n",
        if default_deny { "deny" } else { "allow" }
    );
    if rules.is_empty() {
        y = y.replace("rules:\n", "");
    }
    for (i, r) in rules.iter().enumerate() {
        let mut parts = Vec::new();
        if let Some(m) = r.method {
            parts.push(format!("method: '{m}'"));
        }
        if let Some(t) = r.tool {
            parts.push(format!("tool: '{t}'"));
        }
        if !r.conds.is_empty() {
            // Group conditions by selector: one YAML mapping per argument.
            let mut by_arg: Vec<(String, Vec<String>)> = Vec::new();
            for c in &r.conds {
                let name = c.arg.map_or("_any_value", |a| ARGS[a]).to_string();
                let m = match &c.matcher {
                    M::Regex(i) => format!("regex: '{}'", REGEXES[*i]),
                    M::Glob(i) => format!("pattern: '{}'", GLOBS[*i]),
                    M::NotUnder(i) => format!("not_under: '{}'", ROOTS[*i]),
                    M::Secrets => "secrets: true".to_string(),
                };
                let key = m.split(':').next().unwrap().to_string();
                match by_arg.iter_mut().find(|(n, _)| *n == name) {
                    Some((_, ms)) if !ms.iter().any(|x| x.starts_with(&key)) => ms.push(m),
                    Some(_) => {}
                    None => by_arg.push((name, vec![m])),
                }
            }
            let args: Vec<String> = by_arg
                .iter()
                .map(|(n, ms)| format!("{n}: {{{}}}", ms.join(", ")))
                .collect();
            parts.push(format!("arguments: {{{}}}", args.join(", ")));
        }
        y.push_str(&format!(
            "  - name: r{i}\n    match: {{{}}}\n    action: {}\n",
            parts.join(", "),
            if r.allow { "allow" } else { "deny" }
        ));
    }
    y
}

fn value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        6 => prop::sample::select(VALUES).prop_map(|s| Value::String(s.to_string())),
        1 => (0u32..100).prop_map(|n| json!(n)),
        1 => any::<bool>().prop_map(Value::Bool),
        1 => Just(Value::Null),
    ];
    leaf.prop_recursive(2, 8, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
            prop::collection::vec((prop::sample::select(VALUES), inner), 0..3).prop_map(|kv| {
                Value::Object(kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
            }),
        ]
    })
}

fn request() -> impl Strategy<Value = Value> {
    (
        prop::sample::select(METHODS),
        prop::sample::select(TOOLS),
        prop::collection::vec((prop::sample::select(ARGS), value()), 0..4),
    )
        .prop_map(|(method, tool, args)| {
            let args: serde_json::Map<String, Value> =
                args.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
            let params = if method == "tools/call" {
                json!({"name": tool, "arguments": args})
            } else {
                Value::Object(args)
            };
            json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
        })
}

#[derive(Debug, Clone)]
struct OutRule {
    tool: Option<&'static str>,
    server: Option<&'static str>,
    secrets: bool,
    contains: Vec<&'static str>,
    regex: Vec<&'static str>,
    size: Option<u64>,
    action: &'static str,
}

const LITERALS: &[&str] = &["hello", "PRIVATE KEY", "passwd", "lo wo", "ssh"];
const OUT_REGEXES: &[&str] = &[r"\d{3}", "^HELLO", r"ssh-\w+", "key"];

fn out_rule() -> impl Strategy<Value = OutRule> {
    (
        prop::option::weighted(0.3, prop::sample::select(vec!["read_*", "bash"])),
        prop::option::weighted(0.2, prop::sample::select(vec!["file*", "other"])),
        prop::bool::weighted(0.3),
        prop::collection::vec(prop::sample::select(LITERALS), 0..3),
        prop::collection::vec(prop::sample::select(OUT_REGEXES), 0..2),
        prop::option::weighted(0.2, prop::sample::select(vec![40u64, 80, 200])),
        prop::sample::select(vec!["allow", "deny", "redact", "log_only"]),
    )
        .prop_map(|(tool, server, secrets, contains, regex, size, action)| {
            let mut r = OutRule {
                tool,
                server,
                secrets,
                contains,
                regex,
                size,
                action,
            };
            let no_content = !r.secrets && r.contains.is_empty() && r.regex.is_empty();
            if (r.action == "redact" && no_content)
                || r.tool.is_none()
                    && r.server.is_none()
                    && !r.secrets
                    && r.contains.is_empty()
                    && r.regex.is_empty()
                    && r.size.is_none()
            {
                r.secrets = true;
            }
            r
        })
}

fn yaml_outbound(rules: &[OutRule]) -> String {
    let mut y = String::from("version: 1\noutbound_rules:\n");
    for (i, r) in rules.iter().enumerate() {
        let mut parts = Vec::new();
        if let Some(t) = r.tool {
            parts.push(format!("tool: '{t}'"));
        }
        if let Some(s) = r.server {
            parts.push(format!("server: '{s}'"));
        }
        if r.secrets {
            parts.push("secrets: true".into());
        }
        if !r.contains.is_empty() {
            let l: Vec<String> = r.contains.iter().map(|c| format!("'{c}'")).collect();
            parts.push(format!("response_contains: [{}]", l.join(", ")));
        }
        if !r.regex.is_empty() {
            let l: Vec<String> = r.regex.iter().map(|c| format!("'{c}'")).collect();
            parts.push(format!("response_contains_regex: [{}]", l.join(", ")));
        }
        if let Some(n) = r.size {
            parts.push(format!("response_size_exceeds: {n}"));
        }
        y.push_str(&format!(
            "  - name: o{i}\n    match: {{{}}}\n    action: {}\n",
            parts.join(", "),
            r.action
        ));
    }
    y
}

const TEXTS: &[&str] = &[
    "hello world",
    "HELLO there 123",
    "ssh-rsa AAAA",
    "token {ghp}",
    "-----BEGIN PRIVATE KEY-----",
    "nothing at all",
    "/etc/passwd",
    "key={aws}",
];

fn response() -> impl Strategy<Value = Value> {
    (
        prop::collection::vec(prop::sample::select(TEXTS), 0..4),
        any::<bool>(),
    )
        .prop_map(|(texts, error)| {
            let content: Vec<Value> = texts
                .iter()
                .map(|t| json!({"type": "text", "text": t}))
                .collect();
            if error {
                json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32000, "message": texts.join(" ")}})
            } else {
                json!({"jsonrpc": "2.0", "id": 1, "result": {"content": content}})
            }
        })
}

fn load(yaml: &str, env: &TestEnv) -> mcpwall::config::Policy {
    let opts = mcpwall::config::LoadOptions {
        explicit: None,
        home: env.home.clone(),
        project_dir: env.project.clone(),
    };
    mcpwall::config::load_str("props.yml", &env.fill(yaml), &opts)
        .unwrap_or_else(|e| panic!("generated policy does not load: {e:?}\n{yaml}"))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn inbound_program_equals_reference(
        rules in prop::collection::vec(in_rule(), 0..6),
        default_deny in any::<bool>(),
        frames in prop::collection::vec(request(), 1..4),
    ) {
        let env = TestEnv::new();
        let yaml = yaml_policy(&rules, default_deny);
        let policy = load(&yaml, &env);
        let program = mcpwall::program::Program::compile_with(&policy, &env.env).expect("compiles");
        let reference = Reference::new(&policy, &env);
        let mut scratch = program.scratch();
        for frame in &frames {
            let line = env.fill(&frame.to_string());
            let got = support::engine_inbound(&program, &line, &mut scratch);
            let want = reference.evaluate_request(&line);
            prop_assert_eq!(&got, &want, "\npolicy:\n{}\nframe: {}", yaml, line);
        }
    }

    #[test]
    fn outbound_program_equals_reference(
        rules in prop::collection::vec(out_rule(), 1..5),
        frames in prop::collection::vec(response(), 1..4),
        tool in prop::sample::select(vec![Some("read_file"), Some("bash"), None]),
    ) {
        let env = TestEnv::new();
        let yaml = yaml_outbound(&rules);
        let policy = load(&yaml, &env);
        let program = mcpwall::program::Program::compile_with(&policy, &env.env).expect("compiles");
        let reference = Reference::new(&policy, &env);
        let mut scratch = program.scratch();
        let call = Call { method: Some("tools/call"), tool, server: "filesystem" };
        for frame in &frames {
            let line = env.fill(&frame.to_string());
            let got = support::engine_outbound(&program, &line, &call, &mut scratch);
            let want = reference.scan_response(&line, &call);
            prop_assert_eq!(&got, &want, "\npolicy:\n{}\nframe: {}", yaml, line);
        }
    }
}
