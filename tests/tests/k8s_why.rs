//! lookout-k8s says why (issue #47), against the real kube-apiserver (the
//! testbed: `cargo xtask engines up k8s`): a `Deployment` past its progress
//! deadline is `failing` in its controller's words (beside `kubectl rollout
//! status`, which says the same), again when the words change, and once
//! only when a relist finds it; scaled to 0 it is `stopped` on request;
//! deleted while a finalizer holds it, `stopping` then `removed`.
//!
//! The testbed runs no controller: each status is written through the
//! status subresource as the `Deployment` controller writes it. Every wait
//! is bounded; every object (and finalizer) is removed, also on a panic.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

use lookout_core::EventKind::{
    Created, Failing, Ready, Removed, Started, Stopped, Stopping, Unready,
};
use lookout_core::Origin::{Live, Resync};
use lookout_core::{EventKind, InstanceEvent, Origin, Outcome};
use lookout_e2e::engines;
use lookout_e2e::k8s_util::{
    Fixture, Recorder, Relay, Requests, apiserver, counting_client, fast_watch_config,
    kubeconfig_via, require, require_controlled,
};
use lookout_k8s::{K8sConfig, Kind};
use serde_json::json;

/// The bound of one step (an API call and the event it causes).
const STEP: Duration = Duration::from_secs(20);

/// The k8s lock (exclusive for a test that compacts etcd), the testbed's
/// kubeconfig, and a fixture holding `deployments` (name, replicas).
async fn setup(
    exclusive: bool,
    deployments: &[(&str, i32)],
) -> Option<(engines::EngineLock, PathBuf, Fixture)> {
    let lock = engines::lock_engine("k8s", exclusive).unwrap_or_else(|e| panic!("{e}"));
    let kubeconfig = require()?;
    let fx = Fixture::new(&kubeconfig).await;
    for (name, replicas) in deployments {
        fx.create(Kind::Deployment, name, *replicas, &[]).await;
    }
    Some((lock, kubeconfig, fx))
}

/// Deployments of `ns`, readiness watched, with the tests' short timeouts.
fn config(kubeconfig: &Path, ns: &str) -> K8sConfig {
    K8sConfig::default()
        .kubeconfig(kubeconfig)
        .namespace(ns)
        .kinds([Kind::Deployment])
        .readiness(true)
        .watch_config(fast_watch_config())
}

fn report(name: &str, t: Instant) {
    eprintln!("[k8s] {name}: {:.1?}", t.elapsed());
}

/// The message of a rollout past its deadline, as the `Deployment`
/// controller writes it (`pkg/controller/deployment/util`:
/// `ReplicaSet %q has timed out progressing.`).
fn timed_out(replica_set: &str) -> String {
    format!("ReplicaSet \"{replica_set}\" has timed out progressing.")
}

/// A status as the `Deployment` controller writes it for `replicas` wanted
/// at generation `observed`, `available` of them serving: `Available` by
/// the count, and `Progressing` either as a finished rollout or, with
/// `timed_out`, as one past its progress deadline (`status: False`, reason
/// `ProgressDeadlineExceeded`, the controller's message).
fn status(
    replicas: i64,
    observed: i64,
    available: i64,
    timed_out: Option<&str>,
) -> serde_json::Value {
    let at = "2026-12-07T10:00:00Z";
    let progressing = match timed_out {
        None => json!({
            "type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable",
            "message": "ReplicaSet \"web-5d4\" has successfully progressed.",
            "lastUpdateTime": at, "lastTransitionTime": at,
        }),
        Some(message) => json!({
            "type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded",
            "message": message, "lastUpdateTime": at, "lastTransitionTime": at,
        }),
    };
    let (available_status, available_reason, available_message) = if available >= replicas {
        (
            "True",
            "MinimumReplicasAvailable",
            "Deployment has minimum availability.",
        )
    } else {
        (
            "False",
            "MinimumReplicasUnavailable",
            "Deployment does not have minimum availability.",
        )
    };
    json!({
        "observedGeneration": observed,
        "replicas": replicas,
        "updatedReplicas": replicas,
        "readyReplicas": available,
        "availableReplicas": available,
        "unavailableReplicas": replicas - available,
        "conditions": [
            {
                "type": "Available", "status": available_status, "reason": available_reason,
                "message": available_message, "lastUpdateTime": at, "lastTransitionTime": at,
            },
            progressing,
        ],
    })
}

