//! One session: the prefix listed at a revision (first dial, or a
//! compaction), or a resumed watch whose replay is told before `Resumed`;
//! then the watch, its events mapped to changes.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use lookout_core::{
    Change, EventKind, InstanceId, Labels, Listed, Observation, Readiness, Session,
};
use tokio::sync::Notify;
use tracing::Instrument as _;

use crate::client::Client;
use crate::kv::Newest;
use crate::watch::{Line, WatchStream};
use crate::error::EtcdError;
use crate::model::{self, Record, State};
use crate::publishers::{self, Board, PublisherState, PublisherStatus};
use crate::wire::{EventType, KeyValue, WatchCreate, WatchResponse, b64, prefix_range_end};

/// Keys per range page.
const PAGE: i64 = 1000;
/// How many times a list restarts when its revision is compacted under it.
const LIST_ATTEMPTS: u32 = 3;

/// What a dial needs to know, shared by its sessions.
#[derive(Debug)]
pub(crate) struct Settings {
    pub(crate) prefix: String,
    /// Empty: every source.
    pub(crate) sources: Vec<String>,
    pub(crate) readiness: bool,
    /// How long the probe waits for the watch to catch up with a put.
    pub(crate) catch_up: Duration,
    /// How long a watch may take to say `created`.
    pub(crate) create_timeout: Duration,
}

impl Settings {
    /// The key range watched: the whole prefix, every source's instances
    /// and publisher statuses (those of sources not wanted are skipped).
    pub(crate) fn range(&self) -> (Vec<u8>, Vec<u8>) {
        let key = format!("{}/", self.prefix).into_bytes();
        let end = prefix_range_end(&key);
        (key, end)
    }

    fn wanted(&self, source: &str) -> bool {
        self.sources.is_empty() || self.sources.iter().any(|s| s == source)
    }
}

/// One instance as etcd holds it now.
#[derive(Clone, Debug)]
pub(crate) struct Entry {
    running: bool,
    uid: Option<Arc<str>>,
    labels: Arc<Labels>,
    readiness: Option<Readiness>,
}

/// The instances under the prefix at the newest revision read: what a
/// snapshot tells. Kept across sessions (a publisher's resync, told as a
/// snapshot, needs every instance).
pub(crate) type Known = Mutex<BTreeMap<InstanceId, Entry>>;

/// The newest revision the watch has told everything up to (its events,
/// its progress notifications, where it started), and how many keys the
/// range held then: what the probe compares with the store
/// ([`Seen::caught_up`]).
#[derive(Debug, Default)]
pub(crate) struct Seen {
    revision: AtomicI64,
    counted: Mutex<Counted>,
    advanced: Notify,
}

/// How many keys the watched range holds at a revision, as the list and
/// the watch's events (creations, deletions) told it: a response's events
/// are counted once all its observations are yielded. Kept across
/// sessions: a resumed watch's replay of events already counted (its
/// revision at most `revision`) is not counted again.
#[derive(Clone, Copy, Debug, Default)]
struct Counted {
    revision: i64,
    keys: i64,
}

impl Seen {
    pub(crate) fn revision(&self) -> i64 {
        self.revision.load(Ordering::Relaxed)
    }

