//! `mcpwall serve` with `settings.oauth`: the identity provider's signed access tokens
//! stand for identities (and groups) that `identity:` rules name, checked against the key
//! set a loopback server publishes; every token the provider did not issue for this
//! gateway, now, with a pinned algorithm and a key of the set, is refused (401 with a
//! `WWW-Authenticate` naming the resource metadata, which is served). Keys are made at run
//! time. Needs `--features test-support` (and `tls`, the default).

#[path = "support/gateway.rs"]
mod gateway;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use gateway::{Gateway, Home, initialize_msg};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};

const ISSUER: &str = "https://idp.example.test";
const RESOURCE: &str = "https://mcp.example.test/mcp";
const METADATA: &str = "/.well-known/oauth-protected-resource/mcp";

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// An EC P-256 signing key made now, and its public JWK.
struct SigningKey {
    kid: String,
    pkcs8: Vec<u8>,
    public: Vec<u8>,
}

impl SigningKey {
    fn new(kid: &str) -> SigningKey {
        let pair = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        SigningKey {
            kid: kid.into(),
            pkcs8: pair.serialize_der(),
            public: pair.public_key_raw().to_vec(),
        }
    }

    fn jwk(&self) -> Value {
        // The uncompressed point: 0x04, x, y.
        let (x, y) = self.public[1..].split_at(32);
        json!({"kty": "EC", "crv": "P-256", "use": "sig", "alg": "ES256", "kid": self.kid, "x": b64(x), "y": b64(y)})
    }

    fn sign(&self, claims: &Value) -> String {
        self.sign_as(&self.kid, claims)
    }

    fn sign_as(&self, kid: &str, claims: &Value) -> String {
        let mut header = Header::new(Algorithm::ES256);
        header.kid = Some(kid.into());
        jsonwebtoken::encode(&header, claims, &EncodingKey::from_ec_der(&self.pkcs8)).unwrap()
    }
}

/// Claims the gateway accepts, for `sub`.
fn claims(sub: &str) -> Value {
    json!({"iss": ISSUER, "aud": RESOURCE, "sub": sub, "exp": now() + 600, "iat": now(), "groups": ["staff"]})
}

/// A loopback server publishing a JWK set, counting its fetches.
struct KeyServer {
    url: String,
    keys: Arc<Mutex<Value>>,
    fetches: Arc<AtomicU64>,
    /// Answer 503 instead of the set.
    down: Arc<std::sync::atomic::AtomicBool>,
}

impl KeyServer {
    fn start(keys: &[&SigningKey]) -> KeyServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/jwks.json", listener.local_addr().unwrap());
        let set = Arc::new(Mutex::new(json!({"keys": []})));
        let fetches = Arc::new(AtomicU64::new(0));
        let down = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (served, counted, failing) = (set.clone(), fetches.clone(), down.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).unwrap_or(0) == 1 {
                    head.push(byte[0]);
                }
                counted.fetch_add(1, Ordering::SeqCst);
                let body = served.lock().unwrap().to_string();
                if failing.load(Ordering::SeqCst) {
                    let _ = write!(
                        stream,
                        "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                    );
                    continue;
                }
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        let server = KeyServer {
            url,
            keys: set,
            fetches,
            down,
        };
        server.publish(keys);
        server
    }

    fn publish(&self, keys: &[&SigningKey]) {
        *self.keys.lock().unwrap() =
            json!({"keys": keys.iter().map(|k| k.jwk()).collect::<Vec<_>>()});
    }

    fn fetches(&self) -> u64 {
        self.fetches.load(Ordering::SeqCst)
    }
}

fn oauth_settings(jwks_url: &str, extra: &str) -> String {
    format!(
        "  oauth:\n    issuer: {ISSUER}\n    resource: {RESOURCE}\n    jwks_url: \"{jwks_url}\"\n    algorithms: [ES256]\n    groups_claim: groups\n    jwks_min_refresh_seconds: 1\n{extra}"
    )
}