/// Runs the testbed's kubectl (never one from `PATH`) on the fixture's
/// namespace, bounded.
async fn kubectl(kubeconfig: &Path, ns: &str, args: &[&str]) -> Output {
    let bin = engines::kubectl_binary().unwrap_or_else(|e| panic!("{e}"));
    let run = tokio::process::Command::new(&bin)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["--namespace", ns])
        .args(args)
        .kill_on_drop(true)
        .output();
    tokio::time::timeout(STEP, run)
        .await
        .unwrap_or_else(|_| panic!("kubectl {args:?}: no end within {STEP:?}"))
        .unwrap_or_else(|e| panic!("kubectl {args:?}: {e}"))
}

/// `kubectl rollout status deploy/NAME --timeout=5s`: must fail at once,
/// saying the deployment exceeded its progress deadline.
async fn rollout_says_deadline_exceeded(kubeconfig: &Path, ns: &str, name: &str) {
    let target = format!("deploy/{name}");
    let out = kubectl(
        kubeconfig,
        ns,
        &["rollout", "status", &target, "--timeout=5s"],
    )
    .await;
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!out.status.success(), "kubectl rollout status: {said}");
    assert!(
        said.contains(&format!(
            "deployment \"{name}\" exceeded its progress deadline"
        )),
        "kubectl rollout status: {said}"
    );
}

/// One instance's events.
fn events<'a>(rec: &'a Recorder, id: &'a str) -> impl Iterator<Item = &'a InstanceEvent> {
    rec.events.iter().filter(move |e| e.id.as_str() == id)
}

/// The `n`th event of `id` of `kind`.
fn nth<'a>(rec: &'a Recorder, id: &str, kind: EventKind, n: usize) -> &'a InstanceEvent {
    rec.events
        .iter()
        .filter(|e| e.id.as_str() == id && e.kind == kind)
        .nth(n)
        .unwrap_or_else(|| panic!("no {kind} #{n} of {id}: {rec:?}"))
}

fn message(e: &InstanceEvent) -> Option<&str> {
    e.reason.as_ref().and_then(|r| r.message.as_deref())
}

/// The finalizer the tests hold a deployment with; removed on drop (a
/// panicking test leaves no object the namespace cannot delete).
const HOLD: &str = "lookout.dev/hold";

struct Held {
    kubeconfig: PathBuf,
    ns: String,
    name: String,
}

impl Held {
    /// Puts [`HOLD`] on deployment `name`.
    async fn put(kubeconfig: &Path, ns: &str, name: &str) -> Self {
        let patch = json!({ "metadata": { "finalizers": [HOLD] } }).to_string();
        let target = format!("deploy/{name}");
        let out = kubectl(
            kubeconfig,
            ns,
            &["patch", &target, "--type=merge", "-p", &patch],
        )
        .await;
        assert!(out.status.success(), "put the finalizer: {out:?}");
        Self {
            kubeconfig: kubeconfig.to_path_buf(),
            ns: ns.to_owned(),
            name: name.to_owned(),
        }
    }

    /// The kubectl that lets it go.
    fn release(&self) -> std::process::Command {
        let bin = engines::kubectl_binary().unwrap_or_else(|e| panic!("{e}"));
        let mut cmd = std::process::Command::new(bin);
        cmd.arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(["--namespace", &self.ns])
            .args(["patch", &format!("deploy/{}", self.name), "--type=merge"])
            .args([
                "-p",
                r#"{"metadata":{"finalizers":null}}"#,
                "--request-timeout=20s",
            ]);
        cmd
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        // Already gone when the test let it go: the error is expected.
        let _ = self.release().output();
    }
}

