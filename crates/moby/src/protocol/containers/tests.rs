//! The container rules' cases: the list, events with and without
//! readiness, inspections, RFC 3339 times.

use super::*;
use lookout_core::Reason;

static TABLE: Mapping = Mapping {
    provider: "test",
    actions: &[],
    ignored: &[],
    non_label_attributes: &[],
    history: History::Until,
    discovery: Discovery {
        host_var: "LOOKOUT_TEST_HOST",
        sockets: &[],
        docker_contexts: false,
        podman_connections: false,
        ssh_cli: "docker",
    },
    health: crate::HealthTable {
        status_in_action: true,
        unhealthy_when_paused: true,
        lists_none: true,
        status_in_list: false,
    },
    stops_logged: true,
};

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
    let listed = parse_list(body, &TABLE, false).expect("valid list");
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
    assert!(parse_list(b"{}", &TABLE, false).is_err());
    assert!(parse_list(b"[", &TABLE, false).is_err());
}

use crate::testing;
use serde_json::json;

/// Docker's rules (the shared test table: `create`, `start`, `die`,
/// `destroy`).
static DOCKER: &Mapping = &testing::TABLE;

/// Podman's rules on the same actions.
static PODMAN: Mapping = Mapping {
    health: crate::HealthTable {
        status_in_action: false,
        unhealthy_when_paused: false,
        lists_none: false,
        status_in_list: false,
    },
    ..testing::TABLE
};

fn ev(action: &str, uid: &str, nanos: i64) -> Event {
    let attributes = json!({"name": "web", "app": "web"});
    let Value::Object(attributes) = attributes else {
        unreachable!()
    };
    Event::new(
        action,
        uid,
        "web",
        attributes,
        Cursor::from_unix_nanos(nanos),
    )
}

fn listed(uid: &str, health: Health, paused: bool) -> Listed {
    Listed::new("web".into(), true)
        .uid(Some(uid.into()))
        .labels(Labels::from([("app".into(), "web".into())]))
        .readiness(Some(Readiness::container(health, paused)))
}

/// A report's kind and readiness.
fn told(d: &Decision) -> (EventKind, Option<Readiness>) {
    match d {
        Decision::Report {
            kind, readiness, ..
        }
        | Decision::Explained {
            kind, readiness, ..
        } => (*kind, *readiness),
        other => panic!("not a report: {other:?}"),
    }
}

/// An explained report's reason.
fn why(d: &Decision) -> &Reason {
    match d {
        Decision::Explained { reason, .. } => reason,
        other => panic!("not explained: {other:?}"),
    }
}

#[allow(clippy::unnecessary_wraps)]
fn c(health: Health, paused: bool) -> Option<Readiness> {
    Some(Readiness::container(health, paused))
}

/// A container as `GET /containers/{id}/json` shows it: its health
/// (none: no check) and the newest check's end.
fn inspected(health: Option<&str>, paused: bool, newest_end: &str) -> Value {
    let mut state = json!({"Status": "running", "Running": true, "Paused": paused});
    let mut config = json!({"Healthcheck": {"Test": ["NONE"]}});
    if let Some(health) = health {
        state["Health"] = json!({
            "Status": health,
            "FailingStreak": 0,
            "Log": [
                {"Start": "2026-12-02T08:06:07.1Z", "End": "2026-12-02T08:06:07.2Z", "ExitCode": 0},
                {"Start": "2026-12-02T08:06:08.1Z", "End": newest_end, "ExitCode": 0},
            ],
        });
        config = json!({"Healthcheck": {"Test": ["CMD", "/bin/busybox", "true"]}});
    }
    json!({"Id": "a1", "State": state, "Config": config})
}

/// 2026-12-02T08:06:08Z.
const T: i64 = 1_796_198_768_000_000_000;

