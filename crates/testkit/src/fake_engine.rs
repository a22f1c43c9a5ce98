// One file of some 700 lines (tests apart): the server and the live engine it serves share
// their types and lock; split, each half would reach into the other.

//! A loopback fake Docker engine on a unix socket in a temp dir: enough of the
//! API for `lookout_docker::watch` and the `docker` CLI (`/_ping`, `/version`,
//! `/containers/json`, `/events` as a chunked body of the chunks it is given).
//! Shared by the decoder tests, the firehose bench and the soak.
//!
//! [`start`] serves a fixed [`Script`]; [`start_live`] serves a [`Live`]
//! engine instead: a set of containers whose state the caller changes
//! ([`Live::mutate`], [`Live::cut`]), `/containers/json` listing their true
//! state and `/events` broadcasting each change to every subscriber (with
//! dockerd's `since` replay of its last 256 events and its treatment of a
//! subscriber that does not read: see [`SlowReader`]). The soak bench uses it.
use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{mpsc, oneshot};

use crate::rng::SplitMix64;

/// The API a fake engine speaks: its version (the `Api-Version` header of
/// every response), the `/events` body's content type and event shape, and
/// whether it refuses unversioned paths as the socket proxies do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Api {
    /// `Api-Version` of every response (`1.47`).
    pub version: &'static str,
    /// API 1.52's `/events`: `Content-Type: application/jsonl`, and event
    /// lines without the legacy `status`, `id` and `from` (a [`Live`]
    /// engine's).
    pub v1_52_events: bool,
    /// Answer `403` to every path but `/_ping` that is not under `/v1.NN/`
    /// (the allow-lists of the socket proxies written for Traefik).
    pub versioned_only: bool,
}

impl Api {
    /// Docker 27 (API 1.47), unversioned paths served: what [`start`] and
    /// [`start_live`] speak.
    pub const DOCKER_27: Self = Self {
        version: "1.47",
        v1_52_events: false,
        versioned_only: false,
    };
    /// Docker 29 (API 1.52): `application/jsonl` events without the legacy
    /// fields.
    pub const DOCKER_29: Self = Self {
        version: "1.52",
        v1_52_events: true,
        versioned_only: false,
    };

    /// The same API behind a proxy that allows only versioned paths (and `/_ping`).
    #[must_use]
    pub const fn behind_versioned_proxy(self) -> Self {
        Self {
            versioned_only: true,
            ..self
        }
    }

    fn events_type(self) -> &'static str {
        if self.v1_52_events {
            "application/jsonl"
        } else {
            "application/json"
        }
    }
}

/// What `/events` serves.
#[derive(Debug, Clone)]
pub struct Script {
    /// Written in order, each as one HTTP chunk.
    pub chunks: Arc<Vec<Vec<u8>>>,
    /// After the last chunk: end the body (`true`) or hold the connection open.
    pub close: bool,
}

