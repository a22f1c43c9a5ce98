//! `lookout probe URL`: one HTTP/1.1 GET, exit 0 on a 2xx answer and 1
//! otherwise — a container's `HEALTHCHECK` with the binary it already has (a
//! `FROM scratch` image has no curl). `https://` (a lookout with
//! `--serve-cert`) verifies the server against `--cacert`, or with
//! `--insecure` takes its certificate as it is, and shows `--cert`/`--key`
//! under `--serve-client-ca`; the configurations are lookout-transport's.
//! Blocking std I/O (rustls's blocking stream over TLS): one request, no
//! runtime; every step bounded by `--timeout` as a whole.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::time::{Duration, Instant};

use lookout_transport::ClientConfig;
use tokio_rustls::rustls;

use crate::cli::{ProbeArgs, VERSION};
use crate::exit::Exit;

/// The most of the answer read: the status line is all that counts.
const MAX_ANSWER: usize = 16 * 1024;

/// An `http[s]://HOST[:PORT][/PATH]` URL, split.
#[derive(Debug, PartialEq, Eq)]
struct Target {
    /// `https://`.
    tls: bool,
    /// `HOST[:PORT]` as written (the `Host` header).
    authority: String,
    host: String,
    port: u16,
    /// `/PATH[?QUERY]`, `/` when absent.
    path: String,
}

/// Runs the probe: says the answer's status on stdout when it is 2xx, why
/// not on stderr otherwise.
pub fn run(args: &ProbeArgs) -> Result<(), Exit> {
    let target = parse(&args.url).map_err(Exit::Usage)?;
    let tls = tls(&target, args)?;
    let deadline = Instant::now() + args.timeout;
    let status = get(&target, tls, deadline)
        .map_err(|e| Exit::Failure(format!("probe {}: {e}", args.url)))?;
    if (200..300).contains(&status.0) {
        println!("{} {}", status.0, status.1);
        Ok(())
    } else {
        Err(Exit::Failure(format!(
            "probe {}: answered {} {}",
            args.url, status.0, status.1
        )))
    }
}

/// The TLS configuration `https://` needs, from the flags; none for
/// `http://` (whose TLS flags are a usage error).
fn tls(target: &Target, args: &ProbeArgs) -> Result<Option<Arc<ClientConfig>>, Exit> {
    let identity = args.cert.as_deref().zip(args.key.as_deref());
    if !target.tls {
        if args.cacert.is_some() || args.insecure || identity.is_some() {
            return Err(Exit::Usage(
                "--cacert, --insecure, --cert and --key are for an https:// URL".to_owned(),
            ));
        }
        return Ok(None);
    }
    let config = match (&args.cacert, args.insecure) {
        (Some(ca), _) => lookout_transport::client_config_from_files(ca, identity),
        (None, true) => lookout_transport::unverified_client_config(identity),
        (None, false) => {
            return Err(Exit::Usage(
                "an https:// URL needs --cacert PATH (the CA of the server's certificate) \
                 or --insecure"
                    .to_owned(),
            ));
        }
    };
    config
        .map(Some)
        .map_err(|e| Exit::usage("invalid TLS files", &e))
}

fn parse(url: &str) -> Result<Target, String> {
    let (rest, tls) = match (url.strip_prefix("http://"), url.strip_prefix("https://")) {
        (Some(rest), _) => (rest, false),
        (None, Some(rest)) => (rest, true),
        (None, None) => {
            return Err(format!(
                "expected http[s]://HOST[:PORT][/PATH], got `{url}`"
            ));
        }
    };
    let (authority, path) = match rest.find(['/', '?']) {
        Some(i) if rest[i..].starts_with('/') => (&rest[..i], rest[i..].to_owned()),
        Some(i) => (&rest[..i], format!("/{}", &rest[i..])),
        None => (rest, "/".to_owned()),
    };
    if authority.is_empty() || authority.contains('@') {
        return Err(format!(
            "expected http[s]://HOST[:PORT][/PATH], got `{url}`"
        ));
    }
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let (host, after) = v6
            .split_once(']')
            .ok_or_else(|| format!("unclosed `[` in `{url}`"))?;
        (host, after.strip_prefix(':'))
    } else {
        match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        }
    };
    let port = match port {
        None if tls => 443,
        None => 80,
        Some(p) => p
            .parse()
            .map_err(|_| format!("bad port `{p}` in `{url}`"))?,
    };
    if host.is_empty() || path.chars().any(|c| c.is_ascii_control() || c == ' ') {
        return Err(format!(
            "expected http[s]://HOST[:PORT][/PATH], got `{url}`"
        ));
    }
    Ok(Target {
        tls,
        authority: authority.to_owned(),
        host: host.to_owned(),
        port,
        path,
    })
}

