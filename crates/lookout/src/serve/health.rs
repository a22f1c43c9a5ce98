//! `/healthz`: whether each engine (and, of `lookout etcd`, each
//! publisher) is connected.

use axum::extract::State as Extract;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use lookout_core::Status;

use super::state::{ServedEngine, State};
use crate::output::{Format, publisher_line, status_line_of};

/// Of one engine: 200 and its `connected` status once synced, else 503 and
/// its status (`connecting` before any). Of several, and of `lookout etcd`
/// (the watch's status, with no host, then each source's publisher status,
/// its host the source): 200 when every one is connected (and each engine
/// synced), `{"status":"connected"|"unavailable","unavailable":[HOST…],
/// "sources":[each one's status, with its host]}`. A source with records
/// and no status key has no publisher: it is disconnected, so unavailable.
pub async fn healthz(Extract(s): Extract<State>) -> Response {
    let json_fmt = Format {
        json: true,
        color: false,
    };
    let health = |src: &ServedEngine| -> (bool, String) {
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
    let (ok, body) = if let [one] = &*s.engines
        && one.publishers.is_none()
    {
        health(one)
    } else {
        // Each engine's health, then its publishers' (as last read).
        let mut each = Vec::with_capacity(s.engines.len());
        for src in s.engines.iter() {
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
