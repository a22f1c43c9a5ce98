//! A built-in workload as lookout reads it off the wire: only the fields it
//! uses (name, namespace, uid, resourceVersion, labels, whether
//! `metadata.deletionTimestamp` is set, `spec.replicas`,
//! `status.desiredNumberScheduled`, and for readiness `metadata.generation`,
//! `status.observedGeneration`, `status.availableReplicas`,
//! `status.readyReplicas`, `status.numberAvailable` and the failures
//! `status.conditions` state, `why.rs`). The rest of each object — its pod
//! template, `managedFields` — is skipped by the parser, not built into a
//! tree: a page of 500 Deployments costs a fraction of what a
//! `DynamicObject` (or the typed `Deployment`) costs. The readiness fields
//! are read in passing; a value that is no integer (or a `status` that is
//! no object, conditions that are no list) does not fail the object, so
//! what parses without readiness parses with it.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::{ApiResource, DynamicResourceScope, Resource};
use lookout_core::{InstanceId, Labels, Listed, Readiness};
use serde::de::DeserializeOwned;
use serde::de::{IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};

use crate::kind::Kind;
use crate::resolve::{Rule, Served};
use crate::why::{self, Failures};

/// A `Deployment`, `StatefulSet` or `DaemonSet`, as far as lookout reads it.
#[derive(Clone, Debug, Default, Deserialize)]
pub(crate) struct Workload {
    /// Only `name`, `namespace`, `uid`, `resourceVersion`, `labels` and
    /// `generation`.
    #[serde(default, deserialize_with = "light_meta")]
    pub(crate) metadata: Metadata,
    /// `None` when the object has no `spec` (or a null one).
    #[serde(default)]
    pub(crate) spec: Option<Spec>,
    /// The counts readiness is decided from (all missing without a status).
    #[serde(default)]
    pub(crate) status: Status,
}

/// The metadata lookout reads: kube's `ObjectMeta` (for [`Resource`]) with
/// only the fields lookout uses, and the generation, read leniently.
#[derive(Clone, Debug, Default)]
pub(crate) struct Metadata {
    /// `name`, `namespace`, `uid`, `resourceVersion`.
    pub(crate) meta: ObjectMeta,
    /// `labels`, decoded straight into the interned set.
    pub(crate) labels: Labels,
    /// `metadata.generation`.
    pub(crate) generation: Int,
    /// `metadata.deletionTimestamp` is set: the object is being deleted
    /// (finalizers, or a foreground deletion, hold it).
    pub(crate) deleting: bool,
}

/// The part of a workload's spec lookout reads.
#[derive(Clone, Debug, Default, Deserialize)]
pub(crate) struct Spec {
    /// Kept as it came: a value that is no integer is logged and skipped.
    #[serde(default)]
    pub(crate) replicas: Option<serde_json::Value>,
}

/// The part of a workload's status readiness is decided from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Status {
    /// `status.observedGeneration`.
    pub(crate) observed_generation: Int,
    /// `status.availableReplicas` (what a `Deployment`'s readiness counts).
    pub(crate) available_replicas: Int,
    /// `status.readyReplicas` (what a `StatefulSet`'s readiness counts).
    pub(crate) ready_replicas: Int,
    /// `status.desiredNumberScheduled` (a `DaemonSet`'s desired pods).
    pub(crate) desired_number_scheduled: Int,
    /// `status.numberAvailable` (what a `DaemonSet`'s readiness counts).
    pub(crate) number_available: Int,
    /// What `status.conditions` says fails (none when it is no list).
    pub(crate) failures: Failures,
}

/// An integer field of the object, read without failing it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Int {
    /// Absent, or `null`.
    #[default]
    Missing,
    /// An integer (one beyond `i64` saturates).
    Value(i64),
    /// Something else: a string, a fraction, an object…
    Unreadable,
}

impl<'de> Deserialize<'de> for Int {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(IntVisitor)
    }
}

struct IntVisitor;

