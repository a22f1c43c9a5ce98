#![allow(clippy::cast_precision_loss)]
//! The merge (`Merge`): what one more layer costs per event, and how long a
//! quiet source waits behind a firehose.
//!
//! 1. Cost per event: the `overhead` bench's workload (a snapshot of 10k
//!    instances, then live changes that are each a transition) through one
//!    `Watch`, and through a `Merge` of that watch and 99 quiet ones (each
//!    synced, with an empty engine and a silent feed), side by side in
//!    alternating rounds of this one process: the difference of the medians,
//!    in ns per event.
//! 2. The wait: the firehose has 100k changes ready and a quiet source one;
//!    how many items the merge yields before the quiet one's (target: at
//!    most one turn, one item of each other ready source).
//!
//! `cargo bench -p lookout-core --bench merge` for the full run; without
//! `--bench` (as `cargo test --benches` runs it) a smoke run.

use std::time::{Duration, Instant};

use lookout_core::{Item, Merge, Watch, WatchConfig};
use tokio_stream::StreamExt;

mod support;
use support::{Obs, Synthetic, items, quiet};

async fn run_watch(all: Vec<Obs>, changes: usize) -> Duration {
    let mut watch = Watch::new(Synthetic(Some(all)), WatchConfig::default());
    while !matches!(watch.next().await, Some(Item::Status(_))) {}
    let start = Instant::now();
    let mut events = 0;
    while events < changes {
        if let Some(Item::Event(e)) = watch.next().await {
            std::hint::black_box(&e);
            events += 1;
        }
    }
    start.elapsed()
}

async fn run_merge(all: Vec<Obs>, changes: usize, sources: usize) -> Duration {
    let mut merge = Merge::new()
        .source(
            "busy",
            Watch::new(Synthetic(Some(all)), WatchConfig::default()),
        )
        .expect("a name");
    for i in 1..sources {
        merge = merge.source(format!("quiet-{i}"), quiet()).expect("a name");
    }
    // Every source connected, outside the measurement.
    let mut connected = 0;
    while connected < sources {
        if let Some(s) = merge.next().await
            && matches!(s.item, Item::Status(_))
        {
            connected += 1;
        }
    }
    let start = Instant::now();
    let mut events = 0;
    while events < changes {
        if let Some(s) = merge.next().await
            && let Item::Event(e) = &s.item
        {
            std::hint::black_box(e);
            events += 1;
        }
    }
    start.elapsed()
}

/// Items the merge yields before the quiet source's one change, with the
/// firehose's `ready` changes queued first.
async fn wait_behind(ready: usize) -> usize {
    let (snapshot, live) = items(1_000, ready);
    let mut fire = snapshot;
    fire.extend(live);
    let (calm_snapshot, calm_live) = items(1, 1);
    let mut calm = calm_snapshot;
    calm.extend(calm_live);
    let mut merge = Merge::new()
        .source(
            "fire",
            Watch::new(Synthetic(Some(fire)), WatchConfig::default()),
        )
        .and_then(|m| {
            m.source(
                "calm",
                Watch::new(Synthetic(Some(calm)), WatchConfig::default()),
            )
        })
        .expect("two names");
    let mut before = 0;
    loop {
        let s = merge.next().await.expect("never ends");
        if merge.name(s.source) == "calm" && matches!(s.item, Item::Event(_)) {
            return before;
        }
        if matches!(s.item, Item::Event(_)) {
            before += 1;
        }
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let (instances, changes, rounds, sources) = if full {
        (10_000, 1_000_000, 7, 100)
    } else {
        (1_000, 20_000, 1, 10)
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime");
    let (mut alone, mut merged) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        let (snapshot, live) = items(instances, changes);
        let mut all = snapshot;
        all.extend(live);
        let t = rt.block_on(run_watch(all, changes));
        alone.push(t.as_nanos() as f64 / changes as f64);
        let (snapshot, live) = items(instances, changes);
        let mut all = snapshot;
        all.extend(live);
        let t = rt.block_on(run_merge(all, changes, sources));
        merged.push(t.as_nanos() as f64 / changes as f64);
    }
    let (a, m) = (median(alone), median(merged));
    let waited = rt.block_on(wait_behind(if full { 100_000 } else { 1_000 }));
    println!(
        "merge ({changes} changes, {instances} instances, median of {rounds} alternating rounds)"
    );
    println!("| consumer | ns/event |");
    println!("|---|---|");
    println!("| one Watch | {a:.1} |");
    println!("| Merge of it and {} quiet watches | {m:.1} |", sources - 1);
    println!("| merge's cost (target ≤ +20 ns) | {:+.1} |", m - a);
    println!(
        "a quiet source's change behind a firehose with {} ready: {waited} items before it \
         (target: one turn, 1)",
        if full { 100_000 } else { 1_000 }
    );
    assert!(waited <= 1, "the quiet source waited {waited} items");
}
