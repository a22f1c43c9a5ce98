//! The knobs of [`Watch`](crate::Watch): the reconnect policy, the dial and
//! probe bounds, and the relists.

use std::time::Duration;

use crate::backoff::ReconnectPolicy;

/// Knobs of [`Watch`](crate::Watch). `WatchConfig::default()` suits a long-running watcher.
///
/// Set what differs from the default with the builder methods; the `get_*`
/// methods read a setting back.
#[derive(Clone, Debug)]
pub struct WatchConfig {
    pub(crate) reconnect: ReconnectPolicy,
    pub(crate) dial_timeout: Duration,
    pub(crate) probe_after: Duration,
    pub(crate) probe_timeout: Duration,
    pub(crate) resync_every: Option<Duration>,
    pub(crate) resync_after_lag: Option<Duration>,
    pub(crate) initial: bool,
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
    /// Sets the one reconnect policy. Default [`ReconnectPolicy::default()`].
    #[must_use]
    pub fn reconnect(mut self, policy: ReconnectPolicy) -> Self {
        self.reconnect = policy;
        self
    }
    /// Sets how long one dial may take. Default 30 s.
    #[must_use]
    pub fn dial_timeout(mut self, d: Duration) -> Self {
        self.dial_timeout = d;
        self
    }
    /// Sets after how much silence on a session the engine is probed. Default 30 s.
    #[must_use]
    pub fn probe_after(mut self, d: Duration) -> Self {
        self.probe_after = d;
        self
    }
    /// Sets how long a probe may take before the session is declared stalled. Default 5 s.
    #[must_use]
    pub fn probe_timeout(mut self, d: Duration) -> Self {
        self.probe_timeout = d;
        self
    }
    /// Relist this often (by redialing from the current cursor, without delay), as
    /// a safety net for events the engine dropped. `None` turns it off. Default 5 min.
    #[must_use]
    pub fn resync_every(mut self, d: Option<Duration>) -> Self {
        self.resync_every = d;
        self
    }
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
    #[must_use]
    pub fn resync_after_lag(mut self, d: Option<Duration>) -> Self {
        self.resync_after_lag = d;
        self
    }
    /// Report the first snapshot as events with [`Origin::Initial`](crate::Origin::Initial) instead of
    /// taking it as a silent baseline. Default off.
    #[must_use]
    pub fn initial(mut self, on: bool) -> Self {
        self.initial = on;
        self
    }
    /// The reconnect policy.
    pub fn get_reconnect(&self) -> &ReconnectPolicy {
        &self.reconnect
    }
    /// How long one dial may take.
    pub fn get_dial_timeout(&self) -> Duration {
        self.dial_timeout
    }
    /// After how much silence on a session the engine is probed.
    pub fn get_probe_after(&self) -> Duration {
        self.probe_after
    }
    /// How long a probe may take before the session is declared stalled.
    pub fn get_probe_timeout(&self) -> Duration {
        self.probe_timeout
    }
    /// How often to relist; `None`: never periodically.
    pub fn get_resync_every(&self) -> Option<Duration> {
        self.resync_every
    }
    /// The consumer lag after which to relist; `None`: never for lag.
    pub fn get_resync_after_lag(&self) -> Option<Duration> {
        self.resync_after_lag
    }
    /// Whether the first snapshot is reported as events.
    pub fn get_initial(&self) -> bool {
        self.initial
    }
}
