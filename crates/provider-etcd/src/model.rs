//! The key/value model of instance state in etcd: what a publisher writes
//! (`lookout … --publish etcd://…`) and this provider reads back. Keys live
//! under one prefix `PREFIX` (default [`DEFAULT_PREFIX`]):
//!
//! | key | value | lease |
//! |---|---|---|
//! | `PREFIX/i/SOURCE/INSTANCE` | a [`Record`] (JSON): the instance's state and its last transition | none; a removal's tombstone: a long one (24 h), so that tombstones do not pile up |
//! | `PREFIX/s/SOURCE` | the publisher's status (JSON: `connected`, `provider`, `writer`, `at`; readers take `writer`) | a short one the publisher keeps alive (10 s, renewed every 3 s): absent means that source is disconnected (the publisher is dead, cut from etcd, or without its engine) |
//!
//! `SOURCE` names the engine a publisher watches (a host name by default; no
//! `/`), `INSTANCE` is the provider's instance id (which may hold `/`, as
//! Kubernetes' `deployment/NAMESPACE/NAME`). One key per instance: a
//! transition overwrites it, a removal writes a tombstone
//! ([`State::Removed`]) rather than deleting the key, so that a reader
//! that resumes its watch learns the removal with its origin and time
//! (the deletion when the tombstone's lease expires is of an instance
//! already gone).
//!
//! ```json
//! {"provider":"docker","state":"running","ready":true,"uid":"4f1c…","labels":{"app":"web"},
//!  "event":{"kind":"started","origin":"live","at":"2026-12-03T10:02:37.123456789Z"},
//!  "writer":"lookout/0.1.0 host-a 4242"}
//! ```

use lookout_core::Labels;
use serde::{Deserialize, Serialize};
use std::time::SystemTime;

use crate::error::ConfigError;

/// The prefix when none is given.
pub const DEFAULT_PREFIX: &str = "lookout";

/// The state of an instance a record tells.
///
/// Exhaustive: an instance exists and runs, exists and does not, or is
/// gone. A record that says more (readiness, a pause) does it with another
/// field, which readers of older versions skip; a new state would make
/// them refuse the record, so the format does not grow that way.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    /// It exists and runs.
    Running,
    /// It exists and does not run.
    Stopped,
    /// It is gone: a tombstone.
    Removed,
}

/// The transition that wrote a record, as the publisher learnt it
/// ([`RecordEvent::new`]; `#[non_exhaustive]`: a field may be added).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct RecordEvent {
    /// `created`, `started`, `stopped`, `removed`, `ready`, `unready`.
    pub kind: String,
    /// `live` or `resync` (`initial` is read as `resync`): a transition the
    /// publisher found by a resync stays `resync` for its readers.
    pub origin: String,
    /// When it happened (RFC 3339; for a resync: when it was found).
    pub at: String,
}

/// The value of `PREFIX/i/SOURCE/INSTANCE` ([`Record::new`], then its
/// fields; `#[non_exhaustive]`: a field may be added, with a default for
/// the records written before it).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Record {
    /// The publisher's provider: `docker`, `podman`, `swarm`, `k8s`.
    pub provider: String,
    /// Running, stopped, or removed (a tombstone).
    pub state: State,
    /// With readiness watched by the publisher, whether the running instance
    /// can serve.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready: Option<bool>,
    /// The engine's identity of the incarnation (container id, object uid).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    /// Its labels.
    #[serde(default)]
    pub labels: Labels,
    /// The transition that wrote it.
    pub event: RecordEvent,
    /// Who wrote it (free-form: program, host, pid).
    #[serde(default)]
    pub writer: String,
}

impl RecordEvent {
    /// The transition `kind` (`started`, …) found with `origin` (`live`,
    /// `resync`) at `at` (RFC 3339).
    pub fn new(kind: impl Into<String>, origin: impl Into<String>, at: impl Into<String>) -> Self {
        Self {
            kind: kind.into(),
            origin: origin.into(),
            at: at.into(),
        }
    }
}

impl Record {
    /// A record of `provider`'s instance in `state`, written by `event`;
    /// no readiness, no uid, no labels, no writer (set the fields).
    pub fn new(provider: impl Into<String>, state: State, event: RecordEvent) -> Self {
        Self {
            provider: provider.into(),
            state,
            ready: None,
            uid: None,
            labels: Labels::new(),
            event,
            writer: String::new(),
        }
    }

    /// Decodes a value.
    pub fn from_json(value: &[u8]) -> Result<Self, serde_json::Error> {
        serde_json::from_slice(value)
    }

    /// Whether the publisher found this transition by a snapshot (`resync`,
    /// or `initial`: to its readers, both are what a resync found).
    pub fn is_resync(&self) -> bool {
        matches!(self.event.origin.as_str(), "resync" | "initial")
    }

    /// When the transition happened, when `event.at` is RFC 3339.
    pub fn at(&self) -> Option<SystemTime> {
        parse_rfc3339(&self.event.at)
    }
}

/// Checks a prefix (no trailing `/`, not empty) and returns it without
/// trailing slashes.
pub fn check_prefix(prefix: &str) -> Result<&str, ConfigError> {
    let p = prefix.trim_end_matches('/');
    if p.is_empty() {
        return Err(ConfigError::Name {
            what: "prefix",
            value: prefix.to_owned(),
            why: "it is empty",
        });
    }
    Ok(p)
}

/// Checks a source name: not empty, no `/`.
pub fn check_source(source: &str) -> Result<(), ConfigError> {
    let why = if source.is_empty() {
        "it is empty"
    } else if source.contains('/') {
        "it holds a `/`"
    } else {
        return Ok(());
    };
    Err(ConfigError::Name {
        what: "source",
        value: source.to_owned(),
        why,
    })
}

