//! One engine connection, many subscribers, and a store: [`Watch::share`].
//!
//! A [`Hub`] owns one upstream [`Watch`] and a ring of its latest items.
//! Nothing is spawned: whichever handle is polled (a [`Subscription`], a
//! [`Store`] future, [`Hub::run`]) drives the upstream, under the hub's lock,
//! and the upstream's waker wakes every waiting handle ([`wakers`]), so one
//! that stops polling holds up nobody.
//!
//! Each subscription reads the ring at its own cursor. The ring never waits
//! for a reader: when a new item needs the slot of the oldest one, and a
//! subscription has not read that one yet, the subscription has lagged: it
//! keeps the state it last saw (the state before that item, shared by all
//! that lag at once) instead of the items, and its next poll tells it the
//! difference to the present ([`Status::Lagged`], then [`Origin::Resync`]
//! events). So the memory of a subscription is bounded by the ring, or, when
//! it lags, by the number of instances — never by the number of events.

mod present;
mod store;
mod subscription;
mod wakers;

#[cfg(test)]
mod tests;

use std::collections::VecDeque;
use std::fmt;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};
use std::time::SystemTime;

use tokio_stream::Stream;

pub use present::Instance;
pub use store::{Store, Synced, Until};
pub use subscription::{Start, Subscription};

use crate::dial::Dial;
use crate::item::{Item, Status};
use crate::model::{EventKind, Origin};
use crate::watch::Watch;
pub(crate) use present::Present;
use wakers::Wakers;

/// Knobs of a [`Hub`].
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct HubConfig {
    /// How many items a subscription may be behind before it lags (it then
    /// gets the difference to the present instead of the items). The items
    /// are shared: the hub keeps this many in all, not per subscription.
    /// Default 1024; at least 1.
    pub queue: usize,
    /// Labels every metric of this hub carries besides its own (none by
    /// default): one hub per source of a [`Merge`](crate::Merge), each
    /// with `host=NAME`, keeps the series of the sources apart.
    metric_labels: Vec<(&'static str, String)>,
}

impl Default for HubConfig {
    fn default() -> Self {
        Self {
            queue: 1024,
            metric_labels: Vec::new(),
        }
    }
}

impl HubConfig {
    /// Sets [`queue`](Self::queue).
    #[must_use]
    pub fn queue(mut self, queue: usize) -> Self {
        self.queue = queue.max(1);
        self
    }

    /// Adds the label `key=value` to every metric of the hub (see
    /// [`metric_labels`](Self#structfield.metric_labels)).
    #[must_use]
    pub fn metric_label(mut self, key: &'static str, value: impl Into<String>) -> Self {
        self.metric_labels.push((key, value.into()));
        self
    }
}

/// How many upstream items one drive takes at most (and never more than the
/// ring holds), before the handle that drives reads them (and the others are
/// woken).
const DRIVE_BATCH: usize = 256;

/// How many drives one poll makes at most before it yields to the runtime
/// (a busy upstream and a handle that finds nothing of its own in it: a
/// store future, or a subscription that skips the first snapshot).
const DRIVES_PER_POLL: usize = 16;

/// One engine connection shared by any number of [`Subscription`]s and
/// [`Store`]s. Made by [`Watch::share`].
///
/// The hub, its subscriptions and its stores are handles of one shared
/// state: the upstream `Watch` (and its engine connection) lives as long as
/// any of them, and is dropped, synchronously, with the last. No task is
/// spawned: the upstream is driven by whichever handle is polled.
///
/// # Example
///
/// ```
/// # use lookout_core::{Dial, DialFuture, Observation, Watch, WatchConfig, Item};
/// # struct OneRunning;
/// # impl Dial for OneRunning {
/// #     type Cursor = u64;
/// #     fn dial(&mut self, _resume: Option<&u64>) -> DialFuture<u64> {
/// #         Box::pin(async {
/// #             let snapshot = vec![
/// #                 Ok(Observation::ResyncBegin),
/// #                 Ok(Observation::Listed(lookout_core::Listed {
/// #                     id: "web".into(), running: true, uid: None, labels: Default::default(),
/// #                     readiness: None,
/// #                 })),
/// #                 Ok(Observation::ResyncDone),
/// #             ];
/// #             let session = tokio_stream::iter(snapshot).chain(tokio_stream::pending());
/// #             Ok(Box::pin(session) as lookout_core::Session<u64>)
/// #         })
/// #     }
/// # }
/// use lookout_core::Start;
/// use tokio_stream::StreamExt;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let hub = Watch::new(OneRunning, WatchConfig::default()).share();
/// let store = hub.store();
/// let mut dashboard = hub.subscribe(Start::Initial);
/// let mut proxy = hub.subscribe(Start::Baseline);
///
/// // The store is fresh while something polls the hub: here, its own future.
/// store.synced().await;
/// assert!(store.get("web").is_some_and(|web| web.running));
///
/// // A subscription starts with the present, then the changes.
/// let first = dashboard.next().await;
/// assert!(matches!(first, Some(Item::Event(e)) if e.id.as_str() == "web"));
/// # drop(proxy);
/// # }
/// ```
#[derive(Clone)]
pub struct Hub {
    shared: Arc<Shared>,
}

impl fmt::Debug for Hub {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let inner = self.shared.lock();
        f.debug_struct("Hub")
            .field("instances", &inner.present.len())
            .field("subscriptions", &inner.subscriptions)
            .field("queued", &inner.ring.len())
            .finish_non_exhaustive()
    }
}