const RULES: &str = "  - name: no-echo-for-alice
    match: {tool: echo, identity: \"alice@example.test\"}
    action: deny
  - name: no-forbidden-for-staff
    match: {tool: forbidden, identity: \"group:staff\"}
    action: deny
";

fn serve(keys: &KeyServer, extra: &str) -> Gateway {
    Gateway::serve_rules(Home::new(), &oauth_settings(&keys.url, extra), RULES, &[])
}

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

/// `initialize` with `token`: the reply.
fn initialize(gw: &Gateway, token: &str) -> gateway::Reply {
    let auth = bearer(token);
    gw.post(
        None,
        initialize_msg().to_string().as_bytes(),
        &[("Authorization", &auth)],
    )
}

fn call(gw: &Gateway, session: &str, token: &str, tool: &str) -> Value {
    let auth = bearer(token);
    let r = gw.post(
        Some(session),
        json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":tool,"arguments":{"text":"hi"}}})
            .to_string()
            .as_bytes(),
        &[("Authorization", &auth)],
    );
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()
}

fn denied_by(answer: &Value) -> bool {
    answer.get("error").is_some()
}

#[test]
fn an_access_token_stands_for_its_identity_and_groups_in_identity_rules() {
    let key = SigningKey::new("k1");
    let keys = KeyServer::start(&[&key]);
    let gw = serve(&keys, "");
    let alice = key.sign(&claims("alice@example.test"));
    let r = initialize(&gw, &alice);
    assert_eq!(r.status, 200, "{}", r.body);
    let session = r.header("mcp-session-id").unwrap().to_string();
    // The rule naming alice applies to her; the group rule too (she is staff).
    assert!(denied_by(&call(&gw, &session, &alice, "echo")));
    assert!(denied_by(&call(&gw, &session, &alice, "forbidden")));
    let audit = gw.audit_with(&["no-echo-for-alice", "alice@example.test"]);
    assert!(
        audit.lines().any(|l| l.contains("no-echo-for-alice")
            && l.contains("\"identity\":\"alice@example.test\"")),
        "{audit}"
    );
    // Bob, not staff: neither rule applies to him.
    let mut bob_claims = claims("bob");
    bob_claims["groups"] = json!(["contractors"]);
    let bob = key.sign(&bob_claims);
    let r = initialize(&gw, &bob);
    assert_eq!(r.status, 200, "{}", r.body);
    let bob_session = r.header("mcp-session-id").unwrap().to_string();
    assert!(!denied_by(&call(&gw, &bob_session, &bob, "echo")));
    assert!(!denied_by(&call(&gw, &bob_session, &bob, "forbidden")));
    // A session is its identity's: bob's token does not open alice's.
    let auth = bearer(&bob);
    let r = gw.post(
        Some(&session),
        json!({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{}}})
            .to_string()
            .as_bytes(),
        &[("Authorization", &auth)],
    );
    assert_eq!(r.status, 404, "{}", r.body);
}

#[test]
fn static_tokens_keep_working_beside_access_tokens() {
    let key = SigningKey::new("k1");
    let keys = KeyServer::start(&[&key]);
    let home = Home::new();
    let token = home.token(&["add", "ci-runner"]);
    let gw = Gateway::serve_rules(home, &oauth_settings(&keys.url, ""), RULES, &[]);
    assert_eq!(initialize(&gw, &token).status, 200);
    // An access token whose identity is a token-file name does not become that identity.
    let r = initialize(&gw, &key.sign(&claims("ci-runner")));
    assert_eq!(r.status, 401, "{}", r.body);
    gw.audit_with(&["is a name of the token file"]);
    assert!(gw.home.audit().contains("is a name of the token file"));
}

/// Each token is refused with 401, `error="invalid_token"` and the metadata's URL, and
/// its reason is in the audit log.
fn assert_refused(gw: &Gateway, token: &str, reason: &str) {
    let r = initialize(gw, token);
    assert_eq!(r.status, 401, "{reason}: {}", r.body);
    let challenge = r.header("www-authenticate").unwrap_or_default();
    assert!(
        challenge.contains("error=\"invalid_token\"")
            && challenge.contains(&format!(
                "resource_metadata=\"https://mcp.example.test{METADATA}\""
            )),
        "{reason}: {challenge}"
    );
    let audit = gw.audit_with(&[reason]);
    assert!(
        audit.contains(reason),
        "no {reason:?} in the audit log:\n{audit}"
    );
}

#[test]
fn tokens_not_issued_for_this_gateway_now_are_refused() {
    let key = SigningKey::new("k1");
    let keys = KeyServer::start(&[&key]);
    let gw = serve(&keys, "    max_token_bytes: 2048\n    leeway_seconds: 5\n");
    let with = |field: &str, value: Value| {
        let mut c = claims("mallory");
        c[field] = value;
        key.sign(&c)
    };
    assert_refused(
        &gw,
        &with("iss", json!("https://evil.example.test")),
        "wrong issuer",
    );
    assert_refused(
        &gw,
        &with("aud", json!("https://other.example.test/mcp")),
        "wrong audience",
    );
    assert_refused(&gw, &with("exp", json!(now() - 60)), "expired");
    assert_refused(&gw, &with("nbf", json!(now() + 600)), "not valid yet");
    // A time claim of the wrong type is not "absent".
    assert_refused(
        &gw,
        &with("nbf", json!((now() + 600).to_string())),
        "`nbf` is missing or not a number",
    );
    // Unsigned.
    let body = b64(claims("mallory").to_string().as_bytes());
    let none = format!(
        "{}.{body}.",
        b64(br#"{"alg":"none","kid":"k1","typ":"JWT"}"#)
    );
    assert_refused(&gw, &none, "is not one of the pinned algorithms");
    // HMAC with the public key's bytes as the secret (the key-confusion attack).
    let mut header = Header::new(Algorithm::HS256);
    header.kid = Some("k1".into());
    let confused = jsonwebtoken::encode(
        &header,
        &claims("mallory"),
        &EncodingKey::from_secret(&key.public),
    )
    .unwrap();
    assert_refused(
        &gw,
        &confused,
        "alg HS256 is not one of the pinned algorithms",
    );
    // Signed by another key under the set's kid.
    let forger = SigningKey::new("k1");
    assert_refused(&gw, &forger.sign(&claims("mallory")), "bad signature");
    // Oversized (bounded before anything is decoded).
    let mut big = claims("mallory");
    big["pad"] = json!("x".repeat(4096));
    assert_refused(&gw, &key.sign(&big), "more than max_token_bytes (2048)");
    // Without a token: 401 naming the metadata, without an error code.
    let r = gw.post(None, initialize_msg().to_string().as_bytes(), &[]);
    assert_eq!(r.status, 401);
    let challenge = r.header("www-authenticate").unwrap();
    assert!(
        challenge.starts_with("Bearer ")
            && challenge.contains("resource_metadata=")
            && !challenge.contains("error="),
        "{challenge}"
    );
}

#[test]
fn an_unknown_key_id_refreshes_the_key_set_once_and_a_rotated_key_is_picked_up() {
    let old = SigningKey::new("old");
    let keys = KeyServer::start(&[&old]);
    let gw = serve(&keys, "");
    let before = old.sign(&claims("alice@example.test"));
    assert_eq!(initialize(&gw, &before).status, 200);
    assert_eq!(initialize(&gw, &before).status, 200);
    assert_eq!(keys.fetches(), 1);
    // A made-up kid: one fetch (the set may have rotated), then refused; a second one
    // within jwks_min_refresh_seconds fetches nothing.
    std::thread::sleep(Duration::from_millis(1100));
    let stranger = SigningKey::new("stranger");
    assert_refused(&gw, &stranger.sign(&claims("mallory")), "unknown key id");
    assert_eq!(keys.fetches(), 2);
    assert_refused(&gw, &stranger.sign(&claims("mallory")), "unknown key id");
    assert_eq!(keys.fetches(), 2);
    // The provider rotates: a token signed with the new key is accepted after one fetch.
    let new = SigningKey::new("new");
    keys.publish(&[&new]);
    std::thread::sleep(Duration::from_millis(1100));
    assert_eq!(
        initialize(&gw, &new.sign(&claims("alice@example.test"))).status,
        200
    );
    assert_eq!(keys.fetches(), 3);
    // The old key left the set: a token it signed, accepted before, is not any more.
    assert_eq!(initialize(&gw, &before).status, 401);
    assert_eq!(keys.fetches(), 3);
}

#[test]
fn a_key_set_that_cannot_be_fetched_refuses_every_token() {
    let key = SigningKey::new("k1");
    // A port nothing listens on.
    let closed = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/jwks.json", closed.local_addr().unwrap());
    drop(closed);
    let gw = Gateway::serve_rules(Home::new(), &oauth_settings(&url, ""), RULES, &[]);
    assert_refused(
        &gw,
        &key.sign(&claims("alice@example.test")),
        "key set cannot be had",
    );
    let stderr = gw.stderr_until("the refusal", |e| e.contains("key set cannot be had"));
    assert!(stderr.contains("cannot connect"), "{stderr}");
}

#[test]
fn a_token_without_a_required_scope_is_forbidden() {
    let key = SigningKey::new("k1");
    let keys = KeyServer::start(&[&key]);
    let gw = serve(&keys, "    required_scopes: [mcp:tools]\n");
    let r = initialize(&gw, &key.sign(&claims("alice@example.test")));
    assert_eq!(r.status, 403, "{}", r.body);
    let challenge = r.header("www-authenticate").unwrap();
    assert!(
        challenge.contains("error=\"insufficient_scope\"")
            && challenge.contains("scope=\"mcp:tools\""),
        "{challenge}"
    );
    let mut scoped = claims("alice@example.test");
    scoped["scope"] = json!("openid mcp:tools");
    assert_eq!(initialize(&gw, &key.sign(&scoped)).status, 200);
}

#[test]
fn the_protected_resource_metadata_is_served_without_a_token() {
    let key = SigningKey::new("k1");
    let keys = KeyServer::start(&[&key]);
    let gw = serve(&keys, "");
    for path in [METADATA, "/.well-known/oauth-protected-resource"] {
        let r = gw.send_to("GET", path, &[], b"");
        assert_eq!(r.status, 200, "{path}: {}", r.body);
        let doc = r.json();
        assert_eq!(doc["resource"], RESOURCE, "{doc}");
        assert_eq!(doc["authorization_servers"], json!([ISSUER]), "{doc}");
        assert_eq!(doc["bearer_methods_supported"], json!(["header"]), "{doc}");
    }
    // Any other path still needs a token.
    assert_eq!(
        gw.send_to("GET", "/.well-known/other", &[], b"").status,
        401
    );
}

#[test]
fn bad_oauth_settings_stop_serve_at_start_with_their_place() {
    let home = Home::new();
    let policy = home.write_policy(
        "  oauth:\n    issuer: http://idp.example.test\n    resource: https://mcp.example.test/mcp\n    jwks_url: https://idp.example.test/jwks\n    algorithms: []\n    audiences: [x]\n",
        "  []\n",
    );
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mcpwall"))
        .args(["serve", "--listen", "127.0.0.1:0", "-c"])
        .arg(&policy)
        .args(["--", "true"])
        .env("HOME", home.home())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    for want in [
        "unknown key `audiences`",
        "`oauth.issuer` is not a usable URL",
        "`oauth.algorithms` is empty",
        "policy.yml:",
    ] {
        assert!(err.contains(want), "no {want:?} in:\n{err}");
    }
}

#[test]
fn rate_limits_count_per_provider_identity_and_a_reload_keeps_its_sessions() {
    let key = SigningKey::new("k1");
    let keys = KeyServer::start(&[&key]);
    let settings = oauth_settings(&keys.url, "")
        + "  rate_limit: {max_calls: 2, window_seconds: 600}\n  default_action: allow\n";
    let gw = Gateway::serve_rules(Home::new(), &settings, RULES, &[]);
    let mut carol_claims = claims("carol");
    carol_claims["groups"] = json!([]);
    let carol = key.sign(&carol_claims);
    let open = |token: &str| {
        let r = initialize(&gw, token);
        assert_eq!(r.status, 200, "{}", r.body);
        r.header("mcp-session-id").unwrap().to_string()
    };
    // Two sessions of carol share one count; dave has his own.
    let (first, second) = (open(&carol), open(&carol));
    assert!(!denied_by(&call(&gw, &first, &carol, "echo")));
    assert!(!denied_by(&call(&gw, &second, &carol, "echo")));
    assert!(denied_by(&call(&gw, &first, &carol, "echo")));
    let dave = key.sign(&claims("dave"));
    let dave_session = open(&dave);
    assert!(!denied_by(&call(&gw, &dave_session, &dave, "echo")));
    // A reload that adds a rule naming dave: his open session goes on (a session whose
    // identity has no judge after a reload ends), judged by it.
    let rules = format!(
        "{RULES}  - name: no-ping-for-dave\n    match: {{tool: ping_tool, identity: dave}}\n    action: deny\n"
    );
    gw.home.write_policy(&settings, &rules);
    gw.stderr_until("the reload", |e| e.contains("policy reloaded"));
    let answer = call(&gw, &dave_session, &dave, "ping_tool");
    assert!(denied_by(&answer), "{answer}");
    // Carol's count carried over the reload: she is still over her limit.
    let answer = call(&gw, &first, &carol, "echo");
    assert!(
        denied_by(&answer),
        "the reload reset carol's rate window: {answer}"
    );
    gw.audit_with(&["no-ping-for-dave", "\"identity\":\"dave\""]);
    assert!(
        gw.home
            .audit()
            .lines()
            .any(|l| l.contains("no-ping-for-dave") && l.contains("\"identity\":\"dave\"")),
        "dave's session was not judged by the reloaded policy"
    );
}

#[test]
fn an_identitys_sessions_end_when_its_latest_access_token_expires() {
    let key = SigningKey::new("k1");
    let keys = KeyServer::start(&[&key]);
    let gw = serve(&keys, "    leeway_seconds: 0\n");
    let mut short = claims("erin");
    short["exp"] = json!(now() + 2);
    let r = initialize(&gw, &key.sign(&short));
    assert_eq!(r.status, 200, "{}", r.body);
    let session = r.header("mcp-session-id").unwrap().to_string();
    // Frank renews his token in time: his session stays.
    let mut frank_claims = claims("frank");
    frank_claims["exp"] = json!(now() + 2);
    let r = initialize(&gw, &key.sign(&frank_claims));
    assert_eq!(r.status, 200, "{}", r.body);
    let frank_session = r.header("mcp-session-id").unwrap().to_string();
    let frank = key.sign(&claims("frank"));
    assert!(!denied_by(&call(&gw, &frank_session, &frank, "echo")));
    std::thread::sleep(Duration::from_millis(3500));
    // Erin's session ended with her token; a new token does not bring it back.
    let fresh = key.sign(&claims("erin"));
    let auth = bearer(&fresh);
    let r = gw.post(
        Some(&session),
        json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{}}})
            .to_string()
            .as_bytes(),
        &[("Authorization", &auth)],
    );
    assert_eq!(r.status, 404, "{}", r.body);
    let audit = gw.audit_with(&["mcpwall:token_expired", "erin"]);
    assert!(audit.contains("mcpwall:token_expired"), "{audit}");
    assert!(!denied_by(&call(&gw, &frank_session, &frank, "echo")));
}

