//! lookout-k8s against a real kube-apiserver (the testbed: `cargo xtask
//! engines up k8s`) and against a tiny fake apiserver for what a real one
//! cannot be made to do on demand.
//!
//! Tests that kill, stop or compact take the k8s engine lock exclusively;
//! the others share it. Every wait is bounded.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use lookout_core::EventKind::{Created, Ready, Removed, Started, Stopped, Unready};
use lookout_core::Origin::{Initial, Live, Resync};
use lookout_core::{Error, EventKind, Origin, Readiness, Status};
use lookout_e2e::engines;
use lookout_e2e::k8s_util::{
    FakeApi, Fixture, Frame, Gate, RUN_LABEL, Recorder, Relay, Reply, Requests, apiserver,
    counting_client, error_event, established, event, fast_watch_config, kubeconfig_via, list,
    my_connections_to, object, require, require_controlled,
};
use lookout_k8s::{InitialList, K8sConfig, K8sDial, Kind};
use serde_json::json;

/// The bound of one step (an API call and the event it causes).
const STEP: Duration = Duration::from_secs(20);

/// Two deployments, `a` and `b`, and a statefulset `s`, each with one replica.
const TRIO: [(Kind, &str, i32); 3] = [
    (Kind::Deployment, "a", 1),
    (Kind::Deployment, "b", 1),
    (Kind::StatefulSet, "s", 1),
];

/// The k8s lock (exclusive for a test that breaks the apiserver), the
/// testbed's kubeconfig, and a fixture holding `objects` (kind, name, replicas).
async fn setup(
    exclusive: bool,
    objects: &[(Kind, &str, i32)],
) -> Option<(engines::EngineLock, PathBuf, Fixture)> {
    let lock = engines::lock_engine("k8s", exclusive).unwrap_or_else(|e| panic!("{e}"));
    let kubeconfig = require()?;
    let fx = Fixture::new(&kubeconfig).await;
    for (kind, name, replicas) in objects {
        fx.create(*kind, name, *replicas, &[]).await;
    }
    Some((lock, kubeconfig, fx))
}

fn config(kubeconfig: &Path, ns: Option<&str>) -> K8sConfig {
    let config = K8sConfig::default()
        .kubeconfig(kubeconfig)
        .kinds([Kind::Deployment, Kind::StatefulSet])
        .watch_config(fast_watch_config());
    match ns {
        Some(ns) => config.namespace(ns),
        None => config,
    }
}

fn report(name: &str, t: Instant) {
    eprintln!("[k8s] {name}: {:.1?}", t.elapsed());
}

/// A watch of the fixture's namespace through a relay (to cut or refuse the
/// connection), its requests counted, past its first snapshot.
struct ViaRelay {
    relay: Relay,
    relayed: lookout_e2e::k8s_util::TempFile,
    requests: Requests,
    rec: Recorder,
}

async fn via_relay(kubeconfig: &Path, fx: &Fixture) -> ViaRelay {
    via_relay_with(kubeconfig, fx, false).await
}

/// [`via_relay`], with readiness watched or not.
async fn via_relay_with(kubeconfig: &Path, fx: &Fixture, readiness: bool) -> ViaRelay {
    let (_, port) = apiserver(kubeconfig);
    let relay = Relay::start(port);
    let relayed = kubeconfig_via(kubeconfig, relay.port());
    let requests = Requests::default();
    let client = counting_client(relayed.path(), &requests).await;
    let cfg = config(relayed.path(), Some(&fx.ns)).readiness(readiness);
    let mut rec = Recorder::with_client(cfg, &client);
    rec.until("first snapshot", STEP, |r| r.connected() >= 1)
        .await;
    ViaRelay {
        relay,
        relayed,
        requests,
        rec,
    }
}

// ------------------------------------------------------------------ lifecycle

async fn lifecycle(kind: Kind) {
    let t = Instant::now();
    let Some((_lock, kubeconfig, fx)) = setup(false, &[]).await else {
        return;
    };
    let mut rec = Recorder::new(config(&kubeconfig, Some(&fx.ns)));
    rec.until("first snapshot", STEP, |r| r.connected() >= 1)
        .await;

    let web = fx.id(kind, "web");
    fx.create(kind, "web", 1, &[("tier", "front")]).await;
    rec.until("created + started", STEP, |r| r.of(&web).len() >= 2)
        .await;
    fx.scale(kind, "web", 0).await;
    rec.until("stopped", STEP, |r| r.of(&web).len() >= 3).await;
    fx.scale(kind, "web", 2).await;
    rec.until("started", STEP, |r| r.of(&web).len() >= 4).await;
    // A label-only change is no event, but the labels follow.
    fx.label(kind, "web", "tier", "back").await;
    fx.delete(kind, "web").await;
    rec.until("removed", STEP, |r| r.of(&web).len() >= 5).await;
    // A fence of the same kind: a duplicate of web's events would precede it.
    let fence = fx.id(kind, "fence");
    fx.create(kind, "fence", 0, &[]).await;
    rec.until("fence created", STEP, |r| !r.of(&fence).is_empty())
        .await;

    assert_eq!(
        rec.of(&web),
        [
            (Created, Live),
            (Started, Live),
            (Stopped, Live),
            (Started, Live),
            (Removed, Live)
        ],
        "{rec:?}"
    );
    assert_eq!(rec.of(&fence), [(Created, Live)], "{rec:?}");
    let removed = rec
        .events
        .iter()
        .find(|e| e.id.as_str() == web && e.kind == Removed)
        .expect("removed");
    assert_eq!(removed.labels.get("tier"), Some("back"));
    assert_eq!(rec.disconnected(), 0, "{rec:?}");
    report(&format!("{kind} lifecycle"), t);
}

#[tokio::test(flavor = "current_thread")]
async fn k8s_deployment_lifecycle() {
    lifecycle(Kind::Deployment).await;
}

#[tokio::test(flavor = "current_thread")]
async fn k8s_statefulset_lifecycle() {
    lifecycle(Kind::StatefulSet).await;
}

/// All namespaces, one label selector: other objects, even in the same
/// namespace, stay out.
#[tokio::test(flavor = "current_thread")]
async fn k8s_label_selector_excludes_others() {
    let t = Instant::now();
    let Some((_lock, kubeconfig, fx)) = setup(false, &[]).await else {
        return;
    };
    let cfg = config(&kubeconfig, None).label_selector(format!("{RUN_LABEL}={},pick=yes", fx.run));
    let mut rec = Recorder::new(cfg);
    rec.until("first snapshot", STEP, |r| r.connected() >= 1)
        .await;

    // Within each kind the watch is ordered: the excluded objects come first,
    // so had they leaked they would precede the included ones.
    fx.create(Kind::Deployment, "out", 1, &[("pick", "no")])
        .await;
    fx.create(Kind::StatefulSet, "out", 1, &[]).await;
    fx.scale(Kind::Deployment, "out", 0).await;
    fx.create(Kind::Deployment, "in", 1, &[("pick", "yes")])
        .await;
    fx.create(Kind::StatefulSet, "in", 0, &[("pick", "yes")])
        .await;
    let d_in = fx.id(Kind::Deployment, "in");
    let s_in = fx.id(Kind::StatefulSet, "in");
    rec.until("the selected objects", STEP, |r| {
        r.of(&d_in).len() >= 2 && !r.of(&s_in).is_empty()
    })
    .await;
    fx.delete(Kind::StatefulSet, "out").await;
    fx.delete(Kind::Deployment, "out").await;
    fx.scale(Kind::Deployment, "in", 0).await;
    fx.scale(Kind::StatefulSet, "in", 3).await;
    rec.until("the fences", STEP, |r| {
        r.of(&d_in).len() >= 3 && r.of(&s_in).len() >= 2
    })
    .await;

    assert_eq!(
        rec.of(&d_in),
        [(Created, Live), (Started, Live), (Stopped, Live)],
        "{rec:?}"
    );
    assert_eq!(rec.of(&s_in), [(Created, Live), (Started, Live)], "{rec:?}");
    let ids: HashSet<&str> = rec.events.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(
        ids,
        HashSet::from([d_in.as_str(), s_in.as_str()]),
        "{rec:?}"
    );
    report("label selector", t);
}

// ------------------------------------------------------------------ disruptions

/// Brings a killed apiserver back if the test fails half-way.
struct Revive;

impl Drop for Revive {
    fn drop(&mut self) {
        if engines::k8s_status().is_err() {
            let _ = engines::k8s_restart_apiserver();
        }
    }
}

/// Wakes a stopped apiserver whatever happens.
struct Cont;

impl Drop for Cont {
    fn drop(&mut self) {
        let _ = engines::k8s_signal_apiserver("CONT");
    }
}

