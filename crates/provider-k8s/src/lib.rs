//! The Kubernetes provider of lookout: `Deployment`s, `StatefulSet`s,
//! `DaemonSet`s and any other namespaced kind (custom resources: a database
//! operator's `Cluster`, an Argo `Rollout`…) as one resilient, leak-free
//! stream of instance events.
//!
//! ```no_run
//! use lookout_k8s::{K8sConfig, Kind};
//! use tokio_stream::StreamExt;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), lookout_k8s::ConfigError> {
//! let config = K8sConfig::default()
//!     .namespace("shop")
//!     .kinds([Kind::Deployment, Kind::StatefulSet])
//!     .label_selector("app.kubernetes.io/part-of=shop");
//! // Synchronous: nothing is contacted until the stream is polled. A cluster
//! // that cannot be reached is a `Disconnected` status, retried forever.
//! let mut events = lookout_k8s::watch(config)?.events();
//! while let Some(e) = events.next().await {
//!     println!("{} {} ({})", e.id, e.kind, e.origin);
//! }
//! # Ok(())
//! # }
//! ```
//!
//! Any kind, as `kubectl get` names it ([`KindRef`]), with its readiness by
//! kstatus's rules:
//!
//! ```no_run
//! use lookout_k8s::{K8sConfig, Kind, KindRef};
//!
//! # fn main() -> Result<(), lookout_k8s::ConfigError> {
//! let config = K8sConfig::default()
//!     .kinds([
//!         KindRef::from(Kind::DaemonSet),
//!         "postgresql.cnpg.io/v1/Cluster".parse::<KindRef>()?,
//!     ])
//!     .readiness(true);
//! let watch = lookout_k8s::watch(config)?;
//! # drop(watch);
//! # Ok(())
//! # }
//! ```
//!
//! A runnable example: `cargo run -p lookout-k8s --example k8s_watch -- NAMESPACE`
//! ([`examples/k8s_watch.rs`](https://github.com/lookout-rs/lookout/blob/main/crates/provider-k8s/examples/k8s_watch.rs)).
//!
//! # Mapping
//!
//! | Kubernetes | lookout |
//! |---|---|
//! | a `Deployment` / `StatefulSet` / `DaemonSet` | an instance, id `deployment/NAMESPACE/NAME` / `statefulset/…` / `daemonset/…` |
//! | an object of any other kind | an instance, id `KIND/NAMESPACE/NAME` for a kind of the core group (`pod/…`), else `KIND.GROUP/NAMESPACE/NAME` (`cluster.postgresql.cnpg.io/db/pg`), the kind lowercased: an id never changes with what else the cluster serves, and its prefix is what `kubectl get` takes |
//! | `metadata.uid` | [`Listed::uid`](lookout_core::Listed::uid): a new uid under the same name is `Removed` then `Created` |
//! | `metadata.labels` | the instance's labels: decoded straight into the interned set (`lookout_core::Labels`: equal sets are one allocation, their strings shared), which the session, the core and every event of the instance share |
//! | `spec.replicas` (`Deployment`, `StatefulSet`) | running when it is not 0 (unset counts as 1, as Kubernetes defaults it) |
//! | `status.desiredNumberScheduled` (`DaemonSet`) | running when it is not 0 (missing counts as 0: no node counted yet) |
//! | a kind with a `/scale` subresource: the integer at its CRD's `scale.specReplicasPath` (`spec.replicas` for one that is no custom resource) | running when it is not 0 (unset counts as 1) |
//! | a kind without `/scale` | running while it exists |
//! | `metadata.generation`, `status.observedGeneration`, `status.availableReplicas` / `status.readyReplicas` / `status.numberAvailable`; any other kind's `status.conditions` and `metadata.deletionTimestamp` | with [`K8sConfig::readiness`], each instance's [`Readiness`] (see [Readiness](#readiness)) |
//! | a kind the apiserver does not serve (its CRD deleted, or not yet created) | no instance: its instances are `Removed` once; looked for again every 10 s (at most the watch timeout) and watched when it is back |
//! | a kind's list (paged `LIST`s, or a streaming list: [`InitialList`]) | one snapshot (`ResyncBegin`, `Listed`…, `ResyncDone`) holding **every** watched kind |
//! | `ADDED` / `MODIFIED` | a change: `Started` when running, `Stopped` when not, `Stopping` when running and being deleted, with the object's readiness when it is watched and why (see [Why](#why)) (the core adds `Created` for an unknown object, `Ready`/`Unready` when the readiness of a running one flips, and swallows what changes nothing, such as a label-only edit) |
//! | `DELETED` | `Removed` |
//! | `BOOKMARK` | progress: the kind's resume point moves on, nothing is told |
//! | each kind's newest `resourceVersion` seen | the cursor ([`K8sCursor`]) a redial resumes from |
//!
//! Live events carry the local time at which the watch event arrived: a
//! Deployment has no timestamp of its last scaling.
//!
//! # Why
//!
//! Every event says why when the apiserver does ([`Reason`]): what
//! Kubernetes says, and what lookout tells of it.
//!
//! | the apiserver says | lookout tells |
//! |---|---|
//! | the object wants no replica: `spec.replicas` 0 (a scale of 0), a `DaemonSet`'s `status.desiredNumberScheduled` 0 | `Stopped` (or `Created` of an object that never ran), reason [`Reason::stop`]`(`[`Outcome::Stopped`]`)`: scaling to 0 is a request. Told **at once**, when `spec` says 0: the workload no longer asks for pods (its pods are ended by their controller meanwhile; `status.replicas` still counts them, but a `Stopping` until it reaches 0 would hang where no controller runs) |
//! | `metadata.deletionTimestamp` set on a running object (its finalizers, or a foreground deletion, hold it) | `Stopping` (readiness ends), then `Removed` when the apiserver deletes it (`DELETED`), or `Stopped` (outcome `stopped`) when it is scaled to 0 meanwhile. First, as its deletion begins, its readiness then: a kind read by kstatus is `Terminating`, so `Unready` before the `Stopping`. A snapshot that finds an object being deleted is followed by its `Stopping` (live): a snapshot has no word for it |
//! | with readiness, a `Deployment`'s `Progressing` condition with reason `ProgressDeadlineExceeded` (the controller writes it `False`; `kubectl rollout status` and kstatus read the reason alone) | `Failing`, [`Reason::message`] the condition's `message`, [`failed`](Reason::failed): the controller gave up on the rollout (kstatus: `Failed`) |
//! | with readiness, `ReplicaFailure=True` on a `Deployment`, `StatefulSet` or `DaemonSet` | `Failing` in the condition's `message` (not `failed`: the controller keeps trying); a progress deadline past tells first |
//! | with readiness, any other kind that kstatus calls `Failed` (its first `Stalled=True` before any `Reconciling=True`) | `Failing` in that `Stalled` condition's `message`, `failed` |
//! | the failure's words change; the condition goes | `Failing` again; nothing (the next `Failing` is told anew) |
//!
//! A condition without a `message` speaks by its `reason` (else its type);
//! a message is cut to [`MAX_MESSAGE`](lookout_core::MAX_MESSAGE) bytes.
//! The core tells `Failing` when the words are new: the same failure
//! found again by a relist, a resumed watch or a status write that
//! changes nothing else is not told twice; one a relist finds first is
//! told once, [`Origin::Resync`](lookout_core::Origin::Resync). `Failing`
//! moves no readiness (a `Deployment` past its deadline whose old replicas
//! serve stays ready). Without readiness, status conditions are not
//! read for it and nothing is `Failing`; `Stopped` and `Stopping` are told
//! either way. A `Job`'s completion is not watched (no built-in kind
//! completes).
//!
//! # Readiness
//!
//! With [`K8sConfig::readiness`] on (default off), each workload also tells
//! whether it can serve: the core reports
//! [`Ready`](lookout_core::EventKind::Ready) and
//! [`Unready`](lookout_core::EventKind::Unready) between its `Started` and
//! `Stopped`, and every event carries the detail,
//! [`Readiness::Replicas`]
//! `{ desired, ready, observed }`:
//!
//! | kind | `desired` | `ready` | `observed` | ready ⇔ |
//! |---|---|---|---|---|
//! | `Deployment` | `spec.replicas` | `status.availableReplicas` | `status.observedGeneration` ≥ `metadata.generation` | `spec.replicas` > 0 ∧ `status.observedGeneration` ≥ `metadata.generation` ∧ `status.availableReplicas` ≥ `spec.replicas` |
//! | `StatefulSet` | `spec.replicas` | `status.readyReplicas` | 0 < `status.observedGeneration` ≥ `metadata.generation` | `spec.replicas` > 0 ∧ 0 < `status.observedGeneration` ≥ `metadata.generation` ∧ `status.readyReplicas` ≥ `spec.replicas` |
//! | `DaemonSet` | `status.desiredNumberScheduled` | `status.numberAvailable` | 0 < `status.observedGeneration` ≥ `metadata.generation` | `status.desiredNumberScheduled` > 0 ∧ 0 < `status.observedGeneration` ≥ `metadata.generation` ∧ `status.numberAvailable` ≥ `status.desiredNumberScheduled` |
//!
//! Any other kind (custom resources) is read by kstatus's generic rules
//! (`sigs.k8s.io/cli-utils/pkg/kstatus`, what Flux, kpt and Config Sync
//! poll), and carries [`Readiness::Resource`]
//! with its [`ResourceStatus`]: `metadata.deletionTimestamp` set →
//! `Terminating`; `status.observedGeneration` present and ≠
//! `metadata.generation` → `InProgress`; the first `Reconciling=True` or
//! `Stalled=True` condition → `InProgress` or `Failed`; the first `Ready`
//! condition `True` → `Current`, `False`/`Unknown` → `InProgress`; else
//! `Current`. Ready ⇔ `Current`, at every step (the tests compare with
//! kstatus itself). As kstatus does, a kind that states nothing (no
//! conditions, no observed generation) is taken as reconciled: ready as
//! soon as it exists. A status field of the wrong type (kstatus fails on
//! it) is `InProgress`, logged. kstatus's own rules for some built-in kinds
//! (`Pod`, `Service`, `PersistentVolumeClaim`, `ReplicaSet`, `Job`,
//! `PodDisruptionBudget`, `CustomResourceDefinition`) are not implemented:
//! with readiness, those kinds are refused ([`ConfigError::UnsupportedKind`]).
//!
//! Where lookout's rule differs from kstatus on purpose: the built-in
//! workloads' readiness is **serving capacity**, not "rollout finished".
//! kstatus holds a `Deployment` `InProgress` while old replicas remain or
//! updated ones fall short, a `StatefulSet` while its revisions differ, a
//! `DaemonSet` while any pod is not current, updated, available *and*
//! ready; lookout counts what can serve (a `DaemonSet` whose pods are all
//! available but one not yet ready is ready here, `InProgress` there), and
//! a workload that wants no replica is stopped, not ready.
//!
//! `spec.replicas` unset counts as 1 (as for running); a status field that
//! is missing counts as 0 (a workload no controller has seen is not
//! ready). A field that is no integer (no apiserver serves one) is logged
//! and counts as not observed, or as no replica ready; it does not make
//! the object unreadable. This is serving capacity, not "rollout
//! finished": during a rolling update a `Deployment` whose old pods still
//! serve stays ready, and `kubectl rollout status` may still wait.
//!
//! ```no_run
//! # fn main() -> Result<(), lookout_k8s::ConfigError> {
//! let config = lookout_k8s::K8sConfig::default().readiness(true);
//! let watch = lookout_k8s::watch(config)?;
//! # drop(watch);
//! # Ok(())
//! # }
//! ```
//!
//! (`lookout k8s --readiness` on the command line.) The controllers write
//! the status, so readiness arrives as the `MODIFIED` events the watch
//! already receives: no request is added. Every `MODIFIED` reaches the core
//! (a status-only one is a `Started` of a known running object, whose
//! readiness the core applies), which swallows a repeated readiness. What
//! a redial misses comes once, as for scalings: in the resumed watch's
//! replay, or as a relist's net effect
//! ([`Origin::Resync`](lookout_core::Origin::Resync)). Scaling to 0 is
//! `Stopped`, which ends readiness without an `Unready`. Without
//! readiness, every event's `readiness` is `None` and no `Ready`,
//! `Unready` or `Failing` is told.
//!
//! # Guarantees
//!
//! Everything [`lookout_core::Watch`] guarantees (see its
//! [`# Guarantees`](lookout_core::Watch#guarantees)), and:
//!
//! - **The kubeconfig is resolved on every dial**, as kube does it: the
//!   explicit [`K8sConfig::kubeconfig`], else `KUBECONFIG`, else
//!   `~/.kube/config`, else the in-cluster service account. A missing file or
//!   an unreachable cluster is a `Disconnected` status, retried under the core's
//!   policy; only a configuration that can never work is a [`ConfigError`].
//!   While the resolved configuration and the kubeconfig files it came from
//!   are unchanged, a redial keeps the previous client (and its connections);
//!   a change makes a new one, and a different apiserver URL also drops the
//!   resume point (one cluster's versions mean nothing to another): every
//!   kind lists.
//! - **A redial resumes; it does not relist.** Each kind is listed once,
//!   then watched (with bookmarks, so a quiet kind's version stays fresh).
//!   After a lost connection, an apiserver restart or a watch the apiserver
//!   ends, each kind's watch resumes from the newest `resourceVersion` the
//!   consumer has seen: one `WATCH` per kind, no `LIST`. The changes made
//!   meanwhile come as the apiserver replays them, in order, exactly once,
//!   [`Origin::Live`](lookout_core::Origin::Live), before the reconnect's
//!   `Connected` status: the session reports
//!   [`Observation::Resumed`](lookout_core::Observation::Resumed) once every
//!   watch is accepted and the replay that arrived with them is read (the
//!   watches have nothing more ready). A watch does not mark the end of its
//!   replay, so a part of it that the apiserver writes later than that (a
//!   large backlog, a slow network) comes just after `Connected`, still in
//!   order and exactly once. Their `at` is when lookout read them (a
//!   Deployment carries no time of its last scaling). A kind lists only
//!   when no version is known (the first dial) or the apiserver no longer
//!   has it.
//! - **`410 Gone` relists that kind only.** When etcd compacted a kind's
//!   `resourceVersion` away, that kind lists again, inside the session (a
//!   410 is no failure), and the snapshot again holds every kind: the other
//!   kinds' last known objects (kept across redials) are listed with it, so
//!   the core's diff never takes them for removed. What the relist reveals —
//!   objects that vanished, missed scalings — is reported once, as its net
//!   effect, [`Origin::Resync`](lookout_core::Origin::Resync).
//! - **No periodic relist by default** ([`K8sConfig::default_watch`]): the
//!   watch protocol drops nothing (a watch resumes from its version, a
//!   version that is gone says so), so a periodic `LIST` of every watched
//!   object would cost the apiserver much and tell nothing. Docker keeps its
//!   periodic relist because dockerd may drop events without a sign. Set
//!   [`WatchConfig::resync_every`] to have one anyway: a redial then lists
//!   every kind when the last full list is at least that old. The relist
//!   for a lagging consumer is off too: the apiserver buffers for a slow
//!   reader or ends its watch, which is resumed.
//! - **Kinds are resolved on every dial**, by each kind's own feed: a
//!   built-in workload costs no request; `GROUP/VERSION/KIND` one
//!   (`GET /apis/GROUP/VERSION`); a name (`clusters`,
//!   `clusters.postgresql.cnpg.io`) the aggregated discovery (`/api`,
//!   `/apis`); a kind with a scale subresource one `GET` of its CRD (for
//!   `specReplicasPath`). A kind the apiserver does not serve has no
//!   instances (a watch that had some tells each `Removed` once: live, as
//!   the apiserver deletes a CRD's objects, or as a resync when that
//!   happened while disconnected); it is looked for again every 10 s (at
//!   most the watch timeout) with one discovery request — never a loop of
//!   `404`s — and listed once it is back. The other kinds go on meanwhile.
//!   [`check`] says at once whether every kind is served (`lookout k8s`
//!   exits 2 when not).
//! - **Permissions: `list` and `watch`** of each watched kind (`apps`:
//!   `deployments`, `statefulsets`, `daemonsets`; a custom kind's plural in
//!   its group), in the namespace or cluster-wide; for a custom kind with a
//!   scale subresource, also `get` of its `customresourcedefinitions`
//!   (`apiextensions.k8s.io`, `resourceNames` can name it); never a write.
//!   (`GET /version`, the probe, and discovery are open to every
//!   authenticated user.) A request the apiserver refuses (`403 Forbidden`: a
//!   role without a verb; `401`: a token no longer valid) is a `Disconnected`
//!   status, retried, whose [`DialError`] ends with the apiserver's message on
//!   one line, as `kubectl` prints it; granted again, the next dial connects.
//! - **The core's reconnect policy is the only one.** Any error other than
//!   `410 Gone` (a list or watch refused, a connection lost, an apiserver
//!   error event) ends the session: `Disconnected`, the core's backoff, a
//!   redial that resumes. kube's own backoff is not used. One exception: a
//!   list page whose request got no answer at all (its connection died,
//!   typically a pooled one the peer had closed) is sent again once, at
//!   once, so a network blip does not cost a list from page one.
//! - **A frozen apiserver is noticed** within the core's stall bound
//!   ([`WatchConfig::probe_after`](lookout_core::WatchConfig::probe_after) +
//!   [`probe_timeout`](lookout_core::WatchConfig::probe_timeout)): a silent
//!   session is probed with `GET /version` on the session's own client. Each
//!   watch request also ends on the server after about that long and is resumed
//!   from its `resourceVersion` (5 s more of silence and it is taken for dead
//!   and resumed too), so a watch connection that died silently is replaced.
//! - **An object that cannot be read does not end the session**: a watch
//!   event that does not decode, an object without a name or namespace, an
//!   unreadable `spec.replicas` is logged and skipped. Of a built-in
//!   workload only the fields lookout uses are read (name, namespace, uid,
//!   `resourceVersion`, labels, whether `metadata.deletionTimestamp` is
//!   set, `spec.replicas`, `status.desiredNumberScheduled`, and the
//!   integers of [readiness](#readiness): `metadata.generation`,
//!   `status.observedGeneration`, `status.availableReplicas`,
//!   `status.readyReplicas`, `status.numberAvailable`, with the failures
//!   `status.conditions` states ([Why](#why)), read whether or not
//!   readiness is on, and then ignored; conditions that are no list of
//!   objects state nothing); the rest of an object is skipped
//!   by the parser. An object of any other kind is read whole, as kube's
//!   `DynamicObject` (no generated types needed). (A
//!   list response that is no JSON list of such objects — one whose `spec`
//!   is no object, say — fails as a whole: it ends the session.)
//! - **Memory is O(objects)**: each kind's objects (id, uid, labels, running
//!   state, readiness) are kept, to rebuild the snapshot of every kind, and handed from
//!   one session to the next; nothing else of an object is. A paged list holds one
//!   page of 500 objects at a time; [`InitialList::Streaming`] one object. A relist
//!   updates the kept objects in place (never a second copy of them), and a
//!   snapshot is told from them one object at a time as the core reads it
//!   (never queued whole). At 20 000 Deployments a watch holds about
//!   1.2 KB per object, a twentieth of kube-runtime's `reflector` store of
//!   the same objects (bench `k8s_scale`, BENCHMARKS.md §15).
//! - **Nothing the apiserver sends grows memory without bound**: a watch's
//!   body is split into lines of at most [`K8sConfig::max_line`] (16 MiB); a
//!   longer line (a misbehaving apiserver or proxy) is never held whole — the
//!   rest of it is skipped as it arrives — and ends the session with
//!   [`DialError::LineTooLong`]: a `Disconnected` status that says the line
//!   exceeded so many bytes, a redial that resumes. A list page is read to
//!   [`K8sConfig::max_list_page`] (64 MiB); a longer one is asked again with
//!   half as many objects, down to one ([`DialError::PageTooLarge`] past
//!   that). An error answer is read to its first 64 KiB. (kube's own
//!   `Api::watch` splits lines with an unbounded codec and `Api::list`
//!   collects a body whole: lookout sends these requests with
//!   [`Client::send`] and reads them itself, as the CRD a custom kind's
//!   scale path is read from, to 16 MiB.) API discovery, asked only for a
//!   kind that is no built-in workload, is read by kube's `Discovery`: on
//!   a client this crate builds from a kubeconfig, a layer fails any such
//!   answer past [`K8sConfig::max_list_page`]; a client given to
//!   [`K8sDial::with_client`] is read as the program built it.
//! - **Dropping the stream closes every connection**: the client, its
//!   connection pool and the watches belong to the dial and its session. This
//!   crate spawns nothing; the tasks kube's client runs on the caller's
//!   runtime for its connections end when the stream is dropped.
//!
//! TLS is rustls with *ring* (no OpenSSL). If no rustls `CryptoProvider` is
//! installed in the process, a dial installs *ring*'s.
//!
//! # Features
//!
//! This crate has no Cargo features: everything above is always built
//! (kube's client and runtime, rustls with *ring*).
//!
//! # Public dependencies
//!
//! Types of these crates appear in this crate's API, so their
//! semver-incompatible releases are breaking changes of this crate too:
//!
//! - [`lookout-core`](lookout_core) 0.1: the contract ([`Watch`],
//!   [`WatchConfig`], the items and events).
//! - [`kube`] 5 (feature `client`): [`K8sDial::with_client`] and
//!   [`watch_with_client`] take kube's [`Client`], and
//!   [`DialError`]'s sources are kube's errors (`kube::Error`,
//!   `kube::config::KubeconfigError`, `kube::config::InferConfigError`,
//!   `kube::runtime::watcher::Error`).
//! - `tokio-stream` 0.1 (through lookout-core): the `Stream` the watch is.
//!
//! `k8s-openapi` 0.29 appears in no signature (objects are read into this
//! crate's own types), but it is the one kube 5 builds on, and this crate
//! enables its `v1_33` feature (the `apps/v1` kinds it reads): a program
//! that depends on `k8s-openapi` itself takes 0.29 with the same version
//! feature, as every crate over kube 5 must agree on one.

