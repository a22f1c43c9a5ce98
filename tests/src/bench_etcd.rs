//! What the benches through etcd share (`etcd`, `etcd_fleet`): a run's
//! prefix deleted at the end, what the keys under a prefix hold, the
//! members' metrics, the load average.
#![allow(clippy::missing_panics_doc)]

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::time::Duration;

use lookout_etcd::Client;

use crate::engines;

/// Deletes every key under the run's prefix on drop (a bench's end, or its
/// failure).
#[derive(Debug)]
pub struct Keys {
    pub client: Client,
    pub prefix: String,
    pub rt: tokio::runtime::Handle,
}

impl Drop for Keys {
    fn drop(&mut self) {
        let key = format!("{}/", self.prefix).into_bytes();
        let end = lookout_etcd::prefix_range_end(&key);
        if let Err(e) = self.rt.block_on(self.client.delete_range(&key, &end)) {
            eprintln!("etcd: could not delete the keys under {}: {e}", self.prefix);
        }
    }
}

/// The engines' cluster for a run under `prefix`: a client (requests bounded
/// by `timeout`), the guard that deletes the prefix at the end, and the
/// `--publish` target (`etcd://HOST:PORT,…/PREFIX`).
pub fn cluster(
    rt: &tokio::runtime::Handle,
    prefix: &str,
    timeout: Duration,
) -> (Client, Keys, String) {
    let endpoints = engines::etcd_endpoints();
    let client = Client::new(
        lookout_etcd::EtcdEndpoint::parse_list(&endpoints).expect("the cluster's endpoints"),
        timeout,
    )
    .expect("an etcd client");
    let keys = Keys {
        client: client.clone(),
        prefix: prefix.to_owned(),
        rt: rt.clone(),
    };
    let hosts: Vec<&str> = endpoints
        .split(',')
        .map(|e| e.trim().trim_start_matches("http://"))
        .collect();
    let target = format!("etcd://{}/{prefix}", hosts.join(","));
    (client, keys, target)
}

/// What the keys under a prefix hold, read in pages at one revision.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stored {
    pub keys: usize,
    /// The sum of their `version`s (each key's writes since its creation).
    pub versions: i64,
    pub key_bytes: usize,
    pub value_bytes: usize,
}

/// [`Stored`] of the keys under `prefix`, in pages of 1000.
pub async fn stored(client: &Client, prefix: &str) -> Stored {
    stored_paged(client, prefix, 1000).await
}

/// [`Stored`] of the keys under `prefix`, in pages of `page` keys (etcd
/// counts the rest of the range for each page: fewer pages, less of its
/// time).
pub async fn stored_paged(client: &Client, prefix: &str, page: i64) -> Stored {
    let key = prefix.as_bytes();
    let end = lookout_etcd::prefix_range_end(key);
    let mut from = key.to_vec();
    let mut revision = 0;
    let mut s = Stored::default();
    loop {
        let r = client
            .range(&from, &end, revision, page)
            .await
            .unwrap_or_else(|e| panic!("range {prefix}: {e}"));
        revision = r.header.revision;
        s.keys += r.kvs.len();
        s.versions += r.kvs.iter().map(|kv| kv.version).sum::<i64>();
        s.key_bytes += r.kvs.iter().map(|kv| kv.key.len()).sum::<usize>();
        s.value_bytes += r.kvs.iter().map(|kv| kv.value.len()).sum::<usize>();
        match r.kvs.last() {
            Some(last) if r.more => {
                from.clone_from(&last.key);
                from.push(0);
            }
            _ => return s,
        }
    }
}

/// The load average (1, 5, 15 min) as `/proc/loadavg` says it.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// A counter of member `member`'s `/metrics` (its client URL): the sum of
/// the samples named `name` (every label set), 0 when it has none.
pub fn member_metric(member: usize, name: &str) -> f64 {
    member_metric_where(member, name, "")
}

/// [`member_metric`] of the samples whose line holds `label` (as
/// `grpc_method="Txn"`).
pub fn member_metric_where(member: usize, name: &str, label: &str) -> f64 {
    let url = engines::etcd_member_url(member);
    let addr = url.trim_start_matches("http://");
    let text = http_get(addr, "/metrics").unwrap_or_default();
    text.lines()
        .filter(|l| {
            l.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with(' ') || rest.starts_with('{'))
                && l.contains(label)
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// `GET path` of `addr` (HTTP/1.0: the body ends with the connection).
fn http_get(addr: &str, path: &str) -> Option<String> {
    let mut conn = TcpStream::connect(addr).ok()?;
    conn.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(conn, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").ok()?;
    let mut answer = String::new();
    conn.read_to_string(&mut answer).ok()?;
    answer
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
}
