//! The end-to-end scenarios every engine speaking the Docker API passes
//! (`tests/docker.rs`, `tests/podman.rs`): one body per scenario, an
//! [`Engine`] per engine.
//!
//! Every function here fails the test by panicking, as assertions do.
#![allow(clippy::missing_panics_doc)]

use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use EventKind::{Created, Removed, Started, Stopped};
use Origin::Live;
use lookout_core::{
    Dial, Error, EventKind, InstanceEvent, Item, Labels, Origin, ReconnectPolicy, Status, Watch,
    WatchConfig,
};
use lookout_moby::{CompatDial, Config, ConfigError};
use tokio_stream::StreamExt;

use super::Relay;
use super::audit::{self, EventLog, SplitMix64, State, Timed, Workload};
use crate::engines;

/// Runs one healthcheck of a container (by name).
pub type RunCheck = fn(&str) -> Result<(), String>;

/// How a scenario drives one engine.
#[derive(Debug)]
pub struct Engine {
    /// `docker` or `podman`: the lock's and the `cargo xtask engines up` name.
    pub name: &'static str,
    /// The engine's endpoint (`unix://…`).
    pub host: fn() -> String,
    /// Makes the engine usable (starts it if it is ours to start, builds the image).
    pub up: fn() -> Result<(), String>,
    /// Runs the engine's CLI.
    pub cli: fn(&[&str]) -> Result<String, String>,
    /// Signals the engine's daemon (`STOP`, `CONT`).
    pub signal: fn(&str) -> Result<(), String>,
    /// Takes the daemon down while `containers` run, and brings it back with
    /// them stopped.
    pub restart_stopping: fn(containers: &[&str]) -> Result<(), String>,
    /// The provider's `watch` (`lookout_docker::watch`, `lookout_podman::watch`).
    pub watch: fn(Config) -> Result<Watch<CompatDial>, ConfigError>,
    /// Runs a container's healthcheck once, now, for an engine that runs
    /// none by itself (Podman without systemd: `podman healthcheck run`);
    /// `None` when the engine's own interval runs them (Docker).
    pub run_check: Option<RunCheck>,
    /// The engine keeps its event log across a restart of its daemon
    /// (Podman's file; dockerd keeps its last events in memory only).
    pub keeps_history: bool,
    /// The engine logs the request of every `stop` before its `die`
    /// (Docker's `kill`): lookout tells `stopping` first. Podman 4.3 logs
    /// nothing for `stop -t N`, and for `stop -t 0` a `kill` that may come
    /// before the `died` or after it (measured): `stopping` may be told.
    pub logs_stop: bool,
}

impl Engine {
    /// What lookout tells of a running container that `stop` ends:
    /// `stopping`, `stopped` where the engine logs the request, else
    /// `stopped`.
    pub fn stop_kinds(&self) -> &'static [EventKind] {
        if self.logs_stop {
            &[EventKind::Stopping, EventKind::Stopped]
        } else {
            &[EventKind::Stopped]
        }
    }

    /// Whether the engine may or may not let lookout tell `kind` before a
    /// stop (`stopping`, where it does not log every request): the
    /// scenarios' exact sequences leave it out there.
    pub fn optional(&self, kind: EventKind) -> bool {
        kind == EventKind::Stopping && !self.logs_stop
    }

    /// `events` without what [`optional`](Self::optional) leaves out.
    pub fn told<T>(&self, events: Vec<(EventKind, T)>) -> Vec<(EventKind, T)> {
        events
            .into_iter()
            .filter(|(kind, _)| !self.optional(*kind))
            .collect()
    }
}

/// `kill -9` dockerd and start it again: without live-restore, the restarted
/// daemon stops the containers that ran.
fn docker_restart_stopping(_containers: &[&str]) -> Result<(), String> {
    engines::docker_kill9()?;
    engines::docker_start()
}

/// The real dockerd, as the scenarios (and the hub's tests) drive it.
pub static DOCKER: Engine = Engine {
    name: "docker",
    host: engines::docker_host,
    up: engines::docker_up,
    cli: engines::docker,
    signal: engines::docker_signal,
    restart_stopping: docker_restart_stopping,
    watch: lookout_docker::watch,
    run_check: None,
    keeps_history: false,
    logs_stop: true,
};

/// `kill -9` the API service, stop the containers with the CLI (which needs
/// no service; none to stop: no `stop`, which would fail), start the
/// service again (even when the stop failed).
fn podman_restart_stopping(containers: &[&str]) -> Result<(), String> {
    engines::podman_kill9()?;
    let stopped = if containers.is_empty() {
        Ok(())
    } else {
        let mut stop = vec!["stop", "-t", "0"];
        stop.extend_from_slice(containers);
        engines::podman(&stop).map(drop)
    };
    let started = engines::podman_start();
    stopped.and(started)
}

/// `podman healthcheck run NAME`: exit 0 healthy, 1 unhealthy, anything
/// else an error (Podman runs no check by itself here: no systemd timers).
fn podman_run_check(name: &str) -> Result<(), String> {
    let mut cmd = engines::podman_command()?;
    cmd.args(["healthcheck", "run", name]);
    let out = engines::run_output(&mut cmd, Duration::from_secs(60))?;
    match out.status.code() {
        Some(0 | 1) => Ok(()),
        other => Err(format!(
            "podman healthcheck run {name}: exit {other:?}: {}",
            out.stderr.trim()
        )),
    }
}

/// The real Podman API service, as the scenarios drive it.
pub static PODMAN: Engine = Engine {
    name: "podman",
    host: engines::podman_host,
    up: engines::podman_up,
    cli: engines::podman,
    signal: engines::podman_signal,
    restart_stopping: podman_restart_stopping,
    watch: lookout_podman::watch,
    run_check: Some(podman_run_check),
    keeps_history: true,
    logs_stop: false,
};