/// What every handle of a hub shares.
pub(crate) struct Shared {
    inner: Mutex<Inner>,
    wakers: Arc<Wakers>,
    /// The upstream's waker: wakes every waiting handle.
    upstream_waker: Waker,
}

/// A subscription as the hub sees it.
#[derive(Debug)]
struct Reader {
    /// The sequence number of the next item it reads.
    cursor: u64,
    /// It skips the first snapshot's events ([`Start::Baseline`]).
    baseline: bool,
    /// It lagged: the state it last saw, and where its cursor was.
    lagged: Option<Lagged>,
}

#[derive(Debug)]
struct Lagged {
    seen: Arc<Present>,
    at: u64,
}

/// The hub's state, under its lock.
pub(crate) struct Inner {
    upstream: Pin<Box<dyn Stream<Item = Item> + Send>>,
    /// The latest items; `ring[0]` has sequence number `tail`.
    ring: VecDeque<Item>,
    tail: u64,
    capacity: usize,
    /// The state after every item so far (the store).
    present: Present,
    /// The present sorted, as the subscriptions that start with it share
    /// it; dropped when the present changes.
    present_sorted: Option<Arc<[Instance]>>,
    /// The state before `ring[0]`: what a subscription that lags now saw.
    /// Shared with the subscriptions that lagged (copied on the next write).
    before_ring: Arc<Present>,
    readers: Vec<Option<Reader>>,
    free_readers: Vec<usize>,
    subscriptions: usize,
    /// No reader that has not lagged has a cursor below this (the ring's
    /// eviction only looks for laggards when it reaches it).
    low_cursor: u64,
    /// The first snapshot is complete.
    synced: bool,
    /// The sequence number of the first [`Status::Connected`]: the end of
    /// the first snapshot's events.
    first_connected: Option<u64>,
    /// The upstream's last status (with [`Status::Connected`]'s count kept
    /// current).
    status: Option<Status>,
    /// When the last event arrived (lookout's clock).
    last_event_at: Option<SystemTime>,
    /// The drive under way took an event.
    events_in_drive: bool,
    /// The upstream ended (a `Watch` never does; a defensive end).
    ended: bool,
    metrics: Metrics,
}

/// What one drive of the upstream did.
enum Driven {
    /// Items were added to the ring.
    Pushed,
    /// The upstream has nothing ready (its waker wakes the waiting handles).
    Pending,
    /// The upstream ended.
    Ended,
}

impl<D: Dial> Watch<D> {
    /// Shares this watch's one engine connection among any number of
    /// subscriptions and stores, with the default [`HubConfig`].
    ///
    /// Share a watch before polling it: the hub learns the state from the
    /// events it sees (it turns on [`WatchConfig::initial`](crate::WatchConfig::initial)
    /// upstream, and takes what the watch already knew as its start).
    pub fn share(self) -> Hub {
        self.share_with(HubConfig::default())
    }

    /// [`share`](Self::share) with a [`HubConfig`].
    pub fn share_with(mut self, config: HubConfig) -> Hub {
        let mut present = Present::default();
        let synced = self.has_synced();
        if synced {
            self.tell_known(SystemTime::now(), &mut present);
        } else {
            self.tell_first_snapshot();
        }
        Hub::new(Box::pin(self), present, synced, config)
    }
}