impl<'de> Visitor<'de> for IntVisitor {
    type Value = Int;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_i64<E>(self, v: i64) -> Result<Int, E> {
        Ok(Int::Value(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Int, E> {
        Ok(Int::Value(i64::try_from(v).unwrap_or(i64::MAX)))
    }

    fn visit_f64<E>(self, _: f64) -> Result<Int, E> {
        Ok(Int::Unreadable)
    }

    fn visit_bool<E>(self, _: bool) -> Result<Int, E> {
        Ok(Int::Unreadable)
    }

    fn visit_str<E>(self, _: &str) -> Result<Int, E> {
        Ok(Int::Unreadable)
    }

    fn visit_bytes<E>(self, _: &[u8]) -> Result<Int, E> {
        Ok(Int::Unreadable)
    }

    fn visit_unit<E>(self) -> Result<Int, E> {
        Ok(Int::Missing)
    }

    fn visit_none<E>(self) -> Result<Int, E> {
        Ok(Int::Missing)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Int, D::Error> {
        Int::deserialize(d)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Int, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Int::Unreadable)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Int, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Int::Unreadable)
    }
}

/// The keys of a status lookout reads; any other is skipped unparsed.
#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "camelCase")]
enum StatusKey {
    ObservedGeneration,
    AvailableReplicas,
    ReadyReplicas,
    DesiredNumberScheduled,
    NumberAvailable,
    Conditions,
    #[serde(other)]
    Other,
}

impl<'de> Deserialize<'de> for Status {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(StatusVisitor)
    }
}

struct StatusVisitor;

/// A status that is no object: every count unreadable.
const UNREADABLE: Status = Status {
    observed_generation: Int::Unreadable,
    available_replicas: Int::Unreadable,
    ready_replicas: Int::Unreadable,
    desired_number_scheduled: Int::Unreadable,
    number_available: Int::Unreadable,
    failures: Failures {
        deadline: None,
        replicas: None,
    },
};

impl<'de> Visitor<'de> for StatusVisitor {
    type Value = Status;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Status, A::Error> {
        let mut status = Status::default();
        while let Some(key) = map.next_key::<StatusKey>()? {
            match key {
                StatusKey::ObservedGeneration => status.observed_generation = map.next_value()?,
                StatusKey::AvailableReplicas => status.available_replicas = map.next_value()?,
                StatusKey::ReadyReplicas => status.ready_replicas = map.next_value()?,
                StatusKey::DesiredNumberScheduled => {
                    status.desired_number_scheduled = map.next_value()?;
                }
                StatusKey::NumberAvailable => status.number_available = map.next_value()?,
                // A few small objects: read as a tree (any JSON parses),
                // only what fails kept.
                StatusKey::Conditions => {
                    let conditions: serde_json::Value = map.next_value()?;
                    status.failures = why::workload_failures(&conditions);
                }
                StatusKey::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(status)
    }

    fn visit_unit<E>(self) -> Result<Status, E> {
        Ok(Status::default())
    }

    fn visit_none<E>(self) -> Result<Status, E> {
        Ok(Status::default())
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Status, D::Error> {
        Status::deserialize(d)
    }

    fn visit_i64<E>(self, _: i64) -> Result<Status, E> {
        Ok(UNREADABLE)
    }

    fn visit_u64<E>(self, _: u64) -> Result<Status, E> {
        Ok(UNREADABLE)
    }

    fn visit_f64<E>(self, _: f64) -> Result<Status, E> {
        Ok(UNREADABLE)
    }

    fn visit_bool<E>(self, _: bool) -> Result<Status, E> {
        Ok(UNREADABLE)
    }

    fn visit_str<E>(self, _: &str) -> Result<Status, E> {
        Ok(UNREADABLE)
    }

    fn visit_bytes<E>(self, _: &[u8]) -> Result<Status, E> {
        Ok(UNREADABLE)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Status, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(UNREADABLE)
    }
}

/// The metadata fields lookout reads; every other one is skipped unparsed.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Meta {
    name: Option<String>,
    namespace: Option<String>,
    uid: Option<String>,
    resource_version: Option<String>,
    labels: Option<Labels>,
    #[serde(default)]
    generation: Int,
    #[serde(default)]
    deletion_timestamp: Option<IgnoredAny>,
}

fn light_meta<'de, D: Deserializer<'de>>(d: D) -> Result<Metadata, D::Error> {
    let Some(m) = Option::<Meta>::deserialize(d)? else {
        return Ok(Metadata::default());
    };
    Ok(Metadata {
        meta: ObjectMeta {
            name: m.name,
            namespace: m.namespace,
            uid: m.uid,
            resource_version: m.resource_version,
            ..ObjectMeta::default()
        },
        labels: m.labels.unwrap_or_default(),
        generation: m.generation,
        deleting: m.deletion_timestamp.is_some(),
    })
}

impl Resource for Workload {
    type DynamicType = ApiResource;
    type Scope = DynamicResourceScope;

    fn group(dt: &ApiResource) -> Cow<'_, str> {
        dt.group.as_str().into()
    }

    fn version(dt: &ApiResource) -> Cow<'_, str> {
        dt.version.as_str().into()
    }

