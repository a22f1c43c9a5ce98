//! The key-value calls of [`Client`]: range, put, delete, txn, compaction,
//! and the newest modification under a range (the probe's read).

use serde_json::json;

use super::connection::Client;
use super::wire::{Header, RangeResponse, b64};
use crate::error::EtcdError;

/// An answer of which only the header is read (put, delete, compaction).
#[derive(serde::Deserialize)]
struct HeaderOnly {
    #[serde(default)]
    header: Header,
}

/// What [`Client::newest_modification`] read, at one revision.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Newest {
    /// The mod revision of the newest put among the range's keys (0: none).
    pub put: i64,
    /// How many keys the range holds.
    pub keys: i64,
    /// The store's revision it was read at.
    pub revision: i64,
}

impl Client {
    /// `range`: the keys in `[key, range_end)` (`range_end` empty: `key`
    /// alone) at `revision` (0: the newest), at most `limit` (0: all).
    pub async fn range(
        &self,
        key: &[u8],
        range_end: &[u8],
        revision: i64,
        limit: i64,
    ) -> Result<RangeResponse, EtcdError> {
        let mut body = json!({ "key": b64(key) });
        if !range_end.is_empty() {
            body["range_end"] = b64(range_end).into();
        }
        if revision > 0 {
            body["revision"] = revision.to_string().into();
        }
        if limit > 0 {
            body["limit"] = limit.to_string().into();
        }
        self.unary("/v3/kv/range", &body).await
    }

    /// The newest modification among the keys in `[key, range_end)` (its
    /// mod revision, 0 when there is no key), how many keys the range
    /// holds, and the store's revision they were read at: one request.
    pub async fn newest_modification(
        &self,
        key: &[u8],
        range_end: &[u8],
    ) -> Result<Newest, EtcdError> {
        let body = json!({
            "key": b64(key),
            "range_end": b64(range_end),
            "limit": "1",
            "sort_order": "DESCEND",
            "sort_target": "MOD",
            "keys_only": true,
        });
        let r: RangeResponse = self.unary("/v3/kv/range", &body).await?;
        Ok(Newest {
            put: r.kvs.first().map_or(0, |kv| kv.mod_revision),
            keys: r.count,
            revision: r.header.revision,
        })
    }

    /// `put` of `key` = `value` (with `lease` when not 0).
    pub async fn put(&self, key: &[u8], value: &[u8], lease: i64) -> Result<Header, EtcdError> {
        let mut body = json!({ "key": b64(key), "value": b64(value) });
        if lease != 0 {
            body["lease"] = lease.to_string().into();
        }
        let p: HeaderOnly = self.unary("/v3/kv/put", &body).await?;
        Ok(p.header)
    }

    /// `deleterange` of `key` alone.
    pub async fn delete(&self, key: &[u8]) -> Result<Header, EtcdError> {
        self.delete_range(key, &[]).await
    }

    /// `deleterange` of `[key, range_end)` (`range_end` empty: `key` alone).
    pub async fn delete_range(&self, key: &[u8], range_end: &[u8]) -> Result<Header, EtcdError> {
        let mut body = json!({ "key": b64(key) });
        if !range_end.is_empty() {
            body["range_end"] = b64(range_end).into();
        }
        let d: HeaderOnly = self.unary("/v3/kv/deleterange", &body).await?;
        Ok(d.header)
    }

    /// `txn`: `request` is the gateway's JSON `TxnRequest` (`compare`,
    /// `success`, `failure`; keys and values in base64: [`b64`](crate::b64));
    /// its JSON answer (`succeeded`, `responses`, `header`). The gateway's
    /// JSON is the contract of this call: `serde_json` is a public
    /// dependency of this crate for it.
    pub async fn txn(&self, request: &serde_json::Value) -> Result<serde_json::Value, EtcdError> {
        self.unary("/v3/kv/txn", request).await
    }

    /// Compacts the store's history up to `revision` (physically).
    pub async fn compact(&self, revision: i64) -> Result<Header, EtcdError> {
        let c: HeaderOnly = self
            .unary(
                "/v3/kv/compaction",
                &json!({ "revision": revision.to_string(), "physical": true }),
            )
            .await?;
        Ok(c.header)
    }
}
