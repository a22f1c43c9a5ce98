//! The Kubernetes provider of lookout: `Deployment`s and `StatefulSet`s as one
//! resilient, leak-free stream of instance events.
//!
//! ```no_run
//! use lookout_k8s::{K8sConfig, Kind};
//! use tokio_stream::StreamExt;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), lookout_k8s::ConfigError> {
//! let config = K8sConfig {
//!     namespace: Some("shop".into()),
//!     kinds: vec![Kind::Deployment, Kind::StatefulSet],
//!     label_selector: Some("app.kubernetes.io/part-of=shop".into()),
//!     ..K8sConfig::default()
//! };
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
//! A runnable example: `cargo run -p lookout-k8s --example k8s_watch -- NAMESPACE`
//! ([`examples/k8s_watch.rs`](https://github.com/lookout-rs/lookout/blob/main/crates/provider-k8s/examples/k8s_watch.rs)).
//!
//! # Mapping
//!
//! | Kubernetes | lookout |
//! |---|---|
//! | a `Deployment` / `StatefulSet` | an instance, id `deployment/NAMESPACE/NAME` / `statefulset/NAMESPACE/NAME` |
//! | `metadata.uid` | [`Listed::uid`](lookout_core::Listed::uid): a new uid under the same name is `Removed` then `Created` |
//! | `metadata.labels` | the instance's labels |
//! | `spec.replicas` | running when it is not 0 (unset counts as 1, as Kubernetes defaults it) |
//! | the watcher's `Init`, `InitApply`…, `InitDone` | one snapshot (`ResyncBegin`, `Listed`…, `ResyncDone`) holding **every** watched kind |
//! | `Apply` (ADDED / MODIFIED) | a change: `Started` when running, `Stopped` when not (the core adds `Created` for an unknown object and swallows what changes nothing, such as a label-only edit) |
//! | `Delete` (DELETED) | `Removed` |
//!
//! Live events carry the local time at which the watch event arrived: a
//! Deployment has no timestamp of its last scaling.
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
//! - **One snapshot holds all watched kinds.** A dial completes when every
//!   kind has been listed; the lists form one snapshot. When one kind relists
//!   later (a watch ended with `410 Gone`: etcd compacted its `resourceVersion`
//!   away), the snapshot
//!   again holds every kind: the other kinds' last known objects are listed
//!   with it, so the core's diff never takes them for removed. Objects of the
//!   relisted kind that vanished meanwhile are reported `Removed` (the watcher
//!   sends no `Delete` for them) and missed scalings `Started`/`Stopped`,
//!   [`Origin::Resync`](lookout_core::Origin::Resync).
//! - **The core's reconnect policy is the only one.** A `410 Gone` is not a
//!   failure: the watcher relists at once, inside the session. Any other
//!   watcher error (list or watch refused, connection lost, an apiserver
//!   error event) ends the session: `Disconnected`, the core's backoff, a
//!   redial with a fresh list. kube's own backoff is not used.
//! - **A frozen apiserver is noticed** within the core's stall bound
//!   ([`WatchConfig::probe_after`](lookout_core::WatchConfig::probe_after) +
//!   [`probe_timeout`](lookout_core::WatchConfig::probe_timeout)): a silent
//!   session is probed with `GET /version` on the session's own client. Each
//!   watch request also ends on the server after about that long and is resumed
//!   from its `resourceVersion` (kube's idle timeout adds 5 s), so a watch
//!   connection that died silently is replaced too.
//! - **An object that cannot be read does not end the session**: a watch
//!   event that does not decode, an object without a name or namespace, an
//!   unreadable `spec.replicas` is logged and skipped. (A list response that is
//!   no JSON list of objects fails as a whole: it ends the session.)
//! - **Memory is O(objects)**: a session keeps each object's id, uid, labels
//!   and running state, to rebuild the snapshot of every kind.
//! - **Dropping the stream closes every connection**: the client, its
//!   connection pool and the watches belong to the session. This crate spawns
//!   nothing; the tasks kube's client runs on the caller's runtime for its
//!   connections end with the session.
//!
//! TLS is rustls with *ring* (no OpenSSL). If no rustls `CryptoProvider` is
//! installed in the process, a dial installs *ring*'s.

