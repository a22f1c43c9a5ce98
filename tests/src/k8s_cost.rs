//! What watching costs the apiserver (issues #15 and #35; the `k8s_churn`
//! bench): lookout vs raw kube-runtime watchers of the same kinds, side by
//! side in this one process, each through a relay of its own (bytes each
//! way, TLS records included) and a client that records every request it
//! sends (verb as the apiserver's metrics name it: a GET of a collection is
//! a LIST, with `watch=true` a WATCH; a GET of `/api…` or `/apis/GROUP/VERSION`
//! is API discovery).
//!
//! "One hour of watching, compressed": N objects of each watched kind; both
//! consumers list once, then watch with a server-side watch timeout of T
//! seconds (the apiserver ends each watch request after T, as it would after
//! kube's 290 s: 60 s at T = 5 s is about an hour of re-watches); meanwhile a
//! producer flips the objects between running and not at a steady pace, both
//! relays cut every open connection a few times (forced reconnects), and once,
//! with both up to date, both relays cut every connection and refuse new ones
//! while etcd is compacted past both consumers' versions (one forced
//! `410 Gone` per kind when they are let through). At the end both must agree
//! with what the producer did. `LOOKOUT_COST_TRACE=1` prints every request
//! each consumer sent, with its time and status.
//!
//! Two plans ([`Plan`]):
//! - issue #15: Deployments only, scaled by their `spec.replicas`; then peak
//!   RSS during the initial sync, each consumer alone in a child process of
//!   this bench (so neither inherits the other's heap): paged lists, and
//!   streaming lists where the apiserver offers them;
//! - issue #35: three kinds, `Deployment`s, `DaemonSet`s and a custom resource
//!   (`clusters.bench.lookout.dev`, whose CRD the run creates and deletes),
//!   each object's spec and status written by the producer (the testbed runs
//!   no controller). lookout resolves the custom kind by API discovery on
//!   each dial; the raw watcher names its resource outright. Those discovery
//!   requests are counted apart (they are no LISTs) and their bytes are in
//!   lookout's.

// A bench's helpers (the k8s_churn bench): they panic on what the bench
// cannot go on without, and print its figures.
#![allow(
    clippy::missing_panics_doc,
    clippy::cast_precision_loss,
    clippy::print_stdout,
    clippy::print_stderr,
    clippy::too_many_lines,
    clippy::disallowed_methods
)]

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::process::Command;
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::engines;
use crate::k8s_util::{Fixture, RUN_LABEL, Relay, apiserver, kubeconfig_via};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, DynamicObject, GroupVersion, GroupVersionKind};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Resource, ResourceExt};
use lookout_core::{EventKind, Item, ReconnectPolicy, Status, WatchConfig};
use lookout_k8s::{InitialList, K8sConfig, K8sDial, Kind, KindRef};
use serde_json::json;
use tokio::sync::{oneshot, watch};
use tokio_stream::{Stream, StreamExt, StreamMap};

/// Bound of one API call of the producer.
const CALL: Duration = Duration::from_secs(30);
/// Bound of a consumer's first list, and of reaching the final state.
const SETTLE: Duration = Duration::from_secs(180);

/// The custom resource's group (the bench's own: other tests share the testbed).
const GROUP: &str = "bench.lookout.dev";
/// Its CRD's name.
const CRD_NAME: &str = "clusters.bench.lookout.dev";
/// How lookout is told the custom kind: `GROUP/VERSION/KIND`.
const CLUSTER_KIND: &str = "bench.lookout.dev/v1/Cluster";

/// A kind the bench watches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Wk {
    /// `apps/v1` `Deployment`: running while `spec.replicas` ≠ 0.
    Deployment,
    /// `apps/v1` `DaemonSet`: running while `status.desiredNumberScheduled` ≠ 0.
    DaemonSet,
    /// `bench.lookout.dev/v1` `Cluster`, a custom resource with a scale
    /// subresource (`specReplicasPath: .spec.instances`): running while
    /// `spec.instances` ≠ 0.
    Cluster,
}

/// How many kinds [`Wk`] has (the size of a [`Belief`]'s arrays).
const KINDS: usize = 3;

impl Wk {
    fn index(self) -> usize {
        self as usize
    }

    /// The collection's name (a LIST's last path segment).
    fn plural(self) -> &'static str {
        match self {
            Wk::Deployment => "deployments",
            Wk::DaemonSet => "daemonsets",
            Wk::Cluster => "clusters",
        }
    }

    /// The objects' names start with this.
    fn short(self) -> &'static str {
        match self {
            Wk::Deployment => "d",
            Wk::DaemonSet => "ds",
            Wk::Cluster => "c",
        }
    }

    /// What lookout's instance ids of the kind start with.
    fn id_prefix(self) -> &'static str {
        match self {
            Wk::Deployment => "deployment/",
            Wk::DaemonSet => "daemonset/",
            Wk::Cluster => "cluster.bench.lookout.dev/",
        }
    }

    fn of_id(id: &str) -> Option<Wk> {
        [Wk::Deployment, Wk::DaemonSet, Wk::Cluster]
            .into_iter()
            .find(|k| id.starts_with(k.id_prefix()))
    }

    /// The kind as lookout is told it.
    fn kind_ref(self) -> KindRef {
        match self {
            Wk::Deployment => Kind::Deployment.into(),
            Wk::DaemonSet => Kind::DaemonSet.into(),
            Wk::Cluster => KindRef::parse(CLUSTER_KIND).expect("a GROUP/VERSION/KIND"),
        }
    }

    /// Its API resource (the producer's, and the raw watcher's for the
    /// custom kind: named outright, no discovery).
    fn resource(self) -> ApiResource {
        match self {
            Wk::Deployment => ApiResource::erase::<Deployment>(&()),
            Wk::DaemonSet => ApiResource::erase::<DaemonSet>(&()),
            Wk::Cluster => ApiResource::from_gvk_with_plural(
                &GroupVersionKind::gvk(GROUP, "v1", "Cluster"),
                "clusters",
            ),
        }
    }

    /// A new object named `name`, not running.
    fn body(self, name: &str, run: &str) -> DynamicObject {
        let labels = json!({ RUN_LABEL: run, "app": name });
        let template = json!({
            "metadata": { "labels": { "app": name } },
            "spec": { "containers": [{ "name": "main", "image": "busybox" }] }
        });
        let value = match self {
            Wk::Deployment => json!({
                "apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": { "name": name, "labels": labels },
                "spec": {
                    "replicas": 0,
                    "selector": { "matchLabels": { "app": name } },
                    "template": template
                }
            }),
            // No controller counts its nodes: desiredNumberScheduled unset, 0.
            Wk::DaemonSet => json!({
                "apiVersion": "apps/v1", "kind": "DaemonSet",
                "metadata": { "name": name, "labels": labels },
                "spec": {
                    "selector": { "matchLabels": { "app": name } },
                    "template": template
                }
            }),
            Wk::Cluster => json!({
                "apiVersion": "bench.lookout.dev/v1", "kind": "Cluster",
                "metadata": { "name": name, "labels": labels },
                "spec": { "instances": 0 }
            }),
        };
        serde_json::from_value(value).expect("an object")
    }
}

