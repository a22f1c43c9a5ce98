//! The shared hub through the public API: paused tokio time against the
//! scripted dial. Deterministic and fast.
#![allow(clippy::too_many_lines, clippy::items_after_statements)]

use std::collections::BTreeMap;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::timeout;
use tokio_stream::{Stream, StreamExt};

use lookout_core::{
    EventKind, HubConfig, Item, Observation, Origin, Start, Status, Subscription, Watch,
};

mod support;
use support::*;

use EventKind::{Created, Removed, Started, Stopped};

/// Polls once, with a waker that does nothing: what a subscription has
/// ready now, without giving the runtime a turn.
fn ready_now(sub: &mut Subscription) -> Option<Item> {
    let mut cx = Context::from_waker(Waker::noop());
    match Pin::new(sub).poll_next(&mut cx) {
        Poll::Ready(item) => item,
        Poll::Pending => None,
    }
}

/// Everything a subscription has ready now.
fn drain(sub: &mut Subscription) -> Vec<Item> {
    std::iter::from_fn(|| ready_now(sub)).collect()
}

/// A hub over one scripted session that listed `items`.
fn hub_with(
    items: &[(&str, bool)],
    config: HubConfig,
) -> (Scripted, mpsc::UnboundedSender<Obs>, lookout_core::Hub) {
    let dial = Scripted::default();
    let tx = dial.session();
    snapshot(&tx, items);
    let hub = Watch::new(dial.clone(), quick()).share_with(config);
    (dial, tx, hub)
}

/// The state a consumer rebuilds from what it was told: id → running.
fn rebuild(state: &mut BTreeMap<String, bool>, items: &[Item]) {
    for item in items {
        if let Item::Event(e) = item {
            match e.kind {
                Created => {
                    assert!(state.insert(e.id.to_string(), false).is_none(), "{e:?}");
                }
                Started | Stopped => {
                    let running = state.get_mut(e.id.as_str()).expect("a known instance");
                    assert_ne!(*running, e.kind == Started, "a repeated transition: {e:?}");
                    *running = e.kind == Started;
                }
                Removed => {
                    assert!(state.remove(e.id.as_str()).is_some(), "{e:?}");
                }
                _ => panic!("no readiness is watched here: {e:?}"),
            }
        }
    }
}

fn store_state(store: &lookout_core::Store) -> BTreeMap<String, bool> {
    store
        .instances()
        .into_iter()
        .map(|i| (i.id.to_string(), i.running))
        .collect()
}

#[tokio::test(start_paused = true)]
async fn subscriptions_see_the_same_items_and_a_stalled_one_delays_nobody() {
    let (_dial, tx, hub) = hub_with(&[("a", true)], HubConfig::default().queue(8));
    let mut subs: Vec<Subscription> = (0..4).map(|_| hub.subscribe(Start::Initial)).collect();
    // Subscribed before anything was read, and never polled afterwards
    // but once (so its waker is registered).
    let mut stalled = hub.subscribe(Start::Baseline);
    assert_eq!(hub.subscriptions(), 5);

    let mut seen: Vec<Vec<Item>> = vec![Vec::new(); subs.len()];
    for (sub, seen) in subs.iter_mut().zip(&mut seen) {
        seen.extend(drain(sub));
    }
    let _ = ready_now(&mut stalled);
    // 1000 changes: each reaches every polled subscription at once, though
    // the stalled one is far more than its queue behind.
    for n in 0..1000u64 {
        let kind = if n % 2 == 0 { Stopped } else { Started };
        tx.send(change("a", kind, n + 1)).expect("session open");
        // A fresh coop budget for the session's channel (a task that
        // never yields would find it empty after 128 receives).
        tokio::task::yield_now().await;
        for (i, (sub, seen)) in subs.iter_mut().zip(&mut seen).enumerate() {
            let got = drain(sub);
            assert_eq!(
                shorts(&got),
                [format!("a {kind} live")],
                "subscription {i} after change {n}"
            );
            seen.extend(got);
        }
    }
    let first = shorts(&seen[0]);
    assert_eq!(
        first[..3],
        ["a created initial", "a started initial", "connected 1"]
    );
    for other in &seen[1..] {
        assert_eq!(shorts(other), first);
    }
    // The stalled one comes back: it lagged, and gets the net difference
    // (none: `a` runs, as when it last looked), then the status.
    assert_eq!(
        shorts(&drain(&mut stalled)),
        ["lagged 1000", "connected 1"],
        "it read the first snapshot (its baseline), then missed 1000 changes"
    );
    tx.send(change("a", Stopped, 1001)).expect("session open");
    assert_eq!(shorts(&drain(&mut stalled)), ["a stopped live"]);
}

