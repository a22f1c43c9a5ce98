//! What each object says of why: a workload's and a custom resource's
//! status, as lookout reads it off the wire, to the reason it hands the
//! core (the crate docs' table under "Why").

use std::sync::Arc;

use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use lookout_core::{Outcome, Reason, ResourceStatus};
use serde_json::{Value, json};

use crate::kind::Kind;
use crate::object::{self, Object, Workload};
use crate::resolve::{Rule, Served};

const TIMED_OUT: &str = "ReplicaSet \"web-5d4\" has timed out progressing.";

/// A workload of `kind` wanting `replicas`, its generation observed, with
/// `conditions`, and `deleting` or not.
fn workload(kind: &str, replicas: i64, conditions: &Value, deleting: bool) -> Workload {
    let mut obj = json!({
        "apiVersion": "apps/v1",
        "kind": kind,
        "metadata": { "name": "web", "namespace": "shop", "uid": "u-1", "generation": 2,
                      "resourceVersion": "9" },
        "spec": { "replicas": replicas },
        "status": { "observedGeneration": 2, "replicas": replicas,
                    "availableReplicas": replicas, "readyReplicas": replicas,
                    "conditions": conditions },
    });
    if deleting {
        obj["metadata"]["deletionTimestamp"] = json!("2026-12-07T10:00:00Z");
        obj["metadata"]["finalizers"] = json!(["lookout.dev/hold"]);
    }
    serde_json::from_value(obj).expect("a workload")
}

fn served(kind: Kind) -> Served {
    Served {
        prefix: kind.as_str().into(),
        resource: kind.api_resource(),
        rule: Rule::Builtin(kind),
    }
}

/// The reason lookout hands the core for a workload (readiness watched or not).
fn reason(kind: Kind, replicas: i64, conditions: &Value, readiness: bool) -> Option<Arc<Reason>> {
    let name = match kind {
        Kind::Deployment => "Deployment",
        Kind::StatefulSet => "StatefulSet",
        _ => "DaemonSet",
    };
    let w = workload(name, replicas, conditions, false);
    object::listed(kind, kind.as_str(), w, readiness)
        .expect("readable")
        .reason
}

fn deadline(message: &str) -> Value {
    json!([
        { "type": "Available", "status": "True", "reason": "MinimumReplicasAvailable",
          "message": "Deployment has minimum availability." },
        { "type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded",
          "message": message },
    ])
}

#[test]
fn a_deployment_past_its_deadline_is_failed_in_its_controllers_words() {
    let r = reason(Kind::Deployment, 2, &deadline(TIMED_OUT), true).expect("failing");
    assert_eq!(r.message.as_deref(), Some(TIMED_OUT));
    assert!(r.failed);
    assert_eq!((r.outcome, r.exit_code), (None, None));
    // Without readiness nothing fails: the stream is what it was.
    assert_eq!(
        reason(Kind::Deployment, 2, &deadline(TIMED_OUT), false),
        None
    );
    // A StatefulSet has no progress deadline (kstatus reads it of a
    // Deployment only).
    assert_eq!(
        reason(Kind::StatefulSet, 2, &deadline(TIMED_OUT), true),
        None
    );
    // Progressing as usual: not failing.
    let fine = json!([{ "type": "Progressing", "status": "True",
                         "reason": "NewReplicaSetAvailable", "message": "done" }]);
    assert_eq!(reason(Kind::Deployment, 2, &fine, true), None);
}

#[test]
fn a_replica_failure_is_failing_for_every_built_in_kind() {
    let quota = "pods \"web-0\" is forbidden: exceeded quota: q, requested: cpu=1";
    let c = json!([{ "type": "ReplicaFailure", "status": "True", "reason": "FailedCreate",
                     "message": quota }]);
    for kind in [Kind::Deployment, Kind::StatefulSet, Kind::DaemonSet] {
        let replicas = 2;
        let r = if kind == Kind::DaemonSet {
            let mut w = workload("DaemonSet", 0, &c, false);
            w.status.desired_number_scheduled = object::Int::Value(replicas);
            object::listed(kind, kind.as_str(), w, true)
                .expect("readable")
                .reason
        } else {
            reason(kind, replicas, &c, true)
        };
        let r = r.unwrap_or_else(|| panic!("{kind}: failing"));
        assert_eq!(r.message.as_deref(), Some(quota), "{kind}");
        assert!(!r.failed, "{kind}: the controller keeps trying");
    }
}

