//! lookout's container image (`cargo xtask image`, `deploy/image/`) on the
//! real engines, run as `deploy/image/README.md` tells operators to:
//!
//! - in dockerd, as its non-root user with the docker socket's group, the
//!   socket's directory mounted: a test container's life on `/events`,
//!   `/healthz` and `/metrics` on a port published on 127.0.0.1 only, and its
//!   `HEALTHCHECK` (`lookout probe`) reaching `healthy`;
//! - in Podman, against Podman's own socket (its directory mounted);
//! - the socket that moved (Traefik #5833, docker-gen #224): lookout run by
//!   Podman, so that it outlives a restart of dockerd (whose live-restore is
//!   off: it stops its own containers), watching dockerd through its socket's
//!   directory (it recovers, the missed stop told once) and through the
//!   socket file (the mount keeps the dead socket: lookout keeps running and
//!   says why it cannot connect, and what to mount instead).
//!
//! Needs the engines and the image: `cargo xtask engines up docker podman`
//! and `cargo xtask image` (`cargo xtask ci` runs both first). Without
//! `LOOKOUT_ENGINES=1` the tests say they skip; with it, a missing image
//! fails them.

// Test code reads the engines' output on threads; only library crates may not spawn.
#![allow(clippy::disallowed_methods)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::thread;
use std::time::{Duration, Instant};

use lookout_e2e::engines;
use lookout_e2e::relay::scenarios::DOCKER;
use serde_json::Value;

mod common;
use common::{On, Process, instance_kind};

/// The image `cargo xtask image` builds.
const IMAGE: &str = "lookout:latest";
/// Where the image's `--serve` listens, and its HEALTHCHECK asks.
const PORT: u16 = 7070;
/// The bound of each wait (a container's start, a health check's turn).
const WAIT: Duration = Duration::from_secs(60);

fn unique(what: &str) -> String {
    common::unique("image", what)
}

/// Whether the tests run: `LOOKOUT_ENGINES=1` (else they say they skip),
/// then the image in dockerd, or a failure saying how to build it.
fn image_ready() -> bool {
    if engines::skips("docker podman") {
        return false;
    }
    assert!(
        docker_image_id().is_some(),
        "no {IMAGE} in dockerd: run `cargo xtask image` (`cargo xtask ci` does, before the tests)"
    );
    true
}

fn docker_image_id() -> Option<String> {
    engines::docker(&["image", "inspect", "--format", "{{.Id}}", IMAGE]).ok()
}

/// The image in Podman, the one dockerd has (`docker save | podman load`,
/// once per run, when Podman's differs).
fn podman_image() {
    static LOADED: OnceLock<Result<(), String>> = OnceLock::new();
    let loaded = LOADED.get_or_init(|| {
        let want = docker_image_id().ok_or("no image in dockerd")?;
        let have = engines::podman(&["image", "inspect", "--format", "{{.Id}}", IMAGE]).ok();
        if have
            .as_ref()
            .is_some_and(|id| want.trim_start_matches("sha256:") == id)
        {
            return Ok(());
        }
        let tar = std::env::temp_dir().join(format!("{}.tar", unique("save")));
        let saved = engines::run(
            engines::docker_command()
                .args(["save", "-o"])
                .arg(&tar)
                .arg(IMAGE),
            "docker save",
            WAIT,
        )
        .and_then(|_| {
            engines::run(
                engines::podman_command()?.args(["load", "-i"]).arg(&tar),
                "podman load",
                WAIT,
            )
        });
        let _ = std::fs::remove_file(&tar);
        if saved.is_ok()
            && let Some(old) = have
        {
            // Untagged by the load: not left behind, unless a container uses it.
            let _ = engines::podman(&["image", "rm", &old]);
        }
        saved.map(drop)
    });
    if let Err(e) = loaded {
        panic!("{IMAGE} into Podman: {e}");
    }
}

/// An engine's CLI.
type Cli = fn(&[&str]) -> Result<String, String>;

