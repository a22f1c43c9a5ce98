//! `--publish etcd://[USER@]HOST:PORT[,HOST:PORT…][/PREFIX]`: each
//! transition the run tells, written to etcd in `lookout_etcd::model`'s
//! format, for `lookout etcd` to read back. With `USER@`, as that etcd user,
//! its password read from `--etcd-password-file`. `etcds://…` is the same
//! over TLS (every member `https://`), verified with `--etcd-cacert`
//! (`--etcd-cert`/`--etcd-key`: a client certificate).
//!
//! One put per transition, compared with the key's mod revision as last
//! written or read; the txn's failure branch reads the key, so a retried
//! write whose first answer was lost is recognised (the key holds exactly
//! what was to be written). A transition that finds nothing queued is a txn
//! of its own; what queued up while etcd took the txn before is written
//! several instances a txn (`batch.rs`: up to 64, one revision), so a
//! cluster slower than the feed is not asked for one revision per
//! transition. What is wanted and what etcd holds are kept per instance:
//! a write that fails is tried again at the next tick. At start the run's own
//! keys are read as the baseline; once the first snapshot is complete, only
//! what differs is written, as `resync` (tombstones for the instances that
//! went meanwhile). A removal is a tombstone on a 24 h lease; `PREFIX/s/SOURCE`
//! says the engine is connected, on a 10 s lease kept alive, and is deleted
//! while it is not.
//!
//! A record says why (issue #47) as `/instances` keeps it: a stop's reason,
//! a stop under way (`event.kind: stopping`, running, not ready), or the
//! running instance's failure, kept by an `unready` and ended by a start or
//! `ready`; a new reason is a new state to write, an `unready` that changes
//! nothing is not.

use std::collections::{BTreeMap, HashSet};
use std::time::{Duration, Instant, SystemTime};

use lookout_core::{EventKind, InstanceEvent, Origin, Status};
use lookout_etcd::model::{self, Record, RecordEvent, RecordReason, State};
use lookout_etcd::{Client, Credentials, EtcdError, Tls};
use serde_json::json;

use crate::output::{Warnings, rfc3339_nanos};

mod batch;
mod target;
mod task;
use batch::{Write, Written};
pub use target::{Target, credentials, host_name, parse_target, prefix_words, tls};
pub use task::Running;

/// A tombstone's lease.
const TOMBSTONE_TTL: i64 = 24 * 3600;
/// A new tombstone lease once the one in use is this old (so a tombstone
/// lives 23 to 24 h).
const TOMBSTONE_LEASE_REUSE: Duration = Duration::from_secs(3600);
/// The status key's lease.
pub const STATUS_TTL: i64 = 10;
/// How often the status lease is renewed and failed writes retried.
pub const TICK: Duration = Duration::from_secs(3);

/// What is wanted of one instance, and what etcd holds.
#[derive(Debug, Default)]
struct Slot {
    /// The record to write, when it differs from `held`.
    want: Option<Record>,
    /// The record etcd holds (as last written or read) and its mod revision
    /// (0: no key).
    held: Option<Record>,
    revision: i64,
}

/// The publisher of one run's transitions.
#[derive(Debug)]
pub struct Publisher {
    client: Client,
    prefix: String,
    source: String,
    provider: &'static str,
    writer: String,
    slots: BTreeMap<String, Slot>,
    /// Until the first snapshot is complete: the instances it told.
    first: Option<BTreeMap<String, Record>>,
    tombstone_lease: Option<(i64, Instant)>,
    status_lease: Option<i64>,
    connected: bool,
    /// Where what fails is said (it is tried again).
    warnings: Warnings,
}

/// Whether two records tell the same state (not the same transition): a
/// stop under way, or another reason, is another state.
fn same_state(a: &Record, b: &Record) -> bool {
    a.state == b.state
        && a.ready == b.ready
        && a.uid == b.uid
        && a.labels == b.labels
        && a.is_stopping() == b.is_stopping()
        && a.reason == b.reason
}

/// The reason a record of `e` holds, as `/instances` keeps it (the hub's
/// `Instance::reason`): the event's own, but that a running instance's
/// failure is kept by an `unready` (`before`: the record it follows) and
/// ended by a start or `ready`.
fn record_reason(e: &InstanceEvent, before: Option<&Record>) -> RecordReason {
    match e.kind {
        EventKind::Unready => before
            .filter(|b| b.state == State::Running && !b.is_stopping())
            .map(|b| b.reason.clone())
            .unwrap_or_default(),
        EventKind::Started | EventKind::Ready => RecordReason::default(),
        _ => RecordReason::of(e.reason.as_deref()),
    }
}

