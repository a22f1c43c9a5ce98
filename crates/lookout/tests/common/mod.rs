//! What the tests of the built binary share (`cli.rs`, `serve.rs`): a
//! running `lookout` with its output lines, the docker engine's lock, unique
//! names and container cleanup.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use lookout_e2e::engines;
use serde_json::Value;

/// Bound of every wait for a line.
pub const WAIT: Duration = Duration::from_secs(30);

/// The docker engine, up, and its lock (exclusive for a test that stops
/// it); `None` when the run has no engines (the test returns: see
/// [`engines::skips`]).
pub fn require_docker(exclusive: bool) -> Option<engines::EngineLock> {
    engines::require("docker", exclusive, engines::docker_up)
}

/// A name no other test (or run) uses: `lookout-{file}-{what}-{pid}-{n}`.
pub fn unique(file: &str, what: &str) -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    format!(
        "lookout-{file}-{what}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// A temporary directory of a test (`lookout-{file}-{what}-{pid}-{n}`),
/// removed on drop.
pub struct TempDir(pub std::path::PathBuf);

impl TempDir {
    pub fn new(file: &str, what: &str) -> Self {
        let dir = std::env::temp_dir().join(unique(file, what));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("a temp dir");
        Self(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Removes the test's containers whatever happens.
pub struct Containers(pub Vec<String>);

impl Drop for Containers {
    fn drop(&mut self) {
        if !self.0.is_empty() {
            let mut args = vec!["rm", "-f"];
            args.extend(self.0.iter().map(String::as_str));
            let _ = engines::docker(&args);
        }
    }
}

/// The lines of `r`, read on a thread of their own.
pub fn lines(r: impl std::io::Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        for line in BufReader::new(r).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// Runs a blocking wait; inside a multi-thread tokio runtime, off its
/// worker (the tests of `--serve` talk HTTP on the same runtime).
fn blocking<T>(wait: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(wait)
        }
        _ => wait(),
    }
}

/// A running `lookout`, its stdout and stderr lines, killed on drop.
pub struct Process {
    pub child: Child,
    pub out: Option<mpsc::Receiver<String>>,
    pub err: mpsc::Receiver<String>,
    /// Every stderr line read so far.
    pub stderr_seen: Vec<String>,
}

impl Process {
    /// Starts the built binary with `args` (no `RUST_LOG`; `env` added).
    pub fn spawn(args: &[&str], env: &[(&str, String)]) -> Self {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_lookout"));
        cmd.args(args).envs(env.iter().map(|(k, v)| (k, v)));
        Self::start(cmd)
    }

    /// Starts `cmd` (the built binary, with its arguments and environment;
    /// no `RUST_LOG`), its output read.
    pub fn start(mut cmd: Command) -> Self {
        let mut child = cmd
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn lookout");
        let out = lines(child.stdout.take().expect("stdout"));
        let err = lines(child.stderr.take().expect("stderr"));
        Self {
            child,
            out: Some(out),
            err,
            stderr_seen: Vec::new(),
        }
    }

    /// The next stdout line as JSON.
    pub fn event(&self) -> Value {
        let out = self.out.as_ref().expect("stdout open");
        let line = blocking(|| out.recv_timeout(WAIT))
            .unwrap_or_else(|_| panic!("no event line within {WAIT:?}"));
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
    }

    /// Waits for a stderr JSON line satisfying `pred`.
    pub fn stderr(&mut self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + WAIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let Ok(line) = blocking(|| self.err.recv_timeout(left)) else {
                panic!(
                    "no {what} line within {WAIT:?}; stderr: {:?}",
                    self.stderr_seen
                );
            };
            self.stderr_seen.push(line.clone());
            let v: Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("stderr line is not JSON ({e}): {line}"));
            if pred(&v) {
                return v;
            }
        }
    }

    /// Waits for the `connected` status.
    pub fn connected(&mut self) -> Value {
        self.stderr("connected", |v| v["status"] == "connected")
    }

    /// Its open file descriptors.
    pub fn fds(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.pid())).map_or(0, Iterator::count)
    }

    /// Its resident memory, in KiB.
    pub fn rss_kib(&self) -> u64 {
        std::fs::read_to_string(format!("/proc/{}/status", self.pid()))
            .unwrap_or_default()
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits (bounded) for the process to exit by itself.
    pub fn exit_within(&mut self, d: Duration) -> ExitStatus {
        let deadline = Instant::now() + d;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "lookout did not exit within {d:?}"
            );
            thread::sleep(Duration::from_millis(10));
        }
    }

    /// Sends `kill -SIG`.
    pub fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .args([&format!("-{sig}"), &self.child.id().to_string()])
            .status()
            .expect("kill")
            .success();
        assert!(ok, "kill -{sig} lookout");
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `lookout ARGS` to its end and checks it refused them as a usage
/// error: exit 2, nothing on stdout, a message (and no panic) on stderr.
/// Returns stderr for further checks.
///
/// # Panics
/// When lookout cannot be run or did not refuse `args` so.
pub fn usage_error(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_lookout"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run lookout");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    assert!(out.stdout.is_empty(), "{args:?}: nothing on stdout");
    assert!(!stderr.trim().is_empty(), "{args:?}: a message on stderr");
    assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    stderr
}