/// The sizes of one run.
#[derive(Clone, Copy, Debug)]
pub struct Plan {
    /// The kinds watched.
    pub kinds: &'static [Wk],
    /// Objects of each kind.
    pub n: usize,
    /// Whether the producer writes each object's status too, as its
    /// controller would (a `DaemonSet`'s change is its status either way).
    pub status: bool,
    /// Server-side watch timeout, seconds.
    pub timeout_s: u32,
    /// How long the watching lasts (the compressed hour).
    pub duration: Duration,
    /// Forced reconnects (relay cuts), besides the one after the compaction.
    pub cuts: usize,
    /// One change every this long.
    pub pace: Duration,
    /// Whether to measure the initial sync's peak RSS after (Deployments).
    pub rss: bool,
}

impl Plan {
    /// Issue #15: Deployments only, scaled; then peak RSS.
    pub fn new(full: bool) -> Self {
        let base = Self {
            kinds: &[Wk::Deployment],
            n: 500,
            status: false,
            timeout_s: 2,
            duration: Duration::from_secs(12),
            cuts: 2,
            pace: Duration::from_millis(100),
            rss: true,
        };
        if full {
            Self {
                n: 10_000,
                timeout_s: 5,
                duration: Duration::from_secs(60),
                cuts: 4,
                pace: Duration::from_millis(50),
                ..base
            }
        } else {
            base
        }
    }

    /// Issue #35: `Deployment`s, `DaemonSet`s and a custom resource, their spec
    /// and status written; no RSS.
    pub fn kinds(full: bool) -> Self {
        let base = Self {
            kinds: &[Wk::Deployment, Wk::DaemonSet, Wk::Cluster],
            n: 50,
            status: true,
            timeout_s: 2,
            duration: Duration::from_secs(4),
            cuts: 1,
            pace: Duration::from_millis(100),
            rss: false,
        };
        if full {
            Self {
                n: 2_000,
                timeout_s: 5,
                duration: Duration::from_secs(60),
                cuts: 4,
                pace: Duration::from_millis(50),
                ..base
            }
        } else {
            base
        }
    }

    /// LIST requests a consumer needs for one list of one kind (500 a page).
    fn pages(&self) -> usize {
        self.n.div_ceil(500).max(1)
    }

    fn custom(&self) -> bool {
        self.kinds.contains(&Wk::Cluster)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Who {
    Raw,
    Lookout,
}

impl Who {
    fn name(self) -> &'static str {
        match self {
            Who::Raw => "raw kube-runtime watchers",
            Who::Lookout => "lookout_k8s::watch",
        }
    }
}

/// What a consumer believes, per kind ([`Wk::index`]): objects known, of
/// which running.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Belief {
    known: [usize; KINDS],
    running: [usize; KINDS],
    synced: bool,
}

/// One consumer's totals.
#[derive(Debug)]
struct Totals {
    who: Who,
    requests: Tally,
    bytes_down: u64,
    bytes_up: u64,
    notes: Vec<String>,
}

/// One consumer on a thread and a current-thread runtime of its own,
/// through `relay`, until `stop`; it publishes what it believes on `belief`.
fn consumer(
    who: Who,
    kubeconfig: PathBuf,
    ns: String,
    plan: Plan,
    requests: Tally,
    stop: oneshot::Receiver<()>,
    belief: watch::Sender<Belief>,
) -> JoinHandle<Vec<String>> {
    std::thread::Builder::new()
        .name(format!("cost-{who:?}"))
        .spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime");
            rt.block_on(async move {
                let client = counting_client(&kubeconfig, &requests).await;
                match who {
                    Who::Raw => raw(client, &ns, plan, stop, &belief).await,
                    Who::Lookout => lookout(client, &ns, plan, stop, &belief).await,
                }
            })
        })
        .expect("a consumer thread")
}

/// A raw watcher's event, its object read down to name and running.
enum RawEvent {
    Init,
    InitApply(String, bool),
    InitDone,
    Apply(String, bool),
    Delete(String),
    Error(String),
}

type RawStream = Pin<Box<dyn Stream<Item = RawEvent> + Send>>;

/// kube-runtime's watcher configuration for a server-side watch timeout of
/// `timeout_s`: otherwise its defaults (paged lists of 500, bookmarks, the
/// most recent list), as a program would use it.
fn raw_config(timeout_s: u32) -> watcher::Config {
    watcher::Config::default().timeout(timeout_s)
}

/// A watcher's `events` (with kube-runtime's default backoff), each object
/// read by `running`.
fn raw_stream<K>(
    events: impl Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static,
    running: fn(&K) -> bool,
) -> RawStream
where
    K: Resource + Send + 'static,
{
    Box::pin(events.default_backoff().map(move |e| match e {
        Ok(watcher::Event::Init) => RawEvent::Init,
        Ok(watcher::Event::InitApply(o)) => RawEvent::InitApply(o.name_any(), running(&o)),
        Ok(watcher::Event::InitDone) => RawEvent::InitDone,
        Ok(watcher::Event::Apply(o)) => RawEvent::Apply(o.name_any(), running(&o)),
        Ok(watcher::Event::Delete(o)) => RawEvent::Delete(o.name_any()),
        Err(e) => RawEvent::Error(e.to_string()),
    }))
}

fn deployment_running(d: &Deployment) -> bool {
    d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1) != 0
}

fn daemonset_running(d: &DaemonSet) -> bool {
    d.status.as_ref().map_or(0, |s| s.desired_number_scheduled) != 0
}

fn cluster_running(c: &DynamicObject) -> bool {
    c.data["spec"]["instances"].as_i64().unwrap_or(1) != 0
}