#[tokio::test(start_paused = true)]
async fn a_lagging_subscription_gets_the_net_difference_then_live() {
    let dial = Scripted::default();
    let tx = dial.session();
    tx.send(Ok(Observation::ResyncBegin)).expect("open");
    for (id, running) in [("a", true), ("b", true), ("d", false)] {
        tx.send(Ok(Observation::Listed(
            lookout_core::Listed::new(id.into(), running)
                .uid(Some(format!("{id}-1").into()))
                .labels(lookout_core::Labels::new()),
        )))
        .expect("open");
    }
    tx.send(Ok(Observation::ResyncDone)).expect("open");
    let hub = Watch::new(dial.clone(), quick()).share_with(HubConfig::default().queue(4));
    let store = hub.store();
    let mut lagging = hub.subscribe(Start::Baseline);
    assert_eq!(shorts(&drain(&mut lagging)), ["connected 3"]);
    let mut state = store_state(&store);

    // More than 4 items while it does not read: `a` stops and starts
    // again (no net change), `b` goes, `c` comes and runs, `d` is removed
    // and created again under another uid, stopped as it was.
    let mut cursor = 0;
    let send = |obs: Obs| tx.send(obs).expect("session open");
    for (id, kind) in [
        ("a", Stopped),
        ("a", Started),
        ("b", Removed),
        ("c", Started),
    ] {
        cursor += 1;
        send(change(id, kind, cursor));
    }
    send(Ok(Observation::Change(
        change_of("d", Created, 10).uid(Some("d-2".into())),
    )));
    // The hub moves on without the lagging one: the store polls it.
    timeout(
        Duration::from_secs(1),
        store.until("c", |c| c.is_some_and(|c| c.running)),
    )
    .await
    .expect("the store sees c run");
    timeout(
        Duration::from_secs(1),
        store.until("d", |d| d.is_some_and(|d| d.uid.as_deref() == Some("d-2"))),
    )
    .await
    .expect("the store sees d's new incarnation");

    let got = drain(&mut lagging);
    assert_eq!(
        shorts(&got),
        [
            "lagged 7",
            "b removed resync",
            "c created resync",
            "c started resync",
            "d removed resync",
            "d created resync",
            "connected 3",
        ],
    );
    let Item::Event(d_created) = &got[5] else {
        unreachable!()
    };
    assert_eq!(d_created.uid.as_deref(), Some("d-2"));
    rebuild(&mut state, &got);
    assert_eq!(
        state,
        store_state(&store),
        "the difference brings it to the present"
    );
    // Then live, from exactly there: no duplicate, no gap.
    tx.send(change("c", Stopped, 11)).expect("session open");
    assert_eq!(shorts(&drain(&mut lagging)), ["c stopped live"]);
}

/// A change with no cursor bookkeeping of its own, to build on.
fn change_of(id: &str, kind: EventKind, at: u64) -> lookout_core::Change<u64> {
    match change(id, kind, at) {
        Ok(Observation::Change(c)) => c,
        _ => unreachable!("change() makes a change"),
    }
}

