//! `lookout k8s` against a fake apiserver on loopback whose watch answers
//! one line of 100 MiB without a newline: lookout reads it only up to its
//! limit (`K8sConfig::max_line`, 16 MiB by default), says why the session
//! ended (`disconnected`: the line exceeded 16777216 bytes), redials with its
//! backoff and resumes the watch from the version it had (no second list),
//! reading the next watch's event. Its peak RSS (`VmHWM`) stays within the
//! limit plus 64 MiB. Needs no engine: the apiserver is this test's.
// The fake apiserver's connections are threads of the test.
#![allow(clippy::disallowed_methods)]

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use common::{Process, TempDir};

/// The line the first watch sends, without its end.
const LINE: u64 = 100 << 20;
/// lookout's default limit of a watch line.
const LIMIT: u64 = 16 << 20;
/// What the peak RSS may exceed the limit by.
const SLACK: u64 = 64 << 20;
/// Bound of every wait of the fake.
const WAIT: Duration = Duration::from_secs(30);

/// The valid event the second watch sends.
const TAIL: &str = concat!(
    r#"{"type":"ADDED","object":{"apiVersion":"apps/v1","kind":"Deployment","metadata":"#,
    r#"{"name":"tail","namespace":"ns","uid":"u-tail","resourceVersion":"101"},"#,
    r#""spec":{"replicas":1}}}"#
);

/// What the fake apiserver saw and did.
#[derive(Default)]
struct Seen {
    lists: AtomicUsize,
    watches: AtomicUsize,
    /// The first watch may stream its line.
    go: AtomicBool,
    /// Bytes of the long line written before lookout closed the connection.
    sent: AtomicU64,
    /// The long line's connection was closed by lookout.
    closed: AtomicBool,
    stop: AtomicBool,
}

/// The fake apiserver: lists of Deployments (empty, at version 100); the
/// first watch streams [`LINE`] bytes of one line once told to go, in
/// 64 KiB chunks; every later watch sends [`TAIL`]; watches stay open.
struct FakeApiserver {
    port: u16,
    seen: Arc<Seen>,
}

impl FakeApiserver {
    fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        let port = listener.local_addr().expect("an address").port();
        let seen = Arc::new(Seen::default());
        let shared = Arc::clone(&seen);
        thread::spawn(move || {
            for conn in listener.incoming() {
                if shared.stop.load(Ordering::Relaxed) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let seen = Arc::clone(&shared);
                thread::spawn(move || serve(conn, &seen));
            }
        });
        Self { port, seen }
    }
}

