//! Podman's container events as a resilient, leak-free stream.
//!
//! [`watch`] connects to Podman's API service (`podman system service`)
//! through its Docker-compatible API and returns a [`Watch`]: a `Stream` of
//! [`Item`](lookout_core::Item)s — instance events and connection statuses —
//! that never ends and never gives up. All of the machinery is
//! [`lookout_docker::compat`]'s; this crate is Podman's [`MAPPING`] table and
//! host discovery.
//!
//! ```no_run
//! use lookout_podman::{PodmanConfig, watch};
//! use tokio_stream::StreamExt;
//!
//! # async fn run() -> Result<(), lookout_podman::ConfigError> {
//! let config = PodmanConfig::default().label("app", "web"); // host: CONTAINER_HOST or the default sockets
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
//! Those of [`Watch`] and of `lookout_docker`: retried forever, missed
//! transitions reported once after each reconnect, a silent connection probed
//! with `/_ping`, an undecodable event skipped, nothing left behind on drop.
//! Podman keeps its events (journald or a file) across restarts of its
//! service, so a redial can nearly always replay what it missed exactly: it
//! reads the log `since` the last event seen (`stream=false`: the response
//! ends at the log's end; Podman's `since` is a float, so the redial asks
//! from 1 µs early), and when the last event seen is in it, reports what
//! follows as live transitions, in the log's order, before the reconnect's
//! `Connected`; else the container list's difference (`resync`) tells the
//! net effect. Never both (see [`compat::History`]).
//!
//! # Mapping
//!
//! | Podman action (compat API) | event |
//! |---|---|
//! | `create` | [`Created`](lookout_core::EventKind::Created) |
//! | `start` | [`Started`](lookout_core::EventKind::Started) |
//! | `die` (Podman's `died`, renamed by the compat API; both are accepted) | [`Stopped`](lookout_core::EventKind::Stopped) |
//! | `remove` (and `destroy`, should a version send it) | [`Removed`](lookout_core::EventKind::Removed) |
//! | `init`, `cleanup`, `sync`, `stop`, `kill`, `pause`, `exec`, … | ignored |
//! | `pod`, `system`, `image`, `volume` types | ignored (filtered out by the server) |
//!
//! The id is the container name; labels come from the container list, or for
//! a container created while watching (or first seen in a replayed history)
//! from its event's attributes minus `name`, `image`, `podId`,
//! `containerExitCode`, `exitCode` and `health_status`.

#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;

use lookout_core::{EventKind, Watch};
use lookout_docker::compat;

pub use lookout_docker::{CompatError, ConfigError, Cursor};

/// Dials Podman; the [`Dial`](lookout_core::Dial) behind [`watch`].
pub type PodmanDial = compat::CompatDial;

/// Podman's vocabulary and discovery.
pub static MAPPING: compat::Mapping = compat::Mapping {
    provider: "podman",
    actions: &[
        ("create", EventKind::Created),
        ("start", EventKind::Started),
        ("die", EventKind::Stopped),
        ("died", EventKind::Stopped),
        ("remove", EventKind::Removed),
        ("destroy", EventKind::Removed),
    ],
    ignored: &[
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
        "kill",
        "mount",
        "pause",
        "prune",
        "rename",
        "restart",
        "restore",
        "stop",
        "sync",
        "unmount",
        "unpause",
        "update",
    ],
    non_label_attributes: &[
        "name",
        "image",
        "podId",
        "containerExitCode",
        "exitCode",
        "health_status",
    ],
    history: compat::History::NoStream,
    discovery: compat::Discovery {
        host_var: "CONTAINER_HOST",
        sockets: &[
            ("XDG_RUNTIME_DIR", "podman/podman.sock"),
            ("", "/run/podman/podman.sock"),
        ],
    },
};

/// What to watch: [`compat::Config`]. Without a host: `CONTAINER_HOST`, else
/// `$XDG_RUNTIME_DIR/podman/podman.sock` when it exists, else
/// `/run/podman/podman.sock`, resolved anew on every dial.
pub type PodmanConfig = compat::Config;

/// Watches Podman's containers.
///
/// Fails only when the host (given, or `CONTAINER_HOST` now) cannot be
/// parsed; an engine that is down is no error: the stream reports it and
/// retries.
pub fn watch(config: PodmanConfig) -> Result<Watch<PodmanDial>, ConfigError> {
    compat::watch(&MAPPING, config)
}
