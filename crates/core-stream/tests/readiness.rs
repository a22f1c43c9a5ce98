//! Readiness through the public API: paused tokio time against the scripted
//! dial, as in `policy.rs`. Per instance the stream follows
//! `Created → (Started → (Ready ⇄ Unready)* → Stopped)* → Removed`, a
//! repeated readiness is swallowed, and a readiness change missed while
//! disconnected is told once (the replay or the snapshot, never both).
#![allow(clippy::too_many_lines, clippy::items_after_statements)]

use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use tokio::time::timeout;
use tokio_stream::{Stream, StreamExt};

use lookout_core::{
    EventKind, Health, InstanceEvent, Item, Observation, Origin, Readiness, Status, Watch,
};

mod support;
use support::*;

use EventKind::{Created, Ready, Removed, Started, Stopped, Unready};
use Health::{Healthy, Starting, Unhealthy};

fn short(item: &Item) -> String {
    match item {
        Item::Event(e) => format!("{} {} {}", e.id, e.kind, e.origin),
        Item::Status(Status::Connected { instances }) => format!("connected {instances}"),
        Item::Status(Status::Disconnected { attempt, .. }) => format!("disconnected {attempt}"),
        Item::Status(Status::Lagged { missed }) => format!("lagged {missed}"),
    }
}

fn shorts(items: &[Item]) -> Vec<String> {
    items.iter().map(short).collect()
}

fn events(items: &[Item]) -> Vec<&InstanceEvent> {
    items
        .iter()
        .filter_map(|i| match i {
            Item::Event(e) => Some(e),
            Item::Status(_) => None,
        })
        .collect()
}

/// Everything the watch has ready now, without waiting (after a turn of
/// the runtime, for a fresh budget on the session's channel).
async fn drain(w: &mut Watch<Scripted>) -> Vec<Item> {
    tokio::task::yield_now().await;
    let mut cx = Context::from_waker(Waker::noop());
    let mut out = Vec::new();
    for _ in 0..10_000 {
        match Pin::new(&mut *w).poll_next(&mut cx) {
            Poll::Ready(Some(item)) => out.push(item),
            Poll::Ready(None) => panic!("the watch ended"),
            Poll::Pending => return out,
        }
    }
    panic!("the watch never stops yielding: {:?}", shorts(&out));
}

/// Everything up to and with the next `Connected`, waiting (on paused
/// time) through a backoff and a dial.
async fn until_connected(w: &mut Watch<Scripted>) -> Vec<Item> {
    let mut out = Vec::new();
    loop {
        let item = match timeout(Duration::from_secs(3600), w.next()).await {
            Ok(Some(item)) => item,
            Ok(None) => panic!("the watch ended"),
            Err(_) => panic!("not connected within an hour: {:?}", shorts(&out)),
        };
        let connected = matches!(item, Item::Status(Status::Connected { .. }));
        out.push(item);
        if connected {
            return out;
        }
    }
}

fn paused(h: Health) -> Option<Readiness> {
    Some(Readiness::container(h, true))
}

fn replicas(desired: u32, ready: u32, observed: bool) -> Option<Readiness> {
    Some(Readiness::replicas(desired, ready, observed))
}

/// A watch whose first session (returned) listed `items` as its baseline.
async fn connected(
    items: Vec<Obs>,
) -> (
    Scripted,
    tokio::sync::mpsc::UnboundedSender<Obs>,
    Watch<Scripted>,
) {
    let dial = Scripted::default();
    let tx = dial.session();
    let n = items.len();
    snapshot_of(&tx, items);
    let mut w = Watch::new(dial.clone(), quick());
    assert_eq!(shorts(&drain(&mut w).await), [format!("connected {n}")]);
    (dial, tx, w)
}

