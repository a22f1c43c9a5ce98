//! An etcd v3 client over the JSON gateway (`POST /v3/...`), on hyper: one
//! HTTP/1.1 request per connection of its own, driven by whoever polls it
//! (no pool, no spawned connection task; dropping a request or a watch closes
//! its socket). Every request goes to the preferred endpoint, and on a
//! connection failure, a timeout or a 5xx answer to the next one, which
//! becomes the preferred.
//!
//! With [`Credentials`], the client authenticates (`/v3/auth/authenticate`)
//! before its first request and sends the token etcd gave as the
//! `Authorization` header of every request, the watch's too; a request
//! refused because the token is invalid (expired: etcd's simple tokens live
//! `--auth-token-ttl` after their last use) authenticates again and is sent
//! once more.
//!
//! `https://` endpoints speak TLS (rustls, set up by
//! [`lookout_moby::client_config_from_files`]): the member's certificate is
//! verified against the CA certificates of a [`Tls`], which may also hold a
//! client certificate and key for etcd's `--client-cert-auth`.

use std::fmt;
use std::future::{Future, poll_fn};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http::{Request, StatusCode, header};
use http_body_util::Full;
use hyper::body::{Body, Incoming};
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use serde::de::DeserializeOwned;
use serde_json::json;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_rustls::rustls::ClientConfig;

use crate::error::{ConfigError, EtcdError};
use crate::wire::{
    GatewayError, Header, LeaseGrant, RangeResponse, WatchCreate, WatchLine, WatchResponse, b64,
};

/// etcd's message for a token it does not know (expired, or from before a
/// restart of the member).
const INVALID_TOKEN: &str = "invalid auth token";
/// Where a user's password is exchanged for a token.
const AUTHENTICATE: &str = "/v3/auth/authenticate";
/// etcd's answer to an authentication while auth is disabled.
const AUTH_NOT_ENABLED: &str = "authentication is not enabled";
/// etcd's message for a request without a user while auth is enabled.
const USER_EMPTY: &str = "user name is empty";
/// gRPC's `Unauthenticated`.
const UNAUTHENTICATED: i32 = 16;

/// The largest unary answer read (a range page is far below it).
const ANSWER_LIMIT: usize = 64 * 1024 * 1024;
/// The largest watch line (one revision's events with their previous values).
const LINE_LIMIT: usize = 64 * 1024 * 1024;

/// A user's name and password for etcd's authentication. `Debug` shows the
/// name only.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    user: String,
    password: String,
}

impl Credentials {
    /// `user` with `password`.
    pub fn new(user: impl Into<String>, password: impl Into<String>) -> Self {
        Self {
            user: user.into(),
            password: password.into(),
        }
    }

    /// `user` with the password in the file at `path` (its first line,
    /// without the line's end): a password is never a command-line argument.
    pub fn from_file(user: impl Into<String>, path: &std::path::Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::PasswordFile {
            path: path.to_owned(),
            source,
        })?;
        let password = text.lines().next().unwrap_or_default();
        Ok(Self::new(user, password))
    }

    /// The user's name.
    pub fn user(&self) -> &str {
        &self.user
    }
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("user", &self.user)
            .field("password", &"<redacted>")
            .finish()
    }
}

/// The credentials of a client and the token etcd gave for them (shared
/// by the client's clones).
struct Auth {
    credentials: Credentials,
    token: Mutex<Option<Arc<str>>>,
}

impl Auth {
    fn token(&self) -> Option<Arc<str>> {
        self.token
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn set_token(&self, token: Arc<str>) {
        *self.token.lock().unwrap_or_else(PoisonError::into_inner) = Some(token);
    }
}

/// TLS for `https://` endpoints: the CA certificates members are verified
/// against and, optionally, a client certificate and key (etcd's
/// `--client-cert-auth`). The PEM files are read once, by
/// [`Tls::from_files`]; `Debug` names the files, never their content.
#[derive(Clone)]
pub struct Tls {
    config: Arc<ClientConfig>,
    ca: PathBuf,
    cert: Option<PathBuf>,
}

impl Tls {
    /// Verifies members against the CA certificates in the PEM file `ca`,
    /// showing the certificate chain and private key of the PEM files
    /// `identity` (certificate, key) when given.
    pub fn from_files(ca: &Path, identity: Option<(&Path, &Path)>) -> Result<Self, ConfigError> {
        let config = lookout_moby::client_config_from_files(ca, identity)
            .map_err(|e| ConfigError::Tls(e.to_string()))?;
        Ok(Self {
            config,
            ca: ca.to_owned(),
            cert: identity.map(|(cert, _)| cert.to_owned()),
        })
    }
}

impl fmt::Debug for Tls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tls")
            .field("ca", &self.ca)
            .field("cert", &self.cert)
            .finish_non_exhaustive()
    }
}

