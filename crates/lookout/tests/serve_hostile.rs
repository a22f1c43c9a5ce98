//! `--serve` against hostile clients (issue #36), the built binary on the
//! real dockerd: each case's answer, and lookout's resident memory and
//! open file descriptors before and after it. The figures are printed as
//! a table (`cargo test --test serve_hostile -- --nocapture`) and kept in
//! BENCHMARKS.md §13.
//!
//! What each case proves: a slowloris head is closed at the 10 s head
//! timeout; a 1 MiB header, 100 header fields or 10 000 label filters are
//! refused with 431 without being held; 10 000 idle connections over the
//! connection cap never keep a client with a request from being answered
//! within 1 s (idle ones are shed), and with every slot busy a newcomer
//! gets 503 at once; `Content-Length` with `Transfer-Encoding` answers one
//! request and closes, so nothing smuggled after it is ever answered; a
//! query that is not UTF-8 is a 400; an unknown `Last-Event-ID` is a
//! resync, never a gap; every wrong token is a 401, as fast as a nearly
//! right one. After each, the descriptors come back to where they were.

// Test code reads the child's pipes on threads; only library crates may not spawn.
#![allow(clippy::disallowed_methods)]

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use lookout_e2e::engines;

mod common;
use common::Process;

/// How many idle connections the flood opens (over the default cap, 4096).
const FLOOD: usize = 10_000;

fn unique(what: &str) -> String {
    common::unique("hostile", what)
}

/// A running `lookout docker --serve`, killed on drop.
struct Lookout {
    process: Process,
    addr: SocketAddr,
}

impl Lookout {
    fn start(label: &str, extra: &[&str]) -> Self {
        let (process, addr) =
            common::serve_docker(label, &engines::docker_host(), "127.0.0.1:0", extra);
        Self { process, addr }
    }

    fn fds(&self) -> usize {
        self.process.fds()
    }

    fn rss_kib(&self) -> u64 {
        self.process.rss_kib()
    }

    /// Waits (bounded) until the descriptors are back to `fds`.
    fn settles_to(&self, fds: usize, case: &str) {
        let deadline = Instant::now() + Duration::from_secs(15);
        while self.fds() > fds {
            assert!(
                Instant::now() < deadline,
                "{case}: {} descriptors still open, {fds} before",
                self.fds()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// Sends `raw` and reads until the server closes or `within` passes:
/// what came, and when the server closed (`None`: still open).
fn exchange(addr: SocketAddr, raw: &[u8], within: Duration) -> (Vec<u8>, Option<Duration>) {
    let start = Instant::now();
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_millis(100)))
        .expect("timeout");
    // A server that closes before reading everything may reset the rest.
    let _ = s.write_all(raw);
    read_until_closed(&mut s, start, within)
}

fn read_until_closed(
    s: &mut TcpStream,
    start: Instant,
    within: Duration,
) -> (Vec<u8>, Option<Duration>) {
    let mut got = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    while start.elapsed() < within {
        match s.read(&mut buf) {
            Ok(0) => return (got, Some(start.elapsed())),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return (got, Some(start.elapsed())),
        }
    }
    (got, None)
}

/// The status codes of every response in `bytes`, in order.
fn statuses(bytes: &[u8]) -> Vec<u16> {
    let text = String::from_utf8_lossy(bytes);
    text.match_indices("HTTP/1.1 ")
        .filter_map(|(i, _)| text.get(i + 9..i + 12)?.parse().ok())
        .collect()
}

fn get(path: &str, headers: &str) -> Vec<u8> {
    format!("GET {path} HTTP/1.1\r\nHost: lookout\r\n{headers}Connection: close\r\n\r\n")
        .into_bytes()
}

/// One row of the table.
struct Row {
    case: &'static str,
    answer: String,
    rss: (u64, u64),
    fds: (usize, usize),
}

struct Matrix<'l> {
    lookout: &'l Lookout,
    rows: Vec<Row>,
}

impl Matrix<'_> {
    /// Runs `case` (which returns its answer, having asserted it), then
    /// waits for the descriptors to come back and records the figures.
    fn case(&mut self, case: &'static str, run: impl FnOnce(SocketAddr) -> String) {
        let (fds, rss) = (self.lookout.fds(), self.lookout.rss_kib());
        let answer = run(self.lookout.addr);
        self.lookout.settles_to(fds, case);
        self.rows.push(Row {
            case,
            answer,
            rss: (rss, self.lookout.rss_kib()),
            fds: (fds, self.lookout.fds()),
        });
    }

