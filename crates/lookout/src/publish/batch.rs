//! Several instances' writes in one txn: what a publisher does when etcd is
//! slower than its feed and transitions are queued. Each instance's write is
//! the single write's compare-and-set (its key's mod revision as last written
//! or read; on failure the key as it is now), only `K` of them share a txn,
//! so a loaded cluster is asked for one revision where it was asked for `K`.
//! What readers see is the same keys and values, `K` puts at one revision.
//!
//! A txn is all or nothing: when one compare fails nothing is written, and
//! the failure branch reads every key, so that each instance is settled as
//! the single write settles it (ours already — an answer lost —, or
//! another's record to compare with next time) and the rest is tried again.

use lookout_etcd::model::Record;
use lookout_etcd::{Client, EtcdError, b64, unb64};
use serde_json::json;

/// At most this many instances a txn: etcd refuses a txn of more than
/// `--max-txn-ops` (128 by default) operations in any of its branches;
/// half of it leaves room for a cluster set lower and keeps one txn's
/// apply short.
pub const MAX_WRITES: usize = 64;

/// At most this many bytes of keys and values a txn (before base64): etcd
/// refuses a request of more than `--max-request-bytes` (1.5 MiB by
/// default), and a txn carries each key three times (compare, put, range).
pub const MAX_BYTES: usize = 256 * 1024;

/// One instance's write: its key, the record encoded, the lease (0: none)
/// and the mod revision it is compared with (0: no key).
#[derive(Debug)]
pub struct Write {
    pub key: String,
    pub value: Vec<u8>,
    pub lease: i64,
    pub revision: i64,
}

impl Write {
    /// What it weighs against [`MAX_BYTES`].
    pub fn bytes(&self) -> usize {
        self.key.len() * 3 + self.value.len()
    }
}

/// What a compare-and-set found.
#[derive(Debug)]
pub enum Written {
    /// Written (or found written by us): the key's mod revision.
    Done(i64),
    /// The key is not as we knew it: its mod revision and record.
    /// (Boxed: a record is some 300 bytes.)
    Changed {
        revision: i64,
        held: Option<Box<Record>>,
    },
}

/// Writes `writes` (distinct keys) in one txn, each compared with its mod
/// revision; what each one found, in order. When any compare fails, none is
/// written: a key that holds its value already is `Done` (our own write,
/// whose answer was lost), the others are `Changed`.
pub async fn cas(client: &Client, writes: &[Write]) -> Result<Vec<Written>, EtcdError> {
    let mut compare = Vec::with_capacity(writes.len());
    let mut success = Vec::with_capacity(writes.len());
    let mut failure = Vec::with_capacity(writes.len());
    for w in writes {
        let k = b64(w.key.as_bytes());
        let mut put = json!({ "key": k, "value": b64(&w.value) });
        if w.lease != 0 {
            put["lease"] = w.lease.to_string().into();
        }
        compare.push(json!({
            "key": k, "target": "MOD", "result": "EQUAL", "mod_revision": w.revision.to_string(),
        }));
        success.push(json!({ "request_put": put }));
        failure.push(json!({ "request_range": { "key": k } }));
    }
    let txn = json!({ "compare": compare, "success": success, "failure": failure });
    let answer = client.txn(&txn).await?;
    if answer["succeeded"].as_bool() == Some(true) {
        let revision = answer["header"]["revision"]
            .as_str()
            .and_then(|r| r.parse().ok())
            .unwrap_or(0);
        return Ok(writes.iter().map(|_| Written::Done(revision)).collect());
    }
    Ok(writes
        .iter()
        .enumerate()
        .map(|(i, w)| {
            let kv = &answer["responses"][i]["response_range"]["kvs"][0];
            let revision = kv["mod_revision"]
                .as_str()
                .and_then(|r| r.parse().ok())
                .unwrap_or(0);
            let current = kv["value"].as_str().and_then(unb64);
            if current.as_deref() == Some(w.value.as_slice()) {
                return Written::Done(revision);
            }
            Written::Changed {
                revision,
                held: current
                    .and_then(|v| Record::from_json(&v).ok())
                    .map(Box::new),
            }
        })
        .collect())
}

/// Splits `weights` (in order) into runs of at most [`MAX_WRITES`] items
/// and [`MAX_BYTES`] (an item heavier alone is a run of its own): the
/// end index of each run.
pub fn runs(weights: impl IntoIterator<Item = usize>) -> Vec<usize> {
    let mut ends = Vec::new();
    let (mut n, mut bytes) = (0, 0);
    for (i, w) in weights.into_iter().enumerate() {
        if n > 0 && (n == MAX_WRITES || bytes + w > MAX_BYTES) {
            ends.push(i);
            (n, bytes) = (0, 0);
        }
        n += 1;
        bytes += w;
    }
    if n > 0 {
        ends.push(ends.last().copied().unwrap_or(0) + n);
    }
    ends
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_are_bounded_by_count_and_bytes() {
        assert!(runs([]).is_empty());
        assert_eq!(runs([1; 3]), [3]);
        assert_eq!(runs([1; 130]), [64, 128, 130]);
        // A heavy item alone; bytes close a run before the count does.
        assert_eq!(runs([10, MAX_BYTES + 1, 10]), [1, 2, 3]);
        assert_eq!(runs([MAX_BYTES / 2; 5]), [2, 4, 5]);
    }
}
