//! The vocabulary every provider speaks: instances, their events, and what a
//! session observes.

use std::borrow::Borrow;
use std::fmt;
use std::sync::Arc;
use std::time::SystemTime;

pub(crate) use crate::labels::Labels;

mod construct;
mod reason;

pub use reason::{MAX_MESSAGE, Outcome, Reason, Signal};

/// The provider-defined, stable key of an instance.
///
/// | provider | id |
/// |---|---|
/// | Docker, Podman | container name without the leading `/` |
/// | Swarm | service name |
/// | Kubernetes | `deployment/NAMESPACE/NAME` or `statefulset/NAMESPACE/NAME` |
/// | etcd (what publishers wrote) | `SOURCE/INSTANCE` |
///
/// Cloning is cheap (a reference count).
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct InstanceId(Arc<str>);

impl InstanceId {
    /// Wraps a provider's key.
    pub fn new(id: impl Into<Arc<str>>) -> Self {
        Self(id.into())
    }

    /// The key as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for InstanceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl fmt::Display for InstanceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for InstanceId {
    fn from(s: &str) -> Self {
        Self::new(s)
    }
}

impl From<String> for InstanceId {
    fn from(s: String) -> Self {
        Self::new(s)
    }
}

impl Borrow<str> for InstanceId {
    fn borrow(&self) -> &str {
        &self.0
    }
}

/// What happened to an instance.
///
/// An instance that exists is either stopped or running. `Created` brings it into
/// existence stopped, `Started`/`Stopped` move it between the two, `Removed` ends
/// it. With readiness watched (each provider's `readiness` setting), a running
/// instance is also ready or not: `Ready`/`Unready` move it between the two,
/// only while it runs; `Stopping`, `Stopped` and `Removed` end readiness
/// without an `Unready` before them, and a start begins unready (so a started
/// instance that can serve at once is followed by `Ready`). Per instance:
/// `Created → (Started → (Ready ⇄ Unready)* → [Stopping] → Stopped)* → Removed`,
/// where
/// - `Stopping` (the engine was asked to stop it, and it still runs) is
///   followed by `Stopped` or `Removed`, or by `Started` when the engine
///   abandons the stop (a workload scaled up again before it stopped);
///   nothing else is told of the instance in between;
/// - `Failing` (the engine says the running instance fails, in its own
///   words: [`Reason::message`]) may come at any point while it runs and
///   is not stopping, and comes again only when the message changes; it
///   moves no readiness (an `Unready` tells that);
///
/// and the stream never yields the same kind twice in a row but for a
/// `Failing` with a new message. Every `Stopped` carries its
/// [`Reason`] with its [`Outcome`] (see [`InstanceEvent::reason`]).
/// Without readiness, `Ready`, `Unready` and `Failing` never occur.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum EventKind {
    /// The instance now exists (and is not running).
    Created,
    /// The instance now runs (container started, service/workload scaled above 0).
    Started,
    /// The instance no longer runs (container exited, scaled to 0).
    Stopped,
    /// The instance no longer exists.
    Removed,
    /// The running instance can now serve (see [`Readiness::is_ready`]).
    Ready,
    /// The running instance can no longer serve (see [`Readiness::is_ready`]).
    Unready,
    /// The engine was asked to stop the running instance, which has not
    /// stopped yet (a `docker stop`'s signal, a workload being deleted).
    Stopping,
    /// The engine says the running instance fails: the event's
    /// [`reason`](InstanceEvent::reason) has the engine's message (a failing
    /// health check's output, a task's error, a condition's message).
    Failing,
}

impl EventKind {
    /// The lowercase name: `created`, `started`, `stopped`, `removed`,
    /// `ready`, `unready`, `stopping`, `failing`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Created => "created",
            Self::Started => "started",
            Self::Stopped => "stopped",
            Self::Removed => "removed",
            Self::Ready => "ready",
            Self::Unready => "unready",
            Self::Stopping => "stopping",
            Self::Failing => "failing",
        }
    }

    /// Every kind, in declaration order.
    pub const ALL: [Self; 8] = [
        Self::Created,
        Self::Started,
        Self::Stopped,
        Self::Removed,
        Self::Ready,
        Self::Unready,
        Self::Stopping,
        Self::Failing,
    ];

    /// The kind named by [`as_str`](Self::as_str).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == name)
    }
}