    fn kind(dt: &ApiResource) -> Cow<'_, str> {
        dt.kind.as_str().into()
    }

    fn api_version(dt: &ApiResource) -> Cow<'_, str> {
        dt.api_version.as_str().into()
    }

    fn plural(dt: &ApiResource) -> Cow<'_, str> {
        dt.plural.as_str().into()
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata.meta
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata.meta
    }
}

/// An object of a watched kind, as a feed reads it: a built-in workload
/// ([`Workload`], its fields read in passing) or any other kind's
/// (`DynamicObject`).
pub(crate) trait Object:
    Resource<DynamicType = ApiResource, Scope = DynamicResourceScope>
    + Clone
    + fmt::Debug
    + DeserializeOwned
    + Send
    + Sync
    + 'static
{
    /// The object as the core sees it, with its readiness (and, running,
    /// its failure) when `with_readiness`, and why when it does not run;
    /// `None` (logged) when it cannot be read.
    fn listed(self, served: &Served, with_readiness: bool) -> Option<Listed>;

    /// Whether `metadata.deletionTimestamp` is set: the apiserver was asked
    /// to delete it, and finalizers (or a foreground deletion) hold it.
    fn deleting(&self) -> bool;

    /// [`listed`](Self::listed), and whether it is being deleted.
    fn seen(self, served: &Served, with_readiness: bool) -> Option<Seen> {
        let deleting = self.deleting();
        self.listed(served, with_readiness)
            .map(|listed| Seen { listed, deleting })
    }
}

/// An object as a feed hands it to the session: as the core sees it, and
/// whether it is being deleted (which the session tells as `Stopping`
/// while it runs).
#[derive(Debug)]
pub(crate) struct Seen {
    pub(crate) listed: Listed,
    pub(crate) deleting: bool,
}

impl Object for Workload {
    fn deleting(&self) -> bool {
        self.metadata.deleting
    }

    fn listed(self, served: &Served, with_readiness: bool) -> Option<Listed> {
        let Rule::Builtin(kind) = served.rule else {
            tracing::warn!(kind = %served.prefix, "a built-in reader for a kind that is not: skipped");
            return None;
        };
        listed(kind, &served.prefix, self, with_readiness)
    }
}

/// The instance id and uid of an object whose kind's ids start with
/// `prefix`; `None` (logged) when it has no name or namespace.
pub(crate) fn identify(prefix: &str, meta: &ObjectMeta) -> Option<(InstanceId, Option<Arc<str>>)> {
    let (Some(ns), Some(name)) = (meta.namespace.as_deref(), meta.name.as_deref()) else {
        tracing::warn!(kind = %prefix, name = ?meta.name, namespace = ?meta.namespace, "object without name or namespace skipped");
        return None;
    };
    let id = InstanceId::new(format!("{prefix}/{ns}/{name}"));
    Some((id, meta.uid.as_deref().map(Arc::from)))
}

