//! What watching costs the apiserver (issue #15; the `k8s_churn` bench): lookout vs a raw
//! kube-runtime watcher, side by side in this one process, each through a
//! relay of its own (bytes each way, TLS records included) and a client
//! that records every request it sends (verb as the apiserver's metrics name
//! it: a GET of a collection is a LIST, with `watch=true` a WATCH).
//!
//! "One hour of watching, compressed": N Deployments; both consumers list
//! once, then watch with a server-side watch timeout of T seconds (the
//! apiserver ends each watch request after T, as it would after kube's 290 s:
//! 60 s at T = 5 s is about an hour of re-watches); meanwhile a producer
//! scales deployments at a steady pace, both relays cut every open connection
//! a few times (forced reconnects), and once etcd is compacted past both
//! consumers' versions before a cut (one forced `410 Gone`). At the end both
//! must agree with what the producer did.
//!
//! Then peak RSS during the initial sync, each consumer alone in a child
//! process of this bench (so neither inherits the other's heap): paged
//! lists, and streaming lists where the apiserver offers them.

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

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::engines;
use crate::k8s_util::{Fixture, Relay, Requests, apiserver, counting_client, kubeconfig_via};
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use lookout_core::{EventKind, Item, ReconnectPolicy, Status, WatchConfig};
use lookout_k8s::{InitialList, K8sConfig, K8sDial, Kind};
use serde_json::json;
use tokio::sync::{oneshot, watch};
use tokio_stream::StreamExt;

/// Bound of one API call of the producer.
const CALL: Duration = Duration::from_secs(30);
/// Bound of a consumer's first list, and of reaching the final state.
const SETTLE: Duration = Duration::from_secs(180);

/// The sizes of one run.
#[derive(Clone, Copy, Debug)]
pub struct Plan {
    /// Deployments.
    pub n: usize,
    /// Server-side watch timeout, seconds.
    pub timeout_s: u32,
    /// How long the watching lasts (the compressed hour).
    pub duration: Duration,
    /// Forced reconnects (relay cuts), besides the one after the compaction.
    pub cuts: usize,
    /// One scaling every this long.
    pub pace: Duration,
}

impl Plan {
    pub fn new(full: bool) -> Self {
        if full {
            Self {
                n: 10_000,
                timeout_s: 5,
                duration: Duration::from_secs(60),
                cuts: 4,
                pace: Duration::from_millis(50),
            }
        } else {
            Self {
                n: 500,
                timeout_s: 2,
                duration: Duration::from_secs(12),
                cuts: 2,
                pace: Duration::from_millis(100),
            }
        }
    }

    /// LIST requests a consumer needs for one list (500 a page).
    fn pages(&self) -> usize {
        self.n.div_ceil(500).max(1)
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
            Who::Raw => "raw kube-runtime watcher",
            Who::Lookout => "lookout_k8s::watch",
        }
    }
}

/// What a consumer believes: deployments known, of which running.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Belief {
    known: usize,
    running: usize,
    synced: bool,
}

/// One consumer's totals.
#[derive(Debug)]
struct Totals {
    who: Who,
    requests: Requests,
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
    timeout_s: u32,
    requests: Requests,
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
                    Who::Raw => raw(client, &ns, timeout_s, stop, &belief).await,
                    Who::Lookout => lookout(client, &ns, timeout_s, stop, &belief).await,
                }
            })
        })
        .expect("a consumer thread")
}

async fn raw(
    client: kube::Client,
    ns: &str,
    timeout_s: u32,
    mut stop: oneshot::Receiver<()>,
    belief: &watch::Sender<Belief>,
) -> Vec<String> {
    let api: Api<Deployment> = Api::namespaced(client, ns);
    // kube-runtime's defaults (paged lists of 500, bookmarks, the most
    // recent list) and its default backoff, as a program would use it.
    let config = watcher::Config::default().timeout(timeout_s);
    let mut events = Box::pin(watcher::watcher(api, config).default_backoff());
    let mut notes = Vec::new();
    let mut state: HashMap<String, i32> = HashMap::new();
    let mut relist: Option<HashMap<String, i32>> = None;
    let mut synced = false;
    loop {
        let event = tokio::select! {
            _ = &mut stop => break,
            e = events.next() => e,
        };
        match event {
            Some(Ok(watcher::Event::Init)) => relist = Some(HashMap::new()),
            Some(Ok(watcher::Event::InitApply(d))) => {
                relist
                    .get_or_insert_with(HashMap::new)
                    .insert(name_of(&d), replicas_of(&d));
            }
            Some(Ok(watcher::Event::InitDone)) => {
                state = relist.take().unwrap_or_default();
                synced = true;
            }
            Some(Ok(watcher::Event::Apply(d))) => {
                state.insert(name_of(&d), replicas_of(&d));
            }
            Some(Ok(watcher::Event::Delete(d))) => {
                state.remove(&name_of(&d));
            }
            Some(Err(e)) => notes.push(format!("error: {e}")),
            None => {
                notes.push("the watcher ended".to_owned());
                break;
            }
        }
        let running = state.values().filter(|r| **r != 0).count();
        belief.send_replace(Belief {
            known: state.len(),
            running,
            synced,
        });
    }
    notes
}

