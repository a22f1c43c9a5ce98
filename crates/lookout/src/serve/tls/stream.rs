//! A connection's byte stream, plain TCP or TLS over it: what hyper serves,
//! one type for both (tokio-util's `Either` delegates every read and write).

use std::net::SocketAddr;
use std::time::Duration;

use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;
use tokio_util::either::Either;

use super::handshake::Acceptor;

/// Plain TCP (`Left`), or TLS over it (`Right`).
pub type Io = Either<TcpStream, Box<TlsStream<TcpStream>>>;

/// `tcp` as it is, or (with `acceptor`) once its TLS handshake is done
/// within `within`; `None` when the handshake failed.
pub async fn open(
    tcp: TcpStream,
    acceptor: Option<Acceptor>,
    within: Duration,
    peer: SocketAddr,
) -> Option<Io> {
    match acceptor {
        None => Some(Either::Left(tcp)),
        Some(a) => a
            .accept(tcp, within, peer)
            .await
            .map(|tls| Either::Right(Box::new(tls))),
    }
}
