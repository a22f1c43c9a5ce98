#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    clippy::cast_precision_loss,
    clippy::cast_possible_wrap,
    clippy::too_many_lines,
    // A bench harness, not library code: the fake engine runs on a thread of its own.
    clippy::disallowed_methods
)]

//! Soak (issue #7): lookout against a loopback fake Docker engine for N
//! minutes; resources before and after must be flat.
//!
//! The engine (`lookout_testkit::fake_engine`'s `Live`; a unix socket in a
//! temp dir) runs in a **process of its own** (this bench run again,
//! [`engine`]), so that the figures below are the memory, fds and tasks of
//! lookout and its consumers only: with the engine in the soak's process,
//! its request log (every target, unbounded then) grew ~0.6 KiB per cycle
//! and the RSS gate charged it to lookout. It has 48 containers' worth of names whose state the harness changes
//! (create → start → die → start again or destroy, a new container id per
//! create), lists their true state on `/containers/json`, broadcasts each
//! change on `/events` as a real-format dockerd 27 line, replays its last 256
//! events for `since`, and treats a subscriber that does not read as dockerd
//! does: its 1024-event buffer fills, then events are dropped for it and the
//! connection stays open.
//!
//! Phases, all on the main thread's current-thread runtime (the consumer's):
//!
//! 1. **warm-up**: a round of 8 cycles and 2 reconnects and a 4 s pause (2.5 s in the smoke run: past the 2 s lag bound)
//!    (allocator and buffers reach their working size), then the engine's
//!    connections must all close; **before** = RSS (`VmRSS`), open fds (`/proc/self/fd`) and the
//!    consumer runtime's alive tasks.
//! 2. **churn**, in rounds until its time is up (and at least 1000·N dial/drop
//!    cycles and 100·N forced reconnects: the 10k and 1k at N = 10):
//!    - 100 dial/drop cycles, each a new `lookout_docker::watch` dropped at
//!      one of four points in turn: mid-dial (polled once), mid-snapshot
//!      (after its first initial event), streaming (after `Connected`),
//!      streaming after a live event (the engine changes one container);
//!    - 10 forced reconnects of one long-lived watch (`initial` on, so the
//!      harness knows its full state): the engine changes 2 containers live
//!      and the known state must match; then the engine cuts every `/events`
//!      connection mid-body and changes 2 containers while nobody listens
//!      (every other time as a restarting daemon: its history lost, so only
//!      the relist can tell); the watch must yield one `Disconnected`, redial,
//!      relist, and at its `Connected` the known state (from the events alone)
//!      and its instance count must equal the engine's. Its reconnect policy
//!      is short (2 ms initial, 100 ms cap, reset after any healthy session),
//!      its probe runs after 1 s of silence and its periodic resync every 5 s,
//!      so those paths soak too.
//! 3. **paused consumer**: a fresh watch in sync, then not polled for P
//!    (120 s at N ≥ 10, 12 s·N, at least 20 s; 3 s in the smoke run, past the 2 s lag bound) while the
//!    engine makes 500 changes a second (4000 in the smoke run; once its
//!    buffers are full they are dropped for this subscriber, as dockerd
//!    would); RSS is sampled every 100 ms. Then it is polled again: it must
//!    catch up and, after a resync, its known state must equal the engine's.
//!    It runs `WatchConfig::default()` (plus `initial`): the engine says
//!    nothing about dropped events, so the relist that repairs the state is
//!    the one for consumer lag (`resync_after_lag`, 2 s). A second watch
//!    with that relist turned off is paused alongside; after the pause it is
//!    drained until it has nothing for 1 s and the number of containers it
//!    then knows wrong is printed (an observation, not a check: what the
//!    lag relist is for).
//! 4. every watch dropped, the engine's connections must all close (bounded
//!    wait: a connection left open means lookout did not close its side);
//!    **after** = the same three figures.
//!
//! Fails (exit 1) on: growth over the tolerances below; a wait over its bound
//! (10 s per stream item, a hang); an event inconsistent with the state known
//! so far (e.g. `started` twice in a row); a known state that differs from
//! the engine's after a resync.
//!
//! Tolerances (after − before, both measured with no watch alive and the
//! engine's connections closed):
//! - open fds: **+0** (a leaked connection is at least one fd: both ends
//!   are in this process);
//! - tokio alive tasks on the consumer's runtime: **+0** (lookout spawns
//!   nothing, so it is 0 throughout);
//! - RSS: **+8 MiB** — allocator noise after the warm-up stays well under
//!   it, while leaking one session (its hyper buffers: ≥ 8 KiB) per cycle
//!   would be ≥ 80 MB over the 10k cycles;
//! - RSS during the pause: **+16 MiB** over the RSS when it began;
//! - **the slope**: RSS is sampled after every round of the churn; the mean
//!   of the last third of the samples may exceed the mean of the first third
//!   by at most **1 MiB**, or by at most **32 B per dial/drop cycle** made
//!   between them. Memory that stops growing passes at any cycle count;
//!   memory that grows with the cycles fails however fast the machine is
//!   (a leaked session, ≥ 8 KiB a cycle, over the 1-minute run's minimum of
//!   1000 cycles is ≥ 5 MB between the thirds).
//!
//! The verdict does not depend on the machine's speed: the churn lasts at
//! least its time, but every tolerance is flat or per cycle.
//! `--leak-per-cycle BYTES` makes the harness leak that much per cycle in the
//! soak's process: the gates' own check (600 B, what the engine's request
//! log cost, fails the 1-minute run).
//!
//! `cargo bench -p lookout-e2e --bench soak -- --minutes N` (N ≥ 1; without
//! `--minutes`, N = 10), or `cargo xtask soak --minutes N`; `cargo test
//! --workspace --bench soak -- --minutes N` runs the same on the debug
//! build (about a third of the cycles per second). With no argument at all
//! (as `cargo test --benches` runs it) a smoke run of a few seconds: 1 round
//! of 40 cycles and 10 reconnects, a 1 s pause.