/// A container of the image, killed and removed on drop.
struct Container {
    cli: Cli,
    name: String,
}

impl Container {
    /// `run -d --name NAME ARGS…` on `cli`'s engine.
    fn run(cli: Cli, name: &str, args: &[String]) -> Self {
        let me = Self {
            cli,
            name: name.to_owned(),
        };
        let mut all: Vec<&str> = vec!["run", "-d", "--name", name];
        all.extend(args.iter().map(String::as_str));
        cli(&all).unwrap_or_else(|e| panic!("run {name}: {e}"));
        me
    }

    fn inspect(&self, format: &str) -> String {
        (self.cli)(&["inspect", "--format", format, &self.name])
            .unwrap_or_else(|e| panic!("inspect {}: {e}", self.name))
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        // Killed first: Podman's `rm -f` would wait out a stop timeout.
        let _ = (self.cli)(&["kill", &self.name]);
        let _ = (self.cli)(&["rm", "-f", &self.name]);
    }
}

/// An engine's socket on this machine, and how a container reaches it.
struct Socket {
    path: PathBuf,
}

impl Socket {
    /// The socket of `host` (`unix://PATH`).
    fn of(host: &str) -> Self {
        let path = host
            .strip_prefix("unix://")
            .unwrap_or_else(|| panic!("the image tests need a unix:// engine, not {host}"));
        Self {
            path: PathBuf::from(path),
        }
    }

    /// The socket's directory, mounted under `/host` at its own path
    /// (read-only): the mount follows a socket its engine recreates.
    fn dir_mount(&self) -> Vec<String> {
        let dir = self.path.parent().unwrap_or(Path::new("/"));
        vec![
            "-v".to_owned(),
            format!("{}:/host{}:ro", dir.display(), dir.display()),
        ]
    }

    /// The socket file itself, mounted at the same place: what goes stale.
    fn file_mount(&self) -> Vec<String> {
        vec![
            "-v".to_owned(),
            format!("{}:/host{}:ro", self.path.display(), self.path.display()),
        ]
    }

    /// Where the container finds it: `unix:///host/PATH`.
    fn in_container(&self) -> String {
        format!("unix:///host{}", self.path.display())
    }

    /// `--group-add GID` of the socket's group when the group may read and
    /// write it (dockerd's `root:docker 0660`); else the socket's owner
    /// (`podman system service` makes `root:root 0600`: only root may).
    fn access(&self) -> Vec<String> {
        let meta = std::fs::metadata(&self.path)
            .unwrap_or_else(|e| panic!("{}: {e}", self.path.display()));
        if meta.permissions().mode() & 0o060 == 0o060 {
            vec!["--group-add".to_owned(), meta.gid().to_string()]
        } else {
            vec![
                "--user".to_owned(),
                format!("{}:{}", meta.uid(), meta.gid()),
            ]
        }
    }
}

/// `LOGS -f NAME` of `cli`'s engine (`docker`, or podman with our config):
/// the container's stdout (events) and stderr (statuses) line by line.
fn follow(mut cmd: Command, name: &str) -> Process {
    cmd.args(["logs", "-f", name]);
    Process::start(cmd)
}

/// One plain `GET path` (HTTP/1.0: the answer ends with the connection);
/// its status and body.
fn get(addr: SocketAddr, path: &str) -> std::io::Result<(u16, String)> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n")?;
    let mut answer = String::new();
    s.read_to_string(&mut answer)?;
    let status = answer
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = answer
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    Ok((status, body))
}

/// Waits (bounded) until `check` says yes; the last thing it said otherwise.
fn wait_for(what: &str, mut check: impl FnMut() -> Result<(), String>) {
    let deadline = Instant::now() + WAIT;
    loop {
        match check() {
            Ok(()) => return,
            Err(e) if Instant::now() >= deadline => panic!("{what}: not within {WAIT:?}: {e}"),
            Err(_) => thread::sleep(Duration::from_millis(200)),
        }
    }
}