impl Hub {
    fn new(
        upstream: Pin<Box<dyn Stream<Item = Item> + Send>>,
        present: Present,
        synced: bool,
        config: HubConfig,
    ) -> Self {
        let wakers = Arc::new(Wakers::default());
        let capacity = config.queue.max(1);
        let inner = Inner {
            upstream,
            ring: VecDeque::with_capacity(capacity.min(4096)),
            tail: 0,
            capacity,
            before_ring: Arc::new(present.clone()),
            present,
            present_sorted: None,
            readers: Vec::new(),
            free_readers: Vec::new(),
            subscriptions: 0,
            low_cursor: u64::MAX,
            synced,
            // A watch that synced before it was shared: no first snapshot to come.
            first_connected: synced.then_some(0),
            status: None,
            last_event_at: None,
            events_in_drive: false,
            ended: false,
            metrics: Metrics::new(config.metric_labels),
        };
        Self {
            shared: Arc::new(Shared {
                inner: Mutex::new(inner),
                upstream_waker: Waker::from(Arc::clone(&wakers)),
                wakers,
            }),
        }
    }

    /// A new subscription: the present as `start` says, then every later
    /// item, with no gap and no duplicate between the two.
    pub fn subscribe(&self, start: Start) -> Subscription {
        Subscription::new(Arc::clone(&self.shared), start)
    }

    /// A subscription that goes on after the hub position `after` (a
    /// [`Subscription::position`] of this hub): a reconnecting client's
    /// resume.
    ///
    /// When the hub still holds every item after `after`, it starts with the
    /// hub's last status, then yields exactly those items, then the later
    /// ones — as the subscription that saw `after` would have (but with the
    /// first snapshot's `Initial` events, should they follow `after`). Else
    /// — `after` left the ring, is not a position this hub gave yet, or is
    /// `None` (a position the caller cannot place: another process's, a
    /// malformed one) — it lags at once: [`Status::Lagged`] (`missed`: the
    /// hub's items after `after` it does not get, 0 when it cannot tell),
    /// the whole present as [`Origin::Resync`] events (as told to one that
    /// saw nothing: the caller replaces what it knew), the hub's status,
    /// then the items that follow.
    pub fn resume(&self, after: Option<u64>) -> Subscription {
        Subscription::resume(Arc::clone(&self.shared), after)
    }

    /// A handle on the state of every instance.
    pub fn store(&self) -> Store {
        Store::new(Arc::clone(&self.shared))
    }

    /// A future that drives the hub and never completes: for a program that
    /// only reads a [`Store`], which is fresh only while something polls the
    /// hub. Spawn it (the library never does), and abort it or drop it to
    /// stop: `Handle::current().spawn(hub.run())`.
    pub fn run(&self) -> Run {
        Run {
            waiter: Waiter::new(Arc::clone(&self.shared)),
        }
    }

    /// How many subscriptions are open.
    pub fn subscriptions(&self) -> usize {
        self.shared.lock().subscriptions
    }
}

/// The future of [`Hub::run`]: drives the hub forever.
#[must_use = "futures do nothing unless polled"]
#[derive(Debug)]
pub struct Run {
    waiter: Waiter,
}

impl Future for Run {
    type Output = std::convert::Infallible;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.get_mut().waiter.poll(cx, |_| None)
    }
}

/// A handle's place among the hub's waiting tasks; released on drop.
pub(crate) struct Waiter {
    shared: Arc<Shared>,
    token: usize,
}

impl fmt::Debug for Waiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Waiter")
            .field("token", &self.token)
            .finish_non_exhaustive()
    }
}

impl Waiter {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        let token = shared.wakers.token();
        Self { shared, token }
    }

    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// Polls `ready` against the hub's state, driving the upstream until it
    /// gives a value or the upstream has nothing more; `Pending` wakes the
    /// task when the upstream, or another handle's drive, moves the hub.
    pub(crate) fn poll<T>(
        &self,
        cx: &mut Context<'_>,
        mut ready: impl FnMut(&mut Inner) -> Option<T>,
    ) -> Poll<T> {
        let shared = &*self.shared;
        let mut inner = shared.lock();
        // Registered before the upstream is polled: a wake-up that comes
        // between the two finds it.
        shared.wakers.register(self.token, cx.waker());
        let mut drove = false;
        let mut drives = 0;
        let out = loop {
            if let Some(value) = ready(&mut inner) {
                break Poll::Ready(value);
            }
            if drives == DRIVES_PER_POLL {
                // A busy upstream with nothing for this handle: let the
                // runtime run others, and come back.
                cx.waker().wake_by_ref();
                break Poll::Pending;
            }
            drives += 1;
            match inner.drive(&shared.upstream_waker) {
                Driven::Pushed => drove = true,
                Driven::Pending | Driven::Ended => break Poll::Pending,
            }
        };
        drop(inner);
        if drove {
            // The others wait for what this drive added.
            shared.wakers.wake_all(Some(self.token));
        }
        out
    }
}

