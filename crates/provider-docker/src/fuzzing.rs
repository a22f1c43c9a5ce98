//! The fuzzing harness of Docker's events (feature `fuzzing`; not a public
//! API): [`lookout_moby::fuzzing`]'s, with Docker's [`MAPPING`](crate::MAPPING).

use lookout_moby::fuzzing::{Containers, run};

/// Feeds `data` (see [`lookout_moby::fuzzing`]) and then one valid event
/// through the decoder of a Docker session; panics when an invariant does
/// not hold.
pub fn docker_events(data: &[u8]) {
    run(&Containers(&crate::MAPPING), data, &mut || {});
}

/// [`docker_events`], calling `after_push` after every chunk.
pub fn docker_events_with(data: &[u8], after_push: &mut dyn FnMut()) {
    run(&Containers(&crate::MAPPING), data, after_push);
}
