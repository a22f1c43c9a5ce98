//! The unverified mode against TLS servers with the test CA's certificates
//! (`crates/moby/tests/certs`, the workspace's test CA): any certificate is
//! taken, the handshake's signature still checked.

use super::*;
use bytes::Bytes;
use http::{Request, header};
use http_body_util::Empty;
use std::path::PathBuf;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_rustls::rustls::ServerConfig;

/// The workspace's test CA and its certificates (see its README.md).
fn certs() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../moby/tests/certs")
}

/// The client's certificate and key, shown to servers that ask.
fn identity() -> (PathBuf, PathBuf) {
    (certs().join("cert.pem"), certs().join("key.pem"))
}

/// `GET /_ping` over TLS with `client` to a server with `config` on
/// 127.0.0.1, answering `200 OK` when its handshake succeeds: the client's
/// result.
async fn ping_once(
    config: ServerConfig,
    client: Arc<ClientConfig>,
) -> Result<Bytes, TransportError> {
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
        let tcp = Socket::tcp("localhost", port).await?;
        let socket = Socket::tls(tcp, "localhost", client).await?;
        let request = Request::get("/_ping")
            .header(header::HOST, format!("localhost:{port}"))
            .body(Empty::<Bytes>::new())
            .expect("a request");
        crate::exchange::send(socket, request).await?.body(64).await
    };
    let ((), result) = tokio::join!(server, client);
    result
}

/// Shows one certificate and signs with one key, whichever they are.
#[derive(Debug)]
struct FixedKey(Arc<tokio_rustls::rustls::sign::CertifiedKey>);

impl tokio_rustls::rustls::server::ResolvesServerCert for FixedKey {
    fn resolve(
        &self,
        _hello: tokio_rustls::rustls::server::ClientHello<'_>,
    ) -> Option<Arc<tokio_rustls::rustls::sign::CertifiedKey>> {
        Some(Arc::clone(&self.0))
    }
}

/// A server showing `server-cert.pem` and signing its handshake with
/// the key in `key_file`.
fn server_signing_with(key_file: &str) -> ServerConfig {
    let dir = certs();
    let provider = Arc::new(crypto::ring::default_provider());
    let chain = CertificateDer::pem_file_iter(dir.join("server-cert.pem"))
        .expect("server-cert.pem")
        .collect::<Result<Vec<_>, _>>()
        .expect("the server's certificate");
    let key = PrivateKeyDer::from_pem_file(dir.join(key_file)).expect("a key");
    let signer = provider
        .key_provider
        .load_private_key(key)
        .expect("a signing key");
    let certified = tokio_rustls::rustls::sign::CertifiedKey::new(chain, signer);
    ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(FixedKey(Arc::new(certified))))
}

#[tokio::test(flavor = "current_thread")]
async fn unverified_still_checks_the_handshake_signature() {
    let (cert, key) = identity();
    let unverified = || unverified_client_config(Some((&cert, &key))).expect("a config");
    // The certificate's own key: taken.
    let body = ping_once(server_signing_with("server-key.pem"), unverified())
        .await
        .expect("the certificate's key signs");
    assert_eq!(body.as_ref(), b"OK");
    // The client's key, not the certificate's: refused.
    let err = ping_once(server_signing_with("key.pem"), unverified())
        .await
        .expect_err("a signature by another key than the certificate's");
    assert!(err.to_string().contains("BadSignature"), "{err}");
}

#[test]
fn errors_name_the_file() {
    let missing = Path::new("/nonexistent/lookout-transport-ca.pem");
    let err = client_config_from_files(missing, None).expect_err("no such file");
    assert!(
        err.to_string()
            .contains("reading /nonexistent/lookout-transport-ca.pem"),
        "{err}"
    );
}
