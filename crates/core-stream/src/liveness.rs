//! The liveness rules of one session: silence → probe → timeout, and the
//! relists (periodic, and after the consumer lagged). Pure bookkeeping of
//! instants: the session's step asks [`Liveness::due`] what is due and acts
//! on it (starts the probe, fails, redials, or waits for a deadline).

use std::time::Duration;

use tokio::time::Instant;

use crate::config::{LAG_RESYNC_SPACING, WatchConfig};

/// What a quiet session must do now (see [`Liveness::due`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Due {
    /// Nothing before this instant: wait for it (or for the session).
    Wait(Instant),
    /// Silent for [`WatchConfig::probe_after`]: probe the engine.
    Probe,
    /// The probe did not answer within [`WatchConfig::probe_timeout`]; the
    /// session had been silent this long when it started.
    ProbeTimedOut { silent: Duration },
    /// Relist now (by redialing from the cursor); `lagged` when the consumer
    /// lag asked for it, else the periodic relist.
    Relist { lagged: bool },
}

/// When a session was last heard from, probed, synced, and whether a relist
/// for consumer lag is pending.
#[derive(Debug, Clone)]
pub(crate) struct Liveness {
    /// When the last observation (or successful probe) arrived.
    last_seen: Instant,
    /// When the probe in flight started.
    probing_since: Option<Instant>,
    /// When the last snapshot completed (the periodic relist counts from here).
    synced_at: Option<Instant>,
    /// A relist asked for because the consumer lagged: when it is due.
    lag_relist: Option<Instant>,
}

impl Liveness {
    /// A session that started at `now`.
    pub(crate) fn new(now: Instant) -> Self {
        Self {
            last_seen: now,
            probing_since: None,
            synced_at: None,
            lag_relist: None,
        }
    }

    /// The session said something (or the probe answered): it is alive, and a
    /// probe in flight is no longer needed.
    pub(crate) fn seen(&mut self, now: Instant) {
        self.last_seen = now;
        self.probing_since = None;
    }

    /// A snapshot completed.
    pub(crate) fn synced(&mut self, now: Instant) {
        self.synced_at = Some(now);
    }

    /// A probe started.
    pub(crate) fn probing(&mut self, now: Instant) {
        self.probing_since = Some(now);
    }

    /// How long the session has been silent at `now`.
    pub(crate) fn silent(&self, now: Instant) -> Duration {
        now.saturating_duration_since(self.last_seen)
    }

    /// How long the session had been silent when the probe in flight started.
    pub(crate) fn silent_before_probe(&self) -> Duration {
        self.probing_since
            .map_or(Duration::ZERO, |p| p.duration_since(self.last_seen))
    }

    /// The consumer came back `lag` after it was last handed an item: with
    /// `lag` over `bound`, a relist is due once the session has nothing more
    /// ready, at the earliest [`LAG_RESYNC_SPACING`] after the last snapshot.
    /// Returns when, if this call asked for it.
    pub(crate) fn lagged(
        &mut self,
        lag: Duration,
        bound: Duration,
        now: Instant,
    ) -> Option<Instant> {
        if lag < bound || self.lag_relist.is_some() {
            return None;
        }
        let due = self
            .synced_at
            .map_or(now, |t| (t + LAG_RESYNC_SPACING).max(now));
        self.lag_relist = Some(due);
        Some(due)
    }

