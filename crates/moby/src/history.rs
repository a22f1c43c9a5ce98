//! What a redial reads first: the events the engine still has since the
//! cursor, with a request that ends by itself, and whether they continue
//! the feed exactly.
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
//! events, an engine whose `since` cannot be trusted), the history is
//! dropped: the snapshot's diff reports the net effect (origin `resync`)
//! and the new subscription asks for nothing of the past.

use std::collections::VecDeque;
use std::time::SystemTime;

use lookout_core::Labels;

use super::cursor::Cursor;
use super::feed::{Feed, Obs, Step};
use super::host::{Host, TlsEnv};
use super::inspect::inspect;
use super::objects::Objects;
use super::wire::line_time;
use super::{CompatError, INSPECT_TIMEOUT, http};

/// How an engine serves, to a redial, the events its last session missed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum History {
    /// `since` … `until` (lookout's clock now) ends the response after the
    /// events the engine still has: dockerd answers from its in-memory
    /// buffer of its last 256 events (of every type), none after a restart.
    Until,
    /// `since` with `stream=false` ends the response at the end of the
    /// engine's event log: Podman (journald or a file) keeps its events
    /// across restarts of its service. (Podman 4's `until` ends the read at
    /// once when that time has passed: no use here.)
    NoStream,
    /// The engine's `since` cannot prove a history complete: Swarm stamps a
    /// service event with the service's `UpdatedAt`, so a change made while
    /// disconnected may carry a time older than the cursor and not be
    /// replayed at all. A redial lists and diffs, and subscribes from now.
    Unreliable,
}

impl History {
    /// The query parameters that make `/events?since=…` end after the
    /// history; `None` when the history is not read.
    fn bound(self, now: SystemTime) -> Option<String> {
        match self {
            Self::Until => Some(format!("&until={}", Cursor::from_system_time(now).query())),
            Self::NoStream => Some("&stream=false".to_owned()),
            Self::Unreliable => None,
        }
    }
}

/// The largest history read (16 MiB: some 30 000 events); a larger one is
/// not replayed (the snapshot's diff reports its net effect).
const MAX_HISTORY: usize = 16 << 20;

/// How long the history may take to arrive; past it, the snapshot's diff
/// tells what happened (an engine whose clock is behind lookout's holds an
/// `until` in its future open until then).
const HISTORY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// The events a redial missed, proven to continue the feed from its cursor.
#[derive(Debug)]
pub(crate) struct Replay {
    /// What they mean, in the engine's order.
    pub(crate) observations: Vec<Obs>,
    /// The newest time seen in the history (at least the cursor): the new
    /// subscription's `since`.
    pub(crate) end: Cursor,
}

/// Reads what the engine still has of its `/events` (`events_path`, with
/// the session's filters and `since` the cursor) and keeps it when it
/// continues the feed from `cursor`. `Ok(None)`: no proof, or no history
/// to read (the snapshot's diff tells what happened); `Err`: the engine
/// could not be reached (the dial fails).
pub(crate) async fn read<O: Objects>(
    objects: &'static O,
    labels: &Labels,
    host: &Host,
    tls: &TlsEnv,
    events_path: &str,
    cursor: Cursor,
) -> Result<Option<Replay>, CompatError> {
    let provider = objects.provider();
    let Some(bound) = objects.history().bound(SystemTime::now()) else {
        return Ok(None);
    };
    let path = format!("{events_path}{bound}");
    let request = async {
        http::get(host, tls, &path)
            .await?
            .ok("/events")
            .await?
            .body("/events", MAX_HISTORY)
            .await
    };
    let body = match tokio::time::timeout(HISTORY_TIMEOUT, request).await {
        Ok(Ok(body)) => body,
        Ok(Err(e @ (CompatError::Status { .. } | CompatError::TooLarge { .. }))) => {
            // A refusal (Docker: `since` after `until`, when the engine's
            // clock is ahead of ours) or more than we read: relist.
            tracing::debug!(provider, error = %e, "no history to replay: the snapshot tells");
            return Ok(None);
        }
        Ok(Err(e)) => return Err(e),
        Err(_) => {
            tracing::debug!(provider, timeout = ?HISTORY_TIMEOUT, "the history did not end in time: the snapshot tells");
            return Ok(None);
        }
    };
    let Some(mut replay) = continuation(objects, labels, &body, cursor) else {
        tracing::debug!(
            provider,
            ?cursor,
            bytes = body.len(),
            "the history does not reach back to the last event seen: the snapshot tells"
        );
        return Ok(None);
    };
    let mut observations = Vec::with_capacity(replay.steps.len());
    for step in replay.steps {
        match step {
            Step::Obs(obs) => observations.push(obs),
            Step::Inspect { event, path } => {
                let inspection = inspect(host, tls, &path, INSPECT_TIMEOUT).await?;
                observations.push(replay.feed.inspected(event, &inspection));
            }
        }
    }
    tracing::debug!(
        provider,
        replayed = observations.len(),
        "the history continues the feed: replaying it before the snapshot"
    );
    Ok(Some(Replay {
        observations,
        end: replay.feed.newest().unwrap_or(cursor),
    }))
}

