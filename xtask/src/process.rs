//! Running child processes from xtask: cargo itself, with output inherited
//! and a bound in time (a child that outlives it is killed, descendants too).

use std::ffi::OsString;
use std::fs;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// `CARGO_TARGET_DIR`, else `<root>/target`: where cargo builds.
pub fn target_dir(root: &std::path::Path) -> std::path::PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), Into::into)
}

pub fn cargo_bin() -> OsString {
    std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into())
}

/// The profile a tool is built with when CI installs it: its own release
/// profile, but without link-time optimisation and with 16 codegen units.
/// cargo-deny and cargo-semver-checks ask for fat LTO and one codegen unit,
/// which made their builds most of a fresh machine's tool installs (8.7 min
/// for cargo-semver-checks, 4.3 min for cargo-deny on a busy 2-core machine);
/// the tools run a few seconds per CI run, so their speed does not matter.
const TOOL_PROFILE: [(&str, &str); 3] = [
    ("CARGO_PROFILE_RELEASE_LTO", "off"),
    ("CARGO_PROFILE_RELEASE_CODEGEN_UNITS", "16"),
    ("CARGO_INCREMENTAL", "0"),
];

/// Whether `cargo SUBCOMMAND --version` runs (the tool is installed).
pub fn has_cargo_tool(subcommand: &str) -> bool {
    Command::new(cargo_bin())
        .args([subcommand, "--version"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// `cargo install --locked CRATE@VERSION` (with [`TOOL_PROFILE`]) unless
/// `cargo SUBCOMMAND` runs already; says what it installs and how long it took.
pub fn install_cargo_tool(
    root: &std::path::Path,
    subcommand: &str,
    krate: &str,
    timeout: Duration,
) -> Result<(), String> {
    if has_cargo_tool(subcommand) {
        return Ok(());
    }
    eprintln!("==> cargo {subcommand} is missing: cargo install --locked {krate}");
    let t = Instant::now();
    let mut cmd = Command::new(cargo_bin());
    cmd.args(["install", "--locked", krate])
        .current_dir(root)
        .stdin(Stdio::null())
        .envs(TOOL_PROFILE);
    let status = run_inherited(&mut cmd, timeout)?;
    if !status.success() || !has_cargo_tool(subcommand) {
        return Err(format!(
            "`cargo install --locked {krate}` exited with {status}"
        ));
    }
    eprintln!("==> installed {krate} in {:.1?}", t.elapsed());
    Ok(())
}

/// Run `cmd` with inherited stdout/stderr; kill it and its descendants after `timeout`.
pub fn run_inherited(cmd: &mut Command, timeout: Duration) -> Result<ExitStatus, String> {
    let what = format!(
        "{} {}",
        cmd.get_program().to_string_lossy(),
        cmd.get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join(" ")
    );
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot run `{what}`: {e}"))?;
    wait_bounded(&mut child, timeout, &what)
}

/// Wait for `child`; after `timeout`, kill it and its descendants.
pub fn wait_bounded(
    child: &mut Child,
    timeout: Duration,
    what: &str,
) -> Result<ExitStatus, String> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(status) = child
            .try_wait()
            .map_err(|e| format!("waiting for `{what}`: {e}"))?
        {
            return Ok(status);
        }
        if Instant::now() >= deadline {
            kill_tree(child);
            return Err(format!(
                "`{what}` did not finish within {timeout:?} and was killed"
            ));
        }
        thread::sleep(Duration::from_millis(100));
    }
}

/// SIGKILL `child` and every process descended from it (found through /proc).
fn kill_tree(child: &mut Child) {
    let mut pids = vec![child.id()];
    let mut i = 0;
    while i < pids.len() && pids.len() < 10_000 {
        let parent = pids[i];
        if let Ok(entries) = fs::read_dir("/proc") {
            for entry in entries.flatten() {
                let Some(pid) = entry
                    .file_name()
                    .to_str()
                    .and_then(|n| n.parse::<u32>().ok())
                else {
                    continue;
                };
                let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else {
                    continue;
                };
                let parent_of = stat
                    .rfind(')')
                    .and_then(|at| stat[at + 1..].split_whitespace().nth(1))
                    .and_then(|p| p.parse::<u32>().ok());
                if parent_of == Some(parent) && !pids.contains(&pid) {
                    pids.push(pid);
                }
            }
        }
        i += 1;
    }
    for pid in pids.iter().skip(1) {
        let _ = Command::new("sh")
            .args(["-c", "kill -s KILL \"$0\" 2>/dev/null", &pid.to_string()])
            .stdin(Stdio::null())
            .status();
    }
    let _ = child.kill();
    let _ = child.wait();
}
