//! What the watched range's keys mean, without I/O: a key's value decoded
//! ([`Decoded`]), a watch response's events mapped to observations
//! ([`apply`]: changes, or a publisher's resync told as a snapshot), and
//! each source's publisher status.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use lookout_core::{Change, EventKind, InstanceId, Labels, Listed, Observation, Readiness, Reason};

use crate::client::wire::{Event, EventType, KeyValue};
use crate::model::{self, Record, State};
use crate::publishers::{PublisherState, PublisherStatus};
use crate::settings::Settings;

/// One instance as etcd holds it now.
#[derive(Clone, Debug)]
pub(crate) struct Entry {
    pub(crate) running: bool,
    pub(crate) uid: Option<Arc<str>>,
    pub(crate) labels: Arc<Labels>,
    pub(crate) readiness: Option<Readiness>,
    /// A running instance whose stop is under way (`event.kind: stopping`).
    pub(crate) stopping: bool,
    /// Why, as the record tells it: why it stopped; why it is stopping; or,
    /// with readiness watched, why the running instance fails (a reason
    /// without a message is none).
    pub(crate) reason: Option<Arc<Reason>>,
    /// The record's time (`event.at`), when RFC 3339: a stopping
    /// instance's `Stopping` after a snapshot is stamped with it.
    pub(crate) at: Option<SystemTime>,
}

impl Entry {
    /// What a snapshot lists of it: while running, its failure only (a
    /// stop under way is told after the snapshot: [`snapshot`]).
    fn listed_reason(&self) -> Option<Arc<Reason>> {
        if self.running && self.stopping {
            None
        } else {
            self.reason.clone()
        }
    }
}

/// The instances under the prefix at the newest revision read: what a
/// snapshot tells. Kept across sessions (a publisher's resync, told as a
/// snapshot, needs every instance).
pub(crate) type Known = Mutex<BTreeMap<InstanceId, Entry>>;

/// What one key's value says.
pub(crate) enum Decoded {
    /// Not a key of a wanted source, or unreadable (logged).
    Skip,
    /// The instance exists.
    Present {
        id: InstanceId,
        entry: Entry,
        /// The record's `event.at`, when it is RFC 3339.
        at: Option<SystemTime>,
        /// The publisher found it by resync (`event.origin: resync`).
        resync: bool,
    },
    /// It is gone (a tombstone, or the key deleted).
    Gone {
        id: InstanceId,
        /// The uid it had, when known.
        uid: Option<Arc<str>>,
        /// As [`Decoded::Present`]'s.
        at: Option<SystemTime>,
        /// As [`Decoded::Present`]'s.
        resync: bool,
    },
    /// A publisher's status key: there (connected, with its writer when
    /// told), or deleted.
    Publisher {
        source: Arc<str>,
        state: PublisherState,
        writer: Option<String>,
    },
}

/// What `kv` (of an event of `kind`, with its previous value `prev`) says.
pub(crate) fn decode(
    settings: &Settings,
    kind: EventType,
    kv: &KeyValue,
    prev: Option<&KeyValue>,
) -> Decoded {
    if let Some(source) = model::parse_status_key(&settings.prefix, &kv.key) {
        if !settings.wanted(source) {
            return Decoded::Skip;
        }
        if kind == EventType::Delete {
            return Decoded::Publisher {
                source: Arc::from(source),
                state: PublisherState::Disconnected,
                writer: None,
            };
        }
        let writer = serde_json::from_slice::<serde_json::Value>(&kv.value)
            .ok()
            .and_then(|v| v.get("writer")?.as_str().map(str::to_owned));
        return Decoded::Publisher {
            source: Arc::from(source),
            state: PublisherState::Connected,
            writer,
        };
    }
    let Some((source, instance)) = model::parse_instance_key(&settings.prefix, &kv.key) else {
        tracing::debug!(key = %String::from_utf8_lossy(&kv.key), "neither an instance nor a status key: skipped");
        return Decoded::Skip;
    };
    if !settings.wanted(source) {
        return Decoded::Skip;
    }
    let id = InstanceId::new(format!("{source}/{instance}"));
    if kind == EventType::Delete {
        let uid = prev
            .and_then(|p| Record::from_json(&p.value).ok())
            .and_then(|r| r.uid)
            .map(Arc::from);
        return Decoded::Gone {
            id,
            uid,
            at: None,
            resync: false,
        };
    }
    let record = match Record::from_json(&kv.value) {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(key = %String::from_utf8_lossy(&kv.key), revision = kv.mod_revision, error = %e, "undecodable instance record: skipped");
            return Decoded::Skip;
        }
    };
    let at = record.at();
    let resync = record.is_resync();
    let stopping = record.is_stopping();
    let reason = record.reason.reason().filter(|r| {
        // A running instance's reason is its failure, told with readiness
        // watched only (as `Failing` is), or why it is stopping.
        record.state != State::Running || stopping || (settings.readiness && r.message.is_some())
    });
    let uid = record.uid.map(Arc::from);
    match record.state {
        State::Removed => Decoded::Gone {
            id,
            uid,
            at,
            resync,
        },
        state => {
            let entry = Entry {
                running: state == State::Running,
                uid,
                labels: Arc::new(record.labels),
                readiness: if settings.readiness {
                    record.ready.map(Readiness::told)
                } else {
                    None
                },
                stopping,
                reason,
                at,
            };
            Decoded::Present {
                id,
                entry,
                at,
                resync,
            }
        }
    }
}

