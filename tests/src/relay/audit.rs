//! Auditing a watch against the engine's own account of what happened.
//!
//! A test records everything the watch yields with its local receive time
//! ([`Timed`]), every `/events` request the [`Relay`](super::Relay) relayed,
//! and, side by side, the engine's event log as `docker events` prints it
//! ([`EventLog`]); [`audit`] then checks the watch's output against that log
//! (the requirements of issue 11, numbered as there):
//!
//! 1. after a (re)connect, what happened while disconnected is reported
//!    either as exact transitions (`live`) or as net effect (`resync`),
//!    never both, and before any event that happened after the snapshot;
//! 2. no `live` event yielded after a reconnect's `Connected` is older than
//!    that reconnect's first `/events` request (minus [`STALE_MARGIN`]);
//! 3. an event of an earlier incarnation never turns into removed/created of
//!    the current one: per name, no more `Created` than `create` records,
//!    no more `Removed` than `destroy`/`remove` records;
//! 4. nothing is lost: every mapped record of a time the watch was connected
//!    (with [`CUT_MARGIN`] around the cuts) is a `live` event of that name,
//!    same kind, same time; the final state is the engine's; one instance
//!    never gets the same kind twice in a row;
//! 5. before the first cut, the watch printed exactly the engine's sequence.
//!
//! Also: a seeded random container workload ([`Workload`], [`SplitMix64`]).
#![allow(clippy::missing_panics_doc)]

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use lookout_core::{Dial, EventKind, InstanceEvent, Item, Origin, Status, Watch};
use tokio_stream::StreamExt;

use crate::engines;

/// Requirement 2's slack: a `live` event may be this much older than the
/// reconnect's first `/events` request (the request is timed when the relay
/// reads it, after the client sent it).
pub const STALE_MARGIN: Duration = Duration::from_millis(50);

/// Requirement 4's slack around a cut: an event this close to a cut (or to
/// the `Connected` after it) may have crossed it either way.
pub const CUT_MARGIN: Duration = Duration::from_millis(300);

// ------------------------------------------------------------------ time

/// Nanoseconds since the Unix epoch.
pub fn nanos(t: SystemTime) -> i128 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => i128::try_from(d.as_nanos()).unwrap_or(i128::MAX),
        Err(e) => -i128::try_from(e.duration().as_nanos()).unwrap_or(i128::MAX),
    }
}

fn dur(d: Duration) -> i128 {
    i128::try_from(d.as_nanos()).unwrap_or(i128::MAX)
}

/// `t` relative to `origin` (both in ns), as `+1234.567ms`.
pub fn rel(origin: i128, t: i128) -> String {
    let d = t - origin;
    let sign = if d < 0 { "-" } else { "+" };
    let d = d.abs();
    format!("{sign}{}.{:03}ms", d / 1_000_000, (d % 1_000_000) / 1_000)
}

/// An `/events` request's path and query with its `filters` value elided
/// (`/v1.41/events?filters=…&since=…&until=…`), for reports.
pub fn short_path(path: &str) -> String {
    let Some(start) = path.find("filters=").map(|i| i + "filters=".len()) else {
        return path.to_owned();
    };
    let end = path[start..].find('&').map_or(path.len(), |i| start + i);
    format!("{}…{}", &path[..start], &path[end..])
}

/// A `docker events --since` value for `t`.
fn since_arg(t: SystemTime) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    format!("{}.{:09}", d.as_secs(), d.subsec_nanos())
}

// ------------------------------------------------------------------ random

/// The one seeded generator of the tests (`lookout-testkit`'s).
pub use lookout_testkit::rng::SplitMix64;

/// The seed of a randomized test: `LOOKOUT_SEED` (to replay a run), else
/// one from the clock and the process id.
pub fn seed() -> u64 {
    std::env::var("LOOKOUT_SEED")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or_else(|| {
            let t = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default();
            t.as_secs() ^ u64::from(t.subsec_nanos()) ^ (u64::from(std::process::id()) << 32)
        })
}

// ------------------------------------------------------------------ engine log

/// What an engine action means to lookout (create, start, die, destroy;
/// Podman's `remove` and `died`).
pub fn mapped(action: &str) -> Option<EventKind> {
    match action {
        "create" => Some(EventKind::Created),
        "start" => Some(EventKind::Started),
        "die" | "died" => Some(EventKind::Stopped),
        "destroy" | "remove" => Some(EventKind::Removed),
        _ => None,
    }
}

