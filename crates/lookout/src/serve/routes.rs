//! The router: `/events`, `/instances`, `/instances/{id}`, `/healthz`,
//! `/metrics`; their query strings and JSON shapes.
//!
//! A server of several engines (`--host NAME=URI`, `--context NAME`…) has a
//! hub each: every instance and event then says its `"host"`, and `?host=`
//! (repeatable) picks engines. Of one engine, nothing says a host and
//! `?host=` is refused: the answers are those of a lookout without several.

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
use crate::output::{Format, ReadinessJson, publisher_line, rfc3339_nanos, status_line_of};

/// What every handler shares.
#[derive(Clone, Debug)]
pub struct State {
    pub provider: &'static str,
    /// Readiness is watched (`--readiness`).
    pub readiness: bool,
    /// The engines served, in the order given (one: a run without several).
    pub sources: Arc<[Source]>,
    pub metrics: Metrics,
    /// Cancelled at SIGINT/SIGTERM: open streams and waits end.
    pub shutdown: CancellationToken,
}

/// One engine the server serves.
#[derive(Clone, Debug)]
pub struct Source {
    /// Its name when the server serves several (`None`: the one engine).
    pub host: Option<Arc<str>>,
    pub hub: Hub,
    pub store: Store,
    /// `/events`' encodings of the hub's items, shared by every client.
    pub frames: Arc<Frames>,
    /// Of `lookout etcd`: each source's publisher status, beside the hub
    /// (told on `/healthz`, `/events` as SSE statuses, `/metrics`).
    pub publishers: Option<lookout_etcd::Publishers>,
}

impl Source {
    pub fn host(&self) -> Option<&str> {
        self.host.as_deref()
    }
}

impl State {
    /// Whether the server serves several engines.
    pub fn several(&self) -> bool {
        self.sources.len() > 1
    }

    /// The engines `?host=` picks (every one without it). Of one engine,
    /// `host` is refused; an unknown name is refused naming the known ones.
    pub fn select(&self, q: &Query) -> Result<Vec<&Source>, BadQuery> {
        let wanted = q.all("host");
        if wanted.is_empty() {
            return Ok(self.sources.iter().collect());
        }
        if !self.several() {
            return Err(bad_request(
                "`host` picks among several engines; this lookout serves one \
                 (several: --host NAME=URI, --context NAME, repeated)",
            ));
        }
        let mut picked: Vec<&Source> = Vec::with_capacity(wanted.len());
        for name in wanted {
            match self.sources.iter().find(|s| s.host() == Some(name)) {
                Some(s) if !picked.iter().any(|p| std::ptr::eq(*p, s)) => picked.push(s),
                Some(_) => {}
                None => {
                    return Err(bad_request(format!(
                        "no host `{name}` (this lookout serves: {})",
                        self.hosts().join(", ")
                    )));
                }
            }
        }
        Ok(picked)
    }

    /// The names of the engines, when several.
    fn hosts(&self) -> Vec<&str> {
        self.sources.iter().filter_map(Source::host).collect()
    }
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

