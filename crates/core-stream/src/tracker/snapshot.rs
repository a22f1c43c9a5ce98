//! A snapshot applied to the known state: the listed instances gathered
//! (`begin_resync`, `listed`), then diffed against what was known by
//! walking the last snapshot's listing order (`end_resync`), each
//! difference told once.

use std::sync::Arc;
use std::time::SystemTime;

use super::key::{Key, Uid};
use super::rules::{Found, Known, Seen, Transitions, UNLISTED, ready_in, relisted};
use super::{Tracker, to_u32};
use crate::model::{EventKind, InstanceEvent, Listed, Origin};

impl Tracker {
    pub(crate) fn begin_resync(&mut self) {
        self.snapshot = Some(Vec::with_capacity(self.index.len()));
    }

    pub(crate) fn listed(&mut self, listed: Listed) {
        let snapshot = self.snapshot.get_or_insert_with(|| {
            tracing::debug!("instance listed outside a resync: starting one");
            Vec::new()
        });
        snapshot.push(listed);
    }

    /// Stamps the known instances of a snapshot and applies it to them, by
    /// walking the last snapshot's order alongside it; leaves in `snapshot`
    /// those it did not know. Returns the slots in listing order (`UNLISTED`
    /// for those left) and where each left one goes in it.
    fn relist(
        &mut self,
        snapshot: &mut Vec<Listed>,
        epoch: u32,
        found: &mut Found,
    ) -> (Vec<u32>, Vec<u32>) {
        let last_order = std::mem::take(&mut self.order);
        let mut order = Vec::with_capacity(snapshot.len());
        // The walk's place in `last_order`.
        let mut next = 0;
        let mut new_at = Vec::new();
        // An instance listed twice: the later entry wins, through the same rules.
        snapshot.retain_mut(|l| {
            let pos = to_u32(order.len());
            let key = l.id.as_str().as_bytes();
            let in_turn = last_order.get(next).copied().filter(|&slot| {
                self.slots[slot as usize]
                    .as_ref()
                    .is_some_and(|k| k.key.as_bytes() == key)
            });
            let slot = if in_turn.is_some() {
                next += 1;
                in_turn
            } else {
                self.index.get(key).copied()
            };
            let Some(slot) = slot else {
                new_at.push(pos);
                order.push(UNLISTED);
                return true;
            };
            let k = self.slots[slot as usize]
                .as_mut()
                .expect("the index names occupied slots");
            if in_turn.is_none() && k.epoch != epoch && k.pos != UNLISTED {
                // Listed out of turn: the walk goes on after it, past those
                // the last snapshot listed in between (gone, or listed later
                // on, when the index finds them).
                next = next.max(k.pos as usize + 1);
            }
            k.epoch = epoch;
            k.pos = pos;
            let seen = Seen {
                running: l.running,
                uid: Uid::new(l.uid.take()),
                labels: std::mem::take(&mut l.labels),
                readiness: l.readiness,
                reason: l.reason.take(),
            };
            relisted(k, &l.id, seen, &self.no_labels, found);
            order.push(slot);
            false
        });
        (order, new_at)
    }

    /// Brings in the instances of a snapshot that `relist` did not know, at
    /// their places `new_at` in `order`, once the vanished have left their slots.
    fn bring_in(
        &mut self,
        new: Vec<Listed>,
        new_at: &[u32],
        order: &mut [u32],
        epoch: u32,
        report: bool,
        found: &mut Found,
    ) {
        self.index.reserve(new.len());
        self.slots
            .reserve(new.len().saturating_sub(self.vacant.len()));
        for (l, &pos) in new.into_iter().zip(new_at) {
            let Listed {
                id,
                running,
                uid,
                labels,
                readiness,
                reason,
            } = l;
            let uid = Uid::new(uid);
            let slot = if let Some(&slot) = self.index.get(id.as_str().as_bytes()) {
                // Listed twice, new the first time.
                let no_labels = Arc::clone(&self.no_labels);
                let k = self.known_mut(slot);
                k.pos = pos;
                let seen = Seen {
                    running,
                    uid,
                    labels,
                    readiness,
                    reason,
                };
                relisted(k, &id, seen, &no_labels, found);
                slot
            } else {
                let labels = if labels.is_empty() {
                    Arc::clone(&self.no_labels)
                } else {
                    Arc::new(labels)
                };
                let ready = ready_in(running, readiness);
                let failure = running && reason.as_ref().is_some_and(|r| r.message.is_some());
                let reason = (!running || failure).then_some(reason).flatten();
                if report {
                    let text = uid.text();
                    let mut push = |kind, reason| {
                        found.push((
                            id.clone(),
                            kind,
                            Arc::clone(&labels),
                            text.clone(),
                            readiness,
                            reason,
                        ));
                    };
                    push(
                        EventKind::Created,
                        (!running).then(|| reason.clone()).flatten(),
                    );
                    if running {
                        push(EventKind::Started, None);
                    }
                    if ready {
                        push(EventKind::Ready, None);
                    }
                    if failure {
                        push(EventKind::Failing, reason.clone());
                    }
                }
                self.insert(Known {
                    key: Key::new(&id),
                    uid,
                    labels,
                    epoch,
                    pos,
                    running,
                    ready,
                    readiness,
                    stopping: false,
                    reason,
                })
            };
            order[pos as usize] = slot;
        }
    }

    /// Completes a snapshot: the snapshot becomes the known state, and the
    /// transitions between the two are pushed once each, in instance order.
    /// With `origin == None` the snapshot is a silent baseline. Returns false
    /// when no snapshot was in progress.
    pub(crate) fn end_resync(
        &mut self,
        origin: Option<Origin>,
        out: &mut impl Transitions,
    ) -> bool {
        let Some(mut snapshot) = self.snapshot.take() else {
            return false;
        };
        let at = SystemTime::now();
        // Update the known state in place: every listed instance is stamped
        // with this resync's epoch, and those left unstamped have vanished.
        self.epoch = self.epoch.wrapping_add(1);
        let epoch = self.epoch;
        let mut found: Found = Vec::new();
        let (mut order, new_at) = self.relist(&mut snapshot, epoch, &mut found);
        for slot in 0..self.slots.len() {
            if self.slots[slot].as_ref().is_some_and(|k| k.epoch != epoch) {
                let gone = self.remove(to_u32(slot));
                found.push((
                    gone.key.id(),
                    EventKind::Removed,
                    gone.labels,
                    gone.uid.text(),
                    gone.readiness,
                    None,
                ));
            }
        }
        let report = origin.is_some();
        self.bring_in(snapshot, &new_at, &mut order, epoch, report, &mut found);
        self.order = order;
        if let Some(origin) = origin {
            // Stable sort: per instance the pushed order (Removed, Created, Started)
            // holds; a vanished instance was pushed last but is alone under its id.
            found.sort_by(|a, b| a.0.cmp(&b.0));
            for (id, kind, labels, uid, readiness, reason) in found {
                out.push(InstanceEvent {
                    id,
                    kind,
                    at,
                    origin,
                    labels,
                    uid,
                    readiness,
                    reason,
                });
            }
        }
        true
    }
}
