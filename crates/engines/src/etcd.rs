//! A 3-member etcd cluster on loopback (`engines up etcd`), from the k8s
//! testbed's etcd binary (`target/k8s-testbed/bin/etcd`, built by
//! [`k8s_build`](crate::k8s_build)): member `eN` (N = 1, 2, 3) serves clients
//! on `127.0.0.1:1237N` and its peers on `127.0.0.1:1238N`; its data, log and
//! pid file are `target/engines/etcd/eN{,.log,.pid}`. Start, stop, kill,
//! freeze a member, find the leader, compact. Watches get a progress
//! notification every [`PROGRESS_NOTIFY`] (etcd's default: 10 min).
//!
//! HTTP goes over `std::net` (`Connection: close`, every I/O step bounded):
//! `GET /health`, and the JSON gateway's `POST /v3/maintenance/status`,
//! `/v3/kv/range`, `/v3/kv/compaction`.

use std::fs;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::thread;
use std::time::{Duration, Instant};

use crate::process::{alive, is_executable, proc_state, read_pid, signal, spawn_daemon, wait_dead};
use crate::{engines_dir, env_nonempty, workspace_root};

/// Environment variable: the cluster's client URLs, comma-separated.
pub const ENV_ETCD_ENDPOINTS: &str = "LOOKOUT_ETCD_ENDPOINTS";
/// How many members the cluster has.
pub const ETCD_MEMBERS: usize = 3;
const CLIENT_PORT_BASE: u16 = 12370;
const PEER_PORT_BASE: u16 = 12380;
const TOKEN: &str = "lookout-etcd-engine";
/// How often a member sends a watch its progress notification.
pub const PROGRESS_NOTIFY: &str = "2s";
const UP_TIMEOUT: Duration = Duration::from_secs(90);
const IO_TIMEOUT: Duration = Duration::from_secs(3);
const POLL: Duration = Duration::from_millis(100);

/// `target/engines/etcd`: the cluster's state directory.
pub fn etcd_dir() -> Result<PathBuf, String> {
    Ok(engines_dir()?.join("etcd"))
}

fn etcd_bin() -> PathBuf {
    workspace_root()
        .join("target")
        .join("k8s-testbed")
        .join("bin")
        .join("etcd")
}

fn check_member(member: usize) -> Result<(), String> {
    if (1..=ETCD_MEMBERS).contains(&member) {
        Ok(())
    } else {
        Err(format!("etcd: no member {member} (1..={ETCD_MEMBERS})"))
    }
}

fn client_port(member: usize) -> u16 {
    CLIENT_PORT_BASE + u16::try_from(member).unwrap_or(0)
}

fn peer_port(member: usize) -> u16 {
    PEER_PORT_BASE + u16::try_from(member).unwrap_or(0)
}

/// Member `member`'s client URL, `http://127.0.0.1:1237N`.
pub fn etcd_member_url(member: usize) -> String {
    format!("http://127.0.0.1:{}", client_port(member))
}

/// The cluster's client URLs: `LOOKOUT_ETCD_ENDPOINTS` if set, else the three
/// members'.
pub fn etcd_endpoints() -> String {
    env_nonempty(ENV_ETCD_ENDPOINTS).unwrap_or_else(|| {
        (1..=ETCD_MEMBERS)
            .map(etcd_member_url)
            .collect::<Vec<_>>()
            .join(",")
    })
}

fn pid_file(member: usize) -> Result<PathBuf, String> {
    Ok(etcd_dir()?.join(format!("e{member}.pid")))
}

/// The pid of member `member`, when it runs.
pub fn etcd_member_pid(member: usize) -> Option<u32> {
    let file = pid_file(member).ok()?;
    read_pid(&file).filter(|p| alive(*p))
}

fn member_args(member: usize, dir: &std::path::Path) -> Vec<String> {
    let cluster = (1..=ETCD_MEMBERS)
        .map(|m| format!("e{m}=http://127.0.0.1:{}", peer_port(m)))
        .collect::<Vec<_>>()
        .join(",");
    let client = etcd_member_url(member);
    let peer = format!("http://127.0.0.1:{}", peer_port(member));
    vec![
        format!("--name=e{member}"),
        format!("--data-dir={}", dir.join(format!("e{member}")).display()),
        format!("--listen-client-urls={client}"),
        format!("--advertise-client-urls={client}"),
        format!("--listen-peer-urls={peer}"),
        format!("--initial-advertise-peer-urls={peer}"),
        format!("--initial-cluster={cluster}"),
        format!("--initial-cluster-token={TOKEN}"),
        "--initial-cluster-state=new".to_owned(),
        // Loopback test data: no fsync (as the k8s testbed's etcd).
        "--unsafe-no-fsync=true".to_owned(),
        // Watch progress notifications every 2 s (etcd's default: 10 min),
        // so that the tests see them.
        format!("--watch-progress-notify-interval={PROGRESS_NOTIFY}"),
    ]
}