/// One raw watcher per kind (typed for the built-in kinds, `DynamicObject`
/// for the custom one), on one client, polled together.
async fn raw(
    client: kube::Client,
    ns: &str,
    plan: Plan,
    mut stop: oneshot::Receiver<()>,
    belief: &watch::Sender<Belief>,
) -> Vec<String> {
    let mut events: StreamMap<usize, RawStream> = StreamMap::new();
    for &kind in plan.kinds {
        let stream = match kind {
            Wk::Deployment => raw_stream(
                watcher::watcher(
                    Api::<Deployment>::namespaced(client.clone(), ns),
                    raw_config(plan.timeout_s),
                ),
                deployment_running,
            ),
            Wk::DaemonSet => raw_stream(
                watcher::watcher(
                    Api::<DaemonSet>::namespaced(client.clone(), ns),
                    raw_config(plan.timeout_s),
                ),
                daemonset_running,
            ),
            Wk::Cluster => raw_stream(
                watcher::watcher(
                    Api::<DynamicObject>::namespaced_with(client.clone(), ns, &kind.resource()),
                    raw_config(plan.timeout_s),
                ),
                cluster_running,
            ),
        };
        events.insert(kind.index(), stream);
    }
    let mut notes = Vec::new();
    let mut state: [HashMap<String, bool>; KINDS] = Default::default();
    let mut relist: [Option<HashMap<String, bool>>; KINDS] = Default::default();
    // A kind not watched is as good as listed.
    let mut synced: [bool; KINDS] =
        std::array::from_fn(|k| !plan.kinds.iter().any(|w| w.index() == k));
    loop {
        let event = tokio::select! {
            _ = &mut stop => break,
            e = events.next() => e,
        };
        let Some((k, event)) = event else {
            notes.push("the watchers ended".to_owned());
            break;
        };
        match event {
            RawEvent::Init => relist[k] = Some(HashMap::new()),
            RawEvent::InitApply(name, running) => {
                relist[k]
                    .get_or_insert_with(HashMap::new)
                    .insert(name, running);
            }
            RawEvent::InitDone => {
                state[k] = relist[k].take().unwrap_or_default();
                synced[k] = true;
            }
            RawEvent::Apply(name, running) => {
                state[k].insert(name, running);
            }
            RawEvent::Delete(name) => {
                state[k].remove(&name);
            }
            RawEvent::Error(e) => notes.push(format!("error: {e}")),
        }
        let mut b = Belief {
            synced: synced.iter().all(|s| *s),
            ..Belief::default()
        };
        for (k, kind) in state.iter().enumerate() {
            b.known[k] = kind.len();
            b.running[k] = kind.values().filter(|r| **r).count();
        }
        belief.send_replace(b);
    }
    notes
}

async fn lookout(
    client: kube::Client,
    ns: &str,
    plan: Plan,
    mut stop: oneshot::Receiver<()>,
    belief: &watch::Sender<Belief>,
) -> Vec<String> {
    let config = K8sConfig::default()
        .namespace(ns)
        .kinds(plan.kinds.iter().map(|k| k.kind_ref()))
        .watch_config(watch_config(plan.timeout_s).initial(true));
    let mut watch =
        lookout_k8s::watch_with_client(config, move || client.clone()).expect("a valid K8sConfig");
    let mut notes = Vec::new();
    let mut running: [HashMap<String, bool>; KINDS] = Default::default();
    let mut synced = false;
    loop {
        let item = tokio::select! {
            _ = &mut stop => break,
            i = watch.next() => i,
        };
        match item {
            Some(Item::Event(e)) => {
                let id = e.id.as_str();
                let Some(kind) = Wk::of_id(id) else {
                    notes.push(format!("an id of no watched kind: {id}"));
                    continue;
                };
                let of_kind = &mut running[kind.index()];
                match e.kind {
                    EventKind::Created | EventKind::Stopped => {
                        of_kind.insert(id.to_owned(), false);
                    }
                    EventKind::Started => {
                        of_kind.insert(id.to_owned(), true);
                    }
                    EventKind::Removed => {
                        of_kind.remove(id);
                    }
                    // Readiness is not watched here.
                    _ => {}
                }
            }
            Some(Item::Status(Status::Connected { .. })) => synced = true,
            Some(Item::Status(s)) => notes.push(format!("{s:?}")),
            None => {
                notes.push("the watch ended".to_owned());
                break;
            }
        }
        let mut b = Belief {
            synced,
            ..Belief::default()
        };
        for (k, kind) in running.iter().enumerate() {
            b.known[k] = kind.len();
            b.running[k] = kind.values().filter(|r| **r).count();
        }
        belief.send_replace(b);
    }
    notes
}

/// lookout's knobs for a server-side watch timeout of `timeout_s`: its
/// stall bound (`probe_after` + `probe_timeout`) is the watch timeout.
fn watch_config(timeout_s: u32) -> WatchConfig {
    K8sConfig::default_watch()
        .probe_after(Duration::from_secs(u64::from(
            timeout_s.saturating_sub(1).max(1),
        )))
        .probe_timeout(Duration::from_secs(1))
        .reconnect(ReconnectPolicy::default().initial_delay(Duration::from_millis(200)))
}

fn name_of(d: &Deployment) -> String {
    d.metadata.name.clone().unwrap_or_default()
}

fn replicas_of(d: &Deployment) -> i32 {
    d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
}

/// The producer's client for each kind.
#[derive(Clone)]
struct Apis([Option<Api<DynamicObject>>; KINDS]);

impl Apis {
    fn new(client: &kube::Client, ns: &str, kinds: &[Wk]) -> Self {
        let mut apis: [Option<Api<DynamicObject>>; KINDS] = Default::default();
        for kind in kinds {
            apis[kind.index()] = Some(Api::namespaced_with(client.clone(), ns, &kind.resource()));
        }
        Self(apis)
    }

    fn of(&self, kind: Wk) -> &Api<DynamicObject> {
        self.0[kind.index()].as_ref().expect("a watched kind")
    }
}

/// One object of the run: its kind and name.
type Obj = (Wk, String);

