//! Rootless Podman: a non-root system user's own `podman system service` on
//! its own socket under `/run/user/UID`, for the tests of lookout's rootless
//! socket rule (lookout run as that user finds it; it never falls back to
//! the rootful socket).
//!
//! Machine-wide, like dockerd. `podman_rootless_up` (idempotent, as root)
//! makes what is missing and notes what it added in
//! [`PODMAN_ROOTLESS_STATE`]`/added`:
//!
//! - the system user [`PODMAN_ROOTLESS_USER`] (home [`PODMAN_ROOTLESS_HOME`],
//!   shell `nologin`), where its storage (vfs) and the test image are;
//! - its subordinate id ranges (`/etc/subuid`, `/etc/subgid`:
//!   `USER:200000:65536`), which rootless Podman's user namespace needs;
//! - its runtime directory `/run/user/UID` (mode 0700, the user's), as a
//!   login would make it;
//! - the socket's directory `/run/user/UID/podman`, the user's;
//! - the service: `runuser -u USER -- env -i … XDG_RUNTIME_DIR=/run/user/UID
//!   podman system service --time=0 unix:///run/user/UID/podman/podman.sock`,
//!   detached, log `service.log`, its podman's pid in `service.pid`, checked
//!   by a `/_ping`;
//! - the test image, `docker save` (from the main dockerd) then `podman
//!   load` as the user.
//!
//! `podman_rootless_down` kills only the service it started (its pid file)
//! and the user's own Podman pause process (Podman's pid file of it), then
//! removes what `added` names, and the state directory.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::docker::{docker_command, docker_up, verify_container};
use crate::packages::ensure_debian;
use crate::ping::{ping, wait_ping};
use crate::process::{
    alive, children_named, find_procs, proc_cmdline, proc_comm, read_pid, run, run_output, signal,
    spawn_daemon, wait_dead,
};
use crate::{CLI_TIMEOUT, EXIT_WAIT, PING_TIMEOUT, test_image};

/// The system user whose own Podman service this is.
pub const PODMAN_ROOTLESS_USER: &str = "lookoutrl";
/// Its home: its Podman storage and configuration.
pub const PODMAN_ROOTLESS_HOME: &str = "/var/lib/lookoutrl";
/// The engine's state: `added`, `service.pid`, `service.log`.
pub const PODMAN_ROOTLESS_STATE: &str = "/var/lib/lookout-podman-rootless";

/// Its subordinate uid and gid range (`START:COUNT`).
const SUBID_RANGE: &str = "200000:65536";
const READY: Duration = Duration::from_secs(60);
/// The user's `PATH` (a clean environment).
const USER_PATH: &str = "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin";

fn state(name: &str) -> PathBuf {
    Path::new(PODMAN_ROOTLESS_STATE).join(name)
}

/// `(uid, gid)` of `user` in `/etc/passwd`, `None` when there is no such user.
fn passwd_ids(user: &str) -> Result<Option<(u32, u32)>, String> {
    let text = fs::read_to_string("/etc/passwd")
        .map_err(|e| format!("podman-rootless: cannot read /etc/passwd: {e}"))?;
    for line in text.lines() {
        let fields: Vec<&str> = line.split(':').collect();
        if fields.first() == Some(&user) && fields.len() >= 4 {
            let parse = |s: &str| {
                s.parse::<u32>()
                    .map_err(|e| format!("podman-rootless: /etc/passwd: {user}: bad id {s:?}: {e}"))
            };
            return Ok(Some((parse(fields[2])?, parse(fields[3])?)));
        }
    }
    Ok(None)
}

/// The uid of [`PODMAN_ROOTLESS_USER`] (an error when the user does not exist).
pub fn podman_rootless_uid() -> Result<u32, String> {
    passwd_ids(PODMAN_ROOTLESS_USER)?
        .map(|(uid, _)| uid)
        .ok_or_else(|| {
            format!(
                "podman-rootless: no user {PODMAN_ROOTLESS_USER} \
             (`cargo xtask engines up podman-rootless`)"
            )
        })
}

