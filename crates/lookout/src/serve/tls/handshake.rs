//! One connection's TLS handshake, in that connection's task (a client that
//! stalls delays no other): bounded in time, each refusal counted by its
//! reason, and a plain HTTP request answered in plain HTTP (400: use
//! https://) rather than with TLS bytes it cannot read.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use tokio::net::TcpStream;
use tokio::time::{Instant, timeout_at};
use tokio_rustls::rustls;
use tokio_rustls::server::TlsStream;

/// The metric of refused handshakes, by `reason` ([`Refused::as_str`]).
pub const REFUSED: &str = "lookout_serve_tls_handshakes_refused_total";

/// The first byte of a TLS connection: a handshake record (RFC 8446, 5.1).
const HANDSHAKE_RECORD: u8 = 0x16;

/// The answer to a client that speaks plain HTTP to the TLS port.
const NOT_TLS: &[u8] = b"HTTP/1.1 400 Bad Request\r\n\
    Content-Type: text/plain; charset=utf-8\r\n\
    Connection: close\r\n\r\n\
    This server speaks HTTPS: use https://\n";

/// Why a handshake did not complete (a connection closed before it sent a
/// byte is none: a TCP health check, a port scan).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    /// Not done within the head timeout (a client that stalls mid-hello).
    Timeout,
    /// The first byte is not a TLS handshake (plain HTTP, say).
    NotTls,
    /// A client certificate is required and the client showed none.
    NoClientCert,
    /// The client certificate is not signed by the client CA, has expired,
    /// or is otherwise invalid.
    BadClientCert,
    /// The client ended the handshake with an alert: mostly, it does not
    /// trust the server's certificate.
    ClientAlert,
    /// Any other TLS error: no protocol version, cipher suite or ALPN
    /// protocol in common, a malformed message.
    Protocol,
    /// The connection failed or closed mid-handshake.
    Other,
}

impl Refused {
    pub const ALL: [Self; 7] = [
        Self::Timeout,
        Self::NotTls,
        Self::NoClientCert,
        Self::BadClientCert,
        Self::ClientAlert,
        Self::Protocol,
        Self::Other,
    ];

    /// The metric's `reason` label.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Timeout => "timeout",
            Self::NotTls => "not_tls",
            Self::NoClientCert => "no_client_cert",
            Self::BadClientCert => "bad_client_cert",
            Self::ClientAlert => "client_alert",
            Self::Protocol => "protocol",
            Self::Other => "other",
        }
    }

    /// The reason of a failed handshake (tokio-rustls gives rustls's error
    /// inside an `io::Error`).
    fn of(e: &io::Error) -> Self {
        match e.get_ref().and_then(|e| e.downcast_ref::<rustls::Error>()) {
            Some(rustls::Error::NoCertificatesPresented) => Self::NoClientCert,
            Some(rustls::Error::InvalidCertificate(_)) => Self::BadClientCert,
            Some(rustls::Error::AlertReceived(_)) => Self::ClientAlert,
            Some(_) => Self::Protocol,
            None => Self::Other,
        }
    }

    fn count(self) {
        ::metrics::counter!(REFUSED, "reason" => self.as_str()).increment(1);
    }
}

/// The acceptor of the configuration in use when the connection came.
#[derive(Clone)]
pub struct Acceptor(pub tokio_rustls::TlsAcceptor);

impl std::fmt::Debug for Acceptor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Acceptor(…)")
    }
}

impl Acceptor {
    /// The handshake over `tcp` within `within`; `None` (counted, unless
    /// the client closed without a word) when it does not complete.
    pub async fn accept(
        &self,
        tcp: TcpStream,
        within: Duration,
        peer: SocketAddr,
    ) -> Option<TlsStream<TcpStream>> {
        let deadline = Instant::now() + within;
        let mut first = [0u8; 1];
        match timeout_at(deadline, tcp.peek(&mut first)).await {
            Err(_) => return refuse(Refused::Timeout, peer, None),
            Ok(Err(e)) => return refuse(Refused::Other, peer, Some(&e)),
            Ok(Ok(0)) => return None,
            Ok(Ok(_)) if first[0] != HANDSHAKE_RECORD => {
                answer_plain(&tcp);
                return refuse(Refused::NotTls, peer, None);
            }
            Ok(Ok(_)) => {}
        }
        match timeout_at(deadline, self.0.accept(tcp)).await {
            Err(_) => refuse(Refused::Timeout, peer, None),
            Ok(Err(e)) => refuse(Refused::of(&e), peer, Some(&e)),
            Ok(Ok(tls)) => Some(tls),
        }
    }
}

/// Counts a refusal (logged at debug level): no stream.
fn refuse<T>(why: Refused, peer: SocketAddr, e: Option<&io::Error>) -> Option<T> {
    why.count();
    let e = e.map_or_else(String::new, |e| format!(": {e}"));
    tracing::debug!(%peer, reason = why.as_str(), "TLS handshake refused{e}");
    None
}

/// Answers a plain HTTP client with [`NOT_TLS`], without waiting: what it
/// sent so far is read first (a socket closed with unread data resets the
/// connection, and the answer with it).
fn answer_plain(tcp: &TcpStream) {
    let mut sink = [0u8; 4096];
    for _ in 0..16 {
        match tcp.try_read(&mut sink) {
            Ok(n) if n > 0 => {}
            _ => break,
        }
    }
    let _ = tcp.try_write(NOT_TLS);
}
