#![allow(
    clippy::cast_precision_loss,
    clippy::print_stdout,
    clippy::print_stderr,
    clippy::too_many_lines
)]
//! Kubernetes at scale (issue #48, target 3): what watching N Deployments
//! costs in memory and time to synced, lookout beside kube-runtime's stores
//! and `kubectl`, on the real test apiserver.
//!
//! In a namespace of its own (deleted at the end, also on failure, within a
//! bounded wait), N Deployments are created, 64 at a time through kube's
//! client: each a small real manifest (labels, a selector, a pod template
//! of one container with ports, env and resources), 1 replica. The testbed
//! runs no controller, so they carry no status: the full objects are the
//! smallest they would be in a cluster, which favours the anchors.
//!
//! Then, each in turn, in a child process of this bench (re-invoked with
//! `--scale-probe MODE NS N`, so each figure is that consumer's alone, on a
//! fresh heap), after its client has connected:
//! - `lookout`: `lookout_k8s::watch` of the namespace's Deployments (the
//!   library as a consumer uses it, the default configuration, the first
//!   snapshot told: `WatchConfig::initial`), read until `Connected`;
//! - `reflector`: kube-runtime's `reflector` over `watcher` of
//!   `Api<Deployment>` (default `Config`, pages of 500), until
//!   `Store::wait_until_ready`;
//! - `trimmed`: the same with each object's `managedFields` dropped before
//!   the store (`WatchStreamExt::modify`, as kube-rs advises for memory);
//! - `metadata`: the metadata watch (kube 5: `watcher` of
//!   `Api<PartialObjectMeta<Deployment>>`, which replaces the deprecated
//!   `metadata_watcher`, the same requests) and a reflector store of it,
//!   likewise;
//!
//! and in this process `kubectl get deploy -A -o name` (the testbed's
//! kubectl, pages of 500), wall time, median of 3.
//!
//! Each child reports its RSS before (`VmRSS`, client connected), after the
//! sync with its store still held, and its peak over the sync (`VmHWM`,
//! reset before by `/proc/self/clear_refs`). Bytes per object = (held −
//! before) / N; the target is lookout ≤ 1/10 of the reflector's. Peak −
//! held is what the sync needed beyond what it keeps (a list page, the
//! snapshot in flight): a consumer that held the whole list twice would
//! show about its held growth again.
//!
//! Correctness (asserted at every size): lookout tells each Deployment once
//! (one `created` and one `started`, `initial`, per id; nothing else before
//! `Connected`) and
//! connects with N instances; each store holds N objects; kubectl names
//! all N.
//!
//! `cargo bench -p lookout-e2e --bench k8s_scale`: N = 20 000 (about a
//! minute to create, as long to delete). Without `--bench` (as
//! `cargo test --benches` runs it): N = 200. `LOOKOUT_SCALE_N=K` sets N;
//! `LOOKOUT_SCALE_ONLY=lookout,reflector,trimmed,metadata,kubectl` runs
//! only those;
//! `LOOKOUT_SCALE_ANCHOR_BIN=PATH` runs that build of this bench (the
//! previous code) for lookout's figures too, beside this one's.
//! Without `LOOKOUT_ENGINES=1`: prints "skipped: engines not configured".

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::core::PartialObjectMeta;
use kube::runtime::{WatchStreamExt, reflector, watcher};
use lookout_core::{EventKind, Item, Origin, Status};
use lookout_e2e::engines;
use lookout_e2e::k8s_util::{client, require, unique};
use lookout_k8s::{K8sConfig, K8sDial, Kind};
use serde_json::json;
use tokio_stream::StreamExt;

/// Deployments created at once.
const CREATORS: usize = 64;
/// Bound of one API call.
const CALL: Duration = Duration::from_secs(30);
/// Bound of one consumer's sync (20 000 objects take seconds).
const SYNC: Duration = Duration::from_secs(300);
/// Bound of the cleanup.
const CLEANUP: Duration = Duration::from_secs(300);
/// The name prefix of every Deployment of a run.
const PREFIX: &str = "scale-";

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

