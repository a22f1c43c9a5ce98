//! The transition rules for one known instance: what it is ([`Known`]),
//! what a relist of it tells ([`relisted`]), what a live change that is no
//! start or stop tells of its readiness, and where the transitions go
//! ([`Transitions`]). The table of every instance is `Tracker`'s.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::SystemTime;

use super::key::{Key, Uid};
use crate::model::{EventKind, InstanceEvent, InstanceId, Labels, Origin, Readiness, Reason};

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
    /// Told `Stopping` since its start (only while running).
    pub(super) stopping: bool,
    /// Why, as last told: while running, the failure told by the last
    /// `Failing` (`None`: none since the start, or it passed); while
    /// stopped, why it stopped.
    pub(super) reason: Option<Arc<Reason>>,
}

/// `Known::pos` of an instance no snapshot listed since a live change brought it in.
pub(super) const UNLISTED: u32 = u32::MAX;

impl Known {
    /// An event of this instance as it now is (its labels, readiness), of
    /// the incarnation `uid` when the change names one, else of the known
    /// one. (Always inlined: built in place, where the event goes; with a
    /// plain `#[inline]` it is not, and the core's cost per event grows by
    /// 34 instructions.)
    #[allow(clippy::inline_always)]
    #[inline(always)]
    pub(super) fn event(
        &self,
        id: InstanceId,
        kind: EventKind,
        at: SystemTime,
        origin: Origin,
        uid: Option<Arc<str>>,
        reason: Option<Arc<Reason>>,
    ) -> InstanceEvent {
        InstanceEvent {
            id,
            kind,
            at,
            origin,
            labels: Arc::clone(&self.labels),
            uid: uid.or_else(|| self.uid.text()),
            readiness: self.readiness,
            reason,
        }
    }

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
        if !self.running || self.stopping {
            // Stopping ended readiness: nothing more is told until it stops.
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

/// A live start or stop of a known instance, as the tracker's fast path
/// found it.
pub(super) struct Transition {
    pub(super) id: InstanceId,
    pub(super) kind: EventKind,
    pub(super) uid: Option<Arc<str>>,
    pub(super) at: SystemTime,
    pub(super) readiness: Option<Readiness>,
    pub(super) reason: Option<Arc<Reason>>,
}

/// A live start or stop of `k` that says why (or follows a `Stopping`, or
/// a reason told before): the stop's reason (a requested stop is never
/// failed), a start's failure (`Failing` after it), and `k`'s reason
/// brought up to date.
#[cold]
#[inline(never)]
pub(super) fn explained_transition(k: &mut Known, t: Transition, out: &mut impl Transitions) {
    let Transition {
        id,
        kind,
        uid,
        at,
        readiness,
        reason,
    } = t;
    let want_running = kind == EventKind::Started;
    k.running = want_running;
    // A start begins unready; a stop ends readiness.
    k.ready = false;
    if readiness.is_some() || want_running {
        k.readiness = readiness;
    }
    let (told, failure) = if want_running {
        (None, reason)
    } else {
        (stop_reason(k.stopping, reason), None)
    };
    k.stopping = false;
    k.reason.clone_from(&told);
    let event = k.event(id, kind, at, Origin::Live, uid, told);
    if let Some(failure) = failure {
        started_failing(k, event, failure, out);
    } else if ready_in(k.running, k.readiness) {
        k.ready = true;
        and_ready(event, out);
    } else {
        out.push(event);
    }
}

/// A live start that tells the instance fails already: `event` (and
/// `Ready` when it can serve), then `Failing`.
fn started_failing(
    k: &mut Known,
    event: InstanceEvent,
    failure: Arc<Reason>,
    out: &mut impl Transitions,
) {
    let (id, uid, at) = (event.id.clone(), event.uid.clone(), event.at);
    if ready_in(k.running, k.readiness) {
        k.ready = true;
        and_ready(event, out);
    } else {
        out.push(event);
    }
    if let Some(e) = failing(k, &id, uid, at, Origin::Live, Some(failure)) {
        out.push(e);
    }
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
    reason: Option<Arc<Reason>>,
    out: &mut impl Transitions,
) {
    let ready = k.readiness_change(readiness, false);
    // The failure only when one is told or known: readiness alone costs
    // what it did.
    let failure = if reason.is_some() || k.reason.is_some() {
        let uid = uid.clone().or_else(|| k.uid.text());
        failing(k, &id, uid, at, Origin::Live, reason)
    } else {
        None
    };
    if let Some(ready) = ready {
        out.push(k.event(id, readiness_kind(ready), at, Origin::Live, uid, None));
    }
    if let Some(event) = failure {
        out.push(event);
    }
}

/// Takes in what a change, a poll or a snapshot tells of a running
/// instance's failure (`reason`: its message; `None`: it does not fail);
/// returns the `Failing` to tell when the message is new. Nothing while it
/// is stopping, or not running.
pub(super) fn failing(
    k: &mut Known,
    id: &InstanceId,
    uid: Option<Arc<str>>,
    at: SystemTime,
    origin: Origin,
    reason: Option<Arc<Reason>>,
) -> Option<InstanceEvent> {
    if !k.running || k.stopping {
        return None;
    }
    let Some(reason) = reason.filter(|r| r.message.is_some()) else {
        k.reason = None;
        return None;
    };
    if k.reason
        .as_ref()
        .is_some_and(|known| known.message == reason.message && known.failed == reason.failed)
    {
        return None;
    }
    k.reason = Some(Arc::clone(&reason));
    Some(k.event(
        id.clone(),
        EventKind::Failing,
        at,
        origin,
        uid,
        Some(reason),
    ))
}

/// A live readiness change of `k` (`ready`: whether it is now ready, when
/// that changed) told with the failure as it is now (out of line: only
/// when the change or `k` has a reason).
#[cold]
#[inline(never)]
pub(super) fn readiness_failing(
    k: &mut Known,
    ready: Option<bool>,
    change: Transition,
    out: &mut impl Transitions,
) {
    let Transition {
        id,
        uid,
        at,
        reason,
        ..
    } = change;
    let uid = uid.or_else(|| k.uid.text());
    let failure = failing(k, &id, uid.clone(), at, Origin::Live, reason);
    if let Some(ready) = ready {
        out.push(k.event(id, readiness_kind(ready), at, Origin::Live, uid, None));
    }
    if let Some(e) = failure {
        out.push(e);
    }
}

/// The reason a stop of `k` is told with: a stop after `Stopping` was
/// requested (never `failed`), and says so even when the engine said
/// nothing more.
pub(super) fn stop_reason(stopping: bool, reason: Option<Arc<Reason>>) -> Option<Arc<Reason>> {
    if !stopping {
        return reason;
    }
    let reason = reason.map_or_else(Reason::default, Arc::unwrap_or_clone);
    Some(Arc::new(reason.requested()))
}

#[inline]
pub(super) fn different_incarnation(known: &Uid, seen: &Uid) -> bool {
    known.is_some() && seen.is_some() && known != seen
}

/// The transitions a resync found, in the order found, each with the uid of
/// the incarnation it concerns, the readiness after it and why.
pub(super) type Found = Vec<(
    InstanceId,
    EventKind,
    Arc<Labels>,
    Option<Arc<str>>,
    Option<Readiness>,
    Option<Arc<Reason>>,
)>;

/// A listed instance's observed state.
pub(super) struct Seen {
    pub(super) running: bool,
    pub(super) uid: Uid,
    pub(super) labels: Labels,
    pub(super) readiness: Option<Readiness>,
    pub(super) reason: Option<Arc<Reason>>,
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
        reason,
    } = seen;
    if *k.labels != labels {
        k.labels = if labels.is_empty() {
            Arc::clone(no_labels)
        } else {
            Arc::new(labels)
        };
    }
    let labels = Arc::clone(&k.labels);
    let push = |found: &mut Found, kind, uid, readiness, reason| {
        found.push((
            id.clone(),
            kind,
            Arc::clone(&labels),
            uid,
            readiness,
            reason,
        ));
    };
    if different_incarnation(&k.uid, &uid) {
        let (old, new) = (k.uid.text(), uid.text());
        push(found, EventKind::Removed, old, k.readiness, None);
        let stopped_reason = (!running).then(|| reason.clone()).flatten();
        push(
            found,
            EventKind::Created,
            new.clone(),
            readiness,
            stopped_reason,
        );
        k.stopping = false;
        k.reason = None;
        if running {
            push(found, EventKind::Started, new.clone(), readiness, None);
            if ready_in(running, readiness) {
                push(found, EventKind::Ready, new.clone(), readiness, None);
            }
        }
        k.readiness = readiness;
        k.running = running;
        if running {
            if let Some(e) = failing(k, id, new, SystemTime::UNIX_EPOCH, Origin::Resync, reason) {
                push(found, e.kind, e.uid, e.readiness, e.reason);
            }
        } else {
            k.reason = reason;
        }
    } else {
        let readiness = readiness.or(k.readiness);
        let ready = ready_in(running, readiness);
        let text = || if uid.is_some() { &uid } else { &k.uid }.text();
        if k.running != running {
            if running {
                push(found, EventKind::Started, text(), readiness, None);
                if ready {
                    push(found, EventKind::Ready, text(), readiness, None);
                }
                k.reason = None;
            } else {
                let told = stop_reason(k.stopping, reason.clone());
                push(found, EventKind::Stopped, text(), readiness, told.clone());
                k.reason = told;
            }
            k.stopping = false;
        } else if k.ready != ready && !k.stopping {
            push(found, readiness_kind(ready), text(), readiness, None);
        } else if !running {
            // Still stopped: what the engine says of it now.
            k.reason.clone_from(&reason);
        }
        k.readiness = readiness;
        k.running = running;
        if running {
            let text = text();
            if let Some(e) = failing(k, id, text, SystemTime::UNIX_EPOCH, Origin::Resync, reason) {
                push(found, e.kind, e.uid, e.readiness, e.reason);
            }
        }
    }
    k.ready = !k.stopping && ready_in(running, k.readiness);
    if uid.is_some() {
        k.uid = uid;
    }
}
