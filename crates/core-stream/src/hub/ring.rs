//! The hub's ring: the latest items of the upstream, the present they add up
//! to, and every subscription's cursor in them.
//!
//! The ring is the one writer of a hub's state, as kube-runtime's
//! `reflector::store::Writer` is of its store: it alone takes items from the
//! upstream ([`Ring::drive`]), applies them to the present, evicts the
//! oldest and marks who lagged. Stores and subscriptions only read, through
//! its methods, and move their own cursors through them too
//! ([`Ring::read`], [`Ring::take_lag`]).

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::SystemTime;

use tokio_stream::Stream;

use super::config::HubConfig;
use super::metrics::{Metrics, gauge};
use super::present::{Instance, Present};
use super::readers::{Lagged, Readers};
use crate::item::{Item, Status};
use crate::model::Origin;

/// How many upstream items one drive takes at most (and never more than the
/// ring holds), before the handle that drives reads them (and the others are
/// woken).
const DRIVE_BATCH: usize = 256;

/// The upstream a hub shares: a [`Watch`](crate::Watch), boxed.
pub(super) type Upstream = Pin<Box<dyn Stream<Item = Item> + Send>>;

/// The hub's state, under its lock.
pub(crate) struct Ring {
    upstream: Upstream,
    /// The latest items; `items[0]` has sequence number `tail`.
    items: VecDeque<Item>,
    tail: u64,
    capacity: usize,
    /// The state after every item so far (the store).
    present: Present,
    /// The present sorted, as the subscriptions that start with it share
    /// it; dropped when the present changes.
    present_sorted: Option<Arc<[Instance]>>,
    /// The state before `items[0]`: what a subscription that lags now saw.
    /// Shared with the subscriptions that lagged (copied on the next write).
    before_tail: Arc<Present>,
    readers: Readers,
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
pub(super) enum Driven {
    /// Items were added to the ring.
    Pushed,
    /// The upstream has nothing ready (its waker wakes the waiting handles).
    Pending,
    /// The upstream ended.
    Ended,
}

/// What a subscription that lagged is told about: the state it last saw,
/// and how many items it missed.
pub(super) struct Lag {
    pub(super) seen: Arc<Present>,
    pub(super) missed: u64,
}

impl Ring {
    /// A ring over `upstream`, starting from `present` (`synced`: the
    /// upstream's first snapshot is complete already).
    pub(super) fn new(
        upstream: Upstream,
        present: Present,
        synced: bool,
        config: HubConfig,
    ) -> Self {
        let capacity = config.queue.max(1);
        Self {
            upstream,
            items: VecDeque::with_capacity(capacity.min(4096)),
            tail: 0,
            capacity,
            before_tail: Arc::new(present.clone()),
            present,
            present_sorted: None,
            readers: Readers::default(),
            synced,
            // A watch that synced before it was shared: no first snapshot to come.
            first_connected: synced.then_some(0),
            status: None,
            last_event_at: None,
            events_in_drive: false,
            ended: false,
            metrics: Metrics::new(config.metric_labels),
        }
    }

    /// The sequence number of the next item.
    #[inline]
    pub(super) fn head(&self) -> u64 {
        self.tail + self.items.len() as u64
    }

    /// The sequence number of the oldest item held.
    #[inline]
    pub(super) fn tail(&self) -> u64 {
        self.tail
    }

    /// The item `seq`, while the ring holds it.
    #[inline]
    pub(super) fn item(&self, seq: u64) -> Option<&Item> {
        let at = usize::try_from(seq.checked_sub(self.tail)?).ok()?;
        self.items.get(at)
    }

    /// How many items the ring holds at most (its [`HubConfig::queue`]).
    pub(super) fn capacity(&self) -> usize {
        self.capacity
    }

    /// How many items the ring holds.
    pub(super) fn queued(&self) -> usize {
        self.items.len()
    }

    /// The state after every item so far.
    #[inline]
    pub(super) fn present(&self) -> &Present {
        &self.present
    }

    /// Whether the first snapshot is complete.
    #[inline]
    pub(super) fn is_synced(&self) -> bool {
        self.synced
    }

    /// Whether the upstream ended.
    #[inline]
    pub(super) fn has_ended(&self) -> bool {
        self.ended
    }

    /// When the last event arrived (lookout's clock).
    pub(super) fn last_event_at(&self) -> Option<SystemTime> {
        self.last_event_at
    }

    /// How many subscriptions are open.
    pub(super) fn subscriptions(&self) -> usize {
        self.readers.len()
    }

    /// Takes up to [`DRIVE_BATCH`] items from the upstream.
    pub(super) fn drive(&mut self, waker: &Waker) -> Driven {
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
                self.metrics.event(e);
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
        if self.items.len() == self.capacity {
            self.evict();
        }
        self.items.push_back(item);
    }

