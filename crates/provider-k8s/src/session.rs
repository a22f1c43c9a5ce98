//! One session: one feed per kind (see `feed.rs`), merged into one stream of
//! observations whose snapshots always hold every kind. The kinds' objects
//! outlive the session (handed back to the dial on drop), so that a redial
//! that resumes one kind's watch and must relist another can still tell the
//! whole truth in its snapshot. A snapshot is told from the stores one
//! object at a time, as the core reads it (only the ids to tell are noted
//! when it begins), never queued whole: at 20 000 objects a queue of their
//! observations was a few MB more at the sync's peak, and its buffer stayed.

use std::collections::{HashMap, VecDeque};
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, ready};
use std::time::SystemTime;

use lookout_core::{
    BoxError, Change, EventKind, InstanceId, Labels, Listed, Observation, Readiness, Reason,
};
use tokio_stream::{Stream, StreamMap};

use crate::cursor::K8sCursor;
use crate::feed::{Feed, FeedEvent, feed};
use crate::object::Seen;
use crate::probe::ProbeLease;
use crate::settings::Settings;

/// One object as the session keeps it: what a snapshot lists (the id and
/// uid and the labels shared with the core's, the readiness when it is
/// watched, why it does not run or, running, fails), and whether it is
/// being deleted; and, while its kind lists, whether the list found it.
#[derive(Clone, Debug)]
pub(crate) struct Entry {
    running: bool,
    uid: Option<Arc<str>>,
    labels: Labels,
    readiness: Option<Readiness>,
    reason: Option<Arc<Reason>>,
    deleting: bool,
    found: bool,
}

/// The current objects of each kind, by the kind's slot (its place in the
/// settings' kinds); what a session hands back.
pub(crate) type Stores = HashMap<usize, HashMap<InstanceId, Entry>>;

/// Where a session leaves its objects for the next dial: the objects of
/// each kind as last listed and watched, for the cluster they came from.
#[derive(Default)]
pub(crate) struct Carry(Mutex<Option<(String, Stores)>>);

impl std::fmt::Debug for Carry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let slot = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let objects: Option<usize> = slot
            .as_ref()
            .map(|(_, stores)| stores.values().map(HashMap::len).sum());
        f.debug_struct("Carry").field("objects", &objects).finish()
    }
}

impl Carry {
    /// Takes what the last session left, if it watched `cluster`.
    pub(crate) fn take(&self, cluster: &str) -> Stores {
        let mut slot = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        match slot.take() {
            Some((c, stores)) if c == cluster => stores,
            _ => Stores::new(),
        }
    }

    fn put(&self, cluster: String, stores: Stores) {
        let mut slot = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        *slot = Some((cluster, stores));
    }
}

/// One kind within the session.
#[derive(Default)]
// Four independent facts about the kind's feed, not a state machine.
#[allow(clippy::struct_excessive_bools)]
struct KindState {
    /// What its instance ids start with, once it is resolved.
    prefix: Option<Arc<str>>,
    /// The current objects; `None` until the kind's first list begins
    /// (or, when it resumes, those the last session left). A list updates
    /// it in place: every object is marked not found when it begins, each
    /// one it lists is found, and those still not found are gone when it
    /// is done, so a relist never holds the kind's objects twice.
    store: Option<HashMap<InstanceId, Entry>>,
    /// A list in progress: the store is part old, part new.
    listing: bool,
    /// Its feed is watching: a watch request was accepted since its last
    /// list (or, resumed, at all).
    watching: bool,
    /// It listed in this session since the last snapshot.
    listed: bool,
    /// It resumed its watch and has not listed since: its changes before
    /// the session's first snapshot are the apiserver's exact replay.
    replaying: bool,
    /// Its version is gone (`410`) and its list is not done: a redial
    /// lists it rather than watch from a version known to be gone.
    expired: bool,
}

/// What the session yields next.
enum Out {
    /// This observation.
    Obs(Observation<K8sCursor>),
    /// The snapshot begun (`ResyncBegin` is before it): its objects, read
    /// from the stores one at a time (`Merge::snapshot`), then its end.
    Snapshot,
}

