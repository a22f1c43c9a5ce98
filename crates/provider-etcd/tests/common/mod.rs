//! What the cluster tests share: the etcd engine (up, locked), a TCP relay to
//! cut a watch's connection, records in the model's format, bounded reads of
//! a watch's items.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::Duration;

use lookout_core::{EventKind, InstanceEvent, Item, Status};
use lookout_engines as engines;
use lookout_etcd::model::{Record, RecordEvent, State};
use lookout_etcd::{Client, EtcdEndpoint};
use tokio_stream::{Stream, StreamExt};

/// Bound of every wait for an item.
pub const WAIT: Duration = Duration::from_secs(30);

/// The etcd cluster, up, and its lock (exclusive for a test that breaks
/// it); `None` without engines (the test returns: see `engines::skips`).
pub fn require_etcd(exclusive: bool) -> Option<engines::EngineLock> {
    engines::require("etcd", exclusive, engines::etcd_up)
}

/// A prefix no other test (or run) uses.
pub fn unique_prefix(what: &str) -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    format!(
        "lookout-test/{what}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// Deletes every key under a test's prefix when the test ends (on a thread
/// of its own: a test's runtime may be the current thread's).
pub struct Cleanup(pub String);

impl Drop for Cleanup {
    fn drop(&mut self) {
        let key = format!("{}/", self.0).into_bytes();
        let end = lookout_etcd::prefix_range_end(&key);
        #[allow(clippy::disallowed_methods)]
        let done = thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime");
            rt.block_on(cluster().delete_range(&key, &end)).map(drop)
        })
        .join();
        if !matches!(done, Ok(Ok(()))) {
            eprintln!("etcd: could not delete the keys under {}: {done:?}", self.0);
        }
    }
}

/// A client of the whole cluster.
pub fn cluster() -> Client {
    let endpoints = EtcdEndpoint::parse_list(&engines::etcd_endpoints()).expect("endpoints");
    Client::new(endpoints, Duration::from_secs(5)).expect("a client")
}

/// A record as a publisher writes it.
pub fn record(state: State, kind: &str, origin: &str) -> Vec<u8> {
    let mut r = Record::new(
        "docker",
        state,
        RecordEvent::new(kind, origin, "2026-12-03T10:00:00.5Z"),
    );
    r.uid = Some("uid-1".into());
    r.labels = lookout_core::Labels::from([("app".to_owned(), "web".to_owned())]);
    r.writer = "lookout-etcd tests".into();
    serde_json::to_vec(&r).expect("encodes")
}

/// Puts `PREFIX/i/SOURCE/INSTANCE` = a record of `state` (origin `live`
/// unless `resync`); its revision.
pub async fn put(client: &Client, prefix: &str, instance: &str, state: State, resync: bool) -> i64 {
    let key = lookout_etcd::model::instance_key(prefix, "src", instance);
    let kind = match state {
        State::Running => "started",
        State::Stopped => "stopped",
        State::Removed => "removed",
    };
    let origin = if resync { "resync" } else { "live" };
    client
        .put(key.as_bytes(), &record(state, kind, origin), 0)
        .await
        .unwrap_or_else(|e| panic!("put {key}: {e}"))
        .revision
}

/// The next item, within [`WAIT`].
pub async fn next_item(stream: &mut (impl Stream<Item = Item> + Unpin)) -> Item {
    tokio::time::timeout(WAIT, stream.next())
        .await
        .unwrap_or_else(|_| panic!("no item within {WAIT:?}"))
        .expect("the stream never ends")
}

/// Items until a `Connected` status (included), within [`WAIT`] each and
/// at most `most` of them.
pub async fn until_connected(
    stream: &mut (impl Stream<Item = Item> + Unpin),
    most: usize,
) -> Vec<Item> {
    let mut items = Vec::new();
    for _ in 0..most {
        let item = next_item(stream).await;
        let done = matches!(item, Item::Status(Status::Connected { .. }));
        items.push(item);
        if done {
            return items;
        }
    }
    panic!("no connected status within {most} items: {items:?}");
}

/// An event as `instance kind origin`.
pub fn brief(e: &InstanceEvent) -> String {
    format!("{} {} {}", e.id, e.kind, e.origin)
}

/// Items as strings: events `instance kind origin`, statuses by name.
pub fn briefs(items: &[Item]) -> Vec<String> {
    items
        .iter()
        .map(|i| match i {
            Item::Event(e) => brief(e),
            Item::Status(Status::Connected { instances }) => format!("connected {instances}"),
            Item::Status(Status::Disconnected { .. }) => "disconnected".to_owned(),
            Item::Status(s) => format!("{s:?}"),
        })
        .collect()
}

/// Whether `kind` fits `running` (the state after it).
pub fn state_after(kind: EventKind, running: Option<bool>) -> Option<bool> {
    match kind {
        EventKind::Created | EventKind::Stopped => Some(false),
        EventKind::Started => Some(true),
        EventKind::Removed => None,
        _ => running,
    }
}

