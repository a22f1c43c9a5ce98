#![allow(
    clippy::cast_precision_loss,
    clippy::print_stdout,
    clippy::print_stderr,
    clippy::cast_possible_wrap,
    // A bench harness, not library code: the fake engine runs on a thread of its own.
    clippy::disallowed_methods
)]
//! Docker firehose: how fast each consumer reads a burst of container events.
//!
//! A loopback fake engine (unix socket in a temp dir, its own thread and
//! runtime; `lookout_testkit::fake_engine`) answers `/_ping`, `/version`,
//! `/containers/json` (empty) and `/events`: N real-format event lines
//! (create→start→die→destroy cycles over N/4 containers, dockerd 27's field
//! layout), in 64 KiB writes as fast as the socket takes them, then the end of
//! the body. Every line is a real transition, so lookout emits all N.
//!
//! Consumers, in alternating rounds in this one process (on the main thread's
//! current-thread runtime; the engine has the other core):
//! - raw `bollard::Docker::events`: decoded `EventMessage`s, counted;
//! - `lookout_docker::watch`: emitted `InstanceEvent`s, counted to N;
//! - the `docker` CLI (`docker -H unix://… events`, stdout to /dev/null): wall
//!   time until it exits at the end of the body (process start included);
//! - the decode limit: the same lines, already in memory, split and decoded
//!   by a bare `serde_json` derive into just the fields lookout reads (type,
//!   action, the actor's id, name and exit code, the time): what decoding
//!   alone costs on this machine, with no socket, HTTP or state.
//!
//! `cargo bench -p lookout-e2e --bench firehose` for the full run (N = 200k,
//! 3 rounds, medians); without `--bench` (as `cargo test --benches` runs it) a
//! smoke run (N = 5k, 1 round).

use lookout_testkit::fake_engine;

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use lookout_core::Item;
use lookout_docker::{DockerConfig, watch};
use tokio_stream::StreamExt;

fn script(n: usize) -> fake_engine::Script {
    let actions = ["create", "start", "die", "destroy"];
    let mut chunks = Vec::new();
    let mut chunk = Vec::with_capacity(64 * 1024);
    let base = 1_764_460_800_000_000_000_i64;
    for i in 0..n {
        let c = i / 4;
        let line = fake_engine::event_line(
            actions[i % 4],
            &format!("{c:064x}"),
            &format!("/fh-{c}"),
            base + i as i64 * 1_000,
        );
        chunk.extend_from_slice(line.as_bytes());
        if chunk.len() >= 60 * 1024 {
            chunks.push(std::mem::take(&mut chunk));
        }
    }
    chunks.push(chunk);
    fake_engine::Script {
        chunks: Arc::new(chunks),
        close: true,
    }
}

/// The engine on a thread of its own; `(host, socket path, stop flag, thread)`.
fn engine(
    script: fake_engine::Script,
) -> (String, String, Arc<AtomicBool>, std::thread::JoinHandle<()>) {
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = std::sync::mpsc::channel();
    let flag = stop.clone();
    let thread = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async move {
            let engine = fake_engine::start(script);
            tx.send((engine.host.clone(), engine.socket.display().to_string()))
                .expect("send");
            while !flag.load(Ordering::Relaxed) {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            drop(engine);
        });
    });
    let (host, socket) = rx.recv().expect("engine started");
    (host, socket, stop, thread)
}

async fn lookout(host: &str, n: usize) -> (Duration, usize) {
    let t = Instant::now();
    let mut w = watch(DockerConfig::default().host(host)).expect("config");
    let mut emitted = 0;
    while emitted < n {
        match tokio::time::timeout(Duration::from_secs(60), w.next()).await {
            Ok(Some(Item::Event(_))) => emitted += 1,
            Ok(Some(Item::Status(_))) => {}
            Ok(None) | Err(_) => break,
        }
    }
    (t.elapsed(), emitted)
}

async fn bollard(socket: &str, n: usize) -> (Duration, usize) {
    let t = Instant::now();
    let docker = bollard::Docker::connect_with_unix(socket, 120, bollard::API_DEFAULT_VERSION)
        .expect("bollard");
    let mut events = docker.events(None);
    let mut got = 0;
    while got < n {
        match events.next().await {
            Some(Ok(_)) => got += 1,
            Some(Err(e)) => {
                eprintln!("bollard: {e}");
                break;
            }
            None => break,
        }
    }
    (t.elapsed(), got)
}

/// `None` when there is no `docker` CLI.
fn cli(host: &str) -> Option<Duration> {
    let t = Instant::now();
    let status = Command::new("docker")
        .args(["-H", host, "events"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .env_remove("DOCKER_CONTEXT")
        .status()
        .ok()?;
    if !status.success() {
        eprintln!("docker events exited with {status}");
    }
    Some(t.elapsed())
}

/// The fields of an event line lookout reads, borrowed from the line.
#[derive(serde::Deserialize)]
#[allow(non_snake_case, dead_code)]
struct Line<'a> {
    #[serde(borrow)]
    Type: &'a str,
    #[serde(borrow)]
    Action: &'a str,
    #[serde(borrow)]
    Actor: Actor<'a>,
    timeNano: i64,
}

#[derive(serde::Deserialize)]
#[allow(non_snake_case, dead_code)]
struct Actor<'a> {
    #[serde(borrow)]
    ID: &'a str,
    #[serde(borrow)]
    Attributes: Attributes<'a>,
}

