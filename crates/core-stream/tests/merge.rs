//! The merge of many watches (`Merge`): paused tokio time against scripted
//! dials, one per source.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::{Instant, timeout};
use tokio_stream::{Stream, StreamExt};

use lookout_core::{
    EventKind, HubConfig, Item, Merge, SourceState, Sourced, Start, Status, Watch, WatchConfig,
};

mod support;
use support::*;

/// What sends a scripted session its items.
type Sender = tokio::sync::mpsc::UnboundedSender<Obs>;

/// The next merged item, within an hour of paused time.
async fn next(m: &mut Merge) -> Sourced {
    match timeout(Duration::from_secs(3600), m.next()).await {
        Ok(Some(item)) => item,
        Ok(None) => panic!("the merge ended"),
        Err(elapsed) => panic!("no item within an hour of (paused) time: {elapsed}"),
    }
}

/// `source: item` as a short line.
fn line(m: &Merge, s: &Sourced) -> String {
    format!("{}: {}", m.name(s.source), short(&s.item))
}

/// The next `n` merged items as lines.
async fn lines(m: &mut Merge, n: usize) -> Vec<String> {
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let s = next(m).await;
        out.push(line(m, &s));
    }
    out
}

/// Asserts that nothing is yielded for `d` of (paused) time.
async fn quiet(m: &mut Merge, d: Duration) {
    if let Ok(item) = timeout(d, m.next()).await {
        panic!("expected quiet, got {item:?}");
    }
}

fn watch(dial: &Scripted) -> Watch<Scripted> {
    Watch::new(dial.clone(), quick())
}

/// Counts the polls of a stream.
struct Counted<S> {
    inner: S,
    polls: Arc<AtomicUsize>,
}

impl<S: Stream + Unpin> Stream for Counted<S> {
    type Item = S::Item;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<S::Item>> {
        self.polls.fetch_add(1, Ordering::Relaxed);
        Pin::new(&mut self.inner).poll_next(cx)
    }
}

#[tokio::test(start_paused = true)]
async fn items_carry_their_source_and_one_id_on_two_sources_is_two_instances() {
    let (a, b) = (Scripted::default(), Scripted::default());
    let (ta, tb) = (a.session(), b.session());
    snapshot(&ta, &[("web", true)]);
    snapshot(&tb, &[("web", true)]);
    let mut m = Merge::new()
        .source("a", watch(&a))
        .and_then(|m| m.source("b", watch(&b)))
        .expect("two names");
    assert!(!m.all_connected());
    let mut first = lines(&mut m, 2).await;
    first.sort();
    assert_eq!(first, ["a: connected 1", "b: connected 1"]);
    assert!(m.all_connected());

    let _ = ta.send(change("web", EventKind::Stopped, 1));
    assert_eq!(lines(&mut m, 1).await, ["a: web stopped live"]);
    quiet(&mut m, Duration::from_secs(1)).await;
    // b's `web` is another instance: still running, so its stop is news too.
    let _ = tb.send(change("web", EventKind::Stopped, 1));
    assert_eq!(lines(&mut m, 1).await, ["b: web stopped live"]);
    // a's `web` stopped already: a repeat, swallowed by a's tracker only.
    let _ = ta.send(change("web", EventKind::Stopped, 2));
    let _ = tb.send(change("web", EventKind::Started, 2));
    assert_eq!(lines(&mut m, 1).await, ["b: web started live"]);
}

#[tokio::test(start_paused = true)]
async fn a_duplicate_name_is_refused() {
    let (a, b) = (Scripted::default(), Scripted::default());
    let err = Merge::new()
        .source("host", watch(&a))
        .and_then(|m| m.source("host", watch(&b)))
        .expect_err("a name given twice");
    assert_eq!(err.name(), "host");
    assert!(err.to_string().contains("`host` is given twice"), "{err}");
}

