//! HTTPS for `mcpwall serve` (`--tls-cert`, `--tls-key`), and client certificates as a
//! way to present an identity (`--client-ca`): rustls verifies the chain against the CA
//! during the handshake (a certificate that does not verify ends the connection there);
//! this module then only reads the names of the verified certificate. Which identity the
//! names stand for is the gateway's decision (`server::Gateway::authenticate`), against
//! the identities of the token file.

use std::path::{Path, PathBuf};

/// Names of the client certificate a connection was verified with: the subject's common
/// names, then the DNS, e-mail and URI alternative names, in certificate order. Put in
/// each request's extensions by the listener.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientCertificate {
    pub names: Vec<String>,
}

/// The TLS settings of a listener could not be made.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read {what} {}: {source}", .path.display())]
    Read {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{} holds no {what} in PEM form", .path.display())]
    Empty { what: &'static str, path: PathBuf },
    #[error(
        "this mcpwall was built without TLS (the `tls` feature); serve plain HTTP behind a TLS-terminating proxy, or use a build with it"
    )]
    NotBuilt,
    #[error("{0}")]
    Config(String),
}

/// What the listener needs to speak TLS.
#[derive(Clone)]
pub struct Tls {
    #[cfg(feature = "tls")]
    acceptor: tokio_rustls::TlsAcceptor,
}

impl Tls {
    /// The server's certificate chain and key (PEM), and with `client_ca` the CAs client
    /// certificates are verified against. A client may still come without a certificate
    /// (it then needs a bearer token), but one that sends a certificate the CA did not
    /// issue fails the handshake.
    #[cfg(feature = "tls")]
    pub fn new(cert: &Path, key: &Path, client_ca: Option<&Path>) -> Result<Tls, TlsError> {
        use std::sync::Arc;

        use rustls_pki_types::pem::PemObject;
        use rustls_pki_types::{CertificateDer, PrivateKeyDer};

        let read = |what: &'static str, path: &Path| {
            std::fs::read(path).map_err(|source| TlsError::Read {
                what,
                path: path.into(),
                source,
            })
        };
        let certs =
            |what: &'static str, path: &Path| -> Result<Vec<CertificateDer<'static>>, TlsError> {
                let pem = read(what, path)?;
                let certs: Vec<_> = CertificateDer::pem_slice_iter(&pem)
                    .filter_map(Result::ok)
                    .collect();
                if certs.is_empty() {
                    return Err(TlsError::Empty {
                        what,
                        path: path.into(),
                    });
                }
                Ok(certs)
            };
        let chain = certs("certificate", cert)?;
        let key_pem = read("private key", key)?;
        let key = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|_| TlsError::Empty {
            what: "private key",
            path: key.into(),
        })?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsError::Config(e.to_string()))?;
        let builder = match client_ca {
            None => builder.with_no_client_auth(),
            Some(ca) => {
                let mut roots = rustls::RootCertStore::empty();
                for c in certs("CA certificate", ca)? {
                    roots.add(c).map_err(|e| {
                        TlsError::Config(format!(
                            "{}: not a usable CA certificate: {e}",
                            ca.display()
                        ))
                    })?;
                }
                let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                    Arc::new(roots),
                    provider,
                )
                .allow_unauthenticated()
                .build()
                .map_err(|e| TlsError::Config(format!("{}: {e}", ca.display())))?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        let mut config = builder.with_single_cert(chain, key).map_err(|e| {
            TlsError::Config(format!("the certificate and key do not go together: {e}"))
        })?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Tls {
            acceptor: tokio_rustls::TlsAcceptor::from(Arc::new(config)),
        })
    }

    #[cfg(not(feature = "tls"))]
    pub fn new(_cert: &Path, _key: &Path, _client_ca: Option<&Path>) -> Result<Tls, TlsError> {
        Err(TlsError::NotBuilt)
    }

    /// The handshake on an accepted connection: the stream, and the names of the client
    /// certificate it was verified with, if one was sent.
    #[cfg(feature = "tls")]
    pub async fn accept(
        &self,
        tcp: tokio::net::TcpStream,
    ) -> std::io::Result<(
        tokio_rustls::server::TlsStream<tokio::net::TcpStream>,
        Option<ClientCertificate>,
    )> {
        let stream = tokio::time::timeout(HANDSHAKE_TIMEOUT, self.acceptor.accept(tcp))
            .await
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "TLS handshake"))??;
        let names = stream
            .get_ref()
            .1
            .peer_certificates()
            .and_then(|chain| chain.first())
            .map(|leaf| ClientCertificate {
                names: certificate_names(leaf),
            });
        Ok((stream, names))
    }
}

/// A client that does not finish its handshake in this time is dropped.
#[cfg(feature = "tls")]
const HANDSHAKE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// The common names of the subject, then the DNS, e-mail and URI alternative names.
#[cfg(feature = "tls")]
fn certificate_names(der: &[u8]) -> Vec<String> {
    use x509_parser::extensions::GeneralName;
    let Ok((_, cert)) = x509_parser::parse_x509_certificate(der) else {
        return Vec::new();
    };
    let mut names: Vec<String> = cert
        .subject()
        .iter_common_name()
        .filter_map(|cn| cn.as_str().ok())
        .map(str::to_string)
        .collect();
    if let Ok(Some(san)) = cert.subject_alternative_name() {
        for name in &san.value.general_names {
            match name {
                GeneralName::DNSName(n) | GeneralName::RFC822Name(n) | GeneralName::URI(n) => {
                    names.push(n.to_string())
                }
                _ => {}
            }
        }
    }
    names
}
