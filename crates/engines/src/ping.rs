//! `GET /_ping` on a Docker-compatible endpoint, and waiting for a daemon to answer it.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::Child;
use std::thread;
use std::time::{Duration, Instant};

use crate::PING_TIMEOUT;
use crate::process::tail_file;

const POLL: Duration = Duration::from_millis(100);

/// `GET /_ping` on a Docker-compatible endpoint (`unix:///path` or
/// `tcp://host:port`), bounded by `timeout` per I/O step. `Ok` when it
/// answers 200 `OK`.
pub fn ping(host: &str, timeout: Duration) -> Result<(), String> {
    let request = b"GET /_ping HTTP/1.0\r\nHost: localhost\r\nUser-Agent: lookout-engines\r\n\r\n";
    let mut response = Vec::new();
    if let Some(path) = host.strip_prefix("unix://") {
        let mut s = UnixStream::connect(path).map_err(|e| format!("{host}: connect: {e}"))?;
        s.set_read_timeout(Some(timeout))
            .map_err(|e| e.to_string())?;
        s.set_write_timeout(Some(timeout))
            .map_err(|e| e.to_string())?;
        s.write_all(request)
            .map_err(|e| format!("{host}: write: {e}"))?;
        s.take(64 * 1024)
            .read_to_end(&mut response)
            .map_err(|e| format!("{host}: read: {e}"))?;
    } else if let Some(addr) = host
        .strip_prefix("tcp://")
        .or_else(|| host.strip_prefix("http://"))
    {
        let addr = addr.trim_end_matches('/');
        let sock = std::net::ToSocketAddrs::to_socket_addrs(addr)
            .map_err(|e| format!("{host}: {e}"))?
            .next()
            .ok_or_else(|| format!("{host}: no address"))?;
        let mut s = TcpStream::connect_timeout(&sock, timeout)
            .map_err(|e| format!("{host}: connect: {e}"))?;
        s.set_read_timeout(Some(timeout))
            .map_err(|e| e.to_string())?;
        s.set_write_timeout(Some(timeout))
            .map_err(|e| e.to_string())?;
        s.write_all(request)
            .map_err(|e| format!("{host}: write: {e}"))?;
        s.take(64 * 1024)
            .read_to_end(&mut response)
            .map_err(|e| format!("{host}: read: {e}"))?;
    } else {
        return Err(format!(
            "{host}: only unix:// and tcp:// endpoints are supported"
        ));
    }
    let text = String::from_utf8_lossy(&response);
    let status_ok = text
        .lines()
        .next()
        .is_some_and(|l| l.split_whitespace().nth(1) == Some("200"));
    if status_ok && text.trim_end().ends_with("OK") {
        Ok(())
    } else {
        Err(format!(
            "{host}: unexpected /_ping answer: {:?}",
            text.lines().next().unwrap_or("")
        ))
    }
}

pub(crate) fn wait_ping(
    engine: &str,
    host: &str,
    timeout: Duration,
    child: &mut Option<Child>,
    log: &Path,
) -> Result<Duration, String> {
    let start = Instant::now();
    let mut last = String::new();
    while start.elapsed() < timeout {
        match ping(host, PING_TIMEOUT) {
            Ok(()) => return Ok(start.elapsed()),
            Err(e) => last = e,
        }
        if let Some(c) = child.as_mut()
            && let Ok(Some(status)) = c.try_wait()
        {
            return Err(format!(
                "{engine}: the daemon exited ({status}) before answering /_ping on {host}; read {}:\n{}",
                log.display(),
                tail_file(log, 30)
            ));
        }
        thread::sleep(POLL * 2);
    }
    Err(format!(
        "{engine}: no /_ping answer on {host} within {timeout:?} (last: {last}); read {}:\n{}",
        log.display(),
        tail_file(log, 30)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ping_fails_fast_without_a_daemon() {
        let missing =
            std::env::temp_dir().join(format!("lookout-no-such-{}.sock", std::process::id()));
        let host = format!("unix://{}", missing.display());
        assert!(ping(&host, Duration::from_millis(200)).is_err());
        assert!(ping("ftp://x", Duration::from_millis(200)).is_err());
    }
}