#[path = "soak/engine.rs"]
mod engine;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use engine::Engine;
use lookout_core::{EventKind, InstanceEvent, Item, Origin, ReconnectPolicy, Status, WatchConfig};
use lookout_docker::{DockerConfig, DockerDial, watch};
use tokio_stream::StreamExt;

/// The bound of every wait for one stream item.
const STEP: Duration = Duration::from_secs(10);
const FDS_TOLERANCE: i64 = 0;
const TASKS_TOLERANCE: i64 = 0;
const RSS_TOLERANCE_KIB: i64 = 8 * 1024;
const PAUSE_RSS_TOLERANCE_KIB: i64 = 16 * 1024;
/// The slope check: RSS over the churn's last third against its first third
/// may grow by at most this much per dial/drop cycle between them…
const SLOPE_TOLERANCE_BYTES_PER_CYCLE: i64 = 32;
/// … or by this much in all (allocator noise, whatever the cycle count).
const SLOPE_FLOOR_KIB: i64 = 1024;

type Watch = lookout_core::Watch<DockerDial>;

#[derive(Debug, Clone)]
struct Plan {
    /// `None`: the smoke run.
    minutes: Option<u64>,
    /// How long the churn rounds go on (at least `min_cycles`/`min_reconnects`).
    churn: Duration,
    min_cycles: u64,
    min_reconnects: u64,
    /// Per round.
    cycles: u64,
    reconnects: u64,
    pause: Duration,
    /// Engine changes per second while the consumer is paused.
    pause_rate: usize,
    warmup_pause: Duration,
    /// `--leak-per-cycle BYTES`: the harness leaks this much per dial/drop
    /// cycle, in the soak's process, to show that the gates catch a leak.
    leak_per_cycle: usize,
}