#![deny(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod client;
mod config;
mod cursor;
mod custom;
mod error;
mod events;
mod feed;
mod fetch;
mod kind;
mod kstatus;
mod limit;
mod object;
mod probe;
mod resolve;
mod session;
mod settings;
mod watch_lines;
mod why;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::Client;
use lookout_core::{Dial, DialFuture, ProbeFuture, Session};

use probe::{ProbeLease, ProbeSlot};
use settings::Settings;

// What a user of this crate alone names (lookout-core is a public
// dependency: these are its types, re-exported).
pub use client::check_kubeconfig;
pub use config::{InitialList, K8sConfig};
pub use cursor::K8sCursor;
pub use error::{CheckError, ConfigError, DialError};
pub use kind::{Kind, KindRef};
pub use lookout_core::{
    self, EventKind, InstanceEvent, Item, Labels, Outcome, Readiness, Reason, ResourceStatus,
    Status, Watch, WatchConfig,
};

/// Where each dial gets its client.
enum ClientSource {
    /// The kubeconfig (explicit, else inferred) and its context (else the
    /// current one), resolved anew on every dial.
    Kubeconfig(Option<PathBuf>, Option<String>),
    /// A client the program makes (see [`K8sDial::with_client`]).
    Client(Box<dyn FnMut() -> Client + Send>),
}

