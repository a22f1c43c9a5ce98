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
            Kind::Deployment.as_str(),
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
    let l = object::listed(
        Kind::StatefulSet,
        Kind::StatefulSet.as_str(),
        obj.clone(),
        false,
    )
    .expect("readable");
    assert_eq!(l.id.as_str(), "statefulset/shop/db");
    assert_eq!(l.uid.as_deref(), Some("u-1"));
    assert_eq!(l.labels.get("app"), Some("web"));
    let l =
        object::listed(Kind::Deployment, Kind::Deployment.as_str(), obj, false).expect("readable");
    assert_eq!(l.id.as_str(), "deployment/shop/db");
    assert!(
        object::listed(
            Kind::Deployment,
            Kind::Deployment.as_str(),
            object(None, Some("db"), &spec),
            false
        )
        .is_none()
    );
    assert!(
        object::listed(
            Kind::Deployment,
            Kind::Deployment.as_str(),
            object(Some("shop"), None, &spec),
            false
        )
        .is_none()
    );
}

#[test]
fn config_errors_only_for_what_can_never_work() {
    let empty = K8sConfig::default().kinds(Vec::<Kind>::new());
    assert!(matches!(watch(empty), Err(ConfigError::NoKinds)));
    let blank_ns = K8sConfig::default().namespace("");
    assert!(matches!(watch(blank_ns), Err(ConfigError::EmptyNamespace)));
    let no_line = K8sConfig::default().max_line(0);
    assert!(matches!(watch(no_line), Err(ConfigError::ZeroMaxLine)));
    // One byte is a bound that holds no event, but a bound: the session says so.
    assert!(watch(K8sConfig::default().max_line(1)).is_ok());
    let dupes =
        K8sConfig::default().kinds([Kind::StatefulSet, Kind::Deployment, Kind::StatefulSet]);
    let dial = K8sDial::new(&dupes).expect("valid");
    let sorted: Vec<KindRef> = vec![Kind::Deployment.into(), Kind::StatefulSet.into()];
    assert_eq!(*dial.settings.kinds, *sorted);
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
    assert_eq!(Kind::DaemonSet.as_str(), "daemonset");
    assert_eq!(
        K8sConfig::default().get_kinds(),
        [Kind::Deployment.into(), Kind::StatefulSet.into()]
    );
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
    let kinds: Vec<KindRef> = vec![Kind::Deployment.into(), Kind::StatefulSet.into()];
    let mut c = K8sCursor::new(kinds.into());
    assert_eq!(c.version(Kind::Deployment), None);
    c.set(0, "10".into());
    c.set(1, "12".into());
    c.set(0, "11".into());
    assert_eq!(c.version(Kind::Deployment), Some("11"));
    assert_eq!(c.version(Kind::StatefulSet), Some("12"));
    assert_eq!(c.version(Kind::DaemonSet), None);
    c.clear(1);
    assert_eq!(c.version(Kind::StatefulSet), None);
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
    assert!(object::listed(Kind::Deployment, Kind::Deployment.as_str(), bare, false).is_none());
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
        _ => "DaemonSet",
    };
    let obj = workload(name, replicas, generation, status);
    object::listed(kind, kind.as_str(), obj, true)
        .expect("readable")
        .readiness
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
            ..object::Status::default()
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
            let off = object::listed(
                Kind::Deployment,
                Kind::Deployment.as_str(),
                w.clone(),
                false,
            )
            .expect("readable");
            assert_eq!(off.readiness, None);
            assert!(off.running);
            // Unreadable counts as not ready.
            let on = object::listed(Kind::Deployment, Kind::Deployment.as_str(), w, true)
                .expect("readable");
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
        object::listed(Kind::Deployment, Kind::Deployment.as_str(), w, true)
            .and_then(|l| l.readiness),
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
        let l = object::listed(kind, kind.as_str(), w, false).expect("readable");
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

#[test]
fn kinds_parse_as_kubectl_names_them() {
    let parse = |s: &str| KindRef::parse(s).map(|k| k.to_string());
    for (text, builtin) in [
        ("deployment", Kind::Deployment),
        ("Deployments", Kind::Deployment),
        ("deploy", Kind::Deployment),
        ("deployments.apps", Kind::Deployment),
        ("apps/v1/Deployment", Kind::Deployment),
        ("sts", Kind::StatefulSet),
        ("statefulsets", Kind::StatefulSet),
        ("ds", Kind::DaemonSet),
        ("daemonset", Kind::DaemonSet),
        ("DaemonSets.apps", Kind::DaemonSet),
        ("apps/v1/DaemonSet", Kind::DaemonSet),
    ] {
        let k = KindRef::parse(text).expect(text);
        assert_eq!(k.builtin(), Some(builtin), "{text}");
    }
    assert_eq!(parse("clusters").expect("a kind"), "clusters");
    assert_eq!(
        parse("Clusters.postgresql.cnpg.io").expect("a kind"),
        "clusters.postgresql.cnpg.io"
    );
    assert_eq!(
        parse("postgresql.cnpg.io/v1/Cluster").expect("a kind"),
        "postgresql.cnpg.io/v1/Cluster"
    );
    assert_eq!(parse("v1/Pod").expect("a kind"), "v1/Pod");
    // A built-in name in another group is that group's kind.
    assert_eq!(
        KindRef::parse("deployments.example.com")
            .expect("a kind")
            .builtin(),
        None
    );
    assert_eq!(
        KindRef::parse("apps/v1beta2/Deployment")
            .expect("a kind")
            .builtin(),
        None
    );
    for bad in [
        "", " ", "a b", "/v1/Pod", "a/b/c/d", "g//K", "g/v/", ".apps", "deploy.",
    ] {
        assert!(
            matches!(KindRef::parse(bad), Err(ConfigError::BadKind { .. })),
            "{bad:?}"
        );
    }
    let k: KindRef = "ds".parse().expect("a kind");
    assert_eq!(k, KindRef::from(Kind::DaemonSet));
}