#[tokio::test(start_paused = true)]
async fn a_late_subscriber_during_a_resync_gets_the_present_then_the_rest() {
    let dial = Scripted::default();
    let first = dial.session();
    snapshot(&first, &[("keep", true)]);
    let hub = Watch::new(dial.clone(), quick()).share_with(HubConfig::default().queue(4096));
    let store = hub.store();
    let mut early = hub.subscribe(Start::Initial);
    assert_eq!(
        shorts(&drain(&mut early)),
        [
            "keep created initial",
            "keep started initial",
            "connected 1"
        ]
    );
    let mut early_state = BTreeMap::new();
    early_state.insert("keep".to_owned(), true);

    // The session breaks; the next one lists 600 new instances: a resync
    // of 1200 events, more than one drive of the hub takes.
    let second = dial.session();
    let many: Vec<(String, bool)> = (0..600).map(|i| (format!("n{i:03}"), true)).collect();
    let many: Vec<(&str, bool)> = many.iter().map(|(id, r)| (id.as_str(), *r)).collect();
    let mut all = many.clone();
    all.push(("keep", true));
    snapshot(&second, &all);
    drop(first);
    let mut got_early = Vec::new();
    // Read a part of the resync: the hub is in the middle of it.
    while !got_early
        .iter()
        .any(|i| matches!(i, Item::Event(e) if e.origin == Origin::Resync))
    {
        let item = timeout(Duration::from_secs(60), early.next())
            .await
            .expect("the resync comes")
            .expect("never ends");
        got_early.push(item);
    }
    assert!(
        store.len() < 601,
        "mid-resync: {} instances so far",
        store.len()
    );
    let mut late = hub.subscribe(Start::Initial);
    let mut late_items = drain(&mut late);
    got_early.extend(drain(&mut early));
    late_items.extend(drain(&mut late));
    assert!(matches!(
        late_items.last(),
        Some(Item::Status(Status::Connected { instances: 601 }))
    ));
    let mut late_state = BTreeMap::new();
    rebuild(&mut late_state, &late_items);
    rebuild(&mut early_state, &got_early);
    assert_eq!(
        late_state,
        store_state(&store),
        "snapshot + live: no gap, no duplicate"
    );
    assert_eq!(early_state, late_state);
    assert_eq!(late_state.len(), 601);
}

#[tokio::test(start_paused = true)]
async fn the_last_handle_drops_the_upstream_in_every_state() {
    for state in ["dialing", "streaming", "backoff"] {
        let dial = Scripted::default();
        let session = match state {
            "dialing" => {
                dial.hang();
                None
            }
            "streaming" => {
                let tx = dial.session();
                snapshot(&tx, &[("a", true)]);
                Some(tx)
            }
            _ => {
                dial.fail("refused");
                None
            }
        };
        let hub = Watch::new(dial.clone(), quick()).share();
        let store = hub.store();
        let mut subs: Vec<Subscription> = (0..3).map(|_| hub.subscribe(Start::Baseline)).collect();
        for sub in &mut subs {
            let _ = drain(sub);
        }
        let expected = match state {
            // The dial in flight, or the session (its dial future is done).
            "dialing" | "streaming" => 1,
            _ => 0, // waiting out the backoff: nothing open
        };
        assert_eq!(dial.alive(), expected, "{state}: what the upstream holds");
        if state == "backoff" {
            assert!(
                matches!(store.status(), Some(Status::Disconnected { .. })),
                "{state}"
            );
        }
        // Each subscription's slot is freed at once.
        for (left, sub) in (0..3).rev().zip(subs) {
            drop(sub);
            assert_eq!(hub.subscriptions(), left, "{state}");
        }
        let run = hub.run();
        drop(hub);
        drop(run);
        assert_eq!(
            dial.alive(),
            expected,
            "{state}: the store still holds the hub"
        );
        drop(store);
        assert_eq!(
            dial.alive(),
            0,
            "{state}: the last handle dropped the upstream"
        );
        drop(session);
    }
}

