//! lookout-swarm against a real single-node Swarm (dockerd as its manager):
//! `cargo xtask engines up swarm` first (CI sets `LOOKOUT_ENGINES=1`).
//!
//! Every test takes the `docker` and `swarm` engine locks, shared (the one
//! that kills dockerd, exclusive), names its services after itself and the
//! process, and removes them on drop. Services are created with
//! `--no-resolve-image` (no registry) and without `--network none` (Swarm has
//! no such network); lookout reports desired state, so no test waits for
//! tasks to run.

use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime};

use lookout_core::{EventKind, Item, Labels, Origin, WatchConfig};
use lookout_e2e::engines::{self, EngineLock};
use lookout_e2e::relay::Relay;
use lookout_e2e::relay::audit::{self, State, Timed};
use lookout_e2e::relay::scenarios::{
    self, dropped_and_closed, streaming_on_one_connection, tasks, test_config,
};
use lookout_swarm::{SwarmConfig, SwarmDial};

use EventKind::{Created, Removed, Started, Stopped};
use Origin::{Live, Resync};

/// The bound of every single expected item.
const ITEM: Duration = Duration::from_secs(30);

/// Takes the engine locks (in the order `cargo xtask engines up swarm`
/// takes them), then makes sure dockerd answers and is a Swarm manager: a
/// test of another binary may be restarting dockerd under its exclusive lock.
fn require(exclusive: bool) -> (EngineLock, EngineLock) {
    let docker = engines::lock_engine("docker", exclusive).expect("docker lock");
    let swarm = engines::lock_engine("swarm", exclusive).expect("swarm lock");
    let host = engines::docker_host();
    assert!(
        engines::engines_enabled() || engines::ping(&host, Duration::from_secs(2)).is_ok(),
        "swarm: {host} does not answer /_ping and {var} is not set: run \
         `cargo xtask engines up swarm` first (CI runs it and sets {var}=1)",
        var = engines::ENV_ENGINES,
    );
    engines::swarm_up().unwrap_or_else(|e| panic!("swarm: cannot bring the engine up: {e}"));
    (docker, swarm)
}

fn docker(args: &[&str]) -> String {
    engines::docker(args).unwrap_or_else(|e| panic!("swarm: {args:?} failed: {e}"))
}

/// The services of one test: each carries `lookout.cleanup=<tag>`, and the
/// guard removes them all on drop, whatever the test did.
struct Services {
    tag: String,
}

impl Services {
    fn new(test: &str) -> Self {
        let s = Self {
            tag: format!("lk-{test}-{}", std::process::id()),
        };
        s.remove_all();
        s
    }

    /// The label filter of the test's watch: `lookout.test=<tag>`.
    fn filter(&self) -> Labels {
        Labels::from([("lookout.test".to_owned(), self.tag.clone())])
    }

    fn watched_label(&self) -> String {
        format!("lookout.test={}", self.tag)
    }

    /// Creates `<tag>-<suffix>` (`--detach`), with the watch's label when
    /// `watched`, with `args` before the image. Returns its name.
    fn create(&self, suffix: &str, watched: bool, args: &[&str]) -> String {
        let name = format!("{}-{suffix}", self.tag);
        let cleanup = format!("lookout.cleanup={}", self.tag);
        let watched_label = self.watched_label();
        let mut cmd = vec!["--label", &cleanup];
        if watched {
            cmd.extend(["--label", &watched_label]);
        }
        cmd.extend(args);
        engines::swarm_service_create(&name, &cmd)
            .unwrap_or_else(|e| panic!("swarm: create {name} failed: {e}"));
        name
    }

    fn scale(name: &str, replicas: u32) {
        Self::update(&["scale", "--detach", &format!("{name}={replicas}")]);
    }

    /// `docker service ARGS` for a change of a service, retried while the
    /// manager answers `update out of sequence` (the CLI read the service
    /// while the orchestrator was updating it, as after `--force`).
    fn update(args: &[&str]) {
        let mut cmd = vec!["service"];
        cmd.extend(args);
        let deadline = Instant::now() + ITEM;
        loop {
            match engines::docker(&cmd) {
                Ok(_) => return,
                Err(e) if e.contains("out of sequence") && Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(100));
                }
                Err(e) => panic!("swarm: {cmd:?} failed: {e}"),
            }
        }
    }

    fn remove_all(&self) {
        let filter = format!("label=lookout.cleanup={}", self.tag);
        if let Ok(ids) = engines::docker(&["service", "ls", "-q", "--filter", &filter]) {
            let ids: Vec<&str> = ids.split_whitespace().collect();
            if !ids.is_empty() {
                let mut rm = vec!["service", "rm"];
                rm.extend(ids);
                let _ = engines::docker(&rm);
            }
        }
    }
}

