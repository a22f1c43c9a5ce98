//! Any kind (#35) against the real kube-apiserver of the bed: a custom
//! resource with a scale subresource and conditions (a `CloudNativePG`-like
//! `Cluster`), one without (a `Widget`), and a `DaemonSet`; readiness step by
//! step, side by side with kstatus itself (cli-utils, the Go helper the bed
//! builds); a watch resumed after a cut; the CRD deleted and created again.
//!
//! Each test has a CRD group of its own, so they share the bed (the k8s
//! lock, shared). The bed runs no controller: status is written through the
//! status subresource, as a controller writes it. Every wait is bounded.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use lookout_core::EventKind::{
    Created, Failing, Ready, Removed, Started, Stopped, Stopping, Unready,
};
use lookout_core::Origin::{Live, Resync};
use lookout_core::{EventKind, Readiness, ResourceStatus};
use lookout_e2e::engines;
use lookout_e2e::k8s_kinds::{Crd, DaemonSets, kstatus};
use lookout_e2e::k8s_util::{
    Fixture, Recorder, Relay, Requests, apiserver, counting_client, fast_watch_config,
    kubeconfig_via, require,
};
use lookout_k8s::{K8sConfig, Kind, KindRef};
use serde_json::json;

/// The bound of one step (an API call and the event it causes).
const STEP: Duration = Duration::from_secs(20);

async fn setup() -> Option<(engines::EngineLock, PathBuf, Fixture)> {
    let lock = engines::lock_engine("k8s", false).unwrap_or_else(|e| panic!("{e}"));
    let kubeconfig = require()?;
    let fx = Fixture::new(&kubeconfig).await;
    Some((lock, kubeconfig, fx))
}

fn config(kubeconfig: &std::path::Path, ns: &str, kinds: Vec<KindRef>) -> K8sConfig {
    K8sConfig::default()
        .kubeconfig(kubeconfig)
        .namespace(ns)
        .kinds(kinds)
        .watch_config(fast_watch_config())
        .readiness(true)
}

fn kind(text: &str) -> KindRef {
    KindRef::parse(text).unwrap_or_else(|e| panic!("{e}"))
}

/// Whether lookout holds `id` ready now: its last event says so.
fn ready_now(rec: &Recorder, id: &str) -> bool {
    rec.events
        .iter()
        .rev()
        .find(|e| e.id.as_str() == id)
        .is_some_and(|e| e.kind == Ready)
}

/// The kinds of `id`'s events, in order.
fn kinds_of(rec: &Recorder, id: &str) -> Vec<EventKind> {
    rec.of(id).into_iter().map(|(k, _)| k).collect()
}

/// Steps of a custom object, each checked against kstatus: after each
/// change to the subject, a marker of the same kind is scaled (0 ↔ 1),
/// and once lookout tells the marker's change, it has read the subject's
/// (one watch, in order): then lookout's ready ⇔ kstatus `Current`.
struct Stepper<'a> {
    crd: &'a Crd,
    ns: String,
    subject: String,
    marker: String,
    marker_up: bool,
    /// (step, kstatus, lookout ready), for the report.
    table: Vec<(String, String, bool)>,
}

impl Stepper<'_> {
    async fn check(&mut self, rec: &mut Recorder, step: &str) {
        let seen = rec.of(&self.marker).len();
        self.marker_up = !self.marker_up;
        self.crd
            .scale(&self.ns, "marker", i32::from(self.marker_up))
            .await;
        let marker = self.marker.clone();
        rec.until(&format!("{step}: the marker's fence"), STEP, |r| {
            r.of(&marker)[seen..]
                .iter()
                .any(|(k, _)| matches!(k, Started | Stopped))
        })
        .await;
        let object = self.crd.get(&self.ns, "pg").await;
        let status = kstatus(&object);
        let ready = ready_now(rec, &self.subject);
        eprintln!("[k8s kinds] {step:<44} kstatus {status:<12} lookout ready {ready}");
        assert_eq!(
            ready,
            status == "Current",
            "{step}: lookout ready {ready}, kstatus {status}; object {object}\n{rec:?}"
        );
        self.table.push((step.to_owned(), status, ready));
    }
}