impl std::fmt::Debug for ClientSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Kubeconfig(path, context) => f
                .debug_tuple("Kubeconfig")
                .field(path)
                .field(context)
                .finish(),
            Self::Client(_) => f.write_str("Client(..)"),
        }
    }
}

/// The dial of one Kubernetes cluster: plug it into [`Watch`] (or call [`watch`]).
#[derive(Debug)]
pub struct K8sDial {
    source: ClientSource,
    settings: Arc<Settings>,
    /// The client of the current session, for the probe.
    probe: Arc<ProbeSlot>,
    /// The client of the last dial and what it was built from, to keep it
    /// while the configuration does not change.
    clients: Arc<client::Cache>,
    /// The objects the last session left, for a redial that resumes.
    carry: Arc<session::Carry>,
    /// When the last dial that listed every kind began.
    listed_at: Option<Instant>,
    dials: u64,
}

impl K8sDial {
    /// Checks `config` and builds the dial; nothing is contacted.
    pub fn new(config: &K8sConfig) -> Result<Self, ConfigError> {
        if let Some(context) = config.get_context() {
            client::check_context(config.get_kubeconfig(), context)?;
        }
        Self::from_source(
            config,
            ClientSource::Kubeconfig(
                config.get_kubeconfig().map(Into::into),
                config.get_context().map(Into::into),
            ),
        )
    }