/// The user's runtime directory: `/run/user/UID`.
pub fn podman_rootless_runtime_dir() -> Result<PathBuf, String> {
    Ok(PathBuf::from(format!(
        "/run/user/{}",
        podman_rootless_uid()?
    )))
}

/// The user's Podman socket: `/run/user/UID/podman/podman.sock`.
pub fn podman_rootless_socket() -> Result<PathBuf, String> {
    Ok(podman_rootless_runtime_dir()?.join("podman/podman.sock"))
}

/// `unix:///run/user/UID/podman/podman.sock`.
pub fn podman_rootless_host() -> Result<String, String> {
    Ok(format!("unix://{}", podman_rootless_socket()?.display()))
}

/// A `Command` running `program` as [`PODMAN_ROOTLESS_USER`] (`runuser -u
/// USER -- env -i …`) with a clean environment: `PATH`, `HOME`, `USER`,
/// `LOGNAME`, and `envs` only (no `XDG_RUNTIME_DIR` unless given), in its
/// home (`env -C`).
pub fn podman_rootless_as_user(program: &str, envs: &[(&str, &str)]) -> Command {
    let mut cmd = Command::new("runuser");
    cmd.args([
        "-u",
        PODMAN_ROOTLESS_USER,
        "--",
        "env",
        "-i",
        "-C",
        PODMAN_ROOTLESS_HOME,
    ])
    .arg(format!("PATH={USER_PATH}"))
    .arg(format!("HOME={PODMAN_ROOTLESS_HOME}"))
    .arg(format!("USER={PODMAN_ROOTLESS_USER}"))
    .arg(format!("LOGNAME={PODMAN_ROOTLESS_USER}"));
    for (k, v) in envs {
        cmd.arg(format!("{k}={v}"));
    }
    cmd.arg(program).current_dir(PODMAN_ROOTLESS_HOME);
    cmd
}

/// The user's podman CLI (local, rootless), with its `XDG_RUNTIME_DIR`.
pub fn podman_rootless_command() -> Result<Command, String> {
    let dir = podman_rootless_runtime_dir()?;
    Ok(podman_rootless_as_user(
        "podman",
        &[("XDG_RUNTIME_DIR", &dir.display().to_string())],
    ))
}

/// Run the user's podman CLI with `args` (2 min bound); its trimmed stdout.
pub fn podman_rootless(args: &[&str]) -> Result<String, String> {
    run(
        podman_rootless_command()?.args(args),
        "podman-rootless",
        CLI_TIMEOUT,
    )
}

/// What `up` added (one word a line: `user`, `subuid`, `subgid`, `rundir`,
/// `socketdir`).
fn added() -> Vec<String> {
    fs::read_to_string(state("added"))
        .map(|t| t.lines().map(str::to_owned).collect())
        .unwrap_or_default()
}

fn note_added(what: &str) -> Result<(), String> {
    let mut list = added();
    if !list.iter().any(|w| w == what) {
        list.push(what.to_owned());
    }
    let path = state("added");
    fs::write(&path, list.join("\n") + "\n")
        .map_err(|e| format!("podman-rootless: cannot write {}: {e}", path.display()))
}

/// Adds `USER:RANGE` to `file` unless the user has a range there already.
fn ensure_subid(file: &str, what: &str) -> Result<(), String> {
    let text = match fs::read_to_string(file) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(format!("podman-rootless: cannot read {file}: {e}")),
    };
    let prefix = format!("{PODMAN_ROOTLESS_USER}:");
    if text.lines().any(|l| l.starts_with(&prefix)) {
        return Ok(());
    }
    let mut new = text;
    if !new.is_empty() && !new.ends_with('\n') {
        new.push('\n');
    }
    new.push_str(PODMAN_ROOTLESS_USER);
    new.push(':');
    new.push_str(SUBID_RANGE);
    new.push('\n');
    fs::write(file, new).map_err(|e| format!("podman-rootless: cannot write {file}: {e}"))?;
    note_added(what)
}

