//! The one thing that differs between engines whose containers lookout
//! watches through the Docker API: a table.

use lookout_core::EventKind;

use super::objects::History;
use crate::discovery::Discovery;

/// How one engine's containers are read through its Docker-compatible API:
/// which actions mean what, which attributes are not labels, and where the
/// engine is found. A `Mapping` is the [`Objects`](crate::Objects) of a
/// container watch (Docker, Podman).
///
/// Everything else (connecting, subscribing, listing, decoding, the cursor,
/// the probe) is shared by every engine in [`lookout_moby`](crate).
#[derive(Debug, Clone, Copy)]
pub struct Mapping {
    /// The provider's name, in logs and errors (`docker`, `podman`).
    pub provider: &'static str,
    /// Container actions and what they mean. Every other action is ignored
    /// (the cursor still advances past it).
    pub actions: &'static [(&'static str, EventKind)],
    /// Actions known to mean nothing to lookout; ignored quietly (`trace`),
    /// where an action in neither list is logged at `debug`.
    pub ignored: &'static [&'static str],
    /// Attributes of a `create` event that are not container labels. The
    /// engine puts labels among the actor's attributes; lookout takes a new
    /// container's labels from its `create` event minus these keys (a listed
    /// container's labels come from the list, exactly).
    pub non_label_attributes: &'static [&'static str],
    /// How the engine replays, to a redial, the events its last session
    /// missed.
    pub history: History,
    /// Where the engine listens when the caller names no host.
    pub discovery: Discovery,
    /// How the engine tells a container's health, for readiness.
    pub health: HealthTable,
}

/// How an engine tells a container's health (see
/// [`Readiness`](lookout_core::Readiness)): what its `health_status` event
/// carries and what its `pause` and `die` do to the status.
#[derive(Debug, Clone, Copy)]
pub struct HealthTable {
    /// The event's action carries the new status (`health_status: healthy`,
    /// Docker: emitted only when the status changes). Otherwise the
    /// container is inspected at each `health_status` event for its
    /// current status: Podman emits one per check, and before 4.7 it
    /// carries the previous check's result (podman #19237) — it emits the
    /// event while the check runs and logs the result when it ends, so the
    /// container is read again, after a pause, until its health log's
    /// newest entry ended after the event (or at most 50 ms before it:
    /// Podman 4.7 logs, then tells).
    pub status_in_action: bool,
    /// The engine sets `unhealthy`, silently, when it pauses or stops a
    /// container with a check (Docker: the next good probe after `unpause`
    /// says `healthy` again); otherwise the status stays as it was (Podman).
    pub unhealthy_when_paused: bool,
    /// The list's `health=none` filter finds the containers without a
    /// check (Docker; Podman 4's never matches): a snapshot then learns
    /// every container's health from its lists, without an inspection.
    pub lists_none: bool,
}

impl Mapping {
    /// Whether the action is a health event (`health_status`, with or
    /// without `: STATUS`).
    pub(crate) fn is_health(action: &str) -> bool {
        action.split_once(':').map_or(action, |(verb, _)| verb) == "health_status"
    }

    /// What an action means, if anything.
    pub fn kind(&self, action: &str) -> Option<EventKind> {
        self.actions
            .iter()
            .find_map(|(a, kind)| (*a == action).then_some(*kind))
    }

    /// Whether the action is known to be irrelevant.
    pub fn is_ignored(&self, action: &str) -> bool {
        // `exec_start: sh -c …`, `health_status: healthy`: match the verb.
        let verb = action.split_once(':').map_or(action, |(verb, _)| verb);
        self.ignored.contains(&verb)
    }
}