/// A Deployment past its progress deadline is `failing` with the
/// controller's message (`failed`), as `kubectl rollout status` fails
/// saying it exceeded its deadline; readiness stays what its replicas say
/// (failing moves none); a new message is `failing` again; scaled to 0 it
/// is `stopped`, outcome `stopped`. Deleted while a finalizer holds it, a
/// running one is `stopping` (beside its `deletionTimestamp`), then
/// `removed` when the finalizer goes. All live.
#[tokio::test(flavor = "current_thread")]
async fn k8s_deployment_says_why_it_fails_stops_and_goes() {
    let t = Instant::now();
    let Some((_lock, kubeconfig, fx)) = setup(false, &[]).await else {
        return;
    };
    let mut rec = Recorder::new(config(&kubeconfig, &fx.ns));
    rec.until("first snapshot", STEP, |r| r.connected() >= 1)
        .await;
    let web = fx.id(Kind::Deployment, "web");
    let n = |r: &Recorder| events(r, &web).count();

    fx.create(Kind::Deployment, "web", 2, &[]).await;
    rec.until("created, started", STEP, |r| n(r) >= 2).await;
    let g = fx.generation(Kind::Deployment, "web").await;
    fx.set_status(Kind::Deployment, "web", status(2, g, 2, None))
        .await;
    rec.until("ready", STEP, |r| n(r) >= 3).await;

    // A rollout past its deadline, the old replicas still serving.
    let first = timed_out("web-7c9");
    fx.set_status(Kind::Deployment, "web", status(2, g, 2, Some(&first)))
        .await;
    rec.until("failing", STEP, |r| n(r) >= 4).await;
    let failing = nth(&rec, &web, Failing, 0);
    assert_eq!(message(failing), Some(first.as_str()), "{rec:?}");
    assert!(
        failing.reason.as_ref().is_some_and(|r| r.failed),
        "{failing:?}"
    );
    rollout_says_deadline_exceeded(&kubeconfig, &fx.ns, "web").await;

    // The controller's words change (another ReplicaSet timed out): again.
    let second = timed_out("web-8e1");
    fx.set_status(Kind::Deployment, "web", status(2, g, 2, Some(&second)))
        .await;
    rec.until("failing again", STEP, |r| n(r) >= 5).await;
    let again = nth(&rec, &web, Failing, 1);
    assert_eq!(message(again), Some(second.as_str()), "{rec:?}");
    assert!(again.reason.as_ref().is_some_and(|r| r.failed));
    rollout_says_deadline_exceeded(&kubeconfig, &fx.ns, "web").await;

    // Scaled to 0: stopped, on request.
    fx.scale(Kind::Deployment, "web", 0).await;
    rec.until("stopped", STEP, |r| n(r) >= 6).await;
    let stopped = nth(&rec, &web, Stopped, 0);
    let outcome = stopped.reason.as_ref().and_then(|r| r.outcome);
    assert_eq!(outcome, Some(Outcome::Stopped), "{stopped:?}");

    // Deleted while a finalizer holds it, running: stopping, then removed.
    let held_id = fx.id(Kind::Deployment, "held");
    let h = |r: &Recorder| events(r, &held_id).count();
    fx.create(Kind::Deployment, "held", 1, &[]).await;
    let held = Held::put(&kubeconfig, &fx.ns, "held").await;
    rec.until("held created, started", STEP, |r| h(r) >= 2)
        .await;
    fx.delete(Kind::Deployment, "held").await;
    rec.until("stopping", STEP, |r| h(r) >= 3).await;
    let out = kubectl(
        &kubeconfig,
        &fx.ns,
        &[
            "get",
            "deploy/held",
            "-o",
            "jsonpath={.metadata.deletionTimestamp}",
        ],
    )
    .await;
    assert!(
        out.status.success() && !out.stdout.is_empty(),
        "kubectl says it is being deleted: {out:?}"
    );
    let released = held.release().output().expect("kubectl");
    assert!(released.status.success(), "{released:?}");
    rec.until("removed", STEP, |r| h(r) >= 4).await;
    drop(held);

    // A fence: anything more told of either would precede it.
    let fence = fx.id(Kind::Deployment, "fence");
    fx.create(Kind::Deployment, "fence", 0, &[]).await;
    rec.until("fence", STEP, |r| events(r, &fence).count() >= 1)
        .await;

    assert_eq!(
        rec.of(&web),
        [
            (Created, Live),
            (Started, Live),
            (Ready, Live),
            (Failing, Live),
            (Failing, Live),
            (Stopped, Live),
        ],
        "{rec:?}"
    );
    assert_eq!(
        rec.of(&held_id),
        [
            (Created, Live),
            (Started, Live),
            (Stopping, Live),
            (Removed, Live)
        ],
        "{rec:?}"
    );
    // A fence created at 0 replicas: created, why it does not run.
    let created = nth(&rec, &fence, Created, 0);
    assert_eq!(
        created.reason.as_ref().and_then(|r| r.outcome),
        Some(Outcome::Stopped)
    );
    assert_eq!(rec.disconnected(), 0, "{rec:?}");
    report("why: failing, stopped, stopping", t);
}

/// Writes a `ConfigMap` (etcd's revision moves on), then compacts etcd.
async fn compact(fx: &Fixture, bump: &str) -> u64 {
    fx.bump(bump).await;
    let revision = engines::k8s_compact().unwrap_or_else(|e| panic!("{e}"));
    eprintln!("[k8s] compacted etcd at revision {revision}");
    u64::try_from(revision).unwrap_or_else(|_| panic!("revision {revision}"))
}

