//! The combinator: one reconnect loop, one state tracker, for every provider.
//!
//! [`Watch`] is a state machine ([`State`]): each poll runs the current
//! state's step until an item is queued or nothing can progress. The steps:
//! dialing ([`Dialing::poll`]), streaming ([`Streaming::poll`]: the session's
//! observations, then the liveness rules of [`Liveness`] when it is quiet),
//! and failing into backoff ([`Core::failed`]). What outlives a session — the
//! known state, the cursor, the reconnect policy's count — is [`Core`].
//! Dropping the `Watch` drops the state, and with it the pending dial, the
//! session's connection, an in-flight probe: synchronously, since nothing is
//! spawned.

use std::collections::VecDeque;
use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::SystemTime;

use tokio::time::{Instant, Sleep, sleep, sleep_until};
use tokio_stream::Stream;

use crate::backoff::Backoff;
use crate::config::WatchConfig;
use crate::dial::{Dial, DialFuture, ProbeFuture, Session};
use crate::error::Error;
use crate::item::{Item, Status};
use crate::liveness::{Due, Liveness};
use crate::model::{Change, InstanceEvent, Observation, Origin};
use crate::tracker::{Tracker, Transitions};

/// A resilient, leak-free stream of [`Item`]s from one engine.
///
/// # Guarantees
///
/// For every provider alike (a provider's docs say only what differs):
/// - it never ends and never yields a terminal error: a failed dial or a
///   broken session yields [`Status::Disconnected`] and is retried under the
///   [`ReconnectPolicy`](crate::ReconnectPolicy), forever;
/// - after each (re)connect it diffs the engine's snapshot against the last
///   known state and yields every missed transition once, [`Origin::Resync`]
///   (unless the session resumed the feed exactly where it left it, which
///   the engine must guarantee: [`Observation::Resumed`](crate::Observation::Resumed));
/// - it never tells the past as news: a session may first replay the changes
///   made while it could not see the feed, exactly (when the engine proves
///   the replay complete: see [`Dial::dial`]); they come [`Origin::Live`]
///   with the engine's times, before that session's snapshot, which then has
///   nothing left to report for them. Every later event happened after the
///   snapshot (give or take a change racing the session's own requests);
/// - a live change passes only when it changes the known state, so a relist
///   racing live events never yields a duplicate: for one instance, two
///   consecutive events always differ (but for a `Failing` with a new
///   message), and they follow
///   `Created → (Started → [Stopping] → Stopped)* → Removed`, or with readiness watched
///   `Created → (Started → (Ready ⇄ Unready)* → [Stopping] → Stopped)* → Removed`
///   with `Failing` while it runs ([`EventKind`](crate::EventKind)); every
///   `Stopped` says its outcome, and a stop after `Stopping` is never
///   `failed` ([`Reason`](crate::Reason)); a repeated readiness is swallowed as
///   a repeated transition is, a readiness change missed while disconnected
///   is told once (the replay, or the snapshot's `resync`), and an instance
///   that the snapshot finds running and ready is told `Started`, then `Ready`;
/// - a silent session is probed after [`WatchConfig::probe_after`] and
///   replaced when the probe fails or exceeds [`WatchConfig::probe_timeout`];
/// - dropping it, in any state, drops the dial, the session and the probe
///   synchronously: no task is spawned, the connections close.
///
/// # Backpressure
///
/// `Watch` is `Unpin` and `Send`. When the consumer stops polling, nothing is
/// read: the engine's buffer fills and the engine may drop events. A consumer
/// that comes back after more than [`WatchConfig::resync_after_lag`] gets
/// what the session has ready, then, at the session's first pause, a redial:
/// what the engine dropped and any backlog not yet read come as the engine's
/// replay when it still reaches back to the last change seen, else as the
/// relist's net effect ([`Origin::Resync`]).
///
/// # Example
///
/// ```
/// use lookout_core::{Dial, DialFuture, Item, Observation, Watch, WatchConfig};
/// use tokio_stream::StreamExt;
///
/// /// A dial that lists one running instance, then has nothing more to say.
/// struct OneRunning;
/// impl Dial for OneRunning {
///     type Cursor = u64;
///     fn dial(&mut self, _resume: Option<&u64>) -> DialFuture<u64> {
///         Box::pin(async {
///             let snapshot = vec![
///                 Ok(Observation::ResyncBegin),
///                 Ok(Observation::Listed(lookout_core::Listed::new("web".into(), true))),
///                 Ok(Observation::ResyncDone),
///             ];
///             let session = tokio_stream::iter(snapshot).chain(tokio_stream::pending());
///             Ok(Box::pin(session) as lookout_core::Session<u64>)
///         })
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let mut watch = Watch::new(OneRunning, WatchConfig::default().initial(true));
/// let mut seen = Vec::new();
/// while let Some(item) = watch.next().await {
///     match item {
///         Item::Event(e) => seen.push(format!("{} {} ({})", e.id, e.kind, e.origin)),
///         Item::Status(status) => {
///             println!("{status:?}");
///             break;
///         }
///     }
/// }
/// assert_eq!(seen, ["web created (initial)", "web started (initial)"]);
/// # }
/// ```
#[must_use = "streams do nothing unless polled"]
pub struct Watch<D>
where
    D: Dial,
{
    dial: D,
    state: State<D::Cursor>,
    core: Core<D::Cursor>,
    /// When the clock was read last, on a poll that handed the consumer an
    /// item, and items were handed out since (`None` after a `Pending`:
    /// then the consumer waits for the stream, not the reverse).
    yielded_at: Option<Instant>,
    /// Busy polls since that read (see [`CLOCK_EVERY`]).
    unclocked: u8,
}

