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
use std::path::{Path, PathBuf};
use std::process::Child;
use std::thread;
use std::time::{Duration, Instant};

use crate::process::{
    alive, is_executable, proc_cmdline, proc_state, read_pid, signal, spawn_daemon, wait_dead,
};
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

fn loopback_url(port: u16) -> String {
    format!("http://127.0.0.1:{port}")
}

/// Member `member`'s client URL, `http://127.0.0.1:1237N`.
pub fn etcd_member_url(member: usize) -> String {
    loopback_url(client_port(member))
}

/// The cluster's client URLs: `LOOKOUT_ETCD_ENDPOINTS` if set, else the three
/// members'.
pub fn etcd_endpoints() -> String {
    env_nonempty(ENV_ETCD_ENDPOINTS).unwrap_or_else(|| ENGINE.endpoints())
}

/// Where a cluster's members listen, what peer URLs they advertise, and
/// where they keep their state: the engines' cluster, or an [`EtcdCluster`].
#[derive(Debug)]
struct Layout {
    /// `target/engines/NAME` (`etcd` for the engines' cluster).
    name: &'static str,
    token: &'static str,
    /// Member N's client port is `clients[N - 1]`.
    clients: [u16; ETCD_MEMBERS],
    /// The peer ports members listen on.
    peers: [u16; ETCD_MEMBERS],
    /// The peer URLs members advertise (their listening ones, or relays).
    advertised: [String; ETCD_MEMBERS],
    /// More flags every member is given.
    extra: Vec<String>,
    /// TLS clusters: client URLs are `https://` (the certificate flags in
    /// `extra`), and `/health` is read over plain http on member N's
    /// `--listen-metrics-urls` port `metrics[N - 1]`.
    metrics: Option<[u16; ETCD_MEMBERS]>,
}

/// The engines' cluster: clients on 1237N, peers on 1238N, advertised as is.
static ENGINE: std::sync::LazyLock<Layout> = std::sync::LazyLock::new(|| Layout {
    name: "etcd",
    token: TOKEN,
    clients: [client_port(1), client_port(2), client_port(3)],
    peers: [peer_port(1), peer_port(2), peer_port(3)],
    advertised: [1, 2, 3].map(|m| loopback_url(peer_port(m))),
    extra: Vec::new(),
    metrics: None,
});

impl Layout {
    /// A private cluster's layout (its token its name).
    fn private(
        name: &'static str,
        clients: [u16; ETCD_MEMBERS],
        peers: [u16; ETCD_MEMBERS],
        advertised: [String; ETCD_MEMBERS],
        extra: &[&str],
        metrics: Option<[u16; ETCD_MEMBERS]>,
    ) -> Self {
        Self {
            name,
            token: name,
            clients,
            peers,
            advertised,
            extra: extra.iter().map(|s| (*s).to_owned()).collect(),
            metrics,
        }
    }

    fn dir(&self) -> Result<PathBuf, String> {
        Ok(engines_dir()?.join(self.name))
    }

    fn client(&self, member: usize) -> u16 {
        self.clients[member - 1]
    }

    /// Member `member`'s client URL (`https://` for a TLS cluster).
    fn client_url(&self, member: usize) -> String {
        let url = loopback_url(self.client(member));
        if self.metrics.is_some() {
            url.replacen("http://", "https://", 1)
        } else {
            url
        }
    }

    fn endpoints(&self) -> String {
        (1..=ETCD_MEMBERS)
            .map(|m| self.client_url(m))
            .collect::<Vec<_>>()
            .join(",")
    }

    fn who(&self, member: usize) -> String {
        if self.name == "etcd" {
            format!("etcd: e{member}")
        } else {
            format!("etcd ({}): e{member}", self.name)
        }
    }

    fn pid_file(&self, member: usize) -> Result<PathBuf, String> {
        Ok(self.dir()?.join(format!("e{member}.pid")))
    }