/// A source with 1000 changes ready does not hold up another's one: the
/// quiet source's event is among the first two, and then they alternate
/// while both have items.
#[tokio::test(start_paused = true)]
async fn a_firehose_does_not_hold_up_a_quiet_source() {
    let (mut m, _fire, tb) = firehose_and_calm().await;
    let _ = tb.send(change("y", EventKind::Started, 1));
    let _ = tb.send(change("y", EventKind::Stopped, 2));
    let got = lines(&mut m, 6).await;
    let calm: Vec<usize> = got
        .iter()
        .enumerate()
        .filter(|(_, l)| l.starts_with("calm"))
        .map(|(i, _)| i)
        .collect();
    assert_eq!(calm.len(), 2, "{got:?}");
    assert!(calm[0] <= 1 && calm[1] - calm[0] == 2, "{got:?}");
    // The rest of the firehose, in its order, nothing lost.
    let rest = lines(&mut m, 996).await;
    assert!(rest.iter().all(|l| l.starts_with("fire: x ")), "{rest:?}");
    quiet(&mut m, Duration::from_secs(1)).await;
}

/// Two sources, `fire` and `calm`, synced; `fire` with 1000 changes of `x`
/// ready. The merge, and each source's session (to send it more).
async fn firehose_and_calm() -> (Merge, Sender, Sender) {
    let (a, b) = (Scripted::default(), Scripted::default());
    let (ta, tb) = (a.session(), b.session());
    snapshot(&ta, &[("x", false)]);
    snapshot(&tb, &[("y", false)]);
    let mut m = Merge::new()
        .source("fire", watch(&a))
        .and_then(|m| m.source("calm", watch(&b)))
        .expect("two names");
    lines(&mut m, 2).await;
    for n in 0..1000 {
        let kind = if n % 2 == 0 {
            EventKind::Started
        } else {
            EventKind::Stopped
        };
        let _ = ta.send(change("x", kind, n + 1));
    }
    (m, ta, tb)
}

/// A quiet source's change that comes while a firehose is being read (the
/// merge on its busy path, polling the hot source without looking at the
/// marks) is still next but one; and again after it, each time.
#[tokio::test(start_paused = true)]
async fn a_change_that_comes_mid_firehose_waits_one_turn() {
    let (mut m, _fire, tb) = firehose_and_calm().await;
    let mut fire = 0;
    for round in 0..3 {
        // Well into the firehose: the busy path.
        for l in lines(&mut m, 50).await {
            assert!(l.starts_with("fire: x "), "round {round}: {l}");
            fire += 1;
        }
        let kind = if round % 2 == 0 {
            EventKind::Started
        } else {
            EventKind::Stopped
        };
        let _ = tb.send(change("y", kind, round + 1));
        let got = lines(&mut m, 2).await;
        assert!(
            got.iter().any(|l| l.starts_with("calm: y ")),
            "round {round}: the calm change waited more than one turn: {got:?}"
        );
        fire += got.iter().filter(|l| l.starts_with("fire")).count();
    }
    // Nothing of the firehose lost.
    let rest = lines(&mut m, 1000 - fire).await;
    assert!(rest.iter().all(|l| l.starts_with("fire: x ")), "{rest:?}");
    quiet(&mut m, Duration::from_secs(1)).await;
}

/// One source fails and redials under its own backoff; the other's events
/// keep coming meanwhile (no wait on the failed one's backoff), the health
/// names the failed one, and its relist's resync is its own.
#[tokio::test(start_paused = true)]
async fn a_failing_source_redials_alone() {
    let (a, b) = (Scripted::default(), Scripted::default());
    let (ta, tb) = (a.session(), b.session());
    snapshot(&ta, &[("gone", true), ("stays", true)]);
    snapshot(&tb, &[("gone", true)]);
    let mut m = Merge::new()
        .source("a", watch(&a))
        .and_then(|m| m.source("b", watch(&b)))
        .expect("two names");
    lines(&mut m, 2).await;

    // a's session ends; its next dial fails once, then lists without `gone`.
    a.fail("refused");
    let ta2 = a.session();
    drop(ta);
    let s = next(&mut m).await;
    assert_eq!(m.name(s.source), "a");
    assert_eq!(m.id("a"), Some(s.source));
    assert_eq!(s.source.index(), 0);
    assert!(
        matches!(s.item, Item::Status(Status::Disconnected { .. })),
        "{s:?}"
    );
    assert!(!m.all_connected());
    assert_eq!(
        m.sources().collect::<Vec<_>>(),
        [
            ("a", SourceState::Disconnected),
            ("b", SourceState::Connected)
        ]
    );
    // b's change comes at once, whatever a's backoff.
    let at = Instant::now();
    let _ = tb.send(change("gone", EventKind::Stopped, 1));
    assert_eq!(lines(&mut m, 1).await, ["b: gone stopped live"]);
    assert_eq!(at.elapsed(), Duration::ZERO);

    snapshot(&ta2, &[("stays", true)]);
    let got = lines(&mut m, 3).await;
    assert!(got[0].starts_with("a: disconnected"), "{got:?}");
    assert_eq!(got[1..], ["a: gone removed resync", "a: connected 1"]);
    assert!(m.all_connected());
    // b's `gone` is b's: still known to b (its removal is news).
    let _ = tb.send(change("gone", EventKind::Removed, 2));
    assert_eq!(lines(&mut m, 1).await, ["b: gone removed live"]);
}

