//! What `/events` writes of each hub item, made once for every client: the
//! NDJSON line and the SSE frame of an item, as shared [`Bytes`], and whether
//! a label filter takes it, decided once per (item, filter).
//!
//! Every subscription of the hub yields the hub's items with the same
//! [`position`](lookout_core::Subscription::position): the first client to
//! write an item encodes it here, keyed by that position, and every other
//! client writes the same bytes (a reference count, no copy). What is told
//! to one client alone (the present at its start, a lag's difference, the
//! status on joining) has no position and is encoded for it alone.
//!
//! The position is also the SSE `id:` (and the NDJSON `"id"`), prefixed by
//! this process's random epoch: `EPOCH-POSITION`, which `Last-Event-ID` or
//! `?since=` hand back to resume ([`Frames::place`]). An id of another
//! process (a restarted lookout) carries another epoch: it cannot be placed.
//!
//! A server of several engines has one `Frames` per engine (each hub has
//! positions of its own), every line and frame saying its `"host"`. Their
//! positions cannot be told apart in one id, so there the SSE `id:` is the
//! epoch alone (a reconnecting client gets each engine's present as a
//! resync) and NDJSON lines have no `"id"`.

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasher, RandomState};
use std::sync::{Arc, Mutex, PoisonError, Weak};

use bytes::Bytes;
use lookout_core::{InstanceEvent, Item, Labels, Status};

use super::labels::LabelFilter;
use crate::output::{Format, event_line_of, publisher_line, status_line_of};

const JSON: Format = Format {
    json: true,
    color: false,
};

/// A label filter of `/events`, interned: clients with the same filter
/// share one, and its decisions.
#[derive(Debug)]
pub struct Filter {
    /// Unique among the filters of this process (never reused).
    id: u64,
    /// Sorted; empty: every item.
    want: LabelFilter,
}

impl Filter {
    pub fn matches(&self, labels: &Labels) -> bool {
        self.want.matches(labels)
    }
}

/// One hub item, encoded.
struct Slot {
    /// The NDJSON line (events only: statuses are not written as NDJSON).
    ndjson: Option<Bytes>,
    sse: Bytes,
    /// An event's labels, for the filters.
    labels: Option<Arc<Labels>>,
    /// What each filter decided, by filter id (few filters in practice).
    verdicts: Vec<(u64, bool)>,
}

/// The encoded items by position: `slots[0]` is position `base`.
#[derive(Default)]
struct Ring {
    base: u64,
    slots: VecDeque<Option<Slot>>,
}

/// The shared encodings of the latest hub items.
pub struct Frames {
    provider: &'static str,
    /// The engine's name, when the server serves several.
    host: Option<Arc<str>>,
    epoch: u64,
    /// How many positions back are kept (the hub's queue and a read batch:
    /// a client further behind has lagged).
    capacity: usize,
    ring: Mutex<Ring>,
    filters: Mutex<(u64, HashMap<LabelFilter, Weak<Filter>>)>,
}

impl std::fmt::Debug for Frames {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Frames")
            .field("epoch", &format_args!("{:016x}", self.epoch))
            .field("capacity", &self.capacity)
            .finish_non_exhaustive()
    }
}

impl Frames {
    /// A fresh random epoch: one per server (shared by its engines' frames).
    pub fn epoch() -> u64 {
        // std's RandomState is seeded from the OS's randomness, per process.
        RandomState::new().hash_one(std::process::id())
    }

    /// Frames for a hub of `queue` items, of the engine `host` when the
    /// server serves several (else `None`).
    pub fn new(provider: &'static str, host: Option<Arc<str>>, queue: usize, epoch: u64) -> Self {
        Self {
            provider,
            host,
            epoch,
            capacity: queue.saturating_add(128),
            ring: Mutex::new(Ring::default()),
            filters: Mutex::new((0, HashMap::new())),
        }
    }

    /// The id of a position: `EPOCH-POSITION`; of several engines' frames,
    /// `EPOCH` alone.
    pub fn id(&self, position: u64) -> String {
        match self.host {
            None => format!("{:016x}-{position}", self.epoch),
            Some(_) => format!("{:016x}", self.epoch),
        }
    }

    /// The position of an id this process gave; `None` for any other (of
    /// another process, malformed).
    pub fn place(&self, id: &str) -> Option<u64> {
        let (epoch, position) = id.trim().split_once('-')?;
        if epoch.len() != 16 || u64::from_str_radix(epoch, 16).ok()? != self.epoch {
            return None;
        }
        if !position.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        position.parse().ok()
    }

