//! The etcd provider against whole-member faults on real clusters: all
//! three members of the engines' cluster cold-restarted (SIGTERM, then
//! `kill -9`) under a watch, and a member of a private cluster partitioned
//! through TCP relays its peers know it by. In each, the consumer converges
//! to what was written, every transition told once, in order.

// The consumer and the relays run on tasks and threads of the test's own.
#![allow(clippy::disallowed_methods)]

mod common;

use std::time::{Duration, Instant};

use common::{Cleanup, WAIT, briefs, client_of, fast_config, require_etcd, told, unique_prefix};
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
    /// `disconnected`s, then that one `connected`.
    async fn reconnected(&mut self, why: &str, from: usize) {
        self.connected(why).await;
        let since = &self.statuses[from..];
        assert!(
            since.len() >= 2
                && since[..since.len() - 1].iter().all(|s| s == "disconnected")
                && since[since.len() - 1].starts_with("connected"),
            "{why}: disconnected, then connected: {since:?}"
        );
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
    let _lock = require_etcd(true);
    let prefix = unique_prefix("cold");
    // Dropped after `UpAgain` (declared before it): the keys are deleted
    // from a cluster that is up.
    let _cleanup = Cleanup(prefix.clone());
    let _up_again = UpAgain;
    let endpoints = engines::etcd_endpoints();
    let mut consumer = Consumer::start(fast_config(&endpoints, &prefix, false));
    consumer.connected("first connection").await;
    assert_eq!(consumer.statuses, ["connected 0"]);
    let mut writer = Writer {
        client: client_of(&endpoints, Duration::from_secs(2)),
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
        blocking(|| engines::etcd_up().expect("every member up again")).await;
        let down = started.elapsed();
        // Writes go on at once: the watch may resume before or after them.
        writer.write(20).await;
        consumer.reconnected(fault, from).await;
        consumer.converge(&writer.expected()).await;
        eprintln!(
            "{fault} of all three: down and up in {down:.1?} ({error}), statuses {:?}, \
             converged {:.1?} after the fault",
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
