//! The Podman API service (`podman system service`): start, stop, kill, signal,
//! its `containers.conf`, and the test image loaded from Docker.

use std::fs;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::docker::{docker_command, docker_up, verify_container};
use crate::packages::ensure_packages;
use crate::ping::{ping, wait_ping};
use crate::process::{
    alive, find_in_path, find_procs, proc_cmdline, proc_comm, proc_state, read_pid, run,
    run_output, signal, spawn_daemon, wait_dead,
};
use crate::{
    CLI_TIMEOUT, ENV_PODMAN_HOST, EXIT_WAIT, PING_TIMEOUT, engines_file, podman_host, test_image,
};

const PODMAN_READY: Duration = Duration::from_secs(60);

/// Our `containers.conf` (passed as `CONTAINERS_CONF`): default ulimits the
/// sandbox allows (without them runc fails with `error setting rlimit type
/// 7/6`), cgroupfs, and file events (no journald needed).
fn containers_conf() -> Result<PathBuf, String> {
    let path = engines_file("containers.conf")?;
    let text = "# Written by lookout's engines helper (tests/src/engines.rs).\n\
                [containers]\n\
                default_ulimits = [\n  \"nofile=1024:1024\",\n  \"nproc=1024:1024\",\n]\n\n\
                [engine]\n\
                cgroup_manager = \"cgroupfs\"\n\
                events_logger = \"file\"\n";
    if fs::read_to_string(&path).ok().as_deref() != Some(text) {
        fs::write(&path, text)
            .map_err(|e| format!("podman: cannot write {}: {e}", path.display()))?;
    }
    Ok(path)
}

/// A `Command` for the local podman CLI with our `CONTAINERS_CONF`.
pub fn podman_command() -> Result<Command, String> {
    let mut cmd = Command::new("podman");
    cmd.env("CONTAINERS_CONF", containers_conf()?);
    Ok(cmd)
}

/// Run the podman CLI with `args` (2 min bound); its trimmed stdout.
pub fn podman(args: &[&str]) -> Result<String, String> {
    run(podman_command()?.args(args), "podman", CLI_TIMEOUT)
}

/// The pid of the Podman API service serving [`podman_host`]: our pid file,
/// else a live `podman system service … HOST`.
fn podman_pid() -> Option<u32> {
    let host = podman_host();
    let serves = |pid: u32| {
        alive(pid)
            && proc_comm(pid).as_deref() == Some("podman")
            && proc_cmdline(pid).is_some_and(|argv| argv.contains(&host))
    };
    if let Ok(f) = engines_file("podman.pid")
        && let Some(pid) = read_pid(&f)
        && serves(pid)
    {
        return Some(pid);
    }
    find_procs("podman", &["service", &host]).into_iter().next()
}

/// Whether process `pid` runs with `CONTAINERS_CONF` naming a file with our
/// content (another checkout's `target/engines/containers.conf` will do).
fn has_our_containers_conf(pid: u32) -> bool {
    let Ok(ours) = containers_conf().and_then(|p| fs::read(&p).map_err(|e| e.to_string())) else {
        return false;
    };
    let Ok(environ) = fs::read(format!("/proc/{pid}/environ")) else {
        return false;
    };
    environ
        .split(|b| *b == 0)
        .filter_map(|kv| kv.strip_prefix(b"CONTAINERS_CONF="))
        .any(|path| fs::read(String::from_utf8_lossy(path).as_ref()).is_ok_and(|text| text == ours))
}

fn podman_socket_path() -> Option<PathBuf> {
    podman_host().strip_prefix("unix://").map(PathBuf::from)
}

/// Make Podman usable: install it if missing, start `podman system service
/// --time=0` on [`podman_host`] if it does not answer (only on a
/// `unix://` socket), and load [`TEST_IMAGE`](crate::TEST_IMAGE) from Docker (`docker save | podman load`,
/// bringing Docker up for that) if Podman lacks it.
pub fn podman_up() -> Result<(), String> {
    let host = podman_host();
    if ping(&host, PING_TIMEOUT).is_err()
        && let Some(pid) = podman_pid()
        && proc_state(pid) == Some('T')
    {
        eprintln!("[engines] podman: service (pid {pid}) was stopped; sending CONT");
        signal(pid, "CONT")?;
        wait_ping(
            "podman",
            &host,
            PODMAN_READY,
            &mut None,
            &engines_file("podman.log")?,
        )?;
    }
    ensure_packages()?;
    if ping(&host, PING_TIMEOUT).is_err() {
        if podman_socket_path().is_none() {
            return Err(format!(
                "podman: {host} (from {ENV_PODMAN_HOST}) does not answer /_ping; \
                 the tests start a service only on a unix:// socket"
            ));
        }
        podman_start()?;
    }
    if let Some(pid) = podman_pid()
        && !has_our_containers_conf(pid)
    {
        // Its containers would fail (`error setting rlimit`, or `write child:
        // broken pipe` once the configuration it was started with is gone).
        eprintln!(
            "[engines] podman: the service on {host} (pid {pid}) does not run with our \
             CONTAINERS_CONF={}: restarting it",
            containers_conf()?.display()
        );
        podman_kill9()?;
        podman_start()?;
    }
    ensure_podman_image()
}

