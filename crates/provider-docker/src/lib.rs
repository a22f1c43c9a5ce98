//! Docker's container events as a resilient, leak-free stream.
//!
//! [`watch`] connects to dockerd (or anything speaking its API) and returns a
//! [`Watch`]: a `Stream` of [`Item`]s — instance events and
//! connection statuses — that never ends and never gives up.
//!
//! ```no_run
//! use lookout_docker::{DockerConfig, watch};
//! use tokio_stream::StreamExt;
//!
//! # async fn run() -> Result<(), lookout_docker::ConfigError> {
//! let config = DockerConfig::default().label("app", "web"); // host: as the docker CLI finds it (contexts too)
//! let mut events = watch(config)?.events(); // only events; statuses go to `tracing`
//! while let Some(event) = events.next().await {
//!     println!("{} {} ({}) {:?}", event.id, event.kind, event.origin, event.labels);
//! }
//! // Dropping `events` closes the connection; nothing keeps running.
//! # Ok(()) }
//! ```
//!
//! A runnable example: `cargo run -p lookout-docker --example docker_watch`
//! ([`examples/docker_watch.rs`](https://github.com/lookout-rs/lookout/blob/main/crates/provider-docker/examples/docker_watch.rs)).
//!
//! # Guarantees
//!
//! Those of [`Watch`](lookout_core::Watch#guarantees). What is Docker's own:
//! - after a reconnect, what happened meanwhile comes as dockerd's exact
//!   replay (live, before `Connected`) when its in-memory buffer of its last
//!   256 events still holds the last event seen; after a dockerd restart
//!   (no buffer) or a longer gap, as the container list's difference
//!   (`resync`). See [`lookout_moby::History::Until`];
//! - the liveness probe is `GET /_ping`, on a connection of its own.
//!
//! # Mapping
//!
//! | Docker action | event |
//! |---|---|
//! | `create` | [`Created`](lookout_core::EventKind::Created) |
//! | `start` | [`Started`](lookout_core::EventKind::Started) |
//! | `die` | [`Stopped`](lookout_core::EventKind::Stopped) |
//! | `destroy` | [`Removed`](lookout_core::EventKind::Removed) |
//! | anything else (`kill`, `stop`, `restart`, `pause`, `exec_*`, `health_status`, …) | ignored (with readiness, `health_status`, `pause` and `unpause`: below) |
//!
//! With [`readiness`](lookout_moby::Config::readiness) on, the subscription
//! also asks for `health_status`, `pause` and `unpause`, and each event
//! carries the container's [`Readiness`](lookout_core::Readiness) (its
//! health, paused or not); ready ⇔ running ∧ not paused ∧ health ∈ {none,
//! healthy}:
//!
//! | Docker action | readiness after it | event |
//! |---|---|---|
//! | `start` | `starting` with a healthcheck (dockerd sets it, silently), `none` without | [`Started`](lookout_core::EventKind::Started); without a check also [`Ready`](lookout_core::EventKind::Ready) |
//! | `health_status: healthy` / `unhealthy` (emitted when the status changes) | that status | [`Ready`](lookout_core::EventKind::Ready) / [`Unready`](lookout_core::EventKind::Unready), when it changes readiness |
//! | `pause` | paused; `unhealthy` with a check (dockerd sets it, silently) | [`Unready`](lookout_core::EventKind::Unready) |
//! | `unpause` | not paused: without a check ready again at once; with one still `unhealthy` until its next good probe says `healthy` | [`Ready`](lookout_core::EventKind::Ready) without a check |
//! | `die` | (dockerd sets `unhealthy`) | [`Stopped`](lookout_core::EventKind::Stopped), which ends readiness without an `Unready` |
//!
//! Whether a container has a healthcheck is read once per container (a
//! running one's from the snapshot's list, else one inspection at its
//! first start). A snapshot reads each running container's health in the
//! one list it makes: dockerd writes it in `Status` (`Up 3 minutes
//! (healthy)`, `(unhealthy)`, `(health: starting)`, nothing after `Up …`
//! without a check); only a paused one (`(Paused)` hides it) is inspected,
//! and an unhealthy one for its check's output (`Failing`). A readiness
//! change missed while disconnected is told by the replay when dockerd's
//! buffer still holds it, else by the snapshot (`resync`).
//!
//! The id is the container name without the leading `/`; a container
//! recreated under the same name (a new container id) is `Removed` then
//! `Created`. Labels come from the container list, or for a container created
//! while watching (or first seen in a replayed history) from its event's
//! attributes minus `name`, `image`, `exitCode`, `signal` and
//! `execDuration` (Docker mixes the labels into the attributes). A container renamed
//! while watched keeps its old id until the next resync.
//!
//! The Docker Engine API machinery is [`lookout_moby`]'s (Podman and Swarm
//! build on it too); this crate is Docker's [`MAPPING`] table.
//!
//! # The API and its dependencies
//!
//! [`DockerConfig`] is an alias of [`lookout_moby::Config`] and [`DockerDial`] one of
//! [`lookout_moby::CompatDial`]: this crate's configuration *is*
//! `lookout-moby`'s (private fields, builder methods), so an option added
//! there is one here. [`ConfigError`], [`CompatError`], [`Cursor`] and
//! [`ApiVersion`] are `lookout-moby`'s, re-exported.
//!
//! Public dependencies (their types are in this crate's API, so their
//! major version is part of it), both re-exported whole so that a crate
//! depending on this one alone can name every type:
//!
//! - **`lookout-core`** 0.1 ([`lookout_core`]): the [`Watch`] and what it
//!   yields ([`Item`], [`InstanceEvent`], [`EventKind`], [`Status`],
//!   [`Labels`]) and its settings ([`WatchConfig`]), re-exported here too.
//! - **`lookout-moby`** 0.1 ([`lookout_moby`]): the configuration, the
//!   dial, the errors and where the engine is
//!   ([`Endpoint`](lookout_moby::Endpoint), for
//!   [`lookout_moby::watch_at`]).
//!
//! # Features
//!
//! - **`tls`** (default): `https://` hosts and `tcp://` hosts with
//!   `DOCKER_TLS_VERIFY` or `DOCKER_TLS` (rustls with ring; turns on
//!   `lookout-moby`'s `tls`). Without it such a host fails each dial with
//!   [`CompatError::Tls`]. It adds no item to the API.