/// The next event of `instance` on `lookout`'s stdout, as `instance kind`.
fn next_of(lookout: &Process, instance: &str) -> Value {
    loop {
        let e = lookout.event();
        if e["instance"] == instance {
            return e;
        }
    }
}

/// A test container `name` (labelled `label`) created, started, stopped and
/// removed on `cli`'s engine; `lookout` tells each, in order, and the stop
/// request first (`stopping`) where the engine logs it (`logs_stop`:
/// dockerd; Podman 4.3 logs none for `stop -t 1`).
fn a_life(cli: Cli, logs_stop: bool, lookout: &Process, name: &str, label: &str) {
    let c = On::create(cli, name, label);
    c.run(&["start"]);
    c.run(&["stop", "-t", "1"]);
    c.run(&["rm"]);
    let mut seen: Vec<String> = Vec::new();
    while !seen.last().is_some_and(|s| s.ends_with(" removed")) {
        assert!(seen.len() < 5, "{seen:?}");
        seen.push(instance_kind(&next_of(lookout, name)));
    }
    if !logs_stop {
        // Podman may log a late `kill`, or none: not asserted.
        seen.retain(|s| !s.ends_with(" stopping"));
    }
    let mut expected = vec!["created", "started"];
    if logs_stop {
        expected.push("stopping");
    }
    expected.extend(["stopped", "removed"]);
    assert_eq!(
        seen,
        expected
            .iter()
            .map(|k| format!("{name} {k}"))
            .collect::<Vec<_>>()
    );
}

fn process_uid(pid: &str) -> String {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_else(|e| panic!("/proc/{pid}/status: {e}"));
    status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|ids| ids.split_whitespace().next())
        .unwrap_or_default()
        .to_owned()
}

/// The image in dockerd, as the README runs it: the default command
/// (`docker --serve 0.0.0.0:7070`) as user 65532 with the socket's group,
/// the socket's directory mounted, the port published on 127.0.0.1 only.
#[test]
fn in_dockerd_it_serves_a_containers_life_and_turns_healthy() {
    if !image_ready() {
        return;
    }
    let Some(_docker) = common::require_docker(false) else {
        return;
    };
    let socket = Socket::of(&engines::docker_host());
    let name = unique("serve");
    let mut args = socket.dir_mount();
    args.extend(socket.access());
    args.extend(
        [
            "-e",
            &format!("DOCKER_HOST={}", socket.in_container()),
            "-p",
            &format!("127.0.0.1::{PORT}"),
            // The image's check, on a short interval for the test.
            "--health-interval",
            "1s",
            IMAGE,
        ]
        .map(str::to_owned),
    );
    let lookout = Container::run(engines::docker, &name, &args);

    // Not root: the image's user, with the socket's group added.
    assert_eq!(lookout.inspect("{{.Config.User}}"), "65532:65532");
    assert_eq!(process_uid(&lookout.inspect("{{.State.Pid}}")), "65532");
    let labels: Value = serde_json::from_str(&lookout.inspect("{{json .Config.Labels}}"))
        .unwrap_or_else(|e| panic!("labels: {e}"));
    assert_eq!(
        labels["org.opencontainers.image.version"],
        env!("CARGO_PKG_VERSION")
    );
    assert!(
        labels["org.opencontainers.image.revision"]
            .as_str()
            .is_some_and(|r| r.len() >= 40),
        "{labels}"
    );

    let published = engines::docker(&["port", &name, &format!("{PORT}/tcp")])
        .unwrap_or_else(|e| panic!("docker port: {e}"));
    let addr: SocketAddr = published
        .lines()
        .find_map(|l| l.trim().parse().ok())
        .unwrap_or_else(|| panic!("no address in `docker port`: {published}"));
    assert!(
        addr.ip().is_loopback(),
        "published on loopback only: {addr}"
    );

    wait_for("/healthz 200", || match get(addr, "/healthz") {
        Ok((200, body)) if body.contains("\"connected\"") => Ok(()),
        Ok((status, body)) => Err(format!("{status} {body}")),
        Err(e) => Err(e.to_string()),
    });

    // The events of a labelled container, on `/events` (curl, as operators do).
    let label = format!("lookout.image={name}");
    let url = format!("http://{addr}/events?label={label}");
    let mut curl = Command::new("curl");
    curl.args(["-sN", &url]);
    let events = Process::start(curl);
    // The stream is open once `/metrics` counts its subscriber.
    wait_for("the /events subscriber", || match get(addr, "/metrics") {
        Ok((200, body)) if body.contains("lookout_subscribers 2") => Ok(()),
        other => Err(format!("{other:?}")),
    });
    a_life(
        engines::docker,
        true,
        &events,
        &format!("{name}-test"),
        &label,
    );

    let (status, metrics) = get(addr, "/metrics").unwrap_or_else(|e| panic!("/metrics: {e}"));
    assert_eq!(status, 200, "{metrics}");
    for line in ["lookout_connected 1", "lookout_events_total{"] {
        assert!(
            metrics.contains(line),
            "{line:?} not in /metrics:\n{metrics}"
        );
    }

    // Its HEALTHCHECK runs `lookout probe` in the container.
    wait_for("the HEALTHCHECK's healthy", || {
        match lookout.inspect("{{.State.Health.Status}}").as_str() {
            "healthy" => Ok(()),
            other => Err(format!(
                "{other}: {}",
                lookout.inspect("{{json .State.Health.Log}}")
            )),
        }
    });
}