impl Drop for FakeApiserver {
    fn drop(&mut self) {
        self.seen.stop.store(true, Ordering::Relaxed);
        // Wakes the accept loop.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

/// Answers the requests of one connection (kept alive between lists).
fn serve(conn: TcpStream, seen: &Seen) {
    let _ = conn.set_read_timeout(Some(WAIT));
    let mut reader = BufReader::new(conn.try_clone().expect("a clone of the socket"));
    let mut conn = conn;
    loop {
        let mut first = String::new();
        if reader.read_line(&mut first).unwrap_or(0) == 0 {
            return;
        }
        // The rest of the head (GET: no body).
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            if line == "\r\n" {
                break;
            }
        }
        let target = first.split(' ').nth(1).unwrap_or("/").to_owned();
        let (path, query) = target.split_once('?').unwrap_or((&target, ""));
        let watch = query
            .split('&')
            .any(|kv| kv == "watch=true" || kv == "watch=1");
        if path == "/apis/apps/v1/deployments" && !watch {
            seen.lists.fetch_add(1, Ordering::Relaxed);
            whole(
                &mut conn,
                200,
                r#"{"kind":"DeploymentList","apiVersion":"apps/v1","metadata":{"resourceVersion":"100"},"items":[]}"#,
            );
        } else if path == "/apis/apps/v1/deployments" {
            let n = seen.watches.fetch_add(1, Ordering::Relaxed);
            let _ = conn.write_all(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n",
            );
            if n == 0 {
                long_line(&mut conn, seen);
            } else {
                let _ = chunk(&mut conn, format!("{TAIL}\n").as_bytes());
            }
            hold(&mut conn, seen);
            return;
        } else if path == "/version" {
            whole(
                &mut conn,
                200,
                r#"{"major":"1","minor":"33","gitVersion":"v1.33.0"}"#,
            );
        } else {
            whole(
                &mut conn,
                404,
                r#"{"kind":"Status","apiVersion":"v1","status":"Failure","message":"not here","code":404}"#,
            );
        }
    }
}

fn whole(conn: &mut TcpStream, code: u16, body: &str) {
    let _ = write!(
        conn,
        "HTTP/1.1 {code} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
}

fn chunk(conn: &mut TcpStream, data: &[u8]) -> std::io::Result<()> {
    write!(conn, "{:x}\r\n", data.len())?;
    conn.write_all(data)?;
    conn.write_all(b"\r\n")
}

/// Streams [`LINE`] bytes of one line once told to go, until lookout
/// closes the connection.
fn long_line(conn: &mut TcpStream, seen: &Seen) {
    let deadline = Instant::now() + WAIT;
    while !seen.go.load(Ordering::Relaxed) {
        if Instant::now() > deadline {
            return;
        }
        thread::sleep(Duration::from_millis(5));
    }
    let piece = vec![b'x'; 64 << 10];
    let mut sent = 0u64;
    while sent < LINE {
        if chunk(conn, &piece).is_err() {
            seen.closed.store(true, Ordering::Relaxed);
            break;
        }
        sent += piece.len() as u64;
        seen.sent.store(sent, Ordering::Relaxed);
    }
}

/// Keeps a watch open until lookout closes it (or the test ends).
fn hold(conn: &mut TcpStream, seen: &Seen) {
    let _ = conn.set_read_timeout(Some(Duration::from_millis(50)));
    let mut buf = [0u8; 64];
    while !seen.stop.load(Ordering::Relaxed) {
        match conn.read(&mut buf) {
            Ok(0) => {
                seen.closed.store(true, Ordering::Relaxed);
                break;
            }
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => {
                seen.closed.store(true, Ordering::Relaxed);
                break;
            }
        }
    }
    let _ = conn.shutdown(Shutdown::Both);
}

/// A field of `/proc/PID/status`, in bytes (`VmHWM`, `VmRSS`).
fn vm(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc/PID/status");
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().strip_suffix("kB"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"));
    kib * 1024
}

fn mib(bytes: u64) -> f64 {
    f64::from(u32::try_from(bytes >> 10).unwrap_or(u32::MAX)) / 1024.0
}

/// Waits, bounded, until `what` holds.
fn wait_for(what: &str, cond: impl Fn() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !cond() {
        assert!(Instant::now() < deadline, "{what}: not within {WAIT:?}");
        thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_watch_line_of_100_mib_costs_at_most_its_limit_and_the_watch_resumes() {
    let started = Instant::now();
    let fake = FakeApiserver::start();
    let dir = TempDir::new("k8s_bounded", "kubeconfig");
    let kubeconfig = dir.0.join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: \
             http://127.0.0.1:{}\nusers:\n- name: u\n  user: {{}}\ncontexts:\n- name: fake\n  \
             context:\n    cluster: fake\n    user: u\ncurrent-context: fake\n",
            fake.port
        ),
    )
    .expect("write the kubeconfig");
    let path = kubeconfig.to_str().expect("a UTF-8 path");
    let mut lookout = Process::spawn(
        &[
            "k8s",
            "--kubeconfig",
            path,
            "--kind",
            "deployment",
            "--json",
        ],
        &[],
    );
    let pid = lookout.pid();
    // The first watch is open: what lookout costs before the line.
    wait_for("the first watch", || {
        fake.seen.watches.load(Ordering::Relaxed) >= 1
    });
    let baseline = vm(pid, "VmHWM");
    let line_started = Instant::now();
    fake.seen.go.store(true, Ordering::Relaxed);

    let disconnected = lookout.stderr("disconnected", |v| v["status"] == "disconnected");
    let error = disconnected["error"].as_str().unwrap_or_default();
    println!("k8s_bounded: lookout said: {error}");
    assert!(
        error.contains("watching deployments failed: a line of the watch exceeded 16777216 bytes"),
        "{disconnected}"
    );
    // The session ended: its connection is closed well before 100 MiB.
    wait_for("the long line's connection closed", || {
        fake.seen.closed.load(Ordering::Relaxed)
    });
    let cut_after = line_started.elapsed();
    let sent = fake.seen.sent.load(Ordering::Relaxed);
    assert!(sent < LINE, "lookout read all {sent} bytes");

    // The redial resumes the watch (no second list) and reads its event.
    let event = lookout.event();
    assert_eq!(event["instance"], "deployment/ns/tail", "{event}");
    assert_eq!(event["kind"], "created", "{event}");
    assert!(fake.seen.watches.load(Ordering::Relaxed) >= 2);
    assert_eq!(
        fake.seen.lists.load(Ordering::Relaxed),
        1,
        "a resumed watch lists nothing"
    );

    let peak = vm(pid, "VmHWM");
    let rss = vm(pid, "VmRSS");
    println!(
        "k8s_bounded: baseline VmHWM {:.1} MiB, peak VmHWM {:.1} MiB (+{:.1} MiB), VmRSS now \
         {:.1} MiB; {:.1} MiB of the 100 MiB line sent before lookout hung up ({cut_after:?}); \
         whole test {:?}",
        mib(baseline),
        mib(peak),
        mib(peak.saturating_sub(baseline)),
        mib(rss),
        mib(sent),
        started.elapsed()
    );
    assert!(
        peak <= LIMIT + SLACK,
        "peak RSS {:.1} MiB exceeds the limit (16 MiB) + 64 MiB",
        mib(peak)
    );
}
