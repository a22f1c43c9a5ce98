//! A watch body split into lines, each at most a given length
//! ([`Lines`]). kube's own watch reads its body with an unbounded
//! `LinesCodec`: one line that never ends — a misbehaving apiserver, a proxy,
//! a man in the middle of a plain-HTTP connection — would grow its buffer
//! until the process dies. Here a line longer than the limit is reported
//! once ([`LineError::TooLong`]) and the rest of it, up to its `\n`, is
//! skipped as it arrives, never buffered: the buffer never holds more than
//! the limit (its capacity is grown to at most the limit), plus the chunk
//! being read.

use std::mem;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use tokio_stream::Stream;

/// Why no line came.
#[derive(Debug)]
pub(crate) enum LineError<E> {
    /// A line longer than the limit: what had come of it is dropped, and
    /// the rest of it, up to its `\n`, is skipped. The next item is the
    /// line after it.
    TooLong,
    /// The body failed.
    Body(E),
}

/// The lines of a body (`\n`-terminated, without the `\n`; the last one may
/// have none), each at most `max` bytes.
pub(crate) struct Lines<S> {
    body: S,
    max: usize,
    /// The unread rest of the last chunk.
    rest: Bytes,
    /// The start of a line whose end has not come (at most `max` bytes).
    line: Vec<u8>,
    /// Inside a line over the limit, already reported: skip to its `\n`.
    skipping: bool,
    /// The body ended (or failed).
    done: bool,
}

impl<S> Lines<S> {
    /// The lines of `body`, each at most `max` bytes.
    pub(crate) fn new(body: S, max: usize) -> Self {
        Self {
            body,
            max,
            rest: Bytes::new(),
            line: Vec::new(),
            skipping: false,
            done: false,
        }
    }

    /// Appends `piece` to the line so far: `false` (and nothing kept) when
    /// the line would exceed the limit.
    fn keep(&mut self, piece: &[u8]) -> bool {
        let len = self.line.len() + piece.len();
        if len > self.max {
            self.line = Vec::new();
            return false;
        }
        if len > self.line.capacity() {
            // Grow as a `Vec` does (doubling), but never past the limit.
            let cap = len.max(self.line.capacity() * 2).min(self.max);
            self.line.reserve_exact(cap - self.line.len());
        }
        self.line.extend_from_slice(piece);
        true
    }

    /// The next line in what was read, if it holds one.
    fn split(&mut self) -> Option<Result<Bytes, ()>> {
        while !self.rest.is_empty() {
            let Some(end) = self.rest.iter().position(|b| *b == b'\n') else {
                let rest = mem::take(&mut self.rest);
                if !self.skipping && !self.keep(&rest) {
                    self.skipping = true;
                    return Some(Err(()));
                }
                return None;
            };
            let head = self.rest.split_to(end + 1).slice(..end);
            if mem::take(&mut self.skipping) {
                continue;
            }
            if self.line.is_empty() {
                // The whole line in one chunk: no copy.
                return Some(if head.len() > self.max {
                    Err(())
                } else {
                    Ok(head)
                });
            }
            return Some(if self.keep(&head) {
                Ok(Bytes::from(mem::take(&mut self.line)))
            } else {
                Err(())
            });
        }
        None
    }
}

