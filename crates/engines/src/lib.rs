//! Start, stop and break the real engines that lookout's end-to-end tests run
//! against: dockerd, the Podman API service, a single-node Docker Swarm, a
//! kube-apiserver + etcd testbed, a 3-member etcd cluster on loopback (the
//! etcd provider's tests), a private sshd on 127.0.0.1 for the
//! `ssh://` tests, a second dockerd on 127.0.0.1 with `--tlsverify` for the
//! tests of a docker context with TLS material, another dockerd beside the
//! main one for the tests of several engines in one stream, a non-root
//! user's own rootless Podman service (the rootless socket rule's tests),
//! headless Chromium (the `--serve` page's tests), and nginx on 127.0.0.1
//! (the `--render` tests).
//!
//! A std-only crate: the end-to-end tests (`lookout-e2e`, as
//! `lookout_e2e::engines`) and xtask (`cargo xtask engines up|down`, `cargo
//! xtask ci`) depend on it, so tests and CI control the engines with the same
//! code.
//!
//! Every function returns `Result<_, String>`; an error names the engine and
//! the log file to read. Every wait is bounded in time, every loop in count.
//!
//! State lives under `<workspace>/target/engines/`:
//!
//! | file | what |
//! | --- | --- |
//! | `dockerd.log`, `dockerd.pid`, `daemon.json` | dockerd's log, pid file and config (`live-restore: false`) |
//! | `dockerd2.log`, `daemon2.json` | the second dockerd's log and config (its socket and pid file under `/run/lookout-docker2`, its data under `/var/lib/lookout-docker2`) |
//! | `podman.log`, `podman.pid`, `containers.conf` | the Podman API service (`CONTAINERS_CONF`) |
//! | `apt.log`, `image-build.log`, `k8s-build.log` | package installs, the test image build, the k8s testbed build |
//! | `k8s/` | the k8s testbed: `kubeconfig`, `env`, `apiserver.log`, `etcd.log`, pid files |
//! | `etcd/` | the etcd cluster: members `e1`..`e3` (data directories), `eN.log`, `eN.pid` |
//! | `nginx/` | the test nginx: `nginx.conf`, `conf.d/` (the tests' rendered virtual hosts), `nginx.pid`, `logs/`, `tmp/` |
//! | `NAME/` (e.g. `etcd-partition/`) | a test's private etcd cluster ([`EtcdCluster`]), the same files; its data directories removed when it is dropped (the logs kept), all wiped when it starts again |
//!
//! The test sshd is machine-wide, under `/var/lib/lookout-sshd` (keys,
//! `sshd_config`, `sshd.pid`, `sshd.log`), with its `Host lookout-sshd` entry
//! in `/etc/ssh/ssh_config.d/lookout-sshd.conf`. So is rootless Podman: the
//! user `lookoutrl`, its `/run/user/UID`, and the engine's state under
//! `/var/lib/lookout-podman-rootless` (what it added, the service's pid file
//! and log).
//!
//! A test that breaks an engine (kill, stop, restart) should hold
//! `lock_engine(engine, true)` while it does; tests that merely use it may hold
//! `lock_engine(engine, false)`. The locks are machine-wide
//! (`$TMPDIR/lookout-engines/NAME.lock`), as dockerd and podman are: two
//! checkouts testing at once do not kill each other's daemon mid-test.

mod beside;
mod chromium;
mod docker;
mod docker2;
mod docker_tls;
mod etcd;
mod k8s;
mod nginx;
mod packages;
mod ping;
mod podman;
mod podman_rootless;
mod process;
mod require;
mod sshd;
mod swarm;

