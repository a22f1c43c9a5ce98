//! Decoding the `/events` body line by line into observations. Pure (no
//! I/O), so every case is unit-tested.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::fmt;
use std::sync::Arc;
use std::time::SystemTime;

use lookout_core::{Change, InstanceId, Labels, Listed, Observation};
use serde::Deserializer as _;
use serde::de::{self, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use serde_json::value::RawValue;

use super::objects::{Attributes, Decision, Event, KnownObjects, Objects, preview};

/// A position in an engine's event feed: the event's `timeNano`.
///
/// A redial reads the history `since` this time, minus 1 µs (Docker's
/// `since` is inclusive and exact, Podman parses it as a float, precise to
/// about 0.25 µs), to prove that it continues the feed (see
/// [`History`](super::History)); a subscription resumed from a cursor drops
/// every event at or before it (two events in the same nanosecond, one seen
/// and one not, would lose the second; engines stamp events with the
/// nanosecond clock, so this is left as it is).
///
/// The cursor only moves forward: it is the newest time seen, whatever the
/// order the events came in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Cursor(i64);

impl Cursor {
    /// The cursor at this many nanoseconds since the Unix epoch.
    pub fn from_unix_nanos(nanos: i64) -> Self {
        Self(nanos)
    }

    /// The cursor at `time` (the epoch for an earlier time).
    pub(crate) fn from_system_time(time: SystemTime) -> Self {
        Self(
            time.duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)),
        )
    }

    /// Nanoseconds since the Unix epoch.
    pub fn unix_nanos(self) -> i64 {
        self.0
    }

    /// The time as a query value: `seconds.nanoseconds`.
    pub(crate) fn query(self) -> String {
        format!("{}.{:09}", self.0 / 1_000_000_000, self.0 % 1_000_000_000)
    }

    /// The `since` query value: 1 µs before the cursor.
    pub(crate) fn since(self) -> String {
        Self(self.0.saturating_sub(1_000).max(0)).query()
    }
}

/// One decoded observation from the feed.
pub(crate) type Obs = Observation<Cursor>;

/// What the feed makes of one line.
#[derive(Debug)]
pub(crate) enum Step {
    /// An observation to yield.
    Obs(Obs),
    /// Inspect the event's object (`GET path`) before deciding: see
    /// [`Feed::inspected`].
    Inspect { event: Event, path: String },
}

/// The longest event line accepted; a longer one is skipped as undecodable.
pub(crate) const MAX_LINE: usize = 1 << 20;

/// Turns the `/events` body of one session into observations.
///
/// It frames and decodes the lines (an undecodable one costs that event
/// only), keeps the cursor, drops what a redial replays of the events seen
/// before it, and hands each event of the watched type to the session's
/// [`KnownObjects`], which says what it means.
#[derive(Debug)]
pub(crate) struct Feed<K> {
    provider: &'static str,
    event_type: &'static str,
    /// The cursor a subscription resumed from: every event at or before it
    /// was seen (see [`Cursor`]).
    resume: Option<Cursor>,
    /// The newest cursor reported: cursors only move forward, so that an
    /// event with a bogus old time cannot send a redial far back.
    newest: Option<Cursor>,
    known: K,
    /// A line not yet terminated by `\n`.
    partial: Vec<u8>,
    /// Inside a line longer than [`MAX_LINE`], already reported: skip to `\n`.
    overlong: bool,
}

impl<K: KnownObjects> Feed<K> {
    /// The feed of a subscription, resumed from `resume` (`None`: from now),
    /// after a snapshot that `listed` these objects.
    pub(crate) fn new<O: Objects<Known = K>>(
        objects: &'static O,
        labels: &Labels,
        resume: Option<Cursor>,
        listed: &[Listed],
    ) -> Self {
        Self::with(objects, objects.known(labels, listed), resume, resume)
    }

    /// The feed of a history read past the last event seen, at `cursor`:
    /// it drops nothing by time (what follows that event was not seen), and
    /// its cursors never go back before `cursor`.
    pub(crate) fn history<O: Objects<Known = K>>(
        objects: &'static O,
        labels: &Labels,
        cursor: Cursor,
    ) -> Self {
        Self::with(objects, objects.known_history(labels), None, Some(cursor))
    }

    fn with<O: Objects<Known = K>>(
        objects: &'static O,
        known: K,
        resume: Option<Cursor>,
        newest: Option<Cursor>,
    ) -> Self {
        Self {
            provider: objects.provider(),
            event_type: objects.event_type(),
            resume,
            newest,
            known,
            partial: Vec::new(),
            overlong: false,
        }
    }

