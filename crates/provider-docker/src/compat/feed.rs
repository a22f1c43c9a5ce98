//! Decoding: the container list, and the `/events` body line by line into
//! observations. Pure (no I/O), so every case is unit-tested.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use lookout_core::{Change, EventKind, InstanceId, Labels, Listed, Observation};
use serde_json::Value;

use super::error::CompatError;
use super::mapping::Mapping;

/// A position in an engine's event feed: the event's `timeNano`.
///
/// A redial asks for the events `since` this time, minus 1 µs: Docker's `since`
/// is inclusive and exact, Podman parses it as a float (precise to about
/// 0.25 µs). The feed then drops every event at or before the cursor: those
/// were seen before the redial (two events in the same nanosecond, one seen
/// and one not, would lose the second; engines stamp events with the
/// nanosecond clock, so this is left as it is).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Cursor(i64);

impl Cursor {
    /// The cursor at this many nanoseconds since the Unix epoch.
    pub fn from_unix_nanos(nanos: i64) -> Self {
        Self(nanos)
    }

    /// Nanoseconds since the Unix epoch.
    pub fn unix_nanos(self) -> i64 {
        self.0
    }

    /// The `since` query value: `seconds.nanoseconds`, 1 µs before the cursor.
    pub(crate) fn since(self) -> String {
        let t = self.0.saturating_sub(1_000).max(0);
        format!("{}.{:09}", t / 1_000_000_000, t % 1_000_000_000)
    }
}

/// One decoded observation from the feed.
pub(crate) type Obs = Observation<Cursor>;

/// The longest event line accepted; a longer one is skipped as undecodable.
pub(crate) const MAX_LINE: usize = 1 << 20;

/// Turns the `/events` body of one session into observations.
///
/// Besides decoding, it keeps the session coherent with its snapshot: a
/// change passes only for a container the snapshot listed or whose `create`
/// this session saw. Any other event is from before the snapshot, about a
/// container that was already gone when it was taken (the resync reported its
/// removal): passing it on would resurrect the container for a moment.
#[derive(Debug)]
pub(crate) struct Feed {
    mapping: &'static Mapping,
    resume: Option<Cursor>,
    /// The newest cursor reported: cursors only move forward, so that an
    /// event with a bogus old time cannot send a redial far back.
    newest: Option<Cursor>,
    /// Container id → labels, of the containers this session may report.
    containers: HashMap<Arc<str>, Labels>,
    /// A line not yet terminated by `\n`.
    partial: Vec<u8>,
    /// Inside a line longer than [`MAX_LINE`], already reported: skip to `\n`.
    overlong: bool,
}

impl Feed {
    pub(crate) fn new(
        mapping: &'static Mapping,
        resume: Option<Cursor>,
        listed: &[Listed],
    ) -> Self {
        Self {
            mapping,
            resume,
            newest: resume,
            containers: listed
                .iter()
                .filter_map(|l| Some((Arc::clone(l.uid.as_ref()?), l.labels.clone())))
                .collect(),
            partial: Vec::new(),
            overlong: false,
        }
    }

    /// Feeds a piece of the body; pushes an observation per complete line.
    pub(crate) fn push(&mut self, mut chunk: &[u8], out: &mut VecDeque<Obs>) {
        while let Some(pos) = chunk.iter().position(|b| *b == b'\n') {
            let (head, rest) = (&chunk[..pos], &chunk[pos + 1..]);
            chunk = rest;
            if self.overlong {
                self.overlong = false;
                continue;
            }
            let obs = if self.partial.is_empty() {
                self.line(head)
            } else {
                let mut line = std::mem::take(&mut self.partial);
                line.extend_from_slice(head);
                self.line(&line)
            };
            out.extend(obs);
        }
        if self.overlong {
            return;
        }
        self.partial.extend_from_slice(chunk);
        if self.partial.len() > MAX_LINE {
            tracing::warn!(
                provider = self.mapping.provider,
                limit = MAX_LINE,
                start = %preview(&self.partial),
                "skipping an event line longer than the limit"
            );
            self.partial = Vec::new();
            self.overlong = true;
            out.push_back(Observation::Progress(None));
        }
    }

    /// The body ended: decodes a last line that had no `\n`.
    pub(crate) fn finish(&mut self, out: &mut VecDeque<Obs>) {
        let line = std::mem::take(&mut self.partial);
        if !self.overlong {
            out.extend(self.line(&line));
        }
    }

