//! lookout-swarm says why, against the real single-node Swarm (dockerd as
//! its manager): `cargo xtask engines up swarm` first, then
//! `eval "$(cargo xtask engines env)"` (without `LOOKOUT_ENGINES=1` the test
//! says `SKIPPED` and passes).
//!
//! A service whose task exits 7, restarted once (`--restart-condition
//! on-failure --restart-max-attempts 1`): it is told `failing` with the
//! task's error as `docker service ps --no-trunc` shows it, then `failed`
//! once Swarm gave up; scaled to 0, `stopped` with the outcome `stopped`.

use std::time::{Duration, Instant};

use lookout_core::{EventKind, InstanceEvent, Item, Labels, Origin, Outcome, WatchConfig};
use lookout_engines as engines;
use lookout_swarm::SwarmConfig;
use tokio_stream::StreamExt;

/// The bound of every wait.
const WAIT: Duration = Duration::from_secs(60);

/// The engine locks (shared, in the order `cargo xtask engines up swarm`
/// takes them), dockerd answering as a Swarm manager; `None` without
/// engines.
fn require() -> Option<(engines::EngineLock, engines::EngineLock)> {
    let docker = engines::require("docker", false, engines::docker_up)?;
    let swarm = engines::require("swarm", false, engines::swarm_up)?;
    Some((docker, swarm))
}

fn docker(args: &[&str]) -> String {
    engines::docker(args).unwrap_or_else(|e| panic!("swarm: {args:?} failed: {e}"))
}

/// A service of the test, removed on drop whatever the test did.
struct Service(String);

impl Drop for Service {
    fn drop(&mut self) {
        let _ = engines::docker(&["service", "rm", &self.0]);
    }
}

/// The next event of `name`, at most [`WAIT`] away (statuses and other
/// services' events are passed over).
async fn next_event(
    watch: &mut (impl tokio_stream::Stream<Item = Item> + Unpin),
    name: &str,
    seen: &mut Vec<InstanceEvent>,
) -> InstanceEvent {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let item = tokio::time::timeout_at(deadline, watch.next())
            .await
            .unwrap_or_else(|_| panic!("no event of {name} within {WAIT:?}; seen: {seen:#?}"))
            .expect("a watch never ends");
        if let Item::Event(e) = item
            && e.id.as_str() == name
        {
            seen.push(e.clone());
            return e;
        }
    }
}

/// The `ERROR` column of `docker service ps --no-trunc` for `name`: one
/// line per task, newest first within its slot, quoted by the CLI.
fn errors_column(name: &str) -> Vec<String> {
    docker(&[
        "service",
        "ps",
        "--no-trunc",
        "--format",
        "{{.Error}}",
        name,
    ])
    .lines()
    .map(str::to_owned)
    .collect()
}

/// Waits (bounded) until `watch` connected: its snapshot is in.
async fn connected(watch: &mut (impl tokio_stream::Stream<Item = Item> + Unpin)) {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let item = tokio::time::timeout_at(deadline, watch.next())
            .await
            .expect("connected in time")
            .expect("a watch never ends");
        if matches!(item, Item::Status(lookout_core::Status::Connected { .. })) {
            return;
        }
    }
}

/// Creates `name`, watched (`lookout.test=<tag>`), whose task exits 7,
/// restarted once after 1 s.
fn exits_7(name: &str, tag: &str) -> Service {
    let image = engines::test_image();
    let label = format!("lookout.test={tag}");
    docker(&[
        "service",
        "create",
        "--detach",
        "--no-resolve-image",
        "--name",
        name,
        "--label",
        &label,
        "--restart-condition",
        "on-failure",
        "--restart-max-attempts",
        "1",
        "--restart-delay",
        "1s",
        &image,
        "sh",
        "-c",
        "exit 7",
    ]);
    Service(name.to_owned())
}