#[tokio::test(start_paused = true)]
async fn until_resolves_on_the_right_event_and_at_once_when_it_holds() {
    let (_dial, tx, hub) = hub_with(&[("web", false)], HubConfig::default());
    let store = hub.store();
    // Not synced yet: "gone" does not hold for an instance not listed yet.
    let mut gone = Box::pin(store.until("db", |db| db.is_none()));
    let mut cx = Context::from_waker(Waker::noop());
    assert!(
        gone.as_mut().poll(&mut cx).is_ready(),
        "db does not exist once synced"
    );
    assert!(store.is_synced());

    let runs = |i: Option<&lookout_core::Instance>| i.is_some_and(|i| i.running);
    let mut web_runs = Box::pin(store.until("web", runs));
    assert!(
        web_runs.as_mut().poll(&mut cx).is_pending(),
        "web is stopped"
    );
    // A start and a stop in one go: the state lasted one event, and counts.
    tx.send(change("web", Started, 1)).expect("open");
    tx.send(change("web", Stopped, 2)).expect("open");
    let web = timeout(Duration::from_secs(1), web_runs)
        .await
        .expect("resolves")
        .expect("exists");
    assert!(web.running);
    assert_eq!(
        web.since,
        std::time::SystemTime::UNIX_EPOCH + Duration::from_secs(1)
    );
    assert!(
        !store.get("web").expect("exists").running,
        "and the store is past it"
    );

    tx.send(change("web", Started, 3)).expect("open");
    timeout(Duration::from_secs(1), store.until("web", runs))
        .await
        .expect("resolves");
    // Already running: at once.
    let mut again = Box::pin(store.until("web", runs));
    assert!(again.as_mut().poll(&mut cx).is_ready());
    // Until it is gone; a timeout drops the future and nothing is lost.
    assert!(
        timeout(Duration::from_secs(5), store.until("web", |w| w.is_none()))
            .await
            .is_err()
    );
    tx.send(change("web", Removed, 4)).expect("open");
    let gone = timeout(Duration::from_secs(1), store.until("web", |w| w.is_none())).await;
    assert_eq!(gone.expect("resolves"), None);
}

#[tokio::test(start_paused = true)]
async fn a_subscription_that_stops_polling_starves_nobody() {
    let (_dial, tx, hub) = hub_with(&[("a", true)], HubConfig::default());
    let mut active = hub.subscribe(Start::Baseline);
    let mut idle = hub.subscribe(Start::Baseline);
    assert_eq!(shorts(&drain(&mut active)), ["connected 1"]);
    // The active one waits in a task of its own.
    let (seen_tx, mut seen_rx) = mpsc::unbounded_channel();
    // The consumer's own task (a test may spawn: it plays the application).
    #[allow(clippy::disallowed_methods)]
    let reader = tokio::spawn(async move {
        while let Some(item) = active.next().await {
            if seen_tx.send(short(&item)).is_err() {
                break;
            }
        }
    });
    tokio::task::yield_now().await;
    // The idle one polls the upstream last (with a waker that does nothing)
    // and never again.
    assert_eq!(shorts(&drain(&mut idle)), ["connected 1"]);
    for (n, kind) in [Stopped, Started, Stopped].into_iter().enumerate() {
        tx.send(change("a", kind, n as u64 + 1)).expect("open");
        let got = timeout(Duration::from_secs(1), seen_rx.recv()).await;
        assert_eq!(
            got.expect("woken by the upstream").as_deref(),
            Some(&*format!("a {kind} live"))
        );
    }
    reader.abort();
}

