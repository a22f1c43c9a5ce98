//! `lookout etcd` against the real 3-member cluster (`cargo xtask engines up
//! etcd`): records written through the gateway in the model's format become
//! `created`/`started`/`stopped`/`removed` lines with the publisher's origin
//! and the source as `host`; `--source` filters; a restarted lookout lists
//! the present. The round trip: dockerd → `lookout docker --publish` →
//! `lookout etcd --json` says what `lookout docker --json` says; a
//! restarted publisher writes only what changed meanwhile, as `resync`.

// Test code reads the child's pipes on threads; only library crates may not spawn.
#![allow(clippy::disallowed_methods)]

mod common;

use std::time::{Duration, Instant};

use common::{Containers, Process, http_get, unique};
use lookout_e2e::engines;
use lookout_etcd::model::{Record, RecordEvent, State, instance_key};
use serde_json::Value;

/// The etcd cluster, up, and its lock (shared: these tests break nothing);
/// `None` without engines.
fn require_etcd() -> Option<engines::EngineLock> {
    engines::require("etcd", false, engines::etcd_up)
}

/// A client of the cluster, and a runtime to drive it.
fn client() -> (lookout_etcd::Client, tokio::runtime::Runtime) {
    let endpoints =
        lookout_etcd::EtcdEndpoint::parse_list(&engines::etcd_endpoints()).expect("endpoints");
    let client = lookout_etcd::Client::new(endpoints, Duration::from_secs(5)).expect("a client");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    (client, rt)
}

/// Deletes every key under a test's prefix when the test ends.
struct Cleanup(String);

impl Drop for Cleanup {
    fn drop(&mut self) {
        let key = format!("{}/", self.0).into_bytes();
        let end = lookout_etcd::prefix_range_end(&key);
        let (client, rt) = client();
        if let Err(e) = rt.block_on(client.delete_range(&key, &end)) {
            eprintln!("etcd: could not delete the keys under {}: {e}", self.0);
        }
    }
}

/// Puts the record of `source`/`instance` under `prefix`, as a publisher
/// would write it.
fn put(
    prefix: &str,
    source: &str,
    instance: &str,
    state: State,
    origin: &str,
    ready: Option<bool>,
) {
    let kind = match state {
        State::Running => "started",
        State::Stopped => "stopped",
        State::Removed => "removed",
    };
    let mut record = Record::new(
        "docker",
        state,
        RecordEvent::new(kind, origin, "2026-12-03T10:00:00.25Z"),
    );
    record.ready = ready;
    record.uid = Some(format!("uid-{instance}"));
    record.labels = lookout_core::Labels::from([("app".to_owned(), instance.to_owned())]);
    record.writer = "lookout-cli tests".into();
    let value = serde_json::to_vec(&record).expect("encodes");
    let key = instance_key(prefix, source, instance);
    let (client, rt) = client();
    rt.block_on(client.put(key.as_bytes(), &value, 0))
        .unwrap_or_else(|e| panic!("put {key}: {e}"));
}

/// `host instance kind origin` of an event line, checking what every line says.
fn brief(v: &Value) -> String {
    assert_eq!(v["provider"], "etcd", "{v}");
    assert!(v["labels"].is_object(), "labels: {v}");
    format!(
        "{} {} {} {}",
        v["host"].as_str().unwrap_or("-"),
        v["instance"].as_str().unwrap_or("-"),
        v["kind"].as_str().unwrap_or("-"),
        v["origin"].as_str().unwrap_or("-"),
    )
}

fn lookout(prefix: &str, extra: &[&str]) -> Process {
    common::lookout_etcd(&engines::etcd_endpoints(), prefix, extra)
}

#[test]
fn records_become_lines_with_the_publishers_origin_and_the_source_as_host() {
    let Some(_lock) = require_etcd() else { return };
    let prefix = unique("etcd", "lines");
    let _cleanup = Cleanup(prefix.clone());
    put(&prefix, "h1", "web", State::Running, "live", Some(true));
    let mut p = lookout(&prefix, &["--initial", "--readiness"]);
    let connected = p.connected();
    assert_eq!(connected["instances"], 1, "{connected}");
    assert_eq!(connected["from"], "--endpoints", "{connected}");
    let initial: Vec<Value> = (0..3).map(|_| p.event()).collect();
    assert_eq!(
        initial.iter().map(brief).collect::<Vec<_>>(),
        [
            "h1 web created initial",
            "h1 web started initial",
            "h1 web ready initial"
        ]
    );
    assert_eq!(
        initial[2]["ready"], true,
        "readiness as told: {}",
        initial[2]
    );

    put(&prefix, "h2", "db", State::Stopped, "live", None);
    put(&prefix, "h1", "web", State::Stopped, "live", Some(false));
    put(&prefix, "h2", "db", State::Running, "resync", None);
    put(&prefix, "h1", "web", State::Removed, "live", None);
    let lines: Vec<Value> = (0..4).map(|_| p.event()).collect();
    assert_eq!(
        lines.iter().map(brief).collect::<Vec<_>>(),
        [
            "h2 db created live",
            "h1 web stopped live",
            "h2 db started resync",
            "h1 web removed live",
        ]
    );
    assert_eq!(
        lines[1]["at"], "2026-12-03T10:00:00.250000000Z",
        "a live line carries the publisher's time"
    );
}

