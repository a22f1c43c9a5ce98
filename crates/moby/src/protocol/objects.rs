//! What a session watches: the engine's objects of one type (containers,
//! Swarm services), pluggable into the shared machinery.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use lookout_core::{EventKind, Labels, Listed, Readiness, Reason};
use serde_json::Value;

use super::cursor::Cursor;
use super::event::Event;
use crate::location::discovery::Discovery;

/// The objects one kind of session watches on an engine speaking the Docker
/// API: containers (a [`Mapping`](crate::Mapping)), or Swarm services
/// (`lookout_swarm`).
///
/// It says what to subscribe to and list, how to decode the list, and makes
/// per session a [`KnownObjects`] that maps each event. Everything else —
/// connecting, the `/events` framing and its undecodable lines, the cursor and
/// `since`, the snapshot, inspecting an object, the probe — is
/// [`lookout_moby`](crate)'s, the same for every kind.
pub trait Objects: fmt::Debug + Send + Sync + 'static {
    /// What one session knows of the objects, to map their events.
    type Known: KnownObjects;

    /// The provider's name, in logs and errors (`docker`, `podman`, `swarm`).
    fn provider(&self) -> &'static str;

    /// Where the engine listens when the caller names no host.
    fn discovery(&self) -> &Discovery;

    /// The `Type` of the events (`container`, `service`): the session
    /// subscribes with a `type` filter and skips events of any other type.
    fn event_type(&self) -> &'static str;

    /// The actions to subscribe to (an `event` filter); all when empty.
    /// With `readiness`, also those that tell it (a container's
    /// `health_status`, `pause`, `unpause`).
    fn actions(&self, readiness: bool) -> Vec<&'static str>;

    /// Whether an event's attributes carry the object's labels, so that the
    /// engine can filter the events by label. When they do not, the session
    /// subscribes to the events of every object and its [`KnownObjects`]
    /// filters them.
    fn labels_in_events(&self) -> bool;

    /// The list of every object, without filters (`/containers/json?all=1`,
    /// `/services`); the session adds the label filter. With `readiness`,
    /// the list that tells it, if the engine has one
    /// (`/services?status=true`).
    fn list_path(&self, readiness: bool) -> &'static str;

    /// Decodes the list; `Err` says why it is unusable. With `readiness`,
    /// each object's [`Listed::readiness`] as far as the list tells it
    /// (see [`ReadinessFrom`]). A snapshot's list comes in parts, as it
    /// arrives: each part a JSON array of some of the entries (whole, in
    /// order, about 64 KiB of them), so that the whole body is never held;
    /// the polls' and health lists come whole.
    fn parse_list(&self, body: &[u8], readiness: bool) -> Result<Vec<Listed>, String>;

    /// Where readiness comes from, when it is watched.
    fn readiness_from(&self) -> ReadinessFrom;

    /// With readiness polled ([`ReadinessFrom::Polled`]): why the objects a
    /// poll found running but not ready fail, in the engine's words, from a
    /// list of their own (Swarm's `/tasks`: the objects' list tells no
    /// error). Given their uids, the path of that list (read like the
    /// objects' list) and how to decode it: each failing object's uid and
    /// why; an object it does not name does not fail. `None` (the default):
    /// a poll tells no failure.
    #[allow(clippy::type_complexity)]
    fn polled_failures(
        &self,
        uids: &[&str],
    ) -> Option<(String, fn(&[u8]) -> Result<Vec<(String, Reason)>, String>)> {
        let _ = uids;
        None
    }

    /// How the engine replays, to a redial, the events of these objects that
    /// its last session did not see: see [`History`].
    fn history(&self) -> History;

    /// What a new session knows: the objects the snapshot `listed`, under the
    /// watch's [`Scope`].
    fn known(&'static self, scope: &Scope, listed: &[Listed]) -> Self::Known;

    /// What a redial knows while it replays the engine's history (before
    /// any list): every object in that history was watched by the session
    /// before, since the engine applied the same filters to it. Asked only
    /// when [`history`](Self::history) is not [`History::Unreliable`]; by
    /// default the knowledge of an empty list.
    fn known_history(&'static self, scope: &Scope) -> Self::Known {
        self.known(scope, &[])
    }
}

/// Where an engine's objects tell their readiness.
///
/// `#[non_exhaustive]`: another source may come (a table returns one;
/// lookout reads it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReadinessFrom {
    /// Containers: their health events (`health_status`, `pause`,
    /// `unpause`), and for a snapshot the engine's `health` list filter
    /// (one list per status).
    Health {
        /// The engine's `health=none` filter finds the containers without
        /// a check (see [`HealthTable::lists_none`](crate::HealthTable::lists_none)).
        lists_none: bool,
    },
    /// Only a list tells it (Swarm's `/services?status=true`: there are no
    /// task events): the snapshot's list, and the same list polled every
    /// [`Config::readiness_poll`](crate::Config::readiness_poll) between
    /// snapshots, each object as an [`Observation::Polled`](lookout_core::Observation::Polled).
    Polled,
    // Last, so that no variant before it changes its discriminant.
    /// Containers: their health events, as [`Health`](Self::Health), and
    /// for a snapshot the one list's `Status`, which tells a running
    /// container's health (see
    /// [`HealthTable::status_in_list`](crate::HealthTable::status_in_list)):
    /// only a running container whose `Status` does not tell it (paused) is
    /// inspected.
    Status,
}

