#![allow(
    clippy::cast_precision_loss,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    clippy::print_stdout,
    clippy::print_stderr,
    clippy::too_many_lines,
    // A bench harness: its clients are tasks of its own runtime.
    clippy::disallowed_methods
)]
//! `lookout docker --serve` (issue #14) with many `/events` clients on
//! loopback: delivery latency from the engine's timestamp of an event to the
//! moment a client has read its line, and lookout's CPU and memory.
//!
//! The built `lookout` binary (`target/<profile>/lookout`, next to this
//! bench's own directory, or `LOOKOUT_BIN`; `cargo xtask bench` builds it
//! first) runs `docker --json --label lookout.bench=TAG --serve 127.0.0.1:0`
//! against the real dockerd, stdout to /dev/null (its printer is one more
//! subscription, as in production). C clients, tasks of this process's
//! tokio runtime, each hold `GET /events` (NDJSON) over a TCP connection of
//! their own and parse every line (`serde_json`); a stalled client sends
//! the request on a socket with a 4 KiB receive buffer and never reads.
//! The driver (bollard) runs L container lifecycles (create, start, stop
//! `t=0`, remove), one after the other; every client must read all 4·L
//! events, live and in order. Latency = the client's read time − the
//! event's `at` (dockerd's `timeNano`), both this machine's realtime clock.
//! lookout's CPU time is `utime + stime` of /proc/PID/stat over the drive;
//! RSS is `VmHWM` (peak) and `VmRSS` once every client is gone.
//!
//! Runs, each with a fresh lookout, each row printed when it is over: 1000
//! clients (L = 300); the same with the previous commit's binary when
//! `LOOKOUT_ANCHOR_BIN` names one (side by side: the ratio of CPU per
//! delivery is the figure); **bursts**: the same 1000 clients and L = 300,
//! fired 50 at a time as `docker compose up` / `down` of a project does (50
//! creates and starts at once, then 50 stops and removes at once), this
//! binary and the anchor; 1000 clients of which 10 % stalled (L = 500:
//! 2000 events of ~300 bytes; a stalled client's socket buffers, ~150 KiB as
//! lookout bounds its send buffer, hold about 500, and more than the hub's
//! queue (1024) passes it: it lags); 10 000 clients (L = 100, with
//! `--max-connections`; only when this process may open that many files).
//! Clients connect in batches of
//! 500. At the end the stalled clients read again (counted by
//! `lookout_subscriber_resyncs_total`), then every client goes and the time
//! until lookout has freed their subscriptions is measured.
//!
//! Last, in the same process run, **the floors**: a plain thread of a
//! process of its own writes each line once to each of the 1000 clients'
//! loopback sockets, no lookout, no HTTP (see `floor`): what one delivery
//! costs any server on this machine before its own code. Its lines are
//! either 1200 of its own, 5 ms apart (**paced**: back to back, its caches
//! warm, as in the runs before issue #37's second part), or **dockerd's own
//! events**: it reads the engine's event stream and writes each container
//! event (`create`, `start`, `die`, `destroy`) as it comes, while the bench
//! drives the same 300 lifecycles as lookout's run, one at a time and in
//! bursts of 50: the same events at the same times, on the same machine
//! under the same engine's load; each measured before and after lookout's
//! runs, and their mean taken (the machine drifts over the minutes
//! between). Beside the 10 000-client run, the same at 10 000 clients (100
//! lifecycles).
//!
//! The last two lines compare this binary with the floor fed the same
//! events in the same run: `steady: lookout/floor cpu R p99 R` (CPU per
//! delivery, and the readers' p99, at 1000 clients) and `burst: lookout per
//! event / floor per event R` (CPU per event delivered in the burst run,
//! over the burst-fed floor's per write). The ratios against the paced
//! floor are printed before them.
//!
//! `LOOKOUT_SERVE_RUNS=steady,burst,stalled,many,floor` (any of them; all
//! by default) picks the runs.
//!
//! `cargo bench -p lookout-e2e --bench serve`: the sizes above. Without
//! `--bench` (as `cargo test --benches` runs it): 50 clients, L = 5. Without
//! `LOOKOUT_ENGINES=1`: prints "skipped: engines not configured".

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bollard::Docker;
use lookout_e2e::engines;

use lookout_e2e::bench_docker::{
    CALL, Cleanup, LABEL, LookoutProcess, down, engines_configured, lifecycle, lookout_binary,
    now_ns, pct, rfc3339_ns, up,
};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader as AsyncBufReader};
use tokio::net::{TcpSocket, TcpStream};

/// A running `lookout --serve`, killed on drop.
struct Lookout {
    process: LookoutProcess,
    addr: SocketAddr,
}

