//! The reconnect's ordering rule through the public path: `lookout_docker::watch`
//! against a fake engine (`lookout_testkit::fake_engine`: dockerd's `since`/`until`
//! over its last 256 events, its list, its cuts and restarts).
//!
//! What happened while the feed could not be seen is told either as the
//! exact transitions (the history holds the last event seen), before the
//! snapshot, or as the snapshot's net effect (`resync`), never both; after
//! the snapshot, nothing older than it comes `live`.
//!
//! The same holds for an engine speaking API 1.52 (`application/jsonl`
//! events without `status`/`id`/`from`) behind a proxy that refuses every
//! unversioned path but `/_ping`: every request goes to `/v1.52/…`.

use lookout_testkit::fake_engine;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fake_engine::{Live, SlowReader};
use lookout_core::{EventKind, Item, Origin, ReconnectPolicy, Status, WatchConfig};
use lookout_docker::{DockerConfig, DockerDial, watch};
use lookout_moby::ApiVersion;
use tokio_stream::StreamExt;

/// The bound of every awaited item.
const ITEM: Duration = Duration::from_secs(10);

type Watch = lookout_core::Watch<DockerDial>;

fn start(live: &Arc<Live>) -> (fake_engine::FakeEngine, Watch) {
    start_with(live, false)
}

/// A watch of a new engine serving `live`; `initial`: its first snapshot
/// comes as events.
fn start_with(live: &Arc<Live>, initial: bool) -> (fake_engine::FakeEngine, Watch) {
    start_api(live, fake_engine::Api::DOCKER_27, initial, None)
}

/// [`start_with`] an engine speaking `api`; `pinned`: the watch's
/// [`api_version`](DockerConfig::api_version).
fn start_api(
    live: &Arc<Live>,
    api: fake_engine::Api,
    initial: bool,
    pinned: Option<ApiVersion>,
) -> (fake_engine::FakeEngine, Watch) {
    let engine = fake_engine::start_live_with(Arc::clone(live), api);
    let config = WatchConfig::default()
        .initial(initial)
        .resync_every(None)
        .resync_after_lag(None)
        .dial_timeout(Duration::from_secs(5))
        .reconnect(ReconnectPolicy {
            initial_delay: Duration::from_millis(5),
            max_delay: Duration::from_millis(50),
            ..ReconnectPolicy::default()
        });
    let mut docker = DockerConfig::default()
        .host(&engine.host)
        .watch_config(config);
    if let Some(version) = pinned {
        docker = docker.api_version(version);
    }
    let w = watch(docker).expect("a valid host");
    (engine, w)
}

async fn next(w: &mut Watch) -> Item {
    tokio::time::timeout(ITEM, w.next())
        .await
        .expect("an item in time")
        .expect("the stream never ends")
}

/// `(name, kind, origin, at in ns)` of every event until the next
/// `Connected`; panics on another status.
async fn until_connected(w: &mut Watch) -> Vec<(String, EventKind, Origin, i64)> {
    let mut events = Vec::new();
    loop {
        match next(w).await {
            Item::Event(e) => events.push((e.id.to_string(), e.kind, e.origin, nanos(e.at))),
            Item::Status(Status::Connected { .. }) => return events,
            Item::Status(s) => panic!("unexpected {s:?} after {events:?}"),
        }
    }
}

async fn disconnected(w: &mut Watch) {
    match next(w).await {
        Item::Status(Status::Disconnected { .. }) => {}
        other => panic!("expected Disconnected, got {other:?}"),
    }
}

/// The next `n` events.
async fn events(w: &mut Watch, n: usize) -> Vec<(String, EventKind, Origin, i64)> {
    let mut events = Vec::new();
    while events.len() < n {
        match next(w).await {
            Item::Event(e) => events.push((e.id.to_string(), e.kind, e.origin, nanos(e.at))),
            Item::Status(s) => panic!("unexpected {s:?} after {events:?}"),
        }
    }
    events
}