    /// Like [`new`](Self::new), but every dial takes the client `connect`
    /// returns instead of resolving a kubeconfig
    /// ([`K8sConfig::kubeconfig`] and [`K8sConfig::context`] are not used): a client with the program's
    /// own middleware or credentials, or one over an apiserver in memory.
    /// Return a clone of one client to share its connections across dials;
    /// the client's connections must still belong to it (dropping the stream
    /// drops the session's clone).
    pub fn with_client(
        config: &K8sConfig,
        connect: impl FnMut() -> Client + Send + 'static,
    ) -> Result<Self, ConfigError> {
        Self::from_source(config, ClientSource::Client(Box::new(connect)))
    }

    /// How each kind lists (default [`InitialList::Paged`]).
    #[must_use]
    pub fn initial_list(mut self, how: InitialList) -> Self {
        if let Some(settings) = Arc::get_mut(&mut self.settings) {
            settings.initial_list = how;
        } else {
            let mut settings = Settings::clone(&self.settings);
            settings.initial_list = how;
            self.settings = Arc::new(settings);
        }
        self
    }

    fn from_source(config: &K8sConfig, source: ClientSource) -> Result<Self, ConfigError> {
        Ok(Self {
            source,
            settings: Arc::new(settings(config)?),
            probe: Arc::default(),
            clients: Arc::default(),
            carry: Arc::default(),
            listed_at: None,
            dials: 0,
        })
    }
}

