//! One session: the prefix listed at a revision (first dial, or a
//! compaction), or a resumed watch whose replay is told before `Resumed`;
//! then the watch, its events mapped to changes (`mapping.rs`), what it told
//! kept for the probe (`seen.rs`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use lookout_core::{InstanceId, Observation, Session};
use tracing::Instrument as _;

use crate::client::connection::Client;
use crate::client::watch::{Line, WatchStream};
use crate::client::wire::{Event, EventType, WatchCreate, WatchResponse, b64};
use crate::error::EtcdError;
use crate::mapping::{Decoded, Entry, Known, apply, decode, publisher, snapshot};
use crate::publishers::{self, Board, PublisherState, PublisherStatus};
use crate::seen::Seen;
use crate::settings::Settings;

/// Keys per range page. etcd counts the rest of the range for each page
/// (its answer's `count`), so a list costs pages × keys: over 100 000 keys
/// pages of 1 000 took 2.5–4 s of etcd's time on the test cluster, pages of
/// 10 000 1.4 s (issue #48; BENCHMARKS.md §16). A page is then some 7 MiB
/// of JSON, held while it is decoded.
const PAGE: i64 = 10_000;
/// How many times a list restarts when its revision is compacted under it.
const LIST_ATTEMPTS: u32 = 3;

/// The watched range at one revision.
#[derive(Default)]
struct Listing {
    revision: i64,
    instances: BTreeMap<InstanceId, Entry>,
    /// The status keys of the wanted sources: each one's writer, when told.
    statuses: BTreeMap<Arc<str>, Option<String>>,
    /// Every key of the range (those skipped too).
    keys: i64,
}

/// Lists the watched range at one revision.
async fn list(client: &Client, settings: &Settings) -> Result<Listing, EtcdError> {
    let (key, end) = settings.range();
    let mut attempt = 0;
    'again: loop {
        attempt += 1;
        let mut listing = Listing::default();
        let mut from = key.clone();
        loop {
            let page = match client.range(&from, &end, listing.revision, PAGE).await {
                Ok(p) => p,
                Err(e) if e.is_compacted() && attempt < LIST_ATTEMPTS => continue 'again,
                Err(e) if e.is_compacted() => {
                    return Err(EtcdError::ListCompacted {
                        revision: listing.revision,
                        times: attempt,
                    });
                }
                Err(e) => return Err(e),
            };
            if listing.revision == 0 {
                listing.revision = page.header.revision;
            }
            listing.keys += i64::try_from(page.kvs.len()).unwrap_or(i64::MAX);
            for kv in &page.kvs {
                match decode(settings, EventType::Put, kv, None) {
                    Decoded::Present { id, entry, .. } => {
                        listing.instances.insert(id, entry);
                    }
                    Decoded::Publisher {
                        source,
                        state: PublisherState::Connected,
                        writer,
                    } => {
                        listing.statuses.insert(source, writer);
                    }
                    _ => {}
                }
            }
            match page.kvs.last() {
                Some(last) if page.more => {
                    from.clone_from(&last.key);
                    from.push(0);
                }
                _ => return Ok(listing),
            }
        }
    }
}

/// Opens the watch of the range from `start` and reads until etcd says
/// `created` (bounded); the first response after it, if it came with it.
/// Opens the watch from `start`; once created, the member it is on is the
/// one the probe asks ([`DialState::watching`]).
async fn open_watch(
    client: &Client,
    settings: &Settings,
    state: &DialState,
    start: i64,
) -> Result<WatchStream, EtcdError> {
    let (key, end) = settings.range();
    let create = WatchCreate {
        key: b64(&key),
        range_end: b64(&end),
        start_revision: start.to_string(),
        prev_kv: true,
        progress_notify: true,
    };
    let mut watch = client.watch(&create).await?;
    let timeout = settings.create_timeout;
    let endpoint = watch.endpoint().to_owned();
    let created = async {
        loop {
            match watch.next().await? {
                Some(Line::Response(WatchResponse { created: true, .. })) => return Ok(()),
                Some(Line::Response(r)) if r.canceled => {
                    return Err(canceled(&endpoint, &r));
                }
                Some(Line::Response(_)) => {}
                Some(Line::Undecodable(e)) => {
                    tracing::warn!(error = %e, "undecodable watch line before `created`");
                }
                None => {
                    return Err(EtcdError::WatchEnded {
                        endpoint: endpoint.clone(),
                    });
                }
            }
        }
    };
    tokio::time::timeout(timeout, created)
        .await
        .map_err(|_| EtcdError::NotCreated {
            endpoint: watch.endpoint().to_owned(),
            timeout,
        })??;
    state.watching.store(watch.member(), Ordering::Relaxed);
    Ok(watch)
}

