//! The combinator: one reconnect loop, one state tracker, for every provider.
//!
//! [`Watch`] never ends by itself and never yields a terminal error. After
//! every (re)connect it takes a snapshot and reports each transition that
//! happened while it could not see the change feed, exactly once; live changes
//! pass only when they change the known state. Dropping it is the only
//! cancellation, and it cancels everything: the pending dial, the session's
//! connection, an in-flight probe — synchronously, since nothing is spawned.

use std::collections::VecDeque;
use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::{Instant, Sleep, sleep_until};
use tokio_stream::Stream;

use crate::backoff::{Backoff, ReconnectPolicy};
use crate::dial::{Dial, DialFuture, ProbeFuture, Session};
use crate::error::Error;
use crate::model::{InstanceEvent, Observation, Origin};
use crate::tracker::Tracker;

/// What the stream yields: an instance event or a connection status.
#[derive(Clone, Debug)]
pub enum Item {
    /// A transition of one instance.
    Event(InstanceEvent),
    /// The connection changed.
    Status(Status),
}

/// The connection status, reported between events.
#[derive(Clone, Debug)]
pub enum Status {
    /// A snapshot completed (after each successful (re)connect, and after each
    /// periodic or engine-initiated relist); the events it implied precede this.
    Connected {
        /// How many instances the stream knows now.
        instances: usize,
    },
    /// The session failed or could not start; the next dial follows in `retry_in`.
    Disconnected {
        /// Why.
        error: Arc<Error>,
        /// Consecutive failures so far, 1-based (reset by a healthy session).
        attempt: u32,
        /// The delay before the next dial, per the [`ReconnectPolicy`].
        retry_in: Duration,
    },
}

/// Knobs of [`Watch`]. `WatchConfig::default()` suits a long-running watcher.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct WatchConfig {
    /// The one reconnect policy.
    pub reconnect: ReconnectPolicy,
    /// How long one dial may take. Default 30 s.
    pub dial_timeout: Duration,
    /// After this much silence on a session, probe the engine. Default 30 s.
    pub probe_after: Duration,
    /// How long a probe may take before the session is declared stalled. Default 5 s.
    pub probe_timeout: Duration,
    /// Relist this often (by redialing from the current cursor, without delay), as
    /// a safety net for events the engine dropped. `None` turns it off. Default 5 min.
    pub resync_every: Option<Duration>,
    /// Report the first snapshot as events with [`Origin::Initial`] instead of
    /// taking it as a silent baseline. Default off.
    pub initial: bool,
    /// When the consumer leaves the stream unpolled this long, relist (by
    /// redialing from the current cursor) once the session has nothing more
    /// ready, and at the earliest [`LAG_RESYNC_SPACING`] after the previous
    /// snapshot. While nobody reads, the engine may drop events (dockerd
    /// drops them for a subscriber that is over 1024 events behind, with no
    /// sign in the feed); the relist reports what they would have. The lag
    /// is the time from handing out an item to the next poll: a consumer
    /// that abandons a pending `next()` (a `select!` whose other branch then
    /// takes long) is not seen lagging, and only the periodic
    /// [`resync_every`](Self::resync_every) covers it. `None` turns it off.
    /// Default 2 s.
    pub resync_after_lag: Option<Duration>,
}

/// The least time between a snapshot and a relist for consumer lag (see
/// [`WatchConfig::resync_after_lag`]): a consumer that is slow on every event
/// costs at most one relist per this.
pub const LAG_RESYNC_SPACING: Duration = Duration::from_secs(10);

impl Default for WatchConfig {
    fn default() -> Self {
        Self {
            reconnect: ReconnectPolicy::default(),
            dial_timeout: Duration::from_secs(30),
            probe_after: Duration::from_secs(30),
            probe_timeout: Duration::from_secs(5),
            resync_every: Some(Duration::from_secs(300)),
            resync_after_lag: Some(Duration::from_secs(2)),
            initial: false,
        }
    }
}

impl WatchConfig {
    /// Sets [`reconnect`](Self::reconnect).
    #[must_use]
    pub fn reconnect(mut self, policy: ReconnectPolicy) -> Self {
        self.reconnect = policy;
        self
    }
    /// Sets [`dial_timeout`](Self::dial_timeout).
    #[must_use]
    pub fn dial_timeout(mut self, d: Duration) -> Self {
        self.dial_timeout = d;
        self
    }
    /// Sets [`probe_after`](Self::probe_after).
    #[must_use]
    pub fn probe_after(mut self, d: Duration) -> Self {
        self.probe_after = d;
        self
    }
    /// Sets [`probe_timeout`](Self::probe_timeout).
    #[must_use]
    pub fn probe_timeout(mut self, d: Duration) -> Self {
        self.probe_timeout = d;
        self
    }
    /// Sets [`resync_every`](Self::resync_every).
    #[must_use]
    pub fn resync_every(mut self, d: Option<Duration>) -> Self {
        self.resync_every = d;
        self
    }
    /// Sets [`resync_after_lag`](Self::resync_after_lag).
    #[must_use]
    pub fn resync_after_lag(mut self, d: Option<Duration>) -> Self {
        self.resync_after_lag = d;
        self
    }
    /// Sets [`initial`](Self::initial).
    #[must_use]
    pub fn initial(mut self, on: bool) -> Self {
        self.initial = on;
        self
    }
}