/// What every dial of `config` works with, or the [`ConfigError`] of a
/// configuration that can never work; nothing is contacted.
fn settings(config: &K8sConfig) -> Result<Settings, ConfigError> {
    let mut kinds = config.get_kinds().to_vec();
    kinds.sort_unstable();
    kinds.dedup();
    if kinds.is_empty() {
        return Err(ConfigError::NoKinds);
    }
    if config.get_namespace() == Some("") {
        return Err(ConfigError::EmptyNamespace);
    }
    if config.get_max_line() == 0 {
        return Err(ConfigError::ZeroMaxLine);
    }
    let watch_timeout = watch_timeout(config.get_watch_config());
    Ok(Settings {
        namespace: config.get_namespace().map(Into::into),
        kinds: kinds.into(),
        label_selector: config.get_label_selector().map(Into::into),
        watch_timeout,
        initial_list: InitialList::default(),
        relist_every: config.get_watch_config().get_resync_every(),
        readiness: config.get_readiness(),
        rediscover_every: REDISCOVER_EVERY.min(Duration::from_secs(u64::from(watch_timeout))),
        max_line: config.get_max_line(),
        max_list_page: config.get_max_list_page(),
    })
}

/// How often a kind that is not served is looked for again (at most: the
/// watch timeout, when shorter).
const REDISCOVER_EVERY: Duration = Duration::from_secs(10);

