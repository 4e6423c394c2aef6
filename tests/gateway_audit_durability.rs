//! `settings.gateway.audit_before_answer`: a client is answered only once the audit lines
//! of its call are in the file, so a gateway killed (`kill -9`) right after answering
//! still leaves them, for `log_shipping` or `mcpwall log ship` to send on. The real
//! binary on loopback, in a temporary HOME. Needs `--features test-support`.

#[path = "support/gateway.rs"]
mod gateway;

use gateway::{Gateway, Home};
use serde_json::json;

fn killed_after_answers(settings: &str) -> (Vec<u64>, String) {
    let mut gw = Gateway::serve(Home::new(), settings);
    let session = gw.initialize(&[]);
    let ids: Vec<u64> = (1..=5).collect();
    for id in &ids {
        let r = gw.post(
            Some(&session),
            json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}})
                .to_string()
                .as_bytes(),
            &[],
        );
        assert_eq!(r.status, 200, "{}", r.body);
    }
    // SIGKILL: no clean exit writes what the writer still holds.
    gw.child.kill().unwrap();
    gw.child.wait().unwrap();
    (ids, gw.home.audit())
}

fn answered_in_log(audit: &str, id: u64) -> bool {
    audit.lines().any(|l| {
        l.contains("\"direction\":\"outbound\"")
            && l.contains(&format!("\"id\":{id},"))
            && l.contains("\"tool\":\"echo\"")
    })
}

#[test]
fn a_gateway_killed_right_after_answering_leaves_every_answered_calls_audit_lines() {
    let (ids, audit) = killed_after_answers("  gateway: {audit_before_answer: true}");
    for id in ids {
        assert!(
            answered_in_log(&audit, id),
            "call {id}'s answer is not in the log:\n{audit}"
        );
    }
}

#[test]
fn audit_before_answer_is_validated_with_its_place() {
    let home = Home::new();
    let policy = home.write_policy("  gateway: {audit_before_answer: sometimes}", Home::RULES);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mcpwall"))
        .args(["explain-policy", "-c"])
        .arg(&policy)
        .env("HOME", home.home())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("audit_before_answer"), "{stderr}");
    assert!(stderr.contains("policy.yml:"), "{stderr}");
}
