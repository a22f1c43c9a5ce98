//! `GET /openapi.json`: the `OpenAPI` 3.1 document of `--serve`, as this
//! server answers.
//!
//! The canonical document is `serve/openapi.json` (inside the crate, so that the published crate serves it too; `docs/openapi.json`
//! is the same bytes, checked by `tests/docs.rs`). It describes `?host=` for
//! a server of several engines; a server says exactly what it takes, so
//! that a client generated from it, or a fuzzer, asks nothing it refuses:
//! of one engine (which refuses `host`) the parameter is left out, of
//! several its values are the engines' names. `tests/openapi.rs` checks
//! every answer of a real server against it, and CI runs schemathesis
//! against it (`cargo xtask schemathesis`).

use axum::http::{StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde_json::Value;

use crate::serve::query::Query;

/// The document, as written.
pub const DOCUMENT: &str = include_str!("../openapi.json");

/// Where the parameter lists point at `host`.
const HOST_REF: &str = "#/components/parameters/host";

/// The document this server serves: of one engine (`hosts` empty or one),
/// without `host`; of several, `host` one of `hosts`.
pub fn document(hosts: &[&str]) -> Bytes {
    match tailored(hosts) {
        Ok(doc) => Bytes::from(doc),
        Err(e) => {
            // Cannot happen (a unit test parses it), but the document as
            // written is still right but for `host`.
            tracing::error!("cannot tailor the OpenAPI document: {e}");
            Bytes::from_static(DOCUMENT.as_bytes())
        }
    }
}

fn tailored(hosts: &[&str]) -> Result<String, serde_json::Error> {
    let mut doc: Value = serde_json::from_str(DOCUMENT)?;
    if hosts.len() > 1 {
        if let Some(items) = doc.pointer_mut("/components/parameters/host/schema/items") {
            items["enum"] = hosts.iter().map(|h| Value::from(*h)).collect();
        }
    } else {
        without_host(&mut doc);
    }
    let mut text = serde_json::to_string_pretty(&doc)?;
    text.push('\n');
    Ok(text)
}

/// `doc` without the `host` parameter (its definition and every use).
pub fn without_host(doc: &mut Value) {
    if let Some(params) = doc
        .pointer_mut("/components/parameters")
        .and_then(Value::as_object_mut)
    {
        params.remove("host");
    }
    let operations = doc
        .get_mut("paths")
        .and_then(Value::as_object_mut)
        .into_iter()
        .flat_map(|paths| paths.values_mut())
        .filter_map(Value::as_object_mut)
        .flat_map(|item| item.values_mut());
    for op in operations {
        if let Some(list) = op.get_mut("parameters").and_then(Value::as_array_mut) {
            list.retain(|p| p.get("$ref").and_then(Value::as_str) != Some(HOST_REF));
        }
    }
}

/// The handler: `doc` (as [`document`] made it), or 400 for a query.
pub fn answer(doc: Bytes, uri: &Uri) -> Response {
    if let Err(e) = Query::parse(uri.query(), &[]) {
        return e.into_response();
    }
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        doc,
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hosts_of(doc: &Bytes) -> Vec<String> {
        let v: Value = serde_json::from_slice(doc).expect("JSON");
        let mut uses = Vec::new();
        for (path, item) in v["paths"].as_object().expect("paths") {
            for op in item.as_object().expect("an item").values() {
                for p in op["parameters"].as_array().into_iter().flatten() {
                    if p["$ref"] == HOST_REF {
                        uses.push(path.clone());
                    }
                }
            }
        }
        uses
    }

    #[test]
    fn one_engine_has_no_host_and_several_name_theirs() {
        let written: Value = serde_json::from_str(DOCUMENT).expect("the document is JSON");
        assert_eq!(written["openapi"], "3.1.0");
        let one = document(&[]);
        assert!(hosts_of(&one).is_empty());
        let v: Value = serde_json::from_slice(&one).expect("JSON");
        assert!(v.pointer("/components/parameters/host").is_none());
        assert!(v.pointer("/components/parameters/label").is_some());
        let several = document(&["a", "b"]);
        assert_eq!(
            hosts_of(&several),
            ["/events", "/instances", "/instances/{id}"]
        );
        let v: Value = serde_json::from_slice(&several).expect("JSON");
        assert_eq!(
            v.pointer("/components/parameters/host/schema/items/enum"),
            Some(&serde_json::json!(["a", "b"]))
        );
    }
}