/// `PREFIX/i/`: where every source's instances are.
pub fn instances_prefix(prefix: &str) -> String {
    format!("{prefix}/i/")
}

/// `PREFIX/i/SOURCE/`: where one source's instances are.
pub fn source_prefix(prefix: &str, source: &str) -> String {
    format!("{prefix}/i/{source}/")
}

/// `PREFIX/i/SOURCE/INSTANCE`.
pub fn instance_key(prefix: &str, source: &str, instance: &str) -> String {
    format!("{prefix}/i/{source}/{instance}")
}

/// `PREFIX/s/SOURCE`: the publisher's status.
pub fn status_key(prefix: &str, source: &str) -> String {
    format!("{prefix}/s/{source}")
}

/// `PREFIX/s/`: where every publisher's status is.
pub fn statuses_prefix(prefix: &str) -> String {
    format!("{prefix}/s/")
}

/// The source of a status key under `prefix`.
pub fn parse_status_key<'k>(prefix: &str, key: &'k [u8]) -> Option<&'k str> {
    let key = std::str::from_utf8(key).ok()?;
    let source = key.strip_prefix(prefix)?.strip_prefix("/s/")?;
    (!source.is_empty() && !source.contains('/')).then_some(source)
}

/// The source and instance of an instance key under `prefix`.
pub fn parse_instance_key<'k>(prefix: &str, key: &'k [u8]) -> Option<(&'k str, &'k str)> {
    let key = std::str::from_utf8(key).ok()?;
    let rest = key.strip_prefix(prefix)?.strip_prefix("/i/")?;
    let (source, instance) = rest.split_once('/')?;
    (!source.is_empty() && !instance.is_empty()).then_some((source, instance))
}

/// Parses RFC 3339 (`2026-12-03T10:02:37.123Z`, `…+01:00`; up to
/// nanoseconds) to a time: [`lookout_core::rfc3339::parse`].
#[must_use]
pub fn parse_rfc3339(text: &str) -> Option<SystemTime> {
    lookout_core::rfc3339::parse(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn keys() {
        assert_eq!(instance_key("p", "h", "web"), "p/i/h/web");
        assert_eq!(
            parse_instance_key("p", b"p/i/h/deployment/ns/web"),
            Some(("h", "deployment/ns/web"))
        );
        assert_eq!(parse_instance_key("p", b"p/s/h"), None);
        assert_eq!(parse_instance_key("p", b"p/i/h/"), None);
        assert_eq!(parse_instance_key("p", b"pp/i/h/x"), None);
        assert_eq!(parse_instance_key("p", b"p/i/h/\xff"), None);
        assert_eq!(status_key("p", "h"), "p/s/h");
        assert_eq!(parse_status_key("p", b"p/s/h"), Some("h"));
        assert_eq!(parse_status_key("p", b"p/s/"), None);
        assert_eq!(parse_status_key("p", b"p/s/h/x"), None);
        assert_eq!(parse_status_key("p", b"p/i/h/x"), None);
        assert_eq!(source_prefix("p", "h"), "p/i/h/");
        assert_eq!(check_prefix("a/b/").ok(), Some("a/b"));
        assert!(check_prefix("/").is_err());
        assert!(check_source("a/b").is_err() && check_source("").is_err());
        assert!(check_source("host-a").is_ok());
    }

    #[test]
    fn records() {
        let v = br#"{"provider":"docker","state":"running","ready":true,"uid":"u1","labels":{"a":"b"},
            "event":{"kind":"started","origin":"resync","at":"2026-12-03T10:02:37.5Z"},"writer":"w"}"#;
        let r = Record::from_json(v).expect("decodes");
        assert_eq!(r.state, State::Running);
        assert_eq!(r.ready, Some(true));
        assert!(r.is_resync());
        assert_eq!(
            r.at(),
            UNIX_EPOCH.checked_add(Duration::from_millis(1_796_292_157_500))
        );
        let back = Record::from_json(serde_json::to_string(&r).expect("encodes").as_bytes());
        assert_eq!(back.ok(), Some(r));
        // Optional fields may be absent; an unknown state is refused.
        let min = br#"{"provider":"k8s","state":"removed","event":{"kind":"removed","origin":"live","at":"x"}}"#;
        let r = Record::from_json(min).expect("decodes");
        assert_eq!((r.state, r.at(), r.uid), (State::Removed, None, None));
        assert!(Record::from_json(br#"{"provider":"k8s","state":"paused","event":{"kind":"x","origin":"live","at":"x"}}"#).is_err());
    }

    #[test]
    fn rfc3339() {
        let t = |s| parse_rfc3339(s).and_then(|t| t.duration_since(UNIX_EPOCH).ok());
        assert_eq!(t("1970-01-01T00:00:00Z"), Some(Duration::ZERO));
        assert_eq!(
            t("2026-11-30T03:42:18.979493067Z"),
            Some(Duration::new(1_796_010_138, 979_493_067))
        );
        assert_eq!(
            t("2026-11-30T04:42:18.1+01:00"),
            Some(Duration::new(1_796_010_138, 100_000_000))
        );
        assert_eq!(
            t("2000-02-29T12:00:00-00:30"),
            Some(Duration::new(951_827_400, 0))
        );
        for bad in [
            "",
            "2026-11-30",
            "2026-13-01T00:00:00Z",
            "2026-11-30T00:00:00",
            "2026-11-30T00:00:00.Z",
            "2026-11-30T00:00:00+0100",
        ] {
            assert_eq!(t(bad), None, "{bad}");
        }
    }
}