    /// The interned filter.
    pub fn filter(&self, want: LabelFilter) -> Arc<Filter> {
        let want = want.canonical();
        let mut guard = self.filters.lock().unwrap_or_else(PoisonError::into_inner);
        let (next, map) = &mut *guard;
        if let Some(f) = map.get(&want).and_then(Weak::upgrade) {
            return f;
        }
        map.retain(|_, f| f.strong_count() > 0);
        *next += 1;
        let f = Arc::new(Filter {
            id: *next,
            want: want.clone(),
        });
        map.insert(want, Arc::downgrade(&f));
        f
    }

    /// What a client with `filter` is sent of the hub's item at `position`
    /// (`sse`: as an SSE frame, else as an NDJSON line), if anything.
    pub fn shared(&self, position: u64, item: &Item, filter: &Filter, sse: bool) -> Option<Bytes> {
        let mut ring = self.ring.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(index) = ring.index(position, self.capacity) else {
            // Older than what is kept (a client that should have lagged).
            drop(ring);
            return self.encode(Some(position), item, filter, sse);
        };
        let slot = ring.slots[index].get_or_insert_with(|| self.slot(position, item));
        if let Some(labels) = &slot.labels
            && !filter.want.is_empty()
        {
            let known = slot.verdicts.iter().find(|(id, _)| *id == filter.id);
            let verdict = if let Some(&(_, v)) = known {
                v
            } else {
                let v = filter.matches(labels);
                slot.verdicts.push((filter.id, v));
                v
            };
            if !verdict {
                return None;
            }
        }
        if sse {
            Some(slot.sse.clone())
        } else {
            slot.ndjson.clone()
        }
    }

    /// What a client is sent of an item (with a position: a hub item; else
    /// told to it alone), encoded for it alone.
    pub fn encode(
        &self,
        position: Option<u64>,
        item: &Item,
        filter: &Filter,
        sse: bool,
    ) -> Option<Bytes> {
        match item {
            Item::Event(e) if filter.matches(&e.labels) => {
                let (ndjson, frame) = self.event(position, e);
                Some(if sse { frame } else { ndjson })
            }
            Item::Status(s) if sse => Some(self.status(position, s)),
            Item::Event(_) | Item::Status(_) => None,
        }
    }

    fn slot(&self, position: u64, item: &Item) -> Slot {
        match item {
            Item::Event(e) => {
                let (ndjson, sse) = self.event(Some(position), e);
                Slot {
                    ndjson: Some(ndjson),
                    sse,
                    labels: Some(Arc::clone(&e.labels)),
                    verdicts: Vec::new(),
                }
            }
            Item::Status(s) => Slot {
                ndjson: None,
                sse: self.status(Some(position), s),
                labels: None,
                verdicts: Vec::new(),
            },
        }
    }

    /// An event's NDJSON line and SSE frame: the `--json` line, with the id
    /// as the last key of the line (when it has one) and as the frame's
    /// `id:`.
    fn event(&self, position: Option<u64>, e: &InstanceEvent) -> (Bytes, Bytes) {
        let line = event_line_of(self.host.as_deref(), self.provider, e, JSON);
        match position {
            Some(p) if self.host.is_some() => (
                Bytes::from(format!("{line}\n")),
                Bytes::from(format!(
                    "event: instance\nid: {}\ndata: {line}\n\n",
                    self.id(p)
                )),
            ),
            Some(p) => {
                let id = self.id(p);
                let open = line.strip_suffix('}').unwrap_or(&line);
                (
                    Bytes::from(format!("{open},\"id\":\"{id}\"}}\n")),
                    Bytes::from(format!("event: instance\nid: {id}\ndata: {line}\n\n")),
                )
            }
            None => (
                Bytes::from(format!("{line}\n")),
                Bytes::from(format!("event: instance\ndata: {line}\n\n")),
            ),
        }
    }

    /// A source's publisher status (`lookout etcd`) as an SSE frame, told
    /// to one client (no id): `event: status`, its host the source.
    pub fn publisher(p: &lookout_etcd::PublisherStatus) -> Bytes {
        let line = publisher_line(p, JSON);
        Bytes::from(format!("event: status\ndata: {line}\n\n"))
    }

    fn status(&self, position: Option<u64>, s: &Status) -> Bytes {
        let line = status_line_of(self.host.as_deref(), self.provider, s, JSON);
        Bytes::from(match position {
            Some(p) => format!("event: status\nid: {}\ndata: {line}\n\n", self.id(p)),
            None => format!("event: status\ndata: {line}\n\n"),
        })
    }
}

