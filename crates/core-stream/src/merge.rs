//! Many watches, one stream: [`Merge`].
//!
//! A [`Merge`] holds N streams of [`Item`]s (each a [`Watch`](crate::Watch)
//! of any provider, or a hub's [`Subscription`](crate::Subscription)), each
//! under a source name, and yields their items tagged by that name
//! ([`Sourced`]). Each source keeps everything of its own — connection,
//! backoff, cursor, history, tracker — so a resync of one never reports,
//! removes or delays another's instances: the merge only interleaves.
//!
//! **Fair, and O(1) per item.** Each source is polled with a waker of its
//! own, which marks it ready in a bitset ([`Ready`]); the merge polls only
//! the sources marked ready, in turn, starting after the one that yielded
//! last, and takes one item from each per turn. So a source that firehoses
//! delays another's next item by at most one item of every other ready
//! source (one turn), a quiet or disconnected source costs nothing while it
//! sleeps, and the cost of an item does not grow with the number of
//! sources. (An item is what a source's poll yields: a `Watch` that diffs a
//! snapshot does so in the poll that yields its first transition, which is
//! that source's batch.)
//!
//! **Order**: per instance as each source tells it; across sources none (their
//! clocks differ, and the merge does not wait for one to order another).
//!
//! **Drop** is the only cancellation, as for a `Watch`: dropping the merge
//! drops every source, and with it every connection, synchronously. Nothing
//! is spawned.

use std::fmt;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Wake, Waker};

use tokio_stream::Stream;

use crate::item::{Item, Status};

/// An item of a [`Merge`], with the source that yielded it.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Sourced {
    /// The source: [`Merge::name`] tells its name.
    pub source: SourceId,
    /// What that source yielded.
    pub item: Item,
}

/// A source of a [`Merge`]: its place in the order the sources were added
/// (0, 1, …). A number rather than the name, so that an item costs no
/// reference count; [`Merge::name`] tells the name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SourceId(u32);

impl SourceId {
    /// Its place among the merge's sources, from 0.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// Where a source of a [`Merge`] stands, from the last status it yielded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SourceState {
    /// No status yet: its first dial and snapshot are under way.
    Connecting,
    /// Its last status was [`Status::Connected`]: synced.
    Connected,
    /// Its last status was [`Status::Disconnected`]: retrying.
    Disconnected,
    /// Its last status was [`Status::Lagged`] (a subscription as a source):
    /// the difference to the present follows.
    Lagged,
    /// The stream ended (a `Watch` never does).
    Ended,
}

impl SourceState {
    /// The state as one word: `connecting`, `connected`, `disconnected`,
    /// `lagged` or `ended`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Connecting => "connecting",
            Self::Connected => "connected",
            Self::Disconnected => "disconnected",
            Self::Lagged => "lagged",
            Self::Ended => "ended",
        }
    }
}

impl fmt::Display for SourceState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A source name given twice to one [`Merge`].
#[derive(Debug, thiserror::Error)]
#[error("source `{0}` is given twice: each source of a merge needs a name of its own")]
pub struct DuplicateSource(Arc<str>);

impl DuplicateSource {
    /// The name given twice.
    pub fn name(&self) -> &str {
        &self.0
    }
}

type Upstream = Pin<Box<dyn Stream<Item = Item> + Send>>;

struct Source {
    name: Arc<str>,
    stream: Upstream,
    /// Marks this source ready in the merge's [`Ready`].
    waker: Waker,
    state: SourceState,
}

/// Which sources may have an item: one bit per source, set by the source's
/// waker (and by the merge, for a source that yielded and may have more),
/// cleared by the merge before it polls the source. And the waker of the
/// task that polls the merge, set only when the merge is about to wait.
struct Ready {
    bits: Box<[AtomicU64]>,
    /// Set after a mark (so set whenever a bit may be): while it is clear
    /// the busy path polls the hot source again without scanning the bits.
    /// Cleared by the merge before a scan, set again when the scan leaves
    /// bits behind.
    some: AtomicBool,
    parent: Mutex<Option<Waker>>,
}

