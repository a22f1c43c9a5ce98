//! TLS for `https://` endpoints, [`Tls`]: the CA members are verified
//! against and an optional client identity, read from PEM files once by
//! `lookout-transport`.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use lookout_transport::ClientConfig;

use crate::error::ConfigError;

/// TLS for `https://` endpoints: the CA certificates members are verified
/// against and, optionally, a client certificate and key (etcd's
/// `--client-cert-auth`). The PEM files are read once, by
/// [`Tls::from_files`]; `Debug` names the files, never their content.
#[derive(Clone)]
pub struct Tls {
    pub(crate) config: Arc<ClientConfig>,
    ca: PathBuf,
    cert: Option<PathBuf>,
}

impl Tls {
    /// Verifies members against the CA certificates in the PEM file `ca`,
    /// showing the certificate chain and private key of the PEM files
    /// `identity` (certificate, key) when given.
    pub fn from_files(ca: &Path, identity: Option<(&Path, &Path)>) -> Result<Self, ConfigError> {
        let config = lookout_transport::client_config_from_files(ca, identity)
            .map_err(|e| ConfigError::Tls(Box::new(e)))?;
        Ok(Self {
            config,
            ca: ca.to_owned(),
            cert: identity.map(|(cert, _)| cert.to_owned()),
        })
    }
}

impl fmt::Debug for Tls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tls")
            .field("ca", &self.ca)
            .field("cert", &self.cert)
            .finish_non_exhaustive()
    }
}