#[tokio::test(start_paused = true)]
async fn a_start_is_followed_by_ready_when_it_can_serve_at_once() {
    let (_dial, tx, mut w) = connected(vec![
        listed_with("a", false, Some("a1"), health(Starting)),
        listed_with("b", false, Some("b1"), health(Health::None)),
    ])
    .await;
    // A healthcheck that has not passed yet: started, not ready.
    let _ = tx.send(change_with("a", Started, 1, Some("a1"), health(Starting)));
    assert_eq!(shorts(&drain(&mut w).await), ["a started live"]);
    let _ = tx.send(change_with("a", Ready, 2, Some("a1"), health(Healthy)));
    let got = drain(&mut w).await;
    assert_eq!(shorts(&got), ["a ready live"]);
    let ready = events(&got)[0];
    assert_eq!(ready.readiness, health(Healthy));
    assert_eq!(ready.uid.as_deref(), Some("a1"));

    // No healthcheck: ready as soon as it runs.
    let _ = tx.send(change_with(
        "b",
        Started,
        3,
        Some("b1"),
        health(Health::None),
    ));
    let got = drain(&mut w).await;
    assert_eq!(shorts(&got), ["b started live", "b ready live"]);
    for e in events(&got) {
        assert_eq!(e.readiness, health(Health::None), "{e:?}");
        assert_eq!(e.origin, Origin::Live);
    }

    // An instance first seen running and healthy.
    let _ = tx.send(change_with("c", Started, 4, Some("c1"), health(Healthy)));
    assert_eq!(
        shorts(&drain(&mut w).await),
        ["c created live", "c started live", "c ready live"]
    );
}

#[tokio::test(start_paused = true)]
async fn a_repeated_readiness_is_swallowed() {
    let (_dial, tx, mut w) =
        connected(vec![listed_with("a", true, Some("a1"), health(Healthy))]).await;
    // Ready since the baseline: a repeated healthy, a repeated start with
    // the same readiness, say nothing.
    let _ = tx.send(change_with("a", Ready, 1, Some("a1"), health(Healthy)));
    let _ = tx.send(change_with("a", Ready, 2, Some("a1"), health(Healthy)));
    let _ = tx.send(change_with("a", Started, 3, Some("a1"), health(Healthy)));
    let _ = tx.send(change_with("a", Ready, 4, None, None));
    assert_eq!(shorts(&drain(&mut w).await), Vec::<String>::new());

    let _ = tx.send(change_with("a", Unready, 5, Some("a1"), health(Unhealthy)));
    assert_eq!(shorts(&drain(&mut w).await), ["a unready live"]);
    // Unready again, in another words: still nothing new.
    let _ = tx.send(change_with("a", Unready, 6, Some("a1"), health(Unhealthy)));
    let _ = tx.send(change_with("a", Started, 7, Some("a1"), health(Unhealthy)));
    let _ = tx.send(change_with("a", Unready, 8, Some("a1"), health(Starting)));
    let _ = tx.send(change_with("a", Unready, 9, None, paused(Healthy)));
    assert_eq!(shorts(&drain(&mut w).await), Vec::<String>::new());

    let _ = tx.send(change_with("a", Ready, 10, Some("a1"), health(Healthy)));
    let _ = tx.send(change_with("a", Ready, 11, Some("a1"), health(Healthy)));
    assert_eq!(shorts(&drain(&mut w).await), ["a ready live"]);
}

#[tokio::test(start_paused = true)]
async fn a_stopped_instance_is_never_ready() {
    let (_dial, tx, mut w) =
        connected(vec![listed_with("a", false, Some("a1"), health(Healthy))]).await;
    let _ = tx.send(change_with("a", Ready, 1, Some("a1"), health(Healthy)));
    let _ = tx.send(change_with("a", Ready, 2, None, None));
    let _ = tx.send(change_with("a", Unready, 3, None, health(Unhealthy)));
    let _ = tx.send(change_with("a", Stopped, 4, Some("a1"), health(Healthy)));
    assert_eq!(shorts(&drain(&mut w).await), Vec::<String>::new());
    // A start tells its own readiness: what was said while it was stopped
    // does not make it ready.
    let _ = tx.send(change_with("a", Started, 5, Some("a1"), health(Starting)));
    assert_eq!(shorts(&drain(&mut w).await), ["a started live"]);
    let _ = tx.send(change_with("a", Stopped, 6, Some("a1"), health(Unhealthy)));
    let _ = tx.send(change_with("a", Ready, 7, Some("a1"), health(Healthy)));
    assert_eq!(shorts(&drain(&mut w).await), ["a stopped live"]);
}

