//! The tracker's cases, and a proptest against the plain tracker it replaced
//! (kept here as the reference).

use std::collections::VecDeque;

use super::key::pack_hex64;
use super::*;

/// The tracker as it was before its layout was made for scale (a
/// `HashMap` from id to state, `SipHash`, every uid and label set in its own
/// allocation): the behaviour the current one must keep, event for event.
mod reference {
    use std::collections::{HashMap, VecDeque};
    use std::sync::Arc;
    use std::time::SystemTime;

    use crate::model::{Change, EventKind, InstanceEvent, InstanceId, Labels, Listed, Origin};

    /// A transition a resync found, with its incarnation's uid.
    type Found = (InstanceId, EventKind, Arc<Labels>, Option<Arc<str>>);

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
    pub(super) struct Tracker {
        known: HashMap<InstanceId, Known>,
        /// The snapshot being listed, in listing order.
        snapshot: Option<Vec<Listed>>,
        epoch: u64,
    }

    fn different_incarnation(known: Option<&Arc<str>>, seen: Option<&Arc<str>>) -> bool {
        matches!((known, seen), (Some(a), Some(b)) if a != b)
    }

    impl Tracker {
        pub(super) fn len(&self) -> usize {
            self.known.len()
        }

        pub(super) fn begin_resync(&mut self) {
            self.snapshot = Some(Vec::with_capacity(self.known.len()));
        }

        pub(super) fn listed(&mut self, listed: Listed) {
            let snapshot = self.snapshot.get_or_insert_with(|| {
                tracing::debug!("instance listed outside a resync: starting one");
                Vec::new()
            });
            snapshot.push(listed);
        }

