//! Docker's container events as a resilient, leak-free stream.
//!
//! [`watch`] connects to dockerd (or anything speaking its API) and returns a
//! [`Watch`]: a `Stream` of [`Item`](lookout_core::Item)s — instance events and
//! connection statuses — that never ends and never gives up.
//!
//! ```no_run
//! use lookout_docker::{DockerConfig, watch};
//! use tokio_stream::StreamExt;
//!
//! # async fn run() -> Result<(), lookout_docker::ConfigError> {
//! let config = DockerConfig::default().label("app", "web"); // host: DOCKER_HOST or the default socket
//! let mut events = watch(config)?.events(); // only events; statuses go to `tracing`
//! while let Some(event) = events.next().await {
//!     println!("{} {} ({}) {:?}", event.id, event.kind, event.origin, event.labels);
//! }
//! // Dropping `events` closes the connection; nothing keeps running.
//! # Ok(()) }
//! ```
//!
//! # Guarantees
//!
//! Those of [`Watch`], for Docker:
//! - an engine that is down, restarting or hung is no error: the stream yields
//!   [`Status::Disconnected`](lookout_core::Status::Disconnected) and redials
//!   under the one reconnect policy, forever;
//! - after a reconnect, what happened while disconnected is told once,
//!   before anything that happened after: when dockerd still buffers the
//!   last event seen (it keeps its last 256 events, none across a restart),
//!   as the exact transitions, live, with their times, before the
//!   reconnect's `Connected`; else as the container list's difference from
//!   the known state ([`Origin::Resync`](lookout_core::Origin::Resync)).
//!   Never both, and no `live` event after the list is older than the
//!   reconnect (see [`compat::History`]);
//! - a silent connection is probed (`GET /_ping` on a connection of its own)
//!   after [`WatchConfig::probe_after`](lookout_core::WatchConfig::probe_after) and replaced when the probe fails or
//!   is late;
//! - an event line the client cannot decode is skipped (one `warn`), never
//!   ends the session, and is never replayed in a loop;
//! - dropping the stream closes every connection at once: nothing is spawned.
//!
//! # Mapping
//!
//! | Docker action | event |
//! |---|---|
//! | `create` | [`Created`](lookout_core::EventKind::Created) |
//! | `start` | [`Started`](lookout_core::EventKind::Started) |
//! | `die` | [`Stopped`](lookout_core::EventKind::Stopped) |
//! | `destroy` | [`Removed`](lookout_core::EventKind::Removed) |
//! | anything else (`kill`, `stop`, `restart`, `pause`, `exec_*`, `health_status`, …) | ignored |
//!
//! The id is the container name without the leading `/`; a container
//! recreated under the same name (a new container id) is `Removed` then
//! `Created`. Labels come from the container list, or for a container created
//! while watching (or first seen in a replayed history) from its event's
//! attributes minus `name`, `image`, `exitCode`, `signal` and
//! `execDuration` (Docker mixes the labels into the attributes). A container renamed
//! while watched keeps its old id until the next resync.
//!
//! The shared Docker-API machinery is in [`compat`]; Podman and Swarm reuse it.

pub mod compat;

use lookout_core::{EventKind, Watch};

pub use compat::{CompatError, ConfigError, Cursor};

/// Dials dockerd; the [`Dial`](lookout_core::Dial) behind [`watch`].
pub type DockerDial = compat::CompatDial;

/// Docker's vocabulary and discovery.
pub static MAPPING: compat::Mapping = compat::Mapping {
    provider: "docker",
    actions: &[
        ("create", EventKind::Created),
        ("start", EventKind::Started),
        ("die", EventKind::Stopped),
        ("destroy", EventKind::Removed),
    ],
    ignored: &[
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
        "kill",
        "oom",
        "pause",
        "rename",
        "resize",
        "restart",
        "stop",
        "top",
        "unpause",
        "update",
        "prune",
    ],
    non_label_attributes: &["name", "image", "exitCode", "signal", "execDuration"],
    history: compat::History::Until,
    discovery: compat::Discovery {
        host_var: "DOCKER_HOST",
        sockets: &[("", "/var/run/docker.sock")],
    },
};

/// What to watch: [`compat::Config`]. Without a host: `DOCKER_HOST`, else
/// `unix:///var/run/docker.sock`, resolved anew on every dial.
pub type DockerConfig = compat::Config;

/// Watches dockerd's containers.
///
/// Fails only when the host (given, or `DOCKER_HOST` now) cannot be parsed;
/// an engine that is down is no error: the stream reports it and retries.
pub fn watch(config: DockerConfig) -> Result<Watch<DockerDial>, ConfigError> {
    compat::watch(&MAPPING, config)
}
