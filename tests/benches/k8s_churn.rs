#![allow(
    clippy::cast_precision_loss,
    clippy::print_stdout,
    clippy::print_stderr,
    clippy::too_many_lines
)]
//! Kubernetes churn: how fast `lookout_k8s::watch` keeps up with a real
//! kube-apiserver, against a raw `kube::runtime::watcher` on the same churn.
//!
//! On the testbed (`cargo xtask engines up k8s`; kubeconfig from the engines'
//! env), in a namespace of its own (deleted at the end, also on panic): N
//! deployments created with 0 replicas, then, per round, every deployment
//! scaled S times, alternating 1, 0, 1, 0… (S is even: each round ends where
//! it began). The testbed runs no controller, so each scaling is exactly one
//! MODIFIED watch event and, as it flips `spec.replicas` between 0 and not 0,
//! exactly one lookout transition (`started`/`stopped`): both consumers must
//! see the same E = N × S changes, and end on the same state (all at 0).
//!
//! The producer is K concurrent patchers (merge patches of `spec.replicas`);
//! each deployment's scalings are sequential, so its final state is certain.
//!
//! Consumers, side by side in this one process on the same churn, each on a
//! thread and a current-thread runtime of its own (its kube client, TLS
//! connection and decoding included), both started and listed before the
//! first patch (start order alternates by round):
//! - raw `kube::runtime::watcher(Api<Deployment>, Config::default())`: typed
//!   objects; counts `Apply` events after `InitDone`;
//! - `lookout_k8s::watch` (Deployments of the namespace, default
//!   `WatchConfig` without periodic resync): counts emitted `InstanceEvent`s.
//!
//! Measured per round, from the first patch (t0): the time at which each
//! consumer has observed the last of the E changes (events/s = E / that
//! time; the producer's rate is the apiserver's, so this is bounded by it),
//! its lag after the last patch was acknowledged, and the CPU time its
//! thread used per change (`/proc/thread-self/schedstat`), which is what
//! bounds a consumer's throughput when the apiserver is not the limit.
//! Medians of R rounds.
//!
//! `cargo bench -p lookout-e2e --bench k8s_churn`: N = 50, S = 40, R = 5.
//! Without `--bench` (as `cargo test --benches` runs it): N = 2, S = 4, R = 1.
//! Without `LOOKOUT_ENGINES=1`: prints "skipped: engines not configured".
//!
//! Before the churn, what watching costs the apiserver (`lookout_e2e::k8s_cost`),
//! two plans: `Deployment`s (issue #15), then `Deployment`s, `DaemonSet`s and a
//! custom resource (issue #35). `LOOKOUT_BENCH_COST=deployments|kinds` runs
//! one of them; `LOOKOUT_BENCH_SKIP_COST=1` neither, `LOOKOUT_BENCH_ONLY_COST=1`
//! no churn.

use lookout_e2e::k8s_cost as cost;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::watcher;
use lookout_core::{EventKind, Item, Status};
use lookout_e2e::engines;
use lookout_e2e::k8s_util::{Fixture, client, require};
use lookout_k8s::{K8sConfig, Kind};
use serde_json::json;
use tokio::time::error::Elapsed;
use tokio_stream::StreamExt;

/// At most this many patches in flight.
const PATCHERS: usize = 8;
/// Bound of one patch.
const CALL: Duration = Duration::from_secs(20);
/// Bound of a consumer's first list.
const LISTED: Duration = Duration::from_secs(60);

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Who {
    Raw,
    Lookout,
}

impl Who {
    fn name(self) -> &'static str {
        match self {
            Who::Raw => "raw kube watcher",
            Who::Lookout => "lookout_k8s::watch",
        }
    }
}

/// What one consumer saw in one round.
#[derive(Debug)]
struct Seen {
    who: Who,
    /// Changes counted (raw: `Apply` events; lookout: `InstanceEvent`s).
    changes: usize,
    /// When the last expected change was observed.
    last: Option<Instant>,
    /// CPU time of the consumer's thread from listed to the last change.
    cpu: Option<Duration>,
    /// Deployments (by name) whose last observed state is not 0 replicas.
    running_at_end: usize,
    /// Anything unexpected (disconnects, other events).
    notes: Vec<String>,
}

/// CPU time of the calling thread so far (`/proc/thread-self/schedstat`,
/// nanoseconds on CPU).
fn thread_cpu() -> Option<Duration> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns: u64 = text.split_whitespace().next()?.parse().ok()?;
    Some(Duration::from_nanos(ns))
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