#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
mod session;

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use kube::Client;
use kube::config::KubeConfigOptions;
use kube::core::ApiResource;
use lookout_core::{Dial, DialFuture, ProbeFuture, Session, Watch, WatchConfig};

/// A kind of Kubernetes workload that lookout watches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// `apps/v1` `Deployment`.
    Deployment,
    /// `apps/v1` `StatefulSet`.
    StatefulSet,
}

impl Kind {
    /// Every kind, in id order.
    pub const ALL: [Kind; 2] = [Kind::Deployment, Kind::StatefulSet];

    /// The lowercase name, as it starts an instance id: `deployment`, `statefulset`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Deployment => "deployment",
            Self::StatefulSet => "statefulset",
        }
    }

    fn api_resource(self) -> ApiResource {
        match self {
            Self::Deployment => ApiResource::erase::<Deployment>(&()),
            Self::StatefulSet => ApiResource::erase::<StatefulSet>(&()),
        }
    }
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What to watch, and how.
#[derive(Clone, Debug)]
pub struct K8sConfig {
    /// An explicit kubeconfig file; `None` infers the configuration as kube
    /// does (`KUBECONFIG`, `~/.kube/config`, in-cluster).
    pub kubeconfig: Option<PathBuf>,
    /// Watch this namespace only; `None` watches all namespaces.
    pub namespace: Option<String>,
    /// The kinds to watch (default: both). Duplicates are ignored.
    pub kinds: Vec<Kind>,
    /// A label selector (`app=web,tier!=cache`), applied by the apiserver.
    pub label_selector: Option<String>,
    /// The core's knobs: reconnect policy, timeouts, periodic resync.
    pub watch: WatchConfig,
}

impl Default for K8sConfig {
    fn default() -> Self {
        Self {
            kubeconfig: None,
            namespace: None,
            kinds: Kind::ALL.to_vec(),
            label_selector: None,
            watch: WatchConfig::default(),
        }
    }
}

/// A [`K8sConfig`] that can never work.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// `kinds` is empty: there would be nothing to watch.
    #[error("no kind to watch: K8sConfig::kinds is empty")]
    NoKinds,
    /// `namespace` is `Some("")`; use `None` for all namespaces.
    #[error("the namespace is empty; use None to watch all namespaces")]
    EmptyNamespace,
}

