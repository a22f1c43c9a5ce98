//! dockerd: the docker CLI, start, stop, kill and signal dockerd, the test image,
//! and the container check shared with Podman.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::packages::{ensure_packages, static_busybox};
use crate::ping::{ping, wait_ping};
use crate::process::{
    alive, children_named, find_in_path, find_procs, is_executable, proc_cmdline, proc_comm,
    proc_state, read_pid, run, run_logged, run_output, signal, spawn_daemon, wait_dead,
};
use crate::{
    CLI_TIMEOUT, DEFAULT_DOCKER_HOST, ENV_DOCKER_HOST, EXIT_WAIT, PING_TIMEOUT, docker_host,
    engines_file, env_nonempty, test_image,
};

const DOCKER_READY: Duration = Duration::from_secs(90);

/// The docker CLI: `LOOKOUT_DOCKER_CLI`, else Debian's `/usr/bin/docker` (the
/// same release as its dockerd), else `docker` on `PATH`. Every call gets
/// `DOCKER_HOST=`[`docker_host`] and `DOCKER_BUILDKIT=0` (the legacy builder:
/// no buildx plugin is needed).
pub fn docker_cli() -> PathBuf {
    if let Some(cli) = env_nonempty("LOOKOUT_DOCKER_CLI") {
        return PathBuf::from(cli);
    }
    let debian = Path::new("/usr/bin/docker");
    if is_executable(debian) {
        return debian.to_path_buf();
    }
    find_in_path("docker").unwrap_or_else(|| PathBuf::from("docker"))
}

/// A `Command` for the docker CLI, pointed at [`docker_host`].
pub fn docker_command() -> Command {
    let mut cmd = Command::new(docker_cli());
    cmd.env("DOCKER_HOST", docker_host())
        .env("DOCKER_BUILDKIT", "0")
        .env_remove("DOCKER_CONTEXT");
    cmd
}

/// Run the docker CLI with `args` (2 min bound); its trimmed stdout.
pub fn docker(args: &[&str]) -> Result<String, String> {
    run(docker_command().args(args), "docker", CLI_TIMEOUT)
}

pub(crate) fn dockerd_binary() -> Result<PathBuf, String> {
    find_in_path("dockerd")
        .or_else(|| Some(PathBuf::from("/usr/sbin/dockerd")).filter(|p| is_executable(p)))
        .ok_or_else(|| "docker: no dockerd (Debian: apt-get install -y docker.io)".to_owned())
}

/// dockerd's arguments, the same at every start: our own config file (so
/// `/etc/docker/daemon.json` cannot turn `live-restore` on) and pid file.
fn dockerd_args() -> Result<Vec<String>, String> {
    let config = engines_file("daemon.json")?;
    let json = "{\n  \"live-restore\": false\n}\n";
    if fs::read_to_string(&config).ok().as_deref() != Some(json) {
        fs::write(&config, json)
            .map_err(|e| format!("docker: cannot write {}: {e}", config.display()))?;
    }
    Ok(vec![
        "--config-file".to_owned(),
        config.display().to_string(),
        "--pidfile".to_owned(),
        engines_file("dockerd.pid")?.display().to_string(),
    ])
}

fn managed_docker_host() -> bool {
    docker_host() == DEFAULT_DOCKER_HOST
}

/// dockerd's pid: our pid file, `/var/run/docker.pid`, else a live `dockerd`.
fn dockerd_pid() -> Option<u32> {
    let ours = engines_file("dockerd.pid").ok();
    let files = [ours, Some(PathBuf::from("/var/run/docker.pid"))];
    for f in files.iter().flatten() {
        if let Some(pid) = read_pid(f)
            && alive(pid)
            && proc_comm(pid).as_deref() == Some("dockerd")
        {
            return Some(pid);
        }
    }
    // Not a second dockerd of its own data root (docker-tls, a multi-host
    // test's): waiting on one of those would never see the main one answer.
    find_procs("dockerd", &[])
        .into_iter()
        .find(|pid| !proc_cmdline(*pid).is_some_and(|args| args.iter().any(|a| a == "--data-root")))
}

/// Remove pid files naming a dead (or zombie) process: dockerd refuses to start
/// on its own stale pid file, and reuses "its" containerd when the old one's
/// pid file names a zombie.
fn remove_stale_docker_pidfiles() -> Result<(), String> {
    let files = [
        engines_file("dockerd.pid")?,
        PathBuf::from("/var/run/docker.pid"),
        PathBuf::from("/var/run/docker/containerd/containerd.pid"),
    ];
    for f in &files {
        if let Some(pid) = read_pid(f) {
            if !alive(pid) {
                let _ = fs::remove_file(f);
            }
        } else if f.exists() && fs::read_to_string(f).is_ok_and(|s| s.trim().is_empty()) {
            let _ = fs::remove_file(f);
        }
    }
    Ok(())
}

