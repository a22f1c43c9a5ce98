use lookout_core::EventKind::{Created, Removed, Started, Stopped};
use serde_json::json;

use super::*;

fn service(uid: &str, name: &str, labels: &Value, mode: &Value) -> Value {
    json!({"ID": uid, "Version": {"Index": 1}, "Spec": {"Name": name, "Labels": labels, "Mode": mode}})
}

fn replicated(n: u64) -> Value {
    json!({"Replicated": {"Replicas": n}})
}

fn event(action: &str, uid: &str, attributes: &Value) -> Event {
    let mut attributes = attributes.as_object().cloned().unwrap_or_default();
    attributes.insert("name".into(), json!(format!("svc-{uid}")));
    Event::new(
        action,
        uid,
        format!("svc-{uid}"),
        attributes,
        Cursor::from_unix_nanos(1),
    )
}

fn app(value: &str) -> Labels {
    Labels::from([("app".to_owned(), value.to_owned())])
}

fn report(kind: EventKind, labels: Labels) -> Decision {
    if kind == Stopped {
        return Decision::Explained {
            kind,
            labels: Arc::new(labels),
            readiness: None,
            reason: Arc::new(Reason::stop(Outcome::Stopped)),
        };
    }
    Decision::Report {
        kind,
        labels: Arc::new(labels),
        readiness: None,
    }
}

/// A session that listed `listed` under the filter `app=web`.
fn known(listed: &[Listed]) -> KnownServices {
    SERVICES.known(&Scope::new(app("web"), false), listed)
}

fn listed(uid: &str, running: bool, labels: Labels) -> Listed {
    Listed::new(InstanceId::from(format!("svc-{uid}")), running)
        .uid(Some(uid.into()))
        .labels(labels)
}

#[test]
fn parses_the_service_list() {
    let body = json!([
        service("a1", "web", &json!({"app": "web"}), &replicated(2)),
        service("b2", "idle", &Value::Null, &replicated(0)),
        service("c3", "agent", &json!({}), &json!({"Global": {}})),
        service("d4", "job", &json!({}), &json!({"ReplicatedJob": {"MaxConcurrent": 1}})),
        service("e5", "bare", &json!({}), &Value::Null),
        {"Spec": {"Name": "no-id"}},
        {"ID": "f6", "Spec": {"Name": ""}},
    ])
    .to_string();
    let expected = [
        ("a1", "web", true, app("web")),
        ("b2", "idle", false, Labels::new()),
        ("c3", "agent", true, Labels::new()),
        ("d4", "job", true, Labels::new()),
        ("e5", "bare", true, Labels::new()),
    ]
    .map(|(uid, name, running, labels)| {
        Listed::new(InstanceId::from(name), running)
            .uid(Some(uid.into()))
            .labels(labels)
            .reason((!running).then(|| Arc::new(Reason::stop(Outcome::Stopped))))
    });
    assert_eq!(
        SERVICES.parse_list(body.as_bytes(), false),
        Ok(expected.to_vec())
    );
    assert!(SERVICES.parse_list(b"{}", false).is_err());
    assert!(SERVICES.parse_list(b"[", false).is_err());
}

#[test]
fn subscribes_to_service_events_and_filters_them_itself() {
    assert_eq!(SERVICES.event_type(), "service");
    assert_eq!(SERVICES.actions(false), ["create", "update", "remove"]);
    assert!(
        !SERVICES.labels_in_events(),
        "service events carry no labels"
    );
    assert_eq!(
        SERVICES.history(),
        History::Unreliable,
        "service events are stamped with UpdatedAt: `since` proves nothing"
    );
    assert_eq!(SERVICES.list_path(false), "/services");
    assert_eq!(SERVICES.discovery().host_var(), "DOCKER_HOST");
}

#[test]
fn a_created_service_is_inspected_then_reported_by_its_replicas() {
    let mut k = known(&[]);
    let create = event("create", "a1", &json!({}));
    assert_eq!(k.event(&create), Decision::Inspect("/services/a1".into()));
    let running = service("a1", "svc-a1", &json!({"app": "web"}), &replicated(1));
    assert_eq!(
        k.inspected(&create, Some(&running)),
        report(Started, app("web"))
    );

    let create = event("create", "b2", &json!({}));
    let idle = service("b2", "svc-b2", &json!({"app": "web"}), &replicated(0));
    assert_eq!(
        k.inspected(&create, Some(&idle)),
        report(Created, app("web"))
    );

    let create = event("create", "c3", &json!({}));
    let global = service(
        "c3",
        "svc-c3",
        &json!({"app": "web"}),
        &json!({"Global": {}}),
    );
    assert_eq!(
        k.inspected(&create, Some(&global)),
        report(Started, app("web"))
    );
}

