//! The history rules, without I/O: what the events the engine still has
//! since the cursor (fetched by the dial first, see `history_fetch.rs`
//! beside the protocol) say: whether they continue the feed exactly, what
//! they replay, and what they say of the objects a list taken right after
//! may not show yet.
//!
//! After a reconnect, what happened while the feed could not be seen is told
//! **either** as the exact transitions **or** as the snapshot's net effect,
//! never both, and always before anything that happened after the
//! snapshot. The exact way needs proof that nothing is missing: Docker's
//! `since` is inclusive, so a history that holds the last event seen (the
//! cursor's) continues the feed without a gap, and every event after it in
//! that history was missed. Then the session yields those events first
//! (live, with the engine's times), lists (the diff normally finds nothing
//! left), and subscribes from the history's end. Without the proof (a
//! restarted daemon keeps no history, dockerd keeps only its last 256
//! events), the history is not told: the snapshot's diff reports the net
//! effect (origin `resync`), and the new subscription starts where the
//! history ends (an empty history: from now), so nothing of the past comes
//! after the snapshot.
//!
//! Either way the history corrects the list: dockerd logs a container's
//! `die` before its list shows it exited (measured on dockerd 20.10: 9 stops
//! in 20), so a list taken right after may still say "running"; the last
//! transition of each object in the history is the fresher truth (a later
//! one comes through the subscription, which resumes where the history
//! ends).

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use lookout_core::{EventKind, Listed, Observation};

use super::cursor::Cursor;
use super::feed::{Feed, FeedOutput, Obs};
use super::objects::{Objects, Scope};
use super::wire::line_time;

/// What a dial learnt from the engine's history.
#[derive(Debug)]
pub(crate) struct Past {
    /// The missed events as exact transitions, in the engine's order: `Some`
    /// when the history holds the last event seen (it continues the feed).
    pub(crate) replay: Option<Vec<Obs>>,
    /// The last transition of each object (by uid) in the history.
    pub(crate) last: HashMap<Arc<str>, EventKind>,
    /// Where the new subscription resumes: the newest time in the history
    /// (the engine's clock; `None` for an empty history: the subscription
    /// then starts from now, as lookout's clock may differ from the
    /// engine's).
    pub(crate) end: Option<Cursor>,
}

/// Records the last transition of each object among `observations`.
pub(crate) fn note<'a>(
    last: &mut HashMap<Arc<str>, EventKind>,
    observations: impl IntoIterator<Item = &'a Obs>,
) {
    for obs in observations {
        if let Observation::Change(c) = obs
            && let Some(uid) = &c.uid
        {
            last.insert(Arc::clone(uid), c.kind);
        }
    }
}

/// Records the last word of each object among `steps` (not inspected: the
/// history is not replayed). An event that needs an inspection to mean
/// anything (with readiness, a start of a container not known to have a
/// check, Podman's `health_status`) leaves its object's state unknown: the
/// list stands. (Found by the Podman e2e `initial` scenario: a container
/// created, started and checked within the first dial's look-back had its
/// `create` for the last word, and the list's `running` was "corrected"
/// to stopped.)
pub(crate) fn note_steps<'a>(
    last: &mut HashMap<Arc<str>, EventKind>,
    steps: impl IntoIterator<Item = &'a FeedOutput>,
) {
    for step in steps {
        match step {
            FeedOutput::Obs(obs) => note(last, [obs]),
            FeedOutput::Inspect { event, .. } => {
                last.remove(event.uid());
            }
        }
    }
}

/// Corrects a list taken right after the history with what the history
/// says last of each listed object: removed objects go, a start or a stop
/// wins over the list's state.
pub(crate) fn correct(listed: &mut Vec<Listed>, last: &HashMap<Arc<str>, EventKind>) {
    if last.is_empty() {
        return;
    }
    listed.retain_mut(|l| {
        let Some(kind) = l.uid.as_ref().and_then(|uid| last.get(uid)) else {
            return true;
        };
        let running = match kind {
            EventKind::Removed => {
                tracing::debug!(id = %l.id, "listed, but its removal is in the history: the list lags");
                return false;
            }
            // A readiness change, a stop request and a failure are of a
            // running container.
            EventKind::Started
            | EventKind::Ready
            | EventKind::Unready
            | EventKind::Stopping
            | EventKind::Failing => true,
            _ => false,
        };
        if l.running != running {
            tracing::debug!(id = %l.id, running, "the history is fresher than the list: corrected");
            l.running = running;
        }
        true
    });
}

/// A history decoded with one feed: what came up to the last event seen,
/// and what followed it.
pub(crate) struct Decoded<K> {
    /// The history holds the last event seen: what follows it was missed.
    pub(crate) continues: bool,
    /// Up to and with the last event seen (when `continues`).
    pub(crate) seen: VecDeque<FeedOutput>,
    /// After it (or all of it, when it does not continue the feed).
    pub(crate) missed: VecDeque<FeedOutput>,
    /// The feed that decoded it (its knowledge serves the inspections).
    pub(crate) feed: Feed<K>,
}