/// kill -9 the apiserver; while it is down (and the watch kept from
/// redialing by a refusing relay) one deployment is scaled to 0 and another
/// deleted: the redial resumes each kind's watch from its resourceVersion
/// (etcd still has them), and the apiserver replays both changes: each
/// reported once, live, with no list.
#[tokio::test(flavor = "current_thread")]
async fn k8s_apiserver_restart_reports_missed_transitions_once() {
    let t = Instant::now();
    let Some((_lock, kubeconfig, mut fx)) = setup(true, &TRIO).await else {
        return;
    };
    require_controlled(&kubeconfig);
    let [a, b, s] = TRIO.map(|(kind, name, _)| fx.id(kind, name));
    let ViaRelay {
        relay,
        relayed,
        requests,
        mut rec,
    } = via_relay(&kubeconfig, &fx).await;

    relay.refuse(true);
    let _revive = Revive;
    engines::k8s_kill_apiserver().unwrap_or_else(|e| panic!("{e}"));
    rec.until("disconnected", STEP, |r| r.disconnected() >= 1)
        .await;
    engines::k8s_restart_apiserver().unwrap_or_else(|e| panic!("{e}"));
    fx.reconnect().await;
    fx.scale(Kind::Deployment, "a", 0).await;
    fx.delete(Kind::Deployment, "b").await;
    assert!(rec.events.is_empty(), "nothing can be seen yet: {rec:?}");

    relay.refuse(false);
    rec.until(
        "reconnected, the missed changes replayed",
        Duration::from_secs(30),
        |r| r.connected() >= 2 && !r.of(&a).is_empty() && !r.of(&b).is_empty(),
    )
    .await;
    assert_eq!(rec.of(&a), [(Stopped, Live)], "{rec:?}");
    assert_eq!(rec.of(&b), [(Removed, Live)], "{rec:?}");
    assert_eq!(rec.of(&s), [], "{rec:?}");

    // Live again, and nothing repeated: fences of both kinds.
    fx.scale(Kind::Deployment, "a", 1).await;
    fx.scale(Kind::StatefulSet, "s", 0).await;
    rec.until("live fences", STEP, |r| {
        r.of(&a).len() >= 2 && !r.of(&s).is_empty()
    })
    .await;
    assert_eq!(rec.of(&a), [(Stopped, Live), (Started, Live)], "{rec:?}");
    assert_eq!(rec.of(&b), [(Removed, Live)], "{rec:?}");
    assert_eq!(rec.of(&s), [(Stopped, Live)], "{rec:?}");
    assert_eq!(
        requests.count("LIST", None),
        2,
        "one list per kind, on the first dial only: {}\n{rec:?}",
        requests.summary()
    );
    drop(rec);
    drop(relay);
    drop(relayed);
    report("apiserver restart", t);
}

/// The connection is cut (as a network failure): the redial watches each
/// kind from the resourceVersion it had reached — a WATCH, no LIST — and
/// the changes made while disconnected come exactly once, live.
#[tokio::test(flavor = "current_thread")]
async fn k8s_redial_resumes_from_the_cursor_without_a_list() {
    let t = Instant::now();
    let Some((_lock, kubeconfig, fx)) = setup(false, &TRIO).await else {
        return;
    };
    let [a, b, s] = TRIO.map(|(kind, name, _)| fx.id(kind, name));
    let new = fx.id(Kind::Deployment, "c");
    let ViaRelay {
        relay,
        relayed,
        requests,
        mut rec,
    } = via_relay(&kubeconfig, &fx).await;
    // One live change, so the cursor moves past the list.
    fx.scale(Kind::StatefulSet, "s", 0).await;
    rec.until("s stopped", STEP, |r| !r.of(&s).is_empty()).await;
    let before = requests.all().len();
    let watched = |kind: &str| -> Vec<u64> {
        requests.all()[..]
            .iter()
            .filter(|r| r.verb == "WATCH" && r.resource == kind)
            .map(|r| {
                r.resource_version
                    .as_deref()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or_else(|| panic!("a WATCH without a resourceVersion: {r:?}"))
            })
            .collect()
    };
    let last_before = (watched("deployments"), watched("statefulsets"));

    relay.refuse(true);
    relay.cut();
    rec.until("disconnected", STEP, |r| r.disconnected() >= 1)
        .await;
    fx.scale(Kind::Deployment, "a", 0).await;
    fx.delete(Kind::Deployment, "b").await;
    fx.create(Kind::Deployment, "c", 1, &[]).await;
    fx.scale(Kind::StatefulSet, "s", 2).await;
    relay.refuse(false);
    rec.until("the missed changes", Duration::from_secs(30), |r| {
        r.connected() >= 2
            && !r.of(&a).is_empty()
            && !r.of(&b).is_empty()
            && r.of(&new).len() >= 2
            && r.of(&s).len() >= 2
    })
    .await;
    // Fences: nothing repeated after them.
    fx.scale(Kind::Deployment, "a", 1).await;
    fx.scale(Kind::StatefulSet, "s", 0).await;
    rec.until("live fences", STEP, |r| {
        r.of(&a).len() >= 2 && r.of(&s).len() >= 3
    })
    .await;

    assert_eq!(rec.of(&a), [(Stopped, Live), (Started, Live)], "{rec:?}");
    assert_eq!(rec.of(&b), [(Removed, Live)], "{rec:?}");
    assert_eq!(rec.of(&new), [(Created, Live), (Started, Live)], "{rec:?}");
    assert_eq!(
        rec.of(&s),
        [(Stopped, Live), (Started, Live), (Stopped, Live)],
        "{rec:?}"
    );
    let after: Vec<_> = requests.all()[before..].to_vec();
    assert!(
        after.iter().all(|r| r.verb != "LIST"),
        "no list after the cut: {after:?}"
    );
    // Each kind resumed from no older a version than it last watched from.
    let (d_after, s_after) = (watched("deployments"), watched("statefulsets"));
    let (d0, s0) = last_before;
    assert!(
        d_after.len() > d0.len() && s_after.len() > s0.len(),
        "{after:?}"
    );
    assert!(
        d_after[d0.len()] >= *d0.last().expect("a watch"),
        "{after:?}"
    );
    assert!(
        s_after[s0.len()] >= *s0.last().expect("a watch"),
        "{after:?}"
    );
    assert_eq!(requests.count("LIST", None), 2, "{}", requests.summary());
    eprintln!("[k8s] resume: requests {}", requests.summary());
    drop(rec);
    drop(relay);
    drop(relayed);
    report("resume", t);
}

/// The connection is cut and, while disconnected, etcd is compacted past
/// both kinds' versions: the resumed watches get `410 Gone`, each kind
/// relists once, and the net difference is reported as a resync.
#[tokio::test(flavor = "current_thread")]
async fn k8s_redial_after_compaction_relists_once_per_kind() {
    let t = Instant::now();
    let Some((_lock, kubeconfig, fx)) = setup(true, &TRIO).await else {
        return;
    };
    require_controlled(&kubeconfig);
    let [a, b, s] = TRIO.map(|(kind, name, _)| fx.id(kind, name));
    let ViaRelay {
        relay,
        relayed,
        requests,
        mut rec,
    } = via_relay(&kubeconfig, &fx).await;

    relay.refuse(true);
    relay.cut();
    rec.until("disconnected", STEP, |r| r.disconnected() >= 1)
        .await;
    fx.scale(Kind::Deployment, "a", 0).await;
    fx.scale(Kind::Deployment, "a", 1).await;
    fx.scale(Kind::Deployment, "a", 0).await;
    fx.delete(Kind::Deployment, "b").await;
    let rev = compact(&fx, "bump").await;
    relay.refuse(false);
    rec.until("the relists' differences", Duration::from_secs(30), |r| {
        !r.of(&a).is_empty()
            && !r.of(&b).is_empty()
            && past(&requests, "deployments", 2, rev)
            && past(&requests, "statefulsets", 2, rev)
    })
    .await;
    fx.scale(Kind::StatefulSet, "s", 0).await;
    rec.until("a live fence", STEP, |r| !r.of(&s).is_empty())
        .await;
    // The net effect only: a's stop, start, stop is one stop.
    assert_eq!(rec.of(&a), [(Stopped, Resync)], "{rec:?}");
    assert_eq!(rec.of(&b), [(Removed, Resync)], "{rec:?}");
    assert_eq!(rec.of(&s), [(Stopped, Live)], "{rec:?}");
    assert_eq!(
        (
            requests.count("LIST", Some("deployments")),
            requests.count("LIST", Some("statefulsets"))
        ),
        (2, 2),
        "one list per kind at first, one per 410: {}\n{rec:?}",
        requests.summary()
    );
    eprintln!("[k8s] 410 on resume: requests {}", requests.summary());
    drop(rec);
    drop(relay);
    drop(relayed);
    report("410 on resume", t);
}

/// A streaming list (`sendInitialEvents`): the first sync is one WATCH per
/// kind and no LIST; the objects it streams form the snapshot, and the same
/// watch goes on live.
#[tokio::test(flavor = "current_thread")]
async fn k8s_streaming_list_syncs_without_a_list_request() {
    let t = Instant::now();
    let Some((_lock, kubeconfig, fx)) = setup(false, &TRIO).await else {
        return;
    };
    let [a, _, s] = TRIO.map(|(kind, name, _)| fx.id(kind, name));
    let requests = Requests::default();
    let client = counting_client(&kubeconfig, &requests).await;
    let cfg = config(&kubeconfig, Some(&fx.ns)).watch_config(fast_watch_config().initial(true));
    let dial = K8sDial::with_client(&cfg, move || client.clone())
        .expect("a valid config")
        .initial_list(InitialList::Streaming);
    let mut rec = Recorder::pump(lookout_core::Watch::new(
        dial,
        cfg.get_watch_config().clone(),
    ));
    rec.until("first snapshot", STEP, |r| r.connected() >= 1)
        .await;
    assert_eq!(
        rec.of(&a),
        [(Created, Initial), (Started, Initial)],
        "{rec:?}"
    );
    assert_eq!(
        rec.of(&s),
        [(Created, Initial), (Started, Initial)],
        "{rec:?}"
    );
    fx.scale(Kind::Deployment, "a", 0).await;
    fx.scale(Kind::StatefulSet, "s", 0).await;
    rec.until("live", STEP, |r| r.of(&a).len() >= 3 && r.of(&s).len() >= 3)
        .await;
    assert_eq!(rec.of(&a)[2..], [(Stopped, Live)], "{rec:?}");
    assert_eq!(rec.of(&s)[2..], [(Stopped, Live)], "{rec:?}");
    let sent = requests.all();
    assert_eq!(requests.count("LIST", None), 0, "{sent:?}");
    let streamed = sent
        .iter()
        .filter(|r| r.verb == "WATCH" && r.initial_events);
    assert_eq!(streamed.count(), 2, "one streaming list per kind: {sent:?}");
    report("streaming list", t);
}

