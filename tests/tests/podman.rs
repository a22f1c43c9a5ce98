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

/// Podman before 4.5 reads its event log again after it rotates it (podman
/// #17665, fixed by #17771): the events the rotation kept, the newer half
/// of the 1 MB file, come again on every open `/events` stream, after newer
/// ones. Containers carrying 30 KB of labels (in every event of theirs)
/// rotate the log within a few lifecycles. The engine's own stream, read
/// raw beside the watch, shows the replay; the watch tells each lifecycle
/// once, live.
#[tokio::test]
async fn events_podman_sends_again_after_rotating_its_log_are_told_once() {
    let started = Instant::now();
    require(&PODMAN);
    let _lock = engines::lock_engine(PODMAN.name, false).expect("engine lock");
    let c = Containers::new(&PODMAN, "rotate");
    let label = format!("lookout.test={}", c.tag());
    let socket = (PODMAN.host)();
    let socket = socket
        .strip_prefix("unix://")
        .expect("a unix:// podman host");
    let raw = RawEvents::start(socket, &label, Duration::from_secs(120))
        .unwrap_or_else(|e| panic!("podman's own event stream: {e}"));
    let mut w = Watcher::new(&PODMAN, (PODMAN.host)(), c.filter(), test_config());
    w.connected().await;
    let size = || std::fs::metadata(EVENTS_LOG).map_or(0, |m| m.len());
    let big = format!("lookout.pad={}", "x".repeat(30_000));
    let cleanup = format!("lookout.cleanup={}", c.tag());
    let image = engines::test_image();
    let mut names = Vec::new();
    let mut rotated_at = None;
    // ~6 events of ~31 KB each per lifecycle: 12 cross the 1 MB limit at
    // least twice.
    for i in 0..12 {
        let before = size();
        let name = format!("{}-{i}", c.tag());
        c.cli(&[
            "create",
            "--name",
            &name,
            "--label",
            &label,
            "--label",
            &cleanup,
            "--label",
            &big,
            "--network",
            "none",
            &image,
            "sleep",
            "3600",
        ]);
        c.cli(&["start", &name]);
        c.cli(&["stop", "-t", "0", &name]);
        c.cli(&["rm", &name]);
        w.events_until(&name, EventKind::Removed).await;
        names.push(name);
        // A rotation in the first lifecycle may keep none of this test's
        // events (the log's newer half is then other tests'): the next
        // one, ~0.5 MB later, keeps the lifecycles before it.
        if size() < before && i > 0 && rotated_at.is_none() {
            rotated_at = Some(i);
        }
        // One more lifecycle after the rotation: its events follow the replay.
        if rotated_at.is_some_and(|r| i > r) {
            break;
        }
    }
    let rotated_at = rotated_at.unwrap_or_else(|| {
        panic!(
            "{EVENTS_LOG} never shrank in 12 lifecycles ({} bytes)",
            size()
        )
    });
    let lines = raw
        .stop()
        .unwrap_or_else(|e| panic!("podman's own event stream: {e}"));
    let mut sorted = lines.clone();
    sorted.sort();
    let repeated = sorted.windows(2).filter(|p| p[0] == p[1]).count();
    let version = c.cli(&["version", "--format", "{{.Server.Version}}"]);
    let mut parts = version
        .trim()
        .split('.')
        .map(|p| p.parse::<u32>().unwrap_or(0));
    let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    if (major, minor) < (4, 5) {
        assert!(
            repeated > 0,
            "Podman {version} rotated its log (lifecycle {rotated_at}) but sent no \
             event twice in {} lines: this scenario proves nothing here",
            lines.len()
        );
    }
    for name in &names {
        assert_eq!(
            w.events_of(name),
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
        "podman {}: rotated at lifecycle {rotated_at}; {repeated} of {} raw lines sent twice",
        version.trim(),
        lines.len()
    );
    report_as(PODMAN.name, "event log rotation", started, &w);
}
