//! The etcd provider against the real 3-member cluster (`cargo xtask engines
//! up etcd`): a cut connection resumes the watch and replays what it missed
//! before `connected`; a compaction past the cursor relists and tells only
//! the difference, as `resync`; `kill -9` of the leader during a burst of
//! writes loses and repeats nothing.

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{
    Relay, WAIT, brief, briefs, cluster, member_addr, next_item, put, require_etcd, unique_prefix,
    until_connected,
};
use lookout_core::{Item, ReconnectPolicy, Status};
use lookout_engines as engines;
use lookout_etcd::EtcdConfig;
use lookout_etcd::model::State;

/// Probes after 1 s of silence, answered within 1 s.
fn quick_probe(c: EtcdConfig) -> EtcdConfig {
    let watch = c
        .get_watch_config()
        .clone()
        .probe_after(Duration::from_secs(1))
        .probe_timeout(Duration::from_secs(1));
    c.request_timeout(Duration::from_secs(1))
        .watch_config(watch)
}

fn config(endpoints: &str, prefix: &str, initial: bool) -> EtcdConfig {
    EtcdConfig::new(endpoints)
        .expect("endpoints")
        .prefix(prefix)
        .request_timeout(Duration::from_secs(2))
        .watch_config(
            EtcdConfig::default_watch().initial(initial).reconnect(
                ReconnectPolicy::default()
                    .initial_delay(Duration::from_millis(100))
                    .max_delay(Duration::from_millis(500)),
            ),
        )
}

/// Items until `connected`, without the `disconnected` of failed redials.
async fn reconnect_items(
    watch: &mut (impl tokio_stream::Stream<Item = Item> + Unpin),
) -> Vec<String> {
    let items = until_connected(watch, 200).await;
    briefs(&items)
        .into_iter()
        .filter(|b| b != "disconnected")
        .collect()
}