pub use chromium::{chromium_binary, chromium_command, chromium_up, chromium_verify};
pub use docker::{
    docker, docker_cli, docker_command, docker_create_test_container, docker_down, docker_kill9,
    docker_signal, docker_start, docker_up, docker_verify, ensure_test_image,
};
pub use docker_tls::{
    DOCKER_TLS_PORT, docker_tls_certs, docker_tls_down, docker_tls_host, docker_tls_socket,
    docker_tls_up,
};
pub use docker2::{
    DEFAULT_DOCKER2_HOST, ENV_DOCKER2_HOST, docker2, docker2_command, docker2_down, docker2_host,
    docker2_kill9, docker2_start, docker2_up, docker2_verify,
};
pub use etcd::{
    ENV_ETCD_ENDPOINTS, ETCD_MEMBERS, EtcdCluster, PROGRESS_NOTIFY, etcd_compact, etcd_db_size,
    etcd_dir, etcd_down, etcd_end_all, etcd_endpoints, etcd_healthy, etcd_kill9, etcd_leader,
    etcd_member_pid, etcd_member_url, etcd_revision, etcd_signal, etcd_start, etcd_status,
    etcd_stop, etcd_up,
};
pub use k8s::{
    k8s_build, k8s_compact, k8s_dir, k8s_down, k8s_kill_apiserver, k8s_kubeconfig,
    k8s_restart_apiserver, k8s_signal_apiserver, k8s_status, k8s_up, kstatus_binary,
    kubectl_binary,
};
pub use nginx::{
    ENV_NGINX_ADDR, ENV_NGINX_DIR, NGINX_PORT, nginx_addr, nginx_command, nginx_dir, nginx_down,
    nginx_pid, nginx_up, nginx_verify,
};
pub use packages::{ensure_debian, ensure_packages};
pub use ping::ping;
pub use podman::{
    podman, podman_command, podman_down, podman_kill9, podman_signal, podman_start, podman_up,
    podman_verify,
};
pub use podman_rootless::{
    PODMAN_ROOTLESS_HOME, PODMAN_ROOTLESS_STATE, PODMAN_ROOTLESS_USER, podman_rootless,
    podman_rootless_as_user, podman_rootless_command, podman_rootless_down, podman_rootless_host,
    podman_rootless_runtime_dir, podman_rootless_socket, podman_rootless_start,
    podman_rootless_stop, podman_rootless_uid, podman_rootless_up, podman_rootless_verify,
};
pub use process::{Output, run, run_output, tail_file};
pub use require::{require, skips};
pub use sshd::{
    SSH_CONFIG_ENTRY, SSH_HOST_ALIAS, SSHD_DIR, SSHD_PORT, sshd_docker_host, sshd_down, sshd_kill9,
    sshd_pid, sshd_podman_host, sshd_start, sshd_up, sshd_verify,
};
pub use swarm::{swarm_down, swarm_service_create, swarm_up, swarm_verify, swarm_wait_running};

use std::fs::{self, File, OpenOptions};
use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant};

/// The image every end-to-end test runs: a static busybox on `scratch`, with
/// `ENTRYPOINT ["/bin/busybox"]` (`docker run --network none IMAGE sleep 3600`).
pub const TEST_IMAGE: &str = "lookout-test/busybox";
/// dockerd's socket when `LOOKOUT_DOCKER_HOST` is not set.
pub const DEFAULT_DOCKER_HOST: &str = "unix:///var/run/docker.sock";
/// The Podman API service's socket when `LOOKOUT_PODMAN_HOST` is not set.
pub const DEFAULT_PODMAN_HOST: &str = "unix:///run/podman/podman.sock";

/// Environment variable: the Docker endpoint (`unix://…` or `tcp://…`).
pub const ENV_DOCKER_HOST: &str = "LOOKOUT_DOCKER_HOST";
/// Environment variable: the Podman (Docker-compatible) endpoint.
pub const ENV_PODMAN_HOST: &str = "LOOKOUT_PODMAN_HOST";
/// Environment variable: the kubeconfig of the k8s testbed.
pub const ENV_KUBECONFIG: &str = "LOOKOUT_KUBECONFIG";
/// Environment variable: the test image name ([`TEST_IMAGE`]).
pub const ENV_TEST_IMAGE: &str = "LOOKOUT_TEST_IMAGE";
/// Environment variable: `1` when `cargo xtask` brought the engines up.
pub const ENV_ENGINES: &str = "LOOKOUT_ENGINES";