impl Ring {
    /// The index of `position`'s slot, made room for; `None` when it is
    /// older than the `capacity` latest.
    fn index(&mut self, position: u64, capacity: usize) -> Option<usize> {
        if self.slots.is_empty() {
            self.base = position;
        }
        if position < self.base {
            return None;
        }
        let index = usize::try_from(position - self.base).ok()?;
        if index >= self.slots.len() {
            if index - self.slots.len() > capacity {
                // A jump far ahead: start over there.
                self.slots.clear();
                self.base = position;
                self.slots.push_back(None);
                return Some(0);
            }
            self.slots.resize_with(index + 1, || None);
        }
        let mut index = index;
        while self.slots.len() > capacity {
            self.slots.pop_front();
            self.base += 1;
            index = index.checked_sub(1)?;
        }
        Some(index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lookout_core::{EventKind, Origin};
    use std::time::{Duration, UNIX_EPOCH};

    fn event(id: &str, labels: &[(&str, &str)]) -> Item {
        Item::Event(
            InstanceEvent::new(
                id.into(),
                EventKind::Started,
                UNIX_EPOCH + Duration::from_secs(1),
                Origin::Live,
            )
            .labels(Arc::new(
                labels
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
            )),
        )
    }

    #[test]
    fn one_encoding_per_item_shared_by_every_client_and_filter() {
        let frames = Frames::new("docker", None, 4, 0xab);
        let all = frames.filter(LabelFilter::default());
        let web = frames.filter(LabelFilter::of(&[("app", "web")]));
        let same = frames.filter(LabelFilter::of(&[("app", "web"), ("app", "web")]));
        assert!(Arc::ptr_eq(&web, &same), "one filter for the same pairs");
        let item = event("w", &[("app", "web")]);
        let a = frames.shared(7, &item, &all, false).expect("a line");
        let b = frames.shared(7, &item, &web, false).expect("a line");
        // The very same bytes, not a copy.
        assert_eq!(a.as_ptr(), b.as_ptr());
        assert_eq!(
            std::str::from_utf8(&a).expect("UTF-8"),
            "{\"provider\":\"docker\",\"instance\":\"w\",\"kind\":\"started\",\"origin\":\"live\",\
             \"at\":\"1970-01-01T00:00:01.000000000Z\",\"labels\":{\"app\":\"web\"},\
             \"id\":\"00000000000000ab-7\"}\n"
        );
        let sse = frames.shared(7, &item, &same, true).expect("a frame");
        assert!(
            sse.starts_with(b"event: instance\nid: 00000000000000ab-7\ndata: {\"provider\""),
            "{sse:?}"
        );
        let db = frames.filter(LabelFilter::of(&[("app", "db")]));
        assert!(frames.shared(7, &item, &db, true).is_none());
        let ring = frames.ring.lock().expect("lock");
        let slot = ring.slots[0].as_ref().expect("slot");
        assert_eq!(slot.verdicts, [(web.id, true), (db.id, false)]);
    }

    #[test]
    fn ids_place_only_this_processs_positions() {
        let frames = Frames::new("docker", None, 4, 0xab);
        assert_eq!(frames.place(&frames.id(42)), Some(42));
        assert_eq!(frames.place("00000000000000ab-0"), Some(0));
        let other = Frames::new("docker", None, 4, 0xac);
        for bad in [
            other.id(42).as_str(),
            "",
            "42",
            "ab-42",
            "00000000000000ab-",
            "00000000000000ab--1",
            "00000000000000ab-+1",
            "00000000000000ab-99999999999999999999",
            "zzzzzzzzzzzzzzzz-1",
        ] {
            assert_eq!(frames.place(bad), None, "{bad}");
        }
    }

    #[test]
    fn the_ring_keeps_the_latest_positions() {
        let frames = Frames::new("docker", None, 2, 1);
        let all = frames.filter(LabelFilter::default());
        let item = event("w", &[]);
        let first = frames.shared(0, &item, &all, false).expect("line");
        for p in 1..500 {
            frames.shared(p, &item, &all, false).expect("line");
        }
        let ring = frames.ring.lock().expect("lock");
        assert_eq!(ring.slots.len(), frames.capacity);
        assert_eq!(ring.base, 500 - frames.capacity as u64);
        drop(ring);
        // Too old for the ring: encoded alone, the same bytes.
        assert_eq!(frames.shared(0, &item, &all, false), Some(first));
    }
}
