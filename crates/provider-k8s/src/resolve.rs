//! A [`KindRef`] resolved through API discovery, once per feed of each
//! dial (and again when its kind stops being served): its API resource, its
//! instance ids' prefix, and the rule its objects are read by.

use std::sync::Arc;

use kube::Client;
use kube::api::Api;
use kube::core::{ApiResource, DynamicObject, GroupVersion, GroupVersionKind};
use kube::discovery::{ApiCapabilities, ApiGroup, Discovery, Scope};

use crate::config::K8sConfig;
use crate::error::{ConfigError, DialError};
use crate::fetch::{self, Answer};
use crate::kind::{Kind, KindRef, Repr};

/// A kind as a dial found it served.
#[derive(Clone, Debug)]
pub(crate) struct Served {
    /// What instance ids start with: the built-in workloads' and the core
    /// group's lowercase kind (`deployment`, `pod`), any other kind's
    /// lowercase kind and group (`cluster.postgresql.cnpg.io`): an id never
    /// depends on what else the cluster serves, and is what `kubectl get`
    /// takes (`kubectl get cluster.postgresql.cnpg.io/NAME -n NAMESPACE`).
    pub(crate) prefix: Arc<str>,
    /// Its group, version, kind and plural.
    pub(crate) resource: ApiResource,
    /// How its objects are read.
    pub(crate) rule: Rule,
}

/// How a kind's objects are read: running, and readiness.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Rule {
    /// A built-in workload, with its own rules.
    Builtin(Kind),
    /// A kind with a `/scale` subresource: running while the integer at
    /// this path (the CRD's `specReplicasPath`, split at its dots) is not
    /// 0; readiness by kstatus.
    Scaled(Arc<[String]>),
    /// Any other kind: running while it exists; readiness by kstatus.
    Exists,
}

/// What discovery says of a kind.
#[derive(Debug)]
pub(crate) enum Resolution {
    Served(Served),
    /// Not served (now): the nearest names that are, for the message.
    NotServed {
        nearest: Vec<String>,
    },
}

/// kstatus's kinds with rules of their own (its `legacyTypes`) other than
/// the built-in workloads' and those it takes as always current: lookout
/// does not implement them, so it does not tell their readiness.
const OWN_RULES: &[(&str, &str)] = &[
    ("", "Pod"),
    ("", "Service"),
    ("", "PersistentVolumeClaim"),
    ("apps", "ReplicaSet"),
    ("extensions", "ReplicaSet"),
    ("extensions", "Deployment"),
    ("extensions", "DaemonSet"),
    ("batch", "Job"),
    ("policy", "PodDisruptionBudget"),
    ("apiextensions.k8s.io", "CustomResourceDefinition"),
];

/// How many of the nearest served names an error shows.
const NEAREST: usize = 3;

/// Resolves `kind` on the apiserver `client` talks to. A built-in workload
/// costs no request; `GROUP/VERSION/KIND` one (`/apis/GROUP/VERSION`); a
/// name the aggregated discovery (`/api`, `/apis`); a kind with a scale
/// subresource one more, its CRD's. `readiness`: whether its readiness is
/// to be told (kinds whose kstatus rules lookout lacks are refused then).
pub(crate) async fn resolve(
    client: &Client,
    kind: &KindRef,
    readiness: bool,
) -> Result<Resolution, DialError> {
    let found = match kind.repr() {
        Repr::Builtin(k) => {
            return Ok(Resolution::Served(Served {
                prefix: k.as_str().into(),
                resource: k.api_resource(),
                rule: Rule::Builtin(*k),
            }));
        }
        Repr::Gvk {
            group,
            version,
            kind: name,
        } => by_gvk(client, kind, group, version, name).await?,
        Repr::Name { name, group } => by_name(client, kind, name, group.as_deref()).await?,
    };
    let (resource, caps) = match found {
        Ok(found) => found,
        Err(nearest) => return Ok(Resolution::NotServed { nearest }),
    };
    if caps.scope == Scope::Cluster {
        return Err(DialError::Kind(ConfigError::UnsupportedKind {
            kind: kind.to_string(),
            why: format!(
                "{} is cluster-scoped: lookout watches namespaced workloads (ids KIND/NAMESPACE/NAME)",
                full_name(&resource)
            ),
        }));
    }
    if readiness
        && OWN_RULES
            .iter()
            .any(|&(g, k)| g == resource.group && k == resource.kind)
    {
        return Err(DialError::Kind(ConfigError::UnsupportedKind {
            kind: kind.to_string(),
            why: format!(
                "kstatus reads {} by rules of its own, which lookout does not implement: watch it without readiness",
                full_name(&resource)
            ),
        }));
    }
    let rule = if caps.subresources.iter().any(|(ar, _)| ar.plural == "scale") {
        Rule::Scaled(scale_path(client, &resource).await.map_err(|source| {
            DialError::Discovery {
                kind: kind.to_string(),
                source,
            }
        })?)
    } else {
        Rule::Exists
    };
    let prefix = if resource.group.is_empty() {
        resource.kind.to_ascii_lowercase()
    } else {
        format!("{}.{}", resource.kind.to_ascii_lowercase(), resource.group)
    };
    Ok(Resolution::Served(Served {
        prefix: prefix.into(),
        resource,
        rule,
    }))
}