const EXIT_WAIT: Duration = Duration::from_secs(20);
const CLI_TIMEOUT: Duration = Duration::from_secs(120);
const PING_TIMEOUT: Duration = Duration::from_secs(2);

// ------------------------------------------------------------------ paths, env

/// The workspace root: the nearest ancestor holding a `Cargo.toml` with a
/// `[workspace]` table, searched from `CARGO_MANIFEST_DIR` (set by cargo for
/// `cargo run`/`cargo test`), then from the current directory; else the parent
/// of `crates/`, where this crate was compiled.
pub fn workspace_root() -> PathBuf {
    let mut starts: Vec<PathBuf> = Vec::new();
    if let Some(dir) = std::env::var_os("CARGO_MANIFEST_DIR") {
        starts.push(PathBuf::from(dir));
    }
    if let Ok(dir) = std::env::current_dir() {
        starts.push(dir);
    }
    for start in &starts {
        for dir in start.ancestors().take(32) {
            if let Ok(text) = fs::read_to_string(dir.join("Cargo.toml"))
                && text.lines().any(|l| l.trim() == "[workspace]")
            {
                return dir.to_path_buf();
            }
        }
    }
    let compiled = Path::new(env!("CARGO_MANIFEST_DIR"));
    compiled
        .ancestors()
        .nth(2)
        .unwrap_or(compiled)
        .to_path_buf()
}

/// `<workspace>/target/engines`, created if missing: logs, pid files, configs.
pub fn engines_dir() -> Result<PathBuf, String> {
    let dir = workspace_root().join("target").join("engines");
    fs::create_dir_all(&dir)
        .map_err(|e| format!("engines: cannot create {}: {e}", dir.display()))?;
    Ok(dir)
}

fn engines_file(name: &str) -> Result<PathBuf, String> {
    Ok(engines_dir()?.join(name))
}

