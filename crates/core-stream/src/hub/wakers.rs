//! Every task waiting on a hub, woken together: the upstream is polled with
//! one waker that wakes them all, so whichever of them runs next drives it,
//! and one that stopped polling never holds up the others (the pattern of
//! `futures::future::Shared`). Only one of them drives it per wake-up: the
//! upstream is polled again only once it woke (or gave an item), not by
//! every handle that finds nothing new.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Wake, Waker};

/// The wakers of the handles that wait, each in its handle's slot.
#[derive(Debug)]
pub(crate) struct Wakers {
    slots: Mutex<Slots>,
    /// The upstream may have something: it woke since it was last polled,
    /// or its last poll gave an item (or it was never polled). Polling it
    /// while this is false finds nothing: its waker (this) was registered
    /// and has not fired.
    upstream_due: AtomicBool,
}

impl Default for Wakers {
    fn default() -> Self {
        Self {
            slots: Mutex::default(),
            upstream_due: AtomicBool::new(true),
        }
    }
}

#[derive(Debug, Default)]
struct Slots {
    wakers: Vec<Option<Waker>>,
    /// Slots of handles that are gone, reused first.
    free: Vec<usize>,
}

impl Wakers {
    fn slots(&self) -> std::sync::MutexGuard<'_, Slots> {
        // A panic elsewhere cannot leave the slots half-written.
        self.slots.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A slot for a new handle.
    pub(crate) fn token(&self) -> usize {
        let mut s = self.slots();
        if let Some(t) = s.free.pop() {
            t
        } else {
            s.wakers.push(None);
            s.wakers.len() - 1
        }
    }

    /// The handle is gone: its slot is free.
    pub(crate) fn release(&self, token: usize) {
        let mut s = self.slots();
        s.wakers[token] = None;
        s.free.push(token);
    }

    /// The handle `token` waits: wake it with `waker`.
    pub(crate) fn register(&self, token: usize, waker: &Waker) {
        let mut s = self.slots();
        match &mut s.wakers[token] {
            Some(w) if w.will_wake(waker) => {}
            slot => *slot = Some(waker.clone()),
        }
    }

    /// Whether the upstream is due a poll; if so, it is no longer (a
    /// wake-up during the poll that follows makes it due again).
    pub(crate) fn take_upstream_due(&self) -> bool {
        self.upstream_due.swap(false, Ordering::AcqRel)
    }

    /// The upstream gave items: it may have more without waking.
    pub(crate) fn upstream_gave(&self) {
        self.upstream_due.store(true, Ordering::Release);
    }

    /// Wakes every waiting handle but `except` (which is running); each
    /// registers again when it next waits.
    pub(crate) fn wake_all(&self, except: Option<usize>) {
        let woken: Vec<Waker> = {
            let mut s = self.slots();
            s.wakers
                .iter_mut()
                .enumerate()
                .filter(|(t, _)| Some(*t) != except)
                .filter_map(|(_, w)| w.take())
                .collect()
        };
        for w in woken {
            w.wake();
        }
    }
}

/// The upstream's waker: it wakes every waiting handle.
impl Wake for Wakers {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        // Due before anyone is woken: whoever runs next drives it.
        self.upstream_due.store(true, Ordering::Release);
        self.wake_all(None);
    }
}
