//! The known state of every instance, and the table that applies
//! observations to it: live changes looked up by id, a snapshot diffed by
//! walking the last one's listing order. What each transition is for one
//! instance is `rules.rs`'s; how a snapshot is diffed, `snapshot.rs`'s; how an
//! instance is packed, `key.rs`'s.

mod key;
mod rules;
mod snapshot;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::SystemTime;

use crate::model::{
    Change, EventKind, InstanceEvent, InstanceId, Labels, Listed, Origin, Readiness, Reason,
};
use key::{Key, Uid};
pub(crate) use rules::Transitions;
use rules::{
    Known, Transition, UNLISTED, and_ready, explained_transition, failing, readiness_anew,
    readiness_failing, readiness_kind, ready_in,
};

/// Last known state of each instance (O(instances)) plus the snapshot being built.
///
/// The instances live in `slots`, which the first snapshot fills in listing
/// order, and `order` keeps the slots in the order the last snapshot listed
/// them. Engines list in a stable order (Docker newest first, Kubernetes by
/// namespace and name), so the next snapshot is diffed by walking `order`
/// alongside it: the instance listed next is most likely the one `order` has
/// next, mostly in the slot after the previous one's. Only what the walk does
/// not find there (a new instance, one listed out of turn) is looked up in
/// `index`, the hash map that live changes use. Any listing order gives the
/// same events; a stable one only gives them faster.
#[derive(Debug, Default)]
pub(crate) struct Tracker {
    slots: Vec<Option<Known>>,
    /// Empty slots, reused first.
    vacant: Vec<u32>,
    // foldhash rather than std's SipHash: the keys are instance ids that the
    // user's own engine names (container, service and object names), not
    // input an attacker chooses, and foldhash's `RandomState` still seeds
    // each map at random, per process.
    index: HashMap<Key, u32, foldhash::fast::RandomState>,
    /// The slots in the last snapshot's listing order. An entry may have
    /// gone stale since (its instance removed, the slot reused): the walk
    /// compares ids, so that only costs it a lookup.
    order: Vec<u32>,
    /// The snapshot being listed, in listing order.
    snapshot: Option<Vec<Listed>>,
    epoch: u32,
    /// The labels of every instance that has none, shared.
    no_labels: Arc<Labels>,
}

/// A slot number or a position in `order`: the tracker holds fewer than
/// 2^32 instances (each costs ~100 bytes).
fn to_u32(n: usize) -> u32 {
    u32::try_from(n).expect("fewer than 2^32 instances")
}

impl Tracker {
    pub(crate) fn len(&self) -> usize {
        self.index.len()
    }

    /// Every known instance, as the events that bring it about
    /// (`Created`, with why it stopped if it does not run, then `Started` if
    /// it runs, `Ready` if it is, `Stopping` or `Failing` if it is), stamped `at`.
    pub(crate) fn tell(&self, at: SystemTime, out: &mut impl Transitions) {
        for k in self.slots.iter().flatten() {
            let reason = (!k.running).then(|| k.reason.clone()).flatten();
            let mut event = k.event(
                k.key.id(),
                EventKind::Created,
                at,
                Origin::Initial,
                None,
                reason,
            );
            if k.running {
                out.push(event.clone());
                event.kind = EventKind::Started;
            }
            if k.ready {
                out.push(event.clone());
                event.kind = EventKind::Ready;
            }
            let after = if k.stopping {
                Some(EventKind::Stopping)
            } else {
                (k.running && k.reason.is_some()).then_some(EventKind::Failing)
            };
            if let Some(kind) = after {
                out.push(event.clone());
                event.kind = kind;
                event.reason.clone_from(&k.reason);
            }
            out.push(event);
        }
    }

    #[inline]
    fn known_mut(&mut self, slot: u32) -> &mut Known {
        self.slots[slot as usize]
            .as_mut()
            .expect("the index names occupied slots")
    }

    /// Brings in a new instance; returns its slot.
    fn insert(&mut self, known: Known) -> u32 {
        let key = known.key.clone();
        let slot = if let Some(slot) = self.vacant.pop() {
            self.slots[slot as usize] = Some(known);
            slot
        } else {
            self.slots.push(Some(known));
            to_u32(self.slots.len() - 1)
        };
        self.index.insert(key, slot);
        slot
    }

    /// Forgets an instance; returns what was known of it.
    fn remove(&mut self, slot: u32) -> Known {
        let known = self.slots[slot as usize]
            .take()
            .expect("the index names occupied slots");
        self.index.remove(known.key.as_bytes());
        self.vacant.push(slot);
        known
    }

    #[inline]
    fn known(&self, slot: u32) -> &Known {
        self.slots[slot as usize]
            .as_ref()
            .expect("the index names occupied slots")
    }

