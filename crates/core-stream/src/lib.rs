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
//! Per instance the events follow `Created → (Started → [Stopping] → Stopped)* → Removed`,
//! and two consecutive events of one instance always differ (but for a
//! [`Failing`](EventKind::Failing) with new words). With readiness
//! watched (each provider's `readiness` setting), a running instance is also
//! [`Ready`](EventKind::Ready) or not (`Unready`): see [`EventKind`] and
//! [`Readiness`] for the exact rules, per provider.
//!
//! Each event says why where the engine does ([`InstanceEvent::reason`]):
//! every [`Stopped`](EventKind::Stopped) its [`Outcome`] (completed, failed,
//! or stopped on request) and the exit code, signal, OOM kill and restart
//! the engine reports; [`Stopping`](EventKind::Stopping) tells a requested
//! stop before the instance is gone, and [`Failing`](EventKind::Failing) a
//! running instance the engine reports failing, in the engine's words.
//!
//! [`Watch::share`] shares one watch (one engine connection) among any number
//! of [`Subscription`]s and [`Store`]s, still without a task: see [`Hub`].
//! [`Merge`] makes one stream of many watches (several engines, of any
//! providers), each item tagged by its source, fairly and in O(1) per item.
//!
//! # Stability
//!
//! This crate follows semantic versioning (0.x: a breaking change bumps the
//! minor version). To let it grow without breaking:
//!
//! - the configurations ([`WatchConfig`], [`HubConfig`], [`ReconnectPolicy`])
//!   have private fields: start from `default()` and use their builder
//!   methods, read them back with their getters;
//! - the data a provider hands in ([`Listed`], [`Change`],
//!   [`Observation::polled`]) and the data the stream hands out
//!   ([`InstanceEvent`], [`Instance`], [`Sourced`], [`Status`]) are
//!   `#[non_exhaustive]`: read their public fields; build a `Listed`, a
//!   `Change` or an `InstanceEvent` with its constructor (`new`) and
//!   setters (a field added later gets a default);
//! - the enums where a new case may come ([`EventKind`], [`Origin`],
//!   [`Status`], [`Observation`], [`Readiness`], [`Health`], [`Error`],
//!   [`SourceState`], [`Start`]) are `#[non_exhaustive]`: match them with a
//!   wildcard arm. [`Item`] is exhaustive by nature (an event or a status);
//! - [`Dial`] is meant to be implemented outside this crate (it is not
//!   sealed): a method added to it later always has a default, so an
//!   existing provider keeps compiling.
//!
//! # Public dependencies
//!
//! These crates' types or traits appear in this crate's API, so their major
//! version is part of it:
//!
//! - **`tokio-stream`** (and the `futures-core` `Stream` trait it
//!   re-exports): [`Watch`], [`Subscription`], [`Merge`] and [`Events`] are
//!   `Stream`s, and a [`Session`] is one. The streams use **`tokio`**'s timer,
//!   so they must be polled inside a tokio runtime (with the `time` driver).
//! - **`metrics`** (the facade): a [`Hub`] records its series through it
//!   (`lookout_events_total{kind,origin}`, `lookout_connected`,
//!   `lookout_reconnects_total`, `lookout_instances`,
//!   `lookout_instances_ready`, `lookout_subscribers`,
//!   `lookout_subscriber_resyncs_total`, each with the labels of
//!   [`HubConfig::metric_label`]); a recorder sees them only when it is
//!   installed with the same major version of `metrics`. The names and
//!   labels are part of the API.
//! - **`tracing`**: [`Events`] and the watch log through it.
//! - **`serde`** (feature `serde` only): [`Labels`] implements `Serialize`
//!   and `Deserialize`.
//!
//! Everything else (`jiff`, `hashbrown`, `foldhash`, `arcstr`, `triomphe`,
//! `memchr`, `pin-project-lite`, `thiserror`) is an implementation detail:
//! none of its types is in the API.
//!
//! # Features
//!
//! - **`serde`** (off by default): `serde::Serialize` and
//!   `serde::Deserialize` for [`Labels`] (as a map of strings).
//!
//! # Lines
//!
//! [`LineSplitter`] splits a line-delimited body (Docker's `/events`, a
//! Kubernetes or etcd watch) into lines as its chunks arrive, each at most
//! a bound: a longer one is reported once ([`SplitLine::TooLong`]) and
//! skipped to its `\n`, never buffered. Every provider's body goes through
//! it; what a too-long line costs (the event, the session) is the
//! provider's.
//!
//! # RFC 3339
//!
//! [`rfc3339`] reads and writes RFC 3339 times for every lookout crate (the
//! engines' timestamps, the CLI's lines). It is part of this crate's API, in
//! `std` types only (`SystemTime`, nanoseconds as `i64`, `String`).
//!
//! # Example
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

#![deny(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod backoff;
mod config;
mod dial;
mod error;
mod events;
mod hub;
mod item;
mod labels;
mod line_splitter;
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
pub use line_splitter::{LineSplitter, SplitLine};
pub use merge::{DuplicateSource, Merge, SourceId, SourceState, Sourced};
pub use model::{
    Change, EventKind, Health, InstanceEvent, InstanceId, Listed, MAX_MESSAGE, Observation, Origin,
    Outcome, Readiness, Reason, ResourceStatus, Signal,
};
pub use watch::Watch;