/// A connected socket: plain TCP, or TLS over it.
trait Socket: AsyncRead + AsyncWrite + Send + Unpin {}

impl<T: AsyncRead + AsyncWrite + Send + Unpin> Socket for T {}

/// `/v3/auth/authenticate`'s answer.
#[derive(serde::Deserialize)]
struct Authenticated {
    #[serde(default)]
    token: String,
}

/// One member's client address: `http://HOST:PORT`, or `https://HOST:PORT`
/// (TLS).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    host: String,
    port: u16,
    tls: bool,
}

impl Endpoint {
    /// Parses `http://HOST[:PORT]`, `https://HOST[:PORT]` or `HOST[:PORT]`
    /// (port 2379 by default).
    pub fn parse(s: &str) -> Result<Self, ConfigError> {
        let bad = |why: &str| ConfigError::Endpoint {
            endpoint: s.to_owned(),
            why: why.to_owned(),
        };
        let t = s.trim();
        let (t, tls) = match t.strip_prefix("https://") {
            Some(rest) => (rest, true),
            None => (t.strip_prefix("http://").unwrap_or(t), false),
        };
        let t = t.trim_end_matches('/');
        if t.is_empty() || t.contains('/') || t.contains("://") {
            return Err(bad(
                "expected http://HOST:PORT, https://HOST:PORT or HOST:PORT",
            ));
        }
        let (host, port) = match t.rsplit_once(':') {
            // `[::1]:2379`, `host:2379`; a bare IPv6 address has more colons.
            Some((h, p)) if !h.contains(':') || h.ends_with(']') => {
                let port = p.parse().map_err(|_| bad("the port is no number"))?;
                (h, port)
            }
            _ => (t, 2379),
        };
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if host.is_empty() {
            return Err(bad("no host"));
        }
        Ok(Self {
            host: host.to_owned(),
            port,
            tls,
        })
    }

    /// The same member over TLS (`https://`).
    #[must_use]
    pub fn with_tls(mut self) -> Self {
        self.tls = true;
        self
    }

    /// Whether it is an `https://` endpoint.
    pub fn is_tls(&self) -> bool {
        self.tls
    }

    /// Parses a comma-separated list (empty items skipped); at least one.
    pub fn parse_list(s: &str) -> Result<Vec<Self>, ConfigError> {
        let list = s
            .split(',')
            .filter(|e| !e.trim().is_empty())
            .map(Self::parse)
            .collect::<Result<Vec<_>, _>>()?;
        if list.is_empty() {
            return Err(ConfigError::NoEndpoint);
        }
        Ok(list)
    }

    fn authority(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let scheme = if self.tls { "https" } else { "http" };
        write!(f, "{scheme}://{}", self.authority())
    }
}

/// A request body: given whole, with its length. (The gateway cannot take
/// more requests on an open body: over HTTP/1.1, Go's server holds the
/// response until the request body ends, so a watch sends its one create
/// request whole.)
type RequestBody = Full<Bytes>;

type Connection = http1::Connection<TokioIo<Box<dyn Socket>>, RequestBody>;

/// A response being read, with the connection that carries it (polled
/// whenever the body is; dropping the exchange closes the socket).
struct Exchange {
    status: StatusCode,
    body: Incoming,
    conn: Option<Connection>,
    _sender: http1::SendRequest<RequestBody>,
}

impl Exchange {
    fn poll_chunk(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Bytes, hyper::Error>>> {
        loop {
            match Pin::new(&mut self.body).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Ok(data) if data.is_empty() => {}
                    Ok(data) => return Poll::Ready(Some(Ok(data))),
                    Err(_trailers) => {}
                },
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e))),
                Poll::Ready(None) => return Poll::Ready(None),
                Poll::Pending => {
                    let Some(conn) = self.conn.as_mut() else {
                        return Poll::Pending;
                    };
                    match Pin::new(conn).poll(cx) {
                        Poll::Ready(Ok(())) => self.conn = None,
                        Poll::Ready(Err(e)) => {
                            self.conn = None;
                            return Poll::Ready(Some(Err(e)));
                        }
                        Poll::Pending => return Poll::Pending,
                    }
                }
            }
        }
    }

    async fn chunk(&mut self) -> Option<Result<Bytes, hyper::Error>> {
        poll_fn(|cx| self.poll_chunk(cx)).await
    }
}

