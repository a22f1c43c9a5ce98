//! What the public API cannot show: the hub's memory stays bounded.

use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, SystemTime};

use tokio_stream::{Stream, StreamExt};

use super::{HubConfig, Start};
use crate::{
    Change, Dial, DialFuture, EventKind, Listed, Observation, Session, Watch, WatchConfig,
};

/// One session: a snapshot of `instances` running instances, then `changes`
/// stops and starts among them, then silence.
struct Churn {
    instances: usize,
    changes: u64,
}

impl Dial for Churn {
    type Cursor = u64;

    fn dial(&mut self, _resume: Option<&u64>) -> DialFuture<u64> {
        let (instances, changes) = (self.instances, self.changes);
        let id = move |n: u64| format!("i{}", n % instances as u64);
        let snapshot = std::iter::once(Observation::ResyncBegin)
            .chain((0..instances as u64).map(move |n| {
                Observation::Listed(Listed {
                    id: id(n).into(),
                    running: true,
                    uid: None,
                    labels: crate::Labels::new(),
                    readiness: None,
                    reason: None,
                })
            }))
            .chain(std::iter::once(Observation::ResyncDone));
        let churn = (0..changes).map(move |n| {
            // Each instance stops, then starts: every change is a transition.
            let round = n / instances as u64;
            let kind = if round.is_multiple_of(2) {
                EventKind::Stopped
            } else {
                EventKind::Started
            };
            Observation::Change(Change {
                id: id(n).into(),
                kind,
                uid: None,
                labels: None,
                at: SystemTime::UNIX_EPOCH + Duration::from_nanos(n),
                cursor: Some(n),
                readiness: None,
                reason: None,
            })
        });
        let session =
            tokio_stream::iter(snapshot.chain(churn).map(Ok)).chain(tokio_stream::pending());
        Box::pin(async move { Ok(Box::pin(session) as Session<u64>) })
    }
}

#[test]
fn a_stalled_subscription_costs_the_instances_not_the_events() {
    const CHANGES: u64 = 1_000_000;
    const QUEUE: usize = 256;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("runtime");
    rt.block_on(async {
        let watch = Watch::new(
            Churn {
                instances: 10,
                changes: CHANGES,
            },
            WatchConfig::default()
                .resync_every(None)
                .resync_after_lag(None),
        );
        let hub = watch.share_with(HubConfig::default().queue(QUEUE));
        let mut stalled = hub.subscribe(Start::Initial);
        let mut polled = hub.subscribe(Start::Baseline);
        let mut cx = Context::from_waker(Waker::noop());
        let _ = std::pin::Pin::new(&mut stalled).poll_next(&mut cx);
        let mut events = 0u64;
        let mut held = None;
        while events < CHANGES {
            let Some(item) = tokio::time::timeout(Duration::from_secs(1), polled.next())
                .await
                .expect("the churn flows")
            else {
                panic!("ended");
            };
            if !matches!(item, crate::Item::Event(_)) {
                continue;
            }
            events += 1;
            if events.is_multiple_of(10_000) {
                let ring = hub.state.lock();
                assert!(ring.queued() <= QUEUE, "the ring is bounded");
                assert_eq!(ring.present().len(), 10);
                let stalled_reader = ring.reader(stalled.reading.slot).expect("subscribed");
                let lagged = stalled_reader.lagged.as_ref().expect("it lagged");
                assert!(
                    lagged.seen.len() <= 10,
                    "it holds one state, of the instances"
                );
                // The same state all along: nothing accrues for it.
                let seen = Arc::as_ptr(&lagged.seen);
                assert_eq!(*held.get_or_insert(seen), seen);
                assert!(stalled.reading.local.len() <= 64);
            }
        }
        // Back, it first gets what it had taken from the hub before it
        // stalled (one read's batch), then the lag and the net difference
        // (an even number of rounds: everything runs), then the status.
        let mut told = Vec::new();
        while let Poll::Ready(Some(item)) = std::pin::Pin::new(&mut stalled).poll_next(&mut cx) {
            told.push(item);
        }
        let lag = told
            .iter()
            .position(|i| matches!(i, crate::Item::Status(crate::Status::Lagged { .. })))
            .expect("lagged");
        assert!(lag <= 64, "{told:?}");
        let mut running = std::collections::BTreeMap::new();
        for (n, item) in told.iter().enumerate() {
            match item {
                crate::Item::Event(e) => {
                    assert!(n < lag || e.origin == crate::Origin::Resync, "{e:?}");
                    running.insert(e.id.to_string(), e.kind == EventKind::Started);
                }
                crate::Item::Status(crate::Status::Connected { instances }) => {
                    assert!(n < lag || n == told.len() - 1, "{told:?}");
                    assert_eq!(*instances, 10);
                }
                crate::Item::Status(s) => assert_eq!(n, lag, "{s:?}"),
            }
        }
        assert_eq!(running.len(), 10);
        assert!(running.values().all(|r| *r), "{running:?}");
    });
}

