//! Many engines in one stream (`lookout_core::Merge`) against real engines:
//! two dockerds on this machine (the second: `cargo xtask engines up
//! docker2`, on its own socket, data root, exec root and containerd
//! namespaces), Podman, and the k8s test bed. CI brings them all up.

use std::time::{Duration, Instant};

use lookout_core::{EventKind, Item, Merge, Origin, SourceState, Status};
use lookout_e2e::engines;
use lookout_e2e::k8s_util::{self, Fixture};
use lookout_e2e::relay::scenarios::{self, Containers, Engine, test_config};
use lookout_k8s::{K8sConfig, Kind};
use lookout_moby::Config;
use tokio_stream::StreamExt;

use EventKind::{Created, Removed, Started, Stopped, Stopping};
use Origin::{Live, Resync};

/// The bound of every single expected item.
const ITEM: Duration = Duration::from_secs(30);

fn docker2_up() -> Result<(), String> {
    engines::docker_up()?;
    engines::docker2_up()
}

fn no_signal(sig: &str) -> Result<(), String> {
    Err(format!(
        "docker2: no test signals the second dockerd ({sig})"
    ))
}

fn docker2_restart(_containers: &[&str]) -> Result<(), String> {
    engines::docker2_kill9()?;
    engines::docker2_start()
}

/// The second dockerd, driven as the scenarios drive the first.
static DOCKER2: Engine = Engine {
    name: "docker2",
    host: engines::docker2_host,
    up: docker2_up,
    cli: engines::docker2,
    signal: no_signal,
    restart_stopping: docker2_restart,
    watch: lookout_docker::watch,
    run_check: None,
    keeps_history: false,
    logs_stop: true,
};

/// A merge under test, with everything it yielded: (source name, item).
struct Merged {
    merge: Merge,
    seen: Vec<(String, Item, Instant)>,
}

impl Merged {
    fn new(merge: Merge) -> Self {
        Self {
            merge,
            seen: Vec::new(),
        }
    }

    fn summary(&self) -> String {
        let lines: Vec<String> = self
            .seen
            .iter()
            .map(|(source, item, _)| match item {
                Item::Event(e) => format!("{source}/{} {} ({})", e.id, e.kind, e.origin),
                Item::Status(s) => format!("{source}: {s:?}"),
            })
            .collect();
        format!("[{}]", lines.join("; "))
    }

    /// The next item, at most `timeout` away.
    async fn next(&mut self, timeout: Duration) -> Option<(String, Item)> {
        let sourced = tokio::time::timeout(timeout, self.merge.next())
            .await
            .ok()?;
        let sourced = sourced.unwrap_or_else(|| panic!("the merge ended: {}", self.summary()));
        let name = self.merge.name(sourced.source).to_owned();
        self.seen
            .push((name.clone(), sourced.item.clone(), Instant::now()));
        Some((name, sourced.item))
    }

    /// Polls until `done` holds, within `within`.
    async fn until(&mut self, what: &str, within: Duration, done: impl Fn(&Self) -> bool) {
        let deadline = Instant::now() + within;
        while !done(self) {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(
                !left.is_zero(),
                "{what}: not within {within:?}: {}",
                self.summary()
            );
            let _ = self.next(left.min(Duration::from_millis(200))).await;
        }
    }

    /// The events of `id` from `source`.
    fn events_of(&self, source: &str, id: &str) -> Vec<(EventKind, Origin)> {
        self.seen
            .iter()
            .filter_map(|(s, item, _)| match item {
                Item::Event(e) if s == source && e.id.as_str() == id => Some((e.kind, e.origin)),
                _ => None,
            })
            .collect()
    }

    /// When the `kind` event of `id` from `source` arrived.
    fn arrived(&self, source: &str, id: &str, kind: EventKind) -> Option<Instant> {
        self.seen.iter().find_map(|(s, item, at)| match item {
            Item::Event(e) if s == source && e.id.as_str() == id && e.kind == kind => Some(*at),
            _ => None,
        })
    }

    fn has_event(&self, source: &str, id: &str, kind: EventKind) -> bool {
        self.arrived(source, id, kind).is_some()
    }

    /// The statuses of `source`, as words.
    fn statuses(&self, source: &str) -> Vec<&'static str> {
        self.seen
            .iter()
            .filter_map(|(s, item, _)| match item {
                Item::Status(Status::Connected { .. }) if s == source => Some("connected"),
                Item::Status(Status::Disconnected { .. }) if s == source => Some("disconnected"),
                _ => None,
            })
            .collect()
    }
}