impl Plan {
    fn from_args() -> Result<Self, String> {
        let args: Vec<String> = std::env::args().skip(1).collect();
        let mut minutes = None;
        let mut full = false;
        let mut leak_per_cycle = 0;
        let mut it = args.iter();
        while let Some(a) = it.next() {
            match a.as_str() {
                "--bench" => full = true,
                "--minutes" => {
                    let n = it.next().ok_or("--minutes needs a value")?;
                    let n: u64 =
                        n.parse().ok().filter(|n| *n >= 1).ok_or_else(|| {
                            format!("--minutes takes a whole number ≥ 1, not {n:?}")
                        })?;
                    minutes = Some(n);
                }
                "--leak-per-cycle" => {
                    let n = it.next().ok_or("--leak-per-cycle needs a value")?;
                    leak_per_cycle = n.parse().map_err(|_| {
                        format!("--leak-per-cycle takes a number of bytes, not {n:?}")
                    })?;
                }
                other => {
                    return Err(format!(
                        "unknown argument {other:?} (--minutes N, --leak-per-cycle BYTES)"
                    ));
                }
            }
        }
        if minutes.is_none() && full {
            minutes = Some(10);
        }
        Ok(match minutes {
            None => Self {
                minutes: None,
                churn: Duration::ZERO,
                min_cycles: 40,
                min_reconnects: 10,
                cycles: 40,
                reconnects: 10,
                pause: Duration::from_secs(3),
                pause_rate: 4000,
                warmup_pause: Duration::from_millis(2500),
                leak_per_cycle,
            },
            Some(n) => {
                let total = Duration::from_secs(60 * n);
                let pause = Duration::from_secs((12 * n).clamp(20, 120));
                // Warm-up, resume and settling: about 10 s.
                let churn = total
                    .saturating_sub(pause + Duration::from_secs(10))
                    .max(Duration::from_secs(10));
                Self {
                    minutes: Some(n),
                    churn,
                    min_cycles: 1000 * n,
                    min_reconnects: 100 * n,
                    cycles: 100,
                    reconnects: 10,
                    pause,
                    pause_rate: 500,
                    // Long enough to fill a paused subscriber's buffers (1024 events
                    // queued, ~450 in the socket) as the real pause will.
                    warmup_pause: Duration::from_secs(4),
                    leak_per_cycle,
                }
            }
        })
    }
}

#[derive(Debug, Clone, Copy)]
struct Sample {
    rss_kib: i64,
    fds: i64,
    tasks: i64,
}

fn rss_kib() -> i64 {
    rss_kib_of("/proc/self/status")
}

/// `VmRSS` of a `/proc/…/status` file, in KiB; -1 if it cannot be read.
fn rss_kib_of(status: &str) -> i64 {
    std::fs::read_to_string(status)
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(-1)
}

/// Must run on the consumer's runtime.
fn sample() -> Sample {
    let fds = std::fs::read_dir("/proc/self/fd").map_or(-1, |d| d.count() as i64);
    let tasks = tokio::runtime::Handle::current()
        .metrics()
        .num_alive_tasks() as i64;
    Sample {
        rss_kib: rss_kib(),
        fds,
        tasks,
    }
}

impl std::fmt::Display for Sample {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "RSS {} KiB ({:.1} MiB), open fds {}, tokio alive tasks {}",
            self.rss_kib,
            self.rss_kib as f64 / 1024.0,
            self.fds,
            self.tasks
        )
    }
}