/// The session stream: feeds merged, snapshots combined.
pub(crate) struct Merge {
    feeds: StreamMap<usize, Feed>,
    kinds: HashMap<usize, KindState>,
    cursor: K8sCursor,
    out: VecDeque<Out>,
    /// The objects of the snapshot being told (kind, id), and how many of
    /// them were told. Nothing changes the stores meanwhile: the feeds are
    /// polled only once `out` is empty.
    snapshot: Vec<(usize, InstanceId)>,
    told: usize,
    /// The session yielded its first snapshot or `Resumed`: changes are live.
    synced: bool,
    /// Every watch resumed: `Resumed` once the feeds have nothing ready.
    resume_due: bool,
    /// Changes a listed kind's watch saw before every kind was listed:
    /// told after the first snapshot, which holds each kind as its list
    /// found it (they happened after it).
    early: Vec<(usize, FeedEvent)>,
    /// The session failed and yielded its error: it ends.
    done: bool,
    /// Where the objects go when the session ends, and for which cluster.
    carry: Arc<Carry>,
    cluster: String,
    // Declared last: the probe keeps the client only while the session lives.
    _lease: ProbeLease,
}

/// What the session starts from.
pub(crate) struct Start {
    /// The cursor to resume from (`None`: list every kind).
    pub(crate) cursor: Option<K8sCursor>,
    /// The objects the last session left (of this cluster).
    pub(crate) stores: Stores,
    /// Where to leave them, and the cluster's identity.
    pub(crate) carry: Arc<Carry>,
    pub(crate) cluster: String,
}

impl Merge {
    pub(crate) fn new(
        settings: &Arc<Settings>,
        client: &kube::Client,
        start: Start,
        lease: ProbeLease,
    ) -> Self {
        let Start {
            cursor,
            mut stores,
            carry,
            cluster,
        } = start;
        let cursor = cursor.unwrap_or_else(|| K8sCursor::new(Arc::clone(&settings.kinds)));
        let mut feeds = StreamMap::with_capacity(settings.kinds.len());
        let mut kinds = HashMap::with_capacity(settings.kinds.len());
        let mut resumed = Vec::new();
        for (slot, kind) in settings.kinds.iter().enumerate() {
            let mut state = KindState::default();
            // Resume only with both the version and the objects at it.
            let from = match (cursor.get(slot), stores.remove(&slot)) {
                (Some(v), Some(store)) => {
                    state.store = Some(store);
                    state.replaying = true;
                    resumed.push(kind);
                    Some(Arc::clone(v))
                }
                _ => None,
            };
            feeds.insert(
                slot,
                feed(kind.clone(), client.clone(), Arc::clone(settings), from),
            );
            kinds.insert(slot, state);
        }
        tracing::debug!(
            kinds = ?settings.kinds,
            ?resumed,
            namespace = settings.namespace.as_deref().unwrap_or("*"),
            selector = settings.label_selector.as_deref().unwrap_or(""),
            watch_timeout_s = settings.watch_timeout,
            "watching"
        );
        Self {
            feeds,
            kinds,
            cursor,
            out: VecDeque::new(),
            snapshot: Vec::new(),
            told: 0,
            synced: false,
            resume_due: false,
            early: Vec::new(),
            done: false,
            carry,
            cluster,
            _lease: lease,
        }
    }

    /// Drives the feeds until every kind is watching (listed and its watch
    /// accepted, or its watch resumed), and the first snapshot (or
    /// `Resumed`) is queued: the dial completes then, so the dial timeout
    /// bounds the lists and a cluster that cannot list or watch is a dial
    /// error.
    pub(crate) fn poll_synced(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        while !self.synced {
            match Pin::new(&mut self.feeds).poll_next(cx) {
                Poll::Ready(Some((kind, Ok(event)))) => self.handle(kind, event),
                Poll::Ready(Some((_, Err(e)))) => {
                    self.done = true;
                    return Poll::Ready(Err(e.into()));
                }
                Poll::Ready(None) => return Poll::Ready(Err("no kind to watch".into())),
                // Every watch is accepted and nothing more has arrived:
                // the replay so far is queued, the session is connected.
                Poll::Pending if self.resume_due => self.resumed(),
                Poll::Pending => return Poll::Pending,
            }
        }
        Poll::Ready(Ok(()))
    }