impl Drop for Services {
    fn drop(&mut self) {
        self.remove_all();
    }
}

/// A watch of services under test, with everything it yielded.
type Watcher = scenarios::Watcher<SwarmDial>;

/// Watches the services carrying `labels` on the manager at `host`.
fn watcher(host: String, labels: Labels) -> Watcher {
    watcher_with(host, labels, test_config())
}

fn watcher_with(host: String, labels: Labels, config: WatchConfig) -> Watcher {
    let config = SwarmConfig::default()
        .host(host)
        .labels(labels)
        .watch_config(config);
    Watcher::from_watch(lookout_swarm::watch(config).expect("a valid host"))
}

/// Asserts that the watch never disconnected, and reports.
fn done(w: &Watcher, test: &str, started: Instant) {
    assert_eq!(w.disconnects(), 0, "{}", w.summary());
    scenarios::report_as("swarm", test, started, w);
}

/// A test's start: the engine locks (shared), its services, and a watch of
/// them on dockerd (through `relay` if given) that has connected.
async fn start(
    test: &str,
    relay: Option<&Relay>,
) -> (Instant, (EngineLock, EngineLock), Services, Watcher) {
    let started = Instant::now();
    let locks = require(false);
    let s = Services::new(test);
    let host = relay.map_or_else(engines::docker_host, Relay::host);
    let mut w = watcher(host, s.filter());
    w.connected().await;
    (started, locks, s, w)
}

/// Create a labelled service with one replica, scale it to 0 and back to 1,
/// remove it: exactly `Created`, `Started`, `Stopped`, `Started`, `Removed`,
/// once each, in order, live, with the service's labels. An unlabelled
/// service worked on meanwhile never shows.
#[tokio::test]
async fn lifecycle_is_reported_once_in_order_with_labels() {
    let (started, _locks, s, mut w) = start("lifecycle", None).await;
    let a = s.create("a", true, &["--replicas", "1", "--label", "tier=web"]);
    let b = s.create("b", false, &["--replicas", "1"]);
    w.events_until(&a, Started).await;
    Services::scale(&a, 0);
    Services::scale(&b, 0);
    w.events_until(&a, Stopped).await;
    Services::scale(&a, 1);
    Services::scale(&b, 1);
    w.events_until(&a, Started).await;
    let inspected = docker(&[
        "service",
        "inspect",
        "--format",
        "{{json .Spec.Labels}}",
        &a,
    ]);
    let engine_labels: Labels = serde_json::from_str(&inspected)
        .unwrap_or_else(|e| panic!("labels of {a}: {e}: {inspected}"));
    docker(&["service", "rm", &b]);
    docker(&["service", "rm", &a]);
    w.events_until(&a, Removed).await;
    w.assert_events(
        &a,
        &[
            (Created, Live),
            (Started, Live),
            (Stopped, Live),
            (Started, Live),
            (Removed, Live),
        ],
    );
    assert_eq!(engine_labels.get("tier").map(String::as_str), Some("web"));
    for item in &w.seen {
        if let Item::Event(e) = item {
            assert_eq!(*e.labels, engine_labels, "labels of {} {}", e.id, e.kind);
        }
    }
    // Events arrive in order: anything about `b` would have come before `a`'s removal.
    w.assert_events(&b, &[]);
    done(&w, "lifecycle", started);
}

/// Updates that do not scale are inspected: a label change moves a service
/// into the watch and out of it, `--force` reports nothing, and a global
/// service runs while it exists.
#[tokio::test]
async fn updates_without_replicas_are_inspected() {
    let (started, _locks, s, mut w) = start("inspect", None).await;
    let a = s.create("a", false, &["--replicas", "1"]);
    let watched = s.watched_label();
    Services::update(&["update", "--detach", "--label-add", &watched, &a]);
    w.events_until(&a, Started).await;
    Services::update(&["update", "--detach", "--force", &a]);
    Services::update(&["update", "--detach", "--label-rm", "lookout.test", &a]);
    w.events_until(&a, Removed).await;
    let g = s.create("g", true, &["--mode", "global"]);
    w.events_until(&g, Started).await;
    docker(&["service", "rm", &g]);
    w.events_until(&g, Removed).await;
    w.assert_events(&a, &[(Created, Live), (Started, Live), (Removed, Live)]);
    w.assert_events(&g, &[(Created, Live), (Started, Live), (Removed, Live)]);
    done(&w, "inspect", started);
}