/// Start the Podman API service (`podman system service --time=0 HOST`, on
/// any `unix://` [`podman_host`], detached, `target/engines/podman.log`, pid file `target/engines/podman.pid`,
/// `CONTAINERS_CONF=target/engines/containers.conf`) and wait until it answers
/// `/_ping` (60 s at most). `Ok` at once if it answers already.
pub fn podman_start() -> Result<(), String> {
    let host = podman_host();
    if ping(&host, PING_TIMEOUT).is_ok() {
        return Ok(());
    }
    if podman_socket_path().is_none() {
        return Err(format!(
            "podman: {host} does not answer and is not a unix:// socket to start a service on \
             ({ENV_PODMAN_HOST})"
        ));
    }
    let log = engines_file("podman.log")?;
    if let Some(pid) = podman_pid() {
        if proc_state(pid) == Some('T') {
            signal(pid, "CONT").map_err(|e| format!("podman: {e}"))?;
        }
        return wait_ping("podman", &host, PODMAN_READY, &mut None, &log)
            .map(drop)
            .map_err(|e| format!("{e}\n(the podman service pid {pid} runs but does not answer)"));
    }
    let podman = find_in_path("podman")
        .ok_or_else(|| "podman: no podman (Debian: apt-get install -y podman)".to_owned())?;
    if let Some(sock) = podman_socket_path() {
        if let Some(dir) = sock.parent() {
            fs::create_dir_all(dir)
                .map_err(|e| format!("podman: cannot create {}: {e}", dir.display()))?;
        }
        // A socket left by a killed service: nobody answers on it.
        let _ = fs::remove_file(&sock);
    }
    let pid_file = engines_file("podman.pid")?;
    let _ = fs::remove_file(&pid_file);
    let args = vec![
        "system".to_owned(),
        "service".to_owned(),
        "--time=0".to_owned(),
        host.clone(),
    ];
    let envs = [("CONTAINERS_CONF", containers_conf()?.display().to_string())];
    let mut child = Some(
        spawn_daemon(&podman, &args, &envs, &log, Some(&pid_file))
            .map_err(|e| format!("podman: {e}; read {}", log.display()))?,
    );
    let took = wait_ping("podman", &host, PODMAN_READY, &mut child, &log)?;
    eprintln!(
        "[engines] podman: service (pid {}) answers on {host} after {took:.1?} (log: {})",
        podman_pid().map_or_else(|| "?".to_owned(), |p| p.to_string()),
        log.display()
    );
    Ok(())
}

/// SIGKILL the Podman API service and wait until it has exited. Containers keep
/// running (each has its own conmon).
pub fn podman_kill9() -> Result<(), String> {
    let pid = podman_pid().ok_or_else(|| "podman: no podman service process to kill".to_owned())?;
    signal(pid, "KILL").map_err(|e| format!("podman: {e}"))?;
    if !wait_dead(pid, EXIT_WAIT) {
        return Err(format!(
            "podman: service (pid {pid}) still alive {EXIT_WAIT:?} after SIGKILL"
        ));
    }
    Ok(())
}

/// Send `sig` (`"STOP"`, `"CONT"`, …) to the Podman API service.
pub fn podman_signal(sig: &str) -> Result<(), String> {
    let pid =
        podman_pid().ok_or_else(|| "podman: no podman service process to signal".to_owned())?;
    signal(pid, sig).map_err(|e| format!("podman: {e}"))
}

/// Stop the Podman API service (SIGTERM, SIGKILL after 20 s). Containers stay.
pub fn podman_down() -> Result<(), String> {
    let Some(pid) = podman_pid() else {
        return Ok(());
    };
    if proc_state(pid) == Some('T') {
        let _ = signal(pid, "CONT");
    }
    signal(pid, "TERM").map_err(|e| format!("podman: {e}"))?;
    if !wait_dead(pid, EXIT_WAIT) {
        signal(pid, "KILL").map_err(|e| format!("podman: {e}"))?;
        if !wait_dead(pid, EXIT_WAIT) {
            return Err(format!("podman: service (pid {pid}) survives SIGKILL"));
        }
    }
    Ok(())
}

fn ensure_podman_image() -> Result<(), String> {
    let image = test_image();
    let exists = run_output(
        podman_command()?.args(["image", "exists", &image]),
        CLI_TIMEOUT,
    )
    .is_ok_and(|o| o.status.success());
    if exists {
        return Ok(());
    }
    docker_up()?;
    let tar = engines_file("test-image.tar")?;
    let t = Instant::now();
    run(
        docker_command().args(["save", "-o"]).arg(&tar).arg(&image),
        "podman: docker save of the test image",
        Duration::from_secs(300),
    )?;
    let loaded = run(
        podman_command()?.args(["load", "-i"]).arg(&tar),
        "podman: podman load of the test image",
        Duration::from_secs(300),
    );
    let _ = fs::remove_file(&tar);
    loaded?;
    eprintln!(
        "[engines] podman: loaded {image} from docker in {:.1?}",
        t.elapsed()
    );
    Ok(())
}

/// Check that a container of the test image runs and stops through the Podman
/// API service (`podman --url HOST run -d --network none IMAGE sleep 3600`).
pub fn podman_verify() -> Result<(), String> {
    let host = podman_host();
    let remote = |args: &[&str]| -> Result<String, String> {
        run(
            podman_command()?.args(["--url", &host]).args(args),
            "podman",
            CLI_TIMEOUT,
        )
    };
    verify_container("podman", &remote)
}
