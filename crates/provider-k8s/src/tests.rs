use std::time::Duration;

use lookout_core::{Error, Item, Status, WatchConfig};
use tokio_stream::StreamExt;

use super::*;

fn object(ns: Option<&str>, name: Option<&str>, spec: &serde_json::Value) -> object::Workload {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": name,
            "namespace": ns,
            "uid": "u-1",
            "labels": { "app": "web" },
            "managedFields": [{ "manager": "kubectl", "fieldsV1": { "f:spec": {} } }],
        },
        "spec": spec,
        "status": { "replicas": 3 },
    }))
    .expect("a workload")
}

#[test]
fn replicas_decide_running() {
    let running = |spec: serde_json::Value| {
        object::listed(
            Kind::Deployment,
            object(Some("ns"), Some("web"), &spec),
            false,
        )
        .map(|l| l.running)
    };
    assert_eq!(running(serde_json::json!({ "replicas": 0 })), Some(false));
    assert_eq!(running(serde_json::json!({ "replicas": 2 })), Some(true));
    assert_eq!(running(serde_json::json!({ "replicas": null })), Some(true));
    assert_eq!(running(serde_json::json!({})), Some(true));
    assert_eq!(running(serde_json::Value::Null), Some(true));
    assert_eq!(running(serde_json::json!({ "replicas": "two" })), None);
}

#[test]
fn ids_name_kind_namespace_and_name() {
    let spec = serde_json::json!({ "replicas": 1 });
    let obj = object(Some("shop"), Some("db"), &spec);
    let l = object::listed(Kind::StatefulSet, obj.clone(), false).expect("readable");
    assert_eq!(l.id.as_str(), "statefulset/shop/db");
    assert_eq!(l.uid.as_deref(), Some("u-1"));
    assert_eq!(l.labels.get("app"), Some("web"));
    let l = object::listed(Kind::Deployment, obj, false).expect("readable");
    assert_eq!(l.id.as_str(), "deployment/shop/db");
    assert!(object::listed(Kind::Deployment, object(None, Some("db"), &spec), false).is_none());
    assert!(object::listed(Kind::Deployment, object(Some("shop"), None, &spec), false).is_none());
}