impl Lookout {
    fn start(bin: &Path, tag: &str, extra: &[&str]) -> Self {
        let mut args: Vec<String> = vec!["docker".into()];
        args.extend(extra.iter().map(|a| (*a).to_owned()));
        args.extend(
            [
                "--json",
                "--host",
                &engines::docker_host(),
                "--label",
                &format!("{LABEL}={tag}"),
                "--serve",
                "127.0.0.1:0",
            ]
            .map(str::to_owned),
        );
        let process = LookoutProcess::start(bin, &args, false);
        let serving = process.status("serving");
        let addr = serving["addr"]
            .as_str()
            .and_then(|a| a.parse().ok())
            .expect("the serving address");
        process.status("connected");
        Self { process, addr }
    }

    fn proc_file(&self, name: &str) -> String {
        std::fs::read_to_string(format!("/proc/{}/{name}", self.process.child.id()))
            .unwrap_or_default()
    }

    /// (utime, stime), in seconds: what lookout's own code costs, and what the
    /// kernel costs it (on loopback a send also runs the receiving socket's
    /// TCP input, accounted to the sender).
    fn cpu_split(&self) -> (f64, f64) {
        stat_times(&self.proc_file("stat"))
    }

    /// Context switches of all its threads (voluntary and not): a worker
    /// that runs out of work and sleeps, and is woken, counts one.
    fn switches(&self) -> u64 {
        let dir = format!("/proc/{}/task", self.process.child.id());
        let Ok(tasks) = std::fs::read_dir(dir) else {
            return 0;
        };
        tasks
            .filter_map(Result::ok)
            .filter_map(|t| std::fs::read_to_string(t.path().join("status")).ok())
            .flat_map(|status| {
                status
                    .lines()
                    .filter(|l| l.contains("ctxt_switches:"))
                    .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
                    .collect::<Vec<_>>()
            })
            .sum()
    }

    /// `VmHWM` and `VmRSS`, KiB.
    fn memory_kib(&self) -> (u64, u64) {
        let status = self.proc_file("status");
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
                .unwrap_or(0)
        };
        (field("VmHWM:"), field("VmRSS:"))
    }
}

fn request(path: &str) -> Vec<u8> {
    format!("GET {path} HTTP/1.1\r\nHost: bench\r\n\r\n").into_bytes()
}

/// A chunked response body, line by line.
struct Body {
    reader: AsyncBufReader<TcpStream>,
    pending: Vec<u8>,
}

impl Body {
    async fn open(addr: SocketAddr, path: &str) -> std::io::Result<Self> {
        let mut stream = TcpStream::connect(addr).await?;
        stream.write_all(&request(path)).await?;
        let mut reader = AsyncBufReader::new(stream);
        let mut line = String::new();
        loop {
            line.clear();
            if reader.read_line(&mut line).await? == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            if line == "\r\n" {
                break;
            }
        }
        Ok(Self {
            reader,
            pending: Vec::new(),
        })
    }

    async fn line(&mut self) -> std::io::Result<Vec<u8>> {
        loop {
            if let Some(at) = self.pending.iter().position(|&b| b == b'\n') {
                let rest = self.pending.split_off(at + 1);
                let mut line = std::mem::replace(&mut self.pending, rest);
                line.truncate(at);
                return Ok(line);
            }
            let mut size = String::new();
            if self.reader.read_line(&mut size).await? == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            let n = usize::from_str_radix(size.trim_end(), 16)
                .map_err(|_| std::io::Error::other(format!("chunk size {size:?}")))?;
            if n == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            let mut data = vec![0; n + 2];
            self.reader.read_exact(&mut data).await?;
            data.truncate(n);
            self.pending.extend_from_slice(&data);
        }
    }
}

/// What one reading client saw: (instance, kind) in order, latencies (ns).
type Read = (Vec<(String, String)>, Vec<f64>);

async fn reader(addr: SocketAddr, expected: usize) -> Result<Read, String> {
    let mut body = Body::open(addr, "/events")
        .await
        .map_err(|e| format!("open: {e}"))?;
    let mut seen = Vec::with_capacity(expected);
    let mut latencies = Vec::with_capacity(expected);
    while seen.len() < expected {
        let line = tokio::time::timeout(CALL, body.line())
            .await
            .map_err(|_| format!("no event within {CALL:?} after {}", seen.len()))?
            .map_err(|e| format!("read: {e}"))?;
        let read_at = now_ns();
        let v: Value = serde_json::from_slice(&line).map_err(|e| format!("JSON: {e}"))?;
        if v["origin"] != "live" {
            return Err(format!("not live: {v}"));
        }
        let at = v["at"].as_str().and_then(rfc3339_ns).ok_or("no at")?;
        latencies.push((read_at - at) as f64);
        let s = |k: &str| v[k].as_str().unwrap_or_default().to_owned();
        seen.push((s("instance"), s("kind")));
    }
    Ok((seen, latencies))
}

