//! Why, on the real engines (issue #47): every stop says its outcome, and
//! its exit code and OOM flag are what the engine's own `inspect` says;
//! a requested stop is `stopping`, then `stopped`; the restart policy's
//! decision is told (`restarting`); a stop missed while disconnected comes
//! with the resync, as `inspect` shows it; a failing check is `failing`,
//! in the check's own output. Shared by Docker and Podman
//! ([`compat_engine_tests`](crate::compat_engine_tests)).

use std::sync::Arc;
use std::time::{Duration, Instant};

use lookout_core::{EventKind, InstanceEvent, Item, Origin, Outcome, Reason, Signal};
use lookout_moby::Config;

use super::scenarios::{Containers, Engine, ITEM, Watcher, report_as, require, test_config};
use super::{Relay, engine_api as api};
use crate::engines;

use EventKind::{Created, Failing, Started, Stopped};

/// Creates `<tag>-<suffix>`, watched, with `options` before the image and
/// `cmd` after it. Returns its name.
fn create_with(c: &Containers, suffix: &str, options: &[&str], cmd: &[&str]) -> String {
    let name = format!("{}-{suffix}", c.tag());
    let cleanup = format!("lookout.cleanup={}", c.tag());
    let test = format!("lookout.test={}", c.tag());
    let image = engines::test_image();
    let mut args = vec![
        "create", "--name", &name, "--label", &cleanup, "--label", &test,
    ];
    args.extend(["--network", "none"]);
    args.extend(options);
    args.push(&image);
    args.extend(cmd);
    c.cli(&args);
    name
}

/// A watch of `c`'s containers on `host`, with readiness or without.
fn watcher(engine: &Engine, host: String, c: &Containers, readiness: bool) -> Watcher {
    let config = Config::default()
        .host(host)
        .labels(c.filter())
        .watch_config(test_config())
        .readiness(readiness);
    Watcher::from_watch(
        (engine.watch)(config).unwrap_or_else(|e| panic!("{}: a valid host: {e}", engine.name)),
    )
}

/// Every event of `id` the watch yielded, in order.
fn events(w: &Watcher, id: &str) -> Vec<InstanceEvent> {
    w.seen
        .iter()
        .filter_map(|i| match i {
            Item::Event(e) if e.id.as_str() == id => Some(e.clone()),
            _ => None,
        })
        .collect()
}

/// The reason of each `Stopped` of `id`.
fn stops(w: &Watcher, id: &str) -> Vec<(Origin, Arc<Reason>)> {
    events(w, id)
        .into_iter()
        .filter(|e| e.kind == Stopped)
        .map(|e| {
            let reason = e
                .reason
                .unwrap_or_else(|| panic!("{id}: a stop without a reason\n{}", w.summary()));
            (e.origin, reason)
        })
        .collect()
}

/// `inspect`'s `State.ExitCode` and `State.OOMKilled` of `name`.
fn inspected(c: &Containers, name: &str) -> (i32, bool) {
    let out = c.cli(&[
        "inspect",
        "--format",
        "{{.State.ExitCode}} {{.State.OOMKilled}}",
        name,
    ]);
    let mut parts = out.split_whitespace();
    let code = parts.next().and_then(|p| p.parse().ok());
    let oom = parts.next().map(|p| p == "true");
    match (code, oom) {
        (Some(code), Some(oom)) => (code, oom),
        _ => panic!("inspect {name}: {out}"),
    }
}

