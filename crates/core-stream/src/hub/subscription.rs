//! One reader of a hub: a `Stream` of the same items as the upstream's, at
//! its own pace.

use std::collections::VecDeque;
use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio_stream::Stream;

use super::{Inner, Shared, Waiter};
use crate::model::Origin;
use crate::watch::{Item, Status};

/// How a [`Subscription`] starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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
    reading: Reading,
}

/// What a subscription reads with.
struct Reading {
    slot: usize,
    start: Start,
    /// Items taken from the hub, not yet yielded.
    local: VecDeque<Item>,
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
    pub(super) fn new(shared: Arc<Shared>, start: Start) -> Self {
        let waiter = Waiter::new(shared);
        let mut local = VecDeque::new();
        let slot = {
            let mut inner = waiter.shared().lock();
            let slot = inner.add_reader();
            if start == Start::Initial {
                inner.present.tell(Origin::Initial, &mut local);
            }
            local.extend(inner.current_status().map(Item::Status));
            slot
        };
        let span = tracing::debug_span!("subscription", slot);
        span.in_scope(|| tracing::debug!(?start, told = local.len(), "subscribed"));
        Self {
            waiter,
            reading: Reading {
                slot,
                start,
                local,
                span,
            },
        }
    }

    /// Keeps only the instance events; statuses are logged with `tracing`.
    pub fn events(self) -> crate::Events<Self> {
        crate::Events::new(self)
    }
}

impl Reading {
    /// Copies what the hub has for this subscription into `local`: the
    /// difference to the present after a lag, else the next items.
    fn read(&mut self, inner: &mut Inner) -> bool {
        let head = inner.head();
        let Some(reader) = inner.readers[self.slot].as_mut() else {
            return false;
        };
        if let Some(lagged) = reader.lagged.take() {
            reader.cursor = head;
            inner.low_cursor = inner.low_cursor.min(head);
            let missed = head - lagged.at;
            self.local
                .push_back(Item::Status(Status::Lagged { missed }));
            let told = lagged.seen.diff(&inner.present, &mut self.local);
            self.local.extend(inner.current_status().map(Item::Status));
            inner.metrics.resyncs.increment(1);
            self.span.in_scope(|| {
                tracing::debug!(missed, transitions = told, "lagged: told the difference");
            });
            return true;
        }
        let skip_initial = self.start == Start::Baseline;
        while reader.cursor < head && self.local.len() < READ_BATCH {
            // The cursor is in the ring: a reader below it has lagged.
            let at = usize::try_from(reader.cursor - inner.tail).unwrap_or(usize::MAX);
            reader.cursor += 1;
            match &inner.ring[at] {
                Item::Event(e) if skip_initial && e.origin == Origin::Initial => {}
                item => self.local.push_back(item.clone()),
            }
        }
        !self.local.is_empty()
    }
}

impl Stream for Subscription {
    type Item = Item;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Item>> {
        let this = self.get_mut();
        let reading = &mut this.reading;
        if let Some(item) = reading.local.pop_front() {
            return Poll::Ready(Some(item));
        }
        let polled = this.waiter.poll(cx, |inner| {
            if reading.read(inner) {
                Some(true)
            } else if inner.ended {
                // Every item read, none to come.
                Some(false)
            } else {
                None
            }
        });
        match polled {
            Poll::Ready(true) => Poll::Ready(reading.local.pop_front()),
            Poll::Ready(false) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.waiter.shared().lock().remove_reader(self.reading.slot);
        self.reading
            .span
            .in_scope(|| tracing::debug!("unsubscribed"));
    }
}
