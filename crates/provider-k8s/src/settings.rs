//! What every dial of a watch needs ([`Settings`]), shared by the dial, its
//! sessions and their feeds.

use std::time::Duration;

use crate::config::InitialList;
use crate::kind::Kind;

/// What every dial needs, shared by the dial and its sessions.
#[derive(Clone, Debug)]
pub(crate) struct Settings {
    pub(crate) namespace: Option<String>,
    pub(crate) kinds: Vec<Kind>,
    pub(crate) label_selector: Option<String>,
    /// Server-side timeout of one watch request, in seconds.
    pub(crate) watch_timeout: u32,
    /// How a kind lists.
    pub(crate) initial_list: InitialList,
    /// A redial relists every kind when the last full list is this old.
    pub(crate) relist_every: Option<Duration>,
    /// Objects carry their readiness ([`K8sConfig::readiness`](crate::K8sConfig::readiness)).
    pub(crate) readiness: bool,
}
