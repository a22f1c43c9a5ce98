//! The soak's fake engine in a process of its own, so that the soak's memory
//! figures are lookout's (and its consumers'), not the engine's: the fake
//! engine's containers, history, subscriber queues and request log live in
//! the child.
//!
//! The bench runs itself again with `--engine-child SEED` ([`child_main`]): a
//! [`Live`] engine served on a unix socket by a runtime on a thread of its
//! own, its address the first line on stdout, then one command a line on
//! stdin and one answer a line on stdout:
//!
//! | command | what the engine does | answer |
//! |---|---|---|
//! | `mutate N` | [`Live::mutate`] | `ok` |
//! | `cut R N` | [`Live::cut`] (`R`: 1 as a restarting daemon) | `ok` |
//! | `snapshot` | [`Live::snapshot`] | `name=1 name=0 …` (1: running) |
//! | `counts` | – | subscribers, open connections, `/events` requests, events published, deliveries dropped, containers |
//!
//! It ends when its stdin closes (the soak is done, or gone); [`Engine`]
//! closes it on drop and kills the child if it outlives a bounded wait.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use lookout_testkit::fake_engine::{self, Live, SlowReader};

/// The argument that makes the bench the engine.
pub const CHILD_FLAG: &str = "--engine-child";

/// How many container names the engine uses.
const NAMES: usize = 48;

/// The engine process: serves until stdin closes. `seed` seeds its changes.
pub fn child_main(seed: u64) -> ! {
    let state = Live::new("soak", NAMES, SlowReader::Drop, Live::DOCKERD_QUEUE, seed);
    let (tx, rx) = std::sync::mpsc::channel();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = state.clone();
    let thread = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("the engine's runtime");
        rt.block_on(async move {
            let engine = fake_engine::start_live(serving);
            let shared = (
                engine.host.clone(),
                engine.open_connections.clone(),
                engine.events_requests.clone(),
            );
            tx.send(shared).expect("send the engine's address");
            let _ = stopped.await;
            drop(engine);
        });
    });
    let (host, open, events_requests) = rx.recv().expect("the engine started");
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{host}").and_then(|()| out.flush());
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        let words: Vec<&str> = line.split_whitespace().collect();
        let answer = match words.as_slice() {
            ["mutate", n] => {
                state.mutate(n.parse().unwrap_or(0));
                "ok".to_owned()
            }
            ["cut", restart, n] => {
                state.cut(*restart == "1", n.parse().unwrap_or(0));
                "ok".to_owned()
            }
            ["snapshot"] => state
                .snapshot()
                .iter()
                .map(|(name, running)| format!("{name}={}", u8::from(*running)))
                .collect::<Vec<_>>()
                .join(" "),
            ["counts"] => format!(
                "{} {} {} {} {} {}",
                state.subscribers(),
                open.load(Ordering::SeqCst),
                events_requests.load(Ordering::SeqCst),
                state.published.load(Ordering::Relaxed),
                state.dropped.load(Ordering::Relaxed),
                state.len()
            ),
            _ => format!("error: unknown command {line:?}"),
        };
        if writeln!(out, "{answer}")
            .and_then(|()| out.flush())
            .is_err()
        {
            break;
        }
    }
    let _ = stop.send(());
    let _ = thread.join();
    std::process::exit(0)
}

/// The engine's counters, as `counts` answers them.
#[derive(Debug, Clone, Copy, Default)]
pub struct Counts {
    /// `/events` subscribers connected.
    pub subscribers: usize,
    /// Client connections open (engine side).
    pub open: usize,
    /// `/events` requests served in all.
    pub events_requests: u64,
    /// Events published (each to every subscriber).
    pub published: u64,
    /// Deliveries dropped for a subscriber whose queue was full.
    pub dropped: u64,
    /// Containers that exist.
    pub containers: usize,
}

/// The engine process, seen from the soak. Its methods take `&self`: the
/// soak's phases share it as they shared the engine's state before.
#[derive(Debug)]
pub struct Engine {
    /// `unix:///…/docker.sock`
    pub host: String,
    child: Child,
    io: RefCell<Io>,
}

#[derive(Debug)]
struct Io {
    input: Option<ChildStdin>,
    output: BufReader<ChildStdout>,
}

impl Io {
    fn read_line(&mut self) -> Result<String, String> {
        let mut line = String::new();
        match self.output.read_line(&mut line) {
            Ok(0) => Err("the engine process ended".to_owned()),
            Ok(_) => Ok(line.trim_end().to_owned()),
            Err(e) => Err(format!("reading the engine process: {e}")),
        }
    }
}

impl Engine {
    /// Runs this executable again as the engine; waits for its address.
    pub fn start(seed: u64) -> Result<Self, String> {
        let exe = std::env::current_exe().map_err(|e| format!("the bench's own path: {e}"))?;
        let mut child = Command::new(exe)
            .args([CHILD_FLAG, &seed.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("cannot start the engine process: {e}"))?;
        let input = child.stdin.take().ok_or("the engine's stdin")?;
        let output = BufReader::new(child.stdout.take().ok_or("the engine's stdout")?);
        let mut io = Io {
            input: Some(input),
            output,
        };
        let host = io.read_line()?;
        Ok(Self {
            host,
            child,
            io: RefCell::new(io),
        })
    }

    /// The engine process's id (its memory is not the soak's).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// One command, one answer. The soak cannot go on without its engine:
    /// one that died panics, which fails the bench.
    fn ask(&self, command: &str) -> String {
        let mut io = self.io.borrow_mut();
        let input = io.input.as_mut().expect("the engine's stdin is open");
        writeln!(input, "{command}")
            .and_then(|()| input.flush())
            .expect("the engine process reads its commands");
        let answer = io.read_line().expect("the engine process answers");
        assert!(
            !answer.starts_with("error:"),
            "the engine process: {answer}"
        );
        answer
    }

    /// `n` random steps, each broadcast to the subscribers ([`Live::mutate`]).
    pub fn mutate(&self, n: usize) {
        self.ask(&format!("mutate {n}"));
    }

    /// Every `/events` connection cut, then `silent` steps ([`Live::cut`]).
    pub fn cut(&self, restart: bool, silent: usize) {
        self.ask(&format!("cut {} {silent}", u8::from(restart)));
    }

    /// The true state: name → running.
    pub fn snapshot(&self) -> BTreeMap<String, bool> {
        self.ask("snapshot")
            .split_whitespace()
            .filter_map(|pair| {
                let (name, running) = pair.split_once('=')?;
                Some((name.to_owned(), running == "1"))
            })
            .collect()
    }

    /// The engine's counters.
    pub fn counts(&self) -> Counts {
        let answer = self.ask("counts");
        let n: Vec<u64> = answer
            .split_whitespace()
            .filter_map(|w| w.parse().ok())
            .collect();
        let at = |i: usize| n.get(i).copied().unwrap_or(0);
        let size = |i: usize| usize::try_from(at(i)).unwrap_or(usize::MAX);
        Counts {
            subscribers: size(0),
            open: size(1),
            events_requests: at(2),
            published: at(3),
            dropped: at(4),
            containers: size(5),
        }
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        // Its stdin closed, the engine stops serving and exits.
        drop(self.io.get_mut().input.take());
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_)) | Err(_)) {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
