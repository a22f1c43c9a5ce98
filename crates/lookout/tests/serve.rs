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
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::{Bytes, BytesMut};
use eventsource_stream::Eventsource;
use lookout_e2e::engines;
use lookout_e2e::relay::Relay;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader as AsyncBufReader};
use tokio::net::{TcpSocket, TcpStream};
use tokio_stream::StreamExt;

// ------------------------------------------------------------------ fixtures

mod common;
use common::{Containers, Process, WAIT, lines};

fn require_docker(exclusive: bool) -> Option<engines::EngineLock> {
    common::require_docker(exclusive)
}

fn unique(what: &str) -> String {
    common::unique("serve", what)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
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

/// A running `lookout … --serve`, killed on drop.
struct Lookout {
    process: Process,
    addr: SocketAddr,
}

impl std::ops::Deref for Lookout {
    type Target = Process;
    fn deref(&self) -> &Process {
        &self.process
    }
}

impl std::ops::DerefMut for Lookout {
    fn deref_mut(&mut self) -> &mut Process {
        &mut self.process
    }
}

impl Lookout {
    /// `lookout docker --json --label LABEL --serve 127.0.0.1:0 EXTRA…`, once
    /// it serves and is connected.
    fn start(label: &str, host: &str, extra: &[&str]) -> Self {
        Self::spawn(label, host, "127.0.0.1:0", extra)
    }

    /// As [`start`](Self::start), serving on `addr`.
    fn start_on(label: &str, addr: &str, extra: &[&str]) -> Self {
        Self::spawn(label, &engines::docker_host(), addr, extra)
    }

    fn spawn(label: &str, host: &str, addr: &str, extra: &[&str]) -> Self {
        let (process, addr) = common::serve_docker(label, host, addr, extra);
        Self { process, addr }
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
        let _ = write!(req, "{k}: {v}\r\n");
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
#[allow(clippy::many_single_char_names)] // the date algorithm's own names
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

/// The top-level keys of the JSON object `raw` come in this order (and
/// only these: `raw` holds exactly as many objects' worth of them).
fn assert_keys_in_order(raw: &str, keys: &[&str]) {
    let v: Value = serde_json::from_str(raw).unwrap_or_else(|e| panic!("not JSON ({e}): {raw}"));
    let obj = match &v {
        Value::Array(a) => a.first().and_then(Value::as_object),
        other => other.as_object(),
    }
    .unwrap_or_else(|| panic!("no object in {raw}"));
    let mut have: Vec<&str> = obj.keys().map(String::as_str).collect();
    let mut want = keys.to_vec();
    have.sort_unstable();
    want.sort_unstable();
    assert_eq!(have, want, "{raw}");
    let at: Vec<usize> = keys
        .iter()
        .map(|k| {
            raw.find(&format!("\"{k}\":"))
                .unwrap_or_else(|| panic!("{k} in {raw}"))
        })
        .collect();
    assert!(at.is_sorted(), "keys out of order in {raw}");
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
    let Some(_lock) = require_docker(false) else {
        return;
    };
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
    // `docker stop` asks first: `stopping`, then `stopped`.
    assert_eq!(reference.len(), 2 * FAT + 5, "{reference:?}");
    assert!(reference.iter().all(|k| k.2 == "live"), "{reference:?}");
    let lifecycle: Vec<&str> = reference
        .iter()
        .filter(|k| k.0 == x)
        .map(|k| k.1.as_str())
        .collect();
    assert_eq!(
        lifecycle,
        ["created", "started", "stopping", "stopped", "removed"]
    );
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

/// SSE through `eventsource-stream` and NDJSON through `curl | jq`, with
/// `?initial=true` and a `?label=` filter.
#[test]
fn sse_and_ndjson_through_real_parsers() {
    let Some(_lock) = require_docker(false) else {
        return;
    };
    runtime().block_on(async {
        let name = unique("parsers");
        let label = format!("lookout.serve={name}");
        let (a, b) = (format!("{name}-a"), format!("{name}-b"));
        let _containers = Containers(vec![a.clone(), b.clone()]);
        create(&a, &[&label, "lookout.pick=yes"]);
        docker(&["start", &a]);
        create(&b, &[&label, "lookout.pick=no"]);
        let lookout = Lookout::start(&label, &engines::docker_host(), &[]);
        let path = "/events?initial=true&label=lookout.pick%3Dyes";

        let r = open(lookout.addr, path, &[("Accept", "text/event-stream")]).await;
        assert_eq!(r.status, 200);
        assert_eq!(r.headers["content-type"], "text/event-stream");
        assert_eq!(r.headers["cache-control"], "no-cache");
        let mut sse = Box::pin(r.into_stream().eventsource());
        let mut next_sse = async || {
            let e = tokio::time::timeout(WAIT, sse.next())
                .await
                .expect("an SSE event within WAIT")
                .expect("the stream goes on")
                .expect("well-formed SSE");
            let data: Value = serde_json::from_str(&e.data)
                .unwrap_or_else(|err| panic!("data is not JSON ({err}): {}", e.data));
            (e.event, data, e.data)
        };

        let url = format!("http://{}{path}", lookout.addr);
        let mut curl = Command::new("curl")
            .args(["-sSN", &url])
            .stdout(Stdio::piped())
            .spawn()
            .expect("curl (install curl)");
        let mut jq = Command::new("jq")
            .args(["-c", "--unbuffered", "[.instance, .kind, .origin]"])
            .stdin(curl.stdout.take().expect("curl's stdout"))
            .stdout(Stdio::piped())
            .spawn()
            .expect("jq (install jq)");
        let jq_lines = lines(jq.stdout.take().expect("jq's stdout"));
        let next_jq = || -> Value {
            let line = tokio::task::block_in_place(|| jq_lines.recv_timeout(WAIT))
                .expect("a jq line within WAIT");
            serde_json::from_str(&line).expect("jq prints JSON")
        };
        let jq_row = |id: &str, kind: &str, origin: &str| serde_json::json!([id, kind, origin]);

        // The present first, as `initial` events, then the status.
        for kind in ["created", "started"] {
            let (event, data, raw) = next_sse().await;
            assert_eq!(event, "instance");
            assert_eq!(
                kind_of(&data),
                (a.clone(), kind.to_owned(), "initial".to_owned())
            );
            assert_keys_in_order(
                &raw,
                &["provider", "instance", "kind", "origin", "at", "labels"],
            );
            assert_eq!(data["labels"]["lookout.pick"], "yes");
            assert_eq!(next_jq(), jq_row(&a, kind, "initial"));
        }
        let (event, data, _) = next_sse().await;
        assert_eq!(event, "status");
        assert_eq!(
            data,
            serde_json::json!({"status": "connected", "instances": 2})
        );

        // b is filtered out; a's changes come live.
        docker(&["start", &b]);
        docker(&["stop", "-t", "0", &a]);
        docker(&["rm", "-f", &a, &b]);
        for kind in ["stopping", "stopped", "removed"] {
            let (event, data, _) = next_sse().await;
            assert_eq!(event, "instance", "{data}");
            assert_eq!(
                kind_of(&data),
                (a.clone(), kind.to_owned(), "live".to_owned())
            );
            assert_eq!(next_jq(), jq_row(&a, kind, "live"));
        }
        let _ = curl.kill();
        let _ = curl.wait();
        let _ = jq.wait();
    });
}

/// `/instances`, `/instances/{id}`, `?wait=running|stopped|gone`, 408, and
/// what a bad request gets.
#[test]
fn instances_wait_and_bad_requests() {
    let Some(_lock) = require_docker(false) else {
        return;
    };
    runtime().block_on(async {
        let name = unique("inst");
        let label = format!("lookout.serve={name}");
        let w = format!("{name}-w");
        let _containers = Containers(vec![w.clone()]);
        let lookout = Lookout::start(&label, &engines::docker_host(), &[]);
        let addr = lookout.addr;

        assert_eq!(get(addr, "/instances", None).await, (200, "[]".to_owned()));
        let waiter = {
            let path = format!("/instances/{w}?wait=running&timeout=20s");
            tokio::spawn(async move { get(addr, &path, None).await })
        };
        // Not yet there.
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(!waiter.is_finished(), "the wait holds the request");
        create(&w, &[&label]);
        docker(&["start", &w]);
        let (status, body) = tokio::time::timeout(WAIT, waiter)
            .await
            .expect("the wait resolves")
            .expect("the request task");
        assert_eq!(status, 200, "{body}");
        let v: Value = serde_json::from_str(&body).expect("JSON");
        assert_eq!(v["state"], "running", "{v}");
        assert_eq!(v["instance"], w.as_str(), "{v}");

        let (status, body) = get(addr, "/instances", None).await;
        assert_eq!(status, 200, "{body}");
        let list: Value = serde_json::from_str(&body).expect("JSON");
        let list = list.as_array().expect("an array");
        assert_eq!(list.len(), 1, "{body}");
        assert_eq!(list[0].as_object().map(serde_json::Map::len), Some(5));
        assert_keys_in_order(&body, &["provider", "instance", "state", "labels", "since"]);
        assert_eq!(list[0]["provider"], "docker");
        assert_eq!(list[0]["labels"]["lookout.serve"], name.as_str());
        let since = parse_rfc3339(list[0]["since"].as_str().expect("since"));
        assert!(since <= SystemTime::now());

        let (status, body) = get(addr, &format!("/instances/{w}"), None).await;
        assert_eq!(status, 200, "{body}");
        let one: Value = serde_json::from_str(&body).expect("JSON");
        assert_eq!(&one, &list[0]);

        let t0 = Instant::now();
        let (status, body) = get(
            addr,
            &format!("/instances/{w}?wait=stopped&timeout=1s"),
            None,
        )
        .await;
        let took = t0.elapsed();
        assert_eq!(status, 408, "{body}");
        assert!(body.contains("\"error\""), "{body}");
        assert!(
            took >= Duration::from_secs(1) && took < Duration::from_secs(5),
            "{took:?}"
        );

        // Ids may contain `/` (Kubernetes: deployment/NS/NAME).
        let (status, body) = get(addr, "/instances/deployment/default/web", None).await;
        assert_eq!(status, 404, "{body}");
        let v: Value = serde_json::from_str(&body).expect("JSON");
        assert!(
            v["error"]
                .as_str()
                .is_some_and(|e| e.contains("deployment/default/web")),
            "{v}"
        );

        let gone = {
            let path = format!("/instances/{w}?wait=gone&timeout=20s");
            tokio::spawn(async move { get(addr, &path, None).await })
        };
        docker(&["rm", "-f", &w]);
        let (status, body) = tokio::time::timeout(WAIT, gone)
            .await
            .expect("the wait resolves")
            .expect("the request task");
        assert_eq!(status, 200, "{body}");
        assert_eq!(
            serde_json::from_str::<Value>(&body).expect("JSON")["state"],
            "gone"
        );

        for (path, want) in [
            ("/nope", 404),
            // `/` is the page (issue #23: the_page_is_served_open_and_self_contained),
            // `?since=` a resume (sse_resume_with_last_event_id); twice is not.
            ("/?page=2", 400),
            ("/events?initial=maybe", 400),
            ("/events?label=novalue", 400),
            ("/events?since=1&since=2", 400),
            ("/instances?x=1", 400),
            ("/instances/a?wait=up", 400),
            ("/instances/a?timeout=1s", 400),
            ("/instances/a?wait=running&timeout=soon", 400),
            ("/instances/a?wait=running&timeout=2h", 400),
            ("/metrics?x=1", 400),
        ] {
            let (status, body) = get(addr, path, None).await;
            assert_eq!(status, want, "{path}: {body}");
            let v: Value = serde_json::from_str(&body)
                .unwrap_or_else(|e| panic!("{path}: not JSON ({e}): {body}"));
            assert!(v["error"].is_string(), "{path}: {v}");
        }
    });
}

/// `--token-file`: 401 without or with a wrong token, 200 with it;
/// `/healthz` stays open. The warning for a non-loopback address without a
/// token; bad setups exit 2.
#[test]
fn token_warning_and_bad_setup() {
    let Some(_lock) = require_docker(false) else {
        return;
    };
    let dir = std::env::temp_dir().join(unique("token"));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let token_file = dir.join("token");
    std::fs::write(&token_file, "s3cret-T0ken\n").expect("token file");
    let empty_file = dir.join("empty");
    std::fs::write(&empty_file, "\n").expect("empty file");
    let token_path = token_file.display().to_string();
    let name = unique("auth");
    let label = format!("lookout.serve={name}");
    runtime().block_on(async {
        let lookout = Lookout::start(
            &label,
            &engines::docker_host(),
            &["--token-file", &token_path],
        );
        let addr = lookout.addr;
        for path in ["/instances", "/events", "/metrics", "/nope"] {
            let (status, body) = get(addr, path, None).await;
            assert_eq!(status, 401, "{path} without a token: {body}");
            let (status, body) = get(addr, path, Some("s3cret-T0ke")).await;
            assert_eq!(status, 401, "{path} with a wrong token: {body}");
        }
        let r = open(addr, "/instances", &[("Connection", "close")]).await;
        assert_eq!(r.status, 401);
        assert_eq!(r.headers["www-authenticate"], "Bearer");
        assert_eq!(get(addr, "/instances", Some("s3cret-T0ken")).await.0, 200);
        assert_eq!(get(addr, "/metrics", Some("s3cret-T0ken")).await.0, 200);
        let r = open(addr, "/events", &[("Authorization", "Bearer s3cret-T0ken")]).await;
        assert_eq!(r.status, 200);
        drop(r);
        let (status, body) = get(addr, "/healthz", None).await;
        assert_eq!(status, 200, "{body}");
        assert!(
            lookout.stderr_seen.iter().all(|l| !l.contains("warning")),
            "no warning on loopback: {:?}",
            lookout.stderr_seen
        );

        // Any address, no token: a warning (a JSON line under --json).
        let open_one = Lookout::start_on(&label, "0.0.0.0:0", &[]);
        assert!(
            open_one.stderr_seen.iter().any(|l| {
                serde_json::from_str::<Value>(l).is_ok_and(|v| {
                    v["warning"]
                        .as_str()
                        .is_some_and(|w| w.contains("--token-file"))
                })
            }),
            "a warning: {:?}",
            open_one.stderr_seen
        );
        // With a token: none.
        let mut guarded = Lookout::start_on(&label, "0.0.0.0:0", &["--token-file", &token_path]);
        assert!(
            guarded.stderr_seen.iter().all(|l| !l.contains("warning")),
            "{:?}",
            guarded.stderr_seen
        );
        // SIGINT as SIGTERM: exit 0, at once.
        guarded.signal("INT");
        let code = tokio::task::block_in_place(|| guarded.exit_within(Duration::from_secs(2)));
        assert_eq!(code.code(), Some(0));
    });

    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("a port to hold");
    let taken = taken.local_addr().expect("its address").to_string();
    let empty = empty_file.display().to_string();
    let missing = dir.join("missing").display().to_string();
    let cases: &[&[&str]] = &[
        &["docker", "--serve", "nonsense"],
        &["docker", "--serve", "localhost"],
        &["docker", "--serve", "127.0.0.1:99999"],
        &["docker", "--serve", &taken],
        &["docker", "--serve", "127.0.0.1:0", "--token-file", &missing],
        &["docker", "--serve", "127.0.0.1:0", "--token-file", &empty],
        &["docker", "--token-file", &token_path],
    ];
    for args in cases {
        let stderr = common::usage_error(args);
        assert!(
            !stderr.contains("s3cret"),
            "{args:?}: the token is never printed"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `/healthz`: 503 with the disconnected status while dockerd is down, 200
/// once it is back; `/metrics` says so too. Breaks dockerd: holds the docker
/// lock exclusively, as the other tests that restart it.
#[test]
fn healthz_follows_dockerd_down_and_up() {
    let Some(_lock) = require_docker(true) else {
        return;
    };
    runtime().block_on(async {
        let name = unique("health");
        let label = format!("lookout.serve={name}");
        let lookout = Lookout::start(&label, &engines::docker_host(), &[]);
        let addr = lookout.addr;
        let (status, body) = get(addr, "/healthz", None).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(
            serde_json::from_str::<Value>(&body).expect("JSON"),
            serde_json::json!({"status": "connected", "instances": 0})
        );

        tokio::task::block_in_place(engines::docker_kill9).unwrap_or_else(|e| panic!("{e}"));
        let restarted = scopeguard(|| {
            let _ = engines::docker_start();
        });
        eventually(WAIT, "/healthz 503 while dockerd is down", || async move {
            let (status, body) = get(addr, "/healthz", None).await;
            let v: Value = serde_json::from_str(&body).map_err(|e| format!("{e}: {body}"))?;
            if status == 503 && v["status"] == "disconnected" && v["error"].is_string() {
                Ok(())
            } else {
                Err(format!("{status} {body}"))
            }
        })
        .await;
        let scraped = scrape(addr).await;
        assert_eq!(sample(&scraped, "lookout_connected", &[]), Some(0.0));
        assert!(
            sample(&scraped, "lookout_reconnects_total", &[]).is_some_and(|n| n >= 1.0),
            "reconnects counted"
        );

        tokio::task::block_in_place(engines::docker_start).unwrap_or_else(|e| panic!("{e}"));
        drop(restarted);
        eventually(WAIT, "/healthz 200 once dockerd is back", || async move {
            match get(addr, "/healthz", None).await {
                (200, body) if body.contains("\"connected\"") => Ok(()),
                (status, body) => Err(format!("{status} {body}")),
            }
        })
        .await;
        assert_eq!(
            sample(&scrape(addr).await, "lookout_connected", &[]),
            Some(1.0)
        );
    });
}

/// Runs `f` on drop (dockerd is started again even if the test fails).
fn scopeguard(f: impl FnOnce()) -> impl Drop {
    struct Guard<F: FnOnce()>(Option<F>);
    impl<F: FnOnce()> Drop for Guard<F> {
        fn drop(&mut self) {
            if let Some(f) = self.0.take() {
                f();
            }
        }
    }
    Guard(Some(f))
}

/// `/metrics` in the Prometheus text format, every documented metric, and
/// the counters moving as events flow.
#[test]
fn metrics_parse_and_move() {
    let Some(_lock) = require_docker(false) else {
        return;
    };
    runtime().block_on(async {
        let name = unique("metrics");
        let label = format!("lookout.serve={name}");
        let c = format!("{name}-c");
        let _containers = Containers(vec![c.clone()]);
        let lookout = Lookout::start(&label, &engines::docker_host(), &[]);
        let addr = lookout.addr;
        let r = open(addr, "/metrics", &[("Connection", "close")]).await;
        assert!(
            r.headers["content-type"].starts_with("text/plain; version=0.0.4"),
            "{:?}",
            r.headers
        );
        drop(r);
        let before = scrape(addr).await;
        for metric in [
            "lookout_connected",
            "lookout_reconnects_total",
            "lookout_events_total",
            "lookout_instances",
            "lookout_subscribers",
            "lookout_subscriber_resyncs_total",
            "lookout_stops_total",
        ] {
            assert!(
                before.samples.iter().any(|s| s.metric == metric),
                "{metric} missing"
            );
            assert!(before.docs.contains_key(metric), "{metric} has no HELP");
        }
        let created = [("kind", "created"), ("origin", "live")];
        let n0 = sample(&before, "lookout_events_total", &created).expect("created/live");
        assert_eq!(sample(&before, "lookout_connected", &[]), Some(1.0));
        assert_eq!(sample(&before, "lookout_instances", &[]), Some(0.0));
        assert_eq!(sample(&before, "lookout_subscribers", &[]), Some(1.0), "stdout");
        // Every outcome's series, from the start (issue #47).
        for outcome in ["completed", "failed", "stopped", "unknown"] {
            assert_eq!(
                sample(&before, "lookout_stops_total", &[("outcome", outcome)]),
                Some(0.0),
                "{outcome}"
            );
        }

        let stream = open(addr, "/events", &[]).await;
        create(&c, &[&label]);
        eventually(WAIT, "the counters move", || async move {
            let s = scrape(addr).await;
            let n = sample(&s, "lookout_events_total", &created).unwrap_or(f64::NAN);
            let instances = sample(&s, "lookout_instances", &[]);
            let subscribers = sample(&s, "lookout_subscribers", &[]);
            let age = sample(&s, "lookout_last_event_age_seconds", &[]);
            if (n - n0 - 1.0).abs() < 0.5
                && instances == Some(1.0)
                && subscribers == Some(2.0)
                && age.is_some_and(|a| (0.0..60.0).contains(&a))
            {
                Ok(())
            } else {
                Err(format!(
                    "events {n} (before {n0}), instances {instances:?}, subscribers {subscribers:?}, age {age:?}"
                ))
            }
        })
        .await;
        drop(stream);
    });
}

/// A request with 200 header fields, and one with a 64 KiB field: 431 (or
/// the connection reset before the answer could be read), at once.
async fn assert_header_floods_refused(addr: SocketAddr) {
    let many: Vec<(String, String)> = (0..200)
        .map(|i| (format!("X-H{i}"), "v".to_owned()))
        .collect();
    let many: Vec<(&str, &str)> = many.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let big = "b".repeat(64 * 1024);
    for headers in [many, vec![("X-Big", big.as_str())]] {
        let mut s = TcpStream::connect(addr).await.expect("connect");
        // The server may close before it has read it all.
        let _ = s.write_all(&request_bytes("/healthz", &headers)).await;
        let mut buf = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut buf)).await;
        let head = String::from_utf8_lossy(&buf);
        assert!(read.is_ok(), "the server answered or closed: {head}");
        assert!(
            buf.is_empty() || head.starts_with("HTTP/1.1 431"),
            "refused: {head}"
        );
    }
}

/// A request head too big or with too many fields is refused, a slowloris
/// client is cut at the header timeout, and neither holds up the others;
/// SIGTERM ends open streams and waits and exits 0 within 2 s, a client that
/// does not read notwithstanding.
#[test]
fn bounded_requests_and_sigterm() {
    let Some(_lock) = require_docker(false) else {
        return;
    };
    runtime().block_on(async {
        let name = unique("limits");
        let label = format!("lookout.serve={name}");
        let c = format!("{name}-c");
        let _containers = Containers(vec![c.clone()]);
        let mut fat_containers = Containers(Vec::new());
        let mut lookout = Lookout::start(&label, &engines::docker_host(), &[]);
        let addr = lookout.addr;
        let mut reader = open(addr, "/events", &[]).await;

        // Slowloris: heads that never end.
        let mut slow = Vec::new();
        for _ in 0..20 {
            let mut s = TcpStream::connect(addr).await.expect("connect");
            s.write_all(b"GET /events HTTP/1.1\r\nHost: x\r\nX-Slow: ")
                .await
                .expect("a partial head");
            slow.push(s);
        }
        let slow_since = Instant::now();
        assert_header_floods_refused(addr).await;

        // Meanwhile the others are served promptly.
        let t0 = Instant::now();
        assert_eq!(get(addr, "/healthz", None).await.0, 200);
        assert!(t0.elapsed() < Duration::from_secs(1), "{:?}", t0.elapsed());
        create(&c, &[&label]);
        let e = tokio::time::timeout(Duration::from_secs(5), reader.line())
            .await
            .expect("an event promptly")
            .expect("JSON")
            .expect("the stream goes on");
        assert_eq!(
            kind_of(&e),
            (c.clone(), "created".to_owned(), "live".to_owned())
        );

        // The slow heads are cut at the header timeout (10 s).
        for mut s in slow {
            let mut buf = Vec::new();
            let read = tokio::time::timeout(Duration::from_secs(15), s.read_to_end(&mut buf)).await;
            assert!(read.is_ok(), "a slowloris connection is closed");
        }
        let took = slow_since.elapsed();
        assert!(took < Duration::from_secs(14), "{took:?}");

        // A client that does not read, its socket buffers full: 24 events of
        // 16 KiB each (~400 KiB) against ~150 KiB of buffers.
        let socket = TcpSocket::new_v4().expect("socket");
        socket.set_recv_buffer_size(4096).expect("SO_RCVBUF");
        let mut stalled = socket.connect(addr).await.expect("connect");
        stalled
            .write_all(&request_bytes("/events", &[]))
            .await
            .expect("request");
        let fat_label = format!("lookout.fat={}", "f".repeat(16 * 1024));
        let fat: Vec<String> = (0..12).map(|i| format!("{c}-fat{i}")).collect();
        fat_containers.0.clone_from(&fat);
        for f in &fat {
            create(f, &[&label, &fat_label]);
        }
        let mut rm = vec!["rm"];
        rm.extend(fat.iter().map(String::as_str));
        docker(&rm);
        for _ in 0..2 * fat.len() {
            let e = tokio::time::timeout(WAIT, reader.line())
                .await
                .expect("the reader keeps up")
                .expect("JSON")
                .expect("the stream goes on");
            assert!(
                e["instance"].as_str().is_some_and(|i| i.contains("-fat")),
                "{e}"
            );
        }

        // SIGTERM with a stream, a stalled stream and a wait open.
        let waiter = tokio::spawn(async move {
            get(addr, "/instances/nothing?wait=running&timeout=60s", None).await
        });
        tokio::time::sleep(Duration::from_millis(200)).await;
        let t0 = Instant::now();
        lookout.signal("TERM");
        let end = tokio::time::timeout(Duration::from_secs(2), reader.line()).await;
        assert!(
            matches!(end, Ok(Ok(None))),
            "the stream ends cleanly: {end:?}"
        );
        let (status, _) = tokio::time::timeout(Duration::from_secs(2), waiter)
            .await
            .expect("the wait ends")
            .expect("the request task");
        assert_eq!(status, 503);
        let code = tokio::task::block_in_place(|| lookout.exit_within(Duration::from_secs(2)));
        assert_eq!(code.code(), Some(0));
        let took = t0.elapsed();
        eprintln!("SIGTERM to exit, a stalled client open: {took:?}");
        assert!(took < Duration::from_secs(2), "{took:?}");
        drop(stalled);
    });
}

/// A container of the test image with a healthcheck that passes while
/// `/ok` exists (exec form: the image has no shell, and the docker CLI's
/// `--health-cmd` needs one), created through the Engine API with curl.
fn create_with_check(name: &str, label: &str) {
    let (key, value) = label.split_once('=').expect("KEY=VALUE");
    let body = serde_json::json!({
        "Image": engines::test_image(),
        "Cmd": ["sleep", "3600"],
        "Labels": { key: value },
        "HostConfig": { "NetworkMode": "none" },
        "Healthcheck": {
            "Test": ["CMD", "/bin/busybox", "test", "-f", "/ok"],
            "Interval": 300_000_000,
            "Retries": 1,
        },
    });
    common::docker_create(name, &body);
}

/// `GET /instances/{id}?wait={what}&timeout={timeout}`.
async fn wait(addr: SocketAddr, id: &str, what: &str, timeout: &str) -> (u16, String) {
    let path = format!("/instances/{id}?wait={what}&timeout={timeout}");
    get(addr, &path, None).await
}

/// `(kind, health)` of each instance's events on stdout, until `id` has
/// `n` (`-` for an event without a health).
fn kinds_and_health(
    lookout: &Lookout,
    id: &str,
    n: usize,
) -> HashMap<String, Vec<(String, String)>> {
    let mut seen: HashMap<String, Vec<(String, String)>> = HashMap::new();
    while seen.get(id).map_or(0, Vec::len) < n {
        let e = lookout.event();
        let instance = e["instance"].as_str().unwrap_or_default().to_owned();
        let kind = e["kind"].as_str().unwrap_or_default().to_owned();
        let health = e["health"].as_str().unwrap_or("-").to_owned();
        seen.entry(instance).or_default().push((kind, health));
    }
    seen
}

/// `--readiness`: `/instances` objects carry `ready` and the health;
/// `?wait=ready|unready` follow the healthcheck; `/metrics` counts the
/// ready; stdout's events carry the health. Without `--readiness`,
/// `?wait=ready` is a 400 that says so.
#[test]
fn readiness_instances_wait_and_metrics() {
    let Some(_lock) = require_docker(false) else {
        return;
    };
    runtime().block_on(async {
        let name = unique("ready");
        let label = format!("lookout.serve={name}");
        let (plain, checked) = (format!("{name}-p"), format!("{name}-h"));
        let _containers = Containers(vec![plain.clone(), checked.clone()]);
        let off = Lookout::start(&label, &engines::docker_host(), &[]);
        let (status, body) = get(off.addr, "/instances/x?wait=ready", None).await;
        assert_eq!(status, 400, "{body}");
        assert!(body.contains("--readiness"), "{body}");
        drop(off);

        let lookout = Lookout::start(&label, &engines::docker_host(), &["--readiness"]);
        let addr = lookout.addr;
        create(&plain, &[&label]);
        docker(&["start", &plain]);
        let (status, body) = wait(addr, &plain, "ready", "20s").await;
        assert_eq!(status, 200, "{body}");
        let v: Value = serde_json::from_str(&body).expect("JSON");
        assert_eq!(
            (&v["state"], &v["ready"], &v["health"]),
            (&"running".into(), &true.into(), &"none".into()),
            "{v}"
        );
        assert_eq!(v["paused"], false, "{v}");
        assert_keys_in_order(
            &body,
            &[
                "provider", "instance", "state", "ready", "health", "paused", "labels", "since",
            ],
        );

        create_with_check(&checked, &label);
        docker(&["start", &checked]);
        let (status, body) = wait(addr, &checked, "running", "20s").await;
        assert_eq!(status, 200, "{body}");
        let v: Value = serde_json::from_str(&body).expect("JSON");
        // Started: not ready until a check passes (none can while /ok is missing).
        assert_eq!(
            (&v["ready"], &v["health"]),
            (&false.into(), &"starting".into()),
            "{v}"
        );
        let (status, body) = wait(addr, &checked, "ready", "1s").await;
        assert_eq!(status, 408, "{body}");

        docker(&["exec", &checked, "/bin/busybox", "touch", "/ok"]);
        let (status, body) = wait(addr, &checked, "ready", "20s").await;
        assert_eq!(status, 200, "{body}");
        let v: Value = serde_json::from_str(&body).expect("JSON");
        assert_eq!(
            (&v["ready"], &v["health"]),
            (&true.into(), &"healthy".into()),
            "{v}"
        );
        eventually(WAIT, "two ready instances", || async move {
            let s = scrape(addr).await;
            match sample(&s, "lookout_instances_ready", &[]) {
                Some(n) if (n - 2.0).abs() < 0.5 => Ok(()),
                other => Err(format!("lookout_instances_ready {other:?}")),
            }
        })
        .await;

        docker(&["exec", &checked, "/bin/busybox", "rm", "/ok"]);
        let (status, body) = wait(addr, &checked, "unready", "20s").await;
        assert_eq!(status, 200, "{body}");
        let v: Value = serde_json::from_str(&body).expect("JSON");
        assert_eq!(
            (&v["state"], &v["ready"], &v["health"]),
            (&"running".into(), &false.into(), &"unhealthy".into()),
            "{v}"
        );

        // Stdout: each container's events, the health in each.
        let seen = kinds_and_health(&lookout, &checked, 4);
        let pairs = |v: &[(&str, &str)]| -> Vec<(String, String)> {
            v.iter()
                .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
                .collect()
        };
        assert_eq!(
            seen[&plain],
            pairs(&[("created", "-"), ("started", "none"), ("ready", "none")]),
            "{seen:?}"
        );
        assert_eq!(
            seen[&checked],
            pairs(&[
                ("created", "-"),
                ("started", "starting"),
                ("ready", "healthy"),
                ("unready", "unhealthy"),
            ]),
            "{seen:?}"
        );
    });
}

// ------------------------------------------------------------------ resume

/// One SSE event as the `eventsource-stream` parser gives it: (event, id,
/// data as JSON).
type Sse = (String, String, Value);

/// An SSE `/events` stream parsed by `eventsource-stream`, each event
/// within WAIT.
async fn sse_stream(
    addr: SocketAddr,
    path: &str,
    headers: &[(&str, &str)],
) -> std::pin::Pin<Box<impl tokio_stream::Stream<Item = Sse> + use<>>> {
    let mut all = vec![("Accept", "text/event-stream")];
    all.extend_from_slice(headers);
    let r = open(addr, path, &all).await;
    assert_eq!(r.status, 200);
    Box::pin(r.into_stream().eventsource().map(|e| {
        let e = e.expect("well-formed SSE");
        let data = serde_json::from_str(&e.data)
            .unwrap_or_else(|err| panic!("data is not JSON ({err}): {}", e.data));
        (e.event, e.id, data)
    }))
}

async fn next_sse(s: &mut (impl tokio_stream::Stream<Item = Sse> + Unpin)) -> Sse {
    tokio::time::timeout(WAIT, s.next())
        .await
        .expect("an SSE event within WAIT")
        .expect("the stream goes on")
}

/// The next `event: instance`, skipping statuses: (instance, kind, origin)
/// and its id.
async fn next_instance(
    s: &mut (impl tokio_stream::Stream<Item = Sse> + Unpin),
) -> ((String, String, String), String) {
    for _ in 0..16 {
        let (event, id, data) = next_sse(s).await;
        if event == "instance" {
            return (kind_of(&data), id);
        }
    }
    panic!("no instance event among 16");
}

fn row(id: &str, kind: &str, origin: &str) -> (String, String, String) {
    (id.to_owned(), kind.to_owned(), origin.to_owned())
}

/// SSE resume (issue #23): every hub event has an `id:`; a client that
/// reconnects with `Last-Event-ID` (or `?since=` for NDJSON) gets exactly
/// what it missed while the hub holds it, else `lagged` and the whole
/// present as `resync`, then live; so does one with an id of another
/// process or a malformed one.
#[test]
fn sse_resume_with_last_event_id() {
    let Some(_lock) = require_docker(false) else {
        return;
    };
    runtime().block_on(async {
        let name = unique("resume");
        let label = format!("lookout.serve={name}");
        let (a, b, c) = (
            format!("{name}-a"),
            format!("{name}-b"),
            format!("{name}-c"),
        );
        let _containers = Containers(vec![a.clone(), b.clone(), c.clone()]);
        // A small queue, so that "away longer" is a few events.
        let lookout = Lookout::start(&label, &engines::docker_host(), &["--serve-queue", "8"]);
        let addr = lookout.addr;

        // Away for N = 3 events: exactly those 3 on reconnect.
        let mut sse = sse_stream(addr, "/events", &[]).await;
        create(&a, &[&label]);
        let (created, id) = next_instance(&mut sse).await;
        assert_eq!(created, row(&a, "created", "live"));
        assert!(!id.is_empty(), "an event has an id");
        drop(sse);
        docker(&["start", &a]);
        docker(&["stop", "-t", "0", &a]);
        docker(&["rm", &a]);
        let (status, body) = wait(addr, &a, "gone", "20s").await;
        assert_eq!(status, 200, "{body}");
        let mut sse = sse_stream(addr, "/events", &[("Last-Event-ID", &id)]).await;
        let mut ids = vec![id.clone()];
        for kind in ["started", "stopping", "stopped", "removed"] {
            let (got, id) = next_instance(&mut sse).await;
            assert_eq!(got, row(&a, kind, "live"));
            ids.push(id);
        }
        // And then live, with nothing in between.
        create(&b, &[&label]);
        let (got, b_id) = next_instance(&mut sse).await;
        assert_eq!(got, row(&b, "created", "live"));
        ids.push(b_id.clone());
        let unique_ids: std::collections::BTreeSet<&String> = ids.iter().collect();
        assert_eq!(unique_ids.len(), ids.len(), "ids differ: {ids:?}");
        drop(sse);

        // NDJSON with ?since=: the same resume; its lines carry the id.
        docker(&["start", &b]);
        let (status, body) = wait(addr, &b, "running", "20s").await;
        assert_eq!(status, 200, "{body}");
        let since: String = form_urlencoded_byte(&b_id);
        let mut r = open(addr, &format!("/events?since={since}"), &[]).await;
        let line = tokio::time::timeout(WAIT, r.line())
            .await
            .expect("a line within WAIT")
            .expect("JSON")
            .expect("the stream goes on");
        assert_eq!(kind_of(&line), row(&b, "started", "live"));
        assert!(line["id"].as_str().is_some_and(|i| !i.is_empty()), "{line}");
        drop(r);

        // Away for longer than the queue (8): 9 events after b's start.
        // Lagged, then the whole present (b runs, c is stopped), then live.
        for _ in 0..4 {
            docker(&["stop", "-t", "0", &b]);
            docker(&["start", &b]);
        }
        create(&c, &[&label]);
        let (status, body) = wait(addr, &c, "stopped", "20s").await;
        assert_eq!(status, 200, "{body}");
        let foreign = "0123456789abcdef-1".to_owned();
        for last in [b_id.as_str(), foreign.as_str(), "not an id"] {
            let mut sse = sse_stream(addr, "/events", &[("Last-Event-ID", last)]).await;
            let (event, _, data) = next_sse(&mut sse).await;
            assert_eq!(
                (event.as_str(), &data["status"]),
                ("status", &"lagged".into()),
                "{last}: {data}"
            );
            let mut present = Vec::new();
            loop {
                let (event, _, data) = next_sse(&mut sse).await;
                if event == "status" {
                    assert_eq!(data["status"], "connected", "{data}");
                    break;
                }
                present.push(kind_of(&data));
            }
            present.sort();
            assert_eq!(
                present,
                [
                    row(&b, "created", "resync"),
                    row(&b, "started", "resync"),
                    row(&c, "created", "resync"),
                ],
                "{last}: the whole present"
            );
            docker(&["start", &c]);
            let (got, _) = next_instance(&mut sse).await;
            assert_eq!(got, row(&c, "started", "live"), "{last}: then live");
            docker(&["stop", "-t", "0", &c]);
            for kind in ["stopping", "stopped"] {
                let (got, _) = next_instance(&mut sse).await;
                assert_eq!(got, row(&c, kind, "live"), "{last}");
            }
        }
    });
}

/// `s` as a query value (ids are hex, digits and `-`: nothing to escape,
/// but a test should not rely on it).
fn form_urlencoded_byte(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b == b'-' {
                char::from(b).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// The page at `/` (issue #23): served from the binary without a token
/// (it holds no data), HTML with a real table, and nothing it would fetch
/// from elsewhere; what it reads still needs the token.
#[test]
fn the_page_is_served_open_and_self_contained() {
    let Some(_lock) = require_docker(false) else {
        return;
    };
    let dir = std::env::temp_dir().join(unique("page"));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let token_file = dir.join("token");
    std::fs::write(&token_file, "page-T0ken\n").expect("token file");
    let token_path = token_file.display().to_string();
    let label = format!("lookout.serve={}", unique("page"));
    runtime().block_on(async {
        let lookout = Lookout::start(
            &label,
            &engines::docker_host(),
            &["--token-file", &token_path],
        );
        let r = open(lookout.addr, "/", &[("Connection", "close")]).await;
        assert_eq!(r.status, 200);
        assert_eq!(r.headers["content-type"], "text/html; charset=utf-8");
        let csp = r.headers["content-security-policy"].clone();
        assert!(
            csp.contains("default-src 'none'") && csp.contains("connect-src 'self'"),
            "{csp}"
        );
        let html = r.text().await;
        assert!(html.starts_with("<!doctype html>"), "{html:.80}");
        for part in [
            "<table id=\"instances\">",
            "<thead>",
            "role=\"status\"",
            "sessionStorage",
            "Last-Event-ID",
        ] {
            assert!(html.contains(part), "{part}");
        }
        for external in ["http://", "https://", "src=", "href=", "@import", "url("] {
            assert!(
                !html.contains(external),
                "no external reference: {external}"
            );
        }
        assert_eq!(get(lookout.addr, "/instances", None).await.0, 401);
        assert_eq!(get(lookout.addr, "/?x=1", None).await.0, 400);
    });
    let _ = std::fs::remove_dir_all(&dir);
}

// ------------------------------------------------------------------ the page in Chromium

/// Where the screenshots go: the target directory.
fn target_dir() -> std::path::PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| engines::workspace_root().join("target"), Into::into)
}

/// The state cell of `id`'s row in the page's table (`null`: no row).
fn row_state(id: &str) -> String {
    format!(
        "(() => {{ const r = document.querySelector('#instances tbody tr[data-instance=\"{id}\"]'); \
         return r ? r.cells[2].textContent : null; }})()"
    )
}

const STATUS: &str = "document.getElementById('status')?.dataset.state ?? null";

/// The page at `/` in Debian's headless Chromium against the real dockerd,
/// behind `--token-file`: it asks for the token, shows a container's
/// lifecycle in its table as it happens (read through the `DevTools`
/// protocol), and after lookout is restarted on the same address it
/// reconnects by itself (resume from the old process's id: lagged, the
/// present as resync) and goes on live. Screenshots in the target
/// directory (`lookout-page*.png`).
#[test]
fn page_in_chromium_follows_a_container_and_reconnects() {
    use lookout_e2e::browser::Browser;
    let Some(_lock) = require_docker(false) else {
        return;
    };
    let dir = std::env::temp_dir().join(unique("chromium"));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let token_file = dir.join("token");
    std::fs::write(&token_file, "page-T0ken\n").expect("token file");
    let token_path = token_file.display().to_string();
    let name = unique("page");
    let label = format!("lookout.serve={name}");
    let (x, y) = (format!("{name}-x"), format!("{name}-y"));
    let _containers = Containers(vec![x.clone(), y.clone()]);
    let args = ["--token-file", token_path.as_str()];
    let lookout = Lookout::start(&label, &engines::docker_host(), &args);
    let addr = lookout.addr;
    let browser = Browser::start().unwrap_or_else(|e| panic!("{e}"));
    let mut page = browser.page().unwrap_or_else(|e| panic!("{e}"));
    page.navigate(&format!("http://{addr}/"))
        .unwrap_or_else(|e| panic!("{e}"));
    let within = WAIT;
    let is = |want: &'static str| move |v: &Value| v == want;
    page.wait_for(STATUS, within, is("unauthorized"))
        .unwrap_or_else(|e| panic!("the page asks for the token: {e}"));
    page.eval(
        "document.getElementById('token').value = 'page-T0ken'; \
         document.getElementById('login').requestSubmit(); true",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    page.wait_for(STATUS, within, is("connected"))
        .unwrap_or_else(|e| panic!("connected with the token: {e}"));

    // A lifecycle, row by row.
    create(&x, &[&label, "lookout.tier=web"]);
    page.wait_for(&row_state(&x), within, is("stopped"))
        .unwrap_or_else(|e| panic!("created: {e}"));
    docker(&["start", &x]);
    page.wait_for(&row_state(&x), within, is("running"))
        .unwrap_or_else(|e| panic!("started: {e}"));
    // The header counts what the table holds now, not what the engine
    // held when the page connected (none).
    page.wait_for(
        "document.getElementById('engine').textContent",
        within,
        is("— engine connected, 1 instance"),
    )
    .unwrap_or_else(|e| panic!("the header's count is current: {e}"));
    let labels = page
        .eval(&format!(
            "document.querySelector('#instances tbody tr[data-instance=\"{x}\"]').cells[4].textContent"
        ))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        labels
            .as_str()
            .is_some_and(|l| l.contains("lookout.tier=web")),
        "{labels}"
    );
    // The label filter hides what does not match.
    let shown = page
        .eval(
            "(() => { const f = document.getElementById('filter'); f.value = 'lookout.tier=db'; \
             f.dispatchEvent(new Event('input')); \
             const n = document.querySelectorAll('#instances tbody tr').length; \
             f.value = ''; f.dispatchEvent(new Event('input')); return n; })()",
        )
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(shown, 0, "filtered out");
    page.screenshot(&target_dir().join("lookout-page.png"))
        .unwrap_or_else(|e| panic!("{e}"));
    docker(&["stop", "-t", "0", &x]);
    page.wait_for(&row_state(&x), within, is("stopped"))
        .unwrap_or_else(|e| panic!("stopped: {e}"));
    docker(&["rm", &x]);
    page.wait_for(&row_state(&x), within, Value::is_null)
        .unwrap_or_else(|e| panic!("removed: {e}"));
    let logged = page
        .eval("document.querySelectorAll('#events tbody tr').length")
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(logged.as_u64().is_some_and(|n| n >= 4), "{logged}");

    // lookout restarts on the same address; y is created meanwhile.
    drop(lookout);
    page.wait_for(STATUS, within, is("reconnecting"))
        .unwrap_or_else(|e| panic!("the page sees lookout gone: {e}"));
    create(&y, &[&label]);
    let lookout = Lookout::start_on(&label, &addr.to_string(), &args);
    page.wait_for(&row_state(&y), within, is("stopped"))
        .unwrap_or_else(|e| panic!("reconnected by itself, y in the present: {e}"));
    let origin = page
        .eval("document.querySelector('#events tbody tr').cells[3].textContent")
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(origin, "⟳ resync", "y came with the resync");
    docker(&["start", &y]);
    page.wait_for(&row_state(&y), within, is("running"))
        .unwrap_or_else(|e| panic!("live after the reconnect: {e}"));
    page.screenshot(&target_dir().join("lookout-page-reconnected.png"))
        .unwrap_or_else(|e| panic!("{e}"));
    drop(lookout);
    drop(browser);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Chromium's own `EventSource` against `/events`: every event has an id;
/// when the connection is cut (lookout going on), it reconnects by itself
/// with `Last-Event-ID` and gets exactly what it missed, no duplicate.
#[test]
fn chromium_event_source_resumes_exactly() {
    use lookout_e2e::browser::{Browser, TcpCut};
    let Some(_lock) = require_docker(false) else {
        return;
    };
    let name = unique("es");
    let label = format!("lookout.serve={name}");
    let x = format!("{name}-x");
    let _containers = Containers(vec![x.clone()]);
    let lookout = Lookout::start(&label, &engines::docker_host(), &[]);
    let cut = TcpCut::start(lookout.addr).unwrap_or_else(|e| panic!("{e}"));
    let browser = Browser::start().unwrap_or_else(|e| panic!("{e}"));
    let mut page = browser.page().unwrap_or_else(|e| panic!("{e}"));
    page.navigate(&format!("http://{}/", cut.addr()))
        .unwrap_or_else(|e| panic!("{e}"));
    page.wait_for(STATUS, WAIT, |v| v == "connected")
        .unwrap_or_else(|e| panic!("{e}"));
    // An EventSource of its own, recording each instance event with the
    // id the browser saw, and each (re)open.
    page.eval(
        "window.got = []; window.opens = 0; \
         window.es = new EventSource('/events'); \
         es.onopen = () => { window.opens += 1; }; \
         es.addEventListener('instance', (m) => { const d = JSON.parse(m.data); \
           window.got.push([d.instance, d.kind, d.origin, m.lastEventId].join(' ')); }); true",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    page.wait_for("window.opens", WAIT, |v| v == 1)
        .unwrap_or_else(|e| panic!("{e}"));
    create(&x, &[&label]);
    page.wait_for("window.got.length", WAIT, |v| v == 1)
        .unwrap_or_else(|e| panic!("{e}"));
    // Cut: the EventSource retries after its delay (3 s by default), while
    // x starts and stops.
    cut.cut();
    docker(&["start", &x]);
    docker(&["stop", "-t", "0", &x]);
    let got = page
        .wait_for("window.got", WAIT, |v| {
            v.as_array().is_some_and(|a| a.len() >= 4)
        })
        .unwrap_or_else(|e| panic!("{e}"));
    let opens = page.eval("window.opens").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(opens, 2, "it reconnected once: {got}");
    docker(&["rm", &x]);
    let got = page
        .wait_for("window.got", WAIT, |v| {
            v.as_array().is_some_and(|a| a.len() >= 5)
        })
        .unwrap_or_else(|e| panic!("{e}"));
    let rows: Vec<Vec<String>> = got
        .as_array()
        .expect("an array")
        .iter()
        .map(|r| {
            r.as_str()
                .unwrap_or_default()
                .split(' ')
                .map(str::to_owned)
                .collect()
        })
        .collect();
    let kinds: Vec<(&str, &str, &str)> = rows
        .iter()
        .map(|r| (r[0].as_str(), r[1].as_str(), r[2].as_str()))
        .collect();
    assert_eq!(
        kinds,
        [
            (x.as_str(), "created", "live"),
            (x.as_str(), "started", "live"),
            (x.as_str(), "stopping", "live"),
            (x.as_str(), "stopped", "live"),
            (x.as_str(), "removed", "live"),
        ],
        "exactly the missed events, in order, once: {got}"
    );
    let ids: std::collections::BTreeSet<&String> = rows.iter().map(|r| &r[3]).collect();
    assert_eq!(ids.len(), 5, "an id each: {got}");
    drop(browser);
    drop(cut);
    drop(lookout);
}

/// `/events` is streamed by lookout's own writer when a connection's first
/// request is a whole, plain `GET /events`, and by hyper otherwise (after
/// another request on the same connection, or a head that comes in
/// pieces): both answer the same head and the same lines, live.
#[test]
fn events_alike_whoever_writes_them() {
    let Some(_lock) = require_docker(false) else {
        return;
    };
    runtime().block_on(async {
        let name = unique("writers");
        let label = format!("lookout.serve={name}");
        let (a, b) = (format!("{name}-a"), format!("{name}-b"));
        let _containers = Containers(vec![a.clone(), b.clone()]);
        create(&a, &[&label]);
        docker(&["start", &a]);
        let lookout = Lookout::start(&label, &engines::docker_host(), &[]);
        let path = "/events?initial=true";

        // The first request: lookout's writer.
        let direct = open(lookout.addr, path, &[]).await;
        // After a /healthz on the same connection: hyper.
        let mut stream = TcpStream::connect(lookout.addr).await.expect("connect");
        stream
            .write_all(&request_bytes("/healthz", &[]))
            .await
            .expect("send /healthz");
        let mut head = Vec::new();
        while !head.ends_with(b"\r\n\r\n") {
            let mut byte = [0u8; 1];
            stream
                .read_exact(&mut byte)
                .await
                .expect("the /healthz head");
            head.push(byte[0]);
        }
        let head = String::from_utf8(head).expect("UTF-8 head");
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        let length: usize = head
            .lines()
            .find_map(|l| {
                l.to_ascii_lowercase()
                    .strip_prefix("content-length:")
                    .map(|v| v.trim().to_owned())
            })
            .and_then(|v| v.parse().ok())
            .expect("a content-length");
        let mut body = vec![0; length];
        stream
            .read_exact(&mut body)
            .await
            .expect("the /healthz body");
        let after_healthz = send(stream, path, &[]).await;
        // A head in two pieces: hyper.
        let mut stream = TcpStream::connect(lookout.addr).await.expect("connect");
        let request = request_bytes(path, &[]);
        stream.write_all(&request[..10]).await.expect("a piece");
        tokio::time::sleep(Duration::from_millis(100)).await;
        stream.write_all(&request[10..]).await.expect("the rest");
        let in_pieces = read_head(stream).await;

        let mut answers = [direct, after_healthz, in_pieces];
        for r in &answers {
            assert_eq!(r.status, 200);
            for (header, value) in [
                ("content-type", "application/x-ndjson"),
                ("cache-control", "no-cache"),
                ("x-accel-buffering", "no"),
                ("transfer-encoding", "chunked"),
            ] {
                assert_eq!(
                    r.headers.get(header).map(String::as_str),
                    Some(value),
                    "{header}"
                );
            }
            assert!(r.headers.contains_key("date"), "{:?}", r.headers);
        }
        create(&b, &[&label]);
        docker(&["start", &b]);
        let mut seen = Vec::new();
        for r in &mut answers {
            let mut lines = Vec::new();
            while lines.len() < 4 {
                let line = tokio::time::timeout(WAIT, r.line())
                    .await
                    .expect("a line within WAIT")
                    .expect("a read")
                    .expect("the stream goes on");
                lines.push(kind_of(&line));
            }
            seen.push(lines);
        }
        let expected = vec![
            row(&a, "created", "initial"),
            row(&a, "started", "initial"),
            row(&b, "created", "live"),
            row(&b, "started", "live"),
        ];
        for (writer, lines) in ["lookout's", "hyper after /healthz", "hyper, head in pieces"]
            .iter()
            .zip(&seen)
        {
            assert_eq!(lines, &expected, "{writer}");
        }
        // Each goes when its client does.
        drop(answers);
        wait_subscribers(lookout.addr, 1, Duration::from_secs(2)).await;
    });
}