    /// The newest event time seen (or the cursor it started from).
    pub(crate) fn newest(&self) -> Option<Cursor> {
        self.newest
    }

    /// Feeds a piece of the body; pushes a step per complete line.
    pub(crate) fn push(&mut self, mut chunk: &[u8], out: &mut VecDeque<Step>) {
        while let Some(pos) = memchr::memchr(b'\n', chunk) {
            let (head, rest) = (&chunk[..pos], &chunk[pos + 1..]);
            chunk = rest;
            if self.overlong {
                self.overlong = false;
                continue;
            }
            let step = if self.partial.is_empty() {
                self.line(head)
            } else {
                let mut line = std::mem::take(&mut self.partial);
                line.extend_from_slice(head);
                self.line(&line)
            };
            out.extend(step);
        }
        if self.overlong {
            return;
        }
        self.partial.extend_from_slice(chunk);
        if self.partial.len() > MAX_LINE {
            tracing::warn!(
                provider = self.provider,
                limit = MAX_LINE,
                start = %preview(&self.partial),
                "skipping an event line longer than the limit"
            );
            self.partial = Vec::new();
            self.overlong = true;
            out.push_back(Step::Obs(Observation::Progress(None)));
        }
    }

    /// The body ended: decodes a last line that had no `\n`.
    pub(crate) fn finish(&mut self, out: &mut VecDeque<Step>) {
        let line = std::mem::take(&mut self.partial);
        if !self.overlong {
            out.extend(self.line(&line));
        }
    }

    /// What the event means now that its object was inspected: `Ok(None)`
    /// when the engine says it is gone, `Err` when it answered something
    /// unusable (the event is then skipped with a warning).
    pub(crate) fn inspected(
        &mut self,
        event: Event,
        object: Result<Option<&Value>, String>,
    ) -> Obs {
        let decision = match object {
            Ok(object) => match self.known.inspected(&event, object) {
                Decision::Inspect(_) => Decision::Undecodable("asked to inspect again"),
                decision => decision,
            },
            Err(reason) => {
                tracing::warn!(
                    provider = self.provider,
                    id = event.name(),
                    action = event.action(),
                    %reason,
                    "skipping an event whose object cannot be inspected"
                );
                return Observation::Progress(event.cursor);
            }
        };
        match self.decided(event, decision) {
            Step::Obs(obs) => obs,
            Step::Inspect { event, .. } => Observation::Progress(event.cursor),
        }
    }

    /// Whether an event at `time` was seen before this subscription resumed.
    fn seen_before(&self, time: Cursor) -> bool {
        self.resume.is_some_and(|r| time <= r)
    }

    /// Decodes one line. `None` for a blank line; an undecodable, unwanted or
    /// stale event is `Progress`, with its cursor when it has one.
    fn line(&mut self, line: &[u8]) -> Option<Step> {
        let line = line.trim_ascii();
        if line.is_empty() {
            return None;
        }
        let provider = self.provider;
        let poison = |reason: &str, cursor: Option<Cursor>| {
            tracing::warn!(provider, reason, line = %preview(line), "skipping an undecodable event");
            Some(Step::Obs(Observation::Progress(cursor)))
        };
        let event = match Wire::decode(line) {
            Ok(event) => event,
            Err(e) if e.is_data() => return poison("not a JSON object", None),
            Err(e) => return poison(&format!("not JSON: {e}"), None),
        };
        let Some(time) = event.time() else {
            return poison("no timeNano/time", None);
        };
        if self.seen_before(time) {
            // Seen before the redial. Passing it on again is not harmless: the
            // snapshot may have moved the state on since (a replayed `start`
            // after a resync found the container stopped would restart it).
            tracing::trace!(provider, ?time, "replayed from before the resume point");
            return Some(Step::Obs(Observation::Progress(None)));
        }
        let cursor = if self.newest.is_none_or(|n| time >= n) {
            self.newest = Some(time);
            Some(time)
        } else {
            None
        };
        match self.event(event, time, cursor) {
            Ok(step) => Some(step),
            Err(reason) => poison(reason, cursor),
        }
    }

