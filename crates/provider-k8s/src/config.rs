//! What to watch, and how ([`K8sConfig`], [`InitialList`]).

use std::path::{Path, PathBuf};

use lookout_core::WatchConfig;

use crate::kind::{Kind, KindRef};

/// What to watch, and how: [`K8sConfig::default`] (every namespace, every
/// kind, no selector, [`K8sConfig::default_watch`]), then the builder
/// methods.
///
/// ```
/// use lookout_k8s::{K8sConfig, Kind};
///
/// let config = K8sConfig::default()
///     .namespace("shop")
///     .kinds([Kind::Deployment])
///     .label_selector("app.kubernetes.io/part-of=shop")
///     .readiness(true);
/// assert_eq!(config.get_namespace(), Some("shop"));
/// assert_eq!(config.get_kinds(), [Kind::Deployment.into()]);
/// ```
///
/// Each option is set by a method of its name taking `self`, and read back
/// by `get_` and its name (as clap's builders): a new option is a new
/// method.
#[derive(Clone, Debug)]
pub struct K8sConfig {
    kubeconfig: Option<PathBuf>,
    context: Option<String>,
    namespace: Option<String>,
    kinds: Vec<KindRef>,
    label_selector: Option<String>,
    watch: WatchConfig,
    readiness: bool,
    max_line: usize,
    max_list_page: usize,
}

impl Default for K8sConfig {
    fn default() -> Self {
        Self {
            kubeconfig: None,
            context: None,
            namespace: None,
            kinds: vec![Kind::Deployment.into(), Kind::StatefulSet.into()],
            label_selector: None,
            watch: Self::default_watch(),
            readiness: false,
            max_line: Self::DEFAULT_MAX_LINE,
            max_list_page: Self::DEFAULT_MAX_LIST_PAGE,
        }
    }
}

impl K8sConfig {
    /// The default of [`max_line`](Self::max_line): 16 MiB, ten times what
    /// etcd stores of one object by default (`--max-request-bytes`, 1.5 MiB).
    pub const DEFAULT_MAX_LINE: usize = 16 << 20;

    /// The default of [`max_list_page`](Self::max_list_page): 64 MiB (a page
    /// of 500 objects of 128 KiB each).
    pub const DEFAULT_MAX_LIST_PAGE: usize = 64 << 20;

    /// An explicit kubeconfig file. Default none: the configuration is
    /// inferred as kube does it (`KUBECONFIG`, `~/.kube/config`,
    /// in-cluster). Not used by [`K8sDial::with_client`](crate::K8sDial::with_client).
    #[must_use]
    pub fn kubeconfig(mut self, path: impl Into<PathBuf>) -> Self {
        self.kubeconfig = Some(path.into());
        self
    }

    /// The kubeconfig context to use (as `kubectl --context`). Default
    /// none: the kubeconfig's `current-context` (or in-cluster). A context
    /// that a kubeconfig that can be read does not have is a
    /// [`ConfigError`](crate::ConfigError); a kubeconfig that cannot be read
    /// (yet) is each dial's to report.
    #[must_use]
    pub fn context(mut self, name: impl Into<String>) -> Self {
        self.context = Some(name.into());
        self
    }