/// Makes sure both dockerds answer (CI brings them up); `None` without
/// engines.
pub fn require_two_dockerds() -> Option<(engines::EngineLock, engines::EngineLock)> {
    Some((require_docker(false)?, require_docker2(false)?))
}

/// The second dockerd, up, and its lock, as [`require_docker`].
pub fn require_docker2(exclusive: bool) -> Option<engines::EngineLock> {
    engines::require("docker2", exclusive, engines::docker2_up)
}

/// A container of the test on `cli`'s engine, removed on drop.
pub struct On {
    cli: fn(&[&str]) -> Result<String, String>,
    name: String,
}

impl On {
    pub fn create(cli: fn(&[&str]) -> Result<String, String>, name: &str, label: &str) -> Self {
        let image = engines::test_image();
        cli(&[
            "create",
            "--name",
            name,
            "--label",
            label,
            "--network",
            "none",
            &image,
            "sleep",
            "3600",
        ])
        .unwrap_or_else(|e| panic!("create {name}: {e}"));
        Self {
            cli,
            name: name.to_owned(),
        }
    }

    pub fn run(&self, args: &[&str]) {
        let mut all = args.to_vec();
        all.push(&self.name);
        (self.cli)(&all).unwrap_or_else(|e| panic!("{args:?} {}: {e}", self.name));
    }
}

impl Drop for On {
    fn drop(&mut self) {
        let _ = (self.cli)(&["rm", "-f", &self.name]);
    }
}

