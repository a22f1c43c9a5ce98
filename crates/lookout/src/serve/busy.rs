//! The service of an admitted connection: the router, each request marked
//! with its connection's busy guard ([`Ticket::busy`], a request
//! extension), so that only idle connections are ever shed. The guard ends
//! with the request, once its handler has answered; an `/events` body keeps
//! it for as long as the stream is open. Nothing wraps a response body: a
//! frame costs what it did. And the answer of a connection refused because
//! every slot is busy.

use std::convert::Infallible;
use std::sync::Arc;

use axum::http::{HeaderValue, Request, StatusCode, header};
use axum::response::Response;
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
    type Future =
        <TowerToHyperService<axum::Router> as hyper::service::Service<Request<Incoming>>>::Future;

    fn call(&self, mut request: Request<Incoming>) -> Self::Future {
        request
            .extensions_mut()
            .insert(Arc::new(self.ticket.busy()));
        self.inner.call(request)
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