impl Publisher {
    /// A publisher of `source`'s instances to `target`, saying what fails
    /// through `warnings`; reads nothing yet.
    pub fn new(
        target: &Target,
        source: String,
        provider: &'static str,
        credentials: Option<Credentials>,
        tls: Option<Tls>,
        warnings: Warnings,
    ) -> Result<Self, lookout_etcd::ConfigError> {
        model::check_source(&source)?;
        let prefix = model::check_prefix(&target.prefix)?.to_owned();
        Ok(Self {
            client: Client::new(target.endpoints.clone(), Duration::from_secs(5))?
                .with_credentials(credentials)
                .with_tls(tls),
            prefix,
            writer: format!(
                "lookout/{} {source} pid {}",
                env!("CARGO_PKG_VERSION"),
                std::process::id()
            ),
            source,
            provider,
            slots: BTreeMap::new(),
            first: Some(BTreeMap::new()),
            tombstone_lease: None,
            status_lease: None,
            connected: false,
            warnings,
        })
    }

    /// Where its warnings go.
    pub fn warnings(&self) -> Warnings {
        self.warnings
    }

    /// Reads this source's keys: the baseline the first snapshot is
    /// compared with.
    pub async fn baseline(&mut self) -> Result<usize, EtcdError> {
        let key = model::source_prefix(&self.prefix, &self.source);
        let end = lookout_etcd::prefix_range_end(key.as_bytes());
        let mut from = key.clone().into_bytes();
        let mut revision = 0;
        loop {
            let page = self.client.range(&from, &end, revision, 1000).await?;
            revision = page.header.revision;
            for kv in &page.kvs {
                let Some((_, instance)) = model::parse_instance_key(&self.prefix, &kv.key) else {
                    continue;
                };
                let slot = self.slots.entry(instance.to_owned()).or_default();
                slot.held = Record::from_json(&kv.value).ok();
                slot.revision = kv.mod_revision;
            }
            match page.kvs.last() {
                Some(last) if page.more => {
                    from.clone_from(&last.key);
                    from.push(0);
                }
                _ => return Ok(self.slots.len()),
            }
        }
    }

    fn record(&self, e: &InstanceEvent, origin: &str, before: Option<&Record>) -> Record {
        let state = match e.kind {
            EventKind::Removed => State::Removed,
            EventKind::Started
            | EventKind::Ready
            | EventKind::Unready
            | EventKind::Stopping
            | EventKind::Failing => State::Running,
            _ => State::Stopped,
        };
        let event = RecordEvent::new(e.kind.as_str(), origin, rfc3339_nanos(e.at));
        let mut record = Record::new(self.provider, state, event);
        // A stop under way ended readiness, whatever the detail says.
        record.ready = e
            .readiness
            .filter(|_| state == State::Running)
            .map(|r| r.is_ready() && e.kind != EventKind::Stopping);
        if state != State::Removed {
            record.reason = record_reason(e, before);
        }
        record.uid = e.uid.as_deref().map(str::to_owned);
        record.labels = lookout_core::Labels::clone(&e.labels);
        record.writer.clone_from(&self.writer);
        record
    }

    /// One event of the run: written at once (after the first snapshot).
    #[cfg(test)]
    pub async fn event(&mut self, e: &InstanceEvent) {
        self.events(std::slice::from_ref(e)).await;
    }

    /// Events of the run, in order, as queued while etcd took the ones
    /// before: written at once (after the first snapshot), several
    /// instances a txn (`batch`), one put per transition — an instance told
    /// twice has its first transition written before the second is made.
    pub async fn events(&mut self, es: &[InstanceEvent]) {
        let mut ids: Vec<String> = Vec::new();
        let mut pending: HashSet<&str> = HashSet::new();
        for e in es {
            // What the publisher learnt from a snapshot is a resync to its readers.
            let origin = match e.origin {
                Origin::Live => "live",
                // What else a snapshot or relist may tell.
                _ => "resync",
            };
            let id = e.id.as_str();
            if pending.contains(id) {
                self.flush(&ids).await;
                ids.clear();
                pending.clear();
            }
            let before = match &self.first {
                Some(first) => first.get(id),
                None => self
                    .slots
                    .get(id)
                    .and_then(|s| s.want.as_ref().or(s.held.as_ref())),
            };
            let record = self.record(e, origin, before);
            if let Some(first) = &mut self.first {
                first.insert(id.to_owned(), record);
                continue;
            }
            self.slots.entry(id.to_owned()).or_default().want = Some(record);
            ids.push(id.to_owned());
            pending.insert(id);
        }
        self.flush(&ids).await;
    }