/// How an engine serves, to a dial, the events it still has.
///
/// `#[non_exhaustive]`: another engine may serve its history another way
/// (a table returns one; lookout reads it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum History {
    /// `since` … `until` (lookout's clock now) ends the response after the
    /// events the engine still has: dockerd answers from its in-memory
    /// buffer of its last 256 events (of every type), none after a restart.
    Until,
    /// `since` with `stream=false` ends the response at the end of the
    /// engine's event log: Podman (journald or a file) keeps its events
    /// across restarts of its service. (Podman 4's `until` ends the read at
    /// once when that time has passed: no use here.)
    NoStream,
    /// The engine's `since` cannot prove a history complete: Swarm stamps a
    /// service event with the service's `UpdatedAt`, so a change made while
    /// disconnected may carry a time older than the cursor and not be
    /// replayed at all. A dial lists and diffs, and subscribes from now.
    Unreliable,
}

impl History {
    /// The query parameters that make `/events?since=…` end after the
    /// history; `None` when the history is not read.
    pub(crate) fn bound(self, now: SystemTime) -> Option<String> {
        match self {
            Self::Until => Some(format!("&until={}", Cursor::from_system_time(now).query())),
            Self::NoStream => Some("&stream=false".to_owned()),
            Self::Unreliable => None,
        }
    }
}

/// What one watch asks of its objects, the same for each of its sessions:
/// the caller's label filter, whether readiness is watched, and what the
/// watch learnt once of each container (whether it has a healthcheck, fixed
/// when it is created).
#[derive(Debug, Clone, Default)]
pub struct Scope {
    /// Only the objects carrying all of these labels.
    pub labels: Labels,
    /// Readiness is watched.
    pub readiness: bool,
    /// Container id → whether it has a healthcheck.
    pub(crate) checks: Checks,
}

impl Scope {
    /// The scope of a watch.
    pub fn new(labels: Labels, readiness: bool) -> Self {
        Self {
            labels,
            readiness,
            checks: Checks::default(),
        }
    }
}

/// Which containers have a healthcheck (container id → has one), shared by
/// a watch's sessions: learnt once per container (from the snapshot's
/// health lists, else one inspection), forgotten when a snapshot no longer
/// lists it.
#[derive(Debug, Clone, Default)]
pub(crate) struct Checks(Arc<Mutex<HashMap<Arc<str>, bool>>>);

impl Checks {
    pub(crate) fn get(&self, uid: &str) -> Option<bool> {
        self.lock().get(uid).copied()
    }

    pub(crate) fn set(&self, uid: &Arc<str>, has_check: bool) {
        self.lock().insert(Arc::clone(uid), has_check);
    }

    /// Keeps only the containers a snapshot listed.
    pub(crate) fn retain(&self, listed: &[Listed]) {
        let keep: std::collections::HashSet<&str> =
            listed.iter().filter_map(|l| l.uid.as_deref()).collect();
        self.lock().retain(|uid, _| keep.contains(&**uid));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Arc<str>, bool>> {
        // A panic while holding it cannot leave the map half-written.
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// What one session knows of the objects (their labels, which of them it
/// reports), and how it maps each event.
pub trait KnownObjects: Send + 'static {
    /// What an event means.
    fn event(&mut self, event: &Event) -> Decision;

    /// What an event means now that the object it is about was inspected, as
    /// [`Decision::Inspect`] asked: `None` when the engine says the object no
    /// longer exists. It may ask to read the object again
    /// ([`Decision::Inspect`]), when the object does not show yet what the
    /// event announced (Podman logs a health check's result after its
    /// event): the session does so after a pause, longer each time (20 ms,
    /// doubling, at most 500 ms), the event's
    /// [`inspections`](Event::inspections) counting the reads; an event
    /// whose object was read [`MAX_INSPECTIONS`](crate::protocol::MAX_INSPECTIONS)
    /// times and that still asks is skipped as undecodable.
    fn inspected(&mut self, event: &Event, object: Option<&Value>) -> Decision {
        let _ = (event, object);
        Decision::Skip
    }
}

/// What a [`KnownObjects`] makes of one event.
///
/// `#[non_exhaustive]`: another outcome may come (a table returns one;
/// lookout reads it). [`Report`](Self::Report)'s fields are fixed, so a
/// table can build it: what else an event may tell would be a new variant.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Decision {
    /// Nothing lookout reports (an ignored action, an object outside the
    /// filter, a stale event): the cursor moves past it.
    Skip,
    /// A transition of the event's object, with the object's labels.
    Report {
        /// The transition.
        kind: EventKind,
        /// The object's labels (shared: a [`KnownObjects`] that keeps each
        /// object's labels hands out the same `Arc` for each event).
        labels: Arc<Labels>,
        /// With readiness watched, the object's readiness after the event,
        /// when the event tells it.
        readiness: Option<Readiness>,
    },
    /// A transition, as [`Report`](Self::Report), with why it happened in
    /// the engine's words: a stop's outcome, exit code, signal, OOM and
    /// restart; a failure's message.
    Explained {
        /// The transition.
        kind: EventKind,
        /// The object's labels (see [`Report`](Self::Report)).
        labels: Arc<Labels>,
        /// With readiness watched, the object's readiness after the event,
        /// when the event tells it.
        readiness: Option<Readiness>,
        /// Why.
        reason: Arc<Reason>,
    },
    /// Read the object first (`GET` this path, on a connection of its own),
    /// then decide with [`KnownObjects::inspected`].
    Inspect(String),
    /// The event cannot be used: it is skipped with a warning, as an
    /// undecodable line is.
    Undecodable(&'static str),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bound_ends_the_request() {
        let now =
            SystemTime::UNIX_EPOCH + std::time::Duration::from_nanos(1_700_000_000_000_000_123);
        assert_eq!(
            History::Until.bound(now).as_deref(),
            Some("&until=1700000000.000000123")
        );
        assert_eq!(
            History::NoStream.bound(now).as_deref(),
            Some("&stream=false")
        );
        assert_eq!(History::Unreliable.bound(now), None);
    }
}
