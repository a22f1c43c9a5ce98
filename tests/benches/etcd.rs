#![allow(
    clippy::cast_precision_loss,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    clippy::print_stdout,
    clippy::print_stderr,
    clippy::too_many_lines,
    // A bench harness: the processes' pipes are read on threads of its own.
    clippy::disallowed_methods
)]
//! Through etcd (issue #24): dockerd → `lookout docker --publish
//! etcd://…/PREFIX` → the engines' 3-member etcd cluster → `lookout etcd
//! --prefix PREFIX --json`, the built `lookout` binary both times
//! (`target/<profile>/lookout`, or `LOOKOUT_BIN`, as the `serve` bench).
//!
//! The consumer starts first (an empty prefix of this run's own), then the
//! publisher (`--label lookout.bench=TAG --source bench`); both say
//! `connected` before the drive. The driver (bollard) runs L container
//! lifecycles (create, start, stop `t=0`, remove), one after the other;
//! the consumer must print all 4·L transitions, live, in order per
//! instance. Reported:
//! - latency = the consumer's read time of a line − its `at` (the
//!   publisher's record keeps dockerd's `timeNano`), both this machine's
//!   realtime clock: engine → publisher → etcd (a txn, raft across three
//!   members) → the consumer's watch → its stdout; beside it `lookout
//!   docker --json` alone (same label, started with the others) on the same
//!   events, and per event what the etcd path adds (the consumer's read
//!   time − the direct one's);
//! - writes per transition: the puts on the instances' keys (the sum of
//!   their `version`s: etcd counts each key's writes since its creation) per
//!   transition told (target 1: one txn each); beside it the store's
//!   revision delta over the run per transition (every write to the cluster
//!   moves it: the publisher's status key, and any other test's writes);
//! - bytes per instance: each instance's key and value as stored (the
//!   record, here a tombstone: the same fields as a live one), and the
//!   leader's `db_size_in_use` delta per transition (etcd keeps every
//!   revision until a compaction: what the history costs).
//!
//! `cargo bench -p lookout-e2e --bench etcd`: L = 200. Without `--bench` (as
//! `cargo test --benches` runs it): L = 5. Without `LOOKOUT_ENGINES=1`:
//! prints "skipped: engines not configured".

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use bollard::Docker;
use lookout_e2e::bench_docker::{
    CALL, Cleanup, LABEL, LookoutProcess, engines_configured, lifecycle, lookout_binary, pct,
    rfc3339_ns,
};
use lookout_e2e::bench_etcd::{Stored, cluster, load_average, stored};
use lookout_e2e::engines;
use serde_json::Value;

/// One printed transition: (instance, kind), its `at` and the read time
/// of its line (ns).
type Line = ((String, String), i128, i128);

