//! A queue between the run's feed and a slow consumer of its own (a
//! command per event, `--exec`): the feed pushes and never waits.
//!
//! It keeps every item in order while it is shorter than its bound; beyond
//! the bound an instance's newer item replaces its queued one since the
//! last barrier (a status: nothing before it is replaced), so its memory
//! stays bounded by the instances, not by the events: the consumer then
//! gets each instance's latest state, not every transition on the way.
//! The publisher's queue (`publish/task.rs`) is this queue over its own
//! items too.

use std::collections::{HashMap, VecDeque};

/// What the queue needs of an item: the instance it is of (`None`: a
/// barrier, never replaced).
pub trait Keyed {
    fn key(&self) -> Option<&str>;
}

/// The queue.
#[derive(Debug)]
pub struct Coalescing<T> {
    items: VecDeque<T>,
    /// Where each instance's latest item is in `items`, since the last
    /// barrier.
    at: HashMap<String, usize>,
    bound: usize,
    /// Items replaced by a newer one of the same instance.
    coalesced: u64,
}

impl<T: Keyed> Coalescing<T> {
    /// A queue coalescing from `bound` items on.
    pub fn new(bound: usize) -> Self {
        Self {
            items: VecDeque::new(),
            at: HashMap::new(),
            bound,
            coalesced: 0,
        }
    }

    /// Queues `item`: `true` when it replaced a queued one (the queue is
    /// past its bound).
    pub fn push(&mut self, item: T) -> bool {
        let Some(key) = item.key() else {
            self.at.clear();
            self.items.push_back(item);
            return false;
        };
        if self.items.len() >= self.bound
            && let Some(&i) = self.at.get(key)
            && let Some(slot) = self.items.get_mut(i)
        {
            *slot = item;
            self.coalesced += 1;
            return true;
        }
        self.at.insert(key.to_owned(), self.items.len());
        self.items.push_back(item);
        false
    }

    /// Everything queued, in order; the queue empty.
    pub fn take(&mut self) -> VecDeque<T> {
        self.at.clear();
        std::mem::take(&mut self.items)
    }

    /// Nothing queued.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// What is queued, in order (for tests).
    #[cfg(test)]
    pub fn queued(&self) -> &VecDeque<T> {
        &self.items
    }

    /// How many items are queued.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// How many items were replaced so far.
    #[cfg(test)]
    pub fn coalesced(&self) -> u64 {
        self.coalesced
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq)]
    enum Item {
        Of(String, u32),
        Barrier,
    }

    impl Keyed for Item {
        fn key(&self) -> Option<&str> {
            match self {
                Self::Of(k, _) => Some(k),
                Self::Barrier => None,
            }
        }
    }

    fn of(k: &str, n: u32) -> Item {
        Item::Of(k.to_owned(), n)
    }

    #[test]
    fn keeps_every_item_in_order_below_the_bound() {
        let mut q = Coalescing::new(8);
        assert!(!q.push(of("a", 1)));
        assert!(!q.push(of("a", 2)));
        assert!(!q.push(Item::Barrier));
        assert!(!q.push(of("a", 3)));
        assert_eq!(
            q.take(),
            [of("a", 1), of("a", 2), Item::Barrier, of("a", 3)]
        );
        assert_eq!(q.len(), 0);
        assert_eq!(q.coalesced(), 0);
    }

    #[test]
    fn beyond_the_bound_an_instance_keeps_its_latest_item_since_the_last_barrier() {
        let mut q = Coalescing::new(3);
        q.push(of("a", 1));
        q.push(of("b", 1));
        q.push(of("c", 1));
        assert!(q.push(of("a", 2)), "replaced");
        assert_eq!(q.len(), 3, "bounded by the instances");
        q.push(Item::Barrier);
        assert!(!q.push(of("a", 3)), "nothing before a barrier is replaced");
        assert!(q.push(of("a", 4)));
        assert_eq!(
            q.take(),
            [
                of("a", 2),
                of("b", 1),
                of("c", 1),
                Item::Barrier,
                of("a", 4)
            ]
        );
        assert_eq!(q.coalesced(), 2);
    }
}
