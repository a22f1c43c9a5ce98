//! The etcd provider against whole-member faults on real clusters: all
//! three members of the engines' cluster cold-restarted (SIGTERM, then
//! `kill -9`) under a watch, and a member of a private cluster partitioned
//! through TCP relays its peers know it by. In each, the consumer converges
//! to what was written, every transition told once, in order.

// The consumer and the relays run on tasks and threads of the test's own.
#![allow(clippy::disallowed_methods)]

mod common;

use std::io::{Read as _, Write as _};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use common::{
    Cleanup, Relay, WAIT, briefs, client_of, fast_config, member_addr, require_etcd, told,
    unique_prefix,
};
use lookout_core::{Item, Status};
use lookout_engines as engines;
use lookout_etcd::model::State;
use lookout_etcd::{Client, EtcdConfig};
use tokio::sync::mpsc;

/// A watch read on a task of its own, its items in a channel (so that the
/// watch redials while the test breaks the cluster); dropped: aborted.
struct Consumer {
    items: mpsc::UnboundedReceiver<Item>,
    task: tokio::task::JoinHandle<()>,
    /// Every event so far (`src/INSTANCE kind origin`).
    events: Vec<String>,
    /// Every status so far (`connected N`, `disconnected`).
    statuses: Vec<String>,
}

impl Consumer {
    fn start(config: EtcdConfig) -> Self {
        let mut watch = lookout_etcd::watch(config).expect("config");
        let (tx, items) = mpsc::unbounded_channel();
        let task = tokio::spawn(async move {
            while let Some(item) = tokio_stream::StreamExt::next(&mut watch).await {
                if tx.send(item).is_err() {
                    return;
                }
            }
        });
        Self {
            items,
            task,
            events: Vec::new(),
            statuses: Vec::new(),
        }
    }

    /// Reads until `done` says so of the last item, within `within`; the
    /// items read.
    async fn until(
        &mut self,
        what: &str,
        within: Duration,
        mut done: impl FnMut(&Self, &Item) -> bool,
    ) -> Vec<Item> {
        let deadline = tokio::time::Instant::now() + within;
        let mut read = Vec::new();
        loop {
            let item = tokio::time::timeout_at(deadline, self.items.recv())
                .await
                .unwrap_or_else(|_| {
                    panic!(
                        "{what}: not within {within:?}; read {:?}; events {:?}; statuses {:?}",
                        briefs(&read),
                        self.events,
                        self.statuses
                    )
                })
                .expect("the watch never ends");
            let brief = briefs(std::slice::from_ref(&item)).remove(0);
            match &item {
                Item::Event(_) => self.events.push(brief),
                Item::Status(_) => self.statuses.push(brief),
            }
            let stop = done(self, &item);
            read.push(item);
            if stop {
                return read;
            }
        }
    }

    /// Reads until the events are `expected` (then none more within 1 s).
    async fn converge(&mut self, expected: &[String]) {
        let n = expected.len();
        if self.events.len() < n {
            self.until("converge", 4 * WAIT, |c, _| c.events.len() >= n)
                .await;
        }
        assert_eq!(
            self.events, expected,
            "every transition once, in order (statuses {:?})",
            self.statuses
        );
        let extra = tokio::time::timeout(Duration::from_secs(1), async {
            loop {
                match self.items.recv().await {
                    Some(Item::Event(e)) => return Some(e),
                    Some(Item::Status(s)) => self.statuses.push(format!("{s:?}")),
                    None => return None,
                }
            }
        })
        .await;
        assert!(extra.is_err(), "an event more: {extra:?}");
    }

    /// Reads until a `Disconnected` status, which must come before any
    /// event or `Connected` (`why`: the fault).
    async fn disconnected(&mut self, why: &str) -> String {
        let items = self.until(why, WAIT, |_, _| true).await;
        match items.last() {
            Some(Item::Status(Status::Disconnected { error, .. })) => error.to_string(),
            other => panic!("{why}: disconnected first, got {other:?}"),
        }
    }

