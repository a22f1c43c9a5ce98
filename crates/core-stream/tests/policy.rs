//! Policy tests through the public API: paused tokio time against a scripted
//! dial. Deterministic and fast.
#![allow(
    clippy::unnecessary_wraps,
    clippy::too_many_lines,
    clippy::items_after_statements,
    clippy::match_wild_err_arm
)]

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::time::{Instant, timeout};
use tokio_stream::StreamExt;

use lookout_core::{
    Change, Error, EventKind, InstanceEvent, Item, LAG_RESYNC_SPACING, Listed, Observation, Origin,
    ReconnectPolicy, Status, Watch,
};

mod support;
use support::*;

async fn next(w: &mut Watch<Scripted>) -> Item {
    match timeout(Duration::from_secs(3600), w.next()).await {
        Ok(Some(item)) => item,
        Ok(None) => panic!("the watch ended"),
        Err(_) => panic!("no item within an hour of (paused) time"),
    }
}

async fn next_event(w: &mut Watch<Scripted>) -> InstanceEvent {
    match next(w).await {
        Item::Event(e) => e,
        Item::Status(s) => panic!("expected an event, got {s:?}"),
    }
}

async fn expect_connected(w: &mut Watch<Scripted>) -> usize {
    match next(w).await {
        Item::Status(Status::Connected { instances }) => instances,
        other => panic!("expected Connected, got {other:?}"),
    }
}

async fn expect_disconnected(w: &mut Watch<Scripted>) -> (Arc<Error>, u32, Duration) {
    match next(w).await {
        Item::Status(Status::Disconnected {
            error,
            attempt,
            retry_in,
            ..
        }) => (error, attempt, retry_in),
        other => panic!("expected Disconnected, got {other:?}"),
    }
}

/// Asserts that nothing is yielded for `d` of (paused) time.
async fn expect_quiet(w: &mut Watch<Scripted>, d: Duration) {
    if let Ok(item) = timeout(d, w.next()).await {
        panic!("expected nothing, got {item:?}");
    }
}

fn short(e: &InstanceEvent) -> (String, EventKind, Origin) {
    (e.id.to_string(), e.kind, e.origin)
}

#[tokio::test(start_paused = true)]
async fn reconnect() {
    let dial = Scripted::default();
    let s1 = dial.session();
    let s2 = dial.session();
    let mut w = Watch::new(dial.clone(), quick());

    snapshot(&s1, &[("a", true)]);
    assert_eq!(expect_connected(&mut w).await, 1);
    let _ = s1.send(change("b", EventKind::Created, 1));
    let _ = s1.send(change("a", EventKind::Stopped, 2));
    let _ = s1.send(Ok(Observation::Progress(Some(3))));
    assert_eq!(
        short(&next_event(&mut w).await),
        ("b".into(), EventKind::Created, Origin::Live)
    );
    assert_eq!(
        short(&next_event(&mut w).await),
        ("a".into(), EventKind::Stopped, Origin::Live)
    );
    drop(s1); // the engine closes the feed
    let (err, attempt, _) = expect_disconnected(&mut w).await;
    assert!(matches!(*err, Error::SessionEnded), "{err}");
    assert_eq!(attempt, 1);

    snapshot(&s2, &[("a", false), ("b", false)]);
    assert_eq!(expect_connected(&mut w).await, 2);
    let _ = s2.send(change("b", EventKind::Started, 4));
    assert_eq!(
        short(&next_event(&mut w).await),
        ("b".into(), EventKind::Started, Origin::Live)
    );
    assert_eq!(
        dial.dials(),
        [None, Some(3)],
        "redial resumes from the newest cursor"
    );
}

