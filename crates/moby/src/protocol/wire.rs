//! The lenient wire decoding of one `/events` line: what lookout reads of
//! an event, borrowed from the line where it can, every other field skipped
//! without being built.
//!
//! Each field is read as a lookup in the whole decoded document would read
//! it: a field of another JSON type than expected is there but unusable (an
//! `Action` that is a number does not fall back to `status`), a repeated
//! field counts by its last value, `Actor` is read only when it is an
//! object. One generic visitor ([`Or`]) serves every field: the JSON shape
//! the field's type accepts, or anything else skipped.
//!
//! The feed reads a line here only when `line_scan`'s hand scan gives up on
//! it (an unusual line); what this reads is the reference that scan is
//! tested against.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use serde::Deserializer as _;
use serde::de::{self, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;

use super::cursor::Cursor;

/// What lookout reads of an event line.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Wire<'a> {
    pub(crate) r#type: Loose<'a>,
    pub(crate) action: Loose<'a>,
    pub(crate) status: Loose<'a>,
    pub(crate) id: Loose<'a>,
    pub(crate) time_nano: Option<i64>,
    pub(crate) time: Option<i64>,
    /// `Actor.ID`
    pub(crate) actor_id: Loose<'a>,
    /// `Actor.Attributes`, any JSON value: its text (as `serde_json`'s
    /// `RawValue` spans it: from its first byte to its last).
    pub(crate) attributes: Option<&'a str>,
}

impl<'a> Wire<'a> {
    /// Decodes a line; an error of the data category means valid JSON that
    /// is not an object.
    pub(crate) fn decode(line: &'a [u8]) -> Result<Self, serde_json::Error> {
        let mut de = serde_json::Deserializer::from_slice(line);
        let wire = de.deserialize_any(WireVisitor)?;
        de.end()?;
        Ok(wire)
    }

    /// `timeNano`, else `time` in seconds.
    pub(crate) fn time(&self) -> Option<Cursor> {
        if let Some(n) = self.time_nano {
            return Some(Cursor::from_unix_nanos(n));
        }
        self.time?
            .checked_mul(1_000_000_000)
            .map(Cursor::from_unix_nanos)
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

/// `name` in the attributes' JSON text, when they are an object and it is a
/// string (the last one, if repeated).
pub(crate) fn attribute_name(attributes: &str) -> Option<Cow<'_, str>> {
    // The text was valid JSON when the line was decoded.
    let mut de = serde_json::Deserializer::from_str(attributes);
    de::Deserialize::deserialize(&mut de)
        .ok()
        .and_then(|Or(Name(name))| name)
}

/// The exit code in the attributes' JSON text of a `die`: Docker's
/// `exitCode`, else Podman's `containerExitCode` (a string each), read
/// without decoding the other attributes (a container's labels).
pub(crate) fn attribute_exit_code(attributes: &str) -> Option<i32> {
    // The text was valid JSON when the line was decoded.
    let mut de = serde_json::Deserializer::from_str(attributes);
    let Or(ExitCode { docker, podman }) = de::Deserialize::deserialize(&mut de).ok()?;
    docker.or(podman)?.trim().parse().ok()
}

/// A field read as a string: missing, present as another JSON type, or a
/// string (borrowed from the line unless it has escapes).
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) enum Loose<'a> {
    #[default]
    Missing,
    Other,
    Str(Cow<'a, str>),
}

impl<'a> Loose<'a> {
    /// This field, or `other` when this one is missing.
    pub(crate) fn or(self, other: Self) -> Self {
        match self {
            Self::Missing => other,
            present => present,
        }
    }

    pub(crate) fn str(&self) -> Option<&str> {
        match self {
            Self::Str(s) => Some(s),
            Self::Missing | Self::Other => None,
        }
    }

    pub(crate) fn into_str(self) -> Option<Cow<'a, str>> {
        match self {
            Self::Str(s) => Some(s),
            Self::Missing | Self::Other => None,
        }
    }
}

/// A value read leniently: the JSON shapes the type accepts (each `from_*`
/// answers `None` by default), else [`skipped`](Self::skipped), the value
/// being skipped whatever it is.
trait Lenient<'de>: Sized {
    /// The value for any JSON value of a shape the type does not accept.
    fn skipped() -> Self;

    fn from_str(_: Cow<'de, str>) -> Option<Self> {
        None
    }

    fn from_i64(_: i64) -> Option<Self> {
        None
    }

    /// Reads an object; the default skips it.
    fn from_map<A: MapAccess<'de>>(mut map: A) -> Result<Option<Self>, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(None)
    }
}

