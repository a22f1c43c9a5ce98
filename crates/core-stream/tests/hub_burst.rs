//! The shared hub against a burst of upstream items larger than its queue
//! (issue #13): a subscription that is polled all along, and alone, is never
//! behind, so it must get every item, not `Lagged` and a difference.
//!
//! `HubConfig::queue` is documented as "how many items a subscription may be
//! behind before it lags". A drive of the upstream once took up to 256 items
//! at once (`DRIVE_BATCH` in `src/hub.rs`) into a ring of `queue` items, so
//! a burst of more than `queue` ready items evicted items that the very
//! subscription driving had not read yet; a drive now takes no more than the
//! ring holds.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::SystemTime;

use lookout_core::{
    BoxError, Change, Dial, DialFuture, EventKind, HubConfig, Item, Observation, Origin, Start,
    Status, Watch, WatchConfig,
};
use tokio_stream::StreamExt;

type Obs = Result<Observation<u64>, BoxError>;

/// Always ready, as `futures::stream::iter` (`tokio_stream::iter` yields to
/// the runtime every 32 items, which would cap the burst by accident).
struct Ready<I>(I);

impl<I: Iterator + Unpin> tokio_stream::Stream for Ready<I> {
    type Item = I::Item;
    fn poll_next(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Option<I::Item>> {
        Poll::Ready(self.0.next())
    }
}

/// One session: an empty snapshot, then `changes` creations all ready at
/// once (a burst, as a busy engine's socket buffer delivers it), then
/// nothing.
struct Burst(Option<usize>);

impl Dial for Burst {
    type Cursor = u64;
    fn dial(&mut self, _resume: Option<&u64>) -> DialFuture<u64> {
        let changes = self.0.take();
        Box::pin(async move {
            let Some(changes) = changes else {
                return std::future::pending().await;
            };
            let at = SystemTime::now();
            let mut items: Vec<Obs> =
                vec![Ok(Observation::ResyncBegin), Ok(Observation::ResyncDone)];
            items.extend((0..changes).map(|n| {
                Ok(Observation::Change(
                    Change::new(format!("c-{n}").into(), EventKind::Created, at)
                        .cursor(Some(n as u64)),
                ))
            }));
            Ok(
                Box::pin(Ready(items.into_iter()).chain(tokio_stream::pending()))
                    as lookout_core::Session<u64>,
            )
        })
    }
}

async fn sole_subscription_gets_a_burst(queue: usize, changes: usize) {
    let hub = Watch::new(Burst(Some(changes)), WatchConfig::default())
        .share_with(HubConfig::default().queue(queue));
    let mut sub = hub.subscribe(Start::Baseline);
    let mut got = Vec::new();
    while got.len() < changes + 1 {
        let item = tokio::time::timeout(std::time::Duration::from_secs(5), sub.next())
            .await
            .expect("the burst arrives")
            .expect("never ends");
        got.push(item);
    }
    let lagged: Vec<&Item> = got
        .iter()
        .filter(|i| matches!(i, Item::Status(Status::Lagged { .. })))
        .collect();
    assert!(
        lagged.is_empty(),
        "a sole subscription polled all along lagged on a burst of {changes} items \
         with queue({queue}): {lagged:?}"
    );
    assert!(matches!(
        got[0],
        Item::Status(Status::Connected { instances: 0 })
    ));
    for (n, item) in got[1..].iter().enumerate() {
        assert!(
            matches!(item, Item::Event(e) if e.id.as_str() == format!("c-{n}")
                && e.kind == EventKind::Created && e.origin == Origin::Live),
            "item {n}: {item:?}"
        );
    }
}

/// The queue of the e2e test's small-queue variant, and a burst of 10.
#[tokio::test]
async fn a_polled_subscription_does_not_lag_on_a_burst_larger_than_a_small_queue() {
    sole_subscription_gets_a_burst(4, 10).await;
}

/// Below the drive's batch of 256: queue(100), a burst of 200.
#[tokio::test]
async fn a_polled_subscription_does_not_lag_on_a_burst_below_the_drive_batch() {
    sole_subscription_gets_a_burst(100, 200).await;
}

/// The default queue is larger than a drive's batch: no lag.
#[tokio::test]
async fn a_polled_subscription_does_not_lag_on_a_burst_with_the_default_queue() {
    sole_subscription_gets_a_burst(1024, 5000).await;
}