fn spawn_member(member: usize) -> Result<(), String> {
    let bin = etcd_bin();
    if !is_executable(&bin) {
        crate::k8s_build()?;
    }
    let dir = etcd_dir()?;
    fs::create_dir_all(&dir).map_err(|e| format!("etcd: cannot create {}: {e}", dir.display()))?;
    let log = dir.join(format!("e{member}.log"));
    let pid = pid_file(member)?;
    let _ = fs::remove_file(&pid);
    // The child is the reaping `sh`: it is not waited for here.
    drop(spawn_daemon(
        &bin,
        &member_args(member, &dir),
        &[],
        &log,
        Some(&pid),
    )?);
    let deadline = Instant::now() + Duration::from_secs(10);
    while read_pid(&pid).is_none() {
        if Instant::now() > deadline {
            return Err(format!(
                "etcd: e{member} wrote no pid file {}",
                pid.display()
            ));
        }
        thread::sleep(POLL);
    }
    Ok(())
}

/// Start every member that does not run (one frozen by SIGSTOP is resumed)
/// and wait until all three say `/health` true. Idempotent, cheap when up.
pub fn etcd_up() -> Result<(), String> {
    for member in 1..=ETCD_MEMBERS {
        match etcd_member_pid(member) {
            Some(pid) if proc_state(pid) == Some('T') => signal(pid, "CONT")?,
            Some(_) => {}
            None => spawn_member(member)?,
        }
    }
    for member in 1..=ETCD_MEMBERS {
        wait_healthy(member, UP_TIMEOUT)?;
    }
    Ok(())
}

/// Whether member `member` answers `GET /health` with `"health":"true"`.
pub fn etcd_healthy(member: usize) -> Result<(), String> {
    check_member(member)?;
    let body = http(member, "GET", "/health", "")?;
    if body.replace(' ', "").contains(r#""health":"true""#) {
        Ok(())
    } else {
        Err(format!("etcd: e{member} /health: {body}"))
    }
}

fn wait_healthy(member: usize, timeout: Duration) -> Result<(), String> {
    let start = Instant::now();
    let mut last = String::new();
    while start.elapsed() < timeout {
        match etcd_healthy(member) {
            Ok(()) => return Ok(()),
            Err(e) => last = e,
        }
        thread::sleep(POLL * 2);
    }
    let log = etcd_dir()?.join(format!("e{member}.log"));
    Err(format!(
        "etcd: e{member} not healthy within {timeout:?} (last: {last}); read {}:\n{}",
        log.display(),
        crate::tail_file(&log, 20)
    ))
}

/// Start member `member` again (with its data) and wait until it is healthy.
pub fn etcd_start(member: usize) -> Result<(), String> {
    check_member(member)?;
    if etcd_member_pid(member).is_none() {
        spawn_member(member)?;
    }
    wait_healthy(member, UP_TIMEOUT)
}

fn end_member(member: usize, sig: &str) -> Result<(), String> {
    check_member(member)?;
    let Some(pid) = etcd_member_pid(member) else {
        return Ok(());
    };
    if proc_state(pid) == Some('T') {
        let _ = signal(pid, "CONT");
    }
    signal(pid, sig)?;
    if wait_dead(pid, Duration::from_secs(20)) {
        let _ = fs::remove_file(pid_file(member)?);
        return Ok(());
    }
    signal(pid, "KILL")?;
    if wait_dead(pid, Duration::from_secs(10)) {
        let _ = fs::remove_file(pid_file(member)?);
        Ok(())
    } else {
        Err(format!("etcd: e{member} (pid {pid}) does not exit"))
    }
}

/// Stop member `member` (SIGTERM; SIGKILL after 20 s) and wait until it is gone.
pub fn etcd_stop(member: usize) -> Result<(), String> {
    end_member(member, "TERM")
}

/// SIGKILL member `member` and wait until it is gone.
pub fn etcd_kill9(member: usize) -> Result<(), String> {
    end_member(member, "KILL")
}

/// Send `sig` (`"STOP"`, `"CONT"`, …) to member `member`.
pub fn etcd_signal(member: usize, sig: &str) -> Result<(), String> {
    check_member(member)?;
    let pid = etcd_member_pid(member).ok_or_else(|| format!("etcd: e{member} does not run"))?;
    signal(pid, sig)
}

/// The member (1..=3) that leads, asked of every member that answers
/// (`/v3/maintenance/status`: its `member_id` is the `leader` it names).
pub fn etcd_leader() -> Result<usize, String> {
    let mut last = String::new();
    for member in 1..=ETCD_MEMBERS {
        match http(member, "POST", "/v3/maintenance/status", "{}") {
            Ok(body) => {
                let id = json_string(&body, "member_id");
                let leader = json_string(&body, "leader");
                if id.is_some() && id == leader {
                    return Ok(member);
                }
                last = body;
            }
            Err(e) => last = e,
        }
    }
    Err(format!("etcd: no member says it leads (last: {last})"))
}

