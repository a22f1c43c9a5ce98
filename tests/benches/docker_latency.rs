#![allow(
    clippy::cast_precision_loss,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    clippy::print_stdout,
    clippy::print_stderr,
    clippy::too_many_lines
)]
//! End-to-end latency on a real dockerd: from the engine's timestamp of an
//! event (`timeNano`, which lookout passes on as `InstanceEvent::at` for live
//! events) to the moment the consumer holds it.
//!
//! L lifecycles of the test image (`lookout-test/busybox`, `sleep 3600`,
//! network `none`), one after the other, driven through the engine API
//! (bollard) from a thread of their own: create, start, stop (`t=0`: SIGKILL
//! at once), remove. Every container carries a label of this run; both
//! consumers filter on it. They run side by side in this one process, each
//! on a thread and a current-thread runtime of its own, on the same events:
//! - `lookout_docker::watch` (default `WatchConfig`): each emitted
//!   `InstanceEvent` (`created`, `started`, `stopped` = `die`, `removed` =
//!   `destroy`), latency = local receive time − `at`;
//! - raw bollard `Docker::events` with the same server-side filters lookout
//!   uses (`type=container`, those four actions, the label): each decoded
//!   `EventMessage`, latency = local receive time − `time_nano`.
//!
//! Both clocks are this machine's realtime clock (dockerd runs here). A
//! warm-up lifecycle, seen by both before the measured ones start, makes sure
//! both are subscribed (the raw one asks with `since`, so it cannot miss it).
//! Reported: p50 / p99 / max per transition kind and consumer, and per event
//! lookout's receive time − raw's (what lookout adds on the same event).
//! Containers are removed at the end, also on panic.
//!
//! `cargo bench -p lookout-e2e --bench docker_latency`: L = 500. Without
//! `--bench` (as `cargo test --benches` runs it): L = 10. Without
//! `LOOKOUT_ENGINES=1`: prints "skipped: engines not configured".

use std::collections::HashMap;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bollard::Docker;
use bollard::query_parameters::EventsOptionsBuilder;
use lookout_core::{EventKind, Item, Status};
use lookout_docker::DockerConfig;
use lookout_e2e::engines;

use lookout_e2e::bench_docker::{Cleanup, LABEL, lifecycle, pct};
use tokio::time::error::Elapsed;
use tokio_stream::StreamExt;

/// Bound of a consumer's subscription.
const SUBSCRIBED: Duration = Duration::from_secs(60);
/// How long consumers may lag behind the driver's last call.
const GRACE: Duration = Duration::from_secs(30);

const KINDS: [EventKind; 4] = [
    EventKind::Created,
    EventKind::Started,
    EventKind::Stopped,
    EventKind::Removed,
];

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Who {
    Raw,
    Lookout,
}

impl Who {
    fn name(self) -> &'static str {
        match self {
            Who::Raw => "raw bollard `Docker::events`",
            Who::Lookout => "`lookout_docker::watch`",
        }
    }
}

/// One event as a consumer received it.
#[derive(Clone, Debug)]
struct Got {
    name: String,
    kind: EventKind,
    /// The engine's time of the event, ns since the epoch.
    engine_ns: i128,
    /// The local time at which the consumer held it, ns since the epoch.
    recv_ns: i128,
}

#[derive(Debug)]
struct Seen {
    who: Who,
    events: Vec<Got>,
    /// lookout: `Connected` statuses after the first (periodic relists).
    relists: usize,
    /// Anything unexpected (a failure).
    notes: Vec<String>,
}

/// `t` in ns since the epoch (0 before it).
fn unix_ns(t: SystemTime) -> i128 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| i128::try_from(d.as_nanos()).unwrap_or(0))
}

