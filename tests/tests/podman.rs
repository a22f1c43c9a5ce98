//! lookout-podman against a real Podman API service: `cargo xtask engines up
//! podman` first (CI sets `LOOKOUT_ENGINES=1`). The scenarios are
//! `lookout_e2e::relay::scenarios`, shared with Docker; the "daemon" is
//! Podman's API service.

use lookout_e2e::relay::scenarios::PODMAN;

lookout_e2e::compat_engine_tests!(PODMAN);