/// What a [`Fed`] session has not yet given, and who waits for it.
type Feed = (std::collections::VecDeque<Observation<u64>>, Option<Waker>);

/// A session fed by the test, counting its polls.
#[derive(Clone, Default)]
struct Fed {
    queue: Arc<std::sync::Mutex<Feed>>,
    polls: Arc<std::sync::atomic::AtomicUsize>,
}

impl Fed {
    fn push(&self, o: Observation<u64>) {
        let waker = {
            let mut q = self.queue.lock().expect("the feed");
            q.0.push_back(o);
            q.1.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }

    fn polls(&self) -> usize {
        self.polls.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl Stream for Fed {
    type Item = Result<Observation<u64>, crate::BoxError>;

    fn poll_next(self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.polls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let mut q = self.queue.lock().expect("the feed");
        if let Some(o) = q.0.pop_front() {
            Poll::Ready(Some(Ok(o)))
        } else {
            q.1 = Some(cx.waker().clone());
            Poll::Pending
        }
    }
}

impl Dial for Fed {
    type Cursor = u64;

    fn dial(&mut self, _resume: Option<&u64>) -> DialFuture<u64> {
        let session = self.clone();
        Box::pin(async move { Ok(Box::pin(session) as Session<u64>) })
    }
}

/// Of many subscriptions woken by one event, one drives the upstream: the
/// others read what it pushed, and none polls an upstream that has not woken.
#[tokio::test(start_paused = true)]
async fn one_event_is_one_drive_not_one_per_subscription() {
    const SUBSCRIPTIONS: usize = 100;
    let fed = Fed::default();
    fed.push(Observation::ResyncBegin);
    fed.push(Observation::Listed(Listed {
        id: "a".into(),
        running: true,
        uid: None,
        labels: crate::Labels::new(),
        readiness: None,
        reason: None,
    }));
    fed.push(Observation::ResyncDone);
    let hub = Watch::new(fed.clone(), WatchConfig::default().resync_every(None)).share();
    let mut subs: Vec<_> = (0..SUBSCRIPTIONS)
        .map(|_| hub.subscribe(Start::Baseline))
        .collect();
    let mut cx = Context::from_waker(Waker::noop());
    // Each caught up (the connected status), then waiting.
    let first = tokio::time::timeout(Duration::from_secs(5), subs[0].next()).await;
    assert!(
        matches!(first, Ok(Some(crate::Item::Status(_)))),
        "{first:?}"
    );
    for s in &mut subs {
        while let Poll::Ready(Some(_)) = std::pin::Pin::new(&mut *s).poll_next(&mut cx) {}
    }
    let before = fed.polls();
    fed.push(Observation::Change(Change {
        id: "a".into(),
        kind: EventKind::Stopped,
        uid: None,
        labels: None,
        at: SystemTime::UNIX_EPOCH,
        cursor: Some(1),
        readiness: None,
        reason: None,
    }));
    for s in &mut subs {
        let item = std::pin::Pin::new(&mut *s).poll_next(&mut cx);
        assert!(
            matches!(&item, Poll::Ready(Some(crate::Item::Event(e))) if e.kind == EventKind::Stopped),
            "{item:?}"
        );
        assert!(std::pin::Pin::new(&mut *s).poll_next(&mut cx).is_pending());
    }
    let polls = fed.polls() - before;
    // The event, the upstream's Pending after it, and one look once it
    // had given: not one (or two) per subscription.
    assert!(polls <= 4, "{polls} polls of the upstream for one event");
}

#[test]
fn the_hub_tells_the_queue_it_was_shared_with() {
    let churn = || Churn {
        instances: 1,
        changes: 0,
    };
    let hub = Watch::new(churn(), WatchConfig::default()).share_with(HubConfig::default().queue(7));
    assert_eq!(hub.queue(), 7);
    assert_eq!(
        Watch::new(churn(), WatchConfig::default()).share().queue(),
        1024
    );
    let hub = Watch::new(churn(), WatchConfig::default()).share_with(HubConfig::default().queue(0));
    assert_eq!(hub.queue(), 1, "at least 1");
}