fn now_ns() -> i128 {
    unix_ns(SystemTime::now())
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

fn socket_path(host: &str) -> String {
    host.strip_prefix("unix://")
        .unwrap_or_else(|| panic!("this bench talks to a unix:// docker host, not {host}"))
        .to_owned()
}

/// Starts one consumer; it sends its `Who` on `ready` once subscribed, then
/// collects events until it has `removed` of `names` (as many as given),
/// or `stop` fires and `GRACE` has passed.
fn consumer(
    who: Who,
    host: String,
    tag: String,
    expected_removed: usize,
    ready: mpsc::Sender<Who>,
    stop: tokio::sync::watch::Receiver<bool>,
) -> JoinHandle<Seen> {
    std::thread::Builder::new()
        .name(format!("{who:?}"))
        .spawn(move || {
            runtime().block_on(async move {
                match who {
                    Who::Raw => raw(&host, &tag, expected_removed, &ready, stop).await,
                    Who::Lookout => lookout(&host, &tag, expected_removed, &ready, stop).await,
                }
            })
        })
        .expect("a consumer thread")
}

/// Waits for `stop`, then `GRACE`.
async fn stopped(mut stop: tokio::sync::watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
    tokio::time::sleep(GRACE).await;
}

async fn lookout(
    host: &str,
    tag: &str,
    expected_removed: usize,
    ready: &mpsc::Sender<Who>,
    stop: tokio::sync::watch::Receiver<bool>,
) -> Seen {
    let config = DockerConfig::default().host(host).label(LABEL, tag);
    let mut watch = lookout_docker::watch(config).expect("a valid DockerConfig");
    let mut seen = Seen {
        who: Who::Lookout,
        events: Vec::new(),
        relists: 0,
        notes: Vec::new(),
    };
    let deadline = tokio::time::Instant::now() + SUBSCRIBED;
    loop {
        match tokio::time::timeout_at(deadline, watch.next()).await {
            Ok(Some(Item::Status(Status::Connected { .. }))) => break,
            Ok(Some(other)) => seen.notes.push(format!("before connecting: {other:?}")),
            Ok(None) => panic!("lookout's watch ended"),
            Err(Elapsed { .. }) => panic!("lookout: not connected within {SUBSCRIBED:?}"),
        }
    }
    let _ = ready.send(Who::Lookout);
    let give_up = stopped(stop);
    tokio::pin!(give_up);
    let mut removed = 0;
    while removed < expected_removed {
        tokio::select! {
            item = watch.next() => match item {
                // `docker stop`'s request (its `kill`): not one of the four
                // transitions both consumers are timed on.
                Some(Item::Event(e)) if e.kind == EventKind::Stopping => {}
                Some(Item::Event(e)) => {
                    let recv_ns = now_ns();
                    let engine_ns = unix_ns(e.at);
                    if e.kind == EventKind::Removed {
                        removed += 1;
                    }
                    if e.origin != lookout_core::Origin::Live {
                        seen.notes.push(format!("{} {} came {}", e.id, e.kind, e.origin));
                    }
                    seen.events.push(Got {
                        name: e.id.as_str().to_owned(),
                        kind: e.kind,
                        engine_ns,
                        recv_ns,
                    });
                }
                // The default `WatchConfig` relists every 5 min: a long run
                // sees it (counted, reported; not a failure).
                Some(Item::Status(Status::Connected { .. })) => seen.relists += 1,
                Some(Item::Status(s)) => seen.notes.push(format!("{s:?}")),
                None => {
                    seen.notes.push("the watch ended".to_owned());
                    break;
                }
            },
            () = &mut give_up => {
                seen.notes.push(format!("gave up {GRACE:?} after the last lifecycle"));
                break;
            }
        }
    }
    seen
}

fn filters(tag: &str) -> HashMap<&'static str, Vec<String>> {
    HashMap::from([
        ("type", vec!["container".to_owned()]),
        (
            "event",
            ["create", "start", "die", "destroy"]
                .map(str::to_owned)
                .to_vec(),
        ),
        ("label", vec![format!("{LABEL}={tag}")]),
    ])
}

