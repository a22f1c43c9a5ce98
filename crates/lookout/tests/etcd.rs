//! `lookout etcd` against the real 3-member cluster (`cargo xtask engines up
//! etcd`): records written through the gateway in the model's format become
//! `created`/`started`/`stopped`/`removed` lines with the publisher's origin
//! and the source as `host`; `--source` filters; a restarted lookout lists
//! the present.

// Test code reads the child's pipes on threads; only library crates may not spawn.
#![allow(clippy::disallowed_methods)]

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::{Process, unique};
use lookout_e2e::engines;
use lookout_etcd::model::{Record, RecordEvent, State, instance_key};
use serde_json::Value;

/// The etcd cluster, up, and its lock (shared: these tests break nothing).
fn require_etcd() -> engines::EngineLock {
    let lock = engines::lock_engine("etcd", false).unwrap_or_else(|e| panic!("{e}"));
    if let Err(e) = engines::etcd_up() {
        panic!(
            "etcd is not usable ({e}).\nRun `cargo xtask engines up etcd` first \
             (or run the tests under `cargo xtask ci`)."
        );
    }
    lock
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
    let record = Record {
        provider: "docker".into(),
        state,
        ready,
        uid: Some(format!("uid-{instance}")),
        labels: BTreeMap::from([("app".to_owned(), instance.to_owned())]),
        event: RecordEvent {
            kind: kind.into(),
            origin: origin.into(),
            at: "2026-12-03T10:00:00.25Z".into(),
        },
        writer: "lookout-cli tests".into(),
    };
    let value = serde_json::to_vec(&record).expect("encodes");
    let key = instance_key(prefix, source, instance);
    let endpoints =
        lookout_etcd::Endpoint::parse_list(&engines::etcd_endpoints()).expect("endpoints");
    let client = lookout_etcd::Client::new(endpoints, Duration::from_secs(5)).expect("a client");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    rt.block_on(client.put(key.as_bytes(), &value, 0))
        .unwrap_or_else(|e| panic!("put {key}: {e}"));
}

/// `host instance kind origin` of an event line, checking what every line says.
fn brief(v: &Value) -> String {
    assert_eq!(v["provider"], "etcd", "{v}");
    assert!(v["labels"]["app"].is_string(), "labels: {v}");
    format!(
        "{} {} {} {}",
        v["host"].as_str().unwrap_or("-"),
        v["instance"].as_str().unwrap_or("-"),
        v["kind"].as_str().unwrap_or("-"),
        v["origin"].as_str().unwrap_or("-"),
    )
}

fn lookout(prefix: &str, extra: &[&str]) -> Process {
    let endpoints = engines::etcd_endpoints();
    let mut args = vec![
        "etcd",
        "--endpoints",
        &endpoints,
        "--prefix",
        prefix,
        "--json",
    ];
    args.extend_from_slice(extra);
    Process::spawn(&args, &[])
}

#[test]
fn records_become_lines_with_the_publishers_origin_and_the_source_as_host() {
    let _lock = require_etcd();
    let prefix = unique("etcd", "lines");
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
    let _lock = require_etcd();
    let prefix = unique("etcd", "source");
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
