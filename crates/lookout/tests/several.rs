//! `lookout docker --host NAME=URI …` (repeated): two real dockerds in one
//! run (the second: `cargo xtask engines up docker2`). Every JSON event and
//! status says its `host`; the text lines say `NAME/instance`; one name on
//! both engines is two instances; a name given twice exits 2; and with one
//! source the output stays as it was (no `host`).

// Test code reads the child's pipes on threads; only library crates may not spawn.
#![allow(clippy::disallowed_methods)]

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use lookout_e2e::engines;
use serde_json::Value;

mod common;
use common::{On, Process, WAIT};

/// The events of `lookout` until `done`, bounded.
fn events_until(lookout: &Process, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let deadline = Instant::now() + WAIT;
    let mut seen = Vec::new();
    while !done(&seen) {
        assert!(Instant::now() < deadline, "not within {WAIT:?}: {seen:?}");
        seen.push(lookout.event());
    }
    seen
}

#[test]
fn two_dockerds_in_one_run_each_event_says_its_host() {
    let Some(_locks) = common::require_two_dockerds() else {
        return;
    };
    let name = common::unique("several", "web");
    let label = format!("lookout.several={name}");
    let one = format!("one={}", engines::docker_host());
    let two = format!("two={}", engines::docker2_host());
    let mut lookout = Process::spawn(
        &[
            "docker", "--json", "--label", &label, "--host", &one, "--host", &two,
        ],
        &[],
    );
    let a = lookout.connected();
    let b = lookout.connected();
    let mut hosts = [a["host"].as_str(), b["host"].as_str()];
    hosts.sort_unstable();
    assert_eq!(hosts, [Some("one"), Some("two")], "{a} {b}");
    for c in [&a, &b] {
        assert_eq!(c["instances"], 0, "{c}");
        assert!(c["endpoint"].is_string() && c["from"].is_string(), "{c}");
    }

    let on_one = On::create(engines::docker, &name, &label);
    let on_two = On::create(engines::docker2, &name, &label);
    on_one.run(&["start"]);
    on_two.run(&["start"]);
    on_one.run(&["stop", "-t", "0"]);
    let seen = events_until(&lookout, |seen| seen.len() >= 6);
    let of = |host: &str| -> Vec<&str> {
        seen.iter()
            .filter(|e| e["host"] == host)
            .map(|e| e["kind"].as_str().unwrap_or("?"))
            .collect()
    };
    // `docker stop` asks first: `stopping`, then `stopped` (with why).
    assert_eq!(
        of("one"),
        ["created", "started", "stopping", "stopped"],
        "{seen:?}"
    );
    assert_eq!(of("two"), ["created", "started"], "{seen:?}");
    for e in &seen {
        assert_eq!(e["instance"], name.as_str(), "{e}");
        let why = ["outcome", "exit_code", "signal"];
        let keys: Vec<&str> = e
            .as_object()
            .expect("an object")
            .keys()
            .map(String::as_str)
            .filter(|k| e["kind"] != "stopped" || !why.contains(k))
            .collect();
        assert_eq!(
            keys,
            // (serde_json's map is sorted: the order is the unit tests'.)
            [
                "at", "host", "instance", "kind", "labels", "origin", "provider"
            ],
            "{e}"
        );
    }
    lookout.signal("TERM");
    assert_eq!(lookout.exit_within(Duration::from_secs(5)).code(), Some(0));
}

#[test]
fn text_lines_say_host_slash_instance() {
    let Some(_locks) = common::require_two_dockerds() else {
        return;
    };
    let name = common::unique("several", "text");
    let label = format!("lookout.several={name}");
    let one = format!("one={}", engines::docker_host());
    let two = format!("two={}", engines::docker2_host());
    let mut lookout = Process::spawn(
        &["docker", "--label", &label, "--host", &one, "--host", &two],
        &[],
    );
    let out = lookout.out.take().expect("stdout");
    // Both connected (the text status lines name the source).
    let deadline = Instant::now() + WAIT;
    let mut connected = Vec::new();
    while connected.len() < 2 {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = lookout
            .err
            .recv_timeout(left)
            .unwrap_or_else(|_| panic!("no connected lines: {connected:?}"));
        if line.contains("connected") {
            connected.push(line);
        }
    }
    connected.sort();
    assert!(
        connected[0].starts_with("lookout: docker one: connected")
            && connected[1].starts_with("lookout: docker two: connected"),
        "{connected:?}"
    );
    let on_two = On::create(engines::docker2, &name, &label);
    let line = out.recv_timeout(WAIT).expect("an event line");
    assert!(
        line.contains(&format!("  two/{name}")) && line.contains("created"),
        "{line}"
    );
    drop(on_two);
}