/// A history decoded past the cursor, with the feed that decoded it (its
/// knowledge serves the inspections the steps ask for).
struct Continuation<K> {
    steps: VecDeque<Step>,
    feed: Feed<K>,
}

/// Decodes what follows the first event at `cursor` in `body`; `None` when
/// there is no such event (the history does not prove continuity).
///
/// What follows is taken by position, not by time: the events after the
/// last one seen, in the order the engine logged them, were not seen.
fn continuation<O: Objects>(
    objects: &'static O,
    labels: &Labels,
    body: &[u8],
    cursor: Cursor,
) -> Option<Continuation<O::Known>> {
    let mut start = 0;
    let rest = loop {
        if start >= body.len() {
            return None;
        }
        let end = memchr::memchr(b'\n', &body[start..]).map_or(body.len(), |i| start + i);
        if line_time(&body[start..end]) == Some(cursor) {
            break &body[(end + 1).min(body.len())..];
        }
        start = end + 1;
    };
    let mut feed = Feed::history(objects, labels, cursor);
    let mut steps = VecDeque::new();
    feed.push(rest, &mut steps);
    feed.finish(&mut steps);
    Some(Continuation { steps, feed })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::Discovery;
    use crate::mapping::Mapping;
    use lookout_core::{EventKind, Observation};

    static TABLE: Mapping = Mapping {
        provider: "test",
        actions: &[
            ("create", EventKind::Created),
            ("start", EventKind::Started),
            ("die", EventKind::Stopped),
            ("destroy", EventKind::Removed),
        ],
        ignored: &["kill"],
        non_label_attributes: &["name", "image", "exitCode"],
        history: History::Until,
        discovery: Discovery {
            host_var: "LOOKOUT_TEST_HOST",
            sockets: &[],
        },
    };

    fn event(action: &str, uid: &str, name: &str, nanos: i64) -> String {
        format!(
            r#"{{"Type":"container","Action":"{action}","Actor":{{"ID":"{uid}","Attributes":{{"image":"busybox","name":"{name}","app":"web","exitCode":"0"}}}},"timeNano":{nanos}}}"#
        )
    }

    fn body(lines: &[String]) -> Vec<u8> {
        (lines.join("\n") + "\n").into_bytes()
    }

    /// `(id, kind, uid, cursor)` of each change, `progress` otherwise.
    fn summary(c: &Continuation<crate::KnownContainers>) -> Vec<String> {
        c.steps
            .iter()
            .map(|s| match s {
                Step::Obs(Observation::Change(c)) => format!(
                    "{} {:?} {} {:?}",
                    c.id,
                    c.kind,
                    c.uid.as_deref().unwrap_or("-"),
                    c.cursor.map(Cursor::unix_nanos)
                ),
                Step::Obs(Observation::Progress(c)) => {
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
        let c = continuation(
            &TABLE,
            &Labels::new(),
            &history,
            Cursor::from_unix_nanos(100),
        )
        .expect("continuous");
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
        let Step::Obs(Observation::Change(db)) = &c.steps[4] else {
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
        let c = continuation(
            &TABLE,
            &Labels::new(),
            &history,
            Cursor::from_unix_nanos(100),
        )
        .expect("continuous");
        // Reported, without moving the cursor back.
        assert_eq!(summary(&c), ["web Stopped c1 None"]);
        assert_eq!(c.feed.newest(), Some(Cursor::from_unix_nanos(100)));
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
            assert!(continuation(&TABLE, &Labels::new(), &history, cursor).is_none());
        }
        // A history that ends with the last event seen: nothing was missed.
        let history = event("die", "c1", "web", 100);
        let c =
            continuation(&TABLE, &Labels::new(), history.as_bytes(), cursor).expect("continuous");
        assert!(c.steps.is_empty());
        assert_eq!(c.feed.newest(), Some(cursor));
    }

    #[test]
    fn the_bound_ends_the_request() {
        let now =
            SystemTime::UNIX_EPOCH + std::time::Duration::from_nanos(1_700_000_000_000_000_123);
        assert_eq!(
            History::Until.bound(now).as_deref(),
            Some("&until=1700000000.000000123")
        );
        assert_eq!(
            History::NoStream.bound(now).as_deref(),
            Some("&stream=false")
        );
        assert_eq!(History::Unreliable.bound(now), None);
    }
}