/// An answer of which only the header is read (put, delete, compaction).
#[derive(serde::Deserialize)]
struct HeaderOnly {
    #[serde(default)]
    header: Header,
}

/// `GET /health`'s answer.
#[derive(serde::Deserialize)]
struct Health {
    #[serde(default)]
    health: String,
    #[serde(default)]
    reason: String,
}

/// What [`Client::newest_modification`] read, at one revision.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Newest {
    /// The mod revision of the newest put among the range's keys (0: none).
    pub put: i64,
    /// How many keys the range holds.
    pub keys: i64,
    /// The store's revision it was read at.
    pub revision: i64,
}

/// An etcd v3 client over the JSON gateway of one cluster's members.
/// Cloning is cheap; clones share the preferred endpoint.
#[derive(Clone)]
pub struct Client {
    endpoints: Arc<[Endpoint]>,
    preferred: Arc<AtomicUsize>,
    timeout: Duration,
    auth: Option<Arc<Auth>>,
    tls: Option<Tls>,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("endpoints", &self.endpoints)
            .field("preferred", &self.preferred.load(Ordering::Relaxed))
            .field("timeout", &self.timeout)
            .field("tls", &self.tls)
            .field(
                "user",
                &self.auth.as_ref().map(|a| a.credentials.user.as_str()),
            )
            .finish()
    }
}

impl Client {
    /// A client of `endpoints` (one cluster's members), each request bounded
    /// by `timeout` (connect and answer; a watch: connect and response head).
    pub fn new(endpoints: Vec<Endpoint>, timeout: Duration) -> Result<Self, ConfigError> {
        if endpoints.is_empty() {
            return Err(ConfigError::NoEndpoint);
        }
        Ok(Self {
            endpoints: endpoints.into(),
            preferred: Arc::new(AtomicUsize::new(0)),
            timeout,
            auth: None,
            tls: None,
        })
    }

    /// The client authenticating with `credentials` (`None`: none).
    #[must_use]
    pub fn with_credentials(mut self, credentials: Option<Credentials>) -> Self {
        self.auth = credentials.map(|credentials| {
            Arc::new(Auth {
                credentials,
                token: Mutex::new(None),
            })
        });
        self
    }

    /// The client verifying `https://` endpoints with `tls` (`None`: an
    /// `https://` endpoint cannot be used, for want of a CA to verify it).
    #[must_use]
    pub fn with_tls(mut self, tls: Option<Tls>) -> Self {
        self.tls = tls;
        self
    }

    /// Opens a socket to `endpoint`: TCP, and TLS over it for `https://`.
    async fn connect(&self, endpoint: &Endpoint) -> Result<Box<dyn Socket>, EtcdError> {
        let connect_error = |source| EtcdError::Connect {
            endpoint: endpoint.to_string(),
            source,
        };
        let tcp = TcpStream::connect((endpoint.host.as_str(), endpoint.port))
            .await
            .map_err(connect_error)?;
        tcp.set_nodelay(true).map_err(connect_error)?;
        if !endpoint.tls {
            return Ok(Box::new(tcp));
        }
        let tls_error = |why: String| EtcdError::Tls {
            endpoint: endpoint.to_string(),
            why,
        };
        let tls = self.tls.as_ref().ok_or_else(|| {
            tls_error("no CA certificate to verify the member with (give a CA file)".to_owned())
        })?;
        let name = rustls_pki_types::ServerName::try_from(endpoint.host.clone())
            .map_err(|e| tls_error(format!("not a TLS server name: {e}")))?;
        let stream = tokio_rustls::TlsConnector::from(Arc::clone(&tls.config))
            .connect(name, tcp)
            .await
            .map_err(|e| tls_error(format!("TLS handshake: {e}")))?;
        Ok(Box::new(stream))
    }

