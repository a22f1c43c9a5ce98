//! Rootless Podman for real: a non-root user's own `podman system service`
//! on `/run/user/UID/podman/podman.sock` (the engine `podman-rootless`: the
//! system user `lookoutrl`), and the built `lookout` run as that user with a
//! clean environment (`setpriv` to its uid, gid and groups, then `env -i`: no
//! `CONTAINER_HOST`, no connections, no `RUST_LOG`), under `strace -e
//! trace=connect`, which records every socket it dials.
//!
//! - With `XDG_RUNTIME_DIR=/run/user/UID`, and without it (lookout takes
//!   `/run/user/UID`, the user's and mode 0700), `lookout podman` connects to
//!   `unix:///run/user/UID/podman/podman.sock` and streams the user's own
//!   containers: one created by the user's `podman` before is in the initial
//!   snapshot, one run after comes live; the rootful service
//!   (`/run/podman/podman.sock`) has neither.
//! - With the user's service stopped and its socket gone, lookout's error
//!   names `/run/user/UID/podman/podman.sock` and how to start Podman's
//!   service for this user; it never dials `/run/podman/podman.sock`.
//!
//! Needs rootless Podman and the Podman API service: `cargo xtask engines up
//! podman podman-rootless` (CI sets `LOOKOUT_ENGINES=1` and brings them up);
//! run as root (it switches to the user).

// Test code reads the child's pipes on threads; only library crates may not spawn.
#![allow(clippy::disallowed_methods)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use lookout_e2e::engines;
use serde_json::Value;

mod common;
use common::{Process, TempDir, WAIT};

const ROOTFUL_SOCKET: &str = "/run/podman/podman.sock";

/// The rootless engine, up (as root), and its lock (exclusive for a test
/// that stops its service); `None` without engines.
fn require_rootless(exclusive: bool) -> Option<engines::EngineLock> {
    engines::require("podman-rootless", exclusive, engines::podman_rootless_up)
}

fn uid_gid() -> (u32, u32) {
    use std::os::unix::fs::MetadataExt;
    let home = std::fs::metadata(engines::PODMAN_ROOTLESS_HOME).expect("the user's home");
    (home.uid(), home.gid())
}

/// A copy of the built `lookout` the user can run (the target directory may
/// not be open to it), and a place for strace's records; removed on drop.
struct Scratch(TempDir);

impl Scratch {
    fn new(what: &str) -> Self {
        let dir = TempDir::new("podman-rootless", what);
        std::fs::set_permissions(&dir.0, std::fs::Permissions::from_mode(0o755))
            .expect("chmod the temp dir");
        let bin = dir.0.join("lookout");
        std::fs::copy(env!("CARGO_BIN_EXE_lookout"), &bin).expect("copy lookout");
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755))
            .expect("chmod lookout");
        Self(dir)
    }

    fn bin(&self) -> PathBuf {
        self.0.0.join("lookout")
    }

    /// `lookout ARGS` as the user (`XDG_RUNTIME_DIR` only when given),
    /// its `connect`s recorded in `trace`.
    fn lookout(&self, trace: &str, xdg: Option<&str>, args: &[&str]) -> AsUser {
        let (uid, gid) = uid_gid();
        let trace = self.0.0.join(trace);
        let mut cmd = Command::new("strace");
        cmd.args(["-f", "-qq", "-e", "trace=connect", "-o"])
            .arg(&trace)
            .arg("setpriv")
            .arg(format!("--reuid={uid}"))
            .arg(format!("--regid={gid}"))
            .args([
                "--init-groups",
                "env",
                "-i",
                "-C",
                engines::PODMAN_ROOTLESS_HOME,
            ])
            .arg("PATH=/usr/local/bin:/usr/bin:/bin")
            .arg(format!("HOME={}", engines::PODMAN_ROOTLESS_HOME))
            .arg(format!("USER={}", engines::PODMAN_ROOTLESS_USER))
            .arg(format!("LOGNAME={}", engines::PODMAN_ROOTLESS_USER));
        if let Some(dir) = xdg {
            cmd.arg(format!("XDG_RUNTIME_DIR={dir}"));
        }
        cmd.arg(self.bin()).args(args);
        AsUser {
            process: Some(Process::start(cmd)),
            trace,
        }
    }
}

/// `lookout` as the user under strace. On drop (or [`AsUser::end`]) the
/// lookout process is killed by its pid first (strace, killed, would leave
/// it running), then strace ends.
struct AsUser {
    process: Option<Process>,
    trace: PathBuf,
}

