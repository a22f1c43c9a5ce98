#![allow(
    clippy::cast_precision_loss,
    clippy::cast_possible_truncation,
    clippy::cast_possible_wrap,
    clippy::cast_sign_loss,
    clippy::print_stdout,
    clippy::print_stderr,
    clippy::too_many_lines,
    // A bench harness: the processes' pipes are read on threads of its own.
    clippy::disallowed_methods
)]
//! A fleet through etcd (issue #48, target 4): H publishers — each the
//! built `lookout docker --json --publish etcd://…/PREFIX --source host-NN`
//! on a fake engine of its own (`lookout_testkit::fake_engine::Live`, a
//! unix socket served by this process) holding N running containers — then
//! R transitions/s spread over the fleet (round robin over the hosts, each
//! a random step of a random container: create, start, die, destroy) for S
//! seconds, read by one `lookout etcd --json` through a TCP relay in front
//! of member 1 (`lookout_testkit::tcp_relay`).
//!
//! Reported, with the anchor beside each in the same run:
//! - the reader's cold start over the H·N keys: spawn → its `connected`
//!   (every instance printed before it), its peak RSS; anchor: this
//!   process listing the same keys raw (pages of 1000 at one revision, and
//!   of 10 000, the reader's pages);
//! - latency: the reader's read time of a line − its `at` (the fake
//!   engine's `timeNano`, kept by the record), p50/p99; anchor: the same
//!   transition printed by its publisher (`--json`), and what the etcd path
//!   adds per transition;
//! - writes and bytes per transition: puts (the instance keys' Σ `version`
//!   delta, and `etcd_mvcc_put_total` of member 1: every member applies
//!   every write; target 1), the store's revision delta and the txn calls
//!   the members answered (`grpc_server_handled_total{grpc_method="Txn"}`;
//!   both below 1 where a publisher wrote what queued up several instances
//!   a txn), and
//!   `etcd_network_client_grpc_received_bytes_total` (all members: the
//!   publishers talk to any) over the drive, per transition;
//! - one compaction at S/3: the relay cuts the reader and refuses it for
//!   2 s, the cluster is compacted, the reader comes back (a
//!   `disconnected` per refused attempt, one relist: `resync` lines, then
//!   one `connected`); every
//!   transition must be read exactly once `live`, but those made while the
//!   reader was away, which the relist may fold into their instance's
//!   `resync` (counted); nothing read twice, nothing invented, and the
//!   reader's final state of every instance is the fake engines' truth;
//! - one publisher killed (SIGKILL, by pid) at S/2, not driven for 1 s
//!   before: its source `disconnected` within its 10 s lease + 1 s, no
//!   other source's status changing during the run.
//!
//! `cargo bench -p lookout-e2e --bench etcd_fleet`: H = 100, N = 1000,
//! R = 1000, S = 60 (knobs: `LOOKOUT_FLEET_HOSTS`, `…_INSTANCES`, `…_RATE`,
//! `…_SECS`). Without `--bench` (as `cargo test --benches` runs it): 3 × 20,
//! 30/s, 10 s, correctness only. Without `LOOKOUT_ENGINES=1`: prints
//! "skipped: engines not configured". Holds the etcd engine's lock
//! exclusive (a compaction is of the whole cluster); deletes its prefix at
//! the end, and on failure.

use std::collections::{BTreeMap, HashMap};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use lookout_e2e::bench_docker::{
    LookoutProcess, engines_configured, lookout_binary, now_ns, pct, rfc3339_ns,
};
use lookout_e2e::bench_etcd::{
    cluster, load_average, member_metric, member_metric_where, stored, stored_paged,
};
use lookout_e2e::engines;
use lookout_testkit::fake_engine::{self, Live, SlowReader, Step};
use lookout_testkit::tcp_relay::Relay;
use serde_json::Value;

/// The lease of a publisher's status key (`PREFIX/s/SOURCE`), s.
const STATUS_LEASE: Duration = Duration::from_secs(10);
/// How long the relay keeps the reader away at the compaction.
const AWAY: Duration = Duration::from_secs(2);
/// The drive's tick.
const TICK: Duration = Duration::from_millis(10);

