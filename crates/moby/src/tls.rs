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
    use crate::host::Host;
    use crate::http;
    use std::path::PathBuf;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio_rustls::rustls::ServerConfig;
    use tokio_rustls::rustls::server::WebPkiClientVerifier;

    /// Test-only certificates laid out as in `DOCKER_CERT_PATH` (`ca.pem`,
    /// `cert.pem`, `key.pem`), plus the server's.
    fn certs() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/certs")
    }

    /// A TLS server that requires a client certificate from the test CA and
    /// answers one request with `200 OK`.
    fn server_config() -> Arc<ServerConfig> {
        let dir = certs();
        let provider = Arc::new(crypto::ring::default_provider());
        let mut roots = RootCertStore::empty();
        for cert in CertificateDer::pem_file_iter(dir.join("ca.pem")).expect("ca.pem") {
            roots.add(cert.expect("a CA certificate")).expect("the CA");
        }
        let verifier =
            WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
                .build()
                .expect("a client verifier");
        let chain = CertificateDer::pem_file_iter(dir.join("server-cert.pem"))
            .expect("server-cert.pem")
            .collect::<Result<Vec<_>, _>>()
            .expect("the server's certificate");
        let key = PrivateKeyDer::from_pem_file(dir.join("server-key.pem")).expect("server-key.pem");
        let config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("TLS versions")
            .with_client_cert_verifier(verifier)
            .with_single_cert(chain, key)
            .expect("the server's key");
        Arc::new(config)
    }

    #[tokio::test(flavor = "current_thread")]
    async fn speaks_tls_with_a_client_certificate() {
        let acceptor = tokio_rustls::TlsAcceptor::from(server_config());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a port");
        let port = listener.local_addr().expect("the port").port();
        let server = async {
            let (tcp, _) = listener.accept().await.expect("a connection");
            let mut tls = acceptor.accept(tcp).await.expect("a handshake");
            let mut request = Vec::new();
            while !request.ends_with(b"\r\n\r\n") {
                let mut byte = [0u8; 1];
                tls.read_exact(&mut byte).await.expect("the request");
                request.push(byte[0]);
            }
            tls.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nOK")
                .await
                .expect("the response");
            tls.shutdown().await.expect("close_notify");
            String::from_utf8_lossy(&request).into_owned()
        };
        let client = async {
            let host = Host::parse(&format!("tcp://localhost:{port}"), "test", true)?;
            let env = TlsEnv {
                verify: true,
                cert_path: Some(certs()),
            };
            http::get(&crate::api::Api::new(host, env), "/_ping")
                .await?
                .ok("/_ping")
                .await?
                .body("/_ping", 64)
                .await
        };
        let (request, body) = tokio::join!(server, client);
        assert!(request.starts_with("GET /_ping HTTP/1.1\r\n"), "{request}");
        assert_eq!(body.expect("a TLS exchange").as_ref(), b"OK");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_server_outside_the_ca_is_refused() {
        // The client's own certificate is no server certificate for `localhost`.
        let dir = certs();
        let chain = CertificateDer::pem_file_iter(dir.join("cert.pem"))
            .expect("cert.pem")
            .collect::<Result<Vec<_>, _>>()
            .expect("a certificate");
        let key = PrivateKeyDer::from_pem_file(dir.join("key.pem")).expect("key.pem");
        let config =
            ServerConfig::builder_with_provider(Arc::new(crypto::ring::default_provider()))
                .with_safe_default_protocol_versions()
                .expect("TLS versions")
                .with_no_client_auth()
                .with_single_cert(chain, key)
                .expect("a key");
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a port");
        let port = listener.local_addr().expect("the port").port();
        let server = async {
            let (tcp, _) = listener.accept().await.expect("a connection");
            let _ = acceptor.accept(tcp).await;
        };
        let client = async {
            let host = Host::parse(&format!("https://localhost:{port}"), "test", false)?;
            let env = TlsEnv {
                verify: false,
                cert_path: Some(certs()),
            };
            http::get(&crate::api::Api::new(host, env), "/_ping")
                .await
                .map(|_| ())
        };
        let ((), result) = tokio::join!(server, client);
        let err = result.expect_err("the server's certificate is not for localhost");
        assert!(
            err.to_string().contains("handshake with localhost"),
            "{err}"
        );
    }

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