#![deny(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

use lookout_moby as moby;

pub use lookout_core::{self, EventKind, InstanceEvent, Item, Labels, Status, Watch, WatchConfig};
pub use lookout_moby::{self, ApiVersion, CompatError, ConfigError, Cursor};

/// Dials dockerd; the [`Dial`](lookout_core::Dial) behind [`watch`].
pub type DockerDial = moby::CompatDial;

/// Docker's vocabulary and discovery.
pub static MAPPING: moby::Mapping =
    moby::Mapping::new("docker", moby::Discovery::DOCKER, moby::History::Until)
        .actions(&[
            ("create", EventKind::Created),
            ("start", EventKind::Started),
            ("die", EventKind::Stopped),
            ("destroy", EventKind::Removed),
            // `docker stop` and `docker kill`, before the `die`: a signal
            // that stops (`docker kill -s HUP` does not) is a stop request.
            ("kill", EventKind::Stopping),
        ])
        .ignored(&[
            "attach",
            "commit",
            "copy",
            "detach",
            "exec_create",
            "exec_detach",
            "exec_die",
            "exec_start",
            "export",
            "health_status",
            "pause",
            "rename",
            "resize",
            "restart",
            "stop",
            "top",
            "unpause",
            "update",
            "prune",
        ])
        .non_label_attributes(&["name", "image", "exitCode", "signal", "execDuration"])
        .health(moby::HealthTable::DOCKER);

/// What to watch: [`moby::Config`]. Without a host: as the docker CLI finds
/// it ([`moby::Endpoint`]: [`context`](moby::Config::context) pinned, else
/// `DOCKER_HOST`, `DOCKER_CONTEXT`, the `currentContext` of
/// `$DOCKER_CONFIG/config.json`, else `unix:///var/run/docker.sock`),
/// resolved once, when the watch is made: a redial never lands on another
/// engine.
pub type DockerConfig = moby::Config;

/// Watches dockerd's containers.
///
/// Fails only when the endpoint (given, or as the docker CLI finds it now:
/// an unknown context, a host that cannot be parsed) cannot be used; an
/// engine that is down is no error: the stream reports it and retries.
pub fn watch(config: DockerConfig) -> Result<Watch<DockerDial>, ConfigError> {
    moby::watch(&MAPPING, config)
}
