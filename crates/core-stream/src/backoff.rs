//! The one reconnect policy.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How long to wait before each reconnect attempt.
///
/// Exponential from [`initial_delay`](Self::initial_delay), multiplied by
/// [`multiplier`](Self::multiplier) after every consecutive failure up to
/// [`max_delay`](Self::max_delay), with full jitter (each delay is drawn
/// uniformly from `[0, computed]`) unless [`jitter`](Self::jitter) is off. The
/// count of consecutive failures resets once a session has been healthy (synced
/// and streaming) for [`reset_after`](Self::reset_after).
///
/// There is no attempt limit, on purpose: an event watcher that gives up stops
/// delivering events for good after a short outage. Drop the stream to stop.
///
/// Start from `ReconnectPolicy::default()` and set what differs with the
/// builder methods; the `get_*` methods read a setting back.
#[derive(Clone, Debug, PartialEq)]
pub struct ReconnectPolicy {
    pub(crate) initial_delay: Duration,
    pub(crate) multiplier: f64,
    pub(crate) max_delay: Duration,
    pub(crate) jitter: bool,
    pub(crate) reset_after: Duration,
    pub(crate) seed: Option<u64>,
}

impl Default for ReconnectPolicy {
    fn default() -> Self {
        Self {
            initial_delay: Duration::from_millis(500),
            multiplier: 2.0,
            max_delay: Duration::from_secs(30),
            jitter: true,
            reset_after: Duration::from_secs(60),
            seed: None,
        }
    }
}

impl ReconnectPolicy {
    /// Sets the delay bound of the first retry. Default 500 ms.
    #[must_use]
    pub fn initial_delay(mut self, d: Duration) -> Self {
        self.initial_delay = d;
        self
    }
    /// Sets the growth factor of the delay bound per consecutive failure
    /// (below 1 counts as 1). Default 2.
    #[must_use]
    pub fn multiplier(mut self, factor: f64) -> Self {
        self.multiplier = factor;
        self
    }
    /// Sets the cap of the delay bound. Default 30 s.
    #[must_use]
    pub fn max_delay(mut self, d: Duration) -> Self {
        self.max_delay = d;
        self
    }
    /// Full jitter on (default) or off (each delay is exactly the bound).
    #[must_use]
    pub fn jitter(mut self, on: bool) -> Self {
        self.jitter = on;
        self
    }
    /// Sets how long a session must stay healthy before the failure count
    /// resets. Default 60 s.
    #[must_use]
    pub fn reset_after(mut self, d: Duration) -> Self {
        self.reset_after = d;
        self
    }
    /// Sets the jitter's random seed; `None` (default) seeds from the clock.
    #[must_use]
    pub fn seed(mut self, seed: Option<u64>) -> Self {
        self.seed = seed;
        self
    }

    /// The delay bound of the first retry.
    pub fn get_initial_delay(&self) -> Duration {
        self.initial_delay
    }
    /// The growth factor of the delay bound per consecutive failure.
    pub fn get_multiplier(&self) -> f64 {
        self.multiplier
    }
    /// The cap of the delay bound.
    pub fn get_max_delay(&self) -> Duration {
        self.max_delay
    }
    /// Whether full jitter is on.
    pub fn get_jitter(&self) -> bool {
        self.jitter
    }
    /// How long a session must stay healthy before the failure count resets.
    pub fn get_reset_after(&self) -> Duration {
        self.reset_after
    }
    /// The jitter's random seed; `None` seeds from the clock.
    pub fn get_seed(&self) -> Option<u64> {
        self.seed
    }

    /// The delay bound (before jitter) of the `attempt`-th consecutive failure (1-based).
    pub fn bound(&self, attempt: u32) -> Duration {
        let exp = i32::try_from(attempt.saturating_sub(1)).unwrap_or(i32::MAX);
        let secs = self.initial_delay.as_secs_f64() * self.multiplier.max(1.0).powi(exp);
        let max = self.max_delay.as_secs_f64();
        if secs.is_finite() && secs < max {
            Duration::from_secs_f64(secs)
        } else {
            self.max_delay
        }
    }
}

/// The running state of the policy: consecutive failures and the jitter source.
#[derive(Debug)]
pub(crate) struct Backoff {
    policy: ReconnectPolicy,
    attempt: u32,
    rng: u64,
}

