//! One HTTP/1.1 request on one connection of its own, driven by whoever polls
//! it: no pool, no spawned connection task. Dropping an [`Exchange`] closes its
//! socket.

use std::future::{Future, poll_fn};
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use http::{Request, StatusCode, header};
use http_body_util::Empty;
use hyper::body::{Body, Incoming};
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpStream, UnixStream};

use super::api::{Api, ApiVersion};
use super::error::CompatError;
use super::host::{Host, TlsEnv};
use super::ssh::{self, SshStream};

/// A connected socket of any kind.
pub(crate) enum Io {
    Unix(UnixStream),
    Tcp(TcpStream),
    #[cfg(feature = "tls")]
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
    Ssh(Box<SshStream>),
}

impl AsyncRead for Io {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Unix(s) => Pin::new(s).poll_read(cx, buf),
            Self::Tcp(s) => Pin::new(s).poll_read(cx, buf),
            #[cfg(feature = "tls")]
            Self::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
            Self::Ssh(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Io {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Self::Unix(s) => Pin::new(s).poll_write(cx, buf),
            Self::Tcp(s) => Pin::new(s).poll_write(cx, buf),
            #[cfg(feature = "tls")]
            Self::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
            Self::Ssh(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Unix(s) => Pin::new(s).poll_flush(cx),
            Self::Tcp(s) => Pin::new(s).poll_flush(cx),
            #[cfg(feature = "tls")]
            Self::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
            Self::Ssh(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Unix(s) => Pin::new(s).poll_shutdown(cx),
            Self::Tcp(s) => Pin::new(s).poll_shutdown(cx),
            #[cfg(feature = "tls")]
            Self::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
            Self::Ssh(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

/// Opens a socket to the host (TLS material is read now, on every connection).
pub(crate) async fn connect(host: &Host, tls_env: &TlsEnv) -> Result<Io, CompatError> {
    let connect_error = |source| CompatError::Connect {
        host: host.to_string(),
        source,
        hint: String::new(),
    };
    match host {
        Host::Unix(path) => UnixStream::connect(path)
            .await
            .map(Io::Unix)
            .map_err(connect_error),
        Host::Ssh(target) => target
            .connect()
            .map(|s| Io::Ssh(Box::new(s)))
            .map_err(connect_error),
        Host::Tcp {
            host: name,
            port,
            tls,
        } => {
            let tcp = TcpStream::connect((name.as_str(), *port))
                .await
                .map_err(connect_error)?;
            // Events are small and latency matters more than throughput.
            tcp.set_nodelay(true).map_err(connect_error)?;
            if *tls {
                tls_connect(name, tcp, tls_env).await
            } else {
                Ok(Io::Tcp(tcp))
            }
        }
    }
}

#[cfg(feature = "tls")]
async fn tls_connect(name: &str, tcp: TcpStream, env: &TlsEnv) -> Result<Io, CompatError> {
    let config = super::tls::client_config(env)?;
    let server = rustls_pki_types::ServerName::try_from(name.to_owned())
        .map_err(|e| CompatError::Tls(format!("{name:?} is not a valid TLS server name: {e}")))?;
    let stream = tokio_rustls::TlsConnector::from(config)
        .connect(server, tcp)
        .await
        .map_err(|e| CompatError::Tls(format!("handshake with {name}: {e}")))?;
    Ok(Io::Tls(Box::new(stream)))
}

#[cfg(not(feature = "tls"))]
#[allow(clippy::unused_async)]
async fn tls_connect(_name: &str, _tcp: TcpStream, _env: &TlsEnv) -> Result<Io, CompatError> {
    Err(CompatError::Tls(
        "this build of lookout-docker has no TLS (enable the `tls` feature)".to_owned(),
    ))
}

type Connection = http1::Connection<TokioIo<Io>, Empty<Bytes>>;

/// A response being read, with the connection that carries it. The
/// connection is polled whenever the body is, so nothing runs in the
/// background; dropping the exchange closes the socket.
pub(crate) struct Exchange {
    status: StatusCode,
    /// The `Api-Version` header, when it is a version.
    api_version: Option<ApiVersion>,
    body: Incoming,
    /// `None` once the connection finished.
    conn: Option<Connection>,
    // Kept so that the connection does not wind down while the body streams.
    _sender: http1::SendRequest<Empty<Bytes>>,
}

/// `GET path_and_query` (under the API's version, see [`Api::path`]) on a
/// new connection to the API's host; resolves once the response head has
/// arrived.
pub(crate) async fn get(api: &Api, path_and_query: &str) -> Result<Exchange, CompatError> {
    let host = &api.host;
    let io = connect(host, &api.tls).await.map_err(|e| match e {
        CompatError::Connect { host, source, .. } => CompatError::Connect {
            host,
            source,
            hint: api.hint.map(|h| format!(" ({h})")).unwrap_or_default(),
        },
        other => other,
    })?;
    // Over ssh, what ssh said (why it failed) goes into the error.
    let said = match &io {
        Io::Ssh(s) => Some(s.said()),
        _ => None,
    };
    let request_error = |source| {
        let e = CompatError::Http {
            path: strip_query(path_and_query).to_owned(),
            source,
        };
        match said.as_deref().and_then(ssh::said) {
            Some(said) => CompatError::Ssh {
                host: host.to_string(),
                said,
                source: Box::new(e),
            },
            None => e,
        }
    };
    let (mut sender, mut conn) = http1::handshake(TokioIo::new(io))
        .await
        .map_err(request_error)?;
    let request = Request::get(api.path(path_and_query).as_ref())
        .header(header::HOST, host.authority())
        .header(
            header::USER_AGENT,
            concat!("lookout/", env!("CARGO_PKG_VERSION")),
        )
        .body(Empty::new())
        .map_err(|e| CompatError::Request(e.to_string()))?;
    let mut response = std::pin::pin!(sender.send_request(request));
    let mut conn_done = false;
    let response = poll_fn(|cx| {
        if let Poll::Ready(r) = response.as_mut().poll(cx) {
            return Poll::Ready(r);
        }
        if !conn_done {
            match Pin::new(&mut conn).poll(cx) {
                Poll::Ready(Ok(())) => {
                    // The response future now fails or resolves; poll it again.
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
    .map_err(request_error)?;
    let status = response.status();
    let api_version = response
        .headers()
        .get("api-version")
        .and_then(|v| v.to_str().ok())
        .and_then(ApiVersion::parse);
    Ok(Exchange {
        status,
        api_version,
        body: response.into_body(),
        conn: (!conn_done).then_some(conn),
        _sender: sender,
    })
}

/// The path of a request, without its query.
pub(crate) fn strip_query(path_and_query: &str) -> &str {
    path_and_query
        .split_once('?')
        .map_or(path_and_query, |(p, _)| p)
}

impl Exchange {
    /// The response's `Api-Version` header, when it is a version.
    pub(crate) fn api_version(&self) -> Option<ApiVersion> {
        self.api_version
    }

    /// Polls for the next piece of the body: `None` at its end.
    pub(crate) fn poll_chunk(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Bytes, hyper::Error>>> {
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

    /// The next piece of the body: `None` at its end.
    pub(crate) async fn chunk(&mut self) -> Option<Result<Bytes, hyper::Error>> {
        poll_fn(|cx| self.poll_chunk(cx)).await
    }

    /// Reads the whole body, failing past `limit` bytes.
    pub(crate) async fn body(mut self, path: &str, limit: usize) -> Result<Bytes, CompatError> {
        let mut all = BytesMut::new();
        while let Some(chunk) = self.chunk().await {
            let chunk = chunk.map_err(|source| CompatError::Http {
                path: path.to_owned(),
                source,
            })?;
            if all.len() + chunk.len() > limit {
                return Err(CompatError::TooLarge {
                    path: path.to_owned(),
                    limit,
                });
            }
            all.extend_from_slice(&chunk);
        }
        Ok(all.freeze())
    }

    /// Fails unless the status is 2xx, with the engine's message.
    pub(crate) async fn ok(self, path: &str) -> Result<Self, CompatError> {
        if self.status.is_success() {
            return Ok(self);
        }
        let status = self.status.as_u16();
        let body = self.body(path, 64 * 1024).await.unwrap_or_default();
        Err(CompatError::Status {
            path: path.to_owned(),
            status,
            message: engine_message(&body),
        })
    }
}

/// The engine's error message: `{"message": "..."}`, else the body as text.
fn engine_message(body: &[u8]) -> String {
    serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v.get("message")?.as_str().map(str::to_owned))
        .unwrap_or_else(|| {
            String::from_utf8_lossy(&body[..body.len().min(512)])
                .trim()
                .to_owned()
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engine_messages() {
        assert_eq!(
            engine_message(br#"{"message":"page not found"}"#),
            "page not found"
        );
        assert_eq!(engine_message(b"plain text\n"), "plain text");
        assert_eq!(strip_query("/events?since=1"), "/events");
    }
}