#[allow(unused_imports)] // not every test cuts a connection
pub use lookout_testkit::tcp_relay::Relay;

/// Member `member`'s client address.
pub fn member_addr(member: usize) -> SocketAddr {
    let url = engines::etcd_member_url(member);
    url.trim_start_matches("http://")
        .parse()
        .expect("a socket address")
}

/// The next item of any stream (a watch with its publishers'
/// statuses), within [`WAIT`].
pub async fn next_of<T>(stream: &mut (impl Stream<Item = T> + Unpin)) -> T {
    tokio::time::timeout(WAIT, stream.next())
        .await
        .unwrap_or_else(|_| panic!("no item within {WAIT:?}"))
        .expect("the stream never ends")
}

/// An item of a watch with its publishers' statuses, as a string: events
/// and statuses as [`briefs`] says them, a publisher's status as
/// `publisher SOURCE STATE INSTANCES`.
pub fn etcd_brief(item: &lookout_etcd::EtcdItem) -> String {
    match item {
        lookout_etcd::EtcdItem::Item(i) => briefs(std::slice::from_ref(i)).remove(0),
        lookout_etcd::EtcdItem::Publisher(p) => {
            format!("publisher {} {} {}", p.source, p.state, p.instances)
        }
    }
}

// ------------------------------------------------------------ faults.rs's

/// A watch of `prefix` on `endpoints` that redials quickly (100 ms, at most
/// 500 ms), each request bounded by 2 s; with `probe`, probed after 1 s of
/// silence, answered within 1 s (and requests bounded by 1 s).
pub fn fast_config(endpoints: &str, prefix: &str, probe: bool) -> lookout_etcd::EtcdConfig {
    let mut watch = lookout_etcd::EtcdConfig::default_watch().reconnect(
        lookout_core::ReconnectPolicy::default()
            .initial_delay(Duration::from_millis(100))
            .max_delay(Duration::from_millis(500)),
    );
    if probe {
        watch = watch
            .probe_after(Duration::from_secs(1))
            .probe_timeout(Duration::from_secs(1));
    }
    lookout_etcd::EtcdConfig::new(endpoints)
        .expect("endpoints")
        .prefix(prefix)
        .request_timeout(Duration::from_secs(if probe { 1 } else { 2 }))
        .watch_config(watch)
}

/// A client of `endpoints` (comma-separated), each request bounded by `timeout`.
pub fn client_of(endpoints: &str, timeout: Duration) -> Client {
    Client::new(
        EtcdEndpoint::parse_list(endpoints).expect("endpoints"),
        timeout,
    )
    .expect("a client")
}

/// What the core tells, in order, of writes of records (`instance`, its
/// new state) made one after the other: `src/INSTANCE kind live` each
/// (an unknown instance put running is `created` then `started`; a state
/// it already has tells nothing).
pub fn told(written: &[(String, State)]) -> Vec<String> {
    let mut running: std::collections::BTreeMap<&str, bool> = std::collections::BTreeMap::new();
    let mut out = Vec::new();
    for (instance, state) in written {
        let was = running.get(instance.as_str()).copied();
        let kinds: &[&str] = match (was, state) {
            (None, State::Running) => &["created", "started"],
            (None, State::Stopped) => &["created"],
            (Some(false), State::Running) => &["started"],
            (Some(true), State::Stopped) => &["stopped"],
            (Some(_), State::Removed) => &["removed"],
            _ => &[],
        };
        out.extend(kinds.iter().map(|k| format!("src/{instance} {k} live")));
        match state {
            State::Running => running.insert(instance, true),
            State::Stopped => running.insert(instance, false),
            State::Removed => running.remove(instance.as_str()),
        };
    }
    out
}

/// The error and its sources, as one line.
pub fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(s) = cur {
        out.push_str(": ");
        out.push_str(&s.to_string());
        cur = s.source();
    }
    out
}

/// The next `n` events (statuses skipped), as `instance kind origin`,
/// within [`WAIT`] each.
pub async fn events(
    watch: &mut (impl tokio_stream::Stream<Item = Item> + Unpin),
    n: usize,
) -> Vec<String> {
    let mut out = Vec::new();
    for _ in 0..n * 4 + 8 {
        if out.len() == n {
            break;
        }
        match tokio::time::timeout(WAIT, watch.next())
            .await
            .expect("an item in time")
        {
            Some(Item::Event(e)) => out.push(brief(&e)),
            Some(_) => {}
            None => panic!("the watch ended"),
        }
    }
    out
}

/// [`until_connected`], asserting that no `Disconnected` came on the way.
pub async fn connected_at_once(
    stream: &mut (impl Stream<Item = Item> + Unpin),
    most: usize,
) -> Vec<Item> {
    let items = until_connected(stream, most).await;
    assert!(
        items
            .iter()
            .all(|i| !matches!(i, Item::Status(Status::Disconnected { .. }))),
        "{items:?}"
    );
    items
}