/// The steps of `pg`'s conditions, as its controller would write them.
async fn condition_steps(crd: &Crd, ns: &str, s: &mut Stepper<'_>, rec: &mut Recorder) {
    let cond = |t: &str, st: &str| json!({ "type": t, "status": st, "reason": "Test", "message": format!("{t} {st}") });
    crd.status(
        ns,
        "pg",
        json!({ "observedGeneration": 1, "conditions": [cond("Reconciling", "True")] }),
    )
    .await;
    s.check(rec, "Reconciling=True").await;
    crd.status(
        ns,
        "pg",
        json!({ "conditions": [cond("Reconciling", "False"), cond("Ready", "False")] }),
    )
    .await;
    s.check(rec, "Ready=False").await;
    crd.status(
        ns,
        "pg",
        json!({ "readyInstances": 3, "conditions": [cond("Ready", "True")] }),
    )
    .await;
    s.check(rec, "Ready=True").await;
    crd.status(
        ns,
        "pg",
        json!({ "conditions": [cond("Ready", "Unknown")] }),
    )
    .await;
    s.check(rec, "Ready=Unknown").await;
    crd.status(
        ns,
        "pg",
        json!({ "conditions": [cond("Ready", "False"), cond("Stalled", "True")] }),
    )
    .await;
    s.check(rec, "Stalled=True").await;
    failing_in_stalled_words(rec, &s.subject, "Stalled True");
    crd.status(ns, "pg", json!({ "conditions": [cond("Ready", "True"), cond("Stalled", "True"), cond("Reconciling", "True")] }))
        .await;
    s.check(rec, "Ready, Stalled, Reconciling all True").await;
    crd.status(ns, "pg", json!({ "conditions": [cond("Ready", "True")] }))
        .await;
    s.check(rec, "Ready=True again").await;
}

/// `id`'s `failing`: in its `Stalled` condition's words (`message`),
/// given up on (kstatus: `Failed`).
fn failing_in_stalled_words(rec: &Recorder, id: &str, message: &str) {
    let failing = rec
        .events
        .iter()
        .find(|e| e.id.as_str() == id && e.kind == Failing)
        .and_then(|e| e.reason.clone())
        .unwrap_or_else(|| panic!("a failing of {id} with its reason: {rec:?}"));
    assert_eq!(failing.message.as_deref(), Some(message));
    assert!(failing.failed, "{failing:?}");
}