#[test]
fn items_flow_with_no_runtime_and_nothing_spawned() {
    // A subscription is a plain `Stream`: polled by hand, here with no
    // tokio runtime at all but for the timers the upstream arms.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("runtime");
    rt.block_on(async {
        let (dial, tx, hub) = hub_with(&[("a", false)], HubConfig::default());
        let mut sub = hub.subscribe(Start::Initial);
        assert_eq!(
            shorts(&drain(&mut sub)),
            ["a created initial", "connected 1"]
        );
        tx.send(change("a", Started, 1)).expect("open");
        assert_eq!(shorts(&drain(&mut sub)), ["a started live"]);
        assert_eq!(
            tokio::runtime::Handle::current()
                .metrics()
                .num_alive_tasks(),
            0
        );
        drop(hub);
        drop(sub);
        assert_eq!(dial.alive(), 0);
    });
}

/// Random interleavings of subscribing, reading, dropping, engine changes
/// and reconnects, against a reference reader that never falls behind and
/// a model of the engine.
mod interleavings {
    use super::*;
    use proptest::prelude::*;

    const IDS: [&str; 4] = ["a", "b", "c", "d"];
    const QUEUE: usize = 16;

    #[derive(Clone, Debug)]
    enum Op {
        Subscribe {
            initial: bool,
        },
        Read(usize, usize),
        Drop(usize),
        Change(usize, EventKind),
        /// The session breaks; the next lists these (absent, stopped, running).
        Reconnect([u8; 4]),
    }

    fn op() -> impl Strategy<Value = Op> {
        let kind = prop_oneof![Just(Created), Just(Started), Just(Stopped), Just(Removed)];
        prop_oneof![
            2 => any::<bool>().prop_map(|initial| Op::Subscribe { initial }),
            4 => (0..8usize, 1..24usize).prop_map(|(s, n)| Op::Read(s, n)),
            1 => (0..8usize).prop_map(Op::Drop),
            6 => (0..4usize, kind).prop_map(|(i, k)| Op::Change(i, k)),
            1 => any::<[u8; 4]>().prop_map(|s| Op::Reconnect(s.map(|x| x % 3))),
        ]
    }

    /// A reader under test: what it got, and what it started from.
    struct Reader {
        sub: Subscription,
        start: Start,
        /// The store's state when it subscribed.
        at_start: BTreeMap<String, bool>,
        /// The reference's event count when it subscribed.
        from: usize,
        items: Vec<Item>,
    }

    fn events(items: &[Item]) -> Vec<String> {
        items
            .iter()
            .filter(|i| matches!(i, Item::Event(_)))
            .map(short)
            .collect()
    }

    /// Reads the reference until the hub has nothing more (and, after a
    /// reconnect, until it is connected again).
    async fn catch_up(reference: &mut Subscription, got: &mut Vec<Item>, until_connected: bool) {
        let mut connected = !until_connected;
        loop {
            let items = drain(reference);
            connected |= items
                .iter()
                .any(|i| matches!(i, Item::Status(Status::Connected { .. })));
            got.extend(items);
            if connected {
                return;
            }
            // Wait out the backoff on paused time.
            let item = timeout(Duration::from_secs(3600), reference.next())
                .await
                .expect("the upstream reconnects")
                .expect("never ends");
            got.push(item);
            connected |= matches!(got.last(), Some(Item::Status(Status::Connected { .. })));
        }
    }