#[tokio::test(start_paused = true)]
async fn reconnects_indefinitely() {
    let dial = Scripted::default();
    for _ in 0..20 {
        dial.fail("connection refused");
    }
    let s = dial.session();
    let policy = ReconnectPolicy::default().seed(Some(42));
    let mut w = Watch::new(dial.clone(), quick().reconnect(policy.clone()));

    let mut delays = Vec::new();
    for expected in 1..=20 {
        let (err, attempt, retry_in) = expect_disconnected(&mut w).await;
        assert!(matches!(*err, Error::Dial(_)), "{err}");
        assert_eq!(attempt, expected);
        assert!(
            retry_in <= policy.bound(attempt),
            "jitter exceeds the bound"
        );
        delays.push((Instant::now(), retry_in));
    }
    assert!(
        delays
            .iter()
            .skip(6)
            .all(|d| d.1 <= Duration::from_secs(30)),
        "capped at 30 s"
    );
    let distinct: std::collections::HashSet<_> = delays.iter().map(|d| d.1).collect();
    assert!(distinct.len() > 15, "full jitter spreads the delays");

    snapshot(&s, &[("a", true)]);
    assert_eq!(expect_connected(&mut w).await, 1);
    // Each redial happened exactly one delay after its failure: one failure, one delay.
    let times = dial.dial_times();
    assert_eq!(times.len(), 21);
    for (i, (failed_at, delay)) in delays.iter().enumerate() {
        // Timers have millisecond resolution.
        let waited = times[i + 1].duration_since(*failed_at);
        assert!(
            waited >= *delay && waited <= *delay + Duration::from_millis(1),
            "dial {i}: waited {waited:?} for a delay of {delay:?}"
        );
    }
    let _ = s.send(change("a", EventKind::Stopped, 1));
    assert_eq!(next_event(&mut w).await.kind, EventKind::Stopped);

    // A session that dies quickly does not reset the count...
    drop(s);
    let (_, attempt, _) = expect_disconnected(&mut w).await;
    assert_eq!(attempt, 21);
    // ...one that was healthy for `reset_after` does.
    let s = dial.session();
    snapshot(&s, &[("a", false)]);
    expect_connected(&mut w).await;
    tokio::time::sleep(policy.get_reset_after()).await;
    drop(s);
    let (_, attempt, retry_in) = expect_disconnected(&mut w).await;
    assert_eq!(attempt, 1);
    assert!(retry_in <= policy.get_initial_delay());
}

#[tokio::test(start_paused = true)]
async fn no_jitter_delays_follow_the_exponential_and_the_cap() {
    let dial = Scripted::default();
    for _ in 0..9 {
        dial.fail("refused");
    }
    let policy = ReconnectPolicy::default().jitter(false);
    let mut w = Watch::new(dial.clone(), quick().reconnect(policy));
    let mut got = Vec::new();
    for _ in 0..9 {
        got.push(expect_disconnected(&mut w).await.2.as_millis());
    }
    assert_eq!(
        got,
        [500, 1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000]
    );
}

#[tokio::test(start_paused = true)]
async fn resync_emits_missed_transitions() {
    let dial = Scripted::default();
    let s1 = dial.session();
    let s2 = dial.session();
    let mut w = Watch::new(dial.clone(), quick());

    snapshot(&s1, &[("a", true), ("b", true), ("c", false)]);
    // The first snapshot is a silent baseline.
    assert_eq!(expect_connected(&mut w).await, 3);
    let _ = s1.send(change("d", EventKind::Created, 10));
    assert_eq!(next_event(&mut w).await.kind, EventKind::Created);
    let _ = s1.send(change("d", EventKind::Removed, 11));
    assert_eq!(next_event(&mut w).await.kind, EventKind::Removed);
    drop(s1);
    expect_disconnected(&mut w).await;

    snapshot(&s2, &[("a", false), ("c", true), ("d", true)]);
    let mut got = Vec::new();
    for _ in 0..5 {
        got.push(short(&next_event(&mut w).await));
    }
    use EventKind::{Created, Removed, Started, Stopped};
    let r = Origin::Resync;
    assert_eq!(
        got,
        [
            ("a".into(), Stopped, r),
            ("b".into(), Removed, r),
            ("c".into(), Started, r),
            ("d".into(), Created, r),
            ("d".into(), Started, r),
        ]
    );
    assert_eq!(expect_connected(&mut w).await, 3);
    // An inclusive `since` replays the last change: already applied, nothing to say.
    let _ = s2.send(change("d", EventKind::Started, 11));
    let _ = s2.send(change("a", EventKind::Stopped, 11));
    expect_quiet(&mut w, Duration::from_secs(1)).await;
    let _ = s2.send(change("a", EventKind::Started, 12));
    assert_eq!(
        short(&next_event(&mut w).await),
        ("a".into(), Started, Origin::Live)
    );
}

