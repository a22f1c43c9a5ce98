//! Decoding the `/events` body line by line into observations. Pure (no
//! I/O), so every case is unit-tested.

use std::collections::VecDeque;
use std::sync::Arc;

use lookout_core::{Change, InstanceId, Labels, Listed, Observation};
use serde_json::Value;

use super::objects::{Decision, Event, KnownObjects, Objects, preview};

/// A position in an engine's event feed: the event's `timeNano`.
///
/// A redial asks for the events `since` this time, minus 1 µs: Docker's `since`
/// is inclusive and exact, Podman parses it as a float (precise to about
/// 0.25 µs). The feed then drops what it replays of the events seen before
/// the redial: with ordered times (containers) every event at or before the
/// cursor (two events in the same nanosecond, one seen and one not, would lose
/// the second; engines stamp events with the nanosecond clock, so this is left
/// as it is); without (Swarm services) only those from `since` to the cursor
/// (see [`Objects::ordered_times`](super::Objects::ordered_times)).
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

    /// Nanoseconds since the Unix epoch.
    pub fn unix_nanos(self) -> i64 {
        self.0
    }

    /// The `since` query value: `seconds.nanoseconds`, 1 µs before the cursor.
    pub(crate) fn since(self) -> String {
        let t = self.since_nanos();
        format!("{}.{:09}", t / 1_000_000_000, t % 1_000_000_000)
    }

    /// The `since` of a redial from this cursor, in nanoseconds.
    pub(crate) fn since_nanos(self) -> i64 {
        self.0.saturating_sub(1_000).max(0)
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
    ordered_times: bool,
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
    pub(crate) fn new<O: Objects<Known = K>>(
        objects: &'static O,
        labels: &Labels,
        resume: Option<Cursor>,
        listed: &[Listed],
    ) -> Self {
        Self {
            provider: objects.provider(),
            event_type: objects.event_type(),
            ordered_times: objects.ordered_times(),
            resume,
            newest: resume,
            known: objects.known(labels, listed),
            partial: Vec::new(),
            overlong: false,
        }
    }

    /// Feeds a piece of the body; pushes a step per complete line.
    pub(crate) fn push(&mut self, mut chunk: &[u8], out: &mut VecDeque<Step>) {
        while let Some(pos) = chunk.iter().position(|b| *b == b'\n') {
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

    /// Whether an event at `time` may be one the sessions before the redial
    /// saw, replayed by its `since` (see [`Objects::ordered_times`]).
    fn seen_before(&self, time: Cursor) -> bool {
        match self.resume {
            None => false,
            Some(r) if self.ordered_times => time <= r,
            Some(r) => r.since_nanos() <= time.0 && time <= r,
        }
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
        mut event: Value,
        time: Cursor,
        cursor: Option<Cursor>,
    ) -> Result<Step, &'static str> {
        match event.get("Type").and_then(Value::as_str) {
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
            .get("Action")
            .or_else(|| event.get("status"))
            .and_then(Value::as_str)
            .ok_or("no Action")?
            .to_owned();
        let uid: Arc<str> = event
            .get("Actor")
            .and_then(|a| a.get("ID"))
            .or_else(|| event.get("id"))
            .and_then(Value::as_str)
            .filter(|id| !id.is_empty())
            .ok_or("no Actor.ID")?
            .into();
        let attributes = match event
            .get_mut("Actor")
            .and_then(|a| a.get_mut("Attributes"))
            .map(Value::take)
        {
            Some(Value::Object(attributes)) => attributes,
            _ => serde_json::Map::new(),
        };
        let name = attributes
            .get("name")
            .and_then(Value::as_str)
            .map(|n| n.trim_start_matches('/'))
            .filter(|n| !n.is_empty())
            .ok_or("no Actor.Attributes.name")?
            .to_owned();
        let event = Event {
            action,
            uid,
            name,
            attributes,
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

/// `timeNano`, else `time` in seconds.
fn event_time(event: &Value) -> Option<Cursor> {
    if let Some(n) = event.get("timeNano").and_then(Value::as_i64) {
        return Some(Cursor(n));
    }
    let secs = event.get("time").and_then(Value::as_i64)?;
    secs.checked_mul(1_000_000_000).map(Cursor)
}

#[cfg(test)]
mod tests {
    use super::*;
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
        assert_eq!(c.labels, Some(Labels::from([("app".into(), "web".into())])));
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
        assert_eq!(c.labels, Some(listed[0].labels.clone()));
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

    /// A kind whose event times are not ordered and whose every event needs
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
        fn ordered_times(&self) -> bool {
            false
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
                    labels: Labels::new(),
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
    fn unordered_times_drop_only_the_replay_window() {
        // Redialed from 1_000_000: the engine replays from 999_000 on.
        let mut feed = Feed::new(&Inspected, &Labels::new(), Some(Cursor(1_000_000)), &[]);
        let running = Ok(Some(serde_json::json!({"running": true})));
        let out = inspect_all(
            &mut feed,
            &[
                // Replayed: seen before the redial.
                thing("a", 1_000_000),
                thing("b", 999_000),
                // Older than `since`: no replay, a live event with an old stamp.
                thing("c", 998_999),
                thing("d", 5),
                // Newer than the cursor: never seen.
                thing("e", 1_000_001),
            ],
            &running,
        );
        assert_eq!(out[0], Observation::Progress(None));
        assert_eq!(out[1], Observation::Progress(None));
        // A live event older than the cursor passes, without moving it back.
        assert_eq!(change(&out[2]), ("c", EventKind::Started, -1));
        assert_eq!(change(&out[3]), ("d", EventKind::Started, -1));
        assert_eq!(change(&out[4]), ("e", EventKind::Started, 1_000_001));
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
