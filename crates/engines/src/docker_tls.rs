//! A second dockerd that listens on 127.0.0.1 over TCP with `--tlsverify`
//! (client certificates from the test CA), for the tests of a docker
//! context with TLS material: its own data root, exec root, containerd
//! namespace and socket (`unix:///run/lookout-docker-tls/docker.sock`, for
//! control), a bridge of its own, no iptables (see [`beside`](crate::beside)). Machine-wide, like dockerd; its
//! certificates are the test CA's (`crates/moby/tests/certs`), copied under
//! its data root.

use std::fs;
use std::path::{Path, PathBuf};

use crate::beside::Beside;
use crate::ping::ping;
use crate::{PING_TIMEOUT, workspace_root};

/// Its TCP port on 127.0.0.1 (TLS, client certificates required).
pub const DOCKER_TLS_PORT: u16 = 23_760;
const ROOT: &str = "/var/lib/lookout-docker-tls";
const RUN: &str = "/run/lookout-docker-tls";

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

fn beside() -> Beside {
    Beside {
        name: "docker-tls",
        run: RUN,
        data_root: "/var/lib/lookout-docker-tls/data",
        namespace: "lookout-tls",
        bridge: "lkdockertls",
        bridge_address: "10.213.118.1/24",
        config: Path::new(ROOT).join("daemon.json"),
        log: Path::new(ROOT).join("dockerd.log"),
    }
}

/// Copies the test certificates and starts the TLS dockerd unless its
/// socket answers; waits (bounded) until it does.
pub fn docker_tls_up() -> Result<(), String> {
    if ping(&docker_tls_socket(), PING_TIMEOUT).is_ok() {
        return Ok(());
    }
    let certs = docker_tls_certs();
    fs::create_dir_all(&certs).map_err(|e| format!("docker-tls: {}: {e}", certs.display()))?;
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
    let cert = |f: &str| certs.join(f).display().to_string();
    let tls = [
        "--tlsverify".to_owned(),
        "--tlscacert".to_owned(),
        cert("ca.pem"),
        "--tlscert".to_owned(),
        cert("server-cert.pem"),
        "--tlskey".to_owned(),
        cert("server-key.pem"),
    ];
    beside().start(&[docker_tls_host()], &tls)
}

/// Stops the TLS dockerd (SIGTERM, then waits; its data stays).
pub fn docker_tls_down() -> Result<(), String> {
    beside().down()
}