    /// Authenticates (`/v3/auth/authenticate`, failing over) and keeps the
    /// token for the requests that follow.
    async fn authenticate(&self) -> Result<(), EtcdError> {
        let Some(auth) = &self.auth else {
            return Ok(());
        };
        let path = AUTHENTICATE;
        let body = Bytes::from(
            json!({ "name": auth.credentials.user, "password": auth.credentials.password })
                .to_string(),
        );
        let token = match self
            .failover(path, |i| {
                self.unary_at::<Authenticated>(i, path, Some(&body))
            })
            .await
        {
            Ok(answer) => answer.token,
            // An etcd without auth takes requests without a token (an empty
            // one is sent as none); once auth is enabled, they are refused
            // as `AuthRequired`, which authenticates again.
            Err(EtcdError::Status { message, .. }) if message.contains(AUTH_NOT_ENABLED) => {
                String::new()
            }
            Err(source) => {
                return Err(EtcdError::Authenticate {
                    user: auth.credentials.user.clone(),
                    source: Box::new(source),
                });
            }
        };
        auth.set_token(token.into());
        Ok(())
    }

    /// `op` with a token when the client has credentials: authenticated
    /// first when there is none yet, and once again (then `op` once more)
    /// when etcd says the token is invalid, or that it needs one (auth
    /// enabled since).
    async fn authed<T, F, Fut>(&self, mut op: F) -> Result<T, EtcdError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, EtcdError>>,
    {
        let Some(auth) = &self.auth else {
            return op().await;
        };
        if auth.token().is_none() {
            self.authenticate().await?;
        }
        match op().await {
            Err(e) if e.is_invalid_token() || matches!(e, EtcdError::AuthRequired { .. }) => {
                tracing::debug!(user = auth.credentials.user, error = %e, "etcd refused the auth token; authenticating again");
                self.authenticate().await?;
                op().await
            }
            r => r,
        }
    }

    /// The members' endpoints.
    pub fn endpoints(&self) -> &[Endpoint] {
        &self.endpoints
    }

    /// The endpoint requests go to first (the last that answered).
    pub fn preferred(&self) -> &Endpoint {
        &self.endpoints[self.preferred.load(Ordering::Relaxed) % self.endpoints.len()]
    }

    /// One request to endpoint `i`: connect, send, await the response head.
    async fn send(
        &self,
        i: usize,
        method: http::Method,
        path: &str,
        body: RequestBody,
    ) -> Result<Exchange, EtcdError> {
        let endpoint = &self.endpoints[i];
        let attempt = async {
            let socket = self.connect(endpoint).await?;
            let http_error = |source| EtcdError::Http {
                endpoint: endpoint.to_string(),
                path: path.to_owned(),
                source,
            };
            let (mut sender, mut conn) = http1::handshake(TokioIo::new(socket))
                .await
                .map_err(http_error)?;
            let request = Request::builder()
                .method(method)
                .uri(path)
                .header(header::HOST, endpoint.authority())
                .header(header::CONTENT_TYPE, "application/json")
                .header(
                    header::USER_AGENT,
                    concat!("lookout/", env!("CARGO_PKG_VERSION")),
                );
            // The token, with every request but the one that asks for it.
            let token = self.auth.as_ref().and_then(|a| a.token());
            let request = match token {
                Some(token) if !token.is_empty() && path != AUTHENTICATE => {
                    request.header(header::AUTHORIZATION, &*token)
                }
                _ => request,
            };
            let request = request
                .body(body)
                .map_err(|e| EtcdError::Request(e.to_string()))?;
            let mut response = std::pin::pin!(sender.send_request(request));
            let mut conn_done = false;
            let response = poll_fn(|cx| {
                if let Poll::Ready(r) = response.as_mut().poll(cx) {
                    return Poll::Ready(r);
                }
                if !conn_done {
                    match Pin::new(&mut conn).poll(cx) {
                        Poll::Ready(Ok(())) => {
                            conn_done = true;
                            cx.waker().wake_by_ref();
                        }
                        Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                        Poll::Pending => {}
                    }
                }
                Poll::Pending
            })
            .await
            .map_err(http_error)?;
            let status = response.status();
            Ok(Exchange {
                status,
                body: response.into_body(),
                conn: (!conn_done).then_some(conn),
                _sender: sender,
            })
        };
        tokio::time::timeout(self.timeout, attempt)
            .await
            .map_err(|_| EtcdError::Timeout {
                endpoint: endpoint.to_string(),
                path: path.to_owned(),
                timeout: self.timeout,
            })?
    }

    /// `work` within the request timeout.
    async fn bounded<T>(
        &self,
        endpoint: &str,
        path: &str,
        work: impl Future<Output = Result<T, EtcdError>>,
    ) -> Result<T, EtcdError> {
        tokio::time::timeout(self.timeout, work)
            .await
            .map_err(|_| EtcdError::Timeout {
                endpoint: endpoint.to_owned(),
                path: path.to_owned(),
                timeout: self.timeout,
            })?
    }