#[test]
fn scaling_a_known_service_needs_no_inspection() {
    let mut k = known(&[listed("a1", true, app("web"))]);
    let down = event(
        "update",
        "a1",
        &json!({"replicas.old": "1", "replicas.new": "0"}),
    );
    assert_eq!(k.event(&down), report(Stopped, app("web")));
    let up = event(
        "update",
        "a1",
        &json!({"replicas.old": "0", "replicas.new": "3"}),
    );
    assert_eq!(k.event(&up), report(Started, app("web")));
    // Replicated → global: only `replicas.old`; a spec change: no replicas at all.
    for attributes in [
        json!({"replicas.old": "1"}),
        json!({}),
        json!({"replicas.new": "x"}),
    ] {
        let update = event("update", "a1", &attributes);
        assert_eq!(k.event(&update), Decision::Inspect("/services/a1".into()));
    }
    // A scaled service first seen in an event is inspected for its labels.
    let unknown = event(
        "update",
        "z9",
        &json!({"replicas.old": "0", "replicas.new": "1"}),
    );
    assert_eq!(k.event(&unknown), Decision::Inspect("/services/z9".into()));
}

#[test]
fn the_label_filter_applies_to_events() {
    let mut k = known(&[listed("a1", true, app("web"))]);
    // Not carrying the filter's labels: never reported, not even its removal.
    let create = event("create", "o1", &json!({}));
    let other = service("o1", "svc-o1", &json!({"app": "db"}), &replicated(1));
    assert_eq!(k.inspected(&create, Some(&other)), Decision::Skip);
    let scale = event(
        "update",
        "o1",
        &json!({"replicas.old": "1", "replicas.new": "0"}),
    );
    assert_eq!(k.event(&scale), Decision::Inspect("/services/o1".into()));
    let idle_other = service("o1", "svc-o1", &json!({"app": "db"}), &replicated(0));
    assert_eq!(k.inspected(&scale, Some(&idle_other)), Decision::Skip);
    assert_eq!(k.event(&event("remove", "o1", &json!({}))), Decision::Skip);

    // A label change moves a service out of the watch, and back in.
    let relabel = event("update", "a1", &json!({}));
    let moved = service("a1", "svc-a1", &json!({"app": "db"}), &replicated(1));
    assert_eq!(
        k.inspected(&relabel, Some(&moved)),
        report(Removed, app("web"))
    );
    assert_eq!(k.inspected(&relabel, Some(&moved)), Decision::Skip);
    let back = service(
        "a1",
        "svc-a1",
        &json!({"app": "web", "v": "2"}),
        &replicated(0),
    );
    let labels = Labels::from([("app".into(), "web".into()), ("v".into(), "2".into())]);
    assert_eq!(
        k.inspected(&relabel, Some(&back)),
        report(Stopped, labels.clone())
    );
    assert_eq!(
        k.event(&event("remove", "a1", &json!({}))),
        report(Removed, labels)
    );
    assert_eq!(k.event(&event("remove", "a1", &json!({}))), Decision::Skip);
}

#[test]
fn what_cannot_be_inspected_is_skipped() {
    let mut k = known(&[]);
    let create = event("create", "a1", &json!({}));
    // Removed before the inspection: its `remove` follows, about a service never reported.
    assert_eq!(k.inspected(&create, None), Decision::Skip);
    assert_eq!(k.event(&event("remove", "a1", &json!({}))), Decision::Skip);
    let nameless = json!({"ID": "a1", "Spec": {}});
    assert!(matches!(
        k.inspected(&create, Some(&nameless)),
        Decision::Undecodable(_)
    ));
    let another = service("b2", "svc-b2", &json!({"app": "web"}), &replicated(1));
    assert!(matches!(
        k.inspected(&create, Some(&another)),
        Decision::Undecodable(_)
    ));
    for uid in ["../../containers/x", "a1?x", "a 1"] {
        assert!(matches!(
            k.event(&event("create", uid, &json!({}))),
            Decision::Undecodable(_)
        ));
    }
    assert_eq!(
        k.event(&event("rollback", "a1", &json!({}))),
        Decision::Skip
    );
}

/// Every stop of a service says it was requested: a scale to 0 (an event,
/// an inspection, a snapshot).
#[test]
fn a_stop_is_a_scale_to_zero() {
    let scaled = Some(Arc::new(Reason::stop(Outcome::Stopped)));
    let mut k = known(&[listed("a1", true, app("web"))]);
    let down = event(
        "update",
        "a1",
        &json!({"replicas.old": "1", "replicas.new": "0"}),
    );
    let Decision::Explained { kind, reason, .. } = k.event(&down) else {
        panic!("a scale to 0 is explained");
    };
    assert_eq!((kind, Some(reason)), (Stopped, scaled.clone()));
    let update = event("update", "a1", &json!({}));
    let idle = service("a1", "svc-a1", &json!({"app": "web"}), &replicated(0));
    assert!(matches!(
        k.inspected(&update, Some(&idle)),
        Decision::Explained { kind: Stopped, reason, .. } if Some(&reason) == scaled.as_ref()
    ));
    let body = json!([
        service("a1", "web", &json!({}), &replicated(0)),
        service("b2", "up", &json!({}), &replicated(1)),
    ])
    .to_string();
    let listed = SERVICES.parse_list(body.as_bytes(), true).expect("a list");
    assert_eq!(listed[0].reason, scaled);
    assert_eq!(
        listed[1].reason, None,
        "a running service: no failure known"
    );
}

/// The poll asks the tasks of the services it found not ready; the table
/// decodes them.
#[test]
fn failures_are_read_from_the_tasks() {
    let (path, decode) = SERVICES.polled_failures(&["a1"]).expect("a list");
    assert!(path.starts_with("/tasks?filters="), "{path}");
    assert_eq!(decode(b"[]"), Ok(Vec::new()));
}
