use crate::location::host::ConfigError;

/// Why a dial, a session or a probe failed. The core reports it in
/// [`Status::Disconnected`](lookout_core::Status::Disconnected) and retries.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CompatError {
    /// The host (from the environment, resolved on this dial) is unusable.
    #[error(transparent)]
    Host(#[from] ConfigError),
    /// The socket could not be opened (engine down, socket missing, refused…).
    #[non_exhaustive]
    #[error("cannot connect to {host}: {source}{hint}")]
    Connect {
        /// The host dialed.
        host: String,
        /// How the engine is started, when lookout found its default socket
        /// (Podman's service); else empty.
        hint: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A request over `ssh://` failed, and ssh said why (on its stderr).
    #[non_exhaustive]
    #[error("{source}; ssh to {host} said: {said}")]
    Ssh {
        /// The host dialed.
        host: String,
        /// ssh's stderr (its first 4 KiB, trimmed).
        said: String,
        /// The request's failure.
        #[source]
        source: Box<CompatError>,
    },
    /// TLS could not be set up (certificate files, handshake).
    #[error("TLS: {0}")]
    Tls(String),
    /// The request could not be built.
    #[error("invalid request: {0}")]
    Request(String),
    /// HTTP failed on the connection (reset, closed mid-response, bad framing).
    #[non_exhaustive]
    #[error("HTTP error on GET {path}: {source}")]
    Http {
        /// The request path, without the query.
        path: String,
        /// The HTTP layer's error (its type is not part of this crate's
        /// API: read it through `Display` and `Error::source`).
        #[source]
        source: lookout_core::BoxError,
    },
    /// The engine answered with an error status.
    #[non_exhaustive]
    #[error("GET {path} answered {status}: {message}")]
    Status {
        /// The request path, without the query.
        path: String,
        /// The HTTP status.
        status: u16,
        /// The engine's message.
        message: String,
    },
    /// The engine did not answer a request in time.
    #[non_exhaustive]
    #[error("GET {path} did not answer within {after:?}")]
    Timeout {
        /// The request path, without the query.
        path: String,
        /// How long lookout waited.
        after: std::time::Duration,
    },
    /// A response was larger than lookout accepts.
    #[non_exhaustive]
    #[error("the response to GET {path} exceeds {limit} bytes")]
    TooLarge {
        /// The request path.
        path: String,
        /// The limit in bytes.
        limit: usize,
    },
    /// The object list (`/containers/json`, `/services`) could not be decoded.
    #[non_exhaustive]
    #[error("cannot decode the list from GET {path}: {reason}")]
    List {
        /// The request path, without the query.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
}
