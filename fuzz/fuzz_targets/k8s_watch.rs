//! Kubernetes watch frames through kube's client and watcher and lookout's
//! session and core: garbage in chunks, then a valid frame that must still
//! be delivered (see `lookout_testkit::fuzz::k8s`).

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    lookout_testkit::fuzz::k8s::k8s_watch(data);
});