/// Deserializes a [`Lenient`] value: never fails on a JSON value of another
/// type than expected (only on JSON that is not well formed).
struct Or<T>(T);

impl<'de, T: Lenient<'de>> de::Deserialize<'de> for Or<T> {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(OrVisitor(PhantomData))
    }
}

struct OrVisitor<T>(PhantomData<T>);

impl<T> OrVisitor<T> {
    fn or_skipped<'de>(v: Option<T>) -> Or<T>
    where
        T: Lenient<'de>,
    {
        Or(v.unwrap_or_else(T::skipped))
    }
}

impl<'de, T: Lenient<'de>> Visitor<'de> for OrVisitor<T> {
    type Value = Or<T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Self::or_skipped(T::from_str(Cow::Borrowed(v))))
    }
    // A string with escapes, unescaped into a scratch buffer.
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Self::or_skipped(T::from_str(Cow::Owned(v.to_owned()))))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        Ok(Self::or_skipped(T::from_i64(v)))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        Ok(Self::or_skipped(
            i64::try_from(v).ok().and_then(T::from_i64),
        ))
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        T::from_map(map).map(Self::or_skipped)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Self::or_skipped(None))
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Ok(Self::or_skipped(None))
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
        Ok(Self::or_skipped(None))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Self::or_skipped(None))
    }
}

impl<'de> Lenient<'de> for Loose<'de> {
    fn skipped() -> Self {
        Loose::Other
    }
    fn from_str(s: Cow<'de, str>) -> Option<Self> {
        Some(Loose::Str(s))
    }
}

/// A field read as an integer: `None` when not an integer, or out of
/// `i64`'s range.
impl Lenient<'_> for Option<i64> {
    fn skipped() -> Self {
        None
    }
    fn from_i64(v: i64) -> Option<Self> {
        Some(Some(v))
    }
}

/// `Actor`: its `ID` and `Attributes` when it is an object; nothing when it
/// is anything else.
#[derive(Default)]
struct Actor<'a> {
    id: Loose<'a>,
    attributes: Option<&'a str>,
}

impl<'de> Lenient<'de> for Actor<'de> {
    fn skipped() -> Self {
        Actor::default()
    }
    fn from_map<A: MapAccess<'de>>(mut map: A) -> Result<Option<Self>, A::Error> {
        let mut actor = Actor::default();
        while let Some(MapKey(key)) = map.next_key()? {
            match &*key {
                "ID" => actor.id = map.next_value::<Or<Loose<'de>>>()?.0,
                "Attributes" => {
                    actor.attributes = Some(map.next_value::<&'de RawValue>()?.get());
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(Some(actor))
    }
}

/// The `name` of an attributes object.
struct Name<'a>(Option<Cow<'a, str>>);

impl<'de> Lenient<'de> for Name<'de> {
    fn skipped() -> Self {
        Name(None)
    }
    fn from_map<A: MapAccess<'de>>(mut map: A) -> Result<Option<Self>, A::Error> {
        let mut name = None;
        while let Some(MapKey(key)) = map.next_key()? {
            if key == "name" {
                name = map.next_value::<Or<Loose<'de>>>()?.0.into_str();
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(Some(Name(name)))
    }
}

/// The exit codes of an attributes object.
#[derive(Default)]
struct ExitCode<'a> {
    docker: Option<Cow<'a, str>>,
    podman: Option<Cow<'a, str>>,
}

