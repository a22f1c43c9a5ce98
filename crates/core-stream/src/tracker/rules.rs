//! The transition rules for one known instance: what it is ([`Known`]),
//! what a relist of it tells ([`relisted`]), what a live change that is no
//! start or stop tells of its readiness, and where the transitions go
//! ([`Transitions`]). The table of every instance is `Tracker`'s.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::SystemTime;

use super::key::{Key, Uid};
use crate::model::{EventKind, InstanceEvent, InstanceId, Labels, Origin, Readiness};

/// Where the tracker puts the transitions it finds, in order (the stream's
/// queue of items, in [`Watch`](crate::Watch)).
pub(crate) trait Transitions {
    /// One more transition.
    fn push(&mut self, event: InstanceEvent);
}

impl Transitions for VecDeque<InstanceEvent> {
    fn push(&mut self, event: InstanceEvent) {
        self.push_back(event);
    }
}

/// One known instance. It stays in its slot for as long as it is known.
#[derive(Debug, Clone)]
pub(super) struct Known {
    pub(super) key: Key,
    pub(super) uid: Uid,
    pub(super) labels: Arc<Labels>,
    /// The last resync that listed it (live changes keep it). Only ever
    /// compared with the current resync's: when one starts every instance
    /// carries the previous one's, so wrapping around is harmless.
    pub(super) epoch: u32,
    /// Where the last resync listed it, in `Tracker::order`; `UNLISTED`
    /// when a live change brought it in since.
    pub(super) pos: u32,
    pub(super) running: bool,
    /// Ready, as told (only while running).
    pub(super) ready: bool,
    /// The provider's readiness detail, as last observed (readiness watched).
    pub(super) readiness: Option<Readiness>,
}

/// `Known::pos` of an instance no snapshot listed since a live change brought it in.
pub(super) const UNLISTED: u32 = u32::MAX;

impl Known {
    /// Takes in what a change or a poll tells of readiness (`readiness`, or
    /// without detail `ready_without`); returns whether the instance is now
    /// ready when that changed. Ready only while running: the readiness of a
    /// stopped instance is kept, and tells nothing.
    #[inline]
    pub(super) fn readiness_change(
        &mut self,
        readiness: Option<Readiness>,
        ready_without: bool,
    ) -> Option<bool> {
        if readiness.is_some() {
            self.readiness = readiness;
        }
        if !self.running {
            return None;
        }
        let ready = readiness.map_or(ready_without, |r| r.is_ready());
        (ready != self.ready).then(|| {
            self.ready = ready;
            ready
        })
    }
}

/// Whether an instance that runs (or not) in this readiness state is ready.
#[inline]
pub(super) fn ready_in(running: bool, readiness: Option<Readiness>) -> bool {
    running && readiness.is_some_and(|r| r.is_ready())
}

/// The kind that moves readiness to `ready`.
pub(super) fn readiness_kind(ready: bool) -> EventKind {
    if ready {
        EventKind::Ready
    } else {
        EventKind::Unready
    }
}

/// A live start that can serve at once: `event`, then `Ready` (out of
/// line: only with readiness watched).
#[cold]
#[inline(never)]
pub(super) fn and_ready(event: InstanceEvent, out: &mut impl Transitions) {
    let ready = InstanceEvent {
        kind: EventKind::Ready,
        ..event.clone()
    };
    out.push(event);
    out.push(ready);
}

/// A live change that is no transition of a known instance (a repeated
/// start or stop) but tells its readiness: pushed when that changes
/// whether it is ready.
#[inline(never)]
pub(super) fn readiness_anew(
    k: &mut Known,
    id: InstanceId,
    uid: Option<Arc<str>>,
    at: SystemTime,
    readiness: Option<Readiness>,
    out: &mut impl Transitions,
) {
    if let Some(ready) = k.readiness_change(readiness, false) {
        out.push(InstanceEvent {
            id,
            kind: readiness_kind(ready),
            at,
            origin: Origin::Live,
            labels: Arc::clone(&k.labels),
            uid: uid.or_else(|| k.uid.text()),
            readiness: k.readiness,
        });
    }
}

#[inline]
pub(super) fn different_incarnation(known: &Uid, seen: &Uid) -> bool {
    known.is_some() && seen.is_some() && known != seen
}

/// The transitions a resync found, in the order found, each with the uid of
/// the incarnation it concerns and the readiness after it.
pub(super) type Found = Vec<(
    InstanceId,
    EventKind,
    Arc<Labels>,
    Option<Arc<str>>,
    Option<Readiness>,
)>;

/// A listed instance's observed state.
pub(super) struct Seen {
    pub(super) running: bool,
    pub(super) uid: Uid,
    pub(super) labels: Labels,
    pub(super) readiness: Option<Readiness>,
}

/// Applies a listed instance that was known to what is known of it.
pub(super) fn relisted(
    k: &mut Known,
    id: &InstanceId,
    seen: Seen,
    no_labels: &Arc<Labels>,
    found: &mut Found,
) {
    let Seen {
        running,
        uid,
        labels,
        readiness,
    } = seen;
    if *k.labels != labels {
        k.labels = if labels.is_empty() {
            Arc::clone(no_labels)
        } else {
            Arc::new(labels)
        };
    }
    let push = |found: &mut Found, kind, uid, readiness| {
        found.push((id.clone(), kind, Arc::clone(&k.labels), uid, readiness));
    };
    if different_incarnation(&k.uid, &uid) {
        let (old, new) = (k.uid.text(), uid.text());
        push(found, EventKind::Removed, old, k.readiness);
        push(found, EventKind::Created, new.clone(), readiness);
        if running {
            push(found, EventKind::Started, new.clone(), readiness);
            if ready_in(running, readiness) {
                push(found, EventKind::Ready, new, readiness);
            }
        }
        k.readiness = readiness;
    } else {
        let readiness = readiness.or(k.readiness);
        let ready = ready_in(running, readiness);
        let text = || if uid.is_some() { &uid } else { &k.uid }.text();
        if k.running != running {
            let kind = if running {
                EventKind::Started
            } else {
                EventKind::Stopped
            };
            push(found, kind, text(), readiness);
            if ready {
                push(found, EventKind::Ready, text(), readiness);
            }
        } else if k.ready != ready {
            push(found, readiness_kind(ready), text(), readiness);
        }
        k.readiness = readiness;
    }
    k.running = running;
    k.ready = ready_in(running, k.readiness);
    if uid.is_some() {
        k.uid = uid;
    }
}
