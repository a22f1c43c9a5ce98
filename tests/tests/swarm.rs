//! lookout-swarm against a real single-node Swarm (dockerd as its manager):
//! `cargo xtask engines up swarm` first (CI sets `LOOKOUT_ENGINES=1`).
//!
//! Every test takes the `docker` and `swarm` engine locks, shared (the one
//! that kills dockerd, exclusive), names its services after itself and the
//! process, and removes them on drop. Services are created with
//! `--no-resolve-image` (no registry) and without `--network none` (Swarm has
//! no such network); lookout reports desired state, so no test of the events
//! waits for tasks to run. The readiness tests do: readiness is the tasks
//! that run (`ServiceStatus`, polled).

use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime};

use lookout_core::{EventKind, InstanceEvent, Item, Labels, Origin, Readiness, WatchConfig};
use lookout_e2e::engines::{self, EngineLock};
use lookout_e2e::relay::audit::{self, State, Timed};
use lookout_e2e::relay::scenarios::{
    self, dropped_and_closed, streaming_on_one_connection, tasks, test_config,
};
use lookout_e2e::relay::{self, Relay};
use lookout_swarm::{SwarmConfig, SwarmDial};
use serde_json::{Value, json};

use EventKind::{Created, Failing, Ready, Removed, Started, Stopped, Unready};
use Origin::{Initial, Live, Resync};

/// The bound of every single expected item.
const ITEM: Duration = Duration::from_secs(30);

/// Takes the engine locks (in the order `cargo xtask engines up swarm`
/// takes them), then makes sure dockerd answers and is a Swarm manager: a
/// test of another binary may be restarting dockerd under its exclusive lock.
/// `None` without engines (the test returns: see `engines::skips`).
fn require(exclusive: bool) -> Option<(EngineLock, EngineLock)> {
    if engines::skips("swarm") {
        return None;
    }
    let docker = engines::lock_engine("docker", exclusive).expect("docker lock");
    let swarm = engines::lock_engine("swarm", exclusive).expect("swarm lock");
    engines::swarm_up().unwrap_or_else(|e| panic!("swarm: cannot bring the engine up: {e}"));
    Some((docker, swarm))
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

/// `METHOD path` on dockerd's socket with a JSON `body` (HTTP/1.0: one
/// request, the answer read to its end): the status and the body. For what
/// the CLI cannot say (an exec-form healthcheck: `--health-cmd` is a shell
/// form, and the test image has no shell) and for `ServiceStatus`.
fn api(method: &str, path: &str, body: Option<&str>) -> (u16, String) {
    relay::engine_api(&engines::docker_host(), method, path, body.unwrap_or(""))
        .unwrap_or_else(|e| panic!("swarm: {method} {path}: {e}"))
}

/// Percent-encodes a query value.
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                char::from(b).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// The `ServiceStatus` of `name` now, as the poll reads it (`GET
/// /services?status=true`): desired tasks, running tasks.
fn tasks_of(name: &str) -> (u64, u64) {
    let filters = encode(&json!({ "name": [name] }).to_string());
    let (status, body) = api(
        "GET",
        &format!("/services?status=true&filters={filters}"),
        None,
    );
    assert_eq!(status, 200, "swarm: listing {name}: {body}");
    let list: Value =
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("swarm: list: {e}: {body}"));
    // `name` filters by prefix: take the service of that very name.
    let entry = list
        .as_array()
        .and_then(|l| l.iter().find(|s| s["Spec"]["Name"] == name))
        .unwrap_or_else(|| panic!("swarm: {name} is not listed: {body}"));
    let count = |key: &str| {
        entry["ServiceStatus"][key]
            .as_u64()
            .unwrap_or_else(|| panic!("swarm: {name} has no ServiceStatus.{key}: {entry}"))
    };
    (count("DesiredTasks"), count("RunningTasks"))
}

/// The REPLICAS column of `docker service ls` for `name` (`running/desired`,
/// from the same `ServiceStatus`): the engine's own client's view.
fn replicas_column(name: &str) -> String {
    let filter = format!("name={name}");
    let out = docker(&[
        "service",
        "ls",
        "--filter",
        &filter,
        "--format",
        "{{.Name}} {{.Replicas}}",
    ]);
    out.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("swarm: {name} not in `docker service ls`: {out:?}"))
        .to_owned()
}

