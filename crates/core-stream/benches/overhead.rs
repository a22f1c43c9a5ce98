#![allow(clippy::cast_precision_loss, clippy::cast_possible_truncation)]
//! Core overhead: `Watch` against the same items through a bare stream.
//!
//! A synthetic dial yields a snapshot of 10k instances, then 1M live changes
//! (each a real transition, so each passes the dedupe and becomes an event).
//! The baseline consumes the same pre-built items through a bare always-ready
//! stream (what `futures::stream::iter` is).
//! Both run in this one process, on the same runtime, in alternating rounds;
//! the ratio of their medians is what we report.
//!
//! `cargo bench -p lookout-core --bench overhead` for the full run; without
//! `--bench` (as `cargo test --benches` runs it) a smoke run of 20k changes.

use std::time::{Duration, Instant};

use lookout_core::{Item, Watch, WatchConfig};
use tokio_stream::StreamExt;

mod support;
use support::{Obs, Ready, Synthetic, items};

#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

/// Returns (elapsed, allocations) for consuming `changes` events through `Watch`.
async fn run_watch(snapshot: Vec<Obs>, live: Vec<Obs>) -> (Duration, u64, usize) {
    let changes = live.len();
    let mut all = snapshot;
    all.extend(live);
    let mut watch = Watch::new(Synthetic(Some(all)), WatchConfig::default());
    // Connect and take the baseline outside the measurement.
    loop {
        if let Some(Item::Status(_)) = watch.next().await {
            break;
        }
    }
    let before = dhat::HeapStats::get().total_blocks;
    let start = Instant::now();
    let mut events = 0;
    while events < changes {
        if let Some(Item::Event(e)) = watch.next().await {
            std::hint::black_box(&e);
            events += 1;
        }
    }
    let elapsed = start.elapsed();
    (
        elapsed,
        dhat::HeapStats::get().total_blocks - before,
        events,
    )
}

async fn run_raw(live: Vec<Obs>) -> (Duration, u64, usize) {
    let mut stream = Ready(live.into_iter());
    let before = dhat::HeapStats::get().total_blocks;
    let start = Instant::now();
    let mut n = 0;
    while let Some(item) = stream.next().await {
        std::hint::black_box(&item);
        n += 1;
    }
    let elapsed = start.elapsed();
    (elapsed, dhat::HeapStats::get().total_blocks - before, n)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let (instances, changes, rounds) = if full {
        (10_000, 1_000_000, 5)
    } else {
        (1_000, 20_000, 1)
    };
    let _profiler = dhat::Profiler::builder().testing().build();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime");
    let (mut raw_ns, mut watch_ns, mut watch_allocs, mut raw_allocs) =
        (Vec::new(), Vec::new(), 0u64, 0u64);
    for _ in 0..rounds {
        let (_, live) = items(instances, changes);
        let (t, a, n) = rt.block_on(run_raw(live));
        assert_eq!(n, changes);
        raw_ns.push(t.as_nanos() as f64 / changes as f64);
        raw_allocs = a;
        let (snapshot, live) = items(instances, changes);
        let (t, a, n) = rt.block_on(run_watch(snapshot, live));
        assert_eq!(n, changes, "every change is a transition and must pass");
        watch_ns.push(t.as_nanos() as f64 / changes as f64);
        watch_allocs = a;
    }
    let (raw, watch) = (median(raw_ns), median(watch_ns));
    let per_event = watch_allocs as f64 / changes as f64;
    println!(
        "core overhead: {changes} live changes over {instances} instances, median of {rounds} round(s)"
    );
    println!("| consumer | ns/event | allocations/event |");
    println!("|---|---|---|");
    println!(
        "| bare always-ready stream | {raw:.1} | {:.3} |",
        raw_allocs as f64 / changes as f64
    );
    println!("| lookout_core::Watch | {watch:.1} | {per_event:.3} |");
    println!("| overhead (Watch − bare) | {:.1} | |", watch - raw);
    // The smoke run proves the bench works; the targets are judged on full runs.
    assert!(
        per_event <= 1.0,
        "target: at most 1 allocation per event, measured {per_event:.3}"
    );
}