async fn raw(
    host: &str,
    tag: &str,
    expected_removed: usize,
    ready: &mpsc::Sender<Who>,
    stop: tokio::sync::watch::Receiver<bool>,
) -> Seen {
    let docker = Docker::connect_with_unix(&socket_path(host), 120, bollard::API_DEFAULT_VERSION)
        .expect("a bollard client");
    // Subscribed "from now": the engine replays anything since, so the
    // warm-up cannot be missed whenever the request actually lands.
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
        .saturating_sub(1)
        .to_string();
    let options = EventsOptionsBuilder::new()
        .since(&since)
        .filters(&filters(tag))
        .build();
    let mut events = Box::pin(docker.events(Some(options)));
    let mut seen = Seen {
        who: Who::Raw,
        events: Vec::new(),
        relists: 0,
        notes: Vec::new(),
    };
    let _ = ready.send(Who::Raw);
    let give_up = stopped(stop);
    tokio::pin!(give_up);
    let mut removed = 0;
    while removed < expected_removed {
        tokio::select! {
            item = events.next() => match item {
                Some(Ok(m)) => {
                    let recv_ns = now_ns();
                    let kind = match m.action.as_deref() {
                        Some("create") => EventKind::Created,
                        Some("start") => EventKind::Started,
                        Some("die") => EventKind::Stopped,
                        Some("destroy") => EventKind::Removed,
                        other => {
                            seen.notes.push(format!("unexpected action {other:?}"));
                            continue;
                        }
                    };
                    if kind == EventKind::Removed {
                        removed += 1;
                    }
                    let name = m
                        .actor
                        .as_ref()
                        .and_then(|a| a.attributes.as_ref())
                        .and_then(|a| a.get("name"))
                        .cloned()
                        .unwrap_or_default();
                    seen.events.push(Got {
                        name,
                        kind,
                        engine_ns: i128::from(m.time_nano.unwrap_or(0)),
                        recv_ns,
                    });
                }
                Some(Err(e)) => {
                    seen.notes.push(format!("events: {e}"));
                    break;
                }
                None => {
                    seen.notes.push("the event stream ended".to_owned());
                    break;
                }
            },
            () = &mut give_up => {
                seen.notes.push(format!("gave up {GRACE:?} after the last lifecycle"));
                break;
            }
        }
    }
    seen
}

fn stats(mut v: Vec<f64>) -> Option<(usize, f64, f64, f64)> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some((v.len(), pct(&v, 50.0), pct(&v, 99.0), v[v.len() - 1]))
}