#[tokio::test(start_paused = true)]
async fn a_stop_or_a_removal_ends_readiness_without_unready() {
    let dial = Scripted::default();
    let s1 = dial.session();
    let s2 = dial.session();
    snapshot_of(
        &s1,
        vec![
            listed_with("a", true, Some("a1"), health(Healthy)),
            listed_with("b", true, Some("b1"), health(Healthy)),
            listed_with("c", true, Some("c1"), health(Healthy)),
            listed_with("d", true, Some("d1"), health(Healthy)),
        ],
    );
    let mut w = Watch::new(dial.clone(), quick());
    assert_eq!(shorts(&drain(&mut w).await), ["connected 4"]);
    let _ = s1.send(change_with("a", Stopped, 1, Some("a1"), health(Unhealthy)));
    let _ = s1.send(change_with("b", Removed, 2, Some("b1"), None));
    let got = drain(&mut w).await;
    assert_eq!(shorts(&got), ["a stopped live", "b removed live"]);
    assert_eq!(events(&got)[0].readiness, health(Unhealthy));
    // Started again: ready again, told anew.
    let _ = s1.send(change_with(
        "a",
        Started,
        3,
        Some("a1"),
        health(Health::None),
    ));
    assert_eq!(
        shorts(&drain(&mut w).await),
        ["a started live", "a ready live"]
    );
    // What a snapshot finds: a stop, a removal, a stop and a start
    // (no net change of `a`): no `Unready` before them.
    drop(s1);
    assert_eq!(shorts(&drain(&mut w).await), ["disconnected 1"]);
    snapshot_of(
        &s2,
        vec![
            listed_with("a", true, Some("a1"), health(Health::None)),
            listed_with("c", false, Some("c1"), health(Unhealthy)),
        ],
    );
    assert_eq!(
        shorts(&until_connected(&mut w).await),
        ["c stopped resync", "d removed resync", "connected 2"]
    );
}

#[tokio::test(start_paused = true)]
async fn a_pause_makes_unready_and_an_unpause_ready_again() {
    let (_dial, tx, mut w) = connected(vec![
        listed_with("a", true, Some("a1"), health(Healthy)),
        listed_with("b", true, Some("b1"), health(Health::None)),
    ])
    .await;
    let _ = tx.send(change_with("a", Unready, 1, Some("a1"), paused(Healthy)));
    let _ = tx.send(change_with("a", Unready, 2, Some("a1"), paused(Healthy)));
    assert_eq!(shorts(&drain(&mut w).await), ["a unready live"]);
    let _ = tx.send(change_with("a", Ready, 3, Some("a1"), health(Healthy)));
    assert_eq!(shorts(&drain(&mut w).await), ["a ready live"]);

    // Paused, and its healthcheck fails meanwhile (the engine marks a
    // paused container unhealthy): the unpause is no readiness yet.
    let _ = tx.send(change_with("a", Unready, 4, Some("a1"), paused(Healthy)));
    let _ = tx.send(change_with("a", Unready, 5, Some("a1"), paused(Unhealthy)));
    let got = drain(&mut w).await;
    assert_eq!(shorts(&got), ["a unready live"]);
    assert_eq!(events(&got)[0].readiness, paused(Healthy));
    // The detail decides, whatever the kind of the change says.
    let _ = tx.send(change_with("a", Ready, 6, Some("a1"), health(Unhealthy)));
    assert_eq!(shorts(&drain(&mut w).await), Vec::<String>::new());
    let _ = tx.send(change_with("a", Ready, 7, Some("a1"), health(Healthy)));
    assert_eq!(shorts(&drain(&mut w).await), ["a ready live"]);
    // Healthy but paused is not ready; unpaused without a healthcheck is.
    let _ = tx.send(change_with("a", Ready, 8, Some("a1"), paused(Healthy)));
    let _ = tx.send(change_with(
        "b",
        Unready,
        9,
        Some("b1"),
        paused(Health::None),
    ));
    let _ = tx.send(change_with(
        "b",
        Ready,
        10,
        Some("b1"),
        health(Health::None),
    ));
    assert_eq!(
        shorts(&drain(&mut w).await),
        ["a unready live", "b unready live", "b ready live"]
    );
}

