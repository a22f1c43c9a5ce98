//! One HTTP/1.1 request on a [`Socket`] of its own, and its response
//! ([`Exchange`]), driven by whoever polls them: [`send`] drives the
//! connection until the response head arrived, then [`Exchange::poll_chunk`]
//! drives it whenever the body is read. No pool, no spawned connection task:
//! dropping the future of [`send`] or the [`Exchange`] closes the socket.

use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use http::{HeaderMap, Request, StatusCode};
use hyper::body::{Body, Incoming};
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;

use crate::connect::Socket;
use crate::error::TransportError;

/// The `User-Agent` of lookout's requests.
pub const USER_AGENT: &str = concat!("lookout/", env!("CARGO_PKG_VERSION"));

type Connection<B> = http1::Connection<TokioIo<Socket>, B>;

/// A response being read, with the connection that carries it. The
/// connection is polled whenever the body is, so nothing runs in the
/// background; dropping the exchange closes the socket.
pub struct Exchange<B: Body + 'static> {
    status: StatusCode,
    headers: HeaderMap,
    body: Incoming,
    /// `None` once the connection finished.
    conn: Option<Connection<B>>,
    // Kept so that the connection does not wind down while the body streams.
    _sender: http1::SendRequest<B>,
}

impl<B: Body + 'static> std::fmt::Debug for Exchange<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Exchange")
            .field("status", &self.status)
            .field("headers", &self.headers)
            .field("connected", &self.conn.is_some())
            .finish_non_exhaustive()
    }
}

/// Sends `request` on `socket` (its own connection: the caller sets the
/// `Host` header, see [`USER_AGENT`]); resolves once the response head has
/// arrived. A request body is sent whole before the response is read
/// further (over HTTP/1.1, hyper writes the body as the connection is
/// polled).
pub async fn send<B>(socket: Socket, request: Request<B>) -> Result<Exchange<B>, TransportError>
where
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let (mut sender, mut conn) = http1::handshake(TokioIo::new(socket))
        .await
        .map_err(TransportError::Http)?;
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
    .map_err(TransportError::Http)?;
    let (head, body) = response.into_parts();
    Ok(Exchange {
        status: head.status,
        headers: head.headers,
        body,
        conn: (!conn_done).then_some(conn),
        _sender: sender,
    })
}

impl<B> Exchange<B>
where
    B: Body + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    /// The response's status.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The response's headers.
    pub fn headers(&self) -> &HeaderMap {
        &self.headers
    }

    /// Polls for the next piece of the body (driving the connection):
    /// `None` at its end.
    pub fn poll_chunk(
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
    pub async fn chunk(&mut self) -> Option<Result<Bytes, hyper::Error>> {
        poll_fn(|cx| self.poll_chunk(cx)).await
    }

    /// Reads the whole body, failing past `limit` bytes
    /// ([`TransportError::TooLarge`]).
    pub async fn body(mut self, limit: usize) -> Result<Bytes, TransportError> {
        let mut all = BytesMut::new();
        while let Some(chunk) = self.chunk().await {
            let chunk = chunk.map_err(TransportError::Http)?;
            if all.len() + chunk.len() > limit {
                return Err(TransportError::TooLarge { limit });
            }
            all.extend_from_slice(&chunk);
        }
        Ok(all.freeze())
    }
}

#[cfg(test)]
mod tests;