fn canceled(endpoint: &str, r: &WatchResponse) -> EtcdError {
    if r.compact_revision > 0 {
        EtcdError::Status {
            endpoint: endpoint.to_owned(),
            path: "/v3/watch".to_owned(),
            status: 400,
            code: 11,
            message: format!("compacted (oldest revision kept: {})", r.compact_revision),
        }
    } else {
        EtcdError::Canceled {
            endpoint: endpoint.to_owned(),
            reason: r.cancel_reason.clone(),
        }
    }
}

/// A list, its snapshot told into `out` (and the list's revision as the
/// cursor), `known` replaced, each source's publisher status after it into
/// `publishers` (every source listed or known before: connected when its
/// status key is there); then the watch from the revision after it.
async fn relist(
    client: &Client,
    settings: &Settings,
    state: &DialState,
    out: &mut Vec<Observation<i64>>,
    publishers: &mut Vec<(usize, PublisherStatus)>,
) -> Result<WatchStream, EtcdError> {
    for _ in 0..LIST_ATTEMPTS {
        let listing = list(client, settings).await?;
        let revision = listing.revision;
        tracing::debug!(
            revision,
            instances = listing.instances.len(),
            publishers = listing.statuses.len(),
            "listed"
        );
        match open_watch(client, settings, state, revision + 1).await {
            Ok(watch) => {
                let Listing {
                    instances: map,
                    mut statuses,
                    keys,
                    ..
                } = listing;
                snapshot(&map, out);
                out.push(Observation::Progress(Some(revision)));
                let mut sources: BTreeSet<Arc<str>> =
                    publishers::lock(&state.board).sources().cloned().collect();
                sources.extend(statuses.keys().cloned());
                sources.extend(map.keys().filter_map(|id| {
                    let (source, _) = id.as_str().split_once('/')?;
                    Some(Arc::from(source))
                }));
                for source in sources {
                    let (state, writer) = match statuses.remove(&source) {
                        Some(writer) => (PublisherState::Connected, writer),
                        None => (PublisherState::Disconnected, None),
                    };
                    let status = publisher(&map, source, state, writer, revision);
                    publishers.push((out.len(), status));
                }
                *state.known.lock().unwrap_or_else(PoisonError::into_inner) = map;
                state.seen.reset(revision);
                state.seen.listed(revision, keys);
                return Ok(watch);
            }
            // Compacted between the list and the watch: list again.
            Err(e) if e.is_compacted() => {}
            Err(e) => return Err(e),
        }
    }
    Err(EtcdError::ListCompacted {
        revision: 0,
        times: LIST_ATTEMPTS,
    })
}

/// The state of one dial, kept across its sessions and shared with its
/// probe and the publishers' handles: the instances known, what the watch
/// told, the publishers' statuses, the member the watch is on.
#[derive(Debug, Default)]
pub(crate) struct DialState {
    pub(crate) known: Known,
    pub(crate) seen: Seen,
    pub(crate) board: Arc<Mutex<Board>>,
    /// The member the watch is on (an index of the client's endpoints):
    /// the one whose `/health` the probe asks.
    pub(crate) watching: AtomicUsize,
}

