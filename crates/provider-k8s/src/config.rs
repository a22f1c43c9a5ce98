//! What to watch, and how ([`K8sConfig`], [`InitialList`]).

use std::path::PathBuf;

use lookout_core::WatchConfig;

use crate::kind::Kind;

/// What to watch, and how.
#[derive(Clone, Debug)]
pub struct K8sConfig {
    /// An explicit kubeconfig file; `None` infers the configuration as kube
    /// does (`KUBECONFIG`, `~/.kube/config`, in-cluster).
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use (as `kubectl --context`); `None`: the
    /// kubeconfig's `current-context` (or in-cluster). A context that a
    /// kubeconfig that can be read does not have is a [`ConfigError`](crate::ConfigError); a
    /// kubeconfig that cannot be read (yet) is each dial's to report.
    pub context: Option<String>,
    /// Watch this namespace only; `None` watches all namespaces.
    pub namespace: Option<String>,
    /// The kinds to watch (default: both). Duplicates are ignored.
    pub kinds: Vec<Kind>,
    /// A label selector (`app=web,tier!=cache`), applied by the apiserver.
    pub label_selector: Option<String>,
    /// The core's knobs: reconnect policy, timeouts, relists. Default:
    /// [`K8sConfig::default_watch`] (no periodic or consumer-lag relist).
    /// With [`WatchConfig::resync_every`] set, a redial lists every kind
    /// again when the last full list is at least that old, and resumes the
    /// watches otherwise.
    pub watch: WatchConfig,
    /// Also report whether each workload can serve
    /// ([`EventKind::Ready`](lookout_core::EventKind::Ready) /
    /// [`Unready`](lookout_core::EventKind::Unready)), from its replica
    /// counts and observed generation (the rule: the crate's
    /// [Readiness](crate#readiness) section). Default off: every event's
    /// `readiness` is `None`.
    pub readiness: bool,
}

impl Default for K8sConfig {
    fn default() -> Self {
        Self {
            kubeconfig: None,
            context: None,
            namespace: None,
            kinds: Kind::ALL.to_vec(),
            label_selector: None,
            watch: Self::default_watch(),
            readiness: false,
        }
    }
}

impl K8sConfig {
    /// The core's defaults for Kubernetes: [`WatchConfig::default`] without
    /// the periodic relist ([`resync_every`](WatchConfig::resync_every)) and
    /// without the relist for a lagging consumer
    /// ([`resync_after_lag`](WatchConfig::resync_after_lag)).
    ///
    /// Docker keeps both because dockerd may drop events without a sign
    /// (a subscriber too far behind, a daemon restart), so only a list can
    /// tell what was missed. The Kubernetes watch protocol drops nothing: a
    /// watch is resumed from the `resourceVersion` it reached and delivers
    /// every change after it, in order; when the apiserver no longer has that
    /// version it says so (`410 Gone`) and the kind relists. A slow consumer
    /// loses nothing either: the apiserver buffers for it or closes its
    /// watch, which is then resumed. A periodic full list would cost the
    /// apiserver a LIST of every watched object per period and tell nothing
    /// new; set `resync_every` to have one anyway.
    pub fn default_watch() -> WatchConfig {
        WatchConfig::default()
            .resync_every(None)
            .resync_after_lag(None)
    }
}

/// How a kind's first list (and a relist after `410 Gone`) is made.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum InitialList {
    /// Paged `LIST` requests (500 objects a page, as client-go and
    /// kube-runtime page), then a watch from the list's version. Every
    /// apiserver supports it.
    #[default]
    Paged,
    /// A streaming list: one watch with `sendInitialEvents=true` that sends
    /// the current objects as events, ends them with a bookmark, and goes on
    /// watching (Kubernetes' `WatchList`, beta and on by default since
    /// 1.32). The apiserver serves it from its watch cache one object at a
    /// time instead of building whole pages; an apiserver without it refuses
    /// the request (a `Disconnected` status, retried).
    Streaming,
}