    /// Decodes what every event has and asks the session's objects what it
    /// means; `Err` names what it lacks.
    fn event(
        &mut self,
        event: Wire<'_>,
        time: Cursor,
        cursor: Option<Cursor>,
    ) -> Result<Step, &'static str> {
        match event.r#type.str() {
            Some(t) if t == self.event_type => {}
            Some(other) => {
                tracing::debug!(
                    provider = self.provider,
                    r#type = other,
                    "ignoring an event of another type"
                );
                return Ok(Step::Obs(Observation::Progress(cursor)));
            }
            None => return Err("no Type"),
        }
        let action = event
            .action
            .or(event.status)
            .into_str()
            .ok_or("no Action")?
            .into_owned();
        let uid: Arc<str> = event
            .actor_id
            .or(event.id)
            .str()
            .filter(|id| !id.is_empty())
            .ok_or("no Actor.ID")?
            .into();
        let name = event
            .attributes
            .and_then(attribute_name)
            .as_deref()
            .map(|n| n.trim_start_matches('/'))
            .filter(|n| !n.is_empty())
            .ok_or("no Actor.Attributes.name")?
            .to_owned();
        let event = Event {
            action,
            uid,
            name,
            attributes: event.attributes.map(Attributes::raw).unwrap_or_default(),
            time,
            cursor,
        };
        match self.known.event(&event) {
            Decision::Undecodable(reason) => Err(reason),
            decision => Ok(self.decided(event, decision)),
        }
    }

    /// Turns a decision about an event into a step.
    fn decided(&mut self, event: Event, decision: Decision) -> Step {
        let cursor = event.cursor;
        match decision {
            Decision::Skip => Step::Obs(Observation::Progress(cursor)),
            Decision::Report { kind, labels } => Step::Obs(Observation::Change(Change {
                at: event.at(),
                id: InstanceId::from(event.name),
                kind,
                uid: Some(event.uid),
                labels: Some(labels),
                cursor,
            })),
            Decision::Inspect(path) => Step::Inspect { event, path },
            Decision::Undecodable(reason) => {
                tracing::warn!(
                    provider = self.provider,
                    reason,
                    id = event.name(),
                    action = event.action(),
                    "skipping an undecodable event"
                );
                Step::Obs(Observation::Progress(cursor))
            }
        }
    }
}

/// The time of an event line (`timeNano`, else `time`), when it decodes.
pub(crate) fn line_time(line: &[u8]) -> Option<Cursor> {
    let line = line.trim_ascii();
    if line.is_empty() {
        return None;
    }
    Wire::decode(line).ok()?.time()
}

/// What lookout reads of an event line, borrowed from the line where it can:
/// a visitor over the line's object that skips every other field without
/// building it (the engine's events carry a dozen fields lookout does not
/// use). It reads each field as a lookup in the whole decoded document
/// would: a field of another JSON type than expected is there but unusable
/// (an `Action` that is a number does not fall back to `status`), a repeated
/// field counts by its last value, `Actor` is read only when it is an object.
#[derive(Default)]
struct Wire<'a> {
    r#type: Loose<'a>,
    action: Loose<'a>,
    status: Loose<'a>,
    id: Loose<'a>,
    time_nano: Option<i64>,
    time: Option<i64>,
    /// `Actor.ID`
    actor_id: Loose<'a>,
    /// `Actor.Attributes`, any JSON value.
    attributes: Option<&'a RawValue>,
}

impl<'a> Wire<'a> {
    /// Decodes a line; an error of the data category means valid JSON that
    /// is not an object.
    fn decode(line: &'a [u8]) -> Result<Self, serde_json::Error> {
        let mut de = serde_json::Deserializer::from_slice(line);
        let wire = de.deserialize_any(WireVisitor)?;
        de.end()?;
        Ok(wire)
    }

    /// `timeNano`, else `time` in seconds.
    fn time(&self) -> Option<Cursor> {
        if let Some(n) = self.time_nano {
            return Some(Cursor(n));
        }
        self.time?.checked_mul(1_000_000_000).map(Cursor)
    }
}

/// A field read as a string: missing, present as another JSON type, or a
/// string (borrowed from the line unless it has escapes).
#[derive(Default)]
enum Loose<'a> {
    #[default]
    Missing,
    Other,
    Str(Cow<'a, str>),
}

impl<'a> Loose<'a> {
    /// This field, or `other` when this one is missing.
    fn or(self, other: Self) -> Self {
        match self {
            Self::Missing => other,
            present => present,
        }
    }

    fn str(&self) -> Option<&str> {
        match self {
            Self::Str(s) => Some(s),
            Self::Missing | Self::Other => None,
        }
    }

    fn into_str(self) -> Option<Cow<'a, str>> {
        match self {
            Self::Str(s) => Some(s),
            Self::Missing | Self::Other => None,
        }
    }
}

/// The top-level fields lookout reads.
enum Key {
    Type,
    Action,
    Status,
    Id,
    TimeNano,
    Time,
    Actor,
    Other,
}