/// A busy stream reads the clock on one poll in this many: reading it costs
/// more than everything else a live change costs, and what it serves is
/// measured in seconds (the consumer's lag, the session's silence). 32
/// rather than 16: 4.6 instructions less per event (bench `instructions`);
/// the time a poll uses is at most 32 items old, microseconds.
const CLOCK_EVERY: u8 = 32;

/// Where the stream is between two polls. Each state's step returns a
/// [`StepOutcome`]; every change of state is logged at `debug` (in the
/// session's span once there is one).
enum State<C> {
    /// About to dial, at once: at the start, after a backoff, and for a
    /// relist (periodic, or after the consumer lagged), which redials from
    /// the cursor without delay.
    Idle,
    /// A dial under way, bounded by [`WatchConfig::dial_timeout`].
    Dialing(Dialing<C>),
    /// A session yields observations; its [`Liveness`] watches its silence
    /// and schedules its relists.
    Streaming(Box<Streaming<C>>),
    /// Waiting out the [`ReconnectPolicy`](crate::ReconnectPolicy)'s delay after a failure.
    Backoff(Pin<Box<Sleep>>),
}

impl<C> State<C> {
    fn name(&self) -> &'static str {
        match self {
            Self::Idle => "idle",
            Self::Dialing(_) => "dialing",
            Self::Streaming(_) => "streaming",
            Self::Backoff(_) => "backoff",
        }
    }
}

/// The tracker's transitions go to the stream's queue, in order with the
/// statuses.
impl Transitions for VecDeque<Item> {
    fn push(&mut self, event: InstanceEvent) {
        self.push_back(Item::Event(event));
    }
}

/// A live change's transitions when the queue is empty: the first is handed
/// straight to the consumer (put where the stream's poll returns it from: an
/// event is moved as few times as can be), any others queue behind it.
struct HandOff<'a> {
    first: &'a mut Option<Item>,
    out: &'a mut VecDeque<Item>,
}

impl Transitions for HandOff<'_> {
    #[inline]
    fn push(&mut self, event: InstanceEvent) {
        if self.first.is_none() {
            *self.first = Some(Item::Event(event));
        } else {
            self.out.push_back(Item::Event(event));
        }
    }
}