/// GETs the target (over TLS with `tls`); its status code and reason.
fn get(
    target: &Target,
    tls: Option<Arc<ClientConfig>>,
    deadline: Instant,
) -> io::Result<(u16, String)> {
    let tcp = connect(target, deadline)?;
    let Some(config) = tls else {
        return ask(tcp, target, deadline, |s| s);
    };
    let name = rustls::pki_types::ServerName::try_from(target.host.clone())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    let conn = rustls::ClientConnection::new(config, name).map_err(io::Error::other)?;
    // The handshake happens on the first write and read, within their timeouts.
    ask(rustls::StreamOwned::new(conn, tcp), target, deadline, |s| {
        &s.sock
    })
}

/// Sends the request on `stream` and reads the status line, each step
/// bounded by what is left of `deadline` (set on its socket, `tcp`).
fn ask<S: Read + Write>(
    mut stream: S,
    target: &Target,
    deadline: Instant,
    tcp: impl Fn(&S) -> &TcpStream,
) -> io::Result<(u16, String)> {
    let request = format!(
        "GET {} HTTP/1.1\r\nHost: {}\r\nUser-Agent: lookout-probe/{VERSION}\r\n\
         Accept: */*\r\nConnection: close\r\n\r\n",
        target.path, target.authority
    );
    tcp(&stream).set_write_timeout(Some(left(deadline)?))?;
    tcp(&stream).set_read_timeout(Some(left(deadline)?))?;
    stream.write_all(request.as_bytes())?;
    let mut answer = Vec::with_capacity(1024);
    let mut buf = [0u8; 4096];
    // Up to the end of the status line (or the bound, or the close).
    while !answer.contains(&b'\n') && answer.len() < MAX_ANSWER {
        tcp(&stream).set_read_timeout(Some(left(deadline)?))?;
        let n = stream.read(&mut buf)?;
        if n == 0 {
            break;
        }
        answer.extend_from_slice(&buf[..n]);
    }
    status_line(&answer).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            "the answer does not start with an HTTP/1.x status line",
        )
    })
}

fn connect(target: &Target, deadline: Instant) -> io::Result<TcpStream> {
    let addrs: Vec<SocketAddr> = (target.host.as_str(), target.port)
        .to_socket_addrs()?
        .collect();
    let mut last = io::Error::new(
        io::ErrorKind::NotFound,
        format!("{} resolves to no address", target.host),
    );
    for addr in addrs {
        match TcpStream::connect_timeout(&addr, left(deadline)?) {
            Ok(stream) => return Ok(stream),
            Err(e) => last = io::Error::new(e.kind(), format!("{addr}: {e}")),
        }
    }
    Err(last)
}

/// The time left before `deadline`, an error once it passed.
fn left(deadline: Instant) -> io::Result<Duration> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        Err(io::Error::new(io::ErrorKind::TimedOut, "timed out"))
    } else {
        Ok(left)
    }
}