impl Key {
    fn of(key: &str) -> Self {
        match key {
            "Type" => Self::Type,
            "Action" => Self::Action,
            "status" => Self::Status,
            "id" => Self::Id,
            "timeNano" => Self::TimeNano,
            "time" => Self::Time,
            "Actor" => Self::Actor,
            _ => Self::Other,
        }
    }
}

/// A map key, borrowed from the line unless it has escapes.
struct MapKey<'a>(Cow<'a, str>);

impl<'de> de::Deserialize<'de> for MapKey<'de> {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = MapKey<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string key")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(MapKey(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(MapKey(Cow::Owned(v.to_owned())))
            }
        }
        d.deserialize_str(V)
    }
}

struct WireVisitor;

impl<'de> Visitor<'de> for WireVisitor {
    type Value = Wire<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an event object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Wire<'de>, A::Error> {
        let mut wire = Wire::default();
        while let Some(MapKey(key)) = map.next_key()? {
            match Key::of(&key) {
                Key::Type => wire.r#type = map.next_value()?,
                Key::Action => wire.action = map.next_value()?,
                Key::Status => wire.status = map.next_value()?,
                Key::Id => wire.id = map.next_value()?,
                Key::TimeNano => wire.time_nano = map.next_value::<LooseInt>()?.0,
                Key::Time => wire.time = map.next_value::<LooseInt>()?.0,
                Key::Actor => {
                    let Actor { id, attributes } = map.next_value()?;
                    (wire.actor_id, wire.attributes) = (id, attributes);
                }
                Key::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(wire)
    }
}

/// The visits of the JSON types a field visitor does not expect: the value
/// is skipped and the field reads as `$value`. Strings and numbers are each
/// visitor's own.
macro_rules! skip_other_types {
    ($value:expr) => {
        fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            Ok($value)
        }
    };
}

impl<'de> de::Deserialize<'de> for Loose<'de> {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Loose<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Loose::Str(Cow::Borrowed(v)))
            }
            // A string with escapes, unescaped into a scratch buffer.
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Loose::Str(Cow::Owned(v.to_owned())))
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
                Ok(Loose::Other)
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
                Ok(Loose::Other)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Loose::Other)
            }
            skip_other_types!(Loose::Other);
        }
        d.deserialize_any(V)
    }
}

/// A field read as an integer: `None` when missing, not an integer, or
/// out of `i64`'s range.
struct LooseInt(Option<i64>);

impl<'de> de::Deserialize<'de> for LooseInt {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = LooseInt;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
                Ok(LooseInt(Some(v)))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
                Ok(LooseInt(i64::try_from(v).ok()))
            }
            fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
                Ok(LooseInt(None))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(LooseInt(None))
            }
            skip_other_types!(LooseInt(None));
        }
        d.deserialize_any(V)
    }
}

/// `Actor`: its `ID` and `Attributes` when it is an object; nothing when it
/// is anything else.
#[derive(Default)]
struct Actor<'a> {
    id: Loose<'a>,
    attributes: Option<&'a RawValue>,
}

impl<'de> de::Deserialize<'de> for Actor<'de> {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Actor<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut actor = Actor::default();
                while let Some(MapKey(key)) = map.next_key()? {
                    match &*key {
                        "ID" => actor.id = map.next_value()?,
                        "Attributes" => actor.attributes = Some(map.next_value()?),
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(actor)
            }
            fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
                Ok(Actor::default())
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
                Ok(Actor::default())
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
                Ok(Actor::default())
            }
            skip_other_types!(Actor::default());
        }
        d.deserialize_any(V)
    }
}

