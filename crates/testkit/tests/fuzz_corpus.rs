//! Replays the fuzz seeds (`fuzz/corpus/TARGET/`) of every target through
//! the harness cargo-fuzz runs, so that `cargo test` checks them on stable;
//! `LOOKOUT_FUZZ_SECONDS=N` adds N seconds of random inputs per target
//! (what `cargo xtask fuzz` falls back to without nightly).

use lookout_testkit::fuzz::{driver, events, k8s};

#[test]
fn docker_events_seeds() {
    driver::replay("docker_events", events::docker_events);
}

#[test]
fn docker_events_random() {
    driver::explore("docker_events", events::docker_events);
}

#[test]
fn podman_events_seeds() {
    driver::replay("podman_events", events::podman_events);
}

#[test]
fn podman_events_random() {
    driver::explore("podman_events", events::podman_events);
}

#[test]
fn swarm_events_seeds() {
    driver::replay("swarm_events", events::swarm_events);
}

#[test]
fn swarm_events_random() {
    driver::explore("swarm_events", events::swarm_events);
}

#[test]
fn k8s_watch_seeds() {
    driver::replay("k8s_watch", k8s::k8s_watch);
}

#[test]
fn k8s_watch_random() {
    driver::explore("k8s_watch", k8s::k8s_watch);
}