    /// Tries each endpoint from the preferred one with `attempt`, until one
    /// answers or fails with an error another member would not fix.
    async fn failover<T, F, Fut>(&self, path: &str, mut attempt: F) -> Result<T, EtcdError>
    where
        F: FnMut(usize) -> Fut,
        Fut: Future<Output = Result<T, EtcdError>>,
    {
        let n = self.endpoints.len();
        let first = self.preferred.load(Ordering::Relaxed) % n;
        let mut last = None;
        for k in 0..n {
            let i = (first + k) % n;
            match attempt(i).await {
                Ok(v) => {
                    self.preferred.store(i, Ordering::Relaxed);
                    return Ok(v);
                }
                Err(e) if e.fails_over() => {
                    tracing::debug!(endpoint = %self.endpoints[i], path, error = %e, "etcd member failed; trying the next");
                    last = Some(e);
                }
                Err(e) => return Err(e),
            }
        }
        // The next call starts with another member.
        self.preferred.store((first + 1) % n, Ordering::Relaxed);
        Err(EtcdError::Unreachable {
            tried: self
                .endpoints
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", "),
            last: Box::new(last.unwrap_or(EtcdError::Request("no endpoint".into()))),
        })
    }

    /// One unary call on endpoint `i`: the decoded answer of a 2xx, else
    /// the gateway's error.
    async fn unary_at<T: DeserializeOwned>(
        &self,
        i: usize,
        path: &str,
        body: Option<&Bytes>,
    ) -> Result<T, EtcdError> {
        let endpoint = self.endpoints[i].to_string();
        let read = async {
            let (method, body) = match body {
                Some(b) => (http::Method::POST, b.clone()),
                None => (http::Method::GET, Bytes::new()),
            };
            let mut ex = self.send(i, method, path, Full::new(body)).await?;
            let mut all = BytesMut::new();
            while let Some(chunk) = ex.chunk().await {
                let chunk = chunk.map_err(|source| EtcdError::Http {
                    endpoint: endpoint.clone(),
                    path: path.to_owned(),
                    source,
                })?;
                if all.len() + chunk.len() > ANSWER_LIMIT {
                    return Err(EtcdError::TooLarge {
                        endpoint: endpoint.clone(),
                        path: path.to_owned(),
                        limit: ANSWER_LIMIT,
                    });
                }
                all.extend_from_slice(&chunk);
            }
            Ok((ex.status, all))
        };
        let (status, all) = self.bounded(&endpoint, path, read).await?;
        if !status.is_success() {
            let e: GatewayError = serde_json::from_slice(&all).unwrap_or_else(|_| GatewayError {
                code: 0,
                message: String::from_utf8_lossy(&all[..all.len().min(512)])
                    .trim()
                    .to_owned(),
            });
            if e.message.contains(USER_EMPTY) {
                return Err(EtcdError::AuthRequired {
                    endpoint,
                    path: path.to_owned(),
                    message: e.message,
                });
            }
            return Err(EtcdError::Status {
                endpoint,
                path: path.to_owned(),
                status: status.as_u16(),
                code: e.code,
                message: e.message,
            });
        }
        serde_json::from_slice(&all).map_err(|source| EtcdError::Decode {
            endpoint,
            path: path.to_owned(),
            source,
        })
    }

    /// `POST path` with `body`, failing over.
    async fn unary<T: DeserializeOwned>(
        &self,
        path: &str,
        body: &serde_json::Value,
    ) -> Result<T, EtcdError> {
        let body = Bytes::from(body.to_string());
        let body = &body;
        self.authed(|| self.failover(path, move |i| self.unary_at(i, path, Some(body))))
            .await
    }

    /// `range`: the keys in `[key, range_end)` (`range_end` empty: `key`
    /// alone) at `revision` (0: the newest), at most `limit` (0: all).
    pub async fn range(
        &self,
        key: &[u8],
        range_end: &[u8],
        revision: i64,
        limit: i64,
    ) -> Result<RangeResponse, EtcdError> {
        let mut body = json!({ "key": b64(key) });
        if !range_end.is_empty() {
            body["range_end"] = b64(range_end).into();
        }
        if revision > 0 {
            body["revision"] = revision.to_string().into();
        }
        if limit > 0 {
            body["limit"] = limit.to_string().into();
        }
        self.unary("/v3/kv/range", &body).await
    }

    /// The newest modification among the keys in `[key, range_end)` (its
    /// mod revision, 0 when there is no key), how many keys the range
    /// holds, and the store's revision they were read at: one request.
    pub async fn newest_modification(
        &self,
        key: &[u8],
        range_end: &[u8],
    ) -> Result<Newest, EtcdError> {
        let body = json!({
            "key": b64(key),
            "range_end": b64(range_end),
            "limit": "1",
            "sort_order": "DESCEND",
            "sort_target": "MOD",
            "keys_only": true,
        });
        let r: RangeResponse = self.unary("/v3/kv/range", &body).await?;
        Ok(Newest {
            put: r.kvs.first().map_or(0, |kv| kv.mod_revision),
            keys: r.count,
            revision: r.header.revision,
        })
    }

    /// `put` of `key` = `value` (with `lease` when not 0).
    pub async fn put(&self, key: &[u8], value: &[u8], lease: i64) -> Result<Header, EtcdError> {
        let mut body = json!({ "key": b64(key), "value": b64(value) });
        if lease != 0 {
            body["lease"] = lease.to_string().into();
        }
        let p: HeaderOnly = self.unary("/v3/kv/put", &body).await?;
        Ok(p.header)
    }

    /// `deleterange` of `key` alone.
    pub async fn delete(&self, key: &[u8]) -> Result<Header, EtcdError> {
        self.delete_range(key, &[]).await
    }

    /// `deleterange` of `[key, range_end)` (`range_end` empty: `key` alone).
    pub async fn delete_range(&self, key: &[u8], range_end: &[u8]) -> Result<Header, EtcdError> {
        let mut body = json!({ "key": b64(key) });
        if !range_end.is_empty() {
            body["range_end"] = b64(range_end).into();
        }
        let d: HeaderOnly = self.unary("/v3/kv/deleterange", &body).await?;
        Ok(d.header)
    }

    /// `txn`: `request` is the gateway's JSON `TxnRequest` (`compare`,
    /// `success`, `failure`); its JSON answer.
    pub async fn txn(&self, request: &serde_json::Value) -> Result<serde_json::Value, EtcdError> {
        self.unary("/v3/kv/txn", request).await
    }

    /// Compacts the store's history up to `revision` (physically).
    pub async fn compact(&self, revision: i64) -> Result<Header, EtcdError> {
        let c: HeaderOnly = self
            .unary(
                "/v3/kv/compaction",
                &json!({ "revision": revision.to_string(), "physical": true }),
            )
            .await?;
        Ok(c.header)
    }

    /// Grants a lease of `ttl` seconds.
    pub async fn lease_grant(&self, ttl: i64) -> Result<LeaseGrant, EtcdError> {
        self.unary("/v3/lease/grant", &json!({ "TTL": ttl.to_string() }))
            .await
    }

    /// `GET /health` (a GET: POST is refused) of the preferred member only (no failover): `Ok` when
    /// it says `"health":"true"`, which needs a leader.
    pub async fn health(&self) -> Result<(), EtcdError> {
        self.health_of(self.preferred.load(Ordering::Relaxed)).await
    }

    /// `GET /health` of `member` (an index of [`Client::endpoints`]), as
    /// [`Client::health`].
    pub(crate) async fn health_of(&self, member: usize) -> Result<(), EtcdError> {
        let i = member % self.endpoints.len();
        let h: Health = self.unary_at(i, "/health", None).await?;
        if h.health == "true" {
            Ok(())
        } else {
            Err(EtcdError::Unhealthy {
                endpoint: self.endpoints[i].to_string(),
                reason: h.reason,
            })
        }
    }

    /// Renews lease `id` once (`POST /v3/lease/keepalive`, a stream of which
    /// the first answer is read); its remaining TTL in seconds (0: the lease
    /// is gone).
    pub async fn lease_keepalive(&self, id: i64) -> Result<i64, EtcdError> {
        #[derive(serde::Deserialize)]
        struct KeepAlive {
            #[serde(default)]
            result: Option<LeaseGrant>,
            #[serde(default)]
            error: Option<GatewayError>,
        }
        let path = "/v3/lease/keepalive";
        let body = Bytes::from(json!({ "ID": id.to_string() }).to_string());
        let body = &body;
        self.authed(|| {
            self.failover(path, move |i| {
                let body = body.clone();
                async move {
                    let endpoint = self.endpoints[i].to_string();
                    let read = async {
                        let mut ex = self
                            .send(i, http::Method::POST, path, Full::new(body))
                            .await?;
                        let mut all = BytesMut::new();
                        while !all.contains(&b'\n') {
                            match ex.chunk().await {
                                Some(Ok(chunk)) if all.len() < 64 * 1024 => {
                                    all.extend_from_slice(&chunk);
                                }
                                Some(Ok(_)) | None => break,
                                Some(Err(source)) => {
                                    return Err(EtcdError::Http {
                                        endpoint: endpoint.clone(),
                                        path: path.to_owned(),
                                        source,
                                    });
                                }
                            }
                        }
                        Ok(all)
                    };
                    let all = self.bounded(&endpoint, path, read).await?;
                    let line = all[..].split(|b| *b == b'\n').next().unwrap_or_default();
                    let k: KeepAlive =
                        serde_json::from_slice(line).map_err(|source| EtcdError::Decode {
                            endpoint: endpoint.clone(),
                            path: path.to_owned(),
                            source,
                        })?;
                    match (k.result, k.error) {
                        (_, Some(e)) if e.message.contains(USER_EMPTY) => {
                            Err(EtcdError::AuthRequired {
                                endpoint,
                                path: path.to_owned(),
                                message: e.message,
                            })
                        }
                        (_, Some(e)) => Err(EtcdError::WatchError {
                            endpoint,
                            code: e.code,
                            message: e.message,
                        }),
                        (Some(r), None) => Ok(r.ttl),
                        (None, None) => Ok(0),
                    }
                }
            })
        })
        .await
    }

    /// Opens a watch (`POST /v3/watch` with `create`), failing over; resolves
    /// when the response head arrived. The first lines say `created`, or
    /// `canceled` with `compact_revision`.
    pub(crate) async fn watch(&self, create: &WatchCreate) -> Result<WatchStream, EtcdError> {
        let first = Bytes::from(json!({ "create_request": create }).to_string());
        let first = &first;
        let path = "/v3/watch";
        self.authed(|| {
            self.failover(path, move |i| {
                let first = first.clone();
                async move {
                    let ex = self
                        .send(i, http::Method::POST, path, Full::new(first))
                        .await?;
                    let endpoint = self.endpoints[i].to_string();
                    if !ex.status.is_success() {
                        return Err(EtcdError::Status {
                            endpoint,
                            path: path.to_owned(),
                            status: ex.status.as_u16(),
                            code: 0,
                            message: "the watch was refused".to_owned(),
                        });
                    }
                    let mut stream = WatchStream {
                        exchange: ex,
                        buf: BytesMut::new(),
                        endpoint,
                        member: i,
                    };
                    if self.auth.is_some() {
                        // A watch whose token is refused is created and canceled
                        // at once (HTTP 200): told as the refusal it is, so that
                        // `authed` authenticates again.
                        let endpoint = stream.endpoint.clone();
                        let first = self.bounded(&endpoint, path, stream.peek_line()).await?;
                        if let Ok(WatchLine {
                            result: Some(r), ..
                        }) = serde_json::from_slice::<WatchLine>(&first)
                            && r.canceled
                            && r.cancel_reason.contains(INVALID_TOKEN)
                        {
                            return Err(EtcdError::Status {
                                endpoint,
                                path: path.to_owned(),
                                status: 401,
                                code: UNAUTHENTICATED,
                                message: r.cancel_reason,
                            });
                        }
                    }
                    Ok(stream)
                }
            })
        })
        .await
    }
}

