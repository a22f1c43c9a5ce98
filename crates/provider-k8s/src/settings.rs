//! What every dial of a watch needs ([`Settings`]), shared by the dial, its
//! sessions and their feeds.

use std::sync::Arc;
use std::time::Duration;

use crate::config::InitialList;
use crate::kind::KindRef;

/// What every dial needs, shared by the dial and its sessions.
#[derive(Clone, Debug)]
pub(crate) struct Settings {
    pub(crate) namespace: Option<String>,
    /// Sorted, without duplicates: a kind's place here is its slot in the
    /// cursor and the session.
    pub(crate) kinds: Arc<[KindRef]>,
    pub(crate) label_selector: Option<String>,
    /// Server-side timeout of one watch request, in seconds.
    pub(crate) watch_timeout: u32,
    /// How a kind lists.
    pub(crate) initial_list: InitialList,
    /// A redial relists every kind when the last full list is this old.
    pub(crate) relist_every: Option<Duration>,
    /// Objects carry their readiness ([`K8sConfig::readiness`](crate::K8sConfig::readiness)).
    pub(crate) readiness: bool,
    /// How often a kind that is not served is looked for again.
    pub(crate) rediscover_every: Duration,
    /// The longest watch line read ([`K8sConfig::max_line`](crate::K8sConfig::max_line)).
    pub(crate) max_line: usize,
    /// The longest list page read ([`K8sConfig::max_list_page`](crate::K8sConfig::max_list_page)).
    pub(crate) max_list_page: usize,
}

impl Settings {
    /// The longest list page (or other answer read whole) read: never less
    /// than a watch line, as one object fits either.
    pub(crate) fn max_page(&self) -> usize {
        self.max_list_page.max(self.max_line)
    }
}