#[derive(Debug)]
pub struct FakeEngine {
    /// `unix:///…/docker.sock`
    pub host: String,
    pub socket: PathBuf,
    dir: PathBuf,
    /// How many `/events` requests were served.
    pub events_requests: Arc<AtomicUsize>,
    /// How many client connections are open now (engine side).
    pub open_connections: Arc<AtomicUsize>,
    /// The last [`REQUESTS_KEPT`] requests' targets and how many came in all.
    requests: Requests,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeEngine {
    fn drop(&mut self) {
        self.task.abort();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

static SEQ: AtomicUsize = AtomicUsize::new(0);

/// What the engine serves.
#[derive(Debug, Clone)]
enum Backend {
    Script(Script),
    Live(Arc<Live>),
}

/// Start serving `script` on the current tokio runtime.
pub fn start(script: Script) -> FakeEngine {
    start_backend(Backend::Script(script), Api::DOCKER_27)
}

/// Start serving a [`Live`] engine on the current tokio runtime.
pub fn start_live(live: Arc<Live>) -> FakeEngine {
    start_backend(Backend::Live(live), Api::DOCKER_27)
}

/// Start serving a [`Live`] engine that speaks `api` (its event lines in
/// the shape `api` writes them, from now on).
pub fn start_live_with(live: Arc<Live>, api: Api) -> FakeEngine {
    live.v1_52_events.store(api.v1_52_events, Ordering::Relaxed);
    start_backend(Backend::Live(live), api)
}

/// How many of the latest request targets an engine keeps ([`FakeEngine::requests`]).
/// Bounded, so that an engine serving a soak's hundreds of thousands of requests
/// holds no more than this: it kept every one before (~0.6 KiB per dial/drop
/// cycle, which the soak's RSS gate charged to lookout).
pub const REQUESTS_KEPT: usize = 1024;

/// The latest requests' targets, oldest first, and the count of all of them.
#[derive(Debug, Default)]
struct RequestLog {
    latest: VecDeque<String>,
    total: u64,
}

impl RequestLog {
    fn record(&mut self, target: &str) {
        if self.latest.len() == REQUESTS_KEPT {
            self.latest.pop_front();
        }
        self.latest.push_back(target.to_owned());
        self.total += 1;
    }
}

/// The requests of one engine, shared by its connections.
type Requests = Arc<Mutex<RequestLog>>;

fn start_backend(backend: Backend, api: Api) -> FakeEngine {
    let dir = std::env::temp_dir().join(format!(
        "lookout-fake-engine-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    let socket = dir.join("docker.sock");
    let listener = UnixListener::bind(&socket).expect("bind the fake engine's socket");
    let events_requests = Arc::new(AtomicUsize::new(0));
    let open_connections = Arc::new(AtomicUsize::new(0));
    let requests: Requests = Arc::default();
    let counter = events_requests.clone();
    let open = open_connections.clone();
    let seen = requests.clone();
    let task = tokio::spawn(async move {
        loop {
            let Ok((conn, _)) = listener.accept().await else {
                return;
            };
            let backend = backend.clone();
            let counter = counter.clone();
            let open = open.clone();
            let seen = seen.clone();
            open.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let _ = serve(conn, &backend, &counter, api, &seen).await;
                open.fetch_sub(1, Ordering::SeqCst);
            });
        }
    });
    FakeEngine {
        host: format!("unix://{}", socket.display()),
        socket,
        dir,
        events_requests,
        open_connections,
        requests,
        task,
    }
}

impl FakeEngine {
    /// The targets of the latest requests (`/v1.52/events?filters=…`), oldest
    /// first: every one while fewer than [`REQUESTS_KEPT`] came, else the last
    /// [`REQUESTS_KEPT`].
    pub fn requests(&self) -> Vec<String> {
        self.log().latest.iter().cloned().collect()
    }

    /// How many requests the engine has read, of any path.
    pub fn requests_total(&self) -> u64 {
        self.log().total
    }

    fn log(&self) -> MutexGuard<'_, RequestLog> {
        self.requests
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

async fn serve(
    mut conn: UnixStream,
    backend: &Backend,
    counter: &AtomicUsize,
    api: Api,
    seen: &Mutex<RequestLog>,
) -> std::io::Result<()> {
    loop {
        // The request head (no request here has a body).
        let mut head = Vec::new();
        let mut byte = [0u8; 1024];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = conn.read(&mut byte).await?;
            if n == 0 {
                return Ok(());
            }
            head.extend_from_slice(&byte[..n]);
        }
        let line = String::from_utf8_lossy(&head);
        let head_only = line.starts_with("HEAD ");
        let target = line.split_whitespace().nth(1).unwrap_or("/").to_owned();
        seen.lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .record(&target);
        let (path, versioned) = unversioned(&target);
        if api.versioned_only && !versioned && path != "/_ping" {
            forbidden(&mut conn).await?;
            continue;
        }
        match path {
            "/_ping" => {
                let body: &[u8] = if head_only { b"" } else { b"OK" };
                fixed(&mut conn, api, "text/plain", body).await?;
            }
            "/version" => {
                fixed(
                    &mut conn,
                    api,
                    "application/json",
                    br#"{"Version":"27.0.0","ApiVersion":"1.47","MinAPIVersion":"1.24","Os":"linux","Arch":"amd64"}"#,
                )
                .await?;
            }
            "/containers/json" => match backend {
                Backend::Script(_) => fixed(&mut conn, api, "application/json", b"[]").await?,
                Backend::Live(feed) => {
                    let body = feed.containers_json();
                    fixed(&mut conn, api, "application/json", &body).await?;
                }
            },
            "/events" => {
                counter.fetch_add(1, Ordering::SeqCst);
                let script = match backend {
                    // A history request (`until` or `stream=false`): this
                    // engine keeps no history.
                    Backend::Script(_) if is_history(&target) => {
                        return past_events(conn, api, &[]).await;
                    }
                    Backend::Script(script) => script,
                    Backend::Live(feed) => {
                        let since = time_of(&target, "since");
                        return match time_of(&target, "until") {
                            Some(until) => {
                                past_events(conn, api, &feed.past(since.unwrap_or(0), until)).await
                            }
                            None => live_events(conn, api, feed, since).await,
                        };
                    }
                };
                conn.write_all(&events_head(api)).await?;
                conn.flush().await?;
                let mut out = Vec::with_capacity(64 * 1024);
                for chunk in script.chunks.iter() {
                    if chunk.is_empty() {
                        continue;
                    }
                    out.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
                    out.extend_from_slice(chunk);
                    out.extend_from_slice(b"\r\n");
                    if out.len() >= 64 * 1024 {
                        conn.write_all(&out).await?;
                        out.clear();
                    }
                }
                conn.write_all(&out).await?;
                conn.flush().await?;
                if script.close {
                    conn.write_all(b"0\r\n\r\n").await?;
                    conn.flush().await?;
                    let _ = conn.shutdown().await;
                    return Ok(());
                }
                // Hold the stream open until the client goes.
                let mut sink = [0u8; 256];
                while conn.read(&mut sink).await? > 0 {}
                return Ok(());
            }
            _ => {
                conn.write_all(
                    b"HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\n\
                      Content-Length: 24\r\n\r\n{\"message\":\"not found\"}\n",
                )
                .await?;
            }
        }
    }
}

/// A target's path without its query and version (`/v1.47/events?…` →
/// `/events`), and whether it had a version.
fn unversioned(target: &str) -> (&str, bool) {
    let path = target.split('?').next().unwrap_or("");
    match path.strip_prefix("/v1.") {
        Some(rest) => rest.find('/').map_or((path, false), |i| (&rest[i..], true)),
        None => (path, false),
    }
}

/// A versioned-only proxy's refusal.
async fn forbidden(conn: &mut UnixStream) -> std::io::Result<()> {
    let body = b"{\"message\":\"forbidden by the proxy\"}\n";
    let head = format!(
        "HTTP/1.1 403 Forbidden\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n",
        body.len()
    );
    conn.write_all(head.as_bytes()).await?;
    conn.write_all(body).await
}

/// The head of an `/events` response (chunked).
fn events_head(api: Api) -> Vec<u8> {
    format!(
        "HTTP/1.1 200 OK\r\nContent-Type: {}\r\nApi-Version: {}\r\n\
         Transfer-Encoding: chunked\r\n\r\n",
        api.events_type(),
        api.version
    )
    .into_bytes()
}

async fn fixed(
    conn: &mut UnixStream,
    api: Api,
    content_type: &str,
    body: &[u8],
) -> std::io::Result<()> {
    conn.write_all(
        format!(
            "HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nApi-Version: {}\r\n\
             Content-Length: {}\r\n\r\n",
            api.version,
            body.len()
        )
        .as_bytes(),
    )
    .await?;
    conn.write_all(body).await?;
    conn.flush().await
}

/// A time query parameter (`since`, `until`: `seconds.nanoseconds`) in nanoseconds.
fn time_of(target: &str, name: &str) -> Option<i64> {
    let query = target.split_once('?')?.1;
    let value = query
        .split('&')
        .find_map(|p| p.strip_prefix(name)?.strip_prefix('='))?;
    let (secs, frac) = value.split_once('.').unwrap_or((value, "0"));
    let frac = format!("{frac:0<9}");
    Some(secs.parse::<i64>().ok()? * 1_000_000_000 + frac.get(..9)?.parse::<i64>().ok()?)
}

/// Whether `/events` asks for the past only (`until`, or Podman's
/// `stream=false`).
fn is_history(target: &str) -> bool {
    time_of(target, "until").is_some() || target.contains("stream=false")
}

/// `/events` with `until` (in the past, as lookout sends it): `lines`, the
/// events the engine still has from `since` to `until`, then the end of the
/// body, as dockerd answers.
async fn past_events(mut conn: UnixStream, api: Api, lines: &[Arc<[u8]>]) -> std::io::Result<()> {
    let mut out = events_head(api);
    for line in lines {
        push_chunk(&mut out, line);
    }
    out.extend_from_slice(b"0\r\n\r\n");
    conn.write_all(&out).await?;
    conn.flush().await
}

/// `/events` of a [`Live`] engine: the replay `since` asks for, then every
/// change as it happens, each line one HTTP chunk (batched into writes of up
/// to 64 KiB), until the client goes or [`Live::cut`] (or a
/// [`SlowReader::Close`]) closes the connection mid-body.
async fn live_events(
    mut conn: UnixStream,
    api: Api,
    feed: &Live,
    since: Option<i64>,
) -> std::io::Result<()> {
    let (mut rx, mut kill) = feed.subscribe(since);
    conn.write_all(&events_head(api)).await?;
    conn.flush().await?;
    let (mut rd, mut wr) = conn.split();
    let mut sink = [0u8; 256];
    let mut out = Vec::with_capacity(64 * 1024);
    loop {
        let first = tokio::select! {
            biased;
            _ = &mut kill => return Ok(()),
            n = rd.read(&mut sink) => {
                if n? == 0 {
                    return Ok(());
                }
                continue;
            }
            line = rx.recv() => match line {
                Some(line) => line,
                None => return Ok(()),
            },
        };
        out.clear();
        push_chunk(&mut out, &first);
        while out.len() < 64 * 1024 {
            match rx.try_recv() {
                Ok(line) => push_chunk(&mut out, &line),
                Err(_) => break,
            }
        }
        // A cut closes the connection even while a write is blocked on a
        // client that does not read.
        tokio::select! {
            biased;
            _ = &mut kill => return Ok(()),
            written = async {
                wr.write_all(&out).await?;
                wr.flush().await
            } => written?,
        }
    }
}

fn push_chunk(out: &mut Vec<u8>, chunk: &[u8]) {
    out.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
    out.extend_from_slice(chunk);
    out.extend_from_slice(b"\r\n");
}

/// What a [`Live`] engine does when a subscriber's queue is full (the client
/// does not read the `/events` body fast enough, or at all).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlowReader {
    /// Drop the events that do not fit, for that subscriber only, and keep
    /// the connection: what dockerd does (its event publisher gives each
    /// subscriber a 1024-event buffer and drops an event for it after a
    /// 100 ms send timeout). Nothing tells the client.
    Drop,
    /// Close the connection mid-body.
    Close,
}

/// A container's state in a [`Live`] engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    Created,
    Running,
    Exited,
}

#[derive(Debug)]
struct Container {
    uid: String,
    state: State,
    /// Listed as still running: it died while the list lagged (see
    /// [`Live::lagging_list`]).
    lags: bool,
}

#[derive(Debug)]
struct Subscriber {
    tx: mpsc::Sender<Arc<[u8]>>,
    /// Dropping it closes the connection at once.
    _kill: oneshot::Sender<()>,
}

#[derive(Debug)]
struct LiveState {
    containers: BTreeMap<String, Container>,
    /// The last [`Live::HISTORY`] events `(timeNano, line)`, for `since`.
    history: VecDeque<(i64, Arc<[u8]>)>,
    subscribers: Vec<Subscriber>,
    last_nanos: i64,
    next_uid: u64,
    rng: SplitMix64,
}

/// A fake engine's containers and event feed, shared between the engine's
/// runtime (serving) and the caller (changing the state, from any thread).
///
/// The containers are named `{prefix}-0` … `{prefix}-{names - 1}`; each
/// [`mutate`](Self::mutate) step picks one at random and moves it on: absent
/// → `create` → `start` → `die` → `start` again or `destroy` (a new container
/// id at each `create`), and broadcasts the event (a real-format line, see
/// [`event_line`]). `/containers/json` always lists the true state, so a
/// relist taken at any time is right.
#[derive(Debug)]
pub struct Live {
    state: Mutex<LiveState>,
    prefix: String,
    names: usize,
    slow: SlowReader,
    queue: usize,
    /// Events published (each to every subscriber).
    pub published: AtomicU64,
    /// Event deliveries dropped because a subscriber's queue was full.
    pub dropped: AtomicU64,
    /// Subscribers closed as slow readers ([`SlowReader::Close`]).
    pub closed_slow: AtomicU64,
    /// See [`Live::lagging_list`].
    lagging_list: std::sync::atomic::AtomicBool,
    /// See [`Live::unseen_before_next_list`].
    unseen_before_list: AtomicUsize,
    /// Event lines in API 1.52's shape (see [`Api::v1_52_events`]).
    v1_52_events: std::sync::atomic::AtomicBool,
}

impl Live {
    /// How many past events `since` can replay (dockerd keeps 256).
    pub const HISTORY: usize = 256;
    /// dockerd's per-subscriber buffer.
    pub const DOCKERD_QUEUE: usize = 1024;