#[test]
fn docker_tells_the_status_in_the_action() {
    let scope = Scope::new(Labels::new(), true);
    scope.checks.set(&Arc::from("a1"), true);
    let mut k = DOCKER.known(&scope, &[listed("a1", Health::Starting, false)]);
    let healthy = k.event(&ev("health_status: healthy", "a1", 1));
    assert_eq!(
        told(&healthy),
        (EventKind::Ready, c(Health::Healthy, false))
    );
    let Decision::Report { labels, .. } = &healthy else {
        unreachable!()
    };
    assert_eq!(**labels, Labels::from([("app".into(), "web".into())]));
    // Unhealthy: the failing check's output is read (and the status with it).
    let unhealthy = ev("health_status: unhealthy", "a1", T);
    assert_eq!(
        k.event(&unhealthy),
        Decision::Inspect("/containers/a1/json".into())
    );
    let mut object = inspected(Some("unhealthy"), false, "2026-12-02T08:06:07.99Z");
    object["State"]["Health"]["Log"][1]["Output"] =
        json!("  wget: server returned error: HTTP/1.1 503\n");
    let decided = k.inspected(&unhealthy.clone().inspected_times(1), Some(&object));
    assert_eq!(
        told(&decided),
        (EventKind::Unready, c(Health::Unhealthy, false))
    );
    assert_eq!(
        why(&decided).message.as_deref(),
        Some("wget: server returned error: HTTP/1.1 503")
    );
    // A check that printed nothing: unready, with nothing to say.
    object["State"]["Health"]["Log"][1]["Output"] = json!("");
    let decided = k.inspected(&unhealthy.clone().inspected_times(1), Some(&object));
    assert!(matches!(
        decided,
        Decision::Report {
            kind: EventKind::Unready,
            ..
        }
    ));
    assert_eq!(
        told(&k.event(&ev("health_status:  healthy ", "a1", 3))),
        (EventKind::Ready, c(Health::Healthy, false))
    );
    assert_eq!(
        k.event(&ev("health_status: sideways", "a1", 4)),
        Decision::Undecodable("a health_status without a known status")
    );
    assert!(matches!(
        k.event(&ev("health_status", "a1", 5)),
        Decision::Undecodable(_)
    ));
    // Of a container this session does not know: stale.
    assert_eq!(
        k.event(&ev("health_status: healthy", "z9", 6)),
        Decision::Skip
    );
}

#[test]
fn docker_pause_and_unpause() {
    let scope = Scope::new(Labels::new(), true);
    scope.checks.set(&Arc::from("a1"), true);
    scope.checks.set(&Arc::from("b2"), false);
    let mut b = listed("b2", Health::None, false);
    b.id = "plain".into();
    let mut k = DOCKER.known(&scope, &[listed("a1", Health::Healthy, false), b]);
    // Docker sets a checked container unhealthy at the pause, silently;
    // unpaused, it is ready again at its next good probe.
    assert_eq!(
        told(&k.event(&ev("pause", "a1", 1))),
        (EventKind::Unready, c(Health::Unhealthy, true))
    );
    assert_eq!(
        told(&k.event(&ev("unpause", "a1", 2))),
        (EventKind::Unready, c(Health::Unhealthy, false))
    );
    assert_eq!(
        told(&k.event(&ev("health_status: healthy", "a1", 3))),
        (EventKind::Ready, c(Health::Healthy, false))
    );
    // Without a check: ready again at once.
    assert_eq!(
        told(&k.event(&ev("pause", "b2", 4))),
        (EventKind::Unready, c(Health::None, true))
    );
    assert_eq!(
        told(&k.event(&ev("unpause", "b2", 5))),
        (EventKind::Ready, c(Health::None, false))
    );
    // A stop ends the pause; a start is `starting` with a check.
    k.event(&ev("pause", "a1", 6));
    // With readiness, a stop nobody asked for is read: will it restart?
    let die = ev("die", "a1", 7);
    assert_eq!(
        k.event(&die),
        Decision::Inspect("/containers/a1/json".into())
    );
    let exited =
        json!({"Id": "a1", "State": {"Status": "exited", "Running": false, "ExitCode": 0}});
    let decided = k.inspected(&die.clone().inspected_times(1), Some(&exited));
    assert_eq!(
        told(&decided),
        (EventKind::Stopped, c(Health::Unhealthy, false))
    );
    assert_eq!(
        told(&k.event(&ev("start", "a1", 8))),
        (EventKind::Started, c(Health::Starting, false))
    );
    assert_eq!(
        told(&k.event(&ev("start", "b2", 9))),
        (EventKind::Started, c(Health::None, false))
    );
}