/// Make the Docker engine usable: install the packages if missing, start
/// dockerd if [`docker_host`] does not answer (only for the default socket),
/// check that `live-restore` is off, and build [`TEST_IMAGE`](crate::TEST_IMAGE) if missing.
/// Cheap when all is in place.
pub fn docker_up() -> Result<(), String> {
    let host = docker_host();
    if ping(&host, PING_TIMEOUT).is_err() {
        // A daemon left stopped (SIGSTOP) by an aborted test: continue it.
        if let Some(pid) = dockerd_pid()
            && proc_state(pid) == Some('T')
        {
            eprintln!("[engines] docker: dockerd (pid {pid}) was stopped; sending CONT");
            signal(pid, "CONT")?;
            let log = engines_file("dockerd.log")?;
            wait_ping("docker", &host, DOCKER_READY, &mut None, &log)?;
        }
    }
    // The tests' other programs (curl, jq, ip, ssh, …) too, also where dockerd
    // already answers: a dpkg query each when every one is there.
    ensure_packages()?;
    if ping(&host, PING_TIMEOUT).is_err() {
        if !managed_docker_host() {
            return Err(format!(
                "docker: {host} (from {ENV_DOCKER_HOST}) does not answer /_ping; \
                 only the default {DEFAULT_DOCKER_HOST} is started by the tests"
            ));
        }
        docker_start()?;
    }
    let live = docker(&["info", "--format", "{{.LiveRestoreEnabled}}"])?;
    if live != "false" {
        return Err(format!(
            "docker: dockerd on {host} runs with live-restore enabled ({live}); the tests need it off \
             (a killed dockerd must stop its containers). Stop it and let the tests start their own."
        ));
    }
    ensure_test_image()
}

/// Start dockerd (detached, `target/engines/dockerd.log`, pid file
/// `target/engines/dockerd.pid`, config `target/engines/daemon.json`) and wait
/// until it answers `/_ping` (90 s at most). `Ok` at once if it answers
/// already. dockerd starts (and owns) its own containerd.
pub fn docker_start() -> Result<(), String> {
    let host = docker_host();
    if ping(&host, PING_TIMEOUT).is_ok() {
        return Ok(());
    }
    if !managed_docker_host() {
        return Err(format!(
            "docker: {host} does not answer and is not ours to start ({ENV_DOCKER_HOST})"
        ));
    }
    if let Some(pid) = dockerd_pid() {
        // Still starting (or stopped): give it the time a start gets.
        if proc_state(pid) == Some('T') {
            signal(pid, "CONT").map_err(|e| format!("docker: {e}"))?;
        }
        let log = engines_file("dockerd.log")?;
        return wait_ping("docker", &host, DOCKER_READY, &mut None, &log)
            .map(drop)
            .map_err(|e| format!("{e}\n(dockerd pid {pid} runs but does not answer)"));
    }
    let dockerd = dockerd_binary()?;
    remove_stale_docker_pidfiles()?;
    let log = engines_file("dockerd.log")?;
    let args = dockerd_args()?;
    let mut child = Some(
        spawn_daemon(&dockerd, &args, &[], &log, None)
            .map_err(|e| format!("docker: {e}; read {}", log.display()))?,
    );
    let took = wait_ping("docker", &host, DOCKER_READY, &mut child, &log)?;
    eprintln!(
        "[engines] docker: dockerd (pid {}) answers on {host} after {took:.1?} (log: {})",
        dockerd_pid().map_or_else(|| "?".to_owned(), |p| p.to_string()),
        log.display()
    );
    Ok(())
}

/// SIGKILL dockerd and wait until it (and the containerd it started) has
/// exited. Containers keep running in their shims until the restarted dockerd
/// finds them: with `live-restore` off it stops them.
pub fn docker_kill9() -> Result<(), String> {
    let pid = dockerd_pid().ok_or_else(|| "docker: no dockerd process to kill".to_owned())?;
    kill9_dockerd("docker", pid)?;
    remove_stale_docker_pidfiles()?;
    Ok(())
}

/// SIGKILL the dockerd `pid` and wait until it and the containerd it
/// started have exited (`who` names it in errors).
pub(crate) fn kill9_dockerd(who: &str, pid: u32) -> Result<(), String> {
    let containerds = children_named(pid, "containerd");
    signal(pid, "KILL").map_err(|e| format!("{who}: {e}"))?;
    if !wait_dead(pid, EXIT_WAIT) {
        return Err(format!(
            "{who}: dockerd (pid {pid}) still alive {EXIT_WAIT:?} after SIGKILL"
        ));
    }
    for c in containerds {
        // dockerd's own containerd dies with it (parent-death signal).
        if !wait_dead(c, EXIT_WAIT) {
            return Err(format!(
                "{who}: containerd (pid {c}) still alive {EXIT_WAIT:?} after dockerd was killed"
            ));
        }
    }
    Ok(())
}