/// Starts one consumer on its own thread; it sends its `Who` on `ready` once
/// listed, then counts `expected` changes (bounded by `bound`).
fn consumer(
    who: Who,
    kubeconfig: PathBuf,
    ns: String,
    expected: usize,
    bound: Duration,
    ready: mpsc::Sender<Who>,
) -> JoinHandle<Seen> {
    std::thread::Builder::new()
        .name(format!("{who:?}"))
        .spawn(move || {
            let rt = runtime();
            rt.block_on(async move {
                match who {
                    Who::Raw => raw(&kubeconfig, &ns, expected, bound, &ready).await,
                    Who::Lookout => lookout(&kubeconfig, &ns, expected, bound, &ready).await,
                }
            })
        })
        .expect("a consumer thread")
}

async fn raw(
    kubeconfig: &Path,
    ns: &str,
    expected: usize,
    bound: Duration,
    ready: &mpsc::Sender<Who>,
) -> Seen {
    let api: Api<Deployment> = Api::namespaced(client(kubeconfig).await, ns);
    let mut events = Box::pin(watcher::watcher(api, watcher::Config::default()));
    let mut seen = Seen {
        who: Who::Raw,
        changes: 0,
        last: None,
        cpu: None,
        running_at_end: 0,
        notes: Vec::new(),
    };
    let mut replicas: HashMap<String, i32> = HashMap::new();
    let listed = tokio::time::Instant::now() + LISTED;
    loop {
        match tokio::time::timeout_at(listed, events.next()).await {
            Ok(Some(Ok(watcher::Event::InitApply(d)))) => {
                replicas.insert(name_of(&d), replicas_of(&d));
            }
            Ok(Some(Ok(watcher::Event::InitDone))) => break,
            Ok(Some(Ok(_))) => {}
            Ok(Some(Err(e))) => seen.notes.push(format!("list: {e}")),
            Ok(None) => panic!("raw watcher ended before its first list"),
            Err(Elapsed { .. }) => panic!("raw watcher: no first list within {LISTED:?}"),
        }
    }
    let _ = ready.send(Who::Raw);
    let cpu0 = thread_cpu();
    let deadline = tokio::time::Instant::now() + bound;
    while seen.changes < expected {
        match tokio::time::timeout_at(deadline, events.next()).await {
            Ok(Some(Ok(watcher::Event::Apply(d)))) => {
                seen.changes += 1;
                seen.last = Some(Instant::now());
                replicas.insert(name_of(&d), replicas_of(&d));
            }
            Ok(Some(Ok(other))) => seen.notes.push(format!("unexpected {other:?}")),
            Ok(Some(Err(e))) => seen.notes.push(format!("watch error: {e}")),
            Ok(None) => {
                seen.notes.push("the watcher ended".to_owned());
                break;
            }
            Err(Elapsed { .. }) => {
                seen.notes.push(format!("timed out after {bound:?}"));
                break;
            }
        }
    }
    seen.cpu = cpu0.zip(thread_cpu()).map(|(a, b)| b.saturating_sub(a));
    seen.running_at_end = replicas.values().filter(|r| **r != 0).count();
    seen
}

fn name_of(d: &Deployment) -> String {
    d.metadata.name.clone().unwrap_or_default()
}

fn replicas_of(d: &Deployment) -> i32 {
    d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
}

async fn lookout(
    kubeconfig: &Path,
    ns: &str,
    expected: usize,
    bound: Duration,
    ready: &mpsc::Sender<Who>,
) -> Seen {
    let config = K8sConfig::default()
        .kubeconfig(kubeconfig)
        .namespace(ns)
        .kinds([Kind::Deployment])
        .watch_config(K8sConfig::default_watch());
    let mut watch = lookout_k8s::watch(config).expect("a valid K8sConfig");
    let mut seen = Seen {
        who: Who::Lookout,
        changes: 0,
        last: None,
        cpu: None,
        running_at_end: 0,
        notes: Vec::new(),
    };
    let listed = tokio::time::Instant::now() + LISTED;
    loop {
        match tokio::time::timeout_at(listed, watch.next()).await {
            Ok(Some(Item::Status(Status::Connected { .. }))) => break,
            Ok(Some(Item::Status(s))) => seen.notes.push(format!("{s:?}")),
            Ok(Some(Item::Event(e))) => seen.notes.push(format!("early {} {}", e.id, e.kind)),
            Ok(None) => panic!("lookout's watch ended"),
            Err(Elapsed { .. }) => panic!("lookout: not connected within {LISTED:?}"),
        }
    }
    let _ = ready.send(Who::Lookout);
    let cpu0 = thread_cpu();
    let mut last_kind: HashMap<String, EventKind> = HashMap::new();
    let deadline = tokio::time::Instant::now() + bound;
    while seen.changes < expected {
        match tokio::time::timeout_at(deadline, watch.next()).await {
            Ok(Some(Item::Event(e))) => {
                seen.changes += 1;
                seen.last = Some(Instant::now());
                last_kind.insert(e.id.as_str().to_owned(), e.kind);
            }
            Ok(Some(Item::Status(s))) => seen.notes.push(format!("{s:?}")),
            Ok(None) => {
                seen.notes.push("the watch ended".to_owned());
                break;
            }
            Err(Elapsed { .. }) => {
                seen.notes.push(format!("timed out after {bound:?}"));
                break;
            }
        }
    }
    seen.cpu = cpu0.zip(thread_cpu()).map(|(a, b)| b.saturating_sub(a));
    seen.running_at_end = last_kind
        .values()
        .filter(|k| **k != EventKind::Stopped)
        .count();
    seen
}