/// The snapshot of `map` into `out`: `ResyncBegin`, each instance (why it
/// stopped, or why it fails), `ResyncDone`; then a `Stopping` change of
/// each instance whose stop is under way, which a listed instance cannot
/// say (the core tells it once: a stop already told is no news).
pub(crate) fn snapshot(map: &BTreeMap<InstanceId, Entry>, out: &mut Vec<Observation<i64>>) {
    out.reserve(map.len() + 2);
    out.push(Observation::ResyncBegin);
    out.extend(map.iter().map(|(id, e)| {
        Observation::Listed(
            Listed::new(id.clone(), e.running)
                .uid(e.uid.clone())
                .labels(Labels::clone(&e.labels))
                .readiness(e.readiness)
                .reason(e.listed_reason()),
        )
    }));
    out.push(Observation::ResyncDone);
    for (id, e) in map.iter().filter(|(_, e)| e.running && e.stopping) {
        out.push(Observation::Change(stopping(id.clone(), e)));
    }
}

/// The `Stopping` change of a running instance whose stop is under way.
fn stopping(id: InstanceId, e: &Entry) -> Change<i64> {
    Change::new(
        id,
        EventKind::Stopping,
        e.at.unwrap_or_else(SystemTime::now),
    )
    .uid(e.uid.clone())
    .labels(Some(Arc::clone(&e.labels)))
    .readiness(e.readiness)
    .reason(e.reason.clone())
}

/// Maps one watch response's events to observations, updating `map`.
/// A live transition is a change (the last of its revision carries the
/// revision as cursor); a run of transitions the publisher found by resync
/// is told as a snapshot of every instance, so that the core reports them
/// with origin `resync`. A publisher's status goes into `publishers`, with
/// its place in `out`. Returns whether a snapshot was told.
pub(crate) fn apply(
    settings: &Settings,
    map: &mut BTreeMap<InstanceId, Entry>,
    events: &[Event],
    out: &mut Vec<Observation<i64>>,
    publishers: &mut Vec<(usize, PublisherStatus)>,
) -> bool {
    let mut pending_resync = false;
    let mut told_snapshot = false;
    let mut last_change_rev = None;
    for (i, ev) in events.iter().enumerate() {
        let rev = ev.kv.mod_revision;
        let decoded = decode(settings, ev.kind, &ev.kv, ev.prev_kv.as_ref());
        let live = match &decoded {
            Decoded::Skip => false,
            Decoded::Present { resync, .. } | Decoded::Gone { resync, .. } => !*resync,
            // In order with the instances: after the resync before it.
            Decoded::Publisher { .. } => true,
        };
        // A live transition after resync ones: those are told first.
        if live && std::mem::take(&mut pending_resync) {
            snapshot(map, out);
            told_snapshot = true;
        }
        match decoded {
            Decoded::Skip => {}
            Decoded::Publisher {
                source,
                state,
                writer,
            } => {
                let status = publisher(map, source, state, writer, rev);
                publishers.push((out.len(), status));
            }
            Decoded::Present {
                id,
                entry,
                resync: true,
                ..
            } => {
                map.insert(id, entry);
                pending_resync = true;
            }
            Decoded::Gone {
                id, resync: true, ..
            } => {
                map.remove(&id);
                pending_resync = true;
            }
            Decoded::Present {
                id,
                entry,
                at,
                resync: false,
            } => {
                live_changes(map, &id, &entry, at.unwrap_or_else(SystemTime::now), out);
                last_change_rev = Some(rev);
                map.insert(id, entry);
            }
            Decoded::Gone {
                id,
                uid,
                at,
                resync: false,
            } => {
                map.remove(&id);
                out.push(Observation::Change(
                    Change::new(id, EventKind::Removed, at.unwrap_or_else(SystemTime::now))
                        .uid(uid),
                ));
                last_change_rev = Some(rev);
            }
        }
        let boundary = events
            .get(i + 1)
            .is_none_or(|next| next.kv.mod_revision != rev);
        if boundary && !pending_resync {
            match out.last_mut() {
                Some(Observation::Change(c)) if last_change_rev == Some(rev) => {
                    c.cursor = Some(rev);
                }
                _ => out.push(Observation::Progress(Some(rev))),
            }
        }
    }
    if pending_resync {
        snapshot(map, out);
        told_snapshot = true;
        let last = events.last().map(|e| e.kv.mod_revision);
        out.push(Observation::Progress(last));
    }
    told_snapshot
}