/// A served resource, or the nearest served names when there is none.
type Found = Result<(ApiResource, ApiCapabilities), Vec<String>>;

/// The served resource `kind` (`GROUP/VERSION/NAME`) names: one request.
async fn by_gvk(
    client: &Client,
    kind: &KindRef,
    group: &str,
    version: &str,
    name: &str,
) -> Result<Found, DialError> {
    let gv = GroupVersion::gv(group, version);
    let found = match kube::discovery::pinned_group(client, &gv).await {
        Ok(g) => g
            .versioned_resources(version)
            .into_iter()
            .find(|(ar, _)| ar.kind == name),
        Err(kube::Error::Api(s)) if s.code == 404 => None,
        Err(source) => {
            return Err(DialError::Discovery {
                kind: kind.to_string(),
                source,
            });
        }
    };
    if let Some(found) = found {
        return Ok(Ok(found));
    }
    let asked = format!("{}.{group}", name.to_ascii_lowercase());
    Ok(Err(nearest_served(client, &asked).await))
}

/// The served resource `kind` (a `name`, in `group` if given) names:
/// the whole discovery.
async fn by_name(
    client: &Client,
    kind: &KindRef,
    name: &str,
    group: Option<&str>,
) -> Result<Found, DialError> {
    let discovery = discover(client)
        .await
        .map_err(|source| DialError::Discovery {
            kind: kind.to_string(),
            source,
        })?;
    let mut matches: Vec<(ApiResource, ApiCapabilities)> = discovery
        .groups()
        .filter(|g| group.is_none_or(|want| g.name() == want))
        .flat_map(ApiGroup::recommended_resources)
        .filter(|(ar, _)| names(ar).any(|n| n == name))
        .collect();
    if matches.len() > 1 {
        let mut found: Vec<String> = matches.iter().map(|(ar, _)| full_name(ar)).collect();
        found.sort();
        return Err(DialError::Kind(ConfigError::AmbiguousKind {
            kind: kind.to_string(),
            found,
        }));
    }
    Ok(matches
        .pop()
        .ok_or_else(|| nearest(&discovery, &kind.to_string())))
}

/// The aggregated discovery (Kubernetes 1.30+), else the classic one.
async fn discover(client: &Client) -> kube::Result<Discovery> {
    match Discovery::new(client.clone()).run_aggregated().await {
        Ok(d) => Ok(d),
        Err(e) => {
            tracing::debug!(error = %e, "aggregated discovery failed: discovering group by group");
            Discovery::new(client.clone()).run().await
        }
    }
}

/// The names `kubectl get` takes for a resource: its plural, its kind
/// lowercased (the singular, for every built-in and CRD).
fn names(ar: &ApiResource) -> impl Iterator<Item = String> + '_ {
    [ar.plural.clone(), ar.kind.to_ascii_lowercase()].into_iter()
}

/// `plural.group` (`plural` for the core group).
fn full_name(ar: &ApiResource) -> String {
    if ar.group.is_empty() {
        ar.plural.clone()
    } else {
        format!("{}.{}", ar.plural, ar.group)
    }
}