impl<'de> Lenient<'de> for ExitCode<'de> {
    fn skipped() -> Self {
        ExitCode::default()
    }
    fn from_map<A: MapAccess<'de>>(mut map: A) -> Result<Option<Self>, A::Error> {
        let mut codes = ExitCode::default();
        while let Some(MapKey(key)) = map.next_key()? {
            match &*key {
                "exitCode" => codes.docker = map.next_value::<Or<Loose<'de>>>()?.0.into_str(),
                "containerExitCode" => {
                    codes.podman = map.next_value::<Or<Loose<'de>>>()?.0.into_str();
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(Some(codes))
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

/// The event object itself: an error (of the data category) when the line
/// is JSON but not an object.
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
                Key::Type => wire.r#type = map.next_value::<Or<_>>()?.0,
                Key::Action => wire.action = map.next_value::<Or<_>>()?.0,
                Key::Status => wire.status = map.next_value::<Or<_>>()?.0,
                Key::Id => wire.id = map.next_value::<Or<_>>()?.0,
                Key::TimeNano => wire.time_nano = map.next_value::<Or<_>>()?.0,
                Key::Time => wire.time = map.next_value::<Or<_>>()?.0,
                Key::Actor => {
                    let Actor { id, attributes } = map.next_value::<Or<_>>()?.0;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_of_another_type_are_there_but_unusable() {
        let w = Wire::decode(
            br#"{"Type":"container","Action":7,"status":"start","id":[1],"timeNano":"5","time":6,"Actor":"x"}"#,
        )
        .expect("an object");
        assert_eq!(w.r#type.str(), Some("container"));
        assert!(matches!(w.action, Loose::Other));
        assert!(matches!(w.id, Loose::Other));
        assert_eq!(w.time(), Some(Cursor::from_unix_nanos(6_000_000_000)));
        assert!(w.actor_id.str().is_none() && w.attributes.is_none());
        // A present field does not fall back to the legacy one.
        assert!(w.action.or(w.status).str().is_none());
        // Not an object: an error of the data category.
        assert!(Wire::decode(b"[1]").is_err_and(|e| e.is_data()));
        assert!(Wire::decode(b"{").is_err_and(|e| !e.is_data()));
    }

    #[test]
    fn the_legacy_fields_are_read_when_their_successors_are_missing() {
        let w = Wire::decode(
            br#"{"status":"st\u0061rt","id":"abc","Type":"container","Actor":{"Attributes":{}}}"#,
        )
        .expect("an object");
        assert_eq!(w.action.or(w.status).str(), Some("start"));
        assert_eq!(w.actor_id.or(w.id).str(), Some("abc"));
        let w = Wire::decode(br#"{"status":7,"id":{"a":1},"Action":"die","Actor":{"ID":"x"}}"#)
            .expect("an object");
        assert_eq!(w.action.or(w.status).str(), Some("die"));
        assert_eq!(w.actor_id.or(w.id).str(), Some("x"));
        let w = Wire::decode(br#"{"status":7,"id":{"a":1}}"#).expect("an object");
        assert!(matches!(w.status, Loose::Other) && matches!(w.id, Loose::Other));
    }

    #[test]
    fn the_exit_code_is_read_without_the_rest() {
        let code = |json: &str| {
            let raw: Box<RawValue> = serde_json::from_str(json).expect("json");
            attribute_exit_code(raw.get())
        };
        assert_eq!(
            code(r#"{"a":{"b":[1]},"exitCode":"137","name":"web"}"#),
            Some(137)
        );
        // Podman sends both (its containerExitCode on every event).
        assert_eq!(code(r#"{"containerExitCode":"0","exitCode":"3"}"#), Some(3));
        assert_eq!(code(r#"{"containerExitCode":"7"}"#), Some(7));
        assert_eq!(code(r#"{"exitCode":3}"#), None);
        assert_eq!(code(r#"{"exitCode":"x"}"#), None);
        assert_eq!(code(r#"{"name":"web"}"#), None);
        assert_eq!(code("[1]"), None);
    }

    #[test]
    fn the_attributes_name_is_read_leniently() {
        let name = |json: &str| {
            let raw: Box<RawValue> = serde_json::from_str(json).expect("json");
            attribute_name(raw.get()).map(Cow::into_owned)
        };
        assert_eq!(
            name(r#"{"name":"web","x":[1,{"a":null}]}"#).as_deref(),
            Some("web")
        );
        assert_eq!(name(r#"{"name":"a","name":"b"}"#).as_deref(), Some("b"));
        assert_eq!(name(r#"{"name":"\/w\u0065b"}"#).as_deref(), Some("/web"));
        assert_eq!(name(r#"{"name":7}"#), None);
        assert_eq!(name(r#"["name","web"]"#), None);
        assert_eq!(name("null"), None);
    }

    #[test]
    fn times() {
        let t = |json: &[u8]| Wire::decode(json).expect("an object").time();
        assert_eq!(
            t(br#"{"timeNano":5,"time":9}"#),
            Some(Cursor::from_unix_nanos(5))
        );
        // Beyond i64: `time` in seconds.
        assert_eq!(
            t(br#"{"timeNano":18446744073709551615,"time":2}"#),
            Some(Cursor::from_unix_nanos(2_000_000_000))
        );
        assert_eq!(t(br#"{"time":1.5}"#), None);
        assert_eq!(t(br#"{"time":9223372036854775807}"#), None);
        assert_eq!(line_time(b"  \n"), None);
        assert_eq!(
            line_time(br#" {"timeNano":3} "#),
            Some(Cursor::from_unix_nanos(3))
        );
    }
}
