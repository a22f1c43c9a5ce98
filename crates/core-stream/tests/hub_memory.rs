//! What a subscription holds once it has yielded everything (issue #13): the
//! hub's memory is meant to be bounded by its ring, or, for a subscription
//! that lags, by the number of instances while it is told the difference —
//! not kept afterwards.
//!
//! A subscription once copied what it was told into its own buffer (`local`
//! in `src/hub/subscription.rs`) all at once, the present at subscribe with
//! `Start::Initial` and the whole difference after a lag, and the buffer kept
//! that capacity for as long as the subscription lived: 10k instances cost
//! ~1 MiB per subscription, 1000 such subscriptions ~1 GiB (the fan-out
//! bench's connect phase measured 1 005 MiB). Now the present is told a batch
//! at a time from a sorted copy the subscriptions of one moment share, and a
//! drained buffer gives back what a lag's difference took.
//!
//! One test (dhat counts the whole process's heap, so nothing else may run
//! in it at the same time).

use std::time::{Duration, SystemTime};

use lookout_core::{
    BoxError, Change, Dial, DialFuture, EventKind, Item, Listed, Observation, Origin, Start,
    Status, Subscription, Watch, WatchConfig,
};
use tokio::sync::mpsc;
use tokio_stream::StreamExt;
use tokio_stream::wrappers::UnboundedReceiverStream;

#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

type Obs = Result<Observation<u64>, BoxError>;

const INSTANCES: usize = 10_000;

/// What a drained subscription may keep: its place and a read batch of items
/// (64 items of 64 B), with room to spare.
const KEPT: usize = 64 * 1024;

/// Hands out one session fed by the test, then nothing.
struct Fed(Option<mpsc::UnboundedReceiver<Obs>>);

impl Dial for Fed {
    type Cursor = u64;
    fn dial(&mut self, _resume: Option<&u64>) -> DialFuture<u64> {
        let rx = self.0.take();
        Box::pin(async move {
            match rx {
                Some(rx) => {
                    Ok(Box::pin(UnboundedReceiverStream::new(rx)) as lookout_core::Session<u64>)
                }
                None => std::future::pending().await,
            }
        })
    }
}

fn id(n: usize) -> String {
    format!("inst-{n:05}")
}

async fn next(sub: &mut Subscription) -> Item {
    tokio::time::timeout(Duration::from_secs(10), sub.next())
        .await
        .expect("an item")
        .expect("never ends")
}

/// The heap that dropping `sub` frees.
fn kept(sub: Subscription) -> usize {
    let before = dhat::HeapStats::get().curr_bytes;
    drop(sub);
    before.saturating_sub(dhat::HeapStats::get().curr_bytes)
}

#[test]
fn a_drained_subscription_does_not_keep_what_it_was_told() {
    let _profiler = dhat::Profiler::builder().testing().build();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let (tx, rx) = mpsc::unbounded_channel::<Obs>();
        tx.send(Ok(Observation::ResyncBegin)).expect("send");
        for n in 0..INSTANCES {
            tx.send(Ok(Observation::Listed(Listed::new(id(n).into(), false).labels(lookout_core::Labels::default()))))
            .expect("send");
        }
        tx.send(Ok(Observation::ResyncDone)).expect("send");
        let hub = Watch::new(Fed(Some(rx)), WatchConfig::default()).share();
        let store = hub.store();
        tokio::time::timeout(Duration::from_secs(10), store.synced())
            .await
            .expect("synced");
        assert_eq!(store.len(), INSTANCES);

        // Start::Initial: the present, then the status; drained.
        let mut initial = hub.subscribe(Start::Initial);
        for n in 0..INSTANCES {
            let item = next(&mut initial).await;
            assert!(
                matches!(&item, Item::Event(e) if e.id.as_str() == id(n) && e.origin == Origin::Initial),
                "{item:?}"
            );
        }
        assert!(matches!(
            next(&mut initial).await,
            Item::Status(Status::Connected { .. })
        ));
        let initial_kept = kept(initial);

        // A lag: `late` is not polled while every instance starts.
        let mut driver = hub.subscribe(Start::Baseline);
        let mut late = hub.subscribe(Start::Baseline);
        assert!(matches!(
            next(&mut driver).await,
            Item::Status(Status::Connected { .. })
        ));
        assert!(matches!(
            next(&mut late).await,
            Item::Status(Status::Connected { .. })
        ));
        let at = SystemTime::now();
        for n in 0..INSTANCES {
            tx.send(Ok(Observation::Change(Change::new(id(n).into(), EventKind::Started, at).cursor(Some(n as u64)))))
            .expect("send");
        }
        for _ in 0..INSTANCES {
            assert!(matches!(next(&mut driver).await, Item::Event(_)));
        }
        assert!(matches!(
            next(&mut late).await,
            Item::Status(Status::Lagged { .. })
        ));
        for _ in 0..INSTANCES {
            let item = next(&mut late).await;
            assert!(
                matches!(&item, Item::Event(e) if e.kind == EventKind::Started && e.origin == Origin::Resync),
                "{item:?}"
            );
        }
        assert!(matches!(
            next(&mut late).await,
            Item::Status(Status::Connected { .. })
        ));
        let lagged_kept = kept(late);

        assert!(
            initial_kept <= KEPT && lagged_kept <= KEPT,
            "a drained subscription keeps what it was told: Start::Initial over {INSTANCES} \
             instances keeps {initial_kept} B, one told a difference of {INSTANCES} keeps \
             {lagged_kept} B (at most {KEPT} B expected)"
        );
        drop((driver, store, hub, tx));
    });
}