/// Checks, on the cluster now, that every kind `config` names is served and
/// can be watched as asked: [`CheckError::Config`] with a
/// [`ConfigError::UnknownKind`] (and the nearest served names),
/// [`AmbiguousKind`](ConfigError::AmbiguousKind) or
/// [`UnsupportedKind`](ConfigError::UnsupportedKind) when not, and
/// [`CheckError::Dial`] when the cluster cannot be asked (then the watch,
/// which retries, is the way to wait for it). A watch does not need it: a
/// kind it cannot resolve is looked for again on every dial, and one that
/// is not served has no instances until it is. It is for a program that
/// would rather refuse a misspelt kind at start, as `lookout k8s` does
/// (exit 2).
pub async fn check(config: &K8sConfig) -> Result<(), CheckError> {
    let dial = K8sDial::new(config).map_err(CheckError::Config)?;
    let cache = client::Cache::default();
    let (client, _) = cache
        .connect(
            config.get_kubeconfig(),
            config.get_context(),
            dial.settings.max_page(),
        )
        .await
        .map_err(CheckError::Dial)?;
    check_kinds(&dial.settings, &client).await
}

/// [`check`] with a client the program makes (as [`K8sDial::with_client`]).
pub async fn check_with_client(config: &K8sConfig, client: &Client) -> Result<(), CheckError> {
    let settings = settings(config).map_err(CheckError::Config)?;
    check_kinds(&settings, client).await
}

