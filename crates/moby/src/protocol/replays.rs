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
//! [`Replays`] remembers the last 4096 to 8192 events a feed decoded (two
//! generations of [`Replays::GENERATION`]), by a key mixed from their time,
//! object and action; an event it remembers is a replay. An event older than the newest one seen but not remembered is
//! passed on as before: engines do not always write events in time order
//! (each Podman process stamps its events, then takes the log's lock), and
//! a clock stepped back must not silence an engine.
//!
//! The kept half also holds events from before the subscription, which no
//! [`Replays`] of it has seen: a subscription resumed from a cursor drops
//! them as it drops any event at or before its cursor, and one from now by
//! the engine's `Date` when it answered (`Feed::subscribed_at`).

use std::collections::HashSet;
use std::hash::{BuildHasher, Hasher};

/// The events a feed decoded lately, to know one sent again: two
/// generations of keys, the current one and the one before it.
#[derive(Debug, Default)]
pub(crate) struct Replays {
    current: HashSet<u64, Prehashed>,
    previous: HashSet<u64, Prehashed>,
}

impl Replays {
    /// How many events a generation holds: the last 4096 to 8192 events
    /// are remembered, and a replay reaching further back is told again.
    /// Podman's event log is 1 MB by default (`events_logfile_max_size`)
    /// and a rotation keeps its newer half, at most some 2 000 events (the
    /// shortest are about 250 bytes); so only a log set above ~2 MB could
    /// replay more than this. Two sets of 4096 keys: some 150 KiB.
    pub(crate) const GENERATION: usize = 4096;

    /// Whether the event at `time` (ns) with this `uid` and `action` was
    /// decoded before; remembers it when not. A full generation becomes
    /// the previous one, and the one before it is forgotten (its memory
    /// kept for the next).
    pub(crate) fn again(&mut self, time: i64, uid: &str, action: &str) -> bool {
        let key = key(time, uid, action);
        if self.current.contains(&key) || self.previous.contains(&key) {
            return true;
        }
        if self.current.len() >= Self::GENERATION {
            self.previous.clear();
            std::mem::swap(&mut self.current, &mut self.previous);
        }
        self.current.insert(key);
        false
    }
}

/// An event's key: its time, and the start and length of its object's id
/// and of its action, mixed. Two events meet only in the same nanosecond
/// with ids alike in their first 16 bytes (Docker's and Podman's are
/// random hex). Not keyed: an engine that wanted to hide an event would
/// not need to collide one. (`SipHash` over the whole id and action cost
/// 6 % of an event in the firehose bench.)
fn key(time: i64, uid: &str, action: &str) -> u64 {
    let word = |s: &str, at: usize| {
        let mut w = [0u8; 8];
        let part = s.as_bytes().get(at..).unwrap_or_default();
        let n = part.len().min(8);
        w[..n].copy_from_slice(&part[..n]);
        u64::from_le_bytes(w)
    };
    let lengths = (uid.len() as u64) << 32 | action.len() as u64;
    [word(uid, 0), word(uid, 8), word(action, 0), lengths]
        .into_iter()
        .fold(mix(time.cast_unsigned()), |h, w| mix(h ^ w))
}

/// splitmix64's finalizer: every bit of `x` moves every bit of the result.
fn mix(x: u64) -> u64 {
    let x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    let x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The sets' keys are already mixed ([`key`]): they are taken as they are.
#[derive(Debug, Default, Clone, Copy)]
struct Prehashed;

impl BuildHasher for Prehashed {
    type Hasher = Key;
    fn build_hasher(&self) -> Key {
        Key(0)
    }
}

/// A key's own value.
#[derive(Debug)]
struct Key(u64);

impl Hasher for Key {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        // Only `u64`s are hashed here; any other input still mixes in.
        for b in bytes {
            self.0 = mix(self.0 ^ u64::from(*b));
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
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
    fn it_remembers_two_generations_only() {
        let mut r = Replays::default();
        let generation = i64::try_from(Replays::GENERATION).expect("small");
        for t in 0..=2 * generation {
            assert!(!r.again(t, "c", "exec_died"));
        }
        // The third generation began: the first is forgotten, the second
        // remembered, and no set outgrew a generation.
        assert_eq!(r.previous.len(), Replays::GENERATION);
        assert_eq!(r.current.len(), 1);
        assert!(!r.again(0, "c", "exec_died"));
        assert!(r.again(generation, "c", "exec_died"));
        assert!(r.again(2 * generation, "c", "exec_died"));
    }

    #[test]
    fn ids_and_actions_tell_events_apart() {
        let id = "4199f93cb9e1237691aacaa75c163a5d84c0d37da26e1560c3533ec3b6515d42";
        let keys = [
            key(7, id, "start"),
            key(7, &id[..63], "start"),
            key(7, id, "stop"),
            key(8, id, "start"),
            key(7, "4199f93cb9e12376ff", "start"),
            key(7, id, "exec_start: sh -c a"),
            key(7, id, "exec_start: sh -c ab"),
        ];
        let distinct: HashSet<u64> = keys.iter().copied().collect();
        assert_eq!(distinct.len(), keys.len(), "{keys:x?}");
    }
}
