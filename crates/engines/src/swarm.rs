//! A single-node Docker Swarm: init, leave, services of the test image.

use std::thread;
use std::time::{Duration, Instant};

use crate::docker::{docker, docker_up};
use crate::ping::ping;
use crate::{PING_TIMEOUT, docker_host, engines_file, test_image};

/// Make dockerd a single-node Swarm manager (`docker swarm init
/// --advertise-addr 127.0.0.1` unless it is one already). Brings Docker up.
pub fn swarm_up() -> Result<(), String> {
    docker_up()?;
    let state = docker(&[
        "info",
        "--format",
        "{{.Swarm.LocalNodeState}} {{.Swarm.ControlAvailable}}",
    ])?;
    match state.as_str() {
        "active true" => Ok(()),
        "inactive false" | "inactive true" => {
            docker(&["swarm", "init", "--advertise-addr", "127.0.0.1"]).map_err(|e| {
                format!(
                    "swarm: init failed: {e}; read {}",
                    engines_file("dockerd.log")
                        .map(|p| p.display().to_string())
                        .unwrap_or_default()
                )
            })?;
            let after = docker(&[
                "info",
                "--format",
                "{{.Swarm.LocalNodeState}} {{.Swarm.ControlAvailable}}",
            ])?;
            if after == "active true" {
                Ok(())
            } else {
                Err(format!(
                    "swarm: after init the node is {after:?}, not an active manager"
                ))
            }
        }
        other => Err(format!(
            "swarm: the node is {other:?} (not inactive, not an active manager); \
             `docker swarm leave --force` and retry"
        )),
    }
}

/// Leave the Swarm (`docker swarm leave --force`) if dockerd is in one.
pub fn swarm_down() -> Result<(), String> {
    if ping(&docker_host(), PING_TIMEOUT).is_err() {
        return Ok(());
    }
    let state = docker(&["info", "--format", "{{.Swarm.LocalNodeState}}"])?;
    if state == "inactive" {
        return Ok(());
    }
    docker(&["swarm", "leave", "--force"]).map(drop)
}

/// Wait until `service` has `want` running tasks (bounded by `timeout`).
pub fn swarm_wait_running(service: &str, want: usize, timeout: Duration) -> Result<(), String> {
    let deadline = Instant::now() + timeout;
    let mut last = String::new();
    while Instant::now() < deadline {
        last = docker(&[
            "service",
            "ps",
            "--filter",
            "desired-state=running",
            "--format",
            "{{.CurrentState}}",
            service,
        ])?;
        let running = last.lines().filter(|l| l.starts_with("Running")).count();
        if running == want {
            return Ok(());
        }
        thread::sleep(Duration::from_millis(250));
    }
    Err(format!(
        "swarm: service {service} has not {want} running tasks after {timeout:?}: {last:?}"
    ))
}

/// `docker service create --detach --no-resolve-image --name NAME ARGS…
/// IMAGE sleep 3600`: a service of the test image (no registry, hence
/// `--no-resolve-image`; services take no `--network none`).
pub fn swarm_service_create(name: &str, args: &[&str]) -> Result<String, String> {
    let image = test_image();
    let mut cmd = vec![
        "service",
        "create",
        "--detach",
        "--no-resolve-image",
        "--name",
        name,
    ];
    cmd.extend(args);
    cmd.extend([image.as_str(), "sleep", "3600"]);
    docker(&cmd)
}

/// Check that a replicated service of the test image can be created (no
/// registry: `--no-resolve-image`), scaled 1 → 2, and removed.
pub fn swarm_verify() -> Result<(), String> {
    let name = format!("lookout-engines-check-{}", std::process::id());
    let _ = docker(&["service", "rm", &name]);
    let result = (|| {
        swarm_service_create(&name, &["--replicas", "1"])?;
        swarm_wait_running(&name, 1, Duration::from_secs(60))?;
        docker(&["service", "scale", "--detach", &format!("{name}=2")])?;
        swarm_wait_running(&name, 2, Duration::from_secs(60))
    })();
    let removed = docker(&["service", "rm", &name]);
    result?;
    removed.map(drop)
}