/// `VmRSS:`, `VmHWM:` of this process, KiB.
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

/// A Deployment as a user would apply it: 1 replica, one container.
fn body(name: &str) -> Deployment {
    let value = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {
            "name": name,
            "labels": { "app": name, "tier": "web", "app.kubernetes.io/part-of": "scale" },
            "annotations": { "scale.lookout.dev/owner": "bench" }
        },
        "spec": {
            "replicas": 1,
            "selector": { "matchLabels": { "app": name } },
            "template": {
                "metadata": { "labels": { "app": name, "tier": "web" } },
                "spec": { "containers": [{
                    "name": "main",
                    "image": "lookout-test/busybox",
                    "command": ["busybox", "httpd", "-f", "-p", "8080"],
                    "ports": [{ "name": "http", "containerPort": 8080 }],
                    "env": [{ "name": "MODE", "value": "bench" }, { "name": "NAME", "value": name }],
                    "resources": {
                        "requests": { "cpu": "10m", "memory": "16Mi" },
                        "limits": { "memory": "32Mi" }
                    }
                }] }
            }
        }
    });
    serde_json::from_value(value).expect("a Deployment")
}

// ------------------------------------------------------------------ the namespace

/// The run's namespace: its Deployments and itself deleted on drop (also
/// on panic), within [`CLEANUP`].
struct Scene {
    kubeconfig: PathBuf,
    ns: String,
}

impl Scene {
    async fn new(kubeconfig: &Path) -> Self {
        let ns = unique("lookout-scale");
        let namespaces: Api<Namespace> = Api::all(client(kubeconfig).await);
        let body: Namespace =
            serde_json::from_value(json!({ "metadata": { "name": ns } })).expect("namespace");
        tokio::time::timeout(CALL, namespaces.create(&PostParams::default(), &body))
            .await
            .expect("create the namespace in time")
            .unwrap_or_else(|e| panic!("create namespace {ns}: {e}"));
        Self {
            kubeconfig: kubeconfig.to_path_buf(),
            ns,
        }
    }

    /// Creates `n` Deployments, [`CREATORS`] at a time.
    async fn create(&self, n: usize) {
        let api: Api<Deployment> = Api::namespaced(client(&self.kubeconfig).await, &self.ns);
        let mut set = tokio::task::JoinSet::new();
        for w in 0..CREATORS.min(n) {
            let api = api.clone();
            set.spawn(async move {
                for i in (w..n).step_by(CREATORS) {
                    let name = format!("{PREFIX}{i:05}");
                    tokio::time::timeout(CALL, api.create(&PostParams::default(), &body(&name)))
                        .await
                        .unwrap_or_else(|_| panic!("create {name}: no answer within {CALL:?}"))
                        .unwrap_or_else(|e| panic!("create {name}: {e}"));
                }
            });
        }
        while let Some(done) = set.join_next().await {
            done.expect("a creator");
        }
    }

    /// The bytes of one created Deployment as the apiserver sends it (its
    /// JSON): the whole list is about N times that.
    async fn object_bytes(&self) -> usize {
        let client = client(&self.kubeconfig).await;
        let path = format!(
            "/apis/apps/v1/namespaces/{}/deployments/{PREFIX}00000",
            self.ns
        );
        let request = http::Request::get(path)
            .body(Vec::new())
            .expect("a request");
        let text = tokio::time::timeout(CALL, client.request_text(request))
            .await
            .expect("an answer in time")
            .expect("the Deployment");
        text.len()
    }
}

