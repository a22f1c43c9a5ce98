//! The state of every instance as a run of events tells it, and the
//! difference between two such states: what a subscription that lagged is
//! told, and what a store is read from.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::SystemTime;

use crate::item::Item;
use crate::model::{EventKind, InstanceEvent, InstanceId, Labels, Origin, Readiness, Reason};
use crate::tracker::Transitions;

/// One instance as the [`Store`](crate::Store) knows it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Instance {
    /// Which instance.
    pub id: InstanceId,
    /// Whether it runs.
    pub running: bool,
    /// Whether it is ready (readiness watched; see
    /// [`Readiness::is_ready`]): only while it runs.
    pub ready: bool,
    /// With readiness watched, the provider's detail as of the instance's
    /// last event (a change of the detail that changes no readiness, such as
    /// a Swarm service going from 1 to 2 of 3 running tasks, is no event and
    /// is not seen here); `None` without.
    pub readiness: Option<Readiness>,
    /// Its labels.
    pub labels: Arc<Labels>,
    /// The engine's identity of its incarnation, when known (see
    /// [`Listed::uid`](crate::Listed::uid)).
    pub uid: Option<Arc<str>>,
    /// When it entered this state: the `at` of its last event (the engine's
    /// time for a live event, lookout's for a snapshot's).
    pub since: SystemTime,
    /// Told [`Stopping`](EventKind::Stopping): it runs, and the engine was
    /// asked to stop it.
    pub stopping: bool,
    /// Why, as last told: for one that is not running, why it stopped (its
    /// outcome…); for a running one, why it fails (the last
    /// [`Failing`](EventKind::Failing)'s message, until it is ready again)
    /// or why it is stopping; `None` when the engine said nothing.
    pub reason: Option<Arc<Reason>>,
}

impl Instance {
    /// The instance an event brings into being (or, for an event out of
    /// order — a start of an unknown instance —, as well as it can): what
    /// the [`Store`](crate::Store) keeps of a `Created`. With
    /// [`follow`](Self::follow), for a consumer that keeps instances of its
    /// own beside what it keeps with them (the `lookout` CLI's `--render`).
    #[must_use]
    pub fn from_event(e: &InstanceEvent) -> Self {
        let ready = e.kind == EventKind::Ready;
        Self {
            id: e.id.clone(),
            running: ready
                || matches!(
                    e.kind,
                    EventKind::Started
                        | EventKind::Unready
                        | EventKind::Stopping
                        | EventKind::Failing
                ),
            ready,
            readiness: e.readiness,
            labels: Arc::clone(&e.labels),
            uid: e.uid.clone(),
            since: e.at,
            stopping: e.kind == EventKind::Stopping,
            reason: e.reason.clone(),
        }
    }

    /// A start, a stop, a change of readiness, a failure or a stop
    /// request of this instance, taken in as the [`Store`](crate::Store)
    /// does (a `Removed` or `Created` is the caller's: forget it, or
    /// [`from_event`](Self::from_event) anew).
    pub fn follow(&mut self, e: &InstanceEvent) {
        match e.kind {
            EventKind::Ready | EventKind::Unready => {
                self.running = true;
                self.ready = e.kind == EventKind::Ready;
                if self.ready {
                    self.reason = None;
                }
            }
            EventKind::Failing => {
                self.running = true;
                self.reason.clone_from(&e.reason);
            }
            EventKind::Stopping => {
                self.running = true;
                self.ready = false;
                self.stopping = true;
                self.reason.clone_from(&e.reason);
            }
            kind => {
                self.running = kind == EventKind::Started;
                self.ready = false;
                self.stopping = false;
                self.reason.clone_from(&e.reason);
            }
        }
        self.readiness = e.readiness;
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
        (EventKind::Created, _) | (_, None) => *instance = Some(Instance::from_event(e)),
        (_, Some(i)) => i.follow(e),
    }
}

/// The state after a run of events: each event applied in order.
#[derive(Clone, Debug, Default)]
pub(crate) struct Present {
    // foldhash, as in the tracker: ids are named by the user's own engine.
    map: HashMap<InstanceId, Instance, foldhash::fast::RandomState>,
    /// How many of them are ready.
    ready: usize,
}

impl Present {
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    /// How many instances are ready.
    pub(crate) fn ready(&self) -> usize {
        self.ready
    }