    /// The oldest item leaves; the readers still at it lag.
    fn evict(&mut self) {
        let seq = self.tail;
        if self.readers.may_be_at(seq) {
            let head = self.head();
            self.readers
                .mark_laggards(seq, head, self.first_connected, &self.before_tail);
        }
        self.tail += 1;
        if let Some(Item::Event(e)) = self.items.pop_front() {
            // Copies the state only when a laggard holds it.
            Arc::make_mut(&mut self.before_tail).apply(&e);
        }
    }

    /// A new reader at the head.
    pub(super) fn add_reader(&mut self, baseline: bool) -> usize {
        let slot = self.readers.add(self.head(), baseline);
        self.metrics.subscriptions.set(gauge(self.readers.len()));
        slot
    }

    /// A new reader after position `after`: at `after + 1` when the ring
    /// holds it (or it is the head), else lagged at once, as one that saw
    /// nothing.
    pub(super) fn add_resumed_reader(&mut self, after: Option<u64>) -> usize {
        let head = self.head();
        let next = after.and_then(|a| a.checked_add(1));
        let slot = self.add_reader(false);
        let tail = self.tail;
        match next {
            Some(next) if (tail..=head).contains(&next) => {
                if let Some(reader) = self.readers.get_mut(slot) {
                    reader.cursor = next;
                }
                self.readers.lower(next);
            }
            _ => {
                // Missed: what came after `after` and is gone (none known
                // when `after` is not a position of this hub).
                let at = next.filter(|&n| n < tail).unwrap_or(head);
                if let Some(reader) = self.readers.get_mut(slot) {
                    reader.lagged = Some(Lagged {
                        seen: Arc::new(Present::default()),
                        at,
                    });
                }
            }
        }
        slot
    }

    pub(super) fn remove_reader(&mut self, slot: usize) {
        self.readers.remove(slot);
        self.metrics.subscriptions.set(gauge(self.readers.len()));
    }

    /// The reader `slot`, for the tests' look inside.
    #[cfg(test)]
    pub(super) fn reader(&self, slot: usize) -> Option<&super::readers::Reader> {
        self.readers.get(slot)
    }

    /// Whether the reader `slot` lagged (and has not been told yet).
    pub(super) fn has_lagged(&self, slot: usize) -> bool {
        self.readers.get(slot).is_some_and(|r| r.lagged.is_some())
    }

    /// When the reader `slot` lagged: what it is to be told the difference
    /// from, and how many items it missed; its cursor goes to the head.
    pub(super) fn take_lag(&mut self, slot: usize) -> Option<Lag> {
        let head = self.head();
        let reader = self.readers.get_mut(slot)?;
        let lagged = reader.lagged.take()?;
        reader.cursor = head;
        self.readers.lower(head);
        self.metrics.resyncs.increment(1);
        Some(Lag {
            seen: lagged.seen,
            missed: head - lagged.at,
        })
    }

    /// Copies the items after the reader `slot`'s cursor into `out`, with
    /// their positions into `positions`, until `out` holds `max`;
    /// `skip_initial`: but for [`Origin::Initial`] events (its cursor moves
    /// past them).
    #[inline]
    pub(super) fn read(
        &mut self,
        slot: usize,
        skip_initial: bool,
        max: usize,
        out: &mut VecDeque<Item>,
        positions: &mut VecDeque<u64>,
    ) {
        let head = self.head();
        let Some(reader) = self.readers.get_mut(slot) else {
            return;
        };
        while reader.cursor < head && out.len() < max {
            // The cursor is in the ring: a reader below it has lagged.
            let at = usize::try_from(reader.cursor - self.tail).unwrap_or(usize::MAX);
            let position = reader.cursor;
            reader.cursor += 1;
            match &self.items[at] {
                Item::Event(e) if skip_initial && e.origin == Origin::Initial => {}
                item => {
                    out.push_back(item.clone());
                    positions.push_back(position);
                }
            }
        }
    }

    /// The present, sorted by id, shared by every subscription that starts
    /// with it before it changes.
    pub(super) fn present_sorted(&mut self) -> Arc<[Instance]> {
        Arc::clone(
            self.present_sorted
                .get_or_insert_with(|| self.present.instances().into()),
        )
    }

    /// The status a handle that joins (or comes back from lagging) is told.
    pub(super) fn current_status(&self) -> Option<Status> {
        match &self.status {
            Some(Status::Connected { .. }) => Some(Status::Connected {
                instances: self.present.len(),
            }),
            other => other.clone(),
        }
    }
}
