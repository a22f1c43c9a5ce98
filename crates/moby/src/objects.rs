//! What a session watches: the engine's objects of one type (containers,
//! Swarm services), pluggable into the shared machinery.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, SystemTime};

use lookout_core::{EventKind, Labels, Listed, Readiness};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::cursor::Cursor;
use super::history::History;
use super::host::Discovery;

/// The objects one kind of session watches on an engine speaking the Docker
/// API: containers (a [`Mapping`](super::Mapping)), or Swarm services
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
    /// (see [`ReadinessFrom`]).
    fn parse_list(&self, body: &[u8], readiness: bool) -> Result<Vec<Listed>, String>;

    /// Where readiness comes from, when it is watched.
    fn readiness_from(&self) -> ReadinessFrom;

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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
    /// whose object was read [`MAX_INSPECTIONS`](crate::MAX_INSPECTIONS)
    /// times and that still asks is skipped as undecodable.
    fn inspected(&mut self, event: &Event, object: Option<&Value>) -> Decision {
        let _ = (event, object);
        Decision::Skip
    }
}

/// What a [`KnownObjects`] makes of one event.
#[derive(Debug, Clone, PartialEq, Eq)]
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
    /// Read the object first (`GET` this path, on a connection of its own),
    /// then decide with [`KnownObjects::inspected`].
    Inspect(String),
    /// The event cannot be used: it is skipped with a warning, as an
    /// undecodable line is.
    Undecodable(&'static str),
}

/// One event of the feed with what every kind needs decoded: its action,
/// its object's id and name, its attributes and its time.
#[derive(Debug, Clone)]
pub struct Event {
    pub(crate) action: String,
    pub(crate) uid: Arc<str>,
    pub(crate) name: String,
    pub(crate) attributes: Attributes,
    pub(crate) time: Cursor,
    /// Where to resume after it, when it moved the feed forward.
    pub(crate) cursor: Option<Cursor>,
    /// How many times its object was inspected.
    pub(crate) inspections: u8,
}

impl Event {
    /// An event as the feed decodes it (for a kind's tests): its cursor is
    /// its time.
    pub fn new(
        action: impl Into<String>,
        uid: impl Into<Arc<str>>,
        name: impl Into<String>,
        attributes: Map<String, Value>,
        time: Cursor,
    ) -> Self {
        Self {
            action: action.into(),
            uid: uid.into(),
            name: name.into(),
            attributes: Attributes::decoded(attributes),
            time,
            cursor: Some(time),
            inspections: 0,
        }
    }

    /// `Action` (or the legacy `status`).
    pub fn action(&self) -> &str {
        &self.action
    }

    /// The object's id: `Actor.ID` (or the legacy `id`).
    pub fn uid(&self) -> &Arc<str> {
        &self.uid
    }

    /// The object's name (`Actor.Attributes.name`, without a leading `/`):
    /// the instance id.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// All of `Actor.Attributes` (empty when the event has none, or when
    /// they are not a JSON object). Decoded on the first call: most events
    /// need only the name, which the feed reads as it decodes the line.
    pub fn attributes(&self) -> &Map<String, Value> {
        self.attributes.get()
    }

    /// One attribute as a string (a non-string value as its JSON text).
    pub fn attribute(&self, key: &str) -> Option<String> {
        self.attributes().get(key).map(string_value)
    }

    /// How many times the object was inspected for this event (0 before
    /// the first inspection; see [`KnownObjects::inspected`]).
    pub fn inspections(&self) -> u8 {
        self.inspections
    }

    /// A copy that was inspected `n` times (for a kind's tests).
    #[must_use]
    pub fn inspected_times(mut self, n: u8) -> Self {
        self.inspections = n;
        self
    }

    /// The event's time.
    pub fn time(&self) -> Cursor {
        self.time
    }

    /// The event's time as a [`SystemTime`].
    pub fn at(&self) -> SystemTime {
        SystemTime::UNIX_EPOCH
            + Duration::from_nanos(u64::try_from(self.time.unix_nanos()).unwrap_or(0))
    }
}

/// An event's `Actor.Attributes`: the engine's JSON text, decoded into a map
/// on first use.
#[derive(Debug, Clone, Default)]
pub(crate) struct Attributes {
    raw: Option<Box<RawValue>>,
    decoded: OnceLock<Map<String, Value>>,
}

impl Attributes {
    /// Attributes as the engine wrote them (any JSON value; only an object
    /// has attributes).
    pub(crate) fn raw(raw: &RawValue) -> Self {
        Self {
            raw: Some(raw.to_owned()),
            decoded: OnceLock::new(),
        }
    }

    /// Attributes already decoded.
    pub(crate) fn decoded(map: Map<String, Value>) -> Self {
        Self {
            raw: None,
            decoded: OnceLock::from(map),
        }
    }

    fn get(&self) -> &Map<String, Value> {
        self.decoded.get_or_init(|| {
            self.raw
                .as_deref()
                .and_then(|raw| serde_json::from_str(raw.get()).ok())
                .unwrap_or_default()
        })
    }
}

/// [`string_value`] borrowed when it is a string (as a label value, to be
/// interned).
pub fn label_value(v: &Value) -> std::borrow::Cow<'_, str> {
    match v {
        Value::String(s) => std::borrow::Cow::Borrowed(s.as_str()),
        other => std::borrow::Cow::Owned(other.to_string()),
    }
}

/// A JSON value as a label value: a string as it is, anything else as its
/// JSON text.
pub fn string_value(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The labels in a JSON object (`Labels`, `Spec.Labels`); none for `null`
/// or a missing one. Straight into the interned set: no string is copied
/// but those it has not seen yet.
pub fn labels_of(object: Option<&Value>) -> Labels {
    object
        .and_then(Value::as_object)
        .map(|l| {
            l.iter()
                .map(|(k, v)| (k.as_str(), label_value(v)))
                .collect()
        })
        .unwrap_or_default()
}

/// Whether `labels` carry every label of `filter` (as the engine's `label`
/// filter with `key=value` terms matches).
pub fn matches(labels: &Labels, filter: &Labels) -> bool {
    filter.iter().all(|(k, v)| labels.get(k) == Some(v))
}

/// The start of a text, for a log message.
pub(crate) fn preview(text: &[u8]) -> String {
    const MAX: usize = 200;
    let shown = String::from_utf8_lossy(&text[..text.len().min(MAX)]);
    if text.len() > MAX {
        format!("{shown}…")
    } else {
        shown.into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_helpers() {
        let v: Value = serde_json::from_str(r#"{"a":"1","n":2,"b":null}"#).expect("json");
        let labels = labels_of(Some(&v));
        assert_eq!(
            labels,
            Labels::from([
                ("a".into(), "1".into()),
                ("b".into(), "null".into()),
                ("n".into(), "2".into())
            ])
        );
        assert!(labels_of(Some(&Value::Null)).is_empty());
        assert!(labels_of(None).is_empty());
        assert!(matches(&labels, &Labels::new()));
        assert!(matches(&labels, &Labels::from([("a".into(), "1".into())])));
        assert!(!matches(&labels, &Labels::from([("a".into(), "2".into())])));
        assert!(!matches(
            &labels,
            &Labels::from([("z".into(), String::new())])
        ));
    }
}
