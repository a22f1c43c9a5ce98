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
//! (HTTPS, client certificates, the files reloaded) under them. This file
//! binds, accepts, bounds each connection and shuts down.
//!
//! A slow client costs the others nothing: each `/events` response body *is*
//! its subscription, polled only when hyper can write to that client's
//! socket, so a client that does not read leaves only its own subscription
//! unpolled (the hub lags it, by design: it gets the resync diff when it
//! reads again). A client that goes away drops its body, hence its
//! subscription.

mod auth;
mod events;
mod frames;
mod health;
mod instances;
mod labels;
mod metrics;
mod query;
mod response;
mod routes;
mod state;
mod tls;

use std::net::{SocketAddr, TcpListener as StdTcpListener};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use lookout_core::Hub;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use self::metrics::Metrics;
pub use self::tls::TlsFiles;

/// How long a client may take to send a request's head (slowloris), and,
/// over TLS, to complete its handshake before that.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// The most a request's head may take, in bytes (hyper's read buffer).
const MAX_HEAD_BYTES: usize = 16 * 1024;
/// The most header fields a request may have.
const MAX_HEADERS: usize = 64;
/// The most connections open at once by default (`--max-connections`);
/// more wait in the listen backlog.
pub const MAX_CONNECTIONS: usize = 4096;
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
        let bound = listener
            .local_addr()
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

    /// Whether clients need a certificate (`--serve-client-ca`).
    pub fn requires_client_cert(&self) -> bool {
        self.tls
            .as_ref()
            .is_some_and(tls::Loaded::requires_client_cert)
    }
}

/// A running server.
#[derive(Debug)]
pub struct Server {
    shutdown: CancellationToken,
    tracker: TaskTracker,
}

impl Server {
    /// Serves `hubs` on the prepared socket until [`Server::shutdown`]: one
    /// `(None, hub)`, or several engines, each `(Some(name), hub)`; with
    /// the publishers' statuses of the one hub of `lookout etcd`.
    pub fn start(
        prepared: Prepared,
        hubs: &[(Option<Arc<str>>, Hub)],
        publishers: Option<&lookout_etcd::Publishers>,
        provider: &'static str,
        readiness: bool,
        queue: usize,
    ) -> std::io::Result<Self> {
        let listener = TcpListener::from_std(prepared.listener)?;
        let tls = prepared.tls.map(tls::Reloader::new).transpose()?;
        let shutdown = CancellationToken::new();
        let tracker = TaskTracker::new();
        let epoch = frames::Frames::epoch();
        let engines: Vec<state::ServedEngine> = hubs
            .iter()
            .map(|(host, hub)| state::ServedEngine {
                host: host.clone(),
                hub: hub.clone(),
                store: hub.store(),
                frames: Arc::new(frames::Frames::new(provider, host.clone(), queue, epoch)),
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
        let router = routes::router(state, prepared.token.map(Arc::new));
        tracker.spawn(accept_loop(
            listener,
            prepared.max_connections,
            router,
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
    mut tls: Option<tls::Reloader>,
    shutdown: CancellationToken,
    tracker: TaskTracker,
) {
    let permits = Arc::new(Semaphore::new(max_connections));
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT)
        .max_buf_size(MAX_HEAD_BYTES)
        .max_headers(MAX_HEADERS)
        .keep_alive(true);
    let http = Arc::new(http);
    loop {
        let permit = tokio::select! {
            () = shutdown.cancelled() => break,
            permit = Arc::clone(&permits).acquire_owned() => match permit {
                Ok(p) => p,
                Err(_) => break,
            },
        };
        let (stream, peer) = tokio::select! {
            () = shutdown.cancelled() => break,
            trigger = tls::due(&mut tls) => {
                // Reloaded or not, accept again (the permit is taken anew).
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
        // Events are small and latency matters more than segment count.
        let _ = stream.set_nodelay(true);
        let socket = socket2::SockRef::from(&stream);
        if let Err(e) = socket.set_send_buffer_size(SEND_BUFFER) {
            tracing::debug!(%peer, "cannot bound the send buffer: {e}");
        }
        let keepalive = socket2::TcpKeepalive::new()
            .with_time(TCP_KEEPALIVE_IDLE)
            .with_interval(TCP_KEEPALIVE_INTERVAL);
        if let Err(e) = socket.set_tcp_keepalive(&keepalive) {
            tracing::debug!(%peer, "cannot turn TCP keep-alive on: {e}");
        }
        let service = TowerToHyperService::new(router.clone());
        // The configuration in use now; a reload after this is for later connections.
        let acceptor = tls.as_ref().map(tls::Reloader::acceptor);
        let http = Arc::clone(&http);
        let shutdown = shutdown.clone();
        // The binary may spawn (one task per connection); the library crates never do.
        tracker.spawn(async move {
            let _permit = permit;
            // The TLS handshake here, not in the accept loop: a client that
            // stalls in it delays no other.
            let io = tokio::select! {
                io = tls::Io::open(stream, acceptor, HEADER_READ_TIMEOUT, peer) => io,
                () = shutdown.cancelled() => None,
            };
            let Some(io) = io else { return };
            let conn = http.serve_connection(TokioIo::new(io), service);
            let mut conn = std::pin::pin!(conn);
            let result = tokio::select! {
                r = conn.as_mut() => r,
                () = shutdown.cancelled() => {
                    // Open `/events` bodies end on the same token; idle
                    // keep-alive connections close now.
                    conn.as_mut().graceful_shutdown();
                    conn.await
                }
            };
            if let Err(e) = result {
                tracing::debug!(%peer, "connection ended: {e}");
            }
        });
    }
    tracing::debug!("no longer accepting connections");
}