fn nanos(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

fn now() -> i64 {
    nanos(SystemTime::now())
}

/// What the engine logged from `since` on, as the events lookout must
/// report live for them: `(name, kind, Live, timeNano)`.
fn logged(live: &Live, since: i64) -> Vec<(String, EventKind, Origin, i64)> {
    live.past(since, i64::MAX)
        .iter()
        .map(|line| {
            let v: serde_json::Value = serde_json::from_slice(line).expect("an event line");
            let kind = match v["Action"].as_str() {
                Some("create") => EventKind::Created,
                Some("start") => EventKind::Started,
                Some("die") => EventKind::Stopped,
                Some("destroy") => EventKind::Removed,
                other => panic!("the fake engine logs no {other:?}"),
            };
            let name = v["Actor"]["Attributes"]["name"]
                .as_str()
                .expect("a name")
                .to_owned();
            (
                name,
                kind,
                Origin::Live,
                v["timeNano"].as_i64().expect("timeNano"),
            )
        })
        .collect()
}

/// The state the events tell, applied to `model`.
fn apply(model: &mut BTreeMap<String, bool>, events: &[(String, EventKind, Origin, i64)]) {
    for (name, kind, ..) in events {
        match kind {
            EventKind::Created | EventKind::Stopped => {
                model.insert(name.clone(), false);
            }
            EventKind::Started => {
                model.insert(name.clone(), true);
            }
            EventKind::Removed => {
                model.remove(name);
            }
            other => panic!("no readiness is watched here: {other}"),
        }
    }
}

/// Connects and brings the model in line with a first round of changes.
async fn warm_up(live: &Live, w: &mut Watch) -> BTreeMap<String, bool> {
    let mut model = BTreeMap::new();
    assert!(until_connected(w).await.is_empty(), "a silent baseline");
    let t = now();
    live.mutate(20);
    let seen = events(w, 20).await;
    assert_eq!(seen, logged(live, t), "live, exactly as logged");
    apply(&mut model, &seen);
    assert_eq!(model, live.snapshot());
    model
}

#[tokio::test(flavor = "current_thread")]
async fn a_cut_is_replayed_exactly_before_the_snapshot() {
    let live = Live::new("r", 5, SlowReader::Drop, Live::DOCKERD_QUEUE, 11);
    let (engine, mut w) = start(&live);
    let mut model = warm_up(&live, &mut w).await;

    let cut = now();
    live.cut(false, 30);
    disconnected(&mut w).await;
    let replayed = until_connected(&mut w).await;
    // Exactly the transitions made while disconnected, in the engine's
    // order and with its times, all before the snapshot; the snapshot has
    // nothing left to tell (no `resync`).
    assert_eq!(replayed, logged(&live, cut));
    apply(&mut model, &replayed);
    assert_eq!(model, live.snapshot());
    // Each dial reads the history, then subscribes.
    assert_eq!(engine.events_requests.load(Ordering::SeqCst), 4);

    // Then only what happens after the snapshot.
    let t = now();
    live.mutate(10);
    let after = events(&mut w, 10).await;
    assert_eq!(after, logged(&live, t));
    apply(&mut model, &after);
    assert_eq!(model, live.snapshot());
}

#[tokio::test(flavor = "current_thread")]
async fn a_restart_is_told_by_the_snapshot_alone() {
    let live = Live::new("r", 5, SlowReader::Drop, Live::DOCKERD_QUEUE, 12);
    let (engine, mut w) = start(&live);
    let mut model = warm_up(&live, &mut w).await;

    // A restarted daemon keeps no history: only the snapshot can tell.
    live.cut(true, 30);
    disconnected(&mut w).await;
    let listed = now();
    let resync = until_connected(&mut w).await;
    assert!(
        resync.iter().all(|e| e.2 == Origin::Resync),
        "the net effect only: {resync:?}"
    );
    apply(&mut model, &resync);
    assert_eq!(model, live.snapshot());
    assert_eq!(engine.events_requests.load(Ordering::SeqCst), 4);

    // The new subscription asks for nothing of the past: what follows is
    // exactly what happened after the snapshot.
    let t = now();
    live.mutate(10);
    let after = events(&mut w, 10).await;
    assert!(after.iter().all(|e| e.3 >= listed), "{after:?}");
    assert_eq!(after, logged(&live, t));
    apply(&mut model, &after);
    assert_eq!(model, live.snapshot());
}

#[tokio::test(flavor = "current_thread")]
async fn a_history_that_no_longer_reaches_back_is_not_replayed() {
    let live = Live::new("r", 5, SlowReader::Drop, Live::DOCKERD_QUEUE, 13);
    let (_engine, mut w) = start(&live);
    let mut model = warm_up(&live, &mut w).await;

    // More changes than the engine keeps: the last event seen is gone from
    // its history, which proves nothing.
    live.cut(false, Live::HISTORY + 10);
    disconnected(&mut w).await;
    let listed = now();
    let resync = until_connected(&mut w).await;
    assert!(
        resync.iter().all(|e| e.2 == Origin::Resync),
        "the net effect only: {resync:?}"
    );
    apply(&mut model, &resync);
    assert_eq!(model, live.snapshot());

    let t = now();
    live.mutate(10);
    let after = events(&mut w, 10).await;
    assert!(after.iter().all(|e| e.3 >= listed), "{after:?}");
    assert_eq!(after, logged(&live, t));
}

/// dockerd logs a container's `die` before its list shows it exited: a
/// list taken right after the history must not undo the stops the history
/// just told (the subscription resumes after them, so nothing would ever
/// tell them again). The history's last word on each container wins.
#[tokio::test(flavor = "current_thread")]
async fn a_list_that_lags_the_history_does_not_undo_it() {
    let live = Live::new("r", 5, SlowReader::Drop, Live::DOCKERD_QUEUE, 14);
    let (_engine, mut w) = start(&live);
    let mut model = warm_up(&live, &mut w).await;

    live.lagging_list(true);
    let cut = now();
    live.cut(false, 30);
    disconnected(&mut w).await;
    let replayed = until_connected(&mut w).await;
    // The replay, exactly; no `resync` event reverts a stop.
    assert_eq!(replayed, logged(&live, cut));
    apply(&mut model, &replayed);
    assert_eq!(model, live.snapshot());

    // The same on a first dial: a container that just died is not taken
    // for running by a new watch.
    let (_second_engine, mut fresh) = start_with(&live, true);
    let first = until_connected(&mut fresh).await;
    let mut fresh_model = BTreeMap::new();
    apply(&mut fresh_model, &first);
    assert_eq!(fresh_model, live.snapshot());
    live.lagging_list(false);
}

/// A subscription can end before it delivers the changes that raced its
/// list (Podman's event-log rotation ends every `/events` stream): the
/// snapshot told their effect (`resync`), so the next redial's history,
/// which still holds them and still proves it continues the feed, must not
/// tell them again as `live` — the past narrated as news after the present.
#[tokio::test(flavor = "current_thread")]
async fn what_a_snapshot_told_is_not_replayed_after_it() {
    let live = Live::new("r", 5, SlowReader::Drop, Live::DOCKERD_QUEUE, 15);
    let (engine, mut w) = start(&live);
    let mut model = warm_up(&live, &mut w).await;

    live.unseen_before_next_list(12);
    live.cut(false, 0);
    disconnected(&mut w).await;
    let resync = until_connected(&mut w).await;
    assert!(!resync.is_empty(), "the steps changed something");
    assert!(
        resync.iter().all(|e| e.2 == Origin::Resync),
        "the net effect only: {resync:?}"
    );
    // (The list is corrected by the history's last word, read just before
    // the steps: a stop among them can stay untold until the next
    // snapshot, as the subscription that would tell it is closed.)
    apply(&mut model, &resync);

    // That session's subscription was closed before it could tell them.
    disconnected(&mut w).await;
    let again = until_connected(&mut w).await;
    assert!(
        again.iter().all(|e| e.2 == Origin::Resync),
        "the snapshot told these already: nothing of them comes live: {again:?}"
    );
    apply(&mut model, &again);
    assert_eq!(model, live.snapshot());
    assert_eq!(engine.events_requests.load(Ordering::SeqCst), 6);

    // The history still continues the feed from an event seen after that
    // snapshot: a cut is replayed exactly again.
    let t = now();
    live.mutate(10);
    let after = events(&mut w, 10).await;
    assert_eq!(after, logged(&live, t));
    apply(&mut model, &after);
    let cut = now();
    live.cut(false, 15);
    disconnected(&mut w).await;
    let replayed = until_connected(&mut w).await;
    assert_eq!(replayed, logged(&live, cut));
    apply(&mut model, &replayed);
    assert_eq!(model, live.snapshot());
}

/// A session that saw no event after its snapshot still replays a cut
/// exactly: the history proves continuity from the last event seen, and
/// only what the snapshot told is left out.
#[tokio::test(flavor = "current_thread")]
async fn a_quiet_session_still_replays_a_cut_exactly() {
    let live = Live::new("r", 5, SlowReader::Drop, Live::DOCKERD_QUEUE, 16);
    let (_engine, mut w) = start(&live);
    let mut model = warm_up(&live, &mut w).await;
    live.cut(false, 0);
    disconnected(&mut w).await;
    assert!(until_connected(&mut w).await.is_empty());
    // Connected, quiet; then a cut with changes.
    let cut = now();
    live.cut(false, 15);
    disconnected(&mut w).await;
    let replayed = until_connected(&mut w).await;
    assert_eq!(
        replayed,
        logged(&live, cut),
        "exact, live, before the snapshot"
    );
    apply(&mut model, &replayed);
    assert_eq!(model, live.snapshot());
}

/// Every request but `/_ping` went to `/v{version}/…`; the dial asked
/// `/_ping` first (unless pinned), and `/events` and the list were asked.
fn all_versioned(engine: &fake_engine::FakeEngine, version: &str) {
    let requests = engine.requests();
    let prefix = format!("/v{version}/");
    let stray = lookout_e2e::relay::not_under_version(&requests, version);
    assert!(
        stray.is_empty(),
        "unversioned or other-versioned: {stray:?} of {requests:?}"
    );
    for path in ["events?", "containers/json?"] {
        assert!(
            requests
                .iter()
                .any(|r| r.starts_with(&format!("{prefix}{path}"))),
            "no {prefix}{path}: {requests:?}"
        );
    }
}

/// API 1.52 behind a proxy that allows only versioned paths: the version
/// comes from `/_ping`'s `Api-Version`, every request carries it, the
/// legacy-free `application/jsonl` events decode, and a cut is replayed
/// exactly, as on an older API.
#[tokio::test(flavor = "current_thread")]
async fn api_1_52_behind_a_versioned_proxy_is_watched_and_replayed() {
    let live = Live::new("v", 5, SlowReader::Drop, Live::DOCKERD_QUEUE, 21);
    let api = fake_engine::Api::DOCKER_29.behind_versioned_proxy();
    let (engine, mut w) = start_api(&live, api, false, None);
    let mut model = warm_up(&live, &mut w).await;
    assert!(
        live.past(0, i64::MAX)
            .iter()
            .all(|l| !l.starts_with(br#"{"status""#) && !l.windows(5).any(|w| w == br#""id":"#)),
        "the engine writes 1.52 lines"
    );

    let cut = now();
    live.cut(false, 30);
    disconnected(&mut w).await;
    let replayed = until_connected(&mut w).await;
    assert_eq!(replayed, logged(&live, cut), "the replay, exactly");
    apply(&mut model, &replayed);
    assert_eq!(model, live.snapshot());

    let t = now();
    live.mutate(10);
    let after = events(&mut w, 10).await;
    assert_eq!(after, logged(&live, t));
    all_versioned(&engine, "1.52");
    // Two dials, each one ping first.
    let pings = engine.requests().iter().filter(|r| *r == "/_ping").count();
    assert!(pings >= 2, "{:?}", engine.requests());
}

/// The proxy really refuses what is not versioned: without the ping's
/// version (an engine whose pinned version is another), the requests are
/// the pinned one's, and the proxy lets them through only because they are
/// versioned; an unversioned request is refused.
#[tokio::test(flavor = "current_thread")]
async fn a_pinned_version_is_used_for_every_request() {
    let live = Live::new("p", 5, SlowReader::Drop, Live::DOCKERD_QUEUE, 22);
    let api = fake_engine::Api::DOCKER_29.behind_versioned_proxy();
    let pinned = ApiVersion::parse("1.44").expect("a version");
    let (engine, mut w) = start_api(&live, api, false, Some(pinned));
    warm_up(&live, &mut w).await;
    all_versioned(&engine, "1.44");
    assert!(
        !engine.requests().iter().any(|r| r == "/_ping"),
        "a pinned version needs no ping to dial"
    );
    // The proxy's refusal, seen by a plain request.
    let answer = lookout_e2e::relay::scenarios::raw_get(&engine.socket, "/containers/json").await;
    assert!(answer.starts_with("HTTP/1.1 403"), "{answer}");
}