/// Defines one `#[tokio::test]` per scenario for the [`Engine`] at `$engine`
/// (a `static`).
#[macro_export]
macro_rules! compat_engine_tests {
    ($engine:path) => {
        #[tokio::test]
        async fn lifecycle_is_reported_once_in_order_with_labels() {
            $crate::relay::scenarios::lifecycle(&$engine).await;
        }

        #[tokio::test]
        async fn a_daemon_restart_reports_the_stop_once() {
            $crate::relay::scenarios::daemon_restart(&$engine).await;
        }

        #[tokio::test]
        async fn a_connection_blip_replays_what_was_missed_once() {
            $crate::relay::scenarios::blip(&$engine).await;
        }

        #[tokio::test]
        async fn behind_a_versioned_only_proxy_a_lifecycle_and_its_replay_pass() {
            $crate::relay::scenarios::versioned_proxy(&$engine).await;
        }

        #[tokio::test]
        async fn a_stalled_daemon_is_detected_and_recovered() {
            $crate::relay::scenarios::stall(&$engine).await;
        }

        #[tokio::test]
        async fn dropping_the_stream_closes_its_connections() {
            $crate::relay::scenarios::drop_closes(&$engine).await;
        }

        #[tokio::test]
        async fn an_undecodable_event_is_skipped_without_replay() {
            $crate::relay::scenarios::poison(&$engine).await;
        }

        #[tokio::test]
        async fn a_stop_just_before_the_redial_is_not_undone_by_the_snapshot() {
            $crate::relay::scenarios::stop_at_redial(&$engine).await;
        }

        #[tokio::test]
        async fn a_churn_cut_three_times_matches_the_engine_log() {
            $crate::relay::scenarios::churn(&$engine).await;
        }

        #[tokio::test]
        async fn a_churn_with_a_daemon_restart_matches_the_engine_log() {
            $crate::relay::scenarios::churn_restart(&$engine).await;
        }

        #[tokio::test]
        async fn why_each_stop_says_its_outcome_beside_inspect() {
            $crate::relay::why::outcomes(&$engine).await;
        }

        #[tokio::test]
        async fn why_the_restart_policy_is_told_on_each_stop() {
            $crate::relay::why::restarts(&$engine).await;
        }

        #[tokio::test]
        async fn why_a_stop_missed_while_cut_comes_with_inspects_reason() {
            $crate::relay::why::missed(&$engine).await;
        }

        #[tokio::test]
        async fn why_a_failing_check_is_told_in_its_own_words() {
            $crate::relay::why::failing_check(&$engine).await;
        }

        #[tokio::test]
        async fn readiness_follows_the_healthcheck_and_the_lifecycle() {
            $crate::relay::readiness::lifecycle(&$engine).await;
        }

        #[tokio::test]
        async fn readiness_matches_the_engine_health_log() {
            $crate::relay::readiness::health_log(&$engine).await;
        }

        #[tokio::test]
        async fn readiness_follows_pause_and_unpause() {
            $crate::relay::readiness::pause(&$engine).await;
        }

        #[tokio::test]
        async fn readiness_changed_while_cut_is_told_once() {
            $crate::relay::readiness::cut(&$engine).await;
        }

        #[tokio::test]
        async fn readiness_changed_across_a_daemon_restart_is_told_once() {
            $crate::relay::readiness::daemon_restart(&$engine).await;
        }

        #[tokio::test]
        async fn readiness_is_told_by_the_initial_snapshot() {
            $crate::relay::readiness::initial(&$engine).await;
        }
    };
}

/// The short timings every scenario uses. No relist but the ones a scenario
/// causes: not the periodic one, nor the one for consumer lag (a scenario's
/// thread blocks in engine commands between polls, a daemon restart for
/// seconds; the lag relist is tested on paused time and by the soak).
pub fn test_config() -> WatchConfig {
    WatchConfig::default()
        .probe_after(Duration::from_secs(2))
        .probe_timeout(Duration::from_secs(1))
        .dial_timeout(Duration::from_secs(2))
        .resync_every(None)
        .resync_after_lag(None)
        .reconnect(
            ReconnectPolicy::default()
                .initial_delay(Duration::from_millis(100))
                .max_delay(Duration::from_secs(1)),
        )
}

/// The bound of every single expected item.
pub const ITEM: Duration = Duration::from_secs(30);

/// Brings the engine up (or checks it is), or fails saying why; `None`
/// when the run has no engines (the test returns: see [`engines::skips`]).
///
/// # Panics
/// When bringing it up fails.
#[must_use]
pub fn require(engine: &Engine) -> Option<()> {
    if engines::skips(engine.name) {
        return None;
    }
    (engine.up)().unwrap_or_else(|e| panic!("{}: cannot bring the engine up: {e}", engine.name));
    Some(())
}

/// The containers of one test: each carries `lookout.cleanup=<tag>`, and the
/// guard removes them all on drop (`rm -f`), whatever the test did.
#[derive(Debug)]
pub struct Containers {
    engine: &'static Engine,
    tag: String,
}

impl Containers {
    /// A guard for the test `test`; the tag is unique per test and process.
    pub fn new(engine: &'static Engine, test: &str) -> Self {
        let c = Self {
            engine,
            tag: format!("{test}-{}", std::process::id()),
        };
        c.remove_all();
        c
    }

    /// The test's tag: container names start with it.
    pub fn tag(&self) -> &str {
        &self.tag
    }

    /// The label filter of the test's watch: `lookout.test=<tag>`.
    pub fn filter(&self) -> Labels {
        Labels::from([("lookout.test".to_owned(), self.tag.clone())])
    }

    /// The labels a watched (labelled) container carries.
    pub fn labels(&self) -> Labels {
        Labels::from([
            ("lookout.test".to_owned(), self.tag.clone()),
            ("lookout.cleanup".to_owned(), self.tag.clone()),
        ])
    }

    /// Creates `<tag>-<suffix>`: with the watch's label when `watched`, else
    /// only with the cleanup label. Returns its name.
    pub fn create(&self, suffix: &str, watched: bool) -> String {
        let name = format!("{}-{suffix}", self.tag);
        let cleanup = format!("lookout.cleanup={}", self.tag);
        let test = format!("lookout.test={}", self.tag);
        let image = engines::test_image();
        let mut args = vec!["create", "--name", &name, "--label", &cleanup];
        if watched {
            args.extend(["--label", &test]);
        }
        args.extend(["--network", "none", &image, "sleep", "3600"]);
        self.cli(&args);
        name
    }

