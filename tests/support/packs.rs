//! Policies and frames shared by the allocation test and the benches.

use super::TestEnv;

/// Ten rules shaped like a default pack: regexes and globs on `_any_value`, command
/// regexes, a secrets check, and a filesystem containment rule.
pub const DEFAULT_LIKE: &str = r#"
rules:
  - name: block-ssh-keys
    match: {method: "*", arguments: {_any_value: {regex: '(\.ssh/|id_rsa|id_ed25519|id_ecdsa)'}}}
    action: deny
  - name: block-aws-credentials
    match: {method: "*", arguments: {_any_value: {regex: '\.aws/(credentials|config)'}}}
    action: deny
  - name: block-env-files
    match: {method: "*", arguments: {_any_value: {pattern: '**/.env*'}}}
    action: deny
  - name: block-rm-rf
    match: {arguments: {command: {regex: 'rm\s+-(rf|fr|r\s+-f)'}}}
    action: deny
  - name: block-pipe-to-shell
    match: {arguments: {command: {regex: '(curl|wget)[^|]*\|\s*(ba|z)?sh'}}}
    action: deny
  - name: block-secrets-in-arguments
    match: {method: "*", arguments: {_any_value: {secrets: true}}}
    action: deny
  - name: block-system-secrets
    match: {method: "*", arguments: {_any_value: {regex: '/etc/(shadow|sudoers|gshadow)'}}}
    action: deny
  - name: block-browser-data
    match: {arguments: {_any_value: {regex: '(Cookies|Login Data|Local State)$'}}}
    action: deny
  - name: block-git-credentials
    match: {arguments: {_any_value: {pattern: '**/.git-credentials'}}}
    action: deny
  - name: files-stay-in-project
    match: {tool: '*_file', arguments: {path: {not_under: '${PROJECT_DIR}'}}}
    action: deny
outbound_rules:
  - name: block-huge
    match: {response_size_exceeds: 16777216}
    action: deny
  - name: block-private-keys
    match: {response_contains: ['BEGIN OPENSSH PRIVATE KEY', 'BEGIN RSA PRIVATE KEY']}
    action: deny
  - name: redact-secrets
    match: {secrets: true}
    action: redact
"#;

/// `n` generated rules: a quarter `_any_value` regexes, a quarter path globs, a
/// quarter tool-only rules, a quarter command regexes behind a tool glob.
pub fn generated(n: usize) -> String {
    let mut y = String::from("rules:\n");
    for i in 0..n {
        let m = match i % 4 {
            0 => format!(
                "{{method: '*', arguments: {{_any_value: {{regex: 'secret_{i}_[a-z]+'}}}}}}"
            ),
            1 => format!("{{arguments: {{path: {{pattern: '**/private_{i}/**'}}}}}}"),
            2 => format!("{{tool: 'tool_{i}'}}"),
            _ => format!(
                "{{tool: 'shell_{i}*', arguments: {{command: {{regex: '^danger{i}\\s'}}}}}}"
            ),
        };
        y.push_str(&format!(
            "  - name: gen-{i}\n    match: {m}\n    action: deny\n"
        ));
    }
    y
}

/// The default-like pack followed by generated rules, `total` inbound rules in all.
pub fn default_plus_generated(total: usize) -> String {
    let (rules, outbound) = DEFAULT_LIKE
        .split_once("outbound_rules:")
        .expect("pack has outbound rules");
    let extra = generated(total.saturating_sub(10));
    let extra = extra.strip_prefix("rules:\n").unwrap_or(&extra);
    format!("{rules}{extra}outbound_rules:{outbound}")
}

/// An allowed `tools/call` of about 200 bytes.
pub fn allowed_call(env: &TestEnv) -> String {
    let mut line = env.fill(
        r#"{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"{project}/src/main.rs","encoding":"utf-8","limit":4096,"note":"#,
    );
    let pad = 200usize.saturating_sub(line.len() + 4);
    line.push('"');
    line.push_str(&"x".repeat(pad));
    line.push_str("\"}}}");
    line
}

/// A denied `tools/call` of about 200 bytes (`rm -rf`).
pub fn denied_call() -> String {
    let mut line = String::from(
        r#"{"jsonrpc":"2.0","id":43,"method":"tools/call","params":{"name":"run_command","arguments":{"command":"cd /tmp && rm -rf build","timeout":30,"note":"#,
    );
    let pad = 200usize.saturating_sub(line.len() + 4);
    line.push('"');
    line.push_str(&"y".repeat(pad));
    line.push_str("\"}}}");
    line
}

/// A `tools/call` result whose text is `size` bytes of ordinary prose.
pub fn result_of_size(size: usize) -> String {
    let head = r#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":""#;
    let tail = r#""}],"isError":false}}"#;
    let words = "the quick brown fox jumps over the lazy dog while logs scroll by ";
    let body_len = size.saturating_sub(head.len() + tail.len());
    let body: String = words.chars().cycle().take(body_len).collect();
    format!("{head}{body}{tail}")
}
