//! The one thing that differs between engines whose containers lookout
//! watches through the Docker API: a table.

use lookout_core::EventKind;

use super::objects::History;
use crate::location::discovery::Discovery;

/// How one engine's containers are read through its Docker-compatible API:
/// which actions mean what, which attributes are not labels, and where the
/// engine is found. A `Mapping` is the [`Objects`](crate::Objects) of a
/// container watch (Docker, Podman).
///
/// Everything else (connecting, subscribing, listing, decoding, the cursor,
/// the probe) is shared by every engine in [`lookout_moby`](crate).
///
/// A table's `static`, made with [`Mapping::new`] and the `const` builder
/// methods below (each field private, so an option may be added):
///
/// ```
/// use lookout_core::EventKind;
/// use lookout_moby::{Discovery, HealthTable, History, Mapping};
///
/// static MY_ENGINE: Mapping = Mapping::new("my-engine", Discovery::DOCKER, History::Until)
///     .actions(&[
///         ("create", EventKind::Created),
///         ("start", EventKind::Started),
///         ("die", EventKind::Stopped),
///         ("destroy", EventKind::Removed),
///     ])
///     .ignored(&["kill", "stop"])
///     .non_label_attributes(&["name", "image"])
///     .health(HealthTable::new().status_in_action(true));
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Mapping {
    /// The provider's name, in logs and errors (`docker`, `podman`).
    pub(crate) provider: &'static str,
    /// Container actions and what they mean. Every other action is ignored
    /// (the cursor still advances past it).
    pub(crate) actions: &'static [(&'static str, EventKind)],
    /// Actions known to mean nothing to lookout; ignored quietly (`trace`),
    /// where an action in neither list is logged at `debug`.
    pub(crate) ignored: &'static [&'static str],
    /// Attributes of a `create` event that are not container labels. The
    /// engine puts labels among the actor's attributes; lookout takes a new
    /// container's labels from its `create` event minus these keys (a listed
    /// container's labels come from the list, exactly).
    pub(crate) non_label_attributes: &'static [&'static str],
    /// How the engine replays, to a redial, the events its last session
    /// missed.
    pub(crate) history: History,
    /// Where the engine listens when the caller names no host.
    pub(crate) discovery: Discovery,
    /// How the engine tells a container's health, for readiness.
    pub(crate) health: HealthTable,
    /// The engine logs a stop request (`kill`, `stop`) before the `die`
    /// it causes (Docker). Podman 4.3 logs none for `podman stop`: a `die`
    /// by `SIGTERM` or `SIGKILL` without an OOM kill is then taken as
    /// requested, as a snapshot takes it.
    pub(crate) stops_logged: bool,
}

/// How an engine tells a container's health (see
/// [`Readiness`](lookout_core::Readiness)): what its `health_status` event
/// carries and what its `pause` and `die` do to the status.
///
/// Made with [`HealthTable::new`] (every answer "no": the engine is asked
/// rather than trusted) and the `const` builder methods below, each
/// documenting its answer; the fields are private, so a question may be
/// added.
#[derive(Debug, Clone, Copy, Default)]
#[allow(clippy::struct_excessive_bools, reason = "a table of yes/no answers")]
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
    pub(crate) status_in_action: bool,
    /// The engine sets `unhealthy`, silently, when it pauses or stops a
    /// container with a check (Docker: the next good probe after `unpause`
    /// says `healthy` again); otherwise the status stays as it was (Podman).
    pub(crate) unhealthy_when_paused: bool,
    /// The list's `health=none` filter finds the containers without a
    /// check (Docker; Podman 4's never matches): a snapshot then learns
    /// every container's health from its lists, without an inspection.
    pub(crate) lists_none: bool,
    /// The list's `Status` carries a running container's health (Docker:
    /// `Up 3 minutes (healthy)`, `(unhealthy)`, `(health: starting)`, and
    /// nothing without a check): a snapshot reads it there.
    pub(crate) status_in_list: bool,
}

impl HealthTable {
    /// Every answer "no": each `health_status` event is followed by an
    /// inspection, a pause leaves the status as it was, and a snapshot
    /// inspects the containers in none of its `health` lists.
    #[must_use]
    pub const fn new() -> Self {
        Self {
            status_in_action: false,
            unhealthy_when_paused: false,
            lists_none: false,
            status_in_list: false,
        }
    }

    /// Docker's answers: all four "yes".
    pub const DOCKER: Self = Self::new()
        .status_in_action(true)
        .unhealthy_when_paused(true)
        .lists_none(true)
        .status_in_list(true);