    fn counted(&self) -> Counted {
        *self.counted.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn advance(&self, revision: i64) {
        if self.revision.fetch_max(revision, Ordering::Relaxed) < revision {
            self.advanced.notify_waiters();
        }
    }

    /// A progress notification: every event up to `revision` has been
    /// sent. Whether it moved past what the watch had told: only then is
    /// it news (a sign of life, a cursor). A member cut off from its
    /// cluster goes on notifying at its stale revision; a notification
    /// that moves nothing is not taken for life, so that the probe runs.
    fn progress(&self, revision: i64) -> bool {
        let moved = revision > self.revision();
        self.count(&[], revision);
        self.advance(revision);
        moved
    }

    fn reset(&self, revision: i64) {
        self.revision.store(revision, Ordering::Relaxed);
        self.advanced.notify_waiters();
    }

    /// The range held `keys` keys at `revision` (a list).
    fn listed(&self, revision: i64, keys: i64) {
        *self.counted.lock().unwrap_or_else(PoisonError::into_inner) = Counted { revision, keys };
    }

    /// Counts the keys the events create and delete (those past what was
    /// counted), then everything up to `revision` (the response's) is told.
    fn count(&self, events: &[crate::wire::Event], revision: i64) {
        let mut c = self.counted.lock().unwrap_or_else(PoisonError::into_inner);
        let after = c.revision;
        for ev in events.iter().filter(|e| e.kv.mod_revision > after) {
            match ev.kind {
                EventType::Put if ev.kv.version == 1 => c.keys += 1,
                EventType::Put => {}
                EventType::Delete => c.keys -= 1,
            }
        }
        c.revision = c.revision.max(revision);
        drop(c);
        self.advanced.notify_waiters();
    }

    /// Waits until the watch has told what `store` shows: the newest put,
    /// and as many keys (or everything up to the revision it was read at).
    /// A deletion the watch has not told leaves one key too many: a watch
    /// that died while only deletions happen is noticed too.
    pub(crate) async fn caught_up(&self, store: Newest) {
        loop {
            // Created before the check: a notification in between is kept.
            let advanced = self.advanced.notified();
            if self.has(store) {
                return;
            }
            advanced.await;
        }
    }

    /// Whether the watch has told what `store` shows (see [`Seen::caught_up`]).
    pub(crate) fn has(&self, store: Newest) -> bool {
        let c = self.counted();
        self.revision() >= store.put && (c.keys == store.keys || c.revision >= store.revision)
    }

    /// What the watch told, for an error: its revision, and its count of keys.
    pub(crate) fn told(&self) -> (i64, i64) {
        (self.revision(), self.counted().keys)
    }
}

/// What one key's value says.
enum Decoded {
    /// Not a key of a wanted source, or unreadable (logged).
    Skip,
    /// The instance exists.
    Present(InstanceId, Entry, Option<SystemTime>, bool),
    /// It is gone (a tombstone, or the key deleted).
    Gone(InstanceId, Option<Arc<str>>, Option<SystemTime>, bool),
    /// A publisher's status key: there (connected, with its writer when
    /// told), or deleted.
    Publisher(Arc<str>, PublisherState, Option<String>),
}

fn decode(settings: &Settings, kind: EventType, kv: &KeyValue, prev: Option<&KeyValue>) -> Decoded {
    if let Some(source) = model::parse_status_key(&settings.prefix, &kv.key) {
        if !settings.wanted(source) {
            return Decoded::Skip;
        }
        if kind == EventType::Delete {
            return Decoded::Publisher(Arc::from(source), PublisherState::Disconnected, None);
        }
        let writer = serde_json::from_slice::<serde_json::Value>(&kv.value)
            .ok()
            .and_then(|v| v.get("writer")?.as_str().map(str::to_owned));
        return Decoded::Publisher(Arc::from(source), PublisherState::Connected, writer);
    }
    let Some((source, instance)) = model::parse_instance_key(&settings.prefix, &kv.key) else {
        tracing::debug!(key = %String::from_utf8_lossy(&kv.key), "neither an instance nor a status key: skipped");
        return Decoded::Skip;
    };
    if !settings.wanted(source) {
        return Decoded::Skip;
    }
    let id = InstanceId::new(format!("{source}/{instance}"));
    if kind == EventType::Delete {
        let uid = prev
            .and_then(|p| Record::from_json(&p.value).ok())
            .and_then(|r| r.uid)
            .map(Arc::from);
        return Decoded::Gone(id, uid, None, false);
    }
    let record = match Record::from_json(&kv.value) {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(key = %String::from_utf8_lossy(&kv.key), revision = kv.mod_revision, error = %e, "undecodable instance record: skipped");
            return Decoded::Skip;
        }
    };
    let at = record.at();
    let resync = record.is_resync();
    let uid = record.uid.map(Arc::from);
    match record.state {
        State::Removed => Decoded::Gone(id, uid, at, resync),
        state => {
            let entry = Entry {
                running: state == State::Running,
                uid,
                labels: Arc::new(record.labels),
                readiness: if settings.readiness {
                    record.ready.map(|ready| Readiness::Told { ready })
                } else {
                    None
                },
            };
            Decoded::Present(id, entry, at, resync)
        }
    }
}

