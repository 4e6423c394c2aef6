//! `mcpwall serve --tls-cert --tls-key --client-ca`: HTTPS, and client certificates as
//! identities. The CA, the server's certificate and the clients' are made at run time;
//! everything is on loopback. Needs `--features tls,test-support`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};

struct Ca {
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
    der: CertificateDer<'static>,
    pem: String,
}

impl Ca {
    fn new(name: &str) -> Ca {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        let cert = params.self_signed(&key).unwrap();
        Ca {
            der: cert.der().clone(),
            pem: cert.pem(),
            issuer: rcgen::Issuer::new(params, key),
        }
    }

    /// A certificate with this common name and these alternative names, its key (DER).
    fn issue(
        &self,
        cn: &str,
        sans: &[&str],
        usage: rcgen::ExtendedKeyUsagePurpose,
    ) -> (rcgen::Certificate, rcgen::KeyPair) {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params =
            rcgen::CertificateParams::new(sans.iter().map(|s| s.to_string()).collect::<Vec<_>>())
                .unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, cn);
        params.extended_key_usages = vec![usage];
        (params.signed_by(&key, &self.issuer).unwrap(), key)
    }
}

struct Gateway {
    child: Child,
    addr: String,
    ca: Ca,
    bob_token: String,
    _dir: tempfile::TempDir,
}

fn mcpwall(home: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_mcpwall"));
    c.env("HOME", home).env("NO_COLOR", "1");
    c
}

fn write_pem(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

impl Gateway {
    fn start() -> Gateway {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        std::fs::create_dir_all(&home).unwrap();
        let mut bob_token = String::new();
        for name in ["alice", "bob"] {
            let out = mcpwall(&home)
                .args(["token", "add", name])
                .output()
                .unwrap();
            assert!(out.status.success());
            if name == "bob" {
                bob_token = String::from_utf8(out.stdout).unwrap().trim().to_string();
            }
        }
        let ca = Ca::new("mcpwall test client CA");
        let (server_cert, server_key) = ca.issue(
            "mcpwall test server",
            &["127.0.0.1"],
            rcgen::ExtendedKeyUsagePurpose::ServerAuth,
        );
        let cert = write_pem(dir.path(), "server.pem", &server_cert.pem());
        let key = write_pem(dir.path(), "server.key", &server_key.serialize_pem());
        let client_ca = write_pem(dir.path(), "clients-ca.pem", &ca.pem);
        let policy = write_pem(
            dir.path(),
            "policy.yml",
            &format!(
                "version: 1\nsettings:\n  default_action: allow\n  log_dir: \"{}\"\nrules:\n  - name: alice-may-not-echo\n    match: {{tool: echo, identity: alice}}\n    action: deny\n",
                dir.path().join("logs").display()
            ),
        );
        let mut child = mcpwall(&home)
            .args(["serve", "--listen", "127.0.0.1:0", "--tls-cert"])
            .arg(&cert)
            .arg("--tls-key")
            .arg(&key)
            .arg("--client-ca")
            .arg(&client_ca)
            .arg("-c")
            .arg(&policy)
            .arg("--")
            .arg(env!("CARGO_BIN_EXE_mcpwall-fake-server"))
            .env("FAKE_RECV_LOG", dir.path().join("received.jsonl"))
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stderr = BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        while !line.contains("serving ") {
            line.clear();
            assert!(
                stderr.read_line(&mut line).unwrap() > 0,
                "mcpwall serve exited"
            );
        }
        assert!(
            line.contains("https://") && line.contains("client certificate or bearer token"),
            "{line}"
        );
        let addr = line
            .split("https://")
            .nth(1)
            .and_then(|r| r.split('/').next())
            .unwrap()
            .to_string();
        std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::stderr()));
        Gateway {
            child,
            addr,
            ca,
            bob_token,
            _dir: dir,
        }
    }

    /// POST `body` to `/mcp` over TLS, with this client certificate and bearer token.
    /// `Err`: the handshake (or the connection) failed.
    fn post(
        &self,
        client: Option<&(rcgen::Certificate, rcgen::KeyPair)>,
        token: Option<&str>,
        session: Option<&str>,
        body: &str,
    ) -> Result<(u16, String), String> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = rustls::RootCertStore::empty();
        roots.add(self.ca.der.clone()).unwrap();
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots);
        let config = match client {
            Some((cert, key)) => builder
                .with_client_auth_cert(
                    vec![cert.der().clone()],
                    PrivateKeyDer::Pkcs8(key.serialize_der().into()),
                )
                .unwrap(),
            None => builder.with_no_client_auth(),
        };
        let conn = rustls::ClientConnection::new(
            Arc::new(config),
            ServerName::try_from("127.0.0.1").unwrap(),
        )
        .unwrap();
        let tcp = TcpStream::connect(&self.addr).unwrap();
        tcp.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut tls = rustls::StreamOwned::new(conn, tcp);
        let mut req = format!(
            "POST /mcp HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nAccept: application/json, text/event-stream\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
            self.addr,
            body.len()
        );
        if let Some(t) = token {
            req.push_str(&format!("Authorization: Bearer {t}\r\n"));
        }
        if let Some(s) = session {
            req.push_str(&format!("Mcp-Session-Id: {s}\r\n"));
        }
        req.push_str("\r\n");
        req.push_str(body);
        tls.write_all(req.as_bytes()).map_err(|e| e.to_string())?;
        let mut raw = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            match tls.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => raw.extend_from_slice(&buf[..n]),
                // The server may close without close_notify once the answer is sent.
                Err(_) if !raw.is_empty() => break,
                Err(e) => return Err(e.to_string()),
            }
        }
        let text = String::from_utf8_lossy(&raw).into_owned();
        let status = text
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| format!("no HTTP answer: {text:?}"))?;
        Ok((status, text))
    }

    /// A session opened with this certificate and token; its id.
    fn initialize(
        &self,
        client: Option<&(rcgen::Certificate, rcgen::KeyPair)>,
        token: Option<&str>,
    ) -> Result<String, (u16, String)> {
        let (status, text) = self
            .post(client, token, None, INITIALIZE)
            .map_err(|e| (0, e))?;
        if status != 200 {
            return Err((status, text));
        }
        Ok(text
            .lines()
            .find_map(|l| {
                l.to_ascii_lowercase()
                    .strip_prefix("mcp-session-id: ")
                    .map(|s| s.trim().to_string())
            })
            .expect("a session id"))
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#;

fn echo(text: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"echo","arguments":{{"text":"{text}"}}}}}}"#
    )
}

