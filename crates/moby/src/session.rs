//! One session of a [`CompatDial`](crate::CompatDial): opening it (the
//! API version from `/_ping`, the history, the `/events` subscription, the
//! list), then the stream it is: the history replayed, the snapshot, and the
//! events as they are decoded, with the inspections and readiness polls
//! they ask for.

use std::collections::VecDeque;
use std::time::{Duration, SystemTime};

use lookout_core::{BoxError, Listed, Observation, Session};
use tracing::Instrument;

use crate::api::{self, ApiVersion};
use crate::error::CompatError;
use crate::history_fetch;
use crate::http;
use crate::inspect;
use crate::protocol::cursor::Cursor;
use crate::protocol::feed;
use crate::protocol::history;
use crate::protocol::list_parts::{Cut, ListParts};
use crate::protocol::objects::{Objects, ReadinessFrom, Scope};
use crate::protocol::requests::{MAX_LIST, since};
use crate::readiness;
use crate::reasons;

/// What a dial opens its session with, taken from its
/// [`CompatDial`](crate::CompatDial) on each dial.
pub(crate) struct Opening<O: Objects> {
    pub(crate) objects: &'static O,
    /// The engine's host, unversioned.
    pub(crate) api: api::Api,
    /// `DOCKER_API_VERSION` (or the caller's): every path's version,
    /// instead of the one `/_ping` tells.
    pub(crate) pinned: Option<ApiVersion>,
    pub(crate) scope: Scope,
    /// `/events` with the session's filters, without `since`.
    pub(crate) events_path: String,
    /// The objects' list, with the caller's label filter.
    pub(crate) list_path: String,
    /// How often readiness is polled, for an engine whose events do not
    /// tell it (when readiness is watched).
    pub(crate) poll: Option<Duration>,
}

/// Opens the session: the API version, what happened since `resume` (the
/// history), the subscription, the list (corrected by the history), then
/// [`session`] streams it.
pub(crate) async fn open<O: Objects>(
    opening: Opening<O>,
    resume: Option<Cursor>,
) -> Result<Session<Cursor>, CompatError> {
    let Opening {
        objects,
        api,
        pinned,
        scope,
        events_path,
        list_path,
        poll,
    } = opening;
    let provider = objects.provider();
    let api = versioned(provider, api, pinned).await?;
    let host = &api.host;
    // What happened while the feed could not be seen: its exact
    // transitions when the engine's history proves it continues the
    // feed, else the snapshot's diff alone tells it.
    let past = history_fetch::read(
        objects,
        &scope,
        &api,
        &events_path,
        resume,
        SystemTime::now(),
    )
    .instrument(tracing::debug_span!("conn", provider, %host, request = "history"))
    .await?;
    // Subscribe from the history's end (without one, from now):
    // nothing of the past comes after the snapshot.
    let from = past.as_ref().and_then(|p| p.end);
    tracing::debug!(provider, %host, ?resume, ?from, "subscribing to /events");
    let subscription = from.map_or_else(|| events_path.clone(), |c| since(&events_path, c));
    let events = http::get(&api, &subscription)
        .instrument(tracing::debug_span!("conn", provider, %host, request = "events"))
        .await?
        .ok("/events")
        .await?;
    // The engine's clock when it began streaming: what comes from
    // before is a replay of its past (see `Feed::subscribed_at`).
    let subscribed = events.date();
    let mut listed = list(objects, &api, &list_path, scope.readiness)
        .instrument(tracing::debug_span!("conn", provider, %host, request = "list"))
        .await?;
    tracing::debug!(provider, objects = listed.len(), "listed");
    match (scope.readiness, objects.readiness_from()) {
        (true, ReadinessFrom::Health { lists_none }) => {
            readiness::health(objects, lists_none, &api, &scope, &mut listed)
                .instrument(tracing::debug_span!("conn", provider, %host, request = "health"))
                .await?;
        }
        (true, ReadinessFrom::Status) => {
            readiness::untold(&api, &scope, &mut listed)
                .instrument(tracing::debug_span!("conn", provider, %host, request = "health"))
                .await?;
        }
        _ => {}
    }
    if matches!(
        objects.readiness_from(),
        ReadinessFrom::Health { .. } | ReadinessFrom::Status
    ) {
        reasons::inspect_listed(&api, &mut listed)
            .instrument(tracing::debug_span!("conn", provider, %host, request = "reasons"))
            .await?;
    }
    if scope.readiness && objects.readiness_from() == ReadinessFrom::Polled {
        // Why a running object fails, as the polls tell it (Swarm's
        // tasks), so that a snapshot does not forget it. A list that
        // names an object gone meanwhile says nothing: the polls tell.
        readiness::failures(objects, &api, &mut listed)
            .instrument(tracing::debug_span!("conn", provider, %host, request = "failures"))
            .await?;
    }
    if let Some(past) = &past {
        history::correct(&mut listed, &past.last);
    }
    let mut feed = feed::Feed::new(objects, &scope, from, &listed);
    if from.is_none()
        && let Some(date) = subscribed
    {
        feed = feed.subscribed_at(Cursor::from_system_time(date));
    }
    // The snapshot tells everything before its list answered.
    let told = feed.snapshot_at(Cursor::from_system_time(SystemTime::now()));
    let replayed = past.and_then(|p| p.replay).unwrap_or_default();
    let poll = poll.map(|every| readiness::Poll::new(objects, list_path, every));
    Ok(session(
        api,
        provider,
        replayed,
        (listed, told),
        (feed, poll),
        events,
    ))
}