/// A session that resumed the feed from the cursor (a Kubernetes watch from
/// its `resourceVersion`) brings no snapshot: the known state stands, the
/// status says connected, and the changes go on. A first dial cannot resume.
#[tokio::test(start_paused = true)]
async fn a_resumed_session_needs_no_snapshot() {
    use EventKind::{Started, Stopped};
    let dial = Scripted::default();
    let s1 = dial.session();
    let s2 = dial.session();
    let mut w = Watch::new(dial.clone(), quick());
    // Resumed on a first dial is ignored: only the snapshot connects.
    let _ = s1.send(Ok(Observation::Resumed));
    snapshot(&s1, &[("a", true), ("b", false)]);
    assert_eq!(expect_connected(&mut w).await, 2);
    let _ = s1.send(change("a", Stopped, 5));
    assert_eq!(
        short(&next_event(&mut w).await),
        ("a".into(), Stopped, Origin::Live)
    );
    drop(s1);
    expect_disconnected(&mut w).await;

    let _ = s2.send(Ok(Observation::Resumed));
    assert_eq!(expect_connected(&mut w).await, 2, "the known state stands");
    assert_eq!(
        dial.dials(),
        [None, Some(5)],
        "resumed from the last change"
    );
    let _ = s2.send(change("b", Started, 6));
    assert_eq!(
        short(&next_event(&mut w).await),
        ("b".into(), Started, Origin::Live)
    );
}

/// A session that proved its replay of the time it could not see continues
/// the feed yields those changes before its snapshot: the consumer gets the
/// exact transitions (live, in the engine's order, with its times), then the
/// snapshot, which finds nothing left to tell, then what came after. The
/// past never follows the present, and nothing is told twice.
#[tokio::test(start_paused = true)]
async fn a_replayed_history_comes_before_the_snapshot() {
    use EventKind::{Created, Removed, Started, Stopped};
    let dial = Scripted::default();
    let s1 = dial.session();
    let s2 = dial.session();
    let s3 = dial.session();
    let mut w = Watch::new(dial.clone(), quick());

    snapshot(&s1, &[("a", true)]);
    assert_eq!(expect_connected(&mut w).await, 1);
    let _ = s1.send(change("a", Stopped, 5));
    assert_eq!(next_event(&mut w).await.kind, Stopped);
    drop(s1);
    expect_disconnected(&mut w).await;

    // While disconnected: `a` started and was removed, `a` came again (a new
    // incarnation), `b` was created. The session replays it, then lists.
    for (id, kind, t) in [
        ("a", Started, 6),
        ("a", Removed, 7),
        ("a", Created, 8),
        ("a", Started, 9),
        ("b", Created, 10),
    ] {
        let _ = s2.send(change(id, kind, t));
    }
    snapshot(&s2, &[("a", true), ("b", false)]);
    let _ = s2.send(change("b", Started, 11));
    let mut got = Vec::new();
    for _ in 0..5 {
        let e = next_event(&mut w).await;
        got.push((short(&e), e.at));
    }
    let at = |t| SystemTime::UNIX_EPOCH + Duration::from_secs(t);
    let l = Origin::Live;
    assert_eq!(
        got,
        [
            (("a".into(), Started, l), at(6)),
            (("a".into(), Removed, l), at(7)),
            (("a".into(), Created, l), at(8)),
            (("a".into(), Started, l), at(9)),
            (("b".into(), Created, l), at(10)),
        ]
    );
    // The snapshot agrees: no resync event, and only then what followed it.
    assert_eq!(expect_connected(&mut w).await, 2);
    assert_eq!(
        short(&next_event(&mut w).await),
        ("b".into(), Started, Origin::Live)
    );
    assert_eq!(dial.dials(), [None, Some(5)]);

    // A replay that stops short of the engine's state (a change that raced
    // the list): the snapshot tells the rest, once, before anything later.
    drop(s2);
    expect_disconnected(&mut w).await;
    let _ = s3.send(change("b", Stopped, 12));
    snapshot(&s3, &[("a", false), ("b", false)]);
    let _ = s3.send(change("a", Stopped, 13));
    let _ = s3.send(change("a", Started, 14));
    assert_eq!(
        short(&next_event(&mut w).await),
        ("b".into(), Stopped, Origin::Live)
    );
    assert_eq!(
        short(&next_event(&mut w).await),
        ("a".into(), Stopped, Origin::Resync)
    );
    assert_eq!(expect_connected(&mut w).await, 2);
    // A live change the snapshot already told is swallowed; a new one passes.
    assert_eq!(
        short(&next_event(&mut w).await),
        ("a".into(), Started, Origin::Live)
    );
    assert_eq!(dial.dials(), [None, Some(5), Some(11)]);
}

