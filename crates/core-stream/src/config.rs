//! The knobs of [`Watch`](crate::Watch): the reconnect policy, the dial and
//! probe bounds, and the relists.

use std::time::Duration;

use crate::backoff::ReconnectPolicy;

/// Knobs of [`Watch`](crate::Watch). `WatchConfig::default()` suits a long-running watcher.
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
    /// Report the first snapshot as events with [`Origin::Initial`](crate::Origin::Initial) instead of
    /// taking it as a silent baseline. Default off.
    pub initial: bool,
    /// When the consumer leaves the stream unpolled this long, relist (by
    /// redialing from the current cursor) once the session has nothing more
    /// ready, and at the earliest [`LAG_RESYNC_SPACING`] after the previous
    /// snapshot. While nobody reads, the engine may drop events (dockerd
    /// drops them for a subscriber that is over 1024 events behind, with no
    /// sign in the feed); the relist reports what they would have. The lag
    /// is the time from handing out an item to the next poll, as a busy
    /// stream measures it: it reads the clock on one poll in 16 (a clock
    /// read per item would cost more than all the rest of its work), so the
    /// lag it sees is the time the consumer took for the last 1 to 16 items
    /// (a consumer that slow while the engine has more ready is falling
    /// behind it). A consumer that abandons a pending `next()` (a `select!`
    /// whose other branch then takes long) is not seen lagging, and only the
    /// periodic [`resync_every`](Self::resync_every) covers it. `None` turns it off.
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
