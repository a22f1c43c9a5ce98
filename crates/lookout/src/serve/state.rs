//! What every handler shares: the [`State`] of the server and each
//! [`ServedEngine`] (its hub, store, frames and, of `lookout etcd`, its
//! publishers); `?host=` picks among them.

use std::sync::Arc;

use lookout_core::{Hub, Store};
use tokio_util::sync::CancellationToken;

use super::frames::Frames;
use super::metrics::{Metrics, Scraped};
use super::query::{BadQuery, Query, bad_request};

/// What every handler shares.
#[derive(Clone, Debug)]
pub struct State {
    pub provider: &'static str,
    /// Readiness is watched (`--readiness`).
    pub readiness: bool,
    /// The engines served, in the order given (one: a run without several).
    pub engines: Arc<[ServedEngine]>,
    pub metrics: Metrics,
    /// Cancelled at SIGINT/SIGTERM: open streams and waits end.
    pub shutdown: CancellationToken,
}

/// One engine the server serves.
#[derive(Clone, Debug)]
pub struct ServedEngine {
    /// Its name when the server serves several (`None`: the one engine).
    pub host: Option<Arc<str>>,
    pub hub: Hub,
    pub store: Store,
    /// `/events`' encodings of the hub's items, shared by every client.
    pub frames: Arc<Frames>,
    /// Of `lookout etcd`: each source's publisher status, beside the hub
    /// (told on `/healthz`, `/events` as SSE statuses, `/metrics`).
    pub publishers: Option<lookout_etcd::Publishers>,
}

impl ServedEngine {
    pub fn host(&self) -> Option<&str> {
        self.host.as_deref()
    }

    /// What `/metrics` reads of it (`provider`: the server's).
    pub fn scraped(&self, provider: &str) -> Scraped<'_> {
        Scraped {
            host: self.host(),
            store: &self.store,
            publishers: self.publishers.as_ref(),
            by_kind: provider == "k8s",
        }
    }
}

impl State {
    /// Whether the server serves several engines.
    pub fn several(&self) -> bool {
        self.engines.len() > 1
    }

    /// The engines `?host=` picks (every one without it). Of one engine,
    /// `host` is refused; an unknown name is refused naming the known ones.
    pub fn select(&self, q: &Query) -> Result<Vec<&ServedEngine>, BadQuery> {
        let wanted = q.all("host");
        if wanted.is_empty() {
            return Ok(self.engines.iter().collect());
        }
        if !self.several() {
            return Err(bad_request(
                "`host` picks among several engines; this lookout serves one \
                 (several: --host NAME=URI, --context NAME, repeated)",
            ));
        }
        let mut picked: Vec<&ServedEngine> = Vec::with_capacity(wanted.len());
        for name in wanted {
            match self.engines.iter().find(|s| s.host() == Some(name)) {
                Some(s) if !picked.iter().any(|p| std::ptr::eq(*p, s)) => picked.push(s),
                Some(_) => {}
                None => {
                    return Err(bad_request(format!(
                        "no host `{name}` (this lookout serves: {})",
                        self.hosts().join(", ")
                    )));
                }
            }
        }
        Ok(picked)
    }

    /// The names of the engines, when several.
    pub fn hosts(&self) -> Vec<&str> {
        self.engines.iter().filter_map(ServedEngine::host).collect()
    }
}
