//! A size limit on every answer kube reads whole, for the clients lookout
//! builds from a kubeconfig ([`BodyLimit`], a `tower` layer of the client's
//! stack): API discovery (`/api`, `/apis`, `/apis/GROUP/VERSION`), which
//! kube's `Discovery` collects whole. The requests lookout reads itself, to
//! their own bounds (a list page, a watch line by line: `fetch.rs`,
//! `events.rs`), are marked [`ReadToBound`] and left alone: a watch's body
//! has no end. A client given to `K8sDial::with_client` is the program's:
//! it has no such layer, and its discovery is as bounded as the program
//! made it.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use http::{Request, Response};
use http_body::{Body, Frame, SizeHint};
use kube::client::Body as KubeBody;

/// Marks a request whose answer lookout reads itself, to its own bound.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ReadToBound;

/// The layer: every answer to a request not marked [`ReadToBound`] ends in
/// an error past this many bytes.
#[derive(Clone, Copy, Debug)]
pub(crate) struct BodyLimit(pub(crate) usize);

impl<S> tower_layer::Layer<S> for BodyLimit {
    type Service = Limited<S>;

    fn layer(&self, inner: S) -> Limited<S> {
        Limited {
            inner,
            limit: self.0,
        }
    }
}

/// The client's service, with [`BodyLimit`].
#[derive(Clone, Debug)]
pub(crate) struct Limited<S> {
    inner: S,
    limit: usize,
}

impl<S, B> tower_service::Service<Request<KubeBody>> for Limited<S>
where
    S: tower_service::Service<Request<KubeBody>, Response = Response<B>>,
    S::Future: Send + 'static,
    B: Send + 'static,
{
    type Response = Response<Capped<B>>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<KubeBody>) -> Self::Future {
        let limit = if request.extensions().get::<ReadToBound>().is_some() {
            None
        } else {
            Some(self.limit)
        };
        let answer = self.inner.call(request);
        Box::pin(async move {
            Ok(answer.await?.map(|inner| Capped {
                inner,
                read: 0,
                limit,
            }))
        })
    }
}

/// An answer's body, failing past its limit ([`TooLarge`]).
#[derive(Debug)]
pub(crate) struct Capped<B> {
    inner: B,
    read: usize,
    limit: Option<usize>,
}

/// An answer kube would have read whole was longer than the limit.
#[derive(Debug, thiserror::Error)]
#[error("the answer exceeds {limit} bytes (K8sConfig::max_list_page)")]
pub(crate) struct TooLarge {
    limit: usize,
}

impl<B> Body for Capped<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        let frame = match ready!(Pin::new(&mut this.inner).poll_frame(cx)) {
            Some(Ok(frame)) => frame,
            Some(Err(e)) => return Poll::Ready(Some(Err(e.into()))),
            None => return Poll::Ready(None),
        };
        if let (Some(limit), Some(data)) = (this.limit, frame.data_ref()) {
            this.read = this.read.saturating_add(data.len());
            if this.read > limit {
                return Poll::Ready(Some(Err(Box::new(TooLarge { limit }))));
            }
        }
        Poll::Ready(Some(Ok(frame)))
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
