//! What the core benches share.

use std::pin::Pin;
use std::task::{Context, Poll};

/// A stream over an iterator that is always ready, like
/// `futures::stream::iter` (`tokio_stream::iter` yields to the runtime every 32
/// items, which would measure the scheduler instead of the combinator).
pub struct Ready<I>(pub I);

impl<I: Iterator + Unpin> tokio_stream::Stream for Ready<I> {
    type Item = I::Item;
    fn poll_next(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Option<I::Item>> {
        Poll::Ready(self.0.next())
    }
}