/// Waits (bounded) until the engine has no connection open: every watch
/// was dropped, so lookout must have closed its side of each.
async fn settle(engine: &Engine, what: &str) -> Result<(), String> {
    let deadline = Instant::now() + STEP;
    loop {
        let c = engine.counts();
        if c.open == 0 && c.subscribers == 0 {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "{what}: {} engine connection(s) ({} /events) still open {STEP:?} after every \
                 watch was dropped: lookout did not close them",
                c.open, c.subscribers
            ));
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn policy() -> ReconnectPolicy {
    ReconnectPolicy::default()
        .initial_delay(Duration::from_millis(2))
        .multiplier(2.0)
        .max_delay(Duration::from_millis(100))
        .jitter(true)
        .reset_after(Duration::ZERO)
        .seed(None)
}

fn config(host: &str, watch: WatchConfig) -> DockerConfig {
    DockerConfig::default().host(host).watch_config(
        watch
            .reconnect(policy())
            .dial_timeout(Duration::from_secs(5)),
    )
}

/// A watch and what its events say the engine's state is.
struct Consumer {
    w: Watch,
    /// Name → running, from the events alone.
    model: BTreeMap<String, bool>,
    events: u64,
    resync_events: u64,
    connects: u64,
    disconnects: u64,
    /// The instance count of the last `Connected`.
    instances: usize,
}

impl Consumer {
    fn new(config: DockerConfig) -> Self {
        Self {
            w: watch(config).expect("a valid host"),
            model: BTreeMap::new(),
            events: 0,
            resync_events: 0,
            connects: 0,
            disconnects: 0,
            instances: 0,
        }
    }

    async fn item(&mut self, what: &str) -> Result<Item, String> {
        let item = match tokio::time::timeout(STEP, self.w.next()).await {
            Ok(Some(item)) => item,
            Ok(None) => return Err(format!("{what}: the stream ended (it never should)")),
            Err(_) => {
                return Err(format!(
                    "{what}: nothing from the stream for {STEP:?} (a hang); {:?}",
                    self.w
                ));
            }
        };
        match &item {
            Item::Event(e) => self.apply(e, what)?,
            Item::Status(Status::Connected { instances }) => {
                self.connects += 1;
                self.instances = *instances;
            }
            Item::Status(Status::Disconnected { .. }) => self.disconnects += 1,
            Item::Status(Status::Lagged { .. }) => {
                return Err("a Watch yielded Lagged (only a Subscription may)".into());
            }
            Item::Status(other) => return Err(format!("an unknown status: {other:?}")),
        }
        Ok(item)
    }

    fn apply(&mut self, e: &InstanceEvent, what: &str) -> Result<(), String> {
        self.events += 1;
        if e.origin == Origin::Resync {
            self.resync_events += 1;
        }
        let id = e.id.as_str();
        let before = self.model.get(id).copied();
        let ok = match e.kind {
            EventKind::Created => self.model.insert(id.to_owned(), false).is_none(),
            EventKind::Started => self
                .model
                .get_mut(id)
                .is_some_and(|r| !std::mem::replace(r, true)),
            EventKind::Stopped => self
                .model
                .get_mut(id)
                .is_some_and(|r| std::mem::replace(r, false)),
            EventKind::Removed => self.model.remove(id).is_some(),
            // Readiness is not watched here: any other kind is wrong.
            _ => false,
        };
        if ok {
            Ok(())
        } else {
            let state = match before {
                None => "absent",
                Some(true) => "running",
                Some(false) => "stopped",
            };
            Err(format!(
                "{what}: event `{id} {} ({})` contradicts the state its earlier events gave \
                 ({state})",
                e.kind, e.origin
            ))
        }
    }

    /// Polls until the next `Connected`; its instance count.
    async fn until_connected(&mut self, what: &str) -> Result<usize, String> {
        let connects = self.connects;
        while self.connects == connects {
            self.item(what).await?;
        }
        Ok(self.instances)
    }

    /// Polls until the known state is the engine's (bounded).
    async fn until_in_sync(&mut self, live: &Engine, what: &str) -> Result<(), String> {
        let deadline = Instant::now() + STEP;
        loop {
            let truth = live.snapshot();
            if self.model == truth {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "{what}: the known state still differs from the engine's after {STEP:?}: {}",
                    diff(&self.model, &truth)
                ));
            }
            self.item(what).await?;
        }
    }
}

fn diff(known: &BTreeMap<String, bool>, truth: &BTreeMap<String, bool>) -> String {
    let show = |v: Option<&bool>| match v {
        None => "absent",
        Some(true) => "running",
        Some(false) => "stopped",
    };
    let mut out = Vec::new();
    for name in known.keys().chain(truth.keys()) {
        let (k, t) = (known.get(name), truth.get(name));
        if k != t && out.len() < 2 * 8 {
            out.push(format!("{name}: known {}, engine {}", show(k), show(t)));
        }
    }
    out.dedup();
    format!(
        "{} known, {} in the engine; {}",
        known.len(),
        truth.len(),
        out.join("; ")
    )
}

#[derive(Debug, Default)]
struct Churn {
    cycles: u64,
    by_point: [u64; 4],
    reconnects: u64,
    restarts: u64,
    disconnects: u64,
    resync_events: u64,
    periodic: u64,
    max_tasks: i64,
    /// RSS (KiB) after each round of the churn, with the cycles made by then.
    samples: Vec<(u64, i64)>,
}

/// The slope check's figures: RSS over the churn's last third against its
/// first third (each a mean of its rounds' samples).
#[derive(Debug, Clone, Copy)]
struct Slope {
    /// Mean cycles and RSS of the first third, and of the last.
    first: (f64, f64),
    last: (f64, f64),
}