/// Creates `objects` (not running), 32 at a time.
async fn create_all(apis: &Apis, objects: &[Obj], run: &str) {
    let mut set = tokio::task::JoinSet::new();
    for w in 0..32.min(objects.len()) {
        let apis = apis.clone();
        let mine: Vec<Obj> = objects.iter().skip(w).step_by(32).cloned().collect();
        let run = run.to_owned();
        set.spawn(async move {
            for (kind, name) in mine {
                let body = kind.body(&name, &run);
                tokio::time::timeout(CALL, apis.of(kind).create(&PostParams::default(), &body))
                    .await
                    .unwrap_or_else(|_| panic!("create {kind:?} {name}: no answer within {CALL:?}"))
                    .unwrap_or_else(|e| panic!("create {kind:?} {name}: {e}"));
            }
        });
    }
    while let Some(done) = set.join_next().await {
        done.expect("a creator");
    }
}

/// One API call of the producer, bounded.
async fn call<T>(what: &str, fut: impl Future<Output = kube::Result<T>>) -> T {
    tokio::time::timeout(CALL, fut)
        .await
        .unwrap_or_else(|_| panic!("{what}: no answer within {CALL:?}"))
        .unwrap_or_else(|e| panic!("{what}: {e}"))
}

/// Makes `name` of `kind` run (`on`) or not, as a user and its controller
/// would: the spec (replicas, instances), then with `status` the status
/// its controller would write (a `DaemonSet`'s desired pods are its status).
async fn flip(apis: &Apis, kind: Wk, name: &str, on: bool, status: bool) {
    let n = i64::from(on);
    let pp = PatchParams::default();
    let api = apis.of(kind);
    let spec = match kind {
        Wk::Deployment => Some(json!({ "spec": { "replicas": n } })),
        Wk::Cluster => Some(json!({ "spec": { "instances": n } })),
        Wk::DaemonSet => None,
    };
    let generation = match spec {
        Some(spec) => {
            let done = call(
                &format!("patch {kind:?} {name}"),
                api.patch(name, &pp, &Patch::Merge(spec)),
            )
            .await;
            done.metadata.generation.unwrap_or(1)
        }
        None => 1,
    };
    if !status && kind != Wk::DaemonSet {
        return;
    }
    let status = match kind {
        Wk::Deployment => json!({
            "observedGeneration": generation, "replicas": n, "updatedReplicas": n,
            "readyReplicas": n, "availableReplicas": n
        }),
        Wk::DaemonSet => json!({
            "observedGeneration": generation, "desiredNumberScheduled": n,
            "currentNumberScheduled": n, "updatedNumberScheduled": n,
            "numberReady": n, "numberAvailable": n, "numberMisscheduled": 0
        }),
        Wk::Cluster => json!({
            "observedGeneration": generation, "instances": n, "readyInstances": n
        }),
    };
    call(
        &format!("patch the status of {kind:?} {name}"),
        api.patch_status(name, &pp, &Patch::Merge(json!({ "status": status }))),
    )
    .await;
}

/// Flips one object after another (running, then not on the next pass…),
/// one every `pace`, for `span`; `truth` keeps each one's state.
async fn produce(
    apis: &Apis,
    objects: &[Obj],
    truth: &mut HashMap<Obj, bool>,
    next: &mut usize,
    span: Duration,
    plan: Plan,
) {
    let end = tokio::time::Instant::now() + span;
    let mut tick = tokio::time::interval(plan.pace);
    while tokio::time::Instant::now() < end {
        tick.tick().await;
        let obj = &objects[*next % objects.len()];
        *next += 1;
        let on = !truth.get(obj).copied().unwrap_or(false);
        flip(apis, obj.0, &obj.1, on, plan.status).await;
        truth.insert(obj.clone(), on);
    }
}

/// What a consumer must believe once it holds `truth`.
fn want(truth: &HashMap<Obj, bool>) -> Belief {
    let mut b = Belief {
        synced: true,
        ..Belief::default()
    };
    for ((kind, _), on) in truth {
        b.known[kind.index()] += 1;
        b.running[kind.index()] += usize::from(*on);
    }
    b
}

/// Waits (bounded) until every consumer believes `want`.
async fn settle(beliefs: &mut [(Who, watch::Receiver<Belief>)], want: Belief, what: &str) {
    for (who, rx) in beliefs.iter_mut() {
        let settled = tokio::time::timeout(SETTLE, rx.wait_for(|b| *b == want))
            .await
            .map(|r| r.map(drop));
        match settled {
            Ok(Ok(())) => {}
            Ok(Err(_)) => panic!("{what}: {} ended", who.name()),
            Err(tokio::time::error::Elapsed { .. }) => panic!(
                "{what}: {} believes {:?}, not {want:?}, after {SETTLE:?}",
                who.name(),
                *rx.borrow()
            ),
        }
    }
}

// ------------------------------------------------------------------ the custom kind

/// The bench's CRD (`clusters.bench.lookout.dev`, namespaced, `v1`, with
/// status and scale subresources), created at the start of a run that
/// watches it; on drop (also on panic) the objects of the run that no
/// fixture deletes (its `DaemonSet`s and `Cluster`s) and the CRD are deleted.
struct CustomKind {
    kubeconfig: PathBuf,
    ns: String,
}

impl CustomKind {
    /// Creates the CRD (a leftover of an earlier run deleted first) and
    /// waits until the apiserver serves it.
    async fn create(kubeconfig: &Path, ns: &str) -> Self {
        let client = crate::k8s_util::client(kubeconfig).await;
        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        if call("get the CRD", crds.get_opt(CRD_NAME)).await.is_some() {
            eprintln!("cost: deleting a leftover {CRD_NAME}");
            delete_crd(&crds).await;
        }
        let crd: CustomResourceDefinition = serde_json::from_value(json!({
            "metadata": { "name": CRD_NAME },
            "spec": {
                "group": GROUP,
                "scope": "Namespaced",
                "names": {
                    "plural": "clusters", "singular": "cluster",
                    "kind": "Cluster", "listKind": "ClusterList"
                },
                "versions": [{
                    "name": "v1", "served": true, "storage": true,
                    "schema": { "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": { "type": "object", "properties": {
                                "instances": { "type": "integer", "minimum": 0 }
                            }},
                            "status": { "type": "object", "properties": {
                                "observedGeneration": { "type": "integer" },
                                "instances": { "type": "integer" },
                                "readyInstances": { "type": "integer" }
                            }}
                        }
                    }},
                    "subresources": {
                        "status": {},
                        "scale": {
                            "specReplicasPath": ".spec.instances",
                            "statusReplicasPath": ".status.instances"
                        }
                    }
                }]
            }
        }))
        .expect("a CRD");
        call("create the CRD", crds.create(&PostParams::default(), &crd)).await;
        // Established, then its objects' collection answers.
        let clusters: Api<DynamicObject> =
            Api::namespaced_with(client, ns, &Wk::Cluster.resource());
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let established = call("get the CRD", crds.get(CRD_NAME))
                .await
                .status
                .and_then(|s| s.conditions)
                .is_some_and(|c| {
                    c.iter()
                        .any(|c| c.type_ == "Established" && c.status == "True")
                });
            if established
                && tokio::time::timeout(CALL, clusters.list(&ListParams::default().limit(1)))
                    .await
                    .is_ok_and(|r| r.is_ok())
            {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{CRD_NAME}: not served within 60 s"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Self {
            kubeconfig: kubeconfig.to_path_buf(),
            ns: ns.to_owned(),
        }
    }
}