struct Streaming<C> {
    session: Session<C>,
    span: tracing::Span,
    /// When the last observation (or successful probe) arrived.
    last_seen: Instant,
    /// When this session first completed a snapshot.
    healthy_since: Option<Instant>,
    /// When the last snapshot completed (periodic resync counts from here).
    synced_at: Option<Instant>,
    /// An in-flight liveness probe and when it started.
    probe: Option<(ProbeFuture, Instant)>,
    /// A relist asked for because the consumer lagged: when it is due.
    lag_resync: Option<Instant>,
}

enum State<C> {
    /// About to dial, now.
    Idle,
    Dialing {
        fut: DialFuture<C>,
        span: tracing::Span,
    },
    Streaming(Box<Streaming<C>>),
    /// Waiting out the policy's delay; the timer holds the deadline.
    Backoff,
}

impl<C> State<C> {
    fn name(&self) -> &'static str {
        match self {
            Self::Idle => "idle",
            Self::Dialing { .. } => "dialing",
            Self::Streaming(_) => "streaming",
            Self::Backoff => "backoff",
        }
    }
}

/// A resilient, leak-free stream of [`Item`]s from one engine.
///
/// Guarantees, for every provider alike:
/// - it never ends and never yields a terminal error: a failed dial or a
///   broken session yields [`Status::Disconnected`] and is retried under the
///   [`ReconnectPolicy`], forever;
/// - after each (re)connect it diffs the engine's snapshot against the last
///   known state and yields every missed transition once, [`Origin::Resync`];
/// - it never tells the past as news: a session may first replay the changes
///   made while it could not see the feed, exactly (when the engine proves
///   the replay complete: see [`Dial::dial`]); they come [`Origin::Live`]
///   with the engine's times, before that session's snapshot, which then has
///   nothing left to report for them. Every later event happened after the
///   snapshot (give or take a change racing the session's own requests);
/// - a live change passes only when it changes the known state, so an
///   inclusive `since` replay or a relist racing live events never yields a
///   duplicate: for one instance, two consecutive events always differ;
/// - a silent session is probed after [`WatchConfig::probe_after`] and
///   replaced when the probe fails or exceeds [`WatchConfig::probe_timeout`];
/// - dropping it, in any state, drops the dial, the session and the probe
///   synchronously: no task is spawned, the connections close.
///
/// `Watch` is `Unpin` and `Send`. When the consumer stops polling, nothing is
/// read: the engine's buffer fills and the engine may drop events. A consumer
/// that comes back after more than [`WatchConfig::resync_after_lag`] gets
/// what the session has ready, then, at the session's first pause, a redial:
/// what the engine dropped and any backlog not yet read come as the engine's
/// replay when it still reaches back to the last change seen, else as the
/// relist's net effect ([`Origin::Resync`]).
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
///                 Ok(Observation::Listed(lookout_core::Listed {
///                     id: "web".into(),
///                     running: true,
///                     uid: None,
///                     labels: Default::default(),
///                 })),
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
    config: WatchConfig,
    backoff: Backoff,
    tracker: Tracker,
    cursor: Option<D::Cursor>,
    state: State<D::Cursor>,
    out: VecDeque<Item>,
    synced_once: bool,
    dials: u64,
    /// When the last item was handed to the consumer (`None` after a
    /// `Pending`: then the consumer waits for the stream, not the reverse).
    yielded_at: Option<Instant>,
    // One timer serves every state: the dial timeout, the backoff delay, and
    // while streaming the earliest of silence, probe timeout and resync. Boxed
    // (once, lazily) so that `Watch` is `Unpin`: `watch.next().await` just works.
    timer: Option<Pin<Box<Sleep>>>,
}

// Nothing in `Watch` is pinned structurally: the dial, the cursor and the
// boxed futures are only ever used through `&mut`.
impl<D: Dial> Unpin for Watch<D> {}

impl<D: Dial> fmt::Debug for Watch<D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Watch")
            .field("state", &self.state.name())
            .field("instances", &self.tracker.len())
            .field("cursor", &self.cursor)
            .field("pending_items", &self.out.len())
            .finish_non_exhaustive()
    }
}