#[tokio::test(start_paused = true)]
async fn initial_snapshot_on_request() {
    let dial = Scripted::default();
    let s = dial.session();
    let mut w = Watch::new(dial.clone(), quick().initial(true));
    snapshot(&s, &[("b", false), ("a", true)]);
    let mut got = Vec::new();
    for _ in 0..3 {
        got.push(short(&next_event(&mut w).await));
    }
    let i = Origin::Initial;
    assert_eq!(
        got,
        [
            ("a".into(), EventKind::Created, i),
            ("a".into(), EventKind::Started, i),
            ("b".into(), EventKind::Created, i),
        ]
    );
    assert_eq!(expect_connected(&mut w).await, 2);
}

#[tokio::test(start_paused = true)]
async fn stall_is_detected() {
    let config = quick()
        .probe_after(Duration::from_secs(30))
        .probe_timeout(Duration::from_secs(5));
    let bound = config.get_probe_after() + config.get_probe_timeout();
    for plan in [ProbePlan::Fail, ProbePlan::Hang] {
        let dial = Scripted::default();
        let s1 = dial.session();
        let s2 = dial.session();
        dial.probe(ProbePlan::Ok);
        dial.probe(plan);
        let mut w = Watch::new(dial.clone(), config.clone());
        snapshot(&s1, &[("a", true)]);
        expect_connected(&mut w).await;
        // Quiet but alive: the first probe answers, the session stays.
        expect_quiet(&mut w, config.get_probe_after() + Duration::from_secs(1)).await;
        assert_eq!(dial.lock().probes_started, 1);
        assert!(!s1.is_closed());
        // Then the engine hangs: the next probe fails or never answers.
        let silent_since = Instant::now();
        let (err, _, _) = expect_disconnected(&mut w).await;
        let took = Instant::now().duration_since(silent_since);
        assert!(took <= bound, "stall noticed after {took:?} > {bound:?}");
        match plan {
            ProbePlan::Fail => assert!(matches!(*err, Error::ProbeFailed { .. }), "{err}"),
            _ => assert!(matches!(*err, Error::ProbeTimeout { .. }), "{err}"),
        }
        assert!(s1.is_closed(), "the stalled session is dropped");
        snapshot(&s2, &[("a", false)]);
        assert_eq!(next_event(&mut w).await.kind, EventKind::Stopped);
        assert_eq!(dial.dials().len(), 2);
    }
}

