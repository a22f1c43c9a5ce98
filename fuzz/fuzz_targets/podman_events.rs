//! podman's `/events` decoder: garbage in chunks, then a valid event that must
//! still be decoded; bounded memory (see `lookout_fuzz::check_memory`).

#![no_main]

use libfuzzer_sys::fuzz_target;
use lookout_testkit::fuzz::events::{podman_events_with, retained_limit};

fuzz_target!(|data: &[u8]| {
    lookout_fuzz::check_memory(data, retained_limit, podman_events_with);
});