async fn check_kinds(settings: &Settings, client: &Client) -> Result<(), CheckError> {
    for kind in settings.kinds.iter() {
        match resolve::resolve(client, kind, settings.readiness).await {
            Ok(resolve::Resolution::Served(_)) => {}
            Ok(resolve::Resolution::NotServed { nearest }) => {
                return Err(CheckError::Config(ConfigError::UnknownKind {
                    kind: kind.to_string(),
                    nearest,
                }));
            }
            Err(DialError::Kind(e)) => return Err(CheckError::Config(e)),
            Err(e) => return Err(CheckError::Dial(e)),
        }
    }
    Ok(())
}

/// Watches the cluster `config` names. Synchronous: the configuration is
/// resolved on each dial, when the stream is polled.
pub fn watch(config: K8sConfig) -> Result<Watch<K8sDial>, ConfigError> {
    let dial = K8sDial::new(&config)?;
    Ok(Watch::new(dial, config.into_watch_config()))
}

/// Watches with the clients `connect` makes, one call per dial (see
/// [`K8sDial::with_client`]).
pub fn watch_with_client(
    config: K8sConfig,
    connect: impl FnMut() -> Client + Send + 'static,
) -> Result<Watch<K8sDial>, ConfigError> {
    let dial = K8sDial::with_client(&config, connect)?;
    Ok(Watch::new(dial, config.into_watch_config()))
}

