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
//!
//! Why (issue #47; [`RecordReason`]): the fields of the event's reason, flat
//! in the record, each only when said — `outcome`, `exit_code`, `signal`,
//! `oom`, `restarting`, `failed`, `message` — as the `--json` lines name
//! them. A stopped record says why it stopped; a running one why it fails
//! (its last `failing` message, kept until it is ready again) or, with
//! `event.kind: stopping`, why it is stopping:
//!
//! ```json
//! {"provider":"docker","state":"stopped","uid":"4f1c…","labels":{"app":"web"},
//!  "event":{"kind":"stopped","origin":"live","at":"2026-12-03T10:02:39.5Z"},
//!  "writer":"lookout/0.1.0 host-a 4242","outcome":"failed","exit_code":137,
//!  "signal":"SIGKILL","oom":true}
//! ```
//!
//! A record written before these fields existed has none of them, and
//! reads as one whose engine said nothing of why.

use std::sync::Arc;

use lookout_core::{Labels, Outcome, Reason, Signal};
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
    /// `created`, `started`, `stopped`, `removed`, `ready`, `unready`,
    /// `stopping`, `failing`.
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
    /// Why, flat in the record (absent: the engine said nothing, or an
    /// older publisher wrote it).
    #[serde(flatten)]
    pub reason: RecordReason,
}

/// The fields of a [`Reason`] as a record holds them, each only when said
/// (`#[non_exhaustive]`: a field may be added). Names are strings, so a
/// record of a newer publisher with an outcome or signal this reader does
/// not know still decodes (the name is then skipped).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct RecordReason {
    /// `completed`, `failed`, `stopped`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
    /// The process's exit code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The signal that ended it, by name (`SIGKILL`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<String>,
    /// The OOM killer ended it.
    #[serde(default, skip_serializing_if = "is_false")]
    pub oom: bool,
    /// The engine starts it again.
    #[serde(default, skip_serializing_if = "is_false")]
    pub restarting: bool,
    /// The engine gave up on it.
    #[serde(default, skip_serializing_if = "is_false")]
    pub failed: bool,
    /// The engine's words (at most [`lookout_core::MAX_MESSAGE`] bytes,
    /// as [`Reason::message`] keeps them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's skip_serializing_if
fn is_false(b: &bool) -> bool {
    !*b
}

impl RecordReason {
    /// The fields of `reason` (`None`: none).
    pub fn of(reason: Option<&Reason>) -> Self {
        let Some(r) = reason else {
            return Self::default();
        };
        Self {
            outcome: r.outcome.map(|o| o.as_str().to_owned()),
            exit_code: r.exit_code,
            signal: r.signal.map(Signal::name),
            oom: r.oom,
            restarting: r.restarting,
            failed: r.failed,
            message: r.message.as_deref().map(str::to_owned),
        }
    }

    /// Whether it says nothing.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    /// The reason it tells (`None` when it says nothing): an outcome or a
    /// signal this version does not know is left out, a message longer
    /// than [`lookout_core::MAX_MESSAGE`] is cut.
    pub fn reason(&self) -> Option<Arc<Reason>> {
        if self.is_empty() {
            return None;
        }
        // Field by field (not `exit_code`'s setter, which would add the
        // signal a code tells): what the publisher wrote, no more.
        let mut reason = Reason::default().message(self.message.as_deref());
        reason.outcome = self.outcome.as_deref().and_then(Outcome::from_name);
        reason.exit_code = self.exit_code;
        reason.signal = self.signal.as_deref().and_then(Signal::from_name);
        reason.oom = self.oom;
        reason.restarting = self.restarting;
        reason.failed = self.failed;
        Some(Arc::new(reason))
    }
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
            reason: RecordReason::default(),
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

    /// Whether the transition that wrote it is a stop under way (`event.kind:
    /// stopping`) of an instance that still runs.
    pub fn is_stopping(&self) -> bool {
        self.state == State::Running && self.event.kind == "stopping"
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
    fn reasons_round_trip_flat_and_old_records_decode() {
        let full = Reason::exited(137, true)
            .oom(true)
            .failed(true)
            .message(Some("OOMKilled: the container used 512 MiB"));
        let mut r = Record::new(
            "docker",
            State::Stopped,
            RecordEvent::new("stopped", "live", "2026-12-03T10:02:39.5Z"),
        );
        r.reason = RecordReason::of(Some(&full));
        let json = serde_json::to_string(&r).expect("encodes");
        assert!(
            json.ends_with(r#""writer":"","outcome":"failed","exit_code":137,"signal":"SIGKILL","oom":true,"restarting":true,"failed":true,"message":"OOMKilled: the container used 512 MiB"}"#),
            "{json}"
        );
        let back = Record::from_json(json.as_bytes()).expect("decodes");
        assert_eq!(back, r);
        assert_eq!(back.reason.reason().as_deref(), Some(&full));
        // Exactly what was said: an exit code without its signal stays so.
        let mut bare = Reason::stop(Outcome::Stopped);
        bare.exit_code = Some(143);
        assert_eq!(
            RecordReason::of(Some(&bare)).reason().as_deref(),
            Some(&bare)
        );
        // Nothing said: no field, no reason.
        let min = Record::new(
            "docker",
            State::Running,
            RecordEvent::new("started", "live", "x"),
        );
        let json = serde_json::to_string(&min).expect("encodes");
        assert!(!json.contains("outcome") && !json.contains("oom"), "{json}");
        assert_eq!(
            Record::from_json(json.as_bytes())
                .expect("decodes")
                .reason
                .reason(),
            None
        );
        // An older publisher's record: no such field, decodes as before.
        let old = br#"{"provider":"docker","state":"stopped","uid":"u","labels":{},"event":{"kind":"stopped","origin":"live","at":"2026-12-03T10:00:00Z"},"writer":"lookout/0.1.0 h pid 1"}"#;
        let r = Record::from_json(old).expect("an old record decodes");
        assert!(r.reason.is_empty() && r.reason.reason().is_none());
        // A newer publisher's names this reader does not know are skipped.
        let newer = br#"{"provider":"docker","state":"stopped","event":{"kind":"stopped","origin":"live","at":"x"},"outcome":"evicted","signal":"SIGWHAT","exit_code":2,"future":1}"#;
        let r = Record::from_json(newer)
            .expect("decodes")
            .reason
            .reason()
            .expect("a reason");
        assert_eq!((r.outcome, r.signal, r.exit_code), (None, None, Some(2)));
        // A message over the cap (hand-written) is cut to it.
        let long = format!(
            r#"{{"provider":"k8s","state":"running","event":{{"kind":"failing","origin":"live","at":"x"}},"message":"{}"}}"#,
            "x".repeat(10_000)
        );
        let r = Record::from_json(long.as_bytes())
            .expect("decodes")
            .reason
            .reason()
            .expect("a reason");
        assert!(
            r.message
                .as_deref()
                .is_some_and(|m| m.len() <= lookout_core::MAX_MESSAGE)
        );
        let stopping = Record::new(
            "docker",
            State::Running,
            RecordEvent::new("stopping", "live", "x"),
        );
        assert!(stopping.is_stopping());
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
