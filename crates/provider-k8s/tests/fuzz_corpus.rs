//! Replays the fuzz seeds of `k8s_watch` (`fuzz/corpus/k8s_watch/`) through
//! the harness cargo-fuzz runs, so that `cargo test` checks them on stable;
//! `LOOKOUT_FUZZ_SECONDS=N` adds N seconds of random inputs.

#[path = "../../provider-docker/tests/fuzz_driver/mod.rs"]
mod fuzz_driver;

use lookout_k8s::fuzzing;

#[test]
fn k8s_watch_seeds() {
    fuzz_driver::replay("k8s_watch", fuzzing::k8s_watch);
}

#[test]
fn k8s_watch_random() {
    fuzz_driver::explore("k8s_watch", fuzzing::k8s_watch);
}
