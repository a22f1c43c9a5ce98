//! `lookout … --serve ADDR` (issue #14): the built binary against the real
//! dockerd, its HTTP clients speaking HTTP/1.1 over plain TCP sockets the
//! tests own (so that a client can stall with a tiny receive buffer, vanish
//! mid-stream, or send a broken request), SSE parsed by `eventsource-stream`,
//! NDJSON by `jq`, `/metrics` by `prometheus-parse`.
//!
//! Needs the engines: `cargo xtask engines up docker` (CI brings them up),
//! and `curl` and `jq` (`cargo xtask engines up` installs them on Debian).

// Test code reads the child's pipes on threads; only library crates may not spawn.
#![allow(clippy::disallowed_methods)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::{Bytes, BytesMut};
use eventsource_stream::Eventsource;
use lookout_e2e::engines;
use lookout_e2e::relay::Relay;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader as AsyncBufReader};
use tokio::net::{TcpSocket, TcpStream};
use tokio_stream::StreamExt;

const WAIT: Duration = Duration::from_secs(30);

// ------------------------------------------------------------------ fixtures

fn require_docker(exclusive: bool) -> engines::EngineLock {
    if let Err(e) = engines::docker_up() {
        panic!(
            "docker is not usable ({e}).\nRun `cargo xtask engines up docker` first \
             (or run the tests under `cargo xtask ci`)."
        );
    }
    engines::lock_engine("docker", exclusive).unwrap_or_else(|e| panic!("{e}"))
}

fn unique(what: &str) -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    format!(
        "lookout-serve-{what}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

/// Removes the test's containers whatever happens.
struct Containers(Vec<String>);

impl Drop for Containers {
    fn drop(&mut self) {
        if !self.0.is_empty() {
            let mut args = vec!["rm", "-f"];
            args.extend(self.0.iter().map(String::as_str));
            let _ = engines::docker(&args);
        }
    }
}

fn docker(args: &[&str]) {
    engines::docker(args).unwrap_or_else(|e| panic!("docker {args:?}: {e}"));
}

fn create(name: &str, labels: &[&str]) {
    let mut args = Vec::new();
    for l in labels {
        args.extend(["--label", l]);
    }
    engines::docker_create_test_container(name, &args).unwrap_or_else(|e| panic!("{e}"));
}

fn lines(r: impl std::io::Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        for line in BufReader::new(r).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// A running `lookout … --serve`, killed on drop.
struct Lookout {
    child: Child,
    err: mpsc::Receiver<String>,
    stderr_seen: Vec<String>,
    addr: SocketAddr,
    _out: mpsc::Receiver<String>,
}

impl Lookout {
    /// `lookout docker --json --label LABEL --serve 127.0.0.1:0 EXTRA…`, once
    /// it serves and is connected.
    fn start(label: &str, host: &str, extra: &[&str]) -> Self {
        let mut args = vec![
            "docker",
            "--json",
            "--host",
            host,
            "--label",
            label,
            "--serve",
            "127.0.0.1:0",
        ];
        args.extend_from_slice(extra);
        let mut child = Command::new(env!("CARGO_BIN_EXE_lookout"))
            .args(&args)
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn lookout");
        let out = lines(child.stdout.take().expect("stdout"));
        let err = lines(child.stderr.take().expect("stderr"));
        let mut me = Self {
            child,
            err,
            stderr_seen: Vec::new(),
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            _out: out,
        };
        let serving = me.stderr("serving", |v| v["status"] == "serving");
        me.addr = serving["addr"]
            .as_str()
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("no address in {serving}"));
        assert_ne!(me.addr.port(), 0, "port 0 is reported as the real port");
        me.stderr("connected", |v| v["status"] == "connected");
        me
    }

    /// Waits for a stderr JSON line satisfying `pred`.
    fn stderr(&mut self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + WAIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line =
                tokio::task::block_in_place(|| self.err.recv_timeout(left)).unwrap_or_else(|_| {
                    panic!(
                        "no {what} line within {WAIT:?}; stderr: {:?}",
                        self.stderr_seen
                    )
                });
            self.stderr_seen.push(line.clone());
            let v: Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("stderr line is not JSON ({e}): {line}"));
            if pred(&v) {
                return v;
            }
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Open file descriptors of the process.
    fn fds(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.pid()))
            .map(Iterator::count)
            .unwrap_or(0)
    }

    /// Resident memory of the process, in KiB.
    fn rss_kib(&self) -> u64 {
        let status =
            std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    }

    /// Waits (bounded) for the process to exit by itself.
    fn exit_within(&mut self, d: Duration) -> std::process::ExitStatus {
        let deadline = Instant::now() + d;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "lookout did not exit within {d:?}"
            );
            thread::sleep(Duration::from_millis(10));
        }
    }

    fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .args([&format!("-{sig}"), &self.child.id().to_string()])
            .status()
            .expect("kill")
            .success();
        assert!(ok, "kill -{sig} lookout");
    }
}