impl<D: Dial> Watch<D> {
    /// Wraps a provider's dial. Nothing happens until the stream is polled (no
    /// runtime is needed before that).
    pub fn new(dial: D, config: WatchConfig) -> Self {
        Self {
            backoff: Backoff::new(config.reconnect.clone()),
            dial,
            config,
            tracker: Tracker::default(),
            cursor: None,
            state: State::Idle,
            out: VecDeque::new(),
            synced_once: false,
            dials: 0,
            yielded_at: None,
            timer: None,
        }
    }

    /// Keeps only the instance events; statuses are logged with `tracing`.
    pub fn events(self) -> crate::Events<Self> {
        crate::Events::new(self)
    }
}

fn arm(timer: &mut Option<Pin<Box<Sleep>>>, deadline: Instant) {
    match timer {
        Some(t) => {
            if t.deadline() != deadline {
                t.as_mut().reset(deadline);
            }
        }
        None => *timer = Some(Box::pin(sleep_until(deadline))),
    }
}

/// Makes the timer fire at `deadline` or earlier, without resetting it for
/// every event: an earlier pending deadline is kept (when it fires, the caller
/// recomputes and re-arms). Silence only moves the deadline later, so a busy
/// session costs no timer work per event.
fn arm_by(timer: &mut Option<Pin<Box<Sleep>>>, deadline: Instant, now: Instant) {
    match timer {
        Some(t) if t.deadline() > now && t.deadline() <= deadline => {}
        _ => arm(timer, deadline),
    }
}

fn fired(timer: &mut Option<Pin<Box<Sleep>>>, cx: &mut Context<'_>) -> bool {
    timer
        .as_mut()
        .is_some_and(|t| t.as_mut().poll(cx).is_ready())
}

impl<D: Dial> Stream for Watch<D> {
    type Item = Item;