/// What applying one observation produced, besides the items it queued.
enum Applied {
    /// Nothing more.
    Nothing,
    /// A snapshot completed.
    Synced,
    /// A live change's first transition was handed straight to the
    /// consumer (the queue was empty; any further ones are queued behind it).
    First,
}

/// What one state's step decided: what the poll loop does next.
enum StepOutcome<C> {
    /// Run the loop again: an item may be queued, or the state may progress.
    Again,
    /// Yield the item handed over now (the queue is empty: it is next in
    /// order).
    Yield,
    /// Nothing can progress until a waker fires.
    Pending,
    /// Move to this state (dropping the current one).
    To(State<C>),
    /// The dial or the session failed: report it and back off.
    Failed(Error),
}

/// Everything that outlives a session.
struct Core<C> {
    config: WatchConfig,
    /// The one reconnect policy's running count.
    backoff: Backoff,
    /// The known state of every instance.
    tracker: Tracker,
    /// Where the next dial resumes the feed.
    cursor: Option<C>,
    /// Items ready for the consumer, in order.
    out: VecDeque<Item>,
    /// A snapshot completed once: later ones report [`Origin::Resync`].
    synced_once: bool,
    /// Dials so far (the session span's number).
    dials: u64,
}

/// A dial under way.
struct Dialing<C> {
    fut: DialFuture<C>,
    span: tracing::Span,
    /// [`WatchConfig::dial_timeout`] from the dial's start.
    timeout: Pin<Box<Sleep>>,
}

/// A session under way.
struct Streaming<C> {
    session: Session<C>,
    span: tracing::Span,
    liveness: Liveness,
    /// When this session first completed a snapshot: past
    /// [`ReconnectPolicy::reset_after`](crate::ReconnectPolicy::reset_after) of health, the backoff starts over.
    healthy_since: Option<Instant>,
    /// The liveness probe in flight.
    probe: Option<ProbeFuture>,
    /// The next liveness deadline (silence, probe timeout, relist), armed
    /// lazily and moved only later while the session is busy.
    timer: Option<Pin<Box<Sleep>>>,
}

// Nothing in `Watch` is pinned structurally: the dial, the cursor and the
// boxed futures are only ever used through `&mut`.
impl<D: Dial> Unpin for Watch<D> {}

impl<D: Dial> fmt::Debug for Watch<D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Watch")
            .field("state", &self.state.name())
            .field("instances", &self.core.tracker.len())
            .field("cursor", &self.core.cursor)
            .field("pending_items", &self.core.out.len())
            .finish_non_exhaustive()
    }
}

impl<D: Dial> Watch<D> {
    /// Wraps a provider's dial. Nothing happens until the stream is polled (no
    /// runtime is needed before that).
    pub fn new(dial: D, config: WatchConfig) -> Self {
        Self {
            dial,
            state: State::Idle,
            core: Core {
                backoff: Backoff::new(config.reconnect.clone()),
                config,
                tracker: Tracker::default(),
                cursor: None,
                out: VecDeque::new(),
                synced_once: false,
                dials: 0,
            },
            yielded_at: None,
            unclocked: 0,
        }
    }

    /// Keeps only the instance events; statuses are logged with `tracing`.
    pub fn events(self) -> crate::Events<Self> {
        crate::Events::new(self)
    }

    /// Whether a snapshot completed: the state of every instance is known.
    pub(crate) fn has_synced(&self) -> bool {
        self.core.synced_once
    }

    /// Every known instance, as the events that bring it about, stamped
    /// `at` (see [`Tracker::tell`]).
    pub(crate) fn tell_known(&self, at: SystemTime, out: &mut impl Transitions) {
        self.core.tracker.tell(at, out);
    }

    /// The first snapshot will be told as [`Origin::Initial`] events
    /// ([`WatchConfig::initial`] on).
    pub(crate) fn tell_first_snapshot(&mut self) {
        self.core.config.initial = true;
    }

