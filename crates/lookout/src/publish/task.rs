//! The publisher on a task of its own, fed through a queue: the run's feed
//! is read and printed whatever etcd does (an engine that drops events for a
//! reader that falls behind — dockerd after 1 024 — never sees lookout
//! fall behind for etcd's sake).
//!
//! What is queued when the task comes to it is written together: up to
//! [`MAX_WRITES`] events a txn (`batch.rs`), so a cluster slower than the
//! feed is asked for fewer, larger txns rather than falling further behind;
//! an event that finds the queue empty is written alone, at once.
//!
//! The queue keeps what the run told in order. It holds every transition
//! while it is shorter than [`COALESCE_FROM`]; beyond that (etcd slow or
//! away for long) an instance's newer event replaces its queued one since
//! the last status, so its memory stays bounded by the instances, with a
//! warning: etcd then gets each instance's latest state, not every
//! transition on the way.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use lookout_core::{InstanceEvent, Status};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use super::batch::MAX_WRITES;
use super::{Publisher, TICK};
use crate::exit::Exit;
use crate::output::Warnings;
use crate::queue::{Coalescing, Keyed};

/// From this many queued items on, an instance's events are coalesced.
pub const COALESCE_FROM: usize = 65_536;

/// How long the publisher gets at exit to write what is queued and delete
/// its status key.
pub const STOP_GRACE: Duration = Duration::from_secs(5);

/// One thing the run told.
#[derive(Debug)]
enum Told {
    Event(InstanceEvent),
    Status(Status),
}

impl Keyed for Told {
    fn key(&self) -> Option<&str> {
        match self {
            Self::Event(e) => Some(e.id.as_str()),
            // A status is a barrier: nothing before it is replaced.
            Self::Status(_) => None,
        }
    }
}

/// What the run told and etcd has not taken yet (coalescing from
/// [`COALESCE_FROM`] items on: see [`Coalescing`]).
#[derive(Debug)]
struct Queue {
    items: Coalescing<Told>,
    warned: bool,
    closed: bool,
}

impl Default for Queue {
    fn default() -> Self {
        Self {
            items: Coalescing::new(COALESCE_FROM),
            warned: false,
            closed: false,
        }
    }
}

impl Queue {
    /// Queues `e`: `true` when the queue is past its bound, the first time
    /// (warn then).
    fn event(&mut self, e: &InstanceEvent) -> bool {
        let replaced = self.items.push(Told::Event(e.clone()));
        replaced && !std::mem::replace(&mut self.warned, true)
    }

    fn status(&mut self, s: &Status) {
        self.items.push(Told::Status(s.clone()));
    }

    fn take(&mut self) -> VecDeque<Told> {
        self.items.take()
    }
}

/// The publisher, running.
#[derive(Debug)]
pub struct Running {
    queue: Arc<Mutex<Queue>>,
    wake: Arc<Notify>,
    task: JoinHandle<()>,
    /// The publisher's.
    warnings: Warnings,
}

fn lock(q: &Mutex<Queue>) -> std::sync::MutexGuard<'_, Queue> {
    q.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Running {
    /// Starts `publisher` on a task of its own (the binary may spawn; the
    /// library crates never do).
    pub fn start(publisher: Publisher) -> Self {
        let queue = Arc::new(Mutex::new(Queue::default()));
        let wake = Arc::new(Notify::new());
        let warnings = publisher.warnings();
        #[allow(clippy::disallowed_methods)]
        let task = tokio::spawn(run(publisher, Arc::clone(&queue), Arc::clone(&wake)));
        Self {
            queue,
            wake,
            task,
            warnings,
        }
    }

    /// Queues an event (never waits for etcd).
    pub fn event(&self, e: &InstanceEvent) {
        let first_coalesced = lock(&self.queue).event(e);
        if first_coalesced {
            self.warnings.warn_publish(&format!(
                "etcd is behind by {COALESCE_FROM} items: each instance's latest state is \
                 published, not every transition on the way, until it catches up"
            ));
        }
        self.wake.notify_one();
    }

    /// Queues a status.
    pub fn status(&self, s: &Status) {
        lock(&self.queue).status(s);
        self.wake.notify_one();
    }

    /// Writes what is queued and deletes the status key, within
    /// [`STOP_GRACE`]; what is left then is said and dropped.
    pub async fn stop(self) -> Result<(), Exit> {
        lock(&self.queue).closed = true;
        self.wake.notify_one();
        let mut task = self.task;
        match tokio::time::timeout(STOP_GRACE, &mut task).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => {
                self.warnings
                    .warn_publish(&format!("the publisher's task failed: {e}"));
                Err(Exit::PublisherFailed)
            }
            Err(_) => {
                task.abort();
                let left = lock(&self.queue).items.len();
                self.warnings.warn_publish(&format!(
                    "etcd did not take what was queued within {STOP_GRACE:?}: {left} items \
                     not published (the status key expires with its lease)"
                ));
                Ok(())
            }
        }
    }
}