/// A transition: (source, instance, kind, at ns).
type Key = (String, String, String, i128);

/// One line of a process, parsed, with its read time (ns).
#[derive(Debug, Clone)]
struct Line {
    read: i128,
    v: Value,
}

/// Every line a channel carries, parsed, gathered on a thread of its own.
fn gather(rx: Receiver<(i128, String)>) -> Arc<Mutex<Vec<Line>>> {
    let lines = Arc::new(Mutex::new(Vec::new()));
    let into = Arc::clone(&lines);
    thread::spawn(move || {
        for (read, line) in rx {
            let v = serde_json::from_str(&line).unwrap_or(Value::String(line));
            into.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(Line { read, v });
        }
    });
    lines
}

/// A process's stderr, stamped at its read: what [`gather`] takes.
fn stamped(rx: Receiver<String>) -> Receiver<(i128, String)> {
    let (tx, out) = mpsc::channel();
    thread::spawn(move || {
        for line in rx {
            if tx.send((now_ns(), line)).is_err() {
                return;
            }
        }
    });
    out
}

fn lock(lines: &Mutex<Vec<Line>>) -> std::sync::MutexGuard<'_, Vec<Line>> {
    lines.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Polls `done` every 50 ms until it holds or `within` passed; whether it held.
fn wait_for(within: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if done() {
            return true;
        }
        thread::sleep(Duration::from_millis(50));
    }
    done()
}

/// A transition line's key (`live` or `resync`; of source `host`, else of
/// the one it names), or `None` for another line.
fn key_of(v: &Value, host: Option<&str>) -> Option<Key> {
    let s = |k: &str| v[k].as_str().map(str::to_owned);
    let host = match host {
        Some(h) => h.to_owned(),
        None => s("host")?,
    };
    Some((
        host,
        s("instance")?,
        s("kind")?,
        rfc3339_ns(v["at"].as_str()?)?,
    ))
}

/// The kind a fake engine's action is told as.
fn kind_of(action: &str) -> &'static str {
    match action {
        "create" => "created",
        "start" => "started",
        "die" => "stopped",
        _ => "removed",
    }
}

/// A process's memory (kB): (`VmRSS`, `VmHWM`).
fn rss_kb(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|l| l.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

fn knob(name: &str, full: usize, smoke: usize, is_full: bool) -> usize {
    std::env::var(format!("LOOKOUT_FLEET_{name}"))
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if is_full { full } else { smoke })
}

/// The txn calls the 3 members answered (`grpc_server_handled_total` of
/// `Txn`: each call is handled by the member it was sent to; the gateway
/// calls its member's gRPC). Not `etcd_mvcc_txn_total`: etcd counts there
/// only the txns of more than one operation, not a txn of one put.
fn txn_calls() -> f64 {
    (1..=3)
        .map(|m| member_metric_where(m, "grpc_server_handled_total", "grpc_method=\"Txn\""))
        .sum()
}

