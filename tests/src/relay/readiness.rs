//! The readiness scenarios every engine speaking the Docker API passes
//! (`tests/docker.rs`, `tests/podman.rs`, through
//! [`compat_engine_tests!`](crate::compat_engine_tests)): a container
//! whose healthcheck passes while `/ok` exists, driven the engine's way —
//! Docker's own 300 ms interval (the test waits for the engine's event),
//! Podman's `podman healthcheck run` after each toggle (no systemd timers
//! here).
//!
//! Every function here fails the test by panicking, as assertions do.
#![allow(clippy::missing_panics_doc)]

use std::time::{Duration, Instant, SystemTime};

use EventKind::{Created, Ready, Removed, Started, Stopped, Unready};
use Origin::{Initial, Live, Resync};
use lookout_core::{
    EventKind, Health, InstanceEvent, Item, Origin, Readiness, Status, WatchConfig,
};
use lookout_moby::Config;
use serde_json::json;

use super::audit::EventLog;
use super::scenarios::{Containers, Engine, ITEM, Watcher, report_as, require, test_config};
use super::{Relay, engine_api as api};
use crate::engines;

/// A watch of `c`'s containers on `host`, with readiness.
fn watcher(engine: &Engine, host: String, c: &Containers, config: WatchConfig) -> Watcher {
    crate::k8s_util::init_tracing();
    let config = Config::default()
        .host(host)
        .labels(c.filter())
        .watch_config(config)
        .readiness(true);
    Watcher::from_watch(
        (engine.watch)(config).unwrap_or_else(|e| panic!("{}: a valid host: {e}", engine.name)),
    )
}

/// Creates `<tag>-<suffix>`, watched, with a healthcheck that passes while
/// `/ok` exists (exec form: the image has no shell file), checked every
/// 300 ms by an engine that runs checks itself, unhealthy after one
/// failure; its command makes `/ok` at every start. Through the API: the
/// CLIs' `--health-cmd` is a shell command.
pub fn create_checked(engine: &Engine, c: &Containers, suffix: &str) -> String {
    let name = format!("{}-{suffix}", c.tag());
    let body = json!({
        "Image": engines::test_image(),
        "Cmd": ["sh", "-c", "touch /ok; exec sleep 3600"],
        "Labels": c.labels(),
        "HostConfig": { "NetworkMode": "none" },
        "Healthcheck": {
            "Test": ["CMD", "/bin/busybox", "test", "-f", "/ok"],
            "Interval": 300_000_000,
            "Retries": 1,
        },
    });
    let path = format!("/containers/create?name={name}");
    match api(&(engine.host)(), "POST", &path, &body.to_string()) {
        Ok((201, _)) => name,
        Ok((status, body)) => panic!("{}: create {name}: {status}: {body}", engine.name),
        Err(e) => panic!("{}: create {name}: {e}", engine.name),
    }
}

/// Makes `/ok` exist in `name`, or not.
fn set_ok(c: &Containers, name: &str, ok: bool) {
    if ok {
        c.cli(&["exec", name, "/bin/busybox", "touch", "/ok"]);
    } else {
        c.cli(&["exec", name, "/bin/busybox", "rm", "-f", "/ok"]);
    }
}

/// How many records of `name` with `action` the engine's log holds.
fn logged(log: &EventLog, name: &str, action: &str) -> usize {
    log.records()
        .iter()
        .filter(|r| r.name == name && r.action == action)
        .count()
}