/// Deletes the CRD and waits (bounded) until it is gone, its objects with it.
async fn delete_crd(crds: &Api<CustomResourceDefinition>) {
    let _ = tokio::time::timeout(CALL, crds.delete(CRD_NAME, &DeleteParams::default())).await;
    let deadline = Instant::now() + Duration::from_secs(120);
    while Instant::now() < deadline {
        match tokio::time::timeout(CALL, crds.get_opt(CRD_NAME)).await {
            Ok(Ok(None)) => return,
            _ => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
    eprintln!("cost: {CRD_NAME} still there after 120 s");
}

impl Drop for CustomKind {
    fn drop(&mut self) {
        let kubeconfig = self.kubeconfig.clone();
        let ns = self.ns.clone();
        // Its own thread and runtime: drop may run inside a runtime.
        let cleanup = std::thread::spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            rt.block_on(async {
                let client = crate::k8s_util::client(&kubeconfig).await;
                let lp = ListParams::default();
                let dp = DeleteParams::default();
                for kind in [Wk::DaemonSet, Wk::Cluster] {
                    let api: Api<DynamicObject> =
                        Api::namespaced_with(client.clone(), &ns, &kind.resource());
                    let _ = tokio::time::timeout(CALL, api.delete_collection(&dp, &lp)).await;
                }
                delete_crd(&Api::all(client)).await;
            });
        });
        let _ = cleanup.join();
    }
}

/// The bytes from the apiserver (TLS records and HTTP heads included) of one
/// resolution of the custom kind as lookout makes it on a connected client:
/// the discovery of its group version and the GET of its CRD (for the
/// scale's path); and how many requests that took.
async fn resolution_bytes(kubeconfig: &Path, port: u16) -> (u64, usize) {
    let relay = Relay::start(port);
    let relayed = kubeconfig_via(kubeconfig, relay.port());
    let tally = Tally::default();
    let client = counting_client(relayed.path(), &tally).await;
    call("version", client.apiserver_version()).await;
    let before = relay.bytes_down();
    let sent = tally.all().len();
    call(
        "discovery",
        kube::discovery::pinned_group(&client, &GroupVersion::gv(GROUP, "v1")),
    )
    .await;
    let crds: Api<CustomResourceDefinition> = Api::all(client);
    call("get the CRD", crds.get(CRD_NAME)).await;
    (relay.bytes_down() - before, tally.all().len() - sent)
}

// ------------------------------------------------------------------ the run

/// Which targets a run met.
#[derive(Clone, Copy, Debug)]
pub struct Met {
    /// As many LISTs served as the raw watchers, per kind 1 + one per 410.
    pub lists: bool,
    /// ≤ 1.05× the raw watchers' bytes from the apiserver.
    pub bytes: bool,
    /// Peak RSS of the paged initial sync ≤ 1.1× the raw watcher's
    /// (`None`: not measured).
    pub rss: Option<bool>,
}