/// Removes the user's line from `file` (only when `up` added it).
fn remove_subid(file: &str) -> Result<(), String> {
    let text = fs::read_to_string(file)
        .map_err(|e| format!("podman-rootless: cannot read {file}: {e}"))?;
    let ours = format!("{PODMAN_ROOTLESS_USER}:{SUBID_RANGE}");
    let kept: Vec<&str> = text.lines().filter(|l| *l != ours).collect();
    let mut new = kept.join("\n");
    if !new.is_empty() {
        new.push('\n');
    }
    fs::write(file, new).map_err(|e| format!("podman-rootless: cannot write {file}: {e}"))
}

/// The user, its subordinate ids and its runtime directory (what is missing).
fn setup() -> Result<(), String> {
    fs::create_dir_all(PODMAN_ROOTLESS_STATE)
        .map_err(|e| format!("podman-rootless: cannot create {PODMAN_ROOTLESS_STATE}: {e}"))?;
    if passwd_ids(PODMAN_ROOTLESS_USER)?.is_none() {
        run(
            Command::new("useradd").args([
                "--system",
                "--create-home",
                "--home-dir",
                PODMAN_ROOTLESS_HOME,
                "--shell",
                "/usr/sbin/nologin",
                PODMAN_ROOTLESS_USER,
            ]),
            "podman-rootless: useradd",
            CLI_TIMEOUT,
        )?;
        note_added("user")?;
    }
    ensure_subid("/etc/subuid", "subuid")?;
    ensure_subid("/etc/subgid", "subgid")?;
    let (uid, gid) = passwd_ids(PODMAN_ROOTLESS_USER)?
        .ok_or_else(|| format!("podman-rootless: no user {PODMAN_ROOTLESS_USER} after useradd"))?;
    let dir = PathBuf::from(format!("/run/user/{uid}"));
    if !dir.exists() {
        fs::create_dir_all(&dir)
            .map_err(|e| format!("podman-rootless: cannot create {}: {e}", dir.display()))?;
        note_added("rundir")?;
    }
    std::os::unix::fs::chown(&dir, Some(uid), Some(gid))
        .map_err(|e| format!("podman-rootless: cannot chown {}: {e}", dir.display()))?;
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o700))
        .map_err(|e| format!("podman-rootless: cannot chmod {}: {e}", dir.display()))
}

