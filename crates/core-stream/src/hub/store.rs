//! The state of every instance, to read at any time and to wait on.

use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::SystemTime;

use super::present::{Instance, follow};
use super::waiter::{HubState, Waiter};
use crate::item::{Item, Status};
use crate::model::InstanceId;

/// The state of every instance of a [`Hub`](crate::Hub), as its events tell
/// it. Cheap to clone (a handle).
///
/// # What keeps it fresh
///
/// The store is the state after the last item the hub took from its
/// upstream, and the hub takes items only when one of its handles is
/// polled: a [`Subscription`](crate::Subscription), a [`Synced`] or
/// [`Until`] future, or [`Hub::run`](crate::Hub::run). A program that only
/// reads the store spawns the last one, once:
///
/// ```no_run
/// # fn f(hub: lookout_core::Hub) {
/// tokio::runtime::Handle::current().spawn(hub.run());
/// # }
/// ```
///
/// Reading ([`get`](Self::get), [`instances`](Self::instances), …) never
/// waits for the engine; the futures do, and are cancellation-safe (drop
/// one, for example at a `tokio::time::timeout`, and nothing is lost).
#[derive(Clone)]
pub struct Store {
    state: Arc<HubState>,
}

impl fmt::Debug for Store {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Store")
            .field("instances", &self.len())
            .finish_non_exhaustive()
    }
}

impl Store {
    pub(super) fn new(state: Arc<HubState>) -> Self {
        Self { state }
    }

    /// The instance `id`, if it exists.
    pub fn get(&self, id: &str) -> Option<Instance> {
        self.state.lock().present().get(id)
    }

    /// Every instance, ordered by id.
    pub fn instances(&self) -> Vec<Instance> {
        self.state.lock().present().instances()
    }

    /// How many instances exist.
    pub fn len(&self) -> usize {
        self.state.lock().present().len()
    }

    /// Whether no instance exists.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the first snapshot is complete (before it, the store holds
    /// what it has listed so far).
    pub fn is_synced(&self) -> bool {
        self.state.lock().is_synced()
    }

    /// The upstream's last status ([`Status::Connected`] with the present
    /// count, or the last [`Status::Disconnected`]); `None` before the first.
    pub fn status(&self) -> Option<Status> {
        self.state.lock().current_status()
    }

    /// When the last event reached the hub (lookout's clock).
    pub fn last_event_at(&self) -> Option<SystemTime> {
        self.state.lock().last_event_at()
    }

    /// Resolves once the first snapshot is complete (at once if it is).
    pub fn synced(&self) -> Synced {
        Synced {
            waiter: Waiter::new(Arc::clone(&self.state)),
        }
    }

    /// Resolves when `holds` is true of the instance `id` (`None`: it does
    /// not exist), once the first snapshot is complete: at once when it
    /// already holds, else at the first event after which it does. It
    /// resolves to the instance as it was then.
    ///
    /// Every event of `id` is checked, in order, so a state that lasted one
    /// event is not missed; unless the future is polled so seldom that the
    /// hub's [`queue`](crate::HubConfig::queue) wraps past it, in which case
    /// it checks the present.
    ///
    /// ```no_run
    /// # async fn f(store: lookout_core::Store) {
    /// use std::time::Duration;
    /// let web_runs = store.until("web", |web| web.is_some_and(|web| web.running));
    /// match tokio::time::timeout(Duration::from_secs(10), web_runs).await {
    ///     Ok(web) => println!("running since {:?}", web.map(|w| w.since)),
    ///     Err(_) => println!("web did not start within 10 s"),
    /// }
    /// let gone = store.until("web", |web| web.is_none());
    /// # }
    /// ```
    pub fn until<F>(&self, id: impl Into<InstanceId>, holds: F) -> Until<F>
    where
        F: FnMut(Option<&Instance>) -> bool,
    {
        Until {
            waiter: Waiter::new(Arc::clone(&self.state)),
            id: id.into(),
            holds,
            watched: None,
        }
    }
}

/// The future of [`Store::synced`].
#[must_use = "futures do nothing unless polled"]
#[derive(Debug)]
pub struct Synced {
    waiter: Waiter,
}

impl Future for Synced {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.waiter.poll(cx, |ring| ring.is_synced().then_some(()))
    }
}

/// The future of [`Store::until`].
#[must_use = "futures do nothing unless polled"]
pub struct Until<F> {
    waiter: Waiter,
    id: InstanceId,
    holds: F,
    /// Where it has read the hub to, and the instance as of there.
    watched: Option<Watched>,
}

struct Watched {
    cursor: u64,
    synced: bool,
    instance: Option<Instance>,
}

impl<F> fmt::Debug for Until<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Until")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

// Nothing is pinned structurally.
impl<F> Unpin for Until<F> {}

impl<F> Future for Until<F>
where
    F: FnMut(Option<&Instance>) -> bool,
{
    type Output = Option<Instance>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Instance>> {
        let this = self.get_mut();
        let (id, holds, watched) = (&this.id, &mut this.holds, &mut this.watched);
        this.waiter.poll(cx, |ring| {
            let head = ring.head();
            let mut check =
                |w: &Watched| (w.synced && holds(w.instance.as_ref())).then(|| w.instance.clone());
            let w = match watched {
                // A first look, or the ring wrapped past it: the present.
                Some(w) if w.cursor >= ring.tail() => w,
                _ => {
                    let w = watched.insert(Watched {
                        cursor: head,
                        synced: ring.is_synced(),
                        instance: ring.present().get(id.as_str()),
                    });
                    if let Some(found) = check(w) {
                        return Some(found);
                    }
                    w
                }
            };
            while w.cursor < head {
                let item = ring.item(w.cursor);
                w.cursor += 1;
                match item {
                    Some(Item::Event(e)) if e.id == *id => follow(&mut w.instance, e),
                    Some(Item::Status(Status::Connected { .. })) if !w.synced => w.synced = true,
                    _ => continue,
                }
                if let Some(found) = check(w) {
                    return Some(found);
                }
            }
            None
        })
    }
}