#[test]
fn a_workload_that_wants_no_replica_stopped_on_request() {
    for readiness in [false, true] {
        for c in [json!([]), deadline(TIMED_OUT)] {
            let r = reason(Kind::Deployment, 0, &c, readiness).expect("why it stopped");
            assert_eq!(r.outcome, Some(Outcome::Stopped));
            assert!(r.message.is_none() && !r.failed, "{r:?}");
        }
    }
    // A DaemonSet with no node to run on: stopped too.
    let w = workload("DaemonSet", 0, &json!([]), false);
    let l = object::listed(Kind::DaemonSet, "daemonset", w, false).expect("readable");
    assert!(!l.running);
    assert_eq!(l.reason.and_then(|r| r.outcome), Some(Outcome::Stopped));
    // Running and fine: no reason.
    assert_eq!(reason(Kind::Deployment, 1, &json!([]), true), None);
}

#[test]
fn a_deletion_timestamp_is_seen_for_every_kind() {
    for (kind, name) in [
        (Kind::Deployment, "Deployment"),
        (Kind::StatefulSet, "StatefulSet"),
    ] {
        for deleting in [false, true] {
            let seen = workload(name, 1, &json!([]), deleting)
                .seen(&served(kind), true)
                .expect("readable");
            assert_eq!(seen.deleting, deleting, "{kind}");
            assert!(seen.listed.running);
            // The readiness is the replicas', as before.
            assert!(seen.listed.readiness.is_some_and(|r| r.is_ready()));
        }
    }
    // A null deletionTimestamp is none.
    let w: Workload = serde_json::from_value(json!({
        "metadata": { "name": "web", "namespace": "shop", "deletionTimestamp": null },
    }))
    .expect("a workload");
    assert!(!w.deleting());
}

/// A custom resource (`Cluster`, scaled by `spec.instances`) with `status`.
fn cluster(instances: i64, status: &Value, deleting: bool) -> DynamicObject {
    let mut obj = json!({
        "apiVersion": "demo.lookout.dev/v1",
        "kind": "Cluster",
        "metadata": { "name": "pg", "namespace": "db", "uid": "u-9", "generation": 2 },
        "spec": { "instances": instances },
        "status": status,
    });
    if deleting {
        obj["metadata"]["deletionTimestamp"] = json!("2026-12-07T10:00:00Z");
    }
    serde_json::from_value(obj).expect("an object")
}

fn scaled() -> Served {
    let gvk = GroupVersionKind::gvk("demo.lookout.dev", "v1", "Cluster");
    Served {
        prefix: "cluster.demo.lookout.dev".into(),
        resource: ApiResource::from_gvk(&gvk),
        rule: Rule::Scaled(["spec".to_owned(), "instances".to_owned()].into()),
    }
}

#[test]
fn a_resource_kstatus_calls_failed_is_failed_in_its_stalled_words() {
    let stalled = json!({ "observedGeneration": 2, "conditions": [
        { "type": "Ready", "status": "False", "message": "waiting" },
        { "type": "Stalled", "status": "True", "reason": "InvalidSpec",
          "message": "spec.instances: must be odd" },
    ] });
    let l = cluster(3, &stalled, false)
        .listed(&scaled(), true)
        .expect("readable");
    assert_eq!(
        l.readiness,
        Some(lookout_core::Readiness::resource(ResourceStatus::Failed))
    );
    let r = l.reason.expect("failing");
    assert_eq!(r.message.as_deref(), Some("spec.instances: must be odd"));
    assert!(r.failed);
    // Without readiness: nothing.
    let l = cluster(3, &stalled, false)
        .listed(&scaled(), false)
        .expect("readable");
    assert_eq!(l.reason, None);
    // Reconciling first: kstatus says InProgress, not Failed.
    let reconciling = json!({ "conditions": [
        { "type": "Reconciling", "status": "True" },
        { "type": "Stalled", "status": "True", "message": "stuck" },
    ] });
    let l = cluster(3, &reconciling, false)
        .listed(&scaled(), true)
        .expect("readable");
    assert_eq!(l.reason, None);
    // Being deleted: kstatus says Terminating (no failure), and it is seen.
    let seen = cluster(3, &stalled, true)
        .seen(&scaled(), true)
        .expect("readable");
    assert!(seen.deleting);
    assert_eq!(
        seen.listed.readiness,
        Some(lookout_core::Readiness::resource(
            ResourceStatus::Terminating
        ))
    );
    assert_eq!(seen.listed.reason, None);
    // Scaled to 0: stopped on request, whatever its conditions.
    let l = cluster(0, &stalled, false)
        .listed(&scaled(), true)
        .expect("readable");
    assert!(!l.running);
    assert_eq!(l.reason.and_then(|r| r.outcome), Some(Outcome::Stopped));
}
