//! The built `lookout` binary against the real engines: JSON lines checked
//! field by field, status on stderr, exit codes, signals, a closed pipe, and an
//! engine that is down at start and comes up later.
//!
//! Needs the engines: `cargo xtask engines up docker k8s` (CI sets
//! `LOOKOUT_ENGINES=1` and brings them up).

// Test code reads the child's pipes on threads; only library crates may not spawn.
#![allow(clippy::disallowed_methods)]

use std::process::Command;
use std::time::{Duration, Instant};

use lookout_e2e::engines;

mod common;
use common::{Containers, Process, WAIT};

fn require_docker() -> Option<engines::EngineLock> {
    common::require_docker(false)
}

fn unique(what: &str) -> String {
    common::unique("cli", what)
}

/// A running `lookout` on the default docker host.
struct Lookout;

impl Lookout {
    fn spawn(args: &[&str]) -> Process {
        Process::spawn(args, &[("DOCKER_HOST", engines::docker_host())])
    }
}

fn create(name: &str, label: &str) {
    engines::docker_create_test_container(name, &["--label", label])
        .unwrap_or_else(|e| panic!("{e}"));
}

/// `2026-11-30T03:42:18.979493067Z`: RFC 3339, UTC, nanoseconds.
fn assert_rfc3339_nanos(at: &str) {
    let b = at.as_bytes();
    assert_eq!(b.len(), 30, "{at}");
    for (i, c) in b.iter().enumerate() {
        match i {
            4 | 7 => assert_eq!(*c, b'-', "{at}"),
            10 => assert_eq!(*c, b'T', "{at}"),
            13 | 16 => assert_eq!(*c, b':', "{at}"),
            19 => assert_eq!(*c, b'.', "{at}"),
            29 => assert_eq!(*c, b'Z', "{at}"),
            _ => assert!(c.is_ascii_digit(), "{at}"),
        }
    }
}