    /// Runs the engine's CLI, failing the test on error.
    pub fn cli(&self, args: &[&str]) -> String {
        (self.engine.cli)(args)
            .unwrap_or_else(|e| panic!("{}: {args:?} failed: {e}", self.engine.name))
    }

    fn remove_all(&self) {
        let filter = format!("label=lookout.cleanup={}", self.tag);
        if let Ok(ids) = (self.engine.cli)(&["ps", "-aq", "--filter", &filter]) {
            let ids: Vec<&str> = ids.split_whitespace().collect();
            if ids.is_empty() {
                return;
            }
            // SIGKILL first: Podman's `rm -f` would wait out the stop timeout
            // (busybox as PID 1 ignores SIGTERM).
            let _ = (self.engine.cli)(&[["kill"].as_slice(), &ids].concat());
            let _ = (self.engine.cli)(&[["rm", "-f"].as_slice(), &ids].concat());
        }
    }
}

impl Drop for Containers {
    fn drop(&mut self) {
        self.remove_all();
    }
}

/// Sends `CONT` to the daemon on drop, so that a failing stall test never
/// leaves it stopped.
#[derive(Debug)]
struct Continue(&'static Engine);

impl Drop for Continue {
    fn drop(&mut self) {
        let _ = (self.0.signal)("CONT");
    }
}

/// A watch under test, with everything it yielded.
/// A watch under test (of any provider's dial), with everything it yielded.
pub struct Watcher<D: Dial = CompatDial> {
    watch: Watch<D>,
    /// Every item so far.
    pub seen: Vec<Item>,
}

impl<D: Dial> std::fmt::Debug for Watcher<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watcher")
            .field("seen", &self.seen)
            .finish_non_exhaustive()
    }
}

impl Watcher {
    /// Watches the engine at `host`.
    pub fn new(engine: &Engine, host: String, labels: Labels, config: WatchConfig) -> Self {
        let config = Config::default()
            .host(host)
            .labels(labels)
            .watch_config(config);
        Self::from_watch(
            (engine.watch)(config).unwrap_or_else(|e| panic!("{}: a valid host: {e}", engine.name)),
        )
    }
}

impl<D: Dial> Watcher<D> {
    /// Records what `watch` yields.
    pub fn from_watch(watch: Watch<D>) -> Self {
        Self {
            watch,
            seen: Vec::new(),
        }
    }

    /// Everything it yielded, one line per item (for a failure message).
    pub fn summary(&self) -> String {
        summary(&self.seen)
    }

    /// Asserts the events of `id`, with everything seen when they differ.
    pub fn assert_events(&self, id: &str, expected: &[(EventKind, Origin)]) {
        assert_eq!(self.events_of(id), expected, "{}", self.summary());
    }

    /// [`assert_events`](Self::assert_events), without the events
    /// `engine` may or may not let lookout tell ([`Engine::optional`]).
    pub fn assert_told(&self, engine: &Engine, id: &str, expected: &[(EventKind, Origin)]) {
        assert_eq!(
            engine.told(self.events_of(id)),
            expected,
            "{}",
            self.summary()
        );
    }

    /// The next item, at most `timeout` away.
    ///
    /// # Panics
    /// On timeout, or if the stream ends.
    pub async fn next(&mut self, timeout: Duration) -> Item {
        let item = tokio::time::timeout(timeout, self.watch.next())
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "no item within {timeout:?}; so far: {}",
                    summary(&self.seen)
                )
            })
            .expect("the watch stream never ends");
        self.seen.push(item.clone());
        item
    }

    /// The next item if one comes within `timeout` (recorded as
    /// [`next`](Self::next) records it), else `None`: to drive the watch
    /// while waiting for something else.
    ///
    /// # Panics
    /// If the stream ends.
    pub async fn try_next(&mut self, timeout: Duration) -> Option<Item> {
        let item = tokio::time::timeout(timeout, self.watch.next())
            .await
            .ok()?
            .expect("the watch stream never ends");
        self.seen.push(item.clone());
        Some(item)
    }

    /// Waits for the next `Connected`.
    pub async fn connected(&mut self) -> usize {
        loop {
            if let Item::Status(Status::Connected { instances }) = self.next(ITEM).await {
                return instances;
            }
        }
    }

    /// Waits for the next `Disconnected`, at most `timeout` away.
    pub async fn disconnected(&mut self, timeout: Duration) -> Arc<Error> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if let Item::Status(Status::Disconnected { error, .. }) = self.next(left).await {
                return error;
            }
        }
    }

    /// Collects the events of `id` until one of kind `until`.
    pub async fn events_until(&mut self, id: &str, until: EventKind) -> Vec<InstanceEvent> {
        let mut events = Vec::new();
        loop {
            if let Item::Event(e) = self.next(ITEM).await
                && e.id.as_str() == id
            {
                let done = e.kind == until;
                events.push(e);
                if done {
                    return events;
                }
            }
        }
    }

    /// Waits until `done` holds for everything yielded so far.
    pub async fn wait_until(&mut self, done: impl Fn(&Self) -> bool) {
        while !done(self) {
            self.next(ITEM).await;
        }
    }

    /// How many `Disconnected` statuses it yielded.
    pub fn disconnects(&self) -> usize {
        self.seen
            .iter()
            .filter(|i| matches!(i, Item::Status(Status::Disconnected { .. })))
            .count()
    }

    /// The events it yielded about `id`.
    pub fn events_of(&self, id: &str) -> Vec<(EventKind, Origin)> {
        self.seen
            .iter()
            .filter_map(|i| match i {
                Item::Event(e) if e.id.as_str() == id => Some((e.kind, e.origin)),
                _ => None,
            })
            .collect()
    }
}

fn summary(items: &[Item]) -> String {
    let lines: Vec<String> = items
        .iter()
        .map(|i| match i {
            Item::Event(e) => format!("{} {} ({})", e.id, e.kind, e.origin),
            Item::Status(Status::Connected { instances }) => format!("connected ({instances})"),
            Item::Status(Status::Disconnected { error, attempt, .. }) => {
                format!("disconnected #{attempt}: {error}")
            }
            Item::Status(Status::Lagged { missed }) => format!("lagged ({missed})"),
            Item::Status(other) => format!("{other:?}"),
        })
        .collect();
    format!("[{}]", lines.join("; "))
}