    /// Decodes one line. `None` for a blank line; an undecodable, unwanted or
    /// stale event is `Progress`, with its cursor when it has one.
    fn line(&mut self, line: &[u8]) -> Option<Obs> {
        let line = line.trim_ascii();
        if line.is_empty() {
            return None;
        }
        let provider = self.mapping.provider;
        let poison = |reason: &str, cursor: Option<Cursor>| {
            tracing::warn!(provider, reason, line = %preview(line), "skipping an undecodable event");
            Some(Observation::Progress(cursor))
        };
        let event: Value = match serde_json::from_slice(line) {
            Ok(v) => v,
            Err(e) => return poison(&format!("not JSON: {e}"), None),
        };
        if !event.is_object() {
            return poison("not a JSON object", None);
        }
        let Some(time) = event_time(&event) else {
            return poison("no timeNano/time", None);
        };
        if self.resume.is_some_and(|r| time <= r) {
            // Seen before the redial. Passing it on again is not harmless: the
            // snapshot may have moved the state on since (a replayed `start`
            // after a resync found the container stopped would restart it).
            tracing::trace!(provider, ?time, "replayed from before the resume point");
            return Some(Observation::Progress(None));
        }
        let cursor = if self.newest.is_none_or(|n| time >= n) {
            self.newest = Some(time);
            Some(time)
        } else {
            None
        };
        match self.event(&event, time, cursor) {
            Ok(obs) => Some(obs),
            Err(reason) => poison(reason, cursor),
        }
    }

    /// Maps one decoded event with a time; `Err` names what it lacks.
    fn event(
        &mut self,
        event: &Value,
        time: Cursor,
        cursor: Option<Cursor>,
    ) -> Result<Obs, &'static str> {
        let provider = self.mapping.provider;
        let progress = Ok(Observation::Progress(cursor));
        match event.get("Type").and_then(Value::as_str) {
            Some("container") => {}
            Some(other) => {
                tracing::debug!(provider, r#type = other, "ignoring a non-container event");
                return progress;
            }
            None => return Err("no Type"),
        }
        let action = event
            .get("Action")
            .or_else(|| event.get("status"))
            .and_then(Value::as_str)
            .ok_or("no Action")?;
        let Some(kind) = self.mapping.kind(action) else {
            if self.mapping.is_ignored(action) {
                tracing::trace!(provider, action, "ignoring an action");
            } else {
                tracing::debug!(provider, action, "ignoring an unknown action");
            }
            return progress;
        };
        let actor = event.get("Actor");
        let uid = actor
            .and_then(|a| a.get("ID"))
            .or_else(|| event.get("id"))
            .and_then(Value::as_str)
            .filter(|id| !id.is_empty())
            .ok_or("no Actor.ID")?;
        let attributes = actor
            .and_then(|a| a.get("Attributes"))
            .and_then(Value::as_object);
        let name = attributes
            .and_then(|a| a.get("name"))
            .and_then(Value::as_str)
            .map(|n| n.trim_start_matches('/'))
            .filter(|n| !n.is_empty())
            .ok_or("no Actor.Attributes.name")?;
        let labels = if let Some(labels) = self.containers.get(uid) {
            labels.clone()
        } else if kind == EventKind::Created {
            let labels: Labels = attributes
                .into_iter()
                .flatten()
                .filter(|(k, _)| !self.mapping.non_label_attributes.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), string_value(v)))
                .collect();
            self.containers.insert(Arc::from(uid), labels.clone());
            labels
        } else {
            tracing::debug!(
                provider,
                id = name,
                action,
                "skipping an event of a container the snapshot did not list and this session \
                 did not see created: it was gone before the snapshot, which reported it"
            );
            return progress;
        };
        if kind == EventKind::Removed {
            self.containers.remove(uid);
        }
        let nanos = u64::try_from(time.0).unwrap_or(0);
        Ok(Observation::Change(Change {
            id: InstanceId::from(name),
            kind,
            uid: Some(Arc::from(uid)),
            labels: Some(labels),
            at: SystemTime::UNIX_EPOCH + Duration::from_nanos(nanos),
            cursor,
        }))
    }
}

/// `timeNano`, else `time` in seconds.
fn event_time(event: &Value) -> Option<Cursor> {
    if let Some(n) = event.get("timeNano").and_then(Value::as_i64) {
        return Some(Cursor(n));
    }
    let secs = event.get("time").and_then(Value::as_i64)?;
    secs.checked_mul(1_000_000_000).map(Cursor)
}

fn string_value(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The start of a line, for a log message.
fn preview(line: &[u8]) -> String {
    const MAX: usize = 200;
    let text = String::from_utf8_lossy(&line[..line.len().min(MAX)]);
    if line.len() > MAX {
        format!("{text}…")
    } else {
        text.into_owned()
    }
}

/// Decodes `GET /containers/json?all=1`. An entry without an id or a name is
/// skipped with a warning.
pub(crate) fn parse_list(body: &[u8], mapping: &Mapping) -> Result<Vec<Listed>, CompatError> {
    let value: Value =
        serde_json::from_slice(body).map_err(|e| CompatError::List(e.to_string()))?;
    let Value::Array(entries) = value else {
        return Err(CompatError::List("not a JSON array".to_owned()));
    };
    let mut listed = Vec::with_capacity(entries.len());
    for entry in &entries {
        let uid = entry
            .get("Id")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty());
        let name = container_name(entry);
        let (Some(uid), Some(name)) = (uid, name) else {
            tracing::warn!(
                provider = mapping.provider,
                entry = %preview(entry.to_string().as_bytes()),
                "skipping a listed container without an Id or a name"
            );
            continue;
        };
        let state = entry.get("State").and_then(Value::as_str).unwrap_or("");
        let labels = entry
            .get("Labels")
            .and_then(Value::as_object)
            .map(|l| {
                l.iter()
                    .map(|(k, v)| (k.clone(), string_value(v)))
                    .collect()
            })
            .unwrap_or_default();
        listed.push(Listed {
            id: InstanceId::from(name),
            // A paused container still runs: no event says otherwise (`pause`
            // is not a stop). A restarting one has died and not started yet.
            running: matches!(state, "running" | "paused"),
            uid: Some(Arc::from(uid)),
            labels,
        });
    }
    Ok(listed)
}