/// Whether the deployments relisted `lists` times, or watch from a version
/// not older than `revision` (a bookmark moved them past it).
fn past(requests: &Requests, lists: usize, revision: u64) -> bool {
    let sent = requests.all();
    let listed = sent
        .iter()
        .filter(|r| r.verb == "LIST" && r.resource == "deployments" && r.status.is_some())
        .count();
    let fresh = sent.iter().any(|r| {
        r.verb == "WATCH"
            && r.resource == "deployments"
            && r.status.is_some()
            && r.resource_version
                .as_deref()
                .and_then(|v| v.parse::<u64>().ok())
                .is_some_and(|v| v >= revision)
    });
    listed >= lists || fresh
}

/// A failure the watch missed (written while it was disconnected, etcd
/// compacted meanwhile: the redial's watch gets `410 Gone` and relists) is
/// `failing` once, as the relist's net effect (`resync`), not again live;
/// one told live before, unchanged since, is not told again by the relist.
#[tokio::test(flavor = "current_thread")]
async fn k8s_failing_found_by_a_relist_is_told_once_as_resync() {
    let t = Instant::now();
    let Some((_lock, kubeconfig, fx)) = setup(true, &[("a", 2), ("b", 2)]).await else {
        return;
    };
    require_controlled(&kubeconfig);
    let [a, b] = ["a", "b"].map(|name| fx.id(Kind::Deployment, name));
    let ga = fx.generation(Kind::Deployment, "a").await;
    let gb = fx.generation(Kind::Deployment, "b").await;
    fx.set_status(Kind::Deployment, "a", status(2, ga, 2, None))
        .await;
    fx.set_status(Kind::Deployment, "b", status(2, gb, 2, None))
        .await;

    let (_, port) = apiserver(&kubeconfig);
    let relay = Relay::start(port);
    let relayed = kubeconfig_via(&kubeconfig, relay.port());
    let requests = Requests::default();
    let client = counting_client(relayed.path(), &requests).await;
    let mut rec = Recorder::with_client(config(relayed.path(), &fx.ns), &client);
    rec.until("first snapshot", STEP, |r| r.connected() >= 1)
        .await;

    // b fails live.
    let msg_b = timed_out("b-1f2");
    fx.set_status(Kind::Deployment, "b", status(2, gb, 2, Some(&msg_b)))
        .await;
    rec.until("b failing", STEP, |r| !r.of(&b).is_empty()).await;

    // a fails while the watch is away, and etcd forgets the versions.
    relay.refuse(true);
    relay.cut();
    rec.until("disconnected", STEP, |r| r.disconnected() >= 1)
        .await;
    let msg_a = timed_out("a-3c4");
    fx.set_status(Kind::Deployment, "a", status(2, ga, 2, Some(&msg_a)))
        .await;
    let rev = compact(&fx, "bump").await;
    relay.refuse(false);
    rec.until("the relist's difference", Duration::from_secs(30), |r| {
        !r.of(&a).is_empty() && past(&requests, 2, rev)
    })
    .await;
    rollout_says_deadline_exceeded(&kubeconfig, &fx.ns, "a").await;

    // Live fences (the same words, one replica short): unready, no failing.
    fx.set_status(Kind::Deployment, "a", status(2, ga, 1, Some(&msg_a)))
        .await;
    fx.set_status(Kind::Deployment, "b", status(2, gb, 1, Some(&msg_b)))
        .await;
    rec.until("live fences", STEP, |r| {
        r.of(&a).len() >= 2 && r.of(&b).len() >= 2
    })
    .await;

    assert_eq!(rec.of(&a), [(Failing, Resync), (Unready, Live)], "{rec:?}");
    assert_eq!(rec.of(&b), [(Failing, Live), (Unready, Live)], "{rec:?}");
    let fa = nth(&rec, &a, Failing, 0);
    assert_eq!(message(fa), Some(msg_a.as_str()), "{fa:?}");
    assert!(fa.reason.as_ref().is_some_and(|r| r.failed));
    assert_eq!(message(nth(&rec, &b, Failing, 0)), Some(msg_b.as_str()));
    assert!(
        rec.events.iter().all(|e| e.origin != Origin::Initial),
        "{rec:?}"
    );
    drop(rec);
    drop(relay);
    drop(relayed);
    report("why: failing across a relist", t);
}