#[tokio::test(flavor = "current_thread")]
async fn k8s_custom_resource_with_scale_is_ready_exactly_when_kstatus_says_current() {
    let t = Instant::now();
    let Some((_lock, kubeconfig, fx)) = setup().await else {
        return;
    };
    let crd = Crd::create(&kubeconfig, true).await;
    let ns = fx.ns.clone();
    // Named as `kubectl get` takes it: plural and group.
    let mut rec = Recorder::new(config(&kubeconfig, &ns, vec![kind(&crd.name())]));
    rec.until("first snapshot", STEP, |r| r.connected() >= 1)
        .await;
    crd.create_object(&ns, "marker", json!({ "instances": 0 }))
        .await;
    let subject = format!("{}/{ns}/pg", crd.prefix());
    let marker = format!("{}/{ns}/marker", crd.prefix());
    rec.until("marker created", STEP, |r| !r.of(&marker).is_empty())
        .await;
    let mut s = Stepper {
        crd: &crd,
        ns: ns.clone(),
        subject: subject.clone(),
        marker,
        marker_up: false,
        table: Vec::new(),
    };
    crd.create_object(&ns, "pg", json!({ "instances": 3 }))
        .await;
    rec.until("pg created", STEP, |r| r.of(&subject).len() >= 2)
        .await;
    // No status yet: kstatus takes a kind that states nothing as current.
    s.check(&mut rec, "created, no status").await;
    condition_steps(&crd, &ns, &mut s, &mut rec).await;
    // A new spec: generation 2, observed 1.
    crd.patch(&ns, "pg", json!({ "spec": { "instances": 5 } }))
        .await;
    s.check(&mut rec, "spec changed, generation not observed")
        .await;
    crd.status(&ns, "pg", json!({ "observedGeneration": 2 }))
        .await;
    s.check(&mut rec, "generation observed").await;
    // Scaled to 0 through /scale: stopped (readiness ends with it).
    crd.scale(&ns, "pg", 0).await;
    rec.until("pg stopped", STEP, |r| {
        r.of(&subject).last().is_some_and(|(k, _)| *k == Stopped)
    })
    .await;
    crd.scale(&ns, "pg", 2).await;
    crd.status(&ns, "pg", json!({ "observedGeneration": 4 }))
        .await;
    s.check(&mut rec, "scaled to 2, generation observed").await;
    // Being deleted (a finalizer holds it): Terminating, not ready.
    crd.patch(
        &ns,
        "pg",
        json!({ "metadata": { "finalizers": ["lookout.dev/hold"] } }),
    )
    .await;
    crd.delete_object(&ns, "pg").await;
    s.check(&mut rec, "deletion pending (finalizer)").await;
    crd.patch(&ns, "pg", json!({ "metadata": { "finalizers": null } }))
        .await;
    rec.until("pg removed", STEP, |r| {
        r.of(&subject).last().is_some_and(|(k, _)| *k == Removed)
    })
    .await;

    assert_eq!(
        kinds_of(&rec, &subject),
        [
            Created, Started, Ready,   // no status: Current
            Unready, // Reconciling
            Ready,   // Ready=True
            Unready, Failing, // Unknown; Stalled=True: Failed (all three: the same words)
            Ready,   // Ready=True again
            Unready, // generation 2 not observed
            Ready,   // observed
            Stopped, // scaled to 0
            Started, Ready, // scaled to 2, observed
            Unready, Stopping, // Terminating: being deleted (a finalizer holds it)
            Removed,
        ],
        "{rec:?}"
    );
    assert!(rec.of(&subject).iter().all(|(_, o)| *o == Live), "{rec:?}");
    // The detail each event carries is kstatus's word.
    let details: Vec<ResourceStatus> = rec
        .events
        .iter()
        .filter(|e| e.id.as_str() == subject && matches!(e.kind, Ready | Unready))
        .filter_map(|e| match e.readiness {
            Some(Readiness::Resource { status, .. }) => Some(status),
            _ => None,
        })
        .collect();
    assert_eq!(
        details.last(),
        Some(&ResourceStatus::Terminating),
        "{details:?}"
    );
    assert!(details.contains(&ResourceStatus::InProgress), "{details:?}");
    assert!(s.table.len() >= 11, "every step compared: {:?}", s.table);
    assert_eq!(rec.disconnected(), 0, "{rec:?}");
    drop(rec);
    crd.delete().await;
    eprintln!(
        "[k8s kinds] custom resource with scale: {:.1?}",
        t.elapsed()
    );
}

#[tokio::test(flavor = "current_thread")]
async fn k8s_custom_resource_without_scale_runs_while_it_exists() {
    let Some((_lock, kubeconfig, fx)) = setup().await else {
        return;
    };
    let crd = Crd::create(&kubeconfig, false).await;
    let ns = fx.ns.clone();
    // Named by its kind alone (the group is the test's own: unambiguous).
    let mut rec = Recorder::new(config(&kubeconfig, &ns, vec![kind(&crd.gvk())]));
    rec.until("first snapshot", STEP, |r| r.connected() >= 1)
        .await;
    let id = format!("{}/{ns}/w", crd.prefix());
    crd.create_object(&ns, "w", json!({ "size": 0 })).await;
    rec.until("created", STEP, |r| r.of(&id).len() >= 3).await;
    // No status subresource: the status is written with the object.
    crd.patch(
        &ns,
        "w",
        json!({ "status": { "conditions": [{ "type": "Ready", "status": "False" }] } }),
    )
    .await;
    rec.until("unready", STEP, |r| r.of(&id).len() >= 4).await;
    assert_eq!(kstatus(&crd.get(&ns, "w").await), "InProgress");
    crd.patch(
        &ns,
        "w",
        json!({ "status": { "conditions": [{ "type": "Ready", "status": "True" }] } }),
    )
    .await;
    rec.until("ready", STEP, |r| r.of(&id).len() >= 5).await;
    assert_eq!(kstatus(&crd.get(&ns, "w").await), "Current");
    crd.delete_object(&ns, "w").await;
    rec.until("removed", STEP, |r| r.of(&id).len() >= 6).await;
    assert_eq!(
        kinds_of(&rec, &id),
        [Created, Started, Ready, Unready, Ready, Removed],
        "{rec:?}"
    );
    drop(rec);
    crd.delete().await;
}