impl Slope {
    /// `None` with fewer than three samples (the smoke run's one round).
    fn of(samples: &[(u64, i64)]) -> Option<Self> {
        let third = samples.len() / 3;
        if third == 0 {
            return None;
        }
        let mean = |part: &[(u64, i64)]| {
            let n = part.len() as f64;
            (
                part.iter().map(|(c, _)| *c as f64).sum::<f64>() / n,
                part.iter().map(|(_, r)| *r as f64).sum::<f64>() / n,
            )
        };
        Some(Self {
            first: mean(&samples[..third]),
            last: mean(&samples[samples.len() - third..]),
        })
    }

    fn growth_kib(self) -> f64 {
        self.last.1 - self.first.1
    }

    fn cycles(self) -> f64 {
        self.last.0 - self.first.0
    }

    /// Bytes per dial/drop cycle between the two thirds.
    fn bytes_per_cycle(self) -> f64 {
        self.growth_kib() * 1024.0 / self.cycles().max(1.0)
    }

    /// Flat: grown by no more than the floor, or no faster than the tolerance.
    fn flat(self) -> bool {
        self.growth_kib() <= SLOPE_FLOOR_KIB as f64
            || self.bytes_per_cycle() <= SLOPE_TOLERANCE_BYTES_PER_CYCLE as f64
    }
}

/// One dial/drop cycle; `point` picks where the watch is dropped.
async fn cycle(
    host: &str,
    live: &Engine,
    rw: &mut Consumer,
    point: usize,
    churn: &mut Churn,
) -> Result<(), String> {
    let what = [
        "dial/drop mid-dial",
        "dial/drop mid-snapshot",
        "dial/drop streaming",
        "dial/drop after a live event",
    ][point];
    let mut c = Consumer::new(config(host, WatchConfig::default().initial(point != 2)));
    match point {
        0 => {
            // One poll: the dial is under way.
            let _ = tokio::time::timeout(Duration::ZERO, c.w.next()).await;
        }
        1 => {
            c.item(what).await?;
        }
        2 => {
            c.until_connected(what).await?;
        }
        _ => {
            c.until_connected(what).await?;
            let events = c.events;
            live.mutate(1);
            while c.events == events {
                c.item(what).await?;
            }
        }
    }
    churn.max_tasks = churn.max_tasks.max(sample().tasks);
    drop(c);
    churn.cycles += 1;
    churn.by_point[point] += 1;
    if point == 3 {
        // The long-lived watch saw that change too.
        rw.until_in_sync(live, "the long-lived watch after a cycle's change")
            .await?;
    }
    Ok(())
}

/// One forced reconnect of the long-lived watch.
async fn reconnect(live: &Engine, rw: &mut Consumer, churn: &mut Churn) -> Result<(), String> {
    live.mutate(2);
    rw.until_in_sync(live, "live changes before a cut").await?;
    let restart = churn.reconnects % 2 == 1;
    let what = if restart {
        "reconnect after a cut and a daemon restart"
    } else {
        "reconnect after a cut"
    };
    let disconnects = rw.disconnects;
    live.cut(restart, 2);
    while rw.disconnects == disconnects {
        rw.item(what).await?;
    }
    let instances = rw.until_connected(what).await?;
    let truth = live.snapshot();
    if instances != truth.len() {
        return Err(format!(
            "{what}: Connected says {instances} instances, the engine has {}",
            truth.len()
        ));
    }
    if rw.model != truth {
        return Err(format!(
            "{what}: at Connected the known state differs from the engine's: {}",
            diff(&rw.model, &truth)
        ));
    }
    churn.max_tasks = churn.max_tasks.max(sample().tasks);
    rw.until_in_sync(live, what).await?;
    churn.reconnects += 1;
    churn.restarts += u64::from(restart);
    Ok(())
}

fn long_lived(host: &str) -> Consumer {
    Consumer::new(config(
        host,
        WatchConfig::default()
            .initial(true)
            .probe_after(Duration::from_secs(1))
            .probe_timeout(Duration::from_secs(5))
            .resync_every(Some(Duration::from_secs(5))),
    ))
}

async fn round(
    host: &str,
    live: &Engine,
    rw: &mut Consumer,
    plan: &Plan,
    churn: &mut Churn,
) -> Result<(), String> {
    for i in 0..plan.cycles {
        cycle(host, live, rw, (i % 4) as usize, churn).await?;
        if plan.leak_per_cycle > 0 {
            // The gates' own check (`--leak-per-cycle`): memory that is never freed.
            Box::leak(vec![1u8; plan.leak_per_cycle].into_boxed_slice());
        }
        // Spread the reconnects through the round.
        if plan.reconnects > 0 && (i + 1) % (plan.cycles / plan.reconnects).max(1) == 0 {
            reconnect(live, rw, churn).await?;
        }
    }
    Ok(())
}

