//! Start-up at scale on the real dockerd (issue #48): how long the release
//! `lookout docker` takes from exec to its `connected` line, and how much
//! memory it holds per container, beside the engine's own list.
//!
//! The bench creates N containers through the Engine API (bollard; in
//! parallel batches, `--network none`, the test image, ten compose-style
//! labels each, and `lookout.startup=TAG` to select them): some running
//! `busybox sleep 3600` (10 %, at most 200: each running one costs dockerd
//! a shim of ~8 MB) — without a check, healthy, with a check still
//! `starting`, unhealthy (a check printing `down`), paused —, some exited
//! (`0`, and `SIGKILL`: 137), the rest created. It waits until the list
//! shows every planned `(healthy)` and `(unhealthy)`, then runs, three
//! rounds alternating, each timed from exec (or the request) to the end:
//!
//! - **raw list** (the anchor): `GET /containers/json?all=1` with the label
//!   filter, a plain HTTP/1.1 request on the socket, read to its end;
//! - `docker ps -a --no-trunc` with the same filter, to its exit;
//! - `lookout docker --json --label lookout.startup=TAG`, to its
//!   `connected` status line (which must count N instances), and with
//!   `--readiness`;
//! - `lookout docker --json --label none=x` (nothing listed): the memory
//!   baseline.
//!
//! Each lookout's `VmHWM` (peak) is read at `connected`, and its `VmRSS`
//! (steady) 1 s later; per container is (lookout − baseline) ÷ N. One more
//! run with `--readiness --initial` checks what start-up tells: every
//! container once, each running one ready exactly when it should be, with
//! its health, the unhealthy ones `failing` with their check's output.
//!
//! `LOOKOUT_ANCHOR_BIN=PATH`: that binary's rows too (the previous
//! binary), measured in the same rounds, alternating.
//!
//! Sizes: `--bench` (as `cargo xtask bench` runs it) 2 000 and 10 000
//! containers (health checks every 30 s); without it (`cargo test
//! --benches`) 50 (every 1 s), correctness only. `LOOKOUT_STARTUP_SIZES=N,M`
//! picks others. The verdict never depends on the machine's speed: the
//! figures are reported, the counts asserted.
//!
//! Every container made is labelled `lookout.cleanup=TAG` and removed at the
//! end, also on a panic (a guard); containers of an earlier run of this bench
//! whose process is gone are removed first. Without `LOOKOUT_ENGINES=1`:
//! prints "skipped: engines not configured".
#![allow(
    clippy::disallowed_methods,
    clippy::cast_precision_loss,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    clippy::too_many_lines
)]

use std::collections::{BTreeMap, HashMap};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use bollard::Docker;
use bollard::models::{ContainerCreateBody, HealthConfig, HostConfig};
use bollard::query_parameters::{
    CreateContainerOptionsBuilder, KillContainerOptionsBuilder, RemoveContainerOptionsBuilder,
};
use lookout_e2e::bench_docker::{LookoutProcess, call, engines_configured, lookout_binary};
use lookout_e2e::engines;

/// The label selecting a run's containers (`lookout.startup=TAG`).
const SELECT: &str = "lookout.startup";
/// The label every container of this bench carries: the pid of its run.
const PID: &str = "lookout.startup.pid";
/// Requests in flight while creating or removing.
const PARALLEL: usize = 16;
/// Timed rounds per size.
const ROUNDS: usize = 3;

/// What a container is made to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Plan {
    Created,
    Exited,
    Killed,
    Running,
    Healthy,
    Starting,
    Unhealthy,
    Paused,
}

impl Plan {
    /// The plan of container `i` of `n`.
    fn of(i: usize, n: usize) -> Self {
        let running = if n <= 100 {
            10.min(n)
        } else {
            (n / 10).min(200)
        };
        let exited = (running / 10).max(2);
        if i < running {
            const FIRST: [Plan; 5] = [
                Plan::Healthy,
                Plan::Starting,
                Plan::Unhealthy,
                Plan::Paused,
                Plan::Running,
            ];
            return FIRST.get(i).copied().unwrap_or(match i % 20 {
                0..=7 => Plan::Running,
                8..=13 => Plan::Healthy,
                14..=17 => Plan::Starting,
                18 => Plan::Unhealthy,
                _ => Plan::Paused,
            });
        }
        if i < running + exited {
            return if i.is_multiple_of(2) {
                Plan::Exited
            } else {
                Plan::Killed
            };
        }
        Plan::Created
    }

