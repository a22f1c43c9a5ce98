//! The cursor the core hands back on a redial: the newest `resourceVersion`
//! seen per kind.

use std::sync::Arc;

use crate::kind::KindRef;

/// Where each watched kind's feed stands: the `resourceVersion` of the newest
/// list, event or bookmark of that kind the consumer has seen. A redial
/// watches each kind from its version (no list) while the apiserver still
/// serves it. Cloning is cheap (reference counts).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct K8sCursor {
    /// The watched kinds, in the dial's order (sorted, without duplicates).
    kinds: Arc<[KindRef]>,
    /// Each one's version, by its place in `kinds`.
    versions: Vec<Option<Arc<str>>>,
}

impl K8sCursor {
    /// A cursor of `kinds` (each watched kind, in the dial's order), no
    /// version known.
    pub(crate) fn new(kinds: Arc<[KindRef]>) -> Self {
        let versions = vec![None; kinds.len()];
        Self { kinds, versions }
    }

    /// The `resourceVersion` to resume `kind` from, if one is known (`None`
    /// too for a kind not watched).
    pub fn version(&self, kind: impl Into<KindRef>) -> Option<&str> {
        let kind = kind.into();
        let slot = self.kinds.iter().position(|k| *k == kind)?;
        self.versions.get(slot)?.as_deref()
    }

    pub(crate) fn get(&self, slot: usize) -> Option<&Arc<str>> {
        self.versions.get(slot)?.as_ref()
    }

    pub(crate) fn set(&mut self, slot: usize, version: Arc<str>) {
        if let Some(v) = self.versions.get_mut(slot) {
            *v = Some(version);
        }
    }

    pub(crate) fn clear(&mut self, slot: usize) {
        if let Some(v) = self.versions.get_mut(slot) {
            *v = None;
        }
    }
}
