//! The shared hub (`Watch::share`, issue #13) against a real dockerd:
//! `cargo xtask engines up docker` first (CI sets `LOOKOUT_ENGINES=1`).
//!
//! Every watch dials through the unix-socket [`Relay`], which counts the
//! connections the hub holds and the `/events` requests it makes. The
//! subscriptions a test polls are each polled only when their own waker was
//! woken (as separate tasks would be, without spawning: the library spawns
//! nothing, so the test's runtime must end with no task alive).

use std::collections::BTreeMap;
use std::future::poll_fn;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant, SystemTime};

use lookout_core::{
    EventKind, Hub, HubConfig, InstanceEvent, Item, Origin, Start, Status, Store, Subscription,
    WatchConfig,
};
use lookout_e2e::engines;
use lookout_e2e::relay::Relay;
use lookout_e2e::relay::scenarios::{
    Containers, DOCKER, Watcher, require, streaming_on_one_connection, tasks, test_config,
};
use lookout_moby::Config;
use tokio_stream::{Stream, StreamExt};

/// How many subscriptions share the one connection, and how many of them
/// are never polled until the end.
const SUBSCRIPTIONS: usize = 50;
const STALLED: usize = 5;

/// The bound of every expected item (a docker CLI command included).
const ITEM: Duration = Duration::from_secs(30);

/// Every polled subscription gets every live event within this of the
/// engine's own time for it (`InstanceEvent::at`, dockerd's `timeNano`).
const DELIVERY: Duration = Duration::from_secs(2);

/// Dropping the last handle closes the connection within this.
const CLOSED: Duration = Duration::from_millis(100);

/// The scenarios' short timings, without the probe of a silent session
/// (a probe is one more connection, which would blur the counts compared
/// here; the probe is tested by the scenarios).
fn config() -> WatchConfig {
    test_config().probe_after(Duration::from_secs(300))
}

fn hub(relay: &Relay, c: &Containers, queue: Option<usize>) -> Hub {
    let config = Config::default()
        .host(relay.host())
        .labels(c.filter())
        .watch_config(config());
    let watch = lookout_docker::watch(config).expect("a valid host");
    match queue {
        Some(n) => watch.share_with(HubConfig::default().queue(n)),
        None => watch.share(),
    }
}

/// The waker of one polled subscription: marks it due and wakes the test's
/// task, which then polls the subscriptions that are due, and only them.
#[derive(Debug, Default)]
struct Due {
    due: AtomicBool,
    task: Mutex<Option<Waker>>,
}

impl Wake for Due {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.due.store(true, Ordering::SeqCst);
        if let Some(task) = self.task.lock().expect("waker lock").as_ref() {
            task.wake_by_ref();
        }
    }
}

/// One item as a subscription yielded it, and when.
#[derive(Debug, Clone)]
struct Got {
    item: Item,
    at: SystemTime,
}

/// A subscription the test polls, and everything it yielded.
struct Reader {
    sub: Subscription,
    due: Arc<Due>,
    waker: Waker,
    got: Vec<Got>,
}

impl Reader {
    fn new(sub: Subscription) -> Self {
        let due = Arc::new(Due::default());
        // Due at first: it has never been polled.
        due.due.store(true, Ordering::SeqCst);
        Self {
            sub,
            waker: Waker::from(Arc::clone(&due)),
            due,
            got: Vec::new(),
        }
    }

    /// Polls it if its waker was woken, taking every ready item.
    fn poll(&mut self, task: &Waker) {
        *self.due.task.lock().expect("waker lock") = Some(task.clone());
        if !self.due.due.swap(false, Ordering::SeqCst) {
            return;
        }
        let mut cx = Context::from_waker(&self.waker);
        while let Poll::Ready(item) = Pin::new(&mut self.sub).poll_next(&mut cx) {
            let item = item.expect("a subscription never ends");
            self.got.push(Got {
                item,
                at: SystemTime::now(),
            });
        }
    }