#[test]
fn a_failed_refresh_keeps_a_young_key_set_and_an_old_one_is_refused() {
    let key = SigningKey::new("k1");
    let keys = KeyServer::start(&[&key]);
    let gw = serve(&keys, "    jwks_max_age_seconds: 4\n");
    let alice = key.sign(&claims("alice@example.test"));
    assert_eq!(initialize(&gw, &alice).status, 200);
    // The provider fails; a made-up kid makes the gateway try, and fail: the set it has
    // (younger than jwks_max_age_seconds) stays in force.
    keys.down.store(true, Ordering::SeqCst);
    std::thread::sleep(Duration::from_millis(1100));
    assert_refused(
        &gw,
        &SigningKey::new("stranger").sign(&claims("mallory")),
        "could not be fetched again",
    );
    assert_eq!(keys.fetches(), 2);
    assert_eq!(initialize(&gw, &alice).status, 200);
    // Past its max age, with the provider still failing: every token is refused.
    std::thread::sleep(Duration::from_millis(3500));
    assert_refused(&gw, &alice, "503 Service Unavailable");
    // The provider is back: accepted again once a fetch may be tried.
    keys.down.store(false, Ordering::SeqCst);
    std::thread::sleep(Duration::from_millis(1100));
    assert_eq!(initialize(&gw, &alice).status, 200);
}