/// The apiserver cost of one compressed hour, both consumers side by side.
/// Returns the report's lines and the targets met.
#[allow(clippy::too_many_lines)]
pub fn run(plan: Plan, kubeconfig: &Path) -> (Vec<String>, Met) {
    let wall = Instant::now();
    crate::k8s_util::init_tracing();
    // Compacting etcd breaks every watcher on the testbed: exclusive.
    let _lock = engines::lock_engine("k8s", true).expect("the k8s engine lock");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let fx = rt.block_on(Fixture::new(kubeconfig));
    let custom = plan
        .custom()
        .then(|| rt.block_on(CustomKind::create(kubeconfig, &fx.ns)));
    // Interleaved, so that consecutive changes go to different kinds.
    let objects: Vec<Obj> = (0..plan.n)
        .flat_map(|i| {
            plan.kinds
                .iter()
                .map(move |k| (*k, format!("{}-{i}", k.short())))
        })
        .collect();
    let apis = rt.block_on(async {
        Apis::new(
            &crate::k8s_util::client(kubeconfig).await,
            &fx.ns,
            plan.kinds,
        )
    });
    let t = Instant::now();
    rt.block_on(create_all(&apis, &objects, &fx.run));
    let what = plan
        .kinds
        .iter()
        .map(|k| k.plural())
        .collect::<Vec<_>>()
        .join(", ");
    eprintln!(
        "cost: {} objects ({} each of {what}) created in {:.1?}",
        objects.len(),
        plan.n,
        t.elapsed()
    );

    let (_, port) = apiserver(kubeconfig);
    let mut relays = HashMap::new();
    let mut files = Vec::new();
    let mut stops = Vec::new();
    let mut beliefs = Vec::new();
    let mut threads = Vec::new();
    let mut counters = HashMap::new();
    for who in [Who::Raw, Who::Lookout] {
        let relay = Relay::start(port);
        let relayed = kubeconfig_via(kubeconfig, relay.port());
        let requests = Tally::default();
        let (stop, stopped) = oneshot::channel();
        let (belief, rx) = watch::channel(Belief::default());
        threads.push((
            who,
            consumer(
                who,
                relayed.path().to_path_buf(),
                fx.ns.clone(),
                plan,
                requests.clone(),
                stopped,
                belief,
            ),
        ));
        relays.insert(who, relay);
        files.push(relayed);
        stops.push(stop);
        beliefs.push((who, rx));
        counters.insert(who, requests);
    }
    let mut truth: HashMap<Obj, bool> = objects.iter().map(|o| (o.clone(), false)).collect();
    rt.block_on(settle(&mut beliefs, want(&truth), "first list"));
    eprintln!("cost: both listed ({:.1?})", t.elapsed());

    // The compressed hour: production in slices, a cut between slices, and
    // the compaction in the middle.
    let watching = Instant::now();
    let slices = plan.cuts + 2;
    let slice = plan.duration / u32::try_from(slices).unwrap_or(1);
    let mut next = 0;
    for s in 0..slices {
        rt.block_on(produce(&apis, &objects, &mut truth, &mut next, slice, plan));
        if s == slices / 2 {
            // Both have seen everything; cut them off the apiserver (every
            // connection cut, new ones refused, so that neither meets the
            // compaction early: a watch that ends meanwhile would relist
            // while the others are still to be cut), move etcd on past
            // their versions and compact it: both resume from a compacted
            // version once let through.
            rt.block_on(settle(&mut beliefs, want(&truth), "before the compaction"));
            for relay in relays.values() {
                relay.refuse(true);
                relay.cut();
            }
            let held = Instant::now();
            rt.block_on(fx.bump(&format!("bump-{s}")));
            let rev = engines::k8s_compact().unwrap_or_else(|e| panic!("{e}"));
            for relay in relays.values() {
                relay.refuse(false);
            }
            eprintln!(
                "cost: both cut and held off for {:.1?}, etcd compacted at revision {rev} meanwhile",
                held.elapsed()
            );
            // No change until both have relisted (each at its own pace:
            // kube-runtime's backoff holds the raw watchers back a few
            // seconds more), so that both read the same: changes meanwhile
            // would reach one as watch events and the other in its list.
            let relisted = Instant::now();
            let want_lists = plan.kinds.len() * plan.pages() * 2;
            while counters.values().any(|c| c.answered("LIST") < want_lists)
                && relisted.elapsed() < SETTLE
            {
                std::thread::sleep(Duration::from_millis(20));
            }
            rt.block_on(settle(&mut beliefs, want(&truth), "after the compaction"));
            eprintln!("cost: both relisted ({:.1?})", relisted.elapsed());
            continue;
        } else if s + 1 < slices {
            eprintln!("cost: cutting every connection");
        } else {
            continue;
        }
        for relay in relays.values() {
            relay.cut();
        }
    }
    rt.block_on(settle(&mut beliefs, want(&truth), "the final state"));
    let watched = watching.elapsed();
    for stop in stops {
        let _ = stop.send(());
    }
    let mut totals = Vec::new();
    for (who, h) in threads {
        let notes = h.join().expect("a consumer thread");
        let relay = &relays[&who];
        totals.push(Totals {
            who,
            requests: counters[&who].clone(),
            bytes_down: relay.bytes_down(),
            bytes_up: relay.bytes_up(),
            notes,
        });
    }
    drop(relays);
    drop(files);
    // What one resolution of the custom kind costs on the wire (the CRD
    // still there).
    let resolution = custom
        .as_ref()
        .map(|_| rt.block_on(resolution_bytes(kubeconfig, port)));

    // Peak RSS during the initial sync, each in a child process.
    let mut rss = HashMap::new();
    if plan.rss {
        for mode in ["raw", "lookout", "raw-streaming", "lookout-streaming"] {
            rss.insert(mode, rss_child(mode, &fx.ns));
        }
    }
    drop(apis);
    let cleanup = Instant::now();
    drop(custom); // deletes the DaemonSets, the Clusters and the CRD
    let cleanup = cleanup.elapsed();
    drop(fx);
    drop(rt);

    let mut out = Vec::new();
    let mut met = Met {
        lists: false,
        bytes: false,
        rss: None,
    };
    let changes = next;
    out.push(format!(
        "k8s apiserver cost: {} × {} ({what}), watch timeout {} s, {:.0?} of watching ({changes} changes{}, \
         {} forced reconnects, one compaction → 410), real kube-apiserver ({})",
        plan.kinds.len(),
        plan.n,
        plan.timeout_s,
        watched,
        if plan.status {
            ", each its spec and its status"
        } else {
            ""
        },
        plan.cuts + 1,
        std::env::var("LOOKOUT_K8S_VERSION").unwrap_or_else(|_| "version unknown".to_owned())
    ));
    out.push("| consumer | LIST sent (answered) | LIST answered per kind | WATCH sent (answered) | discovery sent | other requests | bytes from the apiserver | bytes to it | notes |".to_owned());
    out.push("|---|---|---|---|---|---|---|---|---|".to_owned());
    for t in &totals {
        let all = t.requests.all();
        let mut other: BTreeMap<String, usize> = BTreeMap::new();
        for s in all
            .iter()
            .filter(|s| !["LIST", "WATCH", "DISCOVERY"].contains(&s.verb.as_str()) && !s.is_crd())
        {
            *other
                .entry(format!("{} {}", s.verb, s.resource))
                .or_default() += 1;
        }
        let other: Vec<String> = other.iter().map(|(k, n)| format!("{k} ×{n}")).collect();
        let per_kind: Vec<String> = plan
            .kinds
            .iter()
            .map(|k| {
                format!(
                    "{} {}",
                    k.plural(),
                    t.requests.answered_of("LIST", k.plural())
                )
            })
            .collect();
        out.push(format!(
            "| {} | {} ({}) | {} | {} ({}) | {} | {} | {} | {} | {} |",
            t.who.name(),
            t.requests.count("LIST", None),
            t.requests.answered("LIST"),
            per_kind.join(", "),
            t.requests.count("WATCH", None),
            t.requests.answered("WATCH"),
            t.requests.discovery_summary(),
            if other.is_empty() {
                "–".to_owned()
            } else {
                other.join(", ")
            },
            t.bytes_down,
            t.bytes_up,
            t.notes.len()
        ));
    }
    let get = |who: Who| totals.iter().find(|t| t.who == who).expect("both ran");
    let (raw, lo) = (get(Who::Raw), get(Who::Lookout));
    let want_lists = plan.kinds.len() * plan.pages() * 2;
    // What the apiserver served: a LIST sent on a connection that a cut
    // had killed (the client's pool had not noticed yet) never reached it.
    let (raw_lists, lo_lists) = (raw.requests.answered("LIST"), lo.requests.answered("LIST"));
    let per_kind_equal = plan.kinds.iter().all(|k| {
        raw.requests.answered_of("LIST", k.plural()) == lo.requests.answered_of("LIST", k.plural())
    });
    let bytes = lo.bytes_down as f64 / raw.bytes_down.max(1) as f64;
    let lists_ok = lo_lists == raw_lists && lo_lists == want_lists && per_kind_equal;
    let bytes_ok = bytes <= 1.05;
    met.lists = lists_ok;
    met.bytes = bytes_ok;
    out.push(format!(
        "LISTs served (answered): lookout {lo_lists}, raw {raw_lists} (sent: {}, {}); target: the same, \
         {} kind(s) × {} page(s) × (1 + one 410) = {want_lists}{}: {}",
        lo.requests.count("LIST", None),
        raw.requests.count("LIST", None),
        plan.kinds.len(),
        plan.pages(),
        if plan.kinds.len() > 1 {
            ", equal per kind"
        } else {
            ""
        },
        if lists_ok { "met" } else { "NOT met" }
    ));
    out.push(format!(
        "bytes from the apiserver, lookout / raw: {bytes:.3}×; target ≤ 1.05×: {}",
        if bytes_ok { "met" } else { "NOT met" }
    ));
    if let Some((per, requests)) = resolution {
        let group = format!("/apis/{GROUP}/v1");
        let (groups, groups_answered) = (
            lo.requests.count("DISCOVERY", Some(&group)),
            lo.requests.answered_of("DISCOVERY", &group),
        );
        let crd = format!("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{CRD_NAME}");
        let (crds, crds_answered) = (
            lo.requests.count("GET", Some(&crd)),
            lo.requests.answered_of("GET", &crd),
        );
        let spent = per * groups_answered.min(crds_answered) as u64;
        out.push(format!(
            "discovery (lookout only; no LIST): {groups} GET of {group} ({groups_answered} answered) + \
             {crds} GET of the CRD {CRD_NAME} ({crds_answered} answered): the custom kind is resolved \
             on each dial, so {groups} dial(s); one resolution ({requests} requests) measured at {per} \
             bytes from the apiserver, so ≈ {spent} bytes in all, {:.2} % of lookout's bytes (included \
             above); lookout / raw without them: {:.3}×",
            spent as f64 * 100.0 / lo.bytes_down.max(1) as f64,
            lo.bytes_down.saturating_sub(spent) as f64 / raw.bytes_down.max(1) as f64,
        ));
        out.push(format!(
            "(CRD, DaemonSets and Clusters deleted in {cleanup:.1?})"
        ));
    }
    if plan.rss {
        out.push(
            "| initial sync | peak RSS (KiB) | RSS before (KiB) | growth (KiB) | time |".to_owned(),
        );
        out.push("|---|---|---|---|---|".to_owned());
        for mode in ["raw", "lookout", "raw-streaming", "lookout-streaming"] {
            match &rss[mode] {
                Ok(r) => out.push(format!(
                    "| {mode} | {} | {} | {} | {:.0} ms |",
                    r.peak_kib,
                    r.before_kib,
                    r.peak_kib.saturating_sub(r.before_kib),
                    r.sync.as_secs_f64() * 1e3
                )),
                Err(e) => out.push(format!("| {mode} | failed: {e} | | | |")),
            }
        }
        if let (Ok(r), Ok(l)) = (&rss["raw"], &rss["lookout"]) {
            let ratio = l.peak_kib as f64 / r.peak_kib.max(1) as f64;
            let ok = ratio <= 1.1;
            met.rss = Some(ok);
            out.push(format!(
                "peak RSS during the initial sync (paged), lookout / raw: {ratio:.2}×; target ≤ 1.1×: {}",
                if ok { "met" } else { "NOT met" }
            ));
        }
    }
    if std::env::var_os("LOOKOUT_COST_TRACE").is_some() {
        for t in &totals {
            for s in t.requests.all() {
                eprintln!(
                    "trace {:?} {:>8.3} {} {} {:?} {}",
                    t.who,
                    s.at.duration_since(wall).as_secs_f64(),
                    s.verb,
                    s.resource,
                    s.status,
                    s.query
                );
            }
        }
    }
    for t in &totals {
        for note in t.notes.iter().take(8) {
            out.push(format!("  {}: {note}", t.who.name()));
        }
    }
    out.push(format!("(wall {:.1?})", wall.elapsed()));
    (out, met)
}