    fn handle(&mut self, kind: usize, event: FeedEvent) {
        let state = self.kinds.entry(kind).or_default();
        if !self.synced
            && !state.replaying
            && matches!(event, FeedEvent::Applied(..) | FeedEvent::Deleted(..))
        {
            self.early.push((kind, event));
            return;
        }
        match event {
            FeedEvent::Resolved(prefix) => state.prefix = Some(prefix),
            FeedEvent::Gone => {
                // Its objects are gone with it: told as a snapshot's net
                // effect when there were any (or the first one is due).
                self.early.retain(|(k, _)| *k != kind);
                let had = state.store.as_ref().is_some_and(|s| !s.is_empty());
                state.listing = false;
                state.store = Some(HashMap::new());
                state.watching = true;
                state.replaying = false;
                state.expired = false;
                state.listed = had || !self.synced;
                self.cursor.clear(kind);
                self.maybe_sync();
            }
            FeedEvent::ListBegin => {
                // A new list supersedes what the kind's last watch saw.
                self.early.retain(|(k, _)| *k != kind);
                state.listing = true;
                let store = state.store.get_or_insert_with(HashMap::new);
                for e in store.values_mut() {
                    e.found = false;
                }
                state.watching = false;
                state.replaying = false;
            }
            FeedEvent::Listed(l) => {
                let (id, entry, _) = entry(l);
                state
                    .store
                    .get_or_insert_with(HashMap::new)
                    .insert(id, entry);
            }
            FeedEvent::ListDone(version) => {
                let store = state.store.get_or_insert_with(HashMap::new);
                store.retain(|_, e| e.found);
                if store.capacity() > 2 * store.len() + 64 {
                    store.shrink_to_fit();
                }
                tracing::debug!(kind = ?state.prefix, objects = store.len(), %version, "list done");
                state.listing = false;
                state.listed = true;
                state.expired = false;
                self.cursor.set(kind, version);
                self.maybe_sync();
            }
            FeedEvent::Watching => {
                state.watching = !state.listing;
                self.maybe_sync();
            }
            FeedEvent::Applied(seen, version) => self.applied(kind, seen, version),
            FeedEvent::Deleted(id, uid, version) => {
                self.cursor.set(kind, version);
                let replay = state.replaying;
                if let Some(store) = &mut state.store {
                    store.remove(&id);
                }
                // The labels: the known ones.
                let change = Change::new(id, EventKind::Removed, SystemTime::now())
                    .uid(uid)
                    .cursor(Some(self.cursor.clone()));
                self.tell(change, replay);
            }
            FeedEvent::Bookmark(version) => {
                self.cursor.set(kind, version);
                if self.synced {
                    self.out
                        .push_back(Out::Obs(Observation::Progress(Some(self.cursor.clone()))));
                }
            }
            FeedEvent::Skipped => self.out.push_back(Out::Obs(Observation::Progress(None))),
            FeedEvent::Expired => {
                state.watching = false;
                state.expired = true;
                self.out.push_back(Out::Obs(Observation::Progress(None)));
            }
        }
    }

