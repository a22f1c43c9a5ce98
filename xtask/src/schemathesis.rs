//! `cargo xtask schemathesis`: schemathesis (pinned, from `PyPI`, in a venv
//! under `target/schemathesis/`, installed here when missing) against a
//! running `lookout docker --readiness --serve 127.0.0.1:0 --token-file …`
//! (the debug binary CI's `build bins` step made), reading the `OpenAPI`
//! document the server serves at `/openapi.json`, with the token and every
//! check (`--checks all`). Its settings are `xtask/schemathesis/schemathesis.toml`
//! (why `/events` is asked with `follow=false`, why a `wait` is short).
//!
//! Bounded: the install by [`INSTALL_TIMEOUT`], the run by [`RUN_TIMEOUT`];
//! the server is ended (by its pid) whatever happens.

use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use crate::engines;
use crate::process::{run_inherited, wait_bounded};

/// The schemathesis CI runs: pinned, as its checks change between releases.
const SCHEMATHESIS: &str = "schemathesis==4.32.5";

/// A cold venv and pip install took 12.6 s here (pip's cache warm); a
/// fresh machine downloads ~40 packages.
const INSTALL_TIMEOUT: Duration = Duration::from_secs(10 * 60);

/// The run itself (13 s measured: 461 test cases of 6 operations): within
/// the 2 minutes CI gives it.
const RUN_TIMEOUT: Duration = Duration::from_secs(120);

/// How long the server may take to serve and to connect to dockerd.
const START_TIMEOUT: Duration = Duration::from_secs(30);

pub fn run(args: &[String]) -> Result<(), String> {
    if let Some(a) = args.first() {
        return Err(format!(
            "`cargo xtask schemathesis` takes no arguments (got {a:?})"
        ));
    }
    let root = engines::workspace_root();
    let target = crate::process::target_dir(&root);
    let dir = target.join("schemathesis");
    let bin = install(&dir)?;
    let lookout = target.join("debug/lookout");
    if !lookout.exists() {
        return Err(format!(
            "{} is missing: `cargo build -p lookout-cli` first",
            lookout.display()
        ));
    }
    let token = token()?;
    let token_file = dir.join("token");
    std::fs::write(&token_file, format!("{token}\n"))
        .map_err(|e| format!("cannot write {}: {e}", token_file.display()))?;
    let mut server = Server::start(&lookout, &token_file)?;
    let addr = server.addr.clone();
    eprintln!(
        "==> schemathesis against lookout at http://{addr} (pid {})",
        server.child.id()
    );
    let mut cmd = Command::new(&bin);
    cmd.arg("--config-file")
        .arg(root.join("xtask/schemathesis/schemathesis.toml"))
        .args(["--no-color", "run", "--checks", "all", "--header"])
        .arg(format!("Authorization: Bearer {token}"))
        .arg(format!("http://{addr}/openapi.json"))
        .current_dir(&dir)
        .stdin(Stdio::null());
    let status = run_inherited(&mut cmd, RUN_TIMEOUT);
    server.stop();
    let status = status?;
    if !status.success() {
        return Err(format!("schemathesis exited with {status}"));
    }
    Ok(())
}

/// The venv's `schemathesis`, installed when it is not the pinned one
/// (`python3-venv` from Debian first when `python3 -m venv` needs it).
fn install(dir: &Path) -> Result<PathBuf, String> {
    let bin = dir.join("venv/bin/schemathesis");
    let version = SCHEMATHESIS.trim_start_matches("schemathesis==");
    let installed = Command::new(&bin)
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains(version));
    if installed {
        return Ok(bin);
    }
    eprintln!("==> installing {SCHEMATHESIS} in {}", dir.display());
    let t = Instant::now();
    engines::ensure_debian(&["python3-venv"])?;
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let venv = dir.join("venv");
    let status = run_inherited(
        Command::new("python3")
            .args(["-m", "venv", "--clear"])
            .arg(&venv)
            .stdin(Stdio::null()),
        INSTALL_TIMEOUT,
    )?;
    if !status.success() {
        return Err(format!("`python3 -m venv` exited with {status}"));
    }
    let status = run_inherited(
        Command::new(venv.join("bin/pip"))
            .args([
                "install",
                "--quiet",
                "--disable-pip-version-check",
                SCHEMATHESIS,
            ])
            .stdin(Stdio::null()),
        INSTALL_TIMEOUT,
    )?;
    if !status.success() {
        return Err(format!("`pip install {SCHEMATHESIS}` exited with {status}"));
    }
    eprintln!("==> installed {SCHEMATHESIS} in {:.1?}", t.elapsed());
    Ok(bin)
}

/// 32 random hex digits (from the kernel).
fn token() -> Result<String, String> {
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(|e| format!("cannot read /dev/urandom: {e}"))?;
    let mut hex = String::with_capacity(32);
    for b in bytes {
        let _ = write!(hex, "{b:02x}");
    }
    Ok(hex)
}

/// The `lookout … --serve` under test, its address once it serves and is
/// connected.
struct Server {
    child: Child,
    addr: String,
}

impl Server {
    fn start(lookout: &Path, token_file: &Path) -> Result<Self, String> {
        let mut child = Command::new(lookout)
            .args(["docker", "--json", "--readiness", "--host"])
            .arg(engines::docker_host())
            .args(["--serve", "127.0.0.1:0", "--token-file"])
            .arg(token_file)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", lookout.display()))?;
        let Some(stderr) = child.stderr.take() else {
            return Err("no stderr of lookout".to_owned());
        };
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut server = Self {
            child,
            addr: String::new(),
        };
        let deadline = Instant::now() + START_TIMEOUT;
        let mut connected = false;
        while server.addr.is_empty() || !connected {
            let left = deadline.saturating_duration_since(Instant::now());
            let Ok(line) = rx.recv_timeout(left) else {
                server.stop();
                return Err(format!(
                    "lookout did not serve and connect within {START_TIMEOUT:?}"
                ));
            };
            if line.contains(r#""status":"serving""#) {
                server.addr = field(&line, "addr").unwrap_or_default();
            } else if line.contains(r#""status":"connected""#) {
                connected = true;
            }
        }
        // The rest of its stderr, for whoever reads the log.
        thread::spawn(move || {
            for line in rx {
                eprintln!("    lookout: {line}");
            }
        });
        Ok(server)
    }

    /// SIGKILL, then reaped (bounded).
    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = wait_bounded(&mut self.child, Duration::from_secs(10), "lookout");
    }
}

/// The string value of `"key"` in a JSON line.
fn field(line: &str, key: &str) -> Option<String> {
    let value: serde_json::Value = serde_json::from_str(line).ok()?;
    value.get(key)?.as_str().map(str::to_owned)
}