#[tokio::test(flavor = "current_thread")]
async fn k8s_daemonset_lifecycle_and_readiness_beside_kstatus() {
    let Some((_lock, kubeconfig, fx)) = setup().await else {
        return;
    };
    let ns = fx.ns.clone();
    let ds = DaemonSets::new(&kubeconfig, &ns).await;
    let mut rec = Recorder::new(config(&kubeconfig, &ns, vec![kind("daemonsets")]));
    rec.until("first snapshot", STEP, |r| r.connected() >= 1)
        .await;
    let id = format!("daemonset/{ns}/agent");
    ds.create("agent", "busybox").await;
    // No controller has counted the nodes yet: it wants no pod.
    rec.until("created", STEP, |r| !r.of(&id).is_empty()).await;
    let full = |n: i64, available: i64, ready: i64, observed: i64| {
        json!({
            "observedGeneration": observed,
            "desiredNumberScheduled": n, "currentNumberScheduled": n, "updatedNumberScheduled": n,
            "numberAvailable": available, "numberReady": ready, "numberMisscheduled": 0,
        })
    };
    let side_by_side = |what: &str, lookout: bool, kstatus: &str| {
        eprintln!("[k8s kinds] daemonset {what:<36} kstatus {kstatus:<12} lookout ready {lookout}");
    };
    ds.status("agent", full(3, 0, 0, 1)).await;
    rec.until("started", STEP, |r| r.of(&id).len() >= 2).await;
    let k = kstatus(&ds.get("agent").await);
    side_by_side("3 wanted, none available", ready_now(&rec, &id), &k);
    assert_eq!((ready_now(&rec, &id), k.as_str()), (false, "InProgress"));
    ds.status("agent", full(3, 3, 3, 1)).await;
    rec.until("ready", STEP, |r| r.of(&id).len() >= 3).await;
    let k = kstatus(&ds.get("agent").await);
    side_by_side("3 of 3 available", ready_now(&rec, &id), &k);
    assert_eq!((ready_now(&rec, &id), k.as_str()), (true, "Current"));
    // A new pod template: generation 2 not observed.
    ds.set_image("agent", "busybox:2").await;
    rec.until("unready", STEP, |r| r.of(&id).len() >= 4).await;
    let k = kstatus(&ds.get("agent").await);
    side_by_side("generation 2 not observed", ready_now(&rec, &id), &k);
    assert_eq!((ready_now(&rec, &id), k.as_str()), (false, "InProgress"));
    // Observed, all available but one not ready: serving capacity is
    // there (lookout ready), kstatus waits for every pod's readiness.
    ds.status("agent", full(3, 3, 2, 2)).await;
    rec.until("ready again", STEP, |r| r.of(&id).len() >= 5)
        .await;
    let k = kstatus(&ds.get("agent").await);
    side_by_side(
        "3 available, 2 ready (differs on purpose)",
        ready_now(&rec, &id),
        &k,
    );
    assert_eq!((ready_now(&rec, &id), k.as_str()), (true, "InProgress"));
    // No node for it any more: stopped.
    ds.status("agent", full(0, 0, 0, 2)).await;
    rec.until("stopped", STEP, |r| r.of(&id).len() >= 6).await;
    ds.delete("agent").await;
    rec.until("removed", STEP, |r| r.of(&id).len() >= 7).await;
    assert_eq!(
        kinds_of(&rec, &id),
        [Created, Started, Ready, Unready, Ready, Stopped, Removed],
        "{rec:?}"
    );
    let detail = rec
        .events
        .iter()
        .find(|e| e.id.as_str() == id && e.kind == Ready)
        .and_then(|e| e.readiness);
    assert_eq!(detail, Some(Readiness::replicas(3, 3, true)));
}