#[test]
fn a_daemonset_runs_while_it_wants_pods_and_is_ready_when_all_are_available() {
    let ds = |status: serde_json::Value| {
        let obj = workload("DaemonSet", None, Some(json!(2)), Some(status));
        object::listed(Kind::DaemonSet, "daemonset", obj, true).expect("readable")
    };
    let l =
        ds(json!({ "observedGeneration": 2, "desiredNumberScheduled": 3, "numberAvailable": 3 }));
    assert_eq!(l.id.as_str(), "daemonset/shop/web");
    assert!(l.running);
    assert_eq!(l.readiness, Some(Readiness::replicas(3, 3, true)));
    assert!(l.readiness.is_some_and(|r| r.is_ready()));
    let l =
        ds(json!({ "observedGeneration": 2, "desiredNumberScheduled": 3, "numberAvailable": 2 }));
    assert!(l.readiness.is_some_and(|r| !r.is_ready()));
    let l =
        ds(json!({ "observedGeneration": 1, "desiredNumberScheduled": 3, "numberAvailable": 3 }));
    assert_eq!(l.readiness, Some(Readiness::replicas(3, 3, false)));
    // No node to run on (or no controller yet): not running.
    let l = ds(json!({ "observedGeneration": 2, "desiredNumberScheduled": 0 }));
    assert!(!l.running);
    let obj = workload("DaemonSet", None, Some(json!(1)), None);
    assert!(
        !object::listed(Kind::DaemonSet, "daemonset", obj, false)
            .expect("readable")
            .running
    );
    let obj = workload(
        "DaemonSet",
        None,
        None,
        Some(json!({ "desiredNumberScheduled": "3" })),
    );
    assert!(object::listed(Kind::DaemonSet, "daemonset", obj, false).is_none());
}

#[test]
fn a_custom_resource_runs_by_its_scale_and_is_ready_by_kstatus() {
    use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
    use object::Object;
    use resolve::{Rule, Served};
    let gvk = GroupVersionKind::gvk("demo.lookout.dev", "v1", "Cluster");
    let served = |rule| Served {
        prefix: "cluster.demo.lookout.dev".into(),
        resource: ApiResource::from_gvk(&gvk),
        rule,
    };
    let scaled = served(Rule::Scaled(
        ["spec".to_owned(), "instances".to_owned()].into(),
    ));
    let obj = |spec: serde_json::Value, status: serde_json::Value| -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "demo.lookout.dev/v1",
            "kind": "Cluster",
            "metadata": { "name": "pg", "namespace": "db", "uid": "u-9", "generation": 2,
                          "labels": { "team": "data" } },
            "spec": spec,
            "status": status,
        }))
        .expect("an object")
    };
    let ready =
        json!({ "observedGeneration": 2, "conditions": [{ "type": "Ready", "status": "True" }] });
    let l = obj(json!({ "instances": 3 }), ready.clone())
        .listed(&scaled, true)
        .expect("readable");
    assert_eq!(l.id.as_str(), "cluster.demo.lookout.dev/db/pg");
    assert_eq!(l.labels.get("team"), Some("data"));
    assert!(l.running);
    assert_eq!(
        l.readiness,
        Some(Readiness::resource(lookout_core::ResourceStatus::Current))
    );
    let l = obj(json!({ "instances": 0 }), ready.clone())
        .listed(&scaled, false)
        .expect("readable");
    assert!(!l.running);
    assert_eq!(l.readiness, None);
    // Unset: one, as a workload's unset replicas.
    assert!(
        obj(json!({}), ready.clone())
            .listed(&scaled, false)
            .expect("readable")
            .running
    );
    assert!(
        obj(json!({ "instances": "3" }), ready.clone())
            .listed(&scaled, false)
            .is_none()
    );
    // Without a scale: running while it exists.
    let plain = served(Rule::Exists);
    let l = obj(
        json!({ "instances": 0 }),
        json!({ "observedGeneration": 1 }),
    )
    .listed(&plain, true)
    .expect("readable");
    assert!(l.running);
    assert_eq!(
        l.readiness,
        Some(Readiness::resource(
            lookout_core::ResourceStatus::InProgress
        ))
    );
}
