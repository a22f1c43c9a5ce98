//! TLS as Docker's CLI sets it up: `ca.pem`, `cert.pem` and `key.pem` in
//! `DOCKER_CERT_PATH` (default `~/.docker`). The server is always verified
//! against `ca.pem`; there is no insecure mode.

use std::path::Path;
use std::sync::Arc;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::{ClientConfig, RootCertStore, crypto};

use super::error::CompatError;
use super::host::TlsEnv;

fn tls_error(path: &Path, what: &str, e: impl std::fmt::Display) -> CompatError {
    CompatError::Tls(format!("{what} {}: {e}", path.display()))
}

/// Builds the client configuration from the files (read anew on every dial).
pub(crate) fn client_config(env: &TlsEnv) -> Result<Arc<ClientConfig>, CompatError> {
    let dir = env.cert_path.as_deref().ok_or_else(|| {
        CompatError::Tls("no DOCKER_CERT_PATH and no HOME to find ca.pem in".to_owned())
    })?;
    let ca = dir.join("ca.pem");
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(&ca).map_err(|e| tls_error(&ca, "reading", e))? {
        let cert = cert.map_err(|e| tls_error(&ca, "parsing", e))?;
        roots
            .add(cert)
            .map_err(|e| tls_error(&ca, "using the CA of", e))?;
    }
    let provider = Arc::new(crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| CompatError::Tls(e.to_string()))?
        .with_root_certificates(roots);
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    let config = if cert.exists() && key.exists() {
        let chain = CertificateDer::pem_file_iter(&cert)
            .map_err(|e| tls_error(&cert, "reading", e))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| tls_error(&cert, "parsing", e))?;
        let key_der =
            PrivateKeyDer::from_pem_file(&key).map_err(|e| tls_error(&key, "reading", e))?;
        builder
            .with_client_auth_cert(chain, key_der)
            .map_err(|e| tls_error(&cert, "using", e))?
    } else {
        builder.with_no_client_auth()
    };
    Ok(Arc::new(config))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_ca_is_a_dial_error_naming_the_file() {
        let env = TlsEnv {
            verify: true,
            cert_path: Some("/nonexistent/lookout-certs".into()),
        };
        let err = client_config(&env).expect_err("no ca.pem");
        assert!(
            err.to_string()
                .contains("/nonexistent/lookout-certs/ca.pem"),
            "{err}"
        );
    }
}
