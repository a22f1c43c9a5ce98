//! The known state of every instance, and the rules that turn observations
//! into transitions: a duplicate is swallowed, a missed transition is reported
//! once.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::SystemTime;

use crate::model::{Change, EventKind, InstanceEvent, InstanceId, Labels, Listed, Origin};
use crate::watch::Item;

#[derive(Debug, Clone)]
struct Known {
    running: bool,
    uid: Option<Arc<str>>,
    labels: Arc<Labels>,
    /// The last resync that listed it (live changes keep it).
    epoch: u64,
}

/// Last known state of each instance (O(instances)) plus the snapshot being built.
#[derive(Debug, Default)]
pub(crate) struct Tracker {
    known: HashMap<InstanceId, Known>,
    /// The snapshot being listed, in listing order.
    snapshot: Option<Vec<Listed>>,
    epoch: u64,
}

fn different_incarnation(known: Option<&Arc<str>>, seen: Option<&Arc<str>>) -> bool {
    matches!((known, seen), (Some(a), Some(b)) if a != b)
}

impl Tracker {
    pub(crate) fn len(&self) -> usize {
        self.known.len()
    }

    pub(crate) fn begin_resync(&mut self) {
        self.snapshot = Some(Vec::with_capacity(self.known.len()));
    }

    pub(crate) fn listed(&mut self, listed: Listed) {
        let snapshot = self.snapshot.get_or_insert_with(|| {
            tracing::debug!("instance listed outside a resync: starting one");
            Vec::new()
        });
        snapshot.push(listed);
    }

    /// Applies one live change; pushes the transitions it implies (none for a
    /// duplicate).
    pub(crate) fn change<C>(&mut self, change: Change<C>, out: &mut VecDeque<Item>) {
        let Change {
            id,
            kind,
            uid,
            labels,
            at,
            cursor: _,
        } = change;
        let mut emit = |id: &InstanceId, kind, labels: &Arc<Labels>| {
            out.push_back(Item::Event(InstanceEvent {
                id: id.clone(),
                kind,
                at,
                origin: Origin::Live,
                labels: Arc::clone(labels),
            }));
        };
        let known = self.known.get_mut(&id);
        if kind == EventKind::Removed {
            if let Some(k) = known {
                if different_incarnation(k.uid.as_ref(), uid.as_ref()) {
                    // The removal of an older incarnation: the current one stays.
                    return;
                }
                let labels = Arc::clone(&k.labels);
                self.known.remove(&id);
                emit(&id, EventKind::Removed, &labels);
            }
            return;
        }
        let want_running = kind == EventKind::Started;
        match known {
            Some(k) if !different_incarnation(k.uid.as_ref(), uid.as_ref()) => {
                if let Some(labels) =
                    labels.filter(|l| !Arc::ptr_eq(l, &k.labels) && **l != *k.labels)
                {
                    k.labels = labels;
                }
                if k.uid.is_none() {
                    k.uid = uid;
                }
                // `Created` of a known instance is a replay: nothing changes.
                if kind != EventKind::Created && k.running != want_running {
                    k.running = want_running;
                    emit(&id, kind, &k.labels);
                }
            }
            known => {
                let labels = match (labels, known.as_ref()) {
                    (Some(l), _) => l,
                    (None, Some(k)) => Arc::clone(&k.labels),
                    (None, None) => Arc::new(Labels::new()),
                };
                if let Some(old) = known {
                    let old_labels = Arc::clone(&old.labels);
                    emit(&id, EventKind::Removed, &old_labels);
                }
                emit(&id, EventKind::Created, &labels);
                if want_running {
                    emit(&id, EventKind::Started, &labels);
                }
                self.known.insert(
                    id,
                    Known {
                        running: want_running,
                        uid,
                        labels,
                        epoch: self.epoch,
                    },
                );
            }
        }
    }