    /// What is due at `now` for a session with nothing ready: a relist first,
    /// then the watchdog (probe, or the probe's timeout), else the earliest
    /// deadline to wait for.
    pub(crate) fn due(&self, now: Instant, config: &WatchConfig) -> Due {
        let watchdog = match self.probing_since {
            Some(started) => started + config.probe_timeout,
            None => self.last_seen + config.probe_after,
        };
        let periodic = config
            .resync_every
            .and_then(|every| self.synced_at.map(|t| t + every));
        let relist = match (periodic, self.lag_relist) {
            (Some(p), Some(l)) => Some(p.min(l)),
            (p, l) => p.or(l),
        };
        if let Some(r) = relist
            && r <= now
        {
            return Due::Relist {
                lagged: self.lag_relist.is_some_and(|l| l <= now),
            };
        }
        if watchdog <= now {
            return match self.probing_since {
                Some(_) => Due::ProbeTimedOut {
                    silent: self.silent_before_probe(),
                },
                None => Due::Probe,
            };
        }
        Due::Wait(relist.map_or(watchdog, |r| r.min(watchdog)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> WatchConfig {
        WatchConfig::default()
            .probe_after(Duration::from_secs(30))
            .probe_timeout(Duration::from_secs(5))
            .resync_every(Some(Duration::from_secs(300)))
    }

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn silence_is_probed_then_times_out() {
        let t0 = Instant::now();
        let c = config();
        let mut l = Liveness::new(t0);
        assert_eq!(l.due(t0, &c), Due::Wait(t0 + 30 * S));
        l.seen(t0 + 10 * S);
        assert_eq!(l.due(t0 + 20 * S, &c), Due::Wait(t0 + 40 * S));
        assert_eq!(l.due(t0 + 40 * S, &c), Due::Probe);
        l.probing(t0 + 41 * S);
        assert_eq!(l.silent_before_probe(), 31 * S);
        assert_eq!(l.due(t0 + 42 * S, &c), Due::Wait(t0 + 46 * S));
        assert_eq!(
            l.due(t0 + 46 * S, &c),
            Due::ProbeTimedOut { silent: 31 * S }
        );
        // An answer (or any observation) ends the probe.
        l.seen(t0 + 43 * S);
        assert_eq!(l.due(t0 + 46 * S, &c), Due::Wait(t0 + 73 * S));
    }

    #[test]
    fn the_periodic_relist_counts_from_the_last_snapshot() {
        let t0 = Instant::now();
        let c = config().probe_after(Duration::from_secs(3600));
        let mut l = Liveness::new(t0);
        // Never synced: no periodic relist.
        assert_eq!(l.due(t0 + 1000 * S, &c), Due::Wait(t0 + 3600 * S));
        l.synced(t0 + 10 * S);
        assert_eq!(l.due(t0 + 20 * S, &c), Due::Wait(t0 + 310 * S));
        assert_eq!(l.due(t0 + 310 * S, &c), Due::Relist { lagged: false });
        // Off: never.
        let off = config().resync_every(None);
        assert_eq!(l.due(t0 + 20 * S, &off), Due::Wait(t0 + 30 * S));
    }

    #[test]
    fn a_lagging_consumer_gets_one_spaced_relist() {
        let t0 = Instant::now();
        let c = config().resync_every(None);
        let mut l = Liveness::new(t0);
        l.synced(t0);
        // Under the bound: nothing.
        assert_eq!(l.lagged(S, 2 * S, t0 + S), None);
        // Over it: due at the spacing after the snapshot, asked once.
        assert_eq!(
            l.lagged(3 * S, 2 * S, t0 + 3 * S),
            Some(t0 + LAG_RESYNC_SPACING)
        );
        assert_eq!(l.lagged(9 * S, 2 * S, t0 + 4 * S), None);
        assert_eq!(l.due(t0 + 5 * S, &c), Due::Wait(t0 + LAG_RESYNC_SPACING));
        assert_eq!(
            l.due(t0 + LAG_RESYNC_SPACING, &c),
            Due::Relist { lagged: true }
        );
        // Long after the snapshot: due at once.
        let mut late = Liveness::new(t0);
        late.synced(t0);
        let now = t0 + 60 * S;
        assert_eq!(late.lagged(3 * S, 2 * S, now), Some(now));
        // A relist comes before the watchdog.
        assert_eq!(late.due(now + 100 * S, &c), Due::Relist { lagged: true });
    }
}