async fn lookout(
    client: kube::Client,
    ns: &str,
    timeout_s: u32,
    mut stop: oneshot::Receiver<()>,
    belief: &watch::Sender<Belief>,
) -> Vec<String> {
    let config = K8sConfig::default()
        .namespace(ns)
        .kinds([Kind::Deployment])
        .watch_config(watch_config(timeout_s).initial(true));
    let mut watch =
        lookout_k8s::watch_with_client(config, move || client.clone()).expect("a valid K8sConfig");
    let mut notes = Vec::new();
    let mut running: HashMap<String, bool> = HashMap::new();
    let mut synced = false;
    loop {
        let item = tokio::select! {
            _ = &mut stop => break,
            i = watch.next() => i,
        };
        match item {
            Some(Item::Event(e)) => {
                let id = e.id.as_str().to_owned();
                match e.kind {
                    EventKind::Created | EventKind::Stopped => {
                        running.insert(id, false);
                    }
                    EventKind::Started => {
                        running.insert(id, true);
                    }
                    EventKind::Removed => {
                        running.remove(&id);
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
        belief.send_replace(Belief {
            known: running.len(),
            running: running.values().filter(|r| **r).count(),
            synced,
        });
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

/// Creates `names` with 0 replicas, 32 at a time.
async fn create_all(api: &Api<Deployment>, names: &[String], run: &str) {
    let mut set = tokio::task::JoinSet::new();
    for w in 0..32.min(names.len()) {
        let api = api.clone();
        let mine: Vec<String> = names.iter().skip(w).step_by(32).cloned().collect();
        let run = run.to_owned();
        set.spawn(async move {
            for name in mine {
                let d: Deployment = serde_json::from_value(json!({
                    "metadata": { "name": name, "labels": { "lookout-e2e-run": run, "app": name } },
                    "spec": {
                        "replicas": 0,
                        "selector": { "matchLabels": { "app": name } },
                        "template": {
                            "metadata": { "labels": { "app": name } },
                            "spec": { "containers": [{ "name": "main", "image": "busybox" }] }
                        }
                    }
                }))
                .expect("a deployment");
                tokio::time::timeout(CALL, api.create(&PostParams::default(), &d))
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

/// Scales one deployment after another (1, then 0 on the next pass…), one
/// every `pace`, for `span`; `truth` keeps each one's replicas.
async fn produce(
    api: &Api<Deployment>,
    names: &[String],
    truth: &mut HashMap<String, i32>,
    next: &mut usize,
    span: Duration,
    pace: Duration,
) {
    let end = tokio::time::Instant::now() + span;
    let mut tick = tokio::time::interval(pace);
    let pp = PatchParams::default();
    while tokio::time::Instant::now() < end {
        tick.tick().await;
        let name = &names[*next % names.len()];
        *next += 1;
        let replicas = i32::from(truth.get(name).copied().unwrap_or(0) == 0);
        let patch = Patch::Merge(json!({ "spec": { "replicas": replicas } }));
        tokio::time::timeout(CALL, api.patch(name, &pp, &patch))
            .await
            .unwrap_or_else(|_| panic!("patch {name}: no answer within {CALL:?}"))
            .unwrap_or_else(|e| panic!("patch {name}: {e}"));
        truth.insert(name.clone(), replicas);
    }
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

/// Which targets a run met.
#[derive(Clone, Copy, Debug)]
pub struct Met {
    /// As many LISTs served as the raw watcher, 1 + one per 410.
    pub lists: bool,
    /// ≤ 1.05× the raw watcher's bytes from the apiserver.
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
    // Compacting etcd breaks every watcher on the testbed: exclusive.
    let _lock = engines::lock_engine("k8s", true).expect("the k8s engine lock");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let fx = rt.block_on(Fixture::new(kubeconfig));
    let names: Vec<String> = (0..plan.n).map(|i| format!("d-{i}")).collect();
    let api: Api<Deployment> =
        rt.block_on(async { Api::namespaced(crate::k8s_util::client(kubeconfig).await, &fx.ns) });
    let t = Instant::now();
    rt.block_on(create_all(&api, &names, &fx.run));
    eprintln!(
        "cost: {} deployments created in {:.1?}",
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
        let requests = Requests::default();
        let (stop, stopped) = oneshot::channel();
        let (belief, rx) = watch::channel(Belief::default());
        threads.push((
            who,
            consumer(
                who,
                relayed.path().to_path_buf(),
                fx.ns.clone(),
                plan.timeout_s,
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
    let mut truth: HashMap<String, i32> = names.iter().map(|n| (n.clone(), 0)).collect();
    let want = |truth: &HashMap<String, i32>| Belief {
        known: truth.len(),
        running: truth.values().filter(|r| **r != 0).count(),
        synced: true,
    };
    rt.block_on(settle(&mut beliefs, want(&truth), "first list"));
    eprintln!("cost: both listed ({:.1?})", t.elapsed());

    // The compressed hour: production in slices, a cut between slices, and
    // the compaction in the middle.
    let slices = plan.cuts + 2;
    let slice = plan.duration / u32::try_from(slices).unwrap_or(1);
    let mut next = 0;
    for s in 0..slices {
        rt.block_on(produce(
            &api, &names, &mut truth, &mut next, slice, plan.pace,
        ));
        if s == slices / 2 {
            // Both have seen everything; move etcd on past their versions,
            // compact it, and cut: both resume from a compacted version.
            rt.block_on(settle(&mut beliefs, want(&truth), "before the compaction"));
            rt.block_on(fx.bump(&format!("bump-{s}")));
            let rev = engines::k8s_compact().unwrap_or_else(|e| panic!("{e}"));
            eprintln!("cost: compacted etcd at revision {rev}; cutting");
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
    let watched = t.elapsed();
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

    // Peak RSS during the initial sync, each in a child process.
    let mut rss = HashMap::new();
    for mode in ["raw", "lookout", "raw-streaming", "lookout-streaming"] {
        rss.insert(mode, rss_child(mode, &fx.ns));
    }
    drop(api);
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
        "k8s apiserver cost: {} deployments, watch timeout {} s, {:.0?} of watching ({changes} scalings, \
         {} forced reconnects, one compaction → 410), real kube-apiserver ({})",
        plan.n,
        plan.timeout_s,
        watched,
        plan.cuts + 1,
        std::env::var("LOOKOUT_K8S_VERSION").unwrap_or_else(|_| "version unknown".to_owned())
    ));
    out.push("| consumer | LIST (answered) | WATCH (answered) | other requests | bytes from the apiserver | bytes to it | notes |".to_owned());
    out.push("|---|---|---|---|---|---|---|".to_owned());
    for t in &totals {
        let all = t.requests.all();
        let other: Vec<String> = {
            let mut by: std::collections::BTreeMap<String, usize> =
                std::collections::BTreeMap::new();
            for s in all.iter().filter(|s| s.verb != "LIST" && s.verb != "WATCH") {
                *by.entry(format!("{} {}", s.verb, s.resource)).or_default() += 1;
            }
            by.iter().map(|(k, n)| format!("{k} ×{n}")).collect()
        };
        out.push(format!(
            "| {} | {} ({}) | {} ({}) | {} | {} | {} | {} |",
            t.who.name(),
            t.requests.count("LIST", None),
            t.requests.answered("LIST"),
            t.requests.count("WATCH", None),
            t.requests.answered("WATCH"),
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
    let want_lists = plan.pages() * 2;
    let (raw_lists, lo_lists) = (
        raw.requests.count("LIST", None),
        lo.requests.count("LIST", None),
    );
    let bytes = lo.bytes_down as f64 / raw.bytes_down.max(1) as f64;
    let lists_ok = lo_lists == raw_lists && lo_lists == want_lists;
    let bytes_ok = bytes <= 1.05;
    met.lists = lists_ok;
    met.bytes = bytes_ok;
    out.push(format!(
        "LISTs served: lookout {lo_lists}, raw {raw_lists}; target: the same, {} pages × (1 + one 410) = {want_lists}: {}",
        plan.pages(),
        if lists_ok { "met" } else { "NOT met" }
    ));
    out.push(format!(
        "bytes from the apiserver, lookout / raw: {bytes:.3}×; target ≤ 1.05×: {}",
        if bytes_ok { "met" } else { "NOT met" }
    ));
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
    for t in &totals {
        for note in t.notes.iter().take(8) {
            out.push(format!("  {}: {note}", t.who.name()));
        }
    }
    out.push(format!("(wall {:.1?})", wall.elapsed()));
    (out, met)
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
    let kubeconfig = crate::k8s_util::require();
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
