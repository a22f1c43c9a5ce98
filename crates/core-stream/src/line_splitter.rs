//! A body split into `\n`-terminated lines as its chunks arrive, each line
//! at most a given length ([`LineSplitter`]): the one splitter of every
//! provider's line-delimited body (Docker's `/events`, a Kubernetes watch,
//! an etcd watch). A line over the bound is reported once
//! ([`SplitLine::TooLong`]) and the rest of it, up to its `\n`, is skipped
//! as it arrives, never buffered. What to do about it (skip it, end the
//! session) is the caller's.

use std::borrow::Cow;
use std::mem;

/// What [`LineSplitter::split`] found.
///
/// Exhaustive by nature: a line came whole, or it was too long.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SplitLine<'a> {
    /// A line, without its `\n`, at most the bound long. Borrowed from
    /// the chunk when it came whole in it (no copy: it ends just before the
    /// last byte `split` consumed, its `\n`); owned when it was joined from
    /// pieces of several chunks (the splitter's buffer, handed over).
    Line(Cow<'a, [u8]>),
    /// A line over the bound, told once: what had come of it (its start,
    /// for a log), or the whole line when its `\n` was in the same chunk.
    /// The rest of it, up to its `\n`, is skipped.
    TooLong(Cow<'a, [u8]>),
}

/// Splits a body into lines as its chunks arrive, each line at most `max`
/// bytes (without its `\n`).
///
/// Each byte is looked at once (by `memchr`), however many chunks a line
/// spans. A line that comes whole in one chunk is lent from it, not copied;
/// only a line that spans chunks is buffered, in a buffer whose capacity
/// never grows past `max`. A line over `max` is reported as soon as it is
/// known to be ([`SplitLine::TooLong`]), once; the rest of it is skipped as
/// it arrives, so the buffer never holds more than `max` bytes.
///
/// ```
/// use lookout_core::{LineSplitter, SplitLine};
///
/// let mut lines = LineSplitter::new(4);
/// let mut seen = Vec::new();
/// for chunk in [&b"ab\nc"[..], b"d\n123456", b"789\nok"] {
///     let mut chunk = chunk;
///     while let Some(split) = lines.split(&mut chunk) {
///         seen.push(match split {
///             SplitLine::Line(line) => String::from_utf8_lossy(&line).into_owned(),
///             SplitLine::TooLong(_) => "too long".to_owned(),
///         });
///     }
/// }
/// // The body ended: its last line had no `\n`.
/// seen.extend(lines.finish().map(|l| String::from_utf8_lossy(&l).into_owned()));
/// assert_eq!(seen, ["ab", "cd", "too long", "ok"]);
/// ```
#[derive(Debug, Clone)]
pub struct LineSplitter {
    max: usize,
    /// The start of a line whose `\n` has not come (at most `max` bytes).
    partial: Vec<u8>,
    /// Inside a line over the bound, already reported: skip to its `\n`.
    skipping: bool,
}

impl LineSplitter {
    /// No line yet; each line at most `max` bytes.
    pub fn new(max: usize) -> Self {
        Self {
            max,
            partial: Vec::new(),
            skipping: false,
        }
    }

    /// The longest line passed whole.
    pub fn max(&self) -> usize {
        self.max
    }

    /// How many bytes of a line whose `\n` has not come are kept.
    pub fn buffered(&self) -> usize {
        self.partial.len()
    }

    /// The next line of the body in `chunk` (and what came before it), or
    /// `None` when `chunk` is used up: what is left of an unterminated line
    /// is kept for the next chunk. `chunk` is advanced past what was
    /// consumed; call again until `None`.
    #[inline]
    pub fn split<'c>(&mut self, chunk: &mut &'c [u8]) -> Option<SplitLine<'c>> {
        loop {
            let Some(end) = memchr::memchr(b'\n', chunk) else {
                let rest = mem::take(chunk);
                if self.skipping || rest.is_empty() {
                    return None;
                }
                // `partial` never holds more than `max`: no overflow.
                if rest.len() > self.max - self.partial.len() {
                    self.skipping = true;
                    return Some(SplitLine::TooLong(self.start(rest)));
                }
                self.keep(rest);
                return None;
            };
            let (head, rest) = chunk.split_at(end);
            // `rest` starts with the `\n`.
            *chunk = rest.get(1..).unwrap_or_default();
            if mem::take(&mut self.skipping) {
                continue;
            }
            if self.partial.is_empty() {
                // The whole line in this chunk: no copy.
                return Some(if head.len() > self.max {
                    SplitLine::TooLong(Cow::Borrowed(head))
                } else {
                    SplitLine::Line(Cow::Borrowed(head))
                });
            }
            if head.len() > self.max - self.partial.len() {
                return Some(SplitLine::TooLong(self.start(head)));
            }
            self.keep(head);
            return Some(SplitLine::Line(Cow::Owned(mem::take(&mut self.partial))));
        }
    }

    /// The body ended: its last line, which had no `\n` (`None` when
    /// nothing of one came, or it was over the bound). The splitter is then
    /// as new.
    pub fn finish(&mut self) -> Option<Vec<u8>> {
        let last = mem::take(&mut self.partial);
        (!mem::take(&mut self.skipping) && !last.is_empty()).then_some(last)
    }

    /// What had come of a line found too long, `piece` being its latest
    /// part; the buffer is dropped.
    fn start<'c>(&mut self, piece: &'c [u8]) -> Cow<'c, [u8]> {
        if self.partial.is_empty() {
            Cow::Borrowed(piece)
        } else {
            Cow::Owned(mem::take(&mut self.partial))
        }
    }

    /// Appends `piece` (which fits) to the line so far, growing the buffer
    /// as a `Vec` does (doubling) but never past `max`.
    fn keep(&mut self, piece: &[u8]) {
        let len = self.partial.len() + piece.len();
        if len > self.partial.capacity() {
            let cap = len.max(self.partial.capacity() * 2).min(self.max);
            self.partial.reserve_exact(cap - self.partial.len());
        }
        self.partial.extend_from_slice(piece);
    }
}

#[cfg(test)]
mod tests;