/// Creates the container `name` on the test dockerd through the Engine
/// API (`POST /containers/create`, `body` its JSON): for what the docker
/// CLI cannot say as the test means it (a health check's exact `Test`).
pub fn docker_create(name: &str, body: &Value) {
    let host = engines::docker_host();
    let socket = host
        .strip_prefix("unix://")
        .unwrap_or_else(|| panic!("a unix socket, not {host}"));
    let out = std::process::Command::new("curl")
        .args(["-sS", "--fail-with-body", "--unix-socket", socket])
        .args(["-H", "Content-Type: application/json", "-X", "POST"])
        .arg(format!("http://docker/containers/create?name={name}"))
        .args(["-d", &body.to_string()])
        .output()
        .expect("curl runs");
    assert!(
        out.status.success(),
        "create {name}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// An event line as `instance kind`.
pub fn instance_kind(v: &Value) -> String {
    format!(
        "{} {}",
        v["instance"].as_str().unwrap_or("-"),
        v["kind"].as_str().unwrap_or("-"),
    )
}

/// `lookout docker --json --host HOST --label LABEL --serve ADDR EXTRA…`,
/// once it serves and is connected: the process and the address it
/// serves on (port 0 resolved; every address reached on loopback).
pub fn serve_docker(
    label: &str,
    host: &str,
    addr: &str,
    extra: &[&str],
) -> (Process, std::net::SocketAddr) {
    let mut args = vec![
        "docker", "--json", "--host", host, "--label", label, "--serve", addr,
    ];
    args.extend_from_slice(extra);
    let mut process = Process::spawn(&args, &[]);
    let serving = process.stderr("serving", |v| v["status"] == "serving");
    let mut addr: std::net::SocketAddr = serving["addr"]
        .as_str()
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("no address in {serving}"));
    if addr.ip().is_unspecified() {
        // Served on every address: reach it on loopback.
        addr.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
    }
    assert_ne!(addr.port(), 0, "port 0 is reported as the real port");
    let scheme = if extra.contains(&"--serve-cert") {
        "https"
    } else {
        "http"
    };
    assert_eq!(serving["scheme"], scheme, "{serving}");
    process.connected();
    (process, addr)
}

/// `lookout etcd --json` of `prefix` on `endpoints`, `extra` added.
pub fn lookout_etcd(endpoints: &str, prefix: &str, extra: &[&str]) -> Process {
    let mut args = vec![
        "etcd",
        "--endpoints",
        endpoints,
        "--prefix",
        prefix,
        "--json",
    ];
    args.extend_from_slice(extra);
    Process::spawn(&args, &[])
}

/// The error of the first `disconnected` status of [`lookout_etcd`].
pub fn refusal(endpoints: &str, prefix: &str, extra: &[&str]) -> String {
    let mut p = lookout_etcd(endpoints, prefix, extra);
    let refused = p.stderr("disconnected", |v| v["status"] == "disconnected");
    refused["error"].as_str().unwrap_or_default().to_owned()
}

/// `lookout docker --json --publish TARGET` (`publisher` added, `--source
/// SOURCE`) and [`lookout_etcd`] of `prefix` (`reader` added): a container
/// created and started; the publisher prints `created`, `started`, and
/// `lookout etcd` reads the same back, each with `SOURCE` as its host.
pub fn publish_and_read_back(
    endpoints: &str,
    prefix: &str,
    target: &str,
    publisher: &[&str],
    reader: &[&str],
    source: &str,
) {
    let label = format!("lookout.etcd={prefix}");
    let mut args = vec!["docker", "--json", "--label", &label, "--publish", target];
    args.extend_from_slice(publisher);
    args.extend_from_slice(&["--source", source]);
    let mut docker = Process::spawn(&args, &[]);
    docker.connected();
    let mut etcd = lookout_etcd(endpoints, prefix, reader);
    etcd.connected();
    let a = format!("{prefix}-a");
    let _containers = Containers(vec![a.clone()]);
    engines::docker_create_test_container(&a, &["--label", &label]).expect("create a");
    engines::docker(&["start", &a]).expect("start a");
    let from_docker: Vec<String> = (0..2).map(|_| instance_kind(&docker.event())).collect();
    let from_etcd: Vec<Value> = (0..2).map(|_| etcd.event()).collect();
    assert_eq!(
        from_docker,
        [format!("{a} created"), format!("{a} started")]
    );
    assert_eq!(
        from_etcd.iter().map(instance_kind).collect::<Vec<_>>(),
        from_docker
    );
    assert!(
        from_etcd.iter().all(|e| e["host"] == source),
        "{from_etcd:?}"
    );
}

/// `GET path` of a `--serve` lookout at `addr` (HTTP/1.1, `Connection:
/// close`, read within `WAIT`): its status code and body.
pub fn http_get(addr: &str, path: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap_or_else(|e| panic!("{addr}: {e}"));
    s.set_read_timeout(Some(WAIT)).expect("a read timeout");
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .expect("a request");
    let mut answer = String::new();
    s.read_to_string(&mut answer).expect("an answer");
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    let code = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status in {head}"));
    (code, body.to_owned())
}
