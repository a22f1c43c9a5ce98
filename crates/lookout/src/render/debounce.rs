//! `--wait MIN[:MAX]`, docker-gen's debounce: a burst of changes is
//! rendered once, MIN after its last change, and at most MAX after its
//! first (so a steady trickle of changes still renders every MAX).

use std::time::Duration;

use tokio::time::Instant;

use crate::duration::parse_duration;

/// `--wait`'s value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Wait {
    pub min: Duration,
    /// Never below `min`.
    pub max: Duration,
}

/// `MIN` or `MIN:MAX` (durations as `500ms`, `2s`); MAX defaults to MIN and
/// may not be below it.
pub fn parse_wait(arg: &str) -> Result<Wait, String> {
    let duration =
        |s: &str| parse_duration(s).ok_or_else(|| format!("`{s}` is no duration (e.g. 500ms, 2s)"));
    let (min, max) = if let Some((min, max)) = arg.split_once(':') {
        (duration(min)?, duration(max)?)
    } else {
        let min = duration(arg)?;
        (min, min)
    };
    if max < min {
        return Err(format!("MAX ({max:?}) is below MIN ({min:?})"));
    }
    Ok(Wait { min, max })
}

/// The burst being waited out.
#[derive(Debug)]
pub struct Debounce {
    wait: Wait,
    /// The first and the last change of the burst (none: no burst).
    burst: Option<(Instant, Instant)>,
}

impl Debounce {
    pub fn new(wait: Wait) -> Self {
        Self { wait, burst: None }
    }

    /// A change at `now`.
    pub fn change(&mut self, now: Instant) {
        self.burst = Some(match self.burst {
            Some((first, _)) => (first, now),
            None => (now, now),
        });
    }

    /// When the burst is due (none: no change waits).
    pub fn due(&self) -> Option<Instant> {
        self.burst
            .map(|(first, last)| (last + self.wait.min).min(first + self.wait.max))
    }

    /// The burst is rendered: the next change starts another.
    pub fn done(&mut self) {
        self.burst = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_min_and_max() {
        let ms = Duration::from_millis;
        assert_eq!(
            parse_wait("300ms:2s"),
            Ok(Wait {
                min: ms(300),
                max: ms(2000)
            })
        );
        assert_eq!(
            parse_wait("1s"),
            Ok(Wait {
                min: ms(1000),
                max: ms(1000)
            })
        );
        assert_eq!(
            parse_wait("0"),
            Ok(Wait {
                min: ms(0),
                max: ms(0)
            })
        );
        for bad in ["", "2s:1s", "1x", "1s:", ":1s", "1s:2s:3s"] {
            assert!(parse_wait(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_burst_is_due_min_after_its_last_change_and_at_most_max_after_its_first() {
        let ms = Duration::from_millis;
        let mut d = Debounce::new(Wait {
            min: ms(300),
            max: ms(2000),
        });
        assert_eq!(d.due(), None);
        let t0 = Instant::now();
        d.change(t0);
        assert_eq!(d.due(), Some(t0 + ms(300)));
        d.change(t0 + ms(200));
        assert_eq!(d.due(), Some(t0 + ms(500)), "the last change moves it on");
        d.change(t0 + ms(1900));
        assert_eq!(
            d.due(),
            Some(t0 + ms(2000)),
            "never past MAX after the first"
        );
        d.done();
        assert_eq!(d.due(), None);
        d.change(t0 + ms(2100));
        assert_eq!(d.due(), Some(t0 + ms(2400)), "a new burst");
    }
}