#[tokio::test]
async fn a_failing_service_is_told_with_its_task_error_then_stopped() {
    let Some(_locks) = require() else { return };
    let started = Instant::now();
    let tag = format!("lk-swarm-failing-{}", std::process::id());
    let name = format!("{tag}-exit7");
    let _ = engines::docker(&["service", "rm", &name]);
    let filter = Labels::from([("lookout.test".to_owned(), tag.clone())]);
    let config = SwarmConfig::default()
        .host(engines::docker_host())
        .labels(filter)
        .watch_config(WatchConfig::default())
        .readiness(true)
        .readiness_poll(Duration::from_millis(300));
    let mut watch = lookout_swarm::watch(config).expect("a valid host");
    connected(&mut watch).await;
    let service = exits_7(&name, &tag);

    let mut seen = Vec::new();
    let mut failing = Vec::new();
    let gave_up = loop {
        let e = next_event(&mut watch, &name, &mut seen).await;
        match e.kind {
            // A poll that lands while a task runs for its moment finds
            // the service ready (1 of 1 running), the next one unready.
            EventKind::Created | EventKind::Started | EventKind::Ready | EventKind::Unready => {}
            EventKind::Failing => {
                let reason = e.reason.clone().expect("a failing event says why");
                failing.push(reason.clone());
                if reason.failed {
                    break reason;
                }
            }
            other => panic!("unexpected {other} of {name}; seen: {seen:#?}"),
        }
    };
    let told_after = started.elapsed();
    // The CLI's view, once Swarm gave up: every task failed with the same
    // error, which the CLI quotes.
    let column = errors_column(&name);
    let newest = column
        .first()
        .unwrap_or_else(|| panic!("no task of {name} in `docker service ps`"));
    let cli = newest
        .strip_prefix('"')
        .and_then(|e| e.strip_suffix('"'))
        .unwrap_or_else(|| panic!("the CLI's error is not quoted: {newest:?}"));
    assert_eq!(cli, "task: non-zero exit (7)", "{column:?}");
    for reason in &failing {
        assert_eq!(reason.message.as_deref(), Some(cli), "{failing:#?}");
        assert_eq!(reason.exit_code, Some(7), "{failing:#?}");
        assert_eq!(reason.outcome, None, "a failure is no stop: {failing:#?}");
    }
    assert!(gave_up.failed);
    // Told again only when it changes (`failed`, here), or after the
    // service was ready for a moment.
    for pair in seen.windows(2) {
        if let [a, b] = pair
            && (a.kind, b.kind) == (EventKind::Failing, EventKind::Failing)
        {
            assert_ne!(a.reason, b.reason, "told twice: {seen:#?}");
        }
    }
    let desired = docker(&[
        "service",
        "ps",
        "--filter",
        "desired-state=running",
        "--format",
        "{{.ID}}",
        &name,
    ]);
    assert_eq!(desired, "", "Swarm gave up: no task is meant to run");

    docker(&["service", "scale", "--detach", &format!("{name}=0")]);
    let stopped = next_event(&mut watch, &name, &mut seen).await;
    assert_eq!(
        (stopped.kind, stopped.origin),
        (EventKind::Stopped, Origin::Live),
        "{seen:#?}"
    );
    let reason = stopped.reason.as_ref().expect("a stop says why");
    assert_eq!(reason.outcome, Some(Outcome::Stopped));
    assert!(!reason.failed);
    drop(service);
    let removed = next_event(&mut watch, &name, &mut seen).await;
    assert_eq!(removed.kind, EventKind::Removed, "{seen:#?}");
    let kinds: Vec<EventKind> = seen.iter().map(|e| e.kind).collect();
    eprintln!(
        "[swarm] failing: {kinds:?}; gave up told {told_after:.1?} after the start; \
         failures told: {:?}",
        failing
            .iter()
            .map(|r| (r.message.as_deref().unwrap_or(""), r.failed))
            .collect::<Vec<_>>()
    );
}
