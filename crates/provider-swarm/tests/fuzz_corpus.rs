//! Replays the fuzz seeds of `swarm_events` (`fuzz/corpus/swarm_events/`)
//! through the harness cargo-fuzz runs, so that `cargo test` checks them on
//! stable; `LOOKOUT_FUZZ_SECONDS=N` adds N seconds of random inputs.

#[path = "../../provider-docker/tests/fuzz_driver/mod.rs"]
mod fuzz_driver;

use lookout_swarm::fuzzing;

#[test]
fn swarm_events_seeds() {
    fuzz_driver::replay("swarm_events", fuzzing::swarm_events);
}

#[test]
fn swarm_events_random() {
    fuzz_driver::explore("swarm_events", fuzzing::swarm_events);
}