    /// Every value of `key`, in order.
    pub fn all(&self, key: &str) -> Vec<&str> {
        self.0
            .iter()
            .filter(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
            .collect()
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
    /// Of a server of several engines only.
    #[serde(skip_serializing_if = "Option::is_none")]
    host: Option<&'a str>,
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
    fn of(s: &'a State, host: Option<&'a str>, i: &'a Instance) -> Self {
        Self {
            provider: s.provider,
            host,
            instance: i.id.as_str(),
            state: if i.running { "running" } else { "stopped" },
            ready: s.readiness.then_some(i.ready),
            readiness: ReadinessJson::new(i.readiness).filter(|_| s.readiness),
            labels: Some(&i.labels),
            since: Some(rfc3339_nanos(i.since)),
        }
    }

    /// What `?wait=gone` answers once it is gone.
    fn gone(provider: &'a str, host: Option<&'a str>, id: &'a str) -> Self {
        Self {
            provider,
            host,
            instance: id,
            state: "gone",
            ready: None,
            readiness: None,
            labels: None,
            since: None,
        }
    }
}

/// 503 while one of `sources` has not synced: which, when several.
fn not_synced(sources: &[&Source]) -> Option<Response> {
    let unsynced: Vec<&Source> = sources
        .iter()
        .copied()
        .filter(|s| !s.store.is_synced())
        .collect();
    if unsynced.is_empty() {
        return None;
    }
    let hosts: Vec<&str> = unsynced.iter().filter_map(|s| s.host()).collect();
    Some(if hosts.is_empty() {
        error(
            StatusCode::SERVICE_UNAVAILABLE,
            "not synced with the engine yet",
        )
    } else {
        error(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not synced with {} yet", hosts.join(", ")),
        )
    })
}

async fn instances(Extract(s): Extract<State>, uri: Uri) -> Response {
    let picked = Query::parse(uri.query(), &["label", "host"])
        .and_then(|q| Ok((q.labels()?, s.select(&q)?)));
    let (filter, sources) = match picked {
        Ok(p) => p,
        Err(e) => return e.into_response(),
    };
    if let Some(unavailable) = not_synced(&sources) {
        return unavailable;
    }
    let all: Vec<(Option<&str>, Vec<Instance>)> = sources
        .iter()
        .map(|src| (src.host(), src.store.instances()))
        .collect();
    let list: Vec<JsonInstance<'_>> = all
        .iter()
        .flat_map(|(host, instances)| {
            instances
                .iter()
                .filter(|i| filter.matches(&i.labels))
                .map(|i| JsonInstance::of(&s, *host, i))
        })
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

fn wait_query(q: &Query, readiness: bool) -> Result<Option<(Wait, Duration)>, BadQuery> {
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
    let picked = Query::parse(uri.query(), &["wait", "timeout", "host"])
        .and_then(|q| Ok((wait_query(&q, s.readiness)?, s.select(&q)?)));
    let (wait, sources) = match picked {
        Ok(p) => p,
        Err(e) => return e.into_response(),
    };
    let Some((wait, timeout)) = wait else {
        if let Some(unavailable) = not_synced(&sources) {
            return unavailable;
        }
        let found: Vec<(Option<&str>, Instance)> = sources
            .iter()
            .filter_map(|src| Some((src.host(), src.store.get(&id)?)))
            .collect();
        return match found.as_slice() {
            [(host, i)] => json(StatusCode::OK, &JsonInstance::of(&s, *host, i)),
            [] => error(StatusCode::NOT_FOUND, format!("no instance `{id}`")),
            several => ambiguous(&id, several.iter().filter_map(|(h, _)| *h)),
        };
    };
    // A wait watches one engine: the one picked, else the one that has it.
    let source = match sources.as_slice() {
        [one] => *one,
        several => {
            let holders: Vec<&Source> = several
                .iter()
                .copied()
                .filter(|src| src.store.get(&id).is_some())
                .collect();
            match holders.as_slice() {
                [one] => *one,
                [] => {
                    return error(
                        StatusCode::BAD_REQUEST,
                        format!(
                            "no engine has `{id}` now: `wait` on several engines needs \
                             `host` (one of: {})",
                            s.hosts().join(", ")
                        ),
                    );
                }
                many => return ambiguous(&id, many.iter().filter_map(|src| src.host())),
            }
        }
    };
    let until = source.store.until(id.as_str(), move |i| wait.holds(i));
    tokio::select! {
        found = tokio::time::timeout(timeout, until) => match found {
            Ok(Some(i)) => json(StatusCode::OK, &JsonInstance::of(&s, source.host(), &i)),
            Ok(None) => json(StatusCode::OK, &JsonInstance::gone(s.provider, source.host(), &id)),
            Err(_) => error(
                StatusCode::REQUEST_TIMEOUT,
                format!("`{id}` is not {} after {timeout:?}", wait.as_str()),
            ),
        },
        () = s.shutdown.cancelled() => error(StatusCode::SERVICE_UNAVAILABLE, "shutting down"),
    }
}

/// 404 naming the hosts: `id` names an instance on several engines, and
/// none is it until `?host=` picks one.
fn ambiguous<'a>(id: &str, hosts: impl Iterator<Item = &'a str>) -> Response {
    #[derive(Serialize)]
    struct Ambiguous<'a> {
        error: String,
        hosts: Vec<&'a str>,
    }
    json(
        StatusCode::NOT_FOUND,
        &Ambiguous {
            error: format!("`{id}` is on several engines: pick one with `host`"),
            hosts: hosts.collect(),
        },
    )
}

/// Of one engine: 200 and its `connected` status once synced, else 503 and
/// its status (`connecting` before any). Of several, and of `lookout etcd`
/// (the watch's status, with no host, then each source's publisher status,
/// its host the source): 200 when every one is connected (and each engine
/// synced), `{"status":"connected"|"unavailable","unavailable":[HOST…],
/// "sources":[each one's status, with its host]}`. A source with records
/// and no status key has no publisher: it is disconnected, so unavailable.
async fn healthz(Extract(s): Extract<State>) -> Response {
    let json_fmt = Format {
        json: true,
        color: false,
    };
    let health = |src: &Source| -> (bool, String) {
        match src.store.status() {
            Some(status @ Status::Connected { .. }) if src.store.is_synced() => (
                true,
                status_line_of(src.host(), s.provider, &status, json_fmt),
            ),
            Some(status @ Status::Disconnected { .. }) => (
                false,
                status_line_of(src.host(), s.provider, &status, json_fmt),
            ),
            _ => (
                false,
                match src.host() {
                    None => r#"{"status":"connecting"}"#.to_owned(),
                    Some(host) => {
                        serde_json::json!({"host": host, "status": "connecting"}).to_string()
                    }
                },
            ),
        }
    };
    let (ok, body) = if let [one] = &*s.sources
        && one.publishers.is_none()
    {
        health(one)
    } else {
        // Each engine's health, then its publishers' (as last read).
        let mut each = Vec::with_capacity(s.sources.len());
        for src in s.sources.iter() {
            let (ok, line) = health(src);
            each.push((ok, src.host.clone(), line));
            for p in src
                .publishers
                .iter()
                .flat_map(lookout_etcd::Publishers::statuses)
            {
                let connected = p.state == lookout_etcd::PublisherState::Connected;
                let line = publisher_line(&p, json_fmt);
                each.push((connected, Some(p.source), line));
            }
        }
        let unavailable: Vec<&str> = each
            .iter()
            .filter(|(ok, _, _)| !ok)
            .filter_map(|(_, host, _)| host.as_deref())
            .collect();
        let ok = each.iter().all(|(ok, _, _)| *ok);
        let sources: Vec<serde_json::Value> = each
            .iter()
            .map(|(_, _, line)| {
                serde_json::from_str(line).unwrap_or(serde_json::Value::String(line.clone()))
            })
            .collect();
        let body = serde_json::json!({
            "status": if ok { "connected" } else { "unavailable" },
            "unavailable": unavailable,
            "sources": sources,
        });
        (ok, body.to_string())
    };
    let code = if ok {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
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
        s.metrics.render(&s.sources),
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

    fn wait_query(
        query: Option<&str>,
        readiness: bool,
    ) -> Result<Option<(Wait, Duration)>, BadQuery> {
        super::wait_query(&Query::parse(query, &["wait", "timeout"])?, readiness)
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
