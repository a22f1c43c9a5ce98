//! What a dial needs to know, shared by its sessions ([`Settings`]): the
//! prefix and sources read, readiness, and the bounds of a watch.

use std::time::Duration;

use crate::client::wire::prefix_range_end;

/// What a dial needs to know, shared by its sessions.
#[derive(Debug)]
pub(crate) struct Settings {
    pub(crate) prefix: String,
    /// Empty: every source.
    pub(crate) sources: Vec<String>,
    pub(crate) readiness: bool,
    /// How long the probe waits for the watch to catch up with a put.
    pub(crate) catch_up: Duration,
    /// How long a watch may take to say `created`.
    pub(crate) create_timeout: Duration,
}

impl Settings {
    /// The key range watched: the whole prefix, every source's instances
    /// and publisher statuses (those of sources not wanted are skipped).
    pub(crate) fn range(&self) -> (Vec<u8>, Vec<u8>) {
        let key = format!("{}/", self.prefix).into_bytes();
        let end = prefix_range_end(&key);
        (key, end)
    }

    /// Whether `source` is read.
    pub(crate) fn wanted(&self, source: &str) -> bool {
        self.sources.is_empty() || self.sources.iter().any(|s| s == source)
    }
}