    fn events(&self) -> impl Iterator<Item = &InstanceEvent> {
        self.got.iter().filter_map(|g| match &g.item {
            Item::Event(e) => Some(e),
            Item::Status(_) => None,
        })
    }

    fn events_of(&self, id: &str) -> Vec<(EventKind, Origin)> {
        self.events()
            .filter(|e| e.id.as_str() == id)
            .map(|e| (e.kind, e.origin))
            .collect()
    }

    /// What it yielded, comparable across subscriptions.
    fn keys(&self) -> Vec<String> {
        self.got.iter().map(|g| format!("{:?}", g.item)).collect()
    }

    fn summary(&self) -> String {
        let lines: Vec<String> = self
            .got
            .iter()
            .map(|g| match &g.item {
                Item::Event(e) => format!("{} {} ({})", e.id, e.kind, e.origin),
                Item::Status(s) => format!("{s:?}"),
            })
            .collect();
        format!("[{}]", lines.join("; "))
    }

    /// The state a consumer rebuilds from what it got: each event applied
    /// in order (after a `Lagged`, the difference it is told is applied on
    /// top of what it had).
    fn rebuilt(&self) -> BTreeMap<String, bool> {
        let mut state = BTreeMap::new();
        for e in self.events() {
            let id = e.id.as_str().to_owned();
            match e.kind {
                EventKind::Created => {
                    assert!(
                        state.insert(id, false).is_none(),
                        "created twice: {}",
                        self.summary()
                    );
                }
                EventKind::Started | EventKind::Stopped => {
                    let running = state
                        .get_mut(&id)
                        .unwrap_or_else(|| panic!("{id} before its creation: {}", self.summary()));
                    *running = e.kind == EventKind::Started;
                }
                EventKind::Removed => {
                    assert!(
                        state.remove(&id).is_some(),
                        "{id} removed unknown: {}",
                        self.summary()
                    );
                }
                // A stop request: it still runs until its `Stopped`.
                EventKind::Stopping => {}
                _ => panic!("no readiness is watched here: {}", self.summary()),
            }
        }
        state
    }
}

/// Polls `readers` (each only when woken) until `done` holds for every one
/// of them, at most `timeout`.
async fn poll_until(
    readers: &mut [Reader],
    timeout: Duration,
    what: &str,
    done: impl Fn(&Reader) -> bool,
) {
    let polled = poll_fn(|cx| {
        for r in readers.iter_mut() {
            r.poll(cx.waker());
        }
        if readers.iter().all(&done) {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    });
    if tokio::time::timeout(timeout, polled).await.is_err() {
        let late: Vec<String> = readers
            .iter()
            .enumerate()
            .filter(|(_, r)| !done(r))
            .map(|(i, r)| format!("#{i}: {}", r.summary()))
            .collect();
        panic!(
            "{what}: {} of {} subscriptions not there after {timeout:?}:\n{}",
            late.len(),
            readers.len(),
            late.join("\n")
        );
    }
}

fn connected(r: &Reader) -> bool {
    r.got
        .iter()
        .any(|g| matches!(g.item, Item::Status(Status::Connected { .. })))
}

fn has(r: &Reader, id: &str, kind: EventKind) -> bool {
    r.events().any(|e| e.id.as_str() == id && e.kind == kind)
}

/// The containers of the test as the engine lists them: name → running.
fn engine_state(c: &Containers) -> BTreeMap<String, bool> {
    let filter = format!("label=lookout.test={}", c.tag());
    let out = c.cli(&[
        "ps",
        "-a",
        "--filter",
        &filter,
        "--format",
        "{{.Names}} {{.State}}",
    ]);
    out.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let (name, state) = l.trim().split_once(' ').expect("name and state");
            (name.to_owned(), state == "running")
        })
        .collect()
}

fn store_state(store: &Store) -> BTreeMap<String, bool> {
    store
        .instances()
        .into_iter()
        .map(|i| (i.id.as_str().to_owned(), i.running))
        .collect()
}

/// The workload: `a` through its whole lifecycle, `b` left running, `c`
/// left created. Names, in that order.
fn names(c: &Containers) -> [String; 3] {
    ["a", "b", "c"].map(|s| format!("{}-{s}", c.tag()))
}