#[test]
fn explain_policy_shows_the_identity_provider_in_a_policy_that_loads_again() {
    let home = Home::new();
    let policy = home.write_policy(&oauth_settings("https://idp.example.test/jwks", ""), RULES);
    let explain = |file: &std::path::Path| {
        std::process::Command::new(env!("CARGO_BIN_EXE_mcpwall"))
            .args(["explain-policy", "--format", "yaml", "-c"])
            .arg(file)
            .env("HOME", home.home())
            .output()
            .unwrap()
    };
    let out = explain(&policy);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let yaml = String::from_utf8(out.stdout).unwrap();
    for want in [
        "oauth:",
        &format!("issuer: {ISSUER}"),
        "identity_claim: sub",
        "groups_claim: groups",
        "jwks_min_refresh_seconds: 1",
    ] {
        assert!(yaml.contains(want), "no {want:?} in:\n{yaml}");
    }
    let again = home.dir.path().join("again.yml");
    std::fs::write(&again, &yaml).unwrap();
    let out = explain(&again);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .skip(1)
            .collect::<Vec<_>>(),
        yaml.lines().skip(1).collect::<Vec<_>>()
    );
}

/// An identity provider on loopback that publishes its OpenID configuration and its key
/// set, over TLS with a certificate from a CA made at run time (or plain http): the
/// configuration names `issuer` (its own URL unless told otherwise) and `jwks_uri`.
struct Provider {
    issuer: String,
    /// What the configuration document says, once the server is up.
    document: Arc<Mutex<Value>>,
    /// Requests by path.
    paths: Arc<Mutex<Vec<String>>>,
}

