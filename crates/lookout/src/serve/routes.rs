//! The router: `/events`, `/instances`, `/instances/{id}`, `/healthz`,
//! `/metrics`; their query strings and JSON shapes.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{Path, State as Extract};
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use lookout_core::{Hub, Instance, Labels, Status, Store};
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use super::auth::{self, Token};
use super::events;
use super::frames::Frames;
use super::metrics::Metrics;
use crate::output::{Format, ReadinessJson, rfc3339_nanos, status_line};

/// What every handler shares.
#[derive(Clone, Debug)]
pub struct State {
    pub provider: &'static str,
    /// Readiness is watched (`--readiness`).
    pub readiness: bool,
    pub hub: Hub,
    pub store: Store,
    pub metrics: Metrics,
    /// `/events`' encodings of the hub's items, shared by every client.
    pub frames: Arc<Frames>,
    /// Cancelled at SIGINT/SIGTERM: open streams and waits end.
    pub shutdown: CancellationToken,
}

/// The longest `?timeout=` of `/instances/{id}?wait=…`.
const MAX_WAIT: Duration = Duration::from_secs(3600);
/// `?wait=…` without `?timeout=`.
const DEFAULT_WAIT: Duration = Duration::from_secs(30);

pub fn router(state: State, token: Option<Arc<Token>>) -> Router {
    Router::new()
        .route("/", get(page))
        .route("/events", get(events::handler))
        .route("/instances", get(instances))
        .route("/instances/{*id}", get(instance))
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics))
        .fallback(not_found)
        .with_state(state)
        .layer(axum::middleware::from_fn_with_state(token, auth::require))
}