impl Drop for Scene {
    fn drop(&mut self) {
        let kubeconfig = self.kubeconfig.clone();
        let ns = self.ns.clone();
        // A thread and runtime of its own: drop may run inside a runtime.
        let cleanup = std::thread::spawn(move || {
            let t = Instant::now();
            let work = async {
                let client = client(&kubeconfig).await;
                let d: Api<Deployment> = Api::namespaced(client.clone(), &ns);
                let dp = DeleteParams::default();
                // No controller: the namespace would never empty itself.
                while t.elapsed() < CLEANUP {
                    let _ = d.delete_collection(&dp, &ListParams::default()).await;
                    match d.list_metadata(&ListParams::default().limit(1)).await {
                        Ok(left) if left.items.is_empty() => break,
                        _ => tokio::time::sleep(Duration::from_secs(1)).await,
                    }
                }
                let n: Api<Namespace> = Api::all(client);
                let _ = n.delete(&ns, &dp).await;
            };
            let done =
                runtime().block_on(async { tokio::time::timeout(CLEANUP + CALL, work).await });
            eprintln!(
                "k8s_scale: namespace {ns} {} in {:.1?}",
                if done.is_ok() {
                    "deleted"
                } else {
                    "NOT emptied"
                },
                t.elapsed()
            );
        });
        let _ = cleanup.join();
    }
}

// ------------------------------------------------------------------ the children

/// What one child measured.
#[derive(Debug)]
struct Probe {
    before_kib: u64,
    held_kib: u64,
    peak_kib: u64,
    sync: Duration,
    /// Objects its store holds (lookout: instances at `Connected`).
    objects: usize,
    /// lookout: ids told once as `created` and once as `started`; the
    /// others: `objects`.
    told_once: usize,
    /// lookout: any other item before `Connected` (a second event of an
    /// id, another kind or origin).
    extra: usize,
}

/// The child: one sync in `mode`, then `SCALE before held peak ms objects
/// told extra` on stdout.
fn probe(mode: &str, ns: &str, n: usize) {
    let Some(kubeconfig) = require() else {
        return;
    };
    runtime().block_on(async {
        let client = client(&kubeconfig).await;
        // Connected (TLS and all) before measuring.
        client
            .apiserver_version()
            .await
            .expect("the apiserver answers");
        // Resets VmHWM to the current RSS.
        std::fs::write("/proc/self/clear_refs", "5").expect("clear_refs");
        let before = status_kib("VmRSS:");
        let t = Instant::now();
        let (objects, told_once, extra, keep): (usize, usize, usize, Kept) = match mode {
            "lookout" => {
                let config = K8sConfig::default().namespace(ns).kinds([Kind::Deployment]);
                let watch_config = config.get_watch_config().clone().initial(true);
                let dial = K8sDial::with_client(&config, move || client.clone())
                    .expect("a valid K8sConfig");
                let mut watch = lookout_core::Watch::new(dial, watch_config);
                // Each Deployment's `created` and `started` (1 replica),
                // counted by its number: a compact tally, so that the
                // check holds little.
                let prefix = format!("deployment/{ns}/{PREFIX}");
                let mut told = vec![[0_u8; 2]; n];
                let mut extra = 0;
                let instances = loop {
                    match tokio::time::timeout(SYNC, watch.next()).await {
                        Ok(Some(Item::Status(Status::Connected { instances }))) => {
                            break instances;
                        }
                        Ok(Some(Item::Status(s))) => panic!("lookout: {s:?}"),
                        Ok(Some(Item::Event(e))) if e.origin == Origin::Initial => {
                            let at = match e.kind {
                                EventKind::Created => 0,
                                EventKind::Started => 1,
                                _ => 2,
                            };
                            let slot = e.id.as_str().strip_prefix(&prefix);
                            let slot = slot.and_then(|i| i.parse::<usize>().ok());
                            match slot
                                .and_then(|i| told.get_mut(i))
                                .and_then(|c| c.get_mut(at))
                            {
                                Some(c) => *c = c.saturating_add(1),
                                None => extra += 1,
                            }
                        }
                        Ok(Some(Item::Event(_))) => extra += 1,
                        Ok(None) | Err(_) => panic!("lookout: no initial sync"),
                    }
                };
                let once = told.iter().filter(|c| **c == [1, 1]).count();
                (instances, once, extra, Box::new(watch))
            }
            "reflector" => {
                let api: Api<Deployment> = Api::namespaced(client, ns);
                reflect(watcher(api, watcher::Config::default())).await
            }
            // The reflector as kube-rs' docs advise for memory: each
            // object's `managedFields` dropped before the store.
            "trimmed" => {
                let api: Api<Deployment> = Api::namespaced(client, ns);
                let events = watcher(api, watcher::Config::default())
                    .modify(|d: &mut Deployment| d.metadata.managed_fields = None);
                reflect(events).await
            }
            "metadata" => {
                // kube 5's metadata watch: an `Api` of `PartialObjectMeta`
                // asks for metadata only (its `metadata_watcher` is
                // deprecated for it).
                let api: Api<PartialObjectMeta<Deployment>> = Api::namespaced(client, ns);
                reflect(watcher(api, watcher::Config::default())).await
            }
            other => panic!("--scale-probe: unknown mode {other}"),
        };
        let sync = t.elapsed();
        let held = status_kib("VmRSS:");
        let peak = status_kib("VmHWM:").max(held);
        std::hint::black_box(&keep);
        println!(
            "SCALE {before} {held} {peak} {} {objects} {told_once} {extra}",
            sync.as_millis()
        );
        drop(keep);
    });
}