impl Provider {
    fn start(keys: &[&SigningKey], tls: Option<Arc<rustls::ServerConfig>>) -> Provider {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let issuer = match tls {
            Some(_) => format!("https://localhost:{port}"),
            None => format!("http://127.0.0.1:{port}"),
        };
        let document = Arc::new(Mutex::new(
            json!({"issuer": issuer, "jwks_uri": format!("{issuer}/keys"), "response_types_supported": ["code"]}),
        ));
        let set = Arc::new(Mutex::new(
            json!({"keys": keys.iter().map(|k| k.jwk()).collect::<Vec<_>>()}),
        ));
        let paths = Arc::new(Mutex::new(Vec::new()));
        let (doc, served, seen) = (document.clone(), set, paths.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let (doc, served, seen, tls) =
                    (doc.clone(), served.clone(), seen.clone(), tls.clone());
                std::thread::spawn(move || {
                    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
                    match tls {
                        None => answer(stream, &doc, &served, &seen),
                        Some(config) => {
                            let conn = rustls::ServerConnection::new(config).unwrap();
                            answer(rustls::StreamOwned::new(conn, stream), &doc, &served, &seen);
                        }
                    }
                });
            }
        });
        Provider {
            issuer,
            document,
            paths,
        }
    }

    fn paths(&self) -> Vec<String> {
        self.paths.lock().unwrap().clone()
    }
}

