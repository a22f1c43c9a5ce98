//! Kubernetes watch frames through kube's client and watcher and lookout's
//! session and core: garbage in chunks, then a valid frame that must still
//! be delivered (see `lookout_k8s::fuzzing`).

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    lookout_k8s::fuzzing::k8s_watch(data);
});