    /// One more event (see [`follow`]).
    pub(crate) fn apply(&mut self, e: &InstanceEvent) {
        let was_ready = match (e.kind, self.map.get_mut(e.id.as_str())) {
            (EventKind::Removed, _) => self.map.remove(e.id.as_str()).is_some_and(|i| i.ready),
            (EventKind::Created, _) | (_, None) => self
                .map
                .insert(e.id.clone(), Instance::from_event(e))
                .is_some_and(|i| i.ready),
            (_, Some(i)) => {
                let was = i.ready;
                i.follow(e);
                was
            }
        };
        let is_ready = match e.kind {
            EventKind::Removed => false,
            _ => self.map.get(e.id.as_str()).is_some_and(|i| i.ready),
        };
        self.ready = self.ready + usize::from(is_ready) - usize::from(was_ready);
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

    /// The transitions from `self` (what a subscription last saw) to `now`,
    /// once each, ordered by id, as [`Origin::Resync`] events: the same rules
    /// as a reconnect's snapshot (a different uid under one id is a removal
    /// and a creation; a change of labels alone is no transition; readiness
    /// changes only while running, and a start that is ready is followed by
    /// `Ready`).
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
                    let mut push = |kind| out.push_back(event(kind, entry, resync, at));
                    match seen.filter(|_| other.is_none()) {
                        None => {
                            for kind in kinds_of(entry) {
                                push(kind);
                            }
                        }
                        Some(s) if s.running != entry.running => {
                            if entry.running {
                                for kind in kinds_of(entry).skip(1) {
                                    push(kind);
                                }
                            } else {
                                push(EventKind::Stopped);
                            }
                        }
                        Some(s) if entry.stopping && !s.stopping => push(EventKind::Stopping),
                        Some(s) if !entry.stopping => {
                            if s.ready != entry.ready {
                                push(if entry.ready {
                                    EventKind::Ready
                                } else {
                                    EventKind::Unready
                                });
                            }
                            if entry.running && entry.reason.is_some() && entry.reason != s.reason {
                                push(EventKind::Failing);
                            }
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

/// What a watch knew when it was shared goes into the hub's present, event
/// by event.
impl Transitions for Present {
    fn push(&mut self, event: InstanceEvent) {
        self.apply(&event);
    }
}

/// The events that bring instance `i` about, in order: `Created` (with
/// why it stopped, if it does not run), then `Started` if it runs, `Ready`
/// if it is, and `Stopping` or `Failing` if it is.
fn kinds_of(i: &Instance) -> impl Iterator<Item = EventKind> {
    let last = if i.stopping {
        Some(EventKind::Stopping)
    } else {
        (i.running && i.reason.is_some()).then_some(EventKind::Failing)
    };
    [
        Some(EventKind::Created),
        i.running.then_some(EventKind::Started),
        i.ready.then_some(EventKind::Ready),
        last,
    ]
    .into_iter()
    .flatten()
}

/// Event `kind` of instance `e`: with its reason where the kind tells one.
fn event(kind: EventKind, e: &Instance, origin: Origin, at: SystemTime) -> Item {
    let reason = match kind {
        EventKind::Created => (!e.running).then(|| e.reason.clone()).flatten(),
        EventKind::Stopped | EventKind::Stopping | EventKind::Failing => e.reason.clone(),
        _ => None,
    };
    Item::Event(InstanceEvent {
        id: e.id.clone(),
        kind,
        at,
        origin,
        labels: Arc::clone(&e.labels),
        uid: e.uid.clone(),
        readiness: e.readiness,
        reason,
    })
}

/// The present told as events of one origin (`Created`, then `Started` for
/// one that runs and `Ready` for one that is, ordered by id), a batch at a time: what a new
/// subscription starts with, from a sorted copy of the present that the
/// subscriptions made at one moment share.
#[derive(Debug)]
pub(crate) struct Telling {
    instances: Arc<[Instance]>,
    /// The next instance to tell.
    next: usize,
    /// How many of its events are told (see [`kinds_of`]).
    told: usize,
    origin: Origin,
    at: SystemTime,
}

impl Telling {
    pub(crate) fn new(instances: Arc<[Instance]>, origin: Origin) -> Self {
        Self {
            instances,
            next: 0,
            told: 0,
            origin,
            at: SystemTime::now(),
        }
    }

    /// Up to `max` more events into `out`; true when all are told.
    pub(crate) fn fill(&mut self, out: &mut VecDeque<Item>, max: usize) -> bool {
        let mut told = 0;
        while told < max {
            let Some(i) = self.instances.get(self.next) else {
                return true;
            };
            let mut kinds = kinds_of(i).skip(self.told);
            let kind = kinds.next().unwrap_or(EventKind::Created);
            out.push_back(event(kind, i, self.origin, self.at));
            if kinds.next().is_none() {
                self.told = 0;
                self.next += 1;
            } else {
                self.told += 1;
            }
            told += 1;
        }
        self.next == self.instances.len()
    }
}