    /// A status of the run: the first `connected` completes the first
    /// snapshot (what differs from the baseline is written); the status key
    /// follows the connection.
    pub async fn status(&mut self, s: &Status) {
        match s {
            Status::Connected { .. } => {
                if let Some(first) = self.first.take() {
                    self.first_snapshot(first).await;
                }
                self.connected = true;
                self.write_status().await;
            }
            Status::Disconnected { .. } => {
                self.connected = false;
                let key = model::status_key(&self.prefix, &self.source);
                if let Err(e) = self.client.delete(key.as_bytes()).await {
                    self.warnings
                        .warn_publish(&format!("cannot delete {key}: {e}"));
                }
            }
            // A lag (and a status this binary does not know of yet) changes
            // no connection.
            _ => {}
        }
    }

    async fn first_snapshot(&mut self, present: BTreeMap<String, Record>) {
        let at = rfc3339_nanos(SystemTime::now());
        // Instances of the baseline that are gone: a tombstone each.
        let gone: Vec<String> = self
            .slots
            .iter()
            .filter(|(id, slot)| {
                !present.contains_key(*id)
                    && slot
                        .held
                        .as_ref()
                        .is_some_and(|r| r.state != State::Removed)
            })
            .map(|(id, _)| id.clone())
            .collect();
        for id in gone {
            let Some(slot) = self.slots.get_mut(&id) else {
                continue;
            };
            let Some(held) = &slot.held else { continue };
            let mut tomb = held.clone();
            tomb.state = State::Removed;
            tomb.ready = None;
            tomb.reason = RecordReason::default();
            tomb.event = RecordEvent::new("removed", "resync", at.clone());
            tomb.writer.clone_from(&self.writer);
            slot.want = Some(tomb);
        }
        for (id, record) in present {
            self.slots.entry(id).or_default().want = Some(record);
        }
        let ids: Vec<String> = self.slots.keys().cloned().collect();
        self.flush(&ids).await;
    }

    /// Writes what is wanted of `ids` (distinct) where it differs from what
    /// etcd holds: up to [`batch::MAX_WRITES`] instances a txn, each
    /// comparing its key's mod revision; on failure each key as it is now
    /// (ours, if a lost answer hid our own write), and the rest once more,
    /// twice at most. What etcd does not take stays wanted: the next tick
    /// tries again (and a failure stops the rest until then, rather than
    /// timing out once per instance).
    async fn flush(&mut self, ids: &[String]) {
        let mut wants: Vec<(String, Record)> = Vec::new();
        let mut writes: Vec<Write> = Vec::new();
        // The tombstone lease, asked once.
        let mut tomb_lease: Option<Option<i64>> = None;
        for id in ids {
            let Some(slot) = self.slots.get_mut(id) else {
                continue;
            };
            let Some(want) = &slot.want else { continue };
            if slot.held.as_ref().is_some_and(|h| same_state(h, want)) {
                slot.want = None;
                continue;
            }
            let want = want.clone();
            let lease = if want.state == State::Removed {
                if tomb_lease.is_none() {
                    tomb_lease = Some(match self.tombstone_lease().await {
                        Ok(l) => Some(l),
                        Err(e) => {
                            self.warnings
                                .warn_publish(&format!("cannot grant a tombstone lease: {e}"));
                            None
                        }
                    });
                }
                // Left wanted without a lease: the next tick tries again.
                let Some(Some(lease)) = tomb_lease else {
                    continue;
                };
                lease
            } else {
                0
            };
            let key = model::instance_key(&self.prefix, &self.source, id);
            let value = match serde_json::to_vec(&want) {
                Ok(v) => v,
                Err(e) => {
                    self.warnings
                        .warn_publish(&format!("cannot encode the record of {key}: {e}"));
                    continue;
                }
            };
            writes.push(Write {
                key,
                value,
                lease,
                revision: 0,
            });
            wants.push((id.clone(), want));
        }
        let ends = batch::runs(writes.iter().map(Write::bytes));
        let mut writes = writes.into_iter();
        let mut wants = wants.into_iter();
        for run in ends.iter().scan(0, |start, &end| {
            let n = end - *start;
            *start = end;
            Some(n)
        }) {
            let run_writes: Vec<Write> = writes.by_ref().take(run).collect();
            let run_wants: Vec<(String, Record)> = wants.by_ref().take(run).collect();
            if !self.write_run(run_wants, run_writes).await {
                return;
            }
        }
    }

