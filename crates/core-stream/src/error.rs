use std::time::Duration;

use crate::dial::BoxError;

/// Why a session ended or could not start. Reported in
/// [`Status::Disconnected`](crate::Status::Disconnected); never terminal.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Dialing failed (engine down, socket missing, refused, TLS, auth…).
    #[error("cannot connect to the engine: {0}")]
    Dial(#[source] BoxError),
    /// Dialing did not finish in time.
    #[error("connecting to the engine timed out after {0:?}")]
    DialTimeout(Duration),
    /// The session failed mid-way (connection reset, undecodable stream framing…).
    #[error("the engine's change feed failed: {0}")]
    Session(#[source] BoxError),
    /// The engine closed the change feed.
    #[error("the engine closed the change feed")]
    SessionEnded,
    /// The session was silent and the liveness probe failed.
    #[error("the engine was silent for {silent:?} and its liveness probe failed: {source}")]
    #[non_exhaustive]
    ProbeFailed {
        /// How long the session had been silent when the probe started.
        silent: Duration,
        /// The probe's error.
        #[source]
        source: BoxError,
    },
    /// The session was silent and the liveness probe did not answer in time.
    #[error(
        "the engine was silent for {silent:?} and its liveness probe did not answer within {timeout:?}"
    )]
    #[non_exhaustive]
    ProbeTimeout {
        /// How long the session had been silent when the probe started.
        silent: Duration,
        /// The probe timeout.
        timeout: Duration,
    },
}