    /// Watch this namespace only. Default: every namespace. An empty name
    /// is a [`ConfigError::EmptyNamespace`](crate::ConfigError::EmptyNamespace).
    #[must_use]
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = Some(namespace.into());
        self
    }

    /// The kinds to watch, replacing the default (`Deployment` and
    /// `StatefulSet`): built-in [`Kind`]s, or any kind named by a
    /// [`KindRef`] (`"postgresql.cnpg.io/v1/Cluster".parse()?`,
    /// `KindRef::parse("clusters")?`), resolved through API discovery on
    /// each dial. Duplicates are ignored; none at all is a
    /// [`ConfigError::NoKinds`](crate::ConfigError::NoKinds).
    #[must_use]
    pub fn kinds<K: Into<KindRef>>(mut self, kinds: impl IntoIterator<Item = K>) -> Self {
        self.kinds = kinds.into_iter().map(Into::into).collect();
        self
    }

    /// A label selector (`app=web,tier!=cache`), applied by the apiserver.
    /// Default none: every object.
    #[must_use]
    pub fn label_selector(mut self, selector: impl Into<String>) -> Self {
        self.label_selector = Some(selector.into());
        self
    }

    /// The core's knobs: reconnect policy, timeouts, relists. Default:
    /// [`K8sConfig::default_watch`] (no periodic or consumer-lag relist).
    /// With [`WatchConfig::resync_every`] set, a redial lists every kind
    /// again when the last full list is at least that old, and resumes the
    /// watches otherwise.
    #[must_use]
    pub fn watch_config(mut self, watch: WatchConfig) -> Self {
        self.watch = watch;
        self
    }

    /// Also report whether each workload can serve
    /// ([`EventKind::Ready`](lookout_core::EventKind::Ready) /
    /// [`Unready`](lookout_core::EventKind::Unready)), from its replica
    /// counts and observed generation (the rule: the crate's
    /// [Readiness](crate#readiness) section). Default off: every event's
    /// `readiness` is `None`.
    #[must_use]
    pub fn readiness(mut self, on: bool) -> Self {
        self.readiness = on;
        self
    }

    /// The longest line of a watch's body read, in bytes: one event, an
    /// object with its `ADDED`/`MODIFIED`/`DELETED` around it. Default
    /// [`DEFAULT_MAX_LINE`](Self::DEFAULT_MAX_LINE) (16 MiB). A longer line
    /// (a misbehaving apiserver or proxy, a man in the middle) is never
    /// held whole: the rest of it is skipped as it arrives, and the session
    /// ends with [`DialError::LineTooLong`](crate::DialError::LineTooLong)
    /// (a `Disconnected` status that says so; the core redials with its
    /// backoff and the watch resumes from the last version). Memory per
    /// watched kind is then at most this much for the line, plus what one
    /// object decodes to. 0 is refused when the watch is made
    /// ([`ConfigError::ZeroMaxLine`](crate::ConfigError::ZeroMaxLine)).
    #[must_use]
    pub fn max_line(mut self, bytes: usize) -> Self {
        self.max_line = bytes;
        self
    }

    /// The longest page of a list read, in bytes (it is never less than
    /// [`max_line`](Self::max_line): an object that fits a watch line fits
    /// a page). Default [`DEFAULT_MAX_LIST_PAGE`](Self::DEFAULT_MAX_LIST_PAGE)
    /// (64 MiB). Lists are paged at 500 objects; a page longer than this is
    /// not read further but asked again with half as many objects, down to
    /// one: so objects this large or smaller always list, with pages of
    /// fewer of them. One object longer than this (or an apiserver that
    /// ignores the page size) ends the session with
    /// [`DialError::PageTooLarge`](crate::DialError::PageTooLarge).
    /// [`InitialList::Streaming`] lists with a watch, one line per object:
    /// [`max_line`](Self::max_line) bounds it.
    #[must_use]
    pub fn max_list_page(mut self, bytes: usize) -> Self {
        self.max_list_page = bytes;
        self
    }

    /// The explicit kubeconfig file ([`kubeconfig`](Self::kubeconfig)); `None`: inferred.
    pub fn get_kubeconfig(&self) -> Option<&Path> {
        self.kubeconfig.as_deref()
    }

    /// The kubeconfig context ([`context`](Self::context)); `None`: the current one.
    pub fn get_context(&self) -> Option<&str> {
        self.context.as_deref()
    }

    /// The namespace watched ([`namespace`](Self::namespace)); `None`: every namespace.
    pub fn get_namespace(&self) -> Option<&str> {
        self.namespace.as_deref()
    }

    /// The kinds watched ([`kinds`](Self::kinds)), as given.
    pub fn get_kinds(&self) -> &[KindRef] {
        &self.kinds
    }

    /// The label selector ([`label_selector`](Self::label_selector)); `None`: none.
    pub fn get_label_selector(&self) -> Option<&str> {
        self.label_selector.as_deref()
    }

    /// The core's knobs ([`watch_config`](Self::watch_config)).
    pub fn get_watch_config(&self) -> &WatchConfig {
        &self.watch
    }

    /// Whether readiness is told ([`readiness`](Self::readiness)).
    pub fn get_readiness(&self) -> bool {
        self.readiness
    }

    /// The longest watch line read, in bytes ([`max_line`](Self::max_line)).
    pub fn get_max_line(&self) -> usize {
        self.max_line
    }

    /// The longest list page read, in bytes, as set
    /// ([`max_list_page`](Self::max_list_page)).
    pub fn get_max_list_page(&self) -> usize {
        self.max_list_page
    }

    /// The configuration, taken apart for the dial: its core knobs.
    pub(crate) fn into_watch_config(self) -> WatchConfig {
        self.watch
    }

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
