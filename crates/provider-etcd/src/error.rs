//! What can go wrong: a configuration that can never work ([`ConfigError`]),
//! and what a request or a watch met ([`EtcdError`], each naming the member
//! and the path).

use std::time::Duration;

use lookout_transport::TransportError;

/// A configuration that can never work.
///
/// Sources are boxed errors: the HTTP and TLS crates underneath are not
/// part of this crate's API (their messages are kept).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// No endpoint was given.
    #[error(
        "no etcd endpoint given (http://HOST:PORT, https://HOST:PORT or HOST:PORT, comma-separated)"
    )]
    NoEndpoint,
    /// An endpoint that cannot be used.
    #[non_exhaustive]
    #[error("etcd endpoint `{endpoint}`: {why}")]
    Endpoint {
        /// As given.
        endpoint: String,
        /// Why not.
        why: String,
    },
    /// The password file cannot be read.
    #[non_exhaustive]
    #[error("cannot read the etcd password file {}: {source}", path.display())]
    PasswordFile {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The TLS files cannot be used (unreadable, not PEM, a key that does
    /// not fit its certificate): the message names the file.
    #[error("etcd TLS: {0}")]
    Tls(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// A prefix or source name that cannot be a key's part.
    #[non_exhaustive]
    #[error("{what} `{value}`: {why}")]
    Name {
        /// `prefix` or `source`.
        what: &'static str,
        /// As given.
        value: String,
        /// Why not.
        why: &'static str,
    },
}

/// What a request to etcd, or a watch, met.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EtcdError {
    /// The member could not be reached.
    #[non_exhaustive]
    #[error("cannot connect to etcd at {endpoint}: {source}")]
    Connect {
        /// The member.
        endpoint: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// No TLS session with the member (its certificate not verified by the
    /// CA, a client certificate refused).
    #[non_exhaustive]
    #[error("cannot connect to etcd at {endpoint}: TLS {source}")]
    Tls {
        /// The member.
        endpoint: String,
        /// Why (rustls's error: `invalid peer certificate: UnknownIssuer`, …).
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// An `https://` member, and no CA to verify it with.
    #[error(
        "cannot connect to etcd at {endpoint}: no CA certificate to verify the member with (give a CA file)"
    )]
    #[non_exhaustive]
    NoCa {
        /// The member.
        endpoint: String,
    },
    /// The member did not answer in time.
    #[non_exhaustive]
    #[error("{endpoint}{path}: no answer within {timeout:?}")]
    Timeout {
        /// The member.
        endpoint: String,
        /// The request's path.
        path: String,
        /// The bound.
        timeout: Duration,
    },
    /// HTTP failed (the connection broke mid-answer, …).
    #[non_exhaustive]
    #[error("{endpoint}{path}: HTTP: {source}")]
    Http {
        /// The member.
        endpoint: String,
        /// The request's path.
        path: String,
        /// The HTTP layer's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The request could not be built.
    #[error("cannot build the request: {0}")]
    Request(String),
    /// etcd refused to authenticate the user (a wrong password, an unknown
    /// user, no member reachable, …).
    #[non_exhaustive]
    #[error("cannot authenticate to etcd as `{user}`: {source}")]
    Authenticate {
        /// The user.
        user: String,
        /// What etcd said.
        #[source]
        source: Box<EtcdError>,
    },
    /// etcd's auth is enabled and the request carried no user (etcd:
    /// `user name is empty`): the configuration needs credentials.
    #[error(
        "{endpoint}{path}: etcd requires authentication ({message}): give a user and its password"
    )]
    #[non_exhaustive]
    AuthRequired {
        /// The member.
        endpoint: String,
        /// The request's path.
        path: String,
        /// etcd's message.
        message: String,
    },
    /// The member answered with an error.
    #[non_exhaustive]
    #[error("{endpoint}{path}: HTTP {status}: {message} (gRPC code {code})")]
    Status {
        /// The member.
        endpoint: String,
        /// The request's path.
        path: String,
        /// The HTTP status.
        status: u16,
        /// The gRPC code the gateway gave (11: compacted, 14: unavailable).
        code: i32,
        /// etcd's message.
        message: String,
    },
    /// The answer is no JSON of the expected shape.
    #[non_exhaustive]
    #[error("{endpoint}{path}: cannot decode the answer: {source}")]
    Decode {
        /// The member.
        endpoint: String,
        /// The request's path.
        path: String,
        /// serde's error.
        #[source]
        source: serde_json::Error,
    },
    /// The answer (or a watch line) is larger than the bound.
    #[non_exhaustive]
    #[error("{endpoint}{path}: the answer is larger than {limit} bytes")]
    TooLarge {
        /// The member.
        endpoint: String,
        /// The request's path.
        path: String,
        /// The bound.
        limit: usize,
    },
    /// `/health` says the member cannot serve (no leader, …).
    #[non_exhaustive]
    #[error("{endpoint} is not healthy: {reason}")]
    Unhealthy {
        /// The member.
        endpoint: String,
        /// etcd's reason.
        reason: String,
    },
    /// Every endpoint failed.
    #[non_exhaustive]
    #[error("no etcd endpoint answered ({tried})")]
    Unreachable {
        /// The endpoints tried.
        tried: String,
        /// The last failure.
        #[source]
        last: Box<EtcdError>,
    },
    /// The watch stream ended.
    #[non_exhaustive]
    #[error("{endpoint}: the watch ended")]
    WatchEnded {
        /// The member.
        endpoint: String,
    },
    /// etcd canceled the watch for another reason than compaction.
    #[non_exhaustive]
    #[error("{endpoint}: etcd canceled the watch: {reason}")]
    Canceled {
        /// The member.
        endpoint: String,
        /// etcd's reason.
        reason: String,
    },
    /// The watch stream carried an error.
    #[non_exhaustive]
    #[error("{endpoint}: the watch failed: {message} (gRPC code {code})")]
    WatchError {
        /// The member.
        endpoint: String,
        /// The gRPC code.
        code: i32,
        /// etcd's message.
        message: String,
    },
    /// The watch has not told what the store shows under its range: the
    /// newest put, or as many keys (a deletion it did not tell).
    #[error(
        "the watch is behind: it told revision {seen} and {told_keys} keys; at revision {at} the newest put under its range is at {newest} and it holds {keys} keys (waited {waited:?})"
    )]
    #[non_exhaustive]
    Behind {
        /// The newest put's revision.
        newest: i64,
        /// How many keys the range holds.
        keys: i64,
        /// The store's revision they were read at.
        at: i64,
        /// What the watch told.
        seen: i64,
        /// How many keys the watch told.
        told_keys: i64,
        /// How long the probe waited.
        waited: Duration,
    },
    /// The watch did not say `created` in time.
    #[non_exhaustive]
    #[error("{endpoint}: the watch was not created within {timeout:?}")]
    NotCreated {
        /// The member.
        endpoint: String,
        /// The bound.
        timeout: Duration,
    },
    /// A list could not be completed: etcd compacted its revision while it was read.
    #[non_exhaustive]
    #[error("the list at revision {revision} was compacted away {times} times in a row")]
    ListCompacted {
        /// The revision of the last attempt.
        revision: i64,
        /// How many attempts.
        times: u32,
    },
}

