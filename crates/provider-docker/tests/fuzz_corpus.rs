//! Replays the fuzz seeds of `docker_events` (`fuzz/corpus/docker_events/`)
//! through the harness cargo-fuzz runs (`lookout_docker::fuzzing`), so that `cargo
//! test` checks them on stable; `LOOKOUT_FUZZ_SECONDS=N` adds N seconds of
//! random inputs (see `fuzz_driver.rs`).

mod fuzz_driver;

use lookout_docker::fuzzing;

#[test]
fn docker_events_seeds() {
    fuzz_driver::replay("docker_events", fuzzing::docker_events);
}

#[test]
fn docker_events_random() {
    fuzz_driver::explore("docker_events", fuzzing::docker_events);
}
