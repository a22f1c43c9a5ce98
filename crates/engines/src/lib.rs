//! Start, stop and break the real engines that lookout's end-to-end tests run
//! against: dockerd, the Podman API service, a single-node Docker Swarm and a
//! kube-apiserver + etcd testbed.
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
//! | `podman.log`, `podman.pid`, `containers.conf` | the Podman API service (`CONTAINERS_CONF`) |
//! | `apt.log`, `image-build.log`, `k8s-build.log` | package installs, the test image build, the k8s testbed build |
//! | `k8s/` | the k8s testbed: `kubeconfig`, `env`, `apiserver.log`, `etcd.log`, pid files |
//!
//! A test that breaks an engine (kill, stop, restart) should hold
//! `lock_engine(engine, true)` while it does; tests that merely use it may hold
//! `lock_engine(engine, false)`. The locks are machine-wide
//! (`$TMPDIR/lookout-engines/NAME.lock`), as dockerd and podman are: two
//! checkouts testing at once do not kill each other's daemon mid-test.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
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

const DOCKER_READY: Duration = Duration::from_secs(90);
const PODMAN_READY: Duration = Duration::from_secs(60);
const EXIT_WAIT: Duration = Duration::from_secs(20);
const CLI_TIMEOUT: Duration = Duration::from_secs(120);
const PING_TIMEOUT: Duration = Duration::from_secs(2);
const APT_UPDATE_TIMEOUT: Duration = Duration::from_secs(600);
const APT_INSTALL_TIMEOUT: Duration = Duration::from_secs(1200);
const K8S_BUILD_TIMEOUT: Duration = Duration::from_secs(3600);
const K8S_UP_TIMEOUT: Duration = Duration::from_secs(300);
const POLL: Duration = Duration::from_millis(100);

/// Debian packages the engines come from (with their recommends, as `apt-get
/// install -y` picks them).
const DEBIAN_PACKAGES: &[&str] = &["docker.io", "busybox-static", "podman"];

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
/// `KUBECONFIG`, `LOOKOUT_ENGINES=1`, and the variables of the k8s testbed's
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
        (ENV_PODMAN_HOST, podman_host()),
        (ENV_TEST_IMAGE, test_image()),
        (ENV_KUBECONFIG, kubeconfig.clone()),
        ("KUBECONFIG", kubeconfig),
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

// ------------------------------------------------------------------ processes

/// What a finished command printed.
#[derive(Debug, Clone)]
pub struct Output {
    /// Exit status.
    pub status: ExitStatus,
    /// Standard output, lossily decoded.
    pub stdout: String,
    /// Standard error, lossily decoded.
    pub stderr: String,
}

fn describe(cmd: &Command) -> String {
    let mut s = cmd.get_program().to_string_lossy().into_owned();
    for a in cmd.get_args() {
        s.push(' ');
        s.push_str(&a.to_string_lossy());
    }
    s
}

fn reader(mut pipe: impl Read + Send + 'static, buf: Arc<Mutex<Vec<u8>>>, done: Arc<AtomicBool>) {
    thread::spawn(move || {
        let mut chunk = [0u8; 8192];
        loop {
            match pipe.read(&mut chunk) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if let Ok(mut b) = buf.lock() {
                        b.extend_from_slice(&chunk[..n]);
                    }
                }
            }
        }
        done.store(true, Ordering::SeqCst);
    });
}

fn wait_child(child: &mut Child, timeout: Duration) -> Result<Option<ExitStatus>, std::io::Error> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(Some(status));
        }
        if Instant::now() >= deadline {
            return Ok(None);
        }
        thread::sleep(Duration::from_millis(20));
    }
}

/// Run `cmd` with stdin closed, capture its output, kill it after `timeout`.
/// Returns the output whatever the exit status.
pub fn run_output(cmd: &mut Command, timeout: Duration) -> Result<Output, String> {
    let what = describe(cmd);
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot run `{what}`: {e}"))?;
    let out = Arc::new(Mutex::new(Vec::new()));
    let err = Arc::new(Mutex::new(Vec::new()));
    let out_done = Arc::new(AtomicBool::new(false));
    let err_done = Arc::new(AtomicBool::new(false));
    if let Some(p) = child.stdout.take() {
        reader(p, Arc::clone(&out), Arc::clone(&out_done));
    }
    if let Some(p) = child.stderr.take() {
        reader(p, Arc::clone(&err), Arc::clone(&err_done));
    }
    let status =
        wait_child(&mut child, timeout).map_err(|e| format!("waiting for `{what}`: {e}"))?;
    let Some(status) = status else {
        let _ = child.kill();
        let _ = wait_child(&mut child, Duration::from_secs(5));
        return Err(format!(
            "`{what}` did not finish within {timeout:?} and was killed"
        ));
    };
    // A daemon started by the command may hold the pipes open: wait a little for EOF only.
    for _ in 0..40 {
        if out_done.load(Ordering::SeqCst) && err_done.load(Ordering::SeqCst) {
            break;
        }
        thread::sleep(Duration::from_millis(25));
    }
    let take = |b: &Arc<Mutex<Vec<u8>>>| {
        b.lock()
            .map(|v| String::from_utf8_lossy(&v).into_owned())
            .unwrap_or_default()
    };
    Ok(Output {
        status,
        stdout: take(&out),
        stderr: take(&err),
    })
}