/// Scales every deployment `scales` times (1, 0, 1, …), `PATCHERS` at a time,
/// each deployment's scalings in order. Returns when the last is acknowledged.
async fn churn(api: &Api<Deployment>, names: &[String], scales: usize) -> Instant {
    let mut set = tokio::task::JoinSet::new();
    for w in 0..PATCHERS.min(names.len()) {
        let api = api.clone();
        let mine: Vec<String> = names.iter().skip(w).step_by(PATCHERS).cloned().collect();
        set.spawn(async move {
            let pp = PatchParams::default();
            for s in 0..scales {
                let replicas = i32::from(s % 2 == 0);
                let patch = Patch::Merge(json!({ "spec": { "replicas": replicas } }));
                for name in &mine {
                    tokio::time::timeout(CALL, api.patch(name, &pp, &patch))
                        .await
                        .unwrap_or_else(|_| panic!("patch {name}: no answer within {CALL:?}"))
                        .unwrap_or_else(|e| panic!("patch {name} to {replicas}: {e}"));
                }
            }
        });
    }
    while let Some(done) = set.join_next().await {
        done.expect("a patcher");
    }
    Instant::now()
}

/// `a − b` in ms, negative when `a` came first (a consumer may see the last
/// change before the patch's own response arrives).
fn signed_ms(a: Instant, b: Instant) -> f64 {
    if a >= b {
        (a - b).as_secs_f64() * 1e3
    } else {
        -((b - a).as_secs_f64() * 1e3)
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(at) = args.iter().position(|a| a == "--rss-probe") {
        let (Some(mode), Some(ns)) = (args.get(at + 1), args.get(at + 2)) else {
            panic!("--rss-probe MODE NAMESPACE");
        };
        cost::rss_probe(mode, ns);
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
    if std::env::var_os("LOOKOUT_BENCH_SKIP_COST").is_none() {
        let Some(kubeconfig) = require() else { return };
        // LOOKOUT_BENCH_COST=deployments|kinds: only that plan.
        let only = std::env::var("LOOKOUT_BENCH_COST").ok();
        let plans = [
            ("deployments", cost::Plan::new(full)),
            ("kinds", cost::Plan::kinds(full)),
        ];
        for (name, plan) in plans {
            if only.as_deref().is_some_and(|o| o != name) {
                continue;
            }
            let (lines, met) = cost::run(plan, &kubeconfig);
            for line in &lines {
                println!("{line}");
            }
            eprintln!("cost ({name}): targets met: {met:?}");
            // The LIST count is exact (per kind, pages × (1 + one per 410));
            // bytes and RSS move with the machine: reported, not asserted.
            assert!(
                met.lists,
                "lookout must LIST as often as the raw watchers: per kind, 1 + one per 410"
            );
        }
    }
    if std::env::var_os("LOOKOUT_BENCH_ONLY_COST").is_some() {
        return;
    }
    let (n, scales, rounds) = if full { (50, 40, 5) } else { (2, 4, 1) };
    let expected = n * scales;
    let bound = Duration::from_secs(if full { 300 } else { 60 });
    let wall = Instant::now();
    let _lock = engines::lock_engine("k8s", false).expect("the k8s engine lock");
    let Some(kubeconfig) = require() else { return };
    let rt = runtime();
    let fx = rt.block_on(Fixture::new(&kubeconfig));
    let names: Vec<String> = (0..n).map(|i| format!("churn-{i}")).collect();
    rt.block_on(async {
        for name in &names {
            fx.create(Kind::Deployment, name, 0, &[]).await;
        }
    });
    let api: Api<Deployment> =
        rt.block_on(async { Api::namespaced(client(&kubeconfig).await, &fx.ns) });

    // Per round: producer rate, then (raw, lookout) events/s, lag, CPU/change.
    let mut patch_rate = Vec::new();
    let mut rate: HashMap<Who, Vec<f64>> = HashMap::new();
    let mut lag: HashMap<Who, Vec<f64>> = HashMap::new();
    let mut cpu: HashMap<Who, Vec<f64>> = HashMap::new();
    let mut ratios = Vec::new();
    let mut failures = Vec::new();
    for round in 0..rounds {
        let order = if round % 2 == 0 {
            [Who::Raw, Who::Lookout]
        } else {
            [Who::Lookout, Who::Raw]
        };
        let (tx, rx) = mpsc::channel();
        let handles: Vec<JoinHandle<Seen>> = order
            .iter()
            .map(|who| {
                let h = consumer(
                    *who,
                    kubeconfig.clone(),
                    fx.ns.clone(),
                    expected,
                    bound,
                    tx.clone(),
                );
                // Listed in this order too: the first is up before the second starts.
                let got = rx
                    .recv_timeout(LISTED + Duration::from_secs(5))
                    .expect("a consumer listed in time");
                assert_eq!(got, *who);
                h
            })
            .collect();
        let t0 = Instant::now();
        let acked = rt.block_on(churn(&api, &names, scales));
        let producer = acked - t0;
        patch_rate.push(expected as f64 / producer.as_secs_f64());
        let mut round_rate = HashMap::new();
        for h in handles {
            let seen = h.join().expect("a consumer thread");
            let ok = seen.changes == expected && seen.running_at_end == 0;
            if !ok || !seen.notes.is_empty() {
                failures.push(format!(
                    "round {round}: {}: {} of {expected} changes, {} running at the end, notes: {:?}",
                    seen.who.name(),
                    seen.changes,
                    seen.running_at_end,
                    seen.notes
                ));
            }
            let Some(last) = seen.last.filter(|_| ok) else {
                continue;
            };
            let r = expected as f64 / (last - t0).as_secs_f64();
            round_rate.insert(seen.who, r);
            rate.entry(seen.who).or_default().push(r);
            lag.entry(seen.who)
                .or_default()
                .push(signed_ms(last, acked));
            if let Some(c) = seen.cpu {
                cpu.entry(seen.who)
                    .or_default()
                    .push(c.as_secs_f64() * 1e6 / expected as f64);
            }
        }
        if let (Some(l), Some(r)) = (round_rate.get(&Who::Lookout), round_rate.get(&Who::Raw)) {
            ratios.push(l / r);
        }
        eprintln!(
            "round {round}: producer {:.0}/s, raw {:.0}/s, lookout {:.0}/s",
            expected as f64 / producer.as_secs_f64(),
            round_rate.get(&Who::Raw).copied().unwrap_or(f64::NAN),
            round_rate.get(&Who::Lookout).copied().unwrap_or(f64::NAN),
        );
    }
    drop(api);
    drop(fx); // deletes the deployments and the namespace
    drop(rt);

    println!(
        "k8s churn: {n} deployments × {scales} scalings (0↔1) = {expected} changes per round, \
         {PATCHERS} concurrent patchers, real kube-apiserver ({}), median of {rounds} round(s)",
        std::env::var("LOOKOUT_K8S_VERSION").unwrap_or_else(|_| "version unknown".to_owned())
    );
    println!(
        "| consumer | changes seen | events/s (E / time to last change) | lag after last patch ack (median; < 0: seen before the ack) | CPU per change (consumer thread) | vs raw |"
    );
    println!("|---|---|---|---|---|---|");
    let patched = median(&mut patch_rate);
    println!("| apiserver: patches acknowledged | {expected} | {patched:.0} | – | – | |");
    let raw_rate = rate.get_mut(&Who::Raw).map(|v| median(v));
    let raw_cpu = cpu.get_mut(&Who::Raw).map(|v| median(v));
    for who in [Who::Raw, Who::Lookout] {
        let (Some(events_s), Some(lag_ms)) = (
            rate.get_mut(&who).map(|v| median(v)),
            lag.get_mut(&who).map(|v| median(v)),
        ) else {
            println!("| {} | – | failed | – | – | |", who.name());
            continue;
        };
        let cpu_us = cpu.get_mut(&who).map(|v| median(v));
        let vs = raw_rate.map_or(f64::NAN, |raw| events_s / raw);
        println!(
            "| {} | {expected} | {events_s:.0} | {lag_ms:.1} ms | {} | {vs:.2}× |",
            who.name(),
            cpu_us.map_or_else(|| "n/a".to_owned(), |c| format!("{c:.1} µs")),
        );
    }
    if !ratios.is_empty() {
        let per_round = ratios.iter().map(|r| format!("{r:.3}")).collect::<Vec<_>>();
        println!(
            "lookout / raw events/s: median {:.3}× (per round: {}); target ≥ 0.90×",
            median(&mut ratios),
            per_round.join(", ")
        );
    }
    if let (Some(rc), Some(lc)) = (raw_cpu, cpu.get_mut(&Who::Lookout).map(|v| median(v))) {
        println!(
            "CPU per change, lookout / raw: {:.2}× (consumer capacity ratio raw/lookout: {:.2}×)",
            lc / rc,
            rc / lc
        );
    }
    println!("(wall {:.1?})", wall.elapsed());
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