/// One container event as `docker events --format '{{json .}}'` prints it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// The container's name (`Actor.Attributes.name`).
    pub name: String,
    /// The container's id (`Actor.ID`).
    pub id: String,
    /// `Action`.
    pub action: String,
    /// `timeNano`.
    pub nanos: i128,
    /// `Actor.Attributes.health_status`, which Podman's `health_status`
    /// events carry (Docker's say it in `Action`).
    pub health: Option<String>,
    /// `Actor.Attributes.signal` of a Docker `kill` (Podman's names none).
    pub signal: Option<String>,
}

impl Record {
    /// Parses one line; `None` if it is not a container event.
    pub fn parse(line: &str) -> Option<Self> {
        let v: serde_json::Value = serde_json::from_str(line).ok()?;
        let actor = v.get("Actor")?;
        Some(Self {
            name: actor.get("Attributes")?.get("name")?.as_str()?.to_owned(),
            id: actor.get("ID")?.as_str()?.to_owned(),
            action: v.get("Action")?.as_str()?.to_owned(),
            nanos: i128::from(v.get("timeNano")?.as_i64()?),
            health: actor
                .get("Attributes")
                .and_then(|a| a.get("health_status"))
                .and_then(serde_json::Value::as_str)
                .map(str::to_owned),
            signal: actor
                .get("Attributes")
                .and_then(|a| a.get("signal"))
                .and_then(serde_json::Value::as_str)
                .map(str::to_owned),
        })
    }

    /// What it means to lookout, if anything, alone: a stop request
    /// (`kill`, Podman's `stop`) means `stopping` only to a running
    /// container not asked already, which [`told_kinds`] follows.
    pub fn kind(&self) -> Option<EventKind> {
        mapped(&self.action)
    }

    /// Whether it asks a container to stop: a `kill` with a signal that
    /// stops (or none named, Podman's), or Podman's `stop` (Docker's comes
    /// after the `die`, to a container no longer running).
    fn asks_to_stop(&self) -> bool {
        matches!(self.action.as_str(), "kill" | "stop")
            && self.signal.as_deref().is_none_or(|s| {
                lookout_core::Signal::from_name(s).is_none_or(lookout_core::Signal::stops)
            })
    }
}

/// What lookout tells of each record, in order: [`Record::kind`], and for a
/// stop request `stopping` when its container runs and was not asked
/// already since its start.
pub fn told_kinds(records: &[Record]) -> Vec<Option<EventKind>> {
    // Per container name: (running, asked to stop).
    let mut state: BTreeMap<&str, (bool, bool)> = BTreeMap::new();
    records
        .iter()
        .map(|r| {
            let (running, stopping) = state.entry(r.name.as_str()).or_default();
            if r.asks_to_stop() {
                let told = *running && !*stopping;
                *stopping |= told;
                return told.then_some(EventKind::Stopping);
            }
            let kind = r.kind();
            match kind {
                Some(EventKind::Started) => (*running, *stopping) = (true, false),
                Some(_) => (*running, *stopping) = (false, false),
                None => {}
            }
            kind
        })
        .collect()
}

/// `docker events --filter type=container --filter label=… --format
/// '{{json .}}' --since …` as child processes (the docker CLI, pointed at
/// the engine's socket: Podman's too), their lines collected by threads.
/// Dropping it kills the children.
///
/// A child may end by itself: with its daemon, or when Podman rotates its
/// event log file (`events_logfile_max_size`: every event stream then
/// ends, the docker CLI's quietly). [`EventLog::keep_alive`] starts another
/// from the last record seen.
#[derive(Debug)]
pub struct EventLog {
    host: String,
    label: String,
    since: SystemTime,
    children: Mutex<Vec<Child>>,
    lines: Arc<Mutex<Vec<String>>>,
    stderr: Arc<Mutex<Vec<String>>>,
    stopped: AtomicBool,
    /// When `keep_alive` last started a child, and how many it started.
    respawned: Mutex<(Option<Instant>, usize)>,
}

fn collect(pipe: impl Read + Send + 'static, into: Arc<Mutex<Vec<String>>>) {
    std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines() {
            let Ok(line) = line else { break };
            if let Ok(mut v) = into.lock() {
                v.push(line);
            }
        }
    });
}