#[derive(Debug, Default)]
struct Pause {
    emitted: u64,
    dropped: u64,
    rss_before: i64,
    rss_peak: i64,
    drained: u64,
    resync_events: u64,
    to_in_sync: Duration,
    containers: usize,
    running: usize,
    /// The consumer with the default `resync_every` (300 s): events drained
    /// until it went quiet, and how many containers it then had wrong.
    default_drained: u64,
    default_wrong: usize,
}

/// The paused consumer.
async fn pause(host: &str, live: &Engine, length: Duration, rate: usize) -> Result<Pause, String> {
    let mut pw = Consumer::new(config(host, WatchConfig::default().initial(true)));
    pw.until_connected("paused consumer: first sync").await?;
    pw.until_in_sync(live, "paused consumer: first sync")
        .await?;
    // Paused alongside, without the lag relist: what a consumer sees after
    // the backlog, before its periodic relist (300 s).
    let mut pd = Consumer::new(config(
        host,
        WatchConfig::default().initial(true).resync_after_lag(None),
    ));
    pd.until_connected("paused consumer (no lag relist): first sync")
        .await?;
    pd.until_in_sync(live, "paused consumer (no lag relist): first sync")
        .await?;
    let counts = live.counts();
    let mut p = Pause {
        rss_before: rss_kib(),
        ..Pause::default()
    };
    p.rss_peak = p.rss_before;
    let tick = Duration::from_millis(100);
    let per_tick = (rate / 10).max(1);
    let start = tokio::time::Instant::now();
    let mut next = start;
    // Not polling `pw` meanwhile: the consumer is busy elsewhere.
    while next.duration_since(start) < length {
        live.mutate(per_tick);
        next += tick;
        tokio::time::sleep_until(next).await;
        p.rss_peak = p.rss_peak.max(rss_kib());
    }
    let now = live.counts();
    p.emitted = now.published - counts.published;
    p.dropped = now.dropped - counts.dropped;
    // Resume: catch up, and a relist must repair what the engine dropped.
    let resumed = Instant::now();
    let (events, resync_events, connects) = (pw.events, pw.resync_events, pw.connects);
    let what = "paused consumer after it resumed";
    let bound = lookout_core::LAG_RESYNC_SPACING + STEP;
    let deadline = resumed + bound;
    loop {
        let truth = live.snapshot();
        if pw.connects > connects && pw.model == truth {
            p.containers = truth.len();
            p.running = truth.values().filter(|r| **r).count();
            break;
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "{what}: no resync brought the known state to the engine's within {:?}: {}",
                bound,
                diff(&pw.model, &truth)
            ));
        }
        pw.item(what).await?;
    }
    p.to_in_sync = resumed.elapsed();
    p.drained = pw.events - events;
    p.resync_events = pw.resync_events - resync_events;
    drop(pw);
    // The other one: drained until it has nothing more for 1 s (an
    // observation, not a check: without the lag relist it has no reason to
    // relist yet).
    let (events, connects) = (pd.events, pd.connects);
    let what = "paused consumer (no lag relist) after it resumed";
    let deadline = Instant::now() + STEP;
    while Instant::now() < deadline {
        match tokio::time::timeout(Duration::from_secs(1), pd.item(what)).await {
            Ok(item) => {
                item?;
            }
            Err(_) => break,
        }
    }
    if pd.connects > connects {
        println!(
            "soak: note: the paused consumer without the lag relist relisted after it resumed"
        );
    }
    p.default_drained = pd.events - events;
    let truth = live.snapshot();
    p.default_wrong = truth
        .keys()
        .chain(pd.model.keys())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .filter(|name| pd.model.get(*name) != truth.get(*name))
        .count();
    Ok(p)
}

