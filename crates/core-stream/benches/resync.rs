//! Resync at scale: the snapshot diff of 10k and 100k instances.
//!
//! A synthetic session lists N instances (a silent baseline), then lists them
//! again with 1% of them flipped, 0.5% gone and 0.5% new (the resync): in the
//! same order, as engines list, and for the largest N also in another order
//! (the diff must not depend on it, only its speed may). Items
//! are generated lazily, so the heap measured after the first snapshot is the
//! state the watch keeps: bytes per tracked instance. The time is that of the
//! second snapshot, from its first item to its `Connected` (listing + diff +
//! emitting the transitions), in wall-clock time and in the thread's on-CPU
//! time (which other processes' load inflates less: the machine is shared).
//!
//! `cargo bench -p lookout-core --bench resync`; without `--bench` (as
//! `cargo test --benches` runs it) a smoke run of 2k instances.
#![allow(
    clippy::cast_precision_loss,
    clippy::cast_possible_truncation,
    clippy::unnecessary_wraps
)]

use std::time::{Duration, Instant};

use lookout_core::{
    BoxError, Dial, DialFuture, Item, Labels, Listed, Observation, Status, Watch, WatchConfig,
};
use tokio_stream::StreamExt;

mod support;
use support::Ready;

#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

type Obs = Result<Observation<u64>, BoxError>;

/// What each instance carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    None,
    /// `app=app-{n % 100}`, `tier=web`.
    Two,
    /// The ten labels compose puts on a container: 20 containers a project
    /// (5 services of 4 replicas), so project, service, image, config hash
    /// and paths repeat as in real projects, and the container number
    /// differs within a service.
    Compose,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Two => "2 each",
            Self::Compose => "10 compose-style",
        }
    }
}

/// Instance `n` as an engine's listing gives it to a decoder, rendered
/// once before any clock runs: its id, whether it runs, its uid and its
/// labels, separated by NULs. `salt` is in one value of each set, so that no
/// case shares a set or string with another (the interner is the process's).
fn render(n: usize, running: bool, kind: Kind, salt: usize) -> String {
    use std::fmt::Write;
    // A container id: 64 hex digits.
    let mut out = format!("container-{n:08}\0{}\0{n:064x}", u8::from(running));
    let mut label = |k: &str, v: std::fmt::Arguments<'_>| {
        write!(out, "\0{k}\0{v}").expect("a string takes it");
    };
    match kind {
        Kind::None => {}
        Kind::Two => {
            label("app", format_args!("app-{}", n % 100));
            label("tier", format_args!("web{salt}"));
        }
        Kind::Compose => {
            let (project, service) = (n / 20, n / 4 % 5);
            let c = "com.docker.compose";
            label(
                &format!("{c}.project"),
                format_args!("shop{salt}-{project}"),
            );
            label(&format!("{c}.service"), format_args!("svc{service}"));
            label(
                &format!("{c}.container-number"),
                format_args!("{}", n % 4 + 1),
            );
            label(
                &format!("{c}.config-hash"),
                format_args!("{:064x}", project * 5 + service),
            );
            label(
                &format!("{c}.image"),
                format_args!("sha256:{:064x}", salt * 5 + service),
            );
            label(&format!("{c}.oneoff"), format_args!("False"));
            label(
                &format!("{c}.project.config_files"),
                format_args!("/srv/shop{salt}-{project}/compose.yaml"),
            );
            label(
                &format!("{c}.project.working_dir"),
                format_args!("/srv/shop{salt}-{project}"),
            );
            label(&format!("{c}.version"), format_args!("2.29.7"));
            label(&format!("{c}.depends_on"), format_args!(""));
        }
    }
    out
}

/// A listed instance made from its rendering, as a decoder makes it from
/// the engine's answer: each string straight from the input (the labels
/// into the interned set), none formatted.
fn decoded(rendered: &str) -> Obs {
    let mut fields = rendered.split('\0');
    let mut next = || fields.next().expect("a rendered field");
    let (id, running, uid) = (next(), next() == "1", next());
    let labels: Labels = std::iter::from_fn(|| Some((fields.next()?, fields.next()?))).collect();
    Ok(Observation::Listed(
        Listed::new(id.into(), running)
            .uid(Some(uid.into()))
            .labels(labels),
    ))
}