impl EventLog {
    /// Starts `docker events` on `host` for the containers labelled `label`
    /// (`KEY=VALUE`), from `since` (so that nothing is lost while it
    /// subscribes).
    pub fn start(host: &str, label: &str, since: SystemTime) -> Result<Self, String> {
        let log = Self {
            host: host.to_owned(),
            label: label.to_owned(),
            since,
            children: Mutex::new(Vec::new()),
            lines: Arc::new(Mutex::new(Vec::new())),
            stderr: Arc::new(Mutex::new(Vec::new())),
            stopped: AtomicBool::new(false),
            respawned: Mutex::new((None, 0)),
        };
        log.spawn(since)?;
        Ok(log)
    }

    /// Starts another `docker events` from `since` (the last one died with
    /// its daemon); records seen by both count once.
    pub fn restart(&self, since: SystemTime) -> Result<(), String> {
        self.spawn(since)
    }

    fn spawn(&self, since: SystemTime) -> Result<(), String> {
        let mut cmd = Command::new(engines::docker_cli());
        cmd.env("DOCKER_HOST", &self.host)
            .env_remove("DOCKER_CONTEXT")
            .args(["events", "--filter", "type=container", "--filter"])
            .arg(format!("label={}", self.label))
            .args(["--format", "{{json .}}", "--since"])
            .arg(since_arg(since))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("cannot run docker events on {}: {e}", self.host))?;
        if let Some(out) = child.stdout.take() {
            collect(out, Arc::clone(&self.lines));
        }
        if let Some(err) = child.stderr.take() {
            collect(err, Arc::clone(&self.stderr));
        }
        self.children
            .lock()
            .expect("event log: children lock")
            .push(child);
        Ok(())
    }

    /// When every child has ended (and [`EventLog::stop`] was not called),
    /// starts another from a second before the last record (duplicates
    /// count once), at most every 500 ms. Whether it did.
    pub fn keep_alive(&self) -> bool {
        if self.stopped.load(Ordering::SeqCst) {
            return false;
        }
        {
            let mut children = self.children.lock().expect("event log: children lock");
            if !children
                .iter_mut()
                .all(|c| matches!(c.try_wait(), Ok(Some(_))))
            {
                return false;
            }
        }
        {
            let mut respawned = self.respawned.lock().expect("event log: respawn lock");
            if respawned
                .0
                .is_some_and(|t| t.elapsed() < Duration::from_millis(500))
            {
                return false;
            }
            *respawned = (Some(Instant::now()), respawned.1 + 1);
        }
        let since = self
            .records()
            .last()
            .and_then(|r| u64::try_from(r.nanos).ok())
            .map_or(self.since, |n| {
                UNIX_EPOCH + Duration::from_nanos(n) - Duration::from_secs(1)
            });
        self.spawn(since).is_ok()
    }

    /// How many children [`EventLog::keep_alive`] started.
    pub fn respawns(&self) -> usize {
        self.respawned.lock().expect("event log: respawn lock").1
    }

    /// Kills the children (what they printed stays).
    pub fn stop(&self) {
        self.stopped.store(true, Ordering::SeqCst);
        let mut children = self.children.lock().expect("event log: children lock");
        for c in children.iter_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
        children.clear();
    }

    /// Every record so far, each once, in time order.
    pub fn records(&self) -> Vec<Record> {
        let lines = self.lines.lock().expect("event log: lines lock").clone();
        let mut seen = BTreeSet::new();
        let mut records: Vec<Record> = lines
            .iter()
            .filter_map(|l| Record::parse(l))
            .filter(|r| seen.insert((r.id.clone(), r.action.clone(), r.nanos)))
            .collect();
        records.sort_by_key(|r| r.nanos);
        records
    }

    /// What the children printed on stderr.
    pub fn stderr(&self) -> String {
        self.stderr
            .lock()
            .expect("event log: stderr lock")
            .join("\n")
    }
}

impl Drop for EventLog {
    fn drop(&mut self) {
        if let Ok(mut children) = self.children.lock() {
            for c in children.iter_mut() {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }
}

// ------------------------------------------------------------------ watch

/// One item the watch yielded, with the local time the test received it.
#[derive(Debug, Clone)]
pub struct Seen {
    /// When the test got it.
    pub at: SystemTime,
    /// What it was.
    pub item: Item,
}

impl Seen {
    /// The event, if it is one.
    pub fn event(&self) -> Option<&InstanceEvent> {
        match &self.item {
            Item::Event(e) => Some(e),
            Item::Status(_) => None,
        }
    }

    fn is_connected(&self) -> bool {
        matches!(self.item, Item::Status(Status::Connected { .. }))
    }

    fn is_disconnected(&self) -> bool {
        matches!(self.item, Item::Status(Status::Disconnected { .. }))
    }
}

/// A watch polled by the test, everything it yielded timed.
pub struct Timed<D: Dial> {
    watch: Watch<D>,
    /// Every item so far.
    pub seen: Vec<Seen>,
}

impl<D: Dial> std::fmt::Debug for Timed<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Timed")
            .field("seen", &self.seen.len())
            .finish_non_exhaustive()
    }
}