impl Drop for Lookout {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// ------------------------------------------------------------------ HTTP/1.1

/// A response being read: status, headers, and a body read as it comes.
struct Response {
    status: u16,
    headers: HashMap<String, String>,
    reader: AsyncBufReader<TcpStream>,
    body: Framing,
    /// Bytes of the body read but not yet handed out as lines.
    pending: BytesMut,
}

enum Framing {
    Chunked { done: bool },
    Length(usize),
    UntilEof { done: bool },
}

fn request_bytes(path: &str, headers: &[(&str, &str)]) -> Vec<u8> {
    let mut req = format!("GET {path} HTTP/1.1\r\nHost: lookout.test\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.into_bytes()
}

/// Sends `GET path` on a new connection and reads the response head.
async fn open(addr: SocketAddr, path: &str, headers: &[(&str, &str)]) -> Response {
    let stream = TcpStream::connect(addr).await.expect("connect");
    send(stream, path, headers).await
}

async fn send(mut stream: TcpStream, path: &str, headers: &[(&str, &str)]) -> Response {
    stream
        .write_all(&request_bytes(path, headers))
        .await
        .expect("send the request");
    read_head(stream).await
}

async fn read_head(stream: TcpStream) -> Response {
    let mut reader = AsyncBufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line).await.expect("status line");
    let status = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bad status line {line:?}"));
    let mut headers = HashMap::new();
    loop {
        line.clear();
        reader.read_line(&mut line).await.expect("header line");
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        let (k, v) = l.split_once(':').expect("a header");
        headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_owned());
    }
    let body = if headers
        .get("transfer-encoding")
        .is_some_and(|t| t.eq_ignore_ascii_case("chunked"))
    {
        Framing::Chunked { done: false }
    } else if let Some(n) = headers.get("content-length") {
        Framing::Length(n.parse().expect("content-length"))
    } else {
        Framing::UntilEof { done: false }
    };
    Response {
        status,
        headers,
        reader,
        body,
        pending: BytesMut::new(),
    }
}

impl Response {
    /// The next piece of the body as it came off the wire (a chunk), `None`
    /// at its end.
    async fn chunk(&mut self) -> std::io::Result<Option<Bytes>> {
        match &mut self.body {
            Framing::Chunked { done } => {
                if *done {
                    return Ok(None);
                }
                let mut line = String::new();
                if self.reader.read_line(&mut line).await? == 0 {
                    return Err(std::io::ErrorKind::UnexpectedEof.into());
                }
                let size = line.trim_end().split(';').next().unwrap_or("");
                let size = usize::from_str_radix(size, 16).map_err(|_| {
                    std::io::Error::new(std::io::ErrorKind::InvalidData, format!("chunk {line:?}"))
                })?;
                let mut data = vec![0; size + 2];
                self.reader.read_exact(&mut data).await?;
                data.truncate(size);
                if size == 0 {
                    *done = true;
                    return Ok(None);
                }
                Ok(Some(Bytes::from(data)))
            }
            Framing::Length(left) => {
                if *left == 0 {
                    return Ok(None);
                }
                let mut data = vec![0; *left];
                self.reader.read_exact(&mut data).await?;
                *left = 0;
                Ok(Some(Bytes::from(data)))
            }
            Framing::UntilEof { done } => {
                if *done {
                    return Ok(None);
                }
                let mut data = vec![0; 16 * 1024];
                let n = self.reader.read(&mut data).await?;
                if n == 0 {
                    *done = true;
                    return Ok(None);
                }
                data.truncate(n);
                Ok(Some(Bytes::from(data)))
            }
        }
    }