async fn run(plan: &Plan, live: &Engine) -> Result<(Sample, Sample, Churn, Pause), String> {
    let host = live.host.as_str();
    let t0 = Instant::now();
    // Warm-up.
    {
        let mut rw = long_lived(host);
        rw.until_connected("warm-up").await?;
        let mut warm = Churn::default();
        let small = Plan {
            cycles: 8,
            reconnects: 2,
            ..plan.clone()
        };
        round(host, live, &mut rw, &small, &mut warm).await?;
        drop(rw);
        pause(host, live, plan.warmup_pause, plan.pause_rate).await?;
        settle(live, "after the warm-up").await?;
    }
    let before = sample();
    println!(
        "soak: before (after a {:.1?} warm-up): {before}",
        t0.elapsed()
    );

    let mut churn = Churn::default();
    let mut rw = long_lived(host);
    rw.until_connected("the long-lived watch").await?;
    let churn_start = Instant::now();
    let report_every = (plan.churn / 10).max(Duration::from_secs(1));
    let mut next_report = churn_start + report_every;
    while churn_start.elapsed() < plan.churn
        || churn.cycles < plan.min_cycles
        || churn.reconnects < plan.min_reconnects
    {
        round(host, live, &mut rw, plan, &mut churn).await?;
        churn.samples.push((churn.cycles, rss_kib()));
        if Instant::now() >= next_report {
            next_report += report_every;
            println!(
                "soak: [{:>5.1?}] {} cycles, {} reconnects, {} containers; {}",
                churn_start.elapsed(),
                churn.cycles,
                churn.reconnects,
                live.counts().containers,
                sample()
            );
        }
    }
    churn.disconnects = rw.disconnects;
    churn.resync_events = rw.resync_events;
    // The first sync and one per reconnect; the rest are periodic relists.
    churn.periodic = rw.connects.saturating_sub(1 + churn.reconnects);
    churn.max_tasks = churn.max_tasks.max(sample().tasks);
    drop(rw);
    println!(
        "soak: churn done in {:.1?}: {} dial/drop cycles, {} forced reconnects",
        churn_start.elapsed(),
        churn.cycles,
        churn.reconnects
    );

    let p = pause(host, live, plan.pause, plan.pause_rate).await?;
    settle(live, "at the end").await?;
    let after = sample();
    Ok((before, after, churn, p))
}

