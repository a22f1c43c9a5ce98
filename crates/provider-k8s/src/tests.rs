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
        session::listed(Kind::Deployment, object(Some("ns"), Some("web"), &spec)).map(|l| l.running)
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
    let l = session::listed(Kind::StatefulSet, obj.clone()).expect("readable");
    assert_eq!(l.id.as_str(), "statefulset/shop/db");
    assert_eq!(l.uid.as_deref(), Some("u-1"));
    assert_eq!(l.labels.get("app").map(String::as_str), Some("web"));
    let l = session::listed(Kind::Deployment, obj).expect("readable");
    assert_eq!(l.id.as_str(), "deployment/shop/db");
    assert!(session::listed(Kind::Deployment, object(None, Some("db"), &spec)).is_none());
    assert!(session::listed(Kind::Deployment, object(Some("shop"), None, &spec)).is_none());
}

#[test]
fn config_errors_only_for_what_can_never_work() {
    let empty = K8sConfig {
        kinds: Vec::new(),
        ..K8sConfig::default()
    };
    assert!(matches!(watch(empty), Err(ConfigError::NoKinds)));
    let blank_ns = K8sConfig {
        namespace: Some(String::new()),
        ..K8sConfig::default()
    };
    assert!(matches!(watch(blank_ns), Err(ConfigError::EmptyNamespace)));
    let dupes = K8sConfig {
        kinds: vec![Kind::StatefulSet, Kind::Deployment, Kind::StatefulSet],
        ..K8sConfig::default()
    };
    let dial = K8sDial::new(&dupes).expect("valid");
    assert_eq!(dial.settings.kinds, Kind::ALL);
    // A kubeconfig that does not exist is not a ConfigError: it may appear.
    let missing = K8sConfig {
        kubeconfig: Some("/nonexistent/kubeconfig".into()),
        ..K8sConfig::default()
    };
    assert!(watch(missing).is_ok());
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
    assert_eq!(K8sConfig::default().kinds, Kind::ALL);
}

#[tokio::test(flavor = "current_thread")]
async fn a_missing_kubeconfig_is_a_retried_disconnect() {
    let config = K8sConfig {
        kubeconfig: Some("/nonexistent/lookout/kubeconfig".into()),
        watch: WatchConfig::default().reconnect(lookout_core::ReconnectPolicy {
            initial_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(1),
            ..lookout_core::ReconnectPolicy::default()
        }),
        ..K8sConfig::default()
    };
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
    let watch = K8sConfig::default().watch;
    assert_eq!(watch.resync_every, None);
    assert_eq!(watch.resync_after_lag, None);
    let d = K8sConfig::default_watch();
    assert_eq!(d.probe_after, WatchConfig::default().probe_after);
    let dial = K8sDial::new(&K8sConfig::default()).expect("valid");
    assert_eq!(dial.settings.relist_every, None);
    let periodic = K8sConfig {
        watch: K8sConfig::default_watch().resync_every(Some(Duration::from_secs(600))),
        ..K8sConfig::default()
    };
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
    assert_eq!(w.metadata.managed_fields, None);
    assert_eq!(w.metadata.uid.as_deref(), Some("u-1"));
    assert_eq!(w.spec.and_then(|s| s.replicas), Some(serde_json::json!(2)));
    // No metadata at all: no name, so the object is skipped (logged).
    let bare: object::Workload =
        serde_json::from_value(serde_json::json!({ "spec": null })).expect("a workload");
    assert!(session::listed(Kind::Deployment, bare).is_none());
    // A spec that is no object cannot be read as a workload.
    assert!(serde_json::from_value::<object::Workload>(serde_json::json!({ "spec": 5 })).is_err());
}