impl Drop for Waiter {
    fn drop(&mut self) {
        self.shared.wakers.release(self.token);
    }
}

impl Shared {
    pub(crate) fn lock(&self) -> MutexGuard<'_, Inner> {
        // The state is consistent between items: a panic elsewhere (in a
        // caller's predicate) does not poison it.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Inner {
    fn head(&self) -> u64 {
        self.tail + self.ring.len() as u64
    }

    /// Takes up to [`DRIVE_BATCH`] items from the upstream.
    fn drive(&mut self, waker: &Waker) -> Driven {
        if self.ended {
            return Driven::Ended;
        }
        let mut cx = Context::from_waker(waker);
        let mut pushed = 0;
        // No more than the ring holds: the handle that drives has read
        // everything (or reads nothing), and must not be overtaken by its
        // own drive.
        let batch = DRIVE_BATCH.min(self.capacity);
        while pushed < batch {
            match self.upstream.as_mut().poll_next(&mut cx) {
                Poll::Ready(Some(item)) => {
                    if !self.synced && matches!(item, Item::Status(Status::Connected { .. })) {
                        self.first_connected = Some(self.head());
                    }
                    self.record(&item);
                    self.push(item);
                    pushed += 1;
                }
                Poll::Ready(None) => {
                    tracing::warn!("the shared upstream ended");
                    self.ended = true;
                    break;
                }
                Poll::Pending => break,
            }
        }
        if pushed > 0 {
            self.metrics.instances.set(gauge(self.present.len()));
            self.metrics.ready.set(gauge(self.present.ready()));
            if std::mem::take(&mut self.events_in_drive) {
                // One clock read per drive: its events arrived together.
                self.last_event_at = Some(SystemTime::now());
            }
            Driven::Pushed
        } else if self.ended {
            Driven::Ended
        } else {
            Driven::Pending
        }
    }

    /// What an upstream item changes in the present.
    fn record(&mut self, item: &Item) {
        match item {
            Item::Event(e) => {
                self.present.apply(e);
                self.present_sorted = None;
                self.metrics.event(e.kind, e.origin);
                self.events_in_drive = true;
            }
            Item::Status(s) => {
                match s {
                    Status::Connected { .. } => {
                        self.synced = true;
                        self.metrics.connected.set(1.0);
                    }
                    Status::Disconnected { .. } => {
                        self.metrics.connected.set(0.0);
                        self.metrics.reconnects.increment(1);
                    }
                    Status::Lagged { .. } => {}
                }
                self.status = Some(s.clone());
            }
        }
    }

    /// Adds an item, evicting the oldest when the ring is full.
    fn push(&mut self, item: Item) {
        if self.ring.len() == self.capacity {
            self.evict();
        }
        self.ring.push_back(item);
    }

    fn evict(&mut self) {
        let seq = self.tail;
        if seq >= self.low_cursor {
            self.mark_laggards(seq);
        }
        self.tail += 1;
        if let Some(Item::Event(e)) = self.ring.pop_front() {
            // Copies the state only when a laggard holds it.
            Arc::make_mut(&mut self.before_ring).apply(&e);
        }
    }

    /// The readers at `seq`, which is leaving the ring, lag; the lowest
    /// cursor of the others is found anew.
    ///
    /// A baseline reader still before the end of the first snapshot skips
    /// to it rather than lag: the snapshot's events are its baseline, not
    /// news (so are the statuses of the dials that failed before it), and
    /// if it lags at the end, the state it saw is the snapshot's.
    fn mark_laggards(&mut self, seq: u64) {
        let mut low = u64::MAX;
        let head = self.head();
        for reader in self.readers.iter_mut().flatten() {
            if reader.lagged.is_some() {
                continue;
            }
            if reader.baseline && reader.cursor <= seq {
                match self.first_connected {
                    None => reader.cursor = head,
                    Some(end) if reader.cursor < end => reader.cursor = end,
                    Some(_) => {}
                }
            }
            if reader.cursor <= seq {
                reader.lagged = Some(Lagged {
                    seen: Arc::clone(&self.before_ring),
                    at: reader.cursor,
                });
            } else {
                low = low.min(reader.cursor);
            }
        }
        self.low_cursor = low;
    }

    /// A new reader at the head.
    fn add_reader(&mut self, baseline: bool) -> usize {
        let reader = Reader {
            cursor: self.head(),
            baseline,
            lagged: None,
        };
        self.low_cursor = self.low_cursor.min(reader.cursor);
        self.subscriptions += 1;
        self.metrics.subscriptions.set(gauge(self.subscriptions));
        if let Some(slot) = self.free_readers.pop() {
            self.readers[slot] = Some(reader);
            slot
        } else {
            self.readers.push(Some(reader));
            self.readers.len() - 1
        }
    }

