//! A unix-socket relay the tests put between a watch and an engine, to see
//! what the watch does on the wire: how many connections it holds open, how
//! many `/events` requests it made (and when, with which query), every
//! request it made, and to break the feed on purpose (hold connections
//! unanswered, refuse new ones, inject undecodable event lines, delay the
//! events, refuse unversioned paths as the socket proxies written for
//! Traefik do).
//!
//! The relay runs on a thread and a tokio runtime of its own, so that the
//! test's runtime counts only the watch's tasks (none: the library never
//! spawns). Dropping the [`Relay`] stops it and removes its socket.

use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{Notify, oneshot, watch};

pub mod audit;
pub mod raw_events;
pub mod readiness;
pub mod scenarios;
pub mod why;

/// What the relay has seen so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Connections open now (the client's side not yet closed).
    pub live: usize,
    /// Connections accepted in all.
    pub accepted: usize,
    /// `GET …/events` requests relayed.
    pub events_requests: usize,
    /// Requests relayed, of any path.
    pub requests: usize,
    /// Lines injected into `/events` responses.
    pub injected: usize,
}

#[derive(Debug)]
struct Shared {
    target: PathBuf,
    counts: watch::Sender<Counts>,
    /// Accept connections but neither forward nor answer them.
    hold: AtomicBool,
    /// Accept connections and close them at once.
    refuse: AtomicBool,
    /// How long each chunk of an `/events` response is held back (ms).
    events_delay_ms: AtomicU64,
    /// Answer 403 to every request whose path is neither `/_ping` nor
    /// under `/v1.NN/`.
    versioned_only: AtomicBool,
    /// Lines waiting to be injected into the next `/events` response chunk boundary.
    poison: Mutex<Vec<Vec<u8>>>,
    poison_ready: Notify,
    /// Closes every open connection.
    cut: Notify,
    /// Every `/events` request relayed: when the relay read it, and its
    /// path and query.
    requests: Mutex<Vec<(SystemTime, String)>>,
    /// Every request relayed, of any path: when, its method, path and query.
    all: Mutex<Vec<(SystemTime, String)>>,
}

impl Shared {
    fn update(&self, f: impl FnOnce(&mut Counts)) {
        self.counts.send_modify(f);
    }
}

