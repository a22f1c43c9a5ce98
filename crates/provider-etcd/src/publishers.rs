//! The publishers' statuses (`PREFIX/s/SOURCE`, see [`model`](crate::model)),
//! read by the same watch as the instances: [`PublisherStatus`], and
//! [`WithPublishers`], the stream of both in the order etcd wrote them.

use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Waker};

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

/// A source's publisher, as the watch last read its status key
/// (`#[non_exhaustive]`: a field may be added; [`PublisherStatus::new`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
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

impl PublisherStatus {
    /// `source`'s publisher in `state`, with no writer, no instance and
    /// revision 0 (set the fields).
    pub fn new(source: impl Into<Arc<str>>, state: PublisherState) -> Self {
        Self {
            source: source.into(),
            state,
            writer: None,
            instances: 0,
            revision: 0,
        }
    }
}

/// Each source's publisher status as last told, and, while a
/// [`WithPublishers`] reads them, the changes it has not taken yet.
#[derive(Debug, Default)]
pub(crate) struct Board {
    states: BTreeMap<Arc<str>, PublisherStatus>,
    /// `None`: nobody reads the changes (a plain [`Watch`]): not kept.
    changes: Option<VecDeque<PublisherStatus>>,
    /// The [`PublisherChanges`] waiting for a change, by their id.
    waiting: BTreeMap<u64, Waker>,
    /// The id of the next [`PublisherChanges`].
    next_reader: u64,
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
        if changed {
            for (_, waker) in std::mem::take(&mut self.waiting) {
                waker.wake();
            }
        }
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

/// What [`WithPublishers`] yields. Exhaustive: an item of the watch
/// (whose own enums grow) or a publisher's status (whose struct grows);
/// anything else would be another stream.
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

/// A handle on the publishers' statuses a watch reads
/// ([`watch_and_publishers`](crate::watch_and_publishers)), for a program
/// that shares the watch (a [`Hub`](lookout_core::Hub)) and so cannot take
/// them from the stream as [`WithPublishers`] does.
///
/// The statuses are updated while the watch is polled (by whoever drives
/// it); the handle only reads them.
#[derive(Clone)]
pub struct Publishers {
    board: Arc<Mutex<Board>>,
}

impl fmt::Debug for Publishers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Publishers")
            .field("board", &self.board)
            .finish()
    }
}

impl Publishers {
    pub(crate) fn new(board: Arc<Mutex<Board>>) -> Self {
        Self { board }
    }

    /// Every source's publisher status as last read, by source. Empty
    /// until the watch has listed.
    pub fn statuses(&self) -> Vec<PublisherStatus> {
        lock(&self.board).states.values().cloned().collect()
    }

    /// A stream of each source's status: first every source known (when
    /// the watch has listed), then each source whose state differs from
    /// what this stream last yielded of it, as it is when polled. A reader
    /// that polls late gets the state of then: a source that went and came
    /// back meanwhile is not told (a status, not a log). Never ends.
    pub fn changes(&self) -> PublisherChanges {
        let id = {
            let mut board = lock(&self.board);
            board.next_reader += 1;
            board.next_reader
        };
        PublisherChanges {
            board: Arc::clone(&self.board),
            id,
            told: BTreeMap::new(),
        }
    }
}

/// The stream of [`Publishers::changes`].
#[must_use = "streams do nothing unless polled"]
pub struct PublisherChanges {
    board: Arc<Mutex<Board>>,
    id: u64,
    /// Each source's state as this stream last yielded it.
    told: BTreeMap<Arc<str>, PublisherState>,
}

impl fmt::Debug for PublisherChanges {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PublisherChanges")
            .field("told", &self.told)
            .finish_non_exhaustive()
    }
}

impl Stream for PublisherChanges {
    type Item = PublisherStatus;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<PublisherStatus>> {
        let this = self.get_mut();
        let mut board = lock(&this.board);
        let untold = board
            .states
            .values()
            .find(|s| this.told.get(&s.source) != Some(&s.state))
            .cloned();
        if let Some(status) = untold {
            board.waiting.remove(&this.id);
            this.told.insert(Arc::clone(&status.source), status.state);
            Poll::Ready(Some(status))
        } else {
            board.waiting.insert(this.id, cx.waker().clone());
            Poll::Pending
        }
    }
}

impl Drop for PublisherChanges {
    fn drop(&mut self) {
        lock(&self.board).waiting.remove(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::task::Wake;

    struct Count(std::sync::atomic::AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    }

    fn status(source: &str, state: PublisherState, instances: usize) -> PublisherStatus {
        PublisherStatus {
            source: source.into(),
            state,
            writer: None,
            instances,
            revision: 1,
        }
    }

    /// Every source at first, then each state change, woken when it comes;
    /// a flap not read meanwhile is not told; nothing for a count alone.
    #[test]
    fn changes_tell_each_state_once_and_wake_their_reader() {
        let board = Arc::new(Mutex::new(Board::default()));
        let publishers = Publishers::new(Arc::clone(&board));
        let count = Arc::new(Count(std::sync::atomic::AtomicUsize::new(0)));
        let waker = Waker::from(Arc::clone(&count));
        let mut cx = Context::from_waker(&waker);
        let mut changes = publishers.changes();
        let mut poll = |c: &mut PublisherChanges| Pin::new(c).poll_next(&mut cx);
        assert!(poll(&mut changes).is_pending(), "nothing listed yet");
        lock(&board).set(status("a", PublisherState::Connected, 1));
        lock(&board).set(status("b", PublisherState::Disconnected, 2));
        assert_eq!(count.0.load(std::sync::atomic::Ordering::SeqCst), 1);
        let first: Vec<_> = (0..2)
            .map(|_| match poll(&mut changes) {
                Poll::Ready(Some(p)) => (p.source.to_string(), p.state),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(
            first,
            [
                ("a".to_owned(), PublisherState::Connected),
                ("b".to_owned(), PublisherState::Disconnected)
            ]
        );
        assert!(poll(&mut changes).is_pending());
        lock(&board).set(status("a", PublisherState::Connected, 5));
        assert!(poll(&mut changes).is_pending(), "a count is no change");
        lock(&board).set(status("a", PublisherState::Disconnected, 5));
        lock(&board).set(status("a", PublisherState::Connected, 5));
        assert!(
            poll(&mut changes).is_pending(),
            "a flap not read: a's state is as told"
        );
        lock(&board).set(status("b", PublisherState::Connected, 2));
        assert!(matches!(
            poll(&mut changes),
            Poll::Ready(Some(p)) if &*p.source == "b" && p.state == PublisherState::Connected
        ));
        assert_eq!(publishers.statuses().len(), 2);
        drop(changes);
        assert!(
            lock(&board).waiting.is_empty(),
            "a dropped reader is forgotten"
        );
    }
}