/// The real uid of process `pid`.
fn proc_uid(pid: u32) -> Option<u32> {
    fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The pid of the service this engine started: its pid file names a live
/// `podman` of the user serving its socket.
fn service_pid() -> Option<u32> {
    let host = podman_rootless_host().ok()?;
    let uid = podman_rootless_uid().ok()?;
    read_pid(&state("service.pid")).filter(|&pid| {
        alive(pid)
            && proc_comm(pid).as_deref() == Some("podman")
            && proc_uid(pid) == Some(uid)
            && proc_cmdline(pid).is_some_and(|argv| argv.contains(&host))
    })
}

/// Start the user's service (as the user, detached) unless its socket
/// answers; waits (60 s at most) for `/_ping`.
pub fn podman_rootless_start() -> Result<(), String> {
    let host = podman_rootless_host()?;
    if ping(&host, PING_TIMEOUT).is_ok() {
        return Ok(());
    }
    let sock = podman_rootless_socket()?;
    // A socket left by a killed service: nobody answers on it.
    let _ = fs::remove_file(&sock);
    // `podman system service URL` does not make the socket's directory.
    if let Some(parent) = sock.parent()
        && !parent.exists()
    {
        let (uid, gid) = passwd_ids(PODMAN_ROOTLESS_USER)?
            .ok_or_else(|| format!("podman-rootless: no user {PODMAN_ROOTLESS_USER}"))?;
        fs::create_dir(parent)
            .map_err(|e| format!("podman-rootless: cannot create {}: {e}", parent.display()))?;
        std::os::unix::fs::chown(parent, Some(uid), Some(gid))
            .map_err(|e| format!("podman-rootless: cannot chown {}: {e}", parent.display()))?;
        note_added("socketdir")?;
    }
    let log = state("service.log");
    let launcher = state("runuser.pid");
    let _ = fs::remove_file(&launcher);
    let _ = fs::remove_file(state("service.pid"));
    let dir = podman_rootless_runtime_dir()?;
    let user =
        podman_rootless_as_user("podman", &[("XDG_RUNTIME_DIR", &dir.display().to_string())]);
    let mut args: Vec<String> = user
        .get_args()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    args.extend(
        ["system", "service", "--time=0", &host]
            .iter()
            .map(|s| (*s).to_owned()),
    );
    let mut child = Some(
        spawn_daemon(
            Path::new("/usr/sbin/runuser"),
            &args,
            &[],
            &log,
            Some(&launcher),
        )
        .map_err(|e| format!("podman-rootless: {e}; read {}", log.display()))?,
    );
    let took = wait_ping("podman-rootless", &host, READY, &mut child, &log)?;
    // runuser forks the user's command (env, which execs podman).
    let runuser = read_pid(&launcher)
        .ok_or_else(|| format!("podman-rootless: no pid in {}", launcher.display()))?;
    let pid = children_named(runuser, "podman")
        .into_iter()
        .next()
        .ok_or_else(|| format!("podman-rootless: no podman child of runuser (pid {runuser})"))?;
    let pid_file = state("service.pid");
    fs::write(&pid_file, format!("{pid}\n"))
        .map_err(|e| format!("podman-rootless: cannot write {}: {e}", pid_file.display()))?;
    eprintln!(
        "[engines] podman-rootless: service (pid {pid}, user {PODMAN_ROOTLESS_USER}) answers on \
         {host} after {took:.1?} (log: {})",
        log.display()
    );
    Ok(())
}

/// Stop the service this engine started (SIGTERM, SIGKILL after 20 s) and
/// remove its socket if left. Nothing when it does not run.
pub fn podman_rootless_stop() -> Result<(), String> {
    if let Some(pid) = service_pid() {
        signal(pid, "TERM")?;
        if !wait_dead(pid, EXIT_WAIT) {
            signal(pid, "KILL")?;
            if !wait_dead(pid, EXIT_WAIT) {
                return Err(format!(
                    "podman-rootless: service (pid {pid}) survives SIGKILL"
                ));
            }
        }
    }
    let _ = fs::remove_file(state("service.pid"));
    if let Ok(sock) = podman_rootless_socket() {
        let _ = fs::remove_file(sock);
    }
    Ok(())
}

fn ensure_image() -> Result<(), String> {
    let image = test_image();
    let exists = run_output(
        podman_rootless_command()?.args(["image", "exists", &image]),
        CLI_TIMEOUT,
    )
    .is_ok_and(|o| o.status.success());
    if exists {
        return Ok(());
    }
    docker_up()?;
    // Where the user can read it.
    let tar = state("test-image.tar");
    run(
        docker_command().args(["save", "-o"]).arg(&tar).arg(&image),
        "podman-rootless: docker save of the test image",
        Duration::from_secs(300),
    )?;
    let loaded = fs::set_permissions(&tar, fs::Permissions::from_mode(0o644))
        .map_err(|e| format!("podman-rootless: chmod {}: {e}", tar.display()))
        .and_then(|()| {
            run(
                podman_rootless_command()?.args(["load", "-i"]).arg(&tar),
                "podman-rootless: podman load of the test image",
                Duration::from_secs(300),
            )
        });
    let _ = fs::remove_file(&tar);
    loaded.map(drop)
}

/// Make rootless Podman usable: packages (podman, uidmap; strace, which the
/// tests watch lookout's `connect`s with), the user and its ids and runtime
/// directory, its service, the test image in its storage.
pub fn podman_rootless_up() -> Result<(), String> {
    ensure_debian(&["podman", "uidmap", "strace"])?;
    setup()?;
    podman_rootless_start()?;
    ensure_image()
}

/// Check that it is rootless (`podman --url HOST info` says so) and that a
/// container of the test image runs and stops through the service.
pub fn podman_rootless_verify() -> Result<(), String> {
    let host = podman_rootless_host()?;
    ping(&host, PING_TIMEOUT)?;
    let remote = |args: &[&str]| -> Result<String, String> {
        run(
            podman_rootless_command()?.args(["--url", &host]).args(args),
            "podman-rootless",
            CLI_TIMEOUT,
        )
    };
    let rootless = remote(&["info", "--format", "{{.Host.Security.Rootless}}"])?;
    if rootless != "true" {
        return Err(format!(
            "podman-rootless: the service on {host} says rootless: {rootless}"
        ));
    }
    verify_container("podman-rootless", &remote)
}

/// Stop the service it started, the user's pause process, and remove what
/// `up` added (the user with its home and storage, its subordinate ids, its
/// runtime directory) and the state directory.
pub fn podman_rootless_down() -> Result<(), String> {
    podman_rootless_stop()?;
    let list = added();
    let Some((uid, _)) = passwd_ids(PODMAN_ROOTLESS_USER)? else {
        let _ = fs::remove_dir_all(PODMAN_ROOTLESS_STATE);
        return Ok(());
    };
    if list.iter().any(|w| w == "user") {
        // Its containers go with its storage; conmons would keep userdel off.
        let _ = run_output(
            podman_rootless_command()?.args(["rm", "-f", "-a", "-t", "1"]),
            CLI_TIMEOUT,
        );
    }
    // Rootless podman executes itself again inside the user's namespace,
    // and the service is that child: stopped by the parent's pid (which
    // `start` records), a child can go on serving, reparented to init, and
    // `userdel` then finds the user busy. Such children of the services
    // this engine started: the user's podman processes serving its socket.
    let host = podman_rootless_host()?;
    for pid in find_procs("podman", &["system", "service", &host]) {
        if proc_uid(pid) != Some(uid) {
            continue;
        }
        signal(pid, "KILL")?;
        if !wait_dead(pid, EXIT_WAIT) {
            return Err(format!(
                "podman-rootless: service (pid {pid}) survives SIGKILL"
            ));
        }
    }
    // Podman's pause process (it holds the user namespace), by its pid file.
    let pause = PathBuf::from(format!("/run/user/{uid}/libpod/tmp/pause.pid"));
    if let Some(pid) = read_pid(&pause)
        && alive(pid)
        && proc_uid(pid) == Some(uid)
        && proc_comm(pid).is_some_and(|c| c.starts_with("podman"))
    {
        signal(pid, "KILL")?;
        if !wait_dead(pid, EXIT_WAIT) {
            return Err(format!(
                "podman-rootless: pause process (pid {pid}) survives SIGKILL"
            ));
        }
    }
    if list.iter().any(|w| w == "user") {
        run(
            Command::new("userdel").args(["--remove", PODMAN_ROOTLESS_USER]),
            "podman-rootless: userdel",
            CLI_TIMEOUT,
        )
        .or_else(|e| {
            // userdel exits 12 when only the mail spool was missing.
            if passwd_ids(PODMAN_ROOTLESS_USER)?.is_none() {
                Ok(String::new())
            } else {
                Err(e)
            }
        })?;
        let _ = fs::remove_dir_all(PODMAN_ROOTLESS_HOME);
    }
    if list.iter().any(|w| w == "subuid") {
        remove_subid("/etc/subuid")?;
    }
    if list.iter().any(|w| w == "subgid") {
        remove_subid("/etc/subgid")?;
    }
    if list.iter().any(|w| w == "socketdir") {
        let _ = fs::remove_dir_all(format!("/run/user/{uid}/podman"));
    }
    if list.iter().any(|w| w == "rundir") {
        let dir = format!("/run/user/{uid}");
        fs::remove_dir_all(&dir)
            .or_else(|e| {
                if e.kind() == std::io::ErrorKind::NotFound {
                    Ok(())
                } else {
                    Err(e)
                }
            })
            .map_err(|e| format!("podman-rootless: cannot remove {dir}: {e}"))?;
    }
    fs::remove_dir_all(PODMAN_ROOTLESS_STATE)
        .map_err(|e| format!("podman-rootless: cannot remove {PODMAN_ROOTLESS_STATE}: {e}"))
}