#[tokio::test(start_paused = true)]
async fn dial_timeout_is_a_failure() {
    let dial = Scripted::default();
    dial.hang();
    let s = dial.session();
    let config = quick().dial_timeout(Duration::from_secs(10));
    let mut w = Watch::new(dial.clone(), config);
    let (err, attempt, _) = expect_disconnected(&mut w).await;
    assert!(matches!(*err, Error::DialTimeout(_)), "{err}");
    assert_eq!(attempt, 1);
    assert_eq!(dial.alive(), 0, "the hung dial was dropped");
    snapshot(&s, &[]);
    assert_eq!(expect_connected(&mut w).await, 0);
}

#[tokio::test(start_paused = true)]
async fn session_errors_and_periodic_resync() {
    let dial = Scripted::default();
    let s1 = dial.session();
    let s2 = dial.session();
    let s3 = dial.session();
    let config = quick().resync_every(Some(Duration::from_secs(300)));
    let mut w = Watch::new(dial.clone(), config);
    snapshot(&s1, &[("a", true)]);
    expect_connected(&mut w).await;
    let _ = s1.send(change("a", EventKind::Stopped, 5));
    next_event(&mut w).await;
    let _ = s1.send(Err("connection reset by peer".into()));
    let (err, _, _) = expect_disconnected(&mut w).await;
    assert!(matches!(*err, Error::Session(_)), "{err}");
    snapshot(&s2, &[("a", false)]);
    expect_connected(&mut w).await;
    let synced = Instant::now();
    // Periodic resync: a redial from the cursor, without a Disconnected status.
    snapshot(&s3, &[("a", true)]);
    let e = next_event(&mut w).await;
    assert_eq!((e.kind, e.origin), (EventKind::Started, Origin::Resync));
    assert_eq!(
        Instant::now().duration_since(synced),
        Duration::from_secs(300)
    );
    assert!(s2.is_closed());
    assert_eq!(dial.dials(), [None, Some(5), Some(5)]);
}

/// A consumer that leaves the stream unpolled past `resync_after_lag` gets
/// the backlog that is still there, then a relist (the engine may have
/// dropped events meanwhile); one that waits on the stream, or comes back
/// quickly, causes none; a lag soon after a snapshot waits out the spacing.
#[tokio::test(start_paused = true)]
async fn a_lagging_consumer_gets_a_relist() {
    let dial = Scripted::default();
    let s1 = dial.session();
    let s2 = dial.session();
    let s3 = dial.session();
    let mut w = Watch::new(dial.clone(), quick());
    snapshot(&s1, &[("a", true)]);
    expect_connected(&mut w).await;
    let synced = Instant::now();
    // Waiting on the stream is no lag, however long.
    expect_quiet(&mut w, Duration::from_secs(60)).await;
    let _ = s1.send(change("a", EventKind::Stopped, 5));
    next_event(&mut w).await;
    // Back within the bound: no relist.
    tokio::time::sleep(Duration::from_millis(1900)).await;
    let _ = s1.send(change("a", EventKind::Started, 6));
    next_event(&mut w).await;
    expect_quiet(&mut w, Duration::from_secs(30)).await;
    assert_eq!(dial.dials(), [None]);

    // Unpolled for 3 s: the engine queued one event and dropped another
    // (`b` was created and started; only the relist can tell).
    let _ = s1.send(change("a", EventKind::Stopped, 7));
    next_event(&mut w).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let _ = s1.send(change("a", EventKind::Started, 8));
    snapshot(&s2, &[("a", true), ("b", true)]);
    let e = next_event(&mut w).await;
    assert_eq!(short(&e), ("a".into(), EventKind::Started, Origin::Live));
    let resync: Vec<_> = [next_event(&mut w).await, next_event(&mut w).await]
        .iter()
        .map(short)
        .collect();
    assert_eq!(
        resync,
        [
            ("b".into(), EventKind::Created, Origin::Resync),
            ("b".into(), EventKind::Started, Origin::Resync)
        ]
    );
    expect_connected(&mut w).await;
    assert!(s1.is_closed());
    assert_eq!(dial.dials(), [None, Some(8)]);
    assert!(Instant::now().duration_since(synced) > LAG_RESYNC_SPACING);

    // A lag right after that snapshot: the relist waits for the spacing.
    let relisted = Instant::now();
    let _ = s2.send(change("b", EventKind::Stopped, 9));
    next_event(&mut w).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    snapshot(&s3, &[("a", true), ("b", false)]);
    expect_connected(&mut w).await;
    let times = dial.dial_times();
    assert_eq!(times.len(), 3);
    assert_eq!(times[2].duration_since(relisted), LAG_RESYNC_SPACING);
    assert_eq!(dial.dials(), [None, Some(8), Some(9)]);

    // Turned off: no relist however long the lag.
    let dial = Scripted::default();
    let s1 = dial.session();
    let mut w = Watch::new(dial.clone(), quick().resync_after_lag(None));
    snapshot(&s1, &[("a", true)]);
    expect_connected(&mut w).await;
    tokio::time::sleep(Duration::from_secs(60)).await;
    let _ = s1.send(change("a", EventKind::Stopped, 5));
    next_event(&mut w).await;
    tokio::time::sleep(Duration::from_secs(60)).await;
    expect_quiet(&mut w, Duration::from_secs(60)).await;
    assert_eq!(dial.dials(), [None]);
}

