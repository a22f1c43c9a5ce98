//! One session: a kube watcher per kind, merged into one stream of
//! observations whose snapshots always hold every kind.

use std::collections::{HashMap, VecDeque};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::SystemTime;

use kube::api::{Api, DynamicObject};
use kube::runtime::watcher::{self, Event};
use lookout_core::{BoxError, Change, EventKind, InstanceId, Listed, Observation};
use tokio_stream::{Stream, StreamMap};

use crate::{DialError, Kind, ProbeLease, Settings};

type Events = Pin<Box<dyn Stream<Item = watcher::Result<Event<DynamicObject>>> + Send>>;

/// The objects of one kind, as last listed and watched.
#[derive(Default)]
struct KindState {
    /// The current objects; `None` until the kind's first list completes.
    store: Option<HashMap<InstanceId, Listed>>,
    /// A list in progress (between `Init` and `InitDone`).
    relist: Option<HashMap<InstanceId, Listed>>,
}

/// The session stream: watchers merged, snapshots combined.
pub(crate) struct Merge {
    watchers: StreamMap<Kind, Events>,
    kinds: HashMap<Kind, KindState>,
    out: VecDeque<Observation<()>>,
    /// Every kind has been listed: `Apply`/`Delete` are now live changes.
    synced: bool,
    /// The session failed and yielded its error: it ends.
    done: bool,
    // Declared last: the probe keeps the client only while the session lives.
    _lease: ProbeLease,
}

impl Merge {
    pub(crate) fn new(settings: &Settings, client: &kube::Client, lease: ProbeLease) -> Self {
        let mut config = watcher::Config::default().timeout(settings.watch_timeout);
        if let Some(selector) = &settings.label_selector {
            config = config.labels(selector);
        }
        let mut watchers = StreamMap::with_capacity(settings.kinds.len());
        let mut kinds = HashMap::with_capacity(settings.kinds.len());
        for &kind in &settings.kinds {
            let resource = kind.api_resource();
            let api: Api<DynamicObject> = match &settings.namespace {
                Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
                None => Api::all_with(client.clone(), &resource),
            };
            // No backoff: an error ends the session, the core's policy retries.
            let events: Events = Box::pin(watcher::watcher(api, config.clone()));
            watchers.insert(kind, events);
            kinds.insert(kind, KindState::default());
        }
        tracing::debug!(
            kinds = ?settings.kinds,
            namespace = settings.namespace.as_deref().unwrap_or("*"),
            selector = settings.label_selector.as_deref().unwrap_or(""),
            watch_timeout_s = settings.watch_timeout,
            "watching"
        );
        Self {
            watchers,
            kinds,
            out: VecDeque::new(),
            synced: false,
            done: false,
            _lease: lease,
        }
    }

    /// Drives the watchers until the first snapshot (every kind listed) is
    /// queued: the dial completes then, so the dial timeout bounds the lists
    /// and a cluster that cannot list is a dial error.
    pub(crate) fn poll_synced(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        while !self.synced {
            match ready!(Pin::new(&mut self.watchers).poll_next(cx)) {
                Some((kind, event)) => self.handle(kind, event)?,
                None => return Poll::Ready(Err("no kind to watch".into())),
            }
        }
        Poll::Ready(Ok(()))
    }