/// Writes a `ConfigMap` (etcd's revision moves on), then compacts etcd.
async fn compact(fx: &Fixture, bump: &str) -> u64 {
    fx.bump(bump).await;
    let revision = engines::k8s_compact().unwrap_or_else(|e| panic!("{e}"));
    eprintln!("[k8s] compacted etcd at revision {revision}");
    u64::try_from(revision).unwrap_or_else(|_| panic!("revision {revision}"))
}

/// Whether `kind` (a resource: `deployments`) is past `revision` in a
/// compaction's aftermath: it listed `lists` times, or watches from a
/// version not older than `revision` (a bookmark moved it past: no 410).
fn past(requests: &Requests, kind: &str, lists: usize, revision: u64) -> bool {
    let sent = requests.all();
    let listed = sent
        .iter()
        .filter(|r| r.verb == "LIST" && r.resource == kind && r.status.is_some())
        .count();
    let fresh = sent.iter().any(|r| {
        r.verb == "WATCH"
            && r.resource == kind
            && r.status.is_some()
            && r.resource_version
                .as_deref()
                .and_then(|v| v.parse::<u64>().ok())
                .is_some_and(|v| v >= revision)
    });
    listed >= lists || fresh
}

/// Compacting etcd expires the watchers' resourceVersions: the next watch
/// request gets 410 Gone and that kind relists inside the session (no
/// Disconnected), without losing or repeating a transition, and without
/// taking the other kind's objects for removed. (A kind whose version a
/// bookmark moved past the compaction needs no relist: it resumes.)
#[tokio::test(flavor = "current_thread")]
async fn k8s_compaction_410_relists_without_loss_or_duplicates() {
    let t = Instant::now();
    let Some((_lock, kubeconfig, fx)) = setup(true, &TRIO).await else {
        return;
    };
    require_controlled(&kubeconfig);
    let [a, b, s] = TRIO.map(|(kind, name, _)| fx.id(kind, name));
    let requests = Requests::default();
    let client = counting_client(&kubeconfig, &requests).await;
    let mut rec = Recorder::with_client(config(&kubeconfig, Some(&fx.ns)), &client);
    rec.until("first snapshot", STEP, |r| r.connected() >= 1)
        .await;

    // 1. Move etcd on past both (idle) watchers' versions, then compact it
    // away: the apiserver ends each watch with 410 Gone (at once, or when the
    // watch is resumed after its ~2 s timeout), and each kind relists inside
    // the session. An unchanged state yields nothing, and neither relist takes
    // the other kind's objects for removed.
    let rev = compact(&fx, "bump-1").await;
    rec.until("both kinds past the compaction", STEP, |_| {
        past(&requests, "deployments", 2, rev) && past(&requests, "statefulsets", 2, rev)
    })
    .await;
    let lists = requests.answered("LIST");
    assert!(
        lists > 2,
        "at least one kind relisted: {}",
        requests.summary()
    );
    // Two kinds relisting at once make one snapshot of both.
    rec.until("a relist's snapshot", STEP, |r| r.connected() >= 2)
        .await;
    assert!(rec.events.is_empty(), "{rec:?}");

    // 2. Again, with a deployment scaled at once: its watch sees that live,
    // or gets 410 first and finds it by relisting; once either way.
    let rev = compact(&fx, "bump-2").await;
    fx.scale(Kind::Deployment, "a", 0).await;
    rec.until("a's scaling", STEP, |r| !r.of(&a).is_empty())
        .await;
    let d_lists = requests.count("LIST", Some("deployments"));
    let s_lists = requests.count("LIST", Some("statefulsets"));
    rec.until("both kinds past the compaction", STEP, |_| {
        past(&requests, "deployments", d_lists, rev)
            && past(&requests, "statefulsets", s_lists + 1, rev)
    })
    .await;
    fx.delete(Kind::Deployment, "b").await;
    fx.scale(Kind::StatefulSet, "s", 0).await;
    rec.until("b and s", STEP, |r| {
        !r.of(&b).is_empty() && !r.of(&s).is_empty()
    })
    .await;

    let kinds = |id: &str| rec.of(id).iter().map(|e| e.0).collect::<Vec<_>>();
    assert_eq!(kinds(&a), [Stopped], "{rec:?}");
    assert_eq!(kinds(&b), [Removed], "{rec:?}");
    assert_eq!(kinds(&s), [Stopped], "{rec:?}");
    assert_eq!(rec.disconnected(), 0, "a 410 is no disconnect: {rec:?}");
    eprintln!("[k8s] compaction 410: requests {}", requests.summary());
    report("compaction 410", t);
}

/// A frozen apiserver (SIGSTOP) is noticed within the stall bound
/// (`probe_after` + `probe_timeout`); after SIGCONT the watch recovers.
#[tokio::test(flavor = "current_thread")]
async fn k8s_stopped_apiserver_is_noticed_and_recovered() {
    let t = Instant::now();
    let Some((_lock, kubeconfig, fx)) = setup(true, &[(Kind::Deployment, "a", 1)]).await else {
        return;
    };
    require_controlled(&kubeconfig);
    let a = fx.id(Kind::Deployment, "a");
    let cfg = config(&kubeconfig, Some(&fx.ns));
    let bound =
        cfg.get_watch_config().get_probe_after() + cfg.get_watch_config().get_probe_timeout();
    let mut rec = Recorder::new(cfg);
    rec.until("first snapshot", STEP, |r| r.connected() >= 1)
        .await;

    let cont = Cont;
    engines::k8s_signal_apiserver("STOP").unwrap_or_else(|e| panic!("{e}"));
    let stopped = Instant::now();
    rec.until("disconnected", bound * 4, |r| r.disconnected() >= 1)
        .await;
    let noticed = stopped.elapsed();
    let (_, first) = rec
        .statuses
        .iter()
        .find(|(_, s)| matches!(s, Status::Disconnected { .. }))
        .expect("disconnected");
    let Status::Disconnected { error, .. } = first else {
        unreachable!()
    };
    assert!(
        matches!(
            **error,
            Error::ProbeTimeout { .. } | Error::ProbeFailed { .. }
        ),
        "{error}"
    );
    eprintln!("[k8s] SIGSTOP noticed after {noticed:.2?} (bound {bound:?}): {error}");
    // The bound plus scheduling slack.
    assert!(
        noticed <= bound + Duration::from_millis(1500),
        "{noticed:?} > {bound:?}: {rec:?}"
    );

    drop(cont);
    let connected = rec.connected();
    rec.until("recovered", Duration::from_secs(30), |r| {
        r.connected() > connected
    })
    .await;
    fx.scale(Kind::Deployment, "a", 0).await;
    rec.until("live again", STEP, |r| !r.of(&a).is_empty())
        .await;
    assert_eq!(rec.of(&a), [(Stopped, Live)], "{rec:?}");
    report("SIGSTOP", t);
}

