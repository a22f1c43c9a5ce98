//! The state of every instance as a run of events tells it, and the
//! difference between two such states: what a subscription that lagged is
//! told, and what a store is read from.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::SystemTime;

use crate::model::{EventKind, InstanceEvent, InstanceId, Labels, Origin};
use crate::watch::Item;

/// One instance as the [`Store`](crate::Store) knows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Instance {
    /// Which instance.
    pub id: InstanceId,
    /// Whether it runs.
    pub running: bool,
    /// Its labels.
    pub labels: Arc<Labels>,
    /// The engine's identity of its incarnation, when known (see
    /// [`Listed::uid`](crate::Listed::uid)).
    pub uid: Option<Arc<str>>,
    /// When it entered this state: the `at` of the event that put it there
    /// (the engine's time for a live event, lookout's for a snapshot's).
    pub since: SystemTime,
}

impl Instance {
    /// The instance an event brings into being (or, for an event out of
    /// order — a start of an unknown instance —, as well as it can).
    fn new(e: &InstanceEvent) -> Self {
        Self {
            id: e.id.clone(),
            running: e.kind == EventKind::Started,
            labels: Arc::clone(&e.labels),
            uid: e.uid.clone(),
            since: e.at,
        }
    }

    /// A start or a stop of this instance.
    fn follow(&mut self, e: &InstanceEvent) {
        self.running = e.kind == EventKind::Started;
        self.since = e.at;
        if !Arc::ptr_eq(&self.labels, &e.labels) {
            self.labels = Arc::clone(&e.labels);
        }
        if e.uid.is_some() {
            self.uid.clone_from(&e.uid);
        }
    }
}

/// One instance after one more event of it (`None`: it does not exist).
pub(crate) fn follow(instance: &mut Option<Instance>, e: &InstanceEvent) {
    match (e.kind, instance.as_mut()) {
        (EventKind::Removed, _) => *instance = None,
        (EventKind::Started | EventKind::Stopped, Some(i)) => i.follow(e),
        _ => *instance = Some(Instance::new(e)),
    }
}

/// The state after a run of events: each event applied in order.
#[derive(Clone, Debug, Default)]
pub(crate) struct Present {
    // foldhash, as in the tracker: ids are named by the user's own engine.
    map: HashMap<InstanceId, Instance, foldhash::fast::RandomState>,
}

impl Present {
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    /// One more event (see [`follow`]).
    pub(crate) fn apply(&mut self, e: &InstanceEvent) {
        match (e.kind, self.map.get_mut(e.id.as_str())) {
            (EventKind::Removed, _) => {
                self.map.remove(e.id.as_str());
            }
            (EventKind::Started | EventKind::Stopped, Some(i)) => i.follow(e),
            _ => {
                self.map.insert(e.id.clone(), Instance::new(e));
            }
        }
    }

    pub(crate) fn get(&self, id: &str) -> Option<Instance> {
        self.map.get(id).cloned()
    }

    /// Every instance, ordered by id.
    pub(crate) fn instances(&self) -> Vec<Instance> {
        let mut all: Vec<Instance> = self.map.values().cloned().collect();
        all.sort_unstable_by(|a, b| a.id.cmp(&b.id));
        all
    }

    /// The present as events of `origin` (`Created`, then `Started` for one
    /// that runs), ordered by id: a new subscription's start.
    pub(crate) fn tell(&self, origin: Origin, out: &mut VecDeque<Item>) {
        let at = SystemTime::now();
        let mut all: Vec<&Instance> = self.map.values().collect();
        all.sort_unstable_by(|a, b| a.id.cmp(&b.id));
        for i in all {
            out.push_back(event(EventKind::Created, i, origin, at));
            if i.running {
                out.push_back(event(EventKind::Started, i, origin, at));
            }
        }
    }

    /// The transitions from `self` (what a subscription last saw) to `now`,
    /// once each, ordered by id, as [`Origin::Resync`] events: the same rules
    /// as a reconnect's snapshot (a different uid under one id is a removal
    /// and a creation; a change of labels alone is no transition).
    pub(crate) fn diff(&self, now: &Present, out: &mut VecDeque<Item>) -> usize {
        let at = SystemTime::now();
        let before = out.len();
        let mut ids: Vec<&InstanceId> = self
            .map
            .keys()
            .filter(|id| !now.map.contains_key(id.as_str()))
            .chain(now.map.keys())
            .collect();
        ids.sort_unstable();
        let resync = Origin::Resync;
        for id in ids {
            match (self.map.get(id.as_str()), now.map.get(id.as_str())) {
                (Some(seen), None) => out.push_back(event(EventKind::Removed, seen, resync, at)),
                (seen, Some(entry)) => {
                    let other = seen
                        .filter(|s| matches!((&s.uid, &entry.uid), (Some(a), Some(b)) if a != b));
                    if let Some(old) = other {
                        out.push_back(event(EventKind::Removed, old, resync, at));
                    }
                    match seen.filter(|_| other.is_none()) {
                        None => {
                            out.push_back(event(EventKind::Created, entry, resync, at));
                            if entry.running {
                                out.push_back(event(EventKind::Started, entry, resync, at));
                            }
                        }
                        Some(s) if s.running != entry.running => {
                            let kind = if entry.running {
                                EventKind::Started
                            } else {
                                EventKind::Stopped
                            };
                            out.push_back(event(kind, entry, resync, at));
                        }
                        Some(_) => {}
                    }
                }
                (None, None) => {}
            }
        }
        out.len() - before
    }
}

fn event(kind: EventKind, e: &Instance, origin: Origin, at: SystemTime) -> Item {
    Item::Event(InstanceEvent {
        id: e.id.clone(),
        kind,
        at,
        origin,
        labels: Arc::clone(&e.labels),
        uid: e.uid.clone(),
    })
}
