//! The meaning of the `/events` body of one session: each framed line
//! decoded, checked against the resume point, and handed to the session's
//! [`KnownObjects`]. Pure (no I/O), so every case is unit-tested.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::sync::Arc;

use lookout_core::{
    Change, EventKind, InstanceId, Labels, LineSplitter, Listed, Observation, Readiness, Reason,
    SplitLine,
};

use super::attributes_scan::Facts;
use super::cursor::Cursor;
use super::event::{Attributes, Event};
use super::framing::{MAX_LINE, preview};
use super::inspection::Inspection;
use super::line_scan::{self, Decoded};
use super::objects::{Decision, KnownObjects, Objects, Scope};
use super::replays::Replays;
use super::wire::{Wire, attribute_name};

/// One decoded observation from the feed.
pub(crate) type Obs = Observation<Cursor>;

/// How many times one event's object may be read (see
/// [`KnownObjects::inspected`]).
pub const MAX_INSPECTIONS: u8 = 10;

/// What the feed makes of one line.
///
/// Exhaustive: a line either yields an observation or asks for its object
/// first; another kind of step would need every reader of the feed to act
/// on it, so it could not come without a breaking change anyway.
#[derive(Debug)]
pub enum FeedOutput {
    /// An observation to yield.
    Obs(Observation<Cursor>),
    /// Inspect the event's object (`GET path`) before deciding, or (after
    /// an inspection) again, after a pause: see [`Feed::inspected`] and
    /// [`reinspect_after`].
    Inspect {
        /// The event, decoded.
        event: Event,
        /// What to `GET`.
        path: String,
    },
}

impl FeedOutput {
    /// The room a drained step queue keeps (see [`trim`](Self::trim)):
    /// some 170 KiB, more than a 64 KiB chunk of real event lines needs (a
    /// few hundred), so a busy feed does not shrink and regrow per chunk.
    pub const KEPT: usize = 1024;

    /// Gives back what a burst of lines left in a drained step queue: a
    /// 64 KiB chunk of short lines queues thousands of steps (each some 170
    /// bytes), and a queue kept between chunks would hold that capacity for
    /// the session's life. Keeps room for [`FeedOutput::KEPT`] steps.
    pub fn trim(out: &mut VecDeque<FeedOutput>) {
        if out.capacity() > Self::KEPT {
            out.shrink_to(Self::KEPT);
        }
    }
}

/// Turns the `/events` body of one session into observations, without I/O:
/// what [`CompatDial`](crate::CompatDial)'s sessions run on the bytes they
/// read, for a program that reads the body itself (and for the fuzz
/// harnesses).
///
/// It frames and decodes the lines (an undecodable one costs that event
/// only, with one `warn`: [`Observation::Progress`]), keeps the cursor,
/// drops what a subscription resumed from a cursor replays of the events
/// seen before it, and what the engine sends again within the subscription
/// (Podman before 4.5, after it rotates its event log: `replays.rs`), and
/// hands each event of the watched type to the session's [`KnownObjects`],
/// which says what it means.
#[derive(Debug)]
pub struct Feed<K> {
    provider: &'static str,
    event_type: &'static str,
    /// The cursor a subscription resumed from: every event at or before it
    /// was seen (see [`Cursor`]). A subscription from now has the engine's
    /// time when it answered, less a margin
    /// ([`subscribed_at`](Self::subscribed_at)).
    resume: Option<Cursor>,
    /// The newest cursor reported: cursors only move forward, so that an
    /// event with a bogus old time cannot send a redial far back.
    newest: Option<Cursor>,
    /// The events decoded lately, to drop one the engine sends again.
    replays: Replays,
    known: K,
    lines: LineSplitter,
}

impl<K: KnownObjects> Feed<K> {
    /// The feed of a subscription of the watch `scope`, resumed from
    /// `resume` (`None`: from now), after a snapshot that `listed` these
    /// objects.
    pub fn new<O: Objects<Known = K>>(
        objects: &'static O,
        scope: &Scope,
        resume: Option<Cursor>,
        listed: &[Listed],
    ) -> Self {
        Self::with(objects, objects.known(scope, listed), resume, resume)
    }

    /// The feed of a history read past the last event seen, at `cursor`:
    /// it drops nothing by time (what follows that event was not seen), and
    /// its cursors never go back before `cursor`.
    pub(crate) fn history<O: Objects<Known = K>>(
        objects: &'static O,
        scope: &Scope,
        cursor: Option<Cursor>,
    ) -> Self {
        Self::with(objects, objects.known_history(scope), None, cursor)
    }

    fn with<O: Objects<Known = K>>(
        objects: &'static O,
        known: K,
        resume: Option<Cursor>,
        newest: Option<Cursor>,
    ) -> Self {
        Self {
            provider: objects.provider(),
            event_type: objects.event_type(),
            resume,
            newest,
            replays: Replays::default(),
            known,
            lines: LineSplitter::new(MAX_LINE),
        }
    }

    /// The newest event time seen (or the cursor it started from).
    pub fn newest(&self) -> Option<Cursor> {
        self.newest
    }