/// Dropping the merge drops every source in whatever state it is: a dial
/// under way, a session, a backoff. Nothing stays open.
#[tokio::test(start_paused = true)]
async fn dropping_the_merge_closes_every_source() {
    let (dialing, streaming, backing) = (
        Scripted::default(),
        Scripted::default(),
        Scripted::default(),
    );
    dialing.hang();
    let ts = streaming.session();
    snapshot(&ts, &[("x", true)]);
    backing.fail("refused");
    let mut m = Merge::new()
        .source("dialing", watch(&dialing))
        .and_then(|m| m.source("streaming", watch(&streaming)))
        .and_then(|m| m.source("backing", watch(&backing)))
        .expect("three names");
    let mut got = lines(&mut m, 2).await;
    got.sort();
    assert!(got[0].starts_with("backing: disconnected"), "{got:?}");
    assert_eq!(got[1], "streaming: connected 1");
    assert_eq!(
        m.sources().map(|(_, s)| s).collect::<Vec<_>>(),
        [
            SourceState::Connecting,
            SourceState::Connected,
            SourceState::Disconnected
        ]
    );
    assert_eq!(dialing.alive() + streaming.alive(), 2, "a dial, a session");
    drop(m);
    assert_eq!(
        (dialing.alive(), streaming.alive(), backing.alive()),
        (0, 0, 0)
    );
}

/// 100 sources, one busy: the 99 quiet ones, once they said they had
/// nothing more (`Pending`, their wakers registered), are not polled again however many items the busy one
/// yields; a quiet one that gets a change is polled for it.
#[tokio::test(start_paused = true)]
async fn quiet_sources_are_not_polled() {
    let mut m = Merge::new();
    let mut senders = Vec::new();
    let mut polls = Vec::new();
    for i in 0..100 {
        let dial = Scripted::default();
        let tx = dial.session();
        snapshot(&tx, &[("x", false)]);
        senders.push(tx);
        let count = Arc::new(AtomicUsize::new(0));
        polls.push(Arc::clone(&count));
        let source = Counted {
            inner: Watch::new(dial, WatchConfig::default().resync_every(None)),
            polls: count,
        };
        m = m.source(format!("s{i}"), source).expect("a new name");
    }
    for _ in 0..100 {
        let s = next(&mut m).await;
        assert!(matches!(s.item, Item::Status(Status::Connected { .. })));
    }
    assert!(m.all_connected());
    // Each source is polled once more after its last item (it might have had
    // another), then sleeps.
    quiet(&mut m, Duration::from_secs(1)).await;
    let before: Vec<usize> = polls.iter().map(|p| p.load(Ordering::Relaxed)).collect();
    for n in 0..500 {
        let kind = if n % 2 == 0 {
            EventKind::Started
        } else {
            EventKind::Stopped
        };
        let _ = senders[0].send(change("x", kind, n + 1));
    }
    let got = lines(&mut m, 500).await;
    assert!(got.iter().all(|l| l.starts_with("s0: x ")));
    let after: Vec<usize> = polls.iter().map(|p| p.load(Ordering::Relaxed)).collect();
    assert!(
        after[0] - before[0] >= 500,
        "the busy one: {} polls",
        after[0] - before[0]
    );
    let quiet_polls: usize = (1..100).map(|i| after[i] - before[i]).sum();
    assert_eq!(quiet_polls, 0, "the quiet sources were polled");

    let _ = senders[57].send(change("x", EventKind::Started, 1));
    assert_eq!(lines(&mut m, 1).await, ["s57: x started live"]);
    let polled: Vec<usize> = (1..100)
        .filter(|&i| polls[i].load(Ordering::Relaxed) != after[i])
        .collect();
    assert_eq!(polled, [57]);
}