impl<D: Dial> Timed<D> {
    /// Records what `watch` yields.
    pub fn new(watch: Watch<D>) -> Self {
        Self {
            watch,
            seen: Vec::new(),
        }
    }

    fn push(&mut self, item: Option<Item>) {
        let item = item.expect("the watch stream never ends");
        self.seen.push(Seen {
            at: SystemTime::now(),
            item,
        });
    }

    /// Polls the watch for `d`, recording what it yields.
    pub async fn poll_for(&mut self, d: Duration) {
        let deadline = tokio::time::Instant::now() + d;
        while let Ok(item) = tokio::time::timeout_at(deadline, self.watch.next()).await {
            self.push(item);
        }
    }

    /// Polls the watch until `done` holds of everything seen, at most
    /// `timeout`; whether it held.
    pub async fn until(&mut self, timeout: Duration, done: impl Fn(&[Seen]) -> bool) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        while !done(&self.seen) {
            match tokio::time::timeout_at(deadline, self.watch.next()).await {
                Ok(item) => self.push(item),
                Err(_) => return false,
            }
        }
        true
    }
}

/// Whether `seen` holds an event of `id` of kind `kind`.
pub fn has_event(seen: &[Seen], id: &str, kind: EventKind) -> bool {
    seen.iter()
        .filter_map(Seen::event)
        .any(|e| e.id.as_str() == id && e.kind == kind)
}

/// How many `Connected` statuses `seen` holds.
pub fn connects(seen: &[Seen]) -> usize {
    seen.iter().filter(|s| s.is_connected()).count()
}

/// One line of an item, its times relative to `origin`.
pub fn line(origin: i128, i: usize, s: &Seen) -> String {
    let got = rel(origin, nanos(s.at));
    match &s.item {
        Item::Event(e) => format!(
            "#{i} {got}: {} {} {} at {}",
            e.id,
            e.kind,
            e.origin,
            rel(origin, nanos(e.at))
        ),
        Item::Status(Status::Connected { instances }) => {
            format!("#{i} {got}: connected ({instances})")
        }
        Item::Status(Status::Disconnected { error, attempt, .. }) => {
            format!("#{i} {got}: disconnected #{attempt}: {error}")
        }
        Item::Status(Status::Lagged { missed }) => format!("#{i} {got}: lagged ({missed})"),
        Item::Status(other) => format!("#{i} {got}: {other:?}"),
    }
}

/// The state of an instance that exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Created or stopped.
    Stopped,
    /// Running.
    Running,
}

/// What the events in `seen` leave of each instance (absent: removed or
/// never seen).
pub fn final_states(seen: &[Seen]) -> BTreeMap<String, State> {
    let mut states = BTreeMap::new();
    for e in seen.iter().filter_map(Seen::event) {
        let id = e.id.as_str().to_owned();
        match e.kind {
            EventKind::Created | EventKind::Stopped => {
                states.insert(id, State::Stopped);
            }
            // A readiness change is of a running instance.
            EventKind::Started | EventKind::Ready | EventKind::Unready => {
                states.insert(id, State::Running);
            }
            EventKind::Removed => {
                states.remove(&id);
            }
            _ => {}
        }
    }
    states
}

/// Two consecutive events of one instance of the same kind (the stream
/// promises never to yield them).
pub fn repeats(seen: &[Seen]) -> Vec<String> {
    let mut last: BTreeMap<&str, (usize, EventKind)> = BTreeMap::new();
    let mut found = Vec::new();
    for (i, s) in seen.iter().enumerate() {
        if let Some(e) = s.event() {
            if let Some((j, kind)) = last.get(e.id.as_str())
                && *kind == e.kind
            {
                found.push(format!(
                    "{} got {} twice in a row (#{j}, #{i})",
                    e.id, e.kind
                ));
            }
            last.insert(e.id.as_str(), (i, e.kind));
        }
    }
    found
}

