//! The feed's cases: framing, poison, the resume point, inspections.

use super::*;
use crate::location::discovery::Discovery;
use crate::protocol::containers::KnownContainers;
use crate::protocol::objects::History;
use crate::testing::{TABLE, event};
use lookout_core::{EventKind, Labels};
use serde_json::Value;
use std::time::{Duration, SystemTime};

fn feed(resume: Option<Cursor>, listed: &[Listed]) -> Feed<KnownContainers> {
    Feed::new(&TABLE, &Scope::default(), resume, listed)
}

/// The observations of steps that need no inspection.
fn obs(out: &mut VecDeque<FeedOutput>) -> Vec<Obs> {
    out.drain(..)
        .map(|s| match s {
            FeedOutput::Obs(o) => o,
            FeedOutput::Inspect { path, .. } => panic!("a container needs no inspection: {path}"),
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
    assert_eq!(
        out[2],
        Observation::Progress(Some(Cursor::from_unix_nanos(25)))
    );
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
                    .map(|l| l.keys().map(str::to_owned).collect::<Vec<_>>())
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
    let mut feed = feed(Some(Cursor::from_unix_nanos(100)), &[]);
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
    let listed = [Listed::new("kept".into(), true)
        .uid(Some("k1".into()))
        .labels(Labels::from([("from".into(), "list".into())]))];
    let mut feed = feed(Some(Cursor::from_unix_nanos(1)), &listed);
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
    assert_eq!(
        out[0],
        Observation::Progress(Some(Cursor::from_unix_nanos(10)))
    );
    assert_eq!(
        out[1],
        Observation::Progress(Some(Cursor::from_unix_nanos(11)))
    );
    assert_eq!(change(&out[2]), ("kept", EventKind::Stopped, 12));
    let Observation::Change(c) = &out[2] else {
        unreachable!()
    };
    assert_eq!(c.labels.as_deref(), Some(&listed[0].labels));
    assert_eq!(change(&out[3]), ("brief", EventKind::Created, 13));
    assert_eq!(change(&out[4]), ("brief", EventKind::Removed, 14));
    assert_eq!(
        out[5],
        Observation::Progress(Some(Cursor::from_unix_nanos(14)))
    );
}

#[test]
fn events_the_engine_sends_again_are_dropped() {
    // Podman < 4.5 after rotating its event log: the newer half of the
    // file comes again, after newer events, on the same stream.
    let mut feed = feed(None, &[]);
    let first = [
        event("create", "c1", "web", 10),
        event("start", "c1", "web", 20),
        event("die", "c1", "web", 30),
        event("start", "c1", "web", 40),
    ];
    let out = feed_lines(&mut feed, &first);
    assert_eq!(out.len(), 4);
    let mut replayed = first[1..].to_vec();
    // A late event (written after a newer one, never seen) is news.
    replayed.push(event("kill", "c1", "web", 35));
    replayed.push(event("die", "c1", "web", 50));
    let out = feed_lines(&mut feed, &replayed);
    assert_eq!(
        out[..3],
        [
            Observation::Progress(None),
            Observation::Progress(None),
            // The newest event seen, sent again: its cursor is the newest.
            Observation::Progress(Some(Cursor::from_unix_nanos(40))),
        ]
    );
    assert_eq!(out[3], Observation::Progress(None), "a kill is not told");
    assert_eq!(change(&out[4]), ("web", EventKind::Stopped, 50));
    assert_eq!(out.len(), 5);
}

#[test]
fn a_subscription_from_now_drops_what_the_engine_sends_from_before_it() {
    // Podman < 4.5 after rotating its log also sends events from before a
    // subscription: a restart of a listed container, told as news, would
    // stop and start it again.
    let listed = [Listed::new("kept".into(), true).uid(Some("k1".into()))];
    let second = 1_000_000_000;
    let mut feed = feed(None, &listed).subscribed_at(Cursor::from_unix_nanos(100 * second));
    let out = feed_lines(
        &mut feed,
        &[
            event("die", "k1", "kept", 97 * second),
            event("start", "k1", "kept", 97 * second + 1),
            // Within the margin (the `Date` is truncated to the second).
            event("die", "k1", "kept", 98 * second + 1),
            event("start", "k1", "kept", 101 * second),
        ],
    );
    assert_eq!(
        out[..2],
        [Observation::Progress(None), Observation::Progress(None)]
    );
    assert_eq!(
        change(&out[2]),
        ("kept", EventKind::Stopped, 98 * second + 1)
    );
    assert_eq!(change(&out[3]), ("kept", EventKind::Started, 101 * second));
    assert_eq!(out.len(), 4);
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
    fn actions(&self, _readiness: bool) -> Vec<&'static str> {
        Vec::new()
    }
    fn labels_in_events(&self) -> bool {
        false
    }
    fn list_path(&self, _readiness: bool) -> &'static str {
        "/things"
    }
    fn parse_list(&self, _body: &[u8], _readiness: bool) -> Result<Vec<Listed>, String> {
        Ok(Vec::new())
    }
    fn readiness_from(&self) -> crate::ReadinessFrom {
        crate::ReadinessFrom::Polled
    }
    fn history(&self) -> History {
        History::Unreliable
    }
    fn known(&'static self, _scope: &Scope, _listed: &[Listed]) -> KnownInspected {
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
                readiness: None,
            },
        }
    }
}

