//! lookout-podman against a real Podman API service: `cargo xtask engines up
//! podman` first (CI sets `LOOKOUT_ENGINES=1`). The scenarios are
//! `lookout_e2e::relay::scenarios`, shared with Docker; the "daemon" is
//! Podman's API service.

use lookout_e2e::engines;
use lookout_e2e::relay::scenarios::Engine;

/// `kill -9` the API service, stop the containers with the CLI (which needs
/// no service; none to stop: no `stop`, which would fail), start the
/// service again (even when the stop failed).
fn restart_stopping(containers: &[&str]) -> Result<(), String> {
    engines::podman_kill9()?;
    let stopped = if containers.is_empty() {
        Ok(())
    } else {
        let mut stop = vec!["stop", "-t", "0"];
        stop.extend_from_slice(containers);
        engines::podman(&stop).map(drop)
    };
    let started = engines::podman_start();
    stopped.and(started)
}

static PODMAN: Engine = Engine {
    name: "podman",
    host: engines::podman_host,
    up: engines::podman_up,
    cli: engines::podman,
    signal: engines::podman_signal,
    restart_stopping,
    watch: lookout_podman::watch,
};

lookout_e2e::compat_engine_tests!(PODMAN);