/// Prints what a scenario saw (shown with `--nocapture`).
fn report(engine: &Engine, scenario: &str, started: Instant, w: &Watcher) {
    report_as(engine.name, scenario, started, w);
}

/// Prints what a test of `who` saw (shown with `--nocapture`).
pub fn report_as<D: Dial>(who: &str, test: &str, started: Instant, w: &Watcher<D>) {
    eprintln!(
        "[{who}] {test} in {:.1?}: {}",
        started.elapsed(),
        w.summary()
    );
}

/// Drops `w` and waits (at most 100 ms) for the relay to see every
/// connection it opened closed; no task may be left on the runtime.
///
/// # Panics
/// When a connection stays open, or a task is left.
pub async fn dropped_and_closed<D: Dial>(relay: &Relay, w: Watcher<D>, while_: &str) {
    const CLOSED: Duration = Duration::from_millis(100);
    assert_eq!(tasks(), 0, "the watch spawned a task");
    drop(w);
    relay
        .wait(CLOSED, |c| c.live == 0)
        .await
        .unwrap_or_else(|c| panic!("dropped {while_}, still open after {CLOSED:?}: {c:?}"));
    assert_eq!(tasks(), 0);
}

/// Waits for the watch to connect through `relay` and hold exactly one
/// connection open (its `/events` subscription).
///
/// # Panics
/// When it does not connect, or holds another number of connections.
pub async fn streaming_on_one_connection<D: Dial>(relay: &Relay, w: &mut Watcher<D>) {
    w.connected().await;
    relay
        .wait(Duration::from_secs(2), |c| c.live == 1)
        .await
        .unwrap_or_else(|c| panic!("streaming holds one connection: {c:?}"));
}

fn kinds(events: &[InstanceEvent]) -> Vec<(EventKind, Origin)> {
    events.iter().map(|e| (e.kind, e.origin)).collect()
}

/// The tasks alive on the current runtime (the library spawns none; the
/// relay runs on a runtime of its own).
pub fn tasks() -> usize {
    tokio::runtime::Handle::current()
        .metrics()
        .num_alive_tasks()
}

/// Create, start, stop, remove a labelled container: exactly `Created`,
/// `Started`, `Stopped`, `Removed`, once each, in order, live, with its
/// labels; an unlabelled container worked on meanwhile never shows.
pub async fn lifecycle(engine: &'static Engine) {
    lifecycle_with(engine, test_config()).await;
}

/// [`lifecycle`] with the watch's `config` (an engine reached over ssh
/// needs longer dial and probe timeouts: each request is one ssh).
pub async fn lifecycle_with(engine: &'static Engine, config: WatchConfig) {
    let started = Instant::now();
    let Some(()) = require(engine) else { return };
    let _lock = engines::lock_engine(engine.name, false).expect("engine lock");
    let c = Containers::new(engine, "lifecycle");
    let mut w = Watcher::new(engine, (engine.host)(), c.filter(), config);
    w.connected().await;
    let a = c.create("a", true);
    let b = c.create("b", false);
    c.cli(&["start", &a]);
    c.cli(&["start", &b]);
    c.cli(&["stop", "-t", "0", &b]);
    c.cli(&["rm", &b]);
    c.cli(&["stop", "-t", "0", &a]);
    let inspected = c.cli(&["inspect", "--format", "{{json .Config.Labels}}", &a]);
    let engine_labels: Labels = serde_json::from_str(&inspected)
        .unwrap_or_else(|e| panic!("labels of {a}: {e}: {inspected}"));
    c.cli(&["rm", &a]);
    let events = w.events_until(&a, EventKind::Removed).await;
    let mut expected = vec![Created, Started];
    expected.extend(engine.stop_kinds());
    expected.push(Removed);
    assert_eq!(
        engine.told(kinds(&events)),
        expected
            .into_iter()
            .map(|k| (k, Origin::Live))
            .collect::<Vec<_>>(),
        "{}",
        summary(&w.seen)
    );
    // The container's labels exactly (the image's included), none of the
    // event's other attributes.
    let ours = c.labels();
    assert!(ours.iter().all(|(k, v)| engine_labels.get(k) == Some(v)));
    for e in &events {
        assert_eq!(*e.labels, engine_labels, "labels of {} {}", e.id, e.kind);
    }
    // Events arrive in order: anything about `b` would have come before `a`'s removal.
    assert!(w.events_of(&b).is_empty(), "{}", summary(&w.seen));
    assert_eq!(w.disconnects(), 0, "{}", summary(&w.seen));
    report(engine, "lifecycle", started, &w);
}

/// The daemon goes away while containers run and comes back with them
/// stopped: each stop is reported exactly once — `a` was only ever listed,
/// `b` was seen live (so the redial resumes with `since` and the engine
/// replays what it still has) — and live events flow after.
pub async fn daemon_restart(engine: &'static Engine) {
    let started = Instant::now();
    let Some(()) = require(engine) else { return };
    let _lock = engines::lock_engine(engine.name, true).expect("engine lock");
    let c = Containers::new(engine, "restart");
    let a = c.create("a", true);
    c.cli(&["start", &a]);
    let mut w = Watcher::new(engine, (engine.host)(), c.filter(), test_config());
    assert_eq!(w.connected().await, 1, "the running container is listed");
    let b = c.create("b", true);
    c.cli(&["start", &b]);
    w.events_until(&b, EventKind::Started).await;
    (engine.restart_stopping)(&[a.as_str(), b.as_str()])
        .unwrap_or_else(|e| panic!("{}: {e}", engine.name));
    let stopped = |w: &Watcher, id: &str| w.events_of(id).iter().any(|e| e.0 == EventKind::Stopped);
    w.wait_until(|w| stopped(w, &a) && stopped(w, &b)).await;
    // The daemon is back: live removals must come through.
    c.cli(&["rm", "-f", &a]);
    c.cli(&["rm", "-f", &b]);
    w.events_until(&b, EventKind::Removed).await;
    // Podman's `stop` of the stopped service may log its `kill` first.
    let kinds_of =
        |id: &str| -> Vec<EventKind> { engine.told(w.events_of(id)).iter().map(|e| e.0).collect() };
    assert_eq!(kinds_of(&a), [Stopped, Removed], "{}", summary(&w.seen));
    assert_eq!(
        kinds_of(&b),
        [Created, Started, Stopped, Removed],
        "{}",
        summary(&w.seen)
    );
    assert!(w.disconnects() >= 1, "{}", summary(&w.seen));
    report(engine, "daemon_restart", started, &w);
}

