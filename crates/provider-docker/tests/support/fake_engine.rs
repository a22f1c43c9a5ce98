//! A loopback fake Docker engine on a unix socket in a temp dir: enough of the
//! API for `lookout_docker::watch` and the `docker` CLI (`/_ping`, `/version`,
//! `/containers/json`, `/events` as a chunked body of the chunks it is given).
//! Shared by the decoder fuzz test and the firehose bench (`#[path]`-included).
#![allow(dead_code)]
// A test server, not library code: it spawns its accept loop and connections.
#![allow(clippy::disallowed_methods)]

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{UnixListener, UnixStream};

/// What `/events` serves.
#[derive(Debug, Clone)]
pub struct Script {
    /// Written in order, each as one HTTP chunk.
    pub chunks: Arc<Vec<Vec<u8>>>,
    /// After the last chunk: end the body (`true`) or hold the connection open.
    pub close: bool,
}

#[derive(Debug)]
pub struct FakeEngine {
    /// `unix:///…/docker.sock`
    pub host: String,
    pub socket: PathBuf,
    dir: PathBuf,
    /// How many `/events` requests were served.
    pub events_requests: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeEngine {
    fn drop(&mut self) {
        self.task.abort();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

static SEQ: AtomicUsize = AtomicUsize::new(0);

/// Start serving on the current tokio runtime.
pub fn start(script: Script) -> FakeEngine {
    let dir = std::env::temp_dir().join(format!(
        "lookout-fake-engine-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    let socket = dir.join("docker.sock");
    let listener = UnixListener::bind(&socket).expect("bind the fake engine's socket");
    let events_requests = Arc::new(AtomicUsize::new(0));
    let counter = events_requests.clone();
    let task = tokio::spawn(async move {
        loop {
            let Ok((conn, _)) = listener.accept().await else {
                return;
            };
            let script = script.clone();
            let counter = counter.clone();
            tokio::spawn(async move {
                let _ = serve(conn, &script, &counter).await;
            });
        }
    });
    FakeEngine {
        host: format!("unix://{}", socket.display()),
        socket,
        dir,
        events_requests,
        task,
    }
}

async fn serve(
    mut conn: UnixStream,
    script: &Script,
    counter: &AtomicUsize,
) -> std::io::Result<()> {
    loop {
        // The request head (no request here has a body).
        let mut head = Vec::new();
        let mut byte = [0u8; 1024];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = conn.read(&mut byte).await?;
            if n == 0 {
                return Ok(());
            }
            head.extend_from_slice(&byte[..n]);
        }
        let line = String::from_utf8_lossy(&head);
        let head_only = line.starts_with("HEAD ");
        let target = line.split_whitespace().nth(1).unwrap_or("/").to_owned();
        // `/v1.47/events?…` → `/events`
        let path = target.split('?').next().unwrap_or("");
        let path = match path.strip_prefix("/v1.") {
            Some(rest) => rest.find('/').map_or(path, |i| &rest[i..]),
            None => path,
        };
        match path {
            "/_ping" => fixed(&mut conn, "text/plain", if head_only { b"" } else { b"OK" }).await?,
            "/version" => {
                fixed(
                    &mut conn,
                    "application/json",
                    br#"{"Version":"27.0.0","ApiVersion":"1.47","MinAPIVersion":"1.24","Os":"linux","Arch":"amd64"}"#,
                )
                .await?;
            }
            "/containers/json" => fixed(&mut conn, "application/json", b"[]").await?,
            "/events" => {
                counter.fetch_add(1, Ordering::SeqCst);
                conn.write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\
                      Api-Version: 1.47\r\nTransfer-Encoding: chunked\r\n\r\n",
                )
                .await?;
                conn.flush().await?;
                let mut out = Vec::with_capacity(64 * 1024);
                for chunk in script.chunks.iter() {
                    if chunk.is_empty() {
                        continue;
                    }
                    out.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
                    out.extend_from_slice(chunk);
                    out.extend_from_slice(b"\r\n");
                    if out.len() >= 64 * 1024 {
                        conn.write_all(&out).await?;
                        out.clear();
                    }
                }
                conn.write_all(&out).await?;
                conn.flush().await?;
                if script.close {
                    conn.write_all(b"0\r\n\r\n").await?;
                    conn.flush().await?;
                    let _ = conn.shutdown().await;
                    return Ok(());
                }
                // Hold the stream open until the client goes.
                let mut sink = [0u8; 256];
                while conn.read(&mut sink).await? > 0 {}
                return Ok(());
            }
            _ => {
                conn.write_all(
                    b"HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\n\
                      Content-Length: 24\r\n\r\n{\"message\":\"not found\"}\n",
                )
                .await?;
            }
        }
    }
}

async fn fixed(conn: &mut UnixStream, content_type: &str, body: &[u8]) -> std::io::Result<()> {
    conn.write_all(
        format!(
            "HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nApi-Version: 1.47\r\n\
             Content-Length: {}\r\n\r\n",
            body.len()
        )
        .as_bytes(),
    )
    .await?;
    conn.write_all(body).await?;
    conn.flush().await
}

/// One real-format container event line (as dockerd 27 writes it), `\n`-terminated.
pub fn event_line(action: &str, id: &str, name: &str, nanos: i64) -> String {
    format!(
        concat!(
            r#"{{"status":"{a}","id":"{id}","from":"nginx:1.27","Type":"container","Action":"{a}","#,
            r#""Actor":{{"ID":"{id}","Attributes":{{"com.docker.compose.project":"bench","#,
            r#""com.docker.compose.service":"web","image":"nginx:1.27","maintainer":"NGINX Docker Maintainers","#,
            r#""name":"{name}","tier":"frontend"}}}},"scope":"local","time":{s},"timeNano":{n}}}"#,
            "\n"
        ),
        a = action,
        id = id,
        name = name,
        s = nanos / 1_000_000_000,
        n = nanos
    )
}
