//! TLS as Docker's CLI sets it up: `ca.pem`, `cert.pem` and `key.pem` in
//! `DOCKER_CERT_PATH` (default `~/.docker`), or a context's store. The
//! server is verified against `ca.pem`, except where the docker CLI does not
//! verify it (`DOCKER_TLS` without `DOCKER_TLS_VERIFY`, a context's
//! `SkipTLSVerify`): then any certificate is taken, no `ca.pem` is read, and
//! the handshake's signatures are still checked (the server holds the key of
//! the certificate it shows).

use std::sync::Arc;

use lookout_transport::{ClientConfig, client_config_from_files, unverified_client_config};

use super::host::TlsEnv;
use crate::error::CompatError;

/// Builds the client configuration from the files (read anew on every dial):
/// `ca.pem` verifies the engine unless [`TlsEnv::skip_verify`] says why not
/// (then any certificate is taken: `lookout-transport`'s unverified mode);
/// `cert.pem` and `key.pem` are shown when both exist.
pub(crate) fn client_config(env: &TlsEnv) -> Result<Arc<ClientConfig>, CompatError> {
    let dir = env.cert_path.as_deref().ok_or_else(|| {
        CompatError::Tls("no DOCKER_CERT_PATH and no HOME to find ca.pem in".to_owned())
    })?;
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    let identity = (cert.exists() && key.exists()).then_some((cert.as_path(), key.as_path()));
    if env.skip_verify.is_some() {
        unverified_client_config(identity)
    } else {
        client_config_from_files(&dir.join("ca.pem"), identity)
    }
    .map_err(|e| CompatError::Tls(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http;
    use crate::location::host::Host;
    use lookout_transport::shared_crypto_provider;
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};
    use std::path::{Path, PathBuf};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio_rustls::rustls::RootCertStore;
    use tokio_rustls::rustls::ServerConfig;
    use tokio_rustls::rustls::server::WebPkiClientVerifier;

    /// Test-only certificates laid out as in `DOCKER_CERT_PATH` (`ca.pem`,
    /// `cert.pem`, `key.pem`), plus the server's.
    fn certs() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/certs")
    }

    /// A TLS server showing `cert`/`key` (files of the test CA's) that
    /// requires a client certificate from the test CA.
    fn server_showing(cert: &str, key: &str) -> ServerConfig {
        let dir = certs();
        let provider = shared_crypto_provider();
        let mut roots = RootCertStore::empty();
        for cert in CertificateDer::pem_file_iter(dir.join("ca.pem")).expect("ca.pem") {
            roots.add(cert.expect("a CA certificate")).expect("the CA");
        }
        let verifier =
            WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
                .build()
                .expect("a client verifier");
        let chain = CertificateDer::pem_file_iter(dir.join(cert))
            .expect(cert)
            .collect::<Result<Vec<_>, _>>()
            .expect("a certificate");
        let key = PrivateKeyDer::from_pem_file(dir.join(key)).expect(key);
        ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("TLS versions")
            .with_client_cert_verifier(verifier)
            .with_single_cert(chain, key)
            .expect("a key")
    }

    /// A TLS server that requires a client certificate from the test CA and
    /// answers one request with `200 OK`.
    fn server_config() -> Arc<ServerConfig> {
        Arc::new(server_showing("server-cert.pem", "server-key.pem"))
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
                tls: true,
                cert_path: Some(certs()),
                skip_verify: None,
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
        let config = ServerConfig::builder_with_provider(shared_crypto_provider())
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
                tls: false,
                cert_path: Some(certs()),
                skip_verify: None,
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

    /// A directory with the client's `cert.pem` and `key.pem` and no
    /// `ca.pem`, removed on drop.
    struct NoCa(PathBuf);

    impl NoCa {
        fn new(test: &str) -> Self {
            let dir =
                std::env::temp_dir().join(format!("lookout-tls-{test}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).expect("a temp dir");
            for f in ["cert.pem", "key.pem"] {
                std::fs::copy(certs().join(f), dir.join(f)).expect("a copy");
            }
            Self(dir)
        }

        fn env(&self) -> TlsEnv {
            TlsEnv {
                tls: true,
                cert_path: Some(self.0.clone()),
                skip_verify: Some("test".to_owned()),
            }
        }
    }

    impl Drop for NoCa {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// `GET /_ping` over TLS to a server with `config` on 127.0.0.1,
    /// answering `200 OK` when its handshake succeeds: the client's result.
    async fn ping_once(config: ServerConfig, env: TlsEnv) -> Result<bytes::Bytes, CompatError> {
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a port");
        let port = listener.local_addr().expect("the port").port();
        let server = async {
            let (tcp, _) = listener.accept().await.expect("a connection");
            let Ok(mut tls) = acceptor.accept(tcp).await else {
                return;
            };
            let mut request = Vec::new();
            while !request.ends_with(b"\r\n\r\n") {
                let mut byte = [0u8; 1];
                if tls.read_exact(&mut byte).await.is_err() {
                    return;
                }
                request.push(byte[0]);
            }
            let _ = tls
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nOK")
                .await;
            let _ = tls.shutdown().await;
        };
        let client = async {
            let host = Host::parse(&format!("tcp://localhost:{port}"), "test", true)?;
            http::get(&crate::api::Api::new(host, env), "/_ping")
                .await?
                .ok("/_ping")
                .await?
                .body("/_ping", 64)
                .await
        };
        let ((), result) = tokio::join!(server, client);
        result
    }

    /// A server that shows the client's own certificate (issued for client
    /// authentication, not for `localhost`) and requires a client
    /// certificate from the test CA, as `dockerd --tlsverify` does.
    fn server_with_the_clients_certificate() -> ServerConfig {
        server_showing("cert.pem", "key.pem")
    }

    #[tokio::test(flavor = "current_thread")]
    async fn unverified_takes_any_certificate_and_reads_no_ca() {
        let no_ca = NoCa::new("any");
        let body = ping_once(server_with_the_clients_certificate(), no_ca.env())
            .await
            .expect("a TLS exchange without verifying the server");
        assert_eq!(body.as_ref(), b"OK");
        // Verified, the same server is refused (and ca.pem is needed).
        let verified = TlsEnv {
            skip_verify: None,
            ..no_ca.env()
        };
        let err = ping_once(server_with_the_clients_certificate(), verified)
            .await
            .expect_err("no ca.pem to verify with");
        assert!(err.to_string().contains("ca.pem"), "{err}");
    }

    #[test]
    fn missing_ca_is_a_dial_error_naming_the_file() {
        let env = TlsEnv {
            tls: true,
            cert_path: Some("/nonexistent/lookout-certs".into()),
            skip_verify: None,
        };
        let err = client_config(&env).expect_err("no ca.pem");
        assert!(
            err.to_string()
                .contains("/nonexistent/lookout-certs/ca.pem"),
            "{err}"
        );
    }
}