/// Run `cmd` (bounded by `timeout`); on success return its trimmed stdout, on
/// failure an error with `context`, the command, its status and its output.
pub fn run(cmd: &mut Command, context: &str, timeout: Duration) -> Result<String, String> {
    let what = describe(cmd);
    let out = run_output(cmd, timeout).map_err(|e| format!("{context}: {e}"))?;
    if out.status.success() {
        Ok(out.stdout.trim().to_owned())
    } else {
        Err(format!(
            "{context}: `{what}` failed ({}):\n{}{}",
            out.status,
            last_lines(&out.stdout, 20),
            last_lines(&out.stderr, 20)
        ))
    }
}

/// Run `cmd` with its output appended to `log` (bounded by `timeout`).
fn run_logged(
    cmd: &mut Command,
    context: &str,
    log: &Path,
    timeout: Duration,
) -> Result<(), String> {
    let what = describe(cmd);
    let mut file = open_log(log)?;
    let _ = writeln!(file, "\n===== engines: {what}");
    let err_file = file.try_clone().map_err(|e| format!("{context}: {e}"))?;
    cmd.stdin(Stdio::null()).stdout(file).stderr(err_file);
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("{context}: cannot run `{what}`: {e}"))?;
    match wait_child(&mut child, timeout) {
        Ok(Some(status)) if status.success() => Ok(()),
        Ok(Some(status)) => Err(format!(
            "{context}: `{what}` failed ({status}); read {}:\n{}",
            log.display(),
            tail_file(log, 30)
        )),
        Ok(None) => {
            let _ = child.kill();
            let _ = wait_child(&mut child, Duration::from_secs(5));
            Err(format!(
                "{context}: `{what}` did not finish within {timeout:?} and was killed; read {}:\n{}",
                log.display(),
                tail_file(log, 30)
            ))
        }
        Err(e) => Err(format!("{context}: waiting for `{what}`: {e}")),
    }
}

fn open_log(log: &Path) -> Result<File, String> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .map_err(|e| format!("cannot open log {}: {e}", log.display()))
}

fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let start = lines.len().saturating_sub(n);
    let mut s = lines[start..].join("\n");
    if !s.is_empty() {
        s.push('\n');
    }
    s
}

/// The last `n` lines of a log file (for error messages).
pub fn tail_file(path: &Path, n: usize) -> String {
    match fs::read(path) {
        Ok(bytes) => {
            let keep = bytes.len().saturating_sub(256 * 1024);
            last_lines(&String::from_utf8_lossy(&bytes[keep..]), n)
        }
        Err(e) => format!("(cannot read {}: {e})\n", path.display()),
    }
}

fn read_pid(path: &Path) -> Option<u32> {
    fs::read_to_string(path)
        .ok()?
        .trim()
        .parse()
        .ok()
        .filter(|p| *p > 1)
}

/// The `/proc` state letter of `pid` (`R`, `S`, `T`, `Z`, …), `None` if gone.
fn proc_state(pid: u32) -> Option<char> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.trim_start().chars().next()
}

fn proc_ppid(pid: u32) -> Option<u32> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

fn proc_comm(pid: u32) -> Option<String> {
    Some(
        fs::read_to_string(format!("/proc/{pid}/comm"))
            .ok()?
            .trim()
            .to_owned(),
    )
}

