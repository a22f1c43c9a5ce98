//! swarm's `/events` decoder: garbage in chunks, then a valid event that must
//! still be decoded; bounded memory (see `lookout_fuzz::check_memory`).

#![no_main]

use libfuzzer_sys::fuzz_target;
use lookout_testkit::fuzz::events::{retained_limit, swarm_events_with};

fuzz_target!(|data: &[u8]| {
    lookout_fuzz::check_memory(data, retained_limit, swarm_events_with);
});