/// The image in Podman, against Podman's own socket (its directory
/// mounted): `lookout podman` sees a container's life, and the image's
/// HEALTHCHECK passes (Podman runs it on `podman healthcheck run`: no
/// systemd timers here), in the container's own network namespace.
#[test]
fn in_podman_it_watches_podman() {
    if !image_ready() {
        return;
    }
    let _podman = engines::lock_engine("podman", false).unwrap_or_else(|e| panic!("{e}"));
    engines::podman_up().unwrap_or_else(|e| panic!("podman: {e}"));
    podman_image();
    let socket = Socket::of(&engines::podman_host());
    let name = unique("podman");
    let label = format!("lookout.image={name}");
    let mut args = socket.dir_mount();
    args.extend(socket.access());
    args.extend(
        [
            "--network",
            "none",
            "-e",
            &format!("CONTAINER_HOST={}", socket.in_container()),
            IMAGE,
            "podman",
            "--json",
            "--label",
            &label,
            "--serve",
            &format!("0.0.0.0:{PORT}"),
        ]
        .map(str::to_owned),
    );
    let _lookout = Container::run(engines::podman, &name, &args);
    let mut logs = follow(
        engines::podman_command().unwrap_or_else(|e| panic!("{e}")),
        &name,
    );
    logs.connected();

    a_life(
        engines::podman,
        false,
        &logs,
        &format!("{name}-test"),
        &label,
    );

    wait_for("podman healthcheck run", || {
        engines::podman(&["healthcheck", "run", &name]).map(drop)
    });
}

/// The lookout container that outlives a dockerd restart: run by Podman,
/// watching dockerd through `mount` (the socket's directory or file).
fn watching_dockerd_from_podman(
    name: &str,
    label: &str,
    mount: Vec<String>,
) -> (Container, Process) {
    podman_image();
    let socket = Socket::of(&engines::docker_host());
    let mut args = mount;
    args.extend(socket.access());
    args.extend(
        [
            "--network",
            "none",
            "-e",
            &format!("DOCKER_HOST={}", socket.in_container()),
            IMAGE,
            "docker",
            "--json",
            "--label",
            label,
        ]
        .map(str::to_owned),
    );
    let lookout = Container::run(engines::podman, name, &args);
    let mut logs = follow(
        engines::podman_command().unwrap_or_else(|e| panic!("{e}")),
        name,
    );
    logs.connected();
    (lookout, logs)
}

