//! The client of a cluster's JSON gateway (`POST /v3/...`), [`Client`], on
//! `lookout-transport`: one HTTP/1.1 request per connection of its own,
//! driven by whoever polls it (no pool, no spawned connection task;
//! dropping a request or a watch closes its socket). Every request goes to
//! the preferred endpoint, and on a connection failure, a timeout or a 5xx
//! answer to the next one, which becomes the preferred.
//!
//! With [`Credentials`], the client authenticates (`/v3/auth/authenticate`)
//! before its first request and sends the token etcd gave as the
//! `Authorization` header of every request, the watch's too; a request
//! refused because the token is invalid (expired: etcd's simple tokens live
//! `--auth-token-ttl` after their last use) authenticates again and is sent
//! once more.
//!
//! `https://` endpoints speak TLS (rustls, set up by
//! [`lookout_transport::client_config_from_files`]): the member's
//! certificate is verified against the CA certificates of a [`Tls`], which
//! may also hold a client certificate and key for etcd's
//! `--client-cert-auth`.
//!
//! The key-value calls are in `kv.rs`, the leases' in `lease.rs`, the watch
//! in `watch.rs`: each a part of [`Client`] over what this file holds.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, header};
use http_body_util::Full;
use lookout_transport::Socket;
use serde::de::DeserializeOwned;
use serde_json::json;

use super::auth::{AUTH_NOT_ENABLED, AUTHENTICATE, Auth, Authenticated, Credentials, USER_EMPTY};
use super::endpoint::EtcdEndpoint;
use super::tls::Tls;
use super::wire::GatewayError;
use crate::error::{ConfigError, EtcdError};

/// The largest unary answer read (a range page is far below it).
const ANSWER_LIMIT: usize = 64 * 1024 * 1024;

/// A request body: given whole, with its length. (The gateway cannot take
/// more requests on an open body: over HTTP/1.1, Go's server holds the
/// response until the request body ends, so a watch sends its one create
/// request whole.)
pub(crate) type RequestBody = Full<Bytes>;

/// A response being read, with the connection that carries it (polled
/// whenever the body is; dropping the exchange closes the socket).
pub(crate) type Exchange = lookout_transport::Exchange<RequestBody>;

/// `GET /health`'s answer.
#[derive(serde::Deserialize)]
struct Health {
    #[serde(default)]
    health: String,
    #[serde(default)]
    reason: String,
}

/// An etcd v3 client over the JSON gateway of one cluster's members.
/// Cloning is cheap; clones share the preferred endpoint.
#[derive(Clone)]
pub struct Client {
    endpoints: Arc<[EtcdEndpoint]>,
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
    pub fn new(endpoints: Vec<EtcdEndpoint>, timeout: Duration) -> Result<Self, ConfigError> {
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
        self.auth = credentials.map(|credentials| Arc::new(Auth::new(credentials)));
        self
    }

    /// The client verifying `https://` endpoints with `tls` (`None`: an
    /// `https://` endpoint cannot be used, for want of a CA to verify it).
    #[must_use]
    pub fn with_tls(mut self, tls: Option<Tls>) -> Self {
        self.tls = tls;
        self
    }

    /// Whether the client authenticates.
    pub(crate) fn has_credentials(&self) -> bool {
        self.auth.is_some()
    }

    /// Opens a socket to `endpoint`: TCP, and TLS over it for `https://`.
    async fn connect(&self, endpoint: &EtcdEndpoint) -> Result<Socket, EtcdError> {
        let failed = |e| EtcdError::from_transport(endpoint.to_string(), "", e);
        let tcp = Socket::tcp(&endpoint.host, endpoint.port)
            .await
            .map_err(failed)?;
        if !endpoint.tls {
            return Ok(Socket::from(tcp));
        }
        let tls = self.tls.as_ref().ok_or_else(|| EtcdError::NoCa {
            endpoint: endpoint.to_string(),
        })?;
        Socket::tls(tcp, &endpoint.host, Arc::clone(&tls.config))
            .await
            .map_err(failed)
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
    pub(crate) async fn authed<T, F, Fut>(&self, mut op: F) -> Result<T, EtcdError>
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
    pub fn endpoints(&self) -> &[EtcdEndpoint] {
        &self.endpoints
    }

    /// The endpoint requests go to first (the last that answered).
    pub fn preferred(&self) -> &EtcdEndpoint {
        &self.endpoints[self.preferred.load(Ordering::Relaxed) % self.endpoints.len()]
    }

    /// One request to endpoint `i`: connect, send, await the response head.
    pub(crate) async fn send(
        &self,
        i: usize,
        method: http::Method,
        path: &str,
        body: RequestBody,
    ) -> Result<Exchange, EtcdError> {
        let endpoint = &self.endpoints[i];
        let attempt = async {
            let socket = self.connect(endpoint).await?;
            let request = Request::builder()
                .method(method)
                .uri(path)
                .header(header::HOST, endpoint.authority())
                .header(header::CONTENT_TYPE, "application/json")
                .header(header::USER_AGENT, lookout_transport::USER_AGENT);
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
            lookout_transport::send(socket, request)
                .await
                .map_err(|e| EtcdError::from_transport(endpoint.to_string(), path, e))
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
    pub(crate) async fn bounded<T>(
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
    pub(crate) async fn failover<T, F, Fut>(
        &self,
        path: &str,
        mut attempt: F,
    ) -> Result<T, EtcdError>
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
            let ex = self.send(i, method, path, Full::new(body)).await?;
            let status = ex.status();
            let all = ex
                .body(ANSWER_LIMIT)
                .await
                .map_err(|e| EtcdError::from_transport(self.endpoints[i].to_string(), path, e))?;
            Ok((status, all))
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
    pub(crate) async fn unary<T: DeserializeOwned>(
        &self,
        path: &str,
        body: &serde_json::Value,
    ) -> Result<T, EtcdError> {
        let body = Bytes::from(body.to_string());
        let body = &body;
        self.authed(|| self.failover(path, move |i| self.unary_at(i, path, Some(body))))
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
}