    fn handle(
        &mut self,
        kind: Kind,
        event: watcher::Result<Event<DynamicObject>>,
    ) -> Result<(), DialError> {
        let state = self.kinds.entry(kind).or_default();
        match event {
            Ok(Event::Init) => {
                tracing::debug!(%kind, "list begins");
                state.relist = Some(HashMap::new());
            }
            Ok(Event::InitApply(obj)) => match listed(kind, &obj) {
                Some(l) => {
                    state
                        .relist
                        .get_or_insert_with(HashMap::new)
                        .insert(l.id.clone(), l);
                }
                None => self.out.push_back(Observation::Progress(None)),
            },
            Ok(Event::InitDone) => {
                let objects = state.relist.take().unwrap_or_default();
                tracing::debug!(%kind, objects = objects.len(), "list done");
                state.store = Some(objects);
                if self.kinds.values().all(|s| s.store.is_some()) {
                    self.push_snapshot();
                }
            }
            Ok(Event::Apply(obj)) => match listed(kind, &obj) {
                Some(l) => {
                    if self.synced {
                        self.out.push_back(Observation::Change(Change {
                            id: l.id.clone(),
                            kind: if l.running {
                                EventKind::Started
                            } else {
                                EventKind::Stopped
                            },
                            uid: l.uid.clone(),
                            labels: Some(Arc::new(l.labels.clone())),
                            at: SystemTime::now(),
                            cursor: None,
                        }));
                    }
                    state
                        .store
                        .get_or_insert_with(HashMap::new)
                        .insert(l.id.clone(), l);
                }
                None => self.out.push_back(Observation::Progress(None)),
            },
            Ok(Event::Delete(obj)) => match identify(kind, &obj) {
                Some((id, uid)) => {
                    if let Some(store) = &mut state.store {
                        store.remove(&id);
                    }
                    if self.synced {
                        self.out.push_back(Observation::Change(Change {
                            id,
                            kind: EventKind::Removed,
                            uid,
                            labels: None,
                            at: SystemTime::now(),
                            cursor: None,
                        }));
                    }
                }
                None => self.out.push_back(Observation::Progress(None)),
            },
            // The resumed watch's resourceVersion was compacted away: the
            // watcher relists (`Init`…) on its next poll. Not a failure.
            Err(watcher::Error::WatchError(status)) if status.code == 410 => {
                tracing::debug!(%kind, reason = %status.message, "watch expired (410 Gone): relisting");
                self.out.push_back(Observation::Progress(None));
            }
            // One event that does not decode: the watch stream goes on. (kube
            // reads a line that is no event but some JSON object as a Status;
            // one with no code is such a line, not an apiserver error.)
            Err(watcher::Error::WatchFailed(kube::Error::SerdeError(e))) => {
                tracing::warn!(%kind, error = %e, "undecodable watch event skipped");
                self.out.push_back(Observation::Progress(None));
            }
            Err(watcher::Error::WatchFailed(kube::Error::Api(status))) if status.code == 0 => {
                tracing::warn!(%kind, "undecodable watch event skipped (not an event)");
                self.out.push_back(Observation::Progress(None));
            }
            // An `ERROR` frame whose object is no apiserver Status (no code):
            // the watch stream goes on.
            Err(watcher::Error::WatchError(status)) if status.code == 0 => {
                tracing::warn!(%kind, "undecodable watch error frame skipped (not a Status)");
                self.out.push_back(Observation::Progress(None));
            }
            // A line that is not UTF-8: kube's line reader ends that watch
            // request; the watcher watches again from its resourceVersion.
            Err(watcher::Error::WatchFailed(kube::Error::ReadEvents(e)))
                if e.kind() == std::io::ErrorKind::InvalidData =>
            {
                tracing::warn!(%kind, error = %e, "undecodable watch line: watching again from the last resourceVersion");
                self.out.push_back(Observation::Progress(None));
            }
            // An object without `metadata.resourceVersion`: the watcher
            // cannot resume after it and relists (`Init`…) on its next poll,
            // in this session; the relist's diff reports what it finds.
            Err(watcher::Error::NoResourceVersion) => {
                tracing::warn!(%kind, "watch event without a resourceVersion: relisting");
                self.out.push_back(Observation::Progress(None));
            }
            Err(source) => return Err(DialError::Watch { kind, source }),
        }
        Ok(())
    }

    /// Queues one snapshot of every kind's current objects.
    fn push_snapshot(&mut self) {
        self.out.push_back(Observation::ResyncBegin);
        for state in self.kinds.values() {
            for l in state.store.iter().flat_map(HashMap::values) {
                self.out.push_back(Observation::Listed(l.clone()));
            }
        }
        self.out.push_back(Observation::ResyncDone);
        self.synced = true;
    }
}

impl Stream for Merge {
    type Item = Result<Observation<()>, BoxError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            if let Some(obs) = this.out.pop_front() {
                return Poll::Ready(Some(Ok(obs)));
            }
            if this.done {
                return Poll::Ready(None);
            }
            match ready!(Pin::new(&mut this.watchers).poll_next(cx)) {
                Some((kind, event)) => {
                    if let Err(e) = this.handle(kind, event) {
                        this.done = true;
                        return Poll::Ready(Some(Err(e.into())));
                    }
                }
                // Watchers never end; if they did, the session would.
                None => this.done = true,
            }
        }
    }
}

/// The instance id and uid of an object; `None` (logged) when it has no
/// name or namespace.
fn identify(kind: Kind, obj: &DynamicObject) -> Option<(InstanceId, Option<Arc<str>>)> {
    let meta = &obj.metadata;
    let (Some(ns), Some(name)) = (meta.namespace.as_deref(), meta.name.as_deref()) else {
        tracing::warn!(%kind, name = ?meta.name, namespace = ?meta.namespace, "object without name or namespace skipped");
        return None;
    };
    let id = InstanceId::new(format!("{kind}/{ns}/{name}"));
    Some((id, meta.uid.as_deref().map(Arc::from)))
}

/// An object as the core sees it; `None` (logged) when it cannot be read.
pub(crate) fn listed(kind: Kind, obj: &DynamicObject) -> Option<Listed> {
    let (id, uid) = identify(kind, obj)?;
    let replicas = obj.data.get("spec").and_then(|spec| spec.get("replicas"));
    let running = match replicas {
        // Unset: the apiserver defaults it to 1.
        None | Some(serde_json::Value::Null) => true,
        Some(n) => {
            let Some(n) = n.as_i64() else {
                tracing::warn!(%id, replicas = %n, "object with unreadable spec.replicas skipped");
                return None;
            };
            n != 0
        }
    };
    Some(Listed {
        id,
        running,
        uid,
        labels: obj.metadata.labels.clone().unwrap_or_default(),
    })
}