/// Cuts the relay's connections and refuses new ones; waits for the
/// watch's `disconnected`.
async fn disconnect(relay: &Relay, watch: &mut (impl tokio_stream::Stream<Item = Item> + Unpin)) {
    relay.refuse(true);
    relay.cut();
    let item = next_item(watch).await;
    assert!(
        matches!(item, Item::Status(Status::Disconnected { .. })),
        "disconnected first, got {item:?}"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn a_cut_connection_resumes_and_replays_what_it_missed_before_connected() {
    let Some(_lock) = require_etcd(false) else {
        return;
    };
    let prefix = unique_prefix("resume");
    let _cleanup = common::Cleanup(prefix.clone());
    let client = cluster();
    put(&client, &prefix, "a", State::Running, false).await;
    let relay = Relay::start(member_addr(1));
    let mut watch = lookout_etcd::watch(config(&relay.url(), &prefix, true)).expect("config");
    assert_eq!(
        reconnect_items(&mut watch).await,
        [
            "src/a created initial",
            "src/a started initial",
            "connected 1"
        ]
    );

    disconnect(&relay, &mut watch).await;
    put(&client, &prefix, "b", State::Stopped, false).await;
    put(&client, &prefix, "a", State::Stopped, false).await;
    put(&client, &prefix, "c", State::Running, false).await;
    put(&client, &prefix, "b", State::Removed, false).await;
    // A deletion last (no put after it): in the replay too.
    let d = lookout_etcd::model::instance_key(&prefix, "src", "d");
    client
        .put(
            d.as_bytes(),
            &common::record(State::Running, "started", "live"),
            0,
        )
        .await
        .expect("put d");
    client.delete(d.as_bytes()).await.expect("delete d");
    let accepted = relay.accepted();
    relay.refuse(false);
    // The replay, live and exactly once, before `connected`.
    assert_eq!(
        reconnect_items(&mut watch).await,
        [
            "src/b created live",
            "src/a stopped live",
            "src/c created live",
            "src/c started live",
            "src/b removed live",
            "src/d created live",
            "src/d started live",
            "src/d removed live",
            "connected 2",
        ]
    );
    // One connection for the newest-put range, one for the watch: no list.
    assert_eq!(relay.accepted() - accepted, 2, "a resume, not a relist");

    // And the watch goes on.
    put(&client, &prefix, "a", State::Running, false).await;
    let Item::Event(e) = next_item(&mut watch).await else {
        panic!("an event")
    };
    assert_eq!(brief(&e), "src/a started live");
    assert_eq!(
        e.at,
        lookout_etcd::model::parse_rfc3339("2026-12-03T10:00:00.5Z").expect("a time"),
        "a live event carries the publisher's time"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn a_compaction_past_the_cursor_relists_and_tells_only_the_difference() {
    // Exclusive: a compaction is of the whole cluster (another test's resume
    // would relist).
    let Some(_lock) = require_etcd(true) else {
        return;
    };
    let prefix = unique_prefix("compact");
    let _cleanup = common::Cleanup(prefix.clone());
    let client = cluster();
    put(&client, &prefix, "a", State::Running, false).await;
    put(&client, &prefix, "b", State::Running, false).await;
    let relay = Relay::start(member_addr(2));
    let mut watch = lookout_etcd::watch(config(&relay.url(), &prefix, false)).expect("config");
    assert_eq!(reconnect_items(&mut watch).await, ["connected 2"]);

    disconnect(&relay, &mut watch).await;
    put(&client, &prefix, "a", State::Stopped, false).await;
    put(&client, &prefix, "d", State::Running, false).await;
    put(&client, &prefix, "d", State::Removed, false).await;
    put(&client, &prefix, "e", State::Running, false).await;
    let compacted = engines::etcd_compact().expect("compact");
    relay.refuse(false);
    let mut got = reconnect_items(&mut watch).await;
    assert_eq!(got.pop().as_deref(), Some("connected 3"));
    got.sort();
    // d came and went while the watch could not see it: nothing to tell.
    assert_eq!(
        got,
        [
            "src/a stopped resync",
            "src/e created resync",
            "src/e started resync"
        ],
        "compacted at {compacted}"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn publisher_resync_records_stay_resync_and_sources_filter() {
    let Some(_lock) = require_etcd(false) else {
        return;
    };
    let prefix = unique_prefix("origin");
    let _cleanup = common::Cleanup(prefix.clone());
    let client = cluster();
    let c = config(&engines::etcd_endpoints(), &prefix, false).sources(["src"]);
    let mut watch = lookout_etcd::watch(c).expect("config");
    assert_eq!(reconnect_items(&mut watch).await, ["connected 0"]);
    // Another source's key is not watched.
    let other = lookout_etcd::model::instance_key(&prefix, "other", "x");
    client
        .put(
            other.as_bytes(),
            &common::record(State::Running, "started", "live"),
            0,
        )
        .await
        .expect("put");
    put(&client, &prefix, "a", State::Running, true).await;
    put(&client, &prefix, "b", State::Stopped, false).await;
    let mut items = until_connected(&mut watch, 10).await;
    items.push(next_item(&mut watch).await);
    assert_eq!(
        briefs(&items),
        [
            "src/a created resync",
            "src/a started resync",
            // The resync record's snapshot completes the core's diff.
            "connected 1",
            "src/b created live",
        ]
    );
}

/// The transitions the core tells of an instance that went through `states`.
fn transitions(states: &[State]) -> Vec<&'static str> {
    let mut out = Vec::new();
    let mut running = None;
    for s in states {
        match (running, s) {
            (None, State::Running) => out.extend(["created", "started"]),
            (None, State::Stopped) => out.push("created"),
            (Some(false), State::Running) => out.push("started"),
            (Some(true), State::Stopped) => out.push("stopped"),
            (Some(_), State::Removed) => out.push("removed"),
            _ => {}
        }
        running = match s {
            State::Running => Some(true),
            State::Stopped => Some(false),
            State::Removed => None,
        };
    }
    out
}

const INSTANCES: usize = 20;
const WRITES: usize = 400;

/// Write `n` of the burst: its instance and state. Each instance cycles
/// running, stopped, running…; some are removed on the way.
fn intended(n: usize) -> (String, State) {
    let instance = format!("i{}", n % INSTANCES);
    let round = n / INSTANCES;
    let state = if round % 5 == 4 && n.is_multiple_of(3) {
        State::Removed
    } else if round.is_multiple_of(2) {
        State::Running
    } else {
        State::Stopped
    };
    (instance, state)
}

/// The burst: every put retried (other members) until it is acknowledged,
/// the leader killed halfway (its number left in `killed`); what was
/// written, per instance, in `written`. Returns how many puts were retried.
async fn burst(
    prefix: String,
    written: Arc<Mutex<BTreeMap<String, Vec<State>>>>,
    done: Arc<AtomicBool>,
    killed: Arc<Mutex<Option<usize>>>,
) -> u32 {
    let client = cluster();
    let mut retries = 0u32;
    for n in 0..WRITES {
        if n == WRITES / 2 {
            let leader = engines::etcd_leader().expect("a leader");
            engines::etcd_kill9(leader).expect("kill -9 the leader");
            *killed.lock().expect("lock") = Some(leader);
        }
        let (instance, state) = intended(n);
        let key = lookout_etcd::model::instance_key(&prefix, "src", &instance);
        let kind = format!("{state:?}").to_lowercase();
        let value = common::record(state, &kind, "live");
        let deadline = Instant::now() + WAIT;
        while let Err(e) = client.put(key.as_bytes(), &value, 0).await {
            assert!(Instant::now() < deadline, "put {key}: {e}");
            retries += 1;
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        written
            .lock()
            .expect("lock")
            .entry(format!("src/{instance}"))
            .or_default()
            .push(state);
    }
    done.store(true, Ordering::SeqCst);
    retries
}

/// Starts the killed member again when the test ends, whatever happened.
struct RestartKilled(Arc<Mutex<Option<usize>>>);

impl Drop for RestartKilled {
    fn drop(&mut self) {
        let member = self.0.lock().ok().and_then(|mut k| k.take());
        if let Some(m) = member
            && let Err(e) = engines::etcd_start(m)
        {
            eprintln!("etcd: could not start member {m} again: {e}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_of_the_leader_during_a_burst_loses_and_repeats_nothing() {
    let Some(_lock) = require_etcd(true) else {
        return;
    };
    let prefix = unique_prefix("leader");
    let _cleanup = common::Cleanup(prefix.clone());
    // The consumer watches on the leader first: its kill cuts the watch.
    let leader = engines::etcd_leader().expect("a leader");
    let endpoints: Vec<String> = (0..engines::ETCD_MEMBERS)
        .map(|k| engines::etcd_member_url((leader - 1 + k) % engines::ETCD_MEMBERS + 1))
        .collect();
    let mut watch =
        lookout_etcd::watch(config(&endpoints.join(","), &prefix, false)).expect("config");
    assert_eq!(reconnect_items(&mut watch).await, ["connected 0"]);

    // The writer: each instance cycles running, stopped, running…, one in
    // five is removed on the way; each put retried (other members) until it
    // is acknowledged. The leader is killed halfway.
    let written: Arc<Mutex<BTreeMap<String, Vec<State>>>> = Arc::default();
    let done = Arc::new(AtomicBool::new(false));
    let killed = Arc::new(Mutex::new(None));
    let writer = {
        let (prefix, written, done, killed) = (
            prefix.clone(),
            Arc::clone(&written),
            Arc::clone(&done),
            Arc::clone(&killed),
        );
        // A test may spawn (the library does not).
        #[allow(clippy::disallowed_methods)]
        tokio::spawn(burst(prefix, written, done, killed))
    };
    let restart = RestartKilled(Arc::clone(&killed));

    let mut seen: BTreeMap<String, Vec<&'static str>> = BTreeMap::new();
    let mut statuses = Vec::new();
    let started = Instant::now();
    let expected = loop {
        if done.load(Ordering::SeqCst) {
            let want: BTreeMap<String, Vec<&'static str>> = written
                .lock()
                .expect("lock")
                .iter()
                .map(|(k, v)| (k.clone(), transitions(v)))
                .collect();
            if want
                .iter()
                .all(|(k, v)| seen.get(k).is_some_and(|s| s.len() >= v.len()))
            {
                break want;
            }
        }
        assert!(
            started.elapsed() < 4 * WAIT,
            "the consumer did not converge"
        );
        match tokio::time::timeout(
            Duration::from_millis(500),
            tokio_stream::StreamExt::next(&mut watch),
        )
        .await
        {
            Ok(Some(Item::Event(e))) => {
                assert_eq!(e.origin.as_str(), "live", "{e:?}");
                seen.entry(e.id.to_string())
                    .or_default()
                    .push(e.kind.as_str());
            }
            Ok(Some(Item::Status(s))) => statuses.push(format!("{s:?}")),
            Ok(None) => panic!("the stream ended"),
            Err(_) => {}
        }
    };
    // Nothing more comes (a duplicate would).
    let quiet = tokio::time::timeout(Duration::from_secs(1), async {
        loop {
            match tokio_stream::StreamExt::next(&mut watch).await {
                Some(Item::Event(e)) => return Some(e),
                Some(Item::Status(_)) => {}
                None => return None,
            }
        }
    })
    .await;
    assert!(quiet.is_err(), "an extra event: {quiet:?}");
    let retries = writer.await.expect("the writer");
    assert_eq!(seen, expected, "statuses: {statuses:?}");
    let killed_member = *killed.lock().expect("lock");
    // (Leadership may have moved since the watch started.)
    if killed_member == Some(leader) {
        assert!(
            statuses.len() >= 2 && statuses.last().is_some_and(|s| s.starts_with("Connected")),
            "the watch on the killed leader was lost and resumed: {statuses:?}"
        );
    }
    // The killed member back: the cluster whole for the next test.
    drop(restart);
    engines::etcd_up().expect("etcd up again");
    eprintln!(
        "leader kill (member {killed_member:?}, the watch's: {leader}): {WRITES} writes ({retries} retried), {} transitions told exactly, \
         statuses {statuses:?}, in {:.1?}",
        expected.values().map(Vec::len).sum::<usize>(),
        started.elapsed()
    );
}

/// The items of a redial after a probe found the watch behind: the first
/// is that `disconnected`; the rest as [`briefs`], without the
/// `disconnected` of failed redials.
fn after_behind(items: &[Item]) -> Vec<String> {
    let Some(Item::Status(Status::Disconnected { error, .. })) = items.first() else {
        panic!("disconnected first: {items:?}")
    };
    assert!(error.to_string().contains("behind"), "{error}");
    briefs(&items[1..])
        .into_iter()
        .filter(|b| b != "disconnected")
        .collect()
}

#[tokio::test(flavor = "current_thread")]
async fn a_watch_connection_that_dies_silently_is_noticed_and_resumed() {
    let Some(_lock) = require_etcd(false) else {
        return;
    };
    let prefix = unique_prefix("frozen-conn");
    let _cleanup = common::Cleanup(prefix.clone());
    let client = cluster();
    put(&client, &prefix, "a", State::Running, false).await;
    let relay = Relay::start(member_addr(3));
    let mut watch =
        lookout_etcd::watch(quick_probe(config(&relay.url(), &prefix, false))).expect("config");
    assert_eq!(reconnect_items(&mut watch).await, ["connected 1"]);
    relay.freeze();
    let frozen = Instant::now();
    put(&client, &prefix, "b", State::Running, false).await;
    let items = until_connected(&mut watch, 20).await;
    let noticed = frozen.elapsed();
    assert_eq!(
        after_behind(&items),
        ["src/b created live", "src/b started live", "connected 2"]
    );
    eprintln!("a silently dead watch connection: resumed {noticed:.1?} after it froze");
}

/// SIGCONT to a member when the test ends, whatever happened.
struct Continue(usize);

impl Drop for Continue {
    fn drop(&mut self) {
        if let Err(e) = engines::etcd_signal(self.0, "CONT") {
            eprintln!("etcd: could not resume member {}: {e}", self.0);
        }
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_frozen_member_is_noticed_and_left_for_the_next() {
    let Some(_lock) = require_etcd(true) else {
        return;
    };
    let prefix = unique_prefix("frozen-member");
    let _cleanup = common::Cleanup(prefix.clone());
    // Freeze a follower: the cluster keeps its leader and takes writes.
    let leader = engines::etcd_leader().expect("a leader");
    let frozen = leader % engines::ETCD_MEMBERS + 1;
    let others: Vec<String> = (1..=engines::ETCD_MEMBERS)
        .filter(|m| *m != frozen)
        .map(engines::etcd_member_url)
        .collect();
    let writer = lookout_etcd::Client::new(
        lookout_etcd::EtcdEndpoint::parse_list(&others.join(",")).expect("endpoints"),
        Duration::from_secs(5),
    )
    .expect("a client");
    put(&writer, &prefix, "a", State::Running, false).await;
    let endpoints = [engines::etcd_member_url(frozen)]
        .into_iter()
        .chain(others)
        .collect::<Vec<_>>()
        .join(",");
    let mut watch =
        lookout_etcd::watch(quick_probe(config(&endpoints, &prefix, false))).expect("config");
    assert_eq!(reconnect_items(&mut watch).await, ["connected 1"]);

    engines::etcd_signal(frozen, "STOP").expect("SIGSTOP");
    let _continue = Continue(frozen);
    let stopped = Instant::now();
    put(&writer, &prefix, "b", State::Running, false).await;
    put(&writer, &prefix, "a", State::Stopped, false).await;
    let items = until_connected(&mut watch, 20).await;
    let noticed = stopped.elapsed();
    assert!(
        matches!(
            items.first(),
            Some(Item::Status(Status::Disconnected { .. }))
        ),
        "{items:?}"
    );
    assert_eq!(
        briefs(&items)
            .into_iter()
            .filter(|b| b != "disconnected")
            .collect::<Vec<_>>(),
        [
            "src/b created live",
            "src/b started live",
            "src/a stopped live",
            "connected 2"
        ]
    );
    eprintln!("a frozen member (e{frozen}): resumed on the next {noticed:.1?} after SIGSTOP");
}

#[tokio::test(flavor = "current_thread")]
async fn an_idle_watch_passes_its_probes() {
    let Some(_lock) = require_etcd(false) else {
        return;
    };
    let prefix = unique_prefix("idle");
    let _cleanup = common::Cleanup(prefix.clone());
    let client = cluster();
    put(&client, &prefix, "a", State::Running, false).await;
    let relay = Relay::start(member_addr(1));
    let mut watch =
        lookout_etcd::watch(quick_probe(config(&relay.url(), &prefix, false))).expect("config");
    assert_eq!(reconnect_items(&mut watch).await, ["connected 1"]);
    let accepted = relay.accepted();
    // Three probe periods of silence: probed (/health, the newest put), kept.
    let quiet = tokio::time::timeout(
        Duration::from_millis(3500),
        tokio_stream::StreamExt::next(&mut watch),
    )
    .await;
    assert!(quiet.is_err(), "an idle watch yields nothing: {quiet:?}");
    let probes = relay.accepted() - accepted;
    assert!(
        (4..=8).contains(&probes),
        "about three probes of two requests each, no redial: {probes} connections"
    );
}

/// The `start_revision` of the last watch request the relay carried.
fn last_watch_start(relay: &Relay) -> Option<i64> {
    let carried = relay.carried();
    let request = carried
        .iter()
        .filter(|(_, up, text)| *up && text.starts_with("POST /v3/watch"))
        .max_by_key(|(serial, ..)| *serial)?;
    let at = request.2.find("\"start_revision\":\"")? + "\"start_revision\":\"".len();
    let digits: String = request.2[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

#[tokio::test(flavor = "current_thread")]
async fn progress_notifications_move_the_cursor() {
    let Some(_lock) = require_etcd(false) else {
        return;
    };
    let prefix = unique_prefix("progress");
    let _cleanup = common::Cleanup(prefix.clone());
    let client = cluster();
    put(&client, &prefix, "a", State::Running, false).await;
    let relay = Relay::start(member_addr(2));
    let mut watch = lookout_etcd::watch(config(&relay.url(), &prefix, false)).expect("config");
    assert_eq!(reconnect_items(&mut watch).await, ["connected 1"]);
    let first = last_watch_start(&relay).expect("a watch request");
    // Keys elsewhere move the store's revision; the watch hears only
    // etcd's progress notifications (every 2 s on the test cluster).
    let elsewhere = format!("{prefix}-elsewhere/k");
    let mut moved = 0;
    for _ in 0..3 {
        moved = client
            .put(elsewhere.as_bytes(), b"x", 0)
            .await
            .expect("put")
            .revision;
    }
    // Wait for a notification at or past it (bounded: 3 notifications).
    // A progress notification: a result with neither events nor `created`.
    let carried_it = || {
        relay
            .carried()
            .iter()
            .filter(|(_, up, _)| !*up)
            .any(|(_, _, text)| {
                text.lines()
                    .filter(|l| {
                        l.starts_with("{\"result\"")
                            && !l.contains("events")
                            && !l.contains("created")
                    })
                    .filter_map(|l| {
                        let at = l.find("\"revision\":\"")? + "\"revision\":\"".len();
                        l[at..]
                            .chars()
                            .take_while(char::is_ascii_digit)
                            .collect::<String>()
                            .parse::<i64>()
                            .ok()
                    })
                    .any(|r| r >= moved)
            })
    };
    let deadline = Instant::now() + Duration::from_secs(7);
    while !carried_it() {
        assert!(
            Instant::now() < deadline,
            "no progress notification at {moved}"
        );
        // Polling the relay's log: the watch yields nothing to wait on.
        let quiet = tokio::time::timeout(
            Duration::from_millis(100),
            tokio_stream::StreamExt::next(&mut watch),
        )
        .await;
        assert!(quiet.is_err(), "nothing to tell: {quiet:?}");
    }
    // Let the session read it, then cut: the redial resumes after it.
    let quiet = tokio::time::timeout(
        Duration::from_millis(100),
        tokio_stream::StreamExt::next(&mut watch),
    )
    .await;
    assert!(quiet.is_err(), "nothing to tell: {quiet:?}");
    relay.cut();
    assert_eq!(reconnect_items(&mut watch).await, ["connected 1"]);
    let resumed = last_watch_start(&relay).expect("a second watch request");
    assert!(
        resumed > moved && first <= moved,
        "the first watch from {first}, the resumed one from {resumed}: after the progress at {moved}"
    );
}

/// Whether `key` is in the store now (a range read of its own).
async fn exists(client: &lookout_etcd::Client, key: &str) -> bool {
    !client
        .range(key.as_bytes(), &[], 0, 0)
        .await
        .unwrap_or_else(|e| panic!("range {key}: {e}"))
        .kvs
        .is_empty()
}

/// A publisher killed -9 stops renewing its status key's lease: once etcd
/// deletes the key, its source is disconnected, its instances kept (no
/// event invented); another source's status is its own; a publisher that
/// writes the key again makes it connected, and its instances go on from
/// where they were.
#[tokio::test(flavor = "current_thread")]
async fn a_dead_publishers_source_is_disconnected_without_inventing_transitions() {
    const TTL: i64 = 5;
    let Some(_lock) = require_etcd(false) else {
        return;
    };
    let prefix = unique_prefix("publisher");
    let _cleanup = common::Cleanup(prefix.clone());
    let client = cluster();
    put(&client, &prefix, "a", State::Running, false).await;
    put(&client, &prefix, "b", State::Stopped, false).await;
    let other = lookout_etcd::model::instance_key(&prefix, "other", "x");
    let running = common::record(State::Running, "started", "live");
    client
        .put(other.as_bytes(), &running, 0)
        .await
        .expect("put");
    let status = lookout_etcd::model::status_key(&prefix, "src");
    let other_status = lookout_etcd::model::status_key(&prefix, "other");
    client
        .put(other_status.as_bytes(), br#"{"connected":true}"#, 0)
        .await
        .expect("put");
    // The publisher of `src`, on a lease it never renews (a publisher's is
    // 10 s, renewed every 3 s): as if killed -9 now.
    let lease = client.lease_grant(TTL).await.expect("a lease").id;
    let value = br#"{"connected":true,"provider":"docker","writer":"tests pid 1"}"#;
    client
        .put(status.as_bytes(), value, lease)
        .await
        .expect("put the status");
    let killed = Instant::now();
    let mut watch =
        lookout_etcd::watch_with_publishers(config(&engines::etcd_endpoints(), &prefix, false))
            .expect("config");
    let mut first = Vec::new();
    for _ in 0..3 {
        first.push(common::etcd_brief(&common::next_of(&mut watch).await));
    }
    assert_eq!(
        first,
        [
            "connected 3",
            "publisher other connected 1",
            "publisher src connected 2"
        ]
    );
    let told = watch.publishers();
    assert_eq!(told[1].writer.as_deref(), Some("tests pid 1"), "{told:?}");

    // The lease expires: `src` is disconnected, and nothing else comes.
    let item = common::next_of(&mut watch).await;
    let after = killed.elapsed();
    assert_eq!(common::etcd_brief(&item), "publisher src disconnected 2");
    assert!(!exists(&client, &status).await, "{status} is gone");
    assert!(
        exists(&client, &other_status).await,
        "{other_status} is not"
    );
    assert!(
        exists(
            &client,
            &lookout_etcd::model::instance_key(&prefix, "src", "a")
        )
        .await,
        "the instances stay"
    );
    eprintln!(
        "a dead publisher (status lease {TTL} s): disconnected {after:.1?} after its last renewal"
    );

    // A publisher writes its status again: connected; then its changes
    // go on from the state kept.
    client
        .put(status.as_bytes(), value, 0)
        .await
        .expect("put the status");
    assert_eq!(
        common::etcd_brief(&common::next_of(&mut watch).await),
        "publisher src connected 2"
    );
    put(&client, &prefix, "a", State::Stopped, false).await;
    put(&client, &prefix, "b", State::Running, false).await;
    let mut next = Vec::new();
    for _ in 0..2 {
        next.push(common::etcd_brief(&common::next_of(&mut watch).await));
    }
    assert_eq!(next, ["src/a stopped live", "src/b started live"]);
}

/// The watch's connection freezes; afterwards only deletions happen (a
/// key's lease expiring): no put to compare with, yet the probe notices
/// that the watch has not told them (the range holds fewer keys than the
/// watch knows) and the redial replays them before `connected`.
#[tokio::test(flavor = "current_thread")]
async fn a_watch_that_dies_silently_while_only_deletions_happen_is_noticed() {
    const TTL: i64 = 5;
    let Some(_lock) = require_etcd(false) else {
        return;
    };
    let prefix = unique_prefix("frozen-deletions");
    let _cleanup = common::Cleanup(prefix.clone());
    let client = cluster();
    put(&client, &prefix, "a", State::Running, false).await;
    let lease = client.lease_grant(TTL).await.expect("a lease").id;
    let b = lookout_etcd::model::instance_key(&prefix, "src", "b");
    let running = common::record(State::Running, "started", "live");
    client
        .put(b.as_bytes(), &running, lease)
        .await
        .expect("put b");
    let relay = Relay::start(member_addr(3));
    let mut watch =
        lookout_etcd::watch(quick_probe(config(&relay.url(), &prefix, false))).expect("config");
    assert_eq!(reconnect_items(&mut watch).await, ["connected 2"]);
    relay.freeze();
    let frozen = Instant::now();
    assert!(
        exists(&client, &b).await,
        "b's lease ({TTL} s) expired before the freeze: nothing to test"
    );
    let items = until_connected(&mut watch, 20).await;
    let noticed = frozen.elapsed();
    assert!(!exists(&client, &b).await, "b's key was deleted");
    assert_eq!(after_behind(&items), ["src/b removed live", "connected 1"]);
    eprintln!(
        "a silently dead watch, deletions only (a lease of {TTL} s): resumed {noticed:.1?} after it froze"
    );
}