#[test]
fn podman_keeps_the_status_across_a_pause() {
    let scope = Scope::new(Labels::new(), true);
    scope.checks.set(&Arc::from("a1"), true);
    let mut k = PODMAN.known(&scope, &[listed("a1", Health::Healthy, false)]);
    assert_eq!(
        told(&k.event(&ev("pause", "a1", 1))),
        (EventKind::Unready, c(Health::Healthy, true))
    );
    assert_eq!(
        told(&k.event(&ev("unpause", "a1", 2))),
        (EventKind::Ready, c(Health::Healthy, false))
    );
}

/// Podman's `health_status` carries the previous check's status (4.3):
/// the container is read, once the check the event announced is logged.
#[test]
fn podman_reads_the_status_once_the_check_is_logged() {
    let scope = Scope::new(Labels::new(), true);
    scope.checks.set(&Arc::from("a1"), true);
    let mut k = PODMAN.known(&scope, &[listed("a1", Health::Healthy, false)]);
    let event = ev("health_status", "a1", T);
    assert_eq!(
        k.event(&event),
        Decision::Inspect("/containers/a1/json".into())
    );
    // Logged: the newest check ended after the event (4.3), or just
    // before it (4.7: logged, then told).
    for end in ["2026-12-02T08:06:08.1Z", "2026-12-02T08:06:07.97Z"] {
        let object = inspected(Some("unhealthy"), false, end);
        assert_eq!(
            told(&k.inspected(&event.clone().inspected_times(1), Some(&object))),
            (EventKind::Unready, c(Health::Unhealthy, false)),
            "newest check ended {end}"
        );
    }
    // Not yet: the newest entry is the previous check's, which ended
    // well before this one's event. Read again, up to the bound.
    let stale = inspected(Some("healthy"), false, "2026-12-02T08:06:07.5Z");
    for n in 1..MAX_INSPECTIONS {
        assert_eq!(
            k.inspected(&event.clone().inspected_times(n), Some(&stale)),
            Decision::Inspect("/containers/a1/json".into()),
            "read {n}"
        );
    }
    assert_eq!(
        told(&k.inspected(
            &event.clone().inspected_times(MAX_INSPECTIONS),
            Some(&stale)
        )),
        (EventKind::Ready, c(Health::Healthy, false)),
        "the last read is taken as it is"
    );
    // A log that cannot be read tells nothing: taken as it is.
    let mut unreadable = inspected(Some("unhealthy"), true, "yesterday");
    assert_eq!(
        told(&k.inspected(&event.clone().inspected_times(1), Some(&unreadable))),
        (EventKind::Unready, c(Health::Unhealthy, true))
    );
    unreadable["State"]["Health"]["Log"] = json!([]);
    assert_eq!(
        told(&k.inspected(&event.clone().inspected_times(1), Some(&unreadable))),
        (EventKind::Unready, c(Health::Unhealthy, true))
    );
    // Gone meanwhile: nothing (its removal follows).
    assert_eq!(k.inspected(&event, None), Decision::Skip);
}