// ------------------------------------------------------------------ request counting

/// The requests a client sent, as the apiserver's metrics name their verbs
/// (of any kind: `k8s_util`'s counter knows the built-in workloads' paths only).
#[derive(Clone, Debug, Default)]
struct Tally(Arc<Mutex<Vec<Sent>>>);

/// One request a client sent.
#[derive(Clone, Debug)]
struct Sent {
    /// `LIST`, `WATCH` (a `GET` of a collection, with `watch=true` for a
    /// watch), `DISCOVERY` (a `GET` of `/api`, `/apis`, a group or a group
    /// version), else the method.
    verb: String,
    /// A collection's name (`deployments`), else the path.
    resource: String,
    /// The response's status, once it came.
    status: Option<u16>,
    /// The query (for `LOOKOUT_COST_TRACE=1`).
    query: String,
    /// When it was sent.
    at: Instant,
}

impl Sent {
    /// A GET of a CRD (lookout reads a custom kind's scale path there).
    fn is_crd(&self) -> bool {
        self.verb == "GET"
            && self
                .resource
                .starts_with("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/")
    }
}

impl Tally {
    fn all(&self) -> Vec<Sent> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// How many requests of `verb` got a response from the apiserver.
    fn answered(&self, verb: &str) -> usize {
        self.all()
            .iter()
            .filter(|s| s.verb == verb && s.status.is_some())
            .count()
    }

    /// How many requests of `verb` on `resource` (any resource: `None`).
    fn count(&self, verb: &str, resource: Option<&str>) -> usize {
        self.all()
            .iter()
            .filter(|s| s.verb == verb && resource.is_none_or(|r| s.resource == r))
            .count()
    }

    /// How many requests of `verb` on `resource` got a response.
    fn answered_of(&self, verb: &str, resource: &str) -> usize {
        self.all()
            .iter()
            .filter(|s| s.verb == verb && s.resource == resource && s.status.is_some())
            .count()
    }