/// The watch of a custom kind and a `DaemonSet` is cut; what happens while
/// it is cut comes once, as the apiserver replays it, with no LIST.
#[tokio::test(flavor = "current_thread")]
async fn k8s_custom_kind_resumes_after_a_cut_without_a_list() {
    let Some((_lock, kubeconfig, fx)) = setup().await else {
        return;
    };
    let ns = fx.ns.clone();
    let crd = Crd::create(&kubeconfig, true).await;
    let ds = DaemonSets::new(&kubeconfig, &ns).await;
    crd.create_object(&ns, "pg", json!({ "instances": 1 }))
        .await;
    ds.create("agent", "busybox").await;
    let (_, port) = apiserver(&kubeconfig);
    let relay = Relay::start(port);
    let relayed = kubeconfig_via(&kubeconfig, relay.port());
    let requests = Requests::default();
    let client = counting_client(relayed.path(), &requests).await;
    let cfg = config(
        relayed.path(),
        &ns,
        vec![kind(&crd.gvk()), Kind::DaemonSet.into()],
    );
    let mut rec = Recorder::with_client(cfg, &client);
    rec.until("first snapshot", STEP, |r| r.connected() >= 1)
        .await;
    let pg = format!("{}/{ns}/pg", crd.prefix());
    let agent = format!("daemonset/{ns}/agent");
    // One live change, so the cursor moves past the list.
    crd.status(
        &ns,
        "pg",
        json!({ "conditions": [{ "type": "Ready", "status": "False" }] }),
    )
    .await;
    rec.until("pg unready", STEP, |r| !r.of(&pg).is_empty())
        .await;
    let before = requests.all().len();

    relay.refuse(true);
    relay.cut();
    rec.until("disconnected", STEP, |r| r.disconnected() >= 1)
        .await;
    crd.status(
        &ns,
        "pg",
        json!({ "conditions": [{ "type": "Ready", "status": "True" }] }),
    )
    .await;
    crd.scale(&ns, "pg", 0).await;
    ds.status(
        "agent",
        json!({ "observedGeneration": 1, "desiredNumberScheduled": 1, "numberAvailable": 1 }),
    )
    .await;
    relay.refuse(false);
    rec.until("the missed changes", Duration::from_secs(30), |r| {
        r.connected() >= 2 && r.of(&pg).len() >= 3 && r.of(&agent).len() >= 2
    })
    .await;
    // A fence: nothing repeated after it.
    crd.scale(&ns, "pg", 1).await;
    rec.until("fence", STEP, |r| r.of(&pg).len() >= 5).await;

    assert_eq!(
        rec.of(&pg),
        [
            (Unready, Live),
            (Ready, Live),
            (Stopped, Live),
            (Started, Live),
            (Ready, Live)
        ],
        "{rec:?}"
    );
    assert_eq!(rec.of(&agent), [(Started, Live), (Ready, Live)], "{rec:?}");
    let after: Vec<_> = requests.all()[before..].to_vec();
    assert!(
        after.iter().all(|r| r.verb != "LIST"),
        "no list after the cut: {after:?}"
    );
    eprintln!("[k8s kinds] resume: requests {}", requests.summary());
    drop(rec);
    drop(relay);
    drop(relayed);
    crd.delete().await;
}