/// What a child keeps alive while it measures (the consumer and its store).
type Kept = Box<dyn std::any::Any>;

/// A reflector of `events` into a store of its own, polled until the
/// store's first sync (`wait_until_ready`): its objects (as objects, told
/// once, extra), and the reflector and store, to hold while measuring.
async fn reflect<K>(
    events: impl tokio_stream::Stream<Item = watcher::Result<watcher::Event<K>>> + 'static,
) -> (usize, usize, usize, Kept)
where
    K: reflector::Lookup + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone + Default,
{
    let (reader, writer) = reflector::store();
    let mut stream = Box::pin(reflector(writer, events));
    let drive = async {
        while let Some(event) = stream.next().await {
            if let Err(e) = event {
                panic!("reflector: {e}");
            }
        }
        panic!("reflector: the stream ended");
    };
    tokio::select! {
        r = reader.wait_until_ready() => r.expect("the store's writer lives"),
        () = drive => {}
    }
    let len = reader.state().len();
    (len, len, 0, Box::new((reader, stream)))
}

/// Runs `exe` (this bench, or an anchor build of it) as a child in
/// `--scale-probe MODE NS N` and reads its answer.
fn run_child(exe: &Path, mode: &str, ns: &str, n: usize) -> Result<Probe, String> {
    let out = Command::new(exe)
        .args(["--scale-probe", mode, ns, &n.to_string()])
        .output()
        .map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&out.stdout);
    let Some(line) = text.lines().find_map(|l| l.strip_prefix("SCALE ")) else {
        let err = String::from_utf8_lossy(&out.stderr);
        let last = err.lines().rev().find(|l| !l.trim().is_empty());
        return Err(format!(
            "no answer ({}): {}",
            out.status,
            last.unwrap_or("")
        ));
    };
    let f: Vec<u64> = line
        .split_whitespace()
        .filter_map(|x| x.parse().ok())
        .collect();
    let usize_of = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
    match f[..] {
        [before_kib, held_kib, peak_kib, ms, objects, told, extra] => Ok(Probe {
            before_kib,
            held_kib,
            peak_kib,
            sync: Duration::from_millis(ms),
            objects: usize_of(objects),
            told_once: usize_of(told),
            extra: usize_of(extra),
        }),
        _ => Err(format!("unreadable: {line}")),
    }
}