fn main() {
    let mut args = std::env::args().skip(1);
    if args.next().as_deref() == Some(engine::CHILD_FLAG) {
        let seed = args.next().and_then(|s| s.parse().ok()).unwrap_or(7);
        engine::child_main(seed);
    }
    let plan = match Plan::from_args() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("soak: {e}");
            std::process::exit(2);
        }
    };
    match plan.minutes {
        Some(n) => println!(
            "soak: {n} minute(s): churn {:?} (at least {} dial/drop cycles and {} forced \
             reconnects, in rounds of {} and {}), then a consumer paused {:?} while the engine \
             makes {} changes/s",
            plan.churn,
            plan.min_cycles,
            plan.min_reconnects,
            plan.cycles,
            plan.reconnects,
            plan.pause,
            plan.pause_rate
        ),
        None => println!(
            "soak: smoke run ({} cycles, {} reconnects, a {:?} pause at {} changes/s); \
             `cargo bench -p lookout-e2e --bench soak -- --minutes N` for the real one",
            plan.cycles, plan.reconnects, plan.pause, plan.pause_rate
        ),
    }
    let started = Instant::now();
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(7, |d| u64::from(d.subsec_nanos()) ^ d.as_secs());
    let engine = match Engine::start(seed) {
        Ok(e) => e,
        Err(e) => {
            println!("soak: FAIL: {e}");
            std::process::exit(1);
        }
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("the consumer's runtime");
    let result = rt.block_on(run(&plan, &engine));
    let events_requests = engine.counts().events_requests;
    let engine_rss = rss_kib_of(&format!("/proc/{}/status", engine.pid()));
    drop(engine);
    let (before, after, churn, p) = match result {
        Ok(r) => r,
        Err(e) => {
            println!("soak: FAIL after {:.1?}: {e}", started.elapsed());
            std::process::exit(1);
        }
    };
    println!("soak: after: {after}");
    let rss = after.rss_kib - before.rss_kib;
    let fds = after.fds - before.fds;
    let tasks = after.tasks - before.tasks;
    let pause_rss = p.rss_peak - p.rss_before;
    println!(
        "soak: growth: RSS {rss:+} KiB (tolerance +{RSS_TOLERANCE_KIB}), fds {fds:+} \
         (tolerance +{FDS_TOLERANCE}), tasks {tasks:+} (tolerance +{TASKS_TOLERANCE}); \
         most alive tasks seen with watches alive: {}",
        churn.max_tasks
    );
    println!(
        "soak: dial/drop cycles: {} (dropped mid-dial {}, mid-snapshot {}, streaming {}, \
         after a live event {})",
        churn.cycles, churn.by_point[0], churn.by_point[1], churn.by_point[2], churn.by_point[3]
    );
    println!(
        "soak: forced reconnects: {} ({} as a daemon restart, history lost), each state right \
         at its Connected; the long-lived watch saw {} Disconnected, {} resync events, {} \
         periodic relists; /events requests served in all: {events_requests}",
        churn.reconnects, churn.restarts, churn.disconnects, churn.resync_events, churn.periodic
    );
    println!(
        "soak: paused consumer: {:?} not polled while the engine made {} changes ({} deliveries \
         dropped for the 2 paused subscribers, as dockerd drops for a slow reader); RSS {} KiB \
         at the start, peak {} KiB ({pause_rss:+} KiB, tolerance +{PAUSE_RSS_TOLERANCE_KIB}); \
         resumed: {} events drained ({} from a resync), state right after {:.1?}: {} \
         containers, {} running, as the engine has them",
        plan.pause,
        p.emitted,
        p.dropped,
        p.rss_before,
        p.rss_peak,
        p.drained,
        p.resync_events,
        p.to_in_sync,
        p.containers,
        p.running
    );
    println!(
        "soak: the same pause with the lag relist off (resync_after_lag None): {} events \
         drained, then {} container names known in a state other than the engine's (until its \
         periodic relist, 300 s: the engine does not say it dropped events)",
        p.default_drained, p.default_wrong
    );
    let slope = Slope::of(&churn.samples);
    match slope {
        Some(sl) => println!(
            "soak: slope over the churn's {} rounds: RSS {:.0} KiB at cycle {:.0} (first third's \
             mean), {:.0} KiB at cycle {:.0} (last third's): {:+.0} KiB, {:+.1} B per cycle \
             (tolerance: +{SLOPE_FLOOR_KIB} KiB, or +{SLOPE_TOLERANCE_BYTES_PER_CYCLE} B per \
             cycle)",
            churn.samples.len(),
            sl.first.1,
            sl.first.0,
            sl.last.1,
            sl.last.0,
            sl.growth_kib(),
            sl.bytes_per_cycle()
        ),
        None => println!("soak: slope: not checked (fewer than 3 rounds)"),
    }
    println!(
        "soak: the engine's own process (not measured above): RSS {engine_rss} KiB at the end{}",
        if plan.leak_per_cycle > 0 {
            format!(
                "; the harness leaked {} B per cycle (--leak-per-cycle)",
                plan.leak_per_cycle
            )
        } else {
            String::new()
        }
    );
    let mut failures = Vec::new();
    if let Some(sl) = slope.filter(|sl| !sl.flat()) {
        failures.push(format!(
            "RSS grew {:.0} KiB from the churn's first third to its last ({:.1} B per cycle)",
            sl.growth_kib(),
            sl.bytes_per_cycle()
        ));
    }
    if rss > RSS_TOLERANCE_KIB {
        failures.push(format!("RSS grew {rss} KiB (> {RSS_TOLERANCE_KIB})"));
    }
    if fds > FDS_TOLERANCE {
        failures.push(format!("open fds grew by {fds}"));
    }
    if tasks > TASKS_TOLERANCE {
        failures.push(format!("tokio alive tasks grew by {tasks}"));
    }
    if pause_rss > PAUSE_RSS_TOLERANCE_KIB {
        failures.push(format!(
            "RSS grew {pause_rss} KiB during the pause (> {PAUSE_RSS_TOLERANCE_KIB})"
        ));
    }
    if churn.disconnects < churn.reconnects {
        failures.push(format!(
            "{} forced reconnects but only {} Disconnected",
            churn.reconnects, churn.disconnects
        ));
    }
    if failures.is_empty() {
        println!("soak: PASS in {:.1?}", started.elapsed());
    } else {
        println!(
            "soak: FAIL after {:.1?}: {}",
            started.elapsed(),
            failures.join("; ")
        );
        std::process::exit(1);
    }
}
