//! lookout-docker against a real dockerd: `cargo xtask engines up docker`
//! first (CI sets `LOOKOUT_ENGINES=1`). The scenarios are
//! `lookout_e2e::relay::scenarios`, shared with Podman.

use lookout_e2e::relay::scenarios::DOCKER;

lookout_e2e::compat_engine_tests!(DOCKER);
