//! A query string's parameters, checked against what each path takes; a
//! query a path does not take is a 400 ([`BadQuery`]).

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use super::labels::LabelFilter;
use super::response::error;

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
pub struct BadQuery(pub(super) String);

pub fn bad_request(message: impl Into<String>) -> BadQuery {
    BadQuery(message.into())
}

impl IntoResponse for BadQuery {
    fn into_response(self) -> Response {
        error(StatusCode::BAD_REQUEST, self.0)
    }
}