/// The connection drops while a watched container stops, starts and stops
/// again: the redial first reads the engine's history since the cursor (a
/// request that ends by itself), finds the last event seen in it
/// (continuity), and reports what it missed as exact transitions, live, in
/// order, before the resync's `Connected`; the list then finds nothing
/// more, and the new subscription starts where the history ended.
pub async fn blip(engine: &'static Engine) {
    let started = Instant::now();
    let Some(()) = require(engine) else { return };
    let _lock = engines::lock_engine(engine.name, false).expect("engine lock");
    let relay = Relay::start(&(engine.host)());
    let w = blip_through(engine, &relay, "blip").await;
    report(engine, "blip", started, &w);
}

/// [`blip`]'s body through `relay`, its containers tagged `test`.
async fn blip_through(engine: &'static Engine, relay: &Relay, test: &str) -> Watcher {
    let c = Containers::new(engine, test);
    let mut w = Watcher::new(engine, relay.host(), c.filter(), test_config());
    w.connected().await;
    let a = c.create("a", true);
    c.cli(&["start", &a]);
    w.events_until(&a, EventKind::Started).await;
    relay.cut_and_wait(ITEM).await;
    // Nothing polls the watch meanwhile: all of this happens while it is
    // disconnected.
    c.cli(&["stop", "-t", "0", &a]);
    c.cli(&["start", &a]);
    c.cli(&["stop", "-t", "0", &a]);
    w.connected().await;
    c.cli(&["rm", &a]);
    w.events_until(&a, EventKind::Removed).await;
    let mut expected = vec![Created, Started];
    expected.extend(engine.stop_kinds());
    expected.push(Started);
    expected.extend(engine.stop_kinds());
    expected.push(Removed);
    assert_eq!(
        engine.told(w.events_of(&a)),
        expected.into_iter().map(|k| (k, Live)).collect::<Vec<_>>(),
        "{}",
        summary(&w.seen)
    );
    // The replayed stop/start/stop came before the redial's Connected.
    let connected = w
        .seen
        .iter()
        .rposition(|i| matches!(i, Item::Status(Status::Connected { .. })))
        .expect("connected");
    let replayed = w.seen[..connected]
        .iter()
        .filter(|i| matches!(i, Item::Event(e) if e.id.as_str() == a && !engine.optional(e.kind)))
        .count();
    assert_eq!(
        replayed,
        3 + 2 * engine.stop_kinds().len(),
        "{}",
        summary(&w.seen)
    );
    // Each dial makes two /events requests: the history (since the cursor;
    // the first dial: of the last 2 s), then the subscription. Two dials: 4.
    assert_eq!(relay.counts().events_requests, 4, "one redial");
    w
}

/// Behind a proxy that refuses every unversioned path but `/_ping` (the
/// relay's [`versioned_only`](Relay::versioned_only)): [`blip`] passes (a
/// lifecycle comes live, what a cut missed is replayed exactly), every request went to
/// `/v{X}/…` with `X` the engine's `Api-Version` (what its `/_ping` says),
/// and the proxy does refuse an unversioned request.
pub async fn versioned_proxy(engine: &'static Engine) {
    let started = Instant::now();
    let Some(()) = require(engine) else { return };
    let _lock = engines::lock_engine(engine.name, false).expect("engine lock");
    let relay = Relay::start(&(engine.host)());
    relay.versioned_only(true);
    // The engine's own version: the `Api-Version` of its `/_ping`, read
    // here on its socket (Podman's CLI tells its libpod version instead).
    let host = (engine.host)();
    let socket = std::path::Path::new(host.strip_prefix("unix://").expect("a unix host"));
    let ping = raw_get(socket, "/_ping").await;
    let version = ping
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("api-version")
                .then(|| value.trim().to_owned())
        })
        .unwrap_or_else(|| panic!("no Api-Version in {ping}"));
    // A lifecycle, and the replay of what a cut missed, as in `blip`.
    let w = blip_through(engine, &relay, "versioned").await;
    let targets = relay.targets();
    let prefix = format!("/v{version}/");
    let stray = super::not_under_version(&targets, &version);
    assert!(stray.is_empty(), "not under {prefix}: {stray:?}");
    assert!(
        targets
            .iter()
            .any(|t| t.starts_with(&format!("{prefix}events?"))),
        "{targets:?}"
    );
    // The proxy refuses what is not versioned.
    let refused = raw_get(relay.path(), "/containers/json").await;
    assert!(refused.starts_with("HTTP/1.1 403"), "{refused}");
    report(engine, "versioned_proxy", started, &w);
}

/// The start of the answer to a plain `GET path` on `socket` (its head).
pub async fn raw_get(socket: &std::path::Path, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let answer = tokio::time::timeout(ITEM, async {
        let mut conn = tokio::net::UnixStream::connect(socket).await?;
        conn.write_all(format!("GET {path} HTTP/1.1\r\nHost: d\r\n\r\n").as_bytes())
            .await?;
        let mut head = vec![0u8; 1024];
        let n = conn.read(&mut head).await?;
        head.truncate(n);
        Ok::<_, std::io::Error>(String::from_utf8_lossy(&head).into_owned())
    })
    .await;
    match answer {
        Ok(Ok(head)) => head,
        Ok(Err(e)) => panic!("GET {path} on {}: {e}", socket.display()),
        Err(late) => panic!("GET {path} on {}: {late} ({ITEM:?})", socket.display()),
    }
}