/// Waits (bounded) until `inspect` shows `name` exited.
async fn exited(c: &Containers, name: &str) {
    let deadline = Instant::now() + ITEM;
    loop {
        let status = c.cli(&["inspect", "--format", "{{.State.Status}}", name]);
        if status.trim() == "exited" {
            return;
        }
        assert!(Instant::now() < deadline, "{name} never exited: {status}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Asserts that the one stop of `name` is live, with `outcome`, and with
/// `inspect`'s exit code and OOM flag.
fn assert_stop(w: &Watcher, c: &Containers, name: &str, outcome: Outcome) -> Arc<Reason> {
    let stops = stops(w, name);
    let [(origin, reason)] = stops.as_slice() else {
        panic!("{name}: one stop expected: {stops:?}\n{}", w.summary())
    };
    let (code, oom) = inspected(c, name);
    assert_eq!(*origin, Origin::Live, "{name}: {}", w.summary());
    assert_eq!(reason.outcome, Some(outcome), "{name}: {reason:?}");
    assert_eq!(
        reason.exit_code,
        Some(code),
        "{name}: {reason:?} vs inspect"
    );
    assert_eq!(reason.oom, oom, "{name}: {reason:?} vs inspect");
    assert_eq!(
        reason.signal,
        Signal::from_exit_code(code),
        "{name}: {reason:?}"
    );
    Arc::clone(reason)
}

/// A shell that doubles a string until the OOM killer ends it.
const EAT_MEMORY: &[&str] = &["sh", "-c", "x=0123456789; while :; do x=$x$x; done"];

/// `true` completed, `exit 3` failed, an OOM kill failed (with the OOM
/// flag where the engine says it), `stop -t 1` and `kill` stopped after
/// `stopping`; each beside `inspect`, all live.
///
/// # Panics
/// When the engine or lookout says otherwise, or an engine command fails.
pub async fn outcomes(engine: &'static Engine) {
    let started = Instant::now();
    let Some(()) = require(engine) else { return };
    let _lock = engines::lock_engine(engine.name, false).expect("engine lock");
    let c = Containers::new(engine, "why");
    let mut w = watcher(engine, (engine.host)(), &c, false);
    w.connected().await;
    let done = create_with(&c, "done", &[], &["true"]);
    let fail = create_with(&c, "fail", &[], &["sh", "-c", "exit 3"]);
    let oom = create_with(
        &c,
        "oom",
        &["--memory", "24m", "--memory-swap", "24m"],
        EAT_MEMORY,
    );
    let stop = create_with(&c, "stop", &[], &["sleep", "3600"]);
    let kill = create_with(&c, "kill", &[], &["sleep", "3600"]);
    for name in [&done, &fail, &oom] {
        c.cli(&["start", name]);
        w.events_until(name, Stopped).await;
    }
    for name in [&stop, &kill] {
        c.cli(&["start", name]);
        w.events_until(name, Started).await;
    }
    c.cli(&["stop", "-t", "1", &stop]);
    w.events_until(&stop, Stopped).await;
    c.cli(&["kill", &kill]);
    w.events_until(&kill, Stopped).await;

    let kinds = |name: &str| events(&w, name).iter().map(|e| e.kind).collect::<Vec<_>>();
    for name in [&done, &fail, &oom] {
        assert_eq!(kinds(name), [Created, Started, Stopped], "{}", w.summary());
    }
    // Podman 4.3 logs no request for `stop -t 1`, and its `kill` may come
    // after the `died`: `stopping` is told there when it can be.
    let mut stopped = vec![Created, Started];
    stopped.extend(engine.stop_kinds());
    for name in [&stop, &kill] {
        let mut told = kinds(name);
        told.retain(|k| !engine.optional(*k));
        assert_eq!(told, stopped, "{}", w.summary());
    }
    assert_stop(&w, &c, &done, Outcome::Completed);
    assert_eq!(
        assert_stop(&w, &c, &fail, Outcome::Failed).exit_code,
        Some(3)
    );
    // Docker reports the OOM kill; Podman 4.3 does not (inspect says
    // false too), and logs no request of a stop: its SIGKILL is taken as
    // a stop on request, as `podman stop`'s is.
    let eaten = if engine.logs_stop {
        let eaten = assert_stop(&w, &c, &oom, Outcome::Failed);
        assert!(eaten.oom, "{eaten:?}");
        eaten
    } else {
        assert_stop(&w, &c, &oom, Outcome::Stopped)
    };
    assert_eq!(eaten.signal, Some(Signal::KILL), "{eaten:?}");
    // A requested stop is never failed, whatever its code (137, 143).
    assert_stop(&w, &c, &stop, Outcome::Stopped);
    assert_stop(&w, &c, &kill, Outcome::Stopped);
    for e in events(&w, &stop).iter().chain(&events(&w, &kill)) {
        assert_eq!(e.origin, Origin::Live, "{e:?}");
    }
    eprintln!(
        "[{}] why outcomes: {:?}",
        engine.name,
        [&done, &fail, &oom, &stop, &kill].map(|n| stops(&w, n))
    );
    report_as(engine.name, "why outcomes", started, &w);
}

/// `--restart on-failure:2` exiting 1: three failed stops, the engine's
/// restart told on the first two (`restarting`), not on the last.
///
/// # Panics
/// When the engine or lookout says otherwise, or an engine command fails.
pub async fn restarts(engine: &'static Engine) {
    let started = Instant::now();
    let Some(()) = require(engine) else { return };
    let _lock = engines::lock_engine(engine.name, false).expect("engine lock");
    let c = Containers::new(engine, "whyrestart");
    let mut w = watcher(engine, (engine.host)(), &c, true);
    w.connected().await;
    let name = create_with(
        &c,
        "a",
        &["--restart", "on-failure:2"],
        &["sh", "-c", "sleep 0.3; exit 1"],
    );
    c.cli(&["start", &name]);
    let deadline = Instant::now() + ITEM;
    while stops(&w, &name).len() < 3 {
        assert!(Instant::now() < deadline, "three stops: {}", w.summary());
        let _ = w.try_next(Duration::from_millis(200)).await;
    }
    exited(&c, &name).await;
    let count = c.cli(&["inspect", "--format", "{{.RestartCount}}", &name]);
    assert_eq!(count.trim(), "2", "the engine's restart count");
    // Nothing more comes: the engine gave up.
    while w.try_next(Duration::from_millis(500)).await.is_some() {}
    let told: Vec<(Option<Outcome>, Option<i32>, bool)> = stops(&w, &name)
        .iter()
        .map(|(_, r)| (r.outcome, r.exit_code, r.restarting))
        .collect();
    let failed = |restarting| (Some(Outcome::Failed), Some(1), restarting);
    assert_eq!(
        told,
        [failed(true), failed(true), failed(false)],
        "{}",
        w.summary()
    );
    report_as(engine.name, "why restarts", started, &w);
}

/// The connection cut while containers exit (one with 3, one by the OOM
/// killer), with more than 256 other events meanwhile (dockerd keeps 256:
/// its replay cannot prove itself complete): each stop comes once, with
/// `inspect`'s exit code and OOM flag — from the resync on Docker, from
/// the replay of Podman's event log (it keeps them all).
///
/// # Panics
/// When the engine or lookout says otherwise, or an engine command fails.
pub async fn missed(engine: &'static Engine) {
    let started = Instant::now();
    let Some(()) = require(engine) else { return };
    let _lock = engines::lock_engine(engine.name, false).expect("engine lock");
    let relay = Relay::start(&(engine.host)());
    let c = Containers::new(engine, "whymissed");
    let mut w = watcher(engine, relay.host(), &c, false);
    w.connected().await;
    // Each runs until `/go` exists, then exits 3 or eats its memory.
    let wait = "while [ ! -e /go ]; do sleep 0.05; done; ";
    let fail = create_with(&c, "fail", &[], &["sh", "-c", &format!("{wait}exit 3")]);
    let eat = format!("{wait}{}", EAT_MEMORY[2]);
    let oom = create_with(
        &c,
        "oom",
        &["--memory", "24m", "--memory-swap", "24m"],
        &["sh", "-c", &eat],
    );
    for name in [&fail, &oom] {
        c.cli(&["start", name]);
        w.events_until(name, Started).await;
    }
    // They stop while the watch is cut off.
    relay.cut_and_wait(ITEM).await;
    for name in [&fail, &oom] {
        c.cli(&["exec", name, "/bin/busybox", "touch", "/go"]);
    }
    exited(&c, &fail).await;
    exited(&c, &oom).await;
    // More than 256 events of containers the watch does not see.
    let names: Vec<String> = (0..140)
        .map(|i| c.create(&format!("other{i}"), false))
        .collect();
    let mut rm = vec!["rm", "-f"];
    rm.extend(names.iter().map(String::as_str));
    c.cli(&rm);
    w.connected().await;
    for name in [&fail, &oom] {
        let stops = stops(&w, name);
        let [(origin, reason)] = stops.as_slice() else {
            panic!("{name}: one stop expected: {stops:?}\n{}", w.summary())
        };
        let (code, killed) = inspected(&c, name);
        assert_eq!(reason.exit_code, Some(code), "{name}: {reason:?}");
        assert_eq!(reason.oom, killed, "{name}: {reason:?}");
        if !engine.keeps_history {
            assert_eq!(*origin, Origin::Resync, "{name}: {}", w.summary());
        }
        let failed = reason.outcome == Some(Outcome::Failed);
        assert!(failed || (!killed && code == 137), "{name}: {reason:?}");
    }
    if engine.name == "docker" {
        let eaten = &stops(&w, &oom)[0].1;
        assert!(eaten.oom, "the resync inspected the OOM kill: {eaten:?}");
        assert_eq!(eaten.outcome, Some(Outcome::Failed));
    }
    assert_eq!(stops(&w, &fail)[0].1.outcome, Some(Outcome::Failed));
    report_as(engine.name, "why missed", started, &w);
}

/// A health check that fails, printing why: `failing`, in the check's own
/// output, though the container was never ready.
///
/// # Panics
/// When the engine or lookout says otherwise, or an engine command fails.
pub async fn failing_check(engine: &'static Engine) {
    let started = Instant::now();
    let Some(()) = require(engine) else { return };
    let _lock = engines::lock_engine(engine.name, false).expect("engine lock");
    let c = Containers::new(engine, "whyfail");
    let mut w = watcher(engine, (engine.host)(), &c, true);
    w.connected().await;
    // Exec form, through the API: the image has no shell file for the
    // CLIs' `--health-cmd`.
    let name = format!("{}-a", c.tag());
    let body = serde_json::json!({
        "Image": engines::test_image(),
        "Cmd": ["sleep", "3600"],
        "Labels": c.labels(),
        "HostConfig": { "NetworkMode": "none" },
        "Healthcheck": {
            // One word per argument: Podman's compat API splits them at spaces.
            "Test": ["CMD", "/bin/busybox", "cat", "/upstream-said-503"],
            "Interval": 300_000_000,
            "Retries": 1,
        },
    });
    let path = format!("/containers/create?name={name}");
    match api(&(engine.host)(), "POST", &path, &body.to_string()) {
        Ok((201, _)) => {}
        other => panic!("{}: create {name}: {other:?}", engine.name),
    }
    c.cli(&["start", &name]);
    w.events_until(&name, Started).await;
    if let Some(run) = engine.run_check {
        run(&name).unwrap_or_else(|e| panic!("{}: {e}", engine.name));
    }
    let told = w.events_until(&name, Failing).await;
    let failing = told.last().expect("the failing event");
    let message = failing.reason.as_ref().and_then(|r| r.message.as_deref());
    let log = c.cli(&[
        "inspect",
        "--format",
        "{{(index .State.Health.Log 0).Output}}",
        &name,
    ]);
    assert!(
        log.contains("/upstream-said-503"),
        "the engine's own log: {log}"
    );
    assert_eq!(message, Some(log.trim()), "{failing:?}");
    assert!(
        !events(&w, &name).iter().any(|e| e.kind == EventKind::Ready),
        "never ready: {}",
        w.summary()
    );
    c.cli(&["stop", "-t", "0", &name]);
    w.events_until(&name, Stopped).await;
    report_as(engine.name, "why failing check", started, &w);
}
