//! podman's `/events` decoder: garbage in chunks, then a valid event that must
//! still be decoded; bounded memory (see `lookout_fuzz::check_memory`).

#![no_main]

use libfuzzer_sys::fuzz_target;
use lookout_moby::fuzzing::retained_limit;

fuzz_target!(|data: &[u8]| {
    lookout_fuzz::check_memory(
        data,
        retained_limit,
        lookout_podman::fuzzing::podman_events_with,
    );
});