/// Whether a container has a check is learnt once: at its first start
/// (one inspection) when the snapshot did not tell, then from the
/// watch's scope, in this session and the next.
#[test]
fn a_start_of_an_unknown_container_is_inspected_once() {
    let scope = Scope::new(Labels::new(), true);
    let mut k = DOCKER.known(&scope, &[]);
    assert!(matches!(
        k.event(&ev("create", "n1", 1)),
        Decision::Report {
            kind: EventKind::Created,
            readiness: None,
            ..
        }
    ));
    let start = ev("start", "n1", 2);
    assert_eq!(
        k.event(&start),
        Decision::Inspect("/containers/n1/json".into())
    );
    // A check that passed since the start is not taken: its event follows.
    let object = inspected(Some("healthy"), false, "2026-12-02T08:06:08.2Z");
    assert_eq!(
        told(&k.inspected(&start.clone().inspected_times(1), Some(&object))),
        (EventKind::Started, c(Health::Starting, false))
    );
    assert_eq!(scope.checks.get("n1"), Some(true));
    k.event(&ev("die", "n1", 3));
    assert_eq!(
        told(&k.event(&ev("start", "n1", 4))),
        (EventKind::Started, c(Health::Starting, false))
    );
    // The next session of the watch knows it too.
    let mut next = DOCKER.known(&scope, &[listed("n1", Health::Unhealthy, false)]);
    assert_eq!(
        told(&next.event(&ev("start", "n1", 5))),
        (EventKind::Started, c(Health::Starting, false))
    );
    // Without a check: ready at once.
    k.event(&ev("create", "p1", 6));
    let start = ev("start", "p1", 7);
    assert!(matches!(k.event(&start), Decision::Inspect(_)));
    let plain = inspected(None, false, "");
    assert_eq!(
        told(&k.inspected(&start.inspected_times(1), Some(&plain))),
        (EventKind::Started, c(Health::None, false))
    );
    assert_eq!(scope.checks.get("p1"), Some(false));
    // Gone before it could be read: started, its readiness unknown.
    k.event(&ev("create", "g1", 8));
    let start = ev("start", "g1", 9);
    assert!(matches!(k.event(&start), Decision::Inspect(_)));
    assert_eq!(
        told(&k.inspected(&start.inspected_times(1), None)),
        (EventKind::Started, None)
    );
}

/// In a replayed history, a container may first show by its
/// `unpause` (paused before the last event seen): its health was told
/// by no event of this history. Found by the e2e `cut` scenario: it was
/// taken for `none`, so an unhealthy container was told ready (live),
/// then unready by the snapshot.
#[test]
fn an_unpause_first_seen_in_a_replay_takes_the_real_health() {
    let scope = Scope::new(Labels::new(), true);
    scope.checks.set(&Arc::from("a1"), true);
    scope.checks.set(&Arc::from("b2"), false);
    // Docker: a checked container was set unhealthy at its pause.
    let mut k = DOCKER.known_history(&scope);
    assert_eq!(
        told(&k.event(&ev("unpause", "a1", 1))),
        (EventKind::Unready, c(Health::Unhealthy, false))
    );
    assert_eq!(
        told(&k.event(&ev("unpause", "b2", 2))),
        (EventKind::Ready, c(Health::None, false))
    );
    // Not known to have a check, or Podman's (kept as it was): read.
    let unpause = ev("unpause", "c3", 3);
    assert_eq!(
        k.event(&unpause),
        Decision::Inspect("/containers/c3/json".into())
    );
    let object = inspected(Some("unhealthy"), false, "2026-12-02T08:06:08.2Z");
    assert_eq!(
        told(&k.inspected(&unpause.inspected_times(1), Some(&object))),
        (EventKind::Unready, c(Health::Unhealthy, false))
    );
    let mut k = PODMAN.known_history(&scope);
    let unpause = ev("unpause", "a1", 4);
    assert_eq!(
        k.event(&unpause),
        Decision::Inspect("/containers/a1/json".into())
    );
    let object = inspected(Some("healthy"), false, "2026-12-02T08:06:08.2Z");
    assert_eq!(
        told(&k.inspected(&unpause.inspected_times(1), Some(&object))),
        (EventKind::Ready, c(Health::Healthy, false))
    );
    // Once known, the next unpause needs no read.
    k.event(&ev("pause", "a1", 5));
    assert_eq!(
        told(&k.event(&ev("unpause", "a1", 6))),
        (EventKind::Ready, c(Health::Healthy, false))
    );
    // First seen by its create: a new container, nothing to read.
    let mut k = PODMAN.known_history(&scope);
    k.event(&ev("create", "d4", 7));
    assert_eq!(
        told(&k.event(&ev("unpause", "d4", 8))),
        (EventKind::Ready, c(Health::None, false))
    );
}