#[test]
fn source_filters_and_a_restarted_lookout_lists_the_present() {
    let Some(_lock) = require_etcd() else { return };
    let prefix = unique("etcd", "source");
    let _cleanup = Cleanup(prefix.clone());
    put(&prefix, "h1", "a", State::Running, "live", None);
    put(&prefix, "h2", "b", State::Running, "live", None);
    let mut p = lookout(&prefix, &["--source", "h1"]);
    assert_eq!(p.connected()["instances"], 1);
    put(&prefix, "h2", "b", State::Stopped, "live", None);
    put(&prefix, "h1", "a", State::Stopped, "live", None);
    assert_eq!(brief(&p.event()), "h1 a stopped live", "h2 is not watched");
    p.signal("TERM");
    assert!(p.exit_within(Duration::from_secs(10)).success());
    drop(p);

    // A new lookout has no cursor: it lists, and tells the present only
    // with --initial.
    put(&prefix, "h1", "c", State::Running, "live", None);
    let mut p = lookout(&prefix, &["--initial"]);
    assert_eq!(p.connected()["instances"], 3);
    let mut present: Vec<String> = (0..4).map(|_| brief(&p.event())).collect();
    present.sort();
    assert_eq!(
        present,
        [
            "h1 a created initial",
            "h1 c created initial",
            "h1 c started initial",
            "h2 b created initial",
        ]
    );
    // Then live, nothing else before.
    put(&prefix, "h1", "a", State::Running, "live", None);
    assert_eq!(brief(&p.event()), "h1 a started live");
}

/// `--prefix /P` names the keys `--publish etcd://HOST/P` writes (`P/…`),
/// and a prefix that holds no key at all is said on stderr, once, while the
/// watch goes on (a record written then is told).
#[test]
fn a_leading_slash_names_the_same_keys_and_an_empty_prefix_is_said() {
    let Some(_lock) = require_etcd() else { return };
    let prefix = unique("etcd", "slash");
    let _cleanup = Cleanup(prefix.clone());
    put(&prefix, "h1", "web", State::Running, "live", None);
    let mut p = lookout(&format!("/{prefix}/"), &[]);
    assert_eq!(p.connected()["instances"], 1, "`/{prefix}/` is `{prefix}`");
    assert!(
        !p.stderr_seen.iter().any(|l| l.contains("warning")),
        "{:?}",
        p.stderr_seen
    );
    drop(p);

    let empty = unique("etcd", "empty");
    let _cleanup_empty = Cleanup(empty.clone());
    let mut p = lookout(&empty, &[]);
    // Both, in either order (the count is asked beside the watch).
    let (mut warning, mut connected) = (None, None);
    while warning.is_none() || connected.is_none() {
        let v = p.stderr("warning and connected", |v| {
            v.get("warning").is_some() || v["status"] == "connected"
        });
        if v.get("warning").is_some() {
            warning = Some(v);
        } else {
            connected = Some(v);
        }
    }
    let (warning, connected) = (warning.unwrap_or_default(), connected.unwrap_or_default());
    let said = warning["warning"].as_str().unwrap_or_default();
    assert!(said.contains(&format!("`{empty}/`")), "{warning}");
    assert!(
        said.contains(&format!("etcd://HOST:PORT/{empty}")),
        "{warning}"
    );
    assert_eq!(connected["instances"], 0);
    put(&empty, "h1", "db", State::Stopped, "live", None);
    assert_eq!(brief(&p.event()), "h1 db created live");
}

/// A key's mod revision (0: none).
fn mod_revision(key: &str) -> i64 {
    key_revisions(key).0
}

/// A key's mod revision and version (0: none).
fn key_revisions(key: &str) -> (i64, i64) {
    let (client, rt) = client();
    rt.block_on(client.range(key.as_bytes(), &[], 0, 0))
        .unwrap_or_else(|e| panic!("range {key}: {e}"))
        .kvs
        .first()
        .map_or((0, 0), |kv| (kv.mod_revision, kv.version))
}

/// The event line without what differs by design between the engine's and
/// etcd's: `provider` and `host`.
fn comparable(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(o) = v.as_object_mut() {
        o.remove("provider");
        o.remove("host");
    }
    v
}