impl Backoff {
    pub(crate) fn new(policy: ReconnectPolicy) -> Self {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let rng = policy.seed.unwrap_or_else(|| {
            let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| {
                u64::from(d.subsec_nanos()) ^ d.as_secs().rotate_left(32)
            });
            nanos
                ^ COUNTER
                    .fetch_add(1, Ordering::Relaxed)
                    .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        });
        Self {
            policy,
            attempt: 0,
            rng,
        }
    }

    #[cfg(test)]
    pub(crate) fn policy(&self) -> &ReconnectPolicy {
        &self.policy
    }

    /// Counts a failure after a session that was healthy (synced and
    /// streaming) for `healthy_for` (`None`: it never was, or no session
    /// started): past [`ReconnectPolicy::reset_after`] the count starts over.
    /// Returns `(attempt, delay)`.
    pub(crate) fn failed(&mut self, healthy_for: Option<Duration>) -> (u32, Duration) {
        if healthy_for.is_some_and(|h| h >= self.policy.reset_after) {
            self.attempt = 0;
        }
        self.next_delay()
    }

    /// Counts one failure and returns `(attempt, delay)`.
    fn next_delay(&mut self) -> (u32, Duration) {
        self.attempt = self.attempt.saturating_add(1);
        let bound = self.policy.bound(self.attempt);
        let delay = if self.policy.jitter {
            // Uniform in [0, bound] at nanosecond resolution.
            let nanos = u64::try_from(bound.as_nanos()).unwrap_or(u64::MAX);
            let r = self.next_u64();
            Duration::from_nanos(if nanos == u64::MAX {
                r
            } else {
                r % (nanos + 1)
            })
        } else {
            bound
        };
        (self.attempt, delay)
    }

    // splitmix64: tiny, fast, good enough to spread reconnects.
    fn next_u64(&mut self) -> u64 {
        self.rng = self.rng.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_grow_exponentially_to_the_cap() {
        let p = ReconnectPolicy::default();
        let bounds: Vec<u64> = (1..=9)
            .map(|a| u64::try_from(p.bound(a).as_millis()).unwrap_or(u64::MAX))
            .collect();
        assert_eq!(
            bounds,
            [500, 1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000]
        );
        assert_eq!(p.bound(u32::MAX), Duration::from_secs(30));
    }

    #[test]
    fn full_jitter_stays_within_bounds_and_varies() {
        let mut b = Backoff::new(ReconnectPolicy {
            seed: Some(7),
            ..ReconnectPolicy::default()
        });
        let mut seen = std::collections::HashSet::new();
        for attempt in 1..=50 {
            let (a, d) = b.next_delay();
            assert_eq!(a, attempt);
            assert!(d <= b.policy().bound(a), "{d:?} > bound of attempt {a}");
            seen.insert(d);
        }
        assert!(
            seen.len() > 40,
            "jitter should spread delays: {}",
            seen.len()
        );
        let (a, d) = b.failed(Some(Duration::from_secs(60)));
        assert_eq!(a, 1);
        assert!(d <= Duration::from_millis(500));
    }

    #[test]
    fn a_healthy_session_resets_the_count() {
        let mut b = Backoff::new(ReconnectPolicy {
            jitter: false,
            ..ReconnectPolicy::default()
        });
        assert_eq!(b.failed(None), (1, Duration::from_millis(500)));
        assert_eq!(b.failed(None), (2, Duration::from_secs(1)));
        // Healthy, but not for long enough: the count goes on.
        assert_eq!(
            b.failed(Some(Duration::from_secs(59))),
            (3, Duration::from_secs(2))
        );
        // Healthy for `reset_after`: it starts over.
        assert_eq!(
            b.failed(Some(Duration::from_secs(60))),
            (1, Duration::from_millis(500))
        );
    }

    #[test]
    fn no_jitter_gives_exact_bounds() {
        let mut b = Backoff::new(ReconnectPolicy {
            jitter: false,
            ..ReconnectPolicy::default()
        });
        assert_eq!(b.next_delay(), (1, Duration::from_millis(500)));
        assert_eq!(b.next_delay(), (2, Duration::from_secs(1)));
    }
}