/// `kubectl get deploy -A -o name`: its wall time and how many of the run's
/// Deployments it named (`-o name` names no namespace: the prefix does).
fn kubectl(kubeconfig: &Path) -> Result<(Duration, usize), String> {
    let bin = engines::kubectl_binary()?;
    let t = Instant::now();
    let mut cmd = Command::new(bin);
    cmd.args(["--kubeconfig"])
        .arg(kubeconfig)
        .args(["get", "deploy", "-A", "-o", "name"]);
    // `LOOKOUT_SCALE_KUBECTL_V=6`: kubectl's own log of its requests, on stderr.
    if let Ok(v) = std::env::var("LOOKOUT_SCALE_KUBECTL_V") {
        cmd.arg(format!("-v={v}"));
    }
    let out = cmd.output().map_err(|e| e.to_string())?;
    let wall = t.elapsed();
    if std::env::var_os("LOOKOUT_SCALE_KUBECTL_V").is_some() {
        eprintln!("{}", String::from_utf8_lossy(&out.stderr));
    }
    if !out.status.success() {
        return Err(format!(
            "kubectl failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let mine = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.starts_with(&format!("deployment.apps/{PREFIX}")))
        .count();
    Ok((wall, mine))
}

fn per_object(p: &Probe, n: usize) -> f64 {
    p.held_kib.saturating_sub(p.before_kib) as f64 * 1024.0 / n.max(1) as f64
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(at) = args.iter().position(|a| a == "--scale-probe") {
        let (Some(mode), Some(ns), Some(n)) =
            (args.get(at + 1), args.get(at + 2), args.get(at + 3))
        else {
            panic!("--scale-probe MODE NAMESPACE N");
        };
        probe(mode, ns, n.parse().expect("N, a count"));
        return;
    }
    let full = args.iter().any(|a| a == "--bench");
    if !engines::engines_enabled() {
        println!("skipped: engines not configured");
        eprintln!(
            "({}=1 is not set: run under `cargo xtask` or with `cargo xtask engines env`'s variables)",
            engines::ENV_ENGINES
        );
        return;
    }
    let Some(kubeconfig) = require() else {
        println!("skipped: engines not configured");
        return;
    };
    let n: usize = std::env::var("LOOKOUT_SCALE_N")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(if full { 20_000 } else { 200 });
    let only = std::env::var("LOOKOUT_SCALE_ONLY").ok();
    let runs = |what: &str| {
        only.as_deref()
            .is_none_or(|o| o.split(',').any(|w| w.trim() == what))
    };
    let rt = runtime();
    let scene = rt.block_on(Scene::new(&kubeconfig));
    let t = Instant::now();
    rt.block_on(scene.create(n));
    let created = t.elapsed();
    println!(
        "k8s_scale: {n} Deployments created in {created:.1?} ({:.0}/s) in {}",
        n as f64 / created.as_secs_f64(),
        scene.ns
    );
    let bytes = rt.block_on(scene.object_bytes());
    println!(
        "k8s_scale: one Deployment is {bytes} bytes of JSON: the whole list about {:.1} MiB",
        (bytes * n) as f64 / (1024.0 * 1024.0)
    );

    let me = std::env::current_exe().expect("this bench's path");
    // An anchor build of this bench (the previous code's lookout), run
    // beside this one's.
    let anchor = std::env::var_os("LOOKOUT_SCALE_ANCHOR_BIN").map(PathBuf::from);
    let mut plan: Vec<(&str, &str, &Path)> = vec![("lookout", "lookout", me.as_path())];
    if let Some(anchor) = &anchor {
        plan.push(("anchor", "lookout", anchor.as_path()));
    }
    plan.extend([
        ("reflector", "reflector", me.as_path()),
        ("trimmed", "trimmed", me.as_path()),
        ("metadata", "metadata", me.as_path()),
    ]);
    let mut probes: Vec<(&str, Probe)> = Vec::new();
    let mut failures: Vec<String> = Vec::new();
    for (label, mode, exe) in plan {
        // The anchor runs with lookout's.
        let wanted = runs(label) || (label == "anchor" && runs("lookout"));
        if !wanted {
            continue;
        }
        match run_child(exe, mode, &scene.ns, n) {
            Ok(p) => {
                println!("k8s_scale: {label}: {p:?}");
                if p.objects != n || p.told_once != n || p.extra != 0 {
                    failures.push(format!(
                        "{label}: {} objects, {} told once, {} extra (want {n}, {n}, 0)",
                        p.objects, p.told_once, p.extra
                    ));
                }
                probes.push((label, p));
            }
            Err(e) => failures.push(format!("{label}: {e}")),
        }
    }
    let mut walls = Vec::new();
    if runs("kubectl") {
        for _ in 0..3 {
            match kubectl(&kubeconfig) {
                Ok((wall, named)) if named == n => walls.push(wall),
                Ok((_, named)) => failures.push(format!("kubectl named {named} of {n}")),
                Err(e) => failures.push(e),
            }
        }
        walls.sort();
    }
    let kubectl_wall = walls.get(walls.len() / 2).copied();

    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let load = load
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ");
    println!();
    println!("### Kubernetes at {n} Deployments (load {load})");
    println!();
    println!(
        "| consumer | time to synced | RSS held − before | bytes / object | peak − before | peak − held |"
    );
    println!("|---|---|---|---|---|---|");
    for (mode, p) in &probes {
        let name = match *mode {
            "lookout" => "lookout_k8s::watch (to `Connected`)",
            "anchor" => "the same, anchor build (`LOOKOUT_SCALE_ANCHOR_BIN`)",
            "reflector" => "kube-runtime reflector(watcher), `Deployment`",
            "trimmed" => "the same, `managedFields` dropped (`.modify`)",
            _ => "kube-runtime reflector(metadata watcher), `PartialObjectMeta`",
        };
        println!(
            "| {name} | {:.0} ms | {:.1} MiB | {:.0} B | {:.1} MiB | {:.1} MiB |",
            p.sync.as_secs_f64() * 1000.0,
            mib(p.held_kib.saturating_sub(p.before_kib)),
            per_object(p, n),
            mib(p.peak_kib.saturating_sub(p.before_kib)),
            mib(p.peak_kib.saturating_sub(p.held_kib)),
        );
    }
    if let Some(wall) = kubectl_wall {
        println!(
            "| `kubectl get deploy -A -o name` (median of 3) | {:.0} ms | – | – | – | – |",
            wall.as_secs_f64() * 1000.0
        );
    }
    let of = |m: &str| probes.iter().find(|(k, _)| *k == m).map(|(_, p)| p);
    if let Some(l) = of("lookout") {
        println!();
        let anchors = [
            ("anchor build", of("anchor")),
            ("reflector", of("reflector")),
            ("trimmed reflector", of("trimmed")),
            ("metadata", of("metadata")),
        ];
        for (anchor, p) in anchors {
            if let Some(p) = p {
                println!(
                    "lookout / {anchor}: bytes per object {:.3}×, time to synced {:.2}×, peak growth {:.3}×",
                    per_object(l, n) / per_object(p, n).max(1.0),
                    l.sync.as_secs_f64() / p.sync.as_secs_f64().max(1e-9),
                    l.peak_kib.saturating_sub(l.before_kib) as f64
                        / p.peak_kib.saturating_sub(p.before_kib).max(1) as f64,
                );
            }
        }
        if let Some(wall) = kubectl_wall {
            println!(
                "lookout / kubectl: time to synced {:.2}×",
                l.sync.as_secs_f64() / wall.as_secs_f64()
            );
        }
    }
    drop(scene);
    assert!(failures.is_empty(), "k8s_scale: {failures:#?}");
}