fn docker_watch(engine: &Engine, c: &Containers) -> lookout_core::Watch<lookout_moby::CompatDial> {
    let config = Config::default()
        .host((engine.host)())
        .labels(c.filter())
        .watch_config(test_config());
    (engine.watch)(config).unwrap_or_else(|e| panic!("{}: a valid host: {e}", engine.name))
}

/// Two dockerds in one stream. The same container name on both is two
/// instances, each with its own lifecycle. `kill -9` of the second: its
/// statuses name it, the first's events keep arriving meanwhile (none
/// waits for the dead one: each comes while it is still down), and its
/// restart's missed stop comes once, as `resync`, for it only.
#[tokio::test]
async fn two_dockerds_one_stream_and_a_killed_one_holds_up_nothing() {
    let started = Instant::now();
    let Some(()) = scenarios::require(&scenarios::DOCKER) else {
        return;
    };
    let Some(()) = scenarios::require(&DOCKER2) else {
        return;
    };
    let _one_lock = engines::lock_engine("docker", false).expect("docker lock");
    let _two_lock = engines::lock_engine("docker2", true).expect("docker2 lock");
    let one = Containers::new(&scenarios::DOCKER, "merge");
    let two = Containers::new(&DOCKER2, "merge");
    assert_eq!(one.tag(), two.tag(), "one tag: the same names on both");
    let merge = Merge::new()
        .source("one", docker_watch(&scenarios::DOCKER, &one))
        .and_then(|m| m.source("two", docker_watch(&DOCKER2, &two)))
        .expect("two names");
    let mut m = Merged::new(merge);
    m.until("both connected", ITEM, |m| m.merge.all_connected())
        .await;

    let web = one.create("web", true);
    assert_eq!(two.create("web", true), web);
    one.cli(&["start", &web]);
    two.cli(&["start", &web]);
    m.until("both started", ITEM, |m| {
        m.has_event("one", &web, Started) && m.has_event("two", &web, Started)
    })
    .await;
    one.cli(&["stop", "-t", "0", &web]);
    m.until("one stopped", ITEM, |m| m.has_event("one", &web, Stopped))
        .await;
    assert_eq!(
        m.events_of("two", &web),
        [(Created, Live), (Started, Live)],
        "{}",
        m.summary()
    );

    // The second dockerd dies; its `web` still runs (in its shim).
    engines::docker2_kill9().unwrap_or_else(|e| panic!("{e}"));
    let killed = Instant::now();
    m.until("two disconnected", ITEM, |m| {
        m.merge.sources().nth(1) == Some(("two", SourceState::Disconnected))
    })
    .await;
    assert!(!m.merge.all_connected());
    let latencies = lifecycle_while_two_is_down(&mut m, &one).await;

    // Back: the restarted dockerd stopped `web` (live-restore off); the
    // watch tells it once, from the snapshot.
    engines::docker2_start().unwrap_or_else(|e| panic!("{e}"));
    let down_for = killed.elapsed();
    m.until("two's stop after its restart", ITEM, |m| {
        m.has_event("two", &web, Stopped) && m.merge.all_connected()
    })
    .await;
    assert_eq!(
        two.cli(&["inspect", "--format", "{{.State.Running}}", &web]),
        "false"
    );
    // Nothing more comes for it (no second stop, no replay).
    let _ = m.next(Duration::from_secs(1)).await;
    assert_eq!(
        m.events_of("two", &web),
        [(Created, Live), (Started, Live), (Stopped, Resync)],
        "{}",
        m.summary()
    );
    assert_eq!(
        m.events_of("one", &web),
        [
            (Created, Live),
            (Started, Live),
            (Stopping, Live),
            (Stopped, Live)
        ],
        "{}",
        m.summary()
    );
    assert_eq!(m.statuses("one"), ["connected"], "{}", m.summary());
    let two_statuses = m.statuses("two");
    assert!(
        two_statuses.first() == Some(&"connected")
            && two_statuses.last() == Some(&"connected")
            && two_statuses.contains(&"disconnected"),
        "{two_statuses:?}"
    );
    eprintln!(
        "[merge] two dockerds in {:.1?}: docker2 down {down_for:.1?}; one's events while it \
         was down arrived {latencies:.1?} after their command; {}",
        started.elapsed(),
        m.summary()
    );
}

