//! What the etcd v3 JSON gateway speaks: the protobuf messages as JSON, keys
//! and values in base64, int64 fields as strings (numbers are taken too).
//! The answers of [`Client`](crate::Client)'s calls ([`Header`], [`KeyValue`],
//! [`RangeResponse`], [`LeaseGrant`]) and the helpers for
//! [`Client::txn`](crate::Client::txn)'s JSON ([`b64`], [`unb64`],
//! [`prefix_range_end`]) are re-exported at the crate's root; the watch's
//! shapes are this crate's own.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde::de::{self, Deserializer};
use serde::{Deserialize, Serialize};

/// Base64 of a key or value, as the gateway's JSON wants it (for
/// [`Client::txn`](crate::Client::txn)'s request).
pub fn b64(bytes: &[u8]) -> String {
    STANDARD.encode(bytes)
}

/// A key or value the gateway's JSON wrote in base64 (as in
/// [`Client::txn`](crate::Client::txn)'s answer); `None`: no base64.
pub fn unb64(text: &str) -> Option<Vec<u8>> {
    STANDARD.decode(text.as_bytes()).ok()
}

/// The end of the range of every key starting with `prefix`: the prefix with
/// its last byte below 0xff incremented (`"\0"`, every key, when there is
/// none), as etcd's `WithPrefix`.
pub fn prefix_range_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

/// An int64 field: a string (the gateway's), or a number. A visitor, not
/// an untagged enum: a list of 100 000 keys has 400 000 of them, and an
/// untagged enum buffers each one before trying its variants.
fn int64<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    struct Int64;
    impl de::Visitor<'_> for Int64 {
        type Value = i64;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("an int64, as a string or a number")
        }
        fn visit_str<E: de::Error>(self, s: &str) -> Result<i64, E> {
            s.parse().map_err(E::custom)
        }
        fn visit_i64<E: de::Error>(self, n: i64) -> Result<i64, E> {
            Ok(n)
        }
        fn visit_u64<E: de::Error>(self, n: u64) -> Result<i64, E> {
            i64::try_from(n).map_err(E::custom)
        }
    }
    d.deserialize_any(Int64)
}

/// A key or value in base64, decoded from the JSON text where it lies (no
/// string copied first: base64 needs no JSON escape).
fn base64<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
    struct Base64;
    impl de::Visitor<'_> for Base64 {
        type Value = Vec<u8>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("base64 text")
        }
        fn visit_str<E: de::Error>(self, s: &str) -> Result<Vec<u8>, E> {
            STANDARD.decode(s.as_bytes()).map_err(E::custom)
        }
    }
    d.deserialize_str(Base64)
}

/// Every response's header: the store's revision when it was served.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[non_exhaustive]
pub struct Header {
    /// The revision of the store (0 when absent, as protobuf omits it).
    #[serde(default, deserialize_with = "int64")]
    pub revision: i64,
}

/// One key and its value at some revision.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[non_exhaustive]
pub struct KeyValue {
    /// The key.
    #[serde(default, deserialize_with = "base64")]
    pub key: Vec<u8>,
    /// The value (empty for a deletion).
    #[serde(default, deserialize_with = "base64")]
    pub value: Vec<u8>,
    /// The revision of the key's creation.
    #[serde(default, deserialize_with = "int64")]
    pub create_revision: i64,
    /// The revision of the key's last modification.
    #[serde(default, deserialize_with = "int64")]
    pub mod_revision: i64,
    /// How many times the key was written since its creation.
    #[serde(default, deserialize_with = "int64")]
    pub version: i64,
    /// The key's lease id (0: none).
    #[serde(default, deserialize_with = "int64")]
    pub lease: i64,
}

/// `POST /v3/kv/range`'s answer.
#[derive(Clone, Debug, Default, Deserialize)]
#[non_exhaustive]
pub struct RangeResponse {
    /// The revision the range was read at.
    #[serde(default)]
    pub header: Header,
    /// The keys (at most `limit`).
    #[serde(default)]
    pub kvs: Vec<KeyValue>,
    /// More keys than `limit` remain.
    #[serde(default)]
    pub more: bool,
    /// How many keys the range holds (whatever `limit`).
    #[serde(default, deserialize_with = "int64")]
    pub count: i64,
}

/// A watch event's type: protobuf omits the default, `PUT`.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
pub(crate) enum EventType {
    /// A key was put.
    #[default]
    #[serde(rename = "PUT")]
    Put,
    /// A key was deleted (its lease expired, or a delete).
    #[serde(rename = "DELETE")]
    Delete,
}

/// One watch event.
#[derive(Clone, Debug, Default, Deserialize)]
pub(crate) struct Event {
    /// Put or delete.
    #[serde(default, rename = "type")]
    pub(crate) kind: EventType,
    /// The key after the event (a deletion: the key, `mod_revision` the
    /// deletion's revision, no value).
    #[serde(default)]
    pub(crate) kv: KeyValue,
    /// The key before the event, when the watch asked for it and etcd still has it.
    #[serde(default)]
    pub(crate) prev_kv: Option<KeyValue>,
}

/// One message of a watch stream.
#[derive(Clone, Debug, Default, Deserialize)]
pub(crate) struct WatchResponse {
    /// The store's revision: for a progress notification (no event), every
    /// event up to it has been sent.
    #[serde(default)]
    pub(crate) header: Header,
    /// The answer to the create request.
    #[serde(default)]
    pub(crate) created: bool,
    /// The watch ended: `compact_revision` > 0 when its revision was compacted.
    #[serde(default)]
    pub(crate) canceled: bool,
    /// The oldest revision still served, when the watch was canceled for compaction.
    #[serde(default, deserialize_with = "int64")]
    pub(crate) compact_revision: i64,
    /// Why etcd canceled the watch.
    #[serde(default)]
    pub(crate) cancel_reason: String,
    /// The events, in revision order (empty: a progress notification).
    #[serde(default)]
    pub(crate) events: Vec<Event>,
}