/// Each step of the workload: a command, and the event it causes.
fn steps(c: &Containers) -> Vec<(Vec<String>, String, EventKind)> {
    let [a, b, cc] = names(c);
    let cmd = |args: &[&str]| args.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    vec![
        (
            vec!["create".into(), "a".into()],
            a.clone(),
            EventKind::Created,
        ),
        (cmd(&["start", &a]), a.clone(), EventKind::Started),
        (cmd(&["stop", "-t", "0", &a]), a.clone(), EventKind::Stopped),
        (cmd(&["rm", &a]), a, EventKind::Removed),
        (
            vec!["create".into(), "b".into()],
            b.clone(),
            EventKind::Created,
        ),
        (cmd(&["start", &b]), b, EventKind::Started),
        (vec!["create".into(), "c".into()], cc, EventKind::Created),
    ]
}

fn run_step(c: &Containers, args: &[String]) {
    if args[0] == "create" && args.len() == 2 {
        c.create(&args[1], true);
    } else {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        c.cli(&args);
    }
}

/// The events every polled subscription must have had, in order.
fn expected(c: &Containers) -> Vec<(String, EventKind)> {
    steps(c)
        .into_iter()
        .flat_map(|(_, id, kind)| {
            // dockerd logs `docker stop`'s request first: `stopping`.
            let request = (kind == EventKind::Stopped).then(|| (id.clone(), EventKind::Stopping));
            request.into_iter().chain([(id, kind)])
        })
        .collect()
}

fn live_events(r: &Reader) -> Vec<(String, EventKind)> {
    r.events()
        .map(|e| {
            assert_eq!(e.origin, Origin::Live, "{}", r.summary());
            (e.id.as_str().to_owned(), e.kind)
        })
        .collect()
}

/// What one plain `Watch` costs on the wire, through a relay of its own:
/// the connections it opened and the `/events` requests it made, once
/// streaming.
async fn plain_watch_counts(c: &Containers) -> (usize, usize) {
    let relay = Relay::start(&(DOCKER.host)());
    let mut w = Watcher::new(&DOCKER, relay.host(), c.filter(), config());
    streaming_on_one_connection(&relay, &mut w).await;
    let counts = relay.counts();
    drop(w);
    relay
        .wait(CLOSED, |c| c.live == 0)
        .await
        .unwrap_or_else(|c| panic!("a plain watch stayed open: {c:?}"));
    (counts.accepted, counts.events_requests)
}

/// Drops every handle of a hub: the connection closes within [`CLOSED`],
/// and no task is left. While one handle (the store) is left, it stays open.
async fn drop_all(relay: &Relay, hub: Hub, subs: Vec<Subscription>, store: Store) {
    assert_eq!(relay.counts().live, 1, "streaming on one connection");
    drop(subs);
    drop(hub);
    // The store alone keeps the upstream.
    assert!(
        relay.wait(CLOSED, |c| c.live == 0).await.is_err(),
        "the store is a handle: the upstream must outlive the subscriptions"
    );
    let dropped = Instant::now();
    drop(store);
    relay
        .wait(CLOSED, |c| c.live == 0)
        .await
        .unwrap_or_else(|c| panic!("every handle dropped, still open after {CLOSED:?}: {c:?}"));
    eprintln!("[hub] closed {:.1?} after the last drop", dropped.elapsed());
    assert_eq!(tasks(), 0, "no task left");
}

