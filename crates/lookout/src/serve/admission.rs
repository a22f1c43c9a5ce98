//! Who holds one of `--max-connections` slots, and whose slot is given up
//! when a client comes and they are all taken.
//!
//! A slot is *busy* while one of its requests is answered (an `/events`
//! stream, for as long as it is open) and *idle* otherwise: before its
//! first request head is complete (a slowloris, a client that connected
//! and said nothing, a TLS handshake under way) and between keep-alive
//! requests. When every slot is taken, the oldest idle one is shed (its
//! connection closed at once, as a server closes an idle keep-alive
//! connection) and the newcomer takes it; when every slot is busy, the
//! newcomer is refused (`503` with `Retry-After`). So idle connections,
//! however many, never keep a client with a request from being answered,
//! and nothing waits in the listen backlog: a full server says so.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, PoisonError};

use tokio_util::sync::CancellationToken;

/// The slots (one per open connection).
#[derive(Debug)]
pub struct Admission {
    max: usize,
    /// Every slot's shedding signal is its child: cancelled, it cancels
    /// them all (one signal per connection to wait on, for either).
    parent: CancellationToken,
    slots: Mutex<Slots>,
}

#[derive(Debug, Default)]
struct Slots {
    /// The next slot's id: ids grow with age, so the smallest is the oldest.
    next: u64,
    /// Requests in flight of each open slot, and its shedding signal.
    open: BTreeMap<u64, (u32, CancellationToken)>,
    /// The open slots with no request in flight, oldest first.
    idle: BTreeSet<u64>,
}

/// What [`Admission::admit`] decided.
#[derive(Debug)]
pub enum Admitted {
    /// A slot, and how many idle connections were shed for it (0 or 1).
    Slot { ticket: Ticket, shed: u64 },
    /// Every slot is busy.
    Full,
}

/// One connection's slot, given back on drop.
#[derive(Debug)]
pub struct Ticket {
    admission: Arc<Admission>,
    id: u64,
    shed: CancellationToken,
}

/// One request in flight on a slot (held by its response body), ended on
/// drop.
#[derive(Debug)]
pub struct Busy {
    admission: Arc<Admission>,
    id: u64,
    /// Its slot's token (a busy slot is never shed: cancelled at shutdown).
    stop: CancellationToken,
}

impl Admission {
    /// At most `max` slots (at least one), each shed also when `parent`
    /// is cancelled.
    pub fn new(max: usize, parent: &CancellationToken) -> Arc<Self> {
        Arc::new(Self {
            max: max.max(1),
            parent: parent.clone(),
            slots: Mutex::default(),
        })
    }

    fn slots(&self) -> std::sync::MutexGuard<'_, Slots> {
        self.slots.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A slot for a new connection: a free one, else the oldest idle one's
    /// (which is told to close), else [`Admitted::Full`].
    pub fn admit(self: &Arc<Self>) -> Admitted {
        let mut s = self.slots();
        let mut shed = 0;
        if s.open.len() >= self.max {
            let Some(oldest) = s.idle.pop_first() else {
                return Admitted::Full;
            };
            if let Some((_, token)) = s.open.remove(&oldest) {
                token.cancel();
            }
            shed = 1;
        }
        let id = s.next;
        s.next += 1;
        let token = self.parent.child_token();
        s.open.insert(id, (0, token.clone()));
        s.idle.insert(id);
        Admitted::Slot {
            ticket: Ticket {
                admission: Arc::clone(self),
                id,
                shed: token,
            },
            shed,
        }
    }

    /// Slots open now.
    pub fn open(&self) -> usize {
        self.slots().open.len()
    }
}

impl Ticket {
    /// Cancelled when this connection is shed (close it), or when the
    /// parent is (see which).
    pub fn shed(&self) -> &CancellationToken {
        &self.shed
    }

    /// A request of this connection begins; it is busy until the guard
    /// (kept by the response body) drops.
    pub fn busy(&self) -> Busy {
        let mut s = self.admission.slots();
        if let Some((n, _)) = s.open.get_mut(&self.id) {
            *n += 1;
            s.idle.remove(&self.id);
        }
        Busy {
            admission: Arc::clone(&self.admission),
            id: self.id,
            stop: self.shed.clone(),
        }
    }
}

impl Busy {
    /// Cancelled when the request's connection is to end: at shutdown (a
    /// busy connection is not shed). The connection's own token, so that a
    /// look at it takes no lock another connection takes.
    pub fn stop(&self) -> &CancellationToken {
        &self.stop
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut s = self.admission.slots();
        s.open.remove(&self.id);
        s.idle.remove(&self.id);
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        let mut s = self.admission.slots();
        let idle = match s.open.get_mut(&self.id) {
            Some((n, _)) => {
                *n = n.saturating_sub(1);
                *n == 0
            }
            None => false,
        };
        if idle {
            s.idle.insert(self.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot(a: &Arc<Admission>) -> (Ticket, u64) {
        match a.admit() {
            Admitted::Slot { ticket, shed } => (ticket, shed),
            Admitted::Full => panic!("full"),
        }
    }

    #[test]
    fn the_oldest_idle_slot_is_shed_and_busy_ones_never() {
        let a = Admission::new(3, &CancellationToken::new());
        let (first, _) = slot(&a);
        let (second, _) = slot(&a);
        let (third, _) = slot(&a);
        let streaming = first.busy();
        // Full: the oldest idle (second, not the busy first) goes.
        let (fourth, shed) = slot(&a);
        assert_eq!(shed, 1);
        assert!(!first.shed().is_cancelled());
        assert!(second.shed().is_cancelled());
        assert_eq!(a.open(), 3);
        // Its ticket dropping later frees nothing twice.
        drop(second);
        assert_eq!(a.open(), 3);
        let _b3 = third.busy();
        let _b4 = fourth.busy();
        assert!(matches!(a.admit(), Admitted::Full), "all busy");
        // A request that ends makes its slot idle again, hence sheddable.
        drop(streaming);
        let (_fifth, shed) = slot(&a);
        assert_eq!(shed, 1);
        assert!(first.shed().is_cancelled());
        // A dropped ticket frees its slot.
        drop(first);
        drop(third);
        assert_eq!(a.open(), 2);
        let (_sixth, shed) = slot(&a);
        assert_eq!(shed, 0);
    }

    #[test]
    fn a_slot_busy_twice_is_idle_only_when_both_end() {
        let a = Admission::new(1, &CancellationToken::new());
        let (t, _) = slot(&a);
        let one = t.busy();
        let two = t.busy();
        drop(one);
        assert!(matches!(a.admit(), Admitted::Full));
        drop(two);
        let (_next, shed) = slot(&a);
        assert_eq!(shed, 1);
        assert!(t.shed().is_cancelled());
    }
}