fn proc_cmdline(pid: u32) -> Option<Vec<String>> {
    let raw = fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    Some(
        raw.split(|b| *b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect(),
    )
}

/// Alive: exists and is not a zombie (an exited, unreaped process is dead).
fn alive(pid: u32) -> bool {
    proc_state(pid).is_some_and(|s| s != 'Z' && s != 'X')
}

/// Live processes whose `comm` is `comm` and whose argv contains all of `args`.
fn find_procs(comm: &str, args: &[&str]) -> Vec<u32> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut pids: Vec<u32> = entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            alive(*pid)
                && proc_comm(*pid).as_deref() == Some(comm)
                && proc_cmdline(*pid)
                    .is_some_and(|argv| args.iter().all(|a| argv.iter().any(|x| x == a)))
        })
        .collect();
    pids.sort_unstable();
    pids
}

fn children_named(parent: u32, comm: &str) -> Vec<u32> {
    find_procs(comm, &[])
        .into_iter()
        .filter(|pid| proc_ppid(*pid) == Some(parent))
        .collect()
}

/// Wait until `pid` has exited (gone, or a zombie nobody reaped yet).
fn wait_dead(pid: u32, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if !alive(pid) {
            return true;
        }
        thread::sleep(Duration::from_millis(20));
    }
    !alive(pid)
}

fn valid_signal(sig: &str) -> Result<&str, String> {
    let s = sig.strip_prefix("SIG").unwrap_or(sig);
    if s.is_empty()
        || s.len() > 8
        || !s
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
    {
        return Err(format!(
            "engines: bad signal name {sig:?} (use STOP, CONT, TERM, KILL, …)"
        ));
    }
    Ok(s)
}

/// Send `sig` (a name: `STOP`, `CONT`, `TERM`, `KILL`, …) to `pid`.
fn signal(pid: u32, sig: &str) -> Result<(), String> {
    let s = valid_signal(sig)?;
    run(
        Command::new("sh").args(["-c", "kill -s \"$0\" \"$1\"", s, &pid.to_string()]),
        &format!("signal {s} to pid {pid}"),
        Duration::from_secs(10),
    )
    .map(drop)
}

/// Start `program args` detached: its own session (`setsid`), stdin closed,
/// output appended to `log`. A small `sh` stays its parent and reaps it, so a
/// killed daemon never lingers as a zombie that its pid file still names. With
/// `pid_file`, the daemon's pid is written there.
fn spawn_daemon(
    program: &Path,
    args: &[String],
    envs: &[(&str, String)],
    log: &Path,
    pid_file: Option<&Path>,
) -> Result<Child, String> {
    let mut file = open_log(log)?;
    let _ = writeln!(
        file,
        "\n===== engines: starting {} {} (unix time {})",
        program.display(),
        args.join(" "),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs())
    );
    let err_file = file
        .try_clone()
        .map_err(|e| format!("cannot dup log {}: {e}", log.display()))?;
    let script = match pid_file {
        Some(_) => r#"pidfile=$1; shift; "$@" & echo $! > "$pidfile"; wait $!"#,
        None => r#"shift; "$@" & wait $!"#,
    };
    let mut cmd = Command::new("setsid");
    cmd.args(["sh", "-c", script, "sh"])
        .arg(pid_file.map_or_else(String::new, |p| p.display().to_string()))
        .arg(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(file)
        .stderr(err_file);
    cmd.current_dir(workspace_root());
    for (k, v) in envs {
        cmd.env(k, v);
    }
    cmd.spawn()
        .map_err(|e| format!("cannot start {}: {e}", program.display()))
}

fn command_exists(name: &str) -> bool {
    find_in_path(name).is_some()
}

fn find_in_path(name: &str) -> Option<PathBuf> {
    if name.contains('/') {
        let p = PathBuf::from(name);
        return is_executable(&p).then_some(p);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

fn is_root() -> bool {
    // std has no getuid; /proc/self/status says it (the real uid is first).
    fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .and_then(|l| l.split_whitespace().next().map(|u| u == "0"))
            .unwrap_or(false)
    })
}

// ------------------------------------------------------------------ pings

