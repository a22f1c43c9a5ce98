//! lookout-podman against a real Podman API service: `cargo xtask engines up
//! podman` first (CI sets `LOOKOUT_ENGINES=1`). The scenarios are
//! `lookout_e2e::relay::scenarios`, shared with Docker; the "daemon" is
//! Podman's API service. One scenario is Podman's own: its event log's
//! rotation.

use std::time::{Duration, Instant};

use lookout_core::{EventKind, Origin};
use lookout_e2e::engines;
use lookout_e2e::relay::raw_events::RawEvents;
use lookout_e2e::relay::scenarios::{Containers, PODMAN, Watcher, report_as, require, test_config};

lookout_e2e::compat_engine_tests!(PODMAN);

/// Where the rootful Podman this bed runs keeps its event log (the
/// `events_logger = "file"` default: `tmp_dir`'s `events/events.log`).
const EVENTS_LOG: &str = "/run/libpod/events/events.log";

/// One lifecycle of `<tag>-<suffix>` (create, start, stop, remove), with
/// `labels` and 30 KB more: every event of it carries them (~31 KB each).
fn big_lifecycle(c: &Containers, suffix: &str, labels: &[&str]) -> String {
    let name = format!("{}-{suffix}", c.tag());
    let big = format!("lookout.pad={}", "x".repeat(30_000));
    let cleanup = format!("lookout.cleanup={}", c.tag());
    let image = engines::test_image();
    let mut args = vec![
        "create", "--name", &name, "--label", &cleanup, "--label", &big,
    ];
    for l in labels {
        args.extend(["--label", l]);
    }
    args.extend(["--network", "none", &image, "sleep", "3600"]);
    c.cli(&args);
    c.cli(&["start", &name]);
    c.cli(&["stop", "-t", "0", &name]);
    c.cli(&["rm", &name]);
    name
}

/// The size of Podman's event log.
fn log_size() -> u64 {
    std::fs::metadata(EVENTS_LOG).map_or(0, |m| m.len())
}

/// Podman's major and minor version.
fn podman_version(c: &Containers) -> (String, (u32, u32)) {
    let version = c.cli(&["version", "--format", "{{.Server.Version}}"]);
    let version = version.trim().to_owned();
    let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    let v = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    (version, v)
}

/// How many of `lines` repeat an earlier one.
fn repeated(lines: &[String]) -> usize {
    let mut sorted = lines.to_vec();
    sorted.sort();
    sorted.windows(2).filter(|p| p[0] == p[1]).count()
}

/// Podman's own stream of the containers labelled `label`, beside a watch.
fn raw_stream(label: &str) -> RawEvents {
    let host = (PODMAN.host)();
    let socket = host.strip_prefix("unix://").expect("a unix:// podman host");
    RawEvents::start(socket, label, Duration::from_secs(120))
        .unwrap_or_else(|e| panic!("podman's own event stream: {e}"))
}

/// Watched lifecycles of 30 KB-labelled containers (~6 events of ~31 KB
/// each: 12 cross the 1 MB limit at least twice), each waited for until
/// `w` tells it removed, until Podman rotated its log in lifecycle `from`
/// or a later one, and one more (its events follow the replay). The
/// containers, and the lifecycle the log rotated in.
async fn past_a_rotation(
    c: &Containers,
    w: &mut Watcher,
    label: &str,
    from: usize,
) -> (Vec<String>, usize) {
    let mut names = Vec::new();
    let mut rotated_at = None;
    for i in 0..12 {
        let before = log_size();
        let name = big_lifecycle(c, &i.to_string(), &[label]);
        w.events_until(&name, EventKind::Removed).await;
        names.push(name);
        if log_size() < before && i >= from && rotated_at.is_none() {
            rotated_at = Some(i);
        }
        if let Some(r) = rotated_at.filter(|r| i > *r) {
            return (names, r);
        }
    }
    panic!(
        "{EVENTS_LOG} never shrank in 12 lifecycles ({} bytes)",
        log_size()
    );
}