    fn runs(self) -> bool {
        matches!(
            self,
            Plan::Running | Plan::Healthy | Plan::Starting | Plan::Unhealthy | Plan::Paused
        )
    }

    /// The health `--readiness` must tell at start-up (`None` for a
    /// container that does not run; a paused one's is not checked).
    fn health(self) -> Option<&'static str> {
        match self {
            Plan::Running => Some("none"),
            Plan::Healthy => Some("healthy"),
            Plan::Starting => Some("starting"),
            Plan::Unhealthy => Some("unhealthy"),
            _ => None,
        }
    }
}

/// Removes every container of the run (by its label) on drop, through the
/// CLI in chunks: what the parallel removal left, or all of it on a panic.
struct Containers(String);

impl Drop for Containers {
    fn drop(&mut self) {
        remove_by_filter(&format!("label=lookout.cleanup={}", self.0));
    }
}

fn remove_by_filter(filter: &str) {
    let Ok(ids) = engines::docker(&["ps", "-aq", "--filter", filter]) else {
        return;
    };
    let ids: Vec<&str> = ids.split_whitespace().collect();
    for chunk in ids.chunks(200) {
        let _ = engines::docker(&[["rm", "-f"].as_slice(), chunk].concat());
    }
}

/// Containers of an earlier run of this bench whose process is gone.
fn sweep_leftovers() {
    let Ok(pids) = engines::docker(&[
        "ps",
        "-a",
        "--filter",
        &format!("label={PID}"),
        "--format",
        &format!("{{{{.Label \"{PID}\"}}}}"),
    ]) else {
        return;
    };
    let mut gone: Vec<&str> = pids
        .split_whitespace()
        .filter(|pid| !Path::new(&format!("/proc/{pid}")).exists())
        .collect();
    gone.sort_unstable();
    gone.dedup();
    for pid in gone {
        eprintln!("startup: removing the containers of an earlier run (pid {pid})");
        remove_by_filter(&format!("label={PID}={pid}"));
    }
}