    /// The whole body.
    async fn text(mut self) -> String {
        let mut all = self.pending.to_vec();
        while let Some(c) = self.chunk().await.expect("read the body") {
            all.extend_from_slice(&c);
        }
        String::from_utf8(all).expect("UTF-8 body")
    }

    async fn json(self) -> Value {
        let text = self.text().await;
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
    }

    /// The next NDJSON line, `None` at the end of the body.
    async fn line(&mut self) -> std::io::Result<Option<Value>> {
        loop {
            if let Some(at) = self.pending.iter().position(|&b| b == b'\n') {
                let line = self.pending.split_to(at + 1);
                let v = serde_json::from_slice(&line[..at]).map_err(|e| {
                    std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        format!("not JSON ({e}): {}", String::from_utf8_lossy(&line)),
                    )
                })?;
                return Ok(Some(v));
            }
            match self.chunk().await? {
                Some(c) => self.pending.extend_from_slice(&c),
                None => return Ok(None),
            }
        }
    }

    /// The body as a stream of chunks, for an SSE parser.
    fn into_stream(self) -> impl tokio_stream::Stream<Item = std::io::Result<Bytes>> + Send {
        async_stream::try_stream! {
            let mut me = self;
            while let Some(chunk) = me.chunk().await? {
                yield chunk;
            }
        }
    }
}

/// `GET path` (with a token if given) → status and body.
async fn get(addr: SocketAddr, path: &str, token: Option<&str>) -> (u16, String) {
    let auth = token.map(|t| format!("Bearer {t}"));
    let mut headers = vec![("Connection", "close")];
    if let Some(a) = &auth {
        headers.push(("Authorization", a.as_str()));
    }
    let r = open(addr, path, &headers).await;
    let status = r.status;
    (status, r.text().await)
}

/// The samples of `/metrics`, parsed by a Prometheus text-format parser.
async fn scrape(addr: SocketAddr) -> prometheus_parse::Scrape {
    let (status, text) = get(addr, "/metrics", None).await;
    assert_eq!(status, 200, "{text}");
    prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_owned())))
        .unwrap_or_else(|e| panic!("not the Prometheus text format ({e}): {text}"))
}