/// `n` lines of `process`'s stdout, each live (and of `host`, when given).
fn lines(process: &LookoutProcess, n: usize, host: Option<&str>) -> Vec<Line> {
    (0..n)
        .map(|i| {
            let (read_at, line) = process
                .out
                .recv_timeout(CALL)
                .unwrap_or_else(|_| panic!("line {i} of {n} not within {CALL:?}"));
            let v: Value =
                serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
            assert_eq!(v["origin"], "live", "{line}");
            if let Some(h) = host {
                assert_eq!(v["host"], h, "{line}");
            }
            let at = v["at"]
                .as_str()
                .and_then(rfc3339_ns)
                .unwrap_or_else(|| panic!("no at: {line}"));
            let s = |k: &str| v[k].as_str().unwrap_or_default().to_owned();
            ((s("instance"), s("kind")), at, read_at)
        })
        .collect()
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    if !engines_configured() {
        return;
    }
    let bin = lookout_binary();
    let wall = Instant::now();
    let _docker_lock = engines::lock_engine("docker", false).expect("the docker engine lock");
    engines::docker_up().unwrap_or_else(|e| panic!("docker: cannot bring the engine up: {e}"));
    let _etcd_lock = engines::lock_engine("etcd", false).expect("the etcd engine lock");
    engines::etcd_up().unwrap_or_else(|e| panic!("etcd: cannot bring the cluster up: {e}"));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let lifecycles = if full { 200 } else { 5 };
    let tag = format!("etcd-{}", std::process::id());
    let prefix = format!("lookout-bench/{tag}");
    let _containers = Cleanup(tag.clone());
    let endpoints = engines::etcd_endpoints();
    let (client, _keys, target) = cluster(rt.handle(), &prefix, Duration::from_secs(5));
    let load_before = load_average();

    let args = |a: &[&str]| a.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    let consumer = LookoutProcess::start(
        &bin,
        &args(&[
            "etcd",
            "--endpoints",
            &endpoints,
            "--prefix",
            &prefix,
            "--json",
        ]),
        true,
    );
    consumer.status("connected");
    let host = engines::docker_host();
    let label = format!("{LABEL}={tag}");
    let docker_args = args(&["docker", "--json", "--host", &host, "--label", &label]);
    let publisher = LookoutProcess::start(
        &bin,
        &[
            docker_args.clone(),
            args(&["--publish", &target, "--source", "bench"]),
        ]
        .concat(),
        false,
    );
    publisher.status("connected");
    // The same events printed by `lookout docker` alone: the baseline.
    let direct = LookoutProcess::start(&bin, &docker_args, true);
    direct.status("connected");

    let revision0 = engines::etcd_revision().expect("the store's revision");
    let (_, in_use0) = engines::etcd_db_size().expect("the leader's db size");
    let docker = Docker::connect_with_unix(
        host.strip_prefix("unix://").expect("a unix:// docker host"),
        120,
        bollard::API_DEFAULT_VERSION,
    )
    .expect("a bollard client");
    let image = engines::test_image();
    let t0 = Instant::now();
    rt.block_on(async {
        for i in 0..lifecycles {
            lifecycle(&docker, &image, &tag, &format!("{tag}-{i}")).await;
        }
    });
    let drive = t0.elapsed();

    // created, started, stopping (`docker stop`'s request), stopped, removed.
    let expected = 5 * lifecycles;
    let through = lines(&consumer, expected, Some("bench"));
    let mut latencies: Vec<f64> = through
        .iter()
        .map(|(_, at, read)| (read - at) as f64)
        .collect();
    let mut per_instance: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for ((instance, kind), _, _) in &through {
        per_instance
            .entry(instance.clone())
            .or_default()
            .push(kind.clone());
    }
    let told = t0.elapsed();
    assert_eq!(per_instance.len(), lifecycles, "an instance per lifecycle");
    for (instance, kinds) in &per_instance {
        assert_eq!(
            kinds,
            &["created", "started", "stopping", "stopped", "removed"],
            "{instance}: every transition once, in order"
        );
    }
    // Nothing more comes (a duplicate would).
    let extra = consumer.out.recv_timeout(Duration::from_secs(1));
    assert!(extra.is_err(), "a line more: {extra:?}");
    let alone = lines(&direct, expected, None);
    let mut direct_latencies: Vec<f64> = alone
        .iter()
        .map(|(_, at, read)| (read - at) as f64)
        .collect();
    let read_alone: BTreeMap<&(String, String), i128> = alone
        .iter()
        .map(|(event, _, read)| (event, *read))
        .collect();
    let mut added: Vec<f64> = through
        .iter()
        .map(|(event, _, read)| {
            let direct = read_alone
                .get(event)
                .unwrap_or_else(|| panic!("{event:?} not printed by `lookout docker`"));
            (read - direct) as f64
        })
        .collect();

    let revision1 = engines::etcd_revision().expect("the store's revision");
    let (_, in_use1) = engines::etcd_db_size().expect("the leader's db size");
    let Stored {
        keys,
        versions: puts,
        key_bytes,
        value_bytes,
    } = rt.block_on(stored(&client, &format!("{prefix}/i/")));
    let status_puts = rt
        .block_on(stored(&client, &format!("{prefix}/s/")))
        .versions;
    assert_eq!(keys, lifecycles, "a key per instance");
    drop(publisher);
    drop(consumer);
    drop(direct);
    for v in [&mut latencies, &mut direct_latencies, &mut added] {
        v.sort_by(f64::total_cmp);
    }
    let transitions = expected as f64;
    println!(
        "etcd: dockerd → `lookout docker --publish etcd://…` ({}) → 3-member etcd → \
         `lookout etcd --json`; L container lifecycles (create, start, stop -t 0, rm; one at \
         a time); latency = the consumer's read time of a line − its `at` (dockerd's \
         timeNano), ms; beside it `lookout docker --json` alone on the same events, and per \
         event what the etcd path adds (its read time − the direct one's); writes = the instance keys' puts (Σ version) and the store's revision \
         delta, per transition; bytes as stored per instance; db = the leader's \
         db_size_in_use delta per transition (history until compaction)",
        bin.display()
    );
    println!(
        "| lifecycles | transitions | p50 ms | p99 ms | max ms | `lookout docker` alone p50 / p99 ms | added by etcd p50 / p99 ms | puts/transition | revisions/transition | status puts | key B | value B | db in-use Δ B/transition | drive s (all told s) | load avg before → after |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    println!(
        "| {lifecycles} | {expected} | {:.2} | {:.2} | {:.2} | {:.2} / {:.2} | {:.2} / {:.2} | {:.3} | {:.3} | {status_puts} | {:.0} | {:.0} | {:.0} | {:.1} ({:.1}) | {load_before} → {} |",
        pct(&latencies, 50.0) / 1e6,
        pct(&latencies, 99.0) / 1e6,
        latencies[latencies.len() - 1] / 1e6,
        pct(&direct_latencies, 50.0) / 1e6,
        pct(&direct_latencies, 99.0) / 1e6,
        pct(&added, 50.0) / 1e6,
        pct(&added, 99.0) / 1e6,
        puts as f64 / transitions,
        (revision1 - revision0) as f64 / transitions,
        key_bytes as f64 / keys as f64,
        value_bytes as f64 / keys as f64,
        (in_use1 - in_use0) as f64 / transitions,
        drive.as_secs_f64(),
        told.as_secs_f64(),
        load_average(),
    );
    println!("(wall {:.1?})", wall.elapsed());
}
