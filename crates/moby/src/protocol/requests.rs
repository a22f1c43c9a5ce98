//! What each request of a session asks, without sending it: the `/events`
//! path with the session's filters, `since` a cursor, a list's path with the
//! label (and `health`) filter, percent-encoded; and how much of a list's
//! answer is read.

use lookout_core::Labels;
use serde_json::json;

use super::cursor::Cursor;
use super::objects::{Objects, Scope};

/// The largest object list accepted (64 MiB: about 100 000 containers).
pub(crate) const MAX_LIST: usize = 64 << 20;

/// `/events` with the session's filters (the objects' type and actions,
/// the caller's labels when the events carry them), without `since`.
pub(crate) fn events_path<O: Objects>(objects: &O, scope: &Scope) -> String {
    let mut filters = json!({ "type": [objects.event_type()] });
    let actions = objects.actions(scope.readiness);
    if !actions.is_empty() {
        filters["event"] = json!(actions);
    }
    if objects.labels_in_events() && !scope.labels.is_empty() {
        filters["label"] = json!(label_filter(&scope.labels));
    }
    format!("/events?filters={}", encode(&filters.to_string()))
}

/// `events_path` resumed from `cursor`.
pub(crate) fn since(events_path: &str, cursor: Cursor) -> String {
    format!("{events_path}&since={}", cursor.since())
}

/// A label filter's terms (`key=value`).
fn label_filter(labels: &Labels) -> Vec<String> {
    labels.iter().map(|(k, v)| format!("{k}={v}")).collect()
}

/// A list `path` with the label filter, and a `health` filter when given.
pub(crate) fn list_path(path: &str, labels: &Labels, health: Option<&str>) -> String {
    let mut filters = serde_json::Map::new();
    if !labels.is_empty() {
        filters.insert("label".to_owned(), json!(label_filter(labels)));
    }
    if let Some(health) = health {
        filters.insert("health".to_owned(), json!([health]));
    }
    let mut path = path.to_owned();
    if !filters.is_empty() {
        path.push(if path.contains('?') { '&' } else { '?' });
        path.push_str("filters=");
        path.push_str(&encode(&serde_json::Value::Object(filters).to_string()));
    }
    path
}

/// `path?filters=FILTERS`, the filters (the engine's JSON) encoded as a
/// query value: how a table asks the engine for a filtered list (Swarm's
/// `/tasks` of some services).
#[must_use]
pub fn filtered_path(path: &str, filters: &str) -> String {
    format!("{path}?filters={}", encode(filters))
}

/// Percent-encodes a query value (everything but RFC 3986's unreserved characters).
fn encode(s: &str) -> String {
    use std::fmt::Write;
    let mut out = String::with_capacity(s.len() * 2);
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}
