use std::pin::Pin;
use std::task::{Context, Poll, ready};

use pin_project_lite::pin_project;
use tokio_stream::Stream;

use crate::item::{Item, Status};
use crate::model::InstanceEvent;

pin_project! {
    /// Yields only the [`InstanceEvent`]s of a stream of [`Item`]s; statuses are
    /// logged with `tracing` (`info` when connected, `warn` when disconnected).
    ///
    /// Made by [`Watch::events`](crate::Watch::events).
    #[must_use = "streams do nothing unless polled"]
    #[derive(Debug)]
    pub struct Events<S> {
        #[pin]
        inner: S,
    }
}

impl<S> Events<S> {
    pub(crate) fn new(inner: S) -> Self {
        Self { inner }
    }

    /// The wrapped stream.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S: Stream<Item = Item>> Stream for Events<S> {
    type Item = InstanceEvent;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<InstanceEvent>> {
        let mut this = self.project();
        loop {
            match ready!(this.inner.as_mut().poll_next(cx)) {
                Some(Item::Event(e)) => return Poll::Ready(Some(e)),
                Some(Item::Status(Status::Connected { instances })) => {
                    tracing::info!(instances, "connected");
                }
                Some(Item::Status(Status::Disconnected {
                    error,
                    attempt,
                    retry_in,
                })) => {
                    tracing::warn!(%error, attempt, ?retry_in, "disconnected");
                }
                Some(Item::Status(Status::Lagged { missed })) => {
                    tracing::warn!(missed, "lagged: resynced");
                }
                None => return Poll::Ready(None),
            }
        }
    }
}