    /// Applies one live change; pushes the transitions it implies (none for a
    /// duplicate).
    ///
    /// What a busy feed mostly says, a start or a stop of a known instance
    /// (or a duplicate), is handled here, small enough to be inlined into
    /// the stream's poll; the rest (a removal, a readiness change, a new
    /// instance or incarnation, a start that can serve at once) out of line.
    #[inline]
    pub(crate) fn change<C>(&mut self, change: Change<C>, out: &mut impl Transitions) {
        // Taken apart at once: the common case uses the parts where they
        // are, and only the rare ones put them together again (out of line).
        let Change {
            id,
            kind,
            uid: uid_text,
            labels,
            at,
            cursor: _,
            readiness,
            reason,
        } = change;
        let slot = self.index.get(id.as_str().as_bytes()).copied();
        if matches!(
            kind,
            EventKind::Ready
                | EventKind::Unready
                | EventKind::Removed
                | EventKind::Stopping
                | EventKind::Failing
        ) {
            // Nothing known to be ready, to remove, to stop or to fail
            // without a slot.
            if let Some(slot) = slot {
                let change = Transition {
                    id,
                    kind,
                    uid: uid_text,
                    at,
                    readiness,
                    reason,
                };
                if matches!(kind, EventKind::Ready | EventKind::Unready) {
                    self.readiness_changed(slot, change, out);
                } else {
                    self.removed_stopping_failing(slot, change, out);
                }
            }
            return;
        }
        // The uid is only compared here (no copy of it), and packed when
        // it is learnt or the instance is new.
        let Some(slot) = slot.filter(|&slot| !self.known(slot).uid.is_other(uid_text.as_deref()))
        else {
            let change = Change {
                id,
                kind,
                uid: uid_text.clone(),
                labels,
                at,
                cursor: None,
                readiness,
                reason,
            };
            self.arrived(slot, change, Uid::new(uid_text), out);
            return;
        };
        let k = self.known_mut(slot);
        if let Some(labels) = labels.filter(|l| !Arc::ptr_eq(l, &k.labels) && **l != *k.labels) {
            k.labels = labels;
        }
        // Learnt now (an engine that said none before); nothing to write
        // when neither knows it.
        if !k.uid.is_some() && uid_text.is_some() {
            k.uid = Uid::new(uid_text.clone());
        }
        let want_running = kind == EventKind::Started;
        // `Created` of a known instance is a replay: nothing changes. A
        // start of a stopping instance: the engine abandoned the stop.
        if kind != EventKind::Created && (k.running != want_running || (want_running && k.stopping))
        {
            if reason.is_some() || k.reason.is_some() || k.stopping {
                // Why it stops, or why it stopped before this start: out
                // of line (what a busy feed without reasons says costs
                // what it cost before).
                let change = Transition {
                    id,
                    kind,
                    uid: uid_text,
                    at,
                    readiness,
                    reason,
                };
                explained_transition(k, change, out);
                return;
            }
            k.running = want_running;
            // A start begins unready; a stop ends readiness.
            k.ready = false;
            if readiness.is_some() || want_running {
                k.readiness = readiness;
            }
            let event = k.event(id, kind, at, Origin::Live, uid_text, None);
            if ready_in(k.running, k.readiness) {
                k.ready = true;
                and_ready(event, out);
            } else {
                out.push(event);
            }
        } else if (readiness.is_some() || reason.is_some()) && kind != EventKind::Created {
            // A repeated start (or stop) that tells readiness, or a
            // failure, anew. Not a replayed create: what it tells is the
            // readiness at the creation, which a running instance has left
            // behind.
            readiness_anew(k, id, uid_text, at, readiness, reason, out);
        }
    }

    /// A live readiness change of a known instance. What a busy feed with
    /// readiness watched mostly says, kept lean: a failure to tell with it
    /// goes out of line.
    #[inline(never)]
    fn readiness_changed(&mut self, slot: u32, change: Transition, out: &mut impl Transitions) {
        let k = self.known_mut(slot);
        if k.uid.is_other(change.uid.as_deref()) {
            // An older incarnation's: the current one stays as it is.
            return;
        }
        let ready = k.readiness_change(change.readiness, change.kind == EventKind::Ready);
        if change.reason.is_some() || k.reason.is_some() {
            // A readiness change tells the failure as it is now: none when
            // it says nothing of one (only then is it read: a readiness
            // change alone costs what it did).
            readiness_failing(k, ready, change, out);
            return;
        }
        if let Some(ready) = ready {
            let Transition { id, uid, at, .. } = change;
            out.push(k.event(id, readiness_kind(ready), at, Origin::Live, uid, None));
        }
    }

