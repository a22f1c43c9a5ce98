//! What connecting, setting up TLS or an exchange met: [`TransportError`].
//! Each variant keeps its cause typed (the OS's, rustls's, hyper's); the
//! callers add what they know (the host, the path).

#[cfg(feature = "tls")]
use std::path::PathBuf;

/// Why a socket could not be opened, a TLS configuration built, or an
/// exchange completed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TransportError {
    /// The socket could not be opened (refused, no such socket, `ssh` not
    /// started), or set up (`TCP_NODELAY`).
    #[error("{0}")]
    Connect(#[source] std::io::Error),
    /// A PEM file cannot be read or parsed.
    #[cfg(feature = "tls")]
    #[error("{what} {}: {source}", path.display())]
    #[non_exhaustive]
    Pem {
        /// What was done with it: `reading`, `parsing`.
        what: &'static str,
        /// The file (never its content).
        path: PathBuf,
        /// Why.
        #[source]
        source: rustls_pki_types::pem::Error,
    },
    /// A certificate or key of a file cannot be used.
    #[cfg(feature = "tls")]
    #[error("{what} {}: {source}", path.display())]
    #[non_exhaustive]
    Certificate {
        /// What was done with it: `using`, `using the CA of`.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// rustls's reason.
        #[source]
        source: tokio_rustls::rustls::Error,
    },
    /// rustls refused the configuration (its protocol versions).
    #[cfg(feature = "tls")]
    #[error("{0}")]
    Config(#[source] tokio_rustls::rustls::Error),
    /// The host is no name a certificate can be for.
    #[cfg(feature = "tls")]
    #[error("{name:?} is not a valid TLS server name: {source}")]
    #[non_exhaustive]
    ServerName {
        /// The host.
        name: String,
        /// Why.
        #[source]
        source: rustls_pki_types::InvalidDnsNameError,
    },
    /// The TLS handshake failed (a certificate refused either way, a
    /// signature that does not verify, the connection closed).
    #[cfg(feature = "tls")]
    #[error("handshake with {name}: {source}")]
    #[non_exhaustive]
    Handshake {
        /// The server's name.
        name: String,
        /// rustls's error, as the I/O error it comes in.
        #[source]
        source: std::io::Error,
    },
    /// HTTP failed on the connection (reset, closed mid-response, bad
    /// framing).
    #[error("HTTP: {0}")]
    Http(#[source] hyper::Error),
    /// A body was larger than its limit. (Exhaustive: the limit is all
    /// there is to tell.)
    #[error("the response exceeds {limit} bytes")]
    TooLarge {
        /// The limit in bytes.
        limit: usize,
    },
}