/// A workload as the core sees it (its labels moved out of it), with its
/// readiness when `with_readiness`; `None` (logged) when it cannot be read.
pub(crate) fn listed(
    kind: Kind,
    prefix: &str,
    mut obj: Workload,
    with_readiness: bool,
) -> Option<Listed> {
    let (id, uid) = identify(prefix, &obj.metadata.meta)?;
    let replicas = if kind == Kind::DaemonSet {
        // A DaemonSet wants a pod per eligible node, as its controller
        // counted them.
        match obj.status.desired_number_scheduled {
            Int::Missing => 0,
            Int::Value(n) => n,
            Int::Unreadable => {
                tracing::warn!(%id, "object with unreadable status.desiredNumberScheduled skipped");
                return None;
            }
        }
    } else {
        let replicas = obj.spec.as_ref().and_then(|spec| spec.replicas.as_ref());
        match replicas {
            // Unset: the apiserver defaults it to 1.
            None | Some(serde_json::Value::Null) => 1,
            Some(n) => {
                let Some(n) = n.as_i64() else {
                    tracing::warn!(%id, replicas = %n, "object with unreadable spec.replicas skipped");
                    return None;
                };
                n
            }
        }
    };
    let readiness = with_readiness.then(|| {
        readiness(
            kind,
            &id,
            count(replicas),
            obj.metadata.generation,
            &obj.status,
        )
    });
    let running = replicas > 0;
    // Running: what its conditions say fails (readiness watched only; a
    // progress deadline is a Deployment's). Not running: it wants no
    // replica, a requested stop.
    let reason = if running {
        with_readiness
            .then(|| obj.status.failures.of(kind == Kind::Deployment))
            .flatten()
    } else {
        Some(why::stopped())
    };
    Some(
        Listed::new(id, running)
            .uid(uid)
            .labels(std::mem::take(&mut obj.metadata.labels))
            .readiness(readiness)
            .reason(reason),
    )
}

/// A replica count as lookout's `u32`: a negative one is 0, one beyond
/// `u32` saturates.
pub(crate) fn count(n: i64) -> u32 {
    u32::try_from(n.max(0)).unwrap_or(u32::MAX)
}

/// The readiness of a workload of `kind` that wants `desired` replicas (the
/// crate docs' table): a `Deployment` counts `status.availableReplicas`, a
/// `StatefulSet` `status.readyReplicas`, a `DaemonSet`
/// `status.numberAvailable`; the controller has observed the spec when
/// `status.observedGeneration` ≥ `metadata.generation` (for a `StatefulSet`
/// and a `DaemonSet`, also > 0). A missing field is 0; an unreadable one
/// (logged) counts as not observed, or as no replica.
pub(crate) fn readiness(
    kind: Kind,
    id: &InstanceId,
    desired: u32,
    generation: Int,
    status: &Status,
) -> Readiness {
    let counted = match kind {
        Kind::StatefulSet => status.ready_replicas,
        Kind::DaemonSet => status.number_available,
        _ => status.available_replicas,
    };
    if [generation, status.observed_generation, counted].contains(&Int::Unreadable) {
        tracing::warn!(%id, ?generation, ?status, "unreadable readiness field: counted as not ready");
    }
    let observed = match (value(generation), value(status.observed_generation)) {
        (Some(g), Some(o)) => o >= g && (kind == Kind::Deployment || o > 0),
        _ => false,
    };
    Readiness::replicas(desired, value(counted).map_or(0, count), observed)
}

/// A field's value: missing is 0, unreadable `None`.
fn value(field: Int) -> Option<i64> {
    match field {
        Int::Missing => Some(0),
        Int::Value(v) => Some(v),
        Int::Unreadable => None,
    }
}
