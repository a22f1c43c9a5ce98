//! The connected socket of one exchange, [`Socket`]: a unix socket, TCP
//! (with `TCP_NODELAY`), TLS over TCP, or an `ssh` child's pipes; and how
//! each is opened.

use std::io;
use std::path::Path;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpStream, UnixStream};

use crate::error::TransportError;
use crate::ssh::{SshSaid, SshStream};

/// A connected socket of any kind. Dropping it closes it (kills its ssh).
#[derive(Debug)]
#[non_exhaustive]
pub enum Socket {
    /// A unix socket.
    Unix(UnixStream),
    /// Plain TCP.
    Tcp(TcpStream),
    /// TLS over TCP.
    #[cfg(feature = "tls")]
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
    /// The pipes of an `ssh` child.
    Ssh(Box<SshStream>),
}

impl Socket {
    /// Connects to the unix socket at `path`.
    pub async fn unix(path: &Path) -> Result<Self, TransportError> {
        UnixStream::connect(path)
            .await
            .map(Self::Unix)
            .map_err(TransportError::Connect)
    }

    /// Connects over TCP to `host:port`, with `TCP_NODELAY` (the messages
    /// are small and latency matters more than throughput). See
    /// [`Socket::tls`] to speak TLS over it.
    pub async fn tcp(host: &str, port: u16) -> Result<TcpStream, TransportError> {
        let tcp = TcpStream::connect((host, port))
            .await
            .map_err(TransportError::Connect)?;
        tcp.set_nodelay(true).map_err(TransportError::Connect)?;
        Ok(tcp)
    }

    /// Starts `ssh args…` (see [`SshStream::spawn`]).
    pub fn ssh<I, S>(args: I) -> Result<Self, TransportError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<std::ffi::OsStr>,
    {
        SshStream::spawn(args)
            .map(|s| Self::Ssh(Box::new(s)))
            .map_err(TransportError::Connect)
    }

    /// Over ssh, what ssh says on its stderr (for the error of a request
    /// that fails on it); `None` for the other sockets.
    pub fn ssh_said(&self) -> Option<SshSaid> {
        match self {
            Self::Ssh(s) => Some(s.said()),
            _ => None,
        }
    }
}

impl From<TcpStream> for Socket {
    fn from(tcp: TcpStream) -> Self {
        Self::Tcp(tcp)
    }
}

impl AsyncRead for Socket {
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

impl AsyncWrite for Socket {
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