/// A JSON response.
pub fn json(status: StatusCode, body: &impl Serialize) -> Response {
    match serde_json::to_vec(body) {
        Ok(bytes) => (status, [(header::CONTENT_TYPE, "application/json")], bytes).into_response(),
        Err(e) => {
            tracing::error!("cannot serialize a response: {e}");
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
}

/// `{"error": message}` with `status`.
pub fn error(status: StatusCode, message: impl Into<String>) -> Response {
    #[derive(Serialize)]
    struct Error {
        error: String,
    }
    json(
        status,
        &Error {
            error: message.into(),
        },
    )
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

/// A query string's parameters, each checked against what the path takes.
pub struct Query(Vec<(String, String)>);

impl Query {
    /// Parses `query`; a parameter not in `allowed` is an error (400).
    pub fn parse(query: Option<&str>, allowed: &[&str]) -> Result<Self, BadQuery> {
        let pairs: Vec<(String, String)> = form_urlencoded::parse(query.unwrap_or("").as_bytes())
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect();
        if let Some((k, _)) = pairs.iter().find(|(k, _)| !allowed.contains(&k.as_str())) {
            return Err(bad_request(format!(
                "unknown query parameter `{k}` (this path takes: {})",
                allowed.join(", ")
            )));
        }
        Ok(Self(pairs))
    }

    /// The one value of `key`; twice is an error.
    pub fn one(&self, key: &str) -> Result<Option<&str>, BadQuery> {
        let mut values = self
            .0
            .iter()
            .filter(|(k, _)| k == key)
            .map(|(_, v)| v.as_str());
        let first = values.next();
        if values.next().is_some() {
            return Err(bad_request(format!("`{key}` given twice")));
        }
        Ok(first)
    }

    /// A `true|false` flag (absent: false).
    pub fn flag(&self, key: &str) -> Result<bool, BadQuery> {
        match self.one(key)? {
            None | Some("false") => Ok(false),
            Some("true" | "") => Ok(true),
            Some(other) => Err(bad_request(format!(
                "`{key}` is true or false, not `{other}`"
            ))),
        }
    }

    /// Every `label=KEY=VALUE`.
    pub fn labels(&self) -> Result<LabelFilter, BadQuery> {
        let mut want = Vec::new();
        for (_, v) in self.0.iter().filter(|(k, _)| k == "label") {
            match v.split_once('=') {
                Some((k, v)) if !k.is_empty() => want.push((k.to_owned(), v.to_owned())),
                _ => {
                    return Err(bad_request(format!("`label` is KEY=VALUE, not `{v}`")));
                }
            }
        }
        Ok(LabelFilter(want))
    }
}

/// A query string this path does not take: 400 `{"error": …}`.
#[derive(Debug)]
pub struct BadQuery(String);

fn bad_request(message: impl Into<String>) -> BadQuery {
    BadQuery(message.into())
}

impl IntoResponse for BadQuery {
    fn into_response(self) -> Response {
        error(StatusCode::BAD_REQUEST, self.0)
    }
}

/// `?label=K=V`…: all must match.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct LabelFilter(Vec<(String, String)>);

impl LabelFilter {
    pub fn matches(&self, labels: &Labels) -> bool {
        self.0
            .iter()
            .all(|(k, v)| labels.get(k).is_some_and(|have| have == v))
    }

    /// No pair: every instance.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The same filter, its pairs sorted and once each.
    #[must_use]
    pub fn canonical(mut self) -> Self {
        self.0.sort();
        self.0.dedup();
        self
    }

    #[cfg(test)]
    pub fn of(pairs: &[(&str, &str)]) -> Self {
        Self(
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        )
    }
}

/// An instance as `/instances` shows it.
#[derive(Serialize)]
struct JsonInstance<'a> {
    provider: &'a str,
    instance: &'a str,
    state: &'a str,
    /// With `--readiness` only.
    #[serde(skip_serializing_if = "Option::is_none")]
    ready: Option<bool>,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    readiness: Option<ReadinessJson>,
    #[serde(skip_serializing_if = "Option::is_none")]
    labels: Option<&'a Labels>,
    #[serde(skip_serializing_if = "Option::is_none")]
    since: Option<String>,
}

impl<'a> JsonInstance<'a> {
    fn of(s: &'a State, i: &'a Instance) -> Self {
        Self {
            provider: s.provider,
            instance: i.id.as_str(),
            state: if i.running { "running" } else { "stopped" },
            ready: s.readiness.then_some(i.ready),
            readiness: ReadinessJson::new(i.readiness).filter(|_| s.readiness),
            labels: Some(&i.labels),
            since: Some(rfc3339_nanos(i.since)),
        }
    }

    /// What `?wait=gone` answers once it is gone.
    fn gone(provider: &'a str, id: &'a str) -> Self {
        Self {
            provider,
            instance: id,
            state: "gone",
            ready: None,
            readiness: None,
            labels: None,
            since: None,
        }
    }
}

fn not_synced() -> Response {
    error(
        StatusCode::SERVICE_UNAVAILABLE,
        "not synced with the engine yet",
    )
}

async fn instances(Extract(s): Extract<State>, uri: Uri) -> Response {
    let filter = match Query::parse(uri.query(), &["label"]).and_then(|q| q.labels()) {
        Ok(f) => f,
        Err(e) => return e.into_response(),
    };
    if !s.store.is_synced() {
        return not_synced();
    }
    let all = s.store.instances();
    let list: Vec<JsonInstance<'_>> = all
        .iter()
        .filter(|i| filter.matches(&i.labels))
        .map(|i| JsonInstance::of(&s, i))
        .collect();
    json(StatusCode::OK, &list)
}

/// `?wait=`: the state to wait for.
#[derive(Clone, Copy, Debug)]
enum Wait {
    Running,
    Stopped,
    Gone,
    /// Running and ready (`--readiness`).
    Ready,
    /// Existing and not ready (`--readiness`): stopped, or running unready.
    Unready,
}

impl Wait {
    fn holds(self, i: Option<&Instance>) -> bool {
        match self {
            Self::Running => i.is_some_and(|i| i.running),
            Self::Stopped => i.is_some_and(|i| !i.running),
            Self::Gone => i.is_none(),
            Self::Ready => i.is_some_and(|i| i.ready),
            Self::Unready => i.is_some_and(|i| !i.ready),
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Stopped => "stopped",
            Self::Gone => "gone",
            Self::Ready => "ready",
            Self::Unready => "unready",
        }
    }
}

/// `10s`, `500ms`, `2m`, `1h`, or plain seconds.
fn parse_duration(s: &str) -> Option<Duration> {
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (n, unit) = s.split_at(split);
    let n: u64 = n.parse().ok()?;
    match unit {
        "ms" => Some(Duration::from_millis(n)),
        "" | "s" => Some(Duration::from_secs(n)),
        "m" => n.checked_mul(60).map(Duration::from_secs),
        "h" => n.checked_mul(3600).map(Duration::from_secs),
        _ => None,
    }
}

fn wait_query(query: Option<&str>, readiness: bool) -> Result<Option<(Wait, Duration)>, BadQuery> {
    let q = Query::parse(query, &["wait", "timeout"])?;
    let wait = match q.one("wait")? {
        None => None,
        Some("running") => Some(Wait::Running),
        Some("stopped") => Some(Wait::Stopped),
        Some("gone") => Some(Wait::Gone),
        Some(w @ ("ready" | "unready")) if !readiness => {
            return Err(bad_request(format!(
                "`wait={w}` needs readiness: start lookout with --readiness"
            )));
        }
        Some("ready") => Some(Wait::Ready),
        Some("unready") => Some(Wait::Unready),
        Some(other) => {
            let more = if readiness { ", ready, unready" } else { "" };
            return Err(bad_request(format!(
                "`wait` is running, stopped, gone{more}, not `{other}`"
            )));
        }
    };
    let timeout = match q.one("timeout")? {
        None => DEFAULT_WAIT,
        Some(t) => match parse_duration(t) {
            Some(d) if d <= MAX_WAIT => d,
            _ => {
                return Err(bad_request(format!(
                    "`timeout` is a duration up to 1h (`10s`, `500ms`, `2m`), not `{t}`"
                )));
            }
        },
    };
    match wait {
        Some(w) => Ok(Some((w, timeout))),
        None if q.one("timeout")?.is_some() => Err(bad_request("`timeout` goes with `wait`")),
        None => Ok(None),
    }
}

async fn instance(Extract(s): Extract<State>, Path(id): Path<String>, uri: Uri) -> Response {
    let wait = match wait_query(uri.query(), s.readiness) {
        Ok(w) => w,
        Err(e) => return e.into_response(),
    };
    let Some((wait, timeout)) = wait else {
        if !s.store.is_synced() {
            return not_synced();
        }
        return match s.store.get(&id) {
            Some(i) => json(StatusCode::OK, &JsonInstance::of(&s, &i)),
            None => error(StatusCode::NOT_FOUND, format!("no instance `{id}`")),
        };
    };
    let until = s.store.until(id.as_str(), move |i| wait.holds(i));
    tokio::select! {
        found = tokio::time::timeout(timeout, until) => match found {
            Ok(Some(i)) => json(StatusCode::OK, &JsonInstance::of(&s, &i)),
            Ok(None) => json(StatusCode::OK, &JsonInstance::gone(s.provider, &id)),
            Err(_) => error(
                StatusCode::REQUEST_TIMEOUT,
                format!("`{id}` is not {} after {timeout:?}", wait.as_str()),
            ),
        },
        () = s.shutdown.cancelled() => error(StatusCode::SERVICE_UNAVAILABLE, "shutting down"),
    }
}

async fn healthz(Extract(s): Extract<State>) -> Response {
    let json_fmt = Format {
        json: true,
        color: false,
    };
    let (code, body) = match s.store.status() {
        Some(status @ Status::Connected { .. }) if s.store.is_synced() => {
            (StatusCode::OK, status_line(s.provider, &status, json_fmt))
        }
        Some(status @ Status::Disconnected { .. }) => (
            StatusCode::SERVICE_UNAVAILABLE,
            status_line(s.provider, &status, json_fmt),
        ),
        _ => (
            StatusCode::SERVICE_UNAVAILABLE,
            r#"{"status":"connecting"}"#.to_owned(),
        ),
    };
    let mut headers = HeaderMap::new();
    headers.insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    (code, headers, body).into_response()
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
        s.metrics.render(&s.store),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10s"), Some(Duration::from_secs(10)));
        assert_eq!(parse_duration("10"), Some(Duration::from_secs(10)));
        assert_eq!(parse_duration("250ms"), Some(Duration::from_millis(250)));
        assert_eq!(parse_duration("2m"), Some(Duration::from_secs(120)));
        assert_eq!(parse_duration("1h"), Some(Duration::from_secs(3600)));
        for bad in [
            "",
            "s",
            "-1s",
            "1.5s",
            "10 s",
            "10d",
            "99999999999999999999s",
        ] {
            assert_eq!(parse_duration(bad), None, "{bad}");
        }
    }

    #[test]
    fn queries() {
        assert!(Query::parse(Some("initial=true&label=a=b"), &["initial", "label"]).is_ok());
        assert!(Query::parse(Some("nope=1"), &["initial"]).is_err());
        let q = Query::parse(Some("label=a%3Db&label=c=d=e"), &["label"]).expect("query");
        let f = q.labels().expect("labels");
        let labels: Labels = [("a", "b"), ("c", "d=e")]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        assert!(f.matches(&labels));
        assert!(!f.matches(&Labels::new()));
        let q = Query::parse(Some("label=novalue"), &["label"]).expect("query");
        assert!(q.labels().is_err());
        let q = Query::parse(Some("initial=yes"), &["initial"]).expect("query");
        assert!(q.flag("initial").is_err());
        assert!(wait_query(Some("timeout=1s"), false).is_err());
        assert!(wait_query(Some("wait=running&timeout=2h"), false).is_err());
        assert!(wait_query(Some("wait=up"), false).is_err());
        assert!(matches!(
            wait_query(Some("wait=gone&timeout=5s"), false),
            Ok(Some((Wait::Gone, d))) if d == Duration::from_secs(5)
        ));
        let off = wait_query(Some("wait=ready"), false).expect_err("needs --readiness");
        assert!(off.0.contains("--readiness"), "{}", off.0);
        assert!(wait_query(Some("wait=unready"), false).is_err());
        assert!(matches!(
            wait_query(Some("wait=ready"), true),
            Ok(Some((Wait::Ready, _)))
        ));
        assert!(matches!(
            wait_query(Some("wait=unready"), true),
            Ok(Some((Wait::Unready, _)))
        ));
    }
}