    /// Completes a snapshot: the snapshot becomes the known state, and the
    /// transitions between the two are pushed once each, in instance order.
    /// With `origin == None` the snapshot is a silent baseline. Returns false
    /// when no snapshot was in progress.
    pub(crate) fn end_resync(&mut self, origin: Option<Origin>, out: &mut VecDeque<Item>) -> bool {
        let Some(snapshot) = self.snapshot.take() else {
            return false;
        };
        let at = SystemTime::now();
        // Update the known state in place: every listed instance is stamped
        // with this resync's epoch, and those left unstamped have vanished.
        self.epoch += 1;
        let epoch = self.epoch;
        let mut found: Vec<(InstanceId, EventKind, Arc<Labels>)> = Vec::new();
        self.known
            .reserve(snapshot.len().saturating_sub(self.known.len()));
        // An instance listed twice: the later entry wins, through the same rules.
        for l in snapshot {
            let id = l.id;
            if let Some(k) = self.known.get_mut(&id) {
                k.epoch = epoch;
                if *k.labels != l.labels {
                    k.labels = Arc::new(l.labels);
                }
                if different_incarnation(k.uid.as_ref(), l.uid.as_ref()) {
                    found.push((id.clone(), EventKind::Removed, Arc::clone(&k.labels)));
                    found.push((id.clone(), EventKind::Created, Arc::clone(&k.labels)));
                    if l.running {
                        found.push((id, EventKind::Started, Arc::clone(&k.labels)));
                    }
                } else if k.running != l.running {
                    let kind = if l.running {
                        EventKind::Started
                    } else {
                        EventKind::Stopped
                    };
                    found.push((id, kind, Arc::clone(&k.labels)));
                }
                k.running = l.running;
                if l.uid.is_some() {
                    k.uid = l.uid;
                }
            } else {
                let labels = Arc::new(l.labels);
                if origin.is_some() {
                    found.push((id.clone(), EventKind::Created, Arc::clone(&labels)));
                    if l.running {
                        found.push((id.clone(), EventKind::Started, Arc::clone(&labels)));
                    }
                }
                self.known.insert(
                    id,
                    Known {
                        running: l.running,
                        uid: l.uid,
                        labels,
                        epoch,
                    },
                );
            }
        }
        self.known.retain(|id, k| {
            if k.epoch != epoch {
                found.push((id.clone(), EventKind::Removed, Arc::clone(&k.labels)));
            }
            k.epoch == epoch
        });
        if let Some(origin) = origin {
            // Stable sort: per instance the pushed order (Removed, Created, Started)
            // holds; a vanished instance was pushed last but is alone under its id.
            found.sort_by(|a, b| a.0.cmp(&b.0));
            out.extend(found.into_iter().map(|(id, kind, labels)| {
                Item::Event(InstanceEvent {
                    id,
                    kind,
                    at,
                    origin,
                    labels,
                })
            }));
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listed(id: &str, running: bool) -> Listed {
        Listed {
            id: id.into(),
            running,
            uid: None,
            labels: Labels::new(),
        }
    }

    fn change(id: &str, kind: EventKind, uid: Option<&str>) -> Change<u64> {
        Change {
            id: id.into(),
            kind,
            uid: uid.map(Into::into),
            labels: None,
            at: SystemTime::UNIX_EPOCH,
            cursor: None,
        }
    }

    fn kinds(out: &mut VecDeque<Item>) -> Vec<(String, EventKind)> {
        out.drain(..)
            .filter_map(|i| match i {
                Item::Event(e) => Some((e.id.to_string(), e.kind)),
                Item::Status(_) => None,
            })
            .collect()
    }

    #[test]
    fn live_changes_only_pass_when_they_change_state() {
        let mut t = Tracker::default();
        let mut out = VecDeque::new();
        for k in [
            EventKind::Created,
            EventKind::Created,
            EventKind::Started,
            EventKind::Started,
            EventKind::Stopped,
            EventKind::Stopped,
            EventKind::Removed,
            EventKind::Removed,
        ] {
            t.change(change("a", k, None), &mut out);
        }
        assert_eq!(
            kinds(&mut out),
            [
                ("a".into(), EventKind::Created),
                ("a".into(), EventKind::Started),
                ("a".into(), EventKind::Stopped),
                ("a".into(), EventKind::Removed),
            ]
        );
    }

    #[test]
    fn start_of_an_unknown_instance_creates_it() {
        let mut t = Tracker::default();
        let mut out = VecDeque::new();
        t.change(change("a", EventKind::Started, None), &mut out);
        assert_eq!(
            kinds(&mut out),
            [
                ("a".into(), EventKind::Created),
                ("a".into(), EventKind::Started)
            ]
        );
    }

    #[test]
    fn a_new_incarnation_is_removed_then_created() {
        let mut t = Tracker::default();
        let mut out = VecDeque::new();
        t.change(change("a", EventKind::Started, Some("1")), &mut out);
        out.clear();
        // A late destroy of another incarnation changes nothing.
        t.change(change("a", EventKind::Removed, Some("0")), &mut out);
        assert!(out.is_empty());
        t.change(change("a", EventKind::Created, Some("2")), &mut out);
        assert_eq!(
            kinds(&mut out),
            [
                ("a".into(), EventKind::Removed),
                ("a".into(), EventKind::Created)
            ]
        );
    }

    #[test]
    fn first_snapshot_can_be_silent() {
        let mut t = Tracker::default();
        let mut out = VecDeque::new();
        t.begin_resync();
        t.listed(listed("a", true));
        assert!(t.end_resync(None, &mut out));
        assert!(out.is_empty());
        assert_eq!(t.len(), 1);
        assert!(!t.end_resync(Some(Origin::Resync), &mut out));
    }

    #[test]
    fn label_only_changes_emit_nothing_but_are_kept() {
        let mut t = Tracker::default();
        let mut out = VecDeque::new();
        t.change(change("a", EventKind::Started, None), &mut out);
        out.clear();
        let mut c = change("a", EventKind::Started, None);
        c.labels = Some(Arc::new(Labels::from([("k".into(), "v".into())])));
        t.change(c, &mut out);
        assert!(out.is_empty());
        t.change(change("a", EventKind::Stopped, None), &mut out);
        let Some(Item::Event(e)) = out.front() else {
            panic!("no event: {out:?}");
        };
        assert_eq!(e.labels.get("k").map(String::as_str), Some("v"));
    }
}