/// `HTTP/1.1 200 OK` → `(200, "OK")`.
fn status_line(answer: &[u8]) -> Option<(u16, String)> {
    let line = answer.split(|b| *b == b'\n').next()?;
    let line = std::str::from_utf8(line).ok()?.trim_end_matches('\r');
    let rest = line
        .strip_prefix("HTTP/1.1 ")
        .or_else(|| line.strip_prefix("HTTP/1.0 "))?;
    let (code, reason) = rest.split_once(' ').unwrap_or((rest, ""));
    if code.len() != 3 {
        return None;
    }
    let code: u16 = code.parse().ok()?;
    Some((code, reason.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    fn target(authority: &str, host: &str, port: u16, path: &str) -> Target {
        Target {
            tls: false,
            authority: authority.to_owned(),
            host: host.to_owned(),
            port,
            path: path.to_owned(),
        }
    }

    #[test]
    fn parses_the_urls_a_healthcheck_writes() {
        assert_eq!(
            parse("http://127.0.0.1:7070/healthz"),
            Ok(target("127.0.0.1:7070", "127.0.0.1", 7070, "/healthz"))
        );
        assert_eq!(
            parse("http://[::1]:7070"),
            Ok(target("[::1]:7070", "::1", 7070, "/"))
        );
        assert_eq!(
            parse("http://localhost?x=1"),
            Ok(target("localhost", "localhost", 80, "/?x=1"))
        );
        assert_eq!(
            parse("https://localhost/healthz"),
            Ok(Target {
                tls: true,
                ..target("localhost", "localhost", 443, "/healthz")
            })
        );
        for bad in [
            "127.0.0.1:7070/healthz",
            "ftp://127.0.0.1:7070/healthz",
            "http://",
            "http://:7070/",
            "http://h:70000/",
            "http://[::1/",
            "http://u@h/",
            "http://h/a b",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn reads_the_status_line() {
        assert_eq!(
            status_line(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"),
            Some((200, "OK".to_owned()))
        );
        assert_eq!(
            status_line(b"HTTP/1.0 503 Service Unavailable\r\n"),
            Some((503, "Service Unavailable".to_owned()))
        );
        assert_eq!(status_line(b"SSH-2.0-OpenSSH\r\n"), None);
        assert_eq!(status_line(b"HTTP/1.1 20 OK\r\n"), None);
    }

    /// A server that answers `answer` to one request (a thread: test code).
    #[allow(clippy::disallowed_methods)]
    fn serve_once(answer: &'static [u8]) -> (SocketAddr, std::thread::JoinHandle<String>) {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let handle = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().expect("accept");
            s.set_read_timeout(Some(Duration::from_secs(5)))
                .expect("timeout");
            let mut req = Vec::new();
            let mut buf = [0u8; 1024];
            while !req.ends_with(b"\r\n\r\n") {
                let n = s.read(&mut buf).expect("read");
                if n == 0 {
                    break;
                }
                req.extend_from_slice(&buf[..n]);
            }
            s.write_all(answer).expect("write");
            String::from_utf8_lossy(&req).into_owned()
        });
        (addr, handle)
    }

    #[test]
    fn a_2xx_passes_and_anything_else_fails() {
        let deadline = || Instant::now() + Duration::from_secs(5);
        let (addr, server) = serve_once(b"HTTP/1.1 200 OK\r\ncontent-length: 3\r\n\r\nok\n");
        let t = parse(&format!("http://{addr}/healthz")).expect("url");
        assert_eq!(
            get(&t, None, deadline()).expect("get"),
            (200, "OK".to_owned())
        );
        let request = server.join().expect("server");
        assert!(
            request.starts_with("GET /healthz HTTP/1.1\r\n"),
            "{request}"
        );
        assert!(request.contains(&format!("Host: {addr}\r\n")), "{request}");

        let (addr, server) = serve_once(b"HTTP/1.1 503 Service Unavailable\r\n\r\n");
        let t = parse(&format!("http://{addr}/healthz")).expect("url");
        assert_eq!(get(&t, None, deadline()).expect("get").0, 503);
        server.join().expect("server");
    }

    #[test]
    fn a_silent_server_times_out_within_the_bound() {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let t = parse(&format!("http://{addr}/healthz")).expect("url");
        let start = Instant::now();
        let e = get(&t, None, start + Duration::from_millis(300)).expect_err("no answer");
        assert!(
            matches!(
                e.kind(),
                io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock
            ),
            "{e}"
        );
        assert!(start.elapsed() < Duration::from_secs(3));
        drop(listener);
    }

    #[test]
    fn a_closed_port_is_refused() {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        drop(listener);
        let t = parse(&format!("http://{addr}/")).expect("url");
        let e = get(&t, None, Instant::now() + Duration::from_secs(2)).expect_err("refused");
        assert_eq!(e.kind(), io::ErrorKind::ConnectionRefused, "{e}");
    }
}
