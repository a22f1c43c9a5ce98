//! A watch body split into lines, each at most a given length
//! ([`K8sWatchLines`], a stream over the core's [`LineSplitter`]). kube's
//! own watch reads its body with an unbounded `LinesCodec`: one line that
//! never ends — a misbehaving apiserver, a proxy, a man in the middle of a
//! plain-HTTP connection — would grow its buffer until the process dies.
//! Here a line longer than the limit is reported once
//! ([`LineError::TooLong`]) and the rest of it, up to its `\n`, is skipped
//! as it arrives, never buffered: the buffer never holds more than the
//! limit, plus the chunk being read.

use std::borrow::Cow;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::{Buf, Bytes};
use lookout_core::{LineSplitter, SplitLine};
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

/// The lines of a Kubernetes watch body (`\n`-terminated, without the
/// `\n`; the last one may have none), each at most `max` bytes.
pub(crate) struct K8sWatchLines<S> {
    body: S,
    lines: LineSplitter,
    /// The unread rest of the last chunk.
    rest: Bytes,
    /// The body ended (or failed).
    done: bool,
}

impl<S> K8sWatchLines<S> {
    /// The lines of `body`, each at most `max` bytes.
    pub(crate) fn new(body: S, max: usize) -> Self {
        Self {
            body,
            lines: LineSplitter::new(max),
            rest: Bytes::new(),
            done: false,
        }
    }

    /// The next line in what was read, if it holds one.
    fn split(&mut self) -> Option<Result<Bytes, ()>> {
        let mut chunk: &[u8] = &self.rest;
        let split = self.lines.split(&mut chunk);
        let consumed = self.rest.len() - chunk.len();
        let line = split.map(|split| match split {
            // The whole line in one chunk: lent from it, no copy.
            SplitLine::Line(Cow::Borrowed(line)) => Ok(self.rest.slice_ref(line)),
            SplitLine::Line(Cow::Owned(line)) => Ok(Bytes::from(line)),
            SplitLine::TooLong(_) => Err(()),
        });
        self.rest.advance(consumed);
        line
    }
}

impl<S, E> Stream for K8sWatchLines<S>
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
                    if let Some(last) = this.lines.finish() {
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
        let lines = K8sWatchLines::new(body, max);
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
    fn a_line_without_end_is_reported_once() {
        // The buffer's own bound: `lookout_core::LineSplitter`'s tests.
        // 20 000 bytes without a newline, limit 1000: reported once.
        assert_eq!(split(1000, &vec![&b"xy"[..]; 10_000]), ["TOO LONG"]);
    }

    #[test]
    fn a_failed_body_ends_the_lines() {
        let body = tokio_stream::iter([Ok(Bytes::from_static(b"a\nb")), Err(7), Ok(Bytes::new())]);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime");
        let got: Vec<_> = runtime.block_on(K8sWatchLines::new(body, 8).collect::<Vec<_>>());
        assert!(matches!(&got[..], [Ok(a), Err(LineError::Body(7))] if &a[..] == b"a"));
    }
}
