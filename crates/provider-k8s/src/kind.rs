//! The kinds of workload lookout watches ([`Kind`]): their names, their
//! place in a cursor, their API resource.

use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use kube::core::ApiResource;

/// A kind of Kubernetes workload that lookout watches.
///
/// `#[non_exhaustive]`: more built-in kinds will be added (`DaemonSet`), so
/// a `match` on it needs a `_` arm. Kinds named by the program
/// (`GROUP/VERSION/KIND`, a custom resource) are to come as options of
/// [`K8sConfig`](crate::K8sConfig) of their own, leaving `Kind` `Copy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Kind {
    /// `apps/v1` `Deployment`.
    Deployment,
    /// `apps/v1` `StatefulSet`.
    StatefulSet,
}

impl Kind {
    /// Every built-in kind, in id order (a slice: it grows with the kinds).
    pub const ALL: &'static [Kind] = &[Kind::Deployment, Kind::StatefulSet];

    /// Its place in [`ALL`](Self::ALL).
    pub(crate) fn index(self) -> usize {
        match self {
            Self::Deployment => 0,
            Self::StatefulSet => 1,
        }
    }

    /// The lowercase name, as it starts an instance id: `deployment`, `statefulset`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Deployment => "deployment",
            Self::StatefulSet => "statefulset",
        }
    }

    pub(crate) fn api_resource(self) -> ApiResource {
        match self {
            Self::Deployment => ApiResource::erase::<Deployment>(&()),
            Self::StatefulSet => ApiResource::erase::<StatefulSet>(&()),
        }
    }
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