/// Opens a session: resumes the watch after `resume` (its replay first,
/// then `Resumed`), or lists.
pub(crate) async fn open(
    client: Client,
    settings: Arc<Settings>,
    state: Arc<DialState>,
    resume: Option<i64>,
) -> Result<Session<i64>, EtcdError> {
    let mut head = Vec::new();
    let mut publishers = Vec::new();
    // The replay is complete once the watch has told what the store showed
    // when it was opened: its newest put under the prefix, and as many
    // keys (its deletions too).
    let mut replay_until = None;
    let watch = match resume {
        Some(revision) => {
            let (key, end) = settings.range();
            let newest = client.newest_modification(&key, &end).await?;
            match open_watch(&client, &settings, &state, revision + 1).await {
                Ok(watch) => {
                    tracing::debug!(revision, ?newest, "watch resumed");
                    state.seen.reset(revision);
                    if state.seen.has(newest) {
                        head.push(Observation::Resumed);
                    } else {
                        replay_until = Some(newest);
                    }
                    watch
                }
                Err(e) if e.is_compacted() => {
                    tracing::info!(revision, "resume point compacted: listing");
                    relist(&client, &settings, &state, &mut head, &mut publishers).await?
                }
                Err(e) => return Err(e),
            }
        }
        None => relist(&client, &settings, &state, &mut head, &mut publishers).await?,
    };
    let session = async_stream::try_stream! {
        let mut watch = watch;
        // One span per watch connection.
        let mut span = conn_span(watch.endpoint());
        let mut out = head;
        // The events of the last response, counted once told: a session
        // dropped before that leaves them to the replay of the next.
        let mut to_count: Option<(Vec<Event>, i64)> = None;
        loop {
            // What the last response told, each publisher status at its
            // place among the observations.
            let mut told = publishers.drain(..).peekable();
            for (i, o) in out.drain(..).enumerate() {
                while let Some((_, p)) = told.next_if(|(at, _)| *at <= i) {
                    publishers::lock(&state.board).set(p);
                }
                yield o;
            }
            for (_, p) in told {
                publishers::lock(&state.board).set(p);
            }
            if let Some((events, last)) = to_count.take() {
                state.seen.count(&events, last);
                if replay_until.is_some_and(|until| state.seen.has(until)) {
                    replay_until = None;
                    yield Observation::Resumed;
                }
            }
            let line = watch.next().instrument(span.clone()).await?;
            let response = match line {
                None => Err(EtcdError::WatchEnded { endpoint: watch.endpoint().to_owned() })?,
                Some(Line::Undecodable(e)) => {
                    tracing::warn!(parent: &span, error = %e, "undecodable watch line: skipped");
                    out.push(Observation::Progress(None));
                    continue;
                }
                Some(Line::Response(r)) => r,
            };
            if response.canceled {
                let e = canceled(watch.endpoint(), &response);
                if !e.is_compacted() {
                    Err(e)?;
                }
                tracing::info!(parent: &span, compact_revision = response.compact_revision, "watch compacted: listing");
                watch = relist(&client, &settings, &state, &mut out, &mut publishers).instrument(span.clone()).await?;
                span = conn_span(watch.endpoint());
                replay_until = None;
                continue;
            }
            if response.created {
                continue;
            }
            if response.events.is_empty() {
                // Every event up to this revision has been sent: told to
                // the core (a sign of life) only when it moved, else the
                // core's silence runs on (a stale member's notifications
                // must not keep its probe away).
                let revision = response.header.revision;
                if state.seen.progress(revision) {
                    out.push(Observation::Progress(Some(revision)));
                }
                if replay_until.take().is_some() {
                    out.push(Observation::Resumed);
                }
                continue;
            }
            let last = response.events.last().map_or(0, |e| e.kv.mod_revision);
            let told_snapshot = {
                let mut map = state.known.lock().unwrap_or_else(PoisonError::into_inner);
                apply(&settings, &mut map, &response.events, &mut out, &mut publishers)
            };
            state.seen.advance(last);
            if told_snapshot {
                // The session started with that snapshot.
                replay_until = None;
            }
            to_count = Some((response.events, last));
        }
    };
    Ok(Box::pin(session))
}

fn conn_span(endpoint: &str) -> tracing::Span {
    tracing::debug_span!("conn", provider = "etcd", endpoint, request = "watch")
}