#[test]
fn published_docker_events_read_back_from_etcd_are_the_same() {
    let Some(_docker) = common::require_docker(false) else {
        return;
    };
    let Some(_lock) = require_etcd() else { return };
    let prefix = unique("etcd", "publish");
    let _cleanup = Cleanup(prefix.clone());
    let label = format!("lookout.etcd={prefix}");
    let mut docker = publisher(&prefix, "rt", &label);
    docker.connected();
    let mut etcd = lookout(&prefix, &[]);
    etcd.connected();

    let a = format!("{prefix}-a");
    let c = format!("{prefix}-c");
    let _containers = Containers(vec![a.clone(), c.clone(), format!("{prefix}-b")]);
    engines::docker_create_test_container(&a, &["--label", &label]).expect("create a");
    engines::docker(&["start", &a]).expect("start a");
    engines::docker(&["stop", "-t", "0", &a]).expect("stop a");
    engines::docker(&["rm", &a]).expect("rm a");
    engines::docker_create_test_container(&c, &["--label", &label]).expect("create c");
    engines::docker(&["start", &c]).expect("start c");
    let from_docker: Vec<Value> = (0..7).map(|_| docker.event()).collect();
    let from_etcd: Vec<Value> = (0..7).map(|_| etcd.event()).collect();
    for (d, e) in from_docker.iter().zip(&from_etcd) {
        assert_eq!(e["host"], "rt", "{e}");
        assert_eq!(comparable(d), comparable(e), "docker: {d}\netcd: {e}");
    }
    assert_eq!(
        from_etcd.iter().map(brief).collect::<Vec<_>>(),
        [
            format!("rt {a} created live"),
            format!("rt {a} started live"),
            format!("rt {a} stopping live"),
            format!("rt {a} stopped live"),
            format!("rt {a} removed live"),
            format!("rt {c} created live"),
            format!("rt {c} started live"),
        ]
    );

    // The publisher's status, on its lease while it runs; gone at its exit.
    let status = lookout_etcd::model::status_key(&prefix, "rt");
    assert!(mod_revision(&status) > 0, "{status} while publishing");
    // The publisher goes; b comes meanwhile; c does not change.
    docker.signal("TERM");
    assert!(docker.exit_within(Duration::from_secs(10)).success());
    drop(docker);
    assert_eq!(mod_revision(&status), 0, "{status} deleted at exit");
    let c_key = instance_key(&prefix, "rt", &c);
    let (c_written, c_version) = key_revisions(&c_key);
    let b = format!("{prefix}-b");
    engines::docker_create_test_container(&b, &["--label", &label]).expect("create b");
    engines::docker(&["start", &b]).expect("start b");
    let mut docker = publisher(&prefix, "rt", &label);
    docker.connected();
    // Only the difference, as resync (b), then live again.
    assert_eq!(brief(&etcd.event()), format!("rt {b} created resync"));
    assert_eq!(brief(&etcd.event()), format!("rt {b} started resync"));
    assert_eq!(
        mod_revision(&c_key),
        c_written,
        "unchanged c not written again"
    );
    engines::docker(&["stop", "-t", "0", &c]).expect("stop c");
    assert_eq!(brief(&etcd.event()), format!("rt {c} stopping live"));
    assert_eq!(brief(&etcd.event()), format!("rt {c} stopped live"));
    let (c_now, c_versions) = key_revisions(&c_key);
    assert!(c_now > c_written, "c written for its stop");
    assert_eq!(
        c_versions,
        c_version + 2,
        "c written twice since the restart (its stop request, its stop), not at the restart"
    );
    drop(docker);
}

/// A publisher whose etcd accepts connections and never answers (a
/// listener that never accepts: the kernel completes each connection into
/// its backlog): the run still prints every transition as it comes — the
/// writes wait on a task of their own, not in the feed. Written in line,
/// each of the 9 transitions would wait 5 s (the client's bound) for etcd
/// first: 45 s at least. And at SIGTERM it exits within its grace.
#[test]
fn a_publisher_whose_etcd_does_not_answer_prints_every_transition_as_it_comes() {
    let Some(_docker) = common::require_docker(false) else {
        return;
    };
    let hole = std::net::TcpListener::bind("127.0.0.1:0").expect("a listener");
    let target = format!("etcd://{}", hole.local_addr().expect("its address"));
    let prefix = unique("etcd", "hole");
    let label = format!("lookout.etcd={prefix}");
    let args = [
        "docker",
        "--json",
        "--label",
        &label,
        "--publish",
        &target,
        "--source",
        "hole",
    ];
    let mut docker = Process::spawn(&args, &[]);
    // (The baseline read at start waits out the client's bound first.)
    docker.connected();
    let names: Vec<String> = (0..3).map(|i| format!("{prefix}-{i}")).collect();
    let _containers = Containers(names.clone());
    let started = Instant::now();
    for name in &names {
        engines::docker_create_test_container(name, &["--label", &label]).expect("create");
        engines::docker(&["start", name]).expect("start");
        engines::docker(&["stop", "-t", "0", name]).expect("stop");
    }
    // `docker stop` asks first: `stopping` (its SIGKILL), then `stopped`.
    let seen: Vec<String> = (0..12)
        .map(|_| {
            let e = docker.event();
            format!(
                "{} {}",
                e["instance"].as_str().unwrap_or("?"),
                e["kind"].as_str().unwrap_or("?")
            )
        })
        .collect();
    let took = started.elapsed();
    let want: Vec<String> = names
        .iter()
        .flat_map(|n| ["created", "started", "stopping", "stopped"].map(|k| format!("{n} {k}")))
        .collect();
    assert_eq!(seen, want);
    assert!(
        took < Duration::from_secs(25),
        "12 transitions took {took:?} behind an etcd that does not answer (in line: ≥ 60 s)"
    );
    docker.signal("TERM");
    let exited = docker.exit_within(Duration::from_secs(15));
    assert_eq!(exited.code(), Some(0), "{:?}", docker.stderr_seen);
    drop(hole);
}