/// A stopped (`SIGSTOP`) daemon is noticed by the probe within
/// `probe_after + probe_timeout`; once continued, events flow again.
pub async fn stall(engine: &'static Engine) {
    let started = Instant::now();
    let Some(()) = require(engine) else { return };
    let _lock = engines::lock_engine(engine.name, true).expect("engine lock");
    let c = Containers::new(engine, "stall");
    let config = test_config();
    let bound = config.get_probe_after() + config.get_probe_timeout();
    let mut w = Watcher::new(engine, (engine.host)(), c.filter(), config);
    w.connected().await;
    let stopped = Continue(engine);
    (engine.signal)("STOP").unwrap_or_else(|e| panic!("{}: {e}", engine.name));
    let t = Instant::now();
    let error = w.disconnected(bound + Duration::from_secs(2)).await;
    let took = t.elapsed();
    assert!(
        matches!(
            *error,
            Error::ProbeTimeout { .. } | Error::ProbeFailed { .. }
        ),
        "expected a probe failure, got: {error}"
    );
    assert!(
        took <= bound + Duration::from_millis(500),
        "disconnected after {took:?}, bound {bound:?}"
    );
    (engine.signal)("CONT").unwrap_or_else(|e| panic!("{}: {e}", engine.name));
    drop(stopped);
    w.connected().await;
    let a = c.create("a", true);
    c.cli(&["start", &a]);
    let events = w.events_until(&a, EventKind::Started).await;
    assert_eq!(
        kinds(&events),
        [
            (EventKind::Created, Origin::Live),
            (EventKind::Started, Origin::Live)
        ],
        "{}",
        summary(&w.seen)
    );
    report(engine, "stall", started, &w);
}

/// Dropping the stream closes its connection within 100 ms — while
/// streaming, while dialing a hung engine, while backing off — and leaves no
/// task on the runtime (the relay runs on a runtime of its own).
pub async fn drop_closes(engine: &'static Engine) {
    const CLOSED: Duration = Duration::from_millis(100);
    let Some(()) = require(engine) else { return };
    let _lock = engines::lock_engine(engine.name, false).expect("engine lock");
    let relay = Relay::start(&(engine.host)());
    assert_eq!(tasks(), 0);

    // Streaming: only the /events connection stays open.
    let mut w = Watcher::new(engine, relay.host(), Labels::new(), test_config());
    streaming_on_one_connection(&relay, &mut w).await;
    dropped_and_closed(&relay, w, "while streaming").await;

    // Dialing an engine that accepts but never answers.
    relay.hold(true);
    let before = relay.counts().accepted;
    let mut w = Watcher::new(
        engine,
        relay.host(),
        Labels::new(),
        test_config().dial_timeout(Duration::from_secs(20)),
    );
    tokio::select! {
        item = w.next(ITEM) => panic!("a held dial yielded {item:?}"),
        held = relay.wait(ITEM, |c| c.accepted > before && c.live == 1) => {
            held.unwrap_or_else(|c| panic!("the dial never connected: {c:?}"));
        }
    }
    dropped_and_closed(&relay, w, "while dialing").await;

    // Backing off after a dial timeout, for long enough to drop it there.
    let mut w = Watcher::new(
        engine,
        relay.host(),
        Labels::new(),
        test_config()
            .dial_timeout(Duration::from_millis(300))
            .reconnect(
                ReconnectPolicy::default()
                    .initial_delay(Duration::from_secs(60))
                    .jitter(false),
            ),
    );
    let error = w.disconnected(ITEM).await;
    assert!(matches!(*error, Error::DialTimeout(_)), "{error}");
    relay
        .wait(CLOSED, |c| c.live == 0)
        .await
        .unwrap_or_else(|c| panic!("the timed-out dial's connection stayed open: {c:?}"));
    drop(w);
    assert_eq!(relay.counts().live, 0);
    assert_eq!(tasks(), 0);
}