    /// A new reader after position `after`: at `after + 1` when the ring
    /// holds it (or it is the head), else lagged at once, as one that saw
    /// nothing.
    fn add_resumed_reader(&mut self, after: Option<u64>) -> usize {
        let head = self.head();
        let next = after.and_then(|a| a.checked_add(1));
        let slot = self.add_reader(false);
        let Some(reader) = self.readers[slot].as_mut() else {
            return slot;
        };
        match next {
            Some(next) if (self.tail..=head).contains(&next) => {
                reader.cursor = next;
                self.low_cursor = self.low_cursor.min(next);
            }
            _ => {
                // Missed: what came after `after` and is gone (none known
                // when `after` is not a position of this hub).
                let at = next.filter(|&n| n < self.tail).unwrap_or(head);
                reader.lagged = Some(Lagged {
                    seen: Arc::new(Present::default()),
                    at,
                });
            }
        }
        slot
    }

    fn remove_reader(&mut self, slot: usize) {
        self.readers[slot] = None;
        self.free_readers.push(slot);
        self.subscriptions -= 1;
        self.metrics.subscriptions.set(gauge(self.subscriptions));
    }

    /// The present, sorted by id, shared by every subscription that starts
    /// with it before it changes.
    fn present_sorted(&mut self) -> Arc<[Instance]> {
        Arc::clone(
            self.present_sorted
                .get_or_insert_with(|| self.present.instances().into()),
        )
    }

    /// The status a handle that joins (or comes back from lagging) is told.
    fn current_status(&self) -> Option<Status> {
        match &self.status {
            Some(Status::Connected { .. }) => Some(Status::Connected {
                instances: self.present.len(),
            }),
            other => other.clone(),
        }
    }
}

/// The hub's metrics, through the [`metrics`] facade: free when the program
/// installs no recorder. Registered when the hub is made (install the
/// recorder before).
struct Metrics {
    /// `lookout_events_total{kind,origin}`, by kind and origin.
    events: [[metrics::Counter; 3]; 6],
    connected: metrics::Gauge,
    reconnects: metrics::Counter,
    instances: metrics::Gauge,
    /// `lookout_instances_ready`: how many are ready (0 without readiness).
    ready: metrics::Gauge,
    subscriptions: metrics::Gauge,
    resyncs: metrics::Counter,
}

const KINDS: [EventKind; 6] = [
    EventKind::Created,
    EventKind::Started,
    EventKind::Stopped,
    EventKind::Removed,
    EventKind::Ready,
    EventKind::Unready,
];
const ORIGINS: [Origin; 3] = [Origin::Initial, Origin::Live, Origin::Resync];

/// A count as a gauge's value (exact below 2^53).
#[allow(clippy::cast_precision_loss)]
fn gauge(n: usize) -> f64 {
    n as f64
}

impl Metrics {
    fn new(extra: Vec<(&'static str, String)>) -> Self {
        let extra: Vec<metrics::Label> = extra
            .into_iter()
            .map(|(k, v)| metrics::Label::new(k, v))
            .collect();
        let labels = |own: &[(&'static str, &'static str)]| -> Vec<metrics::Label> {
            own.iter()
                .map(|&(k, v)| metrics::Label::new(k, v))
                .chain(extra.iter().cloned())
                .collect()
        };
        Self {
            events: KINDS.map(|kind| {
                ORIGINS.map(|origin| {
                    metrics::counter!(
                        "lookout_events_total",
                        labels(&[("kind", kind.as_str()), ("origin", origin.as_str())])
                    )
                })
            }),
            connected: metrics::gauge!("lookout_connected", labels(&[])),
            reconnects: metrics::counter!("lookout_reconnects_total", labels(&[])),
            instances: metrics::gauge!("lookout_instances", labels(&[])),
            ready: metrics::gauge!("lookout_instances_ready", labels(&[])),
            subscriptions: metrics::gauge!("lookout_subscribers", labels(&[])),
            resyncs: metrics::counter!("lookout_subscriber_resyncs_total", labels(&[])),
        }
    }

    fn event(&self, kind: EventKind, origin: Origin) {
        let k = KINDS.iter().position(|&k| k == kind).unwrap_or(0);
        let o = ORIGINS.iter().position(|&o| o == origin).unwrap_or(0);
        self.events[k][o].increment(1);
    }
}