/// The container's own name from `Names`: without the leading `/`, and not a
/// legacy link alias (`/other/alias`).
fn container_name(entry: &Value) -> Option<&str> {
    let names = entry.get("Names")?.as_array()?;
    let names = || {
        names
            .iter()
            .filter_map(Value::as_str)
            .map(|n| n.trim_start_matches('/'))
            .filter(|n| !n.is_empty())
    };
    names()
        .find(|n| !n.contains('/'))
        .or_else(|| names().next())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compat::host::Discovery;

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

    /// Feeds `lines`, each ended by `\n`, as one chunk.
    fn feed_lines(feed: &mut Feed, lines: &[String]) -> Vec<Obs> {
        let mut out = VecDeque::new();
        feed.push((lines.join("\n") + "\n").as_bytes(), &mut out);
        out.into()
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
        let mut feed = Feed::new(&TABLE, None, &[]);
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
        assert_eq!(c.labels, Some(Labels::from([("app".into(), "web".into())])));
        assert_eq!(c.uid.as_deref(), Some("c1"));
        assert_eq!(c.at, SystemTime::UNIX_EPOCH + Duration::from_nanos(10));
        assert!(feed.containers.is_empty(), "destroy forgets the container");
    }

    #[test]
    fn lines_split_across_chunks_and_blank_lines() {
        let mut feed = Feed::new(&TABLE, None, &[]);
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
        assert_eq!(change(&out[1]), ("web", EventKind::Started, 20));
    }

    #[test]
    fn poison_is_skipped_and_the_cursor_advances_when_it_can() {
        let mut feed = Feed::new(&TABLE, None, &[]);
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

    #[test]
    fn an_overlong_line_is_skipped_once() {
        let mut feed = Feed::new(&TABLE, None, &[]);
        let mut out = VecDeque::new();
        let junk = vec![b'x'; MAX_LINE / 2 + 1];
        feed.push(&junk, &mut out);
        assert!(out.is_empty());
        feed.push(&junk, &mut out);
        assert_eq!(out.pop_front(), Some(Observation::Progress(None)));
        feed.push(&junk, &mut out);
        feed.push(
            format!("xx\n{}\n", event("create", "c1", "web", 3)).as_bytes(),
            &mut out,
        );
        assert_eq!(out.len(), 1, "{out:?}");
        assert_eq!(change(&out[0]), ("web", EventKind::Created, 3));
    }

    #[test]
    fn events_older_than_the_resume_point_are_dropped() {
        let mut feed = Feed::new(&TABLE, Some(Cursor(100)), &[]);
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
        let mut feed = Feed::new(&TABLE, Some(Cursor(1)), &listed);
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
        assert_eq!(c.labels, Some(listed[0].labels.clone()));
        assert_eq!(change(&out[3]), ("brief", EventKind::Created, 13));
        assert_eq!(change(&out[4]), ("brief", EventKind::Removed, 14));
        assert_eq!(out[5], Observation::Progress(Some(Cursor(14))));
    }

    #[test]
    fn the_cursor_never_moves_back() {
        let mut feed = Feed::new(&TABLE, None, &[]);
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

    #[test]
    fn parses_the_list() {
        let body = br#"[
          {"Id":"a1","Names":["/web"],"State":"running","Labels":{"app":"web"}},
          {"Id":"b2","Names":["/other/alias","/db"],"State":"exited","Labels":null},
          {"Id":"c3","Names":["/paused"],"State":"paused","Labels":{}},
          {"Id":"d4","Names":["/restarting"],"State":"restarting"},
          {"Names":["/no-id"],"State":"running"},
          {"Id":"e5","Names":[],"State":"running"}
        ]"#;
        let listed = parse_list(body, &TABLE).expect("valid list");
        let summary: Vec<(&str, bool, &str, usize)> = listed
            .iter()
            .map(|l| {
                (
                    l.id.as_str(),
                    l.running,
                    l.uid.as_deref().unwrap_or(""),
                    l.labels.len(),
                )
            })
            .collect();
        assert_eq!(
            summary,
            [
                ("web", true, "a1", 1),
                ("db", false, "b2", 0),
                ("paused", true, "c3", 0),
                ("restarting", false, "d4", 0),
            ]
        );
        assert!(parse_list(b"{}", &TABLE).is_err());
        assert!(parse_list(b"[", &TABLE).is_err());
    }
}