#[test]
fn a_source_name_given_twice_exits_2() {
    let stderr = common::usage_error(&[
        "docker",
        "--host",
        "a=unix:///run/a.sock",
        "--host",
        "a=unix:///run/b.sock",
    ]);
    assert!(stderr.contains("`a` is given twice"), "{stderr}");
}

#[test]
fn one_named_host_is_one_source_without_host_fields() {
    let Some(_locks) = common::require_two_dockerds() else {
        return;
    };
    let one = format!("one={}", engines::docker_host());
    let mut lookout = Process::spawn(
        &[
            "docker",
            "--json",
            "--label",
            "lookout.several=none",
            "--host",
            &one,
        ],
        &[],
    );
    let c = lookout.connected();
    assert!(c.get("host").is_none(), "one source: no host field: {c}");
}

/// A copy of the test bed's kubeconfig with two more contexts, `ctx-a` and
/// `ctx-b`, both of its cluster and user; removed on drop.
struct TwoContexts(common::TempDir);

impl TwoContexts {
    fn new(kubeconfig: &std::path::Path) -> Self {
        let text = std::fs::read_to_string(kubeconfig).expect("the test bed's kubeconfig");
        let first_name = |section: &str| -> String {
            let at = text
                .find(&format!("{section}:\n- name: "))
                .unwrap_or_else(|| panic!("no {section} in the kubeconfig"));
            let rest = &text[at + section.len() + "\n- name: ".len() + 1..];
            rest.lines().next().expect("a name").trim().to_owned()
        };
        let (cluster, user) = (first_name("clusters"), first_name("users"));
        let mut extra = String::new();
        for c in ["ctx-a", "ctx-b"] {
            let _ = write!(
                extra,
                "- name: {c}\n  context:\n    cluster: {cluster}\n    user: {user}\n"
            );
        }
        let text = text.replacen("contexts:\n", &format!("contexts:\n{extra}"), 1);
        let dir = common::TempDir::new("several", "kubeconfig");
        std::fs::write(dir.0.join("kubeconfig"), text).expect("write the kubeconfig");
        Self(dir)
    }

    fn path(&self) -> String {
        self.0.0.join("kubeconfig").display().to_string()
    }
}

/// `lookout k8s --context` twice: one stream of two clusters (here the one
/// test bed through two contexts: each workload is two instances, one per
/// context); an unknown context exits 2 naming the known ones.
#[test]
fn k8s_contexts_in_one_run() {
    let Some(kubeconfig) = lookout_e2e::k8s_util::require() else {
        return;
    };
    let _lock = engines::lock_engine("k8s", false).unwrap_or_else(|e| panic!("{e}"));
    let two = TwoContexts::new(&kubeconfig);
    let kc = two.path();
    let stderr = common::usage_error(&["k8s", "--kubeconfig", &kc, "--context", "nope"]);
    assert!(
        stderr.contains("no context `nope`") && stderr.contains("ctx-a"),
        "{stderr}"
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let fixture = rt.block_on(lookout_e2e::k8s_util::Fixture::new(&kubeconfig));
    let mut lookout = Process::spawn(
        &[
            "k8s",
            "--json",
            "--kubeconfig",
            &kc,
            "--namespace",
            &fixture.ns,
            "--kind",
            "deployment",
            "--context",
            "ctx-a",
            "--context",
            "ctx-b",
        ],
        &[],
    );
    let mut hosts = [
        lookout.connected()["host"].as_str().map(str::to_owned),
        lookout.connected()["host"].as_str().map(str::to_owned),
    ];
    hosts.sort_unstable();
    assert_eq!(hosts, [Some("ctx-a".to_owned()), Some("ctx-b".to_owned())]);
    rt.block_on(fixture.create(lookout_k8s::Kind::Deployment, "web", 1, &[]));
    let id = fixture.id(lookout_k8s::Kind::Deployment, "web");
    let seen = events_until(&lookout, |seen| seen.len() >= 4);
    for host in ["ctx-a", "ctx-b"] {
        let kinds: Vec<&str> = seen
            .iter()
            .filter(|e| e["host"] == host && e["instance"] == id.as_str())
            .map(|e| e["kind"].as_str().unwrap_or("?"))
            .collect();
        assert_eq!(kinds, ["created", "started"], "{host}: {seen:?}");
    }
    rt.block_on(fixture.delete(lookout_k8s::Kind::Deployment, "web"));
    lookout.signal("TERM");
    assert_eq!(lookout.exit_within(Duration::from_secs(5)).code(), Some(0));
}