    /// An engine with no container yet; `queue` events fit in each
    /// subscriber's buffer before `slow` applies.
    pub fn new(prefix: &str, names: usize, slow: SlowReader, queue: usize, seed: u64) -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::new(LiveState {
                containers: BTreeMap::new(),
                history: VecDeque::with_capacity(Self::HISTORY),
                subscribers: Vec::new(),
                last_nanos: 0,
                next_uid: 1,
                rng: SplitMix64::new(seed),
            }),
            prefix: prefix.to_owned(),
            names: names.max(1),
            slow,
            queue: queue.max(1),
            published: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            closed_slow: AtomicU64::new(0),
            lagging_list: std::sync::atomic::AtomicBool::new(false),
            unseen_before_list: AtomicUsize::new(0),
            v1_52_events: std::sync::atomic::AtomicBool::new(false),
        })
    }

    fn lock(&self) -> MutexGuard<'_, LiveState> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// `n` random steps, each broadcast as it happens.
    pub fn mutate(&self, n: usize) {
        self.steps(n);
    }

    /// [`mutate`](Self::mutate), telling each step taken: what a bench
    /// checks its reader against.
    pub fn steps(&self, n: usize) -> Vec<Step> {
        let mut st = self.lock();
        (0..n)
            .map(|_| {
                let (step, line) = self.step(&mut st);
                self.publish(&mut st, line);
                step
            })
            .collect()
    }

    /// Creates and starts every container not there yet (each step
    /// broadcast), so that all `names` run: a fleet host's starting set.
    pub fn fill(&self) -> Vec<Step> {
        let mut st = self.lock();
        let mut done = Vec::new();
        for i in 0..self.names {
            let name = format!("{}-{i}", self.prefix);
            if st.containers.contains_key(&name) {
                continue;
            }
            for action in ["create", "start"] {
                let (step, line) = self.act(&mut st, &name, action);
                self.publish(&mut st, line);
                done.push(step);
            }
        }
        done
    }

    /// Closes every `/events` connection now (mid-body, as a daemon that dies
    /// does), then makes `silent` steps while nobody is subscribed. With
    /// `restart`, the history is lost too (a restarted daemon replays nothing),
    /// so only a relist can tell a client what changed.
    pub fn cut(&self, restart: bool, silent: usize) {
        let mut st = self.lock();
        st.subscribers.clear();
        for _ in 0..silent {
            let (_, line) = self.step(&mut st);
            self.publish(&mut st, line);
        }
        if restart {
            st.history.clear();
        }
    }

    /// While on, a container that dies still lists as running until its
    /// next step, as dockerd's list lags its `die` events (dockerd 20.10
    /// logs `die` before its list shows the container exited). Its events
    /// and [`snapshot`](Self::snapshot) tell the truth.
    pub fn lagging_list(&self, on: bool) {
        self.lagging_list.store(on, Ordering::Relaxed);
        if !on {
            for c in self.lock().containers.values_mut() {
                c.lags = false;
            }
        }
    }

    /// At the next `/containers/json`, before it answers: every `/events`
    /// connection closes, then `steps` steps happen that no subscription
    /// delivers (the history keeps them, the list shows them). What Podman's
    /// event-log rotation does to the events that race a list: it ends every
    /// `/events` stream.
    pub fn unseen_before_next_list(&self, steps: usize) {
        self.unseen_before_list.store(steps, Ordering::SeqCst);
    }

    /// The true state: name → running.
    pub fn snapshot(&self) -> BTreeMap<String, bool> {
        self.lock()
            .containers
            .iter()
            .map(|(name, c)| (name.clone(), c.state == State::Running))
            .collect()
    }

    /// How many containers exist.
    pub fn len(&self) -> usize {
        self.lock().containers.len()
    }

    /// Whether no container exists.
    pub fn is_empty(&self) -> bool {
        self.lock().containers.is_empty()
    }

    /// How many `/events` subscribers are connected.
    pub fn subscribers(&self) -> usize {
        let mut st = self.lock();
        st.subscribers.retain(|s| !s.tx.is_closed());
        st.subscribers.len()
    }

    /// `GET /containers/json?all=1` of the true state (no filter applied).
    pub fn containers_json(&self) -> Vec<u8> {
        let unseen = self.unseen_before_list.swap(0, Ordering::SeqCst);
        if unseen > 0 {
            self.cut(false, unseen);
        }
        let st = self.lock();
        let mut body = String::from("[");
        for (i, (name, c)) in st.containers.iter().enumerate() {
            if i > 0 {
                body.push(',');
            }
            let state = match c.state {
                _ if c.lags => "running",
                State::Created => "created",
                State::Running => "running",
                State::Exited => "exited",
            };
            body.push_str(&format!(
                concat!(
                    r#"{{"Id":"{uid}","Names":["/{name}"],"Image":"nginx:1.27","State":"{state}","#,
                    r#""Labels":{{"com.docker.compose.project":"bench","com.docker.compose.service":"web","#,
                    r#""maintainer":"NGINX Docker Maintainers","tier":"frontend"}}}}"#
                ),
                uid = c.uid,
                name = name,
                state = state,
            ));
        }
        body.push(']');
        body.into_bytes()
    }

    /// The events it still has from `since` to `until` (both included).
    pub fn past(&self, since: i64, until: i64) -> Vec<Arc<[u8]>> {
        self.lock()
            .history
            .iter()
            .filter(|(nanos, _)| (since..=until).contains(nanos))
            .map(|(_, line)| line.clone())
            .collect()
    }

    /// A new subscriber: its queue (with the replay `since` asks for) and
    /// its kill signal.
    fn subscribe(&self, since: Option<i64>) -> (mpsc::Receiver<Arc<[u8]>>, oneshot::Receiver<()>) {
        let mut st = self.lock();
        st.subscribers.retain(|s| !s.tx.is_closed());
        let (tx, rx) = mpsc::channel(self.queue.max(Self::HISTORY));
        let (kill_tx, kill_rx) = oneshot::channel();
        if let Some(since) = since {
            for (nanos, line) in &st.history {
                if *nanos >= since {
                    let _ = tx.try_send(line.clone());
                }
            }
        }
        st.subscribers.push(Subscriber { tx, _kill: kill_tx });
        (rx, kill_rx)
    }

    fn publish(&self, st: &mut LiveState, line: (i64, Arc<[u8]>)) {
        self.published.fetch_add(1, Ordering::Relaxed);
        let slow = self.slow;
        st.subscribers
            .retain(|s| match s.tx.try_send(line.1.clone()) {
                Ok(()) => true,
                Err(mpsc::error::TrySendError::Closed(_)) => false,
                Err(mpsc::error::TrySendError::Full(_)) => {
                    self.dropped.fetch_add(1, Ordering::Relaxed);
                    if slow == SlowReader::Close {
                        self.closed_slow.fetch_add(1, Ordering::Relaxed);
                        false
                    } else {
                        true
                    }
                }
            });
        if st.history.len() == Self::HISTORY {
            st.history.pop_front();
        }
        st.history.push_back(line);
    }

    /// One step of one random container: what it was, and its event
    /// `(timeNano, line)`.
    fn step(&self, st: &mut LiveState) -> (Step, (i64, Arc<[u8]>)) {
        let z = st.rng.next_u64();
        let name = format!("{}-{}", self.prefix, z % self.names as u64);
        if let Some(c) = st.containers.get_mut(&name) {
            // Its next step: the list has caught up.
            c.lags = false;
        }
        let action = match st.containers.get(&name).map(|c| c.state) {
            None => "create",
            Some(State::Created) => "start",
            Some(State::Running) => "die",
            Some(State::Exited) if z & (1 << 40) == 0 => "start",
            Some(State::Exited) => "destroy",
        };
        self.act(st, &name, action)
    }

    /// `action` (`create`, `start`, `die`, `destroy`) on container `name`,
    /// which must fit its state; its event `(timeNano, line)`.
    fn act(
        &self,
        st: &mut LiveState,
        name: &str,
        action: &'static str,
    ) -> (Step, (i64, Arc<[u8]>)) {
        match (action, st.containers.get_mut(name)) {
            ("create", None) => {
                let uid = format!("{:064x}", st.next_uid.wrapping_mul(0x9E37_79B9_7F4A_7C15));
                st.next_uid += 1;
                st.containers.insert(
                    name.to_owned(),
                    Container {
                        uid,
                        state: State::Created,
                        lags: false,
                    },
                );
            }
            ("start", Some(c)) => c.state = State::Running,
            ("die", Some(c)) => {
                c.state = State::Exited;
                c.lags = self.lagging_list.load(Ordering::Relaxed);
            }
            ("destroy", Some(_)) => {}
            (action, c) => panic!("{action} does not fit {name} ({:?})", c.map(|c| c.state)),
        }
        let uid = st.containers[name].uid.clone();
        if action == "destroy" {
            st.containers.remove(name);
        }
        // dockerd's clock: wall time, strictly increasing here.
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX));
        st.last_nanos = now.max(st.last_nanos + 1);
        let line = if self.v1_52_events.load(Ordering::Relaxed) {
            event_line_1_52(action, &uid, name, st.last_nanos)
        } else {
            event_line(action, &uid, name, st.last_nanos)
        };
        let step = Step {
            name: name.to_owned(),
            action,
            nanos: st.last_nanos,
        };
        (step, (st.last_nanos, Arc::from(line.into_bytes())))
    }
}