fn snapshot(map: &BTreeMap<InstanceId, Entry>, out: &mut Vec<Observation<i64>>) {
    out.reserve(map.len() + 2);
    out.push(Observation::ResyncBegin);
    out.extend(map.iter().map(|(id, e)| {
        Observation::Listed(Listed {
            id: id.clone(),
            running: e.running,
            uid: e.uid.clone(),
            labels: Labels::clone(&e.labels),
            readiness: e.readiness,
        })
    }));
    out.push(Observation::ResyncDone);
}

/// Maps one watch response's events to observations, updating `map`.
/// A live transition is a change (the last of its revision carries the
/// revision as cursor); a run of transitions the publisher found by resync
/// is told as a snapshot of every instance, so that the core reports them
/// with origin `resync`. A publisher's status goes into `publishers`, with
/// its place in `out`. Returns whether a snapshot was told.
fn apply(
    settings: &Settings,
    map: &mut BTreeMap<InstanceId, Entry>,
    events: &[crate::wire::Event],
    out: &mut Vec<Observation<i64>>,
    publishers: &mut Vec<(usize, PublisherStatus)>,
) -> bool {
    let mut pending_resync = false;
    let mut told_snapshot = false;
    let mut last_change_rev = None;
    for (i, ev) in events.iter().enumerate() {
        let rev = ev.kv.mod_revision;
        let decoded = decode(settings, ev.kind, &ev.kv, ev.prev_kv.as_ref());
        let live = match &decoded {
            Decoded::Skip => false,
            Decoded::Present(.., resync) | Decoded::Gone(.., resync) => !*resync,
            // In order with the instances: after the resync before it.
            Decoded::Publisher(..) => true,
        };
        // A live transition after resync ones: those are told first.
        if live && std::mem::take(&mut pending_resync) {
            snapshot(map, out);
            told_snapshot = true;
        }
        match decoded {
            Decoded::Skip => {}
            Decoded::Publisher(source, state, writer) => {
                let status = publisher(map, source, state, writer, rev);
                publishers.push((out.len(), status));
            }
            Decoded::Present(id, entry, _, true) => {
                map.insert(id, entry);
                pending_resync = true;
            }
            Decoded::Gone(id, _, _, true) => {
                map.remove(&id);
                pending_resync = true;
            }
            Decoded::Present(id, entry, at, false) => {
                out.push(Observation::Change(Change {
                    id: id.clone(),
                    kind: if entry.running {
                        EventKind::Started
                    } else {
                        EventKind::Stopped
                    },
                    uid: entry.uid.clone(),
                    labels: Some(Arc::clone(&entry.labels)),
                    at: at.unwrap_or_else(SystemTime::now),
                    cursor: None,
                    readiness: entry.readiness,
                }));
                last_change_rev = Some(rev);
                map.insert(id, entry);
            }
            Decoded::Gone(id, uid, at, false) => {
                map.remove(&id);
                out.push(Observation::Change(Change {
                    id,
                    kind: EventKind::Removed,
                    uid,
                    labels: None,
                    at: at.unwrap_or_else(SystemTime::now),
                    cursor: None,
                    readiness: None,
                }));
                last_change_rev = Some(rev);
            }
        }
        let boundary = events
            .get(i + 1)
            .is_none_or(|next| next.kv.mod_revision != rev);
        if boundary && !pending_resync {
            match out.last_mut() {
                Some(Observation::Change(c)) if last_change_rev == Some(rev) => {
                    c.cursor = Some(rev);
                }
                _ => out.push(Observation::Progress(Some(rev))),
            }
        }
    }
    if pending_resync {
        snapshot(map, out);
        told_snapshot = true;
        let last = events.last().map(|e| e.kv.mod_revision);
        out.push(Observation::Progress(last));
    }
    told_snapshot
}

