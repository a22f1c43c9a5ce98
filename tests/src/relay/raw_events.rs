//! An engine's own `/events` stream, read raw beside a watch: what the engine
//! sent, line by line, without lookout's decoder in the way.

use std::io::{BufRead as _, BufReader, Write as _};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// `GET /events` of the containers labelled `label` (`KEY=VALUE`), over
/// HTTP/1.0, so that the body is the event lines as they come (no chunks).
pub fn events_request(label: &str) -> String {
    let filters = format!(r#"{{"label":["{label}"],"type":["container"]}}"#);
    let filters: String = filters
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.".contains(&b) {
                char::from(b).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect();
    format!("GET /events?filters={filters} HTTP/1.0\r\nHost: engine\r\n\r\n")
}

/// The lines of one `/events` stream, read by a thread until [`stop`](Self::stop)
/// (or drop), at most `bound` after it started, or until the engine ends it.
#[derive(Debug)]
pub struct RawEvents {
    lines: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Result<(), String>>>,
}

impl RawEvents {
    /// Subscribes at the engine's unix `socket` to the events of the
    /// containers labelled `label`; returns once the engine answered.
    pub fn start(socket: &str, label: &str, bound: Duration) -> Result<Self, String> {
        let mut stream =
            UnixStream::connect(socket).map_err(|e| format!("connect {socket}: {e}"))?;
        stream
            .set_read_timeout(Some(Duration::from_millis(100)))
            .map_err(|e| e.to_string())?;
        stream
            .write_all(events_request(label).as_bytes())
            .map_err(|e| format!("the events request: {e}"))?;
        let mut reader = BufReader::new(stream);
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut line = String::new();
        // The head, to its blank line.
        loop {
            line.clear();
            match reader.read_line(&mut line) {
                Ok(0) => return Err("the engine closed the event stream".to_owned()),
                Ok(_) if line == "\r\n" => break,
                Ok(_) => {}
                Err(e) if is_timeout(&e) && Instant::now() < deadline => {}
                Err(e) => return Err(format!("the events answer's head: {e}")),
            }
        }
        let lines = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (lines, stop) = (Arc::clone(&lines), Arc::clone(&stop));
            let deadline = Instant::now() + bound;
            std::thread::spawn(move || {
                let mut line = String::new();
                while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
                    match reader.read_line(&mut line) {
                        // The engine ended the stream: what it sent is all.
                        Ok(0) => return Ok(()),
                        Ok(_) => {
                            let done = std::mem::take(&mut line);
                            let done = done.trim();
                            if !done.is_empty() {
                                lines
                                    .lock()
                                    .unwrap_or_else(PoisonError::into_inner)
                                    .push(done.to_owned());
                            }
                        }
                        // A partial line stays in `line`; the next read goes on.
                        Err(e) if is_timeout(&e) => {}
                        Err(e) => return Err(format!("reading the event stream: {e}")),
                    }
                }
                Ok(())
            })
        };
        Ok(Self {
            lines,
            stop,
            thread: Some(thread),
        })
    }

    /// Stops reading; the lines read, or why the stream ended early.
    pub fn stop(mut self) -> Result<Vec<String>, String> {
        self.stop.store(true, Ordering::Relaxed);
        let ended = self.thread.take().map_or(Ok(()), |t| {
            t.join()
                .unwrap_or_else(|_| Err("the reader panicked".to_owned()))
        });
        let lines = std::mem::take(&mut *self.lines.lock().unwrap_or_else(PoisonError::into_inner));
        ended.map(|()| lines)
    }
}

impl Drop for RawEvents {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn is_timeout(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
    )
}