/// Podman before 4.5 reads its event log again after it rotates it (podman
/// #17665, fixed by #17771): the events the rotation kept, the newer half
/// of the 1 MB file, come again on every open `/events` stream, after newer
/// ones. Containers carrying 30 KB of labels rotate the log within a few
/// lifecycles. The engine's own stream, read raw beside the watch, shows the
/// replay; the watch tells each lifecycle once, live.
#[tokio::test]
async fn events_podman_sends_again_after_rotating_its_log_are_told_once() {
    let started = Instant::now();
    let Some(()) = require(&PODMAN) else { return };
    // Exclusive: a rotation ends the engine-log recorders of the other
    // scenarios, and their events would move this one's out of the log.
    let _lock = engines::lock_engine(PODMAN.name, true).expect("engine lock");
    let c = Containers::new(&PODMAN, "rotate");
    let label = format!("lookout.test={}", c.tag());
    let raw = raw_stream(&label);
    let mut w = Watcher::new(&PODMAN, (PODMAN.host)(), c.filter(), test_config());
    w.connected().await;
    // A rotation in the first lifecycle may keep none of this test's
    // events (the log's newer half is then other tests'): the next one,
    // ~0.5 MB later, keeps the lifecycles before it.
    let (names, rotated_at) = past_a_rotation(&c, &mut w, &label, 1).await;
    let lines = raw
        .stop()
        .unwrap_or_else(|e| panic!("podman's own event stream: {e}"));
    let repeated = repeated(&lines);
    let (version, v) = podman_version(&c);
    if v < (4, 5) {
        assert!(
            repeated > 0,
            "Podman {version} rotated its log (lifecycle {rotated_at}) but sent no \
             event twice in {} lines: this scenario proves nothing here",
            lines.len()
        );
    }
    for name in &names {
        assert_eq!(
            PODMAN.told(w.events_of(name)),
            [
                (EventKind::Created, Origin::Live),
                (EventKind::Started, Origin::Live),
                (EventKind::Stopped, Origin::Live),
                (EventKind::Removed, Origin::Live),
            ],
            "{name}: Podman {version} sent {repeated} of its {} lines twice; {}",
            lines.len(),
            w.summary()
        );
    }
    assert_eq!(w.disconnects(), 0, "{}", w.summary());
    eprintln!(
        "podman {version}: rotated at lifecycle {rotated_at}; {repeated} of {} raw lines sent twice",
        lines.len()
    );
    report_as(PODMAN.name, "event log rotation", started, &w);
}

/// The same rotation, after a watch began: what it sends again from before
/// the watch is not news either. A running container restarted a moment
/// before the watch (past the first dial's 2 s look-back and the
/// subscription's 2 s margin, so the watch subscribes from now) is listed
/// running; after the rotation Podman's stream, opened after the restart,
/// sends its `die` and `start` (proof of the replay); the watch tells
/// nothing of it but its snapshot.
#[tokio::test]
async fn events_podman_sends_from_before_a_watch_after_rotating_its_log_are_not_told() {
    let started = Instant::now();
    let Some(()) = require(&PODMAN) else { return };
    // Exclusive: a rotation ends the engine-log recorders of the other
    // scenarios, and their events would move this one's out of the log.
    let _lock = engines::lock_engine(PODMAN.name, true).expect("engine lock");
    let c = Containers::new(&PODMAN, "prerot");
    let label = format!("lookout.test={}", c.tag());
    // A rotation first, so that the log's newer half (what the next one
    // keeps) begins before the restart.
    let mut rotated = false;
    for i in 0..12 {
        let before = log_size();
        big_lifecycle(&c, &format!("pad{i}"), &[]);
        if log_size() < before {
            rotated = true;
            break;
        }
    }
    assert!(rotated, "{EVENTS_LOG} never shrank in 12 lifecycles");
    let pre = c.create("pre", true);
    c.cli(&["start", &pre]);
    c.cli(&["stop", "-t", "0", &pre]);
    c.cli(&["start", &pre]);
    // Time itself is the condition: the restart must be older than the
    // first dial's look-back and the subscription's margin (2 s each) by
    // the `Date` the engine answers with (to the second).
    tokio::time::sleep(Duration::from_millis(3_500)).await;
    let raw = raw_stream(&label);
    let mut w = Watcher::new(&PODMAN, (PODMAN.host)(), c.filter(), test_config());
    w.connected().await;
    let (_, rotated_at) = past_a_rotation(&c, &mut w, &label, 0).await;
    let lines = raw
        .stop()
        .unwrap_or_else(|e| panic!("podman's own event stream: {e}"));
    let of_pre = lines
        .iter()
        .filter(|l| l.contains(&format!("\"{pre}\"")))
        .count();
    let (version, v) = podman_version(&c);
    if v < (4, 5) {
        assert!(
            of_pre > 0,
            "Podman {version} rotated its log (lifecycle {rotated_at}) but its stream, \
             opened after {pre} restarted, sent nothing of it in {} lines: this scenario \
             proves nothing here",
            lines.len()
        );
    }
    let told: Vec<_> = w
        .events_of(&pre)
        .into_iter()
        .filter(|(_, origin)| *origin == Origin::Live)
        .collect();
    assert!(
        told.is_empty(),
        "{pre}: Podman {version} sent {of_pre} of its events from before the watch again; \
         the watch told {told:?}: {}",
        w.summary()
    );
    eprintln!(
        "podman {version}: rotated at lifecycle {rotated_at}; {of_pre} events of {pre} \
         from before the watch sent again"
    );
    report_as(
        PODMAN.name,
        "event log rotation before a watch",
        started,
        &w,
    );
}