    /// An object added or modified (see the comments within).
    fn applied(&mut self, kind: usize, seen: Seen, version: Arc<str>) {
        let state = self.kinds.entry(kind).or_default();
        self.cursor.set(kind, version);
        let replay = state.replaying;
        let store = state.store.get_or_insert_with(HashMap::new);
        let (id, entry, labels) = entry(seen);
        let was_deleting = store.get(&id).is_some_and(|e| e.deleting);
        // Every ADDED and MODIFIED is told, whatever changed: a
        // status-only MODIFIED (readiness watched) is a `Started` of
        // a known running object, which the core swallows as a
        // start but applies the readiness (`Ready`/`Unready` when
        // it changes whether the object can serve) and the failure
        // of (`Failing` when its message is new; none: it passed).
        // A running object being deleted is `Stopping`, on every
        // MODIFIED until it goes (a `Started` then would tell the
        // stop abandoned); a stop carries why (`Reason::stop`).
        let (kind, reason) = match (entry.running, entry.deleting) {
            (false, _) => (EventKind::Stopped, entry.reason.clone()),
            (true, true) => (EventKind::Stopping, None),
            (true, false) => (EventKind::Started, entry.reason.clone()),
        };
        let at = SystemTime::now();
        // The interned set (the same as the store's): the core
        // keeps its own `Arc` when they are unchanged.
        let labels = Some(Arc::new(labels));
        // As its deletion begins, first the readiness it has then
        // (kstatus's `Terminating`: `Unready`), as before there was
        // a `Stopping`; then the stop request.
        let before = (kind == EventKind::Stopping && !was_deleting).then(|| {
            Change::new(id.clone(), EventKind::Started, at)
                .uid(entry.uid.clone())
                .labels(labels.clone())
                .cursor(Some(self.cursor.clone()))
                .readiness(entry.readiness)
                .reason(entry.reason.clone())
        });
        let change = Change::new(id.clone(), kind, at)
            .uid(entry.uid.clone())
            .labels(labels)
            .cursor(Some(self.cursor.clone()))
            .readiness(entry.readiness)
            .reason(reason);
        store.insert(id, entry);
        if let Some(before) = before {
            self.tell(before, replay);
        }
        self.tell(change, replay);
    }

    /// Queues a live change: once synced, or before that when it is the
    /// exact replay of a resumed watch (`replay`); otherwise the coming
    /// snapshot holds it.
    fn tell(&mut self, change: Change<K8sCursor>, replay: bool) {
        if self.synced || replay {
            self.out.push_back(Out::Obs(Observation::Change(change)));
        }
    }

    /// Once every kind is watching: a snapshot of every kind when one of
    /// them listed (its objects told as the core reads them, then its end,
    /// `snapshot_told`), else (a redial that resumed every watch)
    /// `Resumed`; then the cursor.
    fn maybe_sync(&mut self) {
        if !self.kinds.values().all(|s| s.watching && s.store.is_some()) {
            return;
        }
        if self.kinds.values().any(|s| s.listed) {
            self.out.push_back(Out::Obs(Observation::ResyncBegin));
            let objects = self
                .kinds
                .values()
                .flat_map(|s| s.store.iter())
                .map(HashMap::len);
            self.snapshot = Vec::with_capacity(objects.sum());
            self.told = 0;
            for (slot, state) in &mut self.kinds {
                state.listed = false;
                let ids = state.store.iter().flat_map(HashMap::keys);
                self.snapshot.extend(ids.map(|id| (*slot, id.clone())));
            }
            self.out.push_back(Out::Snapshot);
            self.synced = true;
        } else if !self.synced {
            // `Resumed` waits until the feeds have nothing more ready
            // (`poll_synced`): what the apiserver sent with the watches'
            // acceptance is its replay of the time the last session could
            // not see, and goes before `Connected`, not after it.
            self.resume_due = true;
        }
    }

    /// The snapshot's next object, from its kind's store; `None` when every
    /// one was told (its list let go).
    fn next_listed(&mut self) -> Option<Observation<K8sCursor>> {
        while let Some((slot, id)) = self.snapshot.get(self.told) {
            self.told += 1;
            let store = self.kinds.get(slot).and_then(|s| s.store.as_ref());
            if let Some(e) = store.and_then(|store| store.get(id)) {
                return Some(Observation::Listed(
                    Listed::new(id.clone(), e.running)
                        .uid(e.uid.clone())
                        .labels(e.labels.clone())
                        .readiness(e.readiness)
                        .reason(e.reason.clone()),
                ));
            }
        }
        self.snapshot = Vec::new();
        self.told = 0;
        None
    }

    /// Every object of the snapshot told: its end, the `Stopping` of the
    /// objects being deleted, the cursor, then the changes that came
    /// during the lists; before whatever was queued after the snapshot.
    fn snapshot_told(&mut self) {
        let after = std::mem::take(&mut self.out);
        self.out.push_back(Out::Obs(Observation::ResyncDone));
        self.stopping_listed();
        self.out
            .push_back(Out::Obs(Observation::Progress(Some(self.cursor.clone()))));
        self.tell_early();
        self.out.extend(after);
    }