    /// Feeds a piece of the body; pushes a step per complete line.
    pub fn push(&mut self, mut chunk: &[u8], out: &mut VecDeque<FeedOutput>) {
        while let Some(split) = self.lines.split(&mut chunk) {
            self.split(&split, out);
        }
    }

    /// The body ended: decodes a last line that had no `\n`.
    pub fn finish(&mut self, out: &mut VecDeque<FeedOutput>) {
        if let Some(last) = self.lines.finish() {
            out.extend(self.line(&last));
        }
    }

    fn split(&mut self, split: &SplitLine<'_>, out: &mut VecDeque<FeedOutput>) {
        match split {
            SplitLine::Line(line) => out.extend(self.line(line)),
            SplitLine::TooLong(start) => {
                tracing::warn!(
                    provider = self.provider,
                    limit = MAX_LINE,
                    start = %preview(start),
                    "skipping an event line longer than the limit"
                );
                out.push_back(FeedOutput::Obs(Observation::Progress(None)));
            }
        }
    }

    /// What the event means now that its object was inspected (an
    /// unusable answer skips the event with a warning): an observation, or
    /// [`FeedOutput::Inspect`] to read the object again after
    /// [`reinspect_after`] the event's [`inspections`](Event::inspections)
    /// (at most [`MAX_INSPECTIONS`] reads in all).
    pub fn inspected(&mut self, mut event: Event, inspection: &Inspection) -> FeedOutput {
        event.inspections = event.inspections.saturating_add(1);
        let object = match inspection {
            Inspection::Found(object) => Some(object),
            Inspection::Gone => None,
            Inspection::Unusable(reason) => {
                tracing::warn!(
                    provider = self.provider,
                    id = event.name(),
                    action = event.action(),
                    %reason,
                    "skipping an event whose object cannot be inspected"
                );
                return FeedOutput::Obs(Observation::Progress(event.cursor));
            }
        };
        let decision = match self.known.inspected(&event, object) {
            Decision::Inspect(_) if event.inspections >= MAX_INSPECTIONS => {
                Decision::Undecodable("asked to inspect too many times")
            }
            decision => decision,
        };
        self.decided(event, decision)
    }

    /// A subscription from now (no `since`) that the engine answered at
    /// `date` (its `Date` header: its clock, to the second): it streams only
    /// events that happen after, so an event more than
    /// [`SUBSCRIBED_MARGIN_NANOS`] before `date` is one the engine sends again from
    /// its past (Podman < 4.5 after rotating its log: see `replays.rs`;
    /// those of this subscription [`Replays`] knows, those from before it
    /// the resume point drops, as it drops what a resumed subscription
    /// replays). An engine whose clock steps back by more than the margin
    /// just after the subscription loses the events of that step. A
    /// subscription resumed from a cursor keeps it.
    #[must_use]
    pub(crate) fn subscribed_at(mut self, date: Cursor) -> Self {
        let floor = date.unix_nanos().saturating_sub(SUBSCRIBED_MARGIN_NANOS);
        // Told up to just before the floor: an event before it counts as seen.
        self.resume = self
            .resume
            .or(Some(Cursor::from_unix_nanos(floor.saturating_sub(1))));
        self
    }

    /// Whether an event at `time` was seen (or its effect told by a
    /// snapshot) before this subscription resumed (or, from now, began).
    fn seen_before(&self, time: Cursor) -> bool {
        self.resume.is_some_and(|r| r.tells(time))
    }

    /// The session's list answered at `at`: its snapshot tells every event
    /// before that, so the cursor's told time moves there (a later history
    /// replays nothing older; see [`Cursor`]). The cursor now.
    pub fn snapshot_at(&mut self, at: Cursor) -> Cursor {
        let cursor = self.newest.map_or(at, |n| n.told_until(at));
        self.newest = Some(cursor);
        cursor
    }

    /// Decodes one line. `None` for a blank line; an undecodable, unwanted or
    /// stale event is `Progress`, with its cursor when it has one.
    fn line(&mut self, line: &[u8]) -> Option<FeedOutput> {
        let line = line.trim_ascii();
        if line.is_empty() {
            return None;
        }
        let provider = self.provider;
        let poison = |reason: &str, cursor: Option<Cursor>| {
            tracing::warn!(provider, reason, line = %preview(line), "skipping an undecodable event");
            Some(FeedOutput::Obs(Observation::Progress(cursor)))
        };
        // One hand scan of a plain line, else serde_json (`line_scan.rs`).
        let Decoded { wire: event, facts } = match line_scan::decode(line) {
            Ok(decoded) => decoded,
            Err(e) if e.is_data() => return poison("not a JSON object", None),
            Err(e) => return poison(&format!("not JSON: {e}"), None),
        };
        let Some(time) = event.time() else {
            return poison("no timeNano/time", None);
        };
        if self.seen_before(time) {
            // Seen before the redial. Passing it on again is not harmless: the
            // snapshot may have moved the state on since (a replayed `start`
            // after a resync found the container stopped would restart it).
            tracing::trace!(provider, ?time, "replayed from before the resume point");
            return Some(FeedOutput::Obs(Observation::Progress(None)));
        }
        let cursor = match self.newest {
            Some(n) if time.unix_nanos() < n.unix_nanos() => None,
            newest => {
                let cursor = newest.map_or(time, |n| n.seen_at(time));
                self.newest = Some(cursor);
                Some(cursor)
            }
        };
        match self.event(event, facts, time, cursor) {
            Ok(step) => Some(step),
            Err(reason) => poison(reason, cursor),
        }
    }