/// Which state the consumer abandons the watch in.
#[derive(Clone, Copy, Debug)]
enum Abandon {
    Dialing,
    Listing,
    Streaming,
    BackingOff,
    Probing,
}

#[test]
fn exits_when_consumer_gone() {
    for state in [
        Abandon::Dialing,
        Abandon::Listing,
        Abandon::Streaming,
        Abandon::BackingOff,
        Abandon::Probing,
    ] {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .expect("runtime");
        let dial = Scripted::default();
        let session = rt.block_on(async {
            let mut w = Watch::new(dial.clone(), quick());
            let session = match state {
                Abandon::Dialing => {
                    dial.hang();
                    expect_quiet(&mut w, Duration::from_secs(1)).await;
                    None
                }
                Abandon::BackingOff => {
                    dial.fail("refused");
                    expect_disconnected(&mut w).await;
                    None
                }
                Abandon::Listing | Abandon::Streaming | Abandon::Probing => {
                    let s = dial.session();
                    let _ = s.send(Ok(Observation::ResyncBegin));
                    let _ = s.send(listed("a", true));
                    if !matches!(state, Abandon::Listing) {
                        let _ = s.send(Ok(Observation::ResyncDone));
                        expect_connected(&mut w).await;
                    }
                    if matches!(state, Abandon::Probing) {
                        dial.probe(ProbePlan::Hang);
                        expect_quiet(&mut w, Duration::from_secs(31)).await;
                        assert_eq!(dial.lock().probes_started, 1);
                    } else {
                        expect_quiet(&mut w, Duration::from_secs(1)).await;
                    }
                    // The consumer stops polling while the engine keeps talking.
                    for i in 0..100 {
                        let kind = if i % 2 == 0 {
                            EventKind::Stopped
                        } else {
                            EventKind::Started
                        };
                        let _ = s.send(change("a", kind, i));
                    }
                    Some(s)
                }
            };
            if !matches!(state, Abandon::BackingOff) {
                assert!(
                    dial.alive() > 0,
                    "{state:?}: the double handed something out"
                );
            }
            drop(w);
            session
        });
        assert_eq!(
            dial.alive(),
            0,
            "{state:?}: everything dropped with the stream"
        );
        if let Some(s) = session {
            assert!(s.is_closed(), "{state:?}: the session saw its drop");
        }
        assert_eq!(rt.metrics().num_alive_tasks(), 0, "{state:?}");
    }
}

// ---------------------------------------------------------------------------
// Property: any interleaving of live changes, disconnects, relists and replays.