/// A container's healthcheck status (Docker, Podman), as the engine reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Health {
    /// The container has no healthcheck.
    None,
    /// It has one and no check has passed since it started (the engine sets
    /// this at every start).
    Starting,
    /// Its last checks passed.
    Healthy,
    /// Its checks failed (the engine also sets this when it stops or pauses
    /// the container).
    Unhealthy,
}

impl Health {
    /// The lowercase name: `none`, `starting`, `healthy`, `unhealthy`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Starting => "starting",
            Self::Healthy => "healthy",
            Self::Unhealthy => "unhealthy",
        }
    }
}

/// A Kubernetes resource's status by kstatus's rules
/// (`sigs.k8s.io/cli-utils/pkg/kstatus`, as Flux, kpt and `kubectl wait`'s
/// users read it): the detail of [`Readiness::Resource`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ResourceStatus {
    /// Reconciled: the controller observed the current spec and says it is
    /// done (or says nothing at all).
    Current,
    /// Not yet: a generation not observed, `Reconciling=True`, or a `Ready`
    /// condition that is not `True`.
    InProgress,
    /// `Stalled=True`: the controller gave up.
    Failed,
    /// `metadata.deletionTimestamp` is set: it is being deleted.
    Terminating,
}

impl ResourceStatus {
    /// kstatus's name: `Current`, `InProgress`, `Failed`, `Terminating`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Current => "Current",
            Self::InProgress => "InProgress",
            Self::Failed => "Failed",
            Self::Terminating => "Terminating",
        }
    }
}

impl fmt::Display for ResourceStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Display for Health {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the engine says of an instance's ability to serve, when readiness
/// is watched: the provider's detail, from which [`is_ready`](Self::is_ready)
/// decides, one rule per provider.
///
/// | provider | detail | ready ⇔ |
/// |---|---|---|
/// | Docker, Podman | [`Container`](Self::Container) | running ∧ not paused ∧ health ∈ {none, healthy} |
/// | Swarm | [`Replicas`](Self::Replicas): desired tasks, running tasks | desired > 0 ∧ running ≥ desired |
/// | Kubernetes `Deployment` | `Replicas`: `spec.replicas`, `status.availableReplicas` | desired > 0 ∧ observed ∧ available ≥ desired |
/// | Kubernetes `StatefulSet` | `Replicas`: `spec.replicas`, `status.readyReplicas` | desired > 0 ∧ observed ∧ ready ≥ desired |
/// | Kubernetes `DaemonSet` | `Replicas`: `status.desiredNumberScheduled`, `status.numberAvailable` | desired > 0 ∧ observed ∧ available ≥ desired |
/// | Kubernetes, any other kind (custom resources) | [`Resource`](Self::Resource): kstatus's status | status = `Current` |
/// | etcd (what a publisher wrote) | [`Told`](Self::Told): the record's `ready` | ready |
///
/// (Kubernetes: `observed` ⇔ `status.observedGeneration` ≥
/// `metadata.generation`, and > 0 for a `StatefulSet`. This is serving
/// capacity, not "rollout finished": old pods keep a Deployment ready during
/// a rolling update.)
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Readiness {
    /// A container: its healthcheck status, and whether it is paused
    /// ([`Readiness::container`]).
    #[non_exhaustive]
    Container {
        /// The healthcheck status.
        health: Health,
        /// Paused (it still runs, but serves nothing).
        paused: bool,
    },
    /// A replicated workload (a Swarm service, a Kubernetes workload)
    /// ([`Readiness::replicas`]).
    #[non_exhaustive]
    Replicas {
        /// How many replicas are wanted.
        desired: u32,
        /// How many can serve (Swarm: running tasks; `Deployment`: available
        /// replicas; `StatefulSet`: ready replicas).
        ready: u32,
        /// Whether the controller has seen the current spec (Kubernetes'
        /// `observedGeneration`; always true for Swarm).
        observed: bool,
    },
    /// A Kubernetes resource of any kind but the built-in workloads, read by
    /// kstatus's generic rules ([`Readiness::resource`]).
    #[non_exhaustive]
    Resource {
        /// Its status.
        status: ResourceStatus,
    },
    /// Readiness as another lookout told it, without the engine's detail
    /// (the etcd provider: a publisher's record; [`Readiness::told`]).
    #[non_exhaustive]
    Told {
        /// Whether it can serve.
        ready: bool,
    },
}

impl Readiness {
    /// A container's readiness.
    pub fn container(health: Health, paused: bool) -> Self {
        Self::Container { health, paused }
    }

