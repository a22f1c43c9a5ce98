//! A private sshd on 127.0.0.1, for the `ssh://` tests: Debian's
//! openssh-server with its own configuration, host key and client key under
//! [`SSHD_DIR`], key authentication only, and a `Host lookout-sshd` entry in
//! the system ssh configuration (`/etc/ssh/ssh_config.d/lookout-sshd.conf`)
//! that names its address, port, user, key and known host key, so that
//! `ssh lookout-sshd` and `docker -H ssh://lookout-sshd` work as they would
//! for any configured host. Machine-wide (like dockerd), so two checkouts
//! share it. The machine's own sshd, if any, and its configuration are not
//! touched; installing the package never starts Debian's ssh service (a
//! `policy-rc.d` that forbids it, only when none exists, only meanwhile).

use std::fs;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use crate::packages::install_without_service;
use crate::process::{
    alive, children_named, proc_comm, read_pid, run, signal, spawn_daemon, wait_dead,
};

/// The `Host` alias of the test sshd in the system ssh configuration.
pub const SSH_HOST_ALIAS: &str = "lookout-sshd";
/// Where the test sshd's configuration, keys, pid file and log are.
pub const SSHD_DIR: &str = "/var/lib/lookout-sshd";
/// Its port on 127.0.0.1.
pub const SSHD_PORT: u16 = 22_022;
/// The system ssh configuration file with the `Host` entry.
pub const SSH_CONFIG_ENTRY: &str = "/etc/ssh/ssh_config.d/lookout-sshd.conf";

const SSHD: &str = "/usr/sbin/sshd";
const READY: Duration = Duration::from_secs(20);
const CLI: Duration = Duration::from_secs(60);

fn file(name: &str) -> PathBuf {
    Path::new(SSHD_DIR).join(name)
}

fn write_if_changed(path: &Path, text: &str) -> Result<(), String> {
    if fs::read_to_string(path).ok().as_deref() == Some(text) {
        return Ok(());
    }
    fs::write(path, text).map_err(|e| format!("sshd: cannot write {}: {e}", path.display()))
}

/// `ssh://lookout-sshd`: dockerd's default socket through the test sshd.
pub fn sshd_docker_host() -> String {
    format!("ssh://{SSH_HOST_ALIAS}")
}

/// `ssh://lookout-sshd/run/podman/podman.sock`: the Podman API service
/// through the test sshd.
pub fn sshd_podman_host() -> String {
    let socket = crate::podman_host();
    let socket = socket.strip_prefix("unix://").unwrap_or(&socket).to_owned();
    format!("ssh://{SSH_HOST_ALIAS}{socket}")
}

/// Installs openssh-server without starting Debian's ssh service.
fn install() -> Result<(), String> {
    install_without_service("sshd", SSHD, "openssh-server")
}

/// Keys, configuration, the `Host` entry: written when missing or changed.
fn configure() -> Result<(), String> {
    fs::create_dir_all(SSHD_DIR).map_err(|e| format!("sshd: cannot create {SSHD_DIR}: {e}"))?;
    run(
        Command::new("chmod").args(["700", SSHD_DIR]),
        "sshd: chmod",
        CLI,
    )?;
    // The privilege separation directory sshd needs.
    fs::create_dir_all("/run/sshd").map_err(|e| format!("sshd: cannot create /run/sshd: {e}"))?;
    for key in ["host_ed25519", "id_ed25519"] {
        let path = file(key);
        if !path.exists() {
            run(
                Command::new("ssh-keygen")
                    .args(["-q", "-t", "ed25519", "-N", "", "-C"])
                    .arg(format!("lookout-{key}"))
                    .arg("-f")
                    .arg(&path),
                "sshd: ssh-keygen",
                CLI,
            )?;
        }
    }
    let read = |name: &str| {
        fs::read_to_string(file(name)).map_err(|e| format!("sshd: cannot read {name}: {e}"))
    };
    write_if_changed(&file("authorized_keys"), &read("id_ed25519.pub")?)?;
    // `TYPE KEY` of the host key, under the alias (HostKeyAlias).
    let host_key = read("host_ed25519.pub")?;
    let host_key: Vec<&str> = host_key.split_whitespace().take(2).collect();
    write_if_changed(
        &file("known_hosts"),
        &format!("{SSH_HOST_ALIAS} {}\n", host_key.join(" ")),
    )?;
    let dir = SSHD_DIR;
    write_if_changed(
        &file("sshd_config"),
        &format!(
            "# lookout's test sshd (cargo xtask engines up): loopback only, keys only.\n\
             Port {SSHD_PORT}\nListenAddress 127.0.0.1\nHostKey {dir}/host_ed25519\n\
             PidFile {dir}/sshd.pid\nAuthorizedKeysFile {dir}/authorized_keys\n\
             AllowUsers root\nPermitRootLogin prohibit-password\nPubkeyAuthentication yes\n\
             PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\n\
             StrictModes no\nPrintMotd no\n"
        ),
    )?;
    write_if_changed(
        Path::new(SSH_CONFIG_ENTRY),
        &format!(
            "# Written by lookout's `cargo xtask engines up`: its test sshd ({dir}).\n\
             Host {SSH_HOST_ALIAS}\n    HostName 127.0.0.1\n    Port {SSHD_PORT}\n    User root\n\
             \x20   IdentityFile {dir}/id_ed25519\n    IdentitiesOnly yes\n\
             \x20   HostKeyAlias {SSH_HOST_ALIAS}\n    UserKnownHostsFile {dir}/known_hosts\n\
             \x20   StrictHostKeyChecking yes\n"
        ),
    )
}