/// One request: the configuration, the key set, or 404.
fn answer<S: Read + Write>(
    mut stream: S,
    doc: &Mutex<Value>,
    keys: &Mutex<Value>,
    seen: &Mutex<Vec<String>>,
) {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).unwrap_or(0) == 1 {
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    let Some(path) = head.split_whitespace().nth(1) else {
        return;
    };
    seen.lock().unwrap().push(path.to_string());
    let body = match path {
        "/.well-known/openid-configuration" => doc.lock().unwrap().to_string(),
        "/keys" => keys.lock().unwrap().to_string(),
        _ => {
            let _ = write!(
                stream,
                "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            );
            let _ = stream.flush();
            return;
        }
    };
    let _ = write!(
        stream,
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.flush();
}

/// A CA and a `localhost` certificate it signed, made now: the CA's PEM file, and the
/// server's TLS configuration.
fn provider_tls(
    dir: &std::path::Path,
    tag: &str,
) -> (std::path::PathBuf, Arc<rustls::ServerConfig>) {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::new(ca_params, ca_key);
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec!["localhost".to_string()])
        .unwrap()
        .signed_by(&key, &issuer)
        .unwrap();
    let ca_file = dir.join(format!("{tag}-ca.pem"));
    std::fs::write(&ca_file, ca.pem()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone()],
            rustls_pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
        )
        .unwrap();
    (ca_file, Arc::new(config))
}

