//! The service of an admitted connection: the router, with each request
//! marking its connection busy ([`Ticket::busy`]) until its response body
//! ends (an `/events` stream: until it closes), so that only idle
//! connections are ever shed. And the answer of a connection refused
//! because every slot is busy.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use axum::body::Body;
use axum::http::{HeaderValue, Request, StatusCode, header};
use axum::response::Response;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper_util::service::TowerToHyperService;

use super::admission::Ticket;
use super::response::error;

/// The router behind one connection's slot.
#[derive(Clone, Debug)]
pub struct BusyService {
    pub inner: TowerToHyperService<axum::Router>,
    pub ticket: Arc<Ticket>,
}

impl hyper::service::Service<Request<Incoming>> for BusyService {
    type Response = Response;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

    fn call(&self, request: Request<Incoming>) -> Self::Future {
        let busy = self.ticket.busy();
        let response = self.inner.call(request);
        Box::pin(async move {
            let response = response.await?;
            Ok(response.map(|body| {
                Body::new(body.map_frame(move |frame| {
                    let _busy = &busy;
                    frame
                }))
            }))
        })
    }
}

/// `503`, `Retry-After: 1`: every connection slot is answering a request
/// (`--max-connections`), none idle to give up.
pub fn full() -> Response {
    let mut response = error(
        StatusCode::SERVICE_UNAVAILABLE,
        "every connection is busy (--max-connections): retry",
    );
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    response
}
