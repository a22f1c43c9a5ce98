//! TLS with rustls (ring, TLS 1.2 and 1.3): client configurations from PEM
//! files, and the handshake over a TCP stream ([`Socket::tls`]).
//!
//! A server is verified against the CA certificates of a file
//! ([`client_config_from_files`]), or, in the unverified mode
//! ([`unverified_client_config`], the docker CLI's `InsecureSkipVerify`),
//! not at all: any certificate is taken (no chain, name or expiry check), no
//! CA file is read, and the handshake's signatures are still checked (the
//! server holds the key of the certificate it shows). **Anyone on the path
//! can pose as the server**: a caller that uses it says so (lookout-moby
//! warns once per watch, naming why).

use std::path::Path;
use std::sync::Arc;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use tokio::net::TcpStream;
use tokio_rustls::rustls::client::danger::{
    HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier,
};
use tokio_rustls::rustls::crypto::{
    CryptoProvider, verify_tls12_signature, verify_tls13_signature,
};
use tokio_rustls::rustls::{
    ClientConfig, DigitallySignedStruct, Error as RustlsError, RootCertStore, SignatureScheme,
};

use crate::connect::Socket;
use crate::error::TransportError;

mod provider;
pub use provider::{crypto_provider, shared_crypto_provider};

/// Takes the server's certificate unverified (no chain, name or expiry
/// check), as the docker CLI's `InsecureSkipVerify`; the handshake's
/// signatures are verified with the provider's algorithms.
#[derive(Debug)]
struct NoCertificateCheck(Arc<CryptoProvider>);

impl ServerCertVerifier for NoCertificateCheck {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, RustlsError> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, RustlsError> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, RustlsError> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

fn pem_error(
    path: &Path,
    what: &'static str,
) -> impl FnOnce(rustls_pki_types::pem::Error) -> TransportError {
    move |source| TransportError::Pem {
        what,
        path: path.to_owned(),
        source,
    }
}

fn certificate_error(
    path: &Path,
    what: &'static str,
) -> impl FnOnce(RustlsError) -> TransportError {
    move |source| TransportError::Certificate {
        what,
        path: path.to_owned(),
        source,
    }
}

/// The roots of the PEM file `ca`.
fn roots(ca: &Path) -> Result<RootCertStore, TransportError> {
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(ca).map_err(pem_error(ca, "reading"))? {
        let cert = cert.map_err(pem_error(ca, "parsing"))?;
        roots
            .add(cert)
            .map_err(certificate_error(ca, "using the CA of"))?;
    }
    Ok(roots)
}

/// A rustls client configuration (ring, TLS 1.2 and 1.3) that verifies
/// servers against the CA certificates of the PEM file `ca`, and shows the
/// client certificate chain and private key of the PEM files `identity`
/// (certificate, key) when given (for servers that require a client
/// certificate). The files are read now; errors name the file (never its
/// content).
pub fn client_config_from_files(
    ca: &Path,
    identity: Option<(&Path, &Path)>,
) -> Result<Arc<ClientConfig>, TransportError> {
    build(Some(ca), identity)
}

/// The unverified mode: a configuration that takes any server certificate
/// (no chain, name or expiry check; no CA file read) and still verifies the
/// handshake's signatures (the server holds the key of the certificate it
/// shows), showing `identity` as [`client_config_from_files`] does.
/// **Anyone on the path can pose as the server**: say so when you use it.
pub fn unverified_client_config(
    identity: Option<(&Path, &Path)>,
) -> Result<Arc<ClientConfig>, TransportError> {
    build(None, identity)
}

/// Verified against `ca` (`None`: any certificate, see
/// [`NoCertificateCheck`]), with the client certificate and key `identity`.
fn build(
    ca: Option<&Path>,
    identity: Option<(&Path, &Path)>,
) -> Result<Arc<ClientConfig>, TransportError> {
    let provider = shared_crypto_provider();
    let versions = ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(TransportError::Config)?;
    let builder = match ca {
        None => versions
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(NoCertificateCheck(provider))),
        Some(ca) => versions.with_root_certificates(roots(ca)?),
    };
    let config = if let Some((cert, key)) = identity {
        let chain = CertificateDer::pem_file_iter(cert)
            .map_err(pem_error(cert, "reading"))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(pem_error(cert, "parsing"))?;
        let key_der = PrivateKeyDer::from_pem_file(key).map_err(pem_error(key, "reading"))?;
        builder
            .with_client_auth_cert(chain, key_der)
            .map_err(certificate_error(cert, "using"))?
    } else {
        builder.with_no_client_auth()
    };
    Ok(Arc::new(config))
}

impl Socket {
    /// The TLS handshake with `name` (the certificate's name: a host name or
    /// an IP address) over `tcp`, as `config` says.
    pub async fn tls(
        tcp: TcpStream,
        name: &str,
        config: Arc<ClientConfig>,
    ) -> Result<Self, TransportError> {
        let server =
            ServerName::try_from(name.to_owned()).map_err(|source| TransportError::ServerName {
                name: name.to_owned(),
                source,
            })?;
        let stream = tokio_rustls::TlsConnector::from(config)
            .connect(server, tcp)
            .await
            .map_err(|source| TransportError::Handshake {
                name: name.to_owned(),
                source,
            })?;
        Ok(Self::Tls(Box::new(stream)))
    }
}

#[cfg(test)]
mod tests;
