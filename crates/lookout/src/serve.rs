//! `--serve ADDR`: the hub's events, instances, health and metrics over
//! HTTP/1.1, to any number of clients, over the one engine connection (of
//! several engines, a hub and a connection each, every answer saying its
//! host).
//!
//! One concern per module. What the handlers share, importing none of
//! them: [`state`] (the server's state, each engine served), [`query`]
//! (query strings), [`labels`] (`?label=` filters), [`response`] (JSON and
//! error bodies), [`frames`] (each hub item's NDJSON line and SSE frame),
//! [`metrics`] (the Prometheus recorder). The handlers: [`events`] (the
//! `/events` body: one subscription per client, NDJSON or SSE),
//! [`instances`], [`health`]; [`routes`] (the router, the page,
//! `/metrics`) and [`auth`] (the bearer token) around them; [`tls`]
//! (HTTPS, client certificates, the files reloaded) under them;
//! [`admission`] (the connection slots) and [`busy`] (a request's slot
//! marked busy) beside them; [`direct`] (`/events` on a plain connection
//! written without hyper) and [`gate`] (a signal looked at once its waker
//! fired). This file says what a server serves ([`Config`], each engine's
//! [`EngineHub`]), binds, accepts, bounds each connection and shuts down.
//!
//! A slow client costs the others nothing: each `/events` response body *is*
//! its subscription, polled only when its writer (hyper, or [`direct`]'s)
//! can write to that client's socket, so a client that does not read leaves
//! only its own subscription
//! unpolled (the hub lags it, by design: it gets the resync diff when it
//! reads again). A client that goes away drops its body, hence its
//! subscription.

mod admission;
mod auth;
mod busy;
mod direct;
mod events;
mod frames;
mod gate;
mod health;
mod instances;
mod labels;
mod metrics;
mod query;
mod response;
mod routes;
mod state;
mod tls;

use std::convert::Infallible;
use std::net::{SocketAddr, TcpListener as StdTcpListener};
use std::path::Path;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use lookout_core::{Dial, Hub, HubConfig, Watch};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use self::admission::{Admission, Admitted};
use self::busy::{BusyService, full};
pub use self::metrics::Metrics;
pub use self::tls::TlsFiles;

/// How long a client may take to send a request's head (slowloris), and,
/// over TLS, to complete its handshake before that.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// The most a request's head may take, in bytes (hyper's read buffer).
const MAX_HEAD_BYTES: usize = 16 * 1024;
/// The most header fields a request may have.
const MAX_HEADERS: usize = 64;
/// The most connections open at once by default (`--max-connections`).
/// Beyond, a newcomer takes the slot of the oldest idle connection (no
/// request in flight), else is answered `503` ([`admission`]).
pub const MAX_CONNECTIONS: usize = 4096;
/// The listen backlog asked for (the kernel caps it at `somaxconn`).
const LISTEN_BACKLOG: i32 = 4096;
/// The most connections being answered `503` at once (every slot busy);
/// beyond, a newcomer is closed at once.
const MAX_REFUSING: usize = 64;
/// File descriptors kept for other than client connections (the engine
/// connection, stdio, the runtime's own, a kubeconfig read).
const RESERVED_FDS: u64 = 64;
/// The kernel's send buffer of each client socket (Linux doubles it). Left
/// to autotuning it grows to `net.ipv4.tcp_wmem`'s maximum (4 MiB by
/// default) for a client that does not read: kernel memory a stalled client
/// would hold. Bounded, a stalled client stops being written to sooner and
/// lags in the hub instead (its memory then bounded by the instances).
const SEND_BUFFER: usize = 64 * 1024;
/// TCP keep-alive of each client socket: a peer that vanished without a
/// word (its host gone) is found within about a minute and a half even when
/// nothing is written to it (an NDJSON stream has no keep-alive of its own).
const TCP_KEEPALIVE_IDLE: Duration = Duration::from_secs(60);
const TCP_KEEPALIVE_INTERVAL: Duration = Duration::from_secs(10);
/// How long open connections get to end after SIGINT/SIGTERM (a stream
/// ends at once; a client that does not read cannot take its last chunk:
/// it is dropped then, and the process exits well within 2 s).
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(1);

