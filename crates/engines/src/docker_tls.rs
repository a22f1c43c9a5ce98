//! A second dockerd that listens on 127.0.0.1 over TCP with `--tlsverify`
//! (client certificates from the test CA), for the tests of a docker
//! context with TLS material: its own data root, exec root, containerd
//! namespace and socket (`unix:///run/lookout-docker-tls/docker.sock`, for
//! control), a bridge of its own, no iptables. Machine-wide, like dockerd; its
//! certificates are the test CA's (`crates/moby/tests/certs`), copied under
//! its data root.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::ping::{ping, wait_ping};
use crate::process::{alive, proc_comm, read_pid, signal, spawn_daemon, wait_dead};
use crate::{PING_TIMEOUT, workspace_root};

/// Its TCP port on 127.0.0.1 (TLS, client certificates required).
pub const DOCKER_TLS_PORT: u16 = 23_760;
const ROOT: &str = "/var/lib/lookout-docker-tls";
const RUN: &str = "/run/lookout-docker-tls";
const READY: Duration = Duration::from_secs(90);
/// Its own bridge, and the bridge's address (no route leaves it).
const BRIDGE: &str = "lkdockertls";
const BRIDGE_ADDRESS: &str = "10.213.118.1/24";

/// `tcp://127.0.0.1:23760`: the TLS endpoint.
pub fn docker_tls_host() -> String {
    format!("tcp://127.0.0.1:{DOCKER_TLS_PORT}")
}

/// Its control socket (plain, local): `unix:///run/lookout-docker-tls/docker.sock`.
pub fn docker_tls_socket() -> String {
    format!("unix://{RUN}/docker.sock")
}

/// The client's certificates (`ca.pem`, `cert.pem`, `key.pem`) of the test CA.
pub fn docker_tls_certs() -> PathBuf {
    Path::new(ROOT).join("certs")
}

fn pid() -> Option<u32> {
    read_pid(&Path::new(RUN).join("docker.pid"))
        .filter(|p| alive(*p) && proc_comm(*p).as_deref() == Some("dockerd"))
}

/// Copies the test certificates, writes an empty daemon config, and starts
/// the TLS dockerd unless its socket answers; waits (bounded) until it does.
pub fn docker_tls_up() -> Result<(), String> {
    let socket = docker_tls_socket();
    if ping(&socket, PING_TIMEOUT).is_ok() {
        return Ok(());
    }
    let certs = docker_tls_certs();
    fs::create_dir_all(&certs).map_err(|e| format!("docker-tls: {}: {e}", certs.display()))?;
    fs::create_dir_all(RUN).map_err(|e| format!("docker-tls: {RUN}: {e}"))?;
    let source = workspace_root().join("crates/moby/tests/certs");
    for f in [
        "ca.pem",
        "cert.pem",
        "key.pem",
        "server-cert.pem",
        "server-key.pem",
    ] {
        fs::copy(source.join(f), certs.join(f))
            .map_err(|e| format!("docker-tls: copying {f} from {}: {e}", source.display()))?;
    }
    let config = Path::new(ROOT).join("daemon.json");
    fs::write(&config, "{}\n").map_err(|e| format!("docker-tls: {}: {e}", config.display()))?;
    if let Some(p) = pid() {
        // Starting (or stuck): its start gets the time a start gets.
        let log = Path::new(ROOT).join("dockerd.log");
        return wait_ping("docker-tls", &socket, READY, &mut None, &log)
            .map(drop)
            .map_err(|e| format!("{e} (dockerd pid {p})"));
    }
    // A dockerd killed earlier leaves its containerd's pid file behind.
    let _ = fs::remove_file(Path::new(RUN).join("exec/containerd/containerd.pid"));
    let _ = fs::remove_file(Path::new(RUN).join("docker.pid"));
    let cert = |f: &str| certs.join(f).display().to_string();
    let args: Vec<String> = [
        "--config-file".to_owned(),
        config.display().to_string(),
        "--host".to_owned(),
        docker_tls_host(),
        "--host".to_owned(),
        socket.clone(),
        "--tlsverify".to_owned(),
        "--tlscacert".to_owned(),
        cert("ca.pem"),
        "--tlscert".to_owned(),
        cert("server-cert.pem"),
        "--tlskey".to_owned(),
        cert("server-key.pem"),
        "--data-root".to_owned(),
        format!("{ROOT}/data"),
        "--exec-root".to_owned(),
        format!("{RUN}/exec"),
        "--pidfile".to_owned(),
        format!("{RUN}/docker.pid"),
        "--containerd-namespace".to_owned(),
        "lookout-tls".to_owned(),
        "--containerd-plugins-namespace".to_owned(),
        "lookout-tls-p".to_owned(),
        // A bridge of its own: `--bridge none` would delete `docker0`, the
        // main dockerd's (see `docker2`).
        "--bridge".to_owned(),
        BRIDGE.to_owned(),
        "--iptables=false".to_owned(),
        "--ip-masq=false".to_owned(),
    ]
    .to_vec();
    crate::docker2::ensure_bridge(BRIDGE, BRIDGE_ADDRESS)
        .map_err(|e| format!("docker-tls: {e}"))?;
    let log = Path::new(ROOT).join("dockerd.log");
    let dockerd = Path::new("/usr/sbin/dockerd");
    let mut child = Some(
        spawn_daemon(dockerd, &args, &[], &log, None).map_err(|e| format!("docker-tls: {e}"))?,
    );
    wait_ping("docker-tls", &socket, READY, &mut child, &log).map(drop)
}

/// Stops the TLS dockerd (SIGTERM, then waits; its data stays).
pub fn docker_tls_down() -> Result<(), String> {
    let Some(p) = pid() else {
        return Ok(());
    };
    signal(p, "TERM")?;
    if wait_dead(p, Duration::from_secs(30)) {
        Ok(())
    } else {
        Err(format!(
            "docker-tls: dockerd pid {p} did not exit after SIGTERM"
        ))
    }
}