#[test]
fn a_client_certificate_stands_for_the_identity_it_names() {
    let g = Gateway::start();
    let client = rcgen::ExtendedKeyUsagePurpose::ClientAuth;
    let alice = g.ca.issue("alice", &[], client.clone());
    // Bob's certificate names him in an alternative name only.
    let bob = g.ca.issue("workstation 7", &["bob"], client.clone());

    // Alice, by her certificate: judged as alice (her identity rule denies echo).
    let a = g.initialize(Some(&alice), None).expect("alice's session");
    let (status, text) = g
        .post(Some(&alice), None, Some(&a), &echo("from-alice"))
        .unwrap();
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("alice-may-not-echo"), "{text}");
    // Bob, by the alternative name: allowed.
    let b = g.initialize(Some(&bob), None).expect("bob's session");
    let (status, text) = g
        .post(Some(&bob), None, Some(&b), &echo("from-bob"))
        .unwrap();
    assert_eq!(status, 200, "{text}");
    assert!(
        text.contains("from-bob") && !text.contains("may-not"),
        "{text}"
    );
    // Sessions stay their identity's: bob's certificate on alice's session is refused.
    let (status, _) = g
        .post(Some(&bob), None, Some(&a), &echo("crossing"))
        .unwrap();
    assert_eq!(status, 404);
    // A bearer token still works without a certificate.
    assert!(g.initialize(None, Some(&g.bob_token)).is_ok());
}

#[test]
fn without_a_valid_certificate_or_token_nothing_is_forwarded() {
    let g = Gateway::start();
    let client = rcgen::ExtendedKeyUsagePurpose::ClientAuth;
    // Neither: 401.
    let (status, text) = g.initialize(None, None).unwrap_err();
    assert_eq!(status, 401, "{text}");
    // A certificate of the CA naming no identity: 401.
    let mallory = g.ca.issue("mallory", &[], client.clone());
    let (status, text) = g.initialize(Some(&mallory), None).unwrap_err();
    assert_eq!(status, 401, "{text}");
    // A certificate naming alice, issued by another CA: the handshake fails.
    let rogue = Ca::new("rogue CA");
    let fake_alice = rogue.issue("alice", &[], client.clone());
    let (status, why) = g.initialize(Some(&fake_alice), None).unwrap_err();
    assert_eq!(status, 0, "the handshake should fail: {why}");
    // A certificate of the CA naming alice, but for servers only: the handshake fails.
    let server_alice =
        g.ca.issue("alice", &[], rcgen::ExtendedKeyUsagePurpose::ServerAuth);
    let (status, why) = g.initialize(Some(&server_alice), None).unwrap_err();
    assert_eq!(status, 0, "the handshake should fail: {why}");
    // A certificate for alice with bob's token: two identities, 401.
    let alice = g.ca.issue("alice", &[], client);
    let (status, text) = g.initialize(Some(&alice), Some(&g.bob_token)).unwrap_err();
    assert_eq!(status, 401, "{text}");
    // None of them reached the server.
    let received =
        std::fs::read_to_string(g._dir.path().join("received.jsonl")).unwrap_or_default();
    assert!(!received.contains("initialize"), "{received}");
}

/// `tests/interop/mtls_gateway.py`: the official MCP Python SDK client, with a client
/// certificate, over HTTPS to server-everything (skipped without the interop dependencies
/// unless `MCPWALL_REQUIRE_INTEROP=1`).
#[test]
fn the_sdk_client_with_a_client_certificate_over_https() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop");
    let python: PathBuf = dir.join(".venv/bin/python");
    if !(python.exists() && dir.join("node_modules/.bin/mcp-server-everything").exists()) {
        assert!(
            std::env::var_os("MCPWALL_REQUIRE_INTEROP").is_none(),
            "interop dependencies missing in {}",
            dir.display()
        );
        eprintln!("\n!!! SKIPPED mtls_gateway.py: no interop venv or node_modules !!!\n");
        return;
    }
    let mut child = Command::new(&python)
        .arg(dir.join("mtls_gateway.py"))
        .arg(env!("CARGO_BIN_EXE_mcpwall"))
        .current_dir(&dir)
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(300);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("mtls_gateway.py did not finish within 300 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(
        status.success(),
        "mtls_gateway.py checks failed: {status:?}"
    );
}
