//! The server's TLS configuration from PEM files: the certificate chain, its
//! private key and, for client certificates, the CA certificates that sign
//! them. Every error names the file (never its content).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls_pki_types::pem::{self, PemObject};
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::crypto::CryptoProvider;
use tokio_rustls::rustls::server::{VerifierBuilderError, WebPkiClientVerifier};
use tokio_rustls::rustls::{self, RootCertStore, ServerConfig};

/// The PEM files of `--serve-cert`, `--serve-key` and `--serve-client-ca`.
#[derive(Clone, Debug)]
pub struct TlsFiles {
    /// The certificate chain, the server's own first.
    pub cert: PathBuf,
    /// Its private key.
    pub key: PathBuf,
    /// Client certificates are required, signed by a CA of this file.
    pub client_ca: Option<PathBuf>,
}

impl TlsFiles {
    /// Each file, the certificate's first.
    pub fn paths(&self) -> impl Iterator<Item = &PathBuf> {
        [&self.cert, &self.key].into_iter().chain(&self.client_ca)
    }
}

/// Why the files do not make a TLS configuration.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("cannot read the {what} file {path}")]
    Read {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the {what} file {path} is not valid PEM")]
    Pem {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: pem::Error,
    },
    #[error("the {what} file {path} holds no {section}")]
    Missing {
        what: &'static str,
        path: PathBuf,
        /// The PEM section looked for.
        section: &'static str,
    },
    #[error("the key {key} does not match the certificate {cert}")]
    KeyMismatch { key: PathBuf, cert: PathBuf },
    #[error("cannot use the key {key} with the certificate {cert}")]
    Key {
        key: PathBuf,
        cert: PathBuf,
        #[source]
        source: rustls::Error,
    },
    #[error("cannot use the client CA file {path}")]
    ClientCa {
        path: PathBuf,
        #[source]
        source: ClientCaError,
    },
    #[error("cannot make the TLS configuration")]
    Config(#[source] rustls::Error),
}

/// Why a client CA file cannot verify client certificates.
#[derive(Debug, thiserror::Error)]
pub enum ClientCaError {
    #[error(transparent)]
    Certificate(#[from] rustls::Error),
    #[error(transparent)]
    Verifier(#[from] VerifierBuilderError),
}

/// What one load made: the configuration and the end-entity certificate
/// (its expiry is a metric).
#[derive(Debug)]
pub struct Config {
    pub server: Arc<ServerConfig>,
    pub certificate: CertificateDer<'static>,
}

const CERT: &str = "certificate";
const KEY: &str = "key";
const CLIENT_CA: &str = "client CA";

fn read(what: &'static str, path: &Path) -> Result<Vec<u8>, LoadError> {
    std::fs::read(path).map_err(|source| LoadError::Read {
        what,
        path: path.to_owned(),
        source,
    })
}

fn pem_error(what: &'static str, path: &Path) -> impl FnOnce(pem::Error) -> LoadError {
    move |source| LoadError::Pem {
        what,
        path: path.to_owned(),
        source,
    }
}

/// The certificates of the PEM file `path` (other sections skipped), at
/// least one.
fn certificates(
    what: &'static str,
    path: &Path,
) -> Result<Vec<CertificateDer<'static>>, LoadError> {
    let text = read(what, path)?;
    let certs = CertificateDer::pem_slice_iter(&text)
        .collect::<Result<Vec<_>, _>>()
        .map_err(pem_error(what, path))?;
    if certs.is_empty() {
        return Err(LoadError::Missing {
            what,
            path: path.to_owned(),
            section: "CERTIFICATE",
        });
    }
    Ok(certs)
}

/// The first private key of the PEM file `path` (PKCS#8, PKCS#1 or SEC1;
/// other sections, a certificate say, skipped).
fn private_key(path: &Path) -> Result<PrivateKeyDer<'static>, LoadError> {
    let text = read(KEY, path)?;
    PrivateKeyDer::from_pem_slice(&text).map_err(|e| match e {
        pem::Error::NoItemsFound => LoadError::Missing {
            what: KEY,
            path: path.to_owned(),
            section: "PRIVATE KEY",
        },
        e => pem_error(KEY, path)(e),
    })
}

/// A verifier of client certificates signed by a CA of the file `path`.
fn client_verifier(
    path: &Path,
    provider: &Arc<CryptoProvider>,
) -> Result<Arc<dyn rustls::server::danger::ClientCertVerifier>, LoadError> {
    let wrap = |source: ClientCaError| LoadError::ClientCa {
        path: path.to_owned(),
        source,
    };
    let mut roots = RootCertStore::empty();
    for cert in certificates(CLIENT_CA, path)? {
        roots.add(cert).map_err(|e| wrap(e.into()))?;
    }
    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), Arc::clone(provider))
        .build()
        .map_err(|e| wrap(e.into()))
}