fn ppid(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// The processes whose parent is `parent`.
fn children(parent: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| ppid(*pid) == Some(parent))
        .collect()
}

impl AsUser {
    fn process(&mut self) -> &mut Process {
        self.process.as_mut().expect("running")
    }

    /// Kills lookout (the traced child of strace, by pid), waits for strace
    /// to end (bounded), and returns the unix sockets dialled.
    fn end(&mut self) -> Vec<String> {
        if let Some(mut p) = self.process.take() {
            let strace = p.pid();
            for pid in children(strace) {
                let _ = Command::new("kill")
                    .args(["-KILL", &pid.to_string()])
                    .status();
            }
            let deadline = Instant::now() + Duration::from_secs(10);
            while p.child.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
                thread::sleep(Duration::from_millis(20));
            }
            drop(p);
        }
        let text = std::fs::read_to_string(&self.trace).unwrap_or_default();
        text.lines()
            .filter(|l| l.contains("connect("))
            .filter_map(|l| {
                let rest = &l[l.find("sun_path=\"")? + "sun_path=\"".len()..];
                Some(rest[..rest.find('"')?].to_owned())
            })
            .collect()
    }
}

impl Drop for AsUser {
    fn drop(&mut self) {
        self.end();
    }
}

/// Removes the user's test containers whatever happens.
struct UserContainers(Vec<String>);

impl Drop for UserContainers {
    fn drop(&mut self) {
        if !self.0.is_empty() {
            let mut args = vec!["rm", "-f", "-t", "1"];
            args.extend(self.0.iter().map(String::as_str));
            let _ = engines::podman_rootless(&args);
        }
    }
}

/// Whether the rootful service has a container named `name`.
fn rootful_has(name: &str) -> bool {
    let filter = format!("name=^{name}$");
    let out = engines::podman(&[
        "--url",
        &engines::podman_host(),
        "ps",
        "-a",
        "--filter",
        &filter,
        "--format",
        "{{.Names}}",
    ])
    .unwrap_or_else(|e| panic!("the rootful service: {e}"));
    out.lines().any(|l| l.trim() == name)
}

/// The next event of `instance` (other events, of other instances, skipped).
fn event_of(p: &Process, instance: &str) -> Value {
    let deadline = Instant::now() + WAIT;
    loop {
        assert!(
            Instant::now() < deadline,
            "no event of {instance} within {WAIT:?}"
        );
        let e = p.event();
        if e["instance"] == instance {
            return e;
        }
    }
}

/// (a) and (b): lookout as the user, with `xdg` or without, reaches the
/// user's own service and streams the user's own containers.
fn streams_the_users_containers(xdg: bool) {
    let Some(_podman) = engines::require("podman", false, engines::podman_up) else {
        return;
    };
    let Some(_lock) = require_rootless(false) else {
        return;
    };
    let socket = engines::podman_rootless_socket().expect("the user's socket");
    let runtime = engines::podman_rootless_runtime_dir().expect("the user's runtime dir");
    let case = if xdg { "xdg" } else { "no-xdg" };
    let label_value = common::unique("podman-rootless", case);
    let label = format!("lookout.rootless={label_value}");
    let before = format!("{label_value}-before");
    let after = format!("{label_value}-after");
    let _containers = UserContainers(vec![before.clone(), after.clone()]);
    let image = engines::test_image();
    let user_podman = |args: &[&str]| {
        engines::podman_rootless(args).unwrap_or_else(|e| panic!("the user's podman: {e}"))
    };
    user_podman(&[
        "create",
        "--name",
        &before,
        "--label",
        &label,
        "--network",
        "none",
        &image,
        "sleep",
        "3600",
    ]);

    let scratch = Scratch::new(case);
    let runtime_s = runtime.display().to_string();
    let mut lookout = scratch.lookout(
        "trace",
        xdg.then_some(runtime_s.as_str()),
        &["podman", "--json", "--initial", "--label", &label],
    );
    let connected = lookout.process().connected();
    assert_eq!(
        connected["endpoint"],
        format!("unix://{}", socket.display()),
        "{case}: {connected}"
    );
    assert_eq!(connected["from"], "default", "{case}: {connected}");
    assert_eq!(connected["instances"], 1, "{case}: {connected}");
    let e = event_of(lookout.process(), &before);
    assert_eq!(
        (e["kind"].as_str(), e["origin"].as_str()),
        (Some("created"), Some("initial")),
        "{case}: {e}"
    );
    let t = Instant::now();
    user_podman(&[
        "run",
        "-d",
        "--name",
        &after,
        "--label",
        &label,
        "--network",
        "none",
        &image,
        "sleep",
        "3600",
    ]);
    let e = event_of(lookout.process(), &after);
    assert_eq!(
        (e["kind"].as_str(), e["origin"].as_str()),
        (Some("created"), Some("live")),
        "{case}: {e}"
    );
    let e = event_of(lookout.process(), &after);
    assert_eq!(e["kind"], "started", "{case}: {e}");
    let took = t.elapsed();
    let dialled = lookout.end();

    // The user's own service, not the rootful one.
    for name in [&before, &after] {
        assert!(
            !rootful_has(name),
            "{case}: the rootful service sees {name}"
        );
    }
    let ours = socket.display().to_string();
    assert!(
        dialled.contains(&ours),
        "{case}: lookout dialled {dialled:?}"
    );
    assert!(
        !dialled.iter().any(|p| p == ROOTFUL_SOCKET),
        "{case}: lookout dialled the rootful socket: {dialled:?}"
    );
    eprintln!(
        "[podman rootless] {case}: lookout as {} (uid {}) → {ours}; `podman run` to its \
         `started` event in {took:.1?}; unix sockets dialled: {dialled:?}",
        engines::PODMAN_ROOTLESS_USER,
        uid_gid().0
    );
}