    fn print(&self) {
        println!("| case | answer | RSS before → after (KiB) | fds before → after |");
        println!("|---|---|---|---|");
        for r in &self.rows {
            println!(
                "| {} | {} | {} → {} | {} → {} |",
                r.case, r.answer, r.rss.0, r.rss.1, r.fds.0, r.fds.1
            );
        }
    }
}

/// Raises this process's open-files limit to the hard one (the flood
/// holds 10 000 sockets).
fn raise_open_files() {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    let _ = setrlimit(
        Resource::Nofile,
        Rlimit {
            current: limit.maximum,
            maximum: limit.maximum,
        },
    );
}

/// The connections waiting in the accept queue of the listener on
/// 127.0.0.1:`port` (`/proc/net/tcp`: a listener's `rx_queue`).
fn accept_queue(port: u16) -> u64 {
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap_or_default();
    let local = format!("0100007F:{port:04X}");
    table
        .lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.get(1) == Some(&local.as_str()) && f.get(3) == Some(&"0A")).then(|| {
                f.get(4)
                    .and_then(|q| q.split_once(':'))
                    .and_then(|(_, rx)| u64::from_str_radix(rx, 16).ok())
                    .unwrap_or(0)
            })
        })
        .sum()
}

/// `n` connections opened without waiting for each handshake, then left
/// idle (nothing sent).
fn flood(addr: SocketAddr, n: usize) -> Vec<socket2::Socket> {
    let target = socket2::SockAddr::from(addr);
    (0..n)
        .filter_map(|_| {
            let s =
                socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).ok()?;
            s.set_nonblocking(true).ok()?;
            match s.connect(&target) {
                Ok(()) => Some(s),
                Err(e) if e.raw_os_error() == Some(115) => Some(s), // EINPROGRESS
                Err(_) => None,
            }
        })
        .collect()
}

/// 10 000 connections opened and left idle (over the default cap, 4096),
/// then a client's `/healthz`: answered within 1 s.
fn idle_flood(addr: SocketAddr) -> String {
    let idle = flood(addr, FLOOD);
    assert!(idle.len() >= FLOOD * 9 / 10, "opened {}", idle.len());
    // Established and idle: what the kernel queued, lookout took
    // (admitted, shedding older ones, or refused).
    let deadline = Instant::now() + Duration::from_secs(20);
    while accept_queue(addr.port()) > 0 {
        assert!(Instant::now() < deadline, "the accept queue never drained");
        std::thread::sleep(Duration::from_millis(20));
    }
    let start = Instant::now();
    let (got, _) = exchange(addr, &get("/healthz", ""), Duration::from_secs(5));
    let took = start.elapsed();
    assert_eq!(statuses(&got), [200], "{}", String::from_utf8_lossy(&got));
    assert!(took < Duration::from_secs(1), "/healthz took {took:?}");
    drop(idle);
    format!("200 in {} ms", took.as_millis())
}