/// A lifecycle on the first dockerd while the second is down: each event
/// comes at once, while the second is still down. How long after its
/// command each came.
async fn lifecycle_while_two_is_down(m: &mut Merged, one: &Containers) -> Vec<Duration> {
    let other = one.create("other", true);
    let mut latencies = Vec::new();
    for (cmd, kind) in [("start", Started), ("stop", Stopped), ("rm", Removed)] {
        let args: Vec<&str> = if cmd == "stop" {
            vec![cmd, "-t", "0", &other]
        } else {
            vec![cmd, &other]
        };
        one.cli(&args);
        let asked = Instant::now();
        m.until(&format!("one's {kind} while two is down"), ITEM, |m| {
            m.has_event("one", &other, kind)
        })
        .await;
        let at = m.arrived("one", &other, kind).expect("arrived");
        latencies.push(at.saturating_duration_since(asked));
        assert_eq!(
            m.merge.sources().nth(1).map(|s| s.1),
            Some(SourceState::Disconnected),
            "two came back before one's {kind}: {}",
            m.summary()
        );
    }
    // dockerd logs `docker stop`'s request first: `stopping`.
    assert_eq!(
        m.events_of("one", &other),
        [
            (Created, Live),
            (Started, Live),
            (Stopping, Live),
            (Stopped, Live),
            (Removed, Live)
        ]
    );

    latencies
}

/// dockerd, Podman and the k8s test bed in one stream: one lifecycle each,
/// each source's events in its own order, nothing of one told as another's.
#[tokio::test]
async fn dockerd_podman_and_k8s_in_one_stream() {
    let started = Instant::now();
    let Some(()) = scenarios::require(&scenarios::DOCKER) else {
        return;
    };
    let podman = &scenarios::PODMAN;
    let Some(()) = scenarios::require(podman) else {
        return;
    };
    let Some(kubeconfig) = k8s_util::require() else {
        return;
    };
    let _locks =
        ["docker", "podman", "k8s"].map(|e| engines::lock_engine(e, false).expect("engine lock"));
    let d = Containers::new(&scenarios::DOCKER, "merge3");
    let p = Containers::new(podman, "merge3");
    let fx = Fixture::new(&kubeconfig).await;
    let k8s = K8sConfig::default()
        .kubeconfig(kubeconfig.clone())
        .namespace(fx.ns.clone())
        .kinds([Kind::Deployment, Kind::StatefulSet])
        .watch_config(k8s_util::fast_watch_config());
    let merge = Merge::new()
        .source("docker", docker_watch(&scenarios::DOCKER, &d))
        .and_then(|m| m.source("podman", docker_watch(podman, &p)))
        .and_then(|m| m.source("k8s", lookout_k8s::watch(k8s).expect("a valid kubeconfig")))
        .expect("three names");
    let mut m = Merged::new(merge);
    m.until("all connected", ITEM, |m| m.merge.all_connected())
        .await;

    let web = d.create("web", true);
    assert_eq!(p.create("web", true), web);
    fx.create(Kind::Deployment, "web", 1, &[]).await;
    let deploy = fx.id(Kind::Deployment, "web");
    for c in [&d, &p] {
        c.cli(&["start", &web]);
        c.cli(&["stop", "-t", "0", &web]);
        c.cli(&["rm", &web]);
    }
    fx.scale(Kind::Deployment, "web", 0).await;
    fx.delete(Kind::Deployment, "web").await;
    m.until("every lifecycle", ITEM, |m| {
        m.has_event("docker", &web, Removed)
            && m.has_event("podman", &web, Removed)
            && m.has_event("k8s", &deploy, Removed)
    })
    .await;
    let lifecycle = [
        (Created, Live),
        (Started, Live),
        (Stopped, Live),
        (Removed, Live),
    ];
    // dockerd logs `docker stop`'s request first (`stopping`); Podman 4.3
    // may or may not (`Engine::optional`); scaled to 0, a Deployment stops
    // at once.
    let requested = [
        (Created, Live),
        (Started, Live),
        (Stopping, Live),
        (Stopped, Live),
        (Removed, Live),
    ];
    assert_eq!(m.events_of("docker", &web), requested, "{}", m.summary());
    assert_eq!(
        scenarios::PODMAN.told(m.events_of("podman", &web)),
        lifecycle,
        "{}",
        m.summary()
    );
    assert_eq!(m.events_of("k8s", &deploy), lifecycle, "{}", m.summary());
    for source in ["docker", "podman", "k8s"] {
        assert_eq!(m.statuses(source), ["connected"], "{}", m.summary());
    }
    // Each lifecycle's four, docker's `stopping` and Podman's when it came.
    let events = m
        .seen
        .iter()
        .filter(|(s, item, _)| {
            matches!(item, Item::Event(e) if !(s == "podman" && scenarios::PODMAN.optional(e.kind)))
        })
        .count();
    assert_eq!(events, 13, "nothing else: {}", m.summary());
    eprintln!(
        "[merge] docker, podman and k8s in {:.1?}: {}",
        started.elapsed(),
        m.summary()
    );
}
