//! What every handle of a hub points to ([`HubState`]: the ring under its
//! lock, and the wakers of the handles that wait), and a handle's place among
//! the waiting ([`Waiter`]), whose poll drives the upstream when the handle
//! finds nothing of its own.
//!
//! A subscription that has read everything looks again only once it is
//! woken: its waker, registered under the lock as it read, marks itself
//! fired, so a poll from the same task before that finds nothing without
//! taking a lock ([`Waiter::is_quiet`]). One event to a thousand
//! subscriptions is then a lock each, not two (the read, then the look
//! that finds nothing more).

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Wake, Waker};

use super::ring::{Driven, Ring};
use super::wakers::Wakers;

/// How many drives one poll makes at most before it yields to the runtime
/// (a busy upstream and a handle that finds nothing of its own in it: a
/// store future, or a subscription that skips the first snapshot).
const DRIVES_PER_POLL: usize = 16;

/// What every handle of a hub shares: the ring, and the wakers of the
/// handles that wait on it.
pub(crate) struct HubState {
    ring: Mutex<Ring>,
    wakers: Arc<Wakers>,
    /// The upstream's waker: wakes every waiting handle.
    upstream_waker: Waker,
}

impl HubState {
    pub(super) fn new(ring: Ring) -> Self {
        let wakers = Arc::new(Wakers::default());
        Self {
            ring: Mutex::new(ring),
            upstream_waker: Waker::from(Arc::clone(&wakers)),
            wakers,
        }
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, Ring> {
        // The state is consistent between items: a panic elsewhere (in a
        // caller's predicate) does not poison it.
        self.ring.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A handle's place among the hub's waiting tasks; released on drop.
pub(crate) struct Waiter {
    state: Arc<HubState>,
    token: usize,
    /// The waker registered for it, when it waits as a reader
    /// ([`Waiter::poll_reader`]).
    own: Option<Own>,
    /// When it last looked, under the lock: it had read everything, the
    /// upstream was not due, and `own` was registered. Until `own` fires, a
    /// poll from the same task finds nothing new.
    quiet: bool,
}

/// A reader's waker as registered: it marks itself fired, then wakes the
/// task.
struct Own {
    fired: Arc<Fired>,
    waker: Waker,
}

struct Fired {
    fired: AtomicBool,
    task: Waker,
}

impl Wake for Fired {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.fired.store(true, Ordering::Release);
        self.task.wake_by_ref();
    }
}

impl fmt::Debug for Waiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Waiter")
            .field("token", &self.token)
            .finish_non_exhaustive()
    }
}

impl Waiter {
    pub(super) fn new(state: Arc<HubState>) -> Self {
        let token = state.wakers.token();
        Self {
            state,
            token,
            own: None,
            quiet: false,
        }
    }

    pub(super) fn state(&self) -> &Arc<HubState> {
        &self.state
    }

    /// Polls `ready` against the ring, driving the upstream until it gives
    /// a value or the upstream has nothing more; `Pending` wakes the task
    /// when the upstream, or another handle's drive, moves the hub. The
    /// upstream is driven only when it is due (woken, or it gave items
    /// last): of a thousand handles woken by one event, one polls it.
    pub(super) fn poll<T>(
        &self,
        cx: &mut Context<'_>,
        ready: impl FnMut(&mut Ring) -> Option<T>,
    ) -> Poll<T> {
        self.poll_registered(cx, cx.waker(), ready, |_| false).0
    }

    /// [`Waiter::poll`] for a reader: registered with a waker of its own,
    /// and quiet (see [`Waiter::is_quiet`]) when `caught_up` says, under
    /// the same lock, that it has read everything there is.
    pub(super) fn poll_reader<T>(
        &mut self,
        cx: &mut Context<'_>,
        ready: impl FnMut(&mut Ring) -> Option<T>,
        caught_up: impl FnOnce(&Ring) -> bool,
    ) -> Poll<T> {
        let own = match self.own.take() {
            Some(own) if own.fired.task.will_wake(cx.waker()) => own,
            _ => {
                let fired = Arc::new(Fired {
                    fired: AtomicBool::new(false),
                    task: cx.waker().clone(),
                });
                Own {
                    waker: Waker::from(Arc::clone(&fired)),
                    fired,
                }
            }
        };
        // Not fired from here on: registered (again) before the ring is
        // read, under its lock, so a wake-up after the read fires it.
        own.fired.fired.store(false, Ordering::Release);
        let (polled, quiet) = self.poll_registered(cx, &own.waker, ready, caught_up);
        self.own = Some(own);
        self.quiet = quiet;
        polled
    }

    /// Whether a poll from this task now would find nothing new: it had
    /// read everything when it last looked, and nothing has woken it since
    /// (an atomic load, no lock).
    pub(super) fn is_quiet(&self, cx: &Context<'_>) -> bool {
        self.quiet
            && self.own.as_ref().is_some_and(|own| {
                !own.fired.fired.load(Ordering::Acquire) && own.fired.task.will_wake(cx.waker())
            })
    }

    /// The poll, registered with `waker`; and whether it is quiet after.
    fn poll_registered<T>(
        &self,
        cx: &Context<'_>,
        waker: &Waker,
        mut ready: impl FnMut(&mut Ring) -> Option<T>,
        caught_up: impl FnOnce(&Ring) -> bool,
    ) -> (Poll<T>, bool) {
        let state = &*self.state;
        let mut ring = state.lock();
        // Registered before the upstream is polled: a wake-up that comes
        // between the two finds it.
        state.wakers.register(self.token, waker);
        let mut drove = false;
        let mut drives = 0;
        let (out, quiet) = loop {
            if let Some(value) = ready(&mut ring) {
                // Quiet if nothing is left to read and the upstream is not
                // due (its waker, or a drive's `wake_all`, fires `waker`).
                let quiet = !drove && caught_up(&ring) && !state.wakers.is_upstream_due();
                break (Poll::Ready(value), quiet);
            }
            if drives == DRIVES_PER_POLL {
                // A busy upstream with nothing for this handle: let the
                // runtime run others, and come back.
                cx.waker().wake_by_ref();
                break (Poll::Pending, false);
            }
            if !state.wakers.take_upstream_due() {
                // Polled since it last woke, and it had nothing: its
                // wake-up wakes this task (registered above).
                break (Poll::Pending, !drove);
            }
            drives += 1;
            match ring.drive(&state.upstream_waker) {
                Driven::Pushed => {
                    drove = true;
                    state.wakers.upstream_gave();
                }
                Driven::Pending => break (Poll::Pending, !drove),
                Driven::Ended => break (Poll::Pending, false),
            }
        };
        drop(ring);
        if drove {
            // The others wait for what this drive added.
            state.wakers.wake_all(Some(self.token));
        }
        (out, quiet)
    }
}

impl Drop for Waiter {
    fn drop(&mut self) {
        self.state.wakers.release(self.token);
    }
}