/// Holds the docker lock exclusively (the test restarts dockerd) and
/// Podman's shared; `None` without engines.
fn require_both() -> Option<(engines::EngineLock, engines::EngineLock)> {
    let docker = common::require_docker(true)?;
    let podman = engines::require("podman", false, engines::podman_up)?;
    Some((docker, podman))
}

/// The socket's directory mounted: dockerd's restart recreates its socket
/// in it, lookout reconnects, and the stop the restart caused is told once.
#[test]
fn a_mounted_socket_directory_follows_a_restarted_dockerd() {
    if !image_ready() {
        return;
    }
    let Some(_locks) = require_both() else { return };
    let name = unique("dir");
    let label = format!("lookout.image={name}");
    let socket = Socket::of(&engines::docker_host());
    let (lookout, mut logs) = watching_dockerd_from_podman(&name, &label, socket.dir_mount());

    let test = format!("{name}-test");
    let c = On::create(engines::docker, &test, &label);
    c.run(&["start"]);
    assert_eq!(
        instance_kind(&next_of(&logs, &test)),
        format!("{test} created")
    );
    assert_eq!(
        instance_kind(&next_of(&logs, &test)),
        format!("{test} started")
    );

    (DOCKER.restart_stopping)(&[&test]).unwrap_or_else(|e| panic!("restart dockerd: {e}"));
    logs.stderr("disconnected", |v| v["status"] == "disconnected");
    logs.connected();
    let stopped = next_of(&logs, &test);
    assert_eq!(
        instance_kind(&stopped),
        format!("{test} stopped"),
        "{stopped}"
    );
    // Told once: the next of it is its removal.
    c.run(&["rm"]);
    assert_eq!(
        instance_kind(&next_of(&logs, &test)),
        format!("{test} removed")
    );
    assert_eq!(lookout.inspect("{{.State.Running}}"), "true");
}

/// The socket file mounted: the restarted dockerd's socket is a new one;
/// the mount keeps the old, which refuses connections. lookout keeps
/// running, disconnected, and says why and what to mount instead.
#[test]
fn a_mounted_socket_file_goes_stale_and_lookout_says_so() {
    if !image_ready() {
        return;
    }
    let Some(_locks) = require_both() else { return };
    let name = unique("file");
    let label = format!("lookout.image={name}");
    let socket = Socket::of(&engines::docker_host());
    let (lookout, mut logs) = watching_dockerd_from_podman(&name, &label, socket.file_mount());

    (DOCKER.restart_stopping)(&[]).unwrap_or_else(|e| panic!("restart dockerd: {e}"));
    // What was said before dockerd answered again; then two more refusals:
    // the second dialed after the restart for sure (the first, perhaps
    // before).
    while let Ok(line) = logs.err.try_recv() {
        logs.stderr_seen.push(line);
    }
    let stale = |v: &Value| {
        v["status"] == "disconnected"
            && v["error"].as_str().is_some_and(|e| {
                e.contains("exists and is a socket, but it refuses connections")
                    && e.contains("a socket file bind-mounted into a container, which goes stale when the engine restarts")
                    && e.contains("mount the socket's directory instead")
            })
    };
    for _ in 0..2 {
        let said = logs.stderr("a refusal of the stale socket", |v| {
            assert_ne!(
                v["status"], "connected",
                "connected through a stale socket file?"
            );
            stale(v)
        });
        assert!(
            said["error"]
                .as_str()
                .is_some_and(|e| e.contains(&socket.in_container())),
            "{said}"
        );
        eprintln!("through the socket file, lookout says: {said}");
    }
    assert!(
        engines::ping(&engines::docker_host(), Duration::from_secs(2)).is_ok(),
        "dockerd answers on its new socket meanwhile"
    );
    assert_eq!(lookout.inspect("{{.State.Running}}"), "true");
}