        /// Applies one live change; pushes the transitions it implies (none for a
        /// duplicate).
        pub(super) fn change<C>(&mut self, change: Change<C>, out: &mut VecDeque<InstanceEvent>) {
            let Change {
                id,
                kind,
                uid,
                labels,
                at,
                cursor: _,
                readiness: _,
                reason: _,
            } = change;
            let mut emit = |id: &InstanceId, kind, labels: &Arc<Labels>, uid: Option<Arc<str>>| {
                out.push_back(InstanceEvent {
                    id: id.clone(),
                    kind,
                    at,
                    origin: Origin::Live,
                    labels: Arc::clone(labels),
                    uid,
                    readiness: None,
                    reason: None,
                });
            };
            let known = self.known.get_mut(&id);
            if kind == EventKind::Removed {
                if let Some(k) = known {
                    if different_incarnation(k.uid.as_ref(), uid.as_ref()) {
                        // The removal of an older incarnation: the current one stays.
                        return;
                    }
                    let labels = Arc::clone(&k.labels);
                    let text = uid.or_else(|| k.uid.clone());
                    self.known.remove(&id);
                    emit(&id, EventKind::Removed, &labels, text);
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
                    if k.uid.is_none() || uid.is_some() {
                        // (Same incarnation: a known uid equals a given one.)
                        k.uid = uid.or_else(|| k.uid.clone());
                    }
                    // `Created` of a known instance is a replay: nothing changes.
                    if kind != EventKind::Created && k.running != want_running {
                        k.running = want_running;
                        emit(&id, kind, &k.labels, k.uid.clone());
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
                        emit(&id, EventKind::Removed, &old_labels, old.uid.clone());
                    }
                    emit(&id, EventKind::Created, &labels, uid.clone());
                    if want_running {
                        emit(&id, EventKind::Started, &labels, uid.clone());
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
        #[allow(clippy::too_many_lines)]
        pub(super) fn end_resync(
            &mut self,
            origin: Option<Origin>,
            out: &mut VecDeque<InstanceEvent>,
        ) -> bool {
            let Some(snapshot) = self.snapshot.take() else {
                return false;
            };
            let at = SystemTime::now();
            // Update the known state in place: every listed instance is stamped
            // with this resync's epoch, and those left unstamped have vanished.
            self.epoch += 1;
            let epoch = self.epoch;
            let mut found: Vec<Found> = Vec::new();
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
                        let labels = Arc::clone(&k.labels);
                        found.push((
                            id.clone(),
                            EventKind::Removed,
                            labels.clone(),
                            k.uid.clone(),
                        ));
                        found.push((
                            id.clone(),
                            EventKind::Created,
                            labels.clone(),
                            l.uid.clone(),
                        ));
                        if l.running {
                            found.push((id, EventKind::Started, labels, l.uid.clone()));
                        }
                    } else if k.running != l.running {
                        let kind = if l.running {
                            EventKind::Started
                        } else {
                            EventKind::Stopped
                        };
                        let text = l.uid.clone().or_else(|| k.uid.clone());
                        found.push((id, kind, Arc::clone(&k.labels), text));
                    }
                    k.running = l.running;
                    if l.uid.is_some() {
                        k.uid = l.uid;
                    }
                } else {
                    let labels = Arc::new(l.labels);
                    if origin.is_some() {
                        found.push((
                            id.clone(),
                            EventKind::Created,
                            Arc::clone(&labels),
                            l.uid.clone(),
                        ));
                        if l.running {
                            found.push((
                                id.clone(),
                                EventKind::Started,
                                Arc::clone(&labels),
                                l.uid.clone(),
                            ));
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
                    found.push((
                        id.clone(),
                        EventKind::Removed,
                        Arc::clone(&k.labels),
                        k.uid.clone(),
                    ));
                }
                k.epoch == epoch
            });
            if let Some(origin) = origin {
                // Stable sort: per instance the pushed order (Removed, Created, Started)
                // holds; a vanished instance was pushed last but is alone under its id.
                found.sort_by(|a, b| a.0.cmp(&b.0));
                out.extend(
                    found
                        .into_iter()
                        .map(|(id, kind, labels, uid)| InstanceEvent {
                            id,
                            kind,
                            at,
                            origin,
                            labels,
                            uid,
                            readiness: None,
                            reason: None,
                        }),
                );
            }
            true
        }
    }
}

fn listed(id: &str, running: bool) -> Listed {
    Listed {
        id: id.into(),
        running,
        uid: None,
        labels: Labels::new(),
        readiness: None,
        reason: None,
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
        readiness: None,
        reason: None,
    }
}

fn kinds(out: &mut VecDeque<InstanceEvent>) -> Vec<(String, EventKind)> {
    out.drain(..).map(|e| (e.id.to_string(), e.kind)).collect()
}

#[test]
fn container_ids_and_only_they_are_packed() {
    // The plain way: 64 lowercase hex digits, two by two.
    fn plain(text: &[u8]) -> Option<[u8; 32]> {
        let lower = |c: &u8| c.is_ascii_digit() || (b'a'..=b'f').contains(c);
        if text.len() != 64 || !text.iter().all(lower) {
            return None;
        }
        let mut out = [0; 32];
        for (o, pair) in out.iter_mut().zip(text.chunks_exact(2)) {
            let pair = std::str::from_utf8(pair).ok()?;
            *o = u8::from_str_radix(pair, 16).ok()?;
        }
        Some(out)
    }
    let id = b"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    assert!(pack_hex64(id).is_some());
    for at in 0..64 {
        for byte in 0..=u8::MAX {
            let mut text = *id;
            text[at] = byte;
            assert_eq!(pack_hex64(&text), plain(&text), "{byte:#x} at {at}");
        }
    }
    for text in [&id[..63], &[id.as_slice(), b"0"].concat(), b""] {
        assert_eq!(pack_hex64(text), None);
    }
}

#[test]
fn live_changes_only_pass_when_they_change_state() {
    let mut t = Tracker::default();
    let mut out: VecDeque<InstanceEvent> = VecDeque::new();
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
    let mut out: VecDeque<InstanceEvent> = VecDeque::new();
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
    let mut out: VecDeque<InstanceEvent> = VecDeque::new();
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
fn a_replayed_create_leaves_readiness_as_it_is() {
    let mut t = Tracker::default();
    let mut out: VecDeque<InstanceEvent> = VecDeque::new();
    let healthy = Some(Readiness::container(crate::Health::Healthy, false));
    let starting = Some(Readiness::container(crate::Health::Starting, false));
    t.change(
        Change {
            readiness: healthy,
            ..change("a", EventKind::Started, Some("1"))
        },
        &mut out,
    );
    assert_eq!(
        kinds(&mut out),
        [
            ("a".into(), EventKind::Created),
            ("a".into(), EventKind::Started),
            ("a".into(), EventKind::Ready)
        ]
    );
    // The creation's readiness, replayed: no `Unready`.
    t.change(
        Change {
            readiness: starting,
            ..change("a", EventKind::Created, Some("1"))
        },
        &mut out,
    );
    assert!(out.is_empty(), "{out:?}");
    t.change(change("a", EventKind::Stopped, None), &mut out);
    let stopped = out.pop_front().expect("a stop");
    assert_eq!(stopped.readiness, healthy, "the detail stands");
}

#[test]
fn first_snapshot_can_be_silent() {
    let mut t = Tracker::default();
    let mut out: VecDeque<InstanceEvent> = VecDeque::new();
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
    let mut out: VecDeque<InstanceEvent> = VecDeque::new();
    t.change(change("a", EventKind::Started, None), &mut out);
    out.clear();
    let mut c = change("a", EventKind::Started, None);
    c.labels = Some(Arc::new(Labels::from([("k".into(), "v".into())])));
    t.change(c, &mut out);
    assert!(out.is_empty());
    t.change(change("a", EventKind::Stopped, None), &mut out);
    let Some(e) = out.front() else {
        panic!("no event: {out:?}");
    };
    assert_eq!(e.labels.get("k"), Some("v"));
}

mod same_as_reference {
    use super::*;
    use proptest::prelude::*;

    #[derive(Clone, Debug)]
    enum Op {
        Begin,
        Listed {
            id: u8,
            running: bool,
            uid: u8,
            labels: u8,
        },
        End(Option<Origin>),
        Change(u8, EventKind, u8, Option<u8>),
    }

    /// Short ids (stored inline) and long ones (shared), and a few that
    /// are alike in all but their last byte.
    fn id(i: u8) -> InstanceId {
        match i % 6 {
            0 => "a".into(),
            1 => "b".into(),
            2 => "exactly-twenty-two-b1".into(),
            3 => "exactly-twenty-two-b2".into(),
            4 => "deployment/default/a-rather-long-name".into(),
            _ => "deployment/default/a-rather-long-namf".into(),
        }
    }

    /// No uid, container ids (packed), and uids that look like one but
    /// are not: uppercase, 63 digits, not hex.
    fn uid(u: u8) -> Option<Arc<str>> {
        Some(
            match u % 8 {
                0 => return None,
                1 => "0".repeat(64),
                2 => format!("{}1", "0".repeat(63)),
                3 => format!("{}a", "f".repeat(63)),
                4 => format!("{}A", "f".repeat(63)),
                5 => "0".repeat(63),
                6 => format!("{}g", "0".repeat(63)),
                _ => "8b9c2e3f-uid".to_owned(),
            }
            .into(),
        )
    }

    fn labels(l: u8) -> Labels {
        match l % 3 {
            0 => Labels::new(),
            1 => Labels::from([("app".into(), "x".into())]),
            _ => Labels::from([("app".into(), "y".into())]),
        }
    }

    fn op() -> impl Strategy<Value = Op> {
        let kind = prop_oneof![
            Just(EventKind::Created),
            Just(EventKind::Started),
            Just(EventKind::Stopped),
            Just(EventKind::Removed),
        ];
        let origin = prop_oneof![
            Just(None),
            Just(Some(Origin::Initial)),
            Just(Some(Origin::Resync)),
        ];
        prop_oneof![
            1 => Just(Op::Begin),
            6 => (any::<u8>(), any::<bool>(), any::<u8>(), any::<u8>())
                .prop_map(|(i, r, u, l)| Op::Listed {
                    id: i,
                    running: r,
                    uid: u,
                    labels: l,
                }),
            1 => origin.prop_map(Op::End),
            4 => (any::<u8>(), kind, any::<u8>(), proptest::option::of(any::<u8>()))
                .prop_map(|(i, k, u, l)| Op::Change(i, k, u, l)),
        ]
    }

    /// The events without `at` where a snapshot stamps it with the clock.
    fn events(
        out: &mut VecDeque<InstanceEvent>,
    ) -> Vec<(String, EventKind, Origin, Labels, Option<SystemTime>)> {
        out.drain(..)
            .map(|e| {
                (
                    e.id.to_string(),
                    e.kind,
                    e.origin,
                    (*e.labels).clone(),
                    (e.origin == Origin::Live).then_some(e.at),
                )
            })
            .collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]
        #[test]
        fn same_events_as_the_reference(ops in proptest::collection::vec(op(), 0..80)) {
            let (mut t, mut r) = (Tracker::default(), reference::Tracker::default());
            let (mut out, mut want): (VecDeque<InstanceEvent>, VecDeque<InstanceEvent>) =
                (VecDeque::new(), VecDeque::new());
            for op in ops {
                match op {
                    Op::Begin => {
                        t.begin_resync();
                        r.begin_resync();
                    }
                    Op::Listed { id: i, running, uid: u, labels: l } => {
                        let listed = Listed { id: id(i), running, uid: uid(u), labels: labels(l), readiness: None, reason: None };
                        t.listed(listed.clone());
                        r.listed(listed);
                    }
                    Op::End(origin) => {
                        prop_assert_eq!(t.end_resync(origin, &mut out), r.end_resync(origin, &mut want));
                    }
                    Op::Change(i, kind, u, l) => {
                        let change = Change::<u64> {
                            id: id(i),
                            kind,
                            uid: uid(u),
                            labels: l.map(|l| Arc::new(labels(l))),
                            at: SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(u64::from(i)),
                            cursor: None,
                            readiness: None,
                            reason: None,
                        };
                        t.change(change.clone(), &mut out);
                        r.change(change, &mut want);
                    }
                }
                prop_assert_eq!(events(&mut out), events(&mut want));
                prop_assert_eq!(t.len(), r.len());
            }
        }
    }
}
