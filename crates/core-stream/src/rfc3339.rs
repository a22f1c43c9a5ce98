//! RFC 3339 times, read and written in one place for every lookout crate
//! (the Docker API's `Created`/`StartedAt`, etcd records' `at`, the CLI's
//! lines): the calendar arithmetic is `jiff`'s; this file only holds RFC 3339's
//! shape, stricter than the ISO 8601 forms `jiff` also reads.
//!
//! Part of the public API (other lookout crates and their users read and
//! write the same times): its signatures hold `std` types only, so the
//! calendar library behind it is no dependency of the API.

use std::time::SystemTime;

use jiff::Timestamp;

/// Reads an RFC 3339 time: `2026-12-02T08:06:07.539127241Z`, with `T`, `t` or
/// a space between date and clock, up to nine fraction digits, and `Z`, `z` or
/// a `±HH:MM` offset. `None` for anything else, a time outside years 0 to
/// 9999 included.
#[must_use]
pub fn parse(text: &str) -> Option<SystemTime> {
    timestamp(text).map(SystemTime::from)
}

/// [`parse`], as nanoseconds since the Unix epoch; `None` also where they do
/// not fit an `i64` (before 1677 or after 2262: Go's zero time, an unset
/// `0001-01-01T00:00:00Z`, among them).
#[must_use]
pub fn parse_nanos(text: &str) -> Option<i64> {
    i64::try_from(timestamp(text)?.as_nanosecond()).ok()
}

/// Writes a time in UTC with nine fraction digits, e.g.
/// `2026-11-30T03:42:18.979493067Z`. A time beyond what RFC 3339 can write
/// (years 0 to 9999) is written as the nearest one it can.
#[must_use]
pub fn format_nanos(time: SystemTime) -> String {
    let at = Timestamp::try_from(time).unwrap_or_else(|_| {
        if time < SystemTime::UNIX_EPOCH {
            Timestamp::MIN
        } else {
            Timestamp::MAX
        }
    });
    format!("{at:.9}")
}

fn timestamp(text: &str) -> Option<Timestamp> {
    well_formed(text).then(|| text.parse().ok())?
}

/// RFC 3339's `date-time` shape: `YYYY-MM-DD`, `T`, `HH:MM:SS`, an optional
/// fraction of 1 to 9 digits, and `Z` or `±HH:MM`; only digits where digits
/// go. The values (month 13, hour 24, …) are `jiff`'s to refuse.
fn well_formed(text: &str) -> bool {
    let b = text.as_bytes();
    let digits = |range: std::ops::Range<usize>| {
        b.get(range)
            .is_some_and(|d| d.iter().all(u8::is_ascii_digit))
    };
    if !(b.len() >= 20
        && digits(0..4)
        && b[4] == b'-'
        && digits(5..7)
        && b[7] == b'-'
        && digits(8..10)
        && matches!(b[10], b'T' | b't' | b' ')
        && digits(11..13)
        && b[13] == b':'
        && digits(14..16)
        && b[16] == b':'
        && digits(17..19))
    {
        return false;
    }
    let mut end = 19;
    if b[end] == b'.' {
        let fraction = b[end + 1..]
            .iter()
            .take_while(|c| c.is_ascii_digit())
            .count();
        if !(1..=9).contains(&fraction) {
            return false;
        }
        end += 1 + fraction;
    }
    match &b[end..] {
        [b'Z' | b'z'] => true,
        [b'+' | b'-', ..] => {
            b.len() - end == 6
                && digits(end + 1..end + 3)
                && b[end + 3] == b':'
                && digits(end + 4..end + 6)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use super::*;

    #[test]
    fn writes_nine_digits_in_utc() {
        let t = UNIX_EPOCH + Duration::new(1_796_010_138, 979_493_067);
        assert_eq!(format_nanos(t), "2026-11-30T03:42:18.979493067Z");
        assert_eq!(format_nanos(UNIX_EPOCH), "1970-01-01T00:00:00.000000000Z");
        let before = UNIX_EPOCH - Duration::from_millis(1);
        assert_eq!(format_nanos(before), "1969-12-31T23:59:59.999000000Z");
    }

    #[test]
    fn reads_what_it_writes() {
        for t in [
            UNIX_EPOCH,
            UNIX_EPOCH + Duration::new(1_796_010_138, 979_493_067),
            UNIX_EPOCH - Duration::new(86_400 * 400, 1),
        ] {
            assert_eq!(parse(&format_nanos(t)), Some(t));
        }
    }

    #[test]
    fn reads_rfc3339_only() {
        const T: i64 = 1_796_198_768_000_000_000; // 2026-12-02T08:06:08Z
        assert_eq!(parse_nanos("2026-12-02t08:06:08z"), Some(T));
        assert_eq!(parse_nanos("2026-12-02 08:06:08Z"), Some(T));
        assert_eq!(
            parse_nanos("2026-12-02T09:06:08.5+01:00"),
            Some(T + 500_000_000)
        );
        assert_eq!(parse_nanos("2026-12-02T07:36:08-00:30"), Some(T));
        // ISO 8601 forms that are not RFC 3339, which jiff alone would read.
        for other in [
            "2026-12-02T08:06Z",
            "20261202T080608Z",
            "2026-12-02T08:06:08+01",
            "2026-12-02T08:06:08+0100",
            "2026-12-02T08:06:08,5Z",
            "2026-12-02T08:06:08.Z",
            "2026-12-02T08:06:08Z[UTC]",
            "2026-12-02T08:06:08.1234567890Z",
        ] {
            assert_eq!(parse(other), None, "{other:?}");
        }
    }
}
