//! The kinds lookout watches: the built-in workloads ([`Kind`]) with rules
//! of their own, and any kind as the program names it ([`KindRef`]), which
//! each dial resolves through API discovery (`resolve.rs`).

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, StatefulSet};
use kube::core::ApiResource;

use crate::error::ConfigError;

/// A built-in workload kind, with lookout's own rules for running and
/// readiness (the crate docs' tables). Any other kind, custom resources
/// included, is named by a [`KindRef`].
///
/// `#[non_exhaustive]`: more built-in kinds may be added, so a `match` on
/// it needs a `_` arm.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Kind {
    /// `apps/v1` `Deployment`.
    Deployment,
    /// `apps/v1` `StatefulSet`.
    StatefulSet,
    /// `apps/v1` `DaemonSet`.
    DaemonSet,
}

impl Kind {
    /// Every built-in kind, in declaration order (a slice: it grows with the kinds).
    pub const ALL: &'static [Kind] = &[Kind::Deployment, Kind::StatefulSet, Kind::DaemonSet];

    /// The lowercase name, as it starts an instance id: `deployment`,
    /// `statefulset`, `daemonset`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Deployment => "deployment",
            Self::StatefulSet => "statefulset",
            Self::DaemonSet => "daemonset",
        }
    }

    /// The kind as the API spells it: `Deployment`, `StatefulSet`, `DaemonSet`.
    fn api_kind(self) -> &'static str {
        match self {
            Self::Deployment => "Deployment",
            Self::StatefulSet => "StatefulSet",
            Self::DaemonSet => "DaemonSet",
        }
    }

    pub(crate) fn api_resource(self) -> ApiResource {
        match self {
            Self::Deployment => ApiResource::erase::<Deployment>(&()),
            Self::StatefulSet => ApiResource::erase::<StatefulSet>(&()),
            Self::DaemonSet => ApiResource::erase::<DaemonSet>(&()),
        }
    }

    /// The built-in kind `name` names as `kubectl` reads it: the kind, its
    /// plural or its short name, any case, optionally `.apps`.
    fn from_name(name: &str, group: Option<&str>) -> Option<Self> {
        if group.is_some_and(|g| g != "apps") {
            return None;
        }
        match name {
            "deployment" | "deployments" | "deploy" => Some(Self::Deployment),
            "statefulset" | "statefulsets" | "sts" => Some(Self::StatefulSet),
            "daemonset" | "daemonsets" | "ds" => Some(Self::DaemonSet),
            _ => None,
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A kind to watch, as the program names it; parsed as `lookout k8s --kind`
/// parses its value ([`KindRef::parse`], or `str::parse`):
///
/// | form | example | resolved |
/// |---|---|---|
/// | a built-in workload: kind, plural or short name, any case | `deployment`, `statefulsets`, `ds`, `daemonsets.apps`, `apps/v1/DaemonSet` | without a request: [`Kind`] |
/// | `GROUP/VERSION/KIND` (`VERSION/KIND` for the core group) | `postgresql.cnpg.io/v1/Cluster` | by the discovery of that group version (one request) |
/// | `NAME` or `NAME.GROUP`, where `NAME` is the kind, its singular or its plural, any case (as `kubectl get` takes it) | `clusters`, `cluster.postgresql.cnpg.io` | by the apiserver's aggregated discovery (one request each for `/api` and `/apis`) |
///
/// Each dial resolves it anew, so a custom resource definition that
/// changes (or goes, or comes) is read as it is now. Cloning is cheap.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KindRef(Repr);

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Repr {
    /// A built-in workload.
    Builtin(Kind),
    /// `GROUP/VERSION/KIND`.
    Gvk {
        group: Arc<str>,
        version: Arc<str>,
        kind: Arc<str>,
    },
    /// A resource name (kind, singular or plural, lowercased), and maybe its group.
    Name {
        name: Arc<str>,
        group: Option<Arc<str>>,
    },
}

impl KindRef {
    /// Reads `text` (the forms in the table above). Only its shape is
    /// checked here; whether the apiserver serves it, each dial finds out
    /// (and [`check`](crate::check) says at once).
    pub fn parse(text: &str) -> Result<Self, ConfigError> {
        let bad = |why: &'static str| ConfigError::BadKind {
            kind: text.to_owned(),
            why,
        };
        let t = text.trim();
        if t.is_empty() {
            return Err(bad("it is empty"));
        }
        if t.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(bad("it holds a space"));
        }
        if t.contains('/') {
            let parts: Vec<&str> = t.split('/').collect();
            let (group, version, kind) = match parts[..] {
                [group, version, kind] if !group.is_empty() => (group, version, kind),
                [version, kind] => ("", version, kind),
                _ => return Err(bad("expected GROUP/VERSION/KIND, or VERSION/KIND")),
            };
            if version.is_empty() || kind.is_empty() {
                return Err(bad("expected GROUP/VERSION/KIND, or VERSION/KIND"));
            }
            if group == "apps"
                && version == "v1"
                && let Some(k) = Kind::ALL.iter().copied().find(|k| k.api_kind() == kind)
            {
                return Ok(Self(Repr::Builtin(k)));
            }
            return Ok(Self(Repr::Gvk {
                group: group.into(),
                version: version.into(),
                kind: kind.into(),
            }));
        }
        let lower = t.to_ascii_lowercase();
        let (name, group) = match lower.split_once('.') {
            Some((name, group)) => (name, Some(group)),
            None => (lower.as_str(), None),
        };
        if name.is_empty() || group == Some("") {
            return Err(bad("expected NAME or NAME.GROUP"));
        }
        if let Some(k) = Kind::from_name(name, group) {
            return Ok(Self(Repr::Builtin(k)));
        }
        Ok(Self(Repr::Name {
            name: name.into(),
            group: group.map(Into::into),
        }))
    }

    /// The built-in kind it names, if it names one.
    pub fn builtin(&self) -> Option<Kind> {
        match self.0 {
            Repr::Builtin(k) => Some(k),
            _ => None,
        }
    }

    pub(crate) fn repr(&self) -> &Repr {
        &self.0
    }
}

impl From<Kind> for KindRef {
    fn from(kind: Kind) -> Self {
        Self(Repr::Builtin(kind))
    }
}

impl FromStr for KindRef {
    type Err = ConfigError;

    fn from_str(s: &str) -> Result<Self, ConfigError> {
        Self::parse(s)
    }
}

impl fmt::Display for KindRef {
    /// The canonical form: `deployment`, `GROUP/VERSION/KIND`, `NAME[.GROUP]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Repr::Builtin(k) => f.write_str(k.as_str()),
            Repr::Gvk {
                group,
                version,
                kind,
            } if group.is_empty() => write!(f, "{version}/{kind}"),
            Repr::Gvk {
                group,
                version,
                kind,
            } => write!(f, "{group}/{version}/{kind}"),
            Repr::Name { name, group: None } => f.write_str(name),
            Repr::Name {
                name,
                group: Some(group),
            } => write!(f, "{name}.{group}"),
        }
    }
}