fn env_nonempty(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// The Docker endpoint: `LOOKOUT_DOCKER_HOST`, else [`DEFAULT_DOCKER_HOST`].
pub fn docker_host() -> String {
    env_nonempty(ENV_DOCKER_HOST).unwrap_or_else(|| DEFAULT_DOCKER_HOST.to_owned())
}

/// The Podman endpoint: `LOOKOUT_PODMAN_HOST`, else [`DEFAULT_PODMAN_HOST`].
pub fn podman_host() -> String {
    env_nonempty(ENV_PODMAN_HOST).unwrap_or_else(|| DEFAULT_PODMAN_HOST.to_owned())
}

/// The test image: `LOOKOUT_TEST_IMAGE`, else [`TEST_IMAGE`].
pub fn test_image() -> String {
    env_nonempty(ENV_TEST_IMAGE).unwrap_or_else(|| TEST_IMAGE.to_owned())
}

/// Whether `cargo xtask` brought the engines up for this run (`LOOKOUT_ENGINES=1`).
/// Tests may skip (loudly) when it is not set; under `cargo xtask ci` it always is.
pub fn engines_enabled() -> bool {
    std::env::var(ENV_ENGINES).is_ok_and(|v| v.trim() == "1")
}

/// The environment of a test run against the engines: `LOOKOUT_DOCKER_HOST`,
/// `LOOKOUT_PODMAN_HOST`, `LOOKOUT_TEST_IMAGE`, `LOOKOUT_KUBECONFIG` and
/// `KUBECONFIG`, `LOOKOUT_ETCD_ENDPOINTS`, `LOOKOUT_ENGINES=1`, and the variables of the k8s testbed's
/// `env` file (`LOOKOUT_K8S_SERVER`, `LOOKOUT_APISERVER_PID_FILE`, …) when it
/// is up.
pub fn env_vars() -> Vec<(String, String)> {
    let mut vars: Vec<(String, String)> = Vec::new();
    if let Ok(dir) = k8s_dir()
        && let Ok(text) = fs::read_to_string(dir.join("env"))
    {
        for line in text.lines() {
            if let Some((k, v)) = line.split_once('=')
                && !k.trim().is_empty()
                && !k.trim_start().starts_with('#')
            {
                vars.push((k.trim().to_owned(), v.trim().to_owned()));
            }
        }
    }
    let kubeconfig = k8s_kubeconfig().map_or_else(|_| String::new(), |p| p.display().to_string());
    let ours = [
        (ENV_DOCKER_HOST, docker_host()),
        (ENV_DOCKER2_HOST, docker2_host()),
        (ENV_PODMAN_HOST, podman_host()),
        (ENV_TEST_IMAGE, test_image()),
        (ENV_KUBECONFIG, kubeconfig.clone()),
        ("KUBECONFIG", kubeconfig),
        (ENV_ETCD_ENDPOINTS, etcd_endpoints()),
        (ENV_NGINX_ADDR, nginx_addr()),
        (
            ENV_NGINX_DIR,
            nginx_dir().map_or_else(|_| String::new(), |d| d.display().to_string()),
        ),
        (ENV_ENGINES, "1".to_owned()),
    ];
    for (k, v) in ours {
        vars.retain(|(name, _)| name != k);
        vars.push((k.to_owned(), v));
    }
    vars
}

// ------------------------------------------------------------------ locks

/// A cross-process lock on one engine (a `flock` on `$TMPDIR/lookout-engines/NAME.lock`),
/// released on drop.
#[derive(Debug)]
pub struct EngineLock {
    file: File,
    path: PathBuf,
}

impl EngineLock {
    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for EngineLock {
    fn drop(&mut self) {
        let _ = self.file.unlock();
    }
}

/// Take the lock of `engine` (`"docker"`, `"podman"`, `"k8s"`, …): `exclusive`
/// for a test that breaks the engine, shared for one that only uses it. Waits
/// at most 15 minutes (other test binaries may hold it meanwhile).
pub fn lock_engine(engine: &str, exclusive: bool) -> Result<EngineLock, String> {
    if engine.is_empty()
        || !engine
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-')
    {
        return Err(format!("engines: bad engine name {engine:?} for a lock"));
    }
    let dir = std::env::temp_dir().join("lookout-engines");
    fs::create_dir_all(&dir)
        .map_err(|e| format!("{engine}: cannot create {}: {e}", dir.display()))?;
    let path = dir.join(format!("{engine}.lock"));
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| format!("{engine}: cannot open lock {}: {e}", path.display()))?;
    let deadline = Instant::now() + Duration::from_secs(900);
    loop {
        let got = if exclusive {
            file.try_lock()
        } else {
            file.try_lock_shared()
        };
        match got {
            Ok(()) => return Ok(EngineLock { file, path }),
            Err(std::fs::TryLockError::WouldBlock) if Instant::now() < deadline => {
                thread::sleep(Duration::from_millis(50));
            }
            Err(e) => {
                return Err(format!(
                    "{engine}: cannot take lock {}: {e}",
                    path.display()
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_workspace_root() {
        let root = workspace_root();
        assert!(root.join("Cargo.toml").exists());
        assert!(
            root.join("crates")
                .join("engines")
                .join("Cargo.toml")
                .exists()
        );
    }

    #[test]
    fn env_vars_name_every_engine() {
        let vars = env_vars();
        for name in [
            ENV_DOCKER_HOST,
            ENV_PODMAN_HOST,
            ENV_TEST_IMAGE,
            ENV_KUBECONFIG,
            "KUBECONFIG",
            ENV_ETCD_ENDPOINTS,
            ENV_ENGINES,
        ] {
            assert!(
                vars.iter().any(|(k, _)| k == name),
                "{name} missing from {vars:?}"
            );
        }
    }
}
