//! What the watch has told ([`Seen`]): the newest revision, and how many
//! keys the range held then; what the probe compares with the store.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Mutex, PoisonError};

use tokio::sync::Notify;

use crate::client::kv::Newest;
use crate::client::wire::{Event, EventType};

/// The newest revision the watch has told everything up to (its events,
/// its progress notifications, where it started), and how many keys the
/// range held then: what the probe compares with the store
/// ([`Seen::caught_up`]).
#[derive(Debug, Default)]
pub(crate) struct Seen {
    revision: AtomicI64,
    counted: Mutex<Counted>,
    advanced: Notify,
}

/// How many keys the watched range holds at a revision, as the list and
/// the watch's events (creations, deletions) told it: a response's events
/// are counted once all its observations are yielded. Kept across
/// sessions: a resumed watch's replay of events already counted (its
/// revision at most `revision`) is not counted again.
#[derive(Clone, Copy, Debug, Default)]
struct Counted {
    revision: i64,
    keys: i64,
}

impl Seen {
    /// The newest revision told.
    pub(crate) fn revision(&self) -> i64 {
        self.revision.load(Ordering::Relaxed)
    }

    fn counted(&self) -> Counted {
        *self.counted.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The watch told everything up to `revision` (an event).
    pub(crate) fn advance(&self, revision: i64) {
        if self.revision.fetch_max(revision, Ordering::Relaxed) < revision {
            self.advanced.notify_waiters();
        }
    }

    /// A progress notification: every event up to `revision` has been
    /// sent. Whether it moved past what the watch had told: only then is
    /// it news (a sign of life, a cursor). A member cut off from its
    /// cluster goes on notifying at its stale revision; a notification
    /// that moves nothing is not taken for life, so that the probe runs.
    pub(crate) fn progress(&self, revision: i64) -> bool {
        let moved = revision > self.revision();
        self.count(&[], revision);
        self.advance(revision);
        moved
    }

    /// A new watch from `revision`: what it told starts there.
    pub(crate) fn reset(&self, revision: i64) {
        self.revision.store(revision, Ordering::Relaxed);
        self.advanced.notify_waiters();
    }

    /// The range held `keys` keys at `revision` (a list).
    pub(crate) fn listed(&self, revision: i64, keys: i64) {
        *self.counted.lock().unwrap_or_else(PoisonError::into_inner) = Counted { revision, keys };
    }

    /// Counts the keys the events create and delete (those past what was
    /// counted), then everything up to `revision` (the response's) is told.
    pub(crate) fn count(&self, events: &[Event], revision: i64) {
        let mut c = self.counted.lock().unwrap_or_else(PoisonError::into_inner);
        let after = c.revision;
        for ev in events.iter().filter(|e| e.kv.mod_revision > after) {
            match ev.kind {
                EventType::Put if ev.kv.version == 1 => c.keys += 1,
                EventType::Put => {}
                EventType::Delete => c.keys -= 1,
            }
        }
        c.revision = c.revision.max(revision);
        drop(c);
        self.advanced.notify_waiters();
    }

    /// Waits until the watch has told what `store` shows: the newest put,
    /// and as many keys (or everything up to the revision it was read at).
    /// A deletion the watch has not told leaves one key too many: a watch
    /// that died while only deletions happen is noticed too.
    pub(crate) async fn caught_up(&self, store: Newest) {
        loop {
            // Created before the check: a notification in between is kept.
            let advanced = self.advanced.notified();
            if self.has(store) {
                return;
            }
            advanced.await;
        }
    }

    /// Whether the watch has told what `store` shows (see [`Seen::caught_up`]).
    pub(crate) fn has(&self, store: Newest) -> bool {
        let c = self.counted();
        self.revision() >= store.put && (c.keys == store.keys || c.revision >= store.revision)
    }

    /// What the watch told, for an error: its revision, and its count of keys.
    pub(crate) fn told(&self) -> (i64, i64) {
        (self.revision(), self.counted().keys)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mapping::tests::put;

    #[test]
    fn the_count_of_keys_skips_what_it_counted_and_the_probe_needs_it() {
        let seen = Seen::default();
        seen.listed(10, 3);
        seen.reset(10);
        let mut created = put("p/i/h/a", 11, "running", "live");
        created.kv.version = 1;
        let mut deleted = put("p/i/h/b", 12, "removed", "live");
        deleted.kind = EventType::Delete;
        let events = [created, deleted.clone()];
        seen.count(&events, 12);
        seen.advance(12);
        assert_eq!(seen.told(), (12, 3));
        // A replay of what was counted counts nothing.
        seen.count(&events, 12);
        assert_eq!(seen.told(), (12, 3));
        let store = |put, keys, revision| Newest {
            put,
            keys,
            revision,
        };
        assert!(seen.has(store(11, 3, 20)), "as many keys");
        assert!(!seen.has(store(13, 3, 20)), "a newer put");
        assert!(!seen.has(store(11, 2, 20)), "a deletion not told");
        let mut deleted_later = deleted;
        deleted_later.kv.mod_revision = 14;
        seen.count(&[deleted_later], 14);
        assert!(seen.has(store(11, 2, 20)), "told");
        seen.count(&[], 20);
        assert!(seen.has(store(11, 7, 20)), "a progress notification at it");
    }

    #[test]
    fn a_progress_notification_is_news_only_when_it_moves() {
        let seen = Seen::default();
        seen.listed(10, 3);
        seen.reset(10);
        assert!(!seen.progress(10), "at the list's revision: stale");
        assert!(!seen.progress(9), "behind it");
        assert_eq!(seen.told(), (10, 3));
        assert!(seen.progress(12), "past it");
        assert_eq!(seen.told(), (12, 3));
        assert!(!seen.progress(12), "again at it: stale");
        // An event told moves what was told: a notification at it is stale.
        seen.advance(15);
        assert!(!seen.progress(15));
        assert!(seen.progress(16));
    }
}
