//! One reader of a hub: a `Stream` of the same items as the upstream's, at
//! its own pace.

use std::collections::VecDeque;
use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio_stream::Stream;

use super::present::Telling;
use super::ring::Ring;
use super::waiter::{HubState, Waiter};
use crate::item::{Item, Status};
use crate::model::Origin;

/// How a [`Subscription`] starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Start {
    /// With the present as [`Origin::Initial`] events (`Created`, then
    /// `Started` for each instance that runs, ordered by id); before the
    /// hub's first snapshot completes, the rest of it follows as such.
    Initial,
    /// With the present as a silent baseline: only the changes after it
    /// (as [`WatchConfig::initial`](crate::WatchConfig::initial) off).
    Baseline,
}

/// How many items one poll copies out of the hub at most (one lock for
/// them all; they count against nothing: the subscription reads them next).
const READ_BATCH: usize = 64;

/// One reader of a [`Hub`](crate::Hub): a `Stream` of [`Item`]s that never
/// ends.
///
/// It yields what the hub's upstream yields, from when it subscribed, with
/// two differences:
/// - it starts with the hub's last status ([`Status::Connected`] with the
///   present count, or the last [`Status::Disconnected`]), after the present
///   as `Initial` events when it asked for them ([`Start`]);
/// - when it falls more than [`HubConfig::queue`](crate::HubConfig::queue)
///   items behind, it lags: nobody waits for it, and its next poll yields
///   [`Status::Lagged`], the difference between the state it last saw and
///   the present (each transition once, [`Origin::Resync`], ordered by id),
///   the hub's status, and then the items that follow.
///
/// Polling it drives the shared upstream when it has caught up. Dropping it
/// frees its place at once; the last handle of the hub drops the upstream.
#[must_use = "streams do nothing unless polled"]
pub struct Subscription {
    waiter: Waiter,
    pub(super) reading: Reading,
}

/// What a subscription reads with.
pub(super) struct Reading {
    pub(super) slot: usize,
    /// How it started (`None`: resumed, [`Hub::resume`](crate::Hub::resume)).
    start: Option<Start>,
    /// Items taken from the hub, not yet yielded.
    pub(super) local: VecDeque<Item>,
    /// The hub positions of `local`'s items when they are the hub's own
    /// (one each); empty when `local` holds items told for this
    /// subscription alone (`local` is one or the other: it is refilled only
    /// once empty).
    positions: VecDeque<u64>,
    /// The hub position of the item last yielded, when it was the hub's.
    position: Option<u64>,
    /// The present being told at the start ([`Start::Initial`]), and the
    /// status that follows it.
    telling: Option<(Telling, Option<Status>)>,
    span: tracing::Span,
}

impl fmt::Debug for Subscription {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Subscription")
            .field("slot", &self.reading.slot)
            .field("start", &self.reading.start)
            .field("ready", &self.reading.local.len())
            .finish_non_exhaustive()
    }
}

impl Subscription {
    pub(super) fn new(state: Arc<HubState>, start: Start) -> Self {
        Self::with(state, Some(start), None)
    }

    /// A subscription that goes on after the hub position `after` (see
    /// [`Hub::resume`](crate::Hub::resume)).
    pub(super) fn resume(state: Arc<HubState>, after: Option<u64>) -> Self {
        Self::with(state, None, after)
    }

    /// Subscribes as `start` says, or, without, resumes after `after`.
    fn with(state: Arc<HubState>, start: Option<Start>, after: Option<u64>) -> Self {
        let waiter = Waiter::new(state);
        let mut local = VecDeque::new();
        let (slot, telling) = {
            let mut ring = waiter.state().lock();
            let slot = match start {
                Some(start) => ring.add_reader(start == Start::Baseline),
                None => ring.add_resumed_reader(after),
            };
            // A resume that lags at once is told the status after the lag.
            let lagged = ring.has_lagged(slot);
            let status = ring.current_status().filter(|_| !lagged);
            let telling = if start == Some(Start::Initial) {
                let present = ring.present_sorted();
                Some((Telling::new(present, Origin::Initial), status))
            } else {
                local.extend(status.map(Item::Status));
                None
            };
            (slot, telling)
        };
        let span = tracing::debug_span!("subscription", slot);
        span.in_scope(|| tracing::debug!(?start, "subscribed"));
        Self {
            waiter,
            reading: Reading {
                slot,
                start,
                local,
                positions: VecDeque::new(),
                position: None,
                telling,
                span,
            },
        }
    }

    /// Keeps only the instance events; statuses are logged with `tracing`.
    pub fn events(self) -> crate::Events<Self> {
        crate::Events::new(self)
    }

    /// The hub's position of the item this subscription yielded last, when
    /// it was one of the hub's items: every subscription that yields that
    /// item sees the same position (so whatever is made of the item can be
    /// made once for them all), positions grow by one per hub item, and
    /// [`Hub::resume`](crate::Hub::resume) goes on after one. `None` when
    /// the item was told for this subscription alone (the present at the
    /// start, the status on joining, a lag's difference), and before the
    /// first item.
    pub fn position(&self) -> Option<u64> {
        self.reading.position
    }
}

impl Reading {
    /// The next item already here: taken from the hub, or told from the
    /// present at the start.
    fn ready(&mut self) -> Option<Item> {
        if self.local.is_empty()
            && let Some((telling, status)) = &mut self.telling
            && telling.fill(&mut self.local, READ_BATCH)
        {
            self.local.extend(status.take().map(Item::Status));
            self.telling = None;
        }
        let item = self.local.pop_front();
        self.position = self.positions.pop_front();
        if self.local.is_empty() && self.local.capacity() > 4 * READ_BATCH {
            // What a lag's difference took is given back once it is told.
            self.local.shrink_to(READ_BATCH);
        }
        item
    }

    /// Copies what the hub has for this subscription into `local`: the
    /// difference to the present after a lag, else the next items.
    fn read(&mut self, ring: &mut Ring) -> bool {
        if let Some(lag) = ring.take_lag(self.slot) {
            let missed = lag.missed;
            self.local
                .push_back(Item::Status(Status::Lagged { missed }));
            let told = lag.seen.diff(ring.present(), &mut self.local);
            self.local.extend(ring.current_status().map(Item::Status));
            self.span.in_scope(|| {
                tracing::debug!(missed, transitions = told, "lagged: told the difference");
            });
            return true;
        }
        let skip_initial = self.start == Some(Start::Baseline);
        ring.read(
            self.slot,
            skip_initial,
            READ_BATCH,
            &mut self.local,
            &mut self.positions,
        );
        !self.local.is_empty()
    }
}

impl Stream for Subscription {
    type Item = Item;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Item>> {
        let this = self.get_mut();
        let reading = &mut this.reading;
        if let Some(item) = reading.ready() {
            return Poll::Ready(Some(item));
        }
        let polled = this.waiter.poll(cx, |ring| {
            if reading.read(ring) {
                Some(true)
            } else if ring.has_ended() {
                // Every item read, none to come.
                Some(false)
            } else {
                None
            }
        });
        match polled {
            Poll::Ready(true) => Poll::Ready(reading.ready()),
            Poll::Ready(false) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.waiter.state().lock().remove_reader(self.reading.slot);
        self.reading
            .span
            .in_scope(|| tracing::debug!("unsubscribed"));
    }
}
