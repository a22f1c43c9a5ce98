//! Readiness through the public API: paused tokio time against the scripted
//! dial, as in `policy.rs`. Per instance the stream follows
//! `Created → (Started → (Ready ⇄ Unready)* → Stopped)* → Removed`, a
//! repeated readiness is swallowed, and a readiness change missed while
//! disconnected is told once (the replay or the snapshot, never both).
#![allow(
    clippy::too_many_lines,
    clippy::items_after_statements,
    clippy::unnecessary_wraps,
    clippy::match_wild_err_arm,
    clippy::similar_names,
    clippy::match_same_arms,
    clippy::float_cmp
)]

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

/// A `Created` of a known instance is a replay (an inclusive `since`, a
/// history): the readiness it tells is the one at its creation, not news.
#[tokio::test(start_paused = true)]
async fn a_replayed_create_tells_no_readiness() {
    let (_dial, tx, mut w) = connected(vec![
        listed_with("a", true, Some("a1"), health(Healthy)),
        listed_with("b", true, Some("b1"), health(Unhealthy)),
        listed_with("c", false, Some("c1"), health(Unhealthy)),
    ])
    .await;
    let _ = tx.send(change_with("a", Created, 1, Some("a1"), health(Starting)));
    let _ = tx.send(change_with(
        "b",
        Created,
        2,
        Some("b1"),
        health(Health::None),
    ));
    let _ = tx.send(change_with(
        "c",
        Created,
        3,
        Some("c1"),
        health(Health::None),
    ));
    assert_eq!(shorts(&drain(&mut w).await), Vec::<String>::new());
    // And it changed nothing: `c` starts as its start says.
    let _ = tx.send(change_with("c", Started, 4, Some("c1"), health(Starting)));
    let _ = tx.send(change_with("a", Unready, 5, Some("a1"), health(Unhealthy)));
    let _ = tx.send(change_with("b", Ready, 6, Some("b1"), health(Healthy)));
    assert_eq!(
        shorts(&drain(&mut w).await),
        ["c started live", "a unready live", "b ready live"]
    );
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
    let (dial, s1, mut w) = connected(vec![
        listed_with("a", true, Some("a1"), health(Healthy)),
        listed_with("b", true, Some("b1"), health(Healthy)),
        listed_with("c", true, Some("c1"), health(Healthy)),
        listed_with("d", true, Some("d1"), health(Healthy)),
    ])
    .await;
    let s2 = dial.session();
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
    let (dial, s1, mut w) =
        connected(vec![listed_with("a", true, Some("a1"), health(Healthy))]).await;
    let s2 = dial.session();
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
    let (dial, s1, mut w) = connected(vec![
        listed_with("a", true, Some("a1"), health(Healthy)),
        listed_with("b", true, Some("b1"), health(Unhealthy)),
        listed_with("c", true, Some("c1"), health(Healthy)),
        listed_with("d", true, Some("d1"), health(Healthy)),
    ])
    .await;
    let s2 = dial.session();
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
    let (dial, s1, mut w) = connected(vec![
        listed_with("a", true, Some("a1"), health(Healthy)),
        listed_with("b", true, Some("b1"), health(Starting)),
    ])
    .await;
    let s2 = dial.session();
    let s3 = dial.session();
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

// ---------------------------------------------------------------------------
// The shared hub: a lagging subscription's difference, the initial telling,
// the store, the gauge.

mod hub {
    use std::collections::BTreeMap;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{Arc, Mutex};

    use super::*;
    use lookout_core::{HubConfig, Start, Store, Subscription};

    /// Everything a subscription has ready now.
    fn drain(sub: &mut Subscription) -> Vec<Item> {
        let mut cx = Context::from_waker(Waker::noop());
        std::iter::from_fn(|| match Pin::new(&mut *sub).poll_next(&mut cx) {
            Poll::Ready(item) => item,
            Poll::Pending => None,
        })
        .collect()
    }

    /// id → (running, ready, readiness), as a consumer rebuilds it from
    /// the events, checking the grammar.
    type State = BTreeMap<String, (bool, bool, Option<Readiness>)>;

    fn rebuild(state: &mut State, items: &[Item]) {
        for e in events(items) {
            let id = e.id.to_string();
            match (e.kind, state.get_mut(&id)) {
                (Created, None) => {
                    state.insert(id, (false, false, e.readiness));
                }
                (Removed, Some(_)) => {
                    state.remove(&id);
                }
                (Started, Some(s)) if !s.0 => *s = (true, false, e.readiness),
                (Stopped, Some(s)) if s.0 => *s = (false, false, e.readiness),
                (Ready, Some(s)) if s.0 && !s.1 => *s = (true, true, e.readiness),
                (Unready, Some(s)) if s.0 && s.1 => *s = (true, false, e.readiness),
                (_, s) => panic!("out of grammar: {e:?} after {s:?}"),
            }
        }
    }

    fn store_state(store: &Store) -> State {
        store
            .instances()
            .into_iter()
            .map(|i| (i.id.to_string(), (i.running, i.ready, i.readiness)))
            .collect()
    }

    #[tokio::test(start_paused = true)]
    async fn a_lagging_subscription_gets_the_difference_with_readiness() {
        let dial = Scripted::default();
        let tx = dial.session();
        snapshot_of(
            &tx,
            vec![
                listed_with("a", true, Some("a1"), health(Healthy)),
                listed_with("b", true, Some("b1"), health(Starting)),
                listed_with("c", true, Some("c1"), health(Healthy)),
                listed_with("d", true, Some("d1"), health(Healthy)),
                listed_with("e", true, Some("e1"), health(Healthy)),
            ],
        );
        let hub = Watch::new(dial.clone(), quick()).share_with(HubConfig::default().queue(4));
        let store = hub.store();
        let mut lagging = hub.subscribe(Start::Initial);
        let mut state = State::new();
        let got = drain(&mut lagging);
        assert_eq!(got.len(), 5 * 3 - 1 + 1, "{:?}", shorts(&got));
        rebuild(&mut state, &got);
        assert_eq!(state, store_state(&store));
        assert_eq!(store.instances().iter().filter(|i| i.ready).count(), 4);

        // While it does not read: `a` fails, `b` passes, `c` stops, `d`
        // comes again (another incarnation) and is ready, `e` fails and
        // recovers (no net change), `f` comes running and ready, `g` comes
        // and goes.
        for (n, (id, kind, uid, h)) in [
            ("a", Unready, "a1", Unhealthy),
            ("b", Ready, "b1", Healthy),
            ("c", Stopped, "c1", Unhealthy),
            ("d", Created, "d2", Starting),
            ("d", Started, "d2", Health::None),
            ("e", Unready, "e1", Unhealthy),
            ("e", Ready, "e1", Healthy),
            ("f", Started, "f1", Healthy),
            ("g", Started, "g1", Healthy),
            ("g", Removed, "g1", Healthy),
        ]
        .into_iter()
        .enumerate()
        {
            let _ = tx.send(change_with(id, kind, n as u64 + 1, Some(uid), health(h)));
        }
        timeout(
            Duration::from_secs(1),
            store.until("f", |f| f.is_some_and(|f| f.ready)),
        )
        .await
        .expect("the store sees f ready");
        timeout(Duration::from_secs(1), store.until("g", |g| g.is_some()))
            .await
            .expect("the store sees g");
        timeout(Duration::from_secs(1), store.until("g", |g| g.is_none()))
            .await
            .expect("the store sees g go");

        let got = drain(&mut lagging);
        assert_eq!(
            shorts(&got),
            [
                "lagged 16",
                "a unready resync",
                "b ready resync",
                "c stopped resync",
                "d removed resync",
                "d created resync",
                "d started resync",
                "d ready resync",
                "f created resync",
                "f started resync",
                "f ready resync",
                "connected 6",
            ]
        );
        let e = events(&got);
        assert_eq!(e[0].readiness, health(Unhealthy));
        assert_eq!(
            (e[3].uid.as_deref(), e[4].uid.as_deref()),
            (Some("d1"), Some("d2"))
        );
        rebuild(&mut state, &got);
        assert_eq!(
            state,
            store_state(&store),
            "the difference brings it to the present"
        );
        // Then live, from exactly there.
        let _ = tx.send(change_with("f", Unready, 20, Some("f1"), paused(Healthy)));
        assert_eq!(shorts(&drain(&mut lagging)), ["f unready live"]);
    }

    #[tokio::test(start_paused = true)]
    async fn an_initial_subscription_is_told_ready() {
        let items = || {
            vec![
                listed_with("b", true, None, health(Starting)),
                listed_with("a", true, None, health(Healthy)),
                listed_with("c", false, None, health(Healthy)),
            ]
        };
        let told = [
            "a created initial",
            "a started initial",
            "a ready initial",
            "b created initial",
            "b started initial",
            "c created initial",
            "connected 3",
        ];
        // Subscribed before the first snapshot: its events, as they come.
        let dial = Scripted::default();
        let tx = dial.session();
        snapshot_of(&tx, items());
        let hub = Watch::new(dial.clone(), quick()).share();
        let mut early = hub.subscribe(Start::Initial);
        assert_eq!(shorts(&drain(&mut early)), told);
        // After it: the present, told.
        let mut late = hub.subscribe(Start::Initial);
        assert_eq!(shorts(&drain(&mut late)), told);
        let mut baseline = hub.subscribe(Start::Baseline);
        assert_eq!(shorts(&drain(&mut baseline)), ["connected 3"]);

        // A watch shared after its first snapshot: what it knew, told.
        let dial = Scripted::default();
        let tx = dial.session();
        snapshot_of(&tx, items());
        let mut w = Watch::new(dial.clone(), quick());
        assert_eq!(shorts(&super::drain(&mut w).await), ["connected 3"]);
        let hub = w.share();
        let store = hub.store();
        assert!(store.is_synced());
        assert!(
            store
                .get("a")
                .is_some_and(|a| a.ready && a.readiness == health(Healthy))
        );
        let mut sub = hub.subscribe(Start::Initial);
        let got = drain(&mut sub);
        assert_eq!(shorts(&got[..6]), told[..6]);
    }

    #[tokio::test(start_paused = true)]
    async fn the_store_waits_for_ready_and_keeps_the_detail() {
        let dial = Scripted::default();
        let tx = dial.session();
        snapshot_of(
            &tx,
            vec![listed_with("web", false, Some("w1"), health(Starting))],
        );
        let hub = Watch::new(dial.clone(), quick()).share();
        let store = hub.store();
        store.synced().await;
        let ready = |i: Option<&lookout_core::Instance>| i.is_some_and(|i| i.ready);
        let mut web_ready = Box::pin(store.until("web", ready));
        let mut cx = Context::from_waker(Waker::noop());
        assert!(web_ready.as_mut().poll(&mut cx).is_pending());

        let _ = tx.send(change_with("web", Started, 1, Some("w1"), health(Starting)));
        timeout(
            Duration::from_secs(1),
            store.until("web", |w| w.is_some_and(|w| w.running)),
        )
        .await
        .expect("it starts");
        let web = store.get("web").expect("exists");
        assert!(web.running && !web.ready);
        assert_eq!(web.readiness, health(Starting));
        assert!(
            web_ready.as_mut().poll(&mut cx).is_pending(),
            "started, not ready"
        );

        // Ready and unready again in one go: the state lasted one event, and counts.
        let _ = tx.send(change_with("web", Ready, 2, Some("w1"), health(Healthy)));
        let _ = tx.send(change_with("web", Unready, 3, Some("w1"), paused(Healthy)));
        let web = timeout(Duration::from_secs(1), web_ready)
            .await
            .expect("resolves")
            .expect("exists");
        assert!(web.running && web.ready);
        assert_eq!(web.readiness, health(Healthy));
        assert_eq!(
            web.since,
            std::time::SystemTime::UNIX_EPOCH + Duration::from_secs(2)
        );
        let now = store.get("web").expect("exists");
        assert!(now.running && !now.ready);
        assert_eq!(now.readiness, paused(Healthy), "the pause's detail");

        let _ = tx.send(change_with("web", Ready, 4, Some("w1"), health(Healthy)));
        let _ = tx.send(change_with(
            "web",
            Stopped,
            5,
            Some("w1"),
            health(Unhealthy),
        ));
        timeout(
            Duration::from_secs(1),
            store.until("web", |w| w.is_some_and(|w| !w.running)),
        )
        .await
        .expect("it stops");
        let web = store.get("web").expect("exists");
        assert!(!web.ready, "a stop ends readiness");
        assert_eq!(web.readiness, health(Unhealthy));
        // Already ready: at once.
        let _ = tx.send(change_with(
            "web",
            Started,
            6,
            Some("w1"),
            health(Health::None),
        ));
        timeout(Duration::from_secs(1), store.until("web", ready))
            .await
            .expect("resolves");
        let mut again = Box::pin(store.until("web", ready));
        assert!(again.as_mut().poll(&mut cx).is_ready());
        // A polled detail.
        let _ = tx.send(polled("web", None, Readiness::container(Unhealthy, false)));
        let web = timeout(
            Duration::from_secs(1),
            store.until("web", |w| w.is_some_and(|w| !w.ready)),
        )
        .await
        .expect("resolves")
        .expect("exists");
        assert_eq!(web.readiness, health(Unhealthy));
        assert!(web.running);
    }

    /// A recorder of the gauges only, by name.
    #[derive(Default)]
    struct Gauges(Mutex<BTreeMap<String, Arc<Value>>>);

    #[derive(Default)]
    struct Value(AtomicU64);

    impl metrics::GaugeFn for Value {
        fn increment(&self, value: f64) {
            self.set(self.get() + value);
        }
        fn decrement(&self, value: f64) {
            self.set(self.get() - value);
        }
        fn set(&self, value: f64) {
            self.0.store(value.to_bits(), Ordering::SeqCst);
        }
    }

    impl Value {
        fn get(&self) -> f64 {
            f64::from_bits(self.0.load(Ordering::SeqCst))
        }
    }

    impl Gauges {
        fn get(&self, name: &str) -> f64 {
            let gauges = self.0.lock().expect("lock");
            gauges.get(name).map_or(f64::NAN, |v| v.get())
        }
    }

    impl metrics::Recorder for Gauges {
        fn describe_counter(
            &self,
            _: metrics::KeyName,
            _: Option<metrics::Unit>,
            _: metrics::SharedString,
        ) {
        }
        fn describe_gauge(
            &self,
            _: metrics::KeyName,
            _: Option<metrics::Unit>,
            _: metrics::SharedString,
        ) {
        }
        fn describe_histogram(
            &self,
            _: metrics::KeyName,
            _: Option<metrics::Unit>,
            _: metrics::SharedString,
        ) {
        }
        fn register_counter(
            &self,
            _: &metrics::Key,
            _: &metrics::Metadata<'_>,
        ) -> metrics::Counter {
            metrics::Counter::noop()
        }
        fn register_gauge(&self, key: &metrics::Key, _: &metrics::Metadata<'_>) -> metrics::Gauge {
            let mut gauges = self.0.lock().expect("lock");
            // `name`, or `name{k=v,…}` with labels.
            let labels: Vec<String> = key
                .labels()
                .map(|l| format!("{}={}", l.key(), l.value()))
                .collect();
            let name = if labels.is_empty() {
                key.name().to_owned()
            } else {
                format!("{}{{{}}}", key.name(), labels.join(","))
            };
            let value = gauges.entry(name).or_default();
            metrics::Gauge::from_arc(Arc::clone(value))
        }
        fn register_histogram(
            &self,
            _: &metrics::Key,
            _: &metrics::Metadata<'_>,
        ) -> metrics::Histogram {
            metrics::Histogram::noop()
        }
    }

    /// One hub per source, each labelling its metrics with its host: the
    /// series stay apart.
    #[tokio::test(start_paused = true)]
    async fn hubs_with_a_metric_label_keep_their_series_apart() {
        let gauges = Gauges::default();
        let mut stores = Vec::new();
        for (host, items) in [
            (
                "a",
                vec![
                    listed_with("x", true, None, health(Healthy)),
                    listed_with("y", true, None, None),
                ],
            ),
            ("b", vec![listed_with("x", true, None, health(Starting))]),
        ] {
            let dial = Scripted::default();
            snapshot_of(&dial.session(), items);
            let hub = metrics::with_local_recorder(&gauges, || {
                Watch::new(dial.clone(), quick())
                    .share_with(HubConfig::default().metric_label("host", host))
            });
            let store = hub.store();
            store.synced().await;
            stores.push(store);
        }
        assert_eq!(gauges.get("lookout_instances{host=a}"), 2.0);
        assert_eq!(gauges.get("lookout_instances_ready{host=a}"), 1.0);
        assert_eq!(gauges.get("lookout_instances{host=b}"), 1.0);
        assert_eq!(gauges.get("lookout_instances_ready{host=b}"), 0.0);
        assert!(
            gauges.get("lookout_instances").is_nan(),
            "no series without a host"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn the_ready_gauge_counts_the_ready_instances() {
        let dial = Scripted::default();
        let tx = dial.session();
        snapshot_of(
            &tx,
            vec![
                listed_with("a", true, None, health(Healthy)),
                listed_with("b", true, None, health(Starting)),
                listed_with("c", false, None, health(Healthy)),
            ],
        );
        let gauges = Gauges::default();
        let hub =
            metrics::with_local_recorder(&gauges, || Watch::new(dial.clone(), quick()).share());
        let store = hub.store();
        store.synced().await;
        assert_eq!(gauges.get("lookout_instances"), 3.0);
        assert_eq!(gauges.get("lookout_instances_ready"), 1.0);
        for (n, (id, kind, h)) in [
            ("b", Ready, Healthy),
            ("c", Started, Health::None),
            ("a", Stopped, Unhealthy),
        ]
        .into_iter()
        .enumerate()
        {
            let _ = tx.send(change_with(id, kind, n as u64 + 1, None, health(h)));
        }
        timeout(
            Duration::from_secs(1),
            store.until("a", |a| a.is_some_and(|a| !a.running)),
        )
        .await
        .expect("the store follows");
        assert_eq!(gauges.get("lookout_instances_ready"), 2.0);
        let _ = tx.send(change_with("b", Removed, 4, None, None));
        let _ = tx.send(change_with("c", Unready, 5, None, paused(Health::None)));
        timeout(Duration::from_secs(1), store.until("b", |b| b.is_none()))
            .await
            .expect("the store follows");
        assert_eq!(gauges.get("lookout_instances_ready"), 0.0);
        assert_eq!(gauges.get("lookout_instances"), 2.0);
    }
}

// ---------------------------------------------------------------------------
// Property: any sequence of engine operations, delivered through the
// scripted dial as live changes, polls and snapshots (with lossy feeds and
// disconnects whose replay may stop short), against a model of the engine.

mod prop {
    use std::collections::{BTreeMap, HashMap};

    use proptest::prelude::*;
    use tokio::sync::mpsc::UnboundedSender;

    use super::*;
    use lookout_core::{Change, Listed};

    /// `c0`, `c1`: containers (health, pause); `s0`: a replicated service.
    const IDS: [&str; 3] = ["c0", "c1", "s0"];

    fn is_container(i: u8) -> bool {
        i < 2
    }

    #[derive(Clone, Debug)]
    enum Op {
        Create {
            instance: u8,
            /// With a healthcheck (containers).
            check: bool,
        },
        Start(u8),
        Stop(u8),
        Remove(u8),
        /// A container's check result: starting, healthy, unhealthy.
        Health(u8, u8),
        Pause {
            instance: u8,
            paused: bool,
        },
        /// The service's desired and ready replicas; whether the change
        /// tells them (Kubernetes) or not (Swarm's feed: a poll does).
        Scale {
            desired: u32,
            ready: u32,
            tells: bool,
        },
        /// The session polls an instance's readiness.
        Poll(u8),
        /// A poll that names another incarnation.
        PollStale(u8),
        /// The engine drops the next change (a slow reader).
        Drop,
        /// The engine sends the next change twice (a raced duplicate).
        Dup,
        /// The connection breaks (changes until the redial are missed), or,
        /// when broken, the redial: the engine replays none, half or all of
        /// the missed changes before its snapshot.
        Disconnect(u8),
        /// The session relists in place.
        Relist,
        /// The engine replays the current incarnation's `Created` (with
        /// the readiness it had then): no news.
        ReplayCreate(u8),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            2 => (0u8..3, any::<bool>()).prop_map(|(i, c)| Op::Create {
                instance: i,
                check: c
            }),
            3 => (0u8..2).prop_map(Op::Start),
            2 => (0u8..2).prop_map(Op::Stop),
            1 => (0u8..3).prop_map(Op::Remove),
            4 => (0u8..2, 0u8..3).prop_map(|(i, h)| Op::Health(i, h)),
            2 => (0u8..2, any::<bool>()).prop_map(|(i, p)| Op::Pause {
                instance: i,
                paused: p
            }),
            3 => (0u32..4, 0u32..4, any::<bool>()).prop_map(|(d, r, t)| Op::Scale {
                desired: d,
                ready: r,
                tells: t
            }),
            2 => (0u8..3).prop_map(Op::Poll),
            1 => (0u8..3).prop_map(Op::PollStale),
            1 => Just(Op::Drop),
            1 => Just(Op::Dup),
            2 => (0u8..3).prop_map(Op::Disconnect),
            1 => Just(Op::Relist),
            1 => (0u8..3).prop_map(Op::ReplayCreate),
        ]
    }

    #[derive(Clone, Copy, Debug)]
    struct Inst {
        uid: u64,
        running: bool,
        /// A container with a healthcheck.
        check: bool,
        readiness: Readiness,
    }

    /// An instance as its events tell it (or as the engine has it).
    #[derive(Clone, Debug, PartialEq, Eq)]
    struct Seen {
        uid: Option<String>,
        running: bool,
        ready: bool,
    }

    type View = BTreeMap<String, Seen>;

    fn truth(engine: &BTreeMap<String, Inst>) -> View {
        engine
            .iter()
            .map(|(id, i)| {
                let seen = Seen {
                    uid: Some(format!("u{}", i.uid)),
                    running: i.running,
                    ready: i.running && i.readiness.is_ready(),
                };
                (id.clone(), seen)
            })
            .collect()
    }

    fn container(check: bool, health: Health) -> Readiness {
        Readiness::container(if check { health } else { Health::None }, false)
    }

    /// The consumer's side: the view its events build, checked against the
    /// grammar as they come.
    #[derive(Default)]
    struct Consumer {
        view: View,
        last: HashMap<String, EventKind>,
        /// A start that could serve at once: its `Ready` is next.
        ready_next: Option<String>,
    }

    impl Consumer {
        fn follow(&mut self, e: &InstanceEvent) -> Result<(), TestCaseError> {
            let id = e.id.to_string();
            if let Some(want) = self.ready_next.take() {
                prop_assert!(
                    want == id && e.kind == Ready,
                    "a ready start of {} is not followed by Ready: {:?}",
                    want,
                    e
                );
            }
            prop_assert_ne!(self.last.get(&id), Some(&e.kind), "repeated: {:?}", e);
            self.last.insert(id.clone(), e.kind);
            let known = self.view.get_mut(&id);
            match (e.kind, known) {
                (Created, None) => {
                    self.view.insert(
                        id,
                        Seen {
                            uid: e.uid.as_deref().map(str::to_owned),
                            running: false,
                            ready: false,
                        },
                    );
                }
                (Started, Some(s)) if !s.running => {
                    s.running = true;
                    if e.readiness.is_some_and(|r| r.is_ready()) {
                        self.ready_next = Some(id);
                    }
                }
                (Ready, Some(s)) if s.running && !s.ready => {
                    prop_assert!(e.readiness.is_some_and(|r| r.is_ready()), "{:?}", e);
                    s.ready = true;
                }
                (Unready, Some(s)) if s.running && s.ready => {
                    prop_assert!(e.readiness.is_some_and(|r| !r.is_ready()), "{:?}", e);
                    s.ready = false;
                }
                (Stopped, Some(s)) if s.running => {
                    s.running = false;
                    s.ready = false;
                }
                (Removed, Some(s)) => {
                    prop_assert_eq!(&s.uid, &e.uid.as_deref().map(str::to_owned), "{:?}", e);
                    self.view.remove(&id);
                }
                (_, known) => {
                    prop_assert!(false, "{:?} out of grammar (was {:?})", e, known);
                }
            }
            Ok(())
        }

        fn batch(&mut self, items: &[Item]) -> Result<(), TestCaseError> {
            for item in items {
                if let Item::Event(e) = item {
                    self.follow(e)?;
                }
            }
            prop_assert!(self.ready_next.is_none(), "{:?}", shorts(items));
            Ok(())
        }
    }

    struct Run {
        engine: BTreeMap<String, Inst>,
        uids: u64,
        cursor: u64,
        dial: Scripted,
        /// The session, or the next one while disconnected.
        tx: UnboundedSender<Obs>,
        connected: bool,
        missed: Vec<Obs>,
        drop_next: bool,
        dup_next: bool,
        consumer: Consumer,
        /// Each instance's `Created`, as sent.
        created: HashMap<String, Change<u64>>,
    }

    fn list(engine: &BTreeMap<String, Inst>) -> Vec<Obs> {
        engine
            .iter()
            .map(|(id, i)| {
                Ok(Observation::Listed(
                    Listed::new(id.as_str().into(), i.running)
                        .uid(Some(format!("u{}", i.uid).into()))
                        .labels(lookout_core::Labels::new())
                        .readiness(Some(i.readiness)),
                ))
            })
            .collect()
    }

    impl Run {
        /// The change an operation makes to the engine, if any.
        fn apply(&mut self, op: &Op) -> Option<Change<u64>> {
            let (id, kind, readiness) = match *op {
                Op::Create { instance: i, check } => {
                    let id = IDS[usize::from(i)];
                    if self.engine.contains_key(id) {
                        return None;
                    }
                    self.uids += 1;
                    let readiness = if is_container(i) {
                        container(check, Starting)
                    } else {
                        Readiness::replicas(0, 0, true)
                    };
                    let inst = Inst {
                        uid: self.uids,
                        running: false,
                        check,
                        readiness,
                    };
                    self.engine.insert(id.into(), inst);
                    (id, Created, Some(readiness))
                }
                Op::Start(i) | Op::Stop(i) => {
                    let start = matches!(op, Op::Start(_));
                    let id = IDS[usize::from(i)];
                    let inst = self.engine.get_mut(id)?;
                    if inst.running == start {
                        return None;
                    }
                    inst.running = start;
                    // The engine resets the health at a start, marks it
                    // unhealthy at a stop.
                    inst.readiness =
                        container(inst.check, if start { Starting } else { Unhealthy });
                    (
                        id,
                        if start { Started } else { Stopped },
                        Some(inst.readiness),
                    )
                }
                Op::Remove(i) => {
                    let id = IDS[usize::from(i)];
                    let inst = self.engine.remove(id)?;
                    let change = Change::new(id.into(), Removed, std::time::SystemTime::UNIX_EPOCH)
                        .uid(Some(format!("u{}", inst.uid).into()));
                    return Some(change);
                }
                Op::Health(i, h) => {
                    let id = IDS[usize::from(i)];
                    let inst = self.engine.get_mut(id)?;
                    if !inst.running || !inst.check {
                        return None;
                    }
                    let Readiness::Container { paused, .. } = inst.readiness else {
                        unreachable!("a container")
                    };
                    let health = [Starting, Healthy, Unhealthy][usize::from(h)];
                    inst.readiness = Readiness::container(health, paused);
                    let kind = if inst.readiness.is_ready() {
                        Ready
                    } else {
                        Unready
                    };
                    (id, kind, Some(inst.readiness))
                }
                Op::Pause {
                    instance: i,
                    paused: p,
                } => {
                    let id = IDS[usize::from(i)];
                    let inst = self.engine.get_mut(id)?;
                    if !inst.running {
                        return None;
                    }
                    let Readiness::Container { health, .. } = inst.readiness else {
                        unreachable!("a container")
                    };
                    inst.readiness = Readiness::container(health, p);
                    let kind = if inst.readiness.is_ready() {
                        Ready
                    } else {
                        Unready
                    };
                    (id, kind, Some(inst.readiness))
                }
                Op::Scale {
                    desired,
                    ready,
                    tells,
                } => {
                    let id = IDS[2];
                    let inst = self.engine.get_mut(id)?;
                    inst.running = desired > 0;
                    inst.readiness = Readiness::replicas(desired, ready, true);
                    let kind = if inst.running { Started } else { Stopped };
                    (id, kind, tells.then_some(inst.readiness))
                }
                _ => return None,
            };
            let uid = self.engine.get(id).map(|i| format!("u{}", i.uid).into());
            Some(
                Change::new(id.into(), kind, std::time::SystemTime::UNIX_EPOCH)
                    .uid(uid)
                    .readiness(readiness),
            )
        }

        fn send(&self, obs: Obs) {
            self.tx.send(obs).expect("the session is open");
        }

        async fn step(&mut self, w: &mut Watch<Scripted>, op: &Op) -> Result<(), TestCaseError> {
            match *op {
                Op::Drop => self.drop_next = true,
                Op::Dup => self.dup_next = true,
                Op::Poll(i) | Op::PollStale(i) if self.connected => {
                    let id = IDS[usize::from(i)];
                    let stale = matches!(op, Op::PollStale(_));
                    let (uid, readiness) = match (self.engine.get(id), stale) {
                        (Some(inst), false) => (format!("u{}", inst.uid), inst.readiness),
                        (_, true) => ("stale".into(), Readiness::replicas(1, 1, true)),
                        (None, false) => return Ok(()),
                    };
                    self.send(polled(id, Some(&uid), readiness));
                    let got = drain(w).await;
                    self.consumer.batch(&got)?;
                    prop_assert!(got.len() <= usize::from(!stale), "{:?}", shorts(&got));
                    for e in events(&got) {
                        prop_assert!(
                            e.origin == Origin::Resync && matches!(e.kind, Ready | Unready),
                            "{:?}",
                            e
                        );
                    }
                }
                Op::Poll(_) | Op::PollStale(_) => {}
                Op::Relist if self.connected => {
                    snapshot_of(&self.tx, list(&self.engine));
                    let got = drain(w).await;
                    self.snapshot_told(&got, 0)?;
                }
                Op::Relist => {}
                Op::ReplayCreate(i) if self.connected => {
                    let id = IDS[usize::from(i)];
                    let (Some(created), Some(inst)) = (self.created.get(id), self.engine.get(id))
                    else {
                        return Ok(());
                    };
                    let uid = format!("u{}", inst.uid);
                    if created.uid.as_deref() != Some(&*uid) {
                        return Ok(());
                    }
                    let known = self.consumer.view.get(id).map(|s| s.uid.clone());
                    self.send(Ok(Observation::Change(created.clone())));
                    let got = drain(w).await;
                    self.consumer.batch(&got)?;
                    if known == Some(Some(uid)) {
                        prop_assert!(got.is_empty(), "a replayed create: {:?}", shorts(&got));
                    }
                    // (One the consumer missed comes in, as a stopped one.)
                    for e in events(&got) {
                        prop_assert!(matches!(e.kind, Created | Removed), "{:?}", e);
                    }
                }
                Op::ReplayCreate(_) => {}
                Op::Disconnect(_) if self.connected => {
                    let next = self.dial.session();
                    drop(std::mem::replace(&mut self.tx, next));
                    self.connected = false;
                    let got = drain(w).await;
                    prop_assert!(
                        matches!(&got[..], [Item::Status(Status::Disconnected { .. })]),
                        "{:?}",
                        shorts(&got)
                    );
                }
                Op::Disconnect(replay) => self.redial(w, replay).await?,
                _ => {
                    let Some(mut change) = self.apply(op) else {
                        return Ok(());
                    };
                    self.cursor += 1;
                    change.cursor = Some(self.cursor);
                    change.at =
                        std::time::SystemTime::UNIX_EPOCH + Duration::from_secs(self.cursor);
                    if change.kind == Created {
                        self.created.insert(change.id.to_string(), change.clone());
                    }
                    if !self.connected {
                        self.missed.push(Ok(Observation::Change(change)));
                        return Ok(());
                    }
                    if std::mem::take(&mut self.drop_next) {
                        return Ok(());
                    }
                    if std::mem::take(&mut self.dup_next) {
                        self.send(Ok(Observation::Change(change.clone())));
                    }
                    self.send(Ok(Observation::Change(change)));
                    let got = drain(w).await;
                    self.consumer.batch(&got)?;
                    for item in &got {
                        let Item::Event(e) = item else {
                            prop_assert!(false, "a live change: {:?}", shorts(&got));
                            continue;
                        };
                        prop_assert_eq!(e.origin, Origin::Live);
                        prop_assert_eq!(
                            e.at,
                            std::time::SystemTime::UNIX_EPOCH + Duration::from_secs(self.cursor)
                        );
                    }
                }
            }
            Ok(())
        }

        /// The redial: the replay of `replay` halves of what was missed,
        /// then the snapshot.
        async fn redial(
            &mut self,
            w: &mut Watch<Scripted>,
            replay: u8,
        ) -> Result<(), TestCaseError> {
            let missed = std::mem::take(&mut self.missed);
            let replayed = missed.len() * usize::from(replay) / 2;
            for obs in missed.into_iter().take(replayed) {
                self.send(obs);
            }
            snapshot_of(&self.tx, list(&self.engine));
            self.connected = true;
            let got = until_connected(w).await;
            self.snapshot_told(&got, replayed)
        }

        /// What a snapshot told (after `replayed` live changes): the live
        /// events first, then the snapshot's, for just the instances where
        /// those left the consumer off the engine's state, and then the
        /// consumer sees the engine as it is.
        fn snapshot_told(&mut self, got: &[Item], replayed: usize) -> Result<(), TestCaseError> {
            let Some((Item::Status(Status::Connected { instances }), told)) = got.split_last()
            else {
                return Err(TestCaseError::fail(format!(
                    "no Connected: {:?}",
                    shorts(got)
                )));
            };
            prop_assert_eq!(*instances, self.engine.len());
            let live = told
                .iter()
                .take_while(|i| matches!(i, Item::Event(e) if e.origin == Origin::Live))
                .count();
            prop_assert!(replayed > 0 || live == 0, "{:?}", shorts(got));
            let (live, resync) = told.split_at(live);
            self.consumer.batch(live)?;
            let before = self.consumer.view.clone();
            let want = truth(&self.engine);
            for item in resync {
                let Item::Event(e) = item else {
                    prop_assert!(false, "a status in a snapshot: {:?}", shorts(got));
                    continue;
                };
                prop_assert_eq!(e.origin, Origin::Resync, "{:?}", shorts(got));
                prop_assert_ne!(
                    before.get(e.id.as_str()),
                    want.get(e.id.as_str()),
                    "told twice: {:?}",
                    shorts(got)
                );
            }
            self.consumer.batch(resync)?;
            prop_assert_eq!(&self.consumer.view, &want, "{:?}", shorts(got));
            Ok(())
        }
    }

    /// The engine's first state: per id absent, stopped, running but not
    /// ready, or running and ready.
    fn populate(init: [u8; 3]) -> BTreeMap<String, Inst> {
        let mut engine = BTreeMap::new();
        for (n, (id, what)) in IDS.iter().zip(init).enumerate() {
            if what == 0 {
                continue;
            }
            let running = what >= 3;
            let readiness = if n < 2 {
                let check = what != 2 && what != 5;
                let health = match what {
                    3 => Starting,
                    4 => Healthy,
                    _ => Unhealthy,
                };
                container(check, health)
            } else {
                Readiness::replicas(2, u32::from(what >= 4) + 1, true)
            };
            let inst = Inst {
                uid: 1000 + n as u64,
                running,
                check: what != 2 && what != 5,
                readiness,
            };
            engine.insert((*id).to_owned(), inst);
        }
        engine
    }

    fn check(init: [u8; 3], initial: bool, ops: &[Op]) -> Result<(), TestCaseError> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .expect("runtime");
        rt.block_on(async {
            let dial = Scripted::default();
            let tx = dial.session();
            let engine = populate(init);
            snapshot_of(&tx, list(&engine));
            let config = quick().initial(initial).resync_after_lag(None);
            let mut w = Watch::new(dial.clone(), config);
            let mut run = Run {
                engine,
                uids: 0,
                cursor: 0,
                dial,
                tx,
                connected: true,
                missed: Vec::new(),
                drop_next: false,
                dup_next: false,
                consumer: Consumer::default(),
                created: HashMap::new(),
            };
            let got = until_connected(&mut w).await;
            if initial {
                prop_assert!(
                    events(&got).iter().all(|e| e.origin == Origin::Initial),
                    "{:?}",
                    shorts(&got)
                );
                run.consumer.batch(&got)?;
                prop_assert_eq!(&run.consumer.view, &truth(&run.engine));
            } else {
                prop_assert_eq!(got.len(), 1, "a silent baseline: {:?}", shorts(&got));
                run.consumer.view = truth(&run.engine);
            }
            for op in ops {
                run.step(&mut w, op).await?;
            }
            // At the end, a redial that replays everything, and a relist.
            if !run.connected {
                run.redial(&mut w, 2).await?;
            }
            run.step(&mut w, &Op::Relist).await?;
            prop_assert!(drain(&mut w).await.is_empty());
            Ok(())
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]
        #[test]
        fn readiness_follows_the_grammar_and_the_engine(
            init in any::<[u8; 3]>().prop_map(|i| i.map(|x| x % 6)),
            initial in any::<bool>(),
            ops in proptest::collection::vec(op(), 0..60),
        ) {
            check(init, initial, &ops)?;
        }
    }
}