/// `GET /_ping` on a Docker-compatible endpoint (`unix:///path` or
/// `tcp://host:port`), bounded by `timeout` per I/O step. `Ok` when it
/// answers 200 `OK`.
pub fn ping(host: &str, timeout: Duration) -> Result<(), String> {
    let request = b"GET /_ping HTTP/1.0\r\nHost: localhost\r\nUser-Agent: lookout-engines\r\n\r\n";
    let mut response = Vec::new();
    if let Some(path) = host.strip_prefix("unix://") {
        let mut s = UnixStream::connect(path).map_err(|e| format!("{host}: connect: {e}"))?;
        s.set_read_timeout(Some(timeout))
            .map_err(|e| e.to_string())?;
        s.set_write_timeout(Some(timeout))
            .map_err(|e| e.to_string())?;
        s.write_all(request)
            .map_err(|e| format!("{host}: write: {e}"))?;
        s.take(64 * 1024)
            .read_to_end(&mut response)
            .map_err(|e| format!("{host}: read: {e}"))?;
    } else if let Some(addr) = host
        .strip_prefix("tcp://")
        .or_else(|| host.strip_prefix("http://"))
    {
        let addr = addr.trim_end_matches('/');
        let sock = std::net::ToSocketAddrs::to_socket_addrs(addr)
            .map_err(|e| format!("{host}: {e}"))?
            .next()
            .ok_or_else(|| format!("{host}: no address"))?;
        let mut s = TcpStream::connect_timeout(&sock, timeout)
            .map_err(|e| format!("{host}: connect: {e}"))?;
        s.set_read_timeout(Some(timeout))
            .map_err(|e| e.to_string())?;
        s.set_write_timeout(Some(timeout))
            .map_err(|e| e.to_string())?;
        s.write_all(request)
            .map_err(|e| format!("{host}: write: {e}"))?;
        s.take(64 * 1024)
            .read_to_end(&mut response)
            .map_err(|e| format!("{host}: read: {e}"))?;
    } else {
        return Err(format!(
            "{host}: only unix:// and tcp:// endpoints are supported"
        ));
    }
    let text = String::from_utf8_lossy(&response);
    let status_ok = text
        .lines()
        .next()
        .is_some_and(|l| l.split_whitespace().nth(1) == Some("200"));
    if status_ok && text.trim_end().ends_with("OK") {
        Ok(())
    } else {
        Err(format!(
            "{host}: unexpected /_ping answer: {:?}",
            text.lines().next().unwrap_or("")
        ))
    }
}

fn wait_ping(
    engine: &str,
    host: &str,
    timeout: Duration,
    child: &mut Option<Child>,
    log: &Path,
) -> Result<Duration, String> {
    let start = Instant::now();
    let mut last = String::new();
    while start.elapsed() < timeout {
        match ping(host, PING_TIMEOUT) {
            Ok(()) => return Ok(start.elapsed()),
            Err(e) => last = e,
        }
        if let Some(c) = child.as_mut()
            && let Ok(Some(status)) = c.try_wait()
        {
            return Err(format!(
                "{engine}: the daemon exited ({status}) before answering /_ping on {host}; read {}:\n{}",
                log.display(),
                tail_file(log, 30)
            ));
        }
        thread::sleep(POLL * 2);
    }
    Err(format!(
        "{engine}: no /_ping answer on {host} within {timeout:?} (last: {last}); read {}:\n{}",
        log.display(),
        tail_file(log, 30)
    ))
}

// ------------------------------------------------------------------ packages

static APT_UPDATED: AtomicBool = AtomicBool::new(false);

fn dpkg_installed(pkg: &str) -> bool {
    run_output(
        Command::new("dpkg-query").args(["-W", "-f=${Status}", pkg]),
        Duration::from_secs(30),
    )
    .is_ok_and(|o| o.status.success() && o.stdout.contains("install ok installed"))
}

/// Install the Debian packages the engines need (`docker.io`, `busybox-static`,
/// `podman`) when one is missing: as root on Debian, `apt-get update` (once per
/// process) then `apt-get install -y`. Elsewhere, say what to install.
pub fn ensure_packages() -> Result<(), String> {
    let apt = command_exists("apt-get") && command_exists("dpkg-query");
    let missing: Vec<&str> = if apt {
        DEBIAN_PACKAGES
            .iter()
            .copied()
            .filter(|p| !dpkg_installed(p))
            .collect()
    } else {
        let mut m = Vec::new();
        if !command_exists("dockerd") && !is_executable(Path::new("/usr/sbin/dockerd")) {
            m.push("docker.io");
        }
        if static_busybox().is_none() {
            m.push("busybox-static");
        }
        if !command_exists("podman") {
            m.push("podman");
        }
        m
    };
    if missing.is_empty() {
        return Ok(());
    }
    if !apt || !is_root() {
        return Err(format!(
            "engines: missing {missing:?}; install them (Debian: `apt-get install -y {}` as root)",
            missing.join(" ")
        ));
    }
    let log = engines_file("apt.log")?;
    eprintln!(
        "[engines] installing {} (log: {})",
        missing.join(" "),
        log.display()
    );
    let t = Instant::now();
    let apt_env = |cmd: &mut Command| {
        cmd.env("DEBIAN_FRONTEND", "noninteractive")
            .env("NEEDRESTART_MODE", "a");
    };
    if !APT_UPDATED.load(Ordering::SeqCst) {
        let mut cmd = Command::new("apt-get");
        cmd.args(["update", "-q"]);
        apt_env(&mut cmd);
        run_logged(
            &mut cmd,
            "engines: apt-get update",
            &log,
            APT_UPDATE_TIMEOUT,
        )?;
        APT_UPDATED.store(true, Ordering::SeqCst);
    }
    let mut cmd = Command::new("apt-get");
    cmd.args(["install", "-y", "-q"]).args(&missing);
    apt_env(&mut cmd);
    run_logged(
        &mut cmd,
        "engines: apt-get install",
        &log,
        APT_INSTALL_TIMEOUT,
    )?;
    eprintln!(
        "[engines] installed {} in {:.1?}",
        missing.join(" "),
        t.elapsed()
    );
    Ok(())
}