/// Dropping the stream leaves no task behind and closes its connections,
/// the apiserver's ends included.
#[test]
fn k8s_drop_closes_connections_and_leaves_no_task() {
    let t = Instant::now();
    let runtime = || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
    };
    // The fixture's client lives on a runtime of its own.
    let fixture_rt = runtime();
    let Some((_lock, kubeconfig, fx)) =
        fixture_rt.block_on(setup(true, &[(Kind::Deployment, "a", 1)]))
    else {
        return;
    };
    let (_, port) = apiserver(&kubeconfig);
    let before: HashSet<(u16, u16)> = my_connections_to(port).into_iter().collect();

    let rt = runtime();
    let mut rec = Recorder::new(config(&kubeconfig, Some(&fx.ns)));
    rt.block_on(async {
        rec.until("first snapshot", STEP, |r| r.connected() >= 1)
            .await;
    });
    fixture_rt.block_on(fx.scale(Kind::Deployment, "a", 0));
    let a = fx.id(Kind::Deployment, "a");
    rt.block_on(async {
        rec.until("live", STEP, |r| !r.of(&a).is_empty()).await;
    });
    let ours: Vec<(u16, u16)> = my_connections_to(port)
        .into_iter()
        .filter(|c| !before.contains(c))
        .collect();
    assert!(
        !ours.is_empty(),
        "the watch holds connections to the apiserver"
    );
    let tasks = rt.metrics().num_alive_tasks();
    eprintln!(
        "[k8s] while watching: {} connection(s) {ours:?}, {tasks} task(s)",
        ours.len()
    );

    drop(rec);
    let deadline = Instant::now() + Duration::from_secs(5);
    let gone = |ours: &[(u16, u16)]| {
        ours.iter()
            .all(|(local, remote)| !established(*local, *remote))
    };
    rt.block_on(async {
        while (rt.metrics().num_alive_tasks() > 0 || !gone(&ours)) && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    assert_eq!(rt.metrics().num_alive_tasks(), 0, "tasks left after drop");
    assert!(gone(&ours), "connections left after drop: {ours:?}");
    drop(rt);
    drop(fx);
    drop(fixture_rt);
    report("drop", t);
}

// ------------------------------------------------------------------ readiness (real apiserver)

/// A status as `kind`'s controller would write it for `replicas` pods with
/// the spec of generation `observed` seen, `serving` of them counted by the
/// rule: a Deployment's available ones (its pods all ready, so that only
/// `availableReplicas` tells), a `StatefulSet`'s ready ones (none available,
/// so that only `readyReplicas` tells). (The apiserver validates a status:
/// no count above `replicas`, none available that is not ready.)
fn workload_status(kind: Kind, replicas: i64, observed: i64, serving: i64) -> serde_json::Value {
    match kind {
        Kind::Deployment => json!({
            "observedGeneration": observed,
            "replicas": replicas,
            "updatedReplicas": replicas,
            "readyReplicas": replicas,
            "availableReplicas": serving,
        }),
        Kind::StatefulSet => json!({
            "observedGeneration": observed,
            "replicas": replicas,
            "currentReplicas": replicas,
            "updatedReplicas": replicas,
            "readyReplicas": serving,
            "availableReplicas": 0,
        }),
        other => panic!("no status for {other}"),
    }
}

/// The testbed runs no controller, so the test writes each status through
/// the status subresource as the workload's controller would: readiness on,
/// each flip of the rule is one `ready` / `unready`; a scale-up is
/// `unready` until its generation is observed; the same status written
/// again (a no-op: no watch event), or one that changes only what the rule
/// does not read (a watch event), is nothing; a scale to 0 is `stopped`,
/// with no `unready` before it. (`kubectl rollout status` cannot be
/// compared here: it waits for controllers that the testbed does not run.)
async fn readiness_follows_status(kind: Kind) {
    let t = Instant::now();
    let Some((_lock, kubeconfig, fx)) = setup(false, &[]).await else {
        return;
    };
    let mut rec = Recorder::new(config(&kubeconfig, Some(&fx.ns)).readiness(true));
    rec.until("first snapshot", STEP, |r| r.connected() >= 1)
        .await;
    let web = fx.id(kind, "web");
    let n = |r: &Recorder| r.of(&web).len();
    let status = |replicas, observed, serving| workload_status(kind, replicas, observed, serving);

    // Created with 2 replicas and no status yet: running, not ready.
    fx.create(kind, "web", 2, &[]).await;
    rec.until("created, started", STEP, |r| n(r) >= 2).await;
    let first = fx.generation(kind, "web").await;
    // (1) Both serving, the spec observed: ready.
    fx.set_status(kind, "web", status(2, first, 2)).await;
    rec.until("(1) ready", STEP, |r| n(r) >= 3).await;
    // (2) One short: unready.
    fx.set_status(kind, "web", status(2, first, 1)).await;
    rec.until("(2) unready", STEP, |r| n(r) >= 4).await;
    // (3) Both again: ready.
    fx.set_status(kind, "web", status(2, first, 2)).await;
    rec.until("(3) ready", STEP, |r| n(r) >= 5).await;
    // (4) Scaled to 3: the generation moves on, the status has not seen it.
    fx.scale(kind, "web", 3).await;
    let second = fx.generation(kind, "web").await;
    assert!(second > first, "a spec change bumps the generation");
    rec.until("(4) unready", STEP, |r| n(r) >= 6).await;
    // (5) The controller observed it, 3 serving: ready.
    let v5 = fx.set_status(kind, "web", status(3, second, 3)).await;
    rec.until("(5) ready", STEP, |r| n(r) >= 7).await;
    // The same status again: the apiserver writes nothing.
    let again = fx.set_status(kind, "web", status(3, second, 3)).await;
    assert_eq!(again, v5, "a no-op write moves no resourceVersion");
    // A status change the rule does not read: a MODIFIED, told nothing.
    let mut other = status(3, second, 3);
    other["collisionCount"] = json!(1);
    let v6 = fx.set_status(kind, "web", other).await;
    assert_ne!(v6, v5, "a real write: the watch gets a MODIFIED");
    // A fence of the same kind (the watch is ordered): anything told of
    // the writes above would precede it.
    let fence = fx.id(kind, "fence");
    fx.create(kind, "fence", 0, &[]).await;
    rec.until("fence", STEP, |r| !r.of(&fence).is_empty()).await;
    assert_eq!(n(&rec), 7, "{rec:?}");
    // Scaled to 0: stopped, readiness ends without an unready.
    fx.scale(kind, "web", 0).await;
    rec.until("stopped", STEP, |r| n(r) >= 8).await;

    let replicas = Readiness::replicas;
    assert_eq!(
        with_readiness(&rec, &web),
        [
            (Created, Live, Some(replicas(2, 0, false))),
            (Started, Live, Some(replicas(2, 0, false))),
            (Ready, Live, Some(replicas(2, 2, true))),
            (Unready, Live, Some(replicas(2, 1, true))),
            (Ready, Live, Some(replicas(2, 2, true))),
            (Unready, Live, Some(replicas(3, 2, false))),
            (Ready, Live, Some(replicas(3, 3, true))),
            (Stopped, Live, Some(replicas(0, 3, false))),
        ],
        "{rec:?}"
    );
    assert_eq!(rec.disconnected(), 0, "{rec:?}");
    report(&format!("{kind} readiness"), t);
}

#[tokio::test(flavor = "current_thread")]
async fn k8s_deployment_readiness_follows_status() {
    readiness_follows_status(Kind::Deployment).await;
}

#[tokio::test(flavor = "current_thread")]
async fn k8s_statefulset_readiness_follows_status() {
    readiness_follows_status(Kind::StatefulSet).await;
}

/// With `initial` and readiness, the first snapshot tells a ready workload
/// `created, started, ready`, a running one that is not ready `created,
/// started`, a stopped one `created`; live changes go on from there.
#[tokio::test(flavor = "current_thread")]
async fn k8s_readiness_initial_tells_ready_workloads_ready() {
    let t = Instant::now();
    let objects = [
        (Kind::Deployment, "ready", 2),
        (Kind::Deployment, "short", 2),
        (Kind::Deployment, "off", 0),
        (Kind::StatefulSet, "ready", 1),
    ];
    let Some((_lock, kubeconfig, fx)) = setup(false, &objects).await else {
        return;
    };
    // (kind, name, replicas, serving): a controller's status for each.
    for (kind, name, replicas, serving) in [
        (Kind::Deployment, "ready", 2, 2),
        (Kind::Deployment, "short", 2, 1),
        (Kind::StatefulSet, "ready", 1, 1),
    ] {
        let generation = fx.generation(kind, name).await;
        let status = workload_status(kind, replicas, generation, serving);
        fx.set_status(kind, name, status).await;
    }
    let mut rec = Recorder::new(
        config(&kubeconfig, Some(&fx.ns))
            .readiness(true)
            .watch_config(fast_watch_config().initial(true)),
    );
    rec.until("first snapshot", STEP, |r| r.connected() >= 1)
        .await;
    let [ready, short, off, s_ready] = objects.map(|(kind, name, _)| fx.id(kind, name));
    let initial = [(Created, Initial), (Started, Initial), (Ready, Initial)];
    assert_eq!(rec.of(&ready), initial, "{rec:?}");
    assert_eq!(rec.of(&s_ready), initial, "{rec:?}");
    assert_eq!(rec.of(&short), initial[..2], "{rec:?}");
    assert_eq!(rec.of(&off), [(Created, Initial)], "{rec:?}");
    let detail = |id: &str| {
        rec.events
            .iter()
            .rfind(|e| e.id.as_str() == id)
            .and_then(|e| e.readiness)
    };
    assert_eq!(detail(&ready), Some(Readiness::replicas(2, 2, true)));
    assert_eq!(detail(&short), Some(Readiness::replicas(2, 1, true)));
    assert_eq!(detail(&off), Some(Readiness::replicas(0, 0, false)));
    // Live from there: short gets its second replica.
    let generation = fx.generation(Kind::Deployment, "short").await;
    fx.set_status(
        Kind::Deployment,
        "short",
        workload_status(Kind::Deployment, 2, generation, 2),
    )
    .await;
    rec.until("short ready", STEP, |r| r.of(&short).len() >= 3)
        .await;
    assert_eq!(rec.of(&short)[2..], [(Ready, Live)], "{rec:?}");
    assert_eq!(rec.of(&ready).len(), 3, "{rec:?}");
    report("readiness initial", t);
}

/// Readiness changes made while the watch is disconnected (the connection
/// cut, new ones refused): the redial resumes each kind's watch — no LIST —
/// and each change arrives exactly once, live; nothing is repeated after.
#[tokio::test(flavor = "current_thread")]
async fn k8s_readiness_change_while_disconnected_arrives_once() {
    let t = Instant::now();
    let objects = [(Kind::Deployment, "a", 2), (Kind::StatefulSet, "s", 1)];
    let Some((_lock, kubeconfig, fx)) = setup(false, &objects).await else {
        return;
    };
    let [a, s] = objects.map(|(kind, name, _)| fx.id(kind, name));
    let ga = fx.generation(Kind::Deployment, "a").await;
    let gs = fx.generation(Kind::StatefulSet, "s").await;
    let status_a = |serving| workload_status(Kind::Deployment, 2, ga, serving);
    let status_s = |serving| workload_status(Kind::StatefulSet, 1, gs, serving);
    fx.set_status(Kind::Deployment, "a", status_a(2)).await;
    fx.set_status(Kind::StatefulSet, "s", status_s(1)).await;
    let ViaRelay {
        relay,
        relayed,
        requests,
        mut rec,
    } = via_relay_with(&kubeconfig, &fx, true).await;
    // One live flip, so the Deployments' cursor moves past the list.
    fx.set_status(Kind::Deployment, "a", status_a(1)).await;
    rec.until("a unready", STEP, |r| !r.of(&a).is_empty()).await;
    let before = requests.all().len();

    relay.refuse(true);
    relay.cut();
    rec.until("disconnected", STEP, |r| r.disconnected() >= 1)
        .await;
    fx.set_status(Kind::Deployment, "a", status_a(2)).await;
    fx.set_status(Kind::StatefulSet, "s", status_s(0)).await;
    relay.refuse(false);
    rec.until("the missed readiness", Duration::from_secs(30), |r| {
        r.connected() >= 2 && r.of(&a).len() >= 2 && !r.of(&s).is_empty()
    })
    .await;
    // Fences of both kinds: a repeat of the missed changes would precede them.
    fx.set_status(Kind::Deployment, "a", status_a(1)).await;
    fx.set_status(Kind::StatefulSet, "s", status_s(1)).await;
    rec.until("live fences", STEP, |r| {
        r.of(&a).len() >= 3 && r.of(&s).len() >= 2
    })
    .await;

    assert_eq!(
        rec.of(&a),
        [(Unready, Live), (Ready, Live), (Unready, Live)],
        "{rec:?}"
    );
    assert_eq!(rec.of(&s), [(Unready, Live), (Ready, Live)], "{rec:?}");
    let after: Vec<_> = requests.all()[before..].to_vec();
    assert!(
        after.iter().all(|r| r.verb != "LIST"),
        "no list after the cut: {after:?}"
    );
    drop(rec);
    drop(relay);
    drop(relayed);
    report("readiness across a cut", t);
}

/// Readiness changes made while disconnected, with etcd compacted past the
/// watches' versions meanwhile: each kind relists (`410`), and each change
/// arrives exactly once, as the relist's net effect (`resync`) — not also
/// as a replay. A flip and its undoing while disconnected are no event.
#[tokio::test(flavor = "current_thread")]
async fn k8s_readiness_change_past_a_compaction_arrives_once_as_resync() {
    let t = Instant::now();
    let objects = [
        (Kind::Deployment, "a", 2),
        (Kind::Deployment, "b", 1),
        (Kind::StatefulSet, "s", 1),
    ];
    let Some((_lock, kubeconfig, fx)) = setup(true, &objects).await else {
        return;
    };
    require_controlled(&kubeconfig);
    let [a, b, s] = objects.map(|(kind, name, _)| fx.id(kind, name));
    let ga = fx.generation(Kind::Deployment, "a").await;
    let gb = fx.generation(Kind::Deployment, "b").await;
    let gs = fx.generation(Kind::StatefulSet, "s").await;
    let status_a = |serving| workload_status(Kind::Deployment, 2, ga, serving);
    let status_b = |serving| workload_status(Kind::Deployment, 1, gb, serving);
    let status_s = |serving| workload_status(Kind::StatefulSet, 1, gs, serving);
    fx.set_status(Kind::Deployment, "a", status_a(2)).await;
    fx.set_status(Kind::Deployment, "b", status_b(1)).await;
    let ViaRelay {
        relay,
        relayed,
        requests,
        mut rec,
    } = via_relay_with(&kubeconfig, &fx, true).await;

    relay.refuse(true);
    relay.cut();
    rec.until("disconnected", STEP, |r| r.disconnected() >= 1)
        .await;
    // a: unready; b: unready then ready again (no net change); s: ready.
    fx.set_status(Kind::Deployment, "a", status_a(1)).await;
    fx.set_status(Kind::Deployment, "b", status_b(0)).await;
    fx.set_status(Kind::Deployment, "b", status_b(1)).await;
    fx.set_status(Kind::StatefulSet, "s", status_s(1)).await;
    let rev = compact(&fx, "bump").await;
    relay.refuse(false);
    rec.until("the relists' differences", Duration::from_secs(30), |r| {
        !r.of(&a).is_empty()
            && !r.of(&s).is_empty()
            && past(&requests, "deployments", 2, rev)
            && past(&requests, "statefulsets", 2, rev)
    })
    .await;
    // Live fences of both kinds.
    fx.set_status(Kind::Deployment, "b", status_b(0)).await;
    fx.set_status(Kind::StatefulSet, "s", status_s(0)).await;
    rec.until("live fences", STEP, |r| {
        !r.of(&b).is_empty() && r.of(&s).len() >= 2
    })
    .await;
    assert_eq!(rec.of(&a), [(Unready, Resync)], "{rec:?}");
    assert_eq!(rec.of(&b), [(Unready, Live)], "{rec:?}");
    assert_eq!(rec.of(&s), [(Ready, Resync), (Unready, Live)], "{rec:?}");
    drop(rec);
    drop(relay);
    drop(relayed);
    report("readiness past a compaction", t);
}

// ------------------------------------------------------------------ the fake apiserver

fn fake_config(fake: &FakeApi, kinds: &[Kind]) -> K8sConfig {
    K8sConfig::default()
        .kubeconfig(fake.kubeconfig(&std::env::temp_dir()))
        .namespace("fake")
        .kinds(kinds.iter().copied())
        .watch_config(fast_watch_config())
}

fn dep(name: &str, rv: u64, replicas: &serde_json::Value) -> serde_json::Value {
    object(
        Kind::Deployment,
        "fake",
        name,
        &format!("uid-{name}"),
        rv,
        replicas,
    )
}

const WEB: &str = "deployment/fake/web";

/// A watch response that ends in the middle of a chunk: the watch is resumed
/// from the last complete event's version; nothing lost, nothing repeated.
#[tokio::test(flavor = "current_thread")]
async fn fake_watch_cut_mid_chunk_resumes() {
    let gate = Gate::default();
    let g = gate.clone();
    let fake = FakeApi::start(move |r| match (r.resource.as_deref(), r.watch, r.nth) {
        (Some("deployments"), false, _) => list(Kind::Deployment, 10, &[dep("web", 10, &json!(1))]),
        (Some("deployments"), true, 0) => Reply::Watch(vec![
            Frame::Gate(g.clone()),
            Frame::Line(event("MODIFIED", &dep("web", 11, &json!(0)))),
            Frame::Cut(event("MODIFIED", &dep("web", 12, &json!(2)))),
        ]),
        (Some("deployments"), true, _) => Reply::Watch(vec![
            Frame::Line(event("MODIFIED", &dep("web", 12, &json!(2)))),
            Frame::Hold,
        ]),
        _ => Reply::Json(404, "{}".into()),
    });
    let mut rec = Recorder::new(fake_config(&fake, &[Kind::Deployment]));
    rec.until("first snapshot", STEP, |r| r.connected() >= 1)
        .await;
    gate.open();
    rec.until("stopped, started", STEP, |r| r.of(WEB).len() >= 2)
        .await;
    assert_eq!(rec.of(WEB), [(Stopped, Live), (Started, Live)], "{rec:?}");
    let watches: Vec<Option<String>> = fake
        .requests()
        .iter()
        .filter(|r| r.watch)
        .map(|r| r.resource_version().map(Into::into))
        .collect();
    assert_eq!(
        watches[..2],
        [Some("10".into()), Some("11".into())],
        "{rec:?}"
    );
    assert_eq!(
        fake.requests()
            .iter()
            .filter(|r| r.resource.is_some() && !r.watch)
            .count(),
        1,
        "resumed, not relisted: {rec:?}"
    );
    assert_eq!(rec.disconnected(), 0, "{rec:?}");
}

/// Objects and events that cannot be read are skipped; the session goes on.
#[tokio::test(flavor = "current_thread")]
async fn fake_undecodable_objects_are_skipped() {
    let fake = FakeApi::start(move |r| match (r.resource.as_deref(), r.watch, r.nth) {
        (Some("deployments"), false, _) => list(
            Kind::Deployment,
            10,
            &[dep("web", 10, &json!(1)), dep("bad", 10, &json!("two"))],
        ),
        (Some("deployments"), true, 0) => Reply::Watch(vec![
            Frame::Line("{not json".into()),
            Frame::Line(event("MODIFIED", &json!({ "metadata": { "name": 5 } }))),
            Frame::Line(event("MODIFIED", &dep("web", 11, &json!("x")))),
            Frame::Line(event("ADDED", &dep("bad", 12, &json!(true)))),
            Frame::Line(event("MODIFIED", &dep("web", 13, &json!(0)))),
            Frame::Hold,
        ]),
        (Some("deployments"), true, _) => Reply::Watch(vec![Frame::Hold]),
        _ => Reply::Json(404, "{}".into()),
    });
    let mut rec = Recorder::new(fake_config(&fake, &[Kind::Deployment]));
    rec.until("stopped", STEP, |r| !r.of(WEB).is_empty()).await;
    assert_eq!(rec.of(WEB), [(Stopped, Live)], "{rec:?}");
    assert!(rec.of("deployment/fake/bad").is_empty(), "{rec:?}");
    assert_eq!(rec.disconnected(), 0, "{rec:?}");
    assert_eq!(rec.connected(), 1, "{rec:?}");
}

/// `410 Gone` on one kind's watch: that kind relists inside the session; its
/// vanished object is reported Removed and its missed scaling Stopped, as a
/// resync; the other kind's object is not taken for removed.
#[tokio::test(flavor = "current_thread")]
async fn fake_410_relists_one_kind_and_keeps_the_other() {
    let gate = Gate::default();
    let g = gate.clone();
    let sts = object(Kind::StatefulSet, "fake", "db", "uid-db", 10, &json!(1));
    let fake = FakeApi::start(move |r| match (r.resource.as_deref(), r.watch, r.nth) {
        (Some("deployments"), false, 0) => list(
            Kind::Deployment,
            10,
            &[dep("web", 10, &json!(1)), dep("api", 10, &json!(1))],
        ),
        (Some("deployments"), false, _) => list(Kind::Deployment, 20, &[dep("web", 20, &json!(0))]),
        (Some("deployments"), true, 0) => Reply::Watch(vec![
            Frame::Gate(g.clone()),
            Frame::Line(error_event(
                410,
                "Expired",
                "too old resource version: 10 (15)",
            )),
        ]),
        (Some("statefulsets"), false, _) => list(Kind::StatefulSet, 10, std::slice::from_ref(&sts)),
        (Some(_), true, _) => Reply::Watch(vec![Frame::Hold]),
        _ => Reply::Json(404, "{}".into()),
    });
    let mut rec = Recorder::new(fake_config(&fake, &[Kind::Deployment, Kind::StatefulSet]));
    rec.until("first snapshot", STEP, |r| r.connected() >= 1)
        .await;
    gate.open();
    rec.until("the relist's snapshot", STEP, |r| r.connected() >= 2)
        .await;
    assert_eq!(rec.of(WEB), [(Stopped, Resync)], "{rec:?}");
    assert_eq!(
        rec.of("deployment/fake/api"),
        [(Removed, Resync)],
        "{rec:?}"
    );
    assert_eq!(rec.of("statefulset/fake/db"), [], "{rec:?}");
    assert_eq!(rec.disconnected(), 0, "{rec:?}");
    let lists = |res: &str| {
        fake.requests()
            .iter()
            .filter(|r| r.resource.as_deref() == Some(res) && !r.watch)
            .count()
    };
    assert_eq!(
        (lists("deployments"), lists("statefulsets")),
        (2, 1),
        "{rec:?}"
    );
}

/// A list request that gets no answer (its connection closes) is sent again
/// once, in the same dial: no Disconnected, no second list from page one.
#[tokio::test(flavor = "current_thread")]
async fn fake_unanswered_list_page_is_sent_again_once() {
    let fake = FakeApi::start(move |r| match (r.resource.as_deref(), r.watch, r.nth) {
        (Some("deployments"), false, 0) => Reply::Close,
        (Some("deployments"), false, _) => list(Kind::Deployment, 10, &[dep("web", 10, &json!(1))]),
        (Some("deployments"), true, _) => Reply::Watch(vec![Frame::Hold]),
        _ => Reply::Json(404, "{}".into()),
    });
    let mut rec = Recorder::new(fake_config(&fake, &[Kind::Deployment]));
    rec.until("first snapshot", STEP, |r| r.connected() >= 1)
        .await;
    assert_eq!(rec.disconnected(), 0, "{rec:?}");
    let lists = fake
        .requests()
        .iter()
        .filter(|r| r.resource.is_some() && !r.watch)
        .count();
    assert_eq!(lists, 2, "the unanswered one and its retry: {rec:?}");
}

/// With `resync_every` set, the core's periodic redial lists every kind
/// again (a redial within the period would resume); without it (the
/// default) nothing relists while nothing fails.
#[tokio::test(flavor = "current_thread")]
async fn fake_periodic_relist_only_when_asked() {
    let fake = FakeApi::start(move |r| match (r.resource.as_deref(), r.watch) {
        (Some("deployments"), false) => list(Kind::Deployment, 10, &[dep("web", 10, &json!(1))]),
        (Some("deployments"), true) => Reply::Watch(vec![Frame::Hold]),
        _ => Reply::Json(404, "{}".into()),
    });
    let lists = || {
        fake.requests()
            .iter()
            .filter(|r| r.resource.is_some() && !r.watch)
            .count()
    };
    let mut cfg = fake_config(&fake, &[Kind::Deployment]);
    let watch = cfg.get_watch_config().clone();
    cfg = cfg.watch_config(watch.resync_every(Some(Duration::from_millis(500))));
    let mut rec = Recorder::new(cfg);
    rec.until("two periodic relists", STEP, |r| r.connected() >= 3)
        .await;
    assert_eq!(lists(), 3, "{rec:?}");
    assert_eq!(rec.disconnected(), 0, "{rec:?}");
    assert!(rec.events.is_empty(), "{rec:?}");
    drop(rec);

    let before = lists();
    let mut rec = Recorder::new(fake_config(&fake, &[Kind::Deployment]));
    rec.until("first snapshot", STEP, |r| r.connected() >= 1)
        .await;
    // Silence for 1.5 s (the probe answers): no relist, no redial.
    let quiet = rec.until_quiet(Duration::from_millis(1500)).await;
    assert_eq!(quiet, 0, "{rec:?}");
    assert_eq!(lists(), before + 1, "{rec:?}");
}

/// Any other failure ends the session: Disconnected, the core's backoff, a
/// redial. A kind that never listed lists; one that did resumes its watch
/// from the version it reached (no list), and what the watch then tells is
/// live.
#[tokio::test(flavor = "current_thread")]
async fn fake_errors_end_the_session_and_redial() {
    let gate = Gate::default();
    let g = gate.clone();
    let fake = FakeApi::start(move |r| match (r.resource.as_deref(), r.watch, r.nth) {
        (Some("deployments"), false, 0) => Reply::Json(
            403,
            json!({ "kind": "Status", "apiVersion": "v1", "status": "Failure",
                    "message": "forbidden", "reason": "Forbidden", "code": 403 })
            .to_string(),
        ),
        (Some("deployments"), false, _) => list(Kind::Deployment, 10, &[dep("web", 10, &json!(1))]),
        (Some("deployments"), true, 0) => Reply::Watch(vec![
            Frame::Gate(g.clone()),
            Frame::Line(error_event(500, "InternalError", "etcd is sad")),
        ]),
        (Some("deployments"), true, _) => Reply::Watch(vec![
            Frame::Line(event("MODIFIED", &dep("web", 30, &json!(0)))),
            Frame::Hold,
        ]),
        _ => Reply::Json(404, "{}".into()),
    });
    let mut rec = Recorder::new(fake_config(&fake, &[Kind::Deployment]));
    rec.until("first snapshot", STEP, |r| r.connected() >= 1)
        .await;
    assert_eq!(rec.disconnected(), 1, "the 403 list: {rec:?}");
    let Status::Disconnected { error, .. } = &rec.statuses[0].1 else {
        panic!("{rec:?}")
    };
    assert!(matches!(**error, Error::Dial(_)), "{error}");
    // The apiserver's message, on one line: no debug dump of its Status,
    // and the chain stops there.
    assert_eq!(
        error.to_string(),
        "cannot connect to the engine: watching deployments failed: forbidden"
    );
    let dial_error = std::error::Error::source(&**error).expect("the dial's error");
    assert!(dial_error.source().is_none(), "{dial_error:?}");
    gate.open();
    rec.until("redialed", STEP, |r| {
        r.connected() >= 2 && !r.of(WEB).is_empty()
    })
    .await;
    assert_eq!(rec.disconnected(), 2, "{rec:?}");
    let Status::Disconnected { error, .. } = &rec.statuses[2].1 else {
        panic!("{rec:?}")
    };
    assert!(matches!(**error, Error::Session(_)), "{error}");
    assert_eq!(
        error.to_string(),
        "the engine's change feed failed: watching deployments failed: etcd is sad"
    );
    assert_eq!(rec.of(WEB), [(Stopped, Live)], "{rec:?}");
    let requests = fake.requests();
    let lists = requests.iter().filter(|r| r.resource.is_some() && !r.watch);
    assert_eq!(
        lists.count(),
        2,
        "the refused list and one more: {requests:?}"
    );
    let watches: Vec<_> = requests
        .iter()
        .filter(|r| r.watch)
        .map(|r| r.resource_version())
        .collect();
    assert_eq!(watches, [Some("10"), Some("10")], "{requests:?}");
}

/// The resumed watch's replay of the time the last session could not see
/// comes before the reconnect's `Connected`, not after it: what the
/// apiserver sent with the watch's acceptance is read first.
#[tokio::test(flavor = "current_thread")]
async fn fake_resume_replays_before_connected() {
    let gate = Gate::default();
    let g = gate.clone();
    let fake = FakeApi::start(move |r| match (r.resource.as_deref(), r.watch, r.nth) {
        (Some("deployments"), false, _) => list(Kind::Deployment, 10, &[dep("web", 10, &json!(1))]),
        (Some("deployments"), true, 0) => Reply::Watch(vec![
            Frame::Gate(g.clone()),
            Frame::Line(error_event(500, "InternalError", "etcd is sad")),
        ]),
        // The resumed watch: web was scaled to 0 while disconnected.
        (Some("deployments"), true, 1) => Reply::Watch(vec![
            Frame::Line(event("MODIFIED", &dep("web", 12, &json!(0)))),
            Frame::Hold,
        ]),
        (Some("deployments"), true, _) => Reply::Watch(vec![Frame::Hold]),
        _ => Reply::Json(404, "{}".into()),
    });
    let mut rec = Recorder::new(fake_config(&fake, &[Kind::Deployment]));
    rec.until("first snapshot", STEP, |r| r.connected() >= 1)
        .await;
    gate.open();
    rec.until("redialed", STEP, |r| r.connected() >= 2).await;
    let web = "deployment/fake/web";
    assert_eq!(rec.of(web), [(Stopped, Live)], "{rec:?}");
    assert_eq!(
        rec.events_at_connected,
        [0, 1],
        "the replay before the second Connected: {rec:?}"
    );
    let requests = fake.requests();
    assert_eq!(
        requests
            .iter()
            .filter(|r| r.resource.is_some() && !r.watch)
            .count(),
        1,
        "resumed, not relisted: {requests:?}"
    );
}

/// A change one kind's watch sees while another kind is still listing
/// happened after that kind's list: it comes after the first snapshot, as a
/// live event, not folded into the snapshot's silent baseline.
#[tokio::test(flavor = "current_thread")]
async fn fake_a_change_before_every_kind_is_listed_is_told_after_the_snapshot() {
    let gate = Gate::default();
    let g = gate.clone();
    let fake = FakeApi::start(move |r| match (r.resource.as_deref(), r.watch) {
        (Some("deployments"), false) => list(Kind::Deployment, 10, &[dep("web", 10, &json!(1))]),
        (Some("deployments"), true) => Reply::Watch(vec![
            Frame::Line(event("ADDED", &dep("new", 11, &json!(1)))),
            Frame::Hold,
        ]),
        // The StatefulSet list answers only when the test says so.
        (Some("statefulsets"), false) => Reply::Watch(vec![
            Frame::Gate(g.clone()),
            Frame::Line(
                json!({ "kind": "StatefulSetList", "apiVersion": "apps/v1",
                        "metadata": { "resourceVersion": "10" }, "items": [] })
                .to_string(),
            ),
        ]),
        (Some("statefulsets"), true) => Reply::Watch(vec![Frame::Hold]),
        _ => Reply::Json(404, "{}".into()),
    });
    let mut rec = Recorder::new(fake_config(&fake, &[Kind::Deployment, Kind::StatefulSet]));
    // The Deployments are listed and watched, their change read; nothing
    // is told before every kind is listed.
    assert_eq!(
        rec.until_quiet(Duration::from_millis(500)).await,
        0,
        "{rec:?}"
    );
    assert!(
        fake.requests()
            .iter()
            .any(|r| r.watch && r.resource.as_deref() == Some("deployments")),
        "{:?}",
        fake.requests()
    );
    gate.open();
    let new = "deployment/fake/new";
    rec.until("the snapshot, then the change", STEP, |r| {
        r.connected() >= 1 && r.of(new).len() >= 2
    })
    .await;
    assert_eq!(rec.events_at_connected, [0], "{rec:?}");
    assert_eq!(rec.of(new), [(Created, Live), (Started, Live)], "{rec:?}");
    assert_eq!(rec.of("deployment/fake/web"), [], "{rec:?}");
}

/// A bookmark moves a kind's version on without a change: the redial
/// resumes from it.
#[tokio::test(flavor = "current_thread")]
async fn fake_bookmark_moves_the_resume_point() {
    let gate = Gate::default();
    let g = gate.clone();
    let fake = FakeApi::start(move |r| match (r.resource.as_deref(), r.watch, r.nth) {
        (Some("deployments"), false, _) => list(Kind::Deployment, 10, &[dep("web", 10, &json!(1))]),
        (Some("deployments"), true, 0) => Reply::Watch(vec![
            Frame::Line(event(
                "BOOKMARK",
                &json!({ "kind": "Deployment", "apiVersion": "apps/v1",
                         "metadata": { "resourceVersion": "15" } }),
            )),
            Frame::Gate(g.clone()),
            Frame::Line(error_event(500, "InternalError", "etcd is sad")),
        ]),
        (Some("deployments"), true, _) => Reply::Watch(vec![Frame::Hold]),
        _ => Reply::Json(404, "{}".into()),
    });
    let mut rec = Recorder::new(fake_config(&fake, &[Kind::Deployment]));
    rec.until("first snapshot", STEP, |r| r.connected() >= 1)
        .await;
    gate.open();
    rec.until("redialed", STEP, |r| r.connected() >= 2).await;
    let requests = fake.requests();
    let watches: Vec<_> = requests
        .iter()
        .filter(|r| r.watch)
        .map(|r| {
            (
                r.resource_version(),
                r.query.get("allowWatchBookmarks").map(String::as_str),
            )
        })
        .collect();
    assert_eq!(
        watches,
        [(Some("10"), Some("true")), (Some("15"), Some("true"))],
        "{requests:?}"
    );
    assert_eq!(
        requests
            .iter()
            .filter(|r| r.resource.is_some() && !r.watch)
            .count(),
        1
    );
    assert!(rec.events.is_empty(), "{rec:?}");
}

/// A redial whose resumed watch of one kind is gone (`410`): that kind
/// relists, the other resumes; the snapshot holds both (the other kind's
/// objects from the session before), so only the relisted kind's
/// difference is reported, as a resync.
#[tokio::test(flavor = "current_thread")]
async fn fake_redial_relists_only_the_expired_kind() {
    let gate = Gate::default();
    let g = gate.clone();
    let sts = object(Kind::StatefulSet, "fake", "db", "uid-db", 10, &json!(1));
    let fake = FakeApi::start(move |r| match (r.resource.as_deref(), r.watch, r.nth) {
        (Some("deployments"), false, 0) => list(Kind::Deployment, 10, &[dep("web", 10, &json!(1))]),
        (Some("deployments"), false, _) => list(Kind::Deployment, 40, &[dep("web", 40, &json!(0))]),
        (Some("deployments"), true, 0) => Reply::Watch(vec![
            Frame::Gate(g.clone()),
            Frame::Line(error_event(500, "InternalError", "etcd is sad")),
        ]),
        (Some("deployments"), true, 1) => Reply::Watch(vec![Frame::Line(error_event(
            410,
            "Expired",
            "too old resource version: 10 (35)",
        ))]),
        (Some("statefulsets"), false, _) => list(Kind::StatefulSet, 10, std::slice::from_ref(&sts)),
        (Some(_), true, _) => Reply::Watch(vec![Frame::Hold]),
        _ => Reply::Json(404, "{}".into()),
    });
    let mut rec = Recorder::new(fake_config(&fake, &[Kind::Deployment, Kind::StatefulSet]));
    rec.until("first snapshot", STEP, |r| r.connected() >= 1)
        .await;
    gate.open();
    rec.until("the relist's difference", STEP, |r| !r.of(WEB).is_empty())
        .await;
    assert_eq!(rec.of(WEB), [(Stopped, Resync)], "{rec:?}");
    assert_eq!(rec.of("statefulset/fake/db"), [], "{rec:?}");
    let requests = fake.requests();
    let count = |res: &str, watch: bool| {
        requests
            .iter()
            .filter(|r| r.resource.as_deref() == Some(res) && r.watch == watch)
            .count()
    };
    assert_eq!(
        (count("deployments", false), count("statefulsets", false)),
        (2, 1),
        "{requests:?}"
    );
    let sts_watches: Vec<_> = requests
        .iter()
        .filter(|r| r.resource.as_deref() == Some("statefulsets") && r.watch)
        .map(|r| r.resource_version())
        .collect();
    assert_eq!(sts_watches, [Some("10"), Some("10")], "{requests:?}");
}

// ------------------------------------------------------------------ readiness

/// `dep` with a `metadata.generation` and a status as a Deployment
/// controller writes one (`replicas` pods, `available` of them available).
fn dep_status(
    name: &str,
    rv: u64,
    replicas: i64,
    generation: i64,
    observed: i64,
    available: i64,
) -> serde_json::Value {
    let mut o = dep(name, rv, &json!(replicas));
    o["metadata"]["generation"] = json!(generation);
    o["status"] = json!({
        "observedGeneration": observed,
        "replicas": replicas,
        "updatedReplicas": replicas,
        "readyReplicas": available,
        "availableReplicas": available,
    });
    o
}

/// The events of one instance with their readiness detail.
fn with_readiness(rec: &Recorder, id: &str) -> Vec<(EventKind, Origin, Option<Readiness>)> {
    rec.events
        .iter()
        .filter(|e| e.id.as_str() == id)
        .map(|e| (e.kind, e.origin, e.readiness))
        .collect()
}

/// The fake of [`fake_readiness_flips_through_modified`]: web is listed
/// ready, then its watch serves a script of status changes (no
/// controller: the fake serves what a Deployment controller would write).
fn readiness_script() -> FakeApi {
    let mut relabelled = dep_status("web", 16, 2, 1, 1, 2);
    relabelled["metadata"]["labels"]["tier"] = json!("front");
    let mut status_only = dep_status("web", 13, 2, 1, 1, 1);
    status_only["status"]["updatedReplicas"] = json!(1);
    let script = vec![
        // 1 available of 2: unready; then the same status again (a
        // controller's resync writes one), and a status-only change.
        event("MODIFIED", &dep_status("web", 11, 2, 1, 1, 1)),
        event("MODIFIED", &dep_status("web", 12, 2, 1, 1, 1)),
        event("MODIFIED", &status_only),
        // Both available again: ready; a repeat; a label edit.
        event("MODIFIED", &dep_status("web", 14, 2, 1, 1, 2)),
        event("MODIFIED", &dep_status("web", 15, 2, 1, 1, 2)),
        event("MODIFIED", &relabelled),
        // Scaled to 3: generation 2, not observed yet: unready.
        event("MODIFIED", &dep_status("web", 18, 3, 2, 1, 2)),
        // Observed, 3 available: ready.
        event("MODIFIED", &dep_status("web", 19, 3, 2, 2, 3)),
        // Scaled to 0: stopped (no unready before it); the controller's
        // status for 0 replicas tells nothing more.
        event("MODIFIED", &dep_status("web", 20, 0, 3, 2, 3)),
        event("MODIFIED", &dep_status("web", 21, 0, 3, 3, 0)),
        // Scaled to 1: started, not ready until observed and available.
        event("MODIFIED", &dep_status("web", 22, 1, 4, 3, 0)),
        event("MODIFIED", &dep_status("web", 23, 1, 4, 4, 1)),
    ];
    FakeApi::start(move |r| match (r.resource.as_deref(), r.watch, r.nth) {
        (Some("deployments"), false, _) => {
            list(Kind::Deployment, 10, &[dep_status("web", 10, 2, 1, 1, 2)])
        }
        (Some("deployments"), true, 0) => {
            let mut frames: Vec<Frame> = script.iter().cloned().map(Frame::Line).collect();
            frames.push(Frame::Hold);
            Reply::Watch(frames)
        }
        (Some("deployments"), true, _) => Reply::Watch(vec![Frame::Hold]),
        _ => Reply::Json(404, "{}".into()),
    })
}

/// With readiness, each flip of whether the running Deployment can serve
/// is one `ready` / `unready`; repeats (the same status again, a
/// status-only or label-only change that keeps it) are swallowed; a
/// scale-up not yet observed is `unready`; a scale to 0 ends readiness
/// with `stopped` alone. Without readiness the same script yields what it
/// always did, and no event carries readiness.
#[tokio::test(flavor = "current_thread")]
async fn fake_readiness_flips_through_modified() {
    let fake = readiness_script();
    let mut cfg = fake_config(&fake, &[Kind::Deployment]);
    let watch = cfg.get_watch_config().clone();
    cfg = cfg.watch_config(watch.initial(true));
    cfg = cfg.readiness(true);
    let mut rec = Recorder::new(cfg);
    rec.until("the script's last readiness", STEP, |r| {
        r.of(WEB).len() >= 10
    })
    .await;
    // Nothing more comes of the script (the watch holds).
    assert_eq!(
        rec.until_quiet(Duration::from_millis(300)).await,
        0,
        "{rec:?}"
    );
    let replicas = Readiness::replicas;
    assert_eq!(
        with_readiness(&rec, WEB),
        [
            (Created, Initial, Some(replicas(2, 2, true))),
            (Started, Initial, Some(replicas(2, 2, true))),
            (Ready, Initial, Some(replicas(2, 2, true))),
            (Unready, Live, Some(replicas(2, 1, true))),
            (Ready, Live, Some(replicas(2, 2, true))),
            (Unready, Live, Some(replicas(3, 2, false))),
            (Ready, Live, Some(replicas(3, 3, true))),
            (Stopped, Live, Some(replicas(0, 3, false))),
            (Started, Live, Some(replicas(1, 0, false))),
            (Ready, Live, Some(replicas(1, 1, true))),
        ],
        "{rec:?}"
    );
    assert_eq!(rec.disconnected(), 0, "{rec:?}");
    drop(rec);

    // Readiness off: the same script is what it was before readiness.
    let fake = readiness_script();
    let mut cfg = fake_config(&fake, &[Kind::Deployment]);
    let watch = cfg.get_watch_config().clone();
    cfg = cfg.watch_config(watch.initial(true));
    let mut rec = Recorder::new(cfg);
    rec.until("stopped and started", STEP, |r| r.of(WEB).len() >= 4)
        .await;
    assert_eq!(
        rec.until_quiet(Duration::from_millis(300)).await,
        0,
        "{rec:?}"
    );
    assert_eq!(
        with_readiness(&rec, WEB),
        [
            (Created, Initial, None),
            (Started, Initial, None),
            (Stopped, Live, None),
            (Started, Live, None),
        ],
        "{rec:?}"
    );
}

/// A `StatefulSet` `db` of `replicas` with a status as its controller
/// writes one (`ready` of them ready), observed.
fn sts_status(rv: u64, replicas: i64, ready: i64) -> serde_json::Value {
    let mut o = object(
        Kind::StatefulSet,
        "fake",
        "db",
        "uid-db",
        rv,
        &json!(replicas),
    );
    o["metadata"]["generation"] = json!(1);
    o["status"] = json!({
        "observedGeneration": 1,
        "replicas": replicas,
        "readyReplicas": ready,
        "availableReplicas": ready,
    });
    o
}

const DB: &str = "statefulset/fake/db";

/// A readiness change made while the session is gone arrives once, in the
/// resumed watch's replay: live, before the reconnect's `Connected`.
#[tokio::test(flavor = "current_thread")]
async fn fake_readiness_missed_while_disconnected_comes_once_in_the_replay() {
    let gate = Gate::default();
    let g = gate.clone();
    let fake = FakeApi::start(move |r| match (r.resource.as_deref(), r.watch, r.nth) {
        (Some("deployments"), false, _) => {
            list(Kind::Deployment, 10, &[dep_status("web", 10, 2, 1, 1, 2)])
        }
        (Some("deployments"), true, 0) => Reply::Watch(vec![
            Frame::Gate(g.clone()),
            Frame::Line(error_event(500, "InternalError", "etcd is sad")),
        ]),
        (Some("deployments"), true, 1) => Reply::Watch(vec![
            Frame::Line(event("MODIFIED", &dep_status("web", 12, 2, 1, 1, 1))),
            Frame::Hold,
        ]),
        (Some("deployments"), true, _) => Reply::Watch(vec![Frame::Hold]),
        _ => Reply::Json(404, "{}".into()),
    });
    let mut cfg = fake_config(&fake, &[Kind::Deployment]);
    cfg = cfg.readiness(true);
    let mut rec = Recorder::new(cfg);
    rec.until("first snapshot", STEP, |r| r.connected() >= 1)
        .await;
    gate.open();
    rec.until("redialed", STEP, |r| r.connected() >= 2).await;
    assert_eq!(
        rec.until_quiet(Duration::from_millis(300)).await,
        0,
        "{rec:?}"
    );
    assert_eq!(
        with_readiness(&rec, WEB),
        [(Unready, Live, Some(Readiness::replicas(2, 1, true)))],
        "{rec:?}"
    );
    assert_eq!(rec.events_at_connected, [0, 1], "{rec:?}");
    assert_eq!(
        fake.requests()
            .iter()
            .filter(|r| r.resource.is_some() && !r.watch)
            .count(),
        1,
        "resumed, not relisted: {rec:?}"
    );
}

/// A readiness change made while the session is gone, when the kind's
/// version is gone (`410`), arrives once as the relist's net effect
/// (resync); the other kind, resumed, replays its own change, and the
/// relist's snapshot (which lists it from the session's store, readiness
/// included) tells nothing more of it.
#[tokio::test(flavor = "current_thread")]
async fn fake_readiness_missed_while_disconnected_comes_once_in_the_relist() {
    let gate = Gate::default();
    let g = gate.clone();
    let fake = FakeApi::start(move |r| match (r.resource.as_deref(), r.watch, r.nth) {
        (Some("deployments"), false, 0) => {
            list(Kind::Deployment, 10, &[dep_status("web", 10, 2, 1, 1, 2)])
        }
        // Meanwhile web lost an available replica, then db a ready one.
        (Some("deployments"), false, _) => {
            list(Kind::Deployment, 40, &[dep_status("web", 30, 2, 1, 1, 1)])
        }
        (Some("deployments"), true, 0) => Reply::Watch(vec![
            Frame::Gate(g.clone()),
            Frame::Line(error_event(500, "InternalError", "etcd is sad")),
        ]),
        (Some("deployments"), true, 1) => Reply::Watch(vec![Frame::Line(error_event(
            410,
            "Expired",
            "too old resource version: 10 (35)",
        ))]),
        (Some("statefulsets"), false, _) => list(Kind::StatefulSet, 10, &[sts_status(10, 2, 2)]),
        (Some("statefulsets"), true, 1) => Reply::Watch(vec![
            Frame::Line(event("MODIFIED", &sts_status(31, 2, 1))),
            Frame::Hold,
        ]),
        (Some(_), true, _) => Reply::Watch(vec![Frame::Hold]),
        _ => Reply::Json(404, "{}".into()),
    });
    let mut cfg = fake_config(&fake, &[Kind::Deployment, Kind::StatefulSet]);
    cfg = cfg.readiness(true);
    let mut rec = Recorder::new(cfg);
    rec.until("first snapshot", STEP, |r| r.connected() >= 1)
        .await;
    gate.open();
    rec.until("the relist's snapshot", STEP, |r| {
        r.connected() >= 2 && !r.of(WEB).is_empty()
    })
    .await;
    // (The watches were accepted before the 410 came: the redial may be
    // `Connected` once resumed, and again after the relist.)
    let told = rec.events.len();
    rec.until_quiet(Duration::from_millis(300)).await;
    assert_eq!(rec.events.len(), told, "{rec:?}");
    assert_eq!(
        with_readiness(&rec, WEB),
        [(Unready, Resync, Some(Readiness::replicas(2, 1, true)))],
        "{rec:?}"
    );
    assert_eq!(
        with_readiness(&rec, DB),
        [(Unready, Live, Some(Readiness::replicas(2, 1, true)))],
        "{rec:?}"
    );
    let requests = fake.requests();
    let lists = |res: &str| {
        requests
            .iter()
            .filter(|r| r.resource.as_deref() == Some(res) && !r.watch)
            .count()
    };
    assert_eq!(
        (lists("deployments"), lists("statefulsets")),
        (2, 1),
        "{requests:?}"
    );
}