/// Waits (at most [`ITEM`]) until the engine's log holds more than
/// `before` records of `name` with `action`, without polling any watch.
async fn logged_after(log: &EventLog, name: &str, action: &str, before: usize) {
    let bound = Instant::now() + ITEM;
    while logged(log, name, action) <= before {
        assert!(
            Instant::now() < bound,
            "no {action} of {name} in the engine's log within {ITEM:?}; stderr: {}",
            log.stderr()
        );
        // Podman's log rotation ends the recorder's `docker events`.
        log.keep_alive();
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Docker's health action for a status.
fn health_action(healthy: bool) -> &'static str {
    if healthy {
        "health_status: healthy"
    } else {
        "health_status: unhealthy"
    }
}

/// Makes `name`'s check tell `ok` now, without polling any watch: Podman
/// runs it; with Docker, the next probe does, and the engine's log shows
/// the status change (`wait`: it changes; else the status stays as it was
/// and there is nothing to wait for).
async fn flip(engine: &Engine, c: &Containers, log: &EventLog, name: &str, ok: bool) {
    let action = health_action(ok);
    let before = logged(log, name, action);
    set_ok(c, name, ok);
    told(engine, log, name, action, before).await;
}

/// The engine's check of `name` has told `action` since the log held
/// `before` of them: Podman's is run now; Docker's interval runs it.
async fn told(engine: &Engine, log: &EventLog, name: &str, action: &str, before: usize) {
    match engine.run_check {
        Some(run) => run(name).unwrap_or_else(|e| panic!("{}: {e}", engine.name)),
        None => logged_after(log, name, action, before).await,
    }
}

/// Starts `name` and waits, without polling any watch, until its check
/// passed (its command makes `/ok`; Podman's check is run after).
/// What the live scenarios here start with. Fields drop in order: the
/// watch, the engine's event log, the containers, then the engine's lock.
struct Scene {
    started: Instant,
    w: Watcher,
    /// A checked container, started and ready.
    a: String,
    log: EventLog,
    c: Containers,
    _lock: engines::EngineLock,
}

/// The engine up and locked (`exclusive` for a scenario that breaks it),
/// the containers of `test`, the engine's event log, a watch of them at
/// `host` (the engine's, or a relay's) that has connected, and `a` started
/// and told ready.
async fn scene(
    engine: &'static Engine,
    test: &str,
    exclusive: bool,
    host: String,
) -> Option<Scene> {
    let started = Instant::now();
    require(engine)?;
    let lock = engines::lock_engine(engine.name, exclusive).expect("engine lock");
    let c = Containers::new(engine, test);
    let log = engine_log(engine, &c);
    let mut w = watcher(engine, host, &c, test_config());
    w.connected().await;
    let a = create_checked(engine, &c, "a");
    start_healthy(engine, &c, &log, &a).await;
    w.events_until(&a, Ready).await;
    Some(Scene {
        started,
        w,
        a,
        log,
        c,
        _lock: lock,
    })
}

async fn start_healthy(engine: &Engine, c: &Containers, log: &EventLog, name: &str) {
    let action = health_action(true);
    let before = logged(log, name, action);
    c.cli(&["start", name]);
    if engine.run_check.is_some() {
        // The command may not have made it yet.
        set_ok(c, name, true);
    }
    told(engine, log, name, action, before).await;
}

/// The engine's log of `c`'s containers, from a second ago.
fn engine_log(engine: &Engine, c: &Containers) -> EventLog {
    let label = format!("lookout.test={}", c.tag());
    EventLog::start(
        &(engine.host)(),
        &label,
        SystemTime::now() - Duration::from_secs(1),
    )
    .unwrap_or_else(|e| panic!("{}: {e}", engine.name))
}

/// The engine's log of `name`, one record a line, timed from `origin`:
/// what a failed assertion compares the watch's events with.
fn engine_said(log: &EventLog, name: &str, origin: i128) -> String {
    log.records()
        .iter()
        .filter(|r| r.name == name)
        .map(|r| {
            let health = r
                .health
                .as_deref()
                .map(|h| format!(" ({h})"))
                .unwrap_or_default();
            format!(
                "  {} {}{health}\n",
                super::audit::rel(origin, r.nanos),
                r.action
            )
        })
        .collect::<Vec<_>>()
        .concat()
}

/// The events `w` yielded about `id`, whole.
fn full_events<'a>(w: &'a Watcher, id: &'a str) -> impl Iterator<Item = &'a InstanceEvent> {
    w.seen.iter().filter_map(move |i| match i {
        Item::Event(e) if e.id.as_str() == id => Some(e),
        _ => None,
    })
}

fn live(kinds: &[EventKind]) -> Vec<(EventKind, Origin)> {
    kinds.iter().map(|k| (*k, Live)).collect()
}

/// Scenario 1: A container with a check: `created, started, ready, unready, ready,
/// stopped, started, ready, stopped, removed`, each once, live, the
/// detail in each event; one without: `created, started, ready, stopped,
/// removed`.
pub async fn lifecycle(engine: &'static Engine) {
    let Some(Scene {
        started,
        _lock,
        c,
        log,
        mut w,
        a,
    }) = scene(engine, "rlife", false, (engine.host)()).await
    else {
        return;
    };
    let started_at = super::audit::nanos(SystemTime::now());
    flip(engine, &c, &log, &a, false).await;
    w.events_until(&a, Unready).await;
    flip(engine, &c, &log, &a, true).await;
    w.events_until(&a, Ready).await;
    c.cli(&["stop", "-t", "0", &a]);
    w.events_until(&a, Stopped).await;
    start_healthy(engine, &c, &log, &a).await;
    w.events_until(&a, Ready).await;
    c.cli(&["stop", "-t", "0", &a]);
    c.cli(&["rm", &a]);
    w.events_until(&a, Removed).await;
    assert_eq!(
        engine.told(w.events_of(&a)),
        live(
            &[
                &[Created, Started, Ready, Unready, Ready][..],
                engine.stop_kinds(),
                &[Started, Ready],
                engine.stop_kinds(),
                &[Removed],
            ]
            .concat()
        ),
        "{}\nthe watch's events of {a}:\n{}the engine's log of {a}:\n{}",
        w.summary(),
        full_events(&w, &a)
            .map(|e| format!(
                "  {} {} {:?}\n",
                super::audit::rel(started_at, super::audit::nanos(e.at)),
                e.kind,
                e.readiness
            ))
            .collect::<Vec<_>>()
            .concat(),
        engine_said(&log, &a, started_at)
    );
    // The detail: what each event follows from.
    for e in full_events(&w, &a) {
        let health = e.readiness.map(|r| match r {
            Readiness::Container { health, paused, .. } => {
                assert!(!paused, "{} {}: paused", e.id, e.kind);
                health
            }
            other => panic!("{} {}: {other:?}", e.id, e.kind),
        });
        match e.kind {
            Ready => assert_eq!(health, Some(Health::Healthy), "{e:?}"),
            Unready => assert_eq!(health, Some(Health::Unhealthy), "{e:?}"),
            Started => assert_eq!(health, Some(Health::Starting), "{e:?}"),
            _ => {}
        }
    }

    let b = c.create("b", true);
    c.cli(&["start", &b]);
    w.events_until(&b, Ready).await;
    c.cli(&["stop", "-t", "0", &b]);
    c.cli(&["rm", &b]);
    w.events_until(&b, Removed).await;
    w.assert_told(
        engine,
        &b,
        &live(
            &[
                &[Created, Started, Ready][..],
                engine.stop_kinds(),
                &[Removed],
            ]
            .concat(),
        ),
    );
    let ready = full_events(&w, &b)
        .find(|e| e.kind == Ready)
        .and_then(|e| e.readiness);
    assert_eq!(ready, Some(Readiness::container(Health::None, false)));
    assert_eq!(w.disconnects(), 0, "{}", w.summary());
    report_as(engine.name, "readiness lifecycle", started, &w);
}

/// How many times Podman's check flips in [`health_log`].
const FLIPS: usize = 10;

/// Scenario 2: The watch's readiness against the engine's own health events,
/// recorded beside it (`docker events`). Docker emits `health_status` only
/// when the status changes: the watch's `ready`/`unready` are exactly its
/// `healthy`/`unhealthy`, across a stop and a start. Podman emits one per
/// check (`podman healthcheck run`, here 3× while healthy, 3× while
/// unhealthy): the repeats never show; then it flips `FLIPS` times, each
/// told.
pub async fn health_log(engine: &'static Engine) {
    let Some(Scene {
        started,
        _lock,
        c,
        log,
        mut w,
        a,
    }) = scene(engine, "rlog", false, (engine.host)()).await
    else {
        return;
    };
    if let Some(run) = engine.run_check {
        for ok in [true, false] {
            if !ok {
                flip(engine, &c, &log, &a, false).await;
                w.events_until(&a, Unready).await;
            }
            for _ in 0..3 {
                run(&a).unwrap_or_else(|e| panic!("{}: {e}", engine.name));
            }
        }
        // Each flip's check is told, whatever the event says (the
        // previous check's status: the watch reads the container).
        for _ in 0..FLIPS {
            for (ok, kind) in [(true, Ready), (false, Unready)] {
                set_ok(&c, &a, ok);
                // The check runs while the watch is polled: the event
                // reaches it while the check may not have finished.
                let check = {
                    let a = a.clone();
                    std::thread::spawn(move || run(&a))
                };
                w.events_until(&a, kind).await;
                check
                    .join()
                    .unwrap_or_else(|p| std::panic::resume_unwind(p))
                    .unwrap_or_else(|e| panic!("{}: {e}", engine.name));
            }
        }
        c.cli(&["stop", "-t", "0", &a]);
        w.events_until(&a, Stopped).await;
        // 8 checks before the flips, one per flip after: all in the log.
        logged_after(&log, &a, "health_status", 8 + 2 * FLIPS - 1).await;
        let checks = logged(&log, &a, "health_status");
        let mut expected = vec![Created, Started, Ready, Unready];
        for _ in 0..FLIPS {
            expected.extend([Ready, Unready]);
        }
        expected.extend(engine.stop_kinds());
        w.assert_told(engine, &a, &live(&expected));
        eprintln!(
            "[{}] readiness health_log: {checks} health_status events logged, {:?} told",
            engine.name,
            w.events_of(&a)
        );
    } else {
        for _ in 0..2 {
            flip(engine, &c, &log, &a, false).await;
            w.events_until(&a, Unready).await;
            flip(engine, &c, &log, &a, true).await;
            w.events_until(&a, Ready).await;
        }
        c.cli(&["stop", "-t", "0", &a]);
        start_healthy(engine, &c, &log, &a).await;
        w.events_until(&a, Ready).await;
        let dies = logged(&log, &a, "die");
        c.cli(&["stop", "-t", "0", &a]);
        w.events_until(&a, Stopped).await;
        logged_after(&log, &a, "die", dies).await;
        let engine_says: Vec<EventKind> = log
            .records()
            .iter()
            .filter(|r| r.name == a)
            .filter_map(|r| match r.action.as_str() {
                "health_status: healthy" => Some(Ready),
                "health_status: unhealthy" => Some(Unready),
                _ => None,
            })
            .collect();
        let watch_says: Vec<EventKind> = w
            .events_of(&a)
            .into_iter()
            .map(|(kind, _)| kind)
            .filter(|k| matches!(k, Ready | Unready))
            .collect();
        assert_eq!(
            watch_says,
            engine_says,
            "the watch: {}; the engine: {:?}",
            w.summary(),
            log.records()
        );
        eprintln!(
            "[{}] readiness health_log: the engine's health_status mapped {engine_says:?} = the watch's",
            engine.name
        );
    }
    assert_eq!(w.disconnects(), 0, "{}", w.summary());
    report_as(engine.name, "readiness health_log", started, &w);
}

/// Pause and unpause, live: a paused container is unready; unpaused, it is
/// ready again once its check passes (Docker set it unhealthy at the pause
/// and says `healthy` at the next good probe; Podman's status stays as it
/// was); without a check, at once.
pub async fn pause(engine: &'static Engine) {
    let Some(Scene {
        started,
        _lock,
        c,
        log: _log,
        mut w,
        a,
    }) = scene(engine, "rpause", false, (engine.host)()).await
    else {
        return;
    };
    let b = c.create("b", true);
    c.cli(&["start", &b]);
    w.events_until(&b, Ready).await;
    for (name, checked) in [(&a, true), (&b, false)] {
        c.cli(&["pause", name]);
        let unready = w.events_until(name, Unready).await;
        assert_eq!(
            unready.last().and_then(|e| e.readiness),
            Some(Readiness::container(
                match (checked, engine.run_check.is_some()) {
                    (false, _) => Health::None,
                    // Docker sets it, Podman keeps it.
                    (true, false) => Health::Unhealthy,
                    (true, true) => Health::Healthy,
                },
                true
            )),
            "{}",
            w.summary()
        );
        c.cli(&["unpause", name]);
        // Docker: at its next good probe; Podman (its status kept) and
        // without a check: at once.
        w.events_until(name, Ready).await;
        if checked && let Some(run) = engine.run_check {
            // Still healthy: a check changes nothing.
            run(name).unwrap_or_else(|e| panic!("{}: {e}", engine.name));
        }
    }
    c.cli(&["stop", "-t", "0", &a, &b]);
    let stopped = |w: &Watcher, id: &str| w.events_of(id).last().is_some_and(|e| e.0 == Stopped);
    w.wait_until(|w| stopped(w, &a) && stopped(w, &b)).await;
    for name in [&a, &b] {
        w.assert_told(
            engine,
            name,
            &live(
                &[
                    &[Created, Started, Ready, Unready, Ready][..],
                    engine.stop_kinds(),
                ]
                .concat(),
            ),
        );
    }
    report_as(engine.name, "readiness pause", started, &w);
}

/// The events of `id` with where each came: after how many `Connected`,
/// and whether the watch was connected then (after a `Disconnected` and
/// before the next `Connected`: a redial's replay or its snapshot's diff).
fn phased(w: &Watcher, id: &str) -> Vec<(usize, bool, EventKind, Origin)> {
    let (mut connects, mut connected) = (0, false);
    let mut out = Vec::new();
    for item in &w.seen {
        match item {
            Item::Status(Status::Connected { .. }) => {
                connects += 1;
                connected = true;
            }
            Item::Status(Status::Disconnected { .. }) => connected = false,
            Item::Event(e) if e.id.as_str() == id => {
                out.push((connects, connected, e.kind, e.origin));
            }
            _ => {}
        }
    }
    out
}

/// Scenario 3a: Health changes while the connection is cut (the relay), the watch
/// not polled: the net readiness arrives exactly once — as the engine's
/// proven replay, live, before the redial's `Connected` (both engines still
/// hold the events: dockerd's buffer, Podman's log) — never again by the
/// snapshot, never after `Connected`:
/// Scenario 1: unhealthy while cut: `unready`;
/// Scenario 2: healthy again while cut: `ready`;
/// 3. unhealthy (`unready`, live) and paused before the cut, unpaused while
///    cut: nothing (its check still fails: it stays unready); healthy
///    after: `ready`, live.
pub async fn cut(engine: &'static Engine) {
    let relay = Relay::start(&(engine.host)());
    let Some(Scene {
        started,
        _lock,
        c,
        log,
        mut w,
        a,
    }) = scene(engine, "rcut", false, relay.host()).await
    else {
        return;
    };
    for ok in [false, true] {
        relay.cut_and_wait(ITEM).await;
        flip(engine, &c, &log, &a, ok).await;
        w.connected().await;
    }
    flip(engine, &c, &log, &a, false).await;
    w.events_until(&a, Unready).await;
    c.cli(&["pause", &a]);
    // The pause (swallowed: already unready) was seen once the next
    // event, of another container, is.
    let s = c.create("s", true);
    w.events_until(&s, Created).await;
    relay.cut_and_wait(ITEM).await;
    let before = logged(&log, &a, "unpause");
    c.cli(&["unpause", &a]);
    logged_after(&log, &a, "unpause", before).await;
    w.connected().await;
    flip(engine, &c, &log, &a, true).await;
    w.events_until(&a, Ready).await;
    assert_eq!(
        phased(&w, &a),
        [
            (1, true, Created, Live),
            (1, true, Started, Live),
            (1, true, Ready, Live),
            // 1: replayed before the second Connected.
            (1, false, Unready, Live),
            // 2: before the third.
            (2, false, Ready, Live),
            // 3: live, then nothing while cut.
            (3, true, Unready, Live),
            (4, true, Ready, Live),
        ],
        "{}",
        w.summary()
    );
    // Each dial: its history, then its subscription.
    assert_eq!(relay.counts().events_requests, 8, "three redials");
    report_as(engine.name, "readiness cut", started, &w);
}

/// Scenario 3b: The daemon is killed while a container runs unready, and comes
/// back with it stopped; the test starts it again and its check passes,
/// the watch not polled. The net readiness arrives exactly once, before
/// the redial's `Connected`, never after: dockerd keeps no events across
/// its restart, so the snapshot tells it (`ready`, resync: it runs as it
/// did, now healthy); Podman's log still holds them, so they are replayed
/// (`stopped, started, ready`, live).
pub async fn daemon_restart(engine: &'static Engine) {
    let Some(Scene {
        started,
        _lock,
        c,
        log,
        mut w,
        a,
    }) = scene(engine, "rrestart", true, (engine.host)()).await
    else {
        return;
    };
    flip(engine, &c, &log, &a, false).await;
    w.events_until(&a, Unready).await;
    let down = SystemTime::now();
    (engine.restart_stopping)(&[a.as_str()]).unwrap_or_else(|e| panic!("{}: {e}", engine.name));
    // The log's `docker events` ended with the daemon.
    log.restart(down - Duration::from_secs(2))
        .unwrap_or_else(|e| panic!("{}: {e}", engine.name));
    start_healthy(engine, &c, &log, &a).await;
    w.connected().await;
    c.cli(&["stop", "-t", "0", &a]);
    w.events_until(&a, Stopped).await;
    let mut expected = vec![
        (1, true, Created, Live),
        (1, true, Started, Live),
        (1, true, Ready, Live),
        (1, true, Unready, Live),
    ];
    if engine.keeps_history {
        expected.extend(
            live(&[Stopped, Started, Ready])
                .into_iter()
                .map(|(k, o)| (1, false, k, o)),
        );
    } else {
        expected.push((1, false, Ready, Resync));
    }
    expected.extend(engine.stop_kinds().iter().map(|&k| (2, true, k, Live)));
    let mut told = phased(&w, &a);
    told.retain(|(_, _, kind, _)| !engine.optional(*kind));
    assert_eq!(told, expected, "{}", w.summary());
    assert!(w.disconnects() >= 1, "{}", w.summary());
    report_as(engine.name, "readiness daemon_restart", started, &w);
}

/// Scenario 4: `initial` with readiness: a running healthy container is told
/// `created, started, ready`, a paused one (with a check or without)
/// `created, started`, a stopped one `created` (origin initial); unpaused,
/// they become ready live.
pub async fn initial(engine: &'static Engine) {
    let started = Instant::now();
    let Some(()) = require(engine) else { return };
    let _lock = engines::lock_engine(engine.name, false).expect("engine lock");
    let c = Containers::new(engine, "rinit");
    let log = engine_log(engine, &c);
    let paused = create_checked(engine, &c, "q");
    start_healthy(engine, &c, &log, &paused).await;
    c.cli(&["pause", &paused]);
    let plain = c.create("p", true);
    c.cli(&["start", &plain]);
    c.cli(&["pause", &plain]);
    let stopped = c.create("s", true);
    // Last, so that its whole life is in the first dial's look-back (the
    // history of its last 2 s, which corrects the list).
    let healthy = create_checked(engine, &c, "h");
    start_healthy(engine, &c, &log, &healthy).await;
    let mut w = watcher(engine, (engine.host)(), &c, test_config().initial(true));
    assert_eq!(w.connected().await, 4, "{}", w.summary());
    let told = |kinds: &[EventKind]| -> Vec<(EventKind, Origin)> {
        kinds.iter().map(|k| (*k, Initial)).collect()
    };
    w.assert_events(&healthy, &told(&[Created, Started, Ready]));
    w.assert_events(&paused, &told(&[Created, Started]));
    w.assert_events(&plain, &told(&[Created, Started]));
    w.assert_events(&stopped, &told(&[Created]));
    let detail = |id: &str| full_events(&w, id).last().and_then(|e| e.readiness);
    assert_eq!(
        detail(&healthy),
        Some(Readiness::container(Health::Healthy, false))
    );
    assert_eq!(
        detail(&plain),
        Some(Readiness::container(Health::None, true))
    );
    for name in [&paused, &plain] {
        c.cli(&["unpause", name]);
        w.events_until(name, Ready).await;
    }
    c.cli(&["stop", "-t", "0", &healthy, &paused, &plain]);
    report_as(engine.name, "readiness initial", started, &w);
}