/// `settings.oauth` with no `jwks_url`: the key set is discovered from `issuer`.
fn discovery_settings(issuer: &str, extra: &str) -> String {
    format!(
        "  oauth:\n    issuer: \"{issuer}\"\n    resource: {RESOURCE}\n    algorithms: [ES256]\n    jwks_min_refresh_seconds: 1\n{extra}"
    )
}

fn claims_from(issuer: &str, sub: &str) -> Value {
    json!({"iss": issuer, "aud": RESOURCE, "sub": sub, "exp": now() + 600, "iat": now()})
}

#[test]
fn the_key_set_is_discovered_from_the_issuer_over_tls_verified_with_the_configured_ca() {
    let key = SigningKey::new("k1");
    let home = Home::new();
    let (ca, tls) = provider_tls(home.dir.path(), "idp");
    let provider = Provider::start(&[&key], Some(tls));
    let token = key.sign(&claims_from(&provider.issuer, "alice@example.test"));

    // With the CA that signed the provider's certificate: discovery, then the set.
    let gw = Gateway::serve_rules(
        home,
        &discovery_settings(
            &provider.issuer,
            &format!("    jwks_ca_file: \"{}\"\n", ca.display()),
        ),
        RULES,
        &[],
    );
    let r = initialize(&gw, &token);
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        provider.paths(),
        ["/.well-known/openid-configuration", "/keys"]
    );
    // A token from another issuer is still refused: discovery does not widen the check.
    assert_refused(
        &gw,
        &key.sign(&claims_from("https://idp.example.test", "mallory")),
        "wrong issuer",
    );
    drop(gw);

    // Without it, the provider's certificate is not trusted (the public roots don't
    // know this CA): no key set, every token refused.
    let gw = Gateway::serve_rules(
        Home::new(),
        &discovery_settings(&provider.issuer, ""),
        RULES,
        &[],
    );
    assert_refused(&gw, &token, "key set cannot be had");
    let stderr = gw.stderr_until("the refusal", |e| e.contains("key set cannot be had"));
    assert!(stderr.contains("openid-configuration"), "{stderr}");
}

