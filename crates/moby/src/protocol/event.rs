//! One event of the feed as every kind reads it ([`Event`]): its action,
//! its object's id and name, its attributes (decoded on first use) and its
//! time.

use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime};

use serde_json::{Map, Value};

use lookout_core::{InstanceId, Labels};

use super::cursor::Cursor;
use super::labels::{label_value, raw_labels, string_value};

/// One event of the feed with what every kind needs decoded: its action,
/// its object's id and name, its attributes and its time.
#[derive(Debug, Clone)]
pub struct Event {
    pub(crate) action: String,
    pub(crate) uid: Arc<str>,
    /// Built as the instance id its change carries (a reference count),
    /// so that no second copy is made per event.
    pub(crate) name: InstanceId,
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
            name: InstanceId::from(name.into()),
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
        self.name.as_str()
    }

    /// All of `Actor.Attributes` (empty when the event has none, or when
    /// they are not a JSON object). Decoded on the first call: most events
    /// need only the name, which the feed reads as it decodes the line.
    pub fn attributes(&self) -> &Map<String, Value> {
        self.attributes.get()
    }

    /// The attributes as labels, but the keys in `except` (a container's
    /// `create`: the engine mixes its labels into them). Read straight from
    /// the engine's text when they were not decoded yet, without building
    /// the map [`attributes`](Self::attributes) builds; the same labels
    /// either way.
    pub(crate) fn labels_except(&self, except: &[&str]) -> Labels {
        match (&self.attributes.raw, self.attributes.decoded.get()) {
            (_, Some(map)) => map
                .iter()
                .filter(|(k, _)| !except.contains(&k.as_str()))
                .map(|(k, v)| (k.as_str(), label_value(v)))
                .collect(),
            (Some(raw), None) => raw_labels(raw, except),
            (None, None) => Labels::new(),
        }
    }

    /// One attribute as a string (a non-string value as its JSON text).
    pub fn attribute(&self, key: &str) -> Option<String> {
        self.attributes().get(key).map(string_value)
    }

    /// The exit code of a `die` (`exitCode`, Podman's `containerExitCode`),
    /// read without decoding the other attributes.
    pub(crate) fn exit_code(&self) -> Option<i32> {
        match (&self.attributes.raw, self.attributes.decoded.get()) {
            (_, Some(map)) => ["exitCode", "containerExitCode"]
                .into_iter()
                .find_map(|key| string_value(map.get(key)?).trim().parse().ok()),
            (Some(raw), None) => match self.attributes.exit_code {
                ExitCode::Read(code) => code,
                ExitCode::Unread => super::wire::attribute_exit_code(raw),
            },
            (None, None) => None,
        }
    }

    /// How many times the object was inspected for this event (0 before
    /// the first inspection; see [`KnownObjects::inspected`](crate::KnownObjects::inspected)).
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
    /// JSON text `serde_json` accepted (as a `RawValue` would hold it; a
    /// plain `str`, so that the feed's fast path, `line_scan.rs`, copies it
    /// without a second validating pass).
    raw: Option<Box<str>>,
    decoded: OnceLock<Map<String, Value>>,
    /// The exit code, when the feed read it already (with the name, in one
    /// scan: `attributes_scan.rs`), so that a `die` is not read again.
    exit_code: ExitCode,
}

/// Whether the feed read the attributes' exit code already.
#[derive(Debug, Clone, Copy, Default)]
enum ExitCode {
    /// Not read: the text is read for it when asked.
    #[default]
    Unread,
    /// Read (`None`: there is none).
    Read(Option<i32>),
}

impl Attributes {
    /// Attributes as the engine wrote them (any JSON value; only an object
    /// has attributes).
    pub(crate) fn raw(raw: &str) -> Self {
        Self {
            raw: Some(raw.into()),
            decoded: OnceLock::new(),
            exit_code: ExitCode::Unread,
        }
    }

    /// The same, with the exit code the feed read from them already.
    pub(crate) fn with_exit_code(mut self, code: Option<i32>) -> Self {
        self.exit_code = ExitCode::Read(code);
        self
    }

    /// Attributes already decoded.
    pub(crate) fn decoded(map: Map<String, Value>) -> Self {
        Self {
            raw: None,
            decoded: OnceLock::from(map),
            exit_code: ExitCode::Unread,
        }
    }

    fn get(&self) -> &Map<String, Value> {
        self.decoded.get_or_init(|| {
            self.raw
                .as_deref()
                .and_then(|raw| serde_json::from_str(raw).ok())
                .unwrap_or_default()
        })
    }
}