/// A metric without labels from `/metrics`.
async fn metric(addr: SocketAddr, name: &str) -> Option<f64> {
    let mut s = TcpStream::connect(addr).await.ok()?;
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n")
        .await
        .ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).await.ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
}

async fn subscribers(addr: SocketAddr) -> Option<f64> {
    metric(addr, "lookout_subscribers").await
}

/// How many clients connect at once.
const CONNECT_BATCH: usize = 500;

/// Until `lookout_subscribers` is at least `n` (bounded: CALL).
async fn wait_subscribed(addr: SocketAddr, n: usize) {
    let deadline = Instant::now() + CALL;
    while subscribers(addr).await.is_none_or(|s| s < n as f64) {
        assert!(
            Instant::now() < deadline,
            "{n} subscriptions not open within {CALL:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

struct Outcome {
    clients: usize,
    stalled: usize,
    events: usize,
    p50: f64,
    p99: f64,
    max: f64,
    cpu: f64,
    /// Of `cpu`, the kernel's part (stime).
    sys: f64,
    /// lookout's context switches over the drive.
    switches: u64,
    drive: Duration,
    hwm: u64,
    rss: u64,
    /// `lookout_subscriber_resyncs_total` after the stalled clients read again.
    resyncs: f64,
    /// From dropping every client to `lookout_subscribers` = 1 (stdout).
    freed: Duration,
}

/// One run: which binary, how many clients (of which stalled), how many
/// lifecycles.
struct Run<'a> {
    name: &'a str,
    bin: &'a Path,
    /// Flags the binary takes before the engine's (the anchor may not know
    /// `--max-connections`).
    extra: &'a [&'a str],
    clients: usize,
    stalled: usize,
    lifecycles: usize,
    /// Fired this many at once (create and start each, then stop and
    /// remove each); 0: one lifecycle after the other.
    burst: usize,
}

fn run(rt: &tokio::runtime::Runtime, n: usize, r: &Run<'_>) -> Outcome {
    let (clients, stalled, lifecycles) = (r.clients, r.stalled, r.lifecycles);
    let tag = format!("serve-{}-{n}", std::process::id());
    let _cleanup = Cleanup(tag.clone());
    let lookout = Lookout::start(r.bin, &tag, r.extra);
    let addr = lookout.addr;
    let expected = 4 * lifecycles;
    let readers = clients - stalled;
    rt.block_on(async {
        let mut tasks = tokio::task::JoinSet::new();
        // In batches, each subscribed before the next connects: a burst of
        // 10 000 connects overflows the listen backlog (SYN retries then
        // take seconds).
        for n in 0..readers {
            tasks.spawn(reader(addr, expected));
            if (n + 1) % CONNECT_BATCH == 0 {
                wait_subscribed(addr, n + 2).await;
            }
        }
        let mut stalled_sockets = Vec::new();
        for _ in 0..stalled {
            let socket = TcpSocket::new_v4().expect("socket");
            socket.set_recv_buffer_size(4096).expect("SO_RCVBUF");
            let mut s = socket.connect(addr).await.expect("connect");
            s.write_all(&request("/events")).await.expect("request");
            stalled_sockets.push(s);
        }
        wait_subscribed(addr, clients + 1).await;
        let docker = docker_client();
        let image = engines::test_image();
        let (user0, sys0) = lookout.cpu_split();
        let switches0 = lookout.switches();
        let t0 = Instant::now();
        drive(&docker, &image, &tag, lifecycles, r.burst).await;
        let mut latencies = Vec::with_capacity(readers * expected);
        let mut reference: Option<Vec<(String, String)>> = None;
        while let Some(done) = tasks.join_next().await {
            let (seen, lat) = done
                .expect("a reader task")
                .unwrap_or_else(|e| panic!("a reader failed: {e}"));
            match &reference {
                None => reference = Some(seen),
                Some(r) => assert_eq!(r, &seen, "every reader reads the same events in order"),
            }
            latencies.extend(lat);
        }
        let drive = t0.elapsed();
        let (user1, sys1) = lookout.cpu_split();
        let (cpu, sys) = (user1 - user0 + sys1 - sys0, sys1 - sys0);
        let switches = lookout.switches().saturating_sub(switches0);
        // The stalled clients read again, until 500 ms of silence: each
        // finds it lagged (and gets the resync, empty here: every
        // container is gone).
        let mut draining = tokio::task::JoinSet::new();
        for mut s in stalled_sockets {
            draining.spawn(async move {
                let mut buf = vec![0; 64 * 1024];
                while let Ok(Ok(n)) =
                    tokio::time::timeout(Duration::from_millis(500), s.read(&mut buf)).await
                {
                    if n == 0 {
                        break;
                    }
                }
                s
            });
        }
        let stalled_sockets = draining.join_all().await;
        let resyncs = metric(addr, "lookout_subscriber_resyncs_total")
            .await
            .unwrap_or(f64::NAN);
        let gone = Instant::now();
        drop(stalled_sockets);
        while subscribers(addr).await != Some(1.0) {
            assert!(gone.elapsed() < CALL, "clients not freed within {CALL:?}");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let freed = gone.elapsed();
        let (hwm, rss) = lookout.memory_kib();
        latencies.sort_by(f64::total_cmp);
        Outcome {
            clients,
            stalled,
            events: expected,
            p50: pct(&latencies, 50.0),
            p99: pct(&latencies, 99.0),
            max: latencies[latencies.len() - 1],
            cpu,
            sys,
            switches,
            drive,
            hwm,
            rss,
            resyncs,
            freed,
        }
    })
}

/// A bollard client of the engine's Unix socket.
fn docker_client() -> Docker {
    Docker::connect_with_unix(&docker_socket(), 120, bollard::API_DEFAULT_VERSION)
        .expect("a bollard client")
}

/// The engine's Unix socket.
fn docker_socket() -> String {
    engines::docker_host()
        .strip_prefix("unix://")
        .expect("a unix:// docker host")
        .to_owned()
}

/// `lifecycles` container lifecycles labelled `tag`: one after the other
/// (`burst` 0), or `burst` at a time (each created and started at once,
/// then each stopped and removed at once).
async fn drive(docker: &Docker, image: &str, tag: &str, lifecycles: usize, burst: usize) {
    if burst == 0 {
        for i in 0..lifecycles {
            lifecycle(docker, image, tag, &format!("{tag}-{i}")).await;
        }
        return;
    }
    for first in (0..lifecycles).step_by(burst) {
        let names: Vec<String> = (first..lifecycles.min(first + burst))
            .map(|i| format!("{tag}-{i}"))
            .collect();
        let mut ups = tokio::task::JoinSet::new();
        for name in names.clone() {
            let (docker, image, tag) = (docker.clone(), image.to_owned(), tag.to_owned());
            ups.spawn(async move { up(&docker, &image, &tag, &name).await });
        }
        ups.join_all().await;
        let mut downs = tokio::task::JoinSet::new();
        for name in names {
            let docker = docker.clone();
            downs.spawn(async move { down(&docker, &name).await });
        }
        downs.join_all().await;
    }
}

/// (utime, stime) of a `/proc/…/stat` text, in seconds.
fn stat_times(stat: &str) -> (f64, f64) {
    // Fields after the `(comm)`: state is field 3, utime 14, stime 15.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // CLK_TCK is 100 on Linux.
    (ticks(11) as f64 / 100.0, ticks(12) as f64 / 100.0)
}

/// The calling thread's CPU time, in seconds: (on CPU in all, from
/// `schedstat` in ns; of it the kernel's, from `stat`'s `stime` in ticks).
fn thread_cpu() -> (f64, f64) {
    let on_cpu = std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .unwrap_or(0);
    let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap_or_default();
    (on_cpu as f64 / 1e9, stat_times(&stat).1)
}

/// How the floor's writer is given its lines.
#[derive(Clone, Copy, Debug)]
enum Pace {
    /// `events` lines of its own, 5 ms apart: back to back, the writer's
    /// caches warm (the floor of earlier runs).
    Paced { events: usize },
    /// dockerd's own events, as lookout is given them: `lifecycles` driven
    /// as the runs drive them ([`drive`], `burst`), the writer reading the
    /// engine's event stream and writing each of a lifecycle's 4 (`create`,
    /// `start`, `die`, `destroy`) as it comes, on the same machine under the
    /// same engine's load.
    Driven { lifecycles: usize, burst: usize },
}

impl Pace {
    fn events(self) -> usize {
        match self {
            Self::Paced { events } => events,
            Self::Driven { lifecycles, .. } => 4 * lifecycles,
        }
    }
}

/// The floor of a delivery, measured beside lookout in the same process run:
/// a plain thread of a process of its own (this bench, run again as
/// `--floor-writer`, see [`floor_writer`]) writes each line (~300 bytes,
/// the size of lookout's) once to each of `clients` loopback TCP sockets
/// (`TCP_NODELAY`, one `write` per client per event, no HTTP framing, no
/// task, no hub), its lines paced as `pace` says; the readers are tasks of
/// this runtime that read and parse each line as the bench's clients do.
/// What the writing thread's CPU costs per write is what any server pays
/// per delivery on this machine's loopback before its own code. Returns
/// (CPU, of it the kernel's) per write in µs, and the readers' latency p50
/// and p99 in ns (from the line's time: its writing, or dockerd's
/// `timeNano`, as lookout's readers' latency).
fn floor(rt: &tokio::runtime::Runtime, clients: usize, pace: Pace) -> Floor {
    use std::io::{BufRead as _, Write as _};
    let events = pace.events();
    let tag = format!("serve-{}-floor-{clients}-{pace:?}", std::process::id())
        .replace(|c: char| !c.is_ascii_alphanumeric() && c != '-', "");
    let _cleanup = Cleanup(tag.clone());
    let mut args = vec![
        "--floor-writer".to_owned(),
        clients.to_string(),
        events.to_string(),
    ];
    if matches!(pace, Pace::Driven { .. }) {
        args.extend([docker_socket(), tag.clone()]);
    }
    let mut writer = std::process::Command::new(std::env::current_exe().expect("this bench"))
        .args(&args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("the floor's writer");
    let mut said = std::io::BufReader::new(writer.stdout.take().expect("its stdout"));
    let mut line = String::new();
    said.read_line(&mut line).expect("its address");
    let addr: SocketAddr = line.trim().parse().expect("the floor's address");
    let mut go = writer.stdin.take().expect("its stdin");
    let mut latencies = rt.block_on(async {
        // One connection after the other (each ~50 µs here): all at once
        // overflow the listen backlog, and SYN retries take seconds.
        let mut streams = Vec::with_capacity(clients);
        for _ in 0..clients {
            streams.push(TcpStream::connect(addr).await.expect("connect"));
        }
        let mut tasks = tokio::task::JoinSet::new();
        for s in streams {
            tasks.spawn(async move {
                let mut lines = AsyncBufReader::new(s);
                let mut lat = Vec::with_capacity(events);
                let mut line = String::new();
                for _ in 0..events {
                    line.clear();
                    let n = tokio::time::timeout(CALL, lines.read_line(&mut line))
                        .await
                        .expect("a line within CALL")
                        .expect("a read");
                    assert!(n > 0, "the writer closed early");
                    let read_at = now_ns();
                    let v: Value = serde_json::from_str(&line).expect("JSON");
                    let at = v["at_ns"].as_i64().map_or(0, i128::from);
                    lat.push((read_at - at) as f64);
                }
                lat
            });
        }
        // The writer accepts every reader's connection before it takes the
        // go (paced), or before it watches the engine (driven).
        go.write_all(b"go\n").expect("the writer waits");
        if let Pace::Driven { lifecycles, burst } = pace {
            let mut watching = String::new();
            said.read_line(&mut watching).expect("the writer watches");
            assert_eq!(watching.trim(), "watching", "the floor's writer");
            drive(
                &docker_client(),
                &engines::test_image(),
                &tag,
                lifecycles,
                burst,
            )
            .await;
        }
        let mut all = Vec::with_capacity(clients * events);
        while let Some(lat) = tasks.join_next().await {
            all.extend(lat.expect("a floor reader"));
        }
        all
    });
    line.clear();
    said.read_line(&mut line).expect("its CPU");
    let _ = writer.wait();
    let mut cpu = line
        .split_whitespace()
        .filter_map(|v| v.parse::<f64>().ok());
    let (cpu, sys) = (cpu.next().expect("CPU"), cpu.next().expect("of it kernel"));
    latencies.sort_by(f64::total_cmp);
    let deliveries = (clients * events) as f64;
    (
        cpu * 1e6 / deliveries,
        sys * 1e6 / deliveries,
        pct(&latencies, 50.0),
        pct(&latencies, 99.0),
    )
}

/// `--floor-writer CLIENTS EVENTS [SOCKET TAG]`: the floor's writer (see
/// [`floor`]). Says its address, accepts `CLIENTS` connections, waits for a
/// line on stdin; then writes each of `EVENTS` lines once to each: lines of
/// its own 5 ms apart, or, given dockerd's `SOCKET` and a `TAG`, one per
/// event of the engine's containers labelled `TAG` (`create`, `start`,
/// `die`, `destroy`; it says `watching` once it reads the engine's events).
/// Last, it says its writing thread's CPU and kernel seconds.
fn floor_writer(clients: usize, events: usize, engine: Option<(&str, &str)>) {
    use std::io::{BufRead as _, Write as _};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a listener");
    println!("{}", listener.local_addr().expect("its address"));
    std::io::stdout().flush().expect("stdout");
    let mut sockets = Vec::with_capacity(clients);
    for _ in 0..clients {
        let (s, _) = listener.accept().expect("a reader's connection");
        s.set_nodelay(true).expect("TCP_NODELAY");
        sockets.push(s);
    }
    let mut go = String::new();
    std::io::stdin().lock().read_line(&mut go).expect("the go");
    let line = |instance: &str, kind: &str, at_ns: i128| {
        format!(
            "{{\"instance\":\"{instance}\",\"id\":\"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\",\
             \"kind\":\"{kind}\",\"origin\":\"live\",\"at_ns\":{at_ns},\"provider\":\"docker\",\
             \"uid\":\"0123456789abcdef\",\"labels\":{{\"lookout.bench\":\"serve-floor\"}},\"image\":\"lookout-test/busybox\"}}\n"
        )
    };
    let Some((socket, tag)) = engine else {
        let (c0, s0) = thread_cpu();
        for i in 0..events {
            let line = line(&format!("serve-floor-{i}"), "started", now_ns());
            for s in &mut sockets {
                s.write_all(line.as_bytes()).expect("a write");
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let (c1, s1) = thread_cpu();
        println!("{} {}", c1 - c0, s1 - s0);
        return;
    };
    // dockerd's event stream, HTTP/1.0: the body is the lines as they come.
    let mut docker = std::os::unix::net::UnixStream::connect(socket).expect("dockerd");
    let request = lookout_e2e::relay::raw_events::events_request(&format!("{LABEL}={tag}"));
    docker
        .write_all(request.as_bytes())
        .expect("the events request");
    let mut stream = std::io::BufReader::new(docker);
    let mut got = String::new();
    loop {
        got.clear();
        let n = stream.read_line(&mut got).expect("dockerd's answer");
        assert!(n > 0, "dockerd closed the event stream");
        if got == "\r\n" {
            break;
        }
    }
    println!("watching");
    std::io::stdout().flush().expect("stdout");
    let (c0, s0) = thread_cpu();
    let mut written = 0;
    while written < events {
        got.clear();
        let n = stream.read_line(&mut got).expect("an engine event");
        assert!(n > 0, "dockerd closed the event stream");
        let v: Value = serde_json::from_str(&got).expect("an engine event's JSON");
        let kind = match v["Action"].as_str() {
            Some("create") => "created",
            Some("start") => "started",
            Some("die") => "stopped",
            Some("destroy") => "removed",
            _ => continue,
        };
        let name = v["Actor"]["Attributes"]["name"]
            .as_str()
            .unwrap_or_default();
        let at = v["timeNano"].as_i64().map_or(0, i128::from);
        let line = line(name, kind, at);
        for s in &mut sockets {
            s.write_all(line.as_bytes()).expect("a write");
        }
        written += 1;
    }
    let (c1, s1) = thread_cpu();
    println!("{} {}", c1 - c0, s1 - s0);
}

/// This process's soft open-files limit (its clients hold a socket each;
/// the 10 000-client run needs more than that many).
fn open_files_limit() -> u64 {
    std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|l| {
            l.lines()
                .find(|l| l.starts_with("Max open files"))
                .and_then(|l| l.split_whitespace().nth(3)?.parse().ok())
        })
        .unwrap_or(1024)
}

/// The floor's figures: CPU and kernel µs per write, readers' p50 and p99 ns.
type Floor = (f64, f64, f64, f64);

/// The mean of two measures of a floor (either, if only one).
fn mean(a: Option<Floor>, b: Option<Floor>) -> Option<Floor> {
    match (a, b) {
        (Some(a), Some(b)) => Some((
            f64::midpoint(a.0, b.0),
            f64::midpoint(a.1, b.1),
            f64::midpoint(a.2, b.2),
            f64::midpoint(a.3, b.3),
        )),
        (a, b) => a.or(b),
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let [_, flag, clients, events, engine @ ..] = args.as_slice()
        && flag == "--floor-writer"
    {
        floor_writer(
            clients.parse().expect("CLIENTS"),
            events.parse().expect("EVENTS"),
            match engine {
                [socket, tag] => Some((socket.as_str(), tag.as_str())),
                _ => None,
            },
        );
        return;
    }
    let full = args.iter().any(|a| a == "--bench");
    if !engines_configured() {
        return;
    }
    let bin = lookout_binary();
    // The previous commit's binary, run side by side (`LOOKOUT_ANCHOR_BIN`).
    let anchor = std::env::var_os("LOOKOUT_ANCHOR_BIN").map(PathBuf::from);
    // `LOOKOUT_SERVE_RUNS=steady,burst,stalled,many,floor`: those runs only.
    let picked = std::env::var("LOOKOUT_SERVE_RUNS").ok();
    let pick = |what: &str| {
        picked
            .as_deref()
            .is_none_or(|p| p.split(',').any(|w| w.trim() == what))
    };
    let wall = Instant::now();
    let _lock = engines::lock_engine("docker", false).expect("the docker engine lock");
    engines::docker_up().unwrap_or_else(|e| panic!("docker: cannot bring the engine up: {e}"));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let (clients, lifecycles) = if full { (1000, 300) } else { (50, 5) };
    // As a compose project of 50 services comes up and goes down.
    let burst = if full { 50 } else { 5 };
    // A stalled client lags only once more than its socket buffers and the
    // hub's queue passed it: 2000 events.
    let stall_lifecycles = if full { 500 } else { 5 };
    let many = 10_000;
    let many_ok = full && open_files_limit() > many as u64 + 200;
    if full && !many_ok && pick("many") {
        eprintln!(
            "serve: no {many}-client run: this process may open {} files",
            open_files_limit()
        );
    }
    // Room for the bench's own /metrics scrapes beside the clients.
    let max = (many + 100).to_string();
    let with_max: &[&str] = &["--max-connections", &max];
    let mut runs = Vec::new();
    let bins: Vec<(&str, &Path)> = std::iter::once(("this", bin.as_path()))
        .chain(anchor.as_deref().map(|a| ("anchor", a)))
        .collect();
    for (what, burst) in [("steady", 0), ("burst", burst)] {
        if pick(what) {
            for &(name, bin) in &bins {
                runs.push(Run {
                    name,
                    bin,
                    extra: &[],
                    clients,
                    stalled: 0,
                    lifecycles,
                    burst,
                });
            }
        }
    }
    if pick("stalled") {
        runs.push(Run {
            name: "this",
            bin: &bin,
            extra: &[],
            clients,
            stalled: clients / 10,
            lifecycles: stall_lifecycles,
            burst: 0,
        });
    }
    if many_ok && pick("many") {
        runs.push(Run {
            name: "this",
            bin: &bin,
            extra: with_max,
            clients: many,
            stalled: 0,
            lifecycles: 100,
            burst: 0,
        });
    }
    println!(
        "serve: `lookout docker --serve` (this: {}{}), container lifecycles \
         (create, start, stop -t 0, rm; one at a time, or in bursts: N created and started at \
         once, then stopped and removed at once) on the real dockerd; every reading \
         client reads all 4 events of each as NDJSON; latency = client read time − the \
         event's engine time, ms; CPU = lookout's utime+stime over the drive, and per delivery (of it, the kernel's \
         stime: on loopback a send also runs the receiving socket's TCP input); context switches \
         of all lookout's threads over the drive",
        bin.display(),
        anchor
            .as_ref()
            .map(|a| format!("; anchor: {}", a.display()))
            .unwrap_or_default(),
    );
    let say = |n: usize, pace: Pace, when: &str, f: Floor| {
        let lines = match pace {
            Pace::Paced { events } => format!("each of {events} lines of its own, 5 ms apart,"),
            Pace::Driven { lifecycles, burst } => format!(
                "each of dockerd's {} events ({lifecycles} lifecycles, {}) as it reads them",
                4 * lifecycles,
                if burst == 0 {
                    "one at a time".to_owned()
                } else {
                    format!("{burst} at once")
                }
            ),
        };
        println!(
            "floor ({when}): a plain thread writing {lines} once to each of {n} loopback sockets \
             (no lookout, no HTTP): {:.2} µs CPU per write, of it kernel {:.2} µs; readers' p50 \
             / p99 {:.2} / {:.2} ms",
            f.0,
            f.1,
            f.2 / 1e6,
            f.3 / 1e6
        );
    };
    // Each floor, if its runs are picked: paced (as in earlier runs), and
    // fed by the engine as the steady and the burst runs are.
    let floor_of = |pace: Pace, when: &str| {
        let f = floor(&rt, clients, pace);
        say(clients, pace, when, f);
        Some(f).filter(|f| f.0 > 0.0 && f.3 > 0.0)
    };
    let driven = |burst: usize| Pace::Driven { lifecycles, burst };
    let before = pick("floor").then(|| {
        (
            floor_of(driven(0), "before the runs"),
            floor_of(driven(burst), "before the runs"),
        )
    });
    println!(
        "| lookout | fired | clients | stalled | events/client | deliveries | p50 ms | p99 ms | max ms | lookout CPU s (drive s) | CPU µs/delivery | of it kernel µs | context switches per 1000 deliveries | lookout peak RSS MiB | RSS after MiB | stalled resynced | all freed in |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    // Each row as soon as its run is over.
    let mut outcomes: Vec<(&Run<'_>, Outcome)> = Vec::new();
    for (n, r) in runs.iter().enumerate() {
        let o = run(&rt, n, r);
        let deliveries = (o.clients - o.stalled) * o.events;
        println!(
            "| {} | {} | {} | {} | {} | {} | {:.2} | {:.2} | {:.2} | {:.2} ({:.1}) | {:.2} | {:.2} | {:.1} | {:.1} | {:.1} | {} | {:.1?} |",
            r.name,
            if r.burst == 0 {
                "one at a time".to_owned()
            } else {
                format!("{} at once", r.burst)
            },
            o.clients,
            o.stalled,
            o.events,
            deliveries,
            o.p50 / 1e6,
            o.p99 / 1e6,
            o.max / 1e6,
            o.cpu,
            o.drive.as_secs_f64(),
            o.cpu * 1e6 / deliveries as f64,
            o.sys * 1e6 / deliveries as f64,
            o.switches as f64 * 1000.0 / deliveries as f64,
            o.hwm as f64 / 1024.0,
            o.rss as f64 / 1024.0,
            o.resyncs,
            o.freed,
        );
        outcomes.push((r, o));
    }
    // (CPU µs per delivery, p99 ns) of a run at `clients` without stalled clients.
    let of = |name: &str, burst: bool| {
        outcomes
            .iter()
            .find(|(r, o)| {
                r.name == name && o.clients == clients && o.stalled == 0 && (r.burst > 0) == burst
            })
            .map(|(_, o)| (o.cpu * 1e6 / (o.clients * o.events) as f64, o.p99))
    };
    for burst in [false, true] {
        if let (Some(this), Some(anchor)) = (of("this", burst), of("anchor", burst)) {
            println!(
                "CPU per delivery at {clients} clients, {}: anchor / this = {:.2}",
                if burst { "bursts" } else { "steady" },
                anchor.0 / this.0
            );
        }
    }
    // The floor, in the same process run: one write per client per event
    // from a plain thread (what any server pays here before its own code).
    // After the runs: the paced floor, and the driven ones again; each
    // driven floor's figure is the mean of its measure before and after the
    // runs (the machine drifts over the minutes between).
    let floor_events = if full { 1200 } else { 20 };
    let paced = pick("floor")
        .then(|| {
            floor_of(
                Pace::Paced {
                    events: floor_events,
                },
                "after the runs",
            )
        })
        .flatten();
    let (steady, bursts) = match before {
        Some((steady, bursts)) => {
            let steady = mean(steady, floor_of(driven(0), "after the runs"));
            let bursts = mean(bursts, floor_of(driven(burst), "after the runs"));
            for (pace, f) in [(driven(0), steady), (driven(burst), bursts)] {
                if let Some(f) = f {
                    say(clients, pace, "the mean of before and after the runs", f);
                }
            }
            (steady, bursts)
        }
        None => (None, None),
    };
    if many_ok && pick("many") && pick("floor") {
        // The writer is a process of its own: each holds one end.
        let pace = Pace::Driven {
            lifecycles: 100,
            burst: 0,
        };
        say(many, pace, "after the runs", floor(&rt, many, pace));
    }
    println!("(wall {:.1?})", wall.elapsed());
    // Last: this binary against the floors of the same run; first against
    // the paced floor (the earlier runs' figure), then, in the lines any
    // reader compares, against the floor fed the same events.
    if let Some(f) = paced {
        let mut against = Vec::new();
        for name in ["anchor", "this"] {
            if let Some((cpu, p99)) = of(name, false) {
                against.push(format!(
                    "{name} steady cpu {:.2} p99 {:.2}",
                    cpu / f.0,
                    p99 / f.3
                ));
            }
            if let Some((cpu, _)) = of(name, true) {
                against.push(format!("{name} burst {:.2}", cpu / f.0));
            }
        }
        println!("(against the paced floor: {})", against.join("; "));
    }
    for (name, label) in [("anchor", "anchor "), ("this", "")] {
        if let (Some((cpu, p99)), Some(f)) = (of(name, false), steady) {
            println!(
                "{label}steady: lookout/floor cpu {:.2} p99 {:.2}",
                cpu / f.0,
                p99 / f.3
            );
        }
        if let (Some((cpu, _)), Some(f)) = (of(name, true), bursts) {
            println!(
                "{label}burst: lookout per event / floor per event {:.2}",
                cpu / f.0
            );
        }
    }
}
