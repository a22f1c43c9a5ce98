//! Podman's container events as a resilient, leak-free stream.
//!
//! [`watch`] connects to Podman's API service (`podman system service`)
//! through its Docker-compatible API and returns a [`Watch`]: a `Stream` of
//! [`Item`]s — instance events and connection statuses —
//! that never ends and never gives up. All of the machinery is
//! [`lookout_moby`]'s; this crate is Podman's [`MAPPING`] table and
//! host discovery.
//!
//! ```no_run
//! use lookout_podman::{PodmanConfig, watch};
//! use tokio_stream::StreamExt;
//!
//! # async fn run() -> Result<(), lookout_podman::ConfigError> {
//! let config = PodmanConfig::default().label("app", "web"); // host: as podman finds its service
//! let mut events = watch(config)?.events(); // only events; statuses go to `tracing`
//! while let Some(event) = events.next().await {
//!     println!("{} {} ({}) {:?}", event.id, event.kind, event.origin, event.labels);
//! }
//! // Dropping `events` closes the connection; nothing keeps running.
//! # Ok(()) }
//! ```
//!
//! A runnable example: `cargo run -p lookout-podman --example podman_watch`
//! ([`examples/podman_watch.rs`](https://github.com/lookout-rs/lookout/blob/main/crates/provider-podman/examples/podman_watch.rs)).
//!
//! # Guarantees
//!
//! Those of [`Watch`](lookout_core::Watch#guarantees). What is Podman's own:
//! - Podman keeps its events (journald or a file) across restarts of its
//!   service, so a reconnect nearly always replays what it missed exactly
//!   (live, in the log's order, before `Connected`); the list's difference
//!   (`resync`) tells it only when the log no longer holds the last event
//!   seen. See [`lookout_moby::History::NoStream`];
//! - the liveness probe is `GET /_ping`, on a connection of its own.
//!
//! # Mapping
//!
//! | Podman action (compat API) | event |
//! |---|---|
//! | `create` | [`Created`](lookout_core::EventKind::Created) |
//! | `start` | [`Started`](lookout_core::EventKind::Started) |
//! | `die` (Podman's `died`, renamed by the compat API; both are accepted) | [`Stopped`](lookout_core::EventKind::Stopped) |
//! | `remove` (and `destroy`, should a version send it) | [`Removed`](lookout_core::EventKind::Removed) |
//! | `init`, `cleanup`, `sync`, `stop`, `kill`, `pause`, `exec`, … | ignored (with readiness, `health_status`, `pause` and `unpause`: below) |
//! | `pod`, `system`, `image`, `volume` types | ignored (filtered out by the server) |
//!
//! With [`readiness`](lookout_moby::Config::readiness) on, the subscription
//! also asks for `health_status`, `pause` and `unpause`, and each event
//! carries the container's [`Readiness`](lookout_core::Readiness) (its
//! health, paused or not); ready ⇔ running ∧ not paused ∧ health ∈ {none,
//! healthy}:
//!
//! | Podman action (compat API) | readiness after it | event |
//! |---|---|---|
//! | `start` | `starting` with a healthcheck (Podman sets it at every start), `none` without | [`Started`](lookout_core::EventKind::Started); without a check also [`Ready`](lookout_core::EventKind::Ready) |
//! | `health_status` (one per check; before 4.7 its `HealthStatus` is the previous check's) | the container's status, read by inspecting it once the check the event announced is logged (its health log's newest entry ended after the event; read again after a pause until then, up to 10 reads) | [`Ready`](lookout_core::EventKind::Ready) / [`Unready`](lookout_core::EventKind::Unready), when it changes readiness: a repeated status is not told |
//! | `pause` | paused (the health stays as it was) | [`Unready`](lookout_core::EventKind::Unready) |
//! | `unpause` | not paused: ready again at once when its health is `healthy` or `none` | [`Ready`](lookout_core::EventKind::Ready) then |
//! | `died` / `die` | (the health stays as it was) | [`Stopped`](lookout_core::EventKind::Stopped), which ends readiness without an `Unready` |
//!
//! Podman runs healthchecks from systemd timers (or `podman healthcheck
//! run`); without systemd none runs by itself. Whether a container has a
//! check is read once per container (the snapshot's `health` lists, else
//! one inspection at its first start). A snapshot learns each container's
//! health from the list filtered by `health`; Podman 4's `health=none`
//! filter never matches, so a container in no list is inspected (once per
//! watch when it has no check). A readiness change missed while
//! disconnected is replayed from Podman's event log, as its other events
//! are.
//!
//! Podman before 4.5 (Debian 12 ships 4.3) reads its event log file again
//! after it rotates it (`events_logfile_max_size`, 1 MB by default; podman
//! #17665): the newer half of the file comes again on every open `/events`
//! stream. lookout-moby's feed drops an event it has already decoded (at
//! least its last 4096) and one from before its subscription (by its cursor, or by
//! the `Date` Podman answered the subscription with, less 2 s), so each
//! transition is still told once, and nothing from before the watch as
//! news.
//!
//! The id is the container name; labels come from the container list, or for
//! a container created while watching (or first seen in a replayed history)
//! from its event's attributes minus `name`, `image`, `podId`,
//! `containerExitCode`, `exitCode` and `health_status`.
//!
//! # The API and its dependencies
//!
//! [`PodmanConfig`] is an alias of [`lookout_moby::Config`] and [`PodmanDial`] one of
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
//! None: TLS (`https://` hosts, rustls with ring) is always built in
//! (`lookout-moby`'s `tls`).