/// A statically linked busybox (Debian's `busybox-static` puts it at
/// `/bin/busybox`): an ELF executable without a `PT_INTERP` program header.
fn static_busybox() -> Option<PathBuf> {
    ["/bin/busybox", "/usr/bin/busybox"]
        .iter()
        .map(PathBuf::from)
        .find(|p| is_static_elf(p))
}

fn is_static_elf(path: &Path) -> bool {
    let Ok(bytes) = fs::read(path) else {
        return false;
    };
    // ELF64 little-endian only (x86_64, aarch64).
    if bytes.len() < 64 || &bytes[..4] != b"\x7fELF" || bytes[4] != 2 || bytes[5] != 1 {
        return false;
    }
    let u16_at = |o: usize| {
        bytes
            .get(o..o + 2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]))
    };
    let u64_at = |o: usize| {
        bytes.get(o..o + 8).map(|b| {
            let mut a = [0u8; 8];
            a.copy_from_slice(b);
            u64::from_le_bytes(a)
        })
    };
    let (Some(phoff), Some(phentsize), Some(phnum)) = (u64_at(0x20), u16_at(0x36), u16_at(0x38))
    else {
        return false;
    };
    let Ok(phoff) = usize::try_from(phoff) else {
        return false;
    };
    (0..usize::from(phnum)).all(|i| {
        let at = phoff + i * usize::from(phentsize);
        // p_type 3 = PT_INTERP: a dynamic executable.
        bytes
            .get(at..at + 4)
            .is_some_and(|t| u32::from_le_bytes([t[0], t[1], t[2], t[3]]) != 3)
    })
}

// ------------------------------------------------------------------ docker

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