/// Without readiness the events are what they always were: health,
/// pause and unpause mean nothing, a report carries no readiness, the
/// subscription does not ask for them and a start is never inspected.
#[test]
fn readiness_off_changes_nothing() {
    for table in [DOCKER, &PODMAN] {
        assert_eq!(
            table.actions(false),
            ["create", "start", "die", "destroy", "oom"]
        );
        assert_eq!(
            table.actions(true),
            [
                "create",
                "start",
                "die",
                "destroy",
                "oom",
                "health_status",
                "pause",
                "unpause"
            ]
        );
        let scope = Scope::new(Labels::new(), false);
        let mut k = table.known(&scope, &[listed("a1", Health::None, false)]);
        for action in [
            "health_status: healthy",
            "health_status",
            "pause",
            "unpause",
        ] {
            assert_eq!(k.event(&ev(action, "a1", 1)), Decision::Skip, "{action}");
        }
        for (action, kind) in [
            ("die", EventKind::Stopped),
            ("start", EventKind::Started),
            ("create", EventKind::Created),
        ] {
            let uid = if action == "create" { "n1" } else { "a1" };
            assert_eq!(
                told(&k.event(&ev(action, uid, 2))),
                (kind, None),
                "{action}"
            );
        }
        assert_eq!(
            told(&k.event(&ev("start", "n1", 3))),
            (EventKind::Started, None)
        );
        assert_eq!(
            told(&k.event(&ev("destroy", "a1", 4))),
            (EventKind::Removed, None)
        );
        let list = br#"[{"Id":"a1","Names":["/web"],"State":"paused"}]"#;
        assert_eq!(
            parse_list(list, table, false).expect("list")[0].readiness,
            None
        );
        assert_eq!(
            parse_list(list, table, true).expect("list")[0].readiness,
            c(Health::None, true)
        );
    }
}

#[test]
fn rfc3339_times() {
    assert_eq!(rfc3339_nanos("1970-01-01T00:00:00Z"), Some(0));
    assert_eq!(
        rfc3339_nanos("2026-12-02T08:06:08Z"),
        Some(T),
        "the tests' T"
    );
    assert_eq!(
        rfc3339_nanos("2026-12-02T08:06:07.539127241Z"),
        Some(T - 460_872_759)
    );
    assert_eq!(
        rfc3339_nanos("2026-12-02T09:06:08.5+01:00"),
        Some(T + 500_000_000)
    );
    assert_eq!(rfc3339_nanos("2026-12-02T07:36:08-00:30"), Some(T));
    assert_eq!(
        rfc3339_nanos("2000-02-29T00:00:00Z"),
        Some(951_782_400_000_000_000)
    );
    assert_eq!(rfc3339_nanos("1969-12-31T23:59:59.9Z"), Some(-100_000_000));
    for bad in [
        "",
        "2026-12-02",
        "2026-13-02T00:00:00Z",
        "2026-12-02T24:00:00Z",
        "2026-12-02T08:06:08",
        "2026-12-02T08:06:08.1234567890Z",
        "2026-12-02T08:06:08.x1Z",
        "99999-12-02T08:06:08Z",
        "2026-12-02T08:06:08+0100",
        "२०२६-12-02T08:06:08Z",
        "0001-01-01T00:00:00Z",
    ] {
        assert_eq!(rfc3339_nanos(bad), None, "{bad:?}");
    }
}

/// An event with attributes (`exitCode`, `signal`…) besides the name.
fn ev_with(action: &str, uid: &str, nanos: i64, extra: &[(&str, &str)]) -> Event {
    let mut attributes = serde_json::Map::new();
    attributes.insert("name".into(), json!("web"));
    for (k, v) in extra {
        attributes.insert((*k).into(), json!(v));
    }
    Event::new(
        action,
        uid,
        "web",
        attributes,
        Cursor::from_unix_nanos(nanos),
    )
}

/// Docker's and Podman's stop actions, as their tables map them.
static STOPS: Mapping = Mapping {
    actions: &[
        ("create", EventKind::Created),
        ("start", EventKind::Started),
        ("die", EventKind::Stopped),
        ("destroy", EventKind::Removed),
        ("kill", EventKind::Stopping),
        ("stop", EventKind::Stopping),
    ],
    ..testing::TABLE
};

