//! `--exec CMD`: CMD run for each event printed, one at a time and in
//! order, with the event's JSON line (as `--json` prints it) on its stdin,
//! on a task of its own fed through a [`Coalescing`] queue: a slow command
//! holds up neither the feed nor stdout. Beyond [`EXEC_QUEUE`] queued
//! events, each instance's latest event replaces its queued one, with one
//! warning.

use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::Notify;
use tokio::task::JoinHandle;

use crate::output::Warnings;
use crate::queue::{Coalescing, Keyed};
use crate::render::notify;

/// From this many queued events on, an instance's events are coalesced.
pub const EXEC_QUEUE: usize = 4096;

/// One event to run CMD for.
#[derive(Debug)]
struct Line {
    /// The instance (with its source), for coalescing.
    key: String,
    json: String,
}

impl Keyed for Line {
    fn key(&self) -> Option<&str> {
        Some(&self.key)
    }
}

#[derive(Debug)]
struct Shared {
    queue: Coalescing<Line>,
    warned: bool,
}

fn lock(s: &Mutex<Shared>) -> std::sync::MutexGuard<'_, Shared> {
    s.lock().unwrap_or_else(PoisonError::into_inner)
}

/// `--exec`, running.
#[derive(Debug)]
pub struct Exec {
    shared: Arc<Mutex<Shared>>,
    wake: Arc<Notify>,
    task: JoinHandle<()>,
    warnings: Warnings,
}

impl Drop for Exec {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Exec {
    /// `--exec`'s command, split into argv; exit 2 (by the caller) when it
    /// is none.
    pub fn parse(cmd: &str) -> Result<Vec<String>, String> {
        notify::parse_command(cmd).map_err(|e| format!("--exec: {e}"))
    }

    /// Starts the task running `argv` (the binary may spawn; the library
    /// crates never do).
    pub fn start(argv: Vec<String>, warnings: Warnings) -> Self {
        let shared = Arc::new(Mutex::new(Shared {
            queue: Coalescing::new(EXEC_QUEUE),
            warned: false,
        }));
        let wake = Arc::new(Notify::new());
        #[allow(clippy::disallowed_methods)]
        let task = tokio::spawn(run(argv, Arc::clone(&shared), Arc::clone(&wake), warnings));
        Self {
            shared,
            wake,
            task,
            warnings,
        }
    }

    /// Queues the event of `instance` (with its source, when several)
    /// whose JSON line is `json` (never waits for the command).
    pub fn event(&self, instance: String, json: String) {
        let mut s = lock(&self.shared);
        let replaced = s.queue.push(Line {
            key: instance,
            json,
        });
        if replaced && !s.warned {
            s.warned = true;
            drop(s);
            self.warnings.warn(&format!(
                "--exec is behind by {EXEC_QUEUE} events: each instance's latest event is \
                 run, not every transition on the way, until it catches up"
            ));
        } else {
            drop(s);
        }
        self.wake.notify_one();
    }
}

async fn run(argv: Vec<String>, shared: Arc<Mutex<Shared>>, wake: Arc<Notify>, warnings: Warnings) {
    let shown = shell_words::join(&argv);
    loop {
        let batch = {
            let mut s = lock(&shared);
            let batch = s.queue.take();
            if batch.is_empty() {
                // Caught up: the next time it falls behind is said again.
                s.warned = false;
            }
            batch
        };
        if batch.is_empty() {
            wake.notified().await;
            continue;
        }
        for line in batch {
            let mut input = line.json.into_bytes();
            input.push(b'\n');
            let ran = notify::run(&argv, Some(&input)).await;
            if !ran.succeeded() {
                warnings.warn(&format!("--exec `{shown}`: {}", ran.describe()));
            }
        }
    }
}
