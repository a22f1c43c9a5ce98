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
    ///
    /// A connection refused on a path that exists and is a socket (nothing
    /// accepts on it) says so, and why that happens to a socket file
    /// bind-mounted into a container: the engine restarted and made a new
    /// socket, the mount kept the old one (its error keeps the OS's as its
    /// source, and its kind, [`io::ErrorKind::ConnectionRefused`]). Any other
    /// failure (a missing path, no permission) is the OS's error as it is.
    pub async fn unix(path: &Path) -> Result<Self, TransportError> {
        UnixStream::connect(path)
            .await
            .map(Self::Unix)
            .map_err(|e| TransportError::Connect(unix_refused(path, e)))
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

/// `e`, a failed connect to the unix socket at `path`; when it was refused
/// (`ECONNREFUSED`) and `path` is a socket, with [`StaleSocket`]'s hint.
fn unix_refused(path: &Path, e: io::Error) -> io::Error {
    use std::os::unix::fs::FileTypeExt;
    if e.kind() != io::ErrorKind::ConnectionRefused {
        return e;
    }
    // One stat, on a failure only (the retry's backoff paces it).
    let is_socket = std::fs::metadata(path).is_ok_and(|m| m.file_type().is_socket());
    if !is_socket {
        return e;
    }
    io::Error::new(
        io::ErrorKind::ConnectionRefused,
        StaleSocket {
            path: path.to_path_buf(),
            source: e,
        },
    )
}

/// A connection refused on a path that exists and is a socket: the engine
/// is down, or the path is a bind mount of a socket file that went stale.
#[derive(Debug)]
struct StaleSocket {
    path: std::path::PathBuf,
    source: io::Error,
}

impl std::fmt::Display for StaleSocket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: {} exists and is a socket, but it refuses connections (nothing listens on \
             it): the engine is down, or this is a socket file bind-mounted into a container, \
             which goes stale when the engine restarts (the engine creates a new socket; the \
             mount keeps the old one): mount the socket's directory instead",
            self.source,
            self.path.display()
        )
    }
}

impl std::error::Error for StaleSocket {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
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

#[cfg(test)]
mod tests;