#[test]
fn a_die_says_its_exit_code_signal_and_oom() {
    use lookout_core::{Outcome, Signal};
    let scope = Scope::new(Labels::new(), false);
    let mut k = STOPS.known(&scope, &[listed("a1", Health::None, false)]);
    let d = k.event(&ev_with("die", "a1", 1, &[("exitCode", "3")]));
    assert_eq!(told(&d).0, EventKind::Stopped);
    let r = why(&d);
    assert_eq!(
        (r.outcome, r.exit_code, r.signal, r.oom),
        (Some(Outcome::Failed), Some(3), None, false)
    );
    k.event(&ev("start", "a1", 2));
    let d = k.event(&ev_with("die", "a1", 3, &[("exitCode", "0")]));
    assert_eq!(why(&d).outcome, Some(Outcome::Completed));
    // The OOM killer: `oom`, then a `die` with 137.
    k.event(&ev("start", "a1", 4));
    assert_eq!(k.event(&ev("oom", "a1", 5)), Decision::Skip);
    let d = k.event(&ev_with("die", "a1", 6, &[("exitCode", "137")]));
    let r = why(&d);
    assert_eq!(
        (r.outcome, r.signal, r.oom),
        (Some(Outcome::Failed), Some(Signal::KILL), true)
    );
    // A start forgets it: the next kill by signal is no OOM.
    k.event(&ev("start", "a1", 7));
    let d = k.event(&ev_with("die", "a1", 8, &[("exitCode", "139")]));
    let r = why(&d);
    assert_eq!(
        (r.signal.map(Signal::name).as_deref(), r.oom),
        (Some("SIGSEGV"), false)
    );
    // Podman's compat `died` carries `containerExitCode` too.
    k.event(&ev("start", "a1", 9));
    let d = k.event(&ev_with("die", "a1", 10, &[("containerExitCode", "7")]));
    assert_eq!(why(&d).exit_code, Some(7));
}

#[test]
fn a_stop_request_is_stopping_and_its_die_is_not_inspected() {
    let scope = Scope::new(Labels::new(), true);
    scope.checks.set(&Arc::from("a1"), false);
    let mut k = STOPS.known(&scope, &[listed("a1", Health::None, false)]);
    // `docker kill -s HUP` stops nothing.
    assert_eq!(
        k.event(&ev_with("kill", "a1", 1, &[("signal", "1")])),
        Decision::Skip
    );
    // `docker stop`: SIGTERM, then (after its timeout) SIGKILL, then `die`.
    let d = k.event(&ev_with("kill", "a1", 2, &[("signal", "15")]));
    assert_eq!(told(&d), (EventKind::Stopping, None));
    let d = k.event(&ev_with("kill", "a1", 3, &[("signal", "9")]));
    assert_eq!(told(&d).0, EventKind::Stopping);
    // Asked to stop: the engine restarts nothing, no inspection needed.
    let d = k.event(&ev_with("die", "a1", 4, &[("exitCode", "137")]));
    assert_eq!(told(&d).0, EventKind::Stopped);
    // Podman's `kill` and `stop` name no signal.
    k.event(&ev("start", "a1", 5));
    assert_eq!(told(&k.event(&ev("stop", "a1", 6))).0, EventKind::Stopping);
    k.event(&ev_with("die", "a1", 7, &[("exitCode", "0")]));
    // A start forgets the request: the next `die` is read.
    k.event(&ev("start", "a1", 8));
    let die = ev_with("die", "a1", 9, &[("exitCode", "1")]);
    assert_eq!(
        k.event(&die),
        Decision::Inspect("/containers/a1/json".into())
    );
}