impl Ready {
    /// All `n` marked: each source is polled once (with its own waker)
    /// before anything waits.
    fn all(n: usize) -> Self {
        let words = n.div_ceil(64);
        let bits = (0..words)
            .map(|w| {
                let in_word = (n - w * 64).min(64);
                AtomicU64::new(if in_word == 64 {
                    u64::MAX
                } else {
                    (1u64 << in_word) - 1
                })
            })
            .collect();
        Self {
            bits,
            some: AtomicBool::new(true),
            parent: Mutex::new(None),
        }
    }

    fn mark(&self, i: usize) {
        self.bits[i / 64].fetch_or(1 << (i % 64), Ordering::AcqRel);
        self.some.store(true, Ordering::Release);
    }

    /// Whether a source may be marked (false: none is, but one whose mark
    /// is being set right now; its flag follows its bit).
    fn maybe_any(&self) -> bool {
        self.some.load(Ordering::Acquire)
    }

    /// [`take_from`](Self::take_from), the flag cleared first and set again
    /// when marks are left.
    fn scan_from(&self, start: usize) -> Option<usize> {
        self.some.store(false, Ordering::Release);
        let taken = self.take_from(start);
        if taken.is_some() && self.any() {
            self.some.store(true, Ordering::Release);
        }
        taken
    }

    /// Clears the mark of `i` if it is set (one load when it is not).
    fn clear(&self, i: usize) {
        let bit = 1 << (i % 64);
        if self.bits[i / 64].load(Ordering::Acquire) & bit != 0 {
            self.bits[i / 64].fetch_and(!bit, Ordering::AcqRel);
        }
    }

    /// The first marked source at or after `start` (wrapping around), its
    /// mark cleared. (Bits beyond the sources are never set.)
    fn take_from(&self, start: usize) -> Option<usize> {
        let words = self.bits.len();
        let first = start / 64;
        let shift = start % 64;
        if let Some(i) = self.take_in(first, u64::MAX << shift) {
            return Some(i);
        }
        let mut w = first;
        for _ in 1..words {
            w += 1;
            if w == words {
                w = 0;
            }
            if let Some(i) = self.take_in(w, u64::MAX) {
                return Some(i);
            }
        }
        if shift == 0 {
            None
        } else {
            self.take_in(first, !(u64::MAX << shift))
        }
    }

    /// The first marked source of word `w` within `mask`, its mark cleared.
    fn take_in(&self, w: usize, mask: u64) -> Option<usize> {
        loop {
            let word = self.bits[w].load(Ordering::Acquire) & mask;
            if word == 0 {
                return None;
            }
            let bit = 1u64 << word.trailing_zeros();
            if self.bits[w].fetch_and(!bit, Ordering::AcqRel) & bit != 0 {
                return Some(w * 64 + word.trailing_zeros() as usize);
            }
        }
    }

    fn any(&self) -> bool {
        self.bits.iter().any(|w| w.load(Ordering::Acquire) != 0)
    }

    fn park(&self, waker: &Waker) {
        let mut parent = self.parent.lock().unwrap_or_else(PoisonError::into_inner);
        if !parent.as_ref().is_some_and(|p| p.will_wake(waker)) {
            *parent = Some(waker.clone());
        }
    }
}

/// The waker a source is polled with: marks it, wakes the merge's task.
struct SourceWaker {
    ready: Arc<Ready>,
    index: usize,
}

impl Wake for SourceWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.ready.mark(self.index);
        let parent = self
            .ready
            .parent
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(parent) = parent.as_ref() {
            parent.wake_by_ref();
        }
    }
}

