//! A real headless Chromium driven through the `DevTools` protocol: one
//! browser process per [`Browser`] (killed on drop, its profile removed), a
//! page reached over the protocol's websocket (on loopback), JavaScript
//! evaluated in it, screenshots.
//!
//! `cargo xtask engines up chromium` installs it (Debian's `chromium`).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{Value, json};
use tungstenite::WebSocket;

use crate::engines;

/// How long the browser gets to start and a protocol call to answer.
const CALL: Duration = Duration::from_secs(30);

/// A headless Chromium, killed on drop.
#[derive(Debug)]
pub struct Browser {
    child: Child,
    profile: PathBuf,
    port: u16,
}

impl Browser {
    /// Starts Chromium on `about:blank` with the `DevTools` protocol on a
    /// loopback port of its choosing.
    pub fn start() -> Result<Self, String> {
        Self::start_with(&[])
    }

    /// As [`Browser::start`], with Chromium's command-line switches `extra`
    /// (e.g. `--ignore-certificate-errors-spki-list=…`, to trust one test
    /// certificate's key).
    pub fn start_with(extra: &[&str]) -> Result<Self, String> {
        static STARTED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = STARTED.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let profile =
            std::env::temp_dir().join(format!("lookout-chromium-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&profile);
        let mut cmd = engines::chromium_command(&profile)?;
        cmd.args(extra)
            .args(["--remote-debugging-port=0", "about:blank"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let child = cmd
            .spawn()
            .map_err(|e| format!("cannot start chromium: {e}"))?;
        let mut me = Self {
            child,
            profile,
            port: 0,
        };
        let file = me.profile.join("DevToolsActivePort");
        let deadline = Instant::now() + CALL;
        while me.port == 0 {
            if let Ok(text) = std::fs::read_to_string(&file)
                && let Some(port) = text.lines().next().and_then(|l| l.trim().parse().ok())
            {
                me.port = port;
                break;
            }
            if let Ok(Some(status)) = me.child.try_wait() {
                return Err(format!("chromium exited at start: {status}"));
            }
            if Instant::now() > deadline {
                return Err(format!("chromium: no {} within {CALL:?}", file.display()));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(me)
    }

    /// The first page target, over its websocket.
    pub fn page(&self) -> Result<Page, String> {
        let deadline = Instant::now() + CALL;
        loop {
            let list = http_get(self.port, "/json/list")?;
            let targets: Value =
                serde_json::from_str(&list).map_err(|e| format!("/json/list: {e}: {list}"))?;
            let url = targets.as_array().and_then(|ts| {
                ts.iter()
                    .find(|t| t["type"] == "page")
                    .and_then(|t| t["webSocketDebuggerUrl"].as_str())
            });
            if let Some(url) = url {
                let stream = TcpStream::connect(("127.0.0.1", self.port))
                    .map_err(|e| format!("devtools: {e}"))?;
                stream
                    .set_read_timeout(Some(CALL))
                    .map_err(|e| format!("devtools: {e}"))?;
                let (ws, _) = tungstenite::client(url, stream)
                    .map_err(|e| format!("devtools websocket {url}: {e}"))?;
                return Ok(Page { ws, next: 0 });
            }
            if Instant::now() > deadline {
                return Err(format!("no page target: {list}"));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.profile);
    }
}

/// A GET on the `DevTools` HTTP endpoint.
fn http_get(port: u16, path: &str) -> Result<String, String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).map_err(|e| format!("devtools: {e}"))?;
    s.set_read_timeout(Some(CALL))
        .map_err(|e| format!("devtools: {e}"))?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    )
    .map_err(|e| format!("devtools: {e}"))?;
    let mut r = BufReader::new(s);
    let mut line = String::new();
    let mut length = None;
    loop {
        line.clear();
        r.read_line(&mut line)
            .map_err(|e| format!("devtools: {e}"))?;
        if line == "\r\n" || line.is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':')
            && k.eq_ignore_ascii_case("content-length")
        {
            length = v.trim().parse::<usize>().ok();
        }
    }
    let mut body = Vec::new();
    match length {
        Some(n) => {
            body.resize(n, 0);
            r.read_exact(&mut body)
        }
        None => r.read_to_end(&mut body).map(drop),
    }
    .map_err(|e| format!("devtools: {e}"))?;
    String::from_utf8(body).map_err(|e| format!("devtools: {e}"))
}

/// One page of the browser, over the `DevTools` protocol.
#[derive(Debug)]
pub struct Page {
    ws: WebSocket<TcpStream>,
    next: u64,
}

impl Page {
    /// One protocol call: its `result` (events in between are skipped).
    pub fn call(&mut self, method: &str, params: &Value) -> Result<Value, String> {
        self.next += 1;
        let id = self.next;
        let msg = json!({ "id": id, "method": method, "params": params });
        self.ws
            .send(tungstenite::Message::text(msg.to_string()))
            .map_err(|e| format!("{method}: {e}"))?;
        let deadline = Instant::now() + CALL;
        loop {
            if Instant::now() > deadline {
                return Err(format!("{method}: no answer within {CALL:?}"));
            }
            let reply = self.ws.read().map_err(|e| format!("{method}: {e}"))?;
            let tungstenite::Message::Text(text) = reply else {
                continue;
            };
            let v: Value =
                serde_json::from_str(text.as_str()).map_err(|e| format!("{method}: {e}"))?;
            if v["id"] != id {
                continue;
            }
            if let Some(err) = v.get("error") {
                return Err(format!("{method}: {err}"));
            }
            return Ok(v["result"].clone());
        }
    }

    /// Opens `url` in this page.
    pub fn navigate(&mut self, url: &str) -> Result<(), String> {
        self.call("Page.navigate", &json!({ "url": url })).map(drop)
    }

    /// The value of a JavaScript expression in the page (promises awaited).
    pub fn eval(&mut self, expression: &str) -> Result<Value, String> {
        let r = self.call(
            "Runtime.evaluate",
            &json!({ "expression": expression, "returnByValue": true, "awaitPromise": true }),
        )?;
        if let Some(e) = r.get("exceptionDetails") {
            return Err(format!("{expression}: {e}"));
        }
        Ok(r["result"]["value"].clone())
    }

    /// Evaluates `expression` every 100 ms until `done` holds for its
    /// value, at most `within`; the last value either way.
    pub fn wait_for(
        &mut self,
        expression: &str,
        within: Duration,
        done: impl Fn(&Value) -> bool,
    ) -> Result<Value, String> {
        let deadline = Instant::now() + within;
        loop {
            let v = self.eval(expression)?;
            if done(&v) {
                return Ok(v);
            }
            if Instant::now() > deadline {
                return Err(format!("after {within:?}, {expression} is {v}"));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// A PNG of the page, written to `path`.
    pub fn screenshot(&mut self, path: &Path) -> Result<(), String> {
        let r = self.call("Page.captureScreenshot", &json!({ "format": "png" }))?;
        let png = base64::engine::general_purpose::STANDARD
            .decode(r["data"].as_str().unwrap_or_default())
            .map_err(|e| format!("screenshot: {e}"))?;
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        std::fs::write(path, png).map_err(|e| format!("{}: {e}", path.display()))
    }
}

/// A TCP relay on loopback between the browser and lookout that can cut
/// every connection open through it ([`TcpCut::cut`]) while lookout goes
/// on: what a flaky network does to an `EventSource`, which then reconnects
/// by itself with `Last-Event-ID`.
#[derive(Debug)]
pub struct TcpCut {
    addr: std::net::SocketAddr,
    open: std::sync::Arc<std::sync::Mutex<Vec<TcpStream>>>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl TcpCut {
    /// Listens on a loopback port; each connection is relayed to `upstream`.
    pub fn start(upstream: std::net::SocketAddr) -> Result<Self, String> {
        use std::sync::atomic::Ordering;
        let listener =
            std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| format!("relay: {e}"))?;
        let addr = listener.local_addr().map_err(|e| format!("relay: {e}"))?;
        listener
            .set_nonblocking(true)
            .map_err(|e| format!("relay: {e}"))?;
        let open = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (open2, stop2) = (open.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop2.load(Ordering::SeqCst) {
                let Ok((down, _)) = listener.accept() else {
                    std::thread::sleep(Duration::from_millis(10));
                    continue;
                };
                let _ = down.set_nonblocking(false);
                let Ok(up) = TcpStream::connect(upstream) else {
                    continue;
                };
                let pair = [
                    down.try_clone(),
                    up.try_clone(),
                    down.try_clone(),
                    up.try_clone(),
                ];
                let [Ok(d1), Ok(u1), Ok(d2), Ok(u2)] = pair else {
                    continue;
                };
                if let Ok(mut o) = open2.lock() {
                    o.push(down);
                    o.push(up);
                }
                for (mut from, mut to) in [(d1, u1), (u2, d2)] {
                    std::thread::spawn(move || {
                        let _ = std::io::copy(&mut from, &mut to);
                        let _ = to.shutdown(std::net::Shutdown::Both);
                    });
                }
            }
        });
        Ok(Self { addr, open, stop })
    }

    /// Where the browser connects.
    pub fn addr(&self) -> std::net::SocketAddr {
        self.addr
    }

    /// Closes every connection open through the relay now (new ones go
    /// through).
    pub fn cut(&self) {
        if let Ok(mut o) = self.open.lock() {
            for s in o.drain(..) {
                let _ = s.shutdown(std::net::Shutdown::Both);
            }
        }
    }
}

impl Drop for TcpCut {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        self.cut();
    }
}