/// Undecodable lines injected into the `/events` body are skipped: the
/// session goes on (no redial, so no replay) and live events keep flowing.
pub async fn poison(engine: &'static Engine) {
    let started = Instant::now();
    let Some(()) = require(engine) else { return };
    let _lock = engines::lock_engine(engine.name, false).expect("engine lock");
    let c = Containers::new(engine, "poison");
    let relay = Relay::start(&(engine.host)());
    let mut w = Watcher::new(engine, relay.host(), c.filter(), test_config());
    w.connected().await;
    relay.inject(br#"{"status":"start","Type":"container","Action":"start","Actor":{"ID":"#);
    relay.inject(br#"{"Type":"container","Action":"start","timeNano":1}"#);
    relay.inject(b"\x00\x01 not json at all");
    relay
        .wait(ITEM, |c| c.injected == 3)
        .await
        .unwrap_or_else(|c| panic!("the relay did not inject: {c:?}"));
    let a = c.create("a", true);
    c.cli(&["start", &a]);
    let events = w.events_until(&a, EventKind::Started).await;
    assert_eq!(
        kinds(&events),
        [
            (EventKind::Created, Origin::Live),
            (EventKind::Started, Origin::Live)
        ],
        "{}",
        summary(&w.seen)
    );
    assert_eq!(w.disconnects(), 0, "{}", summary(&w.seen));
    // One dial: its history, then its subscription.
    assert_eq!(relay.counts().events_requests, 2, "no redial");
    report(engine, "poison", started, &w);
}

/// A watched container stops right before the redial, several times: the
/// test sees the engine's `die` (in `docker events`, beside the watch) and
/// lets the watch redial at once, so that its history holds the `die` and
/// its list is read a few milliseconds after it. The watch must say the
/// container stopped after the redial's `Connected` (live, from the
/// history; or by the resync when the history no longer reaches back to the
/// last event seen: Podman rotates its event log, a truncation the cursor
/// may fall in), and never `Started` by the resync: dockerd 20.10 logs `die` before its list shows the
/// container exited (measured: in 9 of 20 stops, `/containers/json` read as
/// soon as the `die` arrived still said `running`), so a snapshot read just
/// after the history may be older than the history's last event.
pub async fn stop_at_redial(engine: &'static Engine) {
    const ATTEMPTS: usize = 8;
    let started = Instant::now();
    let Some(()) = require(engine) else { return };
    let _lock = engines::lock_engine(engine.name, false).expect("engine lock");
    let c = Containers::new(engine, "stopredial");
    let label = format!("lookout.test={}", c.tag());
    let log = EventLog::start(
        &(engine.host)(),
        &label,
        SystemTime::now() - Duration::from_secs(1),
    )
    .unwrap_or_else(|e| panic!("{}: {e}", engine.name));
    let relay = Relay::start(&(engine.host)());
    let mut w = Watcher::new(engine, relay.host(), c.filter(), test_config());
    w.connected().await;
    let a = c.create("a", true);
    c.cli(&["start", &a]);
    w.events_until(&a, Started).await;
    let dies = |log: &EventLog| {
        log.records()
            .iter()
            .filter(|r| r.kind() == Some(Stopped))
            .count()
    };
    for attempt in 0..ATTEMPTS {
        relay.cut_and_wait(ITEM).await;
        w.disconnected(ITEM).await;
        // Past the backoff: the next poll dials at once.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let before = dies(&log);
        let stop = {
            let (cli, a) = (engine.cli, a.clone());
            std::thread::spawn(move || cli(&["stop", "-t", "0", &a]))
        };
        let bound = Instant::now() + ITEM;
        while dies(&log) == before && Instant::now() < bound {
            // Podman's log rotation ends the recorder's `docker events`.
            log.keep_alive();
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        assert!(dies(&log) > before, "no die recorded within {ITEM:?}");
        w.connected().await;
        stop.join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p))
            .unwrap_or_else(|e| panic!("{}: stop: {e}", engine.name));
        let last = w.events_of(&a).last().copied();
        if last.map(|(kind, _)| kind) != Some(Stopped) {
            // Does a later event set it right? Two more seconds of the feed.
            let _ = tokio::time::timeout(Duration::from_secs(2), async {
                loop {
                    w.next(ITEM).await;
                }
            })
            .await;
            panic!(
                "attempt {attempt}: after the redial the watch says {a} is {last:?}, the engine \
                 says {}; 2 s later the watch says {:?}: {}",
                c.cli(&["inspect", "--format", "{{.State.Status}}", &a]),
                w.events_of(&a).last(),
                summary(&w.seen)
            );
        }
        c.cli(&["start", &a]);
        w.events_until(&a, Started).await;
    }
    report(engine, "stop_at_redial", started, &w);
}

/// A seeded random workload (40–60 operations over 4 reused names) while
/// the watch, through a relay, is cut 3 times; `docker events` records the
/// engine's side. The watch's output must match the engine's log
/// (requirements 1–5 of [`audit`]).
pub async fn churn(engine: &'static Engine) {
    churn_with(engine, false).await;
}

/// The same workload, with a daemon restart (`kill -9`, running
/// containers stopped) instead of the middle cut: requirements 1–3 and the
/// final state hold; nothing is lost while connected.
pub async fn churn_restart(engine: &'static Engine) {
    churn_with(engine, true).await;
}

/// How long the workload may run.
const WORKLOAD: Duration = Duration::from_secs(60);

/// How many operations run while a cut watch is left disconnected.
const OPS_WHILE_CUT: usize = 5;

#[allow(clippy::too_many_lines)]
async fn churn_with(engine: &'static Engine, restart: bool) {
    let started = Instant::now();
    let Some(()) = require(engine) else { return };
    let _lock = engines::lock_engine(engine.name, restart).expect("engine lock");
    let scenario = if restart { "churn_restart" } else { "churn" };
    let c = Containers::new(engine, if restart { "churnr" } else { "churn" });
    let seed = audit::seed();
    let mut rng = SplitMix64::new(seed);
    let ops = 40 + rng.below(21);
    eprintln!(
        "[{}] {scenario}: seed {seed} (LOOKOUT_SEED={seed} replays it), {ops} operations",
        engine.name
    );
    let label = format!("lookout.test={}", c.tag());
    let t0 = SystemTime::now();
    let log = Arc::new(
        EventLog::start(&(engine.host)(), &label, t0 - Duration::from_secs(1))
            .unwrap_or_else(|e| panic!("{}: {e}", engine.name)),
    );
    let relay = Relay::start(&(engine.host)());
    let config = Config::default()
        .host(relay.host())
        .labels(c.filter())
        .watch_config(test_config());
    let mut w = Timed::new(
        (engine.watch)(config).unwrap_or_else(|e| panic!("{}: a valid host: {e}", engine.name)),
    );
    assert!(
        w.until(ITEM, |s| audit::connects(s) >= 1).await,
        "{}: the watch did not connect",
        engine.name
    );

    // The workload, on a thread of its own; the daemon restart, if any, is
    // one of its steps (no operation runs while the daemon is down).
    let restart_at = restart.then_some(ops / 2);
    let cut_at: Vec<usize> = [ops / 4, ops / 2, 3 * ops / 4]
        .into_iter()
        .filter(|i| Some(*i) != restart_at)
        .collect();
    let cuts = Arc::new(Mutex::new(Vec::<SystemTime>::new()));
    let notes = Arc::new(Mutex::new(Vec::<String>::new()));
    let progress = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let workload = Workload {
        cli: engine.cli,
        names: (0..4).map(|i| format!("{}-c{i}", c.tag())).collect(),
        label: label.clone(),
        extra_labels: vec![format!("lookout.cleanup={}", c.tag())],
        image: engines::test_image(),
        ops,
        rng,
    };
    let worker = {
        let (cuts, notes, progress, stop, log, label) = (
            Arc::clone(&cuts),
            Arc::clone(&notes),
            Arc::clone(&progress),
            Arc::clone(&stop),
            Arc::clone(&log),
            label.clone(),
        );
        std::thread::Builder::new()
            .name("workload".into())
            .spawn(move || {
                workload.run(&progress, &stop, |i, model| {
                    if Some(i) != restart_at {
                        return;
                    }
                    let running: Vec<String> = model
                        .iter()
                        .filter(|(_, s)| **s == State::Running)
                        .map(|(n, _)| n.clone())
                        .collect();
                    let running_refs: Vec<&str> = running.iter().map(String::as_str).collect();
                    let down = SystemTime::now();
                    cuts.lock().expect("cuts lock").push(down);
                    let t = Instant::now();
                    (engine.restart_stopping)(&running_refs)
                        .unwrap_or_else(|e| panic!("{}: restart: {e}", engine.name));
                    notes.lock().expect("notes lock").push(format!(
                        "daemon restarted before operation {i} in {:.1?} ({} running: {running:?})",
                        t.elapsed(),
                        running.len()
                    ));
                    // The log's `docker events` died with the daemon.
                    log.restart(down - Duration::from_secs(2))
                        .unwrap_or_else(|e| panic!("{}: {e}", engine.name));
                    if let Ok(now) = Workload::engine_state(engine.cli, &label) {
                        *model = now;
                    }
                })
            })
            .expect("workload thread")
    };

    // Poll continuously; cut the relay at the planned operations, and leave
    // the watch unpolled (so disconnected) while a few more run.
    let deadline = Instant::now() + WORKLOAD;
    let mut next_cut = 0;
    while !worker.is_finished() {
        if Instant::now() > deadline {
            stop.store(true, Ordering::SeqCst);
        }
        if cut_at
            .get(next_cut)
            .is_some_and(|at| progress.load(Ordering::SeqCst) >= *at)
        {
            next_cut += 1;
            cuts.lock().expect("cuts lock").push(SystemTime::now());
            relay.cut_and_wait(ITEM).await;
            let from = progress.load(Ordering::SeqCst);
            let bound = Instant::now() + Duration::from_secs(15);
            while progress.load(Ordering::SeqCst) < from + OPS_WHILE_CUT
                && !worker.is_finished()
                && Instant::now() < bound
            {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        log.keep_alive();
        w.poll_for(Duration::from_millis(50)).await;
    }
    let done = worker
        .join()
        .unwrap_or_else(|p| std::panic::resume_unwind(p));
    let mut problems: Vec<String> = Vec::new();
    if done.len() < ops {
        problems.push(format!(
            "the workload ran {} of {ops} operations in {WORKLOAD:?}",
            done.len()
        ));
    }

    // A sentinel after the workload: both feeds are in order, so once both
    // show it, everything before it is in.
    let sentinel = format!("{}-end", c.tag());
    let cleanup = format!("lookout.cleanup={}", c.tag());
    let image = engines::test_image();
    c.cli(&[
        "create",
        "--name",
        &sentinel,
        "--label",
        &label,
        "--label",
        &cleanup,
        "--network",
        "none",
        &image,
        "sleep",
        "3600",
    ]);
    if !w
        .until(ITEM, |s| audit::has_event(s, &sentinel, Created))
        .await
    {
        problems.push(format!(
            "the watch did not report {sentinel} within {ITEM:?}"
        ));
    }
    let logged = Instant::now() + Duration::from_secs(10);
    while !log.records().iter().any(|r| r.name == sentinel) && Instant::now() < logged {
        log.keep_alive();
        w.poll_for(Duration::from_millis(100)).await;
    }
    let engine_state = Workload::engine_state(engine.cli, &label)
        .unwrap_or_else(|e| panic!("{}: ps: {e}", engine.name));
    // A bounded wait for the watch to catch up with the engine.
    w.until(Duration::from_secs(10), |s| {
        audit::final_states(s) == engine_state
    })
    .await;
    w.poll_for(Duration::from_millis(300)).await;
    log.stop();
    let records = log.records();
    if !records.iter().any(|r| r.name == sentinel) {
        problems.push(format!(
            "docker events did not record {sentinel}; its stderr: {}",
            log.stderr()
        ));
    }
    let requests = relay.events_requests();
    let cuts = cuts.lock().expect("cuts lock").clone();
    let inputs = audit::Inputs {
        seen: &w.seen,
        records: &records,
        requests: &requests,
        cuts: &cuts,
        engine: &engine_state,
    };
    problems.extend(audit::audit(&inputs));

    // The account: with --nocapture always, in the failure message too.
    let origin = w.seen.first().map_or(0, |s| audit::nanos(s.at));
    let mut account = String::new();
    let failed = done.iter().filter(|o| o.error.is_some()).count();
    let _ = writeln!(
        account,
        "[{}] {scenario} in {:.1?}: seed {seed}, {} operations ({failed} failed), {} items, \
         {} engine records, {} /events requests, cuts at {:?}",
        engine.name,
        started.elapsed(),
        done.len(),
        w.seen.len(),
        records.len(),
        requests.len(),
        cuts.iter()
            .map(|t| audit::rel(origin, audit::nanos(*t)))
            .collect::<Vec<_>>()
    );
    if log.respawns() > 0 {
        let _ = writeln!(
            account,
            "  docker events ended by itself and was started again {} times",
            log.respawns()
        );
    }
    for n in notes.lock().expect("notes lock").iter() {
        let _ = writeln!(account, "  {n}");
    }
    for (t, path) in &requests {
        let _ = writeln!(
            account,
            "  /events request at {}: {}",
            audit::rel(origin, audit::nanos(*t)),
            audit::short_path(path)
        );
    }
    if !problems.is_empty() {
        for o in &done {
            let _ = writeln!(
                account,
                "  op {} ({:.0?}): {}{}",
                audit::rel(origin, audit::nanos(o.at)),
                o.took,
                o.args.join(" "),
                o.error
                    .as_ref()
                    .map_or_else(String::new, |e| format!(" FAILED: {}", e.trim()))
            );
        }
        for (i, s) in w.seen.iter().enumerate() {
            let _ = writeln!(account, "  {}", audit::line(origin, i, s));
        }
        let names: std::collections::BTreeSet<&str> =
            records.iter().map(|r| r.name.as_str()).collect();
        for name in names {
            account.push_str(&audit::timeline(&inputs, name));
        }
    }
    eprintln!("{account}");
    assert!(
        problems.is_empty(),
        "[{}] {scenario} (seed {seed}): {} violations:\n{}",
        engine.name,
        problems.len(),
        problems.join("\n")
    );
}