    /// One run of [`flush`](Self::flush): the txn, tried three times at
    /// most while some compare fails. False when etcd failed (said).
    async fn write_run(
        &mut self,
        mut wants: Vec<(String, Record)>,
        mut writes: Vec<Write>,
    ) -> bool {
        for _ in 0..3 {
            if writes.is_empty() {
                return true;
            }
            for ((id, _), w) in wants.iter().zip(writes.iter_mut()) {
                w.revision = self.slots.get(id).map_or(0, |s| s.revision);
            }
            let found = match batch::cas(&self.client, &writes).await {
                Ok(found) => found,
                Err(e) => {
                    // Left wanted: the next tick tries again.
                    let keys = match writes.len() {
                        1 => writes[0].key.clone(),
                        n => format!("{} and {} other keys", writes[0].key, n - 1),
                    };
                    self.warnings
                        .warn_publish(&format!("cannot write {keys}: {e}"));
                    return false;
                }
            };
            let mut again = (Vec::new(), Vec::new());
            for (((id, want), w), found) in wants.into_iter().zip(writes).zip(found) {
                let Some(slot) = self.slots.get_mut(&id) else {
                    continue;
                };
                match found {
                    Written::Done(revision) => {
                        slot.held = Some(want);
                        slot.want = None;
                        slot.revision = revision;
                    }
                    Written::Changed { revision, held } => {
                        // Not what we last knew: take it as known, write again.
                        slot.revision = revision;
                        slot.held = held.map(|h| *h);
                        again.0.push((id, want));
                        again.1.push(w);
                    }
                }
            }
            (wants, writes) = again;
        }
        true
    }

    /// One instance's compare-and-set, as [`flush`](Self::flush) writes it.
    #[cfg(test)]
    async fn cas(
        &self,
        key: &str,
        value: &[u8],
        lease: i64,
        revision: i64,
    ) -> Result<Written, EtcdError> {
        let write = Write {
            key: key.to_owned(),
            value: value.to_vec(),
            lease,
            revision,
        };
        let found = batch::cas(&self.client, std::slice::from_ref(&write)).await?;
        Ok(found.into_iter().next().expect("an answer for each write"))
    }

    async fn tombstone_lease(&mut self) -> Result<i64, EtcdError> {
        if let Some((id, granted)) = self.tombstone_lease
            && granted.elapsed() < TOMBSTONE_LEASE_REUSE
        {
            return Ok(id);
        }
        let lease = self.client.lease_grant(TOMBSTONE_TTL).await?;
        self.tombstone_lease = Some((lease.id, Instant::now()));
        Ok(lease.id)
    }

    async fn write_status(&mut self) {
        let key = model::status_key(&self.prefix, &self.source);
        let lease = match self.client.lease_grant(STATUS_TTL).await {
            Ok(l) => l.id,
            Err(e) => {
                self.warnings
                    .warn_publish(&format!("cannot grant the status lease: {e}"));
                return;
            }
        };
        let value = json!({
            "connected": true,
            "provider": self.provider,
            "writer": self.writer,
            "at": rfc3339_nanos(SystemTime::now()),
        })
        .to_string();
        match self
            .client
            .put(key.as_bytes(), value.as_bytes(), lease)
            .await
        {
            Ok(_) => self.status_lease = Some(lease),
            Err(e) => self
                .warnings
                .warn_publish(&format!("cannot write {key}: {e}")),
        }
    }

    /// At exit: the status key deleted (within 2 s), so that readers know
    /// the source is no longer published before its lease would tell.
    pub async fn stop(&mut self) {
        let key = model::status_key(&self.prefix, &self.source);
        let _ =
            tokio::time::timeout(Duration::from_secs(2), self.client.delete(key.as_bytes())).await;
    }