#[test]
fn the_key_set_url_given_over_tls_is_verified_with_the_configured_ca() {
    let key = SigningKey::new("k1");
    let home = Home::new();
    let (ca, tls) = provider_tls(home.dir.path(), "idp");
    let provider = Provider::start(&[&key], Some(tls));
    let jwks = format!("{}/keys", provider.issuer);
    let settings = |ca: &str| {
        format!(
            "  oauth:\n    issuer: {ISSUER}\n    resource: {RESOURCE}\n    jwks_url: \"{jwks}\"\n    algorithms: [ES256]\n{ca}"
        )
    };
    let gw = Gateway::serve_rules(
        home,
        &settings(&format!("    jwks_ca_file: \"{}\"\n", ca.display())),
        RULES,
        &[],
    );
    assert_eq!(
        initialize(&gw, &key.sign(&claims("alice@example.test"))).status,
        200
    );
    assert_eq!(provider.paths(), ["/keys"]);
    drop(gw);
    // Another CA: the provider is not who it claims to be.
    let other = Home::new();
    let (stranger, _) = provider_tls(other.dir.path(), "stranger");
    let gw = Gateway::serve_rules(
        other,
        &settings(&format!("    jwks_ca_file: \"{}\"\n", stranger.display())),
        RULES,
        &[],
    );
    assert_refused(
        &gw,
        &key.sign(&claims("alice@example.test")),
        "key set cannot be had",
    );
}

#[test]
fn a_discovery_document_that_speaks_for_another_issuer_or_points_off_loopback_is_refused() {
    let key = SigningKey::new("k1");
    let provider = Provider::start(&[&key], None);
    let token = key.sign(&claims_from(&provider.issuer, "alice@example.test"));
    let gw = Gateway::serve_rules(
        Home::new(),
        &discovery_settings(&provider.issuer, ""),
        RULES,
        &[],
    );
    // Another issuer's configuration (a provider speaking for another): not trusted.
    provider.document.lock().unwrap()["issuer"] = json!("https://idp.example.test");
    assert_refused(&gw, &token, "key set cannot be had");
    gw.audit_with(&["names the issuer https://idp.example.test"]);
    // A key set over plain http to a host that is not loopback: not fetched.
    std::thread::sleep(Duration::from_millis(1100));
    *provider.document.lock().unwrap() =
        json!({"issuer": provider.issuer, "jwks_uri": "http://idp.example.test/keys"});
    assert_refused(&gw, &token, "key set cannot be had");
    gw.audit_with(&["is not usable"]);
    assert!(!provider.paths().contains(&"/keys".to_string()));
    // Its own again: accepted.
    std::thread::sleep(Duration::from_millis(1100));
    *provider.document.lock().unwrap() =
        json!({"issuer": provider.issuer, "jwks_uri": format!("{}/keys", provider.issuer)});
    assert_eq!(initialize(&gw, &token).status, 200);
}

#[test]
fn a_jwks_ca_file_that_cannot_be_used_stops_serve_at_start_with_its_place() {
    let home = Home::new();
    // Over plain http the CA file would verify nothing: a mistake, said with its place.
    let policy = home.write_policy(
        &discovery_settings("http://127.0.0.1:9", "    jwks_ca_file: ca.pem\n"),
        "  []\n",
    );
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mcpwall"))
        .args(["serve", "--listen", "127.0.0.1:0", "-c"])
        .arg(&policy)
        .args(["--", "true"])
        .env("HOME", home.home())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("applies only to a key set fetched over https://")
            && err.contains("policy.yml:"),
        "{err}"
    );
    // A CA file that can't be read stops the start.
    let policy = home.write_policy(
        &discovery_settings(
            "https://idp.example.test",
            "    jwks_ca_file: missing-ca.pem\n",
        ),
        "  []\n",
    );
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mcpwall"))
        .args(["serve", "--listen", "127.0.0.1:0", "-c"])
        .arg(&policy)
        .args(["--", "true"])
        .env("HOME", home.home())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("missing-ca.pem"), "{err}");
}
