//! The scripted dial the policy and hub tests share: sessions the test
//! drives through channels, and a count of every resource handed out.
#![allow(dead_code, clippy::unnecessary_wraps)]

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_stream::StreamExt;
use tokio_stream::wrappers::UnboundedReceiverStream;

use lookout_core::{
    BoxError, Change, Dial, DialFuture, EventKind, Health, Listed, Observation, ProbeFuture,
    Readiness, WatchConfig,
};

pub type Obs = Result<Observation<u64>, BoxError>;

/// An item as a short line: `id kind origin`, or the status.
pub fn short(item: &lookout_core::Item) -> String {
    use lookout_core::{Item, Status};
    match item {
        Item::Event(e) => format!("{} {} {}", e.id, e.kind, e.origin),
        Item::Status(Status::Connected { instances }) => format!("connected {instances}"),
        Item::Status(Status::Disconnected { attempt, .. }) => format!("disconnected {attempt}"),
        Item::Status(Status::Lagged { missed }) => format!("lagged {missed}"),
        Item::Status(other) => format!("{other:?}"),
    }
}

/// [`short`] of each item.
pub fn shorts(items: &[lookout_core::Item]) -> Vec<String> {
    items.iter().map(short).collect()
}

/// Counts a resource the double handed out until it is dropped.
pub struct Guard(Arc<AtomicUsize>);
impl Guard {
    pub fn new(alive: &Arc<AtomicUsize>) -> Self {
        alive.fetch_add(1, Ordering::SeqCst);
        Self(Arc::clone(alive))
    }
}
impl Drop for Guard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

pub enum DialPlan {
    Fail(&'static str),
    Session(mpsc::UnboundedReceiver<Obs>),
    /// The dial never completes.
    Hang,
}

#[derive(Clone, Copy)]
pub enum ProbePlan {
    Ok,
    Fail,
    Hang,
}

#[derive(Default)]
pub struct Script {
    pub plan: VecDeque<DialPlan>,
    pub probes: VecDeque<ProbePlan>,
    /// The cursor passed to each dial, and when.
    pub dials: Vec<(Option<u64>, Instant)>,
    pub probes_started: usize,
}

/// A test double: records dials and cursors, hands out sessions the test drives
/// through channels, and counts every resource it hands out until dropped.
#[derive(Clone, Default)]
pub struct Scripted {
    pub script: Arc<Mutex<Script>>,
    pub alive: Arc<AtomicUsize>,
}

impl Scripted {
    pub fn lock(&self) -> std::sync::MutexGuard<'_, Script> {
        self.script
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
    /// Plans a session; the test sends its observations through the returned sender.
    pub fn session(&self) -> mpsc::UnboundedSender<Obs> {
        let (tx, rx) = mpsc::unbounded_channel();
        self.lock().plan.push_back(DialPlan::Session(rx));
        tx
    }
    pub fn fail(&self, why: &'static str) {
        self.lock().plan.push_back(DialPlan::Fail(why));
    }
    pub fn hang(&self) {
        self.lock().plan.push_back(DialPlan::Hang);
    }
    pub fn probe(&self, p: ProbePlan) {
        self.lock().probes.push_back(p);
    }
    pub fn dials(&self) -> Vec<Option<u64>> {
        self.lock().dials.iter().map(|d| d.0).collect()
    }
    pub fn dial_times(&self) -> Vec<Instant> {
        self.lock().dials.iter().map(|d| d.1).collect()
    }
    pub fn alive(&self) -> usize {
        self.alive.load(Ordering::SeqCst)
    }
}

impl Dial for Scripted {
    type Cursor = u64;

    fn dial(&mut self, resume: Option<&u64>) -> DialFuture<u64> {
        let plan = {
            let mut s = self.lock();
            s.dials.push((resume.copied(), Instant::now()));
            s.plan.pop_front().unwrap_or(DialPlan::Hang)
        };
        let guard = Guard::new(&self.alive);
        let alive = Arc::clone(&self.alive);
        Box::pin(async move {
            let _guard = guard;
            match plan {
                DialPlan::Fail(why) => Err(why.into()),
                DialPlan::Hang => std::future::pending().await,
                DialPlan::Session(rx) => {
                    let session_guard = Guard::new(&alive);
                    let stream = UnboundedReceiverStream::new(rx).map(move |o| {
                        let _keep = &session_guard;
                        o
                    });
                    Ok(Box::pin(stream) as lookout_core::Session<u64>)
                }
            }
        })
    }

    fn probe(&mut self) -> Option<ProbeFuture> {
        let plan = {
            let mut s = self.lock();
            s.probes_started += 1;
            s.probes.pop_front().unwrap_or(ProbePlan::Ok)
        };
        let guard = Guard::new(&self.alive);
        Some(Box::pin(async move {
            let _guard = guard;
            match plan {
                ProbePlan::Ok => Ok(()),
                ProbePlan::Fail => Err("ping refused".into()),
                ProbePlan::Hang => std::future::pending().await,
            }
        }))
    }
}

pub fn listed(id: &str, running: bool) -> Obs {
    Ok(Observation::Listed(
        Listed::new(id.into(), running).labels(lookout_core::Labels::new()),
    ))
}

pub fn change(id: &str, kind: EventKind, cursor: u64) -> Obs {
    Ok(Observation::Change(
        Change::new(
            id.into(),
            kind,
            SystemTime::UNIX_EPOCH + Duration::from_secs(cursor),
        )
        .cursor(Some(cursor)),
    ))
}

/// A listed instance with an incarnation and, readiness watched, its readiness.
pub fn listed_with(
    id: &str,
    running: bool,
    uid: Option<&str>,
    readiness: Option<Readiness>,
) -> Obs {
    Ok(Observation::Listed(
        Listed::new(id.into(), running)
            .uid(uid.map(Into::into))
            .labels(lookout_core::Labels::new())
            .readiness(readiness),
    ))
}

/// A live change with an incarnation and, readiness watched, the readiness
/// it tells.
pub fn change_with(
    id: &str,
    kind: EventKind,
    cursor: u64,
    uid: Option<&str>,
    readiness: Option<Readiness>,
) -> Obs {
    Ok(Observation::Change(
        Change::new(
            id.into(),
            kind,
            SystemTime::UNIX_EPOCH + Duration::from_secs(cursor),
        )
        .uid(uid.map(Into::into))
        .cursor(Some(cursor))
        .readiness(readiness),
    ))
}

/// A polled readiness (Swarm).
pub fn polled(id: &str, uid: Option<&str>, readiness: Readiness) -> Obs {
    Ok(Observation::polled(
        id.into(),
        uid.map(Into::into),
        readiness,
    ))
}

/// A container's readiness, unpaused.
pub fn health(h: Health) -> Option<Readiness> {
    Some(Readiness::container(h, false))
}

/// A snapshot of these listed instances ([`listed_with`]).
pub fn snapshot_of(tx: &mpsc::UnboundedSender<Obs>, items: Vec<Obs>) {
    let _ = tx.send(Ok(Observation::ResyncBegin));
    for item in items {
        let _ = tx.send(item);
    }
    let _ = tx.send(Ok(Observation::ResyncDone));
}

pub fn snapshot(tx: &mpsc::UnboundedSender<Obs>, items: &[(&str, bool)]) {
    let _ = tx.send(Ok(Observation::ResyncBegin));
    for (id, running) in items {
        let _ = tx.send(listed(id, *running));
    }
    let _ = tx.send(Ok(Observation::ResyncDone));
}

pub fn quick() -> WatchConfig {
    WatchConfig::default().resync_every(None)
}