/// Twenty rounds of scaling to 0 and back to 1, as fast as the CLI goes: the
/// watch ends in the engine's state, and never reports the same kind twice
/// in a row.
#[tokio::test]
async fn a_scale_storm_ends_in_the_engine_state_without_repeats() {
    let (started, _locks, s, mut w) = start("storm", None).await;
    let a = s.create("a", true, &["--replicas", "1"]);
    w.events_until(&a, Started).await;
    let storm = Instant::now();
    for _ in 0..20 {
        Services::scale(&a, 0);
        Services::scale(&a, 1);
    }
    let storm = storm.elapsed();
    Services::scale(&a, 0);
    let replicas = docker(&[
        "service",
        "inspect",
        "--format",
        "{{.Spec.Mode.Replicated.Replicas}}",
        &a,
    ]);
    assert_eq!(replicas, "0");
    // A sentinel created after the storm: the feed is in order, so once it
    // shows, every storm event before it was handled.
    let sentinel = s.create("sentinel", true, &["--replicas", "0"]);
    w.events_until(&sentinel, Created).await;
    let events = w.events_of(&a);
    assert_eq!(events.last().map(|e| e.0), Some(Stopped), "{}", w.summary());
    for pair in events.windows(2) {
        assert_ne!(pair[0].0, pair[1].0, "a repeat: {}", w.summary());
    }
    assert!(events.iter().all(|e| e.1 == Live), "{}", w.summary());
    eprintln!(
        "[swarm] storm: {} events for 41 scales in {storm:.1?}",
        events.len()
    );
    done(&w, "storm", started);
}

/// The connection drops; the service is scaled to 0 while nothing watches:
/// the redial's snapshot reports the stop once, as a resync (a service is
/// never replayed with `since`: its events carry the service's `UpdatedAt`,
/// so no history can prove it complete). Live events flow after; the redial
/// makes one `/events` request (the new subscription, from now).
#[tokio::test]
async fn a_scale_missed_while_cut_off_is_reported_once_as_resync() {
    let relay = Relay::start(&engines::docker_host());
    let (started, _locks, s, mut w) = start("cut", Some(&relay)).await;
    let a = s.create("a", true, &["--replicas", "1"]);
    w.events_until(&a, Started).await;
    relay.cut_and_wait(ITEM).await;
    // Nothing polls the watch meanwhile: this happens while it is disconnected.
    Services::scale(&a, 0);
    w.connected().await;
    Services::scale(&a, 1);
    w.events_until(&a, Started).await;
    docker(&["service", "rm", &a]);
    w.events_until(&a, Removed).await;
    w.assert_events(
        &a,
        &[
            (Created, Live),
            (Started, Live),
            (Stopped, Resync),
            (Started, Live),
            (Removed, Live),
        ],
    );
    assert_eq!(relay.counts().events_requests, 2, "one redial");
    scenarios::report_as("swarm", "cut", started, &w);
}

