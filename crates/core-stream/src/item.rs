//! What a [`Watch`](crate::Watch) and a [`Subscription`](crate::Subscription)
//! yield: an instance event or a connection status. Its own file, so that
//! the stream (`watch.rs`), the hub (`hub/`), the merge and the events
//! filter all import it and none of them imports another for it.

use std::sync::Arc;
use std::time::Duration;

use crate::error::Error;
use crate::model::InstanceEvent;

/// What the stream yields: an instance event or a connection status.
///
/// Exhaustive: a stream tells events and statuses, nothing else; a new kind
/// of status comes as a new [`Status`] variant.
#[derive(Clone, Debug)]
pub enum Item {
    /// A transition of one instance.
    Event(InstanceEvent),
    /// The connection changed.
    Status(Status),
}

/// The connection status, reported between events.
///
/// `Connected` and `Lagged` are exhaustive (a count is all they tell);
/// `Disconnected` may grow a field ([`Status::disconnected`] builds one).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum Status {
    /// A snapshot completed (after each successful (re)connect, and after each
    /// periodic or engine-initiated relist); the events it implied precede this.
    /// Also after a reconnect that resumed the feed with nothing missed
    /// ([`Observation::Resumed`](crate::Observation::Resumed)).
    Connected {
        /// How many instances the stream knows now.
        instances: usize,
    },
    /// The session failed or could not start; the next dial follows in `retry_in`.
    #[non_exhaustive]
    Disconnected {
        /// Why.
        error: Arc<Error>,
        /// Consecutive failures so far, 1-based (reset by a healthy session).
        attempt: u32,
        /// The delay before the next dial, per the [`ReconnectPolicy`](crate::ReconnectPolicy).
        retry_in: Duration,
    },
    /// Only from a [`Subscription`](crate::Subscription): it fell more than
    /// its hub's [`queue`](crate::HubConfig::queue) behind, and `missed`
    /// items were dropped for it. The difference between the state it last
    /// saw and the present follows, as [`Origin::Resync`](crate::Origin::Resync) events, then the
    /// hub's status. ([`Watch`](crate::Watch) never yields it.)
    Lagged {
        /// How many items it did not get.
        missed: u64,
    },
}

impl Status {
    /// [`Status::Disconnected`]: the session failed with `error`, after
    /// `attempt` consecutive failures, and the next dial follows in
    /// `retry_in`.
    pub fn disconnected(error: Arc<Error>, attempt: u32, retry_in: Duration) -> Self {
        Self::Disconnected {
            error,
            attempt,
            retry_in,
        }
    }
}