/// Decodes `body`, split after the first event at `resume`, if any. What
/// follows is taken by position, not by time: the events after the last one
/// seen, in the order the engine logged them, were not seen.
pub(crate) fn decode<O: Objects>(
    objects: &'static O,
    scope: &Scope,
    body: &[u8],
    resume: Option<Cursor>,
) -> Decoded<O::Known> {
    let split = resume.and_then(|cursor| after_line_at(body, cursor));
    let mut feed = Feed::history(objects, scope, split.and(resume));
    let mut seen = VecDeque::new();
    let mut missed = VecDeque::new();
    // After the last event seen, what an earlier snapshot told (up to the
    // cursor's told time) is not missed: it is not replayed, and is the
    // history's word on those objects like what came before.
    let at = match (split, resume) {
        (Some(split), Some(cursor)) => split + told_len(&body[split..], cursor),
        _ => 0,
    };
    feed.push(&body[..at], &mut seen);
    if body[..at].last().is_some_and(|b| *b != b'\n') {
        // The body ends with the last event seen, without a `\n`.
        feed.push(b"\n", &mut seen);
    }
    feed.push(&body[at..], &mut missed);
    feed.finish(&mut missed);
    Decoded {
        continues: split.is_some(),
        seen,
        missed,
        feed,
    }
}

/// How many bytes of the lines at the start of `body` a snapshot after the
/// last event seen told (those up to the cursor's told time, whatever their
/// position; a line without a time goes with them). None without one: what
/// follows the last event seen is taken by position.
fn told_len(body: &[u8], cursor: Cursor) -> usize {
    if cursor.told_nanos() == cursor.unix_nanos() {
        return 0;
    }
    let mut start = 0;
    while start < body.len() {
        let end = memchr::memchr(b'\n', &body[start..]).map_or(body.len(), |i| start + i);
        let line = &body[start..end];
        if !line.trim_ascii().is_empty() && line_time(line).is_some_and(|t| !cursor.tells(t)) {
            return start;
        }
        start = end + 1;
    }
    body.len()
}