/// The changes of a live record of an instance that exists (`map`: what was
/// known before it).
fn live_changes(
    map: &BTreeMap<InstanceId, Entry>,
    id: &InstanceId,
    entry: &Entry,
    at: SystemTime,
    out: &mut Vec<Observation<i64>>,
) {
    let change = |kind, reason| {
        Change::new(id.clone(), kind, at)
            .uid(entry.uid.clone())
            .labels(Some(Arc::clone(&entry.labels)))
            .readiness(entry.readiness)
            .reason(reason)
    };
    if entry.running && entry.stopping {
        // A stop under way of an instance not known to run: its start
        // first, so that the core has a stop to tell.
        if !map.get(id).is_some_and(|e| e.running) {
            out.push(Observation::Change(change(EventKind::Started, None)));
        }
        out.push(Observation::Change(change(
            EventKind::Stopping,
            entry.reason.clone(),
        )));
    } else {
        // A start tells the failure (`None`: it does not fail); a stop why
        // it stopped.
        let kind = if entry.running {
            EventKind::Started
        } else {
            EventKind::Stopped
        };
        out.push(Observation::Change(change(kind, entry.reason.clone())));
    }
}

/// A source's publisher status, with how many of its instances `map` holds.
pub(crate) fn publisher(
    map: &BTreeMap<InstanceId, Entry>,
    source: Arc<str>,
    state: PublisherState,
    writer: Option<String>,
    revision: i64,
) -> PublisherStatus {
    let (from, to) = (format!("{source}/"), format!("{source}0"));
    let instances = map
        .range::<str, _>((Bound::Included(from.as_str()), Bound::Excluded(to.as_str())))
        .count();
    PublisherStatus {
        source,
        state,
        writer,
        instances,
        revision,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::time::Duration;

    fn settings(sources: &[&str], readiness: bool) -> Settings {
        Settings {
            prefix: "p".into(),
            sources: sources.iter().map(|s| (*s).to_owned()).collect(),
            readiness,
            catch_up: Duration::from_secs(1),
            create_timeout: Duration::from_secs(1),
        }
    }

    /// A put of an instance record at `key`, revision `rev`.
    pub(crate) fn put(key: &str, rev: i64, state: &str, origin: &str) -> Event {
        let value = format!(
            r#"{{"provider":"docker","state":"{state}","ready":true,"uid":"u-{key}","labels":{{"k":"v"}},"event":{{"kind":"x","origin":"{origin}","at":"2026-12-03T10:00:00Z"}},"writer":"t"}}"#
        );
        Event {
            kind: EventType::Put,
            kv: KeyValue {
                key: key.as_bytes().to_vec(),
                value: value.into_bytes(),
                mod_revision: rev,
                ..KeyValue::default()
            },
            prev_kv: None,
        }
    }

    fn kinds(out: &[Observation<i64>]) -> Vec<String> {
        out.iter()
            .map(|o| match o {
                Observation::Change(c) => format!("{} {:?} {:?}", c.id, c.kind, c.cursor),
                Observation::Listed(l) => format!("listed {} {}", l.id, l.running),
                Observation::Progress(p) => format!("progress {p:?}"),
                other => format!("{other:?}"),
            })
            .collect()
    }

    #[test]
    fn live_events_are_changes_with_the_cursor_on_the_last_of_a_revision() {
        let s = settings(&[], true);
        let mut map = BTreeMap::new();
        let mut out = Vec::new();
        let mut deleted = put("p/i/h/b", 6, "removed", "live");
        deleted.kind = EventType::Delete;
        let events = [
            put("p/i/h/a", 5, "running", "live"),
            put("p/i/g/x", 5, "stopped", "live"),
            put("p/s/h", 6, "running", "live"),
            deleted,
            put("p/i/h/a", 7, "removed", "live"),
        ];
        assert!(!apply(&s, &mut map, &events, &mut out, &mut Vec::new()));
        assert_eq!(
            kinds(&out),
            [
                "h/a Started None",
                "g/x Stopped Some(5)",
                "h/b Removed Some(6)",
                "h/a Removed Some(7)",
            ]
        );
        let Observation::Change(first) = &out[0] else {
            panic!("a change")
        };
        assert_eq!(first.readiness, Some(Readiness::told(true)));
        assert_eq!(first.uid.as_deref(), Some("u-p/i/h/a"));
        assert_eq!(
            map.keys().map(InstanceId::as_str).collect::<Vec<_>>(),
            ["g/x"]
        );
    }

    #[test]
    fn resync_events_are_one_snapshot_and_sources_filter() {
        let s = settings(&["h"], false);
        let mut map = BTreeMap::new();
        let mut out = Vec::new();
        let events = [
            put("p/i/h/a", 5, "running", "live"),
            put("p/i/h/b", 6, "running", "resync"),
            put("p/i/h/c", 7, "stopped", "resync"),
            put("p/i/other/z", 8, "running", "live"),
            put("p/i/h/a", 9, "stopped", "live"),
            put("p/i/h/b", 10, "removed", "resync"),
        ];
        assert!(apply(&s, &mut map, &events, &mut out, &mut Vec::new()));
        assert_eq!(
            kinds(&out),
            [
                "h/a Started Some(5)",
                "ResyncBegin",
                "listed h/a true",
                "listed h/b true",
                "listed h/c false",
                "ResyncDone",
                "h/a Stopped Some(9)",
                "ResyncBegin",
                "listed h/a false",
                "listed h/c false",
                "ResyncDone",
                "progress Some(10)",
            ]
        );
        let Observation::Change(c) = &out[0] else {
            panic!("a change")
        };
        assert_eq!(c.readiness, None, "readiness not watched");
    }

    #[test]
    fn publisher_statuses_take_their_place_after_the_resync_before_them() {
        let s = settings(&["h"], false);
        let mut map = BTreeMap::new();
        let mut out = Vec::new();
        let mut publishers = Vec::new();
        let status = |rev, writer: Option<&str>| Event {
            kind: if writer.is_some() {
                EventType::Put
            } else {
                EventType::Delete
            },
            kv: KeyValue {
                key: b"p/s/h".to_vec(),
                value: writer
                    .map(|w| format!(r#"{{"connected":true,"writer":"{w}"}}"#).into_bytes())
                    .unwrap_or_default(),
                mod_revision: rev,
                ..KeyValue::default()
            },
            prev_kv: None,
        };
        let mut other = status(9, Some("x"));
        other.kv.key = b"p/s/other".to_vec();
        let events = [
            put("p/i/h/a", 5, "running", "live"),
            status(6, None),
            put("p/i/h/b", 7, "running", "resync"),
            status(8, Some("w 42")),
            other,
        ];
        assert!(apply(&s, &mut map, &events, &mut out, &mut publishers));
        assert_eq!(
            kinds(&out),
            [
                "h/a Started Some(5)",
                "progress Some(6)",
                "ResyncBegin",
                "listed h/a true",
                "listed h/b true",
                "ResyncDone",
                "progress Some(8)",
                "progress Some(9)",
            ]
        );
        let told: Vec<_> = publishers
            .iter()
            .map(|(at, p)| {
                format!(
                    "{at} {} {} {} {:?} {}",
                    p.source, p.state, p.instances, p.writer, p.revision
                )
            })
            .collect();
        assert_eq!(
            told,
            [
                "1 h disconnected 1 None 6",
                "6 h connected 2 Some(\"w 42\") 8"
            ],
            "the other source is not wanted"
        );
    }

    /// A put of a record with a reason: `kind` its event, `why` its fields.
    fn put_why(key: &str, rev: i64, state: &str, kind: &str, why: &str) -> Event {
        let mut e = put(key, rev, state, "live");
        let value = format!(
            r#"{{"provider":"docker","state":"{state}","ready":false,"uid":"u","labels":{{}},"event":{{"kind":"{kind}","origin":"live","at":"2026-12-03T10:00:00Z"}}{why}}}"#
        );
        e.kv.value = value.into_bytes();
        e
    }

    fn said(out: &[Observation<i64>]) -> Vec<String> {
        out.iter()
            .filter_map(|o| match o {
                Observation::Change(c) => Some(format!("{} {:?} {:?}", c.id, c.kind, c.reason)),
                Observation::Listed(l) => {
                    Some(format!("listed {} {} {:?}", l.id, l.running, l.reason))
                }
                _ => None,
            })
            .collect()
    }

    #[test]
    fn reasons_are_told_stops_under_way_after_a_start_or_a_snapshot() {
        use lookout_core::{Outcome, Signal};
        let s = settings(&[], true);
        let mut map = BTreeMap::new();
        let mut out = Vec::new();
        let events = [
            put_why(
                "p/i/h/a",
                5,
                "stopped",
                "stopped",
                r#","outcome":"failed","exit_code":137,"signal":"SIGKILL","oom":true"#,
            ),
            // A stop under way of an instance not known to run: a start first.
            put_why(
                "p/i/h/b",
                6,
                "running",
                "stopping",
                r#","outcome":"stopped","signal":"SIGTERM""#,
            ),
            put_why(
                "p/i/h/c",
                7,
                "running",
                "failing",
                r#","failed":true,"message":"gave up""#,
            ),
            put_why("p/i/h/c", 8, "running", "stopping", ""),
        ];
        assert!(!apply(&s, &mut map, &events, &mut out, &mut Vec::new()));
        let oom = Reason::exited(137, false).oom(true);
        let term = Reason::stop(Outcome::Stopped).signal(Some(Signal::TERM));
        let gave_up = Reason::failing("gave up").failed(true);
        assert_eq!(
            said(&out),
            [
                format!("h/a Stopped {:?}", Some(Arc::new(oom.clone()))),
                "h/b Started None".to_owned(),
                format!("h/b Stopping {:?}", Some(Arc::new(term.clone()))),
                format!("h/c Started {:?}", Some(Arc::new(gave_up))),
                "h/c Stopping None".to_owned(),
            ]
        );
        // A snapshot lists why each stopped or fails, then tells the stops
        // under way.
        out.clear();
        snapshot(&map, &mut out);
        assert_eq!(
            said(&out),
            [
                format!("listed h/a false {:?}", Some(Arc::new(oom))),
                "listed h/b true None".to_owned(),
                "listed h/c true None".to_owned(),
                format!("h/b Stopping {:?}", Some(Arc::new(term))),
                "h/c Stopping None".to_owned(),
            ]
        );
        // Without readiness a failure is not told; a stop's reason is.
        let s = settings(&[], false);
        let mut map = BTreeMap::new();
        out.clear();
        let events = [
            put_why(
                "p/i/h/c",
                7,
                "running",
                "failing",
                r#","failed":true,"message":"gave up""#,
            ),
            put_why(
                "p/i/h/a",
                8,
                "stopped",
                "stopped",
                r#","outcome":"completed","exit_code":0"#,
            ),
        ];
        apply(&s, &mut map, &events, &mut out, &mut Vec::new());
        assert_eq!(
            said(&out),
            [
                "h/c Started None".to_owned(),
                format!("h/a Stopped {:?}", Some(Arc::new(Reason::exited(0, false)))),
            ]
        );
    }

    #[test]
    fn an_undecodable_record_is_skipped_with_its_revision() {
        let s = settings(&[], false);
        let mut map = BTreeMap::new();
        let mut out = Vec::new();
        let mut bad = put("p/i/h/a", 5, "running", "live");
        bad.kv.value = b"{not json".to_vec();
        assert!(!apply(&s, &mut map, &[bad], &mut out, &mut Vec::new()));
        assert_eq!(kinds(&out), ["progress Some(5)"]);
        assert!(map.is_empty());
    }
}