async fn run(mut publisher: Publisher, queue: Arc<Mutex<Queue>>, wake: Arc<Notify>) {
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut ticked = tokio::time::Instant::now();
    loop {
        let (batch, closed) = {
            let mut q = lock(&queue);
            (q.take(), q.closed)
        };
        let mut batch = batch.into_iter().peekable();
        while let Some(told) = batch.next() {
            // A long batch (a loaded cluster: seconds of queue) renews the
            // status lease on time too, or the key expires under a live
            // publisher and readers see its source flap.
            if ticked.elapsed() >= TICK {
                publisher.tick().await;
                tick.reset();
                ticked = tokio::time::Instant::now();
            }
            match told {
                Told::Event(e) => {
                    // The events queued behind it, up to a txn's worth:
                    // written together (what is queued, never waited for).
                    let mut run = vec![e];
                    while run.len() < MAX_WRITES
                        && let Some(Told::Event(e)) = batch.next_if(|t| matches!(t, Told::Event(_)))
                    {
                        run.push(e);
                    }
                    publisher.events(&run).await;
                }
                Told::Status(s) => publisher.status(&s).await,
            }
        }
        if closed && lock(&queue).items.is_empty() {
            return publisher.stop().await;
        }
        tokio::select! {
            () = wake.notified() => {}
            _ = tick.tick() => {
                publisher.tick().await;
                ticked = tokio::time::Instant::now();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lookout_core::{EventKind, Labels, Origin};
    use std::sync::Arc as StdArc;
    use std::time::UNIX_EPOCH;

    fn event(id: &str, kind: EventKind) -> InstanceEvent {
        InstanceEvent::new(id.into(), kind, UNIX_EPOCH, Origin::Live)
            .labels(StdArc::new(Labels::new()))
    }

    fn kinds(q: &Queue) -> Vec<String> {
        q.items
            .queued()
            .iter()
            .map(|t| match t {
                Told::Event(e) => format!("{} {:?}", e.id.as_str(), e.kind),
                Told::Status(_) => "status".to_owned(),
            })
            .collect()
    }

    #[test]
    fn every_transition_is_kept_in_order_below_the_bound() {
        let mut q = Queue::default();
        q.event(&event("a", EventKind::Started));
        q.event(&event("a", EventKind::Stopped));
        q.status(&Status::Connected { instances: 1 });
        q.event(&event("a", EventKind::Started));
        assert_eq!(kinds(&q), ["a Started", "a Stopped", "status", "a Started"]);
        assert_eq!(q.items.coalesced(), 0);
        assert_eq!(q.take().len(), 4);
        assert!(q.items.is_empty());
    }

    #[test]
    fn beyond_the_bound_an_instance_keeps_its_latest_event_since_the_last_status() {
        let mut q = Queue::default();
        for i in 0..COALESCE_FROM {
            q.event(&event(&format!("i{i}"), EventKind::Started));
        }
        q.event(&event("i7", EventKind::Stopped));
        assert_eq!(q.items.len(), COALESCE_FROM, "bounded by the instances");
        assert_eq!(q.items.coalesced(), 1);
        assert!(matches!(&q.items.queued()[7], Told::Event(e) if e.kind == EventKind::Stopped));
        // After a status, nothing before it is replaced.
        q.status(&Status::Connected { instances: 1 });
        q.event(&event("i7", EventKind::Started));
        assert_eq!(q.items.len(), COALESCE_FROM + 2);
        assert!(matches!(&q.items.queued()[7], Told::Event(e) if e.kind == EventKind::Stopped));
    }
}