/// Waits (bounded) until every desired task of `name` runs.
async fn all_tasks_run(name: &str) {
    let deadline = Instant::now() + ITEM;
    loop {
        let (desired, running) = tasks_of(name);
        if desired > 0 && running >= desired {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "swarm: {name} runs {running} of {desired} tasks after {ITEM:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The command of a service whose check passes late: `/ok` is made 2 s
/// after the task starts (busybox's `sh` applet: the image has no
/// `/bin/sh`, but `busybox sh -c` works).
const SLOW_START: [&str; 3] = ["sh", "-c", "sleep 2; touch /ok; exec sleep 3600"];

/// The command of a service whose check never passes: `/ok` is never made.
const NEVER_OK: [&str; 2] = ["sleep", "3600"];

/// An exec-form check that passes once `/ok` exists, every 300 ms. Its start
/// period keeps it `starting` until it passes: this dockerd (20.10.24) fails
/// a task whose check said `unhealthy` before it passed ("failed to activate
/// service binding … network sandbox does not exist" at its `healthy`), and
/// restarts it in a loop. After it passed, one failure is `unhealthy`.
fn late_check() -> Value {
    json!({
        "Test": ["CMD", "/bin/busybox", "test", "-f", "/ok"],
        "Interval": 300_000_000u64,
        "Retries": 1,
        "StartPeriod": 60_000_000_000u64,
    })
}

/// `{"Replicated": {"Replicas": n}}`
fn replicated(n: u64) -> Value {
    json!({ "Replicated": { "Replicas": n } })
}

impl Services {
    /// Creates `<tag>-<suffix>` through the API, watched (with the watch's
    /// label), in `mode`, running `args` (busybox applets), with `check` as
    /// its healthcheck when given. Returns its name.
    fn create_spec(
        &self,
        suffix: &str,
        mode: &Value,
        args: &[&str],
        check: Option<Value>,
    ) -> String {
        let name = format!("{}-{suffix}", self.tag);
        let mut container = json!({ "Image": engines::test_image(), "Args": args });
        if let Some(check) = check {
            container["Healthcheck"] = check;
        }
        let spec = json!({
            "Name": name,
            "Labels": { "lookout.cleanup": self.tag, "lookout.test": self.tag },
            "Mode": mode,
            "TaskTemplate": { "ContainerSpec": container },
        });
        let (status, body) = api("POST", "/services/create", Some(&spec.to_string()));
        assert_eq!(status, 201, "swarm: creating {name}: {body}");
        name
    }
}

/// The relay's service list requests (`GET /services?status=true…`: the
/// readiness polls, and each dial's list) read after `after`.
fn polls(relay: &Relay, after: SystemTime) -> Vec<SystemTime> {
    relay
        .requests_unversioned()
        .into_iter()
        .filter(|(at, request)| *at > after && request.starts_with("GET /services?status=true"))
        .map(|(at, _)| at)
        .collect()
}

/// Drives `w` (its session polls only while the stream is polled) until the
/// relay has seen `n` service lists after `after`; bounded by [`ITEM`].
async fn drive_until_polls(w: &mut Watcher, relay: &Relay, after: SystemTime, n: usize) {
    let deadline = Instant::now() + ITEM;
    while polls(relay, after).len() < n {
        assert!(
            Instant::now() < deadline,
            "{} polls of {n} after {ITEM:?}; {}",
            polls(relay, after).len(),
            w.summary()
        );
        w.try_next(Duration::from_millis(20)).await;
    }
}

/// The readiness poll of the readiness tests.
const POLL: Duration = Duration::from_millis(500);

/// Watches the services carrying `labels` at `host`, with readiness, polled
/// every `poll`.
fn ready_watcher(host: String, labels: Labels, config: WatchConfig, poll: Duration) -> Watcher {
    lookout_e2e::k8s_util::init_tracing();
    let config = SwarmConfig::default()
        .host(host)
        .labels(labels)
        .watch_config(config)
        .readiness(true)
        .readiness_poll(poll);
    Watcher::from_watch(lookout_swarm::watch(config).expect("a valid host"))
}

/// A readiness test's start: the engine locks (shared), its services, and a
/// watch with readiness (polled every [`POLL`]) of them on dockerd, through
/// `relay`, that has connected; and when it connected.
async fn start_ready(
    test: &str,
    relay: &Relay,
) -> Option<(
    Instant,
    (EngineLock, EngineLock),
    Services,
    Watcher,
    SystemTime,
)> {
    let started = Instant::now();
    let locks = require(false)?;
    let s = Services::new(test);
    let mut w = ready_watcher(relay.host(), s.filter(), test_config(), POLL);
    w.connected().await;
    Some((started, locks, s, w, SystemTime::now()))
}

/// The last event in `events`, with its readiness as `(desired, ready)`.
fn last_replicas(events: &[InstanceEvent]) -> (EventKind, Option<(u32, u32)>) {
    let e = events.last().expect("an event");
    let replicas = match e.readiness {
        Some(Readiness::Replicas {
            desired,
            ready,
            observed,
            ..
        }) => {
            assert!(observed, "Swarm's readiness is always observed: {e:?}");
            Some((desired, ready))
        }
        _ => None,
    };
    (e.kind, replicas)
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
) -> Option<(Instant, (EngineLock, EngineLock), Services, Watcher)> {
    let started = Instant::now();
    let locks = require(false)?;
    let s = Services::new(test);
    let host = relay.map_or_else(engines::docker_host, Relay::host);
    let mut w = watcher(host, s.filter());
    w.connected().await;
    Some((started, locks, s, w))
}

/// Create a labelled service with one replica, scale it to 0 and back to 1,
/// remove it: exactly `Created`, `Started`, `Stopped`, `Started`, `Removed`,
/// once each, in order, live, with the service's labels. An unlabelled
/// service worked on meanwhile never shows.
#[tokio::test]
async fn lifecycle_is_reported_once_in_order_with_labels() {
    let Some((started, _locks, s, mut w)) = start("lifecycle", None).await else {
        return;
    };
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
    assert_eq!(engine_labels.get("tier"), Some("web"));
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
    let Some((started, _locks, s, mut w)) = start("inspect", None).await else {
        return;
    };
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
    let Some((started, _locks, s, mut w)) = start("storm", None).await else {
        return;
    };
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
    let Some((started, _locks, s, mut w)) = start("cut", Some(&relay)).await else {
        return;
    };
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
    let Some(_locks) = require(true) else { return };
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
    let Some((started, _locks, s, mut w)) = start("poison", Some(&relay)).await else {
        return;
    };
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
    let Some(_locks) = require(false) else { return };
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
    let Some(_locks) = require(false) else { return };
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

/// Readiness is the running tasks. A service with a check that passes late
/// (2 replicas) is `created, started`, then `ready` (resync: the poll found
/// it) only once both tasks run — `ServiceStatus` says so side by side;
/// scaled to 3 it is `unready` at the next poll, then `ready` when the third
/// task runs; scaled to 0 it is `stopped` (no `unready` first); removed,
/// `removed`. A service without a check is ready once its task runs.
#[tokio::test]
async fn readiness_follows_the_running_tasks() {
    let relay = Relay::start(&engines::docker_host());
    let Some((started, _locks, s, mut w, _)) = start_ready("ready", &relay).await else {
        return;
    };
    let hc = s.create_spec("hc", &replicated(2), &SLOW_START, Some(late_check()));
    let created = Instant::now();
    let plain = s.create("plain", true, &["--replicas", "1"]);

    let events = w.events_until(&hc, Ready).await;
    let (desired, running) = tasks_of(&hc);
    assert!(
        desired == 2 && running >= desired,
        "ready with {running} of {desired} tasks running"
    );
    assert_eq!(last_replicas(&events), (Ready, Some((2, 2))));
    assert_eq!(replicas_column(&hc), "2/2", "the docker CLI's view");
    assert!(
        created.elapsed() >= Duration::from_secs(2),
        "ready before the check could pass: {:?}",
        created.elapsed()
    );
    let to_ready = created.elapsed();

    Services::scale(&hc, 3);
    let scaled = SystemTime::now();
    let events = w.events_until(&hc, Unready).await;
    let polls_before = polls(&relay, scaled).len();
    assert!(
        polls_before <= 1,
        "unready only after {polls_before} polls since the scale"
    );
    assert_eq!(last_replicas(&events), (Unready, Some((3, 2))));
    let unready_after = scaled.elapsed().unwrap_or_default();

    let events = w.events_until(&hc, Ready).await;
    let (desired, running) = tasks_of(&hc);
    assert!(
        desired == 3 && running >= 3,
        "ready with {running} of {desired}"
    );
    assert_eq!(last_replicas(&events), (Ready, Some((3, 3))));
    assert_eq!(replicas_column(&hc), "3/3", "the docker CLI's view");

    Services::scale(&hc, 0);
    w.events_until(&hc, Stopped).await;
    docker(&["service", "rm", &hc]);
    w.events_until(&hc, Removed).await;
    w.assert_events(
        &hc,
        &[
            (Created, Live),
            (Started, Live),
            (Ready, Resync),
            (Unready, Resync),
            (Ready, Resync),
            (Stopped, Live),
            (Removed, Live),
        ],
    );

    // Its task ran long before: told by now.
    w.wait_until(|w| w.events_of(&plain).len() >= 3).await;
    assert_eq!(tasks_of(&plain), (1, 1));
    w.assert_events(&plain, &[(Created, Live), (Started, Live), (Ready, Resync)]);
    eprintln!(
        "[swarm] ready: hc ready {to_ready:.1?} after its creation, unready \
         {unready_after:.1?} after the scale to 3"
    );
    done(&w, "ready", started);
}

/// A running service whose check starts failing (`/ok` removed in its
/// container): Swarm kills the task, which no longer runs: `unready`; its
/// replacement's check passes: `ready` again.
#[tokio::test]
async fn a_failing_check_makes_a_service_unready_until_its_task_is_replaced() {
    let relay = Relay::start(&engines::docker_host());
    let Some((started, _locks, s, mut w, _)) = start_ready("check", &relay).await else {
        return;
    };
    let hc = s.create_spec("hc", &replicated(1), &SLOW_START, Some(late_check()));
    w.events_until(&hc, Ready).await;
    let filter = format!("label=com.docker.swarm.service.name={hc}");
    let container = docker(&["ps", "-q", "--filter", &filter]);
    assert_eq!(container.lines().count(), 1, "one task: {container:?}");
    docker(&["exec", &container, "/bin/busybox", "rm", "/ok"]);
    let events = w.events_until(&hc, Unready).await;
    assert_eq!(last_replicas(&events), (Unready, Some((1, 0))));
    w.events_until(&hc, Ready).await;
    let replaced = docker(&["ps", "-q", "--filter", &filter]);
    assert_ne!(replaced, container, "the task was replaced");
    // Swarm says why it killed the task: `failing`, in the task's error
    // (`docker service ps --no-trunc`: "task: non-zero exit (137):
    // dockerexec: unhealthy container").
    w.assert_events(
        &hc,
        &[
            (Created, Live),
            (Started, Live),
            (Ready, Resync),
            (Unready, Resync),
            (Failing, Resync),
            (Ready, Resync),
        ],
    );
    let failing = w
        .seen
        .iter()
        .find_map(|i| match i {
            Item::Event(e) if e.id.as_str() == hc && e.kind == Failing => e.reason.clone(),
            _ => None,
        })
        .expect("the failing event's reason");
    let message = failing.message.as_deref().unwrap_or_default();
    assert!(message.contains("unhealthy container"), "{failing:?}");
    done(&w, "check", started);
}

/// A service whose check never passes runs (its desired state) but is never
/// ready: its task stays `starting` (the check's start period), which
/// `ServiceStatus` does not count as running: many polls, no `ready`.
///
/// (Not a service whose tasks exit at once, `false` restarted forever:
/// each of its tasks runs for a moment, and a poll that lands then is
/// told ready — which is what the engine said.)
#[tokio::test]
async fn a_service_whose_check_never_passes_is_never_ready() {
    let relay = Relay::start(&engines::docker_host());
    let Some((started, _locks, s, mut w, _)) = start_ready("fail", &relay).await else {
        return;
    };
    let failing = s.create_spec("failing", &replicated(1), &NEVER_OK, Some(late_check()));
    w.events_until(&failing, Started).await;
    let from = SystemTime::now();
    // 8 polls: 4 s.
    drive_until_polls(&mut w, &relay, from, 8).await;
    assert_eq!(tasks_of(&failing), (1, 0));
    w.assert_events(&failing, &[(Created, Live), (Started, Live)]);
    done(&w, "fail", started);
}

/// `initial`: a service whose tasks run is told `created, started, ready`,
/// one whose check never passes `created, started`, all `initial`.
#[tokio::test]
async fn initial_tells_a_ready_service_ready() {
    let started = Instant::now();
    let Some(_locks) = require(false) else { return };
    let s = Services::new("initial");
    let plain = s.create("plain", true, &["--replicas", "1"]);
    let failing = s.create_spec("failing", &replicated(1), &NEVER_OK, Some(late_check()));
    all_tasks_run(&plain).await;
    let mut w = ready_watcher(
        engines::docker_host(),
        s.filter(),
        test_config().initial(true),
        POLL,
    );
    assert_eq!(w.connected().await, 2);
    w.assert_events(
        &plain,
        &[(Created, Initial), (Started, Initial), (Ready, Initial)],
    );
    w.assert_events(&failing, &[(Created, Initial), (Started, Initial)]);
    done(&w, "initial", started);
}

/// A feed that lags the poll (the relay holds each `/events` chunk 1.5 s):
/// the polls see a scale to 0 before its event does. A service listed as
/// not running tells no readiness: `stopped`, no `unready` before it.
#[tokio::test]
async fn a_scale_to_zero_seen_by_a_poll_first_is_only_stopped() {
    let relay = Relay::start(&engines::docker_host());
    let Some((started, _locks, s, mut w, _)) = start_ready("lag", &relay).await else {
        return;
    };
    let plain = s.create("plain", true, &["--replicas", "1"]);
    w.events_until(&plain, Ready).await;
    relay.delay_events(Duration::from_millis(1500));
    Services::scale(&plain, 0);
    let scaled = SystemTime::now();
    w.events_until(&plain, Stopped).await;
    let polled = polls(&relay, scaled).len();
    assert!(polled >= 1, "no poll before the lagging stop");
    relay.delay_events(Duration::ZERO);
    docker(&["service", "rm", &plain]);
    w.events_until(&plain, Removed).await;
    w.assert_events(
        &plain,
        &[
            (Created, Live),
            (Started, Live),
            (Ready, Resync),
            (Stopped, Live),
            (Removed, Live),
        ],
    );
    eprintln!("[swarm] lag: {polled} polls saw the scale to 0 before its event");
    done(&w, "lag", started);
}

/// Readiness off (the default, even with a `readiness_poll` set): no poll at
/// all — one service list, the dial's, without `status=true` — no `ready`,
/// no readiness detail, and the events as they always were.
#[tokio::test]
async fn without_readiness_nothing_is_polled() {
    let relay = Relay::start(&engines::docker_host());
    let started = Instant::now();
    let Some(_locks) = require(false) else { return };
    let s = Services::new("off");
    let config = SwarmConfig::default()
        .host(relay.host())
        .labels(s.filter())
        .watch_config(test_config())
        .readiness_poll(Duration::from_millis(200));
    let mut w = Watcher::from_watch(lookout_swarm::watch(config).expect("a valid host"));
    w.connected().await;
    let a = s.create("a", true, &["--replicas", "1"]);
    w.events_until(&a, Started).await;
    // Its task runs: with readiness, it would be ready by now (10 polls).
    all_tasks_run(&a).await;
    let ran = Instant::now();
    while ran.elapsed() < Duration::from_secs(2) {
        w.try_next(Duration::from_millis(100)).await;
    }
    docker(&["service", "rm", &a]);
    w.events_until(&a, Removed).await;
    w.assert_events(&a, &[(Created, Live), (Started, Live), (Removed, Live)]);
    for item in &w.seen {
        if let Item::Event(e) = item {
            assert_eq!(e.readiness, None, "{e:?}");
        }
    }
    let requests = relay.requests_unversioned();
    let lists: Vec<&String> = requests
        .iter()
        .map(|(_, r)| r)
        .filter(|r| r.starts_with("GET /services?") || r.as_str() == "GET /services")
        .collect();
    assert!(
        lists.len() == 1 && !lists[0].contains("status=true"),
        "{lists:?}"
    );
    eprintln!(
        "[swarm] off: {} requests: {:?}",
        requests.len(),
        requests
            .iter()
            .map(|(_, r)| audit::short_path(r))
            .collect::<Vec<_>>()
    );
    done(&w, "off", started);
}

/// Dropping the stream stops the poll: its connections close within 100 ms
/// (while polling, and while a poll hangs on an engine that accepts but
/// does not answer), no request follows, no task is left.
#[tokio::test]
async fn dropping_the_stream_stops_the_poll() {
    let Some(_locks) = require(false) else { return };
    let s = Services::new("pdrop");
    let relay = Relay::start(&engines::docker_host());
    assert_eq!(tasks(), 0);
    let poll = Duration::from_millis(200);

    let mut w = ready_watcher(relay.host(), s.filter(), test_config(), poll);
    w.connected().await;
    let connected = SystemTime::now();
    drive_until_polls(&mut w, &relay, connected, 3).await;
    dropped_and_closed(&relay, w, "while polling").await;
    let before = relay.counts();
    let after = relay
        .wait(10 * poll, |c| c.requests > before.requests)
        .await;
    assert!(after.is_err(), "a request after the drop: {after:?}");

    // A poll on a connection the engine never answers.
    let mut w = ready_watcher(
        relay.host(),
        s.filter(),
        test_config().probe_after(Duration::from_secs(20)),
        poll,
    );
    w.connected().await;
    relay.hold(true);
    let before = relay.counts().accepted;
    tokio::select! {
        item = w.next(ITEM) => panic!("a held poll yielded {item:?}"),
        held = relay.wait(ITEM, |c| c.accepted > before && c.live == 2) => {
            held.unwrap_or_else(|c| panic!("the poll never connected: {c:?}"));
        }
    }
    dropped_and_closed(&relay, w, "while a poll hangs").await;
    relay.hold(false);
}

/// The engine goes away for new requests (the relay refuses them; the
/// `/events` stream stays open): the next poll fails, the watch disconnects
/// on it and redials like after any session failure; once the engine is
/// back, it connects again, nothing is told twice, and the polls go on (a
/// scale is `unready`, then `ready`: the new replica's check passes after
/// 2 s, so the poll soon after the scale cannot miss its `unready`).
#[tokio::test]
async fn a_failing_poll_disconnects_and_recovers() {
    let relay = Relay::start(&engines::docker_host());
    let Some((started, _locks, s, mut w, _)) = start_ready("pfail", &relay).await else {
        return;
    };
    let plain = s.create_spec("plain", &replicated(1), &SLOW_START, Some(late_check()));
    w.events_until(&plain, Ready).await;
    relay.refuse(true);
    let error = w.disconnected(ITEM).await;
    assert!(
        error.to_string().contains("/services"),
        "the poll failed: {error}"
    );
    relay.refuse(false);
    assert_eq!(w.connected().await, 1);
    let reconnected = SystemTime::now();
    Services::scale(&plain, 2);
    let scaled = SystemTime::now();
    // The new replica cannot be ready before its check passes (2 s): the
    // poll soon after the scale sees 1 of 2. Should nothing come, say what
    // the poll did since the reconnect and what the tasks were.
    let deadline = Instant::now() + ITEM;
    loop {
        if let Some(Item::Event(e)) = w.try_next(Duration::from_millis(100)).await
            && e.id.as_str() == plain
            && e.kind == Unready
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{}",
            stalled(&relay, &plain, reconnected, scaled, &w)
        );
    }
    w.events_until(&plain, Ready).await;
    docker(&["service", "rm", &plain]);
    w.events_until(&plain, Removed).await;
    w.assert_events(
        &plain,
        &[
            (Created, Live),
            (Started, Live),
            (Ready, Resync),
            (Unready, Resync),
            (Ready, Resync),
            (Removed, Live),
        ],
    );
    eprintln!("[swarm] pfail: disconnected on {error}");
    scenarios::report_as("swarm", "pfail", started, &w);
}

/// Why no `unready` came after a scale: the polls (ms after the scale)
/// since the reconnect, the service's tasks, and what the watch yielded.
fn stalled(
    relay: &Relay,
    name: &str,
    reconnected: SystemTime,
    scaled: SystemTime,
    w: &Watcher,
) -> String {
    let polls: Vec<i128> = polls(relay, reconnected)
        .into_iter()
        .map(|p| match p.duration_since(scaled) {
            Ok(after) => i128::try_from(after.as_millis()).unwrap_or(i128::MAX),
            Err(before) => -i128::try_from(before.duration().as_millis()).unwrap_or(i128::MAX),
        })
        .collect();
    let tasks = docker(&[
        "service",
        "ps",
        "--format",
        "{{.Name}} {{.CurrentState}}",
        name,
    ]);
    format!(
        "no unready after the scale: polls since the reconnect (ms after the scale) {polls:?}; \
         tasks: {tasks}; yielded: {}",
        w.summary()
    )
}

/// What the poll costs. Nothing changes: one poll every `readiness_poll`
/// (here 250 ms), never faster. A change: one poll within 1 s even with a
/// poll of 1 h, and no other. And the bytes of one poll, for 10 services.
#[tokio::test]
async fn the_poll_runs_every_interval_and_soon_after_a_change() {
    let relay = Relay::start(&engines::docker_host());
    let started = Instant::now();
    let Some(_locks) = require(false) else { return };
    let s = Services::new("cost");
    for i in 0..10 {
        s.create_spec(
            &format!("idle{i}"),
            &replicated(0),
            &["sleep", "3600"],
            None,
        );
    }

    // Nothing changes: the interval.
    let every = Duration::from_millis(250);
    let mut w = ready_watcher(relay.host(), s.filter(), test_config(), every);
    assert_eq!(w.connected().await, 10);
    let connected = (Instant::now(), SystemTime::now());
    drive_until_polls(&mut w, &relay, connected.1, 9).await;
    let nine = connected.0.elapsed();
    assert!(nine >= 8 * every, "9 polls in {nine:?}");
    let path = relay
        .requests_unversioned()
        .into_iter()
        .rev()
        .find(|(_, r)| r.starts_with("GET /services?status=true"))
        .map(|(_, r)| r["GET ".len()..].to_owned())
        .expect("a poll");
    let (status, body) = api("GET", &path, None);
    assert_eq!(status, 200);
    drop(w);

    // A change: one poll soon, however long the interval.
    let mut w = ready_watcher(
        relay.host(),
        s.filter(),
        test_config(),
        Duration::from_secs(3600),
    );
    w.connected().await;
    let connected = SystemTime::now();
    let a = s.create("a", true, &["--replicas", "1"]);
    w.events_until(&a, Started).await;
    let told = SystemTime::now();
    drive_until_polls(&mut w, &relay, connected, 1).await;
    let soon = polls(&relay, connected)[0]
        .duration_since(told)
        .unwrap_or_default();
    assert!(
        soon <= Duration::from_millis(1500),
        "polled {soon:?} after the change"
    );
    Services::scale(&a, 2);
    let scaled = SystemTime::now();
    drive_until_polls(&mut w, &relay, scaled, 1).await;
    let soon_scaled = polls(&relay, scaled)[0]
        .duration_since(scaled)
        .unwrap_or_default();
    assert!(
        soon_scaled <= Duration::from_millis(1500),
        "polled {soon_scaled:?} after the scale"
    );
    let quiet = Instant::now();
    while quiet.elapsed() < Duration::from_secs(2) {
        w.try_next(Duration::from_millis(100)).await;
    }
    assert_eq!(polls(&relay, connected).len(), 2, "one poll per change");
    eprintln!(
        "[swarm] cost: 9 polls every {every:?} in {nine:.1?}; a poll {soon:.1?} after a \
         creation and {soon_scaled:.1?} after a scale with a 1 h interval; one poll of 10 \
         services: {} bytes ({} a service)",
        body.len(),
        body.len() / 10
    );
    scenarios::report_as("swarm", "cost", started, &w);
}
