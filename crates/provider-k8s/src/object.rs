//! A workload as lookout reads it off the wire: only the fields it uses
//! (name, namespace, uid, resourceVersion, labels, `spec.replicas`). The rest
//! of each object — its pod template, `managedFields`, status — is skipped
//! by the parser, not built into a tree: a page of 500 Deployments costs a
//! fraction of what a `DynamicObject` (or the typed `Deployment`) costs.

use std::borrow::Cow;
use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::{ApiResource, DynamicResourceScope, Resource};
use serde::{Deserialize, Deserializer};

/// A `Deployment` or `StatefulSet`, as far as lookout reads it.
#[derive(Clone, Debug, Default, Deserialize)]
pub(crate) struct Workload {
    /// Only `name`, `namespace`, `uid`, `resourceVersion` and `labels`.
    #[serde(default, deserialize_with = "light_meta")]
    pub(crate) metadata: ObjectMeta,
    /// `None` when the object has no `spec` (or a null one).
    #[serde(default)]
    pub(crate) spec: Option<Spec>,
}

/// The part of a workload's spec lookout reads.
#[derive(Clone, Debug, Default, Deserialize)]
pub(crate) struct Spec {
    /// Kept as it came: a value that is no integer is logged and skipped.
    #[serde(default)]
    pub(crate) replicas: Option<serde_json::Value>,
}

/// The metadata fields lookout reads; every other one is skipped unparsed.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Meta {
    name: Option<String>,
    namespace: Option<String>,
    uid: Option<String>,
    resource_version: Option<String>,
    labels: Option<BTreeMap<String, String>>,
}

fn light_meta<'de, D: Deserializer<'de>>(d: D) -> Result<ObjectMeta, D::Error> {
    let Some(m) = Option::<Meta>::deserialize(d)? else {
        return Ok(ObjectMeta::default());
    };
    Ok(ObjectMeta {
        name: m.name,
        namespace: m.namespace,
        uid: m.uid,
        resource_version: m.resource_version,
        labels: m.labels,
        ..ObjectMeta::default()
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
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}