    /// A replicated workload's readiness.
    pub fn replicas(desired: u32, ready: u32, observed: bool) -> Self {
        Self::Replicas {
            desired,
            ready,
            observed,
        }
    }

    /// A Kubernetes resource's readiness by kstatus's rules.
    pub fn resource(status: ResourceStatus) -> Self {
        Self::Resource { status }
    }

    /// Readiness as another lookout told it.
    pub fn told(ready: bool) -> Self {
        Self::Told { ready }
    }

    /// Whether a running instance in this state can serve (the table above).
    pub fn is_ready(&self) -> bool {
        match *self {
            Self::Container { health, paused } => {
                !paused && matches!(health, Health::None | Health::Healthy)
            }
            Self::Replicas {
                desired,
                ready,
                observed,
            } => desired > 0 && observed && ready >= desired,
            Self::Resource { status } => status == ResourceStatus::Current,
            Self::Told { ready } => ready,
        }
    }
}

impl fmt::Display for EventKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How an event was learnt.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Origin {
    /// From the first snapshot, only when the caller asked for it
    /// ([`WatchConfig::initial`](crate::WatchConfig::initial)).
    Initial,
    /// From the engine's change feed, with the engine's timestamp: as it
    /// happened, or, right after a reconnect and before its snapshot's
    /// [`Status::Connected`](crate::Status::Connected), the engine's exact
    /// replay of what happened while disconnected (`at` tells when).
    Live,
    /// Found by a resync (after a reconnect or a periodic relist): the transition
    /// happened while the change feed could not tell us.
    Resync,
}

impl Origin {
    /// The lowercase name: `initial`, `live`, `resync`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Initial => "initial",
            Self::Live => "live",
            Self::Resync => "resync",
        }
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One transition of one instance, as the stream yields it.
///
/// Made by the core; [`InstanceEvent::new`] and its setters build one
/// elsewhere (a test, a relay).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct InstanceEvent {
    /// Which instance.
    pub id: InstanceId,
    /// What happened.
    pub kind: EventKind,
    /// The engine's timestamp of the change for [`Origin::Live`] events; for
    /// events found by a snapshot ([`Origin::Initial`], [`Origin::Resync`]) the
    /// engine cannot say when the transition happened, so this is the local time
    /// at which the snapshot revealed it. The two clocks differ (an engine's
    /// list may even run ahead of its own events: Podman lists a container
    /// exited some 20 ms before it stamps its `die`), so order events by the
    /// stream, not by `at` across origins.
    pub at: SystemTime,
    /// How the event was learnt.
    pub origin: Origin,
    /// The instance's labels as last known (for `Removed`: its labels before removal).
    pub labels: Arc<Labels>,
    /// The engine's identity of the incarnation the event concerns (see
    /// [`Listed::uid`]), when known: a `Removed` carries the uid of the
    /// incarnation that went, the `Created` that follows it the new one's.
    pub uid: Option<Arc<str>>,
    /// With readiness watched, the provider's detail as known after this
    /// event (the state [`Ready`](EventKind::Ready) and
    /// [`Unready`](EventKind::Unready) follow from); `None` without.
    pub readiness: Option<Readiness>,
    /// Why: on a [`Stopped`](EventKind::Stopped), always, with its
    /// [`Outcome`] and what else the engine said (exit code, signal, OOM,
    /// restart); on a [`Failing`](EventKind::Failing), the engine's message;
    /// on a [`Stopping`](EventKind::Stopping) or a
    /// [`Created`](EventKind::Created) of an instance that is not running,
    /// what the engine said of it, when it did; otherwise `None`.
    pub reason: Option<Arc<Reason>>,
}

/// One instance as a snapshot (list) reports it.
///
/// A provider builds it with [`Listed::new`] and its setters.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Listed {
    /// Which instance.
    pub id: InstanceId,
    /// Whether it runs now.
    pub running: bool,
    /// The engine's identity of this incarnation (container id, object uid), when
    /// known. A different uid under the same id means the instance was removed and
    /// created again.
    pub uid: Option<Arc<str>>,
    /// Its labels.
    pub labels: Labels,
    /// With readiness watched, its readiness; `None` without.
    pub readiness: Option<Readiness>,
    /// What the engine says of it: for one that is not running, why it
    /// stopped (its [`Outcome`], exit code…); for a running one, with
    /// readiness watched, why it fails ([`Reason::message`]; `None`: it
    /// does not).
    pub reason: Option<Arc<Reason>>,
}