#[test]
fn an_inspected_die_says_whether_the_engine_restarts_it() {
    use lookout_core::Outcome;
    let scope = Scope::new(Labels::new(), true);
    scope.checks.set(&Arc::from("a1"), false);
    let mut k = STOPS.known(&scope, &[listed("a1", Health::None, false)]);
    let die = ev_with("die", "a1", T, &[("exitCode", "1")]);
    let inspected = |state: Value| json!({"Id": "a1", "State": state});
    // Its restart manager decided before the event: `restarting`.
    let d = k.inspected(
        &die,
        Some(&inspected(
            json!({"Status": "restarting", "Restarting": true, "Running": false}),
        )),
    );
    assert_eq!(
        (why(&d).outcome, why(&d).restarting),
        (Some(Outcome::Failed), true)
    );
    // Already running again, since the event.
    let d = k.inspected(
        &die,
        Some(&inspected(
            json!({"Running": true, "StartedAt": "2026-12-02T08:06:08.1Z"}),
        )),
    );
    assert!(why(&d).restarting);
    // Running since before the event: that is not a restart of this stop.
    let d = k.inspected(
        &die,
        Some(&inspected(
            json!({"Running": true, "StartedAt": "2026-12-02T08:06:07Z"}),
        )),
    );
    assert!(!why(&d).restarting);
    // Exit 0, will not restart: completed; OOMKilled read as well.
    let ok = ev_with("die", "a1", T, &[("exitCode", "0")]);
    let d = k.inspected(&ok, Some(&inspected(json!({"Status": "exited"}))));
    assert_eq!(why(&d).outcome, Some(Outcome::Completed));
    let oom = ev_with("die", "a1", T, &[("exitCode", "137")]);
    let d = k.inspected(&oom, Some(&inspected(json!({"OOMKilled": true}))));
    assert!(why(&d).oom);
    // Podman restarts after the event: its policy and count say it.
    let policy = |name: &str, max: u64, count: u64| {
        json!({"Id": "a1", "State": {"Status": "exited"}, "RestartCount": count,
               "HostConfig": {"RestartPolicy": {"Name": name, "MaximumRetryCount": max}}})
    };
    for (object, event, restarting) in [
        (policy("on-failure", 2, 0), &die, true),
        (policy("on-failure", 2, 1), &die, true),
        (policy("on-failure", 2, 2), &die, false),
        (policy("on-failure", 0, 9), &die, true),
        (policy("on-failure", 2, 0), &ok, false),
        (policy("always", 0, 5), &ok, true),
        (policy("unless-stopped", 0, 0), &die, true),
        (policy("no", 0, 0), &die, false),
    ] {
        let d = k.inspected(event, Some(&object));
        assert_eq!(why(&d).restarting, restarting, "{object}");
    }
    // A success the engine starts again is no completion.
    let d = k.inspected(&ok, Some(&policy("always", 0, 0)));
    assert_eq!(why(&d).outcome, Some(Outcome::Failed));
    // Gone before it could be read: the event's own words.
    let d = k.inspected(&die, None);
    assert_eq!(why(&d).exit_code, Some(1));
}

#[test]
fn the_list_says_why_a_container_does_not_run() {
    use lookout_core::{Outcome, Signal};
    let body = br#"[
      {"Id":"a1","Names":["/ok"],"State":"exited","Status":"Exited (0) 2 seconds ago"},
      {"Id":"b2","Names":["/crashed"],"State":"exited","Status":"Exited (3) 2 seconds ago"},
      {"Id":"c3","Names":["/killed"],"State":"exited","Status":"Exited (137) 2 seconds ago"},
      {"Id":"d4","Names":["/termed"],"State":"exited","Status":"Exited (143) 1 hour ago"},
      {"Id":"e5","Names":["/again"],"State":"restarting","Status":"Restarting (1) Less than a second ago"},
      {"Id":"f6","Names":["/new"],"State":"created","Status":"Created"},
      {"Id":"g7","Names":["/up"],"State":"running","Status":"Up 3 minutes (healthy)"},
      {"Id":"h8","Names":["/odd"],"State":"exited","Status":"Exited sometime"}
    ]"#;
    let listed = parse_list(body, &TABLE, false).expect("valid list");
    let reasons: Vec<_> = listed
        .iter()
        .map(|l| {
            l.reason
                .as_ref()
                .map(|r| (r.outcome, r.exit_code, r.signal, r.restarting))
        })
        .collect();
    assert_eq!(
        reasons,
        [
            Some((Some(Outcome::Completed), Some(0), None, false)),
            Some((Some(Outcome::Failed), Some(3), None, false)),
            Some((Some(Outcome::Stopped), Some(137), Some(Signal::KILL), false)),
            Some((Some(Outcome::Stopped), Some(143), Some(Signal::TERM), false)),
            Some((Some(Outcome::Failed), Some(1), None, true)),
            None,
            None,
            None,
        ]
    );
}
