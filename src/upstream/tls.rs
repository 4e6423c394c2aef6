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
    let mut roots = RootCertStore::empty();
    match ca_file {
        Some(path) => {
            let bad = |why: String| UpstreamError::CaFile {
                path: path.to_path_buf(),
                why,
            };
            let certs = CertificateDer::pem_file_iter(path)
                .map_err(|e| bad(e.to_string()))?
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| bad(e.to_string()))?;
            if certs.is_empty() {
                return Err(bad("it holds no PEM certificate".into()));
            }
            for cert in certs {
                roots.add(cert).map_err(|e| bad(e.to_string()))?;
            }
        }
        None => roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| UpstreamError::Tls(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}
