//! lookout-docker against a real dockerd: `cargo xtask engines up docker`
//! first (CI sets `LOOKOUT_ENGINES=1`). The scenarios are
//! `lookout_e2e::relay::scenarios`, shared with Podman.

use lookout_e2e::engines;
use lookout_e2e::relay::scenarios::Engine;

/// `kill -9` dockerd and start it again: without live-restore, the restarted
/// daemon stops the containers that ran.
fn restart_stopping(_containers: &[&str]) -> Result<(), String> {
    engines::docker_kill9()?;
    engines::docker_start()
}

static DOCKER: Engine = Engine {
    name: "docker",
    host: engines::docker_host,
    up: engines::docker_up,
    cli: engines::docker,
    signal: engines::docker_signal,
    restart_stopping,
    watch: lookout_docker::watch,
};

lookout_e2e::compat_engine_tests!(DOCKER);