#[test]
fn finds_the_users_service_with_xdg_runtime_dir() {
    streams_the_users_containers(true);
}

#[test]
fn finds_the_users_service_without_xdg_runtime_dir() {
    streams_the_users_containers(false);
}

/// Starts the user's service again whatever happens (the engine stays up).
struct RestartService;

impl Drop for RestartService {
    fn drop(&mut self) {
        if let Err(e) = engines::podman_rootless_start() {
            eprintln!("[podman rootless] could not start the user's service again: {e}");
        }
    }
}

/// The first `disconnected` status of `p`, after waiting for the second
/// attempt (the retry dials the same socket); no status was `connected` or
/// named the rootful socket meanwhile.
fn disconnected(p: &mut Process, case: &str) -> Value {
    let first = p.stderr("disconnected", |v| v["status"] == "disconnected");
    p.stderr("a second attempt", |v| {
        v["status"] == "disconnected" && v["attempt"].as_u64() >= Some(2)
    });
    assert!(
        p.stderr_seen
            .iter()
            .all(|l| !l.contains("\"connected\"") && !l.contains(ROOTFUL_SOCKET)),
        "{case}: {:?}",
        p.stderr_seen
    );
    first
}

#[test]
fn a_stopped_service_is_named_and_the_rootful_socket_is_never_dialled() {
    let Some(_lock) = require_rootless(true) else {
        return;
    };
    let socket = engines::podman_rootless_socket().expect("the user's socket");
    let runtime = engines::podman_rootless_runtime_dir().expect("the user's runtime dir");
    let _restart = RestartService;
    engines::podman_rootless_stop().unwrap_or_else(|e| panic!("{e}"));
    assert!(!socket.exists(), "{} is gone", socket.display());
    assert!(
        Path::new(ROOTFUL_SOCKET).exists(),
        "the rootful socket is there to be (not) dialled"
    );
    let scratch = Scratch::new("stopped");
    let runtime_s = runtime.display().to_string();
    let ours = socket.display().to_string();
    for (case, xdg) in [("xdg", Some(runtime_s.as_str())), ("no-xdg", None)] {
        let mut lookout = scratch.lookout(case, xdg, &["podman", "--json"]);
        let status = disconnected(lookout.process(), case);
        let error = status["error"].as_str().unwrap_or_default().to_owned();
        assert!(
            error.contains(&format!("unix://{ours}")),
            "{case}: names the socket: {error}"
        );
        assert!(
            error.contains("podman system service") && error.contains("for this user"),
            "{case}: says how to start Podman's service: {error}"
        );
        let dialled = lookout.end();
        assert!(
            dialled.iter().filter(|p| **p == ours).count() >= 2,
            "{case}: dialled {ours} on each attempt: {dialled:?}"
        );
        assert!(
            !dialled.iter().any(|p| p == ROOTFUL_SOCKET),
            "{case}: lookout dialled the rootful socket: {dialled:?}"
        );
        eprintln!("[podman rootless] stopped, {case}: {error}; unix sockets dialled: {dialled:?}");
    }
}