fn thing(uid: &str, nanos: i64) -> String {
    format!(
        r#"{{"Type":"thing","Action":"update","Actor":{{"ID":"{uid}","Attributes":{{"name":"{uid}"}}}},"timeNano":{nanos}}}"#
    )
}

/// The events of `lines` that pass, each inspected as `inspection` (again
/// while asked), with how many reads each took.
fn inspect_counted(
    feed: &mut Feed<KnownInspected>,
    lines: &[String],
    inspection: &Inspection,
) -> Vec<(Obs, u8)> {
    let mut out = VecDeque::new();
    feed.push((lines.join("\n") + "\n").as_bytes(), &mut out);
    out.into_iter()
        .map(|s| {
            let mut step = s;
            let mut reads = 0;
            loop {
                match step {
                    FeedOutput::Obs(o) => return (o, reads),
                    FeedOutput::Inspect { event, path } => {
                        assert_eq!(path, format!("/things/{}", event.uid()));
                        assert_eq!(event.inspections(), reads);
                        reads += 1;
                        step = feed.inspected(event, inspection);
                    }
                }
            }
        })
        .collect()
}

/// The events of `lines` that pass, each inspected as `inspection`.
fn inspect_all(
    feed: &mut Feed<KnownInspected>,
    lines: &[String],
    inspection: &Inspection,
) -> Vec<Obs> {
    inspect_counted(feed, lines, inspection)
        .into_iter()
        .map(|(o, _)| o)
        .collect()
}

#[test]
fn an_inspection_decides_or_costs_the_event_only() {
    let mut feed = Feed::new(&Inspected, &Scope::default(), None, &[]);
    let stopped = Inspection::Found(serde_json::json!({"running": false}));
    let out = inspect_all(&mut feed, &[thing("a", 10)], &stopped);
    assert_eq!(change(&out[0]), ("a", EventKind::Stopped, 10));
    let Observation::Change(c) = &out[0] else {
        unreachable!()
    };
    assert_eq!(c.uid.as_deref(), Some("a"));
    // Gone meanwhile, an unusable answer, an object that never shows what
    // the event needs (read again while asked, up to the bound): skipped,
    // the cursor moves on.
    for (object, nanos, reads) in [
        (Inspection::Gone, 11, 1),
        (
            Inspection::Unusable("GET /things/a answered 500: boom".to_owned()),
            12,
            1,
        ),
        (
            Inspection::Found(serde_json::json!({"state": "?"})),
            13,
            MAX_INSPECTIONS,
        ),
    ] {
        let out = inspect_counted(&mut feed, &[thing("a", nanos)], &object);
        assert_eq!(
            out,
            [(
                Observation::Progress(Some(Cursor::from_unix_nanos(nanos))),
                reads
            )]
        );
    }
    // Another type is skipped without an inspection.
    let other = r#"{"Type":"container","Action":"start","Actor":{"ID":"x","Attributes":{"name":"x"}},"timeNano":20}"#;
    let out = inspect_all(&mut feed, &[other.to_owned()], &stopped);
    assert_eq!(
        out,
        [Observation::Progress(Some(Cursor::from_unix_nanos(20)))]
    );
}

/// Podman's rules on the test table's actions.
static PODMAN: crate::Mapping = crate::Mapping {
    health: crate::HealthTable {
        status_in_action: false,
        unhealthy_when_paused: false,
        lists_none: false,
        status_in_list: false,
    },
    ..TABLE
};

fn running(uid: &str, readiness: Option<lookout_core::Readiness>) -> Listed {
    Listed::new("web".into(), true)
        .uid(Some(uid.into()))
        .labels(Labels::from([("app".into(), "web".into())]))
        .readiness(readiness)
}

fn readiness_of(obs: &Obs) -> (&str, EventKind, Option<lookout_core::Readiness>) {
    match obs {
        Observation::Change(c) => (c.id.as_str(), c.kind, c.readiness),
        other => panic!("not a change: {other:?}"),
    }
}