    /// After a snapshot: a `Stopping` of each running object it holds that
    /// is being deleted (a snapshot has no word for it). The core tells it
    /// when it did not know the object stopping yet, else swallows it.
    fn stopping_listed(&mut self) {
        let at = SystemTime::now();
        for state in self.kinds.values() {
            for (id, e) in state.store.iter().flatten() {
                if e.running && e.deleting {
                    let change = Change::new(id.clone(), EventKind::Stopping, at)
                        .uid(e.uid.clone())
                        .cursor(Some(self.cursor.clone()))
                        .readiness(e.readiness);
                    self.out.push_back(Out::Obs(Observation::Change(change)));
                }
            }
        }
    }

    /// The changes that came before the first snapshot, now after it.
    fn tell_early(&mut self) {
        for (kind, event) in std::mem::take(&mut self.early) {
            self.handle(kind, event);
        }
    }

    /// Every watch resumed, and the replay they had ready is queued.
    fn resumed(&mut self) {
        tracing::debug!("every watch resumed from the cursor");
        self.resume_due = false;
        self.synced = true;
        self.out.push_back(Out::Obs(Observation::Resumed));
        self.out
            .push_back(Out::Obs(Observation::Progress(Some(self.cursor.clone()))));
        self.tell_early();
    }
}

/// A listed object as the store keeps it, and its labels.
fn entry(seen: Seen) -> (InstanceId, Entry, Labels) {
    let Seen {
        listed: l,
        deleting,
    } = seen;
    let entry = Entry {
        running: l.running,
        uid: l.uid,
        labels: l.labels.clone(),
        readiness: l.readiness,
        reason: l.reason,
        deleting,
        found: true,
    };
    (l.id, entry, l.labels)
}

impl Drop for Merge {
    /// Leaves each kind's objects for the next dial (without them, a kind
    /// lists), except those of a kind whose version is gone (`410`), of a
    /// kind whose list is under way (its store part old, part new), and
    /// those of a kind with changes still queued here: its objects are ahead of the cursor
    /// the core will resume from, and a snapshot holding them before the
    /// apiserver replays those changes again could tell them out of order
    /// (a deletion before the scaling that preceded it). Such a kind lists
    /// on the next dial. (A session yields its error only once its queue is
    /// empty; only a dial that fails while a resumed watch replays leaves
    /// changes queued; or one dropped while its snapshot is told, with the
    /// changes of its lists not applied yet.)
    fn drop(&mut self) {
        let queued: Vec<usize> = self
            .kinds
            .iter()
            .filter_map(|(slot, state)| {
                let prefix = format!("{}/", state.prefix.as_deref()?);
                let changed = self.out.iter().any(|out| {
                    matches!(out, Out::Obs(Observation::Change(c)) if c.id.as_str().starts_with(&prefix))
                });
                let early = self.early.iter().any(|(kind, _)| kind == slot);
                (changed || early).then_some(*slot)
            })
            .collect();
        let stores: Stores = self
            .kinds
            .iter_mut()
            .filter(|(kind, s)| !queued.contains(kind) && !s.expired && !s.listing)
            .filter_map(|(kind, s)| s.store.take().map(|store| (*kind, store)))
            .collect();
        self.carry.put(std::mem::take(&mut self.cluster), stores);
    }
}

impl Stream for Merge {
    type Item = Result<Observation<K8sCursor>, BoxError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            match this.out.pop_front() {
                Some(Out::Obs(obs)) => return Poll::Ready(Some(Ok(obs))),
                Some(Out::Snapshot) => {
                    if let Some(obs) = this.next_listed() {
                        this.out.push_front(Out::Snapshot);
                        return Poll::Ready(Some(Ok(obs)));
                    }
                    this.snapshot_told();
                    continue;
                }
                None => {}
            }
            if this.done {
                return Poll::Ready(None);
            }
            match ready!(Pin::new(&mut this.feeds).poll_next(cx)) {
                Some((kind, Ok(event))) => this.handle(kind, event),
                Some((_, Err(e))) => {
                    this.done = true;
                    return Poll::Ready(Some(Err(e.into())));
                }
                // Feeds end only after an error; if they all did, the
                // session would.
                None => this.done = true,
            }
        }
    }
}