    /// A live removal, a stop request or a failure of a known instance.
    #[inline(never)]
    fn removed_stopping_failing(
        &mut self,
        slot: u32,
        change: Transition,
        out: &mut impl Transitions,
    ) {
        let Transition {
            id,
            kind,
            uid: uid_text,
            at,
            readiness,
            reason,
        } = change;
        if self.known(slot).uid.is_other(uid_text.as_deref()) {
            // An older incarnation's: the current one stays as it is.
            return;
        }
        let event =
            |id, kind, k: &Known, uid, reason| k.event(id, kind, at, Origin::Live, uid, reason);
        match kind {
            EventKind::Removed => {
                let gone = self.remove(slot);
                out.push(event(id, EventKind::Removed, &gone, uid_text, None));
            }
            EventKind::Stopping => {
                let k = self.known_mut(slot);
                if readiness.is_some() {
                    k.readiness = readiness;
                }
                if k.running && !k.stopping {
                    k.stopping = true;
                    k.ready = false;
                    k.reason.clone_from(&reason);
                    out.push(event(id, EventKind::Stopping, k, uid_text, reason));
                }
            }
            _ => {
                let k = self.known_mut(slot);
                if reason.as_ref().is_some_and(|r| r.message.is_some()) {
                    let uid = uid_text.or_else(|| k.uid.text());
                    if let Some(e) = failing(k, &id, uid, at, Origin::Live, reason) {
                        out.push(e);
                    }
                }
            }
        }
    }

    /// A live change of an instance not known, or of another incarnation
    /// than the known one (which it replaces: `Removed` first).
    #[inline(never)]
    fn arrived(
        &mut self,
        slot: Option<u32>,
        change: Change<()>,
        uid: Uid,
        out: &mut impl Transitions,
    ) {
        let Change {
            id,
            kind,
            uid: uid_text,
            labels,
            at,
            cursor: _,
            readiness,
            reason,
        } = change;
        let labels = match (labels, slot) {
            (Some(l), _) => l,
            (None, Some(slot)) => Arc::clone(&self.known(slot).labels),
            (None, None) => Arc::clone(&self.no_labels),
        };
        let mut emit = |kind, labels: &Arc<Labels>, uid: Option<Arc<str>>, readiness, reason| {
            out.push(InstanceEvent {
                id: id.clone(),
                kind,
                at,
                origin: Origin::Live,
                labels: Arc::clone(labels),
                uid,
                readiness,
                reason,
            });
        };
        if let Some(slot) = slot {
            let old = self.known(slot);
            emit(
                EventKind::Removed,
                &old.labels,
                old.uid.text(),
                old.readiness,
                None,
            );
        }
        let want_running = kind == EventKind::Started;
        let ready = ready_in(want_running, readiness);
        // A stop of an instance not known tells why it is not running.
        let stopped_reason = (kind == EventKind::Stopped)
            .then_some(reason.clone())
            .flatten();
        emit(
            EventKind::Created,
            &labels,
            uid_text.clone(),
            readiness,
            stopped_reason.clone(),
        );
        if want_running {
            emit(
                EventKind::Started,
                &labels,
                uid_text.clone(),
                readiness,
                None,
            );
            if ready {
                emit(EventKind::Ready, &labels, uid_text.clone(), readiness, None);
            }
        }
        let epoch = self.epoch;
        let slot = if let Some(slot) = slot {
            // Another incarnation under the same id: it takes the slot.
            let k = self.known_mut(slot);
            k.uid = uid;
            k.labels = labels;
            k.epoch = epoch;
            k.running = want_running;
            k.ready = ready;
            k.readiness = readiness;
            k.stopping = false;
            k.reason = stopped_reason;
            slot
        } else {
            self.insert(Known {
                key: Key::new(&id),
                uid,
                labels,
                epoch,
                pos: UNLISTED,
                running: want_running,
                ready,
                readiness,
                stopping: false,
                reason: stopped_reason,
            })
        };
        if want_running {
            let k = self.known_mut(slot);
            if let Some(e) = failing(k, &id, uid_text, at, Origin::Live, reason) {
                out.push(e);
            }
        }
    }

    /// The readiness of one instance as a poll found it: a change of
    /// whether it is ready is pushed as [`Origin::Resync`], now.
    pub(crate) fn polled(
        &mut self,
        id: InstanceId,
        uid: Option<&str>,
        readiness: Readiness,
        reason: Option<Arc<Reason>>,
        out: &mut impl Transitions,
    ) {
        let Some(slot) = self.index.get(id.as_str().as_bytes()).copied() else {
            return;
        };
        let k = self.known_mut(slot);
        if k.uid.is_other(uid) {
            return;
        }
        let at = SystemTime::now();
        let ready = k.readiness_change(Some(readiness), false);
        let failure = failing(k, &id, k.uid.text(), at, Origin::Resync, reason);
        if let Some(ready) = ready {
            out.push(k.event(id, readiness_kind(ready), at, Origin::Resync, None, None));
        }
        if let Some(e) = failure {
            out.push(e);
        }
    }
}

#[cfg(test)]
mod tests;