/// dockerd is killed (`kill -9`) and started again; the service is scaled to
/// 0 after the restart, before the watch redials: the stop is reported once,
/// as a resync, and live events flow after.
#[tokio::test]
async fn a_daemon_restart_then_a_scale_to_zero_is_reported_once() {
    let started = Instant::now();
    let _locks = require(true);
    let s = Services::new("restart");
    let a = s.create("a", true, &["--replicas", "1"]);
    let mut w = watcher(engines::docker_host(), s.filter());
    assert_eq!(w.connected().await, 1, "the service is listed");
    // Nothing polls the watch from here until dockerd is back and `a` scaled.
    let down = Instant::now();
    engines::docker_kill9().unwrap_or_else(|e| panic!("{e}"));
    engines::docker_start().unwrap_or_else(|e| panic!("{e}"));
    engines::swarm_up().unwrap_or_else(|e| panic!("{e}"));
    let scale = Instant::now();
    let mut last = String::new();
    while scale.elapsed() < ITEM {
        match engines::docker(&["service", "scale", "--detach", &format!("{a}=0")]) {
            Ok(_) => break,
            // The manager may still be electing itself.
            Err(e) => last = e,
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert!(
        scale.elapsed() < ITEM,
        "cannot scale {a} after the restart: {last}"
    );
    let back = down.elapsed();
    w.events_until(&a, Stopped).await;
    Services::scale(&a, 1);
    w.events_until(&a, Started).await;
    docker(&["service", "rm", &a]);
    w.events_until(&a, Removed).await;
    w.assert_events(&a, &[(Stopped, Resync), (Started, Live), (Removed, Live)]);
    assert!(w.disconnects() >= 1, "{}", w.summary());
    eprintln!("[swarm] restart: dockerd back and scaled in {back:.1?}");
    scenarios::report_as("swarm", "restart", started, &w);
}

/// Undecodable lines and events of services that do not exist, injected
/// into the `/events` body, are skipped: the session goes on (no redial) and
/// live events keep flowing.
#[tokio::test]
async fn an_undecodable_event_is_skipped_without_replay() {
    let relay = Relay::start(&engines::docker_host());
    let (started, _locks, s, mut w) = start("poison", Some(&relay)).await;
    relay.inject(br#"{"Type":"service","Action":"update","Actor":{"ID":"#);
    relay.inject(br#"{"Type":"service","Action":"create","Actor":{"ID":"../../_ping","Attributes":{"name":"x"}},"timeNano":2}"#);
    relay.inject(br#"{"Type":"service","Action":"create","Actor":{"ID":"nosuchservice0000000000000","Attributes":{"name":"ghost"}},"timeNano":3}"#);
    relay.inject(b"\x00\x01 not json at all");
    relay
        .wait(ITEM, |c| c.injected == 4)
        .await
        .unwrap_or_else(|c| panic!("the relay did not inject: {c:?}"));
    let a = s.create("a", true, &["--replicas", "1"]);
    w.events_until(&a, Started).await;
    w.assert_events(&a, &[(Created, Live), (Started, Live)]);
    w.assert_events("ghost", &[]);
    assert_eq!(w.disconnects(), 0, "{}", w.summary());
    assert_eq!(relay.counts().events_requests, 1, "no redial");
    scenarios::report_as("swarm", "poison", started, &w);
}

/// Dropping the stream closes its connections within 100 ms — while
/// streaming, and while an inspection hangs on an engine that accepts but
/// does not answer — and leaves no task on the runtime (the relay runs on a
/// runtime of its own).
#[tokio::test]
async fn dropping_the_stream_closes_its_connections() {
    let _locks = require(false);
    let s = Services::new("drop");
    let relay = Relay::start(&engines::docker_host());
    assert_eq!(tasks(), 0);

    // Streaming: only the /events connection stays open.
    let mut w = watcher(relay.host(), s.filter());
    streaming_on_one_connection(&relay, &mut w).await;
    dropped_and_closed(&relay, w, "while streaming").await;

    // Inspecting a new service on a connection the engine never answers.
    let mut w = watcher_with(
        relay.host(),
        s.filter(),
        test_config().probe_after(Duration::from_secs(20)),
    );
    w.connected().await;
    relay.hold(true);
    let before = relay.counts().accepted;
    s.create("a", true, &["--replicas", "1"]);
    tokio::select! {
        item = w.next(ITEM) => panic!("a held inspection yielded {item:?}"),
        held = relay.wait(ITEM, |c| c.accepted > before && c.live == 2) => {
            held.unwrap_or_else(|c| panic!("the inspection never connected: {c:?}"));
        }
    }
    dropped_and_closed(&relay, w, "while inspecting").await;
}

/// Scales `name` to 0 and back to 1 `rounds` times, then to 0, on a thread
/// of its own; `progress` counts the scales.
fn storm(name: &str, rounds: usize, progress: &Arc<AtomicUsize>) -> std::thread::JoinHandle<()> {
    let (name, progress) = (name.to_owned(), Arc::clone(progress));
    std::thread::Builder::new()
        .name("storm".into())
        .spawn(move || {
            for _ in 0..rounds {
                Services::scale(&name, 0);
                progress.fetch_add(1, Ordering::SeqCst);
                Services::scale(&name, 1);
                progress.fetch_add(1, Ordering::SeqCst);
            }
            Services::scale(&name, 0);
        })
        .expect("storm thread")
}

/// The relay's requests and every item seen, one a line, times relative to
/// the first item.
fn account(seen: &[audit::Seen], requests: &[(SystemTime, String)]) -> String {
    let origin = seen.first().map_or(0, |s| audit::nanos(s.at));
    let mut account = String::new();
    for (t, path) in requests {
        let _ = writeln!(
            account,
            "  {}: {}",
            audit::rel(origin, audit::nanos(*t)),
            audit::short_path(path)
        );
    }
    for (i, s) in seen.iter().enumerate() {
        let _ = writeln!(account, "  {}", audit::line(origin, i, s));
    }
    account
}

/// A scale storm (a watched service scaled 0 ↔ 1 by a thread, as fast as the
/// CLI goes) through a relay that is cut in the middle of it while the
/// storm goes on: no `live` event after the reconnect's `Connected` is older
/// than the reconnect's first `/events` request (a service is never
/// replayed with `since`), the watch ends in the engine's state, and never
/// reports the same kind twice in a row.
#[tokio::test]
async fn a_scale_storm_cut_off_yields_no_stale_live_event() {
    const ROUNDS: usize = 20;
    let started = Instant::now();
    let _locks = require(false);
    let s = Services::new("stormcut");
    let relay = Relay::start(&engines::docker_host());
    let config = SwarmConfig::default()
        .host(relay.host())
        .labels(s.filter())
        .watch_config(test_config());
    let mut w = Timed::new(lookout_swarm::watch(config).expect("a valid host"));
    assert!(w.until(ITEM, |seen| audit::connects(seen) >= 1).await);
    let a = s.create("a", true, &["--replicas", "1"]);
    assert!(
        w.until(ITEM, |seen| audit::has_event(seen, &a, Started))
            .await,
        "{a} never started"
    );
    let progress = Arc::new(AtomicUsize::new(0));
    let storm = storm(&a, ROUNDS, &progress);
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut cut = None;
    while !storm.is_finished() && Instant::now() < deadline {
        if cut.is_none() && progress.load(Ordering::SeqCst) >= ROUNDS / 2 {
            cut = Some(SystemTime::now());
            relay.cut_and_wait(ITEM).await;
            // Left unpolled (so disconnected) while the storm goes on.
            let from = progress.load(Ordering::SeqCst);
            let bound = Instant::now() + Duration::from_secs(15);
            while progress.load(Ordering::SeqCst) < from + 5
                && !storm.is_finished()
                && Instant::now() < bound
            {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        w.poll_for(Duration::from_millis(50)).await;
    }
    assert!(storm.is_finished(), "the storm did not end within 60 s");
    storm
        .join()
        .unwrap_or_else(|p| std::panic::resume_unwind(p));
    assert!(cut.is_some(), "the storm ended before the cut");
    let replicas = docker(&[
        "service",
        "inspect",
        "--format",
        "{{.Spec.Mode.Replicated.Replicas}}",
        &a,
    ]);
    assert_eq!(replicas, "0");
    // A sentinel created after the storm: the feed is in order, so once it
    // shows, every storm event before it was handled.
    let sentinel = s.create("sentinel", true, &["--replicas", "0"]);
    let caught_up = w
        .until(ITEM, |seen| {
            audit::has_event(seen, &sentinel, Created)
                && audit::final_states(seen).get(&a) == Some(&State::Stopped)
        })
        .await;
    w.poll_for(Duration::from_millis(300)).await;
    let requests = relay.events_requests();
    let episodes = audit::episodes(&w.seen, &requests);
    let origin = w.seen.first().map_or(0, |s| audit::nanos(s.at));
    let mut problems = audit::stale_live(&w.seen, &episodes, audit::STALE_MARGIN);
    problems.extend(audit::repeats(&w.seen));
    if !caught_up {
        problems.push(format!(
            "the watch did not end with {a} stopped and {sentinel} created: {:?}",
            audit::final_states(&w.seen)
        ));
    }
    if episodes.is_empty() {
        problems.push("the cut caused no reconnect".to_owned());
    }
    eprintln!(
        "[swarm] stormcut in {:.1?}: {} items, cut at {}, /events requests:\n{}",
        started.elapsed(),
        w.seen.len(),
        cut.map_or_else(String::new, |t| audit::rel(origin, audit::nanos(t))),
        account(&w.seen, &requests)
    );
    assert!(
        problems.is_empty(),
        "{} violations:\n{}",
        problems.len(),
        problems.join("\n")
    );
}