#[tokio::test(start_paused = true)]
async fn a_new_incarnation_under_the_same_id_starts_over() {
    let dial = Scripted::default();
    let s1 = dial.session();
    let s2 = dial.session();
    snapshot_of(
        &s1,
        vec![listed_with("a", true, Some("a1"), health(Healthy))],
    );
    let mut w = Watch::new(dial.clone(), quick());
    assert_eq!(shorts(&drain(&mut w).await), ["connected 1"]);
    // `a` was removed (the removal was missed) and created again.
    let _ = s1.send(change_with("a", Created, 1, Some("a2"), health(Starting)));
    let got = drain(&mut w).await;
    assert_eq!(shorts(&got), ["a removed live", "a created live"]);
    let e = events(&got);
    assert_eq!(
        (e[0].uid.as_deref(), e[0].readiness),
        (Some("a1"), health(Healthy))
    );
    assert_eq!(
        (e[1].uid.as_deref(), e[1].readiness),
        (Some("a2"), health(Starting))
    );
    // The old incarnation's late readiness changes nothing.
    let _ = s1.send(change_with("a", Ready, 2, Some("a1"), health(Healthy)));
    let _ = s1.send(change_with("a", Unready, 3, Some("a1"), health(Unhealthy)));
    assert_eq!(shorts(&drain(&mut w).await), Vec::<String>::new());
    let _ = s1.send(change_with("a", Started, 4, Some("a2"), health(Healthy)));
    assert_eq!(
        shorts(&drain(&mut w).await),
        ["a started live", "a ready live"]
    );
    // A start of a third incarnation: the second goes, ready or not.
    let _ = s1.send(change_with("a", Started, 5, Some("a3"), health(Healthy)));
    let got = drain(&mut w).await;
    assert_eq!(
        shorts(&got),
        [
            "a removed live",
            "a created live",
            "a started live",
            "a ready live"
        ]
    );
    let uids: Vec<_> = events(&got).iter().map(|e| e.uid.clone()).collect();
    assert_eq!(
        uids,
        [
            Some("a2".into()),
            Some("a3".into()),
            Some("a3".into()),
            Some("a3".into())
        ]
    );
    // A snapshot that finds a fourth one, running and ready.
    drop(s1);
    assert_eq!(shorts(&drain(&mut w).await), ["disconnected 1"]);
    snapshot_of(
        &s2,
        vec![listed_with("a", true, Some("a4"), health(Healthy))],
    );
    let got = until_connected(&mut w).await;
    assert_eq!(
        shorts(&got),
        [
            "a removed resync",
            "a created resync",
            "a started resync",
            "a ready resync",
            "connected 1"
        ]
    );
    assert_eq!(events(&got)[0].uid.as_deref(), Some("a3"));
    assert_eq!(events(&got)[3].uid.as_deref(), Some("a4"));
}

