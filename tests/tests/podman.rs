//! lookout-podman against a real Podman API service: `cargo xtask engines up
//! podman` first (CI sets `LOOKOUT_ENGINES=1`). The scenarios are
//! `lookout_e2e::relay::scenarios`, shared with Docker; the "daemon" is
//! Podman's API service.

use std::time::Duration;

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

/// `podman healthcheck run NAME`: exit 0 healthy, 1 unhealthy, anything
/// else an error (Podman runs no check by itself here: no systemd timers).
fn run_check(name: &str) -> Result<(), String> {
    let mut cmd = engines::podman_command()?;
    cmd.args(["healthcheck", "run", name]);
    let out = engines::run_output(&mut cmd, Duration::from_secs(60))?;
    match out.status.code() {
        Some(0 | 1) => Ok(()),
        other => Err(format!(
            "podman healthcheck run {name}: exit {other:?}: {}",
            out.stderr.trim()
        )),
    }
}

static PODMAN: Engine = Engine {
    name: "podman",
    host: engines::podman_host,
    up: engines::podman_up,
    cli: engines::podman,
    signal: engines::podman_signal,
    restart_stopping,
    watch: lookout_podman::watch,
    run_check: Some(run_check),
    keeps_history: true,
};

lookout_e2e::compat_engine_tests!(PODMAN);