/// An error of the gateway: a unary answer `{"code","message"}`, or a watch
/// line's `{"error":{"grpc_code","http_code","message"}}`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
pub(crate) struct GatewayError {
    /// The gRPC status code (11: out of range, i.e. compacted; 14: unavailable).
    #[serde(default, alias = "grpc_code")]
    pub(crate) code: i32,
    /// etcd's message.
    #[serde(default)]
    pub(crate) message: String,
}

/// One line of a watch stream.
#[derive(Debug, Deserialize)]
pub(crate) struct WatchLine {
    #[serde(default)]
    pub(crate) result: Option<WatchResponse>,
    #[serde(default)]
    pub(crate) error: Option<GatewayError>,
}

/// `POST /v3/lease/grant`'s answer.
#[derive(Clone, Copy, Debug, Default, Deserialize)]
#[non_exhaustive]
pub struct LeaseGrant {
    /// The lease id.
    #[serde(default, rename = "ID", deserialize_with = "int64")]
    pub id: i64,
    /// Its time to live, in seconds.
    #[serde(default, rename = "TTL", deserialize_with = "int64")]
    pub ttl: i64,
}

/// `create_request` of `POST /v3/watch`.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct WatchCreate {
    pub(crate) key: String,
    pub(crate) range_end: String,
    pub(crate) start_revision: String,
    pub(crate) prev_kv: bool,
    pub(crate) progress_notify: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_a_watch_line() {
        let line = br#"{"result":{"header":{"cluster_id":"1","revision":"3","raft_term":"2"},"events":[{"kv":{"key":"dC9pL2EveA==","create_revision":"2","mod_revision":"2","version":"1","value":"eyJzdGF0ZSI6InJ1bm5pbmcifQ=="}},{"type":"DELETE","kv":{"key":"dC9pL2EveA==","mod_revision":"3"},"prev_kv":{"key":"dC9pL2EveA==","mod_revision":"2","value":"e30="}}]}}"#;
        let l: WatchLine = serde_json::from_slice(line).expect("decodes");
        let r = l.result.expect("a result");
        assert_eq!(r.header.revision, 3);
        assert_eq!(r.events.len(), 2);
        assert_eq!(r.events[0].kind, EventType::Put);
        assert_eq!(r.events[0].kv.key, b"t/i/a/x");
        assert_eq!(r.events[0].kv.value, br#"{"state":"running"}"#);
        assert_eq!(r.events[1].kind, EventType::Delete);
        assert_eq!(r.events[1].kv.mod_revision, 3);
        assert_eq!(
            r.events[1].prev_kv.as_ref().map(|p| p.value.clone()),
            Some(b"{}".to_vec())
        );
    }

    #[test]
    fn decodes_created_canceled_progress_and_errors() {
        let created: WatchLine =
            serde_json::from_str(r#"{"result":{"header":{"revision":"6"},"created":true}}"#)
                .expect("decodes");
        assert!(
            created
                .result
                .is_some_and(|r| r.created && r.events.is_empty())
        );
        let canceled: WatchLine = serde_json::from_str(
            r#"{"result":{"header":{},"canceled":true,"compact_revision":"3"}}"#,
        )
        .expect("decodes");
        let c = canceled.result.expect("a result");
        assert!(c.canceled);
        assert_eq!((c.compact_revision, c.header.revision), (3, 0));
        let progress: WatchLine =
            serde_json::from_str(r#"{"result":{"header":{"revision":"9"},"watch_id":"-1"}}"#)
                .expect("decodes");
        assert_eq!(progress.result.map(|r| r.header.revision), Some(9));
        let error: WatchLine = serde_json::from_str(
            r#"{"error":{"grpc_code":14,"http_code":503,"message":"no leader"}}"#,
        )
        .expect("decodes");
        assert_eq!(
            error.error,
            Some(GatewayError {
                code: 14,
                message: "no leader".into()
            })
        );
        let unary: GatewayError = serde_json::from_str(
            r#"{"code":11,"message":"etcdserver: mvcc: required revision has been compacted"}"#,
        )
        .expect("decodes");
        assert_eq!(unary.code, 11);
        let lease: LeaseGrant =
            serde_json::from_str(r#"{"header":{},"ID":"7587","TTL":"60"}"#).expect("decodes");
        assert_eq!((lease.id, lease.ttl), (7587, 60));
    }

    #[test]
    fn bad_values_fail() {
        assert!(serde_json::from_str::<KeyValue>(r#"{"key":"not base64!"}"#).is_err());
        assert!(serde_json::from_str::<Header>(r#"{"revision":"x"}"#).is_err());
        assert_eq!(
            serde_json::from_str::<Header>(r#"{"revision":12}"#)
                .map(|h| h.revision)
                .ok(),
            Some(12)
        );
    }

    #[test]
    fn prefix_ends() {
        assert_eq!(prefix_range_end(b"a/i/"), b"a/i0");
        assert_eq!(prefix_range_end(b"a\xff"), b"b");
        assert_eq!(prefix_range_end(b"\xff\xff"), vec![0]);
        assert_eq!(prefix_range_end(b""), vec![0]);
        assert_eq!(b64(b"t/"), "dC8=");
    }
}
