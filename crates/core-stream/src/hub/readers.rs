//! Where each subscription reads the ring, and which of them lagged: the
//! cursors the ring moves, and the sweep its eviction makes when it is about
//! to overtake one.

use std::sync::Arc;

use super::present::Present;

/// A subscription as the hub sees it.
#[derive(Debug)]
pub(super) struct Reader {
    /// The sequence number of the next item it reads.
    pub(super) cursor: u64,
    /// It skips the first snapshot's events ([`Start::Baseline`](crate::Start::Baseline)).
    baseline: bool,
    /// It lagged: the state it last saw, and where its cursor was.
    pub(super) lagged: Option<Lagged>,
}

/// What a reader that lagged keeps instead of the items.
#[derive(Debug)]
pub(super) struct Lagged {
    /// The state before the first item it did not get.
    pub(super) seen: Arc<Present>,
    /// Its cursor when it lagged.
    pub(super) at: u64,
}

/// Every reader of one hub, each in its slot.
#[derive(Debug)]
pub(super) struct Readers {
    slots: Vec<Option<Reader>>,
    /// Slots of readers that are gone, reused first.
    free: Vec<usize>,
    /// How many are open.
    count: usize,
    /// No reader that has not lagged has a cursor below this (the ring's
    /// eviction only looks for laggards when it reaches it).
    low_cursor: u64,
}

impl Default for Readers {
    fn default() -> Self {
        Self {
            slots: Vec::new(),
            free: Vec::new(),
            count: 0,
            low_cursor: u64::MAX,
        }
    }
}

impl Readers {
    /// How many are open.
    pub(super) fn len(&self) -> usize {
        self.count
    }

    /// A new reader at `cursor`; returns its slot.
    pub(super) fn add(&mut self, cursor: u64, baseline: bool) -> usize {
        let reader = Reader {
            cursor,
            baseline,
            lagged: None,
        };
        self.lower(cursor);
        self.count += 1;
        if let Some(slot) = self.free.pop() {
            self.slots[slot] = Some(reader);
            slot
        } else {
            self.slots.push(Some(reader));
            self.slots.len() - 1
        }
    }

    pub(super) fn remove(&mut self, slot: usize) {
        self.slots[slot] = None;
        self.free.push(slot);
        self.count -= 1;
    }

    #[inline]
    pub(super) fn get(&self, slot: usize) -> Option<&Reader> {
        self.slots[slot].as_ref()
    }

    #[inline]
    pub(super) fn get_mut(&mut self, slot: usize) -> Option<&mut Reader> {
        self.slots[slot].as_mut()
    }

    /// A reader that has not lagged is at `cursor` now (or will be).
    #[inline]
    pub(super) fn lower(&mut self, cursor: u64) {
        self.low_cursor = self.low_cursor.min(cursor);
    }

    /// Whether a reader may be at `seq` (the item that leaves the ring).
    #[inline]
    pub(super) fn may_be_at(&self, seq: u64) -> bool {
        seq >= self.low_cursor
    }

    /// The readers at `seq`, which is leaving the ring, lag (keeping
    /// `before`, the state before it); the lowest cursor of the others is
    /// found anew. `head` is the ring's head, `first_connected` the end of
    /// the first snapshot's events, when it came.
    ///
    /// A baseline reader still before the end of the first snapshot skips
    /// to it rather than lag: the snapshot's events are its baseline, not
    /// news (so are the statuses of the dials that failed before it), and
    /// if it lags at the end, the state it saw is the snapshot's.
    pub(super) fn mark_laggards(
        &mut self,
        seq: u64,
        head: u64,
        first_connected: Option<u64>,
        before: &Arc<Present>,
    ) {
        let mut low = u64::MAX;
        for reader in self.slots.iter_mut().flatten() {
            if reader.lagged.is_some() {
                continue;
            }
            if reader.baseline && reader.cursor <= seq {
                match first_connected {
                    None => reader.cursor = head,
                    Some(end) if reader.cursor < end => reader.cursor = end,
                    Some(_) => {}
                }
            }
            if reader.cursor <= seq {
                reader.lagged = Some(Lagged {
                    seen: Arc::clone(before),
                    at: reader.cursor,
                });
            } else {
                low = low.min(reader.cursor);
            }
        }
        self.low_cursor = low;
    }
}