/// A merge of sources that all end ends; the states say so.
#[tokio::test(start_paused = true)]
async fn a_merge_ends_when_every_source_ended() {
    let items = |n: usize| {
        tokio_stream::iter((0..n).map(|i| Item::Status(Status::Connected { instances: i })))
    };
    let mut m = Merge::new()
        .source("one", items(1))
        .and_then(|m| m.source("two", items(2)))
        .expect("two names");
    let mut got = Vec::new();
    while let Some(s) = m.next().await {
        got.push(line(&m, &s));
    }
    got.sort();
    assert_eq!(
        got,
        ["one: connected 0", "two: connected 0", "two: connected 1"]
    );
    assert!(m.sources().all(|(_, s)| s == SourceState::Ended));
    assert!(Merge::new().next().await.is_none());
}

/// One hub per source, and a merge of their subscriptions: a subscription
/// that lags does so for its own source only. Source `a` (queue 4) moves 10
/// times while the merge is not read (another subscription of `a` drives
/// its hub); the merge then tells `a`'s lag, the difference for `a` alone
/// (resync), `a`'s status, and `b`'s items as they were, none lost.
#[tokio::test(start_paused = true)]
async fn a_lagging_subscription_in_a_merge_lags_for_its_source_only() {
    let (a, b) = (Scripted::default(), Scripted::default());
    let (ta, tb) = (a.session(), b.session());
    snapshot(&ta, &[("x", false), ("y", false)]);
    snapshot(&tb, &[("x", false)]);
    let hub_a = watch(&a).share_with(HubConfig::default().queue(4).metric_label("host", "a"));
    let hub_b = watch(&b).share_with(HubConfig::default().metric_label("host", "b"));
    let mut m = Merge::new()
        .source("a", hub_a.subscribe(Start::Baseline))
        .and_then(|m| m.source("b", hub_b.subscribe(Start::Baseline)))
        .expect("two names");
    let mut first = lines(&mut m, 2).await;
    first.sort();
    assert_eq!(first, ["a: connected 2", "b: connected 1"]);

    // `a` moves while only `driver` reads it; `b` once.
    let mut driver = hub_a.subscribe(Start::Baseline);
    assert_eq!(short(&next_item(&mut driver).await), "connected 2");
    for n in 0..10 {
        let kind = if n % 2 == 0 {
            EventKind::Started
        } else {
            EventKind::Stopped
        };
        let _ = ta.send(change("x", kind, n + 1));
    }
    let _ = ta.send(change("y", EventKind::Started, 11));
    for _ in 0..11 {
        next_item(&mut driver).await;
    }
    let _ = tb.send(change("x", EventKind::Started, 1));

    let got = lines(&mut m, 4).await;
    let (of_a, of_b): (Vec<&String>, Vec<&String>) = got.iter().partition(|l| l.starts_with("a: "));
    // x started and stopped 5 times: no net change; y started.
    assert_eq!(
        of_a,
        ["a: lagged 11", "a: y started resync", "a: connected 2"],
        "{got:?}"
    );
    assert_eq!(of_b, ["b: x started live"], "{got:?}");
    quiet(&mut m, Duration::from_secs(1)).await;
    // After its lag `a` reads on as before.
    let _ = ta.send(change("y", EventKind::Stopped, 12));
    assert_eq!(lines(&mut m, 1).await, ["a: y stopped live"]);
}

async fn next_item(s: &mut lookout_core::Subscription) -> Item {
    match timeout(Duration::from_secs(3600), s.next()).await {
        Ok(Some(item)) => item,
        Ok(None) => panic!("the subscription ended"),
        Err(elapsed) => panic!("no item within an hour of (paused) time: {elapsed}"),
    }
}