    fn pid(&self, member: usize) -> Option<u32> {
        let file = self.pid_file(member).ok()?;
        read_pid(&file).filter(|p| alive(*p))
    }

    /// Member `member`'s flags, its data under `dir` (already resolved).
    fn member_args(&self, member: usize, dir: &Path) -> Vec<String> {
        let cluster = (1..=ETCD_MEMBERS)
            .map(|m| format!("e{m}={}", self.advertised[m - 1]))
            .collect::<Vec<_>>()
            .join(",");
        let client = self.client_url(member);
        let mut args = vec![
            format!("--name=e{member}"),
            format!("--data-dir={}", dir.join(format!("e{member}")).display()),
            format!("--listen-client-urls={client}"),
            format!("--advertise-client-urls={client}"),
            format!(
                "--listen-peer-urls={}",
                loopback_url(self.peers[member - 1])
            ),
            format!(
                "--initial-advertise-peer-urls={}",
                self.advertised[member - 1]
            ),
            format!("--initial-cluster={cluster}"),
            format!("--initial-cluster-token={}", self.token),
            "--initial-cluster-state=new".to_owned(),
            // Loopback test data: no fsync (as the k8s testbed's etcd).
            "--unsafe-no-fsync=true".to_owned(),
            // Watch progress notifications every 2 s (etcd's default: 10 min),
            // so that the tests see them.
            format!("--watch-progress-notify-interval={PROGRESS_NOTIFY}"),
        ];
        if let Some(metrics) = self.metrics {
            args.push(format!(
                "--listen-metrics-urls={}",
                loopback_url(metrics[member - 1])
            ));
        }
        args.extend(self.extra.iter().cloned());
        args
    }

    /// Starts member `member`; returns its reaping `sh`.
    fn spawn(&self, member: usize) -> Result<Child, String> {
        let bin = etcd_bin();
        if !is_executable(&bin) {
            crate::k8s_build()?;
        }
        let dir = self.dir()?;
        fs::create_dir_all(&dir)
            .map_err(|e| format!("etcd: cannot create {}: {e}", dir.display()))?;
        // Resolved: `target/engines` may be a link into another checkout, and
        // a member outlives the checkout that started it.
        let dir = fs::canonicalize(&dir).unwrap_or(dir);
        let bin = fs::canonicalize(&bin).unwrap_or(bin);
        let log = dir.join(format!("e{member}.log"));
        let pid = dir.join(format!("e{member}.pid"));
        let _ = fs::remove_file(&pid);
        let child = spawn_daemon(&bin, &self.member_args(member, &dir), &[], &log, Some(&pid))?;
        let deadline = Instant::now() + Duration::from_secs(10);
        while read_pid(&pid).is_none() {
            if Instant::now() > deadline {
                return Err(format!(
                    "{}: wrote no pid file {}",
                    self.who(member),
                    pid.display()
                ));
            }
            thread::sleep(POLL);
        }
        Ok(child)
    }

    /// `GET /health` says `"health":"true"`; else the answer, or why none.
    fn healthy(&self, member: usize) -> Result<(), String> {
        check_member(member)?;
        let port = self
            .metrics
            .map_or_else(|| self.client(member), |m| m[member - 1]);
        let body = http(port, &self.who(member), "GET", "/health", "")?;
        if body.replace(' ', "").contains(r#""health":"true""#) {
            Ok(())
        } else {
            Err(format!("{} /health: {body}", self.who(member)))
        }
    }

    fn wait_healthy(&self, member: usize, timeout: Duration) -> Result<(), String> {
        let start = Instant::now();
        let mut last = String::new();
        while start.elapsed() < timeout {
            match self.healthy(member) {
                Ok(()) => return Ok(()),
                Err(e) => last = e,
            }
            thread::sleep(POLL * 2);
        }
        let log = self.dir()?.join(format!("e{member}.log"));
        Err(format!(
            "{} not healthy within {timeout:?} (last: {last}); read {}:\n{}",
            self.who(member),
            log.display(),
            crate::tail_file(&log, 20)
        ))
    }

