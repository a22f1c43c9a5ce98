//! A second dockerd on this machine (`engines up docker2`), for the tests of
//! many engines in one stream: a dockerd beside the main one (see
//! [`beside`](crate::beside): its own socket, data root, exec root,
//! containerd namespaces and bridge, no iptables rules). It has no image of
//! its own: the test image is loaded from the main dockerd (`docker save |
//! docker load`). A dockerd started again stops the containers it finds
//! (`live-restore` off).

use std::fs;
use std::process::Command;

use crate::beside::Beside;
use crate::docker::{docker_cli, docker_command, verify_container};
use crate::process::run;
use crate::{CLI_TIMEOUT, engines_file, env_nonempty, test_image};

/// Environment variable: the second dockerd's endpoint.
pub const ENV_DOCKER2_HOST: &str = "LOOKOUT_DOCKER2_HOST";
/// Its socket.
pub const DEFAULT_DOCKER2_HOST: &str = "unix:///run/lookout-docker2/docker.sock";

fn beside() -> Result<Beside, String> {
    Ok(Beside {
        name: "docker2",
        run: "/run/lookout-docker2",
        data_root: "/var/lib/lookout-docker2",
        namespace: "lookout-docker2",
        bridge: "lkdocker2",
        bridge_address: "10.213.117.1/24",
        config: engines_file("daemon2.json")?,
        log: engines_file("dockerd2.log")?,
    })
}

/// The second dockerd's endpoint: `LOOKOUT_DOCKER2_HOST`, else
/// [`DEFAULT_DOCKER2_HOST`].
pub fn docker2_host() -> String {
    env_nonempty(ENV_DOCKER2_HOST).unwrap_or_else(|| DEFAULT_DOCKER2_HOST.to_owned())
}

/// A `Command` for the docker CLI, pointed at the second dockerd.
pub fn docker2_command() -> Command {
    let mut cmd = Command::new(docker_cli());
    cmd.env("DOCKER_HOST", docker2_host())
        .env("DOCKER_BUILDKIT", "0")
        .env_remove("DOCKER_CONTEXT");
    cmd
}

/// Run the docker CLI against the second dockerd (2 min bound); its trimmed
/// stdout.
pub fn docker2(args: &[&str]) -> Result<String, String> {
    run(docker2_command().args(args), "docker2", CLI_TIMEOUT)
}

/// Make the second dockerd usable: start it if it does not answer (only on
/// its default socket) and load the test image from the main dockerd if it
/// lacks it. The main dockerd must be up (`docker_up`). Cheap when all is in
/// place.
pub fn docker2_up() -> Result<(), String> {
    docker2_start()?;
    ensure_image()
}

/// Start the second dockerd (detached, `target/engines/dockerd2.log`) and
/// wait until it answers `/_ping`. `Ok` at once if it answers already.
pub fn docker2_start() -> Result<(), String> {
    let host = docker2_host();
    if host != DEFAULT_DOCKER2_HOST {
        return match crate::ping::ping(&host, crate::PING_TIMEOUT) {
            Ok(()) => Ok(()),
            Err(_) => Err(format!(
                "docker2: {host} (from {ENV_DOCKER2_HOST}) does not answer and is not ours to start"
            )),
        };
    }
    beside()?.start(&[], &[])
}

/// Loads the test image from the main dockerd when the second lacks it.
fn ensure_image() -> Result<(), String> {
    let image = test_image();
    if docker2(&["image", "inspect", "--format", "{{.Id}}", &image]).is_ok() {
        return Ok(());
    }
    let tar = engines_file("docker2-image.tar")?;
    let saved = run(
        docker_command().args(["save", "-o"]).arg(&tar).arg(&image),
        "docker2: docker save of the test image",
        CLI_TIMEOUT,
    );
    let loaded = saved.and_then(|_| {
        run(
            docker2_command().args(["load", "-i"]).arg(&tar),
            "docker2: docker load of the test image",
            CLI_TIMEOUT,
        )
    });
    let _ = fs::remove_file(&tar);
    loaded.map(drop)
}

/// A container runs and stops on the second dockerd.
pub fn docker2_verify() -> Result<(), String> {
    verify_container("docker2", &docker2)
}

/// SIGKILL the second dockerd and wait until it and its containerd have
/// exited; their pid files are removed.
pub fn docker2_kill9() -> Result<(), String> {
    beside()?.kill9()
}

/// Stop the second dockerd (SIGTERM: it stops its containers; SIGKILL after
/// 60 s).
pub fn docker2_down() -> Result<(), String> {
    beside()?.down()
}