/// What one line of a watch stream says.
#[derive(Debug)]
pub(crate) enum Line {
    /// A watch response.
    Response(WatchResponse),
    /// A line that is no watch response (logged; the feed goes on).
    Undecodable(String),
}

/// An open watch: its NDJSON lines. Dropping it closes the connection.
pub(crate) struct WatchStream {
    exchange: Exchange,
    buf: BytesMut,
    endpoint: String,
    /// Its index in [`Client::endpoints`].
    member: usize,
}

impl WatchStream {
    /// The first line (kept to be read again by [`Self::next`]); empty when
    /// the stream ended before one.
    async fn peek_line(&mut self) -> Result<Bytes, EtcdError> {
        loop {
            if let Some(pos) = self.buf.iter().position(|b| *b == b'\n') {
                return Ok(Bytes::copy_from_slice(&self.buf[..pos]));
            }
            if self.buf.len() > LINE_LIMIT {
                return Ok(Bytes::new());
            }
            if !self.fill().await? {
                return Ok(Bytes::copy_from_slice(&self.buf));
            }
        }
    }

    /// Reads the next chunk into the buffer: `false` when the stream ended.
    async fn fill(&mut self) -> Result<bool, EtcdError> {
        match self.exchange.chunk().await {
            Some(Ok(chunk)) => {
                self.buf.extend_from_slice(&chunk);
                Ok(true)
            }
            Some(Err(source)) => Err(EtcdError::Http {
                endpoint: self.endpoint.clone(),
                path: "/v3/watch".to_owned(),
                source,
            }),
            None => Ok(false),
        }
    }