/// 50 subscriptions on one hub, 5 of them never polled: one dial's worth of
/// connections and requests, as a plain watch makes; the workload reaches
/// every polled one, identically, in order and promptly, while the engine
/// runs it; the stalled ones then get exactly the same items; the state each
/// rebuilds is the store's and the engine's; dropping everything closes the
/// connection.
#[tokio::test]
async fn fifty_subscriptions_share_one_connection() {
    let started = Instant::now();
    let Some(()) = require(&DOCKER) else { return };
    let _lock = engines::lock_engine(DOCKER.name, false).expect("engine lock");
    assert_eq!(tasks(), 0);
    let c = Arc::new(Containers::new(&DOCKER, "hub-fifty"));
    let (plain_accepted, plain_requests) = plain_watch_counts(&c).await;
    eprintln!(
        "[hub] a plain watch: {plain_accepted} connections, {plain_requests} /events requests"
    );

    let relay = Relay::start(&(DOCKER.host)());
    let hub = hub(&relay, &c, None);
    let store = hub.store();
    let mut subs: Vec<Subscription> = (0..SUBSCRIPTIONS)
        .map(|i| {
            hub.subscribe(if i % 2 == 0 {
                Start::Initial
            } else {
                Start::Baseline
            })
        })
        .collect();
    assert_eq!(hub.subscriptions(), SUBSCRIPTIONS);
    let stalled: Vec<Subscription> = subs.drain(..STALLED).collect();
    let mut readers: Vec<Reader> = subs.into_iter().map(Reader::new).collect();

    poll_until(&mut readers, ITEM, "connected", connected).await;
    relay
        .wait(Duration::from_secs(2), |c| c.live == 1)
        .await
        .unwrap_or_else(|c| panic!("the hub streams on one connection: {c:?}"));
    let counts = relay.counts();
    assert_eq!(
        (counts.accepted, counts.events_requests),
        (plain_accepted, plain_requests),
        "{SUBSCRIPTIONS} subscriptions dial as one plain watch: {counts:?}"
    );

    // The engine runs the workload on a thread while the test polls.
    let workload = {
        let c = Arc::clone(&c);
        std::thread::spawn(move || {
            for (args, _, _) in steps(&c) {
                run_step(&c, &args);
            }
        })
    };
    let expect = expected(&c);
    let [_, _, last] = names(&c);
    poll_until(&mut readers, ITEM, "the workload", |r| {
        has(r, &last, EventKind::Created)
    })
    .await;
    workload.join().expect("the workload ran");
    assert!(store.is_synced());

    // Identical, in order, live, promptly.
    let first = readers[0].keys();
    let mut slowest = Duration::ZERO;
    for (i, r) in readers.iter().enumerate() {
        assert_eq!(live_events(r), expect, "#{i}: {}", r.summary());
        assert_eq!(r.keys(), first, "#{i} differs from #0");
        for g in &r.got {
            if let Item::Event(e) = &g.item {
                let late = g.at.duration_since(e.at).unwrap_or(Duration::ZERO);
                slowest = slowest.max(late);
                assert!(
                    late <= DELIVERY,
                    "#{i} got {} {} {late:?} after the engine",
                    e.id,
                    e.kind
                );
            }
        }
    }
    eprintln!("[hub] slowest delivery after the engine's time: {slowest:.1?}");

    // The stalled ones, polled at last: everything, as the others got it.
    let engine = engine_state(&c);
    assert_eq!(
        store_state(&store),
        engine,
        "the store is the engine's state"
    );
    assert_eq!(engine.len(), 2, "b and c remain: {engine:?}");
    let mut late: Vec<Reader> = stalled.into_iter().map(Reader::new).collect();
    poll_until(&mut late, ITEM, "the stalled ones", |r| {
        has(r, &last, EventKind::Created)
    })
    .await;
    for (i, r) in late.iter().enumerate() {
        assert_eq!(r.keys(), first, "stalled #{i}: {}", r.summary());
        assert_eq!(r.rebuilt(), engine, "stalled #{i}: {}", r.summary());
    }
    assert_eq!(readers[0].rebuilt(), engine);

    // Still the one dial.
    let counts = relay.counts();
    assert_eq!(
        (counts.accepted, counts.events_requests),
        (plain_accepted, plain_requests),
        "no redial: {counts:?}"
    );
    let subs: Vec<Subscription> = readers.into_iter().chain(late).map(|r| r.sub).collect();
    drop_all(&relay, hub, subs, store).await;
    eprintln!(
        "[hub] fifty_subscriptions_share_one_connection in {:.1?}",
        started.elapsed()
    );
}