fn sample(scrape: &prometheus_parse::Scrape, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    scrape
        .samples
        .iter()
        .find(|s| s.metric == name && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
        .map(|s| match s.value {
            prometheus_parse::Value::Counter(v)
            | prometheus_parse::Value::Gauge(v)
            | prometheus_parse::Value::Untyped(v) => v,
            _ => f64::NAN,
        })
}

async fn subscribers(addr: SocketAddr) -> f64 {
    sample(&scrape(addr).await, "lookout_subscribers", &[]).unwrap_or(f64::NAN)
}

/// Polls `check` every 20 ms until it holds, at most `within`.
async fn eventually<F, Fut>(within: Duration, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<(), String>>,
{
    let deadline = Instant::now() + within;
    loop {
        match check().await {
            Ok(()) => return,
            Err(last) if Instant::now() >= deadline => {
                panic!("{what}: not within {within:?}; last: {last}")
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
}

/// `2026-11-30T03:42:18.979493067Z` (what lookout writes) as a time.
fn parse_rfc3339(s: &str) -> SystemTime {
    let n = |r: std::ops::Range<usize>| -> i64 {
        s.get(r)
            .and_then(|d| d.parse().ok())
            .unwrap_or_else(|| panic!("bad time {s}"))
    };
    let (y, m, d) = (n(0..4), n(5..7), n(8..10));
    // Days from civil (Howard Hinnant).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + n(11..13) * 3600 + n(14..16) * 60 + n(17..19);
    let secs = u64::try_from(secs).expect("after 1970");
    let nanos = u32::try_from(n(20..29)).expect("nanoseconds");
    UNIX_EPOCH + Duration::new(secs, nanos)
}

#[test]
fn rfc3339_parses_what_lookout_writes() {
    let t = UNIX_EPOCH + Duration::new(1_796_010_138, 979_493_067);
    assert_eq!(parse_rfc3339("2026-11-30T03:42:18.979493067Z"), t);
    let leap = UNIX_EPOCH + Duration::from_secs(951_782_400);
    assert_eq!(parse_rfc3339("2000-02-29T00:00:00.000000000Z"), leap);
}

fn kind_of(v: &Value) -> (String, String, String) {
    let s = |k: &str| v[k].as_str().unwrap_or_default().to_owned();
    (s("instance"), s("kind"), s("origin"))
}

// ------------------------------------------------------------------ the tests

/// 200 `/events` clients over one engine connection: 160 read, 20 never
/// read (tiny receive buffers, full), 20 vanish mid-stream. Every reader gets
/// every event, in the same order as stdout, promptly; the stalled ones get
/// `lagged` and the resync diff when they read again; when all are gone, the
/// subscriptions, fds and memory are back where they were.
#[test]
fn fanout_200_clients_over_one_engine_connection() {
    let _lock = require_docker(false);
    runtime().block_on(fanout());
}

const READERS: usize = 160;
const STALLED: usize = 20;
const VANISHING: usize = 20;
/// Containers with a 16 KiB label: events big enough to fill the stalled
/// clients' socket buffers, and more of them than the hub's queue (64).
const FAT: usize = 40;

async fn wait_subscribers(addr: SocketAddr, n: usize, within: Duration) {
    eventually(within, &format!("{n} subscribers"), || async move {
        let have = subscribers(addr).await;
        #[allow(clippy::cast_precision_loss)]
        let want = n as f64;
        if (have - want).abs() < 0.5 {
            Ok(())
        } else {
            Err(format!("{have}"))
        }
    })
    .await;
}

#[allow(clippy::too_many_lines)]
async fn fanout() {
    let relay = Relay::start(&engines::docker_host());
    let name = unique("fan");
    let label = format!("lookout.serve={name}");
    let mut lookout = Lookout::start(&label, &relay.host(), &["--serve-queue", "64"]);
    let addr = lookout.addr;
    let clients = READERS + STALLED + VANISHING;

    // Warm-up: as many clients, come and gone, so that the baseline holds
    // what the allocator and the runtime keep.
    let mut warm = Vec::new();
    for _ in 0..clients {
        warm.push(open(addr, "/events", &[]).await);
    }
    wait_subscribers(addr, clients + 1, WAIT).await;
    drop(warm);
    wait_subscribers(addr, 1, Duration::from_secs(1)).await;
    let (fds0, rss0) = (lookout.fds(), lookout.rss_kib());

    let fat: Vec<String> = (0..FAT).map(|i| format!("{name}-fat{i}")).collect();
    let x = format!("{name}-x");
    let survivor = format!("{name}-survivor");
    let mut all = fat.clone();
    all.extend([x.clone(), survivor.clone()]);
    let _containers = Containers(all);

    // Each reader says when it has read the flood, then reads on to the
    // end of x's lifecycle.
    let (flooded_tx, mut flooded_rx) = tokio::sync::mpsc::channel::<()>(READERS);
    let mut readers = tokio::task::JoinSet::new();
    for _ in 0..READERS {
        let x = x.clone();
        let flooded = flooded_tx.clone();
        readers.spawn(async move {
            let mut r = open(addr, "/events", &[]).await;
            assert_eq!(r.status, 200);
            assert_eq!(r.headers["content-type"], "application/x-ndjson");
            let mut seen = Vec::new();
            loop {
                let v = tokio::time::timeout(WAIT, r.line())
                    .await
                    .expect("an event within WAIT")
                    .expect("a JSON line")
                    .expect("the stream goes on");
                let k = kind_of(&v);
                let done = k.0 == x && k.1 == "removed";
                seen.push(k);
                if seen.len() == 2 * FAT {
                    let _ = flooded.send(()).await;
                }
                if done {
                    let at = v["at"].as_str().map(parse_rfc3339).expect("at");
                    let delay = SystemTime::now().duration_since(at).unwrap_or_default();
                    return (seen, delay);
                }
            }
        });
    }
    drop(flooded_tx);
    let mut vanishing = tokio::task::JoinSet::new();
    for _ in 0..VANISHING {
        vanishing.spawn(async move {
            let mut r = open(addr, "/events", &[]).await;
            let first = tokio::time::timeout(WAIT, r.line()).await;
            assert!(matches!(first, Ok(Ok(Some(_)))), "a first event");
            // Gone mid-stream: the socket closes with `r`.
        });
    }
    let mut stalled = Vec::new();
    for _ in 0..STALLED {
        let socket = TcpSocket::new_v4().expect("socket");
        socket.set_recv_buffer_size(4096).expect("SO_RCVBUF");
        let mut stream = socket.connect(addr).await.expect("connect");
        let req = request_bytes("/events", &[("Accept", "text/event-stream")]);
        stream.write_all(&req).await.expect("request");
        stalled.push(stream);
    }
    wait_subscribers(addr, clients + 1, WAIT).await;
    // One dial makes two `/events` requests: its history (of the last 2 s),
    // then the subscription.
    assert_eq!(relay.counts().events_requests, 2, "one engine dial");

    let fat_value = "f".repeat(16 * 1024);
    let fat_label = format!("lookout.fat={fat_value}");
    for f in &fat {
        create(f, &[&label, &fat_label]);
    }
    let mut rm = vec!["rm"];
    rm.extend(fat.iter().map(String::as_str));
    docker(&rm);
    assert!(
        tokio::time::timeout(WAIT, vanishing.join_all())
            .await
            .is_ok(),
        "the vanishing clients read their first event"
    );
    // The flood is read (the readers parse 16 KiB lines): now the timing
    // of x's events is the server's, not the readers' backlog.
    for _ in 0..READERS {
        let flooded = tokio::time::timeout(WAIT, flooded_rx.recv()).await;
        assert!(
            matches!(flooded, Ok(Some(()))),
            "every reader read the flood"
        );
    }
    create(&x, &[&label]);
    docker(&["start", &x]);
    docker(&["stop", "-t", "0", &x]);
    docker(&["rm", &x]);

    let results = tokio::time::timeout(WAIT, readers.join_all())
        .await
        .expect("every reader got the lifecycle within WAIT");
    let reference = results[0].0.clone();
    let mut delays: Vec<Duration> = Vec::new();
    for (seen, delay) in &results {
        assert_eq!(
            seen, &reference,
            "every reader sees the same events in the same order"
        );
        delays.push(*delay);
    }
    assert_eq!(reference.len(), 2 * FAT + 4, "{reference:?}");
    assert!(reference.iter().all(|k| k.2 == "live"), "{reference:?}");
    let lifecycle: Vec<&str> = reference
        .iter()
        .filter(|k| k.0 == x)
        .map(|k| k.1.as_str())
        .collect();
    assert_eq!(lifecycle, ["created", "started", "stopped", "removed"]);
    for f in &fat {
        let kinds: Vec<&str> = reference
            .iter()
            .filter(|k| &k.0 == f)
            .map(|k| k.1.as_str())
            .collect();
        assert_eq!(kinds, ["created", "removed"], "{f}");
    }
    delays.sort_unstable();
    let (p50, max) = (delays[delays.len() / 2], delays[delays.len() - 1]);
    eprintln!(
        "x's `removed` reached the {READERS} readers after the engine's time: p50 {p50:?}, max {max:?}"
    );
    assert!(
        max < Duration::from_secs(3),
        "stalled and vanished clients delayed the readers: p50 {p50:?}, max {max:?}"
    );

    // Something that changed while the stalled clients did not read.
    create(&survivor, &[&label]);
    docker(&["start", &survivor]);
    let mut resumed = tokio::task::JoinSet::new();
    for stream in stalled {
        let survivor = survivor.clone();
        let x = x.clone();
        resumed.spawn(async move {
            let r = read_head(stream).await;
            assert_eq!(r.status, 200);
            assert_eq!(r.headers["content-type"], "text/event-stream");
            let mut events = Box::pin(r.into_stream().eventsource());
            let mut lagged = None;
            let mut resync = Vec::new();
            let mut before = Vec::new();
            loop {
                let e = tokio::time::timeout(Duration::from_secs(10), events.next())
                    .await
                    .unwrap_or_else(|_| panic!("no lag and resync; before: {before:?}"))
                    .expect("the stream goes on")
                    .expect("a well-formed SSE event");
                let data: Value = serde_json::from_str(&e.data).expect("JSON data");
                match (e.event.as_str(), &lagged) {
                    ("status", None) if data["status"] == "lagged" => {
                        lagged = Some(data["missed"].as_u64().expect("missed"));
                    }
                    ("status", Some(_)) => {
                        assert_eq!(data["status"], "connected", "{data}");
                        break;
                    }
                    ("instance", Some(_)) => resync.push(kind_of(&data)),
                    ("status" | "instance", None) => {
                        before.push((e.event.clone(), kind_of(&data), data["status"].clone()));
                    }
                    (other, _) => panic!("unexpected SSE event {other}: {data}"),
                }
            }
            let missed = lagged.expect("lagged");
            assert!(missed > 0, "missed {missed}");
            assert!(resync.iter().all(|k| k.2 == "resync"), "{resync:?}");
            assert!(
                !resync.iter().any(|k| k.0 == x),
                "x came and went: {resync:?}"
            );
            let theirs: Vec<&str> = resync
                .iter()
                .filter(|k| k.0 == survivor)
                .map(|k| k.1.as_str())
                .collect();
            assert_eq!(theirs, ["created", "started"], "{resync:?}");
        });
    }
    let resumed_ok = tokio::time::timeout(WAIT, resumed.join_all()).await;
    assert!(resumed_ok.is_ok(), "the stalled clients resynced");
    let resyncs = sample(&scrape(addr).await, "lookout_subscriber_resyncs_total", &[]);
    assert!(
        resyncs.is_some_and(|r| r >= 20.0),
        "lookout_subscriber_resyncs_total {resyncs:?}"
    );

    // Every client is gone (the resumed ones with their tasks): within 1 s
    // the subscriptions, then the fds, are back to the baseline.
    wait_subscribers(addr, 1, Duration::from_secs(1)).await;
    eventually(Duration::from_secs(1), "fds back to the baseline", || {
        let fds = lookout.fds();
        async move {
            if fds <= fds0 {
                Ok(())
            } else {
                Err(format!("{fds} fds, baseline {fds0}"))
            }
        }
    })
    .await;
    let rss = lookout.rss_kib();
    eprintln!("RSS: baseline {rss0} KiB, after {rss} KiB; fds: baseline {fds0}");
    assert!(
        rss <= rss0 + 8 * 1024,
        "RSS grew from {rss0} KiB to {rss} KiB"
    );
    let counts = relay
        .wait(WAIT, |c| c.live == 1)
        .await
        .unwrap_or_else(|c| panic!("one engine connection at the relay: {c:?}"));
    assert_eq!(counts.events_requests, 2, "still the one dial: {counts:?}");
    lookout.signal("TERM");
    assert_eq!(lookout.exit_within(Duration::from_secs(2)).code(), Some(0));
}
