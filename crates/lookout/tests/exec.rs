//! `--exec CMD` (issue #49): CMD per event printed, the event's JSON line
//! on its stdin, one at a time and in order; a slow CMD holds up no event.
//! (Its queue's bound, 4096 events, and what it keeps beyond it are
//! checked by `queue.rs`'s unit tests.)

// The helpers read output on threads of their own (tests may spawn).
#![allow(clippy::disallowed_methods)]

mod common;

use std::thread;
use std::time::{Duration, Instant};

use common::{Process, TempDir, WAIT, require_docker, unique};
use lookout_e2e::engines;

/// `lookout docker --json --label LABEL --exec CMD`, connected.
fn lookout_exec(label: &str, cmd: &str) -> Process {
    let mut lookout = Process::spawn(
        &["docker", "--json", "--label", label, "--exec", cmd],
        &[("DOCKER_HOST", engines::docker_host())],
    );
    lookout.connected();
    lookout
}

/// A container's life: created, started, stopped (stopping first) and
/// removed: 5 events.
fn life(name: &str, label: &str) {
    let on = common::On::create(engines::docker, name, label);
    on.run(&["start"]);
    on.run(&["kill"]);
    on.run(&["rm"]);
}

#[test]
fn runs_cmd_per_event_in_order_with_its_json_line_on_stdin() {
    let Some(_docker) = require_docker(false) else {
        return;
    };
    let tmp = TempDir::new("exec", "order");
    let label = format!("lookout.exec={}", unique("exec", "order"));
    let name = unique("exec", "order");
    let _containers = common::Containers(vec![name.clone()]);
    let out = tmp.0.join("events");
    // Each run appends its stdin, after a pause: a second run started
    // before the first ended would interleave.
    let cmd = format!(
        "sh -c 'sleep 0.1; cat > {0}.part; cat {0}.part >> {0}'",
        out.display()
    );
    let lookout = lookout_exec(&label, &cmd);
    life(&name, &label);
    let printed: Vec<String> = (0..4)
        .map(|_| lookout.event().to_string())
        .collect::<Vec<_>>();
    let deadline = Instant::now() + WAIT;
    let ran = loop {
        let ran = std::fs::read_to_string(&out).unwrap_or_default();
        if ran.lines().count() >= printed.len() {
            break ran;
        }
        assert!(Instant::now() < deadline, "the command ran for: {ran}");
        thread::sleep(Duration::from_millis(50));
    };
    let ran: Vec<serde_json::Value> = ran
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    let printed: Vec<serde_json::Value> = printed
        .iter()
        .map(|l| serde_json::from_str(l).expect("JSON"))
        .collect();
    assert_eq!(
        ran[..printed.len()],
        printed[..],
        "the same lines, in order"
    );
    let kinds: Vec<&str> = ran.iter().filter_map(|e| e["kind"].as_str()).collect();
    assert_eq!(kinds[..2], ["created", "started"], "{kinds:?}");
}

#[test]
fn a_slow_cmd_holds_up_no_event() {
    let Some(_docker) = require_docker(false) else {
        return;
    };
    let label = format!("lookout.exec={}", unique("exec", "slow"));
    let name = unique("exec", "slow");
    let _containers = common::Containers(vec![name.clone()]);
    let lookout = lookout_exec(&label, "sleep 10");
    let t0 = Instant::now();
    life(&name, &label);
    let kinds: Vec<String> = (0..4)
        .map(|_| lookout.event()["kind"].as_str().unwrap_or("-").to_owned())
        .collect();
    let took = t0.elapsed();
    eprintln!("4 events printed in {took:?} while the first command sleeps 10 s: {kinds:?}");
    assert!(took < Duration::from_secs(8), "{took:?}");
}