#[tokio::test(start_paused = true)]
async fn a_readiness_change_missed_while_disconnected_is_told_once_by_the_snapshot() {
    let dial = Scripted::default();
    let s1 = dial.session();
    let s2 = dial.session();
    snapshot_of(
        &s1,
        vec![
            listed_with("a", true, Some("a1"), health(Healthy)),
            listed_with("b", true, Some("b1"), health(Unhealthy)),
            listed_with("c", true, Some("c1"), health(Healthy)),
            listed_with("d", true, Some("d1"), health(Healthy)),
        ],
    );
    let mut w = Watch::new(dial.clone(), quick());
    assert_eq!(shorts(&drain(&mut w).await), ["connected 4"]);
    let _ = s1.send(Ok(Observation::Progress(Some(5))));
    drop(s1);
    assert_eq!(shorts(&drain(&mut w).await), ["disconnected 1"]);
    // Meanwhile: `a` failed its checks, `b` passed them, `c` stopped, `d`
    // went unhealthy and recovered (no net change).
    snapshot_of(
        &s2,
        vec![
            listed_with("a", true, Some("a1"), health(Unhealthy)),
            listed_with("b", true, Some("b1"), health(Healthy)),
            listed_with("c", false, Some("c1"), health(Unhealthy)),
            listed_with("d", true, Some("d1"), health(Healthy)),
        ],
    );
    let got = until_connected(&mut w).await;
    assert_eq!(
        shorts(&got),
        [
            "a unready resync",
            "b ready resync",
            "c stopped resync",
            "connected 4"
        ]
    );
    let e = events(&got);
    assert_eq!(e[0].readiness, health(Unhealthy));
    assert_eq!(e[1].readiness, health(Healthy));
    // The feed then says what the snapshot told already: nothing twice.
    let _ = s2.send(change_with("a", Unready, 6, Some("a1"), health(Unhealthy)));
    let _ = s2.send(change_with("b", Ready, 7, Some("b1"), health(Healthy)));
    let _ = s2.send(change_with("c", Stopped, 8, Some("c1"), health(Unhealthy)));
    assert_eq!(shorts(&drain(&mut w).await), Vec::<String>::new());
    let _ = s2.send(change_with("a", Ready, 9, Some("a1"), health(Healthy)));
    assert_eq!(shorts(&drain(&mut w).await), ["a ready live"]);
    assert_eq!(dial.dials(), [None, Some(5)]);
}

#[tokio::test(start_paused = true)]
async fn a_replay_before_an_agreeing_snapshot_tells_nothing_twice() {
    let dial = Scripted::default();
    let s1 = dial.session();
    let s2 = dial.session();
    let s3 = dial.session();
    snapshot_of(
        &s1,
        vec![
            listed_with("a", true, Some("a1"), health(Healthy)),
            listed_with("b", true, Some("b1"), health(Starting)),
        ],
    );
    let mut w = Watch::new(dial.clone(), quick());
    assert_eq!(shorts(&drain(&mut w).await), ["connected 2"]);
    let _ = s1.send(Ok(Observation::Progress(Some(5))));
    drop(s1);
    assert_eq!(shorts(&drain(&mut w).await), ["disconnected 1"]);

    // The engine's replay of the time the feed was down, then its list.
    for (id, kind, t, h) in [
        ("a", Unready, 6, Unhealthy),
        ("b", Ready, 7, Healthy),
        ("a", Stopped, 8, Unhealthy),
        ("a", Started, 9, Starting),
        ("a", Ready, 10, Healthy),
    ] {
        let _ = s2.send(change_with(id, kind, t, Some(&format!("{id}1")), health(h)));
    }
    snapshot_of(
        &s2,
        vec![
            listed_with("a", true, Some("a1"), health(Healthy)),
            listed_with("b", true, Some("b1"), health(Healthy)),
        ],
    );
    let got = until_connected(&mut w).await;
    assert_eq!(
        shorts(&got),
        [
            "a unready live",
            "b ready live",
            "a stopped live",
            "a started live",
            "a ready live",
            "connected 2"
        ]
    );
    let at: Vec<_> = events(&got).iter().map(|e| e.at).collect();
    let t = |s| std::time::SystemTime::UNIX_EPOCH + Duration::from_secs(s);
    assert_eq!(at, [t(6), t(7), t(8), t(9), t(10)], "the engine's times");
    let _ = s2.send(change_with("b", Unready, 11, Some("b1"), health(Unhealthy)));
    assert_eq!(shorts(&drain(&mut w).await), ["b unready live"]);

    // A replay that stops short of the list (the recovery raced it): the
    // snapshot tells the rest, once, before `Connected`.
    drop(s2);
    assert_eq!(shorts(&drain(&mut w).await), ["disconnected 2"]);
    let _ = s3.send(change_with("a", Unready, 12, Some("a1"), health(Unhealthy)));
    snapshot_of(
        &s3,
        vec![
            listed_with("a", true, Some("a1"), health(Healthy)),
            listed_with("b", true, Some("b1"), health(Healthy)),
        ],
    );
    let _ = s3.send(change_with("a", Ready, 13, Some("a1"), health(Healthy)));
    let _ = s3.send(change_with("b", Ready, 14, Some("b1"), health(Healthy)));
    let got = until_connected(&mut w).await;
    assert_eq!(
        shorts(&got),
        [
            "a unready live",
            "a ready resync",
            "b ready resync",
            "connected 2"
        ]
    );
    // What the feed then says of it is old news.
    assert_eq!(shorts(&drain(&mut w).await), Vec::<String>::new());
    assert_eq!(dial.dials(), [None, Some(5), Some(11)]);
}

