//! Events an engine sends a second time within one subscription.
//!
//! Podman before 4.5 reads its event log file again from the start after it
//! rotates it (podman #17665, fixed in 4.5 by #17771; Debian 12 ships 4.3):
//! the events the rotation kept, the newer half of the file, come again on
//! every open `/events` stream, in their order and with their own times,
//! after newer ones. Told again, they would be news the engine did not say
//! now: found by the Podman e2e lifecycle scenario, where a running, ready
//! container was told `unready` (its replayed `start`), then `stopped` and
//! `started` again, the replayed events of its first stop and start.
//!
//! [`Replays`] remembers the last [`Replays::KEPT`] events a feed decoded,
//! by a hash of their time, object and action; an event it remembers is a
//! replay. An event older than the newest one seen but not remembered is
//! passed on as before: engines do not always write events in time order
//! (each Podman process stamps its events, then takes the log's lock), and
//! a clock stepped back must not silence an engine.
//!
//! The kept half also holds events from before the subscription, which no
//! [`Replays`] of it has seen: a subscription resumed from a cursor drops
//! them as it drops any event at or before its cursor, and one from now by
//! the engine's `Date` when it answered (`Feed::subscribed_at`).

use std::collections::{HashSet, VecDeque};
use std::hash::{BuildHasher, RandomState};

/// The events a feed decoded lately, to know one sent again.
#[derive(Debug, Default)]
pub(crate) struct Replays {
    /// The remembered keys, oldest first.
    order: VecDeque<u64>,
    keys: HashSet<u64>,
    hasher: RandomState,
}

impl Replays {
    /// How many events are remembered: a replay reaching further back is
    /// told again. Podman's event log is 1 MB by default
    /// (`events_logfile_max_size`) and a rotation keeps its newer half, at
    /// most some 2 000 events (the shortest are about 250 bytes); so
    /// only a log set above ~4 MB could replay more than this.
    pub(crate) const KEPT: usize = 8192;

    /// Whether the event at `time` (ns) with this `uid` and `action` was
    /// decoded before; remembers it when not (forgetting the oldest first
    /// when full, so neither collection outgrows [`KEPT`](Self::KEPT):
    /// some 210 KiB in all).
    pub(crate) fn again(&mut self, time: i64, uid: &str, action: &str) -> bool {
        let key = self.hasher.hash_one((time, uid, action));
        if self.keys.contains(&key) {
            return true;
        }
        if self.order.len() >= Self::KEPT
            && let Some(oldest) = self.order.pop_front()
        {
            self.keys.remove(&oldest);
        }
        self.keys.insert(key);
        self.order.push_back(key);
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_seen_is_a_replay_and_a_late_one_is_not() {
        let mut r = Replays::default();
        assert!(!r.again(10, "c1", "start"));
        assert!(!r.again(20, "c1", "die"));
        // Late (older than the newest) but new: passed on.
        assert!(!r.again(15, "c2", "start"));
        // The same time and object, another action: another event.
        assert!(!r.again(20, "c1", "stop"));
        assert!(r.again(10, "c1", "start"));
        assert!(r.again(20, "c1", "die"));
        assert!(r.again(15, "c2", "start"));
    }

    #[test]
    fn it_remembers_the_last_kept_events_only() {
        let mut r = Replays::default();
        let kept = i64::try_from(Replays::KEPT).expect("small");
        for t in 0..=kept {
            assert!(!r.again(t, "c", "exec_died"));
        }
        assert_eq!(r.order.len(), Replays::KEPT);
        assert_eq!(r.keys.len(), Replays::KEPT);
        assert!(
            r.order.capacity() <= Replays::KEPT,
            "{}",
            r.order.capacity()
        );
        // The oldest was forgotten; the one after it is remembered.
        assert!(!r.again(0, "c", "exec_died"));
        assert!(r.again(kept, "c", "exec_died"));
    }
}
