//! A second dockerd on this machine (`engines up docker2`), for the tests of
//! many engines in one stream: its own socket, data root, exec root, pid
//! file and containerd namespaces, a bridge of its own ([`BRIDGE`]) and no
//! iptables rules, next to the main one. (Not `--bridge none`: a dockerd
//! started so *removes* the default bridge `docker0`, the main dockerd's,
//! and every later container on it — Swarm's tasks — fails to start.) Debian's dockerd 20.10 starts so in about a second, with a
//! containerd of its own under its exec root. It has no image of its own:
//! the test image is loaded from the main dockerd (`docker save | docker
//! load`).
//!
//! After a `kill -9` its containerd child exits too; a stale
//! `exec/containerd/containerd.pid` (or dockerd pid file) would make the next
//! start wait for "its" containerd and fail, so both are removed. A dockerd
//! started again stops the containers it finds (`live-restore` off).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::docker::{
    docker_cli, docker_command, dockerd_binary, kill9_dockerd, stop_dockerd, verify_container,
};
use crate::ping::{ping, wait_ping};
use crate::process::{alive, proc_comm, proc_state, read_pid, run, signal, spawn_daemon};
use crate::{CLI_TIMEOUT, PING_TIMEOUT, engines_file, env_nonempty, test_image};

/// Environment variable: the second dockerd's endpoint.
pub const ENV_DOCKER2_HOST: &str = "LOOKOUT_DOCKER2_HOST";
/// Where the second dockerd lives (socket, pid file, exec root).
const RUN_DIR: &str = "/run/lookout-docker2";
/// Its data root (images, containers).
const DATA_ROOT: &str = "/var/lib/lookout-docker2";
/// Its socket.
pub const DEFAULT_DOCKER2_HOST: &str = "unix:///run/lookout-docker2/docker.sock";

const READY: Duration = Duration::from_secs(60);

/// The second dockerd's own bridge, made before it starts (dockerd's
/// `--bridge` takes an existing one), with an address of its own: no route
/// leaves it, and no iptables rule is made for it.
pub const BRIDGE: &str = "lkdocker2";
/// The bridge's address (a private network no other engine here uses).
const BRIDGE_ADDRESS: &str = "10.213.117.1/24";

/// Makes the bridge `name` with `address` when it is missing: a dockerd
/// beside the main one takes it (`--bridge name`), rather than `--bridge
/// none`, which deletes the main one's `docker0`.
pub(crate) fn ensure_bridge(name: &str, address: &str) -> Result<(), String> {
    let ip = |args: &[&str]| run(Command::new("ip").args(args), "ip", CLI_TIMEOUT);
    if ip(&["link", "show", name]).is_ok() {
        return Ok(());
    }
    ip(&["link", "add", "name", name, "type", "bridge"])?;
    ip(&["addr", "add", address, "dev", name])?;
    ip(&["link", "set", name, "up"]).map(drop)
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

fn pid_file() -> PathBuf {
    Path::new(RUN_DIR).join("docker.pid")
}

fn exec_root() -> PathBuf {
    Path::new(RUN_DIR).join("exec")
}

fn managed() -> bool {
    docker2_host() == DEFAULT_DOCKER2_HOST
}

/// The second dockerd's pid (from its pid file), if it runs.
fn docker2_pid() -> Option<u32> {
    read_pid(&pid_file()).filter(|&pid| alive(pid) && proc_comm(pid).as_deref() == Some("dockerd"))
}

/// Removes the pid files of dead processes (its own and its containerd's).
fn remove_stale_pidfiles() {
    for f in [
        pid_file(),
        exec_root().join("containerd").join("containerd.pid"),
    ] {
        match read_pid(&f) {
            Some(pid) if alive(pid) => {}
            _ if f.exists() => {
                let _ = fs::remove_file(&f);
            }
            _ => {}
        }
    }
}

fn args() -> Result<Vec<String>, String> {
    // A config file of its own: `/etc/docker/daemon.json` must not apply
    // (a directive there and a flag here is an error; `live-restore` on
    // would keep containers running across a kill).
    let config = engines_file("daemon2.json")?;
    let json = "{\n  \"live-restore\": false\n}\n";
    if fs::read_to_string(&config).ok().as_deref() != Some(json) {
        fs::write(&config, json)
            .map_err(|e| format!("docker2: cannot write {}: {e}", config.display()))?;
    }
    let host = docker2_host();
    Ok([
        "--config-file",
        &config.display().to_string(),
        "--host",
        &host,
        "--data-root",
        DATA_ROOT,
        "--exec-root",
        &exec_root().display().to_string(),
        "--pidfile",
        &pid_file().display().to_string(),
        "--containerd-namespace",
        "lookout-docker2",
        "--containerd-plugins-namespace",
        "lookout-docker2-p",
        "--bridge",
        BRIDGE,
        "--iptables=false",
        "--ip-masq=false",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect())
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
    if ping(&host, PING_TIMEOUT).is_ok() {
        return Ok(());
    }
    if !managed() {
        return Err(format!(
            "docker2: {host} (from {ENV_DOCKER2_HOST}) does not answer and is not ours to start"
        ));
    }
    let log = engines_file("dockerd2.log")?;
    if let Some(pid) = docker2_pid() {
        if proc_state(pid) == Some('T') {
            signal(pid, "CONT").map_err(|e| format!("docker2: {e}"))?;
        }
        return wait_ping("docker2", &host, READY, &mut None, &log)
            .map(drop)
            .map_err(|e| format!("{e}\n(dockerd pid {pid} runs but does not answer)"));
    }
    fs::create_dir_all(RUN_DIR).map_err(|e| format!("docker2: cannot create {RUN_DIR}: {e}"))?;
    remove_stale_pidfiles();
    ensure_bridge(BRIDGE, BRIDGE_ADDRESS)?;
    let dockerd = dockerd_binary()?;
    let mut child = Some(
        spawn_daemon(&dockerd, &args()?, &[], &log, None)
            .map_err(|e| format!("docker2: {e}; read {}", log.display()))?,
    );
    let took = wait_ping("docker2", &host, READY, &mut child, &log)?;
    eprintln!(
        "[engines] docker2: a second dockerd (pid {}) answers on {host} after {took:.1?} (log: {})",
        docker2_pid().map_or_else(|| "?".to_owned(), |p| p.to_string()),
        log.display()
    );
    Ok(())
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
    let pid = docker2_pid().ok_or_else(|| "docker2: no second dockerd to kill".to_owned())?;
    kill9_dockerd("docker2", pid)?;
    remove_stale_pidfiles();
    Ok(())
}

/// Stop the second dockerd (SIGTERM: it stops its containers; SIGKILL after
/// 60 s).
pub fn docker2_down() -> Result<(), String> {
    if let Some(pid) = docker2_pid() {
        stop_dockerd("docker2", pid)?;
    }
    remove_stale_pidfiles();
    Ok(())
}
