//! `/instances` and `/instances/{id}` (with `?wait=…&timeout=…`): the
//! engines' stores as JSON.

use std::time::Duration;

use axum::extract::{Path, State as Extract};
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use lookout_core::{Instance, Labels};
use serde::Serialize;

use super::query::{BadQuery, Query, bad_request};
use super::response::{error, json};
use super::state::{ServedEngine, State};
use crate::duration::parse_duration;
use crate::output::{ReadinessJson, ReasonJson, rfc3339_nanos};

/// The longest `?timeout=` of `/instances/{id}?wait=…`.
const MAX_WAIT: Duration = Duration::from_secs(3600);
/// `?wait=…` without `?timeout=`.
const DEFAULT_WAIT: Duration = Duration::from_secs(30);

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
    /// Told `stopping` (only when true).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    stopping: bool,
    /// The last reason: why it stopped, or why it fails or is stopping.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    reason: Option<ReasonJson<'a>>,
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
            // A publisher's told `ready` (etcd) is no detail beside the
            // store's own `ready`: the two under one key, a JSON reader
            // would take the last (a stopped instance's kept `true`).
            readiness: ReadinessJson::new(i.readiness)
                .filter(|r| s.readiness && !matches!(r, ReadinessJson::Told { .. })),
            stopping: i.stopping,
            reason: ReasonJson::new(i.reason.as_deref()),
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
            stopping: false,
            reason: None,
            labels: None,
            since: None,
        }
    }
}

/// 503 while one of `sources` has not synced: which, when several.
fn not_synced(sources: &[&ServedEngine]) -> Option<Response> {
    let unsynced: Vec<&ServedEngine> = sources
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

pub async fn instances(Extract(s): Extract<State>, uri: Uri) -> Response {
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

pub async fn instance(Extract(s): Extract<State>, Path(id): Path<String>, uri: Uri) -> Response {
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
            let holders: Vec<&ServedEngine> = several
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

#[cfg(test)]
mod tests {
    use super::*;

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
