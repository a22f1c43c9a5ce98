//! The cursor: a position in an engine's event feed.

use std::time::SystemTime;

/// A position in an engine's event feed: the event's `timeNano`.
///
/// A redial reads the history `since` this time, minus 1 µs (Docker's
/// `since` is inclusive and exact, Podman parses it as a float, precise to
/// about 0.25 µs), to prove that it continues the feed (see
/// [`History`](super::History)); a subscription resumed from a cursor drops
/// every event at or before it (two events in the same nanosecond, one seen
/// and one not, would lose the second; engines stamp events with the
/// nanosecond clock, so this is left as it is).
///
/// The cursor only moves forward: it is the newest time seen, whatever the
/// order the events came in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Cursor(i64);

impl Cursor {
    /// The cursor at this many nanoseconds since the Unix epoch.
    pub fn from_unix_nanos(nanos: i64) -> Self {
        Self(nanos)
    }

    /// The cursor at `time` (the epoch for an earlier time).
    pub(crate) fn from_system_time(time: SystemTime) -> Self {
        Self(
            time.duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)),
        )
    }

    /// Nanoseconds since the Unix epoch.
    pub fn unix_nanos(self) -> i64 {
        self.0
    }

    /// The time as a query value: `seconds.nanoseconds`.
    pub(crate) fn query(self) -> String {
        format!("{}.{:09}", self.0 / 1_000_000_000, self.0 % 1_000_000_000)
    }

    /// The `since` query value: 1 µs before the cursor.
    pub(crate) fn since(self) -> String {
        Self(self.0.saturating_sub(1_000).max(0)).query()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn since_is_a_microsecond_before_the_cursor() {
        assert_eq!(
            Cursor(1_796_012_924_361_184_687).since(),
            "1796012924.361183687"
        );
        assert_eq!(Cursor(1_000_000_500).since(), "0.999999500");
        assert_eq!(Cursor(10).since(), "0.000000000");
        assert_eq!(
            Cursor::from_system_time(SystemTime::UNIX_EPOCH).query(),
            "0.000000000"
        );
    }
}