/// Stop the dockerd `pid` (SIGTERM: it stops its containers; SIGKILL after
/// 60 s), and wait for the containerd it started (`who` names it in errors).
pub(crate) fn stop_dockerd(who: &str, pid: u32) -> Result<(), String> {
    if proc_state(pid) == Some('T') {
        let _ = signal(pid, "CONT");
    }
    let containerds = children_named(pid, "containerd");
    signal(pid, "TERM").map_err(|e| format!("{who}: {e}"))?;
    if !wait_dead(pid, Duration::from_secs(60)) {
        signal(pid, "KILL").map_err(|e| format!("{who}: {e}"))?;
        if !wait_dead(pid, EXIT_WAIT) {
            return Err(format!("{who}: dockerd (pid {pid}) survives SIGKILL"));
        }
    }
    for c in containerds {
        let _ = wait_dead(c, EXIT_WAIT);
    }
    Ok(())
}

/// Send `sig` (`"STOP"`, `"CONT"`, …) to dockerd.
pub fn docker_signal(sig: &str) -> Result<(), String> {
    let pid = dockerd_pid().ok_or_else(|| "docker: no dockerd process to signal".to_owned())?;
    signal(pid, sig).map_err(|e| format!("docker: {e}"))
}

/// Stop dockerd (SIGTERM: it stops its containers; SIGKILL after 60 s).
pub fn docker_down() -> Result<(), String> {
    let Some(pid) = dockerd_pid() else {
        return Ok(());
    };
    stop_dockerd("docker", pid)?;
    remove_stale_docker_pidfiles()
}

fn dockerfile() -> &'static str {
    "FROM scratch\nCOPY busybox /bin/busybox\nENTRYPOINT [\"/bin/busybox\"]\n"
}

fn docker_image_exists(image: &str) -> bool {
    run_output(
        docker_command().args(["image", "inspect", "--format", "{{.Id}}", image]),
        CLI_TIMEOUT,
    )
    .is_ok_and(|o| o.status.success())
}

/// Build [`test_image`] from a static busybox (`FROM scratch`, `COPY busybox
/// /bin/busybox`, `ENTRYPOINT ["/bin/busybox"]`) unless the engine has it.
pub fn ensure_test_image() -> Result<(), String> {
    let image = test_image();
    if docker_image_exists(&image) {
        return Ok(());
    }
    if static_busybox().is_none() {
        ensure_packages()?;
    }
    let busybox = static_busybox()
        .ok_or_else(|| "docker: no static busybox (Debian: busybox-static)".to_owned())?;
    let dir = engines_file("image")?;
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).map_err(|e| format!("docker: {}: {e}", dir.display()))?;
    fs::copy(&busybox, dir.join("busybox"))
        .map_err(|e| format!("docker: copy {}: {e}", busybox.display()))?;
    fs::write(dir.join("Dockerfile"), dockerfile())
        .map_err(|e| format!("docker: Dockerfile: {e}"))?;
    let log = engines_file("image-build.log")?;
    let t = Instant::now();
    let mut cmd = docker_command();
    cmd.args(["build", "--label", "lookout-test=1", "-t", &image])
        .arg(&dir);
    run_logged(
        &mut cmd,
        "docker: building the test image",
        &log,
        Duration::from_secs(300),
    )?;
    eprintln!("[engines] docker: built {image} in {:.1?}", t.elapsed());
    Ok(())
}

/// `docker create --name NAME ARGS… --network none IMAGE sleep 3600`: a
/// stopped container of the test image, without network.
pub fn docker_create_test_container(name: &str, args: &[&str]) -> Result<String, String> {
    let image = test_image();
    let mut cmd = vec!["create", "--name", name];
    cmd.extend(args);
    cmd.extend(["--network", "none", image.as_str(), "sleep", "3600"]);
    docker(&cmd)
}

/// Check that a container of the test image runs and stops on Docker:
/// `run -d --network none IMAGE sleep 3600`, running, `stop`, exited, `rm`.
pub fn docker_verify() -> Result<(), String> {
    verify_container("docker", &docker)
}

/// The check of [`docker_verify`] and [`podman_verify`](crate::podman_verify), through `cli`.
pub(crate) fn verify_container(
    engine: &str,
    cli: &dyn Fn(&[&str]) -> Result<String, String>,
) -> Result<(), String> {
    let name = format!("lookout-engines-check-{}", std::process::id());
    let image = test_image();
    let _ = cli(&["rm", "-f", &name]);
    let result = (|| {
        cli(&[
            "run",
            "-d",
            "--name",
            &name,
            "--network",
            "none",
            &image,
            "sleep",
            "3600",
        ])?;
        let running = cli(&["inspect", "--format", "{{.State.Running}}", &name])?;
        if running != "true" {
            return Err(format!(
                "{engine}: check container {name} is not running ({running})"
            ));
        }
        cli(&["stop", "-t", "1", &name])?;
        let status = cli(&["inspect", "--format", "{{.State.Status}}", &name])?;
        // Podman says `exited` or `stopped`.
        if status != "exited" && status != "stopped" {
            return Err(format!(
                "{engine}: check container {name} is {status}, not exited, after stop"
            ));
        }
        Ok(())
    })();
    let _ = cli(&["rm", "-f", &name]);
    result
}