    fn run(ops: &[Op]) -> Result<(), TestCaseError> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .expect("runtime");
        rt.block_on(async {
            let dial = Scripted::default();
            let mut session = dial.session();
            let mut engine: BTreeMap<String, bool> = BTreeMap::new();
            engine.insert("a".into(), true);
            engine.insert("b".into(), false);
            let listed: Vec<(&str, bool)> = engine.iter().map(|(k, v)| (k.as_str(), *v)).collect();
            snapshot(&session, &listed);
            let config = quick().reconnect(lookout_core::ReconnectPolicy::default().seed(Some(7)));
            let hub =
                Watch::new(dial.clone(), config).share_with(HubConfig::default().queue(QUEUE));
            let store = hub.store();
            let mut reference = hub.subscribe(Start::Initial);
            let mut seen = Vec::new();
            catch_up(&mut reference, &mut seen, true).await;
            let mut readers: Vec<Reader> = Vec::new();
            let mut cursor = 0;
            for op in ops {
                match op {
                    Op::Subscribe { initial } => {
                        let start = if *initial {
                            Start::Initial
                        } else {
                            Start::Baseline
                        };
                        readers.push(Reader {
                            sub: hub.subscribe(start),
                            start,
                            at_start: store_state(&store),
                            from: events(&seen).len(),
                            items: Vec::new(),
                        });
                    }
                    Op::Read(i, n) if !readers.is_empty() => {
                        let at = i % readers.len();
                        let r = &mut readers[at];
                        r.items
                            .extend(std::iter::from_fn(|| ready_now(&mut r.sub)).take(*n));
                    }
                    Op::Drop(i) if !readers.is_empty() => {
                        let before = hub.subscriptions();
                        readers.remove(i % readers.len());
                        prop_assert_eq!(hub.subscriptions(), before - 1);
                    }
                    Op::Read(..) | Op::Drop(_) => {}
                    Op::Change(i, kind) => {
                        cursor += 1;
                        let id = IDS[*i];
                        match kind {
                            Removed => {
                                engine.remove(id);
                            }
                            Created => {
                                engine.entry(id.into()).or_insert(false);
                            }
                            _ => {
                                engine.insert(id.into(), *kind == Started);
                            }
                        }
                        session.send(change(id, *kind, cursor)).expect("open");
                    }
                    Op::Reconnect(listing) => {
                        let next = dial.session();
                        engine.clear();
                        for (id, what) in IDS.iter().zip(listing) {
                            if *what > 0 {
                                engine.insert((*id).into(), *what == 2);
                            }
                        }
                        let listed: Vec<(&str, bool)> =
                            engine.iter().map(|(k, v)| (k.as_str(), *v)).collect();
                        snapshot(&next, &listed);
                        // The old session ends; the next dial gets this one.
                        drop(std::mem::replace(&mut session, next));
                    }
                }
                let reconnect = matches!(op, Op::Reconnect(_));
                catch_up(&mut reference, &mut seen, reconnect).await;
                prop_assert_eq!(&store_state(&store), &engine, "after {:?}", op);
                let lagged = seen
                    .iter()
                    .any(|i| matches!(i, Item::Status(Status::Lagged { .. })));
                prop_assert!(!lagged, "the reference never falls behind");
            }
            // Every reader reads what is left, and must then agree with the
            // present; one that never lagged got exactly the reference's events.
            let reference_events = events(&seen);
            for (n, r) in readers.iter_mut().enumerate() {
                r.items.extend(drain(&mut r.sub));
                let mut state = match r.start {
                    Start::Initial => BTreeMap::new(),
                    _ => r.at_start.clone(),
                };
                rebuild(&mut state, &r.items);
                prop_assert_eq!(
                    &state,
                    &engine,
                    "reader {} ({:?}) ends at the present",
                    n,
                    r.start
                );
                let lagged = r
                    .items
                    .iter()
                    .any(|i| matches!(i, Item::Status(Status::Lagged { .. })));
                if !lagged {
                    let mut got = events(&r.items);
                    if r.start == Start::Initial {
                        let told: usize = r
                            .at_start
                            .values()
                            .map(|running| 1 + usize::from(*running))
                            .sum();
                        prop_assert!(got[..told].iter().all(|e| e.ends_with("initial")));
                        got.drain(..told);
                    }
                    prop_assert_eq!(&got[..], &reference_events[r.from..], "reader {}", n);
                }
            }
            Ok(())
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]
        #[test]
        fn readers_agree_with_the_reference_and_the_present(ops in proptest::collection::vec(op(), 1..80)) {
            run(&ops)?;
        }
    }
}

