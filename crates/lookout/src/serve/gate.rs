//! A signal a connection's task waits on beside its work (its token, its
//! socket's read readiness), looked at for the cost of an atomic load per
//! wake-up instead of being polled at each: it is polled with a waker of
//! its own, which marks it fired before it wakes the task, and polled again
//! only once that waker fired (or when the task's waker is another one).
//! A connection's task is woken for every event it writes; what it waits
//! on beside needs a look only when it says so.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Wake, Waker};

/// One signal's gate (see the module).
#[derive(Debug, Default)]
pub struct Gate {
    /// The waker the signal holds, since its last poll.
    fired: Option<Arc<Fired>>,
}

/// The waker a signal holds: marks itself fired, then wakes the task.
#[derive(Debug)]
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

impl Gate {
    /// `poll` of the signal, with the gate's waker, if it may have changed
    /// since its last poll; `None` (not polled) if it cannot have. A signal
    /// that is ready is polled again at the next call (a ready signal need
    /// not wake anyone again).
    pub fn poll<T>(
        &mut self,
        cx: &Context<'_>,
        poll: impl FnOnce(&mut Context<'_>) -> Poll<T>,
    ) -> Option<Poll<T>> {
        if let Some(f) = &self.fired
            && !f.fired.load(Ordering::Acquire)
            && f.task.will_wake(cx.waker())
        {
            return None;
        }
        let fired = Arc::new(Fired {
            fired: AtomicBool::new(false),
            task: cx.waker().clone(),
        });
        let waker = Waker::from(Arc::clone(&fired));
        let polled = poll(&mut Context::from_waker(&waker));
        // Ready: looked at again next time (it holds no waker to fire).
        self.fired = polled.is_pending().then_some(fired);
        Some(polled)
    }
}

#[cfg(test)]
mod tests {
    use std::cell::{Cell, RefCell};
    use std::sync::atomic::AtomicUsize;

    use super::*;

    /// A task's waker that counts its wake-ups.
    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[test]
    fn polled_again_only_once_its_waker_fired_or_the_task_changed() {
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let task = Waker::from(Arc::clone(&count));
        let cx = Context::from_waker(&task);
        let mut gate = Gate::default();
        let held: RefCell<Option<Waker>> = RefCell::new(None);
        let polls = Cell::new(0);
        let pending = |cx: &mut Context<'_>| {
            polls.set(polls.get() + 1);
            *held.borrow_mut() = Some(cx.waker().clone());
            Poll::<()>::Pending
        };
        assert_eq!(gate.poll(&cx, pending), Some(Poll::Pending));
        // Not fired: not polled, however often the task is woken.
        for _ in 0..10 {
            assert_eq!(gate.poll(&cx, pending), None);
        }
        assert_eq!(polls.get(), 1);
        // Fired: the task is woken, and the signal polled again.
        held.take().expect("the signal's waker").wake();
        assert_eq!(count.0.load(Ordering::Relaxed), 1);
        assert_eq!(gate.poll(&cx, pending), Some(Poll::Pending));
        assert_eq!(polls.get(), 2);
        assert_eq!(gate.poll(&cx, pending), None);
        // Another task: polled again (its waker is to be held instead).
        let other = Waker::from(Arc::new(Count(AtomicUsize::new(0))));
        assert_eq!(
            gate.poll(&Context::from_waker(&other), pending),
            Some(Poll::Pending)
        );
        assert_eq!(polls.get(), 3);
        // Ready: looked at each time.
        assert_eq!(gate.poll(&cx, |_| Poll::Ready(7)), Some(Poll::Ready(7)));
        assert_eq!(gate.poll(&cx, |_| Poll::Ready(8)), Some(Poll::Ready(8)));
    }
}
