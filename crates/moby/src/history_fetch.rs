//! Fetching the engine's history, what a dial reads first: the events the
//! engine still has since the cursor (the first dial: of the last 2 s),
//! with a request that ends by itself, and the inspections that replaying
//! them asks for. What they mean (whether they continue the feed, what
//! they replay, how they correct a list) is the protocol's history rules
//! (`protocol/history.rs`), without I/O.

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use crate::api::Api;
use crate::error::CompatError;
use crate::http;
use crate::inspect::decide;
use crate::protocol::cursor::Cursor;
use crate::protocol::feed::FeedOutput;
use crate::protocol::history::{Past, decode, note, note_steps};
use crate::protocol::objects::{Objects, Scope};
use crate::protocol::requests;

/// The largest history read (16 MiB: some 30 000 events); past it, nothing
/// is replayed (the snapshot's diff reports the net effect).
const MAX_HISTORY: usize = 16 << 20;

/// How long the history may take to arrive; past it, the dial goes on
/// without (an engine whose clock is behind lookout's holds an `until` in
/// its future open until then).
const HISTORY_TIMEOUT: Duration = Duration::from_secs(5);

/// How far back the first dial reads: only to correct the list (nothing is
/// replayed on a first dial).
const FIRST_LOOK_BACK: Duration = Duration::from_secs(2);

/// Reads what the engine still has of its `/events` (`events_path`, with the
/// session's filters) since `resume` (the first dial: since
/// [`FIRST_LOOK_BACK`] ago). `Ok(None)`: the engine keeps no usable history
/// ([`History::Unreliable`](crate::History::Unreliable)), or it could not be read in full (too large,
/// refused, late): the dial goes on without. `Err`: the engine could not be
/// reached (the dial fails).
pub(crate) async fn read<O: Objects>(
    objects: &'static O,
    scope: &Scope,
    api: &Api,
    events_path: &str,
    resume: Option<Cursor>,
    now: SystemTime,
) -> Result<Option<Past>, CompatError> {
    let provider = objects.provider();
    let Some(bound) = objects.history().bound(now) else {
        return Ok(None);
    };
    let since = resume.unwrap_or_else(|| {
        Cursor::from_system_time(now.checked_sub(FIRST_LOOK_BACK).unwrap_or(now))
    });
    let path = format!("{}{bound}", requests::since(events_path, since));
    let request = async {
        http::get(api, &path)
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
            // clock is ahead of ours) or more than we read.
            tracing::debug!(provider, error = %e, "no history: the snapshot tells");
            return Ok(None);
        }
        Ok(Err(e)) => return Err(e),
        Err(_) => {
            tracing::debug!(provider, timeout = ?HISTORY_TIMEOUT, "the history did not end in time: the snapshot tells");
            return Ok(None);
        }
    };
    let mut decoded = decode(objects, scope, &body, resume);
    let mut last = HashMap::new();
    note_steps(&mut last, &decoded.seen);
    let replay = if decoded.continues {
        let mut observations = Vec::with_capacity(decoded.missed.len());
        for step in decoded.missed {
            match step {
                FeedOutput::Obs(obs) => observations.push(obs),
                FeedOutput::Inspect { event, path } => {
                    observations.push(decide(&mut decoded.feed, api, event, path).await?);
                }
            }
        }
        note(&mut last, observations.iter());
        tracing::debug!(
            provider,
            replayed = observations.len(),
            "the history continues the feed: replaying it before the snapshot"
        );
        Some(observations)
    } else {
        note_steps(&mut last, &decoded.missed);
        if resume.is_some() {
            tracing::debug!(
                provider,
                ?resume,
                bytes = body.len(),
                "the history does not reach back to the last event seen: the snapshot tells"
            );
        }
        None
    };
    // What was told stays told, whatever the history holds.
    let end = match (decoded.feed.newest(), resume) {
        (Some(end), Some(resume)) => Some(end.told_until(resume)),
        (end, _) => end,
    };
    Ok(Some(Past { replay, last, end }))
}