/// A relay from a temporary unix socket to an engine's unix socket.
#[derive(Debug)]
pub struct Relay {
    path: PathBuf,
    shared: Arc<Shared>,
    counts: watch::Receiver<Counts>,
    shutdown: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

static NEXT: AtomicUsize = AtomicUsize::new(0);

impl Relay {
    /// Starts a relay to `target` (`unix:///path`).
    ///
    /// # Panics
    /// When `target` is not a `unix://` host or the socket cannot be bound.
    pub fn start(target: &str) -> Self {
        let target = PathBuf::from(
            target
                .strip_prefix("unix://")
                .unwrap_or_else(|| panic!("the relay forwards to unix:// hosts, not {target}")),
        );
        let path = std::env::temp_dir().join(format!(
            "lookout-relay-{}-{}.sock",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_file(&path);
        let listener = std::os::unix::net::UnixListener::bind(&path)
            .unwrap_or_else(|e| panic!("relay: cannot bind {}: {e}", path.display()));
        listener
            .set_nonblocking(true)
            .expect("relay: nonblocking listener");
        let (counts, counts_rx) = watch::channel(Counts::default());
        let shared = Arc::new(Shared {
            target,
            counts,
            hold: AtomicBool::new(false),
            refuse: AtomicBool::new(false),
            events_delay_ms: AtomicU64::new(0),
            versioned_only: AtomicBool::new(false),
            poison: Mutex::new(Vec::new()),
            poison_ready: Notify::new(),
            cut: Notify::new(),
            requests: Mutex::new(Vec::new()),
            all: Mutex::new(Vec::new()),
        });
        let (shutdown, shutdown_rx) = oneshot::channel();
        let thread = {
            let shared = Arc::clone(&shared);
            std::thread::Builder::new()
                .name("relay".into())
                .spawn(move || serve(listener, &shared, shutdown_rx))
                .expect("relay: thread")
        };
        Self {
            path,
            shared,
            counts: counts_rx,
            shutdown: Some(shutdown),
            thread: Some(thread),
        }
    }

    /// The relay's address, `unix:///tmp/…`, for a watch to dial.
    pub fn host(&self) -> String {
        format!("unix://{}", self.path.display())
    }

    /// The relay's socket.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The counts now.
    pub fn counts(&self) -> Counts {
        *self.counts.borrow()
    }

    /// Every `/events` request relayed so far, in order: the wall-clock
    /// time at which the relay read it, and its path and query
    /// (`/v1.41/events?filters=…&since=…`).
    ///
    /// # Panics
    /// When a relay task panicked holding the list's lock.
    pub fn events_requests(&self) -> Vec<(SystemTime, String)> {
        self.shared
            .requests
            .lock()
            .expect("relay: requests lock")
            .clone()
    }

    /// Every request relayed so far, of any path, in order: when the relay
    /// read it, and its method, path and query (`GET /services?status=true`).
    ///
    /// # Panics
    /// When a relay task panicked holding the list's lock.
    pub fn requests(&self) -> Vec<(SystemTime, String)> {
        self.shared
            .all
            .lock()
            .expect("relay: requests lock")
            .clone()
    }

    /// [`requests`](Self::requests) without their API version prefix
    /// (`GET /v1.41/services?…` → `GET /services?…`).
    pub fn requests_unversioned(&self) -> Vec<(SystemTime, String)> {
        self.requests()
            .into_iter()
            .map(|(at, request)| match request.split_once(' ') {
                Some((method, target)) => (at, format!("{method} {}", unversioned(target))),
                None => (at, request),
            })
            .collect()
    }

    /// Refuses new connections: each is accepted and closed at once, before
    /// any answer (an engine gone for every new request, while the
    /// connections already open go on).
    pub fn refuse(&self, on: bool) {
        self.shared.refuse.store(on, Ordering::SeqCst);
    }

    /// Holds back each chunk of the `/events` responses (the events, not
    /// their head) for `delay` before relaying it: a feed that lags the
    /// engine's other answers. `Duration::ZERO` relays them at once.
    pub fn delay_events(&self, delay: Duration) {
        let ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX);
        self.shared.events_delay_ms.store(ms, Ordering::SeqCst);
    }

    /// Refuses (`403 Forbidden`, connection closed) every request whose
    /// path is neither `/_ping` nor under `/v1.NN/` — the allow-lists
    /// (`^/v1\.\d+/(version|containers/.*|events.*)|/_ping`) that the socket
    /// proxies written for Traefik use.
    pub fn versioned_only(&self, on: bool) {
        self.shared.versioned_only.store(on, Ordering::SeqCst);
    }

    /// Every request's target so far (path and query), in order; the
    /// refused ones included.
    ///
    /// # Panics
    /// When a relay task panicked holding the list's lock.
    pub fn targets(&self) -> Vec<String> {
        self.requests()
            .into_iter()
            .filter_map(|(_, request)| Some(request.split_once(' ')?.1.to_owned()))
            .collect()
    }

    /// Holds new connections: accepted, never forwarded, never answered
    /// (an engine whose socket accepts but that does not respond).
    pub fn hold(&self, on: bool) {
        self.shared.hold.store(on, Ordering::SeqCst);
    }

    /// Injects `line` (a `\n` is appended) as one chunk into the `/events`
    /// response being relayed now, or the next one, at a chunk boundary.
    ///
    /// # Panics
    /// When a relay task panicked holding the queue's lock.
    pub fn inject(&self, line: &[u8]) {
        let mut line = line.to_vec();
        line.push(b'\n');
        self.shared
            .poison
            .lock()
            .expect("relay: poison lock")
            .push(line);
        self.shared.poison_ready.notify_waiters();
    }

    /// Closes every open connection (both sides), as a network blip would.
    pub fn cut(&self) {
        self.shared.cut.notify_waiters();
    }

    /// [`cut`](Self::cut)s and waits (at most `timeout`) until no
    /// connection is open.
    ///
    /// # Panics
    /// When a connection is still open after `timeout`.
    pub async fn cut_and_wait(&self, timeout: Duration) {
        self.cut();
        self.wait(timeout, |c| c.live == 0)
            .await
            .unwrap_or_else(|c| panic!("the relay did not cut: {c:?}"));
    }

    /// Waits until the counts satisfy `pred`, at most `timeout`.
    ///
    /// # Errors
    /// The counts at the deadline, when `pred` never held.
    pub async fn wait(
        &self,
        timeout: Duration,
        pred: impl Fn(&Counts) -> bool,
    ) -> Result<Counts, Counts> {
        let mut rx = self.counts.clone();
        match tokio::time::timeout(timeout, rx.wait_for(|c| pred(c))).await {
            Ok(Ok(c)) => Ok(*c),
            _ => Err(self.counts()),
        }
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        if let Some(s) = self.shutdown.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

fn serve(
    listener: std::os::unix::net::UnixListener,
    shared: &Arc<Shared>,
    mut shutdown: oneshot::Receiver<()>,
) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("relay: runtime");
    rt.block_on(async {
        let listener = UnixListener::from_std(listener).expect("relay: listener");
        loop {
            tokio::select! {
                _ = &mut shutdown => break,
                accepted = listener.accept() => {
                    let Ok((client, _)) = accepted else { continue };
                    tokio::spawn(relay_one(client, Arc::clone(shared)));
                }
            }
        }
    });
    // Dropping the runtime drops every connection task: their sockets close.
}

/// Counts a connection live from accept until the pair is torn down.
struct Live(Arc<Shared>);

impl Live {
    fn new(shared: Arc<Shared>) -> Self {
        shared.update(|c| {
            c.live += 1;
            c.accepted += 1;
        });
        Self(shared)
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        self.0.update(|c| c.live -= 1);
    }
}

async fn relay_one(client: UnixStream, shared: Arc<Shared>) {
    let _live = Live::new(Arc::clone(&shared));
    tokio::select! {
        () = shared.cut.notified() => {}
        () = relay_pair(client, &shared) => {}
    }
}

async fn relay_pair(mut client: UnixStream, shared: &Shared) {
    if shared.refuse.load(Ordering::SeqCst) {
        return;
    }
    if shared.hold.load(Ordering::SeqCst) {
        // Read and discard until the client gives up.
        let mut sink = [0u8; 4096];
        while matches!(client.read(&mut sink).await, Ok(n) if n > 0) {}
        return;
    }
    let Ok(server) = UnixStream::connect(&shared.target).await else {
        return;
    };
    let (mut client_rx, mut client_tx) = client.into_split();
    let (mut server_rx, mut server_tx) = server.into_split();
    // What the response is: `Some(true)` an `/events` body, `Some(false)`
    // anything else, `None` refused here.
    let (is_events_tx, is_events_rx) = oneshot::channel::<Option<bool>>();
    let up = async {
        let mut buf = vec![0u8; 16 * 1024];
        let Ok(n) = client_rx.read(&mut buf).await else {
            return;
        };
        if n == 0 {
            return;
        }
        let head = &buf[..n];
        let request = head
            .split(|b| *b == b'\r' || *b == b'\n')
            .next()
            .and_then(|line| line.rsplitn(2, |b| *b == b' ').nth(1))
            .map(|line| String::from_utf8_lossy(line).into_owned());
        let target = request
            .as_deref()
            .and_then(|r| r.split_once(' '))
            .map(|(_, target)| target.to_owned());
        if let Some(request) = request {
            if let Ok(mut all) = shared.all.lock() {
                all.push((SystemTime::now(), request));
            }
            shared.update(|c| c.requests += 1);
        }
        if shared.versioned_only.load(Ordering::SeqCst)
            && !target.as_deref().is_some_and(allowed_by_versioned_proxy)
        {
            let _ = is_events_tx.send(None);
            // The answer is the other half's to write; it ends the pair.
            return std::future::pending().await;
        }
        let path = head
            .starts_with(b"GET ")
            .then(|| head.split(|b| *b == b' ').nth(1))
            .flatten()
            .filter(|path| {
                path.starts_with(b"/events") || path.windows(8).any(|w| w == b"/events?")
            });
        let events = path.is_some();
        if let Some(path) = path {
            let at = SystemTime::now();
            let path = String::from_utf8_lossy(path).into_owned();
            if let Ok(mut requests) = shared.requests.lock() {
                requests.push((at, path));
            }
            shared.update(|c| c.events_requests += 1);
        }
        let _ = is_events_tx.send(Some(events));
        if server_tx.write_all(head).await.is_err() {
            return;
        }
        let _ = tokio::io::copy(&mut client_rx, &mut server_tx).await;
    };
    let down = async {
        let Ok(events) = is_events_rx.await else {
            return;
        };
        let Some(events) = events else {
            let _ = client_tx
                .write_all(
                    b"HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\n\
                      Content-Length: 10\r\nConnection: close\r\n\r\nForbidden\n",
                )
                .await;
            return;
        };
        if events {
            relay_events(&mut server_rx, &mut client_tx, shared).await;
        } else {
            let _ = tokio::io::copy(&mut server_rx, &mut client_tx).await;
        }
    };
    // Either side closing ends the pair: both sockets close on return.
    tokio::select! {
        () = up => {}
        () = down => {}
    }
}

/// The request targets that are neither `/_ping` nor under `/v{version}/`.
pub fn not_under_version<'a>(targets: &'a [String], version: &str) -> Vec<&'a String> {
    let prefix = format!("/v{version}/");
    targets
        .iter()
        .filter(|t| t.as_str() != "/_ping" && !t.starts_with(&prefix))
        .collect()
}

/// One request to the engine's API on its unix socket (HTTP/1.0: the
/// engine closes the connection after its answer): the status and the body.
/// For what the CLIs cannot say (an exec-form healthcheck) and what they
/// do not show (`ServiceStatus`).
///
/// # Errors
/// When the host is not `unix://`, or the engine cannot be reached or
/// answers no HTTP status.
pub fn engine_api(
    host: &str,
    method: &str,
    path: &str,
    body: &str,
) -> Result<(u16, String), String> {
    let socket = host
        .strip_prefix("unix://")
        .ok_or_else(|| format!("{host}: not a unix:// host"))?;
    let mut s = std::os::unix::net::UnixStream::connect(socket)
        .map_err(|e| format!("{host}: connect: {e}"))?;
    s.set_read_timeout(Some(scenarios::ITEM))
        .map_err(|e| e.to_string())?;
    let request = format!(
        "{method} {path} HTTP/1.0\r\nHost: localhost\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(request.as_bytes())
        .map_err(|e| format!("{host}: write: {e}"))?;
    let mut response = Vec::new();
    s.read_to_end(&mut response)
        .map_err(|e| format!("{host}: read: {e}"))?;
    let text = String::from_utf8_lossy(&response);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("{host}: no status in {head:?}"))?;
    Ok((status, body.to_owned()))
}

/// `/_ping`, or a path under `/v1.NN/`.
fn allowed_by_versioned_proxy(target: &str) -> bool {
    let path = target.split('?').next().unwrap_or(target);
    path == "/_ping" || unversioned(target).len() < target.len()
}

/// `target` without its API version prefix (`/v1.41/services?x` →
/// `/services?x`); a target without one as it is.
pub fn unversioned(target: &str) -> &str {
    target
        .strip_prefix("/v1.")
        .and_then(|rest| {
            let (minor, _) = rest.split_once('/')?;
            (!minor.is_empty() && minor.bytes().all(|b| b.is_ascii_digit()))
                .then(|| &rest[minor.len()..])
        })
        .unwrap_or(target)
}

/// Relays an `/events` response, injecting pending lines as whole chunks
/// between the server's chunks.
async fn relay_events(
    server: &mut (impl AsyncRead + Unpin),
    client: &mut (impl AsyncWrite + Unpin),
    shared: &Shared,
) {
    let mut buf: Vec<u8> = Vec::with_capacity(16 * 1024);
    // The response head.
    let head_end = loop {
        if let Some(pos) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break pos + 4;
        }
        if !read_more(server, &mut buf).await {
            let _ = client.write_all(&buf).await;
            return;
        }
    };
    if client.write_all(&buf[..head_end]).await.is_err() {
        return;
    }
    let chunked = String::from_utf8_lossy(&buf[..head_end])
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked");
    buf.drain(..head_end);
    if !chunked {
        if client.write_all(&buf).await.is_ok() {
            let _ = tokio::io::copy(server, client).await;
        }
        return;
    }
    loop {
        // Forward every complete chunk: the output stays at a chunk boundary.
        while let Some(len) = complete_chunk(&buf) {
            let delay = shared.events_delay_ms.load(Ordering::SeqCst);
            if delay > 0 {
                tokio::time::sleep(Duration::from_millis(delay)).await;
            }
            if client.write_all(&buf[..len]).await.is_err() {
                return;
            }
            buf.drain(..len);
        }
        let ready = shared.poison_ready.notified();
        tokio::pin!(ready);
        ready.as_mut().enable();
        let pending = std::mem::take(&mut *shared.poison.lock().expect("relay: poison lock"));
        if !pending.is_empty() {
            for line in pending {
                let mut chunk = format!("{:x}\r\n", line.len()).into_bytes();
                chunk.extend_from_slice(&line);
                chunk.extend_from_slice(b"\r\n");
                if client.write_all(&chunk).await.is_err() {
                    return;
                }
                shared.update(|c| c.injected += 1);
            }
            continue;
        }
        tokio::select! {
            () = &mut ready => {}
            more = read_more(server, &mut buf) => {
                if !more {
                    let _ = client.write_all(&buf).await;
                    return;
                }
            }
        }
    }
}

