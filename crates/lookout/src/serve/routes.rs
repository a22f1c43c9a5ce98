//! The router: `/`, `/events`, `/instances`, `/instances/{id}`, `/healthz`,
//! `/metrics`, `/openapi.json`, behind the token; the page, the metrics,
//! the `OpenAPI` document and the 404 are here, the other handlers in their
//! own files.
//!
//! A server of several engines (`--host NAME=URI`, `--context NAME`…) has a
//! hub each: every instance and event then says its `"host"`, and `?host=`
//! (repeatable) picks engines. Of one engine, nothing says a host and
//! `?host=` is refused: the answers are those of a lookout without several.

use std::sync::Arc;

use axum::Router;
use axum::extract::State as Extract;
use axum::http::{StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use super::auth::{self, Token};
use super::events;
use super::health::healthz;
use super::instances::{instance, instances};
use super::query::Query;
use super::response::error;
use super::state::State;

mod openapi;

pub fn router(state: State, token: Option<Arc<Token>>) -> Router {
    // This server's OpenAPI document, made once.
    let document = openapi::document(&state.hosts());
    Router::new()
        .route("/", get(page))
        .route("/events", get(events::handler))
        .route("/instances", get(instances))
        .route("/instances/{*id}", get(instance))
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics))
        .route(
            "/openapi.json",
            get(move |uri: Uri| {
                let document = document.clone();
                async move { openapi::answer(document, &uri) }
            }),
        )
        .fallback(not_found)
        .with_state(state)
        .layer(axum::middleware::from_fn_with_state(token, auth::require))
}

/// The live page (`/`): static, in the binary; it reads `/instances` and
/// `/events` itself (with the token it asks for), so it is served without
/// one.
const PAGE: &str = include_str!("page.html");

async fn page(uri: Uri) -> Response {
    if let Err(e) = Query::parse(uri.query(), &[]) {
        return e.into_response();
    }
    (
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-cache"),
            // Nothing but this origin: no external request can be made.
            (
                header::CONTENT_SECURITY_POLICY,
                "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; \
                 connect-src 'self'; form-action 'none'; base-uri 'none'; frame-ancestors 'none'",
            ),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        PAGE,
    )
        .into_response()
}

async fn not_found(uri: Uri) -> Response {
    error(
        StatusCode::NOT_FOUND,
        format!("no such path: {}", uri.path()),
    )
}

async fn metrics(Extract(s): Extract<State>, uri: Uri) -> Response {
    if let Err(e) = Query::parse(uri.query(), &[]) {
        return e.into_response();
    }
    (
        StatusCode::OK,
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        s.metrics
            .render(s.engines.iter().map(|e| e.scraped(s.provider))),
    )
        .into_response()
}