/// One reconnect: from the first `Disconnected` after a `Connected` to the
/// next `Connected`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Episode {
    /// The index (in `seen`) of its first `Disconnected`.
    pub disconnected: usize,
    /// The index of the `Connected` that ended it, if any yet.
    pub connected: Option<usize>,
    /// When the relay read its first `/events` request (the first after
    /// the `Disconnected` was received: the watch redials only after
    /// yielding it).
    pub first_request: Option<SystemTime>,
}

/// The reconnects in `seen`, with the relay's `/events` requests.
pub fn episodes(seen: &[Seen], requests: &[(SystemTime, String)]) -> Vec<Episode> {
    let mut episodes = Vec::new();
    let mut connected_once = false;
    let mut open: Option<Episode> = None;
    for (i, s) in seen.iter().enumerate() {
        if s.is_disconnected() && connected_once && open.is_none() {
            open = Some(Episode {
                disconnected: i,
                connected: None,
                first_request: requests.iter().find(|r| r.0 >= s.at).map(|r| r.0),
            });
        } else if s.is_connected() {
            if let Some(mut e) = open.take() {
                e.connected = Some(i);
                episodes.push(e);
            }
            connected_once = true;
        }
    }
    episodes.extend(open);
    episodes
}

/// Requirement 2: every `live` event yielded after a reconnect's
/// `Connected` is at most `margin` older than that reconnect's first
/// `/events` request.
pub fn stale_live(seen: &[Seen], episodes: &[Episode], margin: Duration) -> Vec<String> {
    let origin = seen.first().map_or(0, |s| nanos(s.at));
    let mut found = Vec::new();
    let mut floor: Option<(usize, SystemTime)> = None;
    for (i, s) in seen.iter().enumerate() {
        if let Some(ep) = episodes.iter().find(|e| e.connected == Some(i)) {
            floor = ep.first_request.map(|t| (i, t));
            if ep.first_request.is_none() {
                found.push(format!(
                    "the reconnect that ended at #{i} made no /events request the relay saw"
                ));
            }
        }
        if let (Some(e), Some((c, t))) = (s.event(), floor)
            && e.origin == Origin::Live
            && nanos(e.at) < nanos(t) - dur(margin)
        {
            found.push(format!(
                "{} (live) yielded after the Connected #{c} is {:.1?} older than that \
                 reconnect's first /events request ({})",
                line(origin, i, s),
                t.duration_since(e.at).unwrap_or_default(),
                rel(origin, nanos(t)),
            ));
        }
    }
    found
}

// ------------------------------------------------------------------ audit

/// What a compat-engine run left to audit.
#[derive(Debug)]
pub struct Inputs<'a> {
    /// Everything the watch yielded.
    pub seen: &'a [Seen],
    /// The engine's records, in time order.
    pub records: &'a [Record],
    /// The relay's `/events` requests.
    pub requests: &'a [(SystemTime, String)],
    /// When each cut (or daemon kill) began.
    pub cuts: &'a [SystemTime],
    /// The engine's state at the end (`ps`).
    pub engine: &'a BTreeMap<String, State>,
}

fn events_of(
    seen: &[Seen],
    range: std::ops::Range<usize>,
) -> impl Iterator<Item = (usize, &InstanceEvent)> {
    seen[range.clone()]
        .iter()
        .zip(range)
        .filter_map(|(s, i)| s.event().map(|e| (i, e)))
}

