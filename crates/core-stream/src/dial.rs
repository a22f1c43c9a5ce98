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
///
/// Implemented outside this crate (each provider, and a user's own): the
/// trait is not sealed. Its shape only grows compatibly: a method added in a
/// later version has a default (as [`probe`](Self::probe) does), so an
/// implementation written against this version keeps compiling.
pub trait Dial: Send + 'static {
    /// An opaque, ordered position in the engine's change feed.
    type Cursor: Clone + fmt::Debug + Send + 'static;

    /// Opens a session. `resume` is the cursor of the newest change or progress
    /// seen so far (`None` on the first dial, or when the engine gave none).
    /// Connect anew on every dial (a socket file may have been recreated).
    /// Where the engine is may be resolved once per watch instead (Docker's
    /// contexts: a redial must never land on another engine).
    ///
    /// The session starts with a snapshot, which tells the present; or,
    /// when the engine can resume its feed from `resume` with nothing
    /// missed (Kubernetes' watch from a `resourceVersion` it still serves),
    /// with [`Observation::Resumed`] instead, and no snapshot. Before
    /// it, and only there, a session may yield the changes made since
    /// `resume` that the session before did not see, when the engine proves
    /// them complete (its replay holds the change at `resume`, so nothing is
    /// missing between): the consumer then gets the exact transitions, in
    /// order, and the snapshot finds nothing left to tell. Without that
    /// proof, the snapshot's diff alone tells what happened.
    ///
    /// After the snapshot, a session must not yield a change from before it:
    /// subscribe to the feed before listing, from the end of what was
    /// replayed or from now, never with a replay of the past (a replayed
    /// `start` after a snapshot that says "stopped" would be a new, wrong
    /// transition, and even a right one would tell the past as news). The
    /// core swallows a change that changes nothing (one racing the list),
    /// not one that contradicts the snapshot.
    fn dial(&mut self, resume: Option<&Self::Cursor>) -> DialFuture<Self::Cursor>;

    /// A cheap liveness check (Docker's `/_ping`) the core runs when a session
    /// has been silent for [`WatchConfig::probe_after`](crate::WatchConfig::probe_after),
    /// on a connection of its own. `None` (the default) means the engine offers
    /// none: silence is then taken as an idle engine.
    fn probe(&mut self) -> Option<ProbeFuture> {
        None
    }
}
