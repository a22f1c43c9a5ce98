//! The cursor the core hands back on a redial: the newest `resourceVersion`
//! seen per kind.

use std::sync::Arc;

use crate::kind::Kind;

/// Where each watched kind's feed stands: the `resourceVersion` of the newest
/// list, event or bookmark of that kind the consumer has seen. A redial
/// watches each kind from its version (no list) while the apiserver still
/// serves it. Cloning is cheap (reference counts).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct K8sCursor {
    versions: [Option<Arc<str>>; Kind::ALL.len()],
}

impl K8sCursor {
    /// The `resourceVersion` to resume `kind` from, if one is known.
    pub fn version(&self, kind: Kind) -> Option<&str> {
        self.versions[kind.index()].as_deref()
    }

    pub(crate) fn get(&self, kind: Kind) -> Option<&Arc<str>> {
        self.versions[kind.index()].as_ref()
    }

    pub(crate) fn set(&mut self, kind: Kind, version: Arc<str>) {
        self.versions[kind.index()] = Some(version);
    }
}