/// `name` in the attributes' JSON text, when they are an object and it is a
/// string (the last one, if repeated).
fn attribute_name(attributes: &RawValue) -> Option<Cow<'_, str>> {
    struct V;
    impl<'de> Visitor<'de> for V {
        type Value = Option<Cow<'de, str>>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("any JSON value")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut name = None;
            while let Some(MapKey(key)) = map.next_key()? {
                if key == "name" {
                    name = map.next_value::<Loose<'de>>()?.into_str();
                } else {
                    map.next_value::<IgnoredAny>()?;
                }
            }
            Ok(name)
        }
        fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
            Ok(None)
        }
        skip_other_types!(None);
    }
    // The text was valid JSON when the line was decoded.
    serde_json::Deserializer::from_str(attributes.get())
        .deserialize_any(V)
        .ok()
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compat::History;
    use crate::compat::containers::KnownContainers;
    use crate::compat::host::Discovery;
    use crate::compat::mapping::Mapping;
    use lookout_core::EventKind;
    use std::time::{Duration, SystemTime};

    static TABLE: Mapping = Mapping {
        provider: "test",
        actions: &[
            ("create", EventKind::Created),
            ("start", EventKind::Started),
            ("die", EventKind::Stopped),
            ("destroy", EventKind::Removed),
        ],
        ignored: &["kill", "exec_start"],
        non_label_attributes: &["name", "image"],
        history: History::Until,
        discovery: Discovery {
            host_var: "LOOKOUT_TEST_HOST",
            sockets: &[],
        },
    };

    fn event(action: &str, uid: &str, name: &str, nanos: i64) -> String {
        format!(
            r#"{{"status":"{action}","id":"{uid}","Type":"container","Action":"{action}","Actor":{{"ID":"{uid}","Attributes":{{"image":"busybox","name":"{name}","app":"web"}}}},"scope":"local","time":{},"timeNano":{nanos}}}"#,
            nanos / 1_000_000_000
        )
    }

    fn feed(resume: Option<Cursor>, listed: &[Listed]) -> Feed<KnownContainers> {
        Feed::new(&TABLE, &Labels::new(), resume, listed)
    }

    /// The observations of steps that need no inspection.
    fn obs(out: &mut VecDeque<Step>) -> Vec<Obs> {
        out.drain(..)
            .map(|s| match s {
                Step::Obs(o) => o,
                Step::Inspect { path, .. } => panic!("a container needs no inspection: {path}"),
            })
            .collect()
    }

    /// Feeds `lines`, each ended by `\n`, as one chunk.
    fn feed_lines(feed: &mut Feed<KnownContainers>, lines: &[String]) -> Vec<Obs> {
        let mut out = VecDeque::new();
        feed.push((lines.join("\n") + "\n").as_bytes(), &mut out);
        obs(&mut out)
    }

    fn change(obs: &Obs) -> (&str, EventKind, i64) {
        match obs {
            Observation::Change(c) => (
                c.id.as_str(),
                c.kind,
                c.cursor.map_or(-1, Cursor::unix_nanos),
            ),
            other => panic!("not a change: {other:?}"),
        }
    }

    #[test]
    fn decodes_a_lifecycle_with_labels_from_create() {
        let mut feed = feed(None, &[]);
        let out = feed_lines(
            &mut feed,
            &[
                event("create", "c1", "/web", 10),
                event("start", "c1", "web", 20),
                event("kill", "c1", "web", 25),
                event("die", "c1", "web", 30),
                event("destroy", "c1", "web", 40),
            ],
        );
        assert_eq!(out.len(), 5);
        assert_eq!(change(&out[0]), ("web", EventKind::Created, 10));
        assert_eq!(change(&out[1]), ("web", EventKind::Started, 20));
        assert_eq!(out[2], Observation::Progress(Some(Cursor(25))));
        assert_eq!(change(&out[3]), ("web", EventKind::Stopped, 30));
        assert_eq!(change(&out[4]), ("web", EventKind::Removed, 40));
        let Observation::Change(c) = &out[0] else {
            unreachable!()
        };
        assert_eq!(
            c.labels.as_deref(),
            Some(&Labels::from([("app".into(), "web".into())]))
        );
        assert_eq!(c.uid.as_deref(), Some("c1"));
        assert_eq!(c.at, SystemTime::UNIX_EPOCH + Duration::from_nanos(10));
        assert!(
            feed.known.containers.is_empty(),
            "destroy forgets the container"
        );
    }

    #[test]
    fn lines_split_across_chunks_and_blank_lines() {
        let mut feed = feed(None, &[]);
        let line = event("create", "c1", "web", 10) + "\n\n";
        let (a, b) = line.split_at(17);
        let mut out = VecDeque::new();
        feed.push(a.as_bytes(), &mut out);
        assert!(out.is_empty());
        feed.push(b.as_bytes(), &mut out);
        assert_eq!(out.len(), 1);
        // A last line without a newline is decoded when the body ends.
        feed.push(event("start", "c1", "web", 20).as_bytes(), &mut out);
        assert_eq!(out.len(), 1);
        feed.finish(&mut out);
        let out = obs(&mut out);
        assert_eq!(change(&out[1]), ("web", EventKind::Started, 20));
    }

    #[test]
    fn poison_is_skipped_and_the_cursor_advances_when_it_can() {
        let mut feed = feed(None, &[]);
        let out = feed_lines(
            &mut feed,
            &[
            "{this is not json".to_owned(),
            "[1,2]".to_owned(),
            r#"{"Type":"container","Action":"start"}"#.to_owned(),
            r#"{"Type":"martian","Action":"land","timeNano":5}"#.to_owned(),
            r#"{"Action":"start","timeNano":6}"#.to_owned(),
            r#"{"Type":"container","timeNano":7}"#.to_owned(),
            r#"{"Type":"container","Action":"start","timeNano":8}"#.to_owned(),
            r#"{"Type":"container","Action":"start","Actor":{"ID":"c1"},"timeNano":9}"#
                .to_owned(),
            r#"{"Type":"container","Action":"start","Actor":{"ID":"c1","Attributes":{"name":7}},"timeNano":10}"#
                .to_owned(),
            "\u{0}\u{1}binary".to_owned(),
            event("create", "c1", "web", 11),
            ],
        );
        let progress: Vec<Option<i64>> = out[..out.len() - 1]
            .iter()
            .map(|o| match o {
                Observation::Progress(c) => c.map(Cursor::unix_nanos),
                other => panic!("not progress: {other:?}"),
            })
            .collect();
        assert_eq!(
            progress,
            [
                None,
                None,
                None,
                Some(5),
                Some(6),
                Some(7),
                Some(8),
                Some(9),
                Some(10),
                None
            ]
        );
        assert_eq!(change(&out[out.len() - 1]), ("web", EventKind::Created, 11));
    }

    /// The line decoder reads each field as a lookup in the whole document
    /// would (the decoder before it built that document).
    #[test]
    fn fields_are_read_as_a_lookup_in_the_document() {
        let mut feed = feed(None, &[]);
        let attrs = r#""Attributes":{"name":"web","app":"x"}"#;
        let out = feed_lines(
            &mut feed,
            &[
                // A string with escapes; unknown fields of every JSON type skipped.
                r#"{"Type":"cont\u0061iner","Action":"cr\u0065ate","x":[1,{"a":null}],"y":{"z":[true]},"w":1.5,"Actor":{"ID":"c\/1","Attributes":{"name":"\/w\u0065b","app":"x"}},"timeNano":1}"#.to_owned(),
                // `Action` present but not a string: no fall-back to `status`.
                format!(r#"{{"Type":"container","Action":7,"status":"start","Actor":{{"ID":"c/1",{attrs}}},"timeNano":2}}"#),
                // `Action` missing: `status`; `Actor` not an object: `id`,
                // but no attributes, so no name: poison, with its cursor.
                r#"{"Type":"container","status":"start","Actor":[1],"id":"c/1","timeNano":3}"#.to_owned(),
                // `Actor` without `ID`: `id`, and its attributes.
                format!(r#"{{"Type":"container","status":"start","id":"c/1","Actor":{{{attrs}}},"timeNano":4}}"#),
                // A repeated field counts by its last value.
                format!(r#"{{"Type":"container","Action":"create","Action":"start","Actor":{{"ID":"c/1",{attrs}}},"timeNano":5}}"#),
                // `timeNano` beyond i64 (or not an integer): `time` in seconds.
                format!(r#"{{"Type":"container","Action":"die","Actor":{{"ID":"c/1",{attrs}}},"timeNano":18446744073709551615,"time":6}}"#),
                format!(r#"{{"Type":"container","Action":"start","Actor":{{"ID":"c/1",{attrs}}},"timeNano":"7","time":7}}"#),
                // Attributes not an object: no name.
                r#"{"Type":"container","Action":"die","Actor":{"ID":"c/1","Attributes":["name","web"]},"timeNano":8000000000}"#.to_owned(),
                // Trailing garbage after the object: not JSON.
                format!(r#"{{"Type":"container","Action":"die","Actor":{{"ID":"c/1",{attrs}}},"timeNano":8000000001}} x"#),
                format!(r#"{{"Type":"container","Action":"die","Actor":{{"ID":"c/1",{attrs}}},"timeNano":8000000002}}"#),
            ],
        );
        let summary: Vec<String> = out
            .iter()
            .map(|o| match o {
                Observation::Progress(c) => format!("progress {:?}", c.map(Cursor::unix_nanos)),
                Observation::Change(c) => format!(
                    "{} {:?} {} {} {:?}",
                    c.id.as_str(),
                    c.kind,
                    c.uid.as_deref().unwrap_or("-"),
                    c.cursor.map_or(0, Cursor::unix_nanos),
                    c.labels
                        .as_deref()
                        .map(|l| l.keys().cloned().collect::<Vec<_>>())
                ),
                other => format!("{other:?}"),
            })
            .collect();
        assert_eq!(
            summary,
            [
                r#"web Created c/1 1 Some(["app"])"#,
                "progress Some(2)",
                "progress Some(3)",
                r#"web Started c/1 4 Some(["app"])"#,
                r#"web Started c/1 5 Some(["app"])"#,
                r#"web Stopped c/1 6000000000 Some(["app"])"#,
                r#"web Started c/1 7000000000 Some(["app"])"#,
                "progress Some(8000000000)",
                "progress None",
                r#"web Stopped c/1 8000000002 Some(["app"])"#,
            ]
        );
        let created = match &out[0] {
            Observation::Change(c) => c.labels.clone(),
            other => panic!("not a change: {other:?}"),
        };
        let started = match &out[4] {
            Observation::Change(c) => c.labels.clone(),
            other => panic!("not a change: {other:?}"),
        };
        // One label map per container, shared by its events.
        assert!(Arc::ptr_eq(
            &created.expect("labels"),
            &started.expect("labels")
        ));
    }

    #[test]
    fn an_overlong_line_is_skipped_once() {
        let mut feed = feed(None, &[]);
        let mut out = VecDeque::new();
        let junk = vec![b'x'; MAX_LINE / 2 + 1];
        feed.push(&junk, &mut out);
        assert!(out.is_empty());
        feed.push(&junk, &mut out);
        assert_eq!(obs(&mut out), [Observation::Progress(None)]);
        feed.push(&junk, &mut out);
        feed.push(
            format!("xx\n{}\n", event("create", "c1", "web", 3)).as_bytes(),
            &mut out,
        );
        let out = obs(&mut out);
        assert_eq!(out.len(), 1, "{out:?}");
        assert_eq!(change(&out[0]), ("web", EventKind::Created, 3));
    }

    #[test]
    fn events_older_than_the_resume_point_are_dropped() {
        let mut feed = feed(Some(Cursor(100)), &[]);
        let out = feed_lines(
            &mut feed,
            &[
                event("create", "c1", "web", 99),
                // The event at the cursor itself was seen: Docker's `since`
                // is inclusive.
                event("create", "c2", "db", 100),
                event("create", "c3", "db", 101),
            ],
        );
        assert_eq!(out[0], Observation::Progress(None));
        assert_eq!(out[1], Observation::Progress(None));
        assert_eq!(change(&out[2]), ("db", EventKind::Created, 101));
    }

    #[test]
    fn events_of_containers_gone_before_the_snapshot_are_dropped() {
        let listed = [Listed {
            id: "kept".into(),
            running: true,
            uid: Some("k1".into()),
            labels: Labels::from([("from".into(), "list".into())]),
        }];
        let mut feed = feed(Some(Cursor(1)), &listed);
        let out = feed_lines(
            &mut feed,
            &[
                // `gone` died and was destroyed before the list: stale.
                event("die", "g1", "gone", 10),
                event("destroy", "g1", "gone", 11),
                // `kept` was listed: its labels come from the list.
                event("die", "k1", "kept", 12),
                // `brief` lived and died entirely after the cursor: all of it passes.
                event("create", "b1", "brief", 13),
                event("destroy", "b1", "brief", 14),
                // A replayed destroy of `brief` after it was forgotten: stale.
                event("destroy", "b1", "brief", 14),
            ],
        );
        assert_eq!(out[0], Observation::Progress(Some(Cursor(10))));
        assert_eq!(out[1], Observation::Progress(Some(Cursor(11))));
        assert_eq!(change(&out[2]), ("kept", EventKind::Stopped, 12));
        let Observation::Change(c) = &out[2] else {
            unreachable!()
        };
        assert_eq!(c.labels.as_deref(), Some(&listed[0].labels));
        assert_eq!(change(&out[3]), ("brief", EventKind::Created, 13));
        assert_eq!(change(&out[4]), ("brief", EventKind::Removed, 14));
        assert_eq!(out[5], Observation::Progress(Some(Cursor(14))));
    }

    #[test]
    fn the_cursor_never_moves_back() {
        let mut feed = feed(None, &[]);
        let out = feed_lines(
            &mut feed,
            &[
                event("create", "c1", "web", 50),
                // A bogus old time (poison or a clock step): passed, cursor kept.
                r#"{"Type":"container","Action":"start","timeNano":1}"#.to_owned(),
                event("start", "c1", "web", 40),
                event("die", "c1", "web", 60),
            ],
        );
        assert_eq!(change(&out[0]), ("web", EventKind::Created, 50));
        assert_eq!(out[1], Observation::Progress(None));
        assert_eq!(change(&out[2]), ("web", EventKind::Started, -1));
        assert_eq!(change(&out[3]), ("web", EventKind::Stopped, 60));
    }

    #[test]
    fn since_is_a_microsecond_before_the_cursor() {
        assert_eq!(
            Cursor(1_796_012_924_361_184_687).since(),
            "1796012924.361183687"
        );
        assert_eq!(Cursor(1_000_000_500).since(), "0.999999500");
        assert_eq!(Cursor(10).since(), "0.000000000");
    }

    /// A kind without a reliable history whose every event needs
    /// an inspection: the object's `{"running": bool}`.
    #[derive(Debug)]
    struct Inspected;

    struct KnownInspected;

    impl Objects for Inspected {
        type Known = KnownInspected;
        fn provider(&self) -> &'static str {
            "test"
        }
        fn discovery(&self) -> &Discovery {
            &TABLE.discovery
        }
        fn event_type(&self) -> &'static str {
            "thing"
        }
        fn actions(&self) -> Vec<&'static str> {
            Vec::new()
        }
        fn labels_in_events(&self) -> bool {
            false
        }
        fn list_path(&self) -> &'static str {
            "/things"
        }
        fn parse_list(&self, _body: &[u8]) -> Result<Vec<Listed>, String> {
            Ok(Vec::new())
        }
        fn history(&self) -> History {
            History::Unreliable
        }
        fn known(&'static self, _labels: &Labels, _listed: &[Listed]) -> KnownInspected {
            KnownInspected
        }
    }

    impl KnownObjects for KnownInspected {
        fn event(&mut self, event: &Event) -> Decision {
            Decision::Inspect(format!("/things/{}", event.uid()))
        }
        fn inspected(&mut self, event: &Event, object: Option<&Value>) -> Decision {
            match object.map(|o| o.get("running").and_then(Value::as_bool)) {
                None => Decision::Skip,
                Some(None) => Decision::Inspect(format!("/things/{}", event.uid())),
                Some(Some(running)) => Decision::Report {
                    kind: if running {
                        EventKind::Started
                    } else {
                        EventKind::Stopped
                    },
                    labels: Arc::new(Labels::new()),
                },
            }
        }
    }

    fn thing(uid: &str, nanos: i64) -> String {
        format!(
            r#"{{"Type":"thing","Action":"update","Actor":{{"ID":"{uid}","Attributes":{{"name":"{uid}"}}}},"timeNano":{nanos}}}"#
        )
    }

    /// The events of `lines` that pass, each inspected as `object`.
    fn inspect_all(
        feed: &mut Feed<KnownInspected>,
        lines: &[String],
        object: &Result<Option<Value>, String>,
    ) -> Vec<Obs> {
        let mut out = VecDeque::new();
        feed.push((lines.join("\n") + "\n").as_bytes(), &mut out);
        out.into_iter()
            .map(|s| match s {
                Step::Obs(o) => o,
                Step::Inspect { event, path } => {
                    assert_eq!(path, format!("/things/{}", event.uid()));
                    let object = object.as_ref().map(Option::as_ref).map_err(String::clone);
                    feed.inspected(event, object)
                }
            })
            .collect()
    }

    #[test]
    fn an_inspection_decides_or_costs_the_event_only() {
        let mut feed = Feed::new(&Inspected, &Labels::new(), None, &[]);
        let stopped = Ok(Some(serde_json::json!({"running": false})));
        let out = inspect_all(&mut feed, &[thing("a", 10)], &stopped);
        assert_eq!(change(&out[0]), ("a", EventKind::Stopped, 10));
        let Observation::Change(c) = &out[0] else {
            unreachable!()
        };
        assert_eq!(c.uid.as_deref(), Some("a"));
        // Gone meanwhile, an unusable answer, a second inspection: skipped,
        // the cursor moves on.
        for (object, nanos) in [
            (Ok(None), 11),
            (Err("GET /things/a answered 500: boom".to_owned()), 12),
            (Ok(Some(serde_json::json!({"state": "?"}))), 13),
        ] {
            let out = inspect_all(&mut feed, &[thing("a", nanos)], &object);
            assert_eq!(out, [Observation::Progress(Some(Cursor(nanos)))]);
        }
        // Another type is skipped without an inspection.
        let other = r#"{"Type":"container","Action":"start","Actor":{"ID":"x","Attributes":{"name":"x"}},"timeNano":20}"#;
        let out = inspect_all(&mut feed, &[other.to_owned()], &stopped);
        assert_eq!(out, [Observation::Progress(Some(Cursor(20)))]);
    }
}