/// The served names nearest `asked`, when discovery answers (else none).
async fn nearest_served(client: &Client, asked: &str) -> Vec<String> {
    match discover(client).await {
        Ok(d) => nearest(&d, asked),
        Err(_) => Vec::new(),
    }
}

/// The [`NEAREST`] served `plural.group` names closest to `asked` (by edit
/// distance, to the name with or without its group), among those not too far.
fn nearest(discovery: &Discovery, asked: &str) -> Vec<String> {
    let asked = asked.to_ascii_lowercase();
    // With a group, the whole name is compared; without, the name alone.
    let grouped = asked.contains(['.', '/']);
    let asked_name = asked.split(['.', '/']).next().unwrap_or(&asked).to_owned();
    let mut scored: Vec<(usize, String)> = discovery
        .groups()
        .flat_map(ApiGroup::recommended_resources)
        .map(|(ar, _)| {
            let full = full_name(&ar);
            let score = if grouped {
                let singular = if ar.group.is_empty() {
                    ar.kind.to_ascii_lowercase()
                } else {
                    format!("{}.{}", ar.kind.to_ascii_lowercase(), ar.group)
                };
                distance(&full, &asked).min(distance(&singular, &asked))
            } else {
                names(&ar)
                    .map(|n| distance(&n, &asked_name))
                    .min()
                    .unwrap_or(usize::MAX)
            };
            (score, full)
        })
        .filter(|(score, _)| *score <= asked_name.len().div_ceil(2).max(2))
        .collect();
    scored.sort();
    scored.dedup_by(|a, b| a.1 == b.1);
    scored.into_iter().take(NEAREST).map(|(_, n)| n).collect()
}

/// Levenshtein distance.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1)
                .min(row[j] + 1)
                .min(diagonal + usize::from(ca != cb));
            diagonal = above;
        }
    }
    row[b.len()]
}

/// The `specReplicasPath` of a custom resource's scale subresource, from
/// its CRD, split at its dots; `spec.replicas` for a kind with a scale that
/// is no custom resource (no CRD by that name: a built-in kind, or an
/// aggregated API's).
async fn scale_path(client: &Client, resource: &ApiResource) -> kube::Result<Arc<[String]>> {
    let default = || Arc::from(["spec".to_owned(), "replicas".to_owned()]);
    // Read as a `DynamicObject`: only `spec.versions[].subresources.scale`
    // is wanted, not k8s-openapi's whole CRD schema types in the binary.
    let crd_resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
        "customresourcedefinitions",
    );
    let crds: Api<DynamicObject> = Api::all_with(client.clone(), &crd_resource);
    let name = format!("{}.{}", resource.plural, resource.group);
    // One object, read to the bound of one object in a watch (kube's
    // `Api::get` would read it whole, whatever its size).
    let path = format!("{}/{name}", crds.resource_url());
    let crd = match fetch::get::<DynamicObject>(client, &path, K8sConfig::DEFAULT_MAX_LINE).await {
        Ok(Answer::Read(crd)) => crd,
        Ok(Answer::TooLarge) => {
            return Err(kube::Error::Service(
                format!(
                    "the CRD {name} exceeds {} bytes",
                    K8sConfig::DEFAULT_MAX_LINE
                )
                .into(),
            ));
        }
        Err(kube::Error::Api(s)) if s.code == 404 => return Ok(default()),
        Err(e) => return Err(e),
    };
    let path = crd.data["spec"]["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|v| v["name"].as_str() == Some(resource.version.as_str()))
        .and_then(|v| v["subresources"]["scale"]["specReplicasPath"].as_str());
    Ok(match path {
        Some(p) => p
            .split('.')
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect(),
        None => default(),
    })
}

#[cfg(test)]
mod tests {
    use super::distance;

    #[test]
    fn edit_distance() {
        assert_eq!(distance("clusters", "clusters"), 0);
        assert_eq!(distance("clusterz", "clusters"), 1);
        assert_eq!(distance("", "abc"), 3);
        assert_eq!(distance("kitten", "sitting"), 3);
    }
}
