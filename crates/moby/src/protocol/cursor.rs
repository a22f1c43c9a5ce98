//! The cursor: a position in an engine's event feed.

use std::time::SystemTime;

/// A position in an engine's event feed: the `timeNano` of the last event
/// seen, and the time up to which everything is told.
///
/// A redial reads the history `since` the last event seen, minus 1 µs
/// (Docker's `since` is inclusive and exact, Podman parses it as a float,
/// precise to about 0.25 µs), to prove that it continues the feed (see
/// [`History`](crate::History)); a subscription resumed from a cursor drops
/// every event at or before it (two events in the same nanosecond, one seen
/// and one not, would lose the second; engines stamp events with the
/// nanosecond clock, so this is left as it is).
///
/// A snapshot tells the effect of every event before it, seen or not: a
/// session moves the cursor's *told* time to when its list answered, so
/// that a later history (which still proves continuity from the last event
/// seen) replays nothing from before that snapshot — those events' effect
/// was told, and telling them again would narrate the past as news. (A
/// subscription can end before it delivers the events that raced its list:
/// Podman's event-log rotation ends every `/events` stream.) The told time
/// is lookout's clock: an engine whose clock is ahead of it could still
/// replay the events of that difference.
///
/// The cursor only moves forward: it is the newest time seen, whatever the
/// order the events came in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Cursor {
    seen: i64,
    told: i64,
}

impl Cursor {
    /// The cursor at this many nanoseconds since the Unix epoch (the last
    /// event seen, and everything told up to it).
    pub fn from_unix_nanos(nanos: i64) -> Self {
        Self {
            seen: nanos,
            told: nanos,
        }
    }

    /// The cursor at `time` (the epoch for an earlier time).
    pub(crate) fn from_system_time(time: SystemTime) -> Self {
        Self::from_unix_nanos(
            time.duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)),
        )
    }

    /// The last event seen, in nanoseconds since the Unix epoch.
    pub fn unix_nanos(self) -> i64 {
        self.seen
    }

    /// Until when everything is told (the last event seen, or a later
    /// snapshot), in nanoseconds since the Unix epoch.
    pub fn told_nanos(self) -> i64 {
        self.told
    }

    /// This cursor, with everything up to `at` told (a snapshot answered then).
    #[must_use]
    pub(crate) fn told_until(self, at: Self) -> Self {
        Self {
            seen: self.seen,
            told: self.told.max(at.told),
        }
    }

    /// The event at `time`, seen after this cursor: the cursor moves to it
    /// (what was told stays told).
    #[must_use]
    pub(crate) fn seen_at(self, time: Self) -> Self {
        Self {
            seen: time.seen,
            told: self.told.max(time.told),
        }
    }

    /// Whether the event at `time` is told: at or before the told time.
    pub(crate) fn tells(self, time: Self) -> bool {
        time.seen <= self.told
    }

    /// Whether `time` is the last event seen.
    pub(crate) fn is_seen_at(self, time: Self) -> bool {
        time.seen == self.seen
    }

    /// The time as a query value: `seconds.nanoseconds`.
    pub(crate) fn query(self) -> String {
        format!(
            "{}.{:09}",
            self.seen / 1_000_000_000,
            self.seen % 1_000_000_000
        )
    }

    /// The `since` query value: 1 µs before the last event seen.
    pub(crate) fn since(self) -> String {
        Self::from_unix_nanos(self.seen.saturating_sub(1_000).max(0)).query()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn since_is_a_microsecond_before_the_cursor() {
        assert_eq!(
            Cursor::from_unix_nanos(1_796_012_924_361_184_687).since(),
            "1796012924.361183687"
        );
        assert_eq!(
            Cursor::from_unix_nanos(1_000_000_500).since(),
            "0.999999500"
        );
        assert_eq!(Cursor::from_unix_nanos(10).since(), "0.000000000");
        assert_eq!(
            Cursor::from_system_time(SystemTime::UNIX_EPOCH).query(),
            "0.000000000"
        );
    }
}

#[cfg(test)]
mod told {
    use super::Cursor;

    #[test]
    fn a_snapshot_moves_the_told_time_not_the_last_event_seen() {
        let c = Cursor::from_unix_nanos(10).told_until(Cursor::from_unix_nanos(50));
        assert_eq!((c.unix_nanos(), c.told_nanos()), (10, 50));
        assert_eq!(c.since(), Cursor::from_unix_nanos(10).since());
        assert!(c.tells(Cursor::from_unix_nanos(50)));
        assert!(!c.tells(Cursor::from_unix_nanos(51)));
        // An event raced the list: seen, and the told time stays.
        let c = c.seen_at(Cursor::from_unix_nanos(30));
        assert_eq!((c.unix_nanos(), c.told_nanos()), (30, 50));
        let c = c.seen_at(Cursor::from_unix_nanos(60));
        assert_eq!((c.unix_nanos(), c.told_nanos()), (60, 60));
        // Never back.
        let c = c.told_until(Cursor::from_unix_nanos(40));
        assert_eq!(c.told_nanos(), 60);
    }
}