#[test]
fn docker_json_lines_field_by_field() {
    let Some(_lock) = require_docker() else {
        return;
    };
    let name = unique("json");
    let label = format!("lookout.cli={name}");
    let mut lookout = Lookout::spawn(&["docker", "--json", "--label", &label]);
    let connected = lookout.connected();
    assert_eq!(connected["instances"], 0, "{connected}");
    let containers = Containers(vec![name.clone(), format!("{name}-other")]);
    // Not labelled: filtered out by the engine.
    create(&containers.0[1], "lookout.cli=someone-else");
    create(&name, &label);
    engines::docker(&["start", &name]).expect("start");
    engines::docker(&["stop", "-t", "1", &name]).expect("stop");
    engines::docker(&["rm", &name]).expect("rm");

    let today = {
        let out = Command::new("date")
            .args(["-u", "+%Y-%m-%d"])
            .output()
            .expect("date");
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    // `docker stop` asks first (its SIGTERM): `stopping`, then `stopped`.
    for kind in ["created", "started", "stopping", "stopped", "removed"] {
        let e = lookout.event();
        let obj = e.as_object().expect("an object");
        // Why (issue #47): only a stop says it, with the fields the engine
        // gave; a `docker stop` is a requested stop.
        let keys: Vec<&str> = obj
            .keys()
            .map(String::as_str)
            .filter(|k| kind != "stopped" || !REASON_KEYS.contains(k))
            .collect();
        if kind == "stopped" {
            assert_eq!(e["outcome"], "stopped", "{e}");
        }
        let mut sorted = keys.clone();
        sorted.sort_unstable();
        assert_eq!(
            sorted,
            ["at", "instance", "kind", "labels", "origin", "provider"],
            "{e}"
        );
        assert_eq!(e["provider"], "docker", "{e}");
        assert_eq!(e["instance"], name.as_str(), "{e}");
        assert_eq!(e["kind"], kind, "{e}");
        assert_eq!(e["origin"], "live", "{e}");
        let at = e["at"].as_str().expect("at is a string");
        assert_rfc3339_nanos(at);
        assert!(
            at.starts_with(&today) || at < today.as_str(),
            "{at} vs {today}"
        );
        assert_eq!(e["labels"]["lookout.cli"], name.as_str(), "{e}");
    }
    lookout.signal("TERM");
    let status = lookout.exit_within(Duration::from_secs(5));
    assert_eq!(status.code(), Some(0), "SIGTERM exits 0");
}

/// The fields of an event's reason (issue #47).
const REASON_KEYS: [&str; 7] = [
    "outcome",
    "exit_code",
    "signal",
    "oom",
    "restarting",
    "failed",
    "message",
];

/// Issue #47 against dockerd: a container whose process exits 3 by itself
/// is `stopped` with `"outcome":"failed","exit_code":3` (the code `docker
/// inspect` says), its text line with `failed exit 3`; one stopped with
/// `docker stop` is `"outcome":"stopped"`, whatever its exit code.
#[test]
fn docker_stops_say_why() {
    let Some(_lock) = require_docker() else {
        return;
    };
    let name = unique("why");
    let label = format!("lookout.cli={name}");
    let (exits, stops) = (format!("{name}-exit3"), format!("{name}-stop"));
    let _containers = Containers(vec![exits.clone(), stops.clone()]);
    let mut json = Lookout::spawn(&["docker", "--json", "--label", &label]);
    let text = Lookout::spawn(&["docker", "--label", &label]);
    json.connected();
    let deadline = Instant::now() + WAIT;
    while !text
        .err
        .recv_timeout(deadline.saturating_duration_since(Instant::now()))
        .expect("the text run's status line")
        .contains("connected, 0 instances known")
    {}
    let image = engines::test_image();
    engines::docker(&[
        "create",
        "--name",
        &exits,
        "--label",
        &label,
        "--network",
        "none",
        &image,
        "sh",
        "-c",
        "exit 3",
    ])
    .unwrap_or_else(|e| panic!("{e}"));
    engines::docker(&["start", "-a", &exits]).ok(); // waits for it; exit 3 is its error
    let code = engines::docker(&["inspect", "-f", "{{.State.ExitCode}}", &exits])
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(code.trim(), "3", "docker inspect");
    let stopped = (0..3)
        .map(|_| json.event())
        .find(|e| e["kind"] == "stopped")
        .expect("created, started, stopped");
    assert_eq!(
        (
            &stopped["instance"],
            &stopped["outcome"],
            &stopped["exit_code"]
        ),
        (&exits.as_str().into(), &"failed".into(), &3.into()),
        "{stopped}"
    );
    for absent in ["signal", "oom", "restarting"] {
        assert!(stopped.get(absent).is_none(), "{absent}: {stopped}");
    }
    let deadline = Instant::now() + WAIT;
    let line = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = text
            .out
            .as_ref()
            .expect("stdout")
            .recv_timeout(left)
            .expect("the text line of the stop");
        if line.contains("  stopped ") {
            break line;
        }
    };
    assert!(
        line.contains(exits.as_str()) && line.contains("  failed exit 3  "),
        "{line}"
    );

    create(&stops, &label);
    engines::docker(&["start", &stops]).expect("start");
    engines::docker(&["stop", "-t", "1", &stops]).expect("stop");
    let stopped = (0..6)
        .map(|_| json.event())
        .find(|e| e["kind"] == "stopped")
        .expect("a stop");
    assert_eq!(
        (&stopped["instance"], &stopped["outcome"]),
        (&stops.as_str().into(), &"stopped".into()),
        "a requested stop: {stopped}"
    );
}

#[test]
fn initial_snapshot_then_sigint() {
    let Some(_lock) = require_docker() else {
        return;
    };
    let name = unique("initial");
    let label = format!("lookout.cli={name}");
    let _containers = Containers(vec![name.clone()]);
    create(&name, &label);
    engines::docker(&["start", &name]).expect("start");
    let mut lookout = Lookout::spawn(&["docker", "--json", "--initial", "--label", &label]);
    for kind in ["created", "started"] {
        let e = lookout.event();
        assert_eq!(
            (
                e["instance"].as_str(),
                e["kind"].as_str(),
                e["origin"].as_str()
            ),
            (Some(name.as_str()), Some(kind), Some("initial")),
            "{e}"
        );
    }
    assert_eq!(lookout.connected()["instances"], 1);
    lookout.signal("INT");
    assert_eq!(lookout.exit_within(Duration::from_secs(5)).code(), Some(0));
}