#[test]
fn config_errors_only_for_what_can_never_work() {
    let empty = K8sConfig::default().kinds([]);
    assert!(matches!(watch(empty), Err(ConfigError::NoKinds)));
    let blank_ns = K8sConfig::default().namespace("");
    assert!(matches!(watch(blank_ns), Err(ConfigError::EmptyNamespace)));
    let dupes =
        K8sConfig::default().kinds([Kind::StatefulSet, Kind::Deployment, Kind::StatefulSet]);
    let dial = K8sDial::new(&dupes).expect("valid");
    assert_eq!(dial.settings.kinds, Kind::ALL);
    // A kubeconfig that does not exist is not a ConfigError: it may appear.
    let missing = K8sConfig::default().kubeconfig("/nonexistent/kubeconfig");
    assert!(watch(missing).is_ok());
    // A context: one the kubeconfig has, or a ConfigError naming the others.
    let dir = std::env::temp_dir().join(format!("lookout-k8s-contexts-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let file = dir.join("kubeconfig");
    std::fs::write(
        &file,
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: \
         https://127.0.0.1:1\nusers:\n- name: u\n  user: {}\ncontexts:\n- name: a\n  \
         context:\n    cluster: c\n    user: u\ncurrent-context: a\n",
    )
    .expect("write");
    let with = |context: &str, kubeconfig: &std::path::Path| {
        K8sConfig::default().kubeconfig(kubeconfig).context(context)
    };
    assert!(watch(with("a", &file)).is_ok());
    match watch(with("b", &file)) {
        Err(e @ ConfigError::UnknownContext { .. }) => {
            let text = e.to_string();
            assert!(
                text.contains("no context `b`") && text.contains("it has a"),
                "{text}"
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(watch(with("b", std::path::Path::new("/nonexistent/kubeconfig"))).is_ok());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn watch_timeout_follows_the_stall_bound() {
    let w = |after, timeout| {
        watch_timeout(
            &WatchConfig::default()
                .probe_after(Duration::from_millis(after))
                .probe_timeout(Duration::from_millis(timeout)),
        )
    };
    assert_eq!(watch_timeout(&WatchConfig::default()), 35);
    assert_eq!(w(1000, 1000), 2);
    assert_eq!(w(100, 100), 1);
    assert_eq!(w(3_600_000, 5000), 290);
}

#[test]
fn kinds_read_as_in_ids() {
    assert_eq!(Kind::Deployment.to_string(), "deployment");
    assert_eq!(Kind::StatefulSet.as_str(), "statefulset");
    assert_eq!(K8sConfig::default().get_kinds(), Kind::ALL);
}

#[tokio::test(flavor = "current_thread")]
async fn a_missing_kubeconfig_is_a_retried_disconnect() {
    let config = K8sConfig::default()
        .kubeconfig("/nonexistent/lookout/kubeconfig")
        .watch_config(
            WatchConfig::default().reconnect(
                lookout_core::ReconnectPolicy::default()
                    .initial_delay(Duration::from_millis(1))
                    .max_delay(Duration::from_millis(1)),
            ),
        );
    let mut w = watch(config).expect("valid config");
    for attempt in 1..=2 {
        let item = tokio::time::timeout(Duration::from_secs(5), w.next())
            .await
            .expect("a status in time")
            .expect("the stream never ends");
        let Item::Status(Status::Disconnected {
            error, attempt: a, ..
        }) = item
        else {
            panic!("expected Disconnected, got {item:?}");
        };
        assert_eq!(a, attempt);
        assert!(matches!(*error, Error::Dial(_)), "{error}");
        let text = format!("{error}");
        assert!(text.contains("/nonexistent/lookout/kubeconfig"), "{text}");
    }
}

#[test]
fn kubernetes_defaults_have_no_periodic_or_lag_relist() {
    let watch = K8sConfig::default().get_watch_config().clone();
    assert_eq!(watch.get_resync_every(), None);
    assert_eq!(watch.get_resync_after_lag(), None);
    let d = K8sConfig::default_watch();
    assert_eq!(
        d.get_probe_after(),
        WatchConfig::default().get_probe_after()
    );
    let dial = K8sDial::new(&K8sConfig::default()).expect("valid");
    assert_eq!(dial.settings.relist_every, None);
    let periodic = K8sConfig::default()
        .watch_config(K8sConfig::default_watch().resync_every(Some(Duration::from_secs(600))));
    let dial = K8sDial::new(&periodic).expect("valid");
    assert_eq!(dial.settings.relist_every, Some(Duration::from_secs(600)));
}

#[test]
fn the_cursor_keeps_one_version_per_kind() {
    let mut c = K8sCursor::default();
    assert_eq!(c.version(Kind::Deployment), None);
    c.set(Kind::Deployment, "10".into());
    c.set(Kind::StatefulSet, "12".into());
    c.set(Kind::Deployment, "11".into());
    assert_eq!(c.version(Kind::Deployment), Some("11"));
    assert_eq!(c.version(Kind::StatefulSet), Some("12"));
    let copy = c.clone();
    assert_eq!(copy, c);
}

#[test]
fn the_initial_list_is_paged_unless_asked() {
    let dial = K8sDial::new(&K8sConfig::default()).expect("valid");
    assert_eq!(dial.settings.initial_list, InitialList::Paged);
    let dial = dial.initial_list(InitialList::Streaming);
    assert_eq!(dial.settings.initial_list, InitialList::Streaming);
}

#[test]
fn a_workload_reads_only_what_lookout_uses() {
    let w = object(
        Some("shop"),
        Some("web"),
        &serde_json::json!({
            "replicas": 2,
            "template": { "spec": { "containers": [{ "name": "main", "image": "busybox" }] } },
        }),
    );
    assert_eq!(w.metadata.meta.managed_fields, None);
    assert_eq!(w.metadata.meta.uid.as_deref(), Some("u-1"));
    assert_eq!(w.spec.and_then(|s| s.replicas), Some(serde_json::json!(2)));
    // No metadata at all: no name, so the object is skipped (logged).
    let bare: object::Workload =
        serde_json::from_value(serde_json::json!({ "spec": null })).expect("a workload");
    assert!(object::listed(Kind::Deployment, bare, false).is_none());
    // A spec that is no object cannot be read as a workload.
    assert!(serde_json::from_value::<object::Workload>(serde_json::json!({ "spec": 5 })).is_err());
}

/// A workload of `kind` with `spec`, `metadata.generation` and `status`
/// (each left out when `None`), as the apiserver serves one: with the
/// fields lookout skips.
fn workload(
    kind: &str,
    replicas: Option<serde_json::Value>,
    generation: Option<serde_json::Value>,
    status: Option<serde_json::Value>,
) -> object::Workload {
    let mut obj = serde_json::json!({
        "apiVersion": "apps/v1",
        "kind": kind,
        "metadata": {
            "name": "web",
            "namespace": "shop",
            "uid": "u-1",
            "resourceVersion": "7",
            "labels": { "app": "web" },
            "managedFields": [{ "manager": "kubectl", "fieldsV1": { "f:spec": {} } }],
        },
        "spec": { "template": { "spec": { "containers": [{ "name": "main" }] } } },
    });
    if let Some(r) = replicas {
        obj["spec"]["replicas"] = r;
    }
    if let Some(g) = generation {
        obj["metadata"]["generation"] = g;
    }
    if let Some(s) = status {
        obj["status"] = s;
    }
    serde_json::from_value(obj).expect("a workload")
}

/// The readiness lookout reads off a workload (readiness watched).
fn readiness_of(
    kind: Kind,
    replicas: Option<serde_json::Value>,
    generation: Option<serde_json::Value>,
    status: Option<serde_json::Value>,
) -> Option<lookout_core::Readiness> {
    let name = match kind {
        Kind::Deployment => "Deployment",
        Kind::StatefulSet => "StatefulSet",
    };
    let obj = workload(name, replicas, generation, status);
    object::listed(kind, obj, true).expect("readable").readiness
}

use lookout_core::Readiness;
use serde_json::json;

#[test]
fn the_readiness_fields_are_read_and_the_rest_skipped() {
    let w = workload(
        "Deployment",
        Some(json!(3)),
        Some(json!(4)),
        Some(json!({
            "observedGeneration": 4,
            "replicas": 3,
            "updatedReplicas": 3,
            "readyReplicas": 2,
            "availableReplicas": 1,
            "conditions": [{ "type": "Available", "status": "True", "reason": "MinimumReplicasAvailable" }],
            "collisionCount": 0,
        })),
    );
    assert_eq!(w.metadata.generation, object::Int::Value(4));
    assert_eq!(
        w.status,
        object::Status {
            observed_generation: object::Int::Value(4),
            available_replicas: object::Int::Value(1),
            ready_replicas: object::Int::Value(2),
        }
    );
    assert_eq!(w.metadata.meta.managed_fields, None);
    // No status, a null one: every count missing.
    let bare = workload("Deployment", None, None, None);
    assert_eq!(bare.status, object::Status::default());
    assert_eq!(bare.metadata.generation, object::Int::Missing);
    let null = workload("Deployment", None, Some(json!(null)), Some(json!(null)));
    assert_eq!(null.status, object::Status::default());
    assert_eq!(null.metadata.generation, object::Int::Missing);
}

#[test]
fn an_unreadable_readiness_field_does_not_fail_the_object() {
    // What parses without readiness still parses: a status that is no
    // object, counts that are no integers.
    for status in [
        json!(5),
        json!("ready"),
        json!([1, 2]),
        json!({ "availableReplicas": "two", "observedGeneration": { "x": [1] } }),
        json!({ "availableReplicas": 1.5, "observedGeneration": true }),
        json!({ "availableReplicas": [], "readyReplicas": 99_999_999_999_999_999_999.0_f64 }),
    ] {
        for generation in [json!(1), json!("one"), json!([])] {
            let w = workload(
                "Deployment",
                Some(json!(1)),
                Some(generation.clone()),
                Some(status.clone()),
            );
            let off = object::listed(Kind::Deployment, w.clone(), false).expect("readable");
            assert_eq!(off.readiness, None);
            assert!(off.running);
            // Unreadable counts as not ready.
            let on = object::listed(Kind::Deployment, w, true).expect("readable");
            let r = on.readiness.expect("readiness on");
            assert!(!r.is_ready(), "{status} {generation}: {r:?}");
        }
    }
    let w = workload(
        "Deployment",
        Some(json!(1)),
        Some(json!("one")),
        Some(json!({ "observedGeneration": 1, "availableReplicas": 1 })),
    );
    assert_eq!(w.metadata.generation, object::Int::Unreadable);
    assert_eq!(
        object::listed(Kind::Deployment, w, true).and_then(|l| l.readiness),
        Some(Readiness::replicas(1, 1, false))
    );
}

#[test]
fn without_readiness_nothing_carries_it() {
    let ready = json!({ "observedGeneration": 2, "availableReplicas": 2, "readyReplicas": 2 });
    for (kind, name) in [
        (Kind::Deployment, "Deployment"),
        (Kind::StatefulSet, "StatefulSet"),
    ] {
        let w = workload(name, Some(json!(2)), Some(json!(2)), Some(ready.clone()));
        let l = object::listed(kind, w, false).expect("readable");
        assert_eq!(l.readiness, None);
        assert!(l.running);
    }
}

#[test]
fn a_deployment_is_ready_when_its_observed_spec_is_available() {
    let d =
        |replicas, generation, status| readiness_of(Kind::Deployment, replicas, generation, status);
    let ready = d(
        Some(json!(2)),
        Some(json!(3)),
        Some(json!({ "observedGeneration": 3, "availableReplicas": 2, "readyReplicas": 2 })),
    );
    assert_eq!(ready, Some(Readiness::replicas(2, 2, true)));
    assert!(ready.is_some_and(|r| r.is_ready()));
    // More available than wanted (a rollout's surge, a scale-down): ready.
    let more = d(
        Some(json!(2)),
        Some(json!(3)),
        Some(json!({ "observedGeneration": 3, "availableReplicas": 3 })),
    );
    assert!(more.is_some_and(|r| r.is_ready()), "{more:?}");
    // One short: not ready.
    let short = d(
        Some(json!(2)),
        Some(json!(3)),
        Some(json!({ "observedGeneration": 3, "availableReplicas": 1 })),
    );
    assert_eq!(short, Some(Readiness::replicas(2, 1, true)));
    assert!(!short.is_some_and(|r| r.is_ready()));
    // The generation not observed yet (just scaled): not ready, whatever the counts.
    let unobserved = d(
        Some(json!(3)),
        Some(json!(4)),
        Some(json!({ "observedGeneration": 3, "availableReplicas": 3 })),
    );
    assert_eq!(unobserved, Some(Readiness::replicas(3, 3, false)));
    assert!(!unobserved.is_some_and(|r| r.is_ready()));
    // Observed past the generation (as the apiserver never serves, but ≥ holds).
    let past = d(
        Some(json!(1)),
        Some(json!(4)),
        Some(json!({ "observedGeneration": 5, "availableReplicas": 1 })),
    );
    assert!(past.is_some_and(|r| r.is_ready()), "{past:?}");
    // Ready replicas are not available ones: a Deployment counts the available.
    let ready_not_available = d(
        Some(json!(2)),
        Some(json!(1)),
        Some(json!({ "observedGeneration": 1, "readyReplicas": 2, "availableReplicas": 0 })),
    );
    assert_eq!(ready_not_available, Some(Readiness::replicas(2, 0, true)));
    // Scaled to 0: never ready (and not running).
    let zero = d(
        Some(json!(0)),
        Some(json!(2)),
        Some(json!({ "observedGeneration": 2 })),
    );
    assert_eq!(zero, Some(Readiness::replicas(0, 0, true)));
    assert!(!zero.is_some_and(|r| r.is_ready()));
    // No status at all: nothing available, the generation not observed.
    let fresh = d(Some(json!(1)), Some(json!(1)), None);
    assert_eq!(fresh, Some(Readiness::replicas(1, 0, false)));
    // No generation and no observedGeneration: 0 ≥ 0, observed (a
    // Deployment needs no observedGeneration > 0).
    let bare = d(
        Some(json!(1)),
        None,
        Some(json!({ "availableReplicas": 1 })),
    );
    assert_eq!(bare, Some(Readiness::replicas(1, 1, true)));
    // spec.replicas unset: 1 wanted.
    let unset = d(
        None,
        Some(json!(1)),
        Some(json!({ "observedGeneration": 1, "availableReplicas": 1 })),
    );
    assert_eq!(unset, Some(Readiness::replicas(1, 1, true)));
    let null = d(
        Some(json!(null)),
        Some(json!(1)),
        Some(json!({ "observedGeneration": 1, "availableReplicas": 0 })),
    );
    assert_eq!(null, Some(Readiness::replicas(1, 0, true)));
    // Out of range: a negative count is 0, a huge one saturates.
    let odd = d(
        Some(json!(-1)),
        Some(json!(1)),
        Some(json!({ "observedGeneration": 1, "availableReplicas": -3 })),
    );
    assert_eq!(odd, Some(Readiness::replicas(0, 0, true)));
    let huge = d(
        Some(json!(5_000_000_000_i64)),
        Some(json!(1)),
        Some(json!({ "observedGeneration": 1, "availableReplicas": u64::MAX })),
    );
    assert_eq!(huge, Some(Readiness::replicas(u32::MAX, u32::MAX, true)));
}

#[test]
fn a_statefulset_is_ready_when_its_observed_spec_is_ready() {
    let s = |replicas, generation, status| {
        readiness_of(Kind::StatefulSet, replicas, generation, status)
    };
    let ready = s(
        Some(json!(2)),
        Some(json!(1)),
        Some(json!({ "observedGeneration": 1, "readyReplicas": 2, "availableReplicas": 2 })),
    );
    assert_eq!(ready, Some(Readiness::replicas(2, 2, true)));
    assert!(ready.is_some_and(|r| r.is_ready()));
    // Available replicas are not ready ones: a StatefulSet counts the ready.
    let available_not_ready = s(
        Some(json!(2)),
        Some(json!(1)),
        Some(json!({ "observedGeneration": 1, "readyReplicas": 1, "availableReplicas": 2 })),
    );
    assert_eq!(available_not_ready, Some(Readiness::replicas(2, 1, true)));
    assert!(!available_not_ready.is_some_and(|r| r.is_ready()));
    // observedGeneration 0 (or missing): never observed, even against a
    // generation of 0 (where a Deployment would be).
    for status in [
        json!({ "observedGeneration": 0, "readyReplicas": 1 }),
        json!({ "readyReplicas": 1 }),
    ] {
        let zero = s(Some(json!(1)), None, Some(status.clone()));
        assert_eq!(zero, Some(Readiness::replicas(1, 1, false)), "{status}");
        let zero = s(Some(json!(1)), Some(json!(0)), Some(status.clone()));
        assert_eq!(zero, Some(Readiness::replicas(1, 1, false)), "{status}");
    }
    let d = readiness_of(
        Kind::Deployment,
        Some(json!(1)),
        None,
        Some(json!({ "observedGeneration": 0, "availableReplicas": 1 })),
    );
    assert_eq!(d, Some(Readiness::replicas(1, 1, true)));
    // The generation not observed.
    let unobserved = s(
        Some(json!(3)),
        Some(json!(2)),
        Some(json!({ "observedGeneration": 1, "readyReplicas": 3 })),
    );
    assert_eq!(unobserved, Some(Readiness::replicas(3, 3, false)));
    // Scaled to 0.
    let zero = s(
        Some(json!(0)),
        Some(json!(2)),
        Some(json!({ "observedGeneration": 2, "readyReplicas": 0 })),
    );
    assert_eq!(zero, Some(Readiness::replicas(0, 0, true)));
    assert!(!zero.is_some_and(|r| r.is_ready()));
    // No status.
    assert_eq!(
        s(Some(json!(1)), Some(json!(1)), None),
        Some(Readiness::replicas(1, 0, false))
    );
}