/// Why a dial, a session or a probe failed; reported inside the core's
/// [`Error`](lookout_core::Error) of a `Disconnected` status.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DialError {
    /// The explicit kubeconfig could not be read or used.
    #[error("cannot use kubeconfig {path}: {source}", path = path.display())]
    Kubeconfig {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: kube::config::KubeconfigError,
    },
    /// No usable configuration was found (`KUBECONFIG`, `~/.kube/config`, in-cluster).
    #[error("cannot infer a cluster configuration (KUBECONFIG, ~/.kube/config, in-cluster): {0}")]
    Infer(#[source] kube::config::InferConfigError),
    /// The client could not be built from the configuration (TLS, auth).
    #[error("cannot build a client for {cluster}: {source}")]
    Client {
        /// The apiserver's URL.
        cluster: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// Listing or watching one kind failed.
    #[error("watching {kind}s failed: {source}")]
    Watch {
        /// Which kind.
        kind: Kind,
        /// kube's error.
        #[source]
        source: kube::runtime::watcher::Error,
    },
    /// The liveness probe (`GET /version`) failed.
    #[error("the apiserver did not answer GET /version: {0}")]
    Probe(#[source] kube::Error),
}

/// What every dial needs, shared by the dial and its sessions.
#[derive(Debug)]
struct Settings {
    kubeconfig: Option<PathBuf>,
    namespace: Option<String>,
    kinds: Vec<Kind>,
    label_selector: Option<String>,
    /// Server-side timeout of one watch request, in seconds.
    watch_timeout: u32,
}

/// The dial of one Kubernetes cluster: plug it into [`Watch`] (or call [`watch`]).
#[derive(Debug)]
pub struct K8sDial {
    settings: Arc<Settings>,
    /// The client of the current session, for the probe.
    probe: Arc<ProbeSlot>,
    dials: u64,
}

impl K8sDial {
    /// Checks `config` and builds the dial; nothing is contacted.
    pub fn new(config: &K8sConfig) -> Result<Self, ConfigError> {
        let mut kinds = config.kinds.clone();
        kinds.sort_unstable();
        kinds.dedup();
        if kinds.is_empty() {
            return Err(ConfigError::NoKinds);
        }
        if config.namespace.as_deref() == Some("") {
            return Err(ConfigError::EmptyNamespace);
        }
        Ok(Self {
            settings: Arc::new(Settings {
                kubeconfig: config.kubeconfig.clone(),
                namespace: config.namespace.clone(),
                kinds,
                label_selector: config.label_selector.clone(),
                watch_timeout: watch_timeout(&config.watch),
            }),
            probe: Arc::default(),
            dials: 0,
        })
    }
}

/// Watches the cluster `config` names. Synchronous: the configuration is
/// resolved on each dial, when the stream is polled.
pub fn watch(config: K8sConfig) -> Result<Watch<K8sDial>, ConfigError> {
    let dial = K8sDial::new(&config)?;
    Ok(Watch::new(dial, config.watch))
}

/// The server-side timeout of a watch request: the core's stall bound, within
/// what the apiserver accepts.
fn watch_timeout(config: &WatchConfig) -> u32 {
    let bound = config.probe_after.saturating_add(config.probe_timeout);
    let secs = bound.max(Duration::from_secs(1)).as_secs().min(290);
    u32::try_from(secs).unwrap_or(290)
}

impl Dial for K8sDial {
    /// The watcher keeps its own `resourceVersion`s within a session; every
    /// dial starts with a fresh list.
    type Cursor = ();

    fn dial(&mut self, _resume: Option<&()>) -> DialFuture<()> {
        self.dials += 1;
        let settings = Arc::clone(&self.settings);
        let lease = ProbeLease {
            slot: Arc::clone(&self.probe),
            dial: self.dials,
        };
        Box::pin(async move {
            let client = connect(&settings).await?;
            lease.fill(client.clone());
            let mut session = session::Merge::new(&settings, &client, lease);
            std::future::poll_fn(|cx| session.poll_synced(cx)).await?;
            Ok(Box::pin(session) as Session<()>)
        })
    }

    fn probe(&mut self) -> Option<ProbeFuture> {
        let client = self.probe.current()?;
        Some(Box::pin(async move {
            client
                .apiserver_version()
                .await
                .map(drop)
                .map_err(|e| DialError::Probe(e).into())
        }))
    }
}

/// Resolves the configuration anew and builds a client.
async fn connect(settings: &Settings) -> Result<Client, DialError> {
    let config = match &settings.kubeconfig {
        Some(path) => {
            let to_err = |source| DialError::Kubeconfig {
                path: path.clone(),
                source,
            };
            let kubeconfig = kube::config::Kubeconfig::read_from(path).map_err(to_err)?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                .await
                .map_err(to_err)?
        }
        None => kube::Config::infer().await.map_err(DialError::Infer)?,
    };
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Err only when another thread installed one meanwhile: fine either way.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
    let cluster = config.cluster_url.to_string();
    tracing::debug!(%cluster, "connecting");
    Client::try_from(config).map_err(|source| DialError::Client { cluster, source })
}

/// The client of the live session, if any, for the probe.
#[derive(Default)]
struct ProbeSlot(Mutex<Option<(u64, Client)>>);

impl std::fmt::Debug for ProbeSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let slot = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        f.debug_struct("ProbeSlot")
            .field("session", &slot.as_ref().map(|(dial, _)| *dial))
            .finish()
    }
}

impl ProbeSlot {
    fn current(&self) -> Option<Client> {
        let slot = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        slot.as_ref().map(|(_, client)| client.clone())
    }
}

/// A session's claim on the probe slot: empties it when the session (or its
/// dial) is dropped, so no client outlives its session.
#[derive(Debug)]
struct ProbeLease {
    slot: Arc<ProbeSlot>,
    dial: u64,
}

impl ProbeLease {
    fn fill(&self, client: Client) {
        let mut slot = self.slot.0.lock().unwrap_or_else(PoisonError::into_inner);
        *slot = Some((self.dial, client));
    }
}

impl Drop for ProbeLease {
    fn drop(&mut self) {
        let mut slot = self.slot.0.lock().unwrap_or_else(PoisonError::into_inner);
        if slot.as_ref().is_some_and(|(dial, _)| *dial == self.dial) {
            *slot = None;
        }
    }
}

#[cfg(test)]
mod tests;