impl<S, E> Stream for Lines<S>
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
{
    type Item = Result<Bytes, LineError<E>>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        loop {
            match this.split() {
                Some(Ok(line)) => return Poll::Ready(Some(Ok(line))),
                Some(Err(())) => return Poll::Ready(Some(Err(LineError::TooLong))),
                None => {}
            }
            if this.done {
                return Poll::Ready(None);
            }
            match ready!(Pin::new(&mut this.body).poll_next(cx)) {
                Some(Ok(chunk)) => this.rest = chunk,
                Some(Err(e)) => {
                    this.done = true;
                    return Poll::Ready(Some(Err(LineError::Body(e))));
                }
                None => {
                    this.done = true;
                    // A last line without its `\n` (kube's codec gives it too).
                    let last = mem::take(&mut this.line);
                    if !mem::take(&mut this.skipping) && !last.is_empty() {
                        return Poll::Ready(Some(Ok(Bytes::from(last))));
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use tokio_stream::StreamExt;

    use super::*;

    /// The lines of `pieces` with a limit of `max`: each line as text, a
    /// line over the limit as `TOO LONG`.
    fn split(max: usize, pieces: &[&[u8]]) -> Vec<String> {
        let body = tokio_stream::iter(
            pieces
                .iter()
                .map(|p| Ok::<_, ()>(Bytes::copy_from_slice(p)))
                .collect::<Vec<_>>(),
        );
        let lines = Lines::new(body, max);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime");
        runtime
            .block_on(lines.collect::<Vec<_>>())
            .into_iter()
            .map(|l| match l {
                Ok(line) => String::from_utf8_lossy(&line).into_owned(),
                Err(LineError::TooLong) => "TOO LONG".to_owned(),
                Err(LineError::Body(())) => "FAILED".to_owned(),
            })
            .collect()
    }

    #[test]
    fn lines_across_chunks() {
        assert_eq!(split(8, &[b"a\nb", b"c\n\nd"]), ["a", "bc", "", "d"]);
        assert_eq!(split(8, &[b"a\n"]), ["a"]);
        assert_eq!(split(8, &[b"", b"ab", b"", b"c\n"]), ["abc"]);
        assert!(split(8, &[]).is_empty());
    }

    #[test]
    fn exactly_the_limit_passes_one_more_byte_fails_and_the_next_line_is_read() {
        // In one chunk, and one byte a chunk.
        let body = b"12345678\n123456789\nnext\n";
        assert_eq!(split(8, &[body]), ["12345678", "TOO LONG", "next"]);
        let bytes: Vec<&[u8]> = body.chunks(1).collect();
        assert_eq!(split(8, &bytes), ["12345678", "TOO LONG", "next"]);
        // A line over the limit, cut anywhere: reported once, the rest
        // skipped to its newline, whatever the chunks.
        let long = [b"x".repeat(30), b"\nafter\n".to_vec()].concat();
        for cut in [1, 3, 8, 9, 10, 29, 31] {
            let pieces: Vec<&[u8]> = long.chunks(cut).collect();
            assert_eq!(split(8, &pieces), ["TOO LONG", "after"], "chunks of {cut}");
        }
        // The limit's line last, without its newline.
        assert_eq!(split(8, &[b"a\n", b"1234", b"5678"]), ["a", "12345678"]);
        // Cut off by the end of the body while skipping: nothing more.
        assert_eq!(split(8, &[b"123456789", b"0"]), ["TOO LONG"]);
    }

    #[test]
    fn the_buffer_never_holds_more_than_the_limit() {
        let mut lines = Lines::new(tokio_stream::empty::<Result<Bytes, ()>>(), 1000);
        for _ in 0..333 {
            assert!(lines.keep(b"abc"));
            assert!(lines.line.capacity() <= 1000, "{}", lines.line.capacity());
        }
        assert!(lines.keep(b"x"), "exactly the limit");
        assert_eq!(lines.line.capacity(), 1000);
        assert!(!lines.keep(b"y"), "one byte more");
        assert_eq!(lines.line.capacity(), 0, "what had come is dropped");
        // 20 000 bytes without a newline, limit 1000: reported once.
        assert_eq!(split(1000, &vec![&b"xy"[..]; 10_000]), ["TOO LONG"]);
    }

    #[test]
    fn a_failed_body_ends_the_lines() {
        let body = tokio_stream::iter([Ok(Bytes::from_static(b"a\nb")), Err(7), Ok(Bytes::new())]);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime");
        let got: Vec<_> = runtime.block_on(Lines::new(body, 8).collect::<Vec<_>>());
        assert!(matches!(&got[..], [Ok(a), Err(LineError::Body(7))] if &a[..] == b"a"));
    }
}
