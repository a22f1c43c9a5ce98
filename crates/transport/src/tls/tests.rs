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
    let provider = shared_crypto_provider();
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

/// The provider end to end, once per key algorithm *ring* signs with: a
/// server with a fresh self-signed certificate of that algorithm, a client
/// that trusts exactly that certificate (the verified mode: chain, name and
/// the handshake's signature checked by the provider's algorithms).
#[tokio::test(flavor = "current_thread")]
async fn the_provider_signs_and_verifies_each_key_algorithm() {
    let algorithms: [(&str, &rcgen::SignatureAlgorithm); 3] = [
        ("ecdsa-p256", &rcgen::PKCS_ECDSA_P256_SHA256),
        ("ecdsa-p384", &rcgen::PKCS_ECDSA_P384_SHA384),
        ("ed25519", &rcgen::PKCS_ED25519),
    ];
    for (name, algorithm) in algorithms {
        let key = rcgen::KeyPair::generate_for(algorithm).expect("a key");
        let cert = rcgen::CertificateParams::new(vec!["localhost".to_owned()])
            .expect("parameters")
            .self_signed(&key)
            .expect("a certificate");
        let ca = std::env::temp_dir().join(format!(
            "lookout-transport-{name}-{}.pem",
            std::process::id()
        ));
        std::fs::write(&ca, cert.pem()).expect("the CA file");
        let client = client_config_from_files(&ca, None);
        let _ = std::fs::remove_file(&ca);
        let client = client.expect("a verified client configuration");
        let server = ServerConfig::builder_with_provider(shared_crypto_provider())
            .with_safe_default_protocol_versions()
            .expect("TLS versions")
            .with_no_client_auth()
            .with_single_cert(
                vec![cert.der().clone()],
                PrivateKeyDer::Pkcs8(key.serialize_der().into()),
            )
            .expect("the provider loads the key");
        let body = ping_once(server, client)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(body.as_ref(), b"OK", "{name}");
    }
}

/// Every TLS signature scheme the provider offers maps to algorithms it
/// also verifies certificate chains with, and the nine schemes rustls's
/// *ring* provider offered are all there.
#[test]
fn the_provider_offers_ring_s_signature_schemes() {
    let provider = crypto_provider();
    let algorithms = provider.signature_verification_algorithms;
    let schemes = algorithms.supported_schemes();
    for scheme in [
        SignatureScheme::ECDSA_NISTP384_SHA384,
        SignatureScheme::ECDSA_NISTP256_SHA256,
        SignatureScheme::ED25519,
        SignatureScheme::RSA_PSS_SHA512,
        SignatureScheme::RSA_PSS_SHA384,
        SignatureScheme::RSA_PSS_SHA256,
        SignatureScheme::RSA_PKCS1_SHA512,
        SignatureScheme::RSA_PKCS1_SHA384,
        SignatureScheme::RSA_PKCS1_SHA256,
    ] {
        assert!(schemes.contains(&scheme), "{scheme:?} missing");
    }
    for (scheme, mapped) in algorithms.mapping {
        for alg in *mapped {
            let id = (alg.public_key_alg_id(), alg.signature_alg_id());
            assert!(
                algorithms
                    .all
                    .iter()
                    .any(|a| (a.public_key_alg_id(), a.signature_alg_id()) == id),
                "{scheme:?} maps to an algorithm chains are not verified with"
            );
        }
    }
    assert!(!provider.cipher_suites.is_empty() && !provider.kx_groups.is_empty());
}