/// Polls `done` (every 50 ms) until it holds, within `bound`.
fn wait_until(what: &str, bound: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + bound;
    while !done() {
        assert!(Instant::now() < deadline, "{what}: not within {bound:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `lookout docker --publish` of the containers labelled `label`, as
/// source `source` under `prefix`.
fn publisher(prefix: &str, source: &str, label: &str) -> Process {
    let target = format!(
        "etcd://{}/{prefix}",
        engines::etcd_endpoints().replace("http://", "")
    );
    Process::spawn(
        &[
            "docker",
            "--json",
            "--label",
            label,
            "--publish",
            &target,
            "--source",
            source,
        ],
        &[],
    )
}

/// Nothing on the process's stdout now.
fn no_event_line(p: &Process) -> Option<String> {
    p.out.as_ref().and_then(|out| out.try_recv().ok())
}

/// A publisher killed -9 stops renewing its status key's 10 s lease:
/// `lookout etcd` says its source is disconnected once etcd deletes the
/// key (the key's absence read side by side), with no event line meanwhile
/// (its instances are kept as they were), and connected again when a
/// publisher of that source runs again, after the `resync` of what changed.
#[test]
fn a_publisher_killed_9_is_disconnected_at_the_consumer_then_connected_again() {
    let Some(_docker) = common::require_docker(false) else {
        return;
    };
    let Some(_lock) = require_etcd() else { return };
    let prefix = unique("etcd", "dead");
    let _cleanup = Cleanup(prefix.clone());
    let label = format!("lookout.etcd={prefix}");
    let (a, b) = (format!("{prefix}-a"), format!("{prefix}-b"));
    let _containers = Containers(vec![a.clone(), b.clone()]);
    engines::docker_create_test_container(&a, &["--label", &label]).expect("create a");
    engines::docker(&["start", &a]).expect("start a");
    let mut first = publisher(&prefix, "dead", &label);
    first.connected();
    let status = lookout_etcd::model::status_key(&prefix, "dead");
    // Its records first, then its status key.
    wait_until(
        "the publisher's status key",
        Duration::from_secs(15),
        || mod_revision(&status) > 0,
    );
    let mut etcd = lookout(&prefix, &[]);
    assert_eq!(etcd.connected()["instances"], 1);
    let up = etcd.stderr("the publisher's status", |v| v["host"] == "dead");
    assert_eq!(up["status"], "connected", "{up}");
    assert_eq!(up["instances"], 1, "{up}");
    assert!(
        up["writer"]
            .as_str()
            .is_some_and(|w| w.ends_with(&format!(" pid {}", first.pid()))),
        "{up}"
    );

    first.signal("KILL");
    let killed = Instant::now();
    first.exit_within(Duration::from_secs(5));
    drop(first);
    assert!(
        mod_revision(&status) > 0,
        "the key outlives its publisher until the lease expires"
    );
    let down = etcd.stderr("the publisher's disconnection", |v| v["host"] == "dead");
    let after = killed.elapsed();
    assert_eq!(mod_revision(&status), 0, "{status} gone in etcd too");
    assert_eq!(down["status"], "disconnected", "{down}");
    assert_eq!(down["instances"], 1, "its instance kept: {down}");
    assert!(
        after <= Duration::from_secs(20),
        "a 10 s lease, expired {after:?} after the kill"
    );
    assert_eq!(no_event_line(&etcd), None, "no event invented");
    eprintln!("a publisher killed -9: its source disconnected {after:.1?} after the kill");

    // Meanwhile b comes; a new publisher tells it as resync, then its
    // status: connected again.
    engines::docker_create_test_container(&b, &["--label", &label]).expect("create b");
    engines::docker(&["start", &b]).expect("start b");
    let mut second = publisher(&prefix, "dead", &label);
    second.connected();
    assert_eq!(brief(&etcd.event()), format!("dead {b} created resync"));
    assert_eq!(brief(&etcd.event()), format!("dead {b} started resync"));
    let back = etcd.stderr("the publisher back", |v| v["host"] == "dead");
    assert_eq!(back["status"], "connected", "{back}");
    assert_eq!(back["instances"], 2, "{back}");
    assert!(mod_revision(&status) > 0);
    // And live after it.
    engines::docker(&["stop", "-t", "0", &a]).expect("stop a");
    assert_eq!(brief(&etcd.event()), format!("dead {a} stopping live"));
    assert_eq!(brief(&etcd.event()), format!("dead {a} stopped live"));
    assert_eq!(no_event_line(&etcd), None);
    second.signal("TERM");
    assert!(second.exit_within(Duration::from_secs(10)).success());
}

/// Each key's values in the order written (range reads at each previous
/// mod revision, back to the key's creation): `(mod revision, record)`.
fn history(key: &str) -> Vec<(i64, Record)> {
    let (client, rt) = client();
    let mut chain = Vec::new();
    let mut at = 0;
    for _ in 0..100 {
        let page = rt
            .block_on(client.range(key.as_bytes(), &[], at, 0))
            .unwrap_or_else(|e| panic!("range {key} at {at}: {e}"));
        let Some(kv) = page.kvs.first() else { break };
        let record = Record::from_json(&kv.value)
            .unwrap_or_else(|e| panic!("{key} at {}: not a record ({e})", kv.mod_revision));
        chain.push((kv.mod_revision, record));
        if kv.version <= 1 {
            break;
        }
        at = kv.mod_revision - 1;
    }
    chain.reverse();
    chain
}

/// The state a record says, as `docker ps -a` would: `running`/`stopped`
/// with the container id, or `None` when removed.
fn said(r: &Record) -> Option<(&'static str, String)> {
    let state = match r.state {
        State::Running => "running",
        State::Stopped => "stopped",
        State::Removed => return None,
    };
    Some((state, r.uid.clone().unwrap_or_default()))
}

/// The engine's own client: each container labelled `label` as
/// `running`/`stopped` with its id.
fn docker_ps(label: &str) -> std::collections::BTreeMap<String, (&'static str, String)> {
    let out = engines::docker(&[
        "ps",
        "-a",
        "--no-trunc",
        "--filter",
        &format!("label={label}"),
        "--format",
        "{{.Names}}\t{{.State}}\t{{.ID}}",
    ])
    .expect("docker ps");
    out.lines()
        .filter_map(|l| {
            let mut f = l.split('\t');
            let (name, state, id) = (f.next()?, f.next()?, f.next()?);
            let state = if state == "running" {
                "running"
            } else {
                "stopped"
            };
            Some((name.to_owned(), (state, id.to_owned())))
        })
        .collect()
}

/// Checks one key's chain of values, written by `writers` (a killed
/// publisher's, then its successor's): no state twice in a row; the
/// successor wrote at most once, as `resync`; the last value says `now`
/// (`docker ps -a`). Whether the successor wrote it, and whether `now`
/// differs from what the killed publisher left.
fn check_chain(
    name: &str,
    chain: &[(i64, Record)],
    [first, second]: &[&str; 2],
    now: Option<&(&'static str, String)>,
) -> (bool, bool) {
    assert!(!chain.is_empty(), "{name}: no key");
    for pair in chain.windows(2) {
        let ((r1, a), (r2, b)) = (&pair[0], &pair[1]);
        // A stop request (`stopping`) is news for a running container.
        let told = |r: &Record| (said(r), r.event.kind == "stopping");
        assert_ne!(
            told(a),
            told(b),
            "{name}: the same state twice in a row, at {r1} and {r2}: {chain:?}"
        );
    }
    let (before, after): (Vec<_>, Vec<_>) =
        chain.iter().partition(|(_, r)| r.writer.ends_with(first));
    assert!(
        after.iter().all(|(_, r)| r.writer.ends_with(second)),
        "{name}: written by the two publishers only: {chain:?}"
    );
    let left = before.last().and_then(|(_, r)| said(r));
    let again = match after.as_slice() {
        [] => false,
        [(revision, r)] => {
            assert_eq!(r.event.origin, "resync", "{name} at {revision}: {r:?}");
            true
        }
        more => panic!(
            "{name}: written {} times since the restart: {more:?}",
            more.len()
        ),
    };
    let last = chain.last().map(|(_, r)| r);
    assert_eq!(
        last.and_then(said).as_ref(),
        now,
        "{name}: etcd and `docker ps -a`"
    );
    (again, left.as_ref() != now)
}

/// A publisher killed -9 in the middle of a workload, containers changed
/// while it is dead, then a publisher started again: no key's chain of
/// values holds the same state twice in a row; the restarted publisher
/// writes each key that differs from what its predecessor left, once, as
/// `resync`, and nothing else (nothing from before told again as `live`);
/// and etcd then says what `docker ps -a` says.
#[test]
fn a_publisher_killed_9_mid_churn_writes_no_transition_twice_and_the_difference_once() {
    let Some(_docker) = common::require_docker(false) else {
        return;
    };
    let Some(_lock) = require_etcd() else { return };
    let prefix = unique("etcd", "churn");
    let _cleanup = Cleanup(prefix.clone());
    let label = format!("lookout.etcd={prefix}");
    // 0 to 5 change; 6 does not once published.
    let names: Vec<String> = (0..7).map(|i| format!("{prefix}-{i}")).collect();
    let _containers = Containers(names.clone());
    let docker = |args: &[&str]| {
        engines::docker(args).unwrap_or_else(|e| panic!("docker {args:?}: {e}"));
    };
    let key = |name: &str| instance_key(&prefix, "churn", name);

    let mut first = publisher(&prefix, "churn", &label);
    first.connected();
    for n in [&names[6]].into_iter().chain(&names[..4]) {
        engines::docker_create_test_container(n, &["--label", &label]).expect("create");
        docker(&["start", n]);
    }
    docker(&["stop", "-t", "0", &names[0]]);
    docker(&["stop", "-t", "0", &names[1]]);
    // Published so far (bounded): then the kill, in the middle of more.
    wait_until("the first stops published", Duration::from_secs(20), || {
        history(&key(&names[1]))
            .last()
            .is_some_and(|(_, r)| r.state == State::Stopped)
    });
    assert!(
        history(&key(&names[6]))
            .last()
            .is_some_and(|(_, r)| r.state == State::Running),
        "6 published before 1's stop"
    );
    docker(&["stop", "-t", "0", &names[2]]);
    first.signal("KILL");
    docker(&["stop", "-t", "0", &names[3]]);
    first.exit_within(Duration::from_secs(5));
    let first_writer = format!(" pid {}", first.pid());
    drop(first);

    // While no one publishes.
    docker(&["start", &names[0]]);
    docker(&["rm", &names[1]]);
    docker(&["start", &names[2]]);
    engines::docker_create_test_container(&names[4], &["--label", &label]).expect("create");
    docker(&["start", &names[4]]);
    engines::docker_create_test_container(&names[5], &["--label", &label]).expect("create");

    let killed_at = {
        let (client, rt) = client();
        rt.block_on(client.range(b"-", &[], 0, 1))
            .expect("the store's revision")
            .header
            .revision
    };
    let mut second = publisher(&prefix, "churn", &label);
    second.connected();
    let second_writer = format!(" pid {}", second.pid());
    // Its status key comes after its first snapshot's writes.
    let status = lookout_etcd::model::status_key(&prefix, "churn");
    wait_until(
        "the new publisher's status",
        Duration::from_secs(20),
        || mod_revision(&status) > killed_at,
    );

    let present = docker_ps(&label);
    let mut rewritten = Vec::new();
    let mut changed = Vec::new();
    for name in &names {
        let now = present.get(name.as_str());
        let (again, differed) = check_chain(
            name,
            &history(&key(name)),
            &[&first_writer, &second_writer],
            now,
        );
        if again {
            rewritten.push(name.clone());
        }
        if differed {
            changed.push(name.clone());
        }
    }
    assert_eq!(
        rewritten, changed,
        "written again: exactly what changed since the killed publisher's last write"
    );
    assert!(
        changed.len() >= 4 && !changed.contains(&names[6]),
        "0 started, 1 removed, 4 and 5 created while dead (2 and 3 too when their \
         stop was published), 6 unchanged: {changed:?}"
    );
    eprintln!(
        "publisher killed -9 mid-churn: {} of {} keys written again, as resync",
        changed.len(),
        names.len()
    );
    second.signal("TERM");
    assert!(second.exit_within(Duration::from_secs(10)).success());
}

/// Polls `/healthz` (every 100 ms, within `bound`, doing `meanwhile`
/// between two) until it answers `code` with a body that satisfies `done`:
/// that body.
fn healthz_until(
    addr: &str,
    code: u16,
    bound: Duration,
    mut meanwhile: impl FnMut(),
    done: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = Instant::now() + bound;
    loop {
        let (got, body) = http_get(addr, "/healthz");
        let v: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
        if got == code && done(&v) {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "/healthz is not {code} as awaited within {bound:?}: {got} {body}"
        );
        meanwhile();
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `lookout_publisher_connected{host="SOURCE"}` of `/metrics`.
fn publisher_gauge(addr: &str, source: &str) -> Option<String> {
    let (code, text) = http_get(addr, "/metrics");
    assert_eq!(code, 200, "{text}");
    let series = format!("lookout_publisher_connected{{host=\"{source}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&series).map(str::to_owned))
}

/// The `data:` of the SSE `event: status` frames of `/events` that say
/// `host`, as they come (read on a thread).
fn status_frames(addr: &str) -> std::sync::mpsc::Receiver<Value> {
    use std::io::{BufRead, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap_or_else(|e| panic!("{addr}: {e}"));
    write!(
        s,
        "GET /events HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\n\r\n"
    )
    .expect("a request");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut event = String::new();
        for line in std::io::BufReader::new(s).lines() {
            let Ok(line) = line else { return };
            if let Some(e) = line.strip_prefix("event: ") {
                e.clone_into(&mut event);
            } else if let Some(data) = line.strip_prefix("data: ")
                && event == "status"
                && let Ok(v) = serde_json::from_str::<Value>(data)
                && v.get("host").is_some()
                && tx.send(v).is_err()
            {
                return;
            }
        }
    });
    rx
}

/// The next status frame of `host`, within 30 s.
fn next_status_of(frames: &std::sync::mpsc::Receiver<Value>, host: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let v = frames
            .recv_timeout(left)
            .unwrap_or_else(|e| panic!("no status frame of {host}: {e}"));
        if v["host"] == host {
            return v;
        }
    }
}

/// Writes `source`'s status key on a fresh lease of `ttl` seconds, as a
/// publisher does: the lease's id.
fn put_status(prefix: &str, source: &str, ttl: i64) -> i64 {
    let (client, rt) = client();
    let key = lookout_etcd::model::status_key(prefix, source);
    let value = serde_json::json!({"connected": true, "writer": "lookout-cli tests"}).to_string();
    rt.block_on(async {
        let lease = client.lease_grant(ttl).await.expect("a lease").id;
        client
            .put(key.as_bytes(), value.as_bytes(), lease)
            .await
            .unwrap_or_else(|e| panic!("put {key}: {e}"));
        lease
    })
}

/// `lookout etcd --serve`: `/healthz` is 200 while the watch is synced and
/// every source's publisher status key is there; once a key's lease expires
/// (not renewed), 503 naming that source (in the several-engines shape),
/// `/events` (SSE) says it disconnected, `/metrics` says 0, stderr says it
/// as without `--serve`; the key written again: 200 again. A source listed
/// with records and no status key has no publisher: 503 naming it.
///
/// It fails if `/healthz` ignored the publishers (200 throughout), if the
/// statuses were not served (no frame, no gauge), or if a 503 did not name
/// the source.
#[test]
fn serve_healthz_names_a_source_whose_publisher_lease_expired() {
    const TTL: i64 = 5;
    let Some(_lock) = require_etcd() else { return };
    let prefix = unique("etcd", "serve");
    let _cleanup = Cleanup(prefix.clone());
    put(&prefix, "pub", "web", State::Running, "live", None);
    let lease = put_status(&prefix, "pub", TTL);
    let renew = || {
        let (client, rt) = client();
        let left = rt.block_on(client.lease_keepalive(lease)).expect("renewed");
        assert!(left > 0, "the lease lives while renewed");
    };
    let mut etcd = lookout(&prefix, &["--serve", "127.0.0.1:0"]);
    let serving = etcd.stderr("serving", |v| v["status"] == "serving");
    let addr = serving["addr"].as_str().expect("an address").to_owned();

    // Renewed until lookout is up: 200, the watch then the source.
    let up = healthz_until(&addr, 200, Duration::from_secs(30), renew, |_| true);
    renew();
    assert_eq!(up["status"], "connected", "{up}");
    assert_eq!(up["unavailable"], serde_json::json!([]), "{up}");
    assert_eq!(up["sources"][0]["status"], "connected", "the watch: {up}");
    assert_eq!(up["sources"][1]["host"], "pub", "{up}");
    assert_eq!(up["sources"][1]["status"], "connected", "{up}");
    assert_eq!(up["sources"][1]["instances"], 1, "{up}");
    let frames = status_frames(&addr);
    let told = next_status_of(&frames, "pub");
    assert_eq!(told["status"], "connected", "the present first: {told}");
    assert_eq!(publisher_gauge(&addr, "pub").as_deref(), Some("1"));
    let line = etcd.stderr("the publisher's status", |v| v["host"] == "pub");
    assert_eq!(line["status"], "connected", "{line}");

    // Not renewed: gone within the lease and a margin.
    let stopped = Instant::now();
    let bound = Duration::from_secs(TTL as u64 + 10);
    let down = healthz_until(&addr, 503, bound, || {}, |_| true);
    let after = stopped.elapsed();
    assert_eq!(down["status"], "unavailable", "{down}");
    assert_eq!(down["unavailable"], serde_json::json!(["pub"]), "{down}");
    assert_eq!(
        down["sources"][0]["status"], "connected",
        "the watch: {down}"
    );
    assert_eq!(down["sources"][1]["status"], "disconnected", "{down}");
    assert_eq!(down["sources"][1]["instances"], 1, "kept: {down}");
    assert_eq!(
        mod_revision(&lookout_etcd::model::status_key(&prefix, "pub")),
        0,
        "the key is gone in etcd too"
    );
    let told = next_status_of(&frames, "pub");
    assert_eq!(told["status"], "disconnected", "{told}");
    assert_eq!(publisher_gauge(&addr, "pub").as_deref(), Some("0"));
    let line = etcd.stderr("the publisher gone", |v| v["host"] == "pub");
    assert_eq!(line["status"], "disconnected", "{line}");
    assert_eq!(no_event_line(&etcd), None, "no event invented");
    eprintln!("--serve: /healthz 503 naming the source {after:.1?} after its last renewal");

    // Written again: 200 again.
    put_status(&prefix, "pub", 60);
    let back = healthz_until(&addr, 200, Duration::from_secs(10), || {}, |_| true);
    assert_eq!(back["sources"][1]["status"], "connected", "{back}");
    assert_eq!(next_status_of(&frames, "pub")["status"], "connected");
    assert_eq!(publisher_gauge(&addr, "pub").as_deref(), Some("1"));
    drop(etcd);

    // A source listed with records and no status key: no publisher.
    put(&prefix, "orphan", "db", State::Stopped, "live", None);
    let mut etcd = lookout(&prefix, &["--serve", "127.0.0.1:0"]);
    let serving = etcd.stderr("serving", |v| v["status"] == "serving");
    let addr = serving["addr"].as_str().expect("an address").to_owned();
    // Before the watch has listed, a 503 names nobody: until it names orphan.
    let orphan = healthz_until(
        &addr,
        503,
        Duration::from_secs(30),
        || {},
        |v| v["unavailable"] == serde_json::json!(["orphan"]),
    );
    assert_eq!(orphan["sources"][0]["status"], "connected", "{orphan}");
    let named: Vec<&Value> = orphan["sources"]
        .as_array()
        .expect("sources")
        .iter()
        .filter(|s| s["host"] == "orphan")
        .collect();
    assert_eq!(named.len(), 1, "{orphan}");
    assert_eq!(named[0]["status"], "disconnected", "{orphan}");
}

/// Puts a record with a reason (`why`: its JSON fields, each `"key":value`
/// after a comma) of `event_kind`, as a publisher of issue #47 writes it.
fn put_why(prefix: &str, source: &str, instance: &str, state: State, event_kind: &str, why: &str) {
    let mut record = Record::new(
        "docker",
        state,
        RecordEvent::new(event_kind, "live", "2026-12-03T10:00:00.25Z"),
    );
    record.ready = (state == State::Running).then_some(false);
    record.uid = Some(format!("uid-{instance}"));
    record.labels = lookout_core::Labels::from([("app".to_owned(), instance.to_owned())]);
    record.writer = "lookout-cli tests".into();
    let json = serde_json::to_string(&record).expect("encodes");
    let value = format!("{}{why}}}", json.strip_suffix('}').expect("an object"));
    Record::from_json(value.as_bytes()).expect("a record this version reads");
    let key = instance_key(prefix, source, instance);
    let (client, rt) = client();
    rt.block_on(client.put(key.as_bytes(), value.as_bytes(), 0))
        .unwrap_or_else(|e| panic!("put {key}: {e}"));
}

/// The NDJSON lines of `GET path` (`/events…`) as they come (read on a
/// thread; chunk sizes skipped).
fn ndjson(addr: &str, path: &str) -> std::sync::mpsc::Receiver<Value> {
    use std::io::{BufRead, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap_or_else(|e| panic!("{addr}: {e}"));
    write!(s, "GET {path} HTTP/1.1\r\nHost: {addr}\r\n\r\n").expect("a request");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(s).lines() {
            let Ok(line) = line else { return };
            if let Ok(v) = serde_json::from_str::<Value>(&line)
                && v.is_object()
                && tx.send(v).is_err()
            {
                return;
            }
        }
    });
    rx
}

/// The reason's fields of a JSON event or instance, and nothing else of it.
fn why(v: &Value) -> Value {
    let keys = [
        "outcome",
        "exit_code",
        "signal",
        "oom",
        "restarting",
        "failed",
        "message",
        "stopping",
    ];
    Value::Object(
        keys.iter()
            .filter_map(|k| Some(((*k).to_owned(), v.get(*k)?.clone())))
            .collect(),
    )
}

/// Issue #47 through `lookout etcd --serve`: records with reasons (a stop
/// by the OOM killer, a failing workload, a stop under way) are told with
/// them on stdout (`--json`), on `/events`, and kept on `/instances`
/// (`stopping: true`); a live stop comes with its outcome and is counted in
/// `lookout_stops_total{outcome}`. A record of an older publisher, without
/// these fields, reads as before.
///
/// It fails if a field were dropped on any of the ways, if a running
/// record's stop under way were told as a plain start, or if an old record
/// did not decode.
#[test]
#[allow(clippy::too_many_lines)] // one lookout, asked every way in turn
fn reasons_are_told_on_stdout_events_instances_and_metrics() {
    let Some(_lock) = require_etcd() else { return };
    let prefix = unique("etcd", "why");
    let _cleanup = Cleanup(prefix.clone());
    put_why(
        &prefix,
        "h",
        "job",
        State::Stopped,
        "stopped",
        r#","outcome":"failed","exit_code":137,"signal":"SIGKILL","oom":true,"message":"OOMKilled""#,
    );
    put_why(
        &prefix,
        "h",
        "web",
        State::Running,
        "failing",
        r#","failed":true,"message":"Back-off restarting failed container""#,
    );
    put_why(
        &prefix,
        "h",
        "api",
        State::Running,
        "stopping",
        r#","outcome":"stopped","signal":"SIGTERM""#,
    );
    // An older publisher's record: no reason at all.
    put(&prefix, "h", "old", State::Stopped, "live", None);
    let mut p = lookout(
        &prefix,
        &["--initial", "--readiness", "--serve", "127.0.0.1:0"],
    );
    let serving = p.stderr("serving", |v| v["status"] == "serving");
    let addr = serving["addr"].as_str().expect("an address").to_owned();
    p.connected();
    // api: created, started, stopping; job: created; old: created; web:
    // created, started, failing.
    let events: Vec<Value> = (0..8).map(|_| p.event()).collect();
    let find = |instance: &str, kind: &str| -> Value {
        events
            .iter()
            .find(|e| e["instance"] == instance && e["kind"] == kind)
            .unwrap_or_else(|| panic!("no {instance} {kind} in {events:#?}"))
            .clone()
    };
    let oom = serde_json::json!({"outcome":"failed","exit_code":137,"signal":"SIGKILL","oom":true,"message":"OOMKilled"});
    let failing =
        serde_json::json!({"failed":true,"message":"Back-off restarting failed container"});
    let term = serde_json::json!({"outcome":"stopped","signal":"SIGTERM"});
    assert_eq!(
        why(&find("job", "created")),
        oom,
        "a stopped instance says why"
    );
    assert_eq!(why(&find("web", "failing")), failing);
    assert_eq!(why(&find("web", "started")), serde_json::json!({}));
    assert_eq!(why(&find("api", "stopping")), term);
    assert_eq!(
        why(&find("old", "created")),
        serde_json::json!({}),
        "an old record"
    );

    // /instances keeps the last reason, and says a stop under way.
    let (code, body) = http_get(&addr, "/instances");
    assert_eq!(code, 200, "{body}");
    // One `ready` per instance: a publisher's told readiness is not
    // repeated beside the store's (a JSON reader takes the last of two).
    assert_eq!(
        body.matches("\"ready\":").count(),
        body.matches("\"instance\":").count(),
        "{body}"
    );
    let list: Vec<Value> = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
    let of = |id: &str| {
        list.iter()
            .find(|i| i["instance"] == id)
            .unwrap_or_else(|| panic!("no {id} in {body}"))
            .clone()
    };
    assert_eq!(
        (of("h/job")["state"].clone(), why(&of("h/job"))),
        ("stopped".into(), oom.clone())
    );
    assert_eq!(
        (of("h/web")["ready"].clone(), why(&of("h/web"))),
        (false.into(), failing.clone())
    );
    let mut stopping = term.clone();
    stopping["stopping"] = true.into();
    assert_eq!(
        (of("h/api")["state"].clone(), why(&of("h/api"))),
        ("running".into(), stopping)
    );
    assert_eq!(why(&of("h/old")), serde_json::json!({}));
    // The order of the keys: the reason after the readiness, before the labels.
    let raw = body.find(r#""instance":"h/job""#).expect("job");
    let job = &body[raw..];
    let (o, l) = (job.find(r#""outcome""#), job.find(r#""labels""#));
    assert!(o < l && o.is_some(), "{job}");

    // /events: the same fields in the frames.
    let frames = ndjson(&addr, "/events?initial=true");
    let deadline = Instant::now() + Duration::from_secs(30);
    let web = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let v = frames.recv_timeout(left).expect("the failing in /events");
        // Served, an id is `SOURCE/INSTANCE`.
        if v["instance"] == "h/web" && v["kind"] == "failing" {
            break v;
        }
    };
    assert_eq!(why(&web), failing, "{web}");

    // A live stop: its outcome on stdout, on /events, and in the metrics.
    put_why(
        &prefix,
        "h",
        "web",
        State::Stopped,
        "stopped",
        r#","outcome":"failed","exit_code":1,"restarting":true"#,
    );
    let stopped = p.event();
    assert_eq!(
        (stopped["instance"].clone(), stopped["kind"].clone()),
        ("web".into(), "stopped".into())
    );
    let exit1 = serde_json::json!({"outcome":"failed","exit_code":1,"restarting":true});
    assert_eq!(why(&stopped), exit1);
    let served = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let v = frames.recv_timeout(left).expect("the stop in /events");
        if v["instance"] == "h/web" && v["kind"] == "stopped" {
            break v;
        }
    };
    assert_eq!(why(&served), exit1);
    assert!(served["id"].is_string(), "a resume position: {served}");
    let (code, metrics) = http_get(&addr, "/metrics");
    assert_eq!(code, 200);
    let stops = |outcome: &str| {
        let series = format!("lookout_stops_total{{outcome=\"{outcome}\"}} ");
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(&series).map(str::to_owned))
            .unwrap_or_else(|| panic!("no {series} in\n{metrics}"))
    };
    assert_eq!(stops("failed"), "1");
    for outcome in ["completed", "stopped", "unknown"] {
        assert_eq!(stops(outcome), "0", "{outcome}");
    }
    assert!(metrics.contains("# HELP lookout_stops_total"), "{metrics}");
}