    #[allow(clippy::too_many_lines)]
    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Item>> {
        let this = &mut *self.get_mut();
        // One clock read per busy poll: when the consumer came back, when
        // the observations it gets arrived, and when it got its item (close
        // enough: the work below is short against every bound it serves).
        let entered = Instant::now();
        if let (Some(yielded), Some(bound), State::Streaming(s)) = (
            this.yielded_at,
            this.config.resync_after_lag,
            &mut this.state,
        ) {
            let lag = entered.saturating_duration_since(yielded);
            if lag >= bound && s.lag_resync.is_none() {
                let due = s
                    .synced_at
                    .map_or(entered, |t| (t + LAG_RESYNC_SPACING).max(entered));
                let _g = s.span.enter();
                tracing::debug!(?lag, in = ?due.duration_since(entered), "consumer lagged: relist due");
                s.lag_resync = Some(due);
            }
        }
        loop {
            if let Some(item) = this.out.pop_front() {
                this.yielded_at = Some(entered);
                return Poll::Ready(Some(item));
            }
            // Why the current session must end, if it must.
            let failure = match &mut this.state {
                State::Idle => {
                    this.dials += 1;
                    let span = tracing::debug_span!("session", dial = this.dials);
                    let fut = {
                        let _g = span.enter();
                        tracing::debug!(resume = ?this.cursor, "dialing");
                        this.dial.dial(this.cursor.as_ref())
                    };
                    arm(&mut this.timer, Instant::now() + this.config.dial_timeout);
                    this.state = State::Dialing { fut, span };
                    continue;
                }
                State::Backoff => {
                    if fired(&mut this.timer, cx) {
                        tracing::debug!("backoff over");
                        this.state = State::Idle;
                        continue;
                    }
                    this.yielded_at = None;
                    return Poll::Pending;
                }
                State::Dialing { fut, span } => {
                    let span = span.clone();
                    let _g = span.enter();
                    match fut.as_mut().poll(cx) {
                        Poll::Ready(Ok(session)) => {
                            tracing::debug!("dialed; streaming");
                            let now = Instant::now();
                            this.state = State::Streaming(Box::new(Streaming {
                                session,
                                span: span.clone(),
                                last_seen: now,
                                healthy_since: None,
                                synced_at: None,
                                probe: None,
                                lag_resync: None,
                            }));
                            continue;
                        }
                        Poll::Ready(Err(e)) => Error::Dial(e),
                        Poll::Pending => {
                            if fired(&mut this.timer, cx) {
                                Error::DialTimeout(this.config.dial_timeout)
                            } else {
                                this.yielded_at = None;
                                return Poll::Pending;
                            }
                        }
                    }
                }
                State::Streaming(s) => {
                    let span = s.span.clone();
                    let _g = span.enter();
                    match s.session.as_mut().poll_next(cx) {
                        Poll::Ready(Some(Ok(obs))) => {
                            // The poll's one clock read: an observation is
                            // timed by when the consumer asked for it.
                            let now = entered;
                            s.last_seen = now;
                            s.probe = None;
                            match obs {
                                Observation::ResyncBegin => {
                                    tracing::debug!("snapshot begins");
                                    this.tracker.begin_resync();
                                }
                                Observation::Listed(listed) => this.tracker.listed(listed),
                                Observation::ResyncDone => {
                                    let origin = if this.synced_once {
                                        Some(Origin::Resync)
                                    } else if this.config.initial {
                                        Some(Origin::Initial)
                                    } else {
                                        None
                                    };
                                    let before = this.out.len();
                                    if this.tracker.end_resync(origin, &mut this.out) {
                                        this.synced_once = true;
                                        s.healthy_since.get_or_insert(now);
                                        s.synced_at = Some(now);
                                        let instances = this.tracker.len();
                                        tracing::debug!(
                                            instances,
                                            transitions = this.out.len() - before,
                                            "snapshot done; connected"
                                        );
                                        this.out.push_back(Item::Status(Status::Connected {
                                            instances,
                                        }));
                                    } else {
                                        tracing::debug!("snapshot end without a begin: ignored");
                                    }
                                }
                                Observation::Change(change) => {
                                    if let Some(c) = &change.cursor {
                                        this.cursor = Some(c.clone());
                                    }
                                    this.tracker.change(change, &mut this.out);
                                }
                                Observation::Progress(cursor) => {
                                    if let Some(c) = cursor {
                                        this.cursor = Some(c);
                                    }
                                }
                            }
                            continue;
                        }
                        Poll::Ready(Some(Err(e))) => Error::Session(e),
                        Poll::Ready(None) => Error::SessionEnded,
                        Poll::Pending => {
                            let now = Instant::now();
                            let mut failure = None;
                            if let Some((probe, started)) = &mut s.probe {
                                match probe.as_mut().poll(cx) {
                                    Poll::Ready(Ok(())) => {
                                        tracing::debug!("probe answered; session alive");
                                        s.probe = None;
                                        s.last_seen = now;
                                    }
                                    Poll::Ready(Err(e)) => {
                                        failure = Some(Error::ProbeFailed {
                                            silent: started.duration_since(s.last_seen),
                                            source: e,
                                        });
                                    }
                                    Poll::Pending => {}
                                }
                            }
                            if let Some(f) = failure {
                                f
                            } else {
                                // The earliest deadline among silence/probe and resync.
                                let watchdog = match &s.probe {
                                    Some((_, started)) => *started + this.config.probe_timeout,
                                    None => s.last_seen + this.config.probe_after,
                                };
                                let periodic = this
                                    .config
                                    .resync_every
                                    .and_then(|every| s.synced_at.map(|t| t + every));
                                let resync = match (periodic, s.lag_resync) {
                                    (Some(p), Some(l)) => Some(p.min(l)),
                                    (p, l) => p.or(l),
                                };
                                if resync.is_some_and(|r| r <= now) {
                                    tracing::debug!(
                                        lagged = s.lag_resync.is_some(),
                                        "resync: redialing from the cursor"
                                    );
                                    this.state = State::Idle;
                                    continue;
                                }
                                if watchdog <= now {
                                    if let Some((_, started)) = &s.probe {
                                        Error::ProbeTimeout {
                                            silent: started.duration_since(s.last_seen),
                                            timeout: this.config.probe_timeout,
                                        }
                                    } else if let Some(probe) = this.dial.probe() {
                                        tracing::debug!(
                                            silent = ?now.duration_since(s.last_seen),
                                            "session silent: probing"
                                        );
                                        s.probe = Some((probe, now));
                                        continue;
                                    } else {
                                        // No probe: silence is an idle engine.
                                        s.last_seen = now;
                                        continue;
                                    }
                                } else {
                                    let deadline = resync.map_or(watchdog, |r| r.min(watchdog));
                                    arm_by(&mut this.timer, deadline, now);
                                    if fired(&mut this.timer, cx) {
                                        continue;
                                    }
                                    this.yielded_at = None;
                                    return Poll::Pending;
                                }
                            }
                        }
                    }
                }
            };
            // One failure, one status, one delay.
            let now = Instant::now();
            if let State::Streaming(s) = &this.state
                && s.healthy_since
                    .is_some_and(|t| now.duration_since(t) >= this.config.reconnect.reset_after)
            {
                this.backoff.reset();
            }
            let (attempt, retry_in) = this.backoff.next_delay();
            tracing::debug!(
                from = this.state.name(),
                error = %failure,
                attempt,
                ?retry_in,
                "disconnected; backing off"
            );
            // Dropping the old state closes its connection now.
            this.state = State::Backoff;
            arm(&mut this.timer, now + retry_in);
            this.out.push_back(Item::Status(Status::Disconnected {
                error: Arc::new(failure),
                attempt,
                retry_in,
            }));
        }
    }
}