    /// The discovery requests and CRD GETs, by path.
    fn discovery_summary(&self) -> String {
        let mut by: BTreeMap<String, usize> = BTreeMap::new();
        for s in self.all() {
            if s.verb == "DISCOVERY" || s.is_crd() {
                *by.entry(format!("GET {}", s.resource)).or_default() += 1;
            }
        }
        if by.is_empty() {
            return "–".to_owned();
        }
        by.iter()
            .map(|(k, n)| format!("{k} ×{n}"))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Records `req`; returns its index, for [`Tally::answer`].
    fn record<B>(&self, req: &http::Request<B>) -> usize {
        let uri = req.uri();
        let watch = uri
            .query()
            .unwrap_or("")
            .split('&')
            .any(|kv| kv == "watch=true" || kv == "watch=1");
        let path = uri.path();
        let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
        // The path within a group version.
        let within = match segments[..] {
            ["api" | "apis"] | ["api" | "apis", _] | ["apis", _, _] => Some(&[][..]),
            ["api", _, ref rest @ ..] | ["apis", _, _, ref rest @ ..] => Some(rest),
            _ => None,
        };
        let get = req.method() == http::Method::GET;
        let (verb, resource) = match within {
            Some([]) if get => ("DISCOVERY".to_owned(), path.to_owned()),
            Some(["namespaces", _, collection] | [collection]) => (
                match (get, watch) {
                    (true, true) => "WATCH".to_owned(),
                    (true, false) => "LIST".to_owned(),
                    _ => req.method().as_str().to_owned(),
                },
                (*collection).to_owned(),
            ),
            _ => (req.method().as_str().to_owned(), path.to_owned()),
        };
        let sent = Sent {
            verb,
            resource,
            status: None,
            query: uri.query().unwrap_or("").to_owned(),
            at: Instant::now(),
        };
        let mut all = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        all.push(sent);
        all.len() - 1
    }

    fn answer(&self, index: usize, status: u16) {
        if let Some(s) = self
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_mut(index)
        {
            s.status = Some(status);
        }
    }
}

/// A `tower` layer recording every request into a [`Tally`].
#[derive(Clone, Debug)]
struct CountLayer(Tally);

impl<S> tower_layer::Layer<S> for CountLayer {
    type Service = Counted<S>;

    fn layer(&self, inner: S) -> Counted<S> {
        Counted {
            inner,
            requests: self.0.clone(),
        }
    }
}

/// The service [`CountLayer`] makes.
#[derive(Clone, Debug)]
struct Counted<S> {
    inner: S,
    requests: Tally,
}

impl<S, B, R> tower_service::Service<http::Request<B>> for Counted<S>
where
    S: tower_service::Service<http::Request<B>, Response = http::Response<R>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let index = self.requests.record(&req);
        let requests = self.requests.clone();
        let response = self.inner.call(req);
        Box::pin(async move {
            let response = response.await?;
            requests.answer(index, response.status().as_u16());
            Ok(response)
        })
    }
}

/// A kube client from `kubeconfig` that records its requests into `requests`.
async fn counting_client(kubeconfig: &Path, requests: &Tally) -> kube::Client {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        let _ = lookout_transport::crypto_provider().install_default();
    }
    let kc = kube::config::Kubeconfig::read_from(kubeconfig).expect("k8s: kubeconfig");
    let config =
        kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
            .await
            .expect("k8s: config");
    kube::client::ClientBuilder::try_from(config)
        .expect("k8s: client")
        .with_layer(&CountLayer(requests.clone()))
        .build()
}

/// A child's peak RSS over one initial sync.
#[derive(Debug)]
struct Rss {
    before_kib: u64,
    peak_kib: u64,
    sync: Duration,
}

/// Runs this bench as a child in `--rss-probe MODE NS` and reads its answer.
fn rss_child(mode: &str, ns: &str) -> Result<Rss, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let out = Command::new(exe)
        .args(["--rss-probe", mode, ns])
        .output()
        .map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("RSS "))
        .ok_or_else(|| {
            let err = String::from_utf8_lossy(&out.stderr);
            let last = err
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("");
            format!("no answer ({}): {last}", out.status)
        })?;
    let f: Vec<u64> = line
        .split_whitespace()
        .filter_map(|x| x.parse().ok())
        .collect();
    match f[..] {
        [before_kib, peak_kib, ms] => Ok(Rss {
            before_kib,
            peak_kib,
            sync: Duration::from_millis(ms),
        }),
        _ => Err(format!("unreadable: {line}")),
    }
}

/// `VmRSS`/`VmHWM` of this process, KiB.
fn status_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix(field))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// The child: one initial sync in `mode`, then `RSS before peak ms` on stdout.
pub fn rss_probe(mode: &str, ns: &str) {
    let Some(kubeconfig) = crate::k8s_util::require() else {
        return;
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    rt.block_on(async {
        let client = crate::k8s_util::client(&kubeconfig).await;
        // Connected (TLS and all) before measuring.
        client
            .apiserver_version()
            .await
            .expect("the apiserver answers");
        let streaming = mode.ends_with("-streaming");
        // Resets VmHWM to the current RSS.
        std::fs::write("/proc/self/clear_refs", "5").expect("clear_refs");
        let before = status_kib("VmRSS:");
        let t = Instant::now();
        if mode.starts_with("raw") {
            let api: Api<Deployment> = Api::namespaced(client, ns);
            let mut config = watcher::Config::default();
            if streaming {
                config = config.streaming_lists();
            }
            let mut events = Box::pin(watcher::watcher(api, config));
            let mut state: HashMap<String, i32> = HashMap::new();
            loop {
                match tokio::time::timeout(SETTLE, events.next()).await {
                    Ok(Some(Ok(watcher::Event::InitApply(d)))) => {
                        state.insert(name_of(&d), replicas_of(&d));
                    }
                    Ok(Some(Ok(watcher::Event::InitDone))) => break,
                    Ok(Some(Ok(_))) => {}
                    Ok(Some(Err(e))) => panic!("raw: {e}"),
                    Ok(None) | Err(_) => panic!("raw: no initial sync"),
                }
            }
            std::hint::black_box(&state);
        } else {
            let config = K8sConfig::default().namespace(ns).kinds([Kind::Deployment]);
            let how = if streaming {
                InitialList::Streaming
            } else {
                InitialList::Paged
            };
            let dial = K8sDial::with_client(&config, move || client.clone())
                .expect("a valid K8sConfig")
                .initial_list(how);
            let mut watch = lookout_core::Watch::new(dial, config.get_watch_config().clone());
            loop {
                match tokio::time::timeout(SETTLE, watch.next()).await {
                    Ok(Some(Item::Status(Status::Connected { .. }))) => break,
                    Ok(Some(Item::Status(s))) => panic!("lookout: {s:?}"),
                    Ok(Some(Item::Event(_))) => {}
                    Ok(None) | Err(_) => panic!("lookout: no initial sync"),
                }
            }
            std::hint::black_box(&watch);
        }
        let sync = t.elapsed();
        let peak = status_kib("VmHWM:");
        println!("RSS {before} {peak} {}", sync.as_millis());
    });
}
