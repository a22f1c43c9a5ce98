//! What every handle of a hub points to ([`HubState`]: the ring under its
//! lock, and the wakers of the handles that wait), and a handle's place among
//! the waiting ([`Waiter`]), whose poll drives the upstream when the handle
//! finds nothing of its own.

use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};

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
        Self { state, token }
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
        mut ready: impl FnMut(&mut Ring) -> Option<T>,
    ) -> Poll<T> {
        let state = &*self.state;
        let mut ring = state.lock();
        // Registered before the upstream is polled: a wake-up that comes
        // between the two finds it.
        state.wakers.register(self.token, cx.waker());
        let mut drove = false;
        let mut drives = 0;
        let out = loop {
            if let Some(value) = ready(&mut ring) {
                break Poll::Ready(value);
            }
            if drives == DRIVES_PER_POLL {
                // A busy upstream with nothing for this handle: let the
                // runtime run others, and come back.
                cx.waker().wake_by_ref();
                break Poll::Pending;
            }
            if !state.wakers.take_upstream_due() {
                // Polled since it last woke, and it had nothing: its
                // wake-up wakes this task (registered above).
                break Poll::Pending;
            }
            drives += 1;
            match ring.drive(&state.upstream_waker) {
                Driven::Pushed => {
                    drove = true;
                    state.wakers.upstream_gave();
                }
                Driven::Pending | Driven::Ended => break Poll::Pending,
            }
        };
        drop(ring);
        if drove {
            // The others wait for what this drive added.
            state.wakers.wake_all(Some(self.token));
        }
        out
    }
}

impl Drop for Waiter {
    fn drop(&mut self) {
        self.state.wakers.release(self.token);
    }
}