    /// Every [`TICK`]: renews the status lease (writes the status again if
    /// it expired) and retries the writes that failed.
    pub async fn tick(&mut self) {
        if self.connected {
            let alive = match self.status_lease {
                Some(l) => self
                    .client
                    .lease_keepalive(l)
                    .await
                    .is_ok_and(|ttl| ttl > 0),
                None => false,
            };
            if !alive {
                self.write_status().await;
            }
        }
        let dirty: Vec<String> = self
            .slots
            .iter()
            .filter(|(_, s)| s.want.is_some())
            .map(|(id, _)| id.clone())
            .collect();
        self.flush(&dirty).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A publisher of source `s` (`docker`) to the test etcd cluster, under `prefix`.
    fn test_publisher(prefix: &str) -> Publisher {
        let target = parse_target(&format!(
            "etcd://{}/{prefix}",
            lookout_e2e::engines::etcd_endpoints().replace("http://", "")
        ))
        .expect("a target");
        Publisher::new(
            &target,
            "s".into(),
            "docker",
            None,
            None,
            Warnings::new(false),
        )
        .expect("a publisher")
    }

    #[test]
    fn targets() {
        let t = parse_target("etcd://127.0.0.1:12371,127.0.0.1:12372/team/a").expect("parses");
        assert_eq!(t.endpoints.len(), 2);
        assert_eq!(t.prefix, "team/a");
        let t = parse_target("etcd://etcd:2379").expect("parses");
        assert_eq!(t.prefix, model::DEFAULT_PREFIX);
        assert_eq!(t.endpoints[0].to_string(), "http://etcd:2379");
        assert!(parse_target("http://x:1").is_err());
        assert!(parse_target("etcd:///p").is_err());
        let t = parse_target("etcd://ops@127.0.0.1:1,127.0.0.1:2/p").expect("parses");
        assert_eq!(t.user.as_deref(), Some("ops"));
        assert_eq!(t.endpoints.len(), 2);
        assert!(parse_target("etcd://ops:pw@x:1").is_err());
        assert!(parse_target("etcd://@x:1").is_err());
        assert!(credentials(&t, None).is_err());
        let t = parse_target("etcd://x:1/a@b").expect("parses");
        assert_eq!((t.user.as_deref(), t.prefix.as_str()), (None, "a@b"));
        let anonymous = parse_target("etcd://x:1").expect("parses");
        assert!(credentials(&anonymous, Some(std::path::Path::new("/p"))).is_err());
        assert!(matches!(credentials(&anonymous, None), Ok(None)));
        let t = parse_target("etcds://ops@x:1,y:2/p").expect("parses");
        let shown: Vec<String> = t.endpoints.iter().map(ToString::to_string).collect();
        assert_eq!(shown, ["https://x:1", "https://y:2"]);
        assert_eq!((t.user.as_deref(), t.prefix.as_str()), (Some("ops"), "p"));
        assert!(parse_target("etcd://https://x:1").is_err());
        let ca = std::path::Path::new("/nonexistent/ca.pem");
        assert!(
            tls(&t.endpoints, None, None, "--etcd-cacert")
                .is_err_and(|e| e.contains("--etcd-cacert"))
        );
        assert!(tls(&anonymous.endpoints, Some(ca), None, "--etcd-cacert").is_err());
        assert!(matches!(
            tls(&anonymous.endpoints, None, None, "--etcd-cacert"),
            Ok(None)
        ));
        assert!(
            tls(&t.endpoints, Some(ca), None, "--etcd-cacert")
                .is_err_and(|e| e.contains("/nonexistent/ca.pem"))
        );
    }

    use lookout_core::{Labels, Outcome, Readiness, Reason, Signal};
    use std::sync::Arc;
    use std::time::UNIX_EPOCH;

    fn offline() -> Publisher {
        let target = parse_target("etcd://127.0.0.1:1/p").expect("a target");
        Publisher::new(&target, "s".into(), "k8s", None, None, Warnings::new(false))
            .expect("a publisher")
    }

    fn ev(kind: EventKind, secs: u64, reason: Option<Reason>) -> InstanceEvent {
        InstanceEvent::new(
            "web".into(),
            kind,
            UNIX_EPOCH + Duration::from_secs(1_796_000_000 + secs),
            Origin::Live,
        )
        .labels(Arc::new(Labels::from([("app".into(), "web".into())])))
        .uid(Some("u1".into()))
        .readiness(Some(Readiness::replicas(
            1,
            u32::from(kind == EventKind::Ready),
            true,
        )))
        .reason(reason.map(Arc::new))
    }

    /// The records of a run of events, each following the one before.
    fn records(p: &Publisher, events: &[InstanceEvent]) -> Vec<Record> {
        let mut out: Vec<Record> = Vec::new();
        for e in events {
            let r = p.record(e, "live", out.last());
            out.push(r);
        }
        out
    }

    #[test]
    fn records_say_why_as_the_store_keeps_it() {
        let p = offline();
        let failing = Reason::failing("Back-off pulling image \"nope\"").failed(true);
        let stop = Reason::stop(Outcome::Stopped).signal(Some(Signal::TERM));
        let rs = records(
            &p,
            &[
                ev(EventKind::Started, 0, None),
                ev(EventKind::Failing, 1, Some(failing.clone())),
                ev(EventKind::Unready, 2, None),
                ev(EventKind::Ready, 3, None),
                ev(EventKind::Stopping, 4, Some(stop.clone())),
                ev(EventKind::Stopped, 5, Some(stop.clone())),
            ],
        );
        let why: Vec<_> = rs
            .iter()
            .map(|r| (r.state, r.ready, r.is_stopping(), r.reason.reason()))
            .collect();
        let failing = Some(Arc::new(failing));
        let stop = Some(Arc::new(stop));
        assert_eq!(
            why,
            [
                (State::Running, Some(false), false, None),
                (State::Running, Some(false), false, failing.clone()),
                // An unready keeps the failure, as `/instances` does.
                (State::Running, Some(false), false, failing),
                (State::Running, Some(true), false, None),
                // A stop under way: running, not ready.
                (State::Running, Some(false), true, stop.clone()),
                (State::Stopped, None, false, stop),
            ]
        );
        // Each is another state than the one before, and is written; but
        // an unready after the failing (unready already) changes nothing.
        for (i, pair) in rs.windows(2).enumerate() {
            assert_eq!(same_state(&pair[0], &pair[1]), i == 1, "{pair:?}");
        }
        // Only a new message makes a failing record another state.
        let mut again = rs[1].clone();
        again.event.at = "later".into();
        assert!(same_state(&rs[1], &again));
        again.reason.message = Some("another".into());
        assert!(!same_state(&rs[1], &again));
        let gone = p.record(&ev(EventKind::Removed, 6, None), "live", rs.last());
        assert!(gone.state == State::Removed && gone.reason.is_empty());
    }

    /// Published by the publisher, read back by the etcd provider: the same
    /// events with the same reasons (a stopped with its exit code, signal,
    /// OOM kill, restart and message; a failing; a stopping, then its
    /// requested stop). Against the real cluster.
    #[test]
    #[allow(clippy::too_many_lines)] // one run of events, published then read back
    fn reasons_published_read_back_equal() {
        use lookout_core::Item;
        use lookout_e2e::engines;
        use tokio_stream::StreamExt;
        let Some(_lock) = engines::require("etcd", false, engines::etcd_up) else {
            return;
        };
        let prefix = format!("lookout-test/publish-why-{}", std::process::id());
        let endpoints = engines::etcd_endpoints();
        let mut publisher = test_publisher(&prefix);
        let config = lookout_etcd::EtcdConfig::new(&endpoints)
            .expect("endpoints")
            .prefix(prefix.clone())
            .readiness(true);
        let mut watch = lookout_etcd::watch(config).expect("a watch");
        let at = |secs: u64| UNIX_EPOCH + Duration::from_secs(1_796_000_000 + secs);
        let event = |id: &str, kind, secs, ready: Option<bool>, reason: Option<Reason>| {
            InstanceEvent::new(id.into(), kind, at(secs), Origin::Live)
                .labels(Arc::new(Labels::from([("app".into(), id.into())])))
                .uid(Some(format!("uid-{id}").into()))
                .readiness(ready.map(Readiness::told))
                .reason(reason.map(Arc::new))
        };
        let oom = Reason::exited(137, true)
            .oom(true)
            .message(Some("OOMKilled: 512 MiB"));
        let failing = Reason::failing("health check: connection refused\n(3 in a row)");
        let gave_up = Reason::failing("ProgressDeadlineExceeded").failed(true);
        let stop = Reason::stop(Outcome::Stopped).signal(Some(Signal::TERM));
        let mut stopped = Reason::exited(143, false);
        stopped.outcome = Some(Outcome::Stopped);
        let sent = [
            event("job", EventKind::Created, 1, None, None),
            event("job", EventKind::Started, 2, Some(true), None),
            event("job", EventKind::Ready, 2, Some(true), None),
            event("job", EventKind::Stopped, 3, Some(true), Some(oom)),
            event("web", EventKind::Created, 4, None, None),
            event("web", EventKind::Started, 5, Some(false), None),
            event("web", EventKind::Failing, 6, Some(false), Some(failing)),
            event("web", EventKind::Failing, 7, Some(false), Some(gave_up)),
            event("web", EventKind::Ready, 8, Some(true), None),
            event("web", EventKind::Stopping, 9, Some(false), Some(stop)),
            event("web", EventKind::Stopped, 10, Some(false), Some(stopped)),
        ];
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        let read = rt.block_on(async {
            // The reader first: it lists the empty prefix, then watches.
            let connected = tokio::time::timeout(Duration::from_secs(30), async {
                while let Some(item) = watch.next().await {
                    if matches!(item, Item::Status(Status::Connected { .. })) {
                        return;
                    }
                }
            });
            connected.await.expect("the reader connects");
            publisher.baseline().await.expect("a baseline");
            publisher.status(&Status::Connected { instances: 0 }).await;
            for e in &sent {
                publisher.event(e).await;
            }
            let mut read = Vec::new();
            let all = tokio::time::timeout(Duration::from_secs(30), async {
                while read.len() < sent.len() {
                    match watch.next().await {
                        Some(Item::Event(e)) => read.push(e),
                        Some(_) => {}
                        None => break,
                    }
                }
            });
            let done = all.await;
            publisher.stop().await;
            let key = format!("{prefix}/").into_bytes();
            let end = lookout_etcd::prefix_range_end(&key);
            publisher
                .client
                .delete_range(&key, &end)
                .await
                .expect("clean up");
            done.unwrap_or_else(|_| panic!("read back in 30 s: {read:#?}"));
            read
        });
        let brief = |e: &InstanceEvent| {
            (
                e.id.as_str()
                    .rsplit('/')
                    .next()
                    .unwrap_or_default()
                    .to_owned(),
                e.kind,
                e.at,
                e.uid.clone(),
                e.reason.clone(),
            )
        };
        assert_eq!(
            read.iter().map(brief).collect::<Vec<_>>(),
            sent.iter().map(brief).collect::<Vec<_>>()
        );
        assert!(read.iter().all(|e| e.id.as_str().starts_with("s/")));
    }

    /// Against the real cluster (`cargo xtask engines up etcd`).
    #[test]
    fn a_retried_write_whose_answer_was_lost_is_recognised() {
        use lookout_e2e::engines;
        let Some(_lock) = engines::require("etcd", false, engines::etcd_up) else {
            return;
        };
        let prefix = format!("lookout-test/publish-cas-{}", std::process::id());
        let publisher = test_publisher(&prefix);
        let key = model::instance_key(&prefix, "s", "web");
        let value = br#"{"provider":"docker","state":"running","event":{"kind":"started","origin":"live","at":"x"}}"#;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        rt.block_on(async {
            let Ok(Written::Done(first)) = publisher.cas(&key, value, 0, 0).await else {
                panic!("the first write succeeds")
            };
            // The same txn again, as after an answer lost on the way: the
            // compare fails, the failure branch shows our own value.
            match publisher.cas(&key, value, 0, 0).await {
                Ok(Written::Done(again)) => assert_eq!(again, first),
                other => panic!("recognised as ours: {other:?}"),
            }
            // Another value on the stale revision: the key as it is.
            match publisher.cas(&key, b"{}", 0, 0).await {
                Ok(Written::Changed { revision, held }) => {
                    assert_eq!(revision, first);
                    assert_eq!(held.map(|r| r.state), Some(State::Running));
                }
                other => panic!("a change: {other:?}"),
            }
            publisher
                .client
                .delete(key.as_bytes())
                .await
                .expect("clean up");
        });
    }

    /// Queued events written several instances a txn: one put per
    /// transition (an instance told twice: two puts, in order), fewer
    /// revisions than transitions; a txn whose compare fails for one key
    /// (another writer) writes every instance the next time; the reader
    /// reads back every transition. Against the real cluster.
    #[test]
    #[allow(clippy::too_many_lines)] // one run: published, counted, read back
    fn queued_events_are_written_several_a_txn_one_put_each() {
        use lookout_core::Item;
        use lookout_e2e::engines;
        use tokio_stream::StreamExt;
        let Some(_lock) = engines::require("etcd", false, engines::etcd_up) else {
            return;
        };
        let prefix = format!("lookout-test/publish-batch-{}", std::process::id());
        let endpoints = engines::etcd_endpoints();
        let mut publisher = test_publisher(&prefix);
        let config = lookout_etcd::EtcdConfig::new(&endpoints)
            .expect("endpoints")
            .prefix(prefix.clone());
        let mut watch = lookout_etcd::watch(config).expect("a watch");
        let event = |id: &str, kind, secs: u64| {
            InstanceEvent::new(
                id.into(),
                kind,
                UNIX_EPOCH + Duration::from_secs(1_796_000_000 + secs),
                Origin::Live,
            )
            .labels(Arc::new(Labels::from([("app".into(), id.into())])))
        };
        let first = [
            event("a", EventKind::Started, 1),
            event("b", EventKind::Started, 1),
            event("c", EventKind::Started, 1),
            // Told twice: written after its first transition, not instead.
            event("a", EventKind::Stopped, 2),
        ];
        let second = [
            event("b", EventKind::Stopped, 3),
            event("c", EventKind::Stopped, 3),
        ];
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        let (kvs, read, done) = rt.block_on(async {
            let connected = tokio::time::timeout(Duration::from_secs(30), async {
                while let Some(item) = watch.next().await {
                    if matches!(item, Item::Status(Status::Connected { .. })) {
                        return;
                    }
                }
            });
            connected.await.expect("the reader connects");
            publisher.baseline().await.expect("a baseline");
            publisher.status(&Status::Connected { instances: 0 }).await;
            publisher.events(&first).await;
            // Another writer puts b again (the same record: its readers see
            // no change): the next txn's compare fails for b.
            let b = model::instance_key(&prefix, "s", "b");
            let held = publisher
                .client
                .range(b.as_bytes(), &[], 0, 0)
                .await
                .expect("read b");
            publisher
                .client
                .put(b.as_bytes(), &held.kvs[0].value, 0)
                .await
                .expect("write b");
            publisher.events(&second).await;
            let key = format!("{prefix}/i/").into_bytes();
            let end = lookout_etcd::prefix_range_end(&key);
            let kvs = publisher
                .client
                .range(&key, &end, 0, 0)
                .await
                .expect("the keys")
                .kvs;
            let mut read = Vec::new();
            let all = tokio::time::timeout(Duration::from_secs(30), async {
                let stopped = |read: &Vec<InstanceEvent>| {
                    read.iter().filter(|e| e.kind == EventKind::Stopped).count()
                };
                while stopped(&read) < 3 {
                    match watch.next().await {
                        Some(Item::Event(e)) => read.push(e),
                        Some(_) => {}
                        None => break,
                    }
                }
            });
            let done = all.await;
            publisher.stop().await;
            let key = format!("{prefix}/").into_bytes();
            let end = lookout_etcd::prefix_range_end(&key);
            publisher
                .client
                .delete_range(&key, &end)
                .await
                .expect("clean up");
            (kvs, read, done)
        });
        done.unwrap_or_else(|_| panic!("read back in 30 s: {read:#?}"));
        let by = |id: &str| {
            let key = model::instance_key(&prefix, "s", id);
            kvs.iter()
                .find(|kv| kv.key == key.as_bytes())
                .unwrap_or_else(|| panic!("{key} written"))
        };
        let (a, b, c) = (by("a"), by("b"), by("c"));
        // a: two puts; b: its first, the other writer's, ours; c: two puts.
        assert_eq!((a.version, b.version, c.version), (2, 3, 2));
        // a, b, c's first transitions in one txn; a's second in the next;
        // b and c's second together, once b was read again.
        assert_eq!(a.create_revision, b.create_revision);
        assert_eq!(b.create_revision, c.create_revision);
        assert!(a.mod_revision > a.create_revision);
        assert_eq!(b.mod_revision, c.mod_revision);
        assert!(
            b.mod_revision > a.mod_revision + 1,
            "b rewritten after the other's"
        );
        for kv in [a, b, c] {
            let r = Record::from_json(&kv.value).expect("a record");
            assert_eq!(r.state, State::Stopped);
            assert_eq!(r.writer, publisher.writer);
        }
        // Each instance's transitions as the reader tells them (a first
        // start after `created`), in order.
        for id in ["a", "b", "c"] {
            let kinds: Vec<_> = read
                .iter()
                .filter(|e| e.id.as_str().rsplit('/').next() == Some(id))
                .map(|e| e.kind)
                .collect();
            assert_eq!(
                kinds,
                [EventKind::Created, EventKind::Started, EventKind::Stopped],
                "{id}"
            );
        }
    }
}