/// One live change as the engine's change feed reports it.
///
/// A provider builds it with [`Change::new`] and its setters.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Change<C> {
    /// Which instance.
    pub id: InstanceId,
    /// The transition the engine reports. The core only passes it on when it
    /// changes the known state (a replayed or raced duplicate is swallowed).
    pub kind: EventKind,
    /// The engine's identity of this incarnation, when known (see [`Listed::uid`]).
    pub uid: Option<Arc<str>>,
    /// The instance's labels when the change carries them; `None` keeps the
    /// known ones. Shared: a provider that keeps each instance's labels hands
    /// the same `Arc` to every change, and an unchanged one reaches the
    /// emitted [`InstanceEvent`]s without a copy.
    pub labels: Option<Arc<Labels>>,
    /// The engine's timestamp of the change.
    pub at: SystemTime,
    /// Where to resume the feed after this change, if the engine supports resuming.
    pub cursor: Option<C>,
    /// With readiness watched, the instance's readiness after the change,
    /// when the change tells it (a start, a health change, a pause): the
    /// core reports [`Ready`](EventKind::Ready) or
    /// [`Unready`](EventKind::Unready) when it changes whether the running
    /// instance is ready. A [`Ready`](EventKind::Ready) or
    /// [`Unready`](EventKind::Unready) change without it says just that.
    pub readiness: Option<Readiness>,
    /// Why, when the engine says it: on a [`Stopped`](EventKind::Stopped),
    /// the stop's reason; on a [`Failing`](EventKind::Failing) — or a
    /// [`Ready`](EventKind::Ready), [`Unready`](EventKind::Unready) or a
    /// repeated start that tells the instance fails — the engine's message.
    pub reason: Option<Arc<Reason>>,
}

/// What a session yields: snapshots and live changes.
///
/// A session starts with a snapshot (`ResyncBegin`, any number of `Listed`,
/// `ResyncDone`), or, when it resumed the feed from the cursor with nothing
/// missed, with `Resumed`, and then yields live changes; after a reconnect, the
/// snapshot may be preceded by the engine's proven-complete replay of the
/// changes made meanwhile (see [`Dial::dial`](crate::Dial::dial)). It may relist again later with
/// another `ResyncBegin … ResyncDone` (as a Kubernetes watcher does after
/// `410 Gone`). Any observation counts as a sign of life for stall detection.
///
/// A provider builds the variants directly, except
/// [`Polled`](Self::Polled) ([`Observation::polled`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Observation<C> {
    /// A snapshot starts; instances listed until `ResyncDone` form the whole truth.
    ResyncBegin,
    /// One instance of the snapshot.
    Listed(Listed),
    /// The snapshot is complete: the core diffs it against the known state.
    ResyncDone,
    /// Instead of a snapshot, on a redial: the session resumed the engine's
    /// feed exactly where the previous one left it (the cursor it was given,
    /// which the engine still serves — Kubernetes' `resourceVersion`), so
    /// nothing was missed and the known state stands. The core reports
    /// [`Status::Connected`](crate::Status::Connected) as after a snapshot,
    /// so the changes the engine replays from the cursor go before it, as
    /// far as the session can tell where the replay ends.
    /// Yield it only when the engine guarantees continuity; on a first dial
    /// (no cursor) it is ignored, and a snapshot must come.
    Resumed,
    /// A live change.
    Change(Change<C>),
    /// The feed moved on without a change we care about (an ignored or undecodable
    /// event, a bookmark): remember the cursor so a redial does not replay it.
    Progress(Option<C>),
    /// Between snapshots, the readiness of one instance as the session polled
    /// it, for an engine whose feed does not tell readiness (Swarm). A change
    /// of whether the running instance is ready is reported as
    /// [`Origin::Resync`] (the poll found it), at the local time; an instance
    /// not known, or of another incarnation (`uid`), is ignored.
    #[non_exhaustive]
    Polled {
        /// Which instance.
        id: InstanceId,
        /// Its incarnation, when known.
        uid: Option<Arc<str>>,
        /// Its readiness now.
        readiness: Readiness,
        /// Why it fails now, in the engine's words ([`Reason::message`];
        /// `None`: it does not); see [`Observation::failing`].
        reason: Option<Arc<Reason>>,
    },
}