/// Why `--serve` cannot start (exit 2).
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error("cannot listen on {addr}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Token(#[from] auth::TokenError),
    #[error(transparent)]
    Tls(#[from] tls::LoadError),
    #[error("cannot install the metrics recorder")]
    Metrics(#[source] ::metrics::SetRecorderError<metrics_exporter_prometheus::PrometheusRecorder>),
}

/// What `--serve` sets up before the watch is made: the listening socket,
/// the token, the TLS configuration, the metrics recorder (installed before
/// the hub registers its metrics).
#[derive(Debug)]
pub struct Prepared {
    listener: StdTcpListener,
    addr: SocketAddr,
    token: Option<auth::Token>,
    tls: Option<tls::Loaded>,
    metrics: Metrics,
    max_connections: usize,
}

impl Prepared {
    /// Binds `addr`, reads the token and the TLS files, installs the
    /// metrics recorder and raises the open-files limit to what
    /// `max_connections` clients need.
    pub fn new(
        addr: SocketAddr,
        token_file: Option<&Path>,
        tls_files: Option<TlsFiles>,
        max_connections: usize,
    ) -> Result<Self, SetupError> {
        let token = token_file.map(auth::Token::read).transpose()?;
        let tls = tls_files.map(tls::Loaded::read).transpose()?;
        let files = raise_open_files();
        let wanted = u64::try_from(max_connections)
            .unwrap_or(u64::MAX)
            .saturating_add(RESERVED_FDS);
        if files < wanted {
            tracing::warn!(
                files,
                max_connections,
                "the open-files limit holds fewer clients than --max-connections: \
                 accepts beyond it fail (and are retried) until clients go"
            );
        }
        let listener =
            StdTcpListener::bind(addr).map_err(|source| SetupError::Bind { addr, source })?;
        // A listen backlog as deep as the kernel allows (`somaxconn`, 4096
        // by default; std asks for 128): a burst of connections waits
        // there, not in SYN retransmits of a second and more, while the
        // accept loop takes them (it never waits for a slot).
        let bound = socket2::SockRef::from(&listener)
            .listen(LISTEN_BACKLOG)
            .and_then(|()| listener.local_addr())
            .and_then(|a| listener.set_nonblocking(true).map(|()| a))
            .map_err(|source| SetupError::Bind { addr, source })?;
        let metrics = Metrics::install().map_err(SetupError::Metrics)?;
        Ok(Self {
            listener,
            addr: bound,
            token,
            tls,
            metrics,
            max_connections: max_connections.max(1),
        })
    }

    /// The bound address (port 0 resolved).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Whether requests need a token.
    pub fn has_token(&self) -> bool {
        self.token.is_some()
    }

    /// Whether it serves HTTPS (`--serve-cert`).
    pub fn is_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// Whether clients need a certificate (`--serve-client-ca`).
    pub fn requires_client_cert(&self) -> bool {
        self.tls
            .as_ref()
            .is_some_and(tls::Loaded::requires_client_cert)
    }
}

/// One engine's hub, as a server serves it: named when the server serves
/// several. What `/events` keeps encoded follows the hub's queue
/// ([`Hub::queue`]).
#[derive(Clone, Debug)]
pub struct EngineHub {
    /// The engine's name when the server serves several (`None`: the one
    /// engine).
    pub host: Option<Arc<str>>,
    pub hub: Hub,
}

impl EngineHub {
    /// `watch`, shared with `config`, served as `host`.
    pub fn share<D: Dial>(watch: Watch<D>, host: Option<Arc<str>>, config: HubConfig) -> Self {
        Self {
            host,
            hub: watch.share_with(config),
        }
    }
}

/// What [`Server::start`] serves, and how.
#[derive(Debug)]
pub struct Config<'a> {
    /// The socket, token, TLS and metrics, set up before the watch.
    pub prepared: Prepared,
    /// The one engine's hub (`host: None`), or several engines', each
    /// named.
    pub hubs: &'a [EngineHub],
    /// Of `lookout etcd` (one hub): its sources' publisher statuses.
    pub publishers: Option<&'a lookout_etcd::Publishers>,
    /// The provider, as the lines name it.
    pub provider: &'static str,
    /// Readiness is watched (`--readiness`).
    pub readiness: bool,
}

/// A running server.
#[derive(Debug)]
pub struct Server {
    shutdown: CancellationToken,
    tracker: TaskTracker,
}

impl Server {
    /// Serves `config`'s hubs on its prepared socket until
    /// [`Server::shutdown`].
    pub fn start(config: Config<'_>) -> std::io::Result<Self> {
        let Config {
            prepared,
            hubs,
            publishers,
            provider,
            readiness,
        } = config;
        let listener = TcpListener::from_std(prepared.listener)?;
        let tls = prepared.tls.map(tls::Reloader::new).transpose()?;
        let shutdown = CancellationToken::new();
        let tracker = TaskTracker::new();
        let epoch = frames::Frames::epoch();
        let engines: Vec<state::ServedEngine> = hubs
            .iter()
            .map(|e| state::ServedEngine {
                host: e.host.clone(),
                hub: e.hub.clone(),
                store: e.hub.store(),
                frames: Arc::new(frames::Frames::new(
                    provider,
                    e.host.clone(),
                    e.hub.queue(),
                    epoch,
                )),
                publishers: publishers.filter(|_| hubs.len() == 1).cloned(),
            })
            .collect();
        let state = state::State {
            provider,
            readiness,
            engines: engines.into(),
            metrics: prepared.metrics,
            shutdown: shutdown.clone(),
        };
        let token = prepared.token.map(Arc::new);
        let direct = Arc::new(direct::Direct {
            state: state.clone(),
            token: token.clone(),
            max_headers: MAX_HEADERS,
        });
        let router = routes::router(state, token);
        tracker.spawn(accept_loop(
            listener,
            prepared.max_connections,
            router,
            direct,
            tls,
            shutdown.clone(),
            tracker.clone(),
        ));
        Ok(Self { shutdown, tracker })
    }

    /// Stops accepting, ends every open stream and waits (at most
    /// [`SHUTDOWN_GRACE`]) for the connections to close.
    pub async fn shutdown(self) {
        self.shutdown.cancel();
        self.tracker.close();
        if tokio::time::timeout(SHUTDOWN_GRACE, self.tracker.wait())
            .await
            .is_err()
        {
            tracing::warn!("some connections did not close within {SHUTDOWN_GRACE:?}");
        }
    }
}

/// Raises the soft open-files limit (`RLIMIT_NOFILE`) to the hard one: each
/// client holds one descriptor, and the usual soft limit (1024) is far below
/// what one process can serve. The limit now in force.
fn raise_open_files() -> u64 {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let mut limit = getrlimit(Resource::Nofile);
    if limit.current != limit.maximum {
        let raised = rustix::process::Rlimit {
            current: limit.maximum,
            maximum: limit.maximum,
        };
        match setrlimit(Resource::Nofile, raised) {
            Ok(()) => limit = getrlimit(Resource::Nofile),
            Err(e) => tracing::warn!("cannot raise the open-files limit: {e}"),
        }
    }
    tracing::debug!(soft = ?limit.current, hard = ?limit.maximum, "open-files limit");
    // `None` in rustix: unlimited.
    limit.current.unwrap_or(u64::MAX)
}

/// Accepts until shutdown; with `tls`, also looks at the TLS files between
/// accepts (a change, SIGHUP).
async fn accept_loop(
    listener: TcpListener,
    max_connections: usize,
    router: axum::Router,
    direct: Arc<direct::Direct>,
    mut tls: Option<tls::Reloader>,
    shutdown: CancellationToken,
    tracker: TaskTracker,
) {
    let admission = Admission::new(max_connections, &shutdown);
    let refusing = Arc::new(Semaphore::new(MAX_REFUSING));
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT)
        .max_buf_size(MAX_HEAD_BYTES)
        .max_headers(MAX_HEADERS)
        .keep_alive(true);
    let mut refuse_http = http.clone();
    refuse_http.keep_alive(false);
    let (http, refuse_http) = (Arc::new(http), Arc::new(refuse_http));
    let service = TowerToHyperService::new(router);
    loop {
        let (stream, peer) = tokio::select! {
            () = shutdown.cancelled() => break,
            trigger = tls::due(&mut tls) => {
                // Reloaded or not, accept again.
                if let Some(t) = tls.as_mut() {
                    t.check(trigger);
                }
                continue;
            }
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // EMFILE and the like: back off a little instead of spinning.
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        configure(&stream, peer);
        // The first byte and the TLS handshake within the head timeout of
        // the accept; then hyper gives the head its own.
        let deadline = tokio::time::Instant::now() + HEADER_READ_TIMEOUT;
        // The TLS configuration in use now; a reload after this is for
        // later connections.
        let acceptor = tls.as_ref().map(tls::Reloader::acceptor);
        let shutdown = shutdown.clone();
        let (ticket, shed) = match admission.admit() {
            Admitted::Slot { ticket, shed } => (ticket, shed),
            Admitted::Full => {
                // Every slot is busy: a 503 on a connection of its own,
                // while at most MAX_REFUSING are being told (beyond,
                // closed at once). Never left waiting in the backlog.
                ::metrics::counter!("lookout_serve_connections_refused_total").increment(1);
                let Ok(permit) = Arc::clone(&refusing).try_acquire_owned() else {
                    drop(stream);
                    continue;
                };
                let http = Arc::clone(&refuse_http);
                // The binary may spawn (one task per connection); the library crates never do.
                tracker.spawn(async move {
                    let Some(io) = open(stream, acceptor, deadline, &shutdown, peer).await else {
                        return;
                    };
                    let refuse =
                        hyper::service::service_fn(|_| async { Ok::<_, Infallible>(full()) });
                    let conn = http.serve_connection(TokioIo::new(io), refuse);
                    finish(conn, shutdown.clone(), shutdown, peer, permit).await;
                });
                continue;
            }
        };
        if shed > 0 {
            ::metrics::counter!("lookout_serve_connections_shed_total").increment(shed);
        }
        report_open(&admission);
        let shed = ticket.shed().clone();
        let ticket = Arc::new(ticket);
        let service = BusyService {
            inner: service.clone(),
            ticket: Arc::clone(&ticket),
        };
        let admission = Arc::clone(&admission);
        let http = Arc::clone(&http);
        let direct = Arc::clone(&direct);
        tracker.spawn(async move {
            if let Some(io) = open(stream, acceptor, deadline, &shed, peer).await {
                // A plain `GET /events` streams without hyper; the rest is hyper's.
                let io = match io {
                    tokio_util::either::Either::Left(tcp) => {
                        match direct.serve(tcp, &ticket).await {
                            Ok(()) => None,
                            Err(tcp) => Some(tokio_util::either::Either::Left(tcp)),
                        }
                    }
                    io @ tokio_util::either::Either::Right(_) => Some(io),
                };
                if let Some(io) = io {
                    let conn = http.serve_connection(TokioIo::new(io), service);
                    finish(conn, shutdown, shed, peer, ()).await;
                }
            }
            report_open(&admission);
        });
    }
    tracing::debug!("no longer accepting connections");
}

/// A new connection, ready for hyper: its first byte waited for (without
/// reading it), then, with `acceptor`, its TLS handshake, both by
/// `deadline`. hyper's buffers (16 KiB) and a TLS session are made only
/// once the client speaks, so a connection that says nothing costs its
/// socket and its task (~2 KiB). `None` when it is to close instead: silent
/// until the deadline, closed by the client, its handshake failed, or
/// `stop` cancelled (shed, or shut down).
async fn open(
    stream: tokio::net::TcpStream,
    acceptor: Option<tls::Acceptor>,
    deadline: tokio::time::Instant,
    stop: &CancellationToken,
    peer: SocketAddr,
) -> Option<tls::Io> {
    let opened = async {
        // (The TLS acceptor waits for it itself, and counts a silence as a
        // handshake refused for its timeout.)
        if acceptor.is_none() {
            let mut byte = [0u8; 1];
            match tokio::time::timeout_at(deadline, stream.peek(&mut byte)).await {
                Ok(Ok(n)) if n > 0 => {}
                _ => return None,
            }
        }
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        tls::open(stream, acceptor, left, peer).await
    };
    tokio::select! {
        io = opened => io,
        () = stop.cancelled() => None,
    }
}

/// `lookout_serve_connections`: the slots open now.
fn report_open(admission: &Admission) {
    let open = u32::try_from(admission.open()).unwrap_or(u32::MAX);
    ::metrics::gauge!("lookout_serve_connections").set(open);
}

/// The socket options of each client connection.
fn configure(stream: &tokio::net::TcpStream, peer: SocketAddr) {
    // Events are small and latency matters more than segment count.
    let _ = stream.set_nodelay(true);
    let socket = socket2::SockRef::from(stream);
    if let Err(e) = socket.set_send_buffer_size(SEND_BUFFER) {
        tracing::debug!(%peer, "cannot bound the send buffer: {e}");
    }
    let keepalive = socket2::TcpKeepalive::new()
        .with_time(TCP_KEEPALIVE_IDLE)
        .with_interval(TCP_KEEPALIVE_INTERVAL);
    if let Err(e) = socket.set_tcp_keepalive(&keepalive) {
        tracing::debug!(%peer, "cannot turn TCP keep-alive on: {e}");
    }
}

/// Drives one connection to its end. `stop` (its slot's shedding signal,
/// a child of `shutdown`; or `shutdown` itself) is the one signal waited on
/// beside it, looked at only once it may have fired (an atomic load per
/// wake-up): at shutdown the
/// connection ends gracefully (open `/events` bodies end on the same token;
/// idle keep-alive connections close now), when shed at once. `held` (a
/// slot or a permit) is given back when it ends.
async fn finish<I, S, H>(
    conn: http1::Connection<I, S>,
    shutdown: CancellationToken,
    stop: CancellationToken,
    peer: SocketAddr,
    held: H,
) where
    I: hyper::rt::Read + hyper::rt::Write + Unpin,
    S: hyper::service::HttpService<hyper::body::Incoming, ResBody = axum::body::Body>,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let _held = held;
    let mut conn = std::pin::pin!(conn);
    // `stop` looked at only when its waker fired ([`gate`]), not at every
    // wake-up of the connection.
    let mut stopping = std::pin::pin!(stop.cancelled());
    let mut gate = gate::Gate::default();
    let ended = std::future::poll_fn(|cx| {
        if let Poll::Ready(r) = conn.as_mut().poll(cx) {
            return Poll::Ready(Some(r));
        }
        match gate.poll(cx, |cx| stopping.as_mut().poll(cx)) {
            Some(Poll::Ready(())) => Poll::Ready(None),
            _ => Poll::Pending,
        }
    })
    .await;
    let result = if let Some(r) = ended {
        r
    } else {
        if !shutdown.is_cancelled() {
            tracing::debug!(%peer, "idle connection shed for a new one");
            return;
        }
        conn.as_mut().graceful_shutdown();
        conn.await
    };
    if let Err(e) = result {
        tracing::debug!(%peer, "connection ended: {e}");
    }
}