#[tokio::test(start_paused = true)]
async fn initial_tells_created_started_ready() {
    let dial = Scripted::default();
    let tx = dial.session();
    snapshot_of(
        &tx,
        vec![
            listed_with("d", true, None, paused(Healthy)),
            listed_with("c", false, None, health(Healthy)),
            listed_with("b", true, None, health(Starting)),
            listed_with("a", true, None, health(Healthy)),
            listed_with("e", true, None, replicas(2, 2, true)),
        ],
    );
    let mut w = Watch::new(dial.clone(), quick().initial(true));
    let got = until_connected(&mut w).await;
    assert_eq!(
        shorts(&got),
        [
            "a created initial",
            "a started initial",
            "a ready initial",
            "b created initial",
            "b started initial",
            "c created initial",
            "d created initial",
            "d started initial",
            "e created initial",
            "e started initial",
            "e ready initial",
            "connected 5"
        ]
    );
    assert!(
        events(&got)
            .iter()
            .all(|e| e.readiness.is_some() && e.origin == Origin::Initial)
    );
}

#[tokio::test(start_paused = true)]
async fn a_replicated_workload_is_ready_with_all_its_replicas() {
    let (_dial, tx, mut w) = connected(vec![listed_with(
        "web",
        false,
        Some("w1"),
        replicas(0, 0, true),
    )])
    .await;
    // A Kubernetes workload: every update is a start (it runs) that tells
    // its replicas.
    let step = |t, kind, r| change_with("web", kind, t, Some("w1"), r);
    let _ = tx.send(step(1, Started, replicas(3, 0, false)));
    assert_eq!(shorts(&drain(&mut w).await), ["web started live"]);
    let _ = tx.send(step(2, Started, replicas(3, 3, false)));
    let _ = tx.send(step(3, Started, replicas(3, 2, true)));
    assert_eq!(shorts(&drain(&mut w).await), Vec::<String>::new());
    let _ = tx.send(step(4, Started, replicas(3, 3, true)));
    let _ = tx.send(step(5, Started, replicas(3, 4, true)));
    assert_eq!(shorts(&drain(&mut w).await), ["web ready live"]);
    let _ = tx.send(step(6, Started, replicas(4, 3, true)));
    assert_eq!(shorts(&drain(&mut w).await), ["web unready live"]);
    let _ = tx.send(step(7, Started, replicas(4, 4, true)));
    assert_eq!(shorts(&drain(&mut w).await), ["web ready live"]);
    let _ = tx.send(step(8, Stopped, replicas(0, 0, true)));
    assert_eq!(shorts(&drain(&mut w).await), ["web stopped live"]);
}

