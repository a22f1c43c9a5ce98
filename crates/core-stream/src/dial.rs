//! The seam a provider plugs into: a dial function and an optional probe.

use std::fmt;
use std::future::Future;
use std::pin::Pin;

use tokio_stream::Stream;

use crate::model::Observation;

/// Any error a provider reports; the core wraps it with context.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// A connected session: snapshots and live changes, until the connection ends.
///
/// An `Err` item or the end of the stream ends the session; the core then
/// reconnects under its policy. A session must not yield `Err` for one event it
/// cannot decode: it logs it and yields [`Observation::Progress`] instead.
pub type Session<C> = Pin<Box<dyn Stream<Item = Result<Observation<C>, BoxError>> + Send>>;

/// The future of one dial attempt.
pub type DialFuture<C> = Pin<Box<dyn Future<Output = Result<Session<C>, BoxError>> + Send>>;

/// The future of one liveness probe.
pub type ProbeFuture = Pin<Box<dyn Future<Output = Result<(), BoxError>> + Send>>;

/// How to reach one engine: what a provider supplies to [`Watch`](crate::Watch).
///
/// Everything a dial or a probe opens must be owned by the returned
/// future/stream, so that dropping it closes it: the core never spawns, and
/// dropping the watch stream drops the session, the pending dial and the probe.
pub trait Dial: Send + 'static {
    /// An opaque, ordered position in the engine's change feed.
    type Cursor: Clone + fmt::Debug + Send + 'static;

    /// Opens a session. `resume` is the cursor of the newest change or progress
    /// seen so far (`None` on the first dial, or when the engine gave none).
    /// The session must start with a snapshot. Resolve the engine's address
    /// anew on every dial (a socket file may have been recreated).
    ///
    /// A session must not yield again a change already seen up to `resume`
    /// (an inclusive `since` replays the last one; for a feed with ordered
    /// times, that is every change at or before the cursor): it was applied
    /// before the new snapshot, which may have moved on since, so a replayed
    /// `start` after a snapshot that says "stopped" would be a new (wrong)
    /// transition. The core swallows a replay that changes nothing, not one
    /// that contradicts the snapshot.
    fn dial(&mut self, resume: Option<&Self::Cursor>) -> DialFuture<Self::Cursor>;

    /// A cheap liveness check (Docker's `/_ping`) the core runs when a session
    /// has been silent for [`WatchConfig::probe_after`](crate::WatchConfig::probe_after),
    /// on a connection of its own. `None` (the default) means the engine offers
    /// none: silence is then taken as an idle engine.
    fn probe(&mut self) -> Option<ProbeFuture> {
        None
    }
}
