//! The contract behind lookout, and the one reconnect policy.
//!
//! A provider (Docker, Podman, Swarm, Kubernetes) implements [`Dial`]: open a
//! session that yields a snapshot of the engine's instances, then its live
//! changes ([`Observation`]s), and optionally a cheap liveness probe. [`Watch`]
//! turns that into a stream of [`Item`]s that
//!
//! - **never ends and never gives up**: failures yield [`Status::Disconnected`]
//!   and are retried under one [`ReconnectPolicy`] (exponential 500 ms ×2 up to
//!   30 s, full jitter, reset after 60 s of health, no attempt limit);
//! - **loses no transition**: after every (re)connect the snapshot is diffed
//!   against the last known state, and each missed transition is reported once
//!   with [`Origin::Resync`]; so is a transition the engine dropped while the
//!   consumer did not poll (a relist follows a lag over
//!   [`WatchConfig::resync_after_lag`], and one every
//!   [`WatchConfig::resync_every`]);
//! - **repeats no transition**: a live change passes only when it changes the
//!   known state (a relist racing the feed);
//! - **never tells the past as news**: what happened while the feed could
//!   not be seen comes either as the engine's exact replay (live, with its
//!   times, before the snapshot; when the engine proves it complete) or as
//!   the snapshot's diff ([`Origin::Resync`]), never both, and before every
//!   event that happened after the snapshot;
//! - **notices a hung connection**: silence is probed, and a failed or late
//!   probe replaces the session;
//! - **leaks nothing**: no task is spawned and no channel is used, so dropping
//!   the stream — in any state — closes everything it opened, synchronously.
//!
//! Per instance the events follow `Created → (Started ⇄ Stopped)* → Removed`,
//! and two consecutive events of one instance always differ. With readiness
//! watched (each provider's `readiness` setting), a running instance is also
//! [`Ready`](EventKind::Ready) or not (`Unready`): see [`EventKind`] and
//! [`Readiness`] for the exact rules, per provider.
//!
//! [`Watch::share`] shares one watch (one engine connection) among any number
//! of [`Subscription`]s and [`Store`]s, still without a task: see [`Hub`].
//! [`Merge`] makes one stream of many watches (several engines, of any
//! providers), each item tagged by its source, fairly and in O(1) per item.
//!
//! ```
//! use lookout_core::{Dial, DialFuture, Observation, Watch, WatchConfig};
//! use tokio_stream::StreamExt;
//!
//! // A provider's dial: an engine with nothing in it and a quiet feed.
//! struct Empty;
//! impl Dial for Empty {
//!     type Cursor = ();
//!     fn dial(&mut self, _resume: Option<&()>) -> DialFuture<()> {
//!         Box::pin(async {
//!             let snapshot = [Ok(Observation::ResyncBegin), Ok(Observation::ResyncDone)];
//!             let session = tokio_stream::iter(snapshot).chain(tokio_stream::pending());
//!             Ok(Box::pin(session) as lookout_core::Session<()>)
//!         })
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let watch = Watch::new(Empty, WatchConfig::default());
//! // Dropping `watch` (or `events`) is how to stop: it closes the connection.
//! let mut events = watch.events();
//! let next = tokio::time::timeout(std::time::Duration::from_millis(10), events.next()).await;
//! assert!(next.is_err(), "an empty, quiet engine yields no event");
//! # }
//! ```

mod backoff;
mod config;
mod dial;
mod error;
mod events;
mod hub;
mod item;
mod labels;
mod liveness;
mod merge;
mod model;
pub mod rfc3339;
mod tracker;
mod watch;

pub use backoff::ReconnectPolicy;
pub use config::{LAG_RESYNC_SPACING, WatchConfig};
pub use dial::{BoxError, Dial, DialFuture, ProbeFuture, Session};
pub use error::Error;
pub use events::Events;
pub use hub::{Hub, HubConfig, Instance, Run, Start, Store, Subscription, Synced, Until};
pub use item::{Item, Status};
pub use labels::{Iter as LabelsIter, Labels};
pub use merge::{DuplicateSource, Merge, SourceId, SourceState, Sourced};
pub use model::{
    Change, EventKind, Health, InstanceEvent, InstanceId, Listed, Observation, Origin, Readiness,
};
pub use watch::Watch;