    /// Whether the `health_status` event's action carries the new status
    /// (`health_status: healthy`; Docker: emitted only when the status
    /// changes). Otherwise the container is inspected at each
    /// `health_status` event for its current status: Podman emits one per
    /// check, and before 4.7 it carries the previous check's result (podman
    /// #19237) — it emits the event while the check runs and logs the
    /// result when it ends, so the container is read again, after a pause,
    /// until its health log's newest entry ended after the event (or at
    /// most 50 ms before it: Podman 4.7 logs, then tells).
    #[must_use]
    pub const fn status_in_action(mut self, yes: bool) -> Self {
        self.status_in_action = yes;
        self
    }

    /// Whether the engine sets `unhealthy`, silently, when it pauses or
    /// stops a container with a check (Docker: the next good probe after
    /// `unpause` says `healthy` again); otherwise the status stays as it
    /// was (Podman).
    #[must_use]
    pub const fn unhealthy_when_paused(mut self, yes: bool) -> Self {
        self.unhealthy_when_paused = yes;
        self
    }

    /// Whether the list's `health=none` filter finds the containers
    /// without a check (Docker; Podman 4's never matches): a snapshot then
    /// learns every container's health from its lists, without an
    /// inspection.
    #[must_use]
    pub const fn lists_none(mut self, yes: bool) -> Self {
        self.lists_none = yes;
        self
    }

    /// Whether the list's `Status` carries a running container's health
    /// (Docker: `Up 3 minutes (healthy)`, `(unhealthy)`, `(health:
    /// starting)`, and nothing after `Up …` without a check; Podman 4.3's
    /// compat list says only `Up 4 seconds`): a snapshot then reads each
    /// running container's health in the one list it makes, and inspects
    /// only those whose `Status` does not tell it (a paused one's
    /// `(Paused)`). Otherwise it asks the list again per health status
    /// (the `health` filter). Either way, a running unhealthy container is
    /// inspected for its check's output, and one that `SIGKILL` ended for
    /// its OOM kill (see docs/why.md).
    #[must_use]
    pub const fn status_in_list(mut self, yes: bool) -> Self {
        self.status_in_list = yes;
        self
    }
}

impl Mapping {
    /// The table of the engine `provider` (its name in logs and errors:
    /// `docker`, `podman`), found as `discovery` says, serving its history
    /// as `history` says; no action mapped nor ignored, every attribute of
    /// a `create` event a label, and [`HealthTable::new`], until set below.
    #[must_use]
    pub const fn new(provider: &'static str, discovery: Discovery, history: History) -> Self {
        Self {
            provider,
            actions: &[],
            ignored: &[],
            non_label_attributes: &[],
            history,
            discovery,
            health: HealthTable::new(),
            stops_logged: true,
        }
    }

    /// Whether the engine logs every stop request (`kill`, `stop`) before
    /// the `die` it causes (the default; Docker). Without (Podman 4.3 logs
    /// nothing for `podman stop`), a `die` by `SIGTERM` or `SIGKILL` that
    /// no OOM kill explains is taken as a requested stop: its outcome is
    /// `stopped`, and the engine's restart policy is not taken to restart
    /// it (only what the engine shows: restarting, or running again).
    #[must_use]
    pub const fn stops_logged(mut self, yes: bool) -> Self {
        self.stops_logged = yes;
        self
    }

    /// Container actions and what they mean. Every other action is ignored
    /// (the cursor still advances past it).
    #[must_use]
    pub const fn actions(mut self, actions: &'static [(&'static str, EventKind)]) -> Self {
        self.actions = actions;
        self
    }

    /// Actions known to mean nothing to lookout; ignored quietly (`trace`),
    /// where an action in neither list is logged at `debug`. An entry
    /// matches the action's verb (`exec_start` matches
    /// `exec_start: sh -c …`).
    #[must_use]
    pub const fn ignored(mut self, ignored: &'static [&'static str]) -> Self {
        self.ignored = ignored;
        self
    }

    /// Attributes of a `create` event that are not container labels. The
    /// engine puts labels among the actor's attributes; lookout takes a new
    /// container's labels from its `create` event minus these keys (a
    /// listed container's labels come from the list, exactly).
    #[must_use]
    pub const fn non_label_attributes(mut self, keys: &'static [&'static str]) -> Self {
        self.non_label_attributes = keys;
        self
    }

    /// How the engine tells a container's health, for readiness.
    #[must_use]
    pub const fn health(mut self, health: HealthTable) -> Self {
        self.health = health;
        self
    }

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