/// The objects' list (`list_path`), read a part at a time
/// ([`ListParts`]): neither the whole body nor the decoded form of more
/// than one part is ever held, only what each entry tells.
async fn list<O: Objects>(
    objects: &O,
    api: &api::Api,
    list_path: &str,
    readiness: bool,
) -> Result<Vec<Listed>, CompatError> {
    let path = http::strip_query(list_path);
    let mut body = http::get(api, list_path).await?.ok(path).await?;
    let mut cut = ListParts::new(MAX_LIST);
    let mut listed = Vec::new();
    let mut take = |part: &[u8]| {
        objects
            .parse_list(part, readiness)
            .map(|part| listed.extend(part))
    };
    let failed = |cut: Cut<String>| match cut {
        Cut::TooLarge(limit) => CompatError::TooLarge {
            path: path.to_owned(),
            limit,
        },
        Cut::Invalid(reason) | Cut::Taken(reason) => CompatError::List {
            path: path.to_owned(),
            reason,
        },
    };
    while let Some(chunk) = body.chunk().await {
        let chunk = chunk.map_err(|source| CompatError::Http {
            path: path.to_owned(),
            source: source.into(),
        })?;
        cut.push(&chunk, &mut take).map_err(failed)?;
    }
    cut.finish().map_err(failed)?;
    listed.shrink_to_fit();
    Ok(listed)
}

/// The dial's API: its paths under `pinned` (`DOCKER_API_VERSION`), else
/// under the `Api-Version` of a `/_ping` on a connection of its own (and
/// unversioned when the engine sends none).
async fn versioned(
    provider: &'static str,
    api: api::Api,
    pinned: Option<ApiVersion>,
) -> Result<api::Api, CompatError> {
    if let Some(version) = pinned {
        tracing::debug!(provider, host = %api.host, %version, "API version from DOCKER_API_VERSION");
        return Ok(api.versioned(Some(version)));
    }
    let span = tracing::debug_span!("conn", provider, host = %api.host, request = "ping");
    let version = async {
        let ping = http::get(&api, "/_ping").await?.ok("/_ping").await?;
        let version = ping.api_version();
        ping.body("/_ping", 4096).await?;
        Ok::<_, CompatError>(version)
    }
    .instrument(span)
    .await?;
    match version {
        Some(version) => {
            tracing::debug!(provider, host = %api.host, %version, "API version from /_ping");
        }
        None => {
            tracing::warn!(provider, host = %api.host, "/_ping told no Api-Version: unversioned paths");
        }
    }
    Ok(api.versioned(version))
}

/// The session: the history replayed (what was missed, exactly), the
/// snapshot, then the events as they are decoded (each inspection they ask
/// for on a connection of its own, in order), and with a readiness poll the
/// polled readiness between them.
fn session<O: Objects>(
    api: api::Api,
    provider: &'static str,
    replayed: Vec<Observation<Cursor>>,
    (listed, told): (Vec<Listed>, Cursor),
    (mut feed, mut poll): (feed::Feed<O::Known>, Option<readiness::Poll<O>>),
    mut events: http::Exchange,
) -> Session<Cursor> {
    let host = api.host.clone();
    Box::pin(async_stream::stream! {
        for obs in replayed {
            yield Ok(obs);
        }
        yield Ok(Observation::ResyncBegin);
        for l in listed {
            yield Ok(Observation::Listed(l));
        }
        yield Ok(Observation::ResyncDone);
        yield Ok(Observation::Progress(Some(told)));
        let mut out = VecDeque::new();
        'session: loop {
            let next = match &mut poll {
                Some(poll) => poll.next_or(&mut events).await,
                None => readiness::Next::Chunk(events.chunk().await),
            };
            let chunk = match next {
                readiness::Next::Chunk(chunk) => chunk,
                readiness::Next::Poll => {
                    let span = tracing::debug_span!("conn", provider, %host, request = "poll");
                    let Some(poll) = &mut poll else { continue };
                    match poll.run(&api).instrument(span).await {
                        Ok(polled) => {
                            for obs in polled {
                                yield Ok(obs);
                            }
                        }
                        Err(e) => {
                            yield Err(BoxError::from(e));
                            break 'session;
                        }
                    }
                    continue;
                }
            };
            let ended = match chunk {
                Some(Ok(chunk)) => {
                    feed.push(&chunk, &mut out);
                    false
                }
                Some(Err(source)) => {
                    yield Err(BoxError::from(CompatError::Http { path: "/events".to_owned(), source: source.into() }));
                    break;
                }
                None => {
                    feed.finish(&mut out);
                    true
                }
            };
            while let Some(step) = out.pop_front() {
                match step {
                    feed::Step::Obs(obs) => {
                        if let (Some(poll), Observation::Change(_)) = (&mut poll, &obs) {
                            // A scale, a removal: its readiness is asked soon.
                            poll.soon();
                        }
                        yield Ok(obs);
                    }
                    feed::Step::Inspect { event, path } => {
                        let span = tracing::debug_span!("conn", provider, %host, request = "inspect");
                        match inspect::decide(&mut feed, &api, event, path).instrument(span).await {
                            Ok(obs) => {
                                if let (Some(poll), Observation::Change(_)) = (&mut poll, &obs) {
                                    // A creation, an update that did not
                                    // scale: its readiness is asked soon too.
                                    poll.soon();
                                }
                                yield Ok(obs);
                            }
                            Err(e) => {
                                yield Err(BoxError::from(e));
                                break 'session;
                            }
                        }
                    }
                }
            }
            feed::Step::trim(&mut out);
            if ended {
                // The end of the stream tells the core the feed closed.
                break;
            }
        }
    })
}