/// The violations of requirements 1–5 (each prefixed with its number);
/// empty when all hold.
#[allow(clippy::too_many_lines)]
pub fn audit(inp: &Inputs<'_>) -> Vec<String> {
    let seen = inp.seen;
    let told = told_kinds(inp.records);
    let records: Vec<(&Record, Option<EventKind>)> = inp.records.iter().zip(told).collect();
    let origin = seen.first().map_or(0, |s| nanos(s.at));
    let mut v = Vec::new();
    let episodes = episodes(seen, inp.requests);
    let Some(first) = seen.iter().position(Seen::is_connected) else {
        v.push("the watch never connected".to_owned());
        return v;
    };

    // 2. No stale live event.
    v.extend(
        stale_live(seen, &episodes, STALE_MARGIN)
            .into_iter()
            .map(|s| format!("req 2: {s}")),
    );

    // 1. Per reconnect and name: exact transitions or net effect, never
    // both, and before what happened after the snapshot.
    for (k, ep) in episodes.iter().enumerate() {
        let (Some(c), Some(t)) = (ep.connected, ep.first_request) else {
            continue;
        };
        let t_floor = nanos(t) - dur(STALE_MARGIN);
        let connected_at = nanos(seen[c].at);
        let end = episodes.get(k + 1).map_or(seen.len(), |e| e.disconnected);
        let mut resync: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
        let mut exact: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
        for (i, e) in events_of(seen, ep.disconnected..c) {
            let into = if e.origin == Origin::Live {
                &mut exact
            } else {
                &mut resync
            };
            into.entry(e.id.as_str()).or_default().push(i);
        }
        let mut after: BTreeMap<&str, usize> = BTreeMap::new();
        for (i, e) in events_of(seen, c + 1..end) {
            if e.origin != Origin::Live {
                continue;
            }
            let at = nanos(e.at);
            if at < t_floor {
                exact.entry(e.id.as_str()).or_default().push(i);
                if let Some(j) = after.get(e.id.as_str()) {
                    v.push(format!(
                        "req 1: reconnect {k}: {} describes the cut but comes after #{j}, \
                         which happened after the snapshot",
                        line(origin, i, &seen[i])
                    ));
                }
            } else if at > connected_at {
                after.entry(e.id.as_str()).or_insert(i);
            }
        }
        for (name, r) in &resync {
            let Some(x) = exact.get(name) else { continue };
            // The engine may have changed it during the reconnect itself
            // (after the history was read, before the list): the list then
            // reports that as the net effect, legitimately, and the new
            // subscription's copy is swallowed. Each resync event must then
            // be such a change: a record of the same kind from the first
            // request on. Up to CUT_MARGIN after the Connected: an engine may
            // stamp an event after the list already shows its effect (Podman
            // 4.3, measured: `stop -t 0` at +5754 ms, the list at ~+5790 ms
            // found the container exited, the `die` record says +5819 ms).
            let raced = r.iter().all(|&i| {
                seen[i].event().is_some_and(|e| {
                    records.iter().any(|&(rec, kind)| {
                        rec.name == *name
                            && kind == Some(e.kind)
                            && rec.nanos >= t_floor
                            && rec.nanos <= connected_at + dur(CUT_MARGIN)
                    })
                })
            });
            if !raced {
                v.push(format!(
                    "req 1: reconnect {k}: {name} got both exact transitions {x:?} and a net \
                     effect {r:?} for the same cut"
                ));
            }
        }
    }

    // 3. No incarnation mix-up: no more Created/Removed than the engine's
    // create/destroy records.
    let names: BTreeSet<&str> = seen
        .iter()
        .filter_map(Seen::event)
        .map(|e| e.id.as_str())
        .chain(records.iter().map(|(r, _)| r.name.as_str()))
        .collect();
    for name in &names {
        for kind in [EventKind::Created, EventKind::Removed] {
            let printed = seen
                .iter()
                .filter_map(Seen::event)
                .filter(|e| e.id.as_str() == *name && e.kind == kind)
                .count();
            let recorded = records
                .iter()
                .filter(|(r, k)| r.name == *name && *k == Some(kind))
                .count();
            if printed > recorded {
                v.push(format!(
                    "req 3: {name}: {printed} {kind} printed, the engine recorded {recorded}"
                ));
            }
        }
    }

    // 4. Nothing lost while connected.
    let connected: Vec<usize> = std::iter::once(first)
        .chain(episodes.iter().filter_map(|e| e.connected))
        .collect();
    for &c in &connected {
        let from = nanos(seen[c].at) + dur(CUT_MARGIN);
        let next_disconnect = episodes
            .iter()
            .find(|e| e.disconnected > c)
            .map(|e| nanos(seen[e.disconnected].at));
        let next_cut = inp
            .cuts
            .iter()
            .map(|t| nanos(*t))
            .filter(|t| *t > nanos(seen[c].at))
            .min();
        let to = [next_disconnect, next_cut]
            .into_iter()
            .flatten()
            .min()
            .map_or(i128::MAX, |t| t - dur(CUT_MARGIN));
        for &(r, kind) in records
            .iter()
            .filter(|(r, _)| r.nanos >= from && r.nanos <= to)
        {
            let Some(kind) = kind else { continue };
            let found = seen.iter().filter_map(Seen::event).any(|e| {
                e.id.as_str() == r.name
                    && e.kind == kind
                    && e.origin == Origin::Live
                    && nanos(e.at) == r.nanos
            });
            if !found {
                v.push(format!(
                    "req 4: {} {} ({kind}) at {} (while connected since #{c}) is not a live \
                     event of the same time",
                    r.name,
                    r.action,
                    rel(origin, r.nanos)
                ));
            }
        }
    }
    let printed = final_states(seen);
    if printed != *inp.engine {
        v.push(format!(
            "req 4: the final state printed {printed:?} is not the engine's {:?}",
            inp.engine
        ));
    }
    v.extend(repeats(seen).into_iter().map(|s| format!("req 4: {s}")));

    // 5. Before the first cut, exactly the engine's sequence.
    let end = episodes.first().map_or(seen.len(), |e| e.disconnected);
    let cutoff = [
        episodes.first().map(|e| nanos(seen[e.disconnected].at)),
        inp.cuts.iter().map(|t| nanos(*t)).min(),
    ]
    .into_iter()
    .flatten()
    .min()
    .map_or(i128::MAX, |t| t - dur(CUT_MARGIN));
    for name in &names {
        let printed: Vec<(EventKind, Origin, i128)> = events_of(seen, first..end)
            .filter(|(_, e)| e.id.as_str() == *name && nanos(e.at) < cutoff)
            .map(|(_, e)| (e.kind, e.origin, nanos(e.at)))
            .collect();
        let recorded: Vec<(EventKind, Origin, i128)> = records
            .iter()
            .filter(|(r, _)| r.name == *name && r.nanos < cutoff)
            .filter_map(|(r, k)| k.map(|k| (k, Origin::Live, r.nanos)))
            .collect();
        if printed != recorded {
            let show = |l: &[(EventKind, Origin, i128)]| {
                l.iter()
                    .map(|(k, o, t)| format!("{k} {o} {}", rel(origin, *t)))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            v.push(format!(
                "req 5: {name} before the first cut: printed [{}], the engine recorded [{}]",
                show(&printed),
                show(&recorded)
            ));
        }
    }
    v
}

/// A time-ordered account of one name: the watch's events (at their `at`),
/// the engine's records, the cuts, and each reconnect's first request and
/// `Connected`.
pub fn timeline(inp: &Inputs<'_>, name: &str) -> String {
    let seen = inp.seen;
    let origin = seen.first().map_or(0, |s| nanos(s.at));
    let mut entries: Vec<(i128, String)> = Vec::new();
    for (i, s) in seen.iter().enumerate() {
        if let Some(e) = s.event()
            && e.id.as_str() == name
        {
            entries.push((
                nanos(e.at),
                format!(
                    "lookout {} {} (#{i}, received {})",
                    e.kind,
                    e.origin,
                    rel(origin, nanos(s.at))
                ),
            ));
        }
        if s.is_connected() {
            entries.push((nanos(s.at), format!("-- connected (#{i})")));
        }
    }
    for r in inp.records.iter().filter(|r| r.name == name) {
        let id: String = r.id.chars().take(12).collect();
        entries.push((r.nanos, format!("engine  {} {id}", r.action)));
    }
    for t in inp.cuts {
        entries.push((nanos(*t), "-- cut".to_owned()));
    }
    for e in episodes(seen, inp.requests) {
        if let Some(t) = e.first_request {
            entries.push((
                nanos(t),
                "-- first /events request of a reconnect".to_owned(),
            ));
        }
    }
    entries.sort_by_key(|e| e.0);
    let mut out = format!("{name}:\n");
    for (t, what) in entries {
        let _ = writeln!(out, "  {} {what}", rel(origin, t));
    }
    out
}

// ------------------------------------------------------------------ workload

/// One operation of a [`Workload`].
#[derive(Debug, Clone)]
pub struct Op {
    /// When it started.
    pub at: SystemTime,
    /// How long the CLI took.
    pub took: Duration,
    /// The CLI's arguments.
    pub args: Vec<String>,
    /// Its error, if it failed.
    pub error: Option<String>,
}

/// A seeded random workload over a few container names that get reused:
/// `create`, `run -d`, `start`, `stop -t 0`, `kill`, `restart -t 0`, `rm -f`,
/// `run --rm`, each valid for the state the workload believes the container
/// is in (refreshed from `ps` after a failure).
#[derive(Debug)]
pub struct Workload {
    /// Runs the engine's CLI.
    pub cli: fn(&[&str]) -> Result<String, String>,
    /// The container names it works on.
    pub names: Vec<String>,
    /// The label every container gets, `KEY=VALUE` (also the `ps` filter).
    pub label: String,
    /// Further `--label` values.
    pub extra_labels: Vec<String>,
    /// The image.
    pub image: String,
    /// How many operations.
    pub ops: usize,
    /// The generator.
    pub rng: SplitMix64,
}

impl Workload {
    /// The state of every container labelled `label`, per `ps`.
    pub fn engine_state(
        cli: fn(&[&str]) -> Result<String, String>,
        label: &str,
    ) -> Result<BTreeMap<String, State>, String> {
        let filter = format!("label={label}");
        let all = cli(&["ps", "-a", "--filter", &filter, "--format", "{{.Names}}"])?;
        let running = cli(&["ps", "--filter", &filter, "--format", "{{.Names}}"])?;
        let running: BTreeSet<&str> = running.split_whitespace().collect();
        Ok(all
            .split_whitespace()
            .map(|n| {
                let state = if running.contains(n) {
                    State::Running
                } else {
                    State::Stopped
                };
                (n.to_owned(), state)
            })
            .collect())
    }

    fn container_args(&self, head: &[&str], name: &str, command: &[&str]) -> Vec<String> {
        let mut args: Vec<String> = head.iter().map(|s| (*s).to_owned()).collect();
        args.extend(["--name".to_owned(), name.to_owned()]);
        for l in std::iter::once(&self.label).chain(&self.extra_labels) {
            args.extend(["--label".to_owned(), l.clone()]);
        }
        args.extend(
            ["--network", "none", "--stop-timeout", "0", &self.image]
                .iter()
                .chain(command)
                .map(|s| (*s).to_owned()),
        );
        args
    }

    /// The next operation for `model`, and the state it leaves.
    fn choose(&mut self, model: &BTreeMap<String, State>) -> (Vec<String>, String, Option<State>) {
        let name = self.names[self.rng.below(self.names.len())].clone();
        let simple = |verb: &[&str]| -> Vec<String> {
            verb.iter()
                .map(|s| (*s).to_owned())
                .chain([name.clone()])
                .collect()
        };
        let (args, next) = match model.get(&name) {
            None => match self.rng.weighted(&[2, 2, 1]) {
                0 => (
                    self.container_args(&["create"], &name, &["sleep", "3600"]),
                    Some(State::Stopped),
                ),
                1 => (
                    self.container_args(&["run", "-d"], &name, &["sleep", "3600"]),
                    Some(State::Running),
                ),
                _ => (
                    self.container_args(&["run", "--rm"], &name, &["true"]),
                    None,
                ),
            },
            Some(State::Stopped) => match self.rng.weighted(&[3, 1, 1]) {
                0 => (simple(&["start"]), Some(State::Running)),
                1 => (simple(&["restart", "-t", "0"]), Some(State::Running)),
                _ => (simple(&["rm", "-f"]), None),
            },
            Some(State::Running) => match self.rng.weighted(&[2, 2, 1, 1]) {
                0 => (simple(&["stop", "-t", "0"]), Some(State::Stopped)),
                1 => (simple(&["kill"]), Some(State::Stopped)),
                2 => (simple(&["restart", "-t", "0"]), Some(State::Running)),
                _ => (simple(&["rm", "-f"]), None),
            },
        };
        (args, name, next)
    }

    /// Runs the operations; `before(i, model)` runs before operation `i`
    /// (it may change the engine: it then updates `model`). `progress`
    /// counts the operations done; `stop` ends the run early.
    pub fn run(
        mut self,
        progress: &AtomicUsize,
        stop: &AtomicBool,
        mut before: impl FnMut(usize, &mut BTreeMap<String, State>),
    ) -> Vec<Op> {
        let mut model: BTreeMap<String, State> = BTreeMap::new();
        let mut done = Vec::with_capacity(self.ops);
        for i in 0..self.ops {
            if stop.load(Ordering::SeqCst) {
                break;
            }
            before(i, &mut model);
            let (args, name, next) = self.choose(&model);
            let at = SystemTime::now();
            let t = Instant::now();
            let words: Vec<&str> = args.iter().map(String::as_str).collect();
            let result = (self.cli)(&words);
            let took = t.elapsed();
            match &result {
                Ok(_) => match next {
                    Some(s) => {
                        model.insert(name, s);
                    }
                    None => {
                        model.remove(&name);
                    }
                },
                Err(_) => {
                    if let Ok(now) = Self::engine_state(self.cli, &self.label) {
                        model = now;
                    }
                }
            }
            done.push(Op {
                at,
                took,
                args,
                error: result.err(),
            });
            progress.fetch_add(1, Ordering::SeqCst);
        }
        done
    }
}