    /// The member this watch is on.
    pub(crate) fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The member this watch is on, as an index of [`Client::endpoints`].
    pub(crate) fn member(&self) -> usize {
        self.member
    }

    /// The next line: `None` when the stream ended.
    pub(crate) async fn next(&mut self) -> Result<Option<Line>, EtcdError> {
        loop {
            if let Some(pos) = self.buf.iter().position(|b| *b == b'\n') {
                let line = self.buf.split_to(pos + 1);
                let line = line.trim_ascii();
                if line.is_empty() {
                    continue;
                }
                return match serde_json::from_slice::<WatchLine>(line) {
                    Ok(WatchLine { error: Some(e), .. }) => Err(EtcdError::WatchError {
                        endpoint: self.endpoint.clone(),
                        code: e.code,
                        message: e.message,
                    }),
                    Ok(WatchLine {
                        result: Some(r), ..
                    }) => Ok(Some(Line::Response(r))),
                    Ok(_) => Ok(Some(Line::Undecodable("neither result nor error".into()))),
                    Err(e) => Ok(Some(Line::Undecodable(e.to_string()))),
                };
            }
            if self.buf.len() > LINE_LIMIT {
                return Err(EtcdError::TooLarge {
                    endpoint: self.endpoint.clone(),
                    path: "/v3/watch".to_owned(),
                    limit: LINE_LIMIT,
                });
            }
            if !self.fill().await? {
                if self.buf.trim_ascii().is_empty() {
                    return Ok(None);
                }
                // A last line without its newline.
                self.buf.extend_from_slice(b"\n");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_read_their_file_and_never_show_the_password() {
        let path = std::env::temp_dir().join(format!("lookout-etcd-pw-{}", std::process::id()));
        std::fs::write(&path, "pa ss\nignored\n").expect("written");
        let c = Credentials::from_file("ops", &path).expect("read");
        let _ = std::fs::remove_file(&path);
        assert_eq!(c, Credentials::new("ops", "pa ss"));
        assert_eq!(c.user(), "ops");
        let shown = format!("{c:?}");
        assert!(shown.contains("ops") && !shown.contains("pa ss"), "{shown}");
        let client = Client::new(
            vec![Endpoint::parse("x:1").expect("parses")],
            Duration::from_secs(1),
        )
        .expect("a client")
        .with_credentials(Some(c));
        assert!(!format!("{client:?}").contains("pa ss"));
        assert!(matches!(
            Credentials::from_file("ops", std::path::Path::new("/nonexistent/pw")),
            Err(ConfigError::PasswordFile { .. })
        ));
    }

    #[test]
    fn endpoints_parse() {
        let list =
            Endpoint::parse_list("http://127.0.0.1:12371, 127.0.0.1:12372,,etcd").expect("parses");
        let shown: Vec<String> = list.iter().map(ToString::to_string).collect();
        assert_eq!(
            shown,
            [
                "http://127.0.0.1:12371",
                "http://127.0.0.1:12372",
                "http://etcd:2379"
            ]
        );
        assert_eq!(
            Endpoint::parse("[::1]:2379").map(|e| e.to_string()).ok(),
            Some("http://[::1]:2379".to_owned())
        );
        assert_eq!(
            Endpoint::parse("https://x:2379")
                .map(|e| e.to_string())
                .ok(),
            Some("https://x:2379".to_owned())
        );
        assert!(Endpoint::parse("https://x:2379").is_ok_and(|e| e.is_tls()));
        assert!(Endpoint::parse("ftp://x:2379").is_err());
        assert!(Endpoint::parse("http://x:port").is_err());
        assert!(Endpoint::parse("http://x:1/path").is_err());
        assert!(matches!(
            Endpoint::parse_list(" , "),
            Err(ConfigError::NoEndpoint)
        ));
    }
}