/// With a queue of 4, the 5 never-polled subscriptions fall behind the
/// workload's 8 items and lag: when polled, each is told `Lagged` with what
/// it missed, then the difference as `Resync` events, then the status; the
/// state each rebuilds is the store's and the engine's. The polled ones,
/// kept up with, never lag.
#[tokio::test]
async fn stalled_subscriptions_lag_and_resync_on_a_small_queue() {
    const QUEUE: usize = 4;
    let started = Instant::now();
    let Some(()) = require(&DOCKER) else { return };
    let _lock = engines::lock_engine(DOCKER.name, false).expect("engine lock");
    assert_eq!(tasks(), 0);
    let c = Containers::new(&DOCKER, "hub-lag");
    let relay = Relay::start(&(DOCKER.host)());
    let hub = hub(&relay, &c, Some(QUEUE));
    let store = hub.store();
    let mut subs: Vec<Subscription> = (0..SUBSCRIPTIONS)
        .map(|_| hub.subscribe(Start::Initial))
        .collect();
    let stalled: Vec<Subscription> = subs.drain(..STALLED).collect();
    let mut readers: Vec<Reader> = subs.into_iter().map(Reader::new).collect();
    poll_until(&mut readers, ITEM, "connected", connected).await;

    // One step at a time, each awaited by every polled subscription: the
    // queue is never more than one item ahead of them.
    let steps = steps(&c);
    assert!(steps.len() + 1 > QUEUE, "more items than the queue holds");
    for (args, id, kind) in &steps {
        run_step(&c, args);
        poll_until(&mut readers, ITEM, &format!("{id} {kind}"), |r| {
            has(r, id, *kind)
        })
        .await;
    }
    let expect = expected(&c);
    let first = readers[0].keys();
    for (i, r) in readers.iter().enumerate() {
        assert_eq!(live_events(r), expect, "#{i}: {}", r.summary());
        assert_eq!(r.keys(), first, "#{i} differs from #0");
    }
    let items = readers[0].got.len();
    assert!(items > QUEUE, "{items} items flowed");

    let engine = engine_state(&c);
    assert_eq!(
        store_state(&store),
        engine,
        "the store is the engine's state"
    );
    assert_eq!(engine.len(), 2, "b and c remain: {engine:?}");
    let mut late: Vec<Reader> = stalled.into_iter().map(Reader::new).collect();
    poll_until(&mut late, ITEM, "the stalled ones", |r| {
        r.got
            .iter()
            .any(|g| matches!(g.item, Item::Status(Status::Connected { .. })))
    })
    .await;
    for (i, r) in late.iter().enumerate() {
        let summary = r.summary();
        let Some((lagged, rest)) = r.got.split_first() else {
            panic!("stalled #{i} got nothing");
        };
        assert!(
            matches!(lagged.item, Item::Status(Status::Lagged { missed }) if missed == items as u64),
            "stalled #{i} starts with Lagged {{ missed: {items} }}: {summary}"
        );
        let (status, diff) = rest.split_last().expect("the status after the difference");
        assert!(
            matches!(status.item, Item::Status(Status::Connected { instances }) if instances == engine.len()),
            "stalled #{i} ends with the hub's status: {summary}"
        );
        for g in diff {
            assert!(
                matches!(&g.item, Item::Event(e) if e.origin == Origin::Resync),
                "stalled #{i}: only Resync events between: {summary}"
            );
        }
        assert_eq!(r.rebuilt(), engine, "stalled #{i}: {summary}");
    }
    // Each transition once: b created and started, c created.
    let [_, b, cc] = names(&c);
    assert_eq!(
        late[0].events_of(&b),
        [
            (EventKind::Created, Origin::Resync),
            (EventKind::Started, Origin::Resync)
        ]
    );
    assert_eq!(
        late[0].events_of(&cc),
        [(EventKind::Created, Origin::Resync)]
    );

    let subs: Vec<Subscription> = readers.into_iter().chain(late).map(|r| r.sub).collect();
    drop_all(&relay, hub, subs, store).await;
    eprintln!(
        "[hub] stalled_subscriptions_lag_and_resync_on_a_small_queue in {:.1?}",
        started.elapsed()
    );
}