/// Many streams of [`Item`]s, one stream of [`Sourced`] items.
///
/// Each source keeps its own connection, backoff, cursor and tracker: a
/// resync or a failure of one never reports, removes or delays another's
/// instances. Fair, and O(1) per item: each source is polled with a waker of
/// its own, only the sources that woke are polled, in turn, one item each
/// per turn, so a source that firehoses delays another's next item by one
/// turn and a quiet or disconnected source costs nothing. Order holds per
/// instance as each source tells it; across sources there is none. Dropping
/// the merge drops every source and its connections; nothing is spawned.
///
/// ```
/// # use lookout_core::{Dial, DialFuture, Merge, Observation, Watch, WatchConfig};
/// # use tokio_stream::StreamExt;
/// # struct Empty;
/// # impl Dial for Empty {
/// #     type Cursor = ();
/// #     fn dial(&mut self, _resume: Option<&()>) -> DialFuture<()> {
/// #         Box::pin(async {
/// #             let snapshot = [Ok(Observation::ResyncBegin), Ok(Observation::ResyncDone)];
/// #             let session = tokio_stream::iter(snapshot).chain(tokio_stream::pending());
/// #             Ok(Box::pin(session) as lookout_core::Session<()>)
/// #         })
/// #     }
/// # }
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), lookout_core::DuplicateSource> {
/// let mut merged = Merge::new()
///     .source("host-a", Watch::new(Empty, WatchConfig::default()))?
///     .source("host-b", Watch::new(Empty, WatchConfig::default()))?;
/// let first = merged.next().await.expect("a merge of watches never ends");
/// println!("{}: {:?}", merged.name(first.source), first.item);
/// # let second = merged.next().await.expect("never ends");
/// assert!(merged.all_connected());
/// # Ok(())
/// # }
/// ```
pub struct Merge {
    sources: Vec<Source>,
    ready: Arc<Ready>,
    /// The source that yielded last, which may have more: polled again in
    /// its turn without a mark (no atomic operation on the busy path).
    hot: Option<usize>,
    /// Where the next turn starts: after the source that yielded last.
    next: usize,
    /// Sources whose stream has not ended.
    live: usize,
}

impl fmt::Debug for Merge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Merge")
            .field("sources", &self.sources().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl Default for Merge {
    fn default() -> Self {
        Self::new()
    }
}

impl Merge {
    /// A merge of no source yet (it ends at once if polled so).
    pub fn new() -> Self {
        Self {
            sources: Vec::new(),
            ready: Arc::new(Ready::all(0)),
            hot: None,
            next: 0,
            live: 0,
        }
    }

    /// Adds `stream` under `name`; its items carry the next [`SourceId`]
    /// (the first source's is 0).
    ///
    /// # Errors
    /// [`DuplicateSource`] when `name` names a source already.
    ///
    /// # Panics
    /// Beyond 2³² sources.
    pub fn source<S>(
        mut self,
        name: impl Into<Arc<str>>,
        stream: S,
    ) -> Result<Self, DuplicateSource>
    where
        S: Stream<Item = Item> + Send + 'static,
    {
        let name = name.into();
        if self.sources.iter().any(|s| s.name == name) {
            return Err(DuplicateSource(name));
        }
        assert!(
            u32::try_from(self.sources.len()).is_ok(),
            "a merge of more than 2³² sources"
        );
        self.sources.push(Source {
            name,
            stream: Box::pin(stream),
            waker: Waker::noop().clone(),
            state: SourceState::Connecting,
        });
        self.live += 1;
        // New wakers for all, and every source marked: each is polled with
        // its new waker before the merge waits (a waker a source registered
        // with the old set would mark nothing that is read).
        self.ready = Arc::new(Ready::all(self.sources.len()));
        self.hot = None;
        for (index, s) in self.sources.iter_mut().enumerate() {
            s.waker = Waker::from(Arc::new(SourceWaker {
                ready: Arc::clone(&self.ready),
                index,
            }));
        }
        Ok(self)
    }

    /// How many sources it merges.
    pub fn len(&self) -> usize {
        self.sources.len()
    }

    /// Whether it merges no source.
    pub fn is_empty(&self) -> bool {
        self.sources.is_empty()
    }

    /// Each source's name and state, in the order they were added (the
    /// order of their [`SourceId`]s).
    pub fn sources(&self) -> impl Iterator<Item = (&str, SourceState)> + '_ {
        self.sources.iter().map(|s| (&*s.name, s.state))
    }

    /// The name of `source`.
    ///
    /// # Panics
    /// When `source` is not one of this merge's.
    pub fn name(&self, source: SourceId) -> &str {
        &self.sources[source.index()].name
    }

    /// The source named `name`.
    pub fn id(&self, name: &str) -> Option<SourceId> {
        let at = self.sources.iter().position(|s| &*s.name == name)?;
        Some(SourceId(u32::try_from(at).ok()?))
    }

    /// The state of `source`.
    ///
    /// # Panics
    /// When `source` is not one of this merge's.
    pub fn state(&self, source: SourceId) -> SourceState {
        self.sources[source.index()].state
    }

    /// Whether every source is connected and synced (its last status
    /// [`Status::Connected`]): the merged view's health.
    pub fn all_connected(&self) -> bool {
        self.sources
            .iter()
            .all(|s| s.state == SourceState::Connected)
    }
}

impl Stream for Merge {
    type Item = Sourced;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Sourced>> {
        let this = self.get_mut();
        let n = this.sources.len();
        // Each source at most once per poll: one that wakes itself while it
        // returns `Pending` (a cooperative yield) is polled again on the
        // merge's next poll, not in a loop here.
        let mut polls = 0;
        let mut parked = false;
        loop {
            if this.live == 0 {
                return Poll::Ready(None);
            }
            // The hot source's turn comes after every marked one from
            // `next` on (`next` is just after it): a marked one first.
            let marked = if this.hot.is_some() && !this.ready.maybe_any() {
                // The busy path: nothing marked, the hot one again.
                None
            } else {
                this.ready.scan_from(this.next)
            };
            let Some(i) = marked.or_else(|| {
                let hot = this.hot.take()?;
                this.ready.clear(hot);
                Some(hot)
            }) else {
                if parked {
                    return Poll::Pending;
                }
                // About to wait: the merge's waker first, then one more look
                // (a source woken since the look above marked itself, and
                // found no waker to wake).
                this.ready.park(cx.waker());
                parked = true;
                continue;
            };
            if polls == n {
                // Every source had its turn in this poll: the marked one
                // waits for the next poll, which comes at once.
                this.ready.mark(i);
                if let Some(hot) = this.hot.take() {
                    this.ready.mark(hot);
                }
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            polls += 1;
            let source = &mut this.sources[i];
            if source.state == SourceState::Ended {
                continue;
            }
            let mut scx = Context::from_waker(&source.waker);
            match source.stream.as_mut().poll_next(&mut scx) {
                Poll::Ready(Some(item)) => {
                    // It may have more: hot, its turn after the others'.
                    if let Some(hot) = this.hot.replace(i)
                        && hot != i
                    {
                        // The previous hot one was passed over for a
                        // marked one: marked itself, so not forgotten.
                        this.ready.mark(hot);
                    }
                    this.next = if i + 1 == n { 0 } else { i + 1 };
                    if let Item::Status(status) = &item {
                        source.state = match status {
                            Status::Connected { .. } => SourceState::Connected,
                            Status::Disconnected { .. } => SourceState::Disconnected,
                            Status::Lagged { .. } => SourceState::Lagged,
                        };
                    }
                    #[allow(clippy::cast_possible_truncation)] // checked in `source`
                    return Poll::Ready(Some(Sourced {
                        source: SourceId(i as u32),
                        item,
                    }));
                }
                Poll::Ready(None) => {
                    source.state = SourceState::Ended;
                    this.live -= 1;
                }
                Poll::Pending => {}
            }
            if parked && !this.ready.any() {
                return Poll::Pending;
            }
        }
    }
}
