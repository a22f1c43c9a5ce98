//! One `GET` on a connection of its own, over `lookout-transport`: the
//! socket the host asks for, the request under the API's version, the
//! errors as the engine's host and path say them. Dropping an [`Exchange`]
//! closes its socket.

use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Request, header};
use http_body_util::Empty;
use lookout_transport::{Socket, TransportError};

use super::api::{Api, ApiVersion};
use super::error::CompatError;
use crate::location::host::{Host, TlsEnv};

/// Opens a socket to the host (TLS material is read now, on every connection).
pub(crate) async fn connect(host: &Host, tls_env: &TlsEnv) -> Result<Socket, CompatError> {
    let connect_error = |e| match e {
        TransportError::Connect(source) => CompatError::Connect {
            host: host.to_string(),
            source,
            hint: String::new(),
        },
        other => CompatError::Tls(other.to_string()),
    };
    match host {
        Host::Unix(path) => Socket::unix(path).await.map_err(connect_error),
        Host::Ssh(target) => target.connect().map_err(connect_error),
        Host::Tcp {
            host: name,
            port,
            tls,
        } => {
            let tcp = Socket::tcp(name, *port).await.map_err(connect_error)?;
            if *tls {
                tls_connect(name, tcp, tls_env).await
            } else {
                Ok(Socket::from(tcp))
            }
        }
    }
}

#[cfg(feature = "tls")]
async fn tls_connect(
    name: &str,
    tcp: tokio::net::TcpStream,
    env: &TlsEnv,
) -> Result<Socket, CompatError> {
    let config = crate::location::tls::client_config(env)?;
    Socket::tls(tcp, name, config)
        .await
        .map_err(|e| CompatError::Tls(e.to_string()))
}

#[cfg(not(feature = "tls"))]
#[allow(clippy::unused_async)]
async fn tls_connect(
    _name: &str,
    _tcp: tokio::net::TcpStream,
    _env: &TlsEnv,
) -> Result<Socket, CompatError> {
    Err(CompatError::Tls(
        "this build of lookout-docker has no TLS (enable the `tls` feature)".to_owned(),
    ))
}

/// A response being read, with the connection that carries it (see
/// [`lookout_transport::Exchange`]): nothing runs in the background;
/// dropping the exchange closes the socket.
pub(crate) struct Exchange {
    /// The `Api-Version` header, when it is a version.
    api_version: Option<ApiVersion>,
    inner: lookout_transport::Exchange<Empty<Bytes>>,
}

/// `GET path_and_query` (under the API's version, see [`Api::path`]) on a
/// new connection to the API's host; resolves once the response head has
/// arrived.
pub(crate) async fn get(api: &Api, path_and_query: &str) -> Result<Exchange, CompatError> {
    let host = &api.host;
    let socket = connect(host, &api.tls).await.map_err(|e| match e {
        CompatError::Connect { host, source, .. } => CompatError::Connect {
            host,
            source,
            hint: api.hint.map(|h| format!(" ({h})")).unwrap_or_default(),
        },
        other => other,
    })?;
    // Over ssh, what ssh said (why it failed) goes into the error.
    let said = socket.ssh_said();
    let request = Request::get(api.path(path_and_query).as_ref())
        .header(header::HOST, host.authority())
        .header(header::USER_AGENT, lookout_transport::USER_AGENT)
        .body(Empty::new())
        .map_err(|e| CompatError::Request(e.to_string()))?;
    let inner = lookout_transport::send(socket, request)
        .await
        .map_err(|e| {
            let e = transport_error(strip_query(path_and_query), e);
            match said.as_ref().and_then(lookout_transport::SshSaid::text) {
                Some(said) => CompatError::Ssh {
                    host: host.to_string(),
                    said,
                    source: Box::new(e),
                },
                None => e,
            }
        })?;
    let api_version = inner
        .headers()
        .get("api-version")
        .and_then(|v| v.to_str().ok())
        .and_then(ApiVersion::parse);
    Ok(Exchange { api_version, inner })
}

/// An exchange's failure, as the request at `path` met it.
fn transport_error(path: &str, e: TransportError) -> CompatError {
    match e {
        TransportError::Http(source) => CompatError::Http {
            path: path.to_owned(),
            source: source.into(),
        },
        TransportError::TooLarge { limit } => CompatError::TooLarge {
            path: path.to_owned(),
            limit,
        },
        other => CompatError::Tls(other.to_string()),
    }
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

    /// The response's `Date` header (the engine's clock when it answered,
    /// to the second), when it reads as one.
    pub(crate) fn date(&self) -> Option<std::time::SystemTime> {
        let date = self.inner.headers().get(header::DATE)?.to_str().ok()?;
        httpdate::parse_http_date(date).ok()
    }

    /// Polls for the next piece of the body: `None` at its end.
    pub(crate) fn poll_chunk(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Bytes, hyper::Error>>> {
        self.inner.poll_chunk(cx)
    }

    /// The next piece of the body: `None` at its end.
    pub(crate) async fn chunk(&mut self) -> Option<Result<Bytes, hyper::Error>> {
        self.inner.chunk().await
    }

    /// Reads the whole body, failing past `limit` bytes.
    pub(crate) async fn body(self, path: &str, limit: usize) -> Result<Bytes, CompatError> {
        self.inner
            .body(limit)
            .await
            .map_err(|e| transport_error(path, e))
    }

    /// Fails unless the status is 2xx, with the engine's message.
    pub(crate) async fn ok(self, path: &str) -> Result<Self, CompatError> {
        let status = self.inner.status();
        if status.is_success() {
            return Ok(self);
        }
        let body = self.body(path, 64 * 1024).await.unwrap_or_default();
        Err(CompatError::Status {
            path: path.to_owned(),
            status: status.as_u16(),
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
