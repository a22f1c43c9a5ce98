//! The owned-socket HTTP/1.1 transport of lookout, which `lookout-moby` (the
//! Docker Engine API) and `lookout-etcd` (etcd's JSON gateway) share.
//!
//! - **one request, one connection of its own** ([`send`], [`Exchange`]):
//!   a [`Socket`] opened for it — a unix socket, TCP with `TCP_NODELAY`,
//!   TLS over TCP ([`Socket::tls`], rustls), or the pipes of a child of the
//!   system `ssh` ([`SshStream`]) — and hyper's HTTP/1.1 client connection
//!   over it, generic over the request body (a `GET` without one, a `POST`
//!   of JSON with its headers).
//! - **the contract: dropping a future or a body closes the socket; nothing
//!   is spawned.** The request is sent, and the connection driven, by
//!   whoever polls the future of [`send`] (until the response head) and then
//!   the [`Exchange`] (its body, [`Exchange::poll_chunk`]): no pool, no
//!   connection task, no thread. Dropping either closes the socket at once
//!   and, over ssh, kills the child (`kill_on_drop`; the runtime reaps it).
//!   A streamed body (an event feed, a watch) holds its connection for as
//!   long as it is read.
//! - **a body size limit**: [`Exchange::body`] reads a whole body, failing
//!   past its limit.
//! - **TLS from files** (feature `tls`, on by default):
//!   [`client_config_from_files`] (a CA, and optionally a client certificate
//!   and key), and the unverified mode [`unverified_client_config`] (any
//!   certificate taken, its handshake signatures still checked — anyone on
//!   the path can pose as the server: say so when you use it).
//!
//! Errors are [`TransportError`]s, each keeping its cause (the OS's,
//! rustls's, hyper's); the callers add the host and path. Timeouts are the
//! caller's (wrap the futures in `tokio::time::timeout`: dropping them on
//! expiry closes the socket).

mod connect;
mod error;
mod exchange;
mod ssh;
#[cfg(feature = "tls")]
mod tls;

pub use connect::Socket;
pub use error::TransportError;
pub use exchange::{Exchange, USER_AGENT, send};
pub use ssh::{SshSaid, SshStream};
#[cfg(feature = "tls")]
pub use tls::{client_config_from_files, unverified_client_config};
#[cfg(feature = "tls")]
pub use tokio_rustls::rustls::ClientConfig;