fn slowloris(addr: SocketAddr) -> String {
    let start = Instant::now();
    // Beside it, a connection that never says a thing.
    let mut silent = TcpStream::connect(addr).expect("connect");
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_millis(500)))
        .expect("timeout");
    let head = b"GET /healthz HTTP/1.1\r\nHost: lookout\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    let mut closed = None;
    for b in head {
        if s.write_all(&[*b]).is_err() {
            closed = Some(start.elapsed());
            break;
        }
        let mut buf = [0u8; 64];
        match s.read(&mut buf) {
            Ok(0) => {
                closed = Some(start.elapsed());
                break;
            }
            Ok(n) => panic!("an answer to half a head: {:?}", &buf[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => {
                closed = Some(start.elapsed());
                break;
            }
        }
    }
    let closed = closed.unwrap_or_else(|| panic!("still open after {:?}", start.elapsed()));
    assert!(
        (Duration::from_secs(9)..Duration::from_secs(14)).contains(&closed),
        "closed after {closed:?}"
    );
    silent
        .set_read_timeout(Some(Duration::from_millis(100)))
        .expect("timeout");
    let (said, silent_closed) = read_until_closed(&mut silent, start, Duration::from_secs(14));
    assert!(said.is_empty(), "{said:?}");
    let silent_closed = silent_closed.unwrap_or_else(|| panic!("the silent one still open"));
    assert!(
        silent_closed >= Duration::from_secs(9),
        "closed after {silent_closed:?}"
    );
    format!(
        "closed, no answer, after {:.1} s (one that says nothing: {:.1} s)",
        closed.as_secs_f64(),
        silent_closed.as_secs_f64()
    )
}

fn big_header(addr: SocketAddr) -> String {
    let mut raw = b"GET /healthz HTTP/1.1\r\nHost: lookout\r\nX-Big: ".to_vec();
    raw.resize(raw.len() + (1 << 20), b'a');
    raw.extend_from_slice(b"\r\n\r\n");
    let (got, closed) = exchange(addr, &raw, Duration::from_secs(5));
    assert_eq!(statuses(&got), [431], "{}", String::from_utf8_lossy(&got));
    assert!(closed.is_some(), "closed after the refusal");
    "431, closed".to_owned()
}

fn many_headers(addr: SocketAddr) -> String {
    let many = (0..100).fold(String::new(), |mut h, i| {
        let _ = write!(h, "X-H{i}: v\r\n");
        h
    });
    let (got, _) = exchange(addr, &get("/healthz", &many), Duration::from_secs(5));
    assert_eq!(statuses(&got), [431]);
    "431".to_owned()
}

fn smuggling(addr: SocketAddr) -> String {
    let raw = b"GET /healthz HTTP/1.1\r\nHost: lookout\r\nContent-Length: 4\r\n\
                    Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n\
                    GET /metrics HTTP/1.1\r\nHost: lookout\r\n\r\n";
    let (got, closed) = exchange(addr, raw, Duration::from_secs(5));
    let text = String::from_utf8_lossy(&got);
    assert_eq!(statuses(&got), [200], "one answer: {text}");
    assert!(
        !text.contains("# TYPE"),
        "the smuggled request answered: {text}"
    );
    assert!(closed.is_some(), "closed after it");
    "one answer (200), closed: the request after it never read".to_owned()
}

fn two_lengths(addr: SocketAddr) -> String {
    let raw = b"GET /healthz HTTP/1.1\r\nHost: lookout\r\nContent-Length: 1\r\n\
                    Content-Length: 2\r\n\r\nab";
    let (got, _) = exchange(addr, raw, Duration::from_secs(5));
    assert_eq!(statuses(&got), [400]);
    "400".to_owned()
}

fn label_flood(addr: SocketAddr) -> String {
    let q: Vec<String> = (0..10_000).map(|i| format!("label=k{i}=v")).collect();
    let (got, _) = exchange(
        addr,
        &get(&format!("/instances?{}", q.join("&")), ""),
        Duration::from_secs(5),
    );
    assert_eq!(statuses(&got), [431]);
    // As many as a head holds (16 KiB): answered.
    let q: Vec<String> = (0..1000).map(|i| format!("label=k{i}=v")).collect();
    let (got, _) = exchange(
        addr,
        &get(&format!("/instances?{}", q.join("&")), ""),
        Duration::from_secs(5),
    );
    assert_eq!(statuses(&got), [200]);
    "431 (the head's 16 KiB); 1 000 filters: 200".to_owned()
}

fn not_utf8(addr: SocketAddr) -> String {
    let (got, _) = exchange(
        addr,
        &get("/instances?label=%ff%fe=%c3", ""),
        Duration::from_secs(5),
    );
    let text = String::from_utf8_lossy(&got);
    assert_eq!(statuses(&got), [400], "{text}");
    assert!(text.contains("not UTF-8"), "{text}");
    "400 (not UTF-8)".to_owned()
}

fn foreign_id(addr: SocketAddr) -> String {
    let (got, _) = exchange(
        addr,
        &get(
            "/events",
            "Accept: text/event-stream\r\nLast-Event-ID: zzz-99999999999999999999999\r\n",
        ),
        Duration::from_secs(2),
    );
    let text = String::from_utf8_lossy(&got);
    assert_eq!(statuses(&got), [200], "{text}");
    let lagged = text.find("\"status\":\"lagged\"");
    let connected = text.find("\"status\":\"connected\"");
    assert!(
        lagged.is_some() && lagged < connected,
        "a resync (lagged, the present, connected): {text}"
    );
    // A control character in it: the head is refused.
    let (got, _) = exchange(
        addr,
        &get("/events", "Last-Event-ID: 1\u{7f}2\r\n"),
        Duration::from_secs(2),
    );
    assert_eq!(statuses(&got), [400]);
    "200: lagged, then the present (a resync, never a gap); with a DEL: 400".to_owned()
}

#[test]
fn hostile_clients_are_answered_and_cost_nothing_after() {
    raise_open_files();
    let Some(_lock) = common::require_docker(false) else {
        return;
    };
    let label = format!("lookout.hostile={}", unique("m"));
    let lookout = Lookout::start(&label, &[]);
    let mut m = Matrix {
        lookout: &lookout,
        rows: Vec::new(),
    };
    let start_rss = lookout.rss_kib();

    m.case(
        "slowloris: a head byte every 500 ms; a connection silent",
        slowloris,
    );

    m.case("a 1 MiB header", big_header);

    m.case("100 header fields", many_headers);

    // Memory the allocator keeps after a flood is reused by the next: a
    // bound (what 4096 connections held at once may cost: a silent one
    // holds its socket and its task, ~2 KiB), not a growth.
    let before = lookout.rss_kib();
    for round in [
        "10 000 idle connections, then /healthz",
        "the same again",
        "and again",
    ] {
        m.case(round, idle_flood);
        let after = lookout.rss_kib();
        assert!(
            after <= before + 4096 * 16,
            "{round}: {before} KiB before the floods, {after} KiB after"
        );
    }

    m.case(
        "Content-Length with Transfer-Encoding (smuggling)",
        smuggling,
    );

    m.case("two Content-Lengths", two_lengths);

    m.case("?label= 10 000 filters", label_flood);

    m.case("a query that is not UTF-8", not_utf8);

    m.case("a Last-Event-ID of no process", foreign_id);
    m.print();
    let end_rss = lookout.rss_kib();
    println!("RSS: {start_rss} KiB at start, {end_rss} KiB at the end");
    drop(m);
    drop(lookout);
}

/// Every slot busy (`--max-connections 4`, four streams open): a newcomer
/// gets 503 with `Retry-After` at once; a slot freed, it is answered.
#[test]
fn every_slot_busy_is_a_503_at_once() {
    let Some(_lock) = common::require_docker(false) else {
        return;
    };
    let label = format!("lookout.hostile={}", unique("busy"));
    let lookout = Lookout::start(&label, &["--max-connections", "4"]);
    let addr = lookout.addr;
    let fds = lookout.fds();
    let mut streams: Vec<TcpStream> = (0..4)
        .map(|_| {
            let mut s = TcpStream::connect(addr).expect("connect");
            s.write_all(&get("/events", "")).expect("write");
            s.set_read_timeout(Some(Duration::from_secs(5)))
                .expect("timeout");
            let mut buf = [0u8; 256];
            let n = s.read(&mut buf).expect("the stream's head");
            assert!(buf[..n].starts_with(b"HTTP/1.1 200"), "{:?}", &buf[..n]);
            s
        })
        .collect();
    let start = Instant::now();
    let (got, closed) = exchange(addr, &get("/healthz", ""), Duration::from_secs(5));
    let text = String::from_utf8_lossy(&got);
    assert_eq!(statuses(&got), [503], "{text}");
    assert!(
        text.to_ascii_lowercase().contains("retry-after: 1"),
        "{text}"
    );
    assert!(closed.is_some());
    println!("all busy: 503 in {} ms", start.elapsed().as_millis());
    streams.pop();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (got, _) = exchange(addr, &get("/healthz", ""), Duration::from_secs(5));
        if statuses(&got) == [200] {
            break;
        }
        assert!(Instant::now() < deadline, "a freed slot is taken");
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(streams);
    lookout.settles_to(fds, "all busy");
    let metrics = exchange(addr, &get("/metrics", ""), Duration::from_secs(5)).0;
    let metrics = String::from_utf8_lossy(&metrics);
    assert!(
        metrics.lines().any(
            |l| l.starts_with("lookout_serve_connections_refused_total ") && !l.ends_with(" 0")
        ),
        "{metrics}"
    );
}

/// Behind `--token-file`: no token, a wrong one, one a byte short or long,
/// the wrong scheme: 401 each; the token: 200. The compare is constant
/// time (the unit test in `serve/auth.rs` measures it); over HTTP the
/// medians of a token wrong at its first byte and at its last are printed.
#[test]
fn wrong_tokens_are_refused_alike() {
    let Some(_lock) = common::require_docker(false) else {
        return;
    };
    let dir = common::TempDir::new("hostile", "token");
    let token = "Zq3v9T0kenOfThirtyTwoCharacters0";
    let file = dir.0.join("token");
    std::fs::write(&file, format!("{token}\n")).expect("token file");
    let label = format!("lookout.hostile={}", unique("token"));
    let path = file.display().to_string();
    let lookout = Lookout::start(&label, &["--token-file", path.as_str()]);
    let addr = lookout.addr;
    let status = |auth: &str| {
        let (got, _) = exchange(addr, &get("/instances", auth), Duration::from_secs(5));
        statuses(&got)
    };
    let short = &token[..token.len() - 1];
    for auth in [
        String::new(),
        "Authorization: Bearer wrong\r\n".to_owned(),
        format!("Authorization: Bearer {short}\r\n"),
        format!("Authorization: Bearer {token}x\r\n"),
        format!("Authorization: Basic {token}\r\n"),
    ] {
        assert_eq!(status(&auth), [401], "{auth:?}");
    }
    assert_eq!(status(&format!("Authorization: Bearer {token}\r\n")), [200]);

    let first = format!("Authorization: Bearer X{}\r\n", &token[1..]);
    let last = format!("Authorization: Bearer {short}X\r\n");
    let mut times = (Vec::new(), Vec::new());
    for _ in 0..200 {
        for (auth, into) in [(&first, &mut times.0), (&last, &mut times.1)] {
            let start = Instant::now();
            assert_eq!(status(auth), [401]);
            into.push(start.elapsed());
        }
    }
    let median = |v: &mut Vec<Duration>| {
        v.sort();
        v[v.len() / 2]
    };
    let (a, b) = (median(&mut times.0), median(&mut times.1));
    println!(
        "401 median: wrong at the first byte {} µs, at the last {} µs (ratio {:.2})",
        a.as_micros(),
        b.as_micros(),
        b.as_secs_f64() / a.as_secs_f64()
    );
}