/// The same lines, with readiness watched and without: without, they are
/// decoded as they always were (no readiness, the health and pause events
/// skipped with their cursor).
#[test]
fn docker_health_and_pause_lines_with_readiness_and_without() {
    use lookout_core::{Health, Readiness};
    let lines = [
        event("health_status: healthy", "c1", "web", 10),
        event("pause", "c1", "web", 20),
        event("unpause", "c1", "web", 30),
        event("health_status: healthy", "c1", "web", 40),
        event("die", "c1", "web", 50),
    ];
    let starting = Some(Readiness::container(Health::Starting, false));
    let scope = Scope::new(Labels::new(), true);
    scope.checks.set(&Arc::from("c1"), true);
    let mut on = Feed::new(&TABLE, &scope, None, &[running("c1", starting)]);
    // The stop nobody asked for is read (will the engine restart it?):
    // fed without it, then decided with its inspection.
    let mut seen = feed_lines(&mut on, &lines[..4]);
    let mut out = VecDeque::new();
    on.push(format!("{}\n", lines[4]).as_bytes(), &mut out);
    let Some(FeedOutput::Inspect { event, .. }) = out.pop_front() else {
        panic!("a stop nobody asked for is inspected")
    };
    let exited = serde_json::json!({"State": {"Status": "exited", "ExitCode": 0}});
    match on.inspected(event, &Inspection::Found(exited)) {
        FeedOutput::Obs(o) => seen.push(o),
        FeedOutput::Inspect { path, .. } => panic!("read once: {path}"),
    }
    let told: Vec<_> = seen
        .iter()
        .map(|o| {
            let (id, kind, r) = readiness_of(o);
            (id.to_owned(), kind, r)
        })
        .collect();
    let c = |health, paused| Some(Readiness::container(health, paused));
    let web = || "web".to_owned();
    assert_eq!(
        told,
        [
            (web(), EventKind::Ready, c(Health::Healthy, false)),
            (web(), EventKind::Unready, c(Health::Unhealthy, true)),
            (web(), EventKind::Unready, c(Health::Unhealthy, false)),
            (web(), EventKind::Ready, c(Health::Healthy, false)),
            (web(), EventKind::Stopped, c(Health::Unhealthy, false)),
        ]
    );
    let mut off = Feed::new(&TABLE, &Scope::default(), None, &[running("c1", None)]);
    let out = feed_lines(&mut off, &lines);
    assert_eq!(
        out[..4],
        [10, 20, 30, 40].map(|n| Observation::Progress(Some(Cursor::from_unix_nanos(n))))
    );
    assert_eq!(readiness_of(&out[4]), ("web", EventKind::Stopped, None));
}

/// Podman's `health_status` (the previous check's status in the event):
/// the container is read, and read again after a pause until the check the
/// event announced is logged.
#[test]
fn podman_health_is_read_again_until_the_check_is_logged() {
    use lookout_core::{Health, Readiness};
    // 2026-12-02T08:06:08Z
    const T: i64 = 1_796_198_768_000_000_000;
    let scope = Scope::new(Labels::new(), true);
    scope.checks.set(&Arc::from("c1"), true);
    let healthy = Some(Readiness::container(Health::Healthy, false));
    let mut feed = Feed::new(&PODMAN, &scope, None, &[running("c1", healthy)]);
    let line = event("health_status", "c1", "web", T);
    let mut out = VecDeque::new();
    feed.push(format!("{line}\n").as_bytes(), &mut out);
    let Some(FeedOutput::Inspect { event, path }) = out.pop_front() else {
        panic!("a Podman health_status is inspected")
    };
    assert_eq!(path, "/containers/c1/json");
    let object = |status: &str, end: &str| {
        Inspection::Found(serde_json::json!({
            "State": {"Running": true, "Paused": false, "Health": {
                "Status": status,
                "Log": [{"Start": "2026-12-02T08:06:07.1Z", "End": end, "ExitCode": 1}],
            }},
            "Config": {"Healthcheck": {"Test": ["CMD", "true"]}},
        }))
    };
    // The previous check's entry, ended 500 ms before the event.
    let FeedOutput::Inspect { event, path } =
        feed.inspected(event, &object("healthy", "2026-12-02T08:06:07.5Z"))
    else {
        panic!("read again")
    };
    assert_eq!(
        (event.inspections(), path.as_str()),
        (1, "/containers/c1/json")
    );
    assert_eq!(
        reinspect_after(event.inspections()),
        Duration::from_millis(20)
    );
    let FeedOutput::Obs(obs) =
        feed.inspected(event, &object("unhealthy", "2026-12-02T08:06:08.06Z"))
    else {
        panic!("logged now")
    };
    assert_eq!(
        readiness_of(&obs),
        (
            "web",
            EventKind::Unready,
            Some(Readiness::container(Health::Unhealthy, false))
        )
    );
    let Observation::Change(c) = &obs else {
        unreachable!()
    };
    assert_eq!(c.cursor, Some(Cursor::from_unix_nanos(T)));
    let pauses: Vec<u64> = (1..=MAX_INSPECTIONS)
        .map(|n| u64::try_from(reinspect_after(n).as_millis()).unwrap_or(u64::MAX))
        .collect();
    assert_eq!(pauses, [20, 40, 80, 160, 320, 500, 500, 500, 500, 500]);
}