    /// `POST /v3/maintenance/status` of member `member`.
    fn status(&self, member: usize) -> Result<String, String> {
        check_member(member)?;
        http(
            self.client(member),
            &self.who(member),
            "POST",
            "/v3/maintenance/status",
            "{}",
        )
    }

    fn leader(&self) -> Result<usize, String> {
        let mut last = String::new();
        for member in 1..=ETCD_MEMBERS {
            match self.status(member) {
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

    fn any_member(&self, path: &str, body: &str) -> Result<String, String> {
        let mut last = String::new();
        for member in 1..=ETCD_MEMBERS {
            match http(self.client(member), &self.who(member), "POST", path, body) {
                Ok(answer) if !answer.contains(r#""error""#) => return Ok(answer),
                Ok(answer) => last = answer,
                Err(e) => last = e,
            }
        }
        Err(format!("etcd: {path}: no member answered (last: {last})"))
    }
}

/// The pid of member `member`, when it runs.
pub fn etcd_member_pid(member: usize) -> Option<u32> {
    check_member(member).ok()?;
    ENGINE.pid(member)
}

/// Start every member that does not run (one frozen by SIGSTOP is resumed)
/// and wait until all three say `/health` true. Idempotent, cheap when up.
pub fn etcd_up() -> Result<(), String> {
    for member in 1..=ETCD_MEMBERS {
        match etcd_member_pid(member) {
            Some(pid) if proc_state(pid) == Some('T') => signal(pid, "CONT")?,
            Some(_) => {}
            // The child is the reaping `sh`: it is not waited for here.
            None => drop(ENGINE.spawn(member)?),
        }
    }
    for member in 1..=ETCD_MEMBERS {
        ENGINE.wait_healthy(member, UP_TIMEOUT)?;
    }
    Ok(())
}

/// Whether member `member` answers `GET /health` with `"health":"true"`.
pub fn etcd_healthy(member: usize) -> Result<(), String> {
    ENGINE.healthy(member)
}

/// Start member `member` again (with its data) and wait until it is healthy.
/// (With two members down, start them with [`etcd_up`]: one alone has no
/// quorum, so it is never healthy.)
pub fn etcd_start(member: usize) -> Result<(), String> {
    check_member(member)?;
    if etcd_member_pid(member).is_none() {
        drop(ENGINE.spawn(member)?);
    }
    ENGINE.wait_healthy(member, UP_TIMEOUT)
}

/// Ends `pid` (member `member` of a cluster, named `who`) with `sig`,
/// SIGKILL after 20 s; waits until it is gone.
fn end_pid(pid: u32, who: &str, sig: &str) -> Result<(), String> {
    send_end(pid, sig)?;
    await_end(pid, who)
}

fn send_end(pid: u32, sig: &str) -> Result<(), String> {
    if sig != "KILL" && proc_state(pid) == Some('T') {
        let _ = signal(pid, "CONT");
    }
    signal(pid, sig)
}

/// Waits until `pid` is gone; SIGKILL after 20 s.
fn await_end(pid: u32, who: &str) -> Result<(), String> {
    if wait_dead(pid, Duration::from_secs(20)) {
        return Ok(());
    }
    signal(pid, "KILL")?;
    if wait_dead(pid, Duration::from_secs(10)) {
        Ok(())
    } else {
        Err(format!("{who} (pid {pid}) does not exit"))
    }
}

fn end_member(member: usize, sig: &str) -> Result<(), String> {
    check_member(member)?;
    let Some(pid) = etcd_member_pid(member) else {
        return Ok(());
    };
    end_pid(pid, &ENGINE.who(member), sig)?;
    let _ = fs::remove_file(ENGINE.pid_file(member)?);
    Ok(())
}

/// Sends `sig` (`"TERM"`, `"KILL"`) to every member that runs, all at once
/// (a client sees the whole cluster go, not one member after another),
/// then waits until each is gone (SIGKILL after 20 s). [`etcd_up`] starts
/// them again.
pub fn etcd_end_all(sig: &str) -> Result<(), String> {
    let pids: Vec<(usize, u32)> = (1..=ETCD_MEMBERS)
        .filter_map(|m| Some((m, etcd_member_pid(m)?)))
        .collect();
    for (_, pid) in &pids {
        send_end(*pid, sig)?;
    }
    for (member, pid) in pids {
        await_end(pid, &ENGINE.who(member))?;
        let _ = fs::remove_file(ENGINE.pid_file(member)?);
    }
    Ok(())
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
    ENGINE.leader()
}

/// The cluster's current revision (a range of nothing on any member that answers).
pub fn etcd_revision() -> Result<i64, String> {
    let body = ENGINE.any_member("/v3/kv/range", r#"{"key":"AA==","limit":"1"}"#)?;
    header_revision(&body)
}

fn header_revision(body: &str) -> Result<i64, String> {
    json_string(body, "revision")
        .and_then(|r| r.parse().ok())
        .ok_or_else(|| format!("etcd: no header.revision in {body}"))
}

/// The leader's backend database: (`dbSize`, `dbSizeInUse`), bytes
/// (`/v3/maintenance/status`).
pub fn etcd_db_size() -> Result<(i64, i64), String> {
    let body = ENGINE.status(ENGINE.leader()?)?;
    let field = |k: &str| {
        json_string(&body, k)
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| format!("etcd: no {k} in {body}"))
    };
    Ok((field("dbSize")?, field("dbSizeInUse")?))
}

/// Compact the cluster to its current revision (physical); returns it.
/// Watches from before it are then canceled with `compact_revision`.
pub fn etcd_compact() -> Result<i64, String> {
    let revision = etcd_revision()?;
    let body = format!(r#"{{"revision":"{revision}","physical":true}}"#);
    ENGINE.any_member("/v3/kv/compaction", &body)?;
    Ok(revision)
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

/// A private 3-member etcd cluster that a test starts beside the engines'
/// (the same binary): its own client and peer ports, its data, logs and pid
/// files under `target/engines/NAME` (wiped at start), and the peer URLs it
/// is told to advertise — a test's relays in front of the peer ports, so
/// that the test can partition a member. Dropping it kills every member
/// by its pid, waits until it is gone and removes its data directory (its
/// log stays).
#[derive(Debug)]
pub struct EtcdCluster {
    layout: Layout,
    /// The members' reaping `sh`s, waited for on drop.
    daemons: Vec<Child>,
}

impl EtcdCluster {
    /// Starts members `e1`..`e3` (`clients[N - 1]`, `peers[N - 1]`,
    /// advertising `advertised[N - 1]`) and waits until each is healthy.
    /// Members a previous run of `name` left (named by its pid files, their
    /// command line naming its data directory) are killed first.
    pub fn start(
        name: &'static str,
        clients: [u16; ETCD_MEMBERS],
        peers: [u16; ETCD_MEMBERS],
        advertised: [String; ETCD_MEMBERS],
    ) -> Result<Self, String> {
        Self::start_with(name, clients, peers, advertised, &[])
    }

    /// [`EtcdCluster::start`], every member given the flags `extra` too
    /// (`--auth-token-ttl=2`, …).
    pub fn start_with(
        name: &'static str,
        clients: [u16; ETCD_MEMBERS],
        peers: [u16; ETCD_MEMBERS],
        advertised: [String; ETCD_MEMBERS],
        extra: &[&str],
    ) -> Result<Self, String> {
        Self::start_layout(Layout::private(
            name, clients, peers, advertised, extra, None,
        ))
    }

    /// [`EtcdCluster::start_with`] with `https://` client URLs: `extra`
    /// holds the members' TLS flags (`--cert-file=…`, `--key-file=…`, and
    /// `--trusted-ca-file=…` with `--client-cert-auth` to require client
    /// certificates); member N serves `/health` over plain http on
    /// `metrics[N - 1]` (`--listen-metrics-urls`), which is what
    /// [`EtcdCluster::healthy`] reads. The other helpers (leader,
    /// compaction, member ids) speak plain http to the client port: not for
    /// a TLS cluster.
    pub fn start_tls(
        name: &'static str,
        clients: [u16; ETCD_MEMBERS],
        peers: [u16; ETCD_MEMBERS],
        advertised: [String; ETCD_MEMBERS],
        metrics: [u16; ETCD_MEMBERS],
        extra: &[&str],
    ) -> Result<Self, String> {
        Self::start_layout(Layout::private(
            name,
            clients,
            peers,
            advertised,
            extra,
            Some(metrics),
        ))
    }

    fn start_layout(layout: Layout) -> Result<Self, String> {
        let name = layout.name;
        if name == ENGINE.name || name.is_empty() || name.contains('/') {
            return Err(format!("etcd: {name:?} cannot name a private cluster"));
        }
        let mut cluster = Self {
            layout,
            daemons: Vec::new(),
        };
        let dir = cluster.layout.dir()?;
        for member in 1..=ETCD_MEMBERS {
            let data = format!("e{member}");
            if let Some(pid) = cluster.layout.pid(member)
                && proc_cmdline(pid).is_some_and(|argv| {
                    argv.iter().any(|a| {
                        a.starts_with("--data-dir=") && a.ends_with(&format!("/{name}/{data}"))
                    })
                })
            {
                end_pid(pid, &cluster.layout.who(member), "KILL")?;
            }
        }
        if dir.exists() {
            fs::remove_dir_all(&dir)
                .map_err(|e| format!("etcd: cannot remove {}: {e}", dir.display()))?;
        }
        for member in 1..=ETCD_MEMBERS {
            let child = cluster.layout.spawn(member)?;
            cluster.daemons.push(child);
        }
        for member in 1..=ETCD_MEMBERS {
            cluster.layout.wait_healthy(member, UP_TIMEOUT)?;
        }
        Ok(cluster)
    }

    /// Member `member`'s client URL (`https://` for a TLS cluster).
    pub fn member_url(&self, member: usize) -> String {
        self.layout.client_url(member)
    }

    /// The members' client URLs, comma-separated.
    pub fn endpoints(&self) -> String {
        self.layout.endpoints()
    }

    /// Whether member `member` says `/health` true (else what it says).
    pub fn healthy(&self, member: usize) -> Result<(), String> {
        self.layout.healthy(member)
    }

    /// Waits (bounded) until member `member` says `/health` true.
    pub fn wait_healthy(&self, member: usize, timeout: Duration) -> Result<(), String> {
        self.layout.wait_healthy(member, timeout)
    }

    /// Member `member`'s id (what its peers' requests carry, in hex, as
    /// `X-Server-From`).
    pub fn member_id(&self, member: usize) -> Result<u64, String> {
        let body = self.layout.status(member)?;
        json_string(&body, "member_id")
            .and_then(|id| id.parse().ok())
            .ok_or_else(|| format!("etcd: no member_id in {body}"))
    }

    /// The member that leads.
    pub fn leader(&self) -> Result<usize, String> {
        self.layout.leader()
    }

    /// The revision member `member` has applied (a serializable range: its
    /// own store, no leader asked).
    pub fn local_revision(&self, member: usize) -> Result<i64, String> {
        check_member(member)?;
        let body = http(
            self.layout.client(member),
            &self.layout.who(member),
            "POST",
            "/v3/kv/range",
            r#"{"key":"AA==","limit":"1","serializable":true}"#,
        )?;
        header_revision(&body)
    }

    /// Enables etcd's authentication through member 1's gateway: user
    /// `root` with `password` (no `"` or `\\` in it) and the `root` role.
    /// From then on a request without a token is refused.
    pub fn enable_auth(&self, password: &str) -> Result<(), String> {
        if password.contains(['"', '\\']) {
            return Err("etcd: a test password without quotes or backslashes".to_owned());
        }
        let who = self.layout.who(1);
        let port = self.layout.client(1);
        http(
            port,
            &who,
            "POST",
            "/v3/auth/user/add",
            &format!(r#"{{"name":"root","password":"{password}"}}"#),
        )?;
        http(
            port,
            &who,
            "POST",
            "/v3/auth/user/grant",
            r#"{"user":"root","role":"root"}"#,
        )?;
        http(port, &who, "POST", "/v3/auth/enable", "{}").map(drop)
    }

    /// Member `member`'s pid.
    pub fn pid(&self, member: usize) -> Option<u32> {
        check_member(member).ok()?;
        self.layout.pid(member)
    }
}

impl Drop for EtcdCluster {
    fn drop(&mut self) {
        for member in 1..=ETCD_MEMBERS {
            if let Some(pid) = self.layout.pid(member)
                && let Err(e) = end_pid(pid, &self.layout.who(member), "KILL")
            {
                eprintln!("{e}");
            }
        }
        for mut sh in self.daemons.drain(..) {
            let _ = sh.kill();
            let _ = sh.wait();
        }
        // The members' data (each preallocates two 64 MB WAL segments: 367 MB
        // a cluster, 2.2 GB for the tests' six) goes with them; their logs
        // stay for a failed test's reader.
        if let Ok(dir) = self.layout.dir() {
            for member in 1..=ETCD_MEMBERS {
                let data = dir.join(format!("e{member}"));
                if let Err(e) = std::fs::remove_dir_all(&data)
                    && e.kind() != std::io::ErrorKind::NotFound
                {
                    eprintln!("{}: {e}", data.display());
                }
            }
        }
    }
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

/// One HTTP/1.1 request to the member (`who`) on 127.0.0.1:`port`
/// (`Connection: close`); the body of a 2xx answer.
fn http(port: u16, who: &str, method: &str, path: &str, body: &str) -> Result<String, String> {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let what = format!("{who} {method} {path}");
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
        let args = ENGINE.member_args(3, Path::new("/d"));
        assert!(args.contains(&"--listen-peer-urls=http://127.0.0.1:12383".to_owned()));
        assert!(args.contains(&"--data-dir=/d/e3".to_owned()));
        let relayed = Layout {
            name: "t",
            token: "t",
            clients: [1, 2, 3],
            peers: [4, 5, 6],
            advertised: ["http://r1".into(), "http://r2".into(), "http://r3".into()],
            extra: vec!["--auth-token-ttl=2".into()],
            metrics: None,
        };
        let args = relayed.member_args(2, Path::new("/d"));
        assert!(args.contains(&"--auth-token-ttl=2".to_owned()));
        assert!(args.contains(&"--listen-peer-urls=http://127.0.0.1:5".to_owned()));
        assert!(args.contains(&"--initial-advertise-peer-urls=http://r2".to_owned()));
        assert!(
            args.contains(&"--initial-cluster=e1=http://r1,e2=http://r2,e3=http://r3".to_owned())
        );
        assert_eq!(
            json_string(r#"{"header":{"revision":"42"}}"#, "revision").as_deref(),
            Some("42")
        );
        let tls = Layout {
            metrics: Some([7, 8, 9]),
            ..relayed
        };
        let args = tls.member_args(3, Path::new("/d"));
        assert!(args.contains(&"--listen-client-urls=https://127.0.0.1:3".to_owned()));
        assert!(args.contains(&"--listen-metrics-urls=http://127.0.0.1:9".to_owned()));
        assert_eq!(
            tls.endpoints(),
            "https://127.0.0.1:1,https://127.0.0.1:2,https://127.0.0.1:3"
        );
        assert_eq!(dechunk("3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"), "abcde");
    }
}