#[test]
fn human_output_without_json() {
    let Some(_lock) = require_docker() else {
        return;
    };
    let name = unique("human");
    let label = format!("lookout.cli={name}");
    let _containers = Containers(vec![name.clone()]);
    let lookout = Lookout::spawn(&["docker", "--label", &label]);
    // Human status line on stderr.
    let deadline = Instant::now() + WAIT;
    loop {
        let line = lookout
            .err
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .expect("a status line");
        if line.contains("connected, 0 instances known") {
            break;
        }
    }
    create(&name, &label);
    let line = lookout
        .out
        .as_ref()
        .expect("stdout")
        .recv_timeout(WAIT)
        .expect("an event line");
    let words: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(words.len(), 6, "{line}");
    assert_rfc3339_nanos(words[0]);
    assert_eq!(
        &words[1..5],
        ["docker", "created", "live", name.as_str()],
        "{line}"
    );
    // key=value,… (the test image adds a label of its own).
    assert!(words[5].split(',').any(|l| l == label), "{line}");
    assert!(
        !line.contains('\x1b'),
        "no colour when stdout is not a terminal"
    );
}

#[test]
fn bad_input_exits_2() {
    let cases: &[&[&str]] = &[
        &["docker", "--host", "ftp://example"],
        &["podman", "--host", "unix://"],
        &["docker", "--label", "novalue"],
        &["docker", "--label", "=v"],
        &["k8s", "--kind", "a/b/c/d"],
        &["docker", "--no-such-flag"],
        &["kubernetes"],
        &[],
    ];
    for args in cases {
        common::usage_error(args);
    }
}

/// A kubeconfig named and unreadable exits 2 at once, naming the file and
/// why, as `kubectl --kubeconfig /no/such/file` fails at once (it was
/// retried forever as if the cluster were down); so does one that is not
/// a kubeconfig.
#[test]
fn unreadable_kubeconfig_exits_2() {
    let missing = "/no/such/lookout-kubeconfig";
    let stderr = common::usage_error(&["k8s", "--kubeconfig", missing]);
    assert!(stderr.contains(missing), "{stderr}");
    assert!(stderr.contains("No such file"), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "one line, no retry: {stderr}");
    let garbage = std::env::temp_dir().join(unique("kubeconfig"));
    std::fs::write(&garbage, "{[ not yaml").expect("write");
    let path = garbage.display().to_string();
    let stderr = common::usage_error(&["k8s", "--kubeconfig", &path, "--json"]);
    let _ = std::fs::remove_file(&garbage);
    assert!(stderr.contains(&path), "{stderr}");
}

#[test]
fn engine_down_at_start_then_up() {
    let Some(_lock) = require_docker() else {
        return;
    };
    // A socket path that does not exist yet: the engine is "down".
    let link = std::env::temp_dir().join(format!("{}.sock", unique("down")));
    let _ = std::fs::remove_file(&link);
    let host = format!("unix://{}", link.display());
    let name = unique("late");
    let label = format!("lookout.cli={name}");
    let _containers = Containers(vec![name.clone()]);
    let mut lookout = Lookout::spawn(&["docker", "--json", "--host", &host, "--label", &label]);
    for attempt in 1..=2 {
        let d = lookout.stderr("disconnected", |v| v["status"] == "disconnected");
        assert_eq!(d["attempt"], attempt, "{d}");
        assert!(d["retry_in_ms"].is_u64(), "{d}");
        assert!(
            d["error"]
                .as_str()
                .is_some_and(|e| e.contains(&link.display().to_string())),
            "the error names the address: {d}"
        );
    }
    assert!(
        lookout.child.try_wait().expect("try_wait").is_none(),
        "still running"
    );
    // The engine "comes up" at that address.
    let real = engines::docker_host();
    let real = real.strip_prefix("unix://").expect("a unix docker host");
    std::os::unix::fs::symlink(real, &link).expect("symlink");
    let connected = lookout.connected();
    assert_eq!(connected["instances"], 0);
    create(&name, &label);
    let e = lookout.event();
    assert_eq!(
        (e["instance"].as_str(), e["kind"].as_str()),
        (Some(name.as_str()), Some("created"))
    );
    let _ = std::fs::remove_file(&link);
}