    /// The consumer polls again at `entered` (a poll that reads the clock):
    /// when that is late after the last read, the session's liveness
    /// schedules a relist (see [`WatchConfig::resync_after_lag`]).
    fn note_lag(&mut self, entered: Instant) {
        if let (Some(yielded), Some(bound), State::Streaming(s)) = (
            self.yielded_at,
            self.core.config.resync_after_lag,
            &mut self.state,
        ) {
            let lag = entered.saturating_duration_since(yielded);
            if let Some(due) = s.liveness.lagged(lag, bound, entered) {
                let _g = s.span.enter();
                tracing::debug!(?lag, in = ?due.duration_since(entered), "consumer lagged: relist due");
            }
        }
    }
}

impl<D: Dial> Stream for Watch<D> {
    type Item = Item;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Item>> {
        let this = self.get_mut();
        // When the consumer came back, when the observations it gets
        // arrived, and when it got its item: one time for the poll (the work
        // below is short against every bound it serves), read from the clock
        // when the consumer came back from waiting for the stream, and then
        // on every `CLOCK_EVERY`th poll while the stream is busy; in between,
        // the time of the last read stands (a later one only comes sooner).
        let entered = match this.yielded_at {
            Some(at) if this.unclocked < CLOCK_EVERY => {
                this.unclocked += 1;
                at
            }
            _ => {
                let now = Instant::now();
                this.note_lag(now);
                this.unclocked = 0;
                now
            }
        };
        // Where a live change's first event is handed over (see `HandOff`).
        let mut first = None;
        loop {
            if let Some(item) = this.core.out.pop_front() {
                this.yielded_at = Some(entered);
                return Poll::Ready(Some(item));
            }
            let step = match &mut this.state {
                State::Idle => StepOutcome::To(this.core.dial(&mut this.dial)),
                State::Dialing(d) => d.poll(&this.core.config, cx),
                State::Streaming(s) => {
                    s.poll(&mut this.dial, &mut this.core, entered, &mut first, cx)
                }
                State::Backoff(delay) => {
                    if delay.as_mut().poll(cx).is_ready() {
                        tracing::debug!("backoff over");
                        StepOutcome::To(State::Idle)
                    } else {
                        StepOutcome::Pending
                    }
                }
            };
            match step {
                StepOutcome::Again => {}
                StepOutcome::Yield => {
                    this.yielded_at = Some(entered);
                    return Poll::Ready(first);
                }
                StepOutcome::Pending => {
                    if this.yielded_at.is_some() && this.unclocked > 0 {
                        // A burst ends between two reads of the clock: its
                        // lag is measured now, and the liveness rules asked
                        // again (a relist may be due), before the stream waits.
                        let now = Instant::now();
                        this.note_lag(now);
                        this.unclocked = 0;
                        this.yielded_at = None;
                        continue;
                    }
                    this.yielded_at = None;
                    return Poll::Pending;
                }
                StepOutcome::To(next) => this.state = next,
                // Dropping the old state closes its connection now.
                StepOutcome::Failed(error) => this.state = this.core.failed(&this.state, error),
            }
        }
    }
}

impl<C: Clone + fmt::Debug> Core<C> {
    /// Starts a dial from the cursor.
    fn dial<D: Dial<Cursor = C>>(&mut self, dial: &mut D) -> State<C> {
        self.dials += 1;
        let span = tracing::debug_span!("session", dial = self.dials);
        let fut = {
            let _g = span.enter();
            tracing::debug!(resume = ?self.cursor, "dialing");
            dial.dial(self.cursor.as_ref())
        };
        State::Dialing(Dialing {
            fut,
            span,
            timeout: Box::pin(sleep(self.config.dial_timeout)),
        })
    }