fn listed(n: usize, running: bool, with_labels: Kind, salt: usize) -> Obs {
    decoded(&render(n, running, with_labels, salt))
}

/// The instances a snapshot lists, in order, and whether each runs. The
/// second snapshot lists in the first one's order or, `reordered`, in
/// another: the i-th listed is instance `i * 7919 mod len` (7919 is a prime
/// that divides no `len` used here, so that is a permutation).
fn plan(n: usize, second: bool, reordered: bool) -> impl Iterator<Item = (usize, bool)> {
    let len = n + n / 200;
    assert!(!reordered || !len.is_multiple_of(7919), "not a permutation");
    (0..len).filter_map(move |i| {
        let i = if reordered { i * 7919 % len } else { i };
        if !second {
            return (i < n).then_some((i, true));
        }
        if i >= n {
            // 0.5% new
            return Some((i, true));
        }
        match i % 200 {
            // 0.5% gone
            0 => None,
            // 1% flipped
            1 | 2 => Some((i, false)),
            _ => Some((i, true)),
        }
    })
}

/// A snapshot, its items made lazily.
fn snapshot(
    n: usize,
    second: bool,
    with_labels: Kind,
    reordered: bool,
    salt: usize,
) -> impl Iterator<Item = Obs> + Send + Unpin + 'static {
    listing(
        plan(n, second, reordered).map(move |(i, running)| listed(i, running, with_labels, salt)),
    )
}

/// A snapshot of these listed items.
fn listing(
    items: impl Iterator<Item = Obs> + Send + Unpin + 'static,
) -> impl Iterator<Item = Obs> + Send + Unpin + 'static {
    std::iter::once(Ok(Observation::ResyncBegin))
        .chain(items)
        .chain(std::iter::once(Ok(Observation::ResyncDone)))
}

/// The second listing's items made from their renderings (the timed part
/// of making a listing).
fn listing_of(rendered: &[String]) -> Vec<Obs> {
    let mut items = Vec::with_capacity(rendered.len() + 2);
    items.push(Ok(Observation::ResyncBegin));
    items.extend(rendered.iter().map(|r| decoded(r)));
    items.push(Ok(Observation::ResyncDone));
    items
}

struct Synthetic {
    n: usize,
    with_labels: Kind,
    salt: usize,
    reordered: bool,
    dials: usize,
    /// The second snapshot, built before the watch consumes it (timing runs),
    /// or `None` to generate it lazily too (memory runs).
    second: Option<Vec<Obs>>,
}

impl Dial for Synthetic {
    type Cursor = u64;
    fn dial(&mut self, _resume: Option<&u64>) -> DialFuture<u64> {
        self.dials += 1;
        let (n, with_labels, reordered, salt) =
            (self.n, self.with_labels, self.reordered, self.salt);
        let first = self.dials == 1;
        let second = self.second.take();
        Box::pin(async move {
            if !first {
                std::future::pending::<()>().await;
            }
            let first = snapshot(n, false, with_labels, false, salt);
            let session: lookout_core::Session<u64> = match second {
                Some(v) => Box::pin(Ready(first.chain(v)).chain(tokio_stream::pending())),
                None => Box::pin(
                    Ready(first.chain(snapshot(n, true, with_labels, reordered, salt)))
                        .chain(tokio_stream::pending()),
                ),
            };
            Ok(session)
        })
    }
}

struct Run {
    bytes_per_instance: f64,
    /// Making the second listing's items (ids, uids, labels) from their
    /// renderings beforehand, and again once the watch knows them: on CPU.
    build: Duration,
    build_warm: Duration,
    diff: Duration,
    /// The thread's on-CPU time during `diff`.
    diff_cpu: Duration,
    transitions: usize,
}

/// The calling thread's on-CPU time so far (`/proc/thread-self/schedstat`;
/// zero where that is missing). The kernel brings that figure up to date
/// only when the thread is scheduled, so yield first: without it the figure
/// lags by up to a timer tick (4 ms here).
fn thread_cpu() -> Duration {
    std::thread::yield_now();
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .map_or(Duration::ZERO, Duration::from_nanos)
}

