//! Line framing of an `/events` body: `\n`-terminated lines as the body's
//! pieces arrive, across piece boundaries; a line that grows past
//! [`MAX_LINE`] before its end is reported once and skipped to its `\n`.

use std::mem;

/// The longest event line accepted; a longer one is skipped as undecodable.
pub const MAX_LINE: usize = 1 << 20;

/// What the framing found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Framed<'a> {
    /// A line, without its `\n` (the last one of a body may have none).
    Line(&'a [u8]),
    /// A line over [`MAX_LINE`], with its start: the rest of it, up to its
    /// `\n`, is skipped.
    TooLong(&'a [u8]),
}

/// The framing state of one body.
#[derive(Debug, Default)]
pub(crate) struct Lines {
    /// A line not yet terminated by `\n`.
    partial: Vec<u8>,
    /// Inside a line longer than [`MAX_LINE`], already reported: skip to `\n`.
    overlong: bool,
}

impl Lines {
    /// Frames a piece of the body: `each` gets every line it completes, and
    /// a line that grows too long (once).
    pub(crate) fn push(&mut self, mut chunk: &[u8], mut each: impl FnMut(Framed<'_>)) {
        while let Some(pos) = memchr::memchr(b'\n', chunk) {
            let (head, rest) = (&chunk[..pos], &chunk[pos + 1..]);
            chunk = rest;
            if self.overlong {
                self.overlong = false;
                continue;
            }
            if self.partial.is_empty() {
                each(Framed::Line(head));
            } else {
                let mut line = mem::take(&mut self.partial);
                line.extend_from_slice(head);
                each(Framed::Line(&line));
            }
        }
        if self.overlong {
            return;
        }
        self.partial.extend_from_slice(chunk);
        if self.partial.len() > MAX_LINE {
            each(Framed::TooLong(&self.partial));
            self.partial = Vec::new();
            self.overlong = true;
        }
    }

    /// The body ended: `each` gets a last line that had no `\n`.
    pub(crate) fn finish(&mut self, mut each: impl FnMut(Framed<'_>)) {
        let line = mem::take(&mut self.partial);
        if !mem::take(&mut self.overlong) {
            each(Framed::Line(&line));
        }
    }
}

/// The start of a text, for a log message.
pub(crate) fn preview(text: &[u8]) -> String {
    const MAX: usize = 200;
    let shown = String::from_utf8_lossy(&text[..text.len().min(MAX)]);
    if text.len() > MAX {
        format!("{shown}…")
    } else {
        shown.into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(pieces: &[&[u8]]) -> Vec<String> {
        let mut lines = Lines::default();
        let mut seen = Vec::new();
        let mut record = |f: Framed<'_>| {
            seen.push(match f {
                Framed::Line(l) => String::from_utf8_lossy(l).into_owned(),
                Framed::TooLong(start) => format!("too long ({} bytes)", start.len()),
            });
        };
        for p in pieces {
            lines.push(p, &mut record);
        }
        lines.finish(&mut record);
        seen
    }

    #[test]
    fn lines_across_pieces() {
        assert_eq!(frame(&[b"a\nb", b"c\n\nd"]), ["a", "bc", "", "d"]);
        assert_eq!(frame(&[b"a\n"]), ["a", ""]);
    }

    #[test]
    fn an_overlong_line_is_reported_once_and_skipped_to_its_end() {
        let half = vec![b'x'; MAX_LINE / 2 + 1];
        let seen = frame(&[&half, &half, &half, b"yy\nnext\n"]);
        assert_eq!(
            seen,
            [
                format!("too long ({} bytes)", 2 * half.len()),
                "next".into(),
                String::new()
            ]
        );
        // Cut off by the end of the body: nothing more.
        assert_eq!(frame(&[&half, &half]).len(), 1);
    }
}