/// Reads `files` into a server configuration (ring; TLS 1.2 and 1.3;
/// HTTP/1.1 by ALPN): the key must be the certificate's.
pub fn load(files: &TlsFiles) -> Result<Config, LoadError> {
    let provider = lookout_transport::shared_crypto_provider();
    let chain = certificates(CERT, &files.cert)?;
    let key = private_key(&files.key)?;
    let pair_error = |source: rustls::Error| match source {
        rustls::Error::InconsistentKeys(rustls::InconsistentKeys::KeyMismatch) => {
            LoadError::KeyMismatch {
                key: files.key.clone(),
                cert: files.cert.clone(),
            }
        }
        source => LoadError::Key {
            key: files.key.clone(),
            cert: files.cert.clone(),
            source,
        },
    };
    let certificate = chain[0].clone();
    let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(LoadError::Config)?;
    let builder = match &files.client_ca {
        Some(ca) => builder.with_client_cert_verifier(client_verifier(ca, &provider)?),
        None => builder.with_no_client_auth(),
    };
    let mut server = builder.with_single_cert(chain, key).map_err(pair_error)?;
    server.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Config {
        server: Arc::new(server),
        certificate,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A directory of the test's files, removed on drop.
    struct Dir(PathBuf);

    impl Dir {
        fn new(what: &str) -> Self {
            let dir = std::env::temp_dir()
                .join(format!("lookout-tls-load-{what}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).expect("dir");
            Self(dir)
        }

        fn write(&self, name: &str, text: &str) -> PathBuf {
            let path = self.0.join(name);
            std::fs::write(&path, text).expect("write");
            path
        }
    }

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// A self-signed certificate and its key, PEM.
    fn pair() -> (String, String) {
        let key = rcgen::KeyPair::generate().expect("key");
        let params = rcgen::CertificateParams::new(vec!["localhost".to_owned()]).expect("params");
        let cert = params.self_signed(&key).expect("certificate");
        (cert.pem(), key.serialize_pem())
    }

    fn files(cert: PathBuf, key: PathBuf, client_ca: Option<PathBuf>) -> TlsFiles {
        TlsFiles {
            cert,
            key,
            client_ca,
        }
    }

    #[test]
    fn a_pair_loads_with_or_without_a_client_ca_and_in_one_file() {
        let dir = Dir::new("good");
        let (cert, key) = pair();
        let (c, k) = (dir.write("c.pem", &cert), dir.write("k.pem", &key));
        let config = load(&files(c.clone(), k.clone(), None)).expect("loads");
        assert_eq!(config.server.alpn_protocols, [b"http/1.1".to_vec()]);
        load(&files(c.clone(), k, Some(c))).expect("loads with a client CA");
        let both = dir.write("both.pem", &format!("{key}{cert}"));
        load(&files(both.clone(), both, None)).expect("key and certificate in one file");
    }

    #[test]
    fn each_failure_names_its_file() {
        let dir = Dir::new("bad");
        let (cert, key) = pair();
        let (_, other_key) = pair();
        let (c, k) = (dir.write("c.pem", &cert), dir.write("k.pem", &key));
        let other = dir.write("other.pem", &other_key);
        let missing = dir.0.join("missing.pem");
        let empty = dir.write("empty.pem", "");
        let cut = dir.write("cut.pem", &cert[..cert.len() / 2]);
        let err = |f: TlsFiles| load(&f).expect_err("fails").to_string();

        let e = err(files(c.clone(), other.clone(), None));
        assert!(matches!(
            load(&files(c.clone(), other, None)),
            Err(LoadError::KeyMismatch { .. })
        ));
        assert!(e.contains("other.pem") && e.contains("c.pem"), "{e}");
        let e = err(files(missing.clone(), k.clone(), None));
        assert!(
            e.contains("certificate file") && e.contains("missing.pem"),
            "{e}"
        );
        let e = err(files(c.clone(), empty.clone(), None));
        assert!(e.contains("key file") && e.contains("PRIVATE KEY"), "{e}");
        let e = err(files(cut, k.clone(), None));
        assert!(e.contains("not valid PEM") && e.contains("cut.pem"), "{e}");
        let e = err(files(c.clone(), k.clone(), Some(empty)));
        assert!(
            e.contains("client CA file") && e.contains("empty.pem"),
            "{e}"
        );
        let e = err(files(c, k, Some(missing)));
        assert!(
            e.contains("client CA file") && e.contains("missing.pem"),
            "{e}"
        );
    }
}