#[derive(serde::Deserialize)]
#[allow(non_snake_case, dead_code)]
struct Attributes<'a> {
    #[serde(borrow)]
    name: Option<&'a str>,
    #[serde(borrow)]
    exitCode: Option<&'a str>,
}

/// The decode limit: every line of `script` split and decoded (see the
/// module's docs); the time and how many decoded.
fn limit(script: &fake_engine::Script) -> (Duration, usize) {
    let t = Instant::now();
    let mut got = 0;
    for chunk in script.chunks.iter() {
        for line in chunk.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
            if let Ok(line) = serde_json::from_slice::<Line<'_>>(line) {
                std::hint::black_box(&line);
                got += 1;
            }
        }
    }
    (t.elapsed(), got)
}

fn median(v: &mut [Duration]) -> Duration {
    v.sort_unstable();
    v[v.len() / 2]
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let (n, rounds) = if full { (200_000, 3) } else { (5_000, 1) };
    let script = script(n);
    let bytes: usize = script.chunks.iter().map(Vec::len).sum();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let (mut tb, mut tl, mut tc, mut tm) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut nb, mut nl, mut nm) = (0, 0, 0);
    // `LOOKOUT_FIREHOSE_ONLY=lookout` (or `bollard`, `cli`, `limit`): one consumer
    // only, for a profiler; the table then lacks the others.
    let only = std::env::var("LOOKOUT_FIREHOSE_ONLY").ok();
    let runs = |who: &str| only.as_deref().is_none_or(|o| o == who);
    for _ in 0..rounds {
        // A fresh engine per consumer: each reads the whole body from its start.
        if runs("bollard") {
            let (_, socket, stop, th) = engine(script.clone());
            let (d, got) = rt.block_on(bollard(&socket, n));
            stop.store(true, Ordering::Relaxed);
            th.join().expect("engine thread");
            tb.push(d);
            nb = got;
        }
        if runs("lookout") {
            let (host, _, stop, th) = engine(script.clone());
            let (d, got) = rt.block_on(lookout(&host, n));
            stop.store(true, Ordering::Relaxed);
            th.join().expect("engine thread");
            tl.push(d);
            nl = got;
        }
        if runs("limit") {
            let (d, got) = limit(&script);
            tm.push(d);
            nm = got;
        }
        if runs("cli") {
            let (host, _, stop, th) = engine(script.clone());
            if let Some(d) = cli(&host) {
                tc.push(d);
            }
            stop.store(true, Ordering::Relaxed);
            th.join().expect("engine thread");
        }
    }
    let rate = |v: &mut Vec<Duration>| (!v.is_empty()).then(|| n as f64 / median(v).as_secs_f64());
    let (raw, ours, cli_rate, lim) = (rate(&mut tb), rate(&mut tl), rate(&mut tc), rate(&mut tm));
    let ratio = |x: Option<f64>, y: Option<f64>| match (x, y) {
        (Some(x), Some(y)) => format!("{:.2}×", x / y),
        _ => "–".to_owned(),
    };
    let shown = |x: Option<f64>| x.map_or_else(|| "not run".to_owned(), |x| format!("{x:.0}"));
    println!(
        "docker firehose: {n} events ({:.1} MiB of /events body) from a loopback fake engine, median of {rounds} round(s)",
        bytes as f64 / f64::from(1 << 20)
    );
    println!(
        "| consumer | events read | events emitted | events/s | vs raw bollard | vs the decode limit |"
    );
    println!("|---|---|---|---|---|---|");
    println!(
        "| the decode limit (`serde_json` derive of the fields read, lines in memory) | {nm} | – | {} | {} | {} |",
        shown(lim),
        ratio(lim, raw),
        ratio(lim, lim)
    );
    println!(
        "| raw bollard `Docker::events` | {nb} | {nb} | {} | {} | {} |",
        shown(raw),
        ratio(raw, raw),
        ratio(raw, lim)
    );
    println!(
        "| lookout_docker::watch | {n} | {nl} | {} | {} | {} |",
        shown(ours),
        ratio(ours, raw),
        ratio(ours, lim)
    );
    if !runs("cli") {
    } else if tc.is_empty() {
        println!("| docker CLI | – | – | not run (no `docker` on PATH) | |");
    } else {
        println!(
            "| `docker events` CLI (process start included) | {n} | – | {} | {} (lookout = {} the CLI) | |",
            shown(cli_rate),
            ratio(cli_rate, raw),
            ratio(ours, cli_rate)
        );
    }
    if runs("lookout") {
        assert_eq!(nl, n, "lookout emitted {nl} of {n} events");
    }
    if runs("bollard") {
        assert_eq!(nb, n, "bollard decoded {nb} of {n} events");
    }
    if runs("limit") {
        assert_eq!(nm, n, "the bare decode read {nm} of {n} lines");
    }
}
