//! A query string's parameters, checked against what each path takes; a
//! query a path does not take is a 400 ([`BadQuery`]).

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use super::labels::LabelFilter;
use super::response::error;

/// One name or value: `+` is a space, `%XX` a byte; the bytes must be
/// UTF-8 (`form_urlencoded`'s decoder would put U+FFFD in their place, and a
/// filter that cannot match anything would be answered as if it could).
fn decode(raw: &str) -> Result<String, BadQuery> {
    let spaced = raw.replace('+', " ");
    percent_encoding::percent_decode_str(&spaced)
        .decode_utf8()
        .map(std::borrow::Cow::into_owned)
        .map_err(|_| bad_request(format!("`{raw}` is not UTF-8 once decoded")))
}

/// A query string's parameters, each checked against what the path takes.
pub struct Query(Vec<(String, String)>);

impl Query {
    /// Parses `query` (`application/x-www-form-urlencoded`); a parameter
    /// not in `allowed`, or one whose name or value is not UTF-8 once
    /// decoded, is an error (400).
    pub fn parse(query: Option<&str>, allowed: &[&str]) -> Result<Self, BadQuery> {
        let pairs = query
            .unwrap_or("")
            .split('&')
            .filter(|p| !p.is_empty())
            .map(|p| {
                let (k, v) = p.split_once('=').unwrap_or((p, ""));
                Ok((decode(k)?, decode(v)?))
            })
            .collect::<Result<Vec<_>, BadQuery>>()?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decoded_as_forms_are_and_strictly_utf8() {
        let q = Query::parse(
            Some("label=a%3Db+c&label=k=v&&initial"),
            &["label", "initial"],
        )
        .expect("valid");
        assert_eq!(q.all("label"), ["a=b c", "k=v"]);
        assert_eq!(q.one("initial").expect("once"), Some(""));
        let q = Query::parse(Some("label=%C3%A9=%E2%9C%93"), &["label"]).expect("valid");
        assert_eq!(q.all("label"), ["é=✓"]);
        for bad in ["label=%ff%fe=x", "label=k=%C3", "%80=v"] {
            let e = Query::parse(Some(bad), &["label"]).err();
            assert!(
                e.as_ref().is_some_and(|e| e.0.contains("not UTF-8")),
                "{bad}: {e:?}"
            );
        }
        assert!(Query::parse(Some("nope=1"), &["label"]).is_err());
    }
}
