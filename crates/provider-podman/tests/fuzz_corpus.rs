//! Replays the fuzz seeds of `podman_events` (`fuzz/corpus/podman_events/`)
//! through the harness cargo-fuzz runs, so that `cargo test` checks them on
//! stable; `LOOKOUT_FUZZ_SECONDS=N` adds N seconds of random inputs.

#[path = "../../provider-docker/tests/fuzz_driver/mod.rs"]
mod fuzz_driver;

use lookout_podman::fuzzing;

#[test]
fn podman_events_seeds() {
    fuzz_driver::replay("podman_events", fuzzing::podman_events);
}

#[test]
fn podman_events_random() {
    fuzz_driver::explore("podman_events", fuzzing::podman_events);
}