#[tokio::test(start_paused = true)]
async fn a_polled_readiness_is_told_as_resync_when_it_flips() {
    let (_dial, tx, mut w) = connected(vec![
        listed_with("s", true, Some("s1"), replicas(3, 1, true)),
        listed_with("t", false, Some("t1"), replicas(0, 0, true)),
    ])
    .await;
    let poll = |id, uid, r: Option<Readiness>| polled(id, uid, r.expect("a readiness"));
    let _ = tx.send(poll("s", Some("s1"), replicas(3, 3, true)));
    let got = drain(&mut w).await;
    assert_eq!(shorts(&got), ["s ready resync"]);
    let e = events(&got)[0];
    assert_eq!(
        (e.uid.as_deref(), e.readiness),
        (Some("s1"), replicas(3, 3, true))
    );
    // The same again, or another detail that is as ready: nothing.
    let _ = tx.send(poll("s", Some("s1"), replicas(3, 3, true)));
    let _ = tx.send(poll("s", Some("s1"), replicas(2, 3, true)));
    assert_eq!(shorts(&drain(&mut w).await), Vec::<String>::new());
    // A poll that names no incarnation is of the known one.
    let _ = tx.send(poll("s", None, replicas(3, 2, true)));
    let got = drain(&mut w).await;
    assert_eq!(shorts(&got), ["s unready resync"]);
    assert_eq!(events(&got)[0].uid.as_deref(), Some("s1"));
    // Another incarnation's, an unknown instance's, a stopped one's: nothing.
    let _ = tx.send(poll("s", Some("s0"), replicas(3, 3, true)));
    let _ = tx.send(poll("nope", None, replicas(1, 1, true)));
    let _ = tx.send(poll("t", Some("t1"), replicas(1, 1, true)));
    assert_eq!(shorts(&drain(&mut w).await), Vec::<String>::new());
    // Swarm's feed tells a start without readiness: the poll does.
    let _ = tx.send(change_with("t", Started, 1, Some("t1"), None));
    assert_eq!(shorts(&drain(&mut w).await), ["t started live"]);
    let _ = tx.send(poll("t", Some("t1"), replicas(1, 1, true)));
    assert_eq!(shorts(&drain(&mut w).await), ["t ready resync"]);
    let _ = tx.send(change_with("t", Stopped, 2, Some("t1"), None));
    let _ = tx.send(poll("t", Some("t1"), replicas(1, 1, true)));
    assert_eq!(shorts(&drain(&mut w).await), ["t stopped live"]);
}

/// Readiness off (`None` everywhere): the stream of before readiness,
/// exactly; never a `Ready` or an `Unready`, and no event carries any.
#[tokio::test(start_paused = true)]
async fn readiness_off_tells_no_ready_or_unready() {
    let dial = Scripted::default();
    let s1 = dial.session();
    let s2 = dial.session();
    snapshot_of(
        &s1,
        vec![
            listed_with("a", true, Some("a1"), None),
            listed_with("b", false, Some("b1"), None),
        ],
    );
    let mut w = Watch::new(dial.clone(), quick().initial(true));
    let mut got = until_connected(&mut w).await;
    for (id, kind, t, uid) in [
        ("a", Started, 1, "a1"),
        ("b", Started, 2, "b1"),
        ("b", Started, 3, "b1"),
        ("c", Started, 4, "c1"),
        ("a", Created, 5, "a2"),
        ("a", Stopped, 6, "a2"),
        ("b", Stopped, 7, "b1"),
    ] {
        let _ = s1.send(change_with(id, kind, t, Some(uid), None));
    }
    got.extend(drain(&mut w).await);
    drop(s1);
    snapshot_of(
        &s2,
        vec![
            listed_with("a", true, Some("a2"), None),
            listed_with("c", true, Some("c2"), None),
        ],
    );
    got.extend(until_connected(&mut w).await);
    assert_eq!(
        shorts(&got),
        [
            "a created initial",
            "a started initial",
            "b created initial",
            "connected 2",
            "b started live",
            "c created live",
            "c started live",
            "a removed live",
            "a created live",
            "b stopped live",
            "disconnected 1",
            "a started resync",
            "b removed resync",
            "c removed resync",
            "c created resync",
            "c started resync",
            "connected 2"
        ]
    );
    assert!(events(&got).iter().all(|e| e.readiness.is_none()));
}