    /// One failure, one status, one delay: the backoff state that follows
    /// `from`.
    fn failed(&mut self, from: &State<C>, error: Error) -> State<C> {
        let now = Instant::now();
        let healthy_for = match from {
            State::Streaming(s) => s.healthy_since.map(|t| now.duration_since(t)),
            _ => None,
        };
        let (attempt, retry_in) = self.backoff.failed(healthy_for);
        tracing::debug!(
            from = from.name(),
            %error,
            attempt,
            ?retry_in,
            "disconnected; backing off"
        );
        self.out.push_back(Item::Status(Status::Disconnected {
            error: Arc::new(error),
            attempt,
            retry_in,
        }));
        State::Backoff(Box::pin(sleep_until(now + retry_in)))
    }

    /// Applies one live change; with an empty queue, its first transition
    /// is returned rather than queued (the rest are queued behind it).
    fn change(&mut self, change: Change<C>, first: &mut Option<Item>) -> bool {
        if let Some(c) = &change.cursor {
            self.cursor = Some(c.clone());
        }
        if self.out.is_empty() {
            let mut sink = HandOff {
                first,
                out: &mut self.out,
            };
            self.tracker.change(change, &mut sink);
            sink.first.is_some()
        } else {
            self.tracker.change(change, &mut self.out);
            false
        }
    }

    /// Applies one observation.
    fn observe(&mut self, obs: Observation<C>, first: &mut Option<Item>) -> Applied {
        match obs {
            Observation::ResyncBegin => {
                tracing::debug!("snapshot begins");
                self.tracker.begin_resync();
            }
            Observation::Listed(listed) => self.tracker.listed(listed),
            Observation::ResyncDone => {
                let origin = if self.synced_once {
                    Some(Origin::Resync)
                } else if self.config.initial {
                    Some(Origin::Initial)
                } else {
                    None
                };
                let before = self.out.len();
                if !self.tracker.end_resync(origin, &mut self.out) {
                    tracing::debug!("snapshot end without a begin: ignored");
                    return Applied::Nothing;
                }
                self.synced_once = true;
                let instances = self.tracker.len();
                tracing::debug!(
                    instances,
                    transitions = self.out.len() - before,
                    "snapshot done; connected"
                );
                self.out
                    .push_back(Item::Status(Status::Connected { instances }));
                return Applied::Synced;
            }
            Observation::Resumed => {
                if !self.synced_once {
                    tracing::debug!("resumed before any snapshot: ignored");
                    return Applied::Nothing;
                }
                let instances = self.tracker.len();
                tracing::debug!(instances, "resumed from the cursor; connected");
                self.out
                    .push_back(Item::Status(Status::Connected { instances }));
                return Applied::Synced;
            }
            Observation::Change(change) => {
                if self.change(change, first) {
                    return Applied::First;
                }
            }
            Observation::Progress(cursor) => {
                if let Some(c) = cursor {
                    self.cursor = Some(c);
                }
            }
            Observation::Polled {
                id,
                uid,
                readiness,
                reason,
            } => {
                self.tracker
                    .polled(id, uid.as_deref(), readiness, reason, &mut self.out);
            }
        }
        Applied::Nothing
    }
}

impl<C> Dialing<C> {
    /// The dial completes (streaming), fails, or times out.
    fn poll(&mut self, config: &WatchConfig, cx: &mut Context<'_>) -> StepOutcome<C> {
        let _g = self.span.enter();
        match self.fut.as_mut().poll(cx) {
            Poll::Ready(Ok(session)) => {
                tracing::debug!("dialed; streaming");
                StepOutcome::To(State::Streaming(Box::new(Streaming {
                    session,
                    span: self.span.clone(),
                    liveness: Liveness::new(Instant::now()),
                    healthy_since: None,
                    probe: None,
                    timer: None,
                })))
            }
            Poll::Ready(Err(e)) => StepOutcome::Failed(Error::Dial(e)),
            Poll::Pending if self.timeout.as_mut().poll(cx).is_ready() => {
                StepOutcome::Failed(Error::DialTimeout(config.dial_timeout))
            }
            Poll::Pending => StepOutcome::Pending,
        }
    }
}