/// The listening sshd's pid, when it runs.
pub fn sshd_pid() -> Option<u32> {
    read_pid(&file("sshd.pid"))
        .filter(|pid| alive(*pid) && proc_comm(*pid).as_deref() == Some("sshd"))
}

fn answers() -> bool {
    TcpStream::connect_timeout(&([127, 0, 0, 1], SSHD_PORT).into(), Duration::from_secs(1)).is_ok()
}

/// Starts the test sshd (detached, `-D`, log `sshd.log`) unless it runs;
/// waits until it accepts on its port (bounded).
pub fn sshd_start() -> Result<(), String> {
    if sshd_pid().is_some() && answers() {
        return Ok(());
    }
    let log = file("sshd.log");
    let args = vec![
        "-D".to_owned(),
        "-e".to_owned(),
        "-f".to_owned(),
        file("sshd_config").display().to_string(),
    ];
    let mut child =
        spawn_daemon(Path::new(SSHD), &args, &[], &log, None).map_err(|e| format!("sshd: {e}"))?;
    let deadline = Instant::now() + READY;
    while Instant::now() < deadline {
        if answers() && sshd_pid().is_some() {
            return Ok(());
        }
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!(
                "sshd: exited ({status}) before listening; read {}:\n{}",
                log.display(),
                crate::tail_file(&log, 20)
            ));
        }
        thread::sleep(Duration::from_millis(50));
    }
    Err(format!(
        "sshd: not listening on 127.0.0.1:{SSHD_PORT} within {READY:?}; read {}",
        log.display()
    ))
}

/// Installs, configures and starts the test sshd (cheap when all is in place).
pub fn sshd_up() -> Result<(), String> {
    install()?;
    configure()?;
    sshd_start()
}

/// `kill -9` the listening sshd and every session it serves (their
/// connections drop at once, as when a host goes away), and waits until
/// they are gone.
pub fn sshd_kill9() -> Result<(), String> {
    let pid = sshd_pid().ok_or("sshd: not running")?;
    let sessions = children_named(pid, "sshd");
    signal(pid, "KILL")?;
    for s in &sessions {
        let _ = signal(*s, "KILL");
    }
    for p in std::iter::once(&pid).chain(&sessions) {
        if !wait_dead(*p, Duration::from_secs(10)) {
            return Err(format!("sshd: pid {p} did not exit after SIGKILL"));
        }
    }
    let _ = fs::remove_file(file("sshd.pid"));
    Ok(())
}

/// Stops the test sshd (its sessions too); its files stay.
pub fn sshd_down() -> Result<(), String> {
    if sshd_pid().is_none() {
        return Ok(());
    }
    sshd_kill9()
}

/// Checks the whole path as the docker CLI takes it: `docker -H
/// ssh://lookout-sshd version` and `ssh lookout-sshd podman version`.
pub fn sshd_verify() -> Result<(), String> {
    let mut docker = Command::new(crate::docker_cli());
    docker.env_remove("DOCKER_CONTEXT").args([
        "-H",
        &sshd_docker_host(),
        "version",
        "--format",
        "{{.Server.APIVersion}}",
    ]);
    run(
        &mut docker,
        "sshd: docker -H ssh://lookout-sshd version",
        CLI,
    )?;
    run(
        Command::new("ssh").args(["-o", "BatchMode=yes", SSH_HOST_ALIAS, "podman", "--version"]),
        "sshd: ssh lookout-sshd podman --version",
        CLI,
    )
    .map(drop)
}
