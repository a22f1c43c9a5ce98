//! `lookout docker --host NAME=URI … --serve ADDR` (two real dockerds; the
//! second: `cargo xtask engines up docker2`): every instance, event, status
//! and metric says its `host`; `?host=` picks engines (an unknown one is
//! 400); an instance on both engines is ambiguous (404 naming the hosts)
//! until `?host=` picks one; a wait watches the engine picked; `/healthz`
//! says each engine; a resuming SSE client gets each engine's present as a
//! resync. With one engine, `?host=` is refused and nothing says a host.

// Test code reads the child's pipes on threads; only library crates may not spawn.
#![allow(clippy::disallowed_methods)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use lookout_e2e::engines;
use serde_json::Value;

mod common;
use common::{On, Process, WAIT};

/// `lookout docker --json --label LABEL ARGS… --serve 127.0.0.1:0`, and the
/// address it serves on.
fn serve(label: &str, args: &[&str]) -> (Process, SocketAddr) {
    let mut all = vec!["docker", "--json", "--label", label];
    all.extend(args);
    all.extend(["--serve", "127.0.0.1:0"]);
    let mut lookout = Process::spawn(&all, &[]);
    let serving = lookout.stderr("serving", |v| v["status"] == "serving");
    let addr = serving["addr"]
        .as_str()
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("no address in {serving}"));
    (lookout, addr)
}

/// Both dockerds served as `one` and `two`, watching `label`; both connected.
fn serve_two(label: &str) -> (Process, SocketAddr) {
    let one = format!("one={}", engines::docker_host());
    let two = format!("two={}", engines::docker2_host());
    let (mut lookout, addr) = serve(label, &["--host", &one, "--host", &two]);
    lookout.connected();
    lookout.connected();
    (lookout, addr)
}

/// A whole `GET path` (the body de-chunked): status and body.
fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(WAIT)).expect("timeout");
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .expect("request");
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).expect("response");
    let raw = String::from_utf8(raw).expect("UTF-8");
    let (head, body) = raw.split_once("\r\n\r\n").expect("a head");
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status: {head}"));
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(body)
    } else {
        body.to_owned()
    };
    (status, body)
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).expect("a chunk size");
        if n == 0 {
            break;
        }
        out.push_str(&rest[..n]);
        body = &rest[n + 2..];
    }
    out
}

fn get_json(addr: SocketAddr, path: &str) -> (u16, Value) {
    let (status, body) = get(addr, path);
    let v = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{path}: {e}: {body}"));
    (status, v)
}

/// An open `GET /events…`: its body's lines (chunk sizes left out), read
/// on a thread.
struct Stream {
    lines: mpsc::Receiver<String>,
    _socket: TcpStream,
}