    /// Decodes what every event has and asks the session's objects what it
    /// means; `Err` names what it lacks.
    fn event(
        &mut self,
        event: Wire<'_>,
        facts: Option<Facts<'_>>,
        time: Cursor,
        cursor: Option<Cursor>,
    ) -> Result<FeedOutput, &'static str> {
        match event.r#type.str() {
            Some(t) if t == self.event_type => {}
            Some(other) => {
                tracing::debug!(
                    provider = self.provider,
                    r#type = other,
                    "ignoring an event of another type"
                );
                return Ok(FeedOutput::Obs(Observation::Progress(cursor)));
            }
            None => return Err("no Type"),
        }
        let action = event
            .action
            .or(event.status)
            .into_str()
            .ok_or("no Action")?
            .into_owned();
        let uid: Arc<str> = event
            .actor_id
            .or(event.id)
            .str()
            .filter(|id| !id.is_empty())
            .ok_or("no Actor.ID")?
            .into();
        // The name (and a `die`'s exit code) as the line's scan read them,
        // else by serde_json (`attributes_scan.rs`).
        let name = match facts {
            Some(facts) => facts.name.map(Cow::Borrowed),
            None => event.attributes.and_then(attribute_name),
        };
        let name = name
            .as_deref()
            .map(|n| n.trim_start_matches('/'))
            .filter(|n| !n.is_empty())
            .map(InstanceId::from)
            .ok_or("no Actor.Attributes.name")?;
        if self.replays.again(time.unix_nanos(), &uid, &action) {
            // Sent again (Podman < 4.5 after rotating its event log): told
            // once already, and no news now.
            tracing::debug!(
                provider = self.provider,
                id = name.as_str(),
                action,
                ?time,
                "dropping an event the engine sent again"
            );
            return Ok(FeedOutput::Obs(Observation::Progress(cursor)));
        }
        let event = Event {
            action,
            uid,
            name,
            attributes: match (event.attributes, facts) {
                (Some(raw), Some(facts)) => Attributes::raw(raw).with_exit_code(facts.exit_code()),
                (Some(raw), None) => Attributes::raw(raw),
                (None, _) => Attributes::default(),
            },
            time,
            cursor,
            inspections: 0,
        };
        match self.known.event(&event) {
            Decision::Undecodable(reason) => Err(reason),
            decision => Ok(self.decided(event, decision)),
        }
    }

    /// Turns a decision about an event into a step.
    fn decided(&mut self, event: Event, decision: Decision) -> FeedOutput {
        let cursor = event.cursor;
        match decision {
            Decision::Skip => FeedOutput::Obs(Observation::Progress(cursor)),
            Decision::Report {
                kind,
                labels,
                readiness,
            } => change(event, kind, labels, readiness, None),
            Decision::Explained {
                kind,
                labels,
                readiness,
                reason,
            } => change(event, kind, labels, readiness, Some(reason)),
            Decision::Inspect(path) => FeedOutput::Inspect { event, path },
            Decision::Undecodable(reason) => {
                tracing::warn!(
                    provider = self.provider,
                    reason,
                    id = event.name(),
                    action = event.action(),
                    "skipping an undecodable event"
                );
                FeedOutput::Obs(Observation::Progress(cursor))
            }
        }
    }
}

/// How long before a subscription's `Date` (in ns) an event may still be one
/// it streams: the header is truncated to the second, and the engine may
/// have begun streaming a moment before it wrote the header.
pub(crate) const SUBSCRIBED_MARGIN_NANOS: i64 = 2_000_000_000;

/// The pause before reading an object again, after `inspections` reads:
/// 20 ms, doubling, at most 500 ms.
pub fn reinspect_after(inspections: u8) -> std::time::Duration {
    let doubled = 20u64 << u32::from(inspections.saturating_sub(1)).min(5);
    std::time::Duration::from_millis(doubled.min(500))
}

/// [`FeedOutput`] by the name `session` in `session.rs` still spells it
/// (that function's body is rewritten on another branch: this goes once
/// both are merged).
pub(crate) type Step = FeedOutput;

/// The change a reported event makes.
fn change(
    event: Event,
    kind: EventKind,
    labels: Arc<Labels>,
    readiness: Option<Readiness>,
    reason: Option<Arc<Reason>>,
) -> FeedOutput {
    let at = event.at();
    FeedOutput::Obs(Observation::Change(
        Change::new(event.name, kind, at)
            .uid(Some(event.uid))
            .labels(Some(labels))
            .cursor(event.cursor)
            .readiness(readiness)
            .reason(reason),
    ))
}

#[cfg(test)]
mod tests;