impl EtcdError {
    /// What `lookout-transport` met on a request to `endpoint` at `path`.
    pub(crate) fn from_transport(endpoint: String, path: &str, e: TransportError) -> Self {
        match e {
            TransportError::Connect(source) => Self::Connect { endpoint, source },
            TransportError::Http(source) => Self::Http {
                endpoint,
                path: path.to_owned(),
                source: Box::new(source),
            },
            TransportError::TooLarge { limit } => Self::TooLarge {
                endpoint,
                path: path.to_owned(),
                limit,
            },
            source => Self::Tls {
                endpoint,
                source: Box::new(source),
            },
        }
    }

    /// Whether another member may succeed where this one failed.
    pub(crate) fn fails_over(&self) -> bool {
        match self {
            Self::Connect { .. }
            | Self::Tls { .. }
            | Self::NoCa { .. }
            | Self::Timeout { .. }
            | Self::Http { .. }
            | Self::Unhealthy { .. } => true,
            Self::Status { status, .. } => *status >= 500,
            _ => false,
        }
    }

    /// Whether etcd refused the request's auth token (expired, unknown):
    /// authenticating again may help.
    pub(crate) fn is_invalid_token(&self) -> bool {
        match self {
            Self::Status { status, code, .. } => *status == 401 || *code == 16,
            Self::WatchError { code, .. } => *code == 16,
            _ => false,
        }
    }

    /// Whether etcd said the revision asked for was compacted away.
    pub fn is_compacted(&self) -> bool {
        matches!(self, Self::Status { code: 11, .. })
    }
}