async fn read_more(server: &mut (impl AsyncRead + Unpin), buf: &mut Vec<u8>) -> bool {
    buf.reserve(16 * 1024);
    matches!(server.read_buf(buf).await, Ok(n) if n > 0)
}

/// The length of the first complete chunk in `buf` (size line, data, CRLF),
/// or of the last chunk with its empty trailer.
fn complete_chunk(buf: &[u8]) -> Option<usize> {
    let line_end = buf.windows(2).position(|w| w == b"\r\n")?;
    let size_text = std::str::from_utf8(&buf[..line_end]).ok()?;
    let size_text = size_text.split(';').next()?.trim();
    let size = usize::from_str_radix(size_text, 16).ok()?;
    let total = line_end + 2 + size + 2;
    (buf.len() >= total).then_some(total)
}

#[cfg(test)]
mod tests {
    use super::{allowed_by_versioned_proxy, complete_chunk};

    #[test]
    fn the_versioned_proxy_allows_versioned_paths_and_ping() {
        for ok in ["/_ping", "/v1.41/events?since=1", "/v1.52/containers/json"] {
            assert!(allowed_by_versioned_proxy(ok), "{ok}");
        }
        for refused in [
            "/events",
            "/containers/json?all=1",
            "/v1.x/events",
            "/v2/events",
            "/_ping/x",
        ] {
            assert!(!allowed_by_versioned_proxy(refused), "{refused}");
        }
    }

    #[test]
    fn chunk_boundaries() {
        assert_eq!(complete_chunk(b"5\r\nhello\r\n3\r\n"), Some(10));
        assert_eq!(complete_chunk(b"5\r\nhel"), None);
        assert_eq!(complete_chunk(b"0\r\n\r\n"), Some(5));
        assert_eq!(complete_chunk(b"a;ext=1\r\n0123456789\r\n"), Some(21));
        assert_eq!(complete_chunk(b"zz\r\n"), None);
    }
}
