//! Running commands with bounds (output captured or logged), detached daemons,
//! pid files and `/proc`, signals, and finding executables.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crate::workspace_root;

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
pub(crate) fn run_logged(
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

pub(crate) fn read_pid(path: &Path) -> Option<u32> {
    fs::read_to_string(path)
        .ok()?
        .trim()
        .parse()
        .ok()
        .filter(|p| *p > 1)
}

/// The `/proc` state letter of `pid` (`R`, `S`, `T`, `Z`, …), `None` if gone.
pub(crate) fn proc_state(pid: u32) -> Option<char> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.trim_start().chars().next()
}

fn proc_ppid(pid: u32) -> Option<u32> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

pub(crate) fn proc_comm(pid: u32) -> Option<String> {
    Some(
        fs::read_to_string(format!("/proc/{pid}/comm"))
            .ok()?
            .trim()
            .to_owned(),
    )
}

pub(crate) fn proc_cmdline(pid: u32) -> Option<Vec<String>> {
    let raw = fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    Some(
        raw.split(|b| *b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect(),
    )
}

/// Alive: exists and is not a zombie (an exited, unreaped process is dead).
pub(crate) fn alive(pid: u32) -> bool {
    proc_state(pid).is_some_and(|s| s != 'Z' && s != 'X')
}

/// Live processes whose `comm` is `comm` and whose argv contains all of `args`.
pub(crate) fn find_procs(comm: &str, args: &[&str]) -> Vec<u32> {
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

pub(crate) fn children_named(parent: u32, comm: &str) -> Vec<u32> {
    find_procs(comm, &[])
        .into_iter()
        .filter(|pid| proc_ppid(*pid) == Some(parent))
        .collect()
}

/// Wait until `pid` has exited (gone, or a zombie nobody reaped yet).
pub(crate) fn wait_dead(pid: u32, timeout: Duration) -> bool {
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
pub(crate) fn signal(pid: u32, sig: &str) -> Result<(), String> {
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
pub(crate) fn spawn_daemon(
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

pub(crate) fn command_exists(name: &str) -> bool {
    find_in_path(name).is_some()
}

pub(crate) fn find_in_path(name: &str) -> Option<PathBuf> {
    if name.contains('/') {
        let p = PathBuf::from(name);
        return is_executable(&p).then_some(p);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| is_executable(p))
}

pub(crate) fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

pub(crate) fn is_root() -> bool {
    // std has no getuid; /proc/self/status says it (the real uid is first).
    fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .and_then(|l| l.split_whitespace().next().map(|u| u == "0"))
            .unwrap_or(false)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signal_names_are_checked() {
        assert_eq!(valid_signal("STOP"), Ok("STOP"));
        assert_eq!(valid_signal("SIGCONT"), Ok("CONT"));
        assert!(valid_signal("stop; rm -rf /").is_err());
        assert!(valid_signal("").is_err());
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
}