/// Every item a subscription has ready now, with its position.
fn drain_positions(sub: &mut Subscription) -> Vec<(Option<u64>, String)> {
    std::iter::from_fn(|| ready_now(sub).map(|item| (sub.position(), short(&item)))).collect()
}

#[tokio::test(start_paused = true)]
async fn a_resume_after_a_position_gets_exactly_what_followed_else_lags_to_the_present() {
    let (_dial, tx, hub) = hub_with(&[("a", true)], HubConfig::default().queue(8));
    let mut first = hub.subscribe(Start::Initial);
    let mut other = hub.subscribe(Start::Baseline);
    // Subscribed before the first snapshot: it comes through the hub,
    // positions and all.
    let told = drain_positions(&mut first);
    assert_eq!(
        told,
        [
            (Some(0), "a created initial".to_owned()),
            (Some(1), "a started initial".to_owned()),
            (Some(2), "connected 1".to_owned()),
        ]
    );
    // The present told to a later one alone: no positions.
    let mut later = hub.subscribe(Start::Initial);
    assert_eq!(
        drain_positions(&mut later),
        [
            (None, "a created initial".to_owned()),
            (None, "a started initial".to_owned()),
            (None, "connected 1".to_owned()),
        ]
    );
    drop(later);
    let send = |n: u64| {
        let kind = if n % 2 == 1 { Stopped } else { Started };
        tx.send(change("a", kind, n)).expect("session open");
    };
    for n in 1..=3 {
        send(n);
    }
    let got = drain_positions(&mut first);
    assert_eq!(got.len(), 3, "{got:?}");
    // The hub's items: positions one apart, the same for every subscriber.
    let positions: Vec<u64> = got.iter().map(|(p, _)| p.expect("a hub item")).collect();
    assert_eq!(
        positions,
        [positions[0], positions[0] + 1, positions[0] + 2]
    );
    let mut theirs: Vec<u64> = drain_positions(&mut other)
        .into_iter()
        .filter_map(|(p, s)| p.filter(|_| s.starts_with("a ")))
        .collect();
    assert_eq!(theirs.split_off(theirs.len() - 3), positions);

    // Away after the first of the three: resumed, it gets exactly the two
    // that followed (after the hub's status), then live.
    let mut back = hub.resume(Some(positions[0]));
    let again = drain_positions(&mut back);
    assert_eq!(
        again,
        [
            (None, "connected 1".to_owned()),
            got[1].clone(),
            got[2].clone()
        ]
    );
    send(4);
    let live = drain_positions(&mut back);
    assert_eq!(
        live,
        [(Some(positions[2] + 1), "a started live".to_owned())]
    );
    // After the latest item: nothing to catch up.
    let mut latest = hub.resume(Some(positions[2] + 1));
    assert_eq!(shorts(&drain(&mut latest)), ["connected 1"]);

    // Away longer than the queue: lagged, then the whole present (as to
    // one that saw nothing), the status, then live.
    for n in 5..=20 {
        send(n);
    }
    let _ = drain(&mut first);
    let mut late = hub.resume(Some(positions[0]));
    let lag = shorts(&drain(&mut late));
    assert_eq!(
        lag,
        [
            "lagged 19",
            "a created resync",
            "a started resync",
            "connected 1"
        ],
        "missed: the 19 items after the position"
    );
    // A position the hub never gave, and none at all: the same, as if
    // nothing was known (missed unknown: 0).
    for after in [Some(u64::MAX), Some(positions[2] + 1000), None] {
        let mut foreign = hub.resume(after);
        assert_eq!(
            shorts(&drain(&mut foreign)),
            [
                "lagged 0",
                "a created resync",
                "a started resync",
                "connected 1"
            ],
            "{after:?}"
        );
        send(21);
        assert_eq!(shorts(&drain(&mut foreign)), ["a stopped live"]);
        send(22);
        let _ = drain(&mut foreign);
    }
    drop((first, other, back, latest, late));
}