impl Stream {
    fn open(addr: SocketAddr, path: &str, headers: &str) -> Self {
        let mut s = TcpStream::connect(addr).expect("connect");
        write!(s, "GET {path} HTTP/1.1\r\nHost: {addr}\r\n{headers}\r\n").expect("request");
        let reader = BufReader::new(s.try_clone().expect("clone"));
        let (tx, lines) = mpsc::channel();
        thread::spawn(move || {
            let mut in_body = false;
            for line in reader.lines() {
                let Ok(line) = line else { return };
                if !in_body {
                    in_body = line.is_empty();
                    continue;
                }
                // A chunk's size line: hex digits alone.
                if !line.is_empty() && line.bytes().all(|b| b.is_ascii_hexdigit()) {
                    continue;
                }
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        Self { lines, _socket: s }
    }

    /// The next non-empty line, bounded.
    fn line(&self) -> String {
        loop {
            let line = self
                .lines
                .recv_timeout(WAIT)
                .unwrap_or_else(|_| panic!("no line within {WAIT:?}"));
            if !line.is_empty() {
                return line;
            }
        }
    }

    /// NDJSON: the next event.
    fn event(&self) -> Value {
        let line = self.line();
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
    }

    /// SSE: the next frame's `(event, id, data)`, keep-alives skipped.
    fn frame(&self) -> (String, Option<String>, Value) {
        let (mut event, mut id) = (String::new(), None);
        loop {
            let line = self.line();
            if let Some(e) = line.strip_prefix("event: ") {
                e.clone_into(&mut event);
            } else if let Some(i) = line.strip_prefix("id: ") {
                id = Some(i.to_owned());
            } else if let Some(d) = line.strip_prefix("data: ") {
                let data = serde_json::from_str(d).unwrap_or_else(|e| panic!("{e}: {d}"));
                return (event, id, data);
            }
        }
    }
}

/// Items of `next` until `done` holds of what was seen, bounded.
fn until(next: impl Fn() -> Value, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let deadline = Instant::now() + WAIT;
    let mut seen = Vec::new();
    while !done(&seen) {
        assert!(Instant::now() < deadline, "not within {WAIT:?}: {seen:?}");
        seen.push(next());
    }
    seen
}

/// `/healthz` once it is 200 (polled every 50 ms, bounded).
fn healthy(addr: SocketAddr) -> Value {
    let deadline = Instant::now() + WAIT;
    loop {
        let (status, health) = get_json(addr, "/healthz");
        if status == 200 {
            return health;
        }
        assert!(Instant::now() < deadline, "/healthz: {status} {health}");
        thread::sleep(Duration::from_millis(50));
    }
}

fn kinds_of<'a>(seen: &'a [Value], host: &str) -> Vec<&'a str> {
    seen.iter()
        .filter(|e| e["host"] == host)
        .map(|e| e["kind"].as_str().unwrap_or("?"))
        .collect()
}

#[test]
fn two_engines_served_each_answer_says_its_host() {
    let Some(_locks) = common::require_two_dockerds() else {
        return;
    };
    let name = common::unique("serve-several", "web");
    let label = format!("lookout.serve-several={name}");
    let (mut lookout, addr) = serve_two(&label);
    // Both synced: /healthz says each.
    let health = healthy(addr);
    assert_eq!(health["status"], "connected", "{health}");
    assert_eq!(health["unavailable"], serde_json::json!([]), "{health}");
    let hosts: Vec<&Value> = health["sources"]
        .as_array()
        .expect("sources")
        .iter()
        .map(|s| &s["host"])
        .collect();
    assert_eq!(hosts, ["one", "two"], "{health}");

    let ndjson = Stream::open(addr, "/events", "");
    let sse_two = Stream::open(addr, "/events?host=two", "Accept: text/event-stream\r\n");
    // The SSE client is told each picked engine's status on joining: two's only.
    let (event, id, status) = sse_two.frame();
    assert_eq!(
        (event.as_str(), status["host"].as_str()),
        ("status", Some("two")),
        "{status}"
    );
    assert_eq!(id, None, "a status told on joining has no id");

    let on_one = On::create(engines::docker, &name, &label);
    let on_two = On::create(engines::docker2, &name, &label);
    on_one.run(&["start"]);
    on_two.run(&["start"]);
    let seen = until(
        || ndjson.event(),
        |seen| kinds_of(seen, "one").len() >= 2 && kinds_of(seen, "two").len() >= 2,
    );
    assert_eq!(kinds_of(&seen, "one"), ["created", "started"], "{seen:?}");
    assert_eq!(kinds_of(&seen, "two"), ["created", "started"], "{seen:?}");
    for e in &seen {
        assert_eq!(e["instance"], name.as_str(), "{e}");
        assert!(e.get("id").is_none(), "no positional id of several: {e}");
    }
    let frames: Vec<(String, Option<String>, Value)> = (0..2).map(|_| sse_two.frame()).collect();
    let mut epoch = None;
    for (event, id, e) in &frames {
        assert_eq!(event, "instance", "{e}");
        assert_eq!(e["host"], "two", "only two's: {e}");
        let id = id.as_deref().unwrap_or_else(|| panic!("an id: {e}"));
        assert!(
            id.len() == 16 && id.bytes().all(|b| b.is_ascii_hexdigit()),
            "the epoch alone: {id}"
        );
        epoch = Some(id.to_owned());
    }
    assert_eq!(
        frames
            .iter()
            .map(|f| f.2["kind"].as_str().unwrap_or("?"))
            .collect::<Vec<_>>(),
        ["created", "started"]
    );

    instances_per_host(addr, &name, &on_one);

    // Metrics, per host.
    let (status, metrics) = get(addr, "/metrics");
    assert_eq!(status, 200);
    for host in ["one", "two"] {
        let connected = format!("lookout_connected{{host=\"{host}\"}} 1");
        assert!(
            metrics.contains(&connected),
            "no `{connected}` in {metrics}"
        );
    }

    resumed_gets_each_present(addr, &epoch.expect("an id"));

    lookout.signal("TERM");
    assert_eq!(lookout.exit_within(Duration::from_secs(5)).code(), Some(0));
}

/// `/instances` and `/instances/{name}` of `name`, created and started on
/// both engines: each with its host, `?host=` picks, one name is ambiguous,
/// a wait watches the engine picked (`on_one` is stopped meanwhile).
fn instances_per_host(addr: SocketAddr, name: &str, on_one: &On) {
    // /instances: both, each with its host; `?host=` picks.
    let (status, all) = get_json(addr, "/instances");
    assert_eq!(status, 200, "{all}");
    let hosts: Vec<&Value> = all
        .as_array()
        .expect("a list")
        .iter()
        .map(|i| &i["host"])
        .collect();
    assert_eq!(hosts, ["one", "two"], "{all}");
    let (status, picked) = get_json(addr, "/instances?host=two");
    assert_eq!(status, 200);
    assert_eq!(picked.as_array().map(Vec::len), Some(1), "{picked}");
    assert_eq!(picked[0]["host"], "two");
    let (status, unknown) = get_json(addr, "/instances?host=three");
    assert_eq!(status, 400, "{unknown}");
    assert!(
        unknown["error"]
            .as_str()
            .is_some_and(|e| e.contains("one, two")),
        "{unknown}"
    );

    // One name on both engines: ambiguous until a host is picked.
    let path = format!("/instances/{name}");
    let (status, both) = get_json(addr, &path);
    assert_eq!(status, 404, "{both}");
    assert_eq!(both["hosts"], serde_json::json!(["one", "two"]), "{both}");
    let (status, it) = get_json(addr, &format!("{path}?host=one"));
    assert_eq!(
        (status, &it["host"], &it["state"]),
        (200, &"one".into(), &"running".into())
    );
    let (status, wait) = get_json(addr, &format!("{path}?wait=stopped&timeout=1s"));
    assert_eq!(status, 404, "a wait on several needs one holder: {wait}");
    assert_eq!(wait["hosts"], serde_json::json!(["one", "two"]), "{wait}");

    // A wait on one engine sees only its stop.
    let waiter = {
        let path = format!("{path}?host=one&wait=stopped&timeout=30s");
        thread::spawn(move || get_json(addr, &path))
    };
    on_one.run(&["stop", "-t", "0"]);
    let (status, stopped) = waiter.join().expect("the wait");
    assert_eq!(status, 200, "{stopped}");
    assert_eq!(
        (&stopped["host"], &stopped["state"]),
        (&"one".into(), &"stopped".into())
    );
    let (_, still) = get_json(addr, &format!("{path}?host=two"));
    assert_eq!(still["state"], "running", "{still}");
}

/// An SSE client resuming with the id it was given (`epoch`): each
/// engine's present, as a resync, after its `lagged`.
fn resumed_gets_each_present(addr: SocketAddr, epoch: &str) {
    // A resuming SSE client: each engine's present, as a resync.
    let resumed = Stream::open(
        addr,
        "/events",
        &format!("Accept: text/event-stream\r\nLast-Event-ID: {epoch}\r\n"),
    );
    let told = until(
        || {
            let (event, _, data) = resumed.frame();
            serde_json::json!({"event": event, "data": data})
        },
        |seen| {
            let count = |event: &str, key: &str, value: &str| {
                seen.iter()
                    .filter(|f| f["event"] == event && f["data"][key] == value)
                    .count()
            };
            count("instance", "origin", "resync") >= 3 && count("status", "status", "lagged") >= 2
        },
    );
    let resync: Vec<(&str, &str)> = told
        .iter()
        .filter(|f| f["event"] == "instance")
        .map(|f| {
            (
                f["data"]["host"].as_str().unwrap_or("?"),
                f["data"]["kind"].as_str().unwrap_or("?"),
            )
        })
        .collect();
    let mut sorted = resync.clone();
    sorted.sort_unstable();
    // one: stopped (created); two: running (created, started).
    assert_eq!(
        sorted,
        [("one", "created"), ("two", "created"), ("two", "started")],
        "{told:?}"
    );
    let lagged = told
        .iter()
        .filter(|f| f["event"] == "status" && f["data"]["status"] == "lagged")
        .count();
    assert_eq!(lagged, 2, "each engine lags the resumed client: {told:?}");
}

#[test]
fn one_engine_refuses_host_and_says_none() {
    let Some(_lock) = common::require_docker(false) else {
        return;
    };
    let name = common::unique("serve-several", "one");
    let label = format!("lookout.serve-several={name}");
    let one = format!("one={}", engines::docker_host());
    let (mut lookout, addr) = serve(&label, &["--host", &one]);
    lookout.connected();
    for path in [
        "/instances?host=one",
        "/events?host=one",
        "/instances/x?host=one",
    ] {
        let (status, body) = get_json(addr, path);
        assert_eq!(status, 400, "{path}: {body}");
        assert!(
            body["error"]
                .as_str()
                .is_some_and(|e| e.contains("serves one")),
            "{path}: {body}"
        );
    }
    let health = healthy(addr);
    assert_eq!(
        health,
        serde_json::json!({"status": "connected", "instances": 0})
    );
    let (_, metrics) = get(addr, "/metrics");
    assert!(metrics.contains("lookout_connected 1"), "{metrics}");
    assert!(!metrics.contains("host="), "{metrics}");
    lookout.signal("TERM");
    assert_eq!(lookout.exit_within(Duration::from_secs(5)).code(), Some(0));
}

/// `kill -9` of the second dockerd while served: `/healthz` is 503 naming
/// it (the first's status still `connected`), the first's events go on
/// meanwhile, and once it is back `/healthz` is 200 again.
#[test]
fn a_killed_engine_is_named_by_healthz_until_it_is_back() {
    let Some(_one) = common::require_docker(false) else {
        return;
    };
    let Some(_two) = common::require_docker2(true) else {
        return;
    };
    let name = common::unique("serve-several", "kill");
    let label = format!("lookout.serve-several={name}");
    let (_lookout, addr) = serve_two(&label);
    healthy(addr);
    let events = Stream::open(addr, "/events", "");
    engines::docker2_kill9().unwrap_or_else(|e| panic!("{e}"));
    let deadline = Instant::now() + WAIT;
    let health = loop {
        let (status, health) = get_json(addr, "/healthz");
        if status == 503 {
            break health;
        }
        assert!(
            Instant::now() < deadline,
            "/healthz after the kill: {status} {health}"
        );
        thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(health["status"], "unavailable", "{health}");
    assert_eq!(
        health["unavailable"],
        serde_json::json!(["two"]),
        "{health}"
    );
    assert_eq!(health["sources"][0]["status"], "connected", "{health}");
    assert_eq!(health["sources"][1]["host"], "two", "{health}");
    // One goes on while two is down.
    let on_one = On::create(engines::docker, &name, &label);
    let created = events.event();
    assert_eq!(
        (&created["host"], &created["kind"]),
        (&"one".into(), &"created".into())
    );
    drop(on_one);
    engines::docker2_start().unwrap_or_else(|e| panic!("docker2 back: {e}"));
    let health = healthy(addr);
    assert_eq!(health["status"], "connected", "{health}");
}

/// The state column of the page's row `key`, or `null` (no such row).
fn row_state(key: &str) -> String {
    format!(
        "(() => {{ const r = document.querySelector('#instances tbody tr[data-instance=\"{key}\"]'); \
         return r ? r.cells[2].textContent : null; }})()"
    )
}

/// The page at `/` in headless Chromium, serving two engines: one name on
/// both is two rows, `one/NAME` and `two/NAME`, each following its own
/// engine.
#[test]
fn page_in_chromium_shows_each_engines_instances_apart() {
    use lookout_e2e::browser::Browser;
    let Some(_locks) = common::require_two_dockerds() else {
        return;
    };
    let name = common::unique("serve-several", "page");
    let label = format!("lookout.serve-several={name}");
    let (mut lookout, addr) = serve_two(&label);
    let browser = Browser::start().unwrap_or_else(|e| panic!("{e}"));
    let mut page = browser.page().unwrap_or_else(|e| panic!("{e}"));
    page.navigate(&format!("http://{addr}/"))
        .unwrap_or_else(|e| panic!("{e}"));
    let is = |want: &'static str| move |v: &Value| v == want;
    page.wait_for(
        "document.getElementById('status')?.dataset.state ?? null",
        WAIT,
        is("connected"),
    )
    .unwrap_or_else(|e| panic!("connected: {e}"));
    let on_one = On::create(engines::docker, &name, &label);
    let _on_two = On::create(engines::docker2, &name, &label);
    let (row_one, row_two) = (format!("one/{name}"), format!("two/{name}"));
    for row in [&row_one, &row_two] {
        page.wait_for(&row_state(row), WAIT, is("stopped"))
            .unwrap_or_else(|e| panic!("{row} created: {e}"));
    }
    on_one.run(&["start"]);
    page.wait_for(&row_state(&row_one), WAIT, is("running"))
        .unwrap_or_else(|e| panic!("{row_one} started: {e}"));
    let other = page
        .eval(&row_state(&row_two))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(other, "stopped", "two's instance is its own");
    let rows = page
        .eval("document.querySelectorAll('#instances tbody tr').length")
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(rows, 2, "one row per engine");
    lookout.signal("TERM");
    assert_eq!(lookout.exit_within(Duration::from_secs(5)).code(), Some(0));
    drop(browser);
}