/// One step a [`Live`] engine took: its container, its action (`create`,
/// `start`, `die`, `destroy`) and its event's `timeNano`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    pub name: String,
    pub action: &'static str,
    pub nanos: i64,
}

/// One real-format container event line (as dockerd 27 writes it), `\n`-terminated.
pub fn event_line(action: &str, id: &str, name: &str, nanos: i64) -> String {
    line(action, id, name, nanos, true)
}

/// [`event_line`] as API 1.52 writes it (Docker 29): without the legacy
/// `status`, `id` and `from`, `\n`-terminated.
pub fn event_line_1_52(action: &str, id: &str, name: &str, nanos: i64) -> String {
    line(action, id, name, nanos, false)
}

fn line(action: &str, id: &str, name: &str, nanos: i64, legacy: bool) -> String {
    let legacy = if legacy {
        format!(r#""status":"{action}","id":"{id}","from":"nginx:1.27","#)
    } else {
        String::new()
    };
    format!(
        concat!(
            r#"{{{legacy}"Type":"container","Action":"{a}","#,
            r#""Actor":{{"ID":"{id}","Attributes":{{"com.docker.compose.project":"bench","#,
            r#""com.docker.compose.service":"web","image":"nginx:1.27","maintainer":"NGINX Docker Maintainers","#,
            r#""name":"{name}","tier":"frontend"}}}},"scope":"local","time":{s},"timeNano":{n}}}"#,
            "\n"
        ),
        legacy = legacy,
        a = action,
        id = id,
        name = name,
        s = nanos / 1_000_000_000,
        n = nanos
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One `GET /_ping` on `conn`, its answer read to its body (`OK`).
    async fn ping(conn: &mut UnixStream, n: usize) {
        conn.write_all(format!("GET /_ping?n={n} HTTP/1.1\r\nHost: d\r\n\r\n").as_bytes())
            .await
            .expect("write a request");
        let mut answer = Vec::new();
        let mut buf = [0u8; 512];
        while !answer.ends_with(b"\r\n\r\nOK") {
            let read = conn.read(&mut buf).await.expect("read an answer");
            assert!(read > 0, "the engine closed the connection");
            answer.extend_from_slice(&buf[..read]);
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn the_request_log_keeps_the_latest_and_counts_them_all() {
        let engine = start(Script {
            chunks: Arc::new(Vec::new()),
            close: true,
        });
        let mut conn = UnixStream::connect(&engine.socket)
            .await
            .expect("connect to the engine");
        let sent = REQUESTS_KEPT + 100;
        for n in 0..sent {
            ping(&mut conn, n).await;
        }
        let kept = engine.requests();
        assert_eq!(kept.len(), REQUESTS_KEPT);
        assert_eq!(kept.first().map(String::as_str), Some("/_ping?n=100"));
        let last = format!("/_ping?n={}", sent - 1);
        assert_eq!(kept.last(), Some(&last));
        assert_eq!(engine.requests_total(), sent as u64);
    }
}