/// The cluster's current revision (a range of nothing on any member that answers).
pub fn etcd_revision() -> Result<i64, String> {
    let body = any_member("/v3/kv/range", r#"{"key":"AA==","limit":"1"}"#)?;
    json_string(&body, "revision")
        .and_then(|r| r.parse().ok())
        .ok_or_else(|| format!("etcd: no header.revision in {body}"))
}

/// Compact the cluster to its current revision (physical); returns it.
/// Watches from before it are then canceled with `compact_revision`.
pub fn etcd_compact() -> Result<i64, String> {
    let revision = etcd_revision()?;
    let body = format!(r#"{{"revision":"{revision}","physical":true}}"#);
    any_member("/v3/kv/compaction", &body)?;
    Ok(revision)
}

fn any_member(path: &str, body: &str) -> Result<String, String> {
    let mut last = String::new();
    for member in 1..=ETCD_MEMBERS {
        match http(member, "POST", path, body) {
            Ok(answer) if !answer.contains(r#""error""#) => return Ok(answer),
            Ok(answer) => last = answer,
            Err(e) => last = e,
        }
    }
    Err(format!("etcd: {path}: no member answered (last: {last})"))
}

/// Stop every member and delete `target/engines/etcd`.
pub fn etcd_down() -> Result<(), String> {
    let dir = etcd_dir()?;
    if !dir.exists() {
        return Ok(());
    }
    for member in 1..=ETCD_MEMBERS {
        etcd_stop(member)?;
    }
    fs::remove_dir_all(&dir).map_err(|e| format!("etcd: cannot remove {}: {e}", dir.display()))
}

/// One line per member: its URL, pid and health.
pub fn etcd_status() -> String {
    (1..=ETCD_MEMBERS)
        .map(|m| {
            let pid = etcd_member_pid(m).map_or_else(|| "down".to_owned(), |p| format!("pid {p}"));
            let health = etcd_healthy(m).map_or_else(|e| e, |()| "healthy".to_owned());
            format!("e{m} {} {pid} {health}", etcd_member_url(m))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// One HTTP/1.1 request to member `member` (`Connection: close`); the body
/// of a 2xx answer.
fn http(member: usize, method: &str, path: &str, body: &str) -> Result<String, String> {
    let addr = SocketAddr::from(([127, 0, 0, 1], client_port(member)));
    let what = format!("etcd: e{member} {method} {path}");
    let mut s = TcpStream::connect_timeout(&addr, IO_TIMEOUT)
        .map_err(|e| format!("{what}: connect: {e}"))?;
    s.set_read_timeout(Some(IO_TIMEOUT))
        .map_err(|e| format!("{what}: {e}"))?;
    s.set_write_timeout(Some(IO_TIMEOUT))
        .map_err(|e| format!("{what}: {e}"))?;
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: lookout-engines\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(request.as_bytes())
        .map_err(|e| format!("{what}: write: {e}"))?;
    let mut response = Vec::new();
    s.take(1024 * 1024)
        .read_to_end(&mut response)
        .map_err(|e| format!("{what}: read: {e}"))?;
    let text = String::from_utf8_lossy(&response);
    let (head, rest) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("{what}: no HTTP answer"))?;
    let status = head.split_whitespace().nth(1).unwrap_or("");
    let rest = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(rest)
    } else {
        rest.to_owned()
    };
    if status.starts_with('2') {
        Ok(rest)
    } else {
        Err(format!("{what}: {status}: {}", rest.trim()))
    }
}

fn dechunk(mut rest: &str) -> String {
    let mut out = String::new();
    for _ in 0..10_000 {
        let Some((size, tail)) = rest.split_once("\r\n") else {
            break;
        };
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || tail.len() < n {
            break;
        }
        out.push_str(&tail[..n]);
        rest = tail[n..].trim_start_matches("\r\n");
    }
    out
}

/// The string value of the first `"key":"…"` in `json` (the gateway writes
/// int64 fields as strings).
fn json_string(json: &str, key: &str) -> Option<String> {
    let pat = format!("\"{key}\":\"");
    let start = json.find(&pat)? + pat.len();
    let len = json[start..].find('"')?;
    Some(json[start..start + len].to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_and_json() {
        assert_eq!(etcd_member_url(2), "http://127.0.0.1:12372");
        assert!(check_member(0).is_err() && check_member(4).is_err());
        let args = member_args(3, std::path::Path::new("/d"));
        assert!(args.contains(&"--listen-peer-urls=http://127.0.0.1:12383".to_owned()));
        assert_eq!(
            json_string(r#"{"header":{"revision":"42"}}"#, "revision").as_deref(),
            Some("42")
        );
        assert_eq!(dechunk("3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"), "abcde");
    }
}