/// A source's publisher status, with how many of its instances `map` holds.
fn publisher(
    map: &BTreeMap<InstanceId, Entry>,
    source: Arc<str>,
    state: PublisherState,
    writer: Option<String>,
    revision: i64,
) -> PublisherStatus {
    let (from, to) = (format!("{source}/"), format!("{source}0"));
    let instances = map
        .range::<str, _>((Bound::Included(from.as_str()), Bound::Excluded(to.as_str())))
        .count();
    PublisherStatus {
        source,
        state,
        writer,
        instances,
        revision,
    }
}

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
                    Decoded::Present(id, entry, _, _) => {
                        listing.instances.insert(id, entry);
                    }
                    Decoded::Publisher(source, PublisherState::Connected, writer) => {
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
/// one the probe asks ([`Shared::watching`]).
async fn open_watch(
    client: &Client,
    settings: &Settings,
    shared: &Shared,
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
    shared.watching.store(watch.member(), Ordering::Relaxed);
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
    shared: &Shared,
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
        match open_watch(client, settings, shared, revision + 1).await {
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
                    publishers::lock(&shared.board).sources().cloned().collect();
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
                *shared.known.lock().unwrap_or_else(PoisonError::into_inner) = map;
                shared.seen.reset(revision);
                shared.seen.listed(revision, keys);
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

/// What the sessions of one dial share: the instances known, what the
/// watch told, the publishers' statuses.
#[derive(Debug, Default)]
pub(crate) struct Shared {
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
    shared: Arc<Shared>,
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
            match open_watch(&client, &settings, &shared, revision + 1).await {
                Ok(watch) => {
                    tracing::debug!(revision, ?newest, "watch resumed");
                    shared.seen.reset(revision);
                    if shared.seen.has(newest) {
                        head.push(Observation::Resumed);
                    } else {
                        replay_until = Some(newest);
                    }
                    watch
                }
                Err(e) if e.is_compacted() => {
                    tracing::info!(revision, "resume point compacted: listing");
                    relist(&client, &settings, &shared, &mut head, &mut publishers).await?
                }
                Err(e) => return Err(e),
            }
        }
        None => relist(&client, &settings, &shared, &mut head, &mut publishers).await?,
    };
    let session = async_stream::try_stream! {
        let mut watch = watch;
        // One span per watch connection.
        let mut span = conn_span(watch.endpoint());
        let mut out = head;
        // The events of the last response, counted once told: a session
        // dropped before that leaves them to the replay of the next.
        let mut to_count: Option<(Vec<crate::wire::Event>, i64)> = None;
        loop {
            // What the last response told, each publisher status at its
            // place among the observations.
            let mut told = publishers.drain(..).peekable();
            for (i, o) in out.drain(..).enumerate() {
                while let Some((_, p)) = told.next_if(|(at, _)| *at <= i) {
                    publishers::lock(&shared.board).set(p);
                }
                yield o;
            }
            for (_, p) in told {
                publishers::lock(&shared.board).set(p);
            }
            if let Some((events, last)) = to_count.take() {
                shared.seen.count(&events, last);
                if replay_until.is_some_and(|until| shared.seen.has(until)) {
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
                watch = relist(&client, &settings, &shared, &mut out, &mut publishers).instrument(span.clone()).await?;
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
                if shared.seen.progress(revision) {
                    out.push(Observation::Progress(Some(revision)));
                }
                if replay_until.take().is_some() {
                    out.push(Observation::Resumed);
                }
                continue;
            }
            let last = response.events.last().map_or(0, |e| e.kv.mod_revision);
            let told_snapshot = {
                let mut map = shared.known.lock().unwrap_or_else(PoisonError::into_inner);
                apply(&settings, &mut map, &response.events, &mut out, &mut publishers)
            };
            shared.seen.advance(last);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Event;

    fn settings(sources: &[&str], readiness: bool) -> Settings {
        Settings {
            prefix: "p".into(),
            sources: sources.iter().map(|s| (*s).to_owned()).collect(),
            readiness,
            catch_up: Duration::from_secs(1),
            create_timeout: Duration::from_secs(1),
        }
    }

    fn put(key: &str, rev: i64, state: &str, origin: &str) -> Event {
        let value = format!(
            r#"{{"provider":"docker","state":"{state}","ready":true,"uid":"u-{key}","labels":{{"k":"v"}},"event":{{"kind":"x","origin":"{origin}","at":"2026-12-03T10:00:00Z"}},"writer":"t"}}"#
        );
        Event {
            kind: EventType::Put,
            kv: KeyValue {
                key: key.as_bytes().to_vec(),
                value: value.into_bytes(),
                mod_revision: rev,
                ..KeyValue::default()
            },
            prev_kv: None,
        }
    }

    fn kinds(out: &[Observation<i64>]) -> Vec<String> {
        out.iter()
            .map(|o| match o {
                Observation::Change(c) => format!("{} {:?} {:?}", c.id, c.kind, c.cursor),
                Observation::Listed(l) => format!("listed {} {}", l.id, l.running),
                Observation::Progress(p) => format!("progress {p:?}"),
                other => format!("{other:?}"),
            })
            .collect()
    }

    #[test]
    fn live_events_are_changes_with_the_cursor_on_the_last_of_a_revision() {
        let s = settings(&[], true);
        let mut map = BTreeMap::new();
        let mut out = Vec::new();
        let mut deleted = put("p/i/h/b", 6, "removed", "live");
        deleted.kind = EventType::Delete;
        let events = [
            put("p/i/h/a", 5, "running", "live"),
            put("p/i/g/x", 5, "stopped", "live"),
            put("p/s/h", 6, "running", "live"),
            deleted,
            put("p/i/h/a", 7, "removed", "live"),
        ];
        assert!(!apply(&s, &mut map, &events, &mut out, &mut Vec::new()));
        assert_eq!(
            kinds(&out),
            [
                "h/a Started None",
                "g/x Stopped Some(5)",
                "h/b Removed Some(6)",
                "h/a Removed Some(7)",
            ]
        );
        let Observation::Change(first) = &out[0] else {
            panic!("a change")
        };
        assert_eq!(first.readiness, Some(Readiness::Told { ready: true }));
        assert_eq!(first.uid.as_deref(), Some("u-p/i/h/a"));
        assert_eq!(
            map.keys().map(InstanceId::as_str).collect::<Vec<_>>(),
            ["g/x"]
        );
    }

    #[test]
    fn resync_events_are_one_snapshot_and_sources_filter() {
        let s = settings(&["h"], false);
        let mut map = BTreeMap::new();
        let mut out = Vec::new();
        let events = [
            put("p/i/h/a", 5, "running", "live"),
            put("p/i/h/b", 6, "running", "resync"),
            put("p/i/h/c", 7, "stopped", "resync"),
            put("p/i/other/z", 8, "running", "live"),
            put("p/i/h/a", 9, "stopped", "live"),
            put("p/i/h/b", 10, "removed", "resync"),
        ];
        assert!(apply(&s, &mut map, &events, &mut out, &mut Vec::new()));
        assert_eq!(
            kinds(&out),
            [
                "h/a Started Some(5)",
                "ResyncBegin",
                "listed h/a true",
                "listed h/b true",
                "listed h/c false",
                "ResyncDone",
                "h/a Stopped Some(9)",
                "ResyncBegin",
                "listed h/a false",
                "listed h/c false",
                "ResyncDone",
                "progress Some(10)",
            ]
        );
        let Observation::Change(c) = &out[0] else {
            panic!("a change")
        };
        assert_eq!(c.readiness, None, "readiness not watched");
    }

    #[test]
    fn publisher_statuses_take_their_place_after_the_resync_before_them() {
        let s = settings(&["h"], false);
        let mut map = BTreeMap::new();
        let mut out = Vec::new();
        let mut publishers = Vec::new();
        let status = |rev, writer: Option<&str>| Event {
            kind: if writer.is_some() {
                EventType::Put
            } else {
                EventType::Delete
            },
            kv: KeyValue {
                key: b"p/s/h".to_vec(),
                value: writer
                    .map(|w| format!(r#"{{"connected":true,"writer":"{w}"}}"#).into_bytes())
                    .unwrap_or_default(),
                mod_revision: rev,
                ..KeyValue::default()
            },
            prev_kv: None,
        };
        let mut other = status(9, Some("x"));
        other.kv.key = b"p/s/other".to_vec();
        let events = [
            put("p/i/h/a", 5, "running", "live"),
            status(6, None),
            put("p/i/h/b", 7, "running", "resync"),
            status(8, Some("w 42")),
            other,
        ];
        assert!(apply(&s, &mut map, &events, &mut out, &mut publishers));
        assert_eq!(
            kinds(&out),
            [
                "h/a Started Some(5)",
                "progress Some(6)",
                "ResyncBegin",
                "listed h/a true",
                "listed h/b true",
                "ResyncDone",
                "progress Some(8)",
                "progress Some(9)",
            ]
        );
        let told: Vec<_> = publishers
            .iter()
            .map(|(at, p)| {
                format!(
                    "{at} {} {} {} {:?} {}",
                    p.source, p.state, p.instances, p.writer, p.revision
                )
            })
            .collect();
        assert_eq!(
            told,
            [
                "1 h disconnected 1 None 6",
                "6 h connected 2 Some(\"w 42\") 8"
            ],
            "the other source is not wanted"
        );
    }

    #[test]
    fn the_count_of_keys_skips_what_it_counted_and_the_probe_needs_it() {
        let seen = Seen::default();
        seen.listed(10, 3);
        seen.reset(10);
        let mut created = put("p/i/h/a", 11, "running", "live");
        created.kv.version = 1;
        let mut deleted = put("p/i/h/b", 12, "removed", "live");
        deleted.kind = EventType::Delete;
        let events = [created, deleted.clone()];
        seen.count(&events, 12);
        seen.advance(12);
        assert_eq!(seen.told(), (12, 3));
        // A replay of what was counted counts nothing.
        seen.count(&events, 12);
        assert_eq!(seen.told(), (12, 3));
        let store = |put, keys, revision| Newest {
            put,
            keys,
            revision,
        };
        assert!(seen.has(store(11, 3, 20)), "as many keys");
        assert!(!seen.has(store(13, 3, 20)), "a newer put");
        assert!(!seen.has(store(11, 2, 20)), "a deletion not told");
        let mut deleted_later = deleted;
        deleted_later.kv.mod_revision = 14;
        seen.count(&[deleted_later], 14);
        assert!(seen.has(store(11, 2, 20)), "told");
        seen.count(&[], 20);
        assert!(seen.has(store(11, 7, 20)), "a progress notification at it");
    }

    #[test]
    fn a_progress_notification_is_news_only_when_it_moves() {
        let seen = Seen::default();
        seen.listed(10, 3);
        seen.reset(10);
        assert!(!seen.progress(10), "at the list's revision: stale");
        assert!(!seen.progress(9), "behind it");
        assert_eq!(seen.told(), (10, 3));
        assert!(seen.progress(12), "past it");
        assert_eq!(seen.told(), (12, 3));
        assert!(!seen.progress(12), "again at it: stale");
        // An event told moves what was told: a notification at it is stale.
        seen.advance(15);
        assert!(!seen.progress(15));
        assert!(seen.progress(16));
    }

    #[test]
    fn an_undecodable_record_is_skipped_with_its_revision() {
        let s = settings(&[], false);
        let mut map = BTreeMap::new();
        let mut out = Vec::new();
        let mut bad = put("p/i/h/a", 5, "running", "live");
        bad.kv.value = b"{not json".to_vec();
        assert!(!apply(&s, &mut map, &[bad], &mut out, &mut Vec::new()));
        assert_eq!(kinds(&out), ["progress Some(5)"]);
        assert!(map.is_empty());
    }
}
