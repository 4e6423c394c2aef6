//! TLS towards the upstream server: rustls, certificates verified against Mozilla's root
//! list (`webpki-roots`), or, with `--ca-file`, against the CAs of that file only (a
//! private CA is meant to replace the public ones for that server, not to add to them).

use std::path::Path;
use std::sync::Arc;

use rustls::RootCertStore;
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;

use super::UpstreamError;

/// The client configuration for `https://` upstreams.
pub fn client_config(ca_file: Option<&Path>) -> Result<Arc<rustls::ClientConfig>, UpstreamError> {
    let roots = roots(ca_file).map_err(|why| UpstreamError::CaFile {
        path: ca_file.unwrap_or(Path::new("")).to_path_buf(),
        why,
    })?;
    let config = builder(roots)
        .map_err(UpstreamError::Tls)?
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// The CAs a server certificate is verified against: those of `ca_file` only, or
/// Mozilla's list; why not, when the file can't be read or holds no certificate.
pub fn roots(ca_file: Option<&Path>) -> Result<RootCertStore, String> {
    let mut roots = RootCertStore::empty();
    match ca_file {
        Some(path) => {
            let certs = CertificateDer::pem_file_iter(path)
                .map_err(|e| e.to_string())?
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| e.to_string())?;
            if certs.is_empty() {
                return Err("it holds no PEM certificate".into());
            }
            for cert in certs {
                roots.add(cert).map_err(|e| e.to_string())?;
            }
        }
        None => roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
    }
    Ok(roots)
}

/// A client configuration on ring with the safe protocol versions, verifying servers
/// against `roots`, before the choice of client authentication.
pub fn builder(
    roots: RootCertStore,
) -> Result<rustls::ConfigBuilder<rustls::ClientConfig, rustls::client::WantsClientCert>, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots))
}