fn ms(ns: f64) -> f64 {
    ns / 1e6
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    if !engines_configured() {
        return;
    }
    let hosts = knob("HOSTS", 100, 3, full).max(2);
    let instances = knob("INSTANCES", 1000, 20, full).max(1);
    let rate = knob("RATE", 1000, 30, full).max(1);
    let secs = knob("SECS", 60, 10, full).max(6);
    let bin = lookout_binary();
    let wall = Instant::now();
    let _etcd_lock = engines::lock_engine("etcd", true).expect("the etcd engine lock");
    engines::etcd_up().unwrap_or_else(|e| panic!("etcd: cannot bring the cluster up: {e}"));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let _enter = rt.enter();
    let tag = format!("fleet-{}", std::process::id());
    let prefix = format!("lookout-bench/{tag}");
    // The prefix is deleted last (`_keys` declared first): the publishers
    // are gone by then.
    let (client, _keys, target) = cluster(rt.handle(), &prefix, Duration::from_secs(10));
    let load_start = load_average();

    // The fleet: a fake engine per host, each with N running containers.
    let fleet: Vec<(Arc<Live>, fake_engine::FakeEngine)> = (0..hosts)
        .map(|h| {
            let live = Live::new("c", instances, SlowReader::Drop, 1 << 16, h as u64 + 1);
            live.fill();
            let engine = fake_engine::start_live(Arc::clone(&live));
            (live, engine)
        })
        .collect();
    let source = |h: usize| format!("host-{h:02}");
    let t_publish = Instant::now();
    let args = |a: &[&str]| a.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    let mut publishers: Vec<LookoutProcess> = fleet
        .iter()
        .enumerate()
        .map(|(h, (_, engine))| {
            LookoutProcess::start(
                &bin,
                &args(&[
                    "docker",
                    "--json",
                    "--host",
                    &engine.host,
                    "--publish",
                    &target,
                    "--source",
                    &source(h),
                ]),
                true,
            )
        })
        .collect();
    for p in &publishers {
        p.status("connected");
    }
    let published: Vec<_> = publishers
        .iter_mut()
        .map(|p| gather(std::mem::replace(&mut p.out, mpsc::channel().1)))
        .collect();
    let all_keys = hosts * instances;
    let written = wait_for(Duration::from_secs(600), || {
        let s = rt.block_on(stored(&client, &format!("{prefix}/")));
        s.keys == all_keys + hosts
    });
    assert!(
        written,
        "the publishers did not write {all_keys} keys and {hosts} statuses"
    );
    let fleet_up = t_publish.elapsed();
    let publisher_rss: Vec<u64> = publishers.iter().map(|p| rss_kb(p.child.id()).0).collect();

    // The anchor of the cold start: the same keys listed raw, here.
    let t_raw = Instant::now();
    let raw = rt.block_on(stored(&client, &format!("{prefix}/")));
    let raw_list = t_raw.elapsed();
    // And in the reader's pages (10 000 keys).
    let t_raw = Instant::now();
    let raw_big = rt.block_on(stored_paged(&client, &format!("{prefix}/"), 10_000));
    let raw_list_big = t_raw.elapsed();
    assert_eq!(raw_big, raw, "the same keys, whatever the page");

    // The reader's cold start, through the relay.
    let first_member: std::net::SocketAddr = engines::etcd_member_url(1)
        .trim_start_matches("http://")
        .parse()
        .expect("member 1's address");
    let relay = Relay::start(first_member);
    let load_cold = load_average();
    let spawned_ns = now_ns();
    let mut reader = LookoutProcess::start(
        &bin,
        &args(&[
            "etcd",
            "--endpoints",
            &relay.url(),
            "--prefix",
            &prefix,
            "--json",
            "--initial",
        ]),
        true,
    );
    let status = gather(stamped(std::mem::replace(
        &mut reader.err,
        mpsc::channel().1,
    )));
    let told = gather(std::mem::replace(&mut reader.out, mpsc::channel().1));
    let watch_status = |s: &str| {
        lock(&status)
            .iter()
            .filter(|l| l.v["status"] == s && l.v.get("host").is_none())
            .count()
    };
    assert!(
        wait_for(Duration::from_secs(120), || watch_status("connected") == 1),
        "the reader did not connect: {:?}",
        lock(&status)
    );
    // Each running instance is told `created`, then `started`.
    assert!(
        wait_for(Duration::from_secs(60), || lock(&told).len()
            >= 2 * all_keys),
        "the reader told every instance (`--initial`)"
    );
    // Connected, and every instance printed.
    let cold_ns = lock(&status)
        .iter()
        .chain(lock(&told).iter())
        .map(|l| l.read)
        .max()
        .unwrap_or(0);
    let cold = Duration::from_nanos(u64::try_from(cold_ns - spawned_ns).unwrap_or(0));
    let (_, cold_hwm) = rss_kb(reader.child.id());
    let at_connect = lock(&told).len();
    assert_eq!(
        at_connect,
        2 * all_keys,
        "the reader told every instance once"
    );
    assert!(
        wait_for(Duration::from_secs(10), || lock(&status)
            .iter()
            .filter(|l| l.v["status"] == "connected" && l.v.get("host").is_some())
            .count()
            == hosts),
        "every source connected: {:?}",
        lock(&status)
    );
    let statuses_before = lock(&status).len();

    // The drive.
    let before = rt.block_on(stored(&client, &format!("{prefix}/i/")));
    let revision0 = engines::etcd_revision().expect("the store's revision");
    let puts0 = member_metric(1, "etcd_mvcc_put_total");
    let txns0 = txn_calls();
    let bytes0: f64 = (1..=3)
        .map(|m| member_metric(m, "etcd_network_client_grpc_received_bytes_total"))
        .sum();
    let load_drive = load_average();
    let total = rate * secs;
    let per_tick = rate as f64 * TICK.as_secs_f64();
    let length = Duration::from_secs(secs as u64);
    let compact_at = Duration::from_secs(secs as u64) / 3;
    let kill_at = Duration::from_secs(secs as u64) / 2;
    let victim = 0;
    let mut steps: Vec<(usize, Step)> = Vec::with_capacity(total);
    let (mut away, mut compacted, mut killed) = (None, None, None);
    let t0 = Instant::now();
    let mut next = 0usize;
    let mut tick = 0u32;
    while steps.len() < total || t0.elapsed() < length {
        let now = t0.elapsed();
        if away.is_none() && now >= compact_at {
            relay.refuse(true);
            relay.cut();
            away = Some((now_ns(), Instant::now()));
        }
        if let Some((_, since)) = away
            && compacted.is_none()
            && since.elapsed() >= AWAY
        {
            // Another run's compaction at a newer revision meanwhile (the
            // cluster is shared) leaves the reader's cursor behind all the same.
            let revision = engines::etcd_revision().expect("the store's revision");
            match rt.block_on(client.compact(revision)) {
                Ok(_) => {}
                Err(e) if e.is_compacted() => {
                    eprintln!("etcd_fleet: compacted past {revision} already (another run's)");
                }
                Err(e) => panic!("compact the cluster at {revision}: {e}"),
            }
            relay.refuse(false);
            compacted = Some((now_ns(), revision));
        }
        if killed.is_none() && now >= kill_at {
            publishers[victim].child.kill().expect("SIGKILL the victim");
            killed = Some((now_ns(), Instant::now()));
        }
        let due = ((f64::from(tick) + 1.0) * per_tick) as usize;
        while steps.len() < due.min(total) {
            let h = next % hosts;
            next += 1;
            // The victim rests from 1 s before its kill on.
            if h == victim && now + Duration::from_secs(1) >= kill_at {
                continue;
            }
            let step = fleet[h].0.steps(1).remove(0);
            steps.push((h, step));
        }
        tick += 1;
        let at = TICK * tick;
        if let Some(rest) = at.checked_sub(t0.elapsed()) {
            thread::sleep(rest);
        }
    }
    let drive = t0.elapsed();
    let (away_ns, _) = away.expect("the relay cut the reader");
    let (compacted_ns, compact_revision) = compacted.expect("a compaction");
    let (killed_ns, killed_at) = killed.expect("the victim killed");

    // Every transition read.
    let expected: BTreeMap<Key, usize> = steps.iter().fold(BTreeMap::new(), |mut m, (h, s)| {
        let key = (
            source(*h),
            s.name.clone(),
            kind_of(s.action).to_owned(),
            i128::from(s.nanos),
        );
        *m.entry(key).or_default() += 1;
        m
    });
    let live_read = || -> HashMap<Key, Vec<i128>> {
        let mut m: HashMap<Key, Vec<i128>> = HashMap::new();
        for l in lock(&told).iter().skip(at_connect) {
            if l.v["origin"] == "live"
                && let Some(k) = key_of(&l.v, None)
            {
                m.entry(k).or_default().push(l.read);
            }
        }
        m
    };
    // Away: from 1 s before the cut (written after it) to the reader's
    // `connected` after its relist.
    let reconnected = || {
        lock(&status).iter().find_map(|l| {
            (l.v.get("host").is_none() && l.v["status"] == "connected" && l.read > away_ns)
                .then_some(l.read)
        })
    };
    let gap = |at: i128| at >= away_ns - 1_000_000_000 && at <= reconnected().unwrap_or(i128::MAX);
    wait_for(Duration::from_secs(60), || {
        let read = live_read();
        expected.keys().all(|k| read.contains_key(k) || gap(k.3))
    });
    // The victim's source said gone, within its lease + 1 s.
    let gone = || {
        lock(&status).iter().find_map(|l| {
            (l.v["host"] == source(victim).as_str() && l.v["status"] == "disconnected")
                .then_some(l.read)
        })
    };
    let lease_left = (STATUS_LEASE + Duration::from_secs(30)).saturating_sub(killed_at.elapsed());
    wait_for(lease_left, || gone().is_some());
    // Nothing more comes (a duplicate would).
    thread::sleep(Duration::from_secs(1));
    let read = live_read();
    let doubled: Vec<_> = read.iter().filter(|(_, r)| r.len() > 1).collect();
    let invented: Vec<_> = read.keys().filter(|k| !expected.contains_key(*k)).collect();
    let missing: Vec<&Key> = expected.keys().filter(|k| !read.contains_key(*k)).collect();
    // A publisher killed loses what it had queued: the victim's unwritten
    // transitions are counted apart.
    let victim_source = source(victim);
    let (unwritten, lost): (Vec<&&Key>, Vec<&&Key>) = missing
        .iter()
        .filter(|k| k.0 == victim_source || !gap(k.3))
        .partition(|k| k.0 == victim_source);
    let resync_after: usize = lock(&told)
        .iter()
        .skip(at_connect)
        .filter(|l| l.v["origin"] == "resync")
        .count();
    // The reader's final state of every instance: the engines' truth.
    let mut state: BTreeMap<(String, String), bool> = BTreeMap::new();
    for l in lock(&told).iter() {
        let Some((host, instance, kind, _)) = key_of(&l.v, None) else {
            continue;
        };
        match kind.as_str() {
            "removed" => {
                state.remove(&(host, instance));
            }
            "started" => {
                state.insert((host, instance), true);
            }
            "created" | "stopped" => {
                state.insert((host, instance), false);
            }
            _ => {}
        }
    }
    let truth: BTreeMap<(String, String), bool> = fleet
        .iter()
        .enumerate()
        .flat_map(|(h, (live, _))| {
            live.snapshot()
                .into_iter()
                .map(move |(name, running)| ((source(h), name), running))
        })
        .collect();
    let wrong: Vec<_> = truth
        .iter()
        .filter(|(k, v)| {
            state.get(*k) != Some(*v) && (k.0 != victim_source || unwritten.is_empty())
        })
        .chain(state.iter().filter(|(k, _)| {
            !truth.contains_key(*k) && (k.0 != victim_source || unwritten.is_empty())
        }))
        .take(5)
        .collect();
    let revision1 = engines::etcd_revision().expect("the store's revision");
    let puts1 = member_metric(1, "etcd_mvcc_put_total");
    let txns1 = txn_calls();
    let bytes1: f64 = (1..=3)
        .map(|m| member_metric(m, "etcd_network_client_grpc_received_bytes_total"))
        .sum();
    let after = rt.block_on(stored(&client, &format!("{prefix}/i/")));
    let gone_after = gone().map(|read| (read - killed_ns) as f64 / 1e9);
    let statuses = lock(&status)[statuses_before..].to_vec();
    let disturbed: Vec<_> = statuses
        .iter()
        .filter(|l| l.v.get("host").is_some() && l.v["host"] != source(victim).as_str())
        .collect();
    let watch_lines: Vec<&str> = statuses
        .iter()
        .filter(|l| l.v.get("host").is_none())
        .filter_map(|l| l.v["status"].as_str())
        .collect();
    let (reader_rss, reader_hwm) = rss_kb(reader.child.id());
    let load_end = load_average();

    // Latency: the reader's read − `at`; beside it the publisher's own print.
    let mut printed: HashMap<Key, i128> = HashMap::new();
    for (h, lines) in published.iter().enumerate() {
        for l in lock(lines).iter() {
            if let Some(k) = key_of(&l.v, Some(&source(h))) {
                printed.entry(k).or_insert(l.read);
            }
        }
    }
    // The outage: from the relay's cut to the reader's `connected` after
    // its relist (what was made then is read once the relist is done).
    let back_ns = statuses
        .iter()
        .filter(|l| l.v.get("host").is_none() && l.v["status"] == "connected")
        .map(|l| l.read)
        .next_back()
        .unwrap_or(i128::MAX);
    let mut latency = Vec::new();
    let mut steady = Vec::new();
    let mut direct = Vec::new();
    let mut added = Vec::new();
    for (k, reads) in &read {
        if !expected.contains_key(k) {
            continue;
        }
        latency.push((reads[0] - k.3) as f64);
        if k.3 < away_ns || k.3 > back_ns {
            steady.push((reads[0] - k.3) as f64);
        }
        if let Some(p) = printed.get(k) {
            direct.push((p - k.3) as f64);
            added.push((reads[0] - p) as f64);
        }
    }
    for v in [&mut latency, &mut steady, &mut direct, &mut added] {
        v.sort_by(f64::total_cmp);
    }
    let delivered = steps.len() as f64;
    drop(reader);
    drop(publishers);
    drop(relay);

    println!(
        "etcd_fleet: H fake engines (testkit `Live`, N running containers each) → H × `lookout \
         docker --json --publish etcd://…` ({}) → the 3-member etcd → one `lookout etcd --json` \
         through a TCP relay; then R transitions/s round robin over the hosts for S s; cold \
         start = spawn → `connected` (all H·N instances told), anchor = this process listing \
         the keys raw (pages of 1000; of 10 000, the reader's); latency = read − `at` (the \
         engine's timeNano), anchor = the publisher's own print; per transition: puts = Σ \
         version delta of the instance keys and etcd_mvcc_put_total (member 1: every member \
         applies every write), revisions = the store's revision delta (a txn of K puts is \
         one), txns = Txn calls answered (grpc_server_handled_total, 3 members; the \
         cluster is shared: others' included); bytes = client gRPC bytes received (3 \
         members) per transition",
        bin.display()
    );
    println!(
        "| H × N | keys listed (raw MiB) | fleet written s | publisher RSS avg / max MiB | cold start s (raw list s, ×; pages of 10 000 s) | reader peak RSS MiB (end) | load cold start |"
    );
    println!("|---|---|---|---|---|---|---|");
    println!(
        "| {hosts} × {instances} | {} ({:.1}) | {:.1} | {:.1} / {:.1} | **{:.2}** ({:.2}, {:.1}×; {:.2}) | **{:.0}** ({:.0}) | {load_cold} |",
        raw.keys,
        (raw.key_bytes + raw.value_bytes) as f64 / f64::from(1 << 20),
        fleet_up.as_secs_f64(),
        publisher_rss.iter().sum::<u64>() as f64 / publisher_rss.len() as f64 / 1024.0,
        *publisher_rss.iter().max().unwrap_or(&0) as f64 / 1024.0,
        cold.as_secs_f64(),
        raw_list.as_secs_f64(),
        cold.as_secs_f64() / raw_list.as_secs_f64(),
        raw_list_big.as_secs_f64(),
        cold_hwm as f64 / 1024.0,
        reader_rss.max(reader_hwm) as f64 / 1024.0,
    );
    println!();
    println!(
        "| transitions (R/s × S s; drive s) | read live | p50 / p99 / max ms | outside the outage (cut → relisted, {:.1} s): n, p50 / p99 ms | publisher prints p50 / p99 ms | added by etcd p50 / p99 ms | puts / tr. (Σversion Δ; put_total) | revisions / tr. | txns / tr. | client bytes / tr. | load start → drive → end |",
        (back_ns - away_ns) as f64 / 1e9
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    println!(
        "| {} ({rate} × {secs}; {:.1}) | {} | **{:.1} / {:.1}** / {:.1} | {}: **{:.1} / {:.1}** | {:.1} / {:.1} | {:.1} / {:.1} | **{:.3}**; {:.3} | {:.3} | {:.3} | {:.0} | {load_start} → {load_drive} → {load_end} |",
        steps.len(),
        drive.as_secs_f64(),
        read.len(),
        ms(pct(&latency, 50.0)),
        ms(pct(&latency, 99.0)),
        ms(latency.last().copied().unwrap_or(0.0)),
        steady.len(),
        ms(pct(&steady, 50.0)),
        ms(pct(&steady, 99.0)),
        ms(pct(&direct, 50.0)),
        ms(pct(&direct, 99.0)),
        ms(pct(&added, 50.0)),
        ms(pct(&added, 99.0)),
        (after.versions - before.versions) as f64 / delivered,
        (puts1 - puts0) / delivered,
        (revision1 - revision0) as f64 / delivered,
        (txns1 - txns0) / delivered,
        (bytes1 - bytes0) / delivered,
    );
    println!();
    println!(
        "| compaction (revision) | reader's watch lines after | folded into the relist (victim's apart) | resync lines | lost | read twice | invented | final state wrong | victim `disconnected` after kill s | victim's unwritten at its kill | other sources' status lines |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    println!(
        "| at {:.1} s ({compact_revision}) | {} | {} | {resync_after} | {} | {} | {} | {} | **{}** | {} | {} |",
        (compacted_ns - away_ns) as f64 / 1e9 + compact_at.as_secs_f64(),
        watch_lines.join(", "),
        missing.len() - lost.len() - unwritten.len(),
        lost.len(),
        doubled.len(),
        invented.len(),
        wrong.len(),
        gone_after.map_or_else(|| "never".to_owned(), |s| format!("{s:.2}")),
        unwritten.len(),
        disturbed.len(),
    );
    for l in disturbed.iter().take(5) {
        println!("other source: {}", l.v);
    }
    println!("(wall {:.1?})", wall.elapsed());
    assert!(
        lost.is_empty(),
        "transitions lost: {:?}",
        &lost[..lost.len().min(5)]
    );
    assert!(
        doubled.is_empty(),
        "read twice: {:?}",
        &doubled[..doubled.len().min(5)]
    );
    assert!(
        invented.is_empty(),
        "invented: {:?}",
        &invented[..invented.len().min(5)]
    );
    assert!(wrong.is_empty(), "final state differs: {wrong:?}");
    // One outage: `disconnected` at each attempt refused, one `connected`.
    assert!(
        watch_lines.last() == Some(&"connected")
            && watch_lines.iter().filter(|s| **s == "connected").count() == 1
            && watch_lines.len() >= 2,
        "the reader lost etcd once (the relay's cut) and came back once: {watch_lines:?}"
    );
    assert!(
        resync_after > 0 || missing.is_empty(),
        "a relist told what the reader missed"
    );
    // Told at all (within lease + 30 s); the time is reported, not asserted
    // (it moves with the machine's load: the reader's lag adds to it).
    assert!(
        gone_after.is_some(),
        "the victim's source never `disconnected`"
    );
    println!(
        "victim `disconnected` within its lease + 1 s ({STATUS_LEASE:?} + 1 s): {}",
        if gone_after.is_some_and(|s| s <= STATUS_LEASE.as_secs_f64() + 1.0) {
            "yes"
        } else {
            "no"
        }
    );
    assert!(
        disturbed.is_empty(),
        "other sources disturbed: {disturbed:?}"
    );
}