#![deny(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

use lookout_moby as moby;

pub use lookout_core::{self, EventKind, InstanceEvent, Item, Labels, Status, Watch, WatchConfig};
pub use lookout_moby::{self, ApiVersion, CompatError, ConfigError, Cursor};

/// Dials Podman; the [`Dial`](lookout_core::Dial) behind [`watch`].
pub type PodmanDial = moby::CompatDial;

/// Podman's vocabulary and discovery.
pub static MAPPING: moby::Mapping = moby::Mapping::new(
    "podman",
    moby::Discovery::new("CONTAINER_HOST", "podman")
        .sockets(&[
            ("XDG_RUNTIME_DIR", "podman/podman.sock"),
            ("", "/run/podman/podman.sock"),
        ])
        .podman_connections(true),
    moby::History::NoStream,
)
.actions(&[
    ("create", EventKind::Created),
    ("start", EventKind::Started),
    ("die", EventKind::Stopped),
    ("died", EventKind::Stopped),
    ("remove", EventKind::Removed),
    ("destroy", EventKind::Removed),
    // Podman's `kill` names no signal: a stop request. Podman 4.3 logs
    // nothing for `podman stop` (no `stop`, no `kill`: checked beside
    // `podman events`), see `stops_logged` below; a later one that logs a
    // `stop` first has it told.
    ("kill", EventKind::Stopping),
    ("stop", EventKind::Stopping),
])
.ignored(&[
    "attach",
    "checkpoint",
    "cleanup",
    "commit",
    "exec",
    "exec_died",
    "exited",
    "export",
    "health_status",
    "import",
    "init",
    "mount",
    "pause",
    "prune",
    "rename",
    "restart",
    "restore",
    "sync",
    "unmount",
    "unpause",
    "update",
])
.non_label_attributes(&[
    "name",
    "image",
    "podId",
    "containerExitCode",
    "exitCode",
    "health_status",
])
// Podman's answers: each health event inspected, a pause keeps the status,
// `health=none` matches nothing.
.health(moby::HealthTable::new())
.stops_logged(false);

/// What to watch: [`moby::Config`]. Without a host, as podman finds its
/// service ([`moby::Endpoint`]): a pinned connection
/// ([`context`](moby::Config::context), the CLI's `--connection`), else
/// `CONTAINER_CONNECTION` (a named connection; unknown: an error), else
/// `CONTAINER_HOST` (`ssh://` too, with `CONTAINER_SSHKEY`), else the
/// default connection (`podman-connections.json`, else containers.conf's
/// `active_service`), else the user's socket: as root
/// `/run/podman/podman.sock`; else `$XDG_RUNTIME_DIR/podman/podman.sock`, or
/// without `XDG_RUNTIME_DIR` `/run/user/UID/podman/podman.sock` — never the
/// rootful socket for another user. Resolved once, when the watch is made.
pub type PodmanConfig = moby::Config;

/// Watches Podman's containers.
///
/// Fails only when the host (given, or `CONTAINER_HOST` now) cannot be
/// parsed; an engine that is down is no error: the stream reports it and
/// retries.
pub fn watch(config: PodmanConfig) -> Result<Watch<PodmanDial>, ConfigError> {
    moby::watch(&MAPPING, config)
}