fn dockerd_binary() -> Result<PathBuf, String> {
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
    find_procs("dockerd", &[]).into_iter().next()
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
/// check that `live-restore` is off, and build [`TEST_IMAGE`] if missing.
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
    if ping(&host, PING_TIMEOUT).is_err() {
        if !managed_docker_host() {
            return Err(format!(
                "docker: {host} (from {ENV_DOCKER_HOST}) does not answer /_ping; \
                 only the default {DEFAULT_DOCKER_HOST} is started by the tests"
            ));
        }
        ensure_packages()?;
        docker_start()?;
    } else if !command_exists(&docker_cli().to_string_lossy()) {
        ensure_packages()?;
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
    let containerds = children_named(pid, "containerd");
    signal(pid, "KILL").map_err(|e| format!("docker: {e}"))?;
    if !wait_dead(pid, EXIT_WAIT) {
        return Err(format!(
            "docker: dockerd (pid {pid}) still alive {EXIT_WAIT:?} after SIGKILL"
        ));
    }
    for c in containerds {
        // dockerd's own containerd dies with it (parent-death signal).
        if !wait_dead(c, EXIT_WAIT) {
            return Err(format!(
                "docker: containerd (pid {c}) still alive {EXIT_WAIT:?} after dockerd was killed"
            ));
        }
    }
    remove_stale_docker_pidfiles()?;
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
    if proc_state(pid) == Some('T') {
        let _ = signal(pid, "CONT");
    }
    let containerds = children_named(pid, "containerd");
    signal(pid, "TERM").map_err(|e| format!("docker: {e}"))?;
    if !wait_dead(pid, Duration::from_secs(60)) {
        signal(pid, "KILL").map_err(|e| format!("docker: {e}"))?;
        if !wait_dead(pid, EXIT_WAIT) {
            return Err(format!("docker: dockerd (pid {pid}) survives SIGKILL"));
        }
    }
    for c in containerds {
        let _ = wait_dead(c, EXIT_WAIT);
    }
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

/// The check of [`docker_verify`] and [`podman_verify`], through `cli`.
fn verify_container(
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

// ------------------------------------------------------------------ podman

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
/// `unix://` socket), and load [`TEST_IMAGE`] from Docker (`docker save | podman load`,
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
    if ping(&host, PING_TIMEOUT).is_err() {
        if podman_socket_path().is_none() {
            return Err(format!(
                "podman: {host} (from {ENV_PODMAN_HOST}) does not answer /_ping; \
                 the tests start a service only on a unix:// socket"
            ));
        }
        ensure_packages()?;
        podman_start()?;
    } else if !command_exists("podman") {
        ensure_packages()?;
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

// ------------------------------------------------------------------ swarm

/// Make dockerd a single-node Swarm manager (`docker swarm init
/// --advertise-addr 127.0.0.1` unless it is one already). Brings Docker up.
pub fn swarm_up() -> Result<(), String> {
    docker_up()?;
    let state = docker(&[
        "info",
        "--format",
        "{{.Swarm.LocalNodeState}} {{.Swarm.ControlAvailable}}",
    ])?;
    match state.as_str() {
        "active true" => Ok(()),
        "inactive false" | "inactive true" => {
            docker(&["swarm", "init", "--advertise-addr", "127.0.0.1"]).map_err(|e| {
                format!(
                    "swarm: init failed: {e}; read {}",
                    engines_file("dockerd.log")
                        .map(|p| p.display().to_string())
                        .unwrap_or_default()
                )
            })?;
            let after = docker(&[
                "info",
                "--format",
                "{{.Swarm.LocalNodeState}} {{.Swarm.ControlAvailable}}",
            ])?;
            if after == "active true" {
                Ok(())
            } else {
                Err(format!(
                    "swarm: after init the node is {after:?}, not an active manager"
                ))
            }
        }
        other => Err(format!(
            "swarm: the node is {other:?} (not inactive, not an active manager); \
             `docker swarm leave --force` and retry"
        )),
    }
}

/// Leave the Swarm (`docker swarm leave --force`) if dockerd is in one.
pub fn swarm_down() -> Result<(), String> {
    if ping(&docker_host(), PING_TIMEOUT).is_err() {
        return Ok(());
    }
    let state = docker(&["info", "--format", "{{.Swarm.LocalNodeState}}"])?;
    if state == "inactive" {
        return Ok(());
    }
    docker(&["swarm", "leave", "--force"]).map(drop)
}

/// Wait until `service` has `want` running tasks (bounded by `timeout`).
pub fn swarm_wait_running(service: &str, want: usize, timeout: Duration) -> Result<(), String> {
    let deadline = Instant::now() + timeout;
    let mut last = String::new();
    while Instant::now() < deadline {
        last = docker(&[
            "service",
            "ps",
            "--filter",
            "desired-state=running",
            "--format",
            "{{.CurrentState}}",
            service,
        ])?;
        let running = last.lines().filter(|l| l.starts_with("Running")).count();
        if running == want {
            return Ok(());
        }
        thread::sleep(Duration::from_millis(250));
    }
    Err(format!(
        "swarm: service {service} has not {want} running tasks after {timeout:?}: {last:?}"
    ))
}

/// `docker service create --detach --no-resolve-image --name NAME ARGS…
/// IMAGE sleep 3600`: a service of the test image (no registry, hence
/// `--no-resolve-image`; services take no `--network none`).
pub fn swarm_service_create(name: &str, args: &[&str]) -> Result<String, String> {
    let image = test_image();
    let mut cmd = vec![
        "service",
        "create",
        "--detach",
        "--no-resolve-image",
        "--name",
        name,
    ];
    cmd.extend(args);
    cmd.extend([image.as_str(), "sleep", "3600"]);
    docker(&cmd)
}

/// Check that a replicated service of the test image can be created (no
/// registry: `--no-resolve-image`), scaled 1 → 2, and removed.
pub fn swarm_verify() -> Result<(), String> {
    let name = format!("lookout-engines-check-{}", std::process::id());
    let _ = docker(&["service", "rm", &name]);
    let result = (|| {
        swarm_service_create(&name, &["--replicas", "1"])?;
        swarm_wait_running(&name, 1, Duration::from_secs(60))?;
        docker(&["service", "scale", "--detach", &format!("{name}=2")])?;
        swarm_wait_running(&name, 2, Duration::from_secs(60))
    })();
    let removed = docker(&["service", "rm", &name]);
    result?;
    removed.map(drop)
}

// ------------------------------------------------------------------ k8s

/// `target/engines/k8s`: the testbed's state directory.
pub fn k8s_dir() -> Result<PathBuf, String> {
    Ok(engines_dir()?.join("k8s"))
}

fn k8s_bin_dir() -> PathBuf {
    workspace_root()
        .join("target")
        .join("k8s-testbed")
        .join("bin")
}

fn testbed() -> PathBuf {
    k8s_bin_dir().join("testbed")
}

/// The testbed's kubeconfig: `LOOKOUT_KUBECONFIG` if set, else
/// `target/engines/k8s/kubeconfig` (written by [`k8s_up`]).
pub fn k8s_kubeconfig() -> Result<PathBuf, String> {
    if let Some(p) = env_nonempty(ENV_KUBECONFIG) {
        return Ok(PathBuf::from(p));
    }
    Ok(k8s_dir()?.join("kubeconfig"))
}

/// Go for the testbed build: `go` on `PATH`, else `/usr/local/go/bin/go`.
fn go_binary() -> Result<PathBuf, String> {
    find_in_path("go")
        .or_else(|| Some(PathBuf::from("/usr/local/go/bin/go")).filter(|p| is_executable(p)))
        .ok_or_else(|| {
            "k8s: Go is needed to build kube-apiserver and etcd (xtask/k8s-testbed) but `go` is \
             neither on PATH nor at /usr/local/go/bin/go: install Go >= 1.26"
                .to_owned()
        })
}

fn testbed_cmd(sub: &str) -> Result<Command, String> {
    let bin = testbed();
    if !is_executable(&bin) {
        return Err(format!(
            "k8s: {} is missing: run k8s_up (`cargo xtask engines up k8s`)",
            bin.display()
        ));
    }
    let mut cmd = Command::new(bin);
    cmd.arg(sub).arg("--dir").arg(k8s_dir()?);
    Ok(cmd)
}

/// Build the testbed (`xtask/k8s-testbed/build.sh target/k8s-testbed/bin`,
/// cached; the first build takes long: log `target/engines/k8s-build.log`).
pub fn k8s_build() -> Result<(), String> {
    let root = workspace_root();
    let script = root.join("xtask").join("k8s-testbed").join("build.sh");
    if !script.exists() {
        return Err(format!("k8s: {} is missing", script.display()));
    }
    let go = go_binary()?;
    let log = engines_file("k8s-build.log")?;
    let bin = k8s_bin_dir();
    let mut path = go
        .parent()
        .map(Path::to_path_buf)
        .into_iter()
        .collect::<Vec<_>>();
    if let Some(p) = std::env::var_os("PATH") {
        path.extend(std::env::split_paths(&p));
    }
    let path = std::env::join_paths(path).map_err(|e| format!("k8s: PATH: {e}"))?;
    eprintln!(
        "[engines] k8s: building the testbed into {} (log: {})",
        bin.display(),
        log.display()
    );
    let t = Instant::now();
    let mut cmd = Command::new("bash");
    cmd.arg(&script)
        .arg(&bin)
        .env("GO", &go)
        .env("PATH", path)
        .current_dir(&root);
    run_logged(
        &mut cmd,
        "k8s: xtask/k8s-testbed/build.sh",
        &log,
        K8S_BUILD_TIMEOUT,
    )?;
    let last = tail_file(&log, 1);
    eprintln!("[engines] k8s: {} ({:.1?})", last.trim(), t.elapsed());
    Ok(())
}

/// Build the testbed if needed and start etcd + kube-apiserver on 127.0.0.1
/// (`testbed up --dir target/engines/k8s --bin target/k8s-testbed/bin`,
/// idempotent). Logs: `target/engines/k8s/{etcd,apiserver}.log`.
pub fn k8s_up() -> Result<(), String> {
    k8s_build()?;
    let log = engines_file("k8s-testbed.log")?;
    let mut cmd = testbed_cmd("up")?;
    cmd.arg("--bin").arg(k8s_bin_dir());
    let t = Instant::now();
    run_logged(&mut cmd, "k8s: testbed up", &log, K8S_UP_TIMEOUT).map_err(|e| {
        let api = k8s_dir()
            .map(|d| d.join("apiserver.log").display().to_string())
            .unwrap_or_default();
        format!("{e}\n(also read {api})")
    })?;
    let kubeconfig = k8s_kubeconfig()?;
    if !kubeconfig.exists() {
        return Err(format!(
            "k8s: testbed up did not write {}; read {}",
            kubeconfig.display(),
            log.display()
        ));
    }
    eprintln!(
        "[engines] k8s: testbed up in {:.1?} (kubeconfig: {})",
        t.elapsed(),
        kubeconfig.display()
    );
    Ok(())
}

fn testbed_run(sub: &str, timeout: Duration) -> Result<String, String> {
    let mut cmd = testbed_cmd(sub)?;
    run(&mut cmd, &format!("k8s: testbed {sub}"), timeout)
}

/// Whether etcd and kube-apiserver are healthy (`testbed status`).
pub fn k8s_status() -> Result<String, String> {
    testbed_run("status", Duration::from_secs(30))
}

/// SIGKILL kube-apiserver and wait until it is gone (etcd keeps running).
pub fn k8s_kill_apiserver() -> Result<(), String> {
    testbed_run("kill-apiserver", Duration::from_secs(30)).map(drop)
}

/// Start kube-apiserver again with its previous arguments; wait for `/readyz`.
pub fn k8s_restart_apiserver() -> Result<(), String> {
    testbed_run("restart-apiserver", Duration::from_secs(180)).map(drop)
}

/// Compact etcd to its current revision (physical); returns that revision.
/// Watches older than it then get `410 Gone`.
pub fn k8s_compact() -> Result<i64, String> {
    let out = testbed_run("compact", Duration::from_secs(60))?;
    out.lines()
        .last()
        .and_then(|l| l.trim().parse().ok())
        .ok_or_else(|| format!("k8s: testbed compact printed no revision: {out:?}"))
}

/// Send `sig` (`"STOP"`, `"CONT"`, …) to kube-apiserver.
pub fn k8s_signal_apiserver(sig: &str) -> Result<(), String> {
    let file = k8s_dir()?.join("apiserver.pid");
    let pid = read_pid(&file)
        .filter(|p| alive(*p))
        .ok_or_else(|| format!("k8s: no live kube-apiserver in {}", file.display()))?;
    signal(pid, sig).map_err(|e| format!("k8s: {e}"))
}

/// Stop etcd and kube-apiserver and delete the state directory (`testbed down`).
pub fn k8s_down() -> Result<(), String> {
    let dir = k8s_dir()?;
    if !dir.exists() {
        return Ok(());
    }
    if let Ok(pid) = k8s_dir().map(|d| d.join("apiserver.pid"))
        && let Some(pid) = read_pid(&pid)
        && proc_state(pid) == Some('T')
    {
        let _ = signal(pid, "CONT");
    }
    testbed_run("down", Duration::from_secs(120)).map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_workspace_root() {
        let root = workspace_root();
        assert!(root.join("Cargo.toml").exists());
        assert!(root.join("tests").join("src").join("engines.rs").exists());
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
            ENV_ENGINES,
        ] {
            assert!(
                vars.iter().any(|(k, _)| k == name),
                "{name} missing from {vars:?}"
            );
        }
    }

    #[test]
    fn signal_names_are_checked() {
        assert_eq!(valid_signal("STOP"), Ok("STOP"));
        assert_eq!(valid_signal("SIGCONT"), Ok("CONT"));
        assert!(valid_signal("stop; rm -rf /").is_err());
        assert!(valid_signal("").is_err());
    }

    #[test]
    fn ping_fails_fast_without_a_daemon() {
        let missing =
            std::env::temp_dir().join(format!("lookout-no-such-{}.sock", std::process::id()));
        let host = format!("unix://{}", missing.display());
        assert!(ping(&host, Duration::from_millis(200)).is_err());
        assert!(ping("ftp://x", Duration::from_millis(200)).is_err());
    }

    #[test]
    fn run_output_is_bounded() {
        let t = Instant::now();
        let r = run_output(Command::new("sleep").arg("5"), Duration::from_millis(200));
        assert!(r.is_err());
        assert!(t.elapsed() < Duration::from_secs(4));
        let ok = run(
            Command::new("sh").args(["-c", "echo hi"]),
            "t",
            Duration::from_secs(10),
        );
        assert_eq!(ok.as_deref(), Ok("hi"));
    }

    #[test]
    fn static_elf_check() {
        // /bin/sh is dynamically linked on Debian.
        if Path::new("/bin/sh").exists() {
            assert!(!is_static_elf(Path::new("/bin/sh")) || static_busybox().is_some());
        }
        assert!(!is_static_elf(Path::new("/nonexistent")));
    }
}