/// A CRD deleted while watched: its objects are told removed once (live,
/// as the apiserver deletes them), the other kinds go on, the kind is
/// looked for every so often (no crash loop of 404s), and it is watched
/// again once created again. Deleted while lookout is cut off: its objects
/// are told removed once, as a resync.
#[tokio::test(flavor = "current_thread")]
async fn k8s_crd_deleted_and_created_again_while_watched() {
    let Some((_lock, kubeconfig, fx)) = setup().await else {
        return;
    };
    let ns = fx.ns.clone();
    let crd = Crd::create(&kubeconfig, true).await;
    fx.create(Kind::Deployment, "web", 1, &[]).await;
    for name in ["c1", "c2"] {
        crd.create_object(&ns, name, json!({ "instances": 1 }))
            .await;
    }
    let (_, port) = apiserver(&kubeconfig);
    let relay = Relay::start(port);
    let relayed = kubeconfig_via(&kubeconfig, relay.port());
    let requests = Requests::default();
    let client = counting_client(relayed.path(), &requests).await;
    let cfg = config(
        relayed.path(),
        &ns,
        vec![Kind::Deployment.into(), kind(&crd.gvk())],
    );
    let mut rec = Recorder::with_client(cfg, &client);
    rec.until("first snapshot", STEP, |r| r.connected() >= 1)
        .await;
    let [c1, c2, c3] = ["c1", "c2", "c3"].map(|n| format!("{}/{ns}/{n}", crd.prefix()));
    let web = fx.id(Kind::Deployment, "web");

    // Deleted while watched: each object removed once, live.
    let gone_at = Instant::now();
    let before = requests.all().len();
    crd.delete().await;
    rec.until("c1 and c2 removed", STEP, |r| {
        !r.of(&c1).is_empty() && !r.of(&c2).is_empty()
    })
    .await;
    // The other kind goes on.
    fx.scale(Kind::Deployment, "web", 0).await;
    rec.until("web stopped", STEP, |r| !r.of(&web).is_empty())
        .await;
    // A while without the kind: looked for every 2 s (the test's watch
    // timeout), not in a loop.
    rec.until_quiet(Duration::from_secs(5)).await;
    let while_gone: Vec<_> = requests.all()[before..]
        .iter()
        .filter(|r| r.resource == "clusters" || r.resource.contains(&crd.group))
        .cloned()
        .collect();
    let secs = gone_at.elapsed().as_secs();
    eprintln!(
        "[k8s kinds] {} requests about the kind in {secs} s without it",
        while_gone.len()
    );
    assert!(
        while_gone.len() as u64 <= secs + 4,
        "a loop of requests: {while_gone:?}"
    );
    // Created again, with an object: watched again.
    crd.apply().await;
    crd.create_object(&ns, "c3", json!({ "instances": 1 }))
        .await;
    rec.until("c3 told", STEP, |r| r.of(&c3).len() >= 3).await;

    // Deleted while lookout is cut off: c3 removed once, as a resync.
    relay.refuse(true);
    relay.cut();
    rec.until("disconnected", STEP, |r| r.disconnected() >= 1)
        .await;
    crd.delete().await;
    relay.refuse(false);
    rec.until("c3 removed", Duration::from_secs(30), |r| {
        r.of(&c3).len() >= 4
    })
    .await;
    fx.scale(Kind::Deployment, "web", 1).await;
    rec.until("web fence", STEP, |r| r.of(&web).len() >= 2)
        .await;

    assert_eq!(rec.of(&c1), [(Removed, Live)], "{rec:?}");
    assert_eq!(rec.of(&c2), [(Removed, Live)], "{rec:?}");
    assert_eq!(
        kinds_of(&rec, &c3),
        [Created, Started, Ready, Removed],
        "{rec:?}"
    );
    assert_eq!(rec.of(&c3).last(), Some(&(Removed, Resync)), "{rec:?}");
    assert_eq!(rec.of(&web), [(Stopped, Live), (Started, Live)], "{rec:?}");
    // Only the cut disconnected the watch.
    assert_eq!(rec.disconnected(), 1, "{rec:?}");
    drop(rec);
    drop(relay);
    drop(relayed);
}