/// `Store::until`: pending while it does not hold; resolves when the
/// container starts; at once on one already running; on a state that lasted
/// one event, though the present has moved on; on removal.
#[tokio::test]
async fn store_until_resolves_on_start_and_on_removal() {
    let Some(()) = require(&DOCKER) else { return };
    let _lock = engines::lock_engine(DOCKER.name, false).expect("engine lock");
    assert_eq!(tasks(), 0);
    let c = Containers::new(&DOCKER, "hub-until");
    let relay = Relay::start(&(DOCKER.host)());
    let hub = hub(&relay, &c, None);
    let store = hub.store();
    tokio::time::timeout(ITEM, store.synced())
        .await
        .expect("synced");
    let running = |i: Option<&lookout_core::Instance>| i.is_some_and(|i| i.running);

    let a = c.create("a", true);
    tokio::time::timeout(ITEM, store.until(a.as_str(), |i| i.is_some()))
        .await
        .expect("a is created");
    let mut starts = Box::pin(store.until(a.as_str(), running));
    assert!(
        tokio::time::timeout(Duration::ZERO, &mut starts)
            .await
            .is_err(),
        "a created container does not run"
    );
    c.cli(&["start", &a]);
    let at_start = tokio::time::timeout(ITEM, starts)
        .await
        .expect("resolves when a starts")
        .expect("a exists");
    assert!(at_start.running);
    assert_eq!(
        c.cli(&["inspect", "--format", "{{.State.Running}}", &a])
            .trim(),
        "true"
    );

    // Already running: at the first poll.
    let now = tokio::time::timeout(Duration::ZERO, store.until(a.as_str(), running))
        .await
        .expect("resolves at once on a running instance")
        .expect("a exists");
    assert_eq!(now, at_start);

    // A state that lasted one event is not missed.
    let b = c.create("b", true);
    tokio::time::timeout(ITEM, store.until(b.as_str(), |i| i.is_some()))
        .await
        .expect("b is created");
    let mut b_ran = Box::pin(store.until(b.as_str(), running));
    assert!(
        tokio::time::timeout(Duration::ZERO, &mut b_ran)
            .await
            .is_err()
    );
    // Another reader drives the hub through the start and the stop before
    // the pending future is polled again: it must still see the start.
    let mut other = hub.subscribe(Start::Baseline);
    c.cli(&["start", &b]);
    c.cli(&["stop", "-t", "0", &b]);
    tokio::time::timeout(ITEM, async {
        while !matches!(
            other.next().await,
            Some(Item::Event(e)) if e.id.as_str() == b && e.kind == EventKind::Stopped
        ) {}
    })
    .await
    .expect("b stops");
    drop(other);
    let ran = tokio::time::timeout(Duration::ZERO, b_ran)
        .await
        .expect("the start it has not read yet is there")
        .expect("b exists");
    assert!(ran.running, "resolved to b as it was then: {ran:?}");
    assert!(!store.get(&b).expect("b").running, "the present moved on");

    let mut gone = Box::pin(store.until(a.as_str(), |i| i.is_none()));
    assert!(
        tokio::time::timeout(Duration::ZERO, &mut gone)
            .await
            .is_err(),
        "a exists"
    );
    c.cli(&["rm", "-f", &a]);
    let removed = tokio::time::timeout(ITEM, gone)
        .await
        .expect("resolves when a is removed");
    assert_eq!(removed, None);
    assert!(store.get(&a).is_none());
    assert_eq!(store_state(&store), engine_state(&c));

    drop(hub);
    drop(store);
    relay
        .wait(CLOSED, |c| c.live == 0)
        .await
        .unwrap_or_else(|c| panic!("the last store dropped, still open after {CLOSED:?}: {c:?}"));
    assert_eq!(tasks(), 0);
}
