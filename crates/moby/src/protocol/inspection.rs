//! What the engine answered about one object that an event asked to
//! inspect ([`Inspection`]): the input of [`Feed::inspected`](crate::protocol::Feed::inspected),
//! whoever made the request.

use serde_json::Value;

/// What the engine answered about one object.
///
/// `#[non_exhaustive]`: another kind of answer may come (a reader of the
/// feed builds these; [`Feed`](super::Feed) reads them).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Inspection {
    /// The object, as the engine describes it.
    Found(Value),
    /// The engine says it does not exist (404): it went meanwhile.
    Gone,
    /// An answer that cannot be used (another error status, a body that is
    /// not JSON): why.
    Unusable(String),
}