    /// Reads until `Connected`.
    async fn connected(&mut self, why: &str) {
        self.until(why, 4 * WAIT, |_, i| {
            matches!(i, Item::Status(Status::Connected { .. }))
        })
        .await;
    }

    /// Reads until `Connected`; the statuses since `from` must be
    /// `disconnected`s, then that one `connected`. How many events came
    /// before it (the replay).
    async fn reconnected(&mut self, why: &str, from: usize) -> usize {
        let events = self.events.len();
        self.connected(why).await;
        let since = &self.statuses[from..];
        assert!(
            since.len() >= 2
                && since[..since.len() - 1].iter().all(|s| s == "disconnected")
                && since[since.len() - 1].starts_with("connected"),
            "{why}: disconnected, then connected: {since:?}"
        );
        self.events.len() - events
    }
}

impl Drop for Consumer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Writes records one after the other, each put retried (the client fails
/// over) until it is acknowledged; what it wrote, in order.
struct Writer {
    client: Client,
    prefix: String,
    written: Vec<(String, State)>,
}

/// How many instances the writes cycle over.
const INSTANCES: usize = 6;

impl Writer {
    /// Write `n`'s instance and state: each instance runs, stops, runs…,
    /// and is removed every fifth round.
    fn intended(n: usize) -> (String, State) {
        let round = n / INSTANCES;
        let state = match round % 5 {
            4 => State::Removed,
            r if r % 2 == 0 => State::Running,
            _ => State::Stopped,
        };
        (format!("i{}", n % INSTANCES), state)
    }

    async fn write(&mut self, count: usize) {
        for _ in 0..count {
            let (instance, state) = Self::intended(self.written.len());
            let key = lookout_etcd::model::instance_key(&self.prefix, "src", &instance);
            let kind = format!("{state:?}").to_lowercase();
            let value = common::record(state, &kind, "live");
            let deadline = Instant::now() + WAIT;
            while let Err(e) = self.client.put(key.as_bytes(), &value, 0).await {
                assert!(Instant::now() < deadline, "put {key}: {e}");
                // A retry's pause, not a synchronisation.
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            self.written.push((instance, state));
        }
    }

    fn expected(&self) -> Vec<String> {
        told(&self.written)
    }
}

/// Runs a blocking engine call off the runtime's threads.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f)
        .await
        .expect("a blocking call")
}

/// Brings every member of the engines' cluster up again when the test
/// ends, whatever happened (bounded: `etcd_up` waits 90 s per member).
struct UpAgain;

impl Drop for UpAgain {
    fn drop(&mut self) {
        if let Err(e) = engines::etcd_up() {
            eprintln!("etcd: could not bring the cluster up again: {e}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_three_members_cold_restarted_lose_and_repeat_nothing() {
    let Some(_lock) = require_etcd(true) else {
        return;
    };
    let prefix = unique_prefix("cold");
    // Dropped after `UpAgain` (declared before it): the keys are deleted
    // from a cluster that is up.
    let _cleanup = Cleanup(prefix.clone());
    let _up_again = UpAgain;
    // The watch reaches each member through a relay, so that it can be kept
    // away from the cluster once it is back until the writes are made.
    let relays: Vec<Relay> = (1..=engines::ETCD_MEMBERS)
        .map(|m| Relay::start(member_addr(m)))
        .collect();
    let through = relays.iter().map(Relay::url).collect::<Vec<_>>().join(",");
    let mut consumer = Consumer::start(fast_config(&through, &prefix, false));
    consumer.connected("first connection").await;
    assert_eq!(consumer.statuses, ["connected 0"]);
    let mut writer = Writer {
        client: client_of(&engines::etcd_endpoints(), Duration::from_secs(2)),
        prefix: prefix.clone(),
        written: Vec::new(),
    };
    writer.write(20).await;
    consumer.converge(&writer.expected()).await;

    for (fault, sig) in [("SIGTERM", "TERM"), ("kill -9", "KILL")] {
        let started = Instant::now();
        let from = consumer.statuses.len();
        // All three at once: the cluster goes, not one member after another.
        blocking(move || engines::etcd_end_all(sig).unwrap_or_else(|e| panic!("{fault}: {e}")))
            .await;
        // Nothing can be written now.
        let probe = format!("{prefix}/down");
        let put = writer.client.put(probe.as_bytes(), b"x", 0).await;
        assert!(
            put.is_err(),
            "{fault}: a put with every member down: {put:?}"
        );
        let error = consumer.disconnected(fault).await;
        // The watch keeps redialing a cluster that is not there.
        let failed = consumer.statuses.len();
        consumer
            .until("a failed redial", WAIT, |c, _| c.statuses.len() > failed)
            .await;
        assert_eq!(
            consumer.statuses.last().map(String::as_str),
            Some("disconnected")
        );
        for r in &relays {
            r.refuse(true);
        }
        blocking(|| engines::etcd_up().expect("every member up again")).await;
        let down = started.elapsed();
        // Writes go on; the watch resumes after them, on the restarted
        // cluster, from the revision it saw before: their transitions are
        // its replay, before `connected`.
        let before = writer.expected().len();
        writer.write(20).await;
        for r in &relays {
            r.refuse(false);
        }
        let replayed = consumer.reconnected(fault, from).await;
        assert_eq!(
            replayed,
            writer.expected().len() - before,
            "{fault}: the writes since the restart, replayed before connected"
        );
        consumer.converge(&writer.expected()).await;
        eprintln!(
            "{fault} of all three: down and up in {down:.1?} ({error}), statuses {:?}, \
             {replayed} events replayed before connected, converged {:.1?} after the fault",
            &consumer.statuses[from..],
            started.elapsed()
        );
    }
    assert!(
        consumer.events.iter().all(|e| e.ends_with(" live")),
        "a resume, never a relist: {:?}",
        consumer.events
    );
}

// ------------------------------------------------------------ the partition

/// The member the peer relays cut off, and its id as its requests name it
/// (`X-Server-From`, hex).
#[derive(Debug, Default)]
struct Partition(Mutex<Option<(usize, String)>>);

impl Partition {
    fn get(&self) -> Option<(usize, String)> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// A TCP relay in front of one member's peer port, the URL its peers know
/// it by. etcd's peer traffic is HTTP, and every rafthttp request (the
/// streams, the pipeline's posts, snapshots) says its sender in
/// `X-Server-From`: while a member is cut off, the relay in front of it
/// refuses every connection, and the others read each connection's first
/// request head and refuse the cut-off member's — and any that names no
/// sender (its `/version` or probing requests: no raft traffic) — so the
/// partition is symmetric. Connections open when it begins are cut.
/// Threads of its own; dropping it stops it.
struct PeerRelay {
    addr: SocketAddr,
    shared: Arc<RelayShared>,
    accept: Option<JoinHandle<()>>,
}

struct RelayShared {
    member: usize,
    target: SocketAddr,
    partition: Arc<Partition>,
    stop: AtomicBool,
    conns: Mutex<Vec<TcpStream>>,
    refused: AtomicUsize,
}

/// Bound of a request head (etcd's are well under 1 KiB).
const HEAD_MAX: usize = 16 * 1024;

impl PeerRelay {
    fn start(member: usize, target: SocketAddr, partition: Arc<Partition>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a peer relay");
        let addr = listener.local_addr().expect("its address");
        let shared = Arc::new(RelayShared {
            member,
            target,
            partition,
            stop: AtomicBool::new(false),
            conns: Mutex::new(Vec::new()),
            refused: AtomicUsize::new(0),
        });
        let s = Arc::clone(&shared);
        let accept = thread::spawn(move || {
            for client in listener.incoming() {
                if s.stop.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(client) = client else { continue };
                let s = Arc::clone(&s);
                thread::spawn(move || s.relay(client));
            }
        });
        Self {
            addr,
            shared,
            accept: Some(accept),
        }
    }

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Closes every relayed connection.
    fn cut(&self) {
        let mut conns = self
            .shared
            .conns
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        for c in conns.drain(..) {
            let _ = c.shutdown(Shutdown::Both);
        }
    }

    fn refused(&self) -> usize {
        self.shared.refused.load(Ordering::SeqCst)
    }
}

impl RelayShared {
    fn refuse(&self, client: &TcpStream) {
        self.refused.fetch_add(1, Ordering::SeqCst);
        let _ = client.shutdown(Shutdown::Both);
    }

    fn relay(&self, mut client: TcpStream) {
        let cut = self.partition.get();
        let mut head = Vec::new();
        if let Some((member, id)) = &cut {
            if *member == self.member {
                return self.refuse(&client);
            }
            head = match read_head(&mut client) {
                Some(h) => h,
                None => return self.refuse(&client),
            };
            if server_from(&head).is_none_or(|from| from.eq_ignore_ascii_case(id)) {
                return self.refuse(&client);
            }
        }
        let Ok(mut server) = TcpStream::connect(self.target) else {
            return self.refuse(&client);
        };
        {
            let mut conns = self.conns.lock().unwrap_or_else(PoisonError::into_inner);
            for sock in [&client, &server] {
                if let Ok(c) = sock.try_clone() {
                    conns.push(c);
                }
            }
        }
        // A partition that began while this one was let through unread.
        if cut.is_none() && self.partition.get().is_some() {
            let _ = server.shutdown(Shutdown::Both);
            return self.refuse(&client);
        }
        if server.write_all(&head).is_err() {
            return;
        }
        let (Ok(from_server), Ok(to_client)) = (server.try_clone(), client.try_clone()) else {
            return;
        };
        thread::spawn(move || pipe(from_server, to_client));
        pipe(client, server);
    }
}

/// The first request head of a connection (through its blank line), within
/// [`HEAD_MAX`] bytes and 5 s.
fn read_head(client: &mut TcpStream) -> Option<Vec<u8>> {
    client.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if head.len() >= HEAD_MAX || client.read(&mut byte).ok()? == 0 {
            return None;
        }
        head.push(byte[0]);
    }
    client.set_read_timeout(None).ok()?;
    Some(head)
}

/// The `X-Server-From` of a request head.
fn server_from(head: &[u8]) -> Option<String> {
    String::from_utf8_lossy(head).lines().find_map(|line| {
        let (name, value) = line.split_once(':')?;
        name.trim()
            .eq_ignore_ascii_case("x-server-from")
            .then(|| value.trim().to_owned())
    })
}

fn pipe(mut from: TcpStream, mut to: TcpStream) {
    let mut buf = [0u8; 16 * 1024];
    loop {
        match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if to.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
        }
    }
    let _ = to.shutdown(Shutdown::Both);
    let _ = from.shutdown(Shutdown::Both);
}

impl Drop for PeerRelay {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop.
        let _ = TcpStream::connect(self.addr);
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
        self.cut();
    }
}

/// The private cluster's client ports (the engines' use 1237N, 1238N).
const CLIENTS: [u16; 3] = [12471, 12472, 12473];
/// The ports its members listen on for peers (behind the relays).
const PEERS: [u16; 3] = [12481, 12482, 12483];

/// Polls `check` (a blocking call) every 200 ms until it is true, within `within`.
async fn wait_for(what: &str, within: Duration, check: impl Fn() -> Result<bool, String>) {
    let deadline = Instant::now() + within;
    let mut last = String::new();
    while Instant::now() < deadline {
        match tokio::task::block_in_place(&check) {
            Ok(true) => return,
            Ok(false) => {}
            Err(e) => last = e,
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("{what}: not within {within:?} (last: {last})");
}

/// The present as a fresh watch lists it: `src/INSTANCE kind initial`.
fn present(written: &[(String, State)]) -> Vec<String> {
    let mut last: std::collections::BTreeMap<&str, State> = std::collections::BTreeMap::new();
    for (instance, state) in written {
        last.insert(instance, *state);
    }
    let mut out = Vec::new();
    for (instance, state) in last {
        match state {
            State::Running => {
                out.extend(["created", "started"].map(|k| format!("src/{instance} {k} initial")));
            }
            State::Stopped => out.push(format!("src/{instance} created initial")),
            State::Removed => {}
        }
    }
    out.sort();
    out
}

/// The private cluster, each member's peers reaching it through a relay
/// of `partition` (dropped after the cluster: its members are ended first).
async fn relayed_cluster(partition: &Arc<Partition>) -> (Vec<PeerRelay>, engines::EtcdCluster) {
    let relays: Vec<PeerRelay> = (0..3)
        .map(|i| {
            PeerRelay::start(
                i + 1,
                SocketAddr::from(([127, 0, 0, 1], PEERS[i])),
                Arc::clone(partition),
            )
        })
        .collect();
    let advertised = [0, 1, 2].map(|i| relays[i].url());
    let cluster = blocking(move || {
        engines::EtcdCluster::start("etcd-partition", CLIENTS, PEERS, advertised)
            .unwrap_or_else(|e| panic!("the private cluster: {e}"))
    })
    .await;
    (relays, cluster)
}

/// How long the partition rounds' watch may be silent before it is probed:
/// above the test clusters' progress-notification interval (2 s).
const PROBE_AFTER: Duration = Duration::from_secs(5);

/// A round: member `cut` partitioned while a watch reads through it first
/// and the majority takes writes, then healed. The writer writes through
/// every member (its client fails over); the watch is new, so it is told
/// what follows the writes before it. What it saw, for the report.
async fn partition_round(
    cluster: &engines::EtcdCluster,
    relays: &[PeerRelay],
    partition: &Partition,
    writer: &mut Writer,
    cut: usize,
) -> String {
    let id = tokio::task::block_in_place(|| cluster.member_id(cut)).expect("its id");
    let majority: Vec<String> = (1..=3)
        .filter(|m| *m != cut)
        .map(|m| cluster.member_url(m))
        .collect();
    writer.client = client_of(&majority.join(","), Duration::from_secs(2));
    let prefix = writer.prefix.clone();
    // The watch reads through the member to be cut off first, probed after
    // PROBE_AFTER of silence: above the members' progress-notification
    // interval (engines' PROGRESS_NOTIFY, 2 s). A member without a leader
    // goes on sending those, at its stale revision: were they taken for
    // signs of life, the watch would stay on the cut-off member, silent,
    // never probed, and this test would fail ("the partition: not within
    // 30s"). A notification that does not move past what the watch told
    // is none, so the probe runs (its /health fails: no leader).
    let endpoints = [cluster.member_url(cut)]
        .into_iter()
        .chain(majority.iter().cloned())
        .collect::<Vec<_>>()
        .join(",");
    let config = fast_config(&endpoints, &prefix, true);
    let watch = config.get_watch_config().clone().probe_after(PROBE_AFTER);
    let config = config.watch_config(watch);
    let mut consumer = Consumer::start(config);
    consumer.connected("first connection").await;
    // `told` is incremental: what a watch that listed the first writes
    // silently is told is the rest of it.
    let before = writer.expected().len();
    writer.write(10).await;
    consumer.converge(&writer.expected()[before..]).await;

    // The partition.
    let started = Instant::now();
    *partition.0.lock().expect("lock") = Some((cut, format!("{id:x}")));
    for r in relays {
        r.cut();
    }
    let refused0: Vec<usize> = relays.iter().map(PeerRelay::refused).collect();
    let from = consumer.statuses.len();
    writer.write(20).await;
    let newest = majority_revision(writer).await;
    let error = consumer.disconnected("the partition").await;
    let noticed = started.elapsed();
    let replayed = consumer.reconnected("the partition", from).await;
    consumer.converge(&writer.expected()[before..]).await;
    let failed_over = started.elapsed();
    // The member has no leader, says so, and has none of those writes.
    wait_for("the cut-off member says it has no leader", WAIT, || {
        Ok(cluster.healthy(cut).is_err())
    })
    .await;
    let health = tokio::task::block_in_place(|| cluster.healthy(cut)).expect_err("unhealthy");
    let behind = tokio::task::block_in_place(|| cluster.local_revision(cut)).expect("its revision");
    assert!(
        behind < newest,
        "e{cut} cut off at {behind}, the majority at {newest}"
    );
    writer.write(10).await;
    consumer.converge(&writer.expected()[before..]).await;
    let refused: Vec<usize> = relays
        .iter()
        .zip(refused0)
        .map(|(r, n)| r.refused() - n)
        .collect();
    assert!(
        refused.iter().all(|n| *n > 0),
        "every relay refused the cut-off member's connections: {refused:?}"
    );

    // Healed: the member catches up, and a watch through it alone lists
    // the present.
    *partition.0.lock().expect("lock") = None;
    let healed = Instant::now();
    writer.write(10).await;
    let newest = majority_revision(writer).await;
    wait_for("the healed member catches up", WAIT, || {
        Ok(cluster.healthy(cut).is_ok() && cluster.local_revision(cut)? >= newest)
    })
    .await;
    let caught_up = healed.elapsed();
    consumer.converge(&writer.expected()[before..]).await;
    let mut alone = Consumer::start({
        let c = fast_config(&cluster.member_url(cut), &prefix, false);
        let watch = c.get_watch_config().clone().initial(true);
        c.watch_config(watch)
    });
    alone.connected("a watch through the healed member").await;
    let mut listed = alone.events.clone();
    listed.sort();
    assert_eq!(
        listed,
        present(&writer.written),
        "the present, through e{cut}"
    );
    assert!(
        consumer.events.iter().all(|e| e.ends_with(" live")),
        "failed over by resuming, not relisting: {:?}",
        consumer.events
    );
    format!(
        "noticed {noticed:.1?} after it began ({error}), {replayed} events replayed before \
         connected, converged through the majority {failed_over:.1?} after; its /health: {health}; relays refused {refused:?}; healed, \
         caught up in {caught_up:.1?}; statuses {:?}",
        consumer.statuses
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_partitioned_behind_its_peers_relays_is_left_and_catches_up() {
    // Its own cluster, ports and data: only against another run of itself.
    if engines::skips("etcd") {
        return;
    }
    let _lock = engines::lock_engine("etcd-partition", true).unwrap_or_else(|e| panic!("{e}"));
    let partition = Arc::new(Partition::default());
    let (relays, cluster) = relayed_cluster(&partition).await;
    let mut writer = Writer {
        client: client_of(&cluster.endpoints(), Duration::from_secs(2)),
        prefix: "lookout-test/partition".to_owned(),
        written: Vec::new(),
    };
    // A follower (the majority keeps its leader), then the leader (the
    // majority elects another; the cut-off one steps down).
    let leader = tokio::task::block_in_place(|| cluster.leader()).expect("a leader");
    let follower = leader % 3 + 1;
    let report = partition_round(&cluster, &relays, &partition, &mut writer, follower).await;
    eprintln!("partition of the follower e{follower}: {report}");
    let leader = tokio::task::block_in_place(|| cluster.leader()).expect("a leader");
    let report = partition_round(&cluster, &relays, &partition, &mut writer, leader).await;
    let elected = tokio::task::block_in_place(|| cluster.leader()).expect("a leader");
    eprintln!("partition of the leader e{leader} (leader after: e{elected}): {report}");
}

/// The store's revision, as the majority (the writer's members) says.
async fn majority_revision(writer: &Writer) -> i64 {
    writer
        .client
        .range(b"\0", b"", 0, 1)
        .await
        .expect("a range")
        .header
        .revision
}
