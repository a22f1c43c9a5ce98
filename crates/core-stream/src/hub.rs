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
//! difference to the present ([`Status::Lagged`](crate::Status::Lagged),
//! then [`Origin::Resync`](crate::Origin::Resync) events). So the memory of
//! a subscription is bounded by the ring, or, when it lags, by the number of
//! instances — never by the number of events.
//!
//! One writer, many readers (kube-runtime's `reflector::store` split): the
//! ring (`ring.rs`; the cursors and the laggards in `readers.rs`) alone
//! applies the upstream's items; [`Store`] and [`Subscription`] read through
//! its methods, under the lock that every handle shares (`waiter.rs`, which
//! also drives the upstream for the handle that polls). This file holds the
//! handle that makes them: [`Hub`], and [`Watch::share`].

mod config;
mod metrics;
mod present;
mod readers;
mod ring;
mod store;
mod subscription;
mod waiter;
mod wakers;

#[cfg(test)]
mod tests;

use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::SystemTime;

pub use config::HubConfig;
pub use present::Instance;
pub use store::{Store, Synced, Until};
pub use subscription::{Start, Subscription};

use crate::dial::Dial;
use crate::watch::Watch;
use present::Present;
use ring::Ring;
use waiter::{HubState, Waiter};

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
/// #                 Ok(Observation::Listed(lookout_core::Listed::new("web".into(), true))),
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
    state: Arc<HubState>,
}

impl fmt::Debug for Hub {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ring = self.state.lock();
        f.debug_struct("Hub")
            .field("instances", &ring.present().len())
            .field("subscriptions", &ring.subscriptions())
            .field("queued", &ring.queued())
            .finish_non_exhaustive()
    }
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
        let ring = Ring::new(Box::pin(self), present, synced, config);
        Hub {
            state: Arc::new(HubState::new(ring)),
        }
    }
}

impl Hub {
    /// A new subscription: the present as `start` says, then every later
    /// item, with no gap and no duplicate between the two.
    pub fn subscribe(&self, start: Start) -> Subscription {
        Subscription::new(Arc::clone(&self.state), start)
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
    /// malformed one) — it lags at once:
    /// [`Status::Lagged`](crate::Status::Lagged) (`missed`: the hub's items
    /// after `after` it does not get, 0 when it cannot tell), the whole
    /// present as [`Origin::Resync`](crate::Origin::Resync) events (as told
    /// to one that saw nothing: the caller replaces what it knew), the hub's
    /// status, then the items that follow.
    pub fn resume(&self, after: Option<u64>) -> Subscription {
        Subscription::resume(Arc::clone(&self.state), after)
    }

    /// A handle on the state of every instance.
    pub fn store(&self) -> Store {
        Store::new(Arc::clone(&self.state))
    }

    /// A future that drives the hub and never completes: for a program that
    /// only reads a [`Store`], which is fresh only while something polls the
    /// hub. Spawn it (the library never does), and abort it or drop it to
    /// stop: `Handle::current().spawn(hub.run())`.
    pub fn run(&self) -> Run {
        Run {
            waiter: Waiter::new(Arc::clone(&self.state)),
        }
    }

    /// How many subscriptions are open.
    pub fn subscriptions(&self) -> usize {
        self.state.lock().subscriptions()
    }

    /// How many items a subscription may be behind before it lags: the
    /// [`HubConfig::queue`] the hub was shared with (at least 1).
    pub fn queue(&self) -> usize {
        self.state.lock().capacity()
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