#[test]
fn closed_stdout_exits_quietly() {
    let Some(_lock) = require_docker() else {
        return;
    };
    let name = unique("pipe");
    let label = format!("lookout.cli={name}");
    let _containers = Containers(vec![name.clone()]);
    let mut lookout = Lookout::spawn(&["docker", "--json", "--label", &label]);
    lookout.connected();
    create(&name, &label);
    let first = lookout.event();
    assert_eq!(first["kind"], "created");
    // The reader goes away (`lookout … | head -1`).
    drop(lookout.out.take());
    // Reading thread ends on its next line; the pipe closes with it.
    engines::docker(&["start", &name]).expect("start");
    engines::docker(&["stop", "-t", "1", &name]).expect("stop");
    engines::docker(&["start", &name]).expect("start");
    let status = lookout.exit_within(WAIT);
    assert_eq!(status.code(), Some(0), "a broken pipe is a quiet exit");
    let rest: Vec<String> = lookout.err.try_iter().collect();
    assert!(
        rest.iter()
            .all(|l| !l.contains("panicked") && !l.contains("Broken pipe")),
        "{rest:?}"
    );
}

#[test]
fn k8s_json_lines() {
    let Some(kubeconfig) = lookout_e2e::k8s_util::require() else {
        return;
    };
    let _lock = engines::lock_engine("k8s", false).unwrap_or_else(|e| panic!("{e}"));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let fixture = rt.block_on(lookout_e2e::k8s_util::Fixture::new(&kubeconfig));
    let ns = fixture.id(lookout_k8s::Kind::Deployment, "x");
    let ns = ns.split('/').nth(1).expect("namespace").to_owned();
    let kc = kubeconfig.display().to_string();
    let mut lookout = Lookout::spawn(&[
        "k8s",
        "--json",
        "--kubeconfig",
        &kc,
        "--namespace",
        &ns,
        "--kind",
        "deployment",
    ]);
    lookout.connected();
    rt.block_on(fixture.create(lookout_k8s::Kind::Deployment, "web", 1, &[("app", "web")]));
    rt.block_on(fixture.scale(lookout_k8s::Kind::Deployment, "web", 0));
    let id = format!("deployment/{ns}/web");
    for kind in ["created", "started", "stopped"] {
        let e = lookout.event();
        assert_eq!(e["provider"], "k8s", "{e}");
        assert_eq!(e["instance"], id.as_str(), "{e}");
        assert_eq!(e["kind"], kind, "{e}");
        assert_eq!(e["origin"], "live", "{e}");
        assert_eq!(e["labels"]["app"], "web", "{e}");
        assert_rfc3339_nanos(e["at"].as_str().expect("at"));
    }
    rt.block_on(fixture.delete(lookout_k8s::Kind::Deployment, "web"));
    assert_eq!(lookout.event()["kind"], "removed");
    lookout.signal("TERM");
    assert_eq!(lookout.exit_within(Duration::from_secs(5)).code(), Some(0));
}

/// Removes the test's swarm services whatever happens.
struct Services(Vec<String>);

impl Drop for Services {
    fn drop(&mut self) {
        for name in &self.0 {
            let _ = engines::docker(&["service", "rm", name]);
        }
    }
}

#[test]
fn swarm_json_lines() {
    let Some(_docker) = require_docker() else {
        return;
    };
    let _swarm = engines::lock_engine("swarm", false).unwrap_or_else(|e| panic!("{e}"));
    engines::swarm_up().unwrap_or_else(|e| panic!("swarm: {e}"));
    let name = unique("svc");
    let label = format!("lookout.cli={name}");
    let _services = Services(vec![name.clone()]);
    let mut lookout = Lookout::spawn(&["swarm", "--json", "--label", &label]);
    lookout.connected();
    engines::swarm_service_create(&name, &["--label", &label, "--replicas", "1"])
        .unwrap_or_else(|e| panic!("{e}"));
    engines::docker(&["service", "scale", "--detach", &format!("{name}=0")])
        .unwrap_or_else(|e| panic!("{e}"));
    engines::docker(&["service", "rm", &name]).unwrap_or_else(|e| panic!("{e}"));
    for kind in ["created", "started", "stopped", "removed"] {
        let e = lookout.event();
        assert_eq!(e["provider"], "swarm", "{e}");
        assert_eq!(e["instance"], name.as_str(), "{e}");
        assert_eq!(e["kind"], kind, "{e}");
        assert_eq!(e["origin"], "live", "{e}");
        assert_eq!(e["labels"]["lookout.cli"], name.as_str(), "{e}");
        assert_rfc3339_nanos(e["at"].as_str().expect("at"));
    }
    lookout.signal("TERM");
    assert_eq!(lookout.exit_within(Duration::from_secs(5)).code(), Some(0));
}