impl<C: Clone + fmt::Debug> Streaming<C> {
    /// The session's next observation, applied; when it has none ready, the
    /// liveness rules.
    fn poll<D: Dial<Cursor = C>>(
        &mut self,
        dial: &mut D,
        core: &mut Core<C>,
        entered: Instant,
        first: &mut Option<Item>,
        cx: &mut Context<'_>,
    ) -> StepOutcome<C> {
        // The span is entered in place (no clone per observation); only the
        // quiet path, which needs all of `self`, enters a clone of it.
        let g = self.span.enter();
        match self.session.as_mut().poll_next(cx) {
            Poll::Ready(Some(Ok(obs))) => {
                // The poll's one clock read: an observation is timed by when
                // the consumer asked for it.
                self.liveness.seen(entered);
                self.probe = None;
                match core.observe(obs, first) {
                    Applied::First => StepOutcome::Yield,
                    Applied::Synced => {
                        // Rare, and the schedule of the next relists counts
                        // from it: the clock itself, not the poll's time.
                        let now = Instant::now();
                        self.healthy_since.get_or_insert(now);
                        self.liveness.synced(now);
                        StepOutcome::Again
                    }
                    Applied::Nothing => StepOutcome::Again,
                }
            }
            Poll::Ready(Some(Err(e))) => StepOutcome::Failed(Error::Session(e)),
            Poll::Ready(None) => StepOutcome::Failed(Error::SessionEnded),
            Poll::Pending => {
                drop(g);
                let span = self.span.clone();
                let _g = span.enter();
                self.quiet(dial, &core.config, cx)
            }
        }
    }

    /// The session has nothing ready: the probe's answer, then what the
    /// liveness rules say is due.
    fn quiet<D: Dial<Cursor = C>>(
        &mut self,
        dial: &mut D,
        config: &WatchConfig,
        cx: &mut Context<'_>,
    ) -> StepOutcome<C> {
        let now = Instant::now();
        if let Some(probe) = &mut self.probe {
            match probe.as_mut().poll(cx) {
                Poll::Ready(Ok(())) => {
                    tracing::debug!("probe answered; session alive");
                    self.probe = None;
                    self.liveness.seen(now);
                }
                Poll::Ready(Err(e)) => {
                    return StepOutcome::Failed(Error::ProbeFailed {
                        silent: self.liveness.silent_before_probe(),
                        source: e,
                    });
                }
                Poll::Pending => {}
            }
        }
        match self.liveness.due(now, config) {
            Due::Relist { lagged } => {
                tracing::debug!(lagged, "resync: redialing from the cursor");
                StepOutcome::To(State::Idle)
            }
            Due::ProbeTimedOut { silent } => StepOutcome::Failed(Error::ProbeTimeout {
                silent,
                timeout: config.probe_timeout,
            }),
            Due::Probe => {
                if let Some(probe) = dial.probe() {
                    tracing::debug!(silent = ?self.liveness.silent(now), "session silent: probing");
                    self.probe = Some(probe);
                    self.liveness.probing(now);
                } else {
                    // No probe: silence is an idle engine.
                    self.liveness.seen(now);
                }
                StepOutcome::Again
            }
            Due::Wait(deadline) => {
                // Silence only moves the deadline later, so a busy session
                // costs no timer work per event: an earlier pending deadline
                // is kept, and when it fires the rules are asked again.
                let timer = match &mut self.timer {
                    Some(t) => {
                        if t.deadline() <= now || t.deadline() > deadline {
                            t.as_mut().reset(deadline);
                        }
                        t
                    }
                    None => self.timer.insert(Box::pin(sleep_until(deadline))),
                };
                if timer.as_mut().poll(cx).is_ready() {
                    StepOutcome::Again
                } else {
                    StepOutcome::Pending
                }
            }
        }
    }
}