/// With `memory`, the heap is measured (dhat running) and the second snapshot
/// generated lazily; without, the second snapshot is built beforehand and only
/// its consumption is timed.
async fn run(n: usize, with_labels: Kind, reordered: bool, memory: bool) -> Run {
    // Building the second listing (its labels made as a decoder makes
    // them) is timed apart from the diff.
    // A salt of its own: no set or string of another run is reused.
    static SALT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let salt = SALT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let rendered = || -> Vec<String> {
        plan(n, true, reordered)
            .map(|(i, running)| render(i, running, with_labels, salt))
            .collect()
    };
    let input = if memory { Vec::new() } else { rendered() };
    let making = thread_cpu();
    let second = (!memory).then(|| listing_of(&input));
    let build = thread_cpu().saturating_sub(making);
    drop(input);
    let heap = || {
        if memory {
            dhat::HeapStats::get().curr_bytes
        } else {
            0
        }
    };
    let before = heap();
    let mut watch = Watch::new(
        Synthetic {
            n,
            with_labels,
            salt,
            reordered,
            dials: 0,
            second,
        },
        WatchConfig::default(),
    );
    // The baseline.
    while !matches!(
        watch.next().await,
        Some(Item::Status(Status::Connected { .. }))
    ) {}
    let held = heap().saturating_sub(before);
    let (start, start_cpu) = (Instant::now(), thread_cpu());
    let mut transitions = 0;
    loop {
        match watch.next().await {
            Some(Item::Event(e)) => {
                std::hint::black_box(&e);
                transitions += 1;
            }
            Some(Item::Status(Status::Connected { instances })) => {
                assert_eq!(instances, n, "as many instances after the resync");
                break;
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    let (diff, diff_cpu) = (start.elapsed(), thread_cpu().saturating_sub(start_cpu));
    // The listing made again while the watch holds what it knows: as a
    // decoder makes it at a resync (the sets exist already).
    let input = rendered();
    let making = thread_cpu();
    let again = listing_of(&input);
    let build_warm = thread_cpu().saturating_sub(making);
    drop((again, watch));
    Run {
        bytes_per_instance: held as f64 / n as f64,
        build,
        build_warm,
        diff,
        diff_cpu,
        transitions,
    }
}

/// The 1/5/15-minute load averages: the figures are wall-clock, on a shared machine.
fn load() -> String {
    std::fs::read_to_string("/proc/loadavg").map_or_else(
        |_| "unknown".to_owned(),
        |s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "),
    )
}

fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let sizes: &[usize] = if full { &[10_000, 100_000] } else { &[2_000] };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime");
    println!("resync at scale: second snapshot with 1% flipped, 0.5% gone, 0.5% new");
    println!("load before (1/5/15 min): {}", load());
    println!(
        "| instances | labels | second listing | diff time | on CPU | transitions | bytes per tracked instance | making the listing (on CPU): first / again |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    // (instances, labels, reordered)
    let mut cases: Vec<(usize, Kind, bool)> = sizes
        .iter()
        .flat_map(|&n| [(n, Kind::None, false), (n, Kind::Two, false)])
        .collect();
    if let Some(&n) = sizes.last() {
        cases.push((n, Kind::Compose, false));
        cases.push((n, Kind::None, true));
    }
    let mut rows = Vec::new();
    // Timing first, with the allocation profiler off.
    for (n, with_labels, reordered) in cases {
        let r = rt.block_on(run(n, with_labels, reordered, false));
        assert_eq!(
            r.transitions,
            n / 100 + n / 200 * 3,
            "each change reported once"
        );
        rows.push((n, with_labels, reordered, r));
    }
    let _profiler = dhat::Profiler::builder().testing().build();
    for (n, with_labels, reordered, timed) in rows {
        let r = rt.block_on(run(n, with_labels, reordered, true));
        println!(
            "| {n} | {} | {} | {:.1} ms | {:.1} ms | {} | {:.0} | {:.1} / {:.1} ms |",
            with_labels.name(),
            if reordered {
                "other order"
            } else {
                "same order"
            },
            timed.diff.as_secs_f64() * 1e3,
            timed.diff_cpu.as_secs_f64() * 1e3,
            timed.transitions,
            r.bytes_per_instance,
            timed.build.as_secs_f64() * 1e3,
            timed.build_warm.as_secs_f64() * 1e3
        );
    }
    println!(
        "peak RSS of the whole bench process: {} KiB",
        peak_rss_kib()
    );
    println!("load after: {}", load());
}