fn ms(ns: f64) -> String {
    format!("{:.2}", ns / 1e6)
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    if !engines::engines_enabled() {
        println!("skipped: engines not configured");
        eprintln!(
            "({}=1 is not set: run under `cargo xtask` or with `cargo xtask engines env`'s variables)",
            engines::ENV_ENGINES
        );
        return;
    }
    let lifecycles: usize = if full { 500 } else { 10 };
    let wall = Instant::now();
    let _lock = engines::lock_engine("docker", false).expect("the docker engine lock");
    engines::docker_up().unwrap_or_else(|e| panic!("docker: cannot bring the engine up: {e}"));
    let host = engines::docker_host();
    let image = engines::test_image();
    let tag = format!("latency-{}", std::process::id());
    let _cleanup = Cleanup(tag.clone());
    let names: Vec<String> = (0..lifecycles).map(|i| format!("{tag}-{i}")).collect();
    let warmup = format!("{tag}-warmup");

    let (tx, rx) = mpsc::channel();
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let handles: Vec<JoinHandle<Seen>> = [Who::Raw, Who::Lookout]
        .into_iter()
        .map(|who| {
            consumer(
                who,
                host.clone(),
                tag.clone(),
                lifecycles + 1,
                tx.clone(),
                stop_rx.clone(),
            )
        })
        .collect();
    for _ in 0..2 {
        rx.recv_timeout(SUBSCRIBED + Duration::from_secs(5))
            .expect("both consumers subscribed in time");
    }
    let rt = runtime();
    let docker = Docker::connect_with_unix(&socket_path(&host), 120, bollard::API_DEFAULT_VERSION)
        .expect("a bollard client");
    let driving = Instant::now();
    rt.block_on(async {
        lifecycle(&docker, &image, &tag, &warmup).await;
        for name in &names {
            lifecycle(&docker, &image, &tag, name).await;
        }
    });
    let driven = driving.elapsed();
    let _ = stop_tx.send(true);
    let seen: Vec<Seen> = handles
        .into_iter()
        .map(|h| h.join().expect("a consumer thread"))
        .collect();
    drop(rt);

    // Per consumer and kind: latencies (ns) of the measured containers.
    let mut failures = Vec::new();
    let mut by: HashMap<(Who, EventKind), Vec<f64>> = HashMap::new();
    let mut at: HashMap<(Who, &str, EventKind), i128> = HashMap::new();
    let mut same_stamp = 0usize;
    for s in &seen {
        let mut count = 0;
        for g in s.events.iter().filter(|g| g.name != warmup) {
            count += 1;
            by.entry((s.who, g.kind))
                .or_default()
                .push((g.recv_ns - g.engine_ns) as f64);
            at.insert((s.who, g.name.as_str(), g.kind), g.recv_ns);
        }
        if count != 4 * lifecycles || !s.notes.is_empty() {
            failures.push(format!(
                "{}: {count} events of {} expected; notes: {:?}",
                s.who.name(),
                4 * lifecycles,
                s.notes
            ));
        }
    }
    // The same event in both: lookout's receive time − raw's.
    let mut extra: HashMap<EventKind, Vec<f64>> = HashMap::new();
    for name in &names {
        for kind in KINDS {
            if let (Some(l), Some(r)) = (
                at.get(&(Who::Lookout, name.as_str(), kind)),
                at.get(&(Who::Raw, name.as_str(), kind)),
            ) {
                extra.entry(kind).or_default().push((l - r) as f64);
            }
        }
    }
    // Cross-check: both consumers report the same engine time for each event.
    let engine_time: HashMap<(Who, &str, EventKind), i128> = seen
        .iter()
        .flat_map(|s| {
            s.events
                .iter()
                .map(move |g| ((s.who, g.name.as_str(), g.kind), g.engine_ns))
        })
        .collect();
    for name in &names {
        for kind in KINDS {
            if engine_time.get(&(Who::Lookout, name.as_str(), kind))
                == engine_time.get(&(Who::Raw, name.as_str(), kind))
            {
                same_stamp += 1;
            }
        }
    }

    println!(
        "docker latency: {lifecycles} container lifecycles (create, start, stop -t 0, rm; \
         one at a time) on the real dockerd ({}), driven in {driven:.1?} ({:.1} lifecycles/s); \
         latency = consumer receive time − the event's engine timeNano, ms",
        host,
        lifecycles as f64 / driven.as_secs_f64()
    );
    println!("| consumer | transition | events | p50 | p99 | max |");
    println!("|---|---|---|---|---|---|");
    let mut p50 = HashMap::new();
    for who in [Who::Raw, Who::Lookout] {
        let mut all = Vec::new();
        for kind in KINDS {
            let v = by.remove(&(who, kind)).unwrap_or_default();
            all.extend_from_slice(&v);
            if let Some((n, a, b, c)) = stats(v) {
                println!(
                    "| {} | {kind} | {n} | {} | {} | {} |",
                    who.name(),
                    ms(a),
                    ms(b),
                    ms(c)
                );
            }
        }
        if let Some((n, a, b, c)) = stats(all) {
            p50.insert(who, a);
            println!(
                "| {} | **all** | {n} | {} | {} | {} |",
                who.name(),
                ms(a),
                ms(b),
                ms(c)
            );
        }
    }
    println!("lookout's receive time − raw bollard's, same event (ms; negative: lookout first):");
    println!("| transition | events | p50 | p99 | max |");
    println!("|---|---|---|---|---|");
    let mut all = Vec::new();
    for kind in KINDS {
        let v = extra.remove(&kind).unwrap_or_default();
        all.extend_from_slice(&v);
        if let Some((n, a, b, c)) = stats(v) {
            println!("| {kind} | {n} | {} | {} | {} |", ms(a), ms(b), ms(c));
        }
    }
    if let Some((n, a, b, c)) = stats(all) {
        println!("| **all** | {n} | {} | {} | {} |", ms(a), ms(b), ms(c));
    }
    if let (Some(l), Some(r)) = (p50.get(&Who::Lookout), p50.get(&Who::Raw)) {
        println!("p50 latency lookout / raw: {:.2}×", l / r);
    }
    println!(
        "events with the same engine time in both consumers: {same_stamp} of {}",
        4 * lifecycles
    );
    let relists: usize = seen.iter().map(|s| s.relists).sum();
    println!("lookout's periodic relists during the run (default every 5 min): {relists}");
    println!("(wall {:.1?})", wall.elapsed());
    if same_stamp != 4 * lifecycles {
        failures.push(format!(
            "only {same_stamp} of {} events carry the same engine time in both consumers",
            4 * lifecycles
        ));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