/// Ten labels as compose sets them, and the bench's own.
fn labels(tag: &str, i: usize) -> HashMap<String, String> {
    let service = format!("svc{}", i % 20);
    let mut l: HashMap<String, String> = [
        ("com.docker.compose.project", format!("startup-{tag}")),
        ("com.docker.compose.service", service.clone()),
        (
            "com.docker.compose.container-number",
            (i / 20 + 1).to_string(),
        ),
        ("com.docker.compose.oneoff", "False".to_owned()),
        (
            "com.docker.compose.config-hash",
            format!("{:064x}", (i % 20) * 0x9e37_79b9),
        ),
        (
            "com.docker.compose.project.working_dir",
            "/srv/startup".to_owned(),
        ),
        (
            "com.docker.compose.project.config_files",
            "/srv/startup/compose.yaml".to_owned(),
        ),
        ("com.docker.compose.version", "2.29.1".to_owned()),
        (
            "com.docker.compose.image",
            format!("sha256:{:064x}", 0xb05_b0c5_u64),
        ),
        ("com.docker.compose.depends_on", String::new()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    l.insert(SELECT.to_owned(), tag.to_owned());
    l.insert("lookout.cleanup".to_owned(), tag.to_owned());
    l.insert(PID.to_owned(), std::process::id().to_string());
    l
}

fn check(test: &[&str], interval: Duration, retries: i64) -> HealthConfig {
    HealthConfig {
        test: Some(test.iter().map(|s| (*s).to_owned()).collect()),
        interval: Some(interval.as_nanos() as i64),
        timeout: Some(10_000_000_000),
        retries: Some(retries),
        ..HealthConfig::default()
    }
}

/// Creates container `i` of `n` and brings it where its plan says.
async fn make(docker: Docker, image: String, tag: String, i: usize, n: usize, every: Duration) {
    let plan = Plan::of(i, n);
    let name = format!("lookout-startup-{tag}-{i}");
    let healthcheck = match plan {
        Plan::Healthy | Plan::Paused => Some(check(&["CMD", "busybox", "true"], every, 3)),
        Plan::Starting => Some(check(
            &["CMD", "busybox", "true"],
            Duration::from_secs(3600),
            3,
        )),
        Plan::Unhealthy => Some(check(
            &["CMD", "busybox", "sh", "-c", "echo down; exit 1"],
            every,
            1,
        )),
        _ => None,
    };
    let cmd = if plan == Plan::Exited {
        vec!["busybox", "true"]
    } else {
        vec!["busybox", "sleep", "3600"]
    };
    let body = ContainerCreateBody {
        image: Some(image),
        cmd: Some(cmd.into_iter().map(str::to_owned).collect()),
        labels: Some(labels(&tag, i)),
        healthcheck,
        host_config: Some(HostConfig {
            network_mode: Some("none".to_owned()),
            ..HostConfig::default()
        }),
        ..ContainerCreateBody::default()
    };
    let create = CreateContainerOptionsBuilder::new().name(&name).build();
    call(
        &format!("create {name}"),
        docker.create_container(Some(create), body),
    )
    .await;
    if plan == Plan::Created {
        return;
    }
    call(
        &format!("start {name}"),
        docker.start_container(&name, None),
    )
    .await;
    match plan {
        Plan::Paused => call(&format!("pause {name}"), docker.pause_container(&name)).await,
        Plan::Killed => {
            let kill = KillContainerOptionsBuilder::new().signal("SIGKILL").build();
            call(
                &format!("kill {name}"),
                docker.kill_container(&name, Some(kill)),
            )
            .await;
        }
        _ => {}
    }
}

/// Runs `n` jobs, [`PARALLEL`] at a time.
async fn parallel<F: Future<Output = ()> + Send + 'static>(n: usize, job: impl Fn(usize) -> F) {
    let mut set = tokio::task::JoinSet::new();
    for i in 0..n {
        while set.len() >= PARALLEL {
            if let Some(Err(e)) = set.join_next().await {
                panic!("a job failed: {e}");
            }
        }
        set.spawn(job(i));
    }
    while let Some(done) = set.join_next().await {
        if let Err(e) = done {
            panic!("a job failed: {e}");
        }
    }
}

/// The raw list: one `GET` on the socket, read to its end (HTTP/1.0: the
/// body as it is, no chunks); its body.
fn raw_list(socket: &str, tag: &str) -> Vec<u8> {
    let filters = format!(r#"{{"label":["{SELECT}={tag}"]}}"#);
    let query: String = filters
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                char::from(b).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect();
    let mut s = UnixStream::connect(socket).expect("the docker socket");
    s.set_read_timeout(Some(Duration::from_secs(60)))
        .expect("a timeout");
    write!(
        s,
        "GET /containers/json?all=1&filters={query} HTTP/1.0\r\nHost: docker\r\n\r\n"
    )
    .expect("the request");
    let mut answer = Vec::new();
    s.read_to_end(&mut answer).expect("the answer");
    let at = answer
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a head");
    let head = String::from_utf8_lossy(&answer[..at]);
    assert!(
        head.starts_with("HTTP/1.0 200") || head.starts_with("HTTP/1.1 200"),
        "{head}"
    );
    answer.split_off(at + 4)
}

/// How many listed containers show each health in `Status`.
fn statuses(body: &[u8]) -> (usize, BTreeMap<&'static str, usize>) {
    let list: Vec<serde_json::Value> = serde_json::from_slice(body).expect("a list");
    let mut seen = BTreeMap::new();
    for c in &list {
        let status = c["Status"].as_str().unwrap_or("");
        for word in ["(healthy)", "(unhealthy)", "(health: starting)", "(Paused)"] {
            if status.ends_with(word) {
                *seen.entry(word).or_insert(0) += 1;
            }
        }
    }
    (list.len(), seen)
}

/// `VmHWM` and `VmRSS` of `pid`, KiB.
fn memory(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("VmHWM:"), field("VmRSS:"))
}

/// CPU time (user + system) `pid` has used, ms (10 ms ticks).
fn cpu_ms(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // After the command's `)`: state is field 3, utime 14, stime 15.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or("", |(_, rest)| rest)
        .split_whitespace()
        .collect();
    let tick = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (tick(11) + tick(12)) * 10.0
}

/// One lookout run: time to `connected`, its CPU by then, the instances
/// it counts, peak and steady RSS (KiB).
struct Run {
    time: Duration,
    /// `time` ÷ the raw list's right before it.
    ratio: f64,
    cpu: f64,
    instances: u64,
    peak: u64,
    steady: u64,
}

fn lookout(bin: &Path, label: &str, readiness: bool) -> Run {
    let mut args: Vec<String> = ["docker", "--json", "--label", label]
        .map(str::to_owned)
        .to_vec();
    if readiness {
        args.push("--readiness".to_owned());
    }
    let started = Instant::now();
    let p = LookoutProcess::start(bin, &args, false);
    let connected = p.status("connected");
    let time = started.elapsed();
    let cpu = cpu_ms(p.child.id());
    let (peak, _) = memory(p.child.id());
    std::thread::sleep(Duration::from_secs(1));
    let (peak_later, steady) = memory(p.child.id());
    Run {
        time,
        ratio: 0.0,
        cpu,
        instances: connected["instances"].as_u64().unwrap_or(u64::MAX),
        peak: peak.max(peak_later),
        steady,
    }
}

fn docker_ps(tag: &str) -> (Duration, usize) {
    let started = Instant::now();
    let out = Command::new(engines::docker_cli())
        .args([
            "ps",
            "-a",
            "--no-trunc",
            "--filter",
            &format!("label={SELECT}={tag}"),
        ])
        .output()
        .expect("docker ps");
    let time = started.elapsed();
    assert!(out.status.success(), "docker ps failed");
    (
        time,
        out.stdout.split(|&b| b == b'\n').count().saturating_sub(2),
    )
}

/// What `--readiness --initial` tells at start-up: every container once
/// created (and started when it runs), each running one's health and
/// readiness as planned, the unhealthy ones failing with `down`.
fn check_told(bin: &Path, tag: &str, n: usize) {
    let args: Vec<String> = [
        "docker",
        "--json",
        "--readiness",
        "--initial",
        "--label",
        &format!("{SELECT}={tag}"),
    ]
    .map(str::to_owned)
    .to_vec();
    let p = LookoutProcess::start(bin, &args, true);
    let connected = p.status("connected");
    assert_eq!(connected["instances"].as_u64(), Some(n as u64));
    // The snapshot's events come before `connected`; read what is there.
    let mut told: BTreeMap<String, Vec<serde_json::Value>> = BTreeMap::new();
    while let Ok((_, line)) = p.out.recv_timeout(Duration::from_millis(500)) {
        let v: serde_json::Value = serde_json::from_str(&line).expect("a JSON line");
        if v["origin"] == "initial" {
            let name = v["instance"].as_str().expect("an instance").to_owned();
            told.entry(name).or_default().push(v);
        }
    }
    assert_eq!(told.len(), n, "every container told");
    let mut failing = 0;
    if std::env::var_os("LOOKOUT_STARTUP_SHOW").is_some() {
        for (name, events) in &told {
            let kinds: Vec<String> = events
                .iter()
                .map(|e| format!("{}/{}", e["kind"], e["health"]))
                .collect();
            eprintln!("{name}: {kinds:?}");
        }
    }
    for (name, events) in &told {
        let i: usize = name
            .rsplit('-')
            .next()
            .and_then(|i| i.parse().ok())
            .expect("an index");
        let plan = Plan::of(i, n);
        let kinds: Vec<&str> = events.iter().filter_map(|e| e["kind"].as_str()).collect();
        let once = |k: &str| kinds.iter().filter(|&&x| x == k).count() == 1;
        if plan.runs() {
            let last = events.last().expect("an event");
            assert_eq!(last["paused"], plan == Plan::Paused, "{name}: {events:?}");
            let ready = matches!(plan, Plan::Running | Plan::Healthy);
            assert!(once("created") && once("started"), "{name}: {kinds:?}");
            assert_eq!(
                kinds.iter().filter(|&&k| k == "ready").count(),
                usize::from(ready),
                "{name} ({plan:?}): {kinds:?}"
            );
            if let Some(health) = plan.health() {
                assert_eq!(last["health"], health, "{name}: {events:?}");
            }
            if plan == Plan::Unhealthy {
                let why = events.iter().find(|e| e["kind"] == "failing");
                assert_eq!(
                    why.map(|e| e["message"].as_str().unwrap_or("").trim()),
                    Some("down"),
                    "{name}: {events:?}"
                );
                failing += 1;
            }
        } else {
            assert!(once("created"), "{name}: {kinds:?}");
            assert!(!kinds.contains(&"started"), "{name}: {kinds:?}");
            assert!(
                !kinds.contains(&"ready") && !kinds.contains(&"unready"),
                "{name}: {kinds:?}"
            );
        }
    }
    let planned = (0..n)
        .filter(|&i| Plan::of(i, n) == Plan::Unhealthy)
        .count();
    assert_eq!(failing, planned, "every unhealthy container failing");
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn size(
    rt: &tokio::runtime::Runtime,
    docker: &Docker,
    bins: &[(String, PathBuf)],
    n: usize,
    full: bool,
) {
    let socket = engines::docker_host()
        .strip_prefix("unix://")
        .expect("a unix:// docker host")
        .to_owned();
    let tag = format!("{}-{n}", std::process::id());
    let _containers = Containers(tag.clone());
    let every = Duration::from_secs(if full { 30 } else { 1 });
    let made = Instant::now();
    let image = engines::test_image();
    rt.block_on(parallel(n, |i| {
        make(docker.clone(), image.clone(), tag.clone(), i, n, every)
    }));
    eprintln!(
        "startup: {n} containers made in {:.1} s",
        made.elapsed().as_secs_f64()
    );
    // Until the list shows every planned health.
    let want = |plan| (0..n).filter(|&i| Plan::of(i, n) == plan).count();
    let expected = BTreeMap::from([
        ("(healthy)", want(Plan::Healthy)),
        ("(unhealthy)", want(Plan::Unhealthy)),
        ("(health: starting)", want(Plan::Starting)),
        ("(Paused)", want(Plan::Paused)),
    ]);
    let deadline = Instant::now() + every * 4 + Duration::from_secs(60);
    let body = loop {
        let body = raw_list(&socket, &tag);
        let (count, seen) = statuses(&body);
        assert_eq!(count, n, "the list");
        if seen == expected {
            break body;
        }
        assert!(
            Instant::now() < deadline,
            "the planned health never showed: {seen:?}, want {expected:?}"
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    let label = format!("{SELECT}={tag}");
    for (_, bin) in bins {
        check_told(bin, &tag, n);
    }

    // Per binary (this one, and `LOOKOUT_ANCHOR_BIN` beside it): plain,
    // with readiness, and the baseline, each round.
    let (mut raw, mut ps) = (vec![], vec![]);
    let mut runs: Vec<[Vec<Run>; 3]> = bins.iter().map(|_| Default::default()).collect();
    for _ in 0..ROUNDS {
        let t = Instant::now();
        let b = raw_list(&socket, &tag);
        raw.push(ms(t.elapsed()));
        assert!(b.len().abs_diff(body.len()) < body.len() / 10, "the list");
        let (t, listed) = docker_ps(&tag);
        assert_eq!(listed, n, "docker ps");
        ps.push(ms(t));
        for ((_, bin), runs) in bins.iter().zip(&mut runs) {
            for (k, (label, readiness, count)) in [
                (label.as_str(), false, n),
                (label.as_str(), true, n),
                ("none=x", false, 0),
            ]
            .into_iter()
            .enumerate()
            {
                // The anchor right before each run: a ratio per pair, so
                // that the load's drift between runs cancels.
                let t = Instant::now();
                raw_list(&socket, &tag);
                let before = t.elapsed();
                raw.push(ms(before));
                let mut r = lookout(bin, label, readiness);
                r.ratio = r.time.as_secs_f64() / before.as_secs_f64();
                assert_eq!(r.instances, count as u64, "{}", bin.display());
                runs[k].push(r);
            }
        }
    }
    let anchor = median(raw.clone());
    println!();
    println!(
        "### {n} containers ({} running), list body {:.2} MB, load {}",
        (0..n).filter(|&i| Plan::of(i, n).runs()).count(),
        body.len() as f64 / 1e6,
        load()
    );
    println!();
    println!(
        "| what | median of {ROUNDS} (runs) | ÷ the raw list just before (median) | CPU to `connected` | peak RSS | steady RSS | per container over the baseline (peak / steady) |"
    );
    println!("|---|---|---|---|---|---|---|");
    let runs_of = |v: &[f64]| {
        v.iter()
            .map(|x| format!("{x:.1}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    println!(
        "| raw list (`GET /containers/json?all=1`) | {anchor:.1} ms ({} runs, {:.1}–{:.1}) | 1.00× | – | – | – | – |",
        raw.len(),
        raw.iter().copied().fold(f64::INFINITY, f64::min),
        raw.iter().copied().fold(0.0, f64::max)
    );
    println!(
        "| `docker ps -a --no-trunc` | {:.1} ms ({}) | {:.2}× | – | – | – | – |",
        median(ps.clone()),
        runs_of(&ps),
        median(ps.clone()) / anchor
    );
    for ((who, _), [plain, ready, base]) in bins.iter().zip(&runs) {
        let kib =
            |runs: &[Run], f: fn(&Run) -> u64| median(runs.iter().map(|r| f(r) as f64).collect());
        let (base_peak, base_steady) = (kib(base, |r| r.peak), kib(base, |r| r.steady));
        for (what, runs) in [("--json", plain), ("--json --readiness", ready)] {
            let times: Vec<f64> = runs.iter().map(|r| ms(r.time)).collect();
            let (peak, steady) = (kib(runs, |r| r.peak), kib(runs, |r| r.steady));
            let per = |kib: f64, base: f64| (kib - base) * 1024.0 / n as f64;
            println!(
                "| {who}`lookout docker {what}` | {:.1} ms ({}) | {:.2}× | {:.0} ms | {:.1} MiB | {:.1} MiB | {:.0} B / {:.0} B |",
                median(times.clone()),
                runs_of(&times),
                median(runs.iter().map(|r| r.ratio).collect()),
                median(runs.iter().map(|r| r.cpu).collect()),
                peak / 1024.0,
                steady / 1024.0,
                per(peak, base_peak),
                per(steady, base_steady)
            );
        }
        println!(
            "| {who}`lookout docker --json --label none=x` (baseline) | – | – | – | {:.1} MiB | {:.1} MiB | – |",
            base_peak / 1024.0,
            base_steady / 1024.0
        );
    }
    let removing = Instant::now();
    rt.block_on(parallel(n, |i| {
        let docker = docker.clone();
        let name = format!("lookout-startup-{tag}-{i}");
        async move {
            let rm = RemoveContainerOptionsBuilder::new().force(true).build();
            call(
                &format!("rm {name}"),
                docker.remove_container(&name, Some(rm)),
            )
            .await;
        }
    }));
    eprintln!(
        "startup: {n} containers removed in {:.1} s",
        removing.elapsed().as_secs_f64()
    );
}

fn main() {
    if !engines_configured() {
        return;
    }
    let full = std::env::args().any(|a| a == "--bench");
    let sizes: Vec<usize> = std::env::var("LOOKOUT_STARTUP_SIZES").map_or_else(
        |_| if full { vec![2_000, 10_000] } else { vec![50] },
        |s| {
            s.split(',')
                .map(|n| n.trim().parse().expect("LOOKOUT_STARTUP_SIZES: numbers"))
                .collect()
        },
    );
    let _lock = engines::lock_engine("docker", false).expect("the docker engine lock");
    engines::docker_up().unwrap_or_else(|e| panic!("docker: cannot bring the engine up: {e}"));
    let mut bins = vec![(String::new(), lookout_binary())];
    if let Some(anchor) = std::env::var_os("LOOKOUT_ANCHOR_BIN") {
        bins.push(("anchor: ".to_owned(), PathBuf::from(anchor)));
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let host = engines::docker_host();
    let socket = host.strip_prefix("unix://").expect("a unix:// docker host");
    let docker = rt.block_on(async {
        Docker::connect_with_unix(socket, 120, bollard::API_DEFAULT_VERSION)
            .expect("a bollard client")
    });
    sweep_leftovers();
    println!(
        "## Start-up at scale (bench `startup`), {}",
        bins[0].1.display()
    );
    if let Some((_, anchor)) = bins.get(1) {
        println!("anchor: {}", anchor.display());
    }
    for n in sizes {
        size(&rt, &docker, &bins, n, full);
    }
}
