//! Running child processes from xtask: cargo itself, with output inherited
//! and a bound in time (a child that outlives it is killed, descendants too).

use std::ffi::OsString;
use std::fs;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

pub fn cargo_bin() -> OsString {
    std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into())
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
