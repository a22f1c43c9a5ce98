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
//!
//! # Features
//!
//! - **`tls`** (on by default): TLS with rustls on *ring*
//!   ([`crypto_provider`]): [`Socket::tls`], [`client_config_from_files`],
//!   [`unverified_client_config`], the [`ClientConfig`] re-export and the
//!   TLS variants of [`TransportError`].
//!
//! # Public dependencies
//!
//! These crates' types or traits appear in this crate's API, so their major
//! version is part of it:
//!
//! - **`http`** 1: the request ([`http::Request`]) and the response head
//!   ([`http::StatusCode`], [`http::HeaderMap`]): the HTTP vocabulary the
//!   callers speak.
//! - **`hyper`** 1: the request body's trait (`hyper::body::Body`, which is
//!   `http-body` 1's `Body`) and the error of a failed exchange
//!   ([`hyper::Error`], in [`Exchange::chunk`] and [`TransportError::Http`]).
//!   hyper's connection and its response body (`Incoming`) stay inside
//!   [`Exchange`].
//! - **`bytes`** 1: a body's chunks ([`bytes::Bytes`]).
//! - **`tokio`** 1: the sockets ([`Socket`]'s variants, [`Socket::tcp`]'s
//!   `TcpStream`); everything runs on a tokio runtime.
//! - **`rustls`** 0.23 (through `tokio-rustls` 0.26, and `rustls-pki-types`
//!   1; feature `tls` only): a TLS configuration is a rustls
//!   [`ClientConfig`] (re-exported here, so a caller may build its own with
//!   rustls's builder), the TLS socket is tokio-rustls's stream, and the
//!   TLS errors keep rustls's typed causes.
//!
//! `hyper-util`, `thiserror`, `ring` and `rustls-webpki` are implementation
//! details.
//!
//! # Stability
//!
//! [`Socket`] and [`TransportError`] are `#[non_exhaustive]` (match them with
//! a wildcard arm): a new kind of socket or of failure may come.

#![deny(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

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
pub use tls::{
    client_config_from_files, crypto_provider, shared_crypto_provider, unverified_client_config,
};
/// rustls's client configuration, re-exported: what [`Socket::tls`] takes
/// and [`client_config_from_files`] builds (rustls is a public dependency
/// of this crate under the `tls` feature).
#[cfg(feature = "tls")]
pub use tokio_rustls::rustls::ClientConfig;
