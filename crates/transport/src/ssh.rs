//! A connection through a child process of the system `ssh`: its stdin
//! written, its stdout read. The child belongs to the connection: dropping
//! the [`SshStream`] kills it (tokio's `kill_on_drop`; no task is spawned,
//! and the runtime reaps it). What ssh writes on its stderr is kept (up to
//! 4 KiB, [`SshSaid`]) for the error of a request that fails on it.
//!
//! The arguments are the caller's (the docker CLI's connection helper's, in
//! `lookout-moby`); the program is `ssh` from `PATH`, with the full
//! environment, so the user's ssh configuration and agent apply.

use std::io;
use std::pin::Pin;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command};

/// How much of ssh's stderr is kept.
const STDERR_KEPT: usize = 4096;

/// One connection through ssh: its stdout read, its stdin written; its
/// stderr kept for errors. Dropping it kills ssh.
#[derive(Debug)]
pub struct SshStream {
    stdin: ChildStdin,
    stdout: ChildStdout,
    /// `None` once it ended.
    stderr: Option<ChildStderr>,
    said: SshSaid,
    _child: Child,
}

/// What ssh said on its stderr so far (the first 4 KiB), shared: it grows as
/// the connection is read.
#[derive(Debug, Clone, Default)]
pub struct SshSaid(Arc<Mutex<Vec<u8>>>);

impl SshSaid {
    /// ssh's stderr as text for an error: trimmed, `None` when it said
    /// nothing.
    pub fn text(&self) -> Option<String> {
        let said = self.0.lock().ok()?;
        let text = String::from_utf8_lossy(&said).trim().to_owned();
        (!text.is_empty()).then_some(text)
    }

    /// Keeps what fits of `bytes` in the first [`STDERR_KEPT`] bytes; the
    /// rest is dropped (ssh's stderr is read to its end all the same, so
    /// that ssh never blocks on it).
    fn keep(&self, bytes: &[u8]) {
        if let Ok(mut said) = self.0.lock() {
            let room = STDERR_KEPT.saturating_sub(said.len());
            said.extend_from_slice(&bytes[..bytes.len().min(room)]);
        }
    }
}

impl SshStream {
    /// Starts `ssh args…`: a connection to whatever the remote command
    /// proxies.
    pub fn spawn<I, S>(args: I) -> io::Result<Self>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<std::ffi::OsStr>,
    {
        let mut child = Command::new("ssh")
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()?;
        let missing = || io::Error::other("ssh's pipes were not set up");
        Ok(Self {
            stdin: child.stdin.take().ok_or_else(missing)?,
            stdout: child.stdout.take().ok_or_else(missing)?,
            stderr: child.stderr.take(),
            said: SshSaid::default(),
            _child: child,
        })
    }

    /// What ssh said on its stderr, shared: it grows as the connection is
    /// read.
    pub fn said(&self) -> SshSaid {
        self.said.clone()
    }

    /// Reads what stderr has now; `Ready` once it ended.
    fn poll_stderr(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let Some(stderr) = self.stderr.as_mut() else {
            return Poll::Ready(());
        };
        let mut buf = [0u8; 512];
        loop {
            let mut read = ReadBuf::new(&mut buf);
            match Pin::new(&mut *stderr).poll_read(cx, &mut read) {
                Poll::Ready(Ok(())) if !read.filled().is_empty() => self.said.keep(read.filled()),
                Poll::Ready(_) => {
                    self.stderr = None;
                    return Poll::Ready(());
                }
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

impl AsyncRead for SshStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let stderr_done = this.poll_stderr(cx).is_ready();
        let before = buf.filled().len();
        match Pin::new(&mut this.stdout).poll_read(cx, buf) {
            // The end of stdout: ssh is exiting; its stderr (why) is read to
            // its end first, so that the error can say it.
            Poll::Ready(Ok(())) if buf.filled().len() == before && !stderr_done => Poll::Pending,
            other => other,
        }
    }
}

impl AsyncWrite for SshStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stdin).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stdin).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stdin).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_first_4_kib_of_stderr_are_kept() {
        let said = SshSaid::default();
        said.keep(b"ssh: connect to host h port 22: ");
        for _ in 0..1000 {
            said.keep(&[b'e'; 512]);
        }
        let text = said.text().expect("what ssh said");
        assert_eq!(text.len(), STDERR_KEPT);
        assert!(text.starts_with("ssh: connect to host h port 22: eee"));
    }
}