/// Where the line after the first event at `cursor` starts in `body`.
fn after_line_at(body: &[u8], cursor: Cursor) -> Option<usize> {
    let mut start = 0;
    while start < body.len() {
        let end = memchr::memchr(b'\n', &body[start..]).map_or(body.len(), |i| start + i);
        if line_time(&body[start..end]).is_some_and(|t| cursor.is_seen_at(t)) {
            return Some((end + 1).min(body.len()));
        }
        start = end + 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{TABLE, event};
    use lookout_core::EventKind;
    use lookout_core::Labels;

    fn body(lines: &[String]) -> Vec<u8> {
        (lines.join("\n") + "\n").into_bytes()
    }

    fn decoded(history: &[u8], cursor: i64) -> Decoded<crate::KnownContainers> {
        decode(
            &TABLE,
            &Scope::default(),
            history,
            Some(Cursor::from_unix_nanos(cursor)),
        )
    }

    /// `(id, kind, uid, cursor)` of each change missed, `progress` otherwise.
    fn summary(c: &Decoded<crate::KnownContainers>) -> Vec<String> {
        c.missed
            .iter()
            .map(|s| match s {
                FeedOutput::Obs(Observation::Change(c)) => format!(
                    "{} {:?} {} {:?}",
                    c.id,
                    c.kind,
                    c.uid.as_deref().unwrap_or("-"),
                    c.cursor.map(Cursor::unix_nanos)
                ),
                FeedOutput::Obs(Observation::Progress(c)) => {
                    format!("progress {:?}", c.map(Cursor::unix_nanos))
                }
                other => format!("{other:?}"),
            })
            .collect()
    }

    #[test]
    fn a_history_holding_the_last_event_seen_continues_the_feed() {
        let history = body(&[
            // `since` is a microsecond early: an event just before the cursor.
            event("start", "c0", "db", 99),
            // The last event seen: the proof.
            event("die", "c1", "web", 100),
            event("destroy", "c1", "web", 110),
            // A new incarnation of `web`, then a container whose create the
            // redial's session never saw: every container in the history
            // was watched (the engine filtered the events by label).
            event("create", "c2", "web", 120),
            event("start", "c2", "web", 130),
            event("kill", "c2", "web", 135),
            event("die", "c0", "db", 140),
        ]);
        let c = decoded(&history, 100);
        assert!(c.continues);
        assert_eq!(
            summary(&c),
            [
                "web Removed c1 Some(110)",
                "web Created c2 Some(120)",
                "web Started c2 Some(130)",
                "progress Some(135)",
                "db Stopped c0 Some(140)",
            ]
        );
        assert_eq!(c.feed.newest(), Some(Cursor::from_unix_nanos(140)));
        // Labels come from the events' attributes, without the non-labels.
        let FeedOutput::Obs(Observation::Change(db)) = &c.missed[4] else {
            unreachable!()
        };
        assert_eq!(
            db.labels.as_deref(),
            Some(&Labels::from([("app".into(), "web".into())]))
        );
    }

    #[test]
    fn what_follows_the_cursor_is_taken_by_position() {
        // An engine that logs an event with an older time after the last one
        // seen (Podman's cleanup process writes `died` itself): not seen.
        let history = body(&[
            event("start", "c1", "web", 100),
            event("die", "c1", "web", 95),
        ]);
        let c = decoded(&history, 100);
        assert!(c.continues);
        // Reported, without moving the cursor back.
        assert_eq!(summary(&c), ["web Stopped c1 None"]);
        assert_eq!(c.feed.newest(), Some(Cursor::from_unix_nanos(100)));
    }

    #[test]
    fn what_a_snapshot_told_is_not_missed() {
        // Seen up to 100; a snapshot at 200 told every event before it.
        let cursor = Cursor::from_unix_nanos(100).told_until(Cursor::from_unix_nanos(200));
        let history = body(&[
            event("start", "c1", "web", 100),
            event("die", "c1", "web", 150),
            event("destroy", "c1", "web", 90),
            event("create", "c2", "web", 250),
        ]);
        let labels = Labels::from([("app".into(), "web".into())]);
        let c = decode(&TABLE, &Scope::new(labels, false), &history, Some(cursor));
        assert!(c.continues, "still proven from the last event seen");
        assert_eq!(summary(&c), ["web Created c2 Some(250)"]);
        // The history's word on the told ones still corrects a list.
        let mut last = HashMap::new();
        note_steps(&mut last, &c.seen);
        assert_eq!(last.get("c1"), Some(&EventKind::Removed));
        let end = c.feed.newest().expect("an end");
        assert_eq!((end.unix_nanos(), end.told_nanos()), (250, 250));
    }

    #[test]
    fn a_history_without_the_last_event_seen_proves_nothing() {
        let cursor = Cursor::from_unix_nanos(100);
        // A restarted daemon (nothing), a buffer that no longer reaches back
        // (only later events), an undecodable line at the cursor's place.
        for history in [
            Vec::new(),
            body(&[event("die", "c1", "web", 101)]),
            body(&[
                r#"{"Type":"container","timeNano":"100"}"#.to_owned(),
                event("die", "c1", "web", 101),
            ]),
        ] {
            let c = decoded(&history, 100);
            assert!(!c.continues);
            // Decoded all the same, to correct the list.
            assert!(c.seen.is_empty());
            assert_eq!(c.missed.len(), memchr::memchr_iter(b'\n', &history).count());
        }
        // A history that ends with the last event seen: nothing was missed.
        let history = event("die", "c1", "web", 100);
        let c = decoded(history.as_bytes(), 100);
        assert!(c.continues && c.missed.is_empty());
        assert_eq!(c.seen.len(), 1, "the last event seen, for the list");
        assert_eq!(c.feed.newest(), Some(cursor));
    }

    fn listed(id: &str, uid: &str, running: bool) -> Listed {
        Listed::new(id.into(), running)
            .uid(Some(uid.into()))
            .labels(Labels::new())
    }

    /// dockerd logs `die` before its list shows the container exited: the
    /// history's last word on an object wins over a list taken right after.
    #[test]
    fn the_history_corrects_a_list_that_lags() {
        let last: HashMap<Arc<str>, EventKind> = [
            ("stopped".into(), EventKind::Stopped),
            ("started".into(), EventKind::Started),
            ("removed".into(), EventKind::Removed),
            ("created".into(), EventKind::Created),
        ]
        .into();
        let mut listing = vec![
            listed("a", "stopped", true),
            listed("b", "started", false),
            listed("c", "removed", false),
            listed("d", "created", true),
            listed("e", "unseen", true),
        ];
        correct(&mut listing, &last);
        let now: Vec<(&str, bool)> = listing.iter().map(|l| (l.id.as_str(), l.running)).collect();
        assert_eq!(now, [("a", false), ("b", true), ("d", false), ("e", true)]);
    }

    /// With readiness, a start of a container not known to have a check
    /// needs an inspection: not replayed, it tells nothing, and an older
    /// event (its create) must not stand as the history's last word.
    #[test]
    fn an_event_that_needs_an_inspection_leaves_the_list_as_it_is() {
        let history = body(&[
            event("create", "c2", "web", 120),
            event("start", "c2", "web", 130),
            event("create", "c3", "db", 140),
        ]);
        let scope = Scope::new(Labels::new(), true);
        let c = decode(&TABLE, &scope, &history, None);
        assert!(!c.continues);
        assert!(matches!(c.missed[1], FeedOutput::Inspect { .. }));
        let mut last = HashMap::new();
        note_steps(&mut last, &c.missed);
        assert_eq!(last.get("c2"), None);
        assert_eq!(last.get("c3"), Some(&EventKind::Created));
        let mut listing = vec![listed("web", "c2", true), listed("db", "c3", true)];
        correct(&mut listing, &last);
        let now: Vec<(&str, bool)> = listing.iter().map(|l| (l.id.as_str(), l.running)).collect();
        assert_eq!(now, [("web", true), ("db", false)]);
        // Without readiness the start needs none: it is the last word.
        let c = decode(&TABLE, &Scope::default(), &history, None);
        let mut last = HashMap::new();
        note_steps(&mut last, &c.missed);
        assert_eq!(last.get("c2"), Some(&EventKind::Started));
    }
}
