//! The NDJSON lines of a watch body as its chunks arrive ([`Lines`]): each
//! byte is looked at once for its `\n` (a long line is not rescanned from
//! its start on every chunk: that would cost time quadratic in its length),
//! and an unterminated line over the limit is told ([`Lines::over`]) so that
//! the watch ends before its buffer grows further.

use bytes::BytesMut;

/// The unread part of a watch body.
#[derive(Debug)]
pub(crate) struct Lines {
    buf: BytesMut,
    /// How much of `buf` is known to hold no `\n`.
    scanned: usize,
    limit: usize,
}

impl Lines {
    /// No line yet; an unterminated one may hold up to `limit` bytes.
    pub(crate) fn new(limit: usize) -> Self {
        Self {
            buf: BytesMut::new(),
            scanned: 0,
            limit,
        }
    }

    /// A chunk of the body arrived.
    pub(crate) fn push(&mut self, chunk: &[u8]) {
        self.buf.extend_from_slice(chunk);
    }

    /// The body ended: what is left is its last line.
    pub(crate) fn finish(&mut self) {
        self.buf.extend_from_slice(b"\n");
    }

    /// Where the first line's `\n` is, when it has come.
    fn end(&mut self) -> Option<usize> {
        let end = self.buf[self.scanned..].iter().position(|b| *b == b'\n');
        if end.is_none() {
            self.scanned = self.buf.len();
        }
        end.map(|i| self.scanned + i)
    }

    /// The first line (without its `\n`), kept for [`Self::take`].
    pub(crate) fn first(&mut self) -> Option<&[u8]> {
        let end = self.end()?;
        Some(&self.buf[..end])
    }

    /// Takes the first line (without its `\n`), when it has come.
    pub(crate) fn take(&mut self) -> Option<BytesMut> {
        let end = self.end()?;
        self.scanned = 0;
        let mut line = self.buf.split_to(end + 1);
        line.truncate(end);
        Some(line)
    }

    /// The line not yet terminated is longer than the limit.
    pub(crate) fn over(&self) -> bool {
        self.buf.len() > self.limit
    }

    /// Nothing but whitespace is left.
    pub(crate) fn is_blank(&self) -> bool {
        self.buf.trim_ascii().is_empty()
    }

    /// What is left, unterminated.
    pub(crate) fn rest(&self) -> &[u8] {
        &self.buf
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_across_chunks_each_byte_scanned_once() {
        let mut lines = Lines::new(64);
        lines.push(b"{\"a\":1}\n{\"b\"");
        assert_eq!(lines.first(), Some(&b"{\"a\":1}"[..]));
        assert_eq!(lines.take().as_deref(), Some(&b"{\"a\":1}"[..]));
        assert_eq!(lines.take(), None);
        assert_eq!(lines.scanned, 4, "what was scanned is not scanned again");
        lines.push(b":2}\n");
        assert_eq!(lines.take().as_deref(), Some(&b"{\"b\":2}"[..]));
        assert!(lines.is_blank());
        lines.push(b"last");
        lines.finish();
        assert_eq!(lines.take().as_deref(), Some(&b"last"[..]));
    }

    #[test]
    fn a_line_over_the_limit_is_told_before_the_buffer_grows_further() {
        let mut lines = Lines::new(1024);
        let mut fed = 0;
        while !lines.over() {
            assert_eq!(lines.take(), None);
            lines.push(&[b'x'; 100]);
            fed += 100;
            assert!(fed <= 1100, "fed {fed} bytes past a limit of 1024");
        }
        assert_eq!(lines.rest().len(), 1100);
        // Exactly the limit, terminated: a line.
        let mut lines = Lines::new(1024);
        lines.push(&[b'y'; 1024]);
        assert!(!lines.over());
        lines.push(b"\n");
        assert_eq!(lines.take().map(|l| l.len()), Some(1024));
    }
}
