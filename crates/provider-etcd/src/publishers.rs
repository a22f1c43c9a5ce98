//! The publishers' statuses (`PREFIX/s/SOURCE`, see [`model`](crate::model)),
//! read by the same watch as the instances: [`PublisherStatus`], and
//! [`WithPublishers`], the stream of both in the order etcd wrote them.

use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use lookout_core::{Item, Watch};
use tokio_stream::Stream;

use crate::EtcdDial;

/// Whether a source is published now.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PublisherState {
    /// Its status key is there: a publisher runs, connected to its engine.
    Connected,
    /// Its status key is not: the publisher is gone (its lease expired:
    /// dead, or cut from etcd), or it lost its engine, or it never wrote one.
    /// The source's instances are kept as they were: nothing is invented
    /// for them.
    Disconnected,
}

impl PublisherState {
    /// `connected` or `disconnected`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Connected => "connected",
            Self::Disconnected => "disconnected",
        }
    }
}

impl fmt::Display for PublisherState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A source's publisher, as the watch last read its status key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PublisherStatus {
    /// The source (`SOURCE` of `PREFIX/s/SOURCE`).
    pub source: Arc<str>,
    /// Published or not.
    pub state: PublisherState,
    /// Who publishes it (the status value's `writer`), when connected and told.
    pub writer: Option<String>,
    /// How many of the source's instances the watch knows at that point.
    pub instances: usize,
    /// The etcd revision it was read at (the status key's put or deletion,
    /// or the list's revision).
    pub revision: i64,
}

/// Each source's publisher status as last told, and, while a
/// [`WithPublishers`] reads them, the changes it has not taken yet.
#[derive(Debug, Default)]
pub(crate) struct Board {
    states: BTreeMap<Arc<str>, PublisherStatus>,
    /// `None`: nobody reads the changes (a plain [`Watch`]): not kept.
    changes: Option<VecDeque<PublisherStatus>>,
}

impl Board {
    /// Takes `status` as the source's: a change is kept (for the reader)
    /// when the source was not known, or its state differs.
    pub(crate) fn set(&mut self, status: PublisherStatus) {
        let changed = self
            .states
            .get(&status.source)
            .is_none_or(|known| known.state != status.state);
        if changed {
            tracing::debug!(source = %status.source, state = %status.state, revision = status.revision, "publisher");
            if let Some(changes) = &mut self.changes {
                changes.push_back(status.clone());
            }
        }
        self.states.insert(Arc::clone(&status.source), status);
    }

    /// The sources known.
    pub(crate) fn sources(&self) -> impl Iterator<Item = &Arc<str>> {
        self.states.keys()
    }

    fn pop(&mut self) -> Option<PublisherStatus> {
        self.changes.as_mut()?.pop_front()
    }
}

pub(crate) fn lock(board: &Mutex<Board>) -> std::sync::MutexGuard<'_, Board> {
    board.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What [`WithPublishers`] yields.
#[derive(Clone, Debug)]
pub enum EtcdItem {
    /// An item of the watch: an instance event, or the status of the watch
    /// itself (its connection to etcd).
    Item(Item),
    /// A source's publisher connected or disconnected.
    Publisher(PublisherStatus),
}

/// The watch of a prefix and its publishers' statuses, in one stream
/// ([`watch_with_publishers`](crate::watch_with_publishers)).
///
/// Each source's status comes first when the watch first lists (after its
/// `Connected`: connected when its status key is there, else
/// disconnected), then at each change of its status key, in the order of
/// the revisions among the instance events: a publisher that dies is
/// `Disconnected` once its key's lease expires (the publisher's is 10 s),
/// with no event invented for its instances; a publisher that writes its
/// key again is `Connected` (after the `resync` events of what changed
/// meanwhile, which a restarted publisher writes first). The statuses are
/// keys under the watched prefix: a redial replays their changes as it
/// replays the instances', a compaction relists them.
///
/// Polled only through the watch: no task, and dropping it closes
/// everything, as dropping the watch does.
#[must_use = "streams do nothing unless polled"]
pub struct WithPublishers {
    watch: Watch<EtcdDial>,
    board: Arc<Mutex<Board>>,
    /// An item of the watch that came after publisher changes still queued.
    held: Option<Item>,
}

impl WithPublishers {
    pub(crate) fn new(watch: Watch<EtcdDial>, board: Arc<Mutex<Board>>) -> Self {
        lock(&board).changes.get_or_insert_with(VecDeque::new);
        Self {
            watch,
            board,
            held: None,
        }
    }

    /// Every source's publisher status as last told.
    pub fn publishers(&self) -> Vec<PublisherStatus> {
        lock(&self.board).states.values().cloned().collect()
    }
}

impl fmt::Debug for WithPublishers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WithPublishers")
            .field("board", &self.board)
            .finish_non_exhaustive()
    }
}

impl Stream for WithPublishers {
    type Item = EtcdItem;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<EtcdItem>> {
        // Changes are queued only while the watch is polled, by the session,
        // as it reaches their place among the instance observations: those
        // queued in the poll that gave an item go before it.
        if let Some(p) = lock(&self.board).pop() {
            return Poll::Ready(Some(EtcdItem::Publisher(p)));
        }
        if let Some(item) = self.held.take() {
            return Poll::Ready(Some(EtcdItem::Item(item)));
        }
        let polled = Pin::new(&mut self.watch).poll_next(cx);
        let change = lock(&self.board).pop();
        match (polled, change) {
            (Poll::Ready(Some(item)), Some(p)) => {
                self.held = Some(item);
                Poll::Ready(Some(EtcdItem::Publisher(p)))
            }
            // Nothing more from the watch (yet): the change.
            (_, Some(p)) => Poll::Ready(Some(EtcdItem::Publisher(p))),
            (Poll::Ready(item), None) => Poll::Ready(item.map(EtcdItem::Item)),
            (Poll::Pending, None) => Poll::Pending,
        }
    }
}