/// The server-side timeout of a watch request: the core's stall bound, within
/// what the apiserver accepts.
fn watch_timeout(config: &WatchConfig) -> u32 {
    let bound = config
        .get_probe_after()
        .saturating_add(config.get_probe_timeout());
    let secs = bound.max(Duration::from_secs(1)).as_secs().min(290);
    u32::try_from(secs).unwrap_or(290)
}

impl Dial for K8sDial {
    /// The newest `resourceVersion` of each kind: a redial watches from it,
    /// with no list, while the apiserver still serves it.
    type Cursor = K8sCursor;

    fn dial(&mut self, resume: Option<&K8sCursor>) -> DialFuture<K8sCursor> {
        self.dials += 1;
        let now = Instant::now();
        let relist_due = self.settings.relist_every.is_some_and(|every| {
            self.listed_at
                .is_none_or(|t| now.duration_since(t) >= every)
        });
        let cursor = if relist_due { None } else { resume.cloned() };
        if cursor.is_none() {
            self.listed_at = Some(now);
        }
        let client = match &mut self.source {
            ClientSource::Kubeconfig(path, context) => Err((path.clone(), context.clone())),
            ClientSource::Client(connect) => Ok(connect()),
        };
        let settings = Arc::clone(&self.settings);
        let clients = Arc::clone(&self.clients);
        let carry = Arc::clone(&self.carry);
        let lease = ProbeLease {
            slot: Arc::clone(&self.probe),
            dial: self.dials,
        };
        Box::pin(async move {
            let (client, cluster) = match client {
                // The program's client: one cluster, the program says.
                Ok(given) => (given, String::new()),
                Err((kubeconfig, context)) => {
                    clients
                        .connect(
                            kubeconfig.as_deref(),
                            context.as_deref(),
                            settings.max_page(),
                        )
                        .await?
                }
            };
            lease.fill(client.clone());
            let stores = carry.take(&cluster);
            let start = session::Start {
                cursor,
                stores,
                carry,
                cluster,
            };
            let mut session = session::Merge::new(&settings, &client, start, lease);
            std::future::poll_fn(|cx| session.poll_synced(cx)).await?;
            Ok(Box::pin(session) as Session<K8sCursor>)
        })
    }

    fn probe(&mut self) -> Option<ProbeFuture> {
        let client = self.probe.current()?;
        Some(Box::pin(async move {
            // kube's `apiserver_version` reads the answer whole: read to a bound.
            type Info = k8s_openapi::apimachinery::pkg::version::Info;
            match fetch::get::<Info>(&client, "/version", fetch::ERROR_KEPT).await {
                Ok(fetch::Answer::Read(_)) => Ok(()),
                Ok(fetch::Answer::TooLarge) => Err(DialError::Probe(kube::Error::Service(
                    format!("the answer exceeds {} bytes", fetch::ERROR_KEPT).into(),
                ))
                .into()),
                Err(e) => Err(DialError::Probe(e).into()),
            }
        }))
    }
}

#[cfg(test)]
mod tests;

// Not under `tests/`: a packaged crate holds no such folder, and its unit
// tests must still build from the package.
#[cfg(test)]
mod bounds_tests;

#[cfg(test)]
mod why_tests;