mod prop {
    use super::*;
    use proptest::prelude::*;

    #[derive(Clone, Debug)]
    enum Op {
        Create(u8),
        Start(u8),
        Stop(u8),
        Remove(u8),
        /// The engine drops the next change (slow reader).
        Drop,
        /// The connection breaks; changes until the redial are not seen.
        Disconnect,
        /// The session relists in place (as after 410 Gone).
        Relist,
        /// The session replays the last change it sent (inclusive `since`).
        Replay,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0u8..4).prop_map(Op::Create),
            (0u8..4).prop_map(Op::Start),
            (0u8..4).prop_map(Op::Stop),
            (0u8..4).prop_map(Op::Remove),
            Just(Op::Drop),
            Just(Op::Disconnect),
            Just(Op::Relist),
            Just(Op::Replay),
        ]
    }

    #[derive(Clone, Copy, Debug, PartialEq)]
    struct Inst {
        running: bool,
        uid: u64,
    }

    fn list(engine: &BTreeMap<String, Inst>, out: &mut Vec<Obs>) {
        out.push(Ok(Observation::ResyncBegin));
        for (id, i) in engine {
            out.push(Ok(Observation::Listed(
                Listed::new(id.as_str().into(), i.running)
                    .uid(Some(i.uid.to_string().into()))
                    .labels(lookout_core::Labels::new()),
            )));
        }
        out.push(Ok(Observation::ResyncDone));
    }

    /// Plays the ops against a model engine; returns the sessions (each a list of
    /// observations), the engine's final state and how many snapshots were sent.
    fn play(ops: &[Op]) -> (Vec<Vec<Obs>>, BTreeMap<String, Inst>, usize) {
        let mut engine: BTreeMap<String, Inst> = BTreeMap::new();
        let mut sessions: Vec<Vec<Obs>> = Vec::new();
        let mut current = Vec::new();
        list(&engine, &mut current);
        let mut snapshots = 1;
        let mut connected = true;
        let mut drop_next = false;
        let mut last: Option<Change<u64>> = None;
        // Changes made while disconnected: the redial's `since` replays them
        // after the snapshot, as dockerd does from its buffer.
        let mut missed: Vec<Change<u64>> = Vec::new();
        let mut cursor = 0u64;
        let mut uids = 0u64;
        let reconnect = |engine: &BTreeMap<String, Inst>,
                         current: &mut Vec<Obs>,
                         last: &mut Option<Change<u64>>,
                         missed: &mut Vec<Change<u64>>| {
            list(engine, current);
            // Inclusive `since`: the last change seen comes again, then the missed ones.
            for c in last.iter().cloned().chain(missed.iter().cloned()) {
                current.push(Ok(Observation::Change(c)));
            }
            if let Some(c) = missed.drain(..).next_back() {
                *last = Some(c);
            }
        };
        for op in ops {
            let (id, kind) = match op {
                Op::Create(i) => (format!("i{i}"), EventKind::Created),
                Op::Start(i) => (format!("i{i}"), EventKind::Started),
                Op::Stop(i) => (format!("i{i}"), EventKind::Stopped),
                Op::Remove(i) => (format!("i{i}"), EventKind::Removed),
                Op::Drop => {
                    drop_next = true;
                    continue;
                }
                Op::Disconnect => {
                    if connected {
                        sessions.push(std::mem::take(&mut current));
                        connected = false;
                    } else {
                        reconnect(&engine, &mut current, &mut last, &mut missed);
                        snapshots += 1;
                        connected = true;
                    }
                    continue;
                }
                Op::Relist => {
                    if connected {
                        list(&engine, &mut current);
                        snapshots += 1;
                    }
                    continue;
                }
                Op::Replay => {
                    if let (true, Some(c)) = (connected, &last) {
                        current.push(Ok(Observation::Change(c.clone())));
                    }
                    continue;
                }
            };
            // Apply to the engine; invalid operations do nothing, like a real engine.
            let uid = match (kind, engine.get_mut(&id)) {
                (EventKind::Created, None) => {
                    uids += 1;
                    engine.insert(
                        id.clone(),
                        Inst {
                            running: false,
                            uid: uids,
                        },
                    );
                    uids
                }
                (EventKind::Started, Some(i)) if !i.running => {
                    i.running = true;
                    i.uid
                }
                (EventKind::Stopped, Some(i)) if i.running => {
                    i.running = false;
                    i.uid
                }
                (EventKind::Removed, Some(i)) => {
                    let uid = i.uid;
                    engine.remove(&id);
                    uid
                }
                _ => continue,
            };
            cursor += 1;
            let change = Change::new(id.as_str().into(), kind, SystemTime::UNIX_EPOCH)
                .uid(Some(uid.to_string().into()))
                .cursor(Some(cursor));
            if !connected {
                missed.push(change);
                continue;
            }
            if std::mem::take(&mut drop_next) {
                continue;
            }
            current.push(Ok(Observation::Change(change.clone())));
            last = Some(change);
        }
        if !connected {
            reconnect(&engine, &mut current, &mut last, &mut missed);
            snapshots += 1;
        }
        // A final reconnect makes everything visible.
        sessions.push(current);
        let mut fin = Vec::new();
        list(&engine, &mut fin);
        snapshots += 1;
        sessions.push(fin);
        (sessions, engine, snapshots)
    }

    fn check(ops: &[Op]) -> Result<(), TestCaseError> {
        let (sessions, engine, snapshots) = play(ops);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .expect("runtime");
        let events = rt.block_on(async {
            let dial = Scripted::default();
            let n = sessions.len();
            let mut senders = Vec::new();
            for obs in sessions {
                let tx = dial.session();
                for o in obs {
                    let _ = tx.send(o);
                }
                senders.push(tx);
            }
            let mut w = Watch::new(dial.clone(), quick().initial(true));
            let mut events = Vec::new();
            let mut connected = 0;
            // Close all sessions but the last: each ends after its script.
            for tx in senders.drain(..n - 1) {
                drop(tx);
            }
            while connected < snapshots {
                match next(&mut w).await {
                    Item::Event(e) => events.push(e),
                    Item::Status(Status::Connected { .. }) => connected += 1,
                    Item::Status(status) => {
                        assert!(
                            !matches!(status, Status::Lagged { .. }),
                            "a Watch never lags"
                        );
                    }
                }
            }
            events
        });
        // Replay the emitted transitions as a consumer would.
        let mut seen: BTreeMap<String, bool> = BTreeMap::new();
        let mut last: HashMap<String, EventKind> = HashMap::new();
        for e in &events {
            let id = e.id.to_string();
            prop_assert_ne!(
                last.get(&id),
                Some(&e.kind),
                "consecutive duplicate {:?}",
                e
            );
            last.insert(id.clone(), e.kind);
            match e.kind {
                EventKind::Created => {
                    prop_assert!(!seen.contains_key(&id), "created twice {:?}", e);
                    seen.insert(id, false);
                }
                EventKind::Started => {
                    prop_assert_eq!(seen.insert(id, true), Some(false), "bad start {:?}", e);
                }
                EventKind::Stopped => {
                    prop_assert_eq!(seen.insert(id, false), Some(true), "bad stop {:?}", e);
                }
                EventKind::Removed => {
                    prop_assert!(seen.remove(&id).is_some(), "bad remove {:?}", e);
                }
                _ => prop_assert!(false, "no readiness is watched here: {:?}", e),
            }
        }
        let want: BTreeMap<String, bool> =
            engine.iter().map(|(k, v)| (k.clone(), v.running)).collect();
        prop_assert_eq!(seen, want);
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]
        #[test]
        fn transitions_reproduce_the_engine_state(ops in proptest::collection::vec(op(), 0..60)) {
            check(&ops)?;
        }
    }
}
